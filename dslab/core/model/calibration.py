"""How far to trust an estimate: the model's constants fitted on the measured cells, its error on the cells it
was not fitted on, and a range on every estimate.

The evidence, by kind:

- **Measured cells** (``dslab/contracts/bencher-cells.csv``): Bencher's 12 SageMaker cells, four scenarios (A:
  30,607 JPEGs; B: 10 shards; C: 1.53 M JPEGs; D: 500 shards) x File, FastFile and FSx on S3 Standard, ml.p3.2xlarge,
  one epoch, 3 repeats each. ``fit`` computes each fitted constant of ``estimate.Model`` from the cells of the
  regime it models, by the rule its ``Fitted.rule`` says. ``leave_one_scenario_out`` fits on three scenarios and
  predicts the fourth: the model's out-of-sample error per scenario and source. A constant that rests on one cell
  (or none, once its scenario is left out) has no cross-validated figure: it gets a range instead (its cell's
  repeats, and the public figure behind it where there is one) and says so.
- **The repeats' spread**: the notebook keeps no per-repeat rows; the file holds the widest lowest and highest
  repeat its stored summary allows, so each cell's run-to-run half-range.
- **Public figures and assumptions** (``assumptions``): each with its plausible range and its source; Mountpoint's
  CI on EC2 (``dslab/contracts/mountpoint-s3-ci.csv``) for S3's first byte and listing, AWS's documents otherwise.

The range of an estimate (``estimate_range``), kept simple and monotone-correct:

1. The model at the slow end and at the fast end of every ranged constant at once (the assumptions, and the fitted
   constants without a cross-validated figure): each constant at the end that lengthens (or shortens) the job.
2. Widened by the out-of-sample error and the repeats' spread: a source with measured cells (File, FastFile, FSx on
   S3 Standard) by its own; a source without (Pipe, EFS, Script, Express) by the widest of those, on top of its
   assumptions' ranges: the same model's error, and wider.

Dollars follow the seconds: what is billed by time (instance, volume, file system) scales with them; requests stay.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path
from statistics import mean
from typing import Any

from ..errors import ConfigError
from .estimate import MODEL, Estimate, Model, estimate_mode, instance_properties
from ..modes import EXPRESS, FASTFILE, FILE, FSX, STANDARD
from ..shape import DatasetShape
from ..facts.compute import compute_rate
from ..facts.prices import PriceTable

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"
CELLS_PATH = CONTRACTS / "bencher-cells.csv"
MOUNTPOINT_PATH = CONTRACTS / "mountpoint-s3-ci.csv"

# The cells' premise: the post's instance and compute, one epoch.
CALIBRATION_INSTANCE = "ml.p3.2xlarge"
CALIBRATION_PRESET = "v100"
# Sources with measured cells (decision.MEASURED_SOURCES on S3 Standard).
MEASURED_MODES = (FILE, FASTFILE, FSX)

# The regimes the fit rules read (Bencher's cells fall far on either side of each).
FEW_FILES = 100_000        # a script's listing and scan of its files take seconds (C's 1.53 M take minutes)
SHORT_DOWNLOAD = 60.0      # seconds: a download this short hides none of the start-up
LARGE_BYTES = 10e9         # File on shards: the cells whose download is mostly bytes (54 GB), not its start
SHARDED = 10               # samples per file from which a cell reads shards, compute-bound on every source

# Public priors, for a fitted constant whose cells are all left out (the calibration's folds).
# SageMaker Developer Guide, "Best practices for training data": "The overhead of downloading a 50 GB dataset ...
# takes about 5 minutes if a dataset is chunked into 100 MB shards" (model-access-training-data-best-practices.html):
# ~167 MB/s; "about" read as 4 to 6 minutes.
EBS_PRIOR_MBPS = (50_000 / 300, 50_000 / 360, 50_000 / 240)


@dataclass(frozen=True)
class Cell:
    """One measured cell: the mean of 3 repeats, and the widest lowest and highest repeat."""
    scenario: str
    dataset: str
    mode: str
    files: int
    bytes: int
    samples: int
    total: float
    download: float
    train: float
    other: float
    total_min: float
    total_max: float

    @property
    def label(self) -> str:
        return f"{self.scenario} {self.mode}"

    @property
    def shape(self) -> DatasetShape:
        return DatasetShape(files=self.files, bytes=self.bytes, samples=self.samples)

    @property
    def half_range(self) -> float:
        """Seconds either side of the mean that the repeats reach."""
        return (self.total_max - self.total_min) / 2

    @property
    def spread(self) -> float:
        return self.half_range / self.total

    @property
    def sharded(self) -> bool:
        return self.samples >= SHARDED * self.files


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))


@lru_cache(maxsize=None)
def measured_cells(path: Path = CELLS_PATH) -> tuple[Cell, ...]:
    return tuple(Cell(r["scenario"], r["dataset"], r["mode"], int(r["files"]), int(float(r["dataset_gb"]) * 1e9),
                      int(r["samples"]), float(r["total_s"]), float(r["download_s"]), float(r["train_s"]),
                      float(r["other_s"]), float(r["total_min_s"]), float(r["total_max_s"])) for r in _rows(path))


@lru_cache(maxsize=None)
def mountpoint(path: Path = MOUNTPOINT_PATH) -> dict[tuple[str, str], dict[str, Any]]:
    """Mountpoint's CI figures by (storage, benchmark): unit, runs, min, median, max, first and last run."""
    return {(r["storage"], r["benchmark"]): {**r, **{k: float(r[k]) for k in ("min", "median", "max")}}
            for r in _rows(path)}


