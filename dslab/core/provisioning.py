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
from dataclasses import dataclass, replace
from typing import Any, Callable

from .errors import ConfigError
from .prices import HOURS_PER_MONTH, PriceTable

# ---- shared limits, cited ----------------------------------------------------------------------
# S3: "at least ... 5,500 GET/HEAD requests per second per partitioned Amazon S3 prefix. There are no
# limits to the number of prefixes in a bucket" (S3 User Guide, optimizing-performance.html).
S3_GETS_PER_PREFIX = 5500.0
# S3 Express One Zone: "By default, each directory bucket supports up to 200,000 reads and up to 100,000 writes per
# second. If your workload requires higher than the default TPS limits, you can request an increase through AWS
# Support" (S3 User Guide, s3-express-performance.html); "S3 Express One Zone storage class can support workloads with
# up to 2,000,000 GET and up to 200,000 PUT transactions per second (TPS) per directory bucket" (S3 User Guide,
# s3-express-optimizing-performance-design-patterns.html): the most a raised quota gives one bucket.
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
# EFS (efs/latest/ug/performance.html), every figure metered throughput:
# - "Amazon EFS meters read operations up to one-third the rate of write operations, permitting the file system to
#   drive a baseline rate up to 150 KiBps per GiB of read throughput, or 50 KiBps per GiB of write throughput"; the
#   AWS Storage Blog ("Amazon EFS introduces 3X read-throughput increase"): "a file system configured for 1 GB/s of
#   provisioned throughput can now drive up to 3 GB/s for a read-heavy workload". Training reads: a Bursting or
#   Provisioned file system reads at EFS_READ_METERING times its metered rate (Elastic's limits are stated as reads).
# - Bursting: "the base throughput is proportionate to the file system's size in the Standard storage class ... The
#   file system size used to determine the baseline and burst rates is the ValueInStandard metered size"; "When burst
#   credits are available, a file system can drive throughput up to 100 MiBps per TiB in Standard storage ... with a
#   minimum of 100 MiBps" (50 MiB/s per TiB without credits).
# - Per file system, reads: Elastic 20-60 GiB/s, Provisioned 3-10 GiB/s, Bursting 3-5 GiB/s (the lower bounds taken).
# - Per client: Elastic 1,500 MiB/s ("for file systems using Elastic throughput and mounted using version 2.0 or later
#   of the Amazon EFS client (amazon-efs-utils version) or the Amazon EFS CSI Driver ... For all other file systems,
#   the throughput limit is 500 MiBps": which client SageMaker mounts EFS with is not documented; the table's figure
#   is taken, and a real run confirms it); Provisioned and Bursting 500 MiB/s.
# Max I/O is not available with Elastic and has higher per-operation latency.
MIB = 1.048576  # MB per MiB
EFS_READ_METERING = 3.0
EFS_BURST_MIBPS = 100.0
EFS_BASELINE_MIBPS_PER_TIB = 50.0
EFS_ELASTIC_READ_MIBPS = 20 * 1024.0
EFS_PROVISIONED_READ_MIBPS = 3 * 1024.0
EFS_BURSTING_READ_MIBPS = 3 * 1024.0
EFS_PER_CLIENT_MIBPS = 500.0
EFS_ELASTIC_PER_CLIENT_MIBPS = 1500.0
# EFS lifecycle (stacks/components/efs.py): files unread for 7 days move to Infrequent Access, "Files smaller than 128
# KiB are not eligible for lifecycle management and are always stored in the Standard storage class" (EFS User Guide,
# lifecycle-management-efs.html), and come back to Standard on their first read (TransitionToPrimaryStorageClass
# AFTER_1_ACCESS).
EFS_IA_MIN_FILE_BYTES = 128 * 1024
EFS_PROVISIONED_MAX_MIBPS = 3414.0   # the lab's setting's limit (stacks/config.py: 1-3414 MiB/s)
BURSTING, ELASTIC, PROVISIONED = "bursting", "elastic", "provisioned"


# ---- what the FSx API refuses, checked before anything is synthesized or created ---------------------
# The two deployment types the lab builds, and the Lustre version each S3 link uses (stacks/components/fsx.py).
FSX_DEPLOYMENT_TYPES = (SCRATCH_2, PERSISTENT_2)
FSX_LINK_VERSIONS = {"dra": "2.15", "import-path": "2.12"}


