"""`dslab deploy-check`, which `make deploy`, `deploy-again` and `fsx-up` run first: a deploy that FSx or EFS would
refuse (FSx shrunk in place; EFS's throughput mode changed or its provisioned throughput lowered within 24 hours of
its last change) stops before anything changes, naming the setting and the way through; every other deploy passes.

The deployed lab is the stand-in's CloudFormation (small stacks under the lab's names, deployed through the real
API), read as the check reads AWS: GetTemplate, the stack outputs, the Core stack's events."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from botocore.stub import Stubber

from dslab.cli import main
from dslab.cli.deploy_check import check
from dslab.core.deploy_guard import last_throughput_change
from dslab.core.errors import ConfigError
from dslab.core.requests import CORE_STACK, FSX_STACK

from .test_cloudformation_standin import cfn, deploy, reasons, template  # noqa: F401 - the fixture
from .test_fsx_deployment_types import _efs, lustre


def core(efs: dict, zone: str = "use1-az4") -> str:
    """The Core stack as far as the check reads it: its EFS file system, its zone and file system outputs."""
    return template({"EfsFileSystem": efs}, outputs={"AvailabilityZoneId": {"Value": zone},
                                                     "EfsFileSystemId": {"Value": {"Ref": "EfsFileSystem"}}})


def fsx(capacity: int, deployment_type: str = "SCRATCH_2", **lustre_props) -> str:
    if deployment_type == "PERSISTENT_2":
        lustre_props.setdefault("PerUnitStorageThroughput", 125)
    return template({"FileSystem": lustre(capacity, deployment_type, **lustre_props)})


def refused(words: list[str] | None, target: str = "deploy", fsx_choice: str = "up", **kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        check(target, fsx_choice, words, **kwargs)
    return str(err.value)


def _utc_time(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)


def later(hours: float) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=hours)


def test_nothing_deployed_passes(cfn):  # noqa: F811 - the fixture
    cfn, _ = cfn
    check("deploy", "up", None, cfn=cfn)                      # first deploy: no stacks
    check("fsx-up", "up", ["fsxCapacity=2400"], cfn=cfn)


def test_an_fsx_shrink_in_place_is_refused_naming_fsx_down_then_up(cfn):  # noqa: F811
    cfn, _ = cfn
    assert deploy(cfn, CORE_STACK, core(_efs("bursting", performance="maxIO")))["StackStatus"] == "CREATE_COMPLETE"
    assert deploy(cfn, FSX_STACK, fsx(2400))["StackStatus"] == "CREATE_COMPLETE"
    said = refused(None, cfn=cfn)          # cdk.json's Scratch 2 at 1,200 GiB
    assert said.startswith("fsxCapacity: ") and "2,400 GiB" in said and "1,200 GiB" in said
    assert "`make deploy FSX=down`, then `make deploy FSX=up`" in said and "fsxCapacity=2400" in said
    said = refused(["express=false"], target="deploy-again", cfn=cfn)   # the deploy's own words come back
    assert ('`make deploy-again FSX=down CONTEXT="express=false"`, then `make deploy-again FSX=up CONTEXT="express=false"`'
            in said)
    said = refused(None, target="fsx-up", cfn=cfn)
    assert "`make fsx-down`, then `make fsx-up`" in said and "efs" not in said.lower()   # fsx-up deploys FSx alone
    assert "`dslab fsx down`, then `dslab fsx up`" in refused(None, target="dslab-fsx-up", cfn=cfn)
    # What leaves the file system as it is, or makes a new one, passes.
    check("deploy", "keep", None, cfn=cfn)                  # FSX=keep deploys no FSx
    check("deploy", "down", None, cfn=cfn)                  # FSX=down removes it
    check("deploy", "up", ["fsxCapacity=2400"], cfn=cfn)    # as it is
    check("deploy", "up", ["fsxCapacity=4800"], cfn=cfn)    # grows in place
    check("deploy", "up", ["fsxDeploymentType=PERSISTENT_2", "fsxThroughputPerTiB=125"], cfn=cfn)   # a new file system
    check("deploy", "up", ["fsxLink=import-path"], cfn=cfn)    # Lustre 2.12 with an import path: a new one too
    check("deploy", "up", ["azId=use1-az6"], cfn=cfn)          # a zone move takes FSx down first (follow-zone)


def test_a_persistent_2_shrink_is_refused_as_a_scratch_2_one(cfn):  # noqa: F811
    cfn, _ = cfn
    assert deploy(cfn, FSX_STACK, fsx(2400, "PERSISTENT_2"))["StackStatus"] == "CREATE_COMPLETE"
    said = refused(["fsxDeploymentType=PERSISTENT_2", "fsxThroughputPerTiB=125"], cfn=cfn)
    assert "FSx for Lustre (PERSISTENT_2) stands at 2,400 GiB" in said
    check("deploy", "up", None, cfn=cfn)                      # back to Scratch 2: replaced, any size


def test_an_efs_throughput_change_within_24_hours_is_refused_naming_the_time_and_the_stand_in_agrees(cfn):  # noqa: F811
    """The check and the stand-in's EFS (what AWS answers) agree: refused within 24 hours of the change, with the same
    UTC time; both pass once the time is past."""
    cfn, client = cfn
    assert deploy(cfn, CORE_STACK, core(_efs("bursting", performance="maxIO")))["StackStatus"] == "CREATE_COMPLETE"
    check("deploy", "keep", ["efsThroughput=provisioned", "efsProvisionedMibps=64"], cfn=cfn)   # created: no change yet
    assert deploy(cfn, CORE_STACK, core(_efs("provisioned", 64, performance="maxIO")))["StackStatus"] == "UPDATE_COMPLETE"
    changed = [e["Timestamp"] for e in cfn.describe_stack_events(StackName=CORE_STACK)["StackEvents"]
               if e["LogicalResourceId"] == "EfsFileSystem" and e["ResourceStatus"] == "UPDATE_COMPLETE"][0]
    until = (changed + dt.timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for fsx_choice in ("up", "keep", "down"):       # every deploy redeploys Core: FSX= does not matter
        said = refused(None, fsx_choice=fsx_choice, cfn=cfn)     # cdk.json's bursting
        assert said.startswith("efsThroughput: ") and f"after {until} UTC" in said
        assert "efsThroughput=provisioned efsProvisionedMibps=64" in said and "TooManyRequests" in said
    said = refused(["efsThroughput=provisioned", "efsProvisionedMibps=32"], cfn=cfn)
    assert said.startswith("efsProvisionedMibps: ") and "provisioned 32 MiB/s" in said
    check("deploy", "up", ["efsThroughput=provisioned", "efsProvisionedMibps=128"], cfn=cfn)   # up: always allowed
    check("deploy", "up", ["efsThroughput=provisioned", "efsProvisionedMibps=64"], cfn=cfn)    # as it is
    # A new performance mode is a new file system (PerformanceMode is create-only), with no such history.
    check("deploy", "up", ["efsPerformance=generalPurpose", "efsThroughput=elastic"], cfn=cfn)
    check("deploy", "keep", None, now=later(24.1), cfn=cfn)
    # The stand-in refuses the same deploy as EFS does, and CloudFormation rolls it back ...
    stack = deploy(cfn, CORE_STACK, core(_efs("bursting", performance="maxIO")))
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert "TooManyRequests" in reasons(cfn, CORE_STACK)
    # EFS's time is its UpdateFileSystem call, just before CloudFormation's UPDATE_COMPLETE, whose time the check
    # counts from: the check's time is never the earlier one.
    aws_until = _utc_time(re.search(r"Wait until (\S+) UTC", reasons(cfn, CORE_STACK)).group(1))
    assert dt.timedelta(0) <= _utc_time(until) - aws_until <= dt.timedelta(seconds=2)
    # ... and the refused update is no change: the check still counts from the first one.
    assert f"after {until} UTC" in refused(None, cfn=cfn)
    # Past the 24 hours (the stand-in's record moved back, the check asked a day later), both let it go.
    client.standin.env.efs_throughput_changes.update(
        {fs: at - dt.timedelta(hours=24) for fs, at in client.standin.env.efs_throughput_changes.items()})
    check("deploy", "up", None, now=later(24.1), cfn=cfn)
    assert deploy(cfn, CORE_STACK, core(_efs("bursting", performance="maxIO")))["StackStatus"] == "UPDATE_COMPLETE"
    # That revert was a change too: another one within 24 hours is refused again.
    said = refused(["efsThroughput=provisioned", "efsProvisionedMibps=64"], cfn=cfn)
    assert said.startswith("efsThroughput: ") and "now bursting" in said


def test_both_refusals_are_said_in_one_line(cfn, capsys, monkeypatch):  # noqa: F811
    cfn, client = cfn
    assert deploy(cfn, CORE_STACK, core(_efs("bursting", performance="maxIO")))["StackStatus"] == "CREATE_COMPLETE"
    assert deploy(cfn, CORE_STACK, core(_efs("provisioned", 64, performance="maxIO")))["StackStatus"] == "UPDATE_COMPLETE"
    assert deploy(cfn, FSX_STACK, fsx(2400))["StackStatus"] == "CREATE_COMPLETE"
    monkeypatch.setattr("boto3.client", lambda service, **kwargs: client(service))
    assert main(["deploy-check", "deploy", "--fsx", "up"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("dslab: error: fsxCapacity and efsThroughput: ")
    assert main(["deploy-check", "deploy", "--fsx", "down"]) == 2     # FSX=down: EFS's alone
    assert capsys.readouterr().err.startswith("dslab: error: efsThroughput: ")


def test_without_credentials_or_access_the_check_leaves_it_to_the_deploy(cfn, capsys):  # noqa: F811
    from botocore.exceptions import NoCredentialsError
    cfn, _ = cfn

    class NoCredentials:
        exceptions = cfn.exceptions

        def describe_stacks(self, **kwargs):
            raise NoCredentialsError()
    check("deploy", "up", None, cfn=NoCredentials())
    assert capsys.readouterr().err == ""                      # silent: the deploy needs them and will say
    with Stubber(cfn) as stub:
        stub.add_client_error("describe_stacks", "AccessDenied", "not allowed: cloudformation:DescribeStacks")
        check("deploy", "up", None, cfn=cfn)
    assert "could not read the deployed lab" in capsys.readouterr().err


def test_a_refused_setting_is_refused_as_synthesis_would(cfn):  # noqa: F811
    cfn, _ = cfn
    with pytest.raises(Exception) as err:
        check("deploy", "up", ["efsThroughput=burst"], cfn=cfn)
    assert "efsThroughput" in str(err.value) and "bursting, provisioned, elastic" in str(err.value)


def _event(status: str, minutes: int, props: dict | None = None, physical: str = "fs-1") -> dict:
    event = {"LogicalResourceId": "Efs", "ResourceType": "AWS::EFS::FileSystem", "ResourceStatus": status,
             "PhysicalResourceId": physical, "Timestamp": dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
             + dt.timedelta(minutes=minutes)}
    if props is not None:
        import json
        event["ResourceProperties"] = json.dumps(props)
    return event


def test_the_last_throughput_change_is_read_from_the_events_properties():
    bursting, p64 = {"ThroughputMode": "bursting"}, {"ThroughputMode": "provisioned", "ProvisionedThroughputInMibps": 64}
    policy_only = {**p64, "FileSystemPolicy": {"Statement": []}}
    created = [_event("CREATE_IN_PROGRESS", 0, bursting, ""), _event("CREATE_COMPLETE", 1, bursting)]
    newest_first = lambda *events: list(reversed(created + list(events)))  # noqa: E731 - DescribeStackEvents' order
    assert last_throughput_change(newest_first(), "Efs") is None                  # created: no change
    changed = newest_first(_event("UPDATE_IN_PROGRESS", 10, p64), _event("UPDATE_COMPLETE", 11, p64))
    assert last_throughput_change(changed, "Efs").minute == 11
    # An update of something else (its policy) is no throughput change; a failed one changed nothing.
    later_events = [_event("UPDATE_IN_PROGRESS", 10, p64), _event("UPDATE_COMPLETE", 11, p64),
                    _event("UPDATE_IN_PROGRESS", 20, policy_only), _event("UPDATE_COMPLETE", 21, policy_only),
                    _event("UPDATE_IN_PROGRESS", 30, bursting), _event("UPDATE_FAILED", 31)]
    assert last_throughput_change(newest_first(*later_events), "Efs").minute == 11
    # An update whose properties are not given may have been one: it counts.
    assert last_throughput_change(newest_first(_event("UPDATE_IN_PROGRESS", 40), _event("UPDATE_COMPLETE", 41)),
                                  "Efs").minute == 41
    # A replacement is a new file system: its history starts there.
    replaced = newest_first(_event("UPDATE_IN_PROGRESS", 10, p64), _event("UPDATE_COMPLETE", 11, p64),
                            _event("UPDATE_IN_PROGRESS", 50, bursting), _event("UPDATE_COMPLETE", 51, bursting, "fs-2"))
    assert last_throughput_change(replaced, "Efs") is None


def fsx_with_id(capacity: int) -> str:
    """The FSx stack as the lab's names its file system (FsxFileSystemId), so the check reads its actions."""
    return template({"FileSystem": lustre(capacity, "SCRATCH_2")},
                    outputs={"FsxFileSystemId": {"Value": {"Ref": "FileSystem"}}})


