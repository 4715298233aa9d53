"""Is the data the FSx jobs read in FSx yet (dslab/workflow/fsx_data.py)? What the readiness step and `dslab fsx status`
get back from FSx's answers: ready/final and the reason a user reads, each import task's view, the S3 paths of the
imports to start, the path translation between S3 and the file system, and the Describe* requests (filters, paging,
"not found" meaning none). FSx is a small recording fake, or a real botocore client under a Stubber where the request
and the paging matter. Expected values are written here."""

from __future__ import annotations

import datetime as dt

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from dslab.workflow.fsx_data import as_utc, import_status, imports_to_start, to_fs_path, to_s3_path

FS = "fs-0123456789abcdef0"
T0 = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.timezone.utc)
MIN = dt.timedelta(minutes=1)
LATER = T0 + 60 * MIN          # a check an hour after the link was made: the link is no longer young
FILTERS = [{"Name": "file-system-id", "Values": [FS]}]


def link(**fields):
    """An AVAILABLE association of /datasets with s3://lab-bucket/datasets, made at T0 with a batch import."""
    return {"AssociationId": "dra-0123456789abcdef1", "FileSystemId": FS, "Lifecycle": "AVAILABLE", "FileSystemPath": "/datasets",
            "DataRepositoryPath": "s3://lab-bucket/datasets", "BatchImportMetaDataOnCreate": True,
            "CreationTime": T0, **fields}


def imp(task_id, paths, lifecycle="SUCCEEDED", created=T0, *, total=10, succeeded=None, failed=0, **fields):
    """An import task (IMPORT_METADATA_FROM_REPOSITORY) with its Status counts."""
    succeeded = total - failed if succeeded is None else succeeded
    return {"TaskId": task_id, "Type": "IMPORT_METADATA_FROM_REPOSITORY", "FileSystemId": FS, "Paths": paths,
            "Lifecycle": lifecycle, "CreationTime": created,
            "Status": {"TotalCount": total, "SucceededCount": succeeded, "FailedCount": failed}, **fields}


def view(task_id, paths, lifecycle="SUCCEEDED", done=10, total=10, failed=0):
    return {"task": task_id, "lifecycle": lifecycle, "paths": paths, "done": done, "total": total, "failed": failed}


class Fsx:
    """DescribeFileSystems / DescribeDataRepositoryAssociations / DescribeDataRepositoryTasks, one page each; the
    requests are recorded as (operation, parameters)."""

    def __init__(self, associations=(), tasks=(), **system):
        self.associations, self.tasks, self.calls = list(associations), list(tasks), []
        self.system = {"FileSystemId": FS, "Lifecycle": "AVAILABLE", "CreationTime": T0,
                       "LustreConfiguration": {}, **system}

    def describe_file_systems(self, **params):
        self.calls.append(("DescribeFileSystems", params))
        return {"FileSystems": [self.system] if self.system is not None else []}

    def describe_data_repository_associations(self, **params):
        self.calls.append(("DescribeDataRepositoryAssociations", params))
        return {"Associations": self.associations}

    def describe_data_repository_tasks(self, **params):
        self.calls.append(("DescribeDataRepositoryTasks", params))
        return {"DataRepositoryTasks": self.tasks}


def legacy(import_path="s3://old-bucket/data", **config):
    """A file system linked by the legacy ImportPath (at the root), made at T0."""
    return {"LustreConfiguration": {"DataRepositoryConfiguration": {"ImportPath": import_path, **config}}}


def status(fsx, paths=("/datasets/a",), now=LATER):
    return import_status(fsx, FS, list(paths), now=now)


def real_fsx():
    return boto3.client("fsx", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")


# ---- as_utc: AWS timestamps as boto3 or JSON gives them ------------------------------------------------------------
def test_timestamps_of_every_form_are_read_in_utc():
    naive = as_utc(dt.datetime(2026, 12, 1, 8, 0))
    assert naive == T0 and naive.tzinfo is dt.timezone.utc
    plus_two = dt.timezone(dt.timedelta(hours=2))
    kept = as_utc(dt.datetime(2026, 12, 1, 10, 0, tzinfo=plus_two))
    assert kept.tzinfo is plus_two and kept == T0
    epoch = as_utc(0)
    assert epoch == dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) and epoch.tzinfo is dt.timezone.utc
    assert as_utc(1.5) == dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=dt.timezone.utc)
    assert as_utc("2026-12-01T08:00:00Z") == T0
    assert as_utc("2026-12-01T10:00:00+02:00") == T0


