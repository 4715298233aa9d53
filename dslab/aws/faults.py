"""The fault matrix: every AWS operation the product calls, every error AWS documents for it, and what the product
does about each (docs/reference/fault-matrix.md is generated from this module: ``python -m dslab.aws.faults --write``).

Where the rows come from (tests/test_fault_matrix.py keeps each list equal to the code):
- **Python call sites** (the CLI, dslab/aws, dslab/inputs, the workflow's functions, the Express emptier custom
  resource, the training script, the local lab's runner, checkpoint sync and progress): an AST scan of SCANNED for attribute references named like an operation of a
  service the product uses (botocore's ``xform_name`` of the service model's operation names), ``get_paginator("op")``
  and boto3's S3 transfer methods (TRANSFER: each maps to the operations it makes). A call site without a row, or a
  row without a call site, fails the test. A function that calls an operation more than once has a row per call
  (``occurrence``, in source order; the injector tells them apart by the lines the scan found each on).
- **The state machine's integrations**: the synthesized definition's Task states (``aws-sdk:<service>:<action>``,
  ``sagemaker:createTrainingJob.sync``, Lambda invokes); each state's Retry and Catch are read from the definition.
- **Custom resources**: the project's own (stacks/components/express_empty/index.py, scanned as above) and
  aws-cdk-lib's handlers (their operations read from the synthesized asset's JavaScript).

Not scanned, and why: dslab/emulator (the stand-in itself); examples/ (templates the user copies and owns: a failure of theirs
is the training job's failure, which the Run map records like any other); the script `dslab export` writes (it calls
sagemaker-core's TrainingJob.create, not botocore directly, and exits with one line on any botocore error).

Errors per operation: botocore's error shapes for the operation (the service model), plus AWS's common errors as the
service's protocol sends them (PROTOCOL_COMMON: throttling, a temporary or internal failure, a refused permission, an
expired token or request, each with the API reference it comes from), plus a few answers the code handles that
neither lists (a row's ``extra``, each with its source).

Reactions (a closed set; each pair's is resolved by ``Site.reaction_for``):
- EXIT_2: the CLI prints one line ``dslab: error: ...`` naming the fix and exits 2;
- WAIT: a polling step answers "not yet" and tries again at its next check (bounded by that loop's cap);
- FINAL: the step or execution ends with a reason that names the fix (in the result, the state, results.json);
- ANSWER: the error is information the code expects (a missing object, a stack that does not exist);
- GOES_ON: a best-effort read: the command or step says what it could not read and goes on without it.
Before any of them, botocore retries what its retry mode retries (bounded backoff; ``attempts``), and the state
machine retries what its Retry names.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from ..core.facts import aws_errors

REPO = Path(__file__).resolve().parents[2]

EXIT_2, WAIT, FINAL, ANSWER, GOES_ON = "exit 2", "wait", "final reason", "answer", "goes on"
REACTIONS = (EXIT_2, WAIT, FINAL, ANSWER, GOES_ON)

# ---- what is scanned --------------------------------------------------------------------------------------------
SCANNED = ("dslab", "stacks", "training", "benchmarks", "app.py")
NOT_SCANNED = {
    "dslab/emulator": "the stand-in itself",
}
# Attribute references named like an operation that are not AWS calls.
_STORAGE = "the local runner's Storage (dslab/local/job_storage.py), not boto3: its S3 call is LabStorage's or " \
           "FolderStorage's row"
NOT_AWS = {("dslab/aws/images.py", "_cuda_from_tag", "search"): "re.search, not SageMaker Search",
           ("dslab/core/workloads/dlio.py", "Workload.accelerator", "search"): "re.search, not SageMaker Search",
           ("dslab/local/container.py", "scrape_metrics", "search"): "re.search, not SageMaker Search",
           ("dslab/local/channels.py", "channel_objects", "list_objects"): _STORAGE,
           ("dslab/local/checkpoint_sync.py", "CheckpointSync.copy_in", "list_objects"): _STORAGE,
           ("dslab/local/checkpoint_sync.py", "CheckpointSync.sync", "delete_object"): _STORAGE,
           ("dslab/local/runner.py", "run_training_job", "list_objects"): _STORAGE,
           ("dslab/local/runner.py", "run_training_job", "put_object"): _STORAGE,
           ("dslab/local/job_storage.py", "FolderStorage.s3_environment", "list_objects"): "FolderStorage's own "
                                                                                            "listing of its folders"}
# boto3's managed S3 transfers: the method, and the operations it may make (s3transfer: a small object in one request,
# a large one in parts; a copy first reads the source's size).
TRANSFER = {
    "upload_file": ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "AbortMultipartUpload"),
    "copy": ("HeadObject", "CopyObject", "CreateMultipartUpload", "UploadPartCopy", "CompleteMultipartUpload",
             "AbortMultipartUpload"),
    "download_file": ("HeadObject", "GetObject"), "upload_fileobj": ("PutObject",), "download_fileobj": ("GetObject",),
}
SERVICES = ("s3", "sagemaker", "stepfunctions", "cloudformation", "ssm", "fsx", "efs", "datasync", "ec2", "logs",
            "service-quotas", "lambda")

# ---- the errors every action of a service may answer, as its protocol sends them -------------------------------------
# botocore's models list an operation's own errors and leave out the ones every action may answer; the API references
# list those on their Common Errors pages. Each protocol the product calls sends them under its own names.
@dataclass(frozen=True)
class Common:
    code: str
    status: int
    says: str      # the reference's words


# JSON and REST-JSON services (SageMaker, Step Functions, SSM, FSx, DataSync, CloudWatch Logs, Service Quotas, EFS,
# Lambda): "This section lists the errors common to the API actions of all AWS services"
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/CommonErrors.html, the same page in each reference).
JSON_SOURCE = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/CommonErrors.html"
JSON_COMMON = (
    Common("ThrottlingException", 400, "The request was denied due to request throttling."),
    Common("ServiceUnavailable", 503, "The request has failed due to a temporary failure of the server."),
    Common("AccessDeniedException", 400, "You do not have sufficient access to perform this action."),
    Common("InternalFailure", 500, "The request processing has failed because of an unknown error, exception or failure."),
    Common("ExpiredTokenException", 403, "The security token included in the request is expired"),
    Common("RequestExpired", 400, "The request reached the service more than 15 minutes after the date stamp on the "
                                  "request ... or the date stamp on the request is more than 15 minutes in the future."))
# The query protocol (CloudFormation) sends the same errors under its own codes: Throttling, AccessDenied, ExpiredToken
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/CommonErrors.html lists the common errors; the
# query protocol's error codes drop the "Exception" suffix: "An error occurred (Throttling) when calling the
# DescribeStacks operation: Rate exceeded").
QUERY_SOURCE = "https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/CommonErrors.html"
QUERY_COMMON = (
    Common("Throttling", 400, "Rate exceeded"),
    Common("ServiceUnavailable", 503, "The request has failed due to a temporary failure of the server."),
    Common("AccessDenied", 403, "User is not authorized to perform this action"),
    Common("InternalFailure", 500, "The request processing has failed because of an unknown error, exception or failure."),
    Common("ExpiredToken", 403, "The security token included in the request is expired"),
    Common("RequestExpired", 400, "The request reached the service more than 15 minutes after the date stamp on the "
                                  "request."))
# S3 (REST-XML): https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html (List of error codes).
S3_SOURCE = "https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html"
S3_COMMON = (
    Common("SlowDown", 503, "Please reduce your request rate."),
    Common("ServiceUnavailable", 503, "Service is unable to handle request."),
    Common("AccessDenied", 403, "Access Denied"),
    Common("InternalError", 500, "An internal error occurred. Try again."),
    Common("RequestTimeout", 400, "Your socket connection to the server was not read from or written to within the "
                                  "timeout period."),
    Common("ExpiredToken", 400, "The provided token has expired."))
# S3's listings of a bucket also answer NoSuchBucket ("The specified bucket does not exist", 404) where botocore's
# model does not say so (it does for ListObjectsV2).
S3_LISTINGS = ("ListObjectsV2", "ListMultipartUploads", "ListObjectVersions")
# EC2: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html (common client and server errors).
EC2_SOURCE = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html"
EC2_COMMON = (
    Common("RequestLimitExceeded", 503, "The maximum request rate permitted by the Amazon EC2 APIs has been exceeded "
                                        "for your account."),
    Common("Unavailable", 503, "The server is overloaded and can't handle the request."),
    Common("UnauthorizedOperation", 403, "You are not authorized to perform this operation."),
    Common("InternalError", 500, "An internal error has occurred."),
    Common("AuthFailure", 401, "The provided credentials could not be validated."),
    Common("RequestExpired", 400, "The request reached the service more than 15 minutes after the date stamp on the "
                                  "request or more than 15 minutes after the request expiration date."))
PROTOCOL_COMMON = {"json": (JSON_SOURCE, JSON_COMMON), "rest-json": (JSON_SOURCE, JSON_COMMON),
                   "smithy-rpc-v2-cbor": (JSON_SOURCE, JSON_COMMON), "query": (QUERY_SOURCE, QUERY_COMMON),
                   "rest-xml": (S3_SOURCE, S3_COMMON), "ec2": (EC2_SOURCE, EC2_COMMON)}


def protocol(service: str) -> str:
    return service_model(service).protocol


def common_errors(service: str) -> tuple[tuple[str, int], ...]:
    """(code, HTTP status) of the errors every action of ``service`` may answer, as its protocol sends them."""
    return tuple((c.code, c.status) for c in PROTOCOL_COMMON[protocol(service)][1])


def common_quote(service: str) -> str:
    source, errors = PROTOCOL_COMMON[protocol(service)]
    return f"{source}: " + "; ".join(f"\"{c.code}: {c.says} {c.status}\"" for c in errors)


@functools.lru_cache(maxsize=None)
def service_model(service: str):
    import botocore.session
    return botocore.session.get_session().get_service_model(service)


@functools.lru_cache(maxsize=None)
def modelled_errors(service: str, operation: str) -> tuple[tuple[str, int], ...]:
    """(code, HTTP status) of the operation's error shapes in botocore's model."""
    found = []
    for shape in service_model(service).operation_model(operation).error_shapes:
        meta = shape.metadata.get("error") or {}
        status = meta.get("httpStatusCode") or (500 if shape.metadata.get("fault") else 400)
        found.append((meta.get("code") or shape.name, int(status)))
    return tuple(found)


@dataclass(frozen=True)
class Fault:
    code: str
    status: int
    source: str       # "model" (botocore's error shapes), "common" (the service's common errors) or what documents it
    message: str = ""


def documented_errors(service: str, operation: str, extra: Iterable[Fault] = ()) -> list[Fault]:
    """The operation's errors: botocore's error shapes, the service's common errors, and ``extra``; one per code."""
    found: dict[str, Fault] = {}
    for code, status in modelled_errors(service, operation):
        found.setdefault(code, Fault(code, status, "model"))
    for code, status in common_errors(service):
        found.setdefault(code, Fault(code, status, "common"))
    if service == "s3" and operation in S3_LISTINGS:
        found.setdefault("NoSuchBucket", Fault("NoSuchBucket", 404, "common"))
    for fault in extra:
        found.setdefault(fault.code, fault)
    return list(found.values())


