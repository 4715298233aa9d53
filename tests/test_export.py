"""`dslab export`: the exported SDK code, run with the real SageMaker SDK (sagemaker-core) against a
stubbed SageMaker, sends the very CreateTrainingJob request the lab builds, for every data source."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import runpy
import sys

import botocore.client
import pytest
from botocore.validate import validate_parameters

from dslab.cli import main
from dslab.core.experiment import parse_experiment
from dslab.core.requests import JOB_NAME_RE, plan
from dslab.aws.export import SDK_REQUIREMENT, generate

from .conftest import REPO
from .helpers import lab_environment
from .test_operator import OUTPUTS

BASE = {"name": "export", "instance_type": "ml.g5.2xlarge", "compute": "v100", "volume_size_gb": 50,
        "max_run_seconds": 7200}
CASES = {
    "File": {"modes": ["File"], "datasets": ["caltech-jpg-1x"]},
    "FastFile": {"modes": ["FastFile"], "datasets": ["caltech-tfr-1x"], "distribution": "ShardedByS3Key"},
    "Pipe-S3Prefix": {"modes": ["Pipe"], "datasets": ["caltech-jpg-1x"], "shuffle_seed": 7},
    "Pipe-ManifestFile": {"modes": ["Pipe"], "datasets": ["caltech-tfr-1x"], "s3_data_type": "ManifestFile"},
    "FSx": {"modes": ["FSx"], "datasets": ["caltech-jpg-50x"]},
    "EFS": {"modes": ["EFS"], "datasets": ["caltech-jpg-1x"]},
    "spot": {"modes": ["FastFile"], "datasets": ["caltech-jpg-1x"], "spot": True, "instance_count": 2},
    # The script reads S3 itself: no channel, the dataset in a hyperparameter and in the lineage tags.
    "Script": {"modes": ["Script"], "datasets": ["caltech-tfr-1x"]},
}


@pytest.fixture
def sagemaker_api(monkeypatch):
    """Every AWS call the SDK makes lands here (nothing reaches the network): each is checked against
    botocore's model, CreateTrainingJob's parameters are kept, anything but Create/Describe fails."""
    calls: list[tuple[str, dict]] = []

    def api_call(client, operation, params):
        validate_parameters(params, client.meta.service_model.operation_model(operation).input_shape)
        assert client.meta.service_model.service_name == "sagemaker", f"unexpected call {operation}"
        calls.append((operation, params))
        if operation == "CreateTrainingJob":
            return {"TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{params['TrainingJobName']}"}
        assert operation == "DescribeTrainingJob", f"unexpected call {operation}"
        create = dict(calls[0][1])
        return {"TrainingJobName": params["TrainingJobName"], "TrainingJobArn": "arn:aws:sagemaker:us-east-1:1:training-job/x",
                "TrainingJobStatus": "InProgress", "SecondaryStatus": "Starting", "CreationTime": dt.datetime.now(dt.timezone.utc),
                **{k: create[k] for k in ("AlgorithmSpecification", "ResourceConfig", "StoppingCondition", "RoleArn")}}

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", api_call)
    return calls


def run_exported(code: str, tmp_path, monkeypatch, capsys) -> None:
    """Run the code as `python exported.py` does (the stub keeps what it sends)."""
    path = tmp_path / "exported.py"
    path.write_text(code)
    monkeypatch.setattr(sys, "argv", [str(path)])
    runpy.run_path(str(path), run_name="__main__")
    assert "started training job" in capsys.readouterr().out


def lab_request(case: dict, env=None) -> dict:
    jobs = plan(parse_experiment({**BASE, **case}), env or lab_environment(), "export")
    assert len(jobs) >= 1 and jobs[0].request is not None
    return jobs[0].request


@pytest.mark.parametrize("case", sorted(CASES))
def test_exported_code_sends_the_labs_request(case, sagemaker_api, tmp_path, monkeypatch, capsys):
    request = lab_request(CASES[case])
    run_exported(generate(request, "us-east-1"), tmp_path, monkeypatch, capsys)
    assert [op for op, _ in sagemaker_api] == ["CreateTrainingJob", "DescribeTrainingJob"]
    sent = sagemaker_api[0][1]
    for key in ("InputDataConfig", "VpcConfig", "ResourceConfig", "StoppingCondition", "RoleArn", "AlgorithmSpecification",
                "HyperParameters", "EnableManagedSpotTraining", "OutputDataConfig", "Tags"):
        assert sent.get(key) == request.get(key), key
    assert set(sent) == set(request)  # nothing added, nothing dropped
    # A fresh name per run, from the lab's: valid for SageMaker.
    assert sent["TrainingJobName"].startswith(request["TrainingJobName"].rsplit("-", 1)[0] + "-")
    assert len(sent["TrainingJobName"]) <= 63 and JOB_NAME_RE.match(sent["TrainingJobName"])
    # The case is what it says (the request builder's rules, checked here only to keep the cases honest).
    channel = (request.get("InputDataConfig") or [{"DataSource": {}}])[0]
    source = channel["DataSource"]
    expected = {
        "File": lambda: channel["InputMode"] == "File" and "S3DataSource" in source,
        "FastFile": lambda: channel["InputMode"] == "FastFile" and source["S3DataSource"]["S3DataDistributionType"] == "ShardedByS3Key",
        "Pipe-S3Prefix": lambda: channel["RecordWrapperType"] == "RecordIO" and channel["ShuffleConfig"] == {"Seed": 7},
        "Pipe-ManifestFile": lambda: source["S3DataSource"]["S3DataType"] == "ManifestFile" and channel["RecordWrapperType"] == "None",
        "FSx": lambda: source["FileSystemDataSource"]["FileSystemType"] == "FSxLustre"
        and source["FileSystemDataSource"]["DirectoryPath"] == "/abcdefgh/datasets/caltech-jpg-50x",
        "EFS": lambda: source["FileSystemDataSource"]["FileSystemType"] == "EFS",
        "spot": lambda: request["EnableManagedSpotTraining"] is True and request["StoppingCondition"]["MaxWaitTimeInSeconds"] == 14400,
        "Script": lambda: "InputDataConfig" not in request and request["HyperParameters"]["dataset_uri"].endswith('/datasets/caltech-tfr-1x/"')
        and {"Key": "dslab:dataset-uri", "Value": json.loads(request["HyperParameters"]["dataset_uri"])} in request["Tags"],
    }[case]
    assert expected()


def test_s3_express_directory_bucket_is_exported_unchanged(sagemaker_api, tmp_path, monkeypatch, capsys):
    from dslab.core import experiment
    if "storage" not in experiment.TRIAL_KEYS:
        pytest.skip("S3 Express One Zone storage is not in this tree's request builder yet")
    env = dataclasses.replace(lab_environment(), express_bucket="dslab-data--use1-az4--x-s3")
    request = lab_request({"modes": ["FastFile"], "datasets": ["caltech-jpg-1x"], "storage": "express"}, env)
    assert request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"].startswith("s3://dslab-data--use1-az4--x-s3/")
    run_exported(generate(request, "us-east-1"), tmp_path, monkeypatch, capsys)
    assert sagemaker_api[0][1]["InputDataConfig"] == request["InputDataConfig"]


def test_header_names_job_mode_dataset_and_experiment_hash():
    request = lab_request(CASES["FSx"])
    tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    header = generate(request, "us-east-1").splitlines()[:3]
    assert all(line.startswith("# ") for line in header)
    assert request["TrainingJobName"] in header[0] and "FSx" in header[0] and "caltech-jpg-50x" in header[0]
    assert "dslab export" in header[1] and tags["dslab:experiment-hash"] in header[1]
    assert SDK_REQUIREMENT in header[2]
    # A checkpoint trial's job: its checkpoints on their target, the writer or its restore (its Tags say which).
    marked = [t for t in request["Tags"] if t["Key"] not in ("dslab:dataset", "dslab:trial", "dslab:repeat")]
    for restore, role in (("false", "the writer"), ("true", "the restore")):
        checkpoint = {**request, "Tags": marked + [
            {"Key": "dslab:dataset", "Value": "llama-8b"}, {"Key": "dslab:trial", "Value": "save"},
            {"Key": "dslab:repeat", "Value": "0"}, {"Key": "dslab:checkpoint-target", "Value": "efs"},
            {"Key": "dslab:checkpoint-restore", "Value": restore}]}
        assert generate(checkpoint, "us-east-1").splitlines()[0] == (
            f"# DataSourceLab job {request['TrainingJobName']}: checkpoints of llama-8b on efs, {role} (trial save, "
            "repeat 0).")


def test_a_parameter_the_sdk_does_not_know_fails_instead_of_being_dropped():
    request = lab_request(CASES["File"])
    with pytest.raises(ValueError, match="Bogus"):
        generate({**request, "Bogus": 1}, "us-east-1")
    channel = {**request["InputDataConfig"][0], "NotAField": "x"}
    with pytest.raises(ValueError, match="NotAField"):
        generate({**request, "InputDataConfig": [channel]}, "us-east-1")


def test_the_sdk_named_in_the_code_is_the_pinned_one():
    assert SDK_REQUIREMENT in (REPO / "requirements.txt").read_text().splitlines()


# ---- the command -----------------------------------------------------------------------------------

@pytest.fixture
def outputs(tmp_path):
    path = tmp_path / "cdk-outputs.json"
    path.write_text(json.dumps(OUTPUTS))
    return path


def export(*args):
    return main(["export", "--experiment", str(REPO / "experiments/post-12-jobs.yaml"), *args])


def test_export_prints_code_for_the_chosen_mode(outputs, capsys, tmp_path):
    assert export("--outputs", str(outputs), "--mode", "fastfile", "--dataset", "caltech-tfr-1x") == 0
    code = capsys.readouterr().out
    assert "input_mode='FastFile'" in code and "datasets/caltech-tfr-1x/" in code
    # Requested as an export, in the lab's Region (its stack outputs' ARNs are in us-east-1).
    assert "dict(key='dslab:execution', value='export')" in code
    assert "REGION = 'us-east-1'" in code.splitlines()
    assert "role_arn='arn:aws:iam::123456789012:role/Training'" in code
    path = tmp_path / "winner.py"
    assert export("--outputs", str(outputs), "--mode", "FSx", "--out", str(path)) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "FileSystemDataSource" in path.read_text()
    # Where it wrote what: the job, its source and dataset, the runtime it asks for, and how to run it.
    assert re.search(rf"^wrote {re.escape(str(path))}: job \S+ \(FSx on caltech-jpg-1x, MaxRuntimeInSeconds "
                     rf"[\d,]+\); run it with: python {re.escape(str(path))} \[--wait\]$", captured.err, re.M), captured.err
    assert "/mnt1234/datasets/caltech-jpg-1x" in path.read_text()


def test_export_defaults_to_the_recommended_source(outputs, capsys):
    experiment = str(REPO / "experiments/post-12-jobs.yaml")
    assert main(["recommend", "--experiment", experiment, "--dataset", "caltech-jpg-1x", "--json"]) == 0
    recommended = json.loads(capsys.readouterr().out)["answers"][0]["answer"]["pick"]
    assert export("--outputs", str(outputs)) == 0
    captured = capsys.readouterr()
    assert f"dslab:mode', value='{recommended}'" in captured.out and "caltech-jpg-1x" in captured.out
    assert f"recommended for caltech-jpg-1x: {recommended}" in captured.err


@pytest.mark.parametrize("args, words", [
    (["--mode", "Stream"], ["--mode", "unknown mode 'Stream'", "FastFile"]),
    (["--mode", "EFS"], ["--mode", "does not run EFS", "File, FastFile, FSx"]),
    (["--dataset", "mine"], ["--dataset", "caltech-jpg-1x"]),
    (["--repeat", "3"], ["--repeat", "0..0"]),
    # issue 55: a source on the directory bucket that no trial reads ended in KeyError: 'Express File'
    (["--mode", "Express File"], ["--mode", "does not run Express File", "no trial", "File, FastFile, FSx"]),
    (["--mode", "Express FastFile"], ["--mode", "does not run Express FastFile", "directory bucket",
                                      "File, FastFile, FSx"]),
])
def test_bad_choices_exit_2_naming_the_flag(outputs, capsys, args, words):
    assert export("--outputs", str(outputs), *args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dslab: error: {args[0]}: "), err   # the flag first, as the user typed it
    assert all(w in err for w in words), err


def test_a_mode_read_by_a_later_trial_is_exported_from_that_trial(outputs, capsys, tmp_path):
    """The first trial reading the dataset reads only the directory bucket: `--mode File` looked for Express File in
    its answer and ended in a KeyError."""
    path = tmp_path / "mixed.yaml"
    path.write_text("name: mixed\ndatasets: [caltech-tfr-1x]\ninstance_type: ml.p3.2xlarge\ntrials:\n"
                    "  - {name: ex, storage: express, modes: [FastFile]}\n  - {name: base, modes: [File, Pipe]}\n")
    assert main(["export", "--experiment", str(path), "--outputs", str(outputs), "--mode", "File"]) == 0
    code = capsys.readouterr().out
    assert "input_mode='File'" in code and "value='base'" in code
    # Express File: no trial reads File from the directory bucket; what the trials run, as the tool prints them.
    assert main(["export", "--experiment", str(path), "--outputs", str(outputs), "--mode", "Express File"]) == 2
    assert capsys.readouterr().err.strip() == (
        "dslab: error: --mode: the experiment does not run Express File on caltech-tfr-1x: no trial reads the directory "
        "bucket (allowed: Express FastFile, File, Pipe)")


def test_a_skipped_fsx_job_says_how_to_bring_fsx_back(tmp_path, capsys):
    path = tmp_path / "cdk-outputs.json"
    path.write_text(json.dumps({k: v for k, v in OUTPUTS.items() if k != "DataSourceLab-Fsx"}))
    assert export("--outputs", str(path), "--mode", "FSx") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dslab: error: --mode: the FSx job of caltech-jpg-1x is skipped: ") and "dslab fsx up" in err
    # What else the experiment runs on the dataset: the other modes.
    assert err.endswith("(allowed: File, FastFile)"), err


def test_export_from_results_picks_the_reports_pick(outputs, capsys, tmp_path):
    from dslab.inputs.experiment_file import load_experiment
    experiment = load_experiment(REPO / "experiments/post-12-jobs.yaml")
    jobs = {j.spec.mode: j for j in plan(experiment, lab_environment(), "run-1") if j.spec.dataset.name == "caltech-jpg-1x"}

    def record(mode, cost, status="Completed"):
        return {"job_name": jobs[mode].name, "mode": mode, "dataset": "caltech-jpg-1x", "repeat": 0, "status": status,
                "instance_type": "ml.p3.2xlarge", "instance_count": 1, "billable_seconds": 100.0, "phases": {},
                "breakdown": {"downloading": 0.0, "training": 100.0, "other": 0.0}, "metrics": {},
                "cost_usd": {"instance": cost, "total": cost}}
    # Cheaper, and not candidates: a failed job, one of another dataset, one still without its billable seconds, a
    # checkpoint job (it reads no dataset).
    other_dataset = {**record("File", 0.01), "dataset": "caltech-tfr-1x"}
    unbilled = {**record("File", 0.02), "billable_seconds": None}
    checkpoint = {**record("File", 0.03), "checkpoint_target": "s3"}
    results = {"experiment": experiment.document, "experiment_hash": experiment.content_hash, "execution": "run-1",
               "backend": "aws", "records": [record("File", 0.30), record("FastFile", 0.20), record("FSx", 0.10, "Failed"),
                                             other_dataset, unbilled, checkpoint]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    assert export("--outputs", str(outputs), "--results", str(path)) == 0
    captured = capsys.readouterr()
    assert "value='FastFile'" in captured.out and "value='run-1'" in captured.out
    assert jobs["FastFile"].name in captured.err
    # Of two completed FastFile jobs (a capacity retry, "-a1", beside the first), the cheaper; a results file that
    # names no execution exports under "export".
    retry = {**record("FastFile", 0.15), "job_name": jobs["FastFile"].name + "-a1"}
    path.write_text(json.dumps({**{k: v for k, v in results.items() if k != "execution"},
                                "records": results["records"] + [retry]}))
    assert export("--outputs", str(outputs), "--results", str(path)) == 0
    captured = capsys.readouterr()
    assert (f"the report's pick on caltech-jpg-1x in {path}: FastFile; its cheapest completed job "
            f"{jobs['FastFile'].name}-a1 ($0.1500)") in captured.err.replace("\n", " ")
    assert "dict(key='dslab:execution', value='export')" in captured.out
    # No completed job of the dataset: refused, naming the datasets that have one.
    path.write_text(json.dumps({**results, "records": [record("File", 0.3, "Failed"), other_dataset]}))
    assert export("--outputs", str(outputs), "--results", str(path)) == 2
    assert capsys.readouterr().err.strip() == (
        f"dslab: error: --results: {path} has no completed job on caltech-jpg-1x (allowed: caltech-tfr-1x)")
    # A results file that names no experiment hash, of a repeat this experiment does not plan: no such job.
    path.write_text(json.dumps({**{k: v for k, v in results.items() if k != "experiment_hash"},
                                "records": [{**record("FastFile", 0.2), "repeat": 5}]}))
    assert export("--outputs", str(outputs), "--results", str(path)) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "dslab: error: --results: the experiment has no FastFile job of caltech-jpg-1x, repeat 5")
    path.write_text(json.dumps(results))
    assert export("--outputs", str(outputs), "--results", str(path), "--repeat", "0") == 2
    assert capsys.readouterr().err.strip() == (
        "dslab: error: --repeat: --results picks the job (the cheapest completed one); drop --repeat, or drop "
        "--results to choose the job yourself")
    path.write_text(json.dumps({**results, "experiment_hash": "0" * 16}))
    assert export("--outputs", str(outputs), "--results", str(path)) == 2
    assert capsys.readouterr().err.strip() == (
        f"dslab: error: --results: {path} is a run of experiment hash 0000000000000000, not of --experiment "
        f"({experiment.content_hash}): give the experiment file that run used")


def test_export_has_help_with_an_example(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["export", "-h"])
    assert exit_.value.code == 0 and "example:" in capsys.readouterr().out


def test_export_of_a_trial_with_its_own_code_names_what_plan_names_and_uploads_it_when_asked(tmp_path, capsys):
    """`dslab plan` and `dslab export` package the user's code the same way: one content-addressed URI."""
    import boto3
    from moto import mock_aws
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(OUTPUTS))
    experiment = str(REPO / "examples" / "own-script" / "experiment.yaml")
    assert main(["plan", "--experiment", experiment, "--outputs", str(outputs), "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    request = next(j["request"] for j in planned["jobs"] if j["mode"] == "File" and "contract-only" in json.dumps(j["request"]["Tags"]))
    code_uri = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    assert "/code/user/" in code_uri
    args = ["export", "--experiment", experiment, "--outputs", str(outputs), "--mode", "File", "--trial", "contract-only"]
    assert main(args) == 0
    exported = capsys.readouterr()
    assert code_uri in exported.out
    assert (f"note: the job runs your code from {code_uri}; it is there once `dslab run` ran this trial, or put it "
            "there now with --upload") in exported.err.splitlines()
    bucket, key = code_uri[5:].split("/", 1)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=bucket)
        assert main([*args, "--upload"]) == 0
        assert code_uri in capsys.readouterr().out
        assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] > 0


