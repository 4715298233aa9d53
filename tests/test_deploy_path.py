"""The user's deploy path, rehearsed offline: the real CDK CLI, run through the Makefile targets the
README names, against the embedded stand-in's CloudFormation. Every value a step needs is read back
from CloudFormation (DescribeStacks), never from a file the test wrote.

The stand-in runs in this process (its server on loopback); training jobs are scripted (what a job
does is the local lab's business: tests/test_local_lab.py). The CLI works in a folder that looks like
the project to make and the CDK CLI (links to the checkout's files), so its cdk.context.json and
cdk.out land there, not in the checkout.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pwd
import socket
import subprocess
import time
from pathlib import Path

import pytest

from dslab.core.requests import CORE_STACK, FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER, FSX_STACK, WORKFLOW_STACK
from dslab.emulator.deploy import CDK, stand_in_environment
from dslab.emulator.lab import EmulatedLab

from .conftest import REPO
from .scripted_jobs import ScriptedJobs
from .test_workflow import put_datasets

pytestmark = pytest.mark.slow

PROJECT_FILES = ("Makefile", "app.py", "cdk.json", "stacks", "dslab", "training", "scripts", "experiments", ".venv",
                 ".venv-scan", "node_modules", "package.json", "package-lock.json", "pyproject.toml",
                 "requirements.txt", "requirements-dev.txt", "requirements-scan.txt")
# The deploy `dslab size` prints for FSx on a cluster, at the smallest Persistent 2 tier and capacity above 1,200 GiB.
PERSISTENT_2 = "fsxDeploymentType=PERSISTENT_2 fsxThroughputPerTiB=125 fsxCapacity=2400"
# ... and for EFS at a provisioned throughput (what `dslab size` prints where the lab's Bursting does not feed it).
EFS_PROVISIONED = "efsThroughput=provisioned efsProvisionedMibps=64"
TINY_RUN = {"name": "lifecycle", "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "modes": ["File", "FSx", "EFS"],
            "instance_type": "ml.m5.xlarge", "compute": "v100"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def project(tmp_path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    for name in PROJECT_FILES:
        (folder / name).symlink_to(REPO / name)
    return folder


class Steps:
    """Runs the user's commands against the stand-in and keeps each one's seconds."""

    def __init__(self, lab: EmulatedLab, project: Path, cdk_home: Path):
        self.lab, self.project = lab, project
        self.env = stand_in_environment(lab.endpoint, cdk_home=cdk_home)
        # Without aws-cdk-lib's built-in CloudFormation validation (`CDK_VALIDATION=false`, its documented switch)
        # but in the first deploy (`validate=True`), as the user runs it: its engine starts in every synthesis,
        # ~6 s of CPU of each of the rehearsal's seven. What it checks is test_infrastructure's subject (every
        # synthesis there runs it, findings as errors); this test's is the path.
        self.env["CDK_VALIDATION"] = "false"
        self.seconds: dict[str, float] = {}

    def run(self, label: str, command: list[str], *, ok: bool = True, stdin: str = "", cwd: Path | None = None,
            validate: bool = False) -> str:
        started = time.monotonic()
        env = {k: v for k, v in self.env.items() if not (validate and k == "CDK_VALIDATION")}
        result = subprocess.run(command, cwd=cwd or self.project, env=env, input=stdin, capture_output=True,
                                text=True, timeout=600)
        self.seconds[label] = round(time.monotonic() - started, 1)
        output = result.stdout + result.stderr
        if ok:
            assert result.returncode == 0, f"{label} failed:\n{output[-4000:]}"
        else:
            assert result.returncode != 0, f"{label} should have failed:\n{output[-2000:]}"
        return output

    # The project's environments are the repository's own (symlinked): never reinstalled from here, even
    # where a requirements file is newer than the last `make setup` (pip would repoint the editable install).
    KEEP = ("-o", ".venv/.installed", "-o", ".venv-scan/.installed", "-o", "node_modules/.installed")

    def make(self, label: str, *args: str, **kwargs) -> str:
        # The Makefile's own CLI, without notices (a request to the internet on every call; see stand_in_environment).
        return self.run(label, ["make", "--no-print-directory", *self.KEEP, f"CDK={CDK} --no-notices", *args], **kwargs)

    def stack(self, name: str) -> dict | None:
        """DescribeStacks, as the user's tools see the stack (None when it does not exist)."""
        try:
            return self.lab.client("cloudformation").describe_stacks(StackName=name)["Stacks"][0]
        except self.lab.client("cloudformation").exceptions.ClientError:
            return None

    def outputs(self, name: str) -> dict[str, str]:
        return {o["OutputKey"]: o["OutputValue"] for o in (self.stack(name) or {}).get("Outputs", [])}


