"""Teardown: delete the FSx stack unless another execution still needs it, and follow the deletion."""

from __future__ import annotations

import json
from typing import Any

from ..core.facts.aws_errors import explain, is_transient
from ..core.facts.limits import TEARDOWN_MAX_CHECKS
from ..core.requests import FSX_STACK, RESULTS_PREFIX
from . import fsx_guard
from .common import function_clients, is_missing, put_json
from .fsx_guard import describe_stack
from .runtime import environ as function_environ

ROLE = "the Teardown function's role"


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
    clients = function_clients()
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
    checks += 1
    try:
        stack = describe_stack(cfn, previous["stack_id"])
    except cfn.exceptions.ClientError as err:
        if not is_transient(err):
            raise
        # Throttled or unavailable (botocore has retried it already): this check counts, the next one looks again.
        stack, status = None, "UNKNOWN"
        said = f"{stack_name} could not be looked at ({explain(err, who=ROLE)}); the next check looks again"
    else:
        status = stack["StackStatus"] if stack else "DELETE_COMPLETE"
        said = f"{stack_name} is {status}"
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
        return {**previous, "status": status, "final": False, "checks": checks, "message": said}
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
                if not is_missing(err):
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
    put_json(s3, bucket, f"{base}/teardown.json", outcome)
    try:
        results = json.loads(s3.get_object(Bucket=bucket, Key=f"{base}/results.json")["Body"].read())
        results["teardown"] = outcome
        put_json(s3, bucket, f"{base}/results.json", results)
    except s3.exceptions.ClientError as err:
        if not is_missing(err):
            raise
        # Collect could not store results; the execution fails with ResultsNotStored anyway
    return outcome
