"""`dslab doctor`'s zone check (dslab/aws/doctor.py): whether the configured zone ID suits the experiment, line by line
(the zone, each training instance type's EC2 offering, FSx for Lustre, the account's FSx storage quota, S3 Express One
Zone, CloudWatch Logs' resource policies, the zones that suit and how to move the lab there), and its reactions to AWS:
FSx not answering, the resource policies or the FSx quota not read, and why. EC2, FSx, CloudWatch Logs and Service
Quotas are hand-built stand-ins answering as their APIs do (moto's zones are all standard and available, and its
clients cannot be made to fail one call); one test runs the real clients against moto. The expected lines are written
here."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from dslab.aws.doctor import ZoneReport, check_zone, fsx_quota_check, fsx_quota_line, validate_instance_types
from dslab.core.errors import ConfigError
from dslab.core.model.provisioning import FsxConfig

NOTES = [
    "note: training: SageMaker runs ml.<type> on EC2 <type> hardware but publishes no per-zone offering; the EC2 "
    "offering per zone ID is a proxy (without it the job cannot run there; with it, it very likely can)",
    "note: FSx for Lustre: AWS publishes no per-zone offering; checked that the zone is a standard, available zone and "
    "that FSx answers in the region; only `make fsx-up` proves the zone",
    "note: S3 Express One Zone: the S3 User Guide's table, "
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-Endpoints.html (read 2026-11-30)",
]
FSX_ANSWERS = ("  FSx for Lustre: FSx answers in the region and the zone is a standard, available zone (no per-zone "
               "offering is published: a proxy)")
EXPRESS_ZONES_LINE = "zone IDs with it in us-east-1: use1-az4, use1-az5, use1-az6"
MOVE = " (in cdk.json or on the deploy command); a deployed lab moves by `make destroy` then `make deploy-again`"
FULL_LOGS = ("  CloudWatch Logs: the region already holds {n} resource policies, the most it takes: the lab's DataSync "
             "log policy (DataSourceLab-DataSync) cannot be added and the deploy would fail (LimitExceededException); "
             "remove one (aws logs describe-resource-policies)")
SCRATCH_REQUEST = ("aws service-quotas request-service-quota-increase --service-code fsx --quota-code L-AD2FC696 "
                   "--desired-value 2400")

# us-east-1 as DescribeAvailabilityZones(AllAvailabilityZones=True) answers it: an impaired zone, a local zone, and one
# zone as older answers give it, without ZoneType (a standard zone).
ZONES = [
    {"ZoneId": "use1-az1", "ZoneName": "us-east-1a", "State": "available", "ZoneType": "availability-zone"},
    {"ZoneId": "use1-az2", "ZoneName": "us-east-1b", "State": "available", "ZoneType": "availability-zone"},
    {"ZoneId": "use1-az3", "ZoneName": "us-east-1c", "State": "impaired", "ZoneType": "availability-zone"},
    {"ZoneId": "use1-az4", "ZoneName": "us-east-1d", "State": "available"},
    {"ZoneId": "use1-az5", "ZoneName": "us-east-1e", "State": "available", "ZoneType": "availability-zone"},
    {"ZoneId": "use1-az6", "ZoneName": "us-east-1f", "State": "available", "ZoneType": "availability-zone"},
    {"ZoneId": "use1-bos1-az1", "ZoneName": "us-east-1-bos-1a", "State": "available", "ZoneType": "local-zone"},
]
# DescribeInstanceTypeOfferings by EC2 type: its pages, each the zone IDs it lists (None: a page without offerings,
# the key left out), in no order and with a zone on two pages.
OFFERED = {
    "g5.xlarge": [["use1-az6", "use1-az1"], None, ["use1-az2", "use1-az4", "use1-az1"]],
    "p3.2xlarge": [["use1-az4", "use1-az2"], ["use1-az3"]],
    "p5.48xlarge": [None],
}


def _error(code: str, message: str, operation: str, status: int = 400, retries: int = 0) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": retries}}, operation)


class Ec2:
    """DescribeAvailabilityZones and the DescribeInstanceTypeOfferings paginator; every request kept in ``calls``."""

    def __init__(self, zones=ZONES, offered=OFFERED):
        self.zones, self.offered, self.calls = zones, offered, []

    def describe_availability_zones(self, **kwargs):
        self.calls.append(("DescribeAvailabilityZones", kwargs))
        return {"AvailabilityZones": [dict(z) for z in self.zones]}

    def get_paginator(self, name):
        self.calls.append(("get_paginator", name))
        assert name == "describe_instance_type_offerings", name   # botocore: OperationNotPageableError
        ec2 = self

        class Paginator:
            def paginate(self, **kwargs):
                ec2.calls.append(("DescribeInstanceTypeOfferings", kwargs))
                where = kwargs.get("LocationType", "region")
                names = {z["ZoneId"]: z.get("ZoneName") for z in ec2.zones}
                (wanted,) = [f["Values"] for f in kwargs.get("Filters", []) if f["Name"] == "instance-type"]
                for ec2_type in wanted:
                    for page in ec2.offered.get(ec2_type, [[]]):
                        if page is None:
                            yield {}
                            continue
                        location = {"availability-zone-id": lambda z: z, "availability-zone": names.get}[where]
                        yield {"InstanceTypeOfferings": [{"InstanceType": ec2_type, "LocationType": where,
                                                          "Location": location(z)} for z in page]}
        return Paginator()


class Fsx:
    def __init__(self, error=None):
        self.error, self.calls = error, []

    def describe_file_systems(self, **kwargs):
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return {"FileSystems": []}


class Logs:
    """DescribeResourcePolicies: the region's policies by name, an answer without the list (none), or an error."""

    def __init__(self, names=None, error=None):
        self.names, self.error = names, error

    def describe_resource_policies(self, **_):
        if self.error is not None:
            raise self.error
        if self.names is None:
            return {}
        return {"resourcePolicies": [{"policyName": n, "policyDocument": "{}", "lastUpdatedTime": 1}
                                     for n in self.names]}


