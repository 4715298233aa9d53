"""CheckFsxData's reactions (dslab/workflow/check_fsx_data.py): one readiness check of the data the FSx jobs read, run
through the function's handler in the fault world. What the state machine gets back (ready, final, the check count,
the reason a user reads), the import task it asks FSx for, and how each FSx or AWS error turns into waiting or
stopping."""

from __future__ import annotations

import datetime as dt

import pytest
from botocore.exceptions import ClientError

from dslab.emulator.patches import HOOKS, ServiceRefusal
from dslab.workflow import handlers
from dslab.workflow.check_fsx_data import check

from .fault_world import BUCKET, run_function
from .fault_world import world  # noqa: F401

S3 = f"s3://{BUCKET}/datasets"   # the FSx association links /datasets to this S3 prefix


@pytest.fixture
def fsx(world):
    """FSx's stand-in hooks as the world set them, put back after the test; created import tasks are recorded."""
    saved = HOOKS.fsx_repository, HOOKS.fsx_create_task, HOOKS.api_fault
    created: list[dict] = []

    def create(params):
        created.append({k: params.get(k) for k in ("Type", "FileSystemId", "Paths", "Report")})
        return {"TaskId": f"task-{len(created):017d}", "Lifecycle": "PENDING", "Type": params["Type"],
                "FileSystemId": params["FileSystemId"], "Paths": params.get("Paths", [])}
    HOOKS.fsx_create_task = create
    yield created
    HOOKS.fsx_repository, HOOKS.fsx_create_task, HOOKS.api_fault = saved


def _document(world, *names: str) -> dict:
    """A plan whose FSx jobs read the datasets named, each uploaded (2030) after FSx's link to S3 was made (2020)."""
    return {**world.plan_document("x"), "fsx_paths": [f"/datasets/{n}" for n in names],
            "fsx_datasets": [{"path": f"/datasets/{n}", "written_at": "2030-01-01T00:00:00Z"} for n in names]}


def _check(world, document: dict, *, checks=0, wait_checks=5, key="results/exec-reactions/plan.json") -> dict:
    world.put_json(key, document)
    plan = {"bucket": BUCKET, "plan_key": key, **({"fsx_wait_checks": wait_checks} if wait_checks else {})}
    event = {"plan": plan, **({"checks": checks} if checks is not None else {})}
    observed = run_function(world, handlers.fsx_data, event)
    assert observed.raised is None, observed.raised
    return observed.result


def _refuse(code: str, message: str):
    def create(params):
        raise ServiceRefusal(code, message)
    HOOKS.fsx_create_task = create


def test_a_late_dataset_gets_an_import_of_its_own_s3_path_and_is_not_ready_on_that_check(world, fsx):
    """A dataset uploaded while FSx was up: the check asks FSx for a metadata import of that dataset's S3 path alone,
    without a completion report, and is not ready on the check that started it (naming the task). Each check counts
    one more than the event's count (the first check's event may carry none)."""
    started = _check(world, _document(world, "tiny"), checks=0)
    assert started == {"ready": False, "final": False, "checks": 1, "reason": (
        f"the S3 metadata import task-00000000000000001 of 1 dataset(s) uploaded while FSx was up ({S3}/tiny/) "
        "has just started")}
    assert fsx == [{"Type": "IMPORT_METADATA_FROM_REPOSITORY", "FileSystemId": world.fsx_id,
                    "Paths": [f"{S3}/tiny/"], "Report": {"Enabled": False}}]
    assert _check(world, _document(world, "tiny"), checks=2)["checks"] == 3
    assert _check(world, _document(world, "tiny"), checks=None)["checks"] == 1


