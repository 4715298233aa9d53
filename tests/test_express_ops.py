"""The S3 Express One Zone bucket's operations: `dslab express status|empty` and the custom resource that
empties the bucket before CloudFormation deletes it, against an in-process S3 stand-in (moto).

moto 5.2.5 has no directory-bucket API: the bucket is a plain bucket with a directory-bucket name, created
in moto's backend, and botocore's CreateSession auth is switched off (AWS_S3_DISABLE_EXPRESS_SESSION_AUTH).
moto lists keys in order and accepts any prefix; the embedded stand-in's directory-bucket rules
(dslab/emulator/patches/s3.py: unordered ListObjectsV2 pages, InvalidRequest for a prefix not ending in
"/", for StartAfter, UploadIdMarker and ListObjects v1) apply here too, and the ``directory_listing``
fixture records every listing the code sends
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-differences.html).
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import subprocess
import sys
import threading

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from dslab.cli import main

from .conftest import REPO

BUCKET = "lab--use1-az4--x-s3"
ARN = f"arn:aws:s3express:us-east-1:123456789012:bucket/{BUCKET}"
EMPTIER = REPO / "stacks" / "components" / "express_empty" / "index.py"


@pytest.fixture
def directory_listing(monkeypatch):
    """The stand-in's directory-bucket rules, and a record of every listing sent to a --x-s3 bucket
    by clients made from boto3's default session (as dslab and the emptier make them)."""
    from dslab.emulator import patches
    patches.install()
    monkeypatch.setenv("AWS_S3_DISABLE_EXPRESS_SESSION_AUTH", "true")
    calls: list[tuple[str, dict]] = []

    def record(params, model, **_):
        if str(params.get("Bucket", "")).endswith("--x-s3"):
            calls.append((model.name, dict(params)))

    with mock_aws():  # it resets boto3's default session on start: register on the one made after it
        boto3.setup_default_session(region_name="us-east-1")
        for operation in ("ListObjectsV2", "ListObjects", "ListMultipartUploads"):
            boto3.DEFAULT_SESSION.events.register(f"provide-client-params.s3.{operation}", record)
        yield calls
    boto3.DEFAULT_SESSION = None


@pytest.fixture
def bucket(directory_listing):
    from dslab.emulator.patches import create_directory_bucket
    create_directory_bucket(BUCKET)
    return boto3.client("s3", region_name="us-east-1")


def _outputs(tmp_path, **core) -> str:
    path = tmp_path / "cdk-outputs.json"
    values = {"BucketName": "datasourcelab-data-123456789012-us-east-1", "ExpressEnabled": "true",
              "ExpressBucketName": BUCKET, "ExpressBucketArn": ARN, "ExpressZoneId": "use1-az4", **core}
    path.write_text(json.dumps({"DataSourceLab-Core": {k: v for k, v in values.items() if v is not None}}))
    return str(path)


def _fill(objects: dict[str, int]) -> None:
    """The objects, straight into the stand-in's S3 (thousands through the API are seconds of CPU; what is
    tested is how the code lists and deletes them)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    for key, size in objects.items():
        backend.put_object(BUCKET, key, b"x" * size)


def _keys(s3) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


STAGED = {**{f"datasets/jpg/c{i % 3}/{i}.jpg": 1000 for i in range(12)}, "datasets/jpg.stats.json": 50,
          **{f"datasets/tfr/shard-{i}.tfrecord": 500_000 for i in range(4)}, "datasets/tfrx/a.tfrecord": 10}


# ---- dslab express status ----------------------------------------------------------------------

def test_status_counts_objects_bytes_and_monthly_cost_per_dataset(bucket, tmp_path, capsys):
    _fill(STAGED)
    bucket.create_multipart_upload(Bucket=BUCKET, Key="datasets/tfr/shard-9.tfrecord")
    assert main(["express", "status", "--outputs", _outputs(tmp_path), "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    total = sum(STAGED.values())
    assert state["bucket"] == BUCKET and state["zone_id"] == "use1-az4" and state["region"] == "us-east-1"
    assert state["objects"] == len(STAGED) and state["bytes"] == total and state["multipart_uploads"] == 1
    assert state["usd_per_gb_month"] == 0.11
    assert state["usd_per_month"] == round(total / 1e9 * 0.11, 2)
    assert state["datasets"]["jpg"] == {"objects": 13, "bytes": 12_050, "usd_per_month": 0.0}
    assert state["datasets"]["tfr"]["objects"] == 4 and state["datasets"]["tfrx"]["objects"] == 1
    assert main(["express", "status", "--outputs", _outputs(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert BUCKET in text and "use1-az4" in text and "$0.11 per GB-month" in text and "dslab express empty" in text


def test_status_prices_54_gb_at_5_94_a_month(tmp_path, capsys, monkeypatch):
    """The README's figure: 54 GB in the bucket costs $5.94 a month (no need to store 54 GB for it)."""
    import dslab.aws.express as ops
    monkeypatch.setattr(ops, "inventory", lambda s3, b: {"objects": 1_530_350, "bytes": 54_000_000_000,
                                                         "datasets": {}, "multipart_uploads": 0})
    monkeypatch.setattr(ops, "s3_client", lambda region: None)
    assert main(["express", "status", "--outputs", _outputs(tmp_path)]) == 0
    assert "1,530,350 objects, 54.00 GB: $5.94 per month" in capsys.readouterr().out


