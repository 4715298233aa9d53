"""FSx for Lustre (Scratch 2, or Persistent 2 for a cluster), linked to the bucket's datasets prefix so files
lazy-load from S3."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, aws_ec2 as ec2, aws_fsx as fsx, aws_s3 as s3, aws_ssm as ssm
from constructs import Construct

from dslab.core.facts.storage import FSX_LINK_VERSIONS
from dslab.core.facts.storage import PERSISTENT_2
from dslab.core.requests import DATASETS_PREFIX, FS_DATASETS_PATH

LUSTRE_VERSIONS = {"2.12": fsx.FileSystemTypeVersion.V_2_12, "2.15": fsx.FileSystemTypeVersion.V_2_15}


class LabFsx(Construct):
    """A Scratch 2 or Persistent 2 file system (``fsxDeploymentType``; Persistent 2 with its throughput per TiB),
    Lustre 2.15, deleted with its stack (S3 holds the data). stacks/config.py has refused, before synthesis, what
    CreateFileSystem would refuse (provisioning.fsx_problems).

    The S3 link is a single switch (``fsxLink``):
      - ``dra`` (default): a Data Repository Association maps ``/datasets`` to ``s3://bucket/datasets/``
        with automatic import of new, changed and deleted objects. AWS supports DRAs on Lustre 2.12
        and 2.15 for every deployment type but SCRATCH_1, and reserves the legacy ImportPath for 2.10.
      - ``import-path``: the legacy ``ImportPath`` link (Lustre 2.12 here). It imports the bucket's
        root, so the datasets appear at ``/datasets`` as well and every DirectoryPath stays the same.
    The ID and mount name are published as SSM parameters owned by this stack: when the stack is
    deleted they disappear with it, which is how the workflow learns that FSx is down.
    """

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, subnet: ec2.ISubnet,
                 security_group: ec2.ISecurityGroup, bucket: s3.IBucket, capacity_gib: int, link: str,
                 id_parameter: str, mount_parameter: str, deployment_type: str = "SCRATCH_2",
                 mbps_per_tib: int | None = None) -> None:
        super().__init__(scope, construct_id)
        data_repository = f"s3://{bucket.bucket_name}/{DATASETS_PREFIX}/"
        legacy = link == "import-path"
        self.file_system = fsx.LustreFileSystem(
            self, "FileSystem",
            vpc=vpc,
            vpc_subnet=subnet,
            security_group=security_group,
            storage_capacity_gib=capacity_gib,
            file_system_type_version=LUSTRE_VERSIONS[FSX_LINK_VERSIONS[link]],
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=getattr(fsx.LustreDeploymentType, deployment_type),
                per_unit_storage_throughput=mbps_per_tib if deployment_type == PERSISTENT_2 else None,
                import_path=f"s3://{bucket.bucket_name}" if legacy else None,
                auto_import_policy=fsx.LustreAutoImportPolicy.NEW_CHANGED_DELETED if legacy else None,
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )
        if not legacy:
            fsx.CfnDataRepositoryAssociation(
                self, "DatasetsLink",
                file_system_id=self.file_system.file_system_id,
                file_system_path=FS_DATASETS_PATH,
                data_repository_path=data_repository,
                batch_import_meta_data_on_create=True,
                s3=fsx.CfnDataRepositoryAssociation.S3Property(
                    auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                        events=["NEW", "CHANGED", "DELETED"])),
            )
        ssm.StringParameter(self, "IdParameter", parameter_name=id_parameter,
                            string_value=self.file_system.file_system_id,
                            description="DataSourceLab FSx for Lustre file system ID (absent while FSx is down)")
        ssm.StringParameter(self, "MountNameParameter", parameter_name=mount_parameter,
                            string_value=self.file_system.mount_name,
                            description="DataSourceLab FSx for Lustre mount name (absent while FSx is down)")
