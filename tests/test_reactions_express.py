"""`dslab express status|empty` and their S3 Express One Zone helpers (dslab/aws/express.py): which bucket the stack
outputs name, how its listings are paged, what is counted, deleted, kept and aborted, and what the user reads when
DeleteObjects refuses keys or the bucket keeps filling while it is emptied.

The directory buckets here are the fault world's stand-in (moto with the project's patches: unordered listings, "/"
prefixes only). Where AWS pages an answer that moto does not page (ListMultipartUploads) or a test needs small pages
or a partial refusal, ``Paged`` stands in front of the stand-in's client and answers the way AWS documents it."""

from __future__ import annotations

import json

import pytest

from dslab.aws import express
from dslab.core.errors import ConfigError

from .fault_world import (
    REGION,
    run_cli,
    world,  # noqa: F401
)


# ---- helpers --------------------------------------------------------------------------------------------------------
def _bucket(world, name: str, objects: dict[str, int], uploads: tuple[str, ...] = ()) -> str:
    from dslab.emulator.patches import create_directory_bucket
    create_directory_bucket(name)
    s3 = world.c["s3"]
    for key, size in objects.items():
        s3.put_object(Bucket=name, Key=key, Body=b"x" * size)
    for key in uploads:
        s3.create_multipart_upload(Bucket=name, Key=key)
    return name


def _keys(world, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in world.c["s3"].list_objects_v2(Bucket=bucket).get("Contents", []))


def _uploads(world, bucket: str) -> list[str]:
    return sorted(u["Key"] for u in world.c["s3"].list_multipart_uploads(Bucket=bucket).get("Uploads", []))


class Paged:
    """The stand-in's S3 client, answering listings in pages of ``page`` entries the way AWS does past 1,000
    (ListObjectsV2 by MaxKeys and a continuation token; ListMultipartUploads by an opaque NextKeyMarker, as directory
    buckets do), optionally refusing some keys in DeleteObjects (the per-key Errors of a partial failure) and running
    ``on_list`` before each ListObjectsV2 (another writer at work). A client asked for the same first page for ever
    (a lost continuation) fails the test instead of looping."""

    def __init__(self, client, page: int | None = 2, refuse: dict[str, str] | None = None, on_list=None):
        self._client, self._page, self._refuse, self._on_list = client, page, refuse or {}, on_list
        self.calls = 0
        self.deleted_batches: list[list[str]] = []
        self._markers: dict[str, int] = {}

    def __getattr__(self, name):
        return getattr(self._client, name)

    def _count(self):
        self.calls += 1
        if self.calls > 200:
            raise AssertionError("the same listing was asked for again and again: a continuation was lost")

    def list_objects_v2(self, **params):
        self._count()
        if self._on_list is not None:
            self._on_list(params)
        if self._page is not None:
            params.setdefault("MaxKeys", self._page)
        return self._client.list_objects_v2(**params)

    def list_multipart_uploads(self, **params):
        self._count()
        marker = params.pop("KeyMarker", None)
        everything = self._client.list_multipart_uploads(**params)
        uploads = sorted(everything.get("Uploads", []), key=lambda u: u["UploadId"])   # no key order on AWS either
        start = self._markers[marker] if marker else 0
        size = self._page or 1000
        page = uploads[start:start + size]
        answer = {"Bucket": params["Bucket"], "Uploads": page, "IsTruncated": start + size < len(uploads)}
        if answer["IsTruncated"]:
            token = f"opaque-{len(self._markers)}"
            self._markers[token] = start + size
            answer["NextKeyMarker"] = token
        return answer

    def delete_objects(self, Bucket, Delete):
        keys = [o["Key"] for o in Delete["Objects"]]
        self.deleted_batches.append(keys)
        kept = sorted(k for k in keys if k in self._refuse)
        gone = [{"Key": k} for k in keys if k not in self._refuse]
        answer = self._client.delete_objects(Bucket=Bucket, Delete={**Delete, "Objects": gone}) if gone else {}
        if kept:
            answer["Errors"] = [{"Key": k, "Code": self._refuse[k], "Message": f"{self._refuse[k]} for the test"}
                                for k in kept]
        return answer


