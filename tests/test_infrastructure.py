"""The stacks as synthesized from cdk.json: what they create, how they protect it, what validators say."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from stacks.config import LabConfig, LabConfigError

from .conftest import REPO, cdk_context


def resources(template, type_name: str) -> dict:
    return template.find_resources(type_name)


def rendered(value) -> str:
    """A string-valued property with its intrinsics written as <Ref>/<Logical.Attr> (Fn::Join flattened)."""
    if isinstance(value, str):
        return value
    (key, arg), = value.items()
    if key == "Fn::Join":
        return arg[0].join(rendered(part) for part in arg[1])
    if key == "Ref":
        return f"<{arg}>"
    if key == "Fn::GetAtt":
        return f"<{'.'.join(arg)}>"
    raise AssertionError(f"unexpected intrinsic {key}")


def core_parameter_ref(template: dict, value, key: str) -> bool:
    """Is ``value`` a Ref to a deploy-time SSM parameter that reads Core's handoff ``key``?"""
    if not (isinstance(value, dict) and set(value) == {"Ref"}):
        return False
    parameter = template.get("Parameters", {}).get(value["Ref"], {})
    return (parameter.get("Type") == "AWS::SSM::Parameter::Value<String>"
            and parameter.get("Default") == f"/datasourcelab/core/{key}")


# ---- Network ---------------------------------------------------------------------------------

def test_subnets_all_in_the_one_configured_zone_id(lab):
    """Placed by zone ID (the same physical zone in every account), never by an account-relative zone name."""
    subnets = resources(lab.core, "AWS::EC2::Subnet")
    assert subnets, "the lab needs a subnet"
    assert {s["Properties"]["AvailabilityZoneId"] for s in subnets.values()} == {"use1-az4"}
    for subnet in subnets.values():
        assert "AvailabilityZone" not in subnet["Properties"]
        assert subnet["Properties"]["MapPublicIpOnLaunch"] is False
    assert "AWS::NoValue" not in json.dumps(lab.raw("DataSourceLab-Core"))  # the zone name is never rendered
    outputs = lab.raw("DataSourceLab-Core")["Outputs"]
    assert outputs["AvailabilityZoneId"]["Value"] == "use1-az4"
    assert outputs["AvailabilityZone"]["Value"] == {"Fn::GetAtt": [next(iter(subnets)), "AvailabilityZone"]}


def _core_template(tmp_path, **context):
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from stacks.core_stack import CoreStack
    app = cdk.App(context=cdk_context(**context), outdir=str(tmp_path))
    config = LabConfig.from_node(app.node)
    core = CoreStack(app, "Core", config=config, repo_root=REPO, env=cdk.Environment(region=context["region"]))
    return Template.from_stack(core)


def test_zone_id_setting_places_the_subnet(tmp_path):
    template = _core_template(tmp_path, region="eu-west-1", azId="euw1-az1")
    subnets = template.find_resources("AWS::EC2::Subnet")
    assert {s["Properties"]["AvailabilityZoneId"] for s in subnets.values()} == {"euw1-az1"}
    # The directory bucket follows the zone ID (a new zone replaces it; its emptier clears the old one).
    (bucket,) = template.find_resources("AWS::S3Express::DirectoryBucket").values()
    assert bucket["Properties"]["LocationName"] == "euw1-az1"


def test_subnet_block_follows_the_zone_so_a_zone_move_can_replace_it(tmp_path):
    """EC2 refuses overlapping subnets: the new zone's subnet must not take the old one's CIDR."""
    blocks = {}
    for az_id in ("use1-az4", "use1-az6"):
        subnets = _core_template(tmp_path / az_id, region="us-east-1", azId=az_id).find_resources("AWS::EC2::Subnet")
        (subnet,) = subnets.values()
        blocks[az_id] = subnet["Properties"]["CidrBlock"]
    assert blocks == {"use1-az4": "10.42.48.0/20", "use1-az6": "10.42.80.0/20"}


@pytest.mark.parametrize("region, az_id", [("eu-west-1", "euw1-az2"), ("ap-southeast-2", "apse2-az1")])
def test_express_auto_leaves_express_out_where_the_zone_has_none_and_says_so(tmp_path, region, az_id):
    """The S3 User Guide's table lists the zone IDs with S3 Express One Zone: elsewhere no directory bucket."""
    template = _core_template(tmp_path, region=region, azId=az_id)
    template.resource_count_is("AWS::S3Express::DirectoryBucket", 0)
    outputs = template.to_json()["Outputs"]
    assert outputs["ExpressEnabled"]["Value"] == "false"
    note = outputs["ExpressNote"]["Value"]
    assert az_id in note and "not offered" in note


def test_express_true_in_a_zone_without_it_names_azid_express_and_the_zones_that_have_it():
    with pytest.raises(LabConfigError) as err:
        LabConfig.from_mapping(lambda k: {"region": "eu-west-1", "azId": "euw1-az2", "express": "true"}.get(k))
    message = str(err.value)
    assert "'express'=true" in message and "'azId'=euw1-az2" in message and "euw1-az1, euw1-az3" in message
    with pytest.raises(LabConfigError) as err:
        LabConfig.from_mapping(lambda k: {"region": "ap-southeast-2", "azId": "apse2-az1", "express": "true"}.get(k))
    assert "no zone of ap-southeast-2 has it" in str(err.value)


@pytest.mark.parametrize("region, prefix", [
    ("us-east-1", "use1"), ("us-east-2", "use2"), ("us-west-2", "usw2"), ("eu-west-1", "euw1"),
    ("eu-central-1", "euc1"), ("eu-north-1", "eun1"), ("ap-northeast-1", "apne1"), ("ap-southeast-2", "apse2"),
    ("ap-south-1", "aps1"), ("ca-central-1", "cac1"), ("sa-east-1", "sae1"), ("il-central-1", "ilc1"),
    ("cn-northwest-1", "cnnw1"), ("us-gov-west-1", "usgw1"),
])
def test_zone_id_prefix_of_each_region(region, prefix):
    from stacks.config import region_zone_prefix, validate_az_id
    assert region_zone_prefix(region) == prefix
    assert validate_az_id(f"{prefix}-az3", region) == f"{prefix}-az3"


def test_no_internet_gateway_or_nat(lab):
    for template in (lab.core, lab.fsx, lab.workflow):
        for kind in ("AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::EIP",
                     "AWS::EC2::VPCGatewayAttachment"):
            template.resource_count_is(kind, 0)
    routes = resources(lab.core, "AWS::EC2::Route")
    assert not [r for r in routes.values() if r["Properties"].get("DestinationCidrBlock") == "0.0.0.0/0"]


