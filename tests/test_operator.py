"""The operator side: experiment files, estimate (calibration), recommend, report, plan, AWS errors."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import subprocess
import sys

import pytest
from PIL import Image

from dslab.contracts import VENDORED_MANIFEST, validate_results
from dslab.core.model.estimate import CALIBRATION_PATH, calibration_cells, estimate_mode, mape
from dslab.core.shape import DatasetShape
from dslab.core.facts.compute import compute_rate
from dslab.core.experiment import parse_experiment
from dslab.core.facts.prices import PriceTable
from dslab.core.answer.recommend import recommend
from dslab.report import aggregate, breakdown_chart, results_from_describe_dir, write_report

from .conftest import REPO, SHARED



def dslab(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "dslab.cli", *args], capture_output=True, text=True, cwd=REPO, **kwargs)


# ---- experiment files ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["local.yaml", "smoke.yaml", "post-12-jobs.yaml", "all-modes-20-jobs.yaml"])
def test_shipped_experiments_parse(name):
    from dslab.inputs.experiment_file import load_experiment
    experiment = load_experiment(REPO / "experiments" / name)
    from dslab.core.experiment import expand
    count = len(expand(experiment))
    # local.yaml: 14 jobs reading data, and the llama3_8b checkpoint trial's 4 targets and their 4 restore jobs.
    assert count == {"local.yaml": 22, "smoke.yaml": 2, "post-12-jobs.yaml": 12, "all-modes-20-jobs.yaml": 20}[name]


def test_normalised_experiment_reparses_to_itself():
    experiment = parse_experiment({"name": "x", "trials": [{"name": "a", "epochs": 2}, {"name": "b", "compute": "resnet50"}],
                                   "repeats": 2, "order": "interleave"})
    again = parse_experiment(experiment.document)
    assert again.document == experiment.document and again.content_hash == experiment.content_hash


@pytest.mark.parametrize("text, words", [
    ("name: x\nmodez: [File]\n", ["bad.yaml", "modez", "did you mean 'modes'"]),
    ("name: x\nmodes: [File, Stream]\n", ["bad.yaml", "modes[1]", "FastFile"]),
    ("name: x\ntrials:\n  - name: t\n    epochs: 0\n", ["bad.yaml", "trials[0].epochs", "1..1000"]),
    ("name: x\nname: y\n", ["bad.yaml", "name", "twice"]),
    ("name: [unclosed\n", ["bad.yaml", "not valid YAML", "line"]),
    ("name: x\norder: shuffled\n", ["bad.yaml", "order", "interleave"]),
    ("name: x\ncompute: {preset: v100, model: resnet50}\n", ["compute", "either"]),
    ("name: x\nfsx_import_wait_minutes: -5\n", ["bad.yaml", "fsx_import_wait_minutes"]),
])
def test_experiment_file_errors_name_file_key_and_allowed_values(tmp_path, text, words):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = dslab("plan", "--experiment", str(path), "--outputs", str(tmp_path / "none.json"))
    assert result.returncode == 2
    for word in words:
        assert word in result.stderr, result.stderr


def test_order_options():
    base = {"datasets": [{"name": "a", "format": "jpg"}], "modes": ["File", "EFS"], "repeats": 2}
    from dslab.core.experiment import expand
    listed = [(j.mode, j.repeat) for j in expand(parse_experiment({**base, "order": "listed"}))]
    assert listed == [("File", 0), ("File", 1), ("EFS", 0), ("EFS", 1)]
    interleaved = [(j.mode, j.repeat) for j in expand(parse_experiment({**base, "order": "interleave"}))]
    assert interleaved == [("File", 0), ("EFS", 0), ("File", 1), ("EFS", 1)]
    shuffled = [(j.mode, j.repeat) for j in expand(parse_experiment({**base, "order": "random", "seed": 3}))]
    assert sorted(shuffled) == sorted(listed)
    assert shuffled == [(j.mode, j.repeat) for j in expand(parse_experiment({**base, "order": "random", "seed": 3}))]


# ---- estimate --------------------------------------------------------------------------------------

def test_vendored_copies_match():
    """The vendored files equal their recorded sha256: the copies of ../shared (contract, calibration) also equal
    ../shared where it is beside the checkout (a fresh clone checks the copies, a full checkout the drift); the public
    measurements (Bencher's 12 cells, Mountpoint's CI) name their source and date."""
    manifest = json.loads(VENDORED_MANIFEST.read_text())["files"]
    assert set(manifest) == {"results-record.schema.json", "bencher-measured.csv", "bencher-cells.csv",
                             "mountpoint-s3-ci.csv"}
    for name, entry in manifest.items():
        copy = VENDORED_MANIFEST.with_name(name)
        assert hashlib.sha256(copy.read_bytes()).hexdigest() == entry["sha256"], f"{copy} changed: update vendored.json"
        if "shared" in entry:
            shared = SHARED / entry["shared"]
            if shared.exists():
                assert shared.read_bytes() == copy.read_bytes(), f"{copy} differs from {shared}: copy it again"
        else:   # a public measurement: its source and date, in the manifest and in the file's own header
            assert entry["source"] and entry["date"], name
            header = [line for line in copy.read_text().splitlines() if line.startswith("#")]
            assert any("Source:" in line for line in header) and any("20" in line for line in header), name
    assert CALIBRATION_PATH == VENDORED_MANIFEST.with_name("bencher-measured.csv")
    from dslab.core.model.calibration import CELLS_PATH, MOUNTPOINT_PATH
    assert {CELLS_PATH.name, MOUNTPOINT_PATH.name} <= set(manifest)


def test_estimate_calibration():
    """In sample, on all 12 of Bencher's measured cells (the nine of ../shared's bencher-measured.csv and scenario C):
    within 10% MAPE, and the measured order of two modes wherever their repeats do not overlap (where they do, the
    measurement itself does not order them; the ranges are tests/test_calibration.py's)."""
    from dslab.core.model.calibration import measured_cells
    rate, _ = compute_rate("v100")
    prices = PriceTable()
    cells = measured_cells()
    assert len(cells) == 12 and {c.scenario for c in cells} == {"A", "B", "C", "D"}
    # The nine shared cells are the same measurements (their means, rounded there).
    shared = {(r["scenario"], r["mode"]): float(r["total_s"]) for r in calibration_cells()}
    assert len(shared) == 9
    for cell in cells:
        if (cell.scenario, cell.mode) in shared:
            assert cell.total == pytest.approx(shared[(cell.scenario, cell.mode)], abs=0.5)
    predicted = {c.label: estimate_mode(c.mode, c.shape, rate=rate, prices=prices).billable_seconds for c in cells}
    error = mape([(predicted[c.label], c.total) for c in cells])
    assert error < 10.0, f"MAPE {error:.1f}%"
    ordered = 0
    for a in cells:
        for b in cells:
            if a.scenario == b.scenario and a.total_max < b.total_min:
                assert predicted[a.label] < predicted[b.label], f"{a.label} measured below {b.label}"
                ordered += 1
    assert ordered >= 7


def test_estimate_extrapolates_to_millions_of_small_files():
    """The post's scenario C (1.5 M small files, 54 GB): FSx ~5,000 s, File downloads ~10,000 s, FastFile I/O-bound."""
    rate, _ = compute_rate("v100")
    shape = DatasetShape(files=1_530_350, bytes=54_000_000_000)
    est = {m: estimate_mode(m, shape, rate=rate, prices=PriceTable()) for m in ("File", "FastFile", "FSx")}
    assert 4000 < est["FSx"].billable_seconds < 6000
    assert 8000 < est["File"].downloading < 14000
    assert est["FastFile"].bound == "I/O"
    assert est["FSx"].billable_seconds < est["FastFile"].billable_seconds < est["File"].billable_seconds
    assert est["FSx"].fsx_provisioning_seconds == pytest.approx(1_530_350 / 2_000_000 * 3600, rel=0.01)


def test_estimate_command_json(tmp_path):
    result = dslab("estimate", "--files", "30607", "--bytes", "1.1GB", "--instance", "ml.p3.2xlarge", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    # Every source is estimated: the S3 modes (and the script's own reads) on both buckets, the lab's and S3 Express
    # One Zone; listed in the answer's order.
    by_source = {s["source"]: s["estimate"] for s in data["sources"]}
    assert set(by_source) == {"File", "FastFile", "Pipe", "FSx", "EFS", "Script", "Express File", "Express FastFile",
                              "Express Pipe", "Express Script"}
    assert all(e["staging_cost_usd"] > 0 for label, e in by_source.items() if label.startswith("Express"))
    # Script: nothing before the script, its listing and GETs inside the training time, requests priced.
    script = by_source["Script"]
    assert script["downloading"] == 0 and script["cost_usd"]["requests"] > 0
    assert any("lineage" in a for a in script["assumptions"])
    for e in by_source.values():
        assert set(e) >= {"mode", "downloading", "training", "other", "billable_seconds", "cost_usd", "assumptions"}
        assert e["billable_seconds"] == pytest.approx(e["downloading"] + e["training"] + e["other"], abs=0.5)
        assert e["cost_usd"]["instance"] == pytest.approx(3.825 * e["billable_seconds"] / 3600, rel=1e-3)
        assert e["assumptions"]
    # --mode and --storage choose the rows shown; the answer is the whole answer.
    one = dslab("estimate", "--files", "10", "--bytes", "1.1GB", "--mode", "fastfile").stdout.splitlines()
    assert [line.split()[1] for line in one[2:] if line[:3].strip().isdigit()] == ["FastFile"]
    express = dslab("estimate", "--files", "10", "--bytes", "1.1GB", "--mode", "fastfile", "--storage", "express").stdout
    assert [" ".join(line.split()[1:3]) for line in express.splitlines()[2:] if line[:3].strip().isdigit()] == \
        ["Express FastFile"]
    refused = dslab("estimate", "--files", "10", "--bytes", "1.1GB", "--mode", "fsx", "--storage", "express")
    assert refused.returncode == 2 and "--storage" in refused.stderr


@pytest.mark.parametrize("args, words", [
    (["--files", "10"], ["--files/--bytes"]),
    (["--files", "10", "--bytes", "1GB", "--mode", "Stream"], ["--mode", "FastFile"]),
    (["--files", "10", "--bytes", "lots"], ["--bytes"]),
    (["--files", "10", "--bytes", "1GB", "--instance", "ml.x9.huge"], ["--instance", "not a SageMaker training instance type"]),
    (["--files", "10", "--bytes", "1GB", "--instance", "ml.r5.large"], ["--instance", "price", "--prices"]),
    (["--files", "10", "--bytes", "1GB", "--compute-preset", "tpu"], ["--compute-preset", "v100"]),
])
def test_estimate_bad_input(args, words):
    result = dslab("estimate", *args)
    assert result.returncode == 2
    for word in words:
        assert word in result.stderr


def test_estimate_with_price_override(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("date: '2027-01-01'\ninstance_hourly:\n  ml.p3.2xlarge: 1.0\n")
    data = json.loads(dslab("estimate", "--files", "10", "--bytes", "1GB", "--prices", str(prices), "--json").stdout)
    e = data["sources"][0]["estimate"]
    assert e["cost_usd"]["instance"] == pytest.approx(e["billable_seconds"] / 3600, rel=1e-3)
    assert "2027-01-01" in data["question"]["prices"]
    prices.write_text("s3_gets: 1\n")
    result = dslab("estimate", "--files", "10", "--bytes", "1GB", "--prices", str(prices))
    assert result.returncode == 2 and "s3_gets" in result.stderr


# ---- recommend --------------------------------------------------------------------------------------

def _rec(files, size, **kwargs):
    rate, _ = compute_rate("v100")
    return recommend(DatasetShape(files=files, bytes=size), rate=rate, prices=PriceTable(), **kwargs)


def test_recommend_shows_the_posts_flowchart_beside_its_pick():
    assert _rec(1000, int(5e9), data_in_efs=True).mode == "EFS"
    assert _rec(1000, int(5e9), random_access=True).mode in ("File", "FSx", "EFS")
    small_shards = _rec(10, int(1.1e9))
    assert small_shards.flowchart_source == "File" and "small" in small_shards.flowchart[0]
    large_large = _rec(2000, int(400e9))
    assert large_large.mode == "FastFile" and "large files" in large_large.flowchart[0]
    # 400 GB does not fit the default 100 GB volume: priced on one sized for it (420 GB), refused on one asked too small.
    assert large_large.estimates["File"].volume_gb == 420 and "File" not in large_large.decision.blocked
    assert "File" in _rec(2000, int(400e9), volume_size_gb=100).decision.blocked
    large_small = _rec(1_530_350, int(54e9))
    assert large_small.mode == "FSx" and large_small.flowchart_source == "File"  # 54 GB is "small" to the post
    assert any("pack into ~150 MB shards" in a and "saves" in a for a in large_small.advice)
    small_files = _rec(30607, int(1.1e9))
    assert any("serialize" in step for step in small_files.flowchart)
    assert {e.mode for e in small_files.estimates.values()} == {"File", "FastFile", "Pipe", "FSx", "EFS", "Script"}


def test_recommend_command():
    result = dslab("recommend", "--files", "1530350", "--bytes", "54GB", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["mode"] == "FSx" and data["flowchart"]["steps"] and data["advice"] and len(data["sources"]) == 10
    assert data["storage"] == "standard" and data["fsx_express_break_even"]["crossover_epochs"] > 1
    assert data["runner_up"] and data["why"]
    text = dslab("recommend", "--files", "2000", "--bytes", "400GB")
    assert text.returncode == 0 and text.stdout.startswith("answer: FastFile, ")
    # One script for SageMaker, EC2 and EKS (or data that must stay put): SageMaker's channels and the
    # copies are ruled out, the flowchart ends on the script's own reads and says what it costs in lineage.
    portable = json.loads(dslab("recommend", "--files", "1530350", "--bytes", "54GB", "--portable-script", "--json").stdout)
    assert {r["source"] for r in portable["sources"] if not r["blocker"]} == {"Script", "FSx"}
    assert set(portable["blocked"]) == {"File", "FastFile", "Pipe", "EFS", "Express File", "Express FastFile",
                                        "Express Pipe", "Express Script"}
    assert portable["flowchart"]["source"] == "Script" and "lineage" in portable["flowchart"]["steps"][0]
    assert dslab("recommend", "--experiment", "experiments/local.yaml", "--portable-script").returncode == 2


# ---- report -----------------------------------------------------------------------------------------

T0 = dt.datetime(2026, 11, 1, 10, 0, tzinfo=dt.timezone.utc)


def _describe(name, mode, status="Completed", *, downloading=40, training=100, uploading=5, count=1, spot=False,
              billable=None, failure=None, instance="ml.p3.2xlarge", dataset="caltech-jpg-1x", channel_input=None):
    at = T0
    transitions = []

    def phase(status_name, seconds):
        nonlocal at
        transitions.append({"Status": status_name, "StartTime": at.isoformat(), "EndTime": (at + dt.timedelta(seconds=seconds)).isoformat(),
                            "StatusMessage": ""})
        at += dt.timedelta(seconds=seconds)

    phase("Starting", 60)
    start = at
    if downloading:
        phase("Downloading", downloading)
    phase("Training", training)
    if status == "Completed":
        phase("Uploading", uploading)
    transitions.append({"Status": status, "StartTime": at.isoformat(), "EndTime": at.isoformat(), "StatusMessage": ""})
    seconds = int((at - start).total_seconds())
    if mode in ("FSx", "EFS"):
        source = {"FileSystemDataSource": {"FileSystemId": "fs-0123456789abcdef0", "FileSystemType": "FSxLustre" if mode == "FSx" else "EFS",
                                           "DirectoryPath": f"/abc/datasets/{dataset}", "FileSystemAccessMode": "ro"}}
        input_mode = "File"
    else:
        source = {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://b/datasets/{dataset}/", "S3DataDistributionType": "FullyReplicated"}}
        input_mode = mode
    out = {"TrainingJobName": name, "TrainingJobStatus": status, "SecondaryStatus": status,
           "AlgorithmSpecification": {"TrainingImage": "x", "TrainingInputMode": "File"},
           "InputDataConfig": [{"ChannelName": "train", "InputMode": channel_input or input_mode, "DataSource": source}],
           "ResourceConfig": {"InstanceType": instance, "InstanceCount": count, "VolumeSizeInGB": 100},
           "SecondaryStatusTransitions": transitions, "TrainingStartTime": start.isoformat(), "TrainingEndTime": at.isoformat(),
           # BillableTimeInSeconds is one instance's wall clock (API reference), less any spot saving.
           "TrainingTimeInSeconds": seconds, "BillableTimeInSeconds": billable if billable is not None else seconds,
           "EnableManagedSpotTraining": spot, "HyperParameters": {"epochs": "1"},
           "FinalMetricDataList": [{"MetricName": "samples_per_second", "Value": 300.0, "Timestamp": at.isoformat()},
                                   {"MetricName": "au_percent", "Value": 96.5, "Timestamp": at.isoformat()}]}
    if failure:
        out["FailureReason"] = failure
    return out


@pytest.fixture
def describe_dir(tmp_path):
    d = tmp_path / "describes"
    d.mkdir()
    jobs = [
        _describe("job-file", "File"),
        _describe("job-fastfile", "FastFile", downloading=15),
        _describe("job-failed", "Pipe", status="Failed", downloading=0, training=30, failure="AlgorithmError: bad record"),
        _describe("job-stopped", "EFS", status="Stopped", downloading=0, training=50),
        _describe("job-spot", "FSx", downloading=0, spot=True, billable=50),
        _describe("job-multi", "File", count=2, dataset="caltech-tfr-1x"),
    ]
    for job in jobs:
        (d / f"{job['TrainingJobName']}.json").write_text(json.dumps(job))
    return d


def test_report_from_recorded_describe_outputs_number_by_number(describe_dir, tmp_path):
    out = tmp_path / "report"
    result = dslab("report", "--describe-json", str(describe_dir), "--out", str(out))
    assert result.returncode == 0, result.stderr
    results = json.loads((out / "results.json").read_text())
    validate_results(results)
    records = {r["job_name"]: r for r in results["records"]}
    completed = records["job-file"]
    assert completed["mode"] == "File" and completed["dataset"] == "caltech-jpg-1x"
    assert completed["billable_seconds"] == 145.0 and completed["breakdown"] == {"downloading": 40.0, "training": 100.0, "other": 5.0}
    assert completed["phases"] == {"Starting": 60.0, "Downloading": 40.0, "Training": 100.0, "Uploading": 5.0, "Completed": 0.0}
    assert completed["cost_usd"]["instance"] == pytest.approx(3.825 * 145 / 3600, abs=1e-6)
    assert completed["metrics"]["samples_per_second"] == 300.0 and completed["metrics"]["au_percent"] == 96.5
    assert records["job-fastfile"]["mode"] == "FastFile"
    failed = records["job-failed"]
    assert failed["status"] == "Failed" and failed["failure_reason"] == "AlgorithmError: bad record" and failed["mode"] == "Pipe"
    assert failed["billable_seconds"] == 30.0
    assert records["job-stopped"]["status"] == "Stopped" and records["job-stopped"]["mode"] == "EFS"
    spot = records["job-spot"]
    # Spot: billable (50 s) is less than the 105 s trained (training 100 + uploading 5): the phases stay the wall
    # seconds, never squeezed to the billable time; the saving is 1 - 50 / 105 = 52.4%, priced at 50 s.
    assert spot["billable_seconds"] == 50.0 and spot["training_time_seconds"] == 105.0
    assert spot["breakdown"] == {"downloading": 0.0, "training": 100.0, "other": 5.0}
    assert spot["cost_usd"]["instance"] == pytest.approx(3.825 * 50 / 3600, abs=1e-6)
    assert spot["mode"] == "FSx" and spot["cost_usd"]["storage"] > 0
    multi = records["job-multi"]
    # Two instances, each 145 s (BillableTimeInSeconds is one instance's): the phases are one instance's, and the
    # instances cost 145 s x 2 x $3.825/h = $0.308125.
    assert multi["instance_count"] == 2 and multi["billable_seconds"] == 145.0
    assert multi["breakdown"] == {"downloading": 40.0, "training": 100.0, "other": 5.0}
    assert multi["cost_usd"]["instance"] == pytest.approx(0.308125, abs=1e-6)
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 6 and {r["job_name"] for r in rows} == set(records)
    md = (out / "report.md").read_text()
    assert "6 jobs: 4 completed, 2 failed" in md
    assert "| caltech-jpg-1x | File |" in md and "AlgorithmError: bad record" in md
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "<table>" in html
    assert "src='http" not in html and 'src="http' not in html  # self-contained: nothing fetched
    assert (out / "breakdown.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_is_a_real_png_with_the_expected_bars(describe_dir, tmp_path):
    results = results_from_describe_dir(describe_dir, PriceTable())
    rows = aggregate(results["records"])
    drawn = breakdown_chart(rows, tmp_path / "chart.png", "test")
    expected = {(r["dataset"], r["mode"]) for r in results["records"] if r["status"] == "Completed"}
    assert {(b["dataset"], b["mode"]) for b in drawn["bars"]} == expected
    heights = {(b["dataset"], b["mode"]): b["height"] for b in drawn["bars"]}
    assert heights[("caltech-jpg-1x", "File")] == pytest.approx(145.0)
    image = Image.open(tmp_path / "chart.png")
    assert image.format == "PNG" and image.size[0] > 400
    import numpy as np
    colours = {tuple(p) for p in np.asarray(image.convert("RGB")).reshape(-1, 3).tolist()}
    for colour in ((0x4C, 0x72, 0xB0), (0x55, 0xA8, 0x68), (0xC4, 0x4E, 0x52)):  # downloading, training, other
        assert colour in colours


def test_repeats_mean_spread_and_disagreement_flag(tmp_path):
    prices = PriceTable()
    from dslab.core.results import record_from_describe
    records = [record_from_describe(_describe(f"r{i}", "File", training=t), prices=prices, repeat=i)
               for i, t in enumerate((100, 102, 140))]
    records += [record_from_describe(_describe(f"s{i}", "FastFile", training=t), prices=prices, repeat=i)
                for i, t in enumerate((100, 101))]
    rows = {r["mode"]: r for r in aggregate(records)}
    assert rows["File"]["billable_mean"] == pytest.approx((145 + 147 + 185) / 3)
    assert rows["File"]["billable_spread"] == 40 and rows["File"]["disagree"] is True
    assert rows["FastFile"]["disagree"] is False
    results = {"experiment": {"name": "rep"}, "backend": "aws", "records": records}
    paths = write_report(results, tmp_path / "out")
    assert "repeats disagree >5%" in paths["report.md"].read_text()


def _answer_block(report: str) -> str:
    return report.split("## Answer", 1)[1].split("## The run", 1)[0]


def test_one_run_has_no_measured_spread_and_the_answer_says_so(tmp_path):
    """Issue 28: a single run showed "±0.0" as its spread, and local picks flipped between identical runs."""
    prices = PriceTable()
    from dslab.core.results import record_from_describe
    records = [record_from_describe(_describe("f", "File", training=100), prices=prices),
               record_from_describe(_describe("ff", "FastFile", downloading=0, training=150), prices=prices)]
    report = write_report({"experiment": {"name": "one"}, "backend": "aws", "records": records},
                          tmp_path / "out")["report.md"].read_text()
    assert "±" not in report
    assert report.count("| n/a (one run) |") == 2
    assert ("Precision: one run each, so how far File and FastFile spread from run to run is not measured (n/a): "
            "run `repeats: 3` (or --repeats 3) to know whether the pick holds.") in _answer_block(report)


def test_three_runs_show_mean_min_max_and_a_95_percent_interval_and_whether_they_separate_the_pick(tmp_path):
    prices = PriceTable()
    from dslab.core.results import record_from_describe

    def runs(mode, trainings, downloading=40):
        return [record_from_describe(_describe(f"{mode}-{i}", mode, training=t, downloading=downloading), prices=prices,
                                     repeat=i) for i, t in enumerate(trainings)]

    def answer(records):
        report = write_report({"experiment": {"name": "three"}, "backend": "aws", "records": records},
                              tmp_path / f"out-{len(records)}-{records[-1]['job_name']}")["report.md"].read_text()
        return report, _answer_block(report)

    # File billable 145, 147, 185 s (60 s starting is not billed: downloading 40 + training + uploading 5).
    report, text = answer(runs("File", (100, 102, 140)) + runs("FastFile", (150, 151, 152), downloading=0))
    # mean 159, sample standard deviation 22.54; t(0.975, 2 df) = 4.303: 159 ± 4.303 x 22.54 / sqrt(3) = ± 56.0
    assert "| caltech-jpg-1x | File | 3/3 |" in report
    assert "| 159.0 | min–max 145.0–185.0; 95% CI 159.0 ± 56.0 ⚠ repeats disagree >5% |" in report
    assert "| 156.0 | min–max 155.0–157.0; 95% CI 156.0 ± 2.5 |" in report   # FastFile 155, 156, 157 s
    assert "Precision: within noise: FastFile and File overlap" in text and "the 95% intervals of their means" in text
    assert "run `repeats: 5` to separate them." in text                       # MLPerf Storage's 5 runs
    # Runs that land far apart separate the pick from the runner-up, and the answer says so.
    report, text = answer(runs("File", (100, 101, 102)) + runs("FastFile", (300, 301, 302), downloading=0))
    assert "Pick: File" in text and "Precision: the runs separate File and FastFile (" in text
    assert "within noise" not in text
    # Two runs: their min-max, and three runs to separate them.
    report, text = answer(runs("File", (100, 110)) + runs("FastFile", (150, 152), downloading=0))
    assert "| min–max 145.0–155.0 ⚠ repeats disagree >5% |" in report and "| min–max 155.0–157.0 |" in report
    assert "the runs' min–max" in text and "run `repeats: 3` to separate them." in text


def test_local_report_says_so(tmp_path):
    prices = PriceTable()
    from dslab.core.results import record_from_describe
    results = {"experiment": {"name": "l"}, "backend": "local", "records": [record_from_describe(_describe("a", "File"), prices=prices)]}
    text = write_report(results, tmp_path / "o")["report.md"].read_text()
    assert "LOCAL run" in text and "not AWS" in text


def test_report_bad_input(tmp_path):
    assert dslab("report", "--out", str(tmp_path / "o")).returncode == 2
    (tmp_path / "r.json").write_text(json.dumps({"experiment": {}, "backend": "cloud", "records": []}))
    result = dslab("report", "--results", str(tmp_path / "r.json"), "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and "backend" in result.stderr
    (tmp_path / "d").mkdir()
    result = dslab("report", "--describe-json", str(tmp_path / "d"), "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and "--describe-json" in result.stderr


# ---- plan / run / status / fsx ------------------------------------------------------------------------

OUTPUTS = {
    "DataSourceLab-Core": {"BucketName": "datasourcelab-data-123456789012-us-east-1", "SubnetId": "subnet-0123456789abcdef0",
                           "TrainingSecurityGroupId": "sg-0123456789abcdef0", "EfsFileSystemId": "fs-0fedcba9876543210",
                           "TrainingRoleArn": "arn:aws:iam::123456789012:role/Training", "TrainingCodeVersion": "abc",
                           "TrainingCodeUri": "s3://cdk-hnb659fds-assets-123456789012-us-east-1/abc.tar.gz"},
    "DataSourceLab-Fsx": {"FsxFileSystemId": "fs-0123456789abcdef1", "FsxMountName": "mnt1234"},
    "DataSourceLab": {"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:W",
                      "TrainingImageUri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312",
                      "TrainingImageUriCpu": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-cpu-py312"},
}


def test_plan_prints_exact_requests_from_outputs_file(tmp_path):
    outputs = tmp_path / "cdk-outputs.json"
    outputs.write_text(json.dumps(OUTPUTS))
    result = dslab("plan", "--experiment", str(REPO / "experiments/post-12-jobs.yaml"), "--outputs", str(outputs), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert len(data["jobs"]) == 12
    from dslab.aws.validation import validate_request
    for job in data["jobs"]:
        validate_request("sagemaker", "CreateTrainingJob", job["request"])
    fsx = next(j for j in data["jobs"] if j["mode"] == "FSx")
    assert fsx["request"]["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]["DirectoryPath"].startswith("/mnt1234/datasets/")
    down = {k: v for k, v in OUTPUTS.items() if k != "DataSourceLab-Fsx"}
    outputs.write_text(json.dumps(down))
    skipped = json.loads(dslab("plan", "--experiment", str(REPO / "experiments/post-12-jobs.yaml"), "--outputs", str(outputs), "--json").stdout)
    assert sum(1 for j in skipped["jobs"] if j["skip_reason"]) == 4
    text = dslab("plan", "--experiment", str(REPO / "experiments/smoke.yaml"), "--outputs", str(outputs))
    assert text.returncode == 0 and "2 jobs" in text.stdout


def test_aws_commands_without_credentials_say_what_to_do(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none"),
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1"})
    for args in (["plan", "--experiment", str(REPO / "experiments/smoke.yaml")], ["status"], ["fsx", "status"],
                 ["run", "--experiment", str(REPO / "experiments/smoke.yaml")]):
        result = dslab(*args, env=env)
        assert result.returncode == 2, (args, result.stderr)
        assert "credentials" in (result.stderr + result.stdout).lower()
        assert "Traceback" not in result.stderr


def test_report_flags_a_slow_first_batch_and_ranks_by_cost_not_au(tmp_path):
    """A job whose first batch took >10% of its epoch is flagged (AU leaves the first step out), and
    modes are ranked by cost, then billable time: a cheaper mode ranks first even with a lower AU."""
    prices = PriceTable()
    from dslab.core.results import record_from_describe
    pipe = record_from_describe(_describe("p", "Pipe", downloading=0, training=100), prices=prices,
                                script_metrics={"samples_per_second": 118.0, "au_percent": 97.0,
                                                "end_to_end_efficiency_percent": 35.0,
                                                "time_to_first_batch_seconds": 5.3, "epoch_seconds": [8.5]})
    file = record_from_describe(_describe("f", "File", downloading=10, training=60), prices=prices,
                                script_metrics={"samples_per_second": 328.0, "au_percent": 90.0,
                                                "end_to_end_efficiency_percent": 88.0,
                                                "time_to_first_batch_seconds": 0.2, "epoch_seconds": [3.0]})
    assert pipe["metrics"]["end_to_end_efficiency_percent"] == 35.0
    rows = {r["mode"]: r for r in aggregate([pipe, file])}
    assert rows["Pipe"]["slow_first_batch"] is True and rows["File"]["slow_first_batch"] is False
    text = write_report({"experiment": {"name": "honest"}, "backend": "aws", "records": [pipe, file]},
                        tmp_path / "o")["report.md"].read_text()
    assert "⚠ >10% of the epoch" in text and "## Ranking by cost to a result" in text
    assert "| caltech-jpg-1x | 1 | File |" in text and "| caltech-jpg-1x | 2 | Pipe |" in text  # AU would say Pipe
    assert "**Pick: File**" in text


def test_an_experiment_over_max_jobs_is_refused_before_any_request():
    from dslab.core.errors import ConfigError
    from dslab.core.facts.limits import MAX_JOBS
    from dslab.core.requests import plan

    from .helpers import lab_environment
    experiment = parse_experiment({"name": "huge", "repeats": 11})   # 4 datasets x 5 modes x 11 = 220
    with pytest.raises(ConfigError) as caught:
        plan(experiment, lab_environment(), "exec")
    assert f"at most {MAX_JOBS}" in str(caught.value) and "repeats" in str(caught.value)


def test_stats_write_needs_an_s3_prefix(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"x")
    result = dslab("dataset", "stats", str(tmp_path), "--write")
    assert result.returncode == 2 and "--write" in result.stderr and "s3://" in result.stderr
