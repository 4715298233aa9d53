"""Custom resources: a Python handler run from its deployed code asset in its own interpreter, answering through a real
HTTP PUT to its ResponseURL; CDK's built-in Node.js handlers as Python equivalents."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Callable

from ..model import ResourceFailed
from .base import Provider

if TYPE_CHECKING:  # annotations only: the environment imports the providers' helpers
    from .environment import Environment


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



NODE_HANDLERS: dict[str, Callable[[dict[str, Any], Environment], dict[str, Any]]] = {
    "Custom::VpcRestrictDefaultSG": restrict_default_security_group,
    "Custom::S3AutoDeleteObjects": auto_delete_objects,
}


class CustomResource(Provider):
    """A custom resource: CloudFormation sends the event to the ServiceToken function and waits for the
    answer at the ResponseURL (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html).
    A Python function runs from its deployed code, in its own interpreter; a Node.js one of CDK's own as its Python
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
        invocation = self.env.run_python_handler(function, event)
        # A handler that failed without answering never will: CloudFormation waits out its hour for nothing.
        answer = self.env.responses.take(token, timeout=0.5 if invocation.error else 5.0)
        if answer is None:
            failed = f" (the function failed: {invocation.answer.get('errorType')}: " \
                     f"{invocation.answer.get('errorMessage')})" if invocation.error else ""
            raise ResourceFailed(f"CloudFormation did not receive a response from your Custom Resource ({self.kind}). "
                                 f"Please check your logs for requestId{failed}")
        if answer.get("Status") != "SUCCESS":
            raise ResourceFailed(f"Received response status [FAILED] from custom resource. Message returned: {answer.get('Reason', '')}")
        return answer