def test_no_timestamp_is_none():
    assert as_utc("") is None
    assert as_utc(None) is None
    assert as_utc(["2026-12-01"]) is None


# ---- the path translation ------------------------------------------------------------------------------------------
def test_a_file_system_path_imports_through_the_deepest_link_that_has_an_s3_path():
    deep_first = [{"fs": "/datasets/big", "s3": "s3://big-bucket/shards/", "created": T0},
                  {"fs": "/datasets", "s3": "s3://lab-bucket/data/sets", "created": T0},
                  {"fs": "/datasets/big/raw", "s3": "", "created": T0}]
    assert to_s3_path("/datasets/big/raw/x", deep_first) == "s3://big-bucket/shards/raw/x/"
    assert to_s3_path("/datasets/big/raw/x", list(reversed(deep_first))) == "s3://big-bucket/shards/raw/x/"
    assert to_s3_path("datasets/a/", deep_first) == "s3://lab-bucket/data/sets/a/"
    assert to_s3_path("/datasets/big", deep_first) == "s3://big-bucket/shards/"
    assert to_s3_path("/datasetsX/a", deep_first) is None
    assert to_s3_path("/datasets/big/raw", [{"fs": "/datasets/big/raw", "s3": "/mnt/raw", "created": T0}]) is None


def test_a_root_link_to_a_whole_bucket_imports_the_bucket_or_a_prefix_of_it():
    root = [{"fs": "/", "s3": "s3://lab-bucket", "created": T0}]
    assert to_s3_path("/", root) == "s3://lab-bucket/"
    assert to_s3_path("/datasets/a", root) == "s3://lab-bucket/datasets/a/"
    assert to_s3_path("/a", [{"fs": "/", "s3": "s3://lab-bucket/", "created": T0}]) == "s3://lab-bucket/a/"
    assert to_s3_path("/mnt/a", [{"fs": "/mnt/", "s3": "s3://b/p/", "created": T0}]) == "s3://b/p/a/"


def test_an_import_tasks_s3_path_lands_under_the_longest_matching_link_in_its_bucket():
    links = [{"fs": "/one", "s3": "s3://lab-bucket/a", "created": T0},
             {"fs": "/two/", "s3": "s3://lab-bucket/a/b/", "created": T0},
             {"fs": "/elsewhere", "s3": "s3://other-bucket/a/b/c/d", "created": T0},
             {"fs": "/local", "s3": "/not/an/s3/uri/at/all/but/long", "created": T0}]
    assert to_fs_path("s3://lab-bucket/a/b/c/", links) == "/two/c"
    assert to_fs_path("s3://lab-bucket/a/x", links) == "/one/x"
    assert to_fs_path("s3://lab-bucket/a/b", links) == "/two/"
    assert to_fs_path("s3://lab-bucket/a/", links) == "/one"
    assert to_fs_path("s3://lab-bucket/ab/", links) == "/"
    assert to_fs_path("s3://third-bucket/a/b/", links) == "/"
    assert to_fs_path("/datasets/a/", links) == "/datasets/a"
    assert to_fs_path("datasets", []) == "/datasets"


def test_an_s3_path_under_a_whole_bucket_link_keeps_its_key():
    assert to_fs_path("s3://lab-bucket/x/y/", [{"fs": "/mnt", "s3": "s3://lab-bucket", "created": T0}]) == "/mnt/x/y"
    assert to_fs_path("s3://lab-bucket", [{"fs": "/mnt", "s3": "s3://lab-bucket/", "created": T0}]) == "/mnt"
    assert to_fs_path("s3://lab-bucket/p/x", [{"fs": "/", "s3": "s3://lab-bucket/p", "created": T0}]) == "/x"


# ---- import_status: the file system and its links ------------------------------------------------------------------
def test_the_status_asks_fsx_for_the_file_system_and_its_links_and_tasks_filtered_by_its_id():
    fsx = Fsx([link()], [imp("task-1", ["s3://lab-bucket/datasets/"])])
    assert status(fsx) == {"ready": True, "final": False, "reason": "the S3 listing is imported",
                           "imports": [view("task-1", ["s3://lab-bucket/datasets/"])]}
    assert fsx.calls == [("DescribeFileSystems", {"FileSystemIds": [FS]}),
                         ("DescribeDataRepositoryAssociations", {"Filters": FILTERS}),
                         ("DescribeDataRepositoryTasks", {"Filters": FILTERS})]


