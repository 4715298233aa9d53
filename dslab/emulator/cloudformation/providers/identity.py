"""SSM parameters, IAM roles and policies, CloudWatch Logs groups and resource policies."""

from __future__ import annotations

import json
from typing import Any

from ..model import ResourceFailed
from .base import Provider


class SsmParameter(Provider):
    name_property = "Name"
    replace_on = ("Name",)

    def create(self, logical_id, kind, props, *, stack):
        ssm = self.client("ssm")
        name = props.get("Name") or f"CFN-{logical_id}-{self.token(f'{stack.name}/{logical_id}')}"
        self.refuse_if_taken(kind, name, lambda: ssm.get_parameter(Name=name))
        ssm.put_parameter(Name=name, Value=str(props["Value"]), Type=props.get("Type", "String"),
                          Description=props.get("Description", ""))
        return name, {"Type": props.get("Type", "String"), "Value": str(props["Value"])}

    def update(self, old, props):
        self.client("ssm").put_parameter(Name=old.physical_id, Value=str(props["Value"]), Type=props.get("Type", "String"),
                                         Overwrite=True)
        return old.physical_id, {"Type": props.get("Type", "String"), "Value": str(props["Value"])}

    def delete(self, resource):
        self.unless_gone(self.client("ssm").delete_parameter, Name=resource.physical_id)


class Role(Provider):
    name_property = "RoleName"
    replace_on = ("RoleName", "Path")

    def create(self, logical_id, kind, props, *, stack):
        iam = self.client("iam")
        name = props.get("RoleName") or self.generated_name(stack.name, logical_id, 64)
        kwargs = {k: props[k] for k in ("Path", "Description", "PermissionsBoundary", "MaxSessionDuration") if k in props}
        if "Tags" in props:
            kwargs["Tags"] = props["Tags"]
        role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(props["AssumeRolePolicyDocument"]), **kwargs)["Role"]
        self._policies(name, props, {})
        return name, {"Arn": role["Arn"], "RoleId": role["RoleId"]}

    def _policies(self, name: str, props: dict[str, Any], old: dict[str, Any]) -> None:
        iam = self.client("iam")
        for policy in old.get("Policies", []):
            iam.delete_role_policy(RoleName=name, PolicyName=policy["PolicyName"])
        for policy in props.get("Policies", []):
            iam.put_role_policy(RoleName=name, PolicyName=policy["PolicyName"], PolicyDocument=json.dumps(policy["PolicyDocument"]))
        for arn in set(old.get("ManagedPolicyArns", [])) - set(props.get("ManagedPolicyArns", [])):
            iam.detach_role_policy(RoleName=name, PolicyArn=arn)
        for arn in set(props.get("ManagedPolicyArns", [])) - set(old.get("ManagedPolicyArns", [])):
            if arn.startswith("arn:aws:iam::aws:policy/"):
                self.env.aws_managed_policy(arn)
            iam.attach_role_policy(RoleName=name, PolicyArn=arn)

    def update(self, old, props):
        iam = self.client("iam")
        iam.update_assume_role_policy(RoleName=old.physical_id, PolicyDocument=json.dumps(props["AssumeRolePolicyDocument"]))
        self._policies(old.physical_id, props, old.properties)
        return old.physical_id, old.attributes

    def delete(self, resource):
        iam = self.client("iam")
        name = resource.physical_id
        try:
            for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
                iam.delete_role_policy(RoleName=name, PolicyName=policy)
            for policy in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
                iam.detach_role_policy(RoleName=name, PolicyArn=policy["PolicyArn"])
            iam.delete_role(RoleName=name)
        except iam.exceptions.NoSuchEntityException:
            pass


class Policy(Provider):
    """AWS::IAM::Policy: an inline policy on each of its roles (what CloudFormation does)."""
    replace_on = ("PolicyName",)

    def create(self, logical_id, kind, props, *, stack):
        self._put(props)
        return f"{stack.name[:5]}-{logical_id[:4]}-{self.token(f'{stack.name}/{logical_id}')}", {"Id": logical_id}

    def _put(self, props):
        for role in props.get("Roles", []):
            self.client("iam").put_role_policy(RoleName=role, PolicyName=props["PolicyName"],
                                               PolicyDocument=json.dumps(props["PolicyDocument"]))

    def update(self, old, props):
        for role in set(old.properties.get("Roles", [])) - set(props.get("Roles", [])):
            self._delete_from(role, old.properties["PolicyName"])
        self._put(props)
        return old.physical_id, old.attributes

    def _delete_from(self, role: str, name: str) -> None:
        try:
            self.client("iam").delete_role_policy(RoleName=role, PolicyName=name)
        except Exception:  # noqa: BLE001 - the role went first
            pass

    def delete(self, resource):
        for role in resource.properties.get("Roles", []):
            self._delete_from(role, resource.properties["PolicyName"])


class ManagedPolicy(Provider):
    name_property = "ManagedPolicyName"
    replace_on = ("ManagedPolicyName", "Path")

    def create(self, logical_id, kind, props, *, stack):
        iam = self.client("iam")
        name = props.get("ManagedPolicyName") or self.generated_name(stack.name, logical_id, 128)
        arn = iam.create_policy(PolicyName=name, PolicyDocument=json.dumps(props["PolicyDocument"]),
                                Path=props.get("Path", "/"))["Policy"]["Arn"]
        for role in props.get("Roles", []):
            iam.attach_role_policy(RoleName=role, PolicyArn=arn)
        return arn, {"PolicyArn": arn}

    def delete(self, resource):
        iam = self.client("iam")
        for role in resource.properties.get("Roles", []):
            try:
                iam.detach_role_policy(RoleName=role, PolicyArn=resource.physical_id)
            except Exception:  # noqa: BLE001
                pass
        iam.delete_policy(PolicyArn=resource.physical_id)


class LogGroup(Provider):
    name_property = "LogGroupName"
    replace_on = ("LogGroupName",)

    def create(self, logical_id, kind, props, *, stack):
        logs = self.client("logs")
        name = props.get("LogGroupName") or self.generated_name(stack.name, logical_id, 512)
        self.refuse_if_taken(kind, name, lambda: any(
            g["logGroupName"] == name for g in logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"]))
        logs.create_log_group(logGroupName=name)
        if props.get("RetentionInDays"):
            logs.put_retention_policy(logGroupName=name, retentionInDays=int(props["RetentionInDays"]))
        return name, {"Arn": f"arn:aws:logs:{self.env.region}:{self.env.account}:log-group:{name}:*"}

    def delete(self, resource):
        self.unless_gone(self.client("logs").delete_log_group, logGroupName=resource.physical_id)


class LogsResourcePolicy(Provider):
    """AWS::Logs::ResourcePolicy: the account's region holds at most 10 (the stand-in refuses an 11th
    with LimitExceededException, as CloudWatch Logs does)."""
    name_property = "PolicyName"
    replace_on = ("PolicyName",)

    def create(self, logical_id, kind, props, *, stack):
        self.client("logs").put_resource_policy(policyName=props["PolicyName"], policyDocument=props["PolicyDocument"])
        return props["PolicyName"], {}

    def update(self, old, props):
        self.client("logs").put_resource_policy(policyName=old.physical_id, policyDocument=props["PolicyDocument"])
        return old.physical_id, {}

    def delete(self, resource):
        try:
            self.client("logs").delete_resource_policy(policyName=resource.physical_id)
        except Exception:  # noqa: BLE001
            pass
