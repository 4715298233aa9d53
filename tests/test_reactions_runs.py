"""`dslab run`, `dslab status` (with and without --wait) and `dslab report EXECUTION` (dslab/cli/runs.py) as a user
sees them: the StartExecution request and the lines printed, the progress record (jobs by state, spend, elapsed, the
results URI) and which DescribeTrainingJob calls a look makes, a throttled look tried again five times at most, the
partial results of an execution that never wrote results.json. AWS is botocore's Stubber on real clients of the
region asked (a client of another region is not there), or the fault world's stand-in for the report. The expected
values are written here."""

from __future__ import annotations

import datetime as dt
import io
import json
import time
import types

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError, NoCredentialsError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from dslab.cli import runs

from .fault_world import BUCKET as WORLD_BUCKET, REGION as WORLD_REGION, RUNNING, SM_NAME, arn, run_cli
from .fault_world import world  # noqa: F401

REGION = "eu-west-1"
BUCKET = "lab-data-eu"
MACHINE = "arn:aws:states:eu-west-1:123456789012:stateMachine:DataSourceLab-Benchmark"
EXECUTION = "arn:aws:states:eu-west-1:123456789012:execution:DataSourceLab-Benchmark:exp-7"
NOW = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
_SESSION = botocore.session.get_session()


# ---- the stubbed cloud ------------------------------------------------------------------------------------------
class Cloud:
    """boto3.client answers a stubbed client of the service and region given; any other is not there (KeyError)."""

    def __init__(self, monkeypatch):
        self.clients: dict = {}
        self.made: list = []

        def client(service_name=None, region_name=None, **kwargs):
            self.made.append((service_name, region_name))
            if region_name == REGION and service_name in ("s3", "sagemaker", "stepfunctions"):
                self.stub(service_name)   # a client that answers nothing unless a test stubs it
            return self.clients[(service_name, region_name)][0]
        monkeypatch.setattr(boto3, "client", client)

    def stub(self, service: str, region: str = REGION) -> Stubber:
        if (service, region) not in self.clients:
            made = _SESSION.create_client(service, region_name=region, aws_access_key_id="testing",
                                          aws_secret_access_key="testing")
            stubber = Stubber(made)
            stubber.activate()
            self.clients[(service, region)] = (made, stubber)
        return self.clients[(service, region)][1]

    def put(self, service: str, fake, region: str = REGION) -> None:
        self.clients[(service, region)] = (fake, None)

    def done(self) -> None:
        for _, stubber in self.clients.values():
            if stubber is not None:
                stubber.assert_no_pending_responses()


class Clock:
    """The module's clock: time stands at NOW, sleeps are recorded, not waited."""

    def __init__(self, monkeypatch):
        self.sleeps: list = []
        self.now = NOW.timestamp()
        fake = types.SimpleNamespace(time=lambda: self.now, sleep=self.sleeps.append, monotonic=lambda: 1000.0,
                                     strftime=time.strftime, gmtime=lambda *a: NOW.timetuple())
        monkeypatch.setattr(runs, "time", fake)


@pytest.fixture
def cloud(monkeypatch):
    made = Cloud(monkeypatch)
    yield made


@pytest.fixture
def clock(monkeypatch):
    return Clock(monkeypatch)


def _body(document) -> StreamingBody:
    raw = json.dumps(document).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def _execution(status: str = "RUNNING", name: str | None = "exp-7", started: float = 5400, stopped: float | None = None,
               **extra) -> dict:
    answer = {"executionArn": EXECUTION, "stateMachineArn": MACHINE, "status": status,
              "startDate": NOW - dt.timedelta(seconds=started), **extra}
    if name:
        answer["name"] = name
    if stopped is not None:
        answer["stopDate"] = answer["startDate"] + dt.timedelta(seconds=stopped)
    return answer


def _job(name: str, status: str, instance: str = "ml.p3.2xlarge", count: int = 1, billable: int | None = None,
         started: float | None = None, phase: str | None = None) -> dict:
    answer = {"TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:eu-west-1:123456789012:training-job/{name}",
              "ModelArtifacts": {"S3ModelArtifacts": f"s3://{BUCKET}/output/{name}/model.tar.gz"},
              "TrainingJobStatus": status, "SecondaryStatus": phase or status,
              "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
              "ResourceConfig": {"InstanceType": instance, "InstanceCount": count, "VolumeSizeInGB": 5},
              "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": NOW - dt.timedelta(hours=2)}
    if billable is not None:
        answer["BillableTimeInSeconds"] = billable
    if started is not None:
        answer["TrainingStartTime"] = NOW - dt.timedelta(seconds=started)
    return answer


def _describe(cloud, name: str, answer: dict | None) -> None:
    """DescribeTrainingJob of ``name``: its answer, or SageMaker's "not found" (not created yet)."""
    sagemaker = cloud.stub("sagemaker")
    if answer is None:
        sagemaker.add_client_error("describe_training_job", service_error_code="ValidationException",
                                   service_message="Requested resource not found.", http_status_code=400,
                                   expected_params={"TrainingJobName": name})
    else:
        sagemaker.add_response("describe_training_job", answer, {"TrainingJobName": name})


def _plan(cloud, jobs: list[dict], name: str = "exp-7", **extra) -> None:
    cloud.stub("s3").add_response("get_object", {"Body": _body({"jobs": jobs, **extra})},
                                  {"Bucket": BUCKET, "Key": f"results/{name}/plan.json"})


