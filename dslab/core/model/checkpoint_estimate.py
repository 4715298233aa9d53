"""Where should checkpoints go: save, stall and restore seconds per target, and what a day of checkpoints costs.

A checkpoint plan (core/workloads/checkpoint.py: every rank's files by DLIO's formula) on N hosts, saved every K minutes, the
last ``keep`` kept, on each target the lab deploys:

- SageMaker's checkpoint sync (``CheckpointConfig``) to the data bucket or the S3 Express One Zone directory bucket:
  each host writes its ranks' files to its own volume (the stall: training waits for that write), SageMaker uploads
  them behind the script, and a restore copies every checkpoint kept under the S3 URI onto every instance before the
  script starts ("Existing checkpoints in S3 are written to the SageMaker container at the start of the job",
  SageMaker Developer Guide, model-checkpoints.html; "the checkpoints from this S3 bucket are restored to
  checkpoint_local_path in each instance of the new training job", model-checkpoints-resume.html), then the script
  reads its own files from that volume.
- FSx for Lustre and EFS as a read-write channel every host shares: the save is the write to the file system (the
  stall is the whole save), the restore reads one checkpoint back.

Per target: the save, stall and restore seconds and what bounds them; the cluster's idle cost per save (stall x
hosts x the instance's price); the storage of the checkpoints kept, the requests, and what the target bills while it
stands (FSx's capacity, EFS's Provisioned throughput); a day at the interval. Every limit cites its document; what
has none is an assumption and says so. Standard library only, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from .estimate import MODEL, NETWORK_PAYLOAD, Model

# The estimate's own figures (estimate.Model: each with its range and source in calibration.assumptions()); a Question
# carries the model it is answered with (the shipped one, or a user's calibration), these are the shipped values.
NVME_CHECKPOINT_MBPS = MODEL.nvme_checkpoint_mbps
S3_CONNECTION_MBPS = MODEL.s3_connection_mbps
from ..facts.instances import INSTANCES
from ..modes import (CKPT_EFS, CKPT_EXPRESS, CKPT_FSX, CHECKPOINT_TARGETS, SYNC_TARGETS,
                     checkpoint_target_label)
from .volume import VOLUME_HEADROOM, volume_for
from ..shape import format_bytes
from ..facts.prices import HOURS_PER_MONTH, PriceTable
from .provisioning import EfsConfig, FsxConfig, Provisioning, deploy_command
from ..facts.storage import (CHECKPOINT_NONCURRENT_DAYS, CHECKPOINT_NONCURRENT_MEAN_DAYS, BURSTING,
                             EFS_LIMITS_SOURCE, EFS_PROVISIONED_MAX_MIBPS, EFS_READ_METERING, ELASTIC,
                             FSX_CAPACITY_INCREMENT_GIB, FSX_PERSISTENT2_TIERS, FSX_QUOTA_DEFAULT_GIB, MIB,
                             PROVISIONED, SCRATCH_2, fsx_capacity_for, fsx_quota)

GIB = 1024 ** 3    # a unit: DLIO's "GB"
DAY = 86_400.0     # a unit: seconds in the day a cost is given for

# ---- FSx for Lustre, per TiB of SSD storage ------------------------------------------------------------------
# "File system performance for SSD storage options" (FSx for Lustre User Guide, ssd-storage.html): per deployment
# type, network throughput baseline (MBps/TiB) and disk throughput baseline; Scratch 2's disk is "200 (read) 100
# (write)", Persistent 2's disk baseline is its tier (125, 250, 500, 1000), network 320, 640, 1300, 2600. "When you
# write data to your file system, or when you read data that is not stored on the in-memory cache, file system
# performance is determined by the lower of the network throughput and disk throughput" (performance.html): a save
# writes at the lower of the two, a restore (never in the cache: another host's files, or a new job) reads so too.
# Bursts (Scratch 2's network credits, 500 MB/s/TiB of disk burst on the 125 and 250 tiers) are not counted: a
# checkpoint every few minutes, all day, is a sustained load.
FSX_NETWORK_MBPS_PER_TIB = {SCRATCH_2: 200.0, 125: 320.0, 250: 640.0, 500: 1300.0, 1000: 2600.0}
FSX_DISK_WRITE_MBPS_PER_TIB = {SCRATCH_2: 100.0, 125: 125.0, 250: 250.0, 500: 500.0, 1000: 1000.0}
FSX_DISK_READ_MBPS_PER_TIB = {SCRATCH_2: 200.0, 125: 125.0, 250: 250.0, 500: 500.0, 1000: 1000.0}
# The largest FSx `dslab size` provisions for checkpoints: four times the account's default storage quota per
# deployment type (provisioning.FSX_QUOTA_DEFAULT_GIB, FSx for Lustre User Guide limits.html); a row past the quota
# says the quota request it needs (provisioning.fsx_quota), as the data rows do.
FSX_SIZE_LIMIT_GIB = 4 * FSX_QUOTA_DEFAULT_GIB

# ---- EFS (EFS User Guide, performance.html and efs-metrics.html) ----------------------------------------------
# Writes are metered at the full rate: "Read operations are metered at one-third the rate of other operations"
# (PermittedThroughput, efs-metrics.html), so a Bursting or Provisioned file system writes at its metered rate and
# reads at up to three times it (provisioning.EFS_READ_METERING). Per file system, reads and writes: the lab's Region's
# limits (facts/storage.py EFS_REGION_LIMITS, the quotas page's table: in us-east-1 writes 3 GiB/s Bursting, 3.33
# Provisioned, 5 Elastic); per client 500 MiB/s, Elastic 1,500 MiB/s (provisioning.EFS_PER_CLIENT_MIBPS). Bursting: "The baseline rate is 50 MiB/s per
# TiB of storage", with burst credits "up to 100 MiBps per TiB ... with a minimum of 100 MiBps": a day whose writes
# exceed what the baseline earns runs out of credits and writes at the baseline.
EFS_BURST_MIBPS_PER_TIB = 100.0
EFS_BURST_MIN_MIBPS = 100.0
EFS_BASELINE_MIBPS_PER_TIB = 50.0

# ---- S3 -------------------------------------------------------------------------------------------------------
# "your application can achieve at least 3,500 PUT/COPY/POST/DELETE or 5,500 GET/HEAD requests per second per
# partitioned Amazon S3 prefix" (S3 User Guide, optimizing-performance.html): a job's checkpoints go under one S3 URI,
# one prefix. "By default, each directory bucket supports up to 200,000 reads and up to 100,000 writes per second"
# (S3 User Guide, s3-express-performance.html).
S3_PUTS_PER_PREFIX = 3500.0
S3_GETS_PER_PREFIX = 5500.0
EXPRESS_WRITES_PER_BUCKET = 100_000.0
EXPRESS_READS_PER_BUCKET = 200_000.0
# Assumptions (no document says how SageMaker's checkpoint uploader or its copy-in moves the bytes): files in parts
# of 8 MiB (the AWS CLI's multipart_chunksize and multipart_threshold), 10 parts at once per instance (the AWS CLI's
# max_concurrent_requests), each at S3's per-connection 85-90 MB/s (estimate.S3_CONNECTION_MBPS).
SYNC_PART_BYTES = 8 * 1024 ** 2
SYNC_CONNECTIONS = MODEL.sync_connections


def sync_assumption(model: Model = MODEL) -> str:
    return (f"SageMaker's checkpoint upload and copy-in: how they move bytes is not documented; assumed "
            f"{SYNC_PART_BYTES // 2**20} MiB parts, {model.sync_connections:.3g} at once per instance (the AWS CLI's "
            f"defaults) at {model.s3_connection_mbps:g} MB/s each, up to the instance's network")


SYNC_ASSUMPTION = sync_assumption()

NONCURRENT_SAID = (f"S3 sync: the data bucket is versioned; each checkpoint the sync deletes is kept as a noncurrent "
                   f"version until its lifecycle rule expires it ({CHECKPOINT_NONCURRENT_DAYS} day under checkpoints/, "
                   f"rounded to the next midnight UTC: {CHECKPOINT_NONCURRENT_MEAN_DAYS:g} days on average), priced as "
                   "storage beside the checkpoints kept")

# ---- the instance's volume (where SageMaker's LocalPath is) ---------------------------------------------------
# "SageMaker supports only the General Purpose SSD (gp2) storage volume type" (HyperParameterTuningResourceConfig,
# VolumeSizeInGB); gp2: "Volumes that are 170 GiB and smaller deliver a maximum throughput of 128 MiB/s. Volumes larger
# than 170 GiB but smaller than 334 GiB can burst to a maximum throughput of 250 MiB/s. Volumes that are 334 GiB and
# larger deliver 250 MiB/s" (EBS User Guide, general-purpose.html). NVMe instance storage: AWS publishes IOPS, not
# MB/s; the lab's figure for a checkpoint's write and read (Model.nvme_checkpoint_mbps) is an assumption, said so.
GP2_SMALL_MIBPS, GP2_LARGE_MIBPS = 128.0, 250.0
GP2_SMALL_MAX_GB, GP2_BURST_MAX_GB = 170, 334
def nvme_assumption(model: Model = MODEL) -> str:
    return (f"NVMe instance storage writes and reads at {model.nvme_checkpoint_mbps:,.0f} MB/s per instance "
            "(an assumption: AWS publishes its IOPS, not MB/s)")


NVME_ASSUMPTION = nvme_assumption()

# What a checkpoint occupies beyond its bytes on a file system or volume: the 5% every volume gets.
HEADROOM = VOLUME_HEADROOM
DEFAULT_KEEP = 2                      # --keep's default for a workload that writes none (default_keep): the last and one before
DEFAULT_EVERY_SECONDS = 30 * 60.0     # --checkpoint-every's default: every 30 minutes
DEFAULT_SAVE_UNDER_SECONDS = 60.0     # size's --save-under default: a save within a minute
MAX_KEEP = 100                        # --keep's bound, against a typo


def default_keep(workload: Any) -> int:
    """The checkpoints an answer keeps when not told (--keep): what the workload writes (num_checkpoints_write), as an
    experiment of it keeps each one it writes (DLIO saves each in its own folder); DEFAULT_KEEP where it writes none."""
    writes = int(getattr(workload, "writes", 0) or 0)
    return min(MAX_KEEP, writes) if writes > 0 else DEFAULT_KEEP


def parse_duration(text: Any, field: str, *, unit: str = "m") -> float:
    """Seconds from "30m", "2h", "90s", "1.5h", or a bare number in ``unit`` (m: minutes, s: seconds)."""
    value = str(text).strip().lower().replace(" ", "")
    scale = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
    number, suffix = value, unit
    for key in sorted(scale, key=len, reverse=True):
        if value.endswith(key) and value[:-len(key)]:
            number, suffix = value[:-len(key)], key
            break
    try:
        seconds = float(number) * scale[suffix]
    except ValueError:
        seconds = float("nan")
    if not math.isfinite(seconds) or not 1 <= seconds <= 7 * DAY:
        raise ConfigError(field, f"{text!r} is not a duration", "e.g. 30m, 2h, 90s (1 s to 7 days)")
    return seconds


@dataclass(frozen=True)
class CheckpointLoad:
    """What one save asks of a target: the plan's bytes and files, per host and in all."""
    hosts: int
    total_bytes: int          # one checkpoint, every rank's files
    host_bytes: int           # the largest host's share
    parts: int                # upload parts (SYNC_PART_BYTES) of one checkpoint, every host's files
    host_parts: int
    files: int

    @classmethod
    def of(cls, plan) -> "CheckpointLoad":
        """A CheckpointPlan's load, at its scale (every file at the workload's --scale)."""
        from ..workloads.checkpoint import scaled_bytes
        per_host, host_parts, files = [], [], 0
        for host in range(plan.hosts):
            sizes = [scaled_bytes(size, plan.scale) for r in plan.host_ranks(host) for _, size in r.files]
            per_host.append(sum(sizes))
            host_parts.append(sum(max(1, math.ceil(s / SYNC_PART_BYTES)) for s in sizes if s))
            files += len(sizes)
        return cls(plan.hosts, sum(per_host), max(per_host or [0]), sum(host_parts), max(host_parts or [0]), files)


