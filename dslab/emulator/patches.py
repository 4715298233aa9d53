"""What the embedded AWS stand-in (moto, pinned) lacks, closed by project code.

- ``sagemaker:createTrainingJob.sync``: moto's Step Functions engine refuses ``.sync`` for SageMaker;
  a service task here creates the job, then polls DescribeTrainingJob until it ends, as AWS does:
  Completed returns the description, Failed/Stopped fails the state with ``States.TaskFailed``.
- Training jobs: moto marks a job Completed at creation. Here a created job is InProgress and is
  handed to a job executor (the local container runner, or a scripted executor in tests); its real
  outcome — status, transitions, billable time, failure reason, metrics — is what DescribeTrainingJob
  then returns.
- Lambda: moto runs functions in Docker, which these machines lack. The workflow's functions are the
  ``dslab`` package itself, so they run in-process with the function's environment.
- DataSync: a started task execution runs the project's stager (S3 objects copied into EFS's
  stand-in folder) and ends SUCCESS or ERROR.
- CloudFormation: the stand-in's own engine (``cloudformation/``) replaces moto's: change sets,
  exports and imports, asynchronous operations and their statuses, every resource provisioned.
- ``aws-sdk:s3:getObject``: Step Functions returns the object's Body as text; moto hands back a
  stream, which no intrinsic can read. The body is read into a string, as AWS does.
- Time: Wait states and retry intervals are compressed by ``time_scale`` so a test need not wait
  minutes; the state-machine definition itself is unchanged.

Limits, names and lifecycles AWS enforces and the product depends on (moto copies API shapes only):
- 256 KiB per state input and output; ``States.DataLimitExceeded`` (and ``States.Runtime``) are
  terminal: ``States.ALL`` does not catch them. The largest payload seen is recorded.
- History events per execution are counted (AWS fails an execution at 25,000).
- SageMaker API errors reach the state machine as Step Functions names them:
  ``SageMaker.<Modelled>Exception`` or ``SageMaker.AmazonSageMakerException`` with the service's
  error code in the Cause. CreateTrainingJob enforces the account's training quotas, with SageMaker's
  own ResourceLimitExceeded message; tests can inject throttling and validation errors.
- Service Quotas answers SageMaker's per-instance-type training quotas (list calls, paginated).
- FSx data repository associations and their S3 metadata import task, which finishes some
  (stand-in) time after the file system exists.
- Bucket policies are evaluated as for an HTTPS request, and a statement whose condition does not
  hold does not apply (moto denies on any condition it cannot evaluate).

All patches are installed once per process and do nothing unless an emulator has set its hooks.
"""

from __future__ import annotations

import functools
import importlib
import io
import json
import threading
import time
import traceback
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from typing import Any, Callable

_LOCK = threading.Lock()
_ENV_LOCK = threading.Lock()
_INSTALLED = False

JobExecutor = Callable[[dict, Callable[[dict], None]], dict]


@dataclass
class Hooks:
    """Set by the running emulator; read by the patches."""
    job_executor: JobExecutor | None = None   # (request, on_update) -> final DescribeTrainingJob fields
    stager: Callable[[str, str], None] | None = None   # (task_arn, includes) raises on failure
    on_stack_delete: Callable[[str], None] | None = None
    time_scale: float = 1.0
    threads: list[threading.Thread] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # (request) -> (error code, message) to refuse a CreateTrainingJob call, or None
    create_fault: Callable[[dict], tuple[str, str] | None] | None = None
    # quota name -> value (SageMaker training quotas the stand-in answers and enforces)
    quotas: dict[str, float] = field(default_factory=dict)
    # () -> (associations, tasks) of the FSx file system, for the DescribeDataRepository* calls
    fsx_repository: Callable[[], tuple[list[dict], list[dict]]] | None = None
    # stack name -> (seconds until the deletion ends, failure reason or None)
    stack_deletion: Callable[[str], tuple[float, str | None]] | None = None
    max_state_bytes: int = 0
    history_events: dict[int, int] = field(default_factory=dict)  # per execution (event manager)
    # added to every function's own environment (the template's): the stand-in's endpoint, test knobs
    function_env: dict[str, str] = field(default_factory=dict)
    # (method, bucket, key or None) -> (HTTP status, error code, message) to answer an S3 request with, or None:
    # e.g. a directory bucket idle for 90 days answering 503 while it wakes up
    s3_fault: Callable[[str, str, str | None], tuple[int, str, str] | None] | None = None
    # (method, bucket, key or None, query) for every S3 request the stand-in answers (tests count them)
    s3_observer: Callable[[str, str, str | None, dict], None] | None = None
    datasync_seconds: float = 0.0    # how long (stand-in seconds) a DataSync task execution transfers
    # (CreateDataRepositoryTask parameters) -> the new task, for the emulated FSx's associations
    fsx_create_task: Callable[[dict], dict] | None = None


