"""The answer per dataset of an experiment: which source to pick, estimated before a run and measured
after one. `dslab recommend --experiment`, `dslab export` (its default job), the report and
`dslab local` all call these functions, so they name the same source from the same inputs.

A scenario is one dataset read by trials that differ only in where the S3 modes read (the lab's
bucket or the directory bucket): their sources compete for one answer. Trials that differ in
anything else (instance type, epochs, model, script) are scenarios of their own.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field as dataclass_field
from typing import Any, Iterable, Mapping

from ..errors import ConfigError
from .decision import Decision, decide, option_from_measured
from ..facts.instances import INSTANCES, instance_storage_gb
from ..facts.compute import COMPUTE_PRESETS, accelerator_kind, accelerators_of, compute_rate, describe_preset
from ..shape import DatasetShape
from .premise import Premise
from ..model.calibration import SHIPPED, InUse
from ..facts.limits import EXPERIMENT_RUNTIME_FIX, MAX_RUNTIME_SECONDS, runtime_problem
from ..experiment import Dataset, Experiment, Trial
from ..modes import EXPRESS, FILE, MODES, STANDARD
from ..facts.prices import PriceTable
from .answer import Answer, Question, SourceAnswer, answer


# The rule the experiment's commands state (plan, run, export, estimate --experiment): each job is the one answer's,
# on the lab as it stands, which is how it will run.
EXPERIMENT_RULE = "each job as it runs on the lab as it stands"


@dataclass(frozen=True)
class Scenario:
    dataset: Dataset
    trials: tuple[Trial, ...]
    label: str

    @property
    def trial_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.trials)

    @property
    def sources(self) -> tuple[tuple[str, str], ...]:
        """The (mode, storage) pairs the scenario's trials run, in the lab's order."""
        seen = {(m, t.storage or STANDARD) for t in self.trials for m in t.modes}
        return tuple(sorted(seen, key=lambda s: (s[1] == EXPRESS, MODES.index(s[0]))))


def _settings(trial: Trial) -> tuple:
    """What a job's cost depends on besides its source: trials equal here share one answer."""
    return (trial.instance_type, trial.instance_count, trial.volume_size_gb, trial.epochs, trial.compute,
            trial.script.entry_point if trial.script else None, trial.max_samples, trial.spot, s3_concurrency_of(trial))


def s3_concurrency_of(trial: Trial) -> int | None:
    """The GETs in flight the lab's script keeps in Script mode, where the trial sets them (its hyperparameter
    s3_concurrency, checked when the experiment was read); None: the script's default. A trial's own script reads
    what it reads: not this."""
    return trial.hyperparameters.get("s3_concurrency") if trial.script is None else None


def scenarios(experiment: Experiment) -> list[Scenario]:
    grouped: dict[tuple[str, tuple], list[Trial]] = defaultdict(list)
    datasets: dict[str, Dataset] = {}
    for trial in experiment.trials:
        for dataset in trial.datasets:
            datasets.setdefault(dataset.name, dataset)
            grouped[(dataset.name, _settings(trial))].append(trial)
    per_dataset: dict[str, int] = defaultdict(int)
    for name, _ in grouped:
        per_dataset[name] += 1
    out = []
    for (name, _), trials in grouped.items():
        label = name if per_dataset[name] == 1 else f"{name} · {'+'.join(t.name for t in trials)}"
        out.append(Scenario(datasets[name], tuple(trials), label))
    return out


def samples_of(dataset: Dataset) -> int | None:
    """Samples the dataset holds when its recipe says (images x copies, or a DLIO workload's files x samples per
    file); None lets the estimate assume."""
    if dataset.generate.get("samples_per_file"):
        return int(dataset.generate["files"]) * int(dataset.generate["samples_per_file"])
    images = dataset.generate.get("images")
    return int(images) * int(dataset.generate.get("copies", 1)) if images else None


# What `dslab dataset generate` makes when the recipe gives no mean_kb: Caltech-256's mean JPEG
# (inputs/datasets.py CALTECH_MEAN_KB); its shards default to DEFAULT_SHARD_MB (decimal MB, as pack counts).
GENERATE_MEAN_KB = 39.0
GENERATE_SHARD_MB = 110


