"""Measured AWS runs from a truth the tool does not know: the model with some constants changed, played as SageMaker
would describe each job (DescribeTrainingJob: SecondaryStatusTransitions, BillableTimeInSeconds, integer seconds) and
written by the workflow's own Collect functions (record_from_describe, results_document) into a results.json.

The truth's phases are the estimate's arithmetic with the changed constants, each phase moved by a deterministic
"run-to-run" noise, so what calibration recovers is what a run on that account would show."""

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
from dslab.core.modes import EXPRESS, SCRIPT, STANDARD
from dslab.core.results import record_from_describe
from dslab.workflow.collect import results_document
from dslab_train.s3source import DEFAULT_CONCURRENCY   # the lab's script's GETs in flight without s3_concurrency

# The truth of the issue: NVMe instance storage twice as fast as assumed, S3 Standard's first byte at 40 ms.
TRUTH = replace(MODEL, nvme_download_mbps=2000.0, s3_standard_first_byte=0.040)


def data_bound(rate: float = 100_000.0) -> dict[str, Any]:
    """Compute so fast that every job is bound by its data source (what a calibration run wants)."""
    return {"batch_size": 1000, "seconds_per_batch": 1000 / rate}


# Six scenarios (datasets x premises) that between them rest phases on NVMe's rate (File onto NVMe, large shards on
# an instance whose network outruns it) and on S3's first byte (the script's own GETs of small files): three datasets
# for each, so that each scenario left out leaves two (a constant moves on two scenarios, never on repeats).
CALIBRATION_EXPERIMENT: dict[str, Any] = {
    "name": "synthetic-calibration",
    "repeats": 2,
    "datasets": [{"name": "shards-a", "format": "tfrecord"}, {"name": "jpegs-a", "format": "jpg"}],
    "modes": ["File", "Script"],
    "instance_type": "ml.p4d.24xlarge",
    "epochs": 1,
    "compute": data_bound(),
    "trials": [{"name": "big"},
               {"name": "other", "datasets": [{"name": "shards-b", "format": "tfrecord"},
                                              {"name": "jpegs-b", "format": "jpg"}]},
               {"name": "third", "datasets": [{"name": "shards-c", "format": "tfrecord"},
                                              {"name": "jpegs-c", "format": "jpg"}]}],
}
CALIBRATION_STATS = {"shards-a": {"files": 200, "bytes": 200 * 500_000_000},
                     "jpegs-a": {"files": 400_000, "bytes": 400_000 * 110_000},
                     "shards-b": {"files": 120, "bytes": 120 * 400_000_000},
                     "jpegs-b": {"files": 250_000, "bytes": 250_000 * 90_000},
                     "shards-c": {"files": 300, "bytes": 300 * 250_000_000},
                     "jpegs-c": {"files": 600_000, "bytes": 600_000 * 60_000}}


def _describe(name: str, instance_type: str, count: int, per_instance: dict[str, float], billable: float,
              start: dt.datetime, epochs: int, mode: str, dataset: str) -> dict[str, Any]:
    """DescribeTrainingJob of a completed on-demand job whose phases (per instance) are ``per_instance``;
    ``billable`` is one instance's wall clock, as BillableTimeInSeconds is (and TrainingTimeInSeconds, no spot)."""
    at = start
    transitions = []
    for status, seconds in (("Starting", per_instance["other"] * 0.7), ("Downloading", per_instance["downloading"]),
                            ("Training", per_instance["training"]), ("Uploading", per_instance["other"] * 0.3)):
        if seconds <= 0 and status == "Downloading":
            continue
        end = at + dt.timedelta(seconds=seconds)
        transitions.append({"Status": status, "StartTime": at, "EndTime": end, "StatusMessage": ""})
        at = end
    transitions.append({"Status": "Completed", "StartTime": at, "EndTime": at, "StatusMessage": "Training job completed"})
    channel = {"ChannelName": "training", "InputMode": "FastFile" if mode == SCRIPT else mode,
               "DataSource": {"S3DataSource": {"S3Uri": f"s3://bucket/datasets/{dataset}/", "S3DataType": "S3Prefix"}}}
    return {"TrainingJobName": name, "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
            "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 100},
            "SecondaryStatusTransitions": transitions, "BillableTimeInSeconds": int(round(billable)),
            "TrainingTimeInSeconds": int(round(billable)), "CreationTime": start, "TrainingStartTime": start,
            "TrainingEndTime": at, "HyperParameters": {"epochs": str(epochs)},
            "InputDataConfig": [] if mode == SCRIPT else [channel]}


