"""The premise of an answer: one question, asked the same way by every path.

Which instance, how many, how many accelerators each and what they eat (the compute), how many epochs, the
dataset's shape and where it was learnt, and the lab its sources are priced on. `dslab estimate`, `recommend`,
`size`, `plan`, `run`, `local`, `export` and the report build it with the same defaults and bounds (the CLI's
flags, an experiment file and a DLIO workload file all end here) and print it with every answer
(``Premise.describe``), so that a figure is never read without what it assumed.

It names the calibration the answer rests on (``model.calibration.InUse``): the shipped one, or a file `dslab
calibrate` wrote from the user's own runs. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..facts.instances import INSTANCES
from ..model.calibration import SHIPPED, InUse
from ..facts.limits import check_instance_count
from ..shape import DatasetShape, format_bytes

@dataclass(frozen=True)
class CheckpointPremise:
    """What a checkpoint answer assumes beside the cluster: the plan (core/workloads/checkpoint.py CheckpointPlan: the model, its
    ranks and files), how often a save comes, and how many checkpoints are kept; ``save_under``: size's target."""
    plan: Any
    every_seconds: float
    keep: int
    save_under: float | None = None

    def describe(self) -> str:
        from ..workloads.checkpoint import GIB
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
    s3_concurrency: int | None = None   # GETs in flight a Script job keeps (the script's s3_concurrency; None: 64)
    au_target: float = 90.0
    defaults: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()     # what else the premise took (a workload's accelerator, ...)
    checkpoint: CheckpointPremise | None = None   # a checkpoint question: what is saved, how often, how many kept
    calibration: InUse = SHIPPED    # the model's constants: shipped, or fitted on the user's runs (`dslab calibrate`)

    def __post_init__(self):
        check_instance_count(self.instance_count, "--instance-count")

    @property
    def accelerator(self) -> str | None:
        row = INSTANCES.get(self.instance_type)
        return row.accelerator if row else None

    def estimate_kwargs(self) -> dict[str, Any]:
        """The keywords ``estimate.estimate_mode`` (and ``recommend``, ``options``) take for this premise."""
        out = {"instance_type": self.instance_type, "instance_count": self.instance_count, "epochs": self.epochs,
               "rate": self.rate, "accelerators": self.accelerators, "volume_size_gb": self.volume_size_gb,
               "model": self.calibration.model}
        if self.readers is not None:
            out["readers"] = self.readers
        if self.s3_concurrency is not None:
            out["script_concurrency"] = self.s3_concurrency
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
            return text + "".join(f"; {note}" for note in self.notes) + f"; {self.calibration.describe()}"
        samples, _ = self.shape.sample_count()
        accelerator = self.accelerator or "no accelerator"
        lab = self.lab.describe() if self.lab is not None else "the lab as cdk.json would deploy it"
        defaults = [words for part, words in self.DEFAULT_WORDS.items() if part in self.defaults]
        text = (f"premise: {self.instance_count:,} x {self.instance_type}, each {self.accelerators} x {accelerator}; "
                f"{self.epochs:,} epoch{'s' if self.epochs != 1 else ''}; compute: {self.compute}; dataset: "
                f"{self.shape.files:,} files, {format_bytes(self.shape.bytes)}, {samples:,} samples ({self.shape_origin}; "
                f"samples {self.shape.samples_said()}); priced on {lab}")
        if self.s3_concurrency is not None:
            text += f"; Script: s3_concurrency {self.s3_concurrency} GETs in flight"
        if defaults:
            text += f"; defaults taken: {', '.join(defaults)}"
        return text + "".join(f"; {note}" for note in self.notes) + f"; {self.calibration.describe()}"

    def to_dict(self) -> dict[str, Any]:
        samples, _ = self.shape.sample_count()
        return {"instance_type": self.instance_type, "instance_count": self.instance_count,
                "accelerators_per_instance": self.accelerators, "accelerator": self.accelerator,
                "epochs": self.epochs, "samples_per_second_per_accelerator": round(self.rate, 3),
                "compute": self.compute, "files": self.shape.files, "bytes": self.shape.bytes, "samples": samples,
                "samples_from": self.shape.samples_said(), "dataset_from": self.shape_origin,
                "volume_size_gb": self.volume_size_gb, "readers": self.readers,
                **({"s3_concurrency": self.s3_concurrency} if self.s3_concurrency is not None else {}),
                "au_target_percent": self.au_target,
                "defaults": sorted(self.defaults), "notes": list(self.notes),
                **({"lab": self.lab.to_dict()} if self.lab is not None else {}),
                **({"checkpoint": self.checkpoint.to_dict()} if self.checkpoint is not None else {}),
                "calibration": self.calibration.to_dict(), "line": self.describe()}
