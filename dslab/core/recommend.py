"""The source post's decision flowchart, made explicit, with the estimate of every alternative."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .estimate import BreakEven, DatasetShape, Estimate, estimate_all, fsx_express_break_even
from .modes import EFS, EXPRESS, FASTFILE, FILE, FSX, STANDARD, source_label

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
    storage: str = STANDARD
    break_even: BreakEven | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"source": self.source, "mode": self.mode, "storage": self.storage, "branch": self.branch,
               "estimates": [e.to_dict() for e in self.estimates], "advice": self.advice}
        if self.break_even is not None:
            out["fsx_express_break_even"] = self.break_even.to_dict()
        return out


def _source(mode: str, storage: str = STANDARD) -> str:
    if storage == EXPRESS:
        return "Amazon S3 Express One Zone (a directory bucket in the training instances' zone)"
    return {FSX: "FSx for Lustre (linked to S3)", EFS: "Amazon EFS"}.get(mode, "Amazon S3")


def recommend(shape: DatasetShape, *, random_access: bool = False, data_in_efs: bool = False,
              **estimate_kwargs) -> Recommendation:
    estimates = estimate_all(shape, express=True, **estimate_kwargs)
    by_mode = {e.mode: e for e in estimates if e.storage == STANDARD}
    express_fastfile = next(e for e in estimates if e.storage == EXPRESS and e.mode == FASTFILE)
    storage = STANDARD
    break_even = None
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

    if shape.mean_file_bytes < LARGE_FILE_BYTES and not data_in_efs and not random_access:
        # Beyond the post: a directory bucket in the instances' zone cuts FastFile's per-file latency;
        # against FSx it trades the hourly file system for a one-off copy. Compared for the user's epochs.
        break_even = _break_even(shape, estimate_kwargs)
        epochs = int(estimate_kwargs.get("epochs", 1))
        express_total = express_fastfile.cost_usd["total"] + (express_fastfile.staging_cost_usd or 0.0)
        current_total = by_mode[mode].cost_usd["total"] + (_fsx_import_cost(by_mode[FSX], estimate_kwargs) if mode == FSX else 0.0)
        if express_fastfile.bound == "compute" and express_total < current_total:
            branch.append(f"small files on S3 Express One Zone: FastFile is compute-bound there and, for {epochs} epoch(s), "
                          f"cheaper (${express_total:.2f} with the staging copy) than {mode} (${current_total:.2f}"
                          f"{' with its S3 import' if mode == FSX else ''}) -> Express FastFile")
            mode, storage = FASTFILE, EXPRESS
        else:
            branch.append(f"S3 Express One Zone FastFile would cost ${express_total:.2f} with the staging copy "
                          f"({express_fastfile.bound}-bound) against ${current_total:.2f} for {mode} -> {mode} stays")

    if shape.mean_file_bytes < LARGE_FILE_BYTES and not data_in_efs:
        shards = max(1, int(round(shape.bytes / PACKED_SHARD_BYTES)))
        samples, _ = shape.sample_count()
        packed = DatasetShape(files=shards, bytes=shape.bytes, samples=samples)
        packed_best = min(estimate_all(packed, **estimate_kwargs), key=lambda e: e.cost_usd["total"])
        current = express_fastfile if storage == EXPRESS else by_mode[mode]
        if packed_best.cost_usd["total"] < current.cost_usd["total"]:
            ratio = current.cost_usd["total"] / packed_best.cost_usd["total"]
            advice.append(f"pack into ~{PACKED_SHARD_BYTES / 1e6:.0f} MB shards ({shards:,} shards; dslab dataset pack "
                          f"--shard-size 150MB) and read them with {packed_best.mode}: estimated {ratio:.1f}x cheaper "
                          f"(${packed_best.cost_usd['total']:.2f} instead of ${current.cost_usd['total']:.2f} per run)")
    chosen = express_fastfile if storage == EXPRESS else by_mode[mode]
    if chosen.bound == "I/O":
        advice.append(f"{source_label(mode, storage)} is I/O-bound here: the accelerator waits for data; more readers or larger files help")
    if break_even is not None:
        advice.append(f"FSx vs S3 Express FastFile for this dataset: {break_even.sentence()}")
    if storage == EXPRESS:
        advice.append(f"the workflow stages the dataset into the directory bucket in ~{(chosen.staging_seconds or 0) / 60:.0f} min "
                      f"(${chosen.staging_cost_usd or 0:.2f}); empty it after the runs (dslab express empty)")
    if mode == FSX and by_mode[FSX].fsx_provisioning_seconds:
        advice.append(f"creating FSx indexes the dataset in ~{by_mode[FSX].fsx_provisioning_seconds / 60:.0f} min and bills "
                      "while it stands: tear it down after the runs (dslab fsx down)")
    return Recommendation(source=_source(mode, storage), mode=mode, branch=branch, estimates=estimates, advice=advice,
                          storage=storage, break_even=break_even)


def _break_even(shape: DatasetShape, estimate_kwargs: dict[str, Any]) -> BreakEven:
    kwargs = {k: v for k, v in estimate_kwargs.items() if k != "epochs"}
    return fsx_express_break_even(shape, max_epochs=max(100, int(estimate_kwargs.get("epochs", 1))), **kwargs)


def _fsx_import_cost(fsx: Estimate, estimate_kwargs: dict[str, Any]) -> float:
    prices = estimate_kwargs["prices"]
    return prices.fsx_hourly(int(estimate_kwargs.get("fsx_capacity_gib", 1200))) * (fsx.fsx_provisioning_seconds or 0.0) / 3600
