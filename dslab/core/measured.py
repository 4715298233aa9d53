"""Every real run checks the estimate and teaches it.

A run on AWS measures exactly what the estimate predicts: each completed job's seconds, split as the post splits them
(downloading, training, other), one instance's wall clock as SageMaker reports them (docs/reference/aws-fields.md);
the estimate's, which count every instance, are compared divided by the instance count. This module reads an AWS
run's ``results.json`` (as the workflow's Collect step writes it) into ``MeasuredJob``s, each with the premise it ran
on (its trial's instance, count, accelerators, epochs and compute, the dataset as the run found it in S3, the FSx and
EFS its plan recorded), so that:

- ``compare`` puts the estimate for that premise beside what was measured, phase by phase, and names the constants a
  phase rests on where the measurement fell outside the estimate's range (the report's table);
- ``calibrate`` fits the model's constants on the measured jobs together with Bencher's cells, and says what it could
  not fit (``dslab calibrate`` writes the result; ``--calibration`` answers with it).

How the fit works, and why: every estimated phase is the model's arithmetic on its constants, so a constant a phase
rests on can be read back from the phase's measurement. For each measured (job, phase) the constant it rests on most
(the largest elasticity: the share the phase moves per share the constant moves, 0.3 or more) is the one that
measurement can calibrate; those constants are then fitted together (coordinate descent on the squared log error of
every phase they move, Bencher's cells included so the constants fitted on them stay anchored there). A constant is
kept at its shipped value, saying why, where fewer than two jobs rest on it, where the jobs that do ask for values
more than 25% apart (inconsistent), or where the fit runs to the end of its search range. No I/O: the caller reads
the files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from statistics import median
from typing import Any, Iterable, Mapping

from ..contracts import RESULTS_SCHEMA_VERSION
from .results import read_results, wall_seconds
from .answer.premise import Premise
from .answer.scenarios import checkpoint_premise_of_trial, known_shape, premise_of_trial
from .errors import ConfigError
from .experiment import parse_experiment
from .facts.compute import compute_rate
from .facts.prices import PriceTable
from .model import calibration as shipped
from .model.calibration import CALIBRATION_VERSION, SHIPPED, InUse, constant_names
from .model.checkpoint_estimate import Question as CheckpointQuestion, estimate_target, measured_targets
from .model.estimate import MODEL, Estimate, Model, estimate_mode
from .model.provisioning import Provisioning, as_deployed
from .modes import STANDARD, checkpoint_target_label, lab_mode, source_label

PHASES = ("downloading", "training", "other")
ELASTIC = 0.3              # a phase "rests on" a constant that moves it at least this share per share
MIN_PHASE_SECONDS = 5.0    # shorter measured phases are start-up noise, not evidence
MIN_JOBS = 2               # a constant moves only on two jobs or more (repeats count)
CONSISTENT = 1.25          # the jobs resting on a constant may ask for values at most this far apart (max / min)
SEARCH = 4.0               # the fit searches a constant from its range's low end / 4 to its high end x 4
RESULTS_FIX = "pass the results.json of an AWS run (`dslab report EXECUTION --out DIR` writes it)"


# ---- measured jobs -------------------------------------------------------------------------------

@dataclass(frozen=True)
class MeasuredJob:
    """One completed job as a run measured it, with the premise it ran on."""
    execution: str
    job: str
    started: str | None          # when SageMaker started it (the record's training_start), if recorded
    region: str | None
    trial: str | None
    dataset: str
    mode: str                    # the lab's mode (Script where the script read S3 itself)
    storage: str
    premise: Premise
    # Downloading, training and other, and "billable": one instance's wall seconds (a spot job's training time, not
    # its discounted billable time: the estimate predicts time, not a discount).
    measured: Mapping[str, float]
    data_in_efs: bool = False
    scenario: str = ""           # jobs of one trial, dataset and premise: what leave-one-out leaves out together

    @property
    def source(self) -> str:
        return source_label(self.mode, self.storage)

    def estimate(self, prices: PriceTable, model: Model = MODEL) -> Estimate:
        """The estimate for this job's own premise, with ``model``'s constants."""
        return estimate_mode(self.mode, self.premise.shape, storage=self.storage, prices=prices,
                             provisioning=self.premise.lab, efs_resident=self.data_in_efs and self.mode == "EFS",
                             **{**self.premise.estimate_kwargs(), "model": model})

    # The phases a calibration fits, and the one figure leave-one-out compares (a data job: its billable seconds).
    phases = PHASES
    headline = "billable"

    def predict(self, prices: PriceTable, model: Model = MODEL) -> dict[str, float]:
        """The estimate's phases and billable seconds for this job's premise, with ``model``'s constants, one
        instance's as measured (the estimate's count every instance)."""
        return per_instance(self.estimate(prices, model))

    def provenance(self) -> dict[str, Any]:
        return {"execution": self.execution, "job": self.job, "date": self.started, "region": self.region}


@dataclass(frozen=True)
class CheckpointJob:
    """One checkpoint trial's target as a run measured it (its writer jobs' means, its restore job's copy-in), with
    the question it ran: what calibrates the checkpoint estimate's assumptions (NVMe's rate behind a sync target's
    stall, the sync's upload and copy-in)."""
    execution: str
    job: str                     # "<trial>/<target>"
    started: str | None
    region: str | None
    trial: str
    dataset: str                 # the checkpointing workload's model
    mode: str                    # the target: s3, express, fsx, efs
    question: Any                # checkpoint_estimate.Question, at the run's scale
    measured: Mapping[str, float]    # stall, save (the sync: until durable in S3), copy_in where measured
    scenario: str = ""
    storage: str = STANDARD

    headline = "save"

    @property
    def phases(self) -> tuple[str, ...]:
        return tuple(p for p in CHECKPOINT_PHASES if p in self.measured)

    @property
    def source(self) -> str:
        return checkpoint_target_label(self.mode)

    def predict(self, prices: PriceTable, model: Model = MODEL) -> dict[str, float]:
        est = estimate_target(replace(self.question, model=model), self.mode)
        return {"stall": est.stall_seconds, "save": est.save_seconds, "copy_in": est.copy_in_seconds or 0.0}

    def provenance(self) -> dict[str, Any]:
        return {"execution": self.execution, "job": self.job, "date": self.started, "region": self.region}


