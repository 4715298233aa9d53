"""A local run whose jobs have one instance each builds its datasets beside the lab's set-up (dslab/local/lab.py,
DatasetsBeside): the upload waits for each, and what preparing one raised is raised there."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from dslab.core.errors import ConfigError
from dslab.local.lab import DatasetsBeside


def test_the_datasets_are_made_beside_and_each_folder_waits_for_its_own(tmp_path):
    said: list[str] = []
    tiny = SimpleNamespace(name="tiny", format="jpg", generate={"images": 4, "classes": 2, "seed": 1})
    beside = DatasetsBeside([tiny], tmp_path, said.append)
    folder = beside.folder(tiny)
    assert json.loads((folder / "dataset.json").read_text())["images"] == 4
    assert said == ["data: generating 4 JPEGs for tiny ..."]
    assert DatasetsBeside([tiny], tmp_path, said.append).folder(tiny) == folder and len(said) == 1   # cached


def test_what_preparing_raised_is_raised_where_the_folder_is_asked_for(tmp_path):
    tiny = SimpleNamespace(name="tiny", format="jpg", generate={"images": 4, "classes": 2, "seed": 1})
    broken = SimpleNamespace(name="broken", format="jpg", generate={})
    beside = DatasetsBeside([tiny, broken], tmp_path, lambda line: None)
    beside.wait()
    assert (beside.folder(tiny) / "dataset.json").is_file()
    with pytest.raises(ConfigError, match="the local lab builds its datasets itself"):
        beside.folder(broken)