@dataclass
class TargetEstimate:
    target: str                       # s3 | express | fsx | efs
    provision: str                    # how the target stands: "the data bucket", "FSx Scratch 2, 1,200 GiB (...)"
    premise: str                      # "as deployed" | "provisioned for the question" | ...
    save_seconds: float               # until the checkpoint is whole on the target (the sync: written and uploaded)
    stall_seconds: float              # training waits (the sync: the write to the instance's volume)
    restore_seconds: float            # a new job back at the checkpoint (the sync: the copy-in, then the read)
    bound: str                        # what limits the save
    saves_per_day: float
    idle_usd_per_save: float
    storage_usd_per_day: float
    requests_usd_per_day: float
    standing_usd_per_day: float
    restore_usd: float
    puts_per_save: int = 0
    gets_per_restore: int = 0
    upload_seconds: float | None = None   # the sync: behind the script
    copy_in_seconds: float | None = None  # the sync's restore: before the script starts
    blocker: str | None = None
    warnings: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)   # the deploy's context settings (FSx, EFS)
    quota: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return checkpoint_target_label(self.target)

    @property
    def idle_usd_per_day(self) -> float:
        return self.idle_usd_per_save * self.saves_per_day

    @property
    def usd_per_day(self) -> float:
        return self.idle_usd_per_day + self.storage_usd_per_day + self.requests_usd_per_day + self.standing_usd_per_day

    @property
    def keeps_up(self) -> bool:
        return not self.warnings

    def command(self) -> str | None:
        if not self.settings:
            return None
        return deploy_command(self.settings, fsx="up" if any(k.startswith("fsx") for k in self.settings) else "keep")

    def to_dict(self) -> dict[str, Any]:
        out = {"target": self.target, "label": self.label, "provision": self.provision, "premise": self.premise,
               "save_seconds": round(self.save_seconds, 2), "stall_seconds": round(self.stall_seconds, 2),
               "restore_seconds": round(self.restore_seconds, 2), "bound": self.bound,
               "saves_per_day": round(self.saves_per_day, 2), "idle_usd_per_save": round(self.idle_usd_per_save, 4),
               "idle_usd_per_day": round(self.idle_usd_per_day, 2), "storage_usd_per_day": round(self.storage_usd_per_day, 2),
               "requests_usd_per_day": round(self.requests_usd_per_day, 4),
               "standing_usd_per_day": round(self.standing_usd_per_day, 2), "usd_per_day": round(self.usd_per_day, 2),
               "restore_usd": round(self.restore_usd, 4), "puts_per_save": self.puts_per_save,
               "gets_per_restore": self.gets_per_restore, "warnings": list(self.warnings),
               "assumptions": list(self.assumptions)}
        if self.upload_seconds is not None:
            out["upload_seconds"] = round(self.upload_seconds, 2)
        if self.copy_in_seconds is not None:
            out["copy_in_seconds"] = round(self.copy_in_seconds, 2)
        if self.blocker:
            out["blocker"] = self.blocker
        if self.settings:
            out.update(deploy_settings=dict(self.settings), command=self.command())
        if self.quota:
            out["quota"] = self.quota
        return out