HOOKS = Hooks()


def reset_hooks() -> None:
    HOOKS.job_executor = HOOKS.stager = HOOKS.on_stack_delete = None
    HOOKS.create_fault = HOOKS.fsx_repository = HOOKS.stack_deletion = None
    HOOKS.time_scale = 1.0
    HOOKS.threads.clear()
    HOOKS.errors.clear()
    HOOKS.quotas = {}
    HOOKS.max_state_bytes = 0
    HOOKS.history_events = {}
    HOOKS.function_env = {}
    HOOKS.s3_fault = HOOKS.s3_observer = None
    HOOKS.datasync_seconds = 0.0
    HOOKS.fsx_create_task = None
    _DATASYNC_RUNNING.clear()
    _CLIENTS.clear()  # a new stand-in (maybe on another port): clients are made anew
    from ..workflow import handlers
    handlers._CLIENT_CACHE.clear()


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _apply(job: Any, fields: dict[str, Any]) -> None:
    for key, value in fields.items():
        if key in ("TrainingJobName", "TrainingJobArn"):
            continue
        setattr(job, _snake(key), value)


# ---- the .sync SageMaker service task ----------------------------------------------------------

_CLIENTS: dict[tuple[str, str], Any] = {}


@functools.lru_cache(maxsize=1)
def _sagemaker_model():
    import botocore.session
    return botocore.session.get_session().get_service_model("sagemaker")


def _sagemaker_task_class():
    from botocore.exceptions import ClientError
    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (FailureEvent,
                                                                                           FailureEventException)
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import \
        StateTaskServiceCallback
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
    from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

    class StateTaskServiceSageMaker(StateTaskServiceCallback):
        """``arn:aws:states:::sagemaker:createTrainingJob[.sync]``."""

        def __init__(self):
            # WaitForTaskToken too, as moto's Glue task does: its callback machinery expects an
            # endpoint to release when a .sync task ends.
            super().__init__(supported_integration_patterns={ResourceCondition.Sync, ResourceCondition.WaitForTaskToken})

        def _get_supported_parameters(self):
            action = self.resource.api_action
            operation = action[0].upper() + action[1:]
            if operation not in ("CreateTrainingJob",):
                return None  # only what the lab's workflow uses is emulated
            return set(_sagemaker_model().operation_model(operation).input_shape.members)

        def _client(self, resource_runtime_part, state_credentials):
            key = (resource_runtime_part.region, json.dumps(state_credentials, sort_keys=True, default=str))
            if key not in _CLIENTS:  # a client per call would cost more than the emulated call
                _CLIENTS[key] = boto_client_for(region=resource_runtime_part.region, service="sagemaker",
                                                state_credentials=state_credentials)
            return _CLIENTS[key]

        def _from_error(self, env, ex):
            if isinstance(ex, ClientError):
                name, cause = step_functions_error(ex.response["Error"].get("Code", ""),
                                                   ex.response["Error"].get("Message", ""),
                                                   ex.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400))
                return FailureEvent(env=env, error_name=CustomErrorName(name), event_type=HistoryEventType.TaskFailed,
                                    event_details=EventDetails(taskFailedEventDetails=TaskFailedEventDetails(
                                        error=name, cause=cause,
                                        resource=self._get_sfn_resource(), resourceType=self._get_sfn_resource_type())))
            return super()._from_error(env=env, ex=ex)

        def _eval_service_task(self, env, resource_runtime_part, normalised_parameters, state_credentials):
            action = self._get_boto_service_action()
            client = self._client(resource_runtime_part, state_credentials)
            response = getattr(client, action)(**normalised_parameters)
            response.pop("ResponseMetadata", None)
            env.stack.append(response)

        def _build_sync_resolver(self, env, resource_runtime_part, normalised_parameters, state_credentials):
            name = normalised_parameters["TrainingJobName"]
            client = self._client(resource_runtime_part, state_credentials)
            env.stack.pop()

            def resolve():
                describe = client.describe_training_job(TrainingJobName=name)
                describe.pop("ResponseMetadata", None)
                status = describe["TrainingJobStatus"]
                if status in ("InProgress", "Stopping"):
                    return None
                plain = json.loads(json.dumps(describe, default=lambda v: v.isoformat() if hasattr(v, "isoformat") else str(v)))
                if status == "Completed":
                    return plain
                raise FailureEventException(FailureEvent(
                    env=env, error_name=StatesErrorName(typ=StatesErrorNameType.StatesTaskFailed),
                    event_type=HistoryEventType.TaskFailed,
                    event_details=EventDetails(taskFailedEventDetails=TaskFailedEventDetails(
                        resource=self._get_sfn_resource(), resourceType=self._get_sfn_resource_type(),
                        error=StatesErrorNameType.StatesTaskFailed.to_name(), cause=json.dumps(plain)))))

            return resolve

    return StateTaskServiceSageMaker


