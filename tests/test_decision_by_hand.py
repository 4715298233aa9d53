"""The decision's rules (dslab/core/answer/decision.py) on inputs where each binds, every figure worked out by hand in
a comment (issue 58). Prices are set to round numbers so the arithmetic can be read: at 730 hours a month (AWS's
GB-month), $0.73 per GB-month is $0.001 per GB-hour."""

from __future__ import annotations

import pytest

from dslab.core.answer.decision import (
    Option, Setup, decide, duration, estimates_noise, noise, option_from_measured, portability_blocker,
    random_access_blocker, required_saving, setup_cost, setup_phrase, usd, usd_difference, weighed, within_error,
)
from dslab.core.answer import decision
from dslab.core.errors import ConfigError
from dslab.core.facts.prices import PriceTable
from dslab.core.shape import DatasetShape

PRICES = PriceTable.with_overrides({
    "datasync_per_gb": 0.01, "express_gb_month": 0.73, "efs_standard_gb_month": 0.73, "fsx_scratch2_gb_month": 0.73,
    "express_put_per_thousand": 1.0, "express_upload_per_gb": 0.01, "s3_get_per_million": 1.0})
SHAPE = DatasetShape(files=10_000, bytes=10_000_000_000)   # 10 GB in 10,000 files
# DataSync: 120 s to start + 10,000 files / 500 a second + 10,000 MB / 104.9 MB/s (EFS Bursting) = 235.3289 s;
# $0.01 a GB x 10 GB = $0.10.
DATASYNC_SECONDS = 120 + 20 + 10_000 / 104.9


def test_efs_pays_the_copy_in_and_its_storage_until_the_job_ends():
    setup = setup_cost("EFS", None, SHAPE, PRICES, job_seconds=3600)
    assert setup.seconds == pytest.approx(DATASYNC_SECONDS)                      # 235.33 s
    # $0.10 + 10 GB x $0.001 a GB-hour x (235.33 + 3,600 s) / 3,600 = $0.10 + $0.010654 = $0.110654
    assert setup.usd == pytest.approx(0.10 + 0.01 * (DATASYNC_SECONDS + 3600) / 3600, rel=1e-12)
    assert setup.usd == pytest.approx(0.110654, abs=1e-6)
    assert setup.what == "a DataSync copy of 10.00 GB into EFS and its storage"


def test_fsx_pays_its_uptime_while_it_imports_the_metadata():
    # 10,000 objects at 2,000,000 an hour = 18 s; 2,400 GiB x $0.001 a GiB-hour = $2.40/h; 18 s of it = $0.012.
    setup = setup_cost("FSx", None, SHAPE, PRICES, fsx_capacity_gib=2400)
    assert (setup.seconds, setup.usd) == (pytest.approx(18.0), pytest.approx(0.012))
    assert setup.what == "FSx uptime while it imports 10,000 objects' metadata"
    # The default capacity is the lab's: 1,200 GiB, $1.20/h, 18 s = $0.006.
    assert setup_cost("FSx", None, SHAPE, PRICES).usd == pytest.approx(0.006)

    class Provisioned:   # the file system the estimate priced: its own hourly price
        def hourly(self, prices):
            return 3.6
    # $3.60/h for 18 s = $0.018, whatever fsx_capacity_gib says.
    assert setup_cost("FSx", None, SHAPE, PRICES, fsx_capacity_gib=2400, fsx=Provisioned()).usd == pytest.approx(0.018)


def test_express_pays_its_staging_copy_and_the_directory_buckets_storage_meanwhile():
    # Priced here: 10,000 COPYs at $1.00 a thousand = $10 + 10 GB uploaded at $0.01 = $0.10 + 10,000 GETs at $1.00 a
    # million = $0.01: $10.11, and no seconds known, so nothing stored meanwhile.
    setup = setup_cost("FastFile", "express", SHAPE, PRICES)
    assert (setup.usd, setup.seconds) == (pytest.approx(10.11), 0.0)
    assert setup.what == "the staging copy of 10,000 objects into the directory bucket"
    # The estimate's copy (600 s, $2.00): 10 GB x $0.001 a GB-hour x 600 / 3,600 = $0.001667 stored meanwhile.
    staged = setup_cost("File", "express", SHAPE, PRICES, express_staging=(600.0, 2.0))
    assert (staged.seconds, staged.usd) == (600.0, pytest.approx(2.0 + 0.01 / 6))