@dataclass(frozen=True)
class Question:
    """The checkpoint question: a plan (its hosts, instance and bytes), saved every ``every_seconds``, the last
    ``keep`` kept, priced with ``prices`` on ``lab``."""
    plan: Any                         # core/workloads/checkpoint.py CheckpointPlan
    instance_type: str
    every_seconds: float
    keep: int
    prices: PriceTable
    lab: Provisioning
    volume_size_gb: int | None = None
    model: Model = MODEL     # the constants: shipped, or a user's calibration (NVMe's rate, the sync's connections)

    @property
    def load(self) -> CheckpointLoad:
        return CheckpointLoad.of(self.plan)

    @property
    def saves_per_day(self) -> float:
        return DAY / self.every_seconds

    @property
    def hourly(self) -> float:
        return self.prices.require_instance(self.instance_type, "--instance")

    def network_said(self) -> list[str]:
        """The network assumption an answer on this instance carries (its primary card's share), if any."""
        row = INSTANCES.get(self.instance_type)
        return [row.ip_assumption] if row is not None and row.ip_assumption else []

    def network_mbps(self) -> float:
        row = INSTANCES.get(self.instance_type)
        gbps = row.ip_gbps if row is not None else 10.0
        return gbps * 1000 / 8 * NETWORK_PAYLOAD

    def idle_usd(self, seconds: float) -> float:
        """The cluster's instances waiting ``seconds``: what they bill meanwhile."""
        return seconds * self.plan.hosts * self.hourly / 3600


