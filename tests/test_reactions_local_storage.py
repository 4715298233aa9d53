"""Where a local job's data comes from and goes (dslab/local/storage.py LabStorage, dslab/local/job_storage.py
FolderStorage and refused): the requests sent to the stand-in's S3 (botocore's Stubber checks operation and
parameters), what a job gets back, the file system a channel is given, and the one line a user reads when S3 refuses
(operation, code, message, attempts, the role and the fix). Expected values are literals."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from dslab.aws.validation import RequestInvalid
from dslab.local import job_storage
from dslab.local.job_storage import FolderStorage, StorageError, refused
from dslab.local.storage import LabStorage

BUCKET = "bkt"
DENIED_FIX = ("the training job's role may not call {action}: deploy the lab again so the role has it (`make deploy "
              "FSX=keep`); a bucket policy or an organization's SCP can also refuse it")


# A call that never returns fails its test after 20 s rather than hang the run.
pytestmark = pytest.mark.timeout(20, method="signal")


def _s3():
    client = boto3.client("s3", region_name="us-east-1", endpoint_url="http://stand-in:4566",
                          aws_access_key_id="k", aws_secret_access_key="s")
    return client, Stubber(client)


def _denied(stub: Stubber, operation: str, params: dict, retries: int = 0) -> None:
    stub.add_client_error(operation, "AccessDenied", "Access Denied", 403, expected_params=params,
                          response_meta={"RetryAttempts": retries})


def _body(data: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(data), len(data))


class Mounts:
    """S3Mounts' stand-in: a mount is a folder named after the request; unmounts are written down."""

    def __init__(self, root: Path):
        self.root, self.mounted, self.unmounted = root, [], []

    def mount(self, bucket, prefix, name, cache_dir=None):
        self.mounted.append((bucket, prefix, name))
        point = self.root / f"{name}-{len(self.mounted)}"
        point.mkdir(parents=True)
        return point

    def unmount(self, point):
        self.unmounted.append(point)


def _lab(tmp_path, s3=None, **fields) -> LabStorage:
    settings = dict(efs_root=tmp_path / "efs", fsx_root=tmp_path / "fsx", fsx_id="fs-fsx1", efs_id="fs-efs1")
    settings.update(fields)
    return LabStorage(s3, Mounts(tmp_path / "mounts"), **settings)


# ---- LabStorage: S3 through boto3 ------------------------------------------------------------------------------------
def test_listing_reads_every_page_and_gives_keys_with_sizes(tmp_path):
    """ListObjectsV2 with the bucket and prefix, every page followed (a page without Contents adds nothing)."""
    s3, stub = _s3()
    stub.add_response("list_objects_v2", {"Contents": [{"Key": "data/a", "Size": 3}], "IsTruncated": True,
                                          "NextContinuationToken": "t1"}, {"Bucket": BUCKET, "Prefix": "data/"})
    stub.add_response("list_objects_v2", {"IsTruncated": True, "NextContinuationToken": "t2"},
                      {"Bucket": BUCKET, "Prefix": "data/", "ContinuationToken": "t1"})
    stub.add_response("list_objects_v2", {"Contents": [{"Key": "data/b", "Size": 0}, {"Key": "data/c/d", "Size": 7}],
                                          "IsTruncated": False},
                      {"Bucket": BUCKET, "Prefix": "data/", "ContinuationToken": "t2"})
    with stub:
        assert _lab(tmp_path, s3).list_objects(BUCKET, "data/") == [("data/a", 3), ("data/b", 0), ("data/c/d", 7)]
    stub.assert_no_pending_responses()


def test_a_refused_listing_names_the_uri_the_attempts_and_the_permission_the_role_lacks(tmp_path):
    s3, stub = _s3()
    _denied(stub, "list_objects_v2", {"Bucket": BUCKET, "Prefix": "data/"}, retries=2)
    with stub, pytest.raises(StorageError) as raised:
        _lab(tmp_path, s3).list_objects(BUCKET, "data/")
    assert str(raised.value) == ("listing s3://bkt/data/: AWS ListObjectsV2 failed after 3 attempts (AccessDenied: "
                                 "Access Denied); " + DENIED_FIX.format(action="s3:ListBucket"))


def test_reading_an_object_gives_its_bytes_and_a_missing_one_is_a_key_error(tmp_path):
    s3, stub = _s3()
    stub.add_response("get_object", {"Body": _body(b"payload")}, {"Bucket": BUCKET, "Key": "data/a"})
    stub.add_client_error("get_object", "NoSuchKey", "The specified key does not exist.", 404,
                          expected_params={"Bucket": BUCKET, "Key": "data/gone"})
    _denied(stub, "get_object", {"Bucket": BUCKET, "Key": "data/secret"})
    storage = _lab(tmp_path, s3)
    with stub:
        assert storage.read_object(BUCKET, "data/a") == b"payload"
        with pytest.raises(KeyError) as missing:
            storage.read_object(BUCKET, "data/gone")
        assert missing.value.args == ("data/gone",)
        with pytest.raises(StorageError) as raised:
            storage.read_object(BUCKET, "data/secret")
    assert str(raised.value) == ("reading s3://bkt/data/secret: AWS GetObject failed (AccessDenied: Access Denied); "
                                 + DENIED_FIX.format(action="s3:GetObject"))


