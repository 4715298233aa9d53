"""``dslab calibrate``: the model's constants fitted on a user's own AWS runs (core/measured.py), written as a
calibration file that ``--calibration`` answers with."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..core.errors import ConfigError
from .common import add_command
from .render import print_lines, table


def _number(value: float, constant: dict) -> str:
    """A constant in its unit: 27.8 ms, 1,993 MB/s."""
    value *= constant.get("scale") or 1.0
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 1 else f"{value:.3g}"
    return f"{text} {constant['unit']}" if constant.get("unit") else text


def calibration_lines(document: dict) -> list[str]:
    """The calibration in a table a user reads in ten seconds: what moved first, then what held and why."""
    rows = []
    for c in sorted(document["constants"], key=lambda c: (c["status"] != "calibrated", c["status"] != "kept",
                                                          -abs(c["change"] or 0.0))):
        if c["status"] == "not measured":
            continue
        change = f"{c['change']:+.1%}" if c["status"] == "calibrated" and c["change"] is not None else "kept"
        rows.append([c["what"][:44], _number(c["shipped"], c), _number(c["calibrated"], c), change, str(len(c["jobs"]))])
    lines = table(["constant", "shipped", "calibrated", "change", "jobs"], rows, right=(1, 2, 3, 4))
    for c in document["constants"]:
        if c["status"] == "calibrated" and c.get("range"):
            low, high = c["range"]
            lines.append(f"{c['what']}: {_number(c['calibrated'], c)}, supported from {_number(low, c)} to "
                         f"{_number(high, c)} (±{c.get('uncertainty', 0.0):.0%})")
    kept = [c for c in document["constants"] if c["status"] == "kept"]
    for c in kept:
        lines.append(f"kept {c['what']}: {c['why']}")
    for aside in document.get("set_aside") or []:
        lines.append(f"set aside {aside['job']}: {aside['why']}")
    unmeasured = sum(c["status"] == "not measured" for c in document["constants"])
    lines.append(f"{unmeasured} constants no measured phase rests on: kept as shipped")
    found = document["out_of_sample"]["your_runs"]
    if "shipped" in found:
        before, after = found["shipped"], found["calibrated_without_it"]
        lines.append(f"your runs, each scenario predicted without it: mean error {before['mean_abs']:.1%} shipped -> "
                     f"{after['mean_abs']:.1%} calibrated ({after['under']:+.1%} to {after['over']:+.1%}; "
                     f"{len(found['scenarios'])} scenarios, {found['jobs']} jobs)")
    else:
        lines.append(found["note"])
    return lines


def cmd_calibrate(args) -> int:
    from ..core import measured
    from ..core.facts.prices import PriceTable
    from ..report import load_results
    out = Path(args.out)
    if out.exists() and out.is_dir():
        raise ConfigError("--out", f"{out} is a folder: give the calibration file's path (calibration.json)")
    if not out.parent.exists():
        raise ConfigError("--out", f"{out.parent} does not exist: create it, or write the file elsewhere")
    jobs: list = []
    set_aside: list = []
    prices = PriceTable()
    for path in args.results:
        results = load_results(Path(path))
        read = measured.read_runs(results, where=f"--results {path}")
        jobs += read.jobs
        set_aside += read.set_aside
        jobs += measured.checkpoint_jobs(results, prices, where=f"--results {path}")   # the same file calibrates both
    if not jobs:
        raise ConfigError("--results", "no completed job in " + ", ".join(args.results)
                          + ": nothing measured to calibrate on")
    found = measured.calibrate(jobs, prices, set_aside=set_aside)
    if not found.changed():
        # Nothing moved: no file (an older calibration stays as it was), and what the runs would need.
        held = [c for c in found.constants if c.status == "kept"]
        said = f"; {held[0].name}: {held[0].why}" if held else ""
        raise ConfigError("--results", f"nothing calibrated: each constant needs jobs of {measured.MIN_SCENARIOS} "
                          "scenarios or more (other datasets or instance types, not repeats) that agree within their "
                          f"noise (experiments/calibrate.yaml measures each assumption so){said}")
    # Each kind of job left out among its own kind: a data answer's range widens by the data jobs' error only.
    data = [j for j in jobs if isinstance(j, measured.MeasuredJob)]
    checkpoints = [j for j in jobs if not isinstance(j, measured.MeasuredJob)]
    document = measured.calibration_document(found, prices, measured.out_of_sample(data, prices),
                                             [str(p) for p in args.results], measured.out_of_sample(checkpoints, prices))
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps(document, indent=1) + "\n")
    os.replace(partial, out)   # a reader never sees half a file; an older calibration stays until this one is whole
    print_lines(calibration_lines(document))
    print(f"wrote {out}: use it with --calibration {out}")
    return 0


def register(sub) -> None:
    p = add_command(sub, "calibrate", cmd_calibrate,
                    "Fit the estimate's constants on your own AWS runs (with Bencher's cells) and write a calibration "
                    "file: every constant before and after, the jobs it rests on, and the error on your runs, each "
                    "predicted without it; checkpoint trials calibrate the checkpoint answers' assumptions in the same "
                    "file. Local runs are refused (their seconds are this machine's).",
                    "dslab calibrate --results results.json --out calibration.json")
    p.add_argument("--results", nargs="+", required=True, help="results.json of one or more AWS runs")
    p.add_argument("--out", required=True, help="the calibration file to write (JSON)")
