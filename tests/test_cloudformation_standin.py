"""The stand-in's CloudFormation enforces the rules the lab depends on, each as AWS documents it
(dslab/emulator/cloudformation/engine.py cites them). Small templates, through the real API (boto3
against the in-process stand-in), so each rule is checked on its own."""

from __future__ import annotations

import json
import time

import boto3
import pytest
from moto import mock_aws

from dslab.emulator import patches
from dslab.emulator.cloudformation import CloudFormationStandIn

REGION = "us-east-1"


@pytest.fixture
def cfn():
    patches.install()
    with mock_aws():
        clients = {}

        def client(service):
            if service not in clients:
                clients[service] = boto3.client(service, region_name=REGION)
            return clients[service]
        standin = CloudFormationStandIn(client, region=REGION)
        client.standin = standin
        try:
            yield client("cloudformation"), client
        finally:
            standin.close()


def template(resources: dict, outputs: dict | None = None, parameters: dict | None = None) -> str:
    body = {"Resources": resources}
    if outputs:
        body["Outputs"] = outputs
    if parameters:
        body["Parameters"] = parameters
    return json.dumps(body)


def parameter(name: str, value, **extra) -> dict:
    return {"Type": "AWS::SSM::Parameter", "Properties": {"Name": name, "Type": "String", "Value": value}, **extra}


def settle(cfn, name: str) -> dict:
    deadline = time.monotonic() + 30
    while True:
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        if not stack["StackStatus"].endswith("_IN_PROGRESS"):
            return stack
        assert time.monotonic() < deadline, stack
        time.sleep(0.02)


def deploy(cfn, name: str, body: str) -> dict:
    """What `cdk deploy` does: a change set (CREATE or UPDATE), executed unless it has no changes."""
    try:
        cfn.describe_stacks(StackName=name)
        kind = "UPDATE"
    except cfn.exceptions.ClientError:
        kind = "CREATE"
    change_set = cfn.create_change_set(StackName=name, ChangeSetName=f"cs-{time.monotonic_ns()}", TemplateBody=body,
                                       ChangeSetType=kind)
    described = cfn.describe_change_set(ChangeSetName=change_set["Id"])
    if described["Status"] == "FAILED":
        return {"ChangeSet": described}
    cfn.execute_change_set(ChangeSetName=change_set["Id"])
    return settle(cfn, name)


def reasons(cfn, name: str) -> str:
    return " | ".join(e.get("ResourceStatusReason", "") for e in cfn.describe_stack_events(StackName=name)["StackEvents"])


def test_an_export_in_use_can_neither_change_nor_disappear_nor_its_stack_go(cfn):
    cfn, client = cfn
    exporter = template({"P": parameter("/x/value", "one")},
                        outputs={"Value": {"Value": {"Fn::GetAtt": ["P", "Value"]}, "Export": {"Name": "shared-value"}}})
    assert deploy(cfn, "Exporter", exporter)["StackStatus"] == "CREATE_COMPLETE"
    importer = template({"Q": parameter("/y/copy", {"Fn::ImportValue": "shared-value"})})
    assert deploy(cfn, "Importer", importer)["StackStatus"] == "CREATE_COMPLETE"
    assert client("ssm").get_parameter(Name="/y/copy")["Parameter"]["Value"] == "one"
    assert cfn.list_imports(ExportName="shared-value")["Imports"] == ["Importer"]

    changed = template({"P": parameter("/x/value", "two")},
                       outputs={"Value": {"Value": {"Fn::GetAtt": ["P", "Value"]}, "Export": {"Name": "shared-value"}}})
    stack = deploy(cfn, "Exporter", changed)
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert "Cannot update export shared-value as it is in use by Importer" in stack["StackStatusReason"]
    assert client("ssm").get_parameter(Name="/x/value")["Parameter"]["Value"] == "one"   # rolled back

    removed = template({"P": parameter("/x/value", "one")})
    stack = deploy(cfn, "Exporter", removed)
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert "Export shared-value cannot be deleted as it is in use by Importer" in stack["StackStatusReason"]

    cfn.delete_stack(StackName="Exporter")
    stack = settle(cfn, "Exporter")
    assert stack["StackStatus"] == "DELETE_FAILED" and "in use by Importer" in stack["StackStatusReason"]

    # The importer changes first; then the export may go.
    assert deploy(cfn, "Importer", template({"Q": parameter("/y/copy", "own")}))["StackStatus"] == "UPDATE_COMPLETE"
    assert deploy(cfn, "Exporter", removed)["StackStatus"] == "UPDATE_COMPLETE"


def test_importing_an_export_that_does_not_exist_fails_the_change_set(cfn):
    cfn, _ = cfn
    result = deploy(cfn, "Lonely", template({"Q": parameter("/y/copy", {"Fn::ImportValue": "nobody-exports-this"})}))
    assert result["ChangeSet"]["Status"] == "FAILED"
    assert "No export named nobody-exports-this found" in result["ChangeSet"]["StatusReason"]


