"""FSx for Lustre as `dslab size` provisions it: Scratch 2 or Persistent 2 at a throughput tier and capacity.
What the FSx API refuses is refused before synthesis (stacks/config.py) and by the stand-in's CloudFormation,
each rule written from the FSx API reference and the FSx for Lustre User Guide (quoted beside each case)."""

from __future__ import annotations

import json

import pytest

from stacks.config import LabConfig, LabConfigError

from .conftest import cdk_context
from .test_cloudformation_standin import cfn, deploy, reasons, template  # noqa: F401 - the fixture

SUBNET = "subnet-0123456789abcdef0"


def lustre(capacity: int, deployment_type: str, version: str | None = "2.15", **lustre_props) -> dict:
    props = {"FileSystemType": "LUSTRE", "StorageCapacity": capacity, "SubnetIds": [SUBNET],
             "LustreConfiguration": {"DeploymentType": deployment_type, **lustre_props}}
    if version:
        props["FileSystemTypeVersion"] = version
    return {"Type": "AWS::FSx::FileSystem", "Properties": props}


def link(file_system: str = "Fs") -> dict:
    return {"Type": "AWS::FSx::DataRepositoryAssociation",
            "Properties": {"FileSystemId": {"Ref": file_system}, "FileSystemPath": "/datasets",
                           "DataRepositoryPath": "s3://bucket/datasets/", "BatchImportMetaDataOnCreate": True}}


@pytest.mark.parametrize("resource, words", [
    # CreateFileSystemLustreConfiguration PerUnitStorageThroughput: "Required with PERSISTENT_1 and PERSISTENT_2
    # deployment types ... For PERSISTENT_2 SSD storage: 125, 250, 500, 1000 MB/s/TiB."
    (lustre(1200, "PERSISTENT_2"), "125, 250, 500, 1000"),
    (lustre(1200, "PERSISTENT_2", PerUnitStorageThroughput=200), "not 200"),
    # CreateFileSystem StorageCapacity: "For SCRATCH_2, PERSISTENT_2, and PERSISTENT_1 deployment types using SSD
    # storage type, the valid values are 1200 GiB, 2400 GiB, and increments of 2400 GiB."
    (lustre(3600, "PERSISTENT_2", PerUnitStorageThroughput=250), "3600 GiB"),
    (lustre(1000, "SCRATCH_2"), "1000 GiB"),
    # LustreFileSystemConfiguration PerUnitStorageThroughput: "This option is only valid for PERSISTENT_1 and
    # PERSISTENT_2 deployment types."
    (lustre(1200, "SCRATCH_2", PerUnitStorageThroughput=250), "no throughput setting"),
    # Lustre User Guide, older-deployment-types.html: the legacy import path "applies to file systems with Scratch 1
    # deployment type, and also to file systems with Scratch 2 or Persistent 1 deployment types that do not use data
    # repository associations".
    (lustre(1200, "PERSISTENT_2", "2.12", PerUnitStorageThroughput=125, ImportPath="s3://bucket"), "data repository association"),
    # DeploymentType: "If you choose PERSISTENT_2, and you set FileSystemTypeVersion to 2.10, the CreateFileSystem
    # operation fails."
    (lustre(1200, "PERSISTENT_2", "2.10", PerUnitStorageThroughput=125), "Lustre 2.10"),
])
def test_the_stand_in_refuses_what_create_file_system_refuses(cfn, resource, words):  # noqa: F811
    cfn, _ = cfn
    stack = deploy(cfn, "Refused", template({"Fs": resource}))
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    assert words in reasons(cfn, "Refused")


def test_a_data_repository_association_needs_lustre_2_12_or_2_15(cfn):  # noqa: F811
    """CreateDataRepositoryAssociation: "Data repository associations are supported on all FSx for Lustre 2.12 and
    2.15 file systems, excluding scratch_1 deployment type." A Scratch 2 file system left at the default version
    (FileSystemTypeVersion: "Default value is 2.10") cannot be linked; the same at 2.15 can."""
    cfn, client = cfn
    stack = deploy(cfn, "Old", template({"Fs": lustre(1200, "SCRATCH_2", version=None), "Link": link()}))
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE" and "Lustre 2.10" in reasons(cfn, "Old")
    assert deploy(cfn, "New", template({"Fs": lustre(1200, "SCRATCH_2"), "Link": link()}))["StackStatus"] == "CREATE_COMPLETE"


