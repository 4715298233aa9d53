"""The workflow's Plan (dslab/workflow/plan.py): what the state machine and the user get from it. The plan it returns
(lanes, waits, counts), the plan.json and the job requests it stores, the reasons it refuses an experiment with, and its
helpers: a dataset's stats file, the account's quotas, FSx's storage optimization, the lab as deployed, the datasets
other running executions' EFS jobs read, the keys and lanes. AWS is botocore's Stubber or small fakes (a whole Plan runs on
in-memory S3, SSM, FSx, Service Quotas and Step Functions that answer as AWS does). The expected values are written
here."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from dslab.core.requests import FileSystemRef
from dslab.workflow import handlers
from dslab.workflow import plan as planning
from dslab.workflow.runtime import function_environment

DLIO = Path(__file__).resolve().parent.parent / "dslab" / "contracts" / "dlio" / "llama3_8b.yaml"
M5 = "ml.m5.xlarge for training job usage"


# A Plan (or a look for other executions' plans) that never returns fails its test after 5 seconds.
pytestmark = pytest.mark.timeout(5, method="signal")


def _error(code: str, status: int, operation: str, message: str = "said") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
                       operation)


def _body(data: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(data), len(data))


# ---- keys, lanes, waits, refusals ------------------------------------------------------------------------------------
def test_request_and_failure_keys_sit_under_the_executions_base():
    assert planning.request_key("results/ex-1", "job-a") == "results/ex-1/requests/job-a.json"
    assert planning.failure_key("results/ex-1", "job-a") == "results/ex-1/failures/job-a.txt"


def test_jobs_are_dealt_round_robin_into_at_most_the_lanes_asked_keeping_their_order():
    lanes = planning.deal_into_lanes([{"index": i, "name": f"j{i}"} for i in range(5)], 2)
    assert lanes == [[{"index": 0, "name": "j0"}, {"index": 2, "name": "j2"}, {"index": 4, "name": "j4"}],
                     [{"index": 1, "name": "j1"}, {"index": 3, "name": "j3"}]]


def test_more_lanes_than_jobs_give_one_lane_a_job_and_no_lanes_asked_still_give_one():
    assert planning.deal_into_lanes([{"index": 0}, {"index": 1}], 5) == [[{"index": 0}], [{"index": 1}]]
    assert planning.deal_into_lanes([{"index": 0}, {"index": 1}], 0) == [[{"index": 0}, {"index": 1}]]
    assert planning.deal_into_lanes([], 3) == [[]]


def test_a_restore_job_follows_its_writer_in_the_same_lane_even_given_as_text():
    """An index in ``following`` (a string index as the map may carry it too) joins the lane of the item before it."""
    items = [{"index": 0}, {"index": "1"}, {"index": 2}, {"index": 3}]
    assert planning.deal_into_lanes(items, 2, {1, 3}) == [[{"index": 0}, {"index": "1"}], [{"index": 2}, {"index": 3}]]
    assert planning.deal_into_lanes([{"index": 1}, {"index": 2}], 2, {1}) == [[{"index": 1}], [{"index": 2}]]


@pytest.mark.parametrize("minutes, checks, poll", [
    (0, 1, 60),          # no wait asked: one check a minute
    (1, 1, 60),
    (30, 30, 60),        # a check a minute
    (120, 120, 60),      # the most checks
    (121, 120, 61),      # more minutes than checks: the checks spread out (rounded up)
    (1440, 120, 720),    # a day: every 12 minutes
])
def test_the_fsx_wait_checks_every_minute_up_to_120_checks_then_spaces_them(minutes, checks, poll):
    assert planning.fsx_wait(minutes) == {"fsx_wait_checks": checks, "fsx_poll_seconds": poll}


def test_a_refusal_is_the_error_name_and_its_reason_cut_at_2000_characters_with_no_lanes():
    assert planning._plan_refused("ExperimentInvalid", "bad") == {
        "plan": {"error": "ExperimentInvalid", "failed": "bad"}, "lanes": []}
    long = planning._plan_refused("PlanFailed", "x" * 1999 + "yz")
    assert long["plan"]["failed"] == "x" * 1999 + "y" and long["plan"]["error"] == "PlanFailed"


# ---- keep_jobs ---------------------------------------------------------------------------------------------------------
def test_keep_jobs_are_taken_out_of_the_experiment_and_returned_as_names():
    document = {"name": "e", "keep_jobs": ["a", "b"]}
    assert planning._kept_jobs(document) == ({"name": "e"}, frozenset({"a", "b"}))
    assert document == {"name": "e", "keep_jobs": ["a", "b"]}   # the caller's document is left as it was
    assert planning._kept_jobs({"name": "e"}) == ({"name": "e"}, frozenset())
    assert planning._kept_jobs("text") == ("text", frozenset())


@pytest.mark.parametrize("keep, said", [("job-a", "str"), (["a", 3], "list"), ({"a": 1}, "dict")])
def test_keep_jobs_that_are_not_a_list_of_names_are_refused_naming_what_they_are(keep, said):
    with pytest.raises(planning.ExperimentInvalid) as raised:
        planning._kept_jobs({"name": "e", "keep_jobs": keep})
    assert str(raised.value) == f"keep_jobs: a list of job names of this execution, not {said}"


# ---- a peer's plan.json: the datasets its EFS jobs read ------------------------------------------------------------------
def test_a_peers_efs_prefixes_are_read_sorted_as_text():
    assert planning._efs_prefixes_of({"efs_prefixes": ["b", "a", 7], "jobs": []}) == ["7", "a", "b"]
    assert planning._efs_prefixes_of({"efs_prefixes": []}) == []


def test_an_older_plan_without_efs_prefixes_names_its_efs_jobs_datasets_by_prefix():
    """Before efs_prefixes: the datasets of its EFS jobs that were not skipped, their prefixes from its experiment."""
    plan_document = {
        "efs_prefixes": "not a list",
        "experiment": {"name": "old", "instance_type": "ml.m5.xlarge", "compute": "v100", "keep_jobs": ["x"],
                       "datasets": [{"name": "one", "format": "jpg", "prefix": "p/one"},
                                    {"name": "two", "format": "jpg", "prefix": "p/two"},
                                    {"name": "three", "format": "jpg", "prefix": "p/three"},
                                    {"name": "four", "format": "jpg", "prefix": "p/four"}]},
        "jobs": [{"mode": "EFS", "dataset": "two"}, {"mode": "EFS", "dataset": "one", "skip_reason": None},
                 {"mode": "EFS", "dataset": "three", "skip_reason": "FSx down"}, {"mode": "File", "dataset": "four"}]}
    assert planning._efs_prefixes_of(plan_document) == ["p/one", "p/two"]
    assert planning._efs_prefixes_of({**plan_document, "jobs": None}) == []


def test_an_older_plan_whose_experiment_no_longer_parses_names_no_datasets():
    jobs = [{"mode": "EFS", "dataset": "one"}]
    assert planning._efs_prefixes_of({"experiment": {"name": "bad", "modes": ["Nope"]}, "jobs": jobs}) == []
    assert planning._efs_prefixes_of({"experiment": {"name": "e", "keep_jobs": "x"}, "jobs": jobs}) == []
    assert planning._efs_prefixes_of({"jobs": jobs}) == []


# ---- dataset_stats ---------------------------------------------------------------------------------------------------
STATS = b'{"files": 3, "bytes": 303, "written_at": "2030-01-01T00:00:00Z", "written_by": "ana"}'
WRITE_IT = ("write it once with `dslab dataset stats s3://bkt/datasets/p/q/ --write` (it lists the prefix from your "
            "machine), or upload with `dslab dataset upload`, which writes it")


def _stats_s3(listed: dict | None = None, body: bytes | None = None, error: tuple[str, int] | None = None):
    s3 = boto3.client("s3", region_name="us-east-1")
    stub = Stubber(s3)
    stub.add_response("list_objects_v2", {"KeyCount": 1, "Contents": [{"Key": "datasets/p/q/a.jpg"}]}
                      if listed is None else listed, {"Bucket": "bkt", "Prefix": "datasets/p/q/", "MaxKeys": 1})
    if error is not None:
        stub.add_client_error("get_object", error[0], http_status_code=error[1],
                              expected_params={"Bucket": "bkt", "Key": "datasets/p/q.stats.json"})
    elif body is not None:
        stub.add_response("get_object", {"Body": _body(body)}, {"Bucket": "bkt", "Key": "datasets/p/q.stats.json"})
    stub.activate()
    return s3, stub


def test_a_datasets_stats_are_its_stats_files_counts_with_the_files_digest_and_writer():
    """One ListObjectsV2 of a key (is the prefix empty?) and one GetObject of the stats file beside the prefix."""
    s3, stub = _stats_s3(body=STATS)
    assert planning.dataset_stats(s3, "bkt", "p/q") == {
        "files": 3, "bytes": 303, "stats_file": "s3://bkt/datasets/p/q.stats.json",
        "sha256": "412502b78842cade6a9b96f0da4b045213c69de92b91cac719789c80f0fc8220",
        "written_at": "2030-01-01T00:00:00Z", "written_by": "ana"}
    stub.assert_no_pending_responses()


def test_a_listing_that_gives_only_its_contents_or_only_its_count_is_not_empty():
    for listed in ({"Contents": [{"Key": "datasets/p/q/a"}]}, {"KeyCount": 1}):
        s3, _ = _stats_s3(listed, body=b'{"files": 1, "bytes": 0}')
        found = planning.dataset_stats(s3, "bkt", "p/q")
        assert (found["files"], found["bytes"], found["written_at"], found["written_by"]) == (1, 0, None, None)


def test_an_empty_prefix_is_refused_saying_how_to_upload_it():
    s3, _ = _stats_s3({"KeyCount": 0})
    with pytest.raises(planning.ExperimentInvalid) as raised:
        planning.dataset_stats(s3, "bkt", "p/q")
    assert str(raised.value) == ("s3://bkt/datasets/p/q/ is empty; upload it first (dslab dataset upload --src DIR --to "
                                 "s3://bkt/datasets/p/q/) or fix its prefix")


@pytest.mark.parametrize("code, status", [("NoSuchKey", 404), ("AccessDenied", 403)])
def test_a_missing_stats_file_is_refused_saying_how_to_write_it(code, status):
    s3, _ = _stats_s3(error=(code, status))
    with pytest.raises(planning.ExperimentInvalid) as raised:
        planning.dataset_stats(s3, "bkt", "p/q")
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert str(raised.value) == (
        "s3://bkt/datasets/p/q/ has no stats file (s3://bkt/datasets/p/q.stats.json): the workflow reads a dataset's "
        f"file count and size from it instead of listing every object; {WRITE_IT}")


def test_another_error_reading_the_stats_file_is_raised_as_it_is():
    s3, _ = _stats_s3(error=("InternalError", 500))
    with pytest.raises(ClientError) as raised:
        planning.dataset_stats(s3, "bkt", "p/q")
    assert raised.value.response["Error"]["Code"] == "InternalError"


def test_a_stats_file_that_is_not_json_is_refused():
    s3, _ = _stats_s3(body=b"files=3")
    with pytest.raises(planning.ExperimentInvalid) as raised:
        planning.dataset_stats(s3, "bkt", "p/q")
    assert str(raised.value) == f"s3://bkt/datasets/p/q.stats.json is not JSON; {WRITE_IT}"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


@pytest.mark.parametrize("document", [
    {"files": 0, "bytes": 10}, {"files": -1, "bytes": 10}, {"files": "3", "bytes": 10}, {"bytes": 10},
    {"files": 3, "bytes": -1}, {"files": 3, "bytes": "10"}, {"files": 3}])
def test_a_stats_file_without_a_positive_file_count_and_bytes_is_refused(document):
    s3, _ = _stats_s3(body=json.dumps(document).encode())
    with pytest.raises(planning.ExperimentInvalid) as raised:
        planning.dataset_stats(s3, "bkt", "p/q")
    assert str(raised.value) == f"s3://bkt/datasets/p/q.stats.json has no valid 'files' and 'bytes'; {WRITE_IT}"


# ---- quotas ------------------------------------------------------------------------------------------------------------
def _quota(name: str, code: str | None = None, value: float | None = None) -> dict:
    quota = {"QuotaName": name, "ServiceCode": "sagemaker"}
    if code is not None:
        quota["QuotaCode"] = code
    if value is not None:
        quota["Value"] = value
    return quota


def test_applied_quotas_are_read_over_the_aws_defaults_every_page_of_both_lists():
    client = boto3.client("service-quotas", region_name="us-east-1")
    stub = Stubber(client)
    first = {"ServiceCode": "sagemaker", "MaxResults": 100}
    stub.add_response("list_aws_default_service_quotas",
                      {"Quotas": [_quota(M5, "L-1", 4.0), _quota("gone", "L-2", 9.0)], "NextToken": "t1"}, first)
    stub.add_response("list_aws_default_service_quotas", {"Quotas": [_quota("ml.p3 usage", "L-3", 0.0)]},
                      {**first, "NextToken": "t1"})
    stub.add_response("list_service_quotas", {"Quotas": [_quota(M5, "L-1", 20.0)], "NextToken": "t2"}, first)
    stub.add_response("list_service_quotas", {}, {**first, "NextToken": "t2"})
    stub.activate()
    quotas = planning.read_training_quotas(client)
    stub.assert_no_pending_responses()
    assert {n: (q.name, q.code, q.value) for n, q in quotas.items()} == {
        M5: (M5, "L-1", 20.0), "gone": ("gone", "L-2", 9.0), "ml.p3 usage": ("ml.p3 usage", "L-3", 0.0)}


def test_a_quota_listed_without_code_or_value_is_unknown_code_and_zero():
    client = boto3.client("service-quotas", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_response("list_aws_default_service_quotas", {"Quotas": [_quota("bare")]},
                      {"ServiceCode": "ec2", "MaxResults": 100})
    stub.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": "ec2", "MaxResults": 100})
    stub.activate()
    (quota,) = planning.read_quotas(client, "ec2").values()
    assert (quota.name, quota.code, quota.value) == ("bare", "?", 0.0)


# ---- FSx's storage optimization and the lab as deployed ------------------------------------------------------------------
class Fsx:
    """FSx answering DescribeFileSystems with the file system given (or the error given)."""

    def __init__(self, described: dict | None = None, error: Exception | None = None):
        self.described, self.error, self.asked = described, error, []

    def describe_file_systems(self, **kwargs):
        self.asked.append(kwargs)
        if self.error is not None:
            raise self.error
        return {"FileSystems": [self.described]}


FS = FileSystemRef("fs-0aaa", "mnt")


def test_a_storage_optimization_running_on_fsx_is_recorded_with_its_progress_and_start():
    since = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    fsx = Fsx({"AdministrativeActions": [
        {"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "Status": "IN_PROGRESS"},
        {"AdministrativeActionType": "STORAGE_OPTIMIZATION", "Status": "IN_PROGRESS", "ProgressPercent": 40,
         "RequestTime": since}]})
    assert planning.storage_optimization({"fsx": fsx}, FS) == {
        "file_system": "fs-0aaa", "action": "STORAGE_OPTIMIZATION", "status": "IN_PROGRESS", "progress_percent": 40,
        "since": "2030-01-02T03:04:05+00:00"}
    assert fsx.asked == [{"FileSystemIds": ["fs-0aaa"]}]
    text = Fsx({"AdministrativeActions": [{"AdministrativeActionType": "STORAGE_OPTIMIZATION", "Status": "PENDING",
                                           "RequestTime": "yesterday"}]})
    assert planning.storage_optimization({"fsx": text}, FS) == {
        "file_system": "fs-0aaa", "action": "STORAGE_OPTIMIZATION", "status": "PENDING", "progress_percent": None,
        "since": "yesterday"}


@pytest.mark.parametrize("status", ["PENDING", "IN_PROGRESS", "UPDATED_OPTIMIZING"])
def test_a_throughput_tier_change_not_yet_completed_is_recorded_with_the_tier_asked(status):
    """A Persistent 2 tier change is a FILE_SYSTEM_UPDATE naming LustreConfiguration.PerUnitStorageThroughput; until it
    is COMPLETED "Your read operations will see disk I/O performance between the previous level and the new level"
    (monitoring-throughput-capacity-changes.html): the run's FSx results are marked with it."""
    since = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    tier = {"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "Status": status, "RequestTime": since,
            "TargetFileSystemValues": {"LustreConfiguration": {"PerUnitStorageThroughput": 500}}}
    assert planning.storage_optimization({"fsx": Fsx({"AdministrativeActions": [tier]})}, FS) == {
        "file_system": "fs-0aaa", "action": "FILE_SYSTEM_UPDATE", "status": status, "progress_percent": None,
        "since": "2030-01-02T03:04:05+00:00", "target_mbps_per_tib": 500}
    done = {**tier, "Status": "COMPLETED"}
    assert planning.storage_optimization({"fsx": Fsx({"AdministrativeActions": [done]})}, FS) is None
    # A capacity increase's own update is no tier change: only its STORAGE_OPTIMIZATION marks the run.
    capacity = {**tier, "TargetFileSystemValues": {"StorageCapacity": 2400}}
    assert planning.storage_optimization({"fsx": Fsx({"AdministrativeActions": [capacity]})}, FS) is None