def step_functions_error(code: str, message: str, status: int = 400) -> tuple[str, str]:
    """(Error, Cause) as Step Functions reports a SageMaker API error of the optimized integration.

    Errors the service model declares for the call become "SageMaker.<Name>Exception"; every other
    code (throttling, validation) becomes "SageMaker.AmazonSageMakerException", with the service's
    code in the Cause (AWS's example retries exactly these two names:
    https://docs.aws.amazon.com/step-functions/latest/dg/connect-sagemaker.html). The Cause is the
    AWS SDK for Java's message format, which the integration passes on.
    """
    import uuid

    modelled = {shape.name for shape in _sagemaker_model().operation_model("CreateTrainingJob").error_shapes}
    name = (f"SageMaker.{code}" + ("" if code.endswith("Exception") else "Exception")) if code in modelled \
        else "SageMaker.AmazonSageMakerException"
    cause = (f"{message} (Service: AmazonSageMaker; Status Code: {status}; Error Code: {code}; "
             f"Request ID: {uuid.uuid4()}; Proxy: null)")
    return name, cause


def training_quota_message(name: str, limit: float, in_use: int, delta: int) -> str:
    """SageMaker's own wording when a CreateTrainingJob would exceed a quota."""
    return (f"The account-level service limit '{name}' is {limit:g} Instances, with current utilization of "
            f"{in_use} Instances and a request delta of {delta} Instances. Please use AWS Service Quotas to "
            "request an increase for this quota. If AWS Service Quotas is not available, contact AWS support "
            "to request an increase for this quota.")


# ---- install ---------------------------------------------------------------------------------

def install() -> None:
    global _INSTALLED
    with _LOCK:
        if _INSTALLED:
            return
        _patch_state_task_factory()
        _patch_sagemaker()
        _patch_lambda()
        _patch_datasync()
        _patch_time()
        _patch_aws_sdk_streams()
        _patch_state_limits()
        _patch_service_quotas()
        _patch_fsx_repository()
        _patch_directory_buckets()
        _patch_bucket_policy_transport()
        _patch_s3_faults()
        _patch_json_path_cache()
        _INSTALLED = True


def _patch_json_path_cache() -> None:
    """moto's Step Functions engine builds a JSONPath parser (its yacc tables included) for every path it
    evaluates: a tenth of a long execution's time. The parsed path is the same each time: keep it."""
    from moto.stepfunctions.parser.asl.utils import json_path

    json_path.parse = functools.lru_cache(maxsize=4096)(json_path.parse)


