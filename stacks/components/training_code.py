"""The training script, packaged as SageMaker script mode expects it (``sourcedir.tar.gz``)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_iam as iam, aws_s3_assets as s3_assets
from constructs import Construct

from dslab.inputs.packaging import build_sourcedir


class TrainingCode(Construct):
    """Builds ``training/`` into a byte-reproducible tarball and ships it as a file asset.

    The asset hash is the tarball's content hash, so it is also the code version recorded in every
    job's tags and results. Single-file assets are uploaded as-is (no zip), which is what the
    SageMaker training toolkit extracts.
    """

    def __init__(self, scope: Construct, construct_id: str, *, source_dir: Path, build_dir: Path) -> None:
        super().__init__(scope, construct_id)
        tarball, digest = build_sourcedir(source_dir, build_dir)
        self.version = digest[:12]
        self.asset = s3_assets.Asset(self, "Asset", path=str(tarball))
        self.s3_uri = self.asset.s3_object_url

    def grant_read(self, role: iam.IRole) -> None:
        # Exactly this object (Asset.grant_read would add s3:GetObject*, List* on the whole asset bucket).
        role.add_to_principal_policy(iam.PolicyStatement(
            sid="ReadTrainingCodeAsset", actions=["s3:GetObject"],
            resources=[self.asset.bucket.arn_for_objects(self.asset.s3_object_key)]))
