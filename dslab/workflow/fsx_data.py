"""Is the data FSx jobs read already in FSx? Shared by the workflow's readiness step and `dslab fsx status`.

A data repository association with ``BatchImportMetaDataOnCreate`` imports the S3 listing "after the
data repository association is created" (API_DataRepositoryAssociation), as a data repository task
of type IMPORT_METADATA_FROM_REPOSITORY; CloudFormation reports the stack complete before that task
ends. A job started earlier sees a partial directory and measures the wrong thing. So: FSx jobs
start only when the association is AVAILABLE and no import task covering their paths is still
PENDING/EXECUTING (DescribeDataRepositoryTasks: "When the task is complete, TotalCount equals the
sum of SucceededCount plus FailedCount"). Neither FSx call can filter by task type or path, so both
filters are applied here. Standard library and boto3 clients only (it runs in the Lambda runtime).

Two kinds of path meet here. The jobs read file-system paths (``/datasets/<name>``); an import task's
``Paths`` are S3 paths: "For import tasks, the list contains paths in the Amazon S3 bucket from which POSIX
metadata changes are imported to the FSx for Lustre file system. The path can be an S3 bucket or prefix in
the format ``s3://bucket-name/prefix``" and "If a path that you provide isn't valid, the task fails"
(CreateDataRepositoryTask, Paths; botocore's FSx model). Each link to S3 (an association's FileSystemPath
and DataRepositoryPath, or the legacy ImportPath at the root) translates one into the other.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from botocore.exceptions import ClientError

IMPORT_TASK = "IMPORT_METADATA_FROM_REPOSITORY"
TASK_RUNNING = ("PENDING", "EXECUTING", "CANCELING")
LINK_WAIT = ("CREATING", "UPDATING")
LINK_BROKEN = ("MISCONFIGURED", "FAILED", "DELETING")
FS_BROKEN = ("DELETING", "FAILED", "MISCONFIGURED", "MISCONFIGURED_UNAVAILABLE")
# A new association's import task may not be listed at once; wait this long for it to appear.
IMPORT_APPEAR_GRACE = dt.timedelta(minutes=15)
# CreateDataRepositoryTask.Paths is a list of at most 100 ("max": 100 in botocore's FSx model; botocore's
# validator checks only minimums, so a longer list would reach FSx): more late datasets go in later tasks.
MAX_TASK_PATHS = 100
# Describe* "could not be found" answers to a filter that matches nothing mean "none": "No data repository
# associations were found based upon the supplied parameters" (DataRepositoryAssociationNotFound), "The data
# repository task or tasks you specified could not be found" (DataRepositoryTaskNotFound; botocore's FSx model).
NONE_FOUND = ("DataRepositoryAssociationNotFound", "DataRepositoryTaskNotFound")


def _norm(path: str) -> str:
    return "/" + path.strip("/")


def _covers(parent: str, child: str) -> bool:
    parent, child = _norm(parent), _norm(child)
    return parent == "/" or child == parent or child.startswith(parent + "/")


def _repository_links(system: dict[str, Any], associations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each link to S3 as ``{"fs", "s3", "created"}``: the associations, or the legacy ImportPath (root)."""
    links = [{"fs": _norm(a.get("FileSystemPath", "/")), "s3": a.get("DataRepositoryPath", ""),
              "created": as_utc(a.get("CreationTime"))} for a in associations]
    legacy = (system.get("LustreConfiguration") or {}).get("DataRepositoryConfiguration") or {}
    if not links and legacy.get("ImportPath"):
        links.append({"fs": "/", "s3": legacy["ImportPath"], "created": as_utc(system.get("CreationTime"))})
    return links


def _s3_parts(uri: str) -> tuple[str, str] | None:
    if not uri.startswith("s3://"):
        return None
    bucket, _, prefix = uri[5:].partition("/")
    return bucket, prefix.strip("/")


def to_s3_path(fs_path: str, links: list[dict[str, Any]]) -> str | None:
    """The S3 path an import task takes for a file-system path, through the link that covers it (the
    deepest), ending in "/" so that ``datasets/a`` does not also import ``datasets/ab``; None if no link covers it."""
    covering = sorted((l for l in links if _covers(l["fs"], fs_path) and _s3_parts(l["s3"])), key=lambda l: len(l["fs"]))
    if not covering:
        return None
    link = covering[-1]
    bucket, prefix = _s3_parts(link["s3"])
    relative = _norm(fs_path)[len(link["fs"].rstrip("/")):].strip("/")
    key = "/".join(p for p in (prefix, relative) if p)
    return f"s3://{bucket}/{key}/" if key else f"s3://{bucket}/"


