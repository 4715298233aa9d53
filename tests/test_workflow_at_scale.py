"""The workflow against the limits, names and lifecycles of the real services, enforced by the stand-in.

Each test runs the synthesized state machine in the embedded stand-in (dslab/emulator), which now
enforces what a first real run would hit: 256 KiB per state (terminal), Step Functions' error names
for SageMaker, the account's training quotas, FSx's S3 import finishing after the stack, and
DeleteStack ending later (or failing).
"""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from dslab.inputs import datasets
from dslab.core.facts import limits
from dslab.core.requests import FSX_STACK
from dslab.emulator.lab import EmulatedLab
from dslab.emulator.patches import training_quota_message

from .scripted_jobs import ScriptedJobs
from .helpers import tiny_requests
from .test_workflow import TINY, put_datasets

pytestmark = pytest.mark.slow


def put_many(lab: EmulatedLab, prefix: str, count: int) -> tuple[int, int]:
    """``count`` objects straight into the stand-in's S3 (the API would take minutes); (files, bytes)."""
    from moto.s3.models import s3_backends
    backend = s3_backends[lab.client("sts").get_caller_identity()["Account"]]["global"]
    total = 0
    for i in range(count):
        body = b"j" * (20 + i % 13)
        backend.put_object(lab.bucket, f"datasets/{prefix}/{i // 1000:03d}/image-{i:06d}.jpg", body)
        total += len(body)
    return count, total