def test_an_import_made_since_the_run_began_covers_a_dataset_whose_stats_are_dated_later(world, fsx):
    """The uploader's clock wrote written_at (2030, later than now): an import of the dataset that succeeded after
    this run's plan was written still covers it, so the data is ready and no import is started. An import that
    FAILED after the plan was written is not tried again within the run: the check stops, naming it."""
    [association], _ = HOOKS.fsx_repository()
    key = "results/exec-since/plan.json"
    world.put_json(key, _document(world, "tiny"))
    written = world.c["s3"].head_object(Bucket=BUCKET, Key=key)["LastModified"]

    def task(lifecycle: str, succeeded: int, failed: int) -> dict:
        return {"TaskId": "task-sincerunbegan", "Type": "IMPORT_METADATA_FROM_REPOSITORY", "Lifecycle": lifecycle,
                "FileSystemId": world.fsx_id, "Paths": [f"{S3}/tiny/"],
                "CreationTime": (written + dt.timedelta(minutes=1)).isoformat(),
                "EndTime": (written + dt.timedelta(minutes=2)).isoformat(),
                "FailureDetails": {"Message": "S3 refused the listing"},
                "Status": {"TotalCount": succeeded + failed, "SucceededCount": succeeded, "FailedCount": failed}}
    HOOKS.fsx_repository = lambda: ([association], [task("SUCCEEDED", 3, 0)])
    assert _check(world, _document(world, "tiny"), key=key) == {
        "ready": True, "final": False, "checks": 1, "reason": "the S3 listing is imported"}
    HOOKS.fsx_repository = lambda: ([association], [task("FAILED", 0, 3)])
    assert _check(world, _document(world, "tiny"), key=key) == {
        "ready": False, "final": True, "checks": 1,
        "reason": "the S3 metadata import task-sincerunbegan ended FAILED and imported nothing: S3 refused the listing"}
    assert fsx == []


def test_a_busy_file_system_makes_the_late_datasets_wait_and_names_the_first_three(world, fsx):
    """FSx runs one data repository task at a time: the check waits (not final), naming how many datasets wait and
    the first three of their S3 paths, with '...' only where there are more."""
    _refuse("DataRepositoryTaskExecuting", "An existing data repository task is currently executing on the file system.")
    why = (f"waits: another data repository task is executing on {world.fsx_id} (FSx runs one at a time): the import "
           "starts at a later check")
    assert _check(world, _document(world, "a", "b", "c", "d")) == {"ready": False, "final": False, "checks": 1, "reason": (
        f"the import of 4 dataset(s) uploaded while FSx was up ({S3}/a/, {S3}/b/, {S3}/c/, ...) {why}")}
    assert _check(world, _document(world, "a", "b", "c"))["reason"] == (
        f"the import of 3 dataset(s) uploaded while FSx was up ({S3}/a/, {S3}/b/, {S3}/c/) {why}")


def test_fsx_refusing_the_import_stops_with_its_message_and_the_fix(world, fsx):
    """A BadRequest to CreateDataRepositoryTask cannot pass by waiting: final, quoting FSx's message and naming the
    operation, the file system and the fix."""
    _refuse("BadRequest", "A data repository is not linked to the file system.")
    assert _check(world, _document(world, "tiny")) == {"ready": False, "final": True, "checks": 1, "reason": (
        f"the import of 1 dataset(s) uploaded while FSx was up ({S3}/tiny/) could not start: FSx refused "
        f"CreateDataRepositoryTask on {world.fsx_id} (A data repository is not linked to the file system.): "
        "`dslab fsx status` shows the file system and its S3 link; fix what FSx names (or `dslab fsx down` and "
        "`dslab fsx up` for a fresh one), then run again")}


def test_a_service_limit_names_the_limit_fsx_sends_or_a_question_mark_without_one(world, fsx):
    """ServiceLimitExceeded stops the check naming the limit FSx reports in the error; an error without one says '?'."""
    _refuse("ServiceLimitExceeded", "Too many tasks.")
    head = f"the import of 1 dataset(s) uploaded while FSx was up ({S3}/tiny/) could not start: FSx refused " \
           f"CreateDataRepositoryTask on {world.fsx_id}: its limit"
    tail = "is reached (Too many tasks.); ask AWS Support to raise it, then run again"
    assert _check(world, _document(world, "tiny")) == {"ready": False, "final": True, "checks": 1,
                                                       "reason": f"{head} ? {tail}"}

    class Limited:
        """The FSx client, CreateDataRepositoryTask answering ServiceLimitExceeded with its Limit member."""

        def __init__(self, fsx_client):
            self.fsx_client = fsx_client

        def __getattr__(self, name):
            return getattr(self.fsx_client, name)

        def create_data_repository_task(self, **kwargs):
            raise ClientError({"Error": {"Code": "ServiceLimitExceeded", "Message": "Too many tasks."},
                               "Limit": "TOTAL_USER_TAGS", "ResponseMetadata": {"HTTPStatusCode": 400}},
                              "CreateDataRepositoryTask")
    world.put_json("results/exec-limit/plan.json", _document(world, "tiny"))
    clients = {"s3": world.c["s3"], "ssm": world.c["ssm"], "fsx": Limited(world.c["fsx"])}
    limited = check(clients, world.function_env(), {"plan": {"bucket": BUCKET, "plan_key": "results/exec-limit/plan.json"},
                                                    "checks": 0})
    assert limited == {"ready": False, "final": True, "checks": 1, "reason": f"{head} TOTAL_USER_TAGS {tail}"}


