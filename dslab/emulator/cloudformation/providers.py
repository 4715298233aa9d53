"""How the stand-in's CloudFormation provisions each resource type: through the stand-in's own services
(moto's S3, IAM, EC2, EFS, FSx, Lambda, Step Functions, SSM, Logs, Events, ECR, DataSync), so what a
deployed template makes is what the lab's code then finds by its ID or name.

Where moto lacks a type or an API (FSx data repository associations, DataSync EFS locations, S3 Express
directory buckets, custom resources), the stand-in models it here. Custom resources run their handler
in-process: a Python function's handler from its deployed code asset, answering through a real HTTP
PUT to the ResponseURL; CDK's built-in Node.js handlers as the Python equivalent of what they do.

Each provider names the properties whose change requires replacement ("Update requires: Replacement"
in each type's page of the CloudFormation Template Reference) and the property that gives the resource
a custom name (a custom-named resource cannot be replaced).
"""

from __future__ import annotations

import http.server
import importlib.util
import io
import json
import os
import random
import string
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass
from typing import Any, Callable

from .engine import Resource, ResourceFailed


def _random(n: int = 12) -> str:
    return "".join(random.choices(string.ascii_uppercase + string.digits, k=n))


def generated_name(stack: str, logical_id: str, limit: int = 64, lower: bool = False) -> str:
    """CloudFormation's generated physical names: "<stack>-<logical ID>-<random>", trimmed to the limit."""
    suffix = f"-{_random()}"
    head = f"{stack}-{logical_id}"[: limit - len(suffix)]
    name = head + suffix
    return name.lower() if lower else name


def _error(err: Exception) -> str:
    return getattr(err, "response", {}).get("Error", {}).get("Message") or str(err)