def _outputs(world, name: str, **outputs) -> str:
    path = world.tmp / name
    path.write_text(json.dumps({"DataSourceLab-Core": {"BucketName": "data-bucket", **outputs}}))
    return str(path)


def _through(monkeypatch, client) -> None:
    """`dslab express` reaches the bucket through ``client``."""
    monkeypatch.setattr(express, "s3_client", lambda region: client)


ARN = "arn:aws:s3express:{region}:123456789012:bucket/{name}"


# ---- which bucket: the stack outputs ---------------------------------------------------------------------------------
def test_bucket_is_the_one_the_stack_outputs_name_in_the_region_of_its_arn():
    """The stack's name, ARN and zone are reported as they are, and the ARN's region wins over the default one."""
    name = "lab--euw1-az1--x-s3"
    arn = f"arn:aws:s3express:eu-west-1:123456789012:bucket/{name}"
    assert express.express_bucket({"ExpressBucketName": name, "ExpressBucketArn": arn, "ExpressZoneId": "euw1-az1"},
                                  "us-east-1") == {"bucket": name, "arn": arn, "zone_id": "euw1-az1",
                                                   "region": "eu-west-1"}


def test_bucket_without_an_arn_takes_the_default_region_and_the_zone_in_its_name():
    """Outputs naming only the bucket: no ARN, the region asked for, and the zone read from <base>--<zone>--x-s3."""
    assert express.express_bucket({"ExpressBucketName": "lab--use1-az5--x-s3"}, "us-west-2") == {
        "bucket": "lab--use1-az5--x-s3", "arn": None, "zone_id": "use1-az5", "region": "us-west-2"}


def test_zone_output_is_reported_even_where_the_name_carries_none():
    """ExpressZoneId is the zone reported; a name without the --x-s3 suffix gives no zone of its own."""
    assert express.express_bucket({"ExpressBucketName": "staging", "ExpressZoneId": "use1-az4"}, "us-east-1")[
        "zone_id"] == "use1-az4"
    assert express.express_bucket({"ExpressBucketName": "staging"}, "us-east-1")["zone_id"] is None


@pytest.mark.parametrize("arn, region", [
    ("arn:aws:s3express::123456789012:bucket/lab--use1-az4--x-s3", "ap-south-1"),   # no region in it
    ("arn:aws:s3express:eu-west-1:bucket/lab--use1-az4--x-s3", "ap-south-1"),        # cut short: no account
    ("arn:aws:s3:eu-west-1:123456789012:bucket/lab--use1-az4--x-s3", "ap-south-1"),  # not an s3express ARN
])
def test_an_arn_that_is_not_a_whole_s3express_arn_leaves_the_default_region(arn, region):
    """Only a whole arn:aws:s3express:<region>:<account>:bucket/<name> moves the bucket out of the default region."""
    found = express.express_bucket({"ExpressBucketName": "lab--use1-az4--x-s3", "ExpressBucketArn": arn}, region)
    assert (found["region"], found["arn"]) == ("ap-south-1", arn)


@pytest.mark.parametrize("enabled", ["false", "False", "FALSE"])
def test_a_lab_deployed_without_express_has_no_bucket(enabled):
    """ExpressEnabled=false (any case) and no bucket name: there is no directory bucket, and that is not an error."""
    assert express.express_bucket({"ExpressEnabled": enabled, "BucketName": "data"}, "us-east-1") is None


@pytest.mark.parametrize("outputs", [{"BucketName": "data"}, {"ExpressEnabled": "true"}, {"ExpressEnabled": ""}])
def test_outputs_without_the_bucket_name_of_an_express_lab_are_refused(outputs):
    """No ExpressBucketName while Express is not switched off: an old deployment, said so, not taken as 'off'."""
    with pytest.raises(ConfigError, match="ExpressBucketName is missing"):
        express.express_bucket(outputs, "us-east-1")