def test_data_already_in_efs_makes_every_other_source_copy_it_out():
    home = setup_cost("EFS", None, SHAPE, PRICES, data_in_efs=True)
    assert (home.usd, home.seconds, home.what) == (0.0, 0.0, "none: the data already lives in EFS")
    for mode, storage in (("File", None), ("FSx", None), ("FastFile", "express")):
        out = setup_cost(mode, storage, SHAPE, PRICES, data_in_efs=True)
        # The DataSync copy out alone: $0.10 in 235.33 s, no storage (the data stays home).
        assert (out.usd, out.seconds) == (pytest.approx(0.10), pytest.approx(DATASYNC_SECONDS))
        assert out.what == "a DataSync copy of 10.00 GB from EFS to S3"


def test_the_s3_channels_and_a_script_set_up_nothing():
    for mode in ("File", "FastFile", "Pipe", "Script"):
        assert setup_cost(mode, None, SHAPE, PRICES, job_seconds=3600) == Setup(0.0, 0.0, "none")
        assert setup_cost(mode, "standard", SHAPE, PRICES) == Setup(0.0, 0.0, "none")


def _option(mode="File", storage="standard", job_usd=1.0, setup=(0.0, 0.0), *, measured=True, interval=None,
            data_in_efs=False, runs=0, blocker=None, seconds=100.0) -> Option:
    return Option(mode=mode, storage=storage, job_usd=job_usd, setup=Setup(setup[0], setup[1], "a copy"),
                  job_seconds=seconds, measured=measured, blocker=blocker, data_in_efs=data_in_efs, runs=runs,
                  job_usd_interval=interval)


def test_what_each_source_asks_and_the_margin_it_must_save():
    cases = {
        ("File", "standard", False): (None, 0.0),
        ("FastFile", "standard", False): (None, 0.0),
        ("FastFile", "express", False): ("a directory bucket and a staging copy", 0.1),
        ("FSx", "standard", False): ("an FSx file system", 0.1),
        ("EFS", "standard", False): ("a copy of the dataset in EFS", 0.1),
        ("Pipe", "standard", False): ("a script that reads a stream (Pipe)", 0.1),
        ("Pipe", "express", False): ("a directory bucket and a staging copy and a script that reads a stream (Pipe)", 0.1),
        ("Script", "standard", False): ("a script that reads S3 itself", 0.1),
        ("File", "standard", True): ("a copy of the dataset out of EFS", 0.1),
        ("Script", "standard", True): ("a copy of the dataset out of EFS and a script that reads S3 itself", 0.1),
        ("EFS", "standard", True): (None, 0.0),
    }
    for (mode, storage, in_efs), (needs, margin) in cases.items():
        option = _option(mode, storage, data_in_efs=in_efs)
        assert (option.needs, option.margin) == (needs, margin), (mode, storage, in_efs)


def test_an_estimate_without_a_measured_cell_is_weighed_at_the_top_of_its_range():
    # Job $1.20 in $1.00-$1.50, set-up $0.10: cost $1.30, range $1.10-$1.60.
    estimate = _option("Pipe", job_usd=1.2, setup=(0.1, 60.0), measured=False, interval=(1.0, 1.5))
    assert (estimate.cost_usd, estimate.cost_interval) == (pytest.approx(1.3), (pytest.approx(1.1), pytest.approx(1.6)))
    assert estimate.seconds == 160.0                       # 60 s set-up + 100 s job
    assert estimate.pick_usd == pytest.approx(1.6)         # the top
    assert weighed(estimate) == pytest.approx(1.6 / 0.9)   # and Pipe's 10% on top: $1.7778
    measured = _option("FSx", job_usd=1.2, setup=(0.1, 0.0), measured=True, interval=(1.0, 1.5))
    assert measured.pick_usd == pytest.approx(1.3)         # a measured cell: its point
    home = _option("EFS", job_usd=1.2, setup=(0.0, 0.0), measured=False, interval=(1.0, 1.5), data_in_efs=True)
    assert home.pick_usd == pytest.approx(1.2) and weighed(home) == pytest.approx(1.2)
    assert _option(interval=None, measured=False).pick_usd == 1.0   # no range: its point
    # A range whose top is under its point (a measured run's mean over two runs) never lowers it.
    assert _option("Pipe", job_usd=1.2, measured=False, interval=(1.0, 1.1)).pick_usd == pytest.approx(1.2)


