"""Result records (../shared/contracts/results-record.schema.json) from DescribeTrainingJob outputs.

The source post's split of a job's time: Downloading + Training + Other = one instance's wall clock
(TrainingTimeInSeconds, which is BillableTimeInSeconds unless spot saved some). Every AWS field is read as its API
reference defines it (docs/reference/aws-fields.md): billable seconds are one instance's, so the instances cost
billable x InstanceCount x the hourly price.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from typing import Any, Iterable

from ..contracts import RESULTS_SCHEMA_VERSION
from .errors import ConfigError
from .modes import EFS, EXPRESS, FASTFILE, FILE, FSX, PIPE, SCRIPT, STANDARD, record_mode
from .facts.limits import SUMMARY_MESSAGE_CHARS
from .requests import CHECKPOINT_METRIC_DEFINITIONS, DATASET_URI_HYPERPARAMETER, METRIC_DEFINITIONS
from .facts.prices import PriceTable, job_cost

RECORD_KEYS = ("job_name", "mode", "dataset", "repeat", "status", "failure_reason", "instance_type", "instance_count",
               "billable_seconds", "training_time_seconds", "phases", "breakdown", "metrics", "cost_usd")
METRIC_KEYS = ("samples_per_second", "mb_per_second", "au_percent", "end_to_end_efficiency_percent",
               "time_to_first_batch_seconds")
TERMINAL = ("Completed", "Failed", "Stopped")
# Every metric the lab's own metric lines define (dslab/core/requests.py METRIC_DEFINITIONS, and a checkpoint trial's).
LAB_METRIC_NAMES = frozenset(d["Name"] for d in METRIC_DEFINITIONS + CHECKPOINT_METRIC_DEFINITIONS)
CHECKPOINT_PREFIX = "checkpoint_"

# Each record says its schema version ("schema_version"; a record without it was written before the key was, and is
# version 1); results.json's envelope says the same (contracts.RESULTS_SCHEMA_VERSION). What each version's seconds
# mean, and how this dslab reads an older record (read_results): docs/reference/results-record.md shows these words.
RECORD_VERSION = RESULTS_SCHEMA_VERSION
VERSION_NOTES = {
    1: ("Written before the lab read BillableTimeInSeconds as AWS defines it. `billable_seconds`: a local run's held "
        "the stand-in's seconds x `instance_count`, and is read divided by `instance_count`; an AWS run's held "
        "DescribeTrainingJob's own value, already one instance's, and is read as it is. `cost_usd.instance`: a local "
        "run's priced every instance and is read as it is; an AWS run's priced one instance, and is read x "
        "`instance_count` (the record's own price, not today's). `breakdown`: the phases x `instance_count`, squeezed "
        "to `billable_seconds` where they exceeded it (spot); it is read rebuilt from the record's own `phases` and "
        "training time. A record of one instance and no spot saving reads as it was written."),
    2: ("`billable_seconds` is DescribeTrainingJob's BillableTimeInSeconds as AWS defines it: one instance's wall "
        "clock, after any managed spot saving. `cost_usd.instance` is `billable_seconds` x `instance_count` x the "
        "hourly price. `phases` and `breakdown` are one instance's wall seconds, never squeezed to the billable time: "
        "`breakdown.other` is `training_time_seconds` less downloading and training, so the three add up to "
        "`billable_seconds` except where spot saved some (saving = 1 - `billable_seconds` / "
        "`training_time_seconds`)."),
}
READS = "read it with the dslab that wrote it"


def parse_time(value: Any) -> dt.datetime | None:
    """Timestamps as boto3 returns them (datetime), as the AWS CLI prints them (ISO 8601), or epoch seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc)
    text = str(value).replace("Z", "+00:00")
    parsed = dt.datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def phase_seconds(describe: dict[str, Any]) -> dict[str, float]:
    """Seconds per SecondaryStatus; an open last transition ends at TrainingEndTime or LastModifiedTime."""
    phases: dict[str, float] = {}
    fallback_end = parse_time(describe.get("TrainingEndTime")) or parse_time(describe.get("LastModifiedTime"))
    for transition in describe.get("SecondaryStatusTransitions") or []:
        start = parse_time(transition.get("StartTime"))
        end = parse_time(transition.get("EndTime")) or fallback_end
        if start is None or end is None:
            continue
        phases[transition["Status"]] = phases.get(transition["Status"], 0.0) + max(0.0, (end - start).total_seconds())
    return {k: round(v, 3) for k, v in phases.items()}