def test_fsx_grown_again_within_6_hours_of_its_last_increase_is_refused_and_the_stand_in_agrees(cfn):  # noqa: F811
    """"You can't make further storage capacity increases on a file system until 6 hours after the last increase was
    requested, or until the storage optimization process has completed, whichever time is longer" (FSx for Lustre
    User Guide): `dslab size` and `recommend` print a `make deploy` with a larger fsxCapacity, and a second one the
    same day made UpdateFileSystem refuse and CloudFormation roll the stack back. Now the check refuses it first,
    naming the time after which it may go, read from DescribeFileSystems' AdministrativeActions; the stand-in's FSx
    refuses as FSx does."""
    cfn, client = cfn
    fsx_client = client("fsx")
    assert deploy(cfn, FSX_STACK, fsx_with_id(1200))["StackStatus"] == "CREATE_COMPLETE"
    check("fsx-up", "up", ["fsxCapacity=2400"], cfn=cfn, fsx_client=fsx_client)    # the first increase: allowed
    assert deploy(cfn, FSX_STACK, fsx_with_id(2400))["StackStatus"] == "UPDATE_COMPLETE"
    (file_system,) = fsx_client.describe_file_systems()["FileSystems"]
    actions = file_system["AdministrativeActions"]
    assert {a["AdministrativeActionType"] for a in actions} == {"FILE_SYSTEM_UPDATE", "STORAGE_OPTIMIZATION"}
    increased = next(a["RequestTime"] for a in actions if a["AdministrativeActionType"] == "FILE_SYSTEM_UPDATE")
    until = (increased + dt.timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    said = refused(["fsxCapacity=4800"], target="fsx-up", cfn=cfn, fsx_client=fsx_client)
    assert said.startswith("fsxCapacity: ") and f"not before {until}" in said and "fsxCapacity=2400" in said
    assert "6 hours after the last increase was requested" in said
    # The stand-in refuses the same update, and CloudFormation rolls it back; the file system keeps its size.
    stack = deploy(cfn, FSX_STACK, fsx_with_id(4800))
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE" and "6 hours" in reasons(cfn, FSX_STACK)
    assert fsx_client.describe_file_systems()["FileSystems"][0]["StorageCapacity"] == 2400
    # What is not an increase passes: the same size, another deployment type (a new file system), FSX=keep.
    check("fsx-up", "up", ["fsxCapacity=2400"], cfn=cfn, fsx_client=fsx_client)
    check("deploy", "up", ["fsxDeploymentType=PERSISTENT_2", "fsxThroughputPerTiB=125", "fsxCapacity=4800"], cfn=cfn,
          fsx_client=fsx_client)
    check("deploy", "keep", ["fsxCapacity=4800"], cfn=cfn, fsx_client=fsx_client)
    # Past the 6 hours, both let it go.
    check("fsx-up", "up", ["fsxCapacity=4800"], cfn=cfn, fsx_client=fsx_client, now=later(6.1))
    client.standin.env.clock = lambda: later(6.1)
    assert deploy(cfn, FSX_STACK, fsx_with_id(4800))["StackStatus"] == "UPDATE_COMPLETE"


def p2_with_id(tier: int, capacity: int = 2400) -> str:
    """The FSx stack with a Persistent 2 file system at ``tier`` MB/s/TiB, named as the lab names it."""
    return template({"FileSystem": lustre(capacity, "PERSISTENT_2", PerUnitStorageThroughput=tier)},
                    outputs={"FsxFileSystemId": {"Value": {"Ref": "FileSystem"}}})


P2 = ["fsxDeploymentType=PERSISTENT_2", "fsxCapacity=2400"]


def test_a_persistent_2_tier_changed_again_while_the_last_change_optimizes_is_refused_and_the_stand_in_agrees(cfn):  # noqa: F811
    """`dslab size` prints Persistent 2's tier as fsxThroughputPerTiB; CloudFormation changes it in place
    (UpdateFileSystem), and "When you modify a file system's throughput capacity, a FILE_SYSTEM_UPDATE administrative
    action is generated" (monitoring-throughput-capacity-changes.html), UPDATED_OPTIMIZING until COMPLETED. "You can't
    make further throughput capacity changes on a file system until 6 hours after the last request, or until the
    throughput optimization process has completed, whichever time is longer" (managing-throughput-capacity.html): the
    check refuses a second change first, naming the key and the time; the stand-in's FSx refuses it as FSx does, and
    gives the new tier in PerUnitStorageThroughput only once the change is COMPLETED."""
    from dslab.emulator.cloudformation.providers.file_systems import FSX_TIER_OPTIMIZING
    cfn, client = cfn
    fsx_client = client("fsx")
    assert deploy(cfn, FSX_STACK, p2_with_id(125))["StackStatus"] == "CREATE_COMPLETE"
    check("fsx-up", "up", [*P2, "fsxThroughputPerTiB=250"], cfn=cfn, fsx_client=fsx_client)   # the first change: allowed
    assert deploy(cfn, FSX_STACK, p2_with_id(250))["StackStatus"] == "UPDATE_COMPLETE"
    (file_system,) = fsx_client.describe_file_systems()["FileSystems"]
    (action,) = file_system["AdministrativeActions"]
    assert action["AdministrativeActionType"] == "FILE_SYSTEM_UPDATE" and action["Status"] == "UPDATED_OPTIMIZING"
    assert action["TargetFileSystemValues"] == {"LustreConfiguration": {"PerUnitStorageThroughput": 250}}
    assert file_system["LustreConfiguration"]["PerUnitStorageThroughput"] == 125   # shown once COMPLETED
    until = (action["RequestTime"] + dt.timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    said = refused([*P2, "fsxThroughputPerTiB=500"], target="fsx-up", cfn=cfn, fsx_client=fsx_client)
    assert said.startswith("fsxThroughputPerTiB: FSx for Lustre ") and "is deployed at 250 MB/s/TiB" in said
    assert f"not before {until}" in said and "(to 250 MB/s/TiB) is still UPDATED_OPTIMIZING" in said
    assert "keep it with fsxThroughputPerTiB=250 in CONTEXT" in said
    # Down is a change too ("You can increase or decrease"); the tier deployed is no change; FSX=keep deploys no FSx.
    assert refused([*P2, "fsxThroughputPerTiB=125"], target="fsx-up", cfn=cfn, fsx_client=fsx_client)
    check("fsx-up", "up", [*P2, "fsxThroughputPerTiB=250"], cfn=cfn, fsx_client=fsx_client)
    check("deploy", "keep", [*P2, "fsxThroughputPerTiB=500"], cfn=cfn, fsx_client=fsx_client)
    # The stand-in refuses the same update, CloudFormation rolls it back, the tier asked stays 250.
    stack = deploy(cfn, FSX_STACK, p2_with_id(500))
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert "You can't make further throughput capacity changes" in reasons(cfn, FSX_STACK)
    # Optimized (the stand-in's assumed hour) but within the 6 hours: still refused; past them, both let it go.
    client.standin.env.clock = lambda: later(FSX_TIER_OPTIMIZING.total_seconds() / 3600 + 0.1)
    (file_system,) = fsx_client.describe_file_systems()["FileSystems"]
    assert file_system["AdministrativeActions"][0]["Status"] == "COMPLETED"
    assert file_system["LustreConfiguration"]["PerUnitStorageThroughput"] == 250
    said = refused([*P2, "fsxThroughputPerTiB=500"], target="fsx-up", cfn=cfn, fsx_client=fsx_client,
                   now=later(FSX_TIER_OPTIMIZING.total_seconds() / 3600 + 0.1))
    assert f"not before {until}" in said and "still" not in said
    check("fsx-up", "up", [*P2, "fsxThroughputPerTiB=500"], cfn=cfn, fsx_client=fsx_client, now=later(6.1))
    client.standin.env.clock = lambda: later(6.1)
    assert deploy(cfn, FSX_STACK, p2_with_id(500))["StackStatus"] == "UPDATE_COMPLETE"


def test_a_tier_change_is_judged_by_its_own_updates_only():
    from dslab.core.deploy_guard import LustreShape, fsx_throughput_refusal
    now = dt.datetime(2026, 12, 4, 12, tzinfo=dt.timezone.utc)
    at_250, at_1000 = (LustreShape("PERSISTENT_2", 2400, "2.12", False, tier) for tier in (250, 1000))
    tier = {"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "RequestTime": now - dt.timedelta(hours=7),
            "Status": "COMPLETED", "TargetFileSystemValues": {"LustreConfiguration": {"PerUnitStorageThroughput": 250}}}
    assert fsx_throughput_refusal("fs-1", at_250, at_1000, [tier], now, moves_zone=False) is None   # 7 h ago, done
    optimizing = {**tier, "Status": "UPDATED_OPTIMIZING"}   # 7 h ago but still optimizing: "whichever is longer"
    said = fsx_throughput_refusal("fs-1", at_250, at_1000, [optimizing], now, moves_zone=False)
    assert said.startswith("FSx for Lustre fs-1 is deployed at 250 MB/s/TiB and this deploy asks 1000: that change "
                           "(to 250 MB/s/TiB) is still UPDATED_OPTIMIZING.")
    # A failed request changed nothing; a capacity increase an hour ago is storage's rule, not the tier's.
    failed = {**tier, "RequestTime": now - dt.timedelta(hours=1), "Status": "FAILED"}
    capacity = {"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "RequestTime": now - dt.timedelta(hours=1),
                "Status": "COMPLETED", "TargetFileSystemValues": {"StorageCapacity": 2400}}
    assert fsx_throughput_refusal("fs-1", at_250, at_1000, [failed, capacity, tier], now, moves_zone=False) is None
    # A new zone or deployment type is a new file system; Scratch 2 has no tier to change.
    recent = {**tier, "RequestTime": now - dt.timedelta(hours=1)}
    assert fsx_throughput_refusal("fs-1", at_250, at_1000, [recent], now, moves_zone=True) is None
    scratch = LustreShape("SCRATCH_2", 2400, "2.15", False)
    assert fsx_throughput_refusal("fs-1", scratch, at_1000, [recent], now, moves_zone=False) is None
    assert fsx_throughput_refusal("fs-1", at_250, at_250, [recent], now, moves_zone=False) is None


def test_fsx_grown_while_its_storage_optimization_runs_is_refused_saying_how_far_it_is():
    from dslab.core.deploy_guard import LustreShape, fsx_increase_refusal
    now = dt.datetime(2026, 12, 4, 12, tzinfo=dt.timezone.utc)
    before, wanted = LustreShape("SCRATCH_2", 2400, "2.15", False), LustreShape("SCRATCH_2", 4800, "2.15", False)
    old = now - dt.timedelta(hours=9)
    done = [{"AdministrativeActionType": "FILE_SYSTEM_UPDATE", "RequestTime": old, "Status": "COMPLETED",
             "TargetFileSystemValues": {"StorageCapacity": 2400}},
            {"AdministrativeActionType": "STORAGE_OPTIMIZATION", "RequestTime": old, "Status": "COMPLETED"}]
    assert fsx_increase_refusal("fs-1", before, wanted, done, now, moves_zone=False) is None
    running = [done[0], {**done[1], "Status": "IN_PROGRESS", "ProgressPercent": 40}]
    said = fsx_increase_refusal("fs-1", before, wanted, running, now, moves_zone=False)
    assert "storage optimization after that increase is still running (40% done)" in said
    # A failed request changed nothing: it does not count as the last increase.
    failed = [{**done[0], "RequestTime": now - dt.timedelta(hours=1), "Status": "FAILED"}, *done]
    assert fsx_increase_refusal("fs-1", before, wanted, failed, now, moves_zone=False) is None
    # A zone move makes a new file system: no history applies; a shrink is not this rule's.
    assert fsx_increase_refusal("fs-1", before, wanted, running, now, moves_zone=True) is None
    assert fsx_increase_refusal("fs-1", wanted, before, running, now, moves_zone=False) is None


def test_a_run_that_starts_while_fsx_rebalances_marks_its_fsx_results(tmp_path):
    """During storage optimization "you might see decreased file system performance": the workflow's Plan records it
    (it does not wait hours for it), Collect keeps it in the results, and the report says it above the answer."""
    from types import SimpleNamespace

    from dslab.inputs.experiment_file import load_experiment
    from dslab.report import write_report
    from dslab.workflow.plan import storage_optimization

    from .test_answer import _synthetic_results
    running = {"AdministrativeActionType": "STORAGE_OPTIMIZATION", "Status": "IN_PROGRESS", "ProgressPercent": 35,
               "RequestTime": dt.datetime(2026, 12, 4, 9, tzinfo=dt.timezone.utc)}

    class Fsx:
        def __init__(self, actions):
            self.actions = actions

        def describe_file_systems(self, FileSystemIds):   # noqa: N803 - botocore's names
            return {"FileSystems": [{"FileSystemId": FileSystemIds[0], "AdministrativeActions": self.actions}]}
    ref = SimpleNamespace(file_system_id="fs-0123456789abcdef0")
    found = storage_optimization({"fsx": Fsx([running])}, ref)
    assert found == {"file_system": "fs-0123456789abcdef0", "action": "STORAGE_OPTIMIZATION", "status": "IN_PROGRESS",
                     "progress_percent": 35, "since": "2026-12-04T09:00:00+00:00"}
    assert storage_optimization({"fsx": Fsx([{**running, "Status": "COMPLETED"}])}, ref) is None
    assert storage_optimization({"fsx": Fsx([running])}, None) is None   # FSx down
    from .conftest import REPO
    experiment = load_experiment(REPO / "experiments" / "post-12-jobs.yaml")
    results = {**_synthetic_results(experiment, backend="aws"), "fsx_storage_optimization": found}
    report = write_report(results, tmp_path / "report")["report.md"].read_text()
    assert "FSx fs-0123456789abcdef0 was rebalancing its storage after a capacity increase" in report
    assert "(35% done)" in report and report.index("rebalancing") < report.index("### ")
    plain = write_report(_synthetic_results(experiment, backend="aws"), tmp_path / "plain")["report.md"].read_text()
    assert "rebalancing" not in plain


def test_a_run_during_a_throughput_tier_change_is_marked_with_the_tier_and_the_user_guides_words():
    """A Persistent 2 tier change is a FILE_SYSTEM_UPDATE of its own: reads run "between the previous level and the new
    level" until it completes, so the run's FSx figures are neither tier's, and the report says which change it was."""
    from dslab.report import storage_optimization_note
    note = storage_optimization_note({"file_system": "fs-0abc", "action": "FILE_SYSTEM_UPDATE",
                                      "status": "UPDATED_OPTIMIZING", "progress_percent": None,
                                      "target_mbps_per_tib": 500})
    assert note.startswith("FSx fs-0abc was changing its throughput tier to 500 MB/s/TiB when this run started "
                           "(UPDATED_OPTIMIZING): \"Your read operations will see disk I/O performance between the "
                           "previous level and the new level until your file system is no longer in this state\"")
    assert note.endswith("once `dslab fsx status` shows the change COMPLETED") and "rebalancing" not in note
    capacity = storage_optimization_note({"action": "STORAGE_OPTIMIZATION", "status": "IN_PROGRESS",
                                          "progress_percent": 35})
    assert capacity.startswith("FSx was rebalancing its storage after a capacity increase when this run started "
                               "(35% done)")
