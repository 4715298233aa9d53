"""The one builder of CreateTrainingJob requests, shared by the workflow, the CLI and the local lab.

Every rule of how a data-source mode becomes a SageMaker channel lives here and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError
from .experiment import Dataset, Experiment, JobSpec, Trial, expand
from .facts.limits import MAX_JOBS
from .modes import EFS, EXPRESS, FASTFILE, FILE, FSX, PIPE, SCRIPT, TFRECORD
from .model.volume import Volume, file_share_bytes, volume_for
from .facts.compute import accelerators_of  # accelerators_of: re-exported

CHANNEL = "train"
ENTRY_POINT = "train.py"
# Every request has these top-level keys, a Script job all but InputDataConfig (CreateTrainingJob takes
# it absent but refuses an empty list): the state machine passes each by JSONPath, in one of two tasks.
REQUEST_KEYS = ("TrainingJobName", "RoleArn", "AlgorithmSpecification", "HyperParameters", "InputDataConfig",
                "OutputDataConfig", "ResourceConfig", "VpcConfig", "StoppingCondition", "Tags",
                "EnableManagedSpotTraining")
# A checkpoint trial's SageMaker-sync job has no channel but a CheckpointConfig: a third shape the state machine
# passes (stacks/components/workflow.py), as it passes a Script job's.
CHECKPOINT_CONFIG = "CheckpointConfig"
SCRIPT_REQUEST_KEYS = tuple(k for k in REQUEST_KEYS if k != "InputDataConfig")
CHECKPOINT_REQUEST_KEYS = (*SCRIPT_REQUEST_KEYS, CHECKPOINT_CONFIG)
# The hyperparameter that hands a Script job its dataset (the lab's script and users' alike).
DATASET_URI_HYPERPARAMETER = "dataset_uri"
# Capacity retries append "-a<N>" to the name; keep room for it under SageMaker's 63 characters.
JOB_NAME_MAX = 59
JOB_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")

# The bucket's layout (the stacks create the bucket; these prefixes are the contract).
DATASETS_PREFIX = "datasets"
# Where SageMaker's checkpoint sync puts a checkpoint trial's checkpoints (the data bucket, or the directory bucket),
# and where the FSx and EFS targets' jobs write them inside the file system:
# checkpoints/<execution>/<trial>/<target>-r<repeat>/.
CHECKPOINTS_PREFIX = "checkpoints"
# The read-write channel of the FSx and EFS targets (the file system's root, which always exists; the job makes its
# own folder under checkpoints/), and SageMaker's checkpoint LocalPath for the sync targets: "The default directory is
# /opt/ml/checkpoints/" (CheckpointConfig.LocalPath, SageMaker API reference).
CHECKPOINT_CHANNEL = "checkpoints"
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
CODE_PREFIX = "code"
OUTPUT_PREFIX = "output"
RESULTS_PREFIX = "results"
# Where datasets sit inside the file systems: FSx links /datasets to s3://bucket/datasets/ and the
# staging step copies the same prefix to /datasets on EFS.
FS_DATASETS_PATH = "/datasets"
# The lab's stacks and the SSM parameters the FSx stack publishes (and takes away with it): the
# stacks, the workflow's functions, the CLI and the stand-in all name them from here.
CORE_STACK = "DataSourceLab-Core"
FSX_STACK = "DataSourceLab-Fsx"
WORKFLOW_STACK = "DataSourceLab"
FSX_ID_PARAMETER = "/datasourcelab/fsx/file-system-id"
FSX_MOUNT_PARAMETER = "/datasourcelab/fsx/mount-name"
# What the Core stack hands the FSx and workflow stacks, as SSM parameters they read at deploy time
# (CloudFormation parameters of type AWS::SSM::Parameter::Value<String>). Not exports: CloudFormation
# refuses to change or delete an export another stack imports, so `-c express=false` or a new azId
# could not deploy ("After another stack imports an output value, you can't delete the stack that is
# exporting the output value or modify the exported output value",
# https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-stack-exports.html).
# The one CloudWatch Logs resource policy the lab adds (DataSync's task log), by name: a region holds at most 10.
LOGS_POLICY_NAME = "DataSourceLab-DataSync"
CORE_PARAMETER_PREFIX = "/datasourcelab/core"
CORE_PARAMETERS = ("vpc-id", "subnet-id", "training-security-group-id", "fsx-security-group-id",
                   "efs-file-system-id", "efs-file-system-arn", "training-role-arn",
                   "express-bucket-name", "express-bucket-arn")


def core_parameter(key: str) -> str:
    """The SSM parameter through which Core hands ``key`` to the other stacks."""
    if key not in CORE_PARAMETERS:
        raise KeyError(f"{key} is not one of the Core stack's parameters {CORE_PARAMETERS}")
    return f"{CORE_PARAMETER_PREFIX}/{key}"

# Beside each dataset prefix: ``datasets/<name>.stats.json`` ({"files", "bytes", ...}), written by
# `dslab dataset upload` or `dslab dataset stats --write`. The workflow reads it instead of listing.
STATS_SUFFIX = ".stats.json"


def stats_key(key_prefix: str) -> str:
    """``<prefix>.stats.json`` beside a prefix (never inside it: a Pipe channel streams every object there)."""
    return f"{key_prefix.strip('/')}{STATS_SUFFIX}"

# What the training script prints, and the regexes SageMaker scrapes (training/metric_definitions.json
# holds the same list for tools that read files; a test keeps the two equal).
METRIC_DEFINITIONS = [
    {"Name": "samples_per_second", "Regex": r"dslab_metric samples_per_second=([0-9.eE+-]+)"},
    {"Name": "mb_per_second", "Regex": r"dslab_metric mb_per_second=([0-9.eE+-]+)"},
    {"Name": "au_percent", "Regex": r"dslab_metric au_percent=([0-9.eE+-]+)"},
    {"Name": "end_to_end_efficiency_percent", "Regex": r"dslab_metric end_to_end_efficiency_percent=([0-9.eE+-]+)"},
    {"Name": "time_to_first_batch_seconds", "Regex": r"dslab_metric time_to_first_batch_seconds=([0-9.eE+-]+)"},
    {"Name": "epoch_seconds", "Regex": r"dslab_metric epoch_seconds=([0-9.eE+-]+)"},
    {"Name": "data_stall_seconds", "Regex": r"dslab_metric data_stall_seconds=([0-9.eE+-]+)"},
    {"Name": "samples", "Regex": r"dslab_metric samples=([0-9.eE+-]+)"},
]
# What a checkpoint trial's script prints (training/train.py run_checkpoint_trial): per checkpoint, then the mean
# over the checkpoints last (the value SageMaker keeps). Seconds, and GB/s of 1024**3 bytes as DLIO reports them.
# training/metric_definitions.json lists both lists; a checkpoint trial's job takes these beside the data ones.
CHECKPOINT_METRIC_DEFINITIONS = [
    {"Name": f"checkpoint_{name}", "Regex": rf"dslab_metric checkpoint_{name}=([0-9.eE+-]+)"}
    for name in ("save_seconds", "save_gb_per_second", "stall_seconds", "durable_seconds", "load_seconds",
                 "load_gb_per_second")
]


@dataclass(frozen=True)
class FileSystemRef:
    file_system_id: str
    mount_name: str | None = None  # FSx only: Scratch 2 mount names are unique, never assume "fsx"


@dataclass(frozen=True)
class LabEnvironment:
    """What the deployed lab provides (stack outputs) and what the workflow knows at run time."""
    bucket: str
    region: str
    role_arn: str
    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]
    image_uri: str  # the GPU training image; image_uri_cpu serves CPU instance types
    code_uri: str
    code_version: str
    fsx: FileSystemRef | None = None
    efs: FileSystemRef | None = None
    # The S3 Express One Zone directory bucket (None: deployed with -c express=false).
    express_bucket: str | None = None
    extra_tags: dict[str, str] = field(default_factory=dict)
    image_uri_cpu: str | None = None
    # Per instance family, an image that replaces image_uri ("" = no image the lab knows runs on that
    # accelerator). dslab/aws/images.py derives it: GPU architecture -> newest CUDA it runs -> image.
    image_uris: dict[str, str] = field(default_factory=dict)

    def image_for(self, instance_type: str) -> str:
        family = instance_type.split(".")[1] if instance_type.count(".") >= 2 else ""
        if family in self.image_uris:
            if not self.image_uris[family]:
                raise ConfigError("instance_type", f"{instance_type}: no training image of the lab runs on its "
                                  "accelerator (see dslab/aws/images.py); choose another instance type, or set "
                                  "image_uri in the experiment to an image that supports it")
            return self.image_uris[family]
        accelerated = family[:1] in ("p", "g") or family.startswith(("trn", "inf"))
        return self.image_uri if accelerated or not self.image_uri_cpu else self.image_uri_cpu

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LabEnvironment":
        def fs(value: Any) -> FileSystemRef | None:
            if not value or not value.get("file_system_id"):
                return None
            return FileSystemRef(value["file_system_id"], value.get("mount_name"))

        missing = [k for k in ("bucket", "region", "role_arn", "subnet_ids", "security_group_ids",
                               "image_uri", "code_uri") if not data.get(k)]
        if missing:
            raise ConfigError(f"environment.{missing[0]}", "is missing: the lab's stack outputs provide it "
                              "(cdk deploy --outputs-file, or a deployed DataSourceLab stack)")
        return cls(
            bucket=data["bucket"], region=data["region"], role_arn=data["role_arn"],
            subnet_ids=tuple(_as_list(data["subnet_ids"])),
            security_group_ids=tuple(_as_list(data["security_group_ids"])),
            image_uri=data["image_uri"], code_uri=data["code_uri"],
            code_version=data.get("code_version") or "unknown",
            fsx=fs(data.get("fsx")), efs=fs(data.get("efs")),
            express_bucket=_express_bucket(data.get("express_bucket")),
            extra_tags=dict(data.get("extra_tags") or {}),
            image_uri_cpu=data.get("image_uri_cpu") or None,
            image_uris=_image_map(data.get("image_uris")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket, "region": self.region, "role_arn": self.role_arn,
            "subnet_ids": list(self.subnet_ids), "security_group_ids": list(self.security_group_ids),
            "image_uri": self.image_uri, "image_uri_cpu": self.image_uri_cpu, "code_uri": self.code_uri, "code_version": self.code_version,
            "fsx": None if self.fsx is None else {"file_system_id": self.fsx.file_system_id, "mount_name": self.fsx.mount_name},
            "efs": None if self.efs is None else {"file_system_id": self.efs.file_system_id},
            "express_bucket": self.express_bucket,
            "extra_tags": dict(self.extra_tags), "image_uris": dict(self.image_uris),
        }


# Directory bucket names: "<base>--<zone-id>--x-s3", 3-63 characters
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/directory-bucket-naming-rules.html).
EXPRESS_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9-]*--[a-z0-9]+-az[0-9]+--x-s3$")


def _express_bucket(value: Any) -> str | None:
    if not value:
        return None
    if not isinstance(value, str) or len(value) > 63 or not EXPRESS_BUCKET_RE.match(value):
        raise ConfigError("environment.express_bucket", f"{value!r} is not a directory bucket name",
                          "<base>--<zone-id>--x-s3, e.g. lab--use1-az4--x-s3")
    return value


def is_express_bucket(bucket: str) -> bool:
    """What botocore tests too (botocore.utils.is_s3express_bucket): the --x-s3 suffix."""
    return bucket.endswith("--x-s3")


def _image_map(value: Any) -> dict[str, str]:
    """image_uris as a dict, or as its JSON text (the Lambda environment's DSLAB_IMAGE_URIS)."""
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError("environment.image_uris", f"{value[:60]!r} is not JSON: expected {{family: image URI}}") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError("environment.image_uris", "expected a JSON object {instance family: image URI}")
    return dict(value)


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def job_name(experiment: Experiment, spec: JobSpec, execution_id: str) -> str:
    """A unique, readable, valid (<= 63 characters) training-job name.

    The suffix hashes the execution and the job's index so names never collide across runs.
    """
    digest = hashlib.sha256(f"{execution_id}/{spec.index}".encode()).hexdigest()[:8]
    mode = ("x" if spec.trial.storage == EXPRESS else "") + spec.mode.lower()  # "xfastfile": Express FastFile
    if spec.target is not None:   # a checkpoint trial's: "ckfsx", "cks3", and "rss3" for the S3 sync's restore job
        mode = ("rs" if spec.restore else "ck") + spec.target
    room = 16 - max(0, len(mode) - len("fastfile"))
    dataset = re.sub(r"[^a-zA-Z0-9]+", "-", spec.dataset.name).strip("-")[:room].strip("-")
    name = f"{experiment.job_prefix}-{dataset}-{mode}-r{spec.repeat}-{digest}"
    name = re.sub(r"-{2,}", "-", name)
    if len(name) > JOB_NAME_MAX or not JOB_NAME_RE.match(name):  # cannot happen with validated parts; guard the contract anyway
        raise ConfigError("job_prefix", f"job name {name!r} is not a valid SageMaker training-job name")
    return name


def dataset_s3_uri(env: LabEnvironment, prefix: str, storage: str | None = None) -> str:
    # Ends in "/": directory buckets accept only prefixes that end in the delimiter (ListObjectsV2,
    # https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-differences.html).
    if storage == EXPRESS:
        if not env.express_bucket:
            raise ConfigError("storage", "the lab has no S3 Express One Zone bucket (deployed with -c express=false)",
                              "deploy with -c express=true, or drop storage: express")
        return f"s3://{env.express_bucket}/{DATASETS_PREFIX}/{prefix.strip('/')}/"
    return f"s3://{env.bucket}/{DATASETS_PREFIX}/{prefix.strip('/')}/"


def manifest_s3_uri(env: LabEnvironment, prefix: str) -> str:
    # Written by `dslab dataset upload` beside the dataset: a SageMaker ManifestFile.
    return f"s3://{env.bucket}/{DATASETS_PREFIX}/{prefix.strip('/')}.manifest"


def fsx_directory_path(env: LabEnvironment, prefix: str) -> str:
    if env.fsx is None or not env.fsx.mount_name:
        raise ConfigError("environment.fsx", "FSx is not deployed: no file system ID and mount name",
                          "deploy it with `dslab fsx up` (or `make fsx-up`), or drop FSx from modes")
    return f"/{env.fsx.mount_name}{FS_DATASETS_PATH}/{prefix.strip('/')}"


def efs_directory_path(prefix: str) -> str:
    return f"{FS_DATASETS_PATH}/{prefix.strip('/')}"


def s3_distribution(trial: Trial) -> str:
    """The S3DataDistributionType of the trial's S3 channels: "auto" shards on more than one instance.
    "If there are n ML compute instances launched for a training job, each instance gets approximately
    1/n of the number of S3 objects" with ShardedByS3Key, where FullyReplicated replicates "the entire
    dataset on each ML compute instance" (S3DataSource, SageMaker API reference): the first is the
    data-parallel split the sizing model and the estimate assume (see model.DISTRIBUTIONS)."""
    if trial.distribution != "auto":
        return trial.distribution
    return "ShardedByS3Key" if trial.instance_count > 1 else "FullyReplicated"


def build_channel(spec: JobSpec, env: LabEnvironment) -> dict[str, Any] | None:
    """The job's one input channel, or None for Script (the script reads S3 itself)."""
    trial, dataset, mode = spec.trial, spec.dataset, spec.mode
    if mode == SCRIPT:
        return None
    if mode in (FILE, FASTFILE, PIPE):
        s3_data_type = trial.s3_data_type
        if mode == FASTFILE and s3_data_type != "S3Prefix":
            raise ConfigError("s3_data_type", "FastFile supports only S3Prefix", ["S3Prefix"])
        # SageMaker takes a directory bucket's S3Uri directly in File, FastFile and Pipe mode; the role needs
        # s3express:CreateSession (stacks/components/training_role.py).
        uri = (dataset_s3_uri(env, dataset.prefix, spec.trial.storage) if s3_data_type == "S3Prefix"
               else manifest_s3_uri(env, dataset.prefix))
        channel: dict[str, Any] = {
            "ChannelName": CHANNEL,
            "InputMode": mode,
            "DataSource": {"S3DataSource": {
                "S3DataType": s3_data_type,
                "S3Uri": uri,
                "S3DataDistributionType": s3_distribution(trial),
            }},
        }
        if mode == PIPE:
            # A jpg (or npz) dataset is many objects: RecordIO keeps each object's boundaries in the stream.
            # TFRecord framing is self-delimiting, so shards stream as they are.
            wrapper = trial.record_wrapper
            if wrapper == "auto":
                wrapper = "None" if dataset.format == TFRECORD else "RecordIO"
            channel["RecordWrapperType"] = wrapper
        if trial.shuffle_seed is not None:
            channel["ShuffleConfig"] = {"Seed": trial.shuffle_seed}
        return channel
    if mode == FSX:
        source = {"FileSystemId": env.fsx.file_system_id if env.fsx else "",
                  "FileSystemType": "FSxLustre",
                  "DirectoryPath": fsx_directory_path(env, dataset.prefix),
                  "FileSystemAccessMode": "ro"}
    elif mode == EFS:
        if env.efs is None:
            raise ConfigError("environment.efs", "the lab has no EFS file system", "deploy the DataSourceLab stack")
        source = {"FileSystemId": env.efs.file_system_id, "FileSystemType": "EFS",
                  "DirectoryPath": efs_directory_path(dataset.prefix), "FileSystemAccessMode": "ro"}
    else:
        raise ConfigError("modes", f"unknown mode {mode!r}")
    # Mounted file systems use InputMode File: SageMaker mounts them, it does not copy.
    return {"ChannelName": CHANNEL, "InputMode": FILE, "DataSource": {"FileSystemDataSource": source}}


def script_hyperparameters(spec: JobSpec) -> dict[str, Any]:
    """What the training script reads (before SageMaker's string encoding)."""
    trial = spec.trial
    hp: dict[str, Any] = {
        "dataset_format": spec.dataset.format,
        "epochs": trial.epochs,
        "seed": spec.repeat,
        **trial.compute.hyperparameters(),
    }
    if trial.compute.model is None:
        # Every accelerator of the instance emulated (MLPerf Storage's simulated accelerators per host).
        hp["accelerators"] = trial.compute.accelerators or accelerators_of(trial.instance_type)
    if trial.max_samples:
        hp["max_samples"] = trial.max_samples
    if trial.workers:
        hp["workers"] = trial.workers
    if trial.prefetch:
        hp["prefetch"] = trial.prefetch
    hp.update(trial.hyperparameters)
    return hp


def checkpoint_location(spec: JobSpec, execution_id: str) -> str:
    """Where a checkpoint job's checkpoints go, below the bucket or the file system's root."""
    return f"{CHECKPOINTS_PREFIX}/{execution_id}/{spec.trial.name}/{spec.target}-r{spec.repeat}"


def checkpoint_s3_uri(spec: JobSpec, env: LabEnvironment, execution_id: str) -> str:
    """A sync target's CheckpointConfig.S3Uri: the data bucket's, or the directory bucket's ("you can provide an S3 URI
    for a folder in either an S3 general purpose bucket or an S3 directory bucket", SageMaker Developer Guide,
    model-checkpoints.html). Its writer and its restore job name the same one. Ends in "/": a directory bucket takes
    only prefixes that end in the delimiter."""
    from .modes import CKPT_EXPRESS
    if spec.target == CKPT_EXPRESS:
        if not env.express_bucket:
            raise ConfigError("checkpoint.targets", "the lab has no S3 Express One Zone bucket (deployed with "
                              "-c express=false)", "deploy with -c express=true, or drop express from the targets")
        bucket = env.express_bucket
    else:
        bucket = env.bucket
    return f"s3://{bucket}/{checkpoint_location(spec, execution_id)}/"


def checkpoint_channel(spec: JobSpec, env: LabEnvironment) -> dict[str, Any]:
    """The FSx or EFS target's channel: the file system's root, read-write ("FileSystemAccessMode: The access mode of
    the mount of the directory associated with the channel. A directory can be mounted either in ro (read-only) or in
    rw (read-write) mode", FileSystemDataSource, SageMaker API reference); the job writes under checkpoints/."""
    from .modes import CKPT_FSX
    if spec.target == CKPT_FSX:
        if env.fsx is None or not env.fsx.mount_name:
            raise ConfigError("environment.fsx", "FSx is not deployed: no file system ID and mount name",
                              "deploy it with `dslab fsx up` (or `make fsx-up`), or drop fsx from the targets")
        source = {"FileSystemId": env.fsx.file_system_id, "FileSystemType": "FSxLustre",
                  "DirectoryPath": f"/{env.fsx.mount_name}", "FileSystemAccessMode": "rw"}
    else:
        if env.efs is None:
            raise ConfigError("environment.efs", "the lab has no EFS file system", "deploy the DataSourceLab stack")
        source = {"FileSystemId": env.efs.file_system_id, "FileSystemType": "EFS", "DirectoryPath": "/",
                  "FileSystemAccessMode": "rw"}
    return {"ChannelName": CHECKPOINT_CHANNEL, "InputMode": FILE, "DataSource": {"FileSystemDataSource": source}}


def checkpoint_plan_of(spec: JobSpec):
    """The job's checkpoint plan: its trial's workload on its cluster; a restore job writes nothing and reads back, and
    a file system's writer a restore job follows writes only (MLPerf Storage's write, then read, as separate runs: its
    reads on a new instance, not the one whose page cache and FSx client held the files; the sync's writer still reads
    its own volume back, which its restore job's copy-in does not replace)."""
    from dataclasses import replace
    from .modes import SYNC_TARGETS
    checkpoint = spec.trial.checkpoint
    workload = checkpoint.workload
    if spec.restore:
        workload = replace(workload, writes=0)
    elif spec.target not in SYNC_TARGETS and restored(spec):
        workload = replace(workload, reads=0)
    return replace(checkpoint, workload=workload).plan(spec.trial)


def restored(spec: JobSpec) -> bool:
    """Whether a restore job follows this checkpoint writer (expansion.py plans one where the trial reads back)."""
    checkpoint = spec.trial.checkpoint
    return bool(spec.target and not spec.restore and checkpoint is not None and checkpoint.restore
                and checkpoint.workload.reads > 0)


def checkpoint_hyperparameters(spec: JobSpec, execution_id: str) -> dict[str, Any]:
    """What the lab's script reads to run a checkpoint job (training/train.py run_checkpoint_trial): the plan, where to
    write (a file-system target's channel and folder; the sync targets write to SageMaker's LocalPath), and whether to
    delete its checkpoints at the end: once nothing reads them again (the restore job, or a writer none follows; on a
    file system they would bill as storage). "If a checkpoint is deleted in the SageMaker
    container, it will also be deleted in the S3 folder" (model-checkpoints.html): the sync's copies go with them."""
    from .modes import SYNC_TARGETS
    hp: dict[str, Any] = dict(checkpoint_plan_of(spec).hyperparameters())
    if spec.target not in SYNC_TARGETS:
        hp["checkpoint_channel"] = CHECKPOINT_CHANNEL
        hp["checkpoint_dir"] = checkpoint_location(spec, execution_id)
    hp["checkpoint_cleanup"] = not restored(spec)
    return hp


def checkpoint_volume(spec: JobSpec) -> Volume:
    """A checkpoint job's volume: a sync target's holds its host's files of every checkpoint written, and a restore
    job's every host's (SageMaker copies the whole S3 URI onto each instance); a file-system target's the default."""
    from .modes import SYNC_TARGETS
    if spec.target not in SYNC_TARGETS:
        return volume_for(spec.trial.instance_type, spec.trial.volume_size_gb)
    plan = spec.trial.checkpoint.plan(spec.trial)
    writes = spec.trial.checkpoint.workload.writes
    needed = plan.bytes * writes if spec.restore else max(plan.host_bytes(h) for h in range(plan.hosts)) * writes
    return volume_for(spec.trial.instance_type, spec.trial.volume_size_gb, needed)


def job_volume(spec: JobSpec, stats: dict[str, Any] | None = None) -> Volume:
    """The storage a job's instances get (premise.volume_for): File mode's share of the dataset as its distribution
    splits it (its bytes from the stats file Plan read, else the experiment's), on the volume asked for or one
    sized for it; NVMe types their own instance storage."""
    total = (stats or {}).get("bytes") or spec.dataset.bytes
    share = (file_share_bytes(int(total), spec.trial.instance_count, s3_distribution(spec.trial) == "ShardedByS3Key")
             if spec.mode == FILE and total else None)
    return volume_for(spec.trial.instance_type, spec.trial.volume_size_gb, share)


def encode_hyperparameters(values: dict[str, Any]) -> dict[str, str]:
    """SageMaker takes strings; like the SageMaker Python SDK, JSON-encode each value."""
    return {k: json.dumps(v) for k, v in values.items()}


def metric_definitions(spec: JobSpec) -> list[dict[str, str]]:
    """The user's metric definitions first, then the lab's documented metric lines (which a user's
    script may print too, or emit through training/dslab_report.py)."""
    script = spec.trial.script
    if script is None:
        return METRIC_DEFINITIONS
    own = [{"Name": name, "Regex": regex} for name, regex in script.metric_definitions]
    names = {d["Name"] for d in own}
    return own + [d for d in METRIC_DEFINITIONS if d["Name"] not in names]


def user_code_version(code_uri: str) -> str:
    """The code-version tag of a user's script: its content-addressed upload names its hash."""
    parts = code_uri.rstrip("/").split("/")
    return f"user-{parts[-2]}" if len(parts) >= 2 and re.fullmatch(r"[0-9a-f]{16,64}", parts[-2]) else "user"


def script_dataset_uri(spec: JobSpec, env: LabEnvironment) -> str:
    """Where a Script job's script reads: the dataset's prefix in the bucket its storage names."""
    return dataset_s3_uri(env, spec.dataset.prefix, spec.trial.storage)


# Tag values: at most 256 characters of letters, digits, spaces and _.:/=+-@
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_Tag.html).
TAG_VALUE_MAX = 256


