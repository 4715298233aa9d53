"""What an answer assumes about the deployed lab, read back from the templates the stacks synthesize.

Every figure the model takes about the lab is a pair: the model's (the facts the stacks are built from, and the lab as
the model reads the deploy's settings: model.provisioning.lab_from_settings) and the property CloudFormation is asked
to create. ``stack_assumptions`` lists each pair for one synthesis; tests/test_stack_assumptions.py holds every pair
equal for every context combination the lab offers, so a stack that drifts from what the model prices (a lifecycle
rule imported and never used, a tier the model reads differently) fails a test instead of mispricing answers.

The pairs:
- the data bucket: versioned, and per prefix the days a current object lives and the days a noncurrent version lives
  (S3 honours the shorter of two rules that match one object: "if two expiration policies overlap, the shorter
  expiration policy is honored", S3 User Guide, lifecycle-conflicts.html), and the days an incomplete multipart
  upload is kept;
- the directory bucket (where the lab has one): its checkpoint expiry and multipart abort, and the bucket policy
  without which S3 Lifecycle does nothing there;
- FSx for Lustre: deployment type, storage capacity, throughput per TiB;
- EFS: throughput mode, provisioned MiB/s, performance mode; the Region whose limits the model takes;
- the FSx idle guard: its hours (none without a rule) and how often it looks.

Reads CloudFormation JSON only (no CDK): the domain core stays free of it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from .errors import ConfigError
from .facts.prices import PriceTable
from .facts.storage import (BURSTING, CHECKPOINT_EXPIRY_DAYS, CHECKPOINT_NONCURRENT_DAYS, DATA_BUCKET_VERSIONED,
                            DATA_MULTIPART_ABORT_DAYS, DATA_NONCURRENT_DAYS, EXPRESS_CHECKPOINT_EXPIRY_DAYS,
                            EXPRESS_MULTIPART_ABORT_DAYS, FSX_IDLE_GUARD_EVERY_MINUTES, OUTPUT_EXPIRY_DAYS,
                            ELASTIC, PERSISTENT_2, PROVISIONED)
from .model.provisioning import Provisioning, lab_from_settings
from .requests import CHECKPOINTS_PREFIX, CODE_PREFIX, DATASETS_PREFIX, OUTPUT_PREFIX, RESULTS_PREFIX

# Per prefix of the data bucket, the days the model takes: (a current object's life, a noncurrent version's life);
# None: no expiry. The checkpoint estimate prices checkpoints/' noncurrent days (CHECKPOINT_NONCURRENT_MEAN_DAYS).
DATA_PREFIX_DAYS: dict[str, tuple[int | None, int | None]] = {
    f"{DATASETS_PREFIX}/": (None, DATA_NONCURRENT_DAYS),
    f"{CODE_PREFIX}/": (None, DATA_NONCURRENT_DAYS),
    f"{OUTPUT_PREFIX}/": (OUTPUT_EXPIRY_DAYS, DATA_NONCURRENT_DAYS),
    f"{RESULTS_PREFIX}/": (None, DATA_NONCURRENT_DAYS),
    f"{CHECKPOINTS_PREFIX}/": (CHECKPOINT_EXPIRY_DAYS, CHECKPOINT_NONCURRENT_DAYS),
}
# The directory bucket's: checkpoints a run left expire; staged datasets stay until `dslab express empty`.
EXPRESS_PREFIX_DAYS: dict[str, int | None] = {f"{CHECKPOINTS_PREFIX}/": EXPRESS_CHECKPOINT_EXPIRY_DAYS,
                                              f"{DATASETS_PREFIX}/": None}
LIFECYCLE_PRINCIPAL = "lifecycle.s3.amazonaws.com"


@dataclass(frozen=True)
class Assumption:
    """One figure: the model's and the template's (``where`` says which resource and property)."""
    name: str
    model: Any
    template: Any
    where: str

    @property
    def holds(self) -> bool:
        return self.model == self.template

    def line(self) -> str:
        return f"{self.name}: the model takes {self.model!r}, the template has {self.template!r} ({self.where})"


def _resources(template: dict[str, Any], kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(lid, r) for lid, r in (template.get("Resources") or {}).items() if r.get("Type") == kind]


def _rules(props: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in ((props.get("LifecycleConfiguration") or {}).get("Rules") or []) if r.get("Status") == "Enabled"]


def _covers(rule: dict[str, Any], prefix: str) -> bool:
    """Whether a rule acts on every object under ``prefix`` (its own prefix a start of it, no size filter)."""
    if any(rule.get(k) not in (None, []) for k in ("ObjectSizeGreaterThan", "ObjectSizeLessThan", "TagFilters")):
        return False
    return prefix.startswith(rule.get("Prefix") or "")


def effective_days(props: dict[str, Any], prefix: str, action: Callable[[dict[str, Any]], Any]) -> int | None:
    """The days after which S3 acts on every object under ``prefix``: the shortest of the enabled rules that cover it
    (lifecycle-conflicts.html); None where none does."""
    found = [int(days) for rule in _rules(props) if _covers(rule, prefix) and (days := action(rule)) is not None]
    return min(found) if found else None


def _expiration(rule: dict[str, Any]) -> Any:
    return rule.get("ExpirationInDays")


def _noncurrent(rule: dict[str, Any]) -> Any:
    return ((rule.get("NoncurrentVersionExpiration") or {}).get("NoncurrentDays")
            or rule.get("NoncurrentVersionExpirationInDays"))


def _abort(rule: dict[str, Any]) -> Any:
    return (rule.get("AbortIncompleteMultipartUpload") or {}).get("DaysAfterInitiation")


def _data_bucket(core: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The data bucket: the versioned, logged one (the other is its access-log bucket); None when adopted."""
    found = [(lid, r["Properties"]) for lid, r in _resources(core, "AWS::S3::Bucket")
             if "LoggingConfiguration" in (r.get("Properties") or {})]
    return found[0] if len(found) == 1 else None


