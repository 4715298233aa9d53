"""Which data source to pick, and why: one decision, used by `dslab recommend`, `dslab export`, the
report and `dslab local`'s summary.

A candidate is a data source with what one run pays to reach a result:

- the job: instance time, volumes, requests (estimated by ``estimate.py``, or measured in a record);
- its set-up, paid before or beside the job, priced from the dataset's files and bytes
  (``setup_cost``): EFS the DataSync copy into EFS and EFS storage while it is read; Express the
  staging copy into the directory bucket; FSx the file system's uptime while it imports the
  dataset's S3 metadata (its uptime during the job is already in the job's cost).

cost to result = job + set-up;  time to result = set-up + the job's wall time.

The pick (``decide``):

1. Rank by cost to result, then time to result.
2. A source that asks more than the lab's S3 bucket and a script that reads files must save enough
   to be worth it: ``INFRA_MARGIN`` (10%) when it needs something of its own (a directory bucket and
   a copy, a file system, a copy into EFS, a script that reads a stream). Each source's cost is weighed as
   cost / (1 - its margin), and the pick is the lowest weighed cost: a source with a 10% margin beats File
   or FastFile only when it is at least 10% cheaper.
3. An estimate with no measured cell behind it (Pipe, EFS, Script, Express: their constants are public
   figures and assumptions, not fits) is weighed at the top of its range (``calibration.py``: its
   assumptions' ranges and the measured sources' out-of-sample error), not at its point: it is picked
   over a source with measured cells only when even its pessimistic end is cheaper. This replaces a flat
   30% margin by the width the evidence gives each estimate.
4. Every source cheaper than the pick is passed over with one line saying why.
5. The runner-up is what the same rules pick when the pick is not there.
6. Where the pick's range of cost overlaps another source's, the answer says they are within the model's
   error, and that a measured run (`dslab run` or `dslab local` with ``repeats``) separates them.

Measured runs rest on measured figures: they are weighed at their mean, and only the first margin applies
to them. With the data already in EFS, EFS asks nothing and is weighed at its cost: every other source needs a copy
out of it first (DataSync, unmeasured too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..errors import ConfigError
from ..model.estimate import EFS_BURST_MBPS, FSX_IMPORT_RATE, Estimate
from ..shape import DatasetShape
from ..facts.limits import runtime_problem
from ..modes import EFS, EXPRESS, FASTFILE, FILE, FSX, PIPE, SCRIPT, STANDARD, source_label
from ..facts.prices import HOURS_PER_MONTH, PriceTable, express_staging_cost

# A source that asks something of its own must be this much cheaper than one that asks nothing.
INFRA_MARGIN = 0.10
# Advice that saves less than this share is not given.
ADVICE_MIN_SAVING = 0.10

# Sources with measured cells in the calibration (dslab/contracts/bencher-cells.csv, on S3 Standard).
MEASURED_SOURCES = (FILE, FASTFILE, FSX)

# DataSync copying a dataset between S3 and EFS (no measured cell: assumptions, labelled as such).
DATASYNC_FIXED_SECONDS = 120.0      # assumption: a task execution's launch, preparing and verifying phases
DATASYNC_FILES_PER_SECOND = 500.0   # assumption: small files per second on one task
DATASYNC_MBPS = EFS_BURST_MBPS      # writes into EFS Bursting run at its burst throughput (AWS EFS performance docs)

# What a source asks of its own, in the words a passed-over line uses. Pipe asks it of the script:
# one process reads each channel's stream, in order (the post: "superseded by FastFile").
NEEDS = {
    EXPRESS: "a directory bucket and a staging copy",
    FSX: "an FSx file system",
    EFS: "a copy of the dataset in EFS",
    PIPE: "a script that reads a stream (Pipe)",
    # And the lineage SageMaker keeps of a channel: the lab writes the dataset's URI and stats into tags.
    SCRIPT: "a script that reads S3 itself",
}


@dataclass(frozen=True)
class Setup:
    usd: float
    seconds: float
    what: str  # one phrase: what is paid, for the ranking's note


def setup_cost(mode: str, storage: str | None, shape: DatasetShape, prices: PriceTable, *, job_seconds: float = 0.0,
               fsx_capacity_gib: int = 1200, data_in_efs: bool = False,
               express_staging: tuple[float, float] | None = None, fsx: Any = None) -> Setup:
    """What a source pays before or beside its jobs for one run of a dataset of this shape.

    ``express_staging`` is the estimate's (seconds, dollars) of the staging copy when known (the
    estimate holds the copy's model); otherwise the copy's dollars are priced here from the shape."""
    gigabytes = shape.bytes / 1e9
    if data_in_efs:
        if mode == EFS:
            return Setup(0.0, 0.0, "none: the data already lives in EFS")
        seconds, usd = _datasync(shape, prices)
        return Setup(usd, seconds, f"a DataSync copy of {gigabytes:.2f} GB from EFS to S3")
    if storage == EXPRESS:
        seconds, usd = express_staging if express_staging else (0.0, express_staging_cost(prices, shape.files, shape.bytes))
        kept = prices["express_gb_month"] * gigabytes * seconds / 3600 / HOURS_PER_MONTH
        return Setup(usd + kept, seconds, f"the staging copy of {shape.files:,} objects into the directory bucket")
    if mode == FSX:
        seconds = shape.files / FSX_IMPORT_RATE
        hourly = fsx.hourly(prices) if fsx is not None else prices.fsx_hourly(fsx_capacity_gib)
        return Setup(hourly * seconds / 3600, seconds,
                     f"FSx uptime while it imports {shape.files:,} objects' metadata")
    if mode == EFS:
        seconds, usd = _datasync(shape, prices)
        # EFS storage from the copy's start to the job's end (emptied after the run).
        usd += prices["efs_standard_gb_month"] * gigabytes * (seconds + job_seconds) / 3600 / HOURS_PER_MONTH
        return Setup(usd, seconds, f"a DataSync copy of {gigabytes:.2f} GB into EFS and its storage")
    return Setup(0.0, 0.0, "none")


def _datasync(shape: DatasetShape, prices: PriceTable) -> tuple[float, float]:
    seconds = DATASYNC_FIXED_SECONDS + shape.files / DATASYNC_FILES_PER_SECOND + shape.bytes / 1e6 / DATASYNC_MBPS
    return seconds, prices["datasync_per_gb"] * shape.bytes / 1e9


@dataclass(frozen=True)
class Option:
    """One data source's way to a result."""
    mode: str
    storage: str
    job_usd: float
    setup: Setup
    job_seconds: float          # the job's wall time (start to end, one instance's clock)
    measured: bool              # measured run, or an estimate with a measured cell behind it
    bound: str | None = None
    blocker: str | None = None  # why this source cannot serve the dataset at all (never picked)
    data_in_efs: bool = False
    runs: int = 0               # measured: the completed runs its cost is the mean of (0: an estimate)
    # measured: where its job cost per run lies (the runs' min-max for two, the mean's 95% interval from three);
    # an estimate: its range (calibration.estimate_range)
    job_usd_interval: tuple[float, float] | None = None
    # Where the source is priced on another premise than the lab as it stands (FSx provisioned for the data), the
    # sentence that says so, with its deploy command.
    premise: str | None = None

    @property
    def source(self) -> str:
        return source_label(self.mode, self.storage)

    @property
    def cost_usd(self) -> float:
        return self.job_usd + self.setup.usd

    @property
    def seconds(self) -> float:
        return self.setup.seconds + self.job_seconds

    @property
    def cost_interval(self) -> tuple[float, float] | None:
        if self.job_usd_interval is None:
            return None
        return self.job_usd_interval[0] + self.setup.usd, self.job_usd_interval[1] + self.setup.usd

    @property
    def needs(self) -> str | None:
        """What this source asks beyond the lab's S3 bucket and a script that reads files, if anything."""
        if self.data_in_efs:
            parts = [] if self.mode == EFS else ["a copy of the dataset out of EFS"]
        else:
            parts = [NEEDS[EXPRESS]] if self.storage == EXPRESS else []
            parts += [NEEDS[self.mode]] if self.mode in (FSX, EFS) else []
        if self.mode in (PIPE, SCRIPT):
            parts.append(NEEDS[self.mode])
        return " and ".join(parts) or None

    @property
    def margin(self) -> float:
        """The share this source must save against one that asks nothing, to be picked over it."""
        if self.data_in_efs and self.mode == EFS:
            return 0.0  # the data's home: every other source needs a copy out of it first (DataSync, unmeasured too)
        return INFRA_MARGIN if self.needs else 0.0

    @property
    def pick_usd(self) -> float:
        """The cost the pick weighs: the top of its range for an estimate without a measured cell, else its cost. EFS
        holding the data is weighed at its cost: every other source's copy out of it is unmeasured too."""
        interval = self.cost_interval
        if self.measured or interval is None or (self.data_in_efs and self.mode == EFS):
            return self.cost_usd
        return max(self.cost_usd, interval[1])

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "mode": self.mode, "storage": self.storage,
                "job_usd": round(self.job_usd, 4), "setup_usd": round(self.setup.usd, 4),
                "cost_to_result_usd": round(self.cost_usd, 4), "setup_seconds": round(self.setup.seconds, 1),
                "job_seconds": round(self.job_seconds, 1), "time_to_result_seconds": round(self.seconds, 1),
                "setup": self.setup.what, "measured": self.measured, "bound": self.bound, "blocker": self.blocker,
                **({"cost_to_result_interval_usd": [round(v, 4) for v in self.cost_interval]}
                   if self.cost_interval and not self.runs else {}),
                **({"premise": self.premise} if self.premise else {})}


