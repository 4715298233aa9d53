"""EFS, FSx for Lustre (and its S3 data repository association), DataSync locations and tasks."""

from __future__ import annotations

import datetime as dt
import functools
import json
import uuid

from ..model import ResourceFailed
from .base import Provider


def _lifecycle_policies(props) -> list[dict]:
    """LifecyclePolicies as EFS takes them: "Amazon EFS requires that each LifecyclePolicy object have only a
    single transition" (https://docs.aws.amazon.com/efs/latest/ug/API_LifecyclePolicy.html), each value one
    the EFS API's model lists."""
    import botocore.session
    model = botocore.session.get_session().get_service_model("efs")
    allowed = {member: set(shape.enum) for member, shape in model.shape_for("LifecyclePolicy").members.items()}
    policies = props.get("LifecyclePolicies") or []
    for policy in policies:
        if len(policy) != 1:
            raise ResourceFailed(f"Invalid LifecyclePolicy {policy}: each LifecyclePolicy object must have only a "
                                 "single transition")
        (key, value), = policy.items()
        if value not in allowed.get(key, ()):
            raise ResourceFailed(f"Invalid LifecyclePolicy {policy}: {key} takes one of {sorted(allowed.get(key, ()))}")
    return policies


class EfsFileSystem(Provider):
    replace_on = ("PerformanceMode", "Encrypted", "KmsKeyId", "AvailabilityZoneName")

    def create(self, logical_id, kind, props, *, stack):
        efs = self.client("efs")
        if props.get("ThroughputMode") == "elastic" and props.get("PerformanceMode") == "maxIO":
            # "Max I/O mode is not supported for One Zone file systems or file systems that use Elastic throughput"
            # (EFS User Guide, performance.html#performancemodes).
            raise ResourceFailed("Invalid request: Max I/O performance mode is not supported with Elastic throughput")
        kwargs = {"CreationToken": f"{stack.name}-{logical_id}-{uuid.uuid4()}",
                  "PerformanceMode": props.get("PerformanceMode", "generalPurpose"),
                  "Encrypted": bool(props.get("Encrypted", False)), "ThroughputMode": props.get("ThroughputMode", "bursting")}
        if props.get("ProvisionedThroughputInMibps"):
            kwargs["ProvisionedThroughputInMibps"] = float(props["ProvisionedThroughputInMibps"])
        policies = _lifecycle_policies(props)
        fs = efs.create_file_system(**kwargs)
        if props.get("FileSystemPolicy"):
            efs.put_file_system_policy(FileSystemId=fs["FileSystemId"], Policy=json.dumps(props["FileSystemPolicy"]))
        if policies:
            efs.put_lifecycle_configuration(FileSystemId=fs["FileSystemId"], LifecyclePolicies=policies)
        return fs["FileSystemId"], {"FileSystemId": fs["FileSystemId"], "Arn": fs["FileSystemArn"]}

    # What EFS allows (UpdateFileSystem changes ThroughputMode and ProvisionedThroughputInMibps in place):
    # - "any time that you change the file system to Provisioned throughput or increase the provisioned throughput
    #   amount, you must wait at least 24 hours before you can change the throughput mode again or decrease the
    #   provisioned amount" (EFS User Guide, managing-throughput.html);
    # - "Amazon EFS restricts the following modifications to one change within a 24-hour period: Changing a file
    #   system's throughput mode. ... Reducing the amount of provisioned throughput in Provisioned Throughput mode."
    #   and "you can increase the Provisioned Throughput value of the file system at any time with no restriction"
    #   (AWS re:Post Knowledge Center, efs-max-throughput-mode-changes);
    # - UpdateFileSystem's error TooManyRequests (HTTP 429): "Returned if you don't wait at least 24 hours before either
    #   changing the throughput mode, or decreasing the Provisioned Throughput value." (EFS API reference; botocore's
    #   efs model), its message "You have reached the maximum number of throughput mode changes or provisioned
    #   throughput value decreases. Wait until YYYY-MM-DDTxx:xx:xxZ UTC and try again." (re:Post, same article).
    # So every throughput change starts the 24 hours (the guide's to-Provisioned and increases, re:Post's mode changes
    # and decreases), and a mode change or a decrease within them is refused; an increase never is. Creating a file
    # system is no change (none of the three says it is).
    THROUGHPUT_WAIT = dt.timedelta(hours=24)

    def _throughput(self, file_system_id: str, props) -> None:
        """ThroughputMode and ProvisionedThroughputInMibps change in place (CloudFormation calls UpdateFileSystem;
        moto has none, so its record is changed), within EFS's 24-hour rule (above)."""
        from moto.efs.models import efs_backends
        record = efs_backends[self.env.account][self.env.region].file_systems_by_id[file_system_id]
        mode = props.get("ThroughputMode", "bursting")
        mibps = float(props["ProvisionedThroughputInMibps"]) if props.get("ProvisionedThroughputInMibps") else None
        was_mode = record.throughput_mode
        was_mibps = record.provisioned_throughput_in_mibps if was_mode == "provisioned" else None
        if (mode, mibps) == (was_mode, was_mibps):
            return
        changed_at, now = self.env.efs_throughput_changes.get(file_system_id), self.env.clock()
        restricted = mode != was_mode or (mibps or 0) < (was_mibps or 0)
        if restricted and changed_at is not None and now < changed_at + self.THROUGHPUT_WAIT:
            until = (changed_at + self.THROUGHPUT_WAIT).strftime("%Y-%m-%dT%H:%M:%SZ")
            raise ResourceFailed(
                f"Resource handler returned message: \"You have reached the maximum number of throughput mode changes or "
                f"provisioned throughput value decreases. Wait until {until} UTC and try again. (Service: Efs, Status "
                f"Code: 429, Error Code: TooManyRequests)\" (HandlerErrorCode: Throttling)")
        self.env.efs_throughput_changes[file_system_id] = now
        record.throughput_mode, record.provisioned_throughput_in_mibps = mode, mibps

    def update(self, old, props):
        self._throughput(old.physical_id, props)
        if props.get("FileSystemPolicy"):
            self.client("efs").put_file_system_policy(FileSystemId=old.physical_id, Policy=json.dumps(props["FileSystemPolicy"]))
        # An empty list turns lifecycle management off: "A PutLifecycleConfiguration call with an empty
        # LifecyclePolicies array in the request body deletes any existing LifecycleConfiguration"
        # (https://docs.aws.amazon.com/efs/latest/ug/API_PutLifecycleConfiguration.html).
        self.client("efs").put_lifecycle_configuration(FileSystemId=old.physical_id,
                                                       LifecyclePolicies=_lifecycle_policies(props))
        return old.physical_id, old.attributes

    def delete(self, resource):
        self.client("efs").delete_file_system(FileSystemId=resource.physical_id)
        self.env.efs_throughput_changes.pop(resource.physical_id, None)