def rendered(value: Any) -> str:
    """A template value as text, each token (Ref, GetAtt, ...) as <token>: enough to read a literal out of a Join."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(rendered(p) for p in parts)
    return "<token>"


def idle_guard(workflow: dict[str, Any]) -> tuple[float, int | None]:
    """(hours, minutes between looks) of the idle guard's rule; (0, None) where the template has none."""
    for _, rule in _resources(workflow, "AWS::Events::Rule"):
        for target in (rule.get("Properties") or {}).get("Targets") or []:
            try:
                payload = json.loads(rendered(target.get("Input")).replace("<token>", "0"))
            except ValueError:
                continue
            if isinstance(payload, dict) and payload.get("action") == "idle":
                schedule = str(rule["Properties"].get("ScheduleExpression", ""))
                minutes = None
                if schedule.startswith("rate(") and "minute" in schedule:
                    minutes = int(schedule[5:].split()[0])
                return float(payload.get("idle_hours") or 0), minutes
    return 0.0, None


def _region(core: dict[str, Any]) -> str | None:
    """The Region the Core stack is synthesized for: the end of its BucketName output, the data bucket's name
    "datasourcelab-data-<account>-<region>" (stacks/components/data_bucket.py data_bucket_name), kept when adopted."""
    value = ((core.get("Outputs") or {}).get("BucketName") or {}).get("Value")
    if isinstance(value, dict) and "Ref" in value:   # the bucket the stack makes: its BucketName property
        value = ((core.get("Resources") or {}).get(value["Ref"], {}).get("Properties") or {}).get("BucketName")
    found = re.fullmatch(r"datasourcelab-data-(?:<token>|\d{12})-([a-z0-9-]+)", rendered(value))
    return found.group(1) if found else None


def model_lab(settings: Callable[[str], Any], source: str = "the deploy's settings") -> Provisioning:
    """The lab as every answer reads the deploy's settings (model.provisioning.lab_from_settings)."""
    return lab_from_settings(settings, source)


