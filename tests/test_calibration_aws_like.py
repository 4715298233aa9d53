"""`dslab calibrate` on runs the model did not write (issue 56): jobs told as DescribeTrainingJob tells them
(tests/aws_like_runs.py: spot savings, clusters of 2 to 8, the image pull inside Training, an interrupted spot job, a
warm-pool start, a truth whose other phase has its floor), and a fit that finds the minimum of flat and piecewise
losses (core/measured.py)."""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import replace

import pytest

from dslab.core import measured
from dslab.core.facts.prices import PriceTable
from dslab.core.model.estimate import MODEL, estimate_mode
from dslab.core.results import record_from_describe
from dslab.core.shape import DatasetShape

from .aws_like_runs import AWS_TRUTH, MOVED, aws_like_results, describe_job

PRICES = PriceTable()
START = dt.datetime(2026, 12, 3, 9, 0, tzinfo=dt.timezone.utc)


def _jobs(results: dict) -> measured.Reading:
    return measured.read_runs(json.loads(json.dumps(results, default=str)))


@pytest.fixture(scope="module")
def reading():
    return _jobs(aws_like_results())


@pytest.fixture(scope="module")
def calibrated(reading):
    return measured.calibrate(reading.jobs, PRICES, set_aside=reading.set_aside)


def _one(truth: dict, **kwargs) -> tuple[measured.MeasuredJob, dict]:
    """One job described as aws_like_runs describes it, read back (its premise is the AWS-like run's first)."""
    run = json.loads(json.dumps(aws_like_results(), default=str))
    describe = describe_job("j-1", "ml.p4d.24xlarge", 4, truth, START, mode="File", dataset="shards-a", epochs=1,
                            **{"spot": None, "interrupted": False, "warm": False, "starting": 120.0,
                               "keeps_pool_for": None, **kwargs})
    record = record_from_describe(json.loads(json.dumps(describe, default=str)), prices=PRICES, mode="File",
                                  dataset="shards-a", trial="one")
    base = next(j for j in measured.measured_jobs(run) if j.job == "aws-one-shards-a-file-r0")
    base = replace(base, measured={**record["breakdown"], "billable": record["training_time_seconds"]})
    jobs, why = measured.read_job(base, record, warm_by_pool=False)
    assert why is None and len(jobs) == 1
    return jobs[0], record


def test_the_image_pull_is_start_up_and_a_spot_saving_is_recorded_not_fitted():
    # Downloading 100 s, training 300 s, other 150 s: Uploading 12 s and the image pull 150 - 12 = 138 s, inside
    # Training. Training time 100 + 138 + 300 + 12 = 550 s (Starting's 120 s is before TrainingStartTime); spot saving
    # 60%: billable round(550 x 0.4) = 220 s, one instance's; 4 instances cost 220 x 4 x the hourly price.
    job, record = _one({"downloading": 100.0, "training": 300.0, "other": 150.0}, spot=0.6)
    assert record["training_time_seconds"] == 550 and record["billable_seconds"] == 220
    assert record["phases"]["Training"] == pytest.approx(438.0)        # as SageMaker names it: pull + training
    assert job.measured["downloading"] == pytest.approx(100.0)
    assert job.measured["training"] == pytest.approx(300.0)            # 438 - 138
    assert job.measured["other"] == pytest.approx(150.0)               # 550 - 100 - 438 = 12, + 138
    assert job.spot_saving == pytest.approx(1 - 220 / 550) and job.phases == measured.PHASES
    assert "image pull 138 s inside Training counted as start-up" in job.read_as
    assert record["cost_usd"]["instance"] == pytest.approx(PRICES.instance_hourly("ml.p4d.24xlarge") * 220 * 4 / 3600,
                                                           rel=1e-6)


