"""cdk-nag acknowledgements: each one names the exact finding, on the exact construct, and why."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

IAM5 = "AwsSolutions::AwsSolutions-IAM5"
XRAY_REASON = ("X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords accept no resource "
               "other than '*' (AWS service authorization reference)")


def ack(scope: IConstruct, finding: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))


def account_text(stack: cdk.Stack) -> str:
    """The account as cdk-nag writes it in a finding: ``<AWS::AccountId>`` for an environment-agnostic
    stack, the literal account once ``cdk deploy`` binds the stack to one (ARNs built with it are then
    plain strings, and a finding written for the token form would no longer match)."""
    return "<AWS::AccountId>" if cdk.Token.is_unresolved(stack.account) else stack.account


def _policy(stack: cdk.Stack, path: str) -> IConstruct:
    node = stack
    for part in path.split("/"):
        node = node.node.find_child(part)
    return node


def acknowledge_core(stack: cdk.Stack) -> None:
    policy = _policy(stack, "Training/Role/DefaultPolicy/Resource")
    account = account_text(stack)
    # An adopted bucket (-c adoptBucket=true) is referenced by its fixed name, not by the stack's resource.
    bucket = (f"arn:aws:s3:::datasourcelab-data-{account}-{stack.region}" if stack.config.adopt_bucket
              else "<DataBucketE6B0FAA8.Arn>")
    for prefix, why in (("datasets", "training jobs read every object of every dataset under datasets/"),
                        ("code", "training jobs read code uploaded under code/ by `dslab run`"),
                        ("output", "SageMaker writes each job's model and output archives under output/<experiment>/<job>/"),
                        ("checkpoints", "SageMaker's checkpoint sync reads, writes and deletes a checkpoint trial's files "
                         "under checkpoints/<execution>/<trial>/<target>/, named by the job's ranks at run time")):
        ack(policy, f"{IAM5}[Resource::{bucket}/{prefix}/*]", f"Prefix-scoped: {why}; object names are not known in advance")
    ack(policy, f"{IAM5}[Resource::*]",
        "ec2:Describe* for the job's network set-up, ecr:GetAuthorizationToken and cloudwatch:PutMetricData "
        "(limited by the cloudwatch:namespace condition) take no resource-level scoping")
    ack(policy, f"{IAM5}[Resource::arn:aws:ec2:{stack.region}:{account}:network-interface/*]",
        "SageMaker creates the job's ENIs at run time; their IDs cannot be known in advance")
    for registry in stack.images.registry_accounts():
        ack(policy, f"{IAM5}[Resource::arn:aws:ecr:{stack.region}:{registry}:repository/*]",
            "Pull-only access to the account of the training images (AWS Deep Learning Containers' registry of the region); "
            "the repository follows the image")
    ack(policy, f"{IAM5}[Resource::arn:aws:logs:{stack.region}:{account}:log-group:/aws/sagemaker/TrainingJobs:*]",
        "SageMaker writes one log stream per job in this log group; stream names are made at run time")


def acknowledge_workflow(stack: cdk.Stack) -> None:
    account = account_text(stack)
    bucket = f"arn:aws:s3:::datasourcelab-data-{account}-{stack.region}"
    results = f"{IAM5}[Resource::{bucket}/results/*]"
    results_why = "Prefix-scoped: results/<execution>/ objects are named at run time"
    functions = {
        "Plan": (XRAY_REASON + "; fsx:DescribeFileSystems and servicequotas:List* have no resource types "
                 "(service authorization reference for FSx and Service Quotas)"),
        "FsxData": XRAY_REASON + "; fsx:Describe* (file systems, data repository associations and tasks) have no resource types",
        "Collect": XRAY_REASON,
        "Teardown": XRAY_REASON + "; sagemaker:ListTrainingJobs has no resource type (it finds InProgress jobs reading FSx)",
        "ExpressStaging": XRAY_REASON,
    }
    logs_ids = {"Plan": "WorkflowPlanFunctionLogs73A54556", "FsxData": "WorkflowFsxDataFunctionLogsE8F72503",
                "Collect": "WorkflowCollectFunctionLogsCD149F1F", "Teardown": "WorkflowTeardownFunctionLogs6BBC32F0",
                "ExpressStaging": "WorkflowExpressStagingFunctionLogs469C7C26"}
    for name, star_reason in functions.items():
        policy = _policy(stack, f"Workflow/{name}FunctionRole/DefaultPolicy/Resource")
        ack(policy, results, results_why)
        ack(policy, f"{IAM5}[Resource::<{logs_ids[name]}.Arn>:*]", "Log streams of this function's own log group")
        ack(policy, f"{IAM5}[Resource::*]", star_reason)
    plan = _policy(stack, "Workflow/PlanFunctionRole/DefaultPolicy/Resource")
    ack(plan, f"{IAM5}[Resource::{bucket}/datasets/*.stats.json]",
        "Reads only the stats files beside dataset prefixes (datasets/<name>.stats.json); names come with each experiment")
    ack(_policy(stack, "Workflow/ExpressStagingFunctionRole/DefaultPolicy/Resource"), f"{IAM5}[Resource::{bucket}/datasets/*]",
        "Copies the datasets the Express jobs read into the directory bucket; dataset names come with each experiment")
    fsx_data = _policy(stack, "Workflow/FsxDataFunctionRole/DefaultPolicy/Resource")
    for kind in ("file-system", "task"):
        ack(fsx_data, f"{IAM5}[Resource::arn:aws:fsx:{stack.region}:{account}:{kind}/*]",
            "CreateDataRepositoryTask imports a dataset uploaded while FSx was up: the file system comes and goes "
            "with its stack (its ID is read at run time) and the task's ID is made by the call")
    collect = _policy(stack, "Workflow/CollectFunctionRole/DefaultPolicy/Resource")
    ack(collect, f"{IAM5}[Resource::{bucket}/output/*]", "Reads metrics.json from each job's output archive, named per job at run time")
    ack(collect, f"{IAM5}[Resource::arn:aws:sagemaker:{stack.region}:{account}:training-job/*]",
        "Describes the experiment's jobs, whose names are generated per execution")
    teardown = _policy(stack, "Workflow/TeardownFunctionRole/DefaultPolicy/Resource")
    ack(teardown, f"{IAM5}[Resource::arn:aws:cloudformation:{stack.region}:{account}:stack/DataSourceLab-Fsx/*]",
        "DescribeStacks and DeleteStack on the FSx stack only; the suffix is the stack's generated ID")
    ack(teardown, f"{IAM5}[Resource::arn:aws:sagemaker:{stack.region}:{account}:training-job/*]",
        "Describes InProgress training jobs (any: an exported script's, the user's own) to keep FSx while one reads it")

    ack(_policy(stack, "Workflow/EfsStaging/DataSyncRole/DefaultPolicy/Resource"), f"{IAM5}[Resource::{bucket}/datasets/*]",
        "DataSync copies the datasets the EFS jobs need; dataset names come with each experiment")

    machine = _policy(stack, "Workflow/StateMachine/Role/DefaultPolicy/Resource")
    ack(machine, results, "LoadRequest reads results/<execution>/requests/<job>.json written by Plan; "
        "KeepFailureCause writes results/<execution>/failures/<job>.txt")
    for fn, logical in (("Plan", "WorkflowPlanFunctionF2DC5A8A"), ("FsxData", "WorkflowFsxDataFunction93EF087E"),
                        ("Collect", "WorkflowCollectFunctionF8175F06"), ("Teardown", "WorkflowTeardownFunction09D807BD"),
                        ("ExpressStaging", "WorkflowExpressStagingFunctionB484084E")):
        ack(machine, f"{IAM5}[Resource::<{logical}.Arn>:*]", f"Invoking any version of the {fn} function (CDK's LambdaInvoke grant)")
    ack(machine, f"{IAM5}[Resource::<WorkflowEfsStagingEfsSyncTaskEE592268.TaskArn>/execution/*]",
        "Describing executions of the lab's one DataSync task; execution IDs are made at run time")
    ack(machine, f"{IAM5}[Resource::arn:aws:sagemaker:{stack.region}:{account}:training-job/*]",
        "createTrainingJob.sync creates, describes, tags and stops the experiment's jobs, named per execution")
    ack(machine, f"{IAM5}[Resource::*]", XRAY_REASON + " (state-machine tracing)")