def _endpoint_service(endpoint: dict) -> str:
    """The endpoint's service name with the region filled in (com.amazonaws.us-east-1.s3)."""
    name = endpoint["Properties"]["ServiceName"]
    return "".join(p if isinstance(p, str) else "us-east-1" for p in name["Fn::Join"][1]) if isinstance(name, dict) else name


def _route_tables_of_subnets(template) -> list[dict]:
    return sorted(({"Ref": a["Properties"]["RouteTableId"]["Ref"]}
                   for a in resources(template, "AWS::EC2::SubnetRouteTableAssociation").values()), key=json.dumps)


def test_s3_gateway_endpoint_on_the_training_route_table(lab):
    endpoints = {_endpoint_service(e): e for e in resources(lab.core, "AWS::EC2::VPCEndpoint").values()}
    assert set(endpoints) == {"com.amazonaws.us-east-1.s3", "com.amazonaws.us-east-1.s3express"}
    endpoint = endpoints["com.amazonaws.us-east-1.s3"]
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway"
    assert sorted(endpoint["Properties"]["RouteTableIds"], key=json.dumps) == _route_tables_of_subnets(lab.core)


def test_vpc_flow_logs(lab):
    lab.core.has_resource_properties("AWS::EC2::FlowLog", {"ResourceType": "VPC", "TrafficType": "ALL"})


def _ingress_rules(template) -> list[dict]:
    rules = [r["Properties"] for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()]
    for group in resources(template, "AWS::EC2::SecurityGroup").values():
        rules += group["Properties"].get("SecurityGroupIngress", [])
    return rules


def _logical(ref) -> str:
    return json.dumps(ref)