# ---- ranges --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Assumption:
    """A constant's plausible range and where it comes from."""
    name: str          # the Model field
    what: str          # in words
    low: float
    high: float
    source: str
    unit: str = ""
    scale: float = 1.0   # display: value x scale in unit

    def describe(self, value: float) -> str:
        def shown(v: float) -> str:
            v *= self.scale
            return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 1 else f"{v:.2g}"
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.what} {shown(value)}{unit} ({shown(self.low)}-{shown(self.high)}{unit}: {self.source})"


# Constants whose larger value makes a job shorter; every other one lengthens it.
FASTER_WHEN_LARGER = {"ebs_download_mbps", "nvme_download_mbps", "nvme_checkpoint_mbps", "fastfile_list_rate",
                      "s3_stream_mbps", "pipe_mbps", "s3_connection_mbps", "network_payload", "sync_connections"}


@lru_cache(maxsize=None)
def assumptions() -> dict[str, Assumption]:
    """Every public figure and assumption of ``estimate.Model`` with its plausible range and source."""
    mp = mountpoint()

    def ci(storage: str, bench: str, per: float = 1e-3) -> tuple[float, float, str]:
        row = mp[(storage, bench)]
        return (row["min"] * per, row["max"] * per,
                f"Mountpoint on EC2, {bench}, {row['runs']} CI runs {row['first_run']} to {row['last_run']}")

    std_lo, std_hi, std_src = ci("standard", "time_to_first_byte_read_small_file")
    exp_lo, exp_hi, exp_src = ci("express", "time_to_first_byte_read_small_file")
    # A page of 1,000 keys: `ls -f` of 100,000 objects / 100 pages.
    list_lo, list_hi, list_src = ci("standard", "readdir_100000", per=1 / 100)
    elist_lo, elist_hi, elist_src = ci("express", "readdir_100000", per=1 / 100)
    ebs = MODEL.ebs_download_mbps
    c_fastfile = next(c for c in measured_cells() if c.scenario == "C" and c.mode == FASTFILE)
    listed = c_fastfile.files / (c_fastfile.download - MODEL.fastfile_fixed)
    found = [
        Assumption("s3_standard_first_byte", "S3 Standard first byte", std_lo, std_hi,
                   std_src + ", taken for FastFile's, Pipe's and the script's own reads", "ms", 1000),
        Assumption("express_first_byte", "S3 Express One Zone first byte", exp_lo, exp_hi,
                   exp_src + ", taken for the S3 modes' reads (AWS: \"single-digit millisecond\")", "ms", 1000),
        Assumption("fastfile_s3_share", "the share of FastFile's per-file GET that S3's latency sets",
                   MODEL.s3_standard_first_byte / MODEL.fastfile_get_latency, 1.0,
                   "assumption: from S3 Standard's first byte alone (Mountpoint on EC2) to all of it; Express "
                   "shortens that share"),
        Assumption("script_list_page_seconds", "a page of 1,000 keys listed (S3 Standard)", list_lo, list_hi,
                   list_src + " (readdir_100000 / 100), taken for the script's own listing", "ms", 1000),
        Assumption("express_list_page_seconds", "a page of 1,000 keys listed (Express)", elist_lo, elist_hi,
                   elist_src + " (readdir_100000 / 100), taken for the script's own listing", "ms", 1000),
        # No absolute figure: AWS claims Pipe streams faster than File mode, "up to 9 times better data streaming
        # throughput compared to File Mode" (What's New, 2018-10-10, amazon-sagemaker-now-supports-an-improved-pipe-
        # mode-implementati): from File's fitted download rate to 9 times it.
        Assumption("pipe_mbps", "Pipe throughput", ebs, 9 * ebs,
                   "assumption: File mode's measured download rate to AWS's \"up to 9 times\" it", "MB/s"),
        # "Max I/O performance mode has higher per-operation latencies than General Purpose" (EFS User Guide,
        # performance.html: no figure); General Purpose reads "~1 ms" (its newer revision).
        Assumption("efs_read_latency", "EFS Max I/O per-file latency", 0.001, 0.010,
                   "assumption: General Purpose's ~1 ms read (AWS EFS performance page) to ten times it, since AWS "
                   "gives Max I/O no figure", "ms", 1000),
        # C FSx is compute-bound on 1.53 M files with 8 readers: the lazy load's per-file read is at most what leaves
        # 4,663 s of compute for them, less 230 s of bytes.
        Assumption("fsx_first_read_latency", "FSx lazy-load read", MODEL.fsx_read_latency, 0.023,
                   "assumption: from a cached read to the most C FSx's compute-bound epoch allows", "ms", 1000),
        Assumption("fsx_read_latency", "FSx cached read", 0.0001, 0.001,
                   "AWS FSx for Lustre: \"sub-millisecond latencies\"", "ms", 1000),
        Assumption("fastfile_list_rate", "FastFile listing", MODEL.fastfile_list_rate, round(listed, -2),
                   "the post's 5,500 objects/s to C FastFile's measured Downloading (1.53 M objects)", "objects/s"),
        # Mountpoint's single reader of a 100 GiB object: 1,097-1,715 MiB/s; the post: "exceed 1 GB/s".
        Assumption("s3_stream_mbps", "S3 sequential read", MODEL.s3_stream_mbps,
                   mp[("standard", "sequential_read")]["max"] * 1.048576,
                   "the post's 1 GB/s to Mountpoint on EC2's fastest single reader (sequential_read)", "MB/s"),
        Assumption("nvme_download_mbps", "File mode onto NVMe", 250.0, 2000.0,
                   "assumption: the post's EBS ceiling (\"NVMe-backed ones go higher\") to NVMe's local read", "MB/s"),
        Assumption("nvme_checkpoint_mbps", "a checkpoint's write and read on NVMe", 250.0, 2000.0,
                   "assumption: the range of File's download onto NVMe; AWS publishes instance storage's IOPS, not "
                   "MB/s",
                   "MB/s"),
        Assumption("s3_connection_mbps", "S3 per connection", 85.0, 90.0,
                   "AWS S3 performance guidelines: \"85-90 MB/s\" per concurrent request", "MB/s"),
        Assumption("sync_connections", "the checkpoint sync's parts at once", 4.0, 20.0,
                   "assumption: the AWS CLI's max_concurrent_requests (10), from 4 to twice it; SageMaker does not "
                   "document how its checkpoint upload and copy-in move bytes", "per instance"),
        Assumption("network_payload", "network share carrying data", 0.7, 0.9,
                   "assumption: headers, TLS and retransmits take 10-30% of the line rate"),
    ]
    return {a.name: a for a in found}