class EfsMountTarget(Provider):
    replace_on = ("FileSystemId", "SubnetId", "IpAddress")

    def create(self, logical_id, kind, props, *, stack):
        target = self.client("efs").create_mount_target(FileSystemId=props["FileSystemId"], SubnetId=props["SubnetId"],
                                                        SecurityGroups=props.get("SecurityGroups", []))
        return target["MountTargetId"], {"Id": target["MountTargetId"], "IpAddress": target.get("IpAddress", "")}

    def update(self, old, props):
        self.client("efs").modify_mount_target_security_groups(MountTargetId=old.physical_id,
                                                               SecurityGroups=props.get("SecurityGroups", []))
        return old.physical_id, old.attributes

    def delete(self, resource):
        self.client("efs").delete_mount_target(MountTargetId=resource.physical_id)


# How long the stand-in's FSx stays UPDATED_OPTIMIZING after a throughput-tier change: AWS gives no duration (its
# status lists the phase: "Updated; Optimizing ... Your read operations will see disk I/O performance between the
# previous level and the new level until your file system is no longer in this state",
# monitoring-throughput-capacity-changes.html), so this is the stand-in's assumption, on the wall clock of the
# 6-hour rule (Environment.clock): a test moves the recorded RequestTime back instead of waiting.
FSX_TIER_OPTIMIZING = dt.timedelta(hours=1)


