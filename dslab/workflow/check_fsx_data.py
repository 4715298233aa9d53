"""CheckFsxData: one readiness check of the data the FSx jobs read (the rules: fsx_data.py)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from ..core.facts.aws_errors import explain, is_transient
from .common import function_clients, look_up_fsx
from .fsx_data import IMPORT_TASK, MAX_TASK_PATHS, as_utc, import_status, imports_to_start
from .runtime import environ as function_environ

WAIT, STOP = "wait", "stop"
# How the check reacts to each error FSx documents for the calls it makes (botocore's FSx model:
# CreateDataRepositoryTask, DescribeFileSystems, DescribeDataRepositoryAssociations, DescribeDataRepositoryTasks;
# the Describe* "not found" answers to a filter mean "none", fsx_data.NONE_FOUND). WAIT: this check is not
# ready and the next one tries again (the loop is bounded: fsx_wait_checks). STOP: waiting cannot help, so the
# FSx jobs are skipped with the reason, which names the fix. Any other error fails the check itself (the state
# machine's Catch, FsxCheckFailed, with the error in the execution history). Placeholders: {fs}, {operation},
# {code}, {message}, {limit}.
FSX_ERROR_REACTIONS: dict[str, tuple[str, str]] = {
    # "An existing data repository task is currently executing on the file system. Wait until the existing
    # task has completed, then create the new task." Another execution's import, the association's own, ours.
    "DataRepositoryTaskExecuting": (WAIT, "another data repository task is executing on {fs} (FSx runs one at a "
                                          "time): the import starts at a later check"),
    # "A generic error indicating a server-side failure."
    "InternalServerError": (WAIT, "FSx failed on its side ({operation}: {message}): trying again at the next check"),
    # "The error returned when a second request is received with the same client request token but different
    # parameters settings." Each check's request carries a token of its own (botocore fills it in).
    "IncompatibleParameterError": (WAIT, "FSx took {operation} for a repeat of another request ({message}): "
                                         "trying again, with a token of its own, at the next check"),
    # "No Amazon FSx file systems were found based upon supplied parameters."
    "FileSystemNotFound": (STOP, "FSx file system {fs} no longer exists ({message}): bring FSx back with "
                                 "`dslab fsx up`, then run again"),
    # "A generic error indicating a failure with a client request." E.g. "A CreateDataRepositoryTask
    # operation will fail if a data repository is not linked to the FSx file system."
    "BadRequest": (STOP, "FSx refused {operation} on {fs} ({message}): `dslab fsx status` shows the file system "
                         "and its S3 link; fix what FSx names (or `dslab fsx down` and `dslab fsx up` for a fresh "
                         "one), then run again"),
    # "The requested operation is not supported for this resource or API."
    "UnsupportedOperation": (STOP, "FSx does not support {operation} on {fs} ({message}): imports need a Lustre "
                                   "2.12 or 2.15 file system linked to S3, as the FSx stack makes it (`dslab fsx up`)"),
    # "An error indicating that a particular service limit was exceeded. You can increase some service limits
    # by contacting Amazon Web Services Support."
    "ServiceLimitExceeded": (STOP, "FSx refused {operation} on {fs}: its limit {limit} is reached ({message}); "
                                   "ask AWS Support to raise it, then run again"),
}


def fsx_data(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """One readiness check of the data the FSx jobs read (the state machine loops, bounded)."""
    return check(function_clients(), function_environ(), event)


ROLE = "the CheckFsxData function's role"


def check(clients, environ: dict[str, str], event: dict[str, Any]) -> dict[str, Any]:
    """``{"ready", "final", "checks", "reason"}``: the jobs' data imported, or why not and whether waiting helps.

    Datasets uploaded while FSx was up are imported at every check until their import starts: one task
    takes them all (up to MAX_TASK_PATHS), and while another task executes FSx refuses a new one, so the
    check waits for the next. An AWS error FSX_ERROR_REACTIONS does not name (S3's for plan.json, SSM's, a
    throttled or refused call of any service) answers the check too: throttled or unavailable (botocore has retried
    it already), the check is not final and the next one tries again; any other is final, its reason naming the fix
    (dslab/core/facts/aws_errors.py; the fault matrix lists every pair)."""
    checks = int(event.get("checks") or 0) + 1
    summary = event["plan"]
    try:
        status = _status(clients, environ, summary)
    except ClientError as err:
        transient = is_transient(err)
        status = {"ready": False, "final": not transient,
                  "reason": f"FSx's readiness could not be checked: {explain(err, who=ROLE)}"
                            + ("; the next check tries again" if transient else "")}
    out = {"ready": status["ready"], "final": status["final"], "checks": checks, "reason": status["reason"][:500]}
    if not out["ready"] and not out["final"] and checks >= int(summary.get("fsx_wait_checks") or 1):
        out.update(final=True, reason=f"still not ready after {checks} checks: {out['reason']}"[:500])
    return out


def _status(clients, environ: dict[str, str], summary: dict[str, Any]) -> dict[str, Any]:
    plan = clients["s3"].get_object(Bucket=summary["bucket"], Key=summary["plan_key"])
    document = json.loads(plan["Body"].read())
    fsx, reason = look_up_fsx(clients, environ)
    if fsx is None:
        return {"ready": False, "final": True, "reason": reason}
    return _check_file_system(clients["fsx"], fsx.file_system_id, document, as_utc(plan.get("LastModified")))


def _check_file_system(fsx, file_system_id: str, document: dict[str, Any], run_started) -> dict[str, Any]:
    try:
        # The plan was written when this run started: an import that failed since is not tried again.
        waiting = imports_to_start(fsx, file_system_id, document.get("fsx_datasets") or [], tried_since=run_started)
    except ClientError as err:
        return _waited_or_stopped(err, file_system_id)
    why, stop, started = "", None, None
    if waiting:   # S3 paths of late datasets whose import has not started
        batch = waiting[:MAX_TASK_PATHS]
        try:
            started = fsx.create_data_repository_task(Type=IMPORT_TASK, FileSystemId=file_system_id, Paths=batch,
                                                      Report={"Enabled": False})["DataRepositoryTask"]
            waiting, why = waiting[len(batch):], f"an import task takes at most {MAX_TASK_PATHS} paths: the rest " \
                                                 f"start at a later check"
        except ClientError as err:
            kind, why = _reaction(err, file_system_id)
            stop = why if kind == STOP else None
    try:
        status = import_status(fsx, file_system_id, document["fsx_paths"])
    except ClientError as err:
        return _waited_or_stopped(err, file_system_id)
    if status["final"]:
        return status   # the file system or its link is gone or broken: that is the reason
    if stop:
        return {"ready": False, "final": True, "reason": f"the import of {_named(waiting)} could not start: {stop}"}
    if waiting:
        return {"ready": False, "final": False, "reason": f"the import of {_named(waiting)} waits: {why}"}
    if started and status["ready"]:   # a task just made may not be listed yet: never ready on the check that made it
        return {"ready": False, "final": False,
                "reason": f"the S3 metadata import {started.get('TaskId')} of {_named(batch)} has just started"}
    return status


def _waited_or_stopped(err: ClientError, file_system_id: str) -> dict[str, Any]:
    kind, why = _reaction(err, file_system_id)
    return {"ready": False, "final": kind == STOP, "reason": why}


def _reaction(err: ClientError, file_system_id: str) -> tuple[str, str]:
    """(WAIT or STOP, the reason) for an FSx error in FSX_ERROR_REACTIONS; any other is raised again."""
    error = err.response.get("Error", {})
    code = error.get("Code", "")
    if code not in FSX_ERROR_REACTIONS:
        raise err
    kind, text = FSX_ERROR_REACTIONS[code]
    return kind, text.format(fs=file_system_id, operation=err.operation_name, code=code,
                             message=error.get("Message") or code, limit=err.response.get("Limit", "?"))


def _named(paths: list[str]) -> str:
    shown = ", ".join(paths[:3])
    return f"{len(paths)} dataset(s) uploaded while FSx was up ({shown}{', ...' if len(paths) > 3 else ''})"