def test_a_file_system_fsx_does_not_list_does_not_exist():
    """DescribeFileSystems answering without the file system (or without the list at all)."""
    fsx = real_fsx()
    with Stubber(fsx) as stub:
        stub.add_response("describe_file_systems", {}, {"FileSystemIds": [FS]})
        assert import_status(fsx, FS, ["/datasets/a"], now=LATER) == {
            "ready": False, "final": True, "reason": "FSx file system fs-0123456789abcdef0 does not exist"}
        stub.assert_no_pending_responses()
    gone = Fsx([link()])
    gone.system = None
    assert status(gone) == {
        "ready": False, "final": True, "reason": "FSx file system fs-0123456789abcdef0 does not exist"}


@pytest.mark.parametrize("lifecycle", ["DELETING", "FAILED", "MISCONFIGURED", "MISCONFIGURED_UNAVAILABLE"])
def test_a_file_system_that_is_going_or_broken_is_final(lifecycle):
    assert status(Fsx([link()], Lifecycle=lifecycle)) == {
        "ready": False, "final": True, "reason": f"FSx file system fs-0123456789abcdef0 is {lifecycle}"}


def test_a_file_system_being_created_is_waited_for():
    assert status(Fsx([link()], Lifecycle="CREATING")) == {
        "ready": False, "final": False, "reason": "FSx file system fs-0123456789abcdef0 is CREATING"}


def test_a_file_system_being_updated_or_without_a_lifecycle_serves_its_data():
    assert status(Fsx([link()], Lifecycle="UPDATING"))["reason"] == "the S3 listing is imported"
    fsx = Fsx([link()])
    del fsx.system["Lifecycle"]
    assert status(fsx) == {"ready": True, "final": False, "reason": "the S3 listing is imported", "imports": []}


def test_a_file_system_without_any_link_to_s3_is_final():
    expected = {"ready": False, "final": True, "reason": "FSx file system fs-0123456789abcdef0 is not linked to S3"}
    assert status(Fsx()) == expected
    fsx = Fsx()
    del fsx.system["LustreConfiguration"]
    assert status(fsx) == expected
    assert status(Fsx(LustreConfiguration=None)) == expected


def test_a_legacy_import_path_link_serves_the_whole_file_system():
    fsx = Fsx([], [imp("task-1", [])], **legacy(Lifecycle="AVAILABLE"))
    assert status(fsx, ["/datasets/a", "/other"]) == {
        "ready": True, "final": False, "reason": "the S3 listing is imported", "imports": [view("task-1", [])]}
    assert status(Fsx([], [], **legacy()))["ready"] is True   # no Lifecycle: AVAILABLE


@pytest.mark.parametrize("state", ["MISCONFIGURED", "FAILED", "DELETING"])
def test_a_broken_legacy_link_is_final(state):
    fsx = Fsx([], [imp("task-1", [], "FAILED", failed=10)], **legacy(Lifecycle=state))
    assert status(fsx) == {"ready": False, "final": True, "reason": f"FSx's S3 link (ImportPath) is {state}",
                           "imports": [view("task-1", [], "FAILED", failed=10)]}


def test_a_legacy_link_being_created_is_importing():
    fsx = Fsx([], [imp("task-1", [], "EXECUTING", succeeded=2)], **legacy(Lifecycle="CREATING"))
    assert status(fsx) == {"ready": False, "final": False,
                           "reason": "FSx's S3 link (ImportPath) is CREATING: importing the S3 listing",
                           "imports": [view("task-1", [], "EXECUTING", done=2)]}


def test_a_path_no_association_covers_is_final():
    fsx = Fsx([link(), link(AssociationId="dra-2", FileSystemPath="/models")], [])
    assert status(fsx, ["/datasets/a", "/datasetsX/b"]) == {
        "ready": False, "final": True,
        "reason": "no data repository association of fs-0123456789abcdef0 covers /datasetsX/b"}


@pytest.mark.parametrize("state", ["MISCONFIGURED", "FAILED", "DELETING"])
def test_a_broken_association_is_final_with_fsxs_message(state):
    fsx = Fsx([link(Lifecycle=state, FailureDetails={"Message": "the bucket policy denies FSx"})],
              [imp("task-1", ["s3://lab-bucket/datasets/"])])
    assert status(fsx) == {"ready": False, "final": True,
                           "reason": f"data repository association dra-0123456789abcdef1 is {state}: the bucket policy denies FSx",
                           "imports": [view("task-1", ["s3://lab-bucket/datasets/"])]}