PLANNED = [{"name": "x-0", "skip_reason": "FSx is down"}, {"name": "x-1"}, {"name": "x-2"}, {"name": "x-3"},
           {"name": "x-4", "skip_reason": "EFS is down"}, {"name": "x-5"}, {"name": "x-6"}, {"name": "x-7"},
           {"name": "x-8"}]


def _first_look(cloud) -> None:
    cloud.stub("stepfunctions").add_response("describe_execution", _execution(), {"executionArn": EXECUTION})
    _plan(cloud, PLANNED, quotas={"concurrency": 3})
    _describe(cloud, "x-1", _job("x-1", "Completed", billable=3600))
    _describe(cloud, "x-2", _job("x-2", "InProgress", count=2, started=1800, phase="Training"))
    _describe(cloud, "x-3", None)
    _describe(cloud, "x-5", None)
    _describe(cloud, "x-6", _job("x-6", "Failed", instance="ml.x99.large", billable=100))
    _describe(cloud, "x-7", _job("x-7", "Stopped", billable=360))
    _describe(cloud, "x-8", _job("x-8", "Completed", billable=1800))


# ---- describe_progress ------------------------------------------------------------------------------------------
def test_a_look_counts_jobs_by_state_prices_what_ran_and_names_the_results(cloud, clock):
    """Skipped jobs (the plan's skip_reason) and jobs not created yet (Pending) are counted without spend; a job
    still running is costed from its start on every instance; an instance the price table lacks is left out and
    named; ended jobs are kept so the next look does not describe them again."""
    _first_look(cloud)
    ended: dict = {}
    state = runs.describe_progress(EXECUTION, REGION, BUCKET, ended)
    assert state == {
        "execution": EXECUTION, "status": "RUNNING",
        "jobs": {"Skipped": 2, "Completed": 2, "InProgress": 1, "Pending": 2, "Failed": 1, "Stopped": 1},
        "spend_usd": 9.945, "unpriced_instance_types": ["ml.x99.large"], "elapsed_seconds": 5400,
        "results": "s3://lab-data-eu/results/exp-7/results.json", "error": None, "cause": None, "total": 9,
        "concurrency": 3,
        "job_states": [{"name": "x-1", "status": "Completed", "phase": "Completed"},
                       {"name": "x-2", "status": "InProgress", "phase": "Training"},
                       {"name": "x-6", "status": "Failed", "phase": "Failed"},
                       {"name": "x-7", "status": "Stopped", "phase": "Stopped"},
                       {"name": "x-8", "status": "Completed", "phase": "Completed"}]}
    assert ended == {
        "x-1": {"name": "x-1", "status": "Completed", "phase": "Completed", "spend": 3.825, "unpriced": None},
        "x-6": {"name": "x-6", "status": "Failed", "phase": "Failed", "spend": 0.0, "unpriced": "ml.x99.large"},
        "x-7": {"name": "x-7", "status": "Stopped", "phase": "Stopped", "spend": 0.3825, "unpriced": None},
        "x-8": {"name": "x-8", "status": "Completed", "phase": "Completed", "spend": 1.9125, "unpriced": None}}
    cloud.done()
    assert ("s3", REGION) in cloud.made and ("sagemaker", REGION) in cloud.made


def test_the_next_look_describes_only_the_jobs_not_yet_ended_and_keeps_the_ended_ones_spend(cloud, clock):
    _first_look(cloud)
    ended: dict = {}
    runs.describe_progress(EXECUTION, REGION, BUCKET, ended)
    cloud.stub("stepfunctions").add_response("describe_execution", _execution("SUCCEEDED", stopped=4000),
                                             {"executionArn": EXECUTION})
    _plan(cloud, PLANNED, quotas={"concurrency": 3})
    # BillableTimeInSeconds is one instance's: an hour on each of 2 ml.p3.2xlarge ($3.825/h) is 2 x $3.825 = $7.65.
    _describe(cloud, "x-2", _job("x-2", "Completed", count=2, billable=3600))
    _describe(cloud, "x-3", _job("x-3", "Stopped", billable=36))
    _describe(cloud, "x-5", None)
    state = runs.describe_progress(EXECUTION, REGION, BUCKET, ended)
    cloud.done()
    # x-1 3.825 + x-2 7.65 + x-3 3.825 x 36/3600 = 0.03825 + x-7 0.3825 + x-8 1.9125 = 13.80825
    assert (state["status"], state["jobs"], state["spend_usd"], state["elapsed_seconds"]) == (
        "SUCCEEDED", {"Skipped": 2, "Completed": 3, "Stopped": 2, "Pending": 1, "Failed": 1}, 13.8083, 4000)
    assert sorted(ended) == ["x-1", "x-2", "x-3", "x-6", "x-7", "x-8"]


def test_a_look_without_a_kept_record_describes_every_job_each_time(cloud, clock):
    """`dslab status` (no --wait) keeps nothing between looks: a job that ended is described again."""
    for _ in range(2):
        cloud.stub("stepfunctions").add_response("describe_execution", _execution(), {"executionArn": EXECUTION})
        _plan(cloud, [{"name": "x-1"}])
        _describe(cloud, "x-1", _job("x-1", "Completed", billable=3600))
        assert runs.describe_progress(EXECUTION, REGION, BUCKET)["jobs"] == {"Completed": 1}
    cloud.done()


