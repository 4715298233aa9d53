"""The checkpoint answer's rules (dslab/core/answer/checkpoints.py) on questions where each binds (issue 58): what
its first line adds up, what a --save-under nothing meets says, what sets a sync target's stall, a target provisioned
as the lab already stands, and a trial's answer at its workload's full size. Through the CLI's --json, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dslab.cli import main

DLIO = Path(__file__).resolve().parent.parent / "dslab" / "contracts" / "dlio"


def _answer(capsys, *flags: str, expect: int = 0) -> dict:
    code = main(["recommend", "--workload", str(DLIO / "llama3_8b.yaml"), "--json", *flags])
    out = capsys.readouterr().out
    assert code == expect, out
    return json.loads(out)


def _targets(answer: dict) -> dict[str, dict]:
    return {t["target"]: t for t in answer["targets"]}


def _passed_over(answer: dict, target: dict) -> str:
    """What the answer says of a target it passed over: keyed by its label and what it is provisioned as."""
    (why,) = [v for k, v in answer["passed_over"].items() if k.startswith(target["label"] + " (")]
    return why


def test_the_first_line_adds_up_the_picks_day(capsys):
    answer = _answer(capsys, "--instance", "ml.p5.48xlarge")
    p = _targets(answer)[answer["pick"]]
    parts = [f"${p['usd_per_day']:,.2f} a day: the cluster idle ${p['idle_usd_per_day']:,.2f} "
             f"({p['stall_seconds']:,.1f} s a save x {p['saves_per_day']:,.0f} saves)"]
    if p["storage_usd_per_day"] or p["standing_usd_per_day"]:   # FSx's standing capacity is its storage
        parts.append(f"storage ${p['storage_usd_per_day'] + p['standing_usd_per_day']:,.2f}")
    if p["requests_usd_per_day"]:
        parts.append(f"requests ${p['requests_usd_per_day']:,.2f}")
    assert answer["why"] == "the cheapest day that keeps up: " + ", ".join(parts)
    # A day: 48 saves every 30 minutes; the idle cluster, storage and requests add to it (to the cent).
    assert p["saves_per_day"] == 48.0
    assert p["usd_per_day"] == pytest.approx(p["idle_usd_per_day"] + p["storage_usd_per_day"] + p["standing_usd_per_day"]
                                             + p["requests_usd_per_day"], abs=0.011)
    assert answer["rule"] == "each target as it would be provisioned for this question: FSx and EFS for the cheapest day"


def test_a_save_under_nothing_meets_refuses_fsx_and_efs_and_warns_the_syncs(capsys):
    answer = _answer(capsys, "--instance", "ml.p5.48xlarge", "--save-under", "1s", expect=1)
    targets = _targets(answer)
    question = answer["question"]
    assert (question["targets"], question["save_under_seconds"]) == (["s3", "express", "fsx", "efs"], 1.0)
    assert set(question) == {"premise", "targets", "save_under_seconds", "prices"} and question["prices"]
    assert answer["pick"] is None and answer["runner_up"] is None
    assert answer["why"] == ("no target keeps up at this interval: a longer --checkpoint-every, fewer kept, or a larger "
                             "--save-under")
    for name in ("fsx", "efs"):
        blocker = targets[name]["blocker"]
        assert blocker.startswith("nothing the lab builds saves within 1 s: the fastest, "), blocker
        assert _passed_over(answer, targets[name]) == f"cannot: {blocker}"
    # The syncs stall on the instance's NVMe storage (p5): said, with what would change it.
    for name in ("s3", "express"):
        warning = targets[name]["warnings"][0]
        assert warning.startswith(f"its stall, {targets[name]['stall_seconds']:,.1f} s, is longer than 1 s: the "
                                  "instance's NVMe storage (fixed: an instance with faster storage, or FSx, saves "
                                  "sooner) sets it"), warning
        assert _passed_over(answer, targets[name]) == "cannot keep up: " + "; ".join(targets[name]["warnings"])
    # A 30-minute interval nothing keeps up with and no --save-under: the advice leaves --save-under out.
    never = _answer(capsys, "--instance", "ml.p5.48xlarge", "--checkpoint-every", "1s", expect=1)
    if never["pick"] is None:
        assert never["why"] == "no target keeps up at this interval: a longer --checkpoint-every or fewer kept"


def test_a_gp2_volume_sets_the_syncs_stall_on_an_instance_without_nvme(capsys):
    answer = _answer(capsys, "--instance", "ml.p3.16xlarge", "--save-under", "1s", expect=1)
    warning = _targets(answer)["s3"]["warnings"][0]
    assert warning.endswith("the instance's gp2 volume (a larger one, up to 250 MiB/s, or an NVMe instance) sets it")


def test_a_save_under_met_exactly_is_met(capsys):
    first = _targets(_answer(capsys, "--instance", "ml.p5.48xlarge", "--save-under", "10m"))
    fsx = first["fsx"]
    # Asked again within exactly the save it was provisioned for: the same provisioning fits.
    again = _targets(_answer(capsys, "--instance", "ml.p5.48xlarge", "--save-under", f"{fsx['save_seconds']}s"))
    assert "blocker" not in again["fsx"] and again["fsx"]["save_seconds"] <= fsx["save_seconds"]


def test_a_target_already_provisioned_as_its_answer_needs_no_deploy(capsys):
    # A checkpoint small enough (1/100,000 of 8B) that FSx as cdk.json deploys it (Scratch 2, 1,200 GiB) is its
    # cheapest day: nothing is to be deployed, and the premise names the lab's FSx as it stands.
    answer = _answer(capsys, "--instance", "ml.p5.48xlarge", "--scale", "0.00001")
    fsx = _targets(answer)["fsx"]
    assert "deploy_settings" not in fsx and "command" not in fsx, fsx.get("command")
    assert fsx["premise"] == fsx["as_deployed"]["premise"] == "as cdk.json would deploy it"
    assert not fsx["as_deployed"]["differs"]
    # EFS is provisioned otherwise (Elastic for Bursting): a deploy, and the premise says it is for this question.
    efs = _targets(answer)["efs"]
    assert efs["premise"] == "provisioned for this question" and efs["command"].startswith("make deploy FSX=keep")


def test_a_trials_answer_is_its_workloads_at_full_size_every_30_minutes_keeping_what_it_writes(capsys, tmp_path):
    import yaml
    path = tmp_path / "ck.yaml"
    # The trial runs 1/100,000 of 8B and writes 3; its answer is for 8B whole, a save every 30 minutes, 3 kept.
    # On a p3 (no NVMe), the trial's 500 GB volume is what the syncs stall on.
    path.write_text(yaml.safe_dump({"name": "ck", "instance_type": "ml.p3.16xlarge", "volume_size_gb": 500, "trials": [
        {"name": "ckpt", "workload": {"file": str(DLIO / "llama3_8b.yaml"), "scale": 1e-5},
         "checkpoint": {"targets": ["s3", "fsx", "efs"], "writes": 3, "reads": 1}}]}))
    assert main(["recommend", "--experiment", str(path), "--json"]) == 0
    (trial,) = json.loads(capsys.readouterr().out)["checkpoints"]
    by_trial = trial["answer"]
    asked = _answer(capsys, "--instance", "ml.p3.16xlarge", "--keep", "3", "--volume-size-gb", "500")
    smaller = _answer(capsys, "--instance", "ml.p3.16xlarge", "--keep", "3", "--volume-size-gb", "100")
    assert by_trial["question"]["premise"]["checkpoint"]["keep"] == 3
    assert by_trial["question"]["premise"]["checkpoint"]["every_seconds"] == 1800
    mine = {t["target"]: (t["provision"], t["usd_per_day"], t["save_seconds"]) for t in by_trial["targets"]}
    theirs = {t["target"]: (t["provision"], t["usd_per_day"], t["save_seconds"]) for t in asked["targets"]
              if t["target"] in mine}
    assert mine == theirs
    assert _targets(smaller)["s3"]["save_seconds"] != mine["s3"][2]   # the volume is the trial's own


def test_efs_already_deployed_as_its_answer_needs_no_deploy(capsys, tmp_path):
    # The lab's EFS deployed Elastic on General Purpose (its stack's outputs say so): the cheapest day for 1/100,000 of
    # 8B is EFS as it stands. No deploy; the premise names the lab as deployed, as FSx's names cdk.json's.
    outputs = tmp_path / "cdk-outputs.json"
    outputs.write_text(json.dumps({"DataSourceLab-Core": {"EfsThroughputMode": "elastic",
                                                          "EfsPerformanceMode": "generalPurpose"}}))
    answer = _answer(capsys, "--instance", "ml.p5.48xlarge", "--scale", "0.00001", "--outputs", str(outputs))
    efs, fsx = _targets(answer)["efs"], _targets(answer)["fsx"]
    assert "command" not in efs and "deploy_settings" not in efs, efs.get("command")
    assert efs["premise"] == efs["as_deployed"]["premise"] == "as deployed"
    assert fsx["premise"] == "as cdk.json would deploy it"
