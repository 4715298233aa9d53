"""`dslab doctor` against the stand-in (moto's EC2 zones and instance-type offerings, FSx), and its bad input."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from dslab.cli import main
from dslab.core.errors import ConfigError
from dslab.aws.doctor import check_zone, sagemaker_training_types


@pytest.fixture
def aws():
    with mock_aws():
        yield boto3.client("ec2", region_name="us-east-1"), boto3.client("fsx", region_name="us-east-1")


def offered_in(ec2, ec2_type: str) -> list[str]:
    """What the stand-in itself says, so the test follows moto's data rather than a copy of it."""
    offerings = ec2.describe_instance_type_offerings(
        LocationType="availability-zone-id", Filters=[{"Name": "instance-type", "Values": [ec2_type]}])
    return sorted(o["Location"] for o in offerings["InstanceTypeOfferings"])


def test_zone_offering_the_type_passes_and_names_every_suitable_zone(aws):
    ec2, fsx = aws
    zones = offered_in(ec2, "p4d.24xlarge")
    assert zones and len(zones) < 6, "the stand-in offers p4d in some zones of us-east-1 but not all"
    report = check_zone(ec2, fsx, region="us-east-1", az_id=zones[0], instance_types=["ml.p4d.24xlarge"])
    assert report.ok and report.missing == []
    assert report.suitable_zones == zones
    assert report.zone_name and report.zone_name.startswith("us-east-1")
    assert report.offered == {"ml.p4d.24xlarge": zones}


def test_zone_without_the_type_fails_and_says_where_to_go(aws):
    ec2, fsx = aws
    zones = offered_in(ec2, "p4d.24xlarge")
    lacking = next(z for z in offered_in(ec2, "g5.xlarge") if z not in zones)
    report = check_zone(ec2, fsx, region="us-east-1", az_id=lacking, instance_types=["ml.p4d.24xlarge", "ml.g5.xlarge"])
    assert not report.ok and report.missing == ["ml.p4d.24xlarge"]
    both = sorted(set(zones) & set(offered_in(ec2, "g5.xlarge")))
    assert report.suitable_zones == both
    text = "\n".join(report.lines())
    assert f"ml.p4d.24xlarge: NOT offered in {lacking}" in text
    assert f"-c azId={both[0]}" in text
    assert "proxy" in text and "FSx for Lustre" in text and "no per-zone offering" in text


