"""Where a checkpoint job's seconds go (dslab/core/answer/jobs.py ``job_seconds``), and which jobs an experiment's
checkpoint trials make (``checkpoint_job_checks``), on figures chosen to be added up by hand (issue 58).

The stand-in figures: a save stalls training 5 s on the volume (the sync) or takes 20 s whole (a file system); a
restore takes 30 s, 10 s of it the sync's copy-in; the sync's last upload 7 s; the job starts in 100 s; 3 writes and
2 reads, 60 s of compute between checkpoints."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from dslab.core.answer.jobs import checkpoint_job_checks, job_seconds
import yaml

from dslab.inputs.experiment_file import load_experiment
from dslab.core.facts.prices import PriceTable
from dslab.core.model.provisioning import AS_DEPLOYED

DLIO = Path(__file__).resolve().parent.parent / "dslab" / "contracts" / "dlio"
ESTIMATE = SimpleNamespace(stall_seconds=5.0, save_seconds=20.0, restore_seconds=30.0, copy_in_seconds=10.0,
                           upload_seconds=7.0)


def _trial(restore: bool = True, interval: float = 60.0, writes: int = 3, reads: int = 2):
    workload = SimpleNamespace(interval_seconds=interval, writes=writes, reads=reads)
    return SimpleNamespace(checkpoint=SimpleNamespace(workload=workload, restore=restore))


def test_a_sync_writer_waits_its_stalls_its_last_upload_and_reads_its_own_volume_back():
    parts = job_seconds(_trial(), "s3", False, ESTIMATE, 100.0)
    # 100 start-up + (3 + 2) x 60 compute + 3 x 5 stalls + 7 last upload + 2 x (30 - 10) reads = 462 s
    assert parts == {"start-up": 100.0, "compute between checkpoints": 300.0, "saves": 15.0, "last upload": 7.0,
                     "copy-in": 0.0, "reads": 40.0}
    assert sum(parts.values()) == 462.0
    assert job_seconds(_trial(), "express", False, ESTIMATE, 100.0) == parts   # the directory bucket syncs alike


def test_a_sync_restore_job_copies_in_then_reads():
    parts = job_seconds(_trial(), "s3", True, ESTIMATE, 100.0)
    # 100 + 2 x 60 + no saves, no upload + 10 copy-in + 2 x 20 reads = 270 s
    assert parts == {"start-up": 100.0, "compute between checkpoints": 120.0, "saves": 0.0, "last upload": 0.0,
                     "copy-in": 10.0, "reads": 40.0}


def test_a_file_system_writer_saves_whole_and_leaves_the_reads_to_its_restore_job():
    parts = job_seconds(_trial(), "fsx", False, ESTIMATE, 100.0)
    # A restore job follows: the writer reads nothing. 100 + 3 x 60 + 3 x 20 whole saves = 340 s
    assert parts == {"start-up": 100.0, "compute between checkpoints": 180.0, "saves": 60.0, "last upload": 0.0,
                     "copy-in": 0.0, "reads": 0.0}
    alone = job_seconds(_trial(restore=False), "efs", False, ESTIMATE, 100.0)
    # No restore job: it reads its 2 back itself, each a whole 30 s restore. 100 + 5 x 60 + 60 + 60 = 520 s
    assert alone == {"start-up": 100.0, "compute between checkpoints": 300.0, "saves": 60.0, "last upload": 0.0,
                     "copy-in": 0.0, "reads": 60.0}
    back = job_seconds(_trial(), "fsx", True, ESTIMATE, 100.0)
    # 100 + 2 x 60 + 2 x 30 = 280 s, no copy-in (the file system holds them)
    assert back == {"start-up": 100.0, "compute between checkpoints": 120.0, "saves": 0.0, "last upload": 0.0,
                    "copy-in": 0.0, "reads": 60.0}


def test_the_edges_of_a_checkpoint_jobs_seconds():
    unknown = SimpleNamespace(stall_seconds=5.0, save_seconds=20.0, restore_seconds=30.0, copy_in_seconds=None,
                              upload_seconds=None)
    # No copy-in or upload figure: none counted; a sync read is then the whole restore.
    assert job_seconds(_trial(), "s3", False, unknown, 0.0) == {
        "start-up": 0.0, "compute between checkpoints": 300.0, "saves": 15.0, "last upload": 0.0, "copy-in": 0.0,
        "reads": 60.0}
    assert job_seconds(_trial(), "s3", True, unknown, 0.0)["copy-in"] == 0.0
    # A negative interval is none; 0.5 s between checkpoints counts as 0.5 s.
    assert job_seconds(_trial(interval=-5.0), "fsx", False, ESTIMATE, 0.0)["compute between checkpoints"] == 0.0
    assert job_seconds(_trial(interval=0.5), "fsx", False, ESTIMATE, 0.0)["compute between checkpoints"] == 1.5
    # A workload that reads nothing has no restore job after it, and its file-system writer reads nothing either.
    assert job_seconds(_trial(reads=0), "fsx", False, ESTIMATE, 0.0)["reads"] == 0.0
    # A workload that reads once with a restore job following: the file-system writer leaves that read to it.
    assert job_seconds(_trial(reads=1), "fsx", False, ESTIMATE, 0.0)["reads"] == 0.0
    assert job_seconds(_trial(reads=1, restore=False), "fsx", False, ESTIMATE, 0.0)["reads"] == 30.0


def _experiment(tmp_path, *, data_trial_first: bool = False, restore: bool = True, targets=("s3", "fsx"), volume=None,
                instance="ml.p5.48xlarge"):
    trial = {"name": "ckpt", "workload": {"file": str(DLIO / "llama3_8b.yaml"), "scale": 1e-5},
             "checkpoint": {"targets": list(targets), "writes": 2, "reads": 1, "restore": restore}}
    if volume is not None:
        trial["volume_size_gb"] = volume
    trials = ([{"name": "reads", "modes": ["File"]}] if data_trial_first else []) + [trial]
    doc = {"name": "ck", "instance_type": instance, "trials": trials}
    if data_trial_first:
        doc["datasets"] = [{"name": "d", "format": "jpg", "files": 10, "bytes": 10_000}]
    path = tmp_path / f"ck-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_experiment(path)


def test_each_target_gets_a_writer_and_a_restore_job_named_by_its_trials_place(tmp_path):
    checks = checkpoint_job_checks(_experiment(tmp_path), PriceTable(), None)   # the lab as deployed where none is given
    assert [(c.target, c.restore) for c in checks] == [("s3", False), ("s3", True), ("fsx", False), ("fsx", True)]
    assert {c.field_prefix for c in checks} == {""}   # one trial: its keys are the experiment's own
    assert {c.lab_fsx_gib for c in checks} == {AS_DEPLOYED.fsx.capacity_gib}
    assert [c.key for c in checks[:2]] == [("ckpt", checks[0].trial.checkpoint.dataset.name, "File", "s3:write"),
                                           ("ckpt", checks[0].trial.checkpoint.dataset.name, "File", "s3:restore")]
    assert checks[0].what == "trial ckpt's S3 sync writer" and checks[1].what == "trial ckpt's S3 sync restore job"
    for check in checks:
        assert check.seconds == pytest.approx(sum(check.parts.values()))
    # A sync job starts as a File job does (214.5 s, the shipped model's); a file system's as its channel's (FSx 219.2 s).
    assert [c.parts["start-up"] for c in checks] == [214.5, 214.5, 219.2, 219.2]
    # Behind a data trial, it is the second trial: its keys say so, and it is still checked.
    behind = checkpoint_job_checks(_experiment(tmp_path, data_trial_first=True), PriceTable(), AS_DEPLOYED)
    assert len(behind) == 4 and {c.field_prefix for c in behind} == {"trials[1]."}
    # Without a restore job, a writer each.
    alone = checkpoint_job_checks(_experiment(tmp_path, restore=False), PriceTable(), AS_DEPLOYED)
    assert [(c.target, c.restore) for c in alone] == [("s3", False), ("fsx", False)]


def test_a_checkpoint_job_is_sized_on_its_trials_own_volume(tmp_path):
    # A sync writer saves onto the instance's volume first: on an instance without NVMe storage (p3), the trial's EBS
    # volume is the one the question names.
    checks = {volume: checkpoint_job_checks(_experiment(tmp_path, targets=("s3",), volume=volume,
                                                        instance="ml.p3.16xlarge"), PriceTable(), AS_DEPLOYED)[0]
              for volume in (50, 500)}
    assert "50 GB" in checks[50].estimate.provision and "500 GB" in checks[500].estimate.provision
