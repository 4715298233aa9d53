"""Where checkpoints go (issue 40, second part): checkpoint trials through the request builder, the workflow's plan and
the local runner (SageMaker's checkpoint sync as documented), and estimate, size and recommend on one premise, with
each target's limits as their documents give them. Fast: no synthesis, no lab (the local lab's run is
test_local_lab.py's default experiment)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from dslab.aws.validation import RequestInvalid, validate_request
from dslab.cli import main
from dslab.core.model import checkpoint_estimate as ce
from dslab.core.workloads.checkpoint import parse_checkpoint_workload
from dslab.core.errors import ConfigError
from dslab.core.experiment import expand, parse_experiment
from dslab.core.facts.prices import PriceTable
from dslab.core.model.provisioning import AS_DEPLOYED, EfsConfig, FsxConfig, Provisioning
from dslab.core.requests import CHECKPOINT_METRIC_DEFINITIONS, plan
from dslab.local.job_storage import FolderStorage
from dslab.local.runner import run_training_job
from dslab.workflow.plan import deal_into_lanes

from .helpers import BUCKET, EFS_ID, FSX_ID, TRAINING, lab_environment
from .test_cli_robustness import run

DLIO = Path(__file__).resolve().parent.parent / "dslab" / "contracts" / "dlio"
EXPRESS_BUCKET = "lab--use1-az4--x-s3"


def llama(name: str, scale: float = 1.0):
    workload = parse_checkpoint_workload(yaml.safe_load((DLIO / f"llama3_{name}.yaml").read_text()), f"llama3_{name}.yaml")
    return workload.with_scale(scale) if scale != 1 else workload


def question(name: str, hosts: int, every: float = 1800, keep: int = 2, lab: Provisioning = AS_DEPLOYED,
             instance: str = "ml.p5.48xlarge", volume: int | None = None) -> ce.Question:
    return ce.Question(llama(name).plan(hosts=hosts), instance, every, keep, PriceTable(), lab, volume)


def answer_of(q: ce.Question, save_under: float | None = None):
    """The one checkpoint answer every command views (core/answer/checkpoints.py)."""
    from dslab.core.answer.checkpoints import CheckpointQuestion, checkpoint_answer
    from dslab.core.answer.premise import CheckpointPremise, Premise
    from dslab.core.shape import DatasetShape
    premise = Premise(q.instance_type, q.plan.hosts, q.plan.gpus_per_host, 1, 0.0, "checkpoints",
                      DatasetShape(q.plan.files, max(1, q.plan.bytes)), "test", lab=q.lab,
                      checkpoint=CheckpointPremise(q.plan, q.every_seconds, q.keep, save_under))
    return checkpoint_answer(CheckpointQuestion(premise, q))


def experiment(targets=("s3", "express", "fsx", "efs"), scale=1e-5, **trial):
    doc = yaml.safe_load((DLIO / "llama3_8b.yaml").read_text())
    entry = {"name": "ckpt", "workload": {"file": "llama3_8b.yaml", "dlio": doc, "scale": scale},
             "checkpoint": {"targets": list(targets), "writes": 2, "reads": 1, "seconds_between": 0}, **trial}
    return parse_experiment({"name": "ck", "instance_type": "ml.p5.48xlarge", "max_run_seconds": 600,
                             "trials": [{"name": "data", "modes": ["File"], "datasets": ["caltech-jpg-1x"]}, entry]})


# ---- the estimate: each target's limits, as their documents give them ----------------------------------------------

def test_fsx_writes_at_the_lower_of_network_and_disk_per_tib():
    """Scratch 2 writes at its disk's 100 MB/s/TiB, not its network's 200; Persistent 2 at its tier; restores (uncached
    reads) at Scratch 2's 200 (ssd-storage.html's table, performance.html's lower-of rule)."""
    scratch = ce._fsx(question("8b", 1), FsxConfig(capacity_gib=2400), "as deployed")
    load = ce.CheckpointLoad.of(llama("8b").plan(hosts=1))
    assert scratch.save_seconds == pytest.approx(load.total_bytes / 1e6 / (100 * 2400 / 1024))
    assert scratch.restore_seconds == pytest.approx(scratch.save_seconds / 2)
    p250 = ce._fsx(question("8b", 1), FsxConfig.persistent2(250, 2400), "provisioned")
    assert p250.save_seconds == pytest.approx(load.total_bytes / 1e6 / (250 * 2400 / 1024))
    assert "FSx's write throughput" in scratch.bound and scratch.stall_seconds == scratch.save_seconds
    # Its whole capacity bills all day, whatever it holds; nothing else.
    assert scratch.standing_usd_per_day == pytest.approx(0.14 * 2400 * 24 / 730)
    assert scratch.storage_usd_per_day == scratch.requests_usd_per_day == 0


