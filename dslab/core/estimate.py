"""Predict a training job's Downloading / Training / Other seconds, billable time and dollars, per mode,
before anything runs.

The model (every constant below names its source):

    billable = max(downloading + OTHER_FLOOR, STARTUP[mode]) + training

- STARTUP[mode]: instance start, image pull, container and data-source set-up. File mode's image
  pull overlaps its download (the calibration shows File's "Other" shrinking to ~50 s when the
  download is long), so only the part of start-up not hidden by the download is paid.
- downloading: File copies every object to the volume (per-object overhead plus bytes at the
  instance's download throughput); FastFile lists object metadata (~5,500 objects/s, the post);
  Pipe, FSx and EFS mount or open a stream in a few seconds.
- training = TRAIN_FIXED + max(compute, I/O) per epoch, where compute = samples / the model's rate
  and I/O is what the data source needs to deliver the epoch (per-file latency spread over the
  readers, plus bytes at the source's throughput). FSx's first epoch lazy-loads from S3.

Fitted on the measured cells in ``dslab/contracts/bencher-measured.csv`` (ml.p3.2xlarge, ResNet-50, one
epoch; a vendored copy of ../shared/calibration/bencher-measured.csv, read by ``calibration_cells``);
the test ``test_estimate_calibration`` computes the error on those cells. Pipe and EFS have no measured
cells: their constants are public figures and say so in the assumptions.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .limits import EXPRESS_COPY_THREADS
from .modes import EFS, EXPRESS, FASTFILE, FILE, FSX, MODES, PIPE, S3_READ_MODES, SCRIPT, STANDARD, source_label
from .instances import INSTANCES as INSTANCE_TABLE
from .premise import (LARGE_FILE_BYTES, MAX_COMPUTE_RATE, SAMPLE_BYTES, VOLUME_HEADROOM, DatasetShape, compute_rate,
                      file_share_bytes, volume_for)
from .prices import HOURS_PER_MONTH, PriceTable, express_staging_cost, job_cost
from .provisioning import EFS_PER_CLIENT_MIBPS, MIB, Provisioning, as_deployed

# ---- constants -------------------------------------------------------------------------------
# Start-up per mode, seconds (fitted: calibration "other" + "download" where the download is short).
# Script has no channel to set up: FastFile's start-up taken for it (assumption, no measured cell).
STARTUP = {FILE: 220.0, FASTFILE: 214.0, PIPE: 214.0, FSX: 219.0, EFS: 219.0, SCRIPT: 214.0}
OTHER_FLOOR = 50.0            # upload and shutdown, never hidden (calibration: File "other" 46-53 s)
TRAIN_FIXED = 21.0            # framework and model start inside the script (calibration: 1x vs 50x training)
FILE_DOWNLOAD_FIXED = 12.0    # File mode: start of the copy (calibration, 10-shard cell)
FILE_PER_OBJECT = 0.0077      # File mode: seconds per object copied (calibration: 30,607 JPEGs in ~236 s)
EBS_DOWNLOAD_MBPS = 156.0     # File mode onto EBS (calibration: 54 GB in 346 s; the post: EBS-backed p3 <= 250 MB/s)
NVME_DOWNLOAD_MBPS = 1000.0   # File mode onto NVMe instance storage (post: "NVMe-backed ones go higher"; assumption)
FASTFILE_LIST_RATE = 5500.0   # objects/s listed before the script starts (the post)
FASTFILE_FIXED = 15.0         # FastFile mount (calibration: 16-19 s "Downloading")
MOUNT_FIXED = 12.0            # FSx / EFS mount, Pipe set-up (calibration: FSx 10-14 s)
FASTFILE_GET_LATENCY = 0.042  # seconds per small-file GET through FastFile, per reader (calibration: 30,607 files, 8 readers, 161 s)
S3_STREAM_MBPS = 1000.0       # large sequential reads through FastFile by several workers (the post: "exceed 1 GB/s")
PIPE_OBJECT_LATENCY = 0.020   # Pipe: S3 GET latency per object, prefetched 8 deep (assumption: typical S3 first-byte latency)
PIPE_MBPS = 300.0             # Pipe stream throughput (assumption; FastFile superseded it)
FSX_FIRST_READ_LATENCY = 0.010   # FSx lazy load: first read of a file fetches it from S3 (assumption)
FSX_READ_LATENCY = 0.0005     # FSx cached read, sub-millisecond (the post: "low-latency")
FSX_MBPS_PER_TIB = 200.0      # Scratch 2 baseline throughput per TiB (AWS FSx for Lustre performance docs)
FSX_IMPORT_RATE = 2_000_000 / 3600.0   # objects indexed per second on creation (the post: ~1 h per ~2 M objects)
# S3 Express One Zone: "consistent single-digit millisecond first-byte read and write request latencies —
# up to 10x faster than S3 Standard" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-performance.html).
# No measured cell: FastFile's measured 42 ms per small file is taken as ~40 ms of S3 Standard first-byte
# latency plus ~2 ms of the FUSE mount, and Express replaces the 40 ms by 5 ms (assumptions, labelled).
S3_STANDARD_FIRST_BYTE = 0.040  # assumption: the S3 share of FASTFILE_GET_LATENCY
EXPRESS_FIRST_BYTE = 0.005      # assumption: "single-digit millisecond", taken as 5 ms
EXPRESS_COPY_LATENCY = 0.030    # assumption: one CopyObject from S3 Standard into the directory bucket
EXPRESS_STAGING_MBPS = 1000.0   # assumption: the staging Lambda's copies together (server-side copies)
# Script mode (the script reads S3 itself; training/dslab_train/s3source.py): its own GETs, many at once.
SCRIPT_CONCURRENCY = 64         # the lab's script: JPEG GETs in flight (s3_concurrency)
SCRIPT_SHARD_CONNECTIONS = 8    # the lab's script: 4 shards at once, 2 ranged GETs of 8 MiB ahead in each
# "Make one concurrent request for each 85-90 MB/s of desired network throughput" (S3 performance
# guidelines, https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/horizontal-scaling-and-request-parallelization-for-high-throughput.html).
S3_CONNECTION_MBPS = 87.5
SCRIPT_LIST_PAGE_SECONDS = 0.1  # assumption: one ListObjectsV2 page (1,000 keys), listed in sequence once per job
EFS_READ_LATENCY = 0.003      # EFS Max I/O per-file open+read latency (AWS: Max I/O trades latency for scale; assumption)
EFS_BURST_MBPS = 104.9        # EFS Bursting: 100 MiB/s burst for file systems under 1 TiB (AWS EFS performance docs)

# Instance properties (vCPUs: the readers; sustained network Gbit/s, since a run of hours outlasts an "up
# to" size's burst credits; NVMe instance storage): a view of the instance table (instances.py), which names
# each row's source. The calibration cells (ml.p3.2xlarge) are compute- or download-bound, so the sustained
# figure leaves them as they were.
INSTANCES = {name: (i.vcpus, i.network_baseline_gbps, i.nvme_gb > 0) for name, i in INSTANCE_TABLE.items()}
NETWORK_PAYLOAD = 0.8         # the share of the network's bits that carry data (assumption)


@dataclass
class Estimate:
    mode: str
    downloading: float
    training: float
    other: float
    billable_seconds: float
    cost_usd: dict[str, float]
    assumptions: list[str] = field(default_factory=list)
    bound: str = "compute"
    fsx_provisioning_seconds: float | None = None
    storage: str = STANDARD
    # Express: copying the dataset into the directory bucket once (not billed to the job).
    staging_seconds: float | None = None
    staging_cost_usd: float | None = None
    # Accelerator utilisation as DLIO computes it (MLPerf Storage runs DLIO): the mean of the epochs' AU.
    au_percent: float = 100.0
    provisioning: Provisioning | None = None
    instance_count: int = 1
    # Each epoch's seconds on one instance and its AU (compute over that epoch's wall time), in order.
    epoch_seconds: list[float] = field(default_factory=list)
    au_percent_per_epoch: list[float] = field(default_factory=list)
    # Why this source cannot run as premised (a volume or a file system that cannot hold the data): then it is
    # never priced as an answer, only refused with what it would need.
    blocker: str | None = None
    volume_gb: int | None = None      # what each instance's storage holds (NVMe capacity, or the EBS volume)

    @property
    def wall_seconds(self) -> float:
        """One instance's clock from start to end."""
        return (self.downloading + self.training + self.other) / max(1, self.instance_count)

    @property
    def source(self) -> str:
        return source_label(self.mode, self.storage)

    def to_dict(self) -> dict[str, Any]:
        out = {"mode": self.mode, "downloading": round(self.downloading, 1), "training": round(self.training, 1),
               "other": round(self.other, 1), "billable_seconds": round(self.billable_seconds, 1),
               "cost_usd": self.cost_usd, "bound": self.bound, "au_percent": round(self.au_percent, 1),
               "au_percent_per_epoch": [round(a, 1) for a in self.au_percent_per_epoch],
               "assumptions": self.assumptions, **({"blocker": self.blocker} if self.blocker else {}),
               **({"volume_gb": self.volume_gb} if self.volume_gb is not None else {})}
        if self.provisioning is not None:
            out["provisioning"] = self.provisioning.to_dict()
        if self.fsx_provisioning_seconds is not None:
            out["fsx_provisioning_seconds"] = round(self.fsx_provisioning_seconds, 1)
        if self.storage == EXPRESS:
            out.update(storage=EXPRESS, source=self.source, staging_seconds=round(self.staging_seconds or 0.0, 1),
                       staging_cost_usd=round(self.staging_cost_usd or 0.0, 4))
        return out