def settled_actions(actions: list[dict], now: dt.datetime) -> list[dict]:
    """The file system's administrative actions as DescribeFileSystems gives them ``now``: a throughput-tier change is
    UPDATED_OPTIMIZING for FSX_TIER_OPTIMIZING after its request, then COMPLETED."""
    out = []
    for action in actions:
        action = dict(action)
        lustre = (action.get("TargetFileSystemValues") or {}).get("LustreConfiguration") or {}
        asked = dt.datetime.fromtimestamp(float(action.get("RequestTime") or 0), dt.timezone.utc)
        if (action.get("AdministrativeActionType") == "FILE_SYSTEM_UPDATE" and "PerUnitStorageThroughput" in lustre
                and action.get("Status") == "UPDATED_OPTIMIZING" and now >= asked + FSX_TIER_OPTIMIZING):
            action["Status"] = "COMPLETED"
        out.append(action)
    return out


@functools.lru_cache(maxsize=1)
def _tiered_class():
    """moto's FSx file system whose DescribeFileSystems answer settles a tier change by the clock: the new
    PerUnitStorageThroughput shows once the change is COMPLETED ("The new throughput capacity is then available to the
    file system, and shows in the PerUnitStorageThroughput property"), the tier before it until then."""
    from moto.fsx.models import FileSystem
    from ....core.deploy_guard import tier_updating

    class TierChangingFileSystem(FileSystem):
        def to_dict(self) -> dict:
            out = super().to_dict()
            if out.get("AdministrativeActions"):
                out["AdministrativeActions"] = settled_actions(out["AdministrativeActions"], self.dslab_env.clock())
                if tier_updating(out["AdministrativeActions"]) is not None and out.get("LustreConfiguration"):
                    out["LustreConfiguration"] = {**out["LustreConfiguration"],
                                                  "PerUnitStorageThroughput": self.dslab_tier_before}
            return out
    return TierChangingFileSystem