class ServiceQuotas:
    """ListAWSDefaultServiceQuotas and ListServiceQuotas by service code: (name, code, value) triples, or an error."""

    def __init__(self, defaults=(), applied=(), error=None):
        self.lists = {"list_aws_default_service_quotas": defaults, "list_service_quotas": applied}
        self.error, self.calls = error, []

    def get_paginator(self, name):
        quotas, error, calls = self.lists[name], self.error, self.calls

        class Paginator:
            def paginate(self, ServiceCode, PaginationConfig=None):
                calls.append((name, ServiceCode))
                if error is not None:
                    raise error
                yield {"Quotas": [{"ServiceCode": ServiceCode, "QuotaName": n, "QuotaCode": c, "Value": v}
                                  for s, n, c, v in quotas if s == ServiceCode]}
        return Paginator()


SCRATCH_DEFAULT = ("fsx", "Lustre Scratch storage capacity", "L-AD2FC696", 100800.0)


def _check(az_id="use1-az4", types=("ml.g5.xlarge", "ml.p3.2xlarge"), **kwargs):
    return check_zone(kwargs.pop("ec2", None) or Ec2(), kwargs.pop("fsx", None) or Fsx(), region="us-east-1",
                      az_id=az_id, instance_types=list(types), **kwargs)


# ---- the zone and its lines ----------------------------------------------------------------------------------------

def test_a_zone_that_suits_everything_says_so_line_by_line_and_suggests_no_move():
    report = _check()
    assert report.ok
    assert report.lines() == [
        "zone use1-az4 (us-east-1d in this account), region us-east-1: available",
        "  ml.g5.xlarge: offered in use1-az4 (EC2 offering; offered in: use1-az1, use1-az2, use1-az4, use1-az6)",
        "  ml.p3.2xlarge: offered in use1-az4 (EC2 offering; offered in: use1-az2, use1-az3, use1-az4)",
        FSX_ANSWERS,
        "  S3 Express One Zone: offered in use1-az4",
        "zone IDs offering every instance type: use1-az2, use1-az4",
        *NOTES]


