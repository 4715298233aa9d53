"""One question, one answer, whatever the path: the CLI's flags, an experiment file and a DLIO workload file ask it of
estimate, recommend, size and plan with the same premise (core/answer/premise.py), and get one pick, one cost per source and
one refusal per source, each output naming the premise it assumed.

The question is a user's: 2 TB of 120 KB JPEGs on 8 x ml.p4d.24xlarge, 10 epochs. It got four answers before: File
refused for a 100 GB volume p4d does not have (its 8,000 GB of NVMe hold each instance's 250 GB share), FSx priced on a
1,200 GiB file system that cannot hold 2 TB, and different defaults per command."""

from __future__ import annotations

import json

import pytest
import yaml

from dslab.core.shape import DatasetShape, parse_bytes
from dslab.core.facts.prices import PriceTable
from dslab.core.answer.sizing import MAX_CLUSTER, size

from .conftest import REPO
from .test_cli_robustness import run

FILES, BYTES = 16_666_667, 16_666_667 * 120_000          # 2 TB of 120 KB files
CLUSTER = ["--instance", "ml.p4d.24xlarge", "--instance-count", "8", "--epochs", "10"]
FLAGS = ["--files", str(FILES), "--bytes", "2.00000004TB", *CLUSTER]


def _json(capsys, *argv) -> dict:
    result = run(capsys, *argv)
    assert result.code == 0, result.err
    return json.loads(result.out)


def _experiment(tmp_path) -> str:
    path = tmp_path / "two-tb.yaml"
    path.write_text(yaml.safe_dump({
        "name": "two-tb", "datasets": [{"name": "big-jpg", "format": "jpg", "files": FILES, "bytes": "2.00000004TB"}],
        "modes": ["File", "FastFile", "Pipe", "FSx", "EFS", "Script"], "instance_type": "ml.p4d.24xlarge",
        "instance_count": 8, "epochs": 10,
        "trials": [{"name": "base"}, {"name": "express", "storage": "express", "modes": ["File", "FastFile", "Pipe", "Script"]}]}))
    return str(path)


def _workload(tmp_path) -> str:
    """The same dataset and compute as a DLIO workload file: one 120,000-byte sample per file, ResNet-50 on A100 as MLPerf
    Storage emulates it (batch 400 every 0.435 s), 12 readers per accelerator (96 on a p4d: its vCPUs, the flags'
    default), 10 epochs, AU target 90%."""
    path = tmp_path / "two-tb_a100.yaml"
    path.write_text(yaml.safe_dump({
        "model": {"name": "resnet50"}, "workflow": {"train": True},
        "dataset": {"num_files_train": FILES, "num_samples_per_file": 1, "record_length_bytes": 120_000, "format": "npz"},
        "reader": {"data_loader": "pytorch", "read_threads": 12, "batch_size": 400},
        "train": {"epochs": 10, "computation_time": 0.435}, "metric": {"au": 0.90}}))
    return str(path)


def _costs(sources: list[dict]) -> dict[str, float]:
    return {row["source"]: round(row["cost_to_result_usd"], 2) for row in sources if not row["blocker"]}