def test_a_broken_association_without_a_message_points_at_the_console():
    fsx = Fsx([link(Lifecycle="FAILED", FailureDetails=None)], [])
    assert status(fsx) == {"ready": False, "final": True,
                           "reason": "data repository association dra-0123456789abcdef1 is FAILED: see the FSx console", "imports": []}
    fsx = Fsx([link(Lifecycle="FAILED")], [])
    assert status(fsx)["reason"] == "data repository association dra-0123456789abcdef1 is FAILED: see the FSx console"


@pytest.mark.parametrize("state", ["CREATING", "UPDATING"])
def test_an_association_being_made_or_changed_is_waited_for(state):
    fsx = Fsx([link(), link(AssociationId="dra-root", Lifecycle=state)], [imp("task-1", [])])
    del fsx.associations[1]["FileSystemPath"]          # no FileSystemPath: the root, covering every path
    assert status(fsx, ["/datasets/a"]) == {"ready": False, "final": False,
                                            "reason": f"data repository association dra-root is {state}",
                                            "imports": [view("task-1", [])]}


def test_an_association_without_a_lifecycle_is_available():
    fsx = Fsx([link()], [])
    del fsx.associations[0]["Lifecycle"]
    assert status(fsx) == {"ready": True, "final": False, "reason": "the S3 listing is imported", "imports": []}


# ---- import_status: the import tasks -------------------------------------------------------------------------------
def test_a_running_import_covering_the_path_is_waited_for_and_counted():
    """The first running import that covers a path is named, with its objects done (succeeded + failed) of all."""
    other = imp("task-other", ["s3://lab-bucket/datasets/b/"], "EXECUTING", total=5, succeeded=1)
    first = imp("task-first", ["s3://lab-bucket/datasets/a/x/"], "PENDING", total=12000, succeeded=1500, failed=2)
    second = imp("task-second", ["s3://lab-bucket/datasets/"], "CANCELING", total=3, succeeded=0)
    fsx = Fsx([link()], [other, first, second])
    assert status(fsx, ["/datasets/a"]) == {
        "ready": False, "final": False,
        "reason": "the S3 metadata import task-first is PENDING (1,502 of 12,000 objects)",
        "imports": [view("task-other", ["s3://lab-bucket/datasets/b/"], "EXECUTING", done=1, total=5),
                    view("task-first", ["s3://lab-bucket/datasets/a/x/"], "PENDING", done=1502, total=12000, failed=2),
                    view("task-second", ["s3://lab-bucket/datasets/"], "CANCELING", done=0, total=3)]}


def test_only_import_tasks_count_and_their_views_read_missing_counts_as_zero():
    export = {**imp("task-export", [], "EXECUTING"), "Type": "EXPORT_TO_REPOSITORY"}
    bare = {"TaskId": "task-bare", "Type": "IMPORT_METADATA_FROM_REPOSITORY", "Lifecycle": "SUCCEEDED",
            "CreationTime": T0, "Paths": None, "Status": {"TotalCount": None}}
    no_status = {"TaskId": "task-nostatus", "Type": "IMPORT_METADATA_FROM_REPOSITORY", "Lifecycle": "SUCCEEDED",
                 "CreationTime": T0}
    fsx = Fsx([link()], [export, bare, no_status])
    assert status(fsx) == {"ready": True, "final": False, "reason": "the S3 listing is imported", "imports": [
        {"task": "task-bare", "lifecycle": "SUCCEEDED", "paths": [], "done": 0, "total": 0, "failed": 0},
        {"task": "task-nostatus", "lifecycle": "SUCCEEDED", "paths": [], "done": 0, "total": 0, "failed": 0}]}


def test_a_running_import_of_another_dataset_or_a_whole_import_of_a_subfolder_does_not_hold_the_path():
    """whole=False: a running import of a folder inside the path holds it, one beside it does not."""
    inside = imp("task-in", ["s3://lab-bucket/datasets/a/part/"], "EXECUTING", succeeded=0)
    beside = imp("task-beside", ["s3://lab-bucket/datasets/ab/"], "EXECUTING", succeeded=0)
    assert status(Fsx([link()], [beside]))["ready"] is True
    assert status(Fsx([link()], [inside]))["reason"] == "the S3 metadata import task-in is EXECUTING (0 of 10 objects)"