def lineage_tags(spec: JobSpec, env: LabEnvironment, stats: dict[str, Any] | None) -> list[dict[str, str]]:
    """What SageMaker's lineage records of a channel, for a job that has none: the dataset's URI and its
    stats (files, bytes, the stats file's SHA-256), so the job says what it read."""
    uri = script_dataset_uri(spec, env)
    if len(uri) > TAG_VALUE_MAX:
        raise ConfigError(f"datasets.{spec.dataset.name}.prefix", f"the dataset URI is {len(uri)} characters; a tag "
                          f"value holds at most {TAG_VALUE_MAX}", "a shorter prefix")
    tags = [{"Key": "dslab:dataset-uri", "Value": uri}]
    if stats:
        tags += [{"Key": "dslab:dataset-files", "Value": str(stats["files"])},
                 {"Key": "dslab:dataset-bytes", "Value": str(stats["bytes"])}]
        if stats.get("sha256"):
            tags.append({"Key": "dslab:dataset-stats-sha256", "Value": stats["sha256"]})
    return tags


def build_request(experiment: Experiment, spec: JobSpec, env: LabEnvironment, execution_id: str,
                  stats: dict[str, Any] | None = None, max_runtime: int | None = None) -> dict[str, Any]:
    """The complete CreateTrainingJob request for one job. ``stats``: the dataset's stats file as Plan
    read it ({"files", "bytes", "sha256"}), recorded in a Script job's tags. ``max_runtime``: its
    MaxRuntimeInSeconds as the answer sizes it (answer/scenarios.py JobCheck), else the trial's max_run_seconds."""
    if spec.target is not None:
        return build_checkpoint_request(experiment, spec, env, execution_id, max_runtime)
    name = job_name(experiment, spec, execution_id)
    channel = build_channel(spec, env)
    image = spec.trial.image_uri or env.image_for(spec.trial.instance_type)
    script = spec.trial.script
    if script is None:
        program, code_uri, code_version = ENTRY_POINT, env.code_uri, env.code_version
        script_values = script_hyperparameters(spec)
    else:
        if not script.code_uri:
            raise ConfigError(f"trials.{spec.trial.name}.script.code_uri",
                              f"the script in {script.source_dir} has not been uploaded",
                              "start the run with `dslab run` or `dslab local`, which package and upload source_dir")
        # A user's script gets only its own hyperparameters: the framework container passes each one
        # as a command-line argument, and an argparse script refuses arguments it does not know.
        program, code_uri, code_version = script.entry_point, script.code_uri, user_code_version(script.code_uri)
        script_values = dict(spec.trial.hyperparameters)
    if channel is None:
        # No channel: the script's own requests leave the container, so EnableNetworkIsolation stays unset
        # ("If you enable network isolation ... the training container does not have network access",
        # CreateTrainingJob). The dataset reaches the script (the lab's or a user's) as a hyperparameter,
        # `--dataset_uri s3://...` on its command line, as the source post's own-ingestion section says.
        script_values[DATASET_URI_HYPERPARAMETER] = script_dataset_uri(spec, env)
    hyperparameters = {
        "sagemaker_program": program,
        "sagemaker_submit_directory": code_uri,
        "sagemaker_region": env.region,
        "sagemaker_container_log_level": 20,
        **script_values,
    }
    if len(hyperparameters) > 100:   # CreateTrainingJob's limit (HyperParameters: at most 100 entries)
        raise ConfigError(f"trials.{spec.trial.name}.hyperparameters",
                          f"the job would pass {len(hyperparameters)} hyperparameters; SageMaker takes at most 100",
                          "fewer hyperparameters")
    algorithm = {
        "TrainingImage": image,
        # Required even without a channel. A Script job declares File, the API's default mode: "SageMaker
        # downloads the training data from S3" (AlgorithmSpecification.TrainingInputMode) only through a
        # channel, so with none nothing is downloaded; no document covers FastFile without a channel.
        "TrainingInputMode": FILE if channel is None else channel["InputMode"],
        "MetricDefinitions": metric_definitions(spec),
    }
    own_tags = [{"Key": "dslab:code-version", "Value": code_version},
                *([{"Key": "dslab:script", "Value": script.entry_point}] if script else []),
                *(lineage_tags(spec, env, stats) if channel is None else [])]
    return _job_request(experiment, spec, env, name=name, algorithm=algorithm,
                        hyperparameters=encode_hyperparameters(hyperparameters), channel=channel,
                        volume_gb=job_volume(spec, stats).request_gb, execution_id=execution_id, own_tags=own_tags,
                        max_runtime=max_runtime)