def test_a_failed_execution_without_a_name_or_bucket_says_its_error_and_where_results_go(cloud, clock):
    """The execution's name is the ARN's last part where DescribeExecution sends none; without the lab's bucket no
    plan is read (no job, concurrency 1) and the results URI says <bucket>; elapsed runs to the stop date."""
    cloud.stub("stepfunctions").add_response(
        "describe_execution", _execution("FAILED", name=None, started=900, stopped=300, error="States.TaskFailed",
                                         cause="Plan: the dataset has no stats file"), {"executionArn": EXECUTION})
    state = runs.describe_progress(EXECUTION, REGION, None)
    cloud.done()
    assert state == {"execution": EXECUTION, "status": "FAILED", "jobs": {}, "spend_usd": 0.0,
                     "unpriced_instance_types": [], "elapsed_seconds": 300,
                     "results": "s3://<bucket>/results/exp-7/results.json", "error": "States.TaskFailed",
                     "cause": "Plan: the dataset has no stats file", "total": 0, "concurrency": 1, "job_states": []}


def test_the_plan_names_the_execution_by_its_described_name_and_a_missing_quota_is_one_at_a_time(cloud, clock):
    cloud.stub("stepfunctions").add_response("describe_execution", _execution(name="named-run"),
                                             {"executionArn": EXECUTION})
    _plan(cloud, [{"name": "x-1"}], name="named-run", quotas=None)
    _describe(cloud, "x-1", _job("x-1", "InProgress", billable=72))
    state = runs.describe_progress(EXECUTION, REGION, BUCKET)
    cloud.done()
    assert (state["concurrency"], state["results"], state["spend_usd"], state["total"]) == (
        1, "s3://lab-data-eu/results/named-run/results.json", 0.0765, 1)


def test_a_plan_not_written_yet_is_no_jobs_and_another_s3_error_is_raised(cloud, clock):
    stepfunctions = cloud.stub("stepfunctions")
    stepfunctions.add_response("describe_execution", _execution(), {"executionArn": EXECUTION})
    cloud.stub("s3").add_client_error("get_object", "NoSuchKey", "The specified key does not exist.", 404,
                                      expected_params={"Bucket": BUCKET, "Key": "results/exp-7/plan.json"})
    state = runs.describe_progress(EXECUTION, REGION, BUCKET)
    assert (state["jobs"], state["total"], state["job_states"], state["concurrency"]) == ({}, 0, [], 1)
    stepfunctions.add_response("describe_execution", _execution(), {"executionArn": EXECUTION})
    cloud.stub("s3").add_client_error("get_object", "InternalError", "We encountered an internal error.", 500,
                                      expected_params={"Bucket": BUCKET, "Key": "results/exp-7/plan.json"})
    with pytest.raises(ClientError) as raised:
        runs.describe_progress(EXECUTION, REGION, BUCKET)
    assert raised.value.response["Error"]["Code"] == "InternalError"
    cloud.done()


def test_a_training_job_that_cannot_be_described_is_raised_not_counted_pending(cloud, clock):
    cloud.stub("stepfunctions").add_response("describe_execution", _execution(), {"executionArn": EXECUTION})
    _plan(cloud, [{"name": "x-1"}])
    cloud.stub("sagemaker").add_client_error("describe_training_job", "AccessDeniedException", "not authorized", 400,
                                             expected_params={"TrainingJobName": "x-1"})
    with pytest.raises(ClientError) as raised:
        runs.describe_progress(EXECUTION, REGION, BUCKET)
    assert raised.value.response["Error"]["Code"] == "AccessDeniedException"
    cloud.done()


def test_an_ended_job_is_priced_by_its_billable_time_not_by_its_start(cloud, clock):
    """A job that started two hours ago and billed 600 s costs 600 s of ml.p3.2xlarge ($3.825 an hour)."""
    cloud.stub("stepfunctions").add_response("describe_execution", _execution(), {"executionArn": EXECUTION})
    _plan(cloud, [{"name": "x-1"}])
    _describe(cloud, "x-1", _job("x-1", "Completed", billable=600, started=7200))
    state = runs.describe_progress(EXECUTION, REGION, BUCKET)
    assert (state["spend_usd"], state["job_states"]) == (0.6375, [{"name": "x-1", "status": "Completed",
                                                                   "phase": "Completed"}])
    # A job still starting (no billable time, no start yet) has cost nothing.
    cloud.stub("stepfunctions").add_response("describe_execution", _execution(), {"executionArn": EXECUTION})
    _plan(cloud, [{"name": "x-1"}])
    _describe(cloud, "x-1", _job("x-1", "InProgress", phase="Starting"))
    assert runs.describe_progress(EXECUTION, REGION, BUCKET)["spend_usd"] == 0.0
    cloud.done()


# ---- dslab status ---------------------------------------------------------------------------------------------
@pytest.fixture
def outputs(tmp_path):
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"DataSourceLab-Core": {"StateMachineArn": MACHINE, "BucketName": BUCKET}}))
    return str(path)


def _one_job_look(cloud, status: str = "RUNNING", job_status: str = "InProgress", describe: bool = True, **extra):
    cloud.stub("stepfunctions").add_response("describe_execution", _execution(status, **extra),
                                             {"executionArn": EXECUTION})
    _plan(cloud, [{"name": "x-1"}, {"name": "x-9", "skip_reason": "FSx is down"}])
    if describe:
        _describe(cloud, "x-1", _job("x-1", job_status, billable=3600))