def test_a_download_writes_the_whole_object_in_one_request_creating_its_folders(tmp_path):
    """One GetObject (no HEAD), the body copied in 1 MiB pieces: a 2.5 MiB object arrives whole."""
    data = bytes(range(256)) * (10 * 1024)   # 2.5 MiB
    s3, stub = _s3()
    stub.add_response("get_object", {"Body": _body(data)}, {"Bucket": BUCKET, "Key": "data/big.bin"})
    stub.add_response("get_object", {"Body": _body(b"")}, {"Bucket": BUCKET, "Key": "data/empty"})
    target = tmp_path / "job" / "input" / "train" / "big.bin"
    with stub:
        _lab(tmp_path, s3).download(BUCKET, "data/big.bin", target)
        _lab(tmp_path, s3).download(BUCKET, "data/empty", tmp_path / "job" / "empty")
    stub.assert_no_pending_responses()
    assert target.read_bytes() == data
    assert (tmp_path / "job" / "empty").read_bytes() == b""


def test_a_refused_download_says_which_object_and_writes_nothing(tmp_path):
    s3, stub = _s3()
    _denied(stub, "get_object", {"Bucket": BUCKET, "Key": "data/a"})
    target = tmp_path / "job" / "a"
    with stub, pytest.raises(StorageError) as raised:
        _lab(tmp_path, s3).download(BUCKET, "data/a", target)
    assert str(raised.value) == ("downloading s3://bkt/data/a: AWS GetObject failed (AccessDenied: Access Denied); "
                                 + DENIED_FIX.format(action="s3:GetObject"))
    assert not target.exists()


def test_put_object_sends_the_bytes_and_a_refusal_names_the_target(tmp_path):
    s3, stub = _s3()
    stub.add_response("put_object", {}, {"Bucket": BUCKET, "Key": "out/model.tar.gz", "Body": b"archive"})
    _denied(stub, "put_object", {"Bucket": BUCKET, "Key": "out/output.tar.gz", "Body": b"x"})
    storage = _lab(tmp_path, s3)
    with stub:
        storage.put_object(BUCKET, "out/model.tar.gz", b"archive")
        with pytest.raises(StorageError) as raised:
            storage.put_object(BUCKET, "out/output.tar.gz", b"x")
    stub.assert_no_pending_responses()
    assert str(raised.value) == ("uploading s3://bkt/out/output.tar.gz: AWS PutObject failed (AccessDenied: Access "
                                 "Denied); " + DENIED_FIX.format(action="s3:PutObject"))


class Recorded:
    """An S3 client that writes down each PutObject's bucket, key and body bytes, or raises ``error``."""

    def __init__(self, error: Exception | None = None):
        self.puts, self.error = [], error

    def put_object(self, Bucket, Key, Body):
        if self.error is not None:
            raise self.error
        self.puts.append((Bucket, Key, Body if isinstance(Body, bytes) else Body.read()))
        return {}


def test_upload_sends_the_files_content_and_a_refusal_names_the_file_and_target(tmp_path):
    source = tmp_path / "step-2.pt"
    source.write_bytes(b"checkpoint")
    s3 = Recorded()
    _lab(tmp_path, s3).upload(BUCKET, "ck/step-2.pt", source)
    assert s3.puts == [(BUCKET, "ck/step-2.pt", b"checkpoint")]
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "PutObject")
    with pytest.raises(StorageError) as raised:
        _lab(tmp_path, Recorded(denied)).upload(BUCKET, "ck/step-2.pt", source)
    assert str(raised.value) == ("uploading step-2.pt to s3://bkt/ck/step-2.pt: AWS PutObject failed (AccessDenied: "
                                 "Access Denied); " + DENIED_FIX.format(action="s3:PutObject"))


def test_delete_object_asks_s3_and_a_refusal_names_the_object(tmp_path):
    s3, stub = _s3()
    stub.add_response("delete_object", {}, {"Bucket": BUCKET, "Key": "ck/step-1.pt"})
    _denied(stub, "delete_object", {"Bucket": BUCKET, "Key": "ck/step-0.pt"})
    storage = _lab(tmp_path, s3)
    with stub:
        storage.delete_object(BUCKET, "ck/step-1.pt")
        with pytest.raises(StorageError) as raised:
            storage.delete_object(BUCKET, "ck/step-0.pt")
    stub.assert_no_pending_responses()
    assert str(raised.value) == ("deleting s3://bkt/ck/step-0.pt: AWS DeleteObject failed (AccessDenied: Access "
                                 "Denied); " + DENIED_FIX.format(action="s3:DeleteObject"))


def test_the_scripts_s3_is_the_stand_ins_endpoint_and_region_with_local_keys(tmp_path):
    s3 = boto3.client("s3", region_name="eu-west-1", endpoint_url="http://stand-in:4566")
    assert _lab(tmp_path, s3).s3_environment(["s3://bkt/x/"]) == {
        "AWS_ENDPOINT_URL": "http://stand-in:4566", "AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "eu-west-1",
        "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH": "true", "AWS_ACCESS_KEY_ID": "dslab-local",
        "AWS_SECRET_ACCESS_KEY": "dslab-local"}


# ---- LabStorage: mounts and file systems ---------------------------------------------------------------------------
def test_a_fastfile_view_is_a_mount_of_the_prefix_unmounted_when_the_job_releases_it(tmp_path):
    storage = _lab(tmp_path)
    first = storage.fastfile_view(BUCKET, "data/")
    second = storage.fastfile_view("other", "x/")
    assert (first, second) == (tmp_path / "mounts" / "fastfile-1", tmp_path / "mounts" / "fastfile-2")
    assert storage.mounts.mounted == [(BUCKET, "data/", "fastfile"), ("other", "x/", "fastfile")]
    storage.release()
    assert storage.mounts.unmounted == [first, second]
    storage.release()   # released once: nothing is unmounted twice
    assert storage.mounts.unmounted == [first, second]


