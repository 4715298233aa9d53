"""The premise of an answer: one question, asked the same way by every path.

Which instance, how many, how many accelerators each and what they eat (the compute), how many epochs, the
dataset's shape and where it was learnt, and the lab its sources are priced on. `dslab estimate`, `recommend`,
`size`, `plan`, `run`, `local`, `export` and the report build it with the same defaults and bounds (the CLI's
flags, an experiment file and a DLIO workload file all end here) and print it with every answer
(``Premise.describe``), so that a figure is never read without what it assumed.

The dataset's shape (``DatasetShape``), the compute presets and the rule that picks a compute for an instance
live here too: the estimate, the experiment and the DLIO workload all import them from this module, which
imports none of them. Standard library only, no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import ConfigError
from .instances import INSTANCES

# ---- defaults and bounds, the same for every command and every experiment file ----------------------
DEFAULT_INSTANCE = "ml.p3.2xlarge"   # the source post's instance (one V100)
DEFAULT_INSTANCE_COUNT = 1
DEFAULT_EPOCHS = 1
# The training volume every job gets when File mode needs no more (model artifacts, scratch space): what the
# experiment files have always asked for. File mode's jobs ask for what their share of the data needs
# (``volume_for``); instances with NVMe instance storage get their fixed capacity whatever is asked.
DEFAULT_VOLUME_GB = 100
# Instances of one job: the largest cluster `dslab size` searches, and the most an experiment or a flag may ask.
MAX_INSTANCE_COUNT = 4096
# A file needs this much room beyond its bytes on a volume (file system overhead, the download's temporaries).
VOLUME_HEADROOM = 1.05

# ---- the compute: samples per second one accelerator consumes ------------------------------------
# MLPerf Storage (DLIO) emulated-compute presets: batch size and seconds of accelerator time per batch.
# Source: ../shared/reference/anchors.md (ResNet-50; V100 batch 64 0.195 s, A100 batch 400 0.435 s,
# H100 batch 400 0.224 s).
MLPERF = "MLPerf Storage's ResNet-50 emulation"
COMPUTE_PRESETS: dict[str, dict[str, Any]] = {
    "v100": {"batch_size": 64, "seconds_per_batch": 0.195, "accelerator": "V100", "source": MLPERF},
    "a100": {"batch_size": 400, "seconds_per_batch": 0.435, "accelerator": "A100", "source": MLPERF},
    "h100": {"batch_size": 400, "seconds_per_batch": 0.224, "accelerator": "H100", "source": MLPERF},
}
# The accelerators SageMaker users train on most have no MLPerf Storage preset. Their rates come from published
# ResNet-50 training throughput (MLCommons MLPerf Training, closed division: NVIDIA's MXNet ResNet-50, FP16, each log's
# per-epoch throughput, the median of 5 runs, per accelerator), put on the A100 preset's scale: rate = the A100
# preset's 919.5 samples/s x (accelerator / A100-SXM-80GB, whose MLPerf Training v3.0 result, 3,575 img/s per GPU, ran
# the same generation of NVIDIA's containers). Not MLPerf Storage's emulation: each says so where it is used.
# T4 and Trainium: no published ResNet-50 training throughput was found (none in MLPerf Training; AWS Neuron's trn1
# training benchmarks list no CNN), so those instances ask for a measured rate (HOW_TO_MEASURE).
MLPERF_TRAINING_A100 = 3575.0   # img/s per A100-SXM-80GB, MLPerf Training v3.0 (NVIDIA, MXNet 23.04)
PUBLISHED_TRAINING = {
    "a10g": ("A10G", 938.0, "MLPerf Training v3.1, CTuning a10x2-mxnet_22.08 (an AWS g5.12xlarge, 2 x A10G: 1,877 img/s; "
                            "github.com/mlcommons/training_results_v3.1 CTuning/results/a10x2-mxnet_22.08/resnet)"),
    "l4": ("L4", 733.0, "MLPerf Training v3.0, xFusion 2288H_V7x6xL4 (6 x L4: 4,400 img/s; github.com/mlcommons/"
                        "training_results_v3.0 xFusion/results/2288H_V7x6xL4/resnet)"),
    "l40s": ("L40S", 2204.0, "MLPerf Training v3.1, xFusion G5500V7x8xL40S (8 x L40S: 17,633 img/s; github.com/mlcommons/"
                             "training_results_v3.1 xFusion/results/G5500V7x8xL40S/resnet)"),
}
for _name, (_accelerator, _published, _source) in PUBLISHED_TRAINING.items():
    _rate = 400 / 0.435 * _published / MLPERF_TRAINING_A100
    COMPUTE_PRESETS[_name] = {"batch_size": 64, "seconds_per_batch": round(64 / _rate, 4), "accelerator": _accelerator,
                              "source": f"{_published:,.0f} img/s published, {_source}, on the A100 preset's scale"}
# The instance of each accelerator a published workload file emulates (dlio.Workload.on_accelerator says it).
INSTANCE_OF_ACCELERATOR = {"v100": "ml.p3.2xlarge", "a100": "ml.p4d.24xlarge", "h100": "ml.p5.48xlarge"}
# The accelerator (as the instance table names it: its first word) each preset emulates.
PRESET_OF_ACCELERATOR = {spec["accelerator"]: name for name, spec in COMPUTE_PRESETS.items()}
# How to find a rate where no preset fits (every refusal that asks for one says it).
HOW_TO_MEASURE = ("measure it: the samples/s a real job of your model logs on that instance, divided by its "
                  "accelerators, or a local run with `compute: resnet50` (the lab trains ResNet-50 for real)")


def preset_rate(preset: str) -> float:
    spec = COMPUTE_PRESETS[preset]
    return spec["batch_size"] / spec["seconds_per_batch"]


def describe_preset(preset: str) -> str:
    spec = COMPUTE_PRESETS[preset]
    value = preset_rate(preset)
    if spec["source"] == MLPERF:
        return (f"ResNet-50 on {spec['accelerator']} as MLPerf Storage emulates it: batch {spec['batch_size']} "
                f"every {spec['seconds_per_batch']} s = {value:,.0f} samples/s")
    return (f"ResNet-50 on {spec['accelerator']} at {value:,.0f} samples/s ({spec['source']}; a published training "
            "throughput, not MLPerf Storage's emulation)")


# A bound on a given rate, per accelerator: ~550x the H100 preset's 1,786 samples/s. Past it the number is a
# typo (every source would be I/O-bound), and the arithmetic stays finite.
MAX_COMPUTE_RATE = 1_000_000.0


def compute_rate(preset: str | None = None, rate: float | None = None, *,
                 instance_type: str | None = None) -> tuple[float, str]:
    """Samples/s one accelerator consumes, and how it was chosen: ``rate`` as given, else ``preset``, else the
    preset of ``instance_type``'s accelerator. The one rule every command and experiment shares: an instance
    without an accelerator (m5, c5), or one no preset knows, or not in the instance table, is refused, asking for
    a rate and saying how to measure one. Without an instance, V100."""
    if rate is not None and preset:
        raise ConfigError("--compute-rate", "give either --compute-rate or --compute-preset, not both")
    if rate is not None:
        if not (isinstance(rate, (int, float)) and math.isfinite(rate) and 0 < rate <= MAX_COMPUTE_RATE):
            raise ConfigError("--compute-rate", f"{rate!r}: give the samples per second one accelerator consumes",
                              f"a number above 0 and at most {MAX_COMPUTE_RATE:,.0f}")
        return float(rate), f"the model consumes {rate:g} samples/s per accelerator (given)"
    if preset is None and instance_type is not None:
        preset = instance_preset(instance_type, "--compute-rate")
    preset = preset or "v100"
    if preset not in COMPUTE_PRESETS:
        raise ConfigError("--compute-preset", f"unknown preset {preset!r}", sorted(COMPUTE_PRESETS))
    return preset_rate(preset), describe_preset(preset)


def instance_preset(instance_type: str, field: str, *, experiment: bool = False) -> str:
    """The preset of the instance's accelerator; refused (naming ``field``) where there is none, saying what to give:
    --compute-rate or --compute-preset on the command line, ``compute:`` in an experiment (``experiment``)."""
    row = INSTANCES.get(instance_type)
    preset = PRESET_OF_ACCELERATOR.get(next(iter((row.accelerator or "").split()), "")) if row else None
    if preset is not None:
        return preset
    has = ("has no accelerator for a compute preset to emulate" if row and not row.accelerators else
           f"has {row.accelerator}, which no compute preset knows" if row else
           "is not in the instance table (dslab/core/instances.py), so its accelerator is unknown")
    if experiment:
        raise ConfigError(field, f"is not given, and {instance_type} {has}: give the samples/s one accelerator "
                          f"consumes as compute: {{batch_size, seconds_per_batch}}; {HOW_TO_MEASURE}",
                          ["compute: {batch_size: 64, seconds_per_batch: 0.2}", *(f"compute: {n}" for n in COMPUTE_PRESETS)])
    raise ConfigError(field, f"{instance_type} {has}: give the samples/s one accelerator consumes (--compute-rate); "
                      f"{HOW_TO_MEASURE}", [f"--compute-preset {name}" for name in COMPUTE_PRESETS])


# ---- sizes, as the CLI and the experiment files take them ------------------------------------------
SIZE_UNITS = {"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15, "KIB": 1024, "MIB": 1024 ** 2,
              "GIB": 1024 ** 3, "TIB": 1024 ** 4, "PIB": 1024 ** 5, "B": 1}
# A bare number below this is taken for a size with its unit forgotten (--bytes 1.5), not for bytes.
BARE_BYTES_MINIMUM = 1000
_SIZE_RE = re.compile(r"^([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)([A-Z]*)$")


def parse_bytes(text: Any, field: str, *, example: str = "2TB, 54GB, 1.5 GiB") -> int:
    """A size in bytes from ``2TB``, ``54GB``, ``1.5 GiB``, ``110MiB`` or a whole number of bytes. A bare number
    below 1 KB (or with a fraction) is refused with a "did you mean": ``--bytes 1.5`` is not 1.5 bytes."""
    if isinstance(text, bool):
        raise ConfigError(field, f"{text!r} is not a size", f"e.g. {example}")
    value = str(text).strip().upper().replace(" ", "").replace(",", "").replace("_", "")
    match = _SIZE_RE.match(value)
    if not match or match.group(2) not in SIZE_UNITS and match.group(2) != "":
        raise ConfigError(field, f"{text!r} is not a size", f"e.g. {example}")
    number, unit = float(match.group(1)), match.group(2)
    if not math.isfinite(number):
        raise ConfigError(field, f"{text!r} is not a size", f"e.g. {example}")
    if unit == "" and (number < BARE_BYTES_MINIMUM or number != int(number)):
        shown = match.group(1)
        raise ConfigError(field, f"{text!r} has no unit: {shown} bytes is not a dataset; did you mean {shown}GB or "
                          f"{shown}TB?", f"a number with its unit, e.g. {example}")
    size = int(number * SIZE_UNITS[unit or "B"])
    if size <= 0:
        raise ConfigError(field, f"{text!r}: must be positive", f"e.g. {example}")
    return size


def format_bytes(value: float) -> str:
    """Decimal units as the CLI prints sizes: 2.00 TB, 54.00 GB, 40.0 MB."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9)):
        if value >= scale:
            return f"{value / scale:,.2f} {unit}"
    return f"{value / 1e6:,.1f} MB"


