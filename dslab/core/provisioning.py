"""What the shared data sources are provisioned as, so that every estimate says which lab it prices.

FSx's deployment type, throughput per TiB and capacity; EFS's throughput mode; how many S3 prefixes the
dataset is spread over; the directory bucket's read rate. ``AS_DEPLOYED`` is the lab the stacks build
(Scratch 2 at 1,200 GiB, EFS Bursting in Max I/O, each dataset under one prefix); `dslab size` provisions
another to feed a cluster. ``estimate.estimate_mode`` takes one of these, so the single job, the cluster
and the pick are one model with the premise named. Every limit cites its source; what has none is an
assumption and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .prices import HOURS_PER_MONTH, PriceTable

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
SCRATCH_2, PERSISTENT_2 = "SCRATCH_2", "PERSISTENT_2"
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
BURSTING, ELASTIC, PROVISIONED = "bursting", "elastic", "provisioned"


def fsx_capacity_for(gib_needed: float) -> int:
    """The smallest Scratch 2 / Persistent 2 SSD capacity (GiB) that holds ``gib_needed``."""
    for step in FSX_CAPACITY_STEPS_GIB:
        if gib_needed <= step:
            return step
    return int(-(-gib_needed // FSX_CAPACITY_INCREMENT_GIB) * FSX_CAPACITY_INCREMENT_GIB)


@dataclass(frozen=True)
class FsxConfig:
    deployment_type: str = SCRATCH_2
    capacity_gib: int = 1200
    mbps_per_tib: float = FSX_SCRATCH2_MBPS_PER_TIB

    @classmethod
    def persistent2(cls, mbps_per_tib: int, capacity_gib: int) -> "FsxConfig":
        return cls(PERSISTENT_2, capacity_gib, float(mbps_per_tib))

    @property
    def throughput_mbps(self) -> float:
        """The whole file system's baseline throughput (MB/s), shared by every client."""
        return self.mbps_per_tib * self.capacity_gib / 1024

    @property
    def price_key(self) -> str:
        return "fsx_scratch2_gb_month" if self.deployment_type == SCRATCH_2 else \
            f"fsx_persistent2_{int(self.mbps_per_tib)}_gb_month"

    def hourly(self, prices: PriceTable) -> float:
        """What it bills per hour, used or not (FSx prices its capacity per GB-month, counted in GiB)."""
        return prices[self.price_key] * self.capacity_gib / HOURS_PER_MONTH

    def label(self) -> str:
        kind = "Scratch 2" if self.deployment_type == SCRATCH_2 else f"Persistent 2 {self.mbps_per_tib:g} MB/s/TiB"
        return f"{kind}, {self.capacity_gib:,} GiB ({self.throughput_mbps:,.0f} MB/s)"


@dataclass(frozen=True)
class EfsConfig:
    mode: str = BURSTING
    provisioned_mibps: float | None = None

    def read_mibps(self, dataset_gib: float) -> float:
        """The file system's read throughput, shared by every client."""
        if self.mode == ELASTIC:
            return EFS_ELASTIC_READ_MIBPS
        if self.mode == PROVISIONED:
            return min(float(self.provisioned_mibps or 1.0), EFS_PROVISIONED_READ_MIBPS)
        return max(EFS_BURST_MIBPS, EFS_BURST_MIBPS * dataset_gib / 1024)

    def throughput_usd(self, prices: PriceTable, *, hours: float, gb_read: float) -> float:
        """Throughput charges beside storage: Provisioned per MiB/s-month, Elastic per GB read."""
        if self.mode == PROVISIONED:
            return float(self.provisioned_mibps or 0.0) * prices["efs_provisioned_mibps_month"] * hours / HOURS_PER_MONTH
        if self.mode == ELASTIC:
            return gb_read * prices["efs_elastic_read_per_gb"]
        return 0.0

    def label(self) -> str:
        if self.mode == PROVISIONED:
            return f"EFS Provisioned {self.provisioned_mibps or 0:,.0f} MiB/s"
        return "EFS Elastic (General Purpose)" if self.mode == ELASTIC else "EFS Bursting (Max I/O)"


@dataclass(frozen=True)
class Provisioning:
    """The premise of an estimate: how the shared sources stand."""
    fsx: FsxConfig = FsxConfig()
    efs: EfsConfig = EfsConfig()
    s3_prefixes: int | None = 1          # the dataset's prefixes; None: as many as the load needs
    express_reads_per_second: float = EXPRESS_READS_PER_BUCKET
    name: str = "the lab as deployed"

    def s3_gets_per_second(self) -> float:
        return float("inf") if self.s3_prefixes is None else self.s3_prefixes * S3_GETS_PER_PREFIX

    def with_fsx_capacity(self, capacity_gib: int) -> "Provisioning":
        return replace(self, fsx=replace(self.fsx, capacity_gib=capacity_gib))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fsx": self.fsx.label(), "efs": self.efs.label(),
                "s3_prefixes": self.s3_prefixes, "express_reads_per_second": self.express_reads_per_second}


AS_DEPLOYED = Provisioning()


def as_deployed(fsx_capacity_gib: int = 1200, efs_provisioned_mibps: float | None = None) -> Provisioning:
    """The lab the stacks build (Scratch 2 at the configured capacity, EFS Bursting or Provisioned)."""
    efs = EfsConfig(PROVISIONED, efs_provisioned_mibps) if efs_provisioned_mibps else EfsConfig()
    return Provisioning(fsx=FsxConfig(capacity_gib=fsx_capacity_gib), efs=efs)
