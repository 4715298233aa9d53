"""Staging datasets into the S3 Express One Zone directory bucket (dslab/workflow/express_staging.py): what the
workflow's StageExpress gets back (done / ready / wait, the cursor the next invocation goes on from, the reason a user
reads), what ends up in the directory bucket (the copies, the stats marker, the staging lock, stale objects removed)
and the requests sent to S3 for it: the lock's conditional PUT, the wake-up listing, CopyObject with its tags replaced,
a multipart copy above 5 GB. S3 is a small in-memory fake that records every request and answers the errors a test
gives it; the clocks are fakes too (no real waiting). Expected values are written here."""

from __future__ import annotations

import io
import json
import threading
from types import SimpleNamespace

import pytest
from botocore.exceptions import ClientError

from dslab.workflow import express_staging
from dslab.workflow.express_staging import (release_staging_lock, stage_express, take_staging_lock,
                                            wake_directory_bucket)

SRC = "datasourcelab-data-123456789012-us-east-1"
T = "staged--use1-az4--x-s3"
PLAN_KEY = "results/exec-1/plan.json"
NOW = 1_700_000_000.0          # the wall clock (time.time) the locks are stamped with
LOCK = "datasets/tiny-jpg.staging-lock.json"
MARKER = "datasets/tiny-jpg.stats.json"
OPERATIONS = {"get_object": "GetObject", "put_object": "PutObject", "list_objects_v2": "ListObjectsV2",
              "copy_object": "CopyObject", "copy": "CopyObject", "delete_object": "DeleteObject",
              "delete_objects": "DeleteObjects"}
DENIED_COPY = ("copying into the S3 Express One Zone bucket failed: AWS CopyObject failed (AccessDenied: Access Denied); "
               "the ExpressStaging function's role may not call CopyObject: deploy the lab again so the role has it "
               "(`make deploy FSX=keep`); a bucket policy or an organization's SCP can also refuse it")


class Runaway(Exception):
    """The fake stops answering a code that loops for ever."""


def error(code: str, status: int | None, operation: str, message: str = "m") -> ClientError:
    response = {"Error": {"Code": code, "Message": message}}
    if status is not None:
        response["ResponseMetadata"] = {"HTTPStatusCode": status}
    return ClientError(response, operation)


class Clock:
    """time.monotonic, time.sleep (recorded, moving the clock) and time.time."""

    def __init__(self):
        self.now, self.wall, self.sleeps = 1000.0, NOW, []

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.wall

    def sleep(self, seconds: float) -> None:
        if len(self.sleeps) > 200:
            raise Runaway("slept 200 times")
        self.sleeps.append(seconds)
        self.now += seconds


class FakeS3:
    """Buckets of key -> body in memory; every request recorded as (operation, its parameters); ``fail`` makes the
    next matching requests answer an AWS error; ``ticks`` moves the clock by seconds per request of an operation.
    Listing pages hold at most ``page_size`` keys (and no Contents when empty, as S3 answers)."""

    def __init__(self, clock: Clock, buckets: dict[str, dict[str, bytes]] | None = None, page_size: int = 1000):
        self.clock = clock
        self.buckets = {SRC: {}, T: {}}
        for name, objects in (buckets or {}).items():
            self.buckets[name].update(objects)
        self.sizes: dict[str, int] = {}           # a size the listing says instead of the body's
        self.page_size = page_size
        self.calls: list[tuple[str, dict]] = []
        self.faults: list[list] = []
        self.ticks: dict[str, float] = {}
        self.exceptions = SimpleNamespace(ClientError=ClientError)
        self._lock = threading.Lock()

    def fail(self, operation: str, code: str, status: int | None, *, key: str | None = None, times: int = 1,
             message: str = "m") -> None:
        self.faults.append([operation, key, code, status, message, times])

    def _request(self, operation: str, params: dict) -> None:
        with self._lock:
            if len(self.calls) > 3000:
                raise Runaway("3000 requests")
            self.calls.append((operation, params))
            self.clock.now += self.ticks.get(operation, 0.0)
            for fault in self.faults:
                op, key, code, status, message, times = fault
                if op == operation and times and key in (None, params.get("Key"), params.get("Prefix")):
                    fault[5] -= 1
                    raise error(code, status, OPERATIONS[operation], message)

    def brief(self) -> list[tuple]:
        """The requests as (operation, bucket, key or prefix[, token]); the copies of a batch in key order."""
        out: list[tuple] = []
        for op, p in self.calls:
            where = p.get("Key") or p.get("Prefix")
            if op == "delete_objects":
                where = tuple(o["Key"] for o in p["Delete"]["Objects"])
            out.append((op, p.get("Bucket"), where) + ((p["ContinuationToken"],) if "ContinuationToken" in p else ()))
        return _sorted_copies(out)

    def keys(self, bucket: str) -> list[str]:
        return sorted(self.buckets[bucket])

    def json(self, bucket: str, key: str):
        return json.loads(self.buckets[bucket][key])

    # -- the S3 operations staging calls --
    def get_object(self, **p):
        self._request("get_object", p)
        if p["Key"] not in self.buckets.get(p["Bucket"], {}):
            raise error("NoSuchKey", 404, "GetObject", "The specified key does not exist.")
        return {"Body": io.BytesIO(self.buckets[p["Bucket"]][p["Key"]])}

    def put_object(self, **p):
        self._request("put_object", p)
        objects = self.buckets[p["Bucket"]]
        if p.get("IfNoneMatch") == "*" and p["Key"] in objects:
            raise error("PreconditionFailed", 412, "PutObject", "At least one of the pre-conditions you specified did not hold")
        objects[p["Key"]] = p["Body"]
        return {}

    def delete_object(self, **p):
        self._request("delete_object", p)
        self.buckets[p["Bucket"]].pop(p["Key"], None)
        return {}

    def delete_objects(self, **p):
        self._request("delete_objects", p)
        for o in p["Delete"]["Objects"]:
            self.buckets[p["Bucket"]].pop(o["Key"], None)
        return {}

    def list_objects_v2(self, **p):
        self._request("list_objects_v2", p)
        after = p.get("ContinuationToken", "after:").split(":", 1)[1]
        keys = [k for k in sorted(self.buckets[p["Bucket"]]) if k.startswith(p["Prefix"]) and k > after]
        page = keys[:min(p["MaxKeys"], self.page_size)]
        answer: dict = {"KeyCount": len(page), "IsTruncated": len(keys) > len(page)}
        if page:
            answer["Contents"] = [{"Key": k, "Size": self.sizes.get(k, len(self.buckets[p["Bucket"]][k]))} for k in page]
        if answer["IsTruncated"]:
            answer["NextContinuationToken"] = f"after:{page[-1]}"
        return answer

    def copy_object(self, **p):
        self._request("copy_object", p)
        source = p["CopySource"]
        self.buckets[p["Bucket"]][p["Key"]] = self.buckets[source["Bucket"]][source["Key"]]
        return {}

    def copy(self, CopySource, Bucket, Key):   # noqa: N803 - boto3's managed copy names its parameters so
        self._request("copy", {"CopySource": CopySource, "Bucket": Bucket, "Key": Key})
        self.buckets[Bucket][Key] = self.buckets[CopySource["Bucket"]][CopySource["Key"]]