class S3Calls:
    """Every S3 request the stand-in answers, as its operation and its key or prefix."""

    def __init__(self):
        from dslab.emulator import patches
        self.calls: list[tuple[str, dict]] = []
        self._hooks = patches.HOOKS
        self._hooks.s3_observer = self._record

    def _record(self, method: str, bucket: str, key: str | None, query: dict) -> None:
        if key:
            operation = {"GET": "GetObject", "PUT": "PutObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(method, method)
            self.calls.append((operation, {"key": key}))
        elif method == "GET" and query.get("list-type") == "2":
            self.calls.append(("ListObjectsV2", {"prefix": query.get("prefix", "")}))
        else:
            self.calls.append((f"{method} bucket", {"query": query}))

    def touching(self, fragment: str) -> list[tuple[str, dict]]:
        return [c for c in self.calls if fragment in json.dumps(c[1])]

    def close(self):
        self._hooks.s3_observer = None


# ---- 1. Plan never lists a dataset ---------------------------------------------------------------

def test_plan_of_a_100k_object_dataset_makes_two_s3_requests_and_reads_its_stats(emulated):
    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        files, size = put_many(lab, "big-jpg", 100_000)
        # The stats file beside the prefix, as `dslab dataset upload` writes it (its writers are
        # checked against real listings in test_stats_file_is_written_by_upload_and_by_stats_write).
        lab.client("s3").put_object(Bucket=lab.bucket, Key="datasets/big-jpg.stats.json",
                                    Body=json.dumps({"files": files, "bytes": size, "format": "jpg"}).encode())
        calls = S3Calls()
        try:
            started = time.monotonic()
            execution = lab.run({"name": "big", "datasets": [{"name": "big-jpg", "format": "jpg"}],
                                 "modes": ["File", "FastFile"], "instance_type": "ml.m5.xlarge", "compute": "v100"})
            seconds = time.monotonic() - started
        finally:
            calls.close()
        assert execution.status == "SUCCEEDED", execution.cause
        dataset_calls = calls.touching("datasets/big-jpg")
        # One ListObjectsV2 (MaxKeys=1) and one GetObject of the stats file: not 100 pages of 1,000.
        assert sorted(op for op, _ in dataset_calls) == ["GetObject", "ListObjectsV2"], dataset_calls
        assert len(dataset_calls) == limits.S3_REQUESTS_PER_DATASET
        plan = lab.read_json(f"results/{execution.name}/plan.json")
        assert plan["dataset_stats"]["big-jpg"]["files"] == 100_000
        assert plan["dataset_stats"]["big-jpg"]["bytes"] == size
        records = lab.results(execution)["records"]
        assert {r["status"] for r in records} == {"Completed"}
        print(f"\nPlan on 100,000 objects: {len(dataset_calls)} S3 requests for the dataset; whole execution {seconds:.1f} s")


def test_a_dataset_without_stats_file_fails_at_plan_saying_how_to_write_it(emulated):
    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        lab.client("s3").put_object(Bucket=lab.bucket, Key="datasets/other-tool/a.jpg", Body=b"x")
        execution = lab.run({"name": "nostats", "datasets": [{"name": "other-tool", "format": "jpg"}],
                             "modes": ["File"], "instance_type": "ml.m5.xlarge", "compute": "v100"})
        assert execution.status == "FAILED" and execution.error == "ExperimentInvalid"
        assert "other-tool" in execution.cause and "no stats file" in execution.cause
        assert f"dslab dataset stats s3://{lab.bucket}/datasets/other-tool/ --write" in execution.cause
        assert jobs.requests == []


def test_stats_file_is_written_by_upload_and_by_stats_write(emulated, tmp_path):
    with emulated(ScriptedJobs()) as lab:
        s3 = lab.client("s3")
        src = tmp_path / "mine"
        for i in range(40):
            (src / f"class-{i % 4}").mkdir(parents=True, exist_ok=True)
            (src / f"class-{i % 4}" / f"{i}.jpg").write_bytes(b"y" * (100 + i))
        result = datasets.upload(src, f"s3://{lab.bucket}/datasets/mine/", s3_client=s3)
        written = lab.read_json("datasets/mine.stats.json")
        assert result["stats"] == f"s3://{lab.bucket}/datasets/mine.stats.json"
        assert written["files"] == 40 and written["bytes"] == sum(100 + i for i in range(40))
        assert written["format"] == "jpg" and written["written_by"] == "dslab dataset upload"
        # A prefix filled by another tool, over several ListObjectsV2 pages: `stats --write`.
        files, size = put_many(lab, "synced", 2_345)
        info = datasets.stats(f"s3://{lab.bucket}/datasets/synced/", s3_client=s3, write=True)
        stored = lab.read_json("datasets/synced.stats.json")
        assert stored["files"] == info["files"] == files == 2_345
        assert stored["bytes"] == size and stored["format"] == "jpg"
        assert stored["written_by"] == "dslab dataset stats --write"


# ---- 2. The 256 KiB state limit ------------------------------------------------------------------

def test_the_stand_in_fails_an_execution_past_256_kib_even_with_a_catch_all(emulated):
    """What AWS does: States.DataLimitExceeded is terminal, States.ALL does not catch it."""
    with emulated(ScriptedJobs()) as lab:
        sfn = lab.client("stepfunctions")
        lab.client("s3").put_object(Bucket=lab.bucket, Key="results/big.txt", Body=b"x" * 300_000)
        definition = {"StartAt": "Read", "States": {
            "Read": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
                     "Parameters": {"Bucket": lab.bucket, "Key": "results/big.txt"}, "Next": "Done",
                     "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]},
            "Caught": {"Type": "Succeed"}, "Done": {"Type": "Succeed"}}}
        arn = sfn.create_state_machine(name="too-big", definition=json.dumps(definition),
                                       roleArn=lab.training_role_arn)["stateMachineArn"]
        execution = lab.wait(sfn.start_execution(stateMachineArn=arn, name="big", input="{}")["executionArn"])
        assert execution.status == "FAILED" and execution.error == "States.DataLimitExceeded"
        entered = [e["stateEnteredEventDetails"]["name"] for e in execution.history if "stateEnteredEventDetails" in e]
        assert "Caught" not in entered


def test_a_failed_map_iteration_or_parallel_branch_fails_the_execution_with_its_own_error_and_cause(emulated):
    """"If any iteration fails, the entire Map state fails" with the iteration's Error and Cause, States.* names
    included (States.Runtime here: an InputPath that selects nothing). The stand-in once reported "Custom Error
    Names MUST NOT begin with the prefix 'States.'" in their place, hiding what failed."""
    broken = {"StartAt": "Select", "States": {"Select": {"Type": "Pass", "InputPath": "$.missing", "End": True}}}
    machines = {
        "map": {"StartAt": "Lanes", "States": {"Lanes": {
            "Type": "Map", "ItemsPath": "$.lanes", "ItemProcessor": broken, "End": True}}},
        "parallel": {"StartAt": "Branches", "States": {"Branches": {
            "Type": "Parallel", "Branches": [{"StartAt": "Fine", "States": {"Fine": {"Type": "Pass", "End": True}}}, broken],
            "End": True}}},
    }
    with emulated(ScriptedJobs()) as lab:
        sfn = lab.client("stepfunctions")
        for name, definition in machines.items():
            arn = sfn.create_state_machine(name=f"nested-{name}", definition=json.dumps(definition),
                                           roleArn=lab.training_role_arn)["stateMachineArn"]
            execution = lab.wait(sfn.start_execution(stateMachineArn=arn, name=name,
                                                     input=json.dumps({"lanes": [{"a": 1}]}))["executionArn"])
            assert (execution.status, execution.error) == ("FAILED", "States.Runtime"), (name, execution.cause)
            assert "$.missing" in execution.cause and "Custom Error Names" not in execution.cause, (name, execution.cause)


def test_a_training_job_is_described_as_one_state_while_its_executor_changes_it(emulated):
    """DescribeTrainingJob answers from one state of the job. The job's executor sets fields (new ones included)
    from its own thread while the workflow's .sync poll describes it: a describe never breaks, and one that says
    Completed has every field the executor finished with. (moto walks the job's fields to answer; a field added
    during the walk once failed a lane with States.Runtime on a loaded machine.)"""
    # Fields botocore's model answers (it drops what the model does not name), none set when the job starts.
    finished = {"TrainingTimeInSeconds": 1234, "BillableTimeInSeconds": 1234, "FinalMetricDataList": [
        {"MetricName": f"metric-{i}", "Value": float(i)} for i in range(40)]}

    described = threading.Event()   # the executor goes on changing the job until it has been described

    def executor(request, update):
        i, deadline = 0, time.monotonic() + 30
        while (i < 3_000 or not described.is_set()) and time.monotonic() < deadline:
            update({f"ProgressField{i}": i})
            i += 1
        return {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed", **finished}

    switching = sys.getswitchinterval()
    with emulated(executor) as lab:
        sagemaker = lab.client("sagemaker")
        request = next(iter(tiny_requests(modes=["File"]).values()))
        describes = 0
        sys.setswitchinterval(1e-6)   # threads change hands between almost any two steps, as on a loaded machine
        try:
            sagemaker.create_training_job(**request)
            while True:
                job = sagemaker.describe_training_job(TrainingJobName=request["TrainingJobName"])
                describes += 1
                described.set()
                if job["TrainingJobStatus"] != "InProgress":
                    break
        finally:
            sys.setswitchinterval(switching)
        assert job["TrainingJobStatus"] == "Completed"
        assert {k: job.get(k) for k in finished} == finished
        assert describes > 1   # it was described while the executor ran


def test_the_stand_in_pages_an_execution_history_as_step_functions_does(emulated):
    """GetExecutionHistory (botocore's model of the API): "The default is 100 and the maximum allowed page size is
    1000. A value of 0 uses the default."; "If nextToken is returned, there are more results available ... Keep all
    other arguments unchanged"; reverseOrder "Lists events in descending order". A caller reading one page of a
    long history must be seen missing the rest offline, as it would on AWS."""
    with emulated(ScriptedJobs()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File", "FastFile", "EFS"]})
        sfn = lab.client("stepfunctions")
        events = execution.history   # every page
        assert execution.status == "SUCCEEDED" and len(events) > 100
        assert [e["id"] for e in events] == list(range(1, len(events) + 1))
        first = sfn.get_execution_history(executionArn=execution.arn)
        assert [e["id"] for e in first["events"]] == list(range(1, 101)) and first["nextToken"]
        assert len(sfn.get_execution_history(executionArn=execution.arn, maxResults=0)["events"]) == 100
        paged, token = [], None
        while True:
            page = sfn.get_execution_history(executionArn=execution.arn, maxResults=40, **({"nextToken": token} if token else {}))
            assert len(page["events"]) <= 40
            paged += page["events"]
            token = page.get("nextToken")
            if not token:
                break
        assert paged == events
        latest = sfn.get_execution_history(executionArn=execution.arn, reverseOrder=True, maxResults=3)["events"]
        assert [e["id"] for e in latest] == [len(events), len(events) - 1, len(events) - 2]
        backwards, token = [], None
        while True:
            page = sfn.get_execution_history(executionArn=execution.arn, reverseOrder=True, maxResults=70,
                                             **({"nextToken": token} if token else {}))
            backwards += page["events"]
            token = page.get("nextToken")
            if not token:
                break
        assert backwards == events[::-1]
        with pytest.raises(sfn.exceptions.InvalidToken):   # a token belongs to the listing it came from
            sfn.get_execution_history(executionArn=execution.arn, reverseOrder=True, nextToken=first["nextToken"])
        with pytest.raises(sfn.exceptions.InvalidToken):
            sfn.get_execution_history(executionArn=execution.arn, nextToken="not-a-token")
        with pytest.raises(sfn.exceptions.ClientError, match="less than or equal to 1000"):
            sfn.get_execution_history(executionArn=execution.arn, maxResults=1001)
        assert len(sfn.get_execution_history(executionArn=execution.arn, maxResults=1000)["events"]) == min(1000, len(events))


def test_a_history_read_newest_first_while_the_execution_runs_serves_each_event_once(emulated):
    """The history grows at its end while an execution runs; reverseOrder pages read from the newest event
    back. The next page goes on from where the last one stopped: an event is served once, and a token of
    another execution is refused ("Keep all other arguments unchanged"; an invalid token: InvalidToken).
    An execution's history read after its lab has closed is an error saying so."""
    with emulated(ScriptedJobs()) as lab:
        sfn = lab.client("stepfunctions")
        definition = {"StartAt": "One", "States": {
            "One": {"Type": "Pass", "Next": "Two"}, "Two": {"Type": "Pass", "Next": "Hold"},
            "Hold": {"Type": "Wait", "Seconds": 2000, "Next": "Three"},   # 2 s at the tests' time scale
            "Three": {"Type": "Pass", "Next": "Done"}, "Done": {"Type": "Succeed"}}}
        machine = sfn.create_state_machine(name="growing", definition=json.dumps(definition),
                                           roleArn=lab.training_role_arn)["stateMachineArn"]
        arn = sfn.start_execution(stateMachineArn=machine, name="growing")["executionArn"]
        for _ in range(200):
            newest = sfn.get_execution_history(executionArn=arn, reverseOrder=True, maxResults=2)
            if newest["events"][0]["type"] == "WaitStateEntered":
                break
            time.sleep(0.01)
        assert newest["events"][0]["type"] == "WaitStateEntered", "the execution never reached its Wait state"
        assert lab.wait(arn).status == "SUCCEEDED"
        rest = sfn.get_execution_history(executionArn=arn, reverseOrder=True, nextToken=newest["nextToken"])
        served = [e["id"] for e in newest["events"] + rest["events"]]
        assert served == list(range(served[0], 0, -1)), served
        everything = sfn.get_execution_history(executionArn=arn)["events"]
        assert len(everything) > len(served) and everything[-1]["type"] == "ExecutionSucceeded"
        other = sfn.start_execution(stateMachineArn=machine, name="another")["executionArn"]
        with pytest.raises(sfn.exceptions.InvalidToken):
            sfn.get_execution_history(executionArn=other, reverseOrder=True, nextToken=newest["nextToken"])
        late = lab.wait(other)
    with pytest.raises(RuntimeError, match="the lab is closed"):   # not a call to AWS with the fake keys
        late.history


def test_history_events_of_the_worst_job_fit_the_max_jobs_arithmetic(emulated):
    """One job that exhausts every retry (throttled API_RETRIES times, capacity-refused until its
    last attempt, then failed): its events times MAX_JOBS must fit in 25,000."""
    attempts = {}

    def throttle(request):
        name = request["TrainingJobName"]
        attempts[name] = attempts.get(name, 0) + 1
        return ("ThrottlingException", "Rate exceeded") if attempts[name] <= limits.API_RETRIES else None

    jobs = ScriptedJobs(capacity_failures=lambda r: True)
    with emulated(jobs) as lab:
        from dslab.emulator import patches
        put_datasets(lab, ["tiny-jpg"])
        patches.HOOKS.create_fault = throttle
        baseline = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File"],
                            "job_prefix": "base"})
        patches.HOOKS.history_events.clear()
        attempts.clear()
        two = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File", "FastFile"],
                       "job_prefix": "pair"})
        assert baseline.status == two.status == "FAILED"
        per_job = two.history_events - baseline.history_events
        fixed = baseline.history_events - per_job
        assert per_job <= limits.HISTORY_EVENTS_PER_JOB_WORST, per_job
        assert fixed <= limits.HISTORY_EVENTS_FIXED, fixed
        assert fixed + per_job * limits.MAX_JOBS < limits.MAX_HISTORY_EVENTS
        print(f"\nworst job: {per_job} history events; fixed part {fixed}; "
              f"x MAX_JOBS={limits.MAX_JOBS}: {fixed + per_job * limits.MAX_JOBS:,} of 25,000")