# ---- botocore's retries ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Retries:
    mode: str          # botocore's retry mode, or who retries ("sdk-js": aws-sdk-js v3 in CDK's handlers)
    max_attempts: int
    where: str         # where the client is made (why it has these settings)


STANDARD = Retries("standard", 3, "boto3's default client (botocore 1.44: retry mode standard, 3 attempts)")
# Config(retries={"max_attempts": N}) counts retries: botocore makes N + 1 attempts in all.
EXPRESS = Retries("standard", 9, "dslab/workflow/common.py express_client: Config(retries={'mode': 'standard', "
                                 "'max_attempts': 8}), 8 retries")
TRAINING = Retries("adaptive", 11, "training/dslab_train/s3source.py: Config(retries={'mode': 'adaptive', "
                                   "'max_attempts': 10}), 10 retries")
CONNECTOR = Retries("crt", 0, "s3torchconnector's own client (the AWS CRT): its retries, not botocore's")
SDK_JS = Retries("sdk-js", 3, "aws-sdk-js v3's default in CDK's handler (standard mode, 3 attempts)")
STEP_FUNCTIONS = Retries("asl", 0, "the state machine's own Retry fields")


class _Http:
    def __init__(self, status: int):
        self.status_code, self.headers = status, {}


def botocore_attempts(retries: Retries, service: str, operation: str, code: str, status: int) -> int:
    """How many requests botocore sends for an error that persists: its own retry rules decide (botocore.retries)."""
    if retries.mode not in ("standard", "adaptive"):
        return 1
    from botocore.retries import standard
    context = standard.RetryContext(attempt_number=1, operation_model=service_model(service).operation_model(operation),
                                    parsed_response={"Error": {"Code": code, "Message": ""}}, http_response=_Http(status))
    return retries.max_attempts if standard.StandardRetryConditions(retries.max_attempts).is_retryable(context) else 1


# ---- rows -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reaction:
    kind: str
    says: str = ""    # what happens, in words (the fix line itself comes from dslab/core/facts/aws_errors.py)
    marker: str | None = None   # what the product says instead of aws_errors' fix line ("": nothing to read)

    def __post_init__(self):
        if self.kind not in REACTIONS:
            raise ValueError(f"unknown reaction {self.kind}")


@dataclass(frozen=True)
class Site:
    """One call site (module, function, method) reached from ``entries`` (the first is the one tests drive), calling
    ``service``'s ``operation``; what the product does about each error."""
    entries: tuple[str, ...]
    context: str          # cli | function | custom resource | training script | local lab | state machine | cdk handler
    module: str
    function: str         # the enclosing function's qualified name, dotted (stage_express.copy)
    service: str
    operation: str
    reaction: Reaction    # for errors not named below
    by_kind: dict = field(default_factory=dict)    # aws_errors.kind -> Reaction
    by_code: dict = field(default_factory=dict)    # error code -> Reaction
    why: str = ""
    method: str = ""      # the attribute called (default: xform_name(operation))
    retries: Retries = STANDARD
    extra: tuple[Fault, ...] = ()
    injected: bool = True   # False: listed only (ASL: checked against the definition instead; code not runnable here)
    # Which call of ``call`` in ``function`` (1: the first in source order): a function that calls the same operation
    # more than once has a row per call (the fault world's injector tells them apart by
    # the line the running code stands on).
    occurrence: int = 1
    not_injected: str = ""  # why not, where injected is False
    # S3 answers AccessDenied (403) for a missing key to a caller without s3:ListBucket on it: where the code takes
    # a 403 for "missing" (dslab/workflow/common.py is_missing), it reacts as to a missing object.
    denied_is_missing: bool = False

    @property
    def call(self) -> str:
        if self.method:
            return self.method
        import botocore
        return botocore.xform_name(self.operation)

    def errors(self) -> list[Fault]:
        return documented_errors(self.service, self.operation, self.extra)

    def wire_code(self, fault: Fault) -> str:
        """The code the caller reads: S3 answers a HEAD request's error with its status alone (no body to name it)."""
        return str(fault.status) if self.service == "s3" and self.operation == "HeadObject" else fault.code

    def reaction_for(self, fault: Fault) -> Reaction:
        if fault.code in self.by_code:
            return self.by_code[fault.code]
        found = aws_errors.kind(self.wire_code(fault), fault.status)
        if self.denied_is_missing and fault.code in ("AccessDenied", "403"):
            found = "missing"
        return self.by_kind.get(found, self.reaction)

    def attempts(self, fault: Fault) -> int:
        return botocore_attempts(self.retries, self.service, self.operation, self.wire_code(fault), fault.status)

    @property
    def calls(self) -> int:
        """How many calls of ``call`` its function makes: its rows' count (the inventory test keeps it the scan's)."""
        return max(s.occurrence for s in PY_SITES if (s.module, s.function, s.call) == (self.module, self.function,
                                                                                       self.call))

    @property
    def where(self) -> str:
        """The function, and which of its calls where it makes several."""
        return self.function + (f" (call {self.occurrence} of {self.calls})" if self.calls > 1 else "")

    @property
    def key(self) -> str:
        return f"{self.entries[0]} | {self.module}:{self.where} | {self.service}:{self.operation}"


# Reactions used by many rows.
CLI_FAILS = Reaction(EXIT_2, "one line naming the fix, exit 2; nothing was started or deleted by the failed call")
MISSING_OBJECT = Reaction(ANSWER, "a missing object is an answer (404, or 403 where the caller may not list)")
PLAN_FAILS = Reaction(FINAL, "Plan answers PlanFailed with the fix: the execution fails at Plan, before any job")
COLLECT_FAILS = Reaction(FINAL, "Collect fails: Catch -> CollectFailed, teardown still runs, the execution ends "
                                "ResultsNotStored naming `dslab report EXECUTION`, which rebuilds results from "
                                "SageMaker (plan.json and every job stay)")
TEARDOWN_FAILS = Reaction(FINAL, "the Teardown function fails: Catch -> TeardownError, the execution ends "
                                 "FsxTeardownFailed saying FSx may still bill and to check `dslab fsx status`; results "
                                 "are stored before, and the idle guard stays")
GUARD_NEXT_ROUND = Reaction(WAIT, "the round fails; EventBridge retries the invocation twice, and the next round "
                                  "(every 30 minutes) looks again; FSx is deleted only by a round that saw it idle")
CHECK_WAITS = Reaction(WAIT, "not ready, not final: the next check (fsx_poll_seconds later) tries again, within "
                             "fsx_wait_checks checks")
CHECK_ENDS = Reaction(FINAL, "final: the FSx jobs are Skipped with the reason, which names the fix; the others run")
STAGE_WAITS = Reaction(WAIT, "the invocation hands the state machine its cursor with wait=true: after the Wait "
                             "(2 minutes, within 120 waits) the next invocation goes on where it stopped")
STAGE_ENDS = Reaction(FINAL, "staging ends not ready with the reason (it names the fix): the Express jobs are "
                             "Skipped with it, the others run; no stats marker was written, so a half-copied dataset "
                             "is never taken for a staged one, and its lock is released")
TRAINING_FAILS = Reaction(FINAL, "the script raises DataError with the fix: one line in /opt/ml/output/failure "
                                 "becomes the job's FailureReason, and the Run map records the job Failed")
EMPTIER_FAILS = Reaction(FINAL, "the custom resource answers FAILED with the reason (empty it with `dslab express "
                                "empty --yes`, then delete the stack again): CloudFormation stops the bucket's "
                                "deletion (DELETE_FAILED); nothing else is deleted")
CDK_FAILS = Reaction(FINAL, "the handler throws; CDK's provider answers FAILED, CloudFormation marks the resource "
                            "failed and rolls the stack back (on delete: DELETE_FAILED); deploy again")

LOCAL_JOB_FAILS = Reaction(FINAL, "the job fails with 'ClientError: <what it did> s3://...: AWS <operation> failed (code: "
                                  "message); <fix>' as its FailureReason; the workflow records it Failed, the other "
                                  "jobs run")
CHECKPOINT_SYNC_FAILS = Reaction(FINAL, "the sync stops at the refused request and the job fails with it once the "
                                        "scripts end ('ClientError: ... s3://<S3Uri>...' naming the fix): a checkpoint "
                                        "S3 did not take is never taken for synced")
JOB_RUN_FAILS = Reaction(FINAL, "the job fails: `dslab job run-local` prints '<name>: Failed - ClientError: ...' naming "
                                "the fix, exits 1, and describe.json holds the FailureReason")
PROGRESS_LOOK_WAITS = Reaction(WAIT, "this look is skipped (the live view keeps what it showed); the next, 2 s later, "
                                     "looks again, and the workflow runs on", marker="")
TRANSIENT_WAITS = {"throttled": Reaction(WAIT, "the next look (--poll seconds later) tries again; five failed looks "
                                                "in a row end it with exit 2 (the execution keeps running)"),
                   "unavailable": Reaction(WAIT, "the next look (--poll seconds later) tries again; five failed looks "
                                                  "in a row end it with exit 2 (the execution keeps running)")}
