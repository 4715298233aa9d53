"""The training script's checkpoint writes (training/dslab_train/checkpoint.py), as the SageMaker container runs them:
the checkpoint_plan hyperparameter refused in one line naming what to change, each rank's files written (names,
sizes, the bytes from one random pool at shifting offsets, fsynced) and read back, another host's files waited for,
the uploads to S3 watched until every checkpoint is durable, the page cache dropped, the figures a job reports, the
clean-up, and the OS errors explained. The clock and the sleeps are fakes (no real waiting); the module's ``os`` is
the real one seen through a recorder that also stops a runaway write before it fills the disk."""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from .helpers import TRAINING

sys.path.insert(0, str(TRAINING))
from dslab_train import checkpoint  # noqa: E402
from dslab_train.checkpoint import CheckpointError, CheckpointRun, CheckpointSpec, DurableWatch  # noqa: E402

# One file a rank of 20,000 bytes: "model_states-<rank>.pt" (a non-transformer model, ZeRO 3: every rank writes).
ONE_FILE = {"num_layers": -1, "zero_stage": 3, "model_size_bytes": 20000}
# A tiny transformer: three files a rank, 20,000 + 1,112 + 7,152 bytes at DP 2.
THREE_FILES = {"num_layers": 1, "hidden_size": 8, "ffn_hidden_size": 16, "num_attention_heads": 2, "num_kv_heads": 1,
               "vocab_size": 32, "zero_stage": 3, "model_size_bytes": 20000}
URI = "s3://b/ckpt/"
STEP1 = "global_epoch1_step1"
STEP2 = "global_epoch1_step2"


def plan(**changes) -> dict:
    """A checkpoint_plan hyperparameter as the lab sends it: two ranks on one host, one checkpoint written and read."""
    value = {"workload": "tiny", "shape": dict(ONE_FILE), "mode": "default", "processes": 2, "data_parallelism": 2,
             "ranks_per_host": 2, "scale": 1.0, "writes": 1, "reads": 1, "interval_seconds": 0.0, "rank_sync": False}
    value.update(changes)
    return value


def spec(**changes) -> CheckpointSpec:
    return CheckpointSpec.from_hyperparameter(plan(**changes))


def refusal(value) -> str:
    with pytest.raises(CheckpointError) as err:
        CheckpointSpec.from_hyperparameter(value)
    return str(err.value)


class Clock:
    """A fake clock that only the fake sleeps move; a wait that never ends fails the test instead of hanging."""

    def __init__(self, now: float = 0.0, jump: float | None = None):
        self.now, self.sleeps, self.jump = now, [], jump   # jump: how far a sleep moves the clock, if not its own
        self.after_sleep = lambda count: None   # something that happens meanwhile, after the count-th sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if len(self.sleeps) > 2000:
            raise AssertionError("a wait that does not end")
        self.now += seconds if self.jump is None else self.jump
        self.after_sleep(len(self.sleeps))


class OsView:
    """The module's ``os``: the real one, its writes counted (past 64 MiB a test fails instead of filling the disk),
    its fsyncs and posix_fadvise calls recorded by path, a fault raised where a test sets one, posix_fadvise hidden
    where a test hides it."""

    LIMIT = 64 * 2 ** 20

    def __init__(self):
        self.lock = threading.Lock()
        self.bytes_written, self.writes, self.fsynced, self.fadvised = 0, 0, [], []
        self.open_fds: set[int] = set()
        self.faults: dict[str, OSError] = {}
        self.fadvise_hidden = False

    def __getattr__(self, name):
        if name == "posix_fadvise":
            if self.fadvise_hidden:
                raise AttributeError(name)
            return self._fadvise
        return getattr(os, name)

    def _fault(self, name: str) -> None:
        if name in self.faults:
            raise self.faults[name]

    def open(self, path, flags, mode=0o777):
        self._fault("open")
        fd = os.open(path, flags, mode)
        with self.lock:
            self.open_fds.add(fd)
        return fd

    def close(self, fd):
        with self.lock:
            self.open_fds.discard(fd)
        return os.close(fd)

    def write(self, fd, data):
        self._fault("write")
        with self.lock:
            self.writes += 1
            self.bytes_written += len(data)
            if self.bytes_written > self.LIMIT or not len(data):
                raise AssertionError("a write that does not end")
        return os.write(fd, data)

    def fsync(self, fd):
        self._fault("fsync")
        with self.lock:
            self.fsynced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return os.fsync(fd)

    def _fadvise(self, fd, offset, length, advice):
        with self.lock:
            self.fadvised.append((os.readlink(f"/proc/self/fd/{fd}"), offset, length, advice))
        return os.posix_fadvise(fd, offset, length, advice)


@pytest.fixture
def osv(monkeypatch) -> OsView:
    view = OsView()
    monkeypatch.setattr(checkpoint, "os", view)
    return view


def make_run(directory: Path, value: dict | None = None, host: int = 0, hosts: int = 1, shared: bool = False,
             clock: Clock | None = None, lines: list | None = None, **options) -> CheckpointRun:
    clock = clock or Clock()
    log = lines.append if lines is not None else (lambda line: None)
    return CheckpointRun(CheckpointSpec.from_hyperparameter(value or plan()), directory, host, hosts, shared,
                         sleep=clock.sleep, clock=clock.clock, log=log, **options)