def test_export_from_results_picks_per_dataset_and_trial_as_the_report_does(outputs, capsys, tmp_path):
    """The report answers each group of trials on its own (another instance type is another question): export
    --results exports the answer of the trial asked for, and does not pick a job of one trial against another's."""
    from dslab.inputs.experiment_file import load_experiment
    path = tmp_path / "two-trials.yaml"
    path.write_text("name: two-trials\ndatasets: [caltech-jpg-1x]\nmodes: [File, FastFile]\ninstance_type: ml.p3.2xlarge\n"
                    "trials:\n  - name: small\n  - name: large\n    instance_type: ml.p3.8xlarge\n    modes: [FastFile]\n")
    experiment = load_experiment(path)
    jobs = {(j.spec.trial.name, j.spec.mode): j for j in plan(experiment, lab_environment(), "run-2")}

    def record(trial, mode, cost):
        return {"job_name": jobs[(trial, mode)].name, "mode": mode, "dataset": "caltech-jpg-1x", "repeat": 0,
                "status": "Completed", "trial": trial, "instance_type": jobs[(trial, mode)].spec.trial.instance_type,
                "instance_count": 1, "billable_seconds": 100.0, "phases": {},
                "breakdown": {"downloading": 0.0, "training": 100.0, "other": 0.0}, "metrics": {},
                "cost_usd": {"instance": cost, "total": cost}}
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"experiment": experiment.document, "experiment_hash": experiment.content_hash,
                                   "execution": "run-2", "backend": "aws",
                                   "records": [record("small", "File", 0.0005), record("small", "FastFile", 0.0009),
                                               record("large", "FastFile", 0.0002)]}))
    run = lambda *args: main(["export", "--experiment", str(path), "--outputs", str(outputs), "--results", str(results),  # noqa: E731
                              *args])
    assert run() == 2
    assert capsys.readouterr().err.strip() == (
        "dslab: error: --trial: the report answers caltech-jpg-1x once per group of trials (caltech-jpg-1x · large; "
        "caltech-jpg-1x · small): give --trial (allowed: large, small)")
    assert run("--trial", "small") == 0
    captured = capsys.readouterr()
    assert "value='File'" in captured.out and jobs[("small", "File")].name in captured.err   # not large's cheaper job
    assert run("--trial", "large") == 0
    assert jobs[("large", "FastFile")].name in capsys.readouterr().err
    # A trial with no completed job in the run: refused, naming the trials that have one.
    document = json.loads(results.read_text())
    document["records"] = [r for r in document["records"] if r["trial"] == "small"]
    results.write_text(json.dumps(document))
    assert run("--trial", "large") == 2
    assert capsys.readouterr().err.strip() == (
        f"dslab: error: --trial: {results} has no completed job of trial 'large' on caltech-jpg-1x (allowed: small)")


