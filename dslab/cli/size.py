"""``dslab size``: how many accelerators each data source feeds, and what to provision for a cluster."""

from __future__ import annotations

from ..core.errors import ConfigError
from ..core.estimate import MAX_COMPUTE_RATE
from ..core.limits import MAX_EPOCHS
from ..core.sizing import MAX_CLUSTER
from .advice import (_shape, accelerators_per_instance, add_accelerators_flag, add_workload_flags, print_ignored,
                     workload_json, workload_of)
from .common import add_command, lab_provisioning, price_table, print_json, real, whole


def sizing_for(args):
    """The sizing the arguments ask for (shared by `dslab size` and tests)."""
    from ..core.estimate import compute_rate
    from ..core.instances import INSTANCES
    from ..core.limits import none_too_long
    from ..core.sizing import size
    shape = _shape(args)
    if args.instance not in INSTANCES:
        import difflib
        close = difflib.get_close_matches(args.instance, INSTANCES, n=2)
        raise ConfigError("--instance", f"{args.instance!r} is not in the instance table (dslab/core/instances.py)"
                          + (f"; did you mean {' or '.join(close)}?" if close else ""), sorted(INSTANCES))
    prices = price_table(args.prices)
    prices.require_instance(args.instance, "--instance")
    workload = workload_of(args)
    extra = {}
    if workload is not None:
        # As DLIO emulates it (core/dlio.py): batch_size every computation_time per accelerator, its epochs,
        # read_threads readers per accelerator, and its AU target (metric.au) for the largest cluster.
        rate, note = workload.rate, workload.describe()
        accelerators = accelerators_per_instance(args, args.instance)
        extra = {"au_target": workload.au_percent, "readers": workload.readers(accelerators)}
        epochs = args.epochs or workload.epochs
    else:
        # The same rule as estimate and recommend: the instance's accelerator decides, or --compute-rate.
        rate, note = compute_rate(args.compute_preset, args.compute_rate, instance_type=args.instance)
        epochs = args.epochs or 1
    lab = lab_provisioning(args)
    result = size(shape, instance_type=args.instance, count=args.count or 1, rate=rate, prices=prices,
                  epochs=epochs, accelerators=args.accelerators, deployed=lab,
                  provision=not getattr(args, "as_deployed", False), **extra)
    _name_the_dataset(result, getattr(args, "dataset", None))
    # One run is one training job per instance: past SageMaker's 28-day MaxRuntimeInSeconds it would be stopped.
    too_long = none_too_long({s.source: s.hours_per_run * 3600 for s in result.sources},
                             field="--files/--bytes/--samples/--epochs/--count")
    if too_long:
        result.notes.append(f"{', '.join(too_long)}: a run would outlast SageMaker's 28-day limit on a training job "
                            "(StoppingCondition.MaxRuntimeInSeconds); fewer epochs or samples, or more instances")
    return shape, result, note


def _name_the_dataset(result, dataset: str | None) -> None:
    """The upload commands name the dataset where `dslab size` was given it (a folder, or its S3 prefix)."""
    from ..core.sizing import DATASET_FOLDER, DATASET_PREFIX
    if not dataset:
        return
    placeholder = DATASET_PREFIX if dataset.startswith("s3://") else DATASET_FOLDER
    for source in result.sources:
        source.commands = [c.replace(placeholder, dataset) for c in source.commands]


def cmd_size(args) -> int:
    from ..core.sizing import MAX_CLUSTER
    from ..report import duration
    shape, result, note = sizing_for(args)
    workload = workload_of(args)
    if args.json:
        print_json({"files": shape.files, "bytes": shape.bytes, "compute": note, **result.to_dict(),
                    **({"workload": workload_json(workload)} if workload else {})})
        return 0
    i = result.instance
    print(f"{shape.files:,} files, {shape.bytes / 1e9:.2f} GB; {result.count} x {i.name} ({result.accelerators} x "
          f"{i.accelerator or 'no accelerator'} each, {i.network_gbps:g} Gbit/s, "
          f"{'%d GB NVMe' % i.nvme_gb if i.nvme_gb else 'EBS only'}); {note}")
    print_ignored([workload])
    print(f"each instance asks {result.demand_mbps_per_host:,.0f} MB/s ({result.demand_objects_per_host:,.0f} objects/s); "
          f"the cluster {result.demand_mbps_per_host * result.count:,.0f} MB/s")
    heading = f"provision for {result.count} instance(s)" if result.provisioned else result.lab.name.split(" (")[0]
    print(f"{'source':17s} {'AU':>6s} {'largest at AU>=' + format(result.au_target, 'g') + '%':>19s} {'accelerators':>12s} "
          f"{'$/hour':>9s} {'$/run':>9s} {'run':>7s}  {heading}")
    for s in result.sources:
        largest, fed = _largest_text(s.max_instances_at_target_au, result.accelerators)
        print(f"{s.source:17s} {s.au_percent:5.1f}% {largest + ' inst.':>19s} {fed:>12s} {s.usd_per_hour:9,.2f} "
              f"{s.usd_per_run:9,.2f} {duration(s.hours_per_run * 3600):>7s}  {s.provision}")
    # What each row's figures carry (--json: each source's assumptions), each line once.
    for line in dict.fromkeys(line for s in result.sources for line in s.assumptions):
        print(f"note: {line}")
    if not result.provisioned:
        print(f"priced on {result.lab.describe()}")
        _print_footer(result, i, args)
        return 0
    _print_to_provision(result)
    print(f"{result.lab.describe()} (the same {result.count} instance(s), nothing provisioned for them):")
    for s in result.sources:
        d = s.deployed
        largest, fed = _largest_text(d["max_instances_at_target_au"], result.accelerators)
        print(f"{s.source:17s} {d['au_percent']:5.1f}% {largest + ' inst.':>19s} {fed:>12s} {d['usd_per_hour']:9,.2f} "
              f"{d['usd_per_run']:9,.2f}  {'':7s}  {d['premise']}")
    _print_footer(result, i, args)
    return 0