class Provider:
    name_property: str | None = None
    replace_on: tuple[str, ...] = ()      # top-level properties; ("*",) = every property

    def __init__(self, env: "Environment"):
        self.env = env

    def requires_replacement(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        if self.replace_on == ("*",):
            return old != new
        return any(old.get(key) != new.get(key) for key in self.replace_on)

    def create(self, logical_id: str, kind: str, props: dict[str, Any], *, stack) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def update(self, old: Resource, props: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return old.physical_id, old.attributes

    def delete(self, resource: Resource) -> None:
        return None

    def client(self, service: str):
        return self.env.client(service)


class Record(Provider):
    """Types with no behaviour the lab depends on: kept as CloudFormation's record of them."""
    replace_on = ("*",)

    def create(self, logical_id, kind, props, *, stack):
        return f"{logical_id}-{_random(8).lower()}", {}


# ---- S3 ------------------------------------------------------------------------------------------------

class Bucket(Provider):
    name_property = "BucketName"
    replace_on = ("BucketName",)

    def create(self, logical_id, kind, props, *, stack):
        s3 = self.client("s3")
        name = props.get("BucketName") or generated_name(stack.name, logical_id, 63, lower=True)
        try:
            s3.head_bucket(Bucket=name)
            # CreateBucket in us-east-1 answers 200 for a bucket one already owns; CloudFormation does not.
            raise ResourceFailed(f"{name} already exists")
        except ResourceFailed:
            raise
        except Exception:  # noqa: BLE001 - absent: create it
            pass
        kwargs = {} if self.env.region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": self.env.region}}
        s3.create_bucket(Bucket=name, **kwargs)
        self._configure(name, props)
        return name, self._attributes(name)

    def _configure(self, name: str, props: dict[str, Any]) -> None:
        s3 = self.client("s3")
        if props.get("VersioningConfiguration"):
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": props["VersioningConfiguration"]["Status"]})
        if props.get("PublicAccessBlockConfiguration"):
            s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"])
        if props.get("Tags"):
            s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": props["Tags"]})

    def _attributes(self, name: str) -> dict[str, Any]:
        region = self.env.region
        return {"Arn": f"arn:aws:s3:::{name}", "DomainName": f"{name}.s3.amazonaws.com",
                "RegionalDomainName": f"{name}.s3.{region}.amazonaws.com", "DualStackDomainName": f"{name}.s3.dualstack.{region}.amazonaws.com",
                "WebsiteURL": f"http://{name}.s3-website-{region}.amazonaws.com"}

    def update(self, old, props):
        self._configure(old.physical_id, props)
        return old.physical_id, self._attributes(old.physical_id)

    def delete(self, resource):
        s3 = self.client("s3")
        try:
            listed = s3.list_object_versions(Bucket=resource.physical_id, MaxKeys=1)
        except Exception:  # noqa: BLE001 - already gone
            return
        if listed.get("Versions") or listed.get("DeleteMarkers"):
            raise ResourceFailed(f"The bucket you tried to delete is not empty. You must delete all versions in the bucket. "
                                 f"(Bucket: {resource.physical_id})")
        s3.delete_bucket(Bucket=resource.physical_id)


class BucketPolicy(Provider):
    replace_on = ("Bucket",)

    def create(self, logical_id, kind, props, *, stack):
        s3 = self.client("s3")
        bucket = props["Bucket"]
        try:
            s3.get_bucket_policy(Bucket=bucket)
            raise ResourceFailed(f"The bucket policy already exists on bucket {bucket}.")
        except ResourceFailed:
            raise
        except Exception:  # noqa: BLE001 - no policy yet
            pass
        s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(props["PolicyDocument"]))
        return bucket, {}

    def update(self, old, props):
        self.client("s3").put_bucket_policy(Bucket=old.physical_id, Policy=json.dumps(props["PolicyDocument"]))
        return old.physical_id, {}

    def delete(self, resource):
        try:
            self.client("s3").delete_bucket_policy(Bucket=resource.physical_id)
        except Exception:  # noqa: BLE001 - the bucket is gone with it
            pass


class DirectoryBucket(Provider):
    """AWS::S3Express::DirectoryBucket: "<base>--<zone-id>--x-s3" in the stand-in's S3 (listed the way
    AWS lists directory buckets, see patches); only an empty one can be deleted."""
    name_property = "BucketName"
    replace_on = ("BucketName", "LocationName", "DataRedundancy")

    def create(self, logical_id, kind, props, *, stack):
        from .. import patches
        zone = props["LocationName"]
        name = props.get("BucketName") or f"{generated_name(stack.name, logical_id, 63 - len(zone) - 9, lower=True)}--{zone}--x-s3"
        if not name.endswith(f"--{zone}--x-s3"):
            raise ResourceFailed(f"Bucket name {name} must end with --{zone}--x-s3")
        if self.env.express_zones is not None and zone not in self.env.express_zones:
            raise ResourceFailed(f"S3 Express One Zone is not available in Availability Zone {zone}")
        patches.create_directory_bucket(name, self.env.region, self.env.account)
        return name, {"Arn": f"arn:aws:s3express:{self.env.region}:{self.env.account}:bucket/{name}",
                      "AvailabilityZoneName": zone}

    def delete(self, resource):
        s3 = self.client("s3")
        try:
            listed = s3.list_objects_v2(Bucket=resource.physical_id, MaxKeys=1)
        except Exception:  # noqa: BLE001 - already gone
            return
        uploads = s3.list_multipart_uploads(Bucket=resource.physical_id).get("Uploads", [])
        if listed.get("KeyCount", 0) or uploads:
            raise ResourceFailed(f"The bucket you tried to delete is not empty (Bucket: {resource.physical_id})")
        from .. import patches
        patches.delete_directory_bucket(resource.physical_id, self.env.account)


# ---- SSM, IAM, Logs ----------------------------------------------------------------------------------------

class SsmParameter(Provider):
    name_property = "Name"
    replace_on = ("Name",)

    def create(self, logical_id, kind, props, *, stack):
        ssm = self.client("ssm")
        name = props.get("Name") or f"CFN-{logical_id}-{_random()}"
        try:
            ssm.get_parameter(Name=name)
            raise ResourceFailed(f"Resource of type 'AWS::SSM::Parameter' with identifier '{name}' already exists.")
        except ResourceFailed:
            raise
        except Exception:  # noqa: BLE001 - absent
            pass
        ssm.put_parameter(Name=name, Value=str(props["Value"]), Type=props.get("Type", "String"),
                          Description=props.get("Description", ""))
        return name, {"Type": props.get("Type", "String"), "Value": str(props["Value"])}

    def update(self, old, props):
        self.client("ssm").put_parameter(Name=old.physical_id, Value=str(props["Value"]), Type=props.get("Type", "String"),
                                         Overwrite=True)
        return old.physical_id, {"Type": props.get("Type", "String"), "Value": str(props["Value"])}

    def delete(self, resource):
        try:
            self.client("ssm").delete_parameter(Name=resource.physical_id)
        except Exception:  # noqa: BLE001 - already gone
            pass


class Role(Provider):
    name_property = "RoleName"
    replace_on = ("RoleName", "Path")

    def create(self, logical_id, kind, props, *, stack):
        iam = self.client("iam")
        name = props.get("RoleName") or generated_name(stack.name, logical_id, 64)
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
        return f"{stack.name[:5]}-{logical_id[:4]}-{_random()}", {"Id": logical_id}

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
        name = props.get("ManagedPolicyName") or generated_name(stack.name, logical_id, 128)
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
        name = props.get("LogGroupName") or generated_name(stack.name, logical_id, 512)
        if logs.describe_log_groups(logGroupNamePrefix=name).get("logGroups", []) and any(
                g["logGroupName"] == name for g in logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"]):
            raise ResourceFailed(f"Resource of type 'AWS::Logs::LogGroup' with identifier '{name}' already exists.")
        logs.create_log_group(logGroupName=name)
        if props.get("RetentionInDays"):
            logs.put_retention_policy(logGroupName=name, retentionInDays=int(props["RetentionInDays"]))
        return name, {"Arn": f"arn:aws:logs:{self.env.region}:{self.env.account}:log-group:{name}:*"}

    def delete(self, resource):
        try:
            self.client("logs").delete_log_group(logGroupName=resource.physical_id)
        except Exception:  # noqa: BLE001 - already gone
            pass


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


# ---- EC2 -------------------------------------------------------------------------------------------------

class Vpc(Provider):
    replace_on = ("CidrBlock", "InstanceTenancy", "Ipv4IpamPoolId")

    def create(self, logical_id, kind, props, *, stack):
        ec2 = self.client("ec2")
        vpc = ec2.create_vpc(CidrBlock=props["CidrBlock"])["Vpc"]
        vpc_id = vpc["VpcId"]
        group = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc_id]},
                                                      {"Name": "group-name", "Values": ["default"]}])["SecurityGroups"]
        acl = ec2.describe_network_acls(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["NetworkAcls"]
        return vpc_id, {"VpcId": vpc_id, "CidrBlock": props["CidrBlock"], "CidrBlockAssociations": [],
                        "DefaultSecurityGroup": group[0]["GroupId"] if group else "",
                        "DefaultNetworkAcl": acl[0]["NetworkAclId"] if acl else "", "Ipv6CidrBlocks": []}

    def delete(self, resource):
        self.client("ec2").delete_vpc(VpcId=resource.physical_id)


class Subnet(Provider):
    replace_on = ("VpcId", "CidrBlock", "AvailabilityZone", "AvailabilityZoneId", "Ipv6CidrBlock")

    def create(self, logical_id, kind, props, *, stack):
        ec2 = self.client("ec2")
        kwargs = {"VpcId": props["VpcId"], "CidrBlock": props["CidrBlock"]}
        if props.get("AvailabilityZoneId"):
            kwargs["AvailabilityZoneId"] = props["AvailabilityZoneId"]
        elif props.get("AvailabilityZone"):
            kwargs["AvailabilityZone"] = props["AvailabilityZone"]
        subnet = ec2.create_subnet(**kwargs)["Subnet"]
        return subnet["SubnetId"], {"SubnetId": subnet["SubnetId"], "AvailabilityZone": subnet["AvailabilityZone"],
                                    "AvailabilityZoneId": subnet.get("AvailabilityZoneId", props.get("AvailabilityZoneId", "")),
                                    "CidrBlock": subnet["CidrBlock"], "VpcId": subnet["VpcId"],
                                    "NetworkAclAssociationId": "", "Ipv6CidrBlocks": [], "OutpostArn": ""}

    def delete(self, resource):
        # EC2 refuses while anything has a network interface in the subnet: an EFS mount target, an FSx
        # file system, a DataSync or training-job interface ("has dependencies and cannot be deleted").
        users = self.env.subnet_users(resource.physical_id)
        if users:
            raise ResourceFailed(f"The subnet '{resource.physical_id}' has dependencies and cannot be deleted "
                                 f"(Service: Ec2, Status Code: 400, Error Code: DependencyViolation; in use by {', '.join(users)})")
        self.client("ec2").delete_subnet(SubnetId=resource.physical_id)


class RouteTable(Provider):
    replace_on = ("VpcId",)

    def create(self, logical_id, kind, props, *, stack):
        table = self.client("ec2").create_route_table(VpcId=props["VpcId"])["RouteTable"]
        return table["RouteTableId"], {"RouteTableId": table["RouteTableId"]}

    def delete(self, resource):
        self.client("ec2").delete_route_table(RouteTableId=resource.physical_id)


class RouteTableAssociation(Provider):
    replace_on = ("SubnetId",)

    def create(self, logical_id, kind, props, *, stack):
        association = self.client("ec2").associate_route_table(RouteTableId=props["RouteTableId"], SubnetId=props["SubnetId"])
        return association["AssociationId"], {"Id": association["AssociationId"]}

    def delete(self, resource):
        try:
            self.client("ec2").disassociate_route_table(AssociationId=resource.physical_id)
        except Exception:  # noqa: BLE001 - gone with its table
            pass


class VpcEndpoint(Provider):
    replace_on = ("VpcId", "ServiceName", "VpcEndpointType")

    def create(self, logical_id, kind, props, *, stack):
        endpoint = self.client("ec2").create_vpc_endpoint(
            VpcId=props["VpcId"], ServiceName=props["ServiceName"], VpcEndpointType=props.get("VpcEndpointType", "Gateway"),
            RouteTableIds=props.get("RouteTableIds", []))["VpcEndpoint"]
        return endpoint["VpcEndpointId"], {"Id": endpoint["VpcEndpointId"], "CreationTimestamp": "", "DnsEntries": [],
                                           "NetworkInterfaceIds": []}

    def delete(self, resource):
        try:
            self.client("ec2").delete_vpc_endpoints(VpcEndpointIds=[resource.physical_id])
        except Exception as err:  # noqa: BLE001
            # moto knows no prefix list for some gateway services (s3express) and then fails to remove a
            # route it never made; the endpoint is marked deleted in its backend, as EC2 would delete it.
            if "no route with destination" not in str(err):
                raise
            from moto.ec2.models import ec2_backends
            endpoint = ec2_backends[self.env.account][self.env.region].vpc_end_points.get(resource.physical_id)
            if endpoint is not None:
                endpoint.state = "deleted"


class SecurityGroup(Provider):
    name_property = "GroupName"
    replace_on = ("GroupDescription", "GroupName", "VpcId")

    def create(self, logical_id, kind, props, *, stack):
        ec2 = self.client("ec2")
        name = props.get("GroupName") or generated_name(stack.name, logical_id, 255)
        group = ec2.create_security_group(GroupName=name, Description=props["GroupDescription"], VpcId=props["VpcId"])
        group_id = group["GroupId"]
        if "SecurityGroupEgress" in props:  # explicit egress replaces the default allow-all rule
            ec2.revoke_security_group_egress(GroupId=group_id, IpPermissions=[{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])
        for rule in props.get("SecurityGroupEgress", []):
            ec2.authorize_security_group_egress(GroupId=group_id, IpPermissions=[_permission(rule, "DestinationSecurityGroupId")])
        for rule in props.get("SecurityGroupIngress", []):
            ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=[_permission(rule, "SourceSecurityGroupId")])
        return group_id, {"GroupId": group_id, "VpcId": props["VpcId"]}

    def delete(self, resource):
        self.client("ec2").delete_security_group(GroupId=resource.physical_id)


def _permission(rule: dict[str, Any], peer_key: str) -> dict[str, Any]:
    permission: dict[str, Any] = {"IpProtocol": str(rule.get("IpProtocol", "-1"))}
    if "FromPort" in rule:
        permission["FromPort"] = int(rule["FromPort"])
    if "ToPort" in rule:
        permission["ToPort"] = int(rule["ToPort"])
    if rule.get(peer_key):
        permission["UserIdGroupPairs"] = [{"GroupId": rule[peer_key], "Description": rule.get("Description", "")}]
    elif rule.get("CidrIp"):
        permission["IpRanges"] = [{"CidrIp": rule["CidrIp"], "Description": rule.get("Description", "")}]
    return permission


class SecurityGroupRule(Provider):
    replace_on = ("*",)

    def __init__(self, env, direction: str):
        super().__init__(env)
        self.direction = direction

    def create(self, logical_id, kind, props, *, stack):
        ec2 = self.client("ec2")
        peer = "SourceSecurityGroupId" if self.direction == "ingress" else "DestinationSecurityGroupId"
        call = ec2.authorize_security_group_ingress if self.direction == "ingress" else ec2.authorize_security_group_egress
        call(GroupId=props["GroupId"], IpPermissions=[_permission(props, peer)])
        return f"{props['GroupId']}-{self.direction}-{_random(8).lower()}", {}

    def delete(self, resource):
        ec2 = self.client("ec2")
        peer = "SourceSecurityGroupId" if self.direction == "ingress" else "DestinationSecurityGroupId"
        call = ec2.revoke_security_group_ingress if self.direction == "ingress" else ec2.revoke_security_group_egress
        try:
            call(GroupId=resource.properties["GroupId"], IpPermissions=[_permission(resource.properties, peer)])
        except Exception:  # noqa: BLE001 - the group went first
            pass


class FlowLog(Provider):
    replace_on = ("*",)

    def create(self, logical_id, kind, props, *, stack):
        kwargs = {"ResourceIds": [props["ResourceId"]], "ResourceType": props["ResourceType"],
                  "TrafficType": props.get("TrafficType", "ALL"), "LogDestinationType": props.get("LogDestinationType", "cloud-watch-logs")}
        if props.get("LogGroupName"):
            kwargs["LogGroupName"] = props["LogGroupName"]
        if props.get("DeliverLogsPermissionArn"):
            kwargs["DeliverLogsPermissionArn"] = props["DeliverLogsPermissionArn"]
        ids = self.client("ec2").create_flow_logs(**kwargs)["FlowLogIds"]
        return ids[0], {"Id": ids[0]}

    def delete(self, resource):
        self.client("ec2").delete_flow_logs(FlowLogIds=[resource.physical_id])


# ---- EFS, FSx, DataSync -----------------------------------------------------------------------------

class EfsFileSystem(Provider):
    replace_on = ("PerformanceMode", "Encrypted", "KmsKeyId", "AvailabilityZoneName")

    def create(self, logical_id, kind, props, *, stack):
        efs = self.client("efs")
        kwargs = {"CreationToken": f"{stack.name}-{logical_id}-{uuid.uuid4()}",
                  "PerformanceMode": props.get("PerformanceMode", "generalPurpose"),
                  "Encrypted": bool(props.get("Encrypted", False)), "ThroughputMode": props.get("ThroughputMode", "bursting")}
        if props.get("ProvisionedThroughputInMibps"):
            kwargs["ProvisionedThroughputInMibps"] = float(props["ProvisionedThroughputInMibps"])
        fs = efs.create_file_system(**kwargs)
        if props.get("FileSystemPolicy"):
            efs.put_file_system_policy(FileSystemId=fs["FileSystemId"], Policy=json.dumps(props["FileSystemPolicy"]))
        return fs["FileSystemId"], {"FileSystemId": fs["FileSystemId"], "Arn": fs["FileSystemArn"]}

    def update(self, old, props):
        if props.get("FileSystemPolicy"):
            self.client("efs").put_file_system_policy(FileSystemId=old.physical_id, Policy=json.dumps(props["FileSystemPolicy"]))
        return old.physical_id, old.attributes

    def delete(self, resource):
        self.client("efs").delete_file_system(FileSystemId=resource.physical_id)


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


class FsxFileSystem(Provider):
    replace_on = ("FileSystemType", "SubnetIds", "SecurityGroupIds", "FileSystemTypeVersion", "KmsKeyId", "StorageType")

    def requires_replacement(self, old, new):
        if super().requires_replacement(old, new):
            return True
        lustre_old, lustre_new = old.get("LustreConfiguration", {}), new.get("LustreConfiguration", {})
        return any(lustre_old.get(k) != lustre_new.get(k) for k in ("DeploymentType", "ImportPath", "ExportPath"))

    def create(self, logical_id, kind, props, *, stack):
        kwargs = {"FileSystemType": props["FileSystemType"], "StorageCapacity": int(props["StorageCapacity"]),
                  "SubnetIds": props["SubnetIds"], "SecurityGroupIds": props.get("SecurityGroupIds", []),
                  "LustreConfiguration": {k: v for k, v in props.get("LustreConfiguration", {}).items()}}
        if props.get("FileSystemTypeVersion"):
            kwargs["FileSystemTypeVersion"] = props["FileSystemTypeVersion"]
        fs = self.client("fsx").create_file_system(**kwargs)["FileSystem"]
        mount = fs.get("LustreConfiguration", {}).get("MountName") or _random(8).lower()
        self.env.on_fsx_created(fs["FileSystemId"], props)
        return fs["FileSystemId"], {"LustreMountName": mount, "DNSName": fs.get("DNSName", f"{fs['FileSystemId']}.fsx.{self.env.region}.amazonaws.com"),
                                    "ResourceARN": fs.get("ResourceARN", "")}

    def delete(self, resource):
        self.client("fsx").delete_file_system(FileSystemId=resource.physical_id)
        self.env.on_fsx_deleted(resource.physical_id)


class DataRepositoryAssociation(Provider):
    """AWS::FSx::DataRepositoryAssociation (moto has none): the association and, with
    BatchImportMetaDataOnCreate, its S3 metadata import task, which the stand-in's FSx answers through
    DescribeDataRepositoryAssociations / DescribeDataRepositoryTasks (patches)."""
    replace_on = ("FileSystemId", "FileSystemPath", "DataRepositoryPath", "BatchImportMetaDataOnCreate")

    def create(self, logical_id, kind, props, *, stack):
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


class DataSyncTask(Provider):
    name_property = None
    replace_on = ("SourceLocationArn", "DestinationLocationArn")

    def create(self, logical_id, kind, props, *, stack):
        kwargs = {"SourceLocationArn": props["SourceLocationArn"], "DestinationLocationArn": props["DestinationLocationArn"]}
        if props.get("Name"):
            kwargs["Name"] = props["Name"]
        if props.get("CloudWatchLogGroupArn"):
            kwargs["CloudWatchLogGroupArn"] = props["CloudWatchLogGroupArn"]
        arn = self.client("datasync").create_task(**kwargs)["TaskArn"]
        return arn, {"TaskArn": arn}

    def delete(self, resource):
        self.client("datasync").delete_task(TaskArn=resource.physical_id)


# ---- Lambda, Step Functions, Events, ECR ---------------------------------------------------------------

class LambdaFunction(Provider):
    name_property = "FunctionName"
    replace_on = ("FunctionName",)

    def create(self, logical_id, kind, props, *, stack):
        name = props.get("FunctionName") or generated_name(stack.name, logical_id, 64)
        kwargs = self._config(props)
        code = props["Code"]
        kwargs["Code"] = ({"ZipFile": _zip_inline(code["ZipFile"])} if "ZipFile" in code else
                          {"S3Bucket": code["S3Bucket"], "S3Key": code["S3Key"]})
        function = _retry_iam(lambda: self.client("lambda").create_function(FunctionName=name, **kwargs))
        return name, {"Arn": function["FunctionArn"]}

    @staticmethod
    def _config(props: dict[str, Any]) -> dict[str, Any]:
        kwargs = {"Role": props["Role"], "Handler": props.get("Handler", "index.handler"),
                  "Runtime": props.get("Runtime", "python3.12"), "Timeout": int(props.get("Timeout", 3)),
                  "MemorySize": int(props.get("MemorySize", 128)), "Description": props.get("Description", ""),
                  "Environment": {"Variables": {k: str(v) for k, v in props.get("Environment", {}).get("Variables", {}).items()}}}
        if props.get("TracingConfig"):
            kwargs["TracingConfig"] = props["TracingConfig"]
        return kwargs

    def update(self, old, props):
        lam = self.client("lambda")
        lam.update_function_configuration(FunctionName=old.physical_id, **self._config(props))
        code = props["Code"]
        if code != old.properties.get("Code"):
            if "ZipFile" in code:
                lam.update_function_code(FunctionName=old.physical_id, ZipFile=_zip_inline(code["ZipFile"]))
            else:
                lam.update_function_code(FunctionName=old.physical_id, S3Bucket=code["S3Bucket"], S3Key=code["S3Key"])
        return old.physical_id, old.attributes

    def delete(self, resource):
        self.client("lambda").delete_function(FunctionName=resource.physical_id)


def _zip_inline(source: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.py", source)
    return buffer.getvalue()


def _retry_iam(call: Callable[[], Any]) -> Any:
    """Lambda refuses a role IAM has not propagated yet ("The role defined for the function cannot be
    assumed by Lambda"); CloudFormation's handler retries, so does this one (the stand-in's IAM is instant)."""
    return call()


class StateMachine(Provider):
    name_property = "StateMachineName"
    replace_on = ("StateMachineName", "StateMachineType")

    def create(self, logical_id, kind, props, *, stack):
        name = props.get("StateMachineName") or generated_name(stack.name, logical_id, 80)
        definition = props.get("DefinitionString") or json.dumps(props.get("Definition", {}))
        arn = self.client("stepfunctions").create_state_machine(
            name=name, definition=definition, roleArn=props["RoleArn"], type=props.get("StateMachineType", "STANDARD"))["stateMachineArn"]
        return arn, {"Arn": arn, "Name": name}

    def update(self, old, props):
        definition = props.get("DefinitionString") or json.dumps(props.get("Definition", {}))
        self.client("stepfunctions").update_state_machine(stateMachineArn=old.physical_id, definition=definition,
                                                          roleArn=props["RoleArn"])
        return old.physical_id, old.attributes

    def delete(self, resource):
        self.client("stepfunctions").delete_state_machine(stateMachineArn=resource.physical_id)


class EventsRule(Provider):
    name_property = "Name"
    replace_on = ("Name", "EventBusName")

    def create(self, logical_id, kind, props, *, stack):
        name = props.get("Name") or generated_name(stack.name, logical_id, 64)
        self._put(name, props)
        return name, {"Arn": f"arn:aws:events:{self.env.region}:{self.env.account}:rule/{name}"}

    def _put(self, name: str, props: dict[str, Any]) -> None:
        events = self.client("events")
        kwargs = {"Name": name, "State": props.get("State", "ENABLED")}
        if props.get("ScheduleExpression"):
            kwargs["ScheduleExpression"] = props["ScheduleExpression"]
        if props.get("EventPattern"):
            kwargs["EventPattern"] = json.dumps(props["EventPattern"])
        events.put_rule(**kwargs)
        if props.get("Targets"):
            events.put_targets(Rule=name, Targets=[{"Id": t["Id"], "Arn": t["Arn"], **({"Input": t["Input"]} if "Input" in t else {})}
                                                   for t in props["Targets"]])

    def update(self, old, props):
        self._put(old.physical_id, props)
        return old.physical_id, old.attributes

    def delete(self, resource):
        events = self.client("events")
        targets = [t["Id"] for t in resource.properties.get("Targets", [])]
        if targets:
            events.remove_targets(Rule=resource.physical_id, Ids=targets)
        events.delete_rule(Name=resource.physical_id)


class EcrRepository(Provider):
    name_property = "RepositoryName"
    replace_on = ("RepositoryName",)

    def create(self, logical_id, kind, props, *, stack):
        name = props.get("RepositoryName") or generated_name(stack.name, logical_id, 256, lower=True)
        repo = self.client("ecr").create_repository(repositoryName=name)["repository"]
        return name, {"Arn": repo["repositoryArn"], "RepositoryUri": repo["repositoryUri"]}

    def delete(self, resource):
        self.client("ecr").delete_repository(repositoryName=resource.physical_id, force=True)


# ---- custom resources --------------------------------------------------------------------------------------

class _ResponseListener:
    """Where custom-resource handlers send their answer (CloudFormation's pre-signed ResponseURL): a
    loopback HTTP server that takes the PUT, as S3 would."""

    def __init__(self):
        self.answers: dict[str, dict[str, Any]] = {}
        self.arrived = threading.Condition()
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                token = self.path.rsplit("/", 1)[-1]
                with listener.arrived:
                    listener.answers[token] = json.loads(body or b"{}")
                    listener.arrived.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="cfn-response")
        self.thread.start()

    def url(self, token: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/cfn-response/{token}"

    def take(self, token: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while token not in self.answers:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.arrived.wait(left)
            return self.answers.pop(token)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _LambdaContext:
    def __init__(self, name: str, timeout: int):
        self.function_name, self.aws_request_id = name, str(uuid.uuid4())
        self.log_stream_name = f"2026/11/30/[$LATEST]{uuid.uuid4().hex}"
        self._deadline = time.monotonic() + timeout

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def restrict_default_security_group(event: dict[str, Any], env: "Environment") -> dict[str, Any]:
    """CDK's Custom::VpcRestrictDefaultSG (a Node.js handler in aws-cdk-lib): removes every ingress and
    egress rule of the VPC's default security group on create, and puts them back on delete."""
    ec2 = env.client("ec2")
    group = event["ResourceProperties"]["DefaultSecurityGroupId"]
    ingress = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}]
    egress = [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
    if event["RequestType"] == "Create":
        for call, rules in ((ec2.revoke_security_group_ingress, ingress), (ec2.revoke_security_group_egress, egress)):
            try:
                call(GroupId=group, IpPermissions=rules)
            except Exception:  # noqa: BLE001 - already absent
                pass
    elif event["RequestType"] == "Delete":
        for call, rules in ((ec2.authorize_security_group_ingress, ingress), (ec2.authorize_security_group_egress, egress)):
            try:
                call(GroupId=group, IpPermissions=rules)
            except Exception:  # noqa: BLE001 - the group is gone with its VPC
                pass
    return {"PhysicalResourceId": event.get("PhysicalResourceId") or group, "Data": {}}


def auto_delete_objects(event: dict[str, Any], env: "Environment") -> dict[str, Any]:
    """CDK's Custom::S3AutoDeleteObjects (Node.js in aws-cdk-lib): empties the bucket (every version)
    when the resource is deleted, so CloudFormation can delete the bucket."""
    bucket = event["ResourceProperties"]["BucketName"]
    if event["RequestType"] == "Delete":
        s3 = env.client("s3")
        try:
            for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
                items = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
                if items:
                    s3.delete_objects(Bucket=bucket, Delete={"Objects": items})
        except Exception:  # noqa: BLE001 - the bucket is already gone
            pass
    return {"PhysicalResourceId": event.get("PhysicalResourceId") or bucket, "Data": {}}


NODE_HANDLERS: dict[str, Callable[[dict[str, Any], "Environment"], dict[str, Any]]] = {
    "Custom::VpcRestrictDefaultSG": restrict_default_security_group,
    "Custom::S3AutoDeleteObjects": auto_delete_objects,
}


class CustomResource(Provider):
    """A custom resource: CloudFormation sends the event to the ServiceToken function and waits for the
    answer at the ResponseURL (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html).
    A Python function runs in-process from its deployed code; a Node.js one of CDK's own as its Python
    equivalent (NODE_HANDLERS); any other fails, naming it."""
    replace_on = ("ServiceToken",)   # CloudFormation refuses to change it ("Modifying service token is not allowed")

    def __init__(self, env, kind: str):
        super().__init__(env)
        self.kind = kind

    def requires_replacement(self, old, new):
        if old.get("ServiceToken") != new.get("ServiceToken"):
            raise ResourceFailed("Modifying service token is not allowed.")
        return False

    def create(self, logical_id, kind, props, *, stack):
        answer = self._invoke("Create", logical_id, props, None, None, stack)
        return answer["PhysicalResourceId"], {**answer.get("Data", {})}

    def update(self, old, props, *, stack=None):
        answer = self._invoke("Update", old.logical_id, props, old.properties, old.physical_id, stack)
        return answer["PhysicalResourceId"], {**answer.get("Data", {})}

    def delete(self, resource, *, stack=None):
        self._invoke("Delete", resource.logical_id, resource.properties, None, resource.physical_id, stack)

    def _invoke(self, request: str, logical_id: str, props: dict[str, Any], old: dict[str, Any] | None,
                physical: str | None, stack) -> dict[str, Any]:
        token = uuid.uuid4().hex
        event = {"RequestType": request, "ServiceToken": props.get("ServiceToken"), "ResponseURL": self.env.responses.url(token),
                 "StackId": stack.stack_id if stack else "", "RequestId": str(uuid.uuid4()), "LogicalResourceId": logical_id,
                 "ResourceType": self.kind, "ResourceProperties": props}
        if physical:
            event["PhysicalResourceId"] = physical
        if old is not None:
            event["OldResourceProperties"] = old
        if self.kind in NODE_HANDLERS:
            return NODE_HANDLERS[self.kind](event, self.env)
        function = self.env.lambda_function(props.get("ServiceToken", ""))
        self.env.run_python_handler(function, event)
        answer = self.env.responses.take(token, timeout=5.0)
        if answer is None:
            raise ResourceFailed(f"CloudFormation did not receive a response from your Custom Resource ({self.kind}). "
                                 "Please check your logs for requestId")
        if answer.get("Status") != "SUCCESS":
            raise ResourceFailed(f"Received response status [FAILED] from custom resource. Message returned: {answer.get('Reason', '')}")
        return answer


# ---- the registry ------------------------------------------------------------------------------------------

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
    responses: _ResponseListener | None = None
    function_env: Callable[[], dict[str, str]] = lambda: {}
    iam_propagation_seconds: float = 0.0       # how long a new role is not yet assumable (stand-in seconds)
    time_scale: Callable[[], float] = lambda: 1.0

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

    def run_python_handler(self, function, event: dict[str, Any]) -> None:
        runtime = getattr(function, "run_time", "") or ""
        if not runtime.startswith("python"):
            raise ResourceFailed(f"the stand-in runs Python custom-resource handlers only; {function.function_name} is {runtime}")
        module_name, func_name = function.handler.rsplit(".", 1)
        with tempfile.TemporaryDirectory(prefix="dslab-cr-") as folder:
            with zipfile.ZipFile(io.BytesIO(function.code_bytes)) as archive:
                archive.extractall(folder)
            path = os.path.join(folder, *module_name.split(".")) + ".py"
            spec = importlib.util.spec_from_file_location(f"dslab_cr_{uuid.uuid4().hex}", path)
            module = importlib.util.module_from_spec(spec)
            sys.path.insert(0, folder)
            try:
                spec.loader.exec_module(module)
                variables = {**self.function_env(), **dict(getattr(function, "environment_vars", {}) or {})}
                with _process_environment(variables):
                    getattr(module, func_name)(event, _LambdaContext(function.function_name, int(function.timeout or 3)))
            finally:
                sys.path.remove(folder)


_ENV_LOCK = threading.Lock()


def _aws_policies() -> dict[str, Any]:
    global _AWS_POLICIES
    if _AWS_POLICIES is None:
        from moto.iam.aws_managed_policies import aws_managed_policies_data
        _AWS_POLICIES = json.loads(aws_managed_policies_data)
    return _AWS_POLICIES


_AWS_POLICIES: dict[str, Any] | None = None


class _process_environment:
    """A custom-resource handler's boto3 reads os.environ: set its variables while it runs."""

    def __init__(self, variables: dict[str, str]):
        self.variables, self.saved = variables, {}

    def __enter__(self):
        _ENV_LOCK.acquire()
        for key, value in self.variables.items():
            self.saved[key] = os.environ.get(key)
            os.environ[key] = str(value)

    def __exit__(self, *exc):
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _ENV_LOCK.release()


RECORDED = ("AWS::CDK::Metadata", "AWS::Lambda::Permission", "AWS::KMS::Key", "AWS::KMS::Alias")


class Providers:
    def __init__(self, env: Environment):
        self.env = env
        simple: dict[str, type[Provider]] = {
            "AWS::S3::Bucket": Bucket, "AWS::S3::BucketPolicy": BucketPolicy, "AWS::S3Express::DirectoryBucket": DirectoryBucket,
            "AWS::SSM::Parameter": SsmParameter, "AWS::IAM::Role": Role, "AWS::IAM::Policy": Policy,
            "AWS::IAM::ManagedPolicy": ManagedPolicy, "AWS::Logs::LogGroup": LogGroup,
            "AWS::Logs::ResourcePolicy": LogsResourcePolicy, "AWS::EC2::VPC": Vpc, "AWS::EC2::Subnet": Subnet,
            "AWS::EC2::RouteTable": RouteTable, "AWS::EC2::SubnetRouteTableAssociation": RouteTableAssociation,
            "AWS::EC2::VPCEndpoint": VpcEndpoint, "AWS::EC2::SecurityGroup": SecurityGroup, "AWS::EC2::FlowLog": FlowLog,
            "AWS::EFS::FileSystem": EfsFileSystem, "AWS::EFS::MountTarget": EfsMountTarget,
            "AWS::FSx::FileSystem": FsxFileSystem, "AWS::FSx::DataRepositoryAssociation": DataRepositoryAssociation,
            "AWS::DataSync::LocationS3": DataSyncLocation, "AWS::DataSync::LocationEFS": DataSyncLocation,
            "AWS::DataSync::Task": DataSyncTask, "AWS::Lambda::Function": LambdaFunction,
            "AWS::StepFunctions::StateMachine": StateMachine, "AWS::Events::Rule": EventsRule,
            "AWS::ECR::Repository": EcrRepository,
        }
        self._providers: dict[str, Provider] = {kind: cls(env) for kind, cls in simple.items()}
        self._providers["AWS::EC2::SecurityGroupIngress"] = SecurityGroupRule(env, "ingress")
        self._providers["AWS::EC2::SecurityGroupEgress"] = SecurityGroupRule(env, "egress")
        for kind in RECORDED:
            self._providers[kind] = Record(env)

    def for_type(self, kind: str) -> Provider:
        if kind in self._providers:
            return self._providers[kind]
        if kind.startswith("Custom::") or kind == "AWS::CloudFormation::CustomResource":
            return self._providers.setdefault(kind, CustomResource(self.env, kind))
        raise ResourceFailed(f"Unrecognized resource types: [{kind}] (the stand-in does not model this type)")

    def known(self, kind: str) -> bool:
        return kind in self._providers or kind.startswith("Custom::") or kind == "AWS::CloudFormation::CustomResource"