def test_the_lab_efs_is_its_folder_and_another_efs_does_not_exist(tmp_path):
    storage = _lab(tmp_path, fsx_problem="FSx is being created")
    assert storage.file_system_root("fs-efs1", "EFS") == tmp_path / "efs"
    assert storage.file_system_root("fs-efs1", "EFS", writable=True) == tmp_path / "efs"
    with pytest.raises(StorageError, match=r"^EFS file system fs-other does not exist in the lab$"):
        storage.file_system_root("fs-other", "EFS")


def test_fsx_with_a_known_problem_says_the_problem(tmp_path):
    with pytest.raises(StorageError, match=r"^FSx is being created$"):
        _lab(tmp_path, fsx_problem="FSx is being created").file_system_root("fs-fsx1", "FSxLustre")


def test_fsx_that_is_down_or_another_file_system_does_not_exist(tmp_path):
    with pytest.raises(StorageError, match=r"^FSx file system fs-fsx1 does not exist \(FSx is down\?\)$"):
        _lab(tmp_path, fsx_root=None).file_system_root("fs-fsx1", "FSxLustre")
    with pytest.raises(StorageError, match=r"^FSx file system fs-other does not exist \(FSx is down\?\)$"):
        _lab(tmp_path).file_system_root("fs-other", "FSxLustre")


def test_a_read_only_fsx_channel_gets_the_s3_linked_root(tmp_path):
    lustre = tmp_path / "lustre"
    assert _lab(tmp_path, fsx_lustre_root=lustre).file_system_root("fs-fsx1", "FSxLustre") == tmp_path / "fsx"
    assert _lab(tmp_path).file_system_root("fs-fsx1", "FSxLustre", writable=True) == tmp_path / "fsx"
    assert not lustre.exists()


def test_a_read_write_fsx_channel_gets_the_file_systems_own_folder_with_the_linked_datasets(tmp_path):
    """Writable: FSx's own folder (made when missing), its datasets/ a link to the S3-linked datasets; asked again,
    the same folder and link."""
    (tmp_path / "fsx" / "datasets").mkdir(parents=True)
    lustre = tmp_path / "lustre"
    storage = _lab(tmp_path, fsx_lustre_root=lustre)
    assert storage.file_system_root("fs-fsx1", "FSxLustre", writable=True) == lustre
    assert (lustre / "datasets").readlink() == tmp_path / "fsx" / "datasets"
    assert storage.file_system_root("fs-fsx1", "FSxLustre", writable=True) == lustre
    assert (lustre / "datasets").readlink() == tmp_path / "fsx" / "datasets"


def test_a_read_write_fsx_channel_without_linked_datasets_gets_no_link(tmp_path):
    (tmp_path / "fsx").mkdir()
    lustre = tmp_path / "deep" / "lustre"
    assert _lab(tmp_path, fsx_lustre_root=lustre).file_system_root("fs-fsx1", "FSxLustre", writable=True) == lustre
    assert lustre.is_dir() and list(lustre.iterdir()) == []


# ---- refused ---------------------------------------------------------------------------------------------------------
def test_a_refusal_is_one_line_naming_what_was_done_the_role_and_the_fix():
    err = ClientError({"Error": {"Code": "NoSuchBucket", "Message": "The specified bucket does not exist"},
                       "ResponseMetadata": {"RetryAttempts": 1}}, "GetObject")
    said = refused(err, "reading s3://gone/k")
    assert isinstance(said, StorageError)
    assert str(said) == ("reading s3://gone/k: AWS GetObject failed after 2 attempts (NoSuchBucket: The specified "
                         "bucket does not exist); the bucket does not exist: deploy the lab (`make deploy FSX=up`; "
                         "after `make destroy`, `make deploy-again FSX=up`), or name the right bucket")
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "HeadObject")
    assert str(refused(denied, "looking")) == ("looking: AWS HeadObject failed (AccessDenied: no); "
                                               + DENIED_FIX.format(action="s3:GetObject"))


# ---- FolderStorage: the folder stand-in ------------------------------------------------------------------------------
def _folder(tmp_path, fs_root: Path | None = None) -> FolderStorage:
    return FolderStorage(tmp_path / "s3", fs_root)


def _put(tmp_path, key: str, body: bytes = b"x", bucket: str = BUCKET) -> Path:
    path = tmp_path / "s3" / bucket / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


def test_a_bucket_missing_under_the_s3_root_is_a_refused_request(tmp_path):
    (tmp_path / "s3").mkdir()
    (tmp_path / "s3" / "file").write_text("not a bucket")
    storage = _folder(tmp_path)
    root = tmp_path / "s3"
    with pytest.raises(RequestInvalid) as raised:
        storage.list_objects("nope", "")
    assert str(raised.value) == f"bucket 'nope' does not exist under --s3-root {root}"
    with pytest.raises(RequestInvalid) as raised:
        storage.read_object("nope", "k")
    assert str(raised.value) == f"bucket 'nope' does not exist under --s3-root {root}"
    with pytest.raises(RequestInvalid) as raised:   # a file of that name is no bucket
        storage.fastfile_view("file", "p/")
    assert str(raised.value) == f"bucket 'file' does not exist under --s3-root {root}"