ROLE = {"Plan": "the Plan function's role", "CheckFsxData": "the CheckFsxData function's role",
        "StageExpress": "the ExpressStaging function's role", "Collect": "the Collect function's role",
        "Teardown (start)": "the Teardown function's role", "Teardown (check)": "the Teardown function's role",
        "idle guard": "the Teardown function's role", "ExpressBucketEmptier": "the emptier function's role",
        "training script": "the training job's role", "local runner": "the training job's role",
        "dslab job run-local": "the training job's role"}

OUTPUT_ENTRIES = ("dslab status", "dslab plan", "dslab run", "dslab report", "dslab fsx status", "dslab express status",
                  "dslab express empty", "dslab efs empty")
STACK_MISSING = Fault("ValidationError", 400, "CloudFormation's answer for a missing stack (\"Stack with id X does not "
                                              "exist\"; botocore's model lists no error for DescribeStacks)",
                      "Stack with id DataSourceLab-Core does not exist")
LOCK_TAKEN = (Fault("PreconditionFailed", 412, "PutObject API reference, If-None-Match: \"If the object already "
                                               "exists ... 412 Precondition Failed\""),
              Fault("ConditionalRequestConflict", 409, "PutObject API reference: \"409 Conflict ... a conflicting "
                                                       "operation occurred\""))
TRAINING_JOB_MISSING = Fault("ValidationException", 400, "SageMaker's answer for a training job that does not exist "
                                                         "(\"Requested resource not found\"; the model's ResourceNotFound "
                                                         "is not what DescribeTrainingJob sends)",
                             "Requested resource not found.")


def _cli(entries, module, function, service, operation, reaction=CLI_FAILS, **kwargs) -> Site:
    return Site(tuple([entries] if isinstance(entries, str) else entries), "cli", module, function, service, operation,
                reaction, **kwargs)


def _fn(entries, module, function, service, operation, reaction, **kwargs) -> Site:
    return Site(tuple([entries] if isinstance(entries, str) else entries), "function", module, function, service,
                operation, reaction, **kwargs)


MISSING = {"missing": MISSING_OBJECT}
CHECK = {"throttled": CHECK_WAITS, "unavailable": CHECK_WAITS}
NONE_FOUND = {code: Reaction(ANSWER, "a filter that matches nothing: none (fsx_data.NONE_FOUND)")
              for code in ("DataRepositoryAssociationNotFound", "DataRepositoryTaskNotFound")}


NOT_LINKED = {"DataRepositoryAssociationNotFound": Reaction(
    FINAL, "no association answered: the file system is not linked to S3, and the FSx jobs are Skipped saying so",
    marker="is not linked to S3")}


# CheckFsxData's reaction to FSx's own errors, stated here apart from its table (check_fsx_data.FSX_ERROR_REACTIONS):
# the test injects each and looks for the marker in the check's reason, so a changed reaction there fails here.
FSX_CHECK_REACTIONS = {
    "DataRepositoryTaskExecuting": Reaction(WAIT, "another task runs on the file system (FSx runs one at a time): the "
                                                  "import starts at a later check",
                                            marker="the import starts at a later check"),
    "InternalServerError": Reaction(WAIT, "FSx failed on its side: the next check tries again",
                                    marker="trying again at the next check"),
    "IncompatibleParameterError": Reaction(WAIT, "taken for a repeat of another request: the next check tries again "
                                                 "with a token of its own",
                                           marker="with a token of its own, at the next check"),
    "FileSystemNotFound": Reaction(FINAL, "FSx is gone: the FSx jobs are Skipped saying `dslab fsx up`",
                                   marker="bring FSx back with `dslab fsx up`, then run again"),
    "BadRequest": Reaction(FINAL, "FSx refused the request: the FSx jobs are Skipped, the reason naming `dslab fsx "
                                  "status`", marker="`dslab fsx status` shows the file system and its S3 link"),
    "UnsupportedOperation": Reaction(FINAL, "not supported on this file system: the FSx jobs are Skipped, saying "
                                            "imports need Lustre 2.12 or 2.15 linked to S3",
                                     marker="imports need a Lustre 2.12 or 2.15 file system linked to S3"),
    "ServiceLimitExceeded": Reaction(FINAL, "an FSx limit is reached: the FSx jobs are Skipped, saying to ask AWS "
                                            "Support", marker="ask AWS Support to raise it, then run again"),
}


FSX_GONE = {"FileSystemNotFound": Reaction(FINAL, "final: FSx is gone, the FSx jobs are Skipped saying `dslab fsx up`; "
                                                  "the others run", marker="`dslab fsx up`")}
STAGE = {"throttled": STAGE_WAITS, "unavailable": STAGE_WAITS}
DESCRIBE_JOB_MISSING = {"ValidationException": Reaction(ANSWER, "no such job (never created): recorded from what the "
                                                                "Run map stored"),
                        "ResourceNotFound": Reaction(ANSWER, "no such job (never created): recorded from what the Run "
                                                             "map stored")}

