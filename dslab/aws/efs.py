"""The lab's EFS file system seen from the operator's machine (``dslab efs empty``, ``dslab doctor``).

EFS is mounted inside the VPC: no AWS API lists or deletes its files. What the operator can do from outside:
- read what it holds: DescribeFileSystems' SizeInBytes, per storage class, which "represents actual size only
  if the file system is not modified for a period longer than a couple of hours"
  (https://docs.aws.amazon.com/efs/latest/ug/API_FileSystemSize.html), and its lifecycle policy;
- empty it through the lab's DataSync emptying task (stacks/components/efs_staging.py), which mounts EFS in the
  lab's subnet: StartTaskExecution, with one dataset's include filter or none, then DescribeTaskExecution
  until it ends. While the workflow's staging task runs, emptying waits: both write the same folders. While a
  running execution's EFS jobs may read EFS, it waits too: whether REMOVE deletes only within the include filter
  is not documented (efs_staging.py), so emptying one dataset might empty them all, theirs included.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from ..core.model import efs as efs_core
from ..core.errors import ConfigError
from ..core.requests import DATASETS_PREFIX, stats_key

# DescribeTask's Status while an execution of the task is under way (AVAILABLE | CREATING | QUEUED | RUNNING |
# UNAVAILABLE, https://docs.aws.amazon.com/datasync/latest/userguide/API_DescribeTask.html).
TASK_BUSY = ("QUEUED", "RUNNING")
EXECUTION_ENDED = ("SUCCESS", "ERROR")


def file_system_id(outputs: dict[str, str]) -> str:
    fs_id = outputs.get("EfsFileSystemId")
    if not fs_id:
        raise ConfigError("--outputs", "stack output EfsFileSystemId is missing: pass the lab's cdk-outputs.json "
                          "(make deploy writes it), or deploy the lab (`make deploy FSX=keep`)")
    return fs_id


def empty_task_arn(outputs: dict[str, str]) -> str:
    arn = outputs.get("EfsEmptyTaskArn")
    if not arn:
        raise ConfigError("--outputs", "stack output EfsEmptyTaskArn is missing: the lab was deployed before it could "
                          "empty EFS; deploy it again (`make deploy FSX=keep`), or pass the current cdk-outputs.json")
    return arn


def usage(efs, fs_id: str, prices) -> dict[str, Any]:
    """What the file system holds per storage class and costs per month, and its lifecycle policy."""
    described = efs.describe_file_systems(FileSystemId=fs_id)["FileSystems"][0]
    size = described.get("SizeInBytes") or {}
    policies = efs.describe_lifecycle_configuration(FileSystemId=fs_id).get("LifecyclePolicies", [])
    cost = efs_core.monthly_usd(size, prices)
    return {"file_system_id": fs_id, "throughput_mode": described.get("ThroughputMode"),
            "size_in_bytes": {k: v for k, v in size.items() if k != "Timestamp"},
            "lifecycle_policies": policies, "usd_per_month": round(cost["usd_per_month"], 2),
            "standard_usd_per_month": round(cost["standard_usd"], 2), "ia_usd_per_month": round(cost["ia_usd"], 2),
            "prices": prices.label()}


def usage_lines(state: dict[str, Any]) -> list[str]:
    size = state["size_in_bytes"]
    total, ia = size.get("Value", 0), size.get("ValueInIA", 0)
    standard = total - ia
    out = [f"EFS {state['file_system_id']} holds {total / 1e9:.2f} GB (Standard {standard / 1e9:.2f} GB, "
           f"Infrequent Access {ia / 1e9:.2f} GB): ${state['usd_per_month']:.2f} per month"]
    transitions = {k: v for policy in state["lifecycle_policies"] for k, v in policy.items()}
    if transitions.get("TransitionToIA"):
        back = " and back to Standard on first read" if transitions.get("TransitionToPrimaryStorageClass") else ""
        out.append(f"  lifecycle: files of 128 KiB or more move to Infrequent Access {transitions['TransitionToIA'].lower().replace('_', ' ')} "
                   f"unread{back}; smaller files always stay in Standard")
    else:
        out.append("  lifecycle: none (everything stays in Standard)")
    if total:
        out.append("  done with the staged datasets? `dslab efs empty --yes` (or --dataset NAME): they stay in S3, and "
                   "the workflow stages them again when an EFS job needs them")
    return out


def dataset_in_s3(s3, bucket: str, dataset: str) -> dict[str, int] | None:
    """The dataset's files and bytes from its stats file (EFS holds the same files), or None without one. Another
    AWS error is raised (the caller says the size is not known, and why)."""
    from botocore.exceptions import ClientError

    from ..workflow.common import is_missing
    try:
        document = json.loads(s3.get_object(Bucket=bucket, Key=stats_key(f"{DATASETS_PREFIX}/{dataset}"))["Body"].read())
    except ClientError as err:
        if not is_missing(err):
            raise
        return None   # no stats file: the size is then not known
    except ValueError:  # not JSON
        return None
    files, size = document.get("files"), document.get("bytes")
    return {"files": files, "bytes": size} if isinstance(files, int) and isinstance(size, int) else None


def running_staging(datasync, task_arns: list[str]) -> str | None:
    """An execution under way of one of these tasks (the workflow's staging, an earlier emptying), or None."""
    for arn in task_arns:
        described = datasync.describe_task(TaskArn=arn)
        if described.get("Status") in TASK_BUSY:
            return described.get("CurrentTaskExecutionArn") or arn
    return None


# Said beside `dslab efs empty --dataset`: what it deletes under the reading of REMOVE no document rules out.
UNSCOPED_CAVEAT = ("DataSync's documentation does not say whether REMOVE deletes only within the include filter: if it "
                   "does not, this empties every dataset in EFS (all stay in S3, and the workflow copies each again "
                   "when an EFS job needs it)")


def executions_reading_efs(s3, stepfunctions, bucket: str, state_machine: str) -> dict[str, list[str] | None]:
    """The running executions of the workflow whose EFS jobs may read EFS now: their datasets, or None for one still
    planning (it may plan EFS jobs). The workflow's own rule (plan.efs_datasets_in_use), without its wait."""
    from ..workflow.plan import efs_datasets_in_use
    planning: list[str] = []
    found: dict[str, list[str] | None] = dict(efs_datasets_in_use({"s3": s3, "stepfunctions": stepfunctions}, bucket,
                                                                  state_machine, "", wait_seconds=0,
                                                                  still_planning=planning))
    found.update({name: None for name in planning})
    return found


def reading_lines(readers: dict[str, list[str] | None], dataset: str | None) -> list[str]:
    """Why emptying waits for these executions, one line each."""
    out = []
    for name, datasets in sorted(readers.items()):
        if datasets is None:
            out.append(f"  execution {name} is still planning (it may stage datasets in EFS and read them)")
        elif dataset is None or dataset in datasets:
            out.append(f"  execution {name}'s EFS jobs read {', '.join(datasets)}")
        else:
            out.append(f"  execution {name}'s EFS jobs read {', '.join(datasets)}, which emptying {dataset} would delete "
                       "if REMOVE is not limited to the include filter (undocumented)")
    return out


def deleted_line(described: dict[str, Any], dataset: str | None, found: dict[str, int] | None) -> str | None:
    """What DataSync says it deleted (DescribeTaskExecution FilesDeleted: "The number of files, objects, and
    directories that DataSync actually deletes in your destination location"), beside the dataset's own count: more
    than that dataset holds shows REMOVE deleting outside the include filter. None where the count is not given."""
    deleted = described.get("FilesDeleted")
    if not isinstance(deleted, int):
        return None
    line = f"DataSync deleted {deleted:,} files and folders"
    if dataset and found:
        line += (f"; {dataset} has {found['files']:,} files (and its folders): far more means REMOVE deleted outside "
                 "the include filter, and the other datasets will be copied again from S3 when an EFS job needs them")
    return line


def start_empty(datasync, task_arn: str, dataset: str | None) -> str:
    """Starts the emptying task: one dataset's folder (its include filter, as the workflow names a dataset), or
    everything under EFS's datasets folder."""
    includes = {"Includes": [{"FilterType": "SIMPLE_PATTERN", "Value": f"/{dataset}"}]} if dataset else {}
    return datasync.start_task_execution(TaskArn=task_arn, **includes)["TaskExecutionArn"]


FAILED_LOOKS = 5   # throttled or unavailable looks in a row before following the execution is given up


def wait(datasync, execution_arn: str, *, poll: float, say: Callable[[str], None]) -> dict[str, Any]:
    """DescribeTaskExecution until the execution ends; each new status is said once. A throttled or unavailable look
    (botocore has retried it already) is tried again at the next one, FAILED_LOOKS in a row at most; then, and on any
    other error, the line names the execution to follow (the deletion goes on in DataSync)."""
    from botocore.exceptions import ClientError

    from ..core.facts.aws_errors import explain, is_transient
    seen = None
    failed = 0
    while True:
        try:
            described = datasync.describe_task_execution(TaskExecutionArn=execution_arn)
        except ClientError as err:
            failed += 1
            if not is_transient(err) or failed >= FAILED_LOOKS:
                raise ConfigError("DataSync", f"{explain(err, service='datasync')}; the deletion goes on in DataSync: follow it with `aws "
                                  f"datasync describe-task-execution --task-execution-arn {execution_arn}`") from None
            say(f"look failed ({explain(err, service='datasync')}); looking again in {poll:g} s")
            time.sleep(poll)
            continue
        failed = 0
        status = described.get("Status")
        if status != seen:
            say(status)
            seen = status
        if status in EXECUTION_ENDED:
            return described
        time.sleep(poll)
