"""EFS for the EFS data source: Max I/O with Bursting or Provisioned throughput, or General Purpose with Elastic;
one mount target."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Size, aws_ec2 as ec2, aws_efs as efs, aws_iam as iam
from constructs import Construct

from dslab.core.model.efs import TRANSITION_TO_IA


class LabEfs(Construct):
    """A Regional EFS file system (Max I/O is refused for One Zone) with its mount target in the lab's AZ.

    Storage lifecycle: the datasets are copies of S3 that bill $0.30 per GB-month in Standard for as long as the
    lab stands. Files unread for a week move to Infrequent Access and return to Standard on their first read:
    "For performance-sensitive use cases that demand the fastest latency performance ... choose to transition
    files into Standard storage On first access"
    (https://docs.aws.amazon.com/efs/latest/ug/lifecycle-management-efs.html). Only files of 128 KiB or more
    move ("Files smaller than 128 KB aren't eligible for lifecycle management", same guide): TFRecord shards
    do, small JPEGs stay in Standard until `dslab efs empty` removes them.

    Mount authorisation is a switch because whether SageMaker mounts with IAM is unconfirmed:
    ``anonymous`` (default) lets the security group guard NFS; ``iam`` adds a file-system policy
    that grants ``ClientMount`` to the training role only.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, subnet: ec2.ISubnet,
                 security_group: ec2.ISecurityGroup, performance: str, throughput: str,
                 provisioned_mibps: int | None, mount_auth: str) -> None:
        super().__init__(scope, construct_id)
        throughput_mode = {"provisioned": efs.ThroughputMode.PROVISIONED, "elastic": efs.ThroughputMode.ELASTIC}.get(
            throughput, efs.ThroughputMode.BURSTING)
        self.file_system = efs.FileSystem(
            self, "FileSystem",
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=[subnet]),
            security_group=security_group,
            performance_mode=(efs.PerformanceMode.MAX_IO if performance == "maxIO"
                              else efs.PerformanceMode.GENERAL_PURPOSE),
            throughput_mode=throughput_mode,
            provisioned_throughput_per_second=(Size.mebibytes(provisioned_mibps) if provisioned_mibps else None),
            encrypted=True,
            enable_automatic_backups=False,  # datasets are copies of S3: S3 is the source of truth
            lifecycle_policy=getattr(efs.LifecyclePolicy, TRANSITION_TO_IA),
            out_of_infrequent_access_policy=efs.OutOfInfrequentAccessPolicy.AFTER_1_ACCESS,
            allow_anonymous_access=(mount_auth == "anonymous"),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.mount_auth = mount_auth

    def grant_mount(self, role: iam.IRole) -> None:
        """Let the training role mount (only matters with ``efsMountAuth=iam``): read-only for datasets, and read-write
        for a checkpoint trial's EFS target, which writes under /checkpoints as the container's root user, in the
        root-owned root directory: ClientMount "Provides read-only access to a file system", ClientWrite "Provides
        write permissions on a file system", ClientRootAccess "Provides use of the root user when accessing a file
        system" (EFS User Guide, iam-access-control-nfs-efs.html)."""
        actions = ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite", "elasticfilesystem:ClientRootAccess"]
        self.file_system.grant(role, *actions)
        if self.mount_auth == "iam":
            self.file_system.add_to_resource_policy(iam.PolicyStatement(
                actions=actions,
                principals=[role],
                resources=["*"],  # in a file-system policy "*" means this file system
                conditions={"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}},
            ))