def test_the_folder_listing_gives_files_under_the_prefix_in_key_order_with_sizes(tmp_path):
    _put(tmp_path, "data/b.txt", b"bb")
    _put(tmp_path, "data/a/z.txt", b"zzz")
    _put(tmp_path, "datum.txt", b"d")
    _put(tmp_path, "other/c.txt")
    (tmp_path / "s3" / BUCKET / "data" / "empty").mkdir()
    storage = _folder(tmp_path)
    assert storage.list_objects(BUCKET, "data/") == [("data/a/z.txt", 3), ("data/b.txt", 2)]
    assert storage.list_objects(BUCKET, "dat") == [("data/a/z.txt", 3), ("data/b.txt", 2), ("datum.txt", 1)]
    assert storage.list_objects(BUCKET, "none/") == []


def test_the_folder_stand_in_reads_downloads_and_stores_objects(tmp_path):
    _put(tmp_path, "data/a.txt", b"alpha")
    storage = _folder(tmp_path)
    assert storage.read_object(BUCKET, "data/a.txt") == b"alpha"
    _put(tmp_path, "data/b.txt", b"beta")
    storage.download(BUCKET, "data/a.txt", tmp_path / "job" / "in" / "a.txt")
    storage.download(BUCKET, "data/b.txt", tmp_path / "job" / "in" / "b.txt")   # into the folder made for a.txt
    assert (tmp_path / "job" / "in" / "a.txt").read_bytes() == b"alpha"
    assert (tmp_path / "job" / "in" / "b.txt").read_bytes() == b"beta"
    storage.put_object("new-bucket", "out/job/model.tar.gz", b"archive")
    assert (tmp_path / "s3" / "new-bucket" / "out" / "job" / "model.tar.gz").read_bytes() == b"archive"
    storage.put_object("new-bucket", "out/job/model.tar.gz", b"again")
    assert (tmp_path / "s3" / "new-bucket" / "out" / "job" / "model.tar.gz").read_bytes() == b"again"
    assert storage.fastfile_view(BUCKET, "data/") == tmp_path / "s3" / BUCKET / "data/"


def test_a_folder_upload_copies_the_file_and_needs_the_bucket(tmp_path):
    _put(tmp_path, "keep")
    source = tmp_path / "step.pt"
    source.write_bytes(b"ck")
    storage = _folder(tmp_path)
    storage.upload(BUCKET, "ck/deep/step.pt", source)
    storage.upload(BUCKET, "ck/deep/step.pt", source)
    assert (tmp_path / "s3" / BUCKET / "ck" / "deep" / "step.pt").read_bytes() == b"ck"
    with pytest.raises(RequestInvalid, match="bucket 'nope' does not exist"):
        storage.upload("nope", "k", source)


def test_a_folder_delete_removes_the_file_and_a_missing_one_is_fine(tmp_path):
    path = _put(tmp_path, "ck/a.pt")
    storage = _folder(tmp_path)
    storage.delete_object(BUCKET, "ck/a.pt")
    assert not path.exists()
    storage.delete_object(BUCKET, "ck/a.pt")
    assert not path.exists() and (tmp_path / "s3" / BUCKET / "ck").is_dir()
    with pytest.raises(RequestInvalid, match="bucket 'nope' does not exist"):
        storage.delete_object("nope", "k")


def test_the_folder_file_systems_are_folders_named_by_id_under_the_fs_root(tmp_path):
    (tmp_path / "fs" / "fs-1").mkdir(parents=True)
    storage = _folder(tmp_path, tmp_path / "fs")
    assert storage.file_system_root("fs-1", "EFS") == tmp_path / "fs" / "fs-1"
    assert storage.file_system_root("fs-1", "FSxLustre", writable=True) == tmp_path / "fs" / "fs-1"
    with pytest.raises(RequestInvalid) as raised:
        storage.file_system_root("fs-2", "FSxLustre")
    assert str(raised.value) == f"FSxLustre file system fs-2 does not exist under --fs-root {tmp_path / 'fs'}"
    with pytest.raises(RequestInvalid) as raised:
        _folder(tmp_path).file_system_root("fs-1", "EFS")
    assert str(raised.value) == "EFS file system fs-1: no --fs-root was given"


class Server:
    """The S3 server process a Script job's endpoint would be: what was asked of it is written down."""

    def __init__(self):
        self.calls = []

    def terminate(self):
        self.calls.append("terminate")

    def wait(self, timeout=None):
        self.calls.append(("wait", timeout))
        return 0


class ScriptS3:
    """The script's endpoint's client: every call written down; an operation named in ``fail`` raises AccessDenied."""

    def __init__(self, fail: str = ""):
        self.calls, self.fail = [], fail

    def _maybe_fail(self, operation):
        if operation == self.fail:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, operation)

    def create_bucket(self, Bucket):
        self._maybe_fail("CreateBucket")
        self.calls.append(("create_bucket", Bucket))

    def put_object(self, Bucket, Key, Body):
        self._maybe_fail("PutObject")
        self.calls.append(("put_object", Bucket, Key, Body))

    def delete_object(self, Bucket, Key):
        self._maybe_fail("DeleteObject")
        self.calls.append(("delete_object", Bucket, Key))


