"""``dslab estimate`` and ``recommend``: seconds and dollars per source before running, and which source to pick."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.estimate import MAX_COMPUTE_RATE
from ..core.limits import MAX_ACCELERATORS, MAX_EPOCHS, MAX_VOLUME_SIZE_GB, none_too_long
from .common import add_command, explain_aws, lab_provisioning, price_table, print_json, real, whole


def workload_of(args):
    """The DLIO workload --workload names (core/dlio.py), at --scale; None without --workload. Its dataset and
    compute replace --dataset/--files/--bytes/--samples and --compute-preset/--compute-rate, which are refused beside it."""
    if getattr(args, "_workload", None) is not None:
        return args._workload
    path = getattr(args, "workload", None)
    if path is None:
        if getattr(args, "scale", None) is not None:
            raise ConfigError("--scale", "goes with --workload (the fraction of its files)")
        return None
    for flag in ("dataset", "files", "bytes", "samples", "compute_rate", "compute_preset"):
        if getattr(args, flag, None) is not None:
            raise ConfigError(f"--{flag.replace('_', '-')}", "comes from the workload file with --workload; drop it")
    from ..core.dlio import parse_workload
    from ..inputs.experiment_file import read_workload
    document, digest = read_workload(Path(path))
    try:
        workload = parse_workload(document, str(path))
    except ConfigError as err:
        raise err.with_source(str(path)) from None
    from dataclasses import replace
    workload = replace(workload, sha256=digest)
    args._workload = workload.with_scale(args.scale) if getattr(args, "scale", None) is not None else workload
    return args._workload


def workload_json(workload) -> dict[str, Any]:
    return {"file": workload.source, "sha256": workload.sha256, "model": workload.name, "scale": workload.scale,
            "files": workload.files, "samples": workload.samples, "bytes": workload.bytes,
            "samples_per_second_per_accelerator": round(workload.rate, 3), "epochs": workload.epochs,
            "au_target_percent": workload.au_percent, "used": list(workload.used), "ignored": list(workload.ignored)}


def print_workload(workload) -> None:
    print(workload.describe())
    print_ignored([workload])


def print_ignored(workloads) -> None:
    """The DLIO fields the lab does not use, one line each (core/dlio.py ignored_lines), as every command that takes
    a workload prints them."""
    from ..core.dlio import ignored_lines
    for line in ignored_lines(workloads):
        print(line)


def add_accelerators_flag(p) -> None:
    """--accelerators, as size, estimate and recommend take it."""
    p.add_argument("--accelerators", type=whole(1, MAX_ACCELERATORS),
                   help="accelerators per instance, each at the compute's rate (default: the instance table's)")


def accelerators_per_instance(args, instance_type: str) -> int:
    """--accelerators, else the instance table's count (at least one: a CPU type emulates one)."""
    from ..core.requests import accelerators_of
    return getattr(args, "accelerators", None) or accelerators_of(instance_type)


def _shape(args):
    from ..core.estimate import DatasetShape
    workload = workload_of(args)
    if workload is not None:
        return workload.shape()
    if args.dataset and (args.files or args.bytes):
        raise ConfigError("--dataset", "give either --dataset or --files with --bytes, not both")
    if args.dataset:
        from ..inputs.datasets import stats
        info = stats(args.dataset)
        return DatasetShape(files=info["files"], bytes=info["bytes"], samples=args.samples)
    if not (args.files and args.bytes):
        raise ConfigError("--files/--bytes", "give --dataset PATH|s3://..., or both --files N and --bytes B")
    from ..inputs.datasets import parse_size
    return DatasetShape(files=args.files, bytes=parse_size(args.bytes, "--bytes"), samples=args.samples)