def tree(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


class S3View:
    """SageMaker's sync seen through ListObjectsV2 on the checkpoint URI: a file the container holds is listed
    ``lag`` looks after the look that first saw it (never, with lag None), at its size or at ``sizes``' size; a file
    the container deleted leaves the listing ``gone_lag`` looks later (never, with None)."""

    def __init__(self, folder: Path, lag: int | None = 1, sizes: dict[str, int] | None = None,
                 gone_lag: int | None = 0, never: tuple[str, ...] = ()):
        self.folder, self.lag, self.sizes, self.gone_lag, self.never = folder, lag, sizes or {}, gone_lag, never
        self.looks, self.seen, self.gone = 0, {}, {}
        self.listed: dict[str, int] = {}

    def __call__(self) -> dict[str, int]:
        self.looks += 1
        here = {p.relative_to(self.folder).as_posix(): p.stat().st_size
                for p in self.folder.rglob("*") if p.is_file()} if self.folder.is_dir() else {}
        for key, size in here.items():
            seen = self.seen.setdefault(key, self.looks)
            if self.lag is not None and self.looks - seen >= self.lag and key not in self.never:
                self.listed[key] = self.sizes.get(key, size)
        for key in [k for k in self.listed if k not in here]:
            gone = self.gone.setdefault(key, self.looks)
            if self.gone_lag is not None and self.looks - gone >= self.gone_lag:
                del self.listed[key]
        return dict(self.listed)


# ---- the plan hyperparameter --------------------------------------------------------------------------------------

def test_a_plan_that_is_not_a_json_object_is_refused_naming_what_it_is():
    assert refusal(["tiny"]) == "hyperparameter checkpoint_plan must be a JSON object, got list"
    assert refusal("tiny") == "hyperparameter checkpoint_plan must be a JSON object, got str"


@pytest.mark.parametrize("drop, add, said", [
    (("writes", "reads"), {}, "hyperparameter checkpoint_plan: missing reads, writes"),
    ((), {"zeta": 1, "extra": 2}, "hyperparameter checkpoint_plan: unknown extra, zeta"),
    (("writes",), {"zeta": 1}, "hyperparameter checkpoint_plan: missing writes; unknown zeta"),
])
def test_a_plan_with_missing_or_unknown_keys_is_refused_naming_them(drop, add, said):
    value = {k: v for k, v in plan(**add).items() if k not in drop}
    assert refusal(value) == said


def test_a_shape_that_is_not_a_model_shape_is_refused_naming_the_shape():
    assert refusal(plan(shape={"layers": 4})) == \
        "hyperparameter checkpoint_plan.shape: unknown model shape field 'layers'"
    assert refusal(plan(shape=5)) == "hyperparameter checkpoint_plan.shape: 'int' object is not iterable"
    assert refusal(plan(shape={"hidden": 1, "layers": 2})) == \
        "hyperparameter checkpoint_plan.shape: unknown model shape field 'hidden'"


def test_a_good_plan_is_read_into_every_field():
    got = CheckpointSpec.from_hyperparameter(plan(
        workload="llama_8b", mode="subset", shape=dict(THREE_FILES), processes=3, data_parallelism=2,
        ranks_per_host=2, scale=1, writes=4, reads=2, interval_seconds=5, rank_sync=1))
    assert (got.workload, got.mode, got.processes, got.data_parallelism, got.ranks_per_host, got.scale, got.writes,
            got.reads, got.interval_seconds, got.rank_sync) == ("llama_8b", "subset", 3, 2, 2, 1.0, 4, 2, 5.0, True)
    assert type(got.scale) is float and type(got.interval_seconds) is float and got.rank_sync is True
    assert (got.shape.num_layers, got.shape.hidden_size, got.shape.vocab_size, got.shape.zero_stage,
            got.shape.model_size_bytes, got.shape.tensor) == (1, 8, 32, 3, 20000, 1)
    assert CheckpointSpec.from_hyperparameter(plan(workload=7, rank_sync=0)).workload == "7"
    assert CheckpointSpec.from_hyperparameter(plan(rank_sync=0)).rank_sync is False


def test_the_smallest_plan_each_field_allows_is_taken():
    """One process, one data-parallel rank, one rank a host, the whole file (scale 1), no interval; only reads, or
    only writes."""
    small = spec(processes=1, data_parallelism=1, ranks_per_host=1, scale=1.0, interval_seconds=0.0, writes=0, reads=1)
    assert (small.processes, small.data_parallelism, small.ranks_per_host, small.writes, small.reads,
            small.scale, small.interval_seconds) == (1, 1, 1, 0, 1, 1.0, 0.0)
    assert (spec(writes=1, reads=0).writes, spec(writes=1, reads=0).reads) == (1, 0)


@pytest.mark.parametrize("key, value, said", [
    ("processes", True, "hyperparameter checkpoint_plan.processes=True: a whole number of at least 1"),
    ("processes", 0, "hyperparameter checkpoint_plan.processes=0: a whole number of at least 1"),
    ("data_parallelism", 2.0, "hyperparameter checkpoint_plan.data_parallelism=2.0: a whole number of at least 1"),
    ("ranks_per_host", 0, "hyperparameter checkpoint_plan.ranks_per_host=0: a whole number of at least 1"),
    ("writes", -1, "hyperparameter checkpoint_plan.writes=-1: a whole number of at least 0"),
    ("reads", "1", "hyperparameter checkpoint_plan.reads='1': a whole number of at least 0"),
    ("reads", False, "hyperparameter checkpoint_plan.reads=False: a whole number of at least 0"),
])
def test_a_count_that_is_not_a_whole_number_in_range_is_refused_naming_the_key(key, value, said):
    assert refusal(plan(**{key: value})) == said


@pytest.mark.parametrize("changes, said", [
    ({"scale": 0}, "scale 0.0 (above 0, at most 1), interval_seconds 0.0 (0 or more), writes 1 and reads 1"),
    ({"scale": 1.5}, "scale 1.5 (above 0, at most 1), interval_seconds 0.0 (0 or more), writes 1 and reads 1"),
    ({"interval_seconds": -0.5}, "scale 1.0 (above 0, at most 1), interval_seconds -0.5 (0 or more), writes 1 and "
                                 "reads 1"),
    ({"writes": 0, "reads": 0}, "scale 1.0 (above 0, at most 1), interval_seconds 0.0 (0 or more), writes 0 and "
                                "reads 0"),
])
def test_a_scale_interval_or_count_out_of_range_is_refused_saying_every_range(changes, said):
    assert refusal(plan(**changes)) == f"hyperparameter checkpoint_plan: {said} (one of them above 0)"


def test_the_plan_says_its_hosts_their_ranks_and_each_ranks_files_at_its_scale():
    """Five processes at two a host need three hosts, the last holding one rank; every file is scaled."""
    s = spec(shape=dict(THREE_FILES), processes=5, ranks_per_host=2, scale=0.5)
    assert s.hosts == 3
    assert (list(s.host_ranks(0)), list(s.host_ranks(1)), list(s.host_ranks(2))) == ([0, 1], [2, 3], [4])
    assert s.files(4) == [("model_states-4.pt", 10000), ("zero_pp_rank_4_mp_rank_0_model_states.pt", 556),
                          ("zero_pp_rank_4_mp_rank_0_optim_states.pt", 3576)]
    assert s.total_bytes == 5 * (10000 + 556 + 3576)
    assert spec(processes=4, ranks_per_host=2).hosts == 2
    assert spec(processes=1, ranks_per_host=2).hosts == 1


# ---- OS errors, explained -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("err, said", [
    (OSError(errno.EROFS, "Read-only file system"), "/ck is read-only (/ck/a.pt): a file-system channel that holds "
                                                    "checkpoints needs FileSystemAccessMode rw"),
    (OSError(errno.ENOSPC, "No space left on device"), "no space left in /ck writing /ck/a.pt: the target holds less "
                                                       "than the checkpoints need"),
    (OSError(errno.EACCES, "Permission denied"), "no permission to write /ck/a.pt in /ck"),
    (OSError(errno.EPERM, "Operation not permitted"), "no permission to write /ck/a.pt in /ck"),
    (OSError(errno.ENOENT, "No such file"), "checkpoint file /ck/a.pt is missing: nothing wrote it "
                                            "(num_checkpoints_write, or an earlier job's)"),
    (OSError(errno.EIO, "Input/output error"), "/ck/a.pt: Input/output error"),
    (OSError("the disk went away"), "/ck/a.pt: the disk went away"),
])
def test_an_os_error_is_said_as_what_to_change(err, said):
    assert checkpoint._describe_os_error(err, Path("/ck/a.pt"), Path("/ck")) == said