def volume_mbps(instance_type: str, volume_gb: int, nvme: bool, model: Model = MODEL) -> tuple[float, str | None]:
    """The instance volume's write (and read) throughput, MB/s, and the assumption it rests on (None: documented)."""
    if nvme:
        return model.nvme_checkpoint_mbps, nvme_assumption(model)
    mibps = GP2_SMALL_MIBPS if volume_gb <= GP2_SMALL_MAX_GB else GP2_LARGE_MIBPS
    note = (f"a gp2 volume of {volume_gb:,} GB between 170 and 334 GiB bursts to 250 MiB/s (its burst credits "
            "assumed)" if GP2_SMALL_MAX_GB < volume_gb < GP2_BURST_MAX_GB else None)
    return mibps * MIB, note


def _sync(q: Question, target: str) -> TargetEstimate:
    load, prices = q.load, q.prices
    express = target == CKPT_EXPRESS
    # The instance's volume holds what the script keeps and, at a restore, every kept checkpoint of every host.
    needed = load.total_bytes * q.keep if q.plan.hosts > 1 else load.host_bytes * q.keep
    volume = volume_for(q.instance_type, q.volume_size_gb, needed)
    write_mbps, volume_note = volume_mbps(q.instance_type, volume.gb, volume.nvme, q.model)
    network = q.network_mbps()
    stall = load.host_bytes / 1e6 / write_mbps
    per_host = min(network, q.model.sync_connections * q.model.s3_connection_mbps)
    puts_rate = EXPRESS_WRITES_PER_BUCKET if express else S3_PUTS_PER_PREFIX
    gets_rate = EXPRESS_READS_PER_BUCKET if express else S3_GETS_PER_PREFIX
    upload = max(load.host_bytes / 1e6 / per_host, load.parts / puts_rate)
    # The restore: every kept checkpoint of every host onto every instance, then the script reads its own files.
    copied = load.total_bytes * q.keep
    copy_in = max(copied / 1e6 / min(per_host, write_mbps), load.parts * q.keep * q.plan.hosts / gets_rate)
    read_back = load.host_bytes / 1e6 / write_mbps
    restore = copy_in + read_back
    gb_kept = load.total_bytes * q.keep / 1e9
    if express:
        storage = gb_kept * prices["express_gb_month"] * 24 / HOURS_PER_MONTH
        per_save = (load.parts * prices["express_put_per_thousand"] / 1000
                    + load.total_bytes / 1e9 * prices["express_upload_per_gb"])
        restore_requests = (load.parts * q.keep * q.plan.hosts * prices["express_get_per_thousand"] / 1000
                            + copied * q.plan.hosts / 1e9 * prices["express_retrieval_per_gb"])
    else:
        # The data bucket is versioned: each checkpoint the sync deletes stays a noncurrent version for a day and a half
        # on average (facts/storage.py CHECKPOINT_NONCURRENT_MEAN_DAYS), billed as any object is.
        noncurrent_gb = load.total_bytes / 1e9 * q.saves_per_day * CHECKPOINT_NONCURRENT_MEAN_DAYS
        storage = (gb_kept + noncurrent_gb) * prices["s3_storage_gb_month"] * 24 / HOURS_PER_MONTH
        per_save = load.parts * prices["s3_put_per_million"] / 1e6
        restore_requests = load.parts * q.keep * q.plan.hosts * prices["s3_get_per_million"] / 1e6
    bucket = "the lab's S3 Express One Zone directory bucket" if express else "the lab's data bucket"
    est = TargetEstimate(
        target=target, provision=f"{bucket}, through each instance's {volume.describe()}", premise="as deployed",
        save_seconds=stall + upload, stall_seconds=stall, restore_seconds=restore, bound="",
        saves_per_day=q.saves_per_day, idle_usd_per_save=q.idle_usd(stall), storage_usd_per_day=storage,
        requests_usd_per_day=per_save * q.saves_per_day, standing_usd_per_day=0.0,
        restore_usd=q.idle_usd(restore) + restore_requests, puts_per_save=load.parts,
        gets_per_restore=load.parts * q.keep * q.plan.hosts, upload_seconds=upload, copy_in_seconds=copy_in,
        assumptions=[sync_assumption(q.model)] + ([volume_note] if volume_note else []) + ([] if express else [NONCURRENT_SAID])
        + q.network_said())
    est.bound = (f"the instance's volume ({write_mbps:,.0f} MB/s); the upload behind it: "
                 + ("S3's PUT rate" if load.parts / puts_rate >= load.host_bytes / 1e6 / per_host
                    else f"{per_host:,.0f} MB/s per instance"))
    if not volume.fits:
        est.blocker = (f"each instance holds {volume.needed_gb:,} GB of checkpoints at a restore ({q.keep} kept"
                       + (f", every host's: SageMaker copies the whole S3 URI onto each instance" if q.plan.hosts > 1 else "")
                       + f"), more than its {volume.describe()}: fewer kept (--keep), a smaller --scale, "
                       + ("more instances" if volume.nvme else "a larger --volume-size-gb"))
    if upload > q.every_seconds:
        est.warnings.append(f"its upload takes {upload:,.0f} s, longer than the {q.every_seconds:,.0f} s between saves: "
                            "the uploads fall behind")
    return est


