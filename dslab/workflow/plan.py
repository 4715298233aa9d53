"""Plan: validate the experiment, size its datasets, check the training quotas, store every job's
CreateTrainingJob request, and deal the jobs into the Run map's lanes."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from ..core.facts.aws_errors import explain
from ..core.errors import ConfigError
from ..core.experiment import parse_experiment
from ..core.facts.limits import (EFS_SYNC_MAX_CHECKS, EXPRESS_LOCK_MAX_WAITS, EXPRESS_STAGING_MAX_INVOCATIONS,
                                 FSX_DATA_MAX_CHECKS, FSX_DATA_POLL_SECONDS)
from ..core.modes import EXPRESS
from ..core.quotas import SERVICE_CODE as QUOTA_SERVICE
from ..core.quotas import Quota, QuotaDecision, check_training_quotas
from ..core.requests import DATASETS_PREFIX, FS_DATASETS_PATH, KEEP_JOBS, RESULTS_PREFIX, stats_key
from ..core.answer.jobs import checked_jobs, max_runtimes
from ..core.facts.prices import PriceTable
from ..core.requests import plan as plan_jobs
from .common import (
    function_clients,
    is_missing,
    lab_environment_from_env,
    look_up_fsx,
    time_scale,
)
from .express_staging import wake_directory_bucket
from .runtime import environ as function_environ


# The Run map item's mode of a checkpoint job (plan.json keeps the record's mode): no data to wait for.
CHECKPOINT_ITEM_MODE = "Checkpoint"


class ExperimentInvalid(Exception):
    """The experiment cannot run; the state machine fails at Plan before any job is created."""


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
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        document = json.loads(body)
    except s3.exceptions.ClientError as err:
        if not is_missing(err):
            raise
        raise ExperimentInvalid(f"{where} has no stats file (s3://{bucket}/{key}): the workflow reads a dataset's "
                                f"file count and size from it instead of listing every object; {write_it}") from None
    except ValueError:
        raise ExperimentInvalid(f"s3://{bucket}/{key} is not JSON; {write_it}") from None
    files, size = document.get("files"), document.get("bytes")
    if not isinstance(files, int) or not isinstance(size, int) or files <= 0 or size < 0:
        raise ExperimentInvalid(f"s3://{bucket}/{key} has no valid 'files' and 'bytes'; {write_it}")
    # The file's SHA-256 names exactly which listing a Script job's lineage tags refer to.
    return {"files": files, "bytes": size, "stats_file": f"s3://{bucket}/{key}",
            "sha256": hashlib.sha256(body).hexdigest(), "written_at": document.get("written_at"), "written_by": document.get("written_by")}


def read_training_quotas(service_quotas) -> dict[str, Quota]:
    """SageMaker's quotas by name (read_quotas)."""
    return read_quotas(service_quotas, QUOTA_SERVICE)


def read_quotas(service_quotas, service_code: str) -> dict[str, Quota]:
    """A service's quotas by name: applied values over AWS defaults (ListServiceQuotas lists only quotas with an
    applied value, so both lists are read; ~10 requests of 100 quotas each for SageMaker)."""
    quotas: dict[str, Quota] = {}
    # Defaults first, then applied values over them (each paginator named as written: the fault matrix lists them).
    for paginator in (service_quotas.get_paginator("list_aws_default_service_quotas"),
                      service_quotas.get_paginator("list_service_quotas")):
        for page in paginator.paginate(ServiceCode=service_code, PaginationConfig={"PageSize": 100}):
            for q in page.get("Quotas", []):
                quotas[q["QuotaName"]] = Quota(q["QuotaName"], q.get("QuotaCode", "?"), float(q.get("Value", 0)))
    return quotas


PLAN_REASON_CHARS = 2000
ROLE = "the Plan function's role"


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
        return _plan_refused("PlanFailed", f"Plan could not finish: {explain(err, who=ROLE)}")


def _plan_refused(error: str, reason: str) -> dict[str, Any]:
    return {"plan": {"error": error, "failed": reason[:PLAN_REASON_CHARS]}, "lanes": []}