def test_a_passing_fsx_failure_waits_until_the_last_check_then_gives_up_saying_so(world, fsx):
    """InternalServerError waits for the next check, its reason cut to 500 characters; the check that reaches
    fsx_wait_checks (one where the plan sets none) is final, saying after how many checks."""
    _refuse("InternalServerError", "M" * 600)
    waiting = (f"the import of 1 dataset(s) uploaded while FSx was up ({S3}/tiny/) waits: FSx failed on its side "
               f"(CreateDataRepositoryTask: {'M' * 600}")[:500]
    assert _check(world, _document(world, "tiny"), checks=3, wait_checks=5) == {
        "ready": False, "final": False, "checks": 4, "reason": waiting}
    assert len(waiting) == 500
    assert _check(world, _document(world, "tiny"), checks=4, wait_checks=5) == {
        "ready": False, "final": True, "checks": 5, "reason": f"still not ready after 5 checks: {waiting}"[:500]}
    assert _check(world, _document(world, "tiny"), checks=0, wait_checks=None) == {
        "ready": False, "final": True, "checks": 1, "reason": f"still not ready after 1 checks: {waiting}"[:500]}


@pytest.mark.parametrize("failing_call", [1, 2], ids=["while choosing imports", "while reading import status"])
def test_a_file_system_gone_mid_check_stops_naming_it(world, fsx, failing_call):
    """FileSystemNotFound from DescribeDataRepositoryTasks, whether the check is choosing the imports to start or
    reading their status, is final and names the file system and the fix."""
    calls = []

    def fault(service_id, operation, request=None):
        if operation == "DescribeDataRepositoryTasks":
            calls.append(operation)
            if len(calls) == failing_call:
                return 400, "FileSystemNotFound", "No Amazon FSx file systems were found based upon supplied parameters."
        return None
    HOOKS.api_fault = fault
    assert _check(world, _document(world, "tiny")) == {"ready": False, "final": True, "checks": 1, "reason": (
        f"FSx file system {world.fsx_id} no longer exists (No Amazon FSx file systems were found based upon supplied "
        "parameters.): bring FSx back with `dslab fsx up`, then run again")}


def test_an_unreadable_plan_waits_when_throttled_and_stops_when_refused(world, fsx):
    """An AWS error FSx's table does not name answers the check too: S3 throttling GetObject of plan.json is not
    final and says the next check tries again; AccessDenied is final, its reason ending with the fix."""
    HOOKS.api_fault = lambda service_id, operation, request=None: (
        (503, "SlowDown", "Please reduce your request rate.") if operation == "GetObject" else None)
    throttled = _check(world, _document(world, "tiny"))
    assert (throttled["ready"], throttled["final"]) == (False, False)
    assert throttled["reason"].startswith("FSx's readiness could not be checked: AWS GetObject failed after ")
    assert throttled["reason"].endswith("; the next check tries again")
    HOOKS.api_fault = lambda service_id, operation, request=None: (
        (403, "AccessDenied", "Access Denied") if operation == "GetObject" else None)
    refused = _check(world, _document(world, "tiny"))
    assert (refused["ready"], refused["final"]) == (False, True)
    assert refused["reason"].startswith("FSx's readiness could not be checked: AWS GetObject failed (AccessDenied: "
                                        "Access Denied); ")
    assert refused["reason"].endswith("; a bucket policy or an organization's SCP can also refuse it")