def _sorted_copies(calls: list[tuple]) -> list[tuple]:
    """A batch's copies run in threads, in any order: each run of copies in key order."""
    out: list[tuple] = []
    run: list[tuple] = []
    for call in calls + [("end",)]:
        if call[0] in ("copy_object", "copy"):
            run.append(call)
            continue
        out += sorted(run, key=lambda c: str(c[2] if c[0] == "copy" else c))
        run = []
        if call[0] != "end":
            out.append(call)
    return out


def plan(**fields) -> dict:
    """The plan.json Plan wrote: one trial reading dataset tiny (its prefix tiny-jpg), with its stats."""
    return {"express_bucket": T, "express_prefixes": ["tiny-jpg"],
            "experiment": {"name": "x", "trials": [{"name": "base", "datasets": [{"name": "tiny", "prefix": "tiny-jpg"}]}]},
            "dataset_stats": {"tiny": {"files": 3, "bytes": 303}}, **fields}


def source(prefix: str = "tiny-jpg", count: int = 3, size: int = 101) -> dict[str, bytes]:
    return {f"datasets/{prefix}/img-{i:03d}.jpg": b"x" * size for i in range(count)}


@pytest.fixture
def clock(monkeypatch) -> Clock:
    import time
    c = Clock()
    monkeypatch.setattr(time, "monotonic", c.monotonic)
    monkeypatch.setattr(time, "time", c.time)
    monkeypatch.setattr(time, "sleep", c.sleep)
    for name in ("DSLAB_STAGING_BUDGET_SECONDS", "DSLAB_TIME_SCALE"):
        monkeypatch.delenv(name, raising=False)
    return c


@pytest.fixture
def lab(clock, monkeypatch):
    """Makes the fake S3 StageExpress uses, the plan stored in the data bucket, and runs StageExpress on it."""
    def make(document: dict | None = None, objects: dict[str, bytes] | None = None,
             staged: dict[str, bytes] | None = None, page_size: int = 1000) -> FakeS3:
        s3 = FakeS3(clock, {SRC: {PLAN_KEY: json.dumps(plan() if document is None else document).encode(),
                                  **(source() if objects is None else objects)},
                            T: staged or {}}, page_size=page_size)
        monkeypatch.setattr(express_staging, "express_client", lambda: s3)
        return s3
    return make


def run(cursor: dict | None = None, execution: str | None = "exec-1") -> dict:
    event = {"plan": {"bucket": SRC, "plan_key": PLAN_KEY, "base": "results/exec-1"}, "cursor": cursor}
    if execution is not None:
        event["execution"] = execution
    return stage_express(event)


def lock_body(execution: str, taken_at: float) -> bytes:
    return json.dumps({"execution": execution, "taken_at": taken_at}).encode()


