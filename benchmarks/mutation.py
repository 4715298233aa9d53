"""Mutation testing (`make bench-mutation`; not part of `make test`) of two groups of modules, each with its own test
selection: ``reactions``, the code that holds the reactions to AWS's errors (pyproject.toml [tool.mutmut]
pytest_add_cli_args_test_selection: the fault matrix's injections, tests/test_fault_matrix.py, and the reaction
tests), and ``answer``, the code that gives the answer: the model, the sizing, the decision, the calibration, the
prices and limits, the requests and the export ([tool.mutmut] answer_test_selection: the answer's unit tests and
tests/test_answer_by_hand.py, _anchors.py, _properties.py). mutmut (pinned below) copies the sources into mutants/,
mutates the modules named one change at a time (a comparison flipped, a constant changed, a string replaced, a call's
argument dropped...) and traces which tests of the group's selection reach each function;
benchmarks/mutation_runner.py then runs, per mutant, the tests that reach the mutated function. A mutant no test
fails on "survived": a reaction, a rule or a figure, or a word of it, that no test protects.

    python -m benchmarks.mutation                      # every module of both groups, one group after the other
    python -m benchmarks.mutation --group answer       # every module of one group
    python -m benchmarks.mutation dslab/workflow/teardown.py dslab/core/facts/limits.py   # each in its group
    python -m benchmarks.mutation --again MODULE...    # the last run's survivors only, after tests were added
    python -m benchmarks.mutation --report             # the table from the last run, without running
    DSLAB_MUTATION_RESUME=1 python -m benchmarks.mutation MODULE...   # a stopped run again: its journal's results stand

It prints killed / survived / timed out per module and the time it took, and writes each survivor's diff for
docs/setup.md's review of them: benchmarks/mutation-survivors.txt (reactions), mutation-survivors-answer.txt (answer).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTANTS = REPO / "mutants"
MUTMUT = "mutmut==3.8.1"

# The modules whose reactions the fault matrix injects (issue 46's list). Not here, and why: the state machine's Retry
# and Catch (stacks/components/workflow.py) are asserted field by field against literal values
# (test_each_task_states_retry_and_catch_are_the_ones_promised), and synthesizing the app in a forked mutant would
# share the parent's jsii kernel.
MODULES = (
    "dslab/workflow/teardown.py", "dslab/workflow/fsx_guard.py", "dslab/workflow/collect.py",
    "dslab/workflow/check_fsx_data.py", "dslab/workflow/fsx_data.py", "dslab/workflow/express_staging.py",
    "dslab/workflow/common.py", "dslab/workflow/plan.py", "dslab/cli/runs.py", "dslab/inputs/datasets.py",
    "dslab/aws/efs.py", "dslab/aws/express.py", "dslab/aws/doctor.py", "stacks/components/express_empty/index.py",
    "training/dslab_train/s3source.py", "training/dslab_train/checkpoint.py", "dslab/local/checkpoint_sync.py", "dslab/local/runner.py",
    "dslab/local/storage.py", "dslab/local/job_storage.py", "dslab/local/lab.py",
)
# The code that gives the answer (issue 58): the answer and its views, the model, the measured runs' calibration, the
# prices and limits it reads, the requests it sizes and the export that writes them.
ANSWER_MODULES = (
    "dslab/core/facts/limits.py", "dslab/core/facts/aws_errors.py", "dslab/core/facts/storage.py",
    "dslab/core/facts/prices.py", "dslab/core/model/spread.py", "dslab/core/model/efs.py",
    "dslab/core/model/volume.py", "dslab/core/model/provisioning.py", "dslab/core/model/estimate.py",
    "dslab/core/model/checkpoint_estimate.py", "dslab/core/model/calibration.py", "dslab/core/answer/premise.py",
    "dslab/core/answer/decision.py", "dslab/core/answer/sizing.py", "dslab/core/answer/checkpoints.py",
    "dslab/core/answer/scenarios.py", "dslab/core/answer/answer.py", "dslab/core/answer/jobs.py",
    "dslab/core/measured.py",
    "dslab/core/requests.py", "dslab/cli/export.py",
)
# Each group: its modules, the [tool.mutmut] key of its test selection, the file of its survivors' diffs.
GROUPS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "reactions": (MODULES, "pytest_add_cli_args_test_selection", "mutation-survivors.txt"),
    "answer": (ANSWER_MODULES, "answer_test_selection", "mutation-survivors-answer.txt"),
}


def group_of(module: str) -> str:
    return next(name for name, (modules, _, _) in GROUPS.items() if module in modules)


def selection(group: str, settings: dict | None = None) -> list[str]:
    """The group's test selection, as pyproject.toml [tool.mutmut] gives it."""
    import tomllib
    settings = settings or tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(settings[GROUPS[group][1]])


