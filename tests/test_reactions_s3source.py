"""The training script's own S3 reads (training/dslab_train/s3source.py), as the job in the SageMaker container meets
them: the prefix it lists, the bytes it gets whole or by range, the read-ahead that feeds the pipeline, the labels and
format it derives from the listing, the client it picks (boto3, or the S3 Connector for PyTorch where the image has
it), and the one-line error (key, S3's answer, attempts, the fix) it stops with when S3 refuses a read.

S3 is the in-process stand-in (tests/fault_world.py's ``world``: moto with the project's patches), errors are injected
where it answers (HOOKS.api_fault) in S3's own protocol, so botocore's retries run as on AWS. The connector, not in
the lab's venv, is a stand-in module with the real one's signatures, reading the same stand-in bucket."""

from __future__ import annotations

import sys
import types
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from .fault_world import world  # noqa: F401

TRAINING = Path(__file__).resolve().parents[1] / "training"
if str(TRAINING) not in sys.path:
    sys.path.insert(0, str(TRAINING))

from dslab_train.contract import ContractError
from dslab_train.s3source import (
    RangeStream,
    S3Object,
    S3ReadError,
    S3Reads,
    detect_s3_format,
    jpg_labels,
    ordered_fetch,
    read_error,
    split_uri,
)

BUCKET = "s3source-reactions"
TEMPORARY = ("a temporary refusal that outlasted the client's retries: run the job again; a lower s3_concurrency asks "
             "less of S3")
DENIED = ("the job's role may not read it: give the training role s3:ListBucket on the bucket and s3:GetObject on the "
          "dataset's prefix (the lab's role has both for datasets/ in the data bucket)")
SHARD = bytes(range(256)) * 4           # 1,024 bytes: byte i is i % 256


@pytest.fixture(scope="module")
def bucket(world):  # noqa: F811 - the fixture imported above
    """A bucket of this module's own: a small dataset, a folder marker, a shard, and keys beside the prefix."""
    s3 = world.c["s3"]
    s3.create_bucket(Bucket=BUCKET)
    for key, body in {"datasets/mix/b/2.jpg": b"b" * 22, "datasets/mix/a/1.jpg": b"a" * 11, "datasets/mix/a/": b"",
                      "datasets/mix/c.npz": b"c" * 33, "datasets/mixed-up/x.jpg": b"x" * 5, "other/y.jpg": b"y" * 7,
                      "datasets/shards/train-00000.tfrecord": SHARD}.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    return world


@pytest.fixture
def plain_env(monkeypatch):
    """The container's environment without a region or an endpoint of its own, and no S3 Connector installed."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "s3torchconnector", None)      # import fails: the 2.11+ images
    monkeypatch.setitem(sys.modules, "s3torchconnector._s3client", None)
    return monkeypatch


@contextmanager
def s3_answers(operation: str, status: int, code: str, message: str, times: int | None = None):
    """S3 answers ``operation`` with this error (``times`` requests, else every one); yields the requests it answered."""
    from dslab.emulator.patches import HOOKS
    answered: list[str] = []

    def fault(service_id: str, op: str, request):
        if service_id != "s3" or op != operation or (times is not None and len(answered) >= times):
            return None
        answered.append(request.headers.get("Range", b"").decode() if request.headers.get("Range") else "")
        return status, code, message

    HOOKS.api_fault = fault
    try:
        yield answered
    finally:
        HOOKS.api_fault = None


def client_error(response: dict):
    from botocore.exceptions import ClientError
    return ClientError(response, "GetObject")


# ---- split_uri: dataset_uri --------------------------------------------------------------------------------------
@pytest.mark.parametrize("uri, expected", [
    ("s3://data-bucket/datasets/caltech", ("data-bucket", "datasets/caltech/")),
    ("s3://data-bucket/datasets/caltech/", ("data-bucket", "datasets/caltech/")),
    ("s3://data-bucket/", ("data-bucket", "")),
])
def test_dataset_uri_splits_into_bucket_and_a_folder_prefix_ending_in_slash(uri, expected):
    """A dataset URI gives its bucket and a prefix that ends in one "/" (the whole bucket: an empty prefix)."""
    assert split_uri(uri) == expected


@pytest.mark.parametrize("uri", ["s3://data-bucket", "https://data-bucket/datasets/", "datasets/caltech/", None,
                                 "s3:///datasets/caltech/"])
def test_a_dataset_uri_that_is_no_s3_prefix_is_refused_naming_the_hyperparameter(uri):
    """A URI without s3://bucket/ is a ContractError that names dataset_uri, the value and the form it needs."""
    with pytest.raises(ContractError) as raised:
        split_uri(uri)
    assert str(raised.value) == f"hyperparameter dataset_uri={uri!r} is not an S3 prefix (s3://bucket/prefix/)"


