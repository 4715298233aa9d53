"""Is a dataset in FSx yet? The readiness rules (dslab/workflow/fsx_data.py) against FSx's own answers.

Import tasks name S3 paths, the jobs read file-system paths: CreateDataRepositoryTask.Paths (botocore's FSx
model) says "For import tasks, the list contains paths in the Amazon S3 bucket from which POSIX metadata
changes are imported to the FSx for Lustre file system. The path can be an S3 bucket or prefix in the format
s3://bucket-name/prefix", and "If a path that you provide isn't valid, the task fails." These tests are
written from that text: FSx answers as it would, a fake client stands in for it.
"""

from __future__ import annotations

import datetime as dt
import json

import boto3
import botocore.session
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError

from dslab.workflow.check_fsx_data import FSX_ERROR_REACTIONS, WAIT, check
from dslab.workflow.fsx_data import NONE_FOUND, import_status, imports_to_start, to_fs_path, to_s3_path

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


# ---- CheckFsxData: late datasets' imports, and what it does with each FSx error ----------------------------
# Errors come from a real FSx client whose request is answered by FSx's error (botocore's before-send event): the
# ClientError, its code and modelled fields (ServiceLimitExceeded's Limit) are what botocore makes of the answer.

PLAN_WRITTEN = T0 + dt.timedelta(minutes=40)   # the run began after the late datasets were written
ENVIRON = {"DSLAB_FSX_ID_PARAMETER": "/fsx/id", "DSLAB_FSX_MOUNT_PARAMETER": "/fsx/mount"}


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_):
        yield self.data

    def read(self):
        return self.data


def fsx_error(code: str, call: str = "create_data_repository_task", status: int = 400, **fields) -> ClientError:
    """What botocore raises when FSx answers ``call`` with the error ``code``."""
    client = boto3.client("fsx", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test",
                          config=Config(retries={"total_max_attempts": 1}))
    body = json.dumps({"__type": code, "Message": f"{code} (from FSx)", **fields}).encode()
    client.meta.events.register("before-send.fsx.*", lambda request, **_: AWSResponse(
        request.url, status, {"Content-Type": "application/x-amz-json-1.1"}, _Body(body)))
    params = {"Type": "IMPORT_METADATA_FROM_REPOSITORY", "FileSystemId": FS_ID, "Report": {"Enabled": False}} \
        if call == "create_data_repository_task" else {"Filters": [{"Name": "file-system-id", "Values": [FS_ID]}]}
    with pytest.raises(ClientError) as caught:
        getattr(client, call)(**params)
    return caught.value


