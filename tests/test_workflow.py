"""The benchmark workflow: the synthesized definition validated, its requests checked against the
service models, and the definition itself executed in the embedded AWS stand-in."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
from pathlib import Path

import botocore.session
import pytest

from dslab.contracts import validate_results
from dslab.core.experiment import parse_experiment
from dslab.core.modes import lab_mode
from dslab.core.requests import METRIC_DEFINITIONS, REQUEST_KEYS, plan
from dslab.emulator.lab import EmulatedLab, find_resource, resolve
from dslab.aws.validation import validate_request

from .conftest import REPO
from .helpers import lab_environment
from .scripted_jobs import ScriptedJobs

TINY = {"name": "tiny", "datasets": [{"name": "tiny-jpg", "format": "jpg"}, {"name": "tiny-tfr", "format": "tfrecord"}],
        "instance_type": "ml.m5.xlarge", "compute": "v100"}


def definition_of(lab) -> dict:
    template = lab.raw("DataSourceLab")
    _, machine = find_resource(template, "Workflow/StateMachine/Resource", "AWS::StepFunctions::StateMachine")
    refs = {}
    for part in machine["Properties"]["DefinitionString"]["Fn::Join"][1]:
        if isinstance(part, dict) and "Fn::GetAtt" in part:
            logical, attr = part["Fn::GetAtt"]
            refs[f"{logical}.{attr}"] = (f"arn:aws:lambda:us-east-1:123456789012:function:{logical}" if attr == "Arn"
                                         else "arn:aws:datasync:us-east-1:123456789012:task/task-0123456789abcdef0")  # 17 hex digits
    return json.loads(resolve(machine["Properties"]["DefinitionString"], refs))


def tasks_of(definition: dict):
    for name, state in definition["States"].items():
        yield name, state
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                yield from tasks_of(state[key])
        for branch in state.get("Branches", []):
            yield from tasks_of(branch)


# ---- static checks ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def definition_file(lab, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("asl") / "definition.json"
    path.write_text(json.dumps(definition_of(lab), indent=2))
    return path


@pytest.mark.parametrize("validator", [["statelint"], ["asl-validator", "--json-path"]])
def test_synthesized_definition_passes_asl_validators(definition_file, validator):
    result = subprocess.run([str(REPO / "node_modules/.bin" / validator[0]), *validator[1:], str(definition_file)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _sample(shape):
    kind = shape.type_name
    if kind == "structure":
        return {name: _sample(member) for name, member in shape.members.items() if name in shape.required_members}
    if kind == "list":
        return [_sample(shape.member)]
    if kind == "map":
        return {}
    if kind in ("integer", "long"):
        return max(1, int(shape.metadata.get("min", 1)))
    if kind in ("float", "double"):
        return 1.0
    if kind == "boolean":
        return True
    if kind == "timestamp":
        return "2026-11-29T00:00:00Z"
    if kind == "blob":
        return "x"  # Step Functions passes a string where the API takes bytes
    if shape.enum:
        return shape.enum[0]
    return "x" * max(1, int(shape.metadata.get("min", 1)))


def _fill_paths(params: dict, shape, dynamic: set, prefix: str = "") -> dict:
    """Replace every "Key.$" JSONPath by a value of Key's type: what the path will deliver at run time."""
    out = {}
    for key, value in params.items():
        name = key[:-2] if key.endswith(".$") else key
        member = shape.members.get(name) if shape.type_name == "structure" else None
        assert member is not None, f"{name} is not a member of {shape.name}"
        path = f"{prefix}.{name}" if prefix else name
        if key.endswith(".$"):
            out[name] = _sample(member)
            dynamic.add(path)
        elif isinstance(value, dict):
            out[name] = _fill_paths(value, member, dynamic, path)
        elif isinstance(value, list):
            out[name] = [_fill_paths(v, member.member, dynamic, f"{path}[{i}]") if isinstance(v, dict) else v
                         for i, v in enumerate(value)]
        else:
            out[name] = value
    return out


