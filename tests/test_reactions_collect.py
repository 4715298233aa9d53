"""The workflow's Collect (dslab/workflow/collect.py): the planned jobs into result records, results.json and
results.csv in S3, and the summary the state machine carries. What a user reads from them: each job's status and
failure reason (the Run map's outcome, the stored Cause, why a job was skipped as Prepare found the data), its plan's
fields and its cost under the run's price overrides, the script's metrics from the job's output archive; what a
report of a stopped execution rebuilds from SageMaker (latest_attempt, finished_records). S3 and SageMaker are the
fault world's; an AWS error the stand-in does not answer is raised by a hand-built client. The expected values are
written here."""

from __future__ import annotations

import csv
import io
import json
import tarfile

import pytest
from botocore.exceptions import ClientError

from dslab.core.facts.prices import PriceTable
from dslab.workflow import collect, handlers

from .fault_world import BUCKET, run_function
from .fault_world import world  # noqa: F401

PRICES = {"instance_hourly": {"ml.m5.xlarge": 3.6}, "date": "2030-02-01", "source": "the team's negotiated prices"}


# ---- the world's jobs, archives and plans --------------------------------------------------------------------------
def _training_job(world, name: str, status: str, failure_reason: str | None = None) -> None:
    """A training job in the stand-in (145 billable seconds on one ml.m5.xlarge, reading s3://BUCKET/datasets/tiny/,
    writing under s3://BUCKET/output)."""
    world.training_job(name, status)
    if failure_reason is not None:
        from moto.sagemaker.models import sagemaker_backends
        sagemaker_backends["123456789012"]["us-east-1"].training_jobs[name].failure_reason = failure_reason