@dataclass
class Decision:
    pick: Option
    runner_up: Option | None
    ranking: list[Option]           # every serving source in the decision's order: the pick, the runner-up, then by weighed cost
    why: str
    passed_over: dict[str, str] = field(default_factory=dict)   # source -> why not (cheaper than the pick)
    blocked: dict[str, str] = field(default_factory=dict)       # source -> why it cannot serve the dataset
    advice: list[str] = field(default_factory=list)
    noise: str | None = None    # whether the runs (or the estimates' ranges) separate the pick from the others
    within_error: list[str] = field(default_factory=list)   # estimates: sources whose range overlaps the pick's

    def note(self, option: Option) -> str:
        if option is self.pick:
            return "pick"
        notes = ["runner-up (the pick if the pick were not there)"] if option is self.runner_up else []
        if option.source in self.passed_over:
            notes.append(self.passed_over[option.source])
        return "; ".join(notes)

    def to_dict(self) -> dict[str, Any]:
        return {"pick": self.pick.source, "mode": self.pick.mode, "storage": self.pick.storage, "why": self.why,
                "runner_up": self.runner_up.source if self.runner_up else None,
                "ranking": [{**o.to_dict(), "note": self.note(o)} for o in self.ranking],
                "passed_over": self.passed_over, "blocked": self.blocked, "advice": self.advice, "noise": self.noise,
                "within_error": self.within_error}