# ---- 3. Error names as Step Functions reports them ------------------------------------------------

def test_throttled_create_is_retried_with_backoff_then_succeeds(emulated):
    calls = []

    def throttle_twice(request):
        calls.append(request["TrainingJobName"])
        return ("ThrottlingException", "Rate exceeded") if len(calls) <= 2 else None

    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        from dslab.emulator import patches
        put_datasets(lab, ["tiny-jpg"])
        patches.HOOKS.create_fault = throttle_twice
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File"]})
        assert execution.status == "SUCCEEDED", execution.cause
        assert len(calls) == 3 and len(set(calls)) == 1           # the same name: nothing was created
        failures = [e for e in execution.history if e["type"] == "TaskFailed"]
        assert all(e["taskFailedEventDetails"]["error"] == "SageMaker.AmazonSageMakerException" for e in failures)
        assert "Error Code: ThrottlingException" in failures[0]["taskFailedEventDetails"]["cause"]
        waits = [e for e in execution.history if e["type"] == "WaitStateEntered"
                 and e["stateEnteredEventDetails"]["name"] == "ApiBackOff"]
        assert len(waits) == 2
        delays = [json.loads(e["stateEnteredEventDetails"]["input"])["delay"]["seconds"] for e in waits]
        assert 1 <= delays[0] <= limits.API_BACKOFF_SECONDS[0] and 1 <= delays[1] <= limits.API_BACKOFF_SECONDS[1]
        assert lab.results(execution)["records"][0]["status"] == "Completed"


def test_validation_error_is_recorded_and_never_retried(emulated):
    calls = []

    def refuse(request):
        calls.append(request["TrainingJobName"])
        return ("ValidationException", "1 validation error detected: Value 'ml.m5.xlarge' at 'resourceConfig.volumeSizeInGB' failed")

    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        from dslab.emulator import patches
        put_datasets(lab, ["tiny-jpg"])
        patches.HOOKS.create_fault = refuse
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File"]})
        assert execution.status == "FAILED" and execution.error == "JobsFailed"
        assert len(calls) == 1
        (record,) = lab.results(execution)["records"]
        assert record["status"] == "Failed"
        assert record["failure_reason"].startswith("SageMaker.AmazonSageMakerException: 1 validation error")
        assert "Error Code: ValidationException" in record["failure_reason"]


def test_quota_of_zero_is_refused_at_plan_naming_the_quota(emulated):
    jobs = ScriptedJobs()
    with emulated(jobs, quotas={"ml.p3.2xlarge for training job usage": 0.0}) as lab:
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File"],
                             "instance_type": "ml.p3.2xlarge"})
        assert execution.status == "FAILED" and execution.error == "ExperimentInvalid"
        assert "'ml.p3.2xlarge for training job usage'" in execution.cause and "is 0" in execution.cause
        assert "request-service-quota-increase" in execution.cause and "--service-code sagemaker" in execution.cause
        assert jobs.requests == [] and lab.training_job_names() == []


def test_quota_below_the_concurrency_lowers_it_and_no_job_is_refused(emulated):
    jobs = ScriptedJobs()
    with emulated(jobs, quotas={"ml.m5.xlarge for training job usage": 2.0}) as lab:
        put_datasets(lab, ["tiny-jpg", "tiny-tfr"])
        execution = lab.run({**TINY, "modes": ["File", "FastFile", "Pipe"], "max_concurrency": 6})
        assert execution.status == "SUCCEEDED", execution.cause
        plan = lab.read_json(f"results/{execution.name}/plan.json")
        assert plan["quotas"]["concurrency"] == 2 and "lowered from 6 to 2" in plan["quotas"]["notes"][0]
        assert not [e for e in execution.history if e["type"] == "TaskFailed"]  # no ResourceLimitExceeded


def test_busy_quota_is_retried_until_a_job_ends(emulated):
    """The stand-in enforces quotas with SageMaker's own message; Plan capped the lanes at the quota,
    but another workload took one instance meanwhile: the refused job waits and then runs."""
    jobs = ScriptedJobs()
    with emulated(jobs, quotas={"ml.m5.xlarge for training job usage": 1.0}) as lab:
        from dslab.emulator import patches
        put_datasets(lab, ["tiny-jpg"])
        refusals = []

        def busy_once(request):
            if not refusals:
                refusals.append(request["TrainingJobName"])
                return ("ResourceLimitExceeded", training_quota_message("ml.m5.xlarge for training job usage", 1, 1, 1))
            return None

        patches.HOOKS.create_fault = busy_once
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File"]})
        assert execution.status == "SUCCEEDED", execution.cause
        failures = [e["taskFailedEventDetails"] for e in execution.history if e["type"] == "TaskFailed"]
        assert [f["error"] for f in failures] == ["SageMaker.ResourceLimitExceededException"]
        assert "is 1 Instances, with current utilization of 1 Instances" in failures[0]["cause"]