def test_every_aws_sdk_task_matches_its_service_model(lab):
    session = botocore.session.get_session()
    seen = set()
    for name, state in tasks_of(definition_of(lab)):
        resource = state.get("Resource", "")
        if state.get("Type") != "Task" or ":aws-sdk:" not in resource:
            continue
        service, action = resource.split(":aws-sdk:")[1].split(":")
        operation = action[0].upper() + action[1:]
        model = session.get_service_model(service)
        assert operation in model.operation_names, f"{name}: {service} has no {operation}"
        dynamic: set = set()
        params = _fill_paths(state.get("Parameters", {}), model.operation_model(operation).input_shape, dynamic)
        validate_request(service, operation, params, dynamic)
        seen.add((service, operation))
    assert seen == {("datasync", "StartTaskExecution"), ("datasync", "DescribeTaskExecution"),
                    ("datasync", "CancelTaskExecution"),
                    ("s3", "GetObject"), ("s3", "PutObject")}


def test_training_task_maps_every_request_key(lab):
    states = dict(tasks_of(definition_of(lab)))
    task = states["RunTrainingJob"]
    assert task["Resource"] == "arn:aws:states:::sagemaker:createTrainingJob.sync"
    assert {k[:-2] for k in task["Parameters"]} == set(REQUEST_KEYS)
    # A Script job's request (no channel) goes through its own task, every key but InputDataConfig.
    script_task = states["RunScriptTrainingJob"]
    assert {k[:-2] for k in script_task["Parameters"]} == set(REQUEST_KEYS) - {"InputDataConfig"}
    assert script_task["Resource"] == task["Resource"] and script_task["Catch"][0]["Next"] == "ClassifyScriptError"
    members = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob").input_shape.members
    assert set(REQUEST_KEYS) <= set(members)
    assert any("States.ALL" in c["ErrorEquals"] for c in task["Catch"])
    # Errors are classified by the names Step Functions really reports (AmazonSageMakerException with
    # the code in the Cause), never by names it does not raise.
    assert "Retry" not in task
    text = json.dumps(states["ClassifyError"])
    assert "SageMaker.AmazonSageMakerException" in text and "SageMaker.ResourceLimitExceededException" in text
    assert "*ThrottlingException*" in text and "*is 0 Instances*" in text
    everything = json.dumps(definition_of(lab))
    assert '"SageMaker.ResourceLimitExceeded"' not in everything and "SageMaker.ThrottlingException" not in everything


def test_state_machine_logs_everything_and_traces(lab):
    (machine,) = lab.workflow.find_resources("AWS::StepFunctions::StateMachine").values()
    assert machine["Properties"]["LoggingConfiguration"]["Level"] == "ALL"
    assert machine["Properties"]["TracingConfiguration"] == {"Enabled": True}


def test_state_machine_role_can_do_what_the_states_do(lab):
    policies = lab.workflow.find_resources("AWS::IAM::Policy")
    statements = [s for p in policies.values() if "StateMachine" in json.dumps(p["Properties"]["Roles"])
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    actions = set()
    for s in statements:
        actions.update(s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    assert {"sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob",
            "sagemaker:AddTags", "sagemaker:ListTags", "events:PutTargets", "events:PutRule", "events:DescribeRule",
            "iam:PassRole", "lambda:InvokeFunction", "s3:GetObject", "s3:PutObject", "datasync:startTaskExecution",
            "datasync:describeTaskExecution"} <= actions
    pass_role = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert all("Condition" in s for s in pass_role)
    # Only the training role is passed: DeleteStack reuses the FSx stack's own role without PassRole.
    assert len(pass_role) == 1 and pass_role[0]["Condition"]["StringEquals"]["iam:PassedToService"] == "sagemaker.amazonaws.com"


def test_teardown_function_may_delete_only_the_fsx_stack_and_list_its_own_executions(lab):
    policies = lab.workflow.find_resources("AWS::IAM::Policy")
    (teardown,) = [p for p in policies.values() if "TeardownFunctionRole" in json.dumps(p["Properties"]["Roles"])]
    statements = teardown["Properties"]["PolicyDocument"]["Statement"]
    by_action = {}
    for s in statements:
        for action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]):
            by_action[action] = json.dumps(s["Resource"])
    assert "DataSourceLab-Fsx/*" in by_action["cloudformation:DeleteStack"]
    assert "stateMachine:DataSourceLab-Benchmark" in by_action["states:ListExecutions"]
    assert "iam:PassRole" not in by_action
    assert not any(a.startswith("cloudformation:") for s in statements
                   for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]) if a not in (
                       "cloudformation:DeleteStack", "cloudformation:DescribeStacks"))


