"""Bring your own script: the user's code is checked, packaged, run in every mode and reported."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from dslab.inputs import user_code
from dslab.contracts import validate_results
from dslab.core.errors import ConfigError
from dslab.core.experiment import parse_experiment
from dslab.core.requests import METRIC_DEFINITIONS, LabEnvironment, plan
from dslab.inputs.experiment_file import load_experiment
from dslab.local.runner import FolderStorage, run_training_job
from dslab.local.storage import fuse_available
from dslab.aws.validation import validate_request

from .conftest import REPO
from .test_operator import OUTPUTS, dslab

EXAMPLE = REPO / "examples" / "own-script"
ENV = LabEnvironment.from_dict({
    "bucket": "datasourcelab-data-123456789012-us-east-1", "region": "us-east-1",
    "role_arn": "arn:aws:iam::123456789012:role/Training", "subnet_ids": "subnet-0123456789abcdef0",
    "security_group_ids": "sg-0123456789abcdef0", "code_uri": "s3://assets/lab.tar.gz", "code_version": "lab",
    "image_uri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312",
    "fsx": {"file_system_id": "fs-0123456789abcdef1", "mount_name": "mnt1234"},
    "efs": {"file_system_id": "fs-0fedcba9876543210"}})


def own_experiment(tmp_path: Path, script: str, extra: str = "") -> Path:
    path = tmp_path / "experiment.yaml"
    path.write_text(f"""