def _archive(members: dict[str, bytes | None]) -> bytes:
    """An output.tar.gz: a file per name (None: a directory)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            if body is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    return data.getvalue()


def _put(world, key: str, body: bytes, bucket: str = BUCKET) -> None:
    world.c["s3"].put_object(Bucket=bucket, Key=key, Body=body)


def _planned(index, name: str, mode: str = "File", **fields) -> dict:
    return {"index": index, "name": name, "mode": mode, "dataset": "tiny", "repeat": 0, "trial": "base",
            "storage": "standard", "instance_type": "ml.m5.xlarge", "instance_count": 1, "epochs": 1, "format": "jpg",
            "kept": False, "skip_reason": None, **fields}


def _plan(execution: str, jobs: list[dict], **extra) -> dict:
    return {"execution": execution, "experiment": {"name": "cx", "modes": ["File"]}, "experiment_hash": "ab" * 8,
            "environment": {"code_version": "v7", "bucket": BUCKET},
            "dataset_stats": {"tiny": {"files": 3, "bytes": 303, "format": "jpg",
                                       "written_at": "2030-01-01T00:00:00Z"}},
            "jobs": jobs, **extra}


def _run_collect(world, execution: str, plan: dict, event: dict, **env):
    world.put_json(f"results/{execution}/plan.json", plan)
    seen = run_function(world, handlers.collect, {
        "plan": {"bucket": BUCKET, "base": f"results/{execution}", "plan_key": f"results/{execution}/plan.json"},
        **event}, **env)
    assert seen.raised is None, seen.raised
    s3 = world.c["s3"]
    stored = s3.get_object(Bucket=BUCKET, Key=f"results/{execution}/results.json")
    table = s3.get_object(Bucket=BUCKET, Key=f"results/{execution}/results.csv")
    return (seen.result, json.loads(stored["Body"].read()), stored["ContentType"],
            table["Body"].read().decode(), table["ContentType"])


def _by_name(results: dict) -> dict[str, dict]:
    return {r["job_name"]: r for r in results["records"]}


# ---- Collect end to end ------------------------------------------------------------------------------------------
def test_collect_records_every_planned_job_and_stores_results_json_and_csv(world):
    """The Run map's outcomes (lanes of lists, a lane that is one outcome, junk and outcomes without an index ignored)
    meet the plan's jobs: a completed job's record with its script's metrics and its cost at the overridden price, a
    failed one with the stored Cause after the Run map's error name, the skipped ones with Prepare's reasons, a job
    the map returned nothing for as failed saying so, a retried job under its last attempt's name. results.json keeps
    what Prepare found and the price overrides; results.csv has a row per job; the summary says where results.json
    is."""
    execution = "cx-main"
    for name in ("cx-done", "cx-retry-a2", "cx-lone"):
        _training_job(world, name, "Completed")
    _training_job(world, "cx-fail", "Failed", failure_reason="")
    _put(world, "output/cx-done/output/output.tar.gz", _archive({"metrics.json": b'{"au_percent": 88.5}'}))
    _put(world, f"results/{execution}/failures/cx-fail.txt", b"AlgorithmError: boom")
    plan = _plan(execution, [
        _planned(0, "cx-done"), _planned(1, "cx-fail"), _planned(2, "cx-fsx", "FSx"),
        _planned(3, "cx-express", "FastFile", storage="express"), _planned(4, "cx-lost"),
        _planned("5", "cx-retry"), _planned(6, "cx-lone")], quotas={"concurrency": 2})
    lanes = [[{"index": 0, "name": "cx-done", "status": "Completed"},
              {"index": 1, "name": "cx-fail", "status": "Failed", "error": "States.TaskFailed"},
              {"name": "cx-stray", "status": "Completed"}],
             {"index": "6", "name": "cx-lone", "status": "Completed"},
             [{"index": 2, "name": "cx-fsx", "status": "Skipped", "error": "FsxDataNotReady"}, "junk",
              {"index": 3, "name": "cx-express", "status": "Skipped", "error": "ExpressNotStaged"}],
             [{"index": 5, "name": "cx-retry-a2", "status": "Completed"}], None]
    prepared = {"fsx_data": {"ready": False, "reason": "the import of /datasets/tiny is still running"},
                "express": {"done": False, "reason": "2 of 3 objects copied"},
                "staging": {"status": "SUCCEEDED", "task": "efs-sync"}}
    summary, results, json_type, table, csv_type = _run_collect(
        world, execution, plan, {"results": lanes, "prepared": prepared}, DSLAB_PRICES=json.dumps(PRICES))

    records = _by_name(results)
    assert [r["job_name"] for r in results["records"]] == [
        "cx-done", "cx-fail", "cx-fsx", "cx-express", "cx-lost", "cx-retry-a2", "cx-lone"]
    done = records["cx-done"]
    assert (done["status"], done["failure_reason"], done["mode"], done["dataset"], done["billable_seconds"]) == (
        "Completed", None, "File", "tiny", 145.0)
    assert done["metrics"]["au_percent"] == 88.5
    assert done["cost_usd"]["instance"] == 0.145   # 145 s at the overridden $3.60 an hour
    assert (records["cx-fail"]["status"], records["cx-fail"]["failure_reason"]) == (
        "Failed", "States.TaskFailed: AlgorithmError: boom")
    assert records["cx-fail"]["cost_usd"]["total"] == 0.14504   # four jobs ran, 145 s each: $0.58016 in all
    assert (records["cx-fsx"]["status"], records["cx-fsx"]["mode"], records["cx-fsx"]["failure_reason"]) == (
        "Skipped", "FSx",
        "FSx's S3 metadata import did not finish in time: the import of /datasets/tiny is still running")
    express = records["cx-express"]
    assert (express["status"], express["storage"], express["failure_reason"]) == (
        "Skipped", "express",
        "Copying the dataset into the S3 Express One Zone bucket did not finish: 2 of 3 objects copied")
    assert (records["cx-lost"]["status"], records["cx-lost"]["failure_reason"], records["cx-lost"]["cost_usd"]) == (
        "Failed", "the workflow returned no outcome for this job",
        {"instance": 0.0, "storage": 0.0, "requests": 0.0, "total": 0.0})
    assert (records["cx-retry-a2"]["status"], records["cx-retry-a2"]["cost_usd"]["instance"]) == ("Completed", 0.145)
    assert (records["cx-lone"]["status"], records["cx-lone"]["cost_usd"]["instance"]) == ("Completed", 0.145)

    assert {k: v for k, v in results.items() if k not in ("records", "summary")} == {
        "schema_version": 2, "experiment": {"name": "cx", "modes": ["File"]}, "backend": "aws", "execution": execution,
        "experiment_hash": "abababababababab", "code_version": "v7",
        "environment": {"code_version": "v7", "bucket": BUCKET},
        "prices": {"date": "2030-02-01", "source": "the team's negotiated prices", "region": "us-east-1",
                   "overrides": PRICES},
        "dataset_stats": {"tiny": {"files": 3, "bytes": 303}}, "fsx_capacity_gib": 1200, "lab": None,
        "fsx_storage_optimization": None, "quotas": {"concurrency": 2}, "staging": "SUCCEEDED",
        "express_staging": {"done": False, "reason": "2 of 3 objects copied"},
        "fsx_data": {"ready": False, "reason": "the import of /datasets/tiny is still running"}}
    message = ("7 jobs: 3 completed, 2 failed, 2 skipped; cx-fail (File, tiny): States.TaskFailed: AlgorithmError: boom"
               "; cx-lost (File, tiny): the workflow returned no outcome for this job")
    expected = {"total": 7, "completed": 3, "failed": 2, "skipped": 2, "cost_usd": 0.58016, "message": message}
    assert results["summary"] == expected
    assert summary == {**expected, "results_uri": f"s3://{BUCKET}/results/cx-main/results.json"}
    assert json_type == "application/json"

    assert csv_type == "text/csv"
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [(r["job_name"], r["status"], r["failure_reason"], r["cost_instance"]) for r in rows] == [
        ("cx-done", "Completed", "", "0.145"),
        ("cx-fail", "Failed", "States.TaskFailed: AlgorithmError: boom", "0.145"),
        ("cx-fsx", "Skipped", "FSx's S3 metadata import did not finish in time: the import of /datasets/tiny is "
                              "still running", "0.0"),
        ("cx-express", "Skipped", "Copying the dataset into the S3 Express One Zone bucket did not finish: 2 of 3 "
                                  "objects copied", "0.0"),
        ("cx-lost", "Failed", "the workflow returned no outcome for this job", "0.0"),
        ("cx-retry-a2", "Completed", "", "0.145"), ("cx-lone", "Completed", "", "0.145")]
    assert rows[0]["au_percent"] == "88.5" and rows[3]["storage"] == "express"


def test_collect_without_outcomes_prepared_or_overrides_records_every_job_as_failed_at_the_table_prices(world):
    """No outcomes at all (the map returned nothing) and nothing from Prepare: every job is failed saying the workflow
    returned no outcome for it; results.json has the plan's backend, FSx size, lab, storage optimization and quotas,
    the table's own prices with no overrides, and no staging, Express or FSx data findings."""
    execution = "cx-bare"
    lab = {"name": "the lab as deployed", "fsx_config": {"deployment_type": "SCRATCH_2", "capacity_gib": 2400}}
    plan = _plan(execution, [_planned(0, "cx-bare-0"), _planned(1, "cx-bare-1", "EFS")], backend="local",
                 fsx_capacity_gib=2400, lab=lab, fsx_storage_optimization={"mode": "SSD"}, quotas=None)
    summary, results, _, table, _ = _run_collect(world, execution, plan, {"results": None})
    assert [(r["job_name"], r["mode"], r["status"], r["failure_reason"]) for r in results["records"]] == [
        ("cx-bare-0", "File", "Failed", "the workflow returned no outcome for this job"),
        ("cx-bare-1", "EFS", "Failed", "the workflow returned no outcome for this job")]
    prices = results.pop("prices")
    assert (prices["date"], prices["region"], prices["overrides"]) == ("2026-11-01", "us-east-1", None)
    assert prices["source"].startswith("AWS public pricing pages (aws.amazon.com/sagemaker/pricing")
    assert {k: results[k] for k in ("backend", "fsx_capacity_gib", "lab", "fsx_storage_optimization", "quotas",
                                    "staging", "express_staging", "fsx_data")} == {
        "backend": "local", "fsx_capacity_gib": 2400, "lab": lab, "fsx_storage_optimization": {"mode": "SSD"},
        "quotas": None, "staging": None, "express_staging": None, "fsx_data": None}
    assert (summary["total"], summary["failed"], summary["cost_usd"]) == (2, 2, 0.0)
    assert summary["results_uri"] == f"s3://{BUCKET}/results/cx-bare/results.json"
    assert table.splitlines()[1].startswith("cx-bare-0,File,tiny,0,Failed,ml.m5.xlarge,1,,,0.0,0.0,0.0,")


