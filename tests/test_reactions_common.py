"""What every workflow function rests on (dslab/workflow/common.py): the clients it makes (region, endpoint, the role
session's credentials, one per session kept for the execution environment), the lab's settings read from its
environment, FSx as it is now (and why not, in the words a record carries), which S3 errors mean "missing", the
staging client's pool and retries, and the JSON it stores. Environments are given per call (runtime.function_environment,
as the stand-in runs the functions); FSx and SSM are the fault world's; the expected values are written here."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from botocore.exceptions import ClientError

from dslab.core.errors import ConfigError
from dslab.core.requests import FileSystemRef
from dslab.workflow import common
from dslab.workflow.runtime import function_environment

from .fault_world import BUCKET, FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER
from .fault_world import world  # noqa: F401

SESSION = {"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "ASIAFIRST", "AWS_SECRET_ACCESS_KEY": "secret-1",
           "AWS_SESSION_TOKEN": "token-1"}
KEYS = {"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIAFIRST", "AWS_SECRET_ACCESS_KEY": "secret-1"}  # no session


@pytest.fixture(autouse=True)
def no_cached_clients():
    saved = dict(common.CLIENT_CACHE)
    common.CLIENT_CACHE.clear()
    yield
    common.CLIENT_CACHE.clear()
    common.CLIENT_CACHE.update(saved)


def _clients(env: dict[str, str]):
    with function_environment(env):
        return common.function_clients()


def _credentials(client) -> tuple[str, str, str | None]:
    found = client._request_signer._credentials
    return found.access_key, found.secret_key, found.token


# ---- the function's clients -----------------------------------------------------------------------------------------

def test_a_client_is_made_in_the_functions_region_with_the_role_sessions_credentials():
    s3 = _clients(SESSION)["s3"]
    assert s3.meta.region_name == "eu-west-1"
    assert s3.meta.endpoint_url == "https://s3.eu-west-1.amazonaws.com"
    assert _credentials(s3) == ("ASIAFIRST", "secret-1", "token-1")


def test_the_stand_ins_endpoint_is_used_where_the_environment_names_one():
    sagemaker = _clients({**SESSION, "DSLAB_AWS_ENDPOINT": "http://127.0.0.1:5123"})["sagemaker"]
    assert sagemaker.meta.endpoint_url == "http://127.0.0.1:5123"
    assert sagemaker.meta.service_model.service_name == "sagemaker"


def test_each_service_of_the_seven_is_made_once_per_invocation_and_kept_for_the_environment():
    clients = _clients(SESSION)
    made = {name: clients[name] for name in ("s3", "ssm", "fsx", "sagemaker", "service-quotas", "cloudformation",
                                             "stepfunctions")}
    assert {name: c.meta.service_model.service_name for name, c in made.items()} == {
        "s3": "s3", "ssm": "ssm", "fsx": "fsx", "sagemaker": "sagemaker", "service-quotas": "service-quotas",
        "cloudformation": "cloudformation", "stepfunctions": "stepfunctions"}
    again = _clients(SESSION)
    assert all(again[name] is client for name, client in made.items())   # the next invocation reuses them
    assert len(common.CLIENT_CACHE) == 7


def test_a_new_role_session_or_endpoint_gets_its_own_client():
    first = _clients(SESSION)["ssm"]
    renewed = _clients({**SESSION, "AWS_ACCESS_KEY_ID": "ASIASECOND", "AWS_SESSION_TOKEN": "token-2"})["ssm"]
    new_token = _clients({**SESSION, "AWS_SESSION_TOKEN": "token-3"})["ssm"]
    elsewhere = _clients({**SESSION, "DSLAB_AWS_ENDPOINT": "http://127.0.0.1:5123"})["ssm"]
    other_region = _clients({**SESSION, "AWS_REGION": "us-west-2"})["ssm"]
    assert len({id(c) for c in (first, renewed, new_token, elsewhere, other_region)}) == 5
    assert _credentials(renewed) == ("ASIASECOND", "secret-1", "token-2")
    assert _credentials(new_token) == ("ASIAFIRST", "secret-1", "token-3")
    assert other_region.meta.region_name == "us-west-2"


def test_keys_without_a_session_token_get_a_client_of_their_own_per_access_key():
    """Long-term keys (no AWS_SESSION_TOKEN): another access key is another client, signing with that key."""
    first = _clients(KEYS)["s3"]
    second = _clients({**KEYS, "AWS_ACCESS_KEY_ID": "AKIASECOND", "AWS_SECRET_ACCESS_KEY": "secret-2"})["s3"]
    assert first is not second
    assert _credentials(first) == ("AKIAFIRST", "secret-1", None)
    assert _credentials(second) == ("AKIASECOND", "secret-2", None)


def test_a_service_the_functions_do_not_use_is_refused_by_its_name():
    with pytest.raises(KeyError) as raised:
        _clients(SESSION)["ec2"]
    assert raised.value.args == ("ec2",)
    assert common.CLIENT_CACHE == {}


@pytest.mark.parametrize("env, region", [
    ({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "ap-south-1"}, "eu-west-1"),
    ({"AWS_DEFAULT_REGION": "ap-south-1"}, "ap-south-1"),
    ({"AWS_REGION": "", "AWS_DEFAULT_REGION": "ap-south-1"}, "ap-south-1"),
    ({}, "us-east-1")])
def test_the_region_is_aws_region_then_the_default_region_then_us_east_1(env, region):
    assert common.region_of(env) == region


# ---- the lab's settings ---------------------------------------------------------------------------------------------

LAB_ENV = {
    "DSLAB_BUCKET": "lab-data", "AWS_REGION": "eu-west-1", "DSLAB_ROLE_ARN": "arn:aws:iam::1:role/train",
    "DSLAB_SUBNET_IDS": "subnet-a, subnet-b", "DSLAB_SECURITY_GROUP_IDS": "sg-1", "DSLAB_IMAGE_URI": "gpu-image",
    "DSLAB_IMAGE_URI_CPU": "cpu-image", "DSLAB_IMAGE_URIS": '{"p5": "p5-image"}', "DSLAB_CODE_URI": "s3://lab/code.tgz",
    "DSLAB_CODE_VERSION": "abc123", "DSLAB_EFS_ID": "fs-efs1", "DSLAB_EXPRESS_BUCKET": "lab--use1-az4--x-s3"}


def test_every_setting_of_the_lab_is_read_from_its_variable():
    lab = common.lab_environment_from_env(LAB_ENV, FileSystemRef("fs-fsx1", "abcdefgh"))
    assert lab.to_dict() == {
        "bucket": "lab-data", "region": "eu-west-1", "role_arn": "arn:aws:iam::1:role/train",
        "subnet_ids": ["subnet-a", "subnet-b"], "security_group_ids": ["sg-1"], "image_uri": "gpu-image",
        "image_uri_cpu": "cpu-image", "code_uri": "s3://lab/code.tgz", "code_version": "abc123",
        "fsx": {"file_system_id": "fs-fsx1", "mount_name": "abcdefgh"}, "efs": {"file_system_id": "fs-efs1"},
        "express_bucket": "lab--use1-az4--x-s3", "extra_tags": {}, "image_uris": {"p5": "p5-image"}}


def test_a_lab_without_fsx_efs_or_express_has_none_of_them():
    required = {k: v for k, v in LAB_ENV.items() if k not in ("DSLAB_EFS_ID", "DSLAB_EXPRESS_BUCKET",
                                                                  "DSLAB_IMAGE_URI_CPU", "DSLAB_IMAGE_URIS",
                                                                  "DSLAB_CODE_VERSION")}
    lab = common.lab_environment_from_env({**required, "DSLAB_EXPRESS_BUCKET": ""}, None)
    assert (lab.fsx, lab.efs, lab.express_bucket, lab.image_uri_cpu, lab.image_uris, lab.code_version) == (
        None, None, None, None, {}, "unknown")


@pytest.mark.parametrize("variable, field", [("DSLAB_BUCKET", "environment.bucket"),
                                             ("DSLAB_SUBNET_IDS", "environment.subnet_ids"),
                                             ("DSLAB_SECURITY_GROUP_IDS", "environment.security_group_ids"),
                                             ("DSLAB_ROLE_ARN", "environment.role_arn")])
def test_a_missing_setting_is_named(variable, field):
    with pytest.raises(ConfigError) as raised:
        common.lab_environment_from_env({k: v for k, v in LAB_ENV.items() if k != variable}, None)
    assert raised.value.field == field


# ---- FSx as it is now -------------------------------------------------------------------------------------------

FSX_ENV = {"DSLAB_FSX_ID_PARAMETER": FSX_ID_PARAMETER, "DSLAB_FSX_MOUNT_PARAMETER": FSX_MOUNT_PARAMETER}


class Fsx:
    """DescribeFileSystems answering one lifecycle, or raising an error."""

    def __init__(self, world, lifecycle=None, error=None):
        self.exceptions, self.lifecycle, self.error, self.asked = world.c["fsx"].exceptions, lifecycle, error, []

    def describe_file_systems(self, FileSystemIds):
        self.asked.append(FileSystemIds)
        if self.error:
            raise ClientError({"Error": {"Code": self.error, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": 400}},
                              "DescribeFileSystems")
        return {"FileSystems": [] if self.lifecycle == "none listed" else
                [{"FileSystemId": FileSystemIds[0], **({"Lifecycle": self.lifecycle} if self.lifecycle else {})}]}


def _look(world, fsx=None, env=FSX_ENV):
    return common.look_up_fsx({"ssm": world.c["ssm"], "fsx": fsx or world.c["fsx"]}, env)


def test_fsx_available_is_its_id_and_mount_name(world):
    assert _look(world) == (FileSystemRef(world.fsx_id, "abcdefgh"), "")


@pytest.mark.parametrize("lifecycle", ["AVAILABLE", "UPDATING", None, "none listed"])
def test_fsx_available_updating_or_not_saying_is_used(world, lifecycle):
    fsx = Fsx(world, lifecycle)
    assert _look(world, fsx) == (FileSystemRef(world.fsx_id, "abcdefgh"), "")
    assert fsx.asked == [[world.fsx_id]]


@pytest.mark.parametrize("lifecycle", ["CREATING", "DELETING", "FAILED", "MISCONFIGURED"])
def test_fsx_in_another_lifecycle_is_not_used_and_says_which(world, lifecycle):
    assert _look(world, Fsx(world, lifecycle)) == (None, f"FSx file system {world.fsx_id} is {lifecycle}, not AVAILABLE")


def test_fsx_deleted_behind_its_parameters_says_how_to_bring_it_back(world):
    assert _look(world, Fsx(world, error="FileSystemNotFound")) == (
        None, f"FSx file system {world.fsx_id} no longer exists (FileSystemNotFound): bring it back with `dslab fsx up`")


def test_another_fsx_error_is_raised_for_the_caller_to_decide(world):
    with pytest.raises(ClientError) as raised:
        _look(world, Fsx(world, error="ThrottlingException"))
    assert raised.value.response["Error"]["Code"] == "ThrottlingException"


DOWN = "FSx for Lustre is not deployed (its stack is down): bring it back with `dslab fsx up`"


def test_fsx_whose_parameters_are_gone_is_down(world):
    assert _look(world, env={"DSLAB_FSX_ID_PARAMETER": "/dslab/gone/id", "DSLAB_FSX_MOUNT_PARAMETER": "/dslab/gone/m"}) == (
        None, DOWN)


@pytest.mark.parametrize("which", ["id", "mount"])
def test_fsx_with_a_parameter_gone_or_its_id_none_is_down(world, which):
    ssm = world.c["ssm"]
    name = FSX_ID_PARAMETER if which == "id" else FSX_MOUNT_PARAMETER
    kept = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    try:
        if which == "id":   # the FSx stack's parameter as it is left when the file system is gone
            ssm.put_parameter(Name=name, Value="None", Type="String", Overwrite=True)
            assert _look(world) == (None, DOWN)
        ssm.delete_parameter(Name=name)
        assert _look(world) == (None, DOWN)
    finally:
        ssm.put_parameter(Name=name, Value=kept, Type="String", Overwrite=True)


# ---- S3's "missing" -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, missing", [("NoSuchKey", True), ("404", True), ("AccessDenied", True), ("403", True),
                                           ("NotFound", True), ("NoSuchBucket", False), ("SlowDown", False),
                                           ("InternalError", False)])
def test_a_key_is_missing_on_404_and_on_403_for_a_caller_without_list(code, missing):
    err = ClientError({"Error": {"Code": code, "Message": "m"}}, "GetObject")
    assert common.is_missing(err) is missing


def test_an_error_without_a_code_is_not_missing():
    assert common.is_missing(ClientError({}, "GetObject")) is False


# ---- the staging client --------------------------------------------------------------------------------------------

def test_staging_uses_the_client_it_is_given():
    given = object()
    assert common.express_client(given) is given


def test_the_staging_client_has_a_connection_per_copy_thread_and_standard_retries():
    with function_environment({**SESSION, "DSLAB_AWS_ENDPOINT": "http://127.0.0.1:5123"}):
        client = common.express_client()
        assert common.express_client() is client   # made once for the environment and its credentials
    config = client.meta.config
    assert config.max_pool_connections == 68   # 64 copy threads and 4 to spare
    assert config.retries == {"mode": "standard", "total_max_attempts": 9}   # 8 retries after the first try
    assert client.meta.region_name == "eu-west-1" and client.meta.endpoint_url == "http://127.0.0.1:5123"
    assert _credentials(client) == ("ASIAFIRST", "secret-1", "token-1")


def test_a_new_session_gets_a_new_staging_client_apart_from_the_functions_s3_client():
    with function_environment(SESSION):
        first = common.express_client()
        s3 = common.function_clients()["s3"]
    with function_environment({**SESSION, "AWS_ACCESS_KEY_ID": "ASIASECOND", "AWS_SESSION_TOKEN": "token-2"}):
        second = common.express_client()
    with function_environment({**SESSION, "AWS_SESSION_TOKEN": "token-3"}):
        third = common.express_client()
    assert len({id(first), id(second), id(third), id(s3)}) == 4
    assert _credentials(second) == ("ASIASECOND", "secret-1", "token-2")
    assert _credentials(third) == ("ASIAFIRST", "secret-1", "token-3")
    assert s3.meta.config.max_pool_connections == 10   # botocore's default: only staging needs more
    with function_environment({"AWS_REGION": "us-west-2"}):
        assert common.express_client().meta.region_name == "us-west-2"


def test_keys_without_a_session_token_get_a_staging_client_of_their_own_per_access_key():
    with function_environment(KEYS):
        first = common.express_client()
    with function_environment({**KEYS, "AWS_ACCESS_KEY_ID": "AKIASECOND", "AWS_SECRET_ACCESS_KEY": "secret-2"}):
        second = common.express_client()
    assert first is not second
    assert _credentials(first) == ("AKIAFIRST", "secret-1", None)
    assert _credentials(second) == ("AKIASECOND", "secret-2", None)


# ---- time and JSON ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("env, scale", [({}, 1.0), ({"DSLAB_TIME_SCALE": ""}, 1.0), ({"DSLAB_TIME_SCALE": "0.01"}, 0.01)])
def test_waits_are_compressed_by_the_stand_ins_scale_and_not_on_aws(env, scale):
    with function_environment(env):
        assert common.time_scale() == scale


def test_put_json_stores_indented_json_with_dates_in_iso_form(world):
    document = {"when": dt.datetime(2026, 12, 5, 13, 0, tzinfo=dt.timezone.utc), "day": dt.date(2026, 12, 5),
                "ref": FileSystemRef("fs-1"), "n": 1}
    common.put_json(world.c["s3"], BUCKET, "results/common/doc.json", document)
    stored = world.c["s3"].get_object(Bucket=BUCKET, Key="results/common/doc.json")
    assert stored["ContentType"] == "application/json"
    assert stored["Body"].read().decode() == (
        '{\n  "when": "2026-12-05T13:00:00+00:00",\n  "day": "2026-12-05",\n'
        '  "ref": "FileSystemRef(file_system_id=\'fs-1\', mount_name=None)",\n  "n": 1\n}')
    assert json.loads(json.dumps({"x": dt.date(2026, 1, 2)}, default=common.json_default)) == {"x": "2026-01-02"}
