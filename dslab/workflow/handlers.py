"""Lambda handlers of the benchmark workflow: Plan and Collect.

Thin adapters: all rules live in ``dslab.core``; these read the lab's settings from the function's
environment, talk to S3/SSM/FSx/SageMaker with boto3 (in the Lambda runtime), and shape the state
machine's data. Standard library and boto3 only.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from typing import Any

from ..core.errors import ConfigError
from ..core.experiment import parse_experiment
from ..core.prices import PriceTable
from ..core.requests import DATASETS_PREFIX, RESULTS_PREFIX, FileSystemRef, LabEnvironment, plan as plan_jobs
from ..core.results import record_from_describe, skipped_record, summarise, to_csv

MAX_JOBS = 500  # Map items are tiny (the requests live in S3), so this is a sanity bound only


class ExperimentInvalid(Exception):
    """The experiment cannot run; the state machine fails at Plan before any job is created."""


class ResultsNotStored(Exception):
    """Results could not be written."""


def _clients():
    import boto3
    endpoint = os.environ.get("DSLAB_AWS_ENDPOINT")  # the local lab's stand-in; unset on AWS
    kwargs = {"endpoint_url": endpoint} if endpoint else {}
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return {name: boto3.client(name, region_name=region, **kwargs) for name in ("s3", "ssm", "fsx", "sagemaker")}


def lab_environment_from_env(environ: dict[str, str], fsx: FileSystemRef | None) -> LabEnvironment:
    return LabEnvironment.from_dict({
        "bucket": environ.get("DSLAB_BUCKET"),
        "region": environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        "role_arn": environ.get("DSLAB_ROLE_ARN"),
        "subnet_ids": environ.get("DSLAB_SUBNET_IDS", ""),
        "security_group_ids": environ.get("DSLAB_SECURITY_GROUP_IDS", ""),
        "image_uri": environ.get("DSLAB_IMAGE_URI"),
        "image_uri_cpu": environ.get("DSLAB_IMAGE_URI_CPU"),
        "code_uri": environ.get("DSLAB_CODE_URI"),
        "code_version": environ.get("DSLAB_CODE_VERSION"),
        "fsx": None if fsx is None else {"file_system_id": fsx.file_system_id, "mount_name": fsx.mount_name},
        "efs": {"file_system_id": environ.get("DSLAB_EFS_ID")} if environ.get("DSLAB_EFS_ID") else None,
    })


def look_up_fsx(clients, environ: dict[str, str]) -> tuple[FileSystemRef | None, str]:
    """FSx as it is now: (reference, why not) — its SSM parameters vanish with the FSx stack."""
    names = [environ.get("DSLAB_FSX_ID_PARAMETER", ""), environ.get("DSLAB_FSX_MOUNT_PARAMETER", "")]
    found = {p["Name"]: p["Value"] for p in clients["ssm"].get_parameters(Names=names).get("Parameters", [])}
    fs_id, mount = found.get(names[0]), found.get(names[1])
    if not fs_id or not mount or fs_id in ("None", ""):
        return None, "FSx for Lustre is not deployed (its stack is down): bring it back with `dslab fsx up`"
    try:
        systems = clients["fsx"].describe_file_systems(FileSystemIds=[fs_id]).get("FileSystems", [])
    except Exception as err:  # FileSystemNotFound and friends
        return None, f"FSx file system {fs_id} cannot be described ({type(err).__name__}): bring it back with `dslab fsx up`"
    if systems and systems[0].get("Lifecycle") not in (None, "AVAILABLE", "UPDATING"):
        return None, f"FSx file system {fs_id} is {systems[0]['Lifecycle']}, not AVAILABLE"
    return FileSystemRef(fs_id, mount), ""


def dataset_stats(s3, bucket: str, prefix: str, max_pages: int = 2000) -> tuple[int, int]:
    files = size = 0
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{DATASETS_PREFIX}/{prefix}/")
    for i, page in enumerate(pages):
        for obj in page.get("Contents", []):
            files += 1
            size += obj["Size"]
        if i + 1 >= max_pages:
            break
    return files, size


def plan(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    environ = dict(os.environ)
    clients = _clients()
    execution = str(event.get("execution") or "manual")
    try:
        experiment = parse_experiment(event.get("experiment") or {}, source="experiment")
    except ConfigError as err:
        raise ExperimentInvalid(str(err)) from None
    fsx, fsx_reason = look_up_fsx(clients, environ)
    try:
        env = lab_environment_from_env(environ, fsx)
    except ConfigError as err:
        raise ExperimentInvalid(str(err)) from None
    bucket = env.bucket

    stats: dict[str, dict[str, int]] = {}
    for i, dataset in enumerate(experiment.datasets):
        if dataset.source != "s3":
            continue
        files, size = dataset_stats(clients["s3"], bucket, dataset.prefix)
        if files == 0:
            raise ExperimentInvalid(
                f"experiment: dataset '{dataset.name}': s3://{bucket}/{DATASETS_PREFIX}/{dataset.prefix}/ is empty; "
                f"upload it first (dslab dataset upload --src DIR --to s3://{bucket}/{DATASETS_PREFIX}/{dataset.prefix}/) "
                "or fix its prefix")
        stats[dataset.name] = {"files": files, "bytes": size}
    try:
        jobs = plan_jobs(experiment, env, execution, fsx_available=fsx is not None)
    except ConfigError as err:
        raise ExperimentInvalid(f"experiment: {err}") from None
    if len(jobs) > MAX_JOBS:
        raise ExperimentInvalid(f"experiment: {len(jobs)} jobs is more than {MAX_JOBS}; lower repeats or split it")

    base = f"{RESULTS_PREFIX}/{execution}"
    items = []
    for job in jobs:
        item = {"index": job.spec.index, "name": job.name, "mode": job.spec.mode, "dataset": job.spec.dataset.name,
                "repeat": job.spec.repeat}
        if job.request is None:
            item["skip_reason"] = fsx_reason or job.skip_reason
        else:
            key = f"{base}/requests/{job.name}.json"
            clients["s3"].put_object(Bucket=bucket, Key=key, Body=json.dumps(job.request).encode(),
                                     ContentType="application/json")
            item["request_key"] = key
        items.append(item)
    efs_prefixes = sorted({j.spec.dataset.prefix for j in jobs if j.spec.mode == "EFS" and j.request is not None})
    plan_document = {
        "execution": execution,
        "experiment": experiment.document,
        "experiment_hash": experiment.content_hash,
        "environment": env.to_dict(),
        "fsx_available": fsx is not None,
        "fsx_reason": fsx_reason,
        "fsx_capacity_gib": int(environ.get("DSLAB_FSX_CAPACITY_GIB") or 1200),
        "dataset_stats": stats,
        "backend": environ.get("DSLAB_BACKEND", "aws"),
        "jobs": [{**item, "trial": j.spec.trial.name, "instance_type": j.spec.trial.instance_type,
                  "instance_count": j.spec.trial.instance_count, "epochs": j.spec.trial.epochs,
                  "format": j.spec.dataset.format} for item, j in zip(items, jobs)],
    }
    clients["s3"].put_object(Bucket=bucket, Key=f"{base}/plan.json", Body=json.dumps(plan_document, indent=2).encode(),
                             ContentType="application/json")
    return {
        "experiment": experiment.name,
        "experiment_hash": experiment.content_hash,
        "bucket": bucket,
        "plan_key": f"{base}/plan.json",
        "lanes": deal_into_lanes(items, experiment.max_concurrency),
        "job_count": len(items),
        "modes": {mode: sum(1 for j in jobs if j.spec.mode == mode) for mode in experiment.modes},
        "max_concurrency": experiment.max_concurrency,
        "efs_include": "|".join(f"/{p}" for p in efs_prefixes),
        "teardown_fsx": experiment.teardown_fsx,
        "fsx_available": fsx is not None,
    }


def deal_into_lanes(items: list[dict[str, Any]], lanes: int) -> list[list[dict[str, Any]]]:
    """Round-robin: at most ``lanes`` jobs run at once, the experiment's order kept within each lane."""
    count = max(1, min(lanes, len(items)))
    return [items[i::count] for i in range(count)]


