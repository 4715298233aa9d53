"""The lab's deploy-time settings, read from CDK context (cdk.json, overridable with ``-c key=value``).

Every setting is validated before a construct is created, and a bad one stops synthesis with a
message that names the setting and the values it accepts.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: `dslab deploy-check` reads the settings without starting jsii (~0.9 s)
    from constructs import Node

# The stack names and the FSx stack's SSM parameters: one definition, in the domain core.
from dslab.core.requests import (CORE_STACK, FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER,  # noqa: F401
                                 FSX_STACK, WORKFLOW_STACK)

from dslab.core.facts.storage import (EFS_GENERAL_PURPOSE, EFS_MAX_IO, FSX_DEPLOYMENT_TYPES, FSX_IDLE_HOURS_DEFAULT,
                                     FSX_IDLE_HOURS_MAX, FSX_PERSISTENT2_TIERS, fsx_problems)
from dslab.core.facts.storage import PERSISTENT_2
from dslab.aws.zones import FIND_ZONE_IDS, ZoneIdError, check_zone_id, express_where, offers_express, region_zone_prefix

REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
FSX_LINKS = ("dra", "import-path")
EFS_PERFORMANCE = (EFS_MAX_IO, EFS_GENERAL_PURPOSE)
EFS_THROUGHPUT = ("bursting", "provisioned", "elastic")
# Each FSx rule's setting (provisioning.fsx_problems names them, with the AWS text each comes from).
FSX_SETTING = {"deployment_type": "fsxDeploymentType", "capacity": "fsxCapacity", "throughput": "fsxThroughputPerTiB",
               "link": "fsxLink", "version": "fsxLink"}
EFS_MOUNT_AUTH = ("anonymous", "iam")
# What deploying the workflow stack does to FSx: "keep" leaves it as it is (up or torn down), "up"
# deploys it too. Never implicit: a torn-down FSx is not silently brought back by an update.
FSX_DEPLOY = ("keep", "up")
EXPRESS = ("auto", "true", "false")
AZ_ID_HELP = ("find the zone IDs of your account with: " + FIND_ZONE_IDS + "; `dslab doctor` says which "
              "of them offer the experiment's instance types")



class LabConfigError(ValueError):
    """A context setting is invalid; synthesis stops before anything is built."""


@dataclass(frozen=True)
class LabConfig:
    region: str
    az_id: str
    account: str | None
    vpc_cidr: str
    fsx_capacity_gib: int
    fsx_link: str
    efs_performance: str
    efs_throughput: str
    efs_provisioned_mibps: int | None
    efs_mount_auth: str
    disposable_bucket: bool
    adopt_bucket: bool = False
    fsx_deploy: str = "keep"           # "up": deploying the workflow deploys FSx too; "keep": FSx untouched
    fsx_idle_hours: float = FSX_IDLE_HOURS_DEFAULT   # the idle guard deletes FSx after this long unused (0 = off)
    express: bool = True               # an S3 Express One Zone directory bucket in the lab's zone (and its endpoint)
    express_note: str | None = None    # why express=auto left it out (the zone has no S3 Express One Zone)
    fsx_deployment_type: str = "SCRATCH_2"   # or PERSISTENT_2 (dslab size names which one feeds a cluster)
    fsx_mbps_per_tib: int | None = None      # Persistent 2's throughput tier (125, 250, 500, 1000 MB/s/TiB)

    @classmethod
    def from_node(cls, node: Node, account: str | None = None) -> "LabConfig":
        return cls.from_mapping(lambda key: node.try_get_context(key), account)

    @classmethod
    def from_mapping(cls, get: Any, account: str | None = None) -> "LabConfig":
        region = _text(get("region"), "region")
        if not REGION_RE.match(region):
            raise LabConfigError(f"context 'region'={region!r} is not an AWS region name (e.g. us-east-1)")
        if get("az") not in (None, ""):
            raise LabConfigError(
                f"context 'az'={get('az')!r} is no longer read: zone names (us-east-1a) map to different physical "
                f"zones in each account. Set the zone by ID instead, e.g. -c azId={region_zone_prefix_or_example(region)}-az4 "
                f"(and remove 'az' from cdk.json); " + AZ_ID_HELP.format(region=region))
        az_id = validate_az_id(_text(get("azId"), "azId"), region)
        cidr = _text(get("vpcCidr") or "10.42.0.0/16", "vpcCidr")
        try:
            net = ipaddress.ip_network(cidr)
        except ValueError:
            raise LabConfigError(f"context 'vpcCidr'={cidr!r} is not a CIDR block (e.g. 10.42.0.0/16)") from None
        if not 16 <= net.prefixlen <= 24:
            raise LabConfigError(f"context 'vpcCidr'={cidr!r}: the prefix length must be /16 to /24")

        capacity = _int(get("fsxCapacity") if get("fsxCapacity") is not None else 1200, "fsxCapacity")
        fsx_link = _choice(get("fsxLink") or "dra", "fsxLink", FSX_LINKS)
        deployment_type = _choice(str(get("fsxDeploymentType") or "SCRATCH_2").upper(), "fsxDeploymentType",
                                  FSX_DEPLOYMENT_TYPES)
        raw_per_tib = get("fsxThroughputPerTiB")
        per_tib = None if raw_per_tib in (None, "", "null") else _int(raw_per_tib, "fsxThroughputPerTiB")
        # What CreateFileSystem would refuse stops synthesis here, each rule cited in provisioning.fsx_problems.
        for setting, why in fsx_problems(deployment_type, capacity, per_tib, link=fsx_link):
            example = {"fsxCapacity": "-c fsxCapacity=4800",
                       "fsxThroughputPerTiB": (f"-c fsxThroughputPerTiB={FSX_PERSISTENT2_TIERS[-1]}"
                                               if deployment_type == PERSISTENT_2 else "drop fsxThroughputPerTiB"),
                       "fsxLink": "-c fsxLink=dra"}.get(FSX_SETTING[setting], "")
            raise LabConfigError(f"context '{FSX_SETTING[setting]}': {why}" + (f" (e.g. {example})" if example else ""))
        performance = _choice(get("efsPerformance") or EFS_MAX_IO, "efsPerformance", EFS_PERFORMANCE)
        throughput = _choice(get("efsThroughput") or "bursting", "efsThroughput", EFS_THROUGHPUT)
        if throughput == "elastic" and performance == "maxIO":
            # "Max I/O mode is not supported for One Zone file systems or file systems that use Elastic throughput"
            # (EFS User Guide, performance.html#performancemodes).
            raise LabConfigError("context 'efsThroughput'=elastic needs 'efsPerformance'=generalPurpose: Max I/O is not "
                                 "supported with Elastic throughput (-c efsPerformance=generalPurpose -c efsThroughput=elastic; "
                                 "changing the performance mode replaces the file system)")
        raw_mibps = get("efsProvisionedMibps")
        mibps = None
        if throughput == "provisioned":
            if raw_mibps in (None, "", "null"):
                raise LabConfigError(
                    "context 'efsThroughput'=provisioned needs 'efsProvisionedMibps': "
                    "a throughput in MiB/s from 1 to 3414 (e.g. -c efsProvisionedMibps=256)")
            mibps = _int(raw_mibps, "efsProvisionedMibps")
            if not 1 <= mibps <= 3414:
                raise LabConfigError(f"context 'efsProvisionedMibps'={mibps}: allowed values are 1 to 3414 MiB/s")
        elif raw_mibps not in (None, "", "null"):
            raise LabConfigError(
                f"context 'efsProvisionedMibps' is set but 'efsThroughput' is {throughput}: "
                "set -c efsThroughput=provisioned, or drop efsProvisionedMibps")
        auth = _choice(get("efsMountAuth") or "anonymous", "efsMountAuth", EFS_MOUNT_AUTH)
        disposable = _bool(get("disposableBucket"), "disposableBucket")
        adopt = _bool(get("adoptBucket"), "adoptBucket")
        if adopt and disposable:
            raise LabConfigError("context 'adoptBucket'=true and 'disposableBucket'=true exclude each other: an adopted "
                                 "bucket is not managed by the stack, so it cannot be deleted with it; drop one of them")
        fsx_deploy = _choice(get("fsx") or "keep", "fsx", FSX_DEPLOY)
        raw_idle = get("fsxIdleHours")
        try:
            idle = float(FSX_IDLE_HOURS_DEFAULT if raw_idle in (None, "") else raw_idle)
        except (TypeError, ValueError):
            idle = -1.0
        if isinstance(raw_idle, bool) or not 0 <= idle <= FSX_IDLE_HOURS_MAX:
            raise LabConfigError(f"context 'fsxIdleHours'={raw_idle!r}: hours of FSx without a running workflow "
                                 "before the idle guard deletes it, 0 (off) to 336 (e.g. -c fsxIdleHours=8)")
        # The directory bucket costs storage while data sits in it; -c express=false leaves it (and its
        # endpoint, grants and outputs) out. "auto" (the default) has it wherever the zone offers S3
        # Express One Zone, which only some zone IDs do (dslab/aws/zones.py), and says so where it does not.
        raw_express = get("express")
        raw_express = "auto" if raw_express in (None, "") else str(raw_express).lower()
        if raw_express in ("1", "0"):
            raw_express = {"1": "true", "0": "false"}[raw_express]
        express_choice = _choice(raw_express, "express", EXPRESS)
        express, express_note = express_choice != "false", None
        if express and not offers_express(az_id, region):
            if express_choice == "true":
                raise LabConfigError(
                    f"context 'express'=true but 'azId'={az_id} has no S3 Express One Zone ({express_where(region)}): "
                    f"set -c azId to one of those, or -c express=auto (leave it out where the zone has none) "
                    "or -c express=false")
            express, express_note = False, (f"S3 Express One Zone is not offered in {az_id}: the lab is deployed without it "
                                            f"({express_where(region)}; -c azId=... to have it)")
        return cls(region=region, az_id=az_id, account=account, vpc_cidr=cidr, fsx_capacity_gib=capacity,
                   fsx_link=fsx_link, efs_performance=performance, efs_throughput=throughput,
                   efs_provisioned_mibps=mibps, efs_mount_auth=auth, disposable_bucket=disposable,
                   adopt_bucket=adopt, fsx_deploy=fsx_deploy, fsx_idle_hours=idle, express=express,
                   express_note=express_note, fsx_deployment_type=deployment_type, fsx_mbps_per_tib=per_tib)


def region_zone_prefix_or_example(region: str) -> str:
    try:
        return region_zone_prefix(region)
    except ZoneIdError:
        return "use1"


def validate_az_id(az_id: str, region: str) -> str:
    """A zone ID of ``region`` by its form (which IDs exist is the account's business: `dslab doctor`)."""
    try:
        region_zone_prefix(region)
    except ZoneIdError as err:
        raise LabConfigError(f"context 'region': {err}") from None
    try:
        return check_zone_id(az_id, region)
    except ZoneIdError as err:
        raise LabConfigError(f"context 'azId'={az_id!r}: {err} (set it with -c azId=...)") from None


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise LabConfigError(f"context '{key}' is required (set it in cdk.json or with -c {key}=...)")
    return value


def _int(value: Any, key: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(str(value))
    except ValueError:
        raise LabConfigError(f"context '{key}'={value!r} must be a whole number") from None


def _choice(value: Any, key: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise LabConfigError(f"context '{key}'={value!r} is not allowed: use one of {', '.join(allowed)}")
    return value


def _bool(value: Any, key: str) -> bool:
    if value in (None, False, "false", "False", "0", 0):
        return False
    if value in (True, "true", "True", "1", 1):
        return True
    raise LabConfigError(f"context '{key}'={value!r} must be true or false")
