"""Checkpoints written and read back as DLIO does for MLPerf Storage's checkpoint benchmark, timed.

The job is given a plan (the ``checkpoint_plan`` hyperparameter, dslab/core/workloads/checkpoint.py ``CheckpointPlan``) and a
folder: SageMaker's checkpoint LocalPath, which SageMaker syncs to S3 behind the script, or a read-write FSx for
Lustre or EFS channel, which every host shares. Each host runs its GPUs' ranks (one thread each, as DLIO runs one
process per GPU) and, as DLIO's main.py ``_checkpoint`` does: for each of ``writes`` checkpoints, the emulated
compute (``time_between_checkpoints``, untimed), then every rank writes its files into ``global_epoch1_step<i>/``
at once; then the cache is dropped; then each of ``reads`` checkpoints is read back the same way.

- Files and sizes: DLIO's formula (checkpoint_layout.py), each file's bytes times the plan's ``scale``.
- fsync: every file is fsynced before its rank's save counts as done. MLPerf's Submission_guidelines.md: "We
  enforce ``fsync`` to be applied during checkpoint writes to ensure data is flushed to persistent storage." DLIO
  itself never fsyncs: its LoadConfig stores the workload's ``fsync`` as ``args.checkpoint_sync``, and its writer
  (base_checkpointing.py, ``fsync = self.args.checkpoint_fsync``) reads a flag nothing sets.
- The cache: MLPerf's sequence is "first perform the checkpoint write, then clear the cache, and finally perform the
  checkpoint read". The script drops the pages of every file it will read with posix_fadvise(POSIX_FADV_DONTNEED),
  which needs no privilege and touches only these files (a container cannot write /proc/sys/vm/drop_caches, and on
  the local lab that would flush the whole machine).
- Recovery from another rank's files (DLIO's ``recovery_rank_shift``, ``(rank + npernode) % size``): on a shared
  folder with two hosts or more, each rank reads the files a rank of the next host wrote, which its host's page
  cache never held; with one host, or SageMaker's per-host LocalPath, each rank reads its own (DLIO: "This run is on
  single client; checkpoint_recovery_rank_shift does not apply").
- The bytes: random, from one pool read at shifting offsets, so that no storage compresses or deduplicates them
  (DLIO writes torch.rand tensors).

Figures, as DLIO's statscounter.py reports them (GB = 1024**3 bytes): a save's duration is each rank's own, from the
start of the save to its last fsync; MLPerf's metric is "the maximum time across all GPUs" and throughput "the
minimum across all GPUs", i.e. the whole checkpoint's GiB over that longest duration. The stall is how long training
waits for a save: from the save's start until every rank of the host is done (for SageMaker's S3 sync, the write to
the local volume; the upload runs behind it).

Durable (SageMaker's S3 sync only, where the job names its ``checkpoint_s3_uri``): SageMaker's storage table gives the
checkpoint path "Writes to S3 during training: Yes" and "Writes to S3 when job is terminated: No" (SageMaker Developer
Guide, model-train-storage-env-var-summary.html), so a writer that ends as its last save returns may leave that
checkpoint out of S3, and the restore fails. While training goes on (the interval) the host lists the S3 URI every
``poll`` seconds; a checkpoint is durable once every file this host wrote for it is listed at its size and no
``.sagemaker-uploading`` marker of SageMaker's is beside it, and its durable time runs from the save's start to that
look. Before it ends, the writer waits (untimed) until every checkpoint it wrote is durable. The listing is
S3Reads.list (boto3, in every PyTorch image). Standard library and numpy only otherwise.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .checkpoint_layout import GIB, ModelShape, checkpoint_folder, rank_state, recovery_source, scaled_bytes

CHUNK_BYTES = 16 * 2 ** 20        # one write or read call
POOL_SLACK = 2 ** 20              # the random pool is a chunk plus this; each write starts elsewhere in it
POOL_STEP = 4099                  # bytes the start moves per write: no two chunks line up on a block boundary
MARKER = ".dslab-written-{host}"  # a host's ranks have fsynced checkpoint i (shared folders, several hosts)
DONE_MARKER = ".dslab-done-{host}"  # a host has written and read everything (shared folders: the clean-up waits)
UPLOADING_SUFFIX = ".sagemaker-uploading"   # SageMaker's mark on a file it is uploading (distributed-troubleshooting-
                                            # model-parallel.html); the local runner's sync keeps it too
DURABLE_POLL_SECONDS = 0.5        # how often a writer lists its S3 URI while uploads are outstanding (the durable
                                  # time's resolution); one ListObjectsV2 a look, $0.005 per 1,000 (S3 Standard)


class CheckpointError(RuntimeError):
    """The checkpoint cannot be written or read as planned; the message says what to change."""


@dataclass(frozen=True)
class CheckpointSpec:
    """The ``checkpoint_plan`` hyperparameter, checked."""
    workload: str
    shape: ModelShape
    mode: str
    processes: int
    data_parallelism: int
    ranks_per_host: int
    scale: float
    writes: int
    reads: int
    interval_seconds: float
    rank_sync: bool

    @classmethod
    def from_hyperparameter(cls, value: Any) -> "CheckpointSpec":
        if not isinstance(value, dict):
            raise CheckpointError(f"hyperparameter checkpoint_plan must be a JSON object, got {type(value).__name__}")
        keys = {"workload", "shape", "mode", "processes", "data_parallelism", "ranks_per_host", "scale", "writes",
                "reads", "interval_seconds", "rank_sync"}
        if set(value) != keys:
            missing, extra = sorted(keys - set(value)), sorted(set(value) - keys)
            raise CheckpointError(f"hyperparameter checkpoint_plan: {'missing ' + ', '.join(missing) if missing else ''}"
                                  f"{'; ' if missing and extra else ''}{'unknown ' + ', '.join(extra) if extra else ''}")
        try:
            shape = ModelShape.from_dict(value["shape"])
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"hyperparameter checkpoint_plan.shape: {err}") from None
        spec = cls(workload=str(value["workload"]), shape=shape, mode=str(value["mode"]),
                   processes=_whole(value, "processes", 1), data_parallelism=_whole(value, "data_parallelism", 1),
                   ranks_per_host=_whole(value, "ranks_per_host", 1), scale=float(value["scale"]),
                   writes=_whole(value, "writes", 0), reads=_whole(value, "reads", 0),
                   interval_seconds=float(value["interval_seconds"]), rank_sync=bool(value["rank_sync"]))
        if not 0 < spec.scale <= 1 or spec.interval_seconds < 0 or not (spec.writes or spec.reads):
            raise CheckpointError(f"hyperparameter checkpoint_plan: scale {spec.scale} (above 0, at most 1), "
                                  f"interval_seconds {spec.interval_seconds} (0 or more), writes {spec.writes} and "
                                  f"reads {spec.reads} (one of them above 0)")
        return spec

    @property
    def hosts(self) -> int:
        return math.ceil(self.processes / self.ranks_per_host)

    def host_ranks(self, host: int) -> range:
        return range(host * self.ranks_per_host, min((host + 1) * self.ranks_per_host, self.processes))

    def files(self, rank: int) -> list[tuple[str, int]]:
        """(name within a checkpoint's folder, bytes at this scale) of every file ``rank`` writes."""
        return [(name, scaled_bytes(size, self.scale))
                for name, size in rank_state(self.shape, rank, self.data_parallelism).files]

    @property
    def total_bytes(self) -> int:
        """One checkpoint, every rank's files: DLIO's throughput divides this by a rank's time."""
        return sum(size for rank in range(self.processes) for _, size in self.files(rank))


def _whole(value: dict, key: str, low: int) -> int:
    number = value[key]
    if isinstance(number, bool) or not isinstance(number, int) or number < low:
        raise CheckpointError(f"hyperparameter checkpoint_plan.{key}={number!r}: a whole number of at least {low}")
    return number


def _describe_os_error(err: OSError, path: Path, directory: Path, doing: str = "write") -> str:
    if err.errno == errno.EROFS:
        return (f"{directory} is read-only ({path}): a file-system channel that holds checkpoints needs "
                "FileSystemAccessMode rw")
    if err.errno == errno.ENOSPC:
        return f"no space left in {directory} writing {path}: the target holds less than the checkpoints need"
    if err.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to {doing} {path} in {directory}"
    if err.errno == errno.ENOENT:
        return f"checkpoint file {path} is missing: nothing wrote it (num_checkpoints_write, or an earlier job's)"
    return f"{path}: {err.strerror or err}"


class _Ranks:
    """This host's ranks, one thread each, started together (DLIO's comm.barrier() before every save and load)."""

    def __init__(self, ranks: range, clock: Callable[[], float]):
        self.ranks, self.clock = list(ranks), clock

    def run(self, work: Callable[[int], None], rank_sync: bool) -> tuple[dict[int, float], float]:
        """Each rank's seconds (its own work; with ``rank_sync``, until every rank is done, as DLIO's barrier inside
        the timed part), and the host's: from the start until the last rank is done."""
        started: list[float] = []   # taken as the last rank arrives, before any starts: the host's start
        start_line = threading.Barrier(len(self.ranks), action=lambda: started.append(self.clock()))
        finish_line = threading.Barrier(len(self.ranks)) if rank_sync else None
        seconds: dict[int, float] = {}
        errors: list[BaseException] = []

        def rank_thread(rank: int) -> None:
            start_line.wait()
            began = self.clock()
            try:
                work(rank)
            except BaseException as err:   # reported after every thread ends
                errors.append(err)
            if finish_line is not None:
                finish_line.wait()
            seconds[rank] = self.clock() - began

        threads = [threading.Thread(target=rank_thread, args=(r,), name=f"rank-{r}") for r in self.ranks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        host_seconds = self.clock() - started[0]
        if errors:
            raise errors[0]
        return seconds, host_seconds


class DurableWatch:
    """When each checkpoint a host saved is in S3 (see the module's docstring): ``listing`` gives every key under the
    job's checkpoint S3 URI, relative to it, with its size (S3Reads.list on AWS)."""

    def __init__(self, uri: str, listing: Callable[[], dict[str, int]], folder: Path, clock: Callable[[], float]):
        self.uri, self.listing, self.folder, self.clock = uri, listing, folder, clock
        self.pending: dict[int, tuple[float, dict[str, int]]] = {}
        self.durable: dict[int, float] = {}
        self.looks = 0

    def saved(self, step: int, started: float, files: dict[str, int]) -> None:
        """Checkpoint ``step`` saved (its save began at ``started``): ``files`` (name within the checkpoint's folder ->
        bytes) are this host's."""
        self.pending[step] = (started, files)

    def missing(self, step: int, listed: dict[str, int]) -> list[str]:
        folder = checkpoint_folder(step)
        return [name for name, size in self.pending[step][1].items()
                if listed.get(f"{folder}/{name}") != size
                or (self.folder / folder / (name + UPLOADING_SUFFIX)).exists()]

    def look(self) -> None:
        """One listing: every pending checkpoint now whole in S3 is durable as of now."""
        if not self.pending:
            return
        listed = self.listing()
        self.looks += 1
        now = self.clock()
        for step in sorted(self.pending):
            if not self.missing(step, listed):
                self.durable[step] = now - self.pending.pop(step)[0]

    def seconds(self, steps: int) -> list[float | None]:
        return [self.durable.get(step) for step in range(1, steps + 1)]


class CheckpointRun:
    """One host's part of a checkpoint plan in ``directory``."""

    def __init__(self, spec: CheckpointSpec, directory: Path, host: int, hosts: int, shared: bool, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.perf_counter,
                 wait_seconds: float = 3600.0, log: Callable[[str], None] = print,
                 durable: tuple[str, Callable[[], dict[str, int]]] | None = None,
                 poll_seconds: float = DURABLE_POLL_SECONDS):
        if hosts != spec.hosts:
            raise CheckpointError(f"checkpoint_plan is for {spec.hosts} host(s) of {spec.ranks_per_host} ranks "
                                  f"({spec.processes} processes); the job has {hosts}: plan it for the job's instance count")
        if not 0 <= host < hosts:
            raise CheckpointError(f"host {host} is not one of the job's {hosts}")
        self.spec, self.directory, self.host, self.hosts, self.shared = spec, Path(directory), host, hosts, shared
        self.sleep, self.clock, self.wait_seconds, self.log = sleep, clock, wait_seconds, log
        # SageMaker's S3 sync (this host's own folder): when each checkpoint is in S3.
        self.watch = (DurableWatch(durable[0], durable[1], self.directory, clock)
                      if durable is not None and not shared else None)
        self.poll_seconds = poll_seconds
        self.ranks = spec.host_ranks(host)
        self.files = {rank: spec.files(rank) for rank in self.ranks}
        # Which rank's files each rank reads back: another host's where the folder is shared by several.
        self.sources = {rank: recovery_source(rank, spec.processes, spec.ranks_per_host, hosts if shared else 1)
                        for rank in self.ranks}
        self.source_files = {rank: spec.files(src) for rank, src in self.sources.items()}
        self.total_bytes = spec.total_bytes
        self.fsync_calls = 0
        self._lock = threading.Lock()
        largest = max([size for files in (*self.files.values(), *self.source_files.values()) for _, size in files] or [1])
        chunk = max(1, min(CHUNK_BYTES, largest))
        self.chunk = chunk
        self.pool = memoryview(np.random.default_rng(host).integers(0, 256, chunk + POOL_SLACK, dtype=np.uint8).data)
        self.read_buffers = {rank: memoryview(np.empty(chunk, dtype=np.uint8).data) for rank in self.ranks}

    # -- the I/O of one rank ---------------------------------------------------------------------------------------

    def _write_file(self, path: Path, size: int, offset: int) -> int:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as err:
            raise CheckpointError(_describe_os_error(err, path, self.directory)) from None
        try:
            left = size
            while left:
                start = offset % POOL_SLACK
                n = min(left, self.chunk)
                written = os.write(fd, self.pool[start:start + n])
                left -= written
                offset += POOL_STEP
            os.fsync(fd)
            with self._lock:
                self.fsync_calls += 1
        except OSError as err:
            raise CheckpointError(_describe_os_error(err, path, self.directory)) from None
        finally:
            os.close(fd)
        return offset

    def _save_rank(self, step: int, rank: int) -> None:
        folder = self.directory / checkpoint_folder(step)
        offset = rank * 7919
        for name, size in self.files[rank]:
            offset = self._write_file(folder / name, size, offset)

    def _load_rank(self, step: int, rank: int) -> None:
        folder = self.directory / checkpoint_folder(step)
        buffer = self.read_buffers[rank]
        for name, size in self.source_files[rank]:
            path = folder / name
            got = 0
            try:
                with open(path, "rb", buffering=0) as f:
                    while True:
                        n = f.readinto(buffer)
                        if not n:
                            break
                        got += n
            except OSError as err:
                raise CheckpointError(_describe_os_error(err, path, self.directory, "read")) from None
            if got != size:
                raise CheckpointError(f"checkpoint file {path} holds {got:,} bytes, {size:,} expected: another "
                                      "plan or job wrote it")

    # -- around the timed parts ------------------------------------------------------------------------------------

    def _prepare(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for step in range(1, self.spec.writes + 1):
                (self.directory / checkpoint_folder(step)).mkdir(exist_ok=True)
        except OSError as err:
            raise CheckpointError(_describe_os_error(err, self.directory, self.directory)) from None
        if self.spec.writes:
            # Every checkpoint is kept (DLIO writes each into its own folder): the host's, or on a shared folder
            # every host's, times the checkpoints written.
            per_checkpoint = self.total_bytes if self.shared else sum(s for f in self.files.values() for _, s in f)
            needed = per_checkpoint * self.spec.writes
            free = shutil.disk_usage(self.directory).free
            if needed > free:
                raise CheckpointError(f"{self.directory} has {free:,} bytes free and {self.spec.writes} checkpoint(s) "
                                      f"of {per_checkpoint:,} bytes need {needed:,}: a larger target, fewer "
                                      "checkpoints, or a smaller --scale")

    def _mark_written(self, step: int) -> None:
        if self.shared and self.hosts > 1:
            marker = self.directory / checkpoint_folder(step) / MARKER.format(host=self.host)
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _await_sources(self, step: int) -> None:
        """Before reading another host's files, wait (untimed) until that host has fsynced them: the hosts run
        without DLIO's MPI barrier."""
        hosts = {src // self.spec.ranks_per_host for src in self.sources.values()} - {self.host}
        if not hosts or not self.spec.writes:
            return
        deadline = self.clock() + self.wait_seconds
        folder = self.directory / checkpoint_folder(step)
        for host in sorted(hosts):
            while not (folder / MARKER.format(host=host)).exists():
                if self.clock() > deadline:
                    raise CheckpointError(f"host {host} did not finish writing {folder} within {self.wait_seconds:g} s")
                self.sleep(0.05)

    def _idle(self, seconds: float) -> None:
        """The emulated compute between checkpoints (DLIO's framework.compute); SageMaker's uploads run meanwhile, and
        the host looks for them every poll."""
        if self.watch is None or not self.watch.pending:
            self.sleep(seconds)
            return
        end = self.clock() + seconds
        while True:
            self.watch.look()
            left = end - self.clock()
            if left <= 0:
                return
            self.sleep(min(self.poll_seconds, left) if self.watch.pending else left)

    def _await_durable(self) -> None:
        """Untimed, before the job may end: every checkpoint written is in S3, or the job fails naming what is not."""
        if self.watch is None:
            return
        deadline = self.clock() + self.wait_seconds
        self.watch.look()
        while self.watch.pending:
            if self.clock() > deadline:
                step = min(self.watch.pending)
                missing = self.watch.missing(step, self.watch.listing())
                raise CheckpointError(
                    f"checkpoint {step} was not whole in {self.watch.uri} {self.wait_seconds:g} s after its save "
                    f"({len(missing)} file(s) missing, e.g. {checkpoint_folder(step)}/{missing[0]}): SageMaker does not "
                    "write to S3 once the job ends, so a restore would miss it; the uploads are slower than the "
                    "checkpoints (fewer or smaller checkpoints, a longer interval, or FSx/EFS as the target)")
            self.sleep(self.poll_seconds)
            self.watch.look()
        self.log(f"dslab: every checkpoint in {self.watch.uri} ({self.watch.looks} listings)")

    def drop_cache(self) -> str:
        """The pages of every file this host wrote or will read, dropped: how."""
        if not hasattr(os, "posix_fadvise"):
            return "none: this platform has no posix_fadvise"
        paths = {self.directory / checkpoint_folder(step) / name
                 for step in range(1, max(self.spec.writes, self.spec.reads) + 1)
                 for files in (*self.files.values(), *self.source_files.values()) for name, _ in files}
        for path in sorted(paths):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue   # another host's, not written yet: its pages are not here
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        return "posix_fadvise(POSIX_FADV_DONTNEED) on every checkpoint file"

    def run(self) -> dict[str, Any]:
        spec = self.spec
        self._prepare()
        ranks = _Ranks(self.ranks, self.clock)
        saves, loads, stalls, load_walls = [], [], [], []
        rank_saves: dict[int, list[float]] = {r: [] for r in self.ranks}
        rank_loads: dict[int, list[float]] = {r: [] for r in self.ranks}
        for step in range(1, spec.writes + 1):
            self._idle(spec.interval_seconds)   # DLIO's framework.compute(..., time_between_checkpoints)
            began = self.clock()
            seconds, wall = ranks.run(lambda rank: self._save_rank(step, rank), spec.rank_sync)
            self._mark_written(step)
            if self.watch is not None:
                self.watch.saved(step, began, {name: size for files in self.files.values() for name, size in files})
            for rank, s in seconds.items():
                rank_saves[rank].append(s)
            saves.append(max(seconds.values()))
            stalls.append(wall)
            self.log(f"dslab: checkpoint {step} saved in {saves[-1]:.3f} s (host {self.host}, {len(self.ranks)} ranks)")
        self._await_durable()
        cache_drop = self.drop_cache()
        for step in range(1, spec.reads + 1):
            self.sleep(spec.interval_seconds)
            self._await_sources(step)
            seconds, wall = ranks.run(lambda rank: self._load_rank(step, rank), spec.rank_sync)
            for rank, s in seconds.items():
                rank_loads[rank].append(s)
            loads.append(max(seconds.values()))
            load_walls.append(wall)
            self.log(f"dslab: checkpoint {step} loaded in {loads[-1]:.3f} s (host {self.host})")
        return self.summary(saves, stalls, loads, load_walls, rank_saves, rank_loads, cache_drop)

    def summary(self, saves, stalls, loads, load_walls, rank_saves, rank_loads, cache_drop) -> dict[str, Any]:
        spec = self.spec
        total_gib = self.total_bytes / GIB
        host_bytes = sum(size for files in self.files.values() for _, size in files)
        read_bytes = sum(size for files in self.source_files.values() for _, size in files)

        def mean(values):
            return sum(values) / len(values) if values else None

        def rate(seconds):   # the whole checkpoint over the longest rank: MLPerf's "minimum across all GPUs"
            return [total_gib / s if s > 0 else None for s in seconds]
        save_rates, load_rates = rate(saves), rate(loads)
        shift = {rank: src for rank, src in self.sources.items() if rank != src}
        return {
            "workload": spec.workload, "mode": spec.mode, "processes": spec.processes,
            "data_parallelism": spec.data_parallelism, "hosts": self.hosts, "host": self.host,
            "ranks": list(self.ranks), "scale": spec.scale, "writes": spec.writes, "reads": spec.reads,
            "interval_seconds": spec.interval_seconds, "directory": str(self.directory), "shared": self.shared,
            "bytes_per_checkpoint": self.total_bytes, "host_bytes_per_checkpoint": host_bytes,
            "host_read_bytes_per_checkpoint": read_bytes,
            "files_per_checkpoint": sum(len(f) for f in self.files.values()),
            "gb": "GiB (1024**3 bytes), which DLIO reports as GB",
            "save_seconds": saves, "save_seconds_mean": mean(saves),
            "save_gb_per_second": save_rates, "save_gb_per_second_mean": mean([r for r in save_rates if r]),
            "save_host_gb_per_second_mean": (host_bytes * len(saves) / GIB / sum(stalls)) if sum(stalls) > 0 else None,
            "stall_seconds": stalls, "stall_seconds_mean": mean(stalls),
            "load_seconds": loads, "load_seconds_mean": mean(loads),
            "load_gb_per_second": load_rates, "load_gb_per_second_mean": mean([r for r in load_rates if r]),
            "load_host_gb_per_second_mean": (read_bytes * len(loads) / GIB / sum(load_walls))
            if sum(load_walls) > 0 else None,
            "rank_save_seconds": {str(r): v for r, v in rank_saves.items()},
            "rank_load_seconds": {str(r): v for r, v in rank_loads.items()},
            "fsync": True, "fsync_calls": self.fsync_calls, "cache_drop": cache_drop,
            "recovery_rank_shift": {str(r): s for r, s in shift.items()},
            **self._durable_figures(),
        }

    def _durable_figures(self) -> dict[str, Any]:
        if self.watch is None or not self.spec.writes:
            return {}
        durable = self.watch.seconds(self.spec.writes)
        known = [d for d in durable if d is not None]
        return {"durable_seconds": durable, "durable_seconds_mean": sum(known) / len(known) if known else None,
                "durable_checked": f"listed {self.watch.uri} every {self.poll_seconds:g} s ({self.watch.looks} listings)"}


    def clean_up(self) -> str:
        """Delete the checkpoints once nothing reads them (untimed, after the figures): a folder of this host's own
        (SageMaker's LocalPath) at once, with everything in it; a shared folder by the first host, once every host has
        said it is done (its done marker), so that no host's reads lose their files."""
        if self.shared and self.hosts > 1:
            marker = self.directory / DONE_MARKER.format(host=self.host)
            marker.touch()
            if self.host != 0:
                return "left to host 0, once every host is done"
            deadline = self.clock() + self.wait_seconds
            for host in range(self.hosts):
                while not (self.directory / DONE_MARKER.format(host=host)).exists():
                    if self.clock() > deadline:
                        return f"kept: host {host} did not finish within {self.wait_seconds:g} s"
                    self.sleep(0.05)
        if self.shared:
            shutil.rmtree(self.directory, ignore_errors=True)
            return f"deleted {self.directory}"
        # What the folder holds (SageMaker's copy-in too, on a restore): SageMaker deletes it in S3 as well.
        mine = ({p.relative_to(self.directory).as_posix() for p in self.directory.rglob("*")
                 if p.is_file() and not p.name.endswith(UPLOADING_SUFFIX)} if self.directory.is_dir() else set())
        for path in list(self.directory.iterdir()) if self.directory.is_dir() else []:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        if self.watch is None:
            return f"emptied {self.directory}"
        # SageMaker deletes in S3 what the container deletes, while the job runs: wait for it as for the uploads.
        deadline = self.clock() + self.wait_seconds
        while mine & set(self.watch.listing()):
            if self.clock() > deadline:
                return (f"emptied {self.directory}; {self.watch.uri} still held this host's checkpoints "
                        f"{self.wait_seconds:g} s later: delete them there")
            self.sleep(self.poll_seconds)
        return f"emptied {self.directory} and, through SageMaker's sync, {self.watch.uri}"


def run_checkpoints(spec: CheckpointSpec, directory: Path, host: int, hosts: int, shared: bool, cleanup: bool = False,
                    **options) -> dict:
    """Write, drop the cache, read: this host's figures (see the module's docstring); with ``cleanup``, then delete the
    checkpoints (CheckpointRun.clean_up), which on SageMaker's LocalPath deletes SageMaker's copies in S3 too."""
    run = CheckpointRun(spec, directory, host, hosts, shared, **options)
    figures = run.run()
    if cleanup:
        figures["cleanup"] = run.clean_up()
    return figures


__all__ = ["CheckpointSpec", "CheckpointRun", "CheckpointError", "DurableWatch", "run_checkpoints", "CHUNK_BYTES",
           "UPLOADING_SUFFIX"]
