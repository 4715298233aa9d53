"""The Express emptier (stacks/components/express_empty/index.py), a CloudFormation custom resource's Lambda handler:
what CloudFormation reads in the response document PUT to its pre-signed ResponseURL (a local HTTP server stands in
for it here), what is left of the directory bucket (objects deleted, uploads aborted), and how it answers when
S3 refuses, when the bucket is gone, and when the function's time runs out.

The response document: https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html
(Status, Reason, PhysicalResourceId, StackId, RequestId, LogicalResourceId, NoEcho, Data), sent as a PUT with an
empty Content-Type, as the pre-signed S3 URL's signature requires (cfn-response does the same)."""

from __future__ import annotations

import http.server
import json
import logging
import threading
import urllib.request

import boto3
import pytest

from dslab.emulator.patches import HOOKS, create_directory_bucket

from .fault_world import _emptier, world  # noqa: F401

STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/DataSourceLab-Core/0f1e2d3c-aaaa-bbbb-cccc-123456789abc"
REQUEST_ID = "5d4c3b2a-1111-2222-3333-444455556666"
LOGICAL_ID = "ExpressBucketEmptier"
INTERNAL = "We encountered an internal error. Please try again."


# ---- CloudFormation's side: the pre-signed ResponseURL -----------------------------------------------------------
class _ResponseUrl(http.server.BaseHTTPRequestHandler):
    timeout = 2   # a request whose body never comes (a wrong Content-Length) ends the connection, not the test run

    def _take(self):
        raw = self.headers.get("Content-Length")
        length = int(raw) if raw is not None and raw.isdigit() else None
        body = self.rfile.read(length) if length else b""
        self.server.received.append({"method": self.command, "path": self.path, "headers": self.headers,
                                     "body": body})
        self.send_response(200 if length is not None else 411)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_PUT = do_POST = do_GET = _take

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def response_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ResponseUrl)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def cfn(response_server, monkeypatch):
    """The ResponseURL and what arrived there."""
    for proxy in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    response_server.received.clear()
    host, port = response_server.server_address
    response_server.url = f"http://{host}:{port}/cfn-response/ExpressBucketEmptier?X-Amz-Signature=abc123"
    return response_server


def _answer(cfn) -> dict:
    """The one response document CloudFormation got, checked as a well-formed PUT."""
    assert len(cfn.received) == 1, cfn.received
    got = cfn.received[0]
    assert got["method"] == "PUT"
    assert got["path"] == "/cfn-response/ExpressBucketEmptier?X-Amz-Signature=abc123"
    assert got["headers"].get("Content-Type") == ""
    assert got["headers"].get("Content-Length") == str(len(got["body"]))
    return json.loads(got["body"])


def _event(request: str, bucket: str | None, url: str, **extra) -> dict:
    props = {"ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:ExpressEmptier"}
    if bucket is not None:
        props["BucketName"] = bucket
    return {"RequestType": request, "ResponseURL": url, "StackId": STACK_ID, "RequestId": REQUEST_ID,
            "LogicalResourceId": LOGICAL_ID, "ResourceType": "Custom::ExpressBucketEmptier",
            "ServiceToken": props["ServiceToken"], "ResourceProperties": props, **extra}


def _document(status: str, reason: str, physical: str, data: dict) -> dict:
    return {"Status": status, "Reason": reason, "PhysicalResourceId": physical, "StackId": STACK_ID,
            "RequestId": REQUEST_ID, "LogicalResourceId": LOGICAL_ID, "NoEcho": False, "Data": data}


class LambdaContext:
    """The Lambda context's clock: the milliseconds left at each look (the last one repeats)."""

    def __init__(self, *remaining_ms: int):
        self.remaining = list(remaining_ms)

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining.pop(0) if len(self.remaining) > 1 else self.remaining[0]


# ---- the directory buckets ---------------------------------------------------------------------------------------
def _bucket(world, base: str, objects: int = 0, uploads: int = 0) -> str:
    """A directory bucket of this file's own, holding ``objects`` objects and ``uploads`` multipart uploads."""
    name = f"{base}--use1-az4--x-s3"
    s3 = world.c["s3"]
    try:
        s3.head_bucket(Bucket=name)
    except s3.exceptions.ClientError:
        create_directory_bucket(name)
    listed = s3.list_objects_v2(Bucket=name).get("Contents", [])
    if listed:
        s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": o["Key"]} for o in listed]})
    for upload in s3.list_multipart_uploads(Bucket=name).get("Uploads", []):
        s3.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    for i in range(objects):
        s3.put_object(Bucket=name, Key=f"datasets/react/img-{i}.jpg", Body=b"x")
    for i in range(uploads):
        s3.create_multipart_upload(Bucket=name, Key=f"datasets/react/partial-{i}.bin")
    return name