PY_SITES: tuple[Site, ...] = (
    # ---- the CLI: the deployed lab's stack outputs ----
    _cli(OUTPUT_ENTRIES, "dslab/cli/common.py", "outputs_from_cloudformation", "cloudformation", "DescribeStacks",
         extra=(STACK_MISSING,), why="every command that reads the deployed lab without --outputs",
         by_code={"ValidationError": Reaction(EXIT_2, "not deployed here: one line saying `make deploy FSX=up`, exit 2",
                                              marker="make deploy FSX=up")}),
    _cli("dslab doctor", "dslab/cli/common.py", "outputs_from_cloudformation", "cloudformation", "DescribeStacks",
         Reaction(GOES_ON, "the zone is checked all the same; EFS's line says it was not read and why"),
         extra=(STACK_MISSING,), by_code={"ValidationError": Reaction(ANSWER, "no lab deployed here: nothing stored")},
         why="doctor checks the zone first; what EFS holds is secondary"),
    # ---- dslab run / status / report ----
    _cli("dslab run", "dslab/cli/runs.py", "cmd_run", "stepfunctions", "StartExecution",
         why="nothing has started: the line names what to change"),
    _cli("dslab status", "dslab/cli/runs.py", "describe_progress", "stepfunctions", "DescribeExecution"),
    _cli("dslab status --wait", "dslab/cli/runs.py", "describe_progress", "stepfunctions", "DescribeExecution",
         by_kind=TRANSIENT_WAITS, why="a watch outlives a throttled look"),
    _cli("dslab status", "dslab/cli/runs.py", "describe_progress", "s3", "GetObject", by_kind=MISSING,
         why="plan.json is absent until Plan wrote it", denied_is_missing=True),
    _cli("dslab status --wait", "dslab/cli/runs.py", "describe_progress", "s3", "GetObject",
         by_kind={**MISSING, **TRANSIENT_WAITS}, denied_is_missing=True),
    _cli("dslab status", "dslab/cli/runs.py", "describe_progress", "sagemaker", "DescribeTrainingJob",
         extra=(TRAINING_JOB_MISSING,), by_code={c: Reaction(ANSWER, "not created yet: shown Pending")
                                                 for c in ("ValidationException", "ResourceNotFound")}),
    _cli("dslab status --wait", "dslab/cli/runs.py", "describe_progress", "sagemaker", "DescribeTrainingJob",
         extra=(TRAINING_JOB_MISSING,), by_kind=TRANSIENT_WAITS,
         by_code={c: Reaction(ANSWER, "not created yet: shown Pending") for c in ("ValidationException", "ResourceNotFound")}),
    _cli("dslab status", "dslab/cli/runs.py", "cmd_status", "stepfunctions", "ListExecutions",
         why="without EXECUTION: the newest"),
    _cli("dslab report", "dslab/cli/runs.py", "_results_from_execution.read", "s3", "GetObject", by_kind=MISSING,
         why="results.json, else plan.json"),
    _cli("dslab report", "dslab/cli/runs.py", "_results_from_execution", "stepfunctions", "DescribeExecution"),
    _cli("dslab report", "dslab/workflow/collect.py", "latest_attempt", "sagemaker", "DescribeTrainingJob",
         extra=(TRAINING_JOB_MISSING,), by_code={c: Reaction(ANSWER, "no such attempt: the ones before are all there are")
                                                 for c in ("ValidationException", "ResourceNotFound")},
         why="an execution without results.json: what finished"),
    _cli("dslab report", "dslab/workflow/collect.py", "job_record", "sagemaker", "DescribeTrainingJob",
         extra=(TRAINING_JOB_MISSING,), by_code=DESCRIBE_JOB_MISSING),
    _cli("dslab report", "dslab/workflow/collect.py", "_script_metrics", "s3", "GetObject",
         by_kind={"missing": Reaction(ANSWER, "no output archive (a failed job): no metrics")}, denied_is_missing=True),
    _cli("dslab report", "dslab/workflow/collect.py", "_reason", "s3", "GetObject",
         Reaction(GOES_ON, "the reason is the recorded error name", marker=""), why="the stored Cause of a failed attempt"),
    # `dslab run`: instance counts against the stats files, then the user's code
    _cli("dslab run", "dslab/workflow/plan.py", "dataset_stats", "s3", "ListObjectsV2",
         Reaction(GOES_ON, "one line says the stats file was not read and why; Plan checks the count again"),
         why="multi-instance trials only, before StartExecution"),
    _cli("dslab run", "dslab/workflow/plan.py", "dataset_stats", "s3", "GetObject",
         Reaction(GOES_ON, "one line says the stats file was not read and why; Plan checks the count again"),
         by_kind={"missing": Reaction(GOES_ON, "one line says the dataset has no stats file and how to write it; Plan "
                                               "checks again", marker="has no stats file")}, denied_is_missing=True),
    _cli(("dslab run", "dslab export --upload"), "dslab/inputs/user_code.py", "upload", "s3", "HeadObject",
         by_kind={"missing": Reaction(ANSWER, "not there yet: uploaded")}, why="the package is content-addressed"),
    *(_cli(("dslab run", "dslab export --upload"), "dslab/inputs/user_code.py", "upload", "s3", op, method="upload_file",
           injected=op == "PutObject", not_injected="a code package over 8 MB is needed for a multipart upload")
      for op in TRANSFER["upload_file"]),
    # dslab recommend --experiment --outputs
    _cli("dslab recommend --experiment", "dslab/cli/asked.py", "measured_stats", "s3", "GetObject",
         Reaction(GOES_ON, "one line says the stats file was not read and why; the experiment's own figures stand"),
         by_kind={"missing": Reaction(ANSWER, "not uploaded yet: the experiment's own figures stand")},
         denied_is_missing=True),
    # ---- dslab fsx ----
    _cli("dslab fsx status", "dslab/workflow/fsx_guard.py", "describe_stack", "cloudformation", "DescribeStacks",
         extra=(STACK_MISSING,), by_code={"ValidationError": Reaction(ANSWER, "no FSx stack: FSx is down")}),
    _cli("dslab fsx status", "dslab/workflow/fsx_guard.py", "running_executions", "stepfunctions", "ListExecutions",
         method="get_paginator:list_executions"),
    _cli("dslab fsx status", "dslab/workflow/fsx_guard.py", "last_execution_end", "stepfunctions", "ListExecutions"),
    _cli("dslab fsx status", "dslab/cli/fsx.py", "fsx_state", "ssm", "GetParameters"),
    *(_cli("dslab fsx status", "dslab/workflow/fsx_data.py", "import_status", "fsx", op, by_code=NONE_FOUND)
      for op in ("DescribeFileSystems", "DescribeDataRepositoryAssociations", "DescribeDataRepositoryTasks")),
    # dslab deploy-check (the Makefile runs it before a deploy): what it cannot read, it says, and the deploy goes on
    *(_cli("dslab deploy-check", "dslab/cli/deploy_check.py", function, "cloudformation", op,
           Reaction(GOES_ON, "one line says the deployed lab was not read and why; FSx's capacity and EFS's throughput "
                             "are not compared, and the deploy itself goes on"), method=method, extra=extra,
           by_code=by_code)
      for function, op, method, extra, by_code in (
          ("_stack", "DescribeStacks", "", (STACK_MISSING,),
           {"ValidationError": Reaction(ANSWER, "no such stack: nothing deployed to compare with")}),
          ("_resource", "GetTemplate", "", (), {}),
          ("_efs_events", "DescribeStackEvents", "get_paginator:describe_stack_events", (), {}))),
    _cli("dslab deploy-check", "dslab/cli/deploy_check.py", "fsx_actions", "fsx", "DescribeFileSystems",
         Reaction(GOES_ON, "one line says FSx's administrative actions were not read and why; whether FSx grew in the "
                           "last 6 hours is not checked, and the deploy goes on", marker="administrative actions"),
         by_code={"FileSystemNotFound": Reaction(ANSWER, "FSx is gone since: no increase to wait for")},
         why="FSx grows again only 6 hours after its last increase (managing-storage-capacity.html)"),
    _cli("dslab fsx follow-zone", "dslab/cli/fsx.py", "fsx_zone", "ssm", "GetParameter",
         by_code={"ParameterNotFound": Reaction(ANSWER, "FSx is down: nothing to move")},
         why="before a deploy that moves the lab"),
    _cli("dslab fsx follow-zone", "dslab/cli/fsx.py", "fsx_zone", "fsx", "DescribeFileSystems",
         by_code={"FileSystemNotFound": Reaction(ANSWER, "FSx is going: nothing to move")}),
    _cli("dslab fsx follow-zone", "dslab/cli/fsx.py", "fsx_zone", "ec2", "DescribeSubnets"),
    # ---- dslab express ----
    _cli(("dslab express status", "dslab express empty"), "dslab/aws/express.py", "list_objects", "s3", "ListObjectsV2"),
    _cli(("dslab express status", "dslab express empty"), "dslab/aws/express.py", "multipart_uploads", "s3",
         "ListMultipartUploads"),
    _cli("dslab express empty", "dslab/aws/express.py", "sidecar_objects", "s3", "ListObjectsV2",
         why="--dataset: its stats file and manifest beside the folder"),
    _cli("dslab express empty", "dslab/aws/express.py", "_delete", "s3", "DeleteObjects",
         why="what was deleted stays deleted; the datasets stay in the data bucket; run it again to finish"),
    _cli("dslab express empty", "dslab/aws/express.py", "empty", "s3", "AbortMultipartUpload",
         by_code={"NoSuchUpload": Reaction(ANSWER, "the upload ended meanwhile: nothing to abort")}),
    # ---- dslab efs empty (and doctor's EFS lines) ----
    _cli("dslab efs empty", "dslab/aws/efs.py", "usage", "efs", "DescribeFileSystems",
         why="before anything is deleted (the look after emptying only says it could not read the size)"),
    _cli("dslab efs empty", "dslab/aws/efs.py", "usage", "efs", "DescribeLifecycleConfiguration"),
    _cli("dslab doctor", "dslab/aws/efs.py", "usage", "efs", "DescribeFileSystems",
         Reaction(GOES_ON, "EFS's line says it was not read and why; the zone's report stands")),
    _cli("dslab doctor", "dslab/aws/efs.py", "usage", "efs", "DescribeLifecycleConfiguration",
         Reaction(GOES_ON, "EFS's line says it was not read and why; the zone's report stands")),
    _cli("dslab efs empty", "dslab/aws/efs.py", "dataset_in_s3", "s3", "GetObject",
         Reaction(GOES_ON, "the dataset's size is not known: said, and emptying goes on"), by_kind=MISSING,
         denied_is_missing=True),
    _cli("dslab efs empty", "dslab/aws/efs.py", "running_staging", "datasync", "DescribeTask"),
    _cli("dslab efs empty", "dslab/workflow/plan.py", "efs_datasets_in_use.running", "stepfunctions", "ListExecutions",
         method="get_paginator:list_executions"),
    _cli("dslab efs empty", "dslab/workflow/plan.py", "efs_datasets_in_use", "s3", "GetObject",
         by_kind={"missing": Reaction(ANSWER, "no plan.json yet: that execution is still planning, so emptying "
                                              "waits for it")}, denied_is_missing=True),
    _cli("dslab efs empty", "dslab/workflow/plan.py", "efs_datasets_in_use", "s3", "HeadObject",
         by_kind={"missing": Reaction(ANSWER, "no results.json: its EFS jobs may still read EFS")},
         denied_is_missing=True),
    _cli("dslab efs empty", "dslab/aws/efs.py", "start_empty", "datasync", "StartTaskExecution",
         why="nothing is deleted when it is refused"),
    _cli("dslab efs empty", "dslab/aws/efs.py", "wait", "datasync", "DescribeTaskExecution",
         by_kind={k: Reaction(WAIT, "the next look (--poll later) tries again; five failed looks in a row end it "
                                    "with exit 2 naming the task execution to follow (the deletion goes on in DataSync)")
                  for k in ("throttled", "unavailable")}),
    # ---- dslab doctor ----
    _cli("dslab doctor", "dslab/aws/doctor.py", "check_zone", "ec2", "DescribeAvailabilityZones"),
    _cli("dslab doctor", "dslab/aws/doctor.py", "_offering_zones", "ec2", "DescribeInstanceTypeOfferings",
         method="get_paginator:describe_instance_type_offerings"),
    _cli("dslab doctor", "dslab/aws/doctor.py", "check_zone", "fsx", "DescribeFileSystems",
         Reaction(GOES_ON, "the report says FSx did not answer and why; exit 1 (the zone is not shown to suit)")),
    _cli("dslab doctor", "dslab/aws/doctor.py", "check_zone", "logs", "DescribeResourcePolicies",
         Reaction(GOES_ON, "the report says the resource policies were not checked and why")),
    *(_cli("dslab doctor", "dslab/workflow/plan.py", "read_quotas", "service-quotas", op,
           Reaction(GOES_ON, "the report says the FSx storage quota was not checked and why"),
           method=f"get_paginator:{method}", why="the lab's FSx against the account's FSx for Lustre storage quota")
      for op, method in (("ListAWSDefaultServiceQuotas", "list_aws_default_service_quotas"),
                         ("ListServiceQuotas", "list_service_quotas"))),
    # ---- dslab dataset ----
    _cli("dslab dataset stats", "dslab/inputs/datasets.py", "stats", "s3", "ListObjectsV2",
         method="get_paginator:list_objects_v2"),
    _cli(("dslab dataset stats", "dslab dataset upload"), "dslab/inputs/datasets.py", "_put_stats", "s3", "PutObject",
         why="--write; an upload writes it last, after every object and the manifest"),
    _cli("dslab dataset upload", "dslab/inputs/datasets.py", "upload", "s3", "ListObjectsV2",
         method="get_paginator:list_objects_v2"),
    _cli("dslab dataset upload", "dslab/inputs/datasets.py", "_stored_digest", "s3", "HeadObject",
         Reaction(GOES_ON, "the object is taken as changed and sent again (a PUT; nothing is lost)", marker=""),
         by_kind={"missing": Reaction(ANSWER, "not there: sent")}, why="directory buckets: the MD5 in metadata"),
    *(_cli("dslab dataset upload", "dslab/inputs/datasets.py", "upload.send", "s3", op, method="upload_file",
           why="objects already sent stay; the same command sends only what is missing; no stats file is written, "
               "so the workflow does not take a half-uploaded dataset for a whole one",
           injected=op in ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"),
           not_injected="s3transfer aborts the upload itself when a part fails (its AbortMultipartUpload's own error "
                        "is logged, not raised)")
      for op in TRANSFER["upload_file"]),
    *(_cli("dslab dataset upload", "dslab/inputs/datasets.py", "upload", "s3", "PutObject", occurrence=occurrence,
           why=f"{what} beside the prefix; the stats file is written after them")
      for occurrence, what in ((1, "the manifest"), (2, "each metadata file (dataset.json, manifest.json)"))),

    # ---- the workflow's functions ----
    _fn("Plan", "dslab/workflow/common.py", "look_up_fsx", "ssm", "GetParameters",
        Reaction(GOES_ON, "the FSx jobs are Skipped with the reason (it names the fix); the others run")),
    _fn("Plan", "dslab/workflow/common.py", "look_up_fsx", "fsx", "DescribeFileSystems",
        Reaction(GOES_ON, "the FSx jobs are Skipped with the reason (it names the fix); the others run"),
        by_code={"FileSystemNotFound": Reaction(ANSWER, "FSx is not deployed: its jobs are Skipped, saying `dslab fsx up`")}),
    _fn("Plan", "dslab/workflow/plan.py", "dataset_stats", "s3", "ListObjectsV2", PLAN_FAILS),
    _fn("Plan", "dslab/workflow/plan.py", "dataset_stats", "s3", "GetObject", PLAN_FAILS,
        by_kind={"missing": Reaction(FINAL, "ExperimentInvalid: no stats file, saying how to write it",
                                     marker="dslab dataset stats")}, denied_is_missing=True),
    _fn("Plan", "dslab/workflow/express_staging.py", "wake_directory_bucket", "s3", "ListObjectsV2", PLAN_FAILS,
        by_code={"ServiceUnavailable": Reaction(WAIT, "an inactive directory bucket answers 503 while it wakes: asked "
                                                      "again with backoff for up to 2 minutes, then PlanFailed",
                                                marker="")},
        why="a dataset only Express jobs read, uploaded straight into the directory bucket"),
    *(_fn("Plan", "dslab/workflow/plan.py", "read_quotas", "service-quotas", op,
          Reaction(GOES_ON, "the plan says the training quotas were not checked and why; the run goes on"),
          method=f"get_paginator:{method}")
      for op, method in (("ListAWSDefaultServiceQuotas", "list_aws_default_service_quotas"),
                         ("ListServiceQuotas", "list_service_quotas"))),
    *(_fn("Plan", "dslab/workflow/plan.py", "_plan", "s3", "PutObject", PLAN_FAILS, occurrence=occurrence,
          why=f"{what}; no job has started")
      for occurrence, what in ((1, "each job's request"), (2, "plan.json"),
                               (3, "plan.json again, naming the EFS datasets other executions read"))),
    _fn("Plan", "dslab/workflow/plan.py", "deployed_lab", "fsx", "DescribeFileSystems",
        Reaction(GOES_ON, "FSx is priced as the workflow's stack was deployed (the plan's lab says its source)",
                 marker="the workflow's deploy settings")),
    _fn("Plan", "dslab/workflow/plan.py", "storage_optimization", "fsx", "DescribeFileSystems",
        Reaction(GOES_ON, "no storage optimization is recorded: the run goes on, its FSx results unmarked", marker=""),
        why="FSx rebalancing after an increase marks the run's FSx results"),
    _fn("Plan", "dslab/workflow/plan.py", "efs_datasets_in_use.running", "stepfunctions", "ListExecutions", PLAN_FAILS,
        method="get_paginator:list_executions"),
    _fn("Plan", "dslab/workflow/plan.py", "efs_datasets_in_use", "s3", "GetObject", PLAN_FAILS,
        by_kind={"missing": Reaction(ANSWER, "no plan.json yet: waited for (60 s), then left out and said")},
        denied_is_missing=True),
    _fn("Plan", "dslab/workflow/plan.py", "efs_datasets_in_use", "s3", "HeadObject", PLAN_FAILS,
        by_kind={"missing": Reaction(ANSWER, "no results.json: its EFS jobs may still run")}, denied_is_missing=True),
    # CheckFsxData: FSx's own errors by the check's table (FSX_ERROR_REACTIONS), every other by its class
    _fn("CheckFsxData", "dslab/workflow/check_fsx_data.py", "_status", "s3", "GetObject", CHECK_ENDS, by_kind=CHECK),
    _fn("CheckFsxData", "dslab/workflow/common.py", "look_up_fsx", "ssm", "GetParameters", CHECK_ENDS, by_kind=CHECK),
    _fn("CheckFsxData", "dslab/workflow/common.py", "look_up_fsx", "fsx", "DescribeFileSystems", CHECK_ENDS,
        by_kind=CHECK, by_code=FSX_GONE),
    *(_fn("CheckFsxData", "dslab/workflow/fsx_data.py", "imports_to_start", "fsx", op, CHECK_ENDS, by_kind=CHECK,
          by_code={**FSX_CHECK_REACTIONS, **NONE_FOUND}, why="datasets uploaded while FSx was up, at every check "
                                                                 "until their import starts")
      for op in ("DescribeFileSystems", "DescribeDataRepositoryAssociations", "DescribeDataRepositoryTasks")),
    _fn("CheckFsxData", "dslab/workflow/check_fsx_data.py", "_check_file_system", "fsx", "CreateDataRepositoryTask",
        CHECK_ENDS, by_kind=CHECK, by_code=dict(FSX_CHECK_REACTIONS),
        why="the import of datasets uploaded while FSx was up; one at a time on a file system"),
    *(_fn("CheckFsxData", "dslab/workflow/fsx_data.py", "import_status", "fsx", op, CHECK_ENDS, by_kind=CHECK,
          by_code={**FSX_CHECK_REACTIONS, **NONE_FOUND, **NOT_LINKED})
      for op in ("DescribeFileSystems", "DescribeDataRepositoryAssociations", "DescribeDataRepositoryTasks")),
    # StageExpress
    _fn("StageExpress", "dslab/workflow/express_staging.py", "stage_express", "s3", "GetObject", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS, why="plan.json"),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "wake_directory_bucket", "s3", "ListObjectsV2", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS,
        by_code={"ServiceUnavailable": Reaction(WAIT, "an inactive directory bucket answers 503 while it wakes: asked "
                                                      "again with backoff for up to 5 minutes, then the invocation "
                                                      "waits and the next one asks again")}),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "take_staging_lock", "s3", "PutObject", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS, extra=LOCK_TAKEN,
        by_code={"PreconditionFailed": Reaction(ANSWER, "another execution holds the dataset's lock: it is read"),
                 "ConditionalRequestConflict": Reaction(ANSWER, "another execution took the lock at that moment: it "
                                                                "is read")}),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "take_staging_lock", "s3", "GetObject", STAGE_ENDS,
        by_kind={**STAGE, "missing": Reaction(ANSWER, "released meanwhile: taken again")}, retries=EXPRESS,
        denied_is_missing=True),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "take_staging_lock", "s3", "DeleteObject", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS, why="a stale lock (its holder died) is taken over"),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "_same_stats", "s3", "GetObject", STAGE_ENDS,
        by_kind={**STAGE, "missing": Reaction(ANSWER, "no stats marker: not staged yet")}, retries=EXPRESS,
        denied_is_missing=True),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "_clear_prefix", "s3", "DeleteObject", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS, why="the stats marker goes first, so a cleared prefix is never taken as staged"),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "_clear_prefix", "s3", "ListObjectsV2", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "_clear_prefix", "s3", "DeleteObjects", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "stage_express.stage", "s3", "ListObjectsV2", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS, why="the source prefix, a page at a time"),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "stage_express.copy", "s3", "CopyObject", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS, why="the cursor still points at the batch: it is copied again"),
    *(_fn("StageExpress", "dslab/workflow/express_staging.py", "stage_express.copy", "s3", op, STAGE_ENDS, by_kind=STAGE,
          retries=EXPRESS, method="copy", why="objects over 5 GB: a managed multipart copy",
          injected=op in ("HeadObject", "CopyObject"),
          not_injected="a multipart copy needs a source over s3transfer's 8 MB threshold copied through the 5 GB "
                       "branch: HeadObject and CopyObject of this branch are injected")
      for op in TRANSFER["copy"]),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "stage_express.stage", "s3", "PutObject", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS, why="the stats marker, written after every object"),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "release_staging_lock", "s3", "GetObject", STAGE_ENDS,
        by_kind={**STAGE, "missing": Reaction(ANSWER, "no lock: nothing to release")}, retries=EXPRESS,
        denied_is_missing=True),
    _fn("StageExpress", "dslab/workflow/express_staging.py", "release_staging_lock", "s3", "DeleteObject", STAGE_ENDS,
        by_kind=STAGE, retries=EXPRESS),
    # Collect
    _fn("Collect", "dslab/workflow/collect.py", "collect", "s3", "GetObject", COLLECT_FAILS, why="plan.json"),
    _fn("Collect", "dslab/workflow/collect.py", "job_record", "sagemaker", "DescribeTrainingJob", COLLECT_FAILS,
        extra=(TRAINING_JOB_MISSING,), by_code=DESCRIBE_JOB_MISSING),
    _fn("Collect", "dslab/workflow/collect.py", "_script_metrics", "s3", "GetObject", COLLECT_FAILS,
        by_kind={"missing": Reaction(ANSWER, "no output archive (a failed job): no metrics")}, denied_is_missing=True),
    _fn("Collect", "dslab/workflow/collect.py", "_reason", "s3", "GetObject",
        Reaction(GOES_ON, "the record's reason is the recorded error name", marker="")),
    _fn(("Collect", "Teardown (start)"), "dslab/workflow/common.py", "put_json", "s3", "PutObject", COLLECT_FAILS,
        why="results.json (the Teardown's outcome too: there the function fails and the Catch says so)"),
    _fn("Collect", "dslab/workflow/collect.py", "collect", "s3", "PutObject", COLLECT_FAILS,
        why="results.csv, after results.json"),
    # Teardown
    _fn("Teardown (start)", "dslab/workflow/teardown.py", "teardown_blocker", "stepfunctions", "ListExecutions",
        TEARDOWN_FAILS, method="get_paginator:list_executions"),
    _fn("Teardown (start)", "dslab/workflow/teardown.py", "teardown_blocker", "s3", "GetObject", TEARDOWN_FAILS,
        by_kind={"missing": Reaction(ANSWER, "no plan.json: that execution is still planning, so FSx is kept "
                                             "(DEFERRED)")}, denied_is_missing=True),
    _fn("Teardown (start)", "dslab/workflow/teardown.py", "teardown_blocker", "s3", "HeadObject",
        Reaction(GOES_ON, "not read: taken as 'still running', so FSx is kept (DEFERRED, said in results.json) and "
                          "the idle guard takes it down later", marker="DEFERRED"),
        by_kind={"missing": Reaction(ANSWER, "no results.json: that execution still has FSx jobs, so FSx is kept "
                                             "(DEFERRED)")}),
    _fn(("Teardown (start)", "idle guard"), "dslab/workflow/fsx_guard.py", "describe_stack", "cloudformation",
        "DescribeStacks", TEARDOWN_FAILS, extra=(STACK_MISSING,),
        by_code={"ValidationError": Reaction(ANSWER, "no FSx stack: ALREADY_GONE")}),
    _fn("Teardown (check)", "dslab/workflow/fsx_guard.py", "describe_stack", "cloudformation", "DescribeStacks",
        TEARDOWN_FAILS, extra=(STACK_MISSING,),
        by_kind={k: Reaction(WAIT, "the check is counted, not final: the next one (30 s later) looks again, within "
                                   "90 checks") for k in ("throttled", "unavailable")},
        by_code={"ValidationError": Reaction(ANSWER, "the stack is gone: DELETE_COMPLETE")}),
    _fn(("Teardown (start)", "idle guard"), "dslab/workflow/fsx_guard.py", "jobs_reading", "sagemaker",
        "ListTrainingJobs", TEARDOWN_FAILS, method="get_paginator:list_training_jobs",
        why="a training job outside the workflow may read FSx"),
    _fn(("Teardown (start)", "idle guard"), "dslab/workflow/fsx_guard.py", "jobs_reading", "sagemaker",
        "DescribeTrainingJob", TEARDOWN_FAILS),
    _fn("Teardown (start)", "dslab/workflow/teardown.py", "teardown", "cloudformation", "DeleteStack", TEARDOWN_FAILS),
    _fn("Teardown (start)", "dslab/workflow/teardown.py", "_record_teardown", "s3", "GetObject", TEARDOWN_FAILS,
        by_kind={"missing": Reaction(ANSWER, "no results.json (Collect could not store it): teardown.json holds the "
                                             "outcome")}, denied_is_missing=True),
    _fn("idle guard", "dslab/workflow/fsx_guard.py", "running_executions", "stepfunctions", "ListExecutions",
        GUARD_NEXT_ROUND, method="get_paginator:list_executions"),
    _fn("idle guard", "dslab/workflow/fsx_guard.py", "last_execution_end", "stepfunctions", "ListExecutions",
        GUARD_NEXT_ROUND),
    _fn("idle guard", "dslab/workflow/fsx_guard.py", "guard", "cloudformation", "DeleteStack", GUARD_NEXT_ROUND),

    # ---- the Express emptier custom resource ----
    *(Site(("ExpressBucketEmptier",), "custom resource", "stacks/components/express_empty/index.py", function, "s3", op,
           EMPTIER_FAILS, by_code={"NoSuchBucket": Reaction(ANSWER, "no bucket: already empty"), **extra_codes})
      for function, op, extra_codes in (
          ("delete_pass", "ListObjectsV2", {}), ("_delete_batch", "DeleteObjects", {}),
          ("abort_uploads", "ListMultipartUploads", {}),
          ("abort_uploads", "AbortMultipartUpload", {"NoSuchUpload": Reaction(ANSWER, "ended meanwhile: nothing to "
                                                                                      "abort")}))),

    # ---- the local lab (dslab/local): its runner, checkpoint sync and progress, against the stand-in ----
    *(Site(("local runner",), "local lab", "dslab/local/storage.py", function, "s3", op, reaction, method=method,
           by_kind=by_kind, why=why)
      for function, op, method, reaction, by_kind, why in (
          ("LabStorage.list_objects", "ListObjectsV2", "get_paginator:list_objects_v2", LOCAL_JOB_FAILS, {},
           "an S3 channel's objects, then the CheckpointConfig S3Uri before the copy-in"),
          ("LabStorage.read_object", "GetObject", "", LOCAL_JOB_FAILS,
           {"missing": Reaction(FINAL, "the job fails: 'ClientError: training code s3://... not found: upload "
                                       "sourcedir.tar.gz there'", marker="not found: upload sourcedir.tar.gz there")},
           ("the training code (sagemaker_submit_directory); also a ManifestFile channel's manifest and Pipe mode's "
            "objects")),
          ("LabStorage.download", "GetObject", "", LOCAL_JOB_FAILS, {},
           "a File channel's objects (Downloading), then the checkpoints copied in"),
          ("LabStorage.put_object", "PutObject", "", Reaction(
              FINAL, "the job fails in its Uploading phase with the archive's refused upload: 'ClientError: uploading "
                     "s3://.../model.tar.gz ...' naming the fix; the workflow records it Failed"), {},
           "model.tar.gz and output.tar.gz after the script"),
          ("LabStorage.upload", "PutObject", "", CHECKPOINT_SYNC_FAILS, {}, "the checkpoint sync's uploads"),
          ("LabStorage.delete_object", "DeleteObject", "", CHECKPOINT_SYNC_FAILS, {},
           "the checkpoint sync's deletions (a checkpoint the script removed)"))),
    *(Site(("dslab job run-local",), "local lab", "dslab/local/job_storage.py", function, "s3", op, JOB_RUN_FAILS,
           why=why)
      for function, op, why in (
          ("FolderStorage.s3_environment", "CreateBucket", ("a Script job's endpoint (moto's S3 server the command "
                                                            "starts): each bucket its script reads")),
          ("FolderStorage.s3_environment", "PutObject", "the objects under its dataset_uri and checkpoint S3 URI"),
          ("FolderStorage.upload", "PutObject", "the checkpoint sync's uploads, for the script to list"),
          ("FolderStorage.delete_object", "DeleteObject", "the checkpoint sync's deletions"))),
    Site(("dslab local",), "local lab", "dslab/local/lab.py", "LocalLab.run.progress", "sagemaker", "ListTrainingJobs",
         PROGRESS_LOOK_WAITS, why="the live view's look at the jobs, every 2 s"),
    Site(("dslab local",), "local lab", "dslab/local/lab.py", "LocalLab.run.progress", "sagemaker",
         "DescribeTrainingJob", PROGRESS_LOOK_WAITS, extra=(TRAINING_JOB_MISSING,),
         why="each job that has not ended"),
    Site(("dslab local (interrupted)",), "local lab", "dslab/local/lab.py", "FinishedJobs.sweep", "sagemaker",
         "ListTrainingJobs", Reaction(GOES_ON, "the partial report is written all the same, with the jobs recorded "
                                               "as they ended (those that ended since the last look are left out)",
                                      marker=""),
         why="on Ctrl-C or SIGTERM: the jobs that ended since the last look"),

    # ---- the training script (Script mode) ----
    Site(("training script", "checkpoint writer (durability)"), "training script", "training/dslab_train/s3source.py",
         "S3Reads.list", "s3", "ListObjectsV2", TRAINING_FAILS, method="get_paginator:list_objects_v2", retries=TRAINING,
         why="a checkpoint writer lists its checkpoint S3 URI until SageMaker's sync has uploaded each checkpoint "
             "(train.py durable_listing)"),
    Site(("training script",), "training script", "training/dslab_train/s3source.py", "S3Reads.get", "s3", "GetObject",
         TRAINING_FAILS, retries=TRAINING, occurrence=2, why="boto3's read (the connector's is the first call)"),
    Site(("training script",), "training script", "training/dslab_train/s3source.py", "S3Reads.get_range", "s3",
         "GetObject", TRAINING_FAILS, retries=TRAINING, occurrence=2, why="boto3's read (the connector's is the first "
                                                                         "call)"),
    *(Site(("training script (s3torchconnector)",), "training script", "training/dslab_train/s3source.py", function,
           "s3", op, Reaction(FINAL, "the connector raises; train.py's last catch writes '<type>: <message>' to "
                                     "/opt/ml/output/failure (the job's FailureReason)"),
           method=method, retries=CONNECTOR, injected=False,
           not_injected="s3torchconnector is not installed here (only the 2.5-2.10 PyTorch images carry it)",
           why="the connector lists with ListObjectsV2")
      for function, op, method in (("S3Reads.list", "ListObjectsV2", "list_objects"), ("S3Reads.get", "GetObject", "get_object"),
                                   ("S3Reads.get_range", "GetObject", "get_object"))),
)


