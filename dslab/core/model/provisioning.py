"""What the shared data sources are provisioned as, so that every estimate says which lab it prices.

FSx's deployment type, throughput per TiB and capacity; EFS's throughput mode; how many S3 prefixes the
dataset is spread over; the directory bucket's read rate. ``AS_DEPLOYED`` is the lab the stacks build
(Scratch 2 at 1,200 GiB, EFS Bursting in Max I/O, each dataset under one prefix); `dslab size` provisions
another to feed a cluster. ``estimate.estimate_mode`` takes one of these, so the single job, the cluster
and the pick are one model with the premise named. Every limit cites its source; what has none is an
assumption and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..errors import ConfigError
from ..facts.prices import HOURS_PER_MONTH, PriceTable
from ..facts.storage import (BURSTING, EFS_BURST_MIBPS, EFS_DEFAULT_REGION, EFS_ELASTIC_PER_CLIENT_MIBPS,
                             EFS_GENERAL_PURPOSE, EFS_MAX_IO, EFS_PER_CLIENT_MIBPS, EFS_PERFORMANCE_MODES,
                             EFS_PROVISIONED_MAX_MIBPS, EFS_READ_METERING, ELASTIC, EXPRESS_READS_PER_BUCKET,
                             FSX_IDLE_GUARD_EVERY_MINUTES, FSX_IDLE_HOURS_DEFAULT, FSX_IDLE_HOURS_MAX,
                             FSX_SCRATCH2_MBPS_PER_TIB, PERSISTENT_2, PROVISIONED, S3_GETS_PER_PREFIX, SCRATCH_2,
                             efs_limits, fsx_problems)

@dataclass(frozen=True)
class FsxConfig:
    deployment_type: str = SCRATCH_2
    capacity_gib: int = 1200
    mbps_per_tib: float = FSX_SCRATCH2_MBPS_PER_TIB

    @classmethod
    def persistent2(cls, mbps_per_tib: int, capacity_gib: int) -> "FsxConfig":
        return cls(PERSISTENT_2, capacity_gib, float(mbps_per_tib))

    def holds(self, nbytes: float) -> bool:
        """Whether a dataset of ``nbytes`` fits: FSx linked to S3 loads every file it reads, so an epoch needs all of
        it (with the headroom every volume gets, premise.VOLUME_HEADROOM)."""
        return nbytes / 2**30 * 1.05 <= self.capacity_gib

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

    def short(self) -> str:
        """A few words for a table: "Scratch 2 1,200 GiB", "P2-1000 7,200 GiB"."""
        kind = "Scratch 2" if self.deployment_type == SCRATCH_2 else f"P2-{self.mbps_per_tib:g}"
        return f"{kind} {self.capacity_gib:,} GiB"

    def settings(self) -> dict[str, Any]:
        """The stack's context settings that build this file system (stacks/config.py)."""
        out: dict[str, Any] = {"fsxDeploymentType": self.deployment_type}
        if self.deployment_type == PERSISTENT_2:
            out["fsxThroughputPerTiB"] = int(self.mbps_per_tib)
        out["fsxCapacity"] = self.capacity_gib
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"deployment_type": self.deployment_type, "capacity_gib": self.capacity_gib,
                "mbps_per_tib": self.mbps_per_tib, "throughput_mbps": round(self.throughput_mbps, 1)}


