"""What the providers reach: the stand-in's clients, IAM propagation, and invoking a custom resource's handler."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ..model import ResourceFailed, now
from .runtime import NameSource, ResponseListener

_AWS_POLICIES: dict[str, Any] | None = None


@dataclass
class Environment:
    """What providers reach: the stand-in's clients, its account and region, and the emulator's models of
    what moto lacks (FSx associations, which zones have S3 Express)."""
    client: Callable[[str], Any]
    account: str = "123456789012"
    region: str = "us-east-1"
    express_zones: set[str] | None = None
    on_fsx_created: Callable[[str, dict], None] = lambda fs, props: None
    on_fsx_deleted: Callable[[str], None] = lambda fs: None
    on_association: Callable[[str, dict], None] = lambda association, props: None
    on_association_deleted: Callable[[str], None] = lambda association: None
    responses: ResponseListener | None = None
    function_env: Callable[[], dict[str, str]] = lambda: {}
    iam_propagation_seconds: float = 0.0       # how long a new role is not yet assumable (stand-in seconds)
    time_scale: Callable[[], float] = lambda: 1.0
    # The wall clock (UTC) of rules that AWS states as a time of day, EFS's 24 hours between throughput changes: not
    # scaled by time_scale, since AWS's answer names the UTC time after which it may ("Wait until ... UTC") and the
    # CLI reads the same from CloudFormation's event times. A test moves a recorded time back instead of waiting.
    clock: Callable[[], Any] = now
    fsx_versions: dict[str, str] = field(default_factory=dict)   # file system ID -> Lustre version (moto keeps none)
    efs_throughput_changes: dict[str, Any] = field(default_factory=dict)   # EFS ID -> its last throughput change (UTC)
    names: NameSource = field(default_factory=NameSource)   # the random parts of generated names, per stand-in

    def check_assumable(self, role_arn: str | None) -> None:
        """A service assuming a role IAM has not propagated yet is refused ("Unable to assume role. Reason:
        Access denied when calling sts:AssumeRole"): the stand-in holds a new role back for
        ``iam_propagation_seconds`` of stand-in time."""
        if not role_arn or self.iam_propagation_seconds <= 0:
            return
        import datetime as dt
        name = role_arn.rsplit("/", 1)[-1]
        try:
            created = self.client("iam").get_role(RoleName=name)["Role"]["CreateDate"]
        except Exception:  # noqa: BLE001 - no such role: the service says so itself
            raise ResourceFailed(f"Unable to assume role {role_arn}: it does not exist") from None
        age = (dt.datetime.now(dt.timezone.utc) - created).total_seconds() / max(self.time_scale(), 1e-9)
        if age < self.iam_propagation_seconds:
            raise ResourceFailed(f"Unable to assume role. Reason: Access denied when calling sts:AssumeRole; "
                                 f"roleArn={role_arn} (created {age:.0f} s ago: IAM has not propagated it yet)")

    def aws_managed_policy(self, arn: str) -> None:
        """An AWS managed policy (AdministratorAccess, say) in the stand-in's IAM: loaded one at a time
        from moto's copy of AWS's policies, instead of all ~1,300 at every start (MOTO_IAM_LOAD_MANAGED_POLICIES)."""
        from moto.iam.models import AWSManagedPolicy, iam_backends
        backend = iam_backends[self.account]["global"]
        if arn in backend.managed_policies:
            return
        name = arn.rsplit("/", 1)[-1]
        data = _aws_policies().get(name)
        if data is None:
            raise ResourceFailed(f"Policy {arn} does not exist or is not attachable.")
        backend.managed_policies[arn] = AWSManagedPolicy.from_data(name, self.account, "us-east-1", data)

    def subnet_users(self, subnet_id: str) -> list[str]:
        """What keeps a subnet from being deleted: EFS mount targets and FSx file systems in it."""
        users = []
        efs = self.client("efs")
        for fs in efs.describe_file_systems().get("FileSystems", []):
            for target in efs.describe_mount_targets(FileSystemId=fs["FileSystemId"]).get("MountTargets", []):
                if target["SubnetId"] == subnet_id:
                    users.append(f"EFS mount target {target['MountTargetId']}")
        for fs in self.client("fsx").describe_file_systems().get("FileSystems", []):
            if subnet_id in fs.get("SubnetIds", []) and fs.get("Lifecycle") != "DELETING":
                users.append(f"FSx file system {fs['FileSystemId']}")
        return users

    def lambda_function(self, arn: str):
        from moto.awslambda.models import lambda_backends
        backend = lambda_backends[self.account][self.region]
        try:
            return backend.get_function(arn)
        except Exception:  # noqa: BLE001
            raise ResourceFailed(f"The custom resource's ServiceToken {arn} is not a function of this account") from None

    def run_python_handler(self, function, event: dict[str, Any]):
        """Invoke a custom resource's Python function from its deployed code, in its own execution environment
        (emulator/functions.py), with the stand-in's additions to its environment; its Invocation."""
        from ...functions import RUNTIME_SERVICE
        return RUNTIME_SERVICE.invoke(function, event, self.function_env())


def _aws_policies() -> dict[str, Any]:
    global _AWS_POLICIES
    if _AWS_POLICIES is None:
        from moto.iam.aws_managed_policies import aws_managed_policies_data
        _AWS_POLICIES = json.loads(aws_managed_policies_data)
    return _AWS_POLICIES