def fsx_problems(deployment_type: str, capacity_gib: int, mbps_per_tib: float | None = None, *,
                 link: str | None = "dra", lustre_version: str | None = None) -> list[tuple[str, str]]:
    """What CreateFileSystem (and CreateDataRepositoryAssociation) would refuse in this FSx for Lustre
    configuration, as (setting, why) pairs: "deployment_type", "capacity", "throughput", "link", "version".
    ``link``: "dra", "import-path" or None (not linked to S3). The stack's settings (stacks/config.py), the CLI's
    premise and the stand-in's CloudFormation share it."""
    problems: list[tuple[str, str]] = []
    version = lustre_version or FSX_LINK_VERSIONS.get(link or "dra", "2.15")
    if deployment_type not in FSX_DEPLOYMENT_TYPES:
        return [("deployment_type", f"{deployment_type!r} is not a deployment type the lab builds: "
                                    f"{' or '.join(FSX_DEPLOYMENT_TYPES)}")]
    # CreateFileSystem StorageCapacity: "For SCRATCH_2, PERSISTENT_2, and PERSISTENT_1 deployment types using SSD
    # storage type, the valid values are 1200 GiB, 2400 GiB, and increments of 2400 GiB."
    if not (capacity_gib in FSX_CAPACITY_STEPS_GIB or (capacity_gib > 0 and capacity_gib % FSX_CAPACITY_INCREMENT_GIB == 0)):
        problems.append(("capacity", f"{capacity_gib} GiB is not a valid {deployment_type} capacity: 1200, 2400 or a "
                                     "multiple of 2400 GiB"))
    if deployment_type == PERSISTENT_2:
        # CreateFileSystemLustreConfiguration PerUnitStorageThroughput: "Required with PERSISTENT_1 and PERSISTENT_2
        # deployment types ... For PERSISTENT_2 SSD storage: 125, 250, 500, 1000 MB/s/TiB."
        if mbps_per_tib is None or float(mbps_per_tib) not in FSX_PERSISTENT2_TIERS:
            problems.append(("throughput", f"PERSISTENT_2 needs a throughput per TiB of "
                                           f"{', '.join(map(str, FSX_PERSISTENT2_TIERS))} MB/s/TiB"
                                           + ("" if mbps_per_tib is None else f", not {mbps_per_tib:g}")))
        # "This section [the legacy ImportPath link] applies to file systems with Scratch 1 deployment type, and also to
        # file systems with Scratch 2 or Persistent 1 deployment types that do not use data repository associations"
        # (FSx for Lustre User Guide, older-deployment-types.html): Persistent 2 links to S3 only through a DRA.
        if link == "import-path":
            problems.append(("link", "PERSISTENT_2 links to S3 only through a data repository association: the legacy "
                                     "import path is for Scratch 1, Scratch 2 and Persistent 1"))
        # CreateFileSystemLustreConfiguration DeploymentType: "If you choose PERSISTENT_2, and you set
        # FileSystemTypeVersion to 2.10, the CreateFileSystem operation fails."
        if version == "2.10":
            problems.append(("version", "PERSISTENT_2 does not run Lustre 2.10: use 2.12 or 2.15"))
    elif mbps_per_tib not in (None, FSX_SCRATCH2_MBPS_PER_TIB):
        # LustreFileSystemConfiguration PerUnitStorageThroughput: "This option is only valid for PERSISTENT_1 and
        # PERSISTENT_2 deployment types."
        problems.append(("throughput", f"{deployment_type} has no throughput setting (it gives 200 MB/s per TiB): "
                                       "drop it, or choose PERSISTENT_2"))
    # CreateDataRepositoryAssociation: "Data repository associations are supported on all FSx for Lustre 2.12 and
    # 2.15 file systems, excluding scratch_1 deployment type."
    if link == "dra" and version not in ("2.12", "2.15"):
        problems.append(("version", f"a data repository association needs Lustre 2.12 or 2.15, not {version}"))
    return problems


# The account's FSx for Lustre storage quota, per deployment type: "Following are the quotas for Amazon FSx for Lustre per
# AWS account, per AWS Region, which you can increase ... Lustre Scratch storage capacity 100800 ... Lustre Persistent 2
# file storage capacity 100800" (GiB; FSx for Lustre User Guide, limits.html). Service Quotas names and codes them
# (service code fsx) "Lustre Scratch storage capacity" L-AD2FC696 (Scratch 1 and 2 together) and "Lustre
# Persistent_2 storage capacity" L-8F1B9C74: the user guide prints no codes; these are the codes public Service Quotas
# listings give, and `dslab doctor` looks each quota up by its name in the account and says which code it found.
FSX_QUOTA_DEFAULT_GIB = 100_800
FSX_QUOTAS = {SCRATCH_2: ("L-AD2FC696", "Lustre Scratch storage capacity"),
              PERSISTENT_2: ("L-8F1B9C74", "Lustre Persistent_2 storage capacity")}


