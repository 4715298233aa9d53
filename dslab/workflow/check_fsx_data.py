"""CheckFsxData: one readiness check of the data the FSx jobs read (the rules: fsx_data.py)."""

from __future__ import annotations

import json
from typing import Any

from ..core.aws_errors import aws_error, explain, is_transient
from .common import function_clients, look_up_fsx
from .fsx_data import import_status, imports_to_start
from .runtime import environ as function_environ

ROLE = "the CheckFsxData function's role"


def fsx_data(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """One readiness check of the data the FSx jobs read (the state machine loops, bounded).

    An AWS error answers the check instead of failing the function: throttled or unavailable (botocore has retried
    it already), the check is not final and the next one looks again; any other, the check is final and its reason
    names the fix (the FSx jobs are skipped with it). Errors while starting the import of datasets uploaded while
    FSx was up (the first check only) are final too: waiting past them would let jobs read a half-imported dataset."""
    clients = function_clients()
    checks = int(event.get("checks") or 0) + 1
    summary = event["plan"]
    try:
        status = _check(clients, summary, checks)
    except clients["s3"].exceptions.ClientError as err:
        transient = is_transient(err)
        status = {"ready": False, "final": not transient,
                  "reason": f"FSx's readiness could not be checked: {explain(err, who=ROLE)}"
                            + ("; the next check looks again" if transient else "")}
    out = {"ready": status["ready"], "final": status["final"], "checks": checks,
           "reason": status["reason"][:500]}
    if not out["ready"] and not out["final"] and checks >= int(summary.get("fsx_wait_checks") or 1):
        out.update(final=True, reason=f"still not ready after {checks} checks: {out['reason']}"[:500])
    return out


def _check(clients, summary: dict[str, Any], checks: int) -> dict[str, Any]:
    document = json.loads(clients["s3"].get_object(Bucket=summary["bucket"], Key=summary["plan_key"])["Body"].read())
    paths = document["fsx_paths"]
    fsx, reason = look_up_fsx(clients, function_environ())
    if fsx is None:
        return {"ready": False, "final": True, "reason": reason}
    if checks == 1:   # datasets uploaded while FSx was up: import them now rather than "some time later"
        try:
            for s3_path in imports_to_start(clients["fsx"], fsx.file_system_id, document.get("fsx_datasets") or []):
                clients["fsx"].create_data_repository_task(
                    Type="IMPORT_METADATA_FROM_REPOSITORY", FileSystemId=fsx.file_system_id, Paths=[s3_path],
                    Report={"Enabled": False})
        except clients["fsx"].exceptions.ClientError as err:
            return {"ready": False, "final": True, "reason": "the import of the datasets uploaded while FSx was up "
                    f"could not be started: {explain(err, who=ROLE)}"}
    try:
        return import_status(clients["fsx"], fsx.file_system_id, paths)
    except clients["fsx"].exceptions.ClientError as err:
        if aws_error(err).code == "FileSystemNotFound":
            return {"ready": False, "final": True,
                    "reason": f"FSx file system {fsx.file_system_id} no longer exists: bring it back with `dslab fsx up`"}
        raise
