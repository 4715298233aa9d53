"""From one GPU to a cluster: how many accelerators each data source feeds, and what to provision.

MLPerf Storage's question, per source: every instance runs ``accelerators`` emulated accelerators at
the compute's rate (samples/s each), so a cluster of N instances asks for N x that, and each source
delivers what its shared limits allow once divided among the N readers. There is one model: each
figure here is ``estimate.estimate_mode`` for N instances on a ``provisioning.Provisioning`` (AU,
the job's seconds and dollars, its set-up as ``decision`` prices it), so `dslab size`, `estimate`,
`recommend` and the report agree on the same cluster and premise. Sizing adds the search: what to
provision so the source feeds N instances (FSx's type, throughput and capacity, EFS's mode, S3
prefixes), and the largest N fed at AU >= 90% (MLPerf Storage v2.0's ResNet-50 threshold). Each
source is sized twice: provisioned to feed the cluster, and as the lab is deployed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..model.calibration import SHIPPED, InUse, with_range
from .decision import option_from_estimate
from ..errors import ConfigError
from ..model.estimate import NETWORK_PAYLOAD, SCRIPT_CONCURRENCY, Estimate, estimate_mode
from ..facts.instances import Instance, instance as find_instance
from ..modes import EFS, EXPRESS, FASTFILE, FILE, FSX, PIPE, SCRIPT, STANDARD, source_label
from ..shape import LARGE_FILE_BYTES, DatasetShape
from ..facts.limits import MAX_INSTANCE_COUNT, SCRIPT_CONCURRENCY_MAX
from ..model.volume import VOLUME_HEADROOM
from ..facts.prices import PriceTable
from ..model.provisioning import EfsConfig, FsxConfig, Provisioning, as_deployed, deploy_command
from ..facts.storage import (BURSTING, ELASTIC, PERSISTENT_2, PROVISIONED, SCRATCH_2, EFS_PROVISIONED_MAX_MIBPS,
                             EXPRESS_READS_MAX, EXPRESS_READS_PER_BUCKET, FSX_CAPACITY_INCREMENT_GIB,
                             FSX_PERSISTENT2_TIERS, FSX_SCRATCH2_BURST_MBPS_PER_TIB, FSX_SCRATCH2_MBPS_PER_TIB, MIB,
                             S3_GETS_PER_PREFIX, fsx_capacity_for, fsx_quota)

AU_TARGET = 90.0   # MLPerf Storage v2.0 rules: ResNet-50 and 3D U-Net at 90% AU (mlcommons/storage Submission_guidelines.md)
# A DLIO workload's own target (metric.au, core/workloads/dlio.py) replaces it: CosmoFlow's is 70% ("CosmoFlow N-body
# simulation (2MB/sample) | 70%", the same guidelines' table of workloads).
MAX_CLUSTER = MAX_INSTANCE_COUNT  # instances searched for the largest cluster a source feeds (premise.py's bound)
# FSx capacity is searched up to this many 2,400 GiB steps above the smallest that holds the data (~75 PiB:
# past any cluster here, so that one instance's own limits bind, not the search).
FSX_MAX_STEPS = 32768
SOURCES = ((FILE, STANDARD), (FASTFILE, STANDARD), (PIPE, STANDARD), (SCRIPT, STANDARD),
           (FILE, EXPRESS), (FASTFILE, EXPRESS), (PIPE, EXPRESS), (SCRIPT, EXPRESS), (FSX, STANDARD), (EFS, STANDARD))
# What a provisioning command names when the dataset is not known to `dslab size` (the CLI fills in what it knows).
DATASET_FOLDER, DATASET_PREFIX = "<folder>", "s3://<bucket>/datasets/<name>/"
# S3 Express One Zone: "By default, each directory bucket supports up to 200,000 reads and up to 100,000 writes per
# second. If your workload requires higher than the default TPS limits, you can request an increase through AWS
# Support" (S3 User Guide, s3-express-performance.html): a service-limit-increase case, no Service Quotas code.
# A raise goes up to 2,000,000 reads/s per bucket (EXPRESS_READS_MAX, provisioning.py cites it).
SUPPORT_LIMIT_CASE = "https://support.console.aws.amazon.com/support/home#/case/create?issueType=service-limit-increase"
EXPRESS_QUOTA = "S3 Express One Zone: reads per second per directory bucket"
EXPRESS_QUOTA_SOURCE = ("S3 User Guide, s3-express-performance.html: \"By default, each directory bucket supports up to "
                        "200,000 reads and up to 100,000 writes per second. If your workload requires higher than the "
                        "default TPS limits, you can request an increase through AWS Support.\"")
EXPRESS_QUOTA_STEP = 1000.0   # a raise is asked in whole thousands of reads per second
# A deploy's CONTEXT holds for that deploy only (Makefile: each word becomes -c key=value on top of cdk.json's).
CONTEXT_HOLDS = ("a deploy's CONTEXT holds for that deploy only: a later `make deploy` or `make fsx-up` without these "
                 "words builds cdk.json's settings again (put them in cdk.json's context to keep them); where that would "
                 "shrink FSx in place or change EFS's throughput within 24 hours of its last change, which AWS refuses, "
                 "it stops before anything changes and says the way (FSX=down, then up; the time after which EFS may)")


@dataclass
class SourceSize:
    source: str
    au_percent: float                  # at the target cluster
    # The largest cluster fed at AU >= AU_TARGET (0: not even one), as far as the source's documented limits
    # let it be provisioned: FSx grows with the cluster, EFS Elastic reads 20 GiB/s, a directory bucket
    # 200,000 reads/s by default, S3 prefixes without limit. MAX_CLUSTER: nothing shared binds within it.
    max_instances_at_target_au: int
    per_host_limit: str                # what bounds one instance
    shared_limit: str                  # what the cluster shares
    provision: str                     # what to provision to feed the target
    usd_per_hour: float                # instances + the source's standing cost at the target
    usd_per_run: float                 # one run (every epoch) at the target, the source's set-up included
    hours_per_run: float
    assumptions: list[str] = field(default_factory=list)
    # The same cluster on the lab as deployed (FSx Scratch 2 at its capacity, EFS Bursting, one S3 prefix).
    deployed: dict[str, Any] = field(default_factory=dict)
    # What provisions ``provision``: a deploy (make deploy ... CONTEXT="..."), an upload over S3 prefixes, a
    # support case or an experiment setting; empty where nothing beyond the lab as deployed is needed.
    commands: list[str] = field(default_factory=list)
    standing_usd_per_hour: float = 0.0   # what the provisioned source bills per hour while it stands, used or not

    accelerators_per_instance: int = 1
    # The deploy this row asks for, as context settings and the Makefile's FSX= word (empty: no deploy).
    deploy_settings: dict[str, Any] = field(default_factory=dict)
    deploy_fsx: str = "keep"
    # Where the row's source is already provisioned as it needs (FSx, EFS): why no command, e.g. "as deployed:
    # nothing to change". Empty otherwise.
    unchanged: str = ""
    # The service quota the row needs raised (the directory bucket's reads per second), or None.
    quota: dict[str, Any] | None = None
    # Why the source cannot run as premised (the lab as it stands cannot hold the data): no price is given.
    blocker: str | None = None
    # Where one run's dollars and hours may fall (calibration.estimate_range), and the evidence.
    usd_per_run_range: tuple[float, float] | None = None
    hours_per_run_range: tuple[float, float] | None = None
    range_evidence: list[str] = field(default_factory=list)
    range_summary: str = ""
    # What the row is priced on, in a few words for a table ("FSx P2-1000 7,200 GiB", "EFS Elastic", "4 S3 prefixes").
    short: str = ""
    # The estimates behind the row: as provisioned (with its range) and the same job on the lab as it stands.
    estimate: Any = field(default=None, repr=False, compare=False)
    deployed_estimate: Any = field(default=None, repr=False, compare=False)

    @property
    def max_accelerators_at_target_au(self) -> int:
        """MLPerf Storage's figure: the simulated accelerators the source feeds (instances x accelerators)."""
        return self.max_instances_at_target_au * self.accelerators_per_instance


