"""``dslab estimate`` and ``recommend``: seconds and dollars per source before running, and which source to pick,
on one premise (question.py) that every answer prints first."""

from __future__ import annotations

from typing import Any

from ..core.errors import ConfigError
from .asked import Asked, ask
from .common import add_command, lab_provisioning, print_ignored, print_json
from .question import add_question_flags, workload_json


def _print_answer_json(asked, result) -> None:
    workload = asked.question.workload
    print_json({**result.to_dict(), **({"workload": workload_json(workload)} if workload else {})})


def cmd_estimate(args) -> int:
    return show_estimate(ask(args))


def cmd_recommend(args) -> int:
    return show_recommend(ask(args))


def show_estimate(asked: Asked) -> int:
    """`estimate`'s view of what it was asked: the checkpoint answer, the experiment's jobs priced, or every source's
    row of the one answer (those --mode and --storage name shown; every source still answered, so the first line and
    each figure are the same whatever is shown)."""
    from ..core.answer.answer import answer
    from .render import estimate_lines, print_lines
    if asked.checkpoint is not None:
        from . import checkpoints
        return checkpoints.show(asked.checkpoint, json=asked.json, explain=asked.explain, commands=False)
    if asked.experiment is not None:
        return _estimate_experiment(asked)
    result = answer(asked.question)
    if asked.json:
        _print_answer_json(asked, result)
        return 0
    print_lines(estimate_lines(result, lambda s: (s.mode, s.storage) in asked.shown, explain=asked.explain))
    print_ignored([asked.question.workload], brief=not asked.explain)
    return 0


def show_recommend(asked: Asked) -> int:
    from ..core.answer.answer import answer
    from .render import print_lines, recommend_lines
    if asked.experiment is not None:
        return _recommend_experiment(asked)
    if asked.checkpoint is not None:
        from . import checkpoints
        return checkpoints.show(asked.checkpoint, json=asked.json, explain=asked.explain, commands=False)
    result = answer(asked.question)
    if asked.json:
        _print_answer_json(asked, result)
        return 0
    print_lines(recommend_lines(result, explain=asked.explain))
    print_ignored([asked.question.workload], brief=not asked.explain)
    return 0


def experiment_answers(experiment, prices=None, *, stats: dict[str, Any] | None = None,
                       stats_source: str = "a run's results", lab=None):
    """The answer per scenario of an experiment: what recommend --experiment prints and what export exports by
    default (core/answer/scenarios.py, as the report), priced on ``lab`` (default: the lab as deployed)."""
    from ..core.answer import scenarios
    from ..core.facts.prices import PriceTable
    lab = lab or lab_provisioning()
    return scenarios.estimated(experiment, prices or PriceTable(), stats=stats, stats_source=stats_source, lab=lab)


