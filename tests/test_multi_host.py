"""Multi-instance jobs as SageMaker runs them, before they start: sweeps shard their S3 channels as the
sizing model assumes, and no instance is planned that would get no data."""

from __future__ import annotations

import json

import pytest
import yaml

from dslab.cli import main
from dslab.core.errors import ConfigError
from dslab.core.experiment import parse_experiment
from dslab.core.requests import plan
from dslab.local import lab as local_lab

from .helpers import lab_environment

SWEEP = {"name": "sweep", "datasets": [{"name": "d", "format": "tfrecord"}], "instance_type": "ml.m5.xlarge", "compute": "v100",
         "modes": ["File", "FastFile", "Pipe", "FSx", "EFS", "Script"], "instance_count": [1, 2]}


def distributions(document: dict) -> dict[tuple[str, int], str | None]:
    """(mode, instances) -> the channel's S3DataDistributionType (None: a file system's channel)."""
    return {(j.spec.mode, j.spec.trial.instance_count):
            j.request["InputDataConfig"][0]["DataSource"].get("S3DataSource", {}).get("S3DataDistributionType")
            for j in plan(parse_experiment(document), lab_environment(), "x") if "InputDataConfig" in j.request}


def test_a_sweep_shards_its_s3_channels_on_several_instances_as_the_sizing_model_assumes():
    """S3DataSource: with ShardedByS3Key "each instance gets approximately 1/n of the number of S3 objects";
    FullyReplicated puts "the entire dataset on each ML compute instance". dslab size gives each of N
    instances 1/N of the data, so the sweep it is measured against must shard; one instance replicates."""
    assert distributions(SWEEP) == {
        ("File", 1): "FullyReplicated", ("FastFile", 1): "FullyReplicated", ("Pipe", 1): "FullyReplicated",
        ("FSx", 1): None, ("EFS", 1): None,
        ("File", 2): "ShardedByS3Key", ("FastFile", 2): "ShardedByS3Key", ("Pipe", 2): "ShardedByS3Key",
        ("FSx", 2): None, ("EFS", 2): None}
    experiment = parse_experiment(SWEEP)
    assert {t["distribution"] for t in experiment.document["trials"]} == {"auto"}
    assert parse_experiment(experiment.document).content_hash == experiment.content_hash
    # What the user set is what runs: a replicated sweep stays replicated.
    replicated = distributions({**SWEEP, "modes": ["File", "Pipe"], "distribution": "FullyReplicated"})
    assert set(replicated.values()) == {"FullyReplicated"}
    with pytest.raises(ConfigError, match="distribution"):
        parse_experiment({**SWEEP, "distribution": "ShardedByS3Key"})   # FSx, EFS and Script cannot be sharded


# ---- more instances than objects -------------------------------------------------------------------

FEW = {"name": "wide", "dataset_catalog": [{"name": "few-tfr", "format": "tfrecord", "files": 3},
                                           {"name": "few-jpg", "format": "jpg", "files": 3}],
       "instance_type": "ml.m5.xlarge", "compute": "v100", "instance_count": [2, 4]}


def assert_refusal(message: str, dataset: str = "few-tfr", count: int = 3) -> None:
    """One line naming the trial, the dataset, its object count and the fix."""
    assert "\n" not in message.strip()
    for words in ("trial 'base-n4'", "instance_count", f"'{dataset}' has {count} objects", f"at most {count} instances"):
        assert words in message, message


@pytest.mark.parametrize("change", [
    {"datasets": ["few-tfr"], "modes": ["FastFile"]},                                   # SageMaker shards (auto)
    {"datasets": ["few-tfr"], "modes": ["File"], "distribution": "ShardedByS3Key"},
    {"datasets": ["few-tfr"], "modes": ["File"], "distribution": "FullyReplicated"},    # the script splits the files
    {"datasets": ["few-tfr"], "modes": ["FSx"]},
    {"datasets": ["few-tfr"], "modes": ["EFS"]},
    {"datasets": ["few-tfr"], "modes": ["Script"]},
    {"datasets": ["few-jpg"], "modes": ["Pipe"], "distribution": "FullyReplicated"},    # a record per object, by rank
])
def test_plan_refuses_more_instances_than_objects_however_the_hosts_share_them(change):
    """S3DataSource: "Don't choose more ML compute instances for training than available S3 objects. If you
    do, some nodes won't get any data and you will pay for nodes that aren't getting any training data.
    This applies in both File and Pipe modes." The lab's script splits files and a Pipe stream's records
    among the hosts the same way, and a host without any fails its job."""
    with pytest.raises(ConfigError) as err:
        plan(parse_experiment({**FEW, **change}), lab_environment(), "x")
    assert_refusal(str(err.value), change["datasets"][0])


