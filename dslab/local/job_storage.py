"""Where a local job's objects and file systems come from: the Storage protocol, and a folder stand-in for
S3 and the file systems (one folder per bucket, one per file-system ID)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import ClientError

from ..aws.validation import RequestInvalid


class StorageError(RuntimeError):
    """The job's data source cannot be provided (a mount failed, a file system is gone, S3 refused a request)."""


# Who signs a local job's requests, as SageMaker's job does with its role (the fix line names it).
JOB_ROLE = "the training job's role"


def refused(err: Exception, what: str) -> StorageError:
    """The stand-in's S3 refused ``what`` (botocore's ClientError ``err``, after its retries): one line with the code,
    S3's message, the attempts and the fix; the runner fails the job with it (FailureReason "ClientError: ...")."""
    from ..core.facts import aws_errors
    return StorageError(aws_errors.explain(err, service="s3", who=JOB_ROLE, what=what))


class Storage(Protocol):
    """Where a job's data comes from and its artifacts go."""

    def list_objects(self, bucket: str, prefix: str) -> list[tuple[str, int]]: ...
    def read_object(self, bucket: str, key: str) -> bytes: ...
    def download(self, bucket: str, key: str, target: Path) -> None: ...
    def put_object(self, bucket: str, key: str, data: bytes) -> None: ...
    def upload(self, bucket: str, key: str, source: Path) -> None: ...
    def delete_object(self, bucket: str, key: str) -> None: ...
    def fastfile_view(self, bucket: str, prefix: str) -> Path: ...
    def file_system_root(self, file_system_id: str, file_system_type: str, writable: bool = False) -> Path: ...
    def s3_environment(self, uris: list[str]) -> dict[str, str]: ...
    def release(self) -> None: ...


# What a script that reads S3 itself needs besides the job's role: the stand-in's endpoint, which
# boto3 (1.28.57 and later, the AWS SDKs' shared AWS_ENDPOINT_URL setting) and the S3 Connector for
# PyTorch read from the environment, and credentials the stand-in takes. Real keys a user exported are
# dropped: a local job never signs with them.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "dslab-local", "AWS_SECRET_ACCESS_KEY": "dslab-local"}
DROPPED_AWS_VARIABLES = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL_S3")


def script_s3_environment(endpoint: str, region: str) -> dict[str, str]:
    # Directory buckets: the stand-in has no CreateSession, so clients sign them with plain SigV4.
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": region, "AWS_REGION": region,
            "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH": "true", **LOCAL_CREDENTIALS}


@dataclass
class FolderStorage:
    """The folder stand-in: ``s3_root/<bucket>/<key>`` and ``fs_root/<file-system-id>/...``."""
    s3_root: Path
    fs_root: Path | None = None
    _server: Any = None
    _endpoint: str = ""
    _client: Any = None   # the server's, once a job's script reads S3 itself

    def _bucket(self, bucket: str) -> Path:
        path = self.s3_root / bucket
        if not path.is_dir():
            raise RequestInvalid(f"bucket {bucket!r} does not exist under --s3-root {self.s3_root}")
        return path

    def list_objects(self, bucket: str, prefix: str) -> list[tuple[str, int]]:
        root = self._bucket(bucket)
        out = []
        for path in sorted(root.rglob("*")):
            if path.is_file():
                key = path.relative_to(root).as_posix()
                if key.startswith(prefix):
                    out.append((key, path.stat().st_size))
        return out

    def read_object(self, bucket: str, key: str) -> bytes:
        return (self._bucket(bucket) / key).read_bytes()

    def download(self, bucket: str, key: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._bucket(bucket) / key, target)

    def put_object(self, bucket: str, key: str, data: bytes) -> None:
        path = self.s3_root / bucket / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def upload(self, bucket: str, key: str, source: Path) -> None:
        path = self._bucket(bucket) / key
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        if self._client is not None:   # the script's endpoint sees it too (a checkpoint writer lists it)
            try:
                self._client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
            except ClientError as err:
                raise refused(err, f"uploading {source.name} to the script's s3://{bucket}/{key}") from None

    def delete_object(self, bucket: str, key: str) -> None:
        (self._bucket(bucket) / key).unlink(missing_ok=True)
        if self._client is not None:
            try:
                self._client.delete_object(Bucket=bucket, Key=key)
            except ClientError as err:
                raise refused(err, f"deleting the script's s3://{bucket}/{key}") from None

    def fastfile_view(self, bucket: str, prefix: str) -> Path:
        return self._bucket(bucket) / prefix

    def file_system_root(self, file_system_id: str, file_system_type: str, writable: bool = False) -> Path:
        if self.fs_root is None:
            raise RequestInvalid(f"{file_system_type} file system {file_system_id}: no --fs-root was given")
        root = self.fs_root / file_system_id
        if not root.is_dir():
            raise RequestInvalid(f"{file_system_type} file system {file_system_id} does not exist under --fs-root {self.fs_root}")
        return root

    def s3_environment(self, uris: list[str]) -> dict[str, str]:
        """A Script job on the folder stand-in: serve the folders it reads over a real S3 endpoint (moto's
        server in a process of its own on a free local port, loaded with the objects under ``uris``), so
        its boto3 works unchanged. Its own process: moto's state in this one may belong to a lab."""
        if not uris:
            return {}
        if self._server is None:
            import boto3
            self._server, self._endpoint = start_s3_server()
            s3 = boto3.client("s3", endpoint_url=self._endpoint, region_name="us-east-1", **{
                "aws_access_key_id": LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "aws_secret_access_key": LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]})
            for uri in uris:
                bucket, prefix = split_s3_uri(uri)
                try:
                    s3.create_bucket(Bucket=bucket)
                except ClientError as err:
                    raise refused(err, f"creating the script's bucket {bucket}") from None
                for key, _ in self.list_objects(bucket, prefix):
                    try:
                        s3.put_object(Bucket=bucket, Key=key, Body=self.read_object(bucket, key))
                    except ClientError as err:
                        raise refused(err, f"loading s3://{bucket}/{key} for the script") from None
            self._client = s3
        return script_s3_environment(self._endpoint, "us-east-1")

    def release(self) -> None:
        if self._server is not None:
            self._server.terminate()
            self._server.wait(10)
            self._server = self._client = None


def free_port() -> int:
    """A loopback port nothing listens on now (the stand-in's servers take one each)."""
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_s3_server(timeout: float = 30.0) -> tuple[Any, str]:
    """moto's S3 server in a child process on a free loopback port: (process, endpoint), once it answers."""
    import subprocess
    import sys
    import time
    import urllib.request
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).read()
            return process, endpoint
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise StorageError(f"the local S3 endpoint for a Script job did not start on port {port}") from None
            time.sleep(0.1)


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[5:].partition("/")
    return bucket, key
