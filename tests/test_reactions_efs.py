"""`dslab efs empty` and `dslab doctor`'s EFS paths (dslab/aws/efs.py): following DataSync's emptying execution through
throttled, unavailable and refused looks, the lines that say why emptying waits for running executions, the line
comparing what DataSync deleted with the dataset's own count, what EFS holds and costs, the outputs the commands need,
the dataset's size from its stats file, and the DataSync tasks found running or started. DataSync and EFS are hand-built
stand-ins answering as their APIs do (the fault world's moto has no task executions nor sizes); S3 is the fault
world's. The expected lines are written here."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from dslab.aws import efs
from dslab.core.errors import ConfigError

from .fault_world import BUCKET
from .fault_world import world  # noqa: F401

EXECUTION = "arn:aws:datasync:us-east-1:123456789012:task/task-0abc/execution/exec-0def"
THROTTLED = ("ThrottlingException", "Rate exceeded", 400)
UNAVAILABLE = ("InternalException", "We encountered an internal error", 500)
DENIED = ("AccessDeniedException", "not authorized", 400)
THROTTLED_LINE = ("look failed (AWS DescribeTaskExecution failed after 5 attempts (ThrottlingException: Rate exceeded); "
                  "AWS is throttling this account's requests (other tools calling the same API share the rate): try "
                  "again in a minute); looking again in 0.01 s")
FOLLOW = ("; the deletion goes on in DataSync: follow it with `aws datasync describe-task-execution "
          f"--task-execution-arn {EXECUTION}`")


def _error(code: str, message: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": 4}}, "DescribeTaskExecution")


class DataSync:
    """DescribeTaskExecution answering each look in turn: an error (code, message, status) or a status."""

    def __init__(self, *answers):
        self.answers, self.looks = list(answers), 0

    def describe_task_execution(self, TaskExecutionArn):
        assert TaskExecutionArn == EXECUTION
        self.looks += 1
        answer = self.answers.pop(0)
        if isinstance(answer, tuple):
            raise _error(*answer)
        return {"TaskExecutionArn": EXECUTION, "Status": answer, "FilesDeleted": 7}


def _wait(datasync: DataSync) -> tuple[dict, list[str]]:
    said: list[str] = []
    return efs.wait(datasync, EXECUTION, poll=0.01, say=said.append), said


# ---- following the emptying execution -----------------------------------------------------------------------------

def test_each_new_status_is_said_once_until_the_execution_ends():
    datasync = DataSync("QUEUED", "QUEUED", "LAUNCHING", "TRANSFERRING", "TRANSFERRING", "SUCCESS", "SUCCESS")
    described, said = _wait(datasync)
    assert said == ["QUEUED", "LAUNCHING", "TRANSFERRING", "SUCCESS"]
    assert described == {"TaskExecutionArn": EXECUTION, "Status": "SUCCESS", "FilesDeleted": 7}
    assert datasync.looks == 6   # no look after the one that saw it end


def test_an_execution_that_ended_in_error_is_returned_as_described():
    described, said = _wait(DataSync("ERROR"))
    assert said == ["ERROR"] and described["Status"] == "ERROR"


def test_four_throttled_looks_in_a_row_are_each_said_and_looked_at_again():
    datasync = DataSync(*[THROTTLED] * 4, "SUCCESS")
    described, said = _wait(datasync)
    assert said == [THROTTLED_LINE] * 4 + ["SUCCESS"]
    assert described["Status"] == "SUCCESS" and datasync.looks == 5


def test_the_fifth_failed_look_in_a_row_gives_up_naming_the_execution_to_follow():
    datasync = DataSync(*[THROTTLED] * 5, "SUCCESS")
    with pytest.raises(ConfigError) as raised:
        _wait(datasync)
    assert datasync.looks == 5
    assert raised.value.field == "DataSync"
    assert raised.value.problem == (
        "AWS DescribeTaskExecution failed after 5 attempts (ThrottlingException: Rate exceeded); AWS is throttling "
        "this account's requests (other tools calling the same API share the rate): try again in a minute" + FOLLOW)


def test_a_good_look_starts_the_count_of_failed_looks_again():
    # 4 failed, a good one, 4 failed: never 5 in a row, so it follows the execution to its end.
    datasync = DataSync(*[UNAVAILABLE] * 4, "TRANSFERRING", *[THROTTLED] * 4, "SUCCESS")
    described, said = _wait(datasync)
    assert described["Status"] == "SUCCESS" and datasync.looks == 10
    assert said[4] == "TRANSFERRING" and said[5:9] == [THROTTLED_LINE] * 4 and said[-1] == "SUCCESS"


def test_an_unavailable_look_is_said_as_aws_sides_failure():
    _, said = _wait(DataSync(UNAVAILABLE, "SUCCESS"))
    assert said == [
        "look failed (AWS DescribeTaskExecution failed after 5 attempts (InternalException: We encountered an internal "
        "error); a temporary failure on AWS's side: try again in a few minutes); looking again in 0.01 s", "SUCCESS"]


def test_a_refused_look_gives_up_at_once_naming_the_permission_and_the_execution():
    datasync = DataSync(DENIED, "SUCCESS")
    with pytest.raises(ConfigError) as raised:
        _wait(datasync)
    assert datasync.looks == 1
    assert raised.value.field == "DataSync"
    assert raised.value.problem == (
        "AWS DescribeTaskExecution failed after 5 attempts (AccessDeniedException: not authorized); your credentials "
        "may not call datasync:DescribeTaskExecution: use the profile of the account the lab is deployed in "
        "(AWS_PROFILE) or ask for that permission" + FOLLOW)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__   # one line, not AWS's traceback


# ---- why emptying waits --------------------------------------------------------------------------------------------

READERS = {"exec-b": ["tiny-a", "tiny-b"], "exec-a": None, "exec-c": ["tiny-c", "tiny-d"]}


def test_emptying_everything_names_each_running_executions_datasets_and_the_one_still_planning():
    assert efs.reading_lines(READERS, None) == [
        "  execution exec-a is still planning (it may stage datasets in EFS and read them)",
        "  execution exec-b's EFS jobs read tiny-a, tiny-b",
        "  execution exec-c's EFS jobs read tiny-c, tiny-d"]


def test_emptying_one_dataset_says_which_executions_read_it_and_which_it_might_empty_under_the_other_reading():
    assert efs.reading_lines(READERS, "tiny-b") == [
        "  execution exec-a is still planning (it may stage datasets in EFS and read them)",
        "  execution exec-b's EFS jobs read tiny-a, tiny-b",
        "  execution exec-c's EFS jobs read tiny-c, tiny-d, which emptying tiny-b would delete if REMOVE is not limited to "
        "the include filter (undocumented)"]


def test_no_running_execution_gives_no_line():
    assert efs.reading_lines({}, "tiny-b") == []


# ---- what DataSync deleted -----------------------------------------------------------------------------------------

def test_the_deleted_count_stands_beside_the_datasets_own():
    assert efs.deleted_line({"Status": "SUCCESS", "FilesDeleted": 30710}, "caltech", {"files": 30607, "bytes": 9}) == (
        "DataSync deleted 30,710 files and folders; caltech has 30,607 files (and its folders): far more means REMOVE "
        "deleted outside the include filter, and the other datasets will be copied again from S3 when an EFS job "
        "needs them")


@pytest.mark.parametrize("dataset, found", [(None, None), ("caltech", None), (None, {"files": 3, "bytes": 9})])
def test_without_the_dataset_or_its_count_the_line_says_only_what_was_deleted(dataset, found):
    assert efs.deleted_line({"FilesDeleted": 1234}, dataset, found) == "DataSync deleted 1,234 files and folders"


@pytest.mark.parametrize("described", [{"Status": "SUCCESS"}, {"FilesDeleted": None}, {"FilesDeleted": "12"}])
def test_no_line_where_datasync_gives_no_count(described):
    assert efs.deleted_line(described, "caltech", {"files": 3, "bytes": 9}) is None


# ---- the lab's outputs ---------------------------------------------------------------------------------------------

def test_the_file_system_and_the_emptying_task_are_read_from_the_stacks_outputs():
    outputs = {"EfsFileSystemId": "fs-0123", "EfsEmptyTaskArn": "arn:aws:datasync:us-east-1:1:task/task-9"}
    assert efs.file_system_id(outputs) == "fs-0123"
    assert efs.empty_task_arn(outputs) == "arn:aws:datasync:us-east-1:1:task/task-9"


@pytest.mark.parametrize("outputs", [{}, {"EfsFileSystemId": ""}])
def test_outputs_without_the_file_system_are_refused_saying_where_to_find_them(outputs):
    with pytest.raises(ConfigError) as raised:
        efs.file_system_id(outputs)
    assert raised.value.field == "--outputs"
    assert raised.value.problem == ("stack output EfsFileSystemId is missing: pass the lab's cdk-outputs.json (make "
                                    "deploy writes it), or deploy the lab (`make deploy FSX=keep`)")


@pytest.mark.parametrize("outputs", [{"EfsFileSystemId": "fs-0123"}, {"EfsEmptyTaskArn": None}])
def test_a_lab_deployed_before_the_emptying_task_is_told_to_deploy_again(outputs):
    with pytest.raises(ConfigError) as raised:
        efs.empty_task_arn(outputs)
    assert raised.value.field == "--outputs"
    assert raised.value.problem == ("stack output EfsEmptyTaskArn is missing: the lab was deployed before it could empty "
                                    "EFS; deploy it again (`make deploy FSX=keep`), or pass the current cdk-outputs.json")


# ---- what EFS holds and costs ----------------------------------------------------------------------------------------

class Prices(dict):
    """A price table with EFS's two storage prices (dollars per GB-month) and its label."""

    def label(self) -> str:
        return "test prices"