def test_no_storage_optimization_is_recorded_when_none_runs_fsx_is_down_or_not_described():
    done = {"AdministrativeActionType": "STORAGE_OPTIMIZATION", "Status": "COMPLETED"}
    assert planning.storage_optimization({"fsx": Fsx({"AdministrativeActions": [done]})}, FS) is None
    assert planning.storage_optimization({"fsx": Fsx({"AdministrativeActions": None})}, FS) is None
    assert planning.storage_optimization({"fsx": Fsx({})}, FS) is None
    assert planning.storage_optimization({"fsx": Fsx(error=_error("BadRequest", 400, "DescribeFileSystems"))}, FS) is None
    assert planning.storage_optimization({}, None) is None


SCRATCH_1200_BURSTING = {
    "fsx": "Scratch 2, 1,200 GiB (234 MB/s)", "efs": "EFS Bursting (Max I/O)", "s3_prefixes": 1,
    "express_reads_per_second": 200000.0,
    "fsx_config": {"deployment_type": "SCRATCH_2", "capacity_gib": 1200, "mbps_per_tib": 200.0, "throughput_mbps": 234.4},
    "efs_config": {"mode": "bursting", "provisioned_mibps": None, "region": "us-east-1", "performance": "maxIO"}}


def test_the_lab_is_priced_as_deployed_from_the_workflows_settings_when_fsx_is_down():
    settings = {"DSLAB_FSX_DEPLOYMENT_TYPE": "PERSISTENT_2", "DSLAB_FSX_CAPACITY_GIB": "2400",
                "DSLAB_FSX_MBPS_PER_TIB": "250", "DSLAB_EFS_THROUGHPUT_MODE": "provisioned",
                "DSLAB_EFS_THROUGHPUT_MIBPS": "64", "AWS_REGION": "eu-west-1"}
    assert planning.deployed_lab({}, settings, None).to_dict() == {
        "name": "the lab as deployed (the workflow's deploy settings)",
        "fsx": "Persistent 2 250 MB/s/TiB, 2,400 GiB (586 MB/s)", "efs": "EFS Provisioned 64 MiB/s", "s3_prefixes": 1,
        "express_reads_per_second": 200000.0,
        "fsx_config": {"deployment_type": "PERSISTENT_2", "capacity_gib": 2400, "mbps_per_tib": 250.0,
                       "throughput_mbps": 585.9},
        "efs_config": {"mode": "provisioned", "provisioned_mibps": 64.0, "region": "eu-west-1", "performance": "maxIO"}}
    assert planning.deployed_lab({}, {}, None).to_dict() == {
        "name": "the lab as deployed (the workflow's deploy settings)", **SCRATCH_1200_BURSTING}