def stack_assumptions(core: dict[str, Any], fsx: dict[str, Any], workflow: dict[str, Any],
                      settings: Callable[[str], Any]) -> list[Assumption]:
    """Every pair of (the model's figure, the synthesized template's) for the lab these templates deploy, built with
    the context ``settings`` (a key's value, as cdk.json and -c give it)."""
    lab = model_lab(settings)
    out: list[Assumption] = []
    data = _data_bucket(core)
    if data is not None:   # adopted (-c adoptBucket=true): the bucket is not in the template (see data_bucket.py)
        logical, props = data
        versioned = (props.get("VersioningConfiguration") or {}).get("Status") == "Enabled"
        out.append(Assumption("data bucket versioned", DATA_BUCKET_VERSIONED, versioned,
                              f"{logical} VersioningConfiguration"))
        for prefix, (expiry, noncurrent) in DATA_PREFIX_DAYS.items():
            out.append(Assumption(f"data bucket {prefix} expiry days", expiry,
                                  effective_days(props, prefix, _expiration), f"{logical} LifecycleConfiguration"))
            out.append(Assumption(f"data bucket {prefix} noncurrent days", noncurrent,
                                  effective_days(props, prefix, _noncurrent), f"{logical} LifecycleConfiguration"))
        out.append(Assumption("data bucket multipart abort days", DATA_MULTIPART_ABORT_DAYS,
                              effective_days(props, "", _abort), f"{logical} LifecycleConfiguration"))
    for logical, bucket in _resources(core, "AWS::S3Express::DirectoryBucket"):
        props = bucket.get("Properties") or {}
        out.append(Assumption("directory bucket versioned", False, "VersioningConfiguration" in props,
                              f"{logical} (directory buckets have no versioning)"))
        for prefix, expiry in EXPRESS_PREFIX_DAYS.items():
            out.append(Assumption(f"directory bucket {prefix} expiry days", expiry,
                                  effective_days(props, prefix, _expiration), f"{logical} LifecycleConfiguration"))
        out.append(Assumption("directory bucket multipart abort days", EXPRESS_MULTIPART_ABORT_DAYS,
                              effective_days(props, "", _abort), f"{logical} LifecycleConfiguration"))
        out.append(Assumption("directory bucket lets S3 Lifecycle act", True, _lifecycle_allowed(core, logical),
                              f"AWS::S3Express::BucketPolicy on {logical}"))
    for logical, system in _resources(fsx, "AWS::FSx::FileSystem"):
        props = system.get("Properties") or {}
        lustre = props.get("LustreConfiguration") or {}
        out.append(Assumption("FSx deployment type", lab.fsx.deployment_type, lustre.get("DeploymentType"),
                              f"{logical} LustreConfiguration.DeploymentType"))
        out.append(Assumption("FSx capacity GiB", lab.fsx.capacity_gib, props.get("StorageCapacity"),
                              f"{logical} StorageCapacity"))
        tier = int(lab.fsx.mbps_per_tib) if lab.fsx.deployment_type == PERSISTENT_2 else None
        out.append(Assumption("FSx throughput per TiB (Persistent 2's tier)", tier,
                              lustre.get("PerUnitStorageThroughput"),
                              f"{logical} LustreConfiguration.PerUnitStorageThroughput"))
    for logical, system in _resources(core, "AWS::EFS::FileSystem"):
        props = system.get("Properties") or {}
        mibps = props.get("ProvisionedThroughputInMibps")
        out.append(Assumption("EFS throughput mode", lab.efs.mode, props.get("ThroughputMode", "bursting"),
                              f"{logical} ThroughputMode"))
        out.append(Assumption("EFS provisioned MiB/s", lab.efs.provisioned_mibps,
                              None if mibps is None else float(mibps), f"{logical} ProvisionedThroughputInMibps"))
        # CreateFileSystem: PerformanceMode "The default is generalPurpose", ThroughputMode "Default is bursting".
        out.append(Assumption("EFS performance mode", lab.efs.performance_mode,
                              props.get("PerformanceMode", "generalPurpose"), f"{logical} PerformanceMode"))
    out.append(Assumption("the lab's Region (EFS's limits)", lab.efs.region, _region(core), "the BucketName output"))
    hours, minutes = idle_guard(workflow)
    out.append(Assumption("idle guard hours", lab.fsx_idle_hours, hours, "the idle guard's AWS::Events::Rule Input"))
    if hours:
        out.append(Assumption("idle guard schedule minutes", FSX_IDLE_GUARD_EVERY_MINUTES, minutes,
                              "the idle guard's ScheduleExpression"))
    return out


def _lifecycle_allowed(core: dict[str, Any], bucket_logical: str) -> bool:
    """Whether a bucket policy on the directory bucket lets S3 Lifecycle open ReadWrite sessions (without it "S3
    Lifecycle cannot expire objects in your directory bucket", directory-buckets-objects-lifecycle.html)."""
    for _, policy in _resources(core, "AWS::S3Express::BucketPolicy"):
        props = policy.get("Properties") or {}
        if props.get("Bucket") != {"Ref": bucket_logical}:
            continue
        for statement in (props.get("PolicyDocument") or {}).get("Statement") or []:
            actions = statement.get("Action")
            actions = actions if isinstance(actions, list) else [actions]
            equals = (statement.get("Condition") or {}).get("StringEquals") or {}
            mode = equals.get("s3express:SessionMode", "ReadWrite")
            principal = (statement.get("Principal") or {}).get("Service")
            if (statement.get("Effect") == "Allow" and principal == LIFECYCLE_PRINCIPAL
                    and "s3express:CreateSession" in actions and mode == "ReadWrite"):
                return True
    return False


def mismatches(found: list[Assumption]) -> list[str]:
    return [a.line() for a in found if not a.holds]


# The price rows the model reads for each part a deploy builds, and the context key that chooses each.
EFS_PRICE_ROWS = {BURSTING: ("efs_standard_gb_month",),
                  PROVISIONED: ("efs_standard_gb_month", "efs_provisioned_mibps_month"),
                  ELASTIC: ("efs_standard_gb_month", "efs_elastic_read_per_gb", "efs_elastic_write_per_gb")}


def refuse_unpriced(settings: Callable[[str], Any], prices: PriceTable | None = None) -> Provisioning:
    """The lab the model prices for these deploy settings, or ConfigError naming the context key of the first setting
    it cannot price: one the model's reading refuses (lab_from_settings), or one whose price row the table lacks.
    `dslab deploy-check` calls it before every deploy, so no lab is deployed that every answer would misprice."""
    try:
        lab = model_lab(settings)
    except ConfigError as err:
        raise ConfigError(err.field, f"the model cannot price it: {err.problem}", err.allowed) from None
    prices = prices or PriceTable()
    fsx_key = "fsxThroughputPerTiB" if lab.fsx.deployment_type == PERSISTENT_2 else "fsxDeploymentType"
    needed = [(lab.fsx.price_key, fsx_key, lab.fsx.short())]
    needed += [(row, "efsThroughput", lab.efs.mode) for row in EFS_PRICE_ROWS.get(lab.efs.mode, ())]
    for row, key, what in needed:
        if row not in prices.data:
            raise ConfigError(key, f"the model cannot price {what}: the price table of {prices.date} has no {row} row "
                                   "(every answer would misprice the lab); choose a priced setting, or add the row")
    return lab