# ---- the dataset's shape ------------------------------------------------------------------------
SAMPLE_BYTES = 35_900         # bytes per image in a packed dataset when only bytes are known (Caltech-256: 1.1 GB / 30,607)
LARGE_FILE_BYTES = 1_000_000  # files above this are containers of many samples


@dataclass(frozen=True)
class DatasetShape:
    files: int
    bytes: int
    samples: int | None = None

    def __post_init__(self):
        if self.files < 1:
            raise ConfigError("--files", "must be at least 1")
        if self.bytes < 1:
            raise ConfigError("--bytes", "must be at least 1")
        if self.samples is not None and self.samples < 1:
            raise ConfigError("--samples", f"{self.samples}: a dataset holds at least one sample",
                              "a whole number from 1, or leave it out to count files (or bytes / 35.9 KB)")

    @property
    def mean_file_bytes(self) -> float:
        return self.bytes / self.files

    def sample_count(self) -> tuple[int, str | None]:
        if self.samples:
            return self.samples, None
        if self.mean_file_bytes <= LARGE_FILE_BYTES:
            return self.files, None
        count = max(self.files, int(self.bytes / SAMPLE_BYTES))
        return count, (f"samples not given: assumed {count:,} ({SAMPLE_BYTES / 1000:.1f} KB per sample, "
                       "Caltech-256's mean) inside the large files")

    def samples_said(self) -> str:
        """Where the sample count comes from, in a few words (the premise line says it)."""
        if self.samples:
            return "given"
        if self.mean_file_bytes <= LARGE_FILE_BYTES:
            return "one per file"
        return (f"assumed at {SAMPLE_BYTES / 1000:.1f} KB each (Caltech-256's mean) inside files of "
                f"{self.mean_file_bytes / 1e6:,.0f} MB: give --samples (samples:) to say")