PRICES = Prices(efs_standard_gb_month=0.30, efs_ia_gb_month=0.016)


class Efs:
    """DescribeFileSystems and DescribeLifecycleConfiguration as AWS answers them for one file system."""

    def __init__(self, size: dict, policies: list[dict] | None):
        self.size, self.policies, self.asked = size, policies, []

    def describe_file_systems(self, FileSystemId):
        self.asked.append(("describe_file_systems", FileSystemId))
        return {"FileSystems": [{"FileSystemId": FileSystemId, "ThroughputMode": "bursting", "SizeInBytes": self.size}]}

    def describe_lifecycle_configuration(self, FileSystemId):
        self.asked.append(("describe_lifecycle_configuration", FileSystemId))
        return {} if self.policies is None else {"LifecyclePolicies": self.policies}


SIZE = {"Value": 12_000_000_000, "Timestamp": "2026-12-05T00:00:00Z", "ValueInIA": 2_000_000_000,
        "ValueInStandard": 10_000_000_000}
POLICIES = [{"TransitionToIA": "AFTER_30_DAYS"}, {"TransitionToPrimaryStorageClass": "AFTER_1_ACCESS"}]


def test_usage_prices_each_storage_class_and_keeps_the_lifecycle_policies():
    client = Efs(SIZE, POLICIES)
    assert efs.usage(client, "fs-0123", PRICES) == {
        "file_system_id": "fs-0123", "throughput_mode": "bursting",
        "size_in_bytes": {"Value": 12_000_000_000, "ValueInIA": 2_000_000_000, "ValueInStandard": 10_000_000_000},
        "lifecycle_policies": POLICIES, "usd_per_month": 3.03, "standard_usd_per_month": 3.0,
        "ia_usd_per_month": 0.03, "prices": "test prices"}
    assert client.asked == [("describe_file_systems", "fs-0123"), ("describe_lifecycle_configuration", "fs-0123")]