def test_status_of_an_empty_bucket_and_of_a_lab_without_express(bucket, tmp_path, capsys):
    assert main(["express", "status", "--outputs", _outputs(tmp_path)]) == 0
    assert "empty" in capsys.readouterr().out
    off = _outputs(tmp_path, ExpressEnabled="false", ExpressBucketName=None, ExpressBucketArn=None, ExpressZoneId=None)
    assert main(["express", "status", "--outputs", off]) == 0
    assert "-c express=false" in capsys.readouterr().out
    assert main(["express", "empty", "--yes", "--outputs", off]) == 0
    assert "nothing to empty" in capsys.readouterr().out


def test_a_lab_deployed_before_express_is_told_to_deploy_again(tmp_path, capsys):
    old = _outputs(tmp_path, ExpressEnabled=None, ExpressBucketName=None, ExpressBucketArn=None, ExpressZoneId=None)
    assert main(["express", "status", "--outputs", old]) == 2
    err = capsys.readouterr().err
    assert "ExpressBucketName" in err and "deploy" in err


# ---- dslab express empty -----------------------------------------------------------------------

def test_empty_one_dataset_leaves_the_others(bucket, tmp_path, capsys, directory_listing):
    _fill(STAGED)
    upload = bucket.create_multipart_upload(Bucket=BUCKET, Key="datasets/jpg/c0/late.jpg")
    other = bucket.create_multipart_upload(Bucket=BUCKET, Key="datasets/tfr/late.tfrecord")
    assert main(["express", "empty", "--dataset", "jpg", "--yes", "--outputs", _outputs(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "deleted 13 objects" in out and "aborted 1 multipart uploads" in out
    assert _keys(bucket) == {k for k in STAGED if not k.startswith("datasets/jpg")}   # tfrx/ is not jpg's
    uploads = {u["UploadId"] for u in bucket.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])}
    assert uploads == {other["UploadId"]} and upload["UploadId"] not in uploads
    # Every listing kept the directory-bucket rules (the stand-in refuses the others).
    prefixes = [p.get("Prefix") for op, p in directory_listing if op == "ListObjectsV2"]
    assert prefixes and all(p is None or p.endswith("/") for p in prefixes)


def test_empty_everything_in_pages_of_1000(bucket, tmp_path, capsys, monkeypatch):
    _fill({f"datasets/many/{i}.jpg": 1 for i in range(2345)})
    bucket.create_multipart_upload(Bucket=BUCKET, Key="datasets/many/big.tfrecord")
    sizes = []
    original = boto3.client

    def recording_client(*args, **kwargs):
        client = original(*args, **kwargs)
        client.meta.events.register("provide-client-params.s3.DeleteObjects",
                                    lambda params, **_: sizes.append(len(params["Delete"]["Objects"])))
        return client
    monkeypatch.setattr(boto3, "client", recording_client)
    assert main(["express", "empty", "--yes", "--outputs", _outputs(tmp_path)]) == 0
    assert "deleted 2,345 objects" in capsys.readouterr().out
    assert _keys(bucket) == set() and not bucket.list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    assert max(sizes) <= 1000 and sum(sizes) == 2345


def test_empty_without_yes_asks_and_a_script_must_pass_yes(bucket, tmp_path, capsys, monkeypatch):
    _fill({"datasets/a/1.jpg": 10})
    monkeypatch.setattr(sys, "stdin", open("/dev/null"))   # not a terminal
    assert main(["express", "empty", "--outputs", _outputs(tmp_path)]) == 2
    assert "--yes" in capsys.readouterr().err and _keys(bucket) == {"datasets/a/1.jpg"}

    class Terminal:
        def isatty(self):
            return True
    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert main(["express", "empty", "--outputs", _outputs(tmp_path)]) == 1
    assert _keys(bucket) == {"datasets/a/1.jpg"}
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    assert main(["express", "empty", "--outputs", _outputs(tmp_path)]) == 0
    assert _keys(bucket) == set()
    assert main(["express", "empty", "--outputs", _outputs(tmp_path)]) == 0
    assert "nothing to delete" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["", "a/b", "..", " "])