def _estimate_experiment(asked: Asked) -> int:
    """Every data job of an experiment priced before it runs, and what each job's phases will measure (the constants
    they rest on): how a calibration run (experiments/calibrate.yaml) is checked before it is paid for."""
    from ..core import measured
    from .render import print_lines, table
    e = asked.experiment
    experiment, prices, stats, lab = e.experiment, e.prices, e.stats, e.lab
    planned = measured.planned_jobs(experiment, prices, stats=stats, lab=lab)
    if not planned:
        raise ConfigError("--experiment", f"{e.path} runs no data job (checkpoint trials: `dslab estimate "
                          "--workload`)")
    # Each job's figures are the one answer's (the job on the lab as it stands, as `plan` and `run` size it); a job
    # plan refuses is marked refused, with plan's reason, and priced nowhere.
    from ..core.answer.scenarios import EXPERIMENT_RULE, job_checks
    from .render import fit, lab_line, wrap
    checks = {check.key: check for check in job_checks(experiment, prices, stats=stats, lab=lab)}
    words = measured.ranged_constants()
    rows, total, low, high, out, refused = [], 0.0, 0.0, 0.0, [], []
    for job, repeats in planned:
        check = checks.get((job.trial, job.dataset, job.mode, job.storage))
        problem = check.problem if check is not None else None
        if check is None or problem:
            why = problem[1] if problem else "its dataset's size is not known here"
            refused.append(f"{job.trial or ''} {job.dataset} {job.source}: {why}".strip())
            rows.append([job.trial or "", job.dataset, job.source, f"{job.premise.instance_count} x "
                         f"{job.premise.instance_type}", str(repeats), "refused", "-", "-", "plan refuses it (below)"])
            out.append({"trial": job.trial, "dataset": job.dataset, "source": job.source, "repeats": repeats,
                        "refused": why})
            continue
        estimate = check.source.deployed_estimate
        rests = measured.rests_on(job, prices, experiment.calibration.model)
        measures = sorted({words[n].what if n in words else n for p, n in rests.items()
                           if n and job.measured[p] >= measured.MIN_PHASE_SECONDS and _its_own(words, n, job.source)})
        usd = estimate.cost_usd["total"]
        total, low, high = total + usd * repeats, low + estimate.range.usd_low * repeats, high + estimate.range.usd_high * repeats
        rows.append([job.trial or "", job.dataset, job.source, f"{job.premise.instance_count} x {job.premise.instance_type}",
                     str(repeats), f"{estimate.billable_seconds / 60:,.1f} min", f"${usd:,.2f}", f"${usd * repeats:,.2f}",
                     "; ".join(measures)])
        out.append({"trial": job.trial, "dataset": job.dataset, "source": job.source, "repeats": repeats,
                    "instance_type": job.premise.instance_type, "instance_count": job.premise.instance_count,
                    "estimate": estimate.to_dict(), "measures": measures})
    if asked.json:
        print_json({"experiment": experiment.name, "rule": EXPERIMENT_RULE, "lab": lab.to_dict(), "jobs": out,
                    "total_usd": round(total, 2), "total_range_usd": [round(low, 2), round(high, 2)],
                    "refused": len(refused), "calibration": experiment.calibration.to_dict()})
        return 0
    lines = table(["trial", "dataset", "source", "instances", "runs", "billable", "$ each", "$ all", "measures"], rows,
                  right=(4, 5, 6, 7))
    for line in refused:   # plan's own words
        lines += wrap(f"refused: {line}", indent="")
    jobs = sum(r for _, r in planned)
    priced = f"{jobs} jobs" if not refused else f"{jobs - len(refused)} of {jobs} jobs ({len(refused)} refused)"
    lines += [fit(f"{priced}: ${total:,.2f} (${low:,.2f}-${high:,.2f}), the jobs alone (set-up, a file system's "
                  "hours and Express's copy: `dslab recommend --experiment`)"),
              lab_line(f"priced: {EXPERIMENT_RULE}", lab, set()),
              fit(f"constants: {experiment.calibration.describe()}")]
    print_lines(lines)
    return 1 if refused else 0


# The sources a constant's words name as its own ("FSx's mount", "FastFile listing"): a job measures only its own.
_OWNERS = ("Express", "FastFile", "File", "Pipe", "FSx", "EFS", "Script")


def _its_own(words, name: str, source: str) -> bool:
    """Whether the constant ``name`` is one ``source``'s job measures: a constant named for another source is not,
    though the model may use it for this one (an EFS job's mount is not FSx's)."""
    what = words[name].what if name in words else name
    owner = next((o for o in _OWNERS if what.startswith((f"{o}'s ", f"{o} "))), None)
    return owner is None or owner in source.split()