# ---- 4. FSx data ready before FSx jobs ----------------------------------------------------------

def test_fsx_jobs_wait_for_the_s3_metadata_import(emulated):
    created = {}

    class Timed(ScriptedJobs):
        def __call__(self, request, update):
            created[request["TrainingJobName"]] = time.monotonic()
            return super().__call__(request, update)

    jobs = Timed()
    # The import runs until released, after the workflow has checked FSx three times (a check a minute):
    # released by the test, not by a wall-clock span a loaded machine can outlast while the lab starts.
    with emulated(jobs, fsx_import_seconds=10**6) as lab:
        put_datasets(lab, ["tiny-jpg"])
        fsx, sfn = lab.client("fsx"), lab.client("stepfunctions")
        arn = lab.start({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["FSx"]})

        def checks() -> int:
            pages = sfn.get_paginator("get_execution_history").paginate(executionArn=arn)
            return sum(e["type"] == "TaskStateEntered" and e["stateEnteredEventDetails"]["name"] == "CheckFsxData"
                       for page in pages for e in page["events"])

        deadline = time.monotonic() + 60
        while checks() < 3:
            assert time.monotonic() < deadline, "the workflow did not check FSx three times"
            time.sleep(0.05)
        assert not created                       # no FSx job while the import runs
        released = time.monotonic()
        lab.end_fsx_imports()
        execution = lab.wait(arn)
        assert execution.status == "SUCCEEDED", execution.cause
        (task,) = fsx.describe_data_repository_tasks()["DataRepositoryTasks"]
        assert task["Lifecycle"] == "SUCCEEDED"
        assert created and all(t >= released for t in created.values())
        results = lab.results(execution)
        assert results["fsx_data"]["ready"] is True and results["records"][0]["status"] == "Completed"


def test_fsx_jobs_are_skipped_with_the_reason_when_the_import_outlasts_the_wait(emulated):
    jobs = ScriptedJobs()
    with emulated(jobs, fsx_import_seconds=6 * 3600) as lab:
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File", "FSx"],
                             "fsx_import_wait_minutes": 5})
        assert execution.status == "SUCCEEDED", execution.cause
        by_mode = {r["mode"]: r for r in lab.results(execution)["records"]}
        assert by_mode["File"]["status"] == "Completed"
        assert by_mode["FSx"]["status"] == "Skipped"
        assert "import" in by_mode["FSx"]["failure_reason"] and "EXECUTING" in by_mode["FSx"]["failure_reason"]
        assert not [r for r in jobs.requests if "fsx" in r["TrainingJobName"]]


# ---- 5. Teardown that really happens, and never under a running job ------------------------------

def test_teardown_waits_for_delete_complete_and_records_it(emulated):
    with emulated(ScriptedJobs(), fsx_delete_seconds=600) as lab:
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File", "FSx"],
                             "teardown_fsx": True})
        assert execution.status == "SUCCEEDED", execution.cause
        teardown = lab.results(execution)["teardown"]
        assert teardown["status"] == "DELETE_COMPLETE" and teardown["checks"] >= 2  # it followed DELETE_IN_PROGRESS
        assert execution.output["teardown"]["status"] == "DELETE_COMPLETE"
        assert not lab.fsx_present
        stack = lab.client("cloudformation").describe_stacks(StackName=teardown["stack_id"])["Stacks"][0]
        assert stack["StackStatus"] == "DELETE_COMPLETE"


def test_failed_delete_fails_the_execution_and_says_fsx_still_bills(emulated):
    with emulated(ScriptedJobs(), fsx_delete_seconds=120,
                  fsx_delete_failure="The following resource(s) failed to delete: [FileSystem]") as lab:
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File", "FSx"],
                             "teardown_fsx": True})
        assert execution.status == "FAILED" and execution.error == "FsxTeardownFailed"
        assert "DELETE_FAILED" in execution.cause and "dslab fsx down" in execution.cause
        results = lab.results(execution)
        assert results["teardown"]["status"] == "DELETE_FAILED"
        assert {r["status"] for r in results["records"]} == {"Completed"}   # results were kept
        assert lab.fsx_present


def test_a_running_execution_with_fsx_jobs_blocks_teardown(emulated):
    release = threading.Event()

    class Slow(ScriptedJobs):
        def __call__(self, request, update):
            if request["TrainingJobName"].startswith("slow"):
                release.wait(60)
            return super().__call__(request, update)

    with emulated(Slow()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        one_dataset = {**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}]}
        slow = lab.start({**one_dataset, "modes": ["FSx"], "job_prefix": "slow"}, name="slow-execution")
        deadline = time.monotonic() + 60
        while not lab.training_job_names() and time.monotonic() < deadline:
            time.sleep(0.05)
        quick = lab.run({**one_dataset, "modes": ["File"], "job_prefix": "quick", "teardown_fsx": True})
        assert quick.status == "SUCCEEDED", quick.cause
        teardown = lab.results(quick)["teardown"]
        assert teardown["status"] == "DEFERRED" and "slow-execution" in teardown["message"]
        assert lab.fsx_present
        release.set()
        assert lab.wait(slow).status == "SUCCEEDED"


# ---- FSx costs only while it is used (the idle guard, `dslab fsx status`) -----------------------

def _guard_round(lab: EmulatedLab, idle_hours: float) -> dict:
    """One scheduled round of the idle guard: the deployed EventBridge rule's target (the teardown
    function) invoked with the rule's own input, its idle hours shortened for the test."""
    events = lab.client("events")
    (rule,) = [r for r in events.list_rules()["Rules"] if r.get("ScheduleExpression")]
    (target,) = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
    payload = {**json.loads(target["Input"]), "idle_hours": idle_hours}
    assert payload["action"] == "idle" and payload["state_machine"] == lab.state_machine_arn
    response = lab.client("lambda").invoke(FunctionName=target["Arn"], Payload=json.dumps(payload).encode())
    return json.loads(response["Payload"].read())