def test_usage_of_a_file_system_without_sizes_or_policies_is_empty_and_free():
    assert efs.usage(Efs({}, None), "fs-0123", PRICES) == {
        "file_system_id": "fs-0123", "throughput_mode": "bursting", "size_in_bytes": {}, "lifecycle_policies": [],
        "usd_per_month": 0.0, "standard_usd_per_month": 0.0, "ia_usd_per_month": 0.0, "prices": "test prices"}


def test_the_lines_say_the_size_per_class_the_cost_the_lifecycle_and_how_to_empty_it():
    assert efs.usage_lines(efs.usage(Efs(SIZE, POLICIES), "fs-0123", PRICES)) == [
        "EFS fs-0123 holds 12.00 GB (Standard 10.00 GB, Infrequent Access 2.00 GB): $3.03 per month",
        "  lifecycle: files of 128 KiB or more move to Infrequent Access after 30 days unread and back to Standard on "
        "first read; smaller files always stay in Standard",
        "  done with the staged datasets? `dslab efs empty --yes` (or --dataset NAME): they stay in S3, and the "
        "workflow stages them again when an EFS job needs them"]


def test_a_move_to_infrequent_access_without_the_way_back_says_so():
    lines = efs.usage_lines(efs.usage(Efs(SIZE, [{"TransitionToIA": "AFTER_7_DAYS"}]), "fs-0123", PRICES))
    assert lines[1] == ("  lifecycle: files of 128 KiB or more move to Infrequent Access after 7 days unread; smaller "
                        "files always stay in Standard")


@pytest.mark.parametrize("size, line", [
    ({"Value": 10_005_000_001, "ValueInIA": 0},
     "EFS fs-0123 holds 10.01 GB (Standard 10.01 GB, Infrequent Access 0.00 GB): $3.00 per month"),
    ({"Value": 12_010_000_002, "ValueInIA": 2_005_000_001},
     "EFS fs-0123 holds 12.01 GB (Standard 10.01 GB, Infrequent Access 2.01 GB): $3.03 per month"),
    ({"Value": 10_123_456_789, "ValueInIA": 0},
     "EFS fs-0123 holds 10.12 GB (Standard 10.12 GB, Infrequent Access 0.00 GB): $3.04 per month")])
