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
rests on can be read back from the phase's measurement. Each job is first read as DescribeTrainingJob describes it
(``read_job``: the image pull inside Training is start-up; a spot saving is recorded, not fitted; an interrupted job's
attempts each give their own download; a warm start's start-up is not fitted). For each measured (job, phase) the
constant it rests on most (the largest elasticity: the share the phase moves per share the constant moves, 0.3 or
more) is the one that measurement can calibrate; those constants are then fitted together (coordinate descent on the
squared log error of every phase they move, Bencher's cells included so the constants fitted on them stay anchored
there), each search bracketed on a log grid first, since a phase such as other = max(floor, start-up - download) is
flat on one side. Each job's support is what keeps its own loss within the runs' noise (``run_noise``); a constant is
kept at its shipped value, saying why, where its jobs come from fewer than two scenarios (datasets or instances, not
repeats), where their supports do not meet (inconsistent), where they only bound it and the shipped value is among
what they allow, or where the fit runs to the end of its search range; a calibrated one carries its range (every
value its jobs support) and uncertainty. No I/O: the caller reads the files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from statistics import median
from typing import Any, Iterable, Mapping

from ..contracts import RESULTS_SCHEMA_VERSION
from .results import read_results, spot_saving, wall_seconds
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
MIN_SCENARIOS = 2          # a constant moves only on two scenarios or more (datasets or instances; repeats are one)
SEARCH = 4.0               # the fit searches a constant from its range's low end / 4 to its high end x 4
GRID = 40                  # points of the log grid that brackets a loss's minimum before golden-section refines it
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
    # its discounted billable time: the estimate predicts time, not a discount). The image pull SageMaker shows inside
    # Training is start-up, so it is counted in other (read_job). An interrupted job's attempt holds its download only.
    measured: Mapping[str, float]
    data_in_efs: bool = False
    scenario: str = ""           # jobs of one trial, dataset and premise: what leave-one-out leaves out together
    # The phases a calibration fits (a warm start's other is not a cold start-up: left out) and how the job was read.
    phases: tuple[str, ...] = PHASES
    spot_saving: float | None = None     # 1 - billable / training time, recorded (never fitted)
    read_as: str = ""

    @property
    def source(self) -> str:
        return source_label(self.mode, self.storage)

    @property
    def setting(self) -> tuple[Any, ...]:
        """What makes two jobs two scenarios rather than repeats: the dataset and the instances it ran on."""
        return (self.dataset, self.premise.instance_type, self.premise.instance_count)

    @property
    def whole(self) -> bool:
        """Every phase measured and fitted: a job whose billable time the model predicts as it ran."""
        return self.headline in self.measured and set(self.phases) == set(PHASES)

    def estimate(self, prices: PriceTable, model: Model = MODEL) -> Estimate:
        """The estimate for this job's own premise, with ``model``'s constants."""
        return estimate_mode(self.mode, self.premise.shape, storage=self.storage, prices=prices,
                             provisioning=self.premise.lab, efs_resident=self.data_in_efs and self.mode == "EFS",
                             **{**self.premise.estimate_kwargs(), "model": model})

    # The one figure leave-one-out compares (a data job: its billable seconds).
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

    @property
    def setting(self) -> tuple[Any, ...]:
        """The checkpointing model and the cluster: the targets of one trial write the same bytes on the same
        instances (the same stall), so they are one scenario for NVMe's rate."""
        return (self.dataset, self.question.instance_type, self.question.plan.hosts)

    whole = True
    read_as = ""
    spot_saving = None

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


# ---- reading a job as AWS describes it --------------------------------------------------------------------------

# DescribeTrainingJob's reference: "at the start of a training job, you might see ... SecondaryStatus - Training,
# StatusMessage - Downloading the training image" (SecondaryStatusTransition). Read, never acted on.
IMAGE_PULL = "downloading the training image"
# "Interrupted - The job stopped because the managed spot training instances were interrupted" (SecondaryStatus):
# what ends one attempt of a spot job; the next starts again and downloads again.
ATTEMPT_ENDS = ("Interrupted",)
# A Starting phase this short launched no instance: the job started on a warm pool (assumption: a cold start launches
# instances for minutes; the lab's own jobs keep no pool, aws_fields WarmPoolStatus).
WARM_STARTING_SECONDS = 30.0


@dataclass
class Reading:
    """The measured jobs of a results file, and the jobs set aside, each with why."""
    jobs: list[MeasuredJob]
    set_aside: list[tuple[str, str]] = field(default_factory=list)


def _attempts(transitions: list[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The transitions cut into attempts: each Interrupted ends one."""
    out: list[list[Mapping[str, Any]]] = [[]]
    for t in transitions:
        out[-1].append(t)
        if t.get("status") in ATTEMPT_ENDS:
            out.append([])
    return [a for a in out if a]


def _seconds(attempt: list[Mapping[str, Any]], status: str, pull: bool | None = None) -> float:
    """Seconds of ``status`` in an attempt; for Training, ``pull`` picks the image pull (True) or the rest (False)."""
    return sum(float(t.get("seconds") or 0.0) for t in attempt if t.get("status") == status
               and (pull is None or (IMAGE_PULL in str(t.get("message") or "").lower()) == pull))


def read_job(job: MeasuredJob, record: Mapping[str, Any], warm_by_pool: bool) -> tuple[list[MeasuredJob], str | None]:
    """One completed job as AWS describes it: (the jobs a calibration reads from it, why any of it is set aside).

    - The image pull (Training, "Downloading the training image") is start-up: moved from training to other.
    - A spot job's saving is recorded, never fitted: the phases are wall seconds (results.breakdown).
    - An interrupted job's attempts each downloaded again: each attempt whose download finished is read as a run of
      its own measuring that download; their training (cut short, or resumed from a checkpoint) and start-up are set
      aside. Two attempts' downloads are never added into one.
    - A warm start (WarmPoolStatus's ReusedByJob names it, or its Starting phase is shorter than any cold start) pulls
      no image and launches no instance: its other is not fitted.
    """
    transitions = [t for t in record.get("transitions") or [] if isinstance(t, Mapping)]
    saving = spot_saving(dict(record))
    saving = saving if saving and saving > 0.005 else None
    job = replace(job, spot_saving=saving)
    notes = [f"spot: {saving:.0%} saved, recorded, not fitted"] if saving else []
    attempts = _attempts(transitions)
    if len(attempts) > 1:
        runs = []
        for i, attempt in enumerate(attempts, 1):
            statuses = [t.get("status") for t in attempt]
            # Finished: another phase followed it. An interruption right after it cut the download short.
            at = statuses.index("Downloading") if "Downloading" in statuses else None
            done = at is not None and at < len(statuses) - 1 and statuses[at + 1] not in ATTEMPT_ENDS
            download = _seconds(attempt, "Downloading")
            if done and download > 0:
                runs.append(replace(job, job=f"{job.job} (attempt {i} of {len(attempts)})",
                                    measured={"downloading": download}, phases=("downloading",),
                                    read_as="; ".join(notes + [f"attempt {i} of {len(attempts)}: its download only"])))
        why = (f"interrupted {len(attempts) - 1} time(s): {len(attempts)} attempts, each downloading again; "
               + (f"each finished download read as a run of its own ({len(runs)}), " if runs
                  else "no download to read, ")
               + "training and start-up set aside (cut short, or resumed from a checkpoint)")
        return runs, why
    pull = _seconds(transitions, "Training", pull=True)
    measured = dict(job.measured)
    if pull > 0:
        measured["training"] = max(0.0, measured["training"] - pull)
        measured["other"] = measured["other"] + pull
        notes.append(f"image pull {pull:,.0f} s inside Training counted as start-up")
    starting = _seconds(transitions, "Starting") if any(t.get("status") == "Starting" for t in transitions) else None
    phases = PHASES
    if warm_by_pool or (starting is not None and starting < WARM_STARTING_SECONDS):
        phases = ("downloading", "training")
        notes.append("warm start (" + ("WarmPoolStatus: reused a pool" if warm_by_pool else
                                       f"Starting {starting:.0f} s, under {WARM_STARTING_SECONDS:.0f} s") +
                     "): its start-up is not fitted")
    return [replace(job, measured=measured, phases=phases, read_as="; ".join(notes))], None


def measured_jobs(results: dict[str, Any], where: str = "results.json") -> list[MeasuredJob]:
    """The completed jobs of an AWS run, each with its premise, as ``read_runs`` reads them."""
    return read_runs(results, where).jobs


def read_runs(results: dict[str, Any], where: str = "results.json") -> Reading:
    """The completed jobs of an AWS run, each with its premise, read as AWS describes them (``read_job``), and what was
    set aside. Refused in one line (ConfigError) where the file is another schema version, a local run, has no
    experiment, a dataset without stats, or a completed job without phases."""
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
    warm = {str((r.get("warm_pool") or {}).get("reused_by_job")) for r in results["records"]
            if isinstance(r, dict) and isinstance(r.get("warm_pool"), dict)}
    out: list[MeasuredJob] = []
    set_aside: list[tuple[str, str]] = []
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
        job = MeasuredJob(
            execution=str(results.get("execution") or "?"), job=record["job_name"], started=record.get("training_start"),
            region=region, trial=trial.name, dataset=dataset.name, mode=lab_mode(record),
            storage=record.get("storage") or STANDARD, premise=premise,
            measured={**{k: float(split[k]) for k in PHASES}, "billable": float(billable)},   # one instance's
            data_in_efs=dataset.source == "efs",
            scenario=(f"{results.get('execution', '?')}/{trial.name}/{dataset.name}/"
                      f"{premise.instance_count}x{premise.instance_type}"))
        read, why = read_job(job, record, record["job_name"] in warm)
        out += read
        if why:
            set_aside.append((record["job_name"], why))
    return Reading(out, set_aside)


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
    return _rests_on(elasticities(job, prices, model))


def _rests_on(elastic: Mapping[str, Mapping[str, float]]) -> dict[str, str | None]:
    widths = {name: math.log(a.high / a.low) if a.low > 0 and a.high > a.low else 0.0
              for name, a in ranged_constants().items()}
    out: dict[str, str | None] = {}
    for phase, shares in elastic.items():
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
        if job.headline not in job.measured:
            continue   # an interrupted job's attempt: its download alone, no whole job to compare
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
    per_job: dict[str, float] = field(default_factory=dict)  # what each job that pins a value asks for alone
    unit: str = ""
    scale: float = 1.0           # shown as value x scale in unit
    # What each job resting on it supports within the runs' noise: (low, high), None where it reaches the search's end
    # (the job bounds the constant on one side only). A job whose loss does not move with it is not here.
    supports: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    range: tuple[float, float] | None = None    # a calibrated constant's range: every value its jobs support
    uncertainty: float | None = None            # the range's widest side around the value, as a share (log)
    noise: float | None = None                  # the phase noise (log) each job's support allows

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "unit": self.unit, "scale": self.scale,
                "shipped": self.shipped, "calibrated": self.value,
                "change": round(self.value / self.shipped - 1, 4) if self.shipped else None, "status": self.status,
                "why": self.why, "jobs": self.jobs, "per_job": {k: round(v, 6) for k, v in self.per_job.items()},
                "supports": {k: [None if v is None else round(v, 6) for v in pair]
                             for k, pair in self.supports.items()},
                **({"range": [round(self.range[0], 6), round(self.range[1], 6)]} if self.range else {}),
                **({"uncertainty": round(self.uncertainty, 4)} if self.uncertainty is not None else {}),
                **({"noise": round(self.noise, 4)} if self.noise is not None else {})}


def _bounds(name: str, value: float, ranges: Mapping[str, Any]) -> tuple[float, float]:
    found = ranges.get(name)
    low, high = (min(found.low, value), max(found.high, value)) if found is not None else (value, value)
    return max(low / SEARCH, 1e-9), high * SEARCH


def _golden(objective, low: float, high: float, steps: int = 24) -> float:
    """The minimum of ``objective`` over [low, high] in log space (golden-section search): only where the loss has one
    valley there, which ``_valley``'s grid has bracketed."""
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


def _edge(objective, inside: float, outside: float, level: float, steps: int = 20) -> float:
    """Where the loss crosses ``level`` between a value under it (``inside``) and one above it (log bisection)."""
    a, b = math.log(inside), math.log(outside)
    for _ in range(steps):
        m = (a + b) / 2
        if objective(math.exp(m)) <= level:
            a = m
        else:
            b = m
    return math.exp(a)


@dataclass(frozen=True)
class Valley:
    """A loss's minimum over a search range: the value, the stretch where the loss stays at its minimum (the whole of
    it where the loss is flat), the stretch within ``band`` of it (what the measurements support), and whether the loss
    moves by more than ``band`` anywhere in the range at all (a job whose loss does not asks nothing)."""
    best: float
    low: float
    high: float
    support: tuple[float | None, float | None]   # None: the support reaches the search's end on that side
    depends: bool
    loss: float


def _valley(objective, low: float, high: float, band: float = 0.0, prefer: float | None = None) -> Valley:
    """Bracket first, then search: the loss on a log grid over [low, high] finds the valley even where it is flat or
    piecewise (a max() with a floor: golden-section alone lands on the flat part and stops at its end); golden-section
    then refines inside the grid cells either side of the lowest point. Where the loss is flat at its minimum, the
    whole flat stretch is the answer: ``prefer`` (the value as it stands) where it lies in it, else its middle."""
    xs = [math.exp(math.log(low) + i * (math.log(high) - math.log(low)) / (GRID - 1)) for i in range(GRID)]
    fs = [objective(x) for x in xs]
    floor, top = min(fs), max(fs)
    flat = 1e-12 + 1e-9 * top            # equal but for rounding
    i = fs.index(floor)
    lo, hi = i, i
    while lo > 0 and fs[lo - 1] <= floor + flat:
        lo -= 1
    while hi < GRID - 1 and fs[hi + 1] <= floor + flat:
        hi += 1
    if lo == hi:
        best = _golden(objective, xs[max(0, i - 1)], xs[min(GRID - 1, i + 1)])
        if objective(best) > floor:
            best = xs[i]
        flat_low = flat_high = best
        floor = min(floor, objective(best))
    else:
        flat_low = _edge(objective, xs[lo], xs[lo - 1], floor + flat) if lo > 0 else xs[0]
        flat_high = _edge(objective, xs[hi], xs[hi + 1], floor + flat) if hi < GRID - 1 else xs[-1]
        middle = math.sqrt(flat_low * flat_high)
        best = min(max(prefer, flat_low), flat_high) if prefer is not None else middle
    # The support: the stretch around the minimum where the loss stays within band of it.
    s_low = s_high = None
    if band > 0:
        level = floor + band + flat
        a, b = lo, hi
        while a > 0 and fs[a - 1] <= level:
            a -= 1
        while b < GRID - 1 and fs[b + 1] <= level:
            b += 1
        s_low = None if a == 0 else _edge(objective, min(xs[a], flat_low), xs[a - 1], level)
        s_high = None if b == GRID - 1 else _edge(objective, max(xs[b], flat_high), xs[b + 1], level)
    return Valley(best, flat_low, flat_high, (s_low, s_high), top - floor > band, floor)


def _loss(pairs: list[tuple[Any, str]], prices: PriceTable, model: Model) -> float:
    total = 0.0
    cache: dict[int, dict[str, float]] = {}
    for job, phase in pairs:
        predicted = cache.get(id(job))
        if predicted is None:
            predicted = cache[id(job)] = job.predict(prices, model)
        total += math.log(max(predicted[phase], 1e-3) / job.measured[phase]) ** 2
    return total


def _fit(names: list[str], pairs: list[tuple[Any, str]], prices: PriceTable, base: Model,
         ranges: Mapping[str, Any], moves: Mapping[str, set[int]], rounds: int = 12) -> Model:
    """``names`` fitted together on ``pairs`` (coordinate descent, each by ``_valley``: a flat stretch keeps the value
    as it stands). Each constant's search sees the pairs whose job it moves (``moves``): the rest add a constant."""
    model = base
    for _ in range(rounds):
        moved = 0.0
        for name in names:
            low, high = _bounds(name, getattr(base, name), ranges)
            mine = [(j, p) for j, p in pairs if id(j) in moves.get(name, set())]
            if not mine:
                continue
            best = _valley(lambda v: _loss(mine, prices, replace(model, **{name: v})), low, high,
                           prefer=getattr(model, name)).best
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
    jobs: list[Any]
    set_aside: list[tuple[str, str]] = field(default_factory=list)

    def changed(self) -> dict[str, float]:
        return {c.name: c.value for c in self.constants if c.status == "calibrated"}


@lru_cache(maxsize=None)
def bencher_noise() -> float:
    """The widest run-to-run half-range of Bencher's repeats (C FastFile's 6% of its total): a phase's noise floor."""
    return max(c.spread for c in shipped.measured_cells())


def run_noise(jobs: Iterable[Any]) -> float:
    """The phase noise the fit allows each job (log): Bencher's repeats' widest half-range, or the runs' own repeats'
    (the half-range of one phase over the repeats of one scenario) where wider."""
    spread = bencher_noise()
    groups: dict[tuple[str, str, str], list[float]] = {}
    for job in jobs:
        for phase in job.phases:
            value = job.measured.get(phase, 0.0)
            if value >= MIN_PHASE_SECONDS:   # repeats: one scenario, one source (its jobs' modes differ)
                groups.setdefault((job.scenario, job.source, phase), []).append(value)
    for values in groups.values():
        if len(values) > 1:
            spread = max(spread, math.log(max(values) / min(values)) / 2)
    return spread


def _setting_said(job: Any) -> str:
    dataset, instance, count = job.setting
    return f"{dataset} on {count} x {instance}"


def calibrate(jobs: list[Any], prices: PriceTable, base: Model = MODEL, with_bencher: bool = True,
              set_aside: list[tuple[str, str]] | None = None) -> Calibrated:
    """The model's constants fitted on ``jobs`` (and Bencher's cells), each calibrated, kept or not measured with why.

    A constant moves only where jobs of two scenarios or more (``setting``: datasets or instances, not repeats) rest
    on it and each pins a value; each job's support is where its own loss stays within the runs' noise (``run_noise``,
    per phase), which an elasticity of 0.3 turns into a constant's spread of noise / 0.3; the jobs are inconsistent only
    where their supports do not meet, and the calibrated range is every value they support."""
    ranges = ranged_constants()
    anchors = bencher_jobs() if with_bencher else []
    noise = run_noise(jobs)
    # Which constant each measured phase rests on most, and which constants move each job at all.
    resting: dict[str, list[tuple[Any, str]]] = {}
    moves: dict[str, set[int]] = {}
    shares_of: dict[int, dict[str, dict[str, float]]] = {}
    for job in [*jobs, *anchors]:
        shares_of[id(job)] = shares = elasticities(job, prices, base)
        for phase_shares in shares.values():
            for name in phase_shares:
                moves.setdefault(name, set()).add(id(job))
    for job in jobs:
        for phase, name in _rests_on(shares_of[id(job)]).items():
            if name is not None and job.measured[phase] >= MIN_PHASE_SECONDS:
                resting.setdefault(name, []).append((job, phase))
    stories: dict[str, ConstantFit] = {}
    free: list[str] = []
    for name in constant_names():
        what = ranges[name].what if name in ranges else name
        shown = {"unit": ranges[name].unit, "scale": ranges[name].scale} if name in ranges else {}
        rested = resting.get(name, [])
        value = getattr(base, name)
        if not rested:
            stories[name] = ConstantFit(name, what, value, value, "not measured",
                                        "no measured phase rests on it: kept as shipped", **shown)
            continue
        stories[name] = ConstantFit(name, what, value, value, "calibrated", "", sorted({j.job for j, _ in rested}),
                                    noise=noise, **shown)
        free.append(name)

    # Bencher's cells anchor the constants fitted on them, each on the cells its rule takes (calibration.fit).
    rules = shipped.calibration().fitted
    anchored = [(job, phase, name) for job in anchors for phase, name in _rests_on(shares_of[id(job)]).items()
                if name is not None and name in rules and job.job in rules[name].cells
                and job.measured[phase] >= MIN_PHASE_SECONDS]

    def pairs_for(names: list[str]) -> list[tuple[Any, str]]:
        """The phases (measured jobs' and Bencher's) that rest on one of ``names``: each constant is fitted on the
        measurements that show it most, as the shipped fit's rules take each from the cells of its regime."""
        return ([(j, p) for n in names for j, p in resting.get(n, [])]
                + [(j, p) for j, p, n in anchored if n in names])

    model = base
    for _ in range(3):   # refit after setting aside what could not be fitted
        model = _fit(free, pairs_for(free), prices, base, ranges, moves) if free else base
        dropped = [name for name in free if not _judge(stories[name], resting[name], model, prices, base, ranges,
                                                       noise, [j.job for j, _, n in anchored if n == name])]
        if not dropped:
            break
        free = [n for n in free if n not in dropped]
    model = replace(base, **{n: getattr(model, n) for n in free}) if free else base
    for name in free:
        stories[name].value = getattr(model, name)
    return Calibrated(model, [stories[n] for n in constant_names()], jobs, list(set_aside or []))


def _judge(story: ConstantFit, rested: list[tuple[Any, str]], model: Model, prices: PriceTable, base: Model,
           ranges: Mapping[str, Any], noise: float, cells: list[str]) -> bool:
    """What each job resting on ``story``'s constant asks of it alone (the other constants as fitted), and whether the
    constant may move: True (calibrated, with its range), or False (kept, ``story.why`` saying why)."""
    name = story.name
    low, high = _bounds(name, getattr(base, name), ranges)
    fitted = getattr(model, name)
    by_job: dict[str, list[tuple[Any, str]]] = {}
    for j, p in rested:
        by_job.setdefault(j.job, []).append((j, p))
    supports: dict[str, tuple[float | None, float | None]] = {}
    asked: dict[str, float] = {}
    settings: dict[tuple[Any, ...], Any] = {}
    for job, mine in by_job.items():
        # Each phase may be off by the noise: the job supports what keeps its loss within that of its minimum.
        found = _valley(lambda v, mine=mine: _loss(mine, prices, replace(model, **{name: v})), low, high,
                        band=len(mine) * noise ** 2)
        if not found.depends:
            continue   # its loss does not move with the constant beyond the noise: it asks nothing
        supports[job] = found.support
        settings.setdefault(mine[0][0].setting, mine[0][0])
        if found.support[0] is not None and found.support[1] is not None:
            asked[job] = found.best
    story.per_job, story.supports = asked, supports
    if not supports:
        story.status, story.why = "kept", ("no job's phase moves with it beyond the runs' noise (±"
                                           f"{noise:.0%}) over its search ({low:.4g} to {high:.4g}): kept as shipped")
        return False
    if len(settings) < MIN_SCENARIOS:
        only = next(iter(settings.values()))
        story.status, story.why = "kept", (
            f"one scenario: only {_setting_said(only)} rests on it ({len(supports)} job(s), repeats of one another); "
            f"a constant moves on {MIN_SCENARIOS} scenarios or more (other datasets or instance types): "
            "experiments/calibrate.yaml measures each assumption twice")
        return False
    if min(fitted / low, high / fitted) < 1.05:
        story.status, story.why = "kept", (f"the measurements ask for {fitted:.4g}, at the end of the search "
                                           f"({low:.4g} to {high:.4g}): not a value this model can take")
        return False
    lows = [s[0] if s[0] is not None else low for s in supports.values()]
    highs = [s[1] if s[1] is not None else high for s in supports.values()]
    if max(lows) > min(highs):
        far_low = max(supports, key=lambda k: lows[list(supports).index(k)])
        far_high = min(supports, key=lambda k: highs[list(supports).index(k)])
        story.status, story.why = "kept", (
            f"inconsistent: beyond the runs' noise (±{noise:.0%} a phase), {far_low} supports {max(lows):.4g} or more "
            f"and {far_high} {min(highs):.4g} or less")
        return False
    allowed = (f"{max(lows):.4g} or more" if min(highs) >= high * 0.999 else f"{min(highs):.4g} or less"
               if max(lows) <= low * 1.001 else f"{max(lows):.4g} to {min(highs):.4g}")
    if not asked and max(lows) <= story.shipped <= min(highs):
        story.status, story.why = "kept", (f"the jobs bound it but pin no value (each one's loss is flat beyond its "
                                           f"bound): they allow {allowed}, the shipped value among them: kept")
        return False
    # The range: every value a job supports. A side where a job's support runs to the search's end (its loss flat
    # there) pins nothing: the range keeps the plausible range's end there where it lies beyond the value, else runs
    # to the search's end, never a narrow band at a search bound.
    plausible = ranges.get(name)
    range_low = min(lows) if all(s[0] is not None for s in supports.values()) else \
        (plausible.low if plausible is not None and plausible.low < fitted else low)
    range_high = max(highs) if all(s[1] is not None for s in supports.values()) else \
        (plausible.high if plausible is not None and plausible.high > fitted else high)
    range_low, range_high = min(range_low, fitted), max(range_high, fitted)
    story.range = (range_low, range_high)
    story.uncertainty = max(math.log(range_high / fitted), math.log(fitted / range_low))
    story.status = "calibrated"
    values = list(asked.values())
    story.why = (f"{len(supports)} jobs of {len(settings)} scenarios rest on it; " +
                 (f"alone they ask for {min(values):.4g} to {max(values):.4g} (median {median(values):.4g}); "
                  if values else f"they bound it on one side only ({allowed}), the shipped value outside: moved to the "
                                 "nearest value they allow; ") +
                 f"within the runs' noise (±{noise:.0%} a phase) they support {range_low:.4g} to {range_high:.4g}")
    if cells:   # fitted on both: Bencher's cells keep their say, as the shipped fit gave it them
        story.why += (f"; fitted together with Bencher's cells {', '.join(sorted(set(cells)))}, which ask for "
                      f"{getattr(base, name):.4g}")
    return True


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
    """Leave one scenario out: None where the jobs hold fewer than two scenarios (nothing to leave out). Only whole jobs
    are predicted (an interrupted job's attempt, or a warm start, is not the job the model prices); every job of the
    other scenarios calibrates."""
    scenarios = sorted({j.scenario for j in jobs if j.whole})
    if len(scenarios) < 2:
        return None
    before, after = [], []
    for scenario in scenarios:
        rest = [j for j in jobs if j.scenario != scenario]
        model = calibrate(rest, prices, base).model
        for job in (j for j in jobs if j.scenario == scenario and j.whole):
            before.append(_error(job, prices, base))
            after.append(_error(job, prices, model))
    return OutOfSample(scenarios, before, after)


def _cell(job: Any, prices: PriceTable, model: Model) -> dict[str, Any]:
    """One measured cell of a calibration file: where it came from, what it measured, the estimate before and after."""
    compared = job.headline if job.headline in job.measured else job.phases[0]
    out = {**job.provenance(), "dataset": job.dataset, "source": job.source,
           "measured": {k: round(v, 1) for k, v in job.measured.items()},
           "estimated_shipped": round(job.predict(prices, MODEL)[compared], 1),
           "estimated_calibrated": round(job.predict(prices, model)[compared], 1), "compared": compared,
           **({"fitted": list(job.phases)} if job.headline == "billable" and tuple(job.phases) != PHASES else {}),
           **({"spot_saving": round(job.spot_saving, 4)} if job.spot_saving else {}),
           **({"read_as": job.read_as} if job.read_as else {})}
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
        # Jobs (or parts of them) no constant was fitted on, each with why (an interrupted spot job's training).
        "set_aside": [{"job": job, "why": why} for job, why in found.set_aside],
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
           "RESULTS_SCHEMA_VERSION", "CheckpointJob", "Reading", "bencher_jobs", "calibrate", "checkpoint_jobs",
           "calibration_document", "check_results", "compare", "elasticities", "measured_jobs", "planned_jobs",
           "out_of_sample", "read_job", "read_runs", "rests_on"]
