"""Lambda (each function in an interpreter of its own, emulator/functions.py), DataSync (the emulator's stager),
Service Quotas (SageMaker's training quotas) and FSx data repository associations in the stand-in."""

from __future__ import annotations

import json
import time
import traceback
from typing import Any

from .hooks import HOOKS, ServiceRefusal


def patch_lambda() -> None:
    """Every Python function runs from its deployed code in an execution environment of its own
    (emulator/functions.py), with the stand-in's additions to its environment (HOOKS.function_env)."""
    from moto.awslambda.models import LambdaFunction

    from ..functions import RUNTIME_SERVICE

    original = LambdaFunction._invoke_lambda

    def _invoke_lambda(self, event=None):
        if not (getattr(self, "run_time", "") or "").startswith("python"):
            return original(self, event)
        fault = function_fault if HOOKS.api_fault is not None else None
        result = RUNTIME_SERVICE.invoke(self, event, HOOKS.function_env, fault=fault)
        return result.payload, result.error, result.logs

    LambdaFunction._invoke_lambda = _invoke_lambda


def function_fault(service_id: str, operation: str, request) -> tuple[int, dict[str, str], bytes] | None:
    """HOOKS.api_fault for a call a function makes in its own interpreter: (status, headers, body) of the error the
    service sends, in its protocol, or None."""
    from .faults import error_answer

    answer = HOOKS.api_fault(service_id, operation, request) if HOOKS.api_fault is not None else None
    if answer is None:
        return None
    status, code, message = answer
    headers, body = error_answer(service_id, code, message, request.method)
    return status, headers, body


def datasync_options(options: dict | None) -> dict:
    """A task's Options as DataSync accepts them, else ValueError: "If you set this parameter to REMOVE, you can't set
    TransferMode to ALL" (https://docs.aws.amazon.com/datasync/latest/userguide/API_Options.html)."""
    options = dict(options or {})
    if options.get("PreserveDeletedFiles") == "REMOVE" and options.get("TransferMode") == "ALL":
        raise ValueError("PreserveDeletedFiles REMOVE cannot be used with TransferMode ALL: DataSync does not scan the "
                         "destination when it transfers all data, and does not know what to delete")
    return options