def _estimate_kwargs(args) -> dict[str, Any]:
    from ..core.estimate import compute_rate
    args.instance = args.instance or "ml.p3.2xlarge"
    args.epochs_given = args.epochs   # a workload's epochs stand unless --epochs says otherwise
    args.epochs = 1 if args.epochs is None else args.epochs
    from ..aws.validation import instance_type_problem
    if instance_type_problem(args.instance):
        raise ConfigError("--instance", instance_type_problem(args.instance))
    prices = price_table(args.prices)
    prices.require_instance(args.instance, "--instance")
    count = 1 if args.instance_count is None else args.instance_count
    kwargs = {"instance_type": args.instance, "epochs": args.epochs, "prices": prices, "instance_count": count,
              "volume_size_gb": 100 if args.volume_size_gb is None else args.volume_size_gb}
    if getattr(args, "accelerators", None) is not None:
        kwargs["accelerators"] = args.accelerators
    workload = workload_of(args)
    if workload is not None:
        # As DLIO emulates it: batch_size every computation_time per accelerator, read_threads readers each.
        if getattr(args, "epochs_given", None) is None:
            kwargs["epochs"] = workload.epochs
        kwargs.update(rate=workload.rate, readers=workload.readers(accelerators_per_instance(args, args.instance)))
        return kwargs, workload.describe()
    # The instance's accelerator decides the default compute, refused where no preset emulates it (estimate.py).
    rate, rate_note = compute_rate(args.compute_preset, args.compute_rate, instance_type=args.instance)
    return {**kwargs, "rate": rate}, rate_note


def cmd_estimate(args) -> int:
    from ..core.estimate import estimate_all
    from ..core.modes import MODES, parse_source
    shape = _shape(args)
    kwargs, rate_note = _estimate_kwargs(args)
    lab = lab_provisioning(args)
    from ..core.modes import EXPRESS, S3_READ_MODES
    modes, storage = MODES, args.storage
    if args.mode:
        # A mode ("fastfile") or a source as the tool prints it ("Express FastFile"); "did you mean" otherwise.
        mode, label_storage = parse_source(args.mode)
        if label_storage and storage not in (None, label_storage):
            raise ConfigError("--storage", f"--mode {args.mode!r} reads S3 Express One Zone: drop --storage {storage}")
        modes, storage = (mode,), label_storage or storage
    if storage == "express":
        from ..core.estimate import estimate_mode
        bad = [m for m in modes if m not in S3_READ_MODES]
        if args.mode and bad:
            raise ConfigError("--storage", f"{bad[0]} reads its own file system, not S3 Express One Zone",
                              list(S3_READ_MODES))
        estimates = [estimate_mode(m, shape, storage=EXPRESS, provisioning=lab, **kwargs) for m in modes if m in S3_READ_MODES]
    else:
        # Without --storage the S3 modes are shown on both buckets (unless one mode was asked for).
        estimates = estimate_all(shape, modes=modes, express=storage is None and not args.mode, provisioning=lab, **kwargs)
    for e in estimates:
        e.assumptions.insert(0, rate_note)
    from ..core.decision import option_from_estimate, usd
    from ..report import duration
    options = [option_from_estimate(e, shape, kwargs["prices"], fsx_capacity_gib=lab.fsx.capacity_gib,
                                    volume_size_gb=kwargs["volume_size_gb"]) for e in estimates]
    # A job past SageMaker's 28-day MaxRuntimeInSeconds would be stopped: flagged, refused when none fits.
    too_long = none_too_long({e.source: o.job_seconds for e, o in zip(estimates, options)})
    if args.json:
        print_json({"estimates": [{**e.to_dict(), "setup": {"usd": round(o.setup.usd, 4), "seconds": round(o.setup.seconds, 1),
                                                             "what": o.setup.what},
                                    "cost_to_result_usd": round(o.cost_usd, 4), "time_to_result_seconds": round(o.seconds, 1),
                                    "over_max_runtime": e.source in too_long}
                                   for e, o in zip(estimates, options)], "prices": kwargs["prices"].label(),
                    "lab": lab.to_dict(),
                    **({"workload": workload_json(workload_of(args))} if workload_of(args) else {})})
        return 0
    print(f"{shape.files:,} files, {shape.bytes / 1e9:.2f} GB, {kwargs['epochs']} epoch(s) on {args.instance}; {rate_note}")
    print_ignored([workload_of(args)])
    print(f"{'source':17s} {'download':>9s} {'training':>9s} {'other':>7s} {'billable':>9s} {'job':>9s} {'set-up':>9s} "
          f"{'to a result':>11s} {'time':>8s}  bound")
    for e, o in sorted(zip(estimates, options), key=lambda pair: pair[1].cost_usd):
        print(f"{e.source:17s} {e.downloading:9.0f} {e.training:9.0f} {e.other:7.0f} {e.billable_seconds:9.0f} "
              f"{usd(o.job_usd):>9s} {usd(o.setup.usd):>9s} {usd(o.cost_usd):>11s} {duration(o.seconds):>8s}  {e.bound}")
    if too_long:
        print(f"over SageMaker's 28-day limit on a training job (StoppingCondition.MaxRuntimeInSeconds), SageMaker would "
              f"stop them: {', '.join(too_long)}; fewer epochs or samples, or more instances (--instance-count)")
    print(f"priced on {lab.describe()}")
    print("set-up: paid once per run before or beside the job (EFS: the DataSync copy; Express: the staging copy; "
          "FSx: its uptime while it imports); `dslab recommend` picks from these")
    print(kwargs["prices"].label())
    return 0


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
    from ..core.decision import usd, usd_difference
    from ..report import duration
    d = rec.decision
    print(f"{heading}: {d.pick.source} ({_describe_source(d.pick.mode, d.pick.storage)}): {usd(d.pick.cost_usd)} per run, "
          f"{duration(d.pick.seconds)} to a result")
    print(f"  why: {d.why}")
    if d.runner_up is not None:
        print(f"  runner-up: {d.runner_up.source}: {usd(d.runner_up.cost_usd)} per run "
              f"({usd_difference(d.runner_up.cost_usd - d.pick.cost_usd)}), {duration(d.runner_up.seconds)} to a result")
    chart = "; ".join(rec.flowchart)
    agrees = "agrees" if rec.flowchart_source == d.pick.mode and d.pick.storage == "standard" else \
        f"the estimates pick {d.pick.source} instead, for the reason above"
    print(f"  the post's flowchart: {chart} ({agrees})")
    print("ranking by cost to a result (the job plus its set-up), cheapest first:")
    print(f"  {'#':>2s}  {'source':17s} {'job':>9s} {'set-up':>9s} {'to a result':>11s} {'time':>8s}  {'bound':8s} note")
    for i, o in enumerate(d.ranking, 1):
        print(f"  {i:2d}  {o.source:17s} {usd(o.job_usd):>9s} {usd(o.setup.usd):>9s} {usd(o.cost_usd):>11s} "
              f"{duration(o.seconds):>8s}  {o.bound or '-':8s} {d.note(o)}")
    for source, why in d.blocked.items():
        print(f"  --  {source:17s} cannot serve it: {why}")
    for line in rec.advice:
        print(f"advice: {line}")
    if rec.break_even is not None:
        print(f"FSx against Express FastFile, by epochs: {rec.break_even.sentence()}")