def test_the_latest_finished_import_decides_by_its_end_then_its_creation():
    ok_late = imp("task-ok", ["s3://lab-bucket/datasets/"], created=T0 + MIN, EndTime=T0 + 50 * MIN)
    failed_early = imp("task-failed", ["s3://lab-bucket/datasets/"], "FAILED", created=T0 + 10 * MIN, failed=10,
                       EndTime=T0 + 20 * MIN)
    assert status(Fsx([link()], [failed_early, ok_late]))["ready"] is True
    assert status(Fsx([link()], [ok_late, failed_early]))["ready"] is True
    failed_last = imp("task-failed", ["s3://lab-bucket/datasets/"], "FAILED", created=T0 + 55 * MIN, failed=10)
    undated_ok = {**imp("task-undated", ["s3://lab-bucket/datasets/"]), "CreationTime": None}
    assert status(Fsx([link()], [ok_late, failed_last, undated_ok]))["reason"] == (
        "the S3 metadata import task-failed ended FAILED and imported nothing: see the FSx console")
    ok_last = imp("task-ok", ["s3://lab-bucket/datasets/"], created=T0 + 56 * MIN)
    assert status(Fsx([link()], [undated_ok, failed_last, ok_last]))["ready"] is True


def test_an_import_that_failed_every_object_is_final_with_fsxs_message():
    failed = imp("task-9", ["s3://lab-bucket/datasets/a/"], "FAILED", total=3, failed=3,
                 FailureDetails={"Message": "Access denied to s3://lab-bucket/datasets/a/"})
    assert status(Fsx([link()], [failed])) == {
        "ready": False, "final": True,
        "reason": "the S3 metadata import task-9 ended FAILED and imported nothing: "
                  "Access denied to s3://lab-bucket/datasets/a/",
        "imports": [view("task-9", ["s3://lab-bucket/datasets/a/"], "FAILED", done=3, total=3, failed=3)]}


def test_a_canceled_import_of_nothing_is_final():
    canceled = imp("task-c", ["s3://lab-bucket/datasets/a/"], "CANCELED", total=0, FailureDetails=None)
    assert status(Fsx([link()], [canceled])) == {
        "ready": False, "final": True,
        "reason": "the S3 metadata import task-c ended CANCELED and imported nothing: see the FSx console",
        "imports": [view("task-c", ["s3://lab-bucket/datasets/a/"], "CANCELED", done=0, total=0)]}


def test_an_import_that_imported_some_objects_is_ready_with_a_warning_naming_the_report():
    """Succeeded 1 of the done objects: the jobs read the rest; the report's path is named where FSx wrote one."""
    partial = imp("task-p", ["s3://lab-bucket/datasets/a/"], "FAILED", total=5000, succeeded=1, failed=1200,
                  FailureDetails={"Message": "some objects were not imported"},
                  Report={"Path": "s3://lab-bucket/reports/", "Enabled": True})
    one_left = imp("task-q", ["s3://lab-bucket/datasets/b/"], "CANCELED", total=4, succeeded=1, failed=1)
    fsx = Fsx([link()], [partial, one_left])
    assert status(fsx, ["/datasets/a", "/datasets/b"]) == {
        "ready": True, "final": False, "partial": True,
        "reason": "the S3 metadata import task-p of /datasets/a ended FAILED: 1,200 of 5,000 objects not imported "
                  "(some objects were not imported; report under s3://lab-bucket/reports/); the FSx jobs read the rest"
                  "; the S3 metadata import task-q of /datasets/b ended CANCELED: 1 of 4 objects not imported "
                  "(see the FSx console); the FSx jobs read the rest",
        "imports": [view("task-p", ["s3://lab-bucket/datasets/a/"], "FAILED", done=1201, total=5000, failed=1200),
                    view("task-q", ["s3://lab-bucket/datasets/b/"], "CANCELED", done=2, total=4, failed=1)]}


def test_a_report_without_a_path_is_not_named():
    partial = imp("task-p", ["s3://lab-bucket/datasets/a/"], "FAILED", total=2, succeeded=1, failed=1,
                  Report={"Enabled": False})
    assert status(Fsx([link()], [partial]))["reason"] == (
        "the S3 metadata import task-p of /datasets/a ended FAILED: 1 of 2 objects not imported "
        "(see the FSx console); the FSx jobs read the rest")