# ---- read_error: S3's answer, the attempts, the fix --------------------------------------------------------------
@pytest.mark.parametrize("code, status, fix", [
    ("SlowDown", 503, TEMPORARY),
    ("InternalError", 500, TEMPORARY),
    ("AccessDenied", 403, DENIED),
    ("ExpiredToken", 400, ("the job's credentials had expired, or its clock was more than 15 minutes off: SageMaker "
                           "renews the role's credentials, so run the job again")),
    ("NoSuchBucket", 404, "the bucket does not exist: fix dataset_uri"),
    ("NoSuchKey", 404, "the object went away while the job read it: leave the dataset unchanged while jobs read it"),
    ("404", 404, "the object went away while the job read it: leave the dataset unchanged while jobs read it"),
    ("InvalidObjectState", 403, ("the object is archived (an S3 Glacier storage class): restore it or upload the "
                                 "dataset again")),
    ("InvalidArgument", 400, "fix what S3's message names"),
    ("InsufficientCapacity", 500, TEMPORARY),      # a code of no list, but a server's error: temporary
])
def test_each_answer_of_s3_gets_its_own_fix_in_one_line(code, status, fix):
    """The error names S3's code and message, what was read of which URI, the attempts made, and the code's fix."""
    err = client_error({"Error": {"Code": code, "Message": "S3 said so"},
                        "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": 2}})
    made = read_error(err, "s3://data-bucket/datasets/x/a.jpg", "the object")
    assert isinstance(made, S3ReadError)
    assert str(made) == (f"S3 answered {code} (S3 said so) for the object of s3://data-bucket/datasets/x/a.jpg "
                         f"after 3 attempts: {fix}")


def test_an_answer_with_a_status_only_is_named_by_the_status_and_says_no_message():
    """A response without an Error element (a HEAD's 503): the status stands for the code, "no message" for the text."""
    made = read_error(client_error({"ResponseMetadata": {"HTTPStatusCode": 503, "RetryAttempts": 9}}),
                      "s3://data-bucket/datasets/x/", "the listing")
    assert str(made) == f"S3 answered 503 (no message) for the listing of s3://data-bucket/datasets/x/ after 10 attempts: {TEMPORARY}"


def test_an_answer_without_metadata_counts_one_attempt_and_the_denied_fix_given():
    """No ResponseMetadata: one attempt; AccessDenied takes the fix the caller gave (the checkpoint listing's own)."""
    made = read_error(client_error({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}),
                      "s3://data-bucket/checkpoints/", "the listing", "give the role s3:ListBucket")
    assert str(made) == ("S3 answered AccessDenied (Access Denied) for the listing of s3://data-bucket/checkpoints/ "
                         "after 1 attempts: give the role s3:ListBucket")


def test_an_empty_answer_is_named_with_a_question_mark_and_sends_the_reader_to_the_message():
    """Neither code nor status nor message: "?" and "no message", and the fix that points at S3's message."""
    made = read_error(client_error({}), "s3://data-bucket/datasets/x/a.jpg", "bytes 0-9")
    assert str(made) == ("S3 answered ? (no message) for bytes 0-9 of s3://data-bucket/datasets/x/a.jpg after 1 attempts: "
                         "fix what S3's message names")


# ---- S3Reads: the client the job gets ----------------------------------------------------------------------------
def test_an_unknown_s3_client_is_refused_listing_the_ones_there_are(bucket, plain_env):
    """s3_client must be auto, boto3 or s3torchconnector: the ContractError names the value and the three."""
    with pytest.raises(ContractError) as raised:
        S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto")
    assert str(raised.value) == "hyperparameter s3_client='boto': use one of auto, boto3, s3torchconnector"