# ---- a whole staging ---------------------------------------------------------------------------------------------
def test_a_fresh_dataset_is_copied_then_marked_under_the_lock_with_these_requests(lab):
    """The directory bucket is woken with a one-key listing, the lock taken with a conditional PUT, the marker looked
    at and removed, the prefix cleared, the source listed, each object copied with its tags replaced, the marker
    written with the source's stats, the lock released: ready, saying how many were copied."""
    s3 = lab()
    assert run() == {"done": True, "ready": True, "wait": False, "invocations": 1, "cursor": {},
                     "reason": "1 datasets in s3://staged--use1-az4--x-s3/: 3 objects copied, 0 already there"}
    copies = [("copy_object", {"Bucket": T, "Key": f"datasets/tiny-jpg/img-00{i}.jpg", "TaggingDirective": "REPLACE",
                               "CopySource": {"Bucket": SRC, "Key": f"datasets/tiny-jpg/img-00{i}.jpg"}}) for i in range(3)]
    calls = s3.calls[:7] + sorted(s3.calls[7:10], key=lambda c: c[1]["Key"]) + s3.calls[10:]
    assert calls == [
        ("get_object", {"Bucket": SRC, "Key": "results/exec-1/plan.json"}),
        ("list_objects_v2", {"Bucket": T, "Prefix": "datasets/", "MaxKeys": 1}),
        ("put_object", {"Bucket": T, "Key": LOCK, "Body": b'{"execution": "exec-1", "taken_at": 1700000000.0}',
                        "IfNoneMatch": "*", "ContentType": "application/json"}),
        ("get_object", {"Bucket": T, "Key": MARKER}),
        ("delete_object", {"Bucket": T, "Key": MARKER}),
        ("list_objects_v2", {"Bucket": T, "Prefix": "datasets/tiny-jpg/", "MaxKeys": 1000}),
        ("list_objects_v2", {"Bucket": SRC, "Prefix": "datasets/tiny-jpg/", "MaxKeys": 1000}),
        *copies,
        ("put_object", {"Bucket": T, "Key": MARKER, "ContentType": "application/json",
                        "Body": b'{"files": 3, "bytes": 303, "staged_from": '
                                b'"s3://datasourcelab-data-123456789012-us-east-1/datasets/tiny-jpg/"}'}),
        ("get_object", {"Bucket": T, "Key": LOCK}),
        ("delete_object", {"Bucket": T, "Key": LOCK}),
    ]
    assert s3.keys(T) == ["datasets/tiny-jpg.stats.json", "datasets/tiny-jpg/img-000.jpg",
                          "datasets/tiny-jpg/img-001.jpg", "datasets/tiny-jpg/img-002.jpg"]


def test_a_dataset_staged_with_the_same_files_and_bytes_is_skipped_without_a_copy(lab):
    s3 = lab(staged={MARKER: b'{"files": 3, "bytes": 303, "staged_from": "s3://old/"}'})
    assert run(cursor={"invocations": 2}) == {
        "done": True, "ready": True, "wait": False, "invocations": 3, "cursor": {},
        "reason": "1 datasets in s3://staged--use1-az4--x-s3/: 0 objects copied, 1 already there"}
    assert s3.brief() == [("get_object", SRC, PLAN_KEY), ("list_objects_v2", T, "datasets/"), ("put_object", T, LOCK),
                          ("get_object", T, MARKER), ("get_object", T, LOCK), ("delete_object", T, LOCK)]
    assert s3.keys(T) == [MARKER]


@pytest.mark.parametrize("marker", [b'{"files": 3, "bytes": 999}', b'{"files": 4, "bytes": 303}', b"{not json",
                                    None], ids=["other-bytes", "other-files", "unreadable", "none"])
def test_a_dataset_staged_from_another_version_is_cleared_page_by_page_and_copied_again(lab, marker):
    """Whatever the marker says short of the same files and bytes, the prefix is emptied first (the marker, then each
    listed page deleted quietly as read) and the source's objects are copied, its listing followed page by page."""
    stale = {f"datasets/tiny-jpg/old-{i}.jpg": b"old" for i in range(5)}
    s3 = lab(staged={**stale, **({MARKER: marker} if marker else {})}, page_size=2)
    assert run()["reason"] == ("1 datasets in s3://staged--use1-az4--x-s3/: 3 objects copied, 0 already there, "
                               "5 stale objects removed first")
    assert s3.brief()[3:] == [
        ("get_object", T, MARKER), ("delete_object", T, MARKER),
        ("list_objects_v2", T, "datasets/tiny-jpg/"),
        ("delete_objects", T, ("datasets/tiny-jpg/old-0.jpg", "datasets/tiny-jpg/old-1.jpg")),
        ("list_objects_v2", T, "datasets/tiny-jpg/"),
        ("delete_objects", T, ("datasets/tiny-jpg/old-2.jpg", "datasets/tiny-jpg/old-3.jpg")),
        ("list_objects_v2", T, "datasets/tiny-jpg/"),
        ("delete_objects", T, ("datasets/tiny-jpg/old-4.jpg",)),
        ("list_objects_v2", T, "datasets/tiny-jpg/"),
        ("list_objects_v2", SRC, "datasets/tiny-jpg/"),
        ("copy_object", T, "datasets/tiny-jpg/img-000.jpg"), ("copy_object", T, "datasets/tiny-jpg/img-001.jpg"),
        ("list_objects_v2", SRC, "datasets/tiny-jpg/", "after:datasets/tiny-jpg/img-001.jpg"),
        ("copy_object", T, "datasets/tiny-jpg/img-002.jpg"),
        ("put_object", T, MARKER), ("get_object", T, LOCK), ("delete_object", T, LOCK)]
    deletes = [p for op, p in s3.calls if op == "delete_objects"]
    assert [(p["Bucket"], p["Delete"]["Quiet"]) for p in deletes] == [(T, True)] * 3
    assert [p["MaxKeys"] for op, p in s3.calls if op == "list_objects_v2" and p["Bucket"] == T][1:] == [1000] * 4
    assert s3.keys(T) == ["datasets/tiny-jpg.stats.json", "datasets/tiny-jpg/img-000.jpg",
                          "datasets/tiny-jpg/img-001.jpg", "datasets/tiny-jpg/img-002.jpg"]


def test_a_dataset_without_stats_is_copied_again_each_time_and_marked_with_none(lab):
    """A dataset the plan has no stats for (and a trial with no datasets) is never taken for staged, even by the
    marker an earlier staging wrote for it; the marker says no files or bytes. An event without an execution stages
    as "manual"."""
    document = plan(dataset_stats={"other": {"files": 1, "bytes": 1}})
    document["experiment"]["trials"].insert(0, {"name": "bare"})
    s3 = lab(document, staged={MARKER: b'{"files": null, "bytes": null}'})
    assert run(execution=None)["reason"] == ("1 datasets in s3://staged--use1-az4--x-s3/: 3 objects copied, "
                                             "0 already there")
    assert s3.json(T, MARKER) == {"files": None, "bytes": None,
                                  "staged_from": f"s3://{SRC}/datasets/tiny-jpg/"}
    assert s3.calls[2][1]["Body"] == b'{"execution": "manual", "taken_at": 1700000000.0}'