def instance_properties(instance_type: str) -> tuple[int, float, bool, str | None]:
    if instance_type in INSTANCES:
        vcpus, gbps, nvme = INSTANCES[instance_type]
        return vcpus, gbps, nvme, None
    return 8, 10.0, False, f"{instance_type} is not in the instance table: assumed 8 vCPUs, 10 Gbit/s, EBS volume"


def estimate_mode(mode: str, shape: DatasetShape, *, instance_type: str = "ml.p3.2xlarge", instance_count: int = 1,
                  epochs: int = 1, rate: float, volume_size_gb: int | None = None, prices: PriceTable,
                  fsx_capacity_gib: int = 1200, efs_provisioned_mibps: float | None = None,
                  storage: str = STANDARD, accelerators: int | None = None,
                  provisioning: Provisioning | None = None, sharded: bool | None = None,
                  readers: int | None = None) -> Estimate:
    """One job of ``instance_count`` instances, each running ``accelerators`` (default: the instance
    table's count, at least one) at ``rate`` samples/s, on the sources as ``provisioning`` has them (default:
    the lab as deployed, FSx Scratch 2 at ``fsx_capacity_gib``). The instances share each epoch's samples
    (data parallel); File and Pipe each instance's share only when ``sharded`` (ShardedByS3Key; the default
    for several instances), the whole channel otherwise. A shared source's limits (S3 GETs per prefix, the
    directory bucket's reads, FSx's and EFS's throughput) are divided among the instances. ``readers``: files
    one instance reads at once (default its vCPUs; a DLIO workload's read_threads per accelerator, dlio.py).
    ``volume_size_gb``: the EBS volume asked for (None: the default, raised to what File mode's share needs;
    NVMe types have their fixed instance storage whatever is asked, premise.volume_for). A source that cannot hold
    the data as premised (File's share past the volume, FSx smaller than the dataset) gets a ``blocker`` and is
    never an answer. `dslab size` is this model searched over instance counts and provisioning."""
    if mode not in MODES:
        raise ConfigError("--mode", f"unknown mode {mode!r}", MODES)
    if storage == EXPRESS and mode not in S3_READ_MODES:
        raise ConfigError("--mode", f"{mode} does not read from S3: S3 Express One Zone serves File, FastFile, Pipe "
                          "and scripts that read S3 themselves", S3_READ_MODES)
    express = storage == EXPRESS
    lab = provisioning or as_deployed(fsx_capacity_gib, efs_provisioned_mibps)
    # Seconds of S3 request latency the S3 modes save per object on the directory bucket.
    latency_cut = (S3_STANDARD_FIRST_BYTE - EXPRESS_FIRST_BYTE) if express else 0.0
    if epochs < 1:
        raise ConfigError("--epochs", "must be at least 1")
    vcpus, gbps, nvme, instance_note = instance_properties(instance_type)
    samples, sample_note = shape.sample_count()
    assumptions = [note for note in (instance_note, sample_note) if note]
    hosts = max(1, instance_count)
    sharded = hosts > 1 if sharded is None else sharded
    table_row = INSTANCE_TABLE.get(instance_type)
    per_host = accelerators or max(1, table_row.accelerators if table_row else 1)
    network_mbps = gbps * 125 * NETWORK_PAYLOAD
    # What one instance reads per epoch: its share of the samples (File and Pipe: the whole channel unless sharded).
    megabytes = shape.bytes / 1e6 / hosts
    files = -(-shape.files // hosts)
    whole = (shape.bytes / 1e6, shape.files) if not sharded else (megabytes, files)
    compute = samples / hosts / (rate * per_host)
    if per_host > 1 or hosts > 1:
        assumptions.append(f"{hosts} instance(s) x {per_host} accelerator(s), each at the compute's rate; every instance "
                           "reads its 1/N share of each epoch; shared sources divide their throughput among the instances")
    if hosts > 1 and mode in (FILE, PIPE):
        assumptions.append(f"{mode}: " + ("ShardedByS3Key: each instance gets its 1/N of the objects" if sharded else
                                          "FullyReplicated: every instance gets the whole channel"))
    if readers is not None and not (isinstance(readers, int) and readers >= 1):
        raise ConfigError("readers", f"{readers!r}: give the files one instance reads at once, 1 or more")
    readers = readers or vcpus
    fsx_provisioning = None
    # The cluster's S3 requests per epoch, against what the bucket serves: GETs per prefix (standard) or
    # reads per directory bucket (Express). Large objects are read in 8 MiB ranges.
    small = shape.mean_file_bytes <= LARGE_FILE_BYTES
    requests_per_epoch = shape.files if small else max(shape.files, shape.bytes / (8 * 2**20))
    bucket_rate = lab.express_reads_per_second if express else lab.s3_gets_per_second()

    def s3_shared(seconds: float, requests: float = requests_per_epoch) -> float:
        """The epoch's I/O time once the bucket's shared request rate is counted."""
        return max(seconds, requests / bucket_rate)

    blocker = None
    volume = volume_for(instance_type, volume_size_gb,
                        file_share_bytes(shape.bytes, hosts, sharded) if mode == FILE else None)
    if mode == FILE:
        throughput = min(NVME_DOWNLOAD_MBPS if nvme else EBS_DOWNLOAD_MBPS, network_mbps)
        # File's per-object cost is taken as request latency over its parallel downloads: on Express it
        # shrinks with the first-byte latency (assumption, no measured cell).
        per_object = FILE_PER_OBJECT * (EXPRESS_FIRST_BYTE / S3_STANDARD_FIRST_BYTE if express else 1.0)
        copied_mb, copied_files = whole
        # The cluster GETs every object once when sharded, once per instance when every instance copies it all.
        downloading = FILE_DOWNLOAD_FIXED + s3_shared(copied_mb / throughput + copied_files * per_object,
                                                      shape.files * (1 if sharded else hosts))
        local_read = megabytes / (2000.0 if nvme else 250.0)
        io_epochs = [local_read] * epochs
        assumptions.append(f"File: downloads {copied_mb / 1e3:,.2f} GB in {copied_files:,} objects onto each instance's "
                           f"{volume.describe()} at {throughput:,.0f} MB/s plus {per_object * 1000:.1f} ms per object")
        blocker = volume.problem()
    elif mode == FASTFILE:
        downloading = FASTFILE_FIXED + shape.files / FASTFILE_LIST_RATE
        latency = FASTFILE_GET_LATENCY - latency_cut
        per_epoch = s3_shared(files * latency / readers + megabytes / min(S3_STREAM_MBPS, network_mbps))
        io_epochs = [per_epoch] * epochs
        assumptions.append(f"FastFile: lists {FASTFILE_LIST_RATE:,.0f} objects/s; each file read is a GET of "
                           f"~{latency * 1000:.0f} ms spread over {readers} readers; streams up to {S3_STREAM_MBPS:.0f} MB/s")
    elif mode == PIPE:
        downloading = MOUNT_FIXED
        latency = EXPRESS_FIRST_BYTE if express else PIPE_OBJECT_LATENCY
        streamed_mb, streamed_files = whole
        per_epoch = s3_shared(streamed_files * latency / 8 + streamed_mb / min(PIPE_MBPS, network_mbps),
                              requests_per_epoch * (1 if sharded else hosts))
        io_epochs = [per_epoch] * epochs
        assumptions.append(f"Pipe: streams each epoch from S3 at ~{PIPE_MBPS:.0f} MB/s with ~{latency * 1000:.0f} ms "
                           "per object, prefetched 8 deep (no measured cell: public figures)")
    elif mode == SCRIPT:
        # Nothing before the script; it lists the prefix itself (inside the training time), then each
        # small object is a GET of first-byte latency, SCRIPT_CONCURRENCY in flight; large ones stream in
        # ranged GETs at S3_CONNECTION_MBPS per connection, up to the instance's network.
        downloading = 0.0
        latency = EXPRESS_FIRST_BYTE if express else S3_STANDARD_FIRST_BYTE
        listing = -(-shape.files // 1000) * SCRIPT_LIST_PAGE_SECONDS
        connections = SCRIPT_CONCURRENCY if small else SCRIPT_SHARD_CONNECTIONS
        mbps = min(connections * S3_CONNECTION_MBPS, network_mbps)
        per_epoch = s3_shared(files * latency / connections + megabytes / mbps)
        io_epochs = [listing + per_epoch] + [per_epoch] * (epochs - 1)
        assumptions.append(f"Script: the script lists the prefix ({-(-shape.files // 1000):,} pages of 1,000 keys, "
                           f"~{SCRIPT_LIST_PAGE_SECONDS * 1000:.0f} ms each: assumption), then GETs each object "
                           f"(~{latency * 1000:.0f} ms first byte) {connections} at a time, {mbps:,.0f} MB/s at most "
                           f"({S3_CONNECTION_MBPS:g} MB/s per connection, AWS's S3 performance guidelines); no channel: "
                           "SageMaker's lineage does not record the dataset (the lab tags the job with its URI and stats)")
    elif mode == FSX:
        downloading = MOUNT_FIXED
        if not lab.fsx.holds(shape.bytes):
            from .provisioning import fsx_capacity_for
            blocker = (f"FSx for Lustre ({lab.fsx.label()}) cannot hold {shape.bytes / 2**30:,.0f} GiB: it needs "
                       f"{fsx_capacity_for(shape.bytes / 2**30 * VOLUME_HEADROOM):,} GiB or more")
        throughput = min(lab.fsx.throughput_mbps / hosts, network_mbps)   # this instance's share
        first = files * FSX_FIRST_READ_LATENCY / readers + megabytes / min(throughput, S3_STREAM_MBPS)
        warm = files * FSX_READ_LATENCY / readers + megabytes / throughput
        io_epochs = [first] + [warm] * (epochs - 1)
        fsx_provisioning = shape.files / FSX_IMPORT_RATE
        assumptions.append(f"FSx: {lab.fsx.label()}, {throughput:,.0f} MB/s per instance; the first epoch lazy-loads "
                           f"from S3; creating the file system indexes {shape.files:,} objects in ~{fsx_provisioning / 60:.0f} min "
                           "(not billed to the job, but FSx bills while it exists)")
    else:
        downloading = MOUNT_FIXED
        shared_mbps = lab.efs.read_mibps(shape.bytes / 2**30) * MIB
        throughput = min(shared_mbps / hosts, EFS_PER_CLIENT_MIBPS * MIB, network_mbps)
        per_epoch = files * EFS_READ_LATENCY / readers + megabytes / throughput
        io_epochs = [per_epoch] * epochs
        assumptions.append(f"EFS: {lab.efs.label()}, {throughput:,.0f} MB/s per instance"
                           f"{' while burst credits last' if lab.efs.mode == 'bursting' else ''}, "
                           f"~{EFS_READ_LATENCY * 1000:.0f} ms per file; the data must be copied into EFS first (DataSync, not billed to the job)")

    epoch_times = [max(compute, io) for io in io_epochs]
    training = TRAIN_FIXED + sum(epoch_times)
    # AU as DLIO computes it, which MLPerf Storage reports (dlio_benchmark/utils/statscounter.py at 03b5ed3):
    # each epoch's `au = total_compute_time / total_time` (compute_metrics_train, lines 340-349; end_train, 213-223),
    # then `train_au_mean_percentage = np.mean(train_au)` over the epochs (end_run, lines 148-152, after the mean
    # over ranks, which here all run the same model): not the run's compute over its whole time, so a slow epoch
    # (FSx's first, lazy-loading from S3) weighs one epoch's share, whatever its length.
    au_per_epoch = [100.0 * compute / t if t > 0 else 100.0 for t in epoch_times]
    au = sum(au_per_epoch) / len(au_per_epoch)
    bound = "I/O" if any(io > compute for io in io_epochs) else "compute"
    start = STARTUP[mode]
    # Billable time runs from the instance's start; File mode's download hides its image pull.
    other = max(OTHER_FLOOR, start - downloading)
    wall = downloading + training + other
    billable = wall * instance_count
    cost = job_cost(prices, mode=mode, instance_type=instance_type, instance_count=instance_count,
                    volume_size_gb=volume.priced_gb, billable_seconds=billable, wall_seconds=wall, files=shape.files,
                    total_bytes=shape.bytes, epochs=epochs, fsx_capacity_gib=lab.fsx.capacity_gib, storage=storage,
                    fsx=lab.fsx, efs=lab.efs)
    staging_seconds = staging_cost = None
    if express:
        staging_seconds = shape.files * EXPRESS_COPY_LATENCY / EXPRESS_COPY_THREADS + shape.bytes / 1e6 / EXPRESS_STAGING_MBPS
        staging_cost = express_staging_cost(prices, shape.files, shape.bytes)
        assumptions.append(
            f"S3 Express One Zone: ~{EXPRESS_FIRST_BYTE * 1000:.0f} ms first-byte latency instead of ~"
            f"{S3_STANDARD_FIRST_BYTE * 1000:.0f} ms (AWS: single-digit ms, up to 10x faster; no measured cell); staging "
            f"copies {shape.files:,} objects once in ~{staging_seconds / 60:.0f} min ({EXPRESS_COPY_THREADS} copies at a time, "
            f"~{EXPRESS_COPY_LATENCY * 1000:.0f} ms each: assumption) for ${staging_cost:.2f}; storage "
            f"${prices['express_gb_month'] * shape.bytes / 1e9:.2f} per month while the copy is kept")
    return Estimate(mode=mode, downloading=downloading * instance_count, training=training * instance_count,
                    other=other * instance_count, billable_seconds=billable, cost_usd=cost.to_dict(),
                    assumptions=assumptions, bound=bound, fsx_provisioning_seconds=fsx_provisioning,
                    storage=storage, staging_seconds=staging_seconds, staging_cost_usd=staging_cost,
                    au_percent=au, provisioning=lab, instance_count=hosts, epoch_seconds=epoch_times,
                    au_percent_per_epoch=au_per_epoch, blocker=blocker, volume_gb=volume.gb)


def estimate_all(shape: DatasetShape, modes=MODES, express: bool = False, **kwargs) -> list[Estimate]:
    """Every mode; with ``express``, also the S3 modes (and Script) on the S3 Express One Zone bucket."""
    out = [estimate_mode(mode, shape, **kwargs) for mode in modes]
    if express:
        out += [estimate_mode(mode, shape, storage=EXPRESS, **kwargs) for mode in modes if mode in S3_READ_MODES]
    return out


@dataclass
class BreakEven:
    """FSx (an hourly file system) against Express FastFile (staging once, then storage and requests)
    for 1..max epochs, each as one run that creates what it needs and removes it afterwards."""
    epochs: list[int]
    fsx_usd: list[float]
    express_usd: list[float]
    crossover: int | None          # the first epoch count at which the cheaper one changes
    cheaper_at_start: str
    assumptions: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"epochs": self.epochs, "fsx_usd": [round(v, 4) for v in self.fsx_usd],
                "express_usd": [round(v, 4) for v in self.express_usd], "crossover_epochs": self.crossover,
                "cheaper_at_start": self.cheaper_at_start, "assumptions": self.assumptions}

    def sentence(self) -> str:
        other = "Express FastFile" if self.cheaper_at_start == "FSx" else "FSx"
        if self.crossover is None:
            return (f"{self.cheaper_at_start} is cheaper at every epoch count from 1 to {self.epochs[-1]} "
                    f"(${self.fsx_usd[0]:.2f} FSx vs ${self.express_usd[0]:.2f} Express at 1 epoch, "
                    f"${self.fsx_usd[-1]:.2f} vs ${self.express_usd[-1]:.2f} at {self.epochs[-1]})")
        i = self.epochs.index(self.crossover)
        return (f"break-even at {self.crossover} epochs: below it {self.cheaper_at_start} is cheaper, from it {other} "
                f"(${self.fsx_usd[i]:.2f} FSx vs ${self.express_usd[i]:.2f} Express at {self.crossover} epochs)")


def fsx_express_break_even(shape: DatasetShape, *, max_epochs: int = 100, prices: PriceTable,
                           fsx_capacity_gib: int = 1200, **kwargs) -> BreakEven:
    """What one run costs with each, per epoch count: FSx bills by the hour from its creation (the
    S3 metadata import included) until the run ends; Express bills the staging copy once, then its
    requests and the copy's storage while the run lasts (emptied afterwards, `dslab express empty`)."""
    epochs = list(range(1, max_epochs + 1))
    fsx_usd, express_usd = [], []
    lab = kwargs.get("provisioning") or as_deployed(fsx_capacity_gib)
    hourly = lab.fsx.hourly(prices)
    for n in epochs:
        fsx = estimate_mode(FSX, shape, epochs=n, prices=prices, fsx_capacity_gib=fsx_capacity_gib, **kwargs)
        # The job's cost already holds FSx's storage during the job; add the import before it.
        fsx_usd.append(fsx.cost_usd["total"] + hourly * (fsx.fsx_provisioning_seconds or 0.0) / 3600)
        express = estimate_mode(FASTFILE, shape, epochs=n, prices=prices, storage=EXPRESS, **kwargs)
        storage_during_staging = (prices["express_gb_month"] * shape.bytes / 1e9
                                  * (express.staging_seconds or 0.0) / 3600 / HOURS_PER_MONTH)
        express_usd.append(express.cost_usd["total"] + (express.staging_cost_usd or 0.0) + storage_during_staging)
    cheaper = ["FSx" if f <= e else "Express FastFile" for f, e in zip(fsx_usd, express_usd)]
    crossover = next((n for n, c in zip(epochs, cheaper) if c != cheaper[0]), None)
    notes = [f"FSx: {lab.fsx.label()} at ${hourly:.3f}/h from creation (S3 import of {shape.files:,} "
             "objects included) to the end of the run, then torn down",
             "Express: the staging copy once per run, the job's GETs and retrieval, the copy's storage while it exists, "
             "emptied after the run (`dslab express empty`); keeping it costs "
             f"${prices['express_gb_month'] * shape.bytes / 1e9:.2f} per month"]
    return BreakEven(epochs, fsx_usd, express_usd, crossover, cheaper[0], notes)


# The measured cells the constants above are fitted on (vendored; see dslab/contracts/vendored.json).
CALIBRATION_PATH = Path(__file__).resolve().parent.parent / "contracts" / "bencher-measured.csv"


def calibration_cells(path: Path = CALIBRATION_PATH) -> list[dict[str, str]]:
    """The measured cells, one dict per CSV row ('#' lines are the file's provenance notes)."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    if not rows:
        raise ValueError(f"{path}: no calibration cells")
    return rows


def mape(pairs: list[tuple[float, float]]) -> float:
    """Mean absolute percentage error of (predicted, measured) pairs, in percent."""
    return 100.0 * sum(abs(p - m) / m for p, m in pairs) / len(pairs)

