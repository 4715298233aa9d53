"""``dslab export``: one job of an experiment as ready-to-run SageMaker Python SDK code (dslab/aws/export.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.modes import lab_mode
from .advice import experiment_answers
from .asked import ExportAsked, ask_export
from .common import BUILD_DIR, add_command, whole


def cmd_export(args) -> int:
    return show_export(ask_export(args))


def show_export(asked: ExportAsked) -> int:
    """One job of the experiment, as the lab would request it, printed as SageMaker Python SDK code. It exports what
    `dslab plan` would run, and only that: a job plan refuses is refused (cli/asked.py ask_export), with the same
    line; a job the answer prices on a provisioning the lab lacks is exported as it runs on the lab, its code saying
    so in two comments."""
    from ..aws.export import generate
    # Your own code is packaged as `dslab plan` and `dslab run` package it (byte-reproducibly): the
    # request names its content-addressed URI; --upload puts it there (the same object `dslab run` uploads).
    from ..inputs import user_code
    experiment, env = asked.experiment, asked.env
    prepared = user_code.prepare(experiment, Path(asked.experiment_path), env.bucket, BUILD_DIR, s3_client=asked.s3)
    checkpoint_trial = _checkpoint_trial(experiment, asked)
    if checkpoint_trial is not None:
        job, notes = _checkpoint_job(prepared, checkpoint_trial, asked)
    else:
        job, notes = _data_job(experiment, prepared, asked)
    code = generate(job.request, env.region)
    if notes:   # after the header's three comment lines: how the job runs, and what the answer would provision
        header, rest = code.split("\n", 3)[:3], code.split("\n", 3)[3]
        code = "\n".join([*header, *(f"# {note}" for note in notes), rest])
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    script = job.spec.trial.script
    if script is not None and asked.s3 is None:
        print(f"note: the job runs your code from {script.code_uri}; it is there once `dslab run` ran this trial, "
              "or put it there now with --upload", file=sys.stderr)
    what = (f"{job.spec.target} checkpoints of {job.spec.trial.name}" if job.spec.target else
            f"{job.spec.mode} on {job.spec.dataset.name}")
    runtime = job.request["StoppingCondition"]["MaxRuntimeInSeconds"]
    if asked.out:
        Path(asked.out).write_text(code)
        print(f"wrote {asked.out}: job {job.name} ({what}, MaxRuntimeInSeconds {runtime:,}); run it with: "
              f"python {asked.out} [--wait]", file=sys.stderr)
    else:
        sys.stdout.write(code)
    return 0


def _checkpoint_trial(experiment, asked: ExportAsked):
    """The checkpoint trial to export: --trial naming one, or the experiment's first where it reads no dataset."""
    named = [t for t in experiment.trials if t.name == asked.trial] if asked.trial else []
    if named and named[0].checkpoint is not None:
        if asked.dataset:
            raise ConfigError("--dataset", f"trial {asked.trial} writes checkpoints: it reads no dataset; drop --dataset")
        return named[0]
    if not asked.trial and not experiment.datasets:
        return next(t for t in experiment.trials if t.checkpoint is not None)
    return None