def test_two_datasets_one_already_staged_are_counted_apart(lab):
    document = plan(express_prefixes=["done-jpg", "tiny-jpg"], dataset_stats={"tiny": {"files": 3, "bytes": 303},
                                                                               "done": {"files": 2, "bytes": 7}})
    document["experiment"]["trials"].append({"name": "two", "datasets": [{"name": "done", "prefix": "done-jpg"}]})
    s3 = lab(document, staged={"datasets/done-jpg.stats.json": b'{"files": 2, "bytes": 7}'})
    assert run()["reason"] == "2 datasets in s3://staged--use1-az4--x-s3/: 3 objects copied, 1 already there"
    assert s3.keys(T) == ["datasets/done-jpg.stats.json", "datasets/tiny-jpg.stats.json",
                          "datasets/tiny-jpg/img-000.jpg", "datasets/tiny-jpg/img-001.jpg",
                          "datasets/tiny-jpg/img-002.jpg"]


@pytest.mark.parametrize("size, how", [(5 * 1024**3, "copy_object"), (5 * 1024**3 + 1, "copy")])
def test_an_object_over_5_gib_is_copied_by_the_managed_multipart_copy(lab, size, how):
    """CopyObject takes up to 5 GiB; one byte more goes through the managed copy (UploadPartCopy)."""
    s3 = lab(objects={"datasets/tiny-jpg/big.bin": b"big"})
    s3.sizes["datasets/tiny-jpg/big.bin"] = size
    assert run()["ready"] is True
    copied = [c for c in s3.calls if c[0] in ("copy", "copy_object")]
    params = {"Bucket": T, "Key": "datasets/tiny-jpg/big.bin",
              "CopySource": {"Bucket": SRC, "Key": "datasets/tiny-jpg/big.bin"}}
    assert copied == [(how, {**params, "TaggingDirective": "REPLACE"} if how == "copy_object" else params)]
    assert s3.buckets[T]["datasets/tiny-jpg/big.bin"] == b"big"


# ---- the plan ----------------------------------------------------------------------------------------------------
def test_a_lab_without_a_directory_bucket_is_done_not_ready_saying_so(lab):
    s3 = lab(plan(express_bucket=None))
    assert run(cursor={"invocations": 4}) == {
        "done": True, "ready": False, "wait": False, "invocations": 5, "cursor": {},
        "reason": "the lab has no S3 Express One Zone bucket (deployed with -c express=false)"}
    assert s3.brief() == [("get_object", SRC, PLAN_KEY)]


def test_a_throttled_plan_read_waits_and_keeps_the_cursor_counting_a_wait(lab):
    s3 = lab()
    s3.fail("get_object", "SlowDown", 503, key=PLAN_KEY, message="Please reduce your request rate.")
    assert run(cursor={"index": 1, "copied": 7, "invocations": 2, "waits": 4}) == {
        "done": False, "ready": False, "wait": True, "invocations": 2,
        "cursor": {"index": 1, "copied": 7, "invocations": 2, "waits": 5},
        "reason": "AWS GetObject failed (SlowDown: Please reduce your request rate.); AWS is throttling this account's "
                  "requests (other tools calling the same API share the rate): it passes: what stopped here can start "
                  "again later; staging goes on after a wait"}
    assert s3.brief() == [("get_object", SRC, PLAN_KEY)]


def test_a_first_throttled_plan_read_counts_no_invocation_and_one_wait(lab):
    s3 = lab()
    s3.fail("get_object", "SlowDown", 503, key=PLAN_KEY)
    result = run(cursor=None)
    assert (result["invocations"], result["cursor"], result["wait"]) == (0, {"invocations": 0, "waits": 1}, True)
    assert s3.brief() == [("get_object", SRC, PLAN_KEY)]


def test_a_plan_the_role_may_not_read_ends_staging_with_the_fix_and_touches_no_lock(lab):
    s3 = lab()
    s3.fail("get_object", "AccessDenied", 403, key=PLAN_KEY, message="Access Denied")
    assert run(cursor={"invocations": 1}) == {
        "done": True, "ready": False, "wait": False, "invocations": 2, "cursor": {},
        "reason": "copying into the S3 Express One Zone bucket failed: AWS GetObject failed (AccessDenied: Access "
                  "Denied); the ExpressStaging function's role may not call GetObject: deploy the lab again so the "
                  "role has it (`make deploy FSX=keep`); a bucket policy or an organization's SCP can also refuse it"}
    assert s3.brief() == [("get_object", SRC, PLAN_KEY)]


def test_a_marker_the_role_may_not_read_counts_as_no_marker_and_the_dataset_is_copied(lab):
    """S3 answers AccessDenied for a missing key to a caller that may not list: the dataset is staged again."""
    s3 = lab(staged={MARKER: b'{"files": 3, "bytes": 303}'})
    s3.fail("get_object", "AccessDenied", 403, key=MARKER)
    assert run()["reason"] == "1 datasets in s3://staged--use1-az4--x-s3/: 3 objects copied, 0 already there"
    assert s3.json(T, MARKER)["files"] == 3


def test_a_marker_read_failing_on_aws_side_waits_without_clearing_anything(lab):
    s3 = lab(staged={MARKER: b'{"files": 3, "bytes": 303}'})
    s3.fail("get_object", "InternalError", 500, key=MARKER, message="We encountered an internal error.")
    result = run()
    assert (result["wait"], result["done"], result["reason"]) == (
        True, False, "AWS GetObject failed (InternalError: We encountered an internal error.); a temporary failure on "
                     "AWS's side: it passes: what stopped here can start again later; staging goes on after a wait")
    assert s3.keys(T) == [LOCK, MARKER]


