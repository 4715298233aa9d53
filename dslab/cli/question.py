"""The question `estimate`, `recommend` and `size` answer, from the same flags with the same defaults and bounds
(core/answer/premise.py): the dataset (--dataset, --files/--bytes/--samples, or --workload), the instance and how many,
their accelerators and compute, the epochs, the volume and the lab. `plan`, `run`, `local` and `export` take
--instance, --instance-count and --epochs on top of their experiment (``add_override_flags``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.facts.limits import MAX_ACCELERATORS, MAX_EPOCHS, MAX_VOLUME_SIZE_GB, SCRIPT_CONCURRENCY_MAX
from ..core.facts.limits import DEFAULT_EPOCHS, DEFAULT_INSTANCE, MAX_INSTANCE_COUNT
from ..core.facts.compute import MAX_COMPUTE_RATE
from ..core.model.estimate import SCRIPT_CONCURRENCY
from ..core.answer.premise import Premise
from .common import lab_provisioning, price_table, real, whole

INSTANCE_HELP = f"training instance type (default {DEFAULT_INSTANCE}, the source post's)"
COUNT_HELP = "instances of the job, sharing each epoch (default 1; --count is the same flag)"
EPOCHS_HELP = f"epochs per job (default {DEFAULT_EPOCHS}, or the workload's)"


def add_instance_flags(p) -> None:
    """--instance, --instance-count (alias --count) and --epochs: every command that answers or runs a question."""
    p.add_argument("--instance", help=INSTANCE_HELP)
    p.add_argument("--instance-count", "--count", dest="instance_count", type=whole(1, MAX_INSTANCE_COUNT),
                   help=COUNT_HELP)
    p.add_argument("--epochs", type=whole(1, MAX_EPOCHS), help=EPOCHS_HELP)


def experiment_overrides(args) -> dict[str, Any]:
    """--instance, --instance-count and --epochs as the experiment keys they replace in every trial (plan, run, local,
    export, recommend --experiment); the instance is checked here so that its error names the flag."""
    out: dict[str, Any] = {}
    if getattr(args, "instance", None) is not None:
        from ..aws.validation import instance_type_problem
        problem = instance_type_problem(args.instance)
        if problem:
            raise ConfigError("--instance", problem)
        out["instance_type"] = args.instance
    if getattr(args, "instance_count", None) is not None:
        out["instance_count"] = args.instance_count
    if getattr(args, "epochs", None) is not None:
        out["epochs"] = args.epochs
    if getattr(args, "calibration", None):   # --calibration over the file's calibration: key (from where dslab runs)
        out["calibration"] = str(Path(args.calibration).resolve())
    return out


def add_question_flags(p, *, dataset_help: str = "a folder or s3:// prefix to measure") -> None:
    """The flags of a question asked without an experiment file (estimate, recommend, size)."""
    p.add_argument("--dataset", help=dataset_help)
    p.add_argument("--files", type=whole(1), help="files in the dataset")
    p.add_argument("--bytes", help="the dataset's size with its unit: 2TB, 54GB, 1.5GiB")
    p.add_argument("--samples", type=whole(1), help="samples in the dataset (default: one per file, or bytes / 35.9 KB "
                   "inside files of over 1 MB)")
    add_instance_flags(p)
    p.add_argument("--accelerators", type=whole(1, MAX_ACCELERATORS),
                   help="accelerators per instance, each at the compute's rate (default: the instance table's)")
    p.add_argument("--compute-rate", type=real(0, MAX_COMPUTE_RATE), help="samples per second one accelerator consumes")
    p.add_argument("--compute-preset", help="a compute preset (default: the instance's accelerator's): v100, a100, h100 "
                   "(MLPerf Storage's emulation), a10g, l4, l40s (published training rates); T4 and Trainium have none: "
                   "give --compute-rate")
    p.add_argument("--volume-size-gb", type=whole(1, MAX_VOLUME_SIZE_GB),
                   help="the EBS training volume per instance (default: 100 GB, raised to what File mode's share needs; "
                        "NVMe types have their own instance storage)")
    p.add_argument("--fsx-capacity", type=whole(1200), help="the lab's FSx size in GiB (default: as deployed)")
    p.add_argument("--s3-concurrency", type=whole(1, SCRIPT_CONCURRENCY_MAX),
                   help="GETs in flight a Script job keeps, as the lab's script's s3_concurrency hyperparameter sets "
                        f"them (default: the script's {SCRIPT_CONCURRENCY})")
    add_workload_flags(p)
    add_checkpoint_flags(p)
    p.add_argument("--mlperf-datasize", action="store_true", help="with --workload: as many files as MLPerf Storage's "
                   "datasize step gives this cluster (5 x the hosts' memory, 500 steps an epoch), not the file's count")
    p.add_argument("--prices", help="YAML file overriding prices (`dslab/core/facts/prices.py` has the table)")
    add_calibration_flag(p)
    p.add_argument("--json", action="store_true", help="the whole answer as JSON (docs/reference/answer.md)")
    p.add_argument("--explain", action="store_true", help="after the table: why, the passed-over sources, the ranges "
                   "and their evidence, the assumptions, what provisions each source, the whole premise")


def add_calibration_flag(p) -> None:
    p.add_argument("--calibration", help="a calibration file `dslab calibrate` wrote from your own AWS runs: its "
                   "constants and ranges (default: the shipped calibration, which the premise names)")


def calibration_of(args):
    """The calibration the flags name (the shipped one without --calibration)."""
    from ..inputs.calibration_file import read_calibration
    return read_calibration(getattr(args, "calibration", None))


def add_workload_flags(p) -> None:
    """--workload and --scale, as size, estimate, recommend, plan, run and local take them."""
    p.add_argument("--workload", help="a DLIO workload file as MLPerf Storage publishes it (dlio_benchmark/configs/"
                   "workload/*.yaml): its dataset, compute (batch_size every computation_time per accelerator), epochs, "
                   "read_threads and AU target (metric.au); or a checkpointing one (llama3_8b.yaml, ...): its "
                   "checkpoints, on every checkpoint target")
    p.add_argument("--scale", type=real(0, 1), help="with --workload: the fraction of its files (record sizes kept; "
                   "default 1), or of a checkpointing workload's every file's bytes")


def duration(unit: str = "m"):
    """An argparse type: seconds from "30m", "2h", "90s" or a bare number in ``unit`` (checkpoint_estimate)."""
    import argparse

    def parse(text: str) -> float:
        from ..core.model.checkpoint_estimate import parse_duration
        try:
            return parse_duration(text, "", unit=unit)
        except ConfigError as err:
            raise argparse.ArgumentTypeError(f"{text!r} is not a duration: e.g. 30m, 2h, 90s (1 s to 7 days)") from err
    parse.kind = float  # type: ignore[attr-defined]
    return parse


def add_checkpoint_flags(p) -> None:
    """With a checkpointing --workload: how often a save comes, how many are kept, the longest a save may take."""
    from ..core.model.checkpoint_estimate import DEFAULT_KEEP, MAX_KEEP
    p.add_argument("--checkpoint-every", type=duration("m"), help="with a checkpointing --workload: the time between "
                   "saves: 30m, 2h, 90s, or minutes (default 30m)")
    p.add_argument("--keep", type=whole(1, MAX_KEEP), help="with a checkpointing --workload: checkpoints kept (default: "
                   f"the workload's num_checkpoints_write, as an experiment of it keeps them; {DEFAULT_KEEP} where it "
                   "writes none)")
    p.add_argument("--save-under", type=duration("s"), help="with a checkpointing --workload: the longest a save may "
                   "take, e.g. 60s: FSx and EFS are provisioned to meet it (default: for the cheapest day that keeps up)")


def workload_of(args):
    """The DLIO workload --workload names (core/workloads/dlio.py), at --scale; None without --workload. Its dataset and
    compute replace --dataset/--files/--bytes/--samples and --compute-preset/--compute-rate, which are refused beside it."""
    if getattr(args, "_workload", None) is not None:
        return args._workload
    path = getattr(args, "workload", None)
    if path is None:
        if getattr(args, "scale", None) is not None:
            raise ConfigError("--scale", "goes with --workload (the fraction of its files)")
        return None
    for flag in ("dataset", "files", "bytes", "samples", "compute_rate", "compute_preset"):
        if getattr(args, flag, None) is not None:
            raise ConfigError(f"--{flag.replace('_', '-')}", "comes from the workload file with --workload; drop it")
    from dataclasses import replace

    from ..core.workloads.dlio import parse_any_workload
    from ..inputs.experiment_file import read_workload
    document, digest = read_workload(Path(path))
    try:
        workload = parse_any_workload(document, str(path))
    except ConfigError as err:
        raise err.with_source(str(path)) from None
    workload = replace(workload, sha256=digest)
    args._workload = workload.with_scale(args.scale) if getattr(args, "scale", None) is not None else workload
    return args._workload


def shape_of(args):
    """The dataset's shape and where it came from, in words."""
    from ..core.shape import DatasetShape, check_file_bytes, parse_bytes
    workload = workload_of(args)
    if workload is not None:
        return workload.shape(), f"the workload file {workload.source}"
    if args.dataset and (args.files or args.bytes):
        raise ConfigError("--dataset", "give either --dataset or --files with --bytes, not both")
    if args.dataset:
        from ..inputs.datasets import stats
        try:
            info = stats(args.dataset)
        except ConfigError as err:   # stats names its argument PATH (`dslab dataset stats PATH`); here it is --dataset
            raise ConfigError("--dataset" if err.field == "PATH" else err.field, err.problem, err.allowed) from None
        return DatasetShape(files=info["files"], bytes=info["bytes"], samples=args.samples), f"measured in {args.dataset}"
    if not (args.files and args.bytes):
        raise ConfigError("--files/--bytes", "give --dataset PATH|s3://..., or both --files N and --bytes B (e.g. 54GB)")
    size = parse_bytes(args.bytes, "--bytes")
    check_file_bytes(args.files, size, "--bytes", "--files")
    return DatasetShape(files=args.files, bytes=size, samples=args.samples), "given: --files/--bytes"