@pytest.fixture
def script_s3(monkeypatch):
    """start_s3_server and boto3.client replaced: the server started, and the client made, are written down."""
    made = {"servers": [], "clients": [], "client": ScriptS3()}

    def start(timeout=30.0):
        made["servers"].append(Server())
        return made["servers"][-1], "http://127.0.0.1:5999"

    def client(service, **kwargs):
        made["clients"].append((service, kwargs))
        return made["client"]
    monkeypatch.setattr(job_storage, "start_s3_server", start)
    monkeypatch.setattr(boto3, "client", client)
    return made


LOCAL_ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:5999", "AWS_DEFAULT_REGION": "us-east-1",
             "AWS_REGION": "us-east-1", "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH": "true",
             "AWS_ACCESS_KEY_ID": "dslab-local", "AWS_SECRET_ACCESS_KEY": "dslab-local"}


def test_a_script_that_reads_no_s3_gets_no_endpoint_and_no_server(tmp_path, script_s3):
    assert _folder(tmp_path).s3_environment([]) == {}
    assert script_s3["servers"] == [] and script_s3["clients"] == []


def test_a_script_job_gets_an_s3_server_loaded_with_the_objects_under_its_uris(tmp_path, script_s3):
    """One server for the job: each URI's bucket created there and the objects under its prefix loaded (not the
    others); asked again, the same endpoint and no second server; released, the server is ended and waited for."""
    _put(tmp_path, "datasets/tiny/a.jpg", b"A")
    _put(tmp_path, "datasets/tiny/b.jpg", b"BB")
    _put(tmp_path, "datasets/other/c.jpg")
    _put(tmp_path, "ck/step-1.pt", b"one", bucket="ckb")
    storage = _folder(tmp_path)
    assert storage.s3_environment(["s3://bkt/datasets/tiny/", "s3://ckb/ck/"]) == LOCAL_ENV
    assert script_s3["clients"] == [("s3", {"endpoint_url": "http://127.0.0.1:5999", "region_name": "us-east-1",
                                            "aws_access_key_id": "dslab-local",
                                            "aws_secret_access_key": "dslab-local"})]
    assert script_s3["client"].calls == [
        ("create_bucket", BUCKET), ("put_object", BUCKET, "datasets/tiny/a.jpg", b"A"),
        ("put_object", BUCKET, "datasets/tiny/b.jpg", b"BB"), ("create_bucket", "ckb"),
        ("put_object", "ckb", "ck/step-1.pt", b"one")]
    assert storage.s3_environment(["s3://bkt/datasets/tiny/"]) == LOCAL_ENV
    assert len(script_s3["servers"]) == 1 and len(script_s3["client"].calls) == 5
    server = script_s3["servers"][0]
    storage.release()
    assert server.calls == ["terminate", ("wait", 10)]
    storage.release()
    assert server.calls == ["terminate", ("wait", 10)]


def test_after_release_a_script_job_starts_a_new_server(tmp_path, script_s3):
    _put(tmp_path, "d/a", b"A")
    storage = _folder(tmp_path)
    storage.s3_environment(["s3://bkt/d/"])
    storage.release()
    storage.s3_environment(["s3://bkt/d/"])
    assert len(script_s3["servers"]) == 2
    source = tmp_path / "x.pt"
    source.write_bytes(b"new")
    storage.release()
    storage.upload(BUCKET, "d/x.pt", source)   # released: the folder only, no endpoint to tell
    assert script_s3["client"].calls.count(("put_object", BUCKET, "d/x.pt", b"new")) == 0


def _checkpoints_given_to_the_script(tmp_path):
    """The folder stand-in with ck/old.pt stored and s3://bkt/ck/ given to the script's endpoint; a local new.pt."""
    _put(tmp_path, "ck/old.pt", b"old")
    storage = _folder(tmp_path)
    storage.s3_environment(["s3://bkt/ck/"])
    source = tmp_path / "new.pt"
    source.write_bytes(b"new")
    return storage, source


def test_with_a_script_endpoint_an_upload_and_a_delete_reach_it_too(tmp_path, script_s3):
    storage, source = _checkpoints_given_to_the_script(tmp_path)
    storage.upload(BUCKET, "ck/new.pt", source)
    storage.delete_object(BUCKET, "ck/old.pt")
    assert script_s3["client"].calls[-2:] == [("put_object", BUCKET, "ck/new.pt", b"new"),
                                              ("delete_object", BUCKET, "ck/old.pt")]
    assert (tmp_path / "s3" / BUCKET / "ck" / "new.pt").read_bytes() == b"new"
    assert not (tmp_path / "s3" / BUCKET / "ck" / "old.pt").exists()


def test_the_script_endpoint_refusing_an_upload_or_delete_says_which(tmp_path, script_s3):
    storage, source = _checkpoints_given_to_the_script(tmp_path)
    script_s3["client"].fail = "PutObject"
    with pytest.raises(StorageError) as raised:
        storage.upload(BUCKET, "ck/new.pt", source)
    assert str(raised.value) == ("uploading new.pt to the script's s3://bkt/ck/new.pt: AWS PutObject failed "
                                 "(AccessDenied: Access Denied); " + DENIED_FIX.format(action="s3:PutObject"))
    script_s3["client"].fail = "DeleteObject"
    with pytest.raises(StorageError) as raised:
        storage.delete_object(BUCKET, "ck/old.pt")
    assert str(raised.value) == ("deleting the script's s3://bkt/ck/old.pt: AWS DeleteObject failed (AccessDenied: "
                                 "Access Denied); " + DENIED_FIX.format(action="s3:DeleteObject"))
    assert not (tmp_path / "s3" / BUCKET / "ck" / "old.pt").exists()