def test_documented_lifecycle_walks_the_cli_deploy_path(project, tmp_path, monkeypatch):
    """bootstrap -> make deploy FSX=up -> dslab run (outputs from CloudFormation) -> make deploy FSX=down ->
    make deploy FSX=up with Persistent 2 (FSx back, as `dslab size` prints it), EFS Provisioned and express=false ->
    an FSx run on it -> deploys back towards cdk.json's settings refused before cdk runs (FSx shrunk in place, EFS's
    throughput within 24 hours) -> make fsx-down -> make fsx-up (back to Scratch 2) -> make destroy -> make
    deploy-again FSX=keep (the kept bucket; FSx stays down).

    All of it with the CLI's own home (CDK_HOME): its account cache goes there, not into the user's ~/.cdk,
    where the stand-in's key mapped to its account would send later syntheses with that key to AWS; and it
    neither fetches notices nor collects telemetry."""
    home = tmp_path / "home"
    home.mkdir()
    # jsii's unpacked aws-cdk-lib (~200 MB) stays where it is: it follows the home too, and is not the CLI's
    monkeypatch.setenv("JSII_RUNTIME_PACKAGE_CACHE_ROOT", os.environ.get("JSII_RUNTIME_PACKAGE_CACHE_ROOT")
                       or str(Path.home() / ".cache" / "aws" / "jsii" / "package-cache"))
    monkeypatch.setenv("HOME", str(home))   # ~/.cdk.json and anything else that follows $HOME
    users_cache_before = _user_cdk_cache()
    with EmulatedLab(None, executor=ScriptedJobs(), efs_root=tmp_path / "efs", server_port=_free_port(),
                     deploy=False, time_scale=0.001) as lab:
        for key, value in stand_in_environment(lab.endpoint, cdk_home=tmp_path / "cdk-home").items():
            if key.startswith(("AWS_", "CDK_")):
                monkeypatch.setenv(key, value)   # the scripted jobs' own S3 client reaches the stand-in too
        steps = Steps(lab, project, tmp_path / "cdk-home")
        cfn = lab.client("cloudformation")

        # The CLI bootstraps the account: its own template, through the stand-in's CloudFormation.
        steps.run("cdk bootstrap", [str(CDK), "bootstrap", "aws://123456789012/us-east-1", "--no-notices"], cwd=tmp_path)
        assert steps.stack("CDKToolkit")["StackStatus"] == "CREATE_COMPLETE"
        assert lab.client("ssm").get_parameter(Name="/cdk-bootstrap/hnb659fds/version")["Parameter"]["Value"]
        private = tmp_path / "cdk-home" / "cache"
        assert json.loads((private / "accounts_partitions.json").read_text())   # the account cache went here ...
        # ... and nowhere else (aws-cdk-lib's own synthesis keeps an asset fingerprint cache in $HOME/.cdk/cache/
        # fingerprints: per folder, bound to no account, with no switch to turn it off)
        assert _user_cdk_cache() == users_cache_before and list((home / ".cdk" / "cache").glob("*.json")) == []
        assert not (private / "notices.json").exists()                          # notices never fetched
        assert "CLI Telemetry is disabled" in steps.run("cdk cli-telemetry --status",
                                                        [str(CDK), "cli-telemetry", "--status"], cwd=tmp_path)

        # make deploy FSX=up: synthesized bound to the account (the CLI's lookups), assets published,
        # three stacks created through change sets, outputs written; no stack exports anything.
        steps.make("make deploy FSX=up", "deploy", "FSX=up", validate=True)   # CloudFormation validation as the user has it
        for name in (CORE_STACK, FSX_STACK, WORKFLOW_STACK):
            assert steps.stack(name)["StackStatus"] == "CREATE_COMPLETE", name
        lab_stacks = {steps.stack(name)["StackId"] for name in (CORE_STACK, FSX_STACK, WORKFLOW_STACK)}
        assert not [e for e in cfn.list_exports()["Exports"] if e["ExportingStackId"] in lab_stacks]
        written = json.loads((project / "cdk-outputs.json").read_text())
        assert written[WORKFLOW_STACK]["StateMachineArn"] == steps.outputs(WORKFLOW_STACK)["StateMachineArn"]
        context = json.loads((project / "cdk.context.json").read_text())
        assert "availability-zones:account=123456789012:region=us-east-1" in context
        assert not (REPO / "cdk.context.json").exists() or "123456789012" not in (REPO / "cdk.context.json").read_text()
        core = steps.outputs(CORE_STACK)
        assert core["AvailabilityZoneId"] == "use1-az4" and core["ExpressEnabled"] == "true"
        assert core["ExpressBucketName"].endswith("--use1-az4--x-s3")

        # dslab run with no outputs file: every stack value comes from CloudFormation.
        (project / "cdk-outputs.json").unlink()
        lab.refresh()
        put_datasets(lab, ["tiny-jpg"])
        experiment = tmp_path / "lifecycle.json"
        experiment.write_text(json.dumps(TINY_RUN))
        fsx_only = tmp_path / "fsx-only.json"
        fsx_only.write_text(json.dumps({**TINY_RUN, "name": "on-persistent-2", "modes": ["FSx"]}))
        out = steps.run("dslab run --wait", [str(REPO / ".venv" / "bin" / "dslab"), "run", "--experiment", str(experiment),
                                             "--wait", "--poll", "1"])
        executions = lab.client("stepfunctions").list_executions(stateMachineArn=lab.state_machine_arn)["executions"]
        assert [e["status"] for e in executions] == ["SUCCEEDED"], out[-2000:]
        results = lab.read_json(f"results/{executions[0]['name']}/results.json")
        assert {r["mode"]: r["status"] for r in results["records"]} == {"File": "Completed", "FSx": "Completed",
                                                                           "EFS": "Completed"}

        # make deploy FSX=down: the rest as it is, then only the FSx stack goes (destroyed from the assembly the deploy
        # synthesized), through CloudFormation; its parameters go with it.
        core_before = steps.stack(CORE_STACK).get("LastUpdatedTime")
        steps.make("make deploy FSX=down", "deploy", "FSX=down")
        assert steps.stack(FSX_STACK) is None
        assert lab.client("ssm").get_parameters(Names=[FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER])["Parameters"] == []
        assert lab.client("fsx").describe_file_systems()["FileSystems"] == []
        assert steps.stack(CORE_STACK).get("LastUpdatedTime") == core_before  # nothing else touched

        # FSx comes back as what `dslab size` prints for a cluster (Persistent 2 at a throughput tier and capacity),
        # in one deploy that also turns S3 Express off (no export can hold the directory bucket: one step); the run
        # that follows records that lab, and `dslab fsx status` prices it. Then make fsx-up puts back cdk.json's
        # Scratch 2, touching only the FSx stack.
        steps.make("make deploy FSX=up CONTEXT=<Persistent 2> <EFS Provisioned> express=false", "deploy", "FSX=up",
                   f"CONTEXT={PERSISTENT_2} {EFS_PROVISIONED} express=false")
        assert steps.stack(FSX_STACK)["StackStatus"] == "CREATE_COMPLETE"
        (fs,) = lab.client("fsx").describe_file_systems()["FileSystems"]
        assert (fs["LustreConfiguration"]["DeploymentType"], fs["LustreConfiguration"]["PerUnitStorageThroughput"],
                fs["StorageCapacity"]) == ("PERSISTENT_2", 125, 2400)
        assert lab.client("fsx").describe_data_repository_associations()["Associations"]   # linked to S3 by a DRA
        assert steps.outputs(FSX_STACK)["FsxDeploymentType"] == "PERSISTENT_2"
        assert lab.client("ssm").get_parameter(Name=FSX_ID_PARAMETER)["Parameter"]["Value"] == fs["FileSystemId"]
        core = steps.outputs(CORE_STACK)
        assert steps.stack(CORE_STACK)["StackStatus"] == "UPDATE_COMPLETE"
        assert core["ExpressEnabled"] == "false" and "ExpressBucketName" not in core
        assert not [b for b in lab.client("s3").list_buckets()["Buckets"] if b["Name"].endswith("--x-s3")]
        plan = [f for f in lab.client("lambda").list_functions()["Functions"] if f["Handler"].endswith(".plan")][0]
        assert "DSLAB_EXPRESS_BUCKET" not in plan["Environment"]["Variables"]
        lab.refresh()
        out = steps.run("dslab run --wait (Persistent 2)", [str(REPO / ".venv" / "bin" / "dslab"), "run", "--experiment",
                                                           str(fsx_only), "--wait", "--poll", "1"])
        latest = sorted(lab.client("stepfunctions").list_executions(stateMachineArn=lab.state_machine_arn)["executions"],
                        key=lambda e: e["startDate"])[-1]
        assert latest["status"] == "SUCCEEDED", out[-2000:]
        ran_on = lab.read_json(f"results/{latest['name']}/results.json")["lab"]
        assert ran_on["fsx_config"]["deployment_type"] == "PERSISTENT_2" and "as described" in ran_on["name"]
        said = steps.run("dslab fsx status (Persistent 2)", [str(REPO / ".venv" / "bin" / "dslab"), "fsx", "status", "--json"])
        status = json.loads(said[said.index("{"):said.rindex("}") + 1])
        assert status["deployment_type"] == "PERSISTENT_2" and status["usd_per_hour"] == pytest.approx(0.145 * 2400 / 730, rel=1e-3)
        # Back towards cdk.json's settings (a deploy's CONTEXT holds for that deploy only), two changes AWS refuses on
        # this lab: Persistent 2 at cdk.json's 1,200 GiB shrinks FSx in place, and cdk.json's Bursting changes EFS's
        # throughput mode within 24 hours of its change to Provisioned. `dslab deploy-check` stops each deploy before
        # anything runs (no cdk, no follow-zone: every stack as it was), naming the setting and the way through: FSx
        # down, then up; the UTC time after which EFS may change (24 hours after CloudFormation changed it).
        efs_changed = max(e["Timestamp"] for e in cfn.describe_stack_events(StackName=CORE_STACK)["StackEvents"]
                          if e["ResourceType"] == "AWS::EFS::FileSystem" and e["ResourceStatus"] == "UPDATE_COMPLETE")
        efs_until = (efs_changed + dt.timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M:%SZ")
        updated = {name: steps.stack(name).get("LastUpdatedTime") for name in (CORE_STACK, FSX_STACK, WORKFLOW_STACK)}
        both = steps.make("make deploy FSX=up CONTEXT=<Persistent 2 at 1,200 GiB> (refused)", "deploy", "FSX=up",
                          "CONTEXT=fsxDeploymentType=PERSISTENT_2 fsxThroughputPerTiB=125", ok=False)
        assert "dslab: error: fsxCapacity and efsThroughput: " in both, both[-2000:]
        again = 'CONTEXT="fsxDeploymentType=PERSISTENT_2 fsxThroughputPerTiB=125"'
        assert f"`make deploy FSX=down {again}`, then `make deploy FSX=up {again}`" in both
        assert f"after {efs_until} UTC" in both
        efs_only = steps.make("make deploy FSX=down (refused)", "deploy", "FSX=down", ok=False)   # FSx's size aside
        assert "dslab: error: efsThroughput: " in efs_only and "fsxCapacity" not in efs_only and efs_until in efs_only
        fsx_only = steps.make("make fsx-up CONTEXT=<Persistent 2 at 1,200 GiB> (refused)", "fsx-up",
                              "CONTEXT=fsxDeploymentType=PERSISTENT_2 fsxThroughputPerTiB=125", ok=False)
        assert "dslab: error: fsxCapacity: " in fsx_only and "`make fsx-down`, then `make fsx-up" in fsx_only   # FSx alone
        for said in (both, efs_only, fsx_only):
            assert "deploy DataSourceLab" not in said and "follow-zone" not in said, said[-2000:]
        assert {name: steps.stack(name).get("LastUpdatedTime") for name in updated} == updated
        # make fsx-down takes Persistent 2 down (only the FSx stack), make fsx-up brings cdk.json's Scratch 2 back.
        core_before = steps.stack(CORE_STACK).get("LastUpdatedTime")
        steps.make("make fsx-down (Persistent 2)", "fsx-down")
        assert steps.stack(FSX_STACK) is None and lab.client("fsx").describe_file_systems()["FileSystems"] == []
        assert lab.client("ssm").get_parameters(Names=[FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER])["Parameters"] == []
        steps.make("make fsx-up (back to Scratch 2)", "fsx-up")
        assert steps.stack(CORE_STACK).get("LastUpdatedTime") == core_before  # nothing else touched
        (back,) = lab.client("fsx").describe_file_systems()["FileSystems"]
        assert back["FileSystemId"] != fs["FileSystemId"]   # another deployment type is another file system
        assert (back["LustreConfiguration"]["DeploymentType"], back["StorageCapacity"]) == ("SCRATCH_2", 1200)
        assert lab.client("ssm").get_parameter(Name=FSX_ID_PARAMETER)["Parameter"]["Value"] == back["FileSystemId"]
        assert steps.outputs(FSX_STACK)["FsxDeploymentType"] == "SCRATCH_2"

        # make destroy: every stack goes; the data bucket (datasets, results) and its policy stay.
        steps.make("make destroy FORCE=yes", "destroy", "FORCE=yes")
        for name in (CORE_STACK, FSX_STACK, WORKFLOW_STACK):
            assert steps.stack(name) is None, name
        bucket = core["BucketName"]
        s3 = lab.client("s3")
        assert s3.list_objects_v2(Bucket=bucket, Prefix="results/")["KeyCount"] > 0
        assert "aws:SecureTransport" in s3.get_bucket_policy(Bucket=bucket)["Policy"]

        # make deploy-again adopts the kept bucket (a plain deploy meets its name and fails "already exists", as on
        # AWS: tests/test_cloudformation_standin.py); FSX=keep leaves FSx as it is, down (FSX=down: above).
        steps.make("make deploy-again FSX=keep", "deploy-again", "FSX=keep")
        assert steps.stack(CORE_STACK)["StackStatus"] == "CREATE_COMPLETE"
        assert steps.stack(WORKFLOW_STACK)["StackStatus"] == "CREATE_COMPLETE"
        assert steps.stack(FSX_STACK) is None
        assert steps.outputs(CORE_STACK)["BucketName"] == bucket
        assert s3.list_objects_v2(Bucket=bucket, Prefix="results/")["KeyCount"] > 0   # nothing stored was lost

        print("\nlifecycle steps (seconds):", json.dumps(steps.seconds))


def _user_cdk_cache() -> dict[str, float]:
    """The user's own CDK CLI cache files (accounts, notices): the CLI finds the home in the password database
    before $HOME."""
    cache = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cdk" / "cache"
    return {p.name: p.stat().st_mtime for p in cache.glob("*.json")} if cache.is_dir() else {}
