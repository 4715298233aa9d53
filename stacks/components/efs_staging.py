"""EFS staging: the DataSync task that copies the datasets EFS jobs read from S3 into EFS.

Three things a first real deploy depends on:
- CreateLocationS3 checks the bucket-access role when the location is created, so the location and
  the task wait for the role *and its policy* (an IAM change takes time to propagate; created side
  by side, the location can fail with an access error).
- In BASIC log mode DataSync writes to the task's log group only if a CloudWatch Logs resource
  policy lets ``datasync.amazonaws.com`` do so ("Allowing DataSync to upload logs to Amazon
  CloudWatch log groups", https://docs.aws.amazon.com/datasync/latest/userguide/using-identity-based-policies.html);
  without it the group stays empty while the workflow tells operators to look there. Scoped to this
  account and this task.
- With ``efsMountAuth=iam`` an EFS location without an access role mounts without IAM and is
  refused; DataSync then needs a role it assumes for the mount, with ClientMount, ClientWrite and
  ClientRootAccess (it writes as root to keep ownership), and TLS in transit
  (https://docs.aws.amazon.com/datasync/latest/userguide/create-efs-location.html).

What EFS holds follows S3: the task deletes what is gone from S3 ("REMOVE - Deletes destination files that
aren't present in the source", with TransferMode CHANGED: "If you set this parameter to REMOVE, you can't set
TransferMode to ALL. When you transfer all data, DataSync doesn't scan your destination location and doesn't
know what to delete", https://docs.aws.amazon.com/datasync/latest/userguide/API_Options.html). The workflow
starts it with one include filter per dataset the EFS jobs read, and "DataSync scans and transfers only files
and folders that match the include filters" (https://docs.aws.amazon.com/datasync/latest/userguide/filtering.html).
No document says whether REMOVE deletes only within the include filters. The two quotes suggest it does
(deletions come from the scan, and the filters limit the scan), but that is an inference, not a statement. The
lab is correct under either reading: an execution's sync names every dataset its EFS jobs read, before any of
them starts, and the datasets other running executions' EFS jobs read (dslab/workflow/plan.py
efs_datasets_in_use). Were REMOVE to delete every destination file absent from the filtered source, a dataset
no running execution reads is deleted and copied again when a run needs it: a cost, never a wrong read. The
stand-in emulates both readings (dslab/emulator/lab.py, REMOVE_WITHIN_FILTERS and REMOVE_WHOLE_LOCATION).

A second task empties EFS (`dslab efs empty`): EFS is mounted in the VPC, so no AWS API deletes its files from
the operator's machine, but DataSync already mounts it here. The task copies from an S3 folder that never
holds an object into the same EFS location with REMOVE, so every file it scans is deleted: all of them, or,
started with one dataset's include filter, that dataset's folder; under the other reading, all of them again
(`dslab efs empty --dataset` says so, and waits while a running execution's EFS jobs may read EFS).
"""

from __future__ import annotations

from aws_cdk import CustomResource, Duration, RemovalPolicy, Stack, aws_datasync as datasync, aws_iam as iam
from aws_cdk import aws_lambda as lambda_, aws_logs as logs, aws_s3 as s3
from constructs import Construct

from dslab.core.model.efs import EMPTY_SOURCE_FOLDER
from dslab.core.requests import DATASETS_PREFIX, FS_DATASETS_PATH, LOGS_POLICY_NAME

# How long a new role waits to be assumable by a service. IAM "usually" propagates in seconds; Terraform's
# DataSync location retries "Unable to assume role" for two minutes (hashicorp/terraform-provider-aws#10984).
IAM_PROPAGATION_SECONDS = 30
IAM_WAIT_CODE = """
import json, os, time, urllib.request

def handler(event, context):
    if event.get("RequestType") in ("Create", "Update"):   # a role it guards is new (its Roles changed)
        time.sleep(float(os.environ["WAIT_SECONDS"]) * float(os.environ.get("DSLAB_TIME_SCALE") or 1))
    body = json.dumps({"Status": "SUCCESS", "Reason": "waited for IAM to propagate the new roles",
                       "PhysicalResourceId": event.get("PhysicalResourceId") or "iam-propagation-wait",
                       "StackId": event["StackId"], "RequestId": event["RequestId"],
                       "LogicalResourceId": event["LogicalResourceId"], "Data": {}}).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    urllib.request.urlopen(request, timeout=30).close()
"""