def test_the_report_as_json_holds_every_field():
    report = _check()
    assert report.to_dict() == {
        "region": "us-east-1", "az_id": "use1-az4", "zone_name": "us-east-1d", "ok": True, "zone_available": True,
        "training_offered_in": {"ml.g5.xlarge": ["use1-az1", "use1-az2", "use1-az4", "use1-az6"],
                                "ml.p3.2xlarge": ["use1-az2", "use1-az3", "use1-az4"]},
        "missing_in_zone": [], "fsx_ok": True, "fsx_detail": FSX_ANSWERS.removeprefix("  FSx for Lustre: "),
        "express_ok": True, "express_zones": ["use1-az4", "use1-az5", "use1-az6"], "needs_express": False,
        "suitable_zones": ["use1-az2", "use1-az4"], "logs_resource_policies": None, "logs_policy_ok": True,
        "fsx_quota": None, "notes": [n.removeprefix("note: ") for n in NOTES]}


def test_the_standard_zones_are_the_available_availability_zones_of_the_account():
    report = _check()
    # use1-az3 is impaired and use1-bos1-az1 a local zone; use1-az4 has no ZoneType: a standard zone.
    assert report.standard_zones == ["use1-az1", "use1-az2", "use1-az4", "use1-az5", "use1-az6"]
    assert report.zone_name == "us-east-1d" and report.needs_express is False
    assert report.express_zones == ["use1-az4", "use1-az5", "use1-az6"]
    assert report.logs_policies is None and report.fsx_quota is None
    assert report.logs_detail == "" and report.quota_detail == ""


def test_a_zone_without_a_type_fails_and_names_the_first_suitable_zone_to_move_to():
    report = _check("use1-az1", ["ml.p3.2xlarge"])
    assert not report.ok and report.missing == ["ml.p3.2xlarge"]
    assert report.lines() == [
        "zone use1-az1 (us-east-1a in this account), region us-east-1: available",
        "  ml.p3.2xlarge: NOT offered in use1-az1 (EC2 offering; offered in: use1-az2, use1-az3, use1-az4)",
        FSX_ANSWERS,
        f"  S3 Express One Zone: NOT offered in use1-az1: the lab deploys without it here (express=auto) "
        f"({EXPRESS_ZONES_LINE})",
        "zone IDs offering every instance type: use1-az2, use1-az4",
        "to move the lab: -c azId=use1-az2" + MOVE,
        *NOTES]
    assert report.to_dict()["missing_in_zone"] == ["ml.p3.2xlarge"] and report.to_dict()["ok"] is False


def test_express_trials_need_a_zone_with_express_and_narrow_the_suitable_zones():
    report = _check("use1-az1", ["ml.g5.xlarge"], needs_express=True)
    assert not report.ok and report.missing == [] and not report.express_ok
    assert report.suitable_zones == ["use1-az4", "use1-az6"]   # g5.xlarge's zones that have Express
    assert report.lines() == [
        "zone use1-az1 (us-east-1a in this account), region us-east-1: available",
        "  ml.g5.xlarge: offered in use1-az1 (EC2 offering; offered in: use1-az1, use1-az2, use1-az4, use1-az6)",
        FSX_ANSWERS,
        f"  S3 Express One Zone: NOT offered in use1-az1: the experiment's Express trials cannot run here "
        f"({EXPRESS_ZONES_LINE})",
        "zone IDs offering every instance type and S3 Express One Zone: use1-az4, use1-az6",
        "to move the lab: -c azId=use1-az4" + MOVE,
        *NOTES]
    assert report.to_dict()["needs_express"] is True and report.to_dict()["express_ok"] is False
    # Without Express trials the same zone suits: the lab deploys there without the directory bucket.
    plain = _check("use1-az1", ["ml.g5.xlarge"])
    assert plain.ok and plain.suitable_zones == ["use1-az1", "use1-az2", "use1-az4", "use1-az6"]


