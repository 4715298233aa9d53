"""From one GPU to a cluster: how many accelerators each data source feeds, and what to provision.

MLPerf Storage's question, per source: every instance runs ``accelerators`` emulated accelerators at
the compute's rate (samples/s each), so a cluster of N instances asks for N x that, and each source
delivers what its shared limits allow once divided among the N readers:

    per-host supply(N) = min(what one instance can pull, the source's aggregate limit / N)
    AU(N)              = min(1, per-host supply / per-host demand)

(AU as MLPerf Storage defines it: compute time over wall time, the pipeline overlapping reads with
steps.) The largest cluster a source feeds is the largest N with AU >= 90% (MLPerf Storage v2.0's
ResNet-50 threshold). Per-instance paths (File's local copy) scale with the instances; shared ones
do not. Every limit below cites its source; what has none is an assumption and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError
from .estimate import (STARTUP, TRAIN_FIXED, EBS_DOWNLOAD_MBPS, FILE_DOWNLOAD_FIXED, FILE_PER_OBJECT, NVME_DOWNLOAD_MBPS, EXPRESS_FIRST_BYTE, FASTFILE_GET_LATENCY, FSX_READ_LATENCY, PIPE_MBPS, PIPE_OBJECT_LATENCY,
                       S3_CONNECTION_MBPS, S3_STANDARD_FIRST_BYTE, S3_STREAM_MBPS, SCRIPT_CONCURRENCY,
                       SCRIPT_SHARD_CONNECTIONS, EFS_READ_LATENCY, LARGE_FILE_BYTES, DatasetShape)
from .instances import Instance, instance as find_instance
from .prices import HOURS_PER_MONTH, PriceTable

AU_TARGET = 90.0   # MLPerf Storage v2.0 rules: ResNet-50 and 3D U-Net at 90% AU (mlcommons/storage Submission_guidelines.md)
MAX_CLUSTER = 4096  # instances searched for the largest cluster a source feeds

# ---- shared limits, cited ----------------------------------------------------------------------
# S3: "at least ... 5,500 GET/HEAD requests per second per partitioned Amazon S3 prefix. There are no
# limits to the number of prefixes in a bucket" (S3 User Guide, optimizing-performance.html).
S3_GETS_PER_PREFIX = 5500.0
# S3 Express One Zone: "By default, each directory bucket supports up to 200,000 reads ... per second"
# (S3 User Guide, s3-express-performance.html; up to 2,000,000 GET TPS through AWS Support).
EXPRESS_READS_PER_BUCKET = 200_000.0
EXPRESS_READS_MAX = 2_000_000.0
# FSx for Lustre, network throughput per TiB of storage ("File system performance for SSD storage
# options", LustreGuide performance.html / ssd-storage.html): Scratch 2 200 baseline, 1,300 burst (credits);
# Persistent 2 tiers 125/250/500/1000 MB/s/TiB of disk throughput ("valid values are 125, 250, 500, and 1000").
FSX_SCRATCH2_MBPS_PER_TIB = 200.0
FSX_SCRATCH2_BURST_MBPS_PER_TIB = 1300.0
FSX_PERSISTENT2_TIERS = (125, 250, 500, 1000)
# "the valid values are 1200 GiB, 2400 GiB, and increments of 2400 GiB" (CreateFileSystem StorageCapacity).
FSX_CAPACITY_STEPS_GIB = (1200, 2400)
FSX_CAPACITY_INCREMENT_GIB = 2400
# EFS (efs/latest/ug/performance.html): Bursting 100 MiB/s, or 100 MiB/s per TiB stored above 1 TiB, while
# credits last (50 MiB/s per TiB without); Elastic reads 20-60 GiB/s per file system (Region-dependent: the
# lower bound taken) and 1,500 MiB/s per client (500 MiB/s without amazon-efs-utils v2: SageMaker mounts
# EFS itself, so the lower figure is taken); Provisioned reads 3-10 GiB/s per file system (lower bound),
# 500 MiB/s per client. Max I/O is not available with Elastic and has higher per-operation latency.
MIB = 1.048576  # MB per MiB
EFS_BURST_MIBPS = 100.0
EFS_BASELINE_MIBPS_PER_TIB = 50.0
EFS_ELASTIC_READ_MIBPS = 20 * 1024.0
EFS_PROVISIONED_READ_MIBPS = 3 * 1024.0
EFS_PER_CLIENT_MIBPS = 500.0
EFS_PROVISIONED_MAX_MIBPS = 3414.0   # the lab's setting's limit (stacks/config.py: 1-3414 MiB/s)
# A training run reads for hours: network bandwidth past burst credits (instances.py: baseline), of which
# ~80% is usable payload (the single-job estimate's same factor).
NETWORK_PAYLOAD = 0.8


@dataclass
class SourceSize:
    source: str
    au_percent: float                  # at the target cluster
    # The largest cluster fed at AU >= AU_TARGET (0: not even one), as far as the source's documented limits
    # let it be provisioned: FSx grows with the cluster, EFS Elastic reads 20 GiB/s, a directory bucket
    # 200,000 reads/s by default, S3 prefixes without limit. MAX_CLUSTER: nothing shared binds within it.
    max_instances_at_target_au: int
    per_host_limit: str                # what bounds one instance
    shared_limit: str                  # what the cluster shares
    provision: str                     # what to provision to feed the target
    usd_per_hour: float                # instances + the source's standing cost at the target
    usd_per_run: float                 # one run (every epoch) at the target, the source's set-up included
    hours_per_run: float
    assumptions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "au_percent": round(self.au_percent, 1),
                "max_instances_at_target_au": self.max_instances_at_target_au,
                "per_host_limit": self.per_host_limit, "shared_limit": self.shared_limit,
                "provision": self.provision, "usd_per_hour": round(self.usd_per_hour, 2),
                "usd_per_run": round(self.usd_per_run, 2), "hours_per_run": round(self.hours_per_run, 3),
                "assumptions": self.assumptions}


@dataclass
class Sizing:
    instance: Instance
    count: int
    accelerators: int
    rate_per_accelerator: float
    demand_mbps_per_host: float
    demand_objects_per_host: float
    sources: list[SourceSize]
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"instance": self.instance.to_dict(), "instance_count": self.count,
                "accelerators_per_instance": self.accelerators, "accelerators": self.accelerators * self.count,
                "samples_per_second_per_accelerator": round(self.rate_per_accelerator, 1),
                "demand_mb_per_second_per_instance": round(self.demand_mbps_per_host, 1),
                "demand_objects_per_second_per_instance": round(self.demand_objects_per_host, 1),
                "au_target_percent": AU_TARGET, "sources": [s.to_dict() for s in self.sources], "notes": self.notes}


def fsx_capacity_for(gib_needed: float) -> int:
    """The smallest Scratch 2 / Persistent 2 SSD capacity (GiB) that holds ``gib_needed``."""
    for step in FSX_CAPACITY_STEPS_GIB:
        if gib_needed <= step:
            return step
    return int(math.ceil(gib_needed / FSX_CAPACITY_INCREMENT_GIB) * FSX_CAPACITY_INCREMENT_GIB)


def _au(supply: float, demand: float) -> float:
    return 100.0 if demand <= 0 else min(100.0, 100.0 * supply / demand)


def _largest(au_at) -> int:
    """The largest N in 1..MAX_CLUSTER with au_at(N) >= AU_TARGET (AU never grows with N)."""
    if au_at(1) < AU_TARGET:
        return 0
    lo, hi = 1, MAX_CLUSTER
    if au_at(hi) >= AU_TARGET:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if au_at(mid) >= AU_TARGET else (lo, mid)
    return lo


def size(shape: DatasetShape, *, instance_type: str, count: int, rate: float, prices: PriceTable,
         epochs: int = 1, accelerators: int | None = None, fsx_capacity_gib: int = 1200,
         express: bool = True) -> Sizing:
    """Every source at ``count`` instances of ``instance_type``, each accelerator eating ``rate`` samples/s."""
    found = find_instance(instance_type)
    if found is None:
        raise ConfigError("--instance", f"{instance_type} is not in the instance table (dslab/core/instances.py)",
                          "a type of the table, e.g. ml.p4d.24xlarge")
    if not 1 <= count <= MAX_CLUSTER:
        raise ConfigError("--count", f"{count} instances: give 1 to {MAX_CLUSTER}")
    if epochs < 1:
        raise ConfigError("--epochs", "must be at least 1")
    per_host_accelerators = accelerators or max(1, found.accelerators)
    samples, _ = shape.sample_count()
    sample_bytes = shape.bytes / samples
    objects_per_sample = shape.files / samples
    small_files = shape.mean_file_bytes <= LARGE_FILE_BYTES
    demand_sps = per_host_accelerators * rate                      # samples/s one instance eats
    demand_mbps = demand_sps * sample_bytes / 1e6
    demand_ops = demand_sps * objects_per_sample
    network_mbps = found.network_baseline_gbps * 125 * NETWORK_PAYLOAD
    hourly = prices.instance_hourly(instance_type)
    notes = []
    if hourly is None:
        notes.append(f"no price for {instance_type} in the price table of {prices.date}: instance cost counted as $0")
        hourly = 0.0
    if found.network_baseline_gbps < found.network_gbps:
        notes.append(f"{instance_type}: 'up to' {found.network_gbps:g} Gbit/s, {found.network_baseline_gbps:g} sustained "
                     "(a run of hours outlasts the burst credits): the sustained figure is used")
    dataset_gib = shape.bytes / 2**30
    dataset_gb = shape.bytes / 1e9

    def per_host_sps(mbps: float, ops: float | None) -> float:
        """Samples/s one host gets from ``mbps`` of bandwidth and ``ops`` objects/s (None: not op-bound)."""
        by_bytes = mbps * 1e6 / sample_bytes
        by_ops = math.inf if ops is None else ops / objects_per_sample
        return min(by_bytes, by_ops)

    def run_hours(au: float, n: int, mode: str = "FastFile") -> float:
        """One run on one instance's clock: start-up and the script's own start (estimate.py), then the epochs."""
        sps = n * demand_sps * au / 100.0
        fixed = (STARTUP.get(mode, STARTUP["FastFile"]) + TRAIN_FIXED) / 3600.0
        return fixed + (epochs * samples / sps / 3600.0 if sps > 0 else math.inf)

    out: list[SourceSize] = []

    def setup_usd(mode: str, storage: str) -> float:
        """What the source pays once per run before its jobs (decision.py: staging, FSx's import, DataSync)."""
        from .decision import setup_cost
        return setup_cost(mode, storage, shape, prices, fsx_capacity_gib=fsx_capacity_gib).usd

    # Ranged GETs of 8 MiB carry this many samples each (large files only).
    RANGE_SAMPLES = 8 * 2**20 / sample_bytes

    def s3_source(label: str, per_host_mbps: float, per_host_ops: float | None, latency: float, express_bucket: bool,
                  how: str, extra: list[str]) -> None:
        host_cap = per_host_sps(min(per_host_mbps, network_mbps), per_host_ops)
        if express_bucket:
            shared_ops = EXPRESS_READS_PER_BUCKET
            shared = f"{EXPRESS_READS_PER_BUCKET:,.0f} reads/s per directory bucket (AWS default; up to {EXPRESS_READS_MAX:,.0f} on request)"
        else:
            shared_ops = math.inf   # prefixes scale it: one more per 5,500 GET/s
            shared = f"{S3_GETS_PER_PREFIX:,.0f} GET/s per prefix, as many prefixes as needed"

        def au_at(n: int) -> float:
            supply = host_cap
            if math.isfinite(shared_ops):
                supply = min(supply, shared_ops / objects_per_sample / n if small_files else shared_ops * RANGE_SAMPLES / n)
            return _au(supply, demand_sps)
        au = au_at(count)
        gets_per_s = count * demand_sps * au / 100 * (objects_per_sample if small_files else sample_bytes / (8 * 2**20))
        if express_bucket:
            buckets_needed = math.ceil(gets_per_s / EXPRESS_READS_PER_BUCKET) if gets_per_s else 1
            provision = (f"the directory bucket ({gets_per_s:,.0f} reads/s at this size"
                         + (f"; above its default {EXPRESS_READS_PER_BUCKET:,.0f}: ask AWS Support for more, or split "
                            f"the data over {buckets_needed} buckets)" if buckets_needed > 1 else ")"))
            per_hour = (gets_per_s * 3600 * prices["express_get_per_thousand"] / 1000
                        + count * demand_mbps * au / 100 * 3600 / 1e3 * prices["express_retrieval_per_gb"]
                        + prices["express_gb_month"] * dataset_gb / HOURS_PER_MONTH)
        else:
            prefixes = max(1, math.ceil(gets_per_s / S3_GETS_PER_PREFIX))
            provision = (f"{prefixes} S3 prefix{'es' if prefixes > 1 else ''} ({gets_per_s:,.0f} GET/s at this size; "
                         f"{S3_GETS_PER_PREFIX:,.0f} per prefix)")
            per_hour = gets_per_s * 3600 * prices["s3_get_per_million"] / 1e6
        if label.endswith("Script") and small_files and au < AU_TARGET:
            # The script's own knob: enough GETs in flight for the accelerators' appetite.
            needed = math.ceil(demand_ops * latency * 1.1)
            provision += f"; s3_concurrency {needed} instead of {SCRIPT_CONCURRENCY} would feed one instance"
        hours = run_hours(au, count, label.replace("Express ", ""))
        once = setup_usd(label.replace("Express ", ""), "express" if express_bucket else "standard")
        out.append(SourceSize(label, au, _largest(au_at), how, shared, provision, count * hourly + per_hour,
                              (count * hourly + per_hour) * hours + once, hours, extra))

    # ---- File: each instance downloads its copy first, then reads local disk (scales with N) ----------
    # With several instances each downloads its share (ShardedByS3Key: the data-parallel split), so the
    # bytes per instance fall with N while the cluster GETs every object once, over the prefixes given.
    local_mbps = 2000.0 if found.nvme_gb else 250.0   # the single-job estimate's local read rates
    file_cap = per_host_sps(local_mbps, None)
    file_au = lambda n: _au(file_cap, demand_sps)  # noqa: E731 - per instance: N does not enter
    # The single-job estimate's download model (calibrated), on the instance's share of the objects.
    download_seconds = (FILE_DOWNLOAD_FIXED + dataset_gb / count * 1e3 / min(network_mbps, NVME_DOWNLOAD_MBPS if found.nvme_gb
                                                                             else EBS_DOWNLOAD_MBPS)
                        + shape.files / count * FILE_PER_OBJECT)
    prefixes = max(1, math.ceil(shape.files / download_seconds / S3_GETS_PER_PREFIX))
    download_hours = download_seconds / 3600
    hours = run_hours(file_au(count), count, "File") + download_hours
    out.append(SourceSize(
        "File", file_au(count), _largest(file_au), f"its local copy ({'NVMe' if found.nvme_gb else 'EBS'}, "
        f"{local_mbps:,.0f} MB/s)", "none while training; the download GETs every object once",
        (f"ShardedByS3Key, {dataset_gb * 1.05 / count:,.0f} GB per instance" if count > 1 else
         f"a volume of {dataset_gb * 1.05:,.0f} GB") + f"; {prefixes} S3 prefix{'es' if prefixes > 1 else ''}; "
        f"downloads {download_hours * 60:,.0f} min first", count * hourly, count * hourly * hours, hours,
        ["File: the download is billed before training starts; each instance holds only its shard"]))

    # ---- S3 streaming: FastFile, Pipe, Script; on the directory bucket as well -------------------------
    readers = found.vcpus
    streams = (
        ("FastFile", S3_STREAM_MBPS, readers / FASTFILE_GET_LATENCY if small_files else None, FASTFILE_GET_LATENCY,
         f"{readers} readers at ~{FASTFILE_GET_LATENCY * 1000:.0f} ms per file, {S3_STREAM_MBPS:,.0f} MB/s streaming"),
        ("Pipe", PIPE_MBPS, 8 / PIPE_OBJECT_LATENCY if small_files else None, PIPE_OBJECT_LATENCY,
         f"one stream per channel, 8 GETs ahead, {PIPE_MBPS:,.0f} MB/s"),
        ("Script", (SCRIPT_CONCURRENCY if small_files else SCRIPT_SHARD_CONNECTIONS) * S3_CONNECTION_MBPS,
         SCRIPT_CONCURRENCY / S3_STANDARD_FIRST_BYTE if small_files else None, S3_STANDARD_FIRST_BYTE,
         f"{SCRIPT_CONCURRENCY if small_files else SCRIPT_SHARD_CONNECTIONS} GETs in flight, {S3_CONNECTION_MBPS:g} MB/s per connection"),
    )
    for label, mbps, ops, latency, how in streams:
        s3_source(label, mbps, ops, latency, False, how, [])
    if express:
        cut = EXPRESS_FIRST_BYTE / S3_STANDARD_FIRST_BYTE
        for label, mbps, ops, latency, how in streams:
            if label == "Pipe":
                ops_x = 8 / EXPRESS_FIRST_BYTE if small_files else None
            elif label == "FastFile":
                ops_x = readers / (FASTFILE_GET_LATENCY - S3_STANDARD_FIRST_BYTE + EXPRESS_FIRST_BYTE) if small_files else None
            else:
                ops_x = ops / cut if ops else None
            s3_source(f"Express {label}", mbps, ops_x, EXPRESS_FIRST_BYTE, True, how + " (~5 ms first byte)", [])

    # ---- FSx for Lustre: throughput per TiB, shared; Scratch 2 or a Persistent 2 tier to feed the target ----
    fsx_host = per_host_sps(network_mbps, readers / FSX_READ_LATENCY if small_files else None)
    need_mbps = count * min(demand_mbps, fsx_host * sample_bytes / 1e6)
    options = []
    for label, per_tib, price_key in [("SCRATCH_2", FSX_SCRATCH2_MBPS_PER_TIB, "fsx_scratch2_gb_month"),
                                      *((f"PERSISTENT_2 {t} MB/s/TiB", float(t), f"fsx_persistent2_{t}_gb_month")
                                        for t in FSX_PERSISTENT2_TIERS)]:
        capacity = fsx_capacity_for(max(dataset_gib * 1.05, fsx_capacity_gib if label == "SCRATCH_2" else 0,
                                        need_mbps / per_tib * 1024))
        options.append((prices[price_key] * capacity * 1.073741824 / HOURS_PER_MONTH, label, per_tib, capacity))
    fsx_per_hour, fsx_label, fsx_per_tib, fsx_capacity = min(options)

    def fsx_au(n: int) -> float:
        throughput = fsx_per_tib * fsx_capacity / 1024   # MB/s for the whole cluster, at the provisioned size
        return _au(min(fsx_host, throughput * 1e6 / sample_bytes / n), demand_sps)
    au = fsx_au(count)
    hours = run_hours(au, count, "FSx")
    # The largest cluster: the file system grows with it (capacity, then a higher tier), so only one
    # instance's own limits bound it.
    out.append(SourceSize(
        "FSx", au, _largest(lambda n: _au(fsx_host, demand_sps)), f"its network ({network_mbps:,.0f} MB/s) and ~{FSX_READ_LATENCY * 1000:g} ms per cached read",
        f"{fsx_per_tib:g} MB/s per TiB of the file system ({FSX_SCRATCH2_BURST_MBPS_PER_TIB:g} burst for Scratch 2)",
        f"{fsx_label}, {fsx_capacity:,} GiB ({fsx_per_tib * fsx_capacity / 1024:,.0f} MB/s) — the cheapest deployment "
        "type and size that holds the data and feeds the target",
        count * hourly + fsx_per_hour, (count * hourly + fsx_per_hour) * hours + setup_usd("FSx", "standard"), hours,
        ["FSx: Persistent 2 prices are not confirmed against the live pricing page (override with --prices)"]
        if fsx_label != "SCRATCH_2" else []))

    # ---- EFS: Bursting, Elastic or Provisioned, shared; 500 MiB/s per client -----------------------------
    efs_host = per_host_sps(min(network_mbps, EFS_PER_CLIENT_MIBPS * MIB), readers / EFS_READ_LATENCY if small_files else None)
    need_mibps = count * min(demand_mbps, efs_host * sample_bytes / 1e6) / MIB
    burst = max(EFS_BURST_MIBPS, EFS_BURST_MIBPS * dataset_gib / 1024)
    modes = [("Bursting (Max I/O)", burst, 0.0),
             ("Elastic (General Purpose)", EFS_ELASTIC_READ_MIBPS,
              need_mibps * MIB * 3600 / 1e3 * prices["efs_elastic_read_per_gb"])]
    provisioned = min(EFS_PROVISIONED_MAX_MIBPS, EFS_PROVISIONED_READ_MIBPS, max(1.0, need_mibps))
    modes.append((f"Provisioned {provisioned:,.0f} MiB/s", provisioned,
                  provisioned * prices["efs_provisioned_mibps_month"] / HOURS_PER_MONTH))
    feeding = [m for m in modes if m[1] >= need_mibps]
    efs_label, efs_mibps, efs_per_hour = min(feeding, key=lambda m: m[2]) if feeding else max(modes, key=lambda m: m[1])

    def efs_au(n: int) -> float:
        return _au(min(efs_host, efs_mibps * MIB * 1e6 / sample_bytes / n), demand_sps)
    au = efs_au(count)
    hours = run_hours(au, count, "EFS")
    efs_per_hour += prices["efs_standard_gb_month"] * dataset_gb / HOURS_PER_MONTH
    # The largest cluster: Elastic's read throughput per file system is the ceiling (the lower bound of
    # the documented 20-60 GiB/s), shared by every client.
    elastic_au = lambda n: _au(min(efs_host, EFS_ELASTIC_READ_MIBPS * MIB * 1e6 / sample_bytes / n), demand_sps)  # noqa: E731
    out.append(SourceSize(
        "EFS", au, _largest(elastic_au), f"{EFS_PER_CLIENT_MIBPS:g} MiB/s per client and ~{EFS_READ_LATENCY * 1000:g} ms per file",
        f"the file system's throughput mode ({efs_label}: {efs_mibps:,.0f} MiB/s)",
        f"EFS {efs_label} ({need_mibps:,.0f} MiB/s needed)" + ("" if feeding else ": no mode feeds it"),
        count * hourly + efs_per_hour, (count * hourly + efs_per_hour) * hours + setup_usd("EFS", "standard"), hours,
        ["EFS: Bursting holds its burst only while credits last (up to 12 hours a day)"] if efs_label.startswith("Bursting") else []))
    return Sizing(found, count, per_host_accelerators, rate, demand_mbps, demand_ops, out, notes)
