"""An experiment's jobs: every trial x dataset x mode x repeat, in the experiment's order."""

from __future__ import annotations

import random
from ..modes import CHECKPOINT_TARGET_MODES
from .model import Experiment, JobSpec


def expand(experiment: Experiment) -> list[JobSpec]:
    """Every job of the experiment, in the experiment's order."""
    configs = []
    for t in experiment.trials:
        if t.checkpoint is not None:
            configs += [(t, t.checkpoint.dataset, target) for target in t.checkpoint.targets]
        else:
            configs += [(t, d, m) for d in t.datasets for m in t.modes]
    if experiment.order == "listed":
        # Repeats of one configuration run together, configurations as listed.
        combos = [(c, r) for c in configs for r in range(experiment.repeats)]
    elif experiment.order == "interleave":
        # One pass over every configuration per repeat, so drift over time hits every mode alike.
        combos = [(c, r) for r in range(experiment.repeats) for c in configs]
    else:
        combos = [(c, r) for c in configs for r in range(experiment.repeats)]
        random.Random(experiment.seed).shuffle(combos)
    specs: list[JobSpec] = []
    for (trial, dataset, mode), repeat in combos:
        if trial.checkpoint is None:
            specs.append(JobSpec(index=len(specs), trial=trial, dataset=dataset, mode=mode, repeat=repeat))
            continue
        # A checkpoint target: its writer, then the restore job right after it on a new instance (the sync's on the same
        # S3 URI, FSx's and EFS's on the same folder): MLPerf Storage's "first perform the checkpoint write, then clear
        # the cache, and finally perform the checkpoint read", as separate runs.
        target = mode
        specs.append(JobSpec(len(specs), trial, dataset, CHECKPOINT_TARGET_MODES[target], repeat, target=target))
        if trial.checkpoint.restore and trial.checkpoint.workload.reads:
            specs.append(JobSpec(len(specs), trial, dataset, CHECKPOINT_TARGET_MODES[target], repeat, target=target,
                                 restore=True))
    return specs