# ---- the fit -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fitted:
    """One fitted constant: its value, the cells it rests on and its rule; where it rests on one cell or none
    (a prior), the range it gets instead of a cross-validated figure."""
    name: str
    value: float
    cells: tuple[str, ...]
    rule: str
    low: float | None = None
    high: float | None = None
    why: str = ""

    @property
    def cross_validated(self) -> bool:
        return len(self.cells) >= 2

    def as_assumption(self) -> Assumption | None:
        if self.low is None or self.high is None:
            return None
        scale, unit = ((1000.0, "ms") if self.value < 1 else (1.0, "MB/s") if self.name.endswith("mbps") else (1.0, "s"))
        return Assumption(self.name, self.rule.split(":")[0], self.low, self.high, self.why, unit, scale)


def _calibration_premise(base: Model) -> tuple[int, float, float]:
    """(readers, network MB/s, samples/s) of the cells' instance and compute."""
    vcpus, gbps, _, _ = instance_properties(CALIBRATION_INSTANCE)
    return vcpus, gbps * 125 * base.network_payload, compute_rate(CALIBRATION_PRESET)[0]


def fit(cells: list[Cell] | tuple[Cell, ...], base: Model = MODEL) -> dict[str, Fitted]:
    """The fitted constants of ``estimate.Model`` from ``cells``, each by its rule (see each ``Fitted.rule``).
    A constant whose cells are all absent takes its prior (a public figure, or a sibling constant) with a range."""
    readers, network, rate = _calibration_premise(base)
    out: dict[str, Fitted] = {}
    ttfb = mountpoint()[("standard", "time_to_first_byte_read_small_file")]
    s3_low, s3_high = ttfb["min"] / ttfb["median"], ttfb["max"] / ttfb["median"]
    s3_source = "S3's first byte varies as Mountpoint's CI shows on EC2"

    def of(mode: str, keep) -> list[Cell]:
        return [c for c in cells if c.mode == mode and keep(c)]

    def put(name: str, value: float, used: list[Cell], rule: str, low: float | None = None,
            high: float | None = None, why: str = "") -> float:
        labels = tuple(c.label for c in used)
        if len(labels) >= 2:
            low = high = None
            why = ""
        out[name] = Fitted(name, value, labels, rule, low, high, why)
        return value

    def one_cell(used: list[Cell]) -> str:
        return (f"rests on one cell ({used[0].label}): its repeats' range" if used else
                "no cell left: a prior")

    used = of(FSX, lambda c: True)
    mount = put("mount_fixed", mean(c.download for c in used) if used else base.mount_fixed, used,
                "FSx's mount: the FSx cells' Downloading")
    used = [c for c in cells if c.mode in (FILE, FSX) or (c.mode == FASTFILE and c.sharded)]
    train_fixed = put("train_fixed", mean(c.train - c.samples / rate for c in used), used,
                      "the script's start: compute-bound cells' training less samples at the preset's rate")
    starts = {}
    for mode, name in ((FASTFILE, "startup_fastfile"), (FSX, "startup_fsx")):
        used = of(mode, lambda c: c.files <= FEW_FILES and c.download < SHORT_DOWNLOAD)
        starts[mode] = put(name, mean(c.download + c.other for c in used), used,
                           f"{mode}'s start-up: its cells with few files' Downloading + other")
    used = of(FILE, lambda c: c.download < SHORT_DOWNLOAD)
    rule = "File's start-up: File cells with a short download, Downloading + other"
    if used:
        value = mean(c.download + c.other for c in used)
        put("startup_file", value, used, rule, value - used[0].half_range, value + used[0].half_range, one_cell(used))
    else:
        short = [c.download + c.other for c in cells if c.download < SHORT_DOWNLOAD and c.files <= FEW_FILES]
        put("startup_file", mean(starts.values()), used, rule, min(short), max(short),
            "no File cell left: FastFile's and FSx's start-ups, the range of every short-download cell's")
    used = of(FILE, lambda c: c.download >= SHORT_DOWNLOAD)
    put("other_floor", mean(c.other for c in used), used, "upload and shutdown: File cells with a long download, other")
    # File's download on shards = start + bytes / throughput: the two shard cells (1.1 GB and 54 GB) solve both.
    shards = of(FILE, lambda c: c.sharded)
    large = [c for c in shards if c.bytes >= LARGE_BYTES]
    small = [c for c in shards if c.bytes < LARGE_BYTES]
    fixed_rule = "File's copy start: File on shards, Downloading less the bytes"
    ebs_rule = "File onto EBS: File on shards, the bytes over Downloading less the start"
    if large and small:
        xs, ys = [c.bytes / 1e6 for c in shards], [c.download for c in shards]
        x0, y0 = mean(xs), mean(ys)
        slope = sum((x - x0) * (y - y0) for x, y in zip(xs, ys)) / sum((x - x0) ** 2 for x in xs)
        ebs, fixed = 1 / slope, y0 - slope * x0
        put("file_download_fixed", fixed, small, fixed_rule, max(0.0, fixed - small[0].half_range),
            fixed + small[0].half_range, one_cell(small))
        put("ebs_download_mbps", ebs, large, ebs_rule,
            *(large[0].bytes / 1e6 / (large[0].download - fixed + d) for d in (large[0].half_range, -large[0].half_range)),
            one_cell(large))
    elif large:
        fixed = put("file_download_fixed", mount, [], fixed_rule, 0.0, 2 * mount,
                    "no cell left: FSx's mount, from none to twice it")
        ebs = put("ebs_download_mbps", mean(c.bytes / 1e6 / (c.download - fixed) for c in large), large, ebs_rule,
                  *(large[0].bytes / 1e6 / (large[0].download - fixed + d) for d in (large[0].half_range, -large[0].half_range)),
                  one_cell(large))
    else:
        ebs = put("ebs_download_mbps", EBS_PRIOR_MBPS[0], [], ebs_rule, EBS_PRIOR_MBPS[1], EBS_PRIOR_MBPS[2],
                  "no cell left: SageMaker's \"about 5 minutes\" for 50 GB of 100 MB shards, read as 4-6 minutes")
        fixed = (mean(c.download - c.bytes / 1e6 / ebs for c in small) if small else mount)
        put("file_download_fixed", fixed, small, fixed_rule,
            *((max(0.0, fixed - small[0].half_range), fixed + small[0].half_range) if small else (0.0, 2 * mount)),
            one_cell(small))
    throughput = min(ebs, network)
    used = of(FILE, lambda c: not c.sharded)
    value = (mean((c.download - fixed - c.bytes / 1e6 / throughput) / c.files for c in used) if used
             else base.file_per_object)
    low = high = None
    if len(used) < 2:
        # A copy is request latency over parallel downloads: it moves as S3's first byte does, and with the repeats.
        wobble = used[0].half_range / used[0].files if used else 0.0
        low, high = (value - wobble) * s3_low, (value + wobble) * s3_high
    put("file_per_object", value, used, "File's per-object copy: File on JPEGs, Downloading less start and bytes, "
        "per object", low, high, f"{one_cell(used)}, and {s3_source}")
    used = of(FASTFILE, lambda c: c.files <= FEW_FILES)
    put("fastfile_fixed", mean(c.download - c.files / base.fastfile_list_rate for c in used), used,
        "FastFile's mount: its cells with few files, Downloading less the listing")
    used = of(FASTFILE, lambda c: not c.sharded)
    stream = min(base.s3_stream_mbps, network)
    value = (mean((c.train - train_fixed - c.bytes / 1e6 / stream) * readers / c.files for c in used) if used
             else base.fastfile_get_latency)
    if len(used) < 2:
        # The S3 share of the GET moves as S3's first byte does; the cell's repeats move the rest.
        cell = used[0] if used else None
        wobble = cell.half_range * readers / cell.files if cell else 0.0
        s3 = base.s3_standard_first_byte
        low, high = value - wobble - s3 * (1 - s3_low), value + wobble + s3 * (s3_high - 1)
    else:
        low = high = None
    put("fastfile_get_latency", value, used, "FastFile's per-file GET: FastFile on JPEGs, training less start and "
        "bytes, per file and reader", low, high, f"{one_cell(used)}, and {s3_source}" if len(used) < 2 else "")
    return out