def test_status_of_the_latest_execution_prints_its_line(cloud, clock, outputs):
    """Without EXECUTION, status looks at the workflow's newest execution (ListExecutions, one result)."""
    cloud.stub("stepfunctions").add_response(
        "list_executions", {"executions": [{"executionArn": EXECUTION, "stateMachineArn": MACHINE, "name": "exp-7",
                                            "status": "RUNNING", "startDate": NOW}]},
        {"stateMachineArn": MACHINE, "maxResults": 1})
    _one_job_look(cloud)
    seen = run_cli(["status", "--outputs", outputs, "--region", REGION])
    cloud.done()
    assert (seen.rc, seen.err) == (0, "")
    assert seen.out == ("RUNNING: 5400 s, jobs {'InProgress': 1, 'Skipped': 1}, spend $3.83; "
                        "results: s3://lab-data-eu/results/exp-7/results.json\n")


def test_status_of_a_workflow_without_executions_says_to_start_one(cloud, clock, outputs):
    cloud.stub("stepfunctions").add_response("list_executions", {"executions": []},
                                             {"stateMachineArn": MACHINE, "maxResults": 1})
    seen = run_cli(["status", "--outputs", outputs, "--region", REGION])
    cloud.done()
    assert (seen.rc, seen.out) == (2, "")
    assert seen.err == "dslab: error: EXECUTION: the workflow has no executions yet: start one with dslab run\n"


def test_status_json_prints_the_whole_record(cloud, clock, outputs):
    _one_job_look(cloud, job_status="Completed")
    seen = run_cli(["status", EXECUTION, "--outputs", outputs, "--region", REGION, "--json"])
    cloud.done()
    assert seen.rc == 0
    assert json.loads(seen.out) == {
        "execution": EXECUTION, "status": "RUNNING", "jobs": {"Completed": 1, "Skipped": 1}, "spend_usd": 3.825,
        "unpriced_instance_types": [], "elapsed_seconds": 5400,
        "results": "s3://lab-data-eu/results/exp-7/results.json", "error": None, "cause": None, "total": 2,
        "concurrency": 1, "job_states": [{"name": "x-1", "status": "Completed", "phase": "Completed"}]}


def _throttled(cloud, times: int, code: str = "ThrottlingException") -> None:
    for _ in range(times):
        cloud.stub("stepfunctions").add_client_error("describe_execution", code, "Rate exceeded", 400,
                                                     expected_params={"executionArn": EXECUTION})


THROTTLED_LINE = ("dslab: this look failed (AWS DescribeExecution failed (ThrottlingException: Rate exceeded); AWS is "
                  "throttling this account's requests (other tools calling the same API share the rate): try again "
                  "in a minute); looking again in 0.5 s\n")


def test_status_wait_follows_the_execution_to_its_end_tries_a_throttled_look_again(cloud, clock, outputs):
    """A throttled look is said and tried again after the poll interval (four in a row still go on); a job seen
    ended is not described again at the next look; the last line says how the execution ended."""
    _throttled(cloud, 4)
    _one_job_look(cloud, job_status="Completed")
    _one_job_look(cloud, status="SUCCEEDED", describe=False, stopped=5000)
    seen = run_cli(["status", EXECUTION, "--outputs", outputs, "--region", REGION, "--wait", "--poll", "0.5",
                    "--plain"])
    cloud.done()
    assert seen.rc == 0
    assert seen.err == THROTTLED_LINE * 4
    assert clock.sleeps == [0.5] * 5
    assert seen.out.splitlines()[-1] == ("SUCCEEDED: 1/1 jobs done, 1 skipped, spend $3.83; results in "
                                         "s3://lab-data-eu/results/exp-7/results.json")


def test_a_throttled_look_is_tried_again_five_times_then_said(cloud, clock, outputs):
    """Five throttled looks in a row stop the watching (not the execution), saying how to follow it again."""
    _throttled(cloud, 5)
    seen = run_cli(["status", EXECUTION, "--outputs", outputs, "--region", REGION, "--wait", "--poll", "2",
                    "--plain"])
    cloud.done()
    assert (seen.rc, seen.out) == (2, "")
    assert seen.err == THROTTLED_LINE.replace("0.5 s", "2 s") * 4 + (
        f"dslab: error: 5 looks in a row failed; the execution keeps running, `dslab status {EXECUTION} --wait` "
        "follows it again: " + THROTTLED_LINE[len("dslab: this look failed ("):-len("); looking again in 0.5 s\n")]
        + "\n")
    assert clock.sleeps == [2.0] * 4


def test_a_look_refused_for_good_is_said_at_once(cloud, clock, outputs):
    _throttled(cloud, 1, code="AccessDeniedException")
    seen = run_cli(["status", EXECUTION, "--outputs", outputs, "--region", REGION, "--wait", "--plain"])
    cloud.done()
    assert seen.rc == 2 and clock.sleeps == []
    assert seen.err == ("dslab: error: AWS DescribeExecution failed (AccessDeniedException: Rate exceeded); your "
                        "credentials may not call states:DescribeExecution: use the profile of the account the lab "
                        "is deployed in (AWS_PROFILE) or ask for that permission\n")


def test_status_wait_of_a_failed_execution_says_its_error_and_exits_1(cloud, clock, outputs):
    _one_job_look(cloud, status="FAILED", job_status="Failed", error="States.TaskFailed", cause="boom")
    seen = run_cli(["status", EXECUTION, "--outputs", outputs, "--region", REGION, "--wait", "--plain"])
    cloud.done()
    assert seen.rc == 1 and clock.sleeps == []
    assert seen.out.splitlines()[-1] == ("FAILED: 1/1 jobs done (1 failed), 1 skipped, spend $3.83; results in "
                                         "s3://lab-data-eu/results/exp-7/results.json (States.TaskFailed: boom)")