# ---- the ranks, one thread each -----------------------------------------------------------------------------------

def within(seconds: float, call):
    """``call()``'s result (or its exception), or the test fails if it has not returned in ``seconds``: ranks that
    never pass their start line would otherwise hang the suite."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as err:   # handed to the test
            outcome["error"] = err
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the ranks did not finish within {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_a_rank_is_timed_from_its_own_start_and_the_host_from_the_start_line():
    """A clock that ticks once a reading: the host's start (0), the rank's start (1), its end (2), the host's end
    (3)."""
    ticks = iter(range(100))
    names = []
    seconds, host = within(5, lambda: checkpoint._Ranks(range(5, 6), lambda: next(ticks)).run(
        lambda rank: names.append((rank, threading.current_thread().name)), rank_sync=True))
    assert (seconds, host, names) == ({5: 1}, 3, [(5, "rank-5")])


def test_a_rank_that_fails_fails_the_host_once_every_rank_has_ended():
    done = []

    def work(rank):
        if rank == 1:
            raise OSError("rank 1 lost its disk")
        done.append(rank)
    for sync in (False, True):
        with pytest.raises(OSError, match="^rank 1 lost its disk$"):
            within(5, lambda: checkpoint._Ranks(range(0, 3), time.perf_counter).run(work, rank_sync=sync))
    assert sorted(done) == [0, 0, 2, 2]


# ---- when a checkpoint is in S3 -----------------------------------------------------------------------------------

def test_a_watch_with_nothing_saved_lists_nothing(tmp_path):
    calls = []
    watch = DurableWatch(URI, lambda: calls.append(1) or {}, tmp_path, lambda: 3.0)
    watch.look()
    assert (calls, watch.looks, watch.seconds(2)) == ([], 0, [None, None])


def test_a_checkpoint_is_durable_once_every_file_is_listed_at_its_size_and_none_is_marked_uploading(tmp_path):
    listed = {f"{STEP1}/a.pt": 10, f"{STEP1}/b.pt": 5, f"{STEP2}/a.pt": 10}
    now = [7.5]
    watch = DurableWatch(URI, lambda: dict(listed), tmp_path, lambda: now[0])
    watch.saved(1, 2.0, {"a.pt": 10, "b.pt": 5})
    watch.saved(2, 3.0, {"a.pt": 10, "b.pt": 6})
    watch.saved(3, 4.0, {"a.pt": 1})
    watch.look()
    # Checkpoint 1 whole 5.5 s after its save began; 2 has b.pt at another size; 3 is not listed at all.
    assert (watch.durable, sorted(watch.pending), watch.looks) == ({1: 5.5}, [2, 3], 1)
    assert watch.missing(2, listed) == ["b.pt"]
    assert watch.missing(3, listed) == ["a.pt"]
    listed.update({f"{STEP2}/b.pt": 6})
    (tmp_path / STEP2).mkdir()
    (tmp_path / STEP2 / "a.pt.sagemaker-uploading").touch()   # a part of a.pt still going up
    now[0] = 9.0
    watch.look()
    assert (watch.durable, sorted(watch.pending), watch.looks) == ({1: 5.5}, [2, 3], 2)
    assert watch.missing(2, listed) == ["a.pt"]
    (tmp_path / STEP2 / "a.pt.sagemaker-uploading").unlink()
    now[0] = 10.0
    watch.look()
    assert (watch.durable, sorted(watch.pending), watch.looks) == ({1: 5.5, 2: 7.0}, [3], 3)
    assert watch.seconds(4) == [5.5, 7.0, None, None]
    assert watch.seconds(1) == [5.5]


def test_a_later_checkpoint_whole_before_an_earlier_one_is_durable_at_its_own_look(tmp_path):
    listed = {f"{STEP2}/a.pt": 1}
    watch = DurableWatch(URI, lambda: dict(listed), tmp_path, lambda: 6.0)
    watch.saved(1, 1.0, {"a.pt": 1})
    watch.saved(2, 2.0, {"a.pt": 1})
    watch.look()
    assert (watch.durable, list(watch.pending), watch.seconds(3)) == ({2: 4.0}, [1], [None, 4.0, None])


# ---- the run: what it is given ------------------------------------------------------------------------------------

def test_a_plan_for_another_number_of_hosts_or_a_host_not_in_the_job_is_refused(tmp_path):
    value = plan(processes=5, ranks_per_host=2)
    with pytest.raises(CheckpointError) as err:
        make_run(tmp_path, value, hosts=2)
    assert str(err.value) == ("checkpoint_plan is for 3 host(s) of 2 ranks (5 processes); the job has 2: plan it for "
                              "the job's instance count")
    for host in (3, -1):
        with pytest.raises(CheckpointError) as err:
            make_run(tmp_path, value, host=host, hosts=3)
        assert str(err.value) == f"host {host} is not one of the job's 3"
    assert list(make_run(tmp_path, value, host=2, hosts=3).ranks) == [4]
    assert list(make_run(tmp_path, value, host=0, hosts=3).ranks) == [0, 1]


def test_a_host_reads_the_next_hosts_files_only_on_a_folder_the_hosts_share(tmp_path):
    value = plan(processes=4, ranks_per_host=2)
    shared = make_run(tmp_path, value, host=1, hosts=2, shared=True)
    assert (list(shared.ranks), shared.sources) == ([2, 3], {2: 0, 3: 1})
    assert shared.files == {2: [("model_states-2.pt", 20000)], 3: [("model_states-3.pt", 20000)]}
    assert shared.source_files == {2: [("model_states-0.pt", 20000)], 3: [("model_states-1.pt", 20000)]}
    own = make_run(tmp_path, value, host=1, hosts=2, shared=False)
    assert own.sources == {2: 2, 3: 3}
    assert own.source_files == {2: [("model_states-2.pt", 20000)], 3: [("model_states-3.pt", 20000)]}


def test_only_a_hosts_own_folder_with_an_s3_uri_is_watched_for_uploads(tmp_path):
    listing = S3View(tmp_path)
    watched = make_run(tmp_path, durable=(URI, listing))
    assert (watched.watch.uri, watched.watch.listing, watched.watch.folder) == (URI, listing, tmp_path)
    assert (watched.watch.pending, watched.watch.durable, watched.watch.looks) == ({}, {}, 0)
    assert make_run(tmp_path, durable=(URI, listing), shared=True).watch is None
    assert make_run(tmp_path).watch is None
    assert (make_run(tmp_path).poll_seconds, make_run(tmp_path, poll_seconds=2.0).poll_seconds) == (0.5, 2.0)


def test_the_random_pool_is_a_chunk_plus_a_mebibyte_of_every_byte_value_the_same_for_a_host(tmp_path):
    """One write call is the largest file up to 16 MiB; the pool it is cut from is that plus 1 MiB, random bytes
    (0 to 255) drawn from the host's number, so that a host writes the same bytes every run."""
    first, again = make_run(tmp_path), make_run(tmp_path)
    assert first.chunk == 20000 and len(first.pool) == 20000 + 1048576
    assert {rank: len(buffer) for rank, buffer in first.read_buffers.items()} == {0: 20000, 1: 20000}
    pool = bytes(first.pool)
    assert pool == bytes(again.pool) and min(pool) == 0 and max(pool) == 255
    other = make_run(tmp_path, plan(processes=4, ranks_per_host=2), host=1, hosts=2)
    assert bytes(other.pool) != pool
    big = make_run(tmp_path, plan(shape={**ONE_FILE, "model_size_bytes": 40 * 2 ** 20}))
    assert big.chunk == 16 * 2 ** 20 and len(big.pool) == 17 * 2 ** 20
    # A host whose ranks write nothing (ZeRO 0: only the first model-parallel group does) still has a pool.
    idle = make_run(tmp_path, plan(shape={"num_layers": -1, "zero_stage": 0}, processes=4, ranks_per_host=2),
                    host=1, hosts=2)
    assert idle.files == {2: [], 3: []} and idle.chunk == 1 and len(idle.pool) == 1 + 1048576