# ---- the state machine ---------------------------------------------------------------------------------------------
# Error names as Step Functions gives them: "If an AWS SDK integration encounters an error, the resulting Error
# field will be composed of the service name and the error name, separated by a period character:
# ServiceName.ErrorName. Both the service name and error name are in Pascal case ... always add the Exception suffix"
# (https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html). An error the service's model
# does not declare comes as the SDK's own exception: AWS's SageMaker example retries
# "SageMaker.AmazonSageMakerException" (https://docs.aws.amazon.com/step-functions/latest/dg/connect-sagemaker.html),
# and CDK's default Lambda retrier names "Lambda.AWSLambdaException".
# An SDK knows an error by name when the service's model declares it anywhere (botocore's errorfactory makes a class for
# every exception shape, as the AWS SDK for Java does); SageMaker's optimized integration is named by the operation's
# own errors (the stand-in's rule, dslab/emulator/patches/sagemaker.py step_functions_error).
SFN_SERVICE = {"s3": ("S3", "S3Exception"), "datasync": ("DataSync", "DataSyncException"),
               "sagemaker": ("SageMaker", "AmazonSageMakerException"), "lambda": ("Lambda", "AWSLambdaException")}


@functools.lru_cache(maxsize=None)
def _service_exceptions(service: str) -> frozenset[str]:
    model = service_model(service)
    return frozenset(n for n in model.shape_names if model.shape_for(n).metadata.get("exception"))