def _fsx_rates(fsx: FsxConfig) -> tuple[float, float]:
    """(write, uncached read) MB/s of the whole file system: the lower of network and disk per TiB, times its TiB."""
    key = SCRATCH_2 if fsx.deployment_type == SCRATCH_2 else int(fsx.mbps_per_tib)
    tib = fsx.capacity_gib / 1024
    network = FSX_NETWORK_MBPS_PER_TIB[key]
    return min(network, FSX_DISK_WRITE_MBPS_PER_TIB[key]) * tib, min(network, FSX_DISK_READ_MBPS_PER_TIB[key]) * tib


def fsx_label(fsx: FsxConfig) -> str:
    """FSx as a checkpoint target: its type, capacity, and what it writes and reads uncached."""
    write, read = _fsx_rates(fsx)
    kind = "Scratch 2" if fsx.deployment_type == SCRATCH_2 else f"Persistent 2 {fsx.mbps_per_tib:g} MB/s/TiB"
    return f"{kind}, {fsx.capacity_gib:,} GiB (writes {write:,.0f} MB/s, reads {read:,.0f} MB/s uncached)"


def _fsx(q: Question, fsx: FsxConfig, premise: str, settings: dict[str, Any] | None = None) -> TargetEstimate:
    load = q.load
    write, read = _fsx_rates(fsx)
    cluster_network = q.network_mbps() * q.plan.hosts
    save = max(load.total_bytes / 1e6 / min(write, cluster_network), load.host_bytes / 1e6 / q.network_mbps())
    restore = max(load.total_bytes / 1e6 / min(read, cluster_network), load.host_bytes / 1e6 / q.network_mbps())
    bound = (f"FSx's write throughput ({write:,.0f} MB/s: the lower of its network and disk per TiB)"
             if write <= cluster_network else f"the instances' network ({cluster_network:,.0f} MB/s)")
    est = TargetEstimate(
        target=CKPT_FSX, provision=fsx_label(fsx),
        premise=premise, save_seconds=save, stall_seconds=save, restore_seconds=restore, bound=bound,
        saves_per_day=q.saves_per_day, idle_usd_per_save=q.idle_usd(save), storage_usd_per_day=0.0,
        requests_usd_per_day=0.0, standing_usd_per_day=fsx.hourly(q.prices) * 24, restore_usd=q.idle_usd(restore),
        settings=dict(settings or {}), quota=fsx_quota(fsx),
        assumptions=["FSx bills its capacity whether used or not: its whole day is priced", *q.network_said()])
    kept = load.total_bytes * q.keep * HEADROOM / GIB
    if kept > fsx.capacity_gib:
        est.blocker = (f"{q.keep} checkpoint(s) of {format_bytes(load.total_bytes)} need {kept:,.0f} GiB, more than FSx's "
                       f"{fsx.capacity_gib:,} GiB ({premise}): deploy it larger (what dslab size --workload provisions) or keep fewer (--keep)")
    if save > q.every_seconds:
        est.warnings.append(f"a save takes {save:,.0f} s, longer than the {q.every_seconds:,.0f} s between saves")
    return est