def test_one_question_gets_one_pick_one_cost_per_source_and_one_refusal_per_source_by_every_path(capsys, tmp_path):
    by_flags = _json(capsys, "recommend", *FLAGS, "--json")
    by_file = _json(capsys, "recommend", "--experiment", _experiment(tmp_path), "--json")["answers"][0]["answer"]
    workload = _workload(tmp_path)
    by_workload = _json(capsys, "recommend", "--workload", workload, "--instance", "ml.p4d.24xlarge",
                        "--instance-count", "8", "--json")
    answers = {"flags": by_flags, "experiment file": by_file, "workload file": by_workload}
    # One pick, one cost per source, one refusal per source.
    assert {name: a["pick"] for name, a in answers.items()} == dict.fromkeys(answers, "FSx")
    costs = {name: _costs(a["sources"]) for name, a in answers.items()}
    assert costs["flags"] == costs["experiment file"] == costs["workload file"], costs
    assert len(costs["flags"]) == 10 and {name: a["blocked"] for name, a in answers.items()} == dict.fromkeys(answers, {})
    # File is ranked: each instance's 250 GB share lands on its 8,000 GB of NVMe (no EBS volume to raise).
    assert "File" in costs["flags"] and "Express File" in costs["flags"]
    # One rule: every source priced as `dslab size` provisions it; the lab as it stands beside it where it differs.
    # FSx is never priced on the 1,200 GiB it cannot hold: Persistent 2 at 7,200 GiB, with its deploy command.
    fsx = next(r for r in by_flags["sources"] if r["source"] == "FSx")
    assert fsx["provisioned_as"] == "FSx P2-1000 7,200 GiB" and fsx["commands"][0].startswith("make deploy FSX=up")
    assert "cannot hold 1,863 GiB" in fsx["as_deployed"]["blocker"] and fsx["as_deployed"]["differs"]
    # EFS, FastFile and Script were priced as the lab stands beside FSx provisioned: now each as provisioned too.
    efs = next(r for r in by_flags["sources"] if r["source"] == "EFS")
    assert efs["provisioned_as"] == "EFS Elastic" and efs["as_deployed"]["cost_to_result_usd"] > 2 * efs["cost_to_result_usd"]
    # estimate and size are views of the same answer: the same object, to the cent.
    assert _json(capsys, "estimate", *FLAGS, "--json") == by_flags
    sized = _json(capsys, "size", *FLAGS, "--json")
    assert sized == by_flags
    # The break-even prices the FSx the ranking ranks.
    assert "7,200 GiB" in by_flags["fsx_express_break_even"]["assumptions"][0]
    # Every answer names one premise, the same by every path but where its dataset came from.
    premises = [a["question"]["premise"] for a in answers.values()]
    keys = ("instance_type", "instance_count", "epochs", "files", "bytes", "samples", "accelerators_per_instance")
    assert len({tuple(p[k] for k in keys) for p in premises}) == 1
    assert {round(p["samples_per_second_per_accelerator"], 1) for p in premises} == {919.5}
    # plan runs the experiment on the lab as it stands: FSx would fill up, so it is refused before a request is built,
    # naming what the answer provisions; export refuses it with the same line.
    refused = run(capsys, "plan", "--experiment", _experiment(tmp_path), "--offline")
    assert refused.one_line_error("trials[0].modes", "cannot hold 1,863 GiB", "fsxCapacity=7200")
    exported = run(capsys, "export", "--experiment", _experiment(tmp_path), "--offline")
    assert exported.code == 2 and exported.err.strip().splitlines()[-1] == refused.err.strip().splitlines()[-1]


def test_every_text_answer_leads_with_the_answer_and_names_its_premise_in_two_lines(capsys, tmp_path):
    for argv in (["estimate", *FLAGS], ["recommend", *FLAGS], ["size", *FLAGS],
                 ["recommend", "--experiment", _experiment(tmp_path)]):
        result = run(capsys, *argv)
        assert result.code == 0, result.err
        lines = result.out.splitlines()
        first = lines[1] if argv[1] == "--experiment" else lines[0]
        assert first.startswith("answer: FSx, $") and "to a result" in first, (argv[0], first)
        premise = [i for i, line in enumerate(lines) if line.startswith("premise: ")]
        assert len(premise) == 1 and lines[premise[0] + 1].startswith("priced: "), argv[0]
        line = lines[premise[0]]
        for said in ("8 x ml.p4d.24xlarge (8 x A100 40GB)", "10 epochs", "MLPerf Storage A100", "16,666,667 files",
                     "2.00 TB", "16,666,667 samples"):
            assert said in line, (argv[0], said, line)
        assert "where the lab cdk.json deploys" in lines[premise[0] + 1]
        assert max(len(line) for line in lines) <= 160, argv