# ---- the staging lock ----------------------------------------------------------------------------------------------
def test_a_dataset_another_execution_is_staging_is_waited_for_as_a_wait_not_an_invocation(lab):
    s3 = lab(staged={LOCK: lock_body("exec-other", NOW - 60)})
    assert run(cursor={"invocations": 3, "waits": 2}) == {
        "done": False, "ready": False, "wait": True, "invocations": 3,
        "cursor": {"index": 0, "token": None, "skip": 0, "copied": 0, "skipped": 0, "removed": 0, "invocations": 3,
                   "waits": 3},
        "reason": "waiting: execution exec-other is staging tiny-jpg"}
    assert s3.brief() == [("get_object", SRC, PLAN_KEY), ("list_objects_v2", T, "datasets/"), ("put_object", T, LOCK),
                          ("get_object", T, LOCK)]
    assert s3.keys(T) == [LOCK]
    assert s3.json(T, LOCK) == {"execution": "exec-other", "taken_at": NOW - 60}


@pytest.mark.parametrize("age, staged", [(1800.5, True), (1800.0, False)])
def test_a_lock_older_than_twice_the_function_timeout_is_taken_over(lab, age, staged):
    """A holder that died mid-copy leaves its lock: after 30 minutes (twice Lambda's 15) it is deleted and taken."""
    s3 = lab(staged={LOCK: lock_body("exec-dead", NOW - age)})
    result = run()
    assert (result["ready"], result["reason"]) == (
        (True, "1 datasets in s3://staged--use1-az4--x-s3/: 3 objects copied, 0 already there") if staged else
        (False, "waiting: execution exec-dead is staging tiny-jpg"))
    assert s3.brief()[2:5] == [("put_object", T, LOCK), ("get_object", T, LOCK)] + (
        [("delete_object", T, LOCK)] if staged else [])


def test_an_execution_goes_on_under_the_lock_it_took_in_an_earlier_invocation(lab):
    s3 = lab(staged={LOCK: lock_body("exec-1", NOW - 5000)})
    assert run()["ready"] is True
    assert s3.brief()[2:5] == [("put_object", T, LOCK), ("get_object", T, LOCK), ("get_object", T, MARKER)]
    assert LOCK not in s3.buckets[T]


@pytest.mark.parametrize("code, status", [("PreconditionFailed", 412), ("ConditionalRequestConflict", 409),
                                          ("412", 412)])
def test_each_answer_of_a_conditional_put_that_lost_names_the_holder(clock, code, status):
    s3 = FakeS3(clock, {T: {LOCK: lock_body("exec-other", NOW)}})
    s3.fail("put_object", code, status, key=LOCK)
    assert take_staging_lock(s3, T, "tiny-jpg", "exec-1", stale_after=10) == "exec-other"
    assert s3.brief() == [("put_object", T, LOCK), ("get_object", T, LOCK)]


def test_a_lock_put_refused_otherwise_is_raised(clock):
    s3 = FakeS3(clock)
    s3.fail("put_object", "AccessDenied", 403, key=LOCK)
    with pytest.raises(ClientError) as raised:
        take_staging_lock(s3, T, "tiny-jpg", "exec-1", stale_after=10)
    assert raised.value.response["Error"]["Code"] == "AccessDenied"
    assert s3.brief() == [("put_object", T, LOCK)]


def test_a_lock_released_between_the_put_and_the_look_is_tried_again_and_taken(clock):
    s3 = FakeS3(clock)
    s3.fail("put_object", "PreconditionFailed", 412, key=LOCK)
    assert take_staging_lock(s3, T, "tiny-jpg", "exec-1", stale_after=10) is None
    assert s3.brief() == [("put_object", T, LOCK), ("get_object", T, LOCK), ("put_object", T, LOCK)]
    assert s3.json(T, LOCK) == {"execution": "exec-1", "taken_at": NOW}


def test_a_lock_that_keeps_slipping_away_is_given_up_after_three_tries(clock):
    s3 = FakeS3(clock)
    s3.fail("put_object", "PreconditionFailed", 412, key=LOCK, times=10)
    assert take_staging_lock(s3, T, "tiny-jpg", "exec-1", stale_after=10) == "another execution"
    assert s3.brief() == [("put_object", T, LOCK), ("get_object", T, LOCK)] * 3


def test_a_lock_that_cannot_be_read_is_raised(clock):
    s3 = FakeS3(clock, {T: {LOCK: lock_body("exec-other", NOW)}})
    s3.fail("get_object", "InternalError", 500, key=LOCK)
    with pytest.raises(ClientError) as raised:
        take_staging_lock(s3, T, "tiny-jpg", "exec-1", stale_after=10)
    assert raised.value.response["Error"]["Code"] == "InternalError"


@pytest.mark.parametrize("age, holder", [(10.0, "exec-other"), (10.5, None)])
def test_a_lock_is_stale_only_once_older_than_stale_after(clock, age, holder):
    s3 = FakeS3(clock, {T: {LOCK: lock_body("exec-other", NOW - age)}})
    assert take_staging_lock(s3, T, "tiny-jpg", "exec-1", stale_after=10) == holder
    assert s3.brief() == [("put_object", T, LOCK), ("get_object", T, LOCK)] + (
        [] if holder else [("delete_object", T, LOCK), ("put_object", T, LOCK)])
    assert s3.json(T, LOCK)["execution"] == (holder or "exec-1")


