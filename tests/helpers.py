"""Helpers shared by tests: small generated datasets and a folder stand-in for S3 and file systems."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from dslab.inputs import datasets
from dslab.core.experiment import parse_experiment
from dslab.core.requests import FileSystemRef, LabEnvironment, plan

BUCKET = "datasourcelab-data-123456789012-us-east-1"
FSX_ID = "fs-0123456789abcdef0"
EFS_ID = "fs-0fedcba9876543210"
TRAINING = Path(__file__).resolve().parent.parent / "training"


def lab_environment(fsx: bool = True) -> LabEnvironment:
    return LabEnvironment(
        bucket=BUCKET, region="us-east-1", role_arn="arn:aws:iam::123456789012:role/DataSourceLabTraining",
        subnet_ids=("subnet-0123456789abcdef0",), security_group_ids=("sg-0123456789abcdef0",),
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312",
        image_uri_cpu="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-cpu-py312",
        code_uri=f"s3://{BUCKET}/code/test/sourcedir.tar.gz", code_version="test",
        fsx=FileSystemRef(FSX_ID, "abcdefgh") if fsx else None, efs=FileSystemRef(EFS_ID))


@dataclass
class StandIn:
    root: Path
    jpg: Path          # the generated jpg dataset
    tfr: Path          # its TFRecord shards
    images: int
    class_counts: dict[int, int]

    @property
    def s3_root(self) -> Path:
        return self.root / "s3"

    @property
    def fs_root(self) -> Path:
        return self.root / "fs"

    def add_dataset(self, name: str, source: Path) -> None:
        """Put a dataset under datasets/<name>/ in S3, in FSx (linked) and in EFS (staged)."""
        for target in (self.s3_root / BUCKET / "datasets" / name, self.fs_root / FSX_ID / "datasets" / name,
                       self.fs_root / EFS_ID / "datasets" / name):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("dataset.json", "manifest.json"))


def make_stand_in(root: Path, images: int = 96, classes: int = 6) -> StandIn:
    jpg, tfr = root / "src-jpg", root / "src-tfr"
    datasets.generate(jpg, images=images, classes=classes, seed=7, mean_kb=12)
    datasets.pack(jpg, tfr, shard_size=400_000)
    counts: dict[int, int] = {}
    for i, folder in enumerate(sorted(p for p in jpg.iterdir() if p.is_dir())):
        counts[i] = len(list(folder.glob("*.jpg")))
    stand = StandIn(root, jpg, tfr, images, counts)
    stand.add_dataset("tiny-jpg", jpg)
    stand.add_dataset("tiny-tfr", tfr)
    return stand


def tiny_experiment(**overrides):
    doc = {"name": "tiny", "datasets": [{"name": "tiny-jpg", "format": "jpg"}, {"name": "tiny-tfr", "format": "tfrecord"}],
           "compute": {"batch_size": 16, "seconds_per_batch": 0.001}, "instance_type": "ml.m5.xlarge",
           "volume_size_gb": 10, "max_run_seconds": 600}
    doc.update(overrides)
    return parse_experiment(doc)


def tiny_requests(**overrides):
    return {(j.spec.dataset.name, j.spec.mode): j.request for j in plan(tiny_experiment(**overrides), lab_environment(), "test-exec")}
