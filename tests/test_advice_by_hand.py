"""The answer's advice (dslab/core/answer/answer.py ``_advice``) on questions where each line binds (issue 58): packing
small files into ~150 MB shards only where it saves 10% or more, FSx's import time and teardown, an I/O-bound pick,
what must be deployed first, and the cluster's AU. Figures worked by hand in the comments."""

from __future__ import annotations

import re

import pytest

from dslab.core.answer.recommend import recommend
from dslab.core.facts.compute import compute_rate
from dslab.core.facts.prices import PriceTable
from dslab.core.shape import DatasetShape

PRICES = PriceTable()
A100 = compute_rate("a100", None, instance_type="ml.p4d.24xlarge")[0]
V100 = compute_rate("v100", None)[0]


def _line(advice: list[str], start: str) -> str:
    found = [line for line in advice if line.startswith(start)]
    assert len(found) == 1, (start, advice)
    return found[0]


def test_packing_is_advised_with_the_shard_count_and_only_where_it_saves_a_tenth():
    # The post's 1.1 GB of 30,607 JPEGs: 1.1 GB / 150 MB = 7.3 -> 7 shards.
    advice = recommend(DatasetShape(30_607, 1_100_000_000), rate=V100, prices=PRICES).advice
    line = _line(advice, "pack into ~150 MB shards (7 shards; dslab dataset pack --shard-size 150MB) and read them with ")
    was, now, saves = re.search(r": \$([\d.,]+) instead of \$([\d.,]+) per run \(saves (\d+)%\)", line).groups()
    assert int(saves) >= 10
    # The saving is the two figures' (each rounded to the cent): (0.39 - 0.35) / 0.39 = 10.3%, said 11% unrounded.
    assert abs(1 - float(was) / float(now) - int(saves) / 100) < 0.02
    # 54 GB of 1.53 M files: 54 GB / 150 MB = 360 shards.
    assert "(360 shards;" in recommend(DatasetShape(1_530_350, 54_000_000_000), rate=V100, prices=PRICES).advice[0]
    # Files of 200 MB are large already: nothing to pack.
    big = recommend(DatasetShape(10_000, 2_000_000_000_000), rate=400.0, prices=PRICES).advice
    assert not [line for line in big if line.startswith("pack into")]
    # Data in EFS stays as it is: no packing advised.
    efs = recommend(DatasetShape(30_607, 1_100_000_000), rate=V100, prices=PRICES, data_in_efs=True).advice
    assert not [line for line in efs if line.startswith("pack into")]


def test_an_fsx_pick_says_its_import_and_its_teardown():
    # 1,530,350 objects at 2,000,000 an hour: 2,754.6 s = 45.9 min, said "~46 min".
    advice = recommend(DatasetShape(1_530_350, 54_000_000_000), rate=A100, prices=PRICES, instance_type="ml.p4d.24xlarge",
                       instance_count=16).advice
    assert _line(advice, "FSx bills while it stands").startswith(
        "FSx bills while it stands (it imports the dataset's metadata in ~46 min before the first job): tear it down "
        "after the runs (dslab fsx down); ")
    # 16,666,667 objects: 30,000 s = 500 min.
    two_tb = recommend(DatasetShape(16_666_667, 2_000_000_000_000), rate=A100, prices=PRICES,
                       instance_type="ml.p4d.24xlarge", instance_count=8, epochs=10).advice
    assert "in ~500 min before the first job" in _line(two_tb, "FSx bills while it stands")


def test_an_io_bound_pick_a_deploy_first_and_the_clusters_au_are_said():
    answer = recommend(DatasetShape(1_530_350, 54_000_000_000), rate=A100, prices=PRICES,
                       instance_type="ml.p4d.24xlarge", instance_count=16)
    assert answer.pick.source == "FSx" and answer.pick.option.bound == "I/O"
    assert "FSx is I/O-bound here: the accelerator waits for data; more readers or larger files help" in answer.advice
    assert _line(answer.advice, "FSx as priced needs the lab provisioned for it first: ").endswith(
        "; ".join(answer.pick.commands))
    assert answer.pick.commands and answer.pick.commands[0].startswith("make deploy FSX=up")
    au = f"{answer.pick.sized.au_percent:.0f}"
    assert _line(answer.advice, "at 16 x ml.p4d.24xlarge, ") == (
        f"at 16 x ml.p4d.24xlarge, FSx as priced: AU {au}%, no shared limit binds (`dslab size` for every source)")
    # One instance of one accelerator: no cluster line.
    single = recommend(DatasetShape(30_607, 1_100_000_000), rate=V100, prices=PRICES).advice
    assert not [line for line in single if line.startswith("at 1 x")]


def test_a_cluster_nothing_feeds_is_said_so():
    # 300 GB of 1 MB files on 4 x g5.12xlarge at 2,000 samples/s per GPU: File's AU is far under 90%.
    answer = recommend(DatasetShape(300_000, 300_000_000_000), rate=2000.0, prices=PRICES, instance_type="ml.g5.12xlarge",
                       instance_count=4, epochs=10)
    line = _line(answer.advice, "at 4 x ml.g5.12xlarge, ")
    if answer.pick.sized.max_instances_at_target_au == 0:
        assert line.endswith("feeds not even one at AU >= 90% (`dslab size` for every source)")
    else:
        assert re.search(r"feeds up to [\d,]+ instances at AU >= 90%", line)
    assert answer.pick.sized.au_percent < 90