# ---- the run: writing and reading ---------------------------------------------------------------------------------

def test_each_rank_writes_and_fsyncs_its_files_into_each_checkpoints_folder_and_reads_them_back(tmp_path, osv):
    lines = []
    figures = make_run(tmp_path, plan(shape=dict(THREE_FILES), writes=2, reads=1), lines=lines).run()
    names = {0: ["model_states-0.pt", "zero_pp_rank_0_mp_rank_0_model_states.pt",
                 "zero_pp_rank_0_mp_rank_0_optim_states.pt"],
             1: ["model_states-1.pt", "zero_pp_rank_1_mp_rank_0_model_states.pt",
                 "zero_pp_rank_1_mp_rank_0_optim_states.pt"]}
    sizes = [20000, 1112, 7152]
    expected = {f"{step}/{names[r][i]}": sizes[i] for step in (STEP1, STEP2) for r in (0, 1) for i in range(3)}
    assert tree(tmp_path) == expected
    assert sorted(osv.fsynced) == sorted(str(tmp_path / n) for n in expected)
    assert figures["fsync_calls"] == 12 and figures["fsync"] is True
    assert (figures["files_per_checkpoint"], figures["bytes_per_checkpoint"], figures["host_bytes_per_checkpoint"],
            figures["host_read_bytes_per_checkpoint"]) == (6, 56528, 56528, 56528)
    assert lines == ["dslab: checkpoint 1 saved in 0.000 s (host 0, 2 ranks)",
                     "dslab: checkpoint 2 saved in 0.000 s (host 0, 2 ranks)",
                     "dslab: checkpoint 1 loaded in 0.000 s (host 0)"]
    assert (figures["save_seconds"], figures["stall_seconds"], figures["load_seconds"]) == (
        [0.0, 0.0], [0.0, 0.0], [0.0])
    assert figures["rank_save_seconds"] == {"0": [0.0, 0.0], "1": [0.0, 0.0]}
    assert figures["rank_load_seconds"] == {"0": [0.0], "1": [0.0]}
    assert osv.open_fds == set()


def test_each_write_starts_elsewhere_in_the_pool_so_no_two_files_hold_the_same_bytes(tmp_path, osv, monkeypatch):
    """A rank starts 7,919 bytes into the pool times its number and every write call moves on 4,099 bytes, wrapping
    at 1 MiB: with 16-byte write calls a 20,000-byte file wraps four times."""
    monkeypatch.setattr(checkpoint, "CHUNK_BYTES", 16)
    run = make_run(tmp_path, plan(shape=dict(THREE_FILES), writes=1, reads=1))
    run.run()
    pool = bytes(run.pool)
    assert len(pool) == 16 + 1048576 and run.chunk == 16

    def cut(offset: int, size: int) -> tuple[bytes, int]:
        out = []
        while size:
            start = offset % 1048576
            out.append(pool[start:start + min(size, 16)])
            size -= min(size, 16)
            offset += 4099
        return b"".join(out), offset
    for rank, offset in ((0, 0), (1, 7919)):
        for name, size in (("model_states", 20000), ("zero_pp_model", 1112), ("zero_pp_optim", 7152)):
            path = (f"model_states-{rank}.pt" if name == "model_states"
                    else f"zero_pp_rank_{rank}_mp_rank_0_{name.split('_')[-1]}_states.pt")
            want, offset = cut(offset, size)
            assert (tmp_path / STEP1 / path).read_bytes() == want, path
    assert osv.writes == 2 * (1250 + 70 + 447)


def test_a_rank_reads_back_with_one_call_per_chunk(tmp_path, osv, monkeypatch):
    """Read calls of a chunk's bytes each, straight from the file: every byte is counted, so a file of the right size
    reads whole."""
    monkeypatch.setattr(checkpoint, "CHUNK_BYTES", 4096)
    reads, kinds = [], set()
    real_open = open

    class Counted:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def readinto(self, buffer):
            n = self.f.readinto(buffer)
            reads.append(n)
            kinds.add(type(self.f).__name__)
            return n
    monkeypatch.setattr(checkpoint, "open", lambda *a, **k: Counted(real_open(*a, **k)), raising=False)
    figures = make_run(tmp_path, plan(processes=1, data_parallelism=1, ranks_per_host=1)).run()
    assert reads == [4096, 4096, 4096, 4096, 3616, 0]
    assert kinds == {"FileIO"}   # unbuffered: no buffer of Python's between the file and the rank's
    assert figures["load_seconds"] == [0.0]


def test_a_file_an_earlier_plan_left_larger_is_rewritten_at_this_plans_size(tmp_path, osv):
    (tmp_path / STEP1).mkdir()
    (tmp_path / STEP1 / "model_states-0.pt").write_bytes(b"x" * 50000)
    make_run(tmp_path, plan(reads=0)).run()
    assert tree(tmp_path) == {f"{STEP1}/model_states-0.pt": 20000, f"{STEP1}/model_states-1.pt": 20000}
    assert oct((tmp_path / STEP1 / "model_states-1.pt").stat().st_mode & 0o777) == oct(0o644 & ~current_umask())


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("fault, err, said", [
    ("open", OSError(errno.EACCES, "Permission denied"), "no permission to write {path} in {dir}"),
    ("write", OSError(errno.ENOSPC, "No space left on device"),
     "no space left in {dir} writing {path}: the target holds less than the checkpoints need"),
    ("fsync", OSError(errno.EIO, "Input/output error"), "{path}: Input/output error"),
])
def test_a_write_that_fails_fails_the_run_saying_why_and_closes_the_file(tmp_path, osv, fault, err, said):
    osv.faults[fault] = err
    with pytest.raises(CheckpointError) as caught:
        make_run(tmp_path, plan(processes=1, data_parallelism=1, ranks_per_host=1)).run()
    path = tmp_path / STEP1 / "model_states-0.pt"
    assert str(caught.value) == said.format(path=path, dir=tmp_path)
    assert osv.open_fds == set()