def generated_shape(dataset: Dataset) -> DatasetShape | None:
    """The files and bytes a ``generate:`` recipe makes, predicted without making them: images x copies
    JPEGs of ``mean_kb`` KiB on average (the generator draws sizes around that mean), as files, or packed
    into shards of ``shard_size_mb`` MB for TFRecord."""
    recipe = dataset.generate
    samples = samples_of(dataset)
    if not samples:
        return None
    total = int(samples * float(recipe.get("mean_kb", GENERATE_MEAN_KB)) * 1024)
    if dataset.format == "jpg":
        files = samples
    else:
        files = max(1, -(-total // (int(recipe.get("shard_size_mb", GENERATE_SHARD_MB)) * 1_000_000)))
    return DatasetShape(files=files, bytes=total, samples=samples)


@dataclass(frozen=True)
class KnownShape:
    """A dataset's shape and where it came from, which every answer prints with the figures."""
    shape: DatasetShape
    source: str

    def describe(self) -> str:
        samples, _ = self.shape.sample_count()
        return (f"{self.shape.files:,} files, {self.shape.bytes / 1e6:,.1f} MB, {samples:,} samples "
                f"(from {self.source})")


def known_shape(dataset: Dataset, stats: Mapping[str, Any] | None = None,
                stats_source: str = "a run's results") -> KnownShape | None:
    """The dataset's files and bytes, from the first of: ``stats`` (a run's results, or the stats file an
    upload wrote: what was really in S3), the experiment's own files/bytes, its ``generate:`` recipe."""
    found = (stats or {}).get(dataset.name) or {}
    if found.get("files") and found.get("bytes"):
        return KnownShape(DatasetShape(files=int(found["files"]), bytes=int(found["bytes"]), samples=samples_of(dataset)),
                          stats_source)
    if dataset.files and dataset.bytes:
        return KnownShape(DatasetShape(files=int(dataset.files), bytes=int(dataset.bytes), samples=samples_of(dataset)),
                          "the experiment's files and bytes")
    generated = generated_shape(dataset)
    if generated is not None:
        mean = float(dataset.generate.get("mean_kb", GENERATE_MEAN_KB))
        return KnownShape(generated, f"its generate: recipe, predicted at ~{mean:g} KiB per image")
    return None


def shape_of(dataset: Dataset, stats: Mapping[str, Any] | None = None) -> DatasetShape | None:
    """The dataset's files and bytes: a run's stats (what was in S3) over the experiment's declaration."""
    known = known_shape(dataset, stats)
    return known.shape if known else None


UNKNOWN_SHAPE_FIX = ("give the dataset files: and bytes: (or a generate: recipe) in the experiment, upload it "
                     "(`dslab dataset upload` writes its stats file; then --outputs), or pass a run's --results")


def compute_rate_of(trial: Trial) -> float:
    """Samples per second the trial's model consumes (a real model without a measured rate: the V100 preset)."""
    compute = trial.compute
    if compute.seconds_per_batch:
        return compute.batch_size / compute.seconds_per_batch
    return compute_rate(compute.preset)[0]


def compute_said(trial: Trial) -> str:
    """The trial's compute in the words the CLI's premise uses (premise.describe_preset)."""
    compute = trial.compute
    if compute.model:
        return (f"{compute.model} trained for real; estimated at the V100 preset's {compute_rate('v100')[0]:,.0f} "
                "samples/s per accelerator")
    if compute.preset and compute.seconds_per_batch == COMPUTE_PRESETS[compute.preset]["seconds_per_batch"] \
            and compute.batch_size == COMPUTE_PRESETS[compute.preset]["batch_size"]:
        return describe_preset(compute.preset)
    rate = compute_rate_of(trial)
    if trial.workload is not None:
        return (f"{trial.workload.name} as DLIO emulates it: batch {compute.batch_size} every {compute.seconds_per_batch:g} s "
                f"= {rate:,.1f} samples/s per accelerator")
    return (f"batch {compute.batch_size} every {compute.seconds_per_batch:g} s = {rate:,.1f} samples/s per accelerator "
            "(the experiment's compute)")


def checkpoint_premise_of_trial(trial: Trial, lab: Any = None, calibration: InUse | None = None) -> Premise:
    """A checkpoint trial's question as `dslab estimate --workload` asks it: its plan on the trial's cluster, its
    checkpoints as far apart as it runs them, every checkpoint it writes kept (DLIO keeps each in its own folder)."""
    from .premise import CheckpointPremise
    plan = trial.checkpoint.plan(trial)
    workload = trial.checkpoint.workload
    return Premise(instance_type=trial.instance_type, instance_count=trial.instance_count,
                   accelerators=plan.gpus_per_host, epochs=1, rate=0.0, compute="no compute: checkpoints",
                   shape=DatasetShape(plan.files, max(1, plan.bytes)), shape_origin=workload.source, lab=lab,
                   volume_size_gb=trial.volume_size_gb, calibration=calibration or SHIPPED,
                   checkpoint=CheckpointPremise(plan, max(1.0, workload.interval_seconds), max(1, workload.writes)))


def premise_of_trial(trial: Trial, known: KnownShape, lab: Any = None, calibration: InUse = SHIPPED) -> Premise:
    """A trial's question on a dataset of a known shape, as the CLI's flags would ask it (cli/question.py), with the
    experiment's calibration (its ``calibration:`` key, or the shipped one)."""
    accelerators = trial.compute.accelerators or accelerators_of(trial.instance_type)
    readers = au_target = None
    notes: tuple[str, ...] = ()
    if trial.workload is not None:   # a DLIO workload: its readers per accelerator and its AU target
        readers, au_target = trial.workload.readers(accelerators), trial.workload.au_percent
        # Said where the trial's compute is the workload's timing as run on this accelerator (MLPerf's own timing
        # swapped in, or the file's kept): also from a record, which states every key.
        timed, said = trial.workload.on_accelerator(accelerator_kind(trial.instance_type))
        runs_it = (trial.compute.batch_size, trial.compute.seconds_per_batch) == (timed.batch_size, timed.computation_time)
        notes = (said,) if said and runs_it else ()
        row = INSTANCES.get(trial.instance_type)
        if row is not None:   # its file count against MLPerf Storage's for the trial's cluster (or refused: 0 steps)
            mlperf = trial.workload.mlperf_size(trial.instance_count, row.memory_gib,
                                                accelerators * trial.instance_count, field="instance_count")
            notes += (mlperf,) if mlperf else ()
    return Premise(instance_type=trial.instance_type, instance_count=trial.instance_count, accelerators=accelerators,
                   epochs=trial.epochs, rate=compute_rate_of(trial), compute=compute_said(trial), shape=known.shape,
                   shape_origin=known.source, lab=lab, volume_size_gb=trial.volume_size_gb, readers=readers,
                   s3_concurrency=s3_concurrency_of(trial), au_target=au_target if au_target is not None else 90.0,
                   # A workload's epochs are its file's, not a default.
                   defaults=frozenset(k for k in ("instance", "instance_count", "epochs")
                                      if {"instance": "instance_type"}.get(k, k) not in trial.given
                                      and not (k == "epochs" and trial.workload is not None)),
                   notes=notes, calibration=calibration)


@dataclass
class ScenarioAnswer:
    """A scenario's answer: the ``Answer`` to its first trial's question among the sources its trials run, on the
    dataset's shape as known (None, with what is missing, where the size is not known)."""
    scenario: Scenario
    answer: Answer | None
    missing: str | None = None
    known: KnownShape | None = None           # the shape it assumed, and where it came from

    @property
    def premise(self) -> Premise | None:
        return self.answer.premise if self.answer is not None else None

    @property
    def decision(self) -> Decision | None:
        return self.answer.decision if self.answer else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scenario": self.scenario.label, "dataset": self.scenario.dataset.name,
                               "trials": list(self.scenario.trial_names)}
        if self.known is not None:
            samples, _ = self.known.shape.sample_count()
            out["assumed"] = {"files": self.known.shape.files, "bytes": self.known.shape.bytes, "samples": samples,
                              "from": self.known.source}
        if self.answer is None:
            return {**out, "missing": self.missing}
        return {**out, "answer": self.answer.to_dict()}


def scenario_question(experiment: Experiment, scenario: Scenario, known: KnownShape, prices: PriceTable,
                      lab: Any = None) -> Question:
    """The question a scenario asks: its first trial's premise on the dataset's known shape, among the sources its
    trials run, with the experiment's own words for what makes a job too long."""
    trial = scenario.trials[0]
    premise = premise_of_trial(trial, known, lab, experiment.calibration)
    return Question(premise, prices, scenario.sources, data_in_efs=scenario.dataset.source == "efs",
                    runtime_field=runtime_field(experiment, trial), runtime_fix=EXPERIMENT_RUNTIME_FIX,
                    runtime_what=f"trial {trial.name}'s {{source}} job on {scenario.dataset.name}",
                    count_field=f"trial '{trial.name}': instance_count", dataset_name=scenario.dataset.name)


def estimated(experiment: Experiment, prices: PriceTable, *, stats: Mapping[str, Any] | None = None,
              stats_source: str = "a run's results", lab: Any = None) -> list[ScenarioAnswer]:
    """Each scenario's answer among the sources it runs, from the estimates (nothing measured), on the dataset's
    shape from ``known_shape`` (``stats``: a run's results or upload stats files, said as ``stats_source``)."""
    out = []
    for scenario in scenarios(experiment):
        known = known_shape(scenario.dataset, stats, stats_source)
        if known is None:
            out.append(ScenarioAnswer(scenario, None, f"the size of dataset {scenario.dataset.name} is not known: "
                                                      f"{UNKNOWN_SHAPE_FIX}"))
            continue
        out.append(ScenarioAnswer(scenario, answer(scenario_question(experiment, scenario, known, prices, lab)),
                                  known=known))
    return out


def runtime_field(experiment: Experiment, trial: Trial) -> str:
    """The experiment key that sets a trial's job length, as the parser names it (a trial's own, or the base's)."""
    if len(experiment.trials) == 1:
        return "epochs"
    return f"trials[{experiment.trials.index(trial)}].epochs"


def _max_run_field(experiment: Experiment, trial: Trial) -> str:
    if len(experiment.trials) == 1:
        return "max_run_seconds"
    return f"trials[{experiment.trials.index(trial)}].max_run_seconds"


@dataclass(frozen=True)
class JobCheck:
    """One planned data job as the answer sees it on the lab as it stands: what `dslab plan`, `run`, `local` and
    `export` refuse, and the MaxRuntimeInSeconds its request asks for."""
    trial: Trial
    dataset: str
    source: SourceAnswer
    field: str               # the experiment key that sets the job's length (a refusal past 28 days names it)
    max_run_field: str
    modes_field: str
    # The tops of the answer's other sources that can serve (one instance's clock), by label: a faster source to name
    others_top: Mapping[str, float] = dataclass_field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.trial.name, self.dataset, self.source.mode, self.source.storage)

    @property
    def what(self) -> str:
        return f"trial {self.trial.name}'s {self.source.source} job on {self.dataset}"

    @property
    def runtime_fix(self) -> str:
        """What brings a job past 28 days under: fewer epochs, and the quickest of the scenario's other sources that
        fits, by name (the top of its range)."""
        fits = [(top, label) for label, top in self.others_top.items() if top <= MAX_RUNTIME_SECONDS]
        if not fits:
            return EXPERIMENT_RUNTIME_FIX
        top, label = min(fits)
        return f"fewer epochs: or {label} (up to {top / 86400:,.1f} days)"

    @property
    def max_run_given(self) -> bool:
        return "max_run_seconds" in self.trial.given

    @property
    def max_runtime_seconds(self) -> int:
        """What the request asks for: the experiment's max_run_seconds where it says one, else from the estimate."""
        return self.trial.max_run_seconds if self.max_run_given else self.source.max_runtime_seconds

    @property
    def problem(self) -> tuple[str, str] | None:
        """(field, why) where this job cannot run as planned, else None."""
        deployed = self.source.deployed
        if deployed.blocker and self.source.mode == FILE and self.source.deployed_estimate.blocker:
            # File's share does not fit each instance's storage: the volume to raise, or (NVMe, fixed) the instances.
            key = "instance_count" if instance_storage_gb(self.trial.instance_type) else "volume_size_gb"
            return (self.modes_field.replace("modes", key), f"{self.what}: {deployed.blocker}")
        # Past 28 days at the top of its range (never capped below it): fewer epochs, or a source that fits.
        too_long = (None if self.source.deployed_estimate.blocker else
                    runtime_problem(self.source.top_job_seconds, self.what, self.runtime_fix,
                                    point_seconds=deployed.job_seconds))
        if too_long:
            return (self.field, too_long)
        if deployed.blocker:
            fix = "; ".join(self.source.commands) or "provision it as `dslab size` says"
            return (self.modes_field, f"{self.what}: {self.source.source} as the lab stands cannot run it "
                                      f"({deployed.blocker}): provision it first ({fix}), or drop {self.source.mode}")
        if self.max_run_given and self.trial.max_run_seconds < self.source.top_job_seconds:
            return (self.max_run_field,
                    f"{self.trial.max_run_seconds:,} s is shorter than {self.what} may take on AWS (up to "
                    f"{self.source.top_job_seconds / 3600:,.1f} h, the top of its estimate): SageMaker would stop it; "
                    f"give at least {self.source.max_runtime_seconds:,}, or leave it out (it is then sized from the "
                    "estimate)")
        return None