def test_results_document_keeps_the_staging_status_as_prepare_reported_it(world):
    """Prepare's EFS staging is a status, or a record whose status is kept; none when it did not say."""
    plan = _plan("cx-doc", [])
    prices = PriceTable.with_overrides(None)
    assert collect.results_document(plan, [], prices, None, {"staging": "SKIPPED"})["staging"] == "SKIPPED"
    assert collect.results_document(plan, [], prices, None, {"staging": {"status": "FAILED"}})["staging"] == "FAILED"
    assert collect.results_document(plan, [], prices, None, {"staging": {"task": "x"}})["staging"] is None
    bare = collect.results_document(plan, [], prices)
    assert (bare["staging"], bare["express_staging"], bare["fsx_data"], bare["prices"]["overrides"]) == (
        None, None, None, None)
    assert bare["summary"] == {"total": 0, "completed": 0, "failed": 0, "skipped": 0, "cost_usd": 0.0,
                               "message": "0 jobs: 0 completed, 0 failed, 0 skipped"}


# ---- flatten_outcomes --------------------------------------------------------------------------------------------
def test_flatten_outcomes_reads_lanes_of_lists_and_single_outcomes_by_index():
    """Each lane's outcomes by their job index (an index given as text too); a lane that is one outcome counts; junk,
    outcomes without an index and empty lanes are passed over; no lanes at all is no outcome."""
    assert collect.flatten_outcomes([[{"index": 0, "status": "Completed"}, {"status": "Failed"}],
                                     {"index": "2", "status": "Skipped"}, ["junk", 7, None], [], None]) == {
        0: {"index": 0, "status": "Completed"}, 2: {"index": "2", "status": "Skipped"}}
    assert collect.flatten_outcomes(None) == {}
    assert collect.flatten_outcomes([{"status": "Failed"}]) == {}