def test_empty_refuses_a_bad_dataset_name(tmp_path, capsys, name):
    assert main(["express", "empty", "--dataset", name, "--yes", "--outputs", _outputs(tmp_path)]) == 2
    assert "--dataset" in capsys.readouterr().err


def test_a_prefix_without_a_slash_is_never_sent(bucket):
    """The helpers refuse it before AWS would (directory buckets answer InvalidRequest)."""
    from dslab.aws.express import list_objects
    with pytest.raises(ValueError):
        next(list_objects(bucket, BUCKET, "datasets/jpg"))
    with pytest.raises(ClientError) as err:   # and the stand-in answers as AWS would
        bucket.list_objects_v2(Bucket=BUCKET, Prefix="datasets/jpg")
    assert err.value.response["Error"]["Code"] == "InvalidRequest"
    _fill({f"datasets/d/{i:03d}.jpg": 1 for i in range(30)})
    listed = [o["Key"] for o in bucket.list_objects_v2(Bucket=BUCKET, Prefix="datasets/d/")["Contents"]]
    assert sorted(listed) != listed and len(listed) == 30   # not in lexicographic order, like a directory bucket


def test_express_commands_have_help_with_an_example_and_need_credentials(tmp_path):
    for command in (["express", "status"], ["express", "empty"]):
        result = subprocess.run([sys.executable, "-m", "dslab.cli", *command, "-h"], capture_output=True, text=True, cwd=REPO)
        assert result.returncode == 0 and "example:" in result.stdout, command
    env = {"PATH": "/usr/bin:/bin", "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1"}
    result = subprocess.run([sys.executable, "-m", "dslab.cli", "express", "status"], capture_output=True, text=True,
                            cwd=REPO, env=env)
    assert result.returncode == 2 and "credentials" in result.stderr.lower() and "Traceback" not in result.stderr


# ---- the emptier custom resource (stacks/components/express_empty/index.py) ---------------------

def _emptier():
    spec = importlib.util.spec_from_file_location("express_emptier", EMPTIER)
    module = importlib.util.module_from_spec(spec)
    sys.dont_write_bytecode, before = True, sys.dont_write_bytecode
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = before
    return module


class Context:
    def __init__(self, remaining_ms: int = 900_000):
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def _event(request: str, bucket: str = BUCKET, old: str | None = None) -> dict:
    event = {"RequestType": request, "ResponseURL": "https://example.invalid/response", "StackId": "stack",
             "RequestId": "req", "LogicalResourceId": "ExpressEmptier", "ResourceType": "Custom::ExpressBucketEmptier",
             "ResourceProperties": {"ServiceToken": "arn", "BucketName": bucket}}
    if request != "Create":
        event["PhysicalResourceId"] = f"empty-{bucket}"
    if old:
        event["OldResourceProperties"] = {"ServiceToken": "arn", "BucketName": old}
    return event


@pytest.fixture
def emptier(monkeypatch):
    module = _emptier()
    answers: list[dict] = []
    monkeypatch.setattr(module, "respond", lambda event, status, physical_id, reason, data=None: answers.append(
        {"Status": status, "PhysicalResourceId": physical_id, "Reason": reason, "Data": data or {}}))
    module.answers = answers
    return module