def _plan(event: dict[str, Any]) -> dict[str, Any]:
    env_vars = function_environ()
    clients = function_clients()
    execution = str(event.get("execution") or "manual")
    document, keep = _kept_jobs(event.get("experiment") or {})
    try:
        experiment = parse_experiment(document, source="experiment")
    except ConfigError as err:
        raise ExperimentInvalid(str(err)) from None
    try:
        fsx, fsx_reason = look_up_fsx(clients, env_vars)
    except clients["ssm"].exceptions.ClientError as err:   # the FSx jobs are skipped, saying why; the rest run
        fsx, fsx_reason = None, f"FSx could not be looked up: {explain(err, who=ROLE)}"
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
    lab = deployed_lab(clients, env_vars, fsx)
    try:
        # The answer's checks on the datasets as their stats files count them, on the lab as it stands: what cannot run
        # as planned is refused, as `dslab plan` refuses it; each job's MaxRuntimeInSeconds from its estimate.
        runtimes = max_runtimes(checked_jobs(experiment, PriceTable(), stats=stats, lab=lab))
        jobs = plan_jobs(experiment, env, execution, fsx_available=fsx is not None, dataset_stats=stats, keep=keep,
                         runtimes=runtimes)
    except ConfigError as err:
        raise ExperimentInvalid(f"experiment: {err}") from None

    try:
        quotas = read_training_quotas(clients["service-quotas"])
        decision = check_training_quotas(experiment, quotas, env.region)
    except ConfigError as err:
        raise ExperimentInvalid(f"experiment: {err}") from None
    except Exception as err:  # no permission or throttled: the run goes on, the plan says so
        decision = QuotaDecision(experiment.max_concurrency, [f"training quotas not checked ({explain(err, who=ROLE)})"])

    base = f"{RESULTS_PREFIX}/{execution}"
    items = []
    for job in jobs:
        # A checkpoint job waits for no data (EFS staging, FSx's import, Express staging): its own mode keeps the Run
        # map's choices from holding it back for another job's data.
        item: dict[str, Any] = {"index": job.spec.index, "name": job.name,
                                "mode": CHECKPOINT_ITEM_MODE if job.spec.target else job.spec.mode}
        if job.spec.trial.storage == EXPRESS and not job.spec.target:
            item["express"] = True  # waits for the Express staging (the Run map's choice reads it)
        if job.request is None:
            item["skip"] = True
        else:
            clients["s3"].put_object(Bucket=bucket, Key=request_key(base, job.name), Body=json.dumps(job.request).encode(),
                                     ContentType="application/json")
        items.append(item)
    data_jobs = [j for j in jobs if j.spec.target is None and j.request is not None]   # checkpoint jobs read no dataset
    efs_prefixes = sorted({j.spec.dataset.prefix for j in data_jobs if j.spec.mode == "EFS"})
    fsx_paths = sorted({f"{FS_DATASETS_PATH}/{j.spec.dataset.prefix}" for j in data_jobs if j.spec.mode == "FSx"})
    express_prefixes = sorted({j.spec.dataset.prefix for j in data_jobs if j.spec.trial.storage == EXPRESS})
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
        "lab": lab.to_dict(),
        # FSx rebalancing its storage after an increase, or changing its throughput tier, while this run reads it: its
        # FSx results are marked.
        "fsx_storage_optimization": storage_optimization(clients, fsx),
        "fsx_paths": fsx_paths,
        "efs_prefixes": efs_prefixes,   # the datasets this execution's EFS jobs read (another's Plan reads it)
        "fsx_datasets": [{"path": f"{FS_DATASETS_PATH}/{d.prefix}", "written_at": (stats.get(d.name) or {}).get("written_at")}
                         for d in experiment.datasets if f"{FS_DATASETS_PATH}/{d.prefix}" in fsx_paths],
        "dataset_stats": stats,
        "quotas": {"checked": decision.checked, "notes": decision.notes, "concurrency": decision.concurrency},
        "backend": env_vars.get("DSLAB_BACKEND", "aws"),
        "jobs": [{"index": j.spec.index, "name": j.name, "mode": j.spec.mode, "dataset": j.spec.dataset.name,
                  "repeat": j.spec.repeat, "trial": j.spec.trial.name, "storage": j.spec.storage,
                  **({"checkpoint_target": j.spec.target, "checkpoint_restore": j.spec.restore} if j.spec.target else {}),
                  "instance_type": j.spec.trial.instance_type,
                  "instance_count": j.spec.trial.instance_count, "epochs": j.spec.trial.epochs,
                  "format": j.spec.dataset.format, "kept": j.kept,
                  "skip_reason": (j.skip_reason if j.kept else fsx_reason or j.skip_reason) if j.request is None else None}
                 for j in jobs],
    }
    clients["s3"].put_object(Bucket=bucket, Key=f"{base}/plan.json", Body=json.dumps(plan_document, indent=2).encode(),
                             ContentType="application/json")
    # The EFS sync also names the datasets other running executions' EFS jobs read (efs_datasets_in_use says why),
    # looked for once this execution's own plan.json is stored, so two Plans at once find each other's.
    in_use = efs_datasets_in_use(clients, bucket, str(event.get("state_machine") or ""), execution) if efs_prefixes else {}
    if in_use:
        plan_document["efs_in_use"] = in_use
        clients["s3"].put_object(Bucket=bucket, Key=f"{base}/plan.json", Body=json.dumps(plan_document, indent=2).encode(),
                                 ContentType="application/json")
    efs_include = sorted(set(efs_prefixes).union(*in_use.values())) if efs_prefixes else []
    # What flows on through the state machine: small and bounded (see dslab/core/facts/limits.py).
    return {
        "plan": {
            "experiment": experiment.name,
            "bucket": bucket,
            "base": base,
            "plan_key": f"{base}/plan.json",
            "job_count": len(items),
            "max_concurrency": decision.concurrency,
            "efs_include": "|".join(f"/{p}" for p in efs_include),
            "fsx_jobs": sum(1 for j in data_jobs if j.spec.mode == "FSx"),   # jobs that wait for FSx's S3 import
            "express_datasets": len(express_prefixes),
            "express_wait_checks": EXPRESS_STAGING_MAX_INVOCATIONS,
            "express_max_waits": EXPRESS_LOCK_MAX_WAITS,
            **fsx_wait(experiment.fsx_import_wait_minutes),
            "efs_wait_checks": EFS_SYNC_MAX_CHECKS,
            "teardown_fsx": experiment.teardown_fsx,
            "fsx_available": fsx is not None,
        },
        "lanes": deal_into_lanes(items, decision.concurrency, {j.spec.index for j in jobs if j.spec.restore}),
    }