def check_instance(instance: str, prices) -> None:
    """An instance type botocore's SageMaker model knows (did you mean) and the price table prices."""
    from ..aws.validation import instance_type_problem
    problem = instance_type_problem(instance)
    if problem:
        raise ConfigError("--instance", problem)
    if prices.instance_hourly(instance) is None:   # said in one line that fits (PriceTable's own sentence is longer)
        raise ConfigError("--instance", f"no price for {instance} (table of {prices.date}): add it to a --prices "
                          "file's instance_hourly, or pick a type `dslab prices` lists")
    prices.require_instance(instance, "--instance")


def _cluster(args, prices, defaults: set[str]) -> tuple[str, int]:
    """The instance type and count the flags ask for, each default taken added to ``defaults`` (the premise names
    them); an instance type without a price refused."""
    instance = args.instance
    if instance is None:
        instance = DEFAULT_INSTANCE
        defaults.add("instance")
    check_instance(instance, prices)
    count = args.instance_count
    if count is None:
        count = 1
        defaults.add("instance_count")
    return instance, count


def premise_of(args, lab=None, prices=None) -> Premise:
    """The question the flags ask, every default named (Premise.defaults), on ``lab`` (default: the lab as deployed,
    ``lab_provisioning``). The one builder behind estimate, recommend and size."""
    from ..core.facts.compute import accelerator_kind, accelerators_of, compute_rate
    prices = prices or price_table(getattr(args, "prices", None))
    if is_checkpoint_question(args):
        return checkpoint_premise_of(args, lab, prices)
    for flag in ("checkpoint_every", "keep", "save_under"):
        if getattr(args, flag, None) is not None:
            raise ConfigError(f"--{flag.replace('_', '-')}", "goes with a checkpointing --workload (llama3_8b.yaml, ...)")
    if getattr(args, "mlperf_datasize", False) and getattr(args, "workload", None) is None:
        raise ConfigError("--mlperf-datasize", "goes with --workload (MLPerf Storage sizes a workload's dataset)")
    defaults: set[str] = set()
    instance, count = _cluster(args, prices, defaults)
    accelerators = getattr(args, "accelerators", None) or accelerators_of(instance)
    shape, origin = shape_of(args)
    workload = workload_of(args)
    notes: list[str] = []
    readers, au_target = None, 90.0
    if workload is not None:
        workload, said = workload.on_accelerator(accelerator_kind(instance))
        notes += [said] if said else []
        from ..core.facts.instances import INSTANCES
        if instance in INSTANCES:   # the file count against MLPerf Storage's for this cluster, said (or refused)
            memory = INSTANCES[instance].memory_gib
            if getattr(args, "mlperf_datasize", False):   # MLPerf's own question: its datasize step's file count
                need = workload.mlperf_files(count, memory, accelerators * count)
                if need > workload.num_files:
                    from dataclasses import replace as _replace
                    workload = _replace(workload, num_files=need)
                    shape, origin = workload.shape(), (f"{origin}, sized as MLPerf Storage's datasize step sizes it for "
                                                       f"this cluster (--mlperf-datasize)")
            said = workload.mlperf_size(count, memory, accelerators * count)
            notes += [said] if said else []
        rate, compute = workload.rate, (f"{workload.name} as DLIO emulates it: batch {workload.batch_size} every "
                                        f"{workload.computation_time:g} s = {workload.rate:,.1f} samples/s per accelerator")
        readers, au_target = workload.readers(accelerators), workload.au_percent
        epochs = args.epochs or workload.epochs   # the workload's epochs, unless --epochs says otherwise
    else:
        rate, compute = compute_rate(args.compute_preset, args.compute_rate, instance_type=instance)
        epochs = args.epochs
        if epochs is None:
            epochs, _ = DEFAULT_EPOCHS, defaults.add("epochs")
    lab = lab if lab is not None else lab_provisioning(args)
    return Premise(instance_type=instance, instance_count=count, accelerators=accelerators, epochs=epochs, rate=rate,
                   compute=compute, shape=shape, shape_origin=origin, lab=lab,
                   volume_size_gb=getattr(args, "volume_size_gb", None), readers=readers,
                   s3_concurrency=getattr(args, "s3_concurrency", None), au_target=au_target,
                   defaults=frozenset(defaults), notes=tuple(notes), calibration=calibration_of(args))


