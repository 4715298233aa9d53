"""The fault matrix (dslab/aws/faults.py): every AWS call site of the product has a row, every row a call site; every
(operation, error) pair AWS documents has a reaction; each injectable pair is injected where the stand-in answers
(in the service's own protocol, so botocore parses and retries it as on AWS) at exactly that call site, through the
entry point a user or AWS runs, and the reaction is checked; the state machine's rows are checked against its
synthesized definition; the documentation's table is the generated one."""

from __future__ import annotations

import json
import re

import pytest

from dslab.aws import faults
from dslab.aws.faults import ANSWER, EXIT_2, FINAL, GOES_ON, WAIT
from dslab.core.facts import aws_errors

from . import fault_world
from .fault_world import BUCKET, LOCAL_CHECKPOINTS, STAGED, Injector, World, blockers_machine as _blockers_machine, \
    custom_fsx_stack as _custom_fsx_stack, drive, world  # noqa: F401 - world: the fixture

PAIRS = [(site, fault) for site in faults.PY_SITES if site.injected for fault in site.errors()]
HEAD = ("HeadObject",)


# ---- the inventory --------------------------------------------------------------------------------------------
def test_every_call_site_in_the_code_has_a_row_and_every_row_a_call_site():
    """A row per call: a function that calls an operation twice has a row for each (its occurrence, in source order)."""
    found = {(c.module, c.function, c.call, c.occurrence): c.line for c in faults.scan()}
    rows = {(s.module, s.function, s.call, s.occurrence) for s in faults.PY_SITES}
    missing = sorted(f"{m}:{found[(m, f, c, n)]} {f} calls {c} (call {n})" for m, f, c, n in set(found) - rows)
    stale = sorted(f"{m} {f} {c} (call {n})" for m, f, c, n in rows - set(found))
    assert not missing, "AWS calls without a row in dslab/aws/faults.py:\n" + "\n".join(missing)
    assert not stale, "rows of dslab/aws/faults.py whose call is gone:\n" + "\n".join(stale)


def test_the_scan_finds_a_new_call_and_a_paginator_named_by_a_variable(tmp_path):
    (tmp_path / "dslab").mkdir()
    (tmp_path / "dslab" / "new.py").write_text(
        "def f(s3, name):\n    s3.delete_bucket(Bucket='b')\n    s3.get_paginator(name)\n    s3.copy({}, 'b', 'k')\n")
    calls = {(c.function, c.call) for c in faults.scan(tmp_path)}
    assert calls == {("f", "delete_bucket"), ("f", "get_paginator:?"), ("f", "copy")}


def test_the_scan_numbers_each_call_of_an_operation_in_a_function_in_source_order(tmp_path):
    (tmp_path / "dslab").mkdir()
    (tmp_path / "dslab" / "twice.py").write_text(
        "def f(s3):\n    s3.put_object(Bucket='b', Key='1')\n    s3.get_object(Bucket='b', Key='1')\n"
        "    s3.put_object(\n        Bucket='b', Key='2')\n    s3.put_object(Bucket='b', Key='3'); s3.put_object(Bucket='b', Key='4')\n")
    calls = [(c.call, c.occurrence, c.line, c.end_line) for c in faults.scan(tmp_path)]
    assert calls == [("put_object", 1, 2, 2), ("get_object", 1, 3, 3), ("put_object", 2, 4, 4),
                     ("put_object", 3, 6, 6), ("put_object", 4, 6, 6)]


def test_a_function_calling_an_operation_more_than_once_has_a_row_per_call():
    """The four functions that do today, each call with its own row (and its own injected pairs below)."""
    rows = {}
    for site in faults.PY_SITES:
        rows.setdefault((site.module, site.function, site.call), set()).add(site.occurrence)
    assert rows[("dslab/inputs/datasets.py", "upload", "put_object")] == {1, 2}
    assert rows[("dslab/workflow/plan.py", "_plan", "put_object")] == {1, 2, 3}
    assert rows[("training/dslab_train/s3source.py", "S3Reads.get", "get_object")] == {1, 2}
    assert rows[("training/dslab_train/s3source.py", "S3Reads.get_range", "get_object")] == {1, 2}


def test_every_operation_and_error_comes_from_botocores_models():
    for site in (*faults.PY_SITES, *faults.STATE_SITES, *faults.HANDLER_SITES):
        model = faults.service_model(site.service)
        assert site.operation in model.operation_names, site
        codes = [f.code for f in site.errors()]
        assert len(codes) == len(set(codes))
        modelled = {c for c, _ in faults.modelled_errors(site.service, site.operation)}
        assert modelled <= set(codes)
        assert {c for c, _ in faults.common_errors(site.service)} <= set(codes)


def test_every_error_code_met_has_its_own_fix():
    """No pair falls back to the generic line: each code is a class (throttled, unavailable, denied) or named."""
    generic = "fix what its message names"
    for site in faults.PY_SITES:
        for fault in site.errors():
            if site.reaction_for(fault).kind in (ANSWER,):
                continue
            assert generic not in aws_errors.fix(fault.code, fault.status, operation=site.operation), (site.key, fault.code)


def test_counts_add_up():
    figures = faults.counts()
    assert figures["pairs"] == sum(figures["by reaction"].values())
    assert figures["pairs"] == figures["injected"] + figures["checked against the definition"] + figures["listed only"]
    assert figures["injected"] == len(PAIRS)


def test_the_documentation_holds_the_generated_table():
    assert faults.DOC.read_text() == faults.markdown(), "run: python -m dslab.aws.faults --write"


# ---- the state machine, from its synthesized definition -----------------------------------------------------------
def _definition(lab) -> dict:
    from .test_workflow import definition_of
    return definition_of(lab)


def _states(definition: dict) -> dict[str, dict]:
    from .test_workflow import tasks_of
    return dict(tasks_of(definition))


def _integration(state: dict) -> tuple[str, str]:
    resource = state["Resource"]
    if ":aws-sdk:" in resource:
        service, action = resource.split(":aws-sdk:")[1].split(":")[:2]
        return service, action[0].upper() + action[1:]
    if ":sagemaker:createTrainingJob" in resource:
        return "sagemaker", "CreateTrainingJob"
    if ":lambda:invoke" in resource or ":function:" in resource:
        return "lambda", "Invoke"
    raise AssertionError(f"unknown integration {resource}")


def _matches(names: list[str], error: str) -> bool:
    return error in names or "States.ALL" in names or "States.TaskFailed" in names


def test_every_task_state_has_a_row_and_its_retry_and_catch_are_as_the_rows_say(bound_lab):
    states = _states(_definition(bound_lab))
    tasks = {name: s for name, s in states.items() if s.get("Type") == "Task"}
    rows = {row.state: row for row in faults.STATE_SITES}
    assert set(tasks) == set(rows), f"Task states without a row: {set(tasks) - set(rows)}; rows without a state: " \
                                    f"{set(rows) - set(tasks)}"
    for name, state in tasks.items():
        row = rows[name]
        assert _integration(state) == (row.service, row.operation), name
        for fault in row.errors():
            error, retried, target, _ = row.outcome(fault)
            retrier = next((r for r in state.get("Retry", []) if _matches(r["ErrorEquals"], error)), None)
            assert (retrier is not None) == (retried is not None), (name, error)
            if retrier is not None:   # the row's tries are the definition's
                assert (retried.interval, retried.max_attempts, retried.backoff) == (
                    retrier["IntervalSeconds"], retrier["MaxAttempts"], retrier["BackoffRate"]), (name, error)
            catcher = next((c for c in state.get("Catch", []) if _matches(c["ErrorEquals"], error)), None)
            assert catcher is not None and catcher["Next"] == target, (name, error, catcher)


def _choose(choice: dict, data: dict) -> str:
    """The next state of a Choice for ``data`` (the rules the workflow's choices use)."""
    import fnmatch

    def value(path: str):
        current = data
        for part in path[2:].split("."):
            if not isinstance(current, dict) or part not in current:
                return None
            current = current[part]
        return current

    def holds(rule: dict) -> bool:
        if "And" in rule:
            return all(holds(r) for r in rule["And"])
        if "Or" in rule:
            return any(holds(r) for r in rule["Or"])
        if "Not" in rule:
            return not holds(rule["Not"])
        found = value(rule["Variable"])
        if "IsPresent" in rule:
            return (found is not None) == rule["IsPresent"]
        if "StringEquals" in rule:
            return found == rule["StringEquals"]
        if "StringMatches" in rule:
            return isinstance(found, str) and fnmatch.fnmatchcase(found, rule["StringMatches"])
        if "NumericLessThan" in rule:
            return found < rule["NumericLessThan"]
        raise AssertionError(f"rule not known here: {rule}")

    return next((r["Next"] for r in choice["Choices"] if holds(r)), choice.get("Default"))


def test_training_job_errors_are_classified_as_the_rows_say(bound_lab):
    """CreateTrainingJob's errors reach the Classify choice as Step Functions names them (the stand-in's mapping), with
    the service's code in the Cause; the choice decides retry or record, and the rows say which."""
    from dslab.emulator.patches import step_functions_error
    states = _states(_definition(bound_lab))
    for row in (r for r in faults.STATE_SITES if r.classify):
        for fault in row.errors():
            name, cause = step_functions_error(fault.code, f"injected {fault.code}", fault.status)
            nxt = _choose(states[row.classify], {"error": {"Error": name, "Cause": cause}, "run": {"attempt": 1, "retries": 0}})
            expected = row.classified.get(fault.code, row.classified_default)[0]
            assert nxt == expected, (row.state, fault.code, name, nxt)
        zero = "The account-level service limit 'ml.p3.2xlarge for training job usage' is 0 Instances"
        name, cause = step_functions_error("ResourceLimitExceeded", zero, 400)
        assert _choose(states[row.classify], {"error": {"Error": name, "Cause": cause},
                                              "run": {"attempt": 1, "retries": 0}}) == "HasCause?"


# ---- the state machine, executed in the stand-in with errors injected ---------------------------------------------
def _entered(execution, state: str) -> bool:
    return any((e.get("stateEnteredEventDetails") or {}).get("name") == state for e in execution.history)