def job_checks(experiment: Experiment, prices: PriceTable, *, stats: Mapping[str, Any] | None = None,
               lab: Any = None) -> list[JobCheck]:
    """Every data job of the experiment whose dataset's size is known (``known_shape``), as its scenario's answer sees
    it on ``lab``: what `dslab plan`, `run`, `local` and `export` check before a request is built (a job SageMaker
    would stop is money without a result), and each request's MaxRuntimeInSeconds."""
    checks = []
    for found in estimated(experiment, prices, stats=stats, lab=lab):
        if found.answer is None:
            continue   # the workflow's Plan reads the stats file; nothing to estimate from here
        for trial in found.scenario.trials:
            for mode in trial.modes:
                source = found.answer.source(mode, trial.storage or STANDARD)
                index = experiment.trials.index(trial)
                others = {s.source: s.top_job_seconds for s in found.answer.sources
                          if s is not source and not s.deployed_estimate.blocker}
                checks.append(JobCheck(trial, found.scenario.dataset.name, source, runtime_field(experiment, trial),
                                       _max_run_field(experiment, trial),
                                       f"trials[{index}].modes" if len(experiment.trials) > 1 else "modes", others))
    return checks


def for_dataset(answers: Iterable[ScenarioAnswer], dataset: str, trial: str | None = None) -> ScenarioAnswer | None:
    return next((a for a in answers if a.scenario.dataset.name == dataset
                 and (trial is None or trial in a.scenario.trial_names)), None)