def test_what_does_not_divide_by_objects_is_planned():
    # A TFRecord stream's records (many a shard) are split by rank, not its objects.
    assert plan(parse_experiment({**FEW, "datasets": ["few-tfr"], "modes": ["Pipe"], "distribution": "FullyReplicated"}),
                lab_environment(), "x")
    # A user's script with a replicated channel shares it its own way; SageMaker's sharding binds it too.
    script = {"entry_point": "train.py", "code_uri": "s3://bucket-for-code/code/sourcedir.tar.gz"}
    assert plan(parse_experiment({**FEW, "datasets": ["few-tfr"], "modes": ["FSx"], "script": script}), lab_environment(), "x")
    with pytest.raises(ConfigError):
        plan(parse_experiment({**FEW, "datasets": ["few-tfr"], "modes": ["FastFile"], "script": script}), lab_environment(), "x")
    # The workflow's Plan counts the objects from the stats file, which wins over the experiment's figure.
    counted = parse_experiment({**FEW, "dataset_catalog": [{"name": "few-tfr", "format": "tfrecord", "files": 500}],
                                "datasets": ["few-tfr"], "modes": ["FastFile"]})
    assert plan(counted, lab_environment(), "x")
    with pytest.raises(ConfigError) as err:
        plan(counted, lab_environment(), "x", dataset_stats={"few-tfr": {"files": 3, "bytes": 1000}})
    assert_refusal(str(err.value))


def write(tmp_path, document: dict):
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def test_dslab_plan_and_run_refuse_it_before_any_aws_call(tmp_path, capsys):
    from moto import mock_aws
    from .test_operator import OUTPUTS
    experiment = write(tmp_path, {**FEW, "datasets": ["few-tfr"], "modes": ["FastFile"]})
    assert main(["plan", "--offline", "--experiment", experiment]) == 2
    assert_refusal(capsys.readouterr().err.splitlines()[-1])   # after the note that it is offline
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(OUTPUTS))
    with mock_aws():   # were the check missing, the stand-in's Step Functions would answer (no such machine)
        import boto3
        assert main(["run", "--experiment", experiment, "--outputs", str(outputs)]) == 2
        assert boto3.client("stepfunctions", region_name="us-east-1").list_state_machines()["stateMachines"] == []
    assert_refusal(capsys.readouterr().err)


def test_dslab_local_counts_the_generated_objects_and_refuses_before_the_stand_in_starts(tmp_path, capsys, monkeypatch):
    def must_not_start(self):
        raise AssertionError("the stand-in started")
    monkeypatch.setattr(local_lab.LocalLab, "__enter__", must_not_start)
    experiment = write(tmp_path, {"name": "wide", "instance_type": "ml.m5.xlarge", "compute": "v100", "instance_count": [2, 4], "modes": ["FSx"],
                                  "datasets": [{"name": "few-jpg", "format": "jpg", "generate": {"images": 3, "classes": 1}}]})
    assert main(["local", "--experiment", experiment, "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")]) == 2
    assert_refusal(capsys.readouterr().err, "few-jpg")


def test_a_cluster_job_with_a_host_that_wrote_no_figures_has_no_cluster_totals():
    from dslab.core.job_metrics import job_metrics
    host = {"samples": 10, "samples_per_second": 5.0, "au_percent": 90.0}
    both = job_metrics({"metrics-algo-1.json": json.dumps(host), "./metrics-algo-2.json": json.dumps(host)}, 2)
    assert both["cluster"]["samples"] == 20 and both["cluster"]["samples_per_second"] == 10.0
    alone = job_metrics({"metrics-algo-1.json": json.dumps(host)}, 2)["cluster"]
    assert (alone["hosts"], alone["hosts_reported"], alone["samples"], alone["samples_per_second"]) == (2, 1, None, None)
    # algo-10 is not the leader because it sorts before algo-2 as text
    ten = job_metrics({f"metrics-algo-{i}.json": json.dumps({**host, "host": f"algo-{i}"}) for i in range(1, 11)}, 10)
    assert ten["host"] == "algo-1" and list(ten["cluster"]["au_percent_per_host"])[:3] == ["algo-1", "algo-2", "algo-3"]
    assert job_metrics({"metrics.json": json.dumps(host)}, 1) == host and job_metrics({}, 1) is None