def flatten_outcomes(lanes: list[Any]) -> dict[int, dict[str, Any]]:
    """The Map's per-lane outcome lists, by job index."""
    out: dict[int, dict[str, Any]] = {}
    for lane in lanes or []:
        for outcome in (lane if isinstance(lane, list) else [lane]):
            if isinstance(outcome, dict) and "index" in outcome:
                out[int(outcome["index"])] = outcome
    return out


def _script_metrics(s3, describe: dict[str, Any]) -> dict[str, Any] | None:
    """metrics.json from the job's output.tar.gz, where the script wrote it."""
    output = describe.get("OutputDataConfig", {}).get("S3OutputPath", "").rstrip("/")
    if not output.startswith("s3://"):
        return None
    bucket, _, prefix = output[5:].partition("/")
    key = f"{prefix}/{describe['TrainingJobName']}/output/output.tar.gz".lstrip("/")
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
            member = tar.extractfile("metrics.json")
            return json.loads(member.read()) if member else None
    except Exception:
        return None


def _json_default(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def collect(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    clients = _clients()
    s3, sagemaker = clients["s3"], clients["sagemaker"]
    summary_plan = event["plan"]
    bucket = summary_plan["bucket"]
    plan_document = json.loads(s3.get_object(Bucket=bucket, Key=summary_plan["plan_key"])["Body"].read())
    outcomes = flatten_outcomes(event.get("results") or [])
    prices = PriceTable.with_overrides(json.loads(os.environ["DSLAB_PRICES"]) if os.environ.get("DSLAB_PRICES") else None)
    records = []
    for job in plan_document["jobs"]:
        outcome = outcomes.get(int(job["index"]), {"status": "Failed", "reason": "the workflow returned no outcome for this job"})
        status = outcome.get("status")
        name = outcome.get("name") or job["name"]
        stats = plan_document["dataset_stats"].get(job["dataset"], {})
        if status == "Skipped":
            records.append(skipped_record(name, mode=job["mode"], dataset=job["dataset"], repeat=job["repeat"],
                                          instance_type=job["instance_type"], instance_count=job["instance_count"],
                                          reason=outcome.get("reason") or "skipped"))
            continue
        try:
            describe = sagemaker.describe_training_job(TrainingJobName=name)
        except Exception:
            # The job was never created (its request could not be loaded, or staging failed first).
            records.append(skipped_record(name, mode=job["mode"], dataset=job["dataset"], repeat=job["repeat"],
                                          instance_type=job["instance_type"], instance_count=job["instance_count"],
                                          reason=_reason(outcome), status="Failed"))
            continue
        describe.pop("ResponseMetadata", None)
        record = record_from_describe(
            describe, prices=prices, script_metrics=_script_metrics(s3, describe), mode=job["mode"],
            dataset=job["dataset"], repeat=job["repeat"], files=stats.get("files"), total_bytes=stats.get("bytes"),
            epochs=job.get("epochs"), fsx_capacity_gib=plan_document.get("fsx_capacity_gib", 1200))
        if record["status"] == "Failed" and not record["failure_reason"]:
            record["failure_reason"] = _reason(outcome)
        records.append(record)

    summary = summarise(records)
    base = summary_plan["plan_key"].rsplit("/", 1)[0]
    results = {
        "experiment": plan_document["experiment"],
        "backend": plan_document.get("backend", "aws"),
        "records": records,
        "execution": plan_document["execution"],
        "experiment_hash": plan_document["experiment_hash"],
        "code_version": plan_document["environment"].get("code_version"),
        "environment": plan_document["environment"],
        "prices": {"date": prices.date, "source": prices.source, "region": prices.data["region"]},
        "summary": summary,
    }
    s3.put_object(Bucket=bucket, Key=f"{base}/results.json",
                  Body=json.dumps(results, indent=2, default=_json_default).encode(), ContentType="application/json")
    s3.put_object(Bucket=bucket, Key=f"{base}/results.csv", Body=to_csv(records).encode(), ContentType="text/csv")
    summary["results_uri"] = f"s3://{bucket}/{base}/results.json"
    return summary


def _reason(outcome: dict[str, Any]) -> str:
    reason = outcome.get("reason") or outcome.get("error") or "failed"
    try:  # a .sync failure's Cause is the job's DescribeTrainingJob output as JSON
        parsed = json.loads(reason)
        if isinstance(parsed, dict):
            return parsed.get("FailureReason") or parsed.get("errorMessage") or reason
    except (TypeError, ValueError):
        pass
    return str(reason)


__all__ = ["plan", "collect", "ExperimentInvalid"]
