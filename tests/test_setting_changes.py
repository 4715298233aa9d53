"""Every documented setting change deploys onto a running lab in one step, in the stand-in's
CloudFormation: a new zone (azId), S3 Express on and off, EFS mount authorisation, disposable
buckets. (fsx=up/keep, express=false, destroy and adoptBucket go through the real CLI in
tests/test_deploy_path.py.) Each variant is synthesized bound to the stand-in's account, as `cdk deploy`
synthesizes, and deployed as an update of what is there."""

from __future__ import annotations

import pytest

from dslab.cli.deploy_check import check
from dslab.cli.fsx import follow_zone, fsx_zone
from dslab.core.requests import CORE_STACK, FSX_STACK, WORKFLOW_STACK, core_parameter
from dslab.emulator.deploy import InProcessDeployer

from .conftest import ACCOUNT, SynthesizedLab
from .scripted_jobs import ScriptedJobs
from .test_workflow import put_datasets

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    made: dict[str, SynthesizedLab] = {}

    def synthesize(name: str, **context) -> SynthesizedLab:
        if name not in made:
            made[name] = SynthesizedLab(tmp_path_factory.mktemp(f"cdk.out-{name}"), account=ACCOUNT, **context)
        return made[name]
    return synthesize


def subnet_zone(lab, subnet_id: str) -> str:
    return lab.client("ec2").describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]["AvailabilityZoneId"]


def clean_up_failures(lab, stack: str) -> list[str]:
    events = lab.client("cloudformation").describe_stack_events(StackName=stack)["StackEvents"]
    return [f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason', '')}" for e in events if e["ResourceStatus"] == "DELETE_FAILED"]


def test_moving_the_zone_replaces_the_zonal_resources_in_one_deploy(emulated, bound_lab, variant):
    moved = variant("az6", azId="use1-az6")
    with emulated(ScriptedJobs(), fsx=False) as lab:
        old_subnet, old_express = lab.subnet_id, lab.express_bucket
        lab.client("s3").put_object(Bucket=old_express, Key="datasets/staged/a.jpg", Body=b"staged copy")
        InProcessDeployer(lab.cloudformation, moved.outdir).deploy(CORE_STACK, WORKFLOW_STACK)
        lab.refresh()
        cfn = lab.client("cloudformation")
        for stack in (CORE_STACK, WORKFLOW_STACK):
            assert cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"] == "UPDATE_COMPLETE", stack
            assert clean_up_failures(lab, stack) == [], stack
        assert lab.outputs[CORE_STACK]["AvailabilityZoneId"] == "use1-az6"
        assert subnet_zone(lab, lab.subnet_id) == "use1-az6" and lab.subnet_id != old_subnet
        assert not lab.client("ec2").describe_subnets(Filters=[{"Name": "subnet-id", "Values": [old_subnet]}])["Subnets"]
        # The directory bucket moved with the zone; the old one was emptied by its custom resource and deleted.
        assert lab.express_bucket.endswith("--use1-az6--x-s3")
        names = [b["Name"] for b in lab.client("s3").list_buckets()["Buckets"]]
        assert old_express not in names and lab.express_bucket in names
        # EFS's mount target and the workflow (through Core's SSM handoff) follow the new subnet.
        (target,) = lab.client("efs").describe_mount_targets(FileSystemId=lab.efs_id)["MountTargets"]
        assert target["SubnetId"] == lab.subnet_id
        assert lab.client("ssm").get_parameter(Name=core_parameter("subnet-id"))["Parameter"]["Value"] == lab.subnet_id
        assert lab.function_environment()["DSLAB_SUBNET_IDS"] == lab.subnet_id
        # The moved lab runs: an EFS job through the new DataSync location, a File job, FSx brought up in the new zone.
        InProcessDeployer(lab.cloudformation, moved.outdir).deploy(FSX_STACK)
        lab.refresh()
        assert fsx_zone(lab.client("ssm"), lab.client("fsx"), lab.client("ec2")) == "use1-az6"
        put_datasets(lab, ["tiny-jpg"])
        run = lab.run({"name": "moved", "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File", "EFS", "FSx"],
                       "instance_type": "ml.m5.xlarge", "compute": "v100"})
        assert run.status == "SUCCEEDED", run.cause
        assert {r["status"] for r in lab.results(run)["records"]} == {"Completed"}


