"""`make test` runs on several workers; the tests that start training scripts or FUSE mounts must share one
(test_local_lab.assert_clean looks for leftover mounts, s3fs and train.py processes under the lab's folders)."""

from __future__ import annotations

import re

import pytest

from .conftest import ONE_WORKER_MODULES, REPO

# What starts training-script processes or s3fs mounts.
STARTS_PROCESSES = re.compile(r"\b(run_local|LocalLab|run_training_job|run_request_file)\(|\"run-local\"|\"dslab\.cli\", \"local\"")


def test_every_module_that_starts_jobs_or_mounts_runs_on_the_lab_worker():
    starting = {f"tests/{path.name}" for path in (REPO / "tests").glob("test_*.py")
                if STARTS_PROCESSES.search(path.read_text())}
    assert "tests/test_local_lab.py" in starting   # the pattern still finds what it is for
    assert starting <= set(ONE_WORKER_MODULES), f"add to conftest.ONE_WORKER_MODULES: {sorted(starting - set(ONE_WORKER_MODULES))}"


def test_the_leftover_check_counts_the_suites_own_processes_only(tmp_path):
    """Another lab's s3fs running beside the suite is not a leftover; one mounting under the suite's folder is."""
    import os
    import shutil
    import signal
    import subprocess
    import time

    from .test_local_lab import assert_clean, s3fs_processes

    fake = tmp_path / "bin" / "s3fs"   # a shell named s3fs, with s3fs's arguments: source, mount point
    fake.parent.mkdir()
    shutil.copy2(shutil.which("sh"), fake)
    cache = tmp_path / "cache"
    cache.mkdir()
    started = []

    def s3fs(mount_point) -> None:
        started.append(subprocess.Popen([str(fake), "-c", "sleep 60; :", "s3fs", "bucket:/datasets", str(mount_point)],
                                        start_new_session=True))
        deadline = time.monotonic() + 10
        while not any(str(mount_point) in line for line in s3fs_processes(mount_point.parent)):
            assert time.monotonic() < deadline, "the stand-in s3fs did not start"
            time.sleep(0.05)

    try:
        s3fs(tmp_path / "another-lab" / "mnt")
        assert_clean(cache)
        s3fs(cache / "dslab-mnt")
        with pytest.raises(AssertionError):
            assert_clean(cache)
    finally:
        for proc in started:   # each one's own session: the shell and its sleep
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_the_layers_and_the_no_circle_rule_hold():
    """pyproject.toml's import-linter contracts: the command line at the edge, dslab.core's layers (facts, workloads,
    model, experiment, answer, what builds on it), and no import circle anywhere in dslab."""
    import subprocess
    import sys
    from pathlib import Path
    linter = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(linter), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in done.stdout


def test_the_mutation_run_takes_the_matrix_and_every_reaction_test_and_may_mutate_each_module_it_measures():
    """`make bench-mutation` runs, per mutant, the fault matrix, every tests/test_reactions_*.py (a new one is not
    forgotten) and the fast unit tests of two measured modules (FSx's import check, the training script's checkpoint
    writes), and mutmut's only_mutate holds every module the bench measures."""
    import fnmatch
    import tomllib

    from benchmarks.mutation import MODULES
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    selected = sorted(a for a in settings["pytest_add_cli_args_test_selection"] if a.startswith("tests/"))
    reactions = sorted(f"tests/{p.name}" for p in (REPO / "tests").glob("test_reactions_*.py"))
    assert selected == sorted(["tests/test_checkpoint.py", "tests/test_fault_matrix.py", "tests/test_fsx_import.py",
                               *reactions])
    assert all(any(fnmatch.fnmatch(m, g) for g in settings["only_mutate"]) for m in MODULES)


def test_the_mutation_runner_runs_the_tests_traced_to_a_mutants_function_fastest_first():
    """Each mutant runs only the tests mutmut traced to its function, the fastest first (a killed mutant stops at its
    first failure), tests no longer collected left out; a function no test reaches has none (counted "no tests")."""
    from benchmarks.mutation_runner import Runner, function_of
    assert function_of("dslab.aws.efs.x_empty__mutmut_12") == "dslab.aws.efs.x_empty"
    assert function_of("dslab.local.storage.xǁLabStorageǁupload__mutmut_3") == "dslab.local.storage.xǁLabStorageǁupload"
    stats = {"tests_by_mangled_function_name": {"m.x_f": ["t::slow", "t::fast", "t::gone"], "m.x_g": ["t::fast"]},
             "duration_by_test": {"t::slow": 2.0, "t::fast": 0.5, "t::gone": 0.1}}
    runner = Runner(["m.x_f__mutmut_1", "m.x_g__mutmut_2", "m.x_h__mutmut_1"], stats)
    items = {"t::slow": "SLOW", "t::fast": "FAST"}
    assert runner._plan(items) == [("m.x_f__mutmut_1", ["FAST", "SLOW"], 2.5), ("m.x_g__mutmut_2", ["FAST"], 0.5),
                                   ("m.x_h__mutmut_1", [], 0)]