def _job_request(experiment: Experiment, spec: JobSpec, env: LabEnvironment, *, name: str, algorithm: dict[str, Any],
                 hyperparameters: dict[str, str], channel: dict[str, Any] | None, volume_gb: int, execution_id: str,
                 own_tags: list[dict[str, str]], checkpoint_config: dict[str, str] | None = None,
                 max_runtime: int | None = None) -> dict[str, Any]:
    """What every CreateTrainingJob request of the lab shares (a data job's and a checkpoint job's): the role, the
    output, the cluster, the network, the stopping condition, spot, and the tags that name the job's experiment,
    dataset, mode and trial (``own_tags`` follow them, then the lab's extra tags)."""
    runtime = max_runtime or spec.trial.max_run_seconds
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "RoleArn": env.role_arn,
        "AlgorithmSpecification": algorithm,
        "HyperParameters": hyperparameters,
        **({} if channel is None else {"InputDataConfig": [channel]}),
        **({} if checkpoint_config is None else {CHECKPOINT_CONFIG: checkpoint_config}),
        "OutputDataConfig": {"S3OutputPath": f"s3://{env.bucket}/{OUTPUT_PREFIX}/{experiment.name}/"},
        "ResourceConfig": {
            "InstanceType": spec.trial.instance_type,
            "InstanceCount": spec.trial.instance_count,
            "VolumeSizeInGB": volume_gb,
        },
        "VpcConfig": {"SecurityGroupIds": list(env.security_group_ids), "Subnets": list(env.subnet_ids)},
        "StoppingCondition": {"MaxRuntimeInSeconds": runtime},
        "Tags": [
            {"Key": "dslab:experiment", "Value": experiment.name},
            {"Key": "dslab:experiment-hash", "Value": experiment.content_hash},
            {"Key": "dslab:execution", "Value": execution_id[-256:]},
            {"Key": "dslab:dataset", "Value": spec.dataset.name},
            {"Key": "dslab:format", "Value": spec.dataset.format},
            {"Key": "dslab:mode", "Value": spec.mode},
            {"Key": "dslab:storage", "Value": spec.storage},
            {"Key": "dslab:repeat", "Value": str(spec.repeat)},
            {"Key": "dslab:trial", "Value": spec.trial.name},
            *own_tags,
            *({"Key": k, "Value": v} for k, v in sorted(env.extra_tags.items())),
        ],
    }
    # Always present, so every request says whether it is spot.
    request["EnableManagedSpotTraining"] = spec.trial.spot
    if spec.trial.spot:
        request["StoppingCondition"]["MaxWaitTimeInSeconds"] = runtime * 2
    return request


