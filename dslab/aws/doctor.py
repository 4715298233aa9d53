"""`dslab doctor`: with the user's credentials, does the configured zone (azId) suit the experiment?

What can be checked, and how honestly:

- **Training instance types**: EC2 ``DescribeInstanceTypeOfferings`` with ``LocationType=availability-zone-id``
  lists the zone IDs that offer an EC2 instance type
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypeOfferings.html).
  SageMaker runs ``ml.<type>`` on the EC2 ``<type>`` hardware, but it publishes no per-zone offering of
  its own (its API reference only points to "Supported Instance Types and Availability Zones"), so the
  EC2 offering is a **proxy**: a zone without the EC2 type will not run the job; a zone with it very
  likely will, capacity and the account's SageMaker quotas permitting.
- **S3 Express One Zone**: only some zone IDs have directory buckets, listed in the S3 User Guide's table
  (no API answers it): ``dslab/aws/zones.py`` holds that table. The lab deploys without Express in a zone
  that has none (``express=auto``); when the experiment has Express trials, such a zone does not suit.
- **FSx for Lustre**: AWS publishes no per-zone offering list or API for FSx for Lustre. Checked: the
  zone is a standard Availability Zone of the region in state ``available`` (``DescribeAvailabilityZones``)
  and FSx answers in the region (``DescribeFileSystems``). Only creating the file system (`make fsx-up`)
  proves the zone.

Bad input (a zone ID of the wrong form or not in the region, a type SageMaker does not train on) is a
``ConfigError`` naming the field; the boto3 clients are passed in so tests use the stand-in.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from ..core.facts.aws_errors import explain
from ..core.errors import ConfigError
from ..core.requests import LOGS_POLICY_NAME
# CloudWatch Logs: "Resource policies: 10 per Region per account" (CloudWatch Logs quotas); the lab adds one.
LOGS_RESOURCE_POLICIES_MAX = 10

from .zones import EXPRESS_ZONES_SOURCE, ZoneIdError, check_zone_id, express_where, express_zone_ids

TRAINING_PROXY_NOTE = ("training: SageMaker runs ml.<type> on EC2 <type> hardware but publishes no per-zone offering; "
                       "the EC2 offering per zone ID is a proxy (without it the job cannot run there; with it, it very likely can)")
FSX_PROXY_NOTE = ("FSx for Lustre: AWS publishes no per-zone offering; checked that the zone is a standard, available "
                  "zone and that FSx answers in the region; only `make fsx-up` proves the zone")


@functools.lru_cache(maxsize=1)
def sagemaker_training_types() -> tuple[str, ...]:
    """The instance types CreateTrainingJob accepts, from botocore's SageMaker service model (offline)."""
    import botocore.session
    model = botocore.session.get_session().get_service_model("sagemaker")
    return tuple(model.shape_for("TrainingInstanceType").enum)