def test_security_group_rules_exactly(lab):
    groups = resources(lab.core, "AWS::EC2::SecurityGroup")
    by_desc = {g["Properties"]["GroupDescription"]: name for name, g in groups.items()}
    training = next(n for d, n in by_desc.items() if d.startswith("DataSourceLab training"))
    fsx = next(n for d, n in by_desc.items() if "FSx" in d)
    efs = next(n for d, n in by_desc.items() if "EFS" in d)
    ingress = resources(lab.core, "AWS::EC2::SecurityGroupIngress")

    def rules_into(group):
        return sorted((r["Properties"]["IpProtocol"], r["Properties"].get("FromPort"), r["Properties"].get("ToPort"),
                       r["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0])
                      for r in ingress.values()
                      if r["Properties"]["GroupId"]["Fn::GetAtt"][0] == group)

    assert rules_into(fsx) == sorted([("tcp", 988, 988, training), ("tcp", 1018, 1023, training),
                                      ("tcp", 988, 988, fsx), ("tcp", 1018, 1023, fsx)])
    assert rules_into(efs) == [("tcp", 2049, 2049, training)]
    # Lustre clients accept 988 and 1018-1023 from the file system (the FSx guide's client rules).
    assert rules_into(training) == sorted([("-1", None, None, training), ("tcp", 988, 988, fsx), ("tcp", 1018, 1023, fsx)])
    # No CIDR ingress anywhere: nothing is reachable from an address range.
    for group in groups.values():
        assert not group["Properties"].get("SecurityGroupIngress")
    for rule in _ingress_rules(lab.core):
        assert "CidrIp" not in rule and "CidrIpv6" not in rule


# ---- Bucket ----------------------------------------------------------------------------------

def test_data_bucket_protections_and_retention(lab):
    buckets = resources(lab.core, "AWS::S3::Bucket")
    data = next(b for b in buckets.values() if "LoggingConfiguration" in b["Properties"])
    props = data["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert data["DeletionPolicy"] == "Retain" and data["UpdateReplacePolicy"] == "Retain"
    # Checkpoints a run left behind (stopped before the job that deletes them) expire after a week; a checkpoint the
    # sync deleted, a day after (the model prices that day: tests/test_stack_assumptions.py holds every figure).
    rules = props["LifecycleConfiguration"]["Rules"]
    assert next(r for r in rules if r.get("Prefix") == "checkpoints/") == {
        "Prefix": "checkpoints/", "ExpirationInDays": 7, "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        "Status": "Enabled"}
    policies = resources(lab.core, "AWS::S3::BucketPolicy")
    tls_denials = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]
                   if s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"]
    assert len(tls_denials) == 2, "both buckets refuse plain HTTP"


def _policies_follow_their_buckets(template) -> None:
    buckets = resources(template, "AWS::S3::Bucket")
    policies = resources(template, "AWS::S3::BucketPolicy")
    assert len(policies) == len(buckets) == 2
    for policy in policies.values():
        bucket = buckets[policy["Properties"]["Bucket"]["Ref"]]
        assert policy.get("DeletionPolicy", "Delete") == bucket.get("DeletionPolicy", "Delete")
        assert policy.get("UpdateReplacePolicy", "Delete") == bucket.get("UpdateReplacePolicy", "Delete")


def test_kept_buckets_keep_their_policies(lab):
    """A bucket kept by `make destroy` stays TLS-only: its policy is kept with it (the L2 alone would delete it)."""
    _policies_follow_their_buckets(lab.core)
    for policy in resources(lab.core, "AWS::S3::BucketPolicy").values():
        assert policy["DeletionPolicy"] == "Retain"


def test_disposable_bucket_switch_deletes_with_the_stack(tmp_path):
    from .conftest import SynthesizedLab
    disposable = SynthesizedLab(tmp_path, disposableBucket=True)
    for bucket in resources(disposable.core, "AWS::S3::Bucket").values():
        assert bucket["DeletionPolicy"] == "Delete"
    _policies_follow_their_buckets(disposable.core)
    disposable.core.resource_count_is("Custom::S3AutoDeleteObjects", 2)


BUCKET_NAME = {"Fn::Join": ["", ["datasourcelab-data-", {"Ref": "AWS::AccountId"}, "-us-east-1"]]}
BUCKET_ARN = "arn:aws:s3:::datasourcelab-data-"


def test_come_back_after_destroy_adopts_the_kept_bucket(tmp_path):
    """-c adoptBucket=true (make deploy-again): no bucket or bucket policy is created, every reference names the kept bucket."""
    from .conftest import SynthesizedLab
    again = SynthesizedLab(tmp_path, adoptBucket=True)
    for template in (again.core, again.fsx, again.workflow):
        template.resource_count_is("AWS::S3::Bucket", 0)
        template.resource_count_is("AWS::S3::BucketPolicy", 0)
        template.resource_count_is("Custom::S3AutoDeleteObjects", 0)
    core = again.raw("DataSourceLab-Core")
    assert "DataBucketE6B0FAA8" not in json.dumps(core) and "DataAccessLogs" not in json.dumps(core)
    assert core["Outputs"]["BucketName"]["Value"] == BUCKET_NAME
    # The training role: every S3 statement on the kept bucket's name.
    s3_resources = [r for st in _statements(again.core) if "s3:" in json.dumps(st["Action"])
                    for r in (st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]])]
    data_resources = [r for r in s3_resources if "cdk-hnb659fds-assets" not in json.dumps(r)]  # the code asset
    assert len(data_resources) == 6   # datasets/ and code/ read, output/ written, listed; checkpoints/ synced, listed
    for resource in data_resources:
        assert BUCKET_ARN in json.dumps(resource) and "Fn::GetAtt" not in json.dumps(resource)
    # FSx links the kept bucket's datasets prefix.
    (dra,) = resources(again.fsx, "AWS::FSx::DataRepositoryAssociation").values()
    assert dra["Properties"]["DataRepositoryPath"] == {"Fn::Join": ["", ["s3://datasourcelab-data-", {"Ref": "AWS::AccountId"}, "-us-east-1/datasets/"]]}
    assert "DataBucket" not in json.dumps(again.raw("DataSourceLab-Fsx"))  # no export of a bucket that is not there
    # The workflow's functions and policies read the same name.
    functions = resources(again.workflow, "AWS::Lambda::Function")
    for function in functions.values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "DSLAB_BUCKET" in variables:
            assert variables["DSLAB_BUCKET"] == BUCKET_NAME
    assert "DataBucketE6B0FAA8" not in json.dumps(again.raw("DataSourceLab"))
    report = json.loads((again.outdir / "validation-report.json").read_text())
    (nag,) = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success" and nag["violations"] == []


# ---- S3 Express One Zone ----------------------------------------------------------------------

def _directory_bucket(template) -> tuple[str, dict]:
    (found,) = resources(template, "AWS::S3Express::DirectoryBucket").items()
    return found


def test_express_directory_bucket_in_the_configured_zone_id(lab):
    """One zone, by zone ID; SSE-S3 written out; no BucketName (CloudFormation names it <id>--<azid>--x-s3)."""
    logical, bucket = _directory_bucket(lab.core)
    props = bucket["Properties"]
    assert props["DataRedundancy"] == "SingleAvailabilityZone" and props["LocationName"] == "use1-az4"
    assert "BucketName" not in props
    assert props["BucketEncryption"] == {"ServerSideEncryptionConfiguration": [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}
    # Parts of an abandoned upload are aborted after a day; checkpoints a stopped run left, after a week (their
    # figures held to the model's in tests/test_stack_assumptions.py).
    abort, checkpoints = props["LifecycleConfiguration"]["Rules"]
    assert abort["Status"] == "Enabled" and abort["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert checkpoints == {"Id": "ExpireLeftCheckpoints", "Status": "Enabled", "Prefix": "checkpoints/",
                           "ExpirationInDays": 7}
    (policy,) = resources(lab.core, "AWS::S3Express::BucketPolicy").values()
    assert policy["Properties"]["Bucket"] == {"Ref": logical} and policy.get("DeletionPolicy", "Delete") == "Delete"
    assert bucket["DeletionPolicy"] == "Delete"   # copies only: the datasets stay in the data bucket
    outputs = lab.raw("DataSourceLab-Core")["Outputs"]
    assert outputs["ExpressBucketName"]["Value"] == {"Ref": logical}
    assert outputs["ExpressBucketArn"]["Value"] == {"Fn::GetAtt": [logical, "Arn"]}
    assert outputs["ExpressZoneId"]["Value"] == "use1-az4" and outputs["ExpressEnabled"]["Value"] == "true"


def test_express_gateway_endpoint_on_the_training_route_table(lab):
    """The S3 gateway endpoint does not cover directory buckets: S3 Express has its own gateway endpoint."""
    (endpoint,) = [e for e in resources(lab.core, "AWS::EC2::VPCEndpoint").values()
                   if _endpoint_service(e) == "com.amazonaws.us-east-1.s3express"]
    props = endpoint["Properties"]
    assert props["VpcEndpointType"] == "Gateway"
    (vpc,) = resources(lab.core, "AWS::EC2::VPC")
    assert props["VpcId"] == {"Ref": vpc}
    assert sorted(props["RouteTableIds"], key=json.dumps) == _route_tables_of_subnets(lab.core)


def _role_statements(template, role_logical: str) -> list[dict]:
    return [st for p in resources(template, "AWS::IAM::Policy").values() if {"Ref": role_logical} in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"]]


def test_training_role_takes_sessions_on_the_express_bucket_only(lab):
    """Reads, and a checkpoint trial's Express sync: a ReadWrite session, which a directory bucket grants for the
    whole bucket (no prefix narrows it), and on nothing else."""
    logical, _ = _directory_bucket(lab.core)
    roles = resources(lab.core, "AWS::IAM::Role")
    training = next(n for n, r in roles.items() if "sagemaker.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"]))
    express = [st for st in _role_statements(lab.core, training) if "s3express" in json.dumps(st["Action"])]
    assert express == [{"Sid": "ReadWriteExpressBucket", "Action": "s3express:CreateSession", "Effect": "Allow",
                        "Resource": {"Fn::GetAtt": [logical, "Arn"]}}]
    for template in (lab.core, lab.fsx, lab.workflow):  # no s3express wildcard anywhere in the lab
        for statement in _statements(template):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert not [a for a in actions if a.startswith("s3express:") and "*" in a], actions


def test_express_bucket_is_emptied_before_it_is_deleted(lab):
    """A directory bucket is deleted only when empty: a custom resource (not in the VPC) empties it first."""
    logical, _ = _directory_bucket(lab.core)
    (emptier,) = resources(lab.core, "Custom::ExpressBucketEmptier").values()
    assert emptier["Properties"]["BucketName"] == {"Ref": logical}   # refers to the bucket: deleted before it
    function_logical = emptier["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    function = resources(lab.core, "AWS::Lambda::Function")[function_logical]
    assert "VpcConfig" not in function["Properties"] and function["Properties"]["Handler"] == "index.handler"
    assert function["Properties"]["Timeout"] == 900
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = _role_statements(lab.core, role)
    assert {json.dumps(st["Action"]) for st in statements} == {'"s3express:CreateSession"',
                                                              '["logs:CreateLogStream", "logs:PutLogEvents"]'}
    (session,) = [st for st in statements if st["Action"] == "s3express:CreateSession"]
    assert session["Resource"] == {"Fn::GetAtt": [logical, "Arn"]} and "Condition" not in session  # ReadWrite: DeleteObjects
    assert not resources(lab.core, "AWS::IAM::Role")[role]["Properties"].get("ManagedPolicyArns")
    # Its permissions outlive it: the custom resource waits for the role's policy.
    assert any(d.startswith(role) for d in emptier["DependsOn"])


# One synthesis for the settings tested one by one below (each test looks only at what its setting changes):
# a synthesis costs ~10 s of two cores, four of them a quarter of this module's time.
SETTINGS = dict(express=False, fsxCapacity=4800, fsxLink="import-path", fsx="up", fsxIdleHours=0,
                efsThroughput="provisioned", efsProvisionedMibps=256, efsMountAuth="iam")


@pytest.fixture(scope="module")
def with_settings(tmp_path_factory):
    from .conftest import SynthesizedLab
    return SynthesizedLab(tmp_path_factory.mktemp("cdk.out-settings"), **SETTINGS)


def test_express_off_leaves_bucket_endpoint_grants_and_outputs_out(with_settings):
    off = with_settings
    assert off.stacks["DataSourceLab-Core"].express is None
    for name in ("DataSourceLab-Core", "DataSourceLab-Fsx", "DataSourceLab"):
        text = json.dumps(off.raw(name))
        assert "s3express" not in text and "S3Express" not in text and "ExpressBucket" not in text, name
    off.core.resource_count_is("Custom::ExpressBucketEmptier", 0)
    assert [_endpoint_service(e) for e in resources(off.core, "AWS::EC2::VPCEndpoint").values()] == ["com.amazonaws.us-east-1.s3"]
    outputs = off.raw("DataSourceLab-Core")["Outputs"]
    assert outputs["ExpressEnabled"]["Value"] == "false"
    assert not [k for k in outputs if k.startswith("Express") and k != "ExpressEnabled"]
    report = json.loads((off.outdir / "validation-report.json").read_text())
    (nag,) = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success" and nag["violations"] == []


def test_bad_express_value_stops_synthesis_before_anything_is_built(tmp_path):
    import aws_cdk as cdk

    from stacks.app_builder import build_app
    app = cdk.App(context=cdk_context(express="yes please"), outdir=str(tmp_path))
    with pytest.raises(LabConfigError) as err:
        build_app(app, REPO)
    assert str(err.value) == "context 'express'='yes please' is not allowed: use one of auto, true, false"
    assert not app.node.children


@pytest.mark.parametrize("value, expected", [(None, True), (True, True), ("true", True), (False, False), ("false", False)])
def test_express_setting_defaults_to_on(value, expected):
    context = cdk_context()
    context.pop("express")
    if value is not None:
        context["express"] = value
    assert LabConfig.from_mapping(context.get).express is expected


# ---- FSx -------------------------------------------------------------------------------------

def test_fsx_scratch2_lustre_215_linked_to_datasets(lab):
    (fs,) = resources(lab.fsx, "AWS::FSx::FileSystem").values()
    props = fs["Properties"]
    assert props["FileSystemType"] == "LUSTRE"
    assert props["FileSystemTypeVersion"] == "2.15"
    assert props["LustreConfiguration"]["DeploymentType"] == "SCRATCH_2"
    assert props["StorageCapacity"] == 1200
    assert fs["DeletionPolicy"] == "Delete"
    assert len(props["SubnetIds"]) == 1
    (link,) = resources(lab.fsx, "AWS::FSx::DataRepositoryAssociation").values()
    assert link["Properties"]["FileSystemPath"] == "/datasets"
    account = lab.account or "<AWS::AccountId>"  # a literal once bound to an account
    assert rendered(link["Properties"]["DataRepositoryPath"]) == f"s3://datasourcelab-data-{account}-us-east-1/datasets/"
    assert link["Properties"]["S3"]["AutoImportPolicy"]["Events"] == ["NEW", "CHANGED", "DELETED"]
    assert link["Properties"]["BatchImportMetaDataOnCreate"] is True


def test_fsx_capacity_is_configurable(with_settings):
    big = with_settings   # fsxCapacity=4800, fsxLink=import-path
    (fs,) = resources(big.fsx, "AWS::FSx::FileSystem").values()
    assert fs["Properties"]["StorageCapacity"] == 4800
    # The legacy link is one switch: ImportPath on the bucket root, so /datasets stays the same path.
    assert rendered(fs["Properties"]["LustreConfiguration"]["ImportPath"]) == "s3://datasourcelab-data-<AWS::AccountId>-us-east-1"
    big.fsx.resource_count_is("AWS::FSx::DataRepositoryAssociation", 0)


def test_fsx_published_by_ssm_not_by_export(lab):
    raw = lab.raw("DataSourceLab-Fsx")
    assert all("Export" not in o for o in raw.get("Outputs", {}).values())
    names = {p["Properties"]["Name"] for p in resources(lab.fsx, "AWS::SSM::Parameter").values()}
    assert names == {"/datasourcelab/fsx/file-system-id", "/datasourcelab/fsx/mount-name"}


def test_removing_fsx_leaves_every_other_resource(lab):
    """Nothing outside the FSx stack refers to it, so deleting it touches nothing else."""
    fsx_raw = lab.raw("DataSourceLab-Fsx")
    assert set(r["Type"] for r in fsx_raw["Resources"].values()) - {"AWS::CDK::Metadata"} == {
        "AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation", "AWS::SSM::Parameter"}
    for name in ("DataSourceLab-Core", "DataSourceLab"):
        text = json.dumps(lab.raw(name))
        assert "DataSourceLab-Fsx:" not in text, f"{name} imports from the FSx stack"
    manifest = json.loads((lab.outdir / "manifest.json").read_text())
    core_deps = manifest["artifacts"]["DataSourceLab-Core"].get("dependencies", [])
    assert not [d for d in core_deps if "Fsx" in d]
    # By default deploying the workflow leaves FSx as it is: an update never recreates a torn-down FSx.
    assert "DataSourceLab-Fsx" not in manifest["artifacts"]["DataSourceLab"].get("dependencies", [])


def test_idle_guard_rule_deletes_fsx_after_the_configured_hours(lab):
    (rule,) = resources(lab.workflow, "AWS::Events::Rule").values()
    assert rule["Properties"]["ScheduleExpression"] == "rate(30 minutes)" and rule["Properties"]["State"] == "ENABLED"
    (target,) = rule["Properties"]["Targets"]
    assert "TeardownFunction" in json.dumps(target["Arn"])
    # The input, with the account token filled in (a literal once bound), is what the idle guard reads.
    given = target["Input"]
    text = given if isinstance(given, str) else "".join(p if isinstance(p, str) else "123456789012" for p in given["Fn::Join"][1])
    assert json.loads(text) == {"action": "idle", "idle_hours": 8,
                                "state_machine": "arn:aws:states:us-east-1:123456789012:stateMachine:DataSourceLab-Benchmark"}
    outputs = lab.raw("DataSourceLab")["Outputs"]
    assert outputs["FsxIdleHours"]["Value"] == "8"


def test_fsx_up_deploys_fsx_with_the_workflow_and_the_guard_can_be_off(with_settings):
    up = with_settings   # fsx=up, fsxIdleHours=0
    manifest = json.loads((up.outdir / "manifest.json").read_text())
    assert "DataSourceLab-Fsx" in manifest["artifacts"]["DataSourceLab"]["dependencies"]
    assert not resources(up.workflow, "AWS::Events::Rule")


# ---- EFS -------------------------------------------------------------------------------------

def test_efs_max_io_bursting_encrypted_one_mount_target(lab):
    lab.core.has_resource_properties("AWS::EFS::FileSystem", {
        "PerformanceMode": "maxIO", "ThroughputMode": "bursting", "Encrypted": True})
    targets = resources(lab.core, "AWS::EFS::MountTarget")
    assert len(targets) == 1
    (target,) = targets.values()
    subnet_ref = target["Properties"]["SubnetId"]["Ref"]
    assert resources(lab.core, "AWS::EC2::Subnet")[subnet_ref]["Properties"]["AvailabilityZoneId"] == "use1-az4"


def test_efs_mountable_by_training_jobs(lab):
    """The denyAnonymousAccess flag is on in cdk.json; the default mount auth keeps anonymous NFS (SG-guarded)."""
    (fs,) = resources(lab.core, "AWS::EFS::FileSystem").values()
    policy = fs["Properties"].get("FileSystemPolicy")
    if policy:
        actions = json.dumps(policy)
        assert "ClientMount" in actions


def test_efs_provisioned_throughput_and_iam_mounts_by_context(with_settings):
    provisioned = with_settings   # efsThroughput=provisioned, efsProvisionedMibps=256, efsMountAuth=iam
    provisioned.core.has_resource_properties("AWS::EFS::FileSystem", {
        "ThroughputMode": "provisioned", "ProvisionedThroughputInMibps": 256, "PerformanceMode": "maxIO"})
    (fs,) = resources(provisioned.core, "AWS::EFS::FileSystem").values()
    statements = fs["Properties"]["FileSystemPolicy"]["Statement"]
    assert any("elasticfilesystem:ClientMount" in json.dumps(s["Action"]) and s["Effect"] == "Allow" for s in statements)
    # A checkpoint trial's EFS target writes as the container's root user: write and root access for the training role.
    assert any({"elasticfilesystem:ClientWrite", "elasticfilesystem:ClientRootAccess"} <= set(s["Action"])
               for s in statements if isinstance(s["Action"], list))
    # DataSync must stage EFS in this mode too: it mounts with an access role, over TLS.
    (location,) = resources(provisioned.workflow, "AWS::DataSync::LocationEFS").items()
    props = location[1]["Properties"]
    assert props["InTransitEncryption"] == "TLS1_2"
    role_logical = props["FileSystemAccessRoleArn"]["Fn::GetAtt"][0]
    role = resources(provisioned.workflow, "AWS::IAM::Role")[role_logical]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "datasync.amazonaws.com"}
    granted = [st for p in resources(provisioned.workflow, "AWS::IAM::Policy").values()
               if {"Ref": role_logical} in p["Properties"]["Roles"] for st in p["Properties"]["PolicyDocument"]["Statement"]]
    assert sorted(granted[0]["Action"]) == ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientRootAccess",
                                            "elasticfilesystem:ClientWrite"]
    # the lab's EFS, by the ARN Core hands over through SSM (read at deploy time, never imported)
    assert core_parameter_ref(provisioned.raw("DataSourceLab"), granted[0]["Resource"], "efs-file-system-arn")
    assert any(d.startswith(role_logical) for d in location[1].get("DependsOn", []))