@pytest.mark.parametrize("entry_point", ["train.py", "train_reporting.py"])
def test_the_example_scripts_write_the_model_on_the_first_host_only(tmp_path, entry_point):
    """SageMaker merges every host's /opt/ml/model into one model.tar.gz: "If multiple containers in a single
    training job write to this directory they should ensure no file/directory names clash." The examples write
    model.json where SM_CURRENT_HOST is SM_HOSTS[0]; the local runner says so when two hosts write one name."""
    import tarfile

    from dslab.local.runner import run_training_job
    from .test_own_script import copy_example_code, folder_job
    request, storage = folder_job(tmp_path, copy_example_code(tmp_path), {"epochs": 1, "batch_size": 2})
    request["HyperParameters"]["sagemaker_program"] = json.dumps(entry_point)
    request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3DataDistributionType"] = "ShardedByS3Key"
    request["ResourceConfig"]["InstanceCount"] = 2
    outcome = run_training_job(request, storage, tmp_path / "work")
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert outcome.warnings == [], outcome.warnings     # no name written by both hosts
    with tarfile.open(storage.s3_root / "bkt" / "output" / "own-1" / "output" / "model.tar.gz") as tar:
        assert [m.name.lstrip("./") for m in tar.getmembers() if m.isfile()] == ["model.json"]


def _upload_objects(lab, name: str, count: int, stats: bool = True) -> None:
    s3 = lab.client("s3")
    for i in range(count):
        s3.put_object(Bucket=lab.bucket, Key=f"datasets/{name}/shard-{i}.tfrecord", Body=b"x" * (100 + i))
    if stats:   # as `dslab dataset upload` writes it
        s3.put_object(Bucket=lab.bucket, Key=f"datasets/{name}.stats.json",
                      Body=json.dumps({"files": count, "bytes": 100 * count}).encode())


def test_dslab_run_counts_each_datasets_objects_from_its_stats_file_before_starting_the_execution(emulated, tmp_path, capsys):
    """With credentials `dslab run` reads the stats file the workflow's Plan reads (plan.dataset_stats), so an
    experiment without its own `files` figures is refused before StartExecution, not by Plan after the execution
    started; a dataset without a stats file is said and left to Plan. A sharded sweep then runs and each record
    keeps its channel's S3DataDistributionType."""
    from .scripted_jobs import ScriptedJobs
    with emulated(ScriptedJobs()) as lab:
        _upload_objects(lab, "few-tfr", 3)
        _upload_objects(lab, "no-stats", 3, stats=False)
        outputs = tmp_path / "cdk-outputs.json"
        outputs.write_text(json.dumps({"DataSourceLab": {"StateMachineArn": lab.state_machine_arn, "BucketName": lab.bucket}}))
        sfn = lab.client("stepfunctions")
        wide = {"name": "wide", "datasets": [{"name": "few-tfr", "format": "tfrecord"}], "instance_type": "ml.m5.xlarge",
                "compute": "v100", "instance_count": [2, 4], "modes": ["FastFile"]}
        capsys.readouterr()
        assert main(["run", "--experiment", write(tmp_path, wide), "--outputs", str(outputs)]) == 2
        assert_refusal(capsys.readouterr().err)
        assert sfn.list_executions(stateMachineArn=lab.state_machine_arn)["executions"] == []   # none started

        unknown = {**wide, "name": "unknown", "datasets": [{"name": "no-stats", "format": "tfrecord"}]}
        assert main(["run", "--experiment", write(tmp_path, unknown), "--outputs", str(outputs)]) == 0
        said = capsys.readouterr()
        assert "dataset 'no-stats'" in said.err and "has no stats file" in said.err
        assert "checked against its objects in the workflow's Plan" in said.err
        execution = said.out.split("started ", 1)[1].split()[0]
        assert lab.wait(execution).status == "FAILED"   # Plan refuses a dataset without its stats file

        sweep = {**wide, "name": "sweep", "instance_count": [1, 2]}
        assert main(["run", "--experiment", write(tmp_path, sweep), "--outputs", str(outputs), "--wait", "--poll", "0.2",
                     "--plain"]) == 0
        execution = capsys.readouterr().out.split("started ", 1)[1].split()[0]
        records = lab.read_json(f"results/{execution.rsplit(':', 1)[-1]}/results.json")["records"]
    assert sorted((r["instance_count"], r["distribution"]) for r in records) == [(1, "FullyReplicated"), (2, "ShardedByS3Key")]
