"""How the Core stack hands values to the FSx and workflow stacks: SSM parameters, not exports.

Core writes each value to ``/datasourcelab/core/<key>``; the other stacks read it at deploy time as a
CloudFormation parameter of type ``AWS::SSM::Parameter::Value<String>`` ("CloudFormation ... retrieves
the value from Parameter Store" at every create and update:
https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/parameters-section-structure.html#aws-ssm-parameter-types).
The CDK CLI redeploys a stack with such parameters every time, since their values may have changed
(aws-cdk-cli, deploy-stack.ts: "some parameters come from SSM so we have to assume they may have changed").
With no export, CloudFormation never refuses a Core change that another stack depends on, so turning
S3 Express off or moving the zone deploys in one step; the stacks still deploy in order (Core first).
"""

from __future__ import annotations

from aws_cdk import aws_ssm as ssm
from constructs import Construct

from dslab.core.requests import core_parameter


class CoreHandoff(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, values: dict[str, str]) -> None:
        super().__init__(scope, construct_id)
        for key, value in values.items():
            ssm.StringParameter(self, key, parameter_name=core_parameter(key), string_value=value,
                                description=f"DataSourceLab Core: {key}, read by the FSx and workflow stacks at deploy time")


def from_core(scope: Construct, key: str) -> str:
    """A Core value in another stack (resolved by CloudFormation at each deployment)."""
    return ssm.StringParameter.value_for_string_parameter(scope, core_parameter(key))