def test_the_executed_state_machine_reacts_as_its_rows_say_and_keeps_what_it_stored(emulated):
    """Errors injected where the stand-in answers the state machine's own tasks and its functions: a LoadRequest
    refused (the job is recorded Failed with the error's Step Functions name and its Cause, the others run), a
    CreateTrainingJob answered ServiceUnavailable (retried with backoff, then the job runs), a DescribeTaskExecution
    answered InternalException (a look that failed: the next one looks again, and the EFS jobs run); then Collect
    refused its plan.json (ResultsNotStored naming `dslab report`, the teardown still runs, plan.json stays)."""
    from dslab.emulator.patches import HOOKS

    from .scripted_jobs import ScriptedJobs
    from .test_workflow import TINY, put_datasets
    jobs = ScriptedJobs()
    answered: dict[str, int] = {}

    def fault(service_id: str, operation: str, request):
        body = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
        rule = None
        if service_id == "s3" and operation == "GetObject" and "/requests/" in request.url and "-file-" in request.url:
            rule = ("load", 403, "AccessDenied", "Access Denied", 99)
        elif service_id == "sagemaker" and operation == "CreateTrainingJob" and "-fastfile-" in body:
            rule = ("create", 503, "ServiceUnavailable", "Service is unavailable", 3)   # one call: botocore's 3 tries
        elif service_id == "datasync" and operation == "DescribeTaskExecution":
            rule = ("look", 500, "InternalException", "injected", 3)
        elif service_id == "s3" and operation == "GetObject" and request.url.endswith("/plan.json"):
            # the deployed Collect's call, made in its own interpreter: the stand-in names the function that makes it
            collect = getattr(request, "function", "") == "dslab.workflow.handlers.collect"
            rule = ("collect", 403, "AccessDenied", "Access Denied", 99) if collect and answered.get("runs") else None
        if rule is None or answered.get(rule[0], 0) >= rule[4]:
            return None
        answered[rule[0]] = answered.get(rule[0], 0) + 1
        return rule[1:4]

    with emulated(jobs) as lab:
        put_datasets(lab, ["tiny-jpg"])
        HOOKS.api_fault = fault
        try:
            first = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}],
                             "modes": ["File", "FastFile", "EFS"]})
            answered["runs"] = 1
            second = lab.run({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["FSx"],
                              "teardown_fsx": True})
        finally:
            HOOKS.api_fault = None
        assert first.status == "FAILED" and first.error == "JobsFailed", first.cause
        records = {r["mode"]: r for r in lab.results(first)["records"]}
        # LoadRequest: Catch -> HasCause? -> KeepFailureCause -> RecordFailed; the error named as Step Functions names it
        assert records["File"]["status"] == "Failed" and "S3.AccessDeniedException" in records["File"]["failure_reason"]
        assert "Access Denied" in records["File"]["failure_reason"]
        # CreateTrainingJob: SageMaker.AmazonSageMakerException, Cause "ServiceUnavailable": retried, then completed
        assert records["FastFile"]["status"] == "Completed" and answered["create"] == 3
        assert _entered(first, "ApiBackOffDelay")
        # DescribeTaskExecution: DataSync.InternalException is caught as a look that failed; the next look sees SUCCESS
        assert records["EFS"]["status"] == "Completed" and _entered(first, "EfsSyncLookFailed")
        # Collect refused: the execution says how to rebuild the results; the teardown ran; plan.json is still there
        assert second.status == "FAILED" and second.error == "ResultsNotStored", second.cause
        assert "`dslab report EXECUTION` rebuilds them" in second.cause
        assert _entered(second, "StartTeardown") and not lab.fsx_present
        assert lab.read_json(f"results/{second.name}/plan.json")["jobs"]


# ---- the state machine's Retry and Catch, stated here apart from the product ------------------------------------
# What the workflow promises (docs/reference/workflow.md): a function task that Lambda throttles or fails on its side is
# tried again after 2, 4, 8, 16, 32 and 64 s (6 retries: 7 attempts, full jitter for throttling, as AWS's best
# practice for Lambda tasks advises); a SageMaker or DataSync task is never retried by a Retry field (SageMaker's
# errors go to Classify*Error, DataSync's transient looks to EfsSyncLookFailed).
LAMBDA_SERVICE_ERRORS = ["Lambda.ClientExecutionTimeoutException", "Lambda.ServiceException",
                         "Lambda.AWSLambdaException", "Lambda.SdkClientException"]
FUNCTION_RETRY = [{"ErrorEquals": LAMBDA_SERVICE_ERRORS, "IntervalSeconds": 2, "MaxAttempts": 6, "BackoffRate": 2},
                  {"ErrorEquals": ["Lambda.TooManyRequestsException"], "IntervalSeconds": 2, "MaxAttempts": 6,
                   "BackoffRate": 2, "JitterStrategy": "FULL"}]
EXPECTED_RETRY = {name: FUNCTION_RETRY for name in ("Plan", "CheckFsxData", "StageExpress", "Collect", "StartTeardown",
                                                    "CheckTeardown")}
ALL = ["States.ALL"]
EXPECTED_CATCH = {
    "Plan": [(ALL, "PlanDidNotFinish")], "CheckFsxData": [(ALL, "FsxCheckFailed")],
    "StageExpress": [(ALL, "ExpressStagingFailed")], "Collect": [(ALL, "CollectFailed")],
    "StartTeardown": [(ALL, "TeardownError")], "CheckTeardown": [(ALL, "TeardownError")],
    "StartEfsSync": [(ALL, "EfsStagingFailed")],
    "DescribeEfsSync": [(["DataSync.ThrottlingException", "DataSync.ServiceUnavailableException",
                          "DataSync.InternalException"], "EfsSyncLookFailed"), (ALL, "EfsStagingFailed")],
    "CancelEfsSync": [(ALL, "EfsStagingTimedOut")], "LoadRequest": [(ALL, "HasCause?")],
    "KeepFailureCause": [(ALL, "RecordFailed")], "RunTrainingJob": [(ALL, "ClassifyError")],
    "RunScriptTrainingJob": [(ALL, "ClassifyScriptError")],
    "RunCheckpointTrainingJob": [(ALL, "ClassifyCheckpointError")]}


def test_each_task_states_retry_and_catch_are_the_ones_promised(bound_lab):
    """Every field of every Retry (ErrorEquals, IntervalSeconds, MaxAttempts, BackoffRate, JitterStrategy) and every
    Catch (ErrorEquals, Next) of the synthesized definition, against the values stated above; and the matrix's rows
    (their tries and words) say the same."""
    tasks = {name: s for name, s in _states(_definition(bound_lab)).items() if s.get("Type") == "Task"}
    assert set(tasks) == set(EXPECTED_CATCH)
    for name, state in tasks.items():
        assert state.get("Retry", []) == EXPECTED_RETRY.get(name, []), name
        assert [(c["ErrorEquals"], c["Next"]) for c in state.get("Catch", [])] == EXPECTED_CATCH[name], name
    rows = [r for r in faults.pair_rows() if r["context"] == "state machine"]
    for row in rows:
        state = row["where"].split("`")[1]
        retried = any(row["name"] in r["ErrorEquals"] for r in EXPECTED_RETRY.get(state, []))
        assert row["attempts"] == (7 if retried else 1), row
        assert ("Retry (6 retries after 2, 4, 8, 16, 32 and 64 s: 7 attempts)" in row["says"]) == retried, row