@dataclass
class ZoneReport:
    region: str
    az_id: str
    zone_name: str | None
    zone_ok: bool
    offered: dict[str, list[str]]           # instance type -> zone IDs that offer it (EC2 proxy)
    fsx_ok: bool
    fsx_detail: str
    standard_zones: list[str]
    express_zones: list[str] = field(default_factory=list)   # zone IDs with S3 Express One Zone (documented)
    logs_policies: list[str] | None = None                     # CloudWatch Logs resource policies of the region
    fsx_quota: dict[str, Any] | None = None                    # the lab's FSx against the account's storage quota
    needs_express: bool = False                                # the experiment has storage: express trials
    logs_detail: str = ""                                      # why the resource policies were not checked
    quota_detail: str = ""                                     # why the FSx storage quota was not checked
    notes: list[str] = field(default_factory=lambda: [TRAINING_PROXY_NOTE, FSX_PROXY_NOTE,
                                                      f"S3 Express One Zone: the S3 User Guide's table, {EXPRESS_ZONES_SOURCE}"])

    @property
    def logs_policy_ok(self) -> bool:
        """Room for the lab's DataSync log policy: at most 10 resource policies per account and region."""
        return (self.logs_policies is None or LOGS_POLICY_NAME in self.logs_policies
                or len(self.logs_policies) < LOGS_RESOURCE_POLICIES_MAX)

    @property
    def fsx_quota_ok(self) -> bool:
        return self.fsx_quota is None or self.fsx_quota["ok"]

    @property
    def express_ok(self) -> bool:
        return self.az_id in self.express_zones

    @property
    def missing(self) -> list[str]:
        return [t for t, zones in self.offered.items() if self.az_id not in zones]

    @property
    def suitable_zones(self) -> list[str]:
        return [z for z in self.standard_zones if all(z in zones for zones in self.offered.values())
                and (not self.needs_express or z in self.express_zones)]

    @property
    def ok(self) -> bool:
        return (self.zone_ok and self.fsx_ok and not self.missing and (self.express_ok or not self.needs_express)
                and self.logs_policy_ok and self.fsx_quota_ok)

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "az_id": self.az_id, "zone_name": self.zone_name, "ok": self.ok,
                "zone_available": self.zone_ok, "training_offered_in": self.offered, "missing_in_zone": self.missing,
                "fsx_ok": self.fsx_ok, "fsx_detail": self.fsx_detail, "express_ok": self.express_ok,
                "express_zones": self.express_zones, "needs_express": self.needs_express, "suitable_zones": self.suitable_zones,
                "logs_resource_policies": self.logs_policies, "logs_policy_ok": self.logs_policy_ok,
                "fsx_quota": self.fsx_quota,
                "notes": self.notes}

    def lines(self) -> list[str]:
        name = f" ({self.zone_name} in this account)" if self.zone_name else ""
        out = [f"zone {self.az_id}{name}, region {self.region}: "
               + ("available" if self.zone_ok else "NOT an available standard Availability Zone")]
        for instance_type, zones in self.offered.items():
            here = "offered" if self.az_id in zones else "NOT offered"
            out.append(f"  {instance_type}: {here} in {self.az_id} (EC2 offering; offered in: {', '.join(zones) or 'no zone of the region'})")
        out.append(f"  FSx for Lustre: {self.fsx_detail}")
        if self.fsx_quota is not None:
            out.append(f"  FSx storage quota: {fsx_quota_line(self.fsx_quota)}")
        if self.express_ok:
            out.append(f"  S3 Express One Zone: offered in {self.az_id}")
        else:
            consequence = ("the experiment's Express trials cannot run here" if self.needs_express
                           else "the lab deploys without it here (express=auto)")
            out.append(f"  S3 Express One Zone: NOT offered in {self.az_id}: {consequence} "
                       f"({express_where(self.region)})")
        if self.quota_detail:
            out.append(f"  FSx storage quota: not checked: {self.quota_detail}")
        if self.logs_detail:
            out.append(f"  CloudWatch Logs: the region's resource policies were not checked: {self.logs_detail}")
        if not self.logs_policy_ok:
            out.append(f"  CloudWatch Logs: the region already holds {len(self.logs_policies)} resource policies, the most "
                       f"it takes: the lab's DataSync log policy ({LOGS_POLICY_NAME}) cannot be added and the deploy "
                       "would fail (LimitExceededException); remove one (aws logs describe-resource-policies)")
        suitable = self.suitable_zones
        wanted = "every instance type" + (" and S3 Express One Zone" if self.needs_express else "")
        out.append(f"zone IDs offering {wanted}: " + (", ".join(suitable) if suitable else "none in this region"))
        if not self.ok and suitable:
            out.append(f"to move the lab: -c azId={suitable[0]} (in cdk.json or on the deploy command); "
                       "a deployed lab moves by `make destroy` then `make deploy-again`")
        out += [f"note: {n}" for n in self.notes]
        return out


def fsx_quota_check(service_quotas, fsx) -> dict[str, Any]:
    """The account's applied FSx for Lustre storage quota of the lab's deployment type (looked up by its Service Quotas
    name; provisioning.FSX_QUOTAS) against the lab's file system ``fsx`` (a provisioning.FsxConfig)."""
    from ..core.facts.storage import FSX_QUOTA_DEFAULT_GIB, FSX_QUOTAS, fsx_quota
    from ..workflow.plan import read_quotas
    code, name = FSX_QUOTAS[fsx.deployment_type]
    found = read_quotas(service_quotas, "fsx").get(name)
    applied = found.value if found is not None else None
    needed = fsx_quota(fsx, applied)
    return {"quota": name, "code": found.code if found is not None else code, "listed": found is not None,
            "applied_gib": applied if applied is not None else FSX_QUOTA_DEFAULT_GIB, "lab_fsx_gib": fsx.capacity_gib,
            "deployment_type": fsx.deployment_type, "ok": needed is None, "request": needed["command"] if needed else None}


