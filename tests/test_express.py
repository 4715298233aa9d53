"""The sixth data source: S3 Express One Zone — experiments, requests, the stand-in's directory-bucket
rules, the project's own S3 code under them, staging in the workflow, estimates and advice."""

from __future__ import annotations

import json
import time

import boto3
import pytest

from dslab.inputs import datasets
from dslab.core.errors import ConfigError
from dslab.core.shape import DatasetShape
from dslab.core.facts.compute import compute_rate
from dslab.core.model.estimate import estimate_mode, fsx_express_break_even
from dslab.core.experiment import expand, parse_experiment
from dslab.core.facts.prices import PriceTable
from dslab.core.answer.recommend import recommend
from dslab.core.requests import JOB_NAME_MAX, LabEnvironment, job_name, plan
from dslab.aws.validation import validate_request

from .scripted_jobs import ScriptedJobs
from .test_workflow import put_datasets

EXPRESS_BUCKET = "datasourcelab-express--use1-az4--x-s3"
ENV = {"bucket": "datasourcelab-data-123456789012-us-east-1", "region": "us-east-1",
       "role_arn": "arn:aws:iam::123456789012:role/Training", "subnet_ids": "subnet-0123456789abcdef0",
       "security_group_ids": "sg-0123456789abcdef0", "code_uri": "s3://assets/lab.tar.gz",
       "image_uri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312",
       "fsx": {"file_system_id": "fs-0123456789abcdef1", "mount_name": "mnt1234"},
       "efs": {"file_system_id": "fs-0fedcba9876543210"}, "express_bucket": EXPRESS_BUCKET}
EXPRESS_TRIAL = {"name": "tiny", "instance_type": "ml.m5.xlarge", "compute": "v100",
                 "datasets": [{"name": "tiny-jpg", "format": "jpg"}],
                 "trials": [{"name": "base", "modes": ["File", "FastFile"]},
                            {"name": "express", "storage": "express", "modes": ["File", "FastFile", "Pipe"]}]}


# ---- experiments and requests ---------------------------------------------------------------------

def test_default_experiment_adds_express_fastfile_on_the_small_files_datasets_only():
    specs = expand(parse_experiment({}))
    express = [(s.dataset.name, s.mode) for s in specs if s.trial.storage == "express"]
    assert express == [("caltech-jpg-1x", "FastFile"), ("caltech-jpg-50x", "FastFile")]
    assert len(specs) == 22
    # Experiment files written before Express still parse, and run on the general purpose bucket.
    old = parse_experiment({"datasets": ["caltech-jpg-1x"], "modes": ["FastFile"]})
    assert [t.storage for t in old.trials] == ["standard"]


def test_express_requests_read_the_directory_bucket_and_validate():
    experiment = parse_experiment(EXPRESS_TRIAL)
    jobs = plan(experiment, LabEnvironment.from_dict(ENV), "exec-1")
    express = [j for j in jobs if j.spec.trial.storage == "express"]
    assert [j.spec.mode for j in express] == ["File", "FastFile", "Pipe"]
    for job in jobs:
        validate_request("sagemaker", "CreateTrainingJob", job.request)
        uri = job.request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"]
        tags = {t["Key"]: t["Value"] for t in job.request["Tags"]}
        if job.spec.trial.storage == "express":
            # The prefix ends in "/": a directory bucket accepts no other (ListObjectsV2 rules).
            assert uri == f"s3://{EXPRESS_BUCKET}/datasets/tiny-jpg/"
            assert tags["dslab:storage"] == "express" and f"-x{job.spec.mode.lower()}-" in job.name
        else:
            assert uri.startswith(f"s3://{ENV['bucket']}/") and tags["dslab:storage"] == "standard"
    longest = parse_experiment({**EXPRESS_TRIAL, "job_prefix": "a" * 20,
                                "datasets": [{"name": "a-very-long-dataset-name-here", "format": "jpg"}], "repeats": 100})
    assert max(len(job_name(longest, s, "x")) for s in expand(longest)) <= JOB_NAME_MAX


def test_express_jobs_are_skipped_with_the_reason_when_the_lab_has_no_directory_bucket():
    jobs = plan(parse_experiment(EXPRESS_TRIAL), LabEnvironment.from_dict({**ENV, "express_bucket": None}), "exec")
    skipped = [j for j in jobs if j.request is None]
    assert len(skipped) == 3 and all("express=false" in j.skip_reason for j in skipped)