# Modules mostly about something else (the CLI's argument registration and rendering, the dataset tooling's packing):
# only their AWS paths are mutated, the functions that hold a call site of the fault matrix (dslab/aws/faults.py, so a
# new call brings its function in), plus the reactions that sit around those calls (named here, with why).
AWS_PATHS_ONLY = {
    "dslab/cli/runs.py": ("_look",),          # `dslab status --wait`: a throttled look tried again, five at most
    "dslab/inputs/datasets.py": (),
    "dslab/local/runner.py": ("run_training_job",),   # a job failed with S3's refusal, said once
    "dslab/local/storage.py": (), "dslab/local/job_storage.py": ("refused",),
    "dslab/local/lab.py": (),
}
# mutmut's exit codes per mutant (mutmut/stats.py status_by_exit_code). A mutant of a function no selected test
# reaches ("no tests") counts as not killed.
KILLED, SURVIVED, NO_TESTS = (1, 3), (0,), (5, 33)
TIMEOUT = (-24, 24, 36, 152, 255)


def mutant_globs(module: str) -> tuple[str, ...]:
    """mutmut's names of the mutants measured in a module: x_f__mutmut_3 for a function f, xǁCǁm__mutmut_3 for a
    method (a nested function's mutants are its enclosing function's)."""
    dotted = module.removesuffix(".py").replace("/", ".")
    if module not in AWS_PATHS_ONLY:
        return (dotted + ".*",)
    import ast

    from dslab.aws import faults
    classes = {node.name for node in ast.parse((REPO / module).read_text()).body if isinstance(node, ast.ClassDef)}
    functions = {site.function for site in faults.PY_SITES if site.module == module} | set(AWS_PATHS_ONLY[module])
    names = set()
    for function in functions:
        parts = function.split(".")
        names.add(f"xǁ{parts[0]}ǁ{parts[1]}" if parts[0] in classes else f"x_{parts[0]}")
    return tuple(f"{dotted}.{name}__mutmut_*" for name in sorted(names))


def _measured(module: str, codes: dict[str, int | None]) -> dict[str, int | None]:
    import fnmatch
    globs = mutant_globs(module)
    return {k: v for k, v in codes.items() if any(fnmatch.fnmatchcase(k, g) for g in globs)}


def tally(module: str) -> dict[str, int]:
    meta = MUTANTS / (module + ".meta")
    if not meta.exists():
        return {}
    codes = _measured(module, json.loads(meta.read_text())["exit_code_by_key"])
    out = {"mutants": len(codes), "killed": 0, "survived": 0, "no tests": 0, "timed out": 0, "other": 0}
    if sample_marker(module).exists():   # a sample: its mutants not drawn were never run, and are not counted
        out["of"] = len(codes)
        codes = {k: v for k, v in codes.items() if v is not None}
        out["mutants"] = len(codes)
    elif any(v is None for v in codes.values()):   # a run stopped before its end (--from-journal): what it reached
        out["reached of"] = len(codes)
        codes = {k: v for k, v in codes.items() if v is not None}
        out["mutants"] = len(codes)
    for code in codes.values():
        key = ("killed" if code in KILLED else "survived" if code in SURVIVED else "no tests" if code in NO_TESTS
               else "timed out" if code in TIMEOUT else "other")
        out[key] += 1
    return out