# ---- import_status: the first import of a new association ----------------------------------------------------------
def test_a_new_batch_association_waits_for_its_import_to_be_listed():
    fsx = Fsx([link()], [imp("task-b", ["s3://lab-bucket/datasets/b/"])])
    assert status(fsx, now=T0 + 14 * MIN) == {
        "ready": False, "final": False, "reason": "waiting for the S3 metadata import of the new association to start",
        "imports": [view("task-b", ["s3://lab-bucket/datasets/b/"])]}
    assert status(fsx, now=T0 + 15 * MIN)["reason"] == "the S3 listing is imported"


def test_a_new_association_whose_import_is_listed_or_without_a_batch_import_is_ready():
    assert status(Fsx([link()], [imp("task-1", [])]), now=T0 + MIN)["ready"] is True
    assert status(Fsx([link(BatchImportMetaDataOnCreate=False)], []), now=T0 + MIN)["ready"] is True
    undated = link()
    del undated["CreationTime"]
    assert status(Fsx([undated], []), now=T0 + MIN)["ready"] is True


def test_without_a_time_given_the_status_reads_the_clock():
    just_made = dt.datetime.now(dt.timezone.utc) - MIN
    assert import_status(Fsx([link(CreationTime=just_made)], []), FS, ["/datasets/a"])["reason"] == (
        "waiting for the S3 metadata import of the new association to start")
    assert import_status(Fsx([link(CreationTime=just_made - 60 * MIN)], []), FS, ["/datasets/a"])["ready"] is True


# ---- paging and "not found" ----------------------------------------------------------------------------------------
def test_every_page_of_links_and_tasks_is_read_and_not_found_means_none():
    fsx = real_fsx()
    system = {"FileSystemId": FS, "Lifecycle": "AVAILABLE", "CreationTime": T0}
    task_a = imp("task-0000000000000000a", ["s3://lab-bucket/datasets/"])
    task_b = imp("task-0000000000000000b", ["s3://lab-bucket/datasets/b/"], "EXECUTING", succeeded=4)
    with Stubber(fsx) as stub:
        stub.add_response("describe_file_systems", {"FileSystems": [system]}, {"FileSystemIds": [FS]})
        stub.add_response("describe_data_repository_associations",
                          {"Associations": [link(FileSystemPath="/models", DataRepositoryPath="s3://lab-bucket/models",
                                                 AssociationId="dra-0123456789abcdef2")], "NextToken": "a2"},
                          {"Filters": FILTERS})
        stub.add_response("describe_data_repository_associations", {"Associations": [link()]},
                          {"Filters": FILTERS, "NextToken": "a2"})
        stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": [task_a], "NextToken": "t2"},
                          {"Filters": FILTERS})
        stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": [task_b], "NextToken": "t3"},
                          {"Filters": FILTERS, "NextToken": "t2"})
        stub.add_response("describe_data_repository_tasks", {}, {"Filters": FILTERS, "NextToken": "t3"})
        assert import_status(fsx, FS, ["/datasets/b"], now=LATER) == {
            "ready": False, "final": False, "reason": "the S3 metadata import task-0000000000000000b is EXECUTING (4 of 10 objects)",
            "imports": [view("task-0000000000000000a", ["s3://lab-bucket/datasets/"]),
                        view("task-0000000000000000b", ["s3://lab-bucket/datasets/b/"], "EXECUTING", done=4)]}
        stub.assert_no_pending_responses()
    with Stubber(fsx) as stub:
        stub.add_response("describe_file_systems", {"FileSystems": [system]}, {"FileSystemIds": [FS]})
        stub.add_response("describe_data_repository_associations", {"Associations": [link()]}, {"Filters": FILTERS})
        stub.add_client_error("describe_data_repository_tasks", "DataRepositoryTaskNotFound",
                              "The data repository task or tasks you specified could not be found")
        assert import_status(fsx, FS, ["/datasets/b"], now=LATER) == {
            "ready": True, "final": False, "reason": "the S3 listing is imported", "imports": []}
        stub.add_response("describe_file_systems", {"FileSystems": [system]}, {"FileSystemIds": [FS]})
        stub.add_client_error("describe_data_repository_associations", "DataRepositoryAssociationNotFound",
                              "No data repository associations were found based upon the supplied parameters")
        stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": []}, {"Filters": FILTERS})
        assert import_status(fsx, FS, ["/datasets/b"], now=LATER) == {
            "ready": False, "final": True, "reason": "FSx file system fs-0123456789abcdef0 is not linked to S3"}