# ---- job_record ----------------------------------------------------------------------------------------------------
BIG = {"big": {"files": 1000000, "bytes": 100000000000, "format": "jpg"}}


def _record(world, job: dict, outcome: dict, plan: dict | None = None, prepared=None, prices=None,
            base: str = "results/jr"):
    plan = plan or _plan("jr", [job], dataset_stats=BIG)
    return collect.job_record(world.c["s3"], world.c["sagemaker"], BUCKET, base, plan, job, outcome,
                              prices or PriceTable.with_overrides(None), prepared)


def test_a_finished_jobs_record_takes_the_plans_mode_dataset_trial_storage_and_checkpoint_and_prices_its_reads(world):
    """The plan names what the job was (its mode, dataset, repeat, trial, S3 Express storage, checkpoint target and
    restore) whatever its channel looks like; the dataset's files and bytes and the job's epochs price its reads."""
    _training_job(world, "jr-rich", "Completed")
    job = _planned(0, "jr-rich", "FastFile", dataset="big", repeat=2, epochs=4, trial="t1", storage="express",
                   checkpoint_target="s3", checkpoint_restore=True)
    record = _record(world, job, {"status": "Completed", "name": "jr-rich"})
    assert {k: record[k] for k in ("job_name", "mode", "dataset", "repeat", "status", "failure_reason", "trial",
                                   "storage", "checkpoint_target", "checkpoint_restore")} == {
        "job_name": "jr-rich", "mode": "FastFile", "dataset": "big", "repeat": 2, "status": "Completed",
        "failure_reason": None, "trial": "t1", "storage": "express", "checkpoint_target": "s3",
        "checkpoint_restore": True}
    # 1,000,000 GETs a pass for 4 epochs at Express's request price, its GB retrieval and the staged copy's storage
    assert record["cost_usd"] == {"instance": 0.009264, "storage": 0.000646, "requests": 0.36, "total": 0.369909}


def test_a_file_mode_job_read_its_dataset_once(world):
    """File mode downloads the whole channel: the record's bytes read are the dataset's bytes as Plan found them."""
    _training_job(world, "jr-file", "Completed")
    record = _record(world, _planned(0, "jr-file", dataset="big"), {"status": "Completed"})
    assert (record["job_name"], record["dataset"], record["metrics"]["bytes_read"]) == ("jr-file", "big", 100000000000)
    assert record["cost_usd"] == {"instance": 0.009264, "storage": 3.9e-05, "requests": 0.4, "total": 0.409303}


def test_an_fsx_jobs_record_prices_the_file_system_the_plan_recorded(world):
    """FSx's uptime while the job ran: Scratch 2 at the plan's capacity (1200 GiB when it names none), or the FSx the
    plan's lab recorded."""
    _training_job(world, "jr-fsx", "Completed")
    job = _planned(0, "jr-fsx", "FSx")
    default = _record(world, job, {"status": "Completed"}, plan=_plan("jr", [job]))
    larger = _record(world, job, {"status": "Completed"}, plan=_plan("jr", [job], fsx_capacity_gib=2400))
    lab = {"fsx_config": {"deployment_type": "PERSISTENT_2", "capacity_gib": 2400, "mbps_per_tib": 250}}
    persistent = _record(world, job, {"status": "Completed"}, plan=_plan("jr", [job], lab=lab))
    assert (default["mode"], default["cost_usd"]["storage"], larger["cost_usd"]["storage"],
            persistent["cost_usd"]["storage"]) == ("FSx", 0.009308, 0.018577, 0.027847)


