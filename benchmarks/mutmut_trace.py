"""A pytest plugin for `make bench-mutation` only (pyproject.toml [tool.mutmut] pytest_add_cli_args). While mutmut
traces which tests reach which function (its "stats" pass: MUTANT_UNDER_TEST=stats), each test starts with no
memoised answer and no cache of the domain core's: the trace is what each test reaches by itself. Without this a test
whose answer an earlier test had memoised reached nothing, was never run on a mutant of what it checks, and the
mutant survived: answer.py's I/O-bound advice line, inverted, passed the test that reads that very line. A mutant's
child forgets the same before its tests (benchmarks/mutation_runner.py forget_cached)."""

from __future__ import annotations

import os

from benchmarks import mutation_runner


def pytest_collection_finish(session) -> None:
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        mutation_runner.index_caches()   # every module of the selection imported: its caches are there to find


def pytest_runtest_setup(item) -> None:
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        mutation_runner.forget_answers()