def usd(value: float) -> str:
    """Dollars as a reader compares them: cents from $0.10 up, two significant figures below (local runs)."""
    if value >= 0.1 or value <= 0:
        return f"${value:,.2f}"
    if value < 0.0001:
        return "<$0.0001"
    return f"${value:.{max(2, 1 - math.floor(math.log10(value)))}f}"


def duration(seconds: float | None) -> str:
    """A length as a reader takes it in: "45 s", "12 min", "9.3 h" ("-" where there is none)."""
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:,.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.0f} min"
    return f"{seconds / 3600:,.1f} h"


def usd_difference(value: float) -> str:
    """A difference in dollars with its sign: "+$0.02", "-$0.04"."""
    return f"{'-' if value < 0 else '+'}{usd(abs(value))}"


def _rank_key(option: Option) -> tuple[float, float, float]:
    # Costs equal to three significant figures tie; then the lighter bar, then the quicker result.
    return (float(f"{option.cost_usd:.3g}"), option.margin, option.seconds)


def weighed(option: Option) -> float:
    """The cost to result the pick compares: raised by what the source asks (see the module's rules)."""
    return weighed_cost(option, option.pick_usd)


def required_saving(option: Option, against: Option) -> float:
    """The share of ``against``'s cost ``option`` must save to be picked over it: the margins, and for an estimate
    without a measured cell the top of its range over its point."""
    if against.cost_usd <= 0 or option.cost_usd <= 0:
        return 0.0
    top = option.pick_usd / option.cost_usd
    return max(0.0, 1.0 - weighed(against) * (1.0 - option.margin) / top / against.cost_usd)