def test_a_source_that_asks_something_must_save_its_margin():
    file = _option("File", job_usd=1.00)
    # FSx 5% cheaper: $0.95 / 0.9 = $1.0556 weighed, above File's $1.00: File is picked, FSx passed over.
    d = decide([file, _option("FSx", job_usd=0.95)])
    assert d.pick.source == "File" and d.runner_up.source == "FSx"
    # (A saving under $0.10 is shown to two significant figures: $0.050.)
    assert d.passed_over == {"FSx": "passed over: 5.0% ($0.050) cheaper than File, less than the 10% it must save "
                                    "against it (10%: it needs an FSx file system)"}
    assert d.why == ("the lowest cost to a result ($1.00 per run, nothing to set up) once each cheaper source's cost is "
                     "weighed by what it asks")
    assert [o.source for o in d.ranking] == ["File", "FSx"]
    # 11% cheaper: $0.89 / 0.9 = $0.9889 weighed, under $1.00: FSx is picked.
    d = decide([file, _option("FSx", job_usd=0.89)])
    assert d.pick.source == "FSx" and not d.passed_over
    assert d.why == "the cheapest to a result ($0.89 per run, nothing to set up), and it clears what it asks " \
                    "(10%: it needs an FSx file system)"
    assert required_saving(_option("FSx", job_usd=0.9), file) == pytest.approx(0.1)   # 1 - 1.00 x 0.9 / 1.00
    # Pipe without a cell, point $0.80, top $0.95: it must save 1 - 1.00 x 0.9 / (0.95 / 0.80) = 24.2%.
    pipe = _option("Pipe", job_usd=0.8, measured=False, interval=(0.7, 0.95))
    assert required_saving(pipe, file) == pytest.approx(1 - 0.9 / (0.95 / 0.8))
    assert required_saving(pipe, _option(job_usd=0.0)) == 0.0


def test_the_pick_passed_over_lines_name_the_picks_own_weighing():
    fsx = _option("FSx", job_usd=0.80)                     # weighed $0.80 / 0.9 = $0.8889
    pipe = _option("Pipe", job_usd=0.78, measured=False, interval=(0.7, 0.82))   # weighed $0.82 / 0.9 = $0.9111
    d = decide([fsx, pipe, _option("File", job_usd=1.0)])
    assert d.pick.source == "FSx"
    assert d.passed_over["Pipe"] == (
        "passed over: 2.5% ($0.020) cheaper than FSx, less than the 5% it must save against it (10%: it needs a script "
        "that reads a stream (Pipe); no measured cell: weighed at the top of its range, $0.82 (+5%); against FSx weighed "
        "at $0.89)")
    # Pipe's top over its point: 0.82 / 0.78 = 1.05128. It must save 1 - $0.8889 x 0.9 / 1.05128 / $0.80
    # = 1 - 0.95122 = 4.88%, shown as 5%; it saves 2.5%.
    assert required_saving(pipe, fsx) == pytest.approx(1 - (0.8 / 0.9) * 0.9 / (0.82 / 0.78) / 0.8)


def test_ties_at_three_figures_go_to_the_lighter_bar_then_the_quicker():
    a = _option("File", job_usd=1.0004, seconds=200.0)
    b = _option("FastFile", job_usd=1.0001, seconds=100.0)
    d = decide([a, b])
    assert d.pick.source == "FastFile"   # $1.00 each at three figures; same bar; quicker
    c = _option("FSx", job_usd=0.9, setup=(0.0999, 0.0))   # $0.9999, a 10% bar
    assert decide([c, a]).ranking[0].source == "File"


def test_nothing_that_can_serve_is_a_clear_error():
    with pytest.raises(ConfigError) as refused:
        decide([_option("Pipe", blocker="it reads a stream"), _option("EFS", blocker="no EFS")])
    assert refused.value.field == "data source"
    assert str(refused.value).endswith("none can serve this dataset: Pipe: it reads a stream; EFS: no EFS")
    d = decide([_option("Pipe", blocker="it reads a stream"), _option("File")])
    assert d.blocked == {"Pipe": "it reads a stream"} and [o.source for o in d.ranking] == ["File"]
    assert d.runner_up is None