def cmd_recommend(args) -> int:
    from ..core.recommend import recommend
    if args.experiment:
        return _recommend_experiment(args)
    if getattr(args, "results", None):
        raise ConfigError("--results", "goes with --experiment (the datasets whose sizes it measures)")
    shape = _shape(args)
    kwargs, rate_note = _estimate_kwargs(args)
    lab = lab_provisioning(args)
    workload = workload_of(args)
    if workload is not None:
        kwargs["au_target"] = workload.au_percent
    result = recommend(shape, random_access=args.random_access, data_in_efs=args.data_in_efs,
                       portable=args.portable_script, lab=lab, **kwargs)
    if args.json:
        print_json({**result.to_dict(), **({"workload": workload_json(workload)} if workload else {})})
        return 0
    print(f"{shape.files:,} files, {shape.bytes / 1e9:.2f} GB, {kwargs['epochs']} epoch(s) on {args.instance}; {rate_note}")
    print_ignored([workload])
    print_recommendation(result)
    print(f"priced on {lab.describe()}")
    print(kwargs["prices"].label())
    return 0


def experiment_answers(experiment, prices=None, fsx_capacity_gib: int | None = None, *,
                       stats: dict[str, Any] | None = None, stats_source: str = "a run's results", lab=None):
    """The estimated answer per scenario of an experiment: what recommend --experiment prints and what
    export exports by default (dslab/core/answers.py, as the report), priced on ``lab`` (default: the lab as
    cdk.json builds it, FSx at ``fsx_capacity_gib`` when given)."""
    from ..core import answers
    from ..core.prices import PriceTable
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
    for flag in ("files", "bytes", "samples", "compute_rate", "compute_preset", "random_access", "data_in_efs",
                 "portable_script", "instance", "instance_count", "accelerators",
                 "epochs", "volume_size_gb"):
        if getattr(args, flag, None):
            raise ConfigError(f"--{flag.replace('_', '-')}", "comes from the experiment file with --experiment; drop it")
    prices = price_table(args.prices)
    experiment = load_experiment(Path(args.experiment), prices=prices, workload=Path(args.workload) if args.workload else None,
                                 scale=args.scale)
    stats, stats_source = measured_stats(args, experiment)
    lab = lab_provisioning(args)
    found = experiment_answers(experiment, prices, stats=stats, stats_source=stats_source, lab=lab)
    names = sorted({a.scenario.dataset.name for a in found})
    if args.dataset and args.dataset not in names:
        raise ConfigError("--dataset", f"{args.dataset!r} is not a dataset of {args.experiment}", names)
    found = [a for a in found if not args.dataset or a.scenario.dataset.name == args.dataset]
    unanswered = [a for a in found if a.recommendation is None]
    if args.json:
        print_json({"experiment": experiment.name, "answers": [a.to_dict() for a in found], "lab": lab.to_dict()})
        return 1 if unanswered else 0
    print(f"priced on {lab.describe()}")
    for a in found:
        print(f"== {a.scenario.label} (trials {', '.join(a.scenario.trial_names)}; sources the experiment runs)")
        if a.recommendation is None:
            print(f"no answer: {a.missing}")
            continue
        print(f"assumed: {a.known.describe()}")
        print_recommendation(a.recommendation)
        print()
    # No answer is not a success: a script that reads the exit status must not take "nothing" for a pick.
    return 1 if unanswered else 0


