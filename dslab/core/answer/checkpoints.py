"""Where checkpoints go, answered once: `estimate`, `recommend` and `size` with a checkpointing workload, `recommend
--experiment`'s checkpoint trials and the report's estimated answer are views of the ``CheckpointAnswer`` that
``checkpoint_answer(question)`` returns.

Every target on one rule, the data answer's (answer.py): **as it would be provisioned for this question**, with the
lab as it stands beside it where that differs.

- SageMaker's checkpoint sync to the data bucket or the directory bucket: nothing to provision (the instance's volume
  sets the stall); as the instance stands.
- FSx and EFS: the deployment, capacity or throughput mode whose day costs least (the cluster idle while it saves,
  the checkpoints' storage, what the file system bills standing, the requests), among those that save within the
  question's ``save_under`` where it gives one; those that cannot keep up with the interval come last.

The pick is the cheapest day among the targets that keep up and hold the checkpoints; the runner-up the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.checkpoint_estimate import Question, TargetEstimate, candidates, estimate_target, option_name
from ..modes import CHECKPOINT_TARGETS, CKPT_FSX, SYNC_TARGETS
from .premise import Premise

# Where the lab as it stands and the provisioning differ by less than this share of a day's cost, they agree.
SAME_WITHIN = 0.005


@dataclass(frozen=True)
class CheckpointQuestion:
    """The checkpoint question every path asks: the premise (its plan, interval and kept checkpoints, priced on the
    lab as deployed), the prices, the targets, and the longest a save may take (None: the cheapest day that keeps up)."""
    premise: Premise
    question: Question
    targets: tuple[str, ...] = CHECKPOINT_TARGETS
    workload: Any = field(default=None, compare=False)

    @property
    def save_under(self) -> float | None:
        return self.premise.checkpoint.save_under

    def to_dict(self) -> dict[str, Any]:
        return {"premise": self.premise.to_dict(), "targets": list(self.targets), "save_under_seconds": self.save_under,
                "prices": self.question.prices.label()}


@dataclass
class TargetAnswer:
    """One target: as provisioned for the question, with the lab as it stands beside it."""
    estimate: TargetEstimate
    deployed: TargetEstimate
    rank: int = 0

    @property
    def target(self) -> str:
        return self.estimate.target

    @property
    def label(self) -> str:
        return self.estimate.label

    @property
    def usable(self) -> bool:
        return not self.estimate.blocker and not self.estimate.warnings

    @property
    def differs(self) -> str | None:
        """Where the lab as it stands gives another answer for this target, in a few words."""
        d, e = self.deployed, self.estimate
        if d.blocker and not e.blocker:
            return f"as deployed ({d.provision}): cannot ({d.blocker.split(':')[0]})"
        if d.warnings and not e.warnings:
            return f"as deployed ({d.provision}): cannot keep up ({d.warnings[0]})"
        if d.blocker or e.blocker or d.provision == e.provision:
            return None
        if abs(d.usd_per_day - e.usd_per_day) <= SAME_WITHIN * max(e.usd_per_day, 1e-9):
            return None
        return f"as deployed ({d.provision}): ${d.usd_per_day:,.2f} a day, {d.save_seconds:,.1f} s a save"

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, **self.estimate.to_dict(), "usable": self.usable,
                "as_deployed": {**self.deployed.to_dict(), "differs": self.differs}}


@dataclass
class CheckpointAnswer:
    question: CheckpointQuestion
    targets: list[TargetAnswer]       # the pick, the runner-up, then by a day's cost; those that cannot, last
    pick: TargetAnswer | None
    runner_up: TargetAnswer | None
    why: str
    passed_over: dict[str, str]

    @property
    def premise(self) -> Premise:
        return self.question.premise

    def target(self, name: str) -> TargetAnswer:
        return next(t for t in self.targets if t.target == name)

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question.to_dict(),
                "rule": "each target as it would be provisioned for this question: FSx and EFS for the cheapest day"
                        + (f" that saves within {self.question.save_under:g} s" if self.question.save_under else ""),
                "pick": self.pick.target if self.pick else None,
                "runner_up": self.runner_up.target if self.runner_up else None, "why": self.why,
                "passed_over": dict(self.passed_over), "targets": [t.to_dict() for t in self.targets],
                "lab": self.question.question.lab.to_dict()}


def provisioned(q: Question, target: str, save_under: float | None) -> TargetEstimate:
    """FSx or EFS provisioned for the question: the cheapest day among what the lab builds (that saves within
    ``save_under``, where given); those that keep up with the interval first. Where nothing saves within it, the
    lab as it stands, refused with what the fastest option reaches."""
    options = [c for c in candidates(q, target, "provisioned for this question") if not c.blocker]
    if save_under is not None:
        fits = [c for c in options if c.save_seconds <= save_under]
        if not fits:
            fastest = min(options or candidates(q, target, "provisioned"), key=lambda c: c.save_seconds)
            row = estimate_target(q, target)
            row.blocker = (f"nothing the lab builds saves within {save_under:g} s: the fastest, {fastest.provision}, "
                           f"takes {fastest.save_seconds:,.1f} s ({fastest.bound})")
            return row
        options = fits
    if not options:
        return estimate_target(q, target)
    best = min(options, key=lambda c: (bool(c.warnings), c.usd_per_day, c.save_seconds))
    if best.settings == _settings_as_deployed(q, target):
        best.premise = q.lab.premise_of("fsx" if target == CKPT_FSX else "efs")
        best.settings = {}
    return best


def _settings_as_deployed(q: Question, target: str) -> dict[str, Any]:
    return q.lab.fsx.settings() if target == CKPT_FSX else q.lab.efs.settings()


def checkpoint_answer(question: CheckpointQuestion) -> CheckpointAnswer:
    """Every target as provisioned for the question and as the lab stands, the pick and the runner-up."""
    q, save_under = question.question, question.save_under
    answers = []
    for target in question.targets:
        deployed = estimate_target(q, target)
        if target in SYNC_TARGETS:
            estimate = estimate_target(q, target)
            if save_under is not None and estimate.stall_seconds > save_under:
                estimate.warnings.append(f"its stall, {estimate.stall_seconds:,.1f} s, is longer than {save_under:g} s: "
                                         f"{_volume_fix(q)} sets it")
        else:
            estimate = provisioned(q, target, save_under)
        answers.append(TargetAnswer(estimate, deployed))
    usable = sorted((a for a in answers if a.usable), key=lambda a: (a.estimate.usd_per_day, a.estimate.save_seconds))
    rest = sorted((a for a in answers if not a.usable), key=lambda a: (bool(a.estimate.blocker), a.estimate.usd_per_day))
    ordered = usable + rest
    for i, a in enumerate(usable, 1):
        a.rank = i
    pick = usable[0] if usable else None
    runner = usable[1] if len(usable) > 1 else None
    passed: dict[str, str] = {}
    for a in rest:
        e = a.estimate
        passed[option_name(e)] = f"cannot: {e.blocker}" if e.blocker else f"cannot keep up: {'; '.join(e.warnings)}"
    if pick is None:
        why = ("no target keeps up at this interval: a longer --checkpoint-every, fewer kept, or a larger --save-under"
               if save_under else "no target keeps up at this interval: a longer --checkpoint-every or fewer kept")
    else:
        p = pick.estimate
        parts = [f"${p.usd_per_day:,.2f} a day: the cluster idle ${p.idle_usd_per_day:,.2f} "
                 f"({p.stall_seconds:,.1f} s a save x {p.saves_per_day:,.0f} saves)"]
        if p.storage_usd_per_day or p.standing_usd_per_day:
            parts.append(f"storage ${p.storage_usd_per_day + p.standing_usd_per_day:,.2f}")
        if p.requests_usd_per_day:
            parts.append(f"requests ${p.requests_usd_per_day:,.2f}")
        why = "the cheapest day that keeps up: " + ", ".join(parts)
    return CheckpointAnswer(question, ordered, pick, runner, why, passed)


def trial_checkpoint_answer(trial: Any, lab: Any, prices: Any, calibration: Any = None) -> CheckpointAnswer:
    """A checkpoint trial's answer (`recommend --experiment`, the report, plan's refusal of a target): where its
    checkpoints at the workload's full size go on its cluster, every 30 minutes, every checkpoint the trial writes kept
    (as its jobs keep them, and as `dslab recommend --workload` keeps them by default: default_keep)."""
    from dataclasses import replace

    from ..model.checkpoint_estimate import DEFAULT_EVERY_SECONDS, default_keep
    from .premise import CheckpointPremise
    from .scenarios import checkpoint_premise_of_trial
    full = replace(trial, checkpoint=replace(trial.checkpoint, workload=replace(trial.checkpoint.workload, scale=1.0)))
    premise = checkpoint_premise_of_trial(full, lab, calibration)
    keep = default_keep(trial.checkpoint.workload)
    premise = replace(premise, checkpoint=CheckpointPremise(premise.checkpoint.plan, DEFAULT_EVERY_SECONDS, keep))
    question = Question(premise.checkpoint.plan, trial.instance_type, DEFAULT_EVERY_SECONDS, keep, prices,
                        premise.lab, trial.volume_size_gb, premise.calibration.model)
    return checkpoint_answer(CheckpointQuestion(premise, question))


def _volume_fix(q: Question) -> str:
    """What sets a sync target's stall: the instance's own storage (NVMe, fixed) or its gp2 volume."""
    from ..facts.instances import instance_storage_gb
    if instance_storage_gb(q.instance_type):
        return "the instance's NVMe storage (fixed: an instance with faster storage, or FSx, saves sooner)"
    return "the instance's gp2 volume (a larger one, up to 250 MiB/s, or an NVMe instance)"


__all__ = ["CheckpointAnswer", "CheckpointQuestion", "TargetAnswer", "checkpoint_answer", "provisioned",
           "trial_checkpoint_answer"]