def _skipped(**fields) -> dict:
    """A record of a job that never ran, as results.json has it."""
    return {"schema_version": 2, "job_name": "js-0", "mode": "FSx", "dataset": "tiny", "repeat": 1, "status": "Skipped",
            "failure_reason": "skipped", "instance_type": "ml.p3.2xlarge", "instance_count": 2,
            "billable_seconds": None, "training_time_seconds": None, "phases": {},
            "breakdown": {"downloading": 0.0, "training": 0.0, "other": 0.0},
            "metrics": {"samples_per_second": None, "mb_per_second": None, "au_percent": None,
                        "end_to_end_efficiency_percent": None, "time_to_first_batch_seconds": None,
                        "epoch_seconds": []},
            "cost_usd": {"instance": 0.0, "storage": 0.0, "requests": 0.0, "total": 0.0}, "trial": "t2", **fields}


SKIPPED_JOB = _planned(0, "js-0", "FSx", repeat=1, trial="t2", instance_type="ml.p3.2xlarge", instance_count=2,
                       checkpoint_target="fsx", checkpoint_restore=True)


def test_a_skipped_job_says_why_plan_skipped_it(world):
    """A job Plan skipped: its record names the plan's reason, or just "skipped"; the outcome's name is the job's."""
    planned = dict(SKIPPED_JOB, skip_reason="FSx for Lustre is not deployed (its stack is down)")
    assert _record(world, planned, {"status": "Skipped", "name": "js-0-a2"}) == _skipped(
        job_name="js-0-a2", failure_reason="FSx for Lustre is not deployed (its stack is down)",
        checkpoint_target="fsx", checkpoint_restore=True)
    bare = _planned(0, "js-1", "EFS", storage="express")
    assert _record(world, bare, {"status": "Skipped"}) == _skipped(
        job_name="js-1", mode="EFS", repeat=0, instance_type="ml.m5.xlarge", instance_count=1, trial="base",
        storage="express")


@pytest.mark.parametrize("prepared, reason", [
    ({"fsx_data": {"ready": False, "reason": "3 of 5 imports done"}},
     "FSx's S3 metadata import did not finish in time: 3 of 5 imports done"),
    ({"fsx_data": {"ready": False, "reason": ""}}, "FSx's S3 metadata import did not finish in time"),
    ({"fsx_data": None, "express": {"reason": "copied"}}, "FSx's S3 metadata import did not finish in time"),
    (None, "FSx's S3 metadata import did not finish in time")])
def test_an_fsx_job_skipped_for_its_data_says_what_prepare_found(world, prepared, reason):
    """FsxDataNotReady: FSx's import did not finish, with CheckFsxData's reason where it gave one."""
    record = _record(world, SKIPPED_JOB, {"status": "Skipped", "error": "FsxDataNotReady"}, prepared=prepared)
    assert (record["job_name"], record["status"], record["failure_reason"]) == ("js-0", "Skipped", reason)


@pytest.mark.parametrize("prepared, reason", [
    ({"express": {"done": False, "reason": "timed out after 40 minutes"}},
     "Copying the dataset into the S3 Express One Zone bucket did not finish: timed out after 40 minutes"),
    ({"express": {"done": False}}, "Copying the dataset into the S3 Express One Zone bucket did not finish"),
    ({"express": None, "fsx_data": {"reason": "late"}},
     "Copying the dataset into the S3 Express One Zone bucket did not finish"),
    (None, "Copying the dataset into the S3 Express One Zone bucket did not finish")])
def test_an_express_job_skipped_for_its_staging_says_what_prepare_found(world, prepared, reason):
    """ExpressNotStaged: the copy into the directory bucket did not finish, with StageExpress's reason where given."""
    job = _planned(0, "js-x", "FastFile", storage="express")
    record = _record(world, job, {"status": "Skipped", "error": "ExpressNotStaged"}, prepared=prepared)
    assert (record["status"], record["storage"], record["failure_reason"]) == ("Skipped", "express", reason)


def test_a_job_skipped_for_another_error_keeps_the_plans_reason(world):
    """A Skipped outcome whose error is neither data check's: the plan's own reason."""
    job = dict(SKIPPED_JOB, skip_reason="EFS is not deployed")
    record = _record(world, job, {"status": "Skipped", "error": "EfsStagingFailed"},
                     prepared={"fsx_data": {"reason": "late"}, "express": {"reason": "late"}})
    assert (record["status"], record["failure_reason"]) == ("Skipped", "EFS is not deployed")


def test_a_job_never_created_is_failed_with_the_workflows_reason(world):
    """No training job of that name (staging failed, the API refused the request): a failed record of the plan's
    fields, nothing billed, whose reason is the stored Cause or what the recorded error means."""
    record = _record(world, SKIPPED_JOB, {"status": "Failed", "name": "js-0", "error": "EfsStagingFailed"},
                     base="results/jr-never")
    assert record == _skipped(status="Failed", checkpoint_target="fsx", checkpoint_restore=True, failure_reason=(
        "Copying the dataset from S3 to EFS (DataSync) failed; see the DataSync task's log group"))
    _put(world, "results/jr-never/failures/js-0.txt", b'{"errorMessage": "ValidationException: bad image"}')
    stored = _record(world, SKIPPED_JOB, {"status": "Failed", "error": "States.TaskFailed"}, base="results/jr-never")
    assert (stored["status"], stored["failure_reason"]) == ("Failed", "ValidationException: bad image")


