"""Runs mutmut's mutants for `make bench-mutation`, faster than `mutmut run` runs them (run in mutants/ by
benchmarks/mutation.py; not part of `make test`).

mutmut generates the mutants and traces which tests reach which function (mutants/mutmut-stats.json); then, per
mutant, it starts pytest afresh: collecting the test files again and setting up the fault matrix's emulated AWS world
again, about a second before the first test runs. Here pytest collects the test selection once, runs one test of each
test file unmutated (the imports and the stand-in's first use, warm, also prove the unmutated code passes), then forks
a child per mutant that runs, with that mutant switched on (MUTANT_UNDER_TEST, read by mutmut's trampolines at each
call), the tests mutmut traced to its function, fastest first, and stops at the first failure; a test that killed an
earlier mutant of the same function runs first (most mutants of a function fall to the same few tests, and the fastest
are often not among them). Two children at once
(two cores); a child that runs past its time (six times its tests' traced duration, where mutmut allows 15, plus a
margin for the fixtures) is stopped and counted as timed out, which kills the mutant as mutmut counts it.

    python -m benchmarks.mutation_runner NAMES_FILE RESULTS_FILE     # cwd: mutants/

Results use mutmut's exit codes (mutmut/stats.py): 1 killed, 0 survived, 33 no test reaches it, 36 timed out.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
import tomllib
from pathlib import Path

KILLED, SURVIVED, NO_TESTS, TIMED_OUT = 1, 0, 33, 36
CHILDREN = 2
# A child's time: its tests' traced seconds times this, plus a margin for the fixtures it sets up (the emulated world:
# ~1 s). mutmut's own multiplier is 15; a mutant that loops (a bisection whose bounds never meet) then held a core for
# 15 x the ~15 s an answer function's tests take, four minutes. Six times what the unmutated tests took, on the same
# loaded cores, is a loop in practice; DSLAB_MUTATION_TIMEOUT sets another multiplier.
TIMEOUT_MULTIPLIER = float(os.environ.get("DSLAB_MUTATION_TIMEOUT", "6"))
TIMEOUT_MARGIN = 20.0
CHILD_MEMORY = 3 * 2 ** 30   # bytes of address space a mutant's child may add
PER_TEST_MARGIN = 10.0       # seconds each test may take beyond TIMEOUT_MULTIPLIER x its traced seconds
PATIENCE = 4.0               # a mutant that timed out runs once more with this many times its time


def function_of(mutant: str) -> str:
    """mutmut's key for the function a mutant changes: dslab.x.x_f__mutmut_3 -> dslab.x.x_f."""
    return mutant.rpartition("__mutmut_")[0]


def _unformatted(*args, **kwargs) -> str:
    return "failed"


def own_temp(pid: int) -> Path:
    """A mutant's child's pytest folders (tmp_path): under the system's temporary folder, by the child's process ID."""
    return Path(tempfile.gettempdir()) / "dslab-mutants" / str(pid)


# Answers memoised across calls by the code under test (module, name of a dict): what the parent computed while it
# warmed up would otherwise be handed to a mutant's tests without the mutant ever running.
MEMOS = (("dslab.core.answer.answer", "_ANSWERS"),)
# The domain core's functools caches hold what any of its modules computed (calibration.py's fit calls the model's
# estimate): each of them goes, wherever the mutant is, and so does every cache of the mutant's own module.
CACHED_CORE = "dslab.core."


_CACHES: dict[str, list] = {}   # module -> its functools caches, found once in the parent (index_caches)


def index_caches() -> None:
    """The parent, once warm: every functools cache by the module that defines it (a scan of the heap, done once)."""
    import functools
    import gc
    _CACHES.clear()
    for obj in gc.get_objects():
        if isinstance(obj, functools._lru_cache_wrapper):
            _CACHES.setdefault(getattr(obj, "__module__", None), []).append(obj)


def forget_answers(module: str | None = None) -> None:
    """Forget what was computed and kept between calls: the memoised answers, every functools cache of the domain core
    and every one of ``module``'s."""
    for owner, attribute in MEMOS:
        found = getattr(sys.modules.get(owner), attribute, None)
        if found is not None:
            found.clear()
    for owner, caches in _CACHES.items():
        if owner is not None and (owner == module or owner.startswith(CACHED_CORE)):
            for cache in caches:
                cache.cache_clear()


def forget_cached(mutant: str) -> None:
    """In a mutant's child: forget what the parent computed and cached, where the mutant would have computed it. A
    mutant of a function whose result a cache holds never ran in a child, and survived every test (calibration.py's
    CSV reader survived ``open(None)``)."""
    forget_answers(function_of(mutant).rsplit(".", 1)[0])