@pytest.mark.parametrize("change, field, words", [
    ({"trials": [{"storage": "express", "modes": ["FSx"]}]}, "storage", "reads its own file system"),
    ({"trials": [{"storage": "express", "modes": ["File"], "s3_data_type": "ManifestFile"}]}, "s3_data_type", "S3Prefix"),
    ({"trials": [{"storage": "expres", "modes": ["File"]}]}, "storage", "not allowed"),
    ({"trials": [{"storages": "express"}]}, "trials[0].storages", "did you mean 'storage'"),
])
def test_impossible_express_combinations_name_the_field(change, field, words):
    with pytest.raises(ConfigError) as err:
        parse_experiment({**EXPRESS_TRIAL, **change})
    assert err.value.field.endswith(field) and words in str(err.value)


def test_lab_environment_refuses_a_name_that_is_not_a_directory_bucket():
    with pytest.raises(ConfigError) as err:
        LabEnvironment.from_dict({**ENV, "express_bucket": "my-bucket"})
    assert err.value.field == "environment.express_bucket" and "--x-s3" in str(err.value)


# ---- the stand-in's directory bucket, and the project's S3 code under its rules ----------------------

@pytest.fixture
def stand_in(monkeypatch):
    """moto in-process with the directory-bucket rules of dslab/emulator/patches/s3.py; S3 lists 50 keys
    a page, so a few hundred objects take several pages."""
    from moto import mock_aws
    from dslab.emulator import patches
    patches.install()
    monkeypatch.setenv("AWS_S3_DISABLE_EXPRESS_SESSION_AUTH", "true")
    monkeypatch.setenv("MOTO_S3_DEFAULT_MAX_KEYS", "50")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        patches.create_directory_bucket(EXPRESS_BUCKET)
        s3.create_bucket(Bucket=ENV["bucket"])
        yield s3


def test_stand_in_lists_a_directory_bucket_the_way_aws_does(stand_in):
    s3 = stand_in
    for i in range(120):
        s3.put_object(Bucket=EXPRESS_BUCKET, Key=f"datasets/d/{i:04d}.jpg", Body=b"x" * i)
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=EXPRESS_BUCKET, Prefix="datasets/d/")
            for o in page.get("Contents", [])]
    assert len(keys) == len(set(keys)) == 120 and keys != sorted(keys)   # every key once, not in order
    for kwargs, message in (({"Prefix": "datasets/d"}, "does not end in a delimiter"),
                            ({"Prefix": "datasets/d/", "Delimiter": "-"}, "delimiter"),
                            ({"StartAfter": "datasets/d/0001.jpg"}, "StartAfter")):
        with pytest.raises(s3.exceptions.ClientError) as err:
            s3.list_objects_v2(Bucket=EXPRESS_BUCKET, **kwargs)
        assert err.value.response["Error"]["Code"] == "InvalidRequest" and message in str(err.value)
    with pytest.raises(s3.exceptions.ClientError):
        s3.list_objects(Bucket=EXPRESS_BUCKET)  # ListObjects (v1): not supported for directory buckets
    # A directory bucket's ETag is not the object's MD5; a general purpose bucket's is.
    import hashlib
    s3.put_object(Bucket=ENV["bucket"], Key="k", Body=b"abc")
    s3.put_object(Bucket=EXPRESS_BUCKET, Key="k", Body=b"abc")
    md5 = hashlib.md5(b"abc").hexdigest()
    assert s3.head_object(Bucket=ENV["bucket"], Key="k")["ETag"].strip('"') == md5
    assert s3.head_object(Bucket=EXPRESS_BUCKET, Key="k")["ETag"].strip('"') != md5