@dataclass(frozen=True)
class EfsConfig:
    mode: str = BURSTING
    provisioned_mibps: float | None = None
    region: str = EFS_DEFAULT_REGION   # the lab's Region: EFS's per-file-system limits are the Region's (efs_limits)
    # The performance mode (efsPerformance); None: the stack's own for the mode (Max I/O, General Purpose for Elastic).
    # The model's per-file latency is one assumed figure for both modes (estimate.Model.efs_read_latency, from
    # General Purpose's ~1 ms up): the mode is named in every answer, so what was priced is said. Not compared: a
    # throughput `dslab size` provisions is the lab's whatever its performance mode (a deploy keeps that mode).
    performance: str | None = field(default=None, compare=False)

    @property
    def performance_mode(self) -> str:
        return self.performance or (EFS_GENERAL_PURPOSE if self.mode == ELASTIC else EFS_MAX_IO)

    @property
    def limits(self) -> tuple[float, float]:
        """(read, write) MiB/s the file system serves all its clients, in its Region (facts/storage.py)."""
        return efs_limits(self.mode, self.region)

    def read_mibps(self, standard_gib: float) -> float:
        """The file system's read throughput (MiB/s), shared by every client: reads metered at a third of the rate
        (EFS_READ_METERING); Bursting's rate grows with what the Standard storage class holds (``standard_gib``), not
        what sits in Infrequent Access; each mode up to its per-file-system read limit in the lab's Region."""
        limit = self.limits[0]
        if self.mode == ELASTIC:
            return limit
        if self.mode == PROVISIONED:
            return min(float(self.provisioned_mibps or 1.0) * EFS_READ_METERING, limit)
        return min(max(EFS_BURST_MIBPS, EFS_BURST_MIBPS * standard_gib / 1024) * EFS_READ_METERING, limit)

    @property
    def per_client_mibps(self) -> float:
        return EFS_ELASTIC_PER_CLIENT_MIBPS if self.mode == ELASTIC else EFS_PER_CLIENT_MIBPS

    def throughput_usd(self, prices: PriceTable, *, hours: float, gb_read: float) -> float:
        """Throughput charges beside storage: Provisioned per MiB/s-month, Elastic per GB read."""
        if self.mode == PROVISIONED:
            return float(self.provisioned_mibps or 0.0) * prices["efs_provisioned_mibps_month"] * hours / HOURS_PER_MONTH
        if self.mode == ELASTIC:
            return gb_read * prices["efs_elastic_read_per_gb"]
        return 0.0

    def short(self) -> str:
        """A few words for a table: "EFS Bursting", "EFS Elastic", "EFS 512 MiB/s"."""
        if self.mode == PROVISIONED:
            return f"EFS Prov. {self.provisioned_mibps or 0:,.0f} MiB/s"
        return "EFS Elastic" if self.mode == ELASTIC else "EFS Bursting"

    def label(self) -> str:
        mode = "Max I/O" if self.performance_mode == EFS_MAX_IO else "General Purpose"
        if self.mode == PROVISIONED:
            said = "" if mode == "Max I/O" else f" ({mode})"
            return f"EFS Provisioned {self.provisioned_mibps or 0:,.0f} MiB/s{said}"
        return f"EFS {'Elastic' if self.mode == ELASTIC else 'Bursting'} ({mode})"

    def settings(self) -> dict[str, Any]:
        """The stack's context settings that build this throughput mode. Elastic needs General Purpose: "Max I/O
        mode is not supported for One Zone file systems or file systems that use Elastic throughput" (EFS User
        Guide, performance.html); the lab's default Max I/O stays with Bursting and Provisioned."""
        if self.mode == ELASTIC:
            return {"efsPerformance": "generalPurpose", "efsThroughput": ELASTIC}
        if self.mode == PROVISIONED:
            return {"efsThroughput": PROVISIONED, "efsProvisionedMibps": int(math.ceil(self.provisioned_mibps or 1))}
        return {"efsThroughput": BURSTING}

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "provisioned_mibps": self.provisioned_mibps, "region": self.region,
                "performance": self.performance_mode}


