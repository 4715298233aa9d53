"""What the embedded AWS stand-in (moto, pinned) lacks, closed by project code.

- ``sagemaker:createTrainingJob.sync``: moto's Step Functions engine refuses ``.sync`` for SageMaker;
  a service task here creates the job, then polls DescribeTrainingJob until it ends, as AWS does:
  Completed returns the description, Failed/Stopped fails the state with ``States.TaskFailed``.
- Training jobs: moto marks a job Completed at creation. Here a created job is InProgress and is
  handed to a job executor (the local container runner, or a scripted executor in tests); its real
  outcome — status, transitions, billable time, failure reason, metrics — is what DescribeTrainingJob
  then returns.
- Lambda: moto runs functions in Docker, which these machines lack. Each Python function runs from its
  deployed code (the asset cdk.out holds) in an interpreter of its own, with the standard library and the
  runtime's boto3 only, kept warm between invocations (``emulator/functions.py``).
- DataSync: a started task execution runs the project's stager (S3 objects copied into EFS's
  stand-in folder, with the task's options and the execution's include filters) and ends SUCCESS or
  ERROR; DescribeLocationEfs answers. EFS's DescribeFileSystems reports the folder's metered size.
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
- An execution stopped with StopExecution ends ABORTED (moto let a running Map iteration turn it FAILED).
- An aws-sdk task's error is named "ServiceName.ErrorName" in Pascal case ("S3.NoSuchKeyException",
  "DataSync.InternalException"), as AWS names it; moto wrote the service as the Resource does ("s3").
- Any AWS error of any call can be answered in the service's own protocol (HOOKS.api_fault, patches/faults.py).
- DataSync runs one execution of a task at a time: a second one is QUEUED until the first has ended (moto
  refused it, and kept a task whose execution ended in ERROR busy for good).
- A training job's name is unique in the account and region: a second CreateTrainingJob of a name answers
  ResourceInUse (moto created a second job).
- SageMaker API errors reach the state machine as Step Functions names them:
  ``SageMaker.<Modelled>Exception`` or ``SageMaker.AmazonSageMakerException`` with the service's
  error code in the Cause. CreateTrainingJob enforces the account's training quotas, with SageMaker's
  own ResourceLimitExceeded message; tests can inject throttling and validation errors.
- Service Quotas answers SageMaker's per-instance-type training quotas (list calls, paginated).
- FSx data repository associations and their S3 metadata import task, which finishes some
  (stand-in) time after the file system exists. CreateDataRepositoryTask refuses a task while another
  executes on the file system (DataRepositoryTaskExecuting), as FSx documents.
- Bucket policies are evaluated as for an HTTPS request, and a statement whose condition does not
  hold does not apply (moto denies on any condition it cannot evaluate).

All patches are installed once per process and do nothing unless an emulator has set its hooks."""

from __future__ import annotations

import threading

from . import faults, s3, sagemaker, services, stepfunctions
from .hooks import HOOKS, Hooks, JobExecutor, ServiceRefusal
from .s3 import create_directory_bucket, delete_directory_bucket, directory_listing_order, is_directory_bucket
from .sagemaker import step_functions_error, training_quota_message

__all__ = ["HOOKS", "Hooks", "JobExecutor", "create_directory_bucket", "delete_directory_bucket", "directory_listing_order",
           "install", "is_directory_bucket", "reset_hooks", "ServiceRefusal", "step_functions_error", "training_quota_message"]

_LOCK = threading.Lock()
_INSTALLED = False


