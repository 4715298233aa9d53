"""Before a deploy: the two setting changes AWS refuses on a running lab, found before CloudFormation meets them.

A deploy's CONTEXT holds for that deploy only, so a later plain `make deploy` builds cdk.json's settings again. Two
such returns are refused by the service, and CloudFormation then rolls the whole stack update back:
- **FSx for Lustre's storage capacity only grows in place**: "You can only increase the amount of storage capacity
  for a file system; you cannot decrease storage capacity" (FSx for Lustre User Guide,
  managing-storage-capacity.html); UpdateFileSystem's StorageCapacity: "The value must be greater than the current
  storage capacity." A new deployment type, Lustre version or S3 import path is a new file system (CloudFormation
  replaces it), of any size.
- **EFS's throughput changes once a day**: "Amazon EFS restricts the following modifications to one change within a
  24-hour period: Changing a file system's throughput mode ... Reducing the amount of provisioned throughput"
  (AWS re:Post Knowledge Center, efs-max-throughput-mode-changes); "any time that you change the file system to
  Provisioned throughput or increase the provisioned throughput amount, you must wait at least 24 hours before you
  can change the throughput mode again or decrease the provisioned amount" (EFS User Guide,
  managing-throughput.html). UpdateFileSystem answers TooManyRequests. An increase is always allowed; a new
  performance mode is a new file system.

This module decides from what is deployed and what the deploy would build; dslab/cli/deploy_check.py reads both.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, Iterable

EFS_THROUGHPUT_WAIT = dt.timedelta(hours=24)
SCRATCH_1, PERSISTENT_2 = "SCRATCH_1", "PERSISTENT_2"


def utc_text(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class LustreShape:
    """What decides whether CloudFormation updates an FSx for Lustre file system in place, its size and (Persistent 2)
    its throughput tier."""
    deployment_type: str
    capacity_gib: int
    lustre_version: str
    import_path: bool
    per_tib: int | None = None   # PerUnitStorageThroughput (MB/s/TiB): Persistent 2's tier, None for Scratch 2

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> "LustreShape":
        """From AWS::FSx::FileSystem's properties. CreateFileSystemLustreConfiguration DeploymentType "(Default =
        SCRATCH_1)"; FileSystemTypeVersion "Default value is 2.10, except ... 2.12 when DeploymentType is set to
        PERSISTENT_2 without a metadata configuration mode" (FSx API reference)."""
        lustre = props.get("LustreConfiguration") or {}
        kind = str(lustre.get("DeploymentType") or SCRATCH_1)
        version = str(props.get("FileSystemTypeVersion") or ("2.12" if kind == PERSISTENT_2 else "2.10"))
        tier = lustre.get("PerUnitStorageThroughput")
        return cls(kind, int(props.get("StorageCapacity") or 0), version, bool(lustre.get("ImportPath")),
                   int(tier) if tier not in (None, "") else None)

    def replaced_by(self, wanted: "LustreShape") -> bool:
        """A different deployment type, Lustre version or import path makes a new file system (each is a
        "Replacement" property of AWS::FSx::FileSystem; the stand-in's provider replaces on the same)."""
        return (self.deployment_type, self.lustre_version, self.import_path) != (
            wanted.deployment_type, wanted.lustre_version, wanted.import_path)


def fsx_shrink_refusal(deployed: LustreShape | None, wanted: LustreShape, *, moves_zone: bool,
                       take_down: str, bring_up: str) -> str | None:
    """Why this deploy would shrink FSx in place (None where it would not): FSx up with the same deployment type,
    version and link, at a larger capacity than the deploy asks, in the same zone. ``take_down`` / ``bring_up``:
    the commands that remove FSx and deploy it again (the way through)."""
    if deployed is None or moves_zone or deployed.replaced_by(wanted) or wanted.capacity_gib >= deployed.capacity_gib:
        return None
    return (f"FSx for Lustre ({deployed.deployment_type}) stands at {deployed.capacity_gib:,} GiB and this deploy asks "
            f"{wanted.capacity_gib:,} GiB: FSx only grows a file system in place (\"You can only increase the amount of "
            f"storage capacity for a file system\"), so CloudFormation would roll the update back. To shrink it, take FSx "
            f"down and bring it up at the new size: `{take_down}`, then `{bring_up}` (its datasets come back from S3); "
            f"or keep its size with fsxCapacity={deployed.capacity_gib} in CONTEXT")