# ---- measured --------------------------------------------------------------------------------------

@dataclass
class MeasuredAnswer:
    dataset: str
    trials: tuple[str, ...]
    label: str
    decision: Decision | None
    missing: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scenario": self.label, "dataset": self.dataset, "trials": list(self.trials)}
        return {**out, **(self.decision.to_dict() if self.decision else {"missing": self.missing})}


def local_setup_seconds(measured: Mapping[str, float], mode: str, storage: str | None) -> float:
    """A source's set-up as a local run measured it (the workflow's PrepareData branch that prepares it: the copy
    into EFS, FSx's import, the Express staging copy); 0 for a source that prepares nothing."""
    if storage == EXPRESS:
        return float(measured.get("Express", 0.0))
    return float(measured.get(mode, 0.0)) if mode in ("EFS", "FSx") else 0.0


def measured(rows: list[dict[str, Any]], prices: PriceTable, *, shapes: Mapping[str, DatasetShape | None],
             fsx_capacity_gib: int = 1200, data_in_efs: Mapping[str, bool] | None = None,
             setup_time: bool = True, lab: Any = None,
             local_setup: Mapping[str, float] | None = None) -> list[MeasuredAnswer]:
    """Each report scenario's pick among the sources that completed, from their measured mean cost and
    time, with each source's set-up priced from the dataset's shape (rows of ``report.aggregate``)."""
    by_scenario: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_scenario[row["dataset"]].append(row)
    out = []
    for label, items in by_scenario.items():
        name = items[0]["dataset_name"]
        trials = tuple(sorted({t for r in items for t in r["trials"] if t}))
        done = [r for r in items if r["cost_total"] is not None and r["wall_mean"] is not None]
        if not done:
            out.append(MeasuredAnswer(name, trials, label, None, "no job completed"))
            continue
        options = [option_from_measured(r["mode_name"], r["storage"], r["cost_total"], r["wall_mean"], shapes.get(name),
                                        prices, fsx_capacity_gib=fsx_capacity_gib, fsx=lab.fsx if lab else None,
                                        data_in_efs=bool((data_in_efs or {}).get(name)),
                                        setup_time=setup_time if local_setup is None else
                                        local_setup_seconds(local_setup, r["mode_name"], r["storage"]),
                                        runs=r["cost"].runs if r.get("cost") else 1,
                                        job_usd_interval=r["cost"].interval if r.get("cost") else None)
                   for r in done]
        out.append(MeasuredAnswer(name, trials, label, decide(options)))
    return out


__all__ = ["EXPERIMENT_RULE", "ScenarioAnswer", "MeasuredAnswer", "Scenario", "estimated", "job_checks", "JobCheck", "measured", "scenarios", "shape_of", "for_dataset",
           "KnownShape", "known_shape", "generated_shape", "UNKNOWN_SHAPE_FIX",
           "compute_rate_of"]
