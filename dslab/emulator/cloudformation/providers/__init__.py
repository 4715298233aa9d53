"""How the stand-in's CloudFormation provisions each resource type: through the stand-in's own services
(moto's S3, IAM, EC2, EFS, FSx, Lambda, Step Functions, SSM, Logs, Events, ECR, DataSync), so what a
deployed template makes is what the lab's code then finds by its ID or name.

Where moto lacks a type or an API (FSx data repository associations, DataSync EFS locations, S3 Express
directory buckets, custom resources), the stand-in models it here. Custom resources run their handler
in-process: a Python function's handler from its deployed code asset, answering through a real HTTP
PUT to the ResponseURL; CDK's built-in Node.js handlers as the Python equivalent of what they do.

Each provider names the properties whose change requires replacement ("Update requires: Replacement"
in each type's page of the CloudFormation Template Reference) and the property that gives the resource
a custom name (a custom-named resource cannot be replaced)."""

from __future__ import annotations

from ..model import ResourceFailed
from .base import Provider, Record
from .compute import EcrRepository, EventsRule, LambdaFunction, StateMachine
from .custom import CustomResource
from .environment import Environment
from .file_systems import (DataRepositoryAssociation, DataSyncLocation, DataSyncTask, EfsFileSystem, EfsMountTarget,
                           FsxFileSystem)
from .identity import LogGroup, LogsResourcePolicy, ManagedPolicy, Policy, Role, SsmParameter
from .network import FlowLog, RouteTable, RouteTableAssociation, SecurityGroup, SecurityGroupRule, Subnet, Vpc, VpcEndpoint
from .runtime import NameSource, ResponseListener
from .s3 import Bucket, BucketPolicy, DirectoryBucket, DirectoryBucketPolicy

__all__ = ["Environment", "NameSource", "Provider", "Providers", "ResponseListener"]

RECORDED = ("AWS::CDK::Metadata", "AWS::Lambda::Permission", "AWS::KMS::Key", "AWS::KMS::Alias")


class Providers:
    """The provider of each resource type the lab's templates use; an unknown type fails as CloudFormation fails it."""

    def __init__(self, env: Environment):
        self.env = env
        simple: dict[str, type[Provider]] = {
            "AWS::S3::Bucket": Bucket, "AWS::S3::BucketPolicy": BucketPolicy, "AWS::S3Express::DirectoryBucket": DirectoryBucket,
            "AWS::S3Express::BucketPolicy": DirectoryBucketPolicy,
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