def test_a_type_no_zone_offers_leaves_no_zone_to_move_to():
    report = _check("use1-az1", ["ml.p5.48xlarge"])
    assert not report.ok and report.suitable_zones == []
    assert report.offered == {"ml.p5.48xlarge": []}
    assert report.lines()[1] == ("  ml.p5.48xlarge: NOT offered in use1-az1 (EC2 offering; offered in: no zone of "
                                 "the region)")
    assert report.lines()[-4:] == ["zone IDs offering every instance type: none in this region", *NOTES]
    assert not any(line.startswith("to move the lab") for line in report.lines())


def test_an_impaired_zone_is_not_available_nor_shown_to_hold_fsx_and_is_no_zone_to_move_to():
    report = _check("use1-az3", ["ml.p3.2xlarge"])
    assert not report.zone_ok and not report.fsx_ok and not report.ok and report.missing == []
    assert report.fsx_detail == "the zone is not a standard, available zone"
    assert report.suitable_zones == ["use1-az2", "use1-az4"]   # the type's zones, use1-az3 left out
    assert report.lines()[:3] == [
        "zone use1-az3 (us-east-1c in this account), region us-east-1: NOT an available standard Availability Zone",
        "  ml.p3.2xlarge: offered in use1-az3 (EC2 offering; offered in: use1-az2, use1-az3, use1-az4)",
        "  FSx for Lustre: the zone is not a standard, available zone"]
    assert "to move the lab: -c azId=use1-az2" + MOVE in report.lines()
    data = report.to_dict()
    assert (data["zone_available"], data["fsx_ok"], data["ok"]) == (False, False, False)


def test_a_zone_without_a_name_and_a_region_without_express():
    ec2 = Ec2([{"ZoneId": "cac1-az1", "State": "available", "ZoneType": "availability-zone"},
               {"ZoneId": "cac1-az2", "ZoneName": "ca-central-1b", "State": "available",
                "ZoneType": "availability-zone"}],
              {"g5.xlarge": [["cac1-az1", "cac1-az2"]]})
    report = check_zone(ec2, Fsx(), region="ca-central-1", az_id="cac1-az1", instance_types=["ml.g5.xlarge"])
    assert report.ok and report.zone_name is None and report.express_zones == []
    assert report.lines()[:4] == [
        "zone cac1-az1, region ca-central-1: available",
        "  ml.g5.xlarge: offered in cac1-az1 (EC2 offering; offered in: cac1-az1, cac1-az2)",
        FSX_ANSWERS,
        "  S3 Express One Zone: NOT offered in cac1-az1: the lab deploys without it here (express=auto) (no zone of "
        "ca-central-1 has it (regions that do: ap-northeast-1, ap-south-1, eu-north-1, eu-west-1, us-east-1, "
        "us-east-2, us-west-2))"]
    with_express = check_zone(ec2, Fsx(), region="ca-central-1", az_id="cac1-az1", instance_types=["ml.g5.xlarge"],
                              needs_express=True)
    assert not with_express.ok and with_express.suitable_zones == []
    assert "zone IDs offering every instance type and S3 Express One Zone: none in this region" in with_express.lines()
    assert not any(line.startswith("to move the lab") for line in with_express.lines())


def test_the_requests_sent_name_the_zone_ids_and_each_type_once_without_its_ml_prefix():
    ec2, fsx = Ec2(), Fsx()
    report = check_zone(ec2, fsx, region="us-east-1", az_id="use1-az4",
                        instance_types=["ml.p3.2xlarge", "ml.g5.xlarge", "ml.p3.2xlarge"])
    assert list(report.offered) == ["ml.p3.2xlarge", "ml.g5.xlarge"]
    offering = "describe_instance_type_offerings"
    assert ec2.calls == [
        ("DescribeAvailabilityZones", {"AllAvailabilityZones": True}),
        ("get_paginator", offering),
        ("DescribeInstanceTypeOfferings", {"LocationType": "availability-zone-id",
                                           "Filters": [{"Name": "instance-type", "Values": ["p3.2xlarge"]}]}),
        ("get_paginator", offering),
        ("DescribeInstanceTypeOfferings", {"LocationType": "availability-zone-id",
                                           "Filters": [{"Name": "instance-type", "Values": ["g5.xlarge"]}]})]
    assert fsx.calls == [{"MaxResults": 1}]   # one file system is enough to know FSx answers