def _client_error(code: str, message: str, operation: str, status: int = 400) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, operation)


class SageMaker:
    """The stand-in's SageMaker, refusing DescribeTrainingJob for the names given."""

    def __init__(self, real, refused: set[str], error: ClientError):
        self.real, self.refused, self.error, self.exceptions = real, refused, error, real.exceptions
        self.asked: list[str] = []

    def describe_training_job(self, TrainingJobName):
        self.asked.append(TrainingJobName)
        if TrainingJobName in self.refused:
            raise self.error
        return self.real.describe_training_job(TrainingJobName=TrainingJobName)


DENIED = _client_error("AccessDeniedException", "not authorized to perform sagemaker:DescribeTrainingJob",
                       "DescribeTrainingJob")


def test_a_job_not_described_fails_collect_rather_than_record_it_as_never_created(world):
    """DescribeTrainingJob refused (not "not found"): the error is raised; the job is not recorded as never created."""
    sagemaker = SageMaker(world.c["sagemaker"], {"js-0"}, DENIED)
    with pytest.raises(ClientError, match="AccessDeniedException"):
        collect.job_record(world.c["s3"], sagemaker, BUCKET, "results/jr", _plan("jr", [SKIPPED_JOB]), SKIPPED_JOB,
                           {"status": "Failed"}, PriceTable.with_overrides(None))


def test_a_failed_jobs_own_reason_stands_and_an_empty_one_is_the_workflows(world):
    """SageMaker's FailureReason is the record's; where SageMaker gave none, the stored Cause; a completed job has no
    failure reason whatever is stored."""
    _training_job(world, "jf-own", "Failed", failure_reason="CapacityError: Unable to provision requested ML compute")
    _training_job(world, "jf-empty", "Failed", failure_reason="")
    _training_job(world, "jf-ok", "Completed")
    for name in ("jf-own", "jf-empty", "jf-ok"):
        _put(world, f"results/jf/failures/{name}.txt", b"AlgorithmError: exit code 1")
    outcome = {"status": "Failed", "error": "States.TaskFailed"}
    own, empty, ok = (_record(world, _planned(0, name), outcome, base="results/jf")
                      for name in ("jf-own", "jf-empty", "jf-ok"))
    assert (own["status"], own["failure_reason"]) == (
        "Failed", "CapacityError: Unable to provision requested ML compute")
    assert (empty["status"], empty["failure_reason"]) == ("Failed", "States.TaskFailed: AlgorithmError: exit code 1")
    assert (ok["status"], ok["failure_reason"]) == ("Completed", None)


# ---- _reason -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cause, error, reason", [
    (b'{"FailureReason": "ClientError: Data download failed", "errorMessage": "x"}', "States.TaskFailed",
     "ClientError: Data download failed"),
    (b'{"errorMessage": "Task timed out after 900.00 seconds"}', "States.TaskFailed",
     "Task timed out after 900.00 seconds"),
    (b'{"FailureReason": "", "Cause": "none"}', "States.TaskFailed", '{"FailureReason": "", "Cause": "none"}'),
    (b"[1, 2]", "States.TaskFailed", "States.TaskFailed: [1, 2]"),
    (b"AlgorithmError: boom", "States.TaskFailed", "States.TaskFailed: AlgorithmError: boom"),
    (b"AlgorithmError: boom", None, "failed: AlgorithmError: boom"),
    (b"bad \xff byte", "SageMaker.ValidationException", "SageMaker.ValidationException: bad \ufffd byte"),
    (b"", "EfsStagingFailed",
     "Copying the dataset from S3 to EFS (DataSync) failed; see the DataSync task's log group")])
def test_the_reason_is_the_stored_cause(world, cause, error, reason):
    """The Cause the state machine stored: a .sync failure's DescribeTrainingJob (its FailureReason) or a Lambda's
    error (its errorMessage) as JSON, else the text after the recorded error name; an empty one is no Cause."""
    _put(world, "results/rs/failures/rs-job.txt", cause)
    outcome = {"status": "Failed", "error": error}
    assert collect._reason(world.c["s3"], BUCKET, "results/rs", "rs-job", outcome) == reason


