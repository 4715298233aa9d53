"""``dslab estimate`` and ``recommend``: seconds and dollars per source before running, and which source to pick,
on one premise (question.py) that every answer prints first."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from .common import add_command, explain_aws, lab_provisioning, price_table, print_ignored, print_json
from .question import add_question_flags, is_checkpoint_question, premise_json, premise_of, workload_of


def _sources(args) -> tuple[tuple[str, str], ...]:
    """The sources `estimate` shows: every one (the S3 modes on both buckets), or those --mode and --storage name."""
    from ..core.modes import EXPRESS, MODES, S3_READ_MODES, STANDARD, parse_source
    from ..core.answer.recommend import ALL_SOURCES
    storage = args.storage
    if args.mode:
        # A mode ("fastfile") or a source as the tool prints it ("Express FastFile"); "did you mean" otherwise.
        mode, label_storage = parse_source(args.mode)
        if label_storage and storage not in (None, label_storage):
            raise ConfigError("--storage", f"--mode {args.mode!r} reads S3 Express One Zone: drop --storage {storage}")
        storage = label_storage or storage
        if storage == EXPRESS and mode not in S3_READ_MODES:
            raise ConfigError("--storage", f"{mode} reads its own file system, not S3 Express One Zone",
                              list(S3_READ_MODES))
        return ((mode, storage or STANDARD),)
    if storage is None:
        return ALL_SOURCES
    if storage == EXPRESS:
        return tuple((m, EXPRESS) for m in MODES if m in S3_READ_MODES)
    return tuple((m, STANDARD) for m in MODES)


def cmd_estimate(args) -> int:
    from ..core.answer.decision import usd
    from ..core.facts.limits import none_too_long
    from ..core.answer.recommend import options
    from ..report import duration
    prices = price_table(args.prices)
    if is_checkpoint_question(args):
        from . import checkpoints
        return checkpoints.cmd_estimate(args, prices)
    premise = premise_of(args, prices=prices)
    found = options(premise.shape, sources=_sources(args), lab=premise.lab, au_target=premise.au_target, prices=prices,
                    **premise.estimate_kwargs())
    for e, _ in ((e, o) for o, e in found):
        e.assumptions.insert(0, premise.compute)
    runnable = [(o, e) for o, e in found if not e.blocker]
    # A job past SageMaker's 28-day MaxRuntimeInSeconds would be stopped: flagged, refused when none fits.
    too_long = none_too_long({e.source: o.job_seconds for o, e in runnable}) if runnable else []
    if args.json:
        print_json({**premise_json(premise, workload_of(args)),
                    "estimates": [{**e.to_dict(), "setup": {"usd": round(o.setup.usd, 4), "seconds": round(o.setup.seconds, 1),
                                                             "what": o.setup.what},
                                   **({"cost_to_result_usd": round(o.cost_usd, 4),
                                       "cost_to_result_interval_usd": [round(v, 4) for v in o.cost_interval],
                                       "time_to_result_seconds": round(o.seconds, 1)} if not e.blocker else
                                      {"cost_to_result_usd": None, "time_to_result_seconds": None}),
                                   "over_max_runtime": e.source in too_long, **({"premise": o.premise} if o.premise else {})}
                                  for o, e in found], "prices": prices.label(), "lab": premise.lab.to_dict()})
        return 0
    print(premise.describe())
    print_ignored([workload_of(args)])
    print(f"{'source':17s} {'download':>9s} {'training':>9s} {'other':>7s} {'billable':>9s} {'job':>9s} {'set-up':>9s} "
          f"{'to a result':>11s} {'time':>8s}  bound")
    for o, e in sorted(runnable, key=lambda pair: pair[0].cost_usd):
        print(f"{e.source:17s} {e.downloading:9,.0f} {e.training:9,.0f} {e.other:7,.0f} {e.billable_seconds:9,.0f} "
              f"{usd(o.job_usd):>9s} {usd(o.setup.usd):>9s} {usd(o.cost_usd):>11s} {duration(o.seconds):>8s}  {e.bound}")
    print_ranges(runnable)
    for o, e in found:
        if e.blocker:
            print(f"{e.source:17s} cannot run as premised, not priced: {e.blocker}")
    for o, e in runnable:
        if o.premise:
            print(f"note: {o.premise}")
    if too_long:
        print(f"over SageMaker's 28-day limit on a training job (StoppingCondition.MaxRuntimeInSeconds), SageMaker would "
              f"stop them: {', '.join(too_long)}; fewer epochs or samples, or more instances (--instance-count)")
    print("set-up: paid once per run before or beside the job (EFS: the DataSync copy; Express: the staging copy; "
          "FSx: its uptime while it imports); `dslab recommend` picks from these")
    print(prices.footer())
    return 0


def print_ranges(runnable) -> None:
    """Each estimate's range (billable seconds, cost to a result) and its evidence, then each range it names once."""
    from ..core.answer.decision import usd
    from ..core.model.calibration import CALIBRATION_INSTANCE
    print("where one run may fall (each estimate's range: billable seconds, cost to a result), and why:")
    said = {}
    for o, e in sorted(runnable, key=lambda pair: pair[0].cost_usd):
        r = e.range
        seconds = f"{r.billable_low:,.0f}-{r.billable_high:,.0f} s"
        dollars = f"{usd(o.cost_interval[0])}-{usd(o.cost_interval[1])}"
        print(f"  {e.source:17s} {seconds:>17s} {dollars:>15s}  {r.summary()}")
        for a, value, _ in r.moves:
            said.setdefault(a.what, a.describe(value))
    print(f"  out-of-sample: each of Bencher's 4 measured scenarios ({CALIBRATION_INSTANCE}, one epoch) predicted by the "
          "model fitted on the other 3 (dslab/core/model/calibration.py); a source without a measured cell takes the widest")
    for text in said.values():
        print(f"  range: {text}")