def _patch_s3_faults() -> None:
    """S3 answers the emulator's faults (HOOKS.s3_fault) with the HTTP status and XML error S3 sends, so
    clients react as they would on AWS (botocore retries a 503, for instance)."""
    from xml.sax.saxutils import escape

    from moto.s3.responses import S3Response

    original_bucket, original_key = S3Response._bucket_response, S3Response._key_response

    def fault(self, request, full_url: str, key: str | None):
        if HOOKS.s3_observer is not None:
            from urllib.parse import parse_qs, urlparse
            query = {k: v[0] for k, v in parse_qs(urlparse(full_url).query, keep_blank_values=True).items()}
            HOOKS.s3_observer(request.method, self.parse_bucket_name_from_url(request, full_url), key, query)
        if HOOKS.s3_fault is None:
            return None
        bucket = self.parse_bucket_name_from_url(request, full_url)
        answer = HOOKS.s3_fault(request.method, bucket, key) if bucket else None
        if answer is None:
            return None
        status, code, message = answer
        return status, {"content-type": "application/xml"}, (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>'
            f"<BucketName>{escape(bucket)}</BucketName><RequestId>{uuid_token()}</RequestId></Error>")

    def _bucket_response(self, request, full_url):
        return fault(self, request, full_url, None) or original_bucket(self, request, full_url)

    def _key_response(self, request, full_url):
        key = self.parse_key_name()
        return (fault(self, request, full_url, key) or directory_copy_refusal(self, request, full_url)
                or original_key(self, request, full_url))

    def directory_copy_refusal(self, request, full_url: str):
        """CopyObject into a directory bucket takes only the empty tag-set: "When you don't set the
        x-amz-tagging-directive header and the source object has non-empty tags" (its default is COPY), or
        REPLACE with non-empty tags, S3 answers 501 Not Implemented (CopyObject API reference)."""
        headers = request.headers
        source = headers.get("x-amz-copy-source")
        bucket = self.parse_bucket_name_from_url(request, full_url)
        if request.method != "PUT" or not source or not bucket or not is_directory_bucket(bucket):
            return None
        from urllib.parse import unquote
        source_bucket, _, source_key = unquote(source.split("?", 1)[0]).lstrip("/").partition("/")
        directive = (headers.get("x-amz-tagging-directive") or "COPY").upper()
        if directive == "REPLACE":
            tagged = bool(headers.get("x-amz-tagging"))
        else:
            found = self.backend.get_object(source_bucket, source_key)
            tagged = bool(found is not None and self.backend.get_object_tagging(found).get("Tags"))
        if not tagged:
            return None
        return 501, {"content-type": "application/xml"}, (
            '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided '
            f"implies functionality that is not implemented</Message><RequestId>{uuid_token()}</RequestId></Error>")

    S3Response._bucket_response = _bucket_response
    S3Response._key_response = _key_response


def _patch_bucket_policy_transport() -> None:
    """Every AWS request is TLS; the stand-in's arrive over plain HTTP on loopback. moto evaluates a
    bucket policy without the request's context, so a TLS-only policy (Deny when aws:SecureTransport is
    false: the CDK bootstrap bucket's, the lab's data bucket's) would refuse every request. The stand-in
    evaluates it as AWS would for an HTTPS request."""
    import fnmatch

    from moto.iam import policy_conditions
    from moto.iam.access_control import IAMPolicyStatement, PermissionResult
    from moto.s3.models import FakeBucket

    # moto evaluates StringEquals only and takes every other operator as matched, which makes any
    # conditional Deny deny everything. The operators the lab's and CDK's bucket policies use:
    def _any(expected, actual: str, test) -> bool:
        return any(test(str(e), actual) for e in (expected if isinstance(expected, list) else [expected]))

    policy_conditions.CONDITION_OPERATIONS.update({
        "Bool": lambda expected, actual: _any(expected, actual, lambda e, a: e.lower() == a.lower()),
        "StringLike": lambda expected, actual: _any(expected, actual, fnmatch.fnmatchcase),
        "ArnLike": lambda expected, actual: _any(expected, actual, fnmatch.fnmatchcase),
        "ArnEquals": lambda expected, actual: _any(expected, actual, lambda e, a: e == a),
        "StringNotEquals": lambda expected, actual: not _any(expected, actual, lambda e, a: e == a),
    })

    def get_permission(self, action: str, resource: str):
        # moto also answers DENIED for a statement whose condition does not hold; in IAM such a statement
        # does not apply at all (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
        if self.policy is None:
            return PermissionResult.NEUTRAL
        document = json.loads(self.policy.decode() if isinstance(self.policy, bytes) else self.policy)
        statements = document["Statement"] if isinstance(document["Statement"], list) else [document["Statement"]]
        permitted = False
        for raw in statements:
            statement = IAMPolicyStatement(raw)
            concerned = (not statement._check_element_matches("NotAction", action) if "NotAction" in raw
                         else statement._check_element_matches("Action", action))
            if not concerned or statement.is_unknown_principal(raw.get("Principal")):
                continue
            if not statement._check_conditions({"aws:SecureTransport": "true"}):
                continue
            if "Resource" in raw and not statement._check_element_matches("Resource", resource):
                continue
            if raw["Effect"] == "Deny":
                return PermissionResult.DENIED
            permitted = True
        return PermissionResult.PERMITTED if permitted else PermissionResult.NEUTRAL

    FakeBucket.get_permission = get_permission