def test_a_throughput_given_for_scratch_or_a_rate_for_bursting_efs_is_not_read():
    """Scratch 2 takes no MB/s/TiB setting and Bursting EFS no MiB/s: given anyway, they do not change the lab."""
    settings = {"DSLAB_FSX_DEPLOYMENT_TYPE": "SCRATCH_2", "DSLAB_FSX_MBPS_PER_TIB": "125",
                "DSLAB_EFS_THROUGHPUT_MODE": "bursting", "DSLAB_EFS_THROUGHPUT_MIBPS": "64"}
    assert planning.deployed_lab({}, settings, None).to_dict() == {
        "name": "the lab as deployed (the workflow's deploy settings)", **SCRATCH_1200_BURSTING}


def test_fsx_up_is_priced_as_described_not_as_deployed():
    fsx = Fsx({"StorageCapacity": 4800, "LustreConfiguration": {"DeploymentType": "PERSISTENT_2",
                                                                 "PerUnitStorageThroughput": 500}})
    lab = planning.deployed_lab({"fsx": fsx}, {"DSLAB_FSX_DEPLOYMENT_TYPE": "SCRATCH_2", "DSLAB_FSX_CAPACITY_GIB": "1200"},
                                FS).to_dict()
    assert fsx.asked == [{"FileSystemIds": ["fs-0aaa"]}]
    assert (lab["name"], lab["fsx_config"]) == ("the lab as deployed (FSx fs-0aaa as described)", {
        "deployment_type": "PERSISTENT_2", "capacity_gib": 4800, "mbps_per_tib": 500.0, "throughput_mbps": 2343.8})


def test_fsx_that_cannot_be_described_is_priced_from_the_deploy_settings():
    fsx = Fsx(error=_error("AccessDenied", 403, "DescribeFileSystems"))
    lab = planning.deployed_lab({"fsx": fsx}, {"DSLAB_FSX_CAPACITY_GIB": "2400"}, FS).to_dict()
    assert (lab["name"], lab["fsx"]) == ("the lab as deployed (the workflow's deploy settings)",
                                         "Scratch 2, 2,400 GiB (469 MB/s)")
    bare = planning.deployed_lab({"fsx": Fsx({})}, {}, FS).to_dict()
    assert bare == {"name": "the lab as deployed (FSx fs-0aaa as described)", **SCRATCH_1200_BURSTING}


def test_a_deployment_type_the_lab_does_not_build_is_priced_as_the_default_lab_of_its_size():
    assert planning.deployed_lab({}, {"DSLAB_FSX_DEPLOYMENT_TYPE": "PERSISTENT_1", "DSLAB_FSX_CAPACITY_GIB": "2400"},
                                 None).to_dict() == {
        "name": "the lab as deployed", **SCRATCH_1200_BURSTING, "fsx": "Scratch 2, 2,400 GiB (469 MB/s)",
        "fsx_config": {"deployment_type": "SCRATCH_2", "capacity_gib": 2400, "mbps_per_tib": 200.0,
                       "throughput_mbps": 468.8}}
    assert planning.deployed_lab({}, {"DSLAB_FSX_DEPLOYMENT_TYPE": "PERSISTENT_1"}, None).to_dict() == {
        "name": "the lab as deployed", **SCRATCH_1200_BURSTING}


# ---- efs_datasets_in_use -----------------------------------------------------------------------------------------------
class Executions:
    """Step Functions whose RUNNING executions are the next of ``answers`` at each listing (the last one stays)."""

    def __init__(self, *answers: list[str]):
        self.answers, self.asked = list(answers), []

    def get_paginator(self, name):
        assert name == "list_executions"
        owner = self

        class Pages:
            def paginate(self, **kwargs):
                owner.asked.append(kwargs)
                names = owner.answers.pop(0) if len(owner.answers) > 1 else owner.answers[0]
                return [{"executions": [{"name": n} for n in names[:1]]}, {"executions": [{"name": n} for n in names[1:]]},
                        {}]
        return Pages()


