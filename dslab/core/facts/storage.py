"""What the shared data sources serve and what their APIs accept, each figure with its source: S3's requests per
prefix, the directory bucket's reads, FSx for Lustre's throughput tiers, capacities and quotas, EFS's throughput
limits. AWS's numbers, with the rules that read them (what CreateFileSystem refuses); no model above them.
"""

from __future__ import annotations

from typing import Any

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
# - Per file system, reads and writes: by Region (EFS_REGION_LIMITS below, the quotas page's table).
# - Per client: Elastic 1,500 MiB/s ("for file systems using Elastic throughput and mounted using version 2.0 or later
#   of the Amazon EFS client (amazon-efs-utils version) or the Amazon EFS CSI Driver ... For all other file systems,
#   the throughput limit is 500 MiBps": which client SageMaker mounts EFS with is not documented; the table's figure
#   is taken, and a real run confirms it); Provisioned and Bursting 500 MiB/s.
# Max I/O is not available with Elastic and has higher per-operation latency.
MIB = 1.048576  # MB per MiB
EFS_READ_METERING = 3.0
EFS_BURST_MIBPS = 100.0
EFS_BASELINE_MIBPS_PER_TIB = 50.0
EFS_PER_CLIENT_MIBPS = 500.0
EFS_ELASTIC_PER_CLIENT_MIBPS = 1500.0


# EFS lifecycle (stacks/components/efs.py): files unread for 7 days move to Infrequent Access, "Files smaller than 128
# KiB are not eligible for lifecycle management and are always stored in the Standard storage class" (EFS User Guide,
# lifecycle-management-efs.html), and come back to Standard on their first read (TransitionToPrimaryStorageClass
# AFTER_1_ACCESS).
EFS_IA_MIN_FILE_BYTES = 128 * 1024
EFS_PROVISIONED_MAX_MIBPS = 3414.0   # the lab's setting's limit (stacks/config.py: 1-3414 MiB/s)
BURSTING, ELASTIC, PROVISIONED = "bursting", "elastic", "provisioned"
# EFS's performance modes as CloudFormation's PerformanceMode names them; the lab's default is Max I/O (its subject),
# and Elastic needs General Purpose: "Max I/O mode is not supported for One Zone file systems or file systems that use
# Elastic throughput" (EFS User Guide, performance.html).
EFS_MAX_IO, EFS_GENERAL_PURPOSE = "maxIO", "generalPurpose"
EFS_PERFORMANCE_MODES = (EFS_MAX_IO, EFS_GENERAL_PURPOSE)


# The FSx idle guard (stacks/components/workflow.py): a schedule every 30 minutes deletes the FSx stack once no
# workflow execution has run for the lab's fsxIdleHours (8 by default; 0 turns it off), so a file system left standing
# bills from the last run's end for those hours and up to one schedule more.
FSX_IDLE_HOURS_DEFAULT = 8.0
FSX_IDLE_HOURS_MAX = 24.0 * 14
FSX_IDLE_GUARD_EVERY_MINUTES = 30


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


def fsx_quota(fsx: Any, applied_gib: float | None = None) -> dict[str, Any] | None:
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


# FSx for Lustre SCRATCH_2 capacities: "1.2 TiB, 2.4 TiB, or increments of 2.4 TiB"
# (https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-storage-capacity.html).
def fsx_capacity_problem(capacity: int, deployment_type: str = "SCRATCH_2") -> str | None:
    """Why a storage capacity (GiB) is not allowed for the deployment type, or None (provisioning.fsx_problems)."""
    from .storage import fsx_problems
    # Only the capacity's problem is read: the throughput setting (which Persistent 2 also needs) is not asked about.
    found = [why for setting, why in fsx_problems(deployment_type, capacity) if setting == "capacity"]
    return found[0] if found else None


# S3 versioning and checkpoints: the lab's data bucket is versioned, and a checkpoint SageMaker's sync deletes (the
# script keeps the last few) becomes a noncurrent version: "Normal Amazon S3 rates apply for every version of an object
# that is stored" (S3 User Guide, versioning-workflows.html). Under checkpoints/ the bucket's lifecycle expires them
# 1 day after they become noncurrent (stacks/components/data_bucket.py); "Amazon S3 rounds the transition or
# expiration date of an object to midnight UTC the next day" (lifecycle-expire-general-considerations.html), so a
# version stays 1 to 2 days: 1.5 on average, priced. Directory buckets have no versioning ("S3 Versioning is not
# supported" for directory buckets, s3-express-differences.html): nothing more there.
DATA_BUCKET_VERSIONED = True
CHECKPOINT_NONCURRENT_DAYS = 1
CHECKPOINT_NONCURRENT_MEAN_DAYS = CHECKPOINT_NONCURRENT_DAYS + 0.5