def _checkpoint_job(experiment, trial, asked: ExportAsked):
    """A checkpoint trial's writer job for --mode's target (s3, express, fsx, efs, or as printed: "S3 sync"), or the
    target the answer picks (`dslab recommend --experiment`): CheckpointConfig for the sync targets, a read-write
    channel for FSx and EFS."""
    from ..core.answer.checkpoints import trial_checkpoint_answer
    from ..core.facts.prices import PriceTable
    from ..core.modes import CHECKPOINT_TARGET_LABELS
    from ..core.requests import plan
    if asked.results:
        raise ConfigError("--results", f"trial {trial.name} writes checkpoints: --results exports a data job; drop it")
    targets = trial.checkpoint.targets
    answer = trial_checkpoint_answer(trial, asked.lab, PriceTable(), experiment.calibration)
    if asked.mode:
        by_name = {**{k: k for k in CHECKPOINT_TARGET_LABELS}, **{v.lower(): k for k, v in CHECKPOINT_TARGET_LABELS.items()}}
        target = by_name.get(asked.mode.strip().lower())
        if target not in targets:
            raise ConfigError("--mode", f"trial {trial.name} writes no checkpoints to {asked.mode!r}", list(targets))
    else:
        usable = [t for t in answer.targets if t.usable and t.target in targets]
        if not usable:
            raise ConfigError("--mode", f"no target of trial {trial.name} keeps up: {answer.why}; give --mode", list(targets))
        target = usable[0].target
        print(f"recommended for {trial.name}: {usable[0].label} (as `dslab recommend --experiment {asked.experiment_path}`); "
              "--mode chooses another", file=sys.stderr)
    found = answer.target(target)
    notes = []
    if found.estimate.settings:   # the answer provisions a file system the lab has not got: the job runs on the lab's
        notes = [f"runs on the lab as it stands: {found.deployed.provision}; ${found.deployed.usd_per_day:,.2f} a day",
                 f"the answer provisions {found.label} as {found.estimate.provision}: {found.estimate.command()}"]
    repeat = asked.repeat or 0
    jobs = [j for j in plan(experiment, asked.env, "export", runtimes=asked.runtimes)
            if j.spec.trial.name == trial.name and j.spec.target == target
            and not j.spec.restore and j.spec.repeat == repeat]
    if not jobs or jobs[0].request is None:
        raise ConfigError("--mode", f"the {target} job of {trial.name} is skipped: {jobs[0].skip_reason if jobs else 'none'}",
                          list(targets))
    return jobs[0], notes


def _data_job(experiment, prepared, asked: ExportAsked):
    """A data job: --results' measured pick, --mode's source, or the answer's pick, on the lab as it stands."""
    from ..core.modes import MODES, lab_mode, parse_source
    from ..core.requests import plan
    datasets = {d.name: d for d in experiment.datasets}
    dataset = datasets[asked.dataset or next(iter(datasets))]   # an unknown --dataset was refused by ask_export
    readers = [t for t in experiment.trials if dataset.name in (d.name for d in t.datasets)]
    trials = [t for t in readers if not asked.trial or t.name == asked.trial]
    if not trials:
        raise ConfigError("--trial", f"no trial {asked.trial!r} reads {dataset.name}", [t.name for t in readers])
    modes = [m for m in MODES if any(m in t.modes for t in trials)]
    # A mode, or a source as the tool prints it ("Express FastFile": the trial on the directory bucket).
    mode, asked_storage = parse_source(asked.mode) if asked.mode else (None, None)
    execution, record, storage = "export", None, asked_storage
    answers = experiment_answers(experiment, lab=asked.lab)   # what `dslab recommend --experiment` gives, computed once
    if asked.results:
        if asked.repeat is not None:
            raise ConfigError("--repeat", "--results picks the job (the cheapest completed one); "
                              "drop --repeat, or drop --results to choose the job yourself")
        record, execution = _cheapest_completed(Path(asked.results), experiment, dataset.name, mode, asked.trial)
        mode, storage = lab_mode(record), record.get("storage") or None
    elif mode is None:
        mode, storage = _recommended_source(answers, asked.experiment_path, dataset, asked.trial)
    if mode not in modes:
        raise ConfigError("--mode", f"the experiment does not run {mode} on {dataset.name}", modes)
    if asked_storage and not record and not any(mode in t.modes and (t.storage or "standard") == asked_storage
                                                for t in trials):
        # "Express File" where no trial reads File from the directory bucket: the answer has no such source.
        raise ConfigError("--mode", f"the experiment does not run {asked.mode} on {dataset.name}: no trial reads the "
                          "directory bucket", _sources_run(trials, dataset.name))
    notes = _as_deployed(answers, dataset, trials, mode, storage) if record is None else []
    trials = [next(t for t in prepared.trials if t.name == trial.name) for trial in trials]
    repeat = record["repeat"] if record else (asked.repeat or 0)
    jobs = [j for j in plan(prepared, asked.env, execution, runtimes=asked.runtimes)
            if j.spec.dataset.name == dataset.name and j.spec.mode == mode
            and j.spec.repeat == repeat and j.spec.trial in trials
            and (storage is None or (j.spec.trial.storage or "standard") == storage)]
    if not jobs:  # only a results file of another experiment gets here
        raise ConfigError("--results", f"the experiment has no {mode} job of {dataset.name}, repeat {repeat}")
    # A results record names its job (a capacity retry adds "-a<N>"): that job's trial, not just the first.
    job = next((j for j in jobs if record and record["job_name"].startswith(j.name)), jobs[0])
    if job.request is None:
        raise ConfigError("--mode", f"the {mode} job of {dataset.name} is skipped: {job.skip_reason}",
                          [m for m in modes if m != mode] or None)
    return job, notes