def decide(options: Iterable[Option]) -> Decision:
    """The pick among the options (see the module's rules); raises ValueError when none can serve."""
    options = list(options)
    blocked = {o.source: o.blocker for o in options if o.blocker}
    ranking = sorted((o for o in options if not o.blocker), key=_rank_key)
    if not ranking:   # bad input as the user gave it (a ConfigError is the ValueError the CLI prints in one line)
        raise ConfigError("data source", "none can serve this dataset: "
                          + "; ".join(f"{k}: {v}" for k, v in blocked.items()))
    pick = _pick(ranking)
    passed_over: dict[str, str] = {}
    for option in ranking:
        if option is pick:
            break
        saving = pick.cost_usd - option.cost_usd
        share = saving / pick.cost_usd if pick.cost_usd > 0 else 0.0
        passed_over[option.source] = (f"passed over: {share:.1%} ({usd(saving)}) cheaper than {pick.source}, less than "
                                      f"the {required_saving(option, pick):.0%} it must save against it "
                                      f"({_asks(option, pick)})")
    if pick is ranking[0]:
        why = f"the cheapest to a result ({usd(pick.cost_usd)} per run, {setup_phrase(pick)})"
        if _bar(pick):
            why += f", and it clears what it asks ({_bar(pick)})"
    else:
        why = (f"the lowest cost to a result ({usd(pick.cost_usd)} per run, {setup_phrase(pick)}) once each cheaper "
               "source's cost is weighed by what it asks")
    # The runner-up is what the same rules pick when the pick is not there.
    rest = [o for o in ranking if o is not pick]
    runner_up = _pick(rest) if rest else None
    within = within_error(pick, ranking)
    # Listed in the decision's own order: the pick first, the runner-up second, then by weighed cost (module rules).
    ordered = sorted(ranking, key=lambda o: (o is not pick, o is not runner_up, round(weighed(o), 9), ranking.index(o)))
    return Decision(pick=pick, runner_up=runner_up, ranking=ordered, why=why, passed_over=passed_over,
                    blocked=blocked, noise=noise(pick, runner_up) or estimates_noise(pick, within),
                    within_error=[o.source for o in within])


def within_error(pick: Option, ranking: list[Option]) -> list[Option]:
    """Estimates: the sources whose range of cost to a result overlaps the pick's (the model cannot tell them apart)."""
    if pick.runs or pick.cost_interval is None:
        return []
    low, high = pick.cost_interval
    return [o for o in ranking if o is not pick and not o.runs and o.cost_interval is not None
            and o.cost_interval[0] <= high and low <= o.cost_interval[1]]


def estimates_noise(pick: Option, within: list[Option]) -> str | None:
    """Estimates: whether their ranges separate the pick from every other source, and what would."""
    if pick.runs or pick.cost_interval is None:
        return None
    def shown(o: Option) -> str:
        return f"{o.source} {usd(o.cost_interval[0])}-{usd(o.cost_interval[1])}"
    if not within:
        return f"the estimates' ranges separate {shown(pick)} per run from every other source"
    named = ", ".join(shown(o) for o in within[:4]) + (f" and {len(within) - 4} more" if len(within) > 4 else "")
    return (f"within the model's error: {shown(pick)} per run overlaps {named}: a measured run separates them "
            "(`dslab run`, or `dslab local`, with `repeats: 3`)")


# MLPerf Storage's count: "A benchmark result is the mean of 5 run results, executed consecutively"
# (https://github.com/mlcommons/storage/blob/main/Submission_guidelines.md).
MLPERF_RUNS = 5