def question_of(args, prices=None):
    """The question the flags ask (core/answer/answer.py Question), read here once: every default named in its
    premise, every source, what --random-access, --data-in-efs and --portable-script rule out."""
    from ..core.answer.answer import Question
    prices = prices or price_table(getattr(args, "prices", None))
    premise = premise_of(args, prices=prices)
    dataset = getattr(args, "dataset", None) if not getattr(args, "experiment", None) else None
    return Question(premise, prices, random_access=bool(getattr(args, "random_access", False)),
                    data_in_efs=bool(getattr(args, "data_in_efs", False)),
                    portable=bool(getattr(args, "portable_script", False)), dataset=dataset,
                    workload=workload_of(args))


def is_checkpoint_question(args) -> bool:
    """Does --workload name a checkpointing workload (core/workloads/checkpoint.py)?"""
    from ..core.workloads.checkpoint import CheckpointWorkload
    return isinstance(workload_of(args), CheckpointWorkload)


def checkpoint_premise_of(args, lab=None, prices=None) -> Premise:
    """The checkpoint question the flags ask: the workload's plan on --instance-count hosts of the instance's GPUs (one
    rank a GPU: a parallelism that does not divide them is refused naming --instance-count), a save every
    --checkpoint-every, --keep kept (FSx and EFS provisioned to save within --save-under where given), priced on
    ``lab``; each default named."""
    from ..core.model.checkpoint_estimate import DEFAULT_EVERY_SECONDS, default_keep
    from ..core.answer.premise import CheckpointPremise
    from ..core.shape import DatasetShape
    from ..core.facts.compute import accelerators_of
    for flag in ("epochs", "random_access", "data_in_efs", "portable_script", "mode", "storage", "mlperf_datasize"):
        if getattr(args, flag, None):
            raise ConfigError(f"--{flag.replace('_', '-')}", "asks about reading a dataset; a checkpointing --workload "
                              "asks where its checkpoints go, on every target: drop it")
    prices = prices or price_table(getattr(args, "prices", None))
    defaults: set[str] = set()
    instance, count = _cluster(args, prices, defaults)
    gpus = getattr(args, "accelerators", None) or accelerators_of(instance)
    plan = workload_of(args).plan(hosts=count, gpus_per_host=gpus,
                                  hosts_field="--accelerators" if getattr(args, "accelerators", None) else "--instance-count")
    every = args.checkpoint_every
    if every is None:
        every, _ = DEFAULT_EVERY_SECONDS, defaults.add("every")
    keep = args.keep
    if keep is None:
        keep, _ = default_keep(plan.workload), defaults.add("keep")
    save_under = getattr(args, "save_under", None)   # none: FSx and EFS for the cheapest day that keeps up
    lab = lab if lab is not None else lab_provisioning(args)
    return Premise(instance_type=instance, instance_count=count, accelerators=gpus, epochs=1, rate=0.0,
                   compute="no compute: checkpoints written and read back", shape=DatasetShape(plan.files, max(1, plan.bytes)),
                   shape_origin=f"the checkpointing workload {plan.workload.source}", lab=lab,
                   volume_size_gb=getattr(args, "volume_size_gb", None), defaults=frozenset(defaults),
                   checkpoint=CheckpointPremise(plan, every, keep, save_under), calibration=calibration_of(args))