name: mine
datasets: [{{name: mine-jpg, format: jpg, generate: {{images: 10, classes: 2}}}}]
modes: [File, FastFile, Pipe, FSx, EFS]
hyperparameters: {{epochs: 2, lr: 0.1}}
script: {script}
{extra}""")
    return path


def copy_example_code(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    shutil.copytree(EXAMPLE / "code", code, ignore=shutil.ignore_patterns("__pycache__"))
    return code


# ---- the experiment and the requests -------------------------------------------------------------

def test_requests_run_the_users_entry_point_with_only_its_hyperparameters_and_metrics(tmp_path):
    copy_example_code(tmp_path)
    path = own_experiment(tmp_path, "{source_dir: code, entry_point: train.py, "
                                    "metric_definitions: [{Name: loss, Regex: 'loss=([0-9.]+)'}]}")
    experiment = user_code.prepare(load_experiment(path), path, ENV.bucket, tmp_path / "build")
    jobs = plan(experiment, ENV, "exec-1")
    assert len(jobs) == 5
    code_uri = experiment.trials[0].script.code_uri
    assert code_uri.startswith(f"s3://{ENV.bucket}/code/user/") and code_uri.endswith("/sourcedir.tar.gz")
    for job in jobs:
        request = job.request
        validate_request("sagemaker", "CreateTrainingJob", request)  # botocore's model
        hps = {k: json.loads(v) for k, v in request["HyperParameters"].items()}
        # The framework container turns every non-sagemaker_ hyperparameter into --name value: only the user's.
        assert hps == {"sagemaker_program": "train.py", "sagemaker_submit_directory": code_uri,
                       "sagemaker_region": "us-east-1", "sagemaker_container_log_level": 20, "epochs": 2, "lr": 0.1}
        definitions = request["AlgorithmSpecification"]["MetricDefinitions"]
        assert definitions[0] == {"Name": "loss", "Regex": "loss=([0-9.]+)"} and definitions[1:] == METRIC_DEFINITIONS
        tags = {t["Key"]: t["Value"] for t in request["Tags"]}
        assert tags["dslab:script"] == "train.py" and tags["dslab:code-version"] == f"user-{code_uri.split('/')[-2]}"
    # The experiment as run names the exact code: packaging is byte-reproducible, so the URI is stable.
    again = user_code.prepare(load_experiment(path), path, ENV.bucket, tmp_path / "build2")
    assert again.trials[0].script.code_uri == code_uri and again.content_hash == experiment.content_hash
    assert experiment.document["trials"][0]["script"]["code_uri"] == code_uri


def test_package_holds_the_users_files_and_the_reporting_helper(tmp_path):
    code = copy_example_code(tmp_path)
    (code / "__pycache__").mkdir()
    (code / "__pycache__" / "x.pyc").write_bytes(b"\0")
    path = own_experiment(tmp_path, "{source_dir: code}")
    [packaged] = user_code.package(load_experiment(path), tmp_path, tmp_path / "build")
    with tarfile.open(packaged.tarball) as tar:
        names = sorted(tar.getnames())
        helper = tar.extractfile("dslab_report.py").read()
    assert names == ["dslab_report.py", "train.py", "train_reporting.py"]
    assert helper == (REPO / "training" / "dslab_report.py").read_bytes()
    # A folder with its own dslab_report.py keeps it.
    (code / "dslab_report.py").write_text("# mine\n")
    [own] = user_code.package(load_experiment(path), tmp_path, tmp_path / "build")
    with tarfile.open(own.tarball) as tar:
        assert tar.extractfile("dslab_report.py").read() == b"# mine\n"


def test_requirements_txt_is_refused_at_plan_with_what_to_do(tmp_path):
    code = copy_example_code(tmp_path)
    (code / "requirements.txt").write_text("torchdata==0.9.0\n")
    outputs = tmp_path / "cdk-outputs.json"
    outputs.write_text(json.dumps(OUTPUTS))
    path = own_experiment(tmp_path, "{source_dir: code}")
    result = dslab("plan", "--experiment", str(path), "--outputs", str(outputs))
    assert result.returncode == 2
    assert "script.source_dir" in result.stderr and "requirements.txt" in result.stderr
    assert "no internet" in result.stderr and "image_uri" in result.stderr and "packages_in_image" in result.stderr
    # `dslab run` refuses it before looking for the deployed lab (no AWS call is made).
    run = dslab("run", "--experiment", str(path), "--outputs", str(tmp_path / "missing.json"))
    assert run.returncode == 2 and "requirements.txt" in run.stderr
    declared = own_experiment(tmp_path, "{source_dir: code, packages_in_image: true}")
    ok = dslab("plan", "--experiment", str(declared), "--outputs", str(outputs), "--json")
    assert ok.returncode == 0, ok.stderr
    assert len(json.loads(ok.stdout)["jobs"]) == 5


@pytest.mark.parametrize("script, field, words", [
    ("{source_dir: nowhere}", "script.source_dir", "is not a folder"),
    ("{source_dir: code, entry_point: missing.py}", "script.entry_point", "is not a file"),
    ("{source_dir: code, entry_point: ../up.py}", "script.entry_point", "inside source_dir"),
    ("{source_dir: code, entrypoint: train.py}", "script.entrypoint", "did you mean 'entry_point'"),
    ("{entry_point: train.py}", "script", "names no code"),
    ("{source_dir: code, metric_definitions: [{Name: loss, Regex: 'loss=[0-9.]+'}]}",
     "script.metric_definitions[0].Regex", "capturing group"),
    ("{source_dir: code, metric_definitions: [{Name: loss, Regex: 'loss=([0-9.]+'}]}",
     "script.metric_definitions[0].Regex", "not a regular expression"),
])
def test_bad_script_settings_name_the_field(tmp_path, script, field, words):
    copy_example_code(tmp_path)
    path = own_experiment(tmp_path, script)
    with pytest.raises(ConfigError) as err:
        user_code.prepare(load_experiment(path), path, ENV.bucket, tmp_path / "build")
    assert err.value.field.endswith(field) and words in str(err.value)


def test_a_script_never_uploaded_cannot_be_planned():
    experiment = parse_experiment({"datasets": [{"name": "d", "format": "jpg"}], "modes": ["File"],
                                   "script": {"source_dir": "code"}})
    with pytest.raises(ConfigError) as err:
        plan(experiment, ENV, "exec")
    assert "script.code_uri" in err.value.field and "dslab run" in str(err.value)


def run_example_in_local_lab(example: Path, tmp_path: Path, lab_cache, bound_lab, edit):
    """An example's experiment as `dslab local` runs it (its code by absolute path, ``edit`` applied to the
    document), deployed in-process from the session's bound synthesis; the run, checked and validated."""
    from dslab.local.lab import run_local
    import yaml
    document = yaml.safe_load((example / "experiment.yaml").read_text())
    for trial in document["trials"]:
        if trial.get("script"):
            trial["script"]["source_dir"] = str(example / "code")
    edit(document)
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(document))
    run = run_local(path, tmp_path / "out", cache=lab_cache, say=lambda _: None, assembly=bound_lab.outdir)
    assert run.execution_status == "SUCCEEDED", run.execution_error
    validate_results(run.results)
    return run