def model_of(fitted: dict[str, Fitted], base: Model = MODEL) -> Model:
    return replace(base, **{name: f.value for name, f in fitted.items()})


# ---- ranges of one estimate ------------------------------------------------------------------------

@dataclass(frozen=True)
class Error:
    """A source's out-of-sample error (predicted / measured - 1, each scenario predicted by a fit on the others)
    and its repeats' run-to-run half-range, relative."""
    under: float          # the largest under-prediction (<= 0)
    over: float           # the largest over-prediction (>= 0)
    spread: float
    scenarios: tuple[str, ...]

    def widen(self, fast: float, slow: float) -> tuple[float, float]:
        """Where one run may measure, from the model at its fast and slow ends: the model's error and the repeats'
        spread are independent, so they add in quadrature (root-sum-square)."""
        above = 1 / (1 + self.under) - 1      # a measurement this much above the prediction
        below = 1 - 1 / (1 + self.over)       # ... or this much below it
        return (fast * (1 - math.hypot(below, self.spread)), slow * (1 + math.hypot(above, self.spread)))

    def describe(self) -> str:
        return (f"out-of-sample error {self.under:+.1%} to {self.over:+.1%} (each of {len(self.scenarios)} scenarios "
                f"predicted from the others), repeats ±{self.spread:.1%}")