def test_status_of_a_lab_deployed_before_express_tells_how_to_fix_it(world):
    """`dslab express status` with outputs lacking the bucket: exit 2 and the one line that says what to do."""
    seen = run_cli(["express", "status", "--outputs", _outputs(world, "no-express.json"), "--region", REGION])
    assert seen.rc == 2 and seen.out == ""
    assert seen.err.strip() == (
        "dslab: error: --outputs: stack output ExpressBucketName is missing: the lab was deployed before it had an "
        "S3 Express One Zone bucket; deploy it again (`make deploy FSX=keep`), or pass the current cdk-outputs.json")


def test_status_and_empty_of_a_lab_without_express_say_it_is_off(world):
    """ExpressEnabled=false: status and empty say Express is off and how to add it, and exit 0."""
    outputs = _outputs(world, "express-off.json", ExpressEnabled="false")
    status = run_cli(["express", "status", "--outputs", outputs, "--region", REGION])
    empty = run_cli(["express", "empty", "--yes", "--outputs", outputs, "--region", REGION])
    off = ("S3 Express One Zone: off (the lab was deployed with -c express=false); deploy with -c express=true to add "
           "the directory bucket")
    assert (status.rc, status.out, status.err) == (0, off + "\n", "")
    assert (empty.rc, empty.out, empty.err) == (0, off + ": nothing to empty\n", "")


def test_status_names_the_bucket_its_zone_and_the_region_it_is_read_in(world):
    """The status header shows the stack's bucket, zone and the ARN's region, and counts what the bucket holds."""
    name = _bucket(world, "status--use1-az6--x-s3", {"datasets/s/a.bin": 1000, "datasets/s.stats.json": 500})
    outputs = _outputs(world, "status.json", ExpressBucketName=name, ExpressZoneId="use1-az6",
                       ExpressBucketArn=ARN.format(region="us-west-2", name=name))
    seen = run_cli(["express", "status", "--outputs", outputs, "--region", REGION])
    assert seen.rc == 0, seen.err
    lines = seen.out.splitlines()
    assert lines[0] == "S3 Express One Zone bucket status--use1-az6--x-s3 (zone use1-az6, us-west-2)"
    assert lines[1].startswith("  2 objects, 0.00 GB: $0.00 per month")
    assert lines[2].split() == ["datasets/s/", "2", "objects", "0.00", "GB", "$0.00/month"]


# ---- the client ------------------------------------------------------------------------------------------------------
def test_client_through_an_endpoint_override_signs_without_express_sessions(world, monkeypatch):
    """AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (a stand-in, which has no CreateSession) turns session auth off."""
    monkeypatch.delenv("AWS_S3_DISABLE_EXPRESS_SESSION_AUTH", raising=False)
    for variable in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
        monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
        monkeypatch.setenv(variable, "http://localhost:4566")
        client = express.s3_client("eu-north-1")
        assert client.meta.region_name == "eu-north-1"
        assert client.meta.config.s3 == {"disable_s3_express_session_auth": True}, variable


