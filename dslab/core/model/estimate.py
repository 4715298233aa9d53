"""Predict a training job's Downloading / Training / Other seconds, billable time and dollars, per mode,
before anything runs.

The model (every constant in ``Model`` names its source):

    billable = max(downloading + other_floor, startup[mode]) + training

- startup[mode]: image pull, container and data-source set-up (SageMaker's Starting phase is not billed time:
  TrainingTimeInSeconds is Downloading + Training + Uploading). File mode's image pull overlaps its download
  (the calibration shows File's "Other" shrinking to ~50 s when the download is long), so only the part of
  start-up not hidden by the download is paid.
- downloading: File copies every object to the volume (per-object overhead plus bytes at the
  instance's download throughput); FastFile lists object metadata (~5,500 objects/s, the post);
  Pipe, FSx and EFS mount or open a stream in a few seconds.
- training = train_fixed + max(compute, I/O) per epoch, where compute = samples / the model's rate
  and I/O is what the data source needs to deliver the epoch (per-file latency spread over the
  readers, plus bytes at the source's throughput). FSx's first epoch lazy-loads from S3.

The first group of constants is fitted on the measured cells in ``dslab/contracts/bencher-cells.csv`` (Bencher's
12 cells, ml.p3.2xlarge, ResNet-50, one epoch) by ``calibration.fit``; the rest are public figures (Mountpoint's
CI, vendored in ``mountpoint-s3-ci.csv``; AWS's documents) or assumptions, each with its plausible range in
``calibration.assumptions()``. ``calibration.py`` gives every estimate its range: the out-of-sample error of the
fit (leave one scenario out) and the repeats' spread for the sources with measured cells, the assumptions' ranges
on top for the others. ``test_estimate_calibration`` computes the in-sample error.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..facts.limits import EXPRESS_COPY_THREADS
from ..modes import EFS, EXPRESS, FASTFILE, FILE, FSX, MODES, PIPE, S3_READ_MODES, SCRIPT, STANDARD, source_label
from ..facts.instances import INSTANCES as INSTANCE_TABLE
from ..shape import LARGE_FILE_BYTES, DatasetShape
from .volume import VOLUME_HEADROOM, file_share_bytes, volume_for
from ..facts.prices import HOURS_PER_MONTH, PriceTable, express_staging_cost, job_cost
from ..facts.storage import EFS_IA_MIN_FILE_BYTES, MIB
from .provisioning import Provisioning, as_deployed

# ---- constants -------------------------------------------------------------------------------
# The constants a run's figures rest on, in one record so that the calibration (calibration.py) can fit them on some
# cells and predict the others, and evaluate the model at the ends of each constant's range. The module-level names
# below are MODEL's values, for the modules that quote them.
@dataclass(frozen=True)
class Model:
    # Fitted on the measured cells (dslab/contracts/bencher-cells.csv) by ``calibration.fit``, each by the rule named
    # here (tests/test_calibration.py checks every literal against the fit on all cells).
    # Start-up per channel, seconds: the cells' download + other where the download is short and the script finds few
    # files (A, B, D). File mode's image pull overlaps its download (File's "other" shrinks to ~50 s when the
    # download is long), so only the part of start-up not hidden by the download is paid. File: the one File cell with
    # a short download (B). Pipe and Script take FastFile's, EFS FSx's (assumptions, no measured cell).
    startup_file: float = 214.5
    startup_fastfile: float = 214.4
    startup_fsx: float = 219.2
    other_floor: float = 54.1          # upload and shutdown, never hidden (File cells with a long download: "other")
    train_fixed: float = 15.4          # framework and model start inside the script (compute-bound cells: train - samples/rate)
    file_download_fixed: float = 15.1  # File mode: start of the copy (File on shards: B and D, with the throughput)
    file_per_object: float = 0.00727   # File mode: seconds per object copied (File on JPEGs: A and C)
    ebs_download_mbps: float = 157.8   # File mode onto EBS (File on shards: 54 GB in 342 s, D; the post: EBS-backed p3 <= 250 MB/s)
    fastfile_fixed: float = 15.4       # FastFile mount (FastFile cells with few files: "Downloading" less the listing)
    mount_fixed: float = 12.1          # FSx / EFS mount, Pipe set-up (FSx cells' "Downloading": 10-14 s)
    fastfile_get_latency: float = 0.0447  # seconds per small-file GET through FastFile, per reader (FastFile on JPEGs: A, C)
    # Public figures and assumptions: each has its plausible range and source in calibration.assumptions().
    nvme_download_mbps: float = 1000.0   # File mode onto NVMe instance storage (post: "NVMe-backed ones go higher"; assumption)
    # A checkpoint's write to and read from NVMe instance storage (the sync's stall, its read back): a quantity of its
    # own, not File's S3-to-NVMe download, so a checkpoint trial calibrates it without moving File's answers
    # (assumption, the same figure: AWS publishes instance storage's IOPS, not MB/s).
    nvme_checkpoint_mbps: float = 1000.0
    fastfile_list_rate: float = 5500.0   # objects/s listed before the script starts (the post)
    s3_stream_mbps: float = 1000.0       # large sequential reads through FastFile by several workers (the post: "exceed 1 GB/s")
    pipe_mbps: float = 300.0             # Pipe stream throughput (assumption: ~2x File's; AWS gives only "up to 9x" File mode)
    fsx_first_read_latency: float = 0.010  # FSx lazy load: first read of a file fetches it from S3 (assumption)
    fsx_read_latency: float = 0.0005     # FSx cached read, sub-millisecond (the post: "low-latency")
    # S3 first byte of a small object, S3 Standard and S3 Express One Zone: Mountpoint for Amazon S3's CI on EC2, the
    # median of its last 30 runs (dslab/contracts/mountpoint-s3-ci.csv, time_to_first_byte_read_small_file), taken
    # for Pipe's and the script's own reads (not SageMaker: the assumption's label and range stay); their ratio is
    # how much shorter an S3 request is on Express, for FastFile's and File's measured per-file times.
    s3_standard_first_byte: float = 0.02783
    express_first_byte: float = 0.006278
    # The share of FastFile's measured per-file GET that S3's request latency sets, which Express shortens by its first
    # byte over S3 Standard's, as it does File's per-object copy (assumption: all of it; no measurement splits
    # FastFile's GET, and S3 Standard's first byte alone is 62% of it: its range).
    fastfile_s3_share: float = 1.0
    # One ListObjectsV2 page of 1,000 keys, listed in sequence: Mountpoint's `ls -f` of 100,000 objects / 100
    # (mountpoint-s3-ci.csv, readdir_100000 median), taken for the script's own listing.
    script_list_page_seconds: float = 0.1216
    express_list_page_seconds: float = 0.05378
    efs_read_latency: float = 0.003      # EFS Max I/O per-file open+read latency (AWS: Max I/O trades latency for scale; assumption)
    # "Make one concurrent request for each 85-90 MB/s of desired network throughput" (S3 performance
    # guidelines, https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/horizontal-scaling-and-request-parallelization-for-high-throughput.html).
    s3_connection_mbps: float = 87.5
    # SageMaker's checkpoint upload and copy-in: files in parts, this many at once per instance (assumption: the AWS
    # CLI's max_concurrent_requests; how SageMaker's uploader moves bytes is not documented), each at s3_connection_mbps.
    sync_connections: float = 10.0
    network_payload: float = 0.8         # the share of the network's bits that carry data (assumption)

    def startup(self, mode: str) -> float:
        return {FILE: self.startup_file, FASTFILE: self.startup_fastfile, PIPE: self.startup_fastfile,
                SCRIPT: self.startup_fastfile, FSX: self.startup_fsx, EFS: self.startup_fsx}[mode]


MODEL = Model()
STARTUP = {mode: MODEL.startup(mode) for mode in MODES}
OTHER_FLOOR = MODEL.other_floor
TRAIN_FIXED = MODEL.train_fixed
FASTFILE_GET_LATENCY = MODEL.fastfile_get_latency
S3_STANDARD_FIRST_BYTE = MODEL.s3_standard_first_byte
EXPRESS_FIRST_BYTE = MODEL.express_first_byte
NETWORK_PAYLOAD = MODEL.network_payload
# Documented figures and the lab's own settings (no range: AWS's documented numbers, or what the lab configures).
FSX_MBPS_PER_TIB = 200.0      # Scratch 2 baseline throughput per TiB (AWS FSx for Lustre performance docs)
FSX_IMPORT_RATE = 2_000_000 / 3600.0   # objects indexed per second on creation (the post: ~1 h per ~2 M objects)
# S3 Express One Zone: "consistent single-digit millisecond first-byte read and write request latencies — up to 10x
# faster than S3 Standard" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-performance.html).
# Staging (set-up, not the job): assumptions, priced once per run.
EXPRESS_COPY_LATENCY = 0.030    # assumption: one CopyObject from S3 Standard into the directory bucket
EXPRESS_STAGING_MBPS = 1000.0   # assumption: the staging Lambda's copies together (server-side copies)
# Script mode (the script reads S3 itself; training/dslab_train/s3source.py): its own GETs, many at once.
SCRIPT_CONCURRENCY = 64         # the lab's script: JPEG GETs in flight (s3_concurrency)
SCRIPT_SHARD_CONNECTIONS = 8    # the lab's script: 4 shards at once, 2 ranged GETs of 8 MiB ahead in each
EFS_BURST_MBPS = 104.9        # EFS Bursting: 100 MiB/s burst for file systems under 1 TiB (AWS EFS performance docs)

# Instance properties (vCPUs: the readers; sustained network Gbit/s, since a run of hours outlasts an "up
# to" size's burst credits, of the primary network card where the type has several, as S3, EFS and FSx traffic is
# IP traffic (instances.IP_CARD_ASSUMPTION); NVMe instance storage): a view of the instance table (instances.py),
# which names each row's source. The calibration cells (ml.p3.2xlarge) are compute- or download-bound, so the
# sustained figure leaves them as they were.
INSTANCES = {name: (i.vcpus, i.ip_gbps, i.nvme_gb > 0) for name, i in INSTANCE_TABLE.items()}


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
    # Where the billable seconds and dollars may fall, and the evidence (calibration.estimate_range; None until set).
    range: Any = None

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
               **({"volume_gb": self.volume_gb} if self.volume_gb is not None else {}),
               **({"range": self.range.to_dict()} if self.range is not None else {})}
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
        return vcpus, gbps, nvme, INSTANCE_TABLE[instance_type].ip_assumption
    return 8, 10.0, False, f"{instance_type} is not in the instance table: assumed 8 vCPUs, 10 Gbit/s, EBS volume"


def estimate_mode(mode: str, shape: DatasetShape, *, instance_type: str = "ml.p3.2xlarge", instance_count: int = 1,
                  epochs: int = 1, rate: float, volume_size_gb: int | None = None, prices: PriceTable,
                  fsx_capacity_gib: int = 1200, efs_provisioned_mibps: float | None = None,
                  storage: str = STANDARD, accelerators: int | None = None,
                  provisioning: Provisioning | None = None, sharded: bool | None = None,
                  readers: int | None = None, efs_resident: bool = False, model: Model = MODEL,
                  script_concurrency: int = SCRIPT_CONCURRENCY) -> Estimate:
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
    never an answer. ``efs_resident``: the dataset lives in EFS (not copied in for the run), so the lifecycle has moved
    its larger files to Infrequent Access. `dslab size` is this model searched over instance counts and provisioning.
    ``model``: the constants (default MODEL; the calibration passes others: fitted on fewer cells, or at a range's
    end). ``script_concurrency``: Script mode's GETs in flight for small objects (the script's s3_concurrency)."""
    if mode not in MODES:
        raise ConfigError("--mode", f"unknown mode {mode!r}", MODES)
    if storage == EXPRESS and mode not in S3_READ_MODES:
        raise ConfigError("--mode", f"{mode} does not read from S3: S3 Express One Zone serves File, FastFile, Pipe "
                          "and scripts that read S3 themselves", S3_READ_MODES)
    express = storage == EXPRESS
    lab = provisioning or as_deployed(fsx_capacity_gib, efs_provisioned_mibps)
    # S3 request latency on the directory bucket against S3 Standard (Mountpoint on EC2: their first bytes).
    express_ratio = model.express_first_byte / model.s3_standard_first_byte
    if epochs < 1:
        raise ConfigError("--epochs", "must be at least 1")
    vcpus, gbps, nvme, instance_note = instance_properties(instance_type)
    samples, sample_note = shape.sample_count()
    assumptions = [note for note in (instance_note, sample_note) if note]
    hosts = max(1, instance_count)
    sharded = hosts > 1 if sharded is None else sharded
    table_row = INSTANCE_TABLE.get(instance_type)
    per_host = accelerators or max(1, table_row.accelerators if table_row else 1)
    network_mbps = gbps * 125 * model.network_payload
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
    efs_ia_gb = 0.0
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
        throughput = min(model.nvme_download_mbps if nvme else model.ebs_download_mbps, network_mbps)
        # File's per-object cost is taken as request latency over its parallel downloads: on Express it
        # shrinks with the first-byte latency (assumption, no measured cell).
        per_object = model.file_per_object * (express_ratio if express else 1.0)
        copied_mb, copied_files = whole
        # The cluster GETs every object once when sharded, once per instance when every instance copies it all.
        downloading = model.file_download_fixed + s3_shared(copied_mb / throughput + copied_files * per_object,
                                                      shape.files * (1 if sharded else hosts))
        local_read = megabytes / (2000.0 if nvme else 250.0)
        io_epochs = [local_read] * epochs
        assumptions.append(f"File: downloads {copied_mb / 1e3:,.2f} GB in {copied_files:,} objects onto each instance's "
                           f"storage, {volume.describe()}, at {throughput:,.0f} MB/s plus {per_object * 1000:.1f} ms per object")
        blocker = volume.problem()
    elif mode == FASTFILE:
        downloading = model.fastfile_fixed + shape.files / model.fastfile_list_rate
        # On Express the S3 share of the measured GET shrinks by Express's first byte over S3 Standard's.
        latency = model.fastfile_get_latency * (1 - model.fastfile_s3_share * (1 - express_ratio) if express else 1.0)
        per_epoch = s3_shared(files * latency / readers + megabytes / min(model.s3_stream_mbps, network_mbps))
        io_epochs = [per_epoch] * epochs
        assumptions.append(f"FastFile: lists {model.fastfile_list_rate:,.0f} objects/s; each file read is a GET of "
                           f"~{latency * 1000:.0f} ms spread over {readers} readers; streams up to {model.s3_stream_mbps:.0f} MB/s")
    elif mode == PIPE:
        downloading = model.mount_fixed
        latency = model.express_first_byte if express else model.s3_standard_first_byte
        streamed_mb, streamed_files = whole
        per_epoch = s3_shared(streamed_files * latency / 8 + streamed_mb / min(model.pipe_mbps, network_mbps),
                              requests_per_epoch * (1 if sharded else hosts))
        io_epochs = [per_epoch] * epochs
        assumptions.append(f"Pipe: streams each epoch from S3 at ~{model.pipe_mbps:.0f} MB/s with ~{latency * 1000:.0f} ms "
                           "per object (S3's first byte, Mountpoint on EC2), prefetched 8 deep (no measured cell)")
    elif mode == SCRIPT:
        # Nothing before the script; it lists the prefix itself (inside the training time), then each
        # small object is a GET of first-byte latency, script_concurrency in flight; large ones stream in
        # ranged GETs at s3_connection_mbps per connection, up to the instance's network.
        downloading = 0.0
        latency = model.express_first_byte if express else model.s3_standard_first_byte
        page = model.express_list_page_seconds if express else model.script_list_page_seconds
        listing = -(-shape.files // 1000) * page
        connections = script_concurrency if small else SCRIPT_SHARD_CONNECTIONS
        mbps = min(connections * model.s3_connection_mbps, network_mbps)
        per_epoch = s3_shared(files * latency / connections + megabytes / mbps)
        io_epochs = [listing + per_epoch] + [per_epoch] * (epochs - 1)
        assumptions.append(f"Script: the script lists the prefix ({-(-shape.files // 1000):,} pages of 1,000 keys, "
                           f"~{page * 1000:.0f} ms each, Mountpoint on EC2), then GETs each object "
                           f"(~{latency * 1000:.0f} ms first byte, Mountpoint on EC2) {connections} at a time, {mbps:,.0f} MB/s at most "
                           f"({model.s3_connection_mbps:g} MB/s per connection, AWS's S3 performance guidelines); no channel: "
                           "SageMaker's lineage does not record the dataset (the lab tags the job with its URI and stats)")
    elif mode == FSX:
        downloading = model.mount_fixed
        if not lab.fsx.holds(shape.bytes):
            from ..facts.storage import fsx_capacity_for
            blocker = (f"FSx for Lustre ({lab.fsx.label()}) cannot hold {shape.bytes / 2**30:,.0f} GiB: it needs "
                       f"{fsx_capacity_for(shape.bytes / 2**30 * VOLUME_HEADROOM):,} GiB or more")
        throughput = min(lab.fsx.throughput_mbps / hosts, network_mbps)   # this instance's share
        first = files * model.fsx_first_read_latency / readers + megabytes / min(throughput, model.s3_stream_mbps)
        warm = files * model.fsx_read_latency / readers + megabytes / throughput
        io_epochs = [first] + [warm] * (epochs - 1)
        fsx_provisioning = shape.files / FSX_IMPORT_RATE
        assumptions.append(f"FSx: {lab.fsx.label()}, {throughput:,.0f} MB/s per instance; the first epoch lazy-loads "
                           f"from S3; creating the file system indexes {shape.files:,} objects in ~{fsx_provisioning / 60:.0f} min "
                           "(not billed to the job, but FSx bills while it exists)")
    else:
        downloading = model.mount_fixed
        dataset_gib = shape.bytes / 2**30
        # Files the lifecycle moved to Infrequent Access (a dataset living in EFS, unread for 7 days: its files of 128
        # KiB and more) count nothing towards Bursting's rate until their first read brings them back to Standard.
        in_ia = efs_resident and shape.mean_file_bytes >= EFS_IA_MIN_FILE_BYTES
        per_client = lab.efs.per_client_mibps * MIB

        def efs_epoch(standard_gib: float) -> tuple[float, float]:
            rate = min(lab.efs.read_mibps(standard_gib) * MIB / hosts, per_client, network_mbps)
            return files * model.efs_read_latency / readers + megabytes / rate, rate
        first, first_rate = efs_epoch(0.0 if in_ia else dataset_gib)
        warm, throughput = efs_epoch(dataset_gib)
        io_epochs = [first] + [warm] * (epochs - 1)
        efs_ia_gb = shape.bytes / 1e9 if in_ia else 0.0
        assumptions.append(f"EFS: {lab.efs.label()} in {lab.efs.region}, {throughput:,.0f} MB/s per instance (reads "
                           "metered at a third of "
                           f"the rate){' while burst credits last' if lab.efs.mode == 'bursting' else ''}, "
                           f"~{model.efs_read_latency * 1000:.0f} ms per file"
                           + ("" if efs_resident else "; the data must be copied into EFS first (DataSync, not billed to "
                                                      "the job)"))
        if in_ia:
            assumptions.append(f"EFS: the dataset lives in EFS; unread for 7 days, its files of {EFS_IA_MIN_FILE_BYTES // 1024} "
                               f"KiB and more sit in Infrequent Access: the first epoch reads {efs_ia_gb:,.2f} GB from IA "
                               f"(${prices['efs_ia_read_per_gb']:.2f} per GB) at {first_rate:,.0f} MB/s per instance "
                               "(Bursting counts only Standard), which brings them back to Standard")

    epoch_times = [max(compute, io) for io in io_epochs]
    training = model.train_fixed + sum(epoch_times)
    # AU as DLIO computes it, which MLPerf Storage reports (dlio_benchmark/utils/statscounter.py at 03b5ed3):
    # each epoch's `au = total_compute_time / total_time` (compute_metrics_train, lines 340-349; end_train, 213-223),
    # then `train_au_mean_percentage = np.mean(train_au)` over the epochs (end_run, lines 148-152, after the mean
    # over ranks, which here all run the same model): not the run's compute over its whole time, so a slow epoch
    # (FSx's first, lazy-loading from S3) weighs one epoch's share, whatever its length.
    au_per_epoch = [100.0 * compute / t if t > 0 else 100.0 for t in epoch_times]
    au = sum(au_per_epoch) / len(au_per_epoch)
    bound = "I/O" if any(io > compute for io in io_epochs) else "compute"
    start = model.startup(mode)
    # Billable time runs from the instance's start; File mode's download hides its image pull.
    other = max(model.other_floor, start - downloading)
    wall = downloading + training + other
    # The estimate's billable seconds are every instance's (the answer's contract); job_cost takes one instance's, as
    # DescribeTrainingJob's BillableTimeInSeconds gives it, and multiplies by the count itself.
    billable = wall * instance_count
    cost = job_cost(prices, mode=mode, instance_type=instance_type, instance_count=instance_count,
                    volume_size_gb=volume.priced_gb, billable_seconds=wall, wall_seconds=wall, files=shape.files,
                    total_bytes=shape.bytes, epochs=epochs, fsx_capacity_gib=lab.fsx.capacity_gib, storage=storage,
                    fsx=lab.fsx, efs=lab.efs, efs_ia_gb_read=efs_ia_gb)
    staging_seconds = staging_cost = None
    if express:
        staging_seconds = shape.files * EXPRESS_COPY_LATENCY / EXPRESS_COPY_THREADS + shape.bytes / 1e6 / EXPRESS_STAGING_MBPS
        staging_cost = express_staging_cost(prices, shape.files, shape.bytes)
        staging_said = f"{staging_seconds:.0f} s" if staging_seconds < 120 else f"{staging_seconds / 60:,.0f} min"
        assumptions.append(
            f"S3 Express One Zone: ~{model.express_first_byte * 1000:.1f} ms first-byte latency instead of ~"
            f"{model.s3_standard_first_byte * 1000:.0f} ms (Mountpoint on EC2; AWS: single-digit ms; no measured cell); staging "
            f"copies {shape.files:,} objects once in ~{staging_said} ({EXPRESS_COPY_THREADS} copies at a time, "
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


# ../shared's nine measured cells (A, B, D; vendored, see dslab/contracts/vendored.json). The fit reads all twelve,
# these and scenario C, from bencher-cells.csv (calibration.py); test_estimate_calibration holds the two files equal.
CALIBRATION_PATH = Path(__file__).resolve().parents[2] / "contracts" / "bencher-measured.csv"


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