# The lab's buckets' lifecycle, which stacks/components/data_bucket.py and express_bucket.py build from these figures
# and dslab/core/stack_check.py reads back from every synthesized template (tests/test_stack_assumptions.py):
# - every noncurrent version of the data bucket (an overwritten result, a re-uploaded dataset's old copy) expires a
#   week after it became noncurrent, a checkpoint's after CHECKPOINT_NONCURRENT_DAYS: "if two expiration policies
#   overlap, the shorter expiration policy is honored" (S3 User Guide, lifecycle-conflicts.html);
# - job output expires after half a year; checkpoints a run left (a run stopped before the job that deletes them)
#   after a week, in both buckets: directory buckets "support lifecycle expiration" of objects and of incomplete
#   multipart uploads, not versioning nor transitions (directory-buckets-objects-lifecycle.html);
# - incomplete multipart uploads are aborted after 2 days (data bucket) and 1 day (directory bucket: its parts bill
#   as storage and an upload in progress blocks deleting the bucket).
DATA_NONCURRENT_DAYS = 7
OUTPUT_EXPIRY_DAYS = 180
CHECKPOINT_EXPIRY_DAYS = 7
DATA_MULTIPART_ABORT_DAYS = 2
EXPRESS_CHECKPOINT_EXPIRY_DAYS = CHECKPOINT_EXPIRY_DAYS
EXPRESS_MULTIPART_ABORT_DAYS = 1


# EFS's throughput per Regional file system, for all its clients together, by Region (GiB/s; reads, writes as
# metered). Each is a default quota AWS Support can raise; the lab's Region (cdk.json's `region`) picks the figure.
# - Elastic: "20-60 GiBps" of reads and "1-5 GiBps" of writes per file system (EFS User Guide, performance.html,
#   Performance summary). Reads: 60 in US East (Ohio, N. Virginia), US West (Oregon), Asia Pacific (Singapore,
#   Tokyo), Europe (Frankfurt, Ireland) (limits.html, "Total default Elastic throughput per file system for all
#   connected clients in each AWS Region"), and since 2 May 2025 in four more: "The maximum read throughput for file
#   systems using Elastic throughput in the following Regions has increased from 20 GiBps to 60 GiBps: Asia Pacific
#   (Mumbai), Asia Pacific (Seoul), Asia Pacific (Sydney), and Europe (London)" (EFS User Guide, document history,
#   2 May 2025); 20 (the range's floor, and those four's figure before) in every other Region. Writes: 5 in the
#   first seven, 1 (the range's floor) elsewhere: the document history raised reads only.
# - Provisioned: 10 read / 3.33 write in US East (Ohio, N. Virginia), US West (Oregon), Europe (Ireland), 3 / 1
#   elsewhere (limits.html's table; the performance page's "3-10" and "1-3.33" GiBps).
# - Bursting: the page's earlier table "Total bursting throughput for all connected clients" (the current one lists
#   Elastic and Provisioned only): 5 read / 3 metered in US East (Ohio, N. Virginia), US West (Oregon), Asia Pacific
#   (Sydney), Europe (Ireland), 3 / 1 elsewhere; the performance page's ranges agree ("3-5" and "1-3" GiBps).
EFS_DEFAULT_REGION = "us-east-1"
EFS_LIMITS_SOURCE = ("EFS User Guide, limits.html (Amazon EFS quotas) and performance.html, by Region; Elastic reads "
                     "as raised on 2 May 2025 (document history)")
EFS_ELASTIC_READ_60 = ("us-east-2", "us-east-1", "us-west-2", "ap-southeast-1", "ap-northeast-1", "eu-central-1",
                       "eu-west-1", "ap-south-1", "ap-northeast-2", "ap-southeast-2", "eu-west-2")
EFS_REGION_LIMITS: dict[str, dict[str, tuple[tuple[str, ...], float, float]]] = {
    # mode: {"read" | "write": (the Regions with the higher figure, their GiB/s, every other Region's GiB/s)}
    ELASTIC: {"read": (EFS_ELASTIC_READ_60, 60.0, 20.0),
              "write": (("us-east-2", "us-east-1", "us-west-2", "ap-southeast-1", "ap-northeast-1", "eu-central-1",
                         "eu-west-1"), 5.0, 1.0)},
    PROVISIONED: {"read": (("us-east-2", "us-east-1", "us-west-2", "eu-west-1"), 10.0, 3.0),
                  "write": (("us-east-2", "us-east-1", "us-west-2", "eu-west-1"), 3.33, 1.0)},
    BURSTING: {"read": (("us-east-2", "us-east-1", "us-west-2", "ap-southeast-2", "eu-west-1"), 5.0, 3.0),
               "write": (("us-east-2", "us-east-1", "us-west-2", "ap-southeast-2", "eu-west-1"), 3.0, 1.0)},
}


def efs_limits(mode: str, region: str) -> tuple[float, float]:
    """(read, write) MiB/s one Regional EFS file system serves all its clients in ``region`` (EFS_REGION_LIMITS)."""
    def gib(kind: str) -> float:
        higher, figure, other = EFS_REGION_LIMITS[mode][kind]
        return figure if region in higher else other
    return gib("read") * 1024.0, gib("write") * 1024.0