def test_doctor_command_exit_codes_and_json(aws, capsys):
    ec2, _ = aws
    zones = offered_in(ec2, "g5.xlarge")
    assert main(["doctor", "--az-id", zones[0], "--instance-type", "ml.g5.xlarge", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["az_id"] == zones[0] and data["suitable_zones"] == zones
    assert any("proxy" in note for note in data["notes"])
    lacking = next(z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]
                   if z["ZoneId"] not in offered_in(ec2, "p4d.24xlarge"))
    assert main(["doctor", "--az-id", lacking, "--instance-type", "ml.p4d.24xlarge"]) == 1
    assert "NOT offered" in capsys.readouterr().out


def test_doctor_reads_the_experiment_instance_types(aws, tmp_path, capsys):
    ec2, _ = aws
    experiment = tmp_path / "e.yaml"
    experiment.write_text("name: zcheck\ninstance_type: ml.g5.xlarge\ncompute: v100\ntrials:\n  - name: small\n  - name: big\n    instance_type: ml.p5.48xlarge\n")
    zone = sorted(set(offered_in(ec2, "g5.xlarge")) & set(offered_in(ec2, "p5.48xlarge")))[0]
    assert main(["doctor", "--az-id", zone, "--experiment", str(experiment), "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["training_offered_in"]) == {"ml.g5.xlarge", "ml.p5.48xlarge"}


@pytest.mark.parametrize("argv, words", [
    (["--az-id", "us-east-1a", "--instance-type", "ml.g5.xlarge"], ["azId", "use1-az<N>", "describe-availability-zones"]),
    (["--az-id", "euw1-az1", "--instance-type", "ml.g5.xlarge"], ["azId", "not a zone of region us-east-1"]),
    (["--az-id", "use1-az9", "--instance-type", "ml.g5.xlarge"], ["azId", "use1-az9 is not a zone of us-east-1", "use1-az1"]),
    (["--az-id", "use1-az1", "--instance-type", "ml.p9.2xlarge"], ["instance_type", "ml.p9.2xlarge", "not a SageMaker training instance type"]),
    (["--az-id", "use1-az1", "--instance-type", "p3.2xlarge"], ["instance_type", "'p3.2xlarge'", "ml.p3.2xlarge"]),
])
def test_bad_input_names_the_field_and_exits_2(aws, capsys, argv, words):
    assert main(["doctor", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    for word in words:
        assert word in err, err


def test_training_types_come_from_the_sagemaker_model():
    types = sagemaker_training_types()
    assert "ml.p3.2xlarge" in types and "ml.p5.48xlarge" in types and "ml.t2.micro" not in types


class FakeEc2:
    """The real API's answers for a V100 type (moto's data has no p3): offered in two zone IDs."""

    def __init__(self, zones, offered):
        self.zones, self.offered = zones, offered

    def describe_availability_zones(self, **_):
        return {"AvailabilityZones": [{"ZoneId": z, "ZoneName": f"us-east-1{chr(97 + i)}", "State": "available",
                                       "ZoneType": "availability-zone"} for i, z in enumerate(self.zones)]}

    def get_paginator(self, name):
        assert name == "describe_instance_type_offerings"
        offered = self.offered

        class Paginator:
            def paginate(self, LocationType, Filters):
                assert LocationType == "availability-zone-id"
                ec2_type = Filters[0]["Values"][0]
                yield {"InstanceTypeOfferings": [{"InstanceType": ec2_type, "LocationType": LocationType, "Location": z}
                                                 for z in offered.get(ec2_type, [])]}
        return Paginator()


class FakeFsx:
    def __init__(self, error=None):
        self.error = error

    def describe_file_systems(self, **_):
        if self.error:
            raise self.error
        return {"FileSystems": []}


def test_injected_clients_p3_and_an_fsx_that_does_not_answer():
    from botocore.exceptions import ClientError
    ec2 = FakeEc2(["use1-az1", "use1-az2", "use1-az3", "use1-az4"], {"p3.2xlarge": ["use1-az2", "use1-az4"]})
    good = check_zone(ec2, FakeFsx(), region="us-east-1", az_id="use1-az4", instance_types=["ml.p3.2xlarge"])
    assert good.ok and good.suitable_zones == ["use1-az2", "use1-az4"]
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "DescribeFileSystems")
    bad = check_zone(ec2, FakeFsx(denied), region="us-east-1", az_id="use1-az3", instance_types=["ml.p3.2xlarge"])
    assert not bad.ok and bad.missing == ["ml.p3.2xlarge"] and not bad.fsx_ok
    assert "AccessDeniedException" in "\n".join(bad.lines())


def test_no_instance_type_is_bad_input():
    with pytest.raises(ConfigError) as err:
        check_zone(FakeEc2(["use1-az1"], {}), FakeFsx(), region="us-east-1", az_id="use1-az1", instance_types=[])
    assert "instance_type" in str(err.value)


def test_express_zone_table_decides_when_the_experiment_has_express_trials(aws):
    """S3 Express One Zone exists only in the S3 User Guide's listed zone IDs (use1-az4/5/6 in us-east-1)."""
    ec2, fsx = aws
    g5 = offered_in(ec2, "g5.xlarge")
    with_express = [z for z in g5 if z in ("use1-az4", "use1-az5", "use1-az6")]
    without = [z for z in g5 if z not in ("use1-az4", "use1-az5", "use1-az6")]
    assert with_express and without, "the stand-in offers g5 in zones with and without Express"
    lacking = check_zone(ec2, fsx, region="us-east-1", az_id=without[0], instance_types=["ml.g5.xlarge"], needs_express=True)
    assert not lacking.ok and not lacking.express_ok
    assert lacking.suitable_zones == with_express
    text = "\n".join(lacking.lines())
    assert f"S3 Express One Zone: NOT offered in {without[0]}: the experiment's Express trials cannot run here" in text
    assert "use1-az4, use1-az5, use1-az6" in text and f"-c azId={with_express[0]}" in text
    # Without Express trials the same zone suits: the lab deploys there without the directory bucket.
    plain = check_zone(ec2, fsx, region="us-east-1", az_id=without[0], instance_types=["ml.g5.xlarge"])
    assert plain.ok and "deploys without it here" in "\n".join(plain.lines())
    here = check_zone(ec2, fsx, region="us-east-1", az_id=with_express[0], instance_types=["ml.g5.xlarge"], needs_express=True)
    assert here.ok and "S3 Express One Zone: offered in" in "\n".join(here.lines())


def test_doctor_reads_express_trials_from_the_experiment(aws, capsys, tmp_path):
    """An experiment with an Express trial needs a zone with S3 Express One Zone."""
    ec2, _ = aws
    g5 = offered_in(ec2, "g5.xlarge")
    without = [z for z in g5 if z not in ("use1-az4", "use1-az5", "use1-az6")]
    assert without
    experiment = tmp_path / "express.yaml"
    experiment.write_text("name: x\ndatasets: [caltech-jpg-1x]\ninstance_type: ml.g5.xlarge\ncompute: v100\n"
                          "trials:\n  - {name: base, modes: [File]}\n  - {name: express, storage: express, modes: [FastFile]}\n")
    assert main(["doctor", "--az-id", without[0], "--experiment", str(experiment), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["needs_express"] and not data["express_ok"] and data["express_zones"] == ["use1-az4", "use1-az5", "use1-az6"]


def test_a_region_full_of_logs_resource_policies_is_said_before_a_deploy_fails_on_it(aws):
    """CloudWatch Logs holds at most 10 resource policies per account and region; the lab adds one."""
    ec2, fsx = aws
    logs = boto3.client("logs", region_name="us-east-1")
    zone = offered_in(ec2, "g5.xlarge")[0]
    for i in range(10):
        logs.put_resource_policy(policyName=f"other-{i}", policyDocument='{"Version": "2012-10-17", "Statement": []}')
    full = check_zone(ec2, fsx, region="us-east-1", az_id=zone, instance_types=["ml.g5.xlarge"], logs=logs)
    assert not full.ok and not full.logs_policy_ok
    assert "10 resource policies" in "\n".join(full.lines()) and "LimitExceededException" in "\n".join(full.lines())
    logs.delete_resource_policy(policyName="other-0")
    logs.put_resource_policy(policyName="DataSourceLab-DataSync", policyDocument='{"Version": "2012-10-17", "Statement": []}')
    assert check_zone(ec2, fsx, region="us-east-1", az_id=zone, instance_types=["ml.g5.xlarge"], logs=logs).ok  # the lab's own


def test_doctor_reads_the_accounts_fsx_storage_quota_and_says_when_the_labs_fsx_is_past_it(aws, capsys, monkeypatch, tmp_path):
    """The applied FSx for Lustre storage quota of the lab's deployment type (looked up by its Service Quotas name), against
    the lab's FSx as deployed or as cdk.json builds it: past it, the doctor fails (exit 1) and prints the request."""
    from dslab.emulator import patches
    from dslab.emulator.patches.hooks import HOOKS
    patches.install()
    monkeypatch.chdir(tmp_path)   # no cdk-outputs.json here: the lab as cdk.json builds it (Scratch 2, 1,200 GiB)
    ec2, _ = aws
    zone = offered_in(ec2, "g5.xlarge")[0]
    assert main(["doctor", "--az-id", zone, "--instance-type", "ml.g5.xlarge", "--json"]) == 0
    quota = json.loads(capsys.readouterr().out)["fsx_quota"]
    assert (quota["quota"], quota["code"], quota["applied_gib"], quota["lab_fsx_gib"], quota["ok"]) == \
        ("Lustre Scratch storage capacity", "L-AD2FC696", 100_800, 1200, True)
    monkeypatch.setitem(HOOKS.fsx_quotas, "Lustre Scratch storage capacity", 0.0)   # an account that was lowered
    assert main(["doctor", "--az-id", zone, "--instance-type", "ml.g5.xlarge"]) == 1
    said = capsys.readouterr().out
    assert ('FSx storage quota: "Lustre Scratch storage capacity" (L-AD2FC696): 0 GiB applied; the lab\'s 1,200 GiB '
            "SCRATCH_2 does NOT fit: aws service-quotas request-service-quota-increase --service-code fsx --quota-code "
            "L-AD2FC696 --desired-value 1200") in said