class FsxFileSystem(Provider):
    replace_on = ("FileSystemType", "SubnetIds", "SecurityGroupIds", "FileSystemTypeVersion", "KmsKeyId", "StorageType")

    def requires_replacement(self, old, new):
        if super().requires_replacement(old, new):
            return True
        lustre_old, lustre_new = old.get("LustreConfiguration", {}), new.get("LustreConfiguration", {})
        return any(lustre_old.get(k) != lustre_new.get(k) for k in ("DeploymentType", "ImportPath", "ExportPath"))

    @staticmethod
    def refused(props) -> str | None:
        """Why CreateFileSystem refuses these Lustre properties, for the deployment types whose rules the lab
        knows (provisioning.fsx_problems quotes each rule from the FSx API reference and Lustre User Guide)."""
        from ....core.facts.storage import FSX_DEPLOYMENT_TYPES, fsx_problems
        from ....core.facts.storage import PERSISTENT_2
        lustre = props.get("LustreConfiguration") or {}
        # CreateFileSystemLustreConfiguration DeploymentType "(Default = SCRATCH_1)"; FileSystemTypeVersion "Default value
        # is 2.10, except ... 2.12 when DeploymentType is set to PERSISTENT_2 without a metadata configuration mode".
        kind = lustre.get("DeploymentType", "SCRATCH_1")
        if props.get("FileSystemType") != "LUSTRE" or kind not in FSX_DEPLOYMENT_TYPES:
            return None
        version = props.get("FileSystemTypeVersion") or ("2.12" if kind == PERSISTENT_2 else "2.10")
        per_tib = lustre.get("PerUnitStorageThroughput")
        problems = fsx_problems(kind, int(props["StorageCapacity"]), None if per_tib is None else float(per_tib),
                                link="import-path" if lustre.get("ImportPath") else None, lustre_version=version)
        return "; ".join(why for _, why in problems) or None

    def create(self, logical_id, kind, props, *, stack):
        refused = self.refused(props)
        if refused:
            raise ResourceFailed(f"Invalid request provided: {refused}")
        kwargs = {"FileSystemType": props["FileSystemType"], "StorageCapacity": int(props["StorageCapacity"]),
                  "SubnetIds": props["SubnetIds"], "SecurityGroupIds": props.get("SecurityGroupIds", []),
                  "LustreConfiguration": {k: v for k, v in props.get("LustreConfiguration", {}).items()}}
        if props.get("FileSystemTypeVersion"):
            kwargs["FileSystemTypeVersion"] = props["FileSystemTypeVersion"]
        fs = self.client("fsx").create_file_system(**kwargs)["FileSystem"]
        mount = fs.get("LustreConfiguration", {}).get("MountName") or self.token(f"{fs['FileSystemId']}/MountName", 8).lower()
        self.env.fsx_versions[fs["FileSystemId"]] = props.get("FileSystemTypeVersion") or (
            "2.12" if props.get("LustreConfiguration", {}).get("DeploymentType") == "PERSISTENT_2" else "2.10")
        self.env.on_fsx_created(fs["FileSystemId"], props)
        return fs["FileSystemId"], {"LustreMountName": mount, "DNSName": fs.get("DNSName", f"{fs['FileSystemId']}.fsx.{self.env.region}.amazonaws.com"),
                                    "ResourceARN": fs.get("ResourceARN", "")}

    def update(self, old, props):
        """StorageCapacity and Persistent 2's PerUnitStorageThroughput change in place (CloudFormation calls
        UpdateFileSystem; moto has none, so its record is changed). UpdateFileSystem lists PerUnitStorageThroughput
        among the properties "For FSx for Lustre file systems, you can update", and its LustreConfiguration's
        PerUnitStorageThroughput says "You can increase or decrease your file system's throughput ... For
        PERSISTENT_2 SSD-based deployment types, valid values are 125, 250, 500, and 1000 MB/s/TiB"
        (https://docs.aws.amazon.com/fsx/latest/APIReference/API_UpdateFileSystem.html,
        API_UpdateFileSystemLustreConfiguration.html). UpdateFileSystem StorageCapacity: "For
        SCRATCH_2, PERSISTENT_1, and PERSISTENT_2 SSD deployment types, valid values are in multiples of 2400 GiB.
        The value must be greater than the current storage capacity."; "You can only increase the amount of
        storage capacity for a file system; you cannot decrease storage capacity" (Lustre User Guide,
        managing-storage-capacity.html)."""
        from moto.fsx.models import fsx_backends
        refused = self.refused(props)
        if refused:
            raise ResourceFailed(f"Invalid request provided: {refused}")
        record = fsx_backends[self.env.account][self.env.region].file_systems[old.physical_id]
        capacity = int(props["StorageCapacity"])
        if capacity != record.storage_capacity:
            # UpdateFileSystem documents no error of its own for these: BadRequest is its "generic error indicating a
            # failure with a client request" (botocore's fsx model, UpdateFileSystem's errors).
            if capacity < record.storage_capacity:
                raise ResourceFailed(
                    f"Resource handler returned message: \"Invalid request provided: StorageCapacity {capacity} GiB is less "
                    f"than the file system's {record.storage_capacity} GiB: you can only increase the amount of storage "
                    "capacity for a file system (Service: FSx, Status Code: 400, Error Code: BadRequest)\" "
                    "(HandlerErrorCode: InvalidRequest)")
            if capacity % 2400:
                raise ResourceFailed(
                    f"Resource handler returned message: \"Invalid request provided: StorageCapacity {capacity} GiB: valid "
                    "values are in multiples of 2400 GiB (Service: FSx, Status Code: 400, Error Code: BadRequest)\" "
                    "(HandlerErrorCode: InvalidRequest)")
            # "You can't make further storage capacity increases on a file system until 6 hours after the last
            # increase was requested, or until the storage optimization process has completed, whichever time is
            # longer" (Lustre User Guide, managing-storage-capacity.html): the core's rule (deploy_guard), which
            # `dslab deploy-check` applies first, enforced here as FSx does.
            from ....core.deploy_guard import LustreShape, fsx_increase_refusal
            actions = list(getattr(record, "administrative_actions", None) or [])
            now = self.env.clock()
            shape = LustreShape("SCRATCH_2", record.storage_capacity, "2.15", False)
            if fsx_increase_refusal(old.physical_id, shape, LustreShape("SCRATCH_2", capacity, "2.15", False),
                                    actions, now, moves_zone=False):
                raise ResourceFailed(
                    "Resource handler returned message: \"Invalid request provided: Unable to perform the storage "
                    "capacity update. You can't make further storage capacity increases on a file system until 6 hours "
                    "after the last increase was requested, or until the storage optimization process has completed, "
                    "whichever time is longer. (Service: FSx, Status Code: 400, Error Code: BadRequest)\" "
                    "(HandlerErrorCode: InvalidRequest)")
            # The update and the rebalancing after it, as DescribeFileSystems lists them (the stand-in's servers
            # rebalance at once: its optimization is complete when the update is).
            record.administrative_actions = [
                {"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "RequestTime": now.timestamp(), "Status": "COMPLETED",
                 "ProgressPercent": 100, "TargetFileSystemValues": {"StorageCapacity": capacity}},
                {"AdministrativeActionType": "STORAGE_OPTIMIZATION", "RequestTime": now.timestamp(), "Status": "COMPLETED",
                 "ProgressPercent": 100}, *actions][:50]
            record.storage_capacity = capacity
        per_tib = (props.get("LustreConfiguration") or {}).get("PerUnitStorageThroughput")
        before = (old.properties.get("LustreConfiguration") or {}).get("PerUnitStorageThroughput")
        if per_tib is not None and before is not None and int(per_tib) != int(before):
            self._change_tier(old.physical_id, record, int(before), int(per_tib))
        elif per_tib is not None:
            record.lustre_configuration = {**(record.lustre_configuration or {}), "PerUnitStorageThroughput": int(per_tib)}
        return old.physical_id, old.attributes

    def _change_tier(self, file_system: str, record, before: int, tier: int) -> None:
        """Persistent 2's throughput tier, changed as FSx changes it: refused within 6 hours of the last change or
        while it still updates or optimizes (deploy_guard.fsx_throughput_refusal, which `dslab deploy-check` applies
        first), else a FILE_SYSTEM_UPDATE of its own, UPDATED_OPTIMIZING for a while (settled_actions)."""
        from ....core.deploy_guard import LustreShape, fsx_throughput_refusal
        now = self.env.clock()
        actions = settled_actions(list(getattr(record, "administrative_actions", None) or []), now)
        deployed = LustreShape("PERSISTENT_2", record.storage_capacity, "2.15", False, before)
        if fsx_throughput_refusal(file_system, deployed, LustreShape("PERSISTENT_2", record.storage_capacity, "2.15",
                                                                     False, tier), actions, now, moves_zone=False):
            raise ResourceFailed(
                "Resource handler returned message: \"Invalid request provided: Unable to perform the throughput "
                "capacity update. You can't make further throughput capacity changes on a file system until 6 hours "
                "after the last request, or until the throughput optimization process has completed, whichever time "
                "is longer. (Service: FSx, Status Code: 400, Error Code: BadRequest)\" "
                "(HandlerErrorCode: InvalidRequest)")
        if not hasattr(record, "dslab_env"):
            record.__class__ = _tiered_class()
        record.dslab_env, record.dslab_tier_before = self.env, before   # the stand-in's clock, read at each answer
        # "When you modify a file system's throughput capacity, a FILE_SYSTEM_UPDATE administrative action is
        # generated" (monitoring-throughput-capacity-changes.html); the stand-in's servers switch at once, so it
        # starts in its optimizing phase.
        record.administrative_actions = [
            {"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "RequestTime": now.timestamp(),
             "Status": "UPDATED_OPTIMIZING",
             "TargetFileSystemValues": {"LustreConfiguration": {"PerUnitStorageThroughput": tier}}}, *actions][:50]
        record.lustre_configuration = {**(record.lustre_configuration or {}), "PerUnitStorageThroughput": tier}

    def delete(self, resource):
        self.client("fsx").delete_file_system(FileSystemId=resource.physical_id)
        self.env.fsx_versions.pop(resource.physical_id, None)
        self.env.on_fsx_deleted(resource.physical_id)