class Objects:
    """S3 holding the objects given (a JSON-able value, or raw bytes); others are NoSuchKey, or the error given."""

    exceptions = SimpleNamespace(ClientError=ClientError)

    def __init__(self, objects: dict, errors: dict | None = None):
        self.objects, self.errors, self.asked = objects, errors or {}, []

    def _look(self, operation, Bucket, Key):
        self.asked.append((operation, Bucket, Key))
        assert len(self.asked) < 1000, "the same objects looked for again and again, without end"
        if Key in self.errors:
            raise self.errors[Key]
        if Key not in self.objects:
            raise _error("NoSuchKey" if operation == "GetObject" else "404", 404, operation)
        value = self.objects[Key]
        return value if isinstance(value, bytes) else json.dumps(value).encode()

    def get_object(self, Bucket, Key):
        return {"Body": _body(self._look("GetObject", Bucket, Key))}

    def head_object(self, Bucket, Key):
        self._look("HeadObject", Bucket, Key)
        return {}


class Clock:
    def __init__(self, monkeypatch):
        self.now, self.sleeps = 1000.0, []
        monkeypatch.setattr("time.monotonic", lambda: self.now)
        monkeypatch.setattr("time.sleep", self.sleep)

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_other_running_executions_efs_datasets_are_found_unless_collected_or_without_efs_jobs(monkeypatch):
    clock = Clock(monkeypatch)
    sfn = Executions(["me", "b-run", "a-run", "done", "no-efs", "junk"])
    s3 = Objects({"results/a-run/plan.json": {"efs_prefixes": ["z", "y"]}, "results/b-run/plan.json": {"efs_prefixes": ["x"]},
                  "results/done/plan.json": {"efs_prefixes": ["w"]}, "results/done/results.json": {},
                  "results/no-efs/plan.json": {"efs_prefixes": []}, "results/junk/plan.json": ["not", "a", "plan"],
                  "results/me/plan.json": {"efs_prefixes": ["mine"]}})
    planning_ = []
    assert planning.efs_datasets_in_use({"s3": s3, "stepfunctions": sfn}, "bkt", "arn:sm", "me",
                                        still_planning=planning_) == {"a-run": ["y", "z"], "b-run": ["x"]}
    assert sfn.asked == [{"stateMachineArn": "arn:sm", "statusFilter": "RUNNING"}]
    assert s3.asked == [("GetObject", "bkt", "results/a-run/plan.json"), ("HeadObject", "bkt", "results/a-run/results.json"),
                        ("GetObject", "bkt", "results/b-run/plan.json"), ("HeadObject", "bkt", "results/b-run/results.json"),
                        ("GetObject", "bkt", "results/done/plan.json"), ("HeadObject", "bkt", "results/done/results.json"),
                        ("GetObject", "bkt", "results/junk/plan.json"),
                        ("GetObject", "bkt", "results/no-efs/plan.json"), ("HeadObject", "bkt", "results/no-efs/results.json")]
    assert planning_ == [] and clock.sleeps == []


def test_no_state_machine_named_looks_for_no_other_execution():
    s3, sfn = Objects({}), Executions(["a"])
    assert planning.efs_datasets_in_use({"s3": s3, "stepfunctions": sfn}, "bkt", "", "me") == {}
    assert sfn.asked == [] and s3.asked == []


def test_an_execution_still_planning_is_waited_for_until_its_plan_is_stored(monkeypatch):
    clock = Clock(monkeypatch)

    class Late(Objects):
        def get_object(self, Bucket, Key):
            if len(self.asked) == 2:
                self.objects[Key] = {"efs_prefixes": ["late"]}
            return super().get_object(Bucket, Key)
    late = Late({})
    assert planning.efs_datasets_in_use({"s3": late, "stepfunctions": Executions(["slow"])}, "bkt", "arn:sm", "me") == {
        "slow": ["late"]}
    assert clock.sleeps == [2, 2] and len(late.asked) == 4   # three looks at its plan, then its results.json


def test_an_execution_that_stores_no_plan_within_the_wait_is_left_out_and_said(monkeypatch):
    """The wait is 60 seconds scaled by the stand-in's time scale; a look every 2 seconds, scaled alike."""
    clock = Clock(monkeypatch)
    s3 = Objects({})
    left: list[str] = []
    with function_environment({"DSLAB_TIME_SCALE": "0.5"}):
        assert planning.efs_datasets_in_use({"s3": s3, "stepfunctions": Executions(["slow"])}, "bkt", "arn:sm", "me",
                                            still_planning=left) == {}
    assert clock.sleeps == [1.0] * 30 and clock.now == 1030.0
    assert len(s3.asked) == 31 and left == ["slow"]


def test_the_wait_for_a_peers_plan_is_the_one_asked(monkeypatch):
    clock = Clock(monkeypatch)
    s3 = Objects({})
    left: list[str] = []
    assert planning.efs_datasets_in_use({"s3": s3, "stepfunctions": Executions(["slow"])}, "bkt", "arn:sm", "me",
                                        wait_seconds=3) == {}
    assert clock.sleeps == [2, 2] and len(s3.asked) == 3 and left == []


def test_an_execution_that_stops_running_while_planning_is_left_out_at_once(monkeypatch):
    clock = Clock(monkeypatch)
    s3 = Objects({})
    sfn = Executions(["gone"], [])
    left: list[str] = []
    assert planning.efs_datasets_in_use({"s3": s3, "stepfunctions": sfn}, "bkt", "arn:sm", "me", still_planning=left) == {}
    assert clock.sleeps == [] and len(s3.asked) == 1 and left == ["gone"] and len(sfn.asked) == 2


def test_a_peer_plan_that_cannot_be_read_stops_the_look_with_its_error(monkeypatch):
    Clock(monkeypatch)
    for key in ("results/p/plan.json", "results/p/results.json"):
        s3 = Objects({"results/p/plan.json": {"efs_prefixes": ["a"]}}, {key: _error("InternalError", 500, "x")})
        with pytest.raises(ClientError) as raised:
            planning.efs_datasets_in_use({"s3": s3, "stepfunctions": Executions(["p"])}, "bkt", "arn:sm", "me")
        assert raised.value.response["Error"]["Code"] == "InternalError"


# ---- a whole Plan, on in-memory AWS -----------------------------------------------------------------------------------
BUCKET = "datasourcelab-data-123456789012-us-east-1"
STAGED = "staged--use1-az4--x-s3"            # the workflow's directory bucket
FSX_ID, RUNNING = "fs-0123456789abcdef0", "run-a"
SM_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:DataSourceLab-Benchmark"
FUNCTION_ENV = {
    "AWS_REGION": "us-east-1", "DSLAB_BUCKET": BUCKET, "DSLAB_FSX_ID_PARAMETER": "/datasourcelab/fsx/file-system-id",
    "DSLAB_FSX_MOUNT_PARAMETER": "/datasourcelab/fsx/mount-name", "DSLAB_ROLE_ARN": "arn:aws:iam::123456789012:role/training",
    "DSLAB_SUBNET_IDS": "subnet-0123456789abcdef0", "DSLAB_SECURITY_GROUP_IDS": "sg-0123456789abcdef0",
    "DSLAB_IMAGE_URI": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-gpu-py312",
    "DSLAB_CODE_URI": f"s3://{BUCKET}/code/x.tar.gz", "DSLAB_EFS_ID": "fs-0fedcba9876543210",
    "DSLAB_EXPRESS_BUCKET": STAGED, "DSLAB_TIME_SCALE": "0.001"}


class S3:
    """S3 in memory: objects by bucket and key, with their ContentType; a missing key is NoSuchKey (404 on HEAD)."""

    exceptions = SimpleNamespace(ClientError=ClientError)

    def __init__(self):
        self.objects: dict[tuple[str, str], tuple[bytes, str | None]] = {}

    def put_object(self, Bucket, Key, Body, ContentType=None):
        self.objects[(Bucket, Key)] = (Body if isinstance(Body, bytes) else str(Body).encode(), ContentType)
        return {}

    def get_object(self, Bucket, Key):
        if (Bucket, Key) not in self.objects:
            raise _error("NoSuchKey", 404, "GetObject")
        data, content_type = self.objects[(Bucket, Key)]
        return {"Body": _body(data), "ContentType": content_type}

    def head_object(self, Bucket, Key):
        if (Bucket, Key) not in self.objects:
            raise _error("404", 404, "HeadObject")
        return {}

    def delete_object(self, Bucket, Key):
        self.objects.pop((Bucket, Key), None)
        return {}

    def list_objects_v2(self, Bucket, Prefix="", MaxKeys=1000):
        keys = sorted(k for b, k in self.objects if b == Bucket and k.startswith(Prefix))[:MaxKeys]
        return {"KeyCount": len(keys), **({"Contents": [{"Key": k} for k in keys]} if keys else {})}