def test_a_lock_that_names_no_holder_is_another_executions_and_without_a_time_it_is_stale(clock):
    s3 = FakeS3(clock, {T: {LOCK: json.dumps({"taken_at": NOW}).encode()}})
    assert take_staging_lock(s3, T, "tiny-jpg", "exec-1", stale_after=10) == "another execution"
    s3 = FakeS3(clock, {T: {LOCK: b'{"execution": "exec-other"}'}})
    assert take_staging_lock(s3, T, "tiny-jpg", "exec-1", stale_after=10) is None
    assert s3.json(T, LOCK) == {"execution": "exec-1", "taken_at": NOW}


@pytest.mark.parametrize("held, kept", [("exec-1", False), ("exec-other", True), (None, False)])
def test_releasing_deletes_only_this_executions_lock(clock, held, kept):
    s3 = FakeS3(clock, {T: {LOCK: lock_body(held, NOW)} if held else {}})
    release_staging_lock(s3, T, "tiny-jpg", "exec-1")
    assert s3.brief() == [("get_object", T, LOCK)] + ([] if kept or held is None else [("delete_object", T, LOCK)])
    assert s3.keys(T) == ([LOCK] if kept else [])


def test_a_lock_that_cannot_be_read_for_release_is_raised(clock):
    s3 = FakeS3(clock, {T: {LOCK: lock_body("exec-1", NOW)}})
    s3.fail("get_object", "InternalError", 500, key=LOCK)
    with pytest.raises(ClientError):
        release_staging_lock(s3, T, "tiny-jpg", "exec-1")
    assert s3.keys(T) == [LOCK]


# ---- the time budget -----------------------------------------------------------------------------------------------
def _many(count: int = 70) -> dict[str, bytes]:
    return {f"datasets/tiny-jpg/img-{i:03d}.jpg": b"" for i in range(count)}


@pytest.mark.parametrize("budget, big, done", [("65", False, True), ("64.5", False, False),
                                               ("66", True, True), ("65.5", True, False)])
def test_a_batch_that_might_not_finish_in_the_budget_is_left_to_the_next_invocation(lab, monkeypatch, budget,
                                                                                     big, done):
    """64 copies at a time; each copy takes a second here. The second batch needs a second, plus one for each
    100 MiB of its largest object: it starts only when that much of the budget is left."""
    monkeypatch.setenv("DSLAB_STAGING_BUDGET_SECONDS", budget)
    s3 = lab(objects=_many())
    s3.ticks["copy_object"] = 1.0
    if big:
        s3.sizes["datasets/tiny-jpg/img-066.jpg"] = 100 * 1024**2
    result = run()
    if done:
        assert result["reason"] == "1 datasets in s3://staged--use1-az4--x-s3/: 70 objects copied, 0 already there"
        return
    assert result == {"done": False, "ready": False, "wait": False, "invocations": 1,
                      "cursor": {"index": 0, "token": None, "skip": 64, "copied": 64, "skipped": 0, "removed": 0,
                                 "invocations": 1, "waits": 0},
                      "reason": "copied 64 objects so far"}
    assert s3.keys(T) == [LOCK] + [f"datasets/tiny-jpg/img-{i:03d}.jpg" for i in range(64)]


@pytest.mark.parametrize("seconds_per_copy, done", [(11.25, False), (11.234375, True)])
def test_the_default_budget_is_twelve_minutes(lab, seconds_per_copy, done):
    s3 = lab(objects=_many())
    s3.ticks["copy_object"] = seconds_per_copy
    assert run()["reason"] == ("1 datasets in s3://staged--use1-az4--x-s3/: 70 objects copied, 0 already there" if done
                               else "copied 64 objects so far")


def test_an_invocation_copies_its_first_batch_whatever_the_budget(lab, monkeypatch):
    monkeypatch.setenv("DSLAB_STAGING_BUDGET_SECONDS", "0.5")
    s3 = lab()
    s3.ticks["copy_object"] = 1.0
    assert run()["reason"] == "1 datasets in s3://staged--use1-az4--x-s3/: 3 objects copied, 0 already there"


def _two_datasets():
    document = plan(express_prefixes=["tiny-jpg", "more-jpg"],
                    dataset_stats={"tiny": {"files": 3, "bytes": 303}, "more": {"files": 3, "bytes": 303}})
    document["experiment"]["trials"].append({"name": "more", "datasets": [{"name": "more", "prefix": "more-jpg"}]})
    return document


@pytest.mark.parametrize("budget, next_lock", [("3", False), ("3.5", True)])
def test_the_next_dataset_is_not_started_once_the_budget_is_spent(lab, monkeypatch, budget, next_lock):
    """A dataset done when no time is left hands on at the next one; with half a second left the next one is locked
    and listed but its first batch (a second) left to the next invocation."""
    monkeypatch.setenv("DSLAB_STAGING_BUDGET_SECONDS", budget)
    s3 = lab(_two_datasets(), objects={**source(), **source("more-jpg")})
    s3.ticks["copy_object"] = 1.0
    assert run() == {"done": False, "ready": False, "wait": False, "invocations": 1,
                     "cursor": {"index": 1, "token": None, "skip": 0, "copied": 3, "skipped": 0, "removed": 0,
                                "invocations": 1, "waits": 0},
                     "reason": "copied 3 objects so far"}
    assert ("datasets/more-jpg.staging-lock.json" in s3.buckets[T]) is next_lock
    assert [k for k in s3.keys(T) if k.startswith("datasets/more-jpg/")] == []
    assert MARKER in s3.buckets[T] and LOCK not in s3.buckets[T]