def test_upload_and_stats_are_correct_on_a_directory_bucket(stand_in, tmp_path):
    s3 = stand_in
    src = tmp_path / "ds"
    for i in range(130):
        (src / f"c{i % 3}").mkdir(parents=True, exist_ok=True)
        (src / f"c{i % 3}" / f"{i:04d}.jpg").write_bytes(bytes([i % 256]) * (10 + i))
    to = f"s3://{EXPRESS_BUCKET}/datasets/ds/"
    first = datasets.upload(src, to, s3_client=s3)
    assert first["uploaded"] == 130
    # Unchanged files are recognised although the ETags are not MD5s there (the MD5 travels as metadata).
    again = datasets.upload(src, to, s3_client=s3)
    assert again["uploaded"] == 0 and again["skipped"] == 130
    (src / "c0" / "0000.jpg").write_bytes(b"changed!!!")
    assert datasets.upload(src, to, s3_client=s3)["uploaded"] == 1
    # Stats over several unordered pages, and the stats file the workflow reads, beside the prefix.
    total = sum(p.stat().st_size for p in src.rglob("*.jpg"))
    info = datasets.stats(to.rstrip("/"), s3_client=s3, write=True)
    assert info["files"] == 130 and info["bytes"] == total
    stored = json.loads(s3.get_object(Bucket=EXPRESS_BUCKET, Key="datasets/ds.stats.json")["Body"].read())
    assert stored["files"] == 130 and stored["bytes"] == total


def test_local_runner_reads_every_object_of_an_unordered_listing(stand_in, tmp_path):
    from dslab.local.channels import channel_objects
    from dslab.local.storage import LabStorage
    s3 = stand_in
    for i in range(75):
        s3.put_object(Bucket=EXPRESS_BUCKET, Key=f"datasets/r/{i:03d}.bin", Body=b"1")
    storage = LabStorage(s3, None, tmp_path, None, None, "fs-1")
    objects = channel_objects(storage, {"S3DataType": "S3Prefix", "S3Uri": f"s3://{EXPRESS_BUCKET}/datasets/r/"})
    assert sorted(key for _, key in objects) == [f"datasets/r/{i:03d}.bin" for i in range(75)]


# ---- the workflow: staging into the directory bucket ----------------------------------------------

def test_workflow_stages_express_datasets_before_the_express_jobs_and_skips_them_next_time(emulated):
    created = []

    class Recording(ScriptedJobs):
        def __call__(self, request, update):
            uri = request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"]
            bucket, _, prefix = uri[5:].partition("/")
            if bucket.endswith("--x-s3"):  # the data must be in the directory bucket when the job starts
                listed = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=bucket, Prefix=prefix)
                created.append((request["TrainingJobName"], listed.get("KeyCount", 0)))
            return super().__call__(request, update)

    jobs = Recording()
    with emulated(jobs) as lab:
        assert lab.express_bucket and lab.express_bucket.endswith("--x-s3")
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run(EXPRESS_TRIAL)
        assert execution.status == "SUCCEEDED", execution.cause
        results = lab.results(execution)
        assert results["express_staging"]["ready"] is True and "3 objects copied" in results["express_staging"]["reason"]
        assert [count for _, count in created] == [3, 3, 3]
        records = {(r["mode"], r.get("storage", "standard")): r for r in results["records"]}
        assert {k for k in records} == {("File", "standard"), ("FastFile", "standard"), ("File", "express"),
                                        ("FastFile", "express"), ("Pipe", "express")}
        assert all(r["status"] == "Completed" for r in records.values())
        staged = json.loads(lab.client("s3").get_object(Bucket=lab.express_bucket, Key="datasets/tiny-jpg.stats.json")["Body"].read())
        assert staged["files"] == 3 and staged["bytes"] == 303
        # A second run finds the dataset staged (same files and bytes) and copies nothing.
        second = lab.run(EXPRESS_TRIAL)
        assert second.status == "SUCCEEDED", second.cause
        assert "0 objects copied, 1 already there" in lab.results(second)["express_staging"]["reason"]
        # The source changed (one object gone, one new): the stale copy is cleared, then copied afresh.
        s3 = lab.client("s3")
        s3.delete_object(Bucket=lab.bucket, Key="datasets/tiny-jpg/part-2.bin")
        s3.put_object(Bucket=lab.bucket, Key="datasets/tiny-jpg/part-9.bin", Body=b"y" * 50)
        s3.put_object(Bucket=lab.bucket, Key="datasets/tiny-jpg.stats.json",
                      Body=json.dumps({"files": 3, "bytes": 251}).encode())
        third = lab.run(EXPRESS_TRIAL)
        assert third.status == "SUCCEEDED", third.cause
        assert "3 objects copied, 0 already there, 3 stale objects removed first" in lab.results(third)["express_staging"]["reason"]
        staged_keys = {o["Key"] for o in s3.list_objects_v2(Bucket=lab.express_bucket, Prefix="datasets/tiny-jpg/")["Contents"]}
        assert staged_keys == {"datasets/tiny-jpg/part-0.bin", "datasets/tiny-jpg/part-1.bin", "datasets/tiny-jpg/part-9.bin"}