def test_persistent_2_changes_tier_and_grows_in_place_and_never_shrinks(cfn):  # noqa: F811
    """UpdateFileSystem StorageCapacity: "For SCRATCH_2, PERSISTENT_1, and PERSISTENT_2 SSD deployment types, valid
    values are in multiples of 2400 GiB. The value must be greater than the current storage capacity." The
    throughput tier of a Persistent SSD file system may go up or down ("You can modify the throughput tier of a
    persistent SSD-based file system by increasing or decreasing the value", managing-throughput-capacity.html)."""
    cfn, client = cfn
    body = lambda capacity, tier: template({"Fs": lustre(capacity, "PERSISTENT_2", PerUnitStorageThroughput=tier),  # noqa: E731
                                            "Link": link()})
    assert deploy(cfn, "P2", body(2400, 125))["StackStatus"] == "CREATE_COMPLETE"
    (first,) = client("fsx").describe_file_systems()["FileSystems"]
    assert deploy(cfn, "P2", body(4800, 1000))["StackStatus"] == "UPDATE_COMPLETE"
    (grown,) = client("fsx").describe_file_systems()["FileSystems"]
    assert grown["FileSystemId"] == first["FileSystemId"]   # the same file system, not a new one
    # The new tier is its own FILE_SYSTEM_UPDATE, optimizing at first: "The new throughput capacity is then available
    # to the file system, and shows in the PerUnitStorageThroughput property" once COMPLETED
    # (monitoring-throughput-capacity-changes.html); tests/test_deploy_check.py follows it to the end.
    assert (grown["StorageCapacity"], grown["LustreConfiguration"]["PerUnitStorageThroughput"]) == (4800, 125)
    tier = next(a for a in grown["AdministrativeActions"] if "LustreConfiguration" in a["TargetFileSystemValues"])
    assert tier["Status"] == "UPDATED_OPTIMIZING"
    assert tier["TargetFileSystemValues"]["LustreConfiguration"]["PerUnitStorageThroughput"] == 1000
    # "You can only increase the amount of storage capacity for a file system" (managing-storage-capacity.html): the
    # update fails with UpdateFileSystem's BadRequest, and CloudFormation rolls the stack back, the file system kept.
    stack = deploy(cfn, "P2", body(2400, 1000))
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE" and "can only increase" in reasons(cfn, "P2")
    assert "Error Code: BadRequest" in reasons(cfn, "P2")
    (kept,) = client("fsx").describe_file_systems()["FileSystems"]
    assert (kept["FileSystemId"], kept["StorageCapacity"]) == (first["FileSystemId"], 4800)
    # A change of deployment type is a new file system (CloudFormation replaces it), so Scratch 2 at 1,200 GiB
    # after Persistent 2 at 4,800 is no shrink.
    back = template({"Fs": lustre(1200, "SCRATCH_2"), "Link": link()})
    assert deploy(cfn, "P2", back)["StackStatus"] == "UPDATE_COMPLETE"
    (scratch,) = client("fsx").describe_file_systems()["FileSystems"]
    assert scratch["FileSystemId"] != first["FileSystemId"] and scratch["StorageCapacity"] == 1200
    assert scratch["LustreConfiguration"]["DeploymentType"] == "SCRATCH_2"


