"""`dslab recommend`: every data source estimated for a dataset's shape, and the pick of ``decision.py``
with the reasons, the runner-up and advice that saves money. The source post's flowchart is shown
beside it as context (it decides on size thresholds; the pick decides on cost to a result)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from .decision import (ADVICE_MIN_SAVING, Decision, Option, decide, option_from_estimate, portability_blocker,
                       random_access_blocker)
from ..model.calibration import with_range
from ..model.estimate import BreakEven, Estimate, estimate_mode, fsx_express_break_even
from ..shape import DatasetShape
from ..facts.instances import INSTANCES
from ..facts.limits import RUNTIME_FIELDS, RUNTIME_FIX, none_too_long
from .sizing import AU_TARGET, MAX_CLUSTER, size
from ..modes import EFS, EXPRESS, FASTFILE, FILE, FSX, MODES, S3_READ_MODES, SCRIPT, STANDARD, source_label
from ..model.provisioning import Provisioning, as_deployed, deploy_command

SMALL_DATASET_BYTES = 75e9      # the post: "small (under 50-100 GB)"
LARGE_FILE_BYTES = 50e6         # the post: small files "under 50 MB", large files "50 MB and up"
PACKED_SHARD_BYTES = 150e6      # the post: FastFile is best "for containers of 150 MB and more"
# Files above this already hold many samples (estimate.py's LARGE_FILE_BYTES): shards, not files to serialize.
SHARDED_FILE_BYTES = 1e6

# Every source the lab can run: the six modes on the lab's bucket, the S3 modes and Script on the directory bucket.
ALL_SOURCES: tuple[tuple[str, str], ...] = tuple((m, STANDARD) for m in MODES) + tuple((m, EXPRESS) for m in S3_READ_MODES)
# What --portable-script means, in the flowchart's words (the source post, "Bring your own data ingestion").
PORTABLE_REASON = ("the data must stay where it is, or one script must run unchanged on SageMaker, EC2 and EKS -> "
                   "the script reads S3 itself (boto3 or the S3 Connector for PyTorch). It costs the lineage: with no "
                   "channel SageMaker does not record the dataset, so the lab tags each job with its URI and stats")


@dataclass
class Recommendation:
    decision: Decision
    flowchart: list[str]
    flowchart_source: str
    advice: list[str] = field(default_factory=list)
    break_even: BreakEven | None = None
    assumptions: list[str] = field(default_factory=list)
    estimates: dict[str, Estimate] = field(default_factory=dict)   # by source label
    sizing: Any = None   # sizing.Sizing where the job has several accelerators or instances
    lab: Provisioning | None = None   # the lab the ranking prices (as deployed: the stack outputs or cdk.json)

    @property
    def mode(self) -> str:
        return self.decision.pick.mode

    @property
    def storage(self) -> str:
        return self.decision.pick.storage

    @property
    def source(self) -> str:
        return self.decision.pick.source

    def to_dict(self) -> dict[str, Any]:
        out = {**self.decision.to_dict(), "flowchart": {"steps": self.flowchart, "source": self.flowchart_source},
               "advice": self.advice, "assumptions": self.assumptions}
        if self.break_even is not None:
            out["fsx_express_break_even"] = self.break_even.to_dict()
        if self.sizing is not None:
            out["sizing"] = self.sizing.to_dict()
        if self.lab is not None:
            out["lab"] = self.lab.to_dict()
        return out


def flowchart(shape: DatasetShape, *, random_access: bool = False, data_in_efs: bool = False,
              portable: bool = False) -> tuple[list[str], str]:
    """The source post's decision flowchart: its steps and the source it ends on."""
    size_gb, mean_mb = shape.bytes / 1e9, shape.mean_file_bytes / 1e6
    if portable and not data_in_efs:
        return [PORTABLE_REASON], SCRIPT
    if data_in_efs:
        return ["the data already lives in EFS -> read it there"], EFS
    if random_access:
        return ["random reads -> a file system built for them: FSx for Lustre"], FSX
    mean = f"{mean_mb * 1000:,.0f} KB" if mean_mb < 1 else f"{mean_mb:,.1f} MB"
    if shape.bytes < SMALL_DATASET_BYTES:
        size = f"{size_gb:,.1f} GB" if shape.bytes >= 1e8 else f"{shape.bytes / 1e6:,.1f} MB"   # 40 MB, not "0.0 GB"
        steps = [f"small dataset ({size} < {SMALL_DATASET_BYTES / 1e9:.0f} GB) -> File mode"]
        if shape.mean_file_bytes <= SHARDED_FILE_BYTES:
            steps.append(f"small files (mean {mean} < 50 MB) -> serialize them into shards")
        elif shape.mean_file_bytes < LARGE_FILE_BYTES:   # already shards, smaller than the post's best
            steps.append(f"files of {mean} are shards already; the post finds ~{PACKED_SHARD_BYTES / 1e6:.0f} MB and up "
                         "read best")
        return steps, FILE
    if shape.mean_file_bytes >= LARGE_FILE_BYTES:
        return [f"large dataset ({size_gb:,.0f} GB) of large files (mean {mean}) -> FastFile"], FASTFILE
    if shape.mean_file_bytes > SHARDED_FILE_BYTES:   # shards already, under the post's 50 MB
        return [f"large dataset ({size_gb:,.0f} GB) of files of {mean} (under 50 MB) -> FSx for Lustre, or shards of "
                f"~{PACKED_SHARD_BYTES / 1e6:.0f} MB and up for FastFile"], FSX
    return [f"large dataset ({size_gb:,.0f} GB) of small files (mean {mean}) -> FSx for Lustre, "
            "unless the files can be packed into large shards"], FSX