@pytest.mark.parametrize("overrides", [
    {},
    {"modes": ["File", "Pipe"], "s3_data_type": "ManifestFile"},
    {"distribution": "ShardedByS3Key", "modes": ["File", "FastFile", "Pipe"], "shuffle_seed": 7, "instance_count": 2},
    {"spot": True, "compute": "a100", "instance_type": "ml.p4d.24xlarge"},
    {"compute": "resnet50", "epochs": 3},
    {"modes": ["Script", "FastFile"], "epochs": 2},
    {"modes": ["Script"], "instance_count": 2},
])
def test_every_planned_request_is_valid_for_sagemaker(overrides):
    experiment = parse_experiment({**TINY, **overrides})
    jobs = plan(experiment, lab_environment(), "arn:aws:states:us-east-1:123456789012:execution:x:y")
    assert jobs
    for job in jobs:
        validate_request("sagemaker", "CreateTrainingJob", job.request)
        assert set(job.request) == set(REQUEST_KEYS) - ({"InputDataConfig"} if job.spec.mode == "Script" else set())
        assert len(job.request["TrainingJobName"]) <= 59
        assert job.request["AlgorithmSpecification"]["MetricDefinitions"] == METRIC_DEFINITIONS


def test_default_experiment_requests_are_valid_and_complete():
    from dslab.core.requests import LabEnvironment
    env = LabEnvironment.from_dict({**lab_environment().to_dict(), "express_bucket": "lab--use1-az4--x-s3"})
    jobs = plan(parse_experiment({}), env, "exec")
    assert len(jobs) == 22
    assert {(j.spec.dataset.name, j.spec.mode, j.spec.trial.storage) for j in jobs} == {
        (d, m, "standard") for d in ("caltech-jpg-1x", "caltech-tfr-1x", "caltech-jpg-50x", "caltech-tfr-50x")
        for m in ("File", "FastFile", "Pipe", "FSx", "EFS")} | {
        ("caltech-jpg-1x", "FastFile", "express"), ("caltech-jpg-50x", "FastFile", "express")}
    fsx = next(j.request for j in jobs if j.spec.mode == "FSx")
    source = fsx["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]
    assert source == {"FileSystemId": "fs-0123456789abcdef0", "FileSystemType": "FSxLustre",
                      "DirectoryPath": "/abcdefgh/datasets/caltech-jpg-1x", "FileSystemAccessMode": "ro"}
    tags = {t["Key"] for t in fsx["Tags"]}
    assert {"dslab:experiment", "dslab:execution", "dslab:dataset", "dslab:mode", "dslab:repeat", "dslab:code-version"} <= tags
    for job in jobs:
        validate_request("sagemaker", "CreateTrainingJob", job.request)
        assert job.request["VpcConfig"]["Subnets"] and job.request["VpcConfig"]["SecurityGroupIds"]


# ---- executed in the stand-in ----------------------------------------------------------------

def put_datasets(lab: EmulatedLab, names) -> None:
    """Three small objects per dataset, and the stats file `dslab dataset upload` writes beside it."""
    s3 = lab.client("s3")
    for name in names:
        for i in range(3):
            s3.put_object(Bucket=lab.bucket, Key=f"datasets/{name}/part-{i}.bin", Body=b"x" * (100 + i))
        s3.put_object(Bucket=lab.bucket, Key=f"datasets/{name}.stats.json",
                      Body=json.dumps({"files": 3, "bytes": 303, "format": "other"}).encode())


def test_all_modes_succeed_and_every_result_is_stored(emulated, tmp_path):
    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        put_datasets(lab, ["tiny-jpg", "tiny-tfr"])
        execution = lab.run({**TINY, "teardown_fsx": True, "modes": ["File", "FastFile", "Pipe", "FSx", "EFS", "Script"]})
        assert execution.status == "SUCCEEDED", execution.cause
        results = lab.results(execution)
        validate_results(results)
        records = results["records"]
        assert len(records) == 12 and {r["status"] for r in records} == {"Completed"}
        assert {(r["dataset"], lab_mode(r)) for r in records} == {(d, m) for d in ("tiny-jpg", "tiny-tfr")
                                                                 for m in ("File", "FastFile", "Pipe", "FSx", "EFS", "Script")}
        by_mode = {lab_mode(r): r for r in records if r["dataset"] == "tiny-jpg"}
        # Script: the contract's nearest mode, marked as the script's own reads; its requests' GETs priced.
        assert by_mode["Script"]["mode"] == "FastFile" and by_mode["Script"]["ingestion"] == "script"
        assert "ingestion" not in by_mode["FastFile"] and by_mode["Script"]["cost_usd"]["requests"] > 0
        assert by_mode["File"]["breakdown"] == {"downloading": 40.0, "training": 100.0, "other": 5.0}
        assert by_mode["FastFile"]["breakdown"]["downloading"] == 0.0
        assert by_mode["File"]["billable_seconds"] == 145.0
        # instance price x billable time: ml.m5.xlarge $0.23/h for 145 s
        assert by_mode["File"]["cost_usd"]["instance"] == pytest.approx(0.23 * 145 / 3600, abs=1e-6)
        assert by_mode["FSx"]["cost_usd"]["storage"] > by_mode["EFS"]["cost_usd"]["storage"]  # FSx uptime
        assert by_mode["EFS"]["metrics"]["au_percent"] == 97.0  # the script's metrics.json, from output.tar.gz
        assert results["experiment"]["name"] == "tiny" and results["backend"] == "local"
        assert results["experiment_hash"] and results["prices"]["date"]
        csv = lab.client("s3").get_object(Bucket=lab.bucket, Key=f"results/{execution.name}/results.csv")["Body"].read().decode()
        assert len(csv.strip().splitlines()) == 13
        # EFS was staged from S3 before the EFS jobs ran; FSx was torn down after results were stored.
        assert sorted(p.name for p in (tmp_path / "efs" / "datasets" / "tiny-jpg").iterdir()) == ["part-0.bin", "part-1.bin", "part-2.bin"]
        assert not lab.fsx_present
        requests = {r["TrainingJobName"]: r for r in jobs.requests}
        assert len(requests) == 12
        # A Script job: no channel, the dataset as a hyperparameter, and in its tags (the lineage SageMaker
        # keeps no more) the URI and the stats file Plan read: files, bytes and the file's SHA-256.
        script = requests[by_mode["Script"]["job_name"]]
        uri = f"s3://{lab.bucket}/datasets/tiny-jpg/"
        assert "InputDataConfig" not in script and json.loads(script["HyperParameters"]["dataset_uri"]) == uri
        stats = lab.client("s3").get_object(Bucket=lab.bucket, Key="datasets/tiny-jpg.stats.json")["Body"].read()
        tags = {t["Key"]: t["Value"] for t in lab.client("sagemaker").list_tags(
            ResourceArn=lab.client("sagemaker").describe_training_job(TrainingJobName=script["TrainingJobName"])["TrainingJobArn"])["Tags"]}
        assert {k: tags[k] for k in tags if k.startswith("dslab:dataset-")} == {
            "dslab:dataset-uri": uri, "dslab:dataset-files": "3", "dslab:dataset-bytes": "303",
            "dslab:dataset-stats-sha256": hashlib.sha256(stats).hexdigest()}


def test_one_failed_job_is_recorded_others_complete_and_teardown_still_runs(emulated):
    jobs = ScriptedJobs(fail=lambda r: "AlgorithmError: tfrecord shard-00001.tfrecord at byte offset 4096: corrupted"
                        if "tfr-pipe" in r["TrainingJobName"] else None)
    with emulated(jobs) as lab:
        put_datasets(lab, ["tiny-jpg", "tiny-tfr"])
        execution = lab.run({**TINY, "teardown_fsx": True})
        assert execution.status == "FAILED" and execution.error == "JobsFailed"
        assert "tfr-pipe" in execution.cause and "corrupted" in execution.cause
        records = lab.results(execution)["records"]
        failed = [r for r in records if r["status"] == "Failed"]
        assert len(failed) == 1 and failed[0]["mode"] == "Pipe" and "byte offset 4096" in failed[0]["failure_reason"]
        assert sum(r["status"] == "Completed" for r in records) == 9
        assert not lab.fsx_present  # torn down although a job failed


def test_fsx_absent_skips_fsx_jobs_and_runs_the_rest(emulated):
    jobs = ScriptedJobs()
    with emulated(jobs, fsx=False) as lab:
        put_datasets(lab, ["tiny-jpg", "tiny-tfr"])
        execution = lab.run(TINY)
        assert execution.status == "SUCCEEDED", execution.cause
        records = lab.results(execution)["records"]
        skipped = [r for r in records if r["status"] == "Skipped"]
        assert {r["mode"] for r in skipped} == {"FSx"} and len(skipped) == 2
        assert "dslab fsx up" in skipped[0]["failure_reason"]
        assert sum(r["status"] == "Completed" for r in records) == 8
        assert not [r for r in jobs.requests if "fsx" in r["TrainingJobName"]]


def test_capacity_error_is_retried_under_a_new_name(emulated):
    jobs = ScriptedJobs(capacity_failures=lambda r: "tfr-file" in r["TrainingJobName"] and not r["TrainingJobName"].endswith("-a3"))
    with emulated(jobs) as lab:
        put_datasets(lab, ["tiny-tfr"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-tfr", "format": "tfrecord"}], "modes": ["File", "EFS"]})
        assert execution.status == "SUCCEEDED", execution.cause
        names = [r["TrainingJobName"] for r in jobs.requests if "tfr-file" in r["TrainingJobName"]]
        assert len(names) == 3 and names[1].endswith("-a2") and names[2].endswith("-a3")
        record = next(r for r in lab.results(execution)["records"] if r["mode"] == "File")
        assert record["status"] == "Completed" and record["job_name"] == names[2]


@pytest.mark.parametrize("experiment, words", [
    ({**TINY, "s3_data_type": "ManifestFile"}, ["s3_data_type", "FastFile"]),
    ({**TINY, "modes": ["File", "Stream"]}, ["modes[1]", "Stream"]),
    ({**TINY, "datasets": [{"name": "tiny-jpg", "format": "jpg", "source": "efs"}], "modes": ["Pipe"]}, ["source", "Pipe"]),
    ({**TINY, "job_prefix": "a-very-long-job-name-prefix"}, ["job_prefix", "63"]),
    ({**TINY, "epocs": 2}, ["epocs", "epochs"]),
    ({**TINY, "datasets": [{"name": "nothing-here", "format": "jpg"}]}, ["nothing-here", "empty", "dslab dataset upload"]),
    # S3DataSource: "Don't choose more ML compute instances for training than available S3 objects"; the stats
    # file counts 3 objects.
    ({**TINY, "datasets": [{"name": "tiny-tfr", "format": "tfrecord"}], "modes": ["FastFile"], "instance_count": 4},
     ["trial 'base'", "'tiny-tfr' has 3 objects", "at most 3 instances"]),
])
def test_impossible_experiment_fails_at_plan_before_any_job(emulated, experiment, words):
    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        put_datasets(lab, ["tiny-jpg", "tiny-tfr"])
        execution = lab.run(experiment)
        assert execution.status == "FAILED" and execution.error == "ExperimentInvalid"
        for word in words:
            assert word in execution.cause
        assert jobs.requests == [] and lab.training_job_names() == []


def test_collect_reports_every_host_of_a_cluster_job(emulated):
    """SageMaker merges every host's /opt/ml/output/data into the job's one output.tar.gz ("SageMaker AI
    aggregates the result in a TAR file"): Collect reads each host's metrics file from it, and the report's
    scaling section draws the cluster from them."""
    from dslab.report import scaling
    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        put_datasets(lab, ["tiny-tfr"])
        execution = lab.run({**TINY, "datasets": [{"name": "tiny-tfr", "format": "tfrecord"}], "modes": ["FastFile"],
                             "instance_count": [1, 2]})
        assert execution.status == "SUCCEEDED", execution.cause
        records = {r["instance_count"]: r for r in lab.results(execution)["records"]}
    cluster = records[2]["metrics"]["cluster"]
    assert cluster["hosts"] == cluster["hosts_reported"] == 2 and cluster["samples"] == 2000
    assert cluster["samples_per_second"] == 630.0 and cluster["au_percent_per_host"] == {"algo-1": 97.0, "algo-2": 96.0}
    assert records[1]["metrics"]["au_percent"] == 97.0 and "cluster" not in records[1]["metrics"]  # one host: metrics.json
    assert [(r["instances"], r["samples_per_second"]) for r in scaling(list(records.values()))] == [(1, 320.0), (2, 630.0)]


def test_default_experiment_runs_all_twenty_two_jobs(emulated):
    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        put_datasets(lab, ["caltech-jpg-1x", "caltech-tfr-1x", "caltech-jpg-50x", "caltech-tfr-50x"])
        execution = lab.run({})
        assert execution.status == "SUCCEEDED", execution.cause
        results = lab.results(execution)
        # The post's 4 datasets x 5 sources, and Express FastFile on the two JPEG datasets (staged first).
        assert len(results["records"]) == 22 and {r["status"] for r in results["records"]} == {"Completed"}
        assert sorted(r["dataset"] for r in results["records"] if r.get("storage") == "express") == ["caltech-jpg-1x", "caltech-jpg-50x"]
        assert {r["instance_type"] for r in results["records"]} == {"ml.p3.2xlarge"}
        assert results["experiment"]["trials"][0]["compute"]["preset"] == "v100"
        assert len(jobs.requests) == 22


def test_lanes_bound_concurrency():
    from dslab.workflow.collect import flatten_outcomes
    from dslab.workflow.plan import deal_into_lanes
    items = [{"index": i} for i in range(7)]
    lanes = deal_into_lanes(items, 3)
    assert len(lanes) == 3 and sorted(i["index"] for lane in lanes for i in lane) == list(range(7))
    assert deal_into_lanes(items[:2], 5) == [[{"index": 0}], [{"index": 1}]]
    assert sorted(flatten_outcomes(copy.deepcopy(lanes))) == list(range(7))


def test_dslab_run_and_status_against_the_emulated_lab(emulated, tmp_path, capsys):
    """`dslab run` starts the deployed workflow; `dslab status --json` reports jobs by state and spend."""
    from dslab.cli import main
    jobs = ScriptedJobs()
    with emulated(jobs) as lab:
        put_datasets(lab, ["smoke-tfr"])
        outputs = tmp_path / "cdk-outputs.json"
        outputs.write_text(json.dumps({"DataSourceLab": {"StateMachineArn": lab.state_machine_arn},
                                       "DataSourceLab-Core": {"BucketName": lab.bucket}}))
        assert main(["run", "--experiment", str(REPO / "experiments/smoke.yaml"), "--outputs", str(outputs)]) == 0
        started = capsys.readouterr().out
        execution = started.split("started ", 1)[1].split()[0]
        finished = lab.wait(execution)
        assert finished.status == "SUCCEEDED", finished.cause
        assert main(["status", execution, "--outputs", str(outputs), "--json"]) == 0
        state = json.loads(capsys.readouterr().out)
        assert state["status"] == "SUCCEEDED" and state["jobs"] == {"Completed": 2}
        assert state["spend_usd"] > 0 and state["results"].endswith(f"results/{finished.name}/results.json")
        assert main(["status", "--outputs", str(outputs), "--json"]) == 0  # the latest execution by default
        assert json.loads(capsys.readouterr().out)["execution"] == execution