def reset_hooks() -> None:
    HOOKS.job_executor = HOOKS.stager = HOOKS.on_stack_delete = None
    HOOKS.create_fault = HOOKS.fsx_repository = HOOKS.stack_deletion = None
    HOOKS.time_scale = 1.0
    HOOKS.threads.clear()
    HOOKS.errors.clear()
    HOOKS.quotas = {}
    HOOKS.max_state_bytes = 0
    HOOKS.history_events = {}
    HOOKS.job_ended = {}
    HOOKS.function_env = {}
    HOOKS.s3_fault = HOOKS.s3_observer = None
    HOOKS.datasync_seconds = 0.0
    HOOKS.efs_size = None
    HOOKS.fsx_create_task = None
    HOOKS.api_fault = None
    services.DATASYNC_RUNNING.clear()
    services.DATASYNC_QUEUED.clear()
    SFN_CLIENTS.clear()  # a new stand-in (maybe on another port): clients are made anew
    from ...workflow import common as workflow_common
    workflow_common.CLIENT_CACHE.clear()


_LOADER_SHARED = False


def share_sdk_loader() -> None:
    """The shared botocore loader (below), now: a caller that reads service models before the stand-in starts (the
    experiment's checks read SageMaker's) then parses them once with the stand-in. Once per process."""
    global _LOADER_SHARED
    with _LOCK:
        if not _LOADER_SHARED:
            _patch_shared_loader()
            _LOADER_SHARED = True


def _patch_shared_loader() -> None:
    """One botocore data loader for the process. moto's mock makes boto3's default session anew each time it
    starts (``patch("boto3.DEFAULT_SESSION", None)``), and each new session's loader parses the service models
    again (sagemaker's alone is megabytes of JSON): a tenth of an emulated workflow's CPU. The models are files
    of the installed botocore, the same for every session. moto's own loader (what its responses are serialized
    from) stays apart: sharing it too left FastFile channels empty through s3fs (tests/test_local_lab.py's
    interrupt tests saw it; the cause was not traced further)."""
    import botocore.loaders
    import botocore.session

    class _Paths(list):
        def append(self, path) -> None:   # boto3 adds its own data folder for each session it makes: once is enough
            if path not in self:
                super().append(path)

    loaders: dict = {}
    original, making = botocore.loaders.create_loader, threading.Lock()

    def create_loader(search_path_string=None):
        with making:
            if search_path_string not in loaders:
                loader = loaders[search_path_string] = original(search_path_string)
                loader._search_paths = _Paths(loader._search_paths)
            return loaders[search_path_string]

    botocore.session.create_loader = create_loader   # sessions only: moto's server keeps its own models (below)


def _patch_service_listing() -> None:
    """Which services botocore's data folders hold: moto makes loaders of its own (one per service it answers, beside
    the shared one) and each lists every service folder of the installed botocore the first time it loads a model
    (~400 folders, ~20,000 stat calls a local run). The folders are the installed package's: listed once per
    search path and kind of file."""
    import botocore.loaders

    listed: dict[tuple, list[str]] = {}
    original = botocore.loaders.Loader.list_available_services

    def list_available_services(self, type_name):
        key = (tuple(str(path) for path in self.search_paths), type(self.file_loader), type_name)
        if key not in listed:
            listed[key] = original(self, type_name)
        return list(listed[key])

    botocore.loaders.Loader.list_available_services = list_available_services


# The clients moto's Step Functions engine calls services with, per (region, service, stub or server port).
SFN_CLIENTS: dict[tuple, object] = {}


def _patch_sfn_clients() -> None:
    """moto's Step Functions engine makes a new boto3 client for every aws-sdk task and Lambda invocation (its
    ``boto_client_for``): client creation, not the call, was most of such a task's cost. It always signs with the
    same fixed keys, so one client per region and service serves every call (botocore clients are thread-safe),
    the lab's SageMaker task's too."""
    import sys

    from moto.core.models import botocore_stubber
    from moto.settings import moto_server_port
    from moto.stepfunctions.parser.asl.utils import boto_client
    original = boto_client.boto_client_for

    def boto_client_for(region: str, service: str, state_credentials=None):
        key = (region, service, botocore_stubber.enabled, None if botocore_stubber.enabled else moto_server_port())
        client = SFN_CLIENTS.get(key)
        if client is None:
            client = SFN_CLIENTS.setdefault(key, original(region=region, service=service, state_credentials=state_credentials))
        return client

    boto_client.boto_client_for = boto_client_for   # what modules imported from now on take
    for name, module in list(sys.modules.items()):    # and those that took the original already
        if name.startswith("moto.stepfunctions.parser.") and getattr(module, "boto_client_for", None) is original:
            module.boto_client_for = boto_client_for