def test_express_staging_loops_in_bounded_invocations(emulated):
    """No time left after each batch: every invocation copies one batch of EXPRESS_COPY_THREADS objects and
    hands on a cursor inside the ListObjectsV2 page (the budget is checked per batch, not per 1,000 keys),
    and the next invocation goes on exactly there: every object copied once, none missed."""
    from dslab.core.facts.limits import EXPRESS_COPY_THREADS
    with emulated(ScriptedJobs(), extra_env={"DSLAB_STAGING_BUDGET_SECONDS": "0"}) as lab:
        from .test_workflow_at_scale import put_many
        files, size = put_many(lab, "many-jpg", 200)
        lab.client("s3").put_object(Bucket=lab.bucket, Key="datasets/many-jpg.stats.json",
                                    Body=json.dumps({"files": files, "bytes": size}).encode())
        execution = lab.run({"name": "many", "instance_type": "ml.m5.xlarge", "compute": "v100", "storage": "express", "modes": ["FastFile"],
                             "datasets": [{"name": "many-jpg", "format": "jpg"}]})
        assert execution.status == "SUCCEEDED", execution.cause
        staging = lab.results(execution)["express_staging"]
        assert staging["ready"] is True and staging["invocations"] == -(-200 // EXPRESS_COPY_THREADS)
        assert "200 objects copied" in staging["reason"]
        staged = [o["Key"] for page in lab.client("s3").get_paginator("list_objects_v2").paginate(
            Bucket=lab.express_bucket, Prefix="datasets/many-jpg/") for o in page.get("Contents", [])]
        assert len(staged) == len(set(staged)) == 200


def test_express_jobs_are_skipped_with_the_reason_when_staging_fails(emulated):
    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        put_datasets(lab, ["tiny-jpg"])
        from moto.s3.models import s3_backends
        s3_backends["123456789012"]["global"].delete_bucket(lab.express_bucket)   # copies now fail: NoSuchBucket
        execution = lab.run(EXPRESS_TRIAL)
        assert execution.status == "SUCCEEDED", execution.cause
        records = lab.results(execution)["records"]
        express = [r for r in records if r.get("storage") == "express"]
        assert len(express) == 3 and all(r["status"] == "Skipped" for r in express)
        assert all("S3 Express One Zone bucket did not finish" in r["failure_reason"] for r in express)
        assert all(r["status"] == "Completed" for r in records if r.get("storage") != "express")
        assert not [r for r in jobs.requests if "-x" in r["TrainingJobName"]]


# ---- estimates and advice --------------------------------------------------------------------------

POST_50X = DatasetShape(files=1_530_350, bytes=54_000_000_000)


def test_express_estimate_cuts_fastfile_latency_and_prices_staging_and_requests():
    rate, _ = compute_rate("v100")
    prices = PriceTable()
    standard = estimate_mode("FastFile", POST_50X, rate=rate, prices=prices)
    express = estimate_mode("FastFile", POST_50X, rate=rate, prices=prices, storage="express")
    assert standard.bound == "I/O" and express.bound == "compute"
    assert express.billable_seconds < standard.billable_seconds
    # Staging: a COPY per object at the PUT price, the bytes at the upload price, the source GETs.
    expected = 1_530_350 * 0.00113 / 1000 + 54 * 0.0032 + 1_530_350 * 0.40 / 1e6
    assert express.staging_cost_usd == pytest.approx(expected)
    assert any("S3 Express One Zone" in a and "assumption" in a for a in express.assumptions)
    with pytest.raises(ConfigError):
        estimate_mode("FSx", POST_50X, rate=rate, prices=prices, storage="express")


def test_break_even_between_fsx_and_express_for_the_posts_dataset():
    rate, _ = compute_rate("v100")
    result = fsx_express_break_even(POST_50X, rate=rate, prices=PriceTable(), max_epochs=40)
    # FSx's import is cheap next to Express's staging copy; FSx's hourly bill overtakes it with epochs.
    assert result.cheaper_at_start == "FSx" and result.crossover is not None and 2 <= result.crossover <= 40
    i = result.crossover - 1
    assert result.express_usd[i] <= result.fsx_usd[i] and result.express_usd[i - 1] > result.fsx_usd[i - 1]
    print(f"\n{result.sentence()}")


def test_recommend_weighs_fsx_and_express_for_the_users_epochs():
    """The pick weighs FSx (hourly) and Express FastFile (a copy once) at the user's epochs, each with
    its set-up; the break-even is told beside it and agrees with the ranking at those epochs."""
    rate, _ = compute_rate("v100")
    for epochs in (1, 5, 30):
        rec = recommend(POST_50X, rate=rate, prices=PriceTable(), epochs=epochs)
        by_source = {o.source: o for o in rec.decision.ranking}
        fsx, express = by_source["FSx"], by_source["Express FastFile"]
        assert fsx.setup.usd > 0 and express.setup.usd > 0
        cheaper = "FSx" if fsx.cost_usd <= express.cost_usd else "Express FastFile"
        crossover = rec.break_even.crossover
        assert cheaper == (rec.break_even.cheaper_at_start if crossover is None or epochs < crossover else
                           ("Express FastFile" if rec.break_even.cheaper_at_start == "FSx" else "FSx"))
        assert rec.to_dict()["fsx_express_break_even"]["crossover_epochs"] == crossover
    assert recommend(POST_50X, rate=rate, prices=PriceTable(), epochs=1).decision.pick.source == "FSx"


# ---- what would break a real run (runtime findings) -----------------------------------------------

ONLY_EXPRESS = {"name": "xonly", "instance_type": "ml.m5.xlarge", "compute": "v100", "storage": "express", "modes": ["FastFile"],
                "datasets": [{"name": "only-x", "format": "jpg"}]}


def _put_in_directory_bucket(lab, name: str, count: int = 3) -> None:
    s3 = lab.client("s3")
    for i in range(count):
        s3.put_object(Bucket=lab.express_bucket, Key=f"datasets/{name}/part-{i}.bin", Body=b"x" * 100)
    s3.put_object(Bucket=lab.express_bucket, Key=f"datasets/{name}.stats.json",
                  Body=json.dumps({"files": count, "bytes": 100 * count}).encode())


def test_plan_may_open_a_read_only_session_on_the_directory_bucket(lab):
    """Without it, Plan's ListObjectsV2 of an Express-only dataset is AccessDenied and the execution fails."""
    from .test_infrastructure import core_parameter_ref
    statements = [st for p in lab.workflow.find_resources("AWS::IAM::Policy").values()
                  if "PlanFunctionRole" in json.dumps(p["Properties"]["Roles"])
                  for st in p["Properties"]["PolicyDocument"]["Statement"]]
    (session,) = [st for st in statements if st["Action"] == "s3express:CreateSession"]
    assert session["Condition"] == {"StringEquals": {"s3express:SessionMode": "ReadOnly"}}
    assert core_parameter_ref(lab.raw("DataSourceLab"), session["Resource"], "express-bucket-arn")


def test_plan_reads_a_dataset_uploaded_only_to_the_directory_bucket(emulated):
    with emulated(ScriptedJobs()) as lab:
        _put_in_directory_bucket(lab, "only-x")
        execution = lab.run(ONLY_EXPRESS)
        assert execution.status == "SUCCEEDED", execution.cause
        plan_document = lab.read_json(f"results/{execution.name}/plan.json")
        assert plan_document["dataset_stats"]["only-x"]["stats_file"].startswith(f"s3://{lab.express_bucket}/")
        assert [r["status"] for r in lab.results(execution)["records"]] == ["Completed"]


def test_any_plan_error_ends_the_execution_with_a_readable_reason(emulated):
    """Not only ExperimentInvalid: an S3 error Plan did not expect (a directory bucket that never wakes)
    fails the execution as PlanFailed with what happened, not a Lambda stack trace."""
    from dslab.emulator import patches
    with emulated(ScriptedJobs()) as lab:
        _put_in_directory_bucket(lab, "only-x")
        patches.HOOKS.s3_fault = lambda method, bucket, key: ((503, "ServiceUnavailable", "Please try again")
                                                              if bucket == lab.express_bucket else None)
        execution = lab.run(ONLY_EXPRESS)
        assert execution.status == "FAILED" and execution.error == "PlanFailed"
        assert execution.cause.startswith("Plan could not finish: AWS ListObjectsV2 failed after 3 attempts (ServiceUnavailable")
        assert "a temporary failure on AWS's side" in execution.cause   # and what to do (dslab/core/facts/aws_errors.py)
        assert "Traceback" not in execution.cause and "stackTrace" not in execution.cause
        assert lab.training_job_names() == []


def test_an_inactive_directory_bucket_is_waited_for_while_it_wakes(emulated):
    """After 90 days without requests a directory bucket answers 503 "typically" for minutes: staging and
    Plan keep asking with backoff instead of failing the run."""
    from dslab.emulator import patches
    # Staging waits EXPRESS_WAKE_SECONDS (5 minutes) for the bucket: at the usual 1000-fold compression
    # that is 0.3 s of wall clock, which a loaded 2-core CI machine spends on a dozen requests; 100-fold
    # gives 3 s, which a loaded machine running the suite 3-wide has missed; 20-fold gives 15 s (spent only
    # while the bucket sleeps).
    with emulated(ScriptedJobs(), time_scale=0.05) as lab:
        put_datasets(lab, ["tiny-jpg"])
        asleep = {"requests": 20}   # more 503s than botocore's retries of one call (8 for staging's client)

        def waking(method, bucket, key):
            if bucket == lab.express_bucket and asleep["requests"] > 0:
                asleep["requests"] -= 1
                return 503, "ServiceUnavailable", "The bucket is waking up"
            return None
        patches.HOOKS.s3_fault = waking
        execution = lab.run(EXPRESS_TRIAL)
        assert execution.status == "SUCCEEDED", execution.cause
        assert asleep["requests"] == 0
        assert lab.results(execution)["express_staging"]["ready"] is True


def test_staging_copies_no_tags_into_the_directory_bucket(emulated):
    """CopyObject copies the source's tags by default, and a directory bucket answers 501 to any tag."""
    with emulated(ScriptedJobs()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        s3 = lab.client("s3")
        s3.put_object_tagging(Bucket=lab.bucket, Key="datasets/tiny-jpg/part-0.bin",
                              Tagging={"TagSet": [{"Key": "owner", "Value": "data-team"}]})
        with pytest.raises(s3.exceptions.ClientError, match="NotImplemented"):   # the rule, as the stand-in enforces it
            s3.copy_object(Bucket=lab.express_bucket, Key="probe", CopySource={"Bucket": lab.bucket, "Key": "datasets/tiny-jpg/part-0.bin"})
        execution = lab.run(EXPRESS_TRIAL)
        assert execution.status == "SUCCEEDED", execution.cause
        assert lab.results(execution)["express_staging"]["ready"] is True


def test_two_executions_staging_the_same_dataset_take_turns(emulated):
    """A dataset's staging lock (a conditional PUT in the directory bucket) makes the second execution
    wait rather than clear the first one's copies."""
    from dslab.workflow.express_staging import release_staging_lock, take_staging_lock
    with emulated(ScriptedJobs()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        s3 = lab.client("s3")
        assert take_staging_lock(s3, lab.express_bucket, "tiny-jpg", "first", stale_after=1800) is None
        assert take_staging_lock(s3, lab.express_bucket, "tiny-jpg", "second", stale_after=1800) == "first"
        assert take_staging_lock(s3, lab.express_bucket, "tiny-jpg", "first", stale_after=1800) is None   # still ours
        execution = lab.start(EXPRESS_TRIAL, name="second")
        deadline = time.monotonic() + 30
        history = []
        while time.monotonic() < deadline and not any(e.get("stateEnteredEventDetails", {}).get("name") == "WaitExpressLock"
                                                      for e in history):
            time.sleep(0.05)
            history = lab.client("stepfunctions").get_execution_history(executionArn=execution, maxResults=1000)["events"]
        assert any(e.get("stateEnteredEventDetails", {}).get("name") == "WaitExpressLock" for e in history)
        release_staging_lock(s3, lab.express_bucket, "tiny-jpg", "first")
        finished = lab.wait(execution)
        assert finished.status == "SUCCEEDED", finished.cause
        staging = lab.results(finished)["express_staging"]
        assert staging["ready"] is True and "3 objects copied" in staging["reason"]
        with pytest.raises(s3.exceptions.ClientError):   # released once staged
            s3.head_object(Bucket=lab.express_bucket, Key="datasets/tiny-jpg.staging-lock.json")