def test_every_command_takes_the_same_defaults_and_says_which_it_took(capsys):
    shape = ["--files", "30607", "--bytes", "1.1GB"]
    premises = [_json(capsys, command, *shape, "--json")["question"]["premise"]
                for command in ("estimate", "recommend", "size")]
    assert {(p["instance_type"], p["instance_count"], p["epochs"]) for p in premises} == {("ml.p3.2xlarge", 1, 1)}
    assert all(set(p["defaults"]) == {"instance", "instance_count", "epochs"} for p in premises)
    said = run(capsys, "size", *shape).out
    assert "defaults: type, count, epochs" in said
    # --count is --instance-count everywhere; the bounds are one.
    for command in ("estimate", "recommend", "size"):
        assert _json(capsys, command, *shape, "--count", "4", "--json")["question"]["premise"]["instance_count"] == 4
        assert run(capsys, command, *shape, "--instance-count", "4097").one_line_error("--instance-count")
    assert run(capsys, "plan", "--experiment", "experiments/smoke.yaml", "--offline", "--instance-count", "4097") \
        .one_line_error("--instance-count")


@pytest.mark.parametrize("given, expected", [("2TB", 2 * 10**12), ("54GB", 54 * 10**9), ("1.5 GiB", int(1.5 * 2**30)),
                                             ("1.1GB", 1_100_000_000), ("110MiB", 110 * 2**20), (1_100_000_000, 1_100_000_000)])
def test_sizes_take_the_same_forms_on_the_command_line_and_in_experiment_files(given, expected):
    from dslab.core.experiment import parse_experiment
    assert parse_bytes(given, "--bytes") == expected
    document = {"datasets": [{"name": "d", "format": "jpg", "files": 10, "bytes": given}], "modes": ["FastFile"]}
    assert parse_experiment(document).trials[0].datasets[0].bytes == expected


@pytest.mark.parametrize("given", ["1.5", "900", 1.5, "12 parsecs", "-2TB", "0GB"])
def test_a_size_without_its_unit_or_of_nothing_is_refused_with_what_to_write(capsys, given):
    from dslab.core.errors import ConfigError
    from dslab.core.experiment import parse_experiment
    with pytest.raises(ConfigError) as bad:
        parse_experiment({"datasets": [{"name": "d", "format": "jpg", "files": 10, "bytes": given}], "modes": ["File"]})
    assert bad.value.field == "datasets[0].bytes"
    result = run(capsys, "estimate", "--files", "10", "--bytes", str(given))
    assert result.one_line_error("--bytes"), result.err
    if str(given) in ("1.5", "900"):
        assert f"did you mean {given}GB" in result.err


def test_nvme_instances_hold_their_share_and_ebs_volumes_are_sized_for_it_or_refused(capsys):
    """File mode checks one host's share as the distribution splits it; NVMe types have their fixed storage and no
    volume is asked for; an EBS volume too small for the share is refused only when the user asked for it."""
    rows = lambda *argv: {r["source"]: r for r in _json(capsys, "recommend", *argv, "--json")["sources"]  # noqa: E731
                          if not r["blocker"]}
    # 1.2 TB on 4 x ml.p3.16xlarge (EBS): each instance holds its 300 GB share on a volume sized for it.
    p3 = next(s for s in _json(capsys, "estimate", "--files", "400", "--bytes", "1.2TB", "--instance", "ml.p3.16xlarge",
                               "--instance-count", "4", "--mode", "File", "--json")["sources"] if s["source"] == "File")
    assert p3["estimate"]["volume_gb"] == 315
    assert "315 GB EBS volume (sized for File's share)" in " ".join(p3["estimate"]["assumptions"])
    asked = run(capsys, "recommend", "--files", "400", "--bytes", "1.2TB", "--instance", "ml.p3.16xlarge",
                "--instance-count", "4", "--volume-size-gb", "300", "--json")
    assert "raise volume_size_gb to at least 315" in json.loads(asked.out)["blocked"]["File"]
    # 10 TB on one ml.g5.xlarge: 250 GB of NVMe cannot hold it, whatever volume is asked for.
    g5 = json.loads(run(capsys, "recommend", "--files", "1000", "--bytes", "10TB", "--instance", "ml.g5.xlarge",
                        "--volume-size-gb", "16000", "--json").out)
    assert "250 GB of NVMe instance storage" in g5["blocked"]["File"]
    assert "File" in rows("--files", "1000", "--bytes", "10TB", "--instance", "ml.g5.xlarge", "--instance-count", "64")