# ---- the container: arguments, requirements, metric definitions -----------------------------------

def folder_job(tmp_path: Path, code: Path, hyperparameters: dict, definitions: list | None = None) -> tuple[dict, FolderStorage]:
    s3 = tmp_path / "s3"
    for i in range(3):
        (s3 / "bkt" / "datasets" / "d").mkdir(parents=True, exist_ok=True)
        (s3 / "bkt" / "datasets" / "d" / f"{i}.jpg").write_bytes(bytes(100 + i))
    tarball, _ = user_code.build_sourcedir(code, tmp_path / "build", extra_files={"dslab_report.py": user_code.HELPER})
    (s3 / "bkt" / "code.tar.gz").write_bytes(tarball.read_bytes())
    request = {
        "TrainingJobName": "own-1", "RoleArn": ENV.role_arn,
        "AlgorithmSpecification": {"TrainingImage": ENV.image_uri, "TrainingInputMode": "File",
                                   "MetricDefinitions": definitions or METRIC_DEFINITIONS},
        "HyperParameters": {"sagemaker_program": json.dumps("train.py"),
                            "sagemaker_submit_directory": json.dumps("s3://bkt/code.tar.gz"),
                            **{k: json.dumps(v) for k, v in hyperparameters.items()}},
        "InputDataConfig": [{"ChannelName": "train", "InputMode": "File", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": "s3://bkt/datasets/d/", "S3DataDistributionType": "FullyReplicated"}}}],
        "OutputDataConfig": {"S3OutputPath": "s3://bkt/output/"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600}}
    return request, FolderStorage(s3)


def test_container_passes_hyperparameters_as_arguments_and_scrapes_the_users_metric(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(
        "import argparse, os, sys\n"
        "p = argparse.ArgumentParser(); p.add_argument('--epochs', type=int); p.add_argument('--name')\n"
        "a = p.parse_args()\n"
        "print('argv', sys.argv[1:])\n"
        "for e in range(a.epochs): print(f'epoch {e} accuracy={0.5 + e / 10}')\n"
        "print(sorted(os.listdir(os.environ['SM_CHANNEL_TRAIN'])))\n")
    definitions = [{"Name": "accuracy", "Regex": r"accuracy=([0-9.]+)"}, *METRIC_DEFINITIONS]
    request, storage = folder_job(tmp_path, code, {"epochs": 3, "name": "run a"}, definitions)
    outcome = run_training_job(request, storage, tmp_path / "work")
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert "argv ['--epochs', '3', '--name', 'run a']" in outcome.log
    assert "['0.jpg', '1.jpg', '2.jpg']" in outcome.log
    final = {m["MetricName"]: m["Value"] for m in outcome.describe["FinalMetricDataList"]}
    assert final == {"accuracy": 0.7}  # the last value, as SageMaker's FinalMetricDataList


def test_requirements_declared_present_install_offline_or_fail_the_job(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("import numpy\nprint('ok', numpy.__name__)\n")
    (code / "requirements.txt").write_text("numpy\n")  # in the "image" (this interpreter): satisfied offline
    request, storage = folder_job(tmp_path, code, {})
    outcome = run_training_job(request, storage, tmp_path / "work")
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    (code / "requirements.txt").write_text("dslab-no-such-package==1.0\n")
    request, storage = folder_job(tmp_path, code, {})
    failed = run_training_job(request, storage, tmp_path / "work2")
    assert failed.status == "Failed" and "requirements.txt failed without internet access" in failed.describe["FailureReason"]


# ---- the helper ------------------------------------------------------------------------------------

def test_reporting_helper_measures_stall_compute_and_first_batch_like_the_lab(tmp_path, capsys):
    import sys
    sys.path.insert(0, str(REPO / "training"))
    from dslab_report import Meter
    now = [0.0]

    class Loader:  # each batch takes 3 s to arrive (the first 5 s), the step 1 s
        def __iter__(self):
            for i in range(4):
                now[0] += 5.0 if i == 0 else 3.0
                yield list(range(10))

    meter = Meter(output_dir=tmp_path, clock=lambda: now[0])
    for _ in meter.epoch(Loader(), nbytes=lambda b: 1000 * len(b)):
        now[0] += 1.0
    summary = meter.finish()
    # epoch: 5 + 1 + 3 * (3 + 1) = 18 s; AU leaves the first step out: 3 s of compute in 12 s.
    assert summary["epoch_seconds"] == [18.0] and summary["time_to_first_batch_seconds"] == 5.0
    assert summary["au_percent"] == pytest.approx(25.0)
    assert summary["end_to_end_efficiency_percent"] == pytest.approx(100 * 4 / 18)
    assert summary["data_stall_seconds"] == 9.0 and summary["samples"] == 40 and summary["bytes"] == 40_000
    assert json.loads((tmp_path / "metrics.json").read_text())["au_percent"] == pytest.approx(25.0)
    printed = capsys.readouterr().out
    for definition in METRIC_DEFINITIONS:  # every line the lab's metric definitions scrape
        if definition["Name"] != "epoch_seconds":
            import re
            assert re.search(definition["Regex"], printed), definition["Name"]


# ---- the whole lab -----------------------------------------------------------------------------------

def test_the_example_script_using_the_helper_reports_au_through_the_container(tmp_path):
    code = copy_example_code(tmp_path)
    request, storage = folder_job(tmp_path, code, {"epochs": 2, "batch_size": 2, "step_seconds": 0.01})
    request["HyperParameters"]["sagemaker_program"] = json.dumps("train_reporting.py")
    outcome = run_training_job(request, storage, tmp_path / "work")
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    metrics = outcome.metrics  # the helper's metrics.json, as Collect reads it from output.tar.gz
    assert metrics["reported_by"] == "dslab_report" and metrics["samples"] == 6 and metrics["epochs"] == 2
    assert 0 < metrics["au_percent"] <= 100 and 0 < metrics["end_to_end_efficiency_percent"] <= 100
    final = {m["MetricName"]: m["Value"] for m in outcome.describe["FinalMetricDataList"]}
    assert final["samples"] == 6 and final["au_percent"] == pytest.approx(metrics["au_percent"], rel=1e-3)


def test_on_two_hosts_the_helper_reports_each_host_and_a_name_both_wrote_is_kept_once_and_logged(tmp_path):
    """SageMaker merges the hosts' /opt/ml/model into one model.tar.gz: "If multiple containers in a single
    training job write to this directory they should ensure no file/directory names clash. SageMaker AI
    aggregates the result in a TAR file." Which copy a clash keeps is not documented: the stand-in keeps
    the first host's and says so in the job's log, so the clash shows before a real job hides it."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(
        "import os\n"
        "from dslab_report import Meter\n"
        "meter = Meter()\n"
        "for name in meter.epoch(sorted(os.listdir(os.environ['SM_CHANNEL_TRAIN'])), samples=lambda name: 1):\n"
        "    pass\n"
        "meter.finish()\n"
        "host, model = os.environ['SM_CURRENT_HOST'], os.environ['SM_MODEL_DIR']\n"
        "os.makedirs(f'{model}/checkpoints', exist_ok=True)\n"
        "open(f'{model}/checkpoints/{host}.txt', 'w').write(host)\n"
        "open(f'{model}/weights.txt', 'w').write(host)\n")
    request, storage = folder_job(tmp_path, code, {})
    request["ResourceConfig"]["InstanceCount"] = 2
    outcome = run_training_job(request, storage, tmp_path / "work")
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    # Each host's figures under its own name (the helper names them): the job's metrics hold both.
    cluster = outcome.metrics["cluster"]
    assert cluster["hosts"] == cluster["hosts_reported"] == 2 and cluster["samples"] == 2 * 3
    with tarfile.open(storage.s3_root / "bkt" / "output" / "own-1" / "output" / "model.tar.gz") as tar:
        model = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}
    assert model == {"checkpoints/algo-1.txt": "algo-1", "checkpoints/algo-2.txt": "algo-2", "weights.txt": "algo-1"}
    assert len(outcome.warnings) == 1 and "model.tar.gz: weights.txt was written by algo-1 and algo-2" in outcome.warnings[0]
    assert f"warning: {outcome.warnings[0]}" in outcome.log


@pytest.mark.skipif(not fuse_available(), reason="s3fs-fuse and /dev/fuse are needed (.ci/run installs them)")
def test_contract_only_script_runs_in_every_mode_in_the_local_lab_and_appears_in_the_report(lab_cache, tmp_path, bound_lab):
    """The example's contract-only trial (the helper's trial is the test above, through the same container)."""
    def only_contract(document):
        document["trials"] = [t for t in document["trials"] if t["name"] == "contract-only"]
    run = run_example_in_local_lab(EXAMPLE, tmp_path, lab_cache, bound_lab, only_contract)
    out = tmp_path / "out"
    records = {r["mode"]: r for r in run.results["records"]}
    modes = ("File", "FastFile", "Pipe", "FSx", "EFS")
    assert set(records) == set(modes)
    dataset_bytes = sum(p.stat().st_size for p in (lab_cache / "datasets").glob("jpg-200-8-3-*/**/*.jpg"))
    for mode in modes:
        record = records[mode]
        assert record["status"] == "Completed", (mode, record["failure_reason"])
        # Without any cooperation: phases, billable time and cost, from the job itself ...
        assert record["billable_seconds"] >= 1 and "Training" in record["phases"] and record["cost_usd"]["total"] > 0
        # ... its own metric definitions, and the bytes read where the mode tells (File copies the whole channel).
        assert record["metrics"]["au_percent"] is None and record["metrics"]["user"] == {"loss": 1.0}
        assert record["metrics"]["bytes_read"] == (dataset_bytes if mode == "File" else None)
    report = (out / "report.md").read_text()
    assert all(f"| own-jpg | {mode} |" in report for mode in modes)
    script = run.results["experiment"]["trials"][0]["script"]
    assert script["entry_point"] == "train.py" and script["code_uri"].startswith("s3://")


def test_hyperparameter_names_with_dashes_reach_an_argparse_script_as_sagemaker_passes_them(tmp_path):
    """SageMaker takes any key of up to 256 characters (botocore: HyperParameterKey, pattern '.*'); users'
    scripts commonly take --learning-rate and --batch-size."""
    experiment = parse_experiment({"name": "dashes", "datasets": [{"name": "d", "format": "jpg"}], "modes": ["File"],
                                   "instance_type": "ml.m5.xlarge",
                                   "hyperparameters": {"learning-rate": 0.01, "batch-size": 32, "model.name": "tiny net"},
                                   "script": {"source_dir": str(tmp_path), "entry_point": "train.py",
                                              "code_uri": f"s3://{ENV.bucket}/code/user/{'a' * 64}/sourcedir.tar.gz"}})
    (job,) = plan(experiment, ENV, "exec")
    validate_request("sagemaker", "CreateTrainingJob", job.request)   # botocore's model
    assert job.request["HyperParameters"]["learning-rate"] == "0.01"
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(
        "import argparse\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--learning-rate', type=float); p.add_argument('--batch-size', type=int)\n"
        "p.add_argument('--model.name', dest='model')\n"
        "a = p.parse_args()\n"
        "print(f'lr={a.learning_rate} batch={a.batch_size} model={a.model}')\n")
    request, storage = folder_job(tmp_path, code, {"learning-rate": 0.01, "batch-size": 32, "model.name": "tiny net"})
    outcome = run_training_job(request, storage, tmp_path / "work")
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert "lr=0.01 batch=32 model=tiny net" in outcome.log


@pytest.mark.parametrize("hyperparameters, field, words", [
    ({"x" * 257: 1}, "hyperparameters", "1 to 256 characters"),
    ({"sagemaker_program": "mine.py"}, "hyperparameters.sagemaker_program", "framework container"),
    ({"notes": "n" * 2600}, "hyperparameters.notes", "2,500"),
    ({f"h{i}": i for i in range(81)}, "hyperparameters", "at most 80"),
    # The lab's script's GETs in flight (Script mode), priced by every estimate: a whole number it can run.
    ({"s3_concurrency": 0}, "hyperparameters.s3_concurrency", "1..1024"),
    ({"s3_concurrency": 1025}, "hyperparameters.s3_concurrency", "1..1024"),
    ({"s3_concurrency": "64"}, "hyperparameters.s3_concurrency", "must be an integer"),
    ({"s3_concurrency": True}, "hyperparameters.s3_concurrency", "must be an integer"),
])
def test_hyperparameters_sagemaker_would_refuse_are_refused_naming_the_field(hyperparameters, field, words):
    with pytest.raises(ConfigError) as err:
        parse_experiment({"name": "bad", "datasets": [{"name": "d", "format": "jpg"}], "hyperparameters": hyperparameters})
    assert field in err.value.field and words in str(err.value)


def test_s3_concurrency_is_the_lab_scripts_and_a_users_own_script_keeps_its_own_meaning(tmp_path):
    """The lab's script reads s3_concurrency (1 to 1,024 GETs in flight), and the trial's answer prices its Script jobs
    at it; a user's own script gets whatever it was given, unchecked, and its answer does not read it."""
    from dslab.core.answer.scenarios import s3_concurrency_of
    lab = parse_experiment({"name": "lab", "datasets": [{"name": "d", "format": "jpg"}], "modes": ["Script"],
                            "hyperparameters": {"s3_concurrency": 1024}})
    assert s3_concurrency_of(lab.trials[0]) == 1024
    (job,) = plan(lab, ENV, "exec")
    assert job.request["HyperParameters"]["s3_concurrency"] == "1024"
    own = parse_experiment({"name": "own", "datasets": [{"name": "d", "format": "jpg"}], "modes": ["Script"],
                            "hyperparameters": {"s3_concurrency": "fast"},
                            "script": {"source_dir": str(tmp_path), "entry_point": "train.py",
                                       "code_uri": f"s3://{ENV.bucket}/code/user/{'a' * 64}/sourcedir.tar.gz"}})
    assert s3_concurrency_of(own.trials[0]) is None


# ---- your own data ingestion: a user's script that reads S3 itself (examples/own-ingestion) ----------

INGESTION = REPO / "examples" / "own-ingestion"


def _ingestion_request(tmp_path: Path, objects: dict[str, bytes]) -> tuple[dict, FolderStorage]:
    """The example's boto3 trial as the lab plans it (no channel, --dataset_uri), on a folder stand-in."""
    experiment = load_experiment(INGESTION / "experiment.yaml")
    experiment = user_code.prepare(experiment, INGESTION / "experiment.yaml", ENV.bucket, tmp_path / "build")
    job = next(j for j in plan(experiment, ENV, "exec") if j.spec.trial.name == "boto3-script")
    validate_request("sagemaker", "CreateTrainingJob", job.request)
    s3 = tmp_path / "s3"
    for key, body in objects.items():
        (s3 / ENV.bucket / key).parent.mkdir(parents=True, exist_ok=True)
        (s3 / ENV.bucket / key).write_bytes(body)
    bucket, key = json.loads(job.request["HyperParameters"]["sagemaker_submit_directory"])[5:].split("/", 1)
    tarball, _ = user_code.build_sourcedir(INGESTION / "code", tmp_path / "src", extra_files={"dslab_report.py": user_code.HELPER})
    (s3 / bucket / key).parent.mkdir(parents=True, exist_ok=True)
    (s3 / bucket / key).write_bytes(tarball.read_bytes())
    return job.request, FolderStorage(s3)


def test_a_users_boto3_script_reads_its_dataset_uri_on_the_folder_stand_in(tmp_path):
    """`dslab job run-local`'s backend: the folders are served over a real S3 endpoint for the job."""
    objects = {f"datasets/own-jpg/c{i % 2}/{i}.jpg": bytes([i]) * (1000 + i) for i in range(7)}
    objects["datasets/other/secret.bin"] = b"not this dataset"
    request, storage = _ingestion_request(tmp_path, objects)
    assert "InputDataConfig" not in request
    assert json.loads(request["HyperParameters"]["dataset_uri"]) == f"s3://{ENV.bucket}/datasets/own-jpg/"
    outcome = run_training_job(request, storage, tmp_path / "work")
    assert outcome.status == "Completed", outcome.describe.get("FailureReason", "") + outcome.log[-1500:]
    wanted = sum(len(v) for k, v in objects.items() if k.startswith("datasets/own-jpg/"))
    assert "objects=7" in outcome.log and f"bytes_seen={wanted}" in outcome.log
    assert {m["MetricName"]: m["Value"] for m in outcome.describe["FinalMetricDataList"]}["loss"] == 1.0


def test_a_users_boto3_script_and_the_labs_own_reads_run_in_the_local_lab(lab_cache, tmp_path, bound_lab):
    """The README's example as `dslab local` runs it: the user's boto3 script reads the stand-in's S3
    through AWS_ENDPOINT_URL, unchanged, and so does the lab's script with its own GETs (its File and
    FastFile trials run in every other lab test); the report names both. (On AWS, the exported SDK code
    sends the same request: tests/test_export.py, case Script.)"""
    def smaller_with_the_labs_own_reads(document):
        document["datasets"][0]["generate"]["images"] = 40
        for trial in document["trials"]:
            if not trial.get("script"):
                trial["modes"] = ["Script"]   # File and FastFile run in every other lab test
    run = run_example_in_local_lab(INGESTION, tmp_path, lab_cache, bound_lab, smaller_with_the_labs_own_reads)
    out = tmp_path / "out"
    records = {(r["trial"], r["mode"], r.get("ingestion")): r for r in run.results["records"]}
    assert set(records) == {("boto3-script", "FastFile", "script"), ("lab-script", "FastFile", "script")}
    for key, record in records.items():
        assert record["status"] == "Completed", (key, record["failure_reason"])
    assert records[("boto3-script", "FastFile", "script")]["metrics"]["user"] == {"loss": 1.0}
    lab_reads = records[("lab-script", "FastFile", "script")]["metrics"]
    assert lab_reads["samples"] == 40 and lab_reads["time_to_first_batch_seconds"] > 0
    report = (out / "report.md").read_text()
    assert "| own-jpg · boto3-script | Script |" in report and "| own-jpg · lab-script | Script |" in report