def test_by_default_an_image_without_the_connector_reads_with_boto3(bucket, plain_env):
    """s3_client left out (auto) where the connector is not installed: boto3, and the reads work."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", region="us-east-1")
    assert reads.client_name == "boto3"
    assert reads.get("datasets/mix/a/1.jpg") == b"a" * 11


def test_asking_for_the_connector_where_the_image_has_none_names_the_images_and_the_fix(bucket, plain_env):
    """s3_client=s3torchconnector without it installed: a ContractError that says which images lack it and what to use."""
    with pytest.raises(ContractError) as raised:
        S3Reads(f"s3://{BUCKET}/datasets/mix/", "s3torchconnector", region="us-east-1")
    assert str(raised.value) == ("hyperparameter s3_client=s3torchconnector, but the image has no s3torchconnector "
                                 "1.4.2+ (the 2.11+ PyTorch images have none): use s3_client: boto3 or auto")


@pytest.mark.parametrize("given, env, expected", [
    ("eu-west-1", {"AWS_REGION": "eu-west-2", "AWS_DEFAULT_REGION": "ap-south-1"}, "eu-west-1"),
    (None, {"AWS_REGION": "eu-west-2", "AWS_DEFAULT_REGION": "ap-south-1"}, "eu-west-2"),
    (None, {"AWS_DEFAULT_REGION": "ap-south-1"}, "ap-south-1"),
    (None, {}, "us-east-1"),
])
def test_the_boto3_client_talks_to_the_region_given_else_the_containers_else_us_east_1(bucket, plain_env, given, env,
                                                                                         expected):
    """sagemaker_region first, then AWS_REGION, then AWS_DEFAULT_REGION, then us-east-1: the client's region."""
    for name, value in env.items():
        plain_env.setenv(name, value)
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto3", region=given)
    assert (reads.region, reads._s3.meta.region_name) == (expected, expected)


@pytest.mark.parametrize("concurrency, pool", [(64, 64), (200, 200), (1, 10)])
def test_the_boto3_connection_pool_holds_every_get_in_flight_and_never_fewer_than_ten(bucket, plain_env, concurrency,
                                                                                      pool):
    """s3_concurrency GETs in flight get as many pooled connections (botocore's default of 10 at the least)."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto3", concurrency=concurrency, region="us-east-1")
    assert reads._s3.meta.config.max_pool_connections == pool


# ---- S3Reads with boto3: what the job reads ----------------------------------------------------------------------
def test_listing_gives_the_objects_under_the_prefix_sorted_with_sizes_and_no_folder_markers(bucket, plain_env):
    """The prefix's objects only (not a sibling prefix's, not the folder marker), sorted by key, sizes as stored."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix", "boto3", region="us-east-1")
    assert reads.list() == [S3Object("datasets/mix/a/1.jpg", 11), S3Object("datasets/mix/b/2.jpg", 22),
                            S3Object("datasets/mix/c.npz", 33)]
    assert reads.requests == 1


def test_a_listing_over_several_pages_keeps_every_page_and_counts_each_request(bucket, plain_env):
    """S3 pages a listing (1,000 keys a page; 2 here): every page's objects are kept, each page is one request."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto3", region="us-east-1")

    def small_pages(params, **kwargs):
        params["MaxKeys"] = 2

    reads._s3.meta.events.register("provide-client-params.s3.ListObjectsV2", small_pages)
    try:
        listed = reads.list()
    finally:
        reads._s3.meta.events.unregister("provide-client-params.s3.ListObjectsV2", small_pages)
    assert [o.key for o in listed] == ["datasets/mix/a/1.jpg", "datasets/mix/b/2.jpg", "datasets/mix/c.npz"]
    assert reads.requests == 2


def test_an_empty_prefix_lists_as_no_objects(bucket, plain_env):
    """A prefix with nothing under it: an empty list (S3's page then has no Contents), after one request."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/none-here/", "boto3", region="us-east-1")
    assert reads.list() == []
    assert reads.requests == 1


def test_get_and_range_get_return_the_objects_bytes_and_every_request_is_counted(bucket, plain_env):
    """A GET gives the whole object, a ranged GET bytes start..end-1; list, get and range-get count 3 requests."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/shards/", "boto3", region="us-east-1")
    assert [o.key for o in reads.list()] == ["datasets/shards/train-00000.tfrecord"]
    assert reads.get("datasets/shards/train-00000.tfrecord") == SHARD
    assert reads.get_range("datasets/shards/train-00000.tfrecord", 300, 310) == bytes(range(44, 54))
    assert reads.requests == 3


def test_a_denied_listing_names_the_prefix_and_the_permission_to_grant(bucket, plain_env):
    """AccessDenied on the listing: not retried; the error names the dataset URI and s3:ListBucket/s3:GetObject."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix", "boto3", region="us-east-1")
    with s3_answers("ListObjectsV2", 403, "AccessDenied", "Access Denied") as answered, pytest.raises(S3ReadError) as raised:
        reads.list()
    assert len(answered) == 1
    assert str(raised.value) == (f"S3 answered AccessDenied (Access Denied) for the listing of s3://{BUCKET}/datasets/mix "
                                 f"after 1 attempts: {DENIED}")


