"""Every job of an experiment as the answer sees it on the lab as it stands: what `dslab plan`, `run`, `export` and
the workflow's Plan refuse before a request is built (``checked_jobs``), and each request's MaxRuntimeInSeconds
(``max_runtimes``). A data job is answer/scenarios.py's JobCheck; a checkpoint trial's jobs are checked here: how long
each runs, and whether its target holds its checkpoints.

A writer saves ``writes`` checkpoints, each after the workload's ``time_between_checkpoints`` of emulated compute
(DLIO's interval), then reads back ``reads`` (none where a restore job follows a file-system writer: MLPerf Storage
reads on a new instance); a sync writer's job lasts until its last upload is in S3. A restore job starts on a new
instance: the sync's copies every checkpoint under the S3 URI in first, then each read. Every save, read and copy is
the checkpoint model's (model/checkpoint_estimate.py) for the target as the lab stands, at the trial's scale, every
checkpoint written kept (DLIO keeps each in its own folder). The model gives no range for a checkpoint job: its
point is its top, and RUNTIME_MARGIN is the room above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..errors import ConfigError
from ..experiment import Experiment, Trial
from ..facts.limits import runtime_problem
from ..facts.prices import PriceTable
from ..model.calibration import SHIPPED
from ..model.provisioning import AS_DEPLOYED
from ..model.checkpoint_estimate import GIB, HEADROOM, Question, TargetEstimate, estimate_target
from ..modes import CHECKPOINT_TARGET_LABELS, CHECKPOINT_TARGET_MODES, CKPT_FSX, FILE, SYNC_TARGETS
from .answer import max_runtime_for
from .scenarios import job_checks

WRITER, RESTORE = "write", "restore"


@dataclass(frozen=True)
class CheckpointJobCheck:
    """One checkpoint job (a target's writer, or the restore job after it) on the lab as it stands."""
    trial: Trial
    target: str
    restore: bool
    estimate: TargetEstimate     # the target as the lab stands, for the job as it runs
    seconds: float               # the job's wall time, one instance's clock
    field_prefix: str            # "" for an experiment of one trial, else "trials[i]."
    answer_fix: str = ""         # the trial's answer's provisioning of this target, where it has one (a command)
    lab_fsx_gib: int = 0         # FSx's capacity as the lab stands
    parts: dict[str, float] = field(default_factory=dict, compare=False)   # where the seconds go

    @property
    def key(self) -> tuple[str, str, str, str]:
        """The request's key in requests.plan's ``runtimes`` (requests.runtime_key)."""
        return (self.trial.name, self.trial.checkpoint.dataset.name, CHECKPOINT_TARGET_MODES[self.target],
                f"{self.target}:{RESTORE if self.restore else WRITER}")

    @property
    def what(self) -> str:
        job = "restore job" if self.restore else "writer"
        return f"trial {self.trial.name}'s {CHECKPOINT_TARGET_LABELS[self.target]} {job}"

    @property
    def max_run_given(self) -> bool:
        return "max_run_seconds" in self.trial.given

    @property
    def max_runtime_seconds(self) -> int:
        """What the request asks for: the trial's max_run_seconds where it says one, else from this estimate."""
        return self.trial.max_run_seconds if self.max_run_given else max_runtime_for(self.seconds)

    @property
    def problem(self) -> tuple[str, str] | None:
        """(field, why) where this job cannot run as planned, else None."""
        p = self.field_prefix
        if self.estimate.blocker and self.target == CKPT_FSX:
            writes = self.trial.checkpoint.workload.writes
            need = self.trial.checkpoint.plan(self.trial).bytes * writes * HEADROOM / GIB
            provision = self.answer_fix or "what `dslab size --workload` provisions"
            return (f"{p}checkpoint.targets", f"{self.what}: its {writes} checkpoints need {need:,.0f} GiB, FSx as the "
                    f"lab stands has {self.lab_fsx_gib:,}: deploy {provision}, fewer checkpoint.writes, or drop fsx")
        if self.estimate.blocker:
            return (f"{p}checkpoint.targets", f"{self.what}: {self.estimate.blocker}")
        too_long = runtime_problem(self.seconds, self.what, "fewer checkpoint.writes, a shorter "
                                   "time_between_checkpoints, a smaller scale, or a faster target")
        if too_long:
            return (f"{p}checkpoint.writes", too_long)
        if self.max_run_given and self.trial.max_run_seconds < self.seconds:
            return (f"{p}max_run_seconds",
                    f"{self.trial.max_run_seconds:,} s is shorter than {self.what} may take ({self.seconds / 3600:,.1f} h:"
                    f" its saves and the time between them): give at least {max_runtime_for(self.seconds):,}, or "
                    "leave it out (it is then sized from the estimate)")
        return None


def job_seconds(trial: Trial, target: str, restore: bool, estimate: TargetEstimate, startup: float) -> dict[str, float]:
    """Where a checkpoint job's seconds go (one instance's clock): start-up, the compute between checkpoints, the
    saves (a sync writer's stall on its volume; a file system's whole save), the last upload, the copy-in, the reads."""
    workload = trial.checkpoint.workload
    interval = max(0.0, workload.interval_seconds)
    sync = target in SYNC_TARGETS
    # A sync job reads its own files from its volume; a file-system job reads a checkpoint back from the file system.
    read_one = (estimate.restore_seconds - (estimate.copy_in_seconds or 0.0)) if sync else estimate.restore_seconds
    follows = trial.checkpoint.restore and workload.reads > 0
    if restore:
        writes, reads = 0, workload.reads
    else:
        writes, reads = workload.writes, (workload.reads if sync or not follows else 0)
    parts = {"start-up": startup, "compute between checkpoints": (writes + reads) * interval,
             "saves": writes * (estimate.stall_seconds if sync else estimate.save_seconds),
             "last upload": (estimate.upload_seconds or 0.0) if sync and writes else 0.0,
             "copy-in": (estimate.copy_in_seconds or 0.0) if sync and restore else 0.0,
             "reads": reads * read_one}
    return parts


def checkpoint_job_checks(experiment: Experiment, prices: PriceTable, lab: Any) -> list[CheckpointJobCheck]:
    """Every checkpoint job of the experiment (each target's writer, and its restore job where one follows) as the
    answer sees it on ``lab``."""
    from .checkpoints import trial_checkpoint_answer
    calibration = experiment.calibration or SHIPPED
    lab = lab if lab is not None else AS_DEPLOYED
    checks = []
    for index, trial in enumerate(experiment.trials):
        if trial.checkpoint is None:
            continue
        workload = trial.checkpoint.workload
        question = Question(trial.checkpoint.plan(trial), trial.instance_type, max(1.0, workload.interval_seconds),
                            max(1, workload.writes), prices, lab, trial.volume_size_gb, calibration.model)
        prefix = f"trials[{index}]." if len(experiment.trials) > 1 else ""
        answer = None
        for target in trial.checkpoint.targets:
            estimate = estimate_target(question, target)
            fix = ""
            if estimate.blocker and target == CKPT_FSX:
                answer = answer or trial_checkpoint_answer(trial, lab, prices, experiment.calibration)
                provisioned = answer.target(CKPT_FSX).estimate
                fix = f"what its answer provisions (`{provisioned.command()}`)"
            startup = calibration.model.startup(FILE if target in SYNC_TARGETS else CHECKPOINT_TARGET_MODES[target])
            jobs = [False] + ([True] if trial.checkpoint.restore and workload.reads else [])
            for restore in jobs:
                parts = job_seconds(trial, target, restore, estimate, startup)
                checks.append(CheckpointJobCheck(trial, target, restore, estimate, sum(parts.values()), prefix, fix,
                                                 lab.fsx.capacity_gib, parts))
    return checks


def checked_jobs(experiment: Experiment, prices: PriceTable, *, stats: Mapping[str, Any] | None = None,
                 lab: Any = None) -> list[Any]:
    """``job_checks`` and ``checkpoint_job_checks``, refusing the first job that cannot run as planned (a ConfigError naming its key and the fix):
    what `dslab plan`, `run`, `export` and the workflow's Plan all refuse, before a request is built."""
    checks: list[Any] = job_checks(experiment, prices, stats=stats, lab=lab)
    checks += checkpoint_job_checks(experiment, prices, lab)
    for check in checks:
        problem = check.problem
        if problem:
            raise ConfigError(*problem)
    return checks


def max_runtimes(checks: Iterable[Any]) -> dict[tuple[str, str, str, str], int]:
    """Each checked job's MaxRuntimeInSeconds, by (trial, dataset, mode, storage): what ``requests.plan`` asks for."""
    return {check.key: check.max_runtime_seconds for check in checks}


__all__ = ["CheckpointJobCheck", "checked_jobs", "checkpoint_job_checks", "job_seconds", "max_runtimes"]
