"""Every job's MaxRuntimeInSeconds from its estimate, checkpoint jobs included (issue 55, section 2): a checkpoint
writer's estimate covers its saves and the time between them; a job whose estimate passes 28 days is refused with
the figure and what brings it under, never capped below it; and plan's refusal of a checkpoint target the lab cannot
hold suggests what the trial's answer provisions (section 3). Fast: the CLI in-process, no lab."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from .test_cli_robustness import run

DLIO = Path(__file__).resolve().parent.parent / "dslab" / "contracts" / "dlio"


def checkpoint_experiment(tmp_path: Path, *, model: str = "8b", scale: float = 1e-5, count: int = 1,
                          targets=("s3", "express", "fsx", "efs"), **checkpoint) -> Path:
    path = tmp_path / "ck.yaml"
    trial = {"name": "ckpt", "workload": {"file": str(DLIO / f"llama3_{model}.yaml"), "scale": scale},
             "checkpoint": {"targets": list(targets), **checkpoint}}
    path.write_text(yaml.safe_dump({"name": "ck", "instance_type": "ml.p5.48xlarge", "instance_count": count,
                                    "trials": [trial]}))
    return path


def runtimes(capsys, path: Path) -> dict[str, int]:
    planned = run(capsys, "plan", "--experiment", path, "--offline", "--json")
    assert planned.code == 0, planned.err
    out = {}
    for job in json.loads(planned.out)["jobs"]:
        tags = {t["Key"]: t["Value"] for t in job["request"]["Tags"]}
        kind = "restore" if tags["dslab:checkpoint-restore"] == "true" else "write"
        out[f"{tags['dslab:checkpoint-target']}:{kind}"] = job["request"]["StoppingCondition"]["MaxRuntimeInSeconds"]
    return out


def test_a_checkpoint_writers_runtime_covers_its_saves_and_the_time_between_them(capsys, tmp_path):
    """20 writes 30 min apart asked for the experiment's 6-hour default (21,600 s), though the writes alone take
    36,000 s. Worked by hand, for the S3 sync writer of checkpoints of 1/100,000 of llama3 8B (a few kB a save):
    start-up 214.5 s (File's, the model's) + 20 x 1,800 s between saves + saves and the last upload (well under 1 s)
    = ~36,214.5 s; x 1.5 (the margin) = 54,321.75 s, rounded up to the minute: 54,360 s."""
    path = checkpoint_experiment(tmp_path, targets=("s3", "fsx"), writes=20, reads=0, seconds_between=1800)
    found = runtimes(capsys, path)
    assert found["s3:write"] == 54_360, found
    # FSx's writer: the same saves and intervals; FSx's start-up is 219.2 s: (219.2 + 36,000) x 1.5 = 54,328.8 -> 54,360.
    assert found["fsx:write"] == 54_360, found
    # Written as given, the experiment's own max_run_seconds shorter than that is refused, naming the key and the figure.
    text = yaml.safe_load(path.read_text())
    text["max_run_seconds"] = 21_600
    path.write_text(yaml.safe_dump(text))
    refused = run(capsys, "plan", "--experiment", path, "--offline")
    assert refused.one_line_error("max_run_seconds", "21,600 s is shorter than", "10.1 h", "at least 54,360"), refused.err


def test_a_restore_jobs_runtime_covers_its_copy_in_and_reads(capsys, tmp_path):
    """A restore job writes nothing: it reads back. Two reads 10 min apart: (214.5 + 2 x 600) x 1.5 = 2,121.75 s, under
    the hour's floor: 3,600 s. The sync's writer also reads its own volume back (its restore job's copy-in does not
    replace that read): (214.5 + 2 x 600 + 2 x 600) x 1.5 = 3,921.75 -> 3,960 s."""
    found = runtimes(capsys, checkpoint_experiment(tmp_path, targets=("s3",), writes=2, reads=2, seconds_between=600))
    assert found == {"s3:write": 3_960, "s3:restore": 3_600}, found
    # 10 reads 30 min apart: (214.5 + 10 x 1,800) x 1.5 = 27,321.75 -> 27,360 s; the writer also reads its 10 back
    # from its own volume: (214.5 + 20 x 1,800) x 1.5 -> 54,360 s.
    found = runtimes(capsys, checkpoint_experiment(tmp_path, targets=("s3",), writes=10, reads=10, seconds_between=1800))
    assert found == {"s3:write": 54_360, "s3:restore": 27_360}, found


def test_a_checkpoint_job_past_28_days_is_refused_with_its_figure(capsys, tmp_path):
    """29 writes a day apart: 29 x 86,400 = 2,505,600 s, past 28 x 86,400 = 2,419,200 s."""
    path = checkpoint_experiment(tmp_path, targets=("s3",), writes=29, reads=0, seconds_between=86_400)
    refused = run(capsys, "plan", "--experiment", path, "--offline")
    assert refused.one_line_error("checkpoint.writes", "29.0 days", "28-day MaxRuntimeInSeconds",
                                  "fewer checkpoint.writes"), refused.err
    exported = run(capsys, "export", "--experiment", path, "--offline")
    assert exported.code == 2 and exported.err.strip().splitlines()[-1] == refused.err.strip().splitlines()[-1]
    # 27 writes fit (2,332,800 + 214.5 s): asked for 28 days, never less than the estimate.
    path = checkpoint_experiment(tmp_path, targets=("s3",), writes=27, reads=0, seconds_between=86_400)
    assert runtimes(capsys, path) == {"s3:write": 2_419_200}


def test_plans_refusal_of_an_fsx_target_suggests_what_the_trials_answer_provisions(capsys, tmp_path):
    """llama3 70B on 8 x p5: 10 checkpoints of 978 GB need 9,568 GiB with 5% room; the lab's 1,200 GiB Scratch 2 cannot
    hold them. Plan's refusal suggested Scratch 2 fsxCapacity=9600, while the answer provisions another FSx: now it
    names the answer's own deploy command, as `dslab recommend --experiment` gives it."""
    path = checkpoint_experiment(tmp_path, model="70b", scale=1.0, count=8, targets=("s3", "fsx"), writes=10, reads=10)
    refused = run(capsys, "plan", "--experiment", path, "--offline")
    assert refused.one_line_error("checkpoint.targets", "10 checkpoints need 9,568 GiB", "has 1,200"), refused.err
    answered = run(capsys, "recommend", "--experiment", path, "--json")
    assert answered.code == 0, answered.err
    document = json.loads(answered.out)
    fsx = next(t for a in document["checkpoints"] for t in a["answer"]["targets"] if t["target"] == "fsx")
    assert fsx["command"] in refused.err, (fsx["command"], refused.err)
    exported = run(capsys, "export", "--experiment", path, "--offline", "--mode", "fsx")
    assert exported.code == 2 and fsx["command"] in exported.err