# ---- storage on the instance: EBS asked for, or NVMe fixed ------------------------------------------

def instance_storage_gb(instance_type: str) -> int:
    """NVMe instance storage (GB) of the type, 0 for EBS-only types (and types not in the table)."""
    row = INSTANCES.get(instance_type)
    return row.nvme_gb if row is not None else 0


def file_share_bytes(total_bytes: int, hosts: int, sharded: bool) -> float:
    """What File mode copies onto each instance: its 1/N of the objects (ShardedByS3Key) or all of them."""
    return total_bytes / max(1, hosts) if sharded else float(total_bytes)


def volume_needed_gb(share_bytes: float) -> int:
    return max(1, math.ceil(share_bytes / 1e9 * VOLUME_HEADROOM))


@dataclass(frozen=True)
class Volume:
    """The storage a job's instances get, and whether File mode's share fits it.

    "When using an ML instance with NVMe SSD volumes, SageMaker doesn't provision Amazon EBS General Purpose SSD
    (gp2) storage. Available storage is fixed to the NVMe-type instance's storage capacity ... For example, ML
    instance families with the NVMe-type instance storage include ml.p4d, ml.g4dn, and ml.g5" (CreateTrainingJob,
    ResourceConfig.VolumeSizeInGB; botocore's SageMaker model). So on those types the capacity is the instance's
    own and no volume size is asked for or priced; on EBS types the job asks VolumeSizeInGB of gp2."""
    gb: int                 # what the job has: NVMe capacity, or the EBS volume
    nvme: bool
    asked_gb: int | None    # what the user asked for (None: sized for the data); on EBS it is not raised for them
    needed_gb: int = 0      # File mode: what its share needs (0: not File)

    @property
    def asked(self) -> bool:
        return self.asked_gb is not None

    @property
    def fits(self) -> bool:
        return self.needed_gb <= self.gb

    @property
    def request_gb(self) -> int:
        """What the request asks for in VolumeSizeInGB: on NVMe types, what was asked or the default (SageMaker
        provisions no EBS there whatever it says); on EBS types, the volume itself."""
        if self.nvme:
            return self.asked_gb if self.asked_gb is not None else DEFAULT_VOLUME_GB
        return self.gb

    @property
    def priced_gb(self) -> int:
        """EBS gigabytes billed per instance (none on NVMe types: SageMaker provisions no EBS there)."""
        return 0 if self.nvme else self.gb

    def problem(self, field: str = "volume_size_gb") -> str | None:
        if self.fits:
            return None
        if self.nvme:
            return (f"File mode copies {self.needed_gb:,} GB onto each instance, more than its {self.gb:,} GB of NVMe "
                    "instance storage (fixed: SageMaker provisions no EBS volume on NVMe types); more instances "
                    "(ShardedByS3Key shares the objects among them), or FastFile/FSx")
        return (f"File mode copies {self.needed_gb:,} GB onto each instance, more than the {self.gb:,} GB volume asked "
                f"for: raise {field} to at least {self.needed_gb:,} (or leave it out: it is then sized for the data)")

    def describe(self) -> str:
        if self.nvme:
            return f"{self.gb:,} GB of NVMe instance storage (fixed)"
        how = "asked for" if self.asked else ("sized for File's share" if self.gb > DEFAULT_VOLUME_GB else "the default")
        return f"a {self.gb:,} GB EBS volume ({how})"