def transitions(describe: dict[str, Any]) -> list[dict[str, Any]]:
    """SecondaryStatusTransitions in order, each as its status, its seconds and its StatusMessage where it has one:
    what a calibration reads an attempt (a spot job's Interrupted ends one) and the image pull (Training, "Downloading
    the training image") from (core/measured.py). Recorded, never acted on: the reference says messages change."""
    fallback_end = parse_time(describe.get("TrainingEndTime")) or parse_time(describe.get("LastModifiedTime"))
    out = []
    for transition in describe.get("SecondaryStatusTransitions") or []:
        start = parse_time(transition.get("StartTime"))
        end = parse_time(transition.get("EndTime")) or fallback_end
        if start is None or end is None:
            continue
        seconds = round(max(0.0, (end - start).total_seconds()), 3)
        message = transition.get("StatusMessage")
        out.append({"status": transition["Status"], "seconds": seconds, **({"message": message} if message else {})})
    return out


def warm_pool(describe: dict[str, Any]) -> dict[str, Any]:
    """The job's WarmPoolStatus as the record keeps it: its status and the job that reused its pool (that job started
    warm: no instances launched, no image pulled), or nothing where the job kept no pool."""
    found = describe.get("WarmPoolStatus") or {}
    if not found.get("Status"):
        return {}
    return {"warm_pool": {"status": found["Status"],
                          **({"reused_by_job": found["ReusedByJob"]} if found.get("ReusedByJob") else {})}}


def breakdown(phases: dict[str, float], wall_seconds: float | None) -> dict[str, float]:
    """The post's Downloading / Training / Other split of one instance's wall clock.

    Phases are wall seconds per instance (SecondaryStatusTransitions) and stay so: never multiplied by the instance
    count, never squeezed to a spot job's discounted billable time. ``wall_seconds`` is TrainingTimeInSeconds (else
    BillableTimeInSeconds, the same unless spot); ``other`` is the rest of it: uploading, container start, ...
    """
    downloading = phases.get("Downloading", 0.0)
    training = phases.get("Training", 0.0)
    other = 0.0 if wall_seconds is None else max(0.0, wall_seconds - downloading - training)
    return {"downloading": round(downloading, 3), "training": round(training, 3), "other": round(other, 3)}


def wall_seconds(record: dict[str, Any]) -> float | None:
    """One instance's clock from TrainingStartTime to TrainingEndTime: training_time_seconds, else billable_seconds
    (the same unless spot saved some)."""
    found = record.get("training_time_seconds")
    return found if found is not None else record.get("billable_seconds")


def spot_saving(record: dict[str, Any]) -> float | None:
    """Managed spot training's saving as DescribeTrainingJob defines it: 1 - BillableTimeInSeconds /
    TrainingTimeInSeconds (0.0 for an on-demand job); None where either is missing or no time was trained."""
    billable, trained = record.get("billable_seconds"), record.get("training_time_seconds")
    if billable is None or not trained:
        return None
    return 1.0 - billable / trained


def record_version(record: dict[str, Any]) -> Any:
    """A record's schema version: its own ``schema_version``, else 1 (written before the key was)."""
    return record.get("schema_version", 1)


