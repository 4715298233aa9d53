"""What `estimate`, `recommend` and `size` were asked, read from the command line once (``ask``): the flags, the files
they name (--workload, --experiment, --prices, --calibration, --outputs, --results, --dataset) and the lab as it
stands, turned into an ``Asked``. Every refusal of bad input is raised here, before anything is answered; the views
(advice.py, size.py, checkpoints.py) take the ``Asked`` and never the namespace."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from .common import explain_aws, lab_provisioning, price_table
from .question import checkpoint_question_of, experiment_overrides, is_checkpoint_question, question_of

ESTIMATE, RECOMMEND, SIZE = "estimate", "recommend", "size"

# The flags an experiment file answers for itself: with --experiment, each is refused naming itself.
ESTIMATE_EXPERIMENT_REFUSES = ("files", "bytes", "samples", "compute_rate", "compute_preset", "accelerators",
                               "volume_size_gb", "fsx_capacity", "mode", "storage", "checkpoint_every", "keep", "dataset")
RECOMMEND_EXPERIMENT_REFUSES = ("files", "bytes", "samples", "compute_rate", "compute_preset", "random_access",
                                "data_in_efs", "portable_script", "accelerators", "volume_size_gb", "fsx_capacity",
                                "checkpoint_every", "keep")


@dataclass(frozen=True)
class ExperimentAsked:
    """An experiment file's question (--experiment): its trials on the lab as it stands, with the datasets' sizes as
    measured where the flags point at them (--results, --outputs)."""
    path: str
    experiment: Any            # core/experiment.py Experiment, the flags' overrides applied
    prices: Any                # core/facts/prices.py PriceTable
    lab: Any                   # core/model/provisioning.py LabProvisioning
    stats: dict[str, Any] | None
    stats_source: str
    dataset: str | None = None   # recommend --dataset NAME: one of its datasets


@dataclass(frozen=True)
class Asked:
    """One command's question, whole. Exactly one of ``question`` (a dataset's), ``checkpoint`` (a checkpointing
    --workload's) and ``experiment`` is set; the rest says how the answer is shown."""
    command: str
    json: bool = False
    explain: bool = False
    question: Any = None         # core/answer/answer.py Question
    checkpoint: Any = None       # core/answer/checkpoints.py CheckpointQuestion
    experiment: ExperimentAsked | None = None
    shown: frozenset[tuple[str, str]] | None = None   # estimate --mode/--storage: the sources whose rows are shown
    as_deployed: bool = False    # size --as-deployed: every source on the lab as it stands


def ask(args) -> Asked:
    """The command line of `estimate`, `recommend` or `size`, read: the one place their namespace is read."""
    view = {"command": args.command, "json": bool(args.json), "explain": bool(args.explain)}
    if args.command == SIZE:
        return _ask_size(args, view)
    if args.command == ESTIMATE and args.experiment and (args.workload or args.scale is not None):
        # One would be dropped: the experiment's jobs are priced, or the workload's question answered, not both.
        flag = "--workload" if args.workload else "--scale"
        raise ConfigError(flag, "estimate --experiment prices the experiment file's own jobs: name the workload in the "
                          "file (workload: PATH), or drop --experiment to ask about the workload alone")
    if args.command == RECOMMEND and args.experiment:
        return Asked(**view, experiment=_experiment(args, RECOMMEND_EXPERIMENT_REFUSES))
    if args.command == RECOMMEND and args.results:
        raise ConfigError("--results", "goes with --experiment (the datasets whose sizes it measures)")
    prices = price_table(args.prices)
    if is_checkpoint_question(args):
        return Asked(**view, checkpoint=checkpoint_question_of(args, prices))
    if args.command == RECOMMEND:
        return Asked(**view, question=question_of(args, prices))
    if args.experiment:
        return Asked(**view, experiment=_experiment(args, ESTIMATE_EXPERIMENT_REFUSES, prices))
    if args.results:
        raise ConfigError("--results", "goes with --experiment (the datasets whose sizes it measures)")
    shown = frozenset(_sources(args))   # before the question: a --mode that names no source is refused first
    return Asked(**view, question=question_of(args, prices), shown=shown)


def _ask_size(args, view: dict[str, Any]) -> Asked:
    if is_checkpoint_question(args):
        if args.as_deployed:
            raise ConfigError("--as-deployed", "`dslab estimate --workload` gives every checkpoint target as the lab stands")
        return Asked(**view, checkpoint=checkpoint_question_of(args, price_table(args.prices)))
    prices = price_table(args.prices)
    if args.instance is not None:
        _check_sized(args.instance, prices)
    return Asked(**view, question=question_of(args, prices), as_deployed=bool(args.as_deployed))


def _check_sized(instance: str, prices) -> None:
    """`size` answers for the instances its table holds: refused the way estimate and recommend refuse first (a type
    SageMaker lacks, no price), then a type the table lacks (did you mean)."""
    from ..core.facts.instances import INSTANCES
    from .question import check_instance
    check_instance(instance, prices)
    if instance not in INSTANCES:
        import difflib
        close = difflib.get_close_matches(instance, INSTANCES, n=2)
        raise ConfigError("--instance", f"{instance!r} is not in the instance table (dslab/core/facts/instances.py)"
                          + (f"; did you mean {' or '.join(close)}?" if close else ""), sorted(INSTANCES))


def _experiment(args, refused: tuple[str, ...], prices=None) -> ExperimentAsked:
    from ..inputs.experiment_file import load_experiment
    for flag in refused:
        if getattr(args, flag, None):
            raise ConfigError(f"--{flag.replace('_', '-')}", "comes from the experiment file with --experiment; drop it")
    prices = prices or price_table(args.prices)
    workload = getattr(args, "workload", None)
    experiment = load_experiment(Path(args.experiment), prices=prices, workload=Path(workload) if workload else None,
                                 scale=getattr(args, "scale", None), overrides=experiment_overrides(args))
    stats, stats_source = measured_stats(args, experiment)
    return ExperimentAsked(path=args.experiment, experiment=experiment, prices=prices, lab=lab_provisioning(args),
                           stats=stats, stats_source=stats_source,
                           dataset=args.dataset if args.command == RECOMMEND else None)


def _sources(args) -> tuple[tuple[str, str], ...]:
    """The sources `estimate` shows: every one (the S3 modes on both buckets), or those --mode and --storage name."""
    from ..core.answer.recommend import ALL_SOURCES
    from ..core.modes import EXPRESS, MODES, S3_READ_MODES, STANDARD, parse_source
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

        from ..workflow.common import is_missing
        s3, found = boto3.client("s3"), {}
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


def _lab_as_it_stands(args):
    """The lab the answer and the checks price: the stand-in's outputs with --offline (read quietly: a refusal is its
    one line), else the outputs file or cdk.json (lab_provisioning)."""
    from .common import OFFLINE_OUTPUTS, outputs_from_file
    if args.offline:
        return lab_provisioning(args, outputs=outputs_from_file(OFFLINE_OUTPUTS), where="the stand-in's stack outputs")
    return lab_provisioning(args)


def _environment(args):
    """The lab's bucket, role, network and images its requests name, from its stack outputs (--offline: the
    stand-in's)."""
    from .common import environment_from_outputs, lab_outputs, region_of
    return environment_from_outputs(lab_outputs(args), region_of(args))


@dataclass(frozen=True)
class ExportAsked:
    """What `dslab export` was asked: the experiment (the flags' overrides applied) with every job plan would refuse
    refused, the lab the answer prices and its outputs, and which job to export."""
    experiment_path: str
    experiment: Any              # core/experiment.py Experiment
    lab: Any                     # the lab as it stands (the stand-in's outputs with --offline)
    runtimes: dict               # each job's MaxRuntimeInSeconds, as `dslab plan` asks (answer/jobs.py max_runtimes)
    env: Any                     # core/requests.py LabEnvironment, from the lab's outputs
    s3: Any = None               # an S3 client where --upload puts the code package
    trial: str | None = None
    dataset: str | None = None
    mode: str | None = None
    repeat: int | None = None
    results: str | None = None
    out: str | None = None


def ask_export(args) -> ExportAsked:
    """`dslab export`'s command line, read: the experiment, --repeat within it, a job plan refuses refused (before
    the outputs are read, which may need credentials), then the lab's outputs."""
    from ..inputs.experiment_file import load_experiment
    from .common import region_of
    experiment = load_experiment(Path(args.experiment), overrides=experiment_overrides(args))
    if args.repeat is not None and not 0 <= args.repeat < experiment.repeats:
        raise ConfigError("--repeat", f"{args.repeat} is not a repeat of the experiment", f"0..{experiment.repeats - 1}")
    # Names the file must hold, checked before --upload sends the code package (the view picks the job from them).
    datasets = sorted(d.name for d in experiment.datasets)
    if args.dataset and args.dataset not in datasets:
        raise ConfigError("--dataset", f"{args.dataset!r} is not a dataset of the experiment", datasets or None)
    trials = [t.name for t in experiment.trials]
    if args.trial and args.trial not in trials:
        raise ConfigError("--trial", f"{args.trial!r} is not a trial of the experiment", trials)
    lab = _lab_as_it_stands(args)
    runtimes = check_jobs(experiment, lab=lab)   # what `dslab plan` refuses, refused before anything is written
    env = _environment(args)
    s3 = None
    if args.upload:
        import boto3
        s3 = boto3.client("s3", region_name=region_of(args))
    return ExportAsked(experiment_path=args.experiment, experiment=experiment, lab=lab, runtimes=runtimes, env=env, s3=s3,
                       trial=args.trial, dataset=args.dataset, mode=args.mode, repeat=args.repeat, results=args.results,
                       out=args.out)


def check_jobs(experiment, stats=None, lab=None) -> dict[tuple[str, str, str, str], int]:
    """Refuse what the answer says cannot run as planned (core/answer/scenarios.py checked_jobs): a source the lab as
    it stands cannot run (FSx too small to hold the data), a job past SageMaker's 28 days, a max_run_seconds shorter
    than the top of the job's estimate; a checkpoint job whose target cannot hold its checkpoints, or that would run
    past 28 days. Returns each job's MaxRuntimeInSeconds, data and checkpoint jobs alike (requests.runtime_key),
    sized from the estimate where the experiment does not set it. Where a
    dataset's size is not known here, the workflow's Plan checks it from its stats file."""
    from ..core.answer.jobs import checked_jobs, max_runtimes
    from ..core.facts.prices import PriceTable
    lab = lab if lab is not None else lab_provisioning()
    return max_runtimes(checked_jobs(experiment, PriceTable(), stats=stats, lab=lab))


def experiment_of(args, **kwargs):
    """The experiment --experiment names, with --workload (and --scale) added, or --workload's own experiment; and
    the file its relative paths are read from (plan, run, local)."""
    from ..inputs.experiment_file import load_experiment
    if not args.experiment and not args.workload:
        raise ConfigError("--experiment", "give an experiment file, or --workload with a DLIO workload file")
    path = Path(args.experiment) if args.experiment else None
    workload = Path(args.workload) if args.workload else None
    return (load_experiment(path, workload=workload, scale=args.scale, overrides=experiment_overrides(args), **kwargs),
            path or workload)


@dataclass(frozen=True)
class PlanAsked:
    """What `dslab plan` was asked: the experiment and the file its paths are read from, with every job that cannot run
    as planned refused; the lab the checks price, the lab's outputs, and how to show the plan."""
    experiment: Any
    where: Path
    lab: Any
    runtimes: dict
    env: Any
    execution: str
    json: bool = False


def ask_plan(args) -> PlanAsked:
    """`dslab plan`'s command line, read: a job that cannot run as planned is refused before the outputs are read."""
    experiment, where = experiment_of(args)
    lab = _lab_as_it_stands(args)
    runtimes = check_jobs(experiment, lab=lab)   # what cannot run as planned, refused before a request is built
    env = _environment(args)
    return PlanAsked(experiment=experiment, where=where, lab=lab, runtimes=runtimes, env=env, execution=args.execution,
                     json=bool(args.json))


__all__ = ["Asked", "ExperimentAsked", "ExportAsked", "PlanAsked", "ask", "ask_export", "ask_plan", "experiment_of",
           "check_jobs", "measured_stats", "ESTIMATE", "RECOMMEND", "SIZE"]