def storage_optimization(clients, fsx) -> dict[str, Any] | None:
    """FSx optimizing while this run reads it, which the run's FSx results are marked with (the workflow does not wait
    hours for it): the storage optimization after a capacity increase ("you might see decreased file system
    performance", managing-storage-capacity.html), or a throughput-tier change not yet COMPLETED ("Your read operations
    will see disk I/O performance between the previous level and the new level until your file system is no longer in
    this state", monitoring-throughput-capacity-changes.html). Its action type, status and progress (a tier change:
    the tier asked). None where neither runs, FSx is down or cannot be described."""
    from ..core.deploy_guard import storage_optimizing, tier_updating
    if fsx is None:
        return None
    try:
        (described,) = clients["fsx"].describe_file_systems(FileSystemIds=[fsx.file_system_id])["FileSystems"]
    except Exception:  # noqa: BLE001 - not described (deployed_lab says which lab it priced): nothing to mark
        return None
    actions = described.get("AdministrativeActions") or []
    found = storage_optimizing(actions) or tier_updating(actions)
    if found is None:
        return None
    since = found.get("RequestTime")
    out = {"file_system": fsx.file_system_id, "action": found.get("AdministrativeActionType"),
           "status": found.get("Status"), "progress_percent": found.get("ProgressPercent"),
           "since": since.isoformat() if hasattr(since, "isoformat") else since}
    lustre = (found.get("TargetFileSystemValues") or {}).get("LustreConfiguration") or {}
    tier = lustre.get("PerUnitStorageThroughput")
    if tier is not None:
        out["target_mbps_per_tib"] = tier
    return out


