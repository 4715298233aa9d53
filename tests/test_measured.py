"""Every real run checks the estimate and teaches it (dslab/core/measured.py, `dslab calibrate`, the report's
measured-beside-estimated table), tested against a truth the tool does not know: AWS runs generated from the model
with constants changed (tests/synthetic_runs.py), written by the workflow's own Collect functions."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslab.cli import main
from dslab.core import measured
from dslab.core.errors import ConfigError
from dslab.core.facts.prices import PriceTable
from dslab.core.model.calibration import in_use_from_document
from dslab.core.model.estimate import MODEL, estimate_mode
from dslab.core.shape import DatasetShape
from dslab.report import write_report

from .synthetic_runs import CALIBRATION_EXPERIMENT, TRUTH, synthetic_results

PRICES = PriceTable()
CHANGED = ("nvme_download_mbps", "s3_standard_first_byte")


def _round_trip(results: dict) -> dict:
    """results.json as a reader gets it: through JSON."""
    return json.loads(json.dumps(results, default=str))


@pytest.fixture(scope="module")
def run():
    return _round_trip(synthetic_results())


@pytest.fixture(scope="module")
def calibrated(run):
    return measured.calibrate(measured.measured_jobs(run), PRICES)


def test_calibration_recovers_the_constants_the_truth_changed_and_leaves_the_others(calibrated):
    found = {c.name: c for c in calibrated.constants}
    print("\nconstant: true, shipped, recovered")
    for name in CHANGED:
        true, recovered = getattr(TRUTH, name), found[name].value
        print(f"{name}: {true:g}, {getattr(MODEL, name):g}, {recovered:.4g}")
        assert found[name].status == "calibrated", found[name].why
        assert recovered == pytest.approx(true, rel=0.10)
    # What the truth left alone stays within the runs' noise (2%) of what was shipped.
    for c in calibrated.constants:
        if c.name not in CHANGED:
            assert c.value == pytest.approx(c.shipped, rel=0.03), (c.name, c.status, c.why)
    # Each calibrated constant names the jobs it rests on, from the run that measured them.
    assert found["nvme_download_mbps"].jobs == ["syn-big-shards-a-file-r0", "syn-big-shards-a-file-r1",
                                                "syn-other-shards-b-file-r0", "syn-other-shards-b-file-r1",
                                                "syn-third-shards-c-file-r0", "syn-third-shards-c-file-r1"]


def test_the_error_on_runs_each_left_out_falls_after_calibration(run):
    jobs = measured.measured_jobs(run)
    checked = measured.out_of_sample(jobs, PRICES).to_dict()
    before, after = checked["shipped"], checked["calibrated_without_it"]
    print(f"\nout of sample over {checked['jobs']} jobs: mean |error| {before['mean_abs']:.1%} shipped -> "
          f"{after['mean_abs']:.1%} calibrated; worst {before['under']:+.1%} -> {after['under']:+.1%}")
    assert len(checked["scenarios"]) == 6
    assert after["mean_abs"] < before["mean_abs"] / 2
    assert max(abs(after["under"]), after["over"]) < 0.05 < max(abs(before["under"]), before["over"])


def test_an_answer_to_a_new_question_moves_the_way_the_truth_says(calibrated):
    """Questions none of the runs asked: more shards on NVMe over three epochs, a million JPEGs the script reads."""
    questions = [("File", DatasetShape(files=600, bytes=600 * 800_000_000), "ml.p4d.24xlarge", 3),
                 ("Script", DatasetShape(files=1_000_000, bytes=1_000_000 * 100_000), "ml.p4d.24xlarge", 2)]
    for mode, shape, instance, epochs in questions:
        kwargs = dict(instance_type=instance, epochs=epochs, rate=100_000.0, prices=PRICES)
        true, before, after = (estimate_mode(mode, shape, model=m, **kwargs) for m in (TRUTH, MODEL, calibrated.model))
        for phase in ("downloading", "training"):
            t, b, a = getattr(true, phase), getattr(before, phase), getattr(after, phase)
            assert abs(a - t) <= 0.25 * abs(b - t) + 0.5, (mode, phase, t, b, a)


def test_too_few_jobs_keep_the_shipped_value_and_say_so():
    one = {**CALIBRATION_EXPERIMENT, "repeats": 1, "trials": [{"name": "big"}], "modes": ["File"],
           "datasets": [{"name": "shards-a", "format": "tfrecord"}]}
    jobs = measured.measured_jobs(_round_trip(synthetic_results(experiment=one)))
    found = {c.name: c for c in measured.calibrate(jobs, PRICES).constants}
    nvme = found["nvme_download_mbps"]
    assert (nvme.status, nvme.value) == ("kept", MODEL.nvme_download_mbps)
    assert nvme.why.startswith("one scenario: only shards-a on 1 x ml.p4d.24xlarge rests on it (1 job(s)")
    assert measured.out_of_sample(jobs, PRICES) is None   # one scenario: nothing to leave out


def test_inconsistent_runs_keep_the_shipped_value_and_say_what_each_asked():
    fast = synthetic_results(execution="exec-fast", prefix="fast")
    slow = synthetic_results(replace(TRUTH, nvme_download_mbps=600.0), execution="exec-slow", seed=1, prefix="slow")
    jobs = measured.measured_jobs(_round_trip(fast)) + measured.measured_jobs(_round_trip(slow))
    found = {c.name: c for c in measured.calibrate(jobs, PRICES).constants}
    nvme = found["nvme_download_mbps"]
    assert (nvme.status, nvme.value) == ("kept", MODEL.nvme_download_mbps)
    assert nvme.why.startswith("inconsistent: beyond the runs' noise")
    asked = sorted(nvme.per_job.values())
    assert asked[0] == pytest.approx(600, rel=0.1) and asked[-1] == pytest.approx(2000, rel=0.1)
    # What the two runs agree on is still calibrated.
    assert found["s3_standard_first_byte"].status == "calibrated"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nvme=st.floats(1200.0, 1900.0), first_byte=st.floats(0.018, 0.045), seed=st.integers(0, 1000))
def test_any_truth_in_reach_is_recovered_within_ten_percent(nvme, first_byte, seed):
    truth = replace(MODEL, nvme_download_mbps=nvme, s3_standard_first_byte=first_byte)
    jobs = measured.measured_jobs(_round_trip(synthetic_results(truth, seed=seed)))
    found = measured.calibrate(jobs, PRICES).model
    assert found.nvme_download_mbps == pytest.approx(nvme, rel=0.10)
    assert found.s3_standard_first_byte == pytest.approx(first_byte, rel=0.10)


# ---- dslab calibrate --------------------------------------------------------------------------------------------

def test_dslab_calibrate_writes_the_file_answers_read_and_prints_the_table_first(tmp_path, capsys, run):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(run))
    out = tmp_path / "calibration.json"
    assert main(["calibrate", "--results", str(results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["constant", "shipped", "calibrated", "change", "jobs"]
    assert printed[1].startswith("File mode onto NVMe")
    assert 0.9 <= float(printed[1].split()[-2].rstrip("%")) / 100 <= 1.1   # 1,000 -> ~2,000 MB/s
    assert "S3 Standard first byte" in printed[2] and "27.8 ms" in printed[2]
    document = json.loads(out.read_text())
    model = in_use_from_document(document, str(out)).model
    assert model.nvme_download_mbps == pytest.approx(2000, rel=0.1)
    cells = document["cells"]
    assert len(cells) == 24 and cells[0]["execution"] == "exec-synthetic" and cells[0]["region"] == "us-east-1"
    assert cells[0]["date"] == "2026-12-01T09:00:00+00:00"
    nvme = next(c for c in document["constants"] if c["name"] == "nvme_download_mbps")
    assert nvme["shipped"] == 1000.0 and nvme["status"] == "calibrated" and len(nvme["per_job"]) == 6
    oos = document["out_of_sample"]
    assert oos["bencher_shipped"]["mean_abs"] < 0.05 and oos["your_runs"]["calibrated_without_it"]["mean_abs"] < 0.02


def _bad_results(kind: str, run: dict) -> object:
    broken = json.loads(json.dumps(run))
    if kind == "local":
        broken["backend"] = "local"
    elif kind == "version":
        broken["schema_version"] = 3
    elif kind == "stats":
        del broken["dataset_stats"]["jpegs-a"]
    elif kind == "phases":
        broken["records"][3]["phases"] = {}
    elif kind == "not results":
        return [1, 2, 3]
    elif kind == "no experiment":
        broken["experiment"] = {}
    return broken


@pytest.mark.parametrize("kind, field, words", [
    ("local", "--results", "a local run's seconds are this machine's"),
    ("version", "--results", "schema_version 3; this dslab reads versions 1, 2"),
    ("stats", "dataset_stats.jpegs-a", "no files and bytes recorded for jpegs-a"),
    ("phases", "records[3] (syn-big-shards-a-script-r1): phases", "a completed job without its phases"),
    ("not results", "--results", "missing 'experiment'"),
    ("no experiment", ": experiment", "no experiment"),
])
def test_results_calibrate_cannot_use_get_one_line_and_nothing_is_written(tmp_path, capsys, run, kind, field, words):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_bad_results(kind, run)))
    out = tmp_path / "calibration.json"
    out.write_text('{"kept": true}')   # an earlier calibration: a refused one leaves it as it was
    assert main(["calibrate", "--results", str(path), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err
    assert field in captured.err and words in captured.err, captured.err
    assert out.read_text() == '{"kept": true}' and not (tmp_path / "calibration.json.partial").exists()


def test_runs_that_calibrate_nothing_exit_2_saying_what_they_would_need_and_leave_the_older_file(tmp_path, capsys):
    """One scenario (shards-a, twice): every constant rests on one scenario, so nothing moves; no file is written over
    the older one, and the one line says what the runs would need."""
    one = {**CALIBRATION_EXPERIMENT, "trials": [{"name": "big"}], "modes": ["File"],
           "datasets": [{"name": "shards-a", "format": "tfrecord"}]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_round_trip(synthetic_results(experiment=one))))
    out = tmp_path / "calibration.json"
    out.write_text('{"older": true}')
    capsys.readouterr()
    assert main(["calibrate", "--results", str(path), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err
    assert "--results: nothing calibrated: each constant needs jobs of 2 scenarios or more" in captured.err
    assert "experiments/calibrate.yaml" in captured.err
    assert out.read_text() == '{"older": true}' and not (tmp_path / "calibration.json.partial").exists()


def test_a_calibration_file_that_is_not_one_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="is not a calibration file"):
        in_use_from_document({"model": {}}, "x.json")
    document = {"written_by": "dslab calibrate", "calibration_version": 1, "model": {"nvme_download_mbps": -3}}
    with pytest.raises(ConfigError, match=r"model.nvme_download_mbps.*positive number"):
        in_use_from_document(document, "x.json")
    document["model"] = {"warp_factor": 9}
    with pytest.raises(ConfigError, match=r"model.warp_factor: not a constant"):
        in_use_from_document(document, "x.json")


# ---- the report ----------------------------------------------------------------------------------------------------

def test_the_report_of_an_aws_run_puts_each_jobs_estimate_beside_what_it_measured(tmp_path, run):
    write_report(run, tmp_path)
    text = (tmp_path / "report.md").read_text()
    section = text[text.index("## Measured beside estimated"):]
    rows = [line for line in section.splitlines() if line.startswith("| syn-")]
    assert len(rows) == 24
    jpegs = next(r for r in rows if r.startswith("| syn-big-jpegs-a-script-r0 |"))
    cells = [c.strip() for c in jpegs.split("|")[1:-1]]
    assert cells[1] == "Script" and cells[2] == "1 x ml.p4d.24xlarge" and cells[3] == "540.0"
    assert cells[4].startswith("460.2 (") and cells[5] == "-14.8%"
    assert ("- syn-big-shards-a-file-r0 (File): downloading 42% shorter than estimated: File mode onto NVMe, "
            "assumed 1,000 MB/s") in section
    assert "training 33% longer than estimated: S3 Standard first byte, assumed 27.8 ms" in section
    assert "Measured beside estimated" in (tmp_path / "report.html").read_text()


def test_a_local_runs_report_compares_nothing_with_aws(tmp_path):
    local = json.loads(open("tests/data/lab-results.json").read())
    write_report(local, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "## Measured beside estimated" not in text and "never with AWS figures" in text


# ---- every answer can use it --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory, run):
    folder = tmp_path_factory.mktemp("calibration")
    (folder / "results.json").write_text(json.dumps(run))
    out = folder / "calibration.json"
    assert main(["calibrate", "--results", str(folder / "results.json"), "--out", str(out)]) == 0
    return out


QUESTION = ["--files", "600", "--bytes", "480GB", "--instance", "ml.p4d.24xlarge", "--compute-rate", "20000"]


def _answer(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_estimate_recommend_and_size_answer_with_the_calibration_and_name_it(capsys, calibration_file):
    model = in_use_from_document(json.loads(calibration_file.read_text()), "x").model
    shape = DatasetShape(files=600, bytes=480_000_000_000)
    for command in ("estimate", "recommend", "size"):
        shipped = _answer(capsys, command, *QUESTION)
        mine = _answer(capsys, command, *QUESTION, "--calibration", str(calibration_file))
        assert shipped["question"]["premise"]["calibration"]["source"] == "shipped"
        assert "the shipped calibration" in shipped["question"]["premise"]["line"]
        assert mine["question"]["premise"]["calibration"]["source"] == str(calibration_file)
        assert "nvme_download_mbps" in mine["question"]["premise"]["calibration"]["calibrated"]
        file_row = next(s for s in mine["sources"] if s["source"] == "File")
        expected = estimate_mode("File", shape, instance_type="ml.p4d.24xlarge", rate=20000.0, accelerators=8,
                                 prices=PRICES, model=model)
        assert file_row["estimate"]["downloading"] == pytest.approx(expected.downloading, abs=0.1), command
    # The range of what the runs measured narrows: NVMe's constant now spans what its four jobs asked for.
    shipped_file = next(s for s in shipped["sources"] if s["source"] == "File")["estimate"]["range"]
    mine_file = next(s for s in mine["sources"] if s["source"] == "File")["estimate"]["range"]
    width = lambda r: r["billable_seconds"][1] - r["billable_seconds"][0]   # noqa: E731
    assert width(mine_file) < width(shipped_file) / 2
    # The table view says which: a file on a line of its own; the shipped calibration in the whole premise.
    capsys.readouterr()
    main(["estimate", *QUESTION, "--explain"])
    assert "the shipped calibration (Bencher's 12 cells and public figures)" in capsys.readouterr().out
    main(["estimate", *QUESTION, "--calibration", str(calibration_file)])
    assert f"constants: calibration {calibration_file}, fitted on your AWS runs" in capsys.readouterr().out


def test_an_experiments_calibration_key_and_the_flag_give_one_answer_and_the_run_keeps_the_file(
        capsys, tmp_path, calibration_file):
    experiment = tmp_path / "e.yaml"
    body = ("name: calibrated\ndatasets: [{name: big, format: tfrecord, files: 600, bytes: 480000000000}]\n"
            "modes: [File, FastFile]\ninstance_type: ml.p4d.24xlarge\n"
            "compute: {batch_size: 1000, seconds_per_batch: 0.05}\n")
    experiment.write_text(body + f"calibration: {calibration_file.name}\n")
    (tmp_path / calibration_file.name).write_text(calibration_file.read_text())
    keyed = _answer(capsys, "recommend", "--experiment", str(experiment))
    experiment.write_text(body)
    flagged = _answer(capsys, "recommend", "--experiment", str(experiment), "--calibration", str(calibration_file))
    shipped = _answer(capsys, "recommend", "--experiment", str(experiment))

    def picked(found):
        answer = found["answers"][0]["answer"]
        return answer["pick"], answer["sources"][0]["estimate"]["billable_seconds"]
    assert picked(keyed) == picked(flagged) != picked(shipped)
    # What `dslab plan` sends the workflow holds the calibration whole, with its path: its Plan reads no file.
    sent = _answer(capsys, "plan", "--experiment", str(experiment), "--calibration", str(calibration_file), "--offline")
    kept = sent["experiment"]["calibration"]
    assert kept["source"] == str(calibration_file.resolve()) and kept["written_by"] == "dslab calibrate"
    from dslab.core.experiment import parse_experiment
    again = parse_experiment(sent["experiment"])
    assert again.calibration.model.nvme_download_mbps == pytest.approx(2000, rel=0.1)
    assert again.document == sent["experiment"]   # the record reproduces the run, calibration included


@pytest.mark.parametrize("content, words", [
    (None, "calibration: cannot read"),
    ("[1]", "is not a calibration file"),
    ('{"written_by": "dslab calibrate", "calibration_version": 7, "model": {}}', "calibration_version: version 7"),
])
def test_a_calibration_key_that_cannot_be_used_is_one_line_before_anything(capsys, tmp_path, content, words):
    experiment = tmp_path / "e.yaml"
    experiment.write_text("name: c\ndatasets: [{name: d, format: jpg, files: 10, bytes: 1000000}]\n"
                          "calibration: mine.json\n")
    if content is not None:
        (tmp_path / "mine.json").write_text(content)
    capsys.readouterr()
    assert main(["recommend", "--experiment", str(experiment)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


def test_the_report_with_the_runs_own_calibration_meets_its_measurements(tmp_path, run, calibration_file):
    from dslab.inputs.calibration_file import read_calibration
    write_report(run, tmp_path / "shipped")
    write_report(run, tmp_path / "mine", read_calibration(calibration_file))

    def mean_error(folder):
        text = (folder / "report.md").read_text()
        return float(text.split("jobs inside the estimate's range; mean error ")[1].split("%")[0])
    assert mean_error(tmp_path / "mine") < mean_error(tmp_path / "shipped") / 2
    mine = (tmp_path / "mine" / "report.md").read_text()
    assert f"calibration {calibration_file}, fitted on your AWS runs" in mine
    assert "File mode onto NVMe" not in mine.split("## Measured beside estimated")[1].split("##")[0]


# ---- the calibration experiment -----------------------------------------------------------------------------------

CALIBRATE_YAML = "experiments/calibrate.yaml"
# What no AWS document gives, and which job of the calibration run measures it.
ASSUMED = {"nvme_download_mbps": "File mode onto NVMe", "s3_standard_first_byte": "S3 Standard first byte",
           "express_first_byte": "S3 Express One Zone first byte", "fastfile_get_latency": "FastFile's per-file GET",
           "file_per_object": "File's per-object copy"}


def test_the_calibration_experiment_is_priced_before_it_runs_and_measures_each_assumption(capsys):
    found = _answer(capsys, "estimate", "--experiment", CALIBRATE_YAML)
    print(f"\nexperiments/calibrate.yaml: {sum(j['repeats'] for j in found['jobs'])} jobs, ${found['total_usd']:.2f} "
          f"({found['total_range_usd'][0]:.2f}-{found['total_range_usd'][1]:.2f})")
    assert found["total_usd"] < 5.0    # a few dollars
    measures = {m for job in found["jobs"] for m in job["measures"]}
    for words in ASSUMED.values():
        assert words in measures, (words, sorted(measures))
    # On instance types an account has without a quota increase as a rule, and nothing that needs an FSx.
    assert {j["instance_type"] for j in found["jobs"]} <= {"ml.m5.xlarge", "ml.g4dn.4xlarge"}
    assert all(j["repeats"] >= 2 for j in found["jobs"]) and not any(j["source"] in ("FSx", "EFS") for j in found["jobs"])
    capsys.readouterr()
    assert main(["estimate", "--experiment", CALIBRATE_YAML]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split()[:3] == ["trial", "dataset", "source"] and any(t.startswith("24 jobs: $") for t in text)


def test_script_jobs_run_with_more_gets_in_flight_calibrate_the_first_byte_they_measured():
    """Jobs whose script kept 128 GETs in flight (s3_concurrency) on an account where S3's first byte is 40 ms (3,200
    GETs a second, within a prefix's 5,500): read at the script's default 64, their GETs would say 20 ms. The
    calibration reads each job at its own concurrency."""
    document = {**CALIBRATION_EXPERIMENT, "hyperparameters": {"s3_concurrency": 128}}
    jobs = measured.measured_jobs(_round_trip(synthetic_results(TRUTH, document, prefix="c128")))
    assert {j.premise.s3_concurrency for j in jobs if j.mode == "Script"} == {128}
    found = {c.name: c for c in measured.calibrate(jobs, PRICES).constants}
    first_byte = found["s3_standard_first_byte"]
    assert first_byte.status == "calibrated" and first_byte.value == pytest.approx(0.040, rel=0.10), first_byte.why


def test_the_calibration_experiments_results_feed_dslab_calibrate_directly():
    from dslab.inputs.experiment_file import read_document
    document = read_document(__import__("pathlib").Path(CALIBRATE_YAML))
    truth = replace(TRUTH, express_first_byte=0.009, file_per_object=0.010)
    jobs = measured.measured_jobs(_round_trip(synthetic_results(truth, document, prefix="cal")))
    found = {c.name: c for c in measured.calibrate(jobs, PRICES).constants}
    for name in ("nvme_download_mbps", "s3_standard_first_byte", "express_first_byte"):   # assumptions: the runs alone
        assert found[name].status == "calibrated", (name, found[name].why)
        assert found[name].value == pytest.approx(getattr(truth, name), rel=0.10), name
    # A constant fitted on Bencher's cells is fitted on theirs and the runs' together: it moves towards the runs by
    # their share of the cells, and says so.
    per_object = found["file_per_object"]
    assert MODEL.file_per_object < per_object.value < truth.file_per_object
    assert "fitted together with Bencher's cells A File, C File" in per_object.why


# ---- the checkpoint answers ---------------------------------------------------------------------------------------

def test_checkpoint_trials_calibrate_the_checkpoint_answers_assumptions_in_the_same_file(tmp_path, capsys, run):
    """The sync's stall on NVMe rests on NVMe's rate; its upload (durable in S3) and copy-in on how many parts move at
    once. On the account of the data run (NVMe at 2,000 MB/s) where 16 parts move at once: both recovered, in the same
    file as the data jobs' constants, and the checkpoint answer moves with them."""
    from .synthetic_runs import CHECKPOINT_TRUTH, checkpoint_experiment, synthetic_checkpoint_results
    experiment = checkpoint_experiment(tmp_path)
    checkpoints = _round_trip(synthetic_checkpoint_results(experiment))
    jobs = measured.checkpoint_jobs(checkpoints, PRICES)
    assert [j.job for j in jobs] == ["ckpt/s3", "ckpt/express", "ckpt-2/s3", "ckpt-2/express"]
    assert set(jobs[0].measured) == {"stall", "save", "copy_in"}
    (tmp_path / "ckpt.json").write_text(json.dumps(checkpoints))
    (tmp_path / "data.json").write_text(json.dumps(run))
    out = tmp_path / "calibration.json"
    capsys.readouterr()
    assert main(["calibrate", "--results", str(tmp_path / "data.json"), str(tmp_path / "ckpt.json"),
                 "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    found = {c["name"]: c for c in document["constants"]}
    assert found["sync_connections"]["status"] == "calibrated"
    assert found["sync_connections"]["calibrated"] == pytest.approx(CHECKPOINT_TRUTH.sync_connections, rel=0.10)
    # One constant per quantity: File's download onto NVMe rests on the data jobs alone, a checkpoint's write on NVMe
    # (the sync's stall) on the checkpoint targets alone; each recovered.
    for name, jobs_of in (("nvme_download_mbps", 6), ("nvme_checkpoint_mbps", 4)):
        assert found[name]["status"] == "calibrated" and len(found[name]["jobs"]) == jobs_of, found[name]["why"]
        assert found[name]["calibrated"] == pytest.approx(getattr(CHECKPOINT_TRUTH, name), rel=0.10)
    assert not any(j.startswith("ckpt") for j in found["nvme_download_mbps"]["jobs"])
    checkpoint_cells = [c for c in document["cells"] if c["compared"] == "save"]
    assert {c["job"] for c in checkpoint_cells} == {"ckpt/s3", "ckpt/express", "ckpt-2/s3", "ckpt-2/express"}
    # The checkpoint answer moves as the truth says.
    workload = "dslab/contracts/dlio/llama3_8b.yaml"
    ask = ["estimate", "--workload", workload, "--instance", "ml.p4d.24xlarge"]
    shipped = _answer(capsys, *ask)
    mine = _answer(capsys, *ask, "--calibration", str(out))

    def s3(found):
        return next(t for t in found["targets"] if t["target"] == "s3")
    assert s3(mine)["stall_seconds"] == pytest.approx(s3(shipped)["stall_seconds"] * 1000 / 2000, rel=0.1)
    assert s3(mine)["upload_seconds"] < s3(shipped)["upload_seconds"] * 0.75
    assert re.search(r"\b1[56](\.\d)? at once", " ".join(s3(mine)["assumptions"]))


# ---- what a review found -------------------------------------------------------------------------------------------

def test_a_record_without_its_trial_takes_the_one_trial_of_its_dataset_or_is_refused(run):
    """An older record names no trial: the one trial that reads its dataset is its premise; where two trials read it,
    the premise cannot be told and the record is refused, naming it."""
    broken = json.loads(json.dumps(run))
    for record in broken["records"]:
        record.pop("trial", None)
    jobs = measured.measured_jobs(broken)   # each dataset is read by one trial here
    assert {j.trial for j in jobs if j.dataset == "shards-b"} == {"other"}
    both = json.loads(json.dumps(broken))
    both["experiment"]["trials"][1]["datasets"].append(both["experiment"]["trials"][0]["datasets"][0])
    with pytest.raises(ConfigError, match=r"records\[0\] \(syn-big-shards-a-file-r0\): trial: missing, and 2 trials"):
        measured.measured_jobs(both)


def _nvme(document: dict) -> dict:
    """The calibration file's record of File's download onto NVMe (constants[11]: the Model's 12th field)."""
    (found,) = [c for c in document["constants"] if c["name"] == "nvme_download_mbps"]
    assert document["constants"].index(found) == 11 and found["status"] == "calibrated"
    return found


@pytest.mark.parametrize("change, field", [
    (lambda d: d["constants"][0].update(status="calibrated", per_job={"a": "fast"}), "constants[0].per_job"),
    (lambda d: d["constants"][0].update(status="calibrated", per_job={"a": 0}), "constants[0].per_job"),
    (lambda d: d["constants"][0].update(status="calibrated", per_job=[1, 2]), "constants[0].per_job"),
    (lambda d: d["out_of_sample"]["your_runs"]["calibrated_without_it"].pop("under"), "out_of_sample.your_runs.calibrated_without_it"),
    (lambda d: d["out_of_sample"]["your_runs"]["calibrated_without_it"].update(under=-1), "out_of_sample.your_runs.calibrated_without_it"),
    (lambda d: d["out_of_sample"].update(your_runs={"calibrated_without_it": [1]}), "out_of_sample.your_runs.calibrated_without_it"),
    (lambda d: d["model"].update(nvme_download_mbps=float("inf")), "model.nvme_download_mbps"),
    (lambda d: d.pop("constants"), "constants"),
    # A calibrated value hand-edited into the constant's own record: refused, never passed over (issue 56).
    (lambda d: _nvme(d).update(calibrated=-1500.0), "constants[11].calibrated"),
    (lambda d: _nvme(d).update(calibrated=1500.0), "constants[11].calibrated"),
    (lambda d: (_nvme(d).update(calibrated=9000.0), d["model"].update(nvme_download_mbps=9000.0)),
     "constants[11].range"),
    (lambda d: _nvme(d).update(range=[-1, 3000]), "constants[11].range"),
])
def test_a_calibration_file_changed_by_hand_is_one_line_naming_the_field(capsys, tmp_path, calibration_file,
                                                                            change, field):
    document = json.loads(calibration_file.read_text())
    change(document)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    capsys.readouterr()
    assert main(["estimate", *QUESTION, "--calibration", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--calibration: {field}" in err, err


def test_a_calibrated_constants_range_holds_its_value_and_data_answers_widen_by_data_errors_only(
        tmp_path, capsys, run, calibration_file):
    from dslab.inputs.calibration_file import read_calibration
    used = read_calibration(calibration_file)
    for name, low, high in used.calibrated:
        assert low <= getattr(used.model, name) <= high, name
    from .synthetic_runs import checkpoint_experiment, synthetic_checkpoint_results
    (tmp_path / "ckpt.json").write_text(json.dumps(_round_trip(synthetic_checkpoint_results(checkpoint_experiment(tmp_path)))))
    (tmp_path / "data.json").write_text(json.dumps(run))
    both = tmp_path / "both.json"
    assert main(["calibrate", "--results", str(tmp_path / "data.json"), str(tmp_path / "ckpt.json"), "--out", str(both)]) == 0
    document = json.loads(both.read_text())["out_of_sample"]
    assert len(document["your_runs"]["scenarios"]) == 6 and len(document["your_checkpoints"]["scenarios"]) == 4
    assert read_calibration(both).error == read_calibration(calibration_file).error   # the data jobs' alone


def test_size_reads_the_calibrated_first_byte_for_the_scripts_concurrency(capsys, calibration_file):
    ask = ["size", "--files", "4000000", "--bytes", "440GB", "--instance", "ml.p4d.24xlarge"]
    capsys.readouterr()
    main([*ask, "--explain"])
    shipped = capsys.readouterr().out
    main([*ask, "--calibration", str(calibration_file), "--explain"])
    mine = capsys.readouterr().out
    assert "~28 ms first byte" in shipped and "~40 ms first byte" in mine and "~28 ms first byte" not in mine


def test_a_report_of_describe_outputs_refuses_a_calibration_it_could_not_use(capsys, tmp_path, calibration_file):
    folder = tmp_path / "describe"
    folder.mkdir()
    (folder / "job.json").write_text(json.dumps({"TrainingJobName": "j", "TrainingJobStatus": "Completed"}))
    capsys.readouterr()
    assert main(["report", "--describe-json", str(folder), "--out", str(tmp_path / "out"),
                 "--calibration", str(calibration_file)]) == 2
    err = capsys.readouterr().err
    assert "--calibration: goes with results that hold their experiment" in err and not (tmp_path / "out").exists()
