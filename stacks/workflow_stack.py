"""DataSourceLab: the benchmark workflow. Deploying it deploys the whole lab (Core and FSx first)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Stack, aws_iam as iam, aws_s3 as s3
from constructs import Construct

from dslab.aws.images import lab_training_images

from .components.data_bucket import data_bucket_name
from .components.handoff import from_core
from .components.workflow import BenchmarkWorkflow
from .config import FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER, FSX_STACK, LabConfig
from .core_stack import CoreStack
from .nag import acknowledge_workflow


class WorkflowStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: LabConfig, core: CoreStack,
                 repo_root: Path, **kwargs) -> None:
        super().__init__(scope, construct_id, description="DataSourceLab: the benchmark workflow (Step Functions)", **kwargs)
        # By name, not by reference: IAM statements then read as plain ARNs in this stack.
        bucket = s3.Bucket.from_bucket_name(self, "DataBucket", data_bucket_name(self))
        # Per instance family, the newest image whose CUDA supports its GPU (dslab/aws/images.py has the rule).
        images = lab_training_images(config.region, self.node.try_get_context("trainingImage"),
                                     self.node.try_get_context("trainingImageCpu"))
        image_gpu, image_cpu = images.gpu, images.cpu
        # Core's values, read from its SSM handoff at deploy time (components/handoff.py), never imported.
        role_arn = from_core(self, "training-role-arn")
        subnet_id = from_core(self, "subnet-id")
        training_sg_id = from_core(self, "training-security-group-id")
        efs_id, efs_arn = from_core(self, "efs-file-system-id"), from_core(self, "efs-file-system-arn")
        # The Plan function's view of the lab: everything a CreateTrainingJob request needs.
        environment = {
            "DSLAB_BUCKET": bucket.bucket_name,
            "DSLAB_ROLE_ARN": role_arn,
            "DSLAB_SUBNET_IDS": subnet_id,
            "DSLAB_SECURITY_GROUP_IDS": training_sg_id,
            "DSLAB_IMAGE_URI": image_gpu,
            "DSLAB_IMAGE_URI_CPU": image_cpu,
            "DSLAB_IMAGE_URIS": images.by_family_json(),
            "DSLAB_CODE_URI": core.code.s3_uri,
            "DSLAB_CODE_VERSION": core.code.version,
            "DSLAB_EFS_ID": efs_id,
            "DSLAB_FSX_ID_PARAMETER": FSX_ID_PARAMETER,
            "DSLAB_FSX_MOUNT_PARAMETER": FSX_MOUNT_PARAMETER,
            "DSLAB_FSX_CAPACITY_GIB": str(config.fsx_capacity_gib),
            "DSLAB_EFS_THROUGHPUT_MIBPS": str(config.efs_provisioned_mibps or 0),
            # The lab the run's report prices (Plan reads FSx's own description when it is up).
            "DSLAB_FSX_DEPLOYMENT_TYPE": config.fsx_deployment_type,
            "DSLAB_FSX_MBPS_PER_TIB": str(config.fsx_mbps_per_tib or 200),
            "DSLAB_EFS_THROUGHPUT_MODE": config.efs_throughput,
            # What the model prices beside the file systems' sizes: EFS's performance mode (its per-file latency, its
            # limits) and the hours the idle guard leaves FSx up after the last run (what FSx bills when left).
            "DSLAB_EFS_PERFORMANCE_MODE": config.efs_performance,
            "DSLAB_FSX_IDLE_HOURS": f"{config.fsx_idle_hours:g}",
        }
        express_arn = None
        if config.express:  # off with -c express=false, or where the zone has no S3 Express One Zone
            environment["DSLAB_EXPRESS_BUCKET"] = from_core(self, "express-bucket-name")
            express_arn = from_core(self, "express-bucket-arn")
        self.workflow = BenchmarkWorkflow(
            self, "Workflow", repo_root=repo_root, bucket=bucket,
            training_role=iam.Role.from_role_arn(self, "TrainingRole", role_arn, mutable=False),
            subnet_id=subnet_id, training_sg_id=training_sg_id,
            efs_file_system_arn=efs_arn, environment=environment,
            fsx_stack_name=FSX_STACK, fsx_parameters=(FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER),
            efs_mount_auth=config.efs_mount_auth, fsx_idle_hours=config.fsx_idle_hours,
            express_bucket_arn=express_arn)
        CfnOutput(self, "StateMachineArn", value=self.workflow.state_machine.state_machine_arn)
        CfnOutput(self, "TrainingImageUri", value=image_gpu)
        CfnOutput(self, "TrainingImageUriCpu", value=image_cpu)
        CfnOutput(self, "TrainingImageUris", value=images.by_family_json(),
                  description="Per instance family, the image replacing TrainingImageUri (\"\" = none runs there)")
        CfnOutput(self, "EfsSyncTaskArn", value=self.workflow.sync_task.attr_task_arn)
        CfnOutput(self, "EfsEmptyTaskArn", value=self.workflow.empty_task.attr_task_arn,
                  description="The DataSync task `dslab efs empty` starts (deletes what EFS holds)")
        CfnOutput(self, "FsxIdleHours", value=f"{config.fsx_idle_hours:g}",
                  description="Hours without a workflow execution before the idle guard deletes FSx (0: off)")
        acknowledge_workflow(self)