def table(modules: tuple[str, ...]) -> str:
    lines = [f"{'module':60s} {'mutants':>7s} {'killed':>7s} {'survived':>8s} {'no tests':>8s} {'timed out':>9s} "
             f"{'killed %':>8s}"]
    total = {"mutants": 0, "killed": 0, "survived": 0, "no tests": 0, "timed out": 0}
    for module in modules:
        found = tally(module)
        label = f"{module} (AWS paths)" if module in AWS_PATHS_ONLY else module
        if not found:
            lines.append(f"{label:60s} {'not run':>7s}")
            continue
        share = 100.0 * (found["killed"] + found["timed out"]) / found["mutants"] if found["mutants"] else 0.0
        if "of" in found:
            label = f"{label} (a sample of {found['of']:,})"
        if "reached of" in found:
            label = f"{label} (reached, of {found['reached of']:,})"
        lines.append(f"{label:60s} {found['mutants']:7d} {found['killed']:7d} {found['survived']:8d} "
                     f"{found['no tests']:8d} {found['timed out']:9d} {share:7.1f}%")
        for key in total:
            total[key] += found[key]
    if total["mutants"]:
        lines.append(f"{'all':60s} {total['mutants']:7d} {total['killed']:7d} {total['survived']:8d} "
                     f"{total['no tests']:8d} {total['timed out']:9d} "
                     f"{100.0 * (total['killed'] + total['timed out']) / total['mutants']:7.1f}%")
    return "\n".join(lines)


def survivors(modules: tuple[str, ...]) -> str:
    """Each survivor's diff, as `mutmut show` prints it (its diff function, in one process: `mutmut show` per
    survivor takes a second each)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    out = []
    for module in modules:
        meta = MUTANTS / (module + ".meta")
        if meta.exists():
            codes = _measured(module, json.loads(meta.read_text())["exit_code_by_key"])
            for name, code in codes.items():
                if code in SURVIVED or code in NO_TESTS:
                    status = "survived" if code in SURVIVED else "no tests"
                    out.append(f"## {name}: {status}\n{get_diff_for_mutant(name, path=module).strip()}\n")
    return "\n".join(out)


def trace(group: str = "reactions") -> None:
    """mutmut's first half (mutmut/__main__.py's _run, 3.8.1): the mutants generated into mutants/ and the group's
    test selection traced, to learn which tests reach which function (mutants/mutmut-stats.json). Run in its own
    process from the repository's root (mutmut reads its settings there). mutmut knows one test selection
    (pytest_add_cli_args_test_selection) and mutates every module of only_mutate: here both are the group's, and the
    copy of pyproject.toml in mutants/, which benchmarks/mutation_runner.py reads, is given the group's selection."""
    import fnmatch
    import re

    from mutmut import __main__ as mutmut
    from mutmut.configuration import config
    settings = config()
    settings.pytest_add_cli_args_test_selection = selection(group)
    modules = GROUPS[group][0]
    settings.only_mutate = [g for g in settings.only_mutate if any(fnmatch.fnmatch(m, g) for m in modules)]
    mutmut.set_mutant_under_test("mutant_generation")
    MUTANTS.mkdir(exist_ok=True)
    mutmut.copy_src_dir()
    mutmut.copy_also_copy_files()
    copied = MUTANTS / "pyproject.toml"
    chosen = "pytest_add_cli_args_test_selection = " + json.dumps(settings.pytest_add_cli_args_test_selection)
    copied.write_text(re.sub(r"(?m)^pytest_add_cli_args_test_selection = .*$", lambda _: chosen, copied.read_text()))
    mutmut.setup_source_paths()
    mutmut.store_lines_covered_by_tests()
    mutmut.create_mutants(os.cpu_count() or 2)
    mutmut.collect_or_load_stats(mutmut.get_mutant_runner(2), mutants_caught_by_type_checker={},
                                 apply_config_invalidation=True)


def sample_marker(module: str) -> Path:
    """Beside a module's results, where its last run was a sample: how many of its mutants were drawn."""
    return MUTANTS / (module + ".sample")


def draw(module: str, names: list[str], size: int) -> list[str]:
    """A module's sample: ``size`` of its mutants drawn at random, the same draw for the same module and mutants
    (seeded by the module's path), in mutmut's order."""
    import random
    if size >= len(names):
        return list(names)
    chosen = set(random.Random(module).sample(sorted(names), size))
    return [n for n in names if n in chosen]


