"""``dslab export``: one job of an experiment as ready-to-run SageMaker Python SDK code (dslab/aws/export.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.modes import lab_mode
from .advice import experiment_answers
from .common import (
    BUILD_DIR,
    add_command,
    environment_from_outputs,
    lab_outputs,
    region_of,
    whole,
)


def cmd_export(args) -> int:
    """One job of the experiment, as the lab would request it, printed as SageMaker Python SDK code."""
    from ..aws.export import generate
    from ..core.modes import MODES, parse_source
    from ..core.requests import plan
    from ..inputs.experiment_file import load_experiment
    from .question import experiment_overrides
    experiment = load_experiment(Path(args.experiment), overrides=experiment_overrides(args))
    datasets = {d.name: d for d in experiment.datasets}
    dataset = datasets.get(args.dataset or next(iter(datasets)))
    if dataset is None:
        raise ConfigError("--dataset", f"{args.dataset!r} is not a dataset of the experiment", sorted(datasets))
    readers = [t for t in experiment.trials if dataset.name in (d.name for d in t.datasets)]
    trials = [t for t in readers if not args.trial or t.name == args.trial]
    if not trials:
        raise ConfigError("--trial", f"no trial {args.trial!r} reads {dataset.name}", [t.name for t in readers])
    if args.repeat is not None and not 0 <= args.repeat < experiment.repeats:
        raise ConfigError("--repeat", f"{args.repeat} is not a repeat of the experiment", f"0..{experiment.repeats - 1}")
    modes = [m for m in MODES if any(m in t.modes for t in trials)]
    # A mode, or a source as the tool prints it ("Express FastFile": the trial on the directory bucket).
    mode, asked_storage = parse_source(args.mode) if args.mode else (None, None)
    outputs = lab_outputs(args)
    env = environment_from_outputs(outputs, region_of(args))
    # Your own code is packaged as `dslab plan` and `dslab run` package it (byte-reproducibly): the
    # request names its content-addressed URI; --upload puts it there (the same object `dslab run` uploads).
    from ..inputs import user_code
    s3 = None
    if args.upload:
        import boto3
        s3 = boto3.client("s3", region_name=region_of(args))
    experiment = user_code.prepare(experiment, Path(args.experiment), env.bucket, BUILD_DIR, s3_client=s3)
    trials = [next(t for t in experiment.trials if t.name == trial.name) for trial in trials]
    execution, record, storage = "export", None, asked_storage
    if args.results:
        if args.repeat is not None:
            raise ConfigError("--repeat", "--results picks the job (the cheapest completed one); "
                              "drop --repeat, or drop --results to choose the job yourself")
        record, execution = _cheapest_completed(Path(args.results), experiment, dataset.name, mode, args.trial)
        mode, storage = lab_mode(record), record.get("storage") or None
    elif mode is None:
        mode, storage = _recommended_source(experiment, args.experiment, dataset, args.trial)
    if mode not in modes:
        raise ConfigError("--mode", f"the experiment does not run {mode} on {dataset.name}", modes)
    repeat = record["repeat"] if record else (args.repeat or 0)
    jobs = [j for j in plan(experiment, env, execution) if j.spec.dataset.name == dataset.name and j.spec.mode == mode
            and j.spec.repeat == repeat and j.spec.trial in trials
            and (storage is None or (j.spec.trial.storage or "standard") == storage)]
    if not jobs and asked_storage and not record:
        raise ConfigError("--mode", f"the experiment does not run {args.mode} on {dataset.name}: no trial of it reads "
                          f"{mode} from the S3 Express One Zone bucket", modes)
    if not jobs:  # only a results file of another experiment gets here
        raise ConfigError("--results", f"the experiment has no {mode} job of {dataset.name}, repeat {repeat}")
    # A results record names its job (a capacity retry adds "-a<N>"): that job's trial, not just the first.
    job = next((j for j in jobs if record and record["job_name"].startswith(j.name)), jobs[0])
    if job.request is None:
        raise ConfigError("--mode", f"the {mode} job of {dataset.name} is skipped: {job.skip_reason}",
                          [m for m in modes if m != mode] or None)
    code = generate(job.request, env.region)
    script = job.spec.trial.script
    if script is not None and not args.upload:
        print(f"note: the job runs your code from {script.code_uri}; it is there once `dslab run` ran this trial, "
              "or put it there now with --upload", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(code)
        print(f"wrote {args.out}: job {job.name} ({mode} on {dataset.name}); run it with: python {args.out} [--wait]",
              file=sys.stderr)
    else:
        sys.stdout.write(code)
    return 0


def _recommended_source(experiment, experiment_path: str, dataset, trial_name: str | None) -> tuple[str, str]:
    """The (mode, storage) `dslab recommend --experiment` picks for the dataset among the sources the
    experiment runs on it (the same answer the report gives)."""
    from ..core.answer.scenarios import for_dataset
    answer = for_dataset(experiment_answers(experiment), dataset.name, trial_name)
    if answer is None or answer.recommendation is None:
        raise ConfigError("--mode", f"no answer for {dataset.name}: {answer.missing if answer else 'no trial reads it'}; "
                          "give --mode")
    pick = answer.decision.pick
    print(f"recommended for {answer.scenario.label}: {pick.source} (as `dslab recommend --experiment {experiment_path} "
          f"--dataset {dataset.name}`); --mode chooses another; {answer.premise.describe()}", file=sys.stderr)
    return pick.mode, pick.storage


def _cheapest_completed(path: Path, experiment, dataset: str, mode: str | None,
                        trial: str | None = None) -> tuple[dict[str, Any], str]:
    """The completed job of the source the report's answer picks for the dataset and trial (cost to a
    result; one answer per dataset and group of trials, as the report gives them), its cheapest repeat,
    and the run's execution."""
    from ..report import Answers, aggregate, load_results
    results = load_results(path)
    if results.get("experiment_hash") not in (None, experiment.content_hash):
        raise ConfigError("--results", f"{path} is a run of experiment hash {results['experiment_hash']}, not of "
                          f"--experiment ({experiment.content_hash}): give the experiment file that run used")
    done = [r for r in results["records"] if r["dataset"] == dataset and r["status"] == "Completed"
            and r["billable_seconds"] is not None and (mode is None or lab_mode(r) == mode)
            and not r.get("checkpoint_target")]   # a checkpoint job reads no dataset: nothing to export
    if not done:
        raise ConfigError("--results", f"{path} has no completed {mode or ''} job on {dataset}".replace("  ", " "),
                          sorted({r["dataset"] for r in results["records"] if r["status"] == "Completed"}) or None)
    decided = [m for m in Answers(results, aggregate(done)).measured if m.decision is not None]
    trials = sorted({t for m in decided for t in m.trials})
    if trial is not None:
        decided = [m for m in decided if trial in m.trials]
        if not decided:
            raise ConfigError("--trial", f"{path} has no completed job of trial {trial!r} on {dataset}", trials)
    elif len(decided) > 1:
        # The report answers each group of trials on its own: say which, rather than pick across them.
        raise ConfigError("--trial", f"the report answers {dataset} once per group of trials "
                          f"({'; '.join(m.label for m in decided)}): give --trial", trials)
    answer = decided[0]
    pick = answer.decision.pick
    best = min((r for r in done if lab_mode(r) == pick.mode and (r.get("storage") or "standard") == pick.storage
                and (not answer.trials or r.get("trial") in answer.trials)),
               key=lambda r: (r["cost_usd"]["total"], r["billable_seconds"]))
    print(f"the report's pick on {answer.label} in {path}: {pick.source}; its cheapest completed job {best['job_name']} "
          f"(${best['cost_usd']['total']:.4f})", file=sys.stderr)
    return best, results.get("execution") or "export"