CHECKPOINT_PHASES = ("stall", "save", "copy_in")


def per_instance(estimate: Estimate) -> dict[str, float]:
    """An estimate's phases and billable seconds, which count every instance, as one instance's: what SageMaker reports
    a job's transitions and BillableTimeInSeconds as."""
    count = max(1, estimate.instance_count)
    return {**{p: getattr(estimate, p) / count for p in PHASES}, "billable": estimate.billable_seconds / count}


def checkpoint_jobs(results: dict[str, Any], prices: PriceTable, where: str = "results.json") -> list[CheckpointJob]:
    """The checkpoint trials' targets of an AWS run, each with its question at the run's own scale (its interval, the
    checkpoints it kept, its cluster); refused in one line like ``measured_jobs``."""
    check_results(results, where)
    results = read_results(results, where)
    if not any(r.get("checkpoint_target") for r in results["records"]):
        return []
    experiment = parse_experiment(results["experiment"])
    lab = Provisioning.from_dict(results.get("lab"), as_deployed(int(results.get("fsx_capacity_gib") or 1200)))
    region = (results.get("environment") or {}).get("region") or (results.get("prices") or {}).get("region")
    trials = {t.name: t for t in experiment.trials if t.checkpoint is not None}
    out = []
    for target in measured_targets(results["records"]):
        trial = trials.get(target.trial)
        if trial is None or target.stall_seconds is None:
            continue   # nothing completed, or a trial the experiment does not hold
        premise = checkpoint_premise_of_trial(trial, lab)
        c = premise.checkpoint
        question = CheckpointQuestion(c.plan, trial.instance_type, c.every_seconds, c.keep, prices, lab,
                                      trial.volume_size_gb)
        figures = {"stall": target.stall_seconds, "save": target.durable_seconds, "copy_in": target.copy_in_seconds}
        started = next((r.get("training_start") for r in results["records"]
                        if r.get("trial") == target.trial and r.get("checkpoint_target") == target.target), None)
        out.append(CheckpointJob(
            execution=str(results.get("execution") or "?"), job=f"{target.trial}/{target.target}", started=started,
            region=region, trial=target.trial, dataset=target.model, mode=target.target, question=question,
            measured={k: float(v) for k, v in figures.items() if v is not None},
            scenario=f"{results.get('execution', '?')}/{target.trial}/{target.target}"))
    return out