def _objects(world, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in world.c["s3"].list_objects_v2(Bucket=bucket).get("Contents", []))


def _uploads(world, bucket: str) -> list[str]:
    return sorted(u["Key"] for u in world.c["s3"].list_multipart_uploads(Bucket=bucket).get("Uploads", []))


IMAGES = [f"datasets/react/img-{i}.jpg" for i in range(5)]


# ---- Delete --------------------------------------------------------------------------------------------------------
def test_delete_aborts_uploads_deletes_objects_and_answers_success_with_the_counts(world, cfn, caplog):
    """Delete empties the bucket and PUTs SUCCESS with the physical ID CloudFormation sent and the counts as Data."""
    caplog.set_level(logging.INFO)
    bucket = _bucket(world, "react-delete", objects=3, uploads=2)
    _emptier().handler(_event("Delete", bucket, cfn.url, PhysicalResourceId="emptier-physical-1"),
                       LambdaContext(900_000))
    assert _answer(cfn) == _document("SUCCESS", "SUCCESS", "emptier-physical-1", {
        "emptied": "react-delete--use1-az4--x-s3", "objects_deleted": "3", "uploads_aborted": "2"})
    assert _objects(world, bucket) == [] and _uploads(world, bucket) == []
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.getMessage().startswith("{")]
    assert logged == [{"request": "Delete", "bucket": "react-delete--use1-az4--x-s3",
                       "emptied": "react-delete--use1-az4--x-s3", "objects_deleted": 3, "uploads_aborted": 2}]
    assert "CloudFormation answered 200" in [r.getMessage() for r in caplog.records]


def test_delete_of_a_bucket_without_uploads_reports_none_aborted(world, cfn):
    """A bucket with objects and no multipart upload: the objects go, and Data says 0 uploads aborted."""
    bucket = _bucket(world, "react-noupload", objects=2)
    _emptier().handler(_event("Delete", bucket, cfn.url, PhysicalResourceId="emptier-physical-2"),
                       LambdaContext(900_000))
    assert _answer(cfn) == _document("SUCCESS", "SUCCESS", "emptier-physical-2", {
        "emptied": "react-noupload--use1-az4--x-s3", "objects_deleted": "2", "uploads_aborted": "0"})
    assert _objects(world, bucket) == []


def test_delete_of_a_bucket_that_is_gone_answers_success_noting_no_such_bucket(world, cfn):
    """NoSuchBucket is an empty bucket: SUCCESS, with a note in Data, so the stack's deletion goes on."""
    _emptier().handler(_event("Delete", "react-gone--use1-az4--x-s3", cfn.url, PhysicalResourceId="emptier-gone"),
                       LambdaContext(900_000))
    assert _answer(cfn) == _document("SUCCESS", "SUCCESS", "emptier-gone", {
        "emptied": "react-gone--use1-az4--x-s3", "objects_deleted": "0", "uploads_aborted": "0",
        "note": "no such bucket"})


def test_delete_refused_by_s3_answers_failed_naming_the_error_and_the_cli_fix(world, cfn, caplog):
    """An S3 refusal (AccessDenied) becomes a FAILED answer naming the bucket, the error and `dslab express empty`."""
    bucket = _bucket(world, "react-denied", objects=1, uploads=1)
    HOOKS.api_fault = lambda service, operation, request: (
        (403, "AccessDenied", "Access Denied") if operation == "ListMultipartUploads" and bucket in str(request.url)
        else None)
    try:
        _emptier().handler(_event("Delete", bucket, cfn.url, PhysicalResourceId="emptier-denied"),
                           LambdaContext(900_000))
    finally:
        HOOKS.api_fault = None
    assert _answer(cfn) == _document(
        "FAILED", "emptying directory bucket react-denied--use1-az4--x-s3 failed: AccessDenied: An error occurred "
        "(AccessDenied) when calling the ListMultipartUploads operation: Access Denied. Empty it with "
        "`dslab express empty --yes`, then delete the stack again.", "emptier-denied", {})
    assert _objects(world, bucket) == ["datasets/react/img-0.jpg"]
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in failures] == ["emptying react-denied--use1-az4--x-s3 failed"]
    assert failures[0].exc_info is not None


# ---- the function's 15 minutes -------------------------------------------------------------------------------------
OUT_OF_TIME = ("directory bucket {bucket} is not empty yet ({deleted} objects deleted, {aborted} uploads aborted in "
               "this attempt, the function's 15 minutes are nearly up); delete the stack again to continue, or run "
               "`dslab express empty --yes` first")