def test_a_denied_checkpoint_listing_gives_the_fix_its_caller_named(bucket, plain_env):
    """A reader made with its own denied_fix (train.py's checkpoint listing) says that fix when S3 denies the list."""
    reads = S3Reads(f"s3://{BUCKET}/checkpoints/x/", "boto3", concurrency=1, region="us-east-1",
                    denied_fix="give it s3:ListBucket on the bucket for the checkpoint prefix")
    with s3_answers("ListObjectsV2", 403, "AccessDenied", "Access Denied"), pytest.raises(S3ReadError) as raised:
        reads.list()
    assert str(raised.value) == (f"S3 answered AccessDenied (Access Denied) for the listing of s3://{BUCKET}/checkpoints/x/ "
                                 "after 1 attempts: give it s3:ListBucket on the bucket for the checkpoint prefix")


def test_listing_a_bucket_that_does_not_exist_says_to_fix_dataset_uri(bucket, plain_env):
    """NoSuchBucket (S3's own answer): the error says the bucket does not exist and to fix dataset_uri."""
    reads = S3Reads("s3://no-such-bucket-s3source/datasets/x/", "boto3", region="us-east-1")
    with pytest.raises(S3ReadError) as raised:
        reads.list()
    text = str(raised.value)
    assert text.startswith("S3 answered NoSuchBucket (") and text.endswith(
        " for the listing of s3://no-such-bucket-s3source/datasets/x/ after 1 attempts: the bucket does not exist: "
        "fix dataset_uri"), text


def test_a_missing_object_names_its_key_and_says_the_dataset_changed(bucket, plain_env):
    """NoSuchKey on a GET (S3's own answer): the object's s3:// URI and the fix, after one attempt."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto3", region="us-east-1")
    with pytest.raises(S3ReadError) as raised:
        reads.get("datasets/mix/gone.jpg")
    text = str(raised.value)
    assert text.startswith("S3 answered NoSuchKey (") and text.endswith(
        f" for the object of s3://{BUCKET}/datasets/mix/gone.jpg after 1 attempts: the object went away while the job "
        "read it: leave the dataset unchanged while jobs read it"), text


def test_a_denied_get_names_the_object_and_the_readers_fix(bucket, plain_env):
    """AccessDenied on a GET: one attempt; the object's URI and the denied fix the reader was made with."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto3", region="us-east-1", denied_fix="grant s3:GetObject")
    with s3_answers("GetObject", 403, "AccessDenied", "Access Denied") as answered, pytest.raises(S3ReadError) as raised:
        reads.get("datasets/mix/a/1.jpg")
    assert answered == [""]
    assert str(raised.value) == (f"S3 answered AccessDenied (Access Denied) for the object of s3://{BUCKET}/datasets/mix/a/1.jpg "
                                 "after 1 attempts: grant s3:GetObject")