# ---- dslab run --------------------------------------------------------------------------------------------------
LONG = "a-long-experiment-name-" + "x" * 17   # 40 characters, the most a name has


class StepFunctions:
    """StartExecution recorded; answers an execution ARN, or raises ``error``."""

    def __init__(self, error: Exception | None = None):
        self.started: list = []
        self.error = error

    def start_execution(self, **request):
        self.started.append(request)
        if self.error is not None:
            raise self.error
        return {"executionArn": f"{MACHINE.replace(':stateMachine:', ':execution:')}:{request['name']}",
                "startDate": NOW}


@pytest.fixture
def fixed_name(monkeypatch, clock):
    monkeypatch.setattr(runs, "uuid", types.SimpleNamespace(uuid4=lambda: types.SimpleNamespace(hex="abcdef0123456789")))


def _experiment(tmp_path, **document) -> str:
    base = {"name": "fm", "datasets": [{"name": "tiny", "format": "jpg", "files": 3, "bytes": "303KB"}],
            "modes": ["File"], "instance_type": "ml.m5.xlarge", "compute": "v100"}
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps({**base, **document}))
    return str(path)


def test_run_starts_the_workflow_with_a_readable_unique_name_and_the_experiment(cloud, fixed_name, outputs, tmp_path):
    """The execution's name: the experiment's, the UTC start time and six hex digits; its input is the experiment;
    the lines say the premise priced on the lab the outputs file names, what started and how to follow it."""
    sfn = StepFunctions()
    cloud.put("stepfunctions", sfn)
    seen = run_cli(["run", "--experiment", _experiment(tmp_path, name=LONG), "--outputs", outputs, "--region", REGION])
    assert (seen.rc, seen.err) == (0, "")
    name = "a-long-experiment-name-xxxxxxxxxxxxxxxxx-20300102-030405-abcdef"
    assert [(r["stateMachineArn"], r["name"]) for r in sfn.started] == [(MACHINE, name)]
    sent = json.loads(sfn.started[0]["input"])
    assert (sent["name"], sent["repeats"], sent["trials"][0]["modes"], sent["trials"][0]["instance_type"],
            sent["trials"][0]["datasets"][0]["bytes"]) == (LONG, 1, ["File"], "ml.m5.xlarge", 303000)
    started = f"arn:aws:states:eu-west-1:123456789012:execution:DataSourceLab-Benchmark:{name}"
    # The rule and the lab once, then the question in one line each (issue 55: each at most 160 columns).
    assert seen.out.splitlines()[:2] == [
        "priced: each job as it runs on the lab as it stands: the lab cdk.json deploys (FSx Scratch 2 1,200 GiB, "
        "EFS Bursting); defaults: count, epochs",
        "tiny: 1 x ml.m5.xlarge (no accelerator) at 328 samples/s each (MLPerf Storage V100), 1 epoch; 3 files, "
        "0.3 MB, 3 samples (the experiment's files and bytes)"]
    assert seen.out.splitlines()[-2:] == [f"started {started}", f"follow it with: dslab status {started}"]


def test_run_repeats_every_job_as_asked(cloud, fixed_name, outputs, tmp_path):
    sfn = StepFunctions()
    cloud.put("stepfunctions", sfn)
    seen = run_cli(["run", "--experiment", _experiment(tmp_path), "--outputs", outputs, "--region", REGION,
                    "--repeats", "3"])
    assert seen.rc == 0, seen.err
    assert sfn.started[0]["name"] == "fm-20300102-030405-abcdef"
    assert json.loads(sfn.started[0]["input"])["repeats"] == 3
    assert seen.out.splitlines()[-1] == ("follow it with: dslab status arn:aws:states:eu-west-1:123456789012:execution:"
                                         "DataSourceLab-Benchmark:fm-20300102-030405-abcdef")


@pytest.mark.parametrize("flag, field", [(["--repeats", "100"], "--repeats"), ([], "repeats")])
def test_run_refuses_more_jobs_than_one_execution_runs_naming_what_to_lower(cloud, fixed_name, outputs, tmp_path,
                                                                             flag, field):
    sfn = StepFunctions()
    cloud.put("stepfunctions", sfn)
    document = {"modes": ["File", "FastFile"], **({} if flag else {"repeats": 100})}
    seen = run_cli(["run", "--experiment", _experiment(tmp_path, **document), "--outputs", outputs, "--region", REGION,
                    *flag])
    assert seen.rc == 2 and sfn.started == []
    assert seen.err.startswith(f"dslab: error: {field}: the experiment expands to 200 jobs; one workflow execution "
                               "runs at most "), seen.err