def test_the_script_endpoint_refusing_its_bucket_or_an_object_says_which(tmp_path, script_s3):
    _put(tmp_path, "d/a", b"A")
    script_s3["client"].fail = "CreateBucket"
    with pytest.raises(StorageError) as raised:
        _folder(tmp_path).s3_environment(["s3://bkt/d/"])
    assert str(raised.value) == ("creating the script's bucket bkt: AWS CreateBucket failed (AccessDenied: Access "
                                 "Denied); " + DENIED_FIX.format(action="s3:CreateBucket"))
    script_s3["client"].fail = "PutObject"
    with pytest.raises(StorageError) as raised:
        _folder(tmp_path).s3_environment(["s3://bkt/d/"])
    assert str(raised.value) == ("loading s3://bkt/d/a for the script: AWS PutObject failed (AccessDenied: Access "
                                 "Denied); " + DENIED_FIX.format(action="s3:PutObject"))


def _ran(subject, method: str = "run"):
    """subject.<method>(), with whatever it raises re-raised from here: the exception and its message as they were,
    without the lab's frames (so a failure is reported at once)."""
    try:
        return getattr(subject, method)()
    except BaseException as err:   # noqa: BLE001 - re-raised unchanged, from here
        err.__cause__ = err.__context__ = None
        raise err.with_traceback(None) from None


# ---- dslab local's sweep of ended jobs (dslab/local/lab.py FinishedJobs.sweep) ------------------------------------
def _finished(sagemaker, recorded: dict) -> tuple:
    """FinishedJobs of a run whose records so far are ``recorded``; record() writes down what it is asked to record."""
    from types import SimpleNamespace

    from dslab.local.lab import FinishedJobs
    finished = object.__new__(FinishedJobs)
    finished.lab = SimpleNamespace(lab=SimpleNamespace(client=lambda name: {"sagemaker": sagemaker}[name]))
    finished.records = dict(recorded)
    asked: list[tuple[str, str]] = []
    finished.record = lambda name, status: asked.append((name, status))
    return finished, asked


def _summary(name: str, status: str) -> dict:
    import datetime as dt
    return {"TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
            "CreationTime": dt.datetime(2030, 1, 1), "TrainingJobStatus": status}


def test_the_sweep_records_every_ended_job_not_yet_recorded_with_its_status():
    """ListTrainingJobs (100 at most): Completed, Failed and Stopped jobs without a record are recorded with their
    status; running ones and those recorded already are not."""
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    stub = Stubber(sagemaker)
    stub.add_response("list_training_jobs", {"TrainingJobSummaries": [
        _summary("j-done", "Completed"), _summary("j-running", "InProgress"), _summary("j-failed", "Failed"),
        _summary("j-known", "Completed"), _summary("j-stopped", "Stopped"), _summary("j-stopping", "Stopping")]},
        {"MaxResults": 100})
    finished, asked = _finished(sagemaker, {"j-known": {"job_name": "j-known"}})
    with stub:
        _ran(finished, 'sweep')
    stub.assert_no_pending_responses()
    assert asked == [("j-done", "Completed"), ("j-failed", "Failed"), ("j-stopped", "Stopped")]


def test_a_refused_listing_leaves_the_sweep_with_the_records_it_has():
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    stub = Stubber(sagemaker)
    stub.add_client_error("list_training_jobs", "ThrottlingException", "Rate exceeded", 400,
                          expected_params={"MaxResults": 100})
    finished, asked = _finished(sagemaker, {"j-known": {}})
    with stub:
        assert _ran(finished, 'sweep') is None
    assert asked == [] and finished.records == {"j-known": {}}


# ---- dslab local's run (dslab/local/lab.py LocalLab.run) -----------------------------------------------------------
class Looks:
    """The stand-in's SageMaker as `dslab local` looks at it: ListTrainingJobs answers in turn (the last one repeated;
    an exception instance is raised), DescribeTrainingJob from ``states``; every call written down."""

    def __init__(self, listings: list, states: dict[str, tuple[str, str]]):
        self.listings, self.states, self.calls = list(listings), states, []

    def list_training_jobs(self, MaxResults):
        self.calls.append(("list", MaxResults))
        answer = self.listings.pop(0) if len(self.listings) > 1 else self.listings[0]
        if isinstance(answer, Exception):
            raise answer
        return {"TrainingJobSummaries": [{"TrainingJobName": n, "TrainingJobStatus": s} for n, s in answer]}

    def describe_training_job(self, TrainingJobName):
        self.calls.append(("describe", TrainingJobName))
        status, secondary = self.states[TrainingJobName]
        return {"TrainingJobStatus": status, "SecondaryStatus": secondary}


PLAN = {"jobs": [{"name": "j1"}, {"name": "j2"}, {"name": "j3", "skip_reason": "FSx is down"},
                 {"name": "j0", "skip_reason": "kept", "kept": True}]}
DEFINITION = {"States": {"PrepareData": {"Branches": [{"States": {"CopyToEfs": {}}}]}}}