def build_checkpoint_request(experiment: Experiment, spec: JobSpec, env: LabEnvironment, execution_id: str,
                             max_runtime: int | None = None) -> dict[str, Any]:
    """A checkpoint trial's job: the lab's script with the checkpoint plan, and where it writes. The sync targets get a
    CheckpointConfig and no channel ("SageMaker provides the functionality to copy the checkpoints from the local path
    to Amazon S3 and automatically syncs the checkpoints in that directory with S3", model-checkpoints.html); FSx and
    EFS a read-write channel every host shares. Only the checkpoint metric definitions: the job reads no data."""
    from .modes import SYNC_TARGETS
    name = job_name(experiment, spec, execution_id)
    hyperparameters = {"sagemaker_program": ENTRY_POINT, "sagemaker_submit_directory": env.code_uri,
                       "sagemaker_region": env.region, "sagemaker_container_log_level": 20,
                       **checkpoint_hyperparameters(spec, execution_id), **spec.trial.hyperparameters}
    if spec.target in SYNC_TARGETS:
        # The job lists it until each checkpoint it wrote is in S3, and each it deleted is gone
        # (training/dslab_train/checkpoint.py, durable): SageMaker neither uploads nor deletes once the job ends.
        hyperparameters["checkpoint_s3_uri"] = checkpoint_s3_uri(spec, env, execution_id)
    encoded = encode_hyperparameters(hyperparameters)
    too_long = next((k for k, v in encoded.items() if len(v) > 2500), None)
    if too_long:   # HyperParameterValue: at most 2,500 characters (botocore's SageMaker model)
        raise ConfigError(f"trials.{spec.trial.name}.workload", f"the job's {too_long} hyperparameter is "
                          f"{len(encoded[too_long]):,} characters; SageMaker takes at most 2,500")
    channel = None if spec.target in SYNC_TARGETS else checkpoint_channel(spec, env)
    algorithm = {"TrainingImage": spec.trial.image_uri or env.image_for(spec.trial.instance_type),
                 "TrainingInputMode": FILE, "MetricDefinitions": list(CHECKPOINT_METRIC_DEFINITIONS)}
    own_tags = [{"Key": "dslab:checkpoint-target", "Value": spec.target},
                {"Key": "dslab:checkpoint-restore", "Value": "true" if spec.restore else "false"},
                {"Key": "dslab:code-version", "Value": env.code_version}]
    sync = ({"S3Uri": checkpoint_s3_uri(spec, env, execution_id), "LocalPath": CHECKPOINT_LOCAL_PATH}
            if channel is None else None)
    return _job_request(experiment, spec, env, name=name, algorithm=algorithm, hyperparameters=encoded,
                        channel=channel, volume_gb=checkpoint_volume(spec).request_gb, execution_id=execution_id,
                        own_tags=own_tags, checkpoint_config=sync, max_runtime=max_runtime)