def test_a_read_of_a_missing_or_wrong_sized_file_says_what_is_wrong(tmp_path, osv):
    only_read = plan(processes=1, data_parallelism=1, ranks_per_host=1, writes=0, reads=1)
    path = tmp_path / STEP1 / "model_states-0.pt"
    with pytest.raises(CheckpointError) as err:
        make_run(tmp_path, only_read).run()
    assert str(err.value) == (f"checkpoint file {path} is missing: nothing wrote it (num_checkpoints_write, or an "
                              "earlier job's)")
    path.parent.mkdir()
    path.write_bytes(b"\0" * 1000)
    with pytest.raises(CheckpointError) as err:
        make_run(tmp_path, only_read).run()
    assert str(err.value) == f"checkpoint file {path} holds 1,000 bytes, 20,000 expected: another plan or job wrote it"
    path.write_bytes(b"\0" * 20000)
    figures = make_run(tmp_path, only_read).run()
    assert (figures["load_seconds"], figures["save_seconds"], figures["fsync_calls"]) == ([0.0], [], 0)


def test_a_read_refused_says_no_permission_to_read_naming_the_file_and_the_folder(tmp_path, osv, monkeypatch):
    only_read = plan(processes=1, data_parallelism=1, ranks_per_host=1, writes=0, reads=1)
    path = tmp_path / STEP1 / "model_states-0.pt"
    path.parent.mkdir()
    path.write_bytes(b"\0" * 20000)

    def refused(file, mode="r", *args, **kwargs):
        if mode == "rb":
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return open(file, mode, *args, **kwargs)
    monkeypatch.setattr(checkpoint, "open", refused, raising=False)
    with pytest.raises(CheckpointError) as err:
        make_run(tmp_path, only_read).run()
    assert str(err.value) == f"no permission to read {path} in {tmp_path}"

# ---- before the writes: the folder and its space ------------------------------------------------------------------

def test_a_folder_that_cannot_be_made_is_said(tmp_path, osv):
    target = tmp_path / "file"
    target.write_text("not a folder")
    with pytest.raises(CheckpointError) as err:
        make_run(target).run()
    assert str(err.value) == f"{target}: File exists"


def test_a_read_only_folder_is_said_naming_it_and_the_access_mode_to_set(tmp_path, osv, monkeypatch):
    target = tmp_path / "ro"
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):
        if self == target:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)
    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(CheckpointError) as err:
        make_run(target).run()
    assert str(err.value) == (f"{target} is read-only ({target}): a file-system channel that holds checkpoints needs "
                              "FileSystemAccessMode rw")


def test_every_checkpoints_folder_is_made_before_the_first_save(tmp_path, osv, monkeypatch):
    seen = []

    def disk_usage(path):
        seen.append(sorted(p.name for p in Path(path).iterdir()))
        return DiskFree(10 ** 9)
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", disk_usage)
    make_run(tmp_path / "deep" / "ck", plan(writes=3, reads=0)).run()
    assert seen == [[STEP1, STEP2, "global_epoch1_step3"]]


class DiskFree:
    def __init__(self, free: int):
        self.free = free


@pytest.mark.parametrize("shared, free, refused", [
    (False, 39999, "has 39,999 bytes free and 2 checkpoint(s) of 20,000 bytes need 40,000"),
    (False, 40000, None),
    (True, 79999, "has 79,999 bytes free and 2 checkpoint(s) of 40,000 bytes need 80,000"),
    (True, 80000, None),
])
def test_a_target_without_room_for_every_checkpoint_is_refused_before_writing(tmp_path, osv, monkeypatch, shared,
                                                                               free, refused):
    """Every checkpoint is kept: the host's own files times the checkpoints, or on a shared folder every host's."""
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", lambda path: DiskFree(free))
    run = make_run(tmp_path, plan(processes=2, ranks_per_host=1, writes=2, reads=0), host=0, hosts=2, shared=shared)
    if refused is None:
        assert run.run()["writes"] == 2 and tree(tmp_path)[f"{STEP2}/model_states-0.pt"] == 20000
        return
    with pytest.raises(CheckpointError) as err:
        run.run()
    assert str(err.value) == (f"{tmp_path} {refused}: a larger target, fewer checkpoints, or a smaller --scale")
    assert not list(tmp_path.rglob("*.pt"))


def test_a_run_that_only_reads_does_not_ask_for_space(tmp_path, osv, monkeypatch):
    def no_look(path):
        raise AssertionError("disk_usage asked")
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", no_look)
    (tmp_path / STEP1).mkdir()
    for rank in (0, 1):
        (tmp_path / STEP1 / f"model_states-{rank}.pt").write_bytes(b"\1" * 20000)
    assert make_run(tmp_path, plan(writes=0, reads=1)).run()["load_seconds"] == [0.0]


# ---- several hosts on one folder ----------------------------------------------------------------------------------

def test_on_a_shared_folder_each_host_marks_each_checkpoint_it_has_fsynced(tmp_path, osv):
    make_run(tmp_path, plan(processes=4, ranks_per_host=2, writes=2, reads=0), host=1, hosts=2, shared=True).run()
    for step in (STEP1, STEP2):
        marker = tmp_path / step / ".dslab-written-1"
        assert marker.read_bytes() == b"" and str(marker) in osv.fsynced
        assert oct(marker.stat().st_mode & 0o777) == oct(0o644 & ~current_umask())
    assert len(osv.fsynced) == 6
    # Its own folder (SageMaker's LocalPath) or a folder of one host: no other host waits, no marker.
    make_run(tmp_path / "own", plan(processes=4, ranks_per_host=2), host=1, hosts=2, shared=False).run()
    make_run(tmp_path / "one", plan(), shared=True).run()
    assert [p.name for p in tmp_path.rglob(".dslab-*")] == [".dslab-written-1", ".dslab-written-1"]


def test_an_old_marker_is_emptied_when_a_host_marks_again(tmp_path, osv):
    (tmp_path / STEP1).mkdir()
    (tmp_path / STEP1 / ".dslab-written-0").write_text("left by an earlier job")
    make_run(tmp_path, plan(processes=4, ranks_per_host=2, reads=0), host=0, hosts=2, shared=True).run()
    assert (tmp_path / STEP1 / ".dslab-written-0").read_bytes() == b""