@pytest.mark.parametrize("overrides, words", [
    ({"fsxDeploymentType": "PERSISTENT_2"}, ["fsxThroughputPerTiB", "125, 250, 500, 1000"]),
    ({"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 200}, ["fsxThroughputPerTiB", "not 200"]),
    ({"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 250, "fsxCapacity": 3600}, ["fsxCapacity", "multiple of 2400"]),
    ({"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 250, "fsxLink": "import-path"},
     ["fsxLink", "data repository association", "-c fsxLink=dra"]),
    ({"fsxThroughputPerTiB": 500}, ["fsxThroughputPerTiB", "SCRATCH_2 has no throughput setting"]),
    ({"fsxDeploymentType": "SCRATCH_1"}, ["fsxDeploymentType", "SCRATCH_2, PERSISTENT_2"]),
    ({"efsThroughput": "elastic"}, ["efsThroughput", "efsPerformance=generalPurpose", "Max I/O"]),
    ({"efsThroughput": "elastic", "efsPerformance": "generalPurpose", "efsProvisionedMibps": 100},
     ["efsProvisionedMibps", "is elastic"]),
])
def test_settings_the_fsx_and_efs_apis_refuse_stop_synthesis_naming_the_setting(overrides, words):
    with pytest.raises(LabConfigError) as err:
        LabConfig.from_mapping(cdk_context(**overrides).get)
    for word in words:
        assert word in str(err.value)


def test_persistent_2_and_elastic_are_settings_the_stack_builds(tmp_path):
    """The deploy command `dslab size` prints for 16 x ml.p4d.24xlarge on the post's scenario C builds exactly
    what it names: Persistent 2 at 1,000 MB/s/TiB and its capacity, linked to S3 by a DRA on Lustre 2.15, with
    the outputs the CLI prices the lab from; EFS Elastic in General Purpose."""
    from .conftest import SynthesizedLab
    lab = SynthesizedLab(tmp_path, fsxDeploymentType="PERSISTENT_2", fsxThroughputPerTiB=1000, fsxCapacity=14400,
                         efsPerformance="generalPurpose", efsThroughput="elastic")
    raw = lab.raw("DataSourceLab-Fsx")
    (fs,) = [r for r in raw["Resources"].values() if r["Type"] == "AWS::FSx::FileSystem"]
    assert fs["Properties"]["StorageCapacity"] == 14400 and fs["Properties"]["FileSystemTypeVersion"] == "2.15"
    assert fs["Properties"]["LustreConfiguration"] == {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 1000}
    assert [r for r in raw["Resources"].values() if r["Type"] == "AWS::FSx::DataRepositoryAssociation"]
    outputs = {k: v["Value"] for k, v in raw["Outputs"].items()}
    assert (outputs["FsxDeploymentType"], outputs["FsxThroughputPerTiB"], outputs["FsxCapacityGiB"]) == ("PERSISTENT_2", "1000", "14400")
    assert "PERSISTENT_2" in raw["Description"]
    lab.core.has_resource_properties("AWS::EFS::FileSystem", {"PerformanceMode": "generalPurpose", "ThroughputMode": "elastic"})
    core = {k: v["Value"] for k, v in lab.raw("DataSourceLab-Core")["Outputs"].items()}
    assert (core["EfsThroughputMode"], core["EfsPerformanceMode"]) == ("elastic", "generalPurpose")
    env = json.dumps(lab.raw("DataSourceLab"))
    assert '"DSLAB_FSX_DEPLOYMENT_TYPE": "PERSISTENT_2"' in env and '"DSLAB_FSX_MBPS_PER_TIB": "1000"' in env


@pytest.mark.parametrize("count", [1, 4, 16, 64])
def test_every_deploy_dslab_size_prints_is_one_the_stack_accepts(capsys, tmp_path, monkeypatch, count):
    """Each row's `make deploy` and the one that sets them all, on cdk.json's context as the Makefile adds CONTEXT
    (-c key=value), pass the stack's own checks (stacks/config.py) and build what the row names; so do they on a
    lab deployed with EFS Elastic (the row keeps it)."""
    from dslab.cli import main

    from .test_one_model import _outputs_file

    def built(command: str) -> LabConfig:
        context = dict(pair.split("=", 1) for pair in command.split('CONTEXT="')[1].split('"')[0].split())
        return LabConfig.from_mapping(cdk_context(**context).get)

    monkeypatch.chdir(tmp_path)
    for deployed in (False, True):
        if deployed:
            _outputs_file(tmp_path, {"efsThroughput": "elastic", "efsPerformance": "generalPurpose"}, fsx_stack=False)
        assert main(["size", "--files", "1530350", "--bytes", "54GB", "--instance", "ml.p4d.24xlarge", "--count",
                     str(count), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        rows = {s["source"]: s for s in data["sources"]}
        commands = [c for s in data["sources"] for c in s["commands"] if c.startswith("make deploy")]
        commands += [data["deploy_all"]["command"]] if "deploy_all" in data else []
        assert commands, count
        for command in commands:
            config = built(command)
            if "fsxDeploymentType" in rows["FSx"]["deploy_settings"] and "FSX=up" in command:
                fsx = rows["FSx"]["deploy_settings"]
                assert (config.fsx_deployment_type, config.fsx_capacity_gib) == (fsx["fsxDeploymentType"], fsx["fsxCapacity"])
                assert config.fsx_mbps_per_tib == fsx.get("fsxThroughputPerTiB")
            if deployed and not rows["EFS"]["deploy_settings"]:
                assert (config.efs_throughput, config.efs_performance) == ("elastic", "generalPurpose"), command


# ---- the run's lab, recorded by Plan and priced by its report ---------------------------------------

class _Fsx:
    def __init__(self, described: dict):
        self.described = described

    def describe_file_systems(self, FileSystemIds):  # noqa: N803 - boto3's argument name
        return {"FileSystems": [self.described]}


WORKFLOW_ENV = {"DSLAB_FSX_DEPLOYMENT_TYPE": "SCRATCH_2", "DSLAB_FSX_CAPACITY_GIB": "1200", "DSLAB_FSX_MBPS_PER_TIB": "200",
                "DSLAB_EFS_THROUGHPUT_MODE": "provisioned", "DSLAB_EFS_THROUGHPUT_MIBPS": "64"}


def test_plan_records_fsx_as_described_and_efs_as_deployed():
    """FSx may have been brought up with other settings than the workflow was deployed with (`make fsx-up
    CONTEXT=...`): Plan records it as DescribeFileSystems gives it; down, as the workflow's settings say."""
    from dslab.core.requests import FileSystemRef
    from dslab.workflow.plan import deployed_lab
    p2 = {"StorageCapacity": 4800, "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 500}}
    up = deployed_lab({"fsx": _Fsx(p2)}, WORKFLOW_ENV, FileSystemRef("fs-0123456789abcdef0", "abcdefgh"))
    assert (up.fsx.deployment_type, up.fsx.capacity_gib, up.fsx.mbps_per_tib) == ("PERSISTENT_2", 4800, 500.0)
    assert (up.efs.mode, up.efs.provisioned_mibps) == ("provisioned", 64.0) and "as described" in up.name
    down = deployed_lab({}, WORKFLOW_ENV, None)
    assert (down.fsx.deployment_type, down.fsx.capacity_gib) == ("SCRATCH_2", 1200) and "deploy settings" in down.name


def _fsx_record(lab: dict | None) -> dict:
    from dslab.core.facts.prices import PriceTable
    from dslab.core.results import record_from_describe
    describe = {"TrainingJobName": "lab-fsx-d-r0", "TrainingJobStatus": "Completed", "BillableTimeInSeconds": 3600,
                "TrainingTimeInSeconds": 3600, "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 1,
                                                                   "VolumeSizeInGB": 100}}
    return record_from_describe(describe, prices=PriceTable(), mode="FSx", dataset="d", repeat=0, files=1000,
                                total_bytes=10**9, lab=lab)


def test_the_report_prices_the_lab_the_run_ran_on(tmp_path):
    """A run on Persistent 2 at 1,000 MB/s/TiB, 4,800 GiB: its FSx job bills that file system's hour (not Scratch 2's),
    and the report says which lab it priced."""
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.provisioning import FsxConfig, Provisioning
    from dslab.report import write_report
    lab = Provisioning(fsx=FsxConfig.persistent2(1000, 4800), name="the lab as deployed (FSx fs-1 as described)")
    record, scratch = _fsx_record(lab.to_dict()), _fsx_record(None)
    prices = PriceTable()
    uptime = record["cost_usd"]["total"] - scratch["cost_usd"]["total"]
    assert uptime == pytest.approx(lab.fsx.hourly(prices) - FsxConfig().hourly(prices), rel=1e-3)
    results = {"experiment": {"name": "p2", "datasets": [{"name": "d", "format": "jpg", "files": 1000, "bytes": 10**9}],
                              "modes": ["FSx"]},
               "backend": "aws", "records": [record], "lab": lab.to_dict(), "fsx_capacity_gib": 1200}
    text = write_report(results, tmp_path / "out")["report.md"].read_text()
    assert "Priced on the lab as deployed (FSx fs-1 as described): FSx Persistent 2 1000 MB/s/TiB, 4,800 GiB" in text


def _efs(mode: str, mibps: int | None = None, performance: str = "generalPurpose") -> dict:
    props = {"PerformanceMode": performance, "ThroughputMode": mode, "Encrypted": True}
    if mibps:
        props["ProvisionedThroughputInMibps"] = mibps
    return {"Type": "AWS::EFS::FileSystem", "Properties": props}


def test_efs_throughput_changes_in_place_within_the_24_hour_rule(cfn):  # noqa: F811
    """What `dslab size` prints for EFS is an update of the lab's file system: UpdateFileSystem changes the mode in
    place, but "any time that you change the file system to Provisioned throughput or increase the provisioned
    throughput amount, you must wait at least 24 hours before you can change the throughput mode again or decrease
    the provisioned amount" (EFS User Guide, managing-throughput.html), and "Amazon EFS restricts the following
    modifications to one change within a 24-hour period: Changing a file system's throughput mode ... Reducing the
    amount of provisioned throughput" (re:Post Knowledge Center, efs-max-throughput-mode-changes): TooManyRequests,
    "You have reached the maximum number of throughput mode changes or provisioned throughput value decreases. Wait
    until YYYY-MM-DDTxx:xx:xxZ UTC and try again." CloudFormation rolls the stack update back. Max I/O with Elastic is
    refused: "Max I/O mode is not supported for One Zone file systems or file systems that use Elastic throughput"
    (performance.html)."""
    import datetime as dt
    cfn, client = cfn
    assert deploy(cfn, "Efs", template({"Fs": _efs("bursting")}))["StackStatus"] == "CREATE_COMPLETE"
    (created,) = client("efs").describe_file_systems()["FileSystems"]
    assert deploy(cfn, "Efs", template({"Fs": _efs("provisioned", 256)}))["StackStatus"] == "UPDATE_COMPLETE"
    (now,) = client("efs").describe_file_systems()["FileSystems"]
    assert now["FileSystemId"] == created["FileSystemId"]
    assert (now["ThroughputMode"], now["ProvisionedThroughputInMibps"]) == ("provisioned", 256)
    assert deploy(cfn, "Efs", template({"Fs": _efs("provisioned", 512)}))["StackStatus"] == "UPDATE_COMPLETE"  # up: allowed
    changes = client.standin.env.efs_throughput_changes
    until = (changes[created["FileSystemId"]] + dt.timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for refused in (_efs("elastic"), _efs("provisioned", 128)):     # a mode change, a decrease
        stack = deploy(cfn, "Efs", template({"Fs": refused}))
        assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
        why = [e["ResourceStatusReason"] for e in cfn.describe_stack_events(StackName="Efs")["StackEvents"]
               if e["LogicalResourceId"] == "Fs" and e["ResourceStatus"] == "UPDATE_FAILED"][0]
        assert "Error Code: TooManyRequests" in why and "Status Code: 429" in why
        assert f"throughput value decreases. Wait until {until} UTC and try again." in why
        (kept,) = client("efs").describe_file_systems()["FileSystems"]
        assert (kept["ThroughputMode"], kept["ProvisionedThroughputInMibps"]) == ("provisioned", 512)
    # 24 hours after the last change (its record moved back: no test waits a day) the decrease goes through, and is
    # itself the one change of the next 24 hours.
    changes[created["FileSystemId"]] -= dt.timedelta(hours=24, seconds=1)
    assert deploy(cfn, "Efs", template({"Fs": _efs("provisioned", 128)}))["StackStatus"] == "UPDATE_COMPLETE"
    stack = deploy(cfn, "Efs", template({"Fs": _efs("elastic")}))
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE" and "TooManyRequests" in reasons(cfn, "Efs")
    stack = deploy(cfn, "MaxIo", template({"Fs": _efs("elastic", performance="maxIO")}))
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE" and "Max I/O" in reasons(cfn, "MaxIo")