def step_functions_error(service: str, operation: str, code: str) -> str:
    name, base = SFN_SERVICE[service]
    known = ({c for c, _ in modelled_errors(service, operation)} if service == "sagemaker"
             else _service_exceptions(service))
    if code not in known:
        return f"{name}.{base}"
    return f"{name}.{code}" + ("" if code.endswith("Exception") else "Exception")


@dataclass(frozen=True)
class StateSite:
    """A Task state of the state machine: its integration, and what its Retry and Catch do (the tests read both from
    the synthesized definition and fail where this says otherwise)."""
    state: str
    service: str
    operation: str
    catch: str                      # where States.ALL goes
    says: str                       # what that means for the run
    retriers: tuple["Retrier", ...] = ()   # the state's Retry fields (before any Catch)
    caught: dict = field(default_factory=dict)      # error name -> (state, says): a Catch before States.ALL
    classify: str = ""              # the Choice the Catch leads to, which decides by the error's name and Cause
    classified: dict = field(default_factory=dict)  # error code -> (the Choice's next state, says)
    classified_default: tuple[str, str] = ("", "")

    @property
    def context(self) -> str:
        return "state machine"

    def errors(self) -> list[Fault]:
        return documented_errors(self.service, self.operation)

    def outcome(self, fault: Fault) -> tuple[str, bool, str, str]:
        """(error name, the Retry that retries it or None, the state the Catch goes to, what happens)."""
        name = step_functions_error(self.service, self.operation, fault.code)
        target, says = self.caught.get(name, (self.catch, self.says))
        if self.classify and target == self.classify:
            _, says = self.classified.get(fault.code, self.classified_default)
        retrier = next((r for r in self.retriers if name in r.errors), None)
        return name, retrier, target, says