def test_a_host_reads_the_next_hosts_files_once_that_host_has_marked_them(tmp_path, osv):
    value = plan(processes=4, ranks_per_host=2, writes=1, reads=1)
    make_run(tmp_path, {**value, "reads": 0}, host=1, hosts=2, shared=True).run()
    clock = Clock()
    figures = make_run(tmp_path, value, host=0, hosts=2, shared=True, clock=clock).run()
    assert clock.sleeps == [0.0, 0.0]   # the interval before the save and before the read: no wait for host 1
    assert figures["recovery_rank_shift"] == {"0": 2, "1": 3}
    assert (figures["hosts"], figures["host"], figures["ranks"], figures["shared"]) == (2, 0, [0, 1], True)


def test_a_host_that_never_marks_its_files_fails_the_reader_after_the_wait(tmp_path, osv):
    clock = Clock()
    with pytest.raises(CheckpointError) as err:
        make_run(tmp_path, plan(processes=4, ranks_per_host=2), host=0, hosts=2, shared=True, clock=clock,
                 wait_seconds=0.1).run()
    assert str(err.value) == f"host 1 did not finish writing {tmp_path / STEP1} within 0.1 s"
    assert clock.sleeps == [0.0, 0.0, 0.05, 0.05, 0.05]


def test_a_reader_waits_an_hour_for_another_host_unless_told_otherwise(tmp_path, osv):
    """Every sleep a quarter of an hour here: the hour from the first look is past after the fifth wait."""
    clock = Clock(jump=900.0)
    run = CheckpointRun(spec(processes=4, ranks_per_host=2), tmp_path, 0, 2, True, sleep=clock.sleep,
                        clock=clock.clock, log=lambda line: None)
    with pytest.raises(CheckpointError) as err:
        run.run()
    assert str(err.value) == f"host 1 did not finish writing {tmp_path / STEP1} within 3600 s"
    assert clock.sleeps == [0.0, 0.0, 0.05, 0.05, 0.05, 0.05, 0.05]


def test_a_reader_waits_for_the_other_hosts_mark_of_each_checkpoint(tmp_path, osv):
    """Host 1's files are there; its mark of checkpoint 1 comes while host 0 waits (after the third look)."""
    value = plan(processes=4, ranks_per_host=2, writes=1, reads=1)
    make_run(tmp_path, {**value, "reads": 0}, host=1, hosts=2, shared=True).run()
    marker = tmp_path / STEP1 / ".dslab-written-1"
    marker.unlink()
    clock = Clock()
    clock.after_sleep = lambda count: marker.touch() if count == 5 else None
    figures = make_run(tmp_path, value, host=0, hosts=2, shared=True, clock=clock, wait_seconds=10).run()
    assert clock.sleeps == [0.0, 0.0, 0.05, 0.05, 0.05] and figures["load_seconds"] == [0.0]


def test_a_reader_of_checkpoints_an_earlier_job_wrote_waits_for_no_mark(tmp_path, osv):
    (tmp_path / STEP1).mkdir()
    for rank in (2, 3):
        (tmp_path / STEP1 / f"model_states-{rank}.pt").write_bytes(b"\2" * 20000)
    clock = Clock()
    figures = make_run(tmp_path, plan(processes=4, ranks_per_host=2, writes=0, reads=1), host=0, hosts=2, shared=True,
                       clock=clock, wait_seconds=0.1).run()
    assert clock.sleeps == [0.0] and figures["load_seconds"] == [0.0]
    assert figures["host_read_bytes_per_checkpoint"] == 40000 and figures["host_bytes_per_checkpoint"] == 40000


# ---- the cache ----------------------------------------------------------------------------------------------------

def test_the_pages_of_every_file_written_or_to_be_read_are_dropped_one_file_at_a_time(tmp_path, osv):
    figures = make_run(tmp_path, plan(writes=2, reads=1)).run()
    assert osv.fadvised == [(str(tmp_path / step / f"model_states-{r}.pt"), 0, 0, 4)
                            for step in (STEP1, STEP2) for r in (0, 1)]
    assert figures["cache_drop"] == "posix_fadvise(POSIX_FADV_DONTNEED) on every checkpoint file"
    assert osv.open_fds == set()


def test_the_cache_drop_covers_checkpoints_read_beyond_those_written_and_no_others(tmp_path, osv):
    """Checkpoint 2, written by an earlier job, is read: its pages go too; a checkpoint 0 or 3 lying there is not
    this run's."""
    for step in ("global_epoch1_step0", STEP2, "global_epoch1_step3"):
        (tmp_path / step).mkdir(parents=True)
        for rank in (0, 1):
            (tmp_path / step / f"model_states-{rank}.pt").write_bytes(b"\3" * 20000)
    make_run(tmp_path, plan(writes=1, reads=2)).run()
    assert [path for path, *_ in osv.fadvised] == [str(tmp_path / step / f"model_states-{r}.pt")
                                                   for step in (STEP1, STEP2) for r in (0, 1)]


def test_the_cache_drop_skips_another_hosts_files_not_written_yet_and_takes_those_that_are(tmp_path, osv):
    value = plan(processes=4, ranks_per_host=2, writes=1, reads=0)
    make_run(tmp_path, value, host=1, hosts=2, shared=True).run()   # host 0's files (read by host 1) not there yet
    assert [path for path, *_ in osv.fadvised] == [str(tmp_path / STEP1 / f"model_states-{r}.pt") for r in (2, 3)]
    osv.fadvised.clear()
    make_run(tmp_path, value, host=0, hosts=2, shared=True).run()
    assert [path for path, *_ in osv.fadvised] == [str(tmp_path / STEP1 / f"model_states-{r}.pt")
                                                   for r in (0, 1, 2, 3)]


def test_a_platform_without_posix_fadvise_says_the_cache_was_not_dropped(tmp_path, osv):
    osv.fadvise_hidden = True
    figures = make_run(tmp_path).run()
    assert figures["cache_drop"] == "none: this platform has no posix_fadvise"


# ---- the figures ---------------------------------------------------------------------------------------------------

def big_run(tmp_path: Path) -> CheckpointRun:
    """Host 0 of two on a shared folder, ranks of half a GiB each: 2 GiB a checkpoint, 1 GiB the host's."""
    return make_run(tmp_path, plan(shape={**ONE_FILE, "model_size_bytes": 2 ** 29}, processes=4, ranks_per_host=2,
                                   writes=2, reads=1, interval_seconds=3.0, workload="w", mode="m", scale=1.0),
                    host=0, hosts=2, shared=True)