def cost_range(option) -> str:
    """" ($0.36-$0.41)" for an estimate with its range, "" otherwise."""
    from ..core.answer.decision import usd
    if option.cost_interval is None or option.runs:
        return ""
    return f" ({usd(option.cost_interval[0])}-{usd(option.cost_interval[1])})"


SOURCE_DESCRIPTIONS = {
    "File": "Amazon S3, File mode: the job copies the dataset onto its volume first",
    "FastFile": "Amazon S3, FastFile mode: the job streams files from S3 as it reads them",
    "Pipe": "Amazon S3, Pipe mode: the job reads each channel as one stream",
    "FSx": "FSx for Lustre linked to the S3 bucket",
    "EFS": "Amazon EFS, the dataset copied into it first",
    "Script": "Amazon S3 read by the training script itself (no input channel)",
}


def _describe_source(mode: str, storage: str) -> str:
    text = SOURCE_DESCRIPTIONS[mode]
    if storage == "express":
        text = text.replace("Amazon S3", "S3 Express One Zone (a directory bucket in the instances' zone)", 1)
    return text


def print_recommendation(rec, *, heading: str = "recommended") -> None:
    """A recommendation as `dslab recommend` prints it: the pick, why, the runner-up, the ranking, advice."""
    from ..core.answer.decision import usd, usd_difference
    from ..report import duration
    d = rec.decision
    print(f"{heading}: {d.pick.source} ({_describe_source(d.pick.mode, d.pick.storage)}): {usd(d.pick.cost_usd)} per run"
          f"{cost_range(d.pick)}, {duration(d.pick.seconds)} to a result")
    print(f"  why: {d.why}")
    if d.runner_up is not None:
        print(f"  runner-up: {d.runner_up.source}: {usd(d.runner_up.cost_usd)} per run{cost_range(d.runner_up)} "
              f"({usd_difference(d.runner_up.cost_usd - d.pick.cost_usd)}), {duration(d.runner_up.seconds)} to a result")
    if d.noise:
        print(f"  precision: {d.noise}")
    chart = "; ".join(rec.flowchart)
    agrees = "agrees" if rec.flowchart_source == d.pick.mode and d.pick.storage == "standard" else \
        f"the estimates pick {d.pick.source} instead, for the reason above"
    print(f"  the post's flowchart: {chart} ({agrees})")
    print("ranking by cost to a result (the job plus its set-up), cheapest first:")
    print(f"  {'#':>2s}  {'source':17s} {'job':>9s} {'set-up':>9s} {'to a result':>11s} {'range':>15s} {'time':>8s}  "
          f"{'bound':8s} note")
    for i, o in enumerate(d.ranking, 1):
        print(f"  {i:2d}  {o.source:17s} {usd(o.job_usd):>9s} {usd(o.setup.usd):>9s} {usd(o.cost_usd):>11s} "
              f"{cost_range(o).strip(' ()'):>15s} {duration(o.seconds):>8s}  {o.bound or '-':8s} {d.note(o)}")
    for source, why in d.blocked.items():
        print(f"  --  {source:17s} cannot serve it: {why}")
    for line in rec.advice:
        print(f"advice: {line}")
    if rec.break_even is not None:
        print(f"FSx against Express FastFile, by epochs: {rec.break_even.sentence()}")


def cmd_recommend(args) -> int:
    from ..core.answer.recommend import recommend
    if args.experiment:
        return _recommend_experiment(args)
    if getattr(args, "results", None):
        raise ConfigError("--results", "goes with --experiment (the datasets whose sizes it measures)")
    prices = price_table(args.prices)
    if is_checkpoint_question(args):
        from . import checkpoints
        return checkpoints.cmd_recommend(args, prices)
    premise = premise_of(args, prices=prices)
    result = recommend(premise.shape, random_access=args.random_access, data_in_efs=args.data_in_efs,
                       portable=args.portable_script, lab=premise.lab, au_target=premise.au_target, prices=prices,
                       **premise.estimate_kwargs())
    if args.json:
        print_json({**premise_json(premise, workload_of(args)), **result.to_dict()})
        return 0
    print(premise.describe())
    print_ignored([workload_of(args)])
    print_recommendation(result)
    print(prices.footer())
    return 0