def test_the_real_clients_against_moto_take_the_same_requests():
    with mock_aws():
        ec2, fsx = boto3.client("ec2", region_name="us-east-1"), boto3.client("fsx", region_name="us-east-1")
        report = check_zone(ec2, fsx, region="us-east-1", az_id="use1-az3", instance_types=["ml.p4d.24xlarge"])
    assert report.zone_name == "us-east-1e" and report.zone_ok and report.fsx_ok
    assert report.offered == {"ml.p4d.24xlarge": ["use1-az1", "use1-az2", "use1-az4", "use1-az6"]}
    assert not report.ok and report.missing == ["ml.p4d.24xlarge"]
    assert "to move the lab: -c azId=use1-az1" + MOVE in report.lines()


# ---- ok: each condition alone fails the zone -----------------------------------------------------------------------

def _report(**changes) -> ZoneReport:
    fields = dict(region="us-east-1", az_id="use1-az4", zone_name="us-east-1d", zone_ok=True,
                  offered={"ml.g5.xlarge": ["use1-az1", "use1-az4"]}, fsx_ok=True, fsx_detail="answers",
                  standard_zones=["use1-az1", "use1-az4"], express_zones=["use1-az4"])
    return ZoneReport(**{**fields, **changes})


@pytest.mark.parametrize("changes", [
    {"zone_ok": False},
    {"fsx_ok": False},
    {"offered": {"ml.g5.xlarge": ["use1-az1"]}},
    {"express_zones": [], "needs_express": True},
    {"logs_policies": [f"other-{i}" for i in range(10)]},
    {"fsx_quota": {"ok": False}},
], ids=["zone", "fsx", "type", "express", "logs", "quota"])
def test_each_check_alone_makes_the_zone_unsuitable(changes):
    assert _report().ok
    assert not _report(**changes).ok


def test_what_does_not_fail_the_zone():
    assert _report(express_zones=[]).ok                                   # express=auto: deploys without it
    assert _report(logs_policies=None, logs_detail="not read").ok        # not checked is not a failure
    assert _report(fsx_quota=None, quota_detail="not read").ok
    assert _report(fsx_quota={"ok": True}).ok


# ---- CloudWatch Logs' resource policies ----------------------------------------------------------------------------

def test_a_region_holding_ten_resource_policies_fails_before_a_deploy_would():
    report = _check(logs=Logs([f"other-{i}" for i in range(10)]))
    assert not report.ok and not report.logs_policy_ok and report.to_dict()["logs_policy_ok"] is False
    assert report.logs_policies == [f"other-{i}" for i in range(10)]
    assert report.to_dict()["logs_resource_policies"] == [f"other-{i}" for i in range(10)]
    assert report.lines()[4:8] == [
        "  S3 Express One Zone: offered in use1-az4",
        FULL_LOGS.format(n=10),
        "zone IDs offering every instance type: use1-az2, use1-az4",
        "to move the lab: -c azId=use1-az2" + MOVE]
    assert FULL_LOGS.format(n=11) in _check(logs=Logs([f"other-{i}" for i in range(11)])).lines()


@pytest.mark.parametrize("names", [
    [f"other-{i}" for i in range(9)],
    [*[f"other-{i}" for i in range(9)], "DataSourceLab-DataSync"],   # the lab's own is there already
    None,                                                            # an answer without the list: none
], ids=["nine", "the-labs-own-among-ten", "none"])
def test_room_for_the_labs_policy_or_the_labs_policy_already_there(names):
    report = _check(logs=Logs(names))
    assert report.ok and report.logs_policy_ok and report.logs_policies == (names or [])
    assert not any("CloudWatch Logs" in line for line in report.lines())