def _patch_state_task_factory() -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_factory
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_factory

    sagemaker_task = _sagemaker_task_class()
    original = state_task_service_factory.state_task_service_for

    def state_task_service_for(service_name: str):
        if service_name == "sagemaker":
            return sagemaker_task()
        return original(service_name)

    state_task_factory.state_task_service_for = state_task_service_for
    state_task_service_factory.state_task_service_for = state_task_service_for


def _patch_sagemaker() -> None:
    from moto.sagemaker.responses import SageMakerResponse

    original = SageMakerResponse.create_training_job

    def create_training_job(self):
        from moto.core.exceptions import JsonRESTError
        request = json.loads(self.body) if isinstance(self.body, (str, bytes)) and self.body else {}
        fault = HOOKS.create_fault(request) if HOOKS.create_fault else None
        if fault:
            raise JsonRESTError(*fault)
        refusal = _quota_refusal(self.sagemaker_backend, request)
        if refusal:
            raise JsonRESTError("ResourceLimitExceeded", refusal)
        result = original(self)
        executor = HOOKS.job_executor
        name = request.get("TrainingJobName")
        job = self.sagemaker_backend.training_jobs.get(name)
        if job is None or executor is None:
            return result
        # moto overwrites the job's metric definitions with a sample; keep the request's.
        job.algorithm_specification = request.get("AlgorithmSpecification", job.algorithm_specification)
        job.training_job_status, job.secondary_status = "InProgress", "Starting"
        job.secondary_status_transitions = []
        job.final_metric_data_list = []

        def run():
            try:
                final = executor(request, lambda fields: _apply(job, fields))
                _apply(job, final)
            except Exception as err:  # the executor itself broke: the job fails with the reason
                HOOKS.errors.append(traceback.format_exc())
                _apply(job, {"TrainingJobStatus": "Failed", "SecondaryStatus": "Failed",
                             "FailureReason": f"InternalServerError: local job executor failed: {err}"})

        thread = threading.Thread(target=run, name=f"job-{name}", daemon=True)
        HOOKS.threads.append(thread)
        thread.start()
        return result

    SageMakerResponse.create_training_job = create_training_job


def _quota_refusal(backend, request: dict) -> str | None:
    """The message SageMaker gives when this job would take the account over a training quota."""
    if not HOOKS.quotas:
        return None
    resources = request.get("ResourceConfig") or {}
    instance_type, count = resources.get("InstanceType", ""), int(resources.get("InstanceCount") or 1)
    spot = bool(request.get("EnableManagedSpotTraining"))
    name = f"{instance_type} for {'spot ' if spot else ''}training job usage"
    if name not in HOOKS.quotas:
        return None
    in_use = sum(int(getattr(job, "resource_config", {}).get("InstanceCount", 1))
                 for job in list(backend.training_jobs.values())
                 if getattr(job, "training_job_status", "") in ("InProgress", "Stopping")
                 and getattr(job, "resource_config", {}).get("InstanceType") == instance_type
                 and bool(getattr(job, "enable_managed_spot_training", False)) == spot)
    limit = HOOKS.quotas[name]
    return training_quota_message(name, limit, in_use, count) if in_use + count > limit else None


