"""Collect: finished training jobs into result records, results.json/.csv and the run's summary in S3."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

from ..contracts import RESULTS_SCHEMA_VERSION
from ..core.job_metrics import is_metrics_file, job_metrics
from ..core.facts.limits import CAPACITY_ATTEMPTS
from ..core.facts.prices import PriceTable
from ..core.requests import RESULTS_PREFIX
from ..core.results import record_from_describe, skipped_record, summarise, to_csv
from ..core.facts.aws_errors import training_job_missing
from .common import function_clients, is_missing, put_json
from .plan import failure_key
from .runtime import environ as function_environ

# Why a job has no training job of its own, by the code the state machine records.
OUTCOME_REASONS = {
    "EfsStagingFailed": "Copying the dataset from S3 to EFS (DataSync) failed; see the DataSync task's log group",
    "FsxDataNotReady": "FSx's S3 metadata import did not finish in time",
    "ExpressNotStaged": "Copying the dataset into the S3 Express One Zone bucket did not finish",
}



class ResultsNotStored(Exception):
    """Results could not be written."""


def flatten_outcomes(lanes: list[Any]) -> dict[int, dict[str, Any]]:
    """The Map's per-lane outcome lists, by job index."""
    out: dict[int, dict[str, Any]] = {}
    for lane in lanes or []:
        for outcome in (lane if isinstance(lane, list) else [lane]):
            if isinstance(outcome, dict) and "index" in outcome:
                out[int(outcome["index"])] = outcome
    return out


def _script_metrics(s3, describe: dict[str, Any]) -> dict[str, Any] | None:
    """The script's metrics from the job's output.tar.gz: every host's metrics-<host>.json on a cluster
    (SageMaker merges the hosts' output folders into the one archive), else metrics.json."""
    output = describe.get("OutputDataConfig", {}).get("S3OutputPath", "").rstrip("/")
    if not output.startswith("s3://"):
        return None
    bucket, _, prefix = output[5:].partition("/")
    key = f"{prefix}/{describe['TrainingJobName']}/output/output.tar.gz".lstrip("/")
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.ClientError as err:
        if is_missing(err):
            return None   # no output archive (a job that failed before writing one): no metrics
        raise             # not read: the metrics would be lost from the record; Collect fails and says so
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
            files = {member.name: tar.extractfile(member).read() for member in tar.getmembers()
                     if member.isfile() and is_metrics_file(member.name)}
    except (OSError, tarfile.TarError, EOFError):
        return None
    return job_metrics(files, int((describe.get("ResourceConfig") or {}).get("InstanceCount") or 1))