def check_results(results: Any, where: str) -> None:
    """One clear line (a ConfigError naming the field) for results no calibration or comparison can read."""
    if not isinstance(results, dict) or not isinstance(results.get("records"), list):
        raise ConfigError(where, f"not a results.json (no records list): {RESULTS_FIX}")
    read_results(results, where)   # a version this dslab cannot read, or records that mix versions: one line
    if results.get("backend") == "local":
        raise ConfigError(f"{where}: backend", "a local run's seconds are this machine's, not AWS's: they cannot "
                                               f"check or calibrate AWS estimates; {RESULTS_FIX}")


def measured_jobs(results: dict[str, Any], where: str = "results.json") -> list[MeasuredJob]:
    """The completed jobs of an AWS run, each with its premise. Refused in one line (ConfigError) where the file is
    another schema version, a local run, has no experiment, a dataset without stats, or a completed job without
    phases."""
    check_results(results, where)
    results = read_results(results, where)   # an older file's seconds as one instance's (results.VERSION_NOTES)
    if not results.get("experiment"):
        raise ConfigError(f"{where}: experiment", f"no experiment: the estimate needs the premise each job ran on; {RESULTS_FIX}")
    try:
        experiment = parse_experiment(results["experiment"])
    except ConfigError as err:
        raise ConfigError(f"{where}: experiment", f"the run's experiment does not parse ({err.problem}): "
                                                  f"{RESULTS_FIX}") from None
    stats = results.get("dataset_stats") or {}
    lab = Provisioning.from_dict(results.get("lab"), as_deployed(int(results.get("fsx_capacity_gib") or 1200)))
    region = (results.get("environment") or {}).get("region") or (results.get("prices") or {}).get("region")
    trials = {t.name: t for t in experiment.trials}
    out = []
    for index, record in enumerate(results["records"]):
        if record.get("status") != "Completed" or record.get("checkpoint_target"):
            continue   # failed, stopped and skipped jobs measure nothing; checkpoint jobs answer another question
        at = f"{where}: records[{index}] ({record.get('job_name', '?')})"
        if record.get("trial"):
            trial = trials.get(record.get("trial"))
        else:   # no trial recorded (an older record): the one trial that runs its dataset, else refused
            running = [t for t in experiment.trials if any(d.name == record.get("dataset") for d in t.datasets)]
            if len(running) != 1:
                raise ConfigError(f"{at}: trial", f"missing, and {len(running)} trials of the run's experiment read "
                                  f"dataset {record.get('dataset')!r}: its premise cannot be told; take the record as "
                                  "Collect writes it (with its trial)")
            trial = running[0]
        if trial is None:
            raise ConfigError(f"{at}: trial", f"trial {record.get('trial')!r} is not in the run's experiment")
        dataset = next((d for d in trial.datasets if d.name == record.get("dataset")), None)
        if dataset is None:
            raise ConfigError(f"{at}: dataset", f"dataset {record.get('dataset')!r} is not in trial {trial.name}")
        if not (stats.get(dataset.name) or {}).get("files"):
            raise ConfigError(f"{where}: dataset_stats.{dataset.name}",
                              f"no files and bytes recorded for {dataset.name}: the estimate needs what the run found "
                              "in S3 (the stats file `dslab dataset upload` writes); rerun with it, or write it with "
                              "`dslab dataset stats --write` and take results from a new run")
        phases = record.get("phases") or {}
        split = record.get("breakdown") or {}
        billable = wall_seconds(record)
        if not phases or billable is None or not all(k in split for k in PHASES):
            raise ConfigError(f"{at}: phases", "a completed job without its phases and billable seconds: nothing to "
                                               "compare (DescribeTrainingJob's SecondaryStatusTransitions and "
                                               "BillableTimeInSeconds); take the record as Collect writes it")
        known = known_shape(dataset, stats)
        # The instance the job ran on as SageMaker describes it (a trial's, unless the record says otherwise).
        premise = premise_of_trial(replace(trial, instance_type=record.get("instance_type") or trial.instance_type,
                                           instance_count=int(record.get("instance_count") or 1)), known, lab)
        out.append(MeasuredJob(
            execution=str(results.get("execution") or "?"), job=record["job_name"], started=record.get("training_start"),
            region=region, trial=trial.name, dataset=dataset.name, mode=lab_mode(record),
            storage=record.get("storage") or STANDARD, premise=premise,
            measured={**{k: float(split[k]) for k in PHASES}, "billable": float(billable)},   # one instance's
            data_in_efs=dataset.source == "efs",
            scenario=(f"{results.get('execution', '?')}/{trial.name}/{dataset.name}/"
                      f"{premise.instance_count}x{premise.instance_type}")))
    return out