class CheckedFsx(FakeFsx):
    """FakeFsx that makes import tasks (EXECUTING), or answers with the next of ``refusals``."""

    def __init__(self, *args, refusals=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.refusals, self.created = list(refusals), []

    def create_data_repository_task(self, Type, FileSystemId, Paths, Report):
        self.created.append(Paths)
        if self.refusals:
            raise self.refusals.pop(0)
        made = task(Paths, "EXECUTING", created=PLAN_WRITTEN + dt.timedelta(minutes=len(self.created)), done=0)
        self.tasks.append(made)
        return {"DataRepositoryTask": made}


def run_check(fsx, datasets, checks=0, wait_checks=10):
    document = {"fsx_paths": [d["path"] for d in datasets], "fsx_datasets": datasets}

    class S3:
        def get_object(self, Bucket, Key):
            return {"Body": _Body(json.dumps(document).encode()), "LastModified": PLAN_WRITTEN}

    class Ssm:
        def get_parameters(self, Names):
            return {"Parameters": [{"Name": "/fsx/id", "Value": FS_ID}, {"Name": "/fsx/mount", "Value": "abcdef"}]}

    event = {"plan": {"bucket": "lab-bucket", "plan_key": "results/run/plan.json", "fsx_wait_checks": wait_checks},
             "checks": checks}
    return check({"fsx": fsx, "s3": S3(), "ssm": Ssm()}, ENVIRON, event)


def settle(fsx):
    """Every executing import ends, having imported everything."""
    fsx.tasks = [{**t, "Lifecycle": "SUCCEEDED", "Status": {"TotalCount": 10, "SucceededCount": 10, "FailedCount": 0}}
                 if t["Lifecycle"] == "EXECUTING" else t for t in fsx.tasks]


def test_one_import_task_takes_every_late_dataset_and_at_most_100_paths():
    """CreateDataRepositoryTask.Paths: "max": 100 (botocore's FSx model). 101 late datasets: one task of 100,
    then, at a later check, one of the last; never ready on the check that made a task."""
    datasets = [late(f"d{i:03}") for i in range(101)]
    fsx = CheckedFsx([association()], [task(["s3://lab-bucket/datasets/"])])
    first = run_check(fsx, datasets)
    assert fsx.created == [[f"s3://lab-bucket/datasets/d{i:03}/" for i in range(100)]]
    assert not first["ready"] and not first["final"] and "at most 100 paths" in first["reason"], first
    settle(fsx)
    second = run_check(fsx, datasets, checks=1)
    assert fsx.created[1:] == [["s3://lab-bucket/datasets/d100/"]] and not second["ready"] and not second["final"]
    settle(fsx)
    third = run_check(fsx, datasets, checks=2)
    assert len(fsx.created) == 2 and third["ready"], third


WAITS = {   # code -> words of the reason; the next check starts the import
    "DataRepositoryTaskExecuting": "another data repository task is executing",
    "InternalServerError": "trying again at the next check",
    "IncompatibleParameterError": "trying again",
}
STOPS = {   # code -> the fix the reason names
    "FileSystemNotFound": "dslab fsx up",
    "BadRequest": "dslab fsx status",
    "UnsupportedOperation": "Lustre 2.12 or 2.15",
    "ServiceLimitExceeded": "limit TOTAL_USER_TAGS is reached",
}


@pytest.mark.parametrize("code", sorted(WAITS))
def test_an_import_fsx_refuses_for_now_starts_at_a_later_check(code):
    """DataRepositoryTaskExecuting: "Wait until the existing task has completed, then create the new task"
    (botocore's FSx model): not final (the state machine's Catch used to skip every FSx job)."""
    error = fsx_error(code, status=500 if code == "InternalServerError" else 400, Parameter="ClientRequestToken")
    fsx = CheckedFsx([association()], [task(["s3://lab-bucket/datasets/"])], refusals=[error])
    waited = run_check(fsx, [late("a"), late("b")])
    assert not waited["ready"] and not waited["final"] and WAITS[code] in waited["reason"], waited
    assert "2 dataset(s) uploaded while FSx was up" in waited["reason"]
    started = run_check(fsx, [late("a"), late("b")], checks=1)
    assert fsx.created[-1] == ["s3://lab-bucket/datasets/a/", "s3://lab-bucket/datasets/b/"]
    assert not started["ready"] and not started["final"]
    # bounded: the last of the checks the plan allows ends the wait with the reason
    fsx.refusals.append(error)
    fsx.tasks.pop()
    last = run_check(fsx, [late("a")], checks=9, wait_checks=10)
    assert last["final"] and last["reason"].startswith("still not ready after 10 checks") and WAITS[code] in last["reason"]


@pytest.mark.parametrize("code", sorted(STOPS))
def test_an_import_fsx_refuses_for_good_skips_the_fsx_jobs_with_the_fix(code):
    fsx = CheckedFsx([association()], [task(["s3://lab-bucket/datasets/"])],
                     refusals=[fsx_error(code, Limit="TOTAL_USER_TAGS")])
    stopped = run_check(fsx, [late()])
    assert not stopped["ready"] and stopped["final"], stopped
    assert stopped["reason"].startswith("the import of 1 dataset(s) uploaded while FSx was up") and STOPS[code] in stopped["reason"]
    assert f"{code} (from FSx)" in stopped["reason"]


def test_every_documented_error_of_the_checks_fsx_calls_has_one_reaction():
    """CreateDataRepositoryTask's errors each have a reaction, and every reaction is for an error FSx documents
    for a call the check makes (the Describe* "not found" ones mean "none": fsx_data.NONE_FOUND)."""
    model = botocore.session.get_session().get_service_model("fsx")
    errors = {op: {e.name for e in model.operation_model(op).error_shapes} for op in (
        "CreateDataRepositoryTask", "DescribeFileSystems", "DescribeDataRepositoryAssociations", "DescribeDataRepositoryTasks")}
    assert errors["CreateDataRepositoryTask"] <= set(FSX_ERROR_REACTIONS)
    assert set(FSX_ERROR_REACTIONS) | set(NONE_FOUND) <= set.union(*errors.values())
    assert set(FSX_ERROR_REACTIONS) == set(WAITS) | set(STOPS)
    assert {c for c, (kind, _) in FSX_ERROR_REACTIONS.items() if kind == WAIT} == set(WAITS)
    # what is left: a filter on a repository type, which the check never sets
    assert set.union(*errors.values()) - set(FSX_ERROR_REACTIONS) - set(NONE_FOUND) == {"InvalidDataRepositoryType"}


def test_an_error_no_reaction_names_is_answered_by_its_class():
    """Not one FSx's table names (the common errors every action may answer): a refused permission (the role lacks
    fsx:CreateDataRepositoryTask) is final, naming the fix; a throttled call waits for the next check (the fault
    matrix, dslab/aws/faults.py, lists every pair; dslab/core/facts/aws_errors.py words them)."""
    fsx = CheckedFsx([association()], [task(["s3://lab-bucket/datasets/"])], refusals=[fsx_error("AccessDeniedException")])
    status = run_check(fsx, [late()])
    assert status["final"] and not status["ready"], status
    assert "may not call CreateDataRepositoryTask: deploy the lab again" in status["reason"], status
    fsx = CheckedFsx([association()], [task(["s3://lab-bucket/datasets/"])], refusals=[fsx_error("ThrottlingException")])
    status = run_check(fsx, [late()])
    assert not status["final"] and not status["ready"] and "the next check tries again" in status["reason"], status


@pytest.mark.parametrize("code, final, words", [("InternalServerError", False, "FSx failed on its side (DescribeDataRepositoryTasks"),
                                                ("FileSystemNotFound", True, f"FSx file system {FS_ID} no longer exists")])
def test_a_describe_error_waits_or_stops_by_the_same_reactions(code, final, words):
    class Failing(CheckedFsx):
        def describe_data_repository_tasks(self, Filters):
            raise fsx_error(code, "describe_data_repository_tasks", status=500 if code == "InternalServerError" else 400)

    status = run_check(Failing([association()]), [{"path": "/datasets/early", "written_at": T0.isoformat()}])
    assert not status["ready"] and status["final"] is final and words in status["reason"], status


def test_describe_not_found_means_none():
    """"No data repository associations were found based upon the supplied parameters": none, so not linked."""
    class NoneFound(CheckedFsx):
        def describe_data_repository_associations(self, Filters):
            raise fsx_error("DataRepositoryAssociationNotFound", "describe_data_repository_associations")

    status = run_check(NoneFound([]), [{"path": "/datasets/early", "written_at": T0.isoformat()}])
    assert status["final"] and "is not linked to S3" in status["reason"], status


def test_an_import_that_failed_during_this_run_is_not_started_again():
    """Before the run: started again (the previous test's rule). During it: waiting cannot help, so the
    readiness rules say what it imported, rather than an import at every check."""
    failed = task(["s3://lab-bucket/datasets/late/"], "FAILED", created=PLAN_WRITTEN + dt.timedelta(minutes=1), total=3, failed=3)
    fsx = CheckedFsx([association()], [task(["s3://lab-bucket/datasets/"]), failed])
    status = run_check(fsx, [late()])
    assert fsx.created == [] and status["final"] and "imported nothing" in status["reason"], status
    fsx.tasks[1] = {**failed, "CreationTime": PLAN_WRITTEN - dt.timedelta(minutes=1)}
    run_check(fsx, [late()])
    assert fsx.created == [["s3://lab-bucket/datasets/late/"]]
