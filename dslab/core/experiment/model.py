"""The experiment as data: datasets, compute, the user's script, trials, and the defaults they start from."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any
from ..facts.limits import FSX_DATA_MAX_WAIT_MINUTES
from ..model.calibration import SHIPPED, InUse
from ..modes import (CONTRACT_MODES, EXPRESS, FASTFILE, JPG, STANDARD, TFRECORD)


# The compute presets (MLPerf Storage's emulation and published training rates) are the premise's (premise.py).
from ..facts.compute import COMPUTE_PRESETS  # noqa: E402  (re-exported: experiment.COMPUTE_PRESETS)


REAL_MODELS = ("resnet50",)


ORDERS = ("listed", "interleave", "random")


S3_DATA_TYPES = ("S3Prefix", "ManifestFile")


# "auto" (the default): ShardedByS3Key for the S3 channels of a multi-instance trial, FullyReplicated on
# one instance (dslab/core/requests.py s3_distribution). The sizing model and the estimate (sizing.py,
# estimate.py) give each of N instances 1/N of the dataset; FullyReplicated would have every instance
# download (File) or stream (Pipe) all of it, so an instance_count sweep measured with it would not be
# the cluster they model. An explicit value is taken as it is.
DISTRIBUTIONS = ("auto", "FullyReplicated", "ShardedByS3Key")


RECORD_WRAPPERS = ("auto", "None", "RecordIO")


JOB_PREFIX_MAX = 20


# CreateTrainingJob allows 40 metric definitions; the lab's own documented lines take 8 of them.
MAX_USER_METRICS = 32


# SageMaker takes 100 hyperparameters; the container's four (sagemaker_program, ...) and the lab's own
# script's (compute, reader settings: under 16) come on top of the experiment's.
MAX_USER_HYPERPARAMETERS = 80


# The source post's datasets: Caltech-256 as small JPEGs and as ~110 MB TFRecord shards, 1x and 50x.
# files/bytes are the published sizes (../shared/calibration/bencher-measured.csv), used by the
# estimator and the File-mode volume check; ``generate`` tells the dataset tooling how to make them.
DEFAULT_DATASETS: list[dict[str, Any]] = [
    {"name": "caltech-jpg-1x", "format": JPG, "files": 30607, "bytes": 1_100_000_000,
     "generate": {"images": 30607, "classes": 257, "copies": 1}},
    {"name": "caltech-tfr-1x", "format": TFRECORD, "files": 10, "bytes": 1_100_000_000,
     "generate": {"images": 30607, "classes": 257, "copies": 1, "shard_size_mb": 110}},
    {"name": "caltech-jpg-50x", "format": JPG, "files": 1_530_350, "bytes": 54_000_000_000,
     "generate": {"images": 30607, "classes": 257, "copies": 50}},
    {"name": "caltech-tfr-50x", "format": TFRECORD, "files": 500, "bytes": 54_000_000_000,
     "generate": {"images": 30607, "classes": 257, "copies": 50, "shard_size_mb": 110}},
]


DEFAULTS: dict[str, Any] = {
    "name": "default",
    "description": "",
    # SageMaker's five sources; Script (the script reads S3 itself) is asked for by name.
    "modes": list(CONTRACT_MODES),
    "repeats": 1,
    "order": "listed",
    "seed": 0,
    "instance_type": "ml.p3.2xlarge",
    "instance_count": 1,
    # None: every job gets the default volume, raised to what its File-mode share of the data needs; NVMe types
    # their fixed instance storage (premise.volume_for). A number asks for that EBS volume.
    "volume_size_gb": None,
    "epochs": 1,
    # None: emulate the instance's own accelerator (instances.py: its MLPerf Storage preset), as `dslab
    # estimate`, `recommend` and `size` do; V100 where the instance has none the presets emulate.
    "compute": None,
    "max_run_seconds": 6 * 3600,
    "max_concurrency": 4,
    "teardown_fsx": False,
    # How long FSx jobs may wait for the S3 metadata import of a new file system (then Skipped).
    "fsx_import_wait_minutes": FSX_DATA_MAX_WAIT_MINUTES,
    "hyperparameters": {},
    "image_uri": None,
    "s3_data_type": "S3Prefix",
    "distribution": "auto",
    "shuffle_seed": None,
    "record_wrapper": "auto",
    "max_samples": 0,
    "workers": 0,
    "prefetch": 0,
    "spot": False,
    "script": None,
    # Where the S3 modes read: the lab's bucket, or the S3 Express One Zone directory bucket, to which
    # the workflow stages the trial's datasets first.
    "storage": STANDARD,
    "job_prefix": "dsl",
    # A DLIO workload file (MLPerf Storage's training workloads, core/workloads/dlio.py): its dataset, compute and epochs. A
    # checkpointing one (MLPerf Storage's llama3 files, core/workloads/checkpoint.py) makes the trial a checkpoint trial.
    "workload": None,
    # A checkpoint trial's targets and counts (CheckpointTrial); only beside a checkpointing workload.
    "checkpoint": None,
}


@dataclass(frozen=True)
class Dataset:
    name: str
    format: str
    prefix: str
    source: str = "s3"
    files: int | None = None
    bytes: int | None = None
    generate: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "format": self.format, "prefix": self.prefix, "source": self.source,
               "files": self.files, "bytes": self.bytes, "generate": dict(self.generate)}
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Compute:
    """Emulated accelerator time per batch (``model`` None) or a real model to train."""
    batch_size: int
    seconds_per_batch: float | None
    preset: str | None = None
    model: str | None = None
    # Emulated accelerators per instance (MLPerf Storage's simulated accelerators per host); None: the
    # instance table's count for the trial's instance type (dslab/core/facts/instances.py), at least one.
    accelerators: int | None = None

    def hyperparameters(self) -> dict[str, Any]:
        hp: dict[str, Any] = {"batch_size": self.batch_size}
        if self.model:
            hp["model"] = self.model
        else:
            hp["compute_seconds_per_batch"] = self.seconds_per_batch
        if self.preset:
            hp["compute_preset"] = self.preset
        return hp

    def to_dict(self) -> dict[str, Any]:
        out = {"batch_size": self.batch_size, "seconds_per_batch": self.seconds_per_batch,
               "preset": self.preset, "model": self.model, "accelerators": self.accelerators}
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Script:
    """The user's training code, run the way SageMaker's framework containers run an entry point.

    ``source_dir`` is a local folder (relative to the experiment file); the CLI packages it
    byte-reproducibly and uploads it, and records where in ``code_uri`` (content-addressed), so the
    experiment as run names the exact code. The workflow only ever sees ``code_uri``.
    """
    entry_point: str
    source_dir: str | None = None
    code_uri: str | None = None
    metric_definitions: tuple[tuple[str, str], ...] = ()
    packages_in_image: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"source_dir": self.source_dir, "entry_point": self.entry_point, "code_uri": self.code_uri,
                "metric_definitions": [{"Name": n, "Regex": r} for n, r in self.metric_definitions],
                "packages_in_image": self.packages_in_image}


@dataclass(frozen=True)
class CheckpointTrial:
    """What a checkpoint trial writes: its workload (core/workloads/checkpoint.py CheckpointWorkload, with the writes, reads and
    seconds between them as the trial runs them), where (modes.CHECKPOINT_TARGETS), and whether the sync targets get a
    restore job (a second job on the same S3 URI that writes nothing and reads back what SageMaker copies in)."""
    workload: Any
    targets: tuple[str, ...]
    restore: bool = True

    @property
    def dataset(self) -> "Dataset":
        """What the trial's records name as their dataset: the model. Nothing is uploaded or read for it."""
        from ..modes import CHECKPOINT_FORMAT
        return Dataset(name=self.workload.slug, format=CHECKPOINT_FORMAT, prefix=self.workload.slug)

    def plan(self, trial: "Trial", field: str = "instance_count"):
        """The workload on the trial's cluster: its instances, each with its accelerators (one rank a GPU)."""
        from ..facts.compute import accelerators_of
        gpus = trial.compute.accelerators or accelerators_of(trial.instance_type)
        return self.workload.plan(hosts=trial.instance_count, gpus_per_host=gpus, hosts_field=field)

    def to_dict(self) -> dict[str, Any]:
        w = self.workload
        return {"targets": list(self.targets), "writes": w.writes, "reads": w.reads,
                "seconds_between": max(0.0, w.interval_seconds), "restore": self.restore}