def register(sub) -> None:
    p = add_command(sub, "export", cmd_export, "Print one job of an experiment (the recommended mode by default, or the "
                    "cheapest completed job of --results) as ready-to-run SageMaker Python SDK code: the lab's own request.",
                    "dslab export --experiment experiments/post-12-jobs.yaml --offline --out winner.py")
    p.add_argument("--experiment", required=True)
    from .question import add_instance_flags
    add_instance_flags(p)   # the experiment's instance_type, instance_count and epochs, for every trial
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--offline", action="store_true", help="use the stand-in lab's stack outputs: no AWS account needed")
    p.add_argument("--region")
    p.add_argument("--mode", help="the job's mode (default: what `dslab recommend --experiment` picks for the dataset)")
    p.add_argument("--dataset", help="the job's dataset (default: the experiment's first)")
    p.add_argument("--trial", help="the job's trial (default: the first that reads the dataset; with --results, "
                   "the trials whose answer to export, where the report gives the dataset more than one)")
    p.add_argument("--repeat", type=whole(0), help="the job's repeat (default 0)")
    p.add_argument("--results", help="a finished run's results.json: export the job of the source its report picks")
    p.add_argument("--out", help="write the code to this file instead of printing it")
    p.add_argument("--upload", action="store_true",
                   help="with your own script (script.source_dir): upload its package to the content-addressed URI the code names")