def test_emptier_deletes_every_object_and_upload_on_delete(bucket, emptier, directory_listing):
    _fill({**STAGED, **{f"datasets/many/{i}.jpg": 1 for i in range(2100)}})
    bucket.create_multipart_upload(Bucket=BUCKET, Key="datasets/many/big.tfrecord")
    emptier.handler(_event("Delete"), Context())
    (answer,) = emptier.answers
    assert answer["Status"] == "SUCCESS" and answer["PhysicalResourceId"] == f"empty-{BUCKET}"
    assert answer["Data"]["objects_deleted"] == str(len(STAGED) + 2100) and answer["Data"]["uploads_aborted"] == "1"
    assert _keys(bucket) == set() and not bucket.list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    # The whole bucket, never a key fragment: listings without a prefix, pages by continuation token.
    listings = [p for op, p in directory_listing if op == "ListObjectsV2"]
    assert listings and not [p for p in listings if "Prefix" in p or "StartAfter" in p]
    assert any("ContinuationToken" in p for p in listings)


def test_emptier_does_nothing_on_create_or_a_plain_update(bucket, emptier):
    _fill({"datasets/a/1.jpg": 1})
    emptier.handler(_event("Create"), Context())
    emptier.handler(_event("Update", old=BUCKET), Context())
    assert [a["Status"] for a in emptier.answers] == ["SUCCESS", "SUCCESS"]
    assert emptier.answers[0]["PhysicalResourceId"] == f"empty-{BUCKET}"
    assert _keys(bucket) == {"datasets/a/1.jpg"}


def test_emptier_clears_the_old_bucket_when_the_bucket_is_replaced(bucket, emptier):
    """A new zone ID replaces the bucket; CloudFormation then deletes the old one, which must be empty."""
    _fill({"datasets/a/1.jpg": 1})
    emptier.handler(_event("Update", bucket="new--use1-az5--x-s3", old=BUCKET), Context())
    assert emptier.answers[0]["Status"] == "SUCCESS" and _keys(bucket) == set()


def test_emptier_answers_success_for_a_bucket_already_gone(bucket, emptier):
    emptier.handler(_event("Delete", bucket="gone--use1-az4--x-s3"), Context())
    assert emptier.answers[0]["Status"] == "SUCCESS"


def test_emptier_answers_failed_with_the_fix_rather_than_timing_out(bucket, emptier):
    _fill({"datasets/a/1.jpg": 1})
    emptier.handler(_event("Delete"), Context(remaining_ms=30_000))
    (answer,) = emptier.answers
    assert answer["Status"] == "FAILED" and "not empty yet" in answer["Reason"] and "dslab express empty" in answer["Reason"]


def test_emptier_answers_failed_when_a_delete_is_refused(bucket, emptier, monkeypatch):
    _fill({"datasets/a/1.jpg": 1})
    real = emptier._client

    def refusing():
        client = real()
        client.delete_objects = lambda **kw: {"Errors": [{"Key": "datasets/a/1.jpg", "Code": "AccessDenied", "Message": "no"}]}
        return client
    monkeypatch.setattr(emptier, "_client", refusing)
    emptier.handler(_event("Delete"), Context())
    (answer,) = emptier.answers
    assert answer["Status"] == "FAILED" and "AccessDenied" in answer["Reason"] and "dslab express empty --yes" in answer["Reason"]


def test_emptier_puts_its_answer_to_the_response_url():
    """The response CloudFormation reads: a PUT of the documented JSON with an empty content type."""
    module = _emptier()
    received = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_PUT(self):  # noqa: N802
            received["content_type"] = self.headers.get("Content-Type")
            received["body"] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.handle_request)
    thread.start()
    event = {**_event("Delete"), "ResponseURL": f"http://127.0.0.1:{server.server_port}/answer"}
    module.respond(event, "SUCCESS", "empty-x", "", {"objects_deleted": "3"})
    thread.join(10)
    server.server_close()
    assert received["content_type"] == ""
    assert received["body"] == {"Status": "SUCCESS", "Reason": "SUCCESS", "PhysicalResourceId": "empty-x", "StackId": "stack",
                                "RequestId": "req", "LogicalResourceId": "ExpressEmptier", "NoEcho": False,
                                "Data": {"objects_deleted": "3"}}