def fsx_quota_line(quota: dict[str, Any]) -> str:
    applied = (f"{quota['applied_gib']:,.0f} GiB applied" if quota["listed"] else
               f"not listed by Service Quotas: its default {quota['applied_gib']:,.0f} GiB taken")
    verdict = (f"the lab's {quota['lab_fsx_gib']:,} GiB {quota['deployment_type']} fits" if quota["ok"] else
               f"the lab's {quota['lab_fsx_gib']:,} GiB {quota['deployment_type']} does NOT fit: {quota['request']}")
    return f"\"{quota['quota']}\" ({quota['code']}): {applied}; {verdict} (every file system of the type counts)"


def validate_instance_types(instance_types: list[str]) -> list[str]:
    if not instance_types:
        raise ConfigError("instance_type", "no instance type to check", "e.g. --instance-type ml.p3.2xlarge")
    known = set(sagemaker_training_types())
    for instance_type in instance_types:
        if instance_type not in known:
            examples = ", ".join(t for t in ("ml.p3.2xlarge", "ml.g5.xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge") if t in known)
            raise ConfigError("instance_type", f"{instance_type!r} is not a SageMaker training instance type",
                              f"one CreateTrainingJob accepts, e.g. {examples}")
    return list(dict.fromkeys(instance_types))


def _offering_zones(ec2, ec2_type: str) -> list[str]:
    zones: set[str] = set()
    paginator = ec2.get_paginator("describe_instance_type_offerings")
    for page in paginator.paginate(LocationType="availability-zone-id",
                                   Filters=[{"Name": "instance-type", "Values": [ec2_type]}]):
        zones.update(o["Location"] for o in page.get("InstanceTypeOfferings", []))
    return sorted(zones)


def check_zone(ec2, fsx, *, region: str, az_id: str, instance_types: list[str], needs_express: bool = False,
               logs=None, service_quotas=None, lab_fsx=None) -> ZoneReport:
    """Check ``az_id`` of ``region`` for ``instance_types`` (SageMaker names, ml.*), FSx for Lustre and
    (needed when ``needs_express``) S3 Express One Zone; with ``service_quotas`` and ``lab_fsx`` (the lab's FSx as
    deployed or as cdk.json builds it), the account's FSx storage quota."""
    try:
        check_zone_id(az_id, region)
    except ZoneIdError as err:
        raise ConfigError("azId", str(err)) from None
    instance_types = validate_instance_types(instance_types)

    zones = ec2.describe_availability_zones(AllAvailabilityZones=True)["AvailabilityZones"]
    by_id = {z["ZoneId"]: z for z in zones}
    if az_id not in by_id:
        raise ConfigError("azId", f"{az_id} is not a zone of {region} in this account",
                          sorted(z for z, info in by_id.items() if info.get("ZoneType", "availability-zone") == "availability-zone"))
    standard = sorted(z for z, info in by_id.items()
                      if info.get("ZoneType", "availability-zone") == "availability-zone" and info.get("State") == "available")
    zone = by_id[az_id]
    zone_ok = az_id in standard

    offered = {t: _offering_zones(ec2, t.removeprefix("ml.")) for t in instance_types}

    from botocore.exceptions import BotoCoreError, ClientError
    try:
        fsx.describe_file_systems(MaxResults=1)
        fsx_ok = zone_ok
        fsx_detail = ("FSx answers in the region and the zone is a standard, available zone (no per-zone offering "
                      "is published: a proxy)" if zone_ok else "the zone is not a standard, available zone")
    except (ClientError, BotoCoreError) as err:
        fsx_ok, fsx_detail = False, f"FSx did not answer in {region}: {explain(err, service='fsx')}"
    policies, logs_detail = None, ""
    if logs is not None:
        try:
            policies = [p["policyName"] for p in logs.describe_resource_policies().get("resourcePolicies", [])]
        except (ClientError, BotoCoreError) as err:
            policies, logs_detail = None, explain(err, service="logs")   # not checked, and said why
    quota, quota_detail = None, ""
    if service_quotas is not None and lab_fsx is not None:
        try:
            quota = fsx_quota_check(service_quotas, lab_fsx)
        except (ClientError, BotoCoreError) as err:
            quota, quota_detail = None, explain(err, service="service-quotas")   # not checked, and said why
    return ZoneReport(region=region, az_id=az_id, zone_name=zone.get("ZoneName"), zone_ok=zone_ok, offered=offered,
                      fsx_ok=fsx_ok, fsx_detail=fsx_detail, standard_zones=standard,
                      express_zones=list(express_zone_ids(region)), needs_express=needs_express, logs_policies=policies,
                      logs_detail=logs_detail, fsx_quota=quota, quota_detail=quota_detail)
