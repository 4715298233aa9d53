"""DataSourceLab-Core: everything of the lab that stays while FSx comes and goes."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Annotations, CfnOutput, Stack
from constructs import Construct

from dslab.aws.images import lab_training_images

from .components.data_bucket import DataBucket
from .components.efs import LabEfs
from .components.express_bucket import ExpressBucket
from .components.handoff import CoreHandoff
from .components.network import LabNetwork
from .components.training_code import TrainingCode
from .components.training_role import TrainingRole
from .config import LabConfig
from .nag import acknowledge_core


class CoreStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: LabConfig, repo_root: Path, **kwargs) -> None:
        super().__init__(scope, construct_id, description="DataSourceLab: network, bucket, EFS, training role and code", **kwargs)
        self.config = config
        self.network = LabNetwork(self, "Network", az_id=config.az_id, cidr=config.vpc_cidr, express=config.express)
        self.data = DataBucket(self, "Data", disposable=config.disposable_bucket, adopt=config.adopt_bucket)
        # The S3 Express One Zone directory bucket in the lab's zone (None with -c express=false).
        self.express: ExpressBucket | None = (ExpressBucket(self, "Express", az_id=config.az_id)
                                              if config.express else None)
        self.efs = LabEfs(self, "Efs", vpc=self.network.vpc, subnet=self.network.subnet,
                          security_group=self.network.efs_sg, performance=config.efs_performance,
                          throughput=config.efs_throughput, provisioned_mibps=config.efs_provisioned_mibps,
                          mount_auth=config.efs_mount_auth)
        # The training images (dslab/aws/images.py) decide which ECR accounts the role may pull from.
        self.images = lab_training_images(config.region, self.node.try_get_context("trainingImage"),
                                          self.node.try_get_context("trainingImageCpu"))
        self.training = TrainingRole(self, "Training", data=self.data, vpc=self.network.vpc,
                                     subnet=self.network.subnet, security_group=self.network.training_sg,
                                     image_accounts=self.images.registry_accounts(), express=self.express)
        self.efs.grant_mount(self.training.role)
        self.code = TrainingCode(self, "TrainingCode", source_dir=repo_root / "training",
                                 build_dir=repo_root / "build")
        self.code.grant_read(self.training.role)

        outputs = {
            "BucketName": self.data.bucket.bucket_name,
            "SubnetId": self.network.subnet.subnet_id,
            "AvailabilityZoneId": config.az_id,
            # The zone's name in this account (names differ per account; the ID does not).
            "AvailabilityZone": self.network.subnet_zone_name,
            "TrainingSecurityGroupId": self.network.training_sg.security_group_id,
            "FsxSecurityGroupId": self.network.fsx_sg.security_group_id,
            "EfsSecurityGroupId": self.network.efs_sg.security_group_id,
            "EfsFileSystemId": self.efs.file_system.file_system_id,
            # What `dslab estimate`, `recommend` and `size` price as the lab's EFS.
            "EfsPerformanceMode": config.efs_performance,
            "EfsThroughputMode": config.efs_throughput,
            "EfsProvisionedMibps": str(config.efs_provisioned_mibps or 0),
            "TrainingRoleArn": self.training.role.role_arn,
            "TrainingCodeUri": self.code.s3_uri,
            "TrainingCodeVersion": self.code.version,
            "VpcId": self.network.vpc.vpc_id,
            # Says whether the lab has the directory bucket: "false" when deployed with -c express=false.
            "ExpressEnabled": "true" if self.express else "false",
        }
        if self.express:
            outputs.update({
                "ExpressBucketName": self.express.bucket_name,   # <generated>--<azid>--x-s3
                "ExpressBucketArn": self.express.bucket_arn,     # arn:aws:s3express:<region>:<account>:bucket/<name>
                "ExpressZoneId": config.az_id,
            })
        if config.express_note:
            # -c express=auto in a zone without S3 Express One Zone: said at synthesis and in the outputs.
            outputs["ExpressNote"] = config.express_note
            Annotations.of(self).add_warning_v2("dslab:express-unavailable", config.express_note)
        for key, value in outputs.items():
            CfnOutput(self, key, value=value)
        handoff = {
            "vpc-id": self.network.vpc.vpc_id,
            "subnet-id": self.network.subnet.subnet_id,
            "training-security-group-id": self.network.training_sg.security_group_id,
            "fsx-security-group-id": self.network.fsx_sg.security_group_id,
            "efs-file-system-id": self.efs.file_system.file_system_id,
            "efs-file-system-arn": self.efs.file_system.file_system_arn,
            "training-role-arn": self.training.role.role_arn,
        }
        if self.express:
            handoff.update({"express-bucket-name": self.express.bucket_name, "express-bucket-arn": self.express.bucket_arn})
        CoreHandoff(self, "Handoff", values=handoff)
        acknowledge_core(self)
