"""A local job's input channels that need more than a folder: Pipe mode's FIFOs fed per epoch (RecordIO-
wrapped where the channel says so) and File mode's parallel read-ahead, and the objects a channel names."""

from __future__ import annotations

import errno
import json
import os
import random
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from dslab_train.records import recordio_frame

from .container import JobFailed
from .job_storage import Storage, split_s3_uri

PIPE_PREFETCH = 8                    # GETs in flight at once


PIPE_READ_AHEAD_BYTES = 64 * 1024 * 1024  # fetched and held ahead of the reader (128 small objects at most)


PIPE_READ_AHEAD_MAX = 128


class ReadAhead:
    """An epoch's objects in order, fetched PIPE_PREFETCH at a time and held up to PIPE_READ_AHEAD_BYTES
    ahead of the reader. It starts fetching when made, before the script opens the FIFO: SageMaker's
    Pipe mode streams from S3 as the job starts, so the script's own start-up overlaps the first GETs."""

    def __init__(self, pool: ThreadPoolExecutor, objects: list[tuple[str, str]], read: Callable[[str, str], bytes],
                 halt: threading.Event):
        self.pool, self.objects, self.read, self.halt = pool, iter(objects), read, halt
        self.pending: deque = deque()
        self.depth = PIPE_PREFETCH  # until the first object's size is known
        self._fill()

    def _fill(self) -> None:
        while len(self.pending) < self.depth:
            following = next(self.objects, None)
            if following is None:
                return
            self.pending.append(self.pool.submit(self.read, *following))

    def __iter__(self):
        while True:
            self._fill()
            if not self.pending or self.halt.is_set():
                return
            data = self.pending.popleft().result()
            # Small objects (JPEGs) many ahead; large ones (TFRecord shards) two, which bounds the memory held.
            self.depth = max(2, min(PIPE_READ_AHEAD_MAX, PIPE_READ_AHEAD_BYTES // max(1, len(data))))
            yield data


class PipeFeeder(threading.Thread):
    """Feeds ``<channel>_<epoch>`` FIFOs, one per epoch, each read once to EOF, as SageMaker does."""

    def __init__(self, fifo_dir: Path, channel: str, objects: list[tuple[str, str]], read: Callable[[str, str], bytes],
                 wrapper: str, seed: int | None, alive: Callable[[], bool]):
        super().__init__(daemon=True, name=f"pipe-{channel}")
        self.fifo_dir, self.channel, self.objects, self.read = fifo_dir, channel, objects, read
        self.wrapper, self.seed, self.alive = wrapper, seed, alive
        self.epochs_fed = 0
        self.bytes_fed = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        try:
            epoch = 0
            with ThreadPoolExecutor(PIPE_PREFETCH, thread_name_prefix=f"pipe-{self.channel}-get") as pool:
                while not self._halt.is_set():
                    path = self.fifo_dir / f"{self.channel}_{epoch}"
                    os.mkfifo(path)
                    order = list(self.objects)
                    if self.seed is not None:
                        random.Random(self.seed + epoch).shuffle(order)
                    ahead = ReadAhead(pool, order, self.read, self._halt)  # fetching starts now
                    fd = self._open_when_read(path)
                    if fd is None:
                        return
                    try:
                        with os.fdopen(fd, "wb", buffering=1024 * 1024) as pipe:
                            for data in ahead:
                                chunk = recordio_frame(data) if self.wrapper == "RecordIO" else data
                                pipe.write(chunk)
                                pipe.flush()  # the reader gets each object as soon as it is fetched
                                self.bytes_fed += len(chunk)
                    except BrokenPipeError:
                        pass  # the script stopped reading this epoch early (max_samples): fine
                    self.epochs_fed += 1
                    epoch += 1
        except BaseException as err:
            self.error = err

    def _open_when_read(self, path: Path) -> int | None:
        while not self._halt.is_set() and self.alive():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as err:
                if err.errno == errno.ENXIO:  # no reader yet
                    time.sleep(0.005)
                    continue
                raise
            os.set_blocking(fd, True)
            return fd
        return None


def common_prefix(s3: dict[str, Any]) -> str:
    bucket, prefix = split_s3_uri(s3["S3Uri"])
    return prefix if s3["S3DataType"] == "S3Prefix" else ""


def channel_objects(storage: Storage, s3: dict[str, Any]) -> list[tuple[str, str]]:
    bucket, prefix = split_s3_uri(s3["S3Uri"])
    if s3["S3DataType"] == "S3Prefix":
        return [(bucket, key) for key, _ in storage.list_objects(bucket, prefix) if not key.endswith("/")]
    try:
        manifest = json.loads(storage.read_object(bucket, prefix))
    except KeyError:   # a missing object is the job's failure, said, not the runner's
        raise JobFailed(f"ClientError: the manifest file {s3['S3Uri']} does not exist: upload the dataset again "
                        "(`dslab dataset upload` writes it beside the prefix)") from None
    if not manifest or "prefix" not in manifest[0]:
        raise JobFailed(f"ClientError: {s3['S3Uri']} is not a manifest file ([{{\"prefix\": ...}}, key, ...])")
    base_bucket, base_prefix = split_s3_uri(manifest[0]["prefix"])
    return [(base_bucket, base_prefix + key) for key in manifest[1:]]