def planned_jobs(experiment: Any, prices: PriceTable, *, stats: Mapping[str, Any] | None = None,
                 lab: Provisioning | None = None) -> list[tuple[MeasuredJob, int]]:
    """Each data job of an experiment before it runs, as (the job with its estimate as its "measurement", repeats):
    what `dslab estimate --experiment` prices, and which constants each job's phases will measure (``rests_on``).
    Checkpoint trials and datasets of unknown size are left out (ConfigError where none is left)."""
    out = []
    lab = lab or as_deployed()
    for trial in experiment.trials:
        if trial.checkpoint is not None:
            continue
        for dataset in trial.datasets:
            known = known_shape(dataset, stats)
            if known is None:
                raise ConfigError(f"datasets.{dataset.name}", "its size is not known: give files: and bytes: (or a "
                                  "generate: recipe), or pass a run's --results")
            premise = premise_of_trial(trial, known, lab, experiment.calibration)
            for mode in trial.modes:
                job = MeasuredJob(execution="planned", job=f"{trial.name}/{dataset.name}/{mode}", started=None,
                                  region=None, trial=trial.name, dataset=dataset.name, mode=mode,
                                  storage=trial.storage or STANDARD, premise=premise, measured={},
                                  data_in_efs=dataset.source == "efs")
                out.append((replace(job, measured=job.predict(prices, experiment.calibration.model)),
                            experiment.repeats))
    return out


def bencher_jobs() -> list[MeasuredJob]:
    """Bencher's cells as measured jobs: ml.p3.2xlarge, the V100 preset, one epoch, the lab as deployed."""
    out = []
    for cell in shipped.measured_cells():
        premise = Premise(instance_type=shipped.CALIBRATION_INSTANCE, instance_count=1, accelerators=1, epochs=1,
                          rate=compute_rate(shipped.CALIBRATION_PRESET)[0], compute="the V100 preset", shape=cell.shape,
                          shape_origin="Bencher's notebook")
        out.append(MeasuredJob(execution="bencher", job=cell.label, started="2022", region="us-east-1", trial=None,
                               dataset=cell.dataset, mode=cell.mode, storage=STANDARD, premise=premise,
                               measured={"downloading": cell.download, "training": cell.train, "other": cell.other,
                                         "billable": cell.total},
                               scenario=f"bencher/{cell.scenario}"))
    return out


# ---- which constants a phase rests on ------------------------------------------------------------

def elasticities(job: Any, prices: PriceTable, model: Model = MODEL,
                 names: Iterable[str] | None = None) -> dict[str, dict[str, float]]:
    """{phase: {constant: elasticity}}: the share each phase moves per share the constant moves (+25%, log ratio)."""
    base = job.predict(prices, model)
    out: dict[str, dict[str, float]] = {p: {} for p in job.phases}
    for name in names or constant_names():
        value = getattr(model, name)
        if not value:
            continue
        moved = job.predict(prices, replace(model, **{name: value * 1.25}))
        for phase in job.phases:
            before, after = base[phase], moved[phase]
            if before > 0 and after > 0:
                share = math.log(after / before) / math.log(1.25)
                if abs(share) >= 0.01:
                    out[phase][name] = share
    return out


def rests_on(job: Any, prices: PriceTable, model: Model = MODEL) -> dict[str, str | None]:
    """{phase: the constant the phase rests on most (elasticity >= ELASTIC), or None}."""
    widths = {name: math.log(a.high / a.low) if a.low > 0 and a.high > a.low else 0.0
              for name, a in ranged_constants().items()}
    out: dict[str, str | None] = {}
    for phase, shares in elasticities(job, prices, model).items():
        # Two constants the phase rests on alike (a product: the sync's parts at once x S3's rate per connection):
        # the least known of them (the widest plausible range) is the one the measurement calibrates.
        best = max(shares.items(), key=lambda kv: (round(abs(kv[1]), 2), widths.get(kv[0], 0.0)), default=(None, 0.0))
        out[phase] = best[0] if abs(best[1]) >= ELASTIC else None
    return out


# ---- measured beside estimated -------------------------------------------------------------------