def test_an_interrupted_jobs_attempts_each_read_their_own_download_never_the_sum(reading):
    (name, why), = reading.set_aside
    assert name == "aws-four-shards-b-file-r1" and "2 attempts, each downloading again" in why
    attempts = [j for j in reading.jobs if j.job.startswith("aws-four-shards-b-file-r1")]
    assert [j.job for j in attempts] == ["aws-four-shards-b-file-r1 (attempt 1 of 2)",
                                         "aws-four-shards-b-file-r1 (attempt 2 of 2)"]
    # Each attempt's download is one download (the repeat r0 measured one, within the runs' 3% noise each way).
    once = next(j for j in reading.jobs if j.job == "aws-four-shards-b-file-r0").measured["downloading"]
    for attempt in attempts:
        assert attempt.phases == ("downloading",) and set(attempt.measured) == {"downloading"}
        assert attempt.measured["downloading"] == pytest.approx(once, rel=0.07)
    # The record's own phases add the two: what was read before.
    assert not any(j.measured.get("downloading", 0) > 1.5 * once for j in attempts)


def test_a_warm_start_is_recognized_and_its_start_up_not_fitted(reading):
    warm = next(j for j in reading.jobs if j.job == "aws-one-jpegs-a-script-r1")
    assert warm.phases == ("downloading", "training") and "WarmPoolStatus: reused a pool" in warm.read_as
    # A Starting phase shorter than any cold start is one too, without the pool's record.
    job, _ = _one({"downloading": 100.0, "training": 300.0, "other": 150.0}, warm=True)
    assert job.phases == ("downloading", "training") and "Starting 4 s, under 30 s" in job.read_as


def test_every_moved_constant_is_recovered_and_the_rest_stay(calibrated):
    found = {c.name: c for c in calibrated.constants}
    for name in MOVED:
        c = found[name]
        assert c.status == "calibrated", c.why
        assert c.value == pytest.approx(getattr(AWS_TRUTH, name), rel=0.10), name
        assert c.range[0] <= getattr(AWS_TRUTH, name) <= c.range[1], (name, c.range)   # the range holds the truth
    for c in calibrated.constants:
        if c.name not in MOVED:
            assert c.value == pytest.approx(getattr(MODEL, c.name), rel=0.05), (c.name, c.why)


QUESTIONS = [   # none of the runs asked these
    ("File", DatasetShape(files=600, bytes=600 * 800_000_000), "ml.p4d.24xlarge", 2, 3),
    ("File", DatasetShape(files=80, bytes=8_000_000_000), "ml.p4d.24xlarge", 1, 1),       # 8 GB: start-up's share
    ("Script", DatasetShape(files=1_000_000, bytes=1_000_000 * 100_000), "ml.p4d.24xlarge", 1, 2),
    ("Script", DatasetShape(files=300_000, bytes=300_000 * 50_000), "ml.g5.48xlarge", 2, 1),
]


def _billable(model, mode, shape, instance, count, epochs) -> float:
    return estimate_mode(mode, shape, instance_type=instance, instance_count=count, epochs=epochs, rate=100_000.0,
                         prices=PRICES, model=model).billable_seconds


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: f"{q[0]}-{q[1].files}-{q[3]}x{q[2]}")
def test_held_out_questions_come_within_ten_percent_of_the_truth(calibrated, question):
    true, shipped, mine = (_billable(m, *question) for m in (AWS_TRUTH, MODEL, calibrated.model))
    print(f"\n{question[0]} {question[1].files:,} files on {question[3]} x {question[2]}: truth {true:,.0f} s, "
          f"shipped {shipped / true - 1:+.1%}, calibrated {mine / true - 1:+.1%}")
    assert mine == pytest.approx(true, rel=0.10)


def test_read_as_the_phases_are_named_it_learns_the_wrong_thing(reading, calibrated):
    """The same runs read without the transitions (the image pull left in training, two attempts' downloads added, the
    warm start fitted): what the reading above avoids. The test would pass vacuously if this learnt the truth too."""
    naive = json.loads(json.dumps(aws_like_results(), default=str))
    for record in naive["records"]:
        record.pop("transitions", None)
        record.pop("warm_pool", None)
    wrong = measured.calibrate(measured.measured_jobs(naive), PRICES)
    off = {c.name: getattr(wrong.model, c.name) / getattr(AWS_TRUTH, c.name) - 1 for c in wrong.constants}
    right = {c.name: c.value / getattr(AWS_TRUTH, c.name) - 1 for c in calibrated.constants}
    worst = max(off, key=lambda n: abs(off[n]))
    assert abs(off[worst]) > 0.10 and abs(right[worst]) < 0.05, (worst, off[worst], right[worst])