def test_a_throttled_get_is_retried_ten_times_then_says_to_run_again(bucket, plain_env):
    """SlowDown on every attempt: the first and botocore's 10 retries, then the error names the object and the temporary fix."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto3", region="us-east-1")
    with s3_answers("GetObject", 503, "SlowDown", "Please reduce your request rate.") as answered, \
            pytest.raises(S3ReadError) as raised:
        reads.get("datasets/mix/b/2.jpg")
    assert len(answered) == 11
    assert str(raised.value) == ("S3 answered SlowDown (Please reduce your request rate.) for the object of "
                                 f"s3://{BUCKET}/datasets/mix/b/2.jpg after 11 attempts: {TEMPORARY}")


def test_a_throttled_get_that_recovers_within_the_retries_returns_the_bytes(bucket, plain_env):
    """SlowDown twice, then S3 answers: the job gets the object, three requests made, one counted by the job."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto3", region="us-east-1")
    with s3_answers("GetObject", 503, "SlowDown", "Please reduce your request rate.", times=2) as answered:
        assert reads.get("datasets/mix/b/2.jpg") == b"b" * 22
    assert len(answered) == 2 and reads.requests == 1


def test_a_refused_range_get_names_the_byte_range_and_the_shard(bucket, plain_env):
    """A ranged GET refused (AccessDenied): the Range sent, and the error naming bytes start..end-1 of the shard."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/shards/", "boto3", region="us-east-1", denied_fix="grant s3:GetObject")
    with s3_answers("GetObject", 403, "AccessDenied", "Access Denied") as answered, pytest.raises(S3ReadError) as raised:
        reads.get_range("datasets/shards/train-00000.tfrecord", 512, 1024)
    assert answered == ["bytes=512-1023"]
    assert str(raised.value) == ("S3 answered AccessDenied (Access Denied) for bytes 512-1023 of "
                                 f"s3://{BUCKET}/datasets/shards/train-00000.tfrecord after 1 attempts: grant s3:GetObject")


def test_an_archived_object_says_to_restore_it(bucket, plain_env):
    """InvalidObjectState (a Glacier object): the error names the object and says to restore or upload it again."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto3", region="us-east-1")
    with s3_answers("GetObject", 403, "InvalidObjectState", "The operation is not valid for the object's storage class"), \
            pytest.raises(S3ReadError) as raised:
        reads.get_range("datasets/mix/c.npz", 0, 10)
    assert str(raised.value) == ("S3 answered InvalidObjectState (The operation is not valid for the object's storage "
                                 f"class) for bytes 0-9 of s3://{BUCKET}/datasets/mix/c.npz after 1 attempts: the object "
                                 "is archived (an S3 Glacier storage class): restore it or upload the dataset again")


# ---- the S3 Connector for PyTorch (2.5-2.10 images) ----------------------------------------------------------------
class Connector:
    """What the test sees of the stand-in connector: the clients made, and the requests they sent."""

    def __init__(self, s3):
        self.s3, self.clients, self.requests = s3, [], []


def _connector_module(seen: Connector) -> tuple[types.ModuleType, types.ModuleType]:
    """s3torchconnector (1.4.2+) and its _s3client, with the real ones' signatures, reading the stand-in's S3."""
    s3 = seen.s3

    class S3ClientConfig:
        def __init__(self, throughput_target_gbps=10.0, part_size=8 * 1024 * 1024, unsigned=False,
                     force_path_style=False, max_attempts=10):
            self.force_path_style = force_path_style

    class S3ReaderConstructor:
        @staticmethod
        def sequential():
            return "sequential"

        @staticmethod
        def range_based(buffer_size=None):
            return "range_based"

    class Reader:
        def __init__(self, bucket, key, kind):
            self.bucket, self.key, self.kind, self.position = bucket, key, kind, 0

        def seek(self, offset, whence=0):
            self.position = int(offset)
            return self.position

        def read(self, size=None):
            if self.kind == "range_based" and size is not None:
                seen.requests.append(("GET", self.bucket, self.key, f"bytes={self.position}-{self.position + size - 1}"))
                data = s3.get_object(Bucket=self.bucket, Key=self.key,
                                     Range=f"bytes={self.position}-{self.position + size - 1}")["Body"].read()
            else:   # the sequential reader streams the object from its start
                seen.requests.append(("GET", self.bucket, self.key, None))
                whole = s3.get_object(Bucket=self.bucket, Key=self.key)["Body"].read()
                data = whole[self.position:] if size is None else whole[self.position:self.position + size]
            self.position += len(data)
            return data

    class S3Client:
        def __init__(self, region, endpoint=None, user_agent=None, s3client_config=None):
            seen.clients.append({"region": region, "endpoint": endpoint,
                                 "force_path_style": getattr(s3client_config, "force_path_style", None)})

        def list_objects(self, bucket, prefix="", delimiter="", max_keys=1000):
            contents = [o for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                        for o in page.get("Contents", [])]
            contents.reverse()     # a directory bucket lists in no order
            for i in range(0, len(contents), 2):
                seen.requests.append(("LIST", bucket, prefix, None))
                yield types.SimpleNamespace(object_info=[types.SimpleNamespace(key=o["Key"], size=o["Size"], etag="e")
                                                         for o in contents[i:i + 2]])

        def get_object(self, bucket, key, *, object_info=None, reader_constructor=None):
            return Reader(bucket, key, reader_constructor or "sequential")

    top = types.ModuleType("s3torchconnector")
    top.S3ClientConfig, top.S3ReaderConstructor = S3ClientConfig, S3ReaderConstructor
    inner = types.ModuleType("s3torchconnector._s3client")
    inner.S3Client = S3Client
    return top, inner