@dataclass
class PhaseCheck:
    phase: str
    measured: float
    estimated: float
    rests_on: list[str] = field(default_factory=list)   # the constants, most elastic first

    @property
    def error(self) -> float | None:
        """estimated / measured - 1 (None when nothing was measured)."""
        return self.estimated / self.measured - 1 if self.measured > 0 else None


@dataclass
class JobCheck:
    """One job: the estimate for its premise beside what was measured, both one instance's seconds."""
    job: MeasuredJob
    estimate: Estimate
    phases: list[PhaseCheck]

    @property
    def measured(self) -> float:
        return self.job.measured["billable"]

    @property
    def _count(self) -> int:
        return max(1, self.estimate.instance_count)

    @property
    def estimated(self) -> float:
        """The estimate's billable seconds, one instance's (the estimate's count every instance)."""
        return self.estimate.billable_seconds / self._count

    @property
    def estimated_range(self) -> tuple[float, float] | None:
        r = self.estimate.range
        return None if r is None else (r.billable_low / self._count, r.billable_high / self._count)

    @property
    def error(self) -> float:
        return self.estimated / self.measured - 1 if self.measured else 0.0

    @property
    def inside(self) -> bool | None:
        found = self.estimated_range
        return None if found is None else found[0] <= self.measured <= found[1]

    def phase_lines(self, assumptions: Mapping[str, Any], model: Model) -> list[str]:
        """Each phase far from its estimate (25% or more; 10% where the billable time fell outside the range), and the
        constants it rests on: "downloading 42% shorter than estimated: File mode onto NVMe, assumed 1,000 MB/s"."""
        threshold = 0.10 if self.inside is False else 0.25
        lines = []
        for p in self.phases:
            if p.estimated <= 0 or p.measured <= 0 or max(p.measured, p.estimated) < MIN_PHASE_SECONDS:
                continue
            ratio = p.measured / p.estimated
            if abs(ratio - 1) < threshold:
                continue
            # In time, both ways: "42% shorter" is 0.58 x the estimate, "100% longer" twice it.
            said = (f"{p.phase} {1 - ratio:.0%} shorter than estimated" if ratio < 1 else
                    f"{p.phase} {ratio - 1:.0%} longer than estimated")
            rested = [assumption_said(name, assumptions, model) for name in p.rests_on[:2]]
            lines.append(said + (": " + "; ".join(rested) if rested else ""))
        return lines

    def to_dict(self) -> dict[str, Any]:
        r = self.estimated_range
        return {**self.job.provenance(), "dataset": self.job.dataset, "source": self.job.source,
                "instance_type": self.job.premise.instance_type, "instance_count": self.job.premise.instance_count,
                "epochs": self.job.premise.epochs, "measured_billable_seconds": round(self.measured, 1),
                "estimated_billable_seconds": round(self.estimated, 1),
                "estimated_range": [round(r[0], 1), round(r[1], 1)] if r else None,
                "error": round(self.error, 4), "inside": self.inside,
                "phases": {p.phase: {"measured": round(p.measured, 1), "estimated": round(p.estimated, 1),
                                     "error": None if p.error is None else round(p.error, 4), "rests_on": p.rests_on}
                           for p in self.phases}}


def assumption_said(name: str, assumptions: Mapping[str, Any], model: Model) -> str:
    """A constant in words with its value as assumed: "File mode onto NVMe, assumed 1,000 MB/s"."""
    found = assumptions.get(name)
    value = getattr(model, name)
    if found is None:
        return f"{name}, assumed {value:g}"
    shown = value * found.scale
    number = f"{shown:,.0f}" if abs(shown) >= 100 else f"{shown:.1f}" if abs(shown) >= 1 else f"{shown:.2g}"
    return f"{found.what}, assumed {number}{' ' + found.unit if found.unit else ''}"


def compare(jobs: Iterable[MeasuredJob], prices: PriceTable, calibration: InUse = SHIPPED) -> list[JobCheck]:
    """Each job's estimate for its own premise (with its range, on ``calibration``) beside what it measured."""
    out = []
    model = calibration.model
    for job in jobs:
        estimate = job.estimate(prices, model)
        shipped.with_range(estimate, job.premise.shape, calibration=calibration, prices=prices,
                           provisioning=job.premise.lab, efs_resident=job.data_in_efs and job.mode == "EFS",
                           **job.premise.estimate_kwargs())
        shares = elasticities(job, prices, model)
        each = per_instance(estimate)
        phases = [PhaseCheck(p, job.measured[p], each[p],
                             [n for n, s in sorted(shares[p].items(), key=lambda kv: -abs(kv[1])) if abs(s) >= ELASTIC])
                  for p in PHASES]
        out.append(JobCheck(job, estimate, phases))
    return out