def killer_file(pid: int) -> Path:
    """Where a mutant's child names the test that killed it, for the parent to try that test first next time."""
    return Path(tempfile.gettempdir()) / "dslab-mutants" / f"{pid}.killer"


def clear_temp(pid: int) -> None:
    """A mutant's child ended: the processes still running in its folders are stopped (a training script whose
    mutated runner never stopped it, in a session of its own), then its folders are deleted."""
    folder = own_temp(pid)
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(proc / "cwd")).is_relative_to(folder):
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue
    shutil.rmtree(folder, ignore_errors=True)


class Runner:
    """A pytest plugin: takes over the run loop once the selection is collected."""

    def __init__(self, names: list[str], stats: dict, say=print, journal: Path | None = None):
        self.names = names
        self.tests_by_function = stats["tests_by_mangled_function_name"]
        self.duration = stats["duration_by_test"]
        self.say = say
        self.results: dict[str, int] = {}
        self.warm_failed: str | None = None
        self.journal = journal   # each result appended as it comes: a run stopped early keeps what it measured
        self.killers: dict[str, list[str]] = {}   # per function: the tests that killed its mutants, latest first
        # Mutants that ran past their time once: run again with PATIENCE x the time before they count as timed out. A
        # test's traced seconds are its call's; a fixture it shares with others is set up in each child, on cores
        # the other child shares (a module fixture that calibrates whole runs took 22 s there).
        self.retried: set[str] = set()

    def _record(self, name: str, code: int) -> None:
        self.results[name] = code
        if self.journal is not None:
            with self.journal.open("a") as out:
                out.write(json.dumps([name, code]) + "\n")

    def _plan(self, by_id: dict) -> list[tuple[str, list, float]]:
        planned = []
        for name in self.names:
            traced = self.tests_by_function.get(function_of(name), ())
            tests = sorted((t for t in traced if t in by_id), key=lambda t: (self.duration.get(t, 0.0), t))
            planned.append((name, [by_id[t] for t in tests], sum(self.duration.get(t, 0.0) for t in tests)))
        return planned

    def _child(self, session, name: str, items: list) -> int:
        os.environ["MUTANT_UNDER_TEST"] = name
        forget_cached(name)
        # A mutant that grows without end (a loop appending to a list) meets a MemoryError, a failed test, before the
        # kernel's OOM killer picks a process of the machine: CHILD_MEMORY above what the fork shares.
        import resource
        size = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (size + CHILD_MEMORY, size + CHILD_MEMORY))
        # The mutant's tmp_path folders in a folder of its own, which the parent deletes when the child ends: pytest
        # keeps a session's folders, and thousands of mutants' checkpoint files filled a 250 GB disk.
        base = own_temp(os.getpid())
        base.mkdir(parents=True)
        session.config._tmp_path_factory._basetemp = base
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            session.config.pluginmanager.unregister(reporter)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        before = session.testsfailed
        for item in items:
            # A failure's report would quote the mutated module, where each function stands with every one of its
            # mutants (runner.py: 355,000 lines): pytest then spends up to 40 s per failure formatting it. Only the
            # failure counts here.
            item.repr_failure = item._repr_failure_py = _unformatted
        # Each test gets its own time (TIMEOUT_MULTIPLIER x its traced seconds, plus PER_TEST_MARGIN): a mutant that
        # loops in the first, fastest test is stopped in seconds, not at the deadline of every test it would have run.
        signal.signal(signal.SIGALRM, lambda *_: os._exit(TIMED_OUT))
        patience = PATIENCE if name in self.retried else 1.0
        for i, item in enumerate(items):
            budget = patience * (TIMEOUT_MULTIPLIER * self.duration.get(item.nodeid, 0.0) + PER_TEST_MARGIN)
            signal.setitimer(signal.ITIMER_REAL, budget)
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=items[i + 1] if i + 1 < len(items) else None)
            signal.setitimer(signal.ITIMER_REAL, 0)
            if session.testsfailed > before:
                killer_file(os.getpid()).write_text(item.nodeid)
                return KILLED
        return SURVIVED

    def _timed_out(self, name: str, items: list, seconds: float, pending: list) -> bool:
        """A mutant ran past its time: the first time, it goes back to the front of the queue to run with PATIENCE x
        its time (True); the second, it is recorded as timed out (False)."""
        if name in self.retried:
            self._record(name, TIMED_OUT)
            return False
        self.retried.add(name)
        pending.insert(0, (name, items, seconds))
        return True

    def _killers_first(self, name: str, items: list) -> list:
        """The tests that killed this function's earlier mutants first (latest first), then the rest, fastest first."""
        seen = self.killers.get(function_of(name), [])
        first = [item for nodeid in seen for item in items if item.nodeid == nodeid]
        return first + [item for item in items if item not in first]

    def _learn(self, name: str, pid: int) -> None:
        path = killer_file(pid)
        if path.exists():
            nodeid = path.read_text()
            path.unlink()
            seen = self.killers.setdefault(function_of(name), [])
            if nodeid in seen:
                seen.remove(nodeid)
            seen.insert(0, nodeid)

    def _warm(self, session) -> bool:
        """One test of each file, unmutated, in this process: what every child would otherwise import and set up
        first is then warm in all of them; and the unmutated code must pass."""
        firsts: dict[str, object] = {}
        for item in session.items:
            firsts.setdefault(item.nodeid.split("::")[0], item)
        for item in firsts.values():
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=None)
            if session.testsfailed:
                self.warm_failed = item.nodeid
                return False
        return True

    def pytest_runtestloop(self, session):
        if not self._warm(session):
            return True
        index_caches()
        by_id = {item.nodeid: item for item in session.items}
        pending = self._plan(by_id)
        running: dict[int, tuple[str, float]] = {}
        started, done = time.monotonic(), 0
        while pending or running:
            while pending and len(running) < CHILDREN:
                name, items, seconds = pending.pop(0)
                if not items:
                    self._record(name, NO_TESTS)
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                items = self._killers_first(name, items)
                pid = os.fork()
                if pid == 0:
                    code = 99
                    try:
                        code = self._child(session, name, items)
                    except BaseException:
                        code = KILLED   # an error escaping the tests' own handling: the mutant broke something
                    finally:
                        os._exit(code)
                patience = PATIENCE if name in self.retried else 1.0
                running[pid] = (name, time.monotonic() + patience * (TIMEOUT_MULTIPLIER * seconds + TIMEOUT_MARGIN),
                                items, seconds)
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for child, (name, deadline, items, seconds) in list(running.items()):
                    if now > deadline:
                        os.kill(child, signal.SIGKILL)
                        os.waitpid(child, 0)
                        del running[child]
                        clear_temp(child)
                        self._timed_out(name, items, seconds, pending)
                time.sleep(0.005)
                continue
            name, _, items, seconds = running.pop(pid)
            self._learn(name, pid)
            clear_temp(pid)
            code = os.waitstatus_to_exitcode(status)
            if code == TIMED_OUT:   # a test ran past its own time (the child's alarm): once more with patience
                if not self._timed_out(name, items, seconds, pending):
                    done += 1
                continue
            # 99: an error escaping the tests; a signal (negative): the child crashed. Both kill the mutant.
            self._record(name, SURVIVED if code == SURVIVED else KILLED if code in (KILLED, 99) or code < 0 else code)
            done += 1
            if done % 100 == 0:
                self.say(f"  {done} mutants run, {time.monotonic() - started:.0f} s", file=sys.__stderr__,
                         flush=True)
        return True


