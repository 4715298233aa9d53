"""SageMaker in the stand-in: the ``createTrainingJob.sync`` service task, training jobs handed to a job
executor, the training quotas CreateTrainingJob enforces, and API errors named as Step Functions names them."""

from __future__ import annotations

import functools
import json
import threading
import traceback
from typing import Any

from .hooks import HOOKS


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


# How long one look of a createTrainingJob.sync task waits for its job to end before it answers "still running" (moto's
# loop then sleeps before the next look: patches/stepfunctions.py patch_time): a job that ends is seen at once.
SYNC_WAKE_SECONDS = 0.25


# A job's executor thread changes its fields while the workflow's .sync poll describes it. moto builds
# DescribeTrainingJob's answer by walking the job's ``__dict__``: a field set for the first time during that
# walk broke it ("dictionary changed size during iteration", a States.Runtime that failed a lane on a loaded
# machine), and a walk between two fields could answer Completed with the end time still unset. SageMaker
# answers each describe from one state of the job: the fields change, and are read, under one lock.
_JOB_FIELDS = threading.RLock()


def _apply(job: Any, fields: dict[str, Any]) -> None:
    with _JOB_FIELDS:
        for key, value in fields.items():
            if key in ("TrainingJobName", "TrainingJobArn"):
                continue
            setattr(job, _snake(key), value)


@functools.lru_cache(maxsize=1)
def _sagemaker_model():
    import botocore.session
    return botocore.session.get_session().get_service_model("sagemaker")


@functools.lru_cache(maxsize=1)
def _sagemaker_task_class():
    from botocore.exceptions import ClientError
    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
        CustomErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import (
        ResourceCondition,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
    from moto.stepfunctions.parser.asl.utils import boto_client

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
            # Looked up when called: the engine's one client per region and service (patches._patch_sfn_clients).
            return boto_client.boto_client_for(region=resource_runtime_part.region, service="sagemaker",
                                               state_credentials=state_credentials)

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
            ended = HOOKS.job_ended.get(name)
            env.stack.pop()

            def resolve():
                describe = client.describe_training_job(TrainingJobName=name)
                describe.pop("ResponseMetadata", None)
                status = describe["TrainingJobStatus"]
                if status in ("InProgress", "Stopping") and ended is not None and ended.wait(SYNC_WAKE_SECONDS):
                    # The job has just ended: described now, not a poll later (the lab's own delay, ~0.1 s a job).
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

    # A parsed definition's programs hold their task's class: named where pickle finds it (a saved deployment keeps
    # the parsed definition, patches/stepfunctions.py saved_programs).
    StateTaskServiceSageMaker.__module__, StateTaskServiceSageMaker.__qualname__ = __name__, "StateTaskServiceSageMaker"
    globals()["StateTaskServiceSageMaker"] = StateTaskServiceSageMaker
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


def patch_state_task_factory() -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import (
        state_task_factory,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_factory,
    )

    sagemaker_task = _sagemaker_task_class()
    original = state_task_service_factory.state_task_service_for

    def state_task_service_for(service_name: str):
        if service_name == "sagemaker":
            return sagemaker_task()
        return original(service_name)

    state_task_factory.state_task_service_for = state_task_service_for
    state_task_service_factory.state_task_service_for = state_task_service_for


def patch_sagemaker() -> None:
    from moto.sagemaker.models import FakeTrainingJob
    from moto.sagemaker.responses import SageMakerResponse

    described = FakeTrainingJob.response_object.fget

    def response_object(self) -> dict[str, Any]:
        with _JOB_FIELDS:
            return described(self)

    FakeTrainingJob.response_object = property(response_object)

    original = SageMakerResponse.create_training_job

    def create_training_job(self):
        from moto.core.exceptions import JsonRESTError
        request = json.loads(self.body) if isinstance(self.body, (str, bytes)) and self.body else {}
        fault = HOOKS.create_fault(request) if HOOKS.create_fault else None
        if fault:
            raise JsonRESTError(*fault)
        taken = _name_taken(self.sagemaker_backend, request.get("TrainingJobName", ""))
        if taken:
            raise JsonRESTError("ResourceInUse", taken)
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

        ended = HOOKS.job_ended[name] = threading.Event()

        def run():
            try:
                final = executor(request, lambda fields: _apply(job, fields))
                _apply(job, final)
            except Exception as err:  # the executor itself broke: the job fails with the reason
                HOOKS.errors.append(traceback.format_exc())
                _apply(job, {"TrainingJobStatus": "Failed", "SecondaryStatus": "Failed",
                             "FailureReason": f"InternalServerError: local job executor failed: {err}"})
            finally:
                ended.set()

        thread = threading.Thread(target=run, name=f"job-{name}", daemon=True)
        HOOKS.threads.append(thread)
        thread.start()
        return result

    SageMakerResponse.create_training_job = create_training_job


def _name_taken(backend, name: str) -> str | None:
    """CreateTrainingJob, TrainingJobName: "The name of the training job. The name must be unique within an Amazon Web
    Services Region in an Amazon Web Services account." (SageMaker API reference; botocore's model says the same). Of
    its errors the operation declares ResourceInUse, "Resource being accessed is in use."; the message is SageMaker's
    as SDK users quote it (unverified here). moto made a second job of the same name."""
    job = backend.training_jobs.get(name)
    if job is None:
        return None
    return (f"Training job names must be unique within an AWS account and region, and a training job with this name "
            f"already exists ({job.arn})")


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