def test_client_for_aws_itself_keeps_express_sessions(world, monkeypatch):
    """Without an endpoint override the client is botocore's own for the region: CreateSession auth stays on."""
    monkeypatch.delenv("AWS_S3_DISABLE_EXPRESS_SESSION_AUTH", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    client = express.s3_client("eu-south-1")
    assert client.meta.region_name == "eu-south-1"
    assert not (client.meta.config.s3 or {}).get("disable_s3_express_session_auth")


# ---- listing past the first page -------------------------------------------------------------------------------------
PAGED = {"datasets/d/a.bin": 10, "datasets/d/b.bin": 20, "datasets/d/c/c.bin": 30, "datasets/d/e.bin": 40,
         "datasets/d/f.bin": 50, "datasets/d.stats.json": 1, "datasets/d.manifest": 2, "datasets/d.index": 3,
         "datasets/d.v2/old.bin": 100, "datasets/e/x.bin": 200, "datasets/e.stats.json": 4, "datasets/readme": 5,
         "logs/run.txt": 6}
PAGED_UPLOADS = ("datasets/d/u1", "datasets/d/u2", "datasets/d/u3", "datasets/e/u4", "other/u5")


def test_inventory_counts_every_page_of_objects_and_uploads(world):
    """Listings of many pages: every object and byte is counted per dataset, and every upload in progress."""
    bucket = _bucket(world, "inv--use1-az4--x-s3", PAGED, PAGED_UPLOADS)
    assert express.inventory(Paged(world.c["s3"]), bucket) == {
        "objects": 13, "bytes": 471, "multipart_uploads": 5,
        "datasets": {"(other)": {"objects": 2, "bytes": 11}, "d": {"objects": 8, "bytes": 156},
                     "d.v2": {"objects": 1, "bytes": 100}, "e": {"objects": 2, "bytes": 204}}}


def test_count_of_one_dataset_takes_its_folder_and_its_files_on_every_page(world):
    """One dataset's count: its folder and the files beside it (not datasets/d.v2/, another dataset), and its uploads."""
    bucket = _bucket(world, "count--use1-az4--x-s3", PAGED, PAGED_UPLOADS)
    client = Paged(world.c["s3"])
    assert sorted(o["Key"] for o in express.sidecar_objects(client, bucket, "d")) == [
        "datasets/d.index", "datasets/d.manifest", "datasets/d.stats.json"]
    assert express.count(client, bucket, "d") == (8, 156, 3)
    assert express.count(client, bucket, None) == (13, 471, 5)


def test_emptying_one_dataset_deletes_its_pages_once_each_and_keeps_the_rest(world):
    """`empty` of one dataset over many pages: its objects deleted (each key sent once), its uploads aborted, the rest
    kept."""
    bucket = _bucket(world, "empty--use1-az4--x-s3", PAGED, PAGED_UPLOADS)
    client = Paged(world.c["s3"])
    assert express.empty(client, bucket, "d") == {"objects_deleted": 8, "bytes_deleted": 156, "uploads_aborted": 3}
    sent = [key for batch in client.deleted_batches for key in batch]
    assert sorted(sent) == ["datasets/d.index", "datasets/d.manifest", "datasets/d.stats.json", "datasets/d/a.bin",
                            "datasets/d/b.bin", "datasets/d/c/c.bin", "datasets/d/e.bin", "datasets/d/f.bin"]
    assert _keys(world, bucket) == ["datasets/d.v2/old.bin", "datasets/e.stats.json", "datasets/e/x.bin",
                                    "datasets/readme", "logs/run.txt"]
    assert _uploads(world, bucket) == ["datasets/e/u4", "other/u5"]
    assert express.empty(client, bucket) == {"objects_deleted": 5, "bytes_deleted": 315, "uploads_aborted": 2}
    assert _keys(world, bucket) == [] and _uploads(world, bucket) == []


# ---- emptying: what the user reads ----------------------------------------------------------------------------------
def test_empty_of_a_dataset_with_only_uploads_in_progress_aborts_them_all(world, monkeypatch):
    """Nothing stored yet, two uploads in progress: both are aborted, 0 objects deleted, and it ends well."""
    bucket = _bucket(world, "uploads--use1-az4--x-s3", {"datasets/other/keep.bin": 7},
                     ("datasets/u/part-1", "datasets/u/part-2", "datasets/other/part-3"))
    outputs = _outputs(world, "uploads.json", ExpressBucketName=bucket)
    seen = run_cli(["express", "empty", "--dataset", "u", "--yes", "--outputs", outputs, "--region", REGION])
    assert (seen.rc, seen.err) == (0, ""), seen.err
    assert seen.out.splitlines() == [
        "s3://uploads--use1-az4--x-s3/datasets/u/: 0 objects, 0.00 GB ($0.00 per month), 2 multipart uploads in progress",
        ("s3://uploads--use1-az4--x-s3/datasets/u/: deleted 0 objects (0.00 GB), aborted 2 multipart uploads; the "
         "datasets are still in the data bucket, and the workflow stages them again when an Express job needs them")]
    assert _uploads(world, bucket) == ["datasets/other/part-3"] and _keys(world, bucket) == ["datasets/other/keep.bin"]


def test_objects_written_while_emptying_are_deleted_by_the_next_walk(world):
    """A writer adds an object after the first walk listed: the next walk finds and deletes it too."""
    bucket = _bucket(world, "late--use1-az4--x-s3", {"datasets/l/a.bin": 3, "datasets/l/b.bin": 4})
    walks = []

    def writer(params):
        walks.append(params.get("Prefix"))
        if len(walks) == 2:   # after the first walk's listing, before the second's
            world.c["s3"].put_object(Bucket=bucket, Key="datasets/l/late.bin", Body=b"x" * 5)

    assert express.empty(Paged(world.c["s3"], page=None, on_list=writer), bucket) == {
        "objects_deleted": 3, "bytes_deleted": 12, "uploads_aborted": 0}
    assert _keys(world, bucket) == []


def test_empty_of_a_bucket_that_keeps_filling_stops_and_says_why(world, monkeypatch):
    """Something writes into the dataset on every listing: after 10 walks it stops with a line that says why."""
    bucket = _bucket(world, "busy--use1-az4--x-s3", {"datasets/w/a.bin": 1, "datasets/w/b.bin": 1})
    written = []

    def writer(params):
        if params.get("Prefix") == "datasets/w/":
            written.append(f"datasets/w/new-{len(written)}.bin")
            world.c["s3"].put_object(Bucket=bucket, Key=written[-1], Body=b"x")

    _through(monkeypatch, Paged(world.c["s3"], page=None, on_list=writer))
    outputs = _outputs(world, "busy.json", ExpressBucketName=bucket)
    seen = run_cli(["express", "empty", "--dataset", "w", "--yes", "--outputs", outputs, "--region", REGION])
    assert seen.rc == 2
    assert seen.out == "s3://busy--use1-az4--x-s3/datasets/w/: 3 objects, 0.00 GB ($0.00 per month)\n"
    assert seen.err.strip() == (
        "dslab: error: express empty: busy--use1-az4--x-s3 still lists objects after 10 walks (13 deleted): is "
        "something writing into it (a running workflow's staging)? Run it again when that is done")
    assert len(written) == 11 and _keys(world, bucket) == []   # the count's listing, then 10 walks and no more


def test_keys_deleteobjects_refuses_stop_the_empty_and_are_named(world, monkeypatch):
    """DeleteObjects answers errors for two keys: the empty stops with the count and the first refused key, code and
    message; the refused keys are still there, the others deleted."""
    bucket = _bucket(world, "refuse--use1-az4--x-s3", {"datasets/r/a.bin": 1, "datasets/r/locked-b.bin": 1,
                                                       "datasets/r/locked-c.bin": 1, "datasets/r/d.bin": 1})
    _through(monkeypatch, Paged(world.c["s3"], page=None, refuse={"datasets/r/locked-b.bin": "AccessDenied",
                                                                   "datasets/r/locked-c.bin": "InternalError"}))
    outputs = _outputs(world, "refuse.json", ExpressBucketName=bucket)
    seen = run_cli(["express", "empty", "--dataset", "r", "--yes", "--outputs", outputs, "--region", REGION])
    assert seen.rc == 2 and "Traceback" not in seen.err
    assert seen.err.strip() == (
        "dslab: error: express empty: DeleteObjects refused 2 keys of refuse--use1-az4--x-s3, e.g. "
        "datasets/r/locked-b.bin: AccessDenied AccessDenied for the test")
    assert _keys(world, bucket) == ["datasets/r/locked-b.bin", "datasets/r/locked-c.bin"]