def run_mutants(modules: tuple[str, ...], names: list[str], kept: dict[str, dict] | None = None,
                group: str = "reactions", sample: int | None = None) -> float:
    """Trace, then run the mutants named (benchmarks/mutation_runner.py) and store their results in mutmut's .meta
    files, where `mutmut results` and this bench's table read them. kept: a module's results from before, put back
    for every mutant not run again (tracing a changed test selection makes mutmut forget every result)."""
    started = time.monotonic()
    traced = subprocess.run([sys.executable, "-m", "benchmarks.mutation", "--trace", "--group", group], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if traced.returncode:   # pytest's report of the test that failed unmutated is on stdout
        raise SystemExit(f"benchmarks.mutation: mutmut's tracing failed:\n{traced.stdout[-3000:]}")
    if not names:   # a full run: every mutant of the modules, now generated (or a sample of each module's)
        for module in modules:
            every = list(_measured(module, json.loads((MUTANTS / (module + ".meta")).read_text())["exit_code_by_key"]))
            names += draw(module, every, sample) if sample else every
            if sample:
                sample_marker(module).write_text(f"{sample}\n")
            else:
                sample_marker(module).unlink(missing_ok=True)
    names_file, results_file = MUTANTS / "bench-mutants.txt", MUTANTS / "bench-results.json"
    names_file.write_text("\n".join(names) + "\n")
    results_file.unlink(missing_ok=True)
    ran = subprocess.run([sys.executable, "-m", "benchmarks.mutation_runner", str(names_file), str(results_file)],
                         cwd=MUTANTS, stdout=subprocess.DEVNULL)
    if ran.returncode:
        raise SystemExit("benchmarks.mutation: the mutants' run failed (see above)")
    results = json.loads(results_file.read_text())
    for module in modules:
        meta = MUTANTS / (module + ".meta")
        now = json.loads(meta.read_text())
        before = (kept or {}).get(module, {}).get("exit_code_by_key", {})
        codes = {k: results[k] if k in results else before.get(k, v) for k, v in now["exit_code_by_key"].items()}
        meta.write_text(json.dumps({**now, "exit_code_by_key": codes}))
        source_stamp(module).write_text(_digest(REPO / module) + "\n")
    # Every module of the group that has a run (this one's and the earlier runs'): a run of some modules keeps the
    # other modules' survivors in the file.
    (REPO / "benchmarks" / GROUPS[group][2]).write_text(survivors(GROUPS[group][0]))
    return time.monotonic() - started


def again(modules: tuple[str, ...], group: str = "reactions") -> None:
    """The last run's survivors (and mutants no test reached) run again against the tests as they are now; every other
    result stands: a mutant the tests killed stays killed when tests are added. mutmut itself would forget them: a
    changed test selection (pyproject.toml) resets every result it holds, so they are kept here and put back."""
    dropped = refresh_copies()
    if dropped:
        print(f"mutation run again: changed since their last run, their results dropped: {', '.join(dropped)}")
    kept: dict[str, dict] = {}
    names: list[str] = []
    for module in modules:
        meta = MUTANTS / (module + ".meta")
        if not meta.exists():
            raise SystemExit(f"benchmarks.mutation --again: {module} has no last run to start from; run it first")
        document = json.loads(meta.read_text())
        kept[module] = document
        measured = _measured(module, document["exit_code_by_key"])
        sampled = sample_marker(module).exists()   # a sample's mutants not drawn stay unrun
        names += [k for k, v in measured.items() if v in SURVIVED or v in NO_TESTS or (v is None and not sampled)]
    (MUTANTS / "mutmut-stats.json").unlink(missing_ok=True)   # the tests added are traced too
    if not names:
        print("mutation run again: no survivor to run")
        return
    seconds = run_mutants(modules, names, kept, group)
    print(f"mutation run again: {seconds:.0f} s for {len(names)} survivor(s) of {len(modules)} module(s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: every module of the list)")
    parser.add_argument("--report", action="store_true", help="print the last run's table only")
    parser.add_argument("--group", choices=sorted(GROUPS),
                        help="every module of one group (default: the modules named, or both groups)")
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)   # run_mutants' first step
    parser.add_argument("--sample", type=int, metavar="N",
                        help="run N mutants of each module, drawn at random (the same draw each time): a first measure "
                             "of a module too large to run whole; the table says it is a sample")
    parser.add_argument("--from-journal", action="store_true",
                        help="a stopped run: put what its journal holds into the named modules' results")
    parser.add_argument("--again", action="store_true",
                        help="run the last run's survivors again (after tests were added), keeping every other result")
    args = parser.parse_args(argv)
    if args.trace:
        trace(args.group or "reactions")
        return 0
    known = [m for modules, _, _ in GROUPS.values() for m in modules]
    unknown = [m for m in args.modules if m not in known]
    if unknown:
        print(f"benchmarks.mutation: not in the list (pyproject.toml [tool.mutmut] only_mutate): {unknown}",
              file=sys.stderr)
        return 2
    named = tuple(args.modules) or (GROUPS[args.group][0] if args.group else tuple(known))
    for group in GROUPS:   # each group with its own test selection: one after the other
        modules = tuple(m for m in named if group_of(m) == group)
        if modules:
            run_group(group, modules, args)
    return 0


