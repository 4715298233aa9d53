"""Script mode (the source post's "Bring your own data ingestion"): the experiment's rules, the request,
the results record and the estimate, without running anything. The script itself runs in
test_training.py (every format), test_own_script.py (a user's boto3 script in every backend) and the
local lab's end-to-end test; the state machine's channel-less task in test_workflow.py."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest

from dslab.aws.validation import validate_request
from dslab.contracts import validate_results
from dslab.core.errors import ConfigError
from dslab.core.shape import DatasetShape
from dslab.core.model.estimate import estimate_mode
from dslab.core.experiment import parse_experiment
from dslab.core.modes import lab_mode
from dslab.core.facts.prices import PriceTable
from dslab.core.requests import plan
from dslab.core.results import identify, record_from_describe, skipped_record, to_csv

from .helpers import BUCKET, lab_environment

BASE = {"name": "own", "datasets": [{"name": "caltech-jpg-1x", "format": "jpg"}], "instance_type": "ml.m5.xlarge", "compute": "v100",
        "modes": ["Script"]}
EXPRESS_BUCKET = "lab--use1-az4--x-s3"


@pytest.mark.parametrize("change, field, words", [
    ({"s3_data_type": "ManifestFile", "modes": ["Pipe", "Script"]}, "s3_data_type", "lists and reads the dataset's prefix itself"),
    ({"distribution": "ShardedByS3Key"}, "distribution", "SM_HOSTS/SM_CURRENT_HOST"),
    ({"hyperparameters": {"dataset_uri": "s3://elsewhere/"}}, "hyperparameters.dataset_uri", "the lab's to set"),
    ({"datasets": [{"name": "in-efs", "format": "jpg", "source": "efs"}]}, "datasets[0].source", "Script reads from S3"),
    ({"modes": ["Scirpt"]}, "modes[0]", "Script"),
    ({"storage": "express", "modes": ["Script", "EFS"]}, "storage", "reads its own file system"),
])
def test_impossible_script_combinations_name_the_field_and_the_fix(change, field, words):
    with pytest.raises(ConfigError) as err:
        parse_experiment({**BASE, **change})
    assert err.value.field.endswith(field) and words in str(err.value)


def test_script_is_asked_for_by_name_and_not_added_to_the_default_modes():
    assert "Script" not in parse_experiment({}).trials[0].modes
    assert parse_experiment({**BASE, "modes": ["script"]}).trials[0].modes == ("Script",)


def test_a_script_job_has_no_channel_and_is_valid_for_sagemaker_on_both_buckets():
    env = dataclasses.replace(lab_environment(), express_bucket=EXPRESS_BUCKET)
    stats = {"files": 30607, "bytes": 1_100_000_000, "sha256": "ab" * 32}
    for storage, bucket in (("standard", BUCKET), ("express", EXPRESS_BUCKET)):
        (job,) = plan(parse_experiment({**BASE, "storage": storage}), env, "exec", dataset_stats={"caltech-jpg-1x": stats})
        request = job.request
        validate_request("sagemaker", "CreateTrainingJob", request)
        assert "InputDataConfig" not in request and request["AlgorithmSpecification"]["TrainingInputMode"] == "File"
        uri = f"s3://{bucket}/datasets/caltech-jpg-1x/"
        assert json.loads(request["HyperParameters"]["dataset_uri"]) == uri
        tags = {t["Key"]: t["Value"] for t in request["Tags"]}
        assert tags["dslab:mode"] == "Script" and tags["dslab:storage"] == storage
        assert {k: v for k, v in tags.items() if k.startswith("dslab:dataset-")} == {
            "dslab:dataset-uri": uri, "dslab:dataset-files": "30607", "dslab:dataset-bytes": "1100000000",
            "dslab:dataset-stats-sha256": "ab" * 32}
        assert ("-xscript-" in job.name) == (storage == "express")
        # Network isolation would cut the script off from S3: never set.
        assert "EnableNetworkIsolation" not in request


def test_a_script_record_keeps_the_contracts_modes_and_is_found_again_without_tags():
    (job,) = plan(parse_experiment(BASE), lab_environment(), "exec")
    describe = {"TrainingJobName": job.name, "TrainingJobStatus": "Completed", "BillableTimeInSeconds": 100,
                "TrainingTimeInSeconds": 100, "ResourceConfig": job.request["ResourceConfig"],
                "AlgorithmSpecification": job.request["AlgorithmSpecification"],
                "HyperParameters": job.request["HyperParameters"], "SecondaryStatusTransitions": []}
    # The job alone (no tags): no channel and a dataset_uri say it read S3 itself, and which dataset.
    assert identify(describe)[:2] == ("Script", "caltech-jpg-1x")
    record = record_from_describe(describe, prices=PriceTable(), files=30607, total_bytes=1_100_000_000)
    skipped = skipped_record("x", mode="Script", dataset="d", repeat=0, instance_type="ml.m5.xlarge",
                             instance_count=1, reason="why")
    for r in (record, skipped):
        assert r["mode"] == "FastFile" and r["ingestion"] == "script" and lab_mode(r) == "Script"
    validate_results({"experiment": {}, "backend": "aws", "records": [record, skipped]})
    # Its GETs (one per JPEG) and LISTs (one per 1,000 keys) are priced: 30,607 x $0.40/M + 31 x $5/M.
    assert record["cost_usd"]["requests"] == pytest.approx(30607 * 0.4e-6 + 31 * 5e-6, abs=1e-6)
    (row,) = csv.DictReader(io.StringIO(to_csv([record])))
    assert row["ingestion"] == "script"


def test_the_estimate_reads_many_objects_at_once_and_streams_shards_in_ranges():
    prices = PriceTable()
    small = estimate_mode("Script", DatasetShape(files=1_530_350, bytes=54_000_000_000), rate=328.0, prices=prices)
    fastfile = estimate_mode("FastFile", DatasetShape(files=1_530_350, bytes=54_000_000_000), rate=328.0, prices=prices)
    # 64 GETs in flight instead of FastFile's 8 readers: compute-bound where FastFile waits on S3.
    assert small.bound == "compute" and fastfile.bound == "I/O" and small.downloading == 0
    assert small.billable_seconds < fastfile.billable_seconds
    shards = estimate_mode("Script", DatasetShape(files=500, bytes=54_000_000_000), rate=5000.0, prices=prices)
    # 8 connections would carry 700 MB/s; ml.p3.2xlarge sustains 2.5 Gbit/s, 250 MB/s of payload
    assert any("8 at a time, 250 MB/s at most" in a for a in shards.assumptions)
    express = estimate_mode("Script", DatasetShape(files=1_530_350, bytes=54_000_000_000), rate=100_000.0,
                            prices=prices, storage="express")
    standard = estimate_mode("Script", DatasetShape(files=1_530_350, bytes=54_000_000_000), rate=100_000.0, prices=prices)
    assert express.training < standard.training and express.staging_cost_usd > 0
