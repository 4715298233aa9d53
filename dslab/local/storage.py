"""The local lab's storage: the stand-in's S3 endpoint, FUSE mounts for FastFile and FSx, a folder for EFS.

- FastFile: a read-only s3fs mount of the channel's prefix, no cache: every read goes to S3.
- FSx: one s3fs mount of the bucket with a local cache for the lab's lifetime: a file is fetched
  from S3 on first read and served from the cache afterwards (FSx linked to S3 lazy-loads the same way).
- EFS: a local folder that the workflow's staging step (DataSync in AWS) filled from S3.
Where FUSE is missing, FastFile and FSx jobs fail and say how to enable it: no silent substitute.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from botocore.exceptions import ClientError

from .job_storage import StorageError, refused, script_s3_environment

FUSE_HELP = ("FUSE is unavailable, so FastFile and FSx cannot be emulated: install s3fs-fuse and fuse3 "
             "(apt-get install s3fs fuse3), and run as root with /dev/fuse present")


def fuse_available() -> bool:
    return bool(shutil.which("s3fs")) and os.path.exists("/dev/fuse") and bool(shutil.which("fusermount3") or shutil.which("fusermount"))


def _unmount(path: Path) -> None:
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    for args in ([tool, "-u", str(path)], [tool, "-uz", str(path)]):
        if tool and subprocess.run(args, capture_output=True, stdin=subprocess.DEVNULL).returncode == 0:
            return
    subprocess.run(["umount", "-l", str(path)], capture_output=True, stdin=subprocess.DEVNULL)


def mounts_under(root: Path) -> list[Path]:
    root = root.resolve()
    found = []
    try:
        with open("/proc/mounts") as handle:
            for line in handle:
                point = Path(line.split()[1].replace("\\040", " "))
                if point == root or root in point.parents:
                    found.append(point)
    except OSError:
        pass
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def unmount_all(root: Path) -> int:
    """Unmount every mount under ``root`` (left by an earlier run that was killed, too)."""
    points = mounts_under(root)
    for point in points:
        _unmount(point)
    return len(points)


class S3Mounts:
    """s3fs mounts of the stand-in's buckets."""

    def __init__(self, endpoint: str, root: Path):
        self.endpoint, self.root = endpoint, root
        self._lock = threading.Lock()
        self._count = 0
        self._processes: dict[Path, subprocess.Popen] = {}

    def mount(self, bucket: str, prefix: str, name: str, cache_dir: Path | None = None) -> Path:
        if not fuse_available():
            raise StorageError(FUSE_HELP)
        with self._lock:
            self._count += 1
            point = self.root / f"{name}-{self._count}"
        point.mkdir(parents=True, exist_ok=True)
        source = f"{bucket}:/{prefix.strip('/')}" if prefix.strip("/") else bucket
        options = ["-o", f"url={self.endpoint}", "-o", "use_path_request_style", "-o", "ro", "-o", "endpoint=us-east-1",
                   "-o", "dbglevel=err", "-o", "stat_cache_expire=600", "-o", "multireq_max=8"]
        if bucket.endswith("--x-s3"):
            # A directory bucket answers ListObjectsV2 only (s3fs's default is ListObjects v1).
            options += ["-o", "listobjectsv2"]
        if cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)
            options += ["-o", f"use_cache={cache_dir}"]
        env = {**os.environ, "AWSACCESSKEYID": "testing", "AWSSECRETACCESSKEY": "testing"}
        # Foreground (-f) as our own child: unmounting ends it and we reap it (no orphaned daemons).
        proc = subprocess.Popen(["s3fs", source, str(point), "-f", *options], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not os.path.ismount(point):
            if proc.poll() is not None:
                raise StorageError(f"s3fs could not mount {source}: {proc.stderr.read().strip()[:300]}")
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise StorageError(f"s3fs mount of {source} did not appear at {point}")
            time.sleep(0.02)
        with self._lock:
            self._processes[point] = proc
        return point

    def unmount(self, point: Path) -> None:
        if os.path.ismount(point):
            _unmount(point)
        with self._lock:
            proc = self._processes.pop(point, None)
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        try:
            point.rmdir()
        except OSError:
            pass

    def unmount_all(self) -> None:
        with self._lock:
            points = list(self._processes)
        for point in points:
            self.unmount(point)


class LabStorage:
    """One job's view of the lab (the runner's Storage): S3 through boto3, mounts per mode."""

    def __init__(self, s3_client, mounts: S3Mounts, efs_root: Path, fsx_root: Path | None, fsx_id: str | None,
                 efs_id: str, fsx_problem: str | None = None, fsx_lustre_root: Path | None = None):
        self.s3, self.mounts, self.efs_root = s3_client, mounts, efs_root
        self.fsx_problem = fsx_problem
        # What FSx holds beside its link to S3 (a read-write channel's files: checkpoints): on the file system only
        # (the data repository association exports nothing), so a folder of its own; its datasets/ shows the link.
        self.fsx_lustre_root = fsx_lustre_root
        self.fsx_root, self.fsx_id, self.efs_id = fsx_root, fsx_id, efs_id
        self._job_mounts: list[Path] = []

    # The stand-in's S3 refusing a request (after botocore's retries) fails the job with a reason naming the object and
    # the fix (the runner's FailureReason "ClientError: ..."), as SageMaker fails a job whose data or artifacts S3 refused.
    def list_objects(self, bucket: str, prefix: str) -> list[tuple[str, int]]:
        out = []
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                out += [(o["Key"], o["Size"]) for o in page.get("Contents", [])]
        except ClientError as err:
            raise refused(err, f"listing s3://{bucket}/{prefix}") from None
        return out

    def read_object(self, bucket: str, key: str) -> bytes:
        try:
            return self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            raise KeyError(key) from None
        except ClientError as err:
            raise refused(err, f"reading s3://{bucket}/{key}") from None

    def download(self, bucket: str, key: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            body = self.s3.get_object(Bucket=bucket, Key=key)["Body"]  # one request (download_file adds a HEAD)
        except ClientError as err:
            raise refused(err, f"downloading s3://{bucket}/{key}") from None
        with open(target, "wb") as handle:
            for chunk in iter(lambda: body.read(1024 * 1024), b""):
                handle.write(chunk)

    def put_object(self, bucket: str, key: str, data: bytes) -> None:
        try:
            self.s3.put_object(Bucket=bucket, Key=key, Body=data)
        except ClientError as err:
            raise refused(err, f"uploading s3://{bucket}/{key}") from None

    def upload(self, bucket: str, key: str, source: Path) -> None:
        with open(source, "rb") as body:
            try:
                self.s3.put_object(Bucket=bucket, Key=key, Body=body)
            except ClientError as err:
                raise refused(err, f"uploading {source.name} to s3://{bucket}/{key}") from None

    def delete_object(self, bucket: str, key: str) -> None:
        try:
            self.s3.delete_object(Bucket=bucket, Key=key)
        except ClientError as err:
            raise refused(err, f"deleting s3://{bucket}/{key}") from None

    def fastfile_view(self, bucket: str, prefix: str) -> Path:
        point = self.mounts.mount(bucket, prefix, "fastfile")
        self._job_mounts.append(point)
        return point

    def file_system_root(self, file_system_id: str, file_system_type: str, writable: bool = False) -> Path:
        if file_system_type == "EFS":
            if file_system_id != self.efs_id:
                raise StorageError(f"EFS file system {file_system_id} does not exist in the lab")
            return self.efs_root
        if self.fsx_problem:
            raise StorageError(self.fsx_problem)
        if self.fsx_root is None or file_system_id != self.fsx_id:
            raise StorageError(f"FSx file system {file_system_id} does not exist (FSx is down?)")
        if not writable or self.fsx_lustre_root is None:
            return self.fsx_root
        self.fsx_lustre_root.mkdir(parents=True, exist_ok=True)
        link = self.fsx_lustre_root / "datasets"
        if not link.is_symlink() and (self.fsx_root / "datasets").exists():
            link.symlink_to(self.fsx_root / "datasets", target_is_directory=True)
        return self.fsx_lustre_root

    def s3_environment(self, uris: list[str]) -> dict[str, str]:
        """Every local job may read the stand-in's S3 itself (a Script job must): its endpoint and keys."""
        return script_s3_environment(self.s3.meta.endpoint_url, self.s3.meta.region_name)

    def release(self) -> None:
        for point in self._job_mounts:
            self.mounts.unmount(point)
        self._job_mounts.clear()
