"""The SageMaker execution role of the lab's training jobs, least privilege."""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack, aws_ec2 as ec2, aws_iam as iam
from constructs import Construct

from .data_bucket import DataBucket
from .express_bucket import ExpressBucket



class TrainingRole(Construct):
    """What a training job needs, nothing more.

    Reads datasets/ and code/, writes output/, syncs checkpoints/ (a checkpoint trial's SageMaker checkpoint
    sync, on the data bucket and the directory bucket), manages the network interfaces SageMaker creates in
    the lab's subnet, writes its logs and metrics, pulls the framework image. No ``*`` actions and
    no managed FullAccess policies; each wildcard resource is acknowledged in the stack with why.
    """

    def __init__(self, scope: Construct, construct_id: str, *, data: DataBucket, vpc: ec2.IVpc,
                 subnet: ec2.ISubnet, security_group: ec2.ISecurityGroup, image_accounts: list[str],
                 express: ExpressBucket | None = None) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
                             description="DataSourceLab SageMaker training jobs")
        bucket = data.bucket
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ReadDatasetsAndCode", actions=["s3:GetObject"],
            resources=[data.arn_for("datasets"), data.arn_for("code")]))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ListDatasetsAndCode", actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{data.PREFIXES['datasets']}/*", f"{data.PREFIXES['code']}/*"]}}))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="WriteOutput", actions=["s3:PutObject", "s3:AbortMultipartUpload"],
            resources=[data.arn_for("output")]))
        # Checkpoint trials' SageMaker sync (CheckpointConfig) under checkpoints/ only: SageMaker "saves checkpoints to
        # Amazon S3 and syncs your training job with the checkpoint S3 bucket" (it reads what is there at the start,
        # writes new ones, and "If a checkpoint is deleted in the SageMaker container, it will also be deleted in the
        # S3 folder": model-checkpoints.html), with the job's role.
        self.role.add_to_policy(iam.PolicyStatement(
            sid="SyncCheckpoints",
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            resources=[data.arn_for("checkpoints")]))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ListCheckpoints", actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{data.PREFIXES['checkpoints']}/*"]}}))
        if express is not None:
            # Training reads the directory bucket and, for a checkpoint trial's Express target, SageMaker syncs the
            # checkpoints to it: every client gets temporary credentials scoped to the bucket with CreateSession, and
            # writes need a ReadWrite session. A directory bucket cannot be narrowed to a prefix: "The access control
            # boundary for directory buckets is set only at the bucket level ... directory buckets are the only
            # resource that you can include in bucket policies or IAM identity policies for S3 Express One Zone access"
            # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-authenticating-authorizing.html). The
            # bucket holds only copies (datasets staged from the data bucket, checkpoints); job output still goes to
            # the data bucket (WriteOutput).
            express.grant_read_write_session(self.role, sid="ReadWriteExpressBucket")

        # SageMaker creates and deletes the job's ENIs in the lab subnet; Describe* calls take no resource.
        self.role.add_to_policy(iam.PolicyStatement(
            sid="DescribeNetwork",
            actions=["ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions",
                     "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"],
            resources=["*"]))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ManageJobNetworkInterfaces",
            actions=["ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
                     "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission"],
            resources=[
                stack.format_arn(service="ec2", resource="network-interface", resource_name="*"),
                stack.format_arn(service="ec2", resource="subnet", resource_name=subnet.subnet_id),
                stack.format_arn(service="ec2", resource="security-group", resource_name=security_group.security_group_id),
            ]))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="JobLogs",
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[stack.format_arn(service="logs", resource="log-group",
                                        resource_name="/aws/sagemaker/TrainingJobs:*",
                                        arn_format=ArnFormat.COLON_RESOURCE_NAME)]))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="JobMetrics", actions=["cloudwatch:PutMetricData"], resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}}))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="EcrToken", actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="PullFrameworkImage",
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            # The accounts of the images the lab deploys: AWS Deep Learning Containers come from 763104351884 in
            # most regions and from another account in about twenty (the SDK resolves them per region:
            # https://github.com/aws/deep-learning-containers/blob/master/available_images.md).
            resources=[f"arn:{stack.partition}:ecr:{stack.region}:{account}:repository/*" for account in image_accounts]))

