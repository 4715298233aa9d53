"""`dslab dataset upload --prefixes N`: a dataset's objects spread over N S3 prefixes under its own, which every
source (File, FastFile, Pipe, FSx through its link, EFS through DataSync's copy, Script) and the training script read
as if it were one: S3 serves "at least ... 5,500 GET/HEAD requests per second per partitioned Amazon S3 prefix" and
"there are no limits to the number of prefixes in a bucket" (S3 User Guide, optimizing-performance.html), which is
how `dslab size` feeds a cluster from the bucket."""

from __future__ import annotations

import json
from collections import Counter

import boto3
import pytest
from moto import mock_aws

from dslab.cli import main
from dslab.core.errors import ConfigError
from dslab.inputs import datasets
from dslab.local.runner import FolderStorage, run_training_job

from .helpers import BUCKET, TRAINING, make_stand_in, tiny_requests

MODES = ["File", "FastFile", "Pipe", "FSx", "EFS", "Script"]


def _objects(client, prefix: str) -> dict[str, bytes]:
    return {o["Key"]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
            for o in page.get("Contents", [])}


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    """The tiny datasets uploaded with --prefixes 3 (JPEGs) and 2 (shards), then laid out in a folder stand-in as
    S3 holds them, as FSx's link to datasets/ shows them and as DataSync copies them into EFS."""
    stand = make_stand_in(tmp_path_factory.mktemp("plain"))
    spread_stand = make_stand_in(tmp_path_factory.mktemp("spread"), images=stand.images)
    uploads = {}
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        for name, source, count in (("tiny-jpg", stand.jpg, 3), ("tiny-tfr", stand.tfr, 2)):
            uploads[name] = datasets.upload(source, f"s3://{BUCKET}/datasets/{name}/", s3_client=client, prefixes=count)
        objects = _objects(client, "datasets/")
        again = datasets.upload(stand.jpg, f"s3://{BUCKET}/datasets/tiny-jpg/", s3_client=client, prefixes=3)
        with pytest.raises(ConfigError) as refused:
            datasets.upload(stand.jpg, f"s3://{BUCKET}/datasets/tiny-jpg/", s3_client=client, prefixes=4)
    for name in ("tiny-jpg", "tiny-tfr"):   # replace the plain copies by the spread ones, everywhere
        for root in (spread_stand.s3_root / BUCKET, spread_stand.fs_root / "fs-0123456789abcdef0",
                     spread_stand.fs_root / "fs-0fedcba9876543210"):
            import shutil
            shutil.rmtree(root / "datasets" / name)
    for key, body in objects.items():
        targets = [spread_stand.s3_root / BUCKET / key]
        if not key.endswith((".manifest", ".json")):
            targets += [spread_stand.fs_root / fs / key for fs in ("fs-0123456789abcdef0", "fs-0fedcba9876543210")]
        for target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
    return {"stand": spread_stand, "source": stand, "uploads": uploads, "objects": objects, "again": again,
            "refused": refused.value}


def test_upload_spreads_the_objects_round_robin_and_keeps_their_folders(spread):
    objects, source = spread["objects"], spread["source"]
    data = sorted(k for k in objects if k.startswith("datasets/tiny-jpg/"))
    files = sorted(p.relative_to(source.jpg).as_posix() for p in source.jpg.rglob("*.jpg"))
    assert len(data) == len(files) == source.images
    by_prefix = Counter(k.split("/")[2] for k in data)
    assert by_prefix == {"p00": 32, "p01": 32, "p02": 32}
    # Each file under its own class folder, beside the prefix it was dealt to; nothing lost, nothing twice.
    assert sorted(k.split("/", 3)[3] for k in data) == files
    assert {k.split("/", 3)[3].split("/")[0] for k in data if k.split("/")[2] == "p01"} == {f.split("/")[0] for f in files}
    manifest = json.loads(objects["datasets/tiny-jpg.manifest"])
    assert manifest[0] == {"prefix": f"s3://{BUCKET}/datasets/tiny-jpg/"} and sorted(manifest[1:]) == [k.split("/", 2)[2] for k in data]
    stats = json.loads(objects["datasets/tiny-jpg.stats.json"])
    assert (stats["files"], stats["prefixes"]) == (source.images, 3)
    shards = len([p for p in source.tfr.rglob("*") if p.is_file() and p.name not in datasets.METADATA_FILES])
    assert shards > 1
    assert Counter(k.split("/")[2] for k in objects if k.startswith("datasets/tiny-tfr/")) == {
        "p00": (shards + 1) // 2, "p01": shards // 2}
    # Uploading again with the same spread sends nothing; another spread would leave both layouts under one channel.
    assert (spread["again"]["uploaded"], spread["again"]["skipped"]) == (0, source.images)
    assert spread["refused"].field == "--prefixes" and "spread over 3 prefix(es)" in str(spread["refused"])


@pytest.mark.parametrize("dataset", ["tiny-jpg", "tiny-tfr"])
@pytest.mark.parametrize("mode", MODES)
def test_every_source_reads_a_spread_dataset_whole_with_its_labels(spread, tmp_path, mode, dataset):
    stand = spread["stand"]
    request = tiny_requests(epochs=1, modes=MODES)[(dataset, mode)]
    outcome = run_training_job(request, FolderStorage(stand.s3_root, stand.fs_root), tmp_path, code_dir=TRAINING)
    assert outcome.status == "Completed", outcome.describe.get("FailureReason", "") + outcome.log[-2000:]
    assert outcome.metrics["samples"] == spread["source"].images
    # The class of each image is its folder, never the p00/ it was dealt to.
    assert {int(k): v for k, v in outcome.metrics["label_counts"].items()} == spread["source"].class_counts


def test_a_flat_dataset_spread_over_prefixes_gets_no_class_from_them(tmp_path):
    """Files at the top of a dataset have no class folder: spread, they still have none (labels -1)."""
    import sys
    sys.path.insert(0, str(TRAINING))
    from dslab_train.pipeline import JpgSource
    from dslab_train.s3source import S3Object, jpg_labels
    for i in range(4):
        folder = tmp_path / f"p{i % 2:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"{i}.jpg").write_bytes(b"\xff\xd8")
    source = JpgSource.scan(tmp_path)
    assert source.classes == [] and source.labels == [-1] * 4
    labels, classes = jpg_labels([S3Object(f"datasets/flat/p0{i % 2}/{i}.jpg", 2) for i in range(4)], "datasets/flat/")
    assert (labels, classes) == ([-1] * 4, [])
    # A dataset whose class folders sit at the top keeps them (p00-like names only count as prefixes when all are).
    labels, classes = jpg_labels([S3Object("datasets/c/p00/a.jpg", 2), S3Object("datasets/c/cat/b.jpg", 2)], "datasets/c/")
    assert classes == ["cat", "p00"]


def test_upload_refuses_more_prefixes_than_files_naming_the_flag(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jpg").write_bytes(b"\xff\xd8")
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        assert main(["dataset", "upload", "--src", str(tmp_path / "d"), "--to", f"s3://{BUCKET}/datasets/d/",
                     "--prefixes", "2"]) == 2
    assert "--prefixes" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["dataset", "upload", "--src", str(tmp_path / "d"), "--to", f"s3://{BUCKET}/datasets/d/", "--prefixes", "0"])
    assert exit_.value.code == 2 and "--prefixes" in capsys.readouterr().err