def noise(pick: Option, runner_up: Option | None) -> str | None:
    """Measured runs: whether the pick and the runner-up are within the runs' spread, each cost weighed by what
    its source asks as the pick weighs it. One run has no measured spread; two compare their min-max; from
    three, the means' 95% intervals (more runs narrow those, so more repeats can separate them)."""
    if runner_up is None or not (pick.runs and runner_up.runs):
        return None   # estimates, not runs
    pair = f"{pick.source} and {runner_up.source}"
    fewest = min(pick.runs, runner_up.runs)
    if fewest < 2:
        return (f"one run each, so how far {pair} spread from run to run is not measured (n/a): "
                "run `repeats: 3` (or --repeats 3) to know whether the pick holds")
    low_pick, high_pick = (weighed_cost(pick, v) for v in pick.cost_interval)
    low_runner, high_runner = (weighed_cost(runner_up, v) for v in runner_up.cost_interval)
    what = "the runs' min–max" if fewest < 3 else "the 95% intervals of their means"
    shown = (f"{pick.source} {_usd4(pick.cost_interval[0])}–{_usd4(pick.cost_interval[1])}, {runner_up.source} "
             f"{_usd4(runner_up.cost_interval[0])}–{_usd4(runner_up.cost_interval[1])} per run, {what}")
    if high_pick < low_runner or high_runner < low_pick:
        return f"the runs separate {pair} ({shown})"
    more = 3 if fewest < 3 else (MLPERF_RUNS if fewest < MLPERF_RUNS else 2 * fewest)
    return f"within noise: {pair} overlap ({shown}): run `repeats: {more}` to separate them"


def _usd4(value: float) -> str:
    """Four significant figures (at least cents): two runs' costs often agree to two."""
    decimals = 2 if value <= 0 else max(2, 3 - math.floor(math.log10(value)))
    return f"${value:,.{decimals}f}"


def weighed_cost(option: Option, cost_usd: float) -> float:
    return cost_usd / (1.0 - option.margin)


def _pick(ranking: list[Option]) -> Option:
    """The lowest weighed cost; ties go to the earlier in the ranking (cheaper, then quicker)."""
    return min(ranking, key=lambda o: (round(weighed(o), 9), ranking.index(o)))


def _bar(option: Option) -> str:
    """What a source asks: "10%: it needs ...; no measured cell: weighed at the top of its range, $X (+18%)"."""
    parts = []
    if option.needs:
        parts.append(f"{INFRA_MARGIN:.0%}: it needs {option.needs}")
    if option.pick_usd > option.cost_usd:
        parts.append(f"no measured cell: weighed at the top of its range, {usd(option.pick_usd)} "
                     f"(+{option.pick_usd / option.cost_usd - 1:.0%})")
    return "; ".join(parts)


def _asks(option: Option, pick: Option) -> str:
    text = _bar(option) or "it asks nothing more"
    if pick.margin or pick.pick_usd > pick.cost_usd:
        text += f"; against {pick.source} weighed at {usd(weighed(pick))}"
    return text


def setup_phrase(option: Option) -> str:
    """Either "nothing to set up" or "$X of it set-up: what is paid"."""
    if option.setup.usd <= 0 and option.setup.seconds <= 0:
        return "nothing to set up"
    return f"{usd(option.setup.usd)} of it set-up: {option.setup.what}"


# ---- options from estimates and from measured results ----------------------------------------------

def top_job_seconds(estimate: Estimate, instance_count: int | None = None) -> float:
    """The top of a job's range on one instance's clock (an estimate's seconds are instance-seconds): what
    MaxRuntimeInSeconds must cover, and what SageMaker's 28 days are checked against."""
    hosts = max(1, instance_count or estimate.instance_count)
    point = (estimate.downloading + estimate.training + estimate.other) / hosts
    top = estimate.range.billable_high if estimate.range is not None else estimate.billable_seconds
    return max(top / hosts, point)