def test_resource_policies_not_read_are_said_with_the_fix_and_do_not_fail_the_zone():
    denied = _error("AccessDeniedException", "User is not authorized to perform logs:DescribeResourcePolicies",
                    "DescribeResourcePolicies")
    report = _check(logs=Logs(error=denied))
    assert report.ok and report.logs_policies is None
    assert report.logs_detail == (
        "AWS DescribeResourcePolicies failed (AccessDeniedException: User is not authorized to perform "
        "logs:DescribeResourcePolicies); your credentials may not call logs:DescribeResourcePolicies: use the profile "
        "of the account the lab is deployed in (AWS_PROFILE) or ask for that permission")
    assert report.lines()[4:6] == [
        "  S3 Express One Zone: offered in use1-az4",
        "  CloudWatch Logs: the region's resource policies were not checked: " + report.logs_detail]


# ---- FSx not answering ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("error, said", [
    (_error("ThrottlingException", "Rate exceeded", "DescribeFileSystems", retries=4),
     "AWS DescribeFileSystems failed after 5 attempts (ThrottlingException: Rate exceeded); AWS is throttling this "
     "account's requests (other tools calling the same API share the rate): try again in a minute"),
    (_error("InternalServerError", "Internal error", "DescribeFileSystems", status=500, retries=4),
     "AWS DescribeFileSystems failed after 5 attempts (InternalServerError: Internal error); a temporary failure on "
     "AWS's side: try again in a few minutes"),
    (EndpointConnectionError(endpoint_url="https://fsx.us-east-1.amazonaws.com/"),
     'EndpointConnectionError: Could not connect to the endpoint URL: "https://fsx.us-east-1.amazonaws.com/"'),
    (_error("AccessDeniedException", "not authorized", "DescribeFileSystems"),
     "AWS DescribeFileSystems failed (AccessDeniedException: not authorized); your credentials may not call "
     "fsx:DescribeFileSystems: use the profile of the account the lab is deployed in (AWS_PROFILE) or ask for that "
     "permission"),
], ids=["throttled", "unavailable", "no-connection", "refused"])
def test_fsx_not_answering_fails_the_zone_and_says_why(error, said):
    report = _check(fsx=Fsx(error))
    assert report.zone_ok and not report.fsx_ok and not report.ok
    assert report.fsx_detail == "FSx did not answer in us-east-1: " + said
    assert report.lines()[3] == "  FSx for Lustre: FSx did not answer in us-east-1: " + said
    assert report.to_dict()["fsx_ok"] is False


# ---- the account's FSx storage quota -------------------------------------------------------------------------------

def test_the_labs_fsx_past_the_applied_quota_fails_the_zone_with_the_request_that_raises_it():
    quotas = ServiceQuotas([SCRATCH_DEFAULT], [("fsx", "Lustre Scratch storage capacity", "L-AD2FC696", 1200.0)])
    report = _check(service_quotas=quotas, lab_fsx=FsxConfig(capacity_gib=2400))
    assert not report.ok and not report.fsx_quota_ok
    assert report.fsx_quota == report.to_dict()["fsx_quota"] == {
        "quota": "Lustre Scratch storage capacity", "code": "L-AD2FC696", "listed": True, "applied_gib": 1200.0,
        "lab_fsx_gib": 2400, "deployment_type": "SCRATCH_2", "ok": False, "request": SCRATCH_REQUEST}
    assert report.lines()[3:6] == [
        FSX_ANSWERS,
        '  FSx storage quota: "Lustre Scratch storage capacity" (L-AD2FC696): 1,200 GiB applied; the lab\'s 2,400 GiB '
        f"SCRATCH_2 does NOT fit: {SCRATCH_REQUEST} (every file system of the type counts)",
        "  S3 Express One Zone: offered in use1-az4"]
    assert "to move the lab: -c azId=use1-az2" + MOVE in report.lines()
    assert ("list_aws_default_service_quotas", "fsx") in quotas.calls and ("list_service_quotas", "fsx") in quotas.calls