def _corner(model: Model, ranges: dict[str, Assumption], slow: bool, storage: str) -> Model:
    """The model with every ranged constant at the end that lengthens the job (``slow``) or shortens it."""
    values = {}
    for name, a in ranges.items():
        larger_is_slower = name not in FASTER_WHEN_LARGER
        if name in ("s3_standard_first_byte", "fastfile_s3_share") and storage == EXPRESS:
            larger_is_slower = False   # on Express it sets how much the directory bucket saves
        values[name] = a.high if larger_is_slower == slow else a.low
    return replace(model, **values)


def _usd(estimate: Estimate, billable: float) -> float:
    """The estimate's dollars at other billable seconds: time-billed parts scale, requests stay."""
    requests = estimate.cost_usd.get("requests", 0.0)
    timed = estimate.cost_usd["total"] - requests
    return requests + timed * (billable / estimate.billable_seconds if estimate.billable_seconds else 1.0)


@dataclass
class Range:
    """Where an estimate's billable seconds and job dollars may fall, and the evidence that says so."""
    billable_low: float
    billable_high: float
    usd_low: float
    usd_high: float
    measured: bool                    # the source has measured cells (its own out-of-sample error)
    error: Error
    # What moves it: each ranged constant (with its value) that alone at its slow end moves the estimate by 0.5% or
    # more, and by how much, largest first.
    moves: list[tuple[Assumption, float, float]] = field(default_factory=list)

    def basis(self) -> str:
        if self.measured:
            return f"measured cells (Bencher, {CALIBRATION_INSTANCE}, one epoch): {self.error.describe()}"
        return f"no measured cell: the measured sources' {self.error.describe()}, and what it assumes"

    @property
    def evidence(self) -> list[str]:
        return [self.basis()] + [f"{a.describe(value)}: {share:+.0%} at its slow end" for a, value, share in self.moves]

    def summary(self) -> str:
        """One short line: the basis and what moves it (the ranges themselves are printed once, apart)."""
        e = self.error
        text = (f"measured cells: out-of-sample {e.under:+.1%} to {e.over:+.1%}, repeats ±{e.spread:.1%}" if self.measured
                else f"no measured cell: the model's {e.under:+.1%} to {e.over:+.1%}, repeats ±{e.spread:.1%}")
        moved = ", ".join(f"{a.what} {share:+.0%}" for a, _, share in self.moves)
        return text + (f"; at its slow end: {moved}" if moved else "")

    def to_dict(self) -> dict[str, Any]:
        return {"billable_seconds": [round(self.billable_low, 1), round(self.billable_high, 1)],
                "job_usd": [round(self.usd_low, 4), round(self.usd_high, 4)],
                "basis": "measured cells" if self.measured else "assumptions",
                "out_of_sample_error": [round(self.error.under, 4), round(self.error.over, 4)],
                "repeats_spread": round(self.error.spread, 4), "evidence": self.evidence}