def test_the_last_dataset_done_after_the_budget_is_spent_ends_staging(lab, monkeypatch):
    monkeypatch.setenv("DSLAB_STAGING_BUDGET_SECONDS", "2")
    s3 = lab(_two_datasets(), objects={**source(), **source("more-jpg")})
    s3.ticks["copy_object"] = 1.0
    result = run(cursor={"index": 1, "copied": 3, "invocations": 1})
    assert (result["done"], result["ready"], result["invocations"], result["reason"]) == (
        True, True, 2, "2 datasets in s3://staged--use1-az4--x-s3/: 6 objects copied, 0 already there")
    assert "datasets/more-jpg.stats.json" in s3.buckets[T] and MARKER not in s3.buckets[T]


# ---- going on from a cursor ----------------------------------------------------------------------------------------
def test_an_invocation_goes_on_at_the_cursors_page_and_object_without_clearing(lab):
    s3 = lab(objects=source(count=5), staged={LOCK: lock_body("exec-1", NOW)}, page_size=2)
    cursor = {"index": 0, "token": "after:datasets/tiny-jpg/img-001.jpg", "skip": 1, "copied": 3, "skipped": 0,
              "removed": 4, "invocations": 1, "waits": 2}
    assert run(cursor=cursor) == {
        "done": True, "ready": True, "wait": False, "invocations": 2, "cursor": {},
        "reason": "1 datasets in s3://staged--use1-az4--x-s3/: 5 objects copied, 0 already there, "
                  "4 stale objects removed first"}
    assert s3.brief()[2:] == [
        ("put_object", T, LOCK), ("get_object", T, LOCK),
        ("list_objects_v2", SRC, "datasets/tiny-jpg/", "after:datasets/tiny-jpg/img-001.jpg"),
        ("copy_object", T, "datasets/tiny-jpg/img-003.jpg"),
        ("list_objects_v2", SRC, "datasets/tiny-jpg/", "after:datasets/tiny-jpg/img-003.jpg"),
        ("copy_object", T, "datasets/tiny-jpg/img-004.jpg"),
        ("put_object", T, MARKER), ("get_object", T, LOCK), ("delete_object", T, LOCK)]


def test_an_invocation_goes_on_within_the_first_page_without_clearing(lab):
    s3 = lab(objects=source(count=3), staged={LOCK: lock_body("exec-1", NOW)})
    assert run(cursor={"index": 0, "token": None, "skip": 2, "copied": 2})["reason"] == (
        "1 datasets in s3://staged--use1-az4--x-s3/: 3 objects copied, 0 already there")
    assert s3.brief()[4:6] == [("list_objects_v2", SRC, "datasets/tiny-jpg/"),
                               ("copy_object", T, "datasets/tiny-jpg/img-002.jpg")]


# ---- errors while staging ------------------------------------------------------------------------------------------
def test_a_copy_the_role_may_not_make_ends_staging_not_ready_and_releases_the_lock(lab):
    s3 = lab()
    s3.fail("copy_object", "AccessDenied", 403, key="datasets/tiny-jpg/img-001.jpg", message="Access Denied")
    assert run() == {"done": True, "ready": False, "wait": False, "invocations": 1, "cursor": {},
                     "reason": DENIED_COPY}
    assert LOCK not in s3.buckets[T] and MARKER not in s3.buckets[T]
    assert s3.brief()[-2:] == [("get_object", T, LOCK), ("delete_object", T, LOCK)]


def test_a_lock_that_cannot_be_released_after_a_failed_copy_is_left_to_turn_stale(lab):
    s3 = lab()
    s3.fail("copy_object", "AccessDenied", 403, key="datasets/tiny-jpg/img-001.jpg", message="Access Denied")
    s3.fail("get_object", "InternalError", 500, key=LOCK)
    assert run()["reason"] == DENIED_COPY
    assert s3.json(T, LOCK) == {"execution": "exec-1", "taken_at": NOW}


def test_a_copy_failing_on_aws_side_waits_holding_the_lock_and_the_count_so_far(lab):
    s3 = lab(staged={"datasets/tiny-jpg/old-0.jpg": b"o", "datasets/tiny-jpg/old-1.jpg": b"o"})
    s3.fail("copy_object", "InternalError", 500, key="datasets/tiny-jpg/img-000.jpg",
            message="We encountered an internal error.")
    assert run(cursor={"waits": 1}) == {
        "done": False, "ready": False, "wait": True, "invocations": 0,
        "cursor": {"index": 0, "token": None, "skip": 0, "copied": 0, "skipped": 0, "removed": 2, "invocations": 0,
                   "waits": 2},
        "reason": "AWS CopyObject failed (InternalError: We encountered an internal error.); a temporary failure on "
                  "AWS's side: it passes: what stopped here can start again later; staging goes on after a wait"}
    assert s3.json(T, LOCK) == {"execution": "exec-1", "taken_at": NOW}


@pytest.mark.parametrize("index, released", [(0, True), (1, False)])
def test_a_directory_bucket_the_role_may_not_list_ends_staging_releasing_the_current_lock(lab, index, released):
    """Past the last dataset there is no lock to release."""
    s3 = lab(staged={LOCK: lock_body("exec-1", NOW)})
    s3.fail("list_objects_v2", "AccessDenied", 403, key="datasets/", message="Access Denied")
    assert run(cursor={"index": index}) == {
        "done": True, "ready": False, "wait": False, "invocations": 1, "cursor": {},
        "reason": "copying into the S3 Express One Zone bucket failed: AWS ListObjectsV2 failed (AccessDenied: Access "
                  "Denied); the ExpressStaging function's role may not call ListObjectsV2: deploy the lab again so "
                  "the role has it (`make deploy FSX=keep`); a bucket policy or an organization's SCP can also "
                  "refuse it"}
    assert s3.brief()[2:] == ([("get_object", T, LOCK), ("delete_object", T, LOCK)] if released else [])