def _efs_write_mibps(efs: EfsConfig, stored_gib: float, written_per_day_mib: float) -> tuple[float, str]:
    """The metered rate EFS writes at (MiB/s, the whole file system) and why."""
    limit = efs.limits[1]
    if efs.mode == ELASTIC:
        return limit, f"Elastic's per-file-system write limit in {efs.region} ({limit / 1024:g} GiB/s)"
    if efs.mode == PROVISIONED:
        rate = float(efs.provisioned_mibps or 1.0)
        return min(rate, limit), f"its Provisioned {rate:,.0f} MiB/s (writes metered at the full rate)"
    tib = stored_gib / 1024
    burst = max(EFS_BURST_MIN_MIBPS, EFS_BURST_MIBPS_PER_TIB * tib)
    baseline = EFS_BASELINE_MIBPS_PER_TIB * tib
    if written_per_day_mib > baseline * DAY:
        return max(baseline, 1e-3), (f"Bursting's baseline ({baseline:,.1f} MiB/s for {stored_gib:,.0f} GiB stored): a "
                                     "day's writes spend more burst credits than the baseline earns")
    return min(burst, limit), f"Bursting's burst rate ({burst:,.0f} MiB/s, while credits last)"


def _efs(q: Question, efs: EfsConfig, premise: str, settings: dict[str, Any] | None = None) -> TargetEstimate:
    load, prices = q.load, q.prices
    stored_gib = load.total_bytes * q.keep / GIB
    written_per_day_mib = load.total_bytes / 2**20 * q.saves_per_day
    rate_mibps, why = _efs_write_mibps(efs, stored_gib, written_per_day_mib)
    client = min(efs.per_client_mibps * MIB, q.network_mbps())
    read_mibps = (min(rate_mibps * EFS_READ_METERING, efs.limits[0]) if efs.mode != ELASTIC else efs.limits[0])
    fs_write = rate_mibps * MIB
    save = max(load.total_bytes / 1e6 / fs_write, load.host_bytes / 1e6 / client)
    restore = max(load.total_bytes / 1e6 / (read_mibps * MIB), load.host_bytes / 1e6 / client)
    bound = (f"EFS: {why}" if load.total_bytes / fs_write >= load.host_bytes / client
             else f"EFS's per-client limit ({efs.per_client_mibps:,.0f} MiB/s per instance)")
    gb_kept = load.total_bytes * q.keep / 1e9
    storage = gb_kept * prices["efs_standard_gb_month"] * 24 / HOURS_PER_MONTH
    standing = (float(efs.provisioned_mibps or 0) * prices["efs_provisioned_mibps_month"] * 24 / HOURS_PER_MONTH
                if efs.mode == PROVISIONED else 0.0)
    written = (load.total_bytes / 1e9 * prices["efs_elastic_write_per_gb"] * q.saves_per_day
               if efs.mode == ELASTIC else 0.0)
    restore_read = load.total_bytes / 1e9 * prices["efs_elastic_read_per_gb"] if efs.mode == ELASTIC else 0.0
    est = TargetEstimate(
        target=CKPT_EFS, provision=efs.label(), premise=premise, save_seconds=save, stall_seconds=save,
        restore_seconds=restore, bound=bound, saves_per_day=q.saves_per_day, idle_usd_per_save=q.idle_usd(save),
        storage_usd_per_day=storage, requests_usd_per_day=written, standing_usd_per_day=standing,
        restore_usd=q.idle_usd(restore) + restore_read, settings=dict(settings or {}),
        assumptions=[f"EFS's per-file-system limits in {efs.region}: {efs.limits[0] / 1024:g} GiB/s reads, "
                     f"{efs.limits[1] / 1024:g} GiB/s writes ({EFS_LIMITS_SOURCE})",
                     "checkpoints are rewritten every interval, so they stay in EFS Standard (never Infrequent Access)",
                     *q.network_said()])
    if save > q.every_seconds:
        est.warnings.append(f"a save takes {save:,.0f} s, longer than the {q.every_seconds:,.0f} s between saves")
    return est


def estimate_target(q: Question, target: str) -> TargetEstimate:
    """One target as the lab stands (``q.lab``)."""
    if target in SYNC_TARGETS:
        return _sync(q, target)
    if target == CKPT_FSX:
        return _fsx(q, q.lab.fsx, q.lab.premise_of("fsx"))
    if target == CKPT_EFS:
        return _efs(q, q.lab.efs, q.lab.premise_of("efs"))
    raise ConfigError("checkpoint target", f"{target!r} is not one", CHECKPOINT_TARGETS)