@dataclass
class Calibration:
    cells: tuple[Cell, ...]
    fitted: dict[str, Fitted]
    folds: list["Fold"]

    def error(self, mode: str, without: str | None = None) -> Error:
        """``mode``'s out-of-sample error over the folds (but ``without``'s) and its cells' spread."""
        errors = [p.error for f in self.folds if f.scenario != without for p in f.predictions if p.mode == mode]
        spread = max((c.spread for c in self.cells if c.mode == mode and c.scenario != without), default=0.0)
        return Error(min([0.0, *errors]), max([0.0, *errors]), spread,
                     tuple(f.scenario for f in self.folds if f.scenario != without))

    def widest(self) -> Error:
        """The measured sources' error together: what a source without a cell inherits."""
        each = [self.error(m) for m in MEASURED_MODES]
        return Error(min(e.under for e in each), max(e.over for e in each), max(e.spread for e in each),
                     each[0].scenarios)

    def ranges(self, fitted: dict[str, Fitted] | None = None) -> dict[str, Assumption]:
        """Every ranged constant: the assumptions, and the fitted constants without a cross-validated figure."""
        out = dict(assumptions())
        for f in (fitted or self.fitted).values():
            a = f.as_assumption()
            if a is not None:
                out[f.name] = a
        return out


@dataclass
class Prediction:
    scenario: str
    mode: str
    measured: float
    predicted: float
    low: float = 0.0
    high: float = 0.0
    not_cross_validated: tuple[str, ...] = ()   # constants resting on one cell or none in this fold

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1

    @property
    def inside(self) -> bool:
        return self.low <= self.measured <= self.high


@dataclass
class Fold:
    scenario: str                     # left out
    fitted: dict[str, Fitted]         # on the other scenarios
    predictions: list[Prediction]


def _at_cell(cell: Cell, model: Model) -> Estimate:
    return estimate_mode(cell.mode, cell.shape, instance_type=CALIBRATION_INSTANCE,
                         rate=compute_rate(CALIBRATION_PRESET)[0], prices=PriceTable(), model=model)


def leave_one_scenario_out(cells: tuple[Cell, ...] | None = None, base: Model = MODEL) -> list[Fold]:
    """Each scenario predicted by the model fitted on the others, with the interval that fold's evidence gives: the
    other folds' out-of-sample error and the source's other cells' spread, and the ranges of the assumptions and of
    the constants that rest on one cell (or none) once the scenario is out. The left-out cells never enter their
    own interval."""
    cells = cells or measured_cells()
    folds = []
    for scenario in sorted({c.scenario for c in cells}):
        fitted = fit([c for c in cells if c.scenario != scenario], base)
        model = model_of(fitted, base)
        folds.append(Fold(scenario, fitted, [
            Prediction(c.scenario, c.mode, c.total, _at_cell(c, model).billable_seconds,
                       not_cross_validated=tuple(n for n, f in fitted.items() if not f.cross_validated))
            for c in cells if c.scenario == scenario]))
    whole = Calibration(cells, fit(cells, base), folds)
    for fold in folds:
        model = model_of(fold.fitted, base)
        ranges = whole.ranges(fold.fitted)
        for p in fold.predictions:
            cell = next(c for c in cells if c.scenario == p.scenario and c.mode == p.mode)
            fast = _at_cell(cell, _corner(model, ranges, False, STANDARD)).billable_seconds
            slow = _at_cell(cell, _corner(model, ranges, True, STANDARD)).billable_seconds
            p.low, p.high = whole.error(p.mode, without=fold.scenario).widen(fast, slow)
    return folds