def checkpoint_question_of(args, prices=None):
    """The checkpoint question the flags ask (core/answer/checkpoints.py CheckpointQuestion), read here once."""
    from ..core.answer.checkpoints import CheckpointQuestion
    from ..core.model.checkpoint_estimate import Question
    prices = prices or price_table(getattr(args, "prices", None))
    premise = checkpoint_premise_of(args, prices=prices)
    c = premise.checkpoint
    return CheckpointQuestion(premise, Question(c.plan, premise.instance_type, c.every_seconds, c.keep, prices,
                                                premise.lab, premise.volume_size_gb, premise.calibration.model),
                              workload=workload_of(args))


def premise_json(premise: Premise, workload=None) -> dict[str, Any]:
    out = {"premise": premise.to_dict()}
    if workload is not None:
        out["workload"] = workload_json(workload)
    return out


def workload_json(workload) -> dict[str, Any]:
    from ..core.workloads.checkpoint import CheckpointWorkload
    if isinstance(workload, CheckpointWorkload):
        return {"file": workload.source, "sha256": workload.sha256, "model": workload.name, "scale": workload.scale,
                "checkpointing": True, "parameters": workload.num_parameters, "mode": workload.mode,
                "writes": workload.writes, "reads": workload.reads, "used": list(workload.used),
                "ignored": list(workload.ignored)}
    return {"file": workload.source, "sha256": workload.sha256, "model": workload.name, "scale": workload.scale,
            "files": workload.files, "samples": workload.samples, "bytes": workload.bytes,
            "samples_per_second_per_accelerator": round(workload.rate, 3), "epochs": workload.epochs,
            "au_target_percent": workload.au_percent, "accelerator": workload.accelerator,
            "used": list(workload.used), "ignored": list(workload.ignored)}