def test_idle_guard_keeps_fsx_while_in_use_and_deletes_it_when_idle(emulated):
    release = threading.Event()

    class Held(ScriptedJobs):
        def __call__(self, request, update):
            release.wait(60)
            return super().__call__(request, update)

    with emulated(Held()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        running = lab.start({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File"]})
        deadline = time.monotonic() + 60
        while not lab.training_job_names() and time.monotonic() < deadline:
            time.sleep(0.05)
        busy = _guard_round(lab, idle_hours=0.0001)
        assert busy["action"] == "kept" and "is running" in busy["why"] and lab.fsx_present
        release.set()
        assert lab.wait(running).status == "SUCCEEDED"
        fresh = _guard_round(lab, idle_hours=8)
        assert fresh["action"] == "kept" and fresh["deadline"] and not fresh["due"]
        time.sleep(0.5)
        due = _guard_round(lab, idle_hours=0.0001)   # 0.36 s without an execution: due
        assert due["action"] == "deleted" and not lab.fsx_present
        assert _guard_round(lab, idle_hours=0.0001)["action"] == "none"


def test_dslab_fsx_status_shows_age_cost_guard_deadline_and_import_progress(emulated, tmp_path, capsys):
    from dslab.cli import main
    with emulated(ScriptedJobs(), fsx_import_seconds=10 ** 6) as lab:
        put_datasets(lab, ["tiny-jpg"])
        outputs = tmp_path / "cdk-outputs.json"
        outputs.write_text(json.dumps({"DataSourceLab": {"StateMachineArn": lab.state_machine_arn, "FsxIdleHours": "8"}}))
        assert main(["fsx", "status", "--outputs", str(outputs), "--json"]) == 0
        state = json.loads(capsys.readouterr().out)
        assert state["up"] and state["usd_per_hour"] > 0.2 and state["age_hours"] >= 0
        assert state["deadline"] and state["idle_hours"] == 8
        assert state["data"]["ready"] is False and "EXECUTING" in state["data"]["reason"]
        assert main(["fsx", "status", "--outputs", str(outputs)]) == 0
        text = capsys.readouterr().out
        assert "FSx: UP" in text and "idle guard: deletes FSx at" in text and "S3 metadata import" in text


def _full_history(lab, execution_arn: str) -> list[dict]:
    sfn, events, token = lab.client("stepfunctions"), [], None
    while True:
        page = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000, **({"nextToken": token} if token else {}))
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            return events


def _settled_history(lab, execution_arn: str, quiet_seconds: float = 1.0, timeout: float = 60.0) -> list[dict]:
    """The whole history once no event has been added for ``quiet_seconds``. What is watched is the stand-in's
    own count of the events it adds (patches.HOOKS.history_events, the test compares it with the history): the
    history itself, ~8,000 events through moto's serializer, is seconds of CPU a fetch, so it is fetched once."""
    from dslab.emulator import patches
    deadline, count = time.monotonic() + timeout, -1
    while (now := max(patches.HOOKS.history_events.values(), default=0)) != count:
        if time.monotonic() > deadline:
            raise AssertionError(f"the history of {execution_arn} still grows after {timeout:.0f} s")
        count = now
        time.sleep(quiet_seconds)
    return _full_history(lab, execution_arn)


def _events_per_state(events: list[dict]) -> dict[str, int]:
    """Every history event counted against the state it belongs to (following previousEventId back to the
    state's StateEntered event; the execution's own events go to "")."""
    by_id = {e["id"]: e for e in events}
    owner: dict[int, str] = {}
    counts: dict[str, int] = {}
    for event in sorted(events, key=lambda e: e["id"]):
        details = event.get("stateEnteredEventDetails") or event.get("stateExitedEventDetails")
        if details:
            name = details["name"]
        else:
            previous = by_id.get(event.get("previousEventId"))
            name = owner.get(previous["id"], "") if previous else ""
        owner[event["id"]] = name
        counts[name] = counts.get(name, 0) + 1
    return counts


def _moto_map_race(execution) -> bool:
    """A race inside moto's Step Functions interpreter, not the lab's: about once in ten full suite runs, under the
    at-cap test's 40-way Map, a Task state of a Map iteration reads a dict where its TimeoutSeconds belongs (moto pops
    its evaluation stack after the environment stopped pushing; its WaitForTaskToken thread logs a TypeError) and
    RunLanes ends States.Runtime with a cause moto raises about its own error name ("Custom Error Names MUST NOT begin
    with the prefix 'States.'", as localstack#10489 reports). No state of the definition raises it. Only that exact
    signature runs the test again, once; any other failure fails it."""
    cause = execution.cause or ""
    return (execution.error == "States.Runtime" and "'RunLanes'" in cause
            and "Custom Error Names MUST NOT begin with the prefix 'States.'" in cause)


def test_every_loop_at_its_cap_with_the_largest_run_stays_under_the_history_limit(emulated):
    """The worst execution the lab allows: MAX_JOBS jobs (30% failing), while DataSync never finishes,
    FSx's S3 import never ends, the FSx stack takes forever to delete and another execution holds the
    Express dataset's staging lock. Every loop stops at its cap, Collect stores the results and the
    teardown reports its outcome: the history stays under 25,000 events, as limits.py's arithmetic says,
    and each loop's round costs what the arithmetic counts."""
    from dslab.emulator import patches
    from dslab.workflow.express_staging import take_staging_lock
    datasets_ = [f"ds-{i:02d}" for i in range((limits.MAX_JOBS - 5) // 5)]
    long_reason = "AlgorithmError: " + ("Traceback line of a failing user script; " * 100)  # ~4.3 KB causes
    failures: dict[str, bool] = {}

    def decide(request):
        failures.setdefault(request["TrainingJobName"], len(failures) % 10 < 3)
        return long_reason if failures[request["TrainingJobName"]] else None

    experiment = {"name": "worst", "instance_type": "ml.m5.xlarge", "compute": "v100", "max_concurrency": 40,
                  "teardown_fsx": True,
                  "trials": [{"name": "base", "datasets": [{"name": d, "format": "jpg"} for d in datasets_]},
                             {"name": "express", "storage": "express", "modes": ["FastFile"],
                              "datasets": [{"name": "locked", "format": "jpg"}]}]}
    for attempt in (1, 2):
        failures.clear()
        with emulated(ScriptedJobs(fail=decide), fsx_import_seconds=10**9, fsx_delete_seconds=10**9,
                      time_scale=0.0002) as lab:
            patches.HOOKS.datasync_seconds = 10**9
            put_datasets(lab, datasets_ + ["locked"])
            assert take_staging_lock(lab.client("s3"), lab.express_bucket, "locked", "another-execution", stale_after=10**9) is None
            execution = lab.run(experiment, timeout=1800)
            if attempt == 1 and _moto_map_race(execution):
                print(f"\nmoto's interpreter race ended the run ({execution.cause}): running it again, in a fresh lab")
                continue
            assert execution.status == "FAILED" and execution.error == "FsxTeardownFailed", execution.cause
            results = lab.results(execution)
            records = results["records"]
            assert len(records) == len(datasets_) * 5 + 1
            failed = [r for r in records if r["status"] == "Failed" and r["mode"] != "EFS"]
            assert len(failed) == sum(failures.values()) and all(r["failure_reason"].startswith("AlgorithmError") for r in failed)
            assert all(r["status"] == "Failed" for r in records if r["mode"] == "EFS")          # DataSync timed out
            assert all(r["status"] == "Skipped" for r in records if r["mode"] == "FSx")         # the import never ended
            assert [r["status"] for r in records if r.get("storage") == "express"] == ["Skipped"]   # the lock never freed
            assert results["teardown"]["status"] == "TIMED_OUT"
            assert execution.max_state_bytes < limits.MAX_STATE_BYTES
            events = _settled_history(lab, execution.arn)
            # The stand-in counts every event it adds: the count is the history. (The execution's own snapshot, taken
            # when it ended, may precede the last events of iterations still being aborted on a loaded machine.)
            assert len(events) == max(patches.HOOKS.history_events.values()) >= execution.history_events
            per_state = _events_per_state(events)
            entered: dict[str, int] = {}
            for event in events:
                if "stateEnteredEventDetails" in event:
                    name = event["stateEnteredEventDetails"]["name"]
                    entered[name] = entered.get(name, 0) + 1
            rounds = {"efs": entered.get("CountEfsSyncCheck", 0), "fsx": entered.get("CheckFsxData", 0),
                      "teardown": entered.get("CheckTeardown", 0), "express_waits": entered.get("StageExpress", 0)}
            assert rounds == {"efs": limits.EFS_SYNC_MAX_CHECKS, "fsx": limits.FSX_DATA_MAX_CHECKS,
                              "teardown": limits.TEARDOWN_MAX_CHECKS, "express_waits": limits.EXPRESS_LOCK_MAX_WAITS}, rounds
            loops = {
                "efs": sum(per_state.get(s, 0) for s in ("WaitEfsSync", "DescribeEfsSync", "CountEfsSyncCheck", "EfsSyncDone?")),
                "fsx": sum(per_state.get(s, 0) for s in ("WaitFsxData", "CheckFsxData", "FsxDataReady?")),
                "teardown": sum(per_state.get(s, 0) for s in ("WaitTeardown", "CheckTeardown", "TeardownSettled?")),
                "express_waits": sum(per_state.get(s, 0) for s in ("WaitExpressLock", "StageExpress", "ExpressStagingDone?",
                                                                   "ExpressLockWaitOver?")),
            }
            # Each loop's events: its rounds at what limits.py counts per round, plus its first and last steps
            # (HISTORY_EVENTS_BASE holds those).
            per_round = {k: loops[k] / rounds[k] for k in loops}
            expected = {"efs": limits.EVENTS_PER_EFS_CHECK, "fsx": limits.EVENTS_PER_FSX_CHECK,
                        "teardown": limits.EVENTS_PER_TEARDOWN_CHECK, "express_waits": limits.EVENTS_PER_EXPRESS_WAIT}
            for loop, events_per_round in expected.items():
                assert loops[loop] <= rounds[loop] * events_per_round + 4, (loop, loops[loop], rounds[loop])
            # The Express branch ended at its lock cap; a run could instead spend its copying invocations
            # too: they are counted on top.
            worst = len(events) + limits.EXPRESS_STAGING_MAX_INVOCATIONS * limits.EVENTS_PER_EXPRESS_INVOCATION
            assert worst < limits.MAX_HISTORY_EVENTS
            # And with every job at its worst too (each retried to exhaustion: measured in the test above),
            # the loops as measured here still leave MAX_JOBS room: the bound limits.py derives.
            assert (sum(loops.values()) + limits.EXPRESS_STAGING_MAX_INVOCATIONS * limits.EVENTS_PER_EXPRESS_INVOCATION
                    + limits.HISTORY_EVENTS_BASE + limits.MAX_JOBS * limits.HISTORY_EVENTS_PER_JOB_WORST) <= limits.MAX_HISTORY_EVENTS
            print(f"\nworst execution: {len(events):,} history events ({worst:,} with every Express invocation); "
                  f"events per round {({k: round(v, 1) for k, v in per_round.items()})}; loops {loops}")
        break


def test_idle_guard_sees_a_running_execution_beyond_the_first_page(emulated):
    """ListExecutions answers the newest first: an older execution still running sits behind 50 newer
    ones that ended. The guard lists RUNNING executions, every page."""
    from dslab.workflow import fsx_guard
    with emulated(ScriptedJobs()) as lab:
        sfn = lab.client("stepfunctions")
        definition = {"StartAt": "Long?", "States": {
            "Long?": {"Type": "Choice", "Choices": [{"Variable": "$.long", "BooleanEquals": True, "Next": "Hold"}],
                      "Default": "Done"},
            "Hold": {"Type": "Wait", "Seconds": 10**7, "Next": "Done"}, "Done": {"Type": "Succeed"}}}
        machine = sfn.create_state_machine(name="other-workflow", definition=json.dumps(definition),
                                           roleArn=lab.training_role_arn)["stateMachineArn"]
        held = sfn.start_execution(stateMachineArn=machine, name="old-and-running", input=json.dumps({"long": True}))
        for i in range(60):
            lab.wait(sfn.start_execution(stateMachineArn=machine, name=f"quick-{i:02d}", input="{}")["executionArn"])
        newest = sfn.list_executions(stateMachineArn=machine, maxResults=50)["executions"]
        assert "old-and-running" not in [e["name"] for e in newest]   # what the guard used to read
        verdict = fsx_guard.guard(lab.client("cloudformation"), sfn, FSX_STACK, machine, idle_hours=1e-9,
                                  sagemaker=lab.client("sagemaker"))
        assert verdict["action"] == "kept" and "old-and-running" in verdict["why"]
        sfn.stop_execution(executionArn=held["executionArn"])


def test_idle_guard_keeps_fsx_while_a_training_job_outside_the_workflow_reads_it(emulated):
    """An exported script's job, or the user's own, reads FSx without any workflow execution running."""
    from dslab.workflow import fsx_guard
    release = threading.Event()

    class Held(ScriptedJobs):
        def __call__(self, request, update):
            release.wait(60)
            return super().__call__(request, update)

    with emulated(Held()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        request = json.loads(json.dumps(tiny_requests()[("tiny-jpg", "FSx")]))
        request["TrainingJobName"] = "exported-fsx-job"
        request["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]["FileSystemId"] = lab.fsx_id
        lab.client("sagemaker").create_training_job(**request)
        clients = (lab.client("cloudformation"), lab.client("stepfunctions"))
        verdict = fsx_guard.guard(*clients, FSX_STACK, lab.state_machine_arn, idle_hours=1e-9, sagemaker=lab.client("sagemaker"))
        assert verdict["action"] == "kept" and "exported-fsx-job" in verdict["why"] and lab.fsx_present
        release.set()
        deadline = time.monotonic() + 30
        while lab.client("sagemaker").describe_training_job(TrainingJobName="exported-fsx-job")["TrainingJobStatus"] == "InProgress":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        verdict = fsx_guard.guard(*clients, FSX_STACK, lab.state_machine_arn, idle_hours=1e-9, sagemaker=lab.client("sagemaker"))
        assert verdict["action"] == "deleted"


def test_an_fsx_stack_without_a_service_role_is_not_deleted_with_the_functions_own_rights(emulated):
    """DeleteStack of a stack deployed without a role would use the caller's permissions, which cannot
    delete the file system: the stack would end DELETE_FAILED, FSx still billing. Teardown and the guard
    say so instead."""
    from dslab.emulator.deploy import InProcessDeployer
    from dslab.workflow import fsx_guard
    with emulated(ScriptedJobs()) as lab:
        deployer = InProcessDeployer(lab.cloudformation, lab.assembly_dir)
        deployer.destroy(FSX_STACK)
        body = (lab.assembly_dir / "DataSourceLab-Fsx.template.json").read_text()
        deployer._apply(FSX_STACK, body, parameters={}, role_arn=None)   # e.g. deployed by hand, no role
        lab.refresh()
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["FSx"],
                             "teardown_fsx": True})
        assert execution.status == "FAILED" and execution.error == "FsxTeardownFailed", execution.cause
        teardown = lab.results(execution)["teardown"]
        assert teardown["status"] == "NO_SERVICE_ROLE" and "dslab fsx down" in teardown["message"]
        assert lab.fsx_present
        verdict = fsx_guard.guard(lab.client("cloudformation"), lab.client("stepfunctions"), FSX_STACK,
                                  lab.state_machine_arn, idle_hours=1e-9, sagemaker=lab.client("sagemaker"))
        assert verdict["action"] == "kept" and "service role" in verdict["why"] and lab.fsx_present


def test_an_import_that_failed_for_some_files_says_so_and_the_fsx_jobs_run_on_the_rest(emulated):
    """A FAILED import task (TotalCount = SucceededCount + FailedCount) used to skip every FSx job."""
    with emulated(ScriptedJobs(), fsx_import_failures=1) as lab:
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["FSx"]})
        assert execution.status == "SUCCEEDED", execution.cause
        results = lab.results(execution)
        assert results["records"][0]["status"] == "Completed"
        readiness = results["fsx_data"]
        assert readiness["ready"] is True and "1 of 4 objects not imported (1 files failed to import)" in readiness["reason"]


def test_an_import_that_imported_nothing_skips_the_fsx_jobs_with_the_reason(emulated):
    with emulated(ScriptedJobs(), fsx_import_failures=10**6) as lab:
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File", "FSx"]})
        assert execution.status == "SUCCEEDED", execution.cause
        records = {r["mode"]: r for r in lab.results(execution)["records"]}
        assert records["File"]["status"] == "Completed" and records["FSx"]["status"] == "Skipped"
        assert "imported nothing" in lab.results(execution)["fsx_data"]["reason"]


def test_a_dataset_uploaded_while_fsx_is_up_is_imported_before_its_jobs_start(emulated):
    """Auto-import brings new objects in "some time" later (no latency is documented): a dataset written
    after the association exists gets an import task of its own, and its jobs wait for it."""
    created = {}

    class Timed(ScriptedJobs):
        def __call__(self, request, update):
            created[request["TrainingJobName"]] = time.monotonic()
            return super().__call__(request, update)

    with emulated(Timed(), fsx_import_seconds=3000) as lab:
        put_datasets(lab, ["early"])
        time.sleep(3000 * lab.time_scale)       # the association's own import ends
        s3 = lab.client("s3")
        for i in range(3):
            s3.put_object(Bucket=lab.bucket, Key=f"datasets/late/part-{i}.bin", Body=b"x" * 100)
        s3.put_object(Bucket=lab.bucket, Key="datasets/late.stats.json", Body=json.dumps({
            "files": 3, "bytes": 300, "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))}).encode())
        execution = lab.run({**TINY, "datasets": [{"name": "late", "format": "jpg"}, {"name": "early", "format": "jpg"}],
                             "modes": ["FSx"]})
        assert execution.status == "SUCCEEDED", execution.cause
        tasks = lab.client("fsx").describe_data_repository_tasks()["DataRepositoryTasks"]
        # Import tasks name S3 paths ("in the format s3://bucket-name/prefix"): the association's own, then the
        # late dataset's under its DataRepositoryPath; none for "early": it was there
        assert [t["Paths"] for t in tasks] == [[f"s3://{lab.bucket}/datasets/"], [f"s3://{lab.bucket}/datasets/late/"]]
        assert [t["Lifecycle"] for t in tasks] == ["SUCCEEDED", "SUCCEEDED"]
        assert tasks[1]["Status"]["TotalCount"] == 3                     # the late dataset's three objects
        started = min(created.values())
        assert started >= lab._fsx_tasks[1]["_started"] + 3000 * lab.time_scale   # after the new import ended
        assert {r["status"] for r in lab.results(execution)["records"]} == {"Completed"}


def import_task(fsx, file_system_id, paths):
    return fsx.create_data_repository_task(Type="IMPORT_METADATA_FROM_REPOSITORY", FileSystemId=file_system_id,
                                           Paths=paths, Report={"Enabled": False})["DataRepositoryTask"]


def until_no_task_executes(lab, timeout=30.0):
    deadline = time.monotonic() + timeout
    while any(t["Lifecycle"] in ("PENDING", "EXECUTING") for t in lab._fsx_repository_now()[1]):
        assert time.monotonic() < deadline, "an FSx task still executes"
        time.sleep(0.02)


def test_the_stand_ins_fsx_fails_an_import_task_whose_paths_are_not_s3_paths(emulated):
    """CreateDataRepositoryTask.Paths (botocore's FSx model): "For import tasks, the list contains paths in the
    Amazon S3 bucket ... in the format s3://bucket-name/prefix" and "If a path that you provide isn't valid, the
    task fails." A file-system path, as the workflow sent before, fails; the S3 path of the same data runs."""
    with emulated(ScriptedJobs(), fsx_import_seconds=10**6) as lab:   # imports run until released
        put_datasets(lab, ["tiny-jpg"])
        lab.end_fsx_imports()         # the association's own import ends: FSx runs one task at a time
        until_no_task_executes(lab)
        fsx = lab.client("fsx")
        for paths in (["/datasets/tiny-jpg"], ["datasets/tiny-jpg"], ["s3://another-bucket/datasets/tiny-jpg/"]):
            task = import_task(fsx, lab.fsx_id, paths)
            assert task["Lifecycle"] == "FAILED" and paths[0] in task["FailureDetails"]["Message"], paths
        good = import_task(fsx, lab.fsx_id, [f"s3://{lab.bucket}/datasets/tiny-jpg/"])
        objects = lab.client("s3").list_objects_v2(Bucket=lab.bucket, Prefix="datasets/tiny-jpg/")["KeyCount"]
        assert good["Lifecycle"] == "EXECUTING" and good["Status"]["TotalCount"] == objects > 0


def test_the_stand_ins_fsx_runs_one_data_repository_task_at_a_time(emulated):
    """DataRepositoryTaskExecuting (CreateDataRepositoryTask's errors, botocore's FSx model): "An existing data
    repository task is currently executing on the file system. Wait until the existing task has completed, then
    create the new task." The association's own import is such a task; a FAILED one is not."""
    from botocore.exceptions import ClientError
    # Imports run until released (end_fsx_imports), not for a span of wall-clock: on a loaded machine, setting
    # the lab up can take longer than any span short enough for a test.
    with emulated(ScriptedJobs(), fsx_import_seconds=10**6) as lab:
        put_datasets(lab, ["tiny-jpg"])
        fsx = lab.client("fsx")
        path = f"s3://{lab.bucket}/datasets/tiny-jpg/"

        def refused(paths, file_system_id=lab.fsx_id) -> str:
            with pytest.raises(ClientError) as caught:
                import_task(fsx, file_system_id, paths)
            return caught.value.response["Error"]["Code"]

        (own,) = fsx.describe_data_repository_tasks()["DataRepositoryTasks"]
        assert own["Lifecycle"] == "EXECUTING" and refused([path]) == "DataRepositoryTaskExecuting"
        lab.end_fsx_imports()
        until_no_task_executes(lab)
        assert import_task(fsx, lab.fsx_id, ["/datasets/tiny-jpg"])["Lifecycle"] == "FAILED"
        assert import_task(fsx, lab.fsx_id, [path])["Lifecycle"] == "EXECUTING"
        assert refused([path]) == "DataRepositoryTaskExecuting"
        assert refused([path] * 101) == "BadRequest"                      # Paths: "max": 100
        assert refused([path], "fs-0123456789abcdef0") == "FileSystemNotFound"
        assert len(fsx.describe_data_repository_tasks()["DataRepositoryTasks"]) == 3


def test_a_late_dataset_whose_import_failed_is_imported_again_by_the_next_run(emulated):
    """An import that FAILED (such as one a file-system path failed) does not count as the dataset's import:
    the next run starts another, rather than skipping its FSx jobs for good."""
    with emulated(ScriptedJobs(), fsx_import_seconds=60) as lab:
        put_datasets(lab, ["early"])
        time.sleep(60 * lab.time_scale)
        s3 = lab.client("s3")
        s3.put_object(Bucket=lab.bucket, Key="datasets/late/part-0.bin", Body=b"x" * 100)
        s3.put_object(Bucket=lab.bucket, Key="datasets/late.stats.json", Body=json.dumps({
            "files": 1, "bytes": 100, "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))}).encode())
        time.sleep(1.1)
        fsx = lab.client("fsx")
        fsx.create_data_repository_task(Type="IMPORT_METADATA_FROM_REPOSITORY", FileSystemId=lab.fsx_id,
                                        Paths=["/datasets/late"], Report={"Enabled": False})   # what AWS fails
        execution = lab.run({**TINY, "datasets": [{"name": "late", "format": "jpg"}], "modes": ["FSx"]})
        assert execution.status == "SUCCEEDED", execution.cause
        tasks = fsx.describe_data_repository_tasks()["DataRepositoryTasks"]
        assert [(t["Paths"], t["Lifecycle"]) for t in tasks[1:]] == [
            (["/datasets/late"], "FAILED"), ([f"s3://{lab.bucket}/datasets/late/"], "SUCCEEDED")]
        assert lab.results(execution)["records"][0]["status"] == "Completed"


def put_late_dataset(lab, name: str) -> None:
    """A dataset uploaded while FSx is up: its stats file's written_at (whole seconds, as `dslab dataset upload`
    writes it) later than the association's CreationTime."""
    while time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) <= lab._fsx_association["CreationTime"]:
        time.sleep(0.05)
    s3 = lab.client("s3")
    for i in range(3):
        s3.put_object(Bucket=lab.bucket, Key=f"datasets/{name}/part-{i}.bin", Body=b"x" * 100)
    s3.put_object(Bucket=lab.bucket, Key=f"datasets/{name}.stats.json", Body=json.dumps({
        "files": 3, "bytes": 300, "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode())


def until_the_check_says(lab, execution_arn: str, words: str, timeout: float = 60.0) -> None:
    """Until one of the execution's CheckFsxData results says ``words`` (the check's reason)."""
    sfn = lab.client("stepfunctions")
    deadline = time.monotonic() + timeout
    while True:
        pages = sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn)
        if any(words in json.dumps(e, default=str) for page in pages for e in page["events"]):
            return
        assert time.monotonic() < deadline and sfn.describe_execution(executionArn=execution_arn)["status"] == "RUNNING", \
            f"no check said {words!r}"
        time.sleep(0.05)


BUSY = "another data repository task is executing"   # the check's reason on DataRepositoryTaskExecuting


class Timed(ScriptedJobs):
    """Notes when each training job was created."""

    def __init__(self):
        super().__init__()
        self.created: dict[str, float] = {}

    def __call__(self, request, update):
        self.created[request["TrainingJobName"]] = time.monotonic()
        return super().__call__(request, update)


def test_two_datasets_uploaded_while_the_associations_import_runs_are_imported_by_one_task_after_it(emulated):
    """FSx runs one data repository task at a time (DataRepositoryTaskExecuting: "Wait until the existing task
    has completed, then create the new task"). Two datasets uploaded while the association's own import runs:
    the check waits (not a final FsxCheckFailed), then one task imports both, and the jobs start after it."""
    jobs = Timed()
    with emulated(jobs, fsx_import_seconds=10**6) as lab:   # the association's import runs until released
        for name in ("late-a", "late-b"):
            put_late_dataset(lab, name)
        arn = lab.start({**TINY, "datasets": [{"name": "late-a", "format": "jpg"}, {"name": "late-b", "format": "jpg"}],
                         "modes": ["FSx"]})
        until_the_check_says(lab, arn, BUSY)
        released = time.monotonic()
        lab.fsx_import_seconds = 500                        # later imports take 0.5 s
        lab.end_fsx_imports()                               # the association's ends now
        execution = lab.wait(arn)
        assert execution.status == "SUCCEEDED", execution.cause
        tasks = lab.client("fsx").describe_data_repository_tasks()["DataRepositoryTasks"]
        late = [f"s3://{lab.bucket}/datasets/late-a/", f"s3://{lab.bucket}/datasets/late-b/"]
        assert [t["Paths"] for t in tasks] == [[f"s3://{lab.bucket}/datasets/"], late]   # one task, both paths
        assert [t["Lifecycle"] for t in tasks] == ["SUCCEEDED", "SUCCEEDED"] and tasks[1]["Status"]["TotalCount"] == 6
        started = lab._fsx_tasks[1]["_started"]
        assert started >= released and min(jobs.created.values()) >= started + 500 * lab.time_scale
        assert {r["status"] for r in lab.results(execution)["records"]} == {"Completed"}
        assert lab.results(execution)["fsx_data"]["ready"] is True


def test_a_late_dataset_waits_while_another_executions_import_runs(emulated):
    """Two executions, each with a dataset uploaded while FSx is up: the second's import starts once the first's
    has ended, and both executions' FSx jobs run."""
    jobs = Timed()
    with emulated(jobs) as lab:                             # the association's import ends at once
        for name in ("late-a", "late-b"):
            put_late_dataset(lab, name)
        lab.fsx_import_seconds = 10**6                      # the next import runs until released
        one = {**TINY, "modes": ["FSx"]}
        first = lab.start({**one, "datasets": [{"name": "late-a", "format": "jpg"}], "job_prefix": "first"}, name="first")
        deadline = time.monotonic() + 60
        while len(lab._fsx_tasks) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        second = lab.start({**one, "datasets": [{"name": "late-b", "format": "jpg"}], "job_prefix": "second"}, name="second")
        until_the_check_says(lab, second, BUSY)
        released = time.monotonic()
        lab.fsx_import_seconds = 200                        # the first's import ends now, the second's takes 0.2 s
        lab.end_fsx_imports()
        assert lab.wait(first).status == "SUCCEEDED" and lab.wait(second).status == "SUCCEEDED"
        tasks = lab.client("fsx").describe_data_repository_tasks()["DataRepositoryTasks"]
        assert [(t["Paths"], t["Lifecycle"]) for t in tasks[1:]] == [
            ([f"s3://{lab.bucket}/datasets/late-a/"], "SUCCEEDED"), ([f"s3://{lab.bucket}/datasets/late-b/"], "SUCCEEDED")]
        second_import = lab._fsx_tasks[2]["_started"]
        assert second_import >= released
        assert min(t for name, t in jobs.created.items() if name.startswith("second")) >= second_import + 200 * lab.time_scale
        assert all(r["status"] == "Completed" for e in (first, second) for r in lab.results(lab.wait(e))["records"])


def test_spot_trials_are_held_to_the_spot_training_quota(emulated):
    """Spot jobs count against "<type> for spot training job usage", a quota of their own: with no
    on-demand ml.p3.2xlarge quota and two spot ones, a spot trial runs and an on-demand one is refused."""
    from dslab.emulator.lab import DEFAULT_QUOTAS
    quotas = {**DEFAULT_QUOTAS, "ml.p3.2xlarge for training job usage": 0.0, "ml.p3.2xlarge for spot training job usage": 2.0}
    with emulated(ScriptedJobs(), quotas=quotas) as lab:
        put_datasets(lab, ["tiny-jpg"])
        one = {**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File"], "instance_type": "ml.p3.2xlarge"}
        spot = lab.run({**one, "spot": True, "max_concurrency": 4})
        assert spot.status == "SUCCEEDED", spot.cause
        plan_document = lab.read_json(f"results/{spot.name}/plan.json")
        assert plan_document["quotas"]["checked"]["ml.p3.2xlarge for spot training job usage"] == 2.0
        assert "ml.p3.2xlarge for training job usage" not in plan_document["quotas"]["checked"]
        assert plan_document["quotas"]["concurrency"] == 2
        on_demand = lab.run(one)
        assert on_demand.status == "FAILED" and on_demand.error == "ExperimentInvalid"
        assert "'ml.p3.2xlarge for training job usage'" in on_demand.cause and "is 0" in on_demand.cause