def volume_for(instance_type: str, asked_gb: int | None, share_bytes: float | None = None) -> Volume:
    """The storage a job gets: NVMe types their capacity; EBS types the size asked for, or, when none is asked,
    the default raised to what File mode's ``share_bytes`` needs (what the request asks SageMaker for)."""
    needed = volume_needed_gb(share_bytes) if share_bytes else 0
    nvme = instance_storage_gb(instance_type)
    if nvme:
        return Volume(nvme, True, asked_gb, needed)
    if asked_gb is not None:
        return Volume(int(asked_gb), False, int(asked_gb), needed)
    return Volume(max(DEFAULT_VOLUME_GB, needed), False, None, needed)


# ---- the premise ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckpointPremise:
    """What a checkpoint answer assumes beside the cluster: the plan (core/checkpoint.py CheckpointPlan: the model, its
    ranks and files), how often a save comes, and how many checkpoints are kept; ``save_under``: size's target."""
    plan: Any
    every_seconds: float
    keep: int
    save_under: float | None = None

    def describe(self) -> str:
        from .checkpoint import GIB
        w, p = self.plan.workload, self.plan
        digest = f", sha256 {w.sha256[:12]}" if w.sha256 else ""
        scaled = f" (at --scale {p.scale:g} of DLIO's {p.full_bytes / GIB:,.1f} GiB)" if p.scale != 1 else ""
        every = f"{self.every_seconds / 60:g} min" if self.every_seconds >= 60 else f"{self.every_seconds:g} s"
        text = (f"checkpoints of {w.name} ({w.source}{digest}): {p.processes:,} processes (TP {w.shape.tensor} x PP "
                f"{w.shape.pipeline} x DP {p.data_parallelism}, {p.mode} mode), {p.files:,} files, "
                f"{p.bytes / GIB:,.2f} GiB ({format_bytes(p.bytes)}) each{scaled}; saved every "
                f"{every}, the last {self.keep} kept")
        if self.save_under is not None:
            text += f"; a save within {self.save_under:g} s"
        return text + (f"; {p.mode_why}" if p.mode_why else "")

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {"workload": p.workload.name, "file": p.workload.source, "sha256": p.workload.sha256,
                "processes": p.processes, "hosts": p.hosts, "gpus_per_host": p.gpus_per_host, "mode": p.mode,
                "data_parallelism": p.data_parallelism, "files": p.files, "bytes": p.bytes,
                "full_bytes": p.full_bytes, "scale": p.scale, "every_seconds": self.every_seconds, "keep": self.keep,
                **({"save_under_seconds": self.save_under} if self.save_under is not None else {})}