def test_delete_with_under_a_minute_left_answers_failed_before_touching_the_bucket(world, cfn):
    """Less than 60 s left: FAILED at once (not a timeout CloudFormation waits an hour for), the bucket untouched."""
    bucket = _bucket(world, "react-late", objects=2, uploads=1)
    _emptier().handler(_event("Delete", bucket, cfn.url, PhysicalResourceId="emptier-late"), LambdaContext(59_999))
    assert _answer(cfn) == _document("FAILED", OUT_OF_TIME.format(
        bucket="react-late--use1-az4--x-s3", deleted=0, aborted=0), "emptier-late", {})
    assert _objects(world, bucket) == ["datasets/react/img-0.jpg", "datasets/react/img-1.jpg"]
    assert _uploads(world, bucket) == ["datasets/react/partial-0.bin"]


def test_delete_with_exactly_a_minute_left_still_empties(world, cfn):
    """60 s left is enough: only less than a minute stops the work."""
    bucket = _bucket(world, "react-minute", objects=1)
    _emptier().handler(_event("Delete", bucket, cfn.url, PhysicalResourceId="emptier-minute"), LambdaContext(60_000))
    assert _answer(cfn)["Status"] == "SUCCESS"
    assert _objects(world, bucket) == []


def test_time_running_out_between_uploads_and_objects_reports_what_was_done(world, cfn):
    """The clock is read before each listing: time out after the aborts and the answer counts them, objects kept."""
    bucket = _bucket(world, "react-midway", objects=2, uploads=1)
    _emptier().handler(_event("Delete", bucket, cfn.url, PhysicalResourceId="emptier-midway"),
                       LambdaContext(900_000, 59_000))
    assert _answer(cfn) == _document("FAILED", OUT_OF_TIME.format(
        bucket="react-midway--use1-az4--x-s3", deleted=0, aborted=1), "emptier-midway", {})
    assert _uploads(world, bucket) == []
    assert _objects(world, bucket) == ["datasets/react/img-0.jpg", "datasets/react/img-1.jpg"]


# ---- Create and Update -------------------------------------------------------------------------------------------
def test_create_answers_success_with_a_physical_id_from_the_bucket_and_touches_nothing(world, cfn):
    """Create: SUCCESS, PhysicalResourceId "empty-<bucket>", Data emptied "None", the bucket's objects kept."""
    bucket = _bucket(world, "react-create", objects=1)
    _emptier().handler(_event("Create", bucket, cfn.url), LambdaContext(900_000))
    assert _answer(cfn) == _document("SUCCESS", "SUCCESS", "empty-react-create--use1-az4--x-s3", {"emptied": "None"})
    assert _objects(world, bucket) == ["datasets/react/img-0.jpg"]


def test_update_keeping_the_bucket_empties_nothing(world, cfn):
    """Update with the same BucketName: SUCCESS and nothing deleted."""
    bucket = _bucket(world, "react-same", objects=1, uploads=1)
    _emptier().handler(_event("Update", bucket, cfn.url, PhysicalResourceId="emptier-same",
                              OldResourceProperties={"BucketName": bucket}), LambdaContext(900_000))
    assert _answer(cfn) == _document("SUCCESS", "SUCCESS", "emptier-same", {"emptied": "None"})
    assert _objects(world, bucket) == ["datasets/react/img-0.jpg"]
    assert _uploads(world, bucket) == ["datasets/react/partial-0.bin"]


def test_update_without_old_properties_empties_nothing(world, cfn):
    """Update whose OldResourceProperties has no BucketName: SUCCESS, nothing deleted."""
    bucket = _bucket(world, "react-noold", objects=1)
    _emptier().handler(_event("Update", bucket, cfn.url, PhysicalResourceId="emptier-noold",
                              OldResourceProperties={}), LambdaContext(900_000))
    assert _answer(cfn) == _document("SUCCESS", "SUCCESS", "emptier-noold", {"emptied": "None"})
    assert _objects(world, bucket) == ["datasets/react/img-0.jpg"]


def test_update_replacing_the_bucket_empties_the_old_one_only(world, cfn):
    """Update to a new bucket: the old one is emptied (CloudFormation deletes it next), the new one kept."""
    old = _bucket(world, "react-old", objects=2)
    new = _bucket(world, "react-new", objects=1)
    _emptier().handler(_event("Update", new, cfn.url, PhysicalResourceId="emptier-replaced",
                              OldResourceProperties={"BucketName": old}), LambdaContext(900_000))
    assert _answer(cfn) == _document("SUCCESS", "SUCCESS", "emptier-replaced", {
        "emptied": "react-old--use1-az4--x-s3", "objects_deleted": "2", "uploads_aborted": "0"})
    assert _objects(world, old) == []
    assert _objects(world, new) == ["datasets/react/img-0.jpg"]


