"""Is a dataset in FSx yet? The readiness rules (dslab/workflow/fsx_data.py) against FSx's own answers.

Import tasks name S3 paths, the jobs read file-system paths: CreateDataRepositoryTask.Paths (botocore's FSx
model) says "For import tasks, the list contains paths in the Amazon S3 bucket from which POSIX metadata
changes are imported to the FSx for Lustre file system. The path can be an S3 bucket or prefix in the format
s3://bucket-name/prefix", and "If a path that you provide isn't valid, the task fails." These tests are
written from that text: FSx answers as it would, a fake client stands in for it.
"""

from __future__ import annotations

import datetime as dt

from dslab.workflow.fsx_data import import_status, imports_to_start, to_fs_path, to_s3_path

FS_ID = "fs-0123456789abcdef0"
T0 = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.timezone.utc)


def association(**overrides):
    return {"AssociationId": "dra-1", "FileSystemId": FS_ID, "Lifecycle": "AVAILABLE", "FileSystemPath": "/datasets",
            "DataRepositoryPath": "s3://lab-bucket/datasets/", "BatchImportMetaDataOnCreate": True,
            "CreationTime": T0, **overrides}


def task(paths, lifecycle="SUCCEEDED", created=T0, total=10, done=None, failed=0):
    done = total if done is None else done
    return {"TaskId": f"task-{len(paths)}-{lifecycle}", "Type": "IMPORT_METADATA_FROM_REPOSITORY", "FileSystemId": FS_ID,
            "Paths": paths, "Lifecycle": lifecycle, "CreationTime": created,
            "Status": {"TotalCount": total, "SucceededCount": done - failed, "FailedCount": failed}}


class FakeFsx:
    """DescribeFileSystems / DescribeDataRepositoryAssociations / DescribeDataRepositoryTasks, one page each."""

    def __init__(self, associations=(), tasks=(), legacy_import_path=None):
        self.associations, self.tasks = list(associations), list(tasks)
        config = {"DataRepositoryConfiguration": {"ImportPath": legacy_import_path, "Lifecycle": "AVAILABLE"}} \
            if legacy_import_path else {}
        self.system = {"FileSystemId": FS_ID, "Lifecycle": "AVAILABLE", "CreationTime": T0, "LustreConfiguration": config}

    def describe_file_systems(self, FileSystemIds):
        return {"FileSystems": [self.system]}

    def describe_data_repository_associations(self, Filters):
        return {"Associations": self.associations}

    def describe_data_repository_tasks(self, Filters):
        return {"DataRepositoryTasks": self.tasks}


def late(name="late", minutes=30):
    return {"path": f"/datasets/{name}", "written_at": (T0 + dt.timedelta(minutes=minutes)).isoformat()}


def test_a_late_datasets_import_names_its_s3_path_under_the_associations_repository():
    fsx = FakeFsx([association()], [task(["s3://lab-bucket/datasets/"])])
    assert imports_to_start(fsx, FS_ID, [late(), {"path": "/datasets/early", "written_at": T0.isoformat()}]) == [
        "s3://lab-bucket/datasets/late/"]


def test_a_legacy_import_path_link_maps_the_root():
    fsx = FakeFsx([], [], legacy_import_path="s3://lab-bucket")
    assert imports_to_start(fsx, FS_ID, [late()]) == ["s3://lab-bucket/datasets/late/"]
    assert to_fs_path("s3://lab-bucket/datasets/late/", [{"fs": "/", "s3": "s3://lab-bucket", "created": T0}]) == "/datasets/late"


def test_readiness_waits_for_a_running_import_named_by_its_s3_path():
    """The readiness step must never call a dataset imported while an import that covers it is running."""
    running = task(["s3://lab-bucket/datasets/late/"], "EXECUTING", created=T0 + dt.timedelta(minutes=31), done=4)
    fsx = FakeFsx([association()], [task(["s3://lab-bucket/datasets/"]), running])
    status = import_status(fsx, FS_ID, ["/datasets/late"], now=T0 + dt.timedelta(hours=1))
    assert not status["ready"] and not status["final"] and "EXECUTING" in status["reason"], status
    # a running import of the whole repository covers the dataset too; one of another dataset does not
    fsx.tasks[1] = {**running, "Paths": ["s3://lab-bucket/datasets/"]}
    assert not import_status(fsx, FS_ID, ["/datasets/late"], now=T0 + dt.timedelta(hours=1))["ready"]
    fsx.tasks[1] = {**running, "Paths": ["s3://lab-bucket/datasets/other/"]}
    assert import_status(fsx, FS_ID, ["/datasets/late"], now=T0 + dt.timedelta(hours=1))["ready"]


def test_an_import_path_that_no_link_maps_is_taken_to_cover_everything():
    """Erring on waiting: an S3 path outside every link could be anything the file system imports."""
    running = task(["s3://elsewhere/x/"], "EXECUTING", done=1)
    fsx = FakeFsx([association()], [task(["s3://lab-bucket/datasets/"]), running])
    assert not import_status(fsx, FS_ID, ["/datasets/late"], now=T0 + dt.timedelta(hours=1))["ready"]


def test_a_failed_import_does_not_count_and_one_that_succeeded_does():
    """A FAILED import (an invalid path fails the task) is retried by the next run rather than left for good."""
    after = T0 + dt.timedelta(minutes=31)
    failed = task(["/datasets/late"], "FAILED", created=after, total=0)
    fsx = FakeFsx([association()], [task(["s3://lab-bucket/datasets/"]), failed])
    assert imports_to_start(fsx, FS_ID, [late()]) == ["s3://lab-bucket/datasets/late/"]
    fsx.tasks.append(task(["s3://lab-bucket/datasets/late/"], created=after))
    assert imports_to_start(fsx, FS_ID, [late()]) == []
    # an import of only part of the dataset does not import the dataset
    fsx.tasks[-1] = task(["s3://lab-bucket/datasets/late/sub/"], created=after)
    assert imports_to_start(fsx, FS_ID, [late()]) == ["s3://lab-bucket/datasets/late/"]


def test_paths_translate_both_ways_through_the_deepest_link():
    links = [{"fs": "/datasets", "s3": "s3://lab-bucket/datasets/", "created": T0},
             {"fs": "/datasets/big", "s3": "s3://big-bucket/shards", "created": T0}]
    assert to_s3_path("/datasets/a", links) == "s3://lab-bucket/datasets/a/"
    assert to_s3_path("/datasets/big/x", links) == "s3://big-bucket/shards/x/"
    assert to_s3_path("/datasets", links) == "s3://lab-bucket/datasets/"
    assert to_s3_path("/elsewhere", links) is None
    assert to_fs_path("s3://lab-bucket/datasets/a/", links) == "/datasets/a"
    assert to_fs_path("s3://big-bucket/shards/x", links) == "/datasets/big/x"
    assert to_fs_path("s3://lab-bucket/datasetsX/", links) == "/"        # not under the prefix: covers all
