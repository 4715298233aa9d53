"""``dslab local``: the whole lab offline on the embedded AWS stand-in, and its answer."""

from __future__ import annotations

from pathlib import Path

from .common import add_command, num


def cmd_local(args) -> int:
    from ..local.lab import run_local
    run = run_local(Path(args.experiment) if args.experiment else None, Path(args.out),
                    cache=Path(args.cache) if args.cache else None, live_progress=None if not args.plain else False)
    print()
    print(f"local run {run.execution_status}" + (f" ({run.execution_error})" if run.execution_error else ""))
    from ..report import scenario, source, trials_collide
    several_trials = trials_collide(run.results["records"])
    width = 28 if several_trials else 12
    print(f"{'source':16s} {'dataset':{width}s} {'status':10s} {'samples/s':>10s} {'MB/s':>8s} {'AU %':>6s} {'e2e %':>6s} "
          f"{'1st batch s':>11s} {'billable s':>10s}")
    for r in run.results["records"]:
        m = r["metrics"]
        print(f"{source(r):16s} {scenario(r, several_trials)[:width]:{width}s} {r['status']:10s} {num(m.get('samples_per_second')):>10s} "
              f"{num(m.get('mb_per_second')):>8s} {num(m.get('au_percent')):>6s} {num(m.get('end_to_end_efficiency_percent')):>6s} "
              f"{num(m.get('time_to_first_batch_seconds'), 2):>11s} {num(r['billable_seconds'], 0):>10s}")
    t = run.timings
    training = sum((r["phases"] or {}).get("Training", 0.0) for r in run.results["records"])
    print(f"wall time {t.get('total', 0):.1f} s: set-up {t.get('setup', 0):.1f} s, data preparation {t.get('data', 0):.1f} s, "
          f"jobs {t.get('jobs', 0):.1f} s (of which Training phases {training:.1f} s), reporting {t.get('reporting', 0):.1f} s; "
          f"lab overhead {100 * (1 - training / t['total']):.0f}% of the wall time" if t.get("total") else "")
    from ..report import Answers, aggregate, answer_lines
    print()
    print("the answer (as report.md's ## Answer; local seconds are this machine's, not AWS's):")
    for line in answer_lines(Answers(run.results, aggregate(run.results["records"])), bold=str,
                             heading=lambda label: f"{label}:"):
        print(f"  {line}" if line else "")
    print(f"report: {Path(args.out) / 'report.html'} (also report.md, results.json, results.csv, breakdown.png)")
    return 0 if run.execution_status == "SUCCEEDED" else 1


def register(sub) -> None:
    p = add_command(sub, "local", cmd_local, "Run the whole lab offline on the embedded AWS stand-in and write its report.",
                    "dslab local --out lab-out --experiment experiments/local.yaml")
    p.add_argument("--experiment", help=f"experiment YAML (default {Path('experiments/local.yaml')})")
    p.add_argument("--out", required=True)
    p.add_argument("--cache", help="where datasets and templates are kept between runs (default .lab-cache)")
    p.add_argument("--plain", action="store_true", help="a line per job change instead of the live table on a terminal")