def collect(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    clients = function_clients()
    s3, sagemaker = clients["s3"], clients["sagemaker"]
    summary_plan = event["plan"]
    bucket, base = summary_plan["bucket"], summary_plan["base"]
    plan_document = json.loads(s3.get_object(Bucket=bucket, Key=summary_plan["plan_key"])["Body"].read())
    outcomes = flatten_outcomes(event.get("results") or [])
    prepared = event.get("prepared") or {}
    overrides = function_environ().get("DSLAB_PRICES")
    prices = PriceTable.with_overrides(json.loads(overrides) if overrides else None)
    records = []
    for job in plan_document["jobs"]:
        outcome = outcomes.get(int(job["index"]), {"status": "Failed", "error": "the workflow returned no outcome for this job"})
        records.append(job_record(s3, sagemaker, bucket, base, plan_document, job, outcome, prices, prepared))
    results = results_document(plan_document, records, prices, json.loads(overrides) if overrides else None, prepared)
    summary = results["summary"]
    put_json(s3, bucket, f"{base}/results.json", results)
    s3.put_object(Bucket=bucket, Key=f"{base}/results.csv", Body=to_csv(records).encode(), ContentType="text/csv")
    summary["results_uri"] = f"s3://{bucket}/{base}/results.json"
    return summary


def job_record(s3, sagemaker, bucket: str, base: str, plan_document: dict[str, Any], job: dict[str, Any],
               outcome: dict[str, Any], prices: PriceTable, prepared: dict[str, Any] | None = None) -> dict[str, Any]:
    """One planned job's result record: from its DescribeTrainingJob and output archive, or why it never ran.
    ``outcome``: what the Run map recorded for it ({"status", "name", "error"})."""
    prepared = prepared or {}
    status = outcome.get("status")
    name = outcome.get("name") or job["name"]
    stats = plan_document["dataset_stats"].get(job["dataset"], {})
    common = dict(mode=job["mode"], dataset=job["dataset"], repeat=job["repeat"],
                  instance_type=job["instance_type"], instance_count=job["instance_count"], trial=job.get("trial"),
                  storage=job.get("storage"), checkpoint_target=job.get("checkpoint_target"),
                  checkpoint_restore=job.get("checkpoint_restore"))
    if status == "Skipped":
        reason = job.get("skip_reason") or "skipped"
        if outcome.get("error") == "FsxDataNotReady":
            fsx_reason = (prepared.get("fsx_data") or {}).get("reason")
            reason = f"{OUTCOME_REASONS['FsxDataNotReady']}: {fsx_reason}" if fsx_reason else OUTCOME_REASONS["FsxDataNotReady"]
        elif outcome.get("error") == "ExpressNotStaged":
            express_reason = (prepared.get("express") or {}).get("reason")
            reason = f"{OUTCOME_REASONS['ExpressNotStaged']}: {express_reason}" if express_reason else OUTCOME_REASONS["ExpressNotStaged"]
        return skipped_record(name, **common, reason=reason)
    try:
        describe = sagemaker.describe_training_job(TrainingJobName=name)
    except sagemaker.exceptions.ClientError as err:
        if not training_job_missing(err):
            raise   # a job not described is not recorded as never created: Collect fails and says so
        # The job was never created (its request could not be loaded, the API refused it, staging failed).
        return skipped_record(name, **common, reason=_reason(s3, bucket, base, name, outcome), status="Failed")
    describe.pop("ResponseMetadata", None)
    record = record_from_describe(
        describe, prices=prices, script_metrics=_script_metrics(s3, describe), mode=job["mode"],
        dataset=job["dataset"], repeat=job["repeat"], files=stats.get("files"), total_bytes=stats.get("bytes"),
        epochs=job.get("epochs"), fsx_capacity_gib=plan_document.get("fsx_capacity_gib", 1200), trial=job.get("trial"),
        lab=plan_document.get("lab"), storage=job.get("storage"), checkpoint_target=job.get("checkpoint_target"),
        checkpoint_restore=job.get("checkpoint_restore"))
    if record["status"] == "Failed" and not record["failure_reason"]:
        record["failure_reason"] = _reason(s3, bucket, base, name, outcome)
    return record


def results_document(plan_document: dict[str, Any], records: list[dict[str, Any]], prices: PriceTable,
                     overrides: dict[str, Any] | None = None, prepared: dict[str, Any] | None = None) -> dict[str, Any]:
    """results.json: the records with what the report needs to rebuild the answer from this file alone."""
    prepared = prepared or {}
    return {
        "schema_version": RESULTS_SCHEMA_VERSION,   # what a reader of results.json can rely on (core/measured.py)
        "experiment": plan_document["experiment"],
        "backend": plan_document.get("backend", "aws"),
        "records": records,
        "execution": plan_document["execution"],
        "experiment_hash": plan_document["experiment_hash"],
        "code_version": plan_document["environment"].get("code_version"),
        "environment": plan_document["environment"],
        # The price overrides the run used, the datasets' files and bytes as found in S3, FSx's size.
        "prices": {"date": prices.date, "source": prices.source, "region": prices.data["region"], "overrides": overrides},
        "dataset_stats": {name: {k: v for k, v in found.items() if k in ("files", "bytes")}
                          for name, found in plan_document["dataset_stats"].items()},
        "fsx_capacity_gib": plan_document.get("fsx_capacity_gib", 1200),
        "lab": plan_document.get("lab"),   # the FSx and EFS this run ran on (the report prices them)
        "fsx_storage_optimization": plan_document.get("fsx_storage_optimization"),
        "quotas": plan_document.get("quotas"),
        "staging": (prepared.get("staging") or {}).get("status") if isinstance(prepared.get("staging"), dict) else prepared.get("staging"),
        "express_staging": prepared.get("express"),
        "fsx_data": prepared.get("fsx_data"),
        "summary": summarise(records),
    }


ENDED = ("Completed", "Failed", "Stopped")


def latest_attempt(sagemaker, name: str) -> dict[str, Any] | None:
    """A planned job's last attempt as DescribeTrainingJob tells it: the Run map retries a capacity error under
    a new name (<name>-a2, -a3: workflow.py's attempt loop, limits.CAPACITY_ATTEMPTS); None if none exists."""
    found = None
    for attempt in range(1, CAPACITY_ATTEMPTS + 1):
        try:
            found = sagemaker.describe_training_job(TrainingJobName=name if attempt == 1 else f"{name}-a{attempt}")
        except sagemaker.exceptions.ClientError as err:
            if not training_job_missing(err):
                raise
            break   # not created (yet): the attempts before it are all there are
    return found


def finished_records(s3, sagemaker, bucket: str, plan_document: dict[str, Any], prices: PriceTable) -> list[dict[str, Any]]:
    """The records of the planned jobs whose last attempt has ended, in the plan's order: what an execution that
    stopped or failed before Collect finished (results.json never written) did finish."""
    base = f"{RESULTS_PREFIX}/{plan_document['execution']}"
    records = []
    for job in plan_document["jobs"]:
        if job.get("skip_reason"):
            continue
        describe = latest_attempt(sagemaker, job["name"])
        if describe is None or describe["TrainingJobStatus"] not in ENDED:
            continue
        outcome = {"status": describe["TrainingJobStatus"], "name": describe["TrainingJobName"]}
        records.append(job_record(s3, sagemaker, bucket, base, plan_document, job, outcome, prices))
    return records


def _reason(s3, bucket: str, base: str, name: str, outcome: dict[str, Any]) -> str:
    """The failure's reason: the Cause the state machine stored in S3, else the recorded code."""
    error = str(outcome.get("error") or "failed")
    cause = ""
    try:
        cause = s3.get_object(Bucket=bucket, Key=failure_key(base, name))["Body"].read().decode("utf-8", "replace")
    except Exception:
        pass
    if not cause:
        return OUTCOME_REASONS.get(error, error)
    try:  # a .sync failure's Cause is the job's DescribeTrainingJob output as JSON
        parsed = json.loads(cause)
        if isinstance(parsed, dict):
            return parsed.get("FailureReason") or parsed.get("errorMessage") or cause
    except ValueError:
        pass
    return f"{error}: {cause}"
