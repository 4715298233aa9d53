"""CheckFsxData: one readiness check of the data the FSx jobs read (the rules: fsx_data.py)."""

from __future__ import annotations

import json
from typing import Any

from .common import function_clients, look_up_fsx
from .fsx_data import import_status, imports_to_start
from .runtime import environ as function_environ


def fsx_data(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """One readiness check of the data the FSx jobs read (the state machine loops, bounded)."""
    clients = function_clients()
    checks = int(event.get("checks") or 0) + 1
    summary = event["plan"]
    document = json.loads(clients["s3"].get_object(Bucket=summary["bucket"], Key=summary["plan_key"])["Body"].read())
    paths = document["fsx_paths"]
    fsx, reason = look_up_fsx(clients, function_environ())
    if fsx is None:
        status = {"ready": False, "final": True, "reason": reason}
    else:
        if checks == 1:   # datasets uploaded while FSx was up: import them now rather than "some time later"
            for s3_path in imports_to_start(clients["fsx"], fsx.file_system_id, document.get("fsx_datasets") or []):
                clients["fsx"].create_data_repository_task(
                    Type="IMPORT_METADATA_FROM_REPOSITORY", FileSystemId=fsx.file_system_id, Paths=[s3_path],
                    Report={"Enabled": False})
        status = import_status(clients["fsx"], fsx.file_system_id, paths)
    out = {"ready": status["ready"], "final": status["final"], "checks": checks,
           "reason": status["reason"][:500]}
    if not out["ready"] and not out["final"] and checks >= int(summary.get("fsx_wait_checks") or 1):
        out.update(final=True, reason=f"still not ready after {checks} checks: {out['reason']}"[:500])
    return out