def read_results(results: dict[str, Any], where: str = "results.json") -> dict[str, Any]:
    """results.json as this dslab reads it: every record at RECORD_VERSION, an older one read as VERSION_NOTES says
    (a new document; ``results`` is left as it is). Refused in one line (ConfigError naming the record and its
    version) where the records mix versions, or disagree with the file's own ``schema_version``, or are newer than
    this dslab reads: nothing is then read, priced or written. What was read differently is said in ``read_as``."""
    records = results.get("records")
    if not isinstance(records, list):
        return results
    versions = [record_version(r) if isinstance(r, dict) else None for r in records]
    # A file without its own schema_version is its records' (one written before the key was: 1).
    envelope = results.get("schema_version", versions[0] if versions else 1)
    for index, (record, version) in enumerate(zip(records, versions)):
        if version != versions[0] or version != envelope:
            at = f"{where}: records[{index}] ({record.get('job_name', '?') if isinstance(record, dict) else '?'})"
            said = (f"version {version!r}, where records[0] is version {versions[0]!r}" if version != versions[0]
                    else f"version {version!r} in a file of schema_version {envelope!r}")
            raise ConfigError(f"{at}: schema_version", f"{said}: a results file holds one version (records written "
                              "apart are read apart); take each run's own results.json")
    if envelope not in VERSION_NOTES:
        raise ConfigError(f"{where}: schema_version", f"results of schema version {envelope!r}; this dslab reads "
                          f"versions {', '.join(map(str, VERSION_NOTES))}: {READS}")
    if envelope == RECORD_VERSION:
        return results
    backend = results.get("backend")
    if backend not in ("aws", "local"):
        raise ConfigError(f"{where}: backend", f"{backend!r}: a version-1 record's billable seconds are read by where "
                          "it ran (aws or local); the file must say which")
    upgraded = [_from_version_1(r, backend) for r in records]
    changed = [r["job_name"] for r, was in zip(upgraded, records) if _differs(r, was)]
    # The file's summary counted the records as they were: its spend is the records' as now read.
    found = results.get("summary")
    summary = {"summary": {**found, **summarise(upgraded)}} if isinstance(found, dict) else {}
    return {**results, "schema_version": RECORD_VERSION, "records": upgraded, **summary,
            "read_as": {"from_version": envelope, "to_version": RECORD_VERSION, "backend": backend,
                        "records_changed": changed, "how": VERSION_NOTES[envelope]}}


def _differs(new: dict[str, Any], old: dict[str, Any]) -> bool:
    return any(new.get(k) != old.get(k) for k in ("billable_seconds", "breakdown", "cost_usd"))


def _from_version_1(record: dict[str, Any], backend: str) -> dict[str, Any]:
    """One version-1 record read as version 2 (VERSION_NOTES[1])."""
    out = {**record, "schema_version": RECORD_VERSION}
    count = max(1, int(record.get("instance_count") or 1))
    billable = record.get("billable_seconds")
    if backend == "local" and billable is not None and count > 1:
        out["billable_seconds"] = billable / count   # the old runner wrote seconds x count
    cost = record.get("cost_usd")
    if backend == "aws" and count > 1 and isinstance(cost, dict) and cost.get("instance"):
        # The old job_cost priced AWS's one-instance seconds once: the same hourly price, x every instance.
        more = cost["instance"] * (count - 1)
        out["cost_usd"] = {**cost, "instance": round(cost["instance"] + more, 6),
                           "total": round(cost.get("total", cost["instance"]) + more, 6)}
    phases = record.get("phases") or {}
    if out.get("billable_seconds") is not None:
        wall = wall_seconds(out)
        squeezed = phases.get("Downloading", 0.0) + phases.get("Training", 0.0) > out["billable_seconds"]
        if count > 1 or squeezed or wall != out["billable_seconds"]:
            out["breakdown"] = breakdown(phases, wall)
    return out


def infer_mode(channel: dict[str, Any], default_input_mode: str = "File") -> str:
    source = channel.get("DataSource", {})
    if "FileSystemDataSource" in source:
        return FSX if source["FileSystemDataSource"].get("FileSystemType") == "FSxLustre" else EFS
    mode = channel.get("InputMode") or default_input_mode
    return {"File": FILE, "FastFile": FASTFILE, "Pipe": PIPE}.get(mode, FILE)