@pytest.fixture
def connector(bucket, plain_env):
    """The image has the connector: what it was made with and what it sent."""
    seen = Connector(bucket.c["s3"])
    top, inner = _connector_module(seen)
    plain_env.setitem(sys.modules, "s3torchconnector", top)
    plain_env.setitem(sys.modules, "s3torchconnector._s3client", inner)
    return seen


@pytest.mark.parametrize("client", ["auto", "s3torchconnector"])
def test_where_the_image_has_the_connector_auto_and_asking_for_it_read_through_it(connector, client):
    """auto and s3torchconnector take the connector, made for the job's region, with no endpoint on AWS."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", client, region="eu-west-1")
    assert reads.client_name == "s3torchconnector"
    assert connector.clients == [{"region": "eu-west-1", "endpoint": None, "force_path_style": None}]
    assert reads.get("datasets/mix/a/1.jpg") == b"a" * 11
    assert connector.requests == [("GET", BUCKET, "datasets/mix/a/1.jpg", None)]


def test_asking_for_boto3_reads_with_boto3_even_where_the_connector_is_installed(connector):
    """s3_client=boto3: no connector client is made, the job reads with boto3."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", "boto3", region="us-east-1")
    assert reads.client_name == "boto3" and connector.clients == []
    assert reads.get("datasets/mix/b/2.jpg") == b"b" * 22


def test_the_connector_is_given_the_local_endpoint_with_path_style_addressing(connector, plain_env):
    """AWS_ENDPOINT_URL (the lab's stand-in): passed to the connector, which does not read it, with path-style on."""
    plain_env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix/", region="us-west-2")
    assert reads.client_name == "s3torchconnector"
    assert connector.clients == [{"region": "us-west-2", "endpoint": "http://127.0.0.1:5000", "force_path_style": True}]


def test_the_connector_lists_every_page_sorted_without_folder_markers_counting_each_page(connector):
    """The connector's pages, in no order: every object under the prefix, sorted by key, markers left out."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/mix", "s3torchconnector", region="us-east-1")
    assert reads.list() == [S3Object("datasets/mix/a/1.jpg", 11), S3Object("datasets/mix/b/2.jpg", 22),
                            S3Object("datasets/mix/c.npz", 33)]
    assert connector.requests == [("LIST", BUCKET, "datasets/mix/", None)] * 2
    assert reads.requests == 2


def test_the_connector_reads_a_byte_range_with_its_range_reader(connector):
    """A range-get through the connector: one ranged GET of exactly those bytes (not the whole shard)."""
    reads = S3Reads(f"s3://{BUCKET}/datasets/shards/", "s3torchconnector", region="us-east-1")
    assert reads.get_range("datasets/shards/train-00000.tfrecord", 300, 310) == bytes(range(44, 54))
    assert connector.requests == [("GET", BUCKET, "datasets/shards/train-00000.tfrecord", "bytes=300-309")]
    assert reads.requests == 1


class StartingPool:
    """A pool whose workers start each GET as it is submitted; records the keys in submission order."""

    def __init__(self):
        self.submitted: list[str] = []

    def submit(self, fn, key, *args):
        self.submitted.append(key)
        future: Future = Future()
        try:
            future.set_result(fn(key, *args))
        except Exception as err:  # noqa: BLE001 - the consumer meets it at this key
            future.set_exception(err)
        return future


# ---- RangeStream: a shard streamed in 8 MiB ranged GETs, two in flight -------------------------------------------
MIB8 = 8_388_608


class RangeReads:
    """A reader of one object that records each ranged GET asked of it and refuses a range S3 would not serve."""

    def __init__(self, data: bytes):
        self.data, self.asked = data, []

    def get_range(self, key: str, start: int, end: int) -> bytes:
        self.asked.append((key, start, end))
        if not (0 <= start < end <= len(self.data)):
            raise AssertionError(f"range {start}-{end} of a {len(self.data)}-byte object")
        return self.data[start:end]


def _object(size: int) -> bytes:
    return (bytes(range(251)) * (size // 251 + 1))[:size]


def test_a_shard_streams_whole_in_any_read_sizes_through_ranged_gets_of_8_mib():
    """Reads of odd sizes give the shard's bytes in order; its ranges are 8 MiB, the last one the remainder."""
    data = _object(2 * MIB8 + 1000)
    reads = RangeReads(data)
    with ThreadPoolExecutor(4) as pool, RangeStream(reads, "shard-0", len(data), pool) as stream:
        parts = []
        while part := stream.read(3_000_001):
            parts.append(part)
    assert b"".join(parts) == data
    assert [len(p) for p in parts[:2]] == [3_000_001, 3_000_001]
    assert sorted(reads.asked) == [("shard-0", 0, MIB8), ("shard-0", MIB8, 2 * MIB8),
                                   ("shard-0", 2 * MIB8, 2 * MIB8 + 1000)]


