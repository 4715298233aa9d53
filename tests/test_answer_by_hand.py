"""Each rule of the answer on an input where it binds, the expected figure worked out by hand in the test (issue 58):
the runtime margin, the 28-day cap and refusal, a trial's own runtime, the AU target, each request price, the
consistency rule, the elasticity threshold, the widening by your runs' error and keeping up with a checkpoint
interval. No expected value comes from the function checked, nor from another view of the same answer: the comments
show the arithmetic, from the rule's own constants (a price, a margin, a limit) as the code's documents give them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from dslab.core.answer.answer import max_runtime_for
from dslab.core.answer.recommend import recommend
from dslab.core.answer.jobs import checked_jobs, max_runtimes
from dslab.core.answer.sizing import cheapest_fsx
from dslab.core.errors import ConfigError
from dslab.core.experiment import parse_experiment
from dslab.core.facts.compute import compute_rate
from dslab.core.facts.limits import runtime_problem
from dslab.core.facts.prices import PriceTable, express_staging_cost, job_cost
from dslab.core.measured import _rests_on, calibrate, elasticities
from dslab.core.model import checkpoint_estimate as ce
from dslab.core.model.calibration import Error, InUse, calibration, estimate_range
from dslab.core.model.estimate import MODEL, estimate_mode
from dslab.core.model.provisioning import AS_DEPLOYED, as_deployed
from dslab.core.requests import plan
from dslab.core.shape import DatasetShape
from dslab.core.workloads.checkpoint import parse_checkpoint_workload

from .helpers import lab_environment

DAY = 86_400
V100 = compute_rate("v100")[0]
DLIO = Path(__file__).resolve().parent.parent / "dslab" / "contracts" / "dlio"


# ---- MaxRuntimeInSeconds: the margin, the floor, whole minutes, the 28-day cap --------------------------------------

@pytest.mark.parametrize("top, expected", [
    # A 31-hour job at its range's top: 31 h x 1.5 = 46.5 h = 167,400 s (2,790 minutes exactly). Without the margin it
    # would be stopped at 111,600 s, the very second its range allows.
    (31 * 3600, 167_400),
    # 4,001 s x 1.5 = 6,001.5 s = 100.025 minutes -> 101 whole minutes = 6,060 s.
    (4_001, 6_060),
    # 2,000 s x 1.5 = 3,000 s: under the floor of an hour -> 3,600 s.
    (2_000, 3_600),
    # 2,400 s x 1.5 = 3,600 s: the floor exactly.
    (2_400, 3_600),
    # 2,401 s x 1.5 = 3,601.5 s -> 61 minutes = 3,660 s: just above the floor.
    (2_401, 3_660),
    # 28 days / 1.5 = 1,612,800 s: x 1.5 is 2,419,200 s, 28 days exactly.
    (1_612_800, 2_419_200),
    # 20 days x 1.5 = 30 days: capped at 28 days = 28 x 86,400 = 2,419,200 s (CreateTrainingJob refuses more).
    (20 * DAY, 2_419_200),
    # A range whose top is past 28 days asks for the cap too (the job itself is refused by runtime_problem).
    (40 * DAY, 2_419_200),
])
def test_max_runtime_is_the_tops_margin_in_whole_minutes_between_an_hour_and_28_days(top, expected):
    assert max_runtime_for(top) == expected


def test_a_job_longer_than_28_days_is_refused_and_one_of_28_days_is_not():
    # 28 days = 2,419,200 s: the longest MaxRuntimeInSeconds SageMaker takes.
    assert runtime_problem(2_419_200) is None
    why = runtime_problem(2_419_201, "trial t's FastFile job")
    assert why is not None and "28-day" in why and "trial t's FastFile job" in why
    # 40 days = 3,456,000 s: said in days.
    assert re.match(r".* 40(\.0)? days", runtime_problem(40 * DAY))


def _experiment(**given):
    return parse_experiment({"name": "hand", "instance_type": "ml.p3.2xlarge", "compute": "v100",
                             "datasets": ["caltech-jpg-50x"], "modes": ["FastFile"], **given})


def test_the_28_day_cap_binds_on_a_job_whose_top_times_the_margin_passes_28_days():
    # FastFile on 1.53 M JPEGs (50 x Caltech-256) at 200 epochs: the range's top lies between 28 days / 1.5 = 18.7
    # days and 28 days, so top x 1.5 passes 28 days and the request asks for 28 days = 2,419,200 s exactly.
    checks = checked_jobs(_experiment(epochs=200), PriceTable())
    (check,) = checks
    assert 28 * DAY / 1.5 < check.source.top_job_seconds <= 28 * DAY
    assert max_runtimes(checks) == {("base", "caltech-jpg-50x", "FastFile", "standard"): 2_419_200}


def test_a_job_whose_range_passes_28_days_is_refused_naming_the_epochs():
    # At 400 epochs the same job runs ~40 days (20 epochs' ~2 days x 20): no MaxRuntimeInSeconds can hold it.
    with pytest.raises(ConfigError) as refused:
        checked_jobs(_experiment(epochs=400), PriceTable())
    assert "epochs" in str(refused.value) and "28-day" in str(refused.value)


def test_a_job_whose_point_fits_28_days_but_whose_range_tops_past_them_is_refused():
    # 400 epochs run ~40.6 days: ~0.1015 day an epoch. At 234 epochs the point is 234 x 0.1015 = 23.7 days, under 28,
    # and the range's top (x ~1.18) 28.1 days, past them: SageMaker could stop it before it ends, so it is refused
    # rather than asked for 28 days.
    with pytest.raises(ConfigError) as refused:
        checked_jobs(_experiment(epochs=234), PriceTable())
    said = str(refused.value)
    assert "epochs" in said and "28-day" in said and "23.7 days" in said


def test_a_trials_own_max_run_seconds_is_what_its_requests_ask_for():
    # max_run_seconds: 86,400 given: each request asks for 86,400 s, not the estimate's hour (its jobs take minutes:
    # 1.1 GB of JPEGs, one epoch).
    experiment = parse_experiment({"name": "own", "instance_type": "ml.p3.2xlarge", "compute": "v100",
                                   "datasets": ["caltech-jpg-1x"], "modes": ["FastFile", "File"],
                                   "max_run_seconds": 86_400})
    runtimes = max_runtimes(checked_jobs(experiment, PriceTable()))
    assert set(runtimes.values()) == {86_400}
    jobs = plan(experiment, lab_environment(), "exec-own", runtimes=runtimes)
    assert [j.request["StoppingCondition"]["MaxRuntimeInSeconds"] for j in jobs] == [86_400, 86_400]
    # Without it, each job asks for the floor of an hour: its range tops under 40 minutes (3,600 / 1.5 = 2,400 s).
    unsaid = parse_experiment({"name": "own", "instance_type": "ml.p3.2xlarge", "compute": "v100",
                               "datasets": ["caltech-jpg-1x"], "modes": ["FastFile", "File"]})
    assert set(max_runtimes(checked_jobs(unsaid, PriceTable())).values()) == {3_600}


def test_a_trials_max_run_seconds_below_its_estimates_top_is_refused_naming_the_key():
    # 60 s for a job whose range tops at minutes: SageMaker would stop it before it ends.
    with pytest.raises(ConfigError) as refused:
        checked_jobs(parse_experiment({"name": "own", "instance_type": "ml.p3.2xlarge", "compute": "v100",
                                       "datasets": ["caltech-jpg-1x"], "modes": ["FastFile"],
                                       "max_run_seconds": 60}), PriceTable())
    assert "max_run_seconds" in str(refused.value) and "shorter than" in str(refused.value)


# ---- the prices of requests -----------------------------------------------------------------------------------------

C_FILES, C_BYTES = 1_530_350, 54_000_000_000     # the post's scenario C: 50 x Caltech-256 as JPEGs
D_FILES = 500                                     # scenario D: the same 54 GB as ~110 MB TFRecord shards


def _cost(**kwargs):
    base = dict(instance_type="ml.p3.2xlarge", instance_count=1, volume_size_gb=0, billable_seconds=0.0,
                wall_seconds=0.0)
    return job_cost(PriceTable(), **{**base, **kwargs})


def test_s3_get_requests_are_priced_per_file_or_8_mib_range_at_40_cents_a_million():
    # FastFile GETs every file every epoch: 1,530,350 x 10 = 15,303,500 GETs x $0.40 / 1e6 = $6.1214.
    assert _cost(mode="FastFile", files=C_FILES, total_bytes=C_BYTES, epochs=10).requests == pytest.approx(6.1214, rel=1e-12)
    # File downloads once whatever the epochs: 1,530,350 x $0.40 / 1e6 = $0.61214.
    assert _cost(mode="File", files=C_FILES, total_bytes=C_BYTES, epochs=10).requests == pytest.approx(0.61214)
    # FSx lazy-loads each file once: the same $0.61214.
    assert _cost(mode="FSx", files=C_FILES, total_bytes=C_BYTES, epochs=10).requests == pytest.approx(0.61214)
    # Shards are read in 8 MiB ranges: 54e9 // 8,388,608 = 6,437 GETs an epoch (more than the 500 files);
    # Pipe, 2 epochs: 12,874 x $0.40 / 1e6 = $0.0051496.
    assert _cost(mode="Pipe", files=D_FILES, total_bytes=C_BYTES, epochs=2).requests == pytest.approx(0.0051496)
    # EFS reads no S3 object.
    assert _cost(mode="EFS", files=C_FILES, total_bytes=C_BYTES, epochs=10).requests == 0.0


def test_a_scripts_listing_is_priced_at_5_dollars_a_million_per_instance():
    # 30,607 JPEGs (Caltech-256): ceil(30,607 / 1,000) = 31 pages, listed by each of 4 instances = 124 LISTs x $5 / 1e6
    # = $0.00062; its GETs: 30,607 x 3 epochs = 91,821 x $0.40 / 1e6 = $0.0367284. Together $0.0373484.
    found = _cost(mode="Script", files=30_607, total_bytes=1_100_000_000, epochs=3, instance_count=4)
    assert found.requests == pytest.approx(0.0373484, rel=1e-12)


def test_the_directory_buckets_requests_and_bytes_are_priced_at_its_own_rates():
    # Express FastFile, 3 epochs of 30,607 files / 1.1 GB: 91,821 GETs x $0.00003 / 1,000 = $0.00275463, and
    # 1.1 GB x 3 x $0.0006 retrieved = $0.00198: $0.00473463.
    found = _cost(mode="FastFile", storage="express", files=30_607, total_bytes=1_100_000_000, epochs=3)
    assert found.requests == pytest.approx(0.00473463, rel=1e-12)
    # Express Script on 2 instances: 31 pages x 2 = 62 LISTs at the PUT/LIST price $0.00113 / 1,000 = $0.00007006 more.
    script = _cost(mode="Script", storage="express", files=30_607, total_bytes=1_100_000_000, epochs=3,
                   instance_count=2)
    assert script.requests == pytest.approx(0.00473463 + 0.00007006, rel=1e-12)
    # Staging once: 30,607 COPYs x $0.00113 / 1,000 = $0.03458591, 1.1 GB uploaded x $0.0032 = $0.00352, 30,607 GETs
    # on the source x $0.40 / 1e6 = $0.0122428: $0.05034871.
    assert express_staging_cost(PriceTable(), 30_607, 1_100_000_000) == pytest.approx(0.05034871, rel=1e-12)


def test_instance_volume_and_file_system_time_are_priced_by_the_hour():
    # 2 x ml.p3.2xlarge for 3,600 billable s: 2 x $3.825 = $7.65; their 100 GB volumes for an hour:
    # 100 x 2 x $0.14 / 730 h = $0.0383562; a 1,200 GiB Scratch 2 FSx for the hour: 1,200 x $0.14 / 730 = $0.2301370.
    found = _cost(mode="FSx", instance_count=2, volume_size_gb=100, billable_seconds=3600, wall_seconds=3600)
    assert found.instance == pytest.approx(7.65)
    assert found.storage == pytest.approx(100 * 2 * 0.14 / 730 + 1200 * 0.14 / 730)
    # ml.p4d.24xlarge has NVMe instance storage: SageMaker gives it no EBS volume, none is priced. One hour: $37.688.
    nvme = _cost(mode="File", instance_type="ml.p4d.24xlarge", volume_size_gb=500, billable_seconds=3600,
                 wall_seconds=3600)
    assert nvme.instance == pytest.approx(37.688) and nvme.storage == 0.0


def test_the_answers_fastfile_cost_carries_its_gets_at_the_tables_price():
    # Scenario C, 10 epochs: the answer's FastFile request cost is the 15,303,500 GETs x $0.40 / 1e6 = $6.1214 above,
    # and a table with GETs at $0 prices the same run exactly $6.1214 less (the issue's $100.12 and $94.00).
    shape = DatasetShape(files=C_FILES, bytes=C_BYTES)
    at_40 = recommend(shape, rate=V100, prices=PriceTable(), epochs=10).source("FastFile")
    free = recommend(shape, rate=V100, prices=PriceTable.with_overrides({"s3_get_per_million": 0.0}),
                     epochs=10).source("FastFile")
    assert at_40.estimate.cost_usd["requests"] == pytest.approx(6.1214)
    assert at_40.cost_usd - free.cost_usd == pytest.approx(6.1214, abs=1e-4)


# ---- sizing: the AU target -------------------------------------------------------------------------------------------

def _fed_by(demand_mbps: float):
    """A stand-in for the cluster's FSx job: AU is the share of the demand the file system's throughput meets."""
    return lambda config: SimpleNamespace(au_percent=min(100.0, 100.0 * config.throughput_mbps / demand_mbps))


@pytest.mark.parametrize("target, capacity, hourly", [
    # 100,000 MB/s of demand at 70% AU needs 70,000 MB/s. Per dollar the fastest tier is Persistent 2 at 1,000 MB/s
    # per TiB ($0.600 / 1,000 = $0.0006 per MB/s-month; Scratch 2 $0.14 / 200 = $0.0007, P2-500 $0.00068): it needs
    # 70,000 x 1,024 / 1,000 = 71,680 GiB -> the next 2,400 GiB step, 72,000 GiB, at 72,000 x $0.600 / 730 h = $59.18/h.
    (70.0, 72_000, 72_000 * 0.600 / 730),
    # At 90%: 90,000 MB/s -> 92,160 GiB -> 93,600 GiB (39 x 2,400), $76.93/h.
    (90.0, 93_600, 93_600 * 0.600 / 730),
])
def test_fsx_is_sized_for_the_workloads_au_target_not_for_90_percent_whatever_it_is(target, capacity, hourly):
    found = cheapest_fsx(DatasetShape(files=1000, bytes=10**9), _fed_by(100_000), as_deployed(), PriceTable(), target)
    assert (found.deployment_type, found.mbps_per_tib, found.capacity_gib) == ("PERSISTENT_2", 1000.0, capacity)
    assert found.hourly(PriceTable()) == pytest.approx(hourly)


@pytest.mark.parametrize("target, capacity", [(70.0, 19_200), (90.0, 24_000)])
def test_dslab_size_provisions_fsx_for_the_au_target_it_is_given(target, capacity):
    # 32 x ml.p4d.24xlarge, 8 accelerators each at 200 samples/s of 100 KB (10 TB in 100 MB files, 1e8 samples):
    # 32 x 8 x 200 x 0.1 MB = 5,120 MB/s. At 70% AU FSx must serve 3,584 MB/s: Scratch 2 at 200 MB/s per TiB needs
    # 3,584 / 200 x 1,024 = 18,350 GiB -> 19,200 GiB (8 x 2,400), $3.68/h; at 90%, 4,608 MB/s -> 23,593 GiB -> 24,000 GiB,
    # $4.60/h. (The 10 TB must fit: 12,000 GiB at least, so the cheapest tier per GiB, Scratch 2, is the cheapest.)
    from dslab.core.answer.sizing import size
    found = size(DatasetShape(files=100_000, bytes=10**13, samples=100_000_000), instance_type="ml.p4d.24xlarge",
                 count=32, rate=200.0, prices=PriceTable(), au_target=target, sources=(("FSx", "standard"),)).sources[0]
    assert found.short == f"FSx Scratch 2 {capacity:,} GiB"
    assert found.standing_usd_per_hour == pytest.approx(capacity * 0.14 / 730)
    assert found.au_percent >= target


def test_fsx_sizing_considers_every_capacity_step_2400_gib_included():
    # 500 MB/s at 90% AU needs 450 MB/s. Scratch 2 at 2,400 GiB gives 2,400 / 1,024 x 200 = 468.75 MB/s for
    # 2,400 x $0.14 / 730 = $0.4603/h; the next cheapest that feeds it is Persistent 2 500 at 1,200 GiB (585.9 MB/s,
    # 1,200 x $0.34 / 730 = $0.5589/h). (The search went 1,200 -> 4,800 GiB and never tried 2,400.)
    found = cheapest_fsx(DatasetShape(files=1000, bytes=10**9), _fed_by(500), as_deployed(), PriceTable(), 90.0)
    assert (found.deployment_type, found.capacity_gib) == ("SCRATCH_2", 2_400)
    assert found.hourly(PriceTable()) == pytest.approx(2_400 * 0.14 / 730)


def test_a_cluster_nothing_feeds_gets_the_smallest_file_system_that_feeds_it_best():
    # Every configuration's AU is capped at 50% (the instances' own limit): the cheapest first capacity that reaches
    # that best is 1,200 GiB of the cheapest tier per hour, Scratch 2 at 1,200 x $0.14 / 730 = $0.2301/h.
    capped = lambda config: SimpleNamespace(au_percent=50.0)   # noqa: E731
    found = cheapest_fsx(DatasetShape(files=1000, bytes=10**9), capped, as_deployed(), PriceTable(), 90.0)
    assert (found.deployment_type, found.capacity_gib) == ("SCRATCH_2", 1_200)


# ---- calibration: the elasticity threshold, the consistency rule, the widening ------------------------------------

@dataclass
class FakeJob:
    """A measured job whose one phase is ``seconds`` x (the constant / its shipped value) ** ``power``: its elasticity
    to the constant is ``power`` exactly (log(1.25 ** p) / log(1.25) = p), and it asks for the value ``asks``."""
    job: str
    scenario: str
    constant: str
    asks: float
    power: float = -1.0
    seconds: float = 600.0
    phases: tuple[str, ...] = ("downloading",)
    source: str = "File"
    whole: bool = True
    headline: str = "downloading"
    measured: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        shipped = getattr(MODEL, self.constant)
        self.measured = {"downloading": self.seconds * (self.asks / shipped) ** self.power}

    @property
    def setting(self):
        return (self.scenario, "ml.p3.2xlarge", 1)

    def predict(self, prices, model):
        return {"downloading": self.seconds * (getattr(model, self.constant) / getattr(MODEL, self.constant)) ** self.power}


def test_elasticity_is_the_phases_share_per_share_of_the_constant():
    # A phase proportional to c ** -0.5: +25% on c moves it by 1.25 ** -0.5 - 1 = -10.6%, an elasticity of -0.5.
    shares = elasticities(FakeJob("j", "a", "nvme_download_mbps", 1000.0, power=-0.5), PriceTable(),
                          names=["nvme_download_mbps"])
    assert shares == {"downloading": {"nvme_download_mbps": pytest.approx(-0.5)}}


@pytest.mark.parametrize("share, rests", [(0.29, None), (-0.29, None), (0.30, "c"), (-0.31, "c"), (0.05, None)])
def test_a_phase_rests_on_a_constant_that_moves_it_at_least_0_3_per_share(share, rests):
    assert _rests_on({"downloading": {"c": share}}) == {"downloading": rests}


def test_a_phase_moved_0_25_per_share_calibrates_nothing_and_one_moved_0_35_does():
    # Two scenarios ask for NVMe at 1,200 MB/s; at an elasticity of -0.25 (under 0.3) no phase rests on it: kept.
    weak = [FakeJob(f"j{i}", f"s{i}", "nvme_download_mbps", 1200.0, power=-0.25) for i in range(2)]
    story = {c.name: c for c in calibrate(weak, PriceTable(), with_bencher=False).constants}["nvme_download_mbps"]
    assert story.status == "not measured" and story.value == 1000.0
    strong = [FakeJob(f"j{i}", f"s{i}", "nvme_download_mbps", 1200.0, power=-0.35) for i in range(2)]
    story = {c.name: c for c in calibrate(strong, PriceTable(), with_bencher=False).constants}["nvme_download_mbps"]
    assert story.status == "calibrated" and story.value == pytest.approx(1200.0, rel=2e-3)


def _nvme(jobs):
    return {c.name: c for c in calibrate(jobs, PriceTable(), with_bencher=False).constants}["nvme_download_mbps"]


def test_two_scenarios_that_ask_values_1_56_times_apart_are_inconsistent_and_keep_the_shipped_value():
    # Each job supports the values within the runs' noise of what it asks: Bencher's widest half-range, n = 0.0600
    # (log), so [v e^-n, v e^n]. 1,200 and 1,872 MB/s are log(1.56) = 0.445 apart, more than 2n = 0.120: no value
    # satisfies both, and NVMe's rate stays at its shipped 1,000 MB/s.
    story = _nvme([FakeJob("a", "s1", "nvme_download_mbps", 1200.0), FakeJob("b", "s2", "nvme_download_mbps", 1872.0)])
    assert story.status == "kept" and story.value == 1000.0 and "inconsistent" in story.why


def test_two_scenarios_that_agree_within_the_noise_move_the_constant_to_their_middle_and_its_range_holds_both():
    # 1,200 and 1,260 MB/s are log(1.05) = 0.0488 apart, under 2n = 0.120: calibrated. The fit minimises
    # log(c / 1200)^2 + log(c / 1260)^2: the geometric mean sqrt(1200 x 1260) = 1,229.6 MB/s. The range is every
    # value a job supports: 1,200 e^-0.0600 = 1,130.1 to 1,260 e^0.0600 = 1,337.9.
    story = _nvme([FakeJob("a", "s1", "nvme_download_mbps", 1200.0), FakeJob("b", "s2", "nvme_download_mbps", 1260.0)])
    noise = 0.060010436597669164
    assert story.status == "calibrated"
    assert story.value == pytest.approx(math.sqrt(1200 * 1260), rel=1e-3)
    assert story.range == pytest.approx((1200 * math.exp(-noise), 1260 * math.exp(noise)), rel=1e-3)
    assert story.per_job == pytest.approx({"a": 1200.0, "b": 1260.0}, rel=1e-3)


def test_one_scenario_alone_moves_nothing():
    # Two repeats of one scenario (the same setting): a constant moves on two scenarios or more.
    story = _nvme([FakeJob("a", "s1", "nvme_download_mbps", 1200.0), FakeJob("b", "s1", "nvme_download_mbps", 1210.0)])
    assert story.status == "kept" and "one scenario" in story.why


def test_the_error_widens_a_range_in_quadrature_with_the_repeats_spread():
    # Under-predicting by up to 20% means a run may measure 1 / 0.8 - 1 = 25% above; over-predicting by up to 10% means
    # 1 - 1 / 1.1 = 9.09% below. With repeats of +-5%: low = 100 x (1 - sqrt(0.0909^2 + 0.05^2)) = 89.6248,
    # high = 200 x (1 + sqrt(0.25^2 + 0.05^2)) = 250.9902.
    low, high = Error(-0.2, 0.1, 0.05, ("x",)).widen(100.0, 200.0)
    assert low == pytest.approx(100 * (1 - math.hypot(1 - 1 / 1.1, 0.05)))
    assert high == pytest.approx(200 * (1 + math.hypot(0.25, 0.05)))
    assert (round(low, 4), round(high, 4)) == (89.6248, 250.9902)


def test_your_runs_error_widens_every_range_where_it_is_wider_than_the_shipped_one():
    # A file whose runs were under-predicted by up to 31%: a run may measure 1 / 0.69 - 1 = 44.9% above the estimate.
    # The error in use takes the wider side of each: under min(-0.31, shipped), over max(0, shipped).
    shipped = Error(-0.05, 0.08, 0.03, ("a", "b"))
    widened = InUse(error=(-0.31, 0.0)).widen(shipped)
    assert (widened.under, widened.over, widened.spread) == (-0.31, 0.08, 0.03)
    assert InUse().widen(shipped) is shipped
    # On an answer: FastFile on scenario C, whose range top is the slow corner x (1 + hypot(above, spread)); with the
    # runs' error the top is the same corner x (1 + hypot(0.449, spread)).
    shape = DatasetShape(files=C_FILES, bytes=C_BYTES)
    kwargs = dict(instance_type="ml.p3.2xlarge", instance_count=1, epochs=1, rate=V100, prices=PriceTable(),
                  provisioning=AS_DEPLOYED)
    point = estimate_mode("FastFile", shape, **kwargs)
    before = estimate_range(point, shape, **kwargs)
    after = estimate_range(point, shape, calibration=InUse(error=(-0.31, 0.0)), **kwargs)
    error = calibration().error("FastFile")
    above = 1 / (1 + error.under) - 1
    assert above < 1 / 0.69 - 1   # the shipped error is narrower: the runs' binds
    ratio = (1 + math.hypot(1 / 0.69 - 1, error.spread)) / (1 + math.hypot(above, error.spread))
    assert after.billable_high == pytest.approx(before.billable_high * ratio, rel=1e-9)
    assert after.billable_low == pytest.approx(before.billable_low, rel=1e-9)


# ---- checkpoints: keeping up with the interval ----------------------------------------------------------------------

def _llama8b_every(seconds: float) -> ce.Question:
    workload = parse_checkpoint_workload(yaml.safe_load((DLIO / "llama3_8b.yaml").read_text()), "llama3_8b.yaml")
    return ce.Question(workload.plan(hosts=1), "ml.p5.48xlarge", seconds, 2, PriceTable(), AS_DEPLOYED, None)


def test_a_checkpoint_target_is_provisioned_to_keep_up_before_it_is_cheap():
    from dslab.core.answer.checkpoints import provisioned
    q = _llama8b_every(120)
    total = q.plan.bytes   # llama3 8B's checkpoint on one p5: 112,425,623,552 bytes
    assert total == 112_425_623_552
    # EFS Provisioned 500 MiB/s writes 500 x 1.048576 = 524.288 MB/s: a save takes 112,425.6 / 524.288 = 214.4 s, more
    # than the 120 s between saves, though its day is the cheapest. Elastic writes 5 GiB/s per file system, and one
    # instance at EFS's 1,500 MiB/s per client = 1,572.864 MB/s: 112,425.6 / 1,572.864 = 71.48 s, which keeps up.
    efs = provisioned(q, "efs", None)
    assert efs.provision.startswith("EFS Elastic") and not efs.warnings
    assert efs.save_seconds == pytest.approx(112_425.623552 / 1_572.864)
    slow = next(c for c in ce.candidates(q, "efs", "x") if c.provision.startswith("EFS Provisioned 500 MiB/s"))
    assert slow.save_seconds == pytest.approx(112_425.623552 / 524.288) and slow.warnings
    assert slow.usd_per_day < efs.usd_per_day
    # FSx Persistent 2 at 1,000 MB/s/TiB, 9,600 GiB: 9,600 / 1,024 x 1,000 = 9,375 MB/s, a save in 11.99 s.
    fsx = provisioned(q, "fsx", None)
    assert not fsx.warnings and fsx.save_seconds == pytest.approx(112_425.623552 / 9_375)


def test_the_checkpoint_answers_runner_up_is_the_target_that_keeps_up():
    from dslab.core.answer.checkpoints import CheckpointQuestion, checkpoint_answer
    from dslab.core.answer.premise import CheckpointPremise, Premise
    q = _llama8b_every(120)
    premise = Premise(q.instance_type, q.plan.hosts, q.plan.gpus_per_host, 1, 0.0, "checkpoints",
                      DatasetShape(q.plan.files, q.plan.bytes), "test", lab=q.lab,
                      checkpoint=CheckpointPremise(q.plan, 120, 2, None))
    found = checkpoint_answer(CheckpointQuestion(premise, q)).to_dict()
    # FSx saves in 12 s, EFS Elastic in 71 s; S3's sync through the NVMe takes 241 s, past the 120 s interval.
    assert (found["pick"], found["runner_up"]) == ("fsx", "efs")


# ---- limits: the words of a refusal, and the bounds on a cluster --------------------------------------------------

def test_a_refusal_says_the_jobs_length_in_days_beside_its_point_where_they_differ():
    # 3,000,000 s / 86,400 = 34.72 days -> "34.7"; its point 2,000,000 s = 23.15 days -> "23.1".
    assert runtime_problem(3_000_000, "trial t's File job", "fewer epochs") == \
        "trial t's File job runs 34.7 days, past the 28-day MaxRuntimeInSeconds: fewer epochs"
    assert runtime_problem(3_000_000, "j", "f", 2_000_000) == \
        "j runs 23.1 days (up to 34.7), past the 28-day MaxRuntimeInSeconds: f"
    # A point that rounds to the same 34.7 days is not said twice.
    assert runtime_problem(3_000_000, "j", "f", 2_999_000) == "j runs 34.7 days, past the 28-day MaxRuntimeInSeconds: f"
    # From 100 days on, whole days with thousands: 10,000,000 s = 115.7 -> "116"; 100,000,000 s = 1,157.4 -> "1,157".
    assert runtime_problem(10_000_000, "j", "f") == "j runs 116 days, past the 28-day MaxRuntimeInSeconds: f"
    assert "runs 1,157 days," in runtime_problem(100_000_000, "j", "f")
    # A point of 1,000 s: 0.0 days (up to 1,157).
    assert "runs 0.0 days (up to 1,157)," in runtime_problem(100_000_000, "j", "f", 1_000)
    assert "runs 8,640,000" not in runtime_problem(100 * DAY, "j", "f") and "runs 100 days," in \
        runtime_problem(100 * DAY, "j", "f")
    # Days to one decimal, rounded: 2,596,329 s / 86,400 = 30.0501 days -> "30.1"; from 100 days whole days,
    # 13,003,209 s / 86,400 = 150.5001 -> "151".
    assert "runs 30.1 days," in runtime_problem(2_596_329, "j", "f")
    assert "runs 151 days," in runtime_problem(13_003_209, "j", "f")
    # A job that never ends (no throughput at all).
    assert runtime_problem(math.inf, "j", "f", 5.0) == "j runs without end, past the 28-day MaxRuntimeInSeconds: f"
    # The defaults name the job and the flags' fix.
    assert runtime_problem(3_000_000).startswith("the job runs 34.7 days") and "fewer epochs" in runtime_problem(3e6)


def test_only_the_sources_too_long_are_named_and_every_one_too_long_is_refused_naming_the_quickest():
    from dslab.core.facts.limits import none_too_long
    # File's top at 30 days is past 28; FSx's at 10 is not: only File is named, with its point (20 days).
    found = none_too_long({"File": 30 * DAY, "FSx": 10 * DAY}, "--epochs", "fewer", "{source}'s job",
                          points={"File": 20 * DAY})
    assert found == {"File": "File's job runs 20.0 days (up to 30.0), past the 28-day MaxRuntimeInSeconds: fewer"}
    assert none_too_long({}) == {}
    # Every one past 28 days: refused on the field, with the quickest one's (File, 29 days) words: the quickest by
    # length, not the first by name.
    with pytest.raises(ConfigError) as refused:
        none_too_long({"EFS": 40 * DAY, "File": 29 * DAY}, "--epochs", "fewer", "{source}'s job")
    assert refused.value.field == "--epochs"
    assert "File's job runs 29.0 days" in str(refused.value) and "EFS" not in str(refused.value)


@pytest.mark.parametrize("count, ok", [(1, True), (4096, True), (0, False), (4097, False), (True, False), ("2", False),
                                       (2.0, False), (-1, False)])
def test_an_instance_count_is_a_whole_number_from_1_to_4096(count, ok):
    from dslab.core.facts.limits import check_instance_count
    if ok:
        assert check_instance_count(count, "instance_count") == count
    else:
        with pytest.raises(ConfigError) as refused:
            check_instance_count(count, "trials[0].instance_count")
        assert refused.value.field == "trials[0].instance_count" and "1..4,096" in str(refused.value)
        assert refused.value.problem == f"{count!r} instances"


# ---- the spread of repeated runs (Student's t), EFS's metering, the instance's volume --------------------------------

def test_t95_is_the_tables_value_and_between_rows_linear_in_one_over_df():
    from dslab.core.model.spread import t95
    assert (t95(1), t95(2), t95(4), t95(30), t95(100)) == (12.706, 4.303, 2.776, 2.042, 1.984)
    # 35 between 30 (2.042) and 40 (2.021): share (1/30 - 1/35) / (1/30 - 1/40) = 0.004762 / 0.008333 = 0.5714,
    # 2.042 + 0.5714 x (2.021 - 2.042) = 2.0300.
    assert t95(35) == pytest.approx(2.042 + (1 / 30 - 1 / 35) / (1 / 30 - 1 / 40) * (2.021 - 2.042))
    assert t95(35) == pytest.approx(2.0300, abs=5e-5)
    # Past 100 towards the normal's 1.960 at infinity: 200: share (1/100 - 1/200) / (1/100 - 0) = 0.5 -> 1.972.
    assert t95(200) == pytest.approx(1.972)
    with pytest.raises(ValueError, match="^a t interval needs at least two runs$"):
        t95(0)


def test_the_spread_of_runs_one_two_and_three():
    from dslab.core.model.spread import spread
    assert spread([]) is None
    one = spread([100.0])
    assert (one.runs, one.mean, one.interval, one.describe()) == (1, 100.0, None, "n/a (one run)")
    two = spread([98, 102])
    assert (two.mean, two.half_width, two.interval) == (100.0, None, (98.0, 102.0))
    assert two.describe() == "min–max 98.0–102.0"
    # 98, 100, 102: s = 2, the mean's 95% half-width t95(2) x 2 / sqrt(3) = 4.303 x 1.1547 = 4.9687.
    three = spread([98, 100, 102])
    assert three.half_width == pytest.approx(4.303 * 2 / math.sqrt(3))
    assert three.interval == pytest.approx((100 - 4.96868, 100 + 4.96868), abs=1e-5)
    assert three.describe(2, " s") == "min–max 98.00–102.00 s; 95% CI 100.00 ± 4.97 s"


def test_efs_meters_metadata_and_whole_4_kib_blocks():
    from dslab.core.model import efs
    # A 1-byte file: 2 KiB of metadata + one 4 KiB block = 6,144 bytes; an empty one the same; 4,097 bytes: two blocks.
    assert (efs.metered_file_bytes(1), efs.metered_file_bytes(0), efs.metered_file_bytes(4097)) == (6144, 6144, 10240)
    assert efs.metered_directory_bytes() == 6144 and efs.metered_directory_bytes(8193) == 2048 + 3 * 4096
    assert efs.metered_directory_bytes(0) == 6144 and efs.metered_directory_bytes(4097) == 2048 + 2 * 4096
    assert efs.metered_size([1, 4097], directories=2) == 6144 + 10240 + 2 * 6144
    assert efs.metered_size([1]) == 6144   # no directory unless told
    # 1,000 files of 1 MB on average: 1e9 + 1,000 x (2,048 + 2,048) = 1,004,096,000 bytes, IA-eligible (>= 128 KiB).
    assert efs.dataset_estimate(1000, 10**9) == {"metered_bytes": 1_004_096_000, "standard_bytes": 0.0,
                                                 "ia_bytes": 1_004_096_000}
    # 100 KB files (< 128 KiB) always stay in Standard; so does any dataset without the lifecycle.
    assert efs.dataset_estimate(1000, 10**8)["ia_bytes"] == 0.0
    assert efs.dataset_estimate(1000, 10**9, lifecycle=False)["standard_bytes"] == 1_004_096_000
    assert efs.dataset_estimate(0, 0) == {"metered_bytes": 0.0, "standard_bytes": 0.0, "ia_bytes": 0.0}
    assert efs.dataset_estimate(0, 5)["metered_bytes"] == 0.0
    # One file of 200,000 bytes: 200,000 + 2,048 + 2,048 = 204,096, eligible; 10 files of exactly 128 KiB are too.
    assert efs.dataset_estimate(1, 200_000)["ia_bytes"] == 204_096
    assert efs.dataset_estimate(10, 10 * 131_072)["ia_bytes"] == 10 * 131_072 + 10 * 4096
    # DescribeFileSystems' SizeInBytes: 10 GB, 4 GB of it in IA, 1 GB in Archive (counted as Standard):
    # Standard 6 + 1 = 7 GB x $0.30 = $2.10, IA 4 GB x $0.016 = $0.064 a month.
    found = efs.monthly_usd({"Value": 10e9, "ValueInIA": 4e9, "ValueInStandard": 6e9, "ValueInArchive": 1e9},
                            PriceTable())
    assert found == pytest.approx({"bytes": 10e9, "standard_bytes": 7e9, "ia_bytes": 4e9, "standard_usd": 2.10,
                                   "ia_usd": 0.064, "usd_per_month": 2.164})
    # ValueInStandard read as given (5 GB, not the total less IA), Archive's 1 GB added: 6 GB x $0.30 = $1.80 exactly.
    given = efs.monthly_usd({"Value": 10e9, "ValueInIA": 4e9, "ValueInStandard": 5e9, "ValueInArchive": 1e9},
                            PriceTable())
    assert given["standard_bytes"] == 6e9 and given["standard_usd"] == pytest.approx(1.80, rel=1e-12)
    assert given["ia_usd"] == pytest.approx(0.064, rel=1e-12)
    # Without ValueInStandard: the total less IA.
    assert efs.monthly_usd({"Value": 10e9, "ValueInIA": 4e9}, PriceTable())["standard_bytes"] == 6e9
    assert efs.monthly_usd({}, PriceTable())["usd_per_month"] == 0.0


def test_the_volume_a_job_gets_and_whether_files_share_fits():
    from dslab.core.model.volume import file_share_bytes, volume_for, volume_needed_gb
    # 54 GB on 4 instances, sharded: 13.5 GB each; fully replicated: all 54.
    assert (file_share_bytes(54 * 10**9, 4, True), file_share_bytes(54 * 10**9, 4, False)) == (13.5e9, 54e9)
    assert file_share_bytes(10, 0, True) == 10.0
    # 54 GB x 1.05 headroom = 56.7 -> 57 GB; a tiny share still needs 1 GB.
    assert (volume_needed_gb(54e9), volume_needed_gb(1.0)) == (57, 1)
    # At the gigabyte's edge: 952,380,952 x 1.05 = 999,999,999.6 bytes -> 1 GB; 952,380,953 x 1.05 = 1,000,000,000.65
    # -> 2 GB (decimal gigabytes, as VolumeSizeInGB counts them).
    assert (volume_needed_gb(952_380_952), volume_needed_gb(952_380_953)) == (1, 2)
    # EBS, nothing asked: the default 100 GB, raised to 57? no: 100 holds 57. For 200 GB: 210 GB.
    sized = volume_for("ml.p3.2xlarge", None, 200e9)
    assert (sized.gb, sized.request_gb, sized.priced_gb, sized.fits, sized.needed_gb) == (210, 210, 210, True, 210)
    assert sized.nvme is False and volume_for("ml.p3.2xlarge", 60).nvme is False
    assert volume_for("ml.p3.2xlarge", None).needed_gb == 0 and volume_for("ml.p3.2xlarge", 60).needed_gb == 0
    assert sized.describe() == "a 210 GB EBS volume (sized for File's share)"
    assert volume_for("ml.p3.2xlarge", None).describe() == "a 100 GB EBS volume (the default)"
    # Asked for 50 GB with a 57 GB share: it does not fit, and the refusal names the key and the size.
    small = volume_for("ml.p3.2xlarge", 50, 54e9)
    assert (small.gb, small.asked, small.fits) == (50, True, False)
    assert small.problem("trials[0].volume_size_gb") == (
        "File mode copies 57 GB onto each instance, more than the 50 GB volume asked for: raise "
        "trials[0].volume_size_gb to at least 57 (or leave it out: it is then sized for the data)")
    assert volume_for("ml.p3.2xlarge", 60, 54e9).problem() is None
    assert "raise volume_size_gb to at least 57 (" in small.problem()
    assert volume_for("ml.p3.2xlarge", 60).describe() == "a 60 GB EBS volume (asked for)"
    # ml.p4d.24xlarge: 8 x 1,000 GB NVMe, fixed; the request asks what was asked, or the default 100, and none is priced.
    nvme = volume_for("ml.p4d.24xlarge", None, 9000e9)
    assert (nvme.gb, nvme.nvme, nvme.request_gb, nvme.priced_gb, nvme.fits) == (8000, True, 100, 0, False)
    assert volume_for("ml.p4d.24xlarge", 300).request_gb == 300
    assert nvme.problem() == (
        "File mode copies 9,450 GB onto each instance, more than its 8,000 GB of NVMe instance storage (fixed: SageMaker "
        "provisions no EBS volume on NVMe types); more instances (ShardedByS3Key shares the objects among them), or "
        "FastFile/FSx")
    assert nvme.describe() == "8,000 GB of NVMe instance storage (fixed)"


# ---- the price table: overrides, rows, dates -------------------------------------------------------------------------

def test_a_prices_file_overrides_a_price_and_dates_the_table_as_overridden():
    table = PriceTable.with_overrides({"s3_get_per_million": 0.5, "instance_hourly": {"ml.p5.48xlarge": 98.32}},
                                      source="mine.yaml")
    assert table["s3_get_per_million"] == 0.5 and table.instance_hourly("ml.p5.48xlarge") == 98.32
    assert table.date == "2026-11-01 with overrides" and table.overrides == {
        "s3_get_per_million": "mine.yaml", "instance_hourly.ml.p5.48xlarge": "mine.yaml"}
    # The file's instance row replaces the dated row's own date and source.
    assert table.row_date("ml.p5.48xlarge") == table.date and "ml.p5.48xlarge" not in table.data["dated_rows"]
    rows = {row.name: row for row in table.rows()}
    assert rows["s3_get_per_million"].overridden_by == "mine.yaml" and rows["s3_get_per_million"].date == "not dated"
    assert rows["s3_list_per_million"].date == "2026-11-01" and rows["s3_list_per_million"].overridden_by is None
    assert rows["instance_hourly.ml.p5.48xlarge"].source == "mine.yaml"
    dated = PriceTable.with_overrides({"date": "2026-12-01", "region": "eu-west-1", "efs_ia_gb_month": 0.02})
    assert (dated.date, dated.data["region"]) == ("2026-12-01", "eu-west-1")
    assert {row.name: row for row in dated.rows()}["efs_ia_gb_month"].date == "2026-12-01"
    assert PriceTable.with_overrides(None) == PriceTable() and PriceTable.with_overrides({}) == PriceTable()


@pytest.mark.parametrize("overrides, field", [
    ("not a mapping", "prices file"), ({"s3_gets": 1}, "prices file: s3_gets"),
    ({"instance_hourly": 3}, "prices file: instance_hourly"),
    ({"instance_hourly": {"ml.x": -1}}, "prices file: instance_hourly.ml.x"),
    ({"instance_hourly": {"ml.x": True}}, "prices file: instance_hourly.ml.x"),
    ({"s3_get_per_million": "cheap"}, "prices file: s3_get_per_million"),
    ({"s3_get_per_million": -0.1}, "prices file: s3_get_per_million"),
    ({"s3_get_per_million": False}, "prices file: s3_get_per_million"),
    ({"dated_rows": {}}, "prices file: dated_rows"),
])
def test_a_prices_file_that_is_not_one_is_refused_naming_the_price(overrides, field):
    with pytest.raises(ConfigError) as refused:
        PriceTable.with_overrides(overrides)
    assert refused.value.field == field


def test_the_table_says_each_rows_unit_date_and_source():
    from dslab.core.facts.prices import price_unit
    assert [price_unit(n) for n in ("instance_hourly", "fsx_scratch2_gb_month", "s3_get_per_million",
                                    "express_get_per_thousand", "datasync_per_gb", "efs_provisioned_mibps_month")] == [
        "$/hour", "$/GB-month", "$/million requests", "$/1,000 requests", "$/GB", "$/(MiB/s)-month"]
    table = PriceTable()
    rows = {row.name: row for row in table.rows()}
    p3 = rows["instance_hourly.ml.p3.2xlarge"]
    assert (p3.value, p3.unit, p3.date, p3.other_source) == (3.825, "$/hour", "2026-11-01", False)
    assert p3.source.endswith("(the post quotes it)")
    p5 = rows["instance_hourly.ml.p5.48xlarge"]
    assert (p5.date, p5.other_source) == ("2026-11-30", True) and table.row_date("ml.p5.48xlarge") == "2026-11-30"
    assert table.row_source("ml.p5.48xlarge").startswith("public code quoting") and table.row_date("ml.p3.2xlarge") == \
        "2026-11-01" and table.row_source("ml.p3.2xlarge") == table.source
    assert rows["efs_ia_gb_month"].other_source and not rows["s3_get_per_million"].other_source
    assert p3.to_dict() == {"name": "instance_hourly.ml.p3.2xlarge", "value": 3.825, "unit": "$/hour",
                            "date": "2026-11-01", "source": p3.source, "other_source": False, "overridden_by": None}
    # The instance rows first, by family then price: ml.c5.xlarge ($0.204) leads; the other prices follow in order.
    assert table.rows()[0].name == "instance_hourly.ml.c5.xlarge"
    assert [r.name for r in table.rows() if not r.name.startswith("instance_hourly")][:2] == ["ml_storage_gb_month",
                                                                                             "s3_storage_gb_month"]
    # The label: the table's date and source, then the dated rows grouped by their own date and source.
    label = table.label()
    assert label.startswith("prices of 2026-11-01 (us-east-1, on-demand): AWS public pricing pages")
    assert "; ml.p4de.24xlarge, ml.trn1.2xlarge: prices of 2026-11-30, no listing found" in label
    # An unpriced instance is refused, never costed at $0.
    with pytest.raises(ConfigError) as refused:
        table.require_instance("ml.z9.huge", "trials[0].instance_type")
    assert refused.value.field == "trials[0].instance_type" and "ml.z9.huge" in str(refused.value)
    assert table.require_instance("ml.p3.2xlarge") == 3.825 and table.instance_hourly("ml.z9.huge") is None


def test_a_job_costs_what_its_parts_add_to():
    from dslab.core.facts.prices import JobCost
    cost = JobCost(1.0000004, 2.0, 3.0)
    assert cost.total == pytest.approx(6.0000004)
    assert cost.to_dict() == {"instance": 1.0, "storage": 2.0, "requests": 3.0, "total": 6.0}
    # No billed time costs nothing even on an unpriced instance; billed time on one is refused.
    assert _cost(mode="File", instance_type="ml.z9.huge").total == 0.0
    with pytest.raises(ConfigError):
        _cost(mode="File", instance_type="ml.z9.huge", billable_seconds=1.0)
    # EFS with Elastic throughput: reads billed per GB read, 54 GB x 3 epochs x $0.03 = $4.86, and reads from IA
    # at $0.01 per GB: 10 GB -> $0.10.
    from dslab.core.model.provisioning import EfsConfig
    efs = _cost(mode="EFS", files=C_FILES, total_bytes=C_BYTES, epochs=3, wall_seconds=3600.0,
                efs=EfsConfig("elastic"), efs_ia_gb_read=10.0)
    assert efs.storage == pytest.approx(54 * 3 * 0.03 + 10 * 0.01)
    # Express storage while the job ran: 1.1 GB x $0.11 a GB-month for one hour of 730.
    express = _cost(mode="File", storage="express", files=10, total_bytes=1_100_000_000, wall_seconds=3600.0)
    assert express.storage == pytest.approx(1.1 * 0.11 / 730, rel=1e-12, abs=0)
    # An FSx job on a given file system: its own hourly price, P2-1000 at 2,400 GiB x $0.60 / 730 for the hour.
    from dslab.core.model.provisioning import FsxConfig
    fsx = _cost(mode="FSx", wall_seconds=3600.0, fsx=FsxConfig.persistent2(1000, 2400))
    assert fsx.storage == pytest.approx(2400 * 0.60 / 730)
    assert _cost(mode="FSx", wall_seconds=3600.0, fsx_capacity_gib=2400).storage == pytest.approx(2400 * 0.14 / 730)


# ---- the premise every answer states ---------------------------------------------------------------------------------

def test_the_premise_says_the_cluster_the_epochs_the_compute_the_dataset_and_what_was_taken_by_default():
    from dslab.core.answer.premise import Premise
    shipped = "the shipped calibration (Bencher's 12 cells and public figures)"
    premise = Premise("ml.p3.2xlarge", 2, 1, 3, 100.0, "the V100 preset", DatasetShape(files=1000, bytes=10**9), "given",
                      defaults=frozenset({"epochs", "instance"}), notes=("a note",))
    assert premise.describe() == (
        "premise: 2 x ml.p3.2xlarge, each 1 x V100 16GB; 3 epochs; compute: the V100 preset; dataset: 1,000 files, "
        "1.00 GB, 1,000 samples (given; samples one per file); priced on the lab as cdk.json would deploy it; defaults "
        f"taken: instance type, epochs; a note; {shipped}")
    one = Premise("ml.p3.2xlarge", 1, 1, 1, 100.0, "x", DatasetShape(files=1000, bytes=10**9), "given", readers=4,
                  lab=AS_DEPLOYED, volume_size_gb=50)
    assert "; 1 epoch; " in one.describe() and "priced on the lab as deployed: FSx Scratch 2" in one.describe()
    assert "defaults taken" not in one.describe()
    kwargs = one.estimate_kwargs()
    assert {k: v for k, v in kwargs.items() if k != "model"} == {
        "instance_type": "ml.p3.2xlarge", "instance_count": 1, "epochs": 1, "rate": 100.0, "accelerators": 1,
        "volume_size_gb": 50, "readers": 4}
    assert kwargs["model"] is MODEL and "readers" not in premise.estimate_kwargs()
    found = premise.to_dict()
    assert {k: found[k] for k in ("instance_type", "instance_count", "accelerators_per_instance", "accelerator",
                                  "epochs", "samples_per_second_per_accelerator", "files", "bytes", "samples",
                                  "samples_from", "dataset_from", "au_target_percent", "defaults", "notes")} == {
        "instance_type": "ml.p3.2xlarge", "instance_count": 2, "accelerators_per_instance": 1,
        "accelerator": "V100 16GB", "epochs": 3, "samples_per_second_per_accelerator": 100.0, "files": 1000,
        "bytes": 10**9, "samples": 1000, "samples_from": "one per file", "dataset_from": "given",
        "au_target_percent": 90.0, "defaults": ["epochs", "instance"], "notes": ["a note"]}
    assert found["line"] == premise.describe() and "lab" not in found and "lab" in one.to_dict()
    moved = premise.with_shape(DatasetShape(files=10, bytes=10**6), "stats")
    assert (moved.shape_origin, moved.shape) == ("stats", DatasetShape(files=10, bytes=10**6))
    # Every field the JSON premise carries, the rate to 3 decimals.
    exact = Premise("ml.p3.2xlarge", 1, 1, 1, 100.12345, "x", DatasetShape(files=1000, bytes=10**9), "given",
                    readers=4, volume_size_gb=50).to_dict()
    assert {k: exact[k] for k in ("samples_per_second_per_accelerator", "volume_size_gb", "readers", "calibration")} == {
        "samples_per_second_per_accelerator": 100.123, "volume_size_gb": 50, "readers": 4,
        "calibration": {"source": "shipped", "calibrated": [], "line": shipped}}
    # An instance without an accelerator says so; two notes are each said after "; ".
    bare = Premise("ml.m5.large", 1, 1, 1, 1.0, "x", DatasetShape(files=1, bytes=10**6), "g", notes=("n1", "n2"))
    assert bare.accelerator is None and "each 1 x no accelerator; " in bare.describe()
    assert bare.describe().endswith(f"; n1; n2; {shipped}")
    with pytest.raises(ConfigError) as refused:
        Premise("ml.p3.2xlarge", 0, 1, 1, 1.0, "x", DatasetShape(files=1, bytes=10**6), "g")
    assert refused.value.field == "--instance-count"
    # The GETs in flight a Script job keeps, where asked: said after the lab (before the defaults), carried in the
    # JSON, and handed to every estimate as estimate_mode's script_concurrency; never said where not asked.
    asked = Premise("ml.p3.2xlarge", 2, 1, 3, 100.0, "the V100 preset", DatasetShape(files=1000, bytes=10**9), "given",
                    defaults=frozenset({"epochs"}), s3_concurrency=70)
    assert asked.describe() == (
        "premise: 2 x ml.p3.2xlarge, each 1 x V100 16GB; 3 epochs; compute: the V100 preset; dataset: 1,000 files, "
        "1.00 GB, 1,000 samples (given; samples one per file); priced on the lab as cdk.json would deploy it; Script: "
        f"s3_concurrency 70 GETs in flight; defaults taken: epochs; {shipped}")
    assert asked.estimate_kwargs()["script_concurrency"] == 70 and asked.to_dict()["s3_concurrency"] == 70
    assert "script_concurrency" not in premise.estimate_kwargs() and "s3_concurrency" not in premise.to_dict()
    assert "s3_concurrency" not in premise.describe()


def test_a_checkpoint_premise_says_the_model_its_ranks_its_size_the_interval_and_what_is_kept():
    from dslab.core.answer.premise import CheckpointPremise, Premise
    workload = parse_checkpoint_workload(yaml.safe_load((DLIO / "llama3_8b.yaml").read_text()), "llama3_8b.yaml")
    plan_1 = workload.plan(hosts=1)
    # 112,425,623,552 bytes = 104.70 GiB = 112.43 GB; every 120 s = 2 min.
    saved = CheckpointPremise(plan_1, 120, 2, 30.0)
    assert saved.describe() == (
        "checkpoints of llama_8b (llama3_8b.yaml): 8 processes (TP 1 x PP 1 x DP 8, default mode), 16 files, 104.70 GiB "
        "(112.43 GB) each; saved every 2 min, the last 2 kept; a save within 30 s")
    assert saved.to_dict()["save_under_seconds"] == 30.0 and "save_under_seconds" not in \
        CheckpointPremise(plan_1, 120, 2).to_dict()
    # At half scale on 2 hosts: 52.35 GiB, said beside DLIO's whole 104.7 GiB; 45 s said in seconds.
    assert CheckpointPremise(workload.with_scale(0.5).plan(hosts=2), 45, 3).describe() == (
        "checkpoints of llama_8b (llama3_8b.yaml): 16 processes (TP 1 x PP 1 x DP 16, default mode), 32 files, "
        "52.35 GiB (56.21 GB) each (at --scale 0.5 of DLIO's 104.7 GiB); saved every 45 s, the last 3 kept")
    premise = Premise("ml.p5.48xlarge", 1, 8, 1, 0.0, "checkpoints", DatasetShape(plan_1.files, plan_1.bytes), "test",
                      lab=AS_DEPLOYED, checkpoint=saved, defaults=frozenset({"every", "keep"}))
    assert premise.describe() == (
        "premise: 1 x ml.p5.48xlarge, each 8 x H100 80GB (one rank a GPU); " + saved.describe() + "; priced on the "
        "lab as deployed: FSx Scratch 2, 1,200 GiB (234 MB/s); EFS Bursting (Max I/O), in us-east-1; defaults taken: "
        "checkpoint interval, checkpoints kept; the shipped calibration (Bencher's 12 cells and public figures)")
    assert premise.to_dict()["checkpoint"]["every_seconds"] == 120
    # Without a lab: the lab as cdk.json would deploy it; without an accelerator: said; each note after "; ".
    plain = Premise("ml.m5.large", 1, 1, 1, 0.0, "checkpoints", DatasetShape(plan_1.files, plan_1.bytes), "test",
                    checkpoint=saved, notes=("n1", "n2"))
    assert plain.describe() == (
        "premise: 1 x ml.m5.large, each 1 x no accelerator (one rank a GPU); " + saved.describe() + "; priced on the "
        "lab as cdk.json would deploy it; n1; n2; the shipped calibration (Bencher's 12 cells and public figures)")
    assert CheckpointPremise(plan_1, 120, 2).to_dict() == {
        "workload": "llama_8b", "file": "llama3_8b.yaml", "sha256": None, "processes": 8, "hosts": 1,
        "gpus_per_host": 8, "mode": "default", "data_parallelism": 8, "files": 16, "bytes": 112_425_623_552,
        "full_bytes": 112_425_623_552, "scale": 1.0, "every_seconds": 120, "keep": 2}
    # A minute exactly is said in minutes; a workload file's digest by its first 12 characters.
    from dataclasses import replace as _replace
    hashed = _replace(workload, sha256="0123456789abcdef").plan(hosts=1)
    said = CheckpointPremise(hashed, 60, 1).describe()
    assert "(llama3_8b.yaml, sha256 0123456789ab):" in said and "saved every 1 min, the last 1 kept" in said
    # llama3 70B on one host: 8 processes, fewer than MLPerf's 64: subset mode, and the premise says why.
    big = parse_checkpoint_workload(yaml.safe_load((DLIO / "llama3_70b.yaml").read_text()), "llama3_70b.yaml")
    assert CheckpointPremise(big.plan(hosts=1), 600, 2).describe().endswith(
        "; 8 processes are fewer than MLPerf's 64 for llama_70b: subset mode with Table 2's data parallelism 8, as "
        "mlpstorage runs it")


def test_request_counts_per_mode():
    from dslab.core.facts.prices import s3_get_requests, s3_list_requests
    # 30,607 JPEGs over 3 epochs: File and FSx read each once, FastFile, Pipe and Script every epoch, EFS never.
    assert {m: s3_get_requests(m, 30_607, 1_100_000_000, 3) for m in ("File", "FSx", "FastFile", "Pipe", "Script",
                                                                      "EFS", "Other")} == {
        "File": 30_607, "FSx": 30_607, "FastFile": 91_821, "Pipe": 91_821, "Script": 91_821, "EFS": 0, "Other": 0}
    # 10 shards of 110 MB = 1.1e9 bytes // 8 MiB = 131 ranged GETs an epoch; no bytes given: one per file.
    assert s3_get_requests("FastFile", 10, 1_100_000_000, 2) == 262
    assert s3_get_requests("FastFile", 10, None, 2) == 20
    assert s3_get_requests("File", 0, 10**9, 1) == 0 and s3_get_requests("File", None, 10**9, 1) == 0
    # LIST pages of 1,000 keys, by a Script job's every instance: 1,001 keys are 2 pages; other modes list nothing.
    assert (s3_list_requests("Script", 1_001, 3), s3_list_requests("Script", 1_000, 0)) == (6, 1)
    assert s3_list_requests("FastFile", 1_001, 3) == 0 and s3_list_requests("Script", 0, 3) == 0
    assert s3_list_requests("Script", 1_001) == 2   # one instance unless told


def test_none_too_long_by_default_names_each_source_and_the_flags():
    from dslab.core.facts.limits import none_too_long
    # Defaults: the job named by its source alone, the flags' fix, refused on the flags that lengthen a job.
    assert none_too_long({"File": 30 * DAY, "FSx": DAY}) == {
        "File": "File runs 30.0 days, past the 28-day MaxRuntimeInSeconds: fewer epochs/samples or more instances"}
    with pytest.raises(ConfigError) as refused:
        none_too_long({"File": 30 * DAY})
    assert refused.value.field == "--epochs/--samples/--instance-count"


def test_the_price_tables_words_and_a_table_without_dated_rows():
    from dslab.core.facts.prices import DEFAULT_TABLE
    table = PriceTable()
    # Scratch 2 by the hour: 2,400 GiB x $0.14 / 730 = $0.46027/h.
    assert table.fsx_hourly(2400) == pytest.approx(2400 * 0.14 / 730, rel=1e-12)
    # The label's groups, each after "; ": the ten public-code rows, then the two assumed ones.
    assert ("confirmed on aws.amazon.com/sagemaker/pricing; ml.p4de.24xlarge, ml.trn1.2xlarge: prices of 2026-11-30, "
            "no listing found") in table.label()
    # A table file without dated_rows: every instance row is the table's own.
    plain = PriceTable({k: v for k, v in DEFAULT_TABLE.items() if k != "dated_rows"})
    assert plain.label() == f"prices of 2026-11-01 (us-east-1, on-demand): {DEFAULT_TABLE['source']}"
    assert plain.row_date("ml.p5.48xlarge") == "2026-11-01" and plain.row_source("ml.p5.48xlarge") == plain.source
    assert not any(row.other_source for row in plain.rows() if row.name.startswith("instance_hourly"))
    # Any instance but ml.p3.2xlarge is sourced to the pricing page alone.
    rows = {row.name: row for row in table.rows()}
    assert rows["instance_hourly.ml.p4d.24xlarge"].source == "aws.amazon.com/sagemaker/pricing: training, on-demand"
    # A price the table has no source for says so, as a row from elsewhere.
    extra = PriceTable({**DEFAULT_TABLE, "new_thing_per_gb": 1.0})
    found = {row.name: row for row in extra.rows()}["new_thing_per_gb"]
    assert (found.source, found.other_source, found.unit) == ("no source recorded", True, "$/GB")
    # A file's instance row carries no date of its own when the file gives none.
    given = PriceTable.with_overrides({"instance_hourly": {"ml.p5.48xlarge": 98.32}}, source="f.yaml")
    assert {row.name: row for row in given.rows()}["instance_hourly.ml.p5.48xlarge"].date == "not dated"


def test_the_footer_names_each_prices_file_and_counts_the_rows_from_elsewhere():
    from dslab.core.facts.prices import DEFAULT_TABLE
    # 18 rows come from other sources than AWS's pages: the 10 dated instance rows and 8 secondary prices (EFS IA
    # storage and reads, Elastic reads and writes, the four Persistent 2 tiers).
    assert PriceTable().footer() == ("prices of 2026-11-01, us-east-1, on-demand: 18 rows from other sources: "
                                     "`dslab prices`")
    # Two files gave a price each, one of them a secondary price: 17 from elsewhere; the command names the first file.
    two = PriceTable(dict(DEFAULT_TABLE), {"s3_get_per_million": "a.yaml", "efs_ia_gb_month": "b.yaml"})
    assert two.footer() == ("prices of 2026-11-01, us-east-1, on-demand: 2 from a.yaml, b.yaml; 17 rows from other "
                            "sources: `dslab prices --prices a.yaml`")


def test_the_price_tables_refusals_in_their_words():
    from dslab.core.facts.prices import DEFAULT_TABLE
    with pytest.raises(ConfigError) as refused:
        PriceTable().require_instance("ml.z9.huge")
    assert refused.value.field == "instance_type"
    assert refused.value.problem == (
        "no price for ml.z9.huge in the price table of 2026-11-01: add it under instance_hourly in a --prices YAML file "
        "(instance_hourly: {ml.z9.huge: <dollars per hour>}), or pick a priced type such as ml.c5.18xlarge, "
        "ml.c5.2xlarge, ml.c5.4xlarge, ml.c5.9xlarge")
    with pytest.raises(ConfigError) as refused:
        PriceTable.with_overrides(["a"], source="p.yaml")
    assert (refused.value.field, refused.value.problem) == ("p.yaml", "must be a mapping of price names to numbers")
    with pytest.raises(ConfigError) as refused:
        PriceTable.with_overrides({"s3_gets": 1})
    assert (refused.value.problem, refused.value.allowed) == ("is not a price this table knows", sorted(DEFAULT_TABLE))
    with pytest.raises(ConfigError) as refused:
        PriceTable.with_overrides({"instance_hourly": 3})
    assert refused.value.problem == "must map instance types to dollars per hour"
    with pytest.raises(ConfigError) as refused:
        PriceTable.with_overrides({"instance_hourly": {"ml.x": -1}})
    assert refused.value.problem == "-1 is not a price"
    with pytest.raises(ConfigError) as refused:
        PriceTable.with_overrides({"dated_rows": {}})
    assert refused.value.problem == "is the table's own record of where its rows come from"
    assert refused.value.allowed == "give prices under instance_hourly, with date and source for the file"


def test_a_free_or_cheap_instance_and_an_undated_row_may_be_given():
    # $0 and $0.50 an hour are prices (a reserved or credited instance); ml.p3.2xlarge has no dated row to replace.
    table = PriceTable.with_overrides({"instance_hourly": {"ml.p3.2xlarge": 0, "ml.g5.xlarge": 0.5},
                                       "s3_get_per_million": 0})
    assert (table.instance_hourly("ml.p3.2xlarge"), table.instance_hourly("ml.g5.xlarge")) == (0.0, 0.5)
    assert table["s3_get_per_million"] == 0.0


def test_a_jobs_cost_at_its_edges():
    from dslab.core.facts.prices import JobCost
    from dslab.core.model.provisioning import EfsConfig
    exact = dict(rel=1e-12, abs=0)
    # Rounded to the micro-dollar: 1.2500004 -> 1.25, and the total 7.0000012 -> 7.000001.
    assert JobCost(1.2500004, 2.5000004, 3.2500004).to_dict() == {"instance": 1.25, "storage": 2.5, "requests": 3.25,
                                                                 "total": 7.000001}
    # One epoch unless told: 100 GETs x $0.40 / 1e6 = $0.00004.
    assert job_cost(PriceTable(), mode="FastFile", instance_type="ml.p3.2xlarge", instance_count=1, volume_size_gb=0,
                    billable_seconds=0.0, wall_seconds=0.0, files=100, total_bytes=100).requests == pytest.approx(4e-5)
    # No wall time, no volume cost; no IA read unless told.
    assert _cost(mode="File", volume_size_gb=100, wall_seconds=None).storage == 0.0
    assert _cost(mode="EFS", volume_size_gb=100, wall_seconds=3600.0).storage == pytest.approx(100 * 0.14 / 730, **exact)
    # EFS Provisioned 100 MiB/s for the hour beside the 100 GB volume: 100 x $6.00 / 730 + 100 x $0.14 / 730.
    provisioned = _cost(mode="EFS", volume_size_gb=100, wall_seconds=3600.0, efs=EfsConfig("provisioned", 100))
    assert provisioned.storage == pytest.approx((100 * 6.00 + 100 * 0.14) / 730, **exact)
    # Elastic: 54 GB read x 2 epochs x $0.03 = $3.24 beside the volume; nothing read without bytes.
    elastic = _cost(mode="EFS", volume_size_gb=100, wall_seconds=3600.0, efs=EfsConfig("elastic"), files=C_FILES,
                    total_bytes=C_BYTES, epochs=2)
    assert elastic.storage == pytest.approx(100 * 0.14 / 730 + 54 * 2 * 0.03, **exact)
    unsized = _cost(mode="EFS", volume_size_gb=100, wall_seconds=3600.0, efs=EfsConfig("elastic"), files=10)
    assert unsized.storage == pytest.approx(100 * 0.14 / 730, **exact)
    # The directory bucket: File retrieves the bytes once, Pipe every epoch; a mode that reads none retrieves nothing.
    # 1.1 GB in 10 shards: 1.1e9 // 8 MiB = 131 GETs an epoch x $0.00003 / 1,000.
    express = dict(storage="express", files=10, total_bytes=1_100_000_000, epochs=3)
    assert _cost(mode="File", **express).requests == pytest.approx(131 * 3e-8 + 1.1 * 0.0006, **exact)
    assert _cost(mode="Pipe", **express).requests == pytest.approx(393 * 3e-8 + 1.1 * 3 * 0.0006, **exact)
    assert _cost(mode="FSx", **express).requests == pytest.approx(131 * 3e-8, **exact)
    # Without bytes: 10 GETs of 10 files, nothing retrieved, nothing stored.
    bare = _cost(mode="FastFile", storage="express", files=10, epochs=1, wall_seconds=3600.0)
    assert (bare.requests, bare.storage) == (pytest.approx(10 * 3e-8, **exact), 0.0)
    # A prices file may rename the table's source; a price that is not a number is refused in words.
    assert PriceTable.with_overrides({"source": "my own table"}).source == "my own table"
    with pytest.raises(ConfigError) as refused:
        PriceTable.with_overrides({"s3_get_per_million": "cheap"})
    assert refused.value.problem == "'cheap' is not a price"


def test_a_calibration_holds_every_constants_story_its_jobs_and_what_was_set_aside():
    # The two scenarios of the test above (1,200 and 1,260 MB/s): NVMe's rate moves to sqrt(1,200 x 1,260); every other
    # constant stays as shipped, "not measured", in the order of the model's fields, each said in its unit.
    from dslab.core.model.calibration import constant_names
    jobs = [FakeJob("b", "s2", "nvme_download_mbps", 1260.0), FakeJob("a", "s1", "nvme_download_mbps", 1200.0)]
    found = calibrate(jobs, PriceTable(), with_bencher=False, set_aside=[("x", "interrupted")])
    assert found.jobs == jobs and found.set_aside == [("x", "interrupted")]
    assert [c.name for c in found.constants] == list(constant_names())
    assert found.model.nvme_download_mbps == pytest.approx(math.sqrt(1200 * 1260), rel=1e-3)
    assert all(getattr(found.model, n) == getattr(MODEL, n) for n in constant_names() if n != "nvme_download_mbps")
    stories = {c.name: c for c in found.constants}
    nvme = stories["nvme_download_mbps"]
    assert (nvme.what, nvme.unit, nvme.scale, nvme.shipped, nvme.jobs) == ("File mode onto NVMe", "MB/s", 1.0, 1000.0,
                                                                           ["a", "b"])
    assert nvme.noise == pytest.approx(0.060010436597669164)
    express = stories["express_first_byte"]
    assert (express.status, express.why, express.value, express.shipped, express.unit, express.scale) == (
        "not measured", "no measured phase rests on it: kept as shipped", MODEL.express_first_byte,
        MODEL.express_first_byte, "ms", 1000.0)
    assert (express.what, express.jobs) == ("S3 Express One Zone first byte", [])


def test_a_phase_of_five_seconds_is_evidence_and_a_shorter_one_is_noise():
    # MIN_PHASE_SECONDS = 5: two scenarios whose phase lasts exactly 5 s at the shipped 1,000 MB/s rest on it (and
    # keep it); at 4.9 s they are start-up noise: not measured.
    at_five = [FakeJob(f"j{i}", f"s{i}", "nvme_download_mbps", 1000.0, seconds=5.0) for i in range(2)]
    assert _nvme(at_five).status != "not measured"
    under = [FakeJob(f"j{i}", f"s{i}", "nvme_download_mbps", 1000.0, seconds=4.9) for i in range(2)]
    assert _nvme(under).status == "not measured"


def test_a_constant_fitted_on_bencher_s_cells_is_fitted_on_them_and_the_runs_together():
    # FastFile's per-file GET (fitted on Bencher's FastFile JPEG cells): two scenarios asking 0.050 s move it, and its
    # story says the cells had their say, unless the calibration is told to leave them out.
    jobs = [FakeJob(f"j{i}", f"s{i}", "fastfile_get_latency", 0.050, power=1.0) for i in range(2)]
    story = {c.name: c for c in calibrate(jobs, PriceTable()).constants}["fastfile_get_latency"]
    assert story.status == "calibrated" and "fitted together with Bencher's cells A FastFile" in story.why
    alone = {c.name: c for c in calibrate(jobs, PriceTable(), with_bencher=False).constants}["fastfile_get_latency"]
    assert alone.status == "calibrated" and "Bencher" not in alone.why
    assert alone.value == pytest.approx(0.050, rel=2e-3) and MODEL.fastfile_get_latency < story.value < alone.value