@dataclass
class Sizing:
    instance: Instance
    count: int
    accelerators: int
    rate_per_accelerator: float
    demand_mbps_per_host: float
    demand_objects_per_host: float
    sources: list[SourceSize]
    notes: list[str]
    lab: Provisioning | None = None     # the lab as deployed (what the "as deployed" figures price)
    provisioned: bool = True            # False: every figure is the lab as deployed (`dslab size --as-deployed`)
    au_target: float = AU_TARGET        # percent: the AU each source must keep (a DLIO workload's metric.au)
    readers: int | None = None          # files one instance reads at once (None: its vCPUs)

    def combined_deploy(self) -> dict[str, Any] | None:
        """One deploy that sets what every row's deploy sets, together: each `make deploy` redeploys the Core stack
        with cdk.json's settings under its own CONTEXT, so one row's command run after another's undoes it (FSx's
        after EFS's puts EFS back as cdk.json builds it). None unless two rows or more deploy something."""
        rows = [s for s in self.sources if s.deploy_settings]
        if len(rows) < 2:
            return None
        own: dict[str, Any] = {}
        for row in rows:
            own.update(row.deploy_settings)
        settings = deploy_settings(self.lab, own)
        fsx = "up" if any(r.deploy_fsx == "up" for r in rows) else "keep"
        return {"sources": [r.source for r in rows], "settings": settings, "command": deploy_command(settings, fsx=fsx),
                "standing_usd_per_hour": round(sum(r.standing_usd_per_hour for r in rows), 2), "note": CONTEXT_HOLDS}


