"""SageMaker's checkpoint sync (a request's CheckpointConfig) on the local runner, as SageMaker documents it.

Every rule is quoted beside the code that keeps it, from the SageMaker Developer Guide: "Use checkpoints in Amazon
SageMaker AI" (model-checkpoints.html), "Resume training from a checkpoint" (model-checkpoints-resume.html), and the
archived guide's "Considerations for checkpointing" (awsdocs/amazon-sagemaker-developer-guide, model-checkpoints.md).
What SageMaker does not document (how often it uploads, how it moves the bytes) is the runner's own choice, said so.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..aws.validation import RequestInvalid
from .job_storage import Storage, split_s3_uri

# "The default directory is /opt/ml/checkpoints/" (CheckpointConfig.LocalPath, SageMaker API reference). The runner
# gives every host its own /opt/ml (SAGEMAKER_BASE_DIR), so a LocalPath must be under it.
DEFAULT_LOCAL_PATH = "/opt/ml/checkpoints"
CONTAINER_BASE = "/opt/ml"
# Not documented: how often SageMaker looks for new checkpoints. The runner looks every POLL_SECONDS and uploads a
# file once it has not changed between two looks (SageMaker marks files it is uploading with ".sagemaker-uploading",
# SageMaker Developer Guide, distributed-troubleshooting-model-parallel.html; it does not say when it starts).
POLL_SECONDS = 0.2
UPLOADING_SUFFIX = ".sagemaker-uploading"


@dataclass
class SyncFigures:
    copied_in_files: int = 0
    copied_in_bytes: int = 0
    copy_in_seconds: float = 0.0
    uploaded_files: int = 0
    uploaded_bytes: int = 0
    deleted_keys: int = 0
    clashes: list[str] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)   # in a LocalPath, not in S3, when the job ended

    def describe(self) -> str:
        return (f"checkpoint sync: {self.copied_in_files} file(s), {self.copied_in_bytes:,} bytes copied in "
                f"({self.copy_in_seconds:.2f} s); {self.uploaded_files} uploaded ({self.uploaded_bytes:,} bytes); "
                f"{self.deleted_keys} deleted in S3; {len(self.left_behind)} not uploaded when the job ended")

    def warnings(self) -> list[str]:
        out = list(self.clashes)
        if self.left_behind:
            out.append(f"{len(self.left_behind)} file(s) in the LocalPath were not in S3 when the job ended (e.g. "
                       f"{self.left_behind[0]}): SageMaker does not write to S3 once the job ends, so a restore will "
                       "not find them; a script that needs them there waits until it sees them listed under the S3Uri")
        return out


def local_folder(base: Path, local_path: str) -> Path:
    """A host's folder for the container's LocalPath (under its own /opt/ml)."""
    path = (local_path or DEFAULT_LOCAL_PATH).rstrip("/")
    if path != CONTAINER_BASE and not path.startswith(CONTAINER_BASE + "/"):
        raise RequestInvalid(f"CheckpointConfig.LocalPath {local_path!r}: the local runner keeps each host's files under "
                             "its own /opt/ml; use a path under /opt/ml (default /opt/ml/checkpoints)")
    return base.joinpath(*[p for p in path[len(CONTAINER_BASE):].split("/") if p])


class CheckpointSync:
    """One job's checkpoint sync: every host's LocalPath with the one S3 URI."""

    def __init__(self, storage: Storage, config: dict, bases: dict[str, Path], log: Callable[[str], None]):
        self.storage, self.log = storage, log
        self.bucket, prefix = split_s3_uri(config["S3Uri"])
        # "To avoid overwrites in distributed training with multiple instances, you must manually configure the
        # checkpoint file names and paths in your training script. The high-level SageMaker checkpoint configuration
        # specifies a single Amazon S3 location without additional suffixes or prefixes to tag checkpoints from
        # multiple instances" (Considerations for checkpointing): every host's folder maps to the same prefix.
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        self.folders = {host: local_folder(base, config.get("LocalPath") or DEFAULT_LOCAL_PATH)
                        for host, base in bases.items()}
        # Per host, what it holds as S3 has it (relative name -> (size, mtime)): copied in or uploaded.
        self.synced: dict[str, dict[str, tuple[int, int]]] = {host: {} for host in bases}
        self.seen: dict[str, dict[str, tuple[int, int]]] = {host: {} for host in bases}
        self.writer: dict[str, str] = {}   # key -> the host whose upload S3 holds (this job's uploads)
        self.figures = SyncFigures()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def copy_in(self) -> None:
        """"Existing checkpoints in S3 are written to the SageMaker container at the start of the job, enabling jobs to
        resume from a checkpoint" (model-checkpoints.html); "the checkpoints from this S3 bucket are restored to
        checkpoint_local_path in each instance of the new training job" (model-checkpoints-resume.html): every object
        under the URI onto every host, before the script starts."""
        started = time.monotonic()
        objects = self.storage.list_objects(self.bucket, self.prefix)
        for host, folder in self.folders.items():
            folder.mkdir(parents=True, exist_ok=True)
            for key, size in objects:
                relative = key[len(self.prefix):]
                if not relative or relative.endswith("/"):
                    continue
                target = folder / relative
                self.storage.download(self.bucket, key, target)
                stat = target.stat()
                self.synced[host][relative] = (stat.st_size, stat.st_mtime_ns)
                self.figures.copied_in_files += 1
                self.figures.copied_in_bytes += size
        self.figures.copy_in_seconds = time.monotonic() - started
        # "Checkpoints added to the S3 folder after the job has started are not copied to the training container"
        # (model-checkpoints.html): this is the only copy in.

    def start(self) -> None:
        """"SageMaker also writes new checkpoints from the container to S3 during training" (model-checkpoints.html):
        behind the script, which never waits for it."""
        self._thread = threading.Thread(target=self._run, name="checkpoint-sync", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(POLL_SECONDS):
                self.sync(final=False)
        except BaseException as err:   # said when the job ends
            self.error = err

    def stop(self) -> None:
        """The scripts have ended, and so has the sync. SageMaker's storage table gives the checkpoint path "Writes to
        S3 during training: Yes" and "Writes to S3 when job is terminated: No" (SageMaker Developer Guide,
        https://docs.aws.amazon.com/sagemaker/latest/dg/model-train-storage-env-var-summary.html): what the uploader
        had not sent by then stays out of S3, and is said (figures.left_behind)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error
        with self._lock:
            for host, folder in self.folders.items():
                for relative, state in sorted(self._files(folder).items()):
                    if self.synced[host].get(relative) != state:
                        self.figures.left_behind.append(f"{host}:{relative}")

    def _files(self, folder: Path) -> dict[str, tuple[int, int]]:
        out = {}
        if not folder.is_dir():
            return out
        for path in folder.rglob("*"):
            if path.is_file() and not path.name.endswith(UPLOADING_SUFFIX):
                stat = path.stat()
                out[path.relative_to(folder).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        return out

    def sync(self, final: bool = False) -> None:
        """One look: files that held still since the last look are uploaded (each marked ".sagemaker-uploading" beside
        it meanwhile, as SageMaker marks them), and files gone from a host are deleted in S3."""
        with self._lock:
            for host, folder in self.folders.items():
                now = self._files(folder)
                for relative, state in sorted(now.items()):
                    if self.synced[host].get(relative) == state:
                        continue
                    # A file still being written: uploaded once it holds still between two looks (or at the end).
                    if not final and self.seen[host].get(relative) != state:
                        continue
                    key = self.prefix + relative
                    other = self.writer.get(key)
                    if other is not None and other != host:
                        self.figures.clashes.append(f"{key}: hosts {other} and {host} both wrote it; S3 keeps {host}'s "
                                                    "(the last upload): name each host's files apart")
                    marker = folder / (relative + UPLOADING_SUFFIX)
                    try:
                        marker.touch()
                    except OSError:   # the script removed the file's folder meanwhile: the next look deletes it
                        continue
                    try:
                        self.storage.upload(self.bucket, key, folder / relative)
                    except FileNotFoundError:   # removed while uploading (the script's clean-up): nothing to send
                        continue
                    finally:
                        marker.unlink(missing_ok=True)
                    self.writer[key] = host
                    self.synced[host][relative] = state
                    self.figures.uploaded_files += 1
                    self.figures.uploaded_bytes += state[0]
                # "If a checkpoint is deleted in the SageMaker container, it will also be deleted in the S3 folder"
                # (model-checkpoints.html).
                for relative in sorted(set(self.synced[host]) - set(now)):
                    del self.synced[host][relative]
                    self.storage.delete_object(self.bucket, self.prefix + relative)
                    self.figures.deleted_keys += 1
                self.seen[host] = now


__all__ = ["CheckpointSync", "SyncFigures", "local_folder", "DEFAULT_LOCAL_PATH"]