def test_not_found_on_a_later_page_keeps_the_pages_read():
    fsx = real_fsx()
    with Stubber(fsx) as stub:
        stub.add_response("describe_file_systems", {"FileSystems": []}, {"FileSystemIds": [FS]})
        stub.add_response("describe_data_repository_associations", {"Associations": [link()], "NextToken": "a2"},
                          {"Filters": FILTERS})
        stub.add_client_error("describe_data_repository_associations", "DataRepositoryAssociationNotFound", "none")
        stub.add_response("describe_data_repository_tasks", {"DataRepositoryTasks": []}, {"Filters": FILTERS})
        assert imports_to_start(fsx, FS, [written("a", T0 + MIN)]) == ["s3://lab-bucket/datasets/a/"]
        stub.assert_no_pending_responses()


def test_any_other_describe_error_reaches_the_caller():
    fsx = real_fsx()
    with Stubber(fsx) as stub:
        stub.add_response("describe_file_systems", {"FileSystems": [{"FileSystemId": FS, "Lifecycle": "AVAILABLE"}]})
        stub.add_client_error("describe_data_repository_associations", "BadRequest", "the filter is not valid")
        with pytest.raises(ClientError) as raised:
            import_status(fsx, FS, ["/datasets/a"], now=LATER)
    assert raised.value.response["Error"]["Code"] == "BadRequest"
    assert raised.value.operation_name == "DescribeDataRepositoryAssociations"


# ---- imports_to_start ----------------------------------------------------------------------------------------------
def written(name, at):
    return {"path": f"/datasets/{name}", "written_at": at.isoformat()}


def test_a_dataset_written_after_its_link_was_made_gets_an_import_of_its_s3_path():
    fsx = Fsx([link()], [])
    datasets = [written("late", T0 + MIN), written("same", T0), {"path": "/datasets/none"},
                written("late", T0 + 2 * MIN), {"path": "/datasets/epoch", "written_at": T0.timestamp() + 1}]
    assert imports_to_start(fsx, FS, datasets) == ["s3://lab-bucket/datasets/late/", "s3://lab-bucket/datasets/epoch/"]
    assert fsx.calls == [("DescribeFileSystems", {"FileSystemIds": [FS]}),
                         ("DescribeDataRepositoryAssociations", {"Filters": FILTERS}),
                         ("DescribeDataRepositoryTasks", {"Filters": FILTERS})]


def test_a_dataset_no_link_maps_to_s3_gets_no_import():
    fsx = Fsx([link(), link(AssociationId="dra-2", FileSystemPath="/scratch", DataRepositoryPath="")], [])
    assert imports_to_start(fsx, FS, [{"path": "/elsewhere/a", "written_at": (T0 + MIN).isoformat()},
                                      {"path": "/scratch/a", "written_at": (T0 + MIN).isoformat()}]) == []
    nameless = link()
    del nameless["DataRepositoryPath"]
    assert imports_to_start(Fsx([nameless], []), FS, [written("a", T0 + MIN)]) == []


def test_an_association_without_a_file_system_path_links_the_root():
    root = link(DataRepositoryPath="s3://root-bucket/lab")
    del root["FileSystemPath"]
    assert imports_to_start(Fsx([root], []), FS, [written("a", T0 + MIN)]) == ["s3://root-bucket/lab/datasets/a/"]


def test_the_newest_covering_link_dates_the_dataset():
    """A dataset is late only if written after every link that covers it was made; a link without a time, ever."""
    old = link(AssociationId="dra-root", FileSystemPath="/", DataRepositoryPath="s3://root-bucket", CreationTime=T0)
    new = link(CreationTime=T0 + 60 * MIN)
    assert imports_to_start(Fsx([old, new], []), FS, [written("a", T0 + 30 * MIN)]) == []
    assert imports_to_start(Fsx([new, old], []), FS, [written("a", T0 + 61 * MIN)]) == ["s3://lab-bucket/datasets/a/"]
    undated = link()
    del undated["CreationTime"]
    assert imports_to_start(Fsx([undated], []), FS, [written("a", T0 - 60 * MIN)]) == ["s3://lab-bucket/datasets/a/"]