def deploy_settings(lab: Provisioning | None, own: dict[str, Any]) -> dict[str, Any]:
    """A deploy's context settings: ``own`` (what it provisions: FSx's, EFS's or both), then what the lab was deployed
    with beyond cdk.json for the parts ``own`` leaves alone (``Provisioning.keep_settings``), so that the deploy
    changes only what it provisions. EFS's performance mode stays as deployed unless ``own`` sets it (Elastic needs
    General Purpose): another mode would replace the file system."""
    kept = dict(lab.keep_settings) if lab is not None else {}
    parts = {key[:3] for key in own}
    out = dict(own)
    for key, value in kept.items():
        if key[:3] not in parts or (key == "efsPerformance" and key not in own):
            out.setdefault(key, value)
    return out


def au_of(estimate: Estimate) -> float:
    """The AU a source keeps; 0 where it cannot run as premised (it feeds nothing)."""
    return 0.0 if estimate.blocker else estimate.au_percent


def _largest(au_at, target: float = AU_TARGET, *, count: int = 1, most: int = MAX_CLUSTER) -> int:
    """The largest N in 1..``most`` with au_at(N) >= target (AU never grows with N once each instance holds its share).
    Where one instance cannot hold its share but the asked ``count`` can (File on NVMe with a dataset sized for the
    cluster), the search starts at ``count``: the largest is never below a cluster the AU column says is fed."""
    most = max(1, min(most, MAX_CLUSTER))
    if au_at(1) >= target:
        lo = 1
    elif 1 < count <= most and au_at(count) >= target:
        lo = count
    else:
        return 0
    hi = most
    if au_at(hi) >= target:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if au_at(mid) >= target else (lo, mid)
    return lo


def least_concurrency(au_at: Callable[[int], float], target: float, asked: int = SCRIPT_CONCURRENCY) -> int | None:
    """The fewest GETs in flight above ``asked`` (where ``au_at`` is below ``target``) at which
    ``au_at(concurrency)`` meets it, up to SCRIPT_CONCURRENCY_MAX; None where none does. More GETs in flight never
    lower AU (each epoch's GETs are spread over them), so a bisection finds it."""
    lo, hi = asked, SCRIPT_CONCURRENCY_MAX
    if au_at(hi) < target:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if au_at(mid) >= target else (mid, hi)
    return hi