@dataclass
class PlannedJob:
    spec: JobSpec
    name: str
    request: dict[str, Any] | None  # None when the job is skipped
    skip_reason: str | None = None
    kept: bool = False              # skipped because an earlier attempt of this execution finished it


# The execution input's key (beside the experiment's) naming jobs an earlier attempt of the same execution
# name finished: Plan skips them, keeping their names for the rest (`dslab local` resuming an interrupted run).
KEEP_JOBS = "keep_jobs"
KEPT_REASON = "kept: an earlier attempt of this execution finished it"


def _how_hosts_share(trial: Trial, dataset: Dataset, mode: str) -> str | None:
    """How the instances of a trial divide a dataset by whole objects, if they do (None: they do not)."""
    if mode in (FILE, FASTFILE, PIPE) and s3_distribution(trial) == "ShardedByS3Key":
        return "ShardedByS3Key gives each instance whole objects"
    if trial.script is not None:
        return None  # the user's script: how it shares a replicated channel or a file system is its own
    if mode == PIPE:
        # Each host keeps every n-th record of the stream: one per object for RecordIO-wrapped JPEGs; a
        # TFRecord shard holds many records, which the stats do not count.
        return ("the lab's script splits the Pipe stream's records (one per object) among the instances"
                if dataset.format != TFRECORD else None)
    return "the lab's script splits the files among the instances by SM_HOSTS"


