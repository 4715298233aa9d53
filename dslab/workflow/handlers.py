"""Lambda handlers of the benchmark workflow: Plan and Collect.

Thin adapters: all rules live in ``dslab.core``; these read the lab's settings from the function's
environment, talk to S3/SSM/FSx/SageMaker with boto3 (in the Lambda runtime), and shape the state
machine's data. Standard library and boto3 only.
"""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

from ..core.errors import ConfigError
from ..core.experiment import parse_experiment
from ..core.prices import PriceTable
from ..core.limits import (COPY_OBJECT_MAX_BYTES, EXPRESS_COPY_BYTES_PER_SECOND, EXPRESS_COPY_SECONDS,
                           EXPRESS_COPY_THREADS, EXPRESS_STAGING_BUDGET_SECONDS, EXPRESS_STAGING_MAX_INVOCATIONS,
                           EXPRESS_LOCK_MAX_WAITS, EXPRESS_STAGING_TIMEOUT_SECONDS, EXPRESS_WAKE_SECONDS,
                           EFS_SYNC_MAX_CHECKS, FSX_DATA_MAX_CHECKS, FSX_DATA_POLL_SECONDS,
                           TEARDOWN_MAX_CHECKS)
from ..core.modes import EXPRESS
from ..core.quotas import SERVICE_CODE as QUOTA_SERVICE, Quota, QuotaDecision, check_training_quotas
from ..core.requests import (DATASETS_PREFIX, FS_DATASETS_PATH, FSX_STACK, RESULTS_PREFIX, FileSystemRef, LabEnvironment,
                             plan as plan_jobs, stats_key)
from ..core.results import record_from_describe, skipped_record, summarise, to_csv
from . import fsx_guard
from .fsx_data import import_status, imports_to_start
from .fsx_guard import describe_stack
from .runtime import environ as function_environ

class ExperimentInvalid(Exception):
    """The experiment cannot run; the state machine fails at Plan before any job is created."""


class ResultsNotStored(Exception):
    """Results could not be written."""


SERVICES = ("s3", "ssm", "fsx", "sagemaker", "service-quotas", "cloudformation", "stepfunctions")


class _Clients(dict):
    """The function's clients, each made on first use (making one reads its service model from disk:
    tens of milliseconds each, and most invocations need one or two of the seven)."""

    def __init__(self, env: dict[str, str]):
        super().__init__()
        self.env = env

    def __missing__(self, name: str):
        import boto3
        endpoint = self.env.get("DSLAB_AWS_ENDPOINT")  # the local lab's stand-in; unset on AWS
        kwargs: dict[str, Any] = {"endpoint_url": endpoint} if endpoint else {}
        if self.env.get("AWS_ACCESS_KEY_ID"):  # what the Lambda runtime puts in the function's environment
            kwargs.update(aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=self.env.get("AWS_SECRET_ACCESS_KEY"),
                          aws_session_token=self.env.get("AWS_SESSION_TOKEN"))
        if name not in SERVICES:
            raise KeyError(name)
        key = (name, _region(self.env), kwargs.get("endpoint_url"), kwargs.get("aws_access_key_id"),
               kwargs.get("aws_session_token"))
        if key not in _CLIENT_CACHE:
            _CLIENT_CACHE[key] = boto3.client(name, region_name=_region(self.env), **kwargs)
        client = self[name] = _CLIENT_CACHE[key]
        return client


# Clients live as long as the execution environment, as AWS advises for Lambda ("initialize SDK clients
# ... outside of the function handler", https://docs.aws.amazon.com/lambda/latest/dg/best-practices.html);
# a new role session (other credentials) or endpoint gets its own.
_CLIENT_CACHE: dict[tuple, Any] = {}


def _clients() -> _Clients:
    return _Clients(function_environ())


