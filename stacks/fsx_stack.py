"""DataSourceLab-Fsx: the FSx for Lustre file system alone, so it can be deleted and recreated cheaply.

Nothing imports from this stack (no CloudFormation exports): the workflow and the CLI read its
SSM parameters at run time, so ``cdk destroy --exclusively DataSourceLab-Fsx`` is never blocked
and CloudFormation always describes what exists.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack, aws_ec2 as ec2
from constructs import Construct

from .components.fsx import LabFsx
from .config import FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER, LabConfig
from .core_stack import CoreStack


class FsxStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: LabConfig, core: CoreStack, **kwargs) -> None:
        super().__init__(scope, construct_id, description="DataSourceLab: FSx for Lustre Scratch 2 linked to the datasets prefix", **kwargs)
        # Immutable: the Lustre rules live in the Core stack with the group; the FSx construct would
        # otherwise add its own 988-1023 self-rule there, a Core resource owned by this stack's code.
        fsx_sg = ec2.SecurityGroup.from_security_group_id(
            self, "FsxSg", core.network.fsx_sg.security_group_id, mutable=False, allow_all_outbound=False)
        self.fsx = LabFsx(self, "Fsx", vpc=core.network.vpc, subnet=core.network.subnet,
                          security_group=fsx_sg, bucket=core.data.bucket,
                          capacity_gib=config.fsx_capacity_gib, link=config.fsx_link,
                          id_parameter=FSX_ID_PARAMETER, mount_parameter=FSX_MOUNT_PARAMETER)
        CfnOutput(self, "FsxFileSystemId", value=self.fsx.file_system.file_system_id)
        CfnOutput(self, "FsxMountName", value=self.fsx.file_system.mount_name)
        CfnOutput(self, "FsxCapacityGiB", value=str(config.fsx_capacity_gib))