def test_a_change_set_without_changes_fails_as_the_cli_expects_and_ssm_parameters_are_read_at_each_deploy(cfn):
    cfn, client = cfn
    client("ssm").put_parameter(Name="/handoff/id", Value="first", Type="String")
    body = template({"P": parameter("/copy", {"Ref": "Handed"})},
                    parameters={"Handed": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/handoff/id"}})
    assert deploy(cfn, "Reader", body)["StackStatus"] == "CREATE_COMPLETE"
    again = deploy(cfn, "Reader", body)["ChangeSet"]
    assert again["Status"] == "FAILED" and again["StatusReason"].startswith("The submitted information didn't contain changes.")
    # The same template picks up a new value of the parameter: no export, no lock.
    client("ssm").put_parameter(Name="/handoff/id", Value="second", Type="String", Overwrite=True)
    assert deploy(cfn, "Reader", body)["StackStatus"] == "UPDATE_COMPLETE"
    assert client("ssm").get_parameter(Name="/copy")["Parameter"]["Value"] == "second"


def test_a_custom_named_resource_cannot_be_replaced(cfn):
    cfn, client = cfn
    body = {"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "kept-name"}},
                          "P": parameter("/p", {"Ref": "B"})}}
    assert deploy(cfn, "Named", json.dumps(body))["StackStatus"] == "CREATE_COMPLETE"
    # A DirectoryBucket's zone requires replacement; with a fixed name that cannot be done.
    zoned = {"Resources": {"D": {"Type": "AWS::S3Express::DirectoryBucket",
                                 "Properties": {"BucketName": "fixed--use1-az4--x-s3", "LocationName": "use1-az4",
                                                "DataRedundancy": "SingleAvailabilityZone"}}}}
    assert deploy(cfn, "Zoned", json.dumps(zoned))["StackStatus"] == "CREATE_COMPLETE"
    zoned["Resources"]["D"]["Properties"]["LocationName"] = "use1-az6"
    stack = deploy(cfn, "Zoned", json.dumps(zoned))
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert "custom-named resource requires replacing" in stack["StackStatusReason"]


def test_a_kept_bucket_keeps_its_name_so_creating_it_again_fails_and_rolls_back(cfn):
    cfn, client = cfn
    kept = {"Resources": {"B": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain",
                                "Properties": {"BucketName": "lab-data-bucket"}}}}
    assert deploy(cfn, "Keeper", json.dumps(kept))["StackStatus"] == "CREATE_COMPLETE"
    client("s3").put_object(Bucket="lab-data-bucket", Key="results/r.json", Body=b"{}")
    cfn.delete_stack(StackName="Keeper")
    gone = settle(cfn, cfn.list_stacks()["StackSummaries"][0]["StackId"])
    assert gone["StackStatus"] == "DELETE_COMPLETE"
    assert client("s3").get_object(Bucket="lab-data-bucket", Key="results/r.json")   # kept, with its data
    with pytest.raises(cfn.exceptions.ClientError):
        cfn.describe_stacks(StackName="Keeper")   # a deleted stack is found by its ID only
    again = deploy(cfn, "Keeper", json.dumps(kept))
    assert again["StackStatus"] == "ROLLBACK_COMPLETE"
    assert "lab-data-bucket already exists" in again["StackStatusReason"]
    # A stack whose creation rolled back can only be deleted (the CLI deletes it before trying again).
    with pytest.raises(cfn.exceptions.ClientError, match="ROLLBACK_COMPLETE"):
        cfn.create_change_set(StackName="Keeper", ChangeSetName="retry", TemplateBody=json.dumps(kept), ChangeSetType="UPDATE")
    cfn.delete_stack(StackName="Keeper")
    assert settle(cfn, again["StackId"])["StackStatus"] == "DELETE_COMPLETE"


def test_cloudtrail_lookup_after_a_failed_deploy_answers_with_no_events(cfn):
    """The CDK CLI asks CloudTrail's LookupEvents for the errors behind a failed deploy (the rehearsal's
    refused deploy after `make destroy`); the stand-in captures no management events, so it answers an
    empty list in LookupEvents' own shape at once, instead of a 500 the CLI's SDK retries for ~25 s."""
    import datetime as dt
    _, client = cfn
    now = dt.datetime.now(dt.timezone.utc)
    answer = client("cloudtrail").lookup_events(StartTime=now - dt.timedelta(minutes=5), EndTime=now, MaxResults=50)
    assert answer["Events"] == [] and "NextToken" not in answer