# ---- waking the directory bucket -----------------------------------------------------------------------------------
@pytest.mark.parametrize("env, sleeps", [
    ({"DSLAB_STAGING_BUDGET_SECONDS": "100"}, [1, 2, 4, 8, 16, 30, 30]),
    ({}, [1, 2, 4, 8, 16] + [30] * 8),
    ({"DSLAB_TIME_SCALE": "0.5"}, [0.5, 1, 2, 4, 8] + [15] * 8)])
def test_an_inactive_directory_bucket_is_asked_until_the_wake_deadline_then_staging_waits(lab, monkeypatch, clock,
                                                                                          env, sleeps):
    """Backing off from a second (times the stand-in's time scale), doubling up to 30, for five minutes or the
    budget if shorter; then the 503 hands on after a wait."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    s3 = lab()
    s3.fail("list_objects_v2", "ServiceUnavailable", 503, key="datasets/", times=100, message="Service Unavailable")
    assert run() == {
        "done": False, "ready": False, "wait": True, "invocations": 0,
        "cursor": {"index": 0, "token": None, "skip": 0, "copied": 0, "skipped": 0, "removed": 0, "invocations": 0,
                   "waits": 1},
        "reason": "AWS ListObjectsV2 failed (ServiceUnavailable: Service Unavailable); a temporary failure on AWS's "
                  "side: it passes: what stopped here can start again later; staging goes on after a wait"}
    assert clock.sleeps == sleeps
    assert s3.keys(T) == []


def test_a_directory_bucket_that_wakes_up_is_staged(lab, clock):
    s3 = lab()
    s3.fail("list_objects_v2", "ServiceUnavailable", 503, key="datasets/", times=2)
    assert run()["ready"] is True
    assert clock.sleeps == [1, 2]
    assert s3.brief()[1:4] == [("list_objects_v2", T, "datasets/")] * 3


def test_waking_an_active_bucket_is_one_listing_of_one_key(clock):
    s3 = FakeS3(clock)
    wake_directory_bucket(s3, T, deadline=0.0)
    assert s3.calls == [("list_objects_v2", {"Bucket": T, "Prefix": "datasets/", "MaxKeys": 1})]
    assert clock.sleeps == []


def test_waking_stops_when_the_next_wait_would_pass_the_deadline(clock):
    """Asked at 0, 1 and 3 seconds: a next ask at 7 would pass the deadline at 3, so the 503 is raised."""
    s3 = FakeS3(clock)
    s3.fail("list_objects_v2", "ServiceUnavailable", 503, times=100)
    with pytest.raises(ClientError) as raised:
        wake_directory_bucket(s3, T, deadline=1003.0)
    assert raised.value.response["Error"]["Code"] == "ServiceUnavailable"
    assert clock.sleeps == [1, 2]
    assert len(s3.calls) == 3


@pytest.mark.parametrize("code, status", [("InternalError", 500), ("NoSuchBucket", None)])
def test_waking_raises_any_other_answer_at_once(clock, code, status):
    s3 = FakeS3(clock)
    s3.fail("list_objects_v2", code, status)
    with pytest.raises(ClientError) as raised:
        wake_directory_bucket(s3, T, deadline=5000.0)
    assert raised.value.response["Error"]["Code"] == code
    assert clock.sleeps == []


# ---- what a later invocation adds to the counts ----------------------------------------------------------------------
def test_a_later_invocation_adds_its_skips_and_removals_to_the_cursors(lab):
    """Going on at the second dataset with one skipped and four stale objects removed before: the second is already
    staged (two skipped in all) or cleared of two more (six removed in all)."""
    document = _two_datasets()
    s3 = lab(document, objects={**source(), **source("more-jpg")},
             staged={"datasets/more-jpg.stats.json": b'{"files": 3, "bytes": 303}'})
    cursor = {"index": 1, "copied": 3, "skipped": 1, "removed": 4, "invocations": 1}
    assert run(cursor=cursor)["reason"] == ("2 datasets in s3://staged--use1-az4--x-s3/: 3 objects copied, "
                                            "2 already there, 4 stale objects removed first")
    s3 = lab(document, objects={**source(), **source("more-jpg")},
             staged={"datasets/more-jpg/old-0.jpg": b"o", "datasets/more-jpg/old-1.jpg": b"o"})
    assert run(cursor=cursor)["reason"] == ("2 datasets in s3://staged--use1-az4--x-s3/: 6 objects copied, "
                                            "1 already there, 6 stale objects removed first")
    assert s3.keys(T) == ["datasets/more-jpg.stats.json", "datasets/more-jpg/img-000.jpg",
                          "datasets/more-jpg/img-001.jpg", "datasets/more-jpg/img-002.jpg"]


def test_an_empty_source_prefix_is_staged_as_an_empty_dataset(lab):
    """S3 lists no Contents for an empty prefix: nothing is copied and the marker is written."""
    s3 = lab(objects={})
    assert run()["reason"] == "1 datasets in s3://staged--use1-az4--x-s3/: 0 objects copied, 0 already there"
    assert s3.keys(T) == [MARKER]


def test_sixty_four_copies_run_at_once(lab):
    """Each copy waits until 64 are under way (a barrier): with fewer threads the batch could not finish."""
    s3 = lab(objects=_many(64))
    barrier = threading.Barrier(64, timeout=3)
    copy_object = s3.copy_object

    def together(**params):
        barrier.wait()
        return copy_object(**params)
    s3.copy_object = together
    assert run()["reason"] == "1 datasets in s3://staged--use1-az4--x-s3/: 64 objects copied, 0 already there"
