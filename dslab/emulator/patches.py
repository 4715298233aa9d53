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
- CloudFormation DeleteStack of the FSx stack removes what the stack owns (SSM parameters, the file
  system), so the workflow's teardown leaves the stand-in as AWS would.
- ``aws-sdk:s3:getObject``: Step Functions returns the object's Body as text; moto hands back a
  stream, which no intrinsic can read. The body is read into a string, as AWS does.
- Time: Wait states and retry intervals are compressed by ``time_scale`` so a test need not wait
  minutes; the state-machine definition itself is unchanged.

All patches are installed once per process and do nothing unless an emulator has set its hooks.
"""

from __future__ import annotations

import importlib
import io
import json
import os
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


HOOKS = Hooks()


def reset_hooks() -> None:
    global HOOKS
    HOOKS.job_executor = HOOKS.stager = HOOKS.on_stack_delete = None
    HOOKS.time_scale = 1.0
    HOOKS.threads.clear()
    HOOKS.errors.clear()


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
            import botocore.session
            model = botocore.session.get_session().get_service_model("sagemaker")
            action = self.resource.api_action
            operation = action[0].upper() + action[1:]
            if operation not in ("CreateTrainingJob",):
                return None  # only what the lab's workflow uses is emulated
            return set(model.operation_model(operation).input_shape.members)

        def _client(self, resource_runtime_part, state_credentials):
            return boto_client_for(region=resource_runtime_part.region, service="sagemaker",
                                   state_credentials=state_credentials)

        def _from_error(self, env, ex):
            if isinstance(ex, ClientError):
                name = f"SageMaker.{ex.response['Error']['Code']}"
                return FailureEvent(env=env, error_name=CustomErrorName(name), event_type=HistoryEventType.TaskFailed,
                                    event_details=EventDetails(taskFailedEventDetails=TaskFailedEventDetails(
                                        error=name, cause=ex.response["Error"].get("Message", ""),
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
        _patch_cloudformation()
        _patch_time()
        _patch_aws_sdk_streams()
        _INSTALLED = True


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
        result = original(self)
        executor = HOOKS.job_executor
        request = json.loads(self.body) if isinstance(self.body, (str, bytes)) and self.body else {}
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


def _patch_lambda() -> None:
    from moto.awslambda.models import LambdaFunction

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
                       **dict(getattr(self, "environment_vars", {}) or {})}
        logs = io.StringIO()
        with _ENV_LOCK:  # one in-process invocation at a time: it borrows the process environment
            saved = {k: os.environ.get(k) for k in environment}
            os.environ.update({k: str(v) for k, v in environment.items()})
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
            finally:
                for key, value in saved.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value

    LambdaFunction._invoke_lambda = _invoke_lambda


def _patch_datasync() -> None:
    from moto.datasync.responses import DataSyncResponse

    def start_task_execution(self) -> str:
        task_arn = self._get_param("TaskArn")
        includes = self._get_param("Includes") or []
        arn = self.datasync_backend.start_task_execution(task_arn)
        execution = self.datasync_backend.task_executions[arn]
        if HOOKS.stager is not None:
            pattern = "|".join(f["Value"] for f in includes if f.get("FilterType") == "SIMPLE_PATTERN")
            try:
                HOOKS.stager(task_arn, pattern)
                execution.status = "SUCCESS"
            except Exception:
                HOOKS.errors.append(traceback.format_exc())
                execution.status = "ERROR"
        return json.dumps({"TaskExecutionArn": arn})

    DataSyncResponse.start_task_execution = start_task_execution


def _patch_cloudformation() -> None:
    from moto.cloudformation.models import CloudFormationBackend

    original = CloudFormationBackend.delete_stack

    def delete_stack(self, name_or_stack_id: str) -> None:
        original(self, name_or_stack_id)
        if HOOKS.on_stack_delete is not None:
            HOOKS.on_stack_delete(name_or_stack_id)

    CloudFormationBackend.delete_stack = delete_stack


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
