"""`dslab dataset ...` through its entry point, upload against an in-process S3 stand-in (moto)."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from dslab.cli import main


def test_generate_pack_replicate_stats(tmp_path, capsys):
    assert main(["dataset", "generate", "--out", str(tmp_path / "jpg"), "--images", "30", "--classes", "3", "--seed", "1"]) == 0
    assert len(list((tmp_path / "jpg").rglob("*.jpg"))) == 30
    assert main(["dataset", "pack", "--src", str(tmp_path / "jpg"), "--out", str(tmp_path / "tfr"), "--shard-size", "300KB"]) == 0
    manifest = json.loads((tmp_path / "tfr" / "manifest.json").read_text())
    assert sum(s["records"] for s in manifest["shards"]) == 30 and len(manifest["shards"]) >= 2
    assert main(["dataset", "replicate", "--src", str(tmp_path / "tfr"), "--copies", "2", "--out", str(tmp_path / "x2")]) == 0
    capsys.readouterr()
    assert main(["dataset", "stats", str(tmp_path / "jpg"), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["files"] == 30 and stats["format"] == "jpg" and stats["bytes"] > 0


@pytest.mark.parametrize("argv, words", [
    (["dataset", "pack", "--src", "/nonexistent", "--out", "/tmp/x"], ["--src"]),
    (["dataset", "generate", "--out", "OUT", "--images", "0"], ["--images"]),
    (["dataset", "generate", "--out", "OUT", "--images", "3", "--classes", "5"], ["--classes"]),
    (["dataset", "upload", "--src", "SRC", "--to", "bucket/prefix"], ["--to", "s3://"]),
    (["dataset", "pack", "--src", "SRC", "--out", "OUT2", "--shard-size", "big"], ["--shard-size"]),
])
def test_bad_input_exits_2_naming_the_field(tmp_path, capsys, argv, words):
    (tmp_path / "SRC").mkdir()
    (tmp_path / "SRC" / "a.jpg").write_bytes(b"\xff\xd8")
    argv = [a.replace("OUT", str(tmp_path / "OUT")).replace("SRC", str(tmp_path / "SRC")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err


def test_generate_refuses_to_overwrite(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep.txt").write_text("mine")
    assert main(["dataset", "generate", "--out", str(tmp_path / "d"), "--images", "3", "--classes", "1"]) == 2
    assert (tmp_path / "d" / "keep.txt").read_text() == "mine"


@mock_aws
def test_upload_sends_only_what_changed_and_writes_a_manifest(tmp_path, capsys):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="lab")
    main(["dataset", "generate", "--out", str(tmp_path / "jpg"), "--images", "12", "--classes", "2"])
    to = "s3://lab/datasets/mini/"
    assert main(["dataset", "upload", "--src", str(tmp_path / "jpg"), "--to", to]) == 0
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="lab", Prefix="datasets/mini/")["Contents"]}
    assert len(keys) == 12 and not [k for k in keys if k.endswith("dataset.json")]
    manifest = json.loads(s3.get_object(Bucket="lab", Key="datasets/mini.manifest")["Body"].read())
    assert manifest[0] == {"prefix": "s3://lab/datasets/mini/"} and len(manifest) == 13
    assert s3.get_object(Bucket="lab", Key="datasets/mini.dataset.json")
    capsys.readouterr()
    assert main(["dataset", "upload", "--src", str(tmp_path / "jpg"), "--to", to]) == 0
    assert "0 files uploaded" in capsys.readouterr().out
    changed = sorted((tmp_path / "jpg").rglob("*.jpg"))[0]
    changed.write_bytes(changed.read_bytes() + b"\0")
    assert main(["dataset", "upload", "--src", str(tmp_path / "jpg"), "--to", to]) == 0
    assert "1 files uploaded" in capsys.readouterr().out


@mock_aws
def test_stats_of_an_s3_prefix(tmp_path, capsys):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="lab")
    for i, size in enumerate((1000, 3000, 5000)):
        s3.put_object(Bucket="lab", Key=f"datasets/d/{i}.jpg", Body=b"x" * size)
    assert main(["dataset", "stats", "s3://lab/datasets/d/", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["files"] == 3 and stats["bytes"] == 9000 and stats["median_bytes"] == 3000 and stats["format"] == "jpg"
    assert main(["dataset", "stats", "s3://lab/datasets/none/"]) == 2