def test_efs_bursting_runs_out_of_credits_and_writes_at_its_baseline():
    """Writes are metered at the full rate; a day's 48 saves of llama3_8b spend more than 50 MiB/s per TiB earns."""
    q = question("8b", 1)
    est = ce._efs(q, EfsConfig(), "as deployed")
    stored_tib = ce.CheckpointLoad.of(q.plan).total_bytes * 2 / 1024 ** 4
    assert est.save_seconds == pytest.approx(ce.CheckpointLoad.of(q.plan).total_bytes / 2 ** 20 / (50 * stored_tib))
    assert "Bursting's baseline" in est.bound and est.warnings   # a save longer than the interval
    # Once a day (48 x less), the credits hold: the burst rate (100 MiB/s per TiB, at least 100 MiB/s).
    daily = ce._efs(question("8b", 1, every=86_400), EfsConfig(), "as deployed")
    assert "burst rate (100 MiB/s" in daily.bound
    # Provisioned: the MiB/s set, one client at most 500 MiB/s; Elastic: 1,500 MiB/s per client, billed per GB written.
    provisioned = ce._efs(q, EfsConfig("provisioned", 1000.0), "provisioned")
    assert "per-client limit (500 MiB/s" in provisioned.bound
    elastic = ce._efs(q, EfsConfig("elastic"), "provisioned")
    assert elastic.requests_usd_per_day == pytest.approx(ce.CheckpointLoad.of(q.plan).total_bytes / 1e9 * 0.06 * 48)


def test_the_sync_stalls_on_the_volume_uploads_behind_it_and_restores_every_hosts_files_onto_every_instance():
    """The stall is the write to the instance's volume; a restore copies every checkpoint kept, of every host, onto each
    instance (model-checkpoints.html, -resume.html), then reads its own: on 8 hosts that copy dominates."""
    q = question("70b", 8)
    s3 = ce._sync(q, "s3")
    load = ce.CheckpointLoad.of(q.plan)
    assert s3.stall_seconds == pytest.approx(load.host_bytes / 1e6 / 1000.0)   # NVMe: the one assumed figure, said
    assert any("NVMe instance storage" in a for a in s3.assumptions)
    assert s3.copy_in_seconds == pytest.approx(load.total_bytes * 2 / 1e6 / 875.0)
    assert s3.restore_seconds > 10 * s3.stall_seconds and s3.gets_per_restore == load.parts * 2 * 8
    # The cluster idles only for the stall: stall x hosts x the instance's price, 48 times a day.
    assert s3.idle_usd_per_save == pytest.approx(s3.stall_seconds * 8 * 113.068 / 3600)
    assert s3.usd_per_day == pytest.approx(s3.idle_usd_per_day + s3.storage_usd_per_day + s3.requests_usd_per_day)
    assert s3.requests_usd_per_day == pytest.approx(load.parts * 5.00 / 1e6 * 48)
    # On gp2: 250 MiB/s from 334 GiB, 128 MiB/s up to 170 GiB (EBS User Guide); the volume must hold what it keeps.
    gp2 = ce._sync(question("8b", 1, instance="ml.p3.16xlarge"), "s3")
    assert gp2.stall_seconds == pytest.approx(ce.CheckpointLoad.of(gp2_plan()).host_bytes / 1e6 / (250 * 1.048576))
    small = ce._sync(question("8b", 1, instance="ml.p3.16xlarge", volume=100), "s3")
    assert "more than its a 100 GB EBS volume" in small.blocker and "--volume-size-gb" in small.blocker


def gp2_plan():
    return llama("8b").plan(hosts=1, gpus_per_host=8)


def test_s3_puts_per_prefix_and_express_writes_per_bucket_bound_the_upload():
    """3,500 PUT/s per prefix (one S3 URI) and 100,000 writes/s per directory bucket: 405B's 512 ranks in 8 MiB parts
    take S3 longer than the hosts' own uploads."""
    q = question("405b", 64)
    load = ce.CheckpointLoad.of(q.plan)
    s3, express = ce._sync(q, "s3"), ce._sync(q, "express")
    assert s3.upload_seconds == pytest.approx(max(load.host_bytes / 1e6 / 875.0, load.parts / 3500))
    assert express.upload_seconds == pytest.approx(max(load.host_bytes / 1e6 / 875.0, load.parts / 100_000))
    assert "S3's PUT rate" in s3.bound


