"""AWS runs the model did not write: jobs described as DescribeTrainingJob describes them, not as the estimate splits
them (tests/synthetic_runs.py plays the estimate's own split). From a truth's per-instance seconds (the estimate with
some constants changed, 3% run-to-run noise on each phase), each job is told as SageMaker tells it:

- Starting launches the instances before TrainingStartTime: not in TrainingTimeInSeconds, not billed;
- the image pull is the first part of Training ("SecondaryStatus - Training, StatusMessage - Downloading the training
  image", the reference's own example), then "Training image download completed. Training in progress.";
- the rest of the truth's start-up and its upload are the pull and Uploading, so that the truth's other phase,
  max(other_floor, startup - downloading), has its floor;
- spot jobs (EnableManagedSpotTraining) bill 1 - saving of their training time (BillableTimeInSeconds, one instance's);
- clusters of 2 to 8 instances, each instance's seconds (the estimate's count every instance);
- one interrupted spot job: Interrupted ends its first attempt, the second starts again, downloads again and resumes;
- one warm-pool start: the job before it keeps its pool (WarmPoolStatus Reused, ReusedByJob naming it), so it launches
  nothing (a few seconds of Starting) and pulls no image.

Written by the workflow's own Collect functions (record_from_describe, results_document) into a results.json."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import replace
from typing import Any

from dslab.core.answer.scenarios import known_shape, premise_of_trial
from dslab.core.experiment import parse_experiment
from dslab.core.facts.prices import PriceTable
from dslab.core.model.estimate import MODEL, Model, estimate_mode
from dslab.core.model.provisioning import as_deployed
from dslab.core.modes import SCRIPT, STANDARD
from dslab.core.results import record_from_describe
from dslab.workflow.collect import results_document

from .synthetic_runs import data_bound

# An account where NVMe instance storage takes File's download at 1,700 MB/s and S3 Standard's first byte is 36 ms.
AWS_TRUTH = replace(MODEL, nvme_download_mbps=1700.0, s3_standard_first_byte=0.036)
MOVED = ("nvme_download_mbps", "s3_standard_first_byte")

PULL_MESSAGE = "Downloading the training image"
TRAINING_MESSAGE = "Training image download completed. Training in progress."
UPLOAD_SECONDS = 12.0        # of the truth's other: Uploading (the rest of it is the image pull)
WARM_STARTING = 4.0          # a warm pool's Starting: no instance launched
WARM_CONTAINER = 20.0        # what a warm start still takes before training: the container, no image pull
SPOT_SAVING = (0.55, 0.70)

# Four scenarios per constant: one instance, and clusters of 2, 4 and 8 (p4d, and g5.48xlarge: NVMe behind 100 Gbit/s).
AWS_LIKE_EXPERIMENT: dict[str, Any] = {
    "name": "aws-like",
    "repeats": 2,
    "datasets": [{"name": "shards-a", "format": "tfrecord"}, {"name": "jpegs-a", "format": "jpg"}],
    "modes": ["File", "Script"],
    "instance_type": "ml.p4d.24xlarge",
    "epochs": 1,
    "compute": data_bound(),
    "trials": [{"name": "one"},
               {"name": "four", "instance_count": 4, "datasets": [{"name": "shards-b", "format": "tfrecord"},
                                                                 {"name": "jpegs-b", "format": "jpg"}]},
               {"name": "eight", "instance_count": 8, "datasets": [{"name": "shards-c", "format": "tfrecord"},
                                                                  {"name": "jpegs-c", "format": "jpg"}]},
               {"name": "g5-two", "instance_type": "ml.g5.48xlarge", "instance_count": 2,
                "datasets": [{"name": "shards-d", "format": "tfrecord"}, {"name": "jpegs-d", "format": "jpg"}]}],
}
AWS_LIKE_STATS = {"shards-a": {"files": 200, "bytes": 200 * 500_000_000},
                  "jpegs-a": {"files": 400_000, "bytes": 400_000 * 110_000},
                  "shards-b": {"files": 400, "bytes": 400 * 1_000_000_000},
                  "jpegs-b": {"files": 1_600_000, "bytes": 1_600_000 * 100_000},
                  "shards-c": {"files": 800, "bytes": 800 * 1_000_000_000},
                  "jpegs-c": {"files": 3_200_000, "bytes": 3_200_000 * 100_000},
                  "shards-d": {"files": 300, "bytes": 300 * 1_000_000_000},
                  "jpegs-d": {"files": 800_000, "bytes": 800_000 * 100_000}}
# Which job is interrupted, and which starts on the pool its repeat before it kept.
INTERRUPTED = ("four", "shards-b", "File", 1)
WARM = ("one", "jpegs-a", "Script", 1)


def _transitions(start: dt.datetime, steps: list[tuple[str, float, str]]) -> tuple[list[dict[str, Any]], dt.datetime]:
    at, out = start, []
    for status, seconds, message in steps:
        end = at + dt.timedelta(seconds=seconds)
        out.append({"Status": status, "StartTime": at, "EndTime": end, "StatusMessage": message})
        at = end
    out.append({"Status": "Completed", "StartTime": at, "EndTime": at, "StatusMessage": "Training job completed"})
    return out, at


def describe_job(name: str, instance_type: str, count: int, truth: dict[str, float], start: dt.datetime, *,
                 mode: str, dataset: str, epochs: int, spot: float | None, interrupted: bool, warm: bool,
                 starting: float, keeps_pool_for: str | None) -> dict[str, Any]:
    """DescribeTrainingJob of one job whose truth, per instance, is ``truth`` (downloading, training, other)."""
    upload = min(UPLOAD_SECONDS, truth["other"])
    pull = truth["other"] - upload
    download, train = truth["downloading"], truth["training"]
    steps: list[tuple[str, float, str]] = []
    if interrupted:
        # The first attempt downloads, pulls, trains half, and is interrupted; the second starts again, downloads again
        # (SageMaker gives it fresh instances) and trains the rest, a tenth of it again since its last checkpoint.
        steps += [("Starting", starting, "Preparing the instances for training"),
                  ("Downloading", download, "Downloading input data"), ("Training", pull, PULL_MESSAGE),
                  ("Training", train * 0.5, TRAINING_MESSAGE), ("Interrupted", 45.0, "Spot instances interrupted")]
    steps += [("Starting", WARM_STARTING if warm else starting, "Preparing the instances for training")]
    if download > 0:
        steps.append(("Downloading", download, "Downloading input data"))
    if warm:
        steps.append(("Training", WARM_CONTAINER + train, TRAINING_MESSAGE))
    else:
        steps += [("Training", pull, PULL_MESSAGE),
                  ("Training", train * (0.6 if interrupted else 1.0), TRAINING_MESSAGE)]
    steps.append(("Uploading", upload, "Uploading generated training model"))
    transitions, end = _transitions(start, steps)
    # Billed from the end of the first Starting (TrainingStartTime) to the end: one instance's training time.
    began = transitions[0]["EndTime"]
    training_time = int(round((end - began).total_seconds()))
    billable = int(round(training_time * (1 - spot))) if spot else training_time
    channel = {"ChannelName": "training", "InputMode": "FastFile" if mode == SCRIPT else mode,
               "DataSource": {"S3DataSource": {"S3Uri": f"s3://bucket/datasets/{dataset}/", "S3DataType": "S3Prefix",
                                               "S3DataDistributionType": "ShardedByS3Key"}}}
    out = {"TrainingJobName": name, "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
           "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 100},
           "EnableManagedSpotTraining": spot is not None, "SecondaryStatusTransitions": transitions,
           "BillableTimeInSeconds": billable, "TrainingTimeInSeconds": training_time, "CreationTime": start,
           "TrainingStartTime": began, "TrainingEndTime": end, "HyperParameters": {"epochs": str(epochs)},
           "InputDataConfig": [] if mode == SCRIPT else [channel]}
    if keeps_pool_for:
        out["WarmPoolStatus"] = {"Status": "Reused", "ReusedByJob": keeps_pool_for,
                                 "ResourceRetainedBillableTimeInSeconds": 300}
    return out


def aws_like_results(truth: Model = AWS_TRUTH, experiment: dict[str, Any] | None = None,
                     stats: dict[str, dict[str, int]] | None = None, *, execution: str = "exec-aws-like",
                     noise: float = 0.03, seed: int = 0, prefix: str = "aws", interrupted=INTERRUPTED, warm=WARM,
                     spot_every: int = 2) -> dict[str, Any]:
    """results.json of an AWS run of ``experiment`` where ``truth`` holds, told as SageMaker describes its jobs: every
    ``spot_every``-th repeat on spot; ``interrupted`` and ``warm`` name (trial, dataset, mode, repeat) of the one
    interrupted job and the one warm start (None: none)."""
    document = experiment or AWS_LIKE_EXPERIMENT
    stats = dict(AWS_LIKE_STATS if stats is None else stats)
    parsed = parse_experiment(document)
    prices, lab, draw = PriceTable(), as_deployed(), random.Random(seed)
    records: list[dict[str, Any]] = []
    start = dt.datetime(2026, 12, 3, 9, 0, tzinfo=dt.timezone.utc)
    for trial in parsed.trials:
        for dataset in trial.datasets:
            known = known_shape(dataset, stats)
            stats.setdefault(dataset.name, {"files": known.shape.files, "bytes": known.shape.bytes})
            premise = premise_of_trial(trial, known, lab)
            for mode in trial.modes:
                true = estimate_mode(mode, premise.shape, storage=trial.storage or STANDARD, prices=prices,
                                     provisioning=lab, **{**premise.estimate_kwargs(), "model": truth})
                count = premise.instance_count
                for repeat in range(parsed.repeats):
                    name = f"{prefix}-{trial.name}-{dataset.name}-{mode.lower()}-r{repeat}"[:63]
                    key = (trial.name, dataset.name, mode, repeat)
                    each = {p: getattr(true, p) / count * (1 + draw.uniform(-noise, noise))
                            for p in ("downloading", "training", "other")}
                    spot = (draw.uniform(*SPOT_SAVING) if (repeat + 1) % spot_every == 0 or key == interrupted
                            else None)
                    following = (f"{prefix}-{trial.name}-{dataset.name}-{mode.lower()}-r{repeat + 1}"[:63]
                                 if warm and key[:3] == warm[:3] and repeat + 1 == warm[3] else None)
                    describe = describe_job(name, premise.instance_type, count, each,
                                            start + dt.timedelta(hours=len(records)), mode=mode, dataset=dataset.name,
                                            epochs=trial.epochs, spot=spot, interrupted=key == interrupted,
                                            warm=key == warm, starting=draw.uniform(60.0, 180.0),
                                            keeps_pool_for=following)
                    records.append(record_from_describe(describe, prices=prices, mode=mode, dataset=dataset.name,
                                                        repeat=repeat, files=stats[dataset.name]["files"],
                                                        total_bytes=stats[dataset.name]["bytes"], epochs=trial.epochs,
                                                        trial=trial.name, lab=lab.to_dict()))
    plan_document = {"experiment": parsed.document, "backend": "aws", "execution": execution,
                     "experiment_hash": "aws-like", "environment": {"region": "us-east-1", "code_version": "aws-like"},
                     "dataset_stats": stats, "lab": lab.to_dict(), "fsx_capacity_gib": lab.fsx.capacity_gib}
    return results_document(plan_document, records, prices)