@pytest.mark.parametrize("error, reason", [
    ("EfsStagingFailed", "Copying the dataset from S3 to EFS (DataSync) failed; see the DataSync task's log group"),
    ("FsxDataNotReady", "FSx's S3 metadata import did not finish in time"),
    ("ExpressNotStaged", "Copying the dataset into the S3 Express One Zone bucket did not finish"),
    ("States.Timeout", "States.Timeout"), (None, "failed"), ("", "failed")])
def test_without_a_stored_cause_the_reason_is_what_the_recorded_error_means(world, error, reason):
    """No Cause stored (or S3 not answering for it): the recorded error's meaning, else its name, else "failed"."""
    s3 = world.c["s3"]
    assert collect._reason(s3, BUCKET, "results/rs", "rs-none", {"status": "Failed", "error": error}) == reason
    assert collect._reason(s3, "cx-no-such-bucket", "results/rs", "rs-job", {"error": error}) == reason


# ---- _script_metrics -----------------------------------------------------------------------------------------------
def _describe(name: str, output: str | None = f"s3://{BUCKET}/sm-out/", count=None) -> dict:
    return {"TrainingJobName": name, **({"OutputDataConfig": {"S3OutputPath": output}} if output is not None else {}),
            **({"ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": count}} if count != "none" else {})}


def test_the_scripts_metrics_come_from_the_jobs_output_archive(world):
    """metrics.json from <output>/<job>/output/output.tar.gz (the output path with or without a trailing slash, a
    folder in it, or the bucket itself); the archive's other files and its folders (one named like a host's metrics
    file too) are not metrics."""
    s3 = world.c["s3"]
    _put(world, "sm-out/sm-one/output/output.tar.gz", _archive({
        "data": None, "metrics-old.json": None, "metrics.json": b'{"au_percent": 71.5, "samples": 640}',
        "model.pt": b"\0\1"}))
    assert collect._script_metrics(s3, _describe("sm-one", count=1)) == {"au_percent": 71.5, "samples": 640}
    assert collect._script_metrics(s3, _describe("sm-one", f"s3://{BUCKET}/sm-out", count="none")) == {
        "au_percent": 71.5, "samples": 640}
    _put(world, "X-runs/2030-X/sm-deep/output/output.tar.gz", _archive({"metrics.json": b'{"au_percent": 33.0}'}))
    assert collect._script_metrics(s3, _describe("sm-deep", f"s3://{BUCKET}/X-runs/2030-X/", count=1)) == {
        "au_percent": 33.0}
    _put(world, "sm-root/output/output.tar.gz", _archive({"./metrics.json": b'{"au_percent": 12.0}'}))
    assert collect._script_metrics(s3, _describe("sm-root", f"s3://{BUCKET}/", count=1)) == {"au_percent": 12.0}
    assert collect._script_metrics(s3, _describe("sm-root", f"s3://{BUCKET}", count=1)) == {"au_percent": 12.0}


def test_a_clusters_metrics_are_every_hosts(world):
    """On a cluster each host wrote metrics-<host>.json: the leader's figures and the cluster's; one host's file on a
    single instance is that host's figures alone, and one of two hosts' files is a cluster with a host missing."""
    s3 = world.c["s3"]
    _put(world, "sm-out/sm-pair/output/output.tar.gz", _archive({
        "metrics-algo-1.json": b'{"au_percent": 90.0, "samples": 100, "samples_per_second": 10.0, '
                               b'"mb_per_second": 1.5}',
        "metrics-algo-2.json": b'{"au_percent": 80.0, "samples": 120, "samples_per_second": 12.0, '
                               b'"mb_per_second": 2.5}'}))
    pair = collect._script_metrics(s3, _describe("sm-pair", count=2))
    assert pair == {"au_percent": 90.0, "samples": 100, "samples_per_second": 10.0, "mb_per_second": 1.5, "cluster": {
        "hosts": 2, "hosts_reported": 2, "samples": 220, "samples_per_second": 22.0, "mb_per_second": 4.0,
        "au_percent_per_host": {"algo-1": 90.0, "algo-2": 80.0}, "au_percent_min": 80.0, "au_percent_per_epoch": None,
        "au_percent": 85.0}}
    _put(world, "sm-out/sm-half/output/output.tar.gz", _archive({"metrics-algo-1.json": b'{"au_percent": 90.0}'}))
    assert collect._script_metrics(s3, _describe("sm-half", count="none")) == {"au_percent": 90.0}
    assert collect._script_metrics(s3, _describe("sm-half", count=None)) == {"au_percent": 90.0}
    assert collect._script_metrics(s3, _describe("sm-half", count=2))["cluster"]["hosts"] == 2