@dataclass(frozen=True)
class Premise:
    """What an answer assumes. ``defaults``: the parts taken by default (named so in ``describe``)."""
    instance_type: str
    instance_count: int
    accelerators: int               # per instance, each at ``rate``
    epochs: int
    rate: float                     # samples/s one accelerator consumes
    compute: str                    # how the rate was chosen, in words
    shape: DatasetShape
    shape_origin: str               # where the files and bytes came from
    lab: Any = None                 # provisioning.Provisioning: the lab the sources are priced on
    volume_size_gb: int | None = None   # asked for (None: sized for File's share)
    readers: int | None = None      # files one instance reads at once (None: its vCPUs)
    au_target: float = 90.0
    defaults: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()     # what else the premise took (a workload's accelerator, ...)
    checkpoint: CheckpointPremise | None = None   # a checkpoint question: what is saved, how often, how many kept

    def __post_init__(self):
        check_instance_count(self.instance_count, "--instance-count")

    @property
    def accelerator(self) -> str | None:
        row = INSTANCES.get(self.instance_type)
        return row.accelerator if row else None

    def estimate_kwargs(self) -> dict[str, Any]:
        """The keywords ``estimate.estimate_mode`` (and ``recommend``, ``options``) take for this premise."""
        out = {"instance_type": self.instance_type, "instance_count": self.instance_count, "epochs": self.epochs,
               "rate": self.rate, "accelerators": self.accelerators, "volume_size_gb": self.volume_size_gb}
        if self.readers is not None:
            out["readers"] = self.readers
        return out

    def with_shape(self, shape: DatasetShape, origin: str) -> "Premise":
        return replace(self, shape=shape, shape_origin=origin)

    DEFAULT_WORDS = {"instance": "instance type", "instance_count": "instance count", "epochs": "epochs",
                     "every": "checkpoint interval", "keep": "checkpoints kept", "save_under": "save target"}

    def describe(self) -> str:
        """One line: every premise an answer rests on, and where each came from."""
        if self.checkpoint is not None:
            lab = self.lab.describe() if self.lab is not None else "the lab as cdk.json would deploy it"
            defaults = [words for part, words in self.DEFAULT_WORDS.items() if part in self.defaults]
            text = (f"premise: {self.instance_count:,} x {self.instance_type}, each {self.accelerators} x "
                    f"{self.accelerator or 'no accelerator'} (one rank a GPU); {self.checkpoint.describe()}; "
                    f"priced on {lab}")
            if defaults:
                text += f"; defaults taken: {', '.join(defaults)}"
            return text + "".join(f"; {note}" for note in self.notes)
        samples, _ = self.shape.sample_count()
        accelerator = self.accelerator or "no accelerator"
        lab = self.lab.describe() if self.lab is not None else "the lab as cdk.json would deploy it"
        defaults = [words for part, words in self.DEFAULT_WORDS.items() if part in self.defaults]
        text = (f"premise: {self.instance_count:,} x {self.instance_type}, each {self.accelerators} x {accelerator}; "
                f"{self.epochs:,} epoch{'s' if self.epochs != 1 else ''}; compute: {self.compute}; dataset: "
                f"{self.shape.files:,} files, {format_bytes(self.shape.bytes)}, {samples:,} samples ({self.shape_origin}; "
                f"samples {self.shape.samples_said()}); priced on {lab}")
        if defaults:
            text += f"; defaults taken: {', '.join(defaults)}"
        return text + "".join(f"; {note}" for note in self.notes)

    def to_dict(self) -> dict[str, Any]:
        samples, _ = self.shape.sample_count()
        return {"instance_type": self.instance_type, "instance_count": self.instance_count,
                "accelerators_per_instance": self.accelerators, "accelerator": self.accelerator,
                "epochs": self.epochs, "samples_per_second_per_accelerator": round(self.rate, 3),
                "compute": self.compute, "files": self.shape.files, "bytes": self.shape.bytes, "samples": samples,
                "samples_from": self.shape.samples_said(), "dataset_from": self.shape_origin,
                "volume_size_gb": self.volume_size_gb, "readers": self.readers, "au_target_percent": self.au_target,
                "defaults": sorted(self.defaults), "notes": list(self.notes),
                **({"lab": self.lab.to_dict()} if self.lab is not None else {}),
                **({"checkpoint": self.checkpoint.to_dict()} if self.checkpoint is not None else {}),
                "line": self.describe()}


