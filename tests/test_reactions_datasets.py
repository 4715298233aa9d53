"""`dslab dataset upload` and `dslab dataset stats` against S3 (dslab/inputs/datasets.py upload, stats): which files are
sent and which are skipped because S3 already holds them (size and ETag, or on a directory bucket the digest kept in
the object's metadata, read with HeadObject: one not read is sent again), the keys and settings each is sent with,
the manifest and metadata beside the prefix, the stats file the workflow's Plan reads, and the record returned. S3 is
a small in-memory fake that records every request; the expected values are written here."""

from __future__ import annotations

import hashlib
import json
import time
import types

import pytest
from botocore.exceptions import ClientError

from dslab.core.errors import ConfigError
from dslab.inputs import datasets

GENERAL = "lab-data"
DIRECTORY = "lab-x--use1-az4--x-s3"
WRITTEN_AT = "2030-01-02T03:04:05Z"


class S3:
    """The objects of one account, and every request made (operation, parameters)."""

    def __init__(self):
        self.objects: dict = {}
        self.requests: list = []
        self.head_fails = False

    def get_paginator(self, name):
        assert name == "list_objects_v2"
        owner = self

        class Pages:
            def paginate(self, Bucket, Prefix):
                owner.requests.append(("ListObjectsV2", {"Bucket": Bucket, "Prefix": Prefix}))
                keys = sorted(k for b, k in owner.objects if b == Bucket and k.startswith(Prefix))
                listed = [{"Key": k, "Size": len(owner.objects[(Bucket, k)]["Body"]),
                           "ETag": f'"{owner.objects[(Bucket, k)]["ETag"]}"'} for k in keys]
                return [{"Contents": listed[:2]}, {"Contents": listed[2:]} if listed[2:] else {"KeyCount": 0}]
        return Pages()

    def head_object(self, Bucket, Key):
        self.requests.append(("HeadObject", {"Bucket": Bucket, "Key": Key}))
        if self.head_fails or (Bucket, Key) not in self.objects:
            raise ClientError({"Error": {"Code": "403", "Message": "Forbidden"}}, "HeadObject")
        return {"ContentLength": len(self.objects[(Bucket, Key)]["Body"]),
                "Metadata": self.objects[(Bucket, Key)]["Metadata"]}

    def upload_file(self, Filename, Bucket, Key, ExtraArgs=None, Callback=None, Config=None):
        body = open(Filename, "rb").read()
        config = {k: getattr(Config, k) for k in ("multipart_threshold", "multipart_chunksize", "max_concurrency",
                                                  "use_threads")}
        self.requests.append(("Upload", {"Bucket": Bucket, "Key": Key, "ExtraArgs": ExtraArgs, "Config": config}))
        self.objects[(Bucket, Key)] = {"Body": body, "ETag": hashlib.md5(body).hexdigest(),
                                       "Metadata": (ExtraArgs or {}).get("Metadata", {})}
        Callback(len(body))

    def put_object(self, Bucket, Key, Body, **extra):
        self.requests.append(("PutObject", {"Bucket": Bucket, "Key": Key, **extra}))
        self.objects[(Bucket, Key)] = {"Body": Body, "ETag": hashlib.md5(Body).hexdigest(), "Metadata": {}}

    def body(self, bucket, key):
        return self.objects[(bucket, key)]["Body"]

    def sent(self, operation="Upload"):
        return [r for op, r in self.requests if op == operation]


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    monkeypatch.setattr(datasets, "time", types.SimpleNamespace(strftime=time.strftime,
                                                                gmtime=lambda *a: time.gmtime(1893553445)))


@pytest.fixture
def src(tmp_path):
    """Three data files in two class folders, the dataset's dataset.json, and a manifest.json inside a class folder
    (not the dataset's: neither data nor sent beside the prefix)."""
    root = tmp_path / "caltech"
    for name, body in (("a/1.jpg", b"abc"), ("a/2.jpg", b"defgh"), ("b/3.jpg", b"ijklmnop")):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(body)
    (root / "dataset.json").write_text('{"images": 3}')
    (root / "b" / "manifest.json").write_text("{}")
    return root


