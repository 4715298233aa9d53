"""The source post's decision flowchart, made explicit, with the estimate of every alternative."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .estimate import DatasetShape, Estimate, estimate_all
from .modes import EFS, FASTFILE, FILE, FSX

SMALL_DATASET_BYTES = 75e9      # the post: "small (under 50-100 GB)"
LARGE_FILE_BYTES = 50e6         # the post: small files "under 50 MB", large files "50 MB and up"
PACKED_SHARD_BYTES = 150e6      # the post: FastFile is best "for containers of 150 MB and more"


@dataclass
class Recommendation:
    source: str
    mode: str
    branch: list[str]
    estimates: list[Estimate]
    advice: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "mode": self.mode, "branch": self.branch,
                "estimates": [e.to_dict() for e in self.estimates], "advice": self.advice}


def _source(mode: str) -> str:
    return {FSX: "FSx for Lustre (linked to S3)", EFS: "Amazon EFS"}.get(mode, "Amazon S3")


def recommend(shape: DatasetShape, *, random_access: bool = False, data_in_efs: bool = False,
              **estimate_kwargs) -> Recommendation:
    estimates = estimate_all(shape, **estimate_kwargs)
    by_mode = {e.mode: e for e in estimates}
    size_gb = shape.bytes / 1e9
    mean_mb = shape.mean_file_bytes / 1e6
    branch: list[str] = []
    advice: list[str] = []

    if data_in_efs:
        branch.append("the data already lives in EFS -> read it there (no copy to S3)")
        mode = EFS
    elif random_access:
        branch.append("random reads -> a file system built for them: FSx for Lustre")
        mode = FSX
    elif shape.bytes < SMALL_DATASET_BYTES:
        branch.append(f"the dataset is small ({size_gb:.1f} GB < {SMALL_DATASET_BYTES / 1e9:.0f} GB) -> File mode")
        mode = FILE
        if shape.mean_file_bytes < LARGE_FILE_BYTES:
            branch.append(f"its files are small (mean {mean_mb * 1000:.0f} KB < 50 MB) -> serialize them into shards")
        cheapest = min((e for e in estimates if e.mode in (FILE, FSX)), key=lambda e: e.cost_usd["total"])
        if cheapest.mode == FSX and cheapest.cost_usd["total"] < by_mode[FILE].cost_usd["total"] * 0.9:
            branch.append("many small files make File mode's download long -> FSx is cheaper for this dataset")
            mode = FSX
    elif shape.mean_file_bytes >= LARGE_FILE_BYTES:
        branch.append(f"large dataset ({size_gb:.0f} GB) of large files (mean {mean_mb:.0f} MB) -> FastFile first")
        mode = FASTFILE
    else:
        branch.append(f"large dataset ({size_gb:.0f} GB) of small files (mean {mean_mb * 1000:.0f} KB) -> FSx for Lustre, "
                      "unless the files can be packed into large shards")
        mode = FSX

    if shape.mean_file_bytes < LARGE_FILE_BYTES and not data_in_efs:
        shards = max(1, int(round(shape.bytes / PACKED_SHARD_BYTES)))
        samples, _ = shape.sample_count()
        packed = DatasetShape(files=shards, bytes=shape.bytes, samples=samples)
        packed_best = min(estimate_all(packed, **estimate_kwargs), key=lambda e: e.cost_usd["total"])
        current = by_mode[mode]
        if packed_best.cost_usd["total"] < current.cost_usd["total"]:
            ratio = current.cost_usd["total"] / packed_best.cost_usd["total"]
            advice.append(f"pack into ~{PACKED_SHARD_BYTES / 1e6:.0f} MB shards ({shards:,} shards; dslab dataset pack "
                          f"--shard-size 150MB) and read them with {packed_best.mode}: estimated {ratio:.1f}x cheaper "
                          f"(${packed_best.cost_usd['total']:.2f} instead of ${current.cost_usd['total']:.2f} per run)")
    if by_mode[mode].bound == "I/O":
        advice.append(f"{mode} is I/O-bound here: the accelerator waits for data; more readers or larger files help")
    if mode == FSX and by_mode[FSX].fsx_provisioning_seconds:
        advice.append(f"creating FSx indexes the dataset in ~{by_mode[FSX].fsx_provisioning_seconds / 60:.0f} min and bills "
                      "while it stands: tear it down after the runs (dslab fsx down)")
    return Recommendation(source=_source(mode), mode=mode, branch=branch, estimates=estimates, advice=advice)
