"""Where a local job's objects and file systems come from: the Storage protocol, and a folder stand-in for
S3 and the file systems (one folder per bucket, one per file-system ID)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..aws.validation import RequestInvalid


class StorageError(RuntimeError):
    """The job's data source cannot be provided (a mount failed, a file system is gone)."""


class Storage(Protocol):
    """Where a job's data comes from and its artifacts go."""

    def list_objects(self, bucket: str, prefix: str) -> list[tuple[str, int]]: ...
    def read_object(self, bucket: str, key: str) -> bytes: ...
    def download(self, bucket: str, key: str, target: Path) -> None: ...
    def put_object(self, bucket: str, key: str, data: bytes) -> None: ...
    def fastfile_view(self, bucket: str, prefix: str) -> Path: ...
    def file_system_root(self, file_system_id: str, file_system_type: str) -> Path: ...
    def release(self) -> None: ...


@dataclass
class FolderStorage:
    """The folder stand-in: ``s3_root/<bucket>/<key>`` and ``fs_root/<file-system-id>/...``."""
    s3_root: Path
    fs_root: Path | None = None

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

    def fastfile_view(self, bucket: str, prefix: str) -> Path:
        return self._bucket(bucket) / prefix

    def file_system_root(self, file_system_id: str, file_system_type: str) -> Path:
        if self.fs_root is None:
            raise RequestInvalid(f"{file_system_type} file system {file_system_id}: no --fs-root was given")
        root = self.fs_root / file_system_id
        if not root.is_dir():
            raise RequestInvalid(f"{file_system_type} file system {file_system_id} does not exist under --fs-root {self.fs_root}")
        return root

    def release(self) -> None:
        pass


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[5:].partition("/")
    return bucket, key