@dataclass(frozen=True)
class Trial:
    """One configuration of the job side; the experiment's base trial merged with one override."""
    name: str
    datasets: tuple[Dataset, ...]
    modes: tuple[str, ...]
    instance_type: str
    instance_count: int
    volume_size_gb: int | None      # None: sized for the data (premise.volume_for)
    epochs: int
    compute: Compute
    max_run_seconds: int
    hyperparameters: dict[str, Any]
    image_uri: str | None
    s3_data_type: str
    distribution: str
    shuffle_seed: int | None
    record_wrapper: str
    max_samples: int
    workers: int
    prefetch: int
    spot: bool
    script: Script | None = None
    storage: str = STANDARD
    # The DLIO workload (core/workloads/dlio.py Workload) the trial's dataset, compute, epochs and readers come from.
    workload: Any = None
    # The keys the document states for this trial (its own or the base's), against DEFAULTS: what was not
    # given is a default, and the premise of its answers says so.
    given: frozenset = field(default=frozenset(), compare=False)   # not what runs: a record re-parsed states every key
    # A checkpoint trial (its workload is a checkpointing one): where it writes, and how many checkpoints. Its jobs
    # are its targets x repeats, not datasets x modes.
    checkpoint: CheckpointTrial | None = None


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    trials: tuple[Trial, ...]
    repeats: int
    order: str
    seed: int
    max_concurrency: int
    teardown_fsx: bool
    job_prefix: str
    fsx_import_wait_minutes: int
    document: dict[str, Any]  # the normalised experiment as run, for results and reproduction
    # The model's constants its answers use: shipped, or the calibration file its `calibration:` key names (kept whole
    # in the document, so a run and its results say exactly which).
    calibration: InUse = SHIPPED

    @property
    def content_hash(self) -> str:
        return content_hash(self.document)

    @property
    def modes(self) -> tuple[str, ...]:
        seen: list[str] = []
        for trial in self.trials:
            seen.extend(m for m in trial.modes if m not in seen)
        return tuple(seen)

    @property
    def datasets(self) -> tuple[Dataset, ...]:
        seen: dict[str, Dataset] = {}
        for trial in self.trials:
            for ds in trial.datasets:
                seen.setdefault(ds.name, ds)
        return tuple(seen.values())