def experiment_answers(experiment, prices=None, fsx_capacity_gib: int | None = None, *,
                       stats: dict[str, Any] | None = None, stats_source: str = "a run's results", lab=None):
    """The estimated answer per scenario of an experiment: what recommend --experiment prints and what
    export exports by default (dslab/core/answer/scenarios.py, as the report), priced on ``lab`` (default: the lab as
    cdk.json builds it, FSx at ``fsx_capacity_gib`` when given)."""
    from ..core.answer import scenarios as answers
    from ..core.facts.prices import PriceTable
    lab = lab or lab_provisioning()
    if fsx_capacity_gib is not None:
        lab = lab.with_fsx_capacity(fsx_capacity_gib)
    return answers.estimated(experiment, prices or PriceTable(), stats=stats, stats_source=stats_source,
                             fsx_capacity_gib=lab.fsx.capacity_gib, lab=lab)


def measured_stats(args, experiment) -> tuple[dict[str, Any] | None, str]:
    """The datasets' files and bytes as measured, where the user points at them: a run's results.json
    (--results: what the run read), or the stats files an upload wrote beside each dataset in the lab's bucket
    (--outputs: the bucket from cdk deploy's outputs file; needs credentials)."""
    if getattr(args, "results", None):
        from ..report import load_results
        results = load_results(Path(args.results))
        return results.get("dataset_stats") or {}, f"the run's results in {args.results}"
    if getattr(args, "outputs", None):
        import json as _json
        from ..core.requests import DATASETS_PREFIX, stats_key
        from ..inputs.experiment_file import read_json_file
        outputs = read_json_file(Path(args.outputs), "--outputs")
        bucket = next((stack.get("BucketName") for stack in outputs.values() if isinstance(stack, dict)
                       and stack.get("BucketName")), None)
        if not bucket:
            raise ConfigError("--outputs", f"{args.outputs} names no BucketName: give the file `make deploy` wrote "
                              "(cdk-outputs.json)")
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError
        s3, found = boto3.client("s3"), {}
        from ..workflow.common import is_missing
        for dataset in experiment.datasets:
            try:
                body = s3.get_object(Bucket=bucket, Key=stats_key(f"{DATASETS_PREFIX}/{dataset.prefix}"))["Body"].read()
                found[dataset.name] = _json.loads(body)
            except ClientError as err:
                if not is_missing(err):   # not read (throttled, refused): said; the experiment's own figures stand
                    print(f"dslab: dataset '{dataset.name}': its stats file was not read ({explain_aws(err)}); the "
                          "experiment's own figures stand", file=sys.stderr)
                continue   # not uploaded yet: the experiment's own figures stand
            except (BotoCoreError, ValueError):
                continue
        return found, f"the stats file its upload wrote in s3://{bucket}"
    return None, "a run's results"


def _recommend_experiment(args) -> int:
    from ..inputs.experiment_file import load_experiment
    from .question import experiment_overrides
    for flag in ("files", "bytes", "samples", "compute_rate", "compute_preset", "random_access", "data_in_efs",
                 "portable_script", "accelerators", "volume_size_gb", "fsx_capacity", "checkpoint_every", "keep"):
        if getattr(args, flag, None):
            raise ConfigError(f"--{flag.replace('_', '-')}", "comes from the experiment file with --experiment; drop it")
    prices = price_table(args.prices)
    experiment = load_experiment(Path(args.experiment), prices=prices, workload=Path(args.workload) if args.workload else None,
                                 scale=args.scale, overrides=experiment_overrides(args))
    stats, stats_source = measured_stats(args, experiment)
    lab = lab_provisioning(args)
    found = experiment_answers(experiment, prices, stats=stats, stats_source=stats_source, lab=lab)
    names = sorted({a.scenario.dataset.name for a in found})
    if args.dataset and args.dataset not in names:
        raise ConfigError("--dataset", f"{args.dataset!r} is not a dataset of {args.experiment}", names)
    found = [a for a in found if not args.dataset or a.scenario.dataset.name == args.dataset]
    unanswered = [a for a in found if a.recommendation is None]
    if args.json:
        from .checkpoints import trial_answer
        checkpoints = [{"trial": t.name, **dict(zip(("premise", "answer"), (p.to_dict(), a.to_dict())))}
                       for t in experiment.trials if t.checkpoint is not None for p, a in [trial_answer(t, lab, prices)]]
        print_json({"experiment": experiment.name, "answers": [a.to_dict() for a in found], "lab": lab.to_dict(),
                    **({"checkpoints": checkpoints} if checkpoints else {})})
        return 1 if unanswered else 0
    for a in found:
        print(f"== {a.scenario.label} (trials {', '.join(a.scenario.trial_names)}; sources the experiment runs)")
        if a.recommendation is None:
            print(f"no answer: {a.missing}")
            continue
        print(a.premise.describe())
        print_recommendation(a.recommendation)
        print()
    from .checkpoints import print_trial_answer
    for trial in experiment.trials if not args.dataset else ():   # a checkpoint trial's question: where they go
        if trial.checkpoint is not None:
            print_trial_answer(trial, lab, prices)
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