def test_the_reports_two_clusters_every_target_a_day_at_30_minutes():
    """llama3_8b on 1 x ml.p5.48xlarge and llama3_70b on 8: every target estimated, the 70B's 1.9 TB kept more than the
    lab's 1,200 GiB FSx holds, EFS Bursting never keeping up; the pick keeps up and costs the least a day."""
    for name, hosts in (("8b", 1), ("70b", 8)):
        answer = answer_of(question(name, hosts))
        assert [t.target for t in answer.targets] and {t.target for t in answer.targets} == {"s3", "express", "fsx", "efs"}
        pick = answer.pick.estimate
        assert not pick.warnings and not pick.blocker and answer.pick.rank == 1
        assert pick.usd_per_day == min(t.estimate.usd_per_day for t in answer.targets if t.usable)
        # EFS as the lab stands (Bursting) never keeps up: said beside EFS as provisioned, which does.
        efs = answer.target("efs")
        assert efs.deployed.provision.startswith("EFS Bursting") and efs.deployed.warnings and efs.usable
        assert efs.differs.startswith("as deployed (EFS Bursting (Max I/O)): cannot keep up")
    deployed_fsx = ce.estimate_target(question("70b", 8), "fsx")
    assert "more than FSx's 1,200 GiB" in deployed_fsx.blocker


def test_size_provisions_the_cheapest_fsx_and_efs_that_save_within_the_target():
    q = question("8b", 1)
    rows = {o.target: o.estimate for o in answer_of(q, 60).targets}
    fsx = rows["fsx"]
    assert fsx.save_seconds <= 60 and fsx.settings["fsxDeploymentType"] in ("SCRATCH_2", "PERSISTENT_2")
    # The cheapest day (idle, storage, standing) among what saves within the target: the one rule of every command.
    cheaper = [c for c in ce.fsx_options(q) if ce._fsx(q, c, "x").save_seconds <= 60
               and ce._fsx(q, c, "x").usd_per_day < fsx.usd_per_day - 1e-9]
    assert not cheaper
    assert fsx.command().startswith('make deploy FSX=up CONTEXT="fsxDeploymentType=')
    # 30 s: no EFS the lab builds writes 112 GB from one instance that fast (1,500 MiB/s per client at most).
    efs = answer_of(q, 30).target("efs").estimate
    assert efs.blocker.startswith("nothing the lab builds saves within 30 s")


def test_durations_as_the_flags_take_them():
    assert ce.parse_duration("30m", "--checkpoint-every") == 1800 and ce.parse_duration("2h", "x") == 7200
    assert ce.parse_duration("90s", "x") == 90 and ce.parse_duration("45", "x") == 2700
    assert ce.parse_duration("45", "x", unit="s") == 45
    for bad in ("0", "-1", "abc", "nan", "8d", "1000000000000000"):
        with pytest.raises(ConfigError):
            ce.parse_duration(bad, "x")


# ---- the CLI: one premise, printed first ---------------------------------------------------------------------------

def test_recommend_answers_where_this_models_checkpoints_go_on_this_cluster(capsys):
    result = run(capsys, "recommend", "--workload", DLIO / "llama3_8b.yaml", "--instance", "ml.p5.48xlarge",
                 "--instance-count", "1", "--checkpoint-every", "30m")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    # The answer first, then one table, then the premise in two lines.
    assert lines[0].startswith("answer: checkpoints every 30 min go to FSx") and "a day" in lines[0]
    assert "stall a save" in lines[0] and "to restore" in lines[0] and "; runner-up " in lines[0]
    premise = next(i for i, line in enumerate(lines) if line.startswith("premise: "))
    assert lines[premise].startswith("premise: 1 x ml.p5.48xlarge (8 x H100 80GB)") and "the last 10 kept" in lines[premise]
    assert "defaults: kept" in lines[premise + 1] and "interval" not in lines[premise + 1]
    assert sum(line.split()[1:2] in (["S3"], ["Express"], ["FSx"], ["EFS"]) for line in lines[1:premise]) == 4
    explained = run(capsys, "recommend", "--workload", DLIO / "llama3_8b.yaml", "--instance", "ml.p5.48xlarge",
                    "--explain").out
    assert "the cheapest day that keeps up" in explained
    data = json.loads(run(capsys, "recommend", "--workload", DLIO / "llama3_8b.yaml", "--instance", "ml.p5.48xlarge",
                          "--json").out)
    assert data["question"]["premise"]["checkpoint"]["files"] == 16 and data["pick"] == "fsx"
    assert next(t for t in data["targets"] if t["target"] == "fsx")["usd_per_day"] > 0
    assert data["workload"]["checkpointing"] is True