def test_run_wait_follows_the_started_execution(cloud, clock, fixed_name, outputs, tmp_path):
    sfn = StepFunctions()
    cloud.put("stepfunctions", sfn)
    started = "arn:aws:states:eu-west-1:123456789012:execution:DataSourceLab-Benchmark:fm-20300102-030405-abcdef"
    watcher = _SESSION.create_client("stepfunctions", region_name=REGION, aws_access_key_id="t",
                                     aws_secret_access_key="t")
    stub = Stubber(watcher)
    stub.activate()
    stub.add_response("describe_execution", {**_execution("SUCCEEDED", name="fm-20300102-030405-abcdef",
                                                          stopped=60), "executionArn": started},
                      {"executionArn": started})

    class Both:   # StartExecution recorded, DescribeExecution stubbed
        start_execution = sfn.start_execution
        describe_execution = watcher.describe_execution
    cloud.put("stepfunctions", Both())
    cloud.stub("s3").add_response("get_object", {"Body": _body({"jobs": []})},
                                  {"Bucket": BUCKET, "Key": "results/fm-20300102-030405-abcdef/plan.json"})
    seen = run_cli(["run", "--experiment", _experiment(tmp_path), "--outputs", outputs, "--region", REGION, "--wait",
                    "--poll", "3", "--plain"])
    stub.assert_no_pending_responses()
    cloud.done()
    assert seen.rc == 0, seen.err
    assert seen.out.splitlines()[-1] == ("SUCCEEDED: 0/0 jobs done, spend $0.00; results in "
                                         "s3://lab-data-eu/results/fm-20300102-030405-abcdef/results.json")
    assert f"follow it with: dslab status {started}" not in seen.out


class Views:
    """The progress views made (dslab/progress_view.py ProgressView), each with the ``live`` it was given."""

    def __init__(self, monkeypatch):
        from dslab import progress_view
        self.live: list = []
        real = progress_view.ProgressView
        views = self

        class Recorded(real):
            def __init__(self, progress, *, live=None, **kwargs):
                views.live.append(live)
                super().__init__(progress, live=False, **kwargs)
        monkeypatch.setattr(progress_view, "ProgressView", Recorded)


@pytest.mark.parametrize("plain, live", [(["--plain"], [False]), ([], [None])])
def test_run_wait_looks_again_every_poll_seconds_and_plain_turns_the_live_table_off(cloud, clock, fixed_name, outputs,
                                                                                    tmp_path, monkeypatch, plain, live):
    """--poll 3: one look while it runs, three seconds, the look that finds it ended; --plain: no live table (else
    the terminal decides, live=None)."""
    views = Views(monkeypatch)
    sfn = StepFunctions()
    started = "arn:aws:states:eu-west-1:123456789012:execution:DataSourceLab-Benchmark:fm-20300102-030405-abcdef"
    watcher = _SESSION.create_client("stepfunctions", region_name=REGION, aws_access_key_id="t",
                                     aws_secret_access_key="t")
    stub = Stubber(watcher)
    stub.activate()
    for status, stopped in (("RUNNING", None), ("SUCCEEDED", 60)):
        stub.add_response("describe_execution", {**_execution(status, name="fm-20300102-030405-abcdef",
                                                              stopped=stopped), "executionArn": started},
                          {"executionArn": started})

    class Both:   # StartExecution recorded, DescribeExecution stubbed
        start_execution = sfn.start_execution
        describe_execution = watcher.describe_execution
    cloud.put("stepfunctions", Both())
    for _ in range(2):
        cloud.stub("s3").add_response("get_object", {"Body": _body({"jobs": []})},
                                      {"Bucket": BUCKET, "Key": "results/fm-20300102-030405-abcdef/plan.json"})
    seen = run_cli(["run", "--experiment", _experiment(tmp_path), "--outputs", outputs, "--region", REGION, "--wait",
                    "--poll", "3", *plain])
    stub.assert_no_pending_responses()
    cloud.done()
    assert seen.rc == 0, seen.err
    assert (clock.sleeps, views.live) == ([3.0], live)


@pytest.mark.parametrize("plain, live", [(["--plain"], [False]), ([], [None])])
def test_status_wait_plain_turns_the_live_table_off(cloud, clock, outputs, monkeypatch, plain, live):
    views = Views(monkeypatch)
    _one_job_look(cloud, status="SUCCEEDED", job_status="Completed")
    seen = run_cli(["status", EXECUTION, "--outputs", outputs, "--region", REGION, "--wait", *plain])
    cloud.done()
    assert seen.rc == 0, seen.err
    assert views.live == live


def test_run_checks_the_jobs_on_the_lab_its_outputs_file_names(cloud, fixed_name, outputs, tmp_path):
    """A 2 TB dataset on FSx: the lab cdk.json deploys (1,200 GiB of Scratch 2) cannot hold it, so `dslab run` with
    an outputs file that names no FSx refuses it before StartExecution; with an outputs file naming a 7,200 GiB
    Persistent 2 file system it starts."""
    sfn = StepFunctions()
    cloud.put("stepfunctions", sfn)
    big = _experiment(tmp_path, datasets=[{"name": "big", "format": "jpg", "files": 2000, "bytes": "2TB"}],
                      modes=["FSx"])
    refused = run_cli(["run", "--experiment", big, "--outputs", outputs, "--region", REGION])
    assert refused.rc == 2 and sfn.started == []
    assert "cannot hold 1,863 GiB" in refused.err, refused.err
    with_fsx = tmp_path / "with-fsx.json"
    with_fsx.write_text(json.dumps({"DataSourceLab-Core": {"StateMachineArn": MACHINE, "BucketName": BUCKET},
                                    "DataSourceLab-Fsx": {"FsxDeploymentType": "PERSISTENT_2",
                                                          "FsxCapacityGiB": "7200", "FsxThroughputPerTiB": "250"}}))
    seen = run_cli(["run", "--experiment", big, "--outputs", str(with_fsx), "--region", REGION])
    assert seen.rc == 0, seen.err
    assert [r["name"] for r in sfn.started] == ["fm-20300102-030405-abcdef"]