def synthetic_results(truth: Model = TRUTH, experiment: dict[str, Any] | None = None,
                      stats: dict[str, dict[str, int]] | None = None, *, execution: str = "exec-synthetic",
                      noise: float = 0.02, seed: int = 0, backend: str = "aws", prefix: str = "syn") -> dict[str, Any]:
    """results.json of an AWS run of ``experiment`` on an account where ``truth`` holds (job names begin with
    ``prefix``: SageMaker's are unique in an account and Region)."""
    document = experiment or CALIBRATION_EXPERIMENT
    stats = dict(CALIBRATION_STATS if stats is None else stats)
    parsed = parse_experiment(document)
    prices = PriceTable()
    lab = as_deployed()
    draw = random.Random(seed)
    records = []
    start = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc)
    for trial in parsed.trials:
        for dataset in trial.datasets:
            known = known_shape(dataset, stats)
            # What the run found in S3 (the stats Plan reads), for a dataset the test gave no stats: its own shape.
            stats.setdefault(dataset.name, {"files": known.shape.files, "bytes": known.shape.bytes})
            premise = premise_of_trial(trial, known, lab)
            for mode in trial.modes:
                storage = trial.storage or STANDARD
                for repeat in range(parsed.repeats):
                    # The job as the lab's script ran it: its GETs in flight are its s3_concurrency hyperparameter
                    # (train.py reads it; the script's DEFAULT_CONCURRENCY without it), not what the premise says.
                    ran_with = int(trial.hyperparameters.get("s3_concurrency", DEFAULT_CONCURRENCY))
                    true = estimate_mode(mode, premise.shape, storage=storage, prices=prices, provisioning=lab,
                                         **{**premise.estimate_kwargs(), "model": truth, "script_concurrency": ran_with})
                    count = premise.instance_count
                    per_instance = {p: getattr(true, p) / count * (1 + draw.uniform(-noise, noise))
                                    for p in ("downloading", "training", "other")}
                    billable = sum(per_instance.values())   # one instance's, as SageMaker's
                    name = f"{prefix}-{trial.name}-{dataset.name}-{mode.lower()}-r{repeat}"[:63]
                    describe = _describe(name, premise.instance_type, count, per_instance, billable,
                                         start + dt.timedelta(hours=len(records)), trial.epochs, mode, dataset.name)
                    record = record_from_describe(describe, prices=prices, mode=mode, dataset=dataset.name,
                                                  repeat=repeat, files=stats[dataset.name]["files"],
                                                  total_bytes=stats[dataset.name]["bytes"], epochs=trial.epochs,
                                                  trial=trial.name, storage=storage if storage == EXPRESS else None,
                                                  lab=lab.to_dict())
                    records.append(record)
    plan_document = {"experiment": parsed.document,
                     "backend": backend, "execution": execution, "experiment_hash": "synthetic",
                     "environment": {"region": "us-east-1", "code_version": "synthetic"},
                     "dataset_stats": stats, "lab": lab.to_dict(), "fsx_capacity_gib": lab.fsx.capacity_gib}
    return results_document(plan_document, records, prices)


# ---- checkpoint trials ---------------------------------------------------------------------------------------------

# The same account as TRUTH (NVMe at 2,000 MB/s, for File's download and a checkpoint's write alike), where
# SageMaker's checkpoint sync moves 16 parts at once.
CHECKPOINT_TRUTH = replace(TRUTH, sync_connections=16.0, nvme_checkpoint_mbps=2000.0)