class DataRepositoryAssociation(Provider):
    """AWS::FSx::DataRepositoryAssociation (moto has none): the association and, with
    BatchImportMetaDataOnCreate, its S3 metadata import task, which the stand-in's FSx answers through
    DescribeDataRepositoryAssociations / DescribeDataRepositoryTasks (patches)."""
    replace_on = ("FileSystemId", "FileSystemPath", "DataRepositoryPath", "BatchImportMetaDataOnCreate")

    def create(self, logical_id, kind, props, *, stack):
        # "Data repository associations are supported on all FSx for Lustre 2.12 and 2.15 file systems, excluding
        # scratch_1 deployment type." (CreateDataRepositoryAssociation, FSx API reference)
        found = self.unless_gone(self.client("fsx").describe_file_systems, FileSystemIds=[props["FileSystemId"]])
        if found and found.get("FileSystems"):
            kind_of = found["FileSystems"][0].get("LustreConfiguration", {}).get("DeploymentType", "SCRATCH_1")
            version = self.env.fsx_versions.get(props["FileSystemId"], "2.10")
            if kind_of == "SCRATCH_1" or version not in ("2.12", "2.15"):
                raise ResourceFailed(f"Invalid request provided: data repository associations are not supported on "
                                     f"{kind_of} file systems running Lustre {version} (2.12 or 2.15, not SCRATCH_1)")
        association_id = f"dra-{uuid.uuid4().hex[:17]}"
        self.env.on_association(association_id, props)
        return association_id, {"AssociationId": association_id,
                                "ResourceARN": f"arn:aws:fsx:{self.env.region}:{self.env.account}:association/{props['FileSystemId']}/{association_id}"}

    def delete(self, resource):
        self.env.on_association_deleted(resource.physical_id)