def check_every_host_gets_data(experiment: Experiment, objects: dict[str, int] | None = None) -> None:
    """Refuse a trial with more instances than a dataset has objects to share out, before anything is
    created. "Don't choose more ML compute instances for training than available S3 objects. If you do,
    some nodes won't get any data and you will pay for nodes that aren't getting any training data. This
    applies in both File and Pipe modes" (S3DataSource, SageMaker API reference). The lab's script meets
    the same bound where it splits the data itself (FullyReplicated, FSx, EFS, Script): the host left
    without files fails the job ("read no samples"). ``objects``: per dataset, its object count as found
    (the stats file, the generated folder); else the experiment's ``files``; an unknown count is not checked."""
    for trial in experiment.trials:
        n = trial.instance_count
        for dataset in trial.datasets:
            count = (objects or {}).get(dataset.name, dataset.files)
            if n < 2 or not count or count >= n:
                continue
            for mode in trial.modes:
                how = _how_hosts_share(trial, dataset, mode)
                if how is not None:
                    raise ConfigError(
                        f"trial '{trial.name}': instance_count",
                        f"{n} instances but dataset '{dataset.name}' has {count} object{'s' if count != 1 else ''} "
                        f"({mode}: {how}), so {n - count} instance{'s' if n - count != 1 else ''} would get none "
                        "and fail the job",
                        f"at most {count} instances for '{dataset.name}', or more objects (smaller TFRecord shards: "
                        "generate.shard_size_mb, dslab dataset pack --shard-size)")