def test_overlapping_ranges_are_within_the_models_error():
    pick = _option("FSx", job_usd=1.0, measured=False, interval=(0.9, 1.1))
    near = _option("EFS", job_usd=1.3, measured=False, interval=(1.1, 1.5))      # touches $1.10
    far = _option("Pipe", job_usd=2.0, measured=False, interval=(1.2, 2.5))
    runs = _option("File", job_usd=1.0, runs=3, interval=(0.95, 1.05))           # measured runs: not an estimate
    assert within_error(pick, [pick, near, far, runs]) == [near]
    assert estimates_noise(pick, [near]) == ("within the model's error: FSx $0.90-$1.10 per run overlaps EFS "
                                             "$1.10-$1.50: a measured run separates them (`dslab run`, or `dslab local`, "
                                             "with `repeats: 3`)")
    assert estimates_noise(pick, []) == "the estimates' ranges separate FSx $0.90-$1.10 per run from every other source"
    assert within_error(runs, [runs, near]) == [] and estimates_noise(runs, [near]) is None
    many = [_option(m, job_usd=1.0, measured=False, interval=(0.95, 1.05)) for m in ("File", "EFS", "Pipe", "Script", "FastFile")]
    assert estimates_noise(pick, many).endswith("Script $0.95-$1.05 and 1 more: a measured run separates them "
                                                "(`dslab run`, or `dslab local`, with `repeats: 3`)")


def test_measured_runs_say_whether_their_spread_separates_the_pick():
    one = _option("File", job_usd=1.0, runs=1, interval=(1.0, 1.0))
    assert noise(one, _option("FSx", runs=1, interval=(1.2, 1.2))).startswith("one run each, so how far File and FSx")
    assert noise(one, None) is None and noise(_option("File"), _option("FSx")) is None   # estimates
    # Two runs each: the min-max; FSx's $1.0 x (1/0.9) = $1.111 at its low end is above File's $1.05: separated.
    two = _option("File", job_usd=1.0, runs=2, interval=(0.95, 1.05))
    assert noise(two, _option("FSx", job_usd=1.2, runs=2, interval=(1.0, 1.4))) == (
        "the runs separate File and FSx (File $0.9500–$1.050, FSx $1.000–$1.400 per run, the runs' min–max)")
    # FSx's $0.92 / 0.9 = $1.022 is under File's $1.05: within noise; with two runs, three separate them.
    overlap = _option("FSx", job_usd=1.0, runs=2, interval=(0.92, 1.3))
    assert noise(two, overlap).endswith("run `repeats: 3` to separate them")
    assert "the runs' min–max" in noise(two, overlap)
    three = _option("File", job_usd=1.0, runs=3, interval=(0.95, 1.05))
    assert noise(three, _option("FSx", runs=3, interval=(0.92, 1.3))).endswith("the 95% intervals of their means): "
                                                                                "run `repeats: 5` to separate them")
    five = _option("File", job_usd=1.0, runs=5, interval=(0.95, 1.05))
    assert noise(five, _option("FSx", runs=6, interval=(0.92, 1.3))).endswith("run `repeats: 10` to separate them")


def test_dollars_and_lengths_as_a_reader_compares_them():
    assert [usd(v) for v in (0.1, 1234.5, 0.0, -2.0, 0.05, 0.0123, 0.00012, 0.00005)] == [
        "$0.10", "$1,234.50", "$0.00", "$-2.00", "$0.050", "$0.012", "$0.00012", "<$0.0001"]
    assert [usd_difference(v) for v in (0.2, -0.04, 0.0)] == ["+$0.20", "-$0.040", "+$0.00"]
    assert [duration(v) for v in (None, 45, 119.4, 120, 7199, 7200, 33480)] == [
        "-", "45 s", "119 s", "2 min", "120 min", "2.0 h", "9.3 h"]
    assert [decision._usd4(v) for v in (1.23456, 12.3456, 0.012345, 0.0)] == ["$1.235", "$12.35", "$0.01235", "$0.00"]
    assert setup_phrase(_option(setup=(0.0, 0.0))) == "nothing to set up"
    assert setup_phrase(_option(setup=(0.25, 0.0))) == "$0.25 of it set-up: a copy"
    assert setup_phrase(_option(setup=(0.0, 30.0))) == "$0.00 of it set-up: a copy"