def fsx_for_the_data(shape: DatasetShape, lab: Provisioning, au_target: float = AU_TARGET,
                     **estimate_kwargs) -> tuple[Provisioning, str] | None:
    """Where the lab's FSx cannot hold the dataset: the lab with the FSx `dslab size` would provision for this job
    (the cheapest that holds the data and feeds the instances), and the sentence that says so with its deploy
    command; None where the lab's FSx holds it. A file system that cannot hold the data is never priced."""
    if lab.fsx.holds(shape.bytes):
        return None
    from .sizing import cheapest_fsx, deploy_settings
    kwargs = {k: v for k, v in estimate_kwargs.items() if k != "fsx_capacity_gib"}
    fsx = cheapest_fsx(shape, lambda config: estimate_mode(FSX, shape, provisioning=replace(lab, fsx=config), **kwargs),
                       lab, estimate_kwargs["prices"], au_target)
    command = deploy_command(deploy_settings(lab, fsx.settings()), fsx="up")
    said = (f"FSx as the lab stands ({lab.fsx.label()}) cannot hold {shape.bytes / 2**30:,.0f} GiB: priced as "
            f"`dslab size` provisions it for this job, {fsx.label()} (`{command}`)")
    return replace(lab, fsx=fsx, name=f"{lab.name}, FSx provisioned for the data"), said


def options(shape: DatasetShape, *, sources: Sequence[tuple[str, str]] = ALL_SOURCES, random_access: bool = False,
            data_in_efs: bool = False, fsx_capacity_gib: int = 1200, portable: bool = False,
            lab: Provisioning | None = None, au_target: float = AU_TARGET,
            **estimate_kwargs) -> list[tuple[Option, Estimate]]:
    """Every source's way to a result for this shape (the estimate of its job plus its set-up), with the estimate,
    on ``lab`` (default: the lab the stacks build with FSx at ``fsx_capacity_gib``). FSx, where the lab's cannot
    hold the data, is priced as `dslab size` would provision it (``fsx_for_the_data``), and says so."""
    out = []
    lab = lab or as_deployed(fsx_capacity_gib)
    for mode, storage in sources:
        premise, said = lab, None
        if mode == FSX:
            premise, said = fsx_for_the_data(shape, lab, au_target, **estimate_kwargs) or (lab, None)
        resident = data_in_efs and mode == EFS
        estimate = with_range(estimate_mode(mode, shape, storage=storage, provisioning=premise, efs_resident=resident,
                                            **estimate_kwargs),
                              shape, provisioning=premise, efs_resident=resident, **estimate_kwargs)
        if said:
            estimate.assumptions.insert(0, said)
        option = option_from_estimate(estimate, shape, estimate_kwargs["prices"],
                                      instance_count=int(estimate_kwargs.get("instance_count", 1)),
                                      fsx_capacity_gib=premise.fsx.capacity_gib, data_in_efs=data_in_efs)
        if said:
            option = replace(option, premise=said)
        if random_access and not option.blocker and random_access_blocker(mode):
            option = replace(option, blocker=random_access_blocker(mode))
        if portable and not option.blocker:
            blocker = portability_blocker(mode) or (
                "a staging copy into the directory bucket moves the data" if storage == EXPRESS else
                "a copy into EFS moves the data" if mode == EFS and not data_in_efs else None)
            if blocker:
                option = replace(option, blocker=blocker)
        out.append((option, estimate))
    return out