@pytest.mark.parametrize("shape", [DatasetShape(1_530_350, 54_000_000_000), DatasetShape(500, 54_000_000_000)],
                         ids=["scenario C: 1.5 M JPEGs", "scenario D: 500 shards"])
def test_sizes_largest_cluster_agrees_with_its_own_au_column_at_n_and_n_plus_one(shape):
    """The largest cluster each source feeds at AU >= 90% is where its own AU column crosses 90%: at N the column
    holds, at N + 1 it does not (it said "272 inst." for a source whose column fell below 90% at 28)."""
    a100 = 400 / 0.435
    first = size(shape, instance_type="ml.p4d.24xlarge", count=8, rate=a100, prices=PriceTable(), epochs=10)
    columns: dict[int, dict[str, float]] = {}

    def column(n: int) -> dict[str, float]:
        if n not in columns:
            result = size(shape, instance_type="ml.p4d.24xlarge", count=n, rate=a100, prices=PriceTable(), epochs=10)
            columns[n] = {s.source: s.au_percent for s in result.sources}
        return columns[n]
    checked = 0
    for row in first.sources:
        largest = row.max_instances_at_target_au
        if 1 <= largest:
            assert column(largest)[row.source] >= 90.0, (row.source, largest)
        if largest < min(MAX_CLUSTER, shape.files):   # at most one instance per file: past it nothing is read
            assert column(largest + 1)[row.source] < 90.0, (row.source, largest + 1)
            checked += 1
    assert checked >= 1


# ---- the local lab: a finished run is never lost, one workload job at a time, set-up in the time to a result ----

def test_a_finished_out_stays_until_the_new_run_ends_and_comes_back_if_it_stops_before_its_first_result(tmp_path):
    """Re-running on a finished --out deleted its results before the new run had any: a Ctrl-C at 20 s left a 0-job
    report. Now the earlier run moves aside into .previous/ and comes back when the new one stops before its first
    result; one that stops later leaves its partial results (to resume) and keeps the earlier run aside; one that ends
    deletes it."""
    from dslab.core.experiment import parse_experiment
    from dslab.local.lab import PREVIOUS, finish_out, prepare_out
    out, said = tmp_path / "lab-out", []
    experiment = parse_experiment({})

    def finished_run(jobs: int) -> None:
        (out / "jobs").mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps({"records": [{"status": "Completed"}] * jobs}))
        (out / "report.html").write_text(f"{jobs} jobs")
        for i in range(jobs):
            (out / "jobs" / f"job-{i}.log").write_text("log")

    finished_run(14)
    aside = prepare_out(out, None, experiment, False, said.append)
    assert aside == out / PREVIOUS and not (out / "results.json").exists() and (aside / "report.html").read_text() == "14 jobs"
    (out / "results.json").write_text(json.dumps({"records": [], "partial": {"done": 0}}))   # stopped at 20 s: nothing yet
    finish_out(out, aside, False, said.append)
    assert (out / "report.html").read_text() == "14 jobs" and len(list((out / "jobs").glob("*.log"))) == 14
    assert not aside.exists() and "back in place" in said[-1]
    # Stopped after its first result: the partial run stays (a rerun resumes it), the finished one stays aside.
    aside = prepare_out(out, None, experiment, False, said.append)
    finished_run(1)
    finish_out(out, aside, False, said.append)
    assert (aside / "report.html").read_text() == "14 jobs" and (out / "report.html").read_text() == "1 jobs"
    # A start-over then keeps the older finished run aside; the run that ends deletes it.
    again = prepare_out(out, None, experiment, True, said.append)
    assert again == aside and (aside / "report.html").read_text() == "14 jobs" and not (out / "report.html").exists()
    finished_run(14)
    finish_out(out, aside, True, said.append)
    assert not aside.exists() and (out / "report.html").read_text() == "14 jobs"