def test_sizes_are_decimal_gigabytes_and_dollars_are_rounded_to_cents(size, line):
    state = efs.usage(Efs(size, []), "fs-0123", PRICES)
    assert efs.usage_lines(state)[0] == line
    assert (state["standard_usd_per_month"], state["usd_per_month"]) == (
        {10_005_000_001: (3.0, 3.0), 12_010_000_002: (3.0, 3.03), 10_123_456_789: (3.04, 3.04)}[size["Value"]])


def test_a_file_system_described_without_sizes_holds_nothing():
    assert efs.usage_lines(efs.usage(Efs({}, []), "fs-0123", PRICES))[0] == (
        "EFS fs-0123 holds 0.00 GB (Standard 0.00 GB, Infrequent Access 0.00 GB): $0.00 per month")


def test_an_empty_file_system_without_a_lifecycle_has_no_emptying_hint():
    assert efs.usage_lines(efs.usage(Efs({"Value": 0}, []), "fs-0123", PRICES)) == [
        "EFS fs-0123 holds 0.00 GB (Standard 0.00 GB, Infrequent Access 0.00 GB): $0.00 per month",
        "  lifecycle: none (everything stays in Standard)"]


# ---- the dataset's own size, from its stats file in S3 ----------------------------------------------------------

def _stats(world, dataset: str, body: bytes) -> None:
    world.c["s3"].put_object(Bucket=BUCKET, Key=f"datasets/{dataset}.stats.json", Body=body)


def test_a_datasets_files_and_bytes_come_from_its_stats_file(world):
    _stats(world, "efs-a", b'{"files": 3, "bytes": 303, "other": 1}')
    assert efs.dataset_in_s3(world.c["s3"], BUCKET, "efs-a") == {"files": 3, "bytes": 303}


@pytest.mark.parametrize("body", [b"not json", b'{"files": 3}', b'{"files": "3", "bytes": 303}',
                                  b'{"files": 3, "bytes": 1.5}'])
def test_a_stats_file_without_whole_counts_gives_no_size(world, body):
    _stats(world, "efs-b", body)
    assert efs.dataset_in_s3(world.c["s3"], BUCKET, "efs-b") is None


def test_a_dataset_without_a_stats_file_gives_no_size(world):
    assert efs.dataset_in_s3(world.c["s3"], BUCKET, "never-uploaded") is None


def test_another_s3_error_reading_the_stats_file_is_raised(world):
    with pytest.raises(ClientError) as raised:
        efs.dataset_in_s3(world.c["s3"], "no-such-bucket-here", "efs-a")
    assert raised.value.response["Error"]["Code"] == "NoSuchBucket"


# ---- DataSync: what is running, and starting the emptying ---------------------------------------------------------

class Tasks:
    """DescribeTask per task ARN, and StartTaskExecution recording what it was asked."""

    def __init__(self, described: dict[str, dict]):
        self.described, self.asked, self.started = described, [], []

    def describe_task(self, TaskArn):
        self.asked.append(TaskArn)
        return self.described[TaskArn]

    def start_task_execution(self, **kwargs):
        self.started.append(kwargs)
        return {"TaskExecutionArn": "arn:aws:datasync:us-east-1:1:task/task-e/execution/exec-1"}


@pytest.mark.parametrize("status", ["QUEUED", "RUNNING"])
def test_a_task_queued_or_running_is_found_by_its_execution(status):
    tasks = Tasks({"sync": {"Status": "AVAILABLE"}, "empty": {"Status": status, "CurrentTaskExecutionArn": "exec-7"},
                   "later": {"Status": "RUNNING", "CurrentTaskExecutionArn": "exec-8"}})
    assert efs.running_staging(tasks, ["sync", "empty", "later"]) == "exec-7"
    assert tasks.asked == ["sync", "empty"]   # the first one under way is enough


def test_a_busy_task_without_its_executions_arn_is_named_by_its_own():
    assert efs.running_staging(Tasks({"sync": {"Status": "RUNNING"}}), ["sync"]) == "sync"


@pytest.mark.parametrize("status", ["AVAILABLE", "CREATING", "UNAVAILABLE", None])
def test_tasks_not_under_way_give_none(status):
    described = {"Status": status} if status else {}
    assert efs.running_staging(Tasks({"sync": described, "empty": described}), ["sync", "empty"]) is None


def test_emptying_one_dataset_starts_the_task_with_its_include_filter_and_everything_with_none():
    tasks = Tasks({})
    assert efs.start_empty(tasks, "arn:task-e", "caltech") == "arn:aws:datasync:us-east-1:1:task/task-e/execution/exec-1"
    assert efs.start_empty(tasks, "arn:task-e", None) == "arn:aws:datasync:us-east-1:1:task/task-e/execution/exec-1"
    assert tasks.started == [
        {"TaskArn": "arn:task-e", "Includes": [{"FilterType": "SIMPLE_PATTERN", "Value": "/caltech"}]},
        {"TaskArn": "arn:task-e"}]