def _patch_lambda() -> None:
    from moto.awslambda.models import LambdaFunction

    from ..workflow.runtime import function_environment

    original = LambdaFunction._invoke_lambda

    def _invoke_lambda(self, event=None):
        handler = getattr(self, "handler", "") or ""
        if not handler.startswith("dslab."):
            return original(self, event)
        module_name, func_name = handler.rsplit(".", 1)
        # What the Lambda runtime adds to every function's environment: its region and credentials.
        region = getattr(self, "region", None) or "us-east-1"
        environment = {"AWS_REGION": region, "AWS_DEFAULT_REGION": region, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                       **dict(getattr(self, "environment_vars", {}) or {}), **HOOKS.function_env}
        logs = io.StringIO()
        # The function's own environment for this thread only (dslab.workflow.runtime): rewriting
        # os.environ would race with other threads reading it. One invocation at a time still, as
        # print() output is captured through the process-wide stdout.
        with _ENV_LOCK, function_environment(environment):
            try:
                function = getattr(importlib.import_module(module_name), func_name)
                payload = event if isinstance(event, dict) else json.loads(event or "{}")
                with redirect_stdout(logs):
                    result = function(payload, None)
                return json.dumps(result, default=str), False, logs.getvalue()
            except Exception as err:
                body = {"errorMessage": str(err), "errorType": type(err).__name__,
                        "stackTrace": traceback.format_exc().splitlines()}
                return json.dumps(body), True, logs.getvalue()

    LambdaFunction._invoke_lambda = _invoke_lambda


def _patch_datasync() -> None:
    """A started task execution runs the project's stager: at once, or after HOOKS.datasync_seconds of
    stand-in time (TRANSFERRING until then, as a long copy into EFS is); it ends SUCCESS or ERROR."""
    from moto.datasync.responses import DataSyncResponse

    def finish(execution, task_arn: str, pattern: str) -> None:
        try:
            HOOKS.stager(task_arn, pattern)
            execution.status = "SUCCESS"
        except Exception:
            HOOKS.errors.append(traceback.format_exc())
            execution.status = "ERROR"

    def start_task_execution(self) -> str:
        task_arn = self._get_param("TaskArn")
        includes = self._get_param("Includes") or []
        arn = self.datasync_backend.start_task_execution(task_arn)
        execution = self.datasync_backend.task_executions[arn]
        if HOOKS.stager is not None:
            pattern = "|".join(f["Value"] for f in includes if f.get("FilterType") == "SIMPLE_PATTERN")
            if HOOKS.datasync_seconds > 0:
                execution.status = "TRANSFERRING"
                _DATASYNC_RUNNING[arn] = (time.monotonic(), task_arn, pattern)
            else:
                finish(execution, task_arn, pattern)
        return json.dumps({"TaskExecutionArn": arn})

    original_describe = DataSyncResponse.describe_task_execution

    def describe_task_execution(self) -> str:
        # (moto's own describe moves an execution one status further at every call: a copy that is still
        # running is answered here, as TRANSFERRING, until its time is up)
        arn = self._get_param("TaskExecutionArn")
        if arn in _DATASYNC_RUNNING:
            started, task_arn, pattern = _DATASYNC_RUNNING[arn]
            execution = self.datasync_backend._get_task_execution(arn)
            if execution.status not in ("ERROR", "SUCCESS") and \
                    (time.monotonic() - started) / max(HOOKS.time_scale, 1e-9) < HOOKS.datasync_seconds:
                return json.dumps({"TaskExecutionArn": arn, "Status": "TRANSFERRING"})
            _DATASYNC_RUNNING.pop(arn)
            if execution.status not in ("ERROR", "SUCCESS"):
                finish(execution, task_arn, pattern)
        return original_describe(self)

    DataSyncResponse.start_task_execution = start_task_execution
    DataSyncResponse.describe_task_execution = describe_task_execution


_DATASYNC_RUNNING: dict[str, tuple[float, str, str]] = {}