def test_a_legacy_import_path_dates_datasets_by_the_file_systems_creation():
    fsx = Fsx([], [], **legacy("s3://old-bucket/data"))
    assert imports_to_start(fsx, FS, [written("a", T0 + MIN), written("b", T0)]) == ["s3://old-bucket/data/datasets/a/"]
    fsx.system["CreationTime"] = T0 + 10 * MIN
    assert imports_to_start(fsx, FS, [written("a", T0 + MIN)]) == []
    fsx.system = None   # DescribeFileSystems lists nothing: no legacy link either
    assert imports_to_start(fsx, FS, [written("a", T0 + MIN)]) == []


def test_a_legacy_import_path_is_not_a_link_when_associations_exist():
    fsx = Fsx([link()], [], **legacy("s3://old-bucket/data"))
    assert imports_to_start(fsx, FS, [{"path": "/other/a", "written_at": (T0 + MIN).isoformat()}]) == []


def test_an_import_of_the_whole_dataset_made_since_it_was_written_counts():
    late = written("a", T0 + 30 * MIN)
    target = ["s3://lab-bucket/datasets/a/"]
    for task, wanted in [
        (imp("t", ["s3://lab-bucket/datasets/a/"], created=T0 + 30 * MIN), []),        # at the same second
        (imp("t", ["s3://lab-bucket/datasets/"], "EXECUTING", created=T0 + 31 * MIN), []),
        (imp("t", None, created=T0 + 31 * MIN), []),                                 # no paths: everything
        (imp("t", ["s3://lab-bucket/datasets/a/"], created=T0 + 29 * MIN), target),  # before it was written
        (imp("t", ["s3://lab-bucket/datasets/a/sub/"], created=T0 + 31 * MIN), target),   # only part of it
        ({**imp("t", [], created=T0 + 31 * MIN), "Type": "EXPORT_TO_REPOSITORY"}, target),
        ({**imp("t", []), "CreationTime": None}, target),
    ]:
        assert imports_to_start(Fsx([link()], [task]), FS, [late]) == wanted, task


def test_an_import_made_since_the_run_began_counts_for_a_dataset_dated_later():
    """The uploader's clock may run ahead: an import since the run began covers a dataset stamped after it."""
    ahead = written("a", T0 + 3 * 60 * MIN)
    fsx = Fsx([link()], [imp("t", ["s3://lab-bucket/datasets/a/"], created=T0 + 150 * MIN)])
    assert imports_to_start(fsx, FS, [ahead], tried_since=T0 + 120 * MIN) == []
    assert imports_to_start(fsx, FS, [ahead]) == ["s3://lab-bucket/datasets/a/"]
    fsx.tasks = [imp("t", ["s3://lab-bucket/datasets/a/"], created=T0 + 100 * MIN)]
    assert imports_to_start(fsx, FS, [ahead], tried_since=T0 + 120 * MIN) == ["s3://lab-bucket/datasets/a/"]


@pytest.mark.parametrize("lifecycle", ["FAILED", "CANCELED"])
def test_an_import_that_ended_badly_counts_only_if_made_during_this_run(lifecycle):
    """Made strictly after the run began: counted (not tried again at every check). Made before or at the run's
    first second, or with no run time given: tried again."""
    late = written("a", T0 + 30 * MIN)
    run = T0 + 40 * MIN
    target = ["s3://lab-bucket/datasets/a/"]
    during = imp("t", ["s3://lab-bucket/datasets/a/"], lifecycle, created=run + dt.timedelta(seconds=1), failed=10)
    assert imports_to_start(Fsx([link()], [during]), FS, [late], tried_since=run) == []
    assert imports_to_start(Fsx([link()], [during]), FS, [late]) == target
    at_start = {**during, "CreationTime": run}
    assert imports_to_start(Fsx([link()], [at_start]), FS, [late], tried_since=run) == target
    undated = {**during, "CreationTime": None}
    assert imports_to_start(Fsx([link()], [undated]), FS, [late], tried_since=run) == target


def test_names_ending_in_a_capital_x_translate_whole():
    """Only slashes are trimmed from a path: a dataset, prefix or mount named ...X keeps its last letter."""
    links = [{"fs": "/dataX", "s3": "s3://lab-bucket/setX", "created": T0}]
    assert to_s3_path("/dataX/boX", links) == "s3://lab-bucket/setX/boX/"
    assert to_s3_path("/dataX/X/", links) == "s3://lab-bucket/setX/X/"
    assert to_fs_path("s3://lab-bucket/setX/boX/", links) == "/dataX/boX"
    assert to_fs_path("s3://lab-bucket/setX/X", links) == "/dataX/X"
