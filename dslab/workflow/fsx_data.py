"""Is the data FSx jobs read already in FSx? Shared by the workflow's readiness step and `dslab fsx status`.

A data repository association with ``BatchImportMetaDataOnCreate`` imports the S3 listing "after the
data repository association is created" (API_DataRepositoryAssociation), as a data repository task
of type IMPORT_METADATA_FROM_REPOSITORY; CloudFormation reports the stack complete before that task
ends. A job started earlier sees a partial directory and measures the wrong thing. So: FSx jobs
start only when the association is AVAILABLE and no import task covering their paths is still
PENDING/EXECUTING (DescribeDataRepositoryTasks: "When the task is complete, TotalCount equals the
sum of SucceededCount plus FailedCount"). Neither FSx call can filter by task type or path, so both
filters are applied here. Standard library and boto3 clients only (it runs in the Lambda runtime).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

IMPORT_TASK = "IMPORT_METADATA_FROM_REPOSITORY"
TASK_RUNNING = ("PENDING", "EXECUTING", "CANCELING")
LINK_WAIT = ("CREATING", "UPDATING")
LINK_BROKEN = ("MISCONFIGURED", "FAILED", "DELETING")
FS_BROKEN = ("DELETING", "FAILED", "MISCONFIGURED", "MISCONFIGURED_UNAVAILABLE")
# A new association's import task may not be listed at once; wait this long for it to appear.
IMPORT_APPEAR_GRACE = dt.timedelta(minutes=15)


def _norm(path: str) -> str:
    return "/" + path.strip("/")


def _covers(parent: str, child: str) -> bool:
    parent, child = _norm(parent), _norm(child)
    return parent == "/" or child == parent or child.startswith(parent + "/")


def _pages(call, key: str, **kwargs) -> list[dict[str, Any]]:
    items, token = [], None
    while True:
        response = call(**kwargs, **({"NextToken": token} if token else {}))
        items.extend(response.get(key, []))
        token = response.get("NextToken")
        if not token:
            return items


def _result(ready: bool, final: bool, reason: str, **extra: Any) -> dict[str, Any]:
    return {"ready": ready, "final": final, "reason": reason, **extra}


def import_status(fsx, file_system_id: str, paths: list[str], now: dt.datetime | None = None) -> dict[str, Any]:
    """``{"ready", "final", "reason", "imports": [...]}`` for the file-system ``paths`` the jobs read.

    ``final`` means waiting cannot help (the link or the import failed, the file system is going).
    """
    now = now or dt.datetime.now(dt.timezone.utc)
    systems = fsx.describe_file_systems(FileSystemIds=[file_system_id]).get("FileSystems", [])
    if not systems:
        return _result(False, True, f"FSx file system {file_system_id} does not exist")
    system = systems[0]
    lifecycle = system.get("Lifecycle", "AVAILABLE")
    if lifecycle in FS_BROKEN:
        return _result(False, True, f"FSx file system {file_system_id} is {lifecycle}")
    if lifecycle not in ("AVAILABLE", "UPDATING"):
        return _result(False, False, f"FSx file system {file_system_id} is {lifecycle}")

    filters = [{"Name": "file-system-id", "Values": [file_system_id]}]
    links = _pages(fsx.describe_data_repository_associations, "Associations", Filters=filters)
    imports = [t for t in _pages(fsx.describe_data_repository_tasks, "DataRepositoryTasks", Filters=filters)
               if t.get("Type") == IMPORT_TASK]
    progress = [_task_view(t) for t in imports]
    if not links:
        legacy = (system.get("LustreConfiguration") or {}).get("DataRepositoryConfiguration")
        if not legacy:
            return _result(False, True, f"FSx file system {file_system_id} is not linked to S3")
        # The legacy ImportPath link imports while it is CREATING.
        state = legacy.get("Lifecycle", "AVAILABLE")
        if state in LINK_BROKEN:
            return _result(False, True, f"FSx's S3 link (ImportPath) is {state}", imports=progress)
        if state != "AVAILABLE":
            return _result(False, False, f"FSx's S3 link (ImportPath) is {state}: importing the S3 listing",
                           imports=progress)
    warnings: list[str] = []
    for path in paths:
        covering = [a for a in links if _covers(a.get("FileSystemPath", "/"), path)]
        if links and not covering:
            return _result(False, True, f"no data repository association of {file_system_id} covers {path}")
        for link in covering:
            state = link.get("Lifecycle", "AVAILABLE")
            if state in LINK_BROKEN:
                return _result(False, True, f"data repository association {link.get('AssociationId')} is {state}: "
                               f"{(link.get('FailureDetails') or {}).get('Message', 'see the FSx console')}",
                               imports=progress)
            if state in LINK_WAIT:
                return _result(False, False, f"data repository association {link.get('AssociationId')} is {state}",
                               imports=progress)
        relevant = [t for t in imports if not t.get("Paths") or any(_covers(p, path) or _covers(path, p)
                                                                    for p in t["Paths"])]
        running = [t for t in relevant if t.get("Lifecycle") in TASK_RUNNING]
        if running:
            task = running[0]
            view = _task_view(task)
            return _result(False, False, f"the S3 metadata import {task.get('TaskId')} is {task.get('Lifecycle')} "
                           f"({view['done']:,} of {view['total']:,} objects)", imports=progress)
        finished = sorted((t for t in relevant if t.get("Lifecycle") in ("SUCCEEDED", "FAILED", "CANCELED")),
                          key=lambda t: as_utc(t.get("EndTime") or t.get("CreationTime")) or _EARLIEST)
        if finished and finished[-1].get("Lifecycle") != "SUCCEEDED":
            task = finished[-1]
            view = _task_view(task)
            detail = (task.get("FailureDetails") or {}).get("Message", "see the FSx console")
            report = (task.get("Report") or {}).get("Path")
            if view["done"] - view["failed"] <= 0:
                return _result(False, True, f"the S3 metadata import {task.get('TaskId')} ended {task.get('Lifecycle')} "
                               f"and imported nothing: {detail}", imports=progress)
            # "When the task is complete, TotalCount equals the sum of SucceededCount plus FailedCount": some
            # objects failed, the others are there. Jobs run on what is imported; the results say what is not.
            warnings.append(f"the S3 metadata import {task.get('TaskId')} of {path} ended {task.get('Lifecycle')}: "
                            f"{view['failed']:,} of {view['total']:,} objects not imported ({detail}"
                            + (f"; report under {report}" if report else "") + "); the FSx jobs read the rest")
        batch = [a for a in covering if a.get("BatchImportMetaDataOnCreate")]
        young = [a for a in batch if a.get("CreationTime") and now - as_utc(a["CreationTime"]) < IMPORT_APPEAR_GRACE]
        if young and not relevant:
            return _result(False, False, "waiting for the S3 metadata import of the new association to start",
                           imports=progress)
    if warnings:
        return _result(True, False, "; ".join(warnings), imports=progress, partial=True)
    return _result(True, False, "the S3 listing is imported", imports=progress)


def imports_to_start(fsx, file_system_id: str, datasets: list[dict[str, Any]]) -> list[str]:
    """The dataset paths written to S3 after their association was made, with no import task since.

    An association imports new and changed objects on its own (AutoImportPolicy), "some time" after they
    arrive: no latency is documented. A job started meanwhile reads a partial directory. For a dataset
    uploaded while FSx was up (its stats file's ``written_at`` is later than the association's
    CreationTime), the readiness step starts an import task of its path (CreateDataRepositoryTask,
    IMPORT_METADATA_FROM_REPOSITORY) and waits for it like the association's first import."""
    filters = [{"Name": "file-system-id", "Values": [file_system_id]}]
    links = _pages(fsx.describe_data_repository_associations, "Associations", Filters=filters)
    tasks = [t for t in _pages(fsx.describe_data_repository_tasks, "DataRepositoryTasks", Filters=filters)
             if t.get("Type") == IMPORT_TASK]
    wanted = []
    for dataset in datasets:
        path, written = dataset["path"], as_utc(dataset.get("written_at"))
        covering = [a for a in links if _covers(a.get("FileSystemPath", "/"), path)]
        if written is None or not covering:
            continue
        linked = max(as_utc(a.get("CreationTime")) or _EARLIEST for a in covering)
        if written <= linked:
            continue   # there before the association: its first import has it
        since = [t for t in tasks if (as_utc(t.get("CreationTime")) or _EARLIEST) >= written
                 and (not t.get("Paths") or any(_covers(p, path) for p in t["Paths"]))]
        if not since:
            wanted.append(path)
    return wanted


def as_utc(value: Any) -> dt.datetime | None:
    """An AWS timestamp as boto3 or a JSON document gives it (datetime, epoch seconds, ISO text), in UTC."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc)
    if isinstance(value, str) and value:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


_EARLIEST = dt.datetime.min.replace(tzinfo=dt.timezone.utc)


def _task_view(task: dict[str, Any]) -> dict[str, Any]:
    status = task.get("Status") or {}
    total = int(status.get("TotalCount") or 0)
    done = int(status.get("SucceededCount") or 0) + int(status.get("FailedCount") or 0)
    return {"task": task.get("TaskId"), "lifecycle": task.get("Lifecycle"), "paths": task.get("Paths") or [],
            "done": done, "total": total, "failed": int(status.get("FailedCount") or 0)}