def test_no_archive_or_an_unreadable_one_is_no_metrics(world):
    """No output path in S3, no archive (a job that failed before writing one), or an archive that is not one (or cut
    short): the record has no script metrics, and Collect goes on."""
    s3 = world.c["s3"]
    assert collect._script_metrics(s3, {"TrainingJobName": "sm-one"}) is None
    assert collect._script_metrics(s3, _describe("sm-one", "file:///opt/ml/output")) is None
    assert collect._script_metrics(s3, _describe("sm-missing", count=1)) is None
    _put(world, "sm-out/sm-junk/output/output.tar.gz", b"this is not a gzip file")
    assert collect._script_metrics(s3, _describe("sm-junk", count=1)) is None
    whole = _archive({"metrics.json": b'{"au_percent": 71.5}' * 200})
    _put(world, "sm-out/sm-cut/output/output.tar.gz", whole[: len(whole) // 2])
    assert collect._script_metrics(s3, _describe("sm-cut", count=1)) is None


def test_an_archive_s3_will_not_give_fails_collect(world):
    """S3 answering anything but a missing object (here: the bucket is gone): raised, not recorded as no metrics."""
    with pytest.raises(ClientError, match="NoSuchBucket"):
        collect._script_metrics(world.c["s3"], _describe("sm-one", "s3://cx-no-such-bucket/out", count=1))


# ---- a stopped execution's report: latest_attempt, finished_records ------------------------------------------------
def test_the_latest_attempt_is_the_last_retry_that_exists(world):
    """The Run map retries a capacity error as <name>-a2, then -a3 (three attempts in all): the last one SageMaker
    has, looking no further than the first missing; None when the job was never created."""
    for name in ("la-one", "la-all", "la-all-a2", "la-all-a3", "la-all-a4", "la-gap", "la-gap-a3"):
        _training_job(world, name, "Failed" if name != "la-all-a4" else "Completed")
    sagemaker = world.c["sagemaker"]
    assert collect.latest_attempt(sagemaker, "la-one")["TrainingJobName"] == "la-one"
    assert collect.latest_attempt(sagemaker, "la-all")["TrainingJobName"] == "la-all-a3"
    assert collect.latest_attempt(sagemaker, "la-gap")["TrainingJobName"] == "la-gap"
    assert collect.latest_attempt(sagemaker, "la-never") is None


def test_an_attempt_not_described_is_raised(world):
    """A refused DescribeTrainingJob of a retry is an error, not the end of the attempts."""
    _training_job(world, "la-denied", "Failed")
    sagemaker = SageMaker(world.c["sagemaker"], {"la-denied-a2"}, DENIED)
    with pytest.raises(ClientError, match="AccessDeniedException"):
        collect.latest_attempt(sagemaker, "la-denied")
    assert sagemaker.asked == ["la-denied", "la-denied-a2"]


def test_finished_records_are_the_ended_jobs_last_attempts_in_plan_order(world):
    """What an execution stopped before Collect did finish: each planned job's last attempt that has ended (completed,
    failed, stopped), in the plan's order, its reason read from the execution's stored Cause; not the jobs Plan
    skipped, never created or still running."""
    for name, status in (("fr-skip", "Completed"), ("fr-fail", "Failed"), ("fr-live", "InProgress"),
                         ("fr-done", "Failed"), ("fr-done-a2", "Completed"), ("fr-stop", "Stopped"),
                         ("fr-bare", "Failed")):
        _training_job(world, name, status, failure_reason="" if status == "Failed" else None)
    _put(world, "results/fr-exec/failures/fr-fail.txt", b'{"FailureReason": "ClientError: out of disk space"}')
    plan = _plan("fr-exec", [
        _planned(0, "fr-skip", skip_reason="FSx for Lustre is not deployed"), _planned(1, "fr-fail"),
        _planned(2, "fr-never"), _planned(3, "fr-live"), _planned(4, "fr-done", "FastFile"), _planned(5, "fr-stop"),
        _planned(6, "fr-bare")])
    records = collect.finished_records(world.c["s3"], world.c["sagemaker"], BUCKET, plan, PriceTable.with_overrides(
        {"instance_hourly": {"ml.m5.xlarge": 7.2}}))
    assert [(r["job_name"], r["mode"], r["status"], r["failure_reason"], r["cost_usd"]["instance"])
            for r in records] == [
        ("fr-fail", "File", "Failed", "ClientError: out of disk space", 0.29),
        ("fr-done-a2", "FastFile", "Completed", None, 0.29), ("fr-stop", "File", "Stopped", None, 0.29),
        ("fr-bare", "File", "Failed", "failed", 0.29)]