def test_the_figures_are_dlios_whole_checkpoint_over_the_slowest_rank_and_the_hosts_bytes_over_its_stall(tmp_path):
    figures = big_run(tmp_path).summary([1.0, 4.0], [2.0, 2.0], [0.5], [0.25], {0: [1.0, 4.0], 1: [0.5, 3.0]},
                                        {0: [0.5], 1: [0.25]}, "dropped")
    assert figures == {
        "workload": "w", "mode": "m", "processes": 4, "data_parallelism": 2, "hosts": 2, "host": 0, "ranks": [0, 1],
        "scale": 1.0, "writes": 2, "reads": 1, "interval_seconds": 3.0, "directory": str(tmp_path), "shared": True,
        "bytes_per_checkpoint": 2 ** 31, "host_bytes_per_checkpoint": 2 ** 30,
        "host_read_bytes_per_checkpoint": 2 ** 30,
        "files_per_checkpoint": 2, "gb": "GiB (1024**3 bytes), which DLIO reports as GB",
        "save_seconds": [1.0, 4.0], "save_seconds_mean": 2.5,
        "save_gb_per_second": [2.0, 0.5], "save_gb_per_second_mean": 1.25,
        "save_host_gb_per_second_mean": 0.5,
        "stall_seconds": [2.0, 2.0], "stall_seconds_mean": 2.0,
        "load_seconds": [0.5], "load_seconds_mean": 0.5,
        "load_gb_per_second": [4.0], "load_gb_per_second_mean": 4.0,
        "load_host_gb_per_second_mean": 4.0,
        "rank_save_seconds": {"0": [1.0, 4.0], "1": [0.5, 3.0]}, "rank_load_seconds": {"0": [0.5], "1": [0.25]},
        "fsync": True, "fsync_calls": 0, "cache_drop": "dropped", "recovery_rank_shift": {"0": 2, "1": 3},
    }


def test_a_save_timed_at_zero_has_no_rate_and_a_phase_not_run_has_no_mean(tmp_path):
    figures = big_run(tmp_path).summary([0.0, 2.0], [0.0, 0.0], [], [], {0: [], 1: []}, {0: [], 1: []}, "none")
    assert (figures["save_gb_per_second"], figures["save_gb_per_second_mean"],
            figures["save_host_gb_per_second_mean"]) == ([None, 1.0], 1.0, None)
    assert (figures["load_seconds"], figures["load_seconds_mean"], figures["load_gb_per_second"],
            figures["load_gb_per_second_mean"], figures["load_host_gb_per_second_mean"]) == ([], None, [], None, None)
    zero = big_run(tmp_path).summary([0.0], [0.0], [0.0], [0.0], {}, {}, "none")
    assert (zero["save_gb_per_second"], zero["save_gb_per_second_mean"], zero["load_gb_per_second_mean"],
            zero["save_seconds_mean"], zero["stall_seconds_mean"]) == ([None], None, None, 0.0, 0.0)


def test_the_hosts_rates_are_its_bytes_of_every_checkpoint_over_the_sum_of_its_stalls_and_load_walls(tmp_path):
    """Two saves stalling a quarter second each, two loads a quarter second each: the host moved 1 GiB each time, 2 GiB
    in half a second either way."""
    figures = big_run(tmp_path).summary([1.0, 1.0], [0.25, 0.25], [0.5, 0.5], [0.25, 0.25],
                                        {0: [1.0, 1.0], 1: [1.0, 1.0]}, {0: [0.5, 0.5], 1: [0.5, 0.5]}, "dropped")
    assert (figures["save_host_gb_per_second_mean"], figures["load_host_gb_per_second_mean"]) == (4.0, 4.0)


def test_a_sync_writer_times_each_checkpoint_until_s3_lists_it_looking_every_poll_while_it_trains(tmp_path, osv):
    """S3 lists a file two looks after the look that first saw it. Checkpoint 1 (saved at 1 s) is found whole at the
    third look, during the training before checkpoint 2 (at 2 s); checkpoint 2 (saved at 2 s) at the sixth, while
    the writer waits before it ends (3.5 s)."""
    clock, s3, lines = Clock(), S3View(tmp_path, lag=2), []
    figures = make_run(tmp_path, plan(writes=2, reads=0, interval_seconds=1.0), clock=clock, lines=lines,
                       durable=(URI, s3), poll_seconds=0.75).run()
    assert clock.sleeps == [1.0, 0.75, 0.25, 0.75, 0.75]
    assert (figures["durable_seconds"], figures["durable_seconds_mean"]) == ([1.0, 1.5], 1.25)
    assert figures["durable_checked"] == "listed s3://b/ckpt/ every 0.75 s (6 listings)"
    assert lines[-1] == "dslab: every checkpoint in s3://b/ckpt/ (6 listings)" and s3.looks == 6
    assert figures["stall_seconds"] == [0.0, 0.0]


def test_a_checkpoint_found_whole_early_lets_the_writer_train_out_the_interval_unlooked(tmp_path, osv):
    clock, s3 = Clock(), S3View(tmp_path, lag=0)
    figures = make_run(tmp_path, plan(writes=2, reads=0, interval_seconds=3.0), clock=clock,
                       durable=(URI, s3), poll_seconds=1.0).run()
    assert clock.sleeps == [3.0, 3.0] and s3.looks == 2
    assert figures["durable_seconds"] == [0.0, 0.0]


def test_a_checkpoint_that_never_reaches_s3_fails_the_writer_naming_the_first_missing_file(tmp_path, osv):
    clock = Clock()
    s3 = S3View(tmp_path, lag=0, never=(f"{STEP1}/model_states-0.pt", f"{STEP2}/model_states-0.pt",
                                        f"{STEP2}/model_states-1.pt"))
    with pytest.raises(CheckpointError) as err:
        make_run(tmp_path, plan(writes=2, reads=0), clock=clock, durable=(URI, s3), poll_seconds=1.0,
                 wait_seconds=2).run()
    assert str(err.value) == (
        "checkpoint 1 was not whole in s3://b/ckpt/ 2 s after its save (1 file(s) missing, e.g. "
        "global_epoch1_step1/model_states-0.pt): SageMaker does not write to S3 once the job ends, so a restore "
        "would miss it; the uploads are slower than the checkpoints (fewer or smaller checkpoints, a longer interval, "
        "or FSx/EFS as the target)")
    # The interval before each save (none looked for before the second: checkpoint 1 still pending, no interval
    # left), then a look a second until 2 s have passed.
    assert clock.sleeps == [0.0, 1.0, 1.0, 1.0]


def test_a_later_checkpoint_still_missing_is_named_with_its_count(tmp_path, osv):
    clock = Clock()
    s3 = S3View(tmp_path, lag=0, never=(f"{STEP2}/model_states-0.pt", f"{STEP2}/model_states-1.pt"))
    with pytest.raises(CheckpointError) as err:
        make_run(tmp_path, plan(writes=2, reads=0), clock=clock, durable=(URI, s3), poll_seconds=0.5,
                 wait_seconds=1).run()
    assert str(err.value).startswith("checkpoint 2 was not whole in s3://b/ckpt/ 1 s after its save (2 file(s) "
                                     "missing, e.g. global_epoch1_step2/model_states-0.pt): ")