def test_update_replacing_the_bucket_with_under_a_minute_left_answers_failed(world, cfn):
    """The old bucket's emptying watches the clock too: FAILED with the out-of-time reason, its objects kept."""
    old = _bucket(world, "react-oldlate", objects=1)
    new = _bucket(world, "react-newlate")
    _emptier().handler(_event("Update", new, cfn.url, PhysicalResourceId="emptier-oldlate",
                              OldResourceProperties={"BucketName": old}), LambdaContext(30_000))
    assert _answer(cfn) == _document("FAILED", OUT_OF_TIME.format(
        bucket="react-oldlate--use1-az4--x-s3", deleted=0, aborted=0), "emptier-oldlate", {})
    assert _objects(world, old) == ["datasets/react/img-0.jpg"]


# ---- paging, batches and refusals (empty() with a client whose pages S3 keeps small) ------------------------------
class Paged:
    """A fresh S3 client whose ListObjectsV2 pages hold 2 keys and ListMultipartUploads pages 1 upload (S3 may return
    fewer than asked), recording each listing and deletion request; ``refuse_first`` makes S3 refuse, once, the first
    key of the first page listed (a per-key error in DeleteObjects' Errors)."""

    def __init__(self, refuse_first: bool = False, late_write: str | None = None):
        self.s3 = boto3.session.Session(region_name="us-east-1").client("s3")
        self.listings, self.deletions, self.upload_listings = [], [], []
        self.refuse_first, self.refused, self.late_write = refuse_first, [], late_write
        self.lock = threading.Lock()
        events = self.s3.meta.events
        events.register("provide-client-params.s3.ListObjectsV2", self._listing)
        events.register("after-call.s3.ListObjectsV2", self._listed)
        events.register("before-parameter-build.s3.DeleteObjects", self._deleting)
        events.register("after-call.s3.DeleteObjects", self._deleted)
        events.register("before-parameter-build.s3.ListMultipartUploads", self._listing_uploads)
        events.register("after-call.s3.ListMultipartUploads", self._upload_page)

    def _listing(self, params, **kwargs):
        self.listings.append({"request": dict(params)})
        if len(self.listings) > 40:
            raise RuntimeError("the walk does not end")
        params.setdefault("MaxKeys", 2)

    def _listed(self, parsed, **kwargs):
        self.listings[-1]["keys"] = [o["Key"] for o in parsed.get("Contents", [])]
        self.listings[-1]["next"] = parsed.get("NextContinuationToken")
        self.listings[-1]["truncated"] = parsed.get("IsTruncated")

    def _deleting(self, params, context, **kwargs):
        with self.lock:
            self.deletions.append({"keys": [o["Key"] for o in params["Delete"]["Objects"]],
                                   "quiet": params["Delete"].get("Quiet")})
            objects = params["Delete"]["Objects"]
            if self.refuse_first and not self.refused and objects[0]["Key"] == self.listings[0]["keys"][0]:
                self.refused.append(objects[0]["Key"])
                context["refused"] = objects[0]["Key"]
                params["Delete"]["Objects"] = objects[1:]

    def _deleted(self, parsed, context, **kwargs):
        if "refused" in context:
            parsed["Errors"] = [{"Key": context["refused"], "Code": "InternalError", "Message": INTERNAL}]
        if self.late_write:
            key, self.late_write = self.late_write, None
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=b"late")

    def _listing_uploads(self, params, context, **kwargs):
        self.upload_listings.append(dict(params))
        context["key_marker"] = params.get("KeyMarker")
        if len(self.upload_listings) > 40:
            raise RuntimeError("the walk does not end")

    def _upload_page(self, parsed, context, **kwargs):
        marker = context.get("key_marker")
        rest = sorted((u for u in parsed.get("Uploads", []) if marker is None or u["Key"] > marker),
                      key=lambda u: u["Key"])
        parsed["Uploads"] = rest[:1]
        parsed["IsTruncated"] = len(rest) > 1
        parsed.pop("NextKeyMarker", None)
        if len(rest) > 1:
            parsed["NextKeyMarker"] = rest[0]["Key"]


