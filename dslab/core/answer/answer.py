"""One answer to a question, computed once: `estimate`, `recommend`, `size`, `plan`'s checks, `export` and the report
are views of the ``Answer`` that ``answer(question)`` returns, and none of them prices, provisions or picks on its own.

A ``Question`` is the premise (the cluster, the epochs, the compute, the dataset's shape and the lab as deployed), the
sources it may read from, and what the data or the script asks of them (random reads, data that lives in EFS, one
script for SageMaker, EC2 and EKS). For every source the answer holds:

- the provisioning it is priced on: **as it would be provisioned for this question** (`dslab size`'s search: the
  cheapest FSx that holds the data and feeds the cluster, EFS's cheapest throughput mode that feeds it, as many S3
  prefixes as the requests need, the directory bucket's read quota), with the commands that provision it;
- its estimate with its range, the job's time and the time to a result (set-up included), its cost to a result;
- the same job on **the lab as it stands** beside it, and where that differs ("as deployed: cannot hold the data");
- what blocks it.

One rule for what is compared, stated in every premise: each source as it would be provisioned, never a mix of
provisioned and as-deployed figures. The pick and the runner-up are chosen once, by ``decision.decide``; the sources
are listed in the decision's own order (the pick first, the runner-up second).
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from ..facts.limits import MAX_RUNTIME_SECONDS, RUNTIME_FIELDS, RUNTIME_FIX, none_too_long
from ..facts.prices import PriceTable
from ..model.estimate import BreakEven, Estimate, fsx_express_break_even
from ..model.provisioning import AS_DEPLOYED, Provisioning, as_deployed
from ..modes import EFS, EXPRESS, FASTFILE, FSX, MODES, S3_READ_MODES, SCRIPT, STANDARD, source_label
from ..shape import DatasetShape
from .decision import (ADVICE_MIN_SAVING, Decision, Option, decide, option_from_estimate, portability_blocker,
                       random_access_blocker, top_job_seconds, duration, usd)
from .premise import Premise
from .sizing import MAX_CLUSTER, SourceSize, Sizing, size

# Every source the lab can run: the six modes on the lab's bucket, the S3 modes and Script on the directory bucket.
ALL_SOURCES: tuple[tuple[str, str], ...] = tuple((m, STANDARD) for m in MODES) + tuple((m, EXPRESS) for m in S3_READ_MODES)

# The rule every premise states (``Answer.rule``).
RULE = "each source as `dslab size` provisions it for this question"

# MaxRuntimeInSeconds from the estimate: the top of the job's range on the lab as it stands, with this margin, at
# least an hour (a job's start-up alone varies by minutes), at most SageMaker's 28 days.
RUNTIME_MARGIN = 1.5
RUNTIME_FLOOR_SECONDS = 3600

# Where the lab as it stands and the provisioning differ by less than this share, they are the same answer.
SAME_WITHIN = 0.005

SMALL_DATASET_BYTES = 75e9      # the post: "small (under 50-100 GB)"
LARGE_FILE_BYTES = 50e6         # the post: small files "under 50 MB", large files "50 MB and up"
PACKED_SHARD_BYTES = 150e6      # the post: FastFile is best "for containers of 150 MB and more"
# Files above this already hold many samples (shape.LARGE_FILE_BYTES): shards, not files to serialize.
SHARDED_FILE_BYTES = 1e6
# What --portable-script means, in the flowchart's words (the source post, "Bring your own data ingestion").
PORTABLE_REASON = ("the data must stay where it is, or one script must run unchanged on SageMaker, EC2 and EKS -> "
                   "the script reads S3 itself (boto3 or the S3 Connector for PyTorch). It costs the lineage: with no "
                   "channel SageMaker does not record the dataset, so the lab tags each job with its URI and stats")


@dataclass(frozen=True)
class Question:
    """What every path asks (the CLI's flags, an experiment's trial, a run's results), in one object."""
    premise: Premise
    prices: PriceTable
    sources: tuple[tuple[str, str], ...] = ALL_SOURCES
    random_access: bool = False     # the script reads files at random: the streaming sources cannot serve it
    data_in_efs: bool = False       # the dataset lives in EFS: every other source copies it out first
    portable: bool = False          # one script for SageMaker, EC2 and EKS, or data that must stay put
    # The inputs named, and what brings a job under SageMaker's 28 days, where every source's job outlasts it.
    runtime_field: str = RUNTIME_FIELDS
    runtime_fix: str = RUNTIME_FIX
    runtime_what: str = "{source}"   # how a refusal names a job ("trial long's {source} job on big-jpg")
    count_field: str = "--instance-count"   # what sets the instance count (an experiment's trial names its own)
    dataset_name: str | None = None         # an experiment's dataset, as its refusals name it
    dataset: str | None = None      # where the dataset was measured (a folder or prefix): the upload commands name it
    advise: bool = True             # the whole answer: the packing advice (itself an answer) and the break-even
    workload: Any = field(default=None, compare=False)   # the DLIO workload file the premise came from, if any

    @property
    def lab(self) -> Provisioning:
        return self.premise.lab if self.premise.lab is not None else as_deployed()

    @property
    def shape(self) -> DatasetShape:
        return self.premise.shape

    def to_dict(self) -> dict[str, Any]:
        return {"premise": self.premise.to_dict(), "sources": [source_label(m, s) for m, s in self.sources],
                "random_access": self.random_access, "data_in_efs": self.data_in_efs, "portable": self.portable,
                "prices": self.prices.label()}


@dataclass
class SourceAnswer:
    """One source's way to a result: priced as provisioned for the question, with the lab as it stands beside it."""
    sized: SourceSize          # `dslab size`'s row: AU, the largest cluster, what to provision and its commands
    option: Option             # the job and its set-up, as provisioned
    deployed: Option           # the same job on the lab as it stands
    rank: int = 0              # 1: the pick, 2: the runner-up, ... in the decision's order; 0: cannot serve

    @property
    def source(self) -> str:
        return self.option.source

    @property
    def mode(self) -> str:
        return self.option.mode

    @property
    def storage(self) -> str:
        return self.option.storage

    @property
    def estimate(self) -> Estimate:
        return self.sized.estimate

    @property
    def deployed_estimate(self) -> Estimate:
        return self.sized.deployed_estimate

    @property
    def blocker(self) -> str | None:
        return self.option.blocker

    @property
    def cost_usd(self) -> float:
        return self.option.cost_usd

    @property
    def cost_range(self) -> tuple[float, float] | None:
        return self.option.cost_interval

    @property
    def job_seconds(self) -> float:
        return self.option.job_seconds

    @property
    def seconds_to_result(self) -> float:
        return self.option.seconds

    @property
    def provisioned_as(self) -> str:
        return self.sized.short

    @property
    def commands(self) -> list[str]:
        return self.sized.commands

    @property
    def needs_provisioning(self) -> bool:
        """Whether the lab must change (a deploy, an upload over more prefixes, a quota) for the figures to hold."""
        return bool(self.sized.commands)

    @property
    def differs(self) -> str | None:
        """Where the lab as it stands gives another answer for this source, in a few words; None where it does not."""
        if self.deployed.blocker and not self.option.blocker:
            return f"as deployed: cannot run ({_first_clause(self.deployed.blocker)})"
        if self.deployed.blocker or self.option.blocker:
            return None
        cost, seconds = self.deployed.cost_usd, self.deployed.seconds
        if (abs(cost - self.option.cost_usd) <= SAME_WITHIN * max(self.option.cost_usd, 1e-9)
                and abs(seconds - self.option.seconds) <= SAME_WITHIN * max(self.option.seconds, 1e-9)):
            return None
        return f"as deployed: {usd(cost)}, {duration(seconds)} to a result"

    @property
    def max_runtime_seconds(self) -> int:
        """MaxRuntimeInSeconds for this job as it runs on the lab as it stands: the top of its estimate's range (one
        instance's clock) with RUNTIME_MARGIN, at least RUNTIME_FLOOR_SECONDS, at most SageMaker's 28 days."""
        return max_runtime_for(self.top_job_seconds)

    @property
    def top_job_seconds(self) -> float:
        """The top of the job's range on the lab as it stands, on one instance's clock."""
        return max(top_job_seconds(self.deployed_estimate), self.deployed.job_seconds)

    def to_dict(self) -> dict[str, Any]:
        o, d, s = self.option, self.deployed, self.sized
        out: dict[str, Any] = {
            "rank": self.rank, "source": self.source, "mode": self.mode, "storage": self.storage,
            "provisioned_as": s.short, "provision": s.provision, "commands": list(s.commands),
            "blocker": o.blocker, "bound": o.bound,
            "cost_to_result_usd": None if o.blocker else round(o.cost_usd, 4),
            "cost_to_result_range_usd": [round(v, 4) for v in o.cost_interval] if o.cost_interval and not o.blocker else None,
            "job_usd": None if o.blocker else round(o.job_usd, 4),
            "setup_usd": None if o.blocker else round(o.setup.usd, 4), "setup": o.setup.what,
            "job_seconds": None if o.blocker else round(o.job_seconds, 1),
            "setup_seconds": round(o.setup.seconds, 1),
            "time_to_result_seconds": None if o.blocker else round(o.seconds, 1),
            "au_percent": round(s.au_percent, 1), "max_instances_at_target_au": s.max_instances_at_target_au,
            "max_accelerators_at_target_au": s.max_accelerators_at_target_au,
            "measured_cell": o.measured,
            "standing_usd_per_hour": round(s.standing_usd_per_hour, 2),
            "deploy_settings": dict(s.deploy_settings), **({"unchanged": s.unchanged} if s.unchanged else {}),
            **({"quota": s.quota} if s.quota else {}), "notes": list(s.assumptions),
            "per_host_limit": s.per_host_limit, "shared_limit": s.shared_limit,
            "as_deployed": {"premise": s.deployed.get("premise"), "blocker": d.blocker,
                            "au_percent": s.deployed.get("au_percent"),
                            "max_instances_at_target_au": s.deployed.get("max_instances_at_target_au"),
                            "cost_to_result_usd": None if d.blocker else round(d.cost_usd, 4),
                            "job_usd": None if d.blocker else round(d.job_usd, 4),
                            "time_to_result_seconds": None if d.blocker else round(d.seconds, 1),
                            "job_seconds": None if d.blocker else round(d.job_seconds, 1),
                            "top_job_seconds": None if d.blocker else round(self.top_job_seconds, 1),
                            "max_runtime_seconds": None if d.blocker else self.max_runtime_seconds,
                            "differs": self.differs},
            "estimate": self.estimate.to_dict(),
        }
        return out


def max_runtime_for(top_seconds: float) -> int:
    """MaxRuntimeInSeconds for a job whose estimate's range tops at ``top_seconds`` (see RUNTIME_MARGIN)."""
    return int(min(MAX_RUNTIME_SECONDS, max(RUNTIME_FLOOR_SECONDS, math.ceil(top_seconds * RUNTIME_MARGIN / 60) * 60)))


def _first_clause(text: str) -> str:
    return text.split(":")[0].split(";")[0].strip()


@dataclass
class Answer:
    """The answer to one ``Question``: every source (the decision's order, then those that cannot serve), the pick
    and the runner-up, and what the views say beside them."""
    question: Question
    sources: list[SourceAnswer]
    decision: Decision
    sizing: Sizing
    flowchart: list[str] = field(default_factory=list)
    flowchart_source: str = ""
    advice: list[str] = field(default_factory=list)
    break_even: BreakEven | None = None
    assumptions: list[str] = field(default_factory=list)

    @property
    def premise(self) -> Premise:
        return self.question.premise

    @property
    def lab(self) -> Provisioning:
        return self.question.lab

    @property
    def pick(self) -> SourceAnswer:
        return self.source(self.decision.pick.source)

    @property
    def runner_up(self) -> SourceAnswer | None:
        return self.source(self.decision.runner_up.source) if self.decision.runner_up is not None else None

    @property
    def serving(self) -> list[SourceAnswer]:
        return [s for s in self.sources if not s.blocker]

    # What the views and tests read by the names the earlier Recommendation used.
    @property
    def mode(self) -> str:
        return self.decision.pick.mode

    @property
    def storage(self) -> str:
        return self.decision.pick.storage

    @property
    def estimates(self) -> dict[str, Estimate]:
        return {s.source: s.estimate for s in self.sources}

    def source(self, label: str, storage: str | None = None) -> SourceAnswer:
        """A source by its label ("Express FastFile"), or by mode and storage."""
        if storage is not None:
            label = source_label(label, storage)
        for s in self.sources:
            if s.source == label:
                return s
        raise KeyError(label)

    def has(self, label: str) -> bool:
        return any(s.source == label for s in self.sources)

    @property
    def rule(self) -> str:
        return RULE

    def to_dict(self) -> dict[str, Any]:
        d = self.decision
        out = {"question": self.question.to_dict(), "rule": self.rule,
               "pick": d.pick.source, "runner_up": d.runner_up.source if d.runner_up else None,
               "mode": d.pick.mode, "storage": d.pick.storage, "why": d.why,
               "noise": d.noise, "within_error": list(d.within_error), "passed_over": dict(d.passed_over),
               "blocked": dict(d.blocked), "sources": [s.to_dict() for s in self.sources],
               "advice": list(self.advice), "flowchart": {"steps": self.flowchart, "source": self.flowchart_source},
               "assumptions": list(self.assumptions), "notes": list(self.sizing.notes),
               "demand": {"mb_per_second_per_instance": round(self.sizing.demand_mbps_per_host, 1),
                          "objects_per_second_per_instance": round(self.sizing.demand_objects_per_host, 1),
                          "accelerators_per_instance": self.sizing.accelerators,
                          "au_target_percent": self.sizing.au_target},
               "lab": self.lab.to_dict()}
        combined = self.sizing.combined_deploy()
        if combined:
            out["deploy_all"] = combined
        if self.break_even is not None:
            out["fsx_express_break_even"] = self.break_even.to_dict()
        return out


def flowchart(shape: DatasetShape, *, random_access: bool = False, data_in_efs: bool = False,
              portable: bool = False) -> tuple[list[str], str]:
    """The source post's decision flowchart: its steps and the source it ends on (shown beside the pick as context:
    it decides on size thresholds, the pick on cost to a result)."""
    size_gb, mean_mb = shape.bytes / 1e9, shape.mean_file_bytes / 1e6
    if portable and not data_in_efs:
        return [PORTABLE_REASON], SCRIPT
    if data_in_efs:
        return ["the data already lives in EFS -> read it there"], EFS
    if random_access:
        return ["random reads -> a file system built for them: FSx for Lustre"], FSX
    mean = f"{mean_mb * 1000:,.0f} KB" if mean_mb < 1 else f"{mean_mb:,.1f} MB"
    if shape.bytes < SMALL_DATASET_BYTES:
        size_said = f"{size_gb:,.1f} GB" if shape.bytes >= 1e8 else f"{shape.bytes / 1e6:,.1f} MB"   # 40 MB, not "0.0 GB"
        steps = [f"small dataset ({size_said} < {SMALL_DATASET_BYTES / 1e9:.0f} GB) -> File mode"]
        if shape.mean_file_bytes <= SHARDED_FILE_BYTES:
            steps.append(f"small files (mean {mean} < 50 MB) -> serialize them into shards")
        elif shape.mean_file_bytes < LARGE_FILE_BYTES:   # already shards, smaller than the post's best
            steps.append(f"files of {mean} are shards already; the post finds ~{PACKED_SHARD_BYTES / 1e6:.0f} MB and up "
                         "read best")
        return steps, "File"
    if shape.mean_file_bytes >= LARGE_FILE_BYTES:
        return [f"large dataset ({size_gb:,.0f} GB) of large files (mean {mean}) -> FastFile"], FASTFILE
    if shape.mean_file_bytes > SHARDED_FILE_BYTES:   # shards already, under the post's 50 MB
        return [f"large dataset ({size_gb:,.0f} GB) of files of {mean} (under 50 MB) -> FSx for Lustre, or shards of "
                f"~{PACKED_SHARD_BYTES / 1e6:.0f} MB and up for FastFile"], FSX
    return [f"large dataset ({size_gb:,.0f} GB) of small files (mean {mean}) -> FSx for Lustre, "
            "unless the files can be packed into large shards"], FSX


def _blocker_of_question(question: Question, mode: str, storage: str) -> str | None:
    """What the question itself rules out: random reads from a stream, a copy where the data must stay put."""
    if question.random_access and random_access_blocker(mode):
        return random_access_blocker(mode)
    if question.portable:
        return portability_blocker(mode) or (
            "a staging copy into the directory bucket moves the data" if storage == EXPRESS else
            "a copy into EFS moves the data" if mode == EFS and not question.data_in_efs else None)
    return None


# Answers computed in this process, by question: a command that reads one answer several times (`export` checks the
# plan, then picks from the same answers; the packing advice asks the packed shape's) computes it once. Answers are
# not changed once made.
_ANSWERS: "OrderedDict[Any, Answer]" = OrderedDict()
_ANSWERS_KEPT = 128


def answer(question: Question) -> Answer:
    """The answer to ``question``: every source priced as provisioned for it, the lab as it stands beside each, the
    pick and the runner-up (module docstring), computed once per question in a process. Raises ConfigError where no
    source can serve it."""
    try:
        key = (replace(question, prices=None), json.dumps(question.prices.data, sort_keys=True, default=str))
        hash(key)
    except TypeError:   # a premise holding something unhashable: computed, not kept
        return _answer(question)
    if key in _ANSWERS:
        _ANSWERS.move_to_end(key)
        return _ANSWERS[key]
    found = _answer(question)
    _ANSWERS[key] = found
    while len(_ANSWERS) > _ANSWERS_KEPT:
        _ANSWERS.popitem(last=False)
    return found


def _answer(question: Question) -> Answer:
    p, prices = question.premise, question.prices
    shape, lab = p.shape, question.lab
    if p.instance_count > shape.files:
        # "Don't choose more ML compute instances for training than available S3 objects. If you do, some nodes won't
        # get any data" (S3DataSource); the lab's script meets the same bound where it splits the files itself. The
        # same refusal as `dslab plan`'s (requests.check_every_host_gets_data), for every path to the answer.
        extra = p.instance_count - shape.files
        named = f"dataset '{question.dataset_name}'" if question.dataset_name else "the dataset"
        raise ConfigError(question.count_field, f"{p.instance_count:,} instances but {named} has {shape.files:,} "
                          f"object{'s' if shape.files != 1 else ''}, so {extra:,} instance{'s' if extra != 1 else ''} would "
                          "get none and fail the job", f"at most {shape.files:,} instances, or more objects")
    sources = tuple(question.sources)
    sizing = size(shape, instance_type=p.instance_type, count=p.instance_count, rate=p.rate, prices=prices,
                  epochs=p.epochs, accelerators=p.accelerators, deployed=lab, au_target=p.au_target, readers=p.readers,
                  volume_size_gb=p.volume_size_gb, sources=sources, data_in_efs=question.data_in_efs,
                  calibration=p.calibration, script_concurrency=p.s3_concurrency)
    if question.dataset:   # the upload commands name the dataset where it was given
        from .sizing import DATASET_FOLDER, DATASET_PREFIX
        placeholder = DATASET_PREFIX if question.dataset.startswith("s3://") else DATASET_FOLDER
        for row in sizing.sources:
            row.commands = [c.replace(placeholder, question.dataset) for c in row.commands]
    answers = []
    for row in sizing.sources:
        # Each estimate holds its instance count and the FSx it priced: the option reads them there.
        option = option_from_estimate(row.estimate, shape, prices, data_in_efs=question.data_in_efs)
        deployed = option_from_estimate(row.deployed_estimate, shape, prices, data_in_efs=question.data_in_efs)
        ruled_out = _blocker_of_question(question, option.mode, option.storage)
        if ruled_out:
            option = replace(option, blocker=option.blocker or ruled_out)
            deployed = replace(deployed, blocker=deployed.blocker or ruled_out)
        answers.append(SourceAnswer(row, option, deployed))
    # SageMaker stops a job at 28 days: refused where every source's job would outlast it (naming the inputs).
    none_too_long({a.source: max(top_job_seconds(a.estimate), a.job_seconds) for a in answers if not a.estimate.blocker},
                  question.runtime_field, question.runtime_fix, question.runtime_what,
                  points={a.source: a.job_seconds for a in answers})
    decision = decide(a.option for a in answers)
    order = {o.source: i for i, o in enumerate(decision.ranking, 1)}
    for a in answers:
        a.rank = order.get(a.source, 0)
    answers.sort(key=lambda a: (a.rank == 0, a.rank))
    steps, chart_source = flowchart(shape, random_access=question.random_access, data_in_efs=question.data_in_efs,
                                    portable=question.portable)
    result = Answer(question, answers, decision, sizing, steps, chart_source,
                    assumptions=list(dict.fromkeys(x for a in answers for x in a.estimate.assumptions)))
    result.advice = _advice(result)
    # The break-even is said beside a whole answer; an answer asked only for its pick (the packing advice's) skips it.
    result.break_even = _break_even(result) if question.advise else None
    return result


def _break_even(result: Answer) -> BreakEven | None:
    """FSx's hourly bill against Express's one-off copy, per epoch count, each as provisioned for the question: told
    beside the answer (the source post leaves the question open), not as advice (the pick weighs both already)."""
    if not (result.has(source_label(FASTFILE, EXPRESS)) and result.has(FSX)):
        return None
    fsx = result.source(FSX)
    if fsx.blocker:
        return None
    p = result.premise
    kwargs = {k: v for k, v in p.estimate_kwargs().items() if k != "epochs"}
    found = fsx_express_break_even(result.question.shape, max_epochs=max(100, p.epochs),
                                   provisioning=fsx.estimate.provisioning, prices=result.question.prices, **kwargs)
    # Torn down by hand at the run's end, as priced; what the lab's idle guard would add is said beside it.
    lab = p.lab or AS_DEPLOYED
    if found.assumptions:   # the first says FSx's hours: from its creation to the run's end, then torn down
        standing = lab.fsx_left_standing(result.question.prices, (fsx.estimate.provisioning or lab).fsx)
        found.assumptions[0] += f" (`dslab fsx down`; {standing})"
    return found


def _advice(result: Answer) -> list[str]:
    """What saves money or explains the pick, each said once: packing small files into shards (where it saves at
    least ADVICE_MIN_SAVING), an I/O-bound pick, what the pick asks to be set up and torn down."""
    q, pick = result.question, result.pick
    shape = q.shape
    advice: list[str] = []
    if q.advise and shape.mean_file_bytes < LARGE_FILE_BYTES and not q.data_in_efs:
        shards = max(1, int(round(shape.bytes / PACKED_SHARD_BYTES)))
        samples, _ = shape.sample_count()
        packed = DatasetShape(files=shards, bytes=shape.bytes, samples=samples)
        try:
            packed_answer = answer(replace(q, premise=replace(q.premise, shape=packed), advise=False))
        except ConfigError:
            packed_answer = None
        if packed_answer is not None:
            other = packed_answer.pick
            saving = pick.cost_usd - other.cost_usd
            if pick.cost_usd > 0 and saving / pick.cost_usd >= ADVICE_MIN_SAVING:
                advice.append(f"pack into ~{PACKED_SHARD_BYTES / 1e6:.0f} MB shards ({shards:,} "
                              f"shard{'s' if shards > 1 else ''}; dslab dataset "
                              f"pack --shard-size 150MB) and read them with {other.source}: {usd(other.cost_usd)} instead "
                              f"of {usd(pick.cost_usd)} per run (saves {saving / pick.cost_usd:.0%})")
    if pick.option.bound == "I/O":
        advice.append(f"{pick.source} is I/O-bound here: the accelerator waits for data; more readers or larger files help")
    if pick.storage == EXPRESS:
        staging = pick.option.setup
        advice.append(f"the workflow stages the dataset into the directory bucket first (~{duration(staging.seconds)}, "
                      f"{usd(staging.usd)}); empty it after the runs (dslab express empty)")
    if pick.mode == SCRIPT:
        advice.append("no input channel: SageMaker's lineage does not record the dataset; `dslab run` tags each job "
                      "with dslab:dataset-uri and the stats file's files, bytes and SHA-256 (do the same in your own jobs)")
    if pick.mode == FSX:
        lab = result.premise.lab or AS_DEPLOYED   # the guard is the deployed lab's, FSx the one priced
        standing = lab.fsx_left_standing(q.prices, (pick.estimate.provisioning or lab).fsx)
        importing = duration(pick.option.setup.seconds)
        advice.append(f"FSx bills while it stands (it imports the dataset's metadata in ~{importing} before the first "
                      f"job): tear it down after the runs (dslab fsx down); {standing}")
    if pick.commands:
        advice.append(f"{pick.source} as priced needs the lab provisioned for it first: {'; '.join(pick.commands)}")
    largest = pick.sized.max_instances_at_target_au
    if result.premise.instance_count > 1 or result.sizing.accelerators > 1:
        fed = ("no shared limit binds" if largest >= MAX_CLUSTER else
               f"feeds up to {largest:,} instances at AU >= {result.sizing.au_target:g}%" if largest else
               f"feeds not even one at AU >= {result.sizing.au_target:g}%")
        advice.append(f"at {result.premise.instance_count:,} x {result.premise.instance_type}, {pick.source} as priced: "
                      f"AU {pick.sized.au_percent:.0f}%, {fed} (`dslab size` for every source)")
    return advice


__all__ = ["ALL_SOURCES", "Answer", "Question", "RULE", "SourceAnswer", "answer", "flowchart", "max_runtime_for"]
