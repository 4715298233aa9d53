"""What an AWS error means, in one line that names the fix: the CLI prints it (`dslab: error: ...`, exit 2), the
workflow's functions put it in their results, the training script in its failure file. Standard library only: the
Lambda package carries dslab.core, and botocore's ClientError is read by duck typing (``response``,
``operation_name``).

Every (operation, error) pair the product can meet, and what it does about it, is the fault matrix
(dslab/aws/faults.py, docs/reference/fault-matrix.md); this module holds the words and the classes:
- throttled: the codes botocore's retry handlers treat as throttling (botocore/data/_retry.json "throttling" and
  botocore/retries/standard.py) plus what the services' error references name: S3 "SlowDown" ("Please reduce your
  request rate", 503), EC2 "RequestLimitExceeded", the common errors' "ThrottlingException";
- unavailable: "ServiceUnavailable: The request has failed due to a temporary failure of the server. HTTP Status
  Code: 503" and "InternalFailure ... HTTP Status Code: 500" (the Common Errors page of each API reference), S3's
  "InternalError" ("If Amazon S3 returns an InternalError response, retry the request", S3 error best
  practices), EC2's "Unavailable" ("The server is overloaded and can't handle the request"), any HTTP 5xx;
- expired: "ExpiredTokenException: The security token included in the request is expired" (S3 "ExpiredToken", the
  query protocol's "ExpiredToken") and "RequestExpired: The request reached the service more than 15 minutes after the
  date stamp on the request" (Common Errors): credentials to refresh or a clock to set, not a permission to grant;
- denied: "AccessDeniedException: You do not have sufficient access to perform this action" (Common Errors), S3's
  "AccessDenied", EC2's "UnauthorizedOperation";
- missing: the not-found codes of the operations the product calls (botocore's error shapes);
- everything else by its own code (FIXES).
Throttled and unavailable errors are transient: the clients retry them with bounded backoff first, and a polling step
tries again at its next check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

THROTTLED = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException", "TooManyRequestsException",
    "ProvisionedThroughputExceededException", "TransactionInProgressException", "RequestLimitExceeded",
    "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
    "EC2ThrottledException", "KmsThrottlingException"})
UNAVAILABLE = frozenset({
    "ServiceUnavailable", "ServiceUnavailableException", "Unavailable", "InternalError", "InternalFailure",
    "InternalServerError", "InternalException", "ServiceException", "InternalServiceError", "RequestTimeout",
    "RequestTimeoutException"})
DENIED = frozenset({
    "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError", "NotAuthorized",
    "KmsAccessDeniedException", "InvalidClientTokenId", "SignatureDoesNotMatch", "UnrecognizedClientException",
    "AuthFailure", "403"})
# Credentials that were good and are no longer (a session token past its expiry), or a request signed by a clock more
# than 15 minutes off: nothing to grant, something to refresh.
EXPIRED = frozenset({"ExpiredToken", "ExpiredTokenException", "RequestExpired", "RequestTimeTooSkewed"})
MISSING = frozenset({
    "NoSuchKey", "NoSuchBucket", "NoSuchUpload", "ResourceNotFound", "ResourceNotFoundException", "FileSystemNotFound",
    "ExecutionDoesNotExist", "StateMachineDoesNotExist", "ParameterNotFound", "DataRepositoryAssociationNotFound",
    "DataRepositoryTaskNotFound", "NoSuchResourceException", "ParameterVersionNotFound", "404", "NotFound"})

# The IAM action an operation needs where it is not <service prefix>:<Operation> (S3's object and listing calls;
# https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html: "you must have the s3:ListBucket permission").
S3_ACTIONS = {"ListObjectsV2": "s3:ListBucket", "HeadObject": "s3:GetObject", "DeleteObjects": "s3:DeleteObject",
              "CopyObject": "s3:GetObject on the source and s3:PutObject on the target",
              "ListMultipartUploads": "s3:ListBucketMultipartUploads", "UploadPart": "s3:PutObject",
              "CreateMultipartUpload": "s3:PutObject", "CompleteMultipartUpload": "s3:PutObject",
              "UploadPartCopy": "s3:GetObject on the source and s3:PutObject on the target"}
IAM_PREFIX = {"s3": "s3", "sagemaker": "sagemaker", "stepfunctions": "states", "cloudformation": "cloudformation",
              "ssm": "ssm", "fsx": "fsx", "efs": "elasticfilesystem", "datasync": "datasync", "ec2": "ec2",
              "logs": "logs", "service-quotas": "servicequotas", "lambda": "lambda"}

DEPLOY = "`make deploy FSX=keep`"
# What to do about an error that is neither transient nor a refusal of access, by its code.
FIXES = {
    "NoSuchBucket": "the bucket does not exist: deploy the lab (`make deploy FSX=up`; after `make destroy`, "
                    "`make deploy-again FSX=up`), or name the right bucket",
    "NoSuchKey": "the object is not there (deleted or never written): write it again (for a dataset, `dslab dataset "
                 "upload`) or name the right key",
    "404": "the object is not there (deleted or never written): write it again or name the right key",
    "NotFound": "the object is not there (deleted or never written): write it again or name the right key",
    "NoSuchUpload": "the multipart upload ended meanwhile (completed or aborted): run the command again",
    # CreateBucket (the local runner's endpoint for a Script job, a server of its own: neither is expected there)
    "BucketAlreadyExists": "a bucket of that name exists already (bucket names are shared by every account): name "
                           "another bucket in the S3 URI",
    "BucketAlreadyOwnedByYou": "the bucket exists already in this account (an S3 endpoint left from an earlier run?): "
                               "run the job again",
    "InvalidObjectState": "the object is archived (an S3 Glacier storage class): restore it (`aws s3api "
                          "restore-object`) or upload it again",
    "ObjectNotInActiveTierError": "the source object is archived (an S3 Glacier storage class): restore it (`aws s3api "
                                  "restore-object`) or upload it again",
    "InvalidRequest": "S3 refused the request's form (directory buckets take fewer options than general purpose "
                      "buckets): check which bucket it names",
    "InvalidWriteOffset": "the object changed while it was written (an append to a directory bucket): write it again",
    "TooManyParts": "the upload has more than 10,000 parts: upload it again with larger parts",
    "EncryptionTypeMismatch": "the object exists with another encryption type: delete it and write it again",
    "ResourceNotFound": "SageMaker has no such resource in this account and region: check the name and --region",
    "ResourceNotFoundException": "no such resource in this account and region: check the name and --region",
    "ResourceInUse": "a training job of that name exists already: start the run again (each run names its jobs anew)",
    "ResourceLimitExceeded": "an account quota is reached: ask for an increase (Service Quotas, `aws service-quotas "
                             "request-service-quota-increase`) or run fewer jobs at once (max_concurrency)",
    "ExecutionLimitExceeded": "the account already runs as many executions as Step Functions allows: stop some "
                              "(`aws stepfunctions stop-execution`) and run again",
    "ExecutionAlreadyExists": "an execution of that name exists: run again (dslab names each run anew)",
    "ExecutionDoesNotExist": "no such execution in this account and region: check the ARN and --region "
                             "(`dslab status` shows the newest)",
    "StateMachineDoesNotExist": f"the workflow is not deployed in this account and region: deploy it ({DEPLOY}) or "
                                "check --region and --outputs",
    "StateMachineDeleting": f"the workflow is being deleted: deploy it again ({DEPLOY})",
    "StateMachineTypeNotSupported": f"the workflow is not a STANDARD state machine: deploy the lab again ({DEPLOY})",
    "InvalidArn": "the ARN is malformed: give the execution's full ARN (`dslab status` prints it) and check --outputs",
    "InvalidExecutionInput": "the experiment is not valid workflow input: check it with `dslab plan --offline`",
    "InvalidName": "the execution's name is not allowed: shorten the experiment's name (letters, digits, - and _)",
    "InvalidToken": "the listing's page token expired: run the command again",
    "ValidationException": "AWS found a value of the request invalid (the message names it): fix that value",
    "ValidationError": "AWS found a value of the request invalid (the message names it): fix that value",
    "KmsInvalidStateException": "the state machine's KMS key is disabled or pending deletion: enable it, or deploy "
                                f"the lab again ({DEPLOY})",
    "KmsAccessDeniedException": "the state machine's KMS key refuses this caller: grant kms:Decrypt on it",
    "TokenAlreadyExistsException": "another DeleteStack with the same request token is under way: wait for it "
                                   "(`dslab fsx status`)",
    "InvalidKeyId": "the parameter's KMS key cannot be used: check the key, or deploy the lab again",
    "ParameterNotFound": "FSx's SSM parameter is absent, so FSx is down: bring it back with `dslab fsx up`",
    "ParameterVersionNotFound": "FSx's SSM parameter changed meanwhile: run the command again",
    "FileSystemNotFound": "the file system no longer exists (its stack was deleted or replaced): `dslab fsx up` brings "
                          f"FSx back; for EFS deploy the lab again ({DEPLOY})",
    "BadRequest": "AWS refused the request as malformed (the message says why): run it again, and report it if it "
                  "stays",
    "DataRepositoryAssociationNotFound": "FSx's data repository association is gone (FSx replaced meanwhile?): bring "
                                         "FSx up again (`dslab fsx up`)",
    "DataRepositoryTaskNotFound": "the import task is gone (FSx replaced meanwhile?): run again",
    "InvalidDataRepositoryType": "this file system's link to S3 is not an association (legacy ImportPath): deploy FSx "
                                 "with fsxLink=dra",
    "UnsupportedOperation": "this FSx file system cannot run data repository tasks (it needs a link to S3 on Lustre "
                            "2.12 or later): deploy FSx again (`dslab fsx up`)",
    "IncompatibleParameterError": "the import task's paths do not fit this file system's link to S3: deploy FSx again "
                                  "(`dslab fsx up`)",
    "ServiceLimitExceeded": "an FSx quota is reached (data repository tasks): wait for the running tasks to end, or "
                            "ask for an increase (Service Quotas)",
    "DataRepositoryTaskExecuting": "another data repository task runs on this file system: wait for it to end",
    "InvalidRequestException": "DataSync refused the request (the message says why; a task execution already "
                               "under way is the usual cause): wait for it to end and run again",
    "InvalidParameterException": "CloudWatch Logs refused a parameter (the message names it): report it",
    "IllegalArgumentException": "Service Quotas refused a parameter (the message names it): report it",
    "InvalidPaginationTokenException": "the quota listing's page token expired: run again",
    "NoSuchResourceException": "Service Quotas has no such quota list in this region: check --region",
    "InvalidPermission.NotFound": "the rule is not there: nothing to revoke",
    "ChangeSetNotFound": "CloudFormation has no such change set (a deploy removed it meanwhile): run the command again",
}


@dataclass(frozen=True)
class AwsError:
    code: str
    message: str
    status: int | None
    operation: str
    attempts: int     # requests sent, retries included


def aws_error(err: Any) -> AwsError | None:
    """The ClientError in ``err`` or its causes (boto3's S3UploadFailedError wraps one), read by duck typing."""
    seen = 0
    while err is not None and seen < 5:
        response = getattr(err, "response", None)
        if isinstance(response, dict) and "Error" in response:
            error = response.get("Error") or {}
            meta = response.get("ResponseMetadata") or {}
            return AwsError(code=str(error.get("Code") or meta.get("HTTPStatusCode") or "Unknown"),
                            message=" ".join(str(error.get("Message") or "").split())[:300],
                            status=meta.get("HTTPStatusCode"), operation=str(getattr(err, "operation_name", "") or "?"),
                            attempts=int(meta.get("RetryAttempts") or 0) + 1)
        err = err.__cause__ or err.__context__
        seen += 1
    return None


def kind(code: str, status: int | None = None) -> str:
    """throttled, unavailable, expired, denied, missing or other."""
    if code in THROTTLED:
        return "throttled"
    if code in UNAVAILABLE or (status or 0) >= 500:
        return "unavailable"
    if code in EXPIRED:
        return "expired"
    if code in DENIED:
        return "denied"
    if code in MISSING:
        return "missing"
    return "other"


def is_transient_code(code: str, status: int | None = None) -> bool:
    return kind(code, status) in ("throttled", "unavailable")


def is_transient(err: Any) -> bool:
    """Worth trying again later: throttling or a temporary failure on AWS's side (botocore has already retried it)."""
    found = aws_error(err)
    return found is not None and is_transient_code(found.code, found.status)


def training_job_missing(err: Any) -> bool:
    """DescribeTrainingJob of a job that does not exist: SageMaker answers "ValidationException: Requested resource not
    found." (the model's ResourceNotFound is what other calls send)."""
    found = aws_error(err)
    if found is None:
        return False
    text = found.message.lower()
    return found.code in ("ResourceNotFound", "ResourceNotFoundException") or (
        found.code == "ValidationException" and ("not found" in text or "could not find" in text))


def iam_action(service: str | None, operation: str) -> str:
    if service == "s3" and operation in S3_ACTIONS:
        return S3_ACTIONS[operation]
    prefix = IAM_PREFIX.get(service or "")
    return f"{prefix}:{operation}" if prefix else operation


def fix(code: str, status: int | None = None, *, operation: str = "?", service: str | None = None,
        who: str | None = None) -> str:
    """What to do about ``code``: ``who`` is the role that called (None: the user's own credentials)."""
    found = kind(code, status)
    later = "it passes: what stopped here can start again later"
    if found == "throttled":
        return ("AWS is throttling this account's requests (other tools calling the same API share the rate): "
                + ("try again in a minute" if who is None else later))
    if found == "unavailable":
        return "a temporary failure on AWS's side: " + ("try again in a few minutes" if who is None else later)
    if found == "expired":
        if who is None:
            return ("your credentials have expired, or this machine's clock is more than 15 minutes off: refresh them "
                    "(`aws sso login`, or new temporary credentials), check the clock, and run the command again")
        return (f"{who}'s temporary credentials had expired, or the clock that signed the request was more than 15 "
                f"minutes off: AWS renews a role's credentials, so {later}")
    if found == "denied":
        action = iam_action(service, operation)
        if who is None:
            return (f"your credentials may not call {action}: use the profile of the account the lab is deployed in "
                    "(AWS_PROFILE) or ask for that permission")
        return (f"{who} may not call {action}: deploy the lab again so the role has it ({DEPLOY}); a bucket policy or "
                "an organization's SCP can also refuse it")
    return FIXES.get(code, f"AWS answered {code}: fix what its message names, and report it if it stays")


def explain(err: Any, *, service: str | None = None, who: str | None = None, what: str | None = None) -> str:
    """One line: the operation, the code and AWS's message, how many attempts, and the fix."""
    found = aws_error(err)
    if found is None:
        return f"{what + ': ' if what else ''}{type(err).__name__}: {err}"
    tries = f" after {found.attempts} attempts" if found.attempts > 1 else ""
    said = f": {found.message}" if found.message else ""
    head = f"{what}: " if what else ""
    return (f"{head}AWS {found.operation} failed{tries} ({found.code}{said}); "
            + fix(found.code, found.status, operation=found.operation, service=service, who=who))