def recommend(shape: DatasetShape, *, random_access: bool = False, data_in_efs: bool = False,
              sources: Sequence[tuple[str, str]] = ALL_SOURCES, fsx_capacity_gib: int = 1200, portable: bool = False,
              lab: Provisioning | None = None, au_target: float = AU_TARGET,
              too_long: tuple[str, str] = (RUNTIME_FIELDS, RUNTIME_FIX), **estimate_kwargs) -> Recommendation:
    """``au_target``: the AU (percent) a source must keep to feed a cluster (a DLIO workload's metric.au).
    ``portable``: one script for SageMaker, EC2 and EKS, or data that must stay put (SageMaker's S3
    channels and the copies Express and EFS make are ruled out; Script, FSx linked to S3 remain). ``lab``: the
    lab as deployed, which every source is priced on (default: the stacks' lab with FSx at ``fsx_capacity_gib``).
    ``too_long``: the field and the fix named when every source's job outlasts SageMaker's limit (the CLI's flags
    by default; an experiment's keys for `recommend --experiment`)."""
    lab = lab or as_deployed(fsx_capacity_gib)
    candidates = options(shape, sources=sources, random_access=random_access, data_in_efs=data_in_efs,
                         fsx_capacity_gib=fsx_capacity_gib, portable=portable, lab=lab, au_target=au_target,
                         **estimate_kwargs)
    none_too_long({option.source: option.job_seconds for option, _ in candidates}, *too_long)   # else SageMaker stops them all
    decision = decide(option for option, _ in candidates)
    steps, chart_source = flowchart(shape, random_access=random_access, data_in_efs=data_in_efs, portable=portable)
    pick = decision.pick
    advice: list[str] = []
    # Packing small files into ~150 MB shards: only said when it saves at least ADVICE_MIN_SAVING.
    if shape.mean_file_bytes < LARGE_FILE_BYTES and not data_in_efs:
        shards = max(1, int(round(shape.bytes / PACKED_SHARD_BYTES)))
        samples, _ = shape.sample_count()
        packed = DatasetShape(files=shards, bytes=shape.bytes, samples=samples)
        packed_pick = decide(option for option, _ in options(packed, sources=sources, random_access=random_access,
                                                             fsx_capacity_gib=fsx_capacity_gib, portable=portable,
                                                             lab=lab, au_target=au_target, **estimate_kwargs)).pick
        saving = pick.cost_usd - packed_pick.cost_usd
        if pick.cost_usd > 0 and saving / pick.cost_usd >= ADVICE_MIN_SAVING:
            advice.append(f"pack into ~{PACKED_SHARD_BYTES / 1e6:.0f} MB shards ({shards:,} shards; dslab dataset pack "
                          f"--shard-size 150MB) and read them with {packed_pick.source}: ${packed_pick.cost_usd:.2f} "
                          f"instead of ${pick.cost_usd:.2f} per run (saves {saving / pick.cost_usd:.0%})")
    if pick.bound == "I/O":
        advice.append(f"{pick.source} is I/O-bound here: the accelerator waits for data; more readers or larger files help")
    # FSx's hourly bill against Express's one-off copy, per epoch count: told beside the answer (the
    # source post leaves the question open), not as advice: the pick already weighs both at these epochs.
    break_even = None
    by_source = {o.source: o for o in decision.ranking}
    if source_label(FASTFILE, EXPRESS) in by_source and FSX in by_source:
        kwargs = {k: v for k, v in estimate_kwargs.items() if k != "epochs"}
        epochs = int(estimate_kwargs.get("epochs", 1))
        # On the ranking's premise: FSx as the ranking priced it (provisioned for the data where the lab's cannot hold it).
        fsx_estimate = next(e for _, e in candidates if e.mode == FSX)
        break_even = fsx_express_break_even(shape, max_epochs=max(100, epochs), provisioning=fsx_estimate.provisioning,
                                            **kwargs)
    if pick.storage == EXPRESS:
        advice.append(f"the workflow stages the dataset into the directory bucket first (~{pick.setup.seconds / 60:.0f} min, "
                      f"${pick.setup.usd:.2f}); empty it after the runs (dslab express empty)")
    if pick.mode == SCRIPT:
        advice.append("no input channel: SageMaker's lineage does not record the dataset; `dslab run` tags each job "
                      "with dslab:dataset-uri and the stats file's files, bytes and SHA-256 (do the same in your own jobs)")
    if pick.mode == FSX:
        advice.append(f"FSx bills while it stands (it imports the dataset's metadata in ~{pick.setup.seconds / 60:.0f} min "
                      "before the first job): tear it down after the runs (dslab fsx down)")
    # Several accelerators or instances: what the pick feeds at this size and what to provision (sizing.py).
    sizing = None
    row = INSTANCES.get(estimate_kwargs.get("instance_type", "ml.p3.2xlarge"))
    count = int(estimate_kwargs.get("instance_count", 1))
    if row is not None and ((estimate_kwargs.get("accelerators") or row.accelerators) > 1 or count > 1):
        sizing = size(shape, instance_type=row.name, count=count, rate=estimate_kwargs["rate"],
                      prices=estimate_kwargs["prices"], epochs=int(estimate_kwargs.get("epochs", 1)),
                      accelerators=estimate_kwargs.get("accelerators"), fsx_capacity_gib=fsx_capacity_gib, deployed=lab,
                      au_target=au_target, readers=estimate_kwargs.get("readers"),
                      volume_size_gb=estimate_kwargs.get("volume_size_gb"))
        sized = next((s for s in sizing.sources if s.source == pick.source), None)
        if sized is not None:
            # Two premises, each named: the lab as it stands (what the ranking above priced) and the source
            # provisioned to feed this cluster (what `dslab size` prints). One model gives both.
            def largest(n: int) -> str:
                return ("no shared limit binds" if n >= MAX_CLUSTER else
                        f"feeds up to {n:,} instances at AU >= {au_target:g}%" if n else
                        f"feeds not even one at AU >= {au_target:g}%")
            deployed = sized.deployed
            ranked = next(e for _, e in candidates if e.source == pick.source)
            as_ranked = (f"as ranked above ({pick.premise}): AU {ranked.au_percent:.0f}%" if pick.premise else
                         f"as the lab is deployed ({deployed['premise']}): AU {ranked.au_percent:.0f}%, "
                         f"{largest(deployed['max_instances_at_target_au'])}")
            advice.append(f"at {count} x {row.name} ({sizing.accelerators} x {row.accelerator} each), {pick.source} "
                          f"{as_ranked}; provisioned for {count}: {sized.provision}: "
                          f"AU {sized.au_percent:.0f}%, {largest(sized.max_instances_at_target_au)}, "
                          f"${sized.usd_per_run:,.2f} per run (`dslab size` for every source)")
            fed = [s for s in sizing.sources if s.au_percent >= au_target and not s.blocker]
            best = min(fed, key=lambda s: s.usd_per_run) if fed else None
            if best is not None and best.source != pick.source and best.usd_per_run <= sized.usd_per_run * (1 - ADVICE_MIN_SAVING):
                advice.append(f"provisioned for this cluster, {best.source} feeds it at AU {best.au_percent:.0f}% for "
                              f"${best.usd_per_run:,.2f} per run instead of ${sized.usd_per_run:,.2f}: {best.provision}")
    assumptions = list(dict.fromkeys(a for _, estimate in candidates for a in estimate.assumptions))
    return Recommendation(decision=decision, flowchart=steps, flowchart_source=chart_source, advice=advice,
                          break_even=break_even, assumptions=assumptions,
                          estimates={estimate.source: estimate for _, estimate in candidates}, sizing=sizing, lab=lab)