def check_instance_count(count: Any, field: str) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_INSTANCE_COUNT:
        raise ConfigError(field, f"{count!r} instances", f"1..{MAX_INSTANCE_COUNT:,}")
    return count


def accelerator_kind(instance_type: str) -> str | None:
    """The instance's accelerator as the presets and workload files name it ("v100", "t4", ...), None without one."""
    row = INSTANCES.get(instance_type)
    word = next(iter((row.accelerator or "").split()), "") if row else ""
    return word.lower() or None


def accelerators_of(instance_type: str) -> int:
    """Accelerators of an instance type (the instance table), at least one: a CPU type emulates one."""
    row = INSTANCES.get(instance_type)
    return max(1, row.accelerators) if row else 1


__all__ = ["CheckpointPremise", "COMPUTE_PRESETS", "DEFAULT_EPOCHS", "DEFAULT_INSTANCE", "DEFAULT_INSTANCE_COUNT", "DEFAULT_VOLUME_GB",
           "DatasetShape", "HOW_TO_MEASURE", "LARGE_FILE_BYTES", "MAX_COMPUTE_RATE", "MAX_INSTANCE_COUNT", "Premise",
           "SAMPLE_BYTES", "Volume", "accelerators_of", "check_instance_count", "compute_rate", "describe_preset",
           "file_share_bytes", "format_bytes", "instance_preset", "instance_storage_gb", "parse_bytes", "preset_rate",
           "volume_for", "volume_needed_gb"]
