"""An experiment's jobs: every trial x dataset x mode x repeat, in the experiment's order."""

from __future__ import annotations

import random
from .model import Experiment, JobSpec


def expand(experiment: Experiment) -> list[JobSpec]:
    """Every job of the experiment, in the experiment's order."""
    configs = [(t, d, m) for t in experiment.trials for d in t.datasets for m in t.modes]
    if experiment.order == "listed":
        # Repeats of one configuration run together, configurations as listed.
        combos = [(c, r) for c in configs for r in range(experiment.repeats)]
    elif experiment.order == "interleave":
        # One pass over every configuration per repeat, so drift over time hits every mode alike.
        combos = [(c, r) for r in range(experiment.repeats) for c in configs]
    else:
        combos = [(c, r) for c in configs for r in range(experiment.repeats)]
        random.Random(experiment.seed).shuffle(combos)
    return [JobSpec(index=i, trial=c[0], dataset=c[1], mode=c[2], repeat=r) for i, (c, r) in enumerate(combos)]