def test_a_quota_service_quotas_does_not_list_is_taken_at_its_default():
    # Service Quotas lists nothing for FSx in this account and region: the default, 100,800 GiB, holds.
    quota = fsx_quota_check(ServiceQuotas(), FsxConfig())
    assert quota == {"quota": "Lustre Scratch storage capacity", "code": "L-AD2FC696", "listed": False,
                     "applied_gib": 100800, "lab_fsx_gib": 1200, "deployment_type": "SCRATCH_2", "ok": True,
                     "request": None}
    assert fsx_quota_line(quota) == (
        '"Lustre Scratch storage capacity" (L-AD2FC696): not listed by Service Quotas: its default 100,800 GiB taken; '
        "the lab's 1,200 GiB SCRATCH_2 fits (every file system of the type counts)")
    big = fsx_quota_check(ServiceQuotas(), FsxConfig(capacity_gib=120000))
    assert (big["listed"], big["applied_gib"], big["ok"]) == (False, 100800, False)
    assert big["request"] == ("aws service-quotas request-service-quota-increase --service-code fsx --quota-code "
                              "L-AD2FC696 --desired-value 120000")
    assert fsx_quota_line(big) == (
        '"Lustre Scratch storage capacity" (L-AD2FC696): not listed by Service Quotas: its default 100,800 GiB taken; '
        "the lab's 120,000 GiB SCRATCH_2 does NOT fit: aws service-quotas request-service-quota-increase "
        "--service-code fsx --quota-code L-AD2FC696 --desired-value 120000 (every file system of the type counts)")


def test_a_persistent_fsx_is_held_to_its_own_quota_under_the_code_service_quotas_lists():
    quotas = ServiceQuotas([("fsx", "Lustre Persistent_2 storage capacity", "L-5C2F1D3E", 100800.0), SCRATCH_DEFAULT],
                           [("fsx", "Lustre Persistent_2 storage capacity", "L-5C2F1D3E", 4800.0),
                            ("sagemaker", "Lustre Persistent_2 storage capacity", "L-00000000", 0.0)])
    report = _check(service_quotas=quotas, lab_fsx=FsxConfig.persistent2(125, 2400))
    assert report.ok and report.fsx_quota == {
        "quota": "Lustre Persistent_2 storage capacity", "code": "L-5C2F1D3E", "listed": True, "applied_gib": 4800.0,
        "lab_fsx_gib": 2400, "deployment_type": "PERSISTENT_2", "ok": True, "request": None}
    assert report.lines()[4] == (
        '  FSx storage quota: "Lustre Persistent_2 storage capacity" (L-5C2F1D3E): 4,800 GiB applied; the lab\'s 2,400 '
        "GiB PERSISTENT_2 fits (every file system of the type counts)")


def test_a_quota_lowered_to_zero_is_taken_as_applied():
    quota = fsx_quota_check(ServiceQuotas([SCRATCH_DEFAULT], [("fsx", "Lustre Scratch storage capacity", "L-AD2FC696",
                                                                0.0)]), FsxConfig())
    assert (quota["listed"], quota["applied_gib"], quota["ok"]) == (True, 0.0, False)
    assert fsx_quota_line(quota) == (
        '"Lustre Scratch storage capacity" (L-AD2FC696): 0 GiB applied; the lab\'s 1,200 GiB SCRATCH_2 does NOT fit: '
        "aws service-quotas request-service-quota-increase --service-code fsx --quota-code L-AD2FC696 --desired-value "
        "1200 (every file system of the type counts)")