def test_a_subnet_in_use_is_not_deleted_in_clean_up_and_the_update_still_completes(cfn):
    """EC2 refuses to delete a subnet that holds a mount target; CloudFormation's clean-up then leaves it
    behind (DELETE_FAILED) and the stack still ends UPDATE_COMPLETE: it keeps existing."""
    cfn, client = cfn
    network = {"V": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
               "S": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "V"}, "CidrBlock": "10.0.1.0/24",
                                                                 "AvailabilityZoneId": "use1-az4"}}}
    assert deploy(cfn, "Net", template(network, outputs={"Subnet": {"Value": {"Ref": "S"}}}))["StackStatus"] == "CREATE_COMPLETE"
    subnet = cfn.describe_stacks(StackName="Net")["Stacks"][0]["Outputs"][0]["OutputValue"]
    efs = client("efs")
    fs = efs.create_file_system(CreationToken="outside")["FileSystemId"]
    efs.create_mount_target(FileSystemId=fs, SubnetId=subnet)   # made outside this stack
    moved = dict(network, S={"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "V"}, "CidrBlock": "10.0.2.0/24",
                                                                         "AvailabilityZoneId": "use1-az6"}})
    stack = deploy(cfn, "Net", template(moved))
    assert stack["StackStatus"] == "UPDATE_COMPLETE"
    assert "has dependencies and cannot be deleted" in reasons(cfn, "Net")
    assert client("ec2").describe_subnets(SubnetIds=[subnet])["Subnets"]   # left behind


def test_overlapping_subnets_are_refused_as_ec2_refuses_them(cfn):
    cfn, _ = cfn
    network = {"V": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
               "A": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "V"}, "CidrBlock": "10.0.0.0/20",
                                                                 "AvailabilityZoneId": "use1-az4"}},
               "B": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "V"}, "CidrBlock": "10.0.8.0/24",
                                                                 "AvailabilityZoneId": "use1-az6"}}}
    stack = deploy(cfn, "Overlap", template(network))
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE" and "conflicts with another subnet" in reasons(cfn, "Overlap")


def test_a_directory_bucket_only_in_a_zone_that_has_s3_express(cfn):
    """The lab's stand-in takes the S3 User Guide's zone table (dslab/aws/zones.py): elsewhere the bucket fails."""
    from dslab.aws.zones import express_zone_ids
    cfn, client = cfn
    client.standin.env.express_zones = set(express_zone_ids(REGION))

    def bucket(zone: str) -> str:
        return json.dumps({"Resources": {"D": {"Type": "AWS::S3Express::DirectoryBucket",
                                               "Properties": {"LocationName": zone, "DataRedundancy": "SingleAvailabilityZone"}}},
                           "Outputs": {"Name": {"Value": {"Ref": "D"}}}})
    stack = deploy(cfn, "Nowhere", bucket("use1-az2"))
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE" and "not available in Availability Zone use1-az2" in reasons(cfn, "Nowhere")
    stack = deploy(cfn, "Here", bucket("use1-az4"))
    assert stack["StackStatus"] == "CREATE_COMPLETE" and stack["Outputs"][0]["OutputValue"].endswith("--use1-az4--x-s3")


def test_an_unknown_resource_type_is_an_error_not_a_skip(cfn):
    cfn, _ = cfn
    result = deploy(cfn, "Odd", template({"X": {"Type": "AWS::Nothing::Here", "Properties": {}}}))
    assert result["ChangeSet"]["Status"] == "FAILED" and "AWS::Nothing::Here" in result["ChangeSet"]["StatusReason"]


def test_a_service_cannot_assume_a_role_iam_has_not_propagated_yet(cfn):
    """CreateLocationS3 assumes its bucket-access role at once; a role made seconds earlier is refused
    ("Unable to assume role"), which is why the lab's locations wait (efs_staging.IamPropagationWait)."""
    cfn, client = cfn
    client.standin.env.iam_propagation_seconds = 3600
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "datasync.amazonaws.com"},
                                                     "Action": "sts:AssumeRole"}]}
    client("s3").create_bucket(Bucket="source-bucket")
    body = template({"R": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}},
                     "L": {"Type": "AWS::DataSync::LocationS3", "Properties": {
                         "S3BucketArn": "arn:aws:s3:::source-bucket", "Subdirectory": "/datasets/",
                         "S3Config": {"BucketAccessRoleArn": {"Fn::GetAtt": ["R", "Arn"]}}}}})
    stack = deploy(cfn, "Eager", body)
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE" and "Unable to assume role" in reasons(cfn, "Eager")
    client.standin.env.iam_propagation_seconds = 0
    assert deploy(cfn, "Patient", body)["StackStatus"] == "CREATE_COMPLETE"