def test_a_zone_move_with_fsx_up_takes_fsx_down_first_or_leaves_the_old_subnet_behind(emulated, variant):
    """Without follow-zone, CloudFormation cannot delete the subnet FSx sits in: it is left behind (still
    there, the stack UPDATE_COMPLETE). `make deploy` runs follow-zone first: FSx goes, the move is clean."""
    moved = variant("az6", azId="use1-az6")
    with emulated(ScriptedJobs(), fsx=True) as lab:
        old_subnet = lab.subnet_id
        assert fsx_zone(lab.client("ssm"), lab.client("fsx"), lab.client("ec2")) == "use1-az4"
        InProcessDeployer(lab.cloudformation, moved.outdir).deploy(CORE_STACK)
        failures = clean_up_failures(lab, CORE_STACK)
        assert any("has dependencies and cannot be deleted" in f and "FSx" in f for f in failures), failures
        assert lab.client("ec2").describe_subnets(SubnetIds=[old_subnet])["Subnets"]   # still there, orphaned
    with emulated(ScriptedJobs(), fsx=True) as lab:
        deployer = InProcessDeployer(lab.cloudformation, moved.outdir)
        said: list[str] = []
        current = fsx_zone(lab.client("ssm"), lab.client("fsx"), lab.client("ec2"))
        assert follow_zone(current, "use1-az4", lambda: 1 / 0, said.append) == 0 and said == []   # same zone: nothing
        assert follow_zone(current, "use1-az6", lambda: deployer.destroy(FSX_STACK) or 0, said.append) == 0
        assert "taking FSx down first" in said[0] and not lab.fsx_present
        deployer.deploy(CORE_STACK, FSX_STACK, WORKFLOW_STACK)
        assert clean_up_failures(lab, CORE_STACK) == []
        assert fsx_zone(lab.client("ssm"), lab.client("fsx"), lab.client("ec2")) == "use1-az6"


def test_express_off_then_on_again(emulated, variant):
    off = variant("express-off", express="false")
    on = variant("bound-again")
    with emulated(ScriptedJobs(), fsx=False) as lab:
        bucket = lab.express_bucket
        InProcessDeployer(lab.cloudformation, off.outdir).deploy(CORE_STACK, WORKFLOW_STACK)
        lab.refresh()
        assert lab.express_bucket is None and "DSLAB_EXPRESS_BUCKET" not in lab.function_environment()
        assert bucket not in [b["Name"] for b in lab.client("s3").list_buckets()["Buckets"]]
        assert not lab.client("ssm").get_parameters(Names=[core_parameter("express-bucket-name")])["Parameters"]
        InProcessDeployer(lab.cloudformation, on.outdir).deploy(CORE_STACK, WORKFLOW_STACK)
        lab.refresh()
        assert lab.express_bucket and lab.function_environment()["DSLAB_EXPRESS_BUCKET"] == lab.express_bucket


def test_efs_mount_authorisation_changes_in_place(emulated, variant):
    iam = variant("efs-iam", efsMountAuth="iam")
    with emulated(ScriptedJobs(), fsx=False) as lab:
        efs_id = lab.efs_id
        InProcessDeployer(lab.cloudformation, iam.outdir).deploy(CORE_STACK, WORKFLOW_STACK)
        lab.refresh()
        assert lab.efs_id == efs_id   # the same file system, its data kept
        # An update of EFS that left its throughput alone (CloudFormation's events carry its properties) does not hold
        # back a throughput change: `make deploy` (dslab deploy-check) lets one through, and back.
        cfn = lab.client("cloudformation")
        check("deploy", "keep", ["efsMountAuth=iam", "efsThroughput=provisioned", "efsProvisionedMibps=64"], cfn=cfn)
        check("deploy", "keep", None, cfn=cfn)
        policy = lab.client("efs").describe_file_system_policy(FileSystemId=efs_id)["Policy"]
        assert "elasticfilesystem:ClientMount" in policy
        put_datasets(lab, ["tiny-jpg"])
        run = lab.run({"name": "iam", "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["EFS"],
                       "instance_type": "ml.m5.xlarge", "compute": "v100"})
        assert run.status == "SUCCEEDED", run.cause


def test_a_disposable_lab_deletes_its_buckets_with_their_contents(emulated, variant):
    disposable = variant("disposable", disposableBucket="true")
    with emulated(ScriptedJobs(), fsx=False) as lab:
        deployer = InProcessDeployer(lab.cloudformation, disposable.outdir)
        deployer.deploy(CORE_STACK, WORKFLOW_STACK)   # an update: the buckets become disposable
        lab.refresh()
        s3 = lab.client("s3")
        s3.put_object(Bucket=lab.bucket, Key="results/x/results.json", Body=b"{}")
        s3.put_object(Bucket=lab.bucket, Key="results/x/results.json", Body=b"{ }")   # two versions
        deployer.destroy(WORKFLOW_STACK)
        deployer.destroy(CORE_STACK)
        assert lab.bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