class Ssm:
    exceptions = SimpleNamespace(ClientError=ClientError)

    def __init__(self, parameters: dict[str, str]):
        self.parameters = parameters

    def get_parameters(self, Names):
        return {"Parameters": [{"Name": n, "Value": self.parameters[n]} for n in Names if n in self.parameters]}


class Lab:
    """The deployed lab the Plan function sees: its clients (in memory) and its environment."""

    def __init__(self):
        fsx = Fsx({"FileSystemId": FSX_ID, "Lifecycle": "AVAILABLE", "StorageCapacity": 1200,
                   "LustreConfiguration": {"DeploymentType": "SCRATCH_2"}})
        fsx.exceptions = SimpleNamespace(ClientError=ClientError)
        self.fsx_id = FSX_ID
        self.c = {"s3": S3(), "fsx": fsx, "service-quotas": Quotas({}), "stepfunctions": Executions([RUNNING]),
                  "ssm": Ssm({"/datasourcelab/fsx/file-system-id": FSX_ID, "/datasourcelab/fsx/mount-name": "abcdefgh"})}
        self.overrides: dict = {}
        for i in range(3):
            self.c["s3"].put_object(Bucket=BUCKET, Key=f"datasets/tiny/c1/img-{i}.jpg", Body=b"x" * (100 + i))
        self.write_stats(BUCKET, "tiny")
        self.put_json(f"results/{RUNNING}/plan.json", {"efs_prefixes": ["tiny"]})

    def put_json(self, key: str, document, bucket: str = BUCKET) -> None:
        self.c["s3"].put_object(Bucket=bucket, Key=key, Body=json.dumps(document).encode())

    def write_stats(self, bucket: str, name: str, files: int = 3, size: int = 303) -> None:
        self.put_json(f"datasets/{name}.stats.json", {"files": files, "bytes": size, "format": "jpg",
                                                     "written_at": "2030-01-01T00:00:00Z"}, bucket)

    def clients(self) -> dict:
        return {**self.c, **self.overrides}


@pytest.fixture
def cloud(monkeypatch) -> Lab:
    """A fresh lab whose clients the Plan function gets."""
    lab = Lab()
    monkeypatch.setattr(planning, "function_clients", lab.clients)
    return lab


class Quotas:
    """Service Quotas listing the quotas given as applied values (no defaults), or failing with ``error``."""

    def __init__(self, applied: dict[str, float] | None = None, error: Exception | None = None):
        self.applied, self.error = applied or {}, error

    def get_paginator(self, name):
        owner = self

        class Pages:
            def paginate(self, **kwargs):
                if owner.error is not None:
                    raise owner.error
                listed = owner.applied if name == "list_service_quotas" else {}
                return [{"Quotas": [_quota(n, "L-" + n[:2], v) for n, v in listed.items()]}]
        return Pages()


class Wrapped:
    """A client that answers as the lab's, except the operations given (a function of the call's parameters)."""

    def __init__(self, real, **answers):
        self.real, self.answers, self.exceptions = real, answers, real.exceptions

    def __getattr__(self, name):
        method = getattr(self.real, name)
        answer = self.answers.get(name)

        def call(**kwargs):
            return answer(kwargs) if answer is not None else method(**kwargs)
        return call


def _clients(cloud, **fakes):
    """The Plan function's clients: the lab's, with the fakes given in place (a function: of the lab's client)."""
    for name, fake in fakes.items():
        cloud.overrides[name] = fake(cloud.c[name]) if callable(fake) and not hasattr(fake, "get_paginator") else fake


def _experiment(*trials, **fields) -> dict:
    return {"name": "pl", "instance_type": "ml.m5.xlarge", "compute": "v100", "trials": list(trials), **fields}


def _trial(name: str = "base", modes=("File",), datasets=("tiny",), **fields) -> dict:
    return {"name": name, "datasets": [{"name": d, "format": "jpg"} for d in datasets], "modes": list(modes), **fields}


def _plan(cloud, experiment, execution="ex-p", **env):
    """The Plan function's answer to an event with this experiment (and execution, and state machine)."""
    event = {"experiment": experiment, **({"execution": execution} if execution else {})}
    if "state_machine" in env:
        event["state_machine"] = env.pop("state_machine")
    with function_environment({**FUNCTION_ENV, **env}):
        return handlers.plan(event, None)


def _stored(cloud, key: str) -> tuple[dict, str, str]:
    got = cloud.c["s3"].get_object(Bucket=BUCKET, Key=key)
    text = got["Body"].read().decode()
    return json.loads(text), got["ContentType"], text


def _lanes(result) -> list[list[tuple]]:
    return [[(i["index"], i["mode"], i.get("skip"), i.get("express")) for i in lane] for lane in result["lanes"]]


TINY_STATS = {"files": 3, "bytes": 303, "stats_file": f"s3://{BUCKET}/datasets/tiny.stats.json",
              "sha256": "c82e8685319af2ea26cdbe3ce935ea38ee8c368137e74fc65536c74f132578cf",
              "written_at": "2030-01-01T00:00:00Z", "written_by": None}


def test_a_plan_stores_every_request_and_plan_json_and_deals_the_jobs_into_the_lanes_the_quota_allows(cloud):
    """File, FSx and EFS jobs on one dataset: a request per job (JSON, under requests/), plan.json with what every later
    step reads, the EFS datasets another running execution reads (stored again in plan.json, joined in the sync's
    include filter; its own execution, listed as running too, is not counted); the quota on ml.m5.xlarge (2) lowers the lanes from 4 to 2."""
    cloud.put_json(f"results/{RUNNING}/plan.json", {"efs_prefixes": ["zeta", "tiny"]})
    def optimizing(kwargs):
        answer = cloud.c["fsx"].describe_file_systems(**kwargs)
        answer["FileSystems"][0]["AdministrativeActions"] = [
            {"AdministrativeActionType": "STORAGE_OPTIMIZATION", "Status": "IN_PROGRESS", "ProgressPercent": 50}]
        return answer
    _clients(cloud, fsx=lambda real: Wrapped(real, describe_file_systems=optimizing),
             stepfunctions=Executions(["ex-main", RUNNING]), **{"service-quotas": Quotas({M5: 2.0})})
    result = _plan(cloud, _experiment(_trial(modes=("File", "FSx", "EFS"))), "ex-main",
                   state_machine=SM_ARN)
    file, fsx, efs = "dsl-tiny-file-r0-46f6cc90", "dsl-tiny-fsx-r0-1a93cf8a", "dsl-tiny-efs-r0-99b73a2b"
    assert result == {
        "plan": {"experiment": "pl", "bucket": BUCKET, "base": "results/ex-main", "plan_key": "results/ex-main/plan.json",
                 "job_count": 3, "max_concurrency": 2, "efs_include": "/tiny|/zeta", "fsx_jobs": 1, "express_datasets": 0,
                 "express_wait_checks": 20, "express_max_waits": 120, "fsx_wait_checks": 120, "fsx_poll_seconds": 60,
                 "efs_wait_checks": 180, "teardown_fsx": False, "fsx_available": True},
        "lanes": [[{"index": 0, "name": file, "mode": "File"}, {"index": 2, "name": efs, "mode": "EFS"}],
                  [{"index": 1, "name": fsx, "mode": "FSx"}]]}
    for name, channel in ((file, "S3DataSource"), (fsx, "FileSystemDataSource"), (efs, "FileSystemDataSource")):
        request, content_type, _ = _stored(cloud, f"results/ex-main/requests/{name}.json")
        assert (request["TrainingJobName"], content_type) == (name, "application/json")
        assert channel in request["InputDataConfig"][0]["DataSource"]
        assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600}
    stored, content_type, text = _stored(cloud, "results/ex-main/plan.json")
    assert content_type == "application/json" and text.startswith('{\n  "express_prefixes": [],\n  "express_bucket": ')
    job = {"dataset": "tiny", "repeat": 0, "trial": "base", "storage": "standard", "instance_type": "ml.m5.xlarge",
           "instance_count": 1, "epochs": 1, "format": "jpg", "kept": False, "skip_reason": None}
    assert stored.pop("jobs") == [{"index": 0, "name": file, "mode": "File", **job},
                                  {"index": 1, "name": fsx, "mode": "FSx", **job},
                                  {"index": 2, "name": efs, "mode": "EFS", **job}]
    experiment, environment, lab = stored.pop("experiment"), stored.pop("environment"), stored.pop("lab")
    assert (experiment["name"], [t["modes"] for t in experiment["trials"]]) == ("pl", [["File", "FSx", "EFS"]])
    assert (environment["bucket"], environment["fsx"], environment["express_bucket"]) == (
        BUCKET, {"file_system_id": cloud.fsx_id, "mount_name": "abcdefgh"}, STAGED)
    assert lab["name"] == f"the lab as deployed (FSx {cloud.fsx_id} as described)"
    assert stored == {
        "express_prefixes": [], "express_bucket": STAGED, "execution": "ex-main", "experiment_hash": "032181ac368e7d9e",
        "fsx_available": True, "fsx_reason": "", "fsx_capacity_gib": 1200,
        "fsx_storage_optimization": {"file_system": cloud.fsx_id, "action": "STORAGE_OPTIMIZATION", "status": "IN_PROGRESS",
                                     "progress_percent": 50,
                                     "since": None},
        "fsx_paths": ["/datasets/tiny"], "efs_prefixes": ["tiny"],
        "fsx_datasets": [{"path": "/datasets/tiny", "written_at": "2030-01-01T00:00:00Z"}],
        "dataset_stats": {"tiny": TINY_STATS},
        "quotas": {"checked": {M5: 2.0}, "notes": [
            "max_concurrency lowered from 4 to 2: quota 'ml.m5.xlarge for training job usage' is 2 and each job needs 1"],
            "concurrency": 2},
        "backend": "aws", "efs_in_use": {RUNNING: ["tiny", "zeta"]}}