# "You can't make further storage capacity increases on a file system until 6 hours after the last increase was
# requested, or until the storage optimization process has completed, whichever time is longer" (FSx for Lustre User
# Guide, managing-storage-capacity.html). DescribeFileSystems' AdministrativeActions hold both: the FILE_SYSTEM_UPDATE
# that asked for the capacity (its RequestTime) and the STORAGE_OPTIMIZATION that follows it ("For Lustre, storage
# optimization consists of rebalancing the data across the existing and newly added file servers"; its Status).
FSX_INCREASE_WAIT = dt.timedelta(hours=6)
OPTIMIZING = ("PENDING", "IN_PROGRESS", "OPTIMIZING", "UPDATED_OPTIMIZING", "PAUSED")


def last_capacity_increase(actions: Iterable[dict[str, Any]]) -> dt.datetime | None:
    """When the file system's storage capacity was last asked to grow (a FILE_SYSTEM_UPDATE with a StorageCapacity
    that did not fail), or None."""
    times = [_aware(a["RequestTime"]) for a in actions
             if a.get("AdministrativeActionType") == "FILE_SYSTEM_UPDATE" and a.get("RequestTime")
             and (a.get("TargetFileSystemValues") or {}).get("StorageCapacity")
             and a.get("Status") not in ("FAILED", "CANCELLED")]
    return max(times) if times else None