def test_datasync_waits_for_its_role_policy_and_may_write_its_logs(lab):
    template = lab.raw("DataSourceLab")["Resources"]
    (policy_logical,) = [k for k, v in template.items() if v["Type"] == "AWS::IAM::Policy" and "DataSyncRole" in k]
    # Every S3 location and task (staging, and emptying EFS): CreateLocationS3 checks the role
    for kind in ("AWS::DataSync::LocationS3", "AWS::DataSync::Task"):
        resources = [v for v in template.values() if v["Type"] == kind]
        assert len(resources) == 2 and all(policy_logical in r.get("DependsOn", []) for r in resources), kind
    task_logicals = [k for k, v in template.items() if v["Type"] == "AWS::DataSync::Task"]
    ((policy_id, logs_policy),) = [(k, v) for k, v in template.items() if v["Type"] == "AWS::Logs::ResourcePolicy"]
    document = json.dumps(logs_policy["Properties"]["PolicyDocument"])
    assert '"Principal\\":{\\"Service\\":\\"datasync.amazonaws.com' in document
    assert "logs:PutLogEvents" in document and "aws:SourceAccount" in document
    assert logs_policy["Properties"]["PolicyName"] == "DataSourceLab-DataSync"   # one, reused: a region holds 10
    # The DataSync guide's form: this account's tasks (task/*), so the policy exists before the tasks log.
    assert ":task/*" in document and "aws:SourceArn" in document
    for task_logical in task_logicals:
        assert task_logical not in document and policy_id in template[task_logical].get("DependsOn", [])
        assert template[task_logical]["Properties"]["CloudWatchLogGroupArn"]["Fn::GetAtt"][0] in document
    # The locations assume their roles at once: they wait for IAM to propagate them.
    (wait_id,) = [k for k, v in template.items() if v["Type"] == "Custom::IamPropagationWait"]
    for kind in ("AWS::DataSync::LocationS3", "AWS::DataSync::LocationEFS"):
        assert all(wait_id in v.get("DependsOn", []) for v in template.values() if v["Type"] == kind), kind
    assert policy_logical in template[wait_id].get("DependsOn", [])