def deployed_lab(clients, env_vars: dict[str, str], fsx) -> Any:
    """The lab this run ran on, which its report prices: FSx as DescribeFileSystems gives it while it is up (a later
    `make fsx-up CONTEXT=...` may have changed it), else as the workflow's stack was deployed; EFS's throughput and
    performance modes and the idle guard's hours from the same settings."""
    from ..core.model.provisioning import as_deployed, lab_from_settings
    settings = {"fsxDeploymentType": env_vars.get("DSLAB_FSX_DEPLOYMENT_TYPE"), "fsxCapacity": env_vars.get("DSLAB_FSX_CAPACITY_GIB"),
                "efsThroughput": env_vars.get("DSLAB_EFS_THROUGHPUT_MODE"),
                "efsPerformance": env_vars.get("DSLAB_EFS_PERFORMANCE_MODE"),
                "fsxIdleHours": env_vars.get("DSLAB_FSX_IDLE_HOURS")}
    settings["region"] = env_vars.get("AWS_REGION")   # EFS's per-file-system limits are the Region's
    if settings["fsxDeploymentType"] == "PERSISTENT_2":
        settings["fsxThroughputPerTiB"] = env_vars.get("DSLAB_FSX_MBPS_PER_TIB")
    if settings["efsThroughput"] == "provisioned":
        settings["efsProvisionedMibps"] = env_vars.get("DSLAB_EFS_THROUGHPUT_MIBPS")
    source = "the workflow's deploy settings"
    if fsx is not None:
        try:
            (described,) = clients["fsx"].describe_file_systems(FileSystemIds=[fsx.file_system_id])["FileSystems"]
            lustre = described.get("LustreConfiguration") or {}
            settings.update(fsxDeploymentType=lustre.get("DeploymentType"), fsxCapacity=described.get("StorageCapacity"),
                            fsxThroughputPerTiB=lustre.get("PerUnitStorageThroughput"))
            source = f"FSx {fsx.file_system_id} as described"
        except Exception:  # noqa: BLE001 - not described: the deploy settings stand
            pass
    try:
        lab = lab_from_settings(settings.get, source)
    except ConfigError:   # a type the lab does not build: priced as the default lab, and said so
        lab = as_deployed(int(env_vars.get("DSLAB_FSX_CAPACITY_GIB") or 1200))
    if env_vars.get("DSLAB_FSX_IDLE_HOURS") in (None, ""):   # a stack deployed before it said: unknown
        return replace(lab, fsx_idle_hours=None)
    return lab


PEER_PLAN_WAIT_SECONDS = 60   # at most, for a running execution that is still planning to store its plan.json
PEER_PLAN_POLL_SECONDS = 2