def _print_to_provision(result) -> None:
    """Each row's commands (a row already provisioned as it needs says so instead), and, where several rows
    deploy, the one deploy that sets them all: each `make deploy` builds cdk.json's settings under its own CONTEXT."""
    from ..core.sizing import CONTEXT_HOLDS
    print(f"to provision for {result.count} instance(s):")
    said = False
    for s in result.sources:
        if s.unchanged:
            print(f"  {s.source:17s} {s.unchanged}")
            said = True
        for command in s.commands:
            standing = (f"  # ${s.standing_usd_per_hour:,.2f}/hour while it stands" if s.standing_usd_per_hour
                        and command.startswith("make deploy") else "")
            print(f"  {s.source:17s} {command}{standing}")
            said = True
    if not said:
        print("  nothing: every source feeds them as the lab stands")
    combined = result.combined_deploy()
    if combined:
        standing = (f"  # ${combined['standing_usd_per_hour']:,.2f}/hour while it stands"
                    if combined["standing_usd_per_hour"] else "")
        print(f"  {' + '.join(combined['sources'])} together (one deploy sets them all: run it instead of the separate "
              f"deploys, which undo each other):")
        print(f"  {'':17s} {combined['command']}{standing}")
    if any(s.deploy_settings for s in result.sources):
        print(f"  {CONTEXT_HOLDS}")


def _largest_text(instances: int, per_instance: int) -> tuple[str, str]:
    """The largest cluster fed as instances and as MLPerf Storage counts it: accelerators (instances x per instance)."""
    from ..core.sizing import MAX_CLUSTER
    if instances >= MAX_CLUSTER:
        return f">={MAX_CLUSTER:,}", f">={MAX_CLUSTER * per_instance:,}"
    return f"{instances:,}", f"{instances * per_instance:,}"


def _print_footer(result, i, args) -> None:
    for line in result.notes:
        print(f"note: {line}")
    print("AU: as DLIO computes it for MLPerf Storage, each epoch's compute over its wall time, averaged over the "
          "epochs, the pipeline overlapping reads with steps; the largest cluster "
          "as far as each source's documented limits let it be provisioned (dslab/core/sizing.py cites them)")
    print(f"instances: {i.source}, checked {i.checked}")
    print(price_table(args.prices).label())


def register(sub) -> None:
    p = add_command(sub, "size", cmd_size,
                    "How many accelerators each data source feeds at AU >= 90% (MLPerf Storage's question), the AU at a "
                    "cluster size, and what to provision for it (FSx capacity and deployment type, EFS throughput mode, "
                    "S3 prefixes), with the cost per hour and per run.",
                    "dslab size --files 1530350 --bytes 54GB --instance ml.p4d.24xlarge --count 16")
    p.add_argument("--dataset", help="a folder or s3:// prefix to measure")
    p.add_argument("--files", type=whole(1))
    p.add_argument("--bytes", help="total size, e.g. 54GB")
    p.add_argument("--samples", type=whole(1), help="samples in the dataset (default: files, or bytes / 35.9 KB for large files)")
    p.add_argument("--instance", default="ml.p4d.24xlarge", help="training instance type (default ml.p4d.24xlarge)")
    p.add_argument("--count", type=whole(1, MAX_CLUSTER), default=1, help="the cluster to feed: instances (default 1)")
    add_accelerators_flag(p)
    p.add_argument("--compute-rate", type=real(0, MAX_COMPUTE_RATE), help="samples per second one accelerator consumes")
    p.add_argument("--compute-preset", help="v100, a100 or h100 (default: the instance's accelerator; without one, "
                   "give --compute-rate)")
    p.add_argument("--epochs", type=whole(1, MAX_EPOCHS), help="epochs per run (default 1)")
    p.add_argument("--fsx-capacity", type=whole(1200), help="the lab's FSx size in GiB (default: the lab as deployed)")
    p.add_argument("--outputs", help="the deployed lab's stack outputs file: its FSx and EFS as deployed (default: the "
                   "cdk-outputs.json `make deploy` wrote here, with the cdk-outputs-fsx.json of `make fsx-up`; without "
                   "them, the lab as cdk.json would deploy it)")
    p.add_argument("--as-deployed", action="store_true", help="provision nothing: every source on the lab as it stands")
    add_workload_flags(p)
    p.add_argument("--prices", help="YAML file overriding prices")
    p.add_argument("--json", action="store_true")