def patch_datasync() -> None:
    """A started task execution runs the project's stager: at once, or after HOOKS.datasync_seconds of
    stand-in time (TRANSFERRING until then, as a long copy into EFS is); it ends SUCCESS or ERROR.
    DescribeLocationEfs (moto has no EFS locations: the stand-in's CloudFormation adds them) answers."""
    from moto.datasync.responses import DataSyncResponse

    def finish(execution, task_arn: str, pattern: str, overrides: dict) -> None:
        try:
            HOOKS.stager(task_arn, pattern, overrides)
            execution.status = "SUCCESS"
        except Exception:
            HOOKS.errors.append(traceback.format_exc())
            execution.status = "ERROR"

    def settle(backend, task) -> None:
        """The task's current execution, if it has ended (its transfer time up, or SUCCESS or ERROR), frees the task
        (moto frees it only once an execution is described SUCCESS, and never after ERROR)."""
        current = backend.task_executions.get(task.current_task_execution_arn or "")
        if current is None:
            return
        running = DATASYNC_RUNNING.get(current.arn)
        if running is not None and (time.monotonic() - running[0]) / max(HOOKS.time_scale, 1e-9) >= HOOKS.datasync_seconds:
            DATASYNC_RUNNING.pop(current.arn)
            finish(current, *running[1:])
        if current.status in ("SUCCESS", "ERROR"):
            task.status, task.current_task_execution_arn = "AVAILABLE", None

    def launch(backend, execution, task_arn: str, pattern: str, overrides: dict) -> None:
        backend.tasks[task_arn].current_task_execution_arn = execution.arn
        backend.tasks[task_arn].status = "RUNNING"
        if HOOKS.stager is not None:
            if HOOKS.datasync_seconds > 0:
                execution.status = "TRANSFERRING"
                DATASYNC_RUNNING[execution.arn] = (time.monotonic(), task_arn, pattern, overrides)
            else:
                finish(execution, task_arn, pattern, overrides)

    def start_task_execution(self) -> str:
        task_arn = self._get_param("TaskArn")
        includes = self._get_param("Includes") or []
        overrides = self._get_param("OverrideOptions") or {}
        from moto.datasync.exceptions import InvalidRequestException
        from moto.datasync.models import TaskExecution

        backend = self.datasync_backend
        try:   # the task's options with the execution's overrides, as DataSync takes them
            datasync_options({**(backend._get_task(task_arn).metadata.get("Options") or {}), **overrides})
        except ValueError as err:
            raise InvalidRequestException(str(err)) from None
        pattern = "|".join(f["Value"] for f in includes if f.get("FilterType") == "SIMPLE_PATTERN")
        task = backend._get_task(task_arn)
        settle(backend, task)
        if task.status != "AVAILABLE":
            # DescribeTaskExecution, StartTime: "For queued tasks, LaunchTime is typically later than StartTime because
            # previously queued tasks must finish running before newer tasks can begin" (DataSync API reference); its
            # Status "QUEUED". A second execution of a running task waits its turn; moto refused it (InvalidRequest).
            backend.arn_counter += 1
            execution = TaskExecution(task_arn, arn_counter=backend.arn_counter)
            execution.status = "QUEUED"
            backend.task_executions[execution.arn] = execution
            DATASYNC_QUEUED.setdefault(task_arn, []).append((execution.arn, pattern, overrides))
            return json.dumps({"TaskExecutionArn": execution.arn})
        arn = backend.start_task_execution(task_arn)
        launch(backend, backend.task_executions[arn], task_arn, pattern, overrides)
        return json.dumps({"TaskExecutionArn": arn})

    def describe_location_efs(self) -> str:
        location = self.datasync_backend._get_location(self._get_param("LocationArn"), typ="EFS")
        props = location.metadata
        return json.dumps({"LocationArn": location.arn, "LocationUri": location.uri,
                           "AccessPointArn": props.get("AccessPointArn"),
                           "FileSystemAccessRoleArn": props.get("FileSystemAccessRoleArn"),
                           "InTransitEncryption": props.get("InTransitEncryption")})

    original_describe = DataSyncResponse.describe_task_execution

    def describe_task_execution(self) -> str:
        # (moto's own describe moves an execution one status further at every call: a copy that is still
        # running is answered here, as TRANSFERRING, until its time is up)
        arn = self._get_param("TaskExecutionArn")
        backend = self.datasync_backend
        queued = backend._get_task_execution(arn)
        if queued.status == "QUEUED":   # its turn comes when the execution before it has ended
            task = backend._get_task(queued.task_arn)
            settle(backend, task)
            if task.status != "AVAILABLE":
                return json.dumps({"TaskExecutionArn": arn, "Status": "QUEUED"})
            waiting = DATASYNC_QUEUED.get(queued.task_arn, [])
            entry = next(e for e in waiting if e[0] == arn)
            waiting.remove(entry)
            queued.status = queued.TASK_EXECUTION_INTERMEDIATE_STATES[0]
            launch(backend, queued, queued.task_arn, entry[1], entry[2])
            if arn not in DATASYNC_RUNNING and queued.status in ("SUCCESS", "ERROR"):
                return json.dumps({"TaskExecutionArn": arn, "Status": queued.status})
        if arn in DATASYNC_RUNNING:
            started, task_arn, pattern, overrides = DATASYNC_RUNNING[arn]
            execution = self.datasync_backend._get_task_execution(arn)
            if execution.status not in ("ERROR", "SUCCESS") and \
                    (time.monotonic() - started) / max(HOOKS.time_scale, 1e-9) < HOOKS.datasync_seconds:
                return json.dumps({"TaskExecutionArn": arn, "Status": "TRANSFERRING"})
            DATASYNC_RUNNING.pop(arn)
            if execution.status not in ("ERROR", "SUCCESS"):
                finish(execution, task_arn, pattern, overrides)
        return original_describe(self)

    original_describe_task = DataSyncResponse.describe_task

    def describe_task(self) -> str:
        settle(self.datasync_backend, self.datasync_backend._get_task(self._get_param("TaskArn")))
        return original_describe_task(self)

    DataSyncResponse.start_task_execution = start_task_execution
    DataSyncResponse.describe_task_execution = describe_task_execution
    DataSyncResponse.describe_task = describe_task
    DataSyncResponse.describe_location_efs = describe_location_efs


DATASYNC_RUNNING: dict[str, tuple[float, str, str, dict]] = {}
DATASYNC_QUEUED: dict[str, list[tuple[str, str, dict]]] = {}   # task -> its executions waiting their turn


def patch_efs_size() -> None:
    """DescribeFileSystems' SizeInBytes from what the stand-in's EFS holds (moto reports 0 bytes always)."""
    from moto.efs.models import FileSystem

    original = FileSystem.size_in_bytes

    def size_in_bytes(self):
        measured = HOOKS.efs_size(self.file_system_id) if HOOKS.efs_size is not None else None
        return {**original.fget(self), **measured} if measured else original.fget(self)

    FileSystem.size_in_bytes = property(size_in_bytes)