@dataclass(frozen=True)
class Provisioning:
    """The premise of an estimate: how the shared sources stand."""
    fsx: FsxConfig = FsxConfig()
    efs: EfsConfig = EfsConfig()
    s3_prefixes: int | None = 1          # the dataset's prefixes; None: as many as the load needs
    express_reads_per_second: float = EXPRESS_READS_PER_BUCKET
    name: str = "the lab as deployed"
    # Where FSx's and EFS's settings came from: a stack outputs file ("cdk-outputs.json"), "CloudFormation", or
    # "cdk.json" (not known deployed: what a deploy would build); None: not said (the stacks' defaults).
    fsx_source: str | None = None
    efs_source: str | None = None
    # The context settings a deploy must repeat to keep the lab as it stands where it was deployed with other
    # settings than cdk.json's (a deploy's CONTEXT holds for that deploy only): ((key, value), ...).
    keep_settings: tuple[tuple[str, Any], ...] = ()
    # The idle guard's hours (fsxIdleHours; 0: off): how long FSx left standing after a run bills before the guard
    # deletes it (up to one guard schedule more). None: not known where the lab was read (a run's Plan).
    fsx_idle_hours: float | None = FSX_IDLE_HOURS_DEFAULT

    def fsx_left_standing(self, prices: PriceTable, fsx: "FsxConfig | None" = None) -> str:
        """What FSx (``fsx``, default the lab's) bills after the last run where nobody takes it down: this lab's idle
        guard's hours, or until taken down where the guard is off."""
        hourly = (fsx or self.fsx).hourly(prices)
        if self.fsx_idle_hours is None:
            return f"left standing, FSx bills ${hourly:,.2f} an hour until the lab's idle guard deletes it"
        if self.fsx_idle_hours <= 0:
            return f"the lab's idle guard is off (fsxIdleHours=0): left standing, FSx bills ${hourly:,.2f} an hour"
        hours = self.fsx_idle_hours
        most = hours + FSX_IDLE_GUARD_EVERY_MINUTES / 60
        return (f"left standing, the lab's idle guard deletes it {hours:g} to {most:g} h after the last run "
                f"(fsxIdleHours={hours:g}, checked every {FSX_IDLE_GUARD_EVERY_MINUTES} min): "
                f"${hourly * hours:,.2f} to ${hourly * most:,.2f} more")

    def s3_gets_per_second(self) -> float:
        return float("inf") if self.s3_prefixes is None else self.s3_prefixes * S3_GETS_PER_PREFIX

    def with_fsx_capacity(self, capacity_gib: int) -> "Provisioning":
        return replace(self, fsx=replace(self.fsx, capacity_gib=capacity_gib))

    def premise_of(self, part: str) -> str:
        """How the lab's FSx or EFS (``part``: "fsx" or "efs") is known: "as deployed" (its stack outputs), or "as
        cdk.json would deploy it" where nothing deployed says otherwise."""
        source = self.fsx_source if part == "fsx" else self.efs_source
        return "as cdk.json would deploy it" if source == CDK_JSON else "as deployed"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fsx": self.fsx.label(), "efs": self.efs.label(),
                "s3_prefixes": self.s3_prefixes, "express_reads_per_second": self.express_reads_per_second,
                "fsx_config": self.fsx.to_dict(), "efs_config": self.efs.to_dict(),
                **({"fsx_source": self.fsx_source, "efs_source": self.efs_source} if self.fsx_source or self.efs_source
                   else {}),
                **({"keep_settings": dict(self.keep_settings)} if self.keep_settings else {}),
                **({"fsx_idle_hours": self.fsx_idle_hours} if self.fsx_idle_hours is not None else {})}

    def describe(self) -> str:
        """One line naming the lab an answer prices (its Region sets EFS's per-file-system limits)."""
        return f"{self.name}: FSx {self.fsx.label()}; {self.efs.label()}, in {self.efs.region}"

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, default: "Provisioning") -> "Provisioning":
        """The premise ``to_dict`` wrote (a run's plan and results record the lab they ran on), else ``default``."""
        if not isinstance(data, dict) or not isinstance(data.get("fsx_config"), dict):
            return default
        fsx, efs = data["fsx_config"], data.get("efs_config") or {}
        return cls(fsx=FsxConfig(str(fsx.get("deployment_type") or SCRATCH_2), int(fsx.get("capacity_gib") or 1200),
                                 float(fsx.get("mbps_per_tib") or FSX_SCRATCH2_MBPS_PER_TIB)),
                   efs=EfsConfig(str(efs.get("mode") or BURSTING), efs.get("provisioned_mibps"),
                                 str(efs.get("region") or EFS_DEFAULT_REGION), efs.get("performance")),
                   name=str(data.get("name") or default.name),
                   fsx_idle_hours=data.get("fsx_idle_hours"))


AS_DEPLOYED = Provisioning()
CDK_JSON = "cdk.json"   # a part's source when no deployed lab says how it stands


def deploy_command(settings: dict[str, Any], fsx: str = "keep") -> str:
    """The Makefile deploy that builds these context settings on top of cdk.json's (README, "Running on AWS")."""
    context = " ".join(f"{key}={value}" for key, value in settings.items())
    return f'make deploy FSX={fsx}' + (f' CONTEXT="{context}"' if context else "")