def _recommend_experiment(asked: Asked) -> int:
    from .render import print_lines, recommend_lines
    e = asked.experiment
    experiment, prices, stats, stats_source, lab = e.experiment, e.prices, e.stats, e.stats_source, e.lab
    found = experiment_answers(experiment, prices, stats=stats, stats_source=stats_source, lab=lab)
    names = sorted({a.scenario.dataset.name for a in found})
    if e.dataset and e.dataset not in names:
        raise ConfigError("--dataset", f"{e.dataset!r} is not a dataset of {e.path}", names)
    found = [a for a in found if not e.dataset or a.scenario.dataset.name == e.dataset]
    unanswered = [a for a in found if a.answer is None]
    from .checkpoints import trial_answer
    checkpoint_trials = [t for t in experiment.trials if t.checkpoint is not None] if not e.dataset else []
    if asked.json:
        checkpoints = [{"trial": t.name, "answer": trial_answer(t, lab, prices, experiment.calibration).to_dict()} for t in checkpoint_trials]
        print_json({"experiment": experiment.name, "answers": [a.to_dict() for a in found], "lab": lab.to_dict(),
                    **({"checkpoints": checkpoints} if checkpoints else {})})
        return 1 if unanswered else 0
    for a in found:
        print(f"== {a.scenario.label} (trials {', '.join(a.scenario.trial_names)}; sources the experiment runs)")
        if a.answer is None:
            print(f"no answer: {a.missing}")
            continue
        print_lines(recommend_lines(a.answer, explain=asked.explain))
        print()
    from .checkpoints import print_trial_answer
    for trial in checkpoint_trials:   # a checkpoint trial's question: where its checkpoints go
        print_trial_answer(trial, lab, prices, explain=asked.explain, calibration=experiment.calibration)
        print()
    # No answer is not a success: a script that reads the exit status must not take "nothing" for a pick.
    return 1 if unanswered else 0


def register(sub) -> None:
    for name, handler, text, example in (
            ("estimate", cmd_estimate, "Predict Downloading / Training / Other seconds and dollars per mode.",
             "dslab estimate --files 30607 --bytes 1.1GB --instance ml.p3.2xlarge --compute-preset v100"),
            ("recommend", cmd_recommend, "Which data source to pick for a dataset, why, the runner-up, every source "
             "ranked by cost to a result (job plus set-up), and advice; with --experiment, the answer per dataset among "
             "the sources the experiment runs (what `dslab export` exports and the report answers).",
             "dslab recommend --files 1530350 --bytes 54GB --epochs 1\n"
             "  dslab recommend --experiment experiments/post-12-jobs.yaml")):
        p = add_command(sub, name, handler, text, example)
        add_question_flags(p, dataset_help="a folder or s3:// prefix to measure" + (
            "; with --experiment, one of its datasets by name" if name == "recommend" else ""))
        p.add_argument("--outputs", help="cdk-outputs.json of the deployed lab: its FSx and EFS as deployed are what is "
                       "priced (default: the cdk-outputs.json `make deploy` wrote here, with the cdk-outputs-fsx.json of a later "
                       "`make fsx-up`; without them, cdk.json's context)" + ("; with --experiment, also the stats file each dataset's "
                                                                 "upload wrote (needs credentials)" if name == "recommend" else ""))
        if name == "recommend":
            p.add_argument("--experiment", help="an experiment file: answer per dataset among the sources it runs")
        else:
            p.add_argument("--experiment", help="an experiment file: every data job it runs priced before it runs, "
                           "and the constants each job's phases measure")
        p.add_argument("--results", help="with --experiment: a run's results.json, whose dataset sizes (what the run "
                       "read) the answer assumes")
        if name == "estimate":
            p.add_argument("--mode", help="one source: File, FastFile, Pipe, FSx, EFS, Script, or as printed "
                           "(\"Express FastFile\")")
            p.add_argument("--storage", choices=["standard", "express"],
                           help="where the S3 modes read (default: both, the general purpose bucket and S3 Express One Zone)")
        else:
            p.add_argument("--random-access", action="store_true")
            p.add_argument("--data-in-efs", action="store_true")
            p.add_argument("--portable-script", action="store_true",
                           help="one training script for SageMaker, EC2 and EKS, or data that must stay where it is: "
                                "only sources such a script can read (it reads S3 itself; FSx linked to S3)")