def fsx_quota(fsx: "FsxConfig", applied_gib: float | None = None) -> dict[str, Any] | None:
    """The storage quota a file system of this size needs raised (None while the default, or ``applied_gib``, holds
    it), with the request that raises it. The quota counts every file system of the type in the account and Region."""
    code, name = FSX_QUOTAS[fsx.deployment_type]
    limit = float(applied_gib if applied_gib is not None else FSX_QUOTA_DEFAULT_GIB)
    if fsx.capacity_gib <= limit:
        return None
    command = (f"aws service-quotas request-service-quota-increase --service-code fsx --quota-code {code} "
               f"--desired-value {fsx.capacity_gib}")
    return {"quota": name, "code": code, "default_gib": FSX_QUOTA_DEFAULT_GIB, "limit_gib": limit,
            "needed_gib": fsx.capacity_gib, "command": command,
            "summary": f"{fsx.capacity_gib:,} GiB is above the account's default quota \"{name}\" ({limit:,.0f} GiB, "
                       f"{code}): ask for it first (every {fsx.deployment_type} file system of the account counts)",
            "source": "FSx for Lustre User Guide, limits.html (defaults); Service Quotas codes as public listings give them"}


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

    def read_mibps(self, standard_gib: float) -> float:
        """The file system's read throughput (MiB/s), shared by every client: reads metered at a third of the rate
        (EFS_READ_METERING); Bursting's rate grows with what the Standard storage class holds (``standard_gib``), not
        what sits in Infrequent Access; each mode up to its per-file-system read limit."""
        if self.mode == ELASTIC:
            return EFS_ELASTIC_READ_MIBPS
        if self.mode == PROVISIONED:
            return min(float(self.provisioned_mibps or 1.0) * EFS_READ_METERING, EFS_PROVISIONED_READ_MIBPS)
        return min(max(EFS_BURST_MIBPS, EFS_BURST_MIBPS * standard_gib / 1024) * EFS_READ_METERING,
                   EFS_BURSTING_READ_MIBPS)

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

    def label(self) -> str:
        if self.mode == PROVISIONED:
            return f"EFS Provisioned {self.provisioned_mibps or 0:,.0f} MiB/s"
        return "EFS Elastic (General Purpose)" if self.mode == ELASTIC else "EFS Bursting (Max I/O)"

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
        return {"mode": self.mode, "provisioned_mibps": self.provisioned_mibps}


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
                **({"keep_settings": dict(self.keep_settings)} if self.keep_settings else {})}

    def describe(self) -> str:
        """One line naming the lab an answer prices."""
        return f"{self.name}: FSx {self.fsx.label()}; {self.efs.label()}"

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, default: "Provisioning") -> "Provisioning":
        """The premise ``to_dict`` wrote (a run's plan and results record the lab they ran on), else ``default``."""
        if not isinstance(data, dict) or not isinstance(data.get("fsx_config"), dict):
            return default
        fsx, efs = data["fsx_config"], data.get("efs_config") or {}
        return cls(fsx=FsxConfig(str(fsx.get("deployment_type") or SCRATCH_2), int(fsx.get("capacity_gib") or 1200),
                                 float(fsx.get("mbps_per_tib") or FSX_SCRATCH2_MBPS_PER_TIB)),
                   efs=EfsConfig(str(efs.get("mode") or BURSTING), efs.get("provisioned_mibps")),
                   name=str(data.get("name") or default.name))


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
    efs = EfsConfig(mode, mibps if mode == PROVISIONED else None)
    return Provisioning(fsx=fsx, efs=efs, name=name or f"the lab as deployed ({source})", **known)


def as_deployed(fsx_capacity_gib: int = 1200, efs_provisioned_mibps: float | None = None) -> Provisioning:
    """The lab the stacks build (Scratch 2 at the configured capacity, EFS Bursting or Provisioned)."""
    efs = EfsConfig(PROVISIONED, efs_provisioned_mibps) if efs_provisioned_mibps else EfsConfig()
    return Provisioning(fsx=FsxConfig(capacity_gib=fsx_capacity_gib), efs=efs)
