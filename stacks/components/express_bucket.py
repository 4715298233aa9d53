"""The lab's S3 Express One Zone directory bucket: the sixth data source, in the training subnet's zone."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CustomResource, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam, aws_lambda as lambda_, aws_logs as logs, aws_s3express as s3express
from constructs import Construct

from dslab.core.facts.storage import EXPRESS_CHECKPOINT_EXPIRY_DAYS, EXPRESS_MULTIPART_ABORT_DAYS
from dslab.core.requests import CHECKPOINTS_PREFIX

EMPTY_HANDLER_DIR = Path(__file__).resolve().parent / "express_empty"
# The service principal S3 Lifecycle acts as on a directory bucket (directory-buckets-objects-lifecycle.html).
LIFECYCLE_PRINCIPAL = "lifecycle.s3.amazonaws.com"


class ExpressBucket(Construct):
    """A directory bucket (``AWS::S3Express::DirectoryBucket``, no L2 exists) in one Availability Zone,
    chosen by zone ID like the rest of the lab, so training jobs in the lab's subnet read it in-zone.

    - No BucketName: CloudFormation generates ``<id>--<azid>--x-s3`` ("If you don't specify a name, AWS
      CloudFormation generates a unique ID and uses that ID for the bucket name",
      https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-s3express-directorybucket.html),
      so names never collide and a deploy after a destroy never meets a kept name.
    - SSE-S3 (AES256), written out: a directory bucket takes AES256 or one customer managed KMS key for
      its lifetime (the AWS managed aws/s3 key is not supported), and SageMaker writes SSE-S3 to
      Express outputs (OutputDataConfig.KmsKeyId, SageMaker API reference).
    - Incomplete multipart uploads are aborted after a day: parts bill as storage, and an in-progress
      upload blocks deleting the bucket. Checkpoints a run left under ``checkpoints/`` (a run stopped before the
      job that deletes them) expire after a week, as in the data bucket; directory buckets have no versioning, so
      nothing noncurrent stays behind. S3 Lifecycle acts on a directory bucket only with a bucket policy that lets
      its service principal open ReadWrite sessions: "You must grant the s3express:CreateSession permission with
      ReadWrite session mode to the S3 Lifecycle service principal (lifecycle.s3.amazonaws.com). If you don't grant
      this permission ... S3 Lifecycle cannot expire objects in your directory bucket"
      (https://docs.aws.amazon.com/AmazonS3/latest/userguide/directory-buckets-objects-lifecycle.html), so the
      bucket has that policy (``AWS::S3Express::BucketPolicy``), for this bucket and this account only.
    - Deleted with the stack (it only holds copies of datasets kept in the data bucket). A directory
      bucket "can only delete empty buckets. Deletion fails for buckets that have contents"
      (https://docs.aws.amazon.com/AmazonS3/latest/userguide/directory-bucket-delete.html), so a custom
      resource empties it first (express_empty/index.py).

    ``bucket_name`` (Ref) and ``bucket_arn`` (``arn:aws:s3express:<region>:<account>:bucket/<name>``)
    are what IAM statements and the CLI use; ``grant_read_write_session`` lets a principal create the
    ReadWrite sessions that CopyObject, PutObject and DeleteObjects need.
    """

    def __init__(self, scope: Construct, construct_id: str, *, az_id: str) -> None:
        super().__init__(scope, construct_id)
        self.az_id = az_id
        self.bucket = s3express.CfnDirectoryBucket(
            self, "Bucket",
            data_redundancy="SingleAvailabilityZone",
            location_name=az_id,
            bucket_encryption=s3express.CfnDirectoryBucket.BucketEncryptionProperty(
                server_side_encryption_configuration=[s3express.CfnDirectoryBucket.ServerSideEncryptionRuleProperty(
                    server_side_encryption_by_default=s3express.CfnDirectoryBucket.ServerSideEncryptionByDefaultProperty(
                        sse_algorithm="AES256"))]),
            # The figures are the model's (facts/storage.py); dslab/core/stack_check.py reads them back.
            lifecycle_configuration=s3express.CfnDirectoryBucket.LifecycleConfigurationProperty(rules=[
                s3express.CfnDirectoryBucket.RuleProperty(
                    id="AbortIncompleteMultipartUploads", status="Enabled",
                    abort_incomplete_multipart_upload=s3express.CfnDirectoryBucket.AbortIncompleteMultipartUploadProperty(
                        days_after_initiation=EXPRESS_MULTIPART_ABORT_DAYS)),
                s3express.CfnDirectoryBucket.RuleProperty(
                    id="ExpireLeftCheckpoints", status="Enabled", prefix=f"{CHECKPOINTS_PREFIX}/",
                    expiration_in_days=EXPRESS_CHECKPOINT_EXPIRY_DAYS)]),
        )
        self.bucket.apply_removal_policy(RemovalPolicy.DESTROY)
        self.bucket_name: str = self.bucket.ref
        self.bucket_arn: str = self.bucket.attr_arn
        # Without it the rules above do nothing (see the class's note): the statement of AWS's own example, no more.
        # (An aws:SourceAccount condition would be the usual guard for a service principal; whether S3 Lifecycle sends
        # it is not documented, and a condition it fails would silently stop every expiry.)
        self.lifecycle_policy = s3express.CfnBucketPolicy(
            self, "LifecyclePolicy", bucket=self.bucket_name,
            policy_document={"Version": "2012-10-17",
                             "Statement": [{"Sid": "LifecycleSessions", "Effect": "Allow",
                                            "Principal": {"Service": LIFECYCLE_PRINCIPAL},
                                            "Action": "s3express:CreateSession", "Resource": self.bucket_arn,
                                            "Condition": {"StringEquals": {"s3express:SessionMode": "ReadWrite"}}}]})
        self.lifecycle_policy.apply_removal_policy(RemovalPolicy.DESTROY)
        self.empty_function = self._emptier()

    def _emptier(self) -> lambda_.Function:
        """The Lambda-backed custom resource that empties the bucket on stack deletion.

        The function itself is the ServiceToken (no custom_resources.Provider framework: that would add a
        second function, a role with a managed policy and an invoke wildcard, each one more finding). It is
        not in the VPC: it only calls the bucket's Zonal endpoint, and the isolated subnets have no route
        to CloudFormation's pre-signed response URL.
        """
        log_group = logs.LogGroup(self, "EmptyFunctionLogs", retention=logs.RetentionDays.ONE_MONTH,
                                  removal_policy=RemovalPolicy.DESTROY)
        role = iam.Role(self, "EmptyFunctionRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="DataSourceLab: empties the S3 Express directory bucket before it is deleted")
        # The log group's ARN as CloudFormation returns it already ends in ":*" (its streams)
        # (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-logs-loggroup.html).
        role.add_to_policy(iam.PolicyStatement(sid="Logs", actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                               resources=[log_group.log_group_arn]))
        self.grant_read_write_session(role, sid="EmptyBucket")
        function = lambda_.Function(
            self, "EmptyFunction", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=lambda_.Code.from_asset(str(EMPTY_HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            timeout=Duration.minutes(15), memory_size=256, role=role, log_group=log_group,
            description="DataSourceLab: empties the S3 Express directory bucket when the stack deletes it")
        resource = CustomResource(self, "Emptier", service_token=function.function_arn,
                                  resource_type="Custom::ExpressBucketEmptier",
                                  properties={"BucketName": self.bucket_name})
        # Deleted before the bucket (it refers to it) and before its function's permissions (it refers to
        # the function, which depends on its role and the role's policy).
        resource.node.add_dependency(role)
        return function

    def grant_read_write_session(self, grantee: iam.IGrantable, sid: str | None = None) -> None:
        """s3express:CreateSession on this bucket, any session mode: CopyObject into it, PutObject and
        DeleteObjects need a ReadWrite session ("The s3express:SessionMode condition key can't be set to
        ReadOnly on the copy destination bucket", CopyObject API reference)."""
        grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            sid=sid, actions=["s3express:CreateSession"], resources=[self.bucket_arn]))

    def grant_read_session(self, grantee: iam.IGrantable, sid: str | None = None) -> None:
        """s3express:CreateSession on this bucket for ReadOnly sessions only (GetObject, HeadObject, ListObjectsV2)
        (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-security-iam-example-bucket-policies.html)."""
        grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            sid=sid, actions=["s3express:CreateSession"], resources=[self.bucket_arn],
            conditions={"StringEquals": {"s3express:SessionMode": "ReadOnly"}}))