def main(argv: list[str]) -> int:
    names_file, results_file = Path(argv[0]), Path(argv[1])
    names = [n for n in names_file.read_text().split() if n]
    settings = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["mutmut"]
    stats = json.loads(Path("mutmut-stats.json").read_text())
    os.environ["MUTANT_UNDER_TEST"] = ""
    sys.path.insert(0, os.getcwd())
    import pytest
    journal = results_file.with_suffix(".jsonl")
    done: dict[str, int] = {}
    if os.environ.get("DSLAB_MUTATION_RESUME") and journal.exists():
        # A run stopped early and started again on the same sources: what its journal holds stands.
        for line in journal.read_text().splitlines():
            name, code = json.loads(line)
            done[name] = code
    else:
        journal.unlink(missing_ok=True)
    runner = Runner([n for n in names if n not in done], stats, journal=journal)
    runner.results.update({n: c for n, c in done.items() if n in set(names)})
    args = ["--rootdir=.", "-p", "no:randomly", *settings["pytest_add_cli_args"],
            *settings["pytest_add_cli_args_test_selection"]]
    pytest.main(args, plugins=[runner])
    if runner.warm_failed:
        print(f"benchmarks.mutation_runner: the unmutated code fails {runner.warm_failed}", file=sys.stderr)
        return 1
    results_file.write_text(json.dumps(runner.results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