def efs_datasets_in_use(clients, bucket: str, state_machine: str, own_execution: str,
                        wait_seconds: float = PEER_PLAN_WAIT_SECONDS,
                        still_planning: list[str] | None = None) -> dict[str, list[str]]:
    """Per other RUNNING execution of the workflow whose EFS jobs may still run, the datasets (prefixes under
    datasets/) they read: what this execution's EFS sync must name as well.

    The sync runs PreserveDeletedFiles=REMOVE with one include filter per dataset. Whether REMOVE deletes only
    within the include filters is not written anywhere: the filtering guide says "DataSync scans and transfers
    only files and folders that match the include filters", and API_Options that with TransferMode ALL "DataSync
    doesn't scan your destination location and doesn't know what to delete", so deletions follow the scan, which
    the filters limit; that is an inference. Were REMOVE to delete every destination file absent from the filtered
    source, a sync naming only this execution's datasets would delete the ones another execution's EFS jobs are
    reading. Naming them too costs a scan (TransferMode CHANGED copies nothing already there) under either reading.

    An execution has EFS jobs that may run while it is RUNNING, its plan.json lists them (efs_prefixes; before
    that field, its EFS jobs with requests) and its results.json (Collect's, once every job ended) is absent.
    One still planning (no plan.json yet) is waited for, up to ``wait_seconds``: this Plan stores its own
    plan.json first, so two Plans at once each find the other's. ListExecutions "is eventually consistent" (as
    teardown_blocker notes): an execution started in the same seconds as this one can be missed; if its sync then
    ran before this one's, only the second reading would make this sync delete its datasets, which its jobs
    would then not find. ``still_planning`` collects the running executions left out because they had stored no
    plan.json within the wait (`dslab efs empty` does not wait, and refuses while one plans)."""
    if not state_machine:
        return {}
    import time

    s3 = clients["s3"]

    def running() -> set[str]:
        pages = clients["stepfunctions"].get_paginator("list_executions").paginate(stateMachineArn=state_machine,
                                                                                   statusFilter="RUNNING")
        return {e["name"] for page in pages for e in page.get("executions", [])} - {own_execution}

    found: dict[str, list[str]] = {}
    deadline = time.monotonic() + wait_seconds * time_scale()
    for name in sorted(running()):
        document = None
        while document is None:
            try:
                document = json.loads(s3.get_object(Bucket=bucket, Key=f"{RESULTS_PREFIX}/{name}/plan.json")["Body"].read())
            except s3.exceptions.ClientError as err:
                if not is_missing(err):
                    raise
                # Still planning; past the wait (or no longer running: refused by its Plan) it is left out.
                if time.monotonic() >= deadline or name not in running():
                    break
                time.sleep(PEER_PLAN_POLL_SECONDS * time_scale())
        if not isinstance(document, dict):
            if still_planning is not None and document is None:
                still_planning.append(name)
            continue
        try:
            s3.head_object(Bucket=bucket, Key=f"{RESULTS_PREFIX}/{name}/results.json")
            continue   # Collect ran: its jobs have all ended
        except s3.exceptions.ClientError as err:
            if not is_missing(err):
                raise
        prefixes = _efs_prefixes_of(document)
        if prefixes:
            found[name] = prefixes
    return found


def _efs_prefixes_of(plan_document: dict[str, Any]) -> list[str]:
    """The datasets an execution's EFS jobs read, from its plan.json."""
    if isinstance(plan_document.get("efs_prefixes"), list):
        return sorted(str(p) for p in plan_document["efs_prefixes"])
    names = {j.get("dataset") for j in plan_document.get("jobs") or [] if j.get("mode") == "EFS" and not j.get("skip_reason")}
    try:
        experiment = parse_experiment(_kept_jobs(plan_document.get("experiment") or {})[0], source="experiment")
    except (ConfigError, ExperimentInvalid):
        return []
    return sorted({d.prefix for d in experiment.datasets if d.name in names})


def _kept_jobs(document: Any) -> tuple[Any, frozenset[str]]:
    """The experiment without the input's ``keep_jobs`` (the names an earlier attempt of this execution
    finished, which `dslab local` sends when it resumes), and those names. The experiment, and its hash,
    are the same with or without them."""
    if not isinstance(document, dict) or KEEP_JOBS not in document:
        return document, frozenset()
    document = dict(document)
    keep = document.pop(KEEP_JOBS)
    if not isinstance(keep, list) or not all(isinstance(name, str) for name in keep):
        raise ExperimentInvalid(f"{KEEP_JOBS}: a list of job names of this execution, not {type(keep).__name__}")
    return document, frozenset(keep)


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


def deal_into_lanes(items: list[dict[str, Any]], lanes: int, following: set[int] | frozenset[int] = frozenset()
                    ) -> list[list[dict[str, Any]]]:
    """Round-robin: at most ``lanes`` jobs run at once, the experiment's order kept within each lane. An item whose
    index is in ``following`` (a sync target's restore job) goes into the lane of the item before it, right after
    it: a lane runs its jobs one after the other, so the restore starts once its writer has ended."""
    groups: list[list[dict[str, Any]]] = []
    for item in items:
        if groups and int(item["index"]) in following:
            groups[-1].append(item)
        else:
            groups.append([item])
    count = max(1, min(lanes, len(groups)))
    return [[item for group in groups[i::count] for item in group] for i in range(count)]