# ---- a truth whose other phase has its floor ---------------------------------------------------------------------

def test_start_up_moved_below_some_jobs_floor_is_recovered():
    """File's start-up at 150 s: the g5 cluster's File jobs download 106 s, so their other is the floor (54 s: 150 -
    106 = 44 below it) and bounds start-up from above only; the p4d jobs (downloads ~75 s) pin it."""
    truth = replace(AWS_TRUTH, startup_file=150.0)
    reading = _jobs(aws_like_results(truth))
    c = next(c for c in measured.calibrate(reading.jobs, PRICES).constants if c.name == "startup_file")
    assert c.status == "calibrated" and c.value == pytest.approx(150.0, rel=0.10), c.why
    # The range holds every value the jobs support: the floor jobs' support runs to the search's end below, so the
    # range does too (the plausible range starts above the value), not a band at a search bound.
    assert c.range[0] < 100 < 150 < c.range[1] < 180 and any(s[0] is None for s in c.supports.values())


def test_every_file_job_on_its_floor_keeps_start_up_as_shipped():
    """NVMe at 600 MB/s: every File job downloads 100 GB or more per instance (182 s), so its other is the floor
    (214.5 - 182 = 32.5 below 54.1) though at the shipped 1,000 MB/s (117 s) start-up would show. Each File job's loss
    is flat below its bound: start-up is kept, and NVMe's rate still recovered."""
    truth = replace(AWS_TRUTH, nvme_download_mbps=600.0)
    found = {c.name: c for c in measured.calibrate(_jobs(aws_like_results(truth)).jobs, PRICES).constants}
    start = found["startup_file"]
    assert start.status == "kept" and start.value == MODEL.startup_file, start.why
    assert start.why.startswith("the jobs bound it but pin no value") and start.per_job == {}
    assert found["nvme_download_mbps"].value == pytest.approx(600.0, rel=0.10)


# ---- the search --------------------------------------------------------------------------------------------------

def test_a_piecewise_loss_flat_below_its_step_finds_the_minimum_above_it():
    """The issue's job: its loss 0.0159 everywhere below 200 s and 0.0001 at 210 s. Golden-section's first probes land
    on the flat part, and it ends at its floor; the grid brackets the valley first."""
    def loss(v: float) -> float:
        return 0.0159 if v < 200 else 0.0001 + math.log(v / 210) ** 2
    found = measured._valley(loss, 214.5 / 4 * 0.94, 227 * 4)
    assert found.best == pytest.approx(210, rel=0.01)
    assert measured._golden(loss, 214.5 / 4 * 0.94, 227 * 4) < 100     # what the search alone found


def test_a_flat_minimum_is_taken_whole_and_a_flat_loss_asks_nothing():
    def loss(v: float) -> float:   # zero from 100 to 300, rising either side
        return math.log(100 / v) ** 2 if v < 100 else math.log(v / 300) ** 2 if v > 300 else 0.0
    found = measured._valley(loss, 10, 3000, band=0.05 ** 2, prefer=214.5)
    assert found.best == 214.5
    assert found.low == pytest.approx(100, rel=1e-3) and found.high == pytest.approx(300, rel=1e-3)
    # Within 5% a phase: 100 / e^0.05 = 95.1 to 300 x e^0.05 = 315.4.
    assert found.support[0] == pytest.approx(100 / math.exp(0.05), rel=1e-3)
    assert found.support[1] == pytest.approx(300 * math.exp(0.05), rel=1e-3)
    assert not measured._valley(lambda v: 1e-4, 10, 3000, band=0.05 ** 2).depends