def _local_run(tmp_path, monkeypatch, sagemaker, *, polls: int = 2, interrupt: BaseException | None = None,
               plan: dict | None = PLAN, resume=None, results=None, status: str = "SUCCEEDED"):
    """LocalLab.run on a stand-in lab whose workflow `wait` looks ``polls`` times (then raises ``interrupt`` if given);
    the records Collect would make, results_document and the report are stand-ins that say what they were given."""
    import datetime as dt
    from types import SimpleNamespace

    from dslab.local import lab as local_lab

    from .helpers import tiny_experiment
    seen = {"started": [], "waited": [], "reports": [], "said": []}
    monkeypatch.setattr(local_lab.uuid, "uuid4", lambda: "exec-new")
    monkeypatch.setattr(local_lab, "job_record", lambda s3, sm, bucket, base, plan_, job, outcome, prices:
                        {"job_name": outcome["name"], "status": outcome["status"], "base": base})
    monkeypatch.setattr(local_lab, "results_document", lambda plan_, records, prices, overrides:
                        {"records": records, "summary": {}})

    def report(results_, out):
        seen["reports"].append(json.loads(json.dumps(results_, default=str)))
        return {"report.html": out / "report.html"}
    monkeypatch.setattr(local_lab, "write_report", report)
    t0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    history = [{"type": "ParallelStateEntered", "timestamp": t0, "stateEnteredEventDetails": {"name": "PrepareData"}},
               {"type": "TaskStateExited", "timestamp": t0 + dt.timedelta(seconds=2.5),
                "stateExitedEventDetails": {"name": "CopyToEfs"}}]

    def wait(arn, timeout, poll, on_poll):
        seen["waited"].append((arn, timeout, poll))
        for _ in range(polls):
            on_poll()
        if interrupt is not None:
            raise interrupt
        return SimpleNamespace(status=status, error="States.TaskFailed", cause="boom", history=history)

    def read_json(key):
        if plan is None:
            raise KeyError(key)
        assert key == f"results/{resume.execution if resume else 'exec-new'}/plan.json"
        return plan

    def lab_results(execution):
        if results is None:
            raise KeyError("results.json")
        return json.loads(json.dumps(results))
    stand_in = SimpleNamespace(start=lambda document, name: seen["started"].append((document, name)) or "arn:exec",
                               wait=wait, client=lambda name: {"sagemaker": sagemaker, "s3": None}[name],
                               bucket="bkt", function_environment=dict, read_json=read_json, results=lab_results,
                               definition=json.dumps(DEFINITION))
    run = object.__new__(local_lab.LocalLab)
    experiment = tiny_experiment()
    run.experiment, run.experiment_hash, run.resume, run.lab = experiment, "hash-1", resume, stand_in
    run.out, run.say, run.live_progress, run.timings = tmp_path / "out", seen["said"].append, False, {}
    run._started = time.monotonic()   # when `dslab local` started: the run's elapsed time counts from it
    return run, seen


RESULTS = {"records": [{"job_name": "j1", "status": "Completed"}, {"job_name": "j2", "status": "Failed"}],
           "summary": {"message": "from the workflow"}}


def test_a_local_run_looks_at_the_jobs_records_each_as_it_ends_and_reports_the_workflows_results(tmp_path,
                                                                                                 monkeypatch):
    """The workflow started under a new name with the experiment's document; waited for (an hour at most, a look every
    2 s); each look lists the jobs (100 at most) and describes only those not seen ended, recording each that ended;
    results.json holds them while the run goes; at the end the workflow's results are reported with the local run's
    figures (attempt 1, the experiment's concurrency, the set-up seconds of each source)."""
    sagemaker = Looks([[("j1", "InProgress")], [("j1", "Completed"), ("j2", "Failed")]],
                      {"j1": ("InProgress", "Training"), "j2": ("Failed", "Failed")})
    run, seen = _local_run(tmp_path, monkeypatch, sagemaker, results=RESULTS)
    outcome = _ran(run)
    assert seen["started"] == [(run.experiment.document, "exec-new")]
    assert seen["waited"] == [("arn:exec", 3600, 2.0)]
    sagemaker.states["j1"] = ("Completed", "Completed")
    assert sagemaker.calls[:4] == [("list", 100), ("describe", "j1"), ("list", 100), ("describe", "j1")]
    partial = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["job_name"] for r in partial["records"]] == ["j2"]
    assert partial["records"][0] == {"job_name": "j2", "status": "Failed", "base": "results/exec-new"}
    assert partial["partial"] == {"done": 1, "total": 3, "reason": "in progress"}
    local_run = {"experiment_hash": "hash-1", "attempt": 1, "max_concurrency": 4, "cpus": partial["local_run"]["cpus"],
                 "setup_seconds": {"EFS": 2.5}}
    assert outcome.results == {**RESULTS, "local_run": local_run}
    assert (outcome.paths, outcome.execution_status, outcome.execution_error) == (
        {"report.html": tmp_path / "out" / "report.html"}, "SUCCEEDED", "States.TaskFailed")
    assert seen["reports"] == [{**RESULTS, "local_run": local_run}]
    assert set(outcome.timings) == {"jobs", "reporting"} and run.timings is not outcome.timings
    assert 0 <= outcome.timings["jobs"] < 60 and 0 <= outcome.timings["reporting"] < 60   # seconds each took
    assert seen["said"][-1].startswith("jobs: 1/9 jobs done (1 failed), 1 skipped, 1 running; 0s elapsed")
    assert seen["said"][0].startswith("  [   0.") and seen["said"][0].endswith("s] j1: InProgress/Training (0/9 done)")
    assert [line.split("] ", 1)[1].split(", about")[0] for line in seen["said"][1:-1]] == ["j2: Failed/Failed (1/9 done"]


