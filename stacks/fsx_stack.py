"""DataSourceLab-Fsx: the FSx for Lustre file system alone, so it can be deleted and recreated cheaply.

Nothing imports from this stack (no CloudFormation exports): the workflow and the CLI read its
SSM parameters at run time, so ``cdk destroy --exclusively DataSourceLab-Fsx`` is never blocked
and CloudFormation always describes what exists.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Stack, aws_ec2 as ec2, aws_s3 as s3
from constructs import Construct

from .components.data_bucket import data_bucket_name
from .components.fsx import LabFsx
from .components.handoff import from_core
from .config import FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER, LabConfig


class FsxStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: LabConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, description=f"DataSourceLab: FSx for Lustre {config.fsx_deployment_type} linked to the datasets prefix", **kwargs)
        # Core's network, read from its SSM handoff at deploy time (components/handoff.py), never imported.
        # Immutable: the Lustre rules live in the Core stack with the group; the FSx construct would
        # otherwise add its own 988-1023 self-rule there, a Core resource owned by this stack's code.
        fsx_sg = ec2.SecurityGroup.from_security_group_id(
            self, "FsxSg", from_core(self, "fsx-security-group-id"), mutable=False, allow_all_outbound=False)
        subnet = ec2.Subnet.from_subnet_id(self, "Subnet", from_core(self, "subnet-id"))
        # The construct takes a VPC only to make a security group when none is given (one is given), so the
        # VPC's ID is never rendered: AWS::NoValue, which CloudFormation would refuse if it ever were.
        vpc = ec2.Vpc.from_vpc_attributes(self, "Vpc", vpc_id=Aws.NO_VALUE, availability_zones=[Aws.NO_VALUE])
        bucket = s3.Bucket.from_bucket_name(self, "DataBucket", data_bucket_name(self))
        self.fsx = LabFsx(self, "Fsx", vpc=vpc, subnet=subnet,
                          security_group=fsx_sg, bucket=bucket,
                          capacity_gib=config.fsx_capacity_gib, link=config.fsx_link,
                          id_parameter=FSX_ID_PARAMETER, mount_parameter=FSX_MOUNT_PARAMETER,
                          deployment_type=config.fsx_deployment_type, mbps_per_tib=config.fsx_mbps_per_tib)
        CfnOutput(self, "FsxFileSystemId", value=self.fsx.file_system.file_system_id)
        CfnOutput(self, "FsxMountName", value=self.fsx.file_system.mount_name)
        CfnOutput(self, "FsxCapacityGiB", value=str(config.fsx_capacity_gib))
        # What `dslab estimate`, `recommend`, `size` and `fsx status` price as the lab's FSx (with FsxCapacityGiB).
        CfnOutput(self, "FsxDeploymentType", value=config.fsx_deployment_type)
        CfnOutput(self, "FsxThroughputPerTiB", value=str(config.fsx_mbps_per_tib or 200),
                  description="MB/s per TiB: Persistent 2's tier, Scratch 2's baseline (200)")