def to_fs_path(task_path: str, links: list[dict[str, Any]]) -> str:
    """The file-system path an import task's S3 path lands on; "/" (covering everything, so that readiness
    errs on waiting) when no link maps it. A path that is not an S3 URI is taken as it is."""
    parts = _s3_parts(task_path)
    if parts is None:
        return _norm(task_path)
    bucket, key = parts
    for link in sorted(links, key=lambda l: -len(l["s3"])):
        link_parts = _s3_parts(link["s3"])
        if not link_parts or link_parts[0] != bucket:
            continue
        prefix = link_parts[1]
        if not prefix or key == prefix or key.startswith(prefix + "/"):
            relative = key[len(prefix):].strip("/")
            return _norm(f"{link['fs'].rstrip('/')}/{relative}") if relative else link["fs"]
    return "/"


def _task_covers(task: dict[str, Any], path: str, links: list[dict[str, Any]], *, whole: bool = False) -> bool:
    """Does the import task touch the file-system ``path`` (its paths cover it or lie under it)? With
    ``whole``, only a task that imports all of it counts. A task without paths imports everything."""
    paths = [to_fs_path(p, links) for p in task.get("Paths") or []]
    return not paths or any(_covers(p, path) or (not whole and _covers(path, p)) for p in paths)


def _pages(call, key: str, **kwargs) -> list[dict[str, Any]]:
    items, token = [], None
    while True:
        try:
            response = call(**kwargs, **({"NextToken": token} if token else {}))
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in NONE_FOUND:
                return items
            raise
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
    repository = _repository_links(system, links)
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
        relevant = [t for t in imports if _task_covers(t, path, repository)]
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


def imports_to_start(fsx, file_system_id: str, datasets: list[dict[str, Any]],
                     tried_since: dt.datetime | None = None) -> list[str]:
    """The S3 paths to import for datasets written to S3 after their link was made, with no import since.

    An association imports new and changed objects on its own (AutoImportPolicy), "some time" after they
    arrive: no latency is documented. A job started meanwhile reads a partial directory. For a dataset
    uploaded while FSx was up (its stats file's ``written_at`` is later than the link's CreationTime), the
    readiness step starts an import task (CreateDataRepositoryTask, IMPORT_METADATA_FROM_REPOSITORY) of its
    S3 path (the link's DataRepositoryPath plus the dataset's place under it) and waits for it like the
    link's first import. An import since then that FAILED or was CANCELED before ``tried_since`` (the start
    of this run) does not count: this run starts another, so a failed import is retried rather than left for
    good; one that failed during this run counts (trying it again at every check would not help)."""
    systems = fsx.describe_file_systems(FileSystemIds=[file_system_id]).get("FileSystems", [])
    filters = [{"Name": "file-system-id", "Values": [file_system_id]}]
    associations = _pages(fsx.describe_data_repository_associations, "Associations", Filters=filters)
    links = _repository_links(systems[0] if systems else {}, associations)

    def counts(task: dict[str, Any]) -> bool:
        if task.get("Lifecycle") not in ("FAILED", "CANCELED"):
            return True
        # Strictly later: both times may be whole seconds, and a task from the run's first second is tried again.
        return tried_since is not None and (as_utc(task.get("CreationTime")) or _EARLIEST) > tried_since

    tasks = [t for t in _pages(fsx.describe_data_repository_tasks, "DataRepositoryTasks", Filters=filters)
             if t.get("Type") == IMPORT_TASK and counts(t)]
    wanted = []
    for dataset in datasets:
        path, written = dataset["path"], as_utc(dataset.get("written_at"))
        covering = [l for l in links if _covers(l["fs"], path)]
        target = to_s3_path(path, links)
        if written is None or not covering or target is None or target in wanted:
            continue
        linked = max(l["created"] or _EARLIEST for l in covering)
        if written <= linked:
            continue   # there before the link: its first import has it
        # An import made since the dataset was written, or since this run began (Plan read the dataset's stats
        # file, so it was there; this keeps the uploader's clock, which wrote written_at, out of it).
        since_written = min(written, tried_since) if tried_since else written
        since = [t for t in tasks if (as_utc(t.get("CreationTime")) or _EARLIEST) >= since_written
                 and _task_covers(t, path, links, whole=True)]
        if not since:
            wanted.append(target)
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