def test_the_last_look_after_the_workflow_ends_records_jobs_that_ended_meanwhile(tmp_path, monkeypatch):
    """A job seen ended is not described again, and the jobs listed after it still are; the look after the workflow
    ended records a job that ended meanwhile."""
    sagemaker = Looks([[("j1", "InProgress")], [("j1", "Completed")], [("j1", "Completed"), ("j2", "Stopped")]],
                      {"j1": ("Completed", "Completed"), "j2": ("Stopped", "MaxRuntimeExceeded")})
    run, seen = _local_run(tmp_path, monkeypatch, sagemaker, polls=2, results=RESULTS)
    _ran(run)
    assert sagemaker.calls == [("list", 100), ("describe", "j1"), ("list", 100), ("list", 100), ("describe", "j2")]
    partial = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(r["job_name"], r["status"]) for r in partial["records"]] == [("j1", "Completed"), ("j2", "Stopped")]
    assert seen["said"][-1].startswith("jobs: 2/9 jobs done (1 failed), 1 skipped, 0 running; ")


def test_a_refused_look_is_skipped_and_the_next_one_looks_again(tmp_path, monkeypatch):
    refused_look = ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}},
                               "ListTrainingJobs")
    sagemaker = Looks([refused_look, [("j1", "Completed")]], {"j1": ("Completed", "Completed")})
    run, seen = _local_run(tmp_path, monkeypatch, sagemaker, results=RESULTS)
    outcome = _ran(run)
    assert sagemaker.calls == [("list", 100), ("list", 100), ("describe", "j1"), ("list", 100)]
    assert outcome.execution_status == "SUCCEEDED"


def test_a_resumed_run_keeps_the_earlier_attempts_records_and_says_what_it_ran(tmp_path, monkeypatch):
    """Resumed: the same execution name, the document naming the kept jobs; the kept records replace the workflow's
    (the summary counted again), and the results say how many were kept and ran, in which attempt."""
    from dslab.local.lab import Resume
    kept = {"job_name": "j0", "status": "Completed", "cost_usd": {"total": 0.5}, "from": "attempt 1"}
    sagemaker = Looks([[]], {})
    failed = {"job_name": "j1", "status": "Failed", "mode": "File", "dataset": "tiny", "failure_reason": "oom",
              "cost_usd": {"total": 0.25}}
    results = {"records": [{"job_name": "j0", "status": "Skipped", "cost_usd": {"total": 0}}, failed], "summary": {}}
    run, seen = _local_run(tmp_path, monkeypatch, sagemaker, results=results,
                           resume=Resume("exec-old", [kept], 2))
    outcome = _ran(run)
    assert seen["started"] == [({**run.experiment.document, "keep_jobs": ["j0"]}, "exec-old")]
    assert outcome.results["records"] == [kept, failed]
    assert outcome.results["summary"] == {"total": 2, "completed": 1, "failed": 1, "skipped": 0, "cost_usd": 0.75,
                                          "message": "2 jobs: 1 completed, 1 failed, 0 skipped; j1 (File, tiny): oom"}
    assert outcome.results["resumed"] == {"kept": 1, "ran": 1, "attempt": 2}
    assert outcome.results["local_run"]["attempt"] == 2
    assert seen["said"][-1].startswith("jobs: 0/8 jobs done, 1 skipped, 1 kept from the earlier attempt, 0 running; ")


def test_a_workflow_that_left_no_results_is_an_error_naming_its_status_and_cause(tmp_path, monkeypatch):
    run, seen = _local_run(tmp_path, monkeypatch, Looks([[]], {}), results=None, status="FAILED")
    with pytest.raises(RuntimeError) as raised:
        _ran(run)
    assert str(raised.value) == "the workflow ended FAILED without results: States.TaskFailed: boom"
    assert seen["reports"] == []


def test_an_interrupt_before_plan_wrote_its_plan_stops_without_a_report(tmp_path, monkeypatch):
    run, seen = _local_run(tmp_path, monkeypatch, Looks([[]], {}), polls=0, plan=None, interrupt=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt) as raised:
        _ran(run)
    assert type(raised.value) is KeyboardInterrupt
    assert seen["reports"] == [] and not (tmp_path / "out" / "results.json").exists()


def test_an_interrupt_after_jobs_ran_sweeps_what_ended_and_reports_it_as_interrupted(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM) during the run: the jobs that ended since the last look are recorded, and a partial report
    (reason "interrupted") of the jobs done out of those to run is written; Interrupted says how many and whether it
    was a SIGTERM."""
    from dslab.local.lab import Interrupted, Terminated
    sagemaker = Looks([[("j1", "Completed")], [("j1", "Completed"), ("j2", "Failed")]],
                      {"j1": ("Completed", "Completed")})
    for stop, terminated in ((Terminated(), True), (KeyboardInterrupt(), False)):
        sagemaker.listings = [[("j1", "Completed")], [("j1", "Completed"), ("j2", "Failed")]]
        run, seen = _local_run(tmp_path, monkeypatch, sagemaker, polls=1, interrupt=stop)
        with pytest.raises(Interrupted) as raised:
            _ran(run)
        assert (raised.value.done, raised.value.total, raised.value.terminated) == (2, 3, terminated)
        assert str(raised.value) == "interrupted at 2/3 jobs"
        assert raised.value.paths == {"report.html": tmp_path / "out" / "report.html"}
        assert [(r["job_name"], r["status"]) for r in seen["reports"][0]["records"]] == [("j1", "Completed"),
                                                                                       ("j2", "Failed")]
        assert seen["reports"][0]["partial"] == {"done": 2, "total": 3, "reason": "interrupted"}
