"""Rules of the answer that have a shape, held over many inputs (issue 58, hypothesis): cost rises with epochs and with
instances; a larger FSx never costs less per hour, nor does a higher AU target; a range always holds its point;
MaxRuntimeInSeconds always sits between the top of the range and 28 days, or the job is refused; a calibrated range
always holds the values the jobs asked for. Examples are few and the inputs small: the file runs in seconds."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslab.core.answer.answer import max_runtime_for
from dslab.core.answer.scenarios import job_checks
from dslab.core.answer.sizing import cheapest_fsx
from dslab.core.errors import ConfigError
from dslab.core.experiment import parse_experiment
from dslab.core.facts.compute import compute_rate
from dslab.core.facts.limits import MAX_RUNTIME_SECONDS, runtime_problem
from dslab.core.facts.prices import PriceTable
from dslab.core.facts.storage import FSX_PERSISTENT2_TIERS
from dslab.core.measured import calibrate
from dslab.core.model.calibration import estimate_range
from dslab.core.model.estimate import estimate_mode
from dslab.core.model.provisioning import AS_DEPLOYED, FsxConfig, as_deployed
from dslab.core.shape import DatasetShape

from .test_answer_by_hand import FakeJob

V100 = compute_rate("v100")[0]
FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODES = ("File", "FastFile", "Pipe", "FSx", "EFS", "Script")

shapes = st.builds(lambda files, mean: DatasetShape(files=files, bytes=files * mean),
                   st.integers(min_value=10, max_value=2_000_000), st.integers(min_value=20_000, max_value=200_000_000))


def _cost(mode: str, shape: DatasetShape, **kwargs) -> float:
    base = dict(instance_type="ml.p4d.24xlarge", instance_count=1, epochs=1, rate=V100, prices=PriceTable(),
                provisioning=AS_DEPLOYED)
    found = estimate_mode(mode, shape, **{**base, **kwargs})
    return math.inf if found.blocker else sum(found.cost_usd[k] for k in ("instance", "storage", "requests"))


@FEW
@given(mode=st.sampled_from(MODES), shape=shapes, epochs=st.integers(min_value=1, max_value=50),
       more=st.integers(min_value=1, max_value=50))
def test_a_job_costs_more_with_more_epochs(mode, shape, epochs, more):
    assert _cost(mode, shape, epochs=epochs) <= _cost(mode, shape, epochs=epochs + more) + 1e-9


@FEW
@given(mode=st.sampled_from(MODES), shape=shapes, count=st.integers(min_value=1, max_value=16),
       more=st.integers(min_value=1, max_value=16))
def test_a_job_costs_more_on_more_instances(mode, shape, count, more):
    fewer, larger = _cost(mode, shape, instance_count=count), _cost(mode, shape, instance_count=count + more)
    if fewer < math.inf:
        assert fewer <= larger * (1 + 1e-9)


@FEW
@given(steps=st.integers(min_value=0, max_value=400), more=st.integers(min_value=1, max_value=400),
       tier=st.sampled_from((None, *FSX_PERSISTENT2_TIERS)))
def test_a_larger_fsx_never_costs_less_per_hour_nor_serves_less(steps, more, tier):
    def fsx(gib):
        return FsxConfig(capacity_gib=gib) if tier is None else FsxConfig.persistent2(tier, gib)
    small, large = fsx(1200 + 2400 * steps), fsx(1200 + 2400 * (steps + more))
    assert small.hourly(PriceTable()) < large.hourly(PriceTable())
    assert small.throughput_mbps < large.throughput_mbps


@FEW
@given(demand=st.floats(min_value=10.0, max_value=500_000.0), low=st.floats(min_value=5.0, max_value=100.0),
       high=st.floats(min_value=5.0, max_value=100.0))
def test_a_higher_au_target_never_gets_a_cheaper_fsx_and_each_meets_its_target(demand, low, high):
    low, high = sorted((low, high))

    def fed(config):
        return SimpleNamespace(au_percent=min(100.0, 100.0 * config.throughput_mbps / demand))
    shape = DatasetShape(files=1000, bytes=10**9)
    cheap = cheapest_fsx(shape, fed, as_deployed(), PriceTable(), low)
    dear = cheapest_fsx(shape, fed, as_deployed(), PriceTable(), high)
    assert cheap.hourly(PriceTable()) <= dear.hourly(PriceTable()) + 1e-9
    assert fed(cheap).au_percent >= low and fed(dear).au_percent >= high


@FEW
@given(mode=st.sampled_from(MODES), shape=shapes, epochs=st.integers(min_value=1, max_value=20),
       count=st.integers(min_value=1, max_value=8))
def test_a_range_always_holds_its_point(mode, shape, epochs, count):
    kwargs = dict(instance_type="ml.p4d.24xlarge", instance_count=count, epochs=epochs, rate=V100,
                  prices=PriceTable(), provisioning=AS_DEPLOYED)
    point = estimate_mode(mode, shape, **kwargs)
    if point.blocker:
        return
    found = estimate_range(point, shape, **kwargs)
    assert found.billable_low <= point.billable_seconds <= found.billable_high
    total = sum(point.cost_usd[k] for k in ("instance", "storage", "requests"))
    assert found.usd_low <= total * (1 + 1e-9) and total <= found.usd_high * (1 + 1e-9)


@settings(max_examples=200, deadline=None)
@given(top=st.floats(min_value=0.0, max_value=60 * 86_400.0))
def test_max_runtime_sits_between_the_tops_margin_and_28_days_or_the_job_is_refused(top):
    asked = max_runtime_for(top)
    assert asked % 60 == 0 and 3600 <= asked <= MAX_RUNTIME_SECONDS
    if top <= MAX_RUNTIME_SECONDS:
        assert runtime_problem(top) is None
        assert top <= asked and (asked >= top * 1.5 or asked == MAX_RUNTIME_SECONDS)
    else:
        assert runtime_problem(top) is not None


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(epochs=st.integers(min_value=1, max_value=600), mode=st.sampled_from(("FastFile", "File", "FSx")))
def test_every_planned_job_asks_between_its_top_and_28_days_or_is_refused(epochs, mode):
    experiment = parse_experiment({"name": "p", "instance_type": "ml.p3.2xlarge", "compute": "v100",
                                   "datasets": ["caltech-jpg-50x"], "modes": [mode], "epochs": epochs})
    try:
        checks = job_checks(experiment, PriceTable())
    except ConfigError as refused:   # every source's job past 28 days: the answer itself refuses, naming the epochs
        assert "epochs" in str(refused) and "28-day" in str(refused)
        return
    for check in checks:
        if check.problem is not None:
            continue   # refused: plan, run and export stop here
        assert check.source.top_job_seconds <= check.max_runtime_seconds <= MAX_RUNTIME_SECONDS
        if check.source.top_job_seconds > MAX_RUNTIME_SECONDS:
            pytest.fail("a job whose range passes 28 days was not refused")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.floats(min_value=400.0, max_value=2500.0), ratio=st.floats(min_value=1.0, max_value=1.12))
def test_a_calibrated_range_holds_the_value_each_job_asked_for(first, ratio):
    jobs = [FakeJob("a", "s1", "nvme_download_mbps", first), FakeJob("b", "s2", "nvme_download_mbps", first * ratio)]
    story = {c.name: c for c in calibrate(jobs, PriceTable(), with_bencher=False).constants}["nvme_download_mbps"]
    if story.status != "calibrated":
        return
    low, high = story.range
    assert low <= story.value <= high
    for asked in story.per_job.values():
        assert low * (1 - 1e-6) <= asked <= high * (1 + 1e-6)