def test_a_measured_row_is_priced_from_its_shape_and_clocked_as_measured():
    # FSx, 2 runs at $1.00 mean: its import at 2,400 GiB ($0.012 in 18 s, as above), the set-up clocked at 30 s here.
    option = option_from_measured("FSx", None, 1.0, 100.0, SHAPE, PRICES, fsx_capacity_gib=2400, setup_time=30.0,
                                  runs=2, job_usd_interval=(0.9, 1.1))
    assert (option.storage, option.measured, option.runs) == ("standard", True, 2)
    assert (option.setup.usd, option.setup.seconds) == (pytest.approx(0.012), 30.0)
    assert option.cost_interval == (pytest.approx(0.912), pytest.approx(1.112))
    assert option_from_measured("FSx", None, 1.0, 100.0, SHAPE, PRICES, setup_time=True).setup.seconds == pytest.approx(18.0)
    assert option_from_measured("FSx", None, 1.0, 100.0, SHAPE, PRICES, setup_time=False).setup.seconds == 0.0
    unknown = option_from_measured("EFS", "standard", 1.0, 100.0, None, PRICES)
    assert unknown.setup == Setup(0.0, 0.0, "not priced: the dataset's size is unknown")
    # EFS measured with the data in EFS: no copy in.
    assert option_from_measured("EFS", None, 1.0, 100.0, SHAPE, PRICES, data_in_efs=True).setup.usd == 0.0


def test_what_a_random_reader_or_a_portable_script_rules_out():
    for mode in ("FastFile", "Pipe", "Script"):
        assert random_access_blocker(mode) == (f"{mode} streams from S3: random reads would each be a request (the "
                                               "post: FSx for random access)")
    assert [random_access_blocker(m) for m in ("File", "FSx", "EFS")] == [None, None, None]
    for mode in ("File", "FastFile", "Pipe"):
        assert portability_blocker(mode) == (f"{mode} is a SageMaker channel: the same script on EC2 or EKS has no "
                                             "/opt/ml/input/data (read S3 in the script, or mount FSx/EFS)")
    assert [portability_blocker(m) for m in ("Script", "FSx", "EFS")] == [None, None, None]


def test_the_decisions_record_names_each_sources_part():
    d = decide([_option("File", job_usd=1.0), _option("FSx", job_usd=0.95, setup=(0.012, 18.0), interval=(0.9, 1.0))])
    record = d.to_dict()
    assert (record["pick"], record["mode"], record["storage"], record["runner_up"]) == ("File", "File", "standard", "FSx")
    fsx = record["ranking"][1]
    assert fsx == {"source": "FSx", "mode": "FSx", "storage": "standard", "job_usd": 0.95, "setup_usd": 0.012,
                   "cost_to_result_usd": 0.962, "setup_seconds": 18.0, "job_seconds": 100.0,
                   "time_to_result_seconds": 118.0, "setup": "a copy", "measured": True, "bound": None, "blocker": None,
                   "cost_to_result_interval_usd": [0.912, 1.012],
                   "note": "runner-up (the pick if the pick were not there); " + d.passed_over["FSx"]}
    assert record["ranking"][0]["note"] == "pick"