def ranged_constants() -> dict[str, Any]:
    """Every constant's range and words: the assumptions, and the fitted constants (their rule's words)."""
    cal = shipped.calibration()
    out: dict[str, Any] = dict(cal.ranges())
    for name, fitted in cal.fitted.items():
        if name not in out:
            value = fitted.value
            scale, unit = ((1000.0, "ms") if value < 1 else (1.0, "MB/s") if name.endswith("mbps") else (1.0, "s"))
            out[name] = shipped.Assumption(name, fitted.rule.split(":")[0], value, value, "fitted on Bencher's cells",
                                           unit, scale)
    return out


# ---- the fit -------------------------------------------------------------------------------------

@dataclass
class ConstantFit:
    name: str
    what: str
    shipped: float
    value: float
    status: str                  # "calibrated", "kept", "not measured"
    why: str
    jobs: list[str] = field(default_factory=list)           # the measured jobs resting on it
    per_job: dict[str, float] = field(default_factory=dict)  # what each asks for alone
    unit: str = ""
    scale: float = 1.0           # shown as value x scale in unit

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "unit": self.unit, "scale": self.scale,
                "shipped": self.shipped, "calibrated": self.value,
                "change": round(self.value / self.shipped - 1, 4) if self.shipped else None, "status": self.status,
                "why": self.why, "jobs": self.jobs, "per_job": {k: round(v, 6) for k, v in self.per_job.items()}}


def _bounds(name: str, value: float, ranges: Mapping[str, Any]) -> tuple[float, float]:
    found = ranges.get(name)
    low, high = (min(found.low, value), max(found.high, value)) if found is not None else (value, value)
    return max(low / SEARCH, 1e-9), high * SEARCH