def _patch_mock_start() -> None:
    """moto's in-process mock (``mock_aws``) builds ~1,300 ``responses`` callbacks, one per service URL pattern and
    HTTP method, each time it starts: about a second of every stand-in's start, and the same callbacks every time.
    They are built once here and registered again on each start; what they answer is unchanged (botocore's own
    calls never go through them: moto's botocore stubber answers those)."""
    import re

    from moto.core import models
    built: list = []

    def _enable_patching(self, reset: bool = True) -> None:
        models.botocore_stubber.enabled = True
        if reset:
            self.reset()
        models.responses_mock.start()
        if not built:
            for method in models.RESPONSES_METHODS:
                for _, pattern in models.backend_index.backend_url_patterns:
                    built.append(models.CallbackResponse(method=method, url=pattern,
                                                         callback=models.botocore_stubber.process_prepared_request))
                built.append(models.CallbackResponse(method=method, url=re.compile(r"https?://.+\.amazonaws.com/.*"),
                                                     callback=models.not_implemented_callback))
        for response in built:
            models.responses_mock.add(response)

    models.MockAWS._enable_patching = _enable_patching


def _patch_action_lookup() -> None:
    """moto finds a request's handler by listing every function of its service's response class
    (``inspect.getmembers``, a few hundred names) on every request: ~7% of a lab's deployment. Whether the
    action's name is a function of the class is the same question, answered by one attribute lookup (at the
    time of the request, so that handlers patched in later still count)."""
    import inspect

    from moto.core import responses

    class _FunctionNames:
        def __init__(self, cls: type):
            self.cls = cls

        def __contains__(self, name: object) -> bool:
            return isinstance(name, str) and inspect.isfunction(getattr(self.cls, name, None))

    responses.method_names_from_class = _FunctionNames


def _patch_server_host_lookup() -> None:
    """moto's server decides which service a request is for by listing moto's own package folder (a directory
    listing and ~200 isdir calls) on every request, under its dispatcher's lock: a tenth of the local lab's
    server time. The folder is what the installed package holds: listed once."""
    from moto import backends

    modules = frozenset(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def install() -> None:
    """Every patch, once per process (each does nothing until an emulator sets HOOKS)."""
    global _INSTALLED, _LOADER_SHARED
    with _LOCK:
        if _INSTALLED:
            return
        # First: the patches below import most of moto, whose EC2 asks boto3 for its regions as it is imported (a new
        # session, the EC2 service model parsed: ~0.3 s), as the stand-in's EC2 client asks for the same model again.
        if not _LOADER_SHARED:
            _patch_shared_loader()
            _LOADER_SHARED = True
        _patch_service_listing()
        sagemaker.patch_state_task_factory()
        sagemaker.patch_sagemaker()
        services.patch_lambda()
        services.patch_datasync()
        services.patch_efs_size()
        stepfunctions.patch_time()
        stepfunctions.patch_aws_sdk_streams()
        stepfunctions.patch_state_limits()
        services.patch_service_quotas()
        services.patch_fsx_repository()
        services.patch_cloudtrail_lookup()
        s3.patch_directory_buckets()
        s3.patch_bucket_policy_transport()
        s3.patch_s3_faults()
        faults.patch_api_faults()
        stepfunctions.patch_json_path_cache()
        stepfunctions.patch_stop_execution()
        stepfunctions.patch_nested_error_names()
        stepfunctions.patch_definition_parsing()
        stepfunctions.patch_execution_history_pages()
        stepfunctions.patch_sdk_error_names()
        _patch_mock_start()
        _patch_sfn_clients()
        _patch_action_lookup()
        _patch_server_host_lookup()
        _INSTALLED = True
