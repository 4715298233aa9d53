"""What every workflow function needs: its AWS clients (made once per execution environment), the lab's
settings from its environment, and FSx as it is now. Standard library and boto3 only."""

from __future__ import annotations

import json
from typing import Any

from ..core.facts.aws_errors import aws_error
from ..core.facts.limits import EXPRESS_COPY_THREADS
from ..core.requests import FileSystemRef, LabEnvironment
from .runtime import environ as function_environ

SERVICES = ("s3", "ssm", "fsx", "sagemaker", "service-quotas", "cloudformation", "stepfunctions")


class _Clients(dict):
    """The function's clients, each made on first use (making one reads its service model from disk:
    tens of milliseconds each, and most invocations need one or two of the seven)."""

    def __init__(self, env: dict[str, str]):
        super().__init__()
        self.env = env

    def __missing__(self, name: str):
        import boto3
        endpoint = self.env.get("DSLAB_AWS_ENDPOINT")  # the local lab's stand-in; unset on AWS
        kwargs: dict[str, Any] = {"endpoint_url": endpoint} if endpoint else {}
        if self.env.get("AWS_ACCESS_KEY_ID"):  # what the Lambda runtime puts in the function's environment
            kwargs.update(aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=self.env.get("AWS_SECRET_ACCESS_KEY"),
                          aws_session_token=self.env.get("AWS_SESSION_TOKEN"))
        if name not in SERVICES:
            raise KeyError(name)
        key = (name, region_of(self.env), kwargs.get("endpoint_url"), kwargs.get("aws_access_key_id"),
               kwargs.get("aws_session_token"))
        if key not in CLIENT_CACHE:
            CLIENT_CACHE[key] = boto3.client(name, region_name=region_of(self.env), **kwargs)
        client = self[name] = CLIENT_CACHE[key]
        return client


# Clients live as long as the execution environment, as AWS advises for Lambda ("initialize SDK clients
# ... outside of the function handler", https://docs.aws.amazon.com/lambda/latest/dg/best-practices.html);
# a new role session (other credentials) or endpoint gets its own.
CLIENT_CACHE: dict[tuple, Any] = {}


def function_clients() -> _Clients:
    return _Clients(function_environ())


def region_of(environ) -> str:
    return environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def lab_environment_from_env(environ: dict[str, str], fsx: FileSystemRef | None) -> LabEnvironment:
    return LabEnvironment.from_dict({
        "bucket": environ.get("DSLAB_BUCKET"),
        "region": region_of(environ),
        "role_arn": environ.get("DSLAB_ROLE_ARN"),
        "subnet_ids": environ.get("DSLAB_SUBNET_IDS", ""),
        "security_group_ids": environ.get("DSLAB_SECURITY_GROUP_IDS", ""),
        "image_uri": environ.get("DSLAB_IMAGE_URI"),
        "image_uri_cpu": environ.get("DSLAB_IMAGE_URI_CPU"),
        "image_uris": environ.get("DSLAB_IMAGE_URIS"),
        "code_uri": environ.get("DSLAB_CODE_URI"),
        "code_version": environ.get("DSLAB_CODE_VERSION"),
        "fsx": None if fsx is None else {"file_system_id": fsx.file_system_id, "mount_name": fsx.mount_name},
        "efs": {"file_system_id": environ.get("DSLAB_EFS_ID")} if environ.get("DSLAB_EFS_ID") else None,
        "express_bucket": environ.get("DSLAB_EXPRESS_BUCKET") or None,
    })


def look_up_fsx(clients, environ: dict[str, str]) -> tuple[FileSystemRef | None, str]:
    """FSx as it is now: (reference, why not) — its SSM parameters vanish with the FSx stack. Any other AWS error
    is raised: the caller decides (Plan skips the FSx jobs saying why, a readiness check may look again)."""
    names = [environ.get("DSLAB_FSX_ID_PARAMETER", ""), environ.get("DSLAB_FSX_MOUNT_PARAMETER", "")]
    found = {p["Name"]: p["Value"] for p in clients["ssm"].get_parameters(Names=names).get("Parameters", [])}
    fs_id, mount = found.get(names[0]), found.get(names[1])
    if not fs_id or not mount or fs_id in ("None", ""):
        return None, "FSx for Lustre is not deployed (its stack is down): bring it back with `dslab fsx up`"
    try:
        systems = clients["fsx"].describe_file_systems(FileSystemIds=[fs_id]).get("FileSystems", [])
    except clients["fsx"].exceptions.ClientError as err:
        if aws_error(err).code != "FileSystemNotFound":
            raise
        return None, f"FSx file system {fs_id} no longer exists (FileSystemNotFound): bring it back with `dslab fsx up`"
    if systems and systems[0].get("Lifecycle") not in (None, "AVAILABLE", "UPDATING"):
        return None, f"FSx file system {fs_id} is {systems[0]['Lifecycle']}, not AVAILABLE"
    return FileSystemRef(fs_id, mount), ""


def is_missing(err) -> bool:
    """A missing object: 404 NoSuchKey, or 403 where the caller may not list that prefix (S3 answers
    AccessDenied for a missing key to callers without s3:ListBucket on it)."""
    return err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "AccessDenied", "403", "NotFound")


def express_client(s3_or_none=None):
    """The S3 client staging uses: a connection for each of its copy threads (botocore keeps 10 by
    default and discards the rest: "Connection pool is full, discarding connection"), and the standard
    retry mode (exponential backoff with jitter on 500/503 and throttling). Made once per execution
    environment and credentials, as the function's other clients (CLIENT_CACHE)."""
    if s3_or_none is not None:
        return s3_or_none
    import boto3
    from botocore.config import Config
    env = function_environ()
    endpoint = env.get("DSLAB_AWS_ENDPOINT")
    kwargs: dict[str, Any] = {"endpoint_url": endpoint} if endpoint else {}
    if env.get("AWS_ACCESS_KEY_ID"):
        kwargs.update(aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
                      aws_session_token=env.get("AWS_SESSION_TOKEN"))
    key = ("s3-express-staging", region_of(env), endpoint, kwargs.get("aws_access_key_id"), kwargs.get("aws_session_token"))
    if key not in CLIENT_CACHE:
        config = Config(max_pool_connections=EXPRESS_COPY_THREADS + 4, retries={"mode": "standard", "max_attempts": 8})
        CLIENT_CACHE[key] = boto3.client("s3", region_name=region_of(env), config=config, **kwargs)
    return CLIENT_CACHE[key]


def time_scale() -> float:
    """1 on AWS; the embedded stand-in compresses time (its Wait states, its clients' retries) and says
    by how much, so the functions' own waits (below) are compressed alike."""
    return float(function_environ().get("DSLAB_TIME_SCALE") or 1.0)


def json_default(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def put_json(s3, bucket: str, key: str, document: Any) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(document, indent=2, default=json_default).encode(),
                  ContentType="application/json")