def _upload(src, s3, bucket=GENERAL, **kwargs):
    progress, totals = [], []
    kwargs.setdefault("threads", 1)   # one sender: the requests in the files' order
    result = datasets.upload(src, f"s3://{bucket}/datasets/caltech/", s3_client=s3, progress=progress.append,
                             total_cb=totals.append, **kwargs)
    return result, progress, totals


STATS = {"files": 3, "bytes": 16, "mean_bytes": 16 / 3, "median_bytes": 5, "p10_bytes": 3, "p90_bytes": 8,
         "min_bytes": 3, "max_bytes": 8, "format": "jpg"}
CONFIG = {"multipart_threshold": 16 * 1024 * 1024, "multipart_chunksize": 16 * 1024 * 1024, "max_concurrency": 4,
          "use_threads": True}


def test_a_new_dataset_is_sent_whole_with_its_manifest_metadata_and_stats_file(src):
    s3 = S3()
    result, progress, totals = _upload(src, s3)
    assert result == {"to": "s3://lab-data/datasets/caltech/", "files": 3, "uploaded": 3, "skipped": 0,
                      "bytes_uploaded": 16, "manifest": "s3://lab-data/datasets/caltech.manifest", "prefixes": 1,
                      "stats": "s3://lab-data/datasets/caltech.stats.json"}
    assert s3.requests[0] == ("ListObjectsV2", {"Bucket": "lab-data", "Prefix": "datasets/caltech/"})
    assert s3.sent() == [{"Bucket": "lab-data", "Key": f"datasets/caltech/{k}", "ExtraArgs": None, "Config": CONFIG}
                         for k in ("a/1.jpg", "a/2.jpg", "b/3.jpg")]
    assert (sorted(progress), totals) == ([3, 5, 8], [16])
    assert s3.body("lab-data", "datasets/caltech/b/3.jpg") == b"ijklmnop"
    assert json.loads(s3.body("lab-data", "datasets/caltech.manifest")) == [
        {"prefix": "s3://lab-data/datasets/caltech/"}, "a/1.jpg", "a/2.jpg", "b/3.jpg"]
    assert s3.body("lab-data", "datasets/caltech.dataset.json") == b'{"images": 3}'
    assert s3.sent("PutObject") == [
        {"Bucket": "lab-data", "Key": "datasets/caltech.manifest"},
        {"Bucket": "lab-data", "Key": "datasets/caltech.dataset.json"},
        {"Bucket": "lab-data", "Key": "datasets/caltech.stats.json", "ContentType": "application/json"}]
    stats = {**STATS, "prefixes": 1, "prefix": "s3://lab-data/datasets/caltech/", "written_by": "dslab dataset upload",
             "written_at": WRITTEN_AT}
    assert s3.body("lab-data", "datasets/caltech.stats.json").decode() == json.dumps(stats, indent=2)
    assert not any(k.endswith("manifest.json") for _, k in s3.objects)


def test_an_unchanged_dataset_is_all_skipped_and_its_listing_files_written_again(src):
    s3 = S3()
    _upload(src, s3)
    s3.requests.clear()
    result, progress, totals = _upload(src, s3)
    assert (result["uploaded"], result["skipped"], result["bytes_uploaded"], progress, totals) == (0, 3, 0, [], [0])
    assert s3.sent() == [] and s3.sent("HeadObject") == []
    assert [r["Key"] for r in s3.sent("PutObject")] == ["datasets/caltech.manifest", "datasets/caltech.dataset.json",
                                                        "datasets/caltech.stats.json"]


