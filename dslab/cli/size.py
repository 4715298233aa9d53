"""``dslab size``: how many accelerators each data source feeds, and what to provision for a cluster."""

from __future__ import annotations

from ..core.errors import ConfigError
from .common import print_ignored
from .common import add_command, print_json, price_table
from .question import (add_question_flags, duration, is_checkpoint_question, premise_json, premise_of,
                       workload_of)


def sizing_for(args):
    """The premise and the sizing the arguments ask for (shared by `dslab size` and tests): the same question as
    estimate and recommend ask (question.premise_of), searched over provisioning."""
    from ..core.facts.instances import INSTANCES
    from ..core.facts.limits import none_too_long
    from ..core.answer.sizing import size
    if args.instance is not None and args.instance not in INSTANCES:
        import difflib
        close = difflib.get_close_matches(args.instance, INSTANCES, n=2)
        raise ConfigError("--instance", f"{args.instance!r} is not in the instance table (dslab/core/facts/instances.py)"
                          + (f"; did you mean {' or '.join(close)}?" if close else ""), sorted(INSTANCES))
    prices = price_table(args.prices)
    premise = premise_of(args, prices=prices)
    result = size(premise.shape, instance_type=premise.instance_type, count=premise.instance_count, rate=premise.rate,
                  prices=prices, epochs=premise.epochs, accelerators=premise.accelerators, deployed=premise.lab,
                  provision=not getattr(args, "as_deployed", False), au_target=premise.au_target,
                  readers=premise.readers, volume_size_gb=premise.volume_size_gb)
    _name_the_dataset(result, getattr(args, "dataset", None))
    # One run is one training job per instance: past SageMaker's 28-day MaxRuntimeInSeconds it would be stopped.
    too_long = none_too_long({s.source: s.hours_per_run * 3600 for s in result.sources if not s.blocker},
                             field="--files/--bytes/--samples/--epochs/--instance-count")
    if too_long:
        result.notes.append(f"{', '.join(too_long)}: a run would outlast SageMaker's 28-day limit on a training job "
                            "(StoppingCondition.MaxRuntimeInSeconds); fewer epochs or samples, or more instances")
    return premise, result


def _name_the_dataset(result, dataset: str | None) -> None:
    """The upload commands name the dataset where `dslab size` was given it (a folder, or its S3 prefix)."""
    from ..core.answer.sizing import DATASET_FOLDER, DATASET_PREFIX
    if not dataset:
        return
    placeholder = DATASET_PREFIX if dataset.startswith("s3://") else DATASET_FOLDER
    for source in result.sources:
        source.commands = [c.replace(placeholder, dataset) for c in source.commands]


