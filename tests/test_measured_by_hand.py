"""The calibration's own search and reading (dslab/core/measured.py) on inputs whose answers are known by hand (issue
58): the golden-section search, the log bisection, the valley of a loss (its minimum, the flat stretch, the support
within a band), a job's attempts and phases, the bounds a constant is searched within."""

from __future__ import annotations

import math

import pytest

from dslab.core import measured


def _v(at: float, flat: float = 0.0):
    """A loss with its valley at ``at`` (in log space), flat for ``flat`` either side of it (a factor, in log)."""
    return lambda x: max(0.0, abs(math.log(x) - math.log(at)) - flat)


def test_the_golden_section_finds_a_single_valleys_bottom_in_log_space():
    assert measured._golden(_v(7.0), 1.0, 100.0) == pytest.approx(7.0, rel=1e-3)
    assert measured._golden(_v(0.02), 0.001, 1.0, steps=40) == pytest.approx(0.02, rel=1e-6)


def test_the_edge_is_where_the_loss_crosses_its_level_between_inside_and_outside():
    # x under 10 is inside (x <= 10), above it outside: the edge is 10, approached from inside.
    found = measured._edge(lambda x: x, 1.0, 100.0, 10.0, steps=40)
    assert found == pytest.approx(10.0, rel=1e-9) and found <= 10.0
    # Searching downward (inside above the level's crossing): x >= 10 inside for 1 / x.
    assert measured._edge(lambda x: 1 / x, 100.0, 1.0, 0.1, steps=40) == pytest.approx(10.0, rel=1e-9)


def test_a_valley_gives_its_bottom_and_where_the_loss_stays_within_the_band():
    # |ln x - ln 7|: its bottom 7; within a band of ln 2 the loss stays from 7 / 2 = 3.5 to 7 x 2 = 14.
    valley = measured._valley(_v(7.0), 1.0, 100.0, band=math.log(2))
    assert valley.best == pytest.approx(7.0, rel=1e-3)
    assert valley.low == valley.high == valley.best
    assert valley.support[0] == pytest.approx(3.5, rel=1e-3) and valley.support[1] == pytest.approx(14.0, rel=1e-3)
    assert valley.depends and valley.loss == pytest.approx(0.0, abs=1e-3)
    # No band: no support asked.
    assert measured._valley(_v(7.0), 1.0, 100.0).support == (None, None)
    # A support that reaches the search's end is open on that side: within ln 20 of 7 reaches below 1 (0.35).
    assert measured._valley(_v(7.0), 1.0, 100.0, band=math.log(20)).support[0] is None


def test_a_flat_valley_is_its_whole_flat_stretch_and_keeps_the_value_as_it_stands_where_it_lies_in_it():
    # Flat from 7 / 2 = 3.5 to 7 x 2 = 14: the value as it stands (5) is kept; one outside is moved to the nearer end;
    # none given, the middle in log space, sqrt(3.5 x 14) = 7.
    flat = _v(7.0, flat=math.log(2))
    valley = measured._valley(flat, 1.0, 100.0, prefer=5.0)
    assert valley.low == pytest.approx(3.5, rel=1e-4) and valley.high == pytest.approx(14.0, rel=1e-4)
    assert valley.best == 5.0
    assert measured._valley(flat, 1.0, 100.0, prefer=20.0).best == pytest.approx(14.0, rel=1e-4)
    assert measured._valley(flat, 1.0, 100.0).best == pytest.approx(7.0, rel=1e-4)
    # A loss flat everywhere asks nothing of the constant: it does not depend on it.
    level = measured._valley(lambda x: 3.0, 1.0, 100.0, band=0.1)
    assert not level.depends and level.low == 1.0 and level.high == pytest.approx(100.0)
    assert level.best == pytest.approx(10.0)   # the middle of 1 to 100 in log space


def test_a_constant_is_searched_from_its_ranges_low_end_over_4_to_its_high_end_times_4():
    from types import SimpleNamespace
    ranges = {"pipe_mbps": SimpleNamespace(low=150.0, high=1350.0)}
    assert measured._bounds("pipe_mbps", 300.0, ranges) == (150.0 / 4, 1350.0 * 4)
    # A value outside its range widens it; a constant without a range is searched around its value.
    assert measured._bounds("pipe_mbps", 2000.0, ranges) == (150.0 / 4, 2000.0 * 4)
    assert measured._bounds("other", 10.0, ranges) == (2.5, 40.0)


def test_a_jobs_attempts_end_at_each_interruption_and_its_seconds_split_the_image_pull():
    transitions = [{"status": "Starting", "seconds": 60}, {"status": "Downloading", "seconds": 30},
                   {"status": "Interrupted", "seconds": 1},
                   {"status": "Starting", "seconds": 50},
                   {"status": "Training", "seconds": 20, "message": "Downloading the training image..."},
                   {"status": "Training", "seconds": 100, "message": "Training image download completed."},
                   {"status": "Training", "seconds": 5}]
    attempts = measured._attempts(transitions)
    assert [len(a) for a in attempts] == [3, 4]
    second = attempts[1]
    assert measured._seconds(second, "Training") == 125.0
    assert measured._seconds(second, "Training", pull=True) == 20.0
    assert measured._seconds(second, "Training", pull=False) == 105.0
    assert measured._seconds(attempts[0], "Downloading") == 30.0 and measured._seconds(second, "Downloading") == 0.0
    assert measured._attempts([]) == []