def test_fsx_down_skips_the_fsx_jobs_saying_why_and_plans_the_rest(cloud):
    """No FSx parameters: the FSx job is planned without a request (skipped, FSx's reason in plan.json), no FSx path
    waits; without a state machine named no other execution is looked for; the lab is the deploy settings'."""
    _clients(cloud, **{"service-quotas": Quotas({})})
    result = _plan(cloud, _experiment(_trial(modes=("FSx", "EFS"))), "ex-down", DSLAB_FSX_ID_PARAMETER="/gone/id",
                   DSLAB_FSX_CAPACITY_GIB="2400", DSLAB_BACKEND="local")
    reason = "FSx for Lustre is not deployed (its stack is down): bring it back with `dslab fsx up`"
    plan = result["plan"]
    assert (plan["fsx_available"], plan["fsx_jobs"], plan["efs_include"], plan["max_concurrency"], plan["job_count"]) == (
        False, 0, "/tiny", 4, 2)
    assert _lanes(result) == [[(0, "FSx", True, None)], [(1, "EFS", None, None)]]
    stored, content_type, text = _stored(cloud, "results/ex-down/plan.json")
    assert content_type == "application/json" and text.startswith('{\n  "express_prefixes": [],\n  "express_bucket": ')
    assert [(j["mode"], j["skip_reason"]) for j in stored["jobs"]] == [("FSx", reason), ("EFS", None)]
    assert (stored["fsx_available"], stored["fsx_reason"], stored["fsx_paths"], stored["fsx_datasets"],
            stored["efs_prefixes"], stored["fsx_capacity_gib"], stored["backend"], stored["fsx_storage_optimization"]) == (
        False, reason, [], [], ["tiny"], 2400, "local", None)
    assert stored["lab"]["name"] == "the lab as deployed (the workflow's deploy settings)"
    assert stored["quotas"] == {"checked": {}, "concurrency": 4, "notes": [
        "quota 'ml.m5.xlarge for training job usage' is not listed by Service Quotas; not checked"]}
    assert "efs_in_use" not in stored
    requests = cloud.c["s3"].list_objects_v2(Bucket=BUCKET, Prefix="results/ex-down/requests/")["Contents"]
    assert [o["Key"].rsplit("-", 1)[0] for o in requests] == ["results/ex-down/requests/dsl-tiny-efs-r0"]


def test_fsx_that_cannot_be_looked_up_skips_its_jobs_naming_the_error(cloud):
    def refuse(kwargs):
        raise _error("AccessDeniedException", 400, "GetParameters", "no ssm")
    _clients(cloud, ssm=lambda real: Wrapped(real, get_parameters=refuse),
             **{"service-quotas": Quotas({})})
    result = _plan(cloud, _experiment(_trial(modes=("FSx", "File"))), "ex-ssm")
    reason = ("FSx could not be looked up: AWS GetParameters failed (AccessDeniedException: no ssm); the Plan function's "
              "role may not call GetParameters: deploy the lab again so the role has it (`make deploy FSX=keep`); a bucket "
              "policy or an organization's SCP can also refuse it")
    assert result["plan"]["fsx_available"] is False and _lanes(result) == [[(0, "FSx", True, None)],
                                                                           [(1, "File", None, None)]]
    stored, _, _ = _stored(cloud, "results/ex-ssm/plan.json")
    assert (stored["fsx_reason"], stored["jobs"][0]["skip_reason"], stored["jobs"][1]["skip_reason"]) == (
        reason, reason, None)


def test_quotas_that_cannot_be_read_are_said_and_the_experiments_concurrency_stands(cloud):
    _clients(cloud, **{"service-quotas": Quotas(error=_error(
        "TooManyRequestsException", 400, "ListAWSDefaultServiceQuotas", "slow"))})
    result = _plan(cloud, _experiment(_trial(modes=("File",)), max_concurrency=3), "ex-noquota")
    assert result["plan"]["max_concurrency"] == 3
    stored, _, _ = _stored(cloud, "results/ex-noquota/plan.json")
    assert stored["quotas"] == {"checked": {}, "concurrency": 3, "notes": [
        "training quotas not checked (AWS ListAWSDefaultServiceQuotas failed (TooManyRequestsException: slow); AWS is "
        "throttling this account's requests (other tools calling the same API share the rate): it passes: what stopped "
        "here can start again later)"]}


def test_a_quota_too_small_for_one_job_refuses_the_experiment(cloud):
    _clients(cloud, **{"service-quotas": Quotas({M5: 1.0})})
    result = _plan(cloud, _experiment(_trial(instance_count=2)), "ex-small")
    assert result["lanes"] == [] and result["plan"]["error"] == "ExperimentInvalid"
    assert result["plan"]["failed"].startswith(
        "experiment: instance_type: the account's SageMaker quota 'ml.m5.xlarge for training job usage' (L-ml) is 1 in "
        "us-east-1, and a job of this experiment needs 2 instance(s): it could never start")


def test_an_invalid_experiment_is_refused_with_what_is_wrong(cloud):
    result = _plan(cloud, _experiment(_trial(modes=("Nope",))), "ex-bad")
    assert result == {"lanes": [], "plan": {"error": "ExperimentInvalid", "failed": (
        "experiment: trials[0].modes[0]: unknown mode 'Nope' (allowed: File, FastFile, Pipe, FSx, EFS, Script)")}}


def test_an_event_without_experiment_plans_the_default_one_whose_dataset_is_not_uploaded(cloud):
    assert _plan(cloud, None, None)["plan"] == {"error": "ExperimentInvalid", "failed": (
        f"experiment: dataset 'caltech-jpg-1x': s3://{BUCKET}/datasets/caltech-jpg-1x/ is empty; upload it first (dslab "
        f"dataset upload --src DIR --to s3://{BUCKET}/datasets/caltech-jpg-1x/) or fix its prefix")}