def test_a_throttled_function_is_tried_seven_times_then_caught_and_a_passing_throttle_is_retried(emulated):
    """Executed: Lambda throttles the Plan function's every invocation: Step Functions tries the task 7 times (the
    first and 6 retries), then the Catch ends the execution PlanFailed before any job. Throttled only at the first
    two tries: the third runs Plan and the workflow goes on to its jobs."""
    from dslab.emulator.patches import HOOKS

    from .scripted_jobs import ScriptedJobs
    from .test_workflow import TINY, put_datasets
    tries: list[str] = []
    limit = [None]

    def throttle(service_id: str, operation: str, request):
        if service_id != "lambda" or operation != "Invoke" or "Plan" not in request.url:
            return None
        tries.append(request.url)
        if limit[0] is not None and len(tries) > limit[0]:
            return None
        return 429, "TooManyRequestsException", "Rate exceeded"

    with emulated(ScriptedJobs()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        experiment = {**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File"]}
        HOOKS.api_fault = throttle
        try:
            failed = lab.run(experiment)
            attempts_per_try = len(tries) // 7
            tried = len(tries)
            tries.clear()
            limit[0] = 2 * attempts_per_try
            passed = lab.run(experiment)
        finally:
            HOOKS.api_fault = None
        assert attempts_per_try >= 1 and tried == 7 * attempts_per_try, tried   # 7 tries of the task, each its requests
        assert failed.status == "FAILED" and failed.error == "PlanFailed" and _entered(failed, "PlanDidNotFinish")
        assert "TooManyRequestsException" in failed.cause
        assert not _entered(failed, "RunTrainingJob")
        assert passed.status == "SUCCEEDED", (passed.error, passed.cause)
        assert _entered(passed, "RunTrainingJob")
        assert len(tries) == 3 * attempts_per_try   # two throttled tries, the third ran


# ---- the stand-in's rules (dslab/emulator/patches/), each quoted beside its code ----------------------------------
def test_a_second_training_job_of_the_same_name_is_refused_resource_in_use():
    """SageMaker: "The name must be unique within an Amazon Web Services Region in an Amazon Web Services account"
    (CreateTrainingJob, TrainingJobName). moto created a second job; the workflow's reaction (the job is recorded
    Failed, its Cause kept) is the matrix's row for SageMaker.ResourceInUseException."""
    import boto3
    from moto import mock_aws

    from dslab.emulator import patches
    patches.install()
    request = dict(AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
                   RoleArn="arn:aws:iam::123456789012:role/training", OutputDataConfig={"S3OutputPath": "s3://b/o"},
                   ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
                   StoppingCondition={"MaxRuntimeInSeconds": 3600})
    with mock_aws():
        sagemaker = boto3.client("sagemaker", region_name="us-east-1")
        sagemaker.create_training_job(TrainingJobName="job-once", **request)
        with pytest.raises(sagemaker.exceptions.ResourceInUse, match="must be unique within an AWS account and region"):
            sagemaker.create_training_job(TrainingJobName="job-once", **request)
        sagemaker.create_training_job(TrainingJobName="job-other", **request)
    row = next(s for s in faults.STATE_SITES if s.state == "RunTrainingJob")
    name, _, target, _ = row.outcome(faults.Fault("ResourceInUse", 400, "model"))
    assert name == "SageMaker.ResourceInUseException" and target == "ClassifyError"
    assert row.classified_default[0] == "HasCause?" and "ResourceInUse" not in row.classified


def test_a_second_execution_of_a_running_datasync_task_waits_its_turn(monkeypatch):
    """DataSync: "previously queued tasks must finish running before newer tasks can begin" (DescribeTaskExecution,
    StartTime), Status QUEUED. Two workflow executions staging EFS at once start the same task: the second waits
    (DescribeEfsSync keeps looking while it is QUEUED); moto refused it, and the second's EFS jobs failed."""
    from types import SimpleNamespace

    import boto3
    from moto import mock_aws

    from dslab.emulator import patches
    from dslab.emulator.patches import HOOKS, services
    patches.install()
    clock = [0.0]
    monkeypatch.setattr(services, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    staged: list[str] = []
    try:
        with mock_aws():
            HOOKS.stager = lambda task, pattern, overrides: staged.append(pattern)
            HOOKS.datasync_seconds, HOOKS.time_scale = 60.0, 1.0
            ds = boto3.client("datasync", region_name="us-east-1")
            source = ds.create_location_s3(S3BucketArn="arn:aws:s3:::b",
                                           S3Config={"BucketAccessRoleArn": "arn:aws:iam::123456789012:role/r"})["LocationArn"]
            target = ds.create_location_smb(ServerHostname="efs", Subdirectory="/d", User="u", Password="p",
                                            AgentArns=["arn:aws:datasync:us-east-1:123456789012:agent/agent-0123456789abcdef0"])["LocationArn"]
            task = ds.create_task(SourceLocationArn=source, DestinationLocationArn=target)["TaskArn"]

            def start(path):
                return ds.start_task_execution(TaskArn=task, Includes=[{"FilterType": "SIMPLE_PATTERN", "Value": path}])["TaskExecutionArn"]

            def status(arn):
                return ds.describe_task_execution(TaskExecutionArn=arn)["Status"]
            first, second = start("/a"), start("/b")
            assert (status(first), status(second), staged) == ("TRANSFERRING", "QUEUED", [])
            assert ds.describe_task(TaskArn=task)["Status"] == "RUNNING"
            clock[0] = 61.0   # the first copy's time is up: it ends, and the second begins
            assert (status(second), status(first), staged) == ("TRANSFERRING", "SUCCESS", ["/a"])
            clock[0] = 122.0
            assert (status(second), staged) == ("SUCCESS", ["/a", "/b"])
            assert ds.describe_task(TaskArn=task)["Status"] == "AVAILABLE"
    finally:
        patches.reset_hooks()


# ---- injected, at each call site, through its entry point --------------------------------------------------------
def _who(site) -> str | None:
    return None if site.context == "cli" else faults.ROLE.get(site.entries[0])


def _wire_code(site, fault) -> str:
    """The code the caller sees: S3 answers a HEAD request's error with its status alone."""
    return str(fault.status) if site.service == "s3" and site.operation in HEAD else fault.code


# CLI call sites whose line names the IAM action with its service although another service has an operation of the
# same name (the CLI's shared explain_aws cannot tell FSx's DescribeFileSystems from EFS's, so it names neither).
NAMES_ITS_SERVICE = {("dslab/aws/doctor.py", "check_zone")}


def _marker(site, fault, reaction) -> str | None:
    if reaction.marker is not None:
        return reaction.marker or None
    if reaction.kind == ANSWER:
        return None
    code = _wire_code(site, fault)
    if site.context == "cli":
        named = (site.module, site.function) in NAMES_ITS_SERVICE
        service = site.service if named else faults.cli_service_of(site.operation)
    else:
        service = site.service if site.context == "local lab" else None
    return aws_errors.fix(code, fault.status, operation=site.operation, service=service, who=_who(site))


WITHIN_ONE_RUN = ("dslab status --wait", "dslab efs empty", "Plan", "dslab local")   # a WAIT recovers within the run


def _inject(world, monkeypatch, site, fault, entry=None, limit=None) -> tuple[Injector, fault_world.Observation]:
    from dslab.emulator.patches import HOOKS
    injector = Injector(site, fault, limit=limit)
    injector.entry = entry or site.entries[0]
    HOOKS.api_fault = injector
    try:
        observed = drive(world, entry or site.entries[0], site, monkeypatch)
    finally:
        HOOKS.api_fault = None
    return injector, observed


@pytest.mark.parametrize("site, fault", PAIRS, ids=[f"{s.key} | {f.code}" for s, f in PAIRS])
def test_injected_error_meets_its_reaction(world, monkeypatch, site, fault):
    reaction = site.reaction_for(fault)
    attempts = site.attempts(fault)
    # An answer is taken once (a missing object, and the code goes on); a wait recovers at the next look.
    once = reaction.kind == ANSWER or (reaction.kind == WAIT and site.entries[0] in WITHIN_ONE_RUN)
    injector, seen = _inject(world, monkeypatch, site, fault, limit=attempts if once else None)
    assert injector.hits, f"{site.entries[0]} did not reach {site.module}:{site.function} ({site.operation})"
    assert injector.hits >= attempts, f"botocore sent {injector.hits} requests; its retry rules make {attempts}"
    marker = _marker(site, fault, reaction)
    code = _wire_code(site, fault)
    check = CHECKS[site.context if site.context != "function" else site.entries[0]]
    check(site, fault, reaction, seen, marker=marker, code=code, attempts=attempts, world=world)
    if reaction.kind in (ANSWER, GOES_ON):   # and what the user or the workflow gets of it
        _effect(site)(seen, injector, world, reaction.kind)


def _cli_check(site, fault, reaction, seen, *, marker, code, attempts, world):
    assert "Traceback" not in seen.err, seen.err
    errors = [line for line in seen.err.splitlines() if line.startswith("dslab: error:")]
    if reaction.kind == EXIT_2:
        assert seen.rc == 2, (seen.rc, seen.out, seen.err)
        assert len(errors) == 1 and seen.err.strip().splitlines()[-1] == errors[0], seen.err
        assert marker in errors[0], (marker, errors[0])
        if attempts > 1 and reaction.marker is None:
            assert f"after {attempts} attempts" in errors[0]
        if "stats file" in seen.notes:   # an upload that stopped wrote no stats file: the workflow never takes it whole
            assert not seen.notes["stats file"]
        return
    assert seen.rc != 2 and not errors, (seen.rc, seen.err)
    if reaction.kind in (GOES_ON, WAIT) and marker:
        assert marker in seen.out + seen.err, (marker, seen.out, seen.err)


def _plan_check(site, fault, reaction, seen, *, marker, code, attempts, world):
    assert seen.raised is None, seen.raised
    plan = seen.result["plan"]
    if reaction.kind == FINAL:
        assert plan.get("error") in ("PlanFailed", "ExperimentInvalid") and marker in plan["failed"], plan
        return
    assert "failed" not in plan, plan
    if marker:
        stored = world.c["s3"].get_object(Bucket=BUCKET, Key="results/exec-plan/plan.json")["Body"].read().decode()
        assert marker in stored, marker


def _fsx_check(site, fault, reaction, seen, *, marker, code, attempts, world):
    assert seen.raised is None, seen.raised
    result = seen.result
    if reaction.kind == ANSWER:   # "none found": the check goes on as without the error (here: the late import starts)
        assert result["final"] is False and "could not" not in result["reason"], result
        return
    assert result["ready"] is False and result["final"] is (reaction.kind == FINAL), result
    assert marker in result["reason"], (marker, result["reason"])


def _stage_check(site, fault, reaction, seen, *, marker, code, attempts, world):
    assert seen.raised is None, seen.raised
    result = seen.result
    s3 = world.c["s3"]
    staged = json.loads(s3.get_object(Bucket=STAGED, Key="datasets/tiny.stats.json")["Body"].read()) \
        if "datasets/tiny.stats.json" in seen.notes["staged"] else None
    if reaction.kind == ANSWER:
        assert result["done"] and result["ready"], result
        assert staged and staged["files"] == 3
        return
    # Never taken for staged: the marker says the source's stats only once every object is there.
    assert not staged or staged["files"] != 3 or {f"datasets/tiny/c1/img-{i}.jpg" for i in range(3)} <= seen.notes["staged"]
    assert marker in result["reason"], (marker, result["reason"])
    if reaction.kind == WAIT:
        assert result["wait"] is True and result["done"] is False, result
        return
    assert result["done"] is True and result["ready"] is False, result
    lock = "datasets/tiny.staging-lock.json"
    if lock in seen.notes["staged"] and site.function != "release_staging_lock":
        # a lock left is another's (a stale one it could not take over), never ours, unless releasing it was refused:
        # then it turns stale and the next staging takes it over
        held = json.loads(s3.get_object(Bucket=STAGED, Key=lock)["Body"].read())
        assert held["execution"] != "exec-stage", held


def _raises_check(site, fault, reaction, seen, *, marker, code, attempts, world):
    """Collect, Teardown, the idle guard: FINAL (and the guard's WAIT) is the function failing with the AWS error, which
    the state machine's Catch (or EventBridge's retry) meets; what was stored stays."""
    if reaction.kind == ANSWER or (reaction.kind in (GOES_ON,) and site.entries[0] != "Teardown (check)"):
        assert seen.raised is None, seen.raised
        if marker:
            assert marker in seen.text, marker
        return
    if reaction.kind == WAIT and site.entries[0] == "Teardown (check)":
        assert seen.raised is None and seen.result["final"] is False and marker in seen.result["message"], seen.result
        return
    assert seen.raised is not None, seen.result
    assert aws_errors.aws_error(seen.raised).code == code
    if "results" in seen.notes:
        assert json.loads(seen.notes["results"]) == {"records": [], "summary": {}}   # results.json as Collect left it
    if site.entries[0] == "idle guard":
        assert seen.notes["fsx_stack"] != "GONE" and "DELETE" not in seen.notes["fsx_stack"]


def _emptier_check(site, fault, reaction, seen, *, marker, code, attempts, world):
    assert seen.raised is None, seen.raised
    if reaction.kind == ANSWER:
        assert seen.result["status"] == "SUCCESS", seen.result
        return
    assert seen.result["status"] == "FAILED" and "dslab express empty --yes" in seen.result["reason"], seen.result
    assert code in seen.result["reason"]


def _training_check(site, fault, reaction, seen, *, marker, code, attempts, world):
    from dslab_train.s3source import S3ReadError
    assert isinstance(seen.raised, S3ReadError), seen.raised
    text = str(seen.raised)
    assert code in text and f"after {attempts} attempts" in text and "fix what S3's message names" not in text, text


def _local_check(site, fault, reaction, seen, *, marker, code, attempts, world):
    """The local lab: a job the runner ran fails with a FailureReason naming the refused request and the fix (never
    the executor's crash); `dslab job run-local` says it and exits 1; `dslab local` goes on."""
    entry = site.entries[0]
    if entry in ("dslab local", "dslab local (interrupted)"):
        from dslab.local.lab import Interrupted, LocalRun
        if entry == "dslab local":   # the look was skipped, the run went on to its end
            assert seen.raised is None and isinstance(seen.result, LocalRun), seen.raised
            assert seen.result.execution_status == "SUCCEEDED" and seen.notes["reports"], seen.notes
            # the next look was made: the jobs that had ended are in results.json, as each look records them
            recorded = {r["job_name"] for r in seen.notes["results.json"]["records"]}
            assert recorded == {"job-a", "job-b"}, recorded
        else:
            assert isinstance(seen.raised, Interrupted), seen.raised
        return
    if entry == "dslab job run-local":
        assert seen.rc == 1 and "Traceback" not in seen.err, (seen.rc, seen.out, seen.err)
        line = seen.out.splitlines()[0]
        assert line.startswith("folder-job: Failed - ClientError: "), line
        reason = line
    else:
        assert not seen.notes["executor errors"], seen.notes["executor errors"]   # no crash of the executor
        assert seen.result["TrainingJobStatus"] == "Failed", seen.result
        reason = seen.result["FailureReason"]
        assert reason.startswith("ClientError: ") and not reason.startswith("ClientError: checkpoint sync"), reason
        assert reason.count("ClientError") == 1, reason
    assert marker in reason, (marker, reason)
    if reaction.marker is None:   # the request refused, and how many times botocore sent it
        assert f"({code}" in reason, reason
        if attempts > 1:
            assert f"after {attempts} attempts" in reason, reason
    # A checkpoint S3 (or the script's endpoint) did not take is never taken for synced: the sync stopped there.
    if site.function == "LabStorage.upload":
        assert seen.notes["checkpoints"] == [LOCAL_CHECKPOINTS + "step-1.pt"], seen.notes
    if site.function == "LabStorage.delete_object":
        assert seen.notes["checkpoints"] == [LOCAL_CHECKPOINTS + "step-1.pt", LOCAL_CHECKPOINTS + "step-2.pt"]
    if site.function == "FolderStorage.upload":
        assert "checkpoints/ck/step-2.pt" not in seen.notes["script's objects"], seen.notes
    if site.function == "FolderStorage.delete_object":
        assert "checkpoints/ck/step-1.pt" in seen.notes["script's objects"], seen.notes
    if entry == "local runner" and site.function != "LabStorage.put_object":
        assert seen.notes["artifacts"] == [], seen.notes   # failed before its Uploading phase stored anything


CHECKS = {"local lab": _local_check, "cli": _cli_check, "Plan": _plan_check, "CheckFsxData": _fsx_check, "StageExpress": _stage_check,
          "Collect": _raises_check, "Teardown (start)": _raises_check, "Teardown (check)": _raises_check,
          "idle guard": _raises_check, "custom resource": _emptier_check, "training script": _training_check}


SHARED = [(site, entry) for site in faults.PY_SITES if site.injected for entry in site.entries[1:]]


@pytest.mark.parametrize("site, entry", SHARED, ids=[f"{e} | {s.key}" for s, e in SHARED])
def test_every_entry_of_a_row_reaches_its_call_site_and_reacts_alike(world, monkeypatch, site, entry):
    """A row's other entry points: the same call site, the same reaction to a throttled call."""
    fault = next(f for f in site.errors() if aws_errors.kind(f.code, f.status) == "throttled")
    injector, seen = _inject(world, monkeypatch, site, fault, entry=entry)
    assert injector.hits >= site.attempts(fault), f"{entry} did not reach {site.module}:{site.function}"
    reaction = site.reaction_for(fault)
    if site.context == "cli":
        _cli_check(site, fault, reaction, seen, marker=_marker(site, fault, reaction), code=fault.code,
                   attempts=site.attempts(fault), world=world)
    else:
        assert seen.raised is not None and aws_errors.aws_error(seen.raised).code == fault.code


# Which request each call of an operation makes, where a function makes several: stated here, apart from the scan.
OCCURRENCE_REQUESTS = {
    ("dslab/inputs/datasets.py", "upload", 1): "/datasets/up.manifest",
    ("dslab/inputs/datasets.py", "upload", 2): "/datasets/up.dataset.json",
    ("dslab/workflow/plan.py", "_plan", 1): "/results/exec-plan/requests/",
    ("dslab/workflow/plan.py", "_plan", 2): "/results/exec-plan/plan.json",
    ("dslab/workflow/plan.py", "_plan", 3): "/results/exec-plan/plan.json",
    ("training/dslab_train/s3source.py", "S3Reads.get", 2): "/datasets/tiny/c1/img-0.jpg",
    ("training/dslab_train/s3source.py", "S3Reads.get_range", 2): "/datasets/tiny/c1/img-0.jpg"}
REPEATED = [s for s in faults.PY_SITES if s.injected and s.calls > 1]


@pytest.mark.parametrize("site", REPEATED, ids=[s.key for s in REPEATED])
def test_each_call_of_an_operation_made_more_than_once_in_a_function_is_injected_alone(world, monkeypatch, site):
    """The injector answers the error at the row's call only (the line the scan found it on): the requests it
    refused are that call's, the same function's other calls of the operation went through, and the reaction is the
    row's."""
    refused: list[str] = []

    class Recording(Injector):
        def __call__(self, service_id, operation, request=None):
            answer = super().__call__(service_id, operation, request)
            if answer is not None:
                refused.append(str(getattr(request, "url", "")))
            return answer

    from dslab.emulator.patches import HOOKS
    fault = faults.Fault("AccessDenied", 403, "common")
    injector = Recording(site, fault)
    injector.entry = site.entries[0]
    HOOKS.api_fault = injector
    try:
        seen = drive(world, site.entries[0], site, monkeypatch)
    finally:
        HOOKS.api_fault = None
    expected = OCCURRENCE_REQUESTS[(site.module, site.function, site.occurrence)]
    assert refused and all(expected in url for url in refused), (expected, refused)
    from collections import Counter
    sent = Counter(url for s, o, url, _ in injector.requests if o == site.operation) - Counter(refused)
    others = {k: v for k, v in OCCURRENCE_REQUESTS.items() if k[:2] == (site.module, site.function)
              and k[2] < site.occurrence}
    for (_, _, occurrence), fragment in others.items():   # the calls before it were made, and answered
        assert any(fragment in url for url in sent), (occurrence, fragment, sent)
    reaction = site.reaction_for(fault)
    CHECKS[site.context if site.context != "function" else site.entries[0]](
        site, fault, reaction, seen, marker=_marker(site, fault, reaction), code="AccessDenied", attempts=1, world=world)


def test_a_watch_gives_up_after_five_failed_looks_and_names_the_execution(world, monkeypatch):
    site = next(s for s in faults.PY_SITES if s.entries == ("dslab status --wait",) and s.operation == "DescribeExecution")
    fault = faults.Fault("ThrottlingException", 400, "common")
    injector, seen = _inject(world, monkeypatch, site, fault)
    assert seen.rc == 2 and injector.hits == 5 * site.attempts(fault)
    assert seen.err.count("this look failed") == 4 and "dslab status" in seen.err.strip().splitlines()[-1]


# ---- what an answer or a goes-on gives the user or the workflow, stated here apart from the product -----------------
# Each ANSWER and GOES_ON pair's effect: the line shown, the request still sent, the record written, the resource
# kept. Keyed by (entry, function, operation); every such row of the matrix needs one (the test below fails where
# one is missing).
def _sent(injector, service: str, operation: str, fragment: str = "") -> int:
    return sum(1 for s, o, url, body in injector.requests if s == service and o == operation
               and (fragment in url or fragment in body))


def _lines(seen, fragment: str) -> list[str]:
    return [line for line in (seen.out + seen.err).splitlines() if fragment in line]


def _stored_plan(world) -> dict:
    return json.loads(world.c["s3"].get_object(Bucket=BUCKET, Key="results/exec-plan/plan.json")["Body"].read())


def _record(results: dict, job: str) -> dict:
    return next(r for r in results["records"] if r["job_name"] == job)


def _doctor_zone_checked(seen):
    assert _lines(seen, "FSx for Lustre:") and _lines(seen, "note: S3 Express One Zone"), seen.out


def effect_doctor_outputs(seen, injector, world, kind):
    _doctor_zone_checked(seen)
    assert seen.rc == 0
    if kind == ANSWER:
        assert _lines(seen, "EFS: no lab deployed in this account and region, so nothing is stored"), seen.out
    else:
        assert _lines(seen, "EFS: what it holds was not read: reading the lab's stack outputs"), seen.out


def effect_doctor_efs(seen, injector, world, kind):
    _doctor_zone_checked(seen)
    assert seen.rc == 0 and _lines(seen, "EFS: what it holds was not read: AWS "), seen.out


def effect_doctor_fsx(seen, injector, world, kind):
    (line,) = _lines(seen, "FSx for Lustre: FSx did not answer in us-east-1")
    assert seen.rc == 1 and _lines(seen, "FSx storage quota:"), seen.out   # the zone is not shown to suit


def effect_doctor_logs(seen, injector, world, kind):
    assert seen.rc == 0 and _lines(seen, "CloudWatch Logs: the region's resource policies were not checked"), seen.out


def effect_doctor_quotas(seen, injector, world, kind):
    _doctor_zone_checked(seen)
    assert _lines(seen, "FSx storage quota: not checked: AWS List"), seen.out


def effect_status_plan(seen, injector, world, kind):
    # plan.json not there yet: the execution is shown without its jobs, and the watch follows it to its end
    assert _lines(seen, "ABORTED: 0/0 jobs done" if "--wait" in injector.entry else "RUNNING:"), seen.out


def effect_status_job(seen, injector, world, kind):
    if "--wait" in injector.entry:
        assert _lines(seen, "ABORTED: 1/2 jobs done (1 failed)"), seen.out
    else:
        assert _lines(seen, "'Pending': 1"), seen.out   # the job SageMaker does not know: Pending


def effect_report_results(seen, injector, world, kind):
    # results.json absent: the report rebuilds every job's record from plan.json and SageMaker
    assert {r["job_name"] for r in seen.notes["results"]["records"]} == {"job-a", "job-b"}
    assert _sent(injector, "sagemaker", "DescribeTrainingJob") >= 2


def effect_report_attempt(seen, injector, world, kind):
    assert seen.rc == 0 and seen.notes["results"] is not None and seen.notes["results"]["records"], seen.out


def effect_job_record(seen, injector, world, kind, results=None):
    results = results or seen.notes["results"]
    a, b = _record(results, "job-a"), _record(results, "job-b")
    assert a["status"] != "Completed" and a["billable_seconds"] is None   # nothing read from SageMaker for it
    assert b["status"] == "Failed"                                        # the other job as SageMaker has it


def effect_script_metrics(seen, injector, world, kind, results=None):
    results = results or seen.notes["results"]
    a = _record(results, "job-a")
    assert a["status"] == "Completed" and a["billable_seconds"] == 145.0   # the job stands, without its metrics
    assert a["metrics"].get("au_percent") != 97.0, a["metrics"]


def effect_reason(seen, injector, world, kind, results=None):
    results = results or seen.notes["results"]
    b = _record(results, "job-b")
    # the recorded error name (the Run map's; none for a running execution's report), not the stored Cause
    recorded = "States.TaskFailed" if injector.entry == "Collect" else "failed"
    assert b["status"] == "Failed" and b["failure_reason"] == recorded, b
    assert "corrupted" not in json.dumps(results)


def effect_run_stats(seen, injector, world, kind):
    # said, and the run goes on: the execution is started
    assert _sent(injector, "sfn", "StartExecution") == 1 and _lines(seen, "started arn:aws:states:"), seen.out
    assert _lines(seen, "dslab: dataset 'tiny':"), seen.err


def effect_code_upload(seen, injector, world, kind):
    assert _sent(injector, "s3", "PutObject", "/code/") == 1   # not there: uploaded
    assert _sent(injector, "sfn", "StartExecution") == 1


def effect_recommend_stats(seen, injector, world, kind):
    assert seen.rc == 0 and _lines(seen, "answer: File"), seen.out
    said = _lines(seen, "the experiment's own figures stand")
    assert bool(said) == (kind == GOES_ON), seen.err


def effect_fsx_down(seen, injector, world, kind):
    assert _lines(seen, "FSx: DOWN (no DataSourceLab-Fsx stack)"), seen.out


def effect_fsx_status_import(seen, injector, world, kind):
    if injector.fault.code == "DataRepositoryAssociationNotFound":
        assert _lines(seen, "datasets: NOT READY: FSx file system") and _lines(seen, "is not linked to S3"), seen.out
    else:
        assert _lines(seen, "datasets: ready: the S3 listing is imported"), seen.out


def effect_deploy_check(seen, injector, world, kind):
    assert seen.rc == 0   # the deploy goes on
    said = _lines(seen, "dslab deploy-check: could not read the deployed lab")
    if kind == GOES_ON:
        assert said and "FSx's capacity and EFS's throughput were not compared with it" in said[0], seen.err
    else:
        assert not said and not seen.err.strip(), seen.err


def effect_deploy_check_fsx(seen, injector, world, kind):
    assert seen.rc == 0
    said = _lines(seen, "administrative actions")
    if kind == GOES_ON:
        assert said and "whether it grew in the last 6 hours was not checked" in said[0], seen.err
    else:
        assert not seen.err.strip(), seen.err


def effect_follow_zone(seen, injector, world, kind):
    assert seen.rc == 0 and not seen.err.strip()
    assert _sent(injector, "ec2", "DescribeSubnets") == 0   # nothing to move: the subnet is never looked up
    if injector.fault.code == "ParameterNotFound":
        assert _sent(injector, "fsx", "DescribeFileSystems") == 0


def effect_express_abort(seen, injector, world, kind):
    # one upload ended meanwhile; the other is still aborted, every object still deleted
    assert _sent(injector, "s3", "AbortMultipartUpload") == 2 and seen.notes["uploads left"] == 1
    assert _lines(seen, "deleted 3 objects") and seen.notes["objects left"] == [], seen.notes


def effect_efs_dataset(seen, injector, world, kind):
    assert _sent(injector, "datasync", "StartTaskExecution") == 1 and _lines(seen, "deleted tiny (EFS datasets/tiny/)")


def effect_efs_in_use(seen, injector, world, kind):
    # an execution that may read EFS: nothing is deleted, and the line says which and why
    assert seen.rc == 1 and _sent(injector, "datasync", "StartTaskExecution") == 0
    expected = "execution run-a is still planning" if injector.site.operation == "GetObject" else \
        "execution run-a's EFS jobs read tiny"
    assert _lines(seen, expected), seen.err


def effect_upload_digest(seen, injector, world, kind):
    # the object whose digest was not read is sent again (a PUT), and the upload completes with its stats file
    assert _sent(injector, "s3", "PutObject", "datasets/up/f0.bin") == 1
    assert _lines(seen, "2 files uploaded") and seen.notes["stats file"], seen.out


def effect_plan_fsx(seen, injector, world, kind):
    plan = _stored_plan(world)
    fsx = [j for j in plan["jobs"] if j["mode"] == "FSx"]
    assert fsx and all(j["skip_reason"] for j in fsx), fsx
    assert all(not j["skip_reason"] for j in plan["jobs"] if j["mode"] != "FSx")
    if kind == ANSWER:
        assert all("dslab fsx up" in j["skip_reason"] for j in fsx)


def effect_plan_quotas(seen, injector, world, kind):
    quotas = _stored_plan(world)["quotas"]
    assert quotas["checked"] == {} and quotas["notes"][0].startswith("training quotas not checked (AWS "), quotas
    assert seen.result["plan"]["job_count"] == 3


def effect_plan_lab(seen, injector, world, kind):
    assert "the workflow's deploy settings" in json.dumps(_stored_plan(world)["lab"])


def effect_plan_optimization(seen, injector, world, kind):
    plan = _stored_plan(world)
    assert not plan.get("fsx_storage_optimization") and seen.result["plan"]["fsx_jobs"] == 1


def effect_plan_efs(seen, injector, world, kind):
    plan = _stored_plan(world)
    assert "failed" not in seen.result["plan"] and any(j["mode"] == "EFS" and not j["skip_reason"] for j in plan["jobs"])


def effect_fsx_none_found(seen, injector, world, kind):
    assert seen.result["final"] is False and "could not" not in seen.result["reason"], seen.result


def effect_staged(seen, injector, world, kind):
    assert seen.result["done"] and seen.result["ready"] and "3 objects copied" in seen.result["reason"], seen.result


def effect_collect(check):
    def effect(seen, injector, world, kind):
        stored = seen.notes["stored"]
        assert stored is not None and seen.result["results_uri"].endswith("results/exec-collect/results.json")
        check(seen, injector, world, kind, results=stored)
    return effect


def effect_teardown_kept(seen, injector, world, kind):
    assert seen.result["status"] == "DEFERRED" and "FSx kept: execution run-a" in seen.result["message"]
    assert seen.notes["fsx_stack"] not in ("GONE",) and "DELETE" not in seen.notes["fsx_stack"]
    assert _sent(injector, "cloudformation", "DeleteStack") == 0


def effect_teardown_gone(seen, injector, world, kind):
    expected = "ALREADY_GONE" if injector.entry == "Teardown (start)" else "DELETE_COMPLETE"
    assert seen.result["status"] == expected and seen.result["final"] is True, seen.result
    assert json.loads(seen.notes["results"])["teardown"]["status"] == expected


def effect_teardown_record(seen, injector, world, kind):
    assert seen.notes["teardown.json"]["status"] == seen.result["status"] == "DEFERRED", seen.notes


def effect_emptier(seen, injector, world, kind):
    assert seen.result["status"] == "SUCCESS"
    if injector.fault.code == "NoSuchBucket":   # the bucket is gone: that pass asks nothing more of it
        follows = "DeleteObjects" if injector.site.operation == "ListObjectsV2" else "AbortMultipartUpload"
        assert _sent(injector, "s3", follows) == 0
        return
    # one upload ended meanwhile: the other is still aborted, and every object deleted
    assert _sent(injector, "s3", "AbortMultipartUpload") == 2 and seen.notes["uploads left"] == 1
    assert seen.notes["objects left"] == [], seen.notes


def effect_local_sweep(seen, injector, world, kind):
    # Ctrl-C: the partial report is written all the same, without the jobs the refused listing would have added
    assert seen.raised.done == 0 and seen.raised.total == 2, (seen.raised.done, seen.raised.total)
    (report,) = seen.notes["reports"]
    assert report["partial"] == {"done": 0, "total": 2, "reason": "interrupted"} and report["records"] == [], report


EFFECTS = {
    ("dslab local (interrupted)", "sweep", "ListTrainingJobs"): effect_local_sweep,
    ("dslab doctor", "outputs_from_cloudformation", "DescribeStacks"): effect_doctor_outputs,
    ("dslab doctor", "usage", "DescribeFileSystems"): effect_doctor_efs,
    ("dslab doctor", "usage", "DescribeLifecycleConfiguration"): effect_doctor_efs,
    ("dslab doctor", "check_zone", "DescribeFileSystems"): effect_doctor_fsx,
    ("dslab doctor", "check_zone", "DescribeResourcePolicies"): effect_doctor_logs,
    ("dslab doctor", "read_quotas", "ListAWSDefaultServiceQuotas"): effect_doctor_quotas,
    ("dslab doctor", "read_quotas", "ListServiceQuotas"): effect_doctor_quotas,
    ("dslab status", "describe_progress", "GetObject"): effect_status_plan,
    ("dslab status --wait", "describe_progress", "GetObject"): effect_status_plan,
    ("dslab status", "describe_progress", "DescribeTrainingJob"): effect_status_job,
    ("dslab status --wait", "describe_progress", "DescribeTrainingJob"): effect_status_job,
    ("dslab report", "_results_from_execution.read", "GetObject"): effect_report_results,
    ("dslab report", "latest_attempt", "DescribeTrainingJob"): effect_report_attempt,
    ("dslab report", "job_record", "DescribeTrainingJob"): effect_job_record,
    ("dslab report", "_script_metrics", "GetObject"): effect_script_metrics,
    ("dslab report", "_reason", "GetObject"): effect_reason,
    ("dslab run", "dataset_stats", "ListObjectsV2"): effect_run_stats,
    ("dslab run", "dataset_stats", "GetObject"): effect_run_stats,
    ("dslab run", "upload", "HeadObject"): effect_code_upload,
    ("dslab recommend --experiment", "measured_stats", "GetObject"): effect_recommend_stats,
    ("dslab fsx status", "describe_stack", "DescribeStacks"): effect_fsx_down,
    ("dslab fsx status", "import_status", "DescribeDataRepositoryAssociations"): effect_fsx_status_import,
    ("dslab fsx status", "import_status", "DescribeDataRepositoryTasks"): effect_fsx_status_import,
    ("dslab deploy-check", "_stack", "DescribeStacks"): effect_deploy_check,
    ("dslab deploy-check", "_resource", "GetTemplate"): effect_deploy_check,
    ("dslab deploy-check", "_efs_events", "DescribeStackEvents"): effect_deploy_check,
    ("dslab deploy-check", "fsx_actions", "DescribeFileSystems"): effect_deploy_check_fsx,
    ("dslab fsx follow-zone", "fsx_zone", "GetParameter"): effect_follow_zone,
    ("dslab fsx follow-zone", "fsx_zone", "DescribeFileSystems"): effect_follow_zone,
    ("dslab express empty", "empty", "AbortMultipartUpload"): effect_express_abort,
    ("dslab efs empty", "dataset_in_s3", "GetObject"): effect_efs_dataset,
    ("dslab efs empty", "efs_datasets_in_use", "GetObject"): effect_efs_in_use,
    ("dslab efs empty", "efs_datasets_in_use", "HeadObject"): effect_efs_in_use,
    ("dslab dataset upload", "_stored_digest", "HeadObject"): effect_upload_digest,
    ("Plan", "look_up_fsx", "GetParameters"): effect_plan_fsx,
    ("Plan", "look_up_fsx", "DescribeFileSystems"): effect_plan_fsx,
    ("Plan", "read_quotas", "ListAWSDefaultServiceQuotas"): effect_plan_quotas,
    ("Plan", "read_quotas", "ListServiceQuotas"): effect_plan_quotas,
    ("Plan", "deployed_lab", "DescribeFileSystems"): effect_plan_lab,
    ("Plan", "storage_optimization", "DescribeFileSystems"): effect_plan_optimization,
    ("Plan", "efs_datasets_in_use", "GetObject"): effect_plan_efs,
    ("Plan", "efs_datasets_in_use", "HeadObject"): effect_plan_efs,
    ("CheckFsxData", "imports_to_start", "DescribeDataRepositoryAssociations"): effect_fsx_none_found,
    ("CheckFsxData", "imports_to_start", "DescribeDataRepositoryTasks"): effect_fsx_none_found,
    ("CheckFsxData", "import_status", "DescribeDataRepositoryTasks"): effect_fsx_none_found,
    ("CheckFsxData", "import_status", "DescribeDataRepositoryAssociations"): effect_fsx_none_found,
    ("StageExpress", "take_staging_lock", "PutObject"): effect_staged,
    ("StageExpress", "take_staging_lock", "GetObject"): effect_staged,
    ("StageExpress", "_same_stats", "GetObject"): effect_staged,
    ("StageExpress", "release_staging_lock", "GetObject"): effect_staged,
    ("Collect", "job_record", "DescribeTrainingJob"): effect_collect(effect_job_record),
    ("Collect", "_script_metrics", "GetObject"): effect_collect(effect_script_metrics),
    ("Collect", "_reason", "GetObject"): effect_collect(effect_reason),
    ("Teardown (start)", "teardown_blocker", "GetObject"): effect_teardown_kept,
    ("Teardown (start)", "teardown_blocker", "HeadObject"): effect_teardown_kept,
    ("Teardown (start)", "describe_stack", "DescribeStacks"): effect_teardown_gone,
    ("Teardown (check)", "describe_stack", "DescribeStacks"): effect_teardown_gone,
    ("Teardown (start)", "_record_teardown", "GetObject"): effect_teardown_record,
    ("ExpressBucketEmptier", "delete_pass", "ListObjectsV2"): effect_emptier,
    ("ExpressBucketEmptier", "abort_uploads", "ListMultipartUploads"): effect_emptier,
    ("ExpressBucketEmptier", "abort_uploads", "AbortMultipartUpload"): effect_emptier,
}


def _effect_key(site) -> tuple[str, str, str]:
    """(entry, function, operation); a nested function by its own name, except the report's `…read` helper."""
    function = site.function.rsplit(".", 1)[-1] if "." in site.function and not site.function.endswith(".read") \
        else site.function
    return site.entries[0], function, site.operation


def test_every_answer_and_goes_on_row_has_an_effect_stated():
    rows = {_effect_key(s) for s in faults.PY_SITES if s.injected
            for f in s.errors() if s.reaction_for(f).kind in (ANSWER, GOES_ON)}
    missing = sorted(r for r in rows if r not in EFFECTS)
    assert not missing, "answer or goes-on rows without an effect stated in this test:\n" + "\n".join(map(str, missing))


def _effect(site):
    return EFFECTS[_effect_key(site)]


# ---- the same functions when nothing fails: what the reactions above depart from --------------------------------
def test_the_local_runners_job_reaches_every_call_site_when_nothing_fails(world, monkeypatch):
    """The local lab's job (its code, File channel, checkpoint copy-in, sync and archives on the stand-in's S3)
    completes: the checkpoint the script wrote is uploaded, the one it removed deleted, both archives stored; and
    `dslab job run-local`'s Script job loads its script's endpoint and syncs to it."""
    from .fault_world import FOLDER_BUCKET, _job_run_local, _local_runner_job
    seen = _local_runner_job(world, monkeypatch)
    assert seen.result == {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed", "FailureReason": None}
    assert seen.notes["checkpoints"] == [LOCAL_CHECKPOINTS + "step-2.pt"], seen.notes
    assert [k.rsplit("/", 1)[-1] for k in seen.notes["artifacts"]] == ["model.tar.gz", "output.tar.gz"]
    assert "checkpoint sync: 1 file(s), 3 bytes copied in" in seen.notes["log"]
    assert "1 uploaded (4 bytes); 1 deleted in S3" in seen.notes["log"] and not seen.notes["executor errors"]
    ran = _job_run_local(world, monkeypatch)
    assert ran.rc == 0 and ran.out.startswith("folder-job: Completed"), (ran.out, ran.err)
    assert ran.notes["script's objects"] == ["checkpoints/ck/step-2.pt", "datasets/tiny/a.jpg"], ran.notes
    assert ran.notes["folder checkpoints"] == ["step-2.pt"] and FOLDER_BUCKET


def test_teardown_with_nothing_in_the_way_deletes_the_stack_it_is_configured_for_and_records_the_end(world):
    """Teardown (start) of a lab whose FSx stack is named otherwise (DSLAB_FSX_STACK): no other execution, no job
    reading FSx: DeleteStack of that stack, DELETE_IN_PROGRESS; the next check sees it gone: DELETE_COMPLETE after 1
    check, written into results.json and teardown.json."""
    from dslab.workflow import handlers

    from .fault_world import run_function
    stack_id = _custom_fsx_stack(world, "Other-Fsx")
    world.put_json("results/exec-clean/results.json", {"records": [], "summary": {}})
    plan = {"bucket": BUCKET, "base": "results/exec-clean"}
    started = run_function(world, handlers.teardown, {"action": "start", "plan": plan, "state_machine": "",
                                                      "execution_arn": ""}, DSLAB_FSX_STACK="Other-Fsx")
    assert started.raised is None, started.raised
    assert started.result == {"status": "DELETE_IN_PROGRESS", "final": False, "stack_id": stack_id, "checks": 0,
                              "message": "deleting Other-Fsx"}
    checked = run_function(world, handlers.teardown, {"action": "check", "plan": plan, "teardown": started.result},
                           DSLAB_FSX_STACK="Other-Fsx")
    outcome = {"status": "DELETE_COMPLETE", "final": True, "message": "Other-Fsx deleted: FSx no longer bills",
               "stack_id": stack_id, "checks": 1}
    assert checked.result == outcome
    s3 = world.c["s3"]
    stored = json.loads(s3.get_object(Bucket=BUCKET, Key="results/exec-clean/results.json")["Body"].read())
    assert stored["teardown"] == outcome
    assert json.loads(s3.get_object(Bucket=BUCKET, Key="results/exec-clean/teardown.json")["Body"].read()) == outcome


def test_teardown_checks_are_counted_to_their_cap_of_90_and_a_failed_deletion_is_final(world, monkeypatch):
    """While the stack is DELETE_IN_PROGRESS each check counts and is not final (the previous fields kept); the 90th
    ends TIMED_OUT naming `dslab fsx status`; DELETE_FAILED ends at once, with CloudFormation's reason."""
    from dslab.workflow import handlers

    from .fault_world import run_function
    plan = {"bucket": BUCKET, "base": "results/exec-slow"}
    world.put_json("results/exec-slow/results.json", {"records": [], "summary": {}})
    answer = {"StackStatus": "DELETE_IN_PROGRESS", "StackId": "stack-x"}
    monkeypatch.setattr("dslab.workflow.teardown.describe_stack", lambda cfn, name: answer)
    previous = {"status": "DELETE_IN_PROGRESS", "final": False, "stack_id": "stack-x", "checks": 0, "message": "m"}
    first = run_function(world, handlers.teardown, {"action": "check", "plan": plan, "teardown": previous}).result
    assert first == {**previous, "status": "DELETE_IN_PROGRESS", "final": False, "checks": 1,
                     "message": "DataSourceLab-Fsx is DELETE_IN_PROGRESS"}
    at_89 = run_function(world, handlers.teardown, {"action": "check", "plan": plan,
                                                    "teardown": {**previous, "checks": 88}}).result
    assert at_89["final"] is False and at_89["checks"] == 89
    last = run_function(world, handlers.teardown, {"action": "check", "plan": plan,
                                                   "teardown": {**previous, "checks": 89}}).result
    assert last["status"] == "TIMED_OUT" and last["final"] is True and last["checks"] == 90
    assert "still DELETE_IN_PROGRESS after 90 checks" in last["message"] and "`dslab fsx status`" in last["message"]
    answer.update(StackStatus="DELETE_FAILED", StackStatusReason="The following resource(s) failed to delete: [Fsx]")
    failed = run_function(world, handlers.teardown, {"action": "check", "plan": plan, "teardown": previous}).result
    assert failed["status"] == "DELETE_FAILED" and failed["final"] is True and failed["checks"] == 1
    assert "failed to delete: [Fsx]" in failed["message"] and "`dslab fsx down`" in failed["message"]


def test_teardown_blocker_skips_its_own_execution_and_those_without_fsx_and_names_the_one_that_blocks(world):
    from dslab.workflow.teardown import teardown_blocker
    plan = world.plan_document("x")
    no_fsx = {**plan, "fsx_paths": []}
    machine = _blockers_machine(world, "Blockers", {"b-own": plan, "b-nofsx": no_fsx, "b-fsx": plan})
    own = machine.replace(":stateMachine:", ":execution:") + ":b-own"
    clients = {"s3": world.c["s3"], "stepfunctions": world.c["stepfunctions"]}
    assert teardown_blocker(clients, BUCKET, machine, own) == "execution b-fsx still has FSx jobs to run"
    world.put_json("results/b-fsx/results.json", {"records": []})   # its jobs have ended: nothing blocks
    assert teardown_blocker(clients, BUCKET, machine, own) == ""
    assert teardown_blocker(clients, BUCKET, "", own) == ""      # no state machine named: nothing to look at


def _stored(world, base: str) -> tuple[dict, dict]:
    s3 = world.c["s3"]
    return (json.loads(s3.get_object(Bucket=BUCKET, Key=f"{base}/results.json")["Body"].read())["teardown"],
            json.loads(s3.get_object(Bucket=BUCKET, Key=f"{base}/teardown.json")["Body"].read()))


def test_teardown_keeps_fsx_that_a_job_reads_or_that_only_its_callers_rights_could_delete_and_records_why(world):
    """Teardown (start) with a training job InProgress on the file system: DEFERRED, naming the first such job; with
    a stack deployed without a service role: NO_SERVICE_ROLE (DeleteStack would run with the function's own rights,
    which cannot delete a file system). Each outcome is final and written into results.json and teardown.json, and
    the stack is left standing."""
    from moto.sagemaker.models import sagemaker_backends

    from dslab.workflow import handlers

    from .fault_world import ACCOUNT, REGION, run_function
    base = "results/exec-kept"
    world.put_json(f"{base}/results.json", {"records": [], "summary": {}})
    plan = {"bucket": BUCKET, "base": base}
    event = {"action": "start", "plan": plan, "state_machine": "", "execution_arn": ""}
    _custom_fsx_stack(world, "Read-Fsx")
    for name in ("reader-1", "reader-2"):
        world.c["sagemaker"].create_training_job(
            TrainingJobName=name, AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/training",
            InputDataConfig=[{"ChannelName": "train", "DataSource": {"FileSystemDataSource": {
                "FileSystemId": world.fsx_id, "FileSystemAccessMode": "ro", "FileSystemType": "FSxLustre",
                "DirectoryPath": "/abcdefgh/datasets/tiny"}}}],
            OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/output"},
            ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
            StoppingCondition={"MaxRuntimeInSeconds": 3600})
        sagemaker_backends[ACCOUNT][REGION].training_jobs[name].training_job_status = "InProgress"
    found = run_function(world, handlers.teardown, event, DSLAB_FSX_STACK="Read-Fsx")
    # The first reader in ListTrainingJobs' order (other jobs InProgress read S3, not this file system).
    first = next(s["TrainingJobName"] for s in world.c["sagemaker"].list_training_jobs(
        StatusEquals="InProgress")["TrainingJobSummaries"] if s["TrainingJobName"].startswith("reader-"))
    deferred = {"status": "DEFERRED", "final": True,
                "message": f"FSx kept: training job {first} (InProgress) reads it; `dslab fsx down` once it ends"}
    for name in ("reader-1", "reader-2"):   # the world's next tests see no reader
        sagemaker_backends[ACCOUNT][REGION].training_jobs[name].training_job_status = "Completed"
    assert found.result == deferred and _stored(world, base) == (deferred, deferred)
    assert world.c["cloudformation"].describe_stacks(StackName="Read-Fsx")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    template = {"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
                "Outputs": {"FsxFileSystemId": {"Value": world.fsx_id}}}
    world.c["cloudformation"].create_stack(StackName="Roleless-Fsx", TemplateBody=json.dumps(template))
    refused = run_function(world, handlers.teardown, event, DSLAB_FSX_STACK="Roleless-Fsx")
    from dslab.workflow.fsx_guard import without_service_role
    expected = {"status": "NO_SERVICE_ROLE", "final": True,
                "message": f"FSx not torn down: {without_service_role({})}"}
    assert refused.result == expected and _stored(world, base) == (expected, expected)
    assert "`dslab fsx down`" in expected["message"] and "service role" in expected["message"]
    assert world.c["cloudformation"].describe_stacks(StackName="Roleless-Fsx")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"


def test_teardown_follows_the_labs_own_stack_by_default_and_a_check_it_could_not_make_counts(world, monkeypatch):
    """Without DSLAB_FSX_STACK the lab's own stack (DataSourceLab-Fsx) is the one torn down. A check throttled past
    botocore's retries is not final: status UNKNOWN, counted, the previous fields kept, saying the next check looks
    again. DELETE_FAILED without a reason from CloudFormation says so with empty brackets."""
    from botocore.exceptions import ClientError

    from dslab.workflow import handlers

    from .fault_world import run_function
    base = "results/exec-default"
    world.put_json(f"{base}/results.json", {"records": [], "summary": {}})
    plan = {"bucket": BUCKET, "base": base}
    stack_id = world.fsx_stack_up()
    with_stack = world.function_env
    monkeypatch.setattr(world, "function_env", lambda **extra: {k: v for k, v in with_stack(**extra).items()
                                                                 if k != "DSLAB_FSX_STACK"})
    started = run_function(world, handlers.teardown, {"action": "start", "plan": plan, "state_machine": "",
                                                      "execution_arn": ""})
    assert started.result == {"status": "DELETE_IN_PROGRESS", "final": False, "stack_id": stack_id, "checks": 0,
                              "message": "deleting DataSourceLab-Fsx"}
    previous = {**started.result, "checks": 4}
    throttled = ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"},
                             "ResponseMetadata": {"HTTPStatusCode": 400}}, "DescribeStacks")

    def describe(cfn, name):
        raise throttled
    monkeypatch.setattr("dslab.workflow.teardown.describe_stack", describe)
    looked = run_function(world, handlers.teardown, {"action": "check", "plan": plan, "teardown": previous})
    assert looked.raised is None, looked.raised
    assert {k: v for k, v in looked.result.items() if k != "message"} == {
        **{k: v for k, v in previous.items() if k != "message"}, "status": "UNKNOWN", "final": False, "checks": 5}
    assert looked.result["message"].startswith("DataSourceLab-Fsx could not be looked at (")
    assert looked.result["message"].endswith("); the next check looks again")
    monkeypatch.setattr("dslab.workflow.teardown.describe_stack",
                        lambda cfn, name: {"StackStatus": "DELETE_FAILED", "StackId": stack_id})
    failed = run_function(world, handlers.teardown, {"action": "check", "plan": plan, "teardown": previous}).result
    assert failed["message"] == ("DataSourceLab-Fsx is DELETE_FAILED (): FSx may still exist and bill; fix the cause and "
                                 "run `dslab fsx down`, or delete it in the console")


def test_teardown_start_skips_its_own_execution_and_defers_to_another_that_needs_fsx(world):
    """Teardown (start) is told its own execution: that one (RUNNING, FSx in its plan, no results yet) does not
    block it, and the stack is deleted. Another such execution does: DEFERRED, final, naming it and who tears FSx
    down instead, written into results.json and teardown.json."""
    from dslab.workflow import handlers

    from .fault_world import run_function
    base = "results/t-own"
    plan = world.plan_document("x")
    machine = _blockers_machine(world, "TeardownOwn", {"t-own": plan})
    own = machine.replace(":stateMachine:", ":execution:") + ":t-own"
    stack_id = _custom_fsx_stack(world, "Own-Fsx")
    event = {"action": "start", "plan": {"bucket": BUCKET, "base": base}, "state_machine": machine, "execution_arn": own}
    # Its own results.json is not there (Collect could not store it): it still does not block itself.
    started = run_function(world, handlers.teardown, event, DSLAB_FSX_STACK="Own-Fsx")
    assert started.result == {"status": "DELETE_IN_PROGRESS", "final": False, "stack_id": stack_id, "checks": 0,
                              "message": "deleting Own-Fsx"}
    world.put_json(f"{base}/results.json", {"records": [], "summary": {}})
    world.c["stepfunctions"].start_execution(stateMachineArn=machine, name="t-other")
    world.put_json("results/t-other/plan.json", plan)
    _custom_fsx_stack(world, "Own-Fsx")
    deferred = run_function(world, handlers.teardown, event, DSLAB_FSX_STACK="Own-Fsx")
    expected = {"status": "DEFERRED", "final": True,
                "message": "FSx kept: execution t-other still has FSx jobs to run. The last execution with FSx jobs "
                           "tears it down if it asks to; otherwise `dslab fsx down`"}
    assert deferred.result == expected and _stored(world, base) == (expected, expected)


def test_teardown_start_of_a_stack_already_gone_and_a_long_deletion_failure(world, monkeypatch):
    """A start whose event names no state machine looks at no execution; a stack that no longer exists (or is seen
    DELETE_COMPLETE) is ALREADY_GONE, final, recorded. A DELETE_FAILED reason is quoted to its first 300 characters."""
    from dslab.workflow import handlers

    from .fault_world import run_function
    base = "results/exec-gone"
    world.put_json(f"{base}/results.json", {"records": [], "summary": {}})
    plan = {"bucket": BUCKET, "base": base}
    gone = {"status": "ALREADY_GONE", "final": True, "message": "Never-Fsx does not exist: nothing to tear down"}
    found = run_function(world, handlers.teardown, {"action": "start", "plan": plan}, DSLAB_FSX_STACK="Never-Fsx")
    assert found.raised is None, found.raised
    assert found.result == gone and _stored(world, base) == (gone, gone)
    monkeypatch.setattr("dslab.workflow.teardown.describe_stack",
                        lambda cfn, name: {"StackStatus": "DELETE_COMPLETE", "StackId": "stack-gone"})
    assert run_function(world, handlers.teardown, {"action": "start", "plan": plan},
                        DSLAB_FSX_STACK="Never-Fsx").result == gone
    reason = "R" * 299 + "ST" + "U" * 50
    monkeypatch.setattr("dslab.workflow.teardown.describe_stack",
                        lambda cfn, name: {"StackStatus": "DELETE_FAILED", "StackId": "s", "StackStatusReason": reason})
    previous = {"status": "DELETE_IN_PROGRESS", "final": False, "stack_id": "s", "checks": 0, "message": "m"}
    failed = run_function(world, handlers.teardown, {"action": "check", "plan": plan, "teardown": previous}).result
    assert f"({'R' * 299}S): FSx may still exist" in failed["message"]


def test_the_idle_action_without_its_settings_is_the_guard_off_and_looks_at_no_execution(world):
    """The scheduled idle guard's event names its state machine and idle hours; without them the guard is off
    (0 hours) and no execution is looked at: FSx kept, saying so."""
    from dslab.workflow import handlers

    from .fault_world import run_function
    world.fsx_stack_up()
    kept = run_function(world, handlers.teardown, {"action": "idle"})
    assert kept.raised is None, kept.raised
    assert (kept.result["action"], kept.result["why"]) == ("kept", "the idle guard is off (fsxIdleHours=0)")
    assert kept.result["running_executions"] == []


def test_teardown_blocker_reads_past_executions_it_skips_and_only_running_ones(world):
    """The listing is newest first: its own execution and one without FSx come before the one that blocks, which is
    still found; an execution no longer RUNNING (stopped before its results were written) blocks nothing."""
    from dslab.workflow.teardown import teardown_blocker
    plan = world.plan_document("x")
    machine = _blockers_machine(world, "BlockersOrder", {"o-fsx": plan, "o-nofsx": {**plan, "fsx_paths": []},
                                                          "o-own": plan})
    own = machine.replace(":stateMachine:", ":execution:") + ":o-own"
    clients = {"s3": world.c["s3"], "stepfunctions": world.c["stepfunctions"]}
    listed = [e["name"] for e in world.c["stepfunctions"].list_executions(stateMachineArn=machine)["executions"]]
    assert listed.index("o-fsx") > max(listed.index("o-own"), listed.index("o-nofsx"))
    assert teardown_blocker(clients, BUCKET, machine, own) == "execution o-fsx still has FSx jobs to run"
    world.c["stepfunctions"].stop_execution(executionArn=machine.replace(":stateMachine:", ":execution:") + ":o-fsx")
    assert teardown_blocker(clients, BUCKET, machine, own) == ""


def test_idle_guard_deletes_an_idle_fsx_only_when_due_and_says_why_it_keeps_one(world):
    """The idle guard's rounds on a stack of its own, the clock given: kept while an execution runs (naming it),
    kept until the deadline (idle_hours after the last activity: the stack's creation here, no execution ended),
    kept when the guard is off, and deleted once due, saying since when."""
    import datetime as dt

    from dslab.workflow import fsx_guard
    cfn, sfn = world.c["cloudformation"], world.c["stepfunctions"]
    stack_id = _custom_fsx_stack(world, "Guarded-Fsx")
    created = cfn.describe_stacks(StackName="Guarded-Fsx")["Stacks"][0]["CreationTime"]
    busy = _blockers_machine(world, "GuardBusy", {"g-run": None})
    quiet = _blockers_machine(world, "GuardQuiet", {})
    soon, later = created + dt.timedelta(hours=1), created + dt.timedelta(hours=3)
    kept = fsx_guard.guard(cfn, sfn, "Guarded-Fsx", busy, 2.0, now=later)
    assert (kept["action"], kept["why"], kept["running_executions"]) == ("kept", "execution g-run is running", ["g-run"])
    assert kept["deadline"] is None and kept["due"] is False
    early = fsx_guard.guard(cfn, sfn, "Guarded-Fsx", quiet, 2.0, now=soon)
    deadline = (created + dt.timedelta(hours=2)).isoformat()
    assert (early["action"], early["why"], early["deadline"], early["due"]) == ("kept", f"idle until {deadline}",
                                                                               deadline, False)
    assert (early["stack_id"], early["file_system_id"], early["age_hours"]) == (stack_id, world.fsx_id, 1.0)
    off = fsx_guard.guard(cfn, sfn, "Guarded-Fsx", quiet, 0.0, now=later)
    assert (off["action"], off["why"]) == ("kept", "the idle guard is off (fsxIdleHours=0)")
    assert cfn.describe_stacks(StackName=stack_id)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    due = fsx_guard.guard(cfn, sfn, "Guarded-Fsx", quiet, 2.0, now=later)
    assert due["action"] == "deleted" and due["due"] is True
    assert due["why"] == f"no workflow execution for 2 hours (since {created.isoformat()})"
    assert cfn.describe_stacks(StackName=stack_id)["Stacks"][0]["StackStatus"] == "DELETE_COMPLETE"
    gone = fsx_guard.guard(cfn, sfn, "Guarded-Fsx", quiet, 2.0, now=later)
    assert (gone["up"], gone["action"], gone["why"]) == (False, "none", "FSx is down")


def test_express_inventory_counts_and_empties_exactly_what_it_names(world):
    """`dslab express status` and `empty` when nothing fails: objects and bytes per dataset (its folder and the files
    beside it, a name's prefix not taken for another's), the uploads in progress; emptying one dataset deletes its
    objects and aborts its uploads only, then the rest on a whole-bucket empty."""
    import pytest as _pytest

    from dslab.aws import express
    from dslab.emulator.patches import create_directory_bucket
    bucket = "inventory--use1-az4--x-s3"
    create_directory_bucket(bucket)
    s3 = world.c["s3"]
    for key, size in (("datasets/a/x1", 10), ("datasets/a/x2", 20), ("datasets/a.stats.json", 5), ("datasets/b/y", 7),
                      ("datasets/ab.stats.json", 4), ("other/z", 3)):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * size)
    for key in ("datasets/a/part", "datasets/b/part"):
        s3.create_multipart_upload(Bucket=bucket, Key=key)
    assert [express.dataset_of(k) for k in ("datasets/a/x1", "datasets/a.stats.json", "datasets/readme", "other/z")] \
        == ["a", "a", "(other)", "(other)"]
    assert express.inventory(s3, bucket) == {
        "objects": 6, "bytes": 49, "multipart_uploads": 2,
        "datasets": {"(other)": {"objects": 1, "bytes": 3}, "a": {"objects": 3, "bytes": 35},
                     "ab": {"objects": 1, "bytes": 4}, "b": {"objects": 1, "bytes": 7}}}
    assert [o["Key"] for o in express.sidecar_objects(s3, bucket, "a")] == ["datasets/a.stats.json"]
    assert express.count(s3, bucket, "a") == (3, 35, 1) and express.count(s3, bucket, None) == (6, 49, 2)
    with _pytest.raises(ValueError, match="end in '/'"):
        express.count(s3, bucket, None) and express.list_objects(s3, bucket, "datasets/a").__next__()
    assert express.empty(s3, bucket, "a") == {"objects_deleted": 3, "bytes_deleted": 35, "uploads_aborted": 1}
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]) == [
        "datasets/ab.stats.json", "datasets/b/y", "other/z"]
    assert [u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]] == ["datasets/b/part"]
    assert express.empty(s3, bucket) == {"objects_deleted": 3, "bytes_deleted": 14, "uploads_aborted": 1}
    assert express.inventory(s3, bucket) == {"objects": 0, "bytes": 0, "datasets": {}, "multipart_uploads": 0}