def add_workload_flags(p) -> None:
    """--workload and --scale, as size, estimate, recommend, plan, run and local take them."""
    p.add_argument("--workload", help="a DLIO workload file as MLPerf Storage publishes it (dlio_benchmark/configs/"
                   "workload/*.yaml): its dataset, compute (batch_size every computation_time per accelerator), epochs, "
                   "read_threads and AU target (metric.au)")
    p.add_argument("--scale", type=real(0, 1), help="with --workload: the fraction of its files (record sizes kept; "
                   "default 1)")


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
        p.add_argument("--dataset", help="a folder or s3:// prefix to measure" + (
            "; with --experiment, one of its datasets by name" if name == "recommend" else ""))
        p.add_argument("--files", type=whole(1))
        p.add_argument("--bytes", help="total size, e.g. 1.1GB")
        p.add_argument("--samples", type=whole(1), help="samples in the dataset (default: files, or bytes / 35.9 KB for large files)")
        p.add_argument("--instance", help="training instance type (default ml.p3.2xlarge)")
        p.add_argument("--instance-count", type=whole(1, 4096), help="instances of the job (default 1): they share each epoch")
        add_accelerators_flag(p)
        p.add_argument("--compute-rate", type=real(0, MAX_COMPUTE_RATE), help="samples per second one accelerator consumes")
        p.add_argument("--compute-preset", help="v100, a100 or h100 (default: the instance's accelerator; V100 on "
                       "ml.p3.2xlarge; without one, give --compute-rate)")
        p.add_argument("--epochs", type=whole(1, MAX_EPOCHS), help="epochs per job (default 1)")
        p.add_argument("--volume-size-gb", type=whole(1, MAX_VOLUME_SIZE_GB), help="the training volume (default 100)")
        p.add_argument("--fsx-capacity", type=whole(1200), help="FSx for Lustre size in GiB (default: fsxCapacity in cdk.json, else 1200)")
        add_workload_flags(p)
        p.add_argument("--prices", help="YAML file overriding prices")
        p.add_argument("--json", action="store_true")
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