def _checkpoint_experiment(folder, targets: list[str]):
    """An experiment whose one trial, "save", writes llama3 8B's checkpoints (at 1/10,000 of its size) on
    ml.p5.48xlarge to ``targets``: two writes, one read."""
    import yaml
    doc = yaml.safe_load((REPO / "dslab/contracts/dlio/llama3_8b.yaml").read_text())
    path = folder / "ckpt.yaml"
    path.write_text(yaml.safe_dump({"name": "ckpt", "instance_type": "ml.p5.48xlarge", "trials": [
        {"name": "save", "workload": {"file": "llama3_8b.yaml", "dlio": doc, "scale": 0.0001},
         "checkpoint": {"targets": targets, "writes": 2, "reads": 1, "seconds_between": 0}}]}))
    return path


def test_a_checkpoint_trial_exports_its_writer_job_per_target(capsys, tmp_path, monkeypatch):
    """An experiment whose only trial writes checkpoints crashed export (StopIteration: no dataset). Its writer job
    exports: CheckpointConfig for a sync target, the read-write channel for FSx and EFS; the answer's pick by default,
    as it runs on the lab as it stands, saying so where the answer provisions another file system, with its deploy."""
    monkeypatch.chdir(tmp_path)
    path = _checkpoint_experiment(tmp_path, ["s3", "fsx", "efs"])
    run = lambda *argv: main(["export", "--experiment", str(path), "--offline", *argv])  # noqa: E731
    assert run("--mode", "s3", "--out", str(tmp_path / "s3.py")) == 0
    code = (tmp_path / "s3.py").read_text()
    assert "checkpoint_config=shapes.CheckpointConfig(" in code and "input_data_config" not in code
    # The writer job ("cks3"), not the restore job that follows it ("rss3"), requested as an export.
    assert re.search(r"^wrote \S+s3\.py: job dsl-llama-8b-cks3-r0-\w+ \(s3 checkpoints of save, MaxRuntimeInSeconds "
                     r"[\d,]+\); run it with: python \S+s3\.py \[--wait\]$", capsys.readouterr().err, re.M)
    assert "dict(key='dslab:execution', value='export')" in code
    # Its first line says what it is: checkpoints on a target, not a mode on a dataset.
    assert re.fullmatch(r"# DataSourceLab job dsl-llama-8b-cks3-r0-\w+: checkpoints of llama-8b on s3, the writer "
                        r"\(trial save, repeat 0\)\.", code.splitlines()[0]), code.splitlines()[0]
    # The answer picks FSx Persistent 2 for llama3 8B on p5; the lab as it stands has Scratch 2: what `dslab plan` runs
    # is exported (issue 55: it was refused), its code saying how it runs and what the answer provisions, with the deploy.
    assert run("--out", str(tmp_path / "picked.py")) == 0
    code = (tmp_path / "picked.py").read_text()
    assert "file_system_data_source=shapes.FileSystemDataSource(" in code and "# runs on the lab as it stands: " in code
    err = next(line for line in code.splitlines() if line.startswith("# the answer provisions FSx as "))
    assert 'make deploy FSX=up CONTEXT="fsxDeploymentType=PERSISTENT_2' in err
    assert f"note: {err[2:]}" in capsys.readouterr().err
    assert run("--mode", "express") == 2
    assert capsys.readouterr().err.strip().endswith("--mode: trial save writes no checkpoints to 'express' (allowed: s3, "
                                                    "fsx, efs)")
    # Deployed as the answer provisions it: FSx is the lab as it stands, and its job exports with its channel.
    from .test_one_model import _outputs_file
    settings = dict(pair.split("=", 1) for pair in err.split('CONTEXT="')[1].split('"')[0].split())
    deployed = _outputs_file(tmp_path, settings)
    assert main(["export", "--experiment", str(path), "--outputs", deployed, "--out", str(tmp_path / "fsx.py")]) == 0
    code = (tmp_path / "fsx.py").read_text()
    assert "file_system_data_source=shapes.FileSystemDataSource(" in code and "file_system_type='FSxLustre'" in code
    assert "checkpoint_config" not in code


