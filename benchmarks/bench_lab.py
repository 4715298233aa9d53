"""The local lab's own speed (`make bench-lab`): prints figures, asserts nothing.

Runs `dslab local` on an experiment (default experiments/smoke.yaml) as a user does, in a cache of its own: a first
run from an empty cache (datasets generated, stacks synthesized and deployed with the CDK CLI), then RUNS cached runs
(datasets and the saved deployment reused). For each: the command's wall and CPU seconds (user + sys, its processes
included: wall time on a shared machine is noisy), and the lab's own split (set-up, data, jobs, the jobs' Training
phases, reporting, and the overhead: the share of the wall time that is not training); for the cached runs, the
minimum, median and maximum of each figure.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPLIT = re.compile(r"wall time (?P<total>[\d.]+) s: set-up (?P<setup>[\d.]+) s, data preparation (?P<data>[\d.]+) s, "
                   r"jobs (?P<jobs>[\d.]+) s \(Training phases (?P<training>[\d.]+) s")
COLUMNS = ("wall", "cpu", "setup", "data", "jobs", "training", "reporting", "overhead")


def run_once(experiment: Path, out: Path, cache: Path) -> dict[str, float | str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([str(REPO / ".venv" / "bin" / "dslab"), "local", "--experiment", str(experiment),
                           "--out", str(out), "--cache", str(cache), "--plain"],
                          capture_output=True, text=True, cwd=REPO)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"dslab local failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    split = next(SPLIT.finditer(done.stdout), None)
    if split is None:
        sys.exit(f"no wall-time line in dslab local's output:\n{done.stdout[-2000:]}")
    figures: dict[str, float | str] = {k: float(v) for k, v in split.groupdict().items()}
    reporting = next(re.finditer(r"reporting (?P<r>[\d.]+) s", done.stdout), None)
    figures["reporting"] = float(reporting["r"]) if reporting else 0.0
    figures["wall"] = wall
    figures["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    figures["overhead"] = 100 * (1 - float(figures["training"]) / wall)
    figures["stacks"] = ("saved deployment" if "as the last `cdk deploy`" in done.stdout else
                         "cdk deploy" if "cdk deploy" in done.stdout else "?")
    return figures


def row(label: str, figures: dict) -> str:
    cells = [f"{figures[c]:.0f}%" if c == "overhead" else f"{figures[c]:.1f}" for c in COLUMNS]
    return f"| {label} | " + " | ".join(cells) + f" | {figures.get('stacks', '')} |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default=str(REPO / "experiments" / "smoke.yaml"))
    parser.add_argument("--runs", type=int, default=3, help="cached runs after the first (default 3)")
    parser.add_argument("--work", default=str(REPO / "bench-out" / "lab"), help="the bench's cache and outputs")
    args = parser.parse_args(argv)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    experiment = Path(args.experiment).resolve()
    print(f"bench-lab: {experiment.relative_to(REPO) if experiment.is_relative_to(REPO) else experiment}, "
          f"{os.cpu_count()} cores; seconds unless marked")
    first = run_once(experiment, work / "out", work / "cache")
    cached = [run_once(experiment, work / "out", work / "cache") for _ in range(args.runs)]
    print()
    print("| run | wall | CPU (user+sys) | set-up | data | jobs | of which training | reporting | lab overhead | stacks |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(row("first (empty cache)", first))
    for i, figures in enumerate(cached, 1):
        print(row(f"cached {i}", figures))
    for name, pick in (("cached min", min), ("cached median", statistics.median), ("cached max", max)):
        print(row(name, {c: pick([float(f[c]) for f in cached]) for c in COLUMNS}))


if __name__ == "__main__":
    main()