def storage_optimizing(actions: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The storage optimization still running after an increase (its action), or None. During it "you might see
    decreased file system performance" (managing-storage-capacity.html)."""
    return next((a for a in actions if a.get("AdministrativeActionType") == "STORAGE_OPTIMIZATION"
                 and a.get("Status") in OPTIMIZING), None)


def fsx_increase_refusal(file_system: str, deployed: LustreShape | None, wanted: LustreShape,
                         actions: Iterable[dict[str, Any]], now: dt.datetime, *, moves_zone: bool) -> str | None:
    """Why FSx would refuse this deploy's capacity increase now (None where it would not): within 6 hours of the last
    increase, or while its storage optimization runs (managing-storage-capacity.html); UpdateFileSystem refuses it
    and CloudFormation rolls the stack back. A replacement or a new zone is a new file system, which has no history."""
    if (deployed is None or moves_zone or deployed.replaced_by(wanted)
            or wanted.capacity_gib <= deployed.capacity_gib):
        return None
    actions = list(actions)
    last, optimizing = last_capacity_increase(actions), storage_optimizing(actions)
    too_soon = last is not None and now < last + FSX_INCREASE_WAIT
    if not too_soon and optimizing is None:
        return None
    rule = ("FSx allows a further storage capacity increase only \"6 hours after the last increase was requested, or "
            "[once] the storage optimization process has completed, whichever time is longer\" (FSx for Lustre User "
            "Guide), so UpdateFileSystem would refuse it and CloudFormation roll the update back")
    said = []
    if too_soon:
        said.append(f"its capacity was last increased at {utc_text(last)}, so not before {utc_text(last + FSX_INCREASE_WAIT)}")
    if optimizing is not None:
        progress = optimizing.get("ProgressPercent")
        said.append("its storage optimization after that increase is still running ("
                    + (f"{progress}% done" if progress is not None else str(optimizing.get("Status"))) + ")")
    when = " and ".join(said)
    return (f"FSx for Lustre {file_system} stands at {deployed.capacity_gib:,} GiB and this deploy asks "
            f"{wanted.capacity_gib:,} GiB: {when}. {rule}. Deploy the larger capacity after that (`dslab fsx status` says "
            f"how it stands); until then keep its size with fsxCapacity={deployed.capacity_gib} in CONTEXT")


# Persistent 2's throughput tier changes in place, up or down ("You can increase or decrease the amount of throughput
# capacity for an SSD-based file system"), with the same wait as storage: "You can't make further throughput capacity
# changes on a file system until 6 hours after the last request, or until the throughput optimization process has
# completed, whichever time is longer" (FSx for Lustre User Guide, managing-throughput-capacity.html). "When you modify
# a file system's throughput capacity, a FILE_SYSTEM_UPDATE administrative action is generated", its
# TargetFileSystemValues' LustreConfiguration.PerUnitStorageThroughput the tier asked; its Status goes PENDING,
# IN_PROGRESS, then UPDATED_OPTIMIZING ("The new disk I/O performance level is available for write operations. Your read
# operations will see disk I/O performance between the previous level and the new level until your file system is no
# longer in this state") and COMPLETED, when "The new throughput capacity is then available to the file system, and
# shows in the PerUnitStorageThroughput property" (monitoring-throughput-capacity-changes.html).
FSX_THROUGHPUT_WAIT = dt.timedelta(hours=6)
THROUGHPUT_UPDATING = ("PENDING", "IN_PROGRESS", "UPDATED_OPTIMIZING")


def _tier_asked(action: dict[str, Any]) -> Any:
    lustre = (action.get("TargetFileSystemValues") or {}).get("LustreConfiguration") or {}
    return lustre.get("PerUnitStorageThroughput")


def last_tier_change(actions: Iterable[dict[str, Any]]) -> dt.datetime | None:
    """When the file system's throughput tier was last asked to change (a FILE_SYSTEM_UPDATE naming a
    PerUnitStorageThroughput that did not fail), or None."""
    times = [_aware(a["RequestTime"]) for a in actions
             if a.get("AdministrativeActionType") == "FILE_SYSTEM_UPDATE" and a.get("RequestTime")
             and _tier_asked(a) is not None and a.get("Status") not in ("FAILED", "CANCELLED")]
    return max(times) if times else None


def tier_updating(actions: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The throughput-tier update not yet COMPLETED (its action: PENDING, IN_PROGRESS or UPDATED_OPTIMIZING), or None.
    While it runs, reads see "disk I/O performance between the previous level and the new level"."""
    return next((a for a in actions if a.get("AdministrativeActionType") == "FILE_SYSTEM_UPDATE"
                 and _tier_asked(a) is not None and a.get("Status") in THROUGHPUT_UPDATING), None)


def fsx_throughput_refusal(file_system: str, deployed: LustreShape | None, wanted: LustreShape,
                           actions: Iterable[dict[str, Any]], now: dt.datetime, *, moves_zone: bool) -> str | None:
    """Why FSx would refuse this deploy's new throughput tier now (None where it would not): within 6 hours of the last
    tier change, or while that change is still updating or optimizing (managing-throughput-capacity.html);
    UpdateFileSystem refuses it and CloudFormation rolls the stack back. A replacement or a new zone is a new file
    system, which has no history; a tier the deploy keeps is no change."""
    if (deployed is None or moves_zone or deployed.replaced_by(wanted) or wanted.per_tib is None
            or wanted.per_tib == deployed.per_tib):
        return None
    actions = list(actions)
    last, updating = last_tier_change(actions), tier_updating(actions)
    too_soon = last is not None and now < last + FSX_THROUGHPUT_WAIT
    if not too_soon and updating is None:
        return None
    said = []
    if too_soon:
        said.append(f"its throughput tier was last changed at {utc_text(last)}, so not before "
                    f"{utc_text(last + FSX_THROUGHPUT_WAIT)}")
    if updating is not None:
        said.append(f"that change (to {_tier_asked(updating)} MB/s/TiB) is still {updating.get('Status')}")
    return (f"FSx for Lustre {file_system} is deployed at {deployed.per_tib} MB/s/TiB and this deploy asks "
            f"{wanted.per_tib}: "
            f"{' and '.join(said)}. FSx allows a further throughput capacity change only \"6 hours after the last "
            "request, or until the throughput optimization process has completed, whichever time is longer\" (FSx "
            "for Lustre User Guide), so UpdateFileSystem would refuse it and CloudFormation roll the update back. Deploy "
            f"the new tier after that (`dslab fsx status` says how it stands); until then keep it with "
            f"fsxThroughputPerTiB={deployed.per_tib} in CONTEXT")


@dataclass(frozen=True)
class EfsThroughput:
    """EFS's throughput as AWS::EFS::FileSystem's properties set it (``mibps`` only with provisioned)."""
    performance: str
    mode: str
    mibps: float | None = None

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> "EfsThroughput":
        # CreateFileSystem: PerformanceMode "The default is generalPurpose", ThroughputMode "Default is bursting".
        mode = str(props.get("ThroughputMode") or "bursting")
        raw = props.get("ProvisionedThroughputInMibps")
        return cls(str(props.get("PerformanceMode") or "generalPurpose"), mode,
                   float(raw) if mode == "provisioned" and raw not in (None, "") else None)

    def label(self) -> str:
        return f"provisioned {self.mibps:g} MiB/s" if self.mode == "provisioned" else self.mode

    def settings(self) -> str:
        """The CONTEXT words that keep this throughput."""
        return f"efsThroughput={self.mode}" + (f" efsProvisionedMibps={self.mibps:g}" if self.mode == "provisioned" else "")

    def restricted_change_to(self, wanted: "EfsThroughput") -> bool:
        """A change EFS allows once in 24 hours: a new throughput mode, or less provisioned throughput."""
        return wanted.mode != self.mode or (wanted.mode == "provisioned" and (wanted.mibps or 0) < (self.mibps or 0))


def efs_throughput_refusal(file_system: str, deployed: EfsThroughput | None, wanted: EfsThroughput,
                           last_change: dt.datetime | None, now: dt.datetime) -> str | None:
    """Why EFS would refuse this deploy's throughput now (None where it would not): a mode change or a lower
    provisioned throughput within 24 hours of the file system's last throughput change. A new performance mode
    replaces the file system, which then has no such history."""
    if deployed is None or deployed.performance != wanted.performance or not deployed.restricted_change_to(wanted):
        return None
    if last_change is None or now >= last_change + EFS_THROUGHPUT_WAIT:
        return None
    return (f"EFS {file_system} changed its throughput at {utc_text(last_change)} (now {deployed.label()}) and EFS allows "
            f"a throughput-mode change or a decrease of provisioned throughput only 24 hours after the last change "
            f"(UpdateFileSystem: TooManyRequests), so CloudFormation would roll the update back. This deploy's "
            f"{wanted.label()} can go after {utc_text(last_change + EFS_THROUGHPUT_WAIT)} UTC; until then keep EFS as it "
            f"is with {deployed.settings()} in CONTEXT")


def _properties(event: dict[str, Any]) -> dict[str, Any] | None:
    raw = event.get("ResourceProperties")
    if not raw:
        return None
    try:
        props = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    return props if isinstance(props, dict) else None


def _throughput_of(props: dict[str, Any] | None) -> tuple[str, float | None] | None:
    if props is None:
        return None
    found = EfsThroughput.from_properties(props)
    return found.mode, found.mibps


def last_throughput_change(events: Iterable[dict[str, Any]], logical_id: str) -> dt.datetime | None:
    """When CloudFormation last changed the throughput of the EFS file system ``logical_id`` (None: never, as far
    as the events tell), from its stack's events (DescribeStackEvents order: newest first).

    Each completed update of the resource is compared with the one before through the properties the events carry
    (StackEvent.ResourceProperties); an update whose properties are not given counts as a change (it may have been
    one). An update that failed changed nothing; a rollback's update back is a change of its own; a replacement (a
    new physical ID) is a new file system, whose history starts there."""
    applied: tuple[str, float | None] | None = None
    pending: tuple[str, float | None] | None = None
    physical, last = None, None
    for event in reversed(list(events)):
        if event.get("LogicalResourceId") != logical_id or event.get("ResourceType") != "AWS::EFS::FileSystem":
            continue
        status, props = event.get("ResourceStatus", ""), _throughput_of(_properties(event))
        if status.endswith("_IN_PROGRESS"):
            pending = props
        elif status.endswith("_FAILED"):
            pending = None
        elif status == "CREATE_COMPLETE":
            applied, pending, last = props or pending, None, None
            physical = event.get("PhysicalResourceId")
        elif status == "UPDATE_COMPLETE":
            now_props = props or pending
            if physical is not None and event.get("PhysicalResourceId") not in (None, "", physical):
                last = None                       # replaced: a new file system
            elif now_props is None or applied is None or now_props != applied:
                last = _aware(event["Timestamp"])
            applied, pending, physical = now_props, None, event.get("PhysicalResourceId") or physical
    return last


def _aware(when: Any) -> dt.datetime:
    if isinstance(when, (int, float)):   # a JSON timestamp, as botocore's parsers take it
        return dt.datetime.fromtimestamp(when, dt.timezone.utc)
    if isinstance(when, str):
        when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)
