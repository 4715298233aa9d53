"""``dslab local``: the whole lab offline on the embedded AWS stand-in, and its answer."""

from __future__ import annotations

import atexit
import gc
import signal
import sys
from pathlib import Path

from ..core.errors import ConfigError
from ..core.experiment.parsing import MAX_REPEATS
from .common import add_command, num, whole


def cmd_local(args) -> int:
    import importlib.util
    missing = [name for name in ("moto", "aws_cdk", "cdk_nag") if importlib.util.find_spec(name) is None]
    if missing:   # the CLI alone (`pip install .`) answers and runs on AWS; the offline lab needs its extras
        raise ConfigError("dslab local", f"the offline lab needs {', '.join(missing)}, which `pip install .` leaves out: "
                          "install the lab's extras (pip install '.[lab]', and the CDK CLI: npm ci), or run `make lab` "
                          "in a clone of the repository, which sets them all up")
    from ..local.lab import Interrupted, Terminated, WorkflowFailed, run_local
    from .question import experiment_overrides

    # The process's end: Python's finalization walks every object the lab left (moto, the SDK's models: ~1.4 s of CPU
    # after the report is written). Frozen at exit, they are not walked; the files are written and closed by then.
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)

    def terminate(signum, frame):
        raise Terminated()   # SIGTERM stops the run as Ctrl-C does: what finished is kept, everything started stopped

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        run = run_local(Path(args.experiment) if args.experiment else None, Path(args.out),
                        cache=Path(args.cache) if args.cache else None, live_progress=None if not args.plain else False,
                        fresh=args.fresh, repeats=args.repeats,
                        workload=Path(args.workload) if args.workload else None, scale=args.scale,
                        overrides=experiment_overrides(args), redeploy=args.redeploy)
    except Interrupted as stop:
        left = stop.total - stop.done
        print(f"\ninterrupted at {stop.done}/{stop.total} jobs: {stop.paths['report.html']} reports the {stop.done} that "
              f"finished (results.json keeps them); the same command with the same --out runs the other {left} "
              "(--fresh starts over)", file=sys.stderr)
        return 143 if stop.terminated else 130
    except Terminated:
        print("dslab: terminated", file=sys.stderr)
        return 143
    except WorkflowFailed as failed:   # nothing ran to a result: Step Functions' error and cause say why
        print(f"dslab: error: {failed}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    print()
    print(f"local run {run.execution_status}" + (f" ({run.execution_error})" if run.execution_error else ""))
    resumed = run.results.get("resumed")
    if resumed:
        print(f"resumed (attempt {resumed['attempt']}): {resumed['kept']} jobs kept from the interrupted attempt, "
              f"{resumed['ran']} run now")
    from ..core.job_metrics import job_au_percent
    from ..report import scenario, source, trials_collide
    several_trials = trials_collide(run.results["records"])
    # Whole names, never cut: the column is as wide as the longest.
    width = max([12, *(len(scenario(r, several_trials)) for r in run.results["records"])])
    print(f"{'source':16s} {'dataset':{width}s} {'status':10s} {'samples/s':>10s} {'MB/s':>8s} {'AU %':>6s} {'e2e %':>6s} "
          f"{'1st batch s':>11s} {'billable s':>10s}")
    for r in run.results["records"]:
        m = r["metrics"]
        print(f"{source(r):16s} {scenario(r, several_trials):{width}s} {r['status']:10s} {num(m.get('samples_per_second')):>10s} "
              f"{num(m.get('mb_per_second')):>8s} {num(job_au_percent(m)):>6s} {num(m.get('end_to_end_efficiency_percent')):>6s} "
              f"{num(m.get('time_to_first_batch_seconds'), 2):>11s} {num(r['billable_seconds'], 0):>10s}")
    from ..report import aggregate as _rows, data_records, workload_lines
    for line in workload_lines(run.results.get("experiment", {}), _rows(data_records(run.results["records"])), ignored=False):
        print(line.removeprefix("- ").replace("**", "").replace("`", ""))
    t = run.timings
    training = sum((r["phases"] or {}).get("Training", 0.0) for r in run.results["records"])
    if t.get("total"):
        # Jobs run side by side (max_concurrency): their Training phases can add up to more than the jobs' wall time.
        side_by_side = training > t.get("jobs", 0)
        share = f"Training phases {training:.1f} s" + (" in all, side by side" if side_by_side else "")
        print(f"wall time {t['total']:.1f} s: set-up {t.get('setup', 0):.1f} s, data preparation {t.get('data', 0):.1f} s, "
              f"jobs {t.get('jobs', 0):.1f} s ({share}), reporting {t.get('reporting', 0):.1f} s"
              + ("" if side_by_side else f"; lab overhead {100 * (1 - training / t['total']):.0f}% of the wall time"))
    from ..report import Answers, aggregate, answer_lines, checkpoint_lines
    print()
    print("the answer (as report.md's ## Answer; local seconds are this machine's, not AWS's):")
    answers = Answers(run.results, aggregate(data_records(run.results["records"])))
    for line in answer_lines(answers, bold=str, heading=lambda label: f"{label}:"):
        print(f"  {line}" if line else "")
    for line in checkpoint_lines(run.results, answers):   # the checkpoint section's answer, its table left to the report
        if line.startswith("|"):
            break
        if not line.startswith(">"):
            print(f"  {line.replace('**', '').replace('### ', '').replace('## ', '')}" if line else "")
    print(f"report: {Path(args.out) / 'report.html'} (also report.md, results.json, results.csv, breakdown.png)")
    return 0 if run.execution_status == "SUCCEEDED" else 1


def register(sub) -> None:
    p = add_command(sub, "local", cmd_local, "Run the whole lab offline on the embedded AWS stand-in and write its report.",
                    "dslab local --out lab-out --experiment experiments/local.yaml")
    p.add_argument("--experiment", help=f"experiment YAML (default {Path('experiments/local.yaml')}; with --workload "
                   "alone, the workload's dataset and compute on the five SageMaker sources)")
    from .question import add_instance_flags, add_workload_flags
    add_workload_flags(p)
    add_instance_flags(p)   # the experiment's instance_type, instance_count and epochs, for every trial
    p.add_argument("--out", required=True)
    p.add_argument("--cache", help="where datasets and templates are kept between runs (default .lab-cache)")
    p.add_argument("--plain", action="store_true", help="a line per job change instead of the live table on a terminal")
    p.add_argument("--repeats", type=whole(1, MAX_REPEATS), help="run every job this many times, whatever the file says "
                   "(MLPerf Storage reports the mean of 5 runs; from 3 the report gives a 95%% interval)")
    p.add_argument("--redeploy", action="store_true", help="deploy the stacks into the stand-in with the CDK CLI even "
                   "where the last run's deployment of the same templates is saved (it is reused by default)")
    p.add_argument("--fresh", action="store_true", help="start over where --out holds an interrupted run (by default "
                   "it resumes: the completed jobs are kept and only the others run, under the same names)")