def test_a_file_changed_at_the_same_size_or_resized_is_sent_again_alone(src):
    s3 = S3()
    _upload(src, s3)
    (src / "a" / "1.jpg").write_bytes(b"xyz")        # same size, other bytes: the ETag tells
    (src / "b" / "3.jpg").write_bytes(b"ijklmnopq")  # one more byte
    s3.requests.clear()
    result, _, totals = _upload(src, s3)
    assert [r["Key"] for r in s3.sent()] == ["datasets/caltech/a/1.jpg", "datasets/caltech/b/3.jpg"]
    assert (result["uploaded"], result["skipped"], result["bytes_uploaded"], totals) == (2, 1, 12, [12])
    assert json.loads(s3.body("lab-data", "datasets/caltech.stats.json"))["bytes"] == 17


def test_a_file_over_the_part_size_is_compared_by_its_multipart_etag(src):
    """S3's ETag of a multipart upload is the MD5 of the parts' MD5s and their count: a file sent in 4-byte parts
    whose object carries that ETag is skipped, one whose object carries another is sent again."""
    s3 = S3()
    _upload(src, s3, part_size=4)
    digest = hashlib.md5(hashlib.md5(b"ijkl").digest() + hashlib.md5(b"mnop").digest()).hexdigest() + "-2"
    s3.objects[("lab-data", "datasets/caltech/b/3.jpg")]["ETag"] = digest
    s3.objects[("lab-data", "datasets/caltech/a/2.jpg")]["ETag"] = "0" * 32 + "-2"
    s3.requests.clear()
    result, _, _ = _upload(src, s3, part_size=4)
    assert [(r["Key"], r["Config"]["multipart_threshold"], r["Config"]["multipart_chunksize"]) for r in s3.sent()] == [
        ("datasets/caltech/a/2.jpg", 4, 4)]
    assert result["skipped"] == 2   # 3 bytes: under the part size, its plain MD5


def test_on_a_directory_bucket_the_digest_travels_as_metadata_and_is_read_back_with_head_object(src):
    s3 = S3()
    result, _, _ = _upload(src, s3, bucket=DIRECTORY)
    assert [(r["Key"], r["ExtraArgs"]) for r in s3.sent()] == [
        ("datasets/caltech/a/1.jpg", {"Metadata": {"dslab-etag": hashlib.md5(b"abc").hexdigest()}}),
        ("datasets/caltech/a/2.jpg", {"Metadata": {"dslab-etag": hashlib.md5(b"defgh").hexdigest()}}),
        ("datasets/caltech/b/3.jpg", {"Metadata": {"dslab-etag": hashlib.md5(b"ijklmnop").hexdigest()}})]
    assert result["stats"] == "s3://lab-x--use1-az4--x-s3/datasets/caltech.stats.json"
    for key in ("a/1.jpg", "a/2.jpg", "b/3.jpg"):   # a directory bucket's ETag is not the MD5
        s3.objects[(DIRECTORY, f"datasets/caltech/{key}")]["ETag"] = "f" * 32
    s3.objects[(DIRECTORY, "datasets/caltech/a/2.jpg")]["Metadata"] = {"dslab-etag": "0" * 32}
    s3.requests.clear()
    result, _, _ = _upload(src, s3, bucket=DIRECTORY)
    assert s3.sent("HeadObject") == [{"Bucket": DIRECTORY, "Key": f"datasets/caltech/{k}"}
                                     for k in ("a/1.jpg", "a/2.jpg", "b/3.jpg")]
    assert [r["Key"] for r in s3.sent()] == ["datasets/caltech/a/2.jpg"]
    assert (result["uploaded"], result["skipped"]) == (1, 2)