def _digest(path: Path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_stamp(module: str) -> Path:
    """Beside a module's results: the SHA-256 of the source its mutants were made from."""
    return MUTANTS / (module + ".source-sha256")


def refresh_copies() -> list[str]:
    """mutmut copies the sources and its also_copy files into mutants/ only where no copy is there yet
    (mutmut/utils/file_utils.py copy_src_dir), so a file changed since an earlier run would be tested as it was. Every unmutated copy that differs
    from its source is replaced; a mutated module whose source changed since its mutants were made (its stamp, else
    its mtime) is dropped with its results: it is generated again, and must be run again."""
    import shutil
    import tomllib
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    dropped = []
    # The sources and what mutmut copies beside them (also_copy: the bench's own runner among them, which a run
    # imports from mutants/).
    for root in [*settings["source_paths"], *settings.get("also_copy", [])]:
        top = REPO / root
        for source in ([top] if top.is_file() else top.rglob("*")):
            if not source.is_file() or "__pycache__" in source.parts:
                continue
            relative = source.relative_to(REPO)
            target = MUTANTS / relative
            if not target.exists():
                continue
            meta = MUTANTS / (str(relative) + ".meta")
            if meta.exists():   # mutated: compare with the source it was made from
                stamp = source_stamp(str(relative))
                changed = (stamp.read_text().strip() != _digest(source) if stamp.exists()
                           else source.stat().st_mtime > target.stat().st_mtime)
                if not changed:
                    continue
                meta.unlink()
                stamp.unlink(missing_ok=True)
                dropped.append(str(relative))
            elif target.read_bytes() == source.read_bytes():
                continue
            shutil.copy2(source, target)
    return dropped


def from_journal(modules: tuple[str, ...], group: str) -> None:
    """A run stopped before its end (a run writes the modules' results when it ends): what its journal holds goes
    into the results of the modules named, as the run would have written it; mutants it did not reach stay unrun."""
    journal = MUTANTS / "bench-results.jsonl"
    found = dict(json.loads(line) for line in journal.read_text().splitlines() if line.strip())
    for module in modules:
        meta = MUTANTS / (module + ".meta")
        document = json.loads(meta.read_text())
        codes = {k: found.get(k, v) for k, v in document["exit_code_by_key"].items()}
        meta.write_text(json.dumps({**document, "exit_code_by_key": codes}))
        source_stamp(module).write_text(_digest(REPO / module) + "\n")
    (REPO / "benchmarks" / GROUPS[group][2]).write_text(survivors(GROUPS[group][0]))


def run_group(group: str, modules: tuple[str, ...], args: argparse.Namespace) -> None:
    if args.from_journal:
        from_journal(modules, group)
    elif args.again:
        again(modules, group)
    elif not args.report:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", MUTMUT], check=True)
        MUTANTS.mkdir(exist_ok=True)
        link = MUTANTS / "node_modules"   # the CDK CLI the stand-in's deploys use, not copied: linked
        if not link.exists():
            link.symlink_to(REPO / "node_modules")
        # Each named module is measured afresh: its mutants and results go, and so does the record of which tests
        # reach which function (mutmut keeps both between runs, and a module first copied unmutated stays so).
        for module in modules:
            for stale in (MUTANTS / module, MUTANTS / (module + ".meta")):
                stale.unlink(missing_ok=True)
        dropped = refresh_copies()
        if dropped:
            print(f"mutation run: changed since their last run, their results dropped: {', '.join(dropped)}")
        (MUTANTS / "mutmut-stats.json").unlink(missing_ok=True)
        # One tracing pass for every module named (mutmut's first pass over the whole test selection), then each
        # mutant run by benchmarks/mutation_runner.py.
        seconds = run_mutants(modules, [], group=group, sample=args.sample)
        print(f"mutation run ({group}): {seconds:.0f} s for {len(modules)} module(s)")
    print(table(modules))


if __name__ == "__main__":
    raise SystemExit(main())