@dataclass(frozen=True)
class JobSpec:
    """One job of the experiment before any AWS value is known: trial x dataset x mode x repeat."""
    index: int
    trial: Trial
    dataset: Dataset
    mode: str
    repeat: int
    # A checkpoint trial's job: where it writes (modes.CHECKPOINT_TARGETS; ``mode`` is the record's mode for it), and
    # whether it is the restore job of a sync target (it writes nothing and reads what SageMaker copies in).
    target: str | None = None
    restore: bool = False

    @property
    def storage(self) -> str:
        """Where the job's S3 side is: the trial's storage; an Express sync target's, the directory bucket."""
        from ..modes import CKPT_EXPRESS
        return EXPRESS if self.target == CKPT_EXPRESS else self.trial.storage


def content_hash(document: dict[str, Any]) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# The default experiment (``{}``, what the workflow runs without input): the source post's matrix over
# all five modes, plus Express FastFile on the small-files datasets — the question the post's hardest
# case (1.5 million JPEGs, where FastFile waits on per-request latency) leaves open.
DEFAULT_DOCUMENT: dict[str, Any] = {"trials": [
    {"name": "base"},
    {"name": "express", "modes": [FASTFILE], "storage": EXPRESS, "datasets": ["caltech-jpg-1x", "caltech-jpg-50x"]},
]}