def test_a_run_that_writes_nothing_reports_no_durable_figures(tmp_path, osv):
    (tmp_path / STEP1).mkdir()
    for rank in (0, 1):
        (tmp_path / STEP1 / f"model_states-{rank}.pt").write_bytes(b"\4" * 20000)
    s3 = S3View(tmp_path)
    figures = make_run(tmp_path, plan(writes=0, reads=1), durable=(URI, s3)).run()
    assert not any(key.startswith("durable") for key in figures) and s3.looks == 0
    assert "durable_seconds" not in make_run(tmp_path, plan(writes=1, reads=0)).run()


# ---- the clean-up --------------------------------------------------------------------------------------------------

def test_a_hosts_own_folder_is_emptied_of_everything_in_it(tmp_path, osv):
    run = make_run(tmp_path, plan(writes=1, reads=0))
    run.run()
    (tmp_path / "restored.txt").write_text("a restore's copy-in")
    assert run.clean_up() == f"emptied {tmp_path}"
    assert tmp_path.is_dir() and list(tmp_path.iterdir()) == []
    gone = make_run(tmp_path / "never-made")
    assert gone.clean_up() == f"emptied {tmp_path / 'never-made'}"


def test_an_emptied_folder_waits_until_s3_has_dropped_this_hosts_files_too(tmp_path, osv):
    """SageMaker deletes in S3 what the container deletes: three looks later here. A file still being uploaded (its
    marker) and another host's key in S3 do not hold the wait."""
    clock = Clock()
    s3 = S3View(tmp_path, lag=0, gone_lag=3)
    run = make_run(tmp_path, plan(writes=1, reads=0), clock=clock, durable=(URI, s3), poll_seconds=0.5)
    run.run()
    (tmp_path / STEP1 / "model_states-0.pt.sagemaker-uploading").touch()
    s3.listed["other-host/model_states-9.pt"] = 5
    clock.sleeps.clear()
    assert run.clean_up() == f"emptied {tmp_path} and, through SageMaker's sync, s3://b/ckpt/"
    assert clock.sleeps == [0.5, 0.5, 0.5] and list(tmp_path.iterdir()) == []


def test_a_folder_s3_keeps_holding_is_said_to_be_deleted_there(tmp_path, osv):
    clock = Clock()
    s3 = S3View(tmp_path, lag=0, gone_lag=None)
    run = make_run(tmp_path, plan(writes=1, reads=0), clock=clock, durable=(URI, s3), poll_seconds=1.0,
                   wait_seconds=2)
    run.run()
    clock.sleeps.clear()
    assert run.clean_up() == (f"emptied {tmp_path}; s3://b/ckpt/ still held this host's checkpoints 2 s later: "
                              "delete them there")
    assert clock.sleeps == [1.0, 1.0, 1.0]


def test_a_shared_folder_is_deleted_by_host_0_once_every_host_is_done(tmp_path, osv):
    value = plan(processes=4, ranks_per_host=2, writes=1, reads=0)
    one = make_run(tmp_path, value, host=1, hosts=2, shared=True)
    one.run()
    assert one.clean_up() == "left to host 0, once every host is done"
    assert (tmp_path / ".dslab-done-1").is_file() and (tmp_path / STEP1 / "model_states-2.pt").is_file()
    clock = Clock()
    zero = make_run(tmp_path, value, host=0, hosts=2, shared=True, clock=clock)
    zero.run()
    clock.sleeps.clear()
    assert zero.clean_up() == f"deleted {tmp_path}" and not tmp_path.exists()
    assert clock.sleeps == []


def host_0_of_two_after_its_run(folder: Path, clock: Clock, wait_seconds: float) -> CheckpointRun:
    """Host 0 of two on a shared folder, its checkpoint written, before its clean-up (the sleeps so far cleared)."""
    zero = make_run(folder, plan(processes=4, ranks_per_host=2, writes=1, reads=0), host=0, hosts=2, shared=True,
                    clock=clock, wait_seconds=wait_seconds)
    zero.run()
    clock.sleeps.clear()
    return zero


def test_host_0_keeps_a_shared_folder_another_host_has_not_finished_with(tmp_path, osv):
    clock = Clock()
    zero = host_0_of_two_after_its_run(tmp_path, clock, 0.1)
    assert zero.clean_up() == "kept: host 1 did not finish within 0.1 s"
    assert clock.sleeps == [0.05, 0.05, 0.05]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dslab-done-0", STEP1]


def test_host_0_waits_for_a_host_finishing_late(tmp_path, osv):
    clock = Clock()
    zero = host_0_of_two_after_its_run(tmp_path, clock, 10)
    clock.after_sleep = lambda count: (tmp_path / ".dslab-done-1").touch() if count == 2 else None
    assert zero.clean_up() == f"deleted {tmp_path}" and clock.sleeps == [0.05, 0.05]


def test_a_one_host_shared_folder_is_deleted_at_once(tmp_path, osv):
    run = make_run(tmp_path, plan(writes=1, reads=0), shared=True)
    run.run()
    assert run.clean_up() == f"deleted {tmp_path}" and not tmp_path.exists()


def test_a_shared_folder_already_gone_is_said_deleted(tmp_path, osv):
    gone = tmp_path / "gone"
    assert make_run(gone, shared=True).clean_up() == f"deleted {gone}"


def test_run_checkpoints_cleans_up_only_when_asked(tmp_path, osv):
    clock, lines = Clock(), []
    figures = checkpoint.run_checkpoints(spec(), tmp_path, 0, 1, False, cleanup=True, sleep=clock.sleep,
                                         clock=clock.clock, log=lines.append)
    assert figures["cleanup"] == f"emptied {tmp_path}" and list(tmp_path.iterdir()) == []
    assert lines == ["dslab: checkpoint 1 saved in 0.000 s (host 0, 2 ranks)",
                     "dslab: checkpoint 1 loaded in 0.000 s (host 0)"]
    kept = checkpoint.run_checkpoints(spec(), tmp_path, 0, 1, False, sleep=clock.sleep, clock=clock.clock,
                                      log=lines.append)
    assert "cleanup" not in kept and len(tree(tmp_path)) == 2
    assert checkpoint.run_checkpoints(spec(), tmp_path, 0, 1, True, cleanup=True, sleep=clock.sleep, clock=clock.clock,
                                      log=lines.append)["cleanup"] == f"deleted {tmp_path}"
    with pytest.raises(CheckpointError, match="is for 1 host"):
        checkpoint.run_checkpoints(spec(), tmp_path, 0, 2, True)


# ---- real time (last: the one test that waits for real) -----------------------------------------------------------

def test_with_rank_sync_every_rank_waits_for_the_slowest_inside_its_time():
    def work(rank):
        if rank == 1:
            time.sleep(0.3)
    ranks = checkpoint._Ranks(range(0, 2), time.perf_counter)
    alone, host = ranks.run(work, rank_sync=False)
    assert alone[0] < 0.15 and alone[1] >= 0.3 and host >= 0.3
    synced, host = ranks.run(work, rank_sync=True)
    assert synced[0] >= 0.25 and synced[1] >= 0.3 and host >= 0.3