def test_on_a_directory_bucket_a_file_over_the_part_size_carries_its_multipart_digest(src):
    """The metadata holds the ETag a general purpose bucket would give the same upload: the MD5 of the 4-byte parts'
    MD5s and their count for the 5- and 8-byte files, the plain MD5 for the 3-byte one."""
    s3 = S3()
    _upload(src, s3, bucket=DIRECTORY, part_size=4)

    def parts(*chunks: bytes) -> str:
        return hashlib.md5(b"".join(hashlib.md5(c).digest() for c in chunks)).hexdigest() + f"-{len(chunks)}"
    assert [(r["Key"], r["ExtraArgs"]) for r in s3.sent()] == [
        ("datasets/caltech/a/1.jpg", {"Metadata": {"dslab-etag": hashlib.md5(b"abc").hexdigest()}}),
        ("datasets/caltech/a/2.jpg", {"Metadata": {"dslab-etag": parts(b"defg", b"h")}}),
        ("datasets/caltech/b/3.jpg", {"Metadata": {"dslab-etag": parts(b"ijkl", b"mnop")}})]


def test_an_object_whose_head_object_fails_is_sent_again(src):
    s3 = S3()
    _upload(src, s3, bucket=DIRECTORY)
    s3.head_fails = True
    s3.requests.clear()
    result, _, _ = _upload(src, s3, bucket=DIRECTORY)
    assert [r["Key"] for r in s3.sent()] == ["datasets/caltech/a/1.jpg", "datasets/caltech/a/2.jpg",
                                             "datasets/caltech/b/3.jpg"]
    assert (result["uploaded"], result["skipped"], result["bytes_uploaded"]) == (3, 0, 16)


def test_files_spread_over_prefixes_round_robin_and_the_record_says_how_many(src):
    s3 = S3()
    result, _, _ = _upload(src, s3, prefixes=2)
    assert [r["Key"] for r in s3.sent()] == ["datasets/caltech/p00/a/1.jpg", "datasets/caltech/p01/a/2.jpg",
                                             "datasets/caltech/p00/b/3.jpg"]
    assert json.loads(s3.body("lab-data", "datasets/caltech.manifest")) == [
        {"prefix": "s3://lab-data/datasets/caltech/"}, "p00/a/1.jpg", "p01/a/2.jpg", "p00/b/3.jpg"]
    assert result["prefixes"] == 2 and json.loads(s3.body("lab-data", "datasets/caltech.stats.json"))["prefixes"] == 2
    s3.requests.clear()
    again, _, _ = _upload(src, s3, prefixes=2)
    assert (again["skipped"], s3.sent()) == (3, [])


def test_another_spread_over_the_objects_there_is_refused_before_anything_is_sent(src):
    s3 = S3()
    _upload(src, s3, prefixes=2)
    s3.requests.clear()
    with pytest.raises(ConfigError) as refused:
        _upload(src, s3)
    assert str(refused.value) == (
        "--prefixes: s3://lab-data/datasets/caltech/ holds 3 objects spread over 2 prefix(es), and a channel would "
        "read both layouts (allowed: --prefixes 2, or delete them first (aws s3 rm --recursive "
        "s3://lab-data/datasets/caltech/))")
    assert s3.sent() == [] and s3.sent("PutObject") == []


@pytest.mark.parametrize("prefixes", [0, 4])
def test_more_prefixes_than_files_or_none_is_refused(src, prefixes):
    with pytest.raises(ConfigError) as refused:
        _upload(src, S3(), prefixes=prefixes)
    assert str(refused.value) == f"--prefixes: {prefixes}: give 1 to the dataset's 3 files (each prefix holds some)"


def test_a_source_that_is_no_folder_or_holds_no_data_is_refused(src, tmp_path):
    with pytest.raises(ConfigError) as refused:
        _upload(src / "a" / "1.jpg", S3())
    assert str(refused.value) == f"--src: {src / 'a' / '1.jpg'} is not a folder"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "dataset.json").write_text("{}")
    with pytest.raises(ConfigError) as refused:
        _upload(empty, S3())
    assert str(refused.value) == f"--src: {empty} is empty: nothing to upload"


def test_without_a_client_the_default_one_is_used_and_with_one_it_is_not(src, monkeypatch):
    default = S3()
    monkeypatch.setattr(datasets, "_s3_client", lambda endpoint_url=None: default)
    datasets.upload(src, "s3://lab-data/datasets/caltech/")
    assert len(default.sent()) == 3
    monkeypatch.setattr(datasets, "_s3_client", lambda endpoint_url=None: pytest.fail("a client was given"))
    given = S3()
    _upload(src, given)
    assert len(given.sent()) == 3 and len(default.sent()) == 3


