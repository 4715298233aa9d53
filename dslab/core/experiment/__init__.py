"""The experiment: what to run, validated strictly, and its expansion into planned jobs.

model.py holds the data (datasets, compute, script, trials, defaults), parsing.py turns a document
into it and refuses what cannot run, expansion.py lists its jobs.
"""

from ..modes import JPG, TFRECORD
from .expansion import expand
from ..facts.compute import COMPUTE_PRESETS
from .model import DEFAULTS, Compute, Dataset, Experiment, JobSpec, Script, Trial, content_hash
from .parsing import TRIAL_KEYS, check_combinations, default_experiment, normalise, parse_experiment

__all__ = ["COMPUTE_PRESETS", "DEFAULTS", "JPG", "TFRECORD", "TRIAL_KEYS", "Compute", "Dataset", "Experiment", "JobSpec",
           "Script", "Trial", "check_combinations", "content_hash", "default_experiment", "expand", "normalise",
           "parse_experiment"]
