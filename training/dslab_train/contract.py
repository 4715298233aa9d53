"""What SageMaker gives a training script: /opt/ml (or SAGEMAKER_BASE_DIR) and the SM_* variables.

The mode is learned from ``inputdataconfig.json``: Pipe channels arrive as FIFOs, every other mode
(File, FastFile — written there as "File" —, FSx, EFS) as a directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


# The input mode of a job without a channel, whose script reads S3 itself (dataset_uri).
SCRIPT_INPUT = "Script"
# The input mode of a job that reads no data: it writes and reads checkpoints (the checkpoint_plan hyperparameter).
CHECKPOINT_ONLY = "Checkpoint"


class ContractError(RuntimeError):
    """The job was set up in a way the script cannot work with; the message says what to change."""


@dataclass(frozen=True)
class JobContext:
    base: Path
    channel: str
    input_mode: str              # "File" (directory), "Pipe", or "Script" (no channel: reads dataset_uri)
    record_wrapper: str          # "None" or "RecordIO"
    channel_dir: Path            # File-like modes: the directory; Pipe: where the FIFOs appear
    hyperparameters: dict[str, Any]
    model_dir: Path
    output_data_dir: Path
    failure_file: Path
    current_host: str
    hosts: tuple[str, ...]
    num_cpus: int
    num_gpus: int
    # "ShardedByS3Key": SageMaker gave this host its share of the objects already; otherwise (FullyReplicated,
    # FSx, EFS, no channel) every host sees everything and reads its share by SM_HOSTS/SM_CURRENT_HOST.
    distribution: str = "FullyReplicated"
    # Every channel's directory (a file-system channel mounted read-write can hold checkpoints).
    channel_dirs: dict[str, Path] = field(default_factory=dict)

    @property
    def shard(self) -> tuple[int, int]:
        """(this host's rank, hosts to split among): (0, 1) where SageMaker already sharded the channel."""
        if self.distribution == "ShardedByS3Key":
            return 0, 1
        return self.host_rank, len(self.hosts)

    @property
    def host_rank(self) -> int:
        return self.hosts.index(self.current_host) if self.current_host in self.hosts else 0

    def pipe_path(self, epoch: int) -> Path:
        return self.channel_dir.parent / f"{self.channel}_{epoch}"


def _load_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default
    except json.JSONDecodeError as err:
        raise ContractError(f"{path} is not valid JSON ({err})") from None


def _decode_hyperparameter(value: Any) -> Any:
    # SageMaker passes every value as a string; the SDK JSON-encodes them. Decode where possible.
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def load_context(environ: dict[str, str] | None = None) -> JobContext:
    env = os.environ if environ is None else environ
    base = Path(env.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
    config_dir = Path(env.get("SM_INPUT_CONFIG_DIR", base / "input" / "config"))
    hyperparameters = {k: _decode_hyperparameter(v)
                       for k, v in _load_json(config_dir / "hyperparameters.json", {}).items()}
    channels = _load_json(config_dir / "inputdataconfig.json", {})
    resources = _load_json(config_dir / "resourceconfig.json", {})
    input_dir = Path(env.get("SM_INPUT_DIR", base / "input"))
    channel_dirs = {name: Path(env.get(f"SM_CHANNEL_{name.upper()}", input_dir / "data" / name)) for name in channels}
    if not channels:
        # Script mode: no channel; the script reads the S3 prefix it is given itself. Or no data at all: a job that
        # writes and reads checkpoints.
        if hyperparameters.get("checkpoint_plan") and not hyperparameters.get("dataset_uri"):
            channel, spec, channel_dir = "", {"TrainingInputMode": CHECKPOINT_ONLY}, input_dir / "data"
        elif not hyperparameters.get("dataset_uri"):
            raise ContractError("the job has no input channel and no dataset_uri hyperparameter: give it one data "
                                "channel named 'train', or dataset_uri=s3://bucket/prefix/ to read S3 itself")
        else:
            channel, spec, channel_dir = "", {"TrainingInputMode": SCRIPT_INPUT}, input_dir / "data"
    else:
        channel = hyperparameters.get("channel") or ("train" if "train" in channels else sorted(channels)[0])
        if channel not in channels:
            raise ContractError(f"hyperparameter channel={channel!r} names no input channel (have: {', '.join(sorted(channels))})")
        spec = channels[channel]
        channel_dir = Path(env.get(f"SM_CHANNEL_{channel.upper()}", input_dir / "data" / channel))
    output_dir = Path(env.get("SM_OUTPUT_DIR", base / "output"))
    return JobContext(
        base=base,
        channel=channel,
        input_mode=spec.get("TrainingInputMode", "File"),
        record_wrapper=spec.get("RecordWrapperType", "None"),
        channel_dir=channel_dir,
        hyperparameters=hyperparameters,
        model_dir=Path(env.get("SM_MODEL_DIR", base / "model")),
        output_data_dir=Path(env.get("SM_OUTPUT_DATA_DIR", output_dir / "data")),
        failure_file=output_dir / "failure",
        current_host=resources.get("current_host", env.get("SM_CURRENT_HOST", "algo-1")),
        hosts=tuple(resources.get("hosts", [env.get("SM_CURRENT_HOST", "algo-1")])),
        num_cpus=int(env.get("SM_NUM_CPUS", os.cpu_count() or 1)),
        num_gpus=int(env.get("SM_NUM_GPUS", 0)),
        distribution=spec.get("S3DistributionType", "FullyReplicated"),
        channel_dirs=channel_dirs,
    )