def option_from_estimate(estimate: Estimate, shape: DatasetShape, prices: PriceTable, *, instance_count: int | None = None,
                         fsx_capacity_gib: int = 1200, data_in_efs: bool = False) -> Option:
    # The job's wall time on one instance's clock (an estimate's seconds are instance-seconds).
    job_seconds = (estimate.downloading + estimate.training + estimate.other) / max(1, instance_count or estimate.instance_count)
    staging = ((estimate.staging_seconds or 0.0, estimate.staging_cost_usd or 0.0)
               if estimate.storage == EXPRESS else None)
    # The file system the estimate priced (its premise), so the import's uptime is billed at its price.
    fsx = estimate.provisioning.fsx if estimate.provisioning is not None else None
    setup = setup_cost(estimate.mode, estimate.storage, shape, prices, job_seconds=job_seconds,
                       fsx_capacity_gib=fsx_capacity_gib, data_in_efs=data_in_efs, express_staging=staging, fsx=fsx)
    # A source that cannot hold the data as premised (estimate.py) is refused, never priced; then one SageMaker
    # may stop: the top of its range past 28 days (limits.py), as MaxRuntimeInSeconds could not cover it.
    blocker = estimate.blocker or runtime_problem(top_job_seconds(estimate, instance_count), "it",
                                                  point_seconds=job_seconds)
    measured = estimate.mode in MEASURED_SOURCES and estimate.storage != EXPRESS
    interval = (estimate.range.usd_low, estimate.range.usd_high) if estimate.range is not None else None
    return Option(mode=estimate.mode, storage=estimate.storage or STANDARD, job_usd=estimate.cost_usd["total"],
                  setup=setup, job_seconds=job_seconds, measured=measured, bound=estimate.bound, blocker=blocker,
                  data_in_efs=data_in_efs, job_usd_interval=interval)


def option_from_measured(mode: str, storage: str | None, job_usd: float, job_seconds: float, shape: DatasetShape | None,
                         prices: PriceTable, *, fsx_capacity_gib: int = 1200, data_in_efs: bool = False, fsx: Any = None,
                         setup_time: bool | float = True, runs: int = 1,
                         job_usd_interval: tuple[float, float] | None = None) -> Option:
    """A measured source (a report row): its jobs' mean cost and time, its set-up priced from the shape.
    ``setup_time``: True, the set-up's AWS duration (an AWS run); a number of seconds, the set-up as this machine
    measured it (a local run: its time to a result is then all this machine's seconds); False, none known."""
    setup = (setup_cost(mode, storage, shape, prices, job_seconds=job_seconds, fsx_capacity_gib=fsx_capacity_gib,
                        data_in_efs=data_in_efs, fsx=fsx) if shape else Setup(0.0, 0.0, "not priced: the dataset's size is unknown"))
    if setup_time is not True:
        setup = Setup(setup.usd, float(setup_time or 0.0), setup.what)
    return Option(mode=mode, storage=storage or STANDARD, job_usd=job_usd, setup=setup, job_seconds=job_seconds,
                  measured=True, data_in_efs=data_in_efs, runs=runs, job_usd_interval=job_usd_interval)


# Sources that serve random reads from a file system: File's local copy, FSx, EFS. FastFile and Pipe
# stream: each random read would be a request to S3.
RANDOM_ACCESS_MODES = (FILE, FSX, EFS)


def random_access_blocker(mode: str) -> str | None:
    if mode in (FASTFILE, PIPE, SCRIPT):
        return f"{mode} streams from S3: random reads would each be a request (the post: FSx for random access)"
    return None


# One script for SageMaker, EC2 and EKS: SageMaker's S3 channels exist only in a training job, so a
# script written for them needs another way to its data elsewhere; a file system mounts anywhere.
SAGEMAKER_ONLY_MODES = (FILE, FASTFILE, PIPE)


def portability_blocker(mode: str) -> str | None:
    if mode in SAGEMAKER_ONLY_MODES:
        return (f"{mode} is a SageMaker channel: the same script on EC2 or EKS has no /opt/ml/input/data "
                "(read S3 in the script, or mount FSx/EFS)")
    return None


__all__ = ["setup_phrase", "usd", "usd_difference", "weighed", "noise", "MLPERF_RUNS", "required_saving", "Decision", "Option", "Setup", "decide", "setup_cost", "option_from_estimate", "option_from_measured",
           "INFRA_MARGIN", "ADVICE_MIN_SAVING", "within_error", "RANDOM_ACCESS_MODES", "random_access_blocker",
           "SAGEMAKER_ONLY_MODES", "portability_blocker"]