def test_run_without_credentials_or_refused_says_so_and_starts_nothing(cloud, fixed_name, outputs, tmp_path):
    cloud.put("stepfunctions", StepFunctions(NoCredentialsError()))
    seen = run_cli(["run", "--experiment", _experiment(tmp_path), "--outputs", outputs, "--region", REGION])
    assert (seen.rc, seen.err) == (2, "dslab: error: AWS credentials: none found: set AWS_PROFILE or keys\n")
    refused = ClientError({"Error": {"Code": "ExecutionAlreadyExists", "Message": "Execution already exists"}},
                          "StartExecution")
    cloud.put("stepfunctions", StepFunctions(refused))
    seen = run_cli(["run", "--experiment", _experiment(tmp_path), "--outputs", outputs, "--region", REGION])
    assert seen.rc == 2
    assert seen.err == ("dslab: error: AWS StartExecution failed (ExecutionAlreadyExists: Execution already exists); "
                        "an execution of that name exists: run again (dslab names each run anew)\n")


def _script_experiment(tmp_path, **trial) -> str:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text("print('hello')\n")
    return _experiment(tmp_path, trials=[{"name": "own", "script": {"source_dir": "code", "entry_point": "train.py"},
                                          **trial}])


class CodeBucket:
    """S3 for the script's package: not there yet (HeadObject 404), then uploaded."""

    def __init__(self):
        self.uploaded: list = []

    def head_object(self, Bucket, Key):
        raise ClientError({"Error": {"Code": "404", "Message": "Not Found"}}, "HeadObject")

    def upload_file(self, filename, bucket, key, *args, **kwargs):
        self.uploaded.append((bucket, key))


def test_run_uploads_the_scripts_code_to_the_labs_bucket_and_starts_with_its_uri(cloud, fixed_name, outputs, tmp_path):
    sfn, s3 = StepFunctions(), CodeBucket()
    cloud.put("stepfunctions", sfn)
    cloud.put("s3", s3)
    seen = run_cli(["run", "--experiment", _script_experiment(tmp_path), "--outputs", outputs, "--region", REGION])
    assert seen.rc == 0, seen.err
    assert len(s3.uploaded) == 1 and s3.uploaded[0][0] == BUCKET and s3.uploaded[0][1].startswith("code/")
    assert f"s3://{BUCKET}/{s3.uploaded[0][1]}" in sfn.started[0]["input"]


def test_run_of_a_script_without_the_labs_bucket_says_to_deploy(cloud, fixed_name, tmp_path):
    sfn = StepFunctions()
    cloud.put("stepfunctions", sfn)
    path = tmp_path / "no-bucket.json"
    path.write_text(json.dumps({"DataSourceLab-Core": {"StateMachineArn": MACHINE}}))
    seen = run_cli(["run", "--experiment", _script_experiment(tmp_path), "--outputs", str(path), "--region", REGION])
    assert sfn.started == []
    assert (seen.rc, seen.err) == (2, "dslab: error: stack: the DataSourceLab stack has no BucketName output to upload "
                                      "the script to: run `make deploy FSX=keep`\n")


def test_run_refuses_more_hosts_than_a_datasets_stats_file_counts_before_starting(cloud, fixed_name, outputs, tmp_path):
    """The experiment says 3 files, the dataset's stats file in the lab's bucket says 1: two hosts are refused."""
    sfn = StepFunctions()
    cloud.put("stepfunctions", sfn)
    cloud.stub("s3").add_response("list_objects_v2", {"KeyCount": 1, "Contents": [{"Key": "datasets/tiny/a.jpg"}]},
                                  {"Bucket": BUCKET, "Prefix": "datasets/tiny/", "MaxKeys": 1})
    cloud.stub("s3").add_response("get_object", {"Body": _body({"files": 1, "bytes": 100})},
                                  {"Bucket": BUCKET, "Key": "datasets/tiny.stats.json"})
    seen = run_cli(["run", "--experiment", _experiment(tmp_path, instance_count=2), "--outputs", outputs,
                    "--region", REGION])
    cloud.done()
    assert seen.rc == 2 and sfn.started == []
    assert seen.err == (
        "dslab: error: trial 'base': instance_count: 2 instances but dataset 'tiny' has 1 object (File: ShardedByS3Key "
        "gives each instance whole objects), so 1 instance would get none and fail the job (allowed: at most 1 "
        "instances for 'tiny', or more objects (smaller TFRecord shards: generate.shard_size_mb, dslab dataset pack "
        "--shard-size))\n")


# ---- dslab report EXECUTION -------------------------------------------------------------------------------------
def _report(world, monkeypatch, execution: str, *extra: str):
    drawn: list = []
    made: list = []
    real = boto3.client
    monkeypatch.setattr("dslab.report.write_report", lambda results, out, calibration=None: drawn.append(results) or {})
    monkeypatch.setattr(boto3, "client", lambda *a, **k: made.append((a[0] if a else k.get("service_name"),
                                                                       k.get("region_name"))) or real(*a, **k))
    seen = run_cli(["report", execution, "--out", str(world.tmp / "report"), "--region", WORLD_REGION, *extra])
    return seen, (drawn[0] if drawn else None), made


def _execution_in_world(world, name: str, jobs: list, *, stop: bool = False, machine: str = SM_NAME) -> str:
    sfn = world.c["stepfunctions"]
    started = sfn.start_execution(stateMachineArn=arn("stateMachine", machine), name=name)["executionArn"]
    if stop:
        sfn.stop_execution(executionArn=started)
    world.put_json(f"results/{name}/plan.json", {**world.plan_document(name), "jobs": jobs})
    return started