def test_the_ranking_lists_the_pick_the_runner_up_then_the_rest_by_weighed_cost():
    # Costs: Pipe $0.90 (no cell, top $1.20: weighed $1.20 / 0.9 = $1.3333), FSx $0.95 (/0.9 = $1.0556), EFS $0.97
    # (/0.9 = $1.0778), File $1.00, FastFile $1.02. Cheapest first: Pipe, FSx, EFS, File, FastFile. Lowest weighed:
    # File ($1.00), then FastFile ($1.02): the pick and the runner-up. The rest by weighed: FSx, EFS, Pipe.
    options = [_option("Pipe", job_usd=0.90, measured=False, interval=(0.8, 1.2)), _option("FSx", job_usd=0.95),
               _option("EFS", job_usd=0.97), _option("File", job_usd=1.00), _option("FastFile", job_usd=1.02)]
    d = decide(options)
    assert [o.source for o in d.ranking] == ["File", "FastFile", "FSx", "EFS", "Pipe"]
    assert list(d.passed_over) == ["Pipe", "FSx", "EFS"]
    record = d.to_dict()
    assert set(record) == {"pick", "mode", "storage", "why", "runner_up", "ranking", "passed_over", "blocked", "advice",
                           "noise", "within_error"}
    assert (record["why"], record["passed_over"], record["blocked"], record["advice"]) == (d.why, d.passed_over, {}, [])
    assert record["runner_up"] == "FastFile" and record["noise"] is None and record["within_error"] == []
    assert [r["note"] for r in record["ranking"]][:2] == ["pick", "runner-up (the pick if the pick were not there)"]
    assert record["ranking"][4]["note"] == d.passed_over["Pipe"]   # passed over, not the runner-up
    alone = decide([_option("File")]).to_dict()
    assert alone["runner_up"] is None


def test_a_decision_carries_its_noise_and_the_sources_within_error():
    # Estimates: FSx $1.00 in $0.90-$1.10, EFS in $1.10-$1.50 (touching at $1.10) and Pipe $0.50-$0.90 (touching at
    # $0.90): both within the model's error.
    pick = _option("File", job_usd=1.0, measured=False, interval=(0.9, 1.1))
    touching = [_option("EFS", job_usd=1.3, measured=False, interval=(1.1, 1.5)),
                _option("Pipe", job_usd=2.0, measured=False, interval=(0.5, 0.9))]
    d = decide([pick, *touching])
    assert d.pick.source == "File" and d.within_error == ["EFS", "Pipe"]
    assert d.noise.startswith("within the model's error: File $0.90-$1.10 per run overlaps EFS $1.10-$1.50, Pipe "
                              "$0.50-$0.90: a measured run")
    assert d.to_dict()["within_error"] == ["EFS", "Pipe"] and d.to_dict()["noise"] == d.noise
    four = [_option(m, job_usd=1.0, measured=False, interval=(0.95, 1.05)) for m in ("EFS", "Pipe", "Script", "FastFile")]
    assert ", FastFile $0.95-$1.05: a measured run" in estimates_noise(pick, four)   # four named, none "more"
    # Runs: the measured spread speaks for the decision.
    runs = decide([_option("File", job_usd=1.0, runs=2, interval=(0.95, 1.05)),
                   _option("FastFile", job_usd=1.2, runs=2, interval=(1.1, 1.3))])
    assert runs.noise.startswith("the runs separate File and FastFile")


def test_runs_that_only_touch_are_within_noise():
    two = _option("File", job_usd=1.0, runs=2, interval=(0.95, 1.05))
    # FastFile asks nothing: its low end $1.05 is File's high end: they overlap.
    assert noise(two, _option("FastFile", job_usd=1.1, runs=2, interval=(1.05, 1.2))).startswith("within noise")
    assert noise(two, _option("FastFile", job_usd=0.9, runs=2, interval=(0.8, 0.95))).startswith("within noise")
    assert noise(two, _option("FSx", runs=0)) is None and noise(_option("File", runs=0), two) is None
    assert noise(_option("File", runs=1, interval=(1.0, 1.0)), _option("FSx", runs=3, interval=(1.0, 1.2))) == (
        "one run each, so how far File and FSx spread from run to run is not measured (n/a): run `repeats: 3` (or "
        "--repeats 3) to know whether the pick holds")


def test_edges_of_dollars_lengths_and_set_up():
    assert usd(0.0001) == "$0.00010" and usd(0.00009999) == "<$0.0001"
    # 7,380.5 s / 3,600 = 2.05014 h: shown 2.1 h (2.0 h at any other hour's length).
    assert duration(7380.5) == "2.1 h"
    assert setup_phrase(_option(setup=(0.0, 0.5))) == "$0.00 of it set-up: a copy"   # half a second is still set-up
    assert required_saving(_option(job_usd=0.0), _option(job_usd=1.0)) == 0.0


class _Range:
    def __init__(self, billable_high: float, usd_low: float, usd_high: float):
        self.billable_high, self.usd_low, self.usd_high = billable_high, usd_low, usd_high