def test_export_refusals_name_the_flag_the_problem_and_what_is_allowed(outputs, capsys, tmp_path):
    """Each refusal of export, word for word: the flag, the problem, the choices (issue 58: their words were
    untested)."""
    def refused(*args, experiment=str(REPO / "experiments/post-12-jobs.yaml")):
        assert main(["export", "--experiment", experiment, "--outputs", str(outputs), *args]) == 2
        return capsys.readouterr().err.strip().splitlines()[-1]
    assert refused("--dataset", "mine") == ("dslab: error: --dataset: 'mine' is not a dataset of the experiment "
                                            "(allowed: caltech-jpg-1x, caltech-jpg-50x, caltech-tfr-1x, caltech-tfr-50x)")
    two = tmp_path / "two.yaml"
    two.write_text("name: two\ndatasets: [caltech-jpg-1x, caltech-tfr-1x]\nmodes: [File, FastFile]\n"
                   "instance_type: ml.p3.2xlarge\ntrials:\n  - name: small\n  - name: large\n"
                   "    datasets: [caltech-tfr-1x]\n")
    assert refused("--trial", "large", "--dataset", "caltech-jpg-1x", experiment=str(two)) == (
        "dslab: error: --trial: no trial 'large' reads caltech-jpg-1x (allowed: small)")
    from dslab.inputs.experiment_file import load_experiment
    experiment = load_experiment(REPO / "experiments/post-12-jobs.yaml")
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"experiment": experiment.document, "experiment_hash": experiment.content_hash,
                                   "execution": "run-1", "backend": "aws", "records": []}))
    assert refused("--results", str(results), "--repeat", "0") == (
        "dslab: error: --repeat: --results picks the job (the cheapest completed one); drop --repeat, or drop "
        "--results to choose the job yourself")
    assert refused("--results", str(results)) == f"dslab: error: --results: {results} has no completed job on " \
                                                 "caltech-jpg-1x"