def test_the_quota_not_read_is_said_with_the_fix_and_does_not_fail_the_zone():
    denied = _error("AccessDeniedException", "not authorized", "ListAWSDefaultServiceQuotas")
    report = _check(service_quotas=ServiceQuotas(error=denied), lab_fsx=FsxConfig())
    assert report.ok and report.fsx_quota is None
    assert report.quota_detail == (
        "AWS ListAWSDefaultServiceQuotas failed (AccessDeniedException: not authorized); your credentials may not call "
        "servicequotas:ListAWSDefaultServiceQuotas: use the profile of the account the lab is deployed in "
        "(AWS_PROFILE) or ask for that permission")
    assert report.lines()[3:6] == [
        FSX_ANSWERS,
        "  S3 Express One Zone: offered in use1-az4",
        "  FSx storage quota: not checked: " + report.quota_detail]


def test_the_quota_is_checked_only_with_both_service_quotas_and_the_labs_fsx():
    quotas = ServiceQuotas([SCRATCH_DEFAULT])
    without_fsx = _check(service_quotas=quotas)
    assert without_fsx.fsx_quota is None and quotas.calls == []
    without_quotas = _check(lab_fsx=FsxConfig())
    assert without_quotas.fsx_quota is None and without_quotas.quota_detail == ""
    assert not any("FSx storage quota" in line for line in without_fsx.lines() + without_quotas.lines())


# ---- bad input -----------------------------------------------------------------------------------------------------

FIND = ("find your account's zone IDs with: aws ec2 describe-availability-zones --region us-east-1 --query "
        "'AvailabilityZones[].[ZoneName,ZoneId]' --output text")


@pytest.mark.parametrize("az_id, problem", [
    ("us-east-1a", f"'us-east-1a' is not an Availability Zone ID: expected use1-az<N>, e.g. use1-az4; {FIND}"),
    ("euw1-az1",
     f"'euw1-az1' is not a zone of region us-east-1: its zone IDs start with use1- (e.g. use1-az4); {FIND}"),
], ids=["a-zone-name", "another-regions-zone"])
def test_a_zone_id_of_the_wrong_form_or_region_is_bad_input_before_any_request(az_id, problem):
    ec2 = Ec2()
    with pytest.raises(ConfigError) as raised:
        _check(az_id, ec2=ec2)
    assert (raised.value.field, raised.value.problem, raised.value.allowed) == ("azId", problem, None)
    assert ec2.calls == []


def test_a_zone_id_the_account_does_not_have_lists_the_standard_zones():
    with pytest.raises(ConfigError) as raised:
        _check("use1-az9")
    assert raised.value.field == "azId"
    assert raised.value.problem == "use1-az9 is not a zone of us-east-1 in this account"
    # every zone of type availability-zone (the impaired one too, and the one without ZoneType), no local zone
    assert raised.value.allowed == ["use1-az1", "use1-az2", "use1-az3", "use1-az4", "use1-az5", "use1-az6"]


def test_no_instance_type_is_bad_input_before_any_request():
    ec2 = Ec2()
    with pytest.raises(ConfigError) as raised:
        _check(types=[], ec2=ec2)
    assert (raised.value.field, raised.value.problem, raised.value.allowed) == (
        "instance_type", "no instance type to check", "e.g. --instance-type ml.p3.2xlarge")
    assert ec2.calls == []


@pytest.mark.parametrize("bad", ["ml.p9.2xlarge", "p3.2xlarge"])
def test_a_type_sagemaker_does_not_train_on_is_bad_input_with_examples(bad):
    with pytest.raises(ConfigError) as raised:
        validate_instance_types(["ml.g5.xlarge", bad, "ml.p3.2xlarge"])
    assert (raised.value.field, raised.value.problem, raised.value.allowed) == (
        "instance_type", f"'{bad}' is not a SageMaker training instance type",
        "one CreateTrainingJob accepts, e.g. ml.p3.2xlarge, ml.g5.xlarge, ml.p4d.24xlarge, ml.p5.48xlarge")


def test_instance_types_are_checked_once_each_in_the_order_given():
    assert validate_instance_types(["ml.p5.48xlarge", "ml.g5.xlarge", "ml.p5.48xlarge", "ml.g5.xlarge"]) == [
        "ml.p5.48xlarge", "ml.g5.xlarge"]