def cmd_size(args) -> int:
    from ..report import duration
    if is_checkpoint_question(args):
        from . import checkpoints
        if args.as_deployed:
            raise ConfigError("--as-deployed", "`dslab estimate --workload` gives every checkpoint target as the lab stands")
        return checkpoints.cmd_size(args, price_table(args.prices))
    premise, result = sizing_for(args)
    if args.json:
        print_json({**premise_json(premise, workload_of(args)), "files": premise.shape.files,
                    "bytes": premise.shape.bytes, "compute": premise.compute, **result.to_dict()})
        return 0
    i = result.instance
    print(premise.describe())
    print(f"{i.name}: {result.accelerators} x {i.accelerator or 'no accelerator'} each, {i.network_gbps:g} Gbit/s, "
          f"{'%s GB NVMe' % format(i.nvme_gb, ',') if i.nvme_gb else 'EBS only'}")
    print_ignored([workload_of(args)])
    print(f"each instance asks {result.demand_mbps_per_host:,.0f} MB/s ({result.demand_objects_per_host:,.0f} objects/s); "
          f"the cluster {result.demand_mbps_per_host * result.count:,.0f} MB/s")
    heading = f"provision for {result.count:,} instance(s)" if result.provisioned else result.lab.name.split(" (")[0]
    print(f"{'source':17s} {'AU':>6s} {'largest at AU>=' + format(result.au_target, 'g') + '%':>19s} {'accelerators':>12s} "
          f"{'$/hour':>9s} {'$/run':>9s} {'$/run range':>15s} {'run':>7s}  {heading}")
    for s in result.sources:
        largest, fed = _largest_text(s.max_instances_at_target_au, result.accelerators)
        if s.blocker:
            print(f"{s.source:17s} {'-':>6s} {'-':>19s} {'-':>12s} {'-':>9s} {'-':>9s} {'-':>15s} {'-':>7s}  "
                  f"cannot run: {s.blocker}")
            continue
        ranged = (f"{s.usd_per_run_range[0]:,.2f}-{s.usd_per_run_range[1]:,.2f}" if s.usd_per_run_range else "-")
        print(f"{s.source:17s} {s.au_percent:5.1f}% {largest + ' inst.':>19s} {fed:>12s} {s.usd_per_hour:9,.2f} "
              f"{s.usd_per_run:9,.2f} {ranged:>15s} {duration(s.hours_per_run * 3600):>7s}  {s.provision}")
    # What each row's figures carry (--json: each source's assumptions), each line once.
    for line in dict.fromkeys(line for s in result.sources for line in s.assumptions):
        print(f"note: {line}")
    for s in result.sources:
        if s.range_summary and not s.blocker:
            print(f"range: {s.source}: {s.range_summary}")
    if not result.provisioned:
        _print_footer(result, i, args)
        return 0
    _print_to_provision(result)
    print(f"{result.lab.describe()} (the same {result.count:,} instance(s), nothing provisioned for them):")
    for s in result.sources:
        d = s.deployed
        if d.get("blocker"):
            print(f"{s.source:17s} {'-':>6s} {'-':>19s} {'-':>12s} {'-':>9s} {'-':>9s} {'':15s}  {'':7s}  "
                  f"cannot run: {d['blocker']}")
            continue
        largest, fed = _largest_text(d["max_instances_at_target_au"], result.accelerators)
        print(f"{s.source:17s} {d['au_percent']:5.1f}% {largest + ' inst.':>19s} {fed:>12s} {d['usd_per_hour']:9,.2f} "
              f"{d['usd_per_run']:9,.2f} {'':15s}  {'':7s}  {d['premise']}")
    _print_footer(result, i, args)
    return 0


def _print_to_provision(result) -> None:
    """Each row's commands (a row already provisioned as it needs says so instead), and, where several rows
    deploy, the one deploy that sets them all: each `make deploy` builds cdk.json's settings under its own CONTEXT."""
    from ..core.answer.sizing import CONTEXT_HOLDS
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
    from ..core.answer.sizing import MAX_CLUSTER
    if instances >= MAX_CLUSTER:
        return f">={MAX_CLUSTER:,}", f">={MAX_CLUSTER * per_instance:,}"
    return f"{instances:,}", f"{instances * per_instance:,}"


def _print_footer(result, i, args) -> None:
    for line in result.notes:
        print(f"note: {line}")
    print("AU: as DLIO computes it for MLPerf Storage, each epoch's compute over its wall time, averaged over the "
          "epochs, the pipeline overlapping reads with steps; the largest cluster "
          "as far as each source's documented limits let it be provisioned (dslab/core/answer/sizing.py cites them)")
    print(f"instances: {i.source}, checked {i.checked}")
    print(price_table(args.prices).footer())


def register(sub) -> None:
    p = add_command(sub, "size", cmd_size,
                    "How many accelerators each data source feeds at AU >= 90% (MLPerf Storage's question), the AU at a "
                    "cluster size, and what to provision for it (FSx capacity and deployment type, EFS throughput mode, "
                    "S3 prefixes), with the cost per hour and per run.",
                    "dslab size --files 1530350 --bytes 54GB --instance ml.p4d.24xlarge --instance-count 16")
    add_question_flags(p)
    p.add_argument("--outputs", help="the deployed lab's stack outputs file: its FSx and EFS as deployed (default: the "
                   "cdk-outputs.json `make deploy` wrote here, with the cdk-outputs-fsx.json of `make fsx-up`; without "
                   "them, the lab as cdk.json would deploy it)")
    p.add_argument("--as-deployed", action="store_true", help="provision nothing: every source on the lab as it stands")
    p.add_argument("--save-under", type=duration("s"), help="with a checkpointing --workload: the longest a save may take "
                   "(default 60s): what FSx and EFS are provisioned for")