def check_job_count(experiment: Experiment, field: str = "repeats") -> list[JobSpec]:
    """The experiment's jobs, refused when one execution could not run them all (``field``: what to lower)."""
    specs = expand(experiment)
    if len(specs) > MAX_JOBS:
        raise ConfigError(field, f"the experiment expands to {len(specs)} jobs; one workflow execution runs at most "
                          f"{MAX_JOBS} (Step Functions' 25,000-event history and 256 KiB state limits)",
                          "lower repeats, datasets, modes or trials, or split the experiment into several files")
    return specs


def runtime_key(spec: JobSpec) -> tuple[str, str, str, str]:
    """A job's key in ``plan``'s ``runtimes``: (trial, dataset, mode, storage) for a data job (answer/scenarios.py
    JobCheck.key), with the target and "write" or "restore" for a checkpoint job (answer/checkpoint_jobs.py)."""
    if spec.target is not None:
        return (spec.trial.name, spec.dataset.name, spec.mode, f"{spec.target}:{'restore' if spec.restore else 'write'}")
    return (spec.trial.name, spec.dataset.name, spec.mode, spec.storage)


def plan(experiment: Experiment, env: LabEnvironment, execution_id: str, fsx_available: bool | None = None,
         dataset_stats: dict[str, dict[str, Any]] | None = None, keep: frozenset[str] = frozenset(),
         runtimes: dict[tuple[str, str, str, str], int] | None = None) -> list[PlannedJob]:
    """Expand the experiment into requests. FSx jobs become skipped (with the reason) when FSx is absent.
    ``dataset_stats``: per dataset name, its stats file as Plan read it (Script jobs' lineage tags).
    ``runtimes``: each job's MaxRuntimeInSeconds by ``runtime_key``, as the answer sizes it (answer/scenarios.py
    max_runtimes: data and checkpoint jobs); a job without one asks for its trial's max_run_seconds.
    ``keep``: names of jobs an earlier attempt of this execution finished: skipped as kept."""
    if fsx_available is None:
        fsx_available = env.fsx is not None and bool(env.fsx.mount_name)
    check_every_host_gets_data(experiment, {name: found["files"] for name, found in (dataset_stats or {}).items()
                                            if isinstance(found.get("files"), int)})
    specs = check_job_count(experiment)
    jobs: list[PlannedJob] = []
    names: set[str] = set()
    for spec in specs:
        name = job_name(experiment, spec, execution_id)
        if name in names:
            raise ConfigError("job_prefix", f"two jobs would share the name {name}")
        names.add(name)
        if name in keep:
            jobs.append(PlannedJob(spec, name, None, KEPT_REASON, kept=True))
            continue
        if spec.mode == FSX and not fsx_available:
            jobs.append(PlannedJob(spec, name, None,
                                   "FSx for Lustre is not deployed (torn down?): bring it back with `dslab fsx up`"))
            continue
        if spec.storage == EXPRESS and not env.express_bucket:
            jobs.append(PlannedJob(spec, name, None, "the lab has no S3 Express One Zone bucket: it was deployed with "
                                   "-c express=false; deploy with -c express=true to run the Express jobs"))
            continue
        runtime = (runtimes or {}).get(runtime_key(spec))
        jobs.append(PlannedJob(spec, name, build_request(experiment, spec, env, execution_id,
                                                         (dataset_stats or {}).get(spec.dataset.name), runtime)))
    unknown = sorted(keep - names)
    if unknown:
        raise ConfigError(KEEP_JOBS, f"{unknown[0]} is not a job of execution {execution_id}",
                          "name only jobs of the same experiment and execution")
    return jobs