def test_a_test_that_killed_a_functions_mutant_runs_first_for_its_next_mutants(tmp_path, monkeypatch):
    """The child names the test that killed its mutant; the parent then runs that test first for the same function's
    later mutants (latest killer first), the rest still fastest first, and other functions keep their order."""
    from types import SimpleNamespace

    from benchmarks import mutation_runner
    monkeypatch.setattr(mutation_runner.tempfile, "gettempdir", lambda: str(tmp_path))
    (tmp_path / "dslab-mutants").mkdir()
    runner = mutation_runner.Runner([], {"tests_by_mangled_function_name": {}, "duration_by_test": {}})
    fast, mid, slow = (SimpleNamespace(nodeid=n) for n in ("t::fast", "t::mid", "t::slow"))
    assert runner._killers_first("m.x_f__mutmut_1", [fast, mid, slow]) == [fast, mid, slow]
    mutation_runner.killer_file(7).write_text("t::slow")
    runner._learn("m.x_f__mutmut_1", 7)
    assert not mutation_runner.killer_file(7).exists()
    assert runner._killers_first("m.x_f__mutmut_2", [fast, mid, slow]) == [slow, fast, mid]
    mutation_runner.killer_file(8).write_text("t::mid")
    runner._learn("m.x_f__mutmut_2", 8)
    runner._learn("m.x_f__mutmut_3", 9)   # survived: it named no test, and nothing changes
    assert runner._killers_first("m.x_f__mutmut_4", [fast, mid, slow]) == [mid, slow, fast]
    assert runner._killers_first("m.x_g__mutmut_1", [fast, mid, slow]) == [fast, mid, slow]
    assert runner._killers_first("m.x_f__mutmut_5", [fast]) == [fast]   # a killer not traced here is not added

def test_a_mutants_child_leaves_no_process_or_folder_behind(tmp_path, monkeypatch):
    """A training script a mutated runner never stopped (in a session of its own) is stopped when the mutant's child
    ends, and the child's pytest folders are deleted (thousands of mutants' checkpoint files once filled the disk)."""
    import subprocess

    from benchmarks import mutation_runner
    monkeypatch.setattr(mutation_runner.tempfile, "gettempdir", lambda: str(tmp_path))
    folder = mutation_runner.own_temp(4242)
    assert folder == tmp_path / "dslab-mutants" / "4242"
    (folder / "job").mkdir(parents=True)
    left = subprocess.Popen(["sleep", "60"], cwd=folder / "job", start_new_session=True)
    other = subprocess.Popen(["sleep", "60"], cwd=tmp_path, start_new_session=True)
    try:
        mutation_runner.clear_temp(4242)
        assert left.wait(timeout=10) == -9 and not folder.exists()
        assert other.poll() is None
    finally:
        other.kill()
        left.kill()