@dataclass(frozen=True)
class InUse:
    """The calibration an answer rests on: the shipped one (Bencher's cells, the public figures), or a file `dslab
    calibrate` wrote from a user's own AWS runs. A user's file sets the model's constants, sets the range of each
    constant it calibrated to every value the runs resting on it support (within their noise), and widens every
    estimate's range to the error it measured on those runs, each predicted without it."""
    model: Model = MODEL
    source: str | None = None                              # the file; None: shipped
    calibrated: tuple[tuple[str, float, float], ...] = ()  # (constant, low, high): every value its jobs support
    error: tuple[float, float] | None = None               # (under, over) on the user's runs, each left out
    document: Any = field(default=None, compare=False, hash=False)   # the file as written (an experiment keeps it)

    def describe(self) -> str:
        if self.source is None:
            return "the shipped calibration (Bencher's 12 cells and public figures)"
        names = ", ".join(name for name, _, _ in self.calibrated)
        count = len(self.calibrated)
        return (f"calibration {self.source}, fitted on your AWS runs: {count} constant{'s' if count != 1 else ''}"
                + (f" ({names})" if names else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source or "shipped", "calibrated": [name for name, _, _ in self.calibrated],
                "line": self.describe()}

    def ranges(self, shipped: dict[str, Assumption]) -> dict[str, Assumption]:
        """The ranged constants with each calibrated one's range narrowed to what the runs asked for."""
        out = dict(shipped)
        for name, low, high in self.calibrated:
            found = out.get(name)
            if found is not None:
                out[name] = replace(found, low=low, high=high, source=f"your runs ({self.source})")
        return out

    def widen(self, error: Error) -> Error:
        if self.error is None:
            return error
        return Error(min(error.under, self.error[0]), max(error.over, self.error[1]), error.spread, error.scenarios)


SHIPPED = InUse()

# The calibration file `dslab calibrate` writes (core/measured.py calibration_document): this version's shape.
CALIBRATION_VERSION = 1


def constant_names() -> list[str]:
    """Every constant of ``estimate.Model``: what a calibration file may set."""
    return [f.name for f in fields(Model)]


def in_use_from_document(document: Any, source: str, where: str = "--calibration") -> InUse:
    """The calibration a file `dslab calibrate` wrote, as answers use it (ConfigError, one line, for anything else)."""
    if not isinstance(document, dict) or document.get("written_by") != "dslab calibrate":
        raise ConfigError(where, f"{source} is not a calibration file: write one with "
                                 "`dslab calibrate --results R --out FILE`")
    if document.get("calibration_version") != CALIBRATION_VERSION:
        raise ConfigError(f"{where}: calibration_version",
                          f"version {document.get('calibration_version')!r}; this dslab reads {CALIBRATION_VERSION}: "
                          "write it again with this dslab's `dslab calibrate`")
    values = document.get("model")
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: model", "missing: write the file again with `dslab calibrate`")
    unknown = sorted(set(values) - set(constant_names()))
    if unknown:
        raise ConfigError(f"{where}: model.{unknown[0]}", "not a constant of this dslab's model",
                          constant_names())
    def positive(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf

    bad = [k for k, v in values.items() if not positive(v)]
    if bad:
        raise ConfigError(f"{where}: model.{bad[0]}", f"{values[bad[0]]!r}: every constant is a positive number")
    constants = document.get("constants")
    if not isinstance(constants, list):
        raise ConfigError(f"{where}: constants", "missing: write the file again with `dslab calibrate`")
    calibrated = []
    for i, c in enumerate(constants):
        if not isinstance(c, dict):
            raise ConfigError(f"{where}: constants[{i}]", "not a constant's record: write the file again")
        name = c.get("name")
        # A value changed by hand is refused, never passed over: every record's is a positive number, and a
        # calibrated one is the model's and lies in its own range.
        if "calibrated" in c and not positive(c["calibrated"]):
            raise ConfigError(f"{where}: constants[{i}].calibrated", f"{c['calibrated']!r} for {name}: a constant's "
                              "value is a positive number; set it back, or write the file again with `dslab calibrate`")
        if c.get("status") != "calibrated" or name not in values:
            continue
        if c.get("calibrated") != values[name]:
            raise ConfigError(f"{where}: constants[{i}].calibrated", f"{c.get('calibrated')!r} for {name}, where "
                              f"model.{name} is {values[name]!r}: they are one value; set both, or write the file "
                              "again")
        per_job = c.get("per_job") or {}
        if not isinstance(per_job, dict) or not all(positive(v) for v in per_job.values()):
            raise ConfigError(f"{where}: constants[{i}].per_job", "each job's value is a positive number: write the "
                                                                  "file again")
        found = c.get("range")
        if found is not None:
            if not (isinstance(found, list) and len(found) == 2 and all(positive(v) for v in found)
                    and found[0] <= values[name] <= found[1]):
                raise ConfigError(f"{where}: constants[{i}].range", f"{found!r} for {name}: two positive numbers, low "
                                  f"to high, around its value {values[name]!r}; set it back, or write the file again")
            calibrated.append((name, float(found[0]), float(found[1])))
            continue
        # A file without a range (written before ranges were): what the jobs asked for alone and the value fitted.
        asked = [float(v) for v in per_job.values()] + [float(values[name])]
        calibrated.append((name, min(asked), max(asked)))
    found = ((document.get("out_of_sample") or {}).get("your_runs") or {})
    found = found.get("calibrated_without_it") if isinstance(found, dict) else None
    error = None
    if found is not None:
        under, over = (found.get("under"), found.get("over")) if isinstance(found, dict) else (None, None)
        if not (isinstance(under, (int, float)) and isinstance(over, (int, float)) and -1 < under <= 0 <= over < math.inf):
            raise ConfigError(f"{where}: out_of_sample.your_runs.calibrated_without_it",
                              "under (-1 to 0) and over (0 or more) are the error on your runs: write the file again")
        error = (float(under), float(over))
    return InUse(model=replace(MODEL, **{k: float(v) for k, v in values.items()}), source=source,
                 calibrated=tuple(calibrated), error=error, document=document)




@lru_cache(maxsize=None)
def calibration() -> Calibration:
    """The model on every measured cell, and its folds."""
    cells = measured_cells()
    return Calibration(cells, fit(cells), leave_one_scenario_out(cells))


def estimate_range(estimate: Estimate, shape: DatasetShape, **kwargs) -> Range:
    """``estimate``'s range: ``estimate_mode`` again at the ranged constants' fast and slow ends (``kwargs``: what
    the estimate was made with, less the mode, the shape and the storage), widened by the out-of-sample error."""
    cal = calibration()
    in_use = kwargs.pop("calibration", None) or SHIPPED
    ranges = in_use.ranges(cal.ranges())
    storage = estimate.storage or STANDARD
    kwargs = {k: v for k, v in kwargs.items() if k not in ("model", "storage")}
    base = kwargs.pop("base", in_use.model)
    fast = estimate_mode(estimate.mode, shape, storage=storage, model=_corner(base, ranges, False, storage), **kwargs)
    slow = estimate_mode(estimate.mode, shape, storage=storage, model=_corner(base, ranges, True, storage), **kwargs)
    measured = estimate.mode in MEASURED_MODES and storage == STANDARD
    error = in_use.widen(cal.error(estimate.mode) if measured else cal.widest())
    low, high = error.widen(fast.billable_seconds, slow.billable_seconds)
    low, high = min(low, estimate.billable_seconds), max(high, estimate.billable_seconds)
    moves = []
    for name, a in ranges.items():
        alone = estimate_mode(estimate.mode, shape, storage=storage, model=_corner(base, {name: a}, True, storage),
                              **kwargs).billable_seconds
        share = alone / estimate.billable_seconds - 1 if estimate.billable_seconds else 0.0
        if abs(share) >= 0.005:
            moves.append((a, getattr(base, name), share))
    moves.sort(key=lambda m: -abs(m[2]))
    return Range(low, high, _usd(estimate, low), _usd(estimate, high), measured, error, moves)


def with_range(estimate: Estimate, shape: DatasetShape, **kwargs) -> Estimate:
    """The estimate with its ``range`` set (see ``estimate_range``)."""
    estimate.range = estimate_range(estimate, shape, **kwargs)
    return estimate


__all__ = ["CALIBRATION_VERSION", "SHIPPED", "Assumption", "Calibration", "InUse", "constant_names", "in_use_from_document", "Cell", "Error", "Fitted", "Fold", "Prediction", "Range", "assumptions",
           "calibration", "estimate_range", "fit", "leave_one_scenario_out", "measured_cells", "model_of",
           "mountpoint", "with_range"]