def test_a_paged_listing_is_walked_by_continuation_token_and_each_page_deleted_in_one_request(world):
    """Five objects in pages of two: each page is asked for with the previous one's token, and deleted quietly."""
    bucket = _bucket(world, "react-paged", objects=5)
    paged = Paged()
    assert _emptier().empty(paged.s3, bucket) == {"emptied": "react-paged--use1-az4--x-s3", "objects_deleted": 5,
                                                  "uploads_aborted": 0}
    assert _objects(world, bucket) == []
    listings = paged.listings
    assert listings[0]["request"] == {"Bucket": "react-paged--use1-az4--x-s3"}
    assert listings[0]["truncated"] is True and listings[0]["next"]
    for before, after in zip(listings, listings[1:]):
        expected = {"Bucket": "react-paged--use1-az4--x-s3"}
        if before["truncated"]:
            expected["ContinuationToken"] = before["next"]
        assert after["request"] == expected
    assert listings[-1]["keys"] == [] and listings[-1]["truncated"] is False
    pages = sorted(sorted(listing["keys"]) for listing in listings if listing["keys"])
    assert sorted(sorted(d["keys"]) for d in paged.deletions) == pages
    assert sorted(k for page in pages for k in page) == IMAGES
    assert {d["quiet"] for d in paged.deletions} == {True}


def test_a_key_refused_on_an_early_page_fails_the_pass_with_s3s_words(world):
    """DeleteObjects' per-key Errors on the first page (more pages follow) raise with the count, key, code, message."""
    bucket = _bucket(world, "react-refused", objects=5)
    paged = Paged(refuse_first=True)
    with pytest.raises(RuntimeError) as raised:
        _emptier().empty(paged.s3, bucket)
    assert paged.refused, "no key was refused"
    assert str(raised.value) == f"DeleteObjects refused 1 keys, e.g. {paged.refused[0]}: InternalError {INTERNAL}"
    assert paged.refused[0] in _objects(world, bucket)
    assert len([listing for listing in paged.listings if listing["keys"]]) >= 2


def test_objects_written_during_the_walk_are_deleted_by_another_pass(world):
    """An object written while the deletions run is found by the next pass: the bucket ends empty, all counted."""
    bucket = _bucket(world, "react-late-write", objects=3)
    paged = Paged(late_write="datasets/react/written-meanwhile.jpg")
    paged.bucket = bucket
    assert _emptier().empty(paged.s3, bucket) == {"emptied": "react-late-write--use1-az4--x-s3",
                                                  "objects_deleted": 4, "uploads_aborted": 0}
    assert _objects(world, bucket) == []


def test_multipart_uploads_are_walked_by_key_marker_and_all_aborted(world):
    """Three uploads, one a page: each page is asked for with the previous NextKeyMarker; all three aborted."""
    bucket = _bucket(world, "react-uploads", objects=1, uploads=3)
    paged = Paged()
    assert _emptier().empty(paged.s3, bucket) == {"emptied": "react-uploads--use1-az4--x-s3",
                                                  "objects_deleted": 1, "uploads_aborted": 3}
    assert _uploads(world, bucket) == [] and _objects(world, bucket) == []
    assert paged.upload_listings == [
        {"Bucket": "react-uploads--use1-az4--x-s3"},
        {"Bucket": "react-uploads--use1-az4--x-s3", "KeyMarker": "datasets/react/partial-0.bin"},
        {"Bucket": "react-uploads--use1-az4--x-s3", "KeyMarker": "datasets/react/partial-1.bin"}]


# ---- the response itself ------------------------------------------------------------------------------------------
def test_a_long_reason_is_cut_to_3500_characters_and_missing_data_sent_as_empty(cfn):
    """The response body must stay under CloudFormation's 4,096 bytes: the Reason is cut to 3,500 characters."""
    event = _event("Delete", "react-any--use1-az4--x-s3", cfn.url)
    _emptier().respond(event, "FAILED", "emptier-long", "r" * 3499 + "st" + "u" * 1000)
    assert _answer(cfn) == _document("FAILED", "r" * 3499 + "s", "emptier-long", {})


def test_the_answer_waits_at_most_30_seconds_for_cloudformation(cfn, monkeypatch):
    """A ResponseURL that does not answer holds the function 30 s at most, not its whole 15 minutes."""
    timeouts = []
    real = urllib.request.urlopen

    def urlopen(request, *args, **kwargs):
        timeouts.append(kwargs.get("timeout", args[1] if len(args) > 1 else "none given"))
        return real(request, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    _emptier().respond(_event("Create", "react-any--use1-az4--x-s3", cfn.url), "SUCCESS", "emptier-t", "")
    assert timeouts == [30]
    assert _answer(cfn)["Status"] == "SUCCESS"
