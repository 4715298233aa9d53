"""The model's own records and figures (dslab/core/model/: the estimate, the provisioning, the calibration, the
checkpoint estimate), each expected value worked out by hand in the test, for the mutants the answer's tests let
through (issue 58). The answer's JSON carries each record as its schema (dslab/contracts/answer.schema.json) says:
the digits each figure is rounded to, the keys present only where they apply."""

from __future__ import annotations

from types import SimpleNamespace

from dslab.core.model.estimate import Estimate


def _estimate(**changes) -> Estimate:
    figures = dict(mode="File", downloading=12.34, training=100.06, other=54.14, billable_seconds=166.56,
                   cost_usd={"instance": 1.0, "storage": 0.5, "requests": 0.25, "total": 1.75},
                   assumptions=["one"], bound="I/O", au_percent=87.66, au_percent_per_epoch=[80.04, 95.26])
    return Estimate(**{**figures, **changes})


def test_an_estimates_json_rounds_seconds_and_au_to_a_tenth_and_names_each_figure():
    # Seconds and AU to 0.1: 12.34 -> 12.3, 100.06 -> 100.1, 54.14 -> 54.1, 166.56 -> 166.6, 87.66 -> 87.7, the
    # epochs' 80.04 and 95.26 -> 80.0 and 95.3. Dollars as given (job_cost rounds them). No blocker, volume, range,
    # provisioning, FSx import or Express keys: none applies.
    assert _estimate().to_dict() == {
        "mode": "File", "downloading": 12.3, "training": 100.1, "other": 54.1, "billable_seconds": 166.6,
        "cost_usd": {"instance": 1.0, "storage": 0.5, "requests": 0.25, "total": 1.75}, "bound": "I/O",
        "au_percent": 87.7, "au_percent_per_epoch": [80.0, 95.3], "assumptions": ["one"]}


def test_an_estimates_json_carries_its_blocker_volume_range_provisioning_and_fsx_import_where_they_apply():
    # FSx's import, 765.17 s -> 765.2; the volume as given (GB); the range's and the provisioning's own records.
    estimate = _estimate(mode="FSx", blocker="cannot hold it", volume_gb=950, fsx_provisioning_seconds=765.17,
                         range=SimpleNamespace(to_dict=lambda: {"range": "its own"}),
                         provisioning=SimpleNamespace(to_dict=lambda: {"lab": "its own"}))
    out = estimate.to_dict()
    assert (out["blocker"], out["volume_gb"], out["fsx_provisioning_seconds"]) == ("cannot hold it", 950, 765.2)
    assert out["range"] == {"range": "its own"} and out["provisioning"] == {"lab": "its own"}
    assert "storage" not in out and "source" not in out
    # A volume of 0 GB is still a volume: present. An empty blocker is none.
    assert _estimate(volume_gb=0, blocker="").to_dict()["volume_gb"] == 0
    assert "blocker" not in _estimate(blocker="").to_dict()


def test_an_express_estimates_json_names_its_storage_source_and_staging():
    # Express: its storage and label ("Express " + the mode), staging 12.34 s -> 12.3 and $0.123456 -> 0.1235 (4
    # decimals); staging not yet known reads 0.0 for both.
    out = _estimate(mode="FastFile", storage="express", staging_seconds=12.34, staging_cost_usd=0.123456).to_dict()
    assert (out["storage"], out["source"], out["staging_seconds"], out["staging_cost_usd"]) == \
        ("express", "Express FastFile", 12.3, 0.1235)
    unknown = _estimate(storage="express").to_dict()
    assert (unknown["staging_seconds"], unknown["staging_cost_usd"]) == (0.0, 0.0)


def test_an_estimates_wall_clock_is_one_instances_share_of_its_phases():
    # 12.34 + 100.06 + 54.14 = 166.54 s over every instance: 166.54 s for one, 166.54 / 4 = 41.635 s for four; a count
    # of 0 is read as one instance.
    assert abs(_estimate().wall_seconds - 166.54) < 1e-9
    assert abs(_estimate(instance_count=4).wall_seconds - 41.635) < 1e-9
    assert abs(_estimate(instance_count=0).wall_seconds - 166.54) < 1e-9
    assert _estimate(mode="Pipe", storage="express").source == "Express Pipe"