def _planned_job(world, index: int, name: str, skip: str | None = None) -> dict:
    return {**world.plan_document("x")["jobs"][0], "index": index, "name": name, "skip_reason": skip}


def test_report_of_a_running_execution_by_name_is_what_finished_marked_partial(world, monkeypatch):
    """By its name alone (the ARN is built from the workflow's): the planned jobs whose last attempt ended are the
    records; the partial mark counts them against the jobs to run (skipped ones left out) and says it still runs."""
    _execution_in_world(world, "rx-running", [_planned_job(world, 0, "job-a"), _planned_job(world, 1, "job-live"),
                                              _planned_job(world, 2, "rx-skip", "FSx is down")])
    seen, results, made = _report(world, monkeypatch, "rx-running")
    assert seen.rc == 0, seen.err
    assert results["partial"] == {"done": 1, "total": 2, "reason": "the execution is still running"}
    assert [r["job_name"] for r in results["records"]] == ["job-a"]
    assert results["execution"] == "rx-running"
    assert seen.out.startswith("partial report: the execution is still running at 1/2 jobs; "
                               "it reports the jobs that finished\n")
    assert {("cloudformation", WORLD_REGION), ("s3", WORLD_REGION), ("sagemaker", WORLD_REGION),
            ("stepfunctions", WORLD_REGION)} <= set(made)


def test_report_of_a_stopped_execution_by_its_arn_says_how_it_ended(world, monkeypatch):
    """An ARN is used as given (here another state machine's execution than the workflow's)."""
    started = _execution_in_world(world, "rx-stopped", [_planned_job(world, 0, "job-a"), _planned_job(world, 1, "job-b")],
                                  stop=True, machine="DataSourceLab-Idle")
    world.c["s3"].put_object(Bucket=WORLD_BUCKET, Key="results/rx-stopped/failures/job-b.txt",
                             Body=b"AlgorithmError: corrupted")   # the Cause the state machine kept, in the lab's bucket
    seen, results, _ = _report(world, monkeypatch, started)
    assert seen.rc == 0, seen.err
    assert results["partial"] == {"done": 2, "total": 2, "reason": "the execution ended ABORTED"}
    assert [(r["job_name"], r["status"], r["failure_reason"]) for r in results["records"]] == [
        ("job-a", "Completed", None), ("job-b", "Failed", "failed: AlgorithmError: corrupted")]


def test_report_of_an_execution_with_results_reads_them_as_stored(world, monkeypatch):
    world.put_json("results/rx-done/results.json", {"records": [], "execution": "rx-done", "stored": True})
    world.put_json("results/rx-done/plan.json", {"jobs": "never read"})
    seen, results, _ = _report(world, monkeypatch, arn("execution", f"{SM_NAME}:rx-done"))
    assert seen.rc == 0, seen.err
    assert results == {"records": [], "execution": "rx-done", "stored": True}


def test_report_of_an_unknown_execution_says_no_results_and_no_plan(world, monkeypatch):
    seen, results, _ = _report(world, monkeypatch, arn("execution", f"{SM_NAME}:rx-never"))
    assert results is None and seen.rc == 2
    assert seen.err == (f"dslab: error: EXECUTION: no results and no plan for rx-never in s3://{WORLD_BUCKET}/results/"
                        "rx-never/: the execution never got past Plan (its history says why), or the name is wrong\n")


def test_report_whose_results_cannot_be_read_names_the_object(world, monkeypatch):
    monkeypatch.setattr(runs, "outputs_from_cloudformation",
                        lambda region: {"BucketName": "no-such-bucket-rx", "StateMachineArn": arn("stateMachine", SM_NAME)})
    seen, results, _ = _report(world, monkeypatch, "rx-any")
    assert results is None and seen.rc == 2
    assert "s3://no-such-bucket-rx/results/rx-any/results.json could not be read" in seen.err, seen.err
    assert "NoSuchBucket" in seen.err


def test_report_of_a_partial_execution_keeps_the_price_overrides_it_was_priced_with(world, monkeypatch, tmp_path):
    _execution_in_world(world, "rx-priced", [_planned_job(world, 0, "job-a")])
    prices = tmp_path / "prices.yaml"
    prices.write_text("instance_hourly:\n  ml.m5.xlarge: 0.5\n")
    seen, results, _ = _report(world, monkeypatch, "rx-priced", "--prices", str(prices))
    assert seen.rc == 0, seen.err
    assert results["prices"]["overrides"] == {"instance_hourly": {"ml.m5.xlarge": 0.5}}


def test_report_reads_a_results_object_answered_404_as_not_written_yet(world, monkeypatch):
    """An error answer without a body is given the bare status as its code by botocore (parsers.py
    _parse_error_from_http_status: "404", as every HEAD's): the report is then built from the plan, as for NoSuchKey."""
    _execution_in_world(world, "rx-404", [_planned_job(world, 0, "job-a")])
    real = boto3.client

    def client(*args, **kwargs):
        made = real(*args, **kwargs)
        if (args[0] if args else kwargs.get("service_name")) == "s3":
            read = made.get_object

            def get_object(**request):
                if request["Key"] == "results/rx-404/results.json":
                    raise ClientError({"Error": {"Code": "404", "Message": "Not Found"}}, "GetObject")
                return read(**request)
            made.get_object = get_object
        return made
    monkeypatch.setattr(boto3, "client", client)
    seen, results, _ = _report(world, monkeypatch, "rx-404")
    assert seen.rc == 0, seen.err
    assert results["partial"] == {"done": 1, "total": 1, "reason": "the execution is still running"}