@dataclass(frozen=True)
class Retrier:
    """One Retry field as the definition states it. ASL's MaxAttempts counts retries: the task is tried 1 + that."""
    errors: tuple[str, ...]
    interval: int
    max_attempts: int
    backoff: float

    @property
    def tries(self) -> int:
        return 1 + self.max_attempts

    def says(self) -> str:
        waits = [int(self.interval * self.backoff ** i) for i in range(self.max_attempts)]
        return (f"Retry ({self.max_attempts} retries after {', '.join(map(str, waits[:-1]))} and {waits[-1]} s: "
                f"{self.tries} attempts)")


# CDK's LambdaInvoke retries Lambda's service errors (retryOnServiceExceptions) and the workflow adds throttling
# (stacks/components/workflow.py _invoke), both every 2 s doubling, 6 retries.
LAMBDA_RETRIERS = (Retrier(("Lambda.ClientExecutionTimeoutException", "Lambda.ServiceException",
                            "Lambda.AWSLambdaException", "Lambda.SdkClientException"), 2, 6, 2),
                   Retrier(("Lambda.TooManyRequestsException",), 2, 6, 2))
DATASYNC_TRANSIENT = ("DataSync.ThrottlingException", "DataSync.ServiceUnavailableException",
                      "DataSync.InternalException")


def _training(kind: str) -> StateSite:
    retry = (f"{kind}ApiBackOffDelay", "retried after a random wait up to 30, 60, 120, 240 and 480 s (full jitter), "
                                       "5 times at most; then recorded Failed with its Cause kept under failures/")
    failed = ("HasCause?", "recorded Failed: its Cause goes to failures/ and becomes the record's reason; the other "
                           "jobs run")
    return StateSite(f"Run{kind}TrainingJob", "sagemaker", "CreateTrainingJob", f"Classify{kind}Error",
                     "classified by its name and Cause", classify=f"Classify{kind}Error",
                     classified={"ThrottlingException": retry, "ResourceLimitExceeded": retry,
                                 "ServiceUnavailable": retry, "InternalFailure": retry},
                     classified_default=failed)


TEARDOWN_FAILED = ("the execution ends FsxTeardownFailed: FSx may still bill, check `dslab fsx status`; the idle "
                   "guard stays")


STATE_SITES: tuple[StateSite, ...] = (
    StateSite("Plan", "lambda", "Invoke", "PlanDidNotFinish", "the execution fails PlanFailed: \"Plan did not finish "
              "(<error>)\"; no job has started", LAMBDA_RETRIERS),
    StateSite("CheckFsxData", "lambda", "Invoke", "FsxCheckFailed", "FSx readiness ends final: the FSx jobs are "
              "Skipped (FsxDataNotReady), the others run", LAMBDA_RETRIERS),
    StateSite("StageExpress", "lambda", "Invoke", "ExpressStagingFailed", "Express staging ends not ready: the Express "
              "jobs are Skipped (ExpressNotStaged), the others run", LAMBDA_RETRIERS),
    StateSite("Collect", "lambda", "Invoke", "CollectFailed", "teardown still runs; the execution ends "
              "ResultsNotStored naming `dslab report EXECUTION`", LAMBDA_RETRIERS),
    *(StateSite(name, "lambda", "Invoke", "TeardownError", TEARDOWN_FAILED, LAMBDA_RETRIERS)
      for name in ("StartTeardown", "CheckTeardown")),
    StateSite("StartEfsSync", "datasync", "StartTaskExecution", "EfsStagingFailed", "staging ends ERROR: the EFS jobs "
              "are recorded Failed (EfsStagingFailed, the DataSync task's log group named), the others run"),
    StateSite("DescribeEfsSync", "datasync", "DescribeTaskExecution", "EfsStagingFailed", "staging ends ERROR: the EFS "
              "jobs are recorded Failed (EfsStagingFailed), the others run",
              caught={name: ("EfsSyncLookFailed", "counted as a check, not final: the next look (2 minutes later) "
                                                  "tries again, within efs_wait_checks") for name in DATASYNC_TRANSIENT}),
    StateSite("CancelEfsSync", "datasync", "CancelTaskExecution", "EfsStagingTimedOut", "staging ends TIMED_OUT: the "
              "EFS jobs are recorded Failed, the others run"),
    StateSite("LoadRequest", "s3", "GetObject", "HasCause?", "the job is recorded Failed with the error's name; its "
              "Cause is kept under failures/ for the record's reason; the other jobs run"),
    StateSite("KeepFailureCause", "s3", "PutObject", "RecordFailed", "the job is recorded Failed with the error name "
              "only (the Cause is not kept); the other jobs run"),
    _training(""),
    _training("Script"),
    _training("Checkpoint"),   # a checkpoint trial's SageMaker-sync job: no channel, a CheckpointConfig
)


# ---- aws-cdk-lib's own custom resource handlers ------------------------------------------------------------------
@dataclass(frozen=True)
class HandlerSite:
    resource_type: str
    service: str
    operation: str
    reaction: Reaction
    by_code: dict = field(default_factory=dict)
    variant: str = ""          # a synthesis setting the resource appears with ("": the default lab)
    source: str = ""

    @property
    def context(self) -> str:
        return "cdk handler"

    def errors(self) -> list[Fault]:
        extra = ()
        if self.operation.startswith("Revoke"):
            extra = (Fault("InvalidPermission.NotFound", 400, "EC2 error codes: \"The specified rule does not exist "
                                                              "in this security group\""),)
        return documented_errors(self.service, self.operation, extra)


HANDLER_SITES: tuple[HandlerSite, ...] = (
    *(HandlerSite("Custom::VpcRestrictDefaultSG", "ec2", op, CDK_FAILS,
                  {"InvalidPermission.NotFound": Reaction(ANSWER, "the rule is already gone: ignored")}
                  if op.startswith("Revoke") else {},
                  source="aws-cdk-lib custom-resource-handlers/dist/aws-ec2/restrict-default-security-group-handler")
      for op in ("RevokeSecurityGroupEgress", "RevokeSecurityGroupIngress", "AuthorizeSecurityGroupIngress",
                 "AuthorizeSecurityGroupEgress")),
    *(HandlerSite("Custom::S3AutoDeleteObjects", "s3", op, CDK_FAILS, variant="disposableBucket=true",
                  source="aws-cdk-lib custom-resource-handlers/dist/aws-s3/auto-delete-objects-handler")
      for op in ("GetBucketTagging", "GetBucketPolicy", "PutBucketPolicy", "ListObjectVersions", "DeleteObjects")),
)


# ---- the inventory from the code -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CallSite:
    module: str
    function: str
    call: str          # the operation's method name, get_paginator:<op>, or a transfer method
    line: int
    end_line: int = 0  # the last line of the reference (a call split over lines: its frame is on one of them)
    occurrence: int = 1   # which reference to ``call`` in ``function``, in source order (1: the first)


@functools.lru_cache(maxsize=None)
def _method_names() -> frozenset[str]:
    import botocore
    names = {botocore.xform_name(op) for s in SERVICES for op in service_model(s).operation_names}
    return frozenset(names | set(TRANSFER))


def _scanned_files(root: Path = REPO) -> list[Path]:
    files: list[Path] = []
    for entry in SCANNED:
        path = root / entry
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    skip = tuple(NOT_SCANNED)
    return [f for f in files if not f.relative_to(root).as_posix().startswith(skip)]


def scan(root: Path = REPO) -> list[CallSite]:
    """Every reference to an operation (or a paginator or transfer) in the scanned code, by enclosing function."""
    names = _method_names()
    found: list[tuple[CallSite, int]] = []   # and the reference's column
    for path in _scanned_files(root):
        module = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        stack: list[str] = []

        class Visitor(ast.NodeVisitor):
            def visit_FunctionDef(self, node):
                stack.append(node.name)
                self.generic_visit(node)
                stack.pop()
            visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

            def visit_Call(self, node):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "get_paginator":
                    # A paginator named by a variable cannot be listed: "?" has no row, so the test names it.
                    named = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else "?"
                    found.append((CallSite(module, ".".join(stack), f"get_paginator:{named}", node.lineno,
                                           node.func.end_lineno), node.col_offset))
                    for arg in node.keywords:
                        self.visit(arg)
                    self.visit(func.value)
                    return
                self.generic_visit(node)

            def visit_Attribute(self, node):
                if node.attr in names and isinstance(node.ctx, ast.Load):
                    if (module, ".".join(stack), node.attr) not in NOT_AWS:
                        found.append((CallSite(module, ".".join(stack), node.attr, node.lineno, node.end_lineno),
                                      node.col_offset))
                self.generic_visit(node)

        Visitor().visit(tree)
    # Each reference numbered in source order within its function.
    counted: dict[tuple[str, str, str], int] = {}
    numbered = []
    for site, _ in sorted(found, key=lambda found: (found[0].module, found[0].line, found[1])):
        key = (site.module, site.function, site.call)
        counted[key] = counted.get(key, 0) + 1
        numbered.append(replace(site, occurrence=counted[key]))
    return numbered


@functools.lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def python_qualname(function: str, module: str, root: Path = REPO) -> str:
    """The dotted name as Python's co_qualname gives it (nested functions under '<locals>')."""
    tree = _tree(root / module)
    parts = function.split(".")
    out, scope = [], tree.body
    for part in parts:
        node = next(n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and n.name == part)
        if out and out[-1][1] is not ast.ClassDef:
            out.append(("<locals>", None))
        out.append((part, type(node)))
        scope = node.body
    return ".".join(name for name, _ in out)