def test_an_eleventh_logs_resource_policy_is_refused(cfn):
    cfn, client = cfn
    for i in range(10):
        client("logs").put_resource_policy(policyName=f"other-{i}", policyDocument='{"Statement": []}')
    body = template({"P": {"Type": "AWS::Logs::ResourcePolicy", "Properties": {
        "PolicyName": "DataSourceLab-DataSync", "PolicyDocument": '{"Statement": []}'}}})
    assert deploy(cfn, "Logs", body)["StackStatus"] == "ROLLBACK_COMPLETE"


def test_generated_names_take_cloudformations_form_are_new_at_each_creation_and_the_same_in_every_stand_in(cfn):
    """A resource given no name gets "<stack>-<logical ID>-<random>" (a bucket's in lower case). The stand-in
    draws the random part per stand-in: a resource created again gets another name, and another stand-in
    deploying the same template draws the same names (so the lab's state machine, whose definition embeds
    its functions' generated names, is the same text in every lab a process starts, and is parsed once)."""
    import re

    cfn, client = cfn
    body = template({"B": {"Type": "AWS::S3::Bucket"}}, outputs={"Name": {"Value": {"Ref": "B"}}})

    def deployed_name() -> str:
        stack = deploy(cfn, "Gen", body)
        assert stack["StackStatus"] == "CREATE_COMPLETE", stack
        return {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}["Name"]

    def delete() -> None:
        cfn.delete_stack(StackName="Gen")
        deadline = time.monotonic() + 30
        while any(s["StackName"] == "Gen" for s in cfn.list_stacks(StackStatusFilter=["DELETE_IN_PROGRESS", "CREATE_COMPLETE"])["StackSummaries"]):
            assert time.monotonic() < deadline
            time.sleep(0.02)

    first = deployed_name()
    assert re.fullmatch(r"gen-b-[a-z0-9]{12}", first)
    delete()
    again = deployed_name()
    assert re.fullmatch(r"gen-b-[a-z0-9]{12}", again) and again != first
    delete()
    client.standin.close()
    another = CloudFormationStandIn(client, region=REGION)   # a new stand-in (a new lab) in the same account
    try:
        assert deployed_name() == first
    finally:
        another.close()


def test_a_name_already_taken_fails_the_creation_and_leaves_the_existing_resource_as_it_was(cfn):
    """CloudFormation's resource type handler contract: "AlreadyExists: The specified resource already existed
    before the execution of this handler". Step Functions' CreateStateMachine answers with an existing machine
    of the same name and EventBridge's PutRule overwrites a rule, so the stand-in asks first (as it does for SSM
    parameters and log groups, whose create calls refuse in words of their own): the stack rolls
    back, and what existed keeps its definition (a rollback deletes only what the stack made)."""
    cfn, client = cfn
    sfn, events = client("stepfunctions"), client("events")
    role = client("iam").create_role(RoleName="sfn", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "states.amazonaws.com"},
                                                "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
    theirs = json.dumps({"StartAt": "Theirs", "States": {"Theirs": {"Type": "Succeed"}}})
    machine = sfn.create_state_machine(name="taken", definition=theirs, roleArn=role)["stateMachineArn"]
    events.put_rule(Name="taken-rule", ScheduleExpression="rate(1 day)")
    client("ssm").put_parameter(Name="taken-parameter", Value="theirs", Type="String")
    client("logs").create_log_group(logGroupName="taken-logs")
    client("logs").put_retention_policy(logGroupName="taken-logs", retentionInDays=7)
    ours = {"StartAt": "Ours", "States": {"Ours": {"Type": "Pass", "End": True}}}
    for resource in ({"Type": "AWS::StepFunctions::StateMachine",
                      "Properties": {"StateMachineName": "taken", "RoleArn": role, "DefinitionString": json.dumps(ours)}},
                     {"Type": "AWS::Events::Rule", "Properties": {"Name": "taken-rule", "ScheduleExpression": "rate(5 minutes)"}},
                     parameter("taken-parameter", "ours"),
                     {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": "taken-logs", "RetentionInDays": 30}}):
        stack = deploy(cfn, "Taker", template({"R": resource}))
        assert stack["StackStatus"] == "ROLLBACK_COMPLETE", stack
        assert f"Resource of type '{resource['Type']}' with identifier " in reasons(cfn, "Taker")
        assert "already exists" in reasons(cfn, "Taker")
        cfn.delete_stack(StackName="Taker")
        settle(cfn, stack["StackId"])
    assert sfn.describe_state_machine(stateMachineArn=machine)["definition"] == theirs
    assert events.describe_rule(Name="taken-rule")["ScheduleExpression"] == "rate(1 day)"
    assert client("ssm").get_parameter(Name="taken-parameter")["Parameter"]["Value"] == "theirs"
    (logs,) = client("logs").describe_log_groups(logGroupNamePrefix="taken-logs")["logGroups"]
    assert logs["retentionInDays"] == 7
