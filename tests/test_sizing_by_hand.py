"""`dslab size`'s search (dslab/core/answer/sizing.py) on AU curves written by hand (issue 58): the largest cluster a
source feeds at the AU target, found by bisection over 1..4,096 instances, and the one deploy that sets every row's
settings together."""

from __future__ import annotations

from types import SimpleNamespace

from dslab.core.answer.sizing import MAX_CLUSTER, _largest, au_of, deploy_settings


def falls_past(n: int, high: float = 100.0, low: float = 50.0):
    """An AU curve that holds ``high`` up to ``n`` instances and is ``low`` past them."""
    calls: list[int] = []

    def au_at(count: int) -> float:
        calls.append(count)
        # A bisection takes 14 looks at most here: one that loops is stopped, not left to fill the memory.
        assert len(calls) <= 64, f"{len(calls)} looks: the search does not end"
        return high if count <= n else low
    au_at.calls = calls
    return au_at


def test_the_largest_cluster_fed_is_found_exactly_wherever_the_curve_falls():
    for n in (1, 2, 3, 7, 8, 9, 100, 1000, 4095):
        assert _largest(falls_past(n), 90.0) == n, n
    assert _largest(falls_past(MAX_CLUSTER), 90.0) == MAX_CLUSTER == 4096   # fed all the way: the largest searched
    assert _largest(falls_past(10 ** 6), 90.0) == 4096


def test_the_target_is_met_at_exactly_the_target():
    # AU exactly 90% at up to 12 instances, 89.9% past them: 90% meets a 90% target.
    assert _largest(falls_past(12, high=90.0, low=89.9), 90.0) == 12
    assert _largest(lambda n: 90.0, 90.0) == 4096
    assert _largest(lambda n: 89.99, 90.0) == 0
    # A 70% target (cosmoflow's) is met where 90% is not.
    assert _largest(falls_past(12, high=75.0, low=60.0), 70.0) == 12 and _largest(falls_past(12, 75.0, 60.0), 90.0) == 0


def test_nothing_fed_at_one_instance_is_none_unless_the_cluster_asked_is_fed():
    # File on NVMe with a dataset sized for the cluster: one instance cannot hold its share (AU 0), 16 can, and up
    # to 64 still do: the search starts at the 16 asked, never below a cluster the AU column says is fed.
    looks = []

    def au_at(n: int) -> float:
        looks.append(n)
        assert len(looks) <= 256, "the search does not end"
        return 0.0 if n < 16 else (100.0 if n <= 64 else 40.0)
    assert _largest(au_at, 90.0, count=16) == 64
    assert _largest(au_at, 90.0, count=1) == 0
    assert _largest(au_at, 90.0, count=8) == 0     # the cluster asked is not fed either
    assert _largest(au_at, 90.0, count=64) == 64
    assert _largest(au_at, 90.0, count=65) == 0    # asked past where it feeds
    # A count past the largest searched is not a start.
    assert _largest(lambda n: 0.0 if n < 5000 else 100.0, 90.0, count=5000) == 0
    assert _largest(falls_past(2), 90.0, count=2) == 2


def test_a_smaller_most_bounds_the_search():
    assert _largest(falls_past(100), 90.0, most=50) == 50
    assert _largest(falls_past(30), 90.0, most=50) == 30
    assert _largest(falls_past(1), 90.0, most=1) == 1
    assert _largest(falls_past(3), 90.0, most=0) == 1   # at least one instance is searched
    assert _largest(falls_past(10 ** 6), 90.0, most=10 ** 6) == MAX_CLUSTER


def test_the_search_bisects():
    curve = falls_past(1000)
    assert _largest(curve, 90.0) == 1000
    # 1, 4,096, then a bisection of 1..4,096: 12 looks (log2 4,096), not 4,096.
    assert len(curve.calls) <= 2 + 12, curve.calls


def test_a_source_that_cannot_run_feeds_nothing():
    assert au_of(SimpleNamespace(blocker="FSx smaller than the data", au_percent=95.0)) == 0.0
    assert au_of(SimpleNamespace(blocker=None, au_percent=95.0)) == 95.0


def test_one_deploy_keeps_what_the_lab_was_deployed_with_except_what_it_sets():
    lab = SimpleNamespace(keep_settings=(("fsxDeploymentType", "PERSISTENT_2"), ("fsxCapacity", 4800),
                                         ("efsThroughput", "provisioned"), ("efsProvisionedMibps", 200),
                                         ("efsPerformance", "maxIO")))
    # An EFS deploy: FSx's settings as deployed are kept; EFS's are the deploy's own (efsPerformance kept: the deploy
    # does not set it).
    assert deploy_settings(lab, {"efsThroughput": "elastic"}) == {
        "efsThroughput": "elastic", "fsxDeploymentType": "PERSISTENT_2", "fsxCapacity": 4800, "efsPerformance": "maxIO"}
    # An FSx deploy keeps every EFS setting.
    assert deploy_settings(lab, {"fsxCapacity": 9600}) == {
        "fsxCapacity": 9600, "efsThroughput": "provisioned", "efsProvisionedMibps": 200, "efsPerformance": "maxIO"}
    # A deploy that sets efsPerformance itself keeps its own.
    assert deploy_settings(lab, {"efsPerformance": "generalPurpose", "efsThroughput": "elastic"})["efsPerformance"] == \
        "generalPurpose"
    assert deploy_settings(None, {"fsxCapacity": 2400}) == {"fsxCapacity": 2400}