def test_a_mutation_sample_is_the_same_draw_each_time_and_its_table_counts_only_what_ran(tmp_path, monkeypatch):
    """`make bench-mutation SAMPLE=N` runs N mutants of each module drawn at random, the same N for the same module
    each time, in mutmut's order; the table counts the mutants that ran and says of how many they are a sample."""
    import json

    from benchmarks import mutation
    names = [f"dslab.m.x_f__mutmut_{i}" for i in range(1, 41)]
    drawn = mutation.draw("dslab/m.py", names, 10)
    assert len(drawn) == 10 and drawn == mutation.draw("dslab/m.py", names, 10)
    assert drawn == [n for n in names if n in drawn]
    assert drawn != mutation.draw("dslab/other.py", names, 10)
    assert mutation.draw("dslab/m.py", names, 50) == names
    monkeypatch.setattr(mutation, "MUTANTS", tmp_path)
    (tmp_path / "dslab").mkdir()
    codes = {n: None for n in names} | {drawn[0]: 0} | {n: 1 for n in drawn[1:]}
    (tmp_path / "dslab" / "m.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    mutation.sample_marker("dslab/m.py").write_text("10\n")
    assert mutation.tally("dslab/m.py") == {"mutants": 10, "of": 40, "killed": 9, "survived": 1, "no tests": 0,
                                            "timed out": 0, "other": 0}
    assert "dslab/m.py (a sample of 40)" in mutation.table(("dslab/m.py",))
    # A run stopped before its end (put into the results with --from-journal): it counts what it reached, and says of
    # how many (its mutants not reached are neither killed nor survivors).
    mutation.sample_marker("dslab/m.py").unlink()
    assert mutation.tally("dslab/m.py") == {"mutants": 10, "reached of": 40, "killed": 9, "survived": 1,
                                            "no tests": 0, "timed out": 0, "other": 0}
    assert "dslab/m.py (reached, of 40)" in mutation.table(("dslab/m.py",))
    assert mutation.table(("dslab/m.py",)).splitlines()[1].endswith(" 90.0%")


def test_a_mutant_that_runs_past_its_time_runs_once_more_with_patience_before_it_counts_as_timed_out():
    """A test's traced seconds are its call's: a fixture set up in the mutant's child can take longer than the budget
    allows. A mutant past its time goes back to the front of the queue, to run with PATIENCE x its time; only a second
    time past it counts (as mutmut counts it: killed)."""
    from benchmarks import mutation_runner
    runner = mutation_runner.Runner([], {"tests_by_mangled_function_name": {}, "duration_by_test": {}})
    pending = [("m.x_g__mutmut_1", ["T2"], 0.2)]
    assert runner._timed_out("m.x_f__mutmut_1", ["T1"], 0.1, pending) is True
    assert pending[0] == ("m.x_f__mutmut_1", ["T1"], 0.1) and runner.results == {}
    assert runner._timed_out("m.x_f__mutmut_1", ["T1"], 0.1, pending) is False
    assert runner.results == {"m.x_f__mutmut_1": mutation_runner.TIMED_OUT}
    assert mutation_runner.PATIENCE > 1


def test_a_copy_in_mutants_that_differs_from_its_source_is_replaced_and_a_changed_mutated_module_dropped(tmp_path,
                                                                                                        monkeypatch):
    """mutmut copies only where no copy is: the bench refreshes every copy that differs, the also_copy files (its own
    runner) included, and drops the results of a mutated module whose source changed."""
    from benchmarks import mutation
    repo, mutants = tmp_path / "repo", tmp_path / "mutants"
    for folder in (repo / "dslab", repo / "benchmarks", mutants / "dslab", mutants / "benchmarks"):
        folder.mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[tool.mutmut]\nsource_paths = ["dslab"]\nalso_copy = ["benchmarks", '
                                         '"app.py"]\n')
    for name, text in (("dslab/same.py", "a"), ("dslab/changed.py", "new"), ("benchmarks/runner.py", "new"),
                       ("app.py", "new"), ("dslab/mutated.py", "new"), ("dslab/new.py", "x")):
        (repo / name).write_text(text)
    for name, text in (("dslab/same.py", "a"), ("dslab/changed.py", "old"), ("benchmarks/runner.py", "old"),
                       ("app.py", "old"), ("dslab/mutated.py", "mutants of old")):
        (mutants / name).write_text(text)
    (mutants / "dslab/mutated.py.meta").write_text("{}")
    monkeypatch.setattr(mutation, "REPO", repo)
    monkeypatch.setattr(mutation, "MUTANTS", mutants)
    mutation.source_stamp("dslab/mutated.py").write_text("not the source's digest\n")
    assert mutation.refresh_copies() == ["dslab/mutated.py"]
    assert [(mutants / n).read_text() for n in ("dslab/same.py", "dslab/changed.py", "benchmarks/runner.py",
                                                "app.py", "dslab/mutated.py")] == ["a", "new", "new", "new", "new"]
    assert not (mutants / "dslab/mutated.py.meta").exists() and not (mutants / "dslab/new.py").exists()


def _fake_caches():
    """Three cached functions (one in a module being mutated, one in the domain core, one elsewhere) and the answers'
    memo, each counting its calls."""
    import functools
    import types
    calls = {"mutated": 0, "core": 0, "other": 0}

    def cached(module: str, key: str):
        def compute():
            calls[key] += 1
            return calls[key]
        compute.__module__ = module
        return functools.lru_cache(maxsize=None)(compute)
    functions = {"mutated": cached("dslab.aws.fake_cached", "mutated"), "core": cached("dslab.core.fake", "core"),
                 "other": cached("dslab.other", "other")}
    return functions, types.SimpleNamespace(_ANSWERS={"question": "answer"})


def test_a_mutants_child_forgets_what_the_parent_cached_in_the_mutants_module_the_core_and_the_memoised_answers():
    """A function whose result a functools cache holds (calibration.py's fit, read once) never ran in a mutant's child:
    the child clears its own module's caches, the domain core's (a core cache holds what any core module computed)
    and the memoised answers before its tests run; other modules' caches stay."""
    import sys
    from unittest import mock

    from benchmarks import mutation_runner
    functions, answers = _fake_caches()
    try:
        with mock.patch.dict(sys.modules, {"dslab.core.answer.answer": answers}):
            assert [f() for f in functions.values()] == [1, 1, 1] == [f() for f in functions.values()]
            mutation_runner.index_caches()
            mutation_runner.forget_cached("dslab.aws.fake_cached.x_compute__mutmut_3")
            assert [f() for f in functions.values()] == [2, 2, 1] and answers._ANSWERS == {}
    finally:
        mutation_runner._CACHES.clear()


def test_the_trace_starts_each_test_with_nothing_memoised_so_each_test_is_traced_to_what_it_reaches(monkeypatch):
    """mutmut's trace (MUTANT_UNDER_TEST=stats) records which tests reach each function. A test whose answer an earlier
    test had memoised reached nothing and never ran on a mutant (answer.py's packing advice survived its own tests so):
    under the trace each test starts with no memoised answer and no cache of the core's; outside it nothing is
    forgotten."""
    import sys
    from unittest import mock

    from benchmarks import mutation_runner, mutmut_trace
    functions, answers = _fake_caches()
    try:
        with mock.patch.dict(sys.modules, {"dslab.core.answer.answer": answers}):
            assert [f() for f in functions.values()] == [1, 1, 1]
            monkeypatch.setenv("MUTANT_UNDER_TEST", "dslab.core.fake.x_compute__mutmut_1")   # a mutant's child
            mutmut_trace.pytest_collection_finish(None)
            mutmut_trace.pytest_runtest_setup(None)
            assert [f() for f in functions.values()] == [1, 1, 1] and answers._ANSWERS
            monkeypatch.setenv("MUTANT_UNDER_TEST", "stats")
            mutmut_trace.pytest_collection_finish(None)
            mutmut_trace.pytest_runtest_setup(None)
            assert [f() for f in functions.values()] == [1, 2, 1] and answers._ANSWERS == {}
    finally:
        mutation_runner._CACHES.clear()


def test_a_stopped_runs_journal_goes_into_the_named_modules_results(tmp_path, monkeypatch):
    """`--from-journal`: a run writes the modules' results when it ends; one stopped early keeps what its journal
    holds, for the modules named, and the mutants it did not reach stay unrun."""
    import json

    from benchmarks import mutation
    repo, mutants = tmp_path / "repo", tmp_path / "mutants"
    (repo / "dslab").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    (mutants / "dslab").mkdir(parents=True)
    (repo / "dslab/m.py").write_text("x = 1\n")
    (mutants / "dslab/m.py.meta").write_text(json.dumps({"exit_code_by_key": {
        "dslab.m.x_f__mutmut_1": None, "dslab.m.x_f__mutmut_2": None, "dslab.m.x_f__mutmut_3": None}}))
    (mutants / "bench-results.jsonl").write_text('["dslab.m.x_f__mutmut_1", 1]\n["dslab.m.x_f__mutmut_2", 0]\n'
                                                 '["dslab.other.x_g__mutmut_1", 1]\n')
    monkeypatch.setattr(mutation, "REPO", repo)
    monkeypatch.setattr(mutation, "MUTANTS", mutants)
    monkeypatch.setattr(mutation, "GROUPS", {"g": (("dslab/m.py",), "sel", "survivors.txt")})
    monkeypatch.setattr(mutation, "survivors", lambda modules: "the diffs")
    mutation.from_journal(("dslab/m.py",), "g")
    codes = json.loads((mutants / "dslab/m.py.meta").read_text())["exit_code_by_key"]
    assert codes == {"dslab.m.x_f__mutmut_1": 1, "dslab.m.x_f__mutmut_2": 0, "dslab.m.x_f__mutmut_3": None}
    assert mutation.source_stamp("dslab/m.py").read_text().strip() == mutation._digest(repo / "dslab/m.py")
    assert (repo / "benchmarks" / "survivors.txt").read_text() == "the diffs"