EFS_WRITER_ACTIONS = ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite",
                      "elasticfilesystem:ClientRootAccess"]


class IamPropagationWait(Construct):
    """A custom resource that only waits, on creation, for IAM to propagate the roles it depends on. No API
    says when a role is assumable by a service; the DataSync locations that assume one at once depend on it."""

    def __init__(self, scope: Construct, construct_id: str, *, roles: list[iam.IRole]) -> None:
        super().__init__(scope, construct_id)
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="DataSourceLab: waits for IAM propagation (logs only)")
        role.add_to_policy(iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                               resources=[log_group.log_group_arn]))
        function = lambda_.Function(
            self, "Function", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=lambda_.Code.from_inline(IAM_WAIT_CODE), timeout=Duration.seconds(IAM_PROPAGATION_SECONDS + 30),
            memory_size=128, role=role, log_group=log_group, environment={"WAIT_SECONDS": str(IAM_PROPAGATION_SECONDS)},
            description="DataSourceLab: waits for IAM to propagate new roles before DataSync assumes them")
        # The roles it waits for are its properties: a new role (another efsMountAuth, say) is an Update, and
        # the handler waits again before the location that assumes it is made.
        self.resource = CustomResource(self, "Wait", service_token=function.function_arn,
                                       resource_type="Custom::IamPropagationWait",
                                       properties={"Roles": [r.role_arn for r in roles]})
        self.resource.node.add_dependency(role)
        for guarded in roles:
            self.node.add_dependency(guarded)


