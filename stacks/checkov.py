"""checkov suppressions: each one names the exact check, on the exact resource, and why.

checkov (tests/test_scanners.py runs it on every synthesized template) reads a suppression from the
resource's own metadata: ``Metadata: {checkov: {skip: [{id: CKV_AWS_nn, comment: why}]}}``
(https://www.checkov.io/2.Basics/Suppressing%20and%20Skipping%20Policies.html, CloudFormation section).
No check is skipped globally: a new resource that fails a check fails the test until it is fixed or
acknowledged here, like cdk-nag's acknowledgements in stacks/nag.py.

Fixed rather than suppressed: the data bucket is versioned (CKV_AWS_21), with old versions expiring
after a week (stacks/components/data_bucket.py).
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

# -- reasons shared by several resources of one kind ---------------------------------------------
LOGS_KMS = ("CKV_AWS_158 (log group KMS): CloudWatch Logs always encrypts log data at rest; a customer managed "
            "key would add a key ($1/month), a key policy for logs.<region>.amazonaws.com and a way to lock "
            "operators out of {what}, which holds no secret "
            "(https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html)")
LAMBDA_DLQ = ("CKV_AWS_116 (DLQ): {fn} is only invoked synchronously (RequestResponse) by the state machine's "
              "LambdaInvoke tasks, which retry and catch its errors; Lambda sends events to a dead-letter queue "
              "only for asynchronous invocations "
              "(https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html)")
LAMBDA_VPC = ("CKV_AWS_117 (VPC): {fn} reaches no resource inside the VPC, only AWS APIs ({apis}); the lab's "
              "VPC has isolated subnets (no NAT), so attaching it would need one interface endpoint per API, "
              "billed per hour, for nothing (https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc.html)")
LAMBDA_CONCURRENCY = ("CKV_AWS_115 (reserved concurrency): {fn} runs {how}, bounded by the state machine "
                      "(at most 40 Map lanes per execution). Reserving concurrency takes it from the account's "
                      "unreserved pool, which must keep 100: on new accounts with a low concurrency quota the "
                      "deployment would fail (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html)")
LAMBDA_ENV = ("CKV_AWS_173 (environment encryption): Lambda encrypts environment variables at rest with an AWS "
              "managed key; {fn}'s variables hold no secret, only resource names and IDs (bucket, role ARN, "
              "subnet and security-group IDs, image URIs, SSM parameter and stack names) "
              "(https://docs.aws.amazon.com/lambda/latest/dg/security-encryption-at-rest.html)")
CDK_PROVIDER = ("{check}: this function is aws-cdk-lib's own custom-resource provider ({what}); CloudFormation "
                "invokes it during deployments and reports its failure on the stack; the construct exposes none "
                "of these properties")

WORKFLOW_FUNCTIONS = {
    # construct ID -> (how the state machine calls it, the AWS APIs it uses)
    "PlanFunction": ("once per execution", "S3, SSM, FSx, Service Quotas"),
    "FsxDataFunction": ("once per FSx import poll, for the FSx jobs", "S3, SSM, FSx"),
    "CollectFunction": ("once per finished training job, one per Map lane at a time", "S3, SageMaker"),
    "TeardownFunction": ("at the end of an execution that used FSx", "S3, Step Functions, CloudFormation"),
    "ExpressStagingFunction": ("once per copy slice, for the Express jobs' datasets", "S3, S3 Express One Zone"),
}


def skip(scope: IConstruct, check_id: str, reason: str) -> None:
    """Adds one checkov suppression to the CloudFormation resource behind ``scope``."""
    resource = scope if isinstance(scope, cdk.CfnResource) else scope.node.default_child
    assert isinstance(resource, cdk.CfnResource), scope.node.path
    current = resource.get_metadata("checkov") or {}
    skips = [s for s in current.get("skip", []) if s["id"] != check_id]
    resource.add_metadata("checkov", {"skip": skips + [{"id": check_id, "comment": reason}]})


class _Resources:
    """A stack's CloudFormation resources by construct path, read once: every construct property is a call into
    the jsii runtime, and looking each suppression's resource up afresh among all constructs made ~6,000 calls
    (a second of every synthesis)."""

    def __init__(self, stack: cdk.Stack):
        self.stack = stack
        self.by_path = {f"/{c.node.path}": c for c in stack.node.find_all() if isinstance(c, cdk.CfnResource)}

    def find(self, suffix: str) -> cdk.CfnResource:
        """The one resource whose construct path ends with ``suffix``."""
        found = [c for path, c in self.by_path.items() if path.endswith(f"/{suffix}")]
        if len(found) != 1:
            raise LookupError(f"checkov suppressions: expected one resource at */{suffix} in {self.stack.stack_name}, "
                              f"found {[c.node.path for c in found]}")
        return found[0]

    def cdk_providers(self) -> list[tuple[str, cdk.CfnResource]]:
        """aws-cdk-lib's own custom-resource providers' functions: (construct path, resource)."""
        return [(path[1:], c) for path, c in self.by_path.items()
                if path.split("/")[2].startswith("Custom::") and path.endswith("CustomResourceProvider/Handler")
                and c.cfn_resource_type == "AWS::Lambda::Function"]


def _suppress_core(stack: cdk.Stack, adopt_bucket: bool) -> None:
    resources = _Resources(stack)
    skip(resources.find("Network/FlowLogs/Resource"), "CKV_AWS_158",
         LOGS_KMS.format(what="the VPC flow logs (addresses, ports, accept/reject)"))
    if stack.config.express:
        _suppress_express_emptier(resources)
    for path, provider in resources.cdk_providers():
        what = path.split("/")[1].removeprefix("Custom::").removesuffix("CustomResourceProvider")
        for check, detail in (("CKV_AWS_116", "a DLQ would only hold the deployment event CloudFormation already failed on"),
                              ("CKV_AWS_117", "it calls AWS APIs only (EC2 to strip the default security group, S3 to empty a "
                                               "disposable bucket) and reaches nothing inside the VPC"),
                              ("CKV_AWS_115", "one invocation per custom resource per deployment; reserving concurrency "
                                               "would only take from the account's unreserved pool")):
            skip(provider, check, CDK_PROVIDER.format(check=check, what=what) + f"; {detail}")
    if adopt_bucket:
        return  # the kept bucket is referenced, not created: no S3 resource in this stack
    access_logs = resources.find("Data/AccessLogs/Resource")
    skip(access_logs, "CKV_AWS_18",
         "CKV_AWS_18 (access logging): this is the access-log bucket of the data bucket; logging it into itself "
         "would log each log delivery, and another bucket would only move the question. S3 recommends a "
         "separate destination (https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html)")
    skip(access_logs, "CKV_AWS_21",
         "CKV_AWS_21 (versioning): server access logs are written once by the S3 logging service and expire "
         "after 90 days by lifecycle rule; versions of write-once log objects would only add cost")


def _suppress_express_emptier(resources: _Resources) -> None:
    """The custom resource that empties the S3 Express directory bucket before CloudFormation deletes it
    (stacks/components/express_bucket.py)."""
    fn = resources.find("Express/EmptyFunction/Resource")
    skip(fn, "CKV_AWS_116",
         "CKV_AWS_116 (DLQ): the bucket emptier is a custom-resource function invoked by CloudFormation once per "
         "stack deletion (or bucket replacement); it answers FAILED itself on any error, with the fix "
         "(`dslab express empty --yes`, then delete again), and an event it never answered fails the stack "
         "deletion. A dead-letter queue would only hold a deletion event whose pre-signed response URL nobody "
         "can use any more")
    skip(fn, "CKV_AWS_117",
         "CKV_AWS_117 (VPC): the bucket emptier reaches nothing inside the VPC, only the directory bucket's Zonal "
         "endpoint and CloudFormation's pre-signed response URL. In the VPC it would give the isolated subnets "
         "Lambda network interfaces that this same stack's deletion must wait for before it can delete the subnet "
         "and the VPC (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
         "aws-properties-lambda-function-vpcconfig.html)")
    skip(fn, "CKV_AWS_115",
         "CKV_AWS_115 (reserved concurrency): the bucket emptier runs once per stack deletion or bucket "
         "replacement. Reserving concurrency takes it from the account's unreserved pool, which must keep 100: "
         "on new accounts with a low concurrency quota the deployment would fail "
         "(https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html)")
    skip(resources.find("Express/EmptyFunctionLogs/Resource"), "CKV_AWS_158",
         LOGS_KMS.format(what="the bucket emptier's log (the bucket's name and counts of deleted objects)"))


def _suppress_workflow(stack: cdk.Stack) -> None:
    resources = _Resources(stack)
    for cid, (how, apis) in WORKFLOW_FUNCTIONS.items():
        fn = resources.find(f"Workflow/{cid}/Resource")
        name = cid.removesuffix("Function")
        skip(fn, "CKV_AWS_116", LAMBDA_DLQ.format(fn=name))
        skip(fn, "CKV_AWS_117", LAMBDA_VPC.format(fn=name, apis=apis))
        skip(fn, "CKV_AWS_115", LAMBDA_CONCURRENCY.format(fn=name, how=how))
        skip(fn, "CKV_AWS_173", LAMBDA_ENV.format(fn=name))
        skip(resources.find(f"Workflow/{cid}Logs/Resource"), "CKV_AWS_158",
             LOGS_KMS.format(what=f"the {name} function's log (experiment names, job names, S3 keys)"))
    skip(resources.find("DataSyncLogs/Resource"), "CKV_AWS_158",
         LOGS_KMS.format(what="DataSync's transfer log (file names and counts)"))
    _suppress_iam_wait(resources)
    skip(resources.find("Workflow/Logs/Resource"), "CKV_AWS_158",
         LOGS_KMS.format(what="the state machine's execution history (experiment and job requests)"))


def _suppress_iam_wait(resources: _Resources) -> None:
    """The custom resource that waits for IAM to propagate DataSync's roles (stacks/components/efs_staging.py)."""
    fn = resources.find("IamPropagation/Function/Resource")
    skip(fn, "CKV_AWS_116",
         "CKV_AWS_116 (DLQ): a custom-resource function CloudFormation invokes once, at creation, that only waits "
         "and answers; an event it never answered fails the deployment, and a dead-letter queue would hold an "
         "event whose pre-signed response URL nobody can use any more")
    skip(fn, "CKV_AWS_117",
         "CKV_AWS_117 (VPC): it calls nothing but CloudFormation's pre-signed response URL, which the lab's isolated "
         "subnets (no NAT) could not reach")
    skip(fn, "CKV_AWS_115",
         "CKV_AWS_115 (reserved concurrency): one invocation per deployment that creates the staging; reserving "
         "concurrency would only take from the account's unreserved pool, which must keep 100")
    skip(fn, "CKV_AWS_173",
         "CKV_AWS_173 (environment encryption): its one variable is the number of seconds it waits; Lambda encrypts "
         "environment variables at rest with an AWS managed key")
    skip(resources.find("IamPropagation/Logs/Resource"), "CKV_AWS_158",
         LOGS_KMS.format(what="a log of the IAM propagation wait (no data at all)"))


def suppress_checkov(core: cdk.Stack, fsx: cdk.Stack, workflow: cdk.Stack) -> None:
    """Adds every checkov suppression of the lab (the FSx stack needs none)."""
    _suppress_core(core, adopt_bucket=core.config.adopt_bucket)
    _suppress_workflow(workflow)