def _region(environ) -> str:
    return environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def lab_environment_from_env(environ: dict[str, str], fsx: FileSystemRef | None) -> LabEnvironment:
    return LabEnvironment.from_dict({
        "bucket": environ.get("DSLAB_BUCKET"),
        "region": _region(environ),
        "role_arn": environ.get("DSLAB_ROLE_ARN"),
        "subnet_ids": environ.get("DSLAB_SUBNET_IDS", ""),
        "security_group_ids": environ.get("DSLAB_SECURITY_GROUP_IDS", ""),
        "image_uri": environ.get("DSLAB_IMAGE_URI"),
        "image_uri_cpu": environ.get("DSLAB_IMAGE_URI_CPU"),
        "image_uris": environ.get("DSLAB_IMAGE_URIS"),
        "code_uri": environ.get("DSLAB_CODE_URI"),
        "code_version": environ.get("DSLAB_CODE_VERSION"),
        "fsx": None if fsx is None else {"file_system_id": fsx.file_system_id, "mount_name": fsx.mount_name},
        "efs": {"file_system_id": environ.get("DSLAB_EFS_ID")} if environ.get("DSLAB_EFS_ID") else None,
        "express_bucket": environ.get("DSLAB_EXPRESS_BUCKET") or None,
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


def dataset_stats(s3, bucket: str, prefix: str) -> dict[str, Any]:
    """A dataset's file count and bytes in S3_REQUESTS_PER_DATASET requests, whatever its size.

    ListObjectsV2 returns at most 1,000 keys a request, so counting a 1.5-million-object prefix would
    take 1,500 requests inside Plan's Lambda timeout. Instead: one ListObjectsV2 with MaxKeys=1 (is
    the prefix empty?) and one GetObject of the stats file `dslab dataset upload` writes beside it.
    """
    where = f"s3://{bucket}/{DATASETS_PREFIX}/{prefix}/"
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{DATASETS_PREFIX}/{prefix}/", MaxKeys=1)
    if not listed.get("KeyCount") and not listed.get("Contents"):
        raise ExperimentInvalid(f"{where} is empty; upload it first (dslab dataset upload --src DIR --to {where}) "
                                "or fix its prefix")
    key = stats_key(f"{DATASETS_PREFIX}/{prefix}")
    write_it = (f"write it once with `dslab dataset stats {where} --write` (it lists the prefix from your machine), "
                "or upload with `dslab dataset upload`, which writes it")
    try:
        document = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except s3.exceptions.ClientError as err:
        if not _missing(err):
            raise
        raise ExperimentInvalid(f"{where} has no stats file (s3://{bucket}/{key}): the workflow reads a dataset's "
                                f"file count and size from it instead of listing every object; {write_it}") from None
    except ValueError:
        raise ExperimentInvalid(f"s3://{bucket}/{key} is not JSON; {write_it}") from None
    files, size = document.get("files"), document.get("bytes")
    if not isinstance(files, int) or not isinstance(size, int) or files <= 0 or size < 0:
        raise ExperimentInvalid(f"s3://{bucket}/{key} has no valid 'files' and 'bytes'; {write_it}")
    return {"files": files, "bytes": size, "stats_file": f"s3://{bucket}/{key}",
            "written_at": document.get("written_at"), "written_by": document.get("written_by")}


def _missing(err) -> bool:
    """A missing object: 404 NoSuchKey, or 403 where the caller may not list that prefix (S3 answers
    AccessDenied for a missing key to callers without s3:ListBucket on it)."""
    return err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "AccessDenied", "403", "NotFound")


def read_training_quotas(service_quotas) -> dict[str, Quota]:
    """SageMaker's quotas by name: applied values over AWS defaults (ListServiceQuotas lists only
    quotas with an applied value, so both lists are read; ~10 requests of 100 quotas each)."""
    quotas: dict[str, Quota] = {}
    for operation in ("list_aws_default_service_quotas", "list_service_quotas"):
        for page in service_quotas.get_paginator(operation).paginate(ServiceCode=QUOTA_SERVICE, PaginationConfig={"PageSize": 100}):
            for q in page.get("Quotas", []):
                quotas[q["QuotaName"]] = Quota(q["QuotaName"], q.get("QuotaCode", "?"), float(q.get("Value", 0)))
    return quotas


PLAN_REASON_CHARS = 2000
PLAN_WAKE_SECONDS = 120   # of Plan's 5 minutes, for an inactive directory bucket to answer (see wake_directory_bucket)


def plan(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Plan, answering every refusal in its result (never as a Lambda error, whose Cause is the runtime's
    JSON with a stack trace): {"plan": {"error", "failed"}, "lanes": []}, and the state machine fails the
    execution with that error name and reason. An invalid experiment is ExperimentInvalid; anything
    else that stops Plan (an S3 or Service Quotas error, say) is PlanFailed, with what it was."""
    try:
        return _plan(event)
    except ExperimentInvalid as err:
        return _plan_refused("ExperimentInvalid", str(err))
    except Exception as err:  # noqa: BLE001 - said in the execution's result; the trace goes to the function's log
        import traceback
        traceback.print_exc()
        return _plan_refused("PlanFailed", f"Plan could not finish: {type(err).__name__}: {err}")


def _plan_refused(error: str, reason: str) -> dict[str, Any]:
    return {"plan": {"error": error, "failed": reason[:PLAN_REASON_CHARS]}, "lanes": []}


def _plan(event: dict[str, Any]) -> dict[str, Any]:
    env_vars = function_environ()
    clients = _clients()
    execution = str(event.get("execution") or "manual")
    try:
        experiment = parse_experiment(event.get("experiment") or {}, source="experiment")
    except ConfigError as err:
        raise ExperimentInvalid(str(err)) from None
    fsx, fsx_reason = look_up_fsx(clients, env_vars)
    try:
        env = lab_environment_from_env(env_vars, fsx)
    except ConfigError as err:
        raise ExperimentInvalid(str(err)) from None
    bucket = env.bucket

    stats: dict[str, dict[str, Any]] = {}
    # A dataset only Express jobs read may have been uploaded straight into the directory bucket.
    standard_users = {d.name for t in experiment.trials if t.storage != EXPRESS for d in t.datasets}
    for dataset in experiment.datasets:
        if dataset.source != "s3":
            continue
        try:
            stats[dataset.name] = dataset_stats(clients["s3"], bucket, dataset.prefix)
        except ExperimentInvalid as err:
            if dataset.name in standard_users or not env.express_bucket:
                raise ExperimentInvalid(f"experiment: dataset '{dataset.name}': {err}") from None
            try:
                import time
                wake_directory_bucket(clients["s3"], env.express_bucket, time.monotonic() + PLAN_WAKE_SECONDS * time_scale())
                stats[dataset.name] = dataset_stats(clients["s3"], env.express_bucket, dataset.prefix)
            except ExperimentInvalid:
                raise ExperimentInvalid(f"experiment: dataset '{dataset.name}': {err}") from None
    try:
        jobs = plan_jobs(experiment, env, execution, fsx_available=fsx is not None)
    except ConfigError as err:
        raise ExperimentInvalid(f"experiment: {err}") from None

    try:
        quotas = read_training_quotas(clients["service-quotas"])
        decision = check_training_quotas(experiment, quotas, env.region)
    except ConfigError as err:
        raise ExperimentInvalid(f"experiment: {err}") from None
    except Exception as err:  # no permission or throttled: the run goes on, the plan says so
        decision = QuotaDecision(experiment.max_concurrency, [f"training quotas not checked ({type(err).__name__}: {err})"])

    base = f"{RESULTS_PREFIX}/{execution}"
    items = []
    for job in jobs:
        item: dict[str, Any] = {"index": job.spec.index, "name": job.name, "mode": job.spec.mode}
        if job.spec.trial.storage == EXPRESS:
            item["express"] = True  # waits for the Express staging (the Run map's choice reads it)
        if job.request is None:
            item["skip"] = True
        else:
            clients["s3"].put_object(Bucket=bucket, Key=request_key(base, job.name), Body=json.dumps(job.request).encode(),
                                     ContentType="application/json")
        items.append(item)
    efs_prefixes = sorted({j.spec.dataset.prefix for j in jobs if j.spec.mode == "EFS" and j.request is not None})
    fsx_paths = sorted({f"{FS_DATASETS_PATH}/{j.spec.dataset.prefix}" for j in jobs
                        if j.spec.mode == "FSx" and j.request is not None})
    express_prefixes = sorted({j.spec.dataset.prefix for j in jobs if j.spec.trial.storage == EXPRESS and j.request is not None})
    plan_document = {
        "express_prefixes": express_prefixes,
        "express_bucket": env.express_bucket,
        "execution": execution,
        "experiment": experiment.document,
        "experiment_hash": experiment.content_hash,
        "environment": env.to_dict(),
        "fsx_available": fsx is not None,
        "fsx_reason": fsx_reason,
        "fsx_capacity_gib": int(env_vars.get("DSLAB_FSX_CAPACITY_GIB") or 1200),
        "fsx_paths": fsx_paths,
        "fsx_datasets": [{"path": f"{FS_DATASETS_PATH}/{d.prefix}", "written_at": (stats.get(d.name) or {}).get("written_at")}
                         for d in experiment.datasets if f"{FS_DATASETS_PATH}/{d.prefix}" in fsx_paths],
        "dataset_stats": stats,
        "quotas": {"checked": decision.checked, "notes": decision.notes, "concurrency": decision.concurrency},
        "backend": env_vars.get("DSLAB_BACKEND", "aws"),
        "jobs": [{"index": j.spec.index, "name": j.name, "mode": j.spec.mode, "dataset": j.spec.dataset.name,
                  "repeat": j.spec.repeat, "trial": j.spec.trial.name, "storage": j.spec.trial.storage,
                  "instance_type": j.spec.trial.instance_type,
                  "instance_count": j.spec.trial.instance_count, "epochs": j.spec.trial.epochs,
                  "format": j.spec.dataset.format, "skip_reason": (fsx_reason or j.skip_reason) if j.request is None else None}
                 for j in jobs],
    }
    clients["s3"].put_object(Bucket=bucket, Key=f"{base}/plan.json", Body=json.dumps(plan_document, indent=2).encode(),
                             ContentType="application/json")
    # What flows on through the state machine: small and bounded (see dslab/core/limits.py).
    return {
        "plan": {
            "experiment": experiment.name,
            "bucket": bucket,
            "base": base,
            "plan_key": f"{base}/plan.json",
            "job_count": len(items),
            "max_concurrency": decision.concurrency,
            "efs_include": "|".join(f"/{p}" for p in efs_prefixes),
            "fsx_jobs": sum(1 for j in jobs if j.spec.mode == "FSx" and j.request is not None),
            "express_datasets": len(express_prefixes),
            "express_wait_checks": EXPRESS_STAGING_MAX_INVOCATIONS,
            "express_max_waits": EXPRESS_LOCK_MAX_WAITS,
            **fsx_wait(experiment.fsx_import_wait_minutes),
            "efs_wait_checks": EFS_SYNC_MAX_CHECKS,
            "teardown_fsx": experiment.teardown_fsx,
            "fsx_available": fsx is not None,
        },
        "lanes": deal_into_lanes(items, decision.concurrency),
    }


def fsx_wait(minutes: int) -> dict[str, int]:
    """How often FSx readiness is checked: every FSX_DATA_POLL_SECONDS, but never more than
    FSX_DATA_MAX_CHECKS times (each check costs history events): a longer wait spaces them out."""
    seconds = max(minutes * 60, FSX_DATA_POLL_SECONDS)
    checks = max(1, min(FSX_DATA_MAX_CHECKS, seconds // FSX_DATA_POLL_SECONDS))
    return {"fsx_wait_checks": checks, "fsx_poll_seconds": max(FSX_DATA_POLL_SECONDS, -(-seconds // checks))}


def request_key(base: str, job_name: str) -> str:
    """Where Plan stores a job's request; the state machine builds the same key with States.Format."""
    return f"{base}/requests/{job_name}.json"


def failure_key(base: str, job_name: str) -> str:
    """Where the state machine stores a failed attempt's full Cause (never carried in the state)."""
    return f"{base}/failures/{job_name}.txt"


def fsx_data(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """One readiness check of the data the FSx jobs read (the state machine loops, bounded)."""
    clients = _clients()
    checks = int(event.get("checks") or 0) + 1
    summary = event["plan"]
    document = json.loads(clients["s3"].get_object(Bucket=summary["bucket"], Key=summary["plan_key"])["Body"].read())
    paths = document["fsx_paths"]
    fsx, reason = look_up_fsx(clients, function_environ())
    if fsx is None:
        status = {"ready": False, "final": True, "reason": reason}
    else:
        if checks == 1:   # datasets uploaded while FSx was up: import them now rather than "some time later"
            for path in imports_to_start(clients["fsx"], fsx.file_system_id, document.get("fsx_datasets") or []):
                clients["fsx"].create_data_repository_task(
                    Type="IMPORT_METADATA_FROM_REPOSITORY", FileSystemId=fsx.file_system_id, Paths=[path],
                    Report={"Enabled": False})
        status = import_status(clients["fsx"], fsx.file_system_id, paths)
    out = {"ready": status["ready"], "final": status["final"], "checks": checks,
           "reason": status["reason"][:500]}
    if not out["ready"] and not out["final"] and checks >= int(summary.get("fsx_wait_checks") or 1):
        out.update(final=True, reason=f"still not ready after {checks} checks: {out['reason']}"[:500])
    return out


def express_client(s3_or_none=None):
    """The S3 client staging uses: a connection for each of its copy threads (botocore keeps 10 by
    default and discards the rest: "Connection pool is full, discarding connection"), and the standard
    retry mode (exponential backoff with jitter on 500/503 and throttling)."""
    if s3_or_none is not None:
        return s3_or_none
    import boto3
    from botocore.config import Config
    env = function_environ()
    endpoint = env.get("DSLAB_AWS_ENDPOINT")
    kwargs: dict[str, Any] = {"endpoint_url": endpoint} if endpoint else {}
    if env.get("AWS_ACCESS_KEY_ID"):
        kwargs.update(aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
                      aws_session_token=env.get("AWS_SESSION_TOKEN"))
    config = Config(max_pool_connections=EXPRESS_COPY_THREADS + 4, retries={"mode": "standard", "max_attempts": 8})
    return boto3.client("s3", region_name=_region(env), config=config, **kwargs)


def time_scale() -> float:
    """1 on AWS; the embedded stand-in compresses time (its Wait states, its clients' retries) and says
    by how much, so the functions' own waits (below) are compressed alike."""
    return float(function_environ().get("DSLAB_TIME_SCALE") or 1.0)


def wake_directory_bucket(s3, bucket: str, deadline: float) -> None:
    """A directory bucket with no requests for 90 days is inactive and answers 503 until it is active
    again, "typically within a few minutes" (S3 User Guide, directory buckets overview): keep asking,
    backing off, until it answers or ``deadline`` (monotonic) passes; then the last error stands."""
    import time
    base = time_scale()
    wait = base
    while True:
        try:
            s3.list_objects_v2(Bucket=bucket, Prefix=f"{DATASETS_PREFIX}/", MaxKeys=1)
            return
        except s3.exceptions.ClientError as err:
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status != 503 or time.monotonic() + wait > deadline:
                raise
        time.sleep(wait)
        wait = min(wait * 2, 30 * base)


def stage_express(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Copy the datasets the Express jobs read from the data bucket into the directory bucket.

    One invocation copies until its time budget is spent and returns a cursor (the state machine
    loops, bounded). A dataset is skipped when the directory bucket already holds its stats file
    with the same files and bytes as the source's: the marker is written only after every object
    of the prefix was copied, so a half-copied dataset is never taken for a staged one.

    Mechanism: CopyObject from the general purpose bucket into the directory bucket, which AWS
    supports ("You can copy individual objects between general purpose buckets and directory
    buckets", CopyObject API reference); DataSync documents no directory-bucket location and
    `aws s3 sync` refuses directory buckets, and S3 Batch Operations would add a manifest, a job role
    and a report bucket for the same CopyObject calls. Listing is of the *source* bucket (lexicographic,
    any prefix), so the directory bucket's listing rules never matter here.

    Bounded in time: the budget is checked before each batch of EXPRESS_COPY_THREADS copies (not per
    1,000-key page), and a batch is not started when its largest object might not finish before the
    budget; the cursor names the listing page and how many of its objects are done, so a new
    invocation goes on exactly there. Serialized per dataset: a lock object in the directory bucket
    (a conditional PUT, If-None-Match) names the execution staging it; another execution waits for it
    (the state machine's Wait) instead of clearing its copies.
    """
    import time
    from concurrent.futures import ThreadPoolExecutor
    s3 = express_client()
    started = time.monotonic()
    env = function_environ()
    budget = float(env.get("DSLAB_STAGING_BUDGET_SECONDS") or EXPRESS_STAGING_BUDGET_SECONDS)
    summary = event["plan"]
    execution = str(event.get("execution") or "manual")
    cursor = dict(event.get("cursor") or {})
    invocations = int(cursor.get("invocations") or 0) + 1
    document = json.loads(s3.get_object(Bucket=summary["bucket"], Key=summary["plan_key"])["Body"].read())
    source, target = summary["bucket"], document.get("express_bucket")
    prefixes: list[str] = document.get("express_prefixes") or []
    stats_by_prefix = {d["prefix"]: document["dataset_stats"][d["name"]]
                       for t in document["experiment"]["trials"] for d in t["datasets"]
                       if d["name"] in document["dataset_stats"]}
    index, token, skip = int(cursor.get("index") or 0), cursor.get("token"), int(cursor.get("skip") or 0)
    copied, skipped = int(cursor.get("copied") or 0), int(cursor.get("skipped") or 0)
    removed = int(cursor.get("removed") or 0)  # stale objects of an earlier staging, deleted first
    waits = int(cursor.get("waits") or 0)
    copied_now = 0
    if not target:
        return {"done": True, "ready": False, "wait": False, "invocations": invocations, "cursor": {},
                "reason": "the lab has no S3 Express One Zone bucket (deployed with -c express=false)"}
    wake_directory_bucket(s3, target, started + min(budget, EXPRESS_WAKE_SECONDS * time_scale()))

    def hand_on(reason: str, *, wait: bool = False) -> dict[str, Any]:
        # A waiting invocation copied nothing: it counts as a wait, not against the copying invocations.
        spent = invocations - 1 if wait else invocations
        return {"done": False, "ready": False, "wait": wait, "invocations": spent,
                "cursor": {"index": index, "token": token, "skip": skip, "copied": copied, "skipped": skipped,
                           "removed": removed, "invocations": spent, "waits": waits + (1 if wait else 0)},
                "reason": reason}

    def copy(key: str, size: int) -> None:
        if size > COPY_OBJECT_MAX_BYTES:  # multipart UploadPartCopy above CopyObject's 5 GB (no tags are copied)
            s3.copy({"Bucket": source, "Key": key}, target, key)
        else:
            # A directory bucket takes only the empty tag-set, and CopyObject's default is to copy the
            # source's tags (501 Not Implemented when it has any): REPLACE them with none.
            s3.copy_object(Bucket=target, Key=key, CopySource={"Bucket": source, "Key": key}, TaggingDirective="REPLACE")

    def time_left() -> float:
        return budget - (time.monotonic() - started)

    with ThreadPoolExecutor(EXPRESS_COPY_THREADS) as pool:
        while index < len(prefixes):
            prefix = prefixes[index]
            expected = stats_by_prefix.get(prefix, {})
            marker = stats_key(f"{DATASETS_PREFIX}/{prefix}")
            holder = take_staging_lock(s3, target, prefix, execution, stale_after=2 * EXPRESS_STAGING_TIMEOUT_SECONDS)
            if holder is not None:
                return hand_on(f"waiting: execution {holder} is staging {prefix}", wait=True)
            if token is None and skip == 0:
                if _same_stats(s3, target, marker, expected):
                    release_staging_lock(s3, target, prefix, execution)
                    skipped += 1
                    index += 1
                    continue
                # A dataset staged from another version of the source: start from an empty prefix, so no
                # object the source no longer has is left for the jobs to read.
                removed += _clear_prefix(s3, target, f"{DATASETS_PREFIX}/{prefix}/", marker)
            while True:
                kwargs = {"Bucket": source, "Prefix": f"{DATASETS_PREFIX}/{prefix}/", "MaxKeys": 1000}
                if token:
                    kwargs["ContinuationToken"] = token
                page = s3.list_objects_v2(**kwargs)
                objects = [(o["Key"], int(o["Size"])) for o in page.get("Contents", [])]
                while skip < len(objects):
                    batch = objects[skip:skip + EXPRESS_COPY_THREADS]
                    needs = EXPRESS_COPY_SECONDS + max(size for _, size in batch) / EXPRESS_COPY_BYTES_PER_SECOND
                    if copied_now and needs > time_left():   # each invocation copies at least one batch
                        return hand_on(f"copied {copied:,} objects so far")
                    list(pool.map(lambda o: copy(*o), batch))
                    copied += len(batch)
                    copied_now += len(batch)
                    skip += len(batch)
                next_token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
                if next_token is None:
                    token, skip = None, 0
                    break
                token, skip = next_token, 0
            s3.put_object(Bucket=target, Key=marker, Body=json.dumps({**{k: expected.get(k) for k in ("files", "bytes")},
                                                                      "staged_from": f"s3://{source}/{DATASETS_PREFIX}/{prefix}/"}).encode(),
                          ContentType="application/json")
            release_staging_lock(s3, target, prefix, execution)
            index += 1
            if index < len(prefixes) and time_left() <= 0:
                return hand_on(f"copied {copied:,} objects so far")
    return {"done": True, "ready": True, "wait": False, "invocations": invocations, "cursor": {},
            "reason": f"{len(prefixes)} datasets in s3://{target}/: {copied:,} objects copied, {skipped} already there"
                      + (f", {removed:,} stale objects removed first" if removed else "")}


def _lock_key(prefix: str) -> str:
    return f"{DATASETS_PREFIX}/{prefix}.staging-lock.json"


def take_staging_lock(s3, bucket: str, prefix: str, execution: str, stale_after: float) -> str | None:
    """Hold the dataset's staging lock for ``execution``: None when it is ours (taken now or earlier),
    else the execution that holds it. A lock older than ``stale_after`` seconds (its holder died
    mid-copy) is taken over. Conditional writes (If-None-Match: "*") make taking it atomic
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html)."""
    import time
    key = _lock_key(prefix)
    body = json.dumps({"execution": execution, "taken_at": time.time()}).encode()
    for _ in range(3):
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*", ContentType="application/json")
            return None
        except s3.exceptions.ClientError as err:
            if err.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                raise
        try:
            held = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        except s3.exceptions.ClientError:
            continue  # released meanwhile: try again
        if held.get("execution") == execution:
            return None
        if time.time() - float(held.get("taken_at") or 0) > stale_after:
            s3.delete_object(Bucket=bucket, Key=key)
            continue
        return str(held.get("execution") or "another execution")
    return "another execution"


def release_staging_lock(s3, bucket: str, prefix: str, execution: str) -> None:
    key = _lock_key(prefix)
    try:
        held = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except s3.exceptions.ClientError:
        return
    if held.get("execution") == execution:
        s3.delete_object(Bucket=bucket, Key=key)


def _clear_prefix(s3, bucket: str, prefix: str, marker: str) -> int:
    """Delete the stats marker, then every object under ``prefix`` in the directory bucket (its
    ListObjectsV2 takes only prefixes ending in "/" and lists in no order: every page is deleted as read)."""
    s3.delete_object(Bucket=bucket, Key=marker)
    removed = 0
    while True:
        page = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1000)
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if not keys:
            return removed
        s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        removed += len(keys)


def _same_stats(s3, bucket: str, key: str, expected: dict[str, Any]) -> bool:
    """Is the dataset already staged: the directory bucket's stats file says the source's files and bytes."""
    try:
        staged = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except s3.exceptions.ClientError as err:
        if _missing(err):
            return False
        raise
    except ValueError:
        return False
    return bool(expected) and staged.get("files") == expected.get("files") and staged.get("bytes") == expected.get("bytes")


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


# Why a job has no training job of its own, by the code the state machine records.
OUTCOME_REASONS = {
    "EfsStagingFailed": "Copying the dataset from S3 to EFS (DataSync) failed; see the DataSync task's log group",
    "FsxDataNotReady": "FSx's S3 metadata import did not finish in time",
    "ExpressNotStaged": "Copying the dataset into the S3 Express One Zone bucket did not finish",
}


def collect(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    clients = _clients()
    s3, sagemaker = clients["s3"], clients["sagemaker"]
    summary_plan = event["plan"]
    bucket, base = summary_plan["bucket"], summary_plan["base"]
    plan_document = json.loads(s3.get_object(Bucket=bucket, Key=summary_plan["plan_key"])["Body"].read())
    outcomes = flatten_outcomes(event.get("results") or [])
    prepared = event.get("prepared") or {}
    fsx_reason = (prepared.get("fsx_data") or {}).get("reason")
    overrides = function_environ().get("DSLAB_PRICES")
    prices = PriceTable.with_overrides(json.loads(overrides) if overrides else None)
    records = []
    for job in plan_document["jobs"]:
        outcome = outcomes.get(int(job["index"]), {"status": "Failed", "error": "the workflow returned no outcome for this job"})
        status = outcome.get("status")
        name = outcome.get("name") or job["name"]
        stats = plan_document["dataset_stats"].get(job["dataset"], {})
        common = dict(mode=job["mode"], dataset=job["dataset"], repeat=job["repeat"],
                      instance_type=job["instance_type"], instance_count=job["instance_count"], trial=job.get("trial"),
                      storage=job.get("storage"))
        if status == "Skipped":
            reason = job.get("skip_reason") or "skipped"
            if outcome.get("error") == "FsxDataNotReady":
                reason = f"{OUTCOME_REASONS['FsxDataNotReady']}: {fsx_reason}" if fsx_reason else OUTCOME_REASONS["FsxDataNotReady"]
            elif outcome.get("error") == "ExpressNotStaged":
                express_reason = (prepared.get("express") or {}).get("reason")
                reason = f"{OUTCOME_REASONS['ExpressNotStaged']}: {express_reason}" if express_reason else OUTCOME_REASONS["ExpressNotStaged"]
            records.append(skipped_record(name, **common, reason=reason))
            continue
        try:
            describe = sagemaker.describe_training_job(TrainingJobName=name)
        except Exception:
            # The job was never created (its request could not be loaded, the API refused it, staging failed).
            records.append(skipped_record(name, **common, reason=_reason(s3, bucket, base, name, outcome), status="Failed"))
            continue
        describe.pop("ResponseMetadata", None)
        record = record_from_describe(
            describe, prices=prices, script_metrics=_script_metrics(s3, describe), mode=job["mode"],
            dataset=job["dataset"], repeat=job["repeat"], files=stats.get("files"), total_bytes=stats.get("bytes"),
            epochs=job.get("epochs"), fsx_capacity_gib=plan_document.get("fsx_capacity_gib", 1200), trial=job.get("trial"),
            storage=job.get("storage"))
        if record["status"] == "Failed" and not record["failure_reason"]:
            record["failure_reason"] = _reason(s3, bucket, base, name, outcome)
        records.append(record)

    summary = summarise(records)
    results = {
        "experiment": plan_document["experiment"],
        "backend": plan_document.get("backend", "aws"),
        "records": records,
        "execution": plan_document["execution"],
        "experiment_hash": plan_document["experiment_hash"],
        "code_version": plan_document["environment"].get("code_version"),
        "environment": plan_document["environment"],
        # What the report needs to rebuild the answer from this file alone: the price overrides the
        # run used, the datasets' files and bytes as found in S3, FSx's size.
        "prices": {"date": prices.date, "source": prices.source, "region": prices.data["region"],
                   "overrides": json.loads(overrides) if overrides else None},
        "dataset_stats": {name: {k: v for k, v in found.items() if k in ("files", "bytes")}
                          for name, found in plan_document["dataset_stats"].items()},
        "fsx_capacity_gib": plan_document.get("fsx_capacity_gib", 1200),
        "quotas": plan_document.get("quotas"),
        "staging": (prepared.get("staging") or {}).get("status") if isinstance(prepared.get("staging"), dict) else prepared.get("staging"),
        "express_staging": prepared.get("express"),
        "fsx_data": prepared.get("fsx_data"),
        "summary": summary,
    }
    _put_json(s3, bucket, f"{base}/results.json", results)
    s3.put_object(Bucket=bucket, Key=f"{base}/results.csv", Body=to_csv(records).encode(), ContentType="text/csv")
    summary["results_uri"] = f"s3://{bucket}/{base}/results.json"
    return summary


def _put_json(s3, bucket: str, key: str, document: Any) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(document, indent=2, default=_json_default).encode(),
                  ContentType="application/json")


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


# ---- teardown ------------------------------------------------------------------------------------

def teardown(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Delete the FSx stack and follow the deletion to its end (the state machine loops, bounded).

    ``{"action": "idle", "state_machine", "idle_hours"}``: one round of the scheduled idle guard
    (fsx_guard.py); every other action belongs to an execution's teardown:

    ``{"action": "start"}``: unless another running execution of this workflow still has FSx jobs
    to run, DeleteStack (asynchronous: "Once the call completes successfully, stack deletion starts").
    ``{"action": "check"}``: DescribeStacks by stack ID (a deleted stack is only visible by its ID)
    until DELETE_COMPLETE, DELETE_FAILED, or TEARDOWN_MAX_CHECKS checks. Final outcomes are
    written into the execution's results.json and teardown.json.
    """
    clients = _clients()
    cfn, s3 = clients["cloudformation"], clients["s3"]
    stack_name = function_environ().get("DSLAB_FSX_STACK", FSX_STACK)
    if event.get("action") == "idle":  # the scheduled idle guard, not an execution's teardown
        return fsx_guard.guard(cfn, clients["stepfunctions"], stack_name, event.get("state_machine", ""),
                               float(event.get("idle_hours") or 0), sagemaker=clients["sagemaker"])
    summary = event["plan"]
    bucket, base = summary["bucket"], summary["base"]
    previous = event.get("teardown") or {}
    checks = int(previous.get("checks") or 0)
    if event.get("action") == "start":
        blocker = teardown_blocker(clients, bucket, event.get("state_machine", ""), event.get("execution_arn", ""))
        if blocker:
            outcome = {"status": "DEFERRED", "final": True, "message": f"FSx kept: {blocker}. The last execution with FSx "
                       "jobs tears it down if it asks to; otherwise `dslab fsx down`"}
            return _record_teardown(s3, bucket, base, outcome)
        stack = describe_stack(cfn, stack_name)
        if stack is None or stack["StackStatus"] == "DELETE_COMPLETE":
            return _record_teardown(s3, bucket, base, {"status": "ALREADY_GONE", "final": True,
                                                       "message": f"{stack_name} does not exist: nothing to tear down"})
        readers = fsx_guard.jobs_reading(clients["sagemaker"], fsx_guard.file_system_of(stack))
        if readers:
            return _record_teardown(s3, bucket, base, {
                "status": "DEFERRED", "final": True,
                "message": f"FSx kept: training job {readers[0]} (InProgress) reads it; `dslab fsx down` once it ends"})
        refusal = fsx_guard.without_service_role(stack)
        if refusal:
            return _record_teardown(s3, bucket, base, {"status": "NO_SERVICE_ROLE", "final": True,
                                                       "message": f"FSx not torn down: {refusal}"})
        cfn.delete_stack(StackName=stack["StackId"])
        return {"status": "DELETE_IN_PROGRESS", "final": False, "stack_id": stack["StackId"], "checks": 0,
                "message": f"deleting {stack_name}"}
    stack = describe_stack(cfn, previous["stack_id"])
    checks += 1
    status = stack["StackStatus"] if stack else "DELETE_COMPLETE"
    if status == "DELETE_COMPLETE":
        outcome = {"status": "DELETE_COMPLETE", "final": True, "message": f"{stack_name} deleted: FSx no longer bills"}
    elif status == "DELETE_FAILED":
        outcome = {"status": "DELETE_FAILED", "final": True,
                   "message": f"{stack_name} is DELETE_FAILED ({(stack.get('StackStatusReason') or '')[:300]}): FSx may "
                              "still exist and bill; fix the cause and run `dslab fsx down`, or delete it in the console"}
    elif checks >= TEARDOWN_MAX_CHECKS:
        outcome = {"status": "TIMED_OUT", "final": True,
                   "message": f"{stack_name} is still {status} after {checks} checks: follow it with `dslab fsx status`"}
    else:
        return {**previous, "status": status, "final": False, "checks": checks, "message": f"{stack_name} is {status}"}
    return _record_teardown(s3, bucket, base, {**outcome, "stack_id": previous.get("stack_id"), "checks": checks})


def teardown_blocker(clients, bucket: str, state_machine: str, own_execution: str) -> str:
    """Why FSx must stay: another RUNNING execution of this workflow that still has FSx jobs to run.

    An execution has FSx jobs to run while its plan.json lists FSx jobs with requests and its
    results.json (written by Collect, after every job ended) does not exist yet. One that has not
    written plan.json is still planning, and may plan FSx jobs. ListExecutions "is eventually
    consistent": an execution started in the last seconds can be missed; its own FSx readiness step
    then finds FSx DELETING and skips its FSx jobs with that reason, so nothing runs on a vanishing FSx.
    """
    if not state_machine:
        return ""
    s3 = clients["s3"]
    pages = clients["stepfunctions"].get_paginator("list_executions").paginate(
        stateMachineArn=state_machine, statusFilter="RUNNING")
    for page in pages:
        for execution in page.get("executions", []):
            if execution["executionArn"] == own_execution:
                continue
            name = execution["name"]
            try:
                plan_document = json.loads(s3.get_object(Bucket=bucket, Key=f"{RESULTS_PREFIX}/{name}/plan.json")["Body"].read())
            except s3.exceptions.ClientError as err:
                if not _missing(err):
                    raise
                return f"execution {name} is still planning (it may run FSx jobs)"
            if not plan_document.get("fsx_paths"):
                continue
            try:
                s3.head_object(Bucket=bucket, Key=f"{RESULTS_PREFIX}/{name}/results.json")
            except s3.exceptions.ClientError:
                return f"execution {name} still has FSx jobs to run"
    return ""


def _record_teardown(s3, bucket: str, base: str, outcome: dict[str, Any]) -> dict[str, Any]:
    """The outcome goes into results.json (and teardown.json) as well as the execution's output."""
    _put_json(s3, bucket, f"{base}/teardown.json", outcome)
    try:
        results = json.loads(s3.get_object(Bucket=bucket, Key=f"{base}/results.json")["Body"].read())
        results["teardown"] = outcome
        _put_json(s3, bucket, f"{base}/results.json", results)
    except s3.exceptions.ClientError as err:
        if not _missing(err):
            raise
        # Collect could not store results; the execution fails with ResultsNotStored anyway
    return outcome


__all__ = ["plan", "fsx_data", "collect", "teardown", "ExperimentInvalid"]