def test_size_and_estimate_on_the_same_premise(capsys):
    size = run(capsys, "size", "--workload", DLIO / "llama3_8b.yaml", "--instance", "ml.p5.48xlarge", "--save-under", "60s")
    assert size.code == 0, size.err
    assert "each within 60 s" in next(line for line in size.out.splitlines() if line.startswith("premise: "))
    assert any(line.startswith("to provision FSx: make deploy FSX=up") for line in size.out.splitlines())
    # estimate, recommend and size: views of one answer, the same object in --json.
    argv = ("--workload", DLIO / "llama3_8b.yaml", "--instance", "ml.p5.48xlarge", "--instance-count", "1", "--json")
    answers = [json.loads(run(capsys, command, *argv).out) for command in ("estimate", "recommend", "size")]
    assert answers[0] == answers[1] == answers[2]
    assert {t["target"] for t in answers[0]["targets"]} == {"s3", "express", "fsx", "efs"}
    # llama3 70B on 8 x p5: recommend picked FSx at 24,000 GiB, size provisioned 16,800 GiB; one rule now.
    big = ("--workload", DLIO / "llama3_70b.yaml", "--instance", "ml.p5.48xlarge", "--instance-count", "8", "--json")
    picks = {command: json.loads(run(capsys, command, *big).out) for command in ("recommend", "size")}
    assert picks["recommend"] == picks["size"]
    fsx = next(t for t in picks["size"]["targets"] if t["target"] == "fsx")
    assert fsx["deploy_settings"]["fsxCapacity"] == 24000


@pytest.mark.parametrize("argv, field, words", [
    (["recommend", "--workload", DLIO / "llama3_405b.yaml", "--instance", "ml.p5.48xlarge", "--instance-count", "65"],
     "--instance-count", "do not split into whole copies"),
    (["recommend", "--files", "10", "--bytes", "1GB", "--checkpoint-every", "30m"], "--checkpoint-every",
     "goes with a checkpointing --workload"),
    (["estimate", "--workload", DLIO / "llama3_8b.yaml", "--mode", "FSx"], "--mode", "drop it"),
    (["size", "--workload", DLIO / "llama3_8b.yaml", "--as-deployed"], "--as-deployed", "dslab estimate --workload"),
])
def test_bad_input_is_one_line_naming_the_field(capsys, argv, field, words):
    result = run(capsys, *argv)
    assert result.one_line_error(field, words), result.err


# ---- the experiment and the requests --------------------------------------------------------------------------------

def test_a_checkpoint_trial_is_its_targets_with_each_restore_right_after_it():
    """MLPerf Storage: "first perform the checkpoint write, then clear the cache, and finally perform the checkpoint
    read", as separate runs: every target's reads are a job of their own on a new instance, right after its writer."""
    e = experiment()
    specs = [s for s in expand(e) if s.target]
    assert [(s.target, s.restore, s.mode, s.storage) for s in specs] == [
        ("s3", False, "File", "standard"), ("s3", True, "File", "standard"), ("express", False, "File", "express"),
        ("express", True, "File", "express"), ("fsx", False, "FSx", "standard"), ("fsx", True, "FSx", "standard"),
        ("efs", False, "EFS", "standard"), ("efs", True, "EFS", "standard")]
    # Without restore jobs, each writer reads back itself (said as not MLPerf's sequence by the report).
    alone = [s for s in expand(experiment(checkpoint={"targets": ["s3", "express", "fsx", "efs"], "writes": 2, "reads": 1,
                                                      "seconds_between": 0, "restore": False})) if s.target]
    assert [(s.target, s.restore) for s in alone] == [(t, False) for t in ("s3", "express", "fsx", "efs")]
    assert parse_experiment(e.document).content_hash == e.content_hash   # the record alone reproduces it
    assert e.document["trials"][1]["checkpoint"] == {"targets": ["s3", "express", "fsx", "efs"], "writes": 2, "reads": 1,
                                                     "seconds_between": 0.0, "restore": True}