class DataSyncLocation(Provider):
    replace_on = ("*",)

    def create(self, logical_id, kind, props, *, stack):
        for role_arn in (props.get("S3Config", {}).get("BucketAccessRoleArn"), props.get("FileSystemAccessRoleArn")):
            self.env.check_assumable(role_arn)
        if kind == "AWS::DataSync::LocationS3":
            subdirectory = props.get("Subdirectory", "/")
            arn = self.client("datasync").create_location_s3(S3BucketArn=props["S3BucketArn"], Subdirectory=subdirectory,
                                                            S3Config=props["S3Config"])["LocationArn"]
            bucket = props["S3BucketArn"].split(":::", 1)[-1]
            return arn, {"LocationArn": arn, "LocationUri": f"s3://{bucket}{subdirectory}"}
        # AWS::DataSync::LocationEFS: moto has no CreateLocationEfs; the location is added to its backend.
        from moto.datasync.models import Location, datasync_backends
        backend = datasync_backends[self.env.account][self.env.region]
        file_system = props["EfsFilesystemArn"].rsplit("/", 1)[-1]
        uri = f"efs://{self.env.region}.{file_system}{props.get('Subdirectory', '/')}"
        backend.arn_counter += 1
        location = Location(uri, region_name=self.env.region, typ="EFS", metadata=props, arn_counter=backend.arn_counter)
        backend.locations[location.arn] = location
        return location.arn, {"LocationArn": location.arn, "LocationUri": uri}

    def delete(self, resource):
        try:
            self.client("datasync").delete_location(LocationArn=resource.physical_id)
        except Exception:  # noqa: BLE001
            pass


def task_options(options: dict | None) -> dict:
    """A task's Options as DataSync accepts them (patches/services.py datasync_options), refused as CloudFormation
    fails a resource."""
    from ...patches.services import datasync_options
    try:
        return datasync_options(options)
    except ValueError as err:
        raise ResourceFailed(str(err)) from None


class DataSyncTask(Provider):
    name_property = None
    replace_on = ("SourceLocationArn", "DestinationLocationArn")

    def create(self, logical_id, kind, props, *, stack):
        kwargs = {"SourceLocationArn": props["SourceLocationArn"], "DestinationLocationArn": props["DestinationLocationArn"],
                  "Options": task_options(props.get("Options"))}
        if props.get("Name"):
            kwargs["Name"] = props["Name"]
        if props.get("CloudWatchLogGroupArn"):
            kwargs["CloudWatchLogGroupArn"] = props["CloudWatchLogGroupArn"]
        arn = self.client("datasync").create_task(**kwargs)["TaskArn"]
        return arn, {"TaskArn": arn}

    def update(self, old, props):
        kwargs = {"TaskArn": old.physical_id, "Options": task_options(props.get("Options"))}
        if props.get("Name"):
            kwargs["Name"] = props["Name"]
        if props.get("CloudWatchLogGroupArn"):
            kwargs["CloudWatchLogGroupArn"] = props["CloudWatchLogGroupArn"]
        self.client("datasync").update_task(**kwargs)
        return old.physical_id, old.attributes

    def delete(self, resource):
        self.client("datasync").delete_task(TaskArn=resource.physical_id)