def _sources_run(trials, dataset: str) -> list[str]:
    """The sources the trials run on the dataset, as the tool prints them ("Express FastFile")."""
    from ..core.modes import source_label
    return list(dict.fromkeys(source_label(m, t.storage or "standard") for t in trials for m in t.modes
                              if dataset in (d.name for d in t.datasets)))


def _as_deployed(answers, dataset, trials, mode: str, storage: str | None) -> list[str]:
    """What `dslab plan` runs, export exports: the job as it runs on the lab as it stands (its MaxRuntimeInSeconds from
    that). Where the answer's figures assume a provisioning the lab lacks, two comment lines say how it runs and
    priced at what, and what the answer provisions, with the command (issue 55: export refused what plan ran)."""
    from ..core.answer.decision import duration, usd
    from ..core.answer.scenarios import for_dataset
    # The trial that runs this source (the first trial may read only the other bucket).
    trial = next((t for t in trials if mode in t.modes and (storage is None or (t.storage or "standard") == storage)),
                 trials[0])
    found = for_dataset(answers, dataset.name, trial.name)
    if found is None or found.answer is None:
        return []   # the size is not known here: nothing was priced, the plan's own checks stand
    source = found.answer.source(mode, storage or trial.storage or "standard")
    if not (source.differs and source.commands):
        return []
    d = source.deployed
    return [f"runs on the lab as it stands ({source.sized.deployed.get('premise') or 'as deployed'}): {usd(d.cost_usd)} "
            f"per run, {duration(d.seconds)} to a result",
            f"the answer prices {source.source} as {source.provisioned_as} ({usd(source.cost_usd)}): "
            f"{'; '.join(source.commands)}"]


def _recommended_source(answers, experiment_path: str, dataset, trial_name: str | None) -> tuple[str, str]:
    """The (mode, storage) `dslab recommend --experiment` picks for the dataset among the sources the
    experiment runs on it (the same answer the report gives)."""
    from ..core.answer.scenarios import for_dataset
    found = for_dataset(answers, dataset.name, trial_name)
    if found is None or found.answer is None:
        raise ConfigError("--mode", f"no answer for {dataset.name}: {found.missing if found else 'no trial reads it'}; "
                          "give --mode")
    from .render import premise_line, wrap
    pick = found.decision.pick
    for line in wrap(f"recommended for {found.scenario.label}: {pick.source} (as `dslab recommend --experiment "
                     f"{experiment_path} --dataset {dataset.name}`); --mode chooses another", indent=""):
        print(line, file=sys.stderr)
    print(premise_line(found.premise), file=sys.stderr)
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
    from .question import add_calibration_flag, add_instance_flags
    add_instance_flags(p)   # the experiment's instance_type, instance_count and epochs, for every trial
    add_calibration_flag(p)
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--offline", action="store_true", help="use the stand-in lab's stack outputs: no AWS account needed")
    p.add_argument("--region")
    p.add_argument("--mode", help="the job's mode, or a checkpoint trial's target (s3, express, fsx, efs) (default: what "
                   "`dslab recommend --experiment` picks)")
    p.add_argument("--dataset", help="the job's dataset (default: the experiment's first)")
    p.add_argument("--trial", help="the job's trial (default: the first that reads the dataset; with --results, "
                   "the trials whose answer to export, where the report gives the dataset more than one); a checkpoint "
                   "trial exports its writer job")
    p.add_argument("--repeat", type=whole(0), help="the job's repeat (default 0)")
    p.add_argument("--results", help="a finished run's results.json: export the job of the source its report picks")
    p.add_argument("--out", help="write the code to this file instead of printing it")
    p.add_argument("--upload", action="store_true",
                   help="with your own script (script.source_dir): upload its package to the content-addressed URI the code names")