def estimate_targets(q: Question, targets: tuple[str, ...] = CHECKPOINT_TARGETS) -> list[TargetEstimate]:
    return [estimate_target(q, t) for t in targets]


# ---- provisioning: FSx and EFS for a save under a target, or for the cheapest day ---------------------------------

def fsx_options(q: Question, max_gib: int = FSX_SIZE_LIMIT_GIB) -> list[FsxConfig]:
    """Every FSx the lab builds that holds the checkpoints kept: each deployment type and tier, from the smallest
    capacity that holds them up to the one whose write throughput passes the cluster's network (more buys nothing)."""
    load = q.load
    smallest = fsx_capacity_for(load.total_bytes * q.keep * HEADROOM / GIB)
    cluster = q.network_mbps() * q.plan.hosts
    out = []
    for kind in (SCRATCH_2, *FSX_PERSISTENT2_TIERS):
        fsx = FsxConfig() if kind == SCRATCH_2 else FsxConfig.persistent2(kind, 1200)
        capacity = smallest
        while capacity <= max_gib:
            candidate = replace(fsx, capacity_gib=capacity)
            out.append(candidate)
            if _fsx_rates(candidate)[0] >= cluster:
                break
            capacity = 2400 if capacity < 2400 else capacity + FSX_CAPACITY_INCREMENT_GIB
    return out


def efs_options(q: Question) -> list[EfsConfig]:
    """Bursting, Elastic, and Provisioned from 1 MiB/s to the lab's limit (a grid fine enough for a day's cost)."""
    steps = sorted({1, 10, 25, 50, 75, 100, 150, 200, 300, 400, 500, 750, 1000, 1024, 1500, 2000, 2500, 3000,
                    int(EFS_PROVISIONED_MAX_MIBPS)})
    region = q.lab.efs.region   # EFS's per-file-system limits are the lab's Region's
    return [EfsConfig(BURSTING, None, region), EfsConfig(ELASTIC, None, region),
            *(EfsConfig(PROVISIONED, float(m), region) for m in steps)]


def candidates(q: Question, target: str, premise: str) -> list[TargetEstimate]:
    """FSx's or EFS's every option (fsx_options, efs_options) on the question, each with the deploy that builds it."""
    if target == CKPT_FSX:
        return [_fsx(q, f, premise, f.settings()) for f in fsx_options(q)]
    return [_efs(q, e, premise, e.settings()) for e in efs_options(q)]


def option_name(o: TargetEstimate) -> str:
    return f"{o.label} ({o.provision}{'' if o.premise == 'as deployed' else ', ' + o.premise})"


# ---- measured: a run's checkpoint records, per trial and target ------------------------------------------------

# MLPerf Storage's checkpointing rules: "Each benchmark setup must be executed five times ... The final metrics are the
# average across the five runs" (mlcommons/storage Submission_guidelines.md 2.2.3, at 03ef5ec); "For each submission,
# one must first perform the checkpoint write, then clear the cache, and finally perform the checkpoint read" with
# WRITE "--num-checkpoints-read=0" and READ "--num-checkpoints-write=0": two runs.
MLPERF_RUNS = 5
# And where: "A benchmark result is the mean of 5 run results, executed consecutively ... The 5 runs must be done on the
# same machine(s)" (mlcommons/storage, the rules' Definitions). Every writer and restore here is a SageMaker training
# job, run on the instances SageMaker gives it: no job can ask for the machines an earlier one had, so no run of the
# lab can claim that part of the sequence, and the report says so instead.
MLPERF_SAME_MACHINES = ("each run a SageMaker training job on the instances SageMaker gives it, where MLPerf's \"5 runs "
                        "must be done on the same machine(s)\" (no job can ask for an earlier job's instances)")

@dataclass
class MeasuredTarget:
    """One target of a checkpoint trial as a run measured it: means over its completed jobs (and the sync's restore
    job's copy-in, the Downloading phase SageMaker's copy of the S3 URI is reported in, plus its reads)."""
    trial: str
    model: str
    target: str
    jobs: int
    completed: int
    save_seconds: float | None
    stall_seconds: float | None
    load_seconds: float | None
    save_gb_per_second: float | None
    load_gb_per_second: float | None
    restore_seconds: float | None
    copy_in_seconds: float | None
    bytes_per_checkpoint: int | None
    instance_type: str
    instance_count: int
    cost_usd: float
    failures: list[str] = field(default_factory=list)
    durable_seconds: float | None = None   # the sync: until each save was listed in S3; FSx and EFS: the save
    runs: int = 0                          # writer jobs completed (the repeats)
    read_apart: int = 0                    # restore jobs completed: reads on a new instance, after the writer

    def mlperf_sequence(self) -> list[str]:
        """What keeps these figures from MLPerf Storage's: the write, then the read as a run of its own, each result the
        mean of five runs (MLPERF_RUNS) on the same machines. The last is never met (MLPERF_SAME_MACHINES), so the list
        always ends with it: what a run can mend (restore, repeats) comes first."""
        out = []
        if self.read_apart < self.runs or not self.runs:
            out.append("read back in the writing job (checkpoint.restore: false), not a new one")
        if self.runs < MLPERF_RUNS:
            out.append(f"{self.runs} run(s), where MLPerf takes the mean of {MLPERF_RUNS} (repeats: {MLPERF_RUNS})")
        return out + [MLPERF_SAME_MACHINES]

    @property
    def label(self) -> str:
        return checkpoint_target_label(self.target)


