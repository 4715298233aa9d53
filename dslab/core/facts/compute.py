"""What one accelerator eats: the compute presets (MLPerf Storage's ResNet-50 emulation, and published training
throughput where MLPerf Storage has none) and the one rule that picks a compute for an instance.

Published figures with their sources, and the rule every command and experiment shares. Standard library only.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError
from .instances import INSTANCES

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
HOW_TO_MEASURE = "samples/s per accelerator a real job logs"


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
    # Said in one line of at most 160 columns: the presets are the allowed list (dropped where it does not fit).
    what = ("no accelerator" if row and not row.accelerators else
            f"no preset for its {row.accelerator}" if row else "not in the instance table (accelerator unknown)")
    if experiment:
        raise ConfigError(field, f"{instance_type}: {what}; give {{batch_size, seconds_per_batch}} or a preset",
                          list(COMPUTE_PRESETS))
    raise ConfigError(field, f"{instance_type}: {what}; give --compute-rate ({HOW_TO_MEASURE}) or --compute-preset",
                      list(COMPUTE_PRESETS))


def preset_of(instance_type: str) -> str | None:
    """The compute preset that emulates one of the instance type's accelerators, if there is one (CPU-only types, T4
    and Trainium have none)."""
    row = INSTANCES.get(instance_type)
    kind = next(iter((row.accelerator or "").split()), None) if row else None
    return PRESET_OF_ACCELERATOR.get(kind)


def accelerator_kind(instance_type: str) -> str | None:
    """The instance's accelerator as the presets and workload files name it ("v100", "t4", ...), None without one."""
    row = INSTANCES.get(instance_type)
    word = next(iter((row.accelerator or "").split()), "") if row else ""
    return word.lower() or None


def accelerators_of(instance_type: str) -> int:
    """Accelerators of an instance type (the instance table), at least one: a CPU type emulates one."""
    row = INSTANCES.get(instance_type)
    return max(1, row.accelerators) if row else 1