@pytest.mark.parametrize("trial, field, words", [
    ({"modes": ["FSx"]}, "trials[1].modes", "checkpoint.targets"),
    ({"checkpoint": {"targets": ["fsxx"]}}, "trials[1].checkpoint.targets[0]", "did you mean 'fsx'"),
    ({"checkpoint": {"writes": 1, "reads": 2}}, "trials[1].checkpoint.reads", "more than the 1"),
    ({"hyperparameters": {"checkpoint_dir": "x"}}, "trials[1].hyperparameters.checkpoint_dir", "the lab's to set"),
    # SageMaker's sync keeps 2 checkpoints of 1.1 GB (scale 0.01) on the volume: 1 GB asked cannot hold them.
    ({"instance_type": "ml.p3.16xlarge", "volume_size_gb": 1, "workload_scale": 0.01}, "trials[1].volume_size_gb",
     "checkpoints on each instance"),
    ({"instance_type": "ml.p5.48xlarge", "workload_scale": 1.0, "instance_count": 65,
      "workload_file": "llama3_405b.yaml"}, "trials[1].instance_count", "TP x PP = 8 x 32 = 256"),
])
def test_bad_checkpoint_trials_are_refused_naming_the_field(trial, field, words):
    trial = dict(trial)
    name = trial.pop("workload_file", "llama3_8b.yaml")
    doc = yaml.safe_load((DLIO / name).read_text())
    entry = {"name": "ckpt", "workload": {"file": name, "dlio": doc, "scale": trial.pop("workload_scale", 1e-5)}, **trial}
    document = {"name": "ck", "instance_type": "ml.p5.48xlarge",
                "trials": [{"name": "data", "modes": ["File"], "datasets": ["caltech-jpg-1x"]}, entry]}
    with pytest.raises(ConfigError) as err:
        parse_experiment(document)
    assert err.value.field == field and words in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_read_only_channel_is_refused_before_anything_is_created(tmp_path):
    """A data trial naming checkpoint_channel (its FSx channel is mounted ro) is refused by the experiment; a request
    whose checkpoint_channel is read-only is refused by the local runner before any host starts."""
    with pytest.raises(ConfigError, match="read-only .FileSystemAccessMode ro.") as err:
        parse_experiment({"name": "x", "modes": ["FSx"], "datasets": ["caltech-jpg-1x"],
                          "hyperparameters": {"checkpoint_channel": "train"}})
    assert err.value.field == "hyperparameters.checkpoint_channel"
    request = next(j.request for j in plan(experiment(targets=("fsx",)), lab_environment(), "e1") if j.spec.target)
    channel = request["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]
    assert channel["FileSystemAccessMode"] == "rw"
    channel["FileSystemAccessMode"] = "ro"
    with pytest.raises(RequestInvalid, match="checkpoint_channel: channel 'checkpoints' is mounted 'ro'"):
        run_training_job(request, FolderStorage(tmp_path / "s3", tmp_path / "fs"), tmp_path / "work", code_dir=TRAINING)
    assert not (tmp_path / "work").exists()


def test_requests_sync_to_one_uri_per_target_and_mount_file_systems_read_write():
    env = replace(lab_environment(), express_bucket=EXPRESS_BUCKET)
    jobs = {(j.spec.target, j.spec.restore): j for j in plan(experiment(), env, "exec-1") if j.spec.target}
    writer, restore = jobs[("s3", False)].request, jobs[("s3", True)].request
    uri = f"s3://{BUCKET}/checkpoints/exec-1/ckpt/s3-r0/"
    assert writer["CheckpointConfig"] == restore["CheckpointConfig"] == {"S3Uri": uri, "LocalPath": "/opt/ml/checkpoints"}
    assert "InputDataConfig" not in writer
    assert jobs[("express", False)].request["CheckpointConfig"]["S3Uri"] == f"s3://{EXPRESS_BUCKET}/checkpoints/exec-1/ckpt/express-r0/"
    hp = {k: json.loads(v) for k, v in writer["HyperParameters"].items()}
    back = {k: json.loads(v) for k, v in restore["HyperParameters"].items()}
    assert hp["checkpoint_plan"]["writes"] == 2 and back["checkpoint_plan"]["writes"] == 0 and back["checkpoint_plan"]["reads"] == 1
    assert hp["checkpoint_cleanup"] is False and back["checkpoint_cleanup"] is True   # the restore job deletes them
    # Both list the URI SageMaker syncs: the writer until each checkpoint is in S3, the restore until its deletions are.
    assert hp["checkpoint_s3_uri"] == back["checkpoint_s3_uri"] == uri
    fsx = jobs[("fsx", False)].request
    assert fsx["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"] == {
        "FileSystemId": FSX_ID, "FileSystemType": "FSxLustre", "DirectoryPath": "/abcdefgh", "FileSystemAccessMode": "rw"}
    fsx_hp = {k: json.loads(v) for k, v in fsx["HyperParameters"].items()}
    assert fsx_hp["checkpoint_channel"] == "checkpoints" and fsx_hp["checkpoint_dir"] == "checkpoints/exec-1/ckpt/fsx-r0"
    assert "checkpoint_s3_uri" not in fsx_hp   # a file system holds a save once it is fsynced
    # The file system's writer writes only, keeping its checkpoints; its restore job reads them on a new instance from
    # the same folder and deletes them.
    fsx_back = {k: json.loads(v) for k, v in jobs[("fsx", True)].request["HyperParameters"].items()}
    assert (fsx_hp["checkpoint_plan"]["writes"], fsx_hp["checkpoint_plan"]["reads"], fsx_hp["checkpoint_cleanup"]) == (2, 0, False)
    assert (fsx_back["checkpoint_plan"]["writes"], fsx_back["checkpoint_plan"]["reads"], fsx_back["checkpoint_cleanup"]) == (0, 1, True)
    assert fsx_back["checkpoint_dir"] == fsx_hp["checkpoint_dir"] and jobs[("fsx", True)].name.split("-")[-3] == "rsfsx"
    assert jobs[("efs", False)].request["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]["DirectoryPath"] == "/"
    for job in jobs.values():
        validate_request("sagemaker", "CreateTrainingJob", job.request)   # botocore's model takes each
        assert job.request["AlgorithmSpecification"]["MetricDefinitions"] == CHECKPOINT_METRIC_DEFINITIONS
        assert "dataset_uri" not in job.request["HyperParameters"]
    # Without a directory bucket the Express target is skipped, said; without FSx, the FSx target.
    skipped = {(j.spec.target, j.spec.restore): j.skip_reason for j in plan(experiment(), lab_environment(fsx=False), "e")
               if j.spec.target and j.request is None}
    assert set(skipped) == {("express", False), ("express", True), ("fsx", False), ("fsx", True)}


def test_a_restore_job_runs_in_its_writers_lane_right_after_it():
    """A lane runs its jobs one after the other: the restore (2, 4) starts once its writer (1, 3) has ended."""
    lanes = deal_into_lanes([{"index": i} for i in range(6)], 3, {2, 4})
    assert [[item["index"] for item in lane] for lane in lanes] == [[0, 5], [1, 2], [3, 4]]


def test_the_stand_in_syncs_checkpoints_as_sagemaker_documents(tmp_path):
    """A two-host job on the folder stand-in with a script of its own: what S3 held is copied onto both hosts first, not
    what is added after; new files are uploaded (one name two hosts wrote is warned about); a file deleted on a host is
    deleted in S3."""
    s3_root = tmp_path / "s3"
    prefix = s3_root / BUCKET / "checkpoints" / "x"
    prefix.mkdir(parents=True)
    (prefix / "old.pt").write_bytes(b"old")
    (prefix / "gone.pt").write_bytes(b"gone")
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(
        "import json, os, pathlib, time\n"
        "base = pathlib.Path(os.environ['SAGEMAKER_BASE_DIR']) / 'checkpoints'\n"
        "host = os.environ['SM_CURRENT_HOST']\n"
        "found = sorted(p.name for p in base.iterdir())\n"
        "(base / f'{host}.pt').write_bytes(host.encode())\n"
        "(base / 'same.pt').write_bytes(host.encode())\n"
        "if host == 'algo-1':\n"
        "    (base / 'gone.pt').unlink()\n"
        "time.sleep(1.5)\n"   # the sync uploads a file once it held still between two looks 0.2 s apart
        "print('found', json.dumps(found))\n")
    request = {
        "TrainingJobName": "sync-rules", "RoleArn": "arn:aws:iam::123456789012:role/r",
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "HyperParameters": {"sagemaker_program": json.dumps("train.py")},
        "CheckpointConfig": {"S3Uri": f"s3://{BUCKET}/checkpoints/x/"},
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output/"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 2, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60}}
    outcome = run_training_job(request, FolderStorage(s3_root, tmp_path / "fs"), tmp_path / "work", code_dir=code)
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert 'found ["gone.pt", "old.pt"]' in outcome.log   # both hosts: the S3 URI's objects, before the script
    assert "Downloading" in [p["Status"] for p in outcome.describe["SecondaryStatusTransitions"]]
    assert sorted(p.name for p in prefix.iterdir()) == ["algo-1.pt", "algo-2.pt", "old.pt", "same.pt"]
    assert any("same.pt: hosts algo-" in w and "both wrote it" in w for w in outcome.warnings)
    assert outcome.describe["CheckpointConfig"]["S3Uri"].endswith("/checkpoints/x/")


def test_a_job_that_ends_before_its_upload_leaves_the_checkpoint_out_of_s3_and_says_so(tmp_path):
    """SageMaker's storage table (SageMaker Developer Guide, model-train-storage-env-var-summary.html): the checkpoint
    path "Writes to S3 when job is terminated: No". A script that writes a checkpoint and ends at once: the stand-in's
    sync had not sent it, so S3 does not hold it, and the job says so."""
    s3_root = tmp_path / "s3"
    (s3_root / BUCKET).mkdir(parents=True)
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(
        "import os, pathlib\n"
        "base = pathlib.Path(os.environ['SAGEMAKER_BASE_DIR']) / 'checkpoints'\n"
        "base.mkdir(parents=True, exist_ok=True)\n"
        "(base / 'last.pt').write_bytes(b'x' * 1000)\n")
    request = {
        "TrainingJobName": "late-upload", "RoleArn": "arn:aws:iam::123456789012:role/r",
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "HyperParameters": {"sagemaker_program": json.dumps("train.py")},
        "CheckpointConfig": {"S3Uri": f"s3://{BUCKET}/checkpoints/late/"},
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output/"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60}}
    outcome = run_training_job(request, FolderStorage(s3_root, tmp_path / "fs"), tmp_path / "work", code_dir=code)
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert not (s3_root / BUCKET / "checkpoints" / "late" / "last.pt").exists()
    assert any("1 file(s) in the LocalPath were not in S3 when the job ended (e.g. algo-1:last.pt)" in w
               for w in outcome.warnings), outcome.warnings
    assert "1 not uploaded when the job ended" in outcome.log


def test_the_estimate_module_imports_nothing_that_does_io():
    """Domain core: the estimate uses the standard library and the core only."""
    import ast
    tree = ast.parse((Path(ce.__file__)).read_text())
    imported = {(n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "math", "dataclasses", "typing"}, imported


def test_recommend_experiment_answers_a_checkpoint_trial_beside_the_datasets(capsys):
    """`make lab`'s experiment: its checkpoint trial answered where its checkpoints go (full size, every 30 minutes), the
    datasets as before."""
    result = run(capsys, "recommend", "--experiment", Path(__file__).resolve().parent.parent / "experiments" / "local.yaml")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("== llama3-8b-checkpoints")))
    assert lines[at] == "== llama3-8b-checkpoints (checkpoints to s3, express, fsx, efs; at the workload's full size)"
    assert lines[at + 1].startswith("answer: checkpoints every 30 min go to ")
    assert any(line.startswith("premise: 1 x ml.p5.48xlarge") for line in lines[at + 2:])
    assert lines[0].startswith("== local-jpg") and any(line.startswith("== local-tfr") for line in lines[:at])


def test_the_local_lab_refuses_checkpoints_this_machine_cannot_hold(tmp_path):
    from dslab.local.lab import check_checkpoints_fit
    full = replace(experiment(scale=1.0), trials=tuple(replace(t, checkpoint=replace(
        t.checkpoint, workload=replace(t.checkpoint.workload, writes=1000))) if t.checkpoint else t
        for t in experiment(scale=1.0).trials))
    with pytest.raises(ConfigError) as err:
        check_checkpoints_fit(full, tmp_path, "--scale")
    assert err.value.field == "--scale" and "GiB free" in str(err.value) and "\n" not in str(err.value)
    check_checkpoints_fit(experiment(scale=1e-5), tmp_path)   # 2 checkpoints of 1.1 MB fit


def test_the_report_describes_the_checkpoints_the_trial_ran_not_the_files_defaults():
    """llama3_8b.yaml writes 10 checkpoints 5 s apart by default; a trial that runs 2, read back at once, is
    described as it ran (the report's workload line is what a reader reproduces the run from)."""
    from dslab.report import workload_lines
    document = experiment().document   # its trial: 2 written, 1 read back, 0 s apart
    (line,) = [line for line in workload_lines(document, [], ignored=False) if "checkpoint workload" in line]
    assert "2 checkpoint(s) written, 1 read back" in line and "10 checkpoint(s)" not in line, line


def test_a_stall_past_the_save_target_names_what_sets_it_on_that_instance():
    """The sync's stall is the write to the instance's own storage: on p5 (NVMe, fixed) no larger gp2 volume helps, and
    the warning said one would; on an EBS instance it does, up to gp2's 250 MiB/s."""
    nvme = answer_of(question("8b", 1), 60).target("s3").estimate.warnings
    assert nvme and "NVMe storage" in nvme[0] and "gp2" not in nvme[0]
    ebs = answer_of(question("8b", 1, instance="ml.p3.16xlarge"), 60).target("s3").estimate.warnings
    assert ebs and "gp2 volume" in ebs[0]


def _checkpoint_record(target: str, save: float, stall: float, durable: float | None, restore: bool = False) -> dict:
    figures = {"save_seconds_mean": save, "stall_seconds_mean": stall, "load_seconds_mean": 1.0}
    if durable is not None:
        figures["durable_seconds_mean"] = durable
    return {"job_name": f"ck-{target}{'-rs' if restore else ''}", "trial": "t", "dataset": "llama-8b",
            "checkpoint_target": target, "checkpoint_restore": restore, "status": "Completed",
            "phases": {"Downloading": 2.0} if restore else {}, "metrics": {"checkpoint": figures},
            "cost_usd": {"total": 1.0}, "instance_type": "ml.p5.48xlarge", "instance_count": 1}


def test_the_measured_pick_is_the_soonest_durable_save_not_the_shortest_stall():
    """The sync's stall is the write to the instance's volume; its save is safe only once S3 lists it. A target whose
    saves are durable sooner wins over one that stalls less; FSx and EFS are durable when saved."""
    from dslab.core.model.checkpoint_estimate import measured_pick, measured_targets
    records = [_checkpoint_record("s3", 0.5, 0.5, 9.0), _checkpoint_record("s3", 0, 0, None, restore=True),
               _checkpoint_record("fsx", 3.0, 3.0, None), _checkpoint_record("efs", 6.0, 6.0, None)]
    targets = {t.target: t for t in measured_targets(records)}
    assert (targets["s3"].durable_seconds, targets["fsx"].durable_seconds) == (9.0, 3.0)
    pick, runner = measured_pick(list(targets.values()))
    assert (pick.target, runner.target) == ("fsx", "efs")
    # A sync writer that did not measure durability (an older script) ranks after those that did.
    records[0] = _checkpoint_record("s3", 0.5, 0.5, None)
    pick, runner = measured_pick(measured_targets(records))
    assert (pick.target, runner.target) == ("fsx", "efs")
    # Durable sooner than FSx: the sync wins, and its stall is what training waits.
    records[0] = _checkpoint_record("s3", 0.5, 0.5, 2.0)
    pick, _ = measured_pick(measured_targets(records))
    assert pick.target == "s3" and pick.stall_seconds == 0.5


def test_figures_never_claim_mlperfs_sequence_and_say_what_keeps_them_from_it():
    """MLPerf Storage: the write, the cache cleared, then the read as a run of its own; "Each benchmark setup must be
    executed five times ... The final metrics are the average across the five runs"; and "The 5 runs must be done on
    the same machine(s)", which no SageMaker job can promise: the report never claims the sequence, and says what a
    run can mend (restore, repeats) before what it cannot (the machines)."""
    from dslab.core.model.checkpoint_estimate import MLPERF_SAME_MACHINES, measured_targets
    five = [r for _ in range(5) for r in (_checkpoint_record("fsx", 3.0, 3.0, None),
                                          _checkpoint_record("fsx", 0, 0, None, restore=True))]
    (fsx,) = measured_targets(five)
    assert (fsx.runs, fsx.read_apart, fsx.mlperf_sequence()) == (5, 5, [MLPERF_SAME_MACHINES])
    assert '"5 runs must be done on the same machine(s)"' in MLPERF_SAME_MACHINES
    (one,) = measured_targets(five[:2])
    assert one.mlperf_sequence() == ["1 run(s), where MLPerf takes the mean of 5 (repeats: 5)", MLPERF_SAME_MACHINES]
    (together,) = measured_targets(five[0::2])
    assert together.mlperf_sequence() == ["read back in the writing job (checkpoint.restore: false), not a new one",
                                          MLPERF_SAME_MACHINES]