def _patch_state_limits() -> None:
    """256 KiB per state input and output, terminal when exceeded; the largest payload is recorded."""
    from moto.stepfunctions.parser import quotas
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
    from moto.stepfunctions.parser.asl.component.state import state as state_module
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_lambda
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service
    from moto.stepfunctions.parser.asl.eval.event.event_manager import EventManager
    from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

    def is_within_size_quota(value: Any) -> bool:
        size = len((value if isinstance(value, str) else to_json_str(value)).encode("utf-8"))
        HOOKS.max_state_bytes = max(HOOKS.max_state_bytes, size)
        return size <= quotas.MAX_STATE_SIZE_UTF8_BYTES

    for module in (quotas, state_module, state_task_lambda, state_task_service):
        module.is_within_size_quota = is_within_size_quota

    # Every state's input too (an ItemSelector or Parameters can build one larger than what came in);
    # raised outside the state's Catch, like the output check.
    original_input = state_module.CommonStateField._eval_state_input

    def _eval_state_input(self, env) -> None:
        original_input(self, env)
        self._verify_size_quota(env=env, value=env.stack[-1])

    state_module.CommonStateField._eval_state_input = _eval_state_input

    # "The States.ALL error type ... cannot catch the States.DataLimitExceeded terminal error or
    # Runtime error types" (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html).
    terminal = [StatesErrorName(typ=StatesErrorNameType.StatesStatesDataLimitExceeded),
                StatesErrorName(typ=StatesErrorNameType.StatesRuntime)]
    original_match = ErrorEqualsDecl._eval_body

    def _eval_body(self, env) -> None:
        error_name = env.stack[-1]
        if error_name in terminal and error_name not in self.error_names:
            env.stack.pop()
            env.stack.append(False)
            return
        original_match(self, env)

    ErrorEqualsDecl._eval_body = _eval_body

    original_add = EventManager.add_event

    def add_event(self, *args, **kwargs):
        original_add(self, *args, **kwargs)
        HOOKS.history_events[id(self)] = HOOKS.history_events.get(id(self), 0) + 1

    EventManager.add_event = add_event


def _patch_service_quotas() -> None:
    """SageMaker's training quotas, as ListAWSDefaultServiceQuotas and ListServiceQuotas list them."""
    import hashlib

    from moto.servicequotas.responses import ServiceQuotasResponse

    def _page(self, applied: bool) -> str:
        params = json.loads(self.body or "{}")
        service = params.get("ServiceCode")
        if service != "sagemaker":
            raise NotImplementedError(f"the stand-in answers Service Quotas for sagemaker only, not {service}")
        names = sorted(HOOKS.quotas)
        quotas = []
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


def _patch_fsx_repository() -> None:
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
    FSxResponse.describe_data_repository_tasks = lambda self: _answer(self, "DataRepositoryTasks")

    def create_data_repository_task(self) -> str:
        params = json.loads(self.body or "{}")
        if HOOKS.fsx_create_task is None:
            raise NotImplementedError("CreateDataRepositoryTask: no emulated FSx association")
        return json.dumps({"DataRepositoryTask": HOOKS.fsx_create_task(params)}, default=str)

    FSxResponse.create_data_repository_task = create_data_repository_task


def _patch_time() -> None:
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

    def _wait_interval(self, env, wait_seconds) -> None:
        if wait_seconds > 0:
            env.program_state_event.wait(wait_seconds * HOOKS.time_scale)

    WaitFunction._wait_interval = _wait_interval

    class _ScaledTime:
        def __getattr__(self, name):
            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            time.sleep(seconds * HOOKS.time_scale)

    retrier_decl.time = _ScaledTime()
    # botocore's retry back-off (a throttled, 503 or 500 answer: the client sleeps, then asks again) on the
    # same clock, so a test of "the bucket wakes after N 503s" does not wait real seconds per retry.
    import botocore.endpoint
    botocore.endpoint.time = _ScaledTime()


def _patch_aws_sdk_streams() -> None:
    from botocore.response import StreamingBody
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import \
        StateTaskServiceAwsSdk

    original = StateTaskServiceAwsSdk._eval_service_task

    def _eval_service_task(self, env, resource_runtime_part, normalised_parameters, state_credentials):
        original(self, env, resource_runtime_part, normalised_parameters, state_credentials)
        response = env.stack[-1]
        if isinstance(response, dict):
            for key, value in list(response.items()):
                if isinstance(value, StreamingBody):
                    response[key] = value.read().decode("utf-8", errors="replace")
                elif hasattr(value, "isoformat"):
                    response[key] = value.isoformat()

    StateTaskServiceAwsSdk._eval_service_task = _eval_service_task


# ---- S3 Express One Zone directory buckets -----------------------------------------------------
# moto has no directory buckets: a bucket named "<base>--<zone-id>--x-s3" is an ordinary moto bucket
# (clients reach it with session auth off: AWS_S3_DISABLE_EXPRESS_SESSION_AUTH, set by EmulatedLab).
# What breaks tools is how such a bucket lists, so the stand-in lists the way AWS documents it
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-differences.html and the
# ListObjectsV2 API reference): not in lexicographic order; a Prefix must end in the delimiter "/";
# "/" is the only delimiter; no StartAfter; ListObjects (v1) is not supported at all.
DIRECTORY_PREFIX_MESSAGE = ("This bucket does not support a prefix that does not end in a delimiter. "
                            "Specify a prefix path ending with a delimiter and try again.")