def test_exported_notes_follow_the_codes_three_header_lines(capsys, tmp_path, monkeypatch):
    """Where the answer provisions what the lab lacks, its two notes are comments placed after the header's three
    lines, and the rest of the code follows whole."""
    monkeypatch.chdir(tmp_path)
    path = _checkpoint_experiment(tmp_path, ["s3", "fsx"])
    assert main(["export", "--experiment", str(path), "--offline", "--mode", "fsx"]) == 0
    lines = capsys.readouterr().out.splitlines()
    plain = main(["export", "--experiment", str(path), "--offline", "--mode", "s3"])
    header = capsys.readouterr().out.splitlines()[:3]
    assert plain == 0 and all(line.startswith("#") for line in header)
    assert all(line.startswith("# ") for line in lines[:3]) and lines[1:3] == header[1:3]   # line 0 names the job
    assert lines[3].startswith("# runs on the lab as it stands: ") and lines[4].startswith("# the answer provisions ")
    assert not lines[5].startswith("# runs on")


def test_a_checkpoint_trial_refuses_results_and_a_dataset(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _checkpoint_experiment(tmp_path, ["s3"])
    run = lambda *argv: main(["export", "--experiment", str(path), "--offline", *argv])  # noqa: E731
    assert run("--trial", "save", "--results", "r.json") == 2
    assert capsys.readouterr().err.strip().endswith("--results: trial save writes checkpoints: --results exports a "
                                                    "data job; drop it")
    # Beside a trial that reads a dataset: --dataset names one of the experiment's, but not one the trial reads.
    import yaml
    both = yaml.safe_load(path.read_text())
    both["trials"].append({"name": "read", "modes": ["File"], "datasets": ["caltech-jpg-1x"]})
    path.write_text(yaml.safe_dump(both))
    assert run("--trial", "save", "--dataset", "caltech-jpg-1x") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "dslab: error: --dataset: trial save writes checkpoints: it reads no dataset; drop --dataset")
    assert run("--trial", "save", "--mode", "s3") == 0
    captured = capsys.readouterr()
    assert "checkpoint_config=shapes.CheckpointConfig(" in captured.out
    # The target as the answer prints it ("S3 sync"), in any case, is the same job.
    assert run("--trial", "save", "--mode", "S3 sync") == 0
    assert capsys.readouterr().out == captured.out
    assert run("--trial", "save") == 0
    assert f"recommended for save: S3 sync (as `dslab recommend --experiment {path}`); --mode chooses another" in \
        capsys.readouterr().err.replace("\n", " ")