class EfsStaging(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, bucket: s3.IBucket, subnet_id: str,
                 security_group_id: str, efs_file_system_arn: str, efs_mount_auth: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        role = iam.Role(self, "DataSyncRole", assumed_by=iam.ServicePrincipal("datasync.amazonaws.com"),
                        description="DataSourceLab: DataSync reads datasets/ to fill EFS")
        role.add_to_policy(iam.PolicyStatement(
            actions=["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
            resources=[bucket.bucket_arn]))
        role.add_to_policy(iam.PolicyStatement(
            actions=["s3:GetObject", "s3:GetObjectTagging", "s3:GetObjectVersion", "s3:GetObjectVersionTagging"],
            resources=[bucket.arn_for_objects(f"{DATASETS_PREFIX}/*")]))
        # CreateLocationS3 assumes the bucket-access role at once ("Unable to assume role" while IAM has not
        # propagated a new role, which takes seconds, rarely up to a minute): the locations wait for it.
        self.efs_access_role: iam.Role | None = None
        if efs_mount_auth == "iam":
            self.efs_access_role = iam.Role(
                self, "DataSyncEfsRole", assumed_by=iam.ServicePrincipal("datasync.amazonaws.com"),
                description="DataSourceLab: DataSync mounts EFS with IAM to write the datasets")
            self.efs_access_role.add_to_policy(iam.PolicyStatement(actions=EFS_WRITER_ACTIONS,
                                                                   resources=[efs_file_system_arn]))
        self.iam_wait = IamPropagationWait(self, "IamPropagation",
                                           roles=[role] + ([self.efs_access_role] if self.efs_access_role else []))
        self.source = datasync.CfnLocationS3(
            self, "DatasetsLocation", s3_bucket_arn=bucket.bucket_arn, subdirectory=f"/{DATASETS_PREFIX}/",
            s3_config=datasync.CfnLocationS3.S3ConfigProperty(bucket_access_role_arn=role.role_arn))
        self.source.node.add_dependency(role)  # the role and its DefaultPolicy
        self.source.node.add_dependency(self.iam_wait)

        self.destination = datasync.CfnLocationEFS(
            self, "EfsLocation", efs_filesystem_arn=efs_file_system_arn, subdirectory=FS_DATASETS_PATH,
            in_transit_encryption="TLS1_2",
            file_system_access_role_arn=self.efs_access_role.role_arn if self.efs_access_role else None,
            ec2_config=datasync.CfnLocationEFS.Ec2ConfigProperty(
                subnet_arn=stack.format_arn(service="ec2", resource="subnet", resource_name=subnet_id),
                security_group_arns=[stack.format_arn(service="ec2", resource="security-group",
                                                      resource_name=security_group_id)]))
        if self.efs_access_role:
            self.destination.node.add_dependency(self.efs_access_role)
        self.destination.node.add_dependency(self.iam_wait)

        self.log_group = logs.LogGroup(self, "DataSyncLogs", retention=logs.RetentionDays.THREE_MONTHS,
                                       removal_policy=RemovalPolicy.DESTROY)
        self.task = datasync.CfnTask(
            self, "EfsSyncTask", name="datasourcelab-datasets-to-efs",
            source_location_arn=self.source.attr_location_arn,
            destination_location_arn=self.destination.attr_location_arn,
            cloud_watch_log_group_arn=self.log_group.log_group_arn,
            options=datasync.CfnTask.OptionsProperty(
                transfer_mode="CHANGED",  # only what is missing or changed: re-staging is cheap
                verify_mode="ONLY_FILES_TRANSFERRED", overwrite_mode="ALWAYS",
                # EFS jobs then read the same files as FSx and Express jobs (see the module's docstring)
                preserve_deleted_files="REMOVE", log_level="BASIC"))
        self.task.node.add_dependency(role)

        # Emptying: an S3 location on a folder that never holds an object (inside datasets/, so the role's
        # read grant covers it), synchronised into EFS with REMOVE (see the module's docstring).
        self.empty_source = datasync.CfnLocationS3(
            self, "EmptySourceLocation", s3_bucket_arn=bucket.bucket_arn,
            subdirectory=f"/{DATASETS_PREFIX}/{EMPTY_SOURCE_FOLDER}/",
            s3_config=datasync.CfnLocationS3.S3ConfigProperty(bucket_access_role_arn=role.role_arn))
        self.empty_source.node.add_dependency(role)
        self.empty_source.node.add_dependency(self.iam_wait)
        self.empty_task = datasync.CfnTask(
            self, "EfsEmptyTask", name="datasourcelab-empty-efs",
            source_location_arn=self.empty_source.attr_location_arn,
            destination_location_arn=self.destination.attr_location_arn,
            cloud_watch_log_group_arn=self.log_group.log_group_arn,
            options=datasync.CfnTask.OptionsProperty(
                transfer_mode="CHANGED", verify_mode="ONLY_FILES_TRANSFERRED", overwrite_mode="ALWAYS",
                preserve_deleted_files="REMOVE", log_level="BASIC"))
        self.empty_task.node.add_dependency(role)
        # As the DataSync guide's example writes it: this account's DataSync tasks (task/*), not one task's ARN,
        # so the policy exists before the task that logs under it. One policy, named: CloudWatch Logs holds
        # at most 10 resource policies per account and region ("Resource policies: 10 per Region per account",
        # https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/cloudwatch_limits_cwl.html); with 10 others
        # there, this deploy fails with LimitExceededException (`dslab doctor` says so before a deploy).
        self.logs_policy = logs.ResourcePolicy(self, "DataSyncLogsPolicy", resource_policy_name=LOGS_POLICY_NAME,
                                               policy_statements=[iam.PolicyStatement(
            sid="DataSyncLogsToCloudWatchLogs",
            principals=[iam.ServicePrincipal("datasync.amazonaws.com")],
            actions=["logs:PutLogEvents", "logs:CreateLogStream"],
            resources=[f"{self.log_group.log_group_arn}"],
            conditions={"ArnLike": {"aws:SourceArn": [stack.format_arn(service="datasync", resource="task", resource_name="*")]},
                        "StringEquals": {"aws:SourceAccount": stack.account}})])
        self.task.node.add_dependency(self.logs_policy)
        self.empty_task.node.add_dependency(self.logs_policy)