def infer_storage(describe: dict[str, Any], tags: dict[str, str] | None = None) -> str:
    """express when the job read the S3 Express One Zone bucket (its tag, or its channel's bucket)."""
    if (tags or {}).get("dslab:storage"):
        return tags["dslab:storage"]
    channels = describe.get("InputDataConfig") or [{}]
    uri = (channels[0].get("DataSource", {}).get("S3DataSource", {}).get("S3Uri", "")
           or str(_hyperparameter(describe, DATASET_URI_HYPERPARAMETER) or ""))
    return EXPRESS if uri[5:].split("/", 1)[0].endswith("--x-s3") else STANDARD


def infer_dataset(channel: dict[str, Any]) -> str:
    source = channel.get("DataSource", {})
    path = (source.get("S3DataSource", {}).get("S3Uri") or source.get("FileSystemDataSource", {}).get("DirectoryPath") or "")
    path = path.rstrip("/")
    if path.endswith(".manifest"):
        path = path[: -len(".manifest")]
    return path.rsplit("/", 1)[-1] or "unknown"


def tags_dict(tags: Iterable[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags or []}


def identify(describe: dict[str, Any], tags: dict[str, str] | None = None) -> tuple[str, str, int]:
    """(mode, dataset, repeat) of a job: its dslab tags where present, else its own channels."""
    tags = tags or {}
    channels = describe.get("InputDataConfig") or [{}]
    default_mode = describe.get("AlgorithmSpecification", {}).get("TrainingInputMode", "File")
    script_uri = _hyperparameter(describe, DATASET_URI_HYPERPARAMETER) if not describe.get("InputDataConfig") else None
    if isinstance(script_uri, str) and script_uri.startswith("s3://"):
        # No channel and a dataset URI: the script read S3 itself.
        channels = [{"InputMode": SCRIPT, "DataSource": {"S3DataSource": {"S3Uri": script_uri}}}]
    mode = tags.get("dslab:mode") or (SCRIPT if channels[0].get("InputMode") == SCRIPT else infer_mode(channels[0], default_mode))
    dataset = tags.get("dslab:dataset") or infer_dataset(channels[0])
    repeat = int(tags.get("dslab:repeat", 0))
    return mode, dataset, repeat


def metrics_from(describe: dict[str, Any], script_metrics: dict[str, Any] | None) -> dict[str, Any]:
    """The script's metrics.json where it was stored, else the final values SageMaker scraped from the log.

    Metrics of the user's own metric definitions (a loss, an accuracy) are kept under ``user``."""
    out: dict[str, Any] = {key: None for key in METRIC_KEYS}
    out["epoch_seconds"] = []
    own = {e["MetricName"]: float(e["Value"]) for e in describe.get("FinalMetricDataList") or []
           if e.get("MetricName") not in LAB_METRIC_NAMES and isinstance(e.get("Value"), (int, float))}
    if own:
        out["user"] = own
    if script_metrics:
        for key in METRIC_KEYS:
            value = script_metrics.get(key)
            out[key] = float(value) if isinstance(value, (int, float)) else None
        out["epoch_seconds"] = [float(v) for v in script_metrics.get("epoch_seconds") or []]
        # "cluster": a multi-instance job's aggregate and per-host AU, from every host's metrics file (job_metrics.py);
        # "au_percent_per_epoch": the epochs' AU, whose mean is au_percent (DLIO's train_au_percentage).
        # "checkpoint": a checkpoint trial's figures (training/dslab_train/checkpoint.py): save, stall and load
        # seconds and GB/s (1024**3 bytes) per checkpoint and their means, the files and bytes, fsync and cache drop.
        for key in ("samples", "epochs", "data_stall_seconds", "bytes", "accelerators", "cluster", "au_percent_per_epoch",
                    "checkpoint"):
            if key in script_metrics:
                out[key] = script_metrics[key]
        return out
    for entry in describe.get("FinalMetricDataList") or []:
        name = entry.get("MetricName")
        if name in METRIC_KEYS:
            out[name] = float(entry["Value"])
        elif name == "samples":
            out["samples"] = int(entry["Value"])
        elif name in LAB_METRIC_NAMES and name.startswith(CHECKPOINT_PREFIX):
            # The last line of each is the mean over the checkpoints (train.py run_checkpoint_trial).
            out.setdefault("checkpoint", {})[f"{name[len(CHECKPOINT_PREFIX):]}_mean"] = float(entry["Value"])
    return out


def bytes_read(mode: str, metrics: dict[str, Any], dataset_bytes: int | None) -> int | None:
    """Bytes the job read: what the script counted, else what the mode itself tells. File mode
    downloads the whole channel before the script starts, so any script's job read the dataset
    once; the other modes read on demand, and only the script can say how much."""
    if isinstance(metrics.get("bytes"), (int, float)):
        return int(metrics["bytes"])
    return int(dataset_bytes) if mode == FILE and dataset_bytes else None


def _lab_pricing(lab: dict[str, Any] | None) -> dict[str, Any]:
    """FSx's and EFS's configuration as the run's plan recorded them (``Provisioning.to_dict``), which price a job's
    file-system uptime and throughput; nothing when the plan recorded none (Scratch 2 at its capacity, then)."""
    if not lab:
        return {}
    from .model.provisioning import Provisioning, as_deployed
    found = Provisioning.from_dict(lab, as_deployed())
    return {"fsx": found.fsx, "efs": found.efs}


def record_from_describe(describe: dict[str, Any], *, prices: PriceTable, tags: dict[str, str] | None = None,
                         script_metrics: dict[str, Any] | None = None, mode: str | None = None,
                         dataset: str | None = None, repeat: int | None = None, files: int | None = None,
                         total_bytes: int | None = None, epochs: int | None = None,
                         fsx_capacity_gib: int = 1200, trial: str | None = None,
                         storage: str | None = None, lab: dict[str, Any] | None = None,
                         checkpoint_target: str | None = None, checkpoint_restore: bool | None = None) -> dict[str, Any]:
    inferred_mode, inferred_dataset, inferred_repeat = identify(describe, tags)
    checkpoint_target = checkpoint_target or (tags or {}).get("dslab:checkpoint-target")
    if checkpoint_restore is None:
        checkpoint_restore = (tags or {}).get("dslab:checkpoint-restore") == "true"
    trial = trial or (tags or {}).get("dslab:trial")
    storage = storage or infer_storage(describe, tags)
    mode = mode or inferred_mode
    resources = describe.get("ResourceConfig") or {}
    count = int(resources.get("InstanceCount") or 1)
    status = describe.get("TrainingJobStatus", "Failed")
    if status not in TERMINAL:
        status = "Stopped" if status == "Stopping" else status
    phases = phase_seconds(describe)
    billable = describe.get("BillableTimeInSeconds")   # one instance's wall clock, after any spot saving
    training_time = describe.get("TrainingTimeInSeconds")
    metrics = metrics_from(describe, script_metrics)
    metrics["bytes_read"] = bytes_read(mode, metrics, total_bytes)
    if epochs is None:
        epochs = int(metrics.get("epochs") or _hyperparameter(describe, "epochs") or 1)
    wall = training_time if training_time is not None else sum(phases.values())
    cost = job_cost(prices, mode=mode, instance_type=resources.get("InstanceType", ""), instance_count=count,
                    volume_size_gb=int(resources.get("VolumeSizeInGB") or 0), billable_seconds=billable,
                    wall_seconds=wall, files=files, total_bytes=total_bytes, epochs=epochs,
                    fsx_capacity_gib=fsx_capacity_gib, storage=storage, **_lab_pricing(lab))
    contract_mode, ingestion = record_mode(mode)
    distribution = s3_distribution(describe)
    started = parse_time(describe.get("TrainingStartTime")) or parse_time(describe.get("CreationTime"))
    return {
        "schema_version": RECORD_VERSION,
        "job_name": describe["TrainingJobName"],
        "mode": contract_mode,
        "dataset": dataset or inferred_dataset,
        "repeat": inferred_repeat if repeat is None else repeat,
        "status": status,
        "failure_reason": describe.get("FailureReason"),
        "instance_type": resources.get("InstanceType", "unknown"),
        "instance_count": count,
        "billable_seconds": None if billable is None else float(billable),
        "training_time_seconds": None if training_time is None else float(training_time),
        "phases": phases,
        "breakdown": breakdown(phases, None if training_time is None and billable is None
                               else float(training_time if training_time is not None else billable)),
        "metrics": metrics,
        "cost_usd": cost.to_dict(),
        **({"trial": trial} if trial else {}),
        **({"storage": EXPRESS} if storage == EXPRESS else {}),
        **ingestion,
        # An extra field (the record's contract allows them): how SageMaker shared the S3 channel among the instances.
        **({"distribution": distribution} if distribution else {}),
        # When the job started (a calibration names each measured cell's date: core/measured.py).
        **({"training_start": started.isoformat()} if started else {}),
        # Extra fields a calibration reads: the transitions in order (attempts, the image pull) and the warm pool.
        **({"transitions": transitions(describe)} if describe.get("SecondaryStatusTransitions") else {}),
        **warm_pool(describe),
        **checkpoint_fields(checkpoint_target, checkpoint_restore, describe),
    }


def checkpoint_fields(target: str | None, restore: bool | None, describe: dict[str, Any] | None = None) -> dict[str, Any]:
    """A checkpoint trial's record names where it wrote beside the contract's mode (extra fields, which the contract
    allows): "checkpoint_target" (s3, express, fsx, efs), "checkpoint_restore" (the sync's restore job), and for a sync
    target the S3 URI SageMaker synced ("checkpoint_s3_uri")."""
    if not target:
        return {}
    out: dict[str, Any] = {"checkpoint_target": target, "checkpoint_restore": bool(restore)}
    uri = ((describe or {}).get("CheckpointConfig") or {}).get("S3Uri")
    if uri:
        out["checkpoint_s3_uri"] = uri
    return out


def s3_distribution(describe: dict[str, Any]) -> str | None:
    """The S3 channel's S3DataDistributionType as the job ran it (FullyReplicated: every instance gets the whole
    dataset; ShardedByS3Key: each about 1/n of its objects, S3DataSource in the API reference), or None for a file
    system's channel, no channel, or a channel that does not say (the lab's requests always do)."""
    for channel in describe.get("InputDataConfig") or []:
        s3 = (channel.get("DataSource") or {}).get("S3DataSource")
        if s3:
            return s3.get("S3DataDistributionType")
    return None


def skipped_record(job_name: str, *, mode: str, dataset: str, repeat: int, instance_type: str,
                   instance_count: int, reason: str, status: str = "Skipped", trial: str | None = None,
                   storage: str | None = None, checkpoint_target: str | None = None,
                   checkpoint_restore: bool | None = None) -> dict[str, Any]:
    """A job that never ran (FSx down, its request never created): the record says why."""
    contract_mode, ingestion = record_mode(mode)
    return {
        "schema_version": RECORD_VERSION,
        **checkpoint_fields(checkpoint_target, checkpoint_restore),
        **({"trial": trial} if trial else {}),
        **({"storage": EXPRESS} if storage == EXPRESS else {}),
        **ingestion,
        "job_name": job_name, "mode": contract_mode, "dataset": dataset, "repeat": repeat, "status": status,
        "failure_reason": reason, "instance_type": instance_type, "instance_count": instance_count,
        "billable_seconds": None, "training_time_seconds": None, "phases": {},
        "breakdown": {"downloading": 0.0, "training": 0.0, "other": 0.0},
        "metrics": {**{k: None for k in METRIC_KEYS}, "epoch_seconds": []},
        "cost_usd": {"instance": 0.0, "storage": 0.0, "requests": 0.0, "total": 0.0},
    }


def _hyperparameter(describe: dict[str, Any], key: str) -> Any:
    value = (describe.get("HyperParameters") or {}).get(key)
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


CSV_COLUMNS = ["job_name", "mode", "dataset", "repeat", "status", "instance_type", "instance_count",
               "billable_seconds", "training_time_seconds", "downloading", "training", "other",
               "samples_per_second", "mb_per_second", "au_percent", "end_to_end_efficiency_percent",
               "time_to_first_batch_seconds",
               "cost_instance", "cost_storage", "cost_requests", "cost_total", "failure_reason",
               # Added with S3 Express One Zone and own scripts: where the S3 modes read, and the trial.
               "storage", "trial", "bytes_read",
               # Added with in-script loading: "script" where the job had no channel and read S3 itself.
               "ingestion",
               # Added with checkpoint trials: where a checkpoint job wrote, and its means over the checkpoints.
               "checkpoint_target", "checkpoint_restore", "checkpoint_save_seconds", "checkpoint_stall_seconds",
               "checkpoint_load_seconds",
               # Added with durable checkpoints: until a save was in S3 (SageMaker's sync; empty for FSx and EFS).
               "checkpoint_durable_seconds"]


def to_csv(records: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow({
            **{k: r.get(k) for k in ("job_name", "mode", "dataset", "repeat", "status", "instance_type",
                                     "instance_count", "billable_seconds", "training_time_seconds")},
            **r["breakdown"],
            **{k: r["metrics"].get(k) for k in METRIC_KEYS},
            "cost_instance": r["cost_usd"]["instance"], "cost_storage": r["cost_usd"].get("storage", 0.0),
            "cost_requests": r["cost_usd"].get("requests", 0.0), "cost_total": r["cost_usd"]["total"],
            "failure_reason": r.get("failure_reason") or "",
            "storage": r.get("storage", STANDARD) if r.get("mode") in (FILE, FASTFILE, PIPE) else "",
            "trial": r.get("trial") or "", "bytes_read": r["metrics"].get("bytes_read"),
            "ingestion": r.get("ingestion") or "",
            "checkpoint_target": r.get("checkpoint_target") or "",
            "checkpoint_restore": ("true" if r.get("checkpoint_restore") else "false") if r.get("checkpoint_target") else "",
            **{f"checkpoint_{phase}_seconds": (r["metrics"].get("checkpoint") or {}).get(f"{phase}_seconds_mean")
               for phase in ("save", "stall", "load", "durable")},
        })
    return buffer.getvalue()


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts, spend and a message of bounded size (it flows through the state machine, whose states
    are capped at 256 KiB: see limits.py); results.json has every failure in full."""
    counts = {s: sum(1 for r in records if r["status"] == s) for s in ("Completed", "Failed", "Stopped", "Skipped")}
    failed = counts["Failed"] + counts["Stopped"]
    message = f"{len(records)} jobs: {counts['Completed']} completed, {failed} failed, {counts['Skipped']} skipped"
    failures = [r for r in records if r["status"] in ("Failed", "Stopped")]
    for shown, r in enumerate(failures):
        line = f"; {r['job_name']} ({r['mode']}, {r['dataset']}): {(r.get('failure_reason') or r['status'])[:300]}"
        if len(message) + len(line) > SUMMARY_MESSAGE_CHARS - 80:
            message += f"; and {len(failures) - shown} more failed (results.json has every reason)"
            break
        message += line
    return {"total": len(records), "completed": counts["Completed"], "failed": failed, "skipped": counts["Skipped"],
            "cost_usd": round(sum(r["cost_usd"]["total"] for r in records), 6), "message": message}