# ---- stats ------------------------------------------------------------------------------------------------------
def _stored(s3, bucket="lab-data"):
    for key, body in (("datasets/caltech/a/1.jpg", b"abc"), ("datasets/caltech/a/2.jpg", b"defgh"),
                      ("datasets/caltech/b/3.jpg", b"ijklmnop"), ("datasets/caltech/dataset.json", b"{}" * 50),
                      ("datasets/caltech/b/manifest.json", b"{}" * 60), ("datasets/other/x.npz", b"z" * 99)):
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    s3.requests.clear()


def test_stats_of_an_s3_prefix_counts_its_data_objects_only(src):
    s3 = S3()
    _stored(s3)
    assert datasets.stats("s3://lab-data/datasets/caltech/", s3_client=s3) == {
        **STATS, "path": "s3://lab-data/datasets/caltech/"}
    assert s3.requests == [("ListObjectsV2", {"Bucket": "lab-data", "Prefix": "datasets/caltech/"})]


def test_stats_write_stores_the_stats_file_beside_the_prefix(src):
    s3 = S3()
    _stored(s3)
    result = datasets.stats("s3://lab-data/datasets/caltech", s3_client=s3, write=True)
    assert result == {**STATS, "path": "s3://lab-data/datasets/caltech",
                      "stats_file": "s3://lab-data/datasets/caltech.stats.json"}
    assert s3.sent("PutObject") == [{"Bucket": "lab-data", "Key": "datasets/caltech.stats.json",
                                     "ContentType": "application/json"}]
    stored = {**STATS, "prefix": "s3://lab-data/datasets/caltech/", "written_by": "dslab dataset stats --write",
              "written_at": WRITTEN_AT}
    assert s3.body("lab-data", "datasets/caltech.stats.json").decode() == json.dumps(stored, indent=2)


def test_stats_of_a_whole_bucket_lists_it_from_the_top(monkeypatch):
    s3 = S3()
    s3.put_object(Bucket="lab-npz", Key="img_0_of_2.npz", Body=b"1234")
    s3.put_object(Bucket="lab-npz", Key="img_1_of_2.npz", Body=b"12")
    s3.requests.clear()
    monkeypatch.setattr(datasets, "_s3_client", lambda endpoint_url=None: s3)
    result = datasets.stats("s3://lab-npz")
    assert s3.requests == [("ListObjectsV2", {"Bucket": "lab-npz", "Prefix": ""})]
    assert (result["files"], result["bytes"], result["format"]) == (2, 6, "npz")


def test_stats_of_a_folder_leaves_its_metadata_files_out(src):
    assert datasets.stats(str(src)) == {**STATS, "path": str(src)}


@pytest.mark.parametrize("uri, said", [
    ("s3://", "PATH: 's3://' is not an S3 URI (allowed: s3://<bucket>/datasets/<name>/)"),
    ("s3:///datasets/caltech/", "PATH: 's3:///datasets/caltech/' names no bucket")])
def test_stats_of_a_malformed_s3_uri_is_refused_naming_the_path_argument(uri, said):
    with pytest.raises(ConfigError) as refused:
        datasets.stats(uri, s3_client=S3())
    assert str(refused.value) == said


def test_stats_of_a_missing_folder_or_writing_one_is_refused(tmp_path, src):
    with pytest.raises(ConfigError) as refused:
        datasets.stats(str(tmp_path / "nowhere"))
    assert str(refused.value) == f"PATH: {tmp_path / 'nowhere'} does not exist"
    with pytest.raises(ConfigError) as refused:
        datasets.stats(str(src), write=True)
    assert str(refused.value) == ("--write: only an S3 prefix has a stats file "
                                  "(allowed: s3://<bucket>/datasets/<name>/)")