def test_a_shard_stream_keeps_two_ranges_in_flight_and_asks_the_next_only_when_one_is_used():
    """Opening asks ranges 1-2; a read within range 1 asks range 3; reading exactly range 1 asks no more."""
    data = _object(4 * MIB8 + 100)
    reads = RangeReads(data)
    stream = RangeStream(reads, "shard-1", len(data), StartingPool())
    assert [start for _, start, _ in reads.asked] == [0, MIB8]
    assert stream.read(MIB8) == data[:MIB8]
    assert [start for _, start, _ in reads.asked] == [0, MIB8, 2 * MIB8]
    assert stream.read(10) == data[MIB8:MIB8 + 10]
    assert [start for _, start, _ in reads.asked] == [0, MIB8, 2 * MIB8, 3 * MIB8]
    assert stream.read(3 * MIB8) == data[MIB8 + 10:4 * MIB8 + 10]
    assert reads.asked == [("shard-1", 0, MIB8), ("shard-1", MIB8, 2 * MIB8), ("shard-1", 2 * MIB8, 3 * MIB8),
                           ("shard-1", 3 * MIB8, 4 * MIB8), ("shard-1", 4 * MIB8, 4 * MIB8 + 100)]
    assert stream.read(MIB8) == data[4 * MIB8 + 10:]


def test_a_small_shard_is_one_ranged_get_and_reads_past_its_end_give_nothing():
    """A shard under 8 MiB: one GET of its size; a read past the end returns b"" (the reader's end of file)."""
    reads = RangeReads(b"0123456789")
    with RangeStream(reads, "small", 10, StartingPool()) as stream:
        assert stream.read(4) == b"0123"
        assert stream.read(100) == b"456789"
        assert stream.read(1) == b""
    assert reads.asked == [("small", 0, 10)]


# ---- ordered_fetch: JPEG objects, many GETs in flight, given in order ---------------------------------------------
def test_objects_come_in_the_epochs_order_with_depth_gets_ahead_of_the_consumer():
    """(key, bytes) in keys order; before the first is used, exactly ``depth`` GETs have been started."""
    pool = StartingPool()
    keys = ["k/3.jpg", "k/1.jpg", "k/2.jpg", "k/5.jpg", "k/4.jpg"]
    got = ordered_fetch(pool, keys, lambda key: key.encode() * 2, 3)
    assert next(got) == ("k/3.jpg", b"k/3.jpgk/3.jpg")
    assert pool.submitted == ["k/3.jpg", "k/1.jpg", "k/2.jpg"]
    assert list(got) == [("k/1.jpg", b"k/1.jpgk/1.jpg"), ("k/2.jpg", b"k/2.jpgk/2.jpg"), ("k/5.jpg", b"k/5.jpgk/5.jpg"),
                         ("k/4.jpg", b"k/4.jpgk/4.jpg")]
    assert pool.submitted == keys