def lab_from_settings(get: Callable[[str], Any], source: str, name: str | None = None, **known: Any) -> Provisioning:
    """The lab as its deploy settings build it: ``get`` reads a context key (cdk.json's, or the stack outputs
    translated to context keys). A value the stack would refuse is refused here too, naming the key and ``source``.
    ``name`` names the lab (default "the lab as deployed (source)"); ``known``: Provisioning's fsx_source, efs_source
    and keep_settings."""
    def number(key: str, default: Any) -> float | None:
        raw = get(key)
        if raw in (None, "", "null", "None"):
            return default
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ConfigError(key, f"{raw!r} is not a number ({source})") from None
    deployment_type = str(get("fsxDeploymentType") or SCRATCH_2).upper()
    capacity = int(number("fsxCapacity", 1200))
    per_tib = number("fsxThroughputPerTiB", None)
    problems = fsx_problems(deployment_type, capacity, per_tib, link=str(get("fsxLink") or "dra"))
    if problems:
        key = {"deployment_type": "fsxDeploymentType", "capacity": "fsxCapacity", "throughput": "fsxThroughputPerTiB",
               "link": "fsxLink", "version": "fsxLink"}[problems[0][0]]
        raise ConfigError(key, f"{problems[0][1]} ({source})")
    fsx = (FsxConfig.persistent2(int(per_tib), capacity) if deployment_type == PERSISTENT_2
           else FsxConfig(capacity_gib=capacity))
    mode = str(get("efsThroughput") or BURSTING).lower()
    if mode not in (BURSTING, ELASTIC, PROVISIONED):
        raise ConfigError("efsThroughput", f"{mode!r} ({source})", [BURSTING, PROVISIONED, ELASTIC])
    mibps = number("efsProvisionedMibps", None)
    if mode == PROVISIONED and not mibps:
        raise ConfigError("efsProvisionedMibps", f"efsThroughput=provisioned needs a MiB/s value ({source})")
    if mode == PROVISIONED and not 1 <= float(mibps or 0) <= EFS_PROVISIONED_MAX_MIBPS:
        raise ConfigError("efsProvisionedMibps", f"{mibps:g} MiB/s: the lab provisions 1 to "
                          f"{EFS_PROVISIONED_MAX_MIBPS:,.0f} ({source})")
    raw_performance = get("efsPerformance")
    performance = None if raw_performance in (None, "", "null", "None") else str(raw_performance)
    if performance is not None and performance not in EFS_PERFORMANCE_MODES:
        raise ConfigError("efsPerformance", f"{performance!r} is no EFS performance mode the model prices ({source})",
                          list(EFS_PERFORMANCE_MODES))
    if performance == EFS_MAX_IO and mode == ELASTIC:
        raise ConfigError("efsPerformance", f"maxIO with efsThroughput=elastic: EFS has no such file system ({source})",
                          [EFS_GENERAL_PURPOSE])
    region = str(get("region") or EFS_DEFAULT_REGION)
    efs = EfsConfig(mode, mibps if mode == PROVISIONED else None, region, performance)
    idle = number("fsxIdleHours", FSX_IDLE_HOURS_DEFAULT)
    if not 0 <= float(idle or 0) <= FSX_IDLE_HOURS_MAX:
        raise ConfigError("fsxIdleHours", f"{idle:g} hours: the idle guard takes 0 (off) to {FSX_IDLE_HOURS_MAX:g} "
                          f"({source})")
    return Provisioning(fsx=fsx, efs=efs, name=name or f"the lab as deployed ({source})",
                        fsx_idle_hours=float(idle or 0), **known)


def as_deployed(fsx_capacity_gib: int = 1200, efs_provisioned_mibps: float | None = None) -> Provisioning:
    """The lab the stacks build (Scratch 2 at the configured capacity, EFS Bursting or Provisioned)."""
    efs = EfsConfig(PROVISIONED, efs_provisioned_mibps) if efs_provisioned_mibps else EfsConfig()
    return Provisioning(fsx=FsxConfig(capacity_gib=fsx_capacity_gib), efs=efs)