def create_directory_bucket(name: str, region: str = "us-east-1", account: str = "123456789012") -> None:
    """The stand-in's directory bucket, made in moto's backend: botocore sends CreateBucket for a
    "--x-s3" name to the s3express-control endpoint, which moto does not serve."""
    from moto.s3.models import s3_backends
    s3_backends[account]["global"].create_bucket(name, region)


def delete_directory_bucket(name: str, account: str = "123456789012") -> None:
    """DeleteBucket likewise goes to the s3express-control endpoint: the stand-in's is made in moto's backend."""
    from moto.s3.models import s3_backends
    s3_backends[account]["global"].delete_bucket(name)


def is_directory_bucket(name: str) -> bool:
    from ..core.requests import is_express_bucket  # the one naming rule, as botocore's
    return is_express_bucket(name)


def directory_listing_order(name: str) -> str:
    """A stable order that is not lexicographic (AWS gives no order at all)."""
    import hashlib
    return hashlib.sha256(name.encode()).hexdigest()


def _patch_directory_buckets() -> None:
    from moto.s3.exceptions import S3ClientError
    from moto.s3.models import FakeKey, S3Backend
    from moto.s3.responses import S3Response

    def refuse(message: str):
        return S3ClientError("InvalidRequest", message)

    original_v2 = S3Backend.list_objects_v2

    def list_objects_v2(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys):
        if not is_directory_bucket(bucket.name):
            return original_v2(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys)
        if prefix and not prefix.endswith("/"):
            raise refuse(DIRECTORY_PREFIX_MESSAGE)
        if delimiter and delimiter != "/":
            raise refuse("Only the '/' delimiter is supported for directory buckets.")
        if start_after:
            raise refuse("StartAfter is not supported for directory buckets.")
        keys, folders, _, _ = self.list_objects(bucket, prefix, delimiter, marker=None, max_keys=None)
        ordered = sorted([*keys, *folders], key=lambda k: directory_listing_order(k.name if isinstance(k, FakeKey) else k))
        start = 0
        if continuation_token:
            start = self._pagination_tokens.get(continuation_token)
            if not isinstance(start, int):
                from moto.s3.exceptions import InvalidContinuationToken
                raise InvalidContinuationToken()
        page = ordered[start:start + max_keys] if max_keys else []
        truncated = start + len(page) < len(ordered) and max_keys > 0
        token = None
        if truncated:
            token = uuid_token()
            self._pagination_tokens[token] = start + len(page)
        return page, truncated, token

    S3Backend.list_objects_v2 = list_objects_v2

    original_v1 = S3Response.list_objects

    def list_objects(self):
        if is_directory_bucket(self.bucket_name):
            raise refuse("ListObjects is not supported for directory buckets: use ListObjectsV2.")
        return original_v1(self)

    S3Response.list_objects = list_objects

    # ListMultipartUploads: the same prefix rule; upload-id-marker is not supported for directory buckets.
    original_uploads = S3Response.list_multipart_uploads

    def list_multipart_uploads(self):
        if is_directory_bucket(self.bucket_name):
            prefix = self.querystring.get("prefix", [None])[0]
            if prefix and not prefix.endswith("/"):
                raise refuse(DIRECTORY_PREFIX_MESSAGE)
            if self.querystring.get("upload-id-marker", [None])[0]:
                raise refuse("UploadIdMarker is not supported for directory buckets.")
        return original_uploads(self)

    S3Response.list_multipart_uploads = list_multipart_uploads

    # "The ETag for the object in a directory bucket isn't the MD5 digest of the object" (PutObject
    # API reference): tools that compare ETags with local MD5s must not find them equal here either.
    original_etag = FakeKey.etag

    def etag(self) -> str:
        value = original_etag.fget(self)
        if self.bucket_name and is_directory_bucket(self.bucket_name):
            import hashlib
            return f'"{hashlib.sha256(value.encode()).hexdigest()[:32]}"'
        return value

    FakeKey.etag = property(etag)


def uuid_token() -> str:
    import uuid
    return uuid.uuid4().hex