def checkpoint_experiment(folder, scale: float = 0.2,
                          instances: tuple[str, ...] = ("ml.p4d.24xlarge", "ml.p5.48xlarge"), repeats: int = 2):
    """A checkpoint trial of llama3 8B on the sync targets per instance type (trials ckpt, ckpt-2, ...: two scenarios,
    as a constant needs to move), read by the experiment file reader (which reads the workload file): the experiment
    as run."""
    from pathlib import Path

    from dslab.inputs.experiment_file import load_experiment
    workload = Path(__file__).resolve().parents[1] / "dslab" / "contracts" / "dlio" / "llama3_8b.yaml"
    path = Path(folder) / "checkpoints.yaml"
    trials = "".join(f"  - name: ckpt{'' if i == 0 else f'-{i + 1}'}\n    instance_type: {instance}\n"
                     f"    workload: {{file: {workload}, scale: {scale}}}\n"
                     "    checkpoint: {targets: [s3, express], writes: 2, reads: 2, seconds_between: 0, "
                     "restore: true}\n"
                     for i, instance in enumerate(instances))
    path.write_text(f"name: synthetic-checkpoints\nrepeats: {repeats}\ntrials:\n{trials}")
    return load_experiment(path)


def synthetic_checkpoint_results(experiment, truth: Model = CHECKPOINT_TRUTH, *, execution: str = "exec-ckpt",
                                 noise: float = 0.02, seed: int = 0) -> dict[str, Any]:
    """results.json of an AWS run of a checkpoint experiment where ``truth`` holds: each target's writer jobs (their
    script's checkpoint figures: stall, save, durable in S3) and restore jobs (SageMaker's copy-in: Downloading)."""
    from dslab.core.answer.scenarios import checkpoint_premise_of_trial
    from dslab.core.model.checkpoint_estimate import Question, estimate_target
    prices, lab, draw = PriceTable(), as_deployed(), random.Random(seed)
    records, start = [], dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.timezone.utc)

    def wobble(value: float) -> float:
        return value * (1 + draw.uniform(-noise, noise))
    for trial in experiment.trials:
        premise = checkpoint_premise_of_trial(trial, lab)
        c = premise.checkpoint
        for target in trial.checkpoint.targets:
            true = estimate_target(Question(c.plan, trial.instance_type, c.every_seconds, c.keep, prices, lab,
                                            trial.volume_size_gb, truth), target)
            for repeat in range(experiment.repeats):
                stall = wobble(true.stall_seconds)
                figures = {"stall_seconds_mean": stall, "save_seconds_mean": stall,
                           "durable_seconds_mean": wobble(true.save_seconds),
                           "load_seconds_mean": wobble(true.restore_seconds - (true.copy_in_seconds or 0.0)),
                           "bytes_per_checkpoint": c.plan.bytes}
                writer = {"other": 120.0, "downloading": 0.0, "training": c.keep * (stall + c.every_seconds) + 30.0}
                copy_in = wobble(true.copy_in_seconds or 0.0)
                restore = {"other": 120.0, "downloading": copy_in, "training": 20.0}
                for restoring, phases, script in ((False, writer, figures),
                                                  (True, restore, {"load_seconds_mean": figures["load_seconds_mean"]})):
                    name = f"ck-{trial.name}-{target}-r{repeat}{'-rs' if restoring else ''}"
                    describe = _describe(name, trial.instance_type, trial.instance_count, phases, sum(phases.values()),
                                         start + dt.timedelta(hours=len(records)), 1, "File", trial.name)
                    records.append(record_from_describe(
                        describe, prices=prices, script_metrics={"checkpoint": script}, mode="File",
                        dataset=c.plan.workload.name, repeat=repeat, trial=trial.name, lab=lab.to_dict(),
                        checkpoint_target=target, checkpoint_restore=restoring,
                        storage=EXPRESS if target == "express" else None))
    plan_document = {"experiment": experiment.document, "backend": "aws", "execution": execution,
                     "experiment_hash": "synthetic", "environment": {"region": "us-east-1", "code_version": "synthetic"},
                     "dataset_stats": {}, "lab": lab.to_dict(), "fsx_capacity_gib": lab.fsx.capacity_gib}
    return results_document(plan_document, records, prices)