def test_a_lab_setting_the_functions_cannot_read_refuses_the_experiment(cloud):
    result = _plan(cloud, _experiment(_trial()), "ex-env", DSLAB_BUCKET="")
    assert result == {"lanes": [], "plan": {"error": "ExperimentInvalid", "failed": (
        "environment.bucket: is missing: the lab's stack outputs provide it (cdk deploy --outputs-file, or a deployed "
        "DataSourceLab stack)")}}


def test_a_dataset_not_uploaded_is_refused_naming_it(cloud):
    _clients(cloud, **{"service-quotas": Quotas({})})
    result = _plan(cloud, _experiment(_trial(datasets=("tiny", "nope"))), "ex-nope")
    assert result == {"lanes": [], "plan": {"error": "ExperimentInvalid", "failed": (
        f"experiment: dataset 'nope': s3://{BUCKET}/datasets/nope/ is empty; upload it first (dslab dataset upload "
        f"--src DIR --to s3://{BUCKET}/datasets/nope/) or fix its prefix")}}


def test_a_failure_reading_s3_stops_the_plan_saying_what_failed(cloud):
    def fail(kwargs):
        raise _error("InternalError", 500, "ListObjectsV2", "boom")
    _clients(cloud, s3=lambda real: Wrapped(real, list_objects_v2=fail))
    result = _plan(cloud, _experiment(_trial()), "ex-fail")
    assert result == {"lanes": [], "plan": {"error": "PlanFailed", "failed": (
        "Plan could not finish: AWS ListObjectsV2 failed (InternalError: boom); a temporary failure on AWS's side: it "
        "passes: what stopped here can start again later")}}


def test_an_express_only_dataset_is_read_from_the_directory_bucket_once_it_wakes(cloud, monkeypatch):
    """A dataset only Express jobs read may sit in the directory bucket alone: the bucket is asked until it answers
    (503 while inactive), then its stats file is read; its Express job waits for the staging."""
    cloud.c["s3"].put_object(Bucket=STAGED, Key="datasets/xonly/a.jpg", Body=b"x")
    cloud.write_stats(STAGED, "xonly", files=1, size=1)
    clock = Clock(monkeypatch)
    answers = [_error("SlowDown", 503, "ListObjectsV2"), _error("SlowDown", 503, "ListObjectsV2")]

    def wake(kwargs):
        if kwargs["Bucket"] == STAGED and kwargs.get("Prefix") == "datasets/" and answers:
            raise answers.pop(0)
        return cloud.c["s3"].list_objects_v2(**kwargs)
    _clients(cloud, s3=lambda real: Wrapped(real, list_objects_v2=wake), **{"service-quotas": Quotas({})})
    result = _plan(cloud, _experiment(_trial(), _trial("fast", ("FastFile",), ("xonly",), storage="express")), "ex-x",
                   DSLAB_TIME_SCALE="1")
    assert clock.sleeps == [1.0, 2.0]
    plan = result["plan"]
    assert (plan["express_datasets"], plan["job_count"]) == (1, 2)
    assert _lanes(result) == [[(0, "File", None, None)], [(1, "FastFile", None, True)]]
    stored, _, _ = _stored(cloud, "results/ex-x/plan.json")
    assert stored["express_prefixes"] == ["xonly"] and stored["jobs"][1]["storage"] == "express"
    assert stored["dataset_stats"]["xonly"]["stats_file"] == f"s3://{STAGED}/datasets/xonly.stats.json"


def test_a_directory_bucket_that_stays_inactive_past_the_wake_time_refuses_the_dataset(cloud, monkeypatch):
    """The wake gives up once its next wait would pass 120 seconds (times the time scale, 2 here): the plan stops with the bucket's last error."""
    clock = Clock(monkeypatch)

    def asleep(kwargs):
        if kwargs["Bucket"] == STAGED:
            raise _error("SlowDown", 503, "ListObjectsV2")
        return cloud.c["s3"].list_objects_v2(**kwargs)
    _clients(cloud, s3=lambda real: Wrapped(real, list_objects_v2=asleep), **{"service-quotas": Quotas({})})
    result = _plan(cloud, _experiment(_trial("fast", ("FastFile",), ("xgone",), storage="express")), "ex-asleep",
                   DSLAB_TIME_SCALE="2")
    assert clock.sleeps == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert result == {"lanes": [], "plan": {"error": "PlanFailed", "failed": (
        "Plan could not finish: AWS ListObjectsV2 failed (SlowDown: said); AWS is throttling this account's requests "
        "(other tools calling the same API share the rate): it passes: what stopped here can start again later")}}


def test_a_dataset_standard_jobs_read_is_not_looked_for_in_the_directory_bucket(cloud):
    cloud.c["s3"].put_object(Bucket=STAGED, Key="datasets/xboth/a.jpg", Body=b"x")
    cloud.write_stats(STAGED, "xboth", files=1, size=1)
    _clients(cloud, **{"service-quotas": Quotas({})})
    result = _plan(cloud, _experiment(_trial(datasets=("xboth",)),
                                      _trial("fast", ("FastFile",), ("xboth",), storage="express")), "ex-both")
    assert result["plan"]["failed"].startswith(f"experiment: dataset 'xboth': s3://{BUCKET}/datasets/xboth/ is empty")
    alone = _plan(cloud, _experiment(_trial("fast", ("FastFile",), ("xboth",), storage="express")), "ex-nox",
                  DSLAB_EXPRESS_BUCKET="")
    assert alone["plan"]["failed"].startswith(f"experiment: dataset 'xboth': s3://{BUCKET}/datasets/xboth/ is empty")


def test_jobs_an_earlier_attempt_finished_are_kept_and_not_sent_again(cloud):
    _clients(cloud, **{"service-quotas": Quotas({})})
    first = _plan(cloud, _experiment(_trial(modes=("File", "EFS"))), "ex-keep")
    efs_name = first["lanes"][1][0]["name"]
    cloud.c["s3"].delete_object(Bucket=BUCKET, Key=f"results/ex-keep/requests/{efs_name}.json")
    again = _plan(cloud, {**_experiment(_trial(modes=("File", "EFS"))), "keep_jobs": [efs_name]}, "ex-keep")
    assert _lanes(again) == [[(0, "File", None, None)], [(1, "EFS", True, None)]]
    assert again["plan"]["efs_include"] == ""
    stored, _, _ = _stored(cloud, "results/ex-keep/plan.json")
    assert [(j["kept"], j["skip_reason"]) for j in stored["jobs"]] == [
        (False, None), (True, "kept: an earlier attempt of this execution finished it")]
    assert stored["efs_prefixes"] == [] and "keep_jobs" not in stored["experiment"]
    listed = cloud.c["s3"].list_objects_v2(Bucket=BUCKET, Prefix=f"results/ex-keep/requests/{efs_name}").get("KeyCount")
    assert listed == 0
    bad = _plan(cloud, {**_experiment(_trial()), "keep_jobs": "all"}, "ex-keep")
    assert bad["plan"] == {"error": "ExperimentInvalid", "failed": "keep_jobs: a list of job names of this execution, not str"}


def test_a_checkpoint_trials_restore_follows_its_writer_and_neither_waits_for_data(cloud):
    """Checkpoint jobs are mode Checkpoint in the Run map (they wait for no data), plan.json names their target and
    whether each restores; a plan without execution is 'manual'; the experiment's FSx wait and teardown are passed on."""
    _clients(cloud, **{"service-quotas": Quotas({})})
    checkpoint = {"name": "ckpt", "workload": {"file": "llama3_8b.yaml", "dlio": yaml.safe_load(DLIO.read_text()),
                                               "scale": 1e-5},
                  "checkpoint": {"targets": ["s3"], "writes": 2, "reads": 1, "seconds_between": 0}}
    result = _plan(cloud, _experiment(_trial(), checkpoint, max_run_seconds=600, max_concurrency=3,
                                      fsx_import_wait_minutes=240, teardown_fsx=True), None)
    plan = result["plan"]
    assert (plan["base"], plan["job_count"], plan["fsx_wait_checks"], plan["fsx_poll_seconds"], plan["teardown_fsx"],
            plan["max_concurrency"]) == ("results/manual", 3, 120, 120, True, 3)
    assert _lanes(result) == [[(0, "File", None, None)], [(1, "Checkpoint", None, None), (2, "Checkpoint", None, None)]]
    stored, _, _ = _stored(cloud, "results/manual/plan.json")
    assert [(j["mode"], j.get("checkpoint_target"), j.get("checkpoint_restore"), j["format"]) for j in stored["jobs"]] == [
        ("File", None, None, "jpg"), ("File", "s3", False, "checkpoint"), ("File", "s3", True, "checkpoint")]
    assert "checkpoint_target" not in stored["jobs"][0] and stored["execution"] == "manual"