def cli_service_of(operation: str) -> str | None:
    """The service of an operation the CLI calls (None where two services share the name: DescribeFileSystems)."""
    services = {site.service for site in PY_SITES if site.context == "cli" and site.operation == operation}
    return services.pop() if len(services) == 1 else None


# ---- the table ---------------------------------------------------------------------------------------------------
def _who(site: Site) -> str | None:
    return None if site.context == "cli" else ROLE.get(site.entries[0], "its role")


def pair_rows() -> list[dict]:
    """Every (site, error) pair with its reaction, for the table and the counts."""
    rows = []
    for site in PY_SITES:
        for fault in site.errors():
            reaction = site.reaction_for(fault)
            attempts = site.attempts(fault)
            fix = aws_errors.fix(fault.code, fault.status, operation=site.operation, service=site.service,
                                 who=_who(site))
            rows.append({"context": site.context, "where": f"{'; '.join(site.entries)}: `{site.module}` "
                         f"{site.where}", "operation": f"{site.service}:{site.operation}", "error": fault.code,
                         "source": fault.source, "attempts": attempts, "retries": site.retries, "reaction": reaction.kind,
                         "says": reaction.says, "fix": fix if reaction.kind in (EXIT_2, FINAL, WAIT, GOES_ON) and reaction.marker != "" else "",
                         "injected": site.injected, "not_injected": site.not_injected, "entries": site.entries})
    for state in STATE_SITES:
        for fault in state.errors():
            name, retrier, target, says = state.outcome(fault)
            waits = target in ("EfsSyncLookFailed",) or "ApiBackOffDelay" in state.classified.get(fault.code, ("",))[0]
            rows.append({"context": "state machine", "where": f"state `{state.state}`",
                         "operation": f"{state.service}:{state.operation}", "error": f"{fault.code} ({name})",
                         "source": fault.source, "attempts": retrier.tries if retrier else 1, "retries": STEP_FUNCTIONS,
                         "reaction": WAIT if waits else FINAL,
                         "says": f"{retrier.says() + ', then ' if retrier else ''}Catch -> {target}: {says}", "fix": "",
                         "injected": False, "not_injected": "checked against the definition",
                         "entries": (state.state,), "state": state, "name": name})
    for handler in HANDLER_SITES:
        for fault in handler.errors():
            reaction = handler.by_code.get(fault.code, handler.reaction)
            rows.append({"context": "cdk handler", "where": f"{handler.resource_type}"
                         + (f" ({handler.variant} only)" if handler.variant else ""),
                         "operation": f"{handler.service}:{handler.operation}", "error": fault.code,
                         "source": fault.source, "attempts": 3 if aws_errors.is_transient_code(fault.code, fault.status)
                         else 1, "retries": SDK_JS, "reaction": reaction.kind, "says": reaction.says, "fix": "",
                         "injected": False, "not_injected": "aws-cdk-lib's JavaScript handler: not run here",
                         "entries": (handler.resource_type,)})
    return rows


def counts(rows: list[dict] | None = None) -> dict:
    rows = pair_rows() if rows is None else rows
    by_reaction: dict[str, int] = {}
    for row in rows:
        by_reaction[row["reaction"]] = by_reaction.get(row["reaction"], 0) + 1
    python = [r for r in rows if r["context"] not in ("state machine", "cdk handler")]
    return {"call sites": len(PY_SITES) + len(STATE_SITES) + len(HANDLER_SITES),
            "operations": len({r["operation"] for r in rows}), "pairs": len(rows),
            "injected": sum(1 for r in rows if r["injected"]),
            "checked against the definition": sum(1 for r in rows if r["context"] == "state machine"),
            "listed only": sum(1 for r in rows if not r["injected"] and r["context"] != "state machine"),
            "retried first": sum(1 for r in rows if r["attempts"] > 1),
            "python pairs": len(python), "by reaction": dict(sorted(by_reaction.items()))}


def markdown() -> str:
    rows = pair_rows()
    figures = counts(rows)
    out = ["# The fault matrix", "",
           "Every AWS operation DataSourceLab calls, the errors it may answer (botocore's model of the operation, "
           "AWS's common errors as the service's protocol sends them, and the answers named below), and what the "
           "product does about each. Generated from `dslab/aws/faults.py` (`python -m dslab.aws.faults --write`); "
           "`tests/test_fault_matrix.py` lists the call sites from the code, injects every pair marked injected "
           "(the stand-in answers that error in the service's own protocol, so botocore parses and retries it as on "
           "AWS) and checks the state machine's rows against its synthesized definition.", "",
           f"**{figures['pairs']} (operation, error) pairs** at {figures['call sites']} call sites over "
           f"{figures['operations']} operations: {figures['injected']} injected, "
           f"{figures['checked against the definition']} checked against the state machine's definition, "
           f"{figures['listed only']} listed only (code that does not run here); {figures['retried first']} are "
           "retried with bounded backoff before the reaction.", "",
           "| reaction | pairs | what it means |", "|---|---|---|"]
    meaning = {EXIT_2: "the CLI prints one line `dslab: error: ...` naming the fix and exits 2",
               WAIT: "a polling step is not final: its next check tries again, within the loop's cap",
               FINAL: "the step or execution ends with a reason that names the fix",
               ANSWER: "the error is information the code expects (a missing object, a stack that is gone)",
               GOES_ON: "a best-effort read: said, and the command or step goes on without it"}
    for kind in REACTIONS:
        out.append(f"| {kind} | {figures['by reaction'].get(kind, 0)} | {meaning[kind]} |")
    out += ["", "Errors per operation: botocore's error shapes for the operation (\"model\"); AWS's common errors as "
            "the service's protocol sends them (\"common\"), which botocore's models leave out; and answers the code "
            "handles that neither lists (their source beside them). The common errors, by protocol:", "",
            "| protocol | services | errors (code, HTTP status) | source |", "|---|---|---|---|"]
    for name, (source, errors) in (("JSON, REST-JSON, RPC v2 CBOR", PROTOCOL_COMMON["json"]),
                                   ("query", PROTOCOL_COMMON["query"]), ("REST-XML", PROTOCOL_COMMON["rest-xml"]),
                                   ("EC2", PROTOCOL_COMMON["ec2"])):
        members = ", ".join(s for s in SERVICES if PROTOCOL_COMMON[protocol(s)][0] == source)
        out.append(f"| {name} | {members} | " + ", ".join(f"{c.code} ({c.status})" for c in errors) + f" | {source} |")
    out += ["", "S3's listings (" + ", ".join(S3_LISTINGS) + ") also answer NoSuchBucket (404). Not added: the "
            "common errors that concern the request's form or the SDK itself (IncompleteSignature, "
            "MalformedHttpRequestException, InvalidAction, MissingParameter, OptInRequired): botocore signs and "
            "forms every request, and none of them is a condition the product could meet and react to.", "",
            "What it covers, exactly: **injected** pairs are answered by the stand-in at that call site, through the "
            "entry point a user or AWS runs, and the test asserts the reaction and, for an answer or a goes-on, its "
            "effect (the line shown, the request still sent, the record written, the resource kept); the **state "
            "machine's** pairs are checked against the synthesized definition (each Retry and Catch field against "
            "values stated in the test) and executed for one error of each kind (retried, caught, failed); "
            "**listed only** pairs are code that does not run here (aws-cdk-lib's JavaScript handlers, "
            "s3torchconnector's client, multipart branches of transfers): their reaction is the one stated, not "
            "tested. The **local lab**'s calls (dslab/local: the local runner's S3 reads and writes, its checkpoint "
            "sync, `dslab job run-local`'s Script endpoint, `dslab local`'s looks at the jobs) are rows like the "
            "others, injected where its stand-in answers, with each operation's errors as AWS sends them (the stand-in "
            "itself sends only some: a missing object or bucket). A function that calls an operation more than once has a row per call "
            "(\"call 2 of 3\"), each injected alone. Not in the matrix: errors an API reference lists for an "
            "operation where botocore's model does not and none of the above names them.", "",
            "Retries: " + "; ".join(f"{r.mode}{f', {r.max_attempts} attempts' if r.max_attempts else ''}: {r.where}"
                                    for r in (STANDARD, EXPRESS, TRAINING, CONNECTOR, SDK_JS, STEP_FUNCTIONS)) + ".",
            "", "Not scanned: " + "; ".join(f"`{k}`: {v}" for k, v in NOT_SCANNED.items()) + "; `examples/`: "
            "templates the user copies and owns.", ""]
    for context, title in (("cli", "The CLI"), ("function", "The workflow's functions"),
                           ("state machine", "The state machine's integrations"),
                           ("custom resource", "The project's custom resource"),
                           ("training script", "The training script (Script mode)"),
                           ("local lab", "The local lab (dslab/local, against its stand-in)"),
                           ("cdk handler", "aws-cdk-lib's custom resource handlers")):
        chosen = [r for r in rows if r["context"] == context]
        if not chosen:
            continue
        out += [f"## {title}", "", "| where | operation | error | source | tries | reaction | what happens |",
                "|---|---|---|---|---|---|---|"]
        for row in chosen:
            says = row["says"] + (f". Fix said: \"{row['fix']}\"" if row["fix"] else "")
            if not row["injected"] and row["not_injected"] and context != "state machine":
                says += f" (not injected: {row['not_injected']})"
            source = row["source"] if row["source"] in ("model", "common") else "documented: " + row["source"]
            cells = [row["where"], row["operation"], row["error"], source, str(row["attempts"]), row["reaction"], says]
            out.append("| " + " | ".join(c.replace("|", "/").replace("\n", " ") for c in cells) + " |")
        out.append("")
    return "\n".join(out)


DOC = REPO / "docs" / "reference" / "fault-matrix.md"


def main(argv: list[str] | None = None) -> int:
    import sys
    argv = sys.argv[1:] if argv is None else argv
    text = markdown()
    if "--write" in argv:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text)
        print(f"wrote {DOC.relative_to(REPO)}: " + ", ".join(f"{k} {v}" for k, v in counts().items()))
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