def cheapest_fsx(shape: DatasetShape, job_on: Callable[[FsxConfig], Estimate], lab: Provisioning, prices: PriceTable,
                 au_target: float = AU_TARGET) -> FsxConfig:
    """The cheapest FSx (Scratch 2 at least the lab's size, or a Persistent 2 tier) that holds the data and feeds the
    cluster ``job_on`` estimates at AU >= au_target in the model; failing that, the one that feeds it best.
    ``job_on(config)``: the estimate of the cluster's FSx job on that file system."""
    dataset_gib = shape.bytes / 2**30
    candidates = []
    kinds = ((SCRATCH_2, FSX_SCRATCH2_MBPS_PER_TIB), *((PERSISTENT_2, float(t)) for t in FSX_PERSISTENT2_TIERS))
    for deployment_type, per_tib in kinds:
        least_gib = dataset_gib * VOLUME_HEADROOM
        if deployment_type == lab.fsx.deployment_type:   # never smaller than the lab's own file system of its kind
            least_gib = max(least_gib, lab.fsx.capacity_gib)
        smallest = fsx_capacity_for(least_gib)

        def at(steps: int, deployment_type=deployment_type, per_tib=per_tib, smallest=smallest) -> FsxConfig:
            # Each step the next allowed capacity: 1,200 GiB is followed by 2,400, then every 2,400 more.
            capacity = smallest if steps == 0 else \
                fsx_capacity_for((smallest // FSX_CAPACITY_INCREMENT_GIB + steps) * FSX_CAPACITY_INCREMENT_GIB)
            return FsxConfig(deployment_type, capacity, per_tib)

        def au(steps: int) -> float:
            return job_on(at(steps)).au_percent

        # More capacity never lowers AU: double the steps until it feeds (or stops helping), then bisect.
        hi = 0
        while au(hi) < au_target and hi < FSX_MAX_STEPS:
            hi = max(1, hi * 2)
        if au(hi) < au_target:
            # Nothing feeds them: the smallest capacity that does as well as the largest (past it, the instance's
            # own limits bind and more capacity only costs more).
            best, lo = au(hi), -1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if au(mid) >= best - 0.05 else (mid, hi)
            candidates.append((1, -round(best, 1), at(hi).hourly(prices), at(hi)))
            continue
        lo = -1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if au(mid) >= au_target else (mid, hi)
        candidates.append((0, 0.0, at(hi).hourly(prices), at(hi)))
    return min(candidates, key=lambda c: c[:3])[3]


def size(shape: DatasetShape, *, instance_type: str, count: int, rate: float, prices: PriceTable,
         epochs: int = 1, accelerators: int | None = None, fsx_capacity_gib: int = 1200,
         express: bool = True, deployed: Provisioning | None = None, provision: bool = True,
         au_target: float = AU_TARGET, readers: int | None = None, volume_size_gb: int | None = None,
         sources: tuple[tuple[str, str], ...] = SOURCES, data_in_efs: bool = False,
         calibration: InUse = SHIPPED, script_concurrency: int | None = None) -> Sizing:
    """Every source at ``count`` instances of ``instance_type``, each accelerator eating ``rate`` samples/s,
    provisioned to feed them and as ``deployed`` (default: the lab's stacks with ``fsx_capacity_gib``). With
    ``provision`` False, nothing is provisioned: every row is the lab as deployed (`dslab size --as-deployed`).
    ``au_target``: the AU (percent) a source must keep to feed a cluster; ``readers``: files one instance reads
    at once (a DLIO workload's read_threads x accelerators; default its vCPUs). ``sources``: the rows, in this order;
    ``data_in_efs``: the dataset lives in EFS (EFS reads it where it is; every other source copies it out first);
    ``calibration``: the model's constants and ranges (default: shipped; `dslab calibrate` writes others);
    ``script_concurrency``: the GETs in flight a Script job keeps (its s3_concurrency; None: the script's default)."""
    script_concurrency = script_concurrency or SCRIPT_CONCURRENCY
    found = find_instance(instance_type)
    if found is None:
        raise ConfigError("--instance", f"{instance_type} is not in the instance table (dslab/core/facts/instances.py)",
                          "a type of the table, e.g. ml.p4d.24xlarge")
    if not 1 <= count <= MAX_CLUSTER:
        raise ConfigError("--instance-count", f"{count} instances: give 1 to {MAX_CLUSTER:,}")
    if epochs < 1:
        raise ConfigError("--epochs", "must be at least 1")
    if not 0 < au_target <= 100:
        raise ConfigError("metric.au", f"{au_target:g}%: an AU target is above 0 and at most 100%")
    lab = deployed or as_deployed(fsx_capacity_gib)
    per_host_accelerators = accelerators or max(1, found.accelerators)
    samples, _ = shape.sample_count()
    sample_bytes = shape.bytes / samples
    objects_per_sample = shape.files / samples
    small_files = shape.mean_file_bytes <= LARGE_FILE_BYTES
    demand_sps = per_host_accelerators * rate                      # samples/s one instance eats
    demand_mbps = demand_sps * sample_bytes / 1e6
    demand_ops = demand_sps * objects_per_sample
    network_mbps = found.ip_gbps * 125 * NETWORK_PAYLOAD   # the primary card's, on a type of several
    # S3 requests per sample: one GET per small file, 8 MiB ranges of large ones.
    requests_per_sample = objects_per_sample if small_files else sample_bytes / (8 * 2**20)
    notes = []
    if found.network_baseline_gbps < found.network_gbps:
        notes.append(f"{instance_type}: 'up to' {found.network_gbps:g} Gbit/s, {found.network_baseline_gbps:g} sustained "
                     "(a run of hours outlasts the burst credits): the sustained figure is used")
    if found.ip_assumption:
        notes.append(found.ip_assumption)
    if shape.files < MAX_CLUSTER:
        notes.append(f"the largest cluster is at most the dataset's {shape.files:,} files: past them an instance gets "
                     "nothing to read (S3DataSource: \"Don't choose more ML compute instances for training than available "
                     "S3 objects\"; `dslab plan` refuses it)")
    dataset_gib = shape.bytes / 2**30

    def job_kwargs(n: int, provisioning: Provisioning) -> dict[str, Any]:
        return dict(instance_type=instance_type, instance_count=n, epochs=epochs, rate=rate, prices=prices,
                    accelerators=per_host_accelerators, provisioning=provisioning, volume_size_gb=volume_size_gb,
                    readers=readers, model=calibration.model, script_concurrency=script_concurrency)

    def job(mode: str, storage: str, n: int, provisioning: Provisioning, **more: Any) -> Estimate:
        return estimate_mode(mode, shape, storage=storage, efs_resident=data_in_efs and mode == EFS,
                             **{**job_kwargs(n, provisioning), **more})

    def run(estimate: Estimate, n: int) -> tuple[float, float, float]:
        """($ per hour while the job runs, $ per run with the set-up, hours per run) of one estimate."""
        option = option_from_estimate(estimate, shape, prices, instance_count=n, data_in_efs=data_in_efs,
                                      fsx_capacity_gib=estimate.provisioning.fsx.capacity_gib)
        hours = estimate.wall_seconds / 3600
        return option.job_usd / hours if hours else 0.0, option.cost_usd, hours

    # ---- what to provision for n instances, per source ---------------------------------------------
    def fsx_for(n: int) -> FsxConfig:
        """The cheapest FSx that holds the data and feeds n instances (cheapest_fsx)."""
        return cheapest_fsx(shape, lambda config: job(FSX, STANDARD, n, Provisioning(fsx=config, s3_prefixes=None)),
                            lab, prices, au_target)

    def efs_for(n: int) -> tuple[EfsConfig, bool]:
        """The EFS throughput mode that feeds n instances at AU >= au_target in the model for the least per
        run (Bursting, Elastic, or the least Provisioned MiB/s that does); failing that, the one that feeds best."""
        def evaluate(config: EfsConfig) -> tuple[bool, float, float]:
            estimate = job(EFS, STANDARD, n, Provisioning(fsx=lab.fsx, efs=config, s3_prefixes=None))
            return estimate.au_percent >= au_target, estimate.au_percent, run(estimate, n)[1]
        region = lab.efs.region   # EFS's per-file-system limits are its Region's
        top = int(min(EFS_PROVISIONED_MAX_MIBPS, EfsConfig(PROVISIONED, 1, region).limits[0]))
        if evaluate(EfsConfig(PROVISIONED, top, region))[0]:   # the least Provisioned MiB/s that feeds them
            lo, hi = 0, top
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if evaluate(EfsConfig(PROVISIONED, mid, region))[0] else (mid, hi)
            provisioned_config = EfsConfig(PROVISIONED, hi, region)
        else:
            provisioned_config = EfsConfig(PROVISIONED, top, region)
        ranked = [(config, *evaluate(config)) for config in (EfsConfig(BURSTING, None, region), EfsConfig(ELASTIC, None, region),
                                                             provisioned_config)]
        feeding = [r for r in ranked if r[1]]
        if feeding:
            return min(feeding, key=lambda r: r[3])[0], True
        return max(ranked, key=lambda r: r[2])[0], False

    def gets_per_second(estimate: Estimate, n: int) -> float:
        return n * demand_sps * estimate.au_percent / 100 * requests_per_sample

    def bucket_reads(mode: str, estimate: Estimate, n: int) -> float:
        """The reads per second the cluster asks of its bucket: File's download GETs every object once over the
        download, the others their requests at the AU they train at."""
        if mode == FILE:
            return shape.files / max(1.0, estimate.downloading / n)
        return gets_per_second(estimate, n)

    def express_demand(mode: str, n: int) -> tuple[float, float]:
        """(the reads per second n instances ask of the directory bucket where its rate does not bind, the read rate
        to provision for them): its default 200,000 while that holds them, else the demand in whole thousands, up to
        the 2,000,000 a raise gives one bucket. Sized against the demand, not against the default it would pass."""
        unbound = Provisioning(fsx=lab.fsx, efs=lab.efs, s3_prefixes=None, express_reads_per_second=float("inf"))
        reads = bucket_reads(mode, job(mode, EXPRESS, n, unbound), n)
        if reads <= EXPRESS_READS_PER_BUCKET:
            return reads, EXPRESS_READS_PER_BUCKET
        return reads, min(EXPRESS_READS_MAX, math.ceil(reads / EXPRESS_QUOTA_STEP) * EXPRESS_QUOTA_STEP)

    def provisioned(mode: str, n: int, storage: str = STANDARD) -> Provisioning:
        if not provision:
            return lab
        if mode == FSX:
            return Provisioning(fsx=fsx_for(n), efs=lab.efs, s3_prefixes=None, name="provisioned for the cluster")
        if mode == EFS:
            return Provisioning(fsx=lab.fsx, efs=efs_for(n)[0], s3_prefixes=None, name="provisioned for the cluster")
        rate = express_demand(mode, n)[1] if storage == EXPRESS else EXPRESS_READS_PER_BUCKET
        return Provisioning(fsx=lab.fsx, efs=lab.efs, s3_prefixes=None, express_reads_per_second=rate,
                            name="provisioned for the cluster")


    def express_quota(mode: str, n: int) -> dict[str, Any] | None:
        """The directory bucket's read quota to raise for n instances (None while its default holds them)."""
        reads, rate = express_demand(mode, n)
        if reads <= EXPRESS_READS_PER_BUCKET:
            return None
        buckets = math.ceil(reads / EXPRESS_READS_MAX)
        summary = (f"its read quota raised to {rate:,.0f}/s: {reads:,.0f} reads/s needed, above its default "
                   f"{EXPRESS_READS_PER_BUCKET:,.0f}"
                   + (f"; past the {EXPRESS_READS_MAX:,.0f} a raise gives one bucket, the rest needs the data split over "
                      f"{buckets} buckets" if buckets > 1 else ""))
        command = (f"AWS Support case, service limit increase (no Service Quotas code): raise \"{EXPRESS_QUOTA}\" for "
                   f"the lab's directory bucket (stack output ExpressBucketName) to {rate:,.0f} (default "
                   f"{EXPRESS_READS_PER_BUCKET:,.0f}): {SUPPORT_LIMIT_CASE}")
        return {"quota": EXPRESS_QUOTA, "default_per_second": EXPRESS_READS_PER_BUCKET, "needed_per_second": round(reads),
                "request_per_second": rate, "buckets_needed": buckets, "how": "AWS Support, service limit increase",
                "url": SUPPORT_LIMIT_CASE, "source": EXPRESS_QUOTA_SOURCE, "summary": summary, "command": command}

    out: list[SourceSize] = []
    readers = readers or found.vcpus
    for mode, storage in sources:
        if storage == EXPRESS and not express:
            continue
        label = source_label(mode, storage)
        premise = provisioned(mode, count, storage)
        estimate = with_range(job(mode, storage, count, premise), shape, efs_resident=data_in_efs and mode == EFS,
                              calibration=calibration, **job_kwargs(count, premise))
        per_hour, per_run, hours = run(estimate, count)
        ranged = option_from_estimate(estimate, shape, prices, instance_count=count, data_in_efs=data_in_efs,
                                      fsx_capacity_gib=estimate.provisioning.fsx.capacity_gib).cost_interval
        # The largest cluster on the same rule as the AU column: at each N the source as provisioned for N (FSx grown
        # with the cluster, EFS's mode, the directory bucket's quota raised as far as 2,000,000 reads/s), so that the
        # column and the largest agree at N and N + 1 (tests/test_sizing.py).
        largest = _largest(lambda n: au_of(job(mode, storage, n, provisioned(mode, n, storage))), au_target,
                           count=count, most=shape.files)
        gets = gets_per_second(estimate, count)
        extra: list[str] = []
        commands: list[str] = []
        standing = 0.0
        settings: dict[str, Any] = {}
        deploy_fsx, unchanged, quota = "keep", "", None
        upload = f"dslab dataset upload --src {DATASET_FOLDER} --to {DATASET_PREFIX} --prefixes {{}}"
        short = ""
        if not provision:
            how = shared = provision_text = ""
        elif mode == FILE:
            prefixes = max(1, math.ceil(shape.files / max(1.0, estimate.downloading / count) / S3_GETS_PER_PREFIX))
            how = f"its local copy ({'NVMe' if found.nvme_gb else 'EBS'})"
            shared = "none while training; the download GETs every object once"
            where = ("the directory bucket" if storage == EXPRESS else
                     f"{prefixes} S3 prefix{'es' if prefixes > 1 else ''}")
            volume = (f"{estimate.volume_gb:,} GB of NVMe per instance (fixed)" if found.nvme_gb else
                      f"a {estimate.volume_gb:,} GB volume per instance")
            provision_text = ((f"ShardedByS3Key, {volume}" if count > 1 else volume)
                              + f"; {where}; downloads {estimate.downloading / count / 60:,.0f} min first")
            extra.append("File: the download is billed before training starts; each instance holds only its shard")
            short = (f"{'NVMe' if found.nvme_gb else 'EBS'} {estimate.volume_gb:,} GB"
                     + (", directory bucket" if storage == EXPRESS else f", {prefixes} S3 prefixes" if prefixes > 1 else ""))
            if storage == STANDARD and prefixes > 1:
                commands.append(upload.format(prefixes))
            if storage == EXPRESS and provision:
                quota = express_quota(mode, count)
                if quota:
                    provision_text += f"; {quota['summary']}"
                    commands.append(quota["command"])
        elif mode == FSX:
            how = f"its network ({network_mbps:,.0f} MB/s) and its reads"
            shared = (f"{premise.fsx.mbps_per_tib:g} MB/s per TiB of the file system "
                      f"({FSX_SCRATCH2_BURST_MBPS_PER_TIB:g} burst for Scratch 2)")
            provision_text = (f"{premise.fsx.deployment_type}" + (f" {premise.fsx.mbps_per_tib:g} MB/s/TiB"
                                                                  if premise.fsx.deployment_type != "SCRATCH_2" else "")
                              + f", {premise.fsx.capacity_gib:,} GiB ({premise.fsx.throughput_mbps:,.0f} MB/s) — the "
                              + ("cheapest deployment type and size that holds the data and feeds the target"
                                 if estimate.au_percent >= au_target else
                                 "smallest that does as well as any: no deployment type or size feeds the target, "
                                 "each instance's own reads bind"))
            if premise.fsx == lab.fsx:   # what the lab has (or cdk.json would build): no deploy asks for it
                unchanged = f"{lab.premise_of('fsx')}: nothing to change" + (
                    "" if lab.premise_of("fsx") == "as deployed" else " (`make fsx-up` builds it if FSx is down)")
            else:
                settings, deploy_fsx = premise.fsx.settings(), "up"
                commands.append(deploy_command(deploy_settings(lab, settings), fsx="up"))
            standing = premise.fsx.hourly(prices)
            quota = fsx_quota(premise.fsx)
            if quota:   # above the account's default storage quota: said, with the request, as Express's read quota
                provision_text += f"; {quota['summary']}"
                commands.append(quota["command"])
            short = "FSx " + premise.fsx.short()
            if premise.fsx.deployment_type != "SCRATCH_2":
                extra.append("FSx: Persistent 2 prices are not confirmed against the live pricing page (override with --prices)")
        elif mode == EFS:
            config, feeds = efs_for(count)
            need = count * min(demand_mbps, config.per_client_mibps * MIB, network_mbps) / MIB
            how = f"{config.per_client_mibps:,g} MiB/s per client and its per-file latency"
            shared = f"the file system's throughput mode ({config.label()}: {config.read_mibps(dataset_gib):,.0f} MiB/s)"
            provision_text = (f"{config.label()} ({need:,.0f} MiB/s of reads needed, metered at a third)"
                              + ("" if feeds else ": no mode feeds it"))
            short = config.short()
            if config.mode == BURSTING:
                extra.append("EFS: Bursting holds its burst only while credits last (up to 12 hours a day)")
            if config == lab.efs:
                unchanged = f"{lab.premise_of('efs')}: nothing to change"
            else:
                settings = config.settings()
                commands.append(deploy_command(deploy_settings(lab, settings), fsx="keep"))
            standing = config.throughput_usd(prices, hours=1.0, gb_read=0.0)
            if config.mode == ELASTIC and lab.efs.mode != ELASTIC:
                extra.append("EFS: Elastic needs General Purpose; changing the performance mode replaces the file system "
                             "(the workflow stages the datasets into the new one)")
        elif storage == EXPRESS:
            how = f"{readers} readers, ~{calibration.model.express_first_byte * 1000:.0f} ms first byte"
            shared = (f"{EXPRESS_READS_PER_BUCKET:,.0f} reads/s per directory bucket (AWS default; up to "
                      f"{EXPRESS_READS_MAX:,.0f} on request)")
            quota = express_quota(mode, count)
            provision_text = (f"the directory bucket, {quota['summary']}" if quota else
                              f"the directory bucket ({gets:,.0f} reads/s at this size, within its default "
                              f"{EXPRESS_READS_PER_BUCKET:,.0f})")
            if quota:
                commands.append(quota["command"])
            short = "directory bucket" + (f", {quota['request_per_second'] / 1000:,.0f}k reads/s" if quota else "")
        else:
            prefixes = max(1, math.ceil(gets / S3_GETS_PER_PREFIX))
            how = f"{readers} readers, ~{calibration.model.s3_standard_first_byte * 1000:.0f} ms first byte"
            shared = f"{S3_GETS_PER_PREFIX:,.0f} GET/s per prefix, as many prefixes as needed"
            provision_text = (f"{prefixes} S3 prefix{'es' if prefixes > 1 else ''} ({gets:,.0f} GET/s at this size; "
                              f"{S3_GETS_PER_PREFIX:,.0f} per prefix)")
            if prefixes > 1:
                commands.append(upload.format(prefixes))
            short = f"{prefixes:,} S3 prefix{'es' if prefixes > 1 else ''}"
        if provision and mode == SCRIPT and small_files and estimate.au_percent < au_target:
            # The script's own knob (s3_concurrency): the fewest GETs in flight at which the model feeds the target,
            # the listing and each GET's transfer counted (the row stays priced at the concurrency asked).
            feeding = least_concurrency(
                lambda c: job(mode, storage, count, premise, script_concurrency=c).au_percent, au_target,
                script_concurrency)
            if feeding is None:
                provision_text += f"; no s3_concurrency up to {SCRIPT_CONCURRENCY_MAX:,} feeds it"
            else:
                provision_text += f"; s3_concurrency {feeding} instead of {script_concurrency} feeds it"
                commands.append(f"experiment: hyperparameters: {{s3_concurrency: {feeding}}}")
        # The same cluster on the lab as it stands: one prefix per dataset, Scratch 2 at the lab's size, EFS Bursting.
        as_is = with_range(job(mode, storage, count, lab), shape, efs_resident=data_in_efs and mode == EFS,
                           calibration=calibration, **job_kwargs(count, lab))
        as_is_hour, as_is_run, _ = run(as_is, count)
        deployed_view = {"au_percent": round(as_is.au_percent, 1),
                         "max_instances_at_target_au": _largest(lambda n: au_of(job(mode, storage, n, lab)), au_target,
                                                                 count=count, most=shape.files),
                         "usd_per_run": round(as_is_run, 2), "usd_per_hour": round(as_is_hour, 2),
                         "premise": (lab.fsx.label() if mode == FSX else lab.efs.label() if mode == EFS else
                                     f"{as_is.volume_gb:,} GB per instance ({'NVMe' if found.nvme_gb else 'EBS'})"
                                     if mode == FILE else
                                     "the dataset under one S3 prefix" if storage == STANDARD else
                                     "the directory bucket at its default read rate")}
        if as_is.blocker:   # the lab as it stands cannot hold the data: no price for what cannot run
            deployed_view.update(au_percent=None, usd_per_run=None, usd_per_hour=None, blocker=as_is.blocker,
                                 max_instances_at_target_au=0)
        if not provision:   # every figure is the lab as it stands: nothing to provision, nothing to run
            how = shared = lab.name.split(" (")[0]   # "the lab as deployed", or "... as cdk.json would deploy it"
            provision_text = short = deployed_view["premise"]
        deployed_view["max_accelerators_at_target_au"] = deployed_view["max_instances_at_target_au"] * per_host_accelerators
        r = estimate.range
        out.append(SourceSize(label, au_of(estimate), largest, how, shared, provision_text, per_hour, per_run, hours,
                              extra, deployed_view, commands, standing, per_host_accelerators, settings, deploy_fsx,
                              unchanged, quota, estimate.blocker, ranged,
                              (r.billable_low / count / 3600, r.billable_high / count / 3600), r.evidence, r.summary(),
                              short, estimate, as_is))
    return Sizing(found, count, per_host_accelerators, rate, demand_mbps, demand_ops, out, notes, lab, provision,
                  au_target, readers)