def test_a_workload_runs_locally_one_job_at_a_time_unless_asked_and_the_report_says_how_many_shared_the_cpus(tmp_path):
    from dslab.inputs.experiment_file import load_experiment
    from dslab.local.lab import LOCAL_WORKLOAD_DEFAULTS
    from dslab.report import shared_cpus
    workload = REPO / "dslab/contracts/dlio/unet3d_a100.yaml"
    alone = load_experiment(None, workload=workload, scale=0.01, workload_defaults=LOCAL_WORKLOAD_DEFAULTS)
    assert alone.max_concurrency == 1
    asked = tmp_path / "asked.yaml"
    asked.write_text(f"max_concurrency: 3\nworkload: {{file: {workload}, scale: 0.01}}\n")
    assert load_experiment(asked, workload_defaults=LOCAL_WORKLOAD_DEFAULTS).max_concurrency == 3
    plain = tmp_path / "plain.yaml"   # no workload: the experiment's own default stands
    plain.write_text("datasets: [{name: d, format: jpg, generate: {images: 10, classes: 2}}]\nmodes: [File]\n")
    assert load_experiment(plain, workload_defaults=LOCAL_WORKLOAD_DEFAULTS).max_concurrency == 4
    assert shared_cpus({"local_run": {"max_concurrency": 1, "cpus": 2}}) == \
        " Its jobs ran one at a time on 2 CPUs (max_concurrency: 1)."
    assert "up to 4 at a time" in shared_cpus({"local_run": {"max_concurrency": 4, "cpus": 2}})


def test_a_local_runs_time_to_a_result_includes_the_set_up_this_machine_measured():
    import datetime as dt

    from dslab.core.answer.scenarios import measured
    from dslab.local.lab import prepare_seconds
    t0 = dt.datetime(2026, 12, 3, tzinfo=dt.timezone.utc)
    at = lambda s: t0 + dt.timedelta(seconds=s)  # noqa: E731
    definition = {"States": {"PrepareData": {"Branches": [{"States": {"StartEfsSync": {}, "EfsDone": {}}},
                                                          {"States": {"CheckFsxData": {}}},
                                                          {"States": {"StageExpress": {}}}]}}}
    history = [{"type": "ParallelStateEntered", "timestamp": at(0), "stateEnteredEventDetails": {"name": "PrepareData"}},
               {"type": "TaskStateExited", "timestamp": at(7.5), "stateExitedEventDetails": {"name": "StartEfsSync"}},
               {"type": "PassStateExited", "timestamp": at(9), "stateExitedEventDetails": {"name": "EfsDone"}},
               {"type": "TaskStateExited", "timestamp": at(2), "stateExitedEventDetails": {"name": "CheckFsxData"}},
               {"type": "TaskStateExited", "timestamp": at(4), "stateExitedEventDetails": {"name": "StageExpress"}}]
    seconds = prepare_seconds(history, definition)
    assert seconds == {"EFS": 9.0, "FSx": 2.0, "Express": 4.0}
    row = lambda mode, storage: {"dataset": "d", "dataset_name": "d", "trials": ["base"], "mode_name": mode,  # noqa: E731
                                 "storage": storage, "cost_total": 0.01, "wall_mean": 10.0}
    (answer,) = measured([row("EFS", "standard"), row("FastFile", "express"), row("File", "standard")], PriceTable(),
                         shapes={"d": DatasetShape(100, 10**6)}, setup_time=False, local_setup=seconds)
    times = {o.source: o.seconds for o in answer.decision.ranking}
    assert times == {"EFS": 19.0, "Express FastFile": 14.0, "File": 10.0}


def test_the_chart_draws_each_datasets_own_sources_without_gaps_and_keeps_long_names_whole(tmp_path):
    from PIL import Image

    from dslab.report import breakdown_chart
    long = "a-dataset-name-that-is-much-longer-than-a-tick"
    rows = [{"dataset": d, "mode": m, "billable_mean": 100.0, "wall_mean": 100.0, "downloading": 10.0,
             "training": 80.0, "other": 10.0, "billable": None, "wall": None} for d, modes in ((long, ("File", "FastFile", "Express FastFile")), ("short", ("File",)))
            for m in modes]
    drawn = breakdown_chart(rows, tmp_path / "chart.png", "test")
    assert drawn["panels"] == [long, "short"]
    assert [b["x"] for b in drawn["bars"] if b["dataset"] == "short"] == [0]    # no slots for sources it did not run
    image = Image.open(tmp_path / "chart.png")
    assert image.format == "PNG" and image.size[0] > 400