def test_a_checkpoint_job_on_fsx_the_lab_lacks_is_refused_naming_the_targets(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _checkpoint_experiment(tmp_path, ["s3", "fsx"])
    outputs = tmp_path / "cdk-outputs.json"
    outputs.write_text(json.dumps({k: v for k, v in OUTPUTS.items() if k != "DataSourceLab-Fsx"}))
    assert main(["export", "--experiment", str(path), "--outputs", str(outputs), "--mode", "fsx"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("dslab: error: --mode: the fsx job of save is skipped: FSx for Lustre is not deployed")
    assert err.endswith("(allowed: s3, fsx)")


def test_each_trial_exports_with_its_own_answers_provisioning_beside_the_lab_as_it_stands(capsys, tmp_path, monkeypatch):
    """Two trials on one dataset, one instance and 16: each job's notes are its own trial's answer. On 16 x
    ml.p4d.24xlarge the answer provisions FSx Persistent 2 at 1,000 MB/s/TiB, 14,400 GiB (tests/test_advice_by_hand.py
    works it out); on one, Scratch 2 at 4,800 GiB. The lab as it stands has Scratch 2 at 1,200 GiB."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "e.yaml"
    path.write_text("name: big\ndatasets: [caltech-jpg-50x]\ninstance_type: ml.p4d.24xlarge\ntrials:\n"
                    "  - {name: one, modes: [FSx, File]}\n  - {name: many, modes: [FSx], instance_count: 16}\n")
    noted = {}
    for trial in ("one", "many"):
        assert main(["export", "--experiment", str(path), "--offline", "--mode", "FSx", "--trial", trial,
                     "--out", str(tmp_path / f"{trial}.py")]) == 0
        noted[trial] = [line[len("note: "):] for line in capsys.readouterr().err.splitlines()
                        if line.startswith("note: ")]
        code = (tmp_path / f"{trial}.py").read_text().splitlines()
        assert code[3:5] == [f"# {line}" for line in noted[trial]]   # the same two lines, under the header
        assert code[2].startswith("# Run: python THIS_FILE") and code[5].startswith('"""Start the training job')
    for trial, provisioned in (("one", 'FSx Scratch 2 4,800 GiB ($'),
                               ("many", 'FSx P2-1000 14,400 GiB ($')):
        first, second = noted[trial]
        assert re.fullmatch(r"runs on the lab as it stands \(Scratch 2, 1,200 GiB \(234 MB/s\)\): \$[\d.,]+ per run, "
                            r"\d+ min to a result", first), first
        assert second.startswith(f"the answer prices FSx as {provisioned}") and ": make deploy FSX=up " in second


def test_the_recommended_source_is_the_named_trials_answer_said_with_its_premise(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "e.yaml"
    path.write_text("name: big\ndatasets: [caltech-jpg-50x]\ninstance_type: ml.p4d.24xlarge\ntrials:\n"
                    "  - {name: one, modes: [FSx, File]}\n  - {name: many, modes: [FSx], instance_count: 16}\n")
    assert main(["export", "--experiment", "e.yaml", "--offline", "--trial", "many", "--out", "z.py"]) == 0
    err = capsys.readouterr().err.splitlines()
    said = err.index("recommended for caltech-jpg-50x · many: FSx (as `dslab recommend --experiment e.yaml --dataset "
                     "caltech-jpg-50x`); --mode chooses another")
    assert err[said + 1].startswith("premise: 16 x ml.p4d.24xlarge (8 x A100 40GB) at ")


def test_a_dataset_of_unknown_size_has_no_answer_to_export_without_a_mode(capsys, tmp_path, monkeypatch):
    from dslab.core.answer.scenarios import UNKNOWN_SHAPE_FIX
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "u.yaml"
    path.write_text("name: unsized\ndatasets: [{name: u, format: jpg}]\ntrials:\n  - {name: a, modes: [File]}\n")
    assert main(["export", "--experiment", str(path), "--offline"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"dslab: error: --mode: no answer for u: the size of dataset u is not known: {UNKNOWN_SHAPE_FIX}; give --mode")