def _golden(objective, low: float, high: float, steps: int = 32) -> float:
    """The minimum of ``objective`` over [low, high] in log space (golden-section search)."""
    a, b = math.log(low), math.log(high)
    ratio = (math.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = objective(math.exp(c)), objective(math.exp(d))
    for _ in range(steps):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = objective(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = objective(math.exp(d))
    return math.exp((a + b) / 2)


def _loss(pairs: list[tuple[Any, str]], prices: PriceTable, model: Model) -> float:
    total = 0.0
    cache: dict[int, dict[str, float]] = {}
    for job, phase in pairs:
        predicted = cache.get(id(job))
        if predicted is None:
            predicted = cache[id(job)] = job.predict(prices, model)
        total += math.log(max(predicted[phase], 1e-3) / job.measured[phase]) ** 2
    return total


def _fit(names: list[str], pairs: list[tuple[MeasuredJob, str]], prices: PriceTable, base: Model,
         ranges: Mapping[str, Any], rounds: int = 12) -> Model:
    """``names`` fitted together on ``pairs`` (coordinate descent, each by golden-section search)."""
    model = base
    for _ in range(rounds):
        moved = 0.0
        for name in names:
            low, high = _bounds(name, getattr(base, name), ranges)
            best = _golden(lambda v: _loss(pairs, prices, replace(model, **{name: v})), low, high)
            moved = max(moved, abs(math.log(best / getattr(model, name))))
            model = replace(model, **{name: best})
        if moved < 1e-3:
            break
    return model


@dataclass
class Calibrated:
    """What ``calibrate`` found: the model, each constant's story, and the jobs it rests on."""
    model: Model
    constants: list[ConstantFit]
    jobs: list[MeasuredJob]

    def changed(self) -> dict[str, float]:
        return {c.name: c.value for c in self.constants if c.status == "calibrated"}


def calibrate(jobs: list[MeasuredJob], prices: PriceTable, base: Model = MODEL,
              with_bencher: bool = True) -> Calibrated:
    """The model's constants fitted on ``jobs`` (and Bencher's cells), each calibrated, kept or not measured with why."""
    ranges = ranged_constants()
    anchors = bencher_jobs() if with_bencher else []
    # Which constant each measured phase rests on most.
    resting: dict[str, list[tuple[MeasuredJob, str]]] = {}
    for job in jobs:
        for phase, name in rests_on(job, prices, base).items():
            if name is not None and job.measured[phase] >= MIN_PHASE_SECONDS:
                resting.setdefault(name, []).append((job, phase))
    stories: dict[str, ConstantFit] = {}
    free: list[str] = []
    for name in constant_names():
        what = ranges[name].what if name in ranges else name
        shown = {"unit": ranges[name].unit, "scale": ranges[name].scale} if name in ranges else {}
        rested = resting.get(name, [])
        job_names = sorted({j.job for j, _ in rested})
        value = getattr(base, name)
        if not rested:
            stories[name] = ConstantFit(name, what, value, value, "not measured",
                                        "no measured phase rests on it: kept as shipped", **shown)
        elif len(job_names) < MIN_JOBS:
            stories[name] = ConstantFit(name, what, value, value, "kept",
                                        f"too few jobs: only {job_names[0]} rests on it (at least {MIN_JOBS} needed)",
                                        job_names, **shown)
        else:
            free.append(name)
            stories[name] = ConstantFit(name, what, value, value, "calibrated", "", job_names, **shown)

    # Bencher's cells anchor the constants fitted on them, each on the cells its rule takes (calibration.fit).
    rules = shipped.calibration().fitted
    anchored = [(job, phase, name) for job in anchors for phase, name in rests_on(job, prices, base).items()
                if name is not None and name in rules and job.job in rules[name].cells
                and job.measured[phase] >= MIN_PHASE_SECONDS]

    def pairs_for(names: list[str]) -> list[tuple[MeasuredJob, str]]:
        """The phases (measured jobs' and Bencher's) that rest on one of ``names``: each constant is fitted on the
        measurements that show it most, as the shipped fit's rules take each from the cells of its regime."""
        return ([(j, p) for n in names for j, p in resting.get(n, [])]
                + [(j, p) for j, p, n in anchored if n in names])

    model = base
    for _ in range(3):   # refit after setting aside what could not be fitted
        model = _fit(free, pairs_for(free), prices, base, ranges) if free else base
        dropped = []
        for name in free:
            story = stories[name]
            low, high = _bounds(name, getattr(base, name), ranges)
            fitted = getattr(model, name)
            # What each job resting on it asks for alone, with the other constants as fitted.
            by_job: dict[str, list[tuple[MeasuredJob, str]]] = {}
            for j, p in resting[name]:
                by_job.setdefault(j.job, []).append((j, p))
            own = {job: _golden(lambda v, mine=mine: _loss(mine, prices, replace(model, **{name: v})), low, high)
                   for job, mine in by_job.items()}
            story.per_job = own
            asked = list(own.values())
            if min(fitted / low, high / fitted) < 1.05:
                story.status, story.why = "kept", (f"the measurements ask for {fitted:.4g}, at the end of the search "
                                                   f"({low:.4g} to {high:.4g}): not a value this model can take")
            elif max(asked) / min(asked) > CONSISTENT:
                story.status, story.why = "kept", (f"inconsistent: the jobs resting on it ask for {min(asked):.4g} to "
                                                   f"{max(asked):.4g} (more than {CONSISTENT - 1:.0%} apart)")
            else:
                story.status = "calibrated"
                story.why = (f"{len(own)} jobs rest on it; alone they ask for {min(asked):.4g} to {max(asked):.4g} "
                             f"(median {median(asked):.4g})")
                cells = sorted({j.job for j, _, n in anchored if n == name})
                if cells:   # fitted on both: Bencher's cells keep their say, as the shipped fit gave it them
                    story.why += (f"; fitted together with Bencher's cells {', '.join(cells)}, which ask for "
                                  f"{getattr(base, name):.4g}")
            if story.status == "kept":
                dropped.append(name)
        if not dropped:
            break
        free = [n for n in free if n not in dropped]
    model = replace(base, **{n: getattr(model, n) for n in free}) if free else base
    for name in free:
        stories[name].value = getattr(model, name)
    return Calibrated(model, [stories[n] for n in constant_names()], jobs)


# ---- out of sample -------------------------------------------------------------------------------

@dataclass
class OutOfSample:
    """Each scenario of the measured jobs predicted by the shipped model and by a calibration without it."""
    scenarios: list[str]
    before: list[float]     # estimated / measured - 1 per job, shipped model
    after: list[float]      # ... calibrated on the other scenarios

    @staticmethod
    def _summary(errors: list[float]) -> dict[str, float] | None:
        if not errors:
            return None
        return {"under": round(min(0.0, *errors), 4), "over": round(max(0.0, *errors), 4),
                "mean_abs": round(sum(abs(e) for e in errors) / len(errors), 4)}

    def to_dict(self) -> dict[str, Any]:
        return {"scenarios": self.scenarios, "jobs": len(self.before), "shipped": self._summary(self.before),
                "calibrated_without_it": self._summary(self.after)}


def _error(job: Any, prices: PriceTable, model: Model) -> float:
    """estimated / measured - 1 of the job's headline figure (a data job's billable seconds, a checkpoint's save)."""
    return job.predict(prices, model)[job.headline] / job.measured[job.headline] - 1


def out_of_sample(jobs: list[Any], prices: PriceTable, base: Model = MODEL) -> OutOfSample | None:
    """Leave one scenario out: None where the jobs hold fewer than two scenarios (nothing to leave out)."""
    scenarios = sorted({j.scenario for j in jobs})
    if len(scenarios) < 2:
        return None
    before, after = [], []
    for scenario in scenarios:
        rest = [j for j in jobs if j.scenario != scenario]
        model = calibrate(rest, prices, base).model
        for job in (j for j in jobs if j.scenario == scenario):
            before.append(_error(job, prices, base))
            after.append(_error(job, prices, model))
    return OutOfSample(scenarios, before, after)


def _cell(job: Any, prices: PriceTable, model: Model) -> dict[str, Any]:
    """One measured cell of a calibration file: where it came from, what it measured, the estimate before and after."""
    out = {**job.provenance(), "dataset": job.dataset, "source": job.source,
           "measured": {k: round(v, 1) for k, v in job.measured.items()},
           "estimated_shipped": round(job.predict(prices, MODEL)[job.headline], 1),
           "estimated_calibrated": round(job.predict(prices, model)[job.headline], 1), "compared": job.headline}
    if isinstance(job, MeasuredJob):
        out.update(instance_type=job.premise.instance_type, instance_count=job.premise.instance_count,
                   epochs=job.premise.epochs)
    else:
        out.update(instance_type=job.question.instance_type, instance_count=job.question.plan.hosts)
    return out


def calibration_document(found: Calibrated, prices: PriceTable, checked: OutOfSample | None,
                         sources: list[str], checked_checkpoints: OutOfSample | None = None) -> dict[str, Any]:
    """The calibration file `dslab calibrate` writes and `--calibration` reads."""
    bencher = bencher_jobs()

    def errors(model: Model, jobs: list[MeasuredJob]) -> list[float]:
        return [_error(j, prices, model) for j in jobs]
    shipped_folds = [p.error for f in shipped.calibration().folds for p in f.predictions]
    return {
        "calibration_version": CALIBRATION_VERSION,
        "written_by": "dslab calibrate",
        "results": sources,
        "model": {name: getattr(found.model, name) for name in constant_names()},
        "constants": [c.to_dict() for c in found.constants],
        "cells": [_cell(j, prices, found.model) for j in found.jobs],
        # What no job's phase shows: FSx's metadata import runs before the jobs (its rate is the post's ~2 M objects an
        # hour, estimate.FSX_IMPORT_RATE), so a run leaves it as it was.
        "not_measured_by_a_job": {"fsx_import_rate": "FSx's S3 metadata import runs before any job: no phase of a "
                                                     "job shows it; kept as shipped (the post's ~2 M objects an hour)"},
        "out_of_sample": {
            "bencher_shipped": OutOfSample._summary(shipped_folds),
            "bencher_calibrated_in_sample": OutOfSample._summary(errors(found.model, bencher)),
            # The data jobs' error (what widens the data answers' ranges); the checkpoint trials' apart, for theirs.
            "your_runs": checked.to_dict() if checked else
            {"note": "fewer than two data scenarios (a trial's dataset on one premise): nothing to leave out; the "
                     "in-sample errors are in cells"},
            **({"your_checkpoints": checked_checkpoints.to_dict()} if checked_checkpoints else {}),
        },
    }


__all__ = ["CALIBRATION_VERSION", "Calibrated", "ConstantFit", "JobCheck", "MeasuredJob", "OutOfSample", "PhaseCheck",
           "RESULTS_SCHEMA_VERSION", "CheckpointJob", "bencher_jobs", "calibrate", "checkpoint_jobs", "calibration_document", "check_results", "compare",
           "elasticities", "measured_jobs", "planned_jobs", "out_of_sample", "rests_on"]