def _estimate(mode="File", *, storage="standard", hosts=2, high=1600.0, blocker=None, **kwargs):
    from dslab.core.model.estimate import Estimate
    # 100 s downloading + 500 s training + 20 s other = 620 instance-seconds: 310 s on each of 2 instances' clocks.
    return Estimate(mode=mode, downloading=100.0, training=500.0, other=20.0, billable_seconds=1240.0,
                    cost_usd={"total": 2.0}, storage=storage, instance_count=hosts, blocker=blocker,
                    range=_Range(high, 1.8, 2.6) if high is not None else None, bound="download", **kwargs)


def test_the_top_of_a_jobs_range_on_one_instances_clock():
    from dslab.core.answer.decision import top_job_seconds
    assert top_job_seconds(_estimate()) == 800.0              # 1,600 instance-seconds at the top / 2 instances
    assert top_job_seconds(_estimate(), 4) == 400.0           # the count asked for: 1,600 / 4
    assert top_job_seconds(_estimate(high=None)) == 620.0     # no range: billable 1,240 / 2
    assert top_job_seconds(_estimate(high=100.0)) == 310.0    # never under its point: 620 / 2
    assert top_job_seconds(_estimate(hosts=0, high=None)) == 1240.0   # at least one instance


def test_an_option_from_an_estimate():
    from dslab.core.answer.decision import option_from_estimate
    option = option_from_estimate(_estimate(), SHAPE, PRICES)
    assert (option.mode, option.storage, option.job_usd, option.job_seconds) == ("File", "standard", 2.0, 310.0)
    assert (option.measured, option.bound, option.blocker, option.data_in_efs) == (True, "download", None, False)
    assert option.job_usd_interval == (1.8, 2.6) and option.setup == Setup(0.0, 0.0, "none")
    assert option_from_estimate(_estimate(), SHAPE, PRICES, instance_count=4).job_seconds == 155.0
    assert option_from_estimate(_estimate(high=None), SHAPE, PRICES).job_usd_interval is None
    # Express: the estimate's copy (600 s, $2.00) and 10 GB kept meanwhile ($0.001667); never a measured cell.
    express = option_from_estimate(_estimate("FastFile", storage="express", staging_seconds=600.0, staging_cost_usd=2.0),
                                   SHAPE, PRICES)
    assert (express.setup.seconds, express.setup.usd, express.measured) == (600.0, pytest.approx(2.0 + 0.01 / 6), False)
    unknown_copy = option_from_estimate(_estimate("FastFile", storage="express"), SHAPE, PRICES)
    assert (unknown_copy.setup.seconds, unknown_copy.setup.usd) == (0.0, 0.0)   # an estimate without its copy: none
    assert option_from_estimate(_estimate("Pipe"), SHAPE, PRICES).measured is False
    # FSx: its import at the capacity given (2,400 GiB: $0.012), or at the estimate's own file system's price.
    assert option_from_estimate(_estimate("FSx"), SHAPE, PRICES, fsx_capacity_gib=2400).setup.usd == pytest.approx(0.012)

    class Provisioned:
        def hourly(self, prices):
            return 3.6

    class Lab:
        fsx = Provisioned()
    assert option_from_estimate(_estimate("FSx", provisioning=Lab()), SHAPE, PRICES).setup.usd == pytest.approx(0.018)
    in_efs = option_from_estimate(_estimate("File"), SHAPE, PRICES, data_in_efs=True)
    assert in_efs.data_in_efs and in_efs.setup.usd == pytest.approx(0.10)   # the DataSync copy out of EFS
    # Refused: the estimate's own blocker, else a top past 28 days (30 days on each of 2 instances' clocks).
    assert option_from_estimate(_estimate(blocker="the volume is too small"), SHAPE, PRICES).blocker == \
        "the volume is too small"
    long = option_from_estimate(_estimate(high=2 * 30 * 86400.0), SHAPE, PRICES)
    assert long.blocker == ("it runs 0.0 days (up to 30.0), past the 28-day MaxRuntimeInSeconds: fewer epochs/samples "
                            "or more instances")
    assert option_from_estimate(_estimate(high=2 * 30 * 86400.0), SHAPE, PRICES, instance_count=4).blocker is None