def test_an_express_only_dataset_in_neither_bucket_is_refused_as_missing_from_the_data_bucket(cloud):
    result = _plan(cloud, _experiment(_trial("fast", ("FastFile",), ("xnone",), storage="express")), "ex-none")
    assert result == {"lanes": [], "plan": {"error": "ExperimentInvalid", "failed": (
        f"experiment: dataset 'xnone': s3://{BUCKET}/datasets/xnone/ is empty; upload it first (dslab dataset upload "
        f"--src DIR --to s3://{BUCKET}/datasets/xnone/) or fix its prefix")}}


def test_a_plan_refused_by_the_functions_role_says_the_role_may_not_call_it(cloud):
    def refuse(kwargs):
        raise _error("AccessDenied", 403, "ListObjectsV2", "no list")
    _clients(cloud, s3=lambda real: Wrapped(real, list_objects_v2=refuse))
    assert _plan(cloud, _experiment(_trial()), "ex-denied")["plan"] == {"error": "PlanFailed", "failed": (
        "Plan could not finish: AWS ListObjectsV2 failed (AccessDenied: no list); the Plan function's role may not call "
        "ListObjectsV2: deploy the lab again so the role has it (`make deploy FSX=keep`); a bucket policy or an "
        "organization's SCP can also refuse it")}


def test_quotas_the_functions_role_may_not_read_are_said_naming_the_role(cloud):
    _clients(cloud, **{"service-quotas": Quotas(error=_error(
        "AccessDeniedException", 400, "ListAWSDefaultServiceQuotas", "no quotas"))})
    _plan(cloud, _experiment(_trial()), "ex-quota-denied")
    stored, _, _ = _stored(cloud, "results/ex-quota-denied/plan.json")
    assert stored["quotas"]["notes"] == [
        "training quotas not checked (AWS ListAWSDefaultServiceQuotas failed (AccessDeniedException: no quotas); the Plan "
        "function's role may not call ListAWSDefaultServiceQuotas: deploy the lab again so the role has it (`make deploy "
        "FSX=keep`); a bucket policy or an organization's SCP can also refuse it)"]


def test_more_instances_than_a_sharded_datasets_objects_are_refused_as_its_stats_file_counts_them(cloud):
    result = _plan(cloud, _experiment(_trial(instance_count=4, distribution="ShardedByS3Key")), "ex-shard")
    assert result == {"lanes": [], "plan": {"error": "ExperimentInvalid", "failed": (
        "experiment: trial 'base': instance_count: 4 instances but dataset 'tiny' has 3 objects, so 1 instance would get "
        "none and fail the job (allowed: at most 3 instances, or more objects)")}}


def test_a_plan_without_efs_jobs_names_no_efs_datasets_even_where_another_execution_reads_some(cloud):
    result = _plan(cloud, _experiment(_trial(modes=("File",))), "ex-noefs", state_machine=SM_ARN)
    assert result["plan"]["efs_include"] == ""
    stored, _, _ = _stored(cloud, "results/ex-noefs/plan.json")
    assert stored["efs_prefixes"] == [] and "efs_in_use" not in stored


def test_a_dataset_listed_after_a_checkpoint_workload_is_still_sized(cloud):
    """A checkpoint trial's workload is no S3 dataset: it is passed over, and the datasets after it are read."""
    checkpoint = {"name": "ckpt", "workload": {"file": "llama3_8b.yaml", "dlio": yaml.safe_load(DLIO.read_text()),
                                               "scale": 1e-5},
                  "checkpoint": {"targets": ["s3"], "writes": 2, "reads": 1, "seconds_between": 0}}
    _plan(cloud, _experiment(checkpoint, _trial(), max_run_seconds=600), "ex-ck-first")
    stored, _, _ = _stored(cloud, "results/ex-ck-first/plan.json")
    assert stored["dataset_stats"] == {"tiny": TINY_STATS}


def test_a_kept_fsx_job_says_it_was_kept_even_while_fsx_is_down(cloud):
    first = _plan(cloud, _experiment(_trial(modes=("File", "FSx"))), "ex-kfsx")
    fsx_name = first["lanes"][1][0]["name"]
    _plan(cloud, {**_experiment(_trial(modes=("File", "FSx"))), "keep_jobs": [fsx_name]}, "ex-kfsx",
          DSLAB_FSX_ID_PARAMETER="/gone/id")
    stored, _, _ = _stored(cloud, "results/ex-kfsx/plan.json")
    assert [(j["mode"], j["kept"], j["skip_reason"]) for j in stored["jobs"]] == [
        ("File", False, None), ("FSx", True, "kept: an earlier attempt of this execution finished it")]


def test_a_dataset_that_lives_in_efs_is_not_looked_for_in_s3_and_the_ones_after_it_are(cloud):
    """A dataset with source: efs has no S3 prefix or stats file: it is passed over, and the datasets after it are read."""
    efs_trial = {"name": "onefs", "modes": ["EFS"],
                 "datasets": [{"name": "inefs", "format": "jpg", "source": "efs", "files": 3, "bytes": "303KB"}]}
    result = _plan(cloud, _experiment(efs_trial, _trial()), "ex-efs-first")
    assert result["plan"]["job_count"] == 2
    stored, _, _ = _stored(cloud, "results/ex-efs-first/plan.json")
    assert stored["dataset_stats"] == {"tiny": TINY_STATS}


def test_the_jobs_are_checked_on_the_fsx_described_not_on_the_one_cdk_json_would_deploy(cloud):
    """A 3 TB dataset (2,794 GiB) on FSx: the file system described holds 4,800 GiB, so Plan plans the job, where
    cdk.json's 1,200 GiB could not hold it; on a 1,200 GiB file system described, Plan refuses the experiment."""
    cloud.write_stats(BUCKET, "tiny", files=2000, size=3 * 10 ** 12)

    def fsx_of(gib: int) -> Fsx:
        fsx = Fsx({"FileSystemId": FSX_ID, "Lifecycle": "AVAILABLE", "StorageCapacity": gib,
                   "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 500}})
        fsx.exceptions = SimpleNamespace(ClientError=ClientError)
        return fsx
    _clients(cloud, fsx=fsx_of(4800), **{"service-quotas": Quotas({})})
    result = _plan(cloud, _experiment(_trial(modes=("FSx",))), "ex-big")
    assert (result["plan"]["fsx_available"], _lanes(result)) == (True, [[(0, "FSx", None, None)]])
    _clients(cloud, fsx=fsx_of(1200))
    refused = _plan(cloud, _experiment(_trial(modes=("FSx",))), "ex-small")
    assert (refused["plan"]["error"], refused["lanes"]) == ("ExperimentInvalid", [])
    assert "cannot hold 2,794 GiB" in refused["plan"]["failed"], refused["plan"]["failed"]


def test_a_script_jobs_request_is_tagged_with_its_datasets_uri_and_stats_file(cloud):
    """A job whose script loads the data itself has no channel: its tags say what it read (SageMaker's lineage
    records a channel's), from the stats file Plan read."""
    _clients(cloud, **{"service-quotas": Quotas({})})
    result = _plan(cloud, _experiment(_trial(modes=("Script",))), "ex-script")
    name = result["lanes"][0][0]["name"]
    request, _, _ = _stored(cloud, f"results/ex-script/requests/{name}.json")
    tags = {t["Key"]: t["Value"] for t in request["Tags"] if t["Key"].startswith("dslab:dataset-")}
    assert tags == {"dslab:dataset-uri": f"s3://{BUCKET}/datasets/tiny/", "dslab:dataset-files": "3",
                    "dslab:dataset-bytes": "303", "dslab:dataset-stats-sha256": TINY_STATS["sha256"]}
