"""FSx costs only while it is used: the idle guard, and the state `dslab fsx status` shows.

Scratch 2 bills per provisioned GiB-hour whether or not a job reads it (1,200 GiB: about $0.23 an
hour, $168 a month). The guard runs on a schedule in the lab itself (an EventBridge rule, every 30
minutes) and deletes the FSx stack through CloudFormation when no execution of the workflow is
running and none has ended, nor has the stack changed, for ``idle_hours``. Deleting the stack (not
the file system) keeps CloudFormation truthful: `dslab fsx up` brings it back.

ListExecutions "is eventually consistent": an execution started in the last seconds may be missed.
Its FSx readiness step then finds FSx DELETING and skips its FSx jobs with that reason.
Standard library and boto3 clients only (it runs in the Lambda runtime).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..core.facts.storage import FSX_IDLE_GUARD_EVERY_MINUTES
from .fsx_data import as_utc

GUARD_SCHEDULE_MINUTES = FSX_IDLE_GUARD_EVERY_MINUTES   # the model's figure (what FSx left standing bills)


def describe_stack(cfn, name_or_id: str) -> dict[str, Any] | None:
    """DescribeStacks of one stack, None if there is none ("Stack with id X does not exist"; a
    deleted stack is visible only by its ID, as DELETE_COMPLETE)."""
    try:
        stacks = cfn.describe_stacks(StackName=name_or_id).get("Stacks", [])
    except cfn.exceptions.ClientError as err:
        if "does not exist" in str(err):
            return None
        raise
    return stacks[0] if stacks else None


def fsx_stack(cfn, stack_name: str) -> dict[str, Any] | None:
    """The FSx stack as it stands, or None when it does not exist."""
    stack = describe_stack(cfn, stack_name)
    return None if stack is None or stack["StackStatus"] == "DELETE_COMPLETE" else stack


def running_executions(sfn, state_machine_arn: str) -> list[str]:
    """Every RUNNING execution of the workflow: ListExecutions filtered by status, every page (a page
    holds 100 by default; one unfiltered page of the newest would miss an older execution still running,
    https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html)."""
    names: list[str] = []
    for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=state_machine_arn, statusFilter="RUNNING"):
        names += [e["name"] for e in page.get("executions", [])]
    return names


def last_execution_end(sfn, state_machine_arn: str) -> dt.datetime | None:
    """When the most recent of the newest executions ended (one page: the newest started, 100 of them)."""
    recent = sfn.list_executions(stateMachineArn=state_machine_arn, maxResults=100).get("executions", [])
    ends = [as_utc(e.get("stopDate")) for e in recent if e.get("stopDate")]
    return max(ends) if ends else None


def jobs_reading(sagemaker, file_system_id: str) -> list[str]:
    """InProgress training jobs (the workflow's or anyone's: an exported script's, the user's own) that
    read ``file_system_id``: ListTrainingJobs by status, then each job's InputDataConfig
    (its FileSystemDataSource names the file system; the summaries do not)."""
    if not file_system_id:
        return []
    found = []
    for page in sagemaker.get_paginator("list_training_jobs").paginate(StatusEquals="InProgress"):
        for summary in page.get("TrainingJobSummaries", []):
            described = sagemaker.describe_training_job(TrainingJobName=summary["TrainingJobName"])
            for channel in described.get("InputDataConfig", []):
                source = channel.get("DataSource", {}).get("FileSystemDataSource") or {}
                if source.get("FileSystemId") == file_system_id:
                    found.append(summary["TrainingJobName"])
                    break
    return found


def without_service_role(stack: dict[str, Any]) -> str:
    """Why DeleteStack must not be called here: a stack deployed without a service role is deleted with
    the caller's own permissions ("If you don't specify a value, AWS CloudFormation uses the role that was
    previously associated with the stack. If no role is available, AWS CloudFormation uses a temporary
    session that is generated from your user credentials", DeleteStack API reference). The guard's role
    may delete the stack but not the file system in it: the deletion would fail and FSx would go on billing."""
    if stack.get("RoleARN"):
        return ""
    return ("the FSx stack was deployed without a CloudFormation service role, so deleting it would use this "
            "function's own permissions, which cannot delete a file system (the stack would end DELETE_FAILED and "
            "FSx would go on billing): delete it with your credentials, `dslab fsx down`, and deploy it again with "
            "the CDK bootstrap's role (`make fsx-up`)")


def file_system_of(stack: dict[str, Any]) -> str:
    return next((o["OutputValue"] for o in stack.get("Outputs", []) if o.get("OutputKey") == "FsxFileSystemId"), "")


def idle_status(cfn, sfn, stack_name: str, state_machine_arn: str, idle_hours: float,
                now: dt.datetime | None = None) -> dict[str, Any]:
    """Whether FSx exists, since when, whether the workflow uses it, and when the guard would delete it."""
    now = now or dt.datetime.now(dt.timezone.utc)
    stack = fsx_stack(cfn, stack_name)
    if stack is None:
        return {"up": False, "stack": stack_name}
    created = as_utc(stack.get("CreationTime")) or now
    changed = as_utc(stack.get("LastUpdatedTime")) or created
    running, last_end = [], None
    if state_machine_arn:
        running = running_executions(sfn, state_machine_arn)
        last_end = last_execution_end(sfn, state_machine_arn)
    last_activity = max(t for t in (changed, last_end) if t is not None)
    deadline = None
    if idle_hours > 0 and not running:
        deadline = last_activity + dt.timedelta(hours=idle_hours)
    return {"up": True, "stack": stack_name, "stack_id": stack["StackId"], "stack_status": stack["StackStatus"],
            "file_system_id": file_system_of(stack), "service_role": stack.get("RoleARN"),
            "created": created.isoformat(), "age_hours": round((now - created).total_seconds() / 3600, 2),
            "running_executions": running, "last_activity": last_activity.isoformat(),
            "idle_hours": idle_hours, "deadline": deadline.isoformat() if deadline else None,
            "due": bool(deadline and now >= deadline)}


def guard(cfn, sfn, stack_name: str, state_machine_arn: str, idle_hours: float,
          now: dt.datetime | None = None, sagemaker=None) -> dict[str, Any]:
    """One round of the idle guard: delete the FSx stack if it is due, otherwise say why not."""
    status = idle_status(cfn, sfn, stack_name, state_machine_arn, idle_hours, now)
    if not status["up"]:
        return {**status, "action": "none", "why": "FSx is down"}
    if status["stack_status"].endswith("_IN_PROGRESS"):
        return {**status, "action": "none", "why": f"the FSx stack is {status['stack_status']}"}
    if status["running_executions"]:
        return {**status, "action": "kept", "why": f"execution {status['running_executions'][0]} is running"}
    if idle_hours <= 0:
        return {**status, "action": "kept", "why": "the idle guard is off (fsxIdleHours=0)"}
    if not status["due"]:
        return {**status, "action": "kept", "why": f"idle until {status['deadline']}"}
    readers = jobs_reading(sagemaker, status["file_system_id"]) if sagemaker is not None else []
    if readers:
        return {**status, "action": "kept", "why": f"training job {readers[0]} reads it (InProgress)"}
    refusal = without_service_role(fsx_stack(cfn, stack_name) or {})
    if refusal:
        return {**status, "action": "kept", "why": refusal}
    cfn.delete_stack(StackName=status["stack_id"])
    return {**status, "action": "deleted",
            "why": f"no workflow execution for {idle_hours:g} hours (since {status['last_activity']})"}