# ---- IAM -------------------------------------------------------------------------------------

def _statements(template):
    for policy in resources(template, "AWS::IAM::Policy").values():
        yield from policy["Properties"]["PolicyDocument"]["Statement"]
    for role in resources(template, "AWS::IAM::Role").values():
        for policy in role["Properties"].get("Policies", []):
            yield from policy["PolicyDocument"]["Statement"]


def test_no_star_actions_and_no_full_access_policies(lab):
    for template in (lab.core, lab.fsx, lab.workflow):
        for statement in _statements(template):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert "*" not in actions
            assert not [a for a in actions if a.endswith(":*")], actions
        for role in resources(template, "AWS::IAM::Role").values():
            assert "FullAccess" not in json.dumps(role["Properties"].get("ManagedPolicyArns", []))


def test_training_role_least_privilege(lab):
    roles = resources(lab.core, "AWS::IAM::Role")
    training = next(n for n, r in roles.items() if "sagemaker.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"]))
    policy = next(p for p in resources(lab.core, "AWS::IAM::Policy").values()
                  if {"Ref": training} in p["Properties"]["Roles"])
    by_sid = {s.get("Sid"): s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert by_sid["WriteOutput"]["Action"] in ("s3:PutObject", ["s3:AbortMultipartUpload", "s3:PutObject"],
                                               ["s3:PutObject", "s3:AbortMultipartUpload"])
    assert "/output/*" in json.dumps(by_sid["WriteOutput"]["Resource"])
    assert "/datasets/*" in json.dumps(by_sid["ReadDatasetsAndCode"]["Resource"])
    # A Script job's script signs with these credentials: what it may read of the lab's bucket is the
    # datasets (and the code the container fetches), listed under those prefixes only; it writes output/.
    reads = by_sid["ReadDatasetsAndCode"]
    assert reads["Action"] == "s3:GetObject" and len(reads["Resource"]) == 2
    assert json.dumps(reads["Resource"]).count("/datasets/*") == 1 and json.dumps(reads["Resource"]).count("/code/*") == 1
    assert by_sid["ListDatasetsAndCode"]["Condition"] == {"StringLike": {"s3:prefix": ["datasets/*", "code/*"]}}
    s3_actions = {a for st in by_sid.values() for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
                  if a.startswith("s3:")}
    assert s3_actions == {"s3:GetObject", "s3:ListBucket", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"}
    assert by_sid["JobMetrics"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}}
    # A checkpoint trial's SageMaker sync reads, writes and deletes checkpoints/ only, and lists that prefix only.
    sync = by_sid["SyncCheckpoints"]
    assert sorted(sync["Action"]) == ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject"]
    assert json.dumps(sync["Resource"]).count("/checkpoints/*") == 1 and "/datasets/" not in json.dumps(sync["Resource"])
    assert by_sid["ListCheckpoints"]["Condition"] == {"StringLike": {"s3:prefix": ["checkpoints/*"]}}
    deleting = [st for st in by_sid.values() if "s3:DeleteObject" in json.dumps(st["Action"])]
    assert deleting == [sync]
    all_actions = json.dumps([s["Action"] for s in by_sid.values()])
    assert "iam:" not in all_actions


# ---- Outputs ---------------------------------------------------------------------------------

def test_outputs_for_users_and_cli(lab):
    core = set(lab.raw("DataSourceLab-Core")["Outputs"])
    assert {"BucketName", "SubnetId", "TrainingSecurityGroupId", "EfsFileSystemId", "TrainingRoleArn",
            "TrainingCodeUri", "FsxSecurityGroupId", "EfsSecurityGroupId"} <= core
    assert {"FsxFileSystemId", "FsxMountName"} <= set(lab.raw("DataSourceLab-Fsx")["Outputs"])
    assert "StateMachineArn" in lab.raw("DataSourceLab")["Outputs"]


# ---- Validators ------------------------------------------------------------------------------

def test_cdk_nag_has_no_unacknowledged_findings(lab):
    report = json.loads((lab.outdir / "validation-report.json").read_text())
    (nag,) = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success"
    assert nag["violations"] == []
    for suppressed in nag.get("suppressedViolations", []):
        assert "[" in suppressed["ruleName"] or suppressed["ruleName"].startswith("AwsSolutions-"), suppressed


def test_a_property_cloudformation_would_refuse_fails_synthesis(tmp_path):
    """aws-cdk-lib's built-in CloudFormation validation (resource schemas and its default rules) runs on every
    synthesis; cdk.json's `@aws-cdk/core:validateAgainstDefaultRules` makes its findings errors instead of
    warnings, so a template CloudFormation would refuse stops at `cdk synth`, not halfway through a deploy.
    The lab itself synthesizes clean under it (the `lab` fixture's syntheses would fail otherwise)."""
    import aws_cdk as cdk

    from stacks.app_builder import build_app
    context = cdk_context()
    assert context["@aws-cdk/core:validateAgainstDefaultRules"] is True
    app = build_app(cdk.App(context=context, outdir=str(tmp_path)), REPO)
    (fsx,) = [s for s in app.node.children if isinstance(s, cdk.Stack) and s.stack_name == "DataSourceLab-Fsx"]
    (file_system,) = [c for c in fsx.node.find_all()
                      if isinstance(c, cdk.CfnResource) and c.cfn_resource_type == "AWS::FSx::FileSystem"]
    file_system.add_property_override("StorageCapacity", "1.2 TiB")   # FSx wants GiB as an integer
    with pytest.raises(RuntimeError, match="(?s)ValidationFailed: ERROR StorageCapacity.*CloudFormation-Validate::F3012"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (validate,) = [r for r in report["pluginReports"] if r["pluginName"] == "CloudFormation Validate"]
    assert [(v["ruleName"], v["severity"]) for v in validate["violations"]] == [("F3012", "error")], validate


def test_cfn_lint_clean(lab):
    files = [str(p) for p in lab.template_files()]
    assert len(files) == 3
    result = subprocess.run([str(REPO / ".venv/bin/cfn-lint"), "--config-file", str(REPO / ".cfnlintrc.yaml"), *files],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("region, az_id", [("us-east-1", "use1-az4"), ("eu-west-1", "euw1-az1"), ("us-west-2", "usw2-az1")])
def test_synthesis_bound_to_an_account_is_clean_in_several_regions(tmp_path, region, az_id):
    """What `cdk deploy` synthesizes with credentials: the account concrete, the zone lookup cached as
    the CLI caches it. cdk-nag runs as a validation plugin (an unacknowledged finding fails synthesis),
    no error annotation is left, and cfn-lint passes every template."""
    from .conftest import ACCOUNT, SynthesizedLab
    bound = SynthesizedLab(tmp_path, account=ACCOUNT, region=region, azId=az_id)
    # The annotations as the CDK CLI reads them: the cloud assembly's manifest on disk (not jsii's object proxies,
    # whose lazy cross-module loading depends on what else the process imported first).
    # A stack's metadata sits in the manifest or, as this CDK writes it, in the file its additionalMetadataFile names.
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    annotations = []
    for artifact in manifest["artifacts"].values():
        metadata = dict(artifact.get("metadata", {}))
        if "additionalMetadataFile" in artifact:
            metadata.update(json.loads((tmp_path / artifact["additionalMetadataFile"]).read_text()))
        annotations += [(path, entry) for path, entries in metadata.items() for entry in entries]
    errors = [(path, entry.get("data")) for path, entry in annotations if entry.get("type") == "aws:cdk:error"]
    warnings = [entry.get("data") for _, entry in annotations if entry.get("type") == "aws:cdk:warning"]
    assert warnings, "the manifest carries annotations where this test looks for them"
    assert errors == []
    assert manifest["artifacts"]["DataSourceLab-Core"]["environment"] == f"aws://{ACCOUNT}/{region}"
    (subnet,) = resources(bound.core, "AWS::EC2::Subnet").values()
    assert subnet["Properties"]["AvailabilityZoneId"] == az_id
    assert resources(bound.core, "AWS::S3Express::DirectoryBucket")   # each of these zones has S3 Express
    result = subprocess.run([str(REPO / ".venv/bin/cfn-lint"), "--config-file", str(REPO / ".cfnlintrc.yaml"),
                             *[str(p) for p in bound.template_files()]], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_stack_imports_from_another(lab):
    """Core hands its values over through SSM parameters read at deploy time: no export can block a setting change."""
    for name in ("DataSourceLab-Core", "DataSourceLab-Fsx", "DataSourceLab"):
        raw = lab.raw(name)
        assert "Fn::ImportValue" not in json.dumps(raw), name
        assert all("Export" not in o for o in raw.get("Outputs", {}).values()), name
    handoff = {r["Properties"]["Name"] for r in resources(lab.core, "AWS::SSM::Parameter").values()}
    for name in ("DataSourceLab-Fsx", "DataSourceLab"):
        reads = {p["Default"] for p in lab.raw(name)["Parameters"].values()
                 if p["Type"].startswith("AWS::SSM::Parameter::Value") and not p["Default"].startswith("/cdk-bootstrap/")}
        assert reads and reads <= handoff, f"{name} reads a parameter Core does not write: {reads - handoff}"


# ---- Bad configuration -----------------------------------------------------------------------

@pytest.mark.parametrize("overrides, words", [
    ({"fsxCapacity": 1000}, ["fsxCapacity", "1200, 2400 or a multiple of 2400"]),
    ({"fsxCapacity": 3600}, ["fsxCapacity", "multiple of 2400"]),
    ({"az": "us-east-1a"}, ["'az'", "azId", "use1-az4", "describe-availability-zones"]),
    ({"azId": "us-east-1a"}, ["'azId'", "use1-az<N>", "describe-availability-zones"]),
    ({"azId": "use1-az"}, ["'azId'", "use1-az<N>"]),
    ({"azId": "euw1-az1"}, ["'azId'", "region us-east-1", "use1-"]),
    ({"azId": None}, ["'azId'", "required"]),
    ({"region": "us-iso-east-1", "azId": "usie1-az1"}, ["'region'", "zone-ID rule"]),
    ({"adoptBucket": True, "disposableBucket": True}, ["adoptBucket", "disposableBucket", "exclude each other"]),
    ({"adoptBucket": "yes"}, ["adoptBucket", "true or false"]),
    ({"efsThroughput": "provisioned", "efsProvisionedMibps": None}, ["efsProvisionedMibps", "1 to 3414"]),
    ({"efsThroughput": "burst"}, ["efsThroughput", "bursting, provisioned, elastic"]),
    ({"fsxLink": "magic"}, ["fsxLink", "dra, import-path"]),
    ({"fsx": "maybe"}, ["'fsx'", "keep, up"]),
    ({"fsxIdleHours": -1}, ["fsxIdleHours", "0 (off) to 336"]),
    ({"fsxIdleHours": "soon"}, ["fsxIdleHours", "0 (off) to 336"]),
    ({"express": "maybe"}, ["'express'", "auto, true, false"]),
    ({"express": "onezone"}, ["'express'", "auto, true, false"]),
    ({"azId": "euw1-az2", "region": "eu-west-1", "express": "true"}, ["'express'=true", "euw1-az1, euw1-az3"]),
])
def test_bad_configuration_is_refused_with_the_setting_named(overrides, words):
    context = cdk_context(**overrides)
    with pytest.raises(LabConfigError) as err:
        LabConfig.from_mapping(context.get)
    for word in words:
        assert word in str(err.value)


def test_cdk_synth_refuses_bad_capacity_before_building_anything(tmp_path):
    # The CLI's caches in a home of its own, no telemetry, no notices: the test leaves ~/.cdk as it was.
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_HOME": str(tmp_path / "cdk-home"),
           "CDK_DISABLE_CLI_TELEMETRY": "true"}
    result = subprocess.run([str(REPO / "node_modules/.bin/cdk"), "synth", "--quiet", "--no-notices", "-c", "fsxCapacity=1000",
                             "-o", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode != 0
    assert "fsxCapacity" in result.stderr and "1200, 2400 or a multiple of 2400" in result.stderr
    assert not list((tmp_path / "out").glob("*.template.json")) if (tmp_path / "out").exists() else True


# ---- Training images -------------------------------------------------------------------------

GPU_NEWEST = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.14-cu133-amzn2023-sagemaker"
CPU_NEWEST = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.14-cpu-amzn2023-sagemaker"
VOLTA_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-gpu-py312"


def test_every_sdk_pytorch_training_image_has_a_known_cuda_version():
    """An SDK bump that adds an Ubuntu pytorch-training version without a CUDA entry fails here, not in a deploy."""
    from dslab.aws.images import LEGACY_DLC_CUDA, candidates
    found = candidates()
    assert [c.version for c in found if c.framework == "pytorch"] == list(LEGACY_DLC_CUDA)
    assert all(c.cuda[0] in (12, 13) for c in found)
    assert found[-1].framework == "pytorch-amzn2023" and found[-1].cuda >= (13, 0)


@pytest.mark.parametrize("instance_type, expected", [
    ("ml.p3.2xlarge", VOLTA_IMAGE), ("ml.p3.16xlarge", VOLTA_IMAGE), ("ml.p3dn.24xlarge", VOLTA_IMAGE),
    ("ml.g4dn.xlarge", GPU_NEWEST), ("ml.g5.2xlarge", GPU_NEWEST), ("ml.g6.xlarge", GPU_NEWEST),
    ("ml.p4d.24xlarge", GPU_NEWEST), ("ml.p5.48xlarge", GPU_NEWEST), ("ml.p6-b200.48xlarge", GPU_NEWEST),
    ("ml.m5.xlarge", CPU_NEWEST), ("ml.c5.2xlarge", CPU_NEWEST),
])
def test_image_per_instance_family(instance_type, expected):
    """V100 (CUDA 13 dropped Volta) keeps the newest CUDA 12 image; newer GPUs and CPUs get the newest."""
    from dslab.core.requests import LabEnvironment
    from dslab.aws.images import training_images
    images = training_images("us-east-1")
    assert images.for_instance(instance_type) == expected
    # The Plan function sees the same choice through the Lambda environment's JSON map.
    env = LabEnvironment.from_dict({"bucket": "b", "region": "us-east-1", "role_arn": "r", "subnet_ids": "s",
                                    "security_group_ids": "g", "code_uri": "s3://b/c.tar.gz", "image_uri": images.gpu,
                                    "image_uri_cpu": images.cpu, "image_uris": images.by_family_json()})
    assert env.image_for(instance_type) == expected


def test_volta_image_ships_cuda_12_and_the_newest_ships_cuda_13():
    from dslab.aws.images import MAX_CUDA_MAJOR, newest_for
    volta, _ = newest_for("volta", "us-east-1")
    newest, _ = newest_for(None, "us-east-1")
    assert volta.cuda[0] == 12 <= MAX_CUDA_MAJOR["volta"] and newest.cuda[0] >= 13


@pytest.mark.parametrize("instance_type", ["ml.p2.xlarge", "ml.trn1.2xlarge", "ml.inf2.xlarge"])
def test_plan_refuses_instance_types_no_image_runs_on(instance_type):
    from dslab.core.errors import ConfigError
    from dslab.core.requests import LabEnvironment
    from dslab.aws.images import training_images
    images = training_images("us-east-1")
    env = LabEnvironment.from_dict({"bucket": "b", "region": "us-east-1", "role_arn": "r", "subnet_ids": "s",
                                    "security_group_ids": "g", "code_uri": "s3://b/c.tar.gz", "image_uri": images.gpu,
                                    "image_uris": images.by_family_json()})
    with pytest.raises(ConfigError) as err:
        env.image_for(instance_type)
    assert "instance_type" in str(err.value) and instance_type in str(err.value) and "image_uri" in str(err.value)


def test_training_image_setting_replaces_the_rule():
    from dslab.aws.images import lab_training_images
    images = lab_training_images("us-east-1", "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1", None)
    assert images.for_instance("ml.p3.2xlarge") == "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1"
    assert images.for_instance("ml.m5.xlarge") == CPU_NEWEST


def test_workflow_stack_hands_the_per_family_images_to_the_plan_function(lab):
    functions = resources(lab.workflow, "AWS::Lambda::Function")
    plan = next(f for n, f in functions.items() if "Plan" in n)
    variables = plan["Properties"]["Environment"]["Variables"]
    assert variables["DSLAB_IMAGE_URI"] == GPU_NEWEST and variables["DSLAB_IMAGE_URI_CPU"] == CPU_NEWEST
    assert json.loads(variables["DSLAB_IMAGE_URIS"])["p3"] == VOLTA_IMAGE
    outputs = lab.raw("DataSourceLab")["Outputs"]
    assert json.loads(outputs["TrainingImageUris"]["Value"])["p3"] == VOLTA_IMAGE


@pytest.mark.parametrize("region, az_id, registry", [("af-south-1", "afs1-az1", "626614931356"),
                                                     ("me-south-1", "mes1-az1", "217643126080"),
                                                     ("us-east-1", "use1-az4", "763104351884")])
def test_the_training_role_pulls_from_the_registry_account_of_its_region(tmp_path, region, az_id, registry):
    """AWS Deep Learning Containers live in 763104351884 in most regions and in another account in about
    twenty: a role limited to 763104351884 could not pull the image in af-south-1 or me-south-1."""
    template = _core_template(tmp_path, region=region, azId=az_id)
    statements = [st for p in template.find_resources("AWS::IAM::Policy").values()
                  for st in p["Properties"]["PolicyDocument"]["Statement"] if st.get("Sid") == "PullFrameworkImage"]
    (pull,) = statements
    resources = pull["Resource"] if isinstance(pull["Resource"], list) else [pull["Resource"]]
    assert [rendered(r) for r in resources] == [f"arn:aws:ecr:{region}:{registry}:repository/*"]


def test_an_image_of_your_own_account_is_pulled_from_there(tmp_path):
    own = "111122223333.dkr.ecr.us-east-1.amazonaws.com/my-training:1.0"
    template = _core_template(tmp_path, region="us-east-1", azId="use1-az4", trainingImage=own, trainingImageCpu=own)
    (pull,) = [st for p in template.find_resources("AWS::IAM::Policy").values()
               for st in p["Properties"]["PolicyDocument"]["Statement"] if st.get("Sid") == "PullFrameworkImage"]
    resources = pull["Resource"] if isinstance(pull["Resource"], list) else [pull["Resource"]]
    assert [rendered(r) for r in resources] == ["arn:aws:ecr:us-east-1:111122223333:repository/*"]