def _mean(values) -> float | None:
    values = [float(v) for v in values if isinstance(v, (int, float))]
    return sum(values) / len(values) if values else None


def measured_targets(records: list[dict[str, Any]]) -> list[MeasuredTarget]:
    """The checkpoint records (``checkpoint_target`` set) per (trial, target), in the records' order."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        if r.get("checkpoint_target"):
            groups.setdefault((r.get("trial") or "", r["checkpoint_target"]), []).append(r)
    out = []
    for (trial, target), items in groups.items():
        writers = [r for r in items if not r.get("checkpoint_restore")]
        restores = [r for r in items if r.get("checkpoint_restore")]
        done = [r for r in writers if r["status"] == "Completed"]
        figures = [(r.get("metrics") or {}).get("checkpoint") or {} for r in done]
        # A cluster's figures are its slowest host's (job_metrics._checkpoint_cluster), where every host gave them.
        figures = [((r.get("metrics") or {}).get("cluster") or {}).get("checkpoint") or f for r, f in zip(done, figures)]
        restored = [r for r in restores if r["status"] == "Completed"]
        restore_figures = [(((r.get("metrics") or {}).get("cluster") or {}).get("checkpoint")
                            or (r.get("metrics") or {}).get("checkpoint") or {}) for r in restored]
        copy_in = _mean((r.get("phases") or {}).get("Downloading", 0.0) for r in restored)
        if target in SYNC_TARGETS:
            load = _mean(f.get("load_seconds_mean") for f in restore_figures)
            restore = (copy_in or 0.0) + load if load is not None else None
        else:   # the reads of its restore job (a new instance) where it had one, else the writer's own
            load = _mean(f.get("load_seconds_mean") for f in (restore_figures if restores else figures))
            restore = load
        first = items[0]
        out.append(MeasuredTarget(
            trial=trial, model=first["dataset"], target=target, jobs=len(items), completed=len(done) + len(restored),
            save_seconds=_mean(f.get("save_seconds_mean") for f in figures),
            stall_seconds=_mean(f.get("stall_seconds_mean") for f in figures),
            load_seconds=load, save_gb_per_second=_mean(f.get("save_gb_per_second_mean") for f in figures),
            load_gb_per_second=_mean(f.get("load_gb_per_second_mean") for f in (restore_figures if restores
                                                                              else figures)),
            restore_seconds=restore, copy_in_seconds=copy_in if target in SYNC_TARGETS else None,
            bytes_per_checkpoint=next((f.get("bytes_per_checkpoint") for f in figures if f.get("bytes_per_checkpoint")), None),
            instance_type=first.get("instance_type", "?"), instance_count=int(first.get("instance_count") or 1),
            cost_usd=sum(r["cost_usd"]["total"] for r in items),
            failures=[f"{r['job_name']}: {r.get('failure_reason') or r['status']}" for r in items
                      if r["status"] != "Completed"],
            # A file system holds a save once it is fsynced; the sync's once the writer saw it listed in S3.
            durable_seconds=(_mean(f.get("durable_seconds_mean") for f in figures) if target in SYNC_TARGETS
                             else _mean(f.get("save_seconds_mean") for f in figures)),
            runs=len(done), read_apart=len(restored)))
    return out


def measured_pick(targets: list[MeasuredTarget]) -> tuple[MeasuredTarget | None, MeasuredTarget | None]:
    """The measured pick of one trial: the soonest durable checkpoint (a save a restore can count on: the sync's once
    it is in S3, which a short stall on the instance's volume does not say), then the shortest stall (what training
    waits), then the shortest restore. A sync target whose durability was not measured ranks after those that were."""
    def key(t: MeasuredTarget):
        return (t.durable_seconds is None, t.durable_seconds if t.durable_seconds is not None else math.inf,
                t.stall_seconds, t.restore_seconds if t.restore_seconds is not None else math.inf)
    ranked = sorted((t for t in targets if t.stall_seconds is not None), key=key)
    return (ranked[0] if ranked else None), (ranked[1] if len(ranked) > 1 else None)


__all__ = ["MeasuredTarget", "measured_targets", "measured_pick", "CheckpointLoad", "Question", "TargetEstimate",
           "estimate_target", "estimate_targets", "candidates", "parse_duration", "DEFAULT_KEEP", "default_keep", "DEFAULT_EVERY_SECONDS",
           "DEFAULT_SAVE_UNDER_SECONDS", "MAX_KEEP", "option_name"]