def patch_service_quotas() -> None:
    """SageMaker's training quotas, as ListAWSDefaultServiceQuotas and ListServiceQuotas list them."""
    import hashlib

    from moto.servicequotas.responses import ServiceQuotasResponse

    def _fsx(self, applied: bool) -> list[dict[str, Any]]:
        # "Following are the quotas for Amazon FSx for Lustre per AWS account, per AWS Region, which you can increase
        # ... Lustre Scratch storage capacity 100800 ... Lustre Persistent 2 file storage capacity 100800" (GiB; FSx for
        # Lustre User Guide, limits.html), under the names and codes Service Quotas lists (provisioning.FSX_QUOTAS).
        from ...core.facts.storage import FSX_QUOTA_DEFAULT_GIB, FSX_QUOTAS
        return [{"ServiceCode": "fsx", "ServiceName": "Amazon FSx", "QuotaCode": code, "QuotaName": name,
                 "QuotaArn": f"arn:aws:servicequotas:{self.region}:{self.current_account}:fsx/{code}",
                 "Value": HOOKS.fsx_quotas.get(name, FSX_QUOTA_DEFAULT_GIB) if applied else FSX_QUOTA_DEFAULT_GIB,
                 "Unit": "None", "Adjustable": True, "GlobalQuota": False} for code, name in sorted(FSX_QUOTAS.values())]

    def _page(self, applied: bool) -> str:
        params = json.loads(self.body or "{}")
        service = params.get("ServiceCode")
        if service not in ("sagemaker", "fsx"):
            raise NotImplementedError(f"the stand-in answers Service Quotas for sagemaker and fsx only, not {service}")
        names = sorted(HOOKS.quotas) if service == "sagemaker" else []
        quotas = _fsx(self, applied) if service == "fsx" else []
        for name in names:
            code = "L-" + hashlib.sha256(name.encode()).hexdigest()[:8].upper()
            # AWS's default for GPU training is 0 in many accounts; the applied value is the lab's.
            default = 0.0 if name.startswith(("ml.p", "ml.g")) else 2.0
            quotas.append({"ServiceCode": "sagemaker", "ServiceName": "Amazon SageMaker", "QuotaCode": code,
                           "QuotaArn": f"arn:aws:servicequotas:{self.region}:{self.current_account}:sagemaker/{code}",
                           "QuotaName": name, "Value": HOOKS.quotas[name] if applied else default,
                           "Unit": "None", "Adjustable": True, "GlobalQuota": False})
        start = int(params.get("NextToken") or 0)
        size = int(params.get("MaxResults") or 100)
        body: dict[str, Any] = {"Quotas": quotas[start:start + size]}
        if start + size < len(quotas):
            body["NextToken"] = str(start + size)
        return json.dumps(body)

    ServiceQuotasResponse.list_aws_default_service_quotas = lambda self: _page(self, applied=False)
    ServiceQuotasResponse.list_service_quotas = lambda self: _page(self, applied=True)


def patch_fsx_repository() -> None:
    """DescribeDataRepositoryAssociations / DescribeDataRepositoryTasks from the emulator's FSx model."""
    from moto.fsx.responses import FSxResponse

    def _answer(self, key: str) -> str:
        associations, tasks = HOOKS.fsx_repository() if HOOKS.fsx_repository else ([], [])
        params = json.loads(self.body or "{}")
        wanted = {v for f in params.get("Filters", []) if f.get("Name") == "file-system-id" for v in f.get("Values", [])}
        items = associations if key == "Associations" else tasks
        if wanted:
            items = [i for i in items if i.get("FileSystemId") in wanted]
        return json.dumps({key: items}, default=str)

    FSxResponse.describe_data_repository_associations = lambda self: _answer(self, "Associations")

    # DescribeFileSystems' AdministrativeActions (moto keeps none): the capacity updates the stand-in's CloudFormation
    # made, which decide when FSx may grow again (providers/file_systems.py FsxFileSystem.update).
    from moto.fsx.models import FileSystem
    if not getattr(FileSystem.to_dict, "dslab_actions", False):
        plain = FileSystem.to_dict

        def to_dict(self) -> dict:
            out = plain(self)
            if getattr(self, "administrative_actions", None):
                out["AdministrativeActions"] = self.administrative_actions
            return out
        to_dict.dslab_actions = True  # type: ignore[attr-defined]
        FileSystem.to_dict = to_dict
    FSxResponse.describe_data_repository_tasks = lambda self: _answer(self, "DataRepositoryTasks")

    def create_data_repository_task(self) -> str:
        from moto.core.exceptions import JsonRESTError
        params = json.loads(self.body or "{}")
        if HOOKS.fsx_create_task is None:
            raise NotImplementedError("CreateDataRepositoryTask: no emulated FSx association")
        try:
            return json.dumps({"DataRepositoryTask": HOOKS.fsx_create_task(params)}, default=str)
        except ServiceRefusal as refusal:
            raise JsonRESTError(refusal.code, refusal.message) from None

    FSxResponse.create_data_repository_task = create_data_repository_task


def patch_cloudtrail_lookup() -> None:
    """LookupEvents, which moto lacks: the pinned CDK CLI asks CloudTrail for the control-plane errors
    behind a failed deploy, twice, and moto's 500 makes its SDK retry for ~25 s before it gives up.
    CloudTrail API reference, LookupEvents: "Looks up management events ... that are captured by
    CloudTrail" and answers "Events: A list of events returned based on the lookup attributes specified".
    The stand-in captures no management events, so that list is empty (validated against botocore's model)."""
    from moto.cloudtrail.responses import CloudTrailResponse

    CloudTrailResponse.lookup_events = lambda self: json.dumps({"Events": []})