def test_an_epoch_of_no_objects_fetches_nothing():
    """No keys: nothing is fetched or given."""
    pool = StartingPool()
    assert list(ordered_fetch(pool, [], lambda key: b"", 4)) == []
    assert pool.submitted == []


def test_a_refused_get_reaches_the_consumer_at_its_key():
    """A GET that raised (S3ReadError) is raised when the consumer reaches that key, after the ones before it."""
    def fetch(key):
        if key == "k/2.jpg":
            raise S3ReadError("S3 answered AccessDenied")
        return b"ok"

    got = ordered_fetch(StartingPool(), ["k/1.jpg", "k/2.jpg", "k/3.jpg"], fetch, 2)
    assert next(got) == ("k/1.jpg", b"ok")
    with pytest.raises(S3ReadError, match="AccessDenied"):
        next(got)


# ---- jpg_labels and detect_s3_format: what the listing tells the script ------------------------------------------
def _objects(prefix: str, names: list[str]) -> list[S3Object]:
    return [S3Object(prefix + name, 100) for name in names]


def test_each_jpeg_is_labelled_by_its_class_folder_and_a_file_at_the_top_by_minus_one():
    """Caltech-256 layout: classes are the folder names sorted; a JPEG at the top has no class (label -1)."""
    labels, classes = jpg_labels(_objects("datasets/caltech/", ["002.bear/a.jpg", "001.ak47/b.jpg", "001.ak47/c.jpg",
                                                                "loose.jpg"]), "datasets/caltech/")
    assert (labels, classes) == ([1, 0, 0, -1], ["001.ak47", "002.bear"])


def test_a_jpegs_class_is_its_innermost_folder():
    """Nested folders: the class is the folder the file sits in."""
    labels, classes = jpg_labels(_objects("datasets/n/", ["animals/cat/a.jpg", "animals/dog/b.jpg", "plants/cat/c.jpg"]),
                                 "datasets/n/")
    assert (labels, classes) == ([0, 1, 0], ["cat", "dog"])


def test_a_dataset_spread_over_p00_p01_is_labelled_past_the_spread_folders():
    """Spread over two prefixes: class folders under them keep their class, files directly in pNN have none."""
    labels, classes = jpg_labels(_objects("datasets/s/", ["p00/cat/a.jpg", "p01/b.jpg", "p01/dog/c.jpg"]), "datasets/s/")
    assert (labels, classes) == ([0, -1, 1], ["cat", "dog"])


def test_one_pnn_like_class_folder_beside_others_is_a_class_not_a_spread():
    """A single p00 folder beside a class folder is not a spread: p00 is a class like the other."""
    labels, classes = jpg_labels(_objects("datasets/c/", ["p00/a.jpg", "cat/b.jpg"]), "datasets/c/")
    assert (labels, classes) == ([1, 0], ["cat", "p00"])


def test_labels_are_the_same_for_a_prefix_given_without_its_slash_and_for_names_starting_with_x():
    """The prefix's trailing "/" is optional; folder names keep every letter (Xbox stays Xbox)."""
    labels, classes = jpg_labels(_objects("datasets/c/", ["p00/a.jpg", "p01/b.jpg", "p01/Xbox/c.jpg"]), "datasets/c")
    assert (labels, classes) == ([-1, -1, 0], ["Xbox"])
    labels, classes = jpg_labels(_objects("datasets/x/", ["Xbox/a.jpg", "Wii/b.jpg"]), "datasets/x/")
    assert (labels, classes) == ([1, 0], ["Wii", "Xbox"])


@pytest.mark.parametrize("names, expected", [
    (["train-0.tfrecord", "IMG_1.JPG"], "jpg"),
    (["a/b.jpeg"], "jpg"),
    (["x.npz", "y.jpg"], "jpg"),
    (["batch-0.NPZ", "train-0.tfrecord"], "npz"),
    (["train-00000-of-00004"], "tfrecord"),
    ([], "unknown"),
])
def test_the_datasets_format_is_told_from_its_keys(names, expected):
    """Any JPEG (any case): jpg; else any .npz: npz; else tfrecord shards; nothing listed: unknown."""
    assert detect_s3_format(_objects("datasets/d/", names)) == expected
