"""An experiment document (JSON from the workflow, YAML from the CLI) into an Experiment, validated strictly.

Every key is checked: an unknown key is an error naming its path and the keys that are allowed (with a
did-you-mean), so a typo never silently falls back to a default. ``{}`` is the default experiment."""

from __future__ import annotations

import copy
import json
import re
from typing import Any
from ..workloads.dlio import parse_entry as parse_workload_entry
from ..errors import ConfigError
from ..facts.limits import MAX_ACCELERATORS, MAX_EPOCHS, MAX_RUNTIME_SECONDS, MAX_VOLUME_SIZE_GB, SCRIPT_CONCURRENCY_MAX
from ..modes import (EFS, EXPRESS, FASTFILE, FILE_SYSTEM_MODES, FORMATS, MODES, NPZ, PIPE, S3_READ_MODES,
                    SCRIPT, SOURCES, STORAGES, canonical_mode)
from ..facts.limits import MAX_INSTANCE_COUNT
from ..facts.compute import accelerator_kind, instance_preset
from ..model.volume import volume_for
from ..shape import check_file_bytes, parse_bytes
from ..facts.compute import COMPUTE_PRESETS
from .model import (CheckpointTrial, Compute, DEFAULTS, DEFAULT_DATASETS, DEFAULT_DOCUMENT, DISTRIBUTIONS, Dataset,
                    Experiment, JOB_PREFIX_MAX, MAX_USER_HYPERPARAMETERS, MAX_USER_METRICS, ORDERS, REAL_MODELS,
                    RECORD_WRAPPERS, S3_DATA_TYPES, Script, Trial)


NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")


PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,200}$")


# Keys a trial may override (everything that shapes a job); top-level-only keys are listed apart.
TRIAL_KEYS = {
    "datasets", "modes", "instance_type", "instance_count", "volume_size_gb", "epochs", "compute",
    "max_run_seconds", "hyperparameters", "image_uri", "s3_data_type", "distribution",
    "shuffle_seed", "record_wrapper", "max_samples", "workers", "prefetch", "spot", "script", "storage", "workload",
    "checkpoint",
}


TOP_LEVEL_KEYS = TRIAL_KEYS | {
    "name", "description", "dataset_catalog", "repeats", "order", "seed", "max_concurrency",
    "teardown_fsx", "trials", "job_prefix", "fsx_import_wait_minutes", "calibration",
}


DATASET_KEYS = {"name", "format", "prefix", "source", "files", "bytes", "generate"}


GENERATE_KEYS = {"images", "classes", "seed", "copies", "shard_size_mb", "mean_kb"}
# A dataset shaped like a DLIO workload (core/workloads/dlio.py Workload.recipe): files of samples of random bytes.
DLIO_GENERATE_KEYS = {"files", "samples_per_file", "record_bytes", "record_bytes_stdev", "seed"}


TRIAL_ONLY_KEYS = {"name"}


# A checkpoint trial's own settings (beside a checkpointing workload): where it writes, and the workload's
# num_checkpoints_write, num_checkpoints_read and time_between_checkpoints as the trial runs them.
CHECKPOINT_KEYS = {"targets", "writes", "reads", "seconds_between", "restore"}
# What a checkpoint trial's jobs set themselves (requests.checkpoint_hyperparameters): not the experiment's to give.
CHECKPOINT_HYPERPARAMETERS = ("checkpoint_plan", "checkpoint_channel", "checkpoint_dir", "checkpoint_cleanup")


MAX_REPEATS = 100   # an experiment's repeats (and the CLI's --repeats): 1..MAX_REPEATS


# The user's own training code instead of the lab's (see Script).
SCRIPT_KEYS = {"source_dir", "entry_point", "metric_definitions", "packages_in_image", "code_uri"}


ENTRY_POINT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,254}\.(py|sh)$")


CODE_URI_RE = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/\S+\.tar\.gz$")


INSTANCE_TYPE_RE = re.compile(r"^ml\.[a-z0-9]+\.[a-z0-9]+$")


def _check_keys(obj: Any, allowed: set[str], path: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ConfigError(path or "experiment", f"must be a mapping, got {type(obj).__name__}")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        key = unknown[0]
        hint = _closest(key, allowed)
        problem = f"unknown key '{key}'" + (f" (did you mean '{hint}'?)" if hint else "")
        raise ConfigError(f"{path}.{key}" if path else key, problem, sorted(allowed))
    return obj


def _closest(word: str, candidates: set[str]) -> str | None:
    import difflib
    match = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return match[0] if match else None


def _int(value: Any, path: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(path, f"must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        rng = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise ConfigError(path, f"{value} is out of range", rng)
    return value


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(path, f"must be true or false, got {value!r}")
    return value


def _choice(value: Any, path: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(path, f"{value!r} is not allowed", allowed)
    return value


def _instance_accelerators(instance_type: str) -> int:
    """Accelerators the trial emulates per instance: the instance table's count, at least one."""
    from ..facts.instances import INSTANCES
    row = INSTANCES.get(instance_type)
    return max(1, row.accelerators) if row is not None else 1


def _instance_preset(instance_type: str, path: str) -> str:
    """The compute an experiment emulates when it names none: the instance's accelerator's preset, by the rule every
    command shares (premise.instance_preset): an instance with no accelerator (m5, c5) or one no preset knows is
    refused, asking for a compute and saying how to measure one: a V100 put in its place would be priced and reported
    as that instance's."""
    from ..facts.instances import INSTANCES
    if instance_type not in INSTANCES:
        # Not in the instance table: a typo, or a type the lab neither describes nor prices; both are refused once
        # parsed, naming instance_type (did you mean, or no price), which says more than a missing compute would.
        return "v100"
    return instance_preset(instance_type, f"{path}compute", experiment=True)


def _parse_compute(value: Any, path: str) -> Compute:
    if isinstance(value, str):
        value = {"preset": value} if value in COMPUTE_PRESETS else {"model": value}
    if not isinstance(value, dict):
        raise ConfigError(path, "must be a preset name or a mapping",
                          [*COMPUTE_PRESETS, *REAL_MODELS, "{batch_size, seconds_per_batch}"])
    _check_keys(value, {"preset", "model", "batch_size", "seconds_per_batch", "accelerators"}, path)
    preset, model = value.get("preset"), value.get("model")
    accelerators = None if value.get("accelerators") is None else _int(value["accelerators"], f"{path}.accelerators", 1, MAX_ACCELERATORS)
    if accelerators is not None and model is not None:
        raise ConfigError(f"{path}.accelerators", "is for emulated compute; a real model uses the GPUs the instance has")
    if preset is not None and model is not None:
        raise ConfigError(path, "give either 'preset' (emulated compute) or 'model' (real training), not both")
    if preset is not None:
        preset = _choice(preset, f"{path}.preset", tuple(COMPUTE_PRESETS))
        base = COMPUTE_PRESETS[preset]
        batch = _int(value.get("batch_size", base["batch_size"]), f"{path}.batch_size", 1, 4096)
        seconds = value.get("seconds_per_batch", base["seconds_per_batch"])
    elif model is not None:
        model = _choice(model, f"{path}.model", REAL_MODELS)
        batch = _int(value.get("batch_size", 64), f"{path}.batch_size", 1, 4096)
        if "seconds_per_batch" in value:
            raise ConfigError(f"{path}.seconds_per_batch", "is for emulated compute; a real model takes the time it takes")
        return Compute(batch_size=batch, seconds_per_batch=None, model=model)
    else:
        if "seconds_per_batch" not in value:
            raise ConfigError(path, "needs 'preset', 'model', or 'seconds_per_batch' with 'batch_size'",
                              [*COMPUTE_PRESETS, *REAL_MODELS])
        batch = _int(value.get("batch_size", 64), f"{path}.batch_size", 1, 4096)
        seconds = value["seconds_per_batch"]
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds <= 600:
        raise ConfigError(f"{path}.seconds_per_batch", f"must be a number of seconds, got {seconds!r}", "0..600")
    return Compute(batch_size=batch, seconds_per_batch=float(seconds), preset=preset, accelerators=accelerators)


def _parse_script(value: Any, path: str) -> Script | None:
    if value is None:
        return None
    _check_keys(value, SCRIPT_KEYS, path)
    source_dir, code_uri = value.get("source_dir"), value.get("code_uri")
    if source_dir is None and code_uri is None:
        raise ConfigError(path, "names no code: give source_dir (a local folder the CLI packages and uploads)",
                          ["source_dir", "code_uri"])
    if source_dir is not None and (not isinstance(source_dir, str) or not source_dir.strip()):
        raise ConfigError(f"{path}.source_dir", f"{source_dir!r} is not a folder path")
    if code_uri is not None and (not isinstance(code_uri, str) or not CODE_URI_RE.match(code_uri)):
        raise ConfigError(f"{path}.code_uri", f"{code_uri!r} is not the S3 URI of a .tar.gz",
                          "s3://<bucket>/<key>.tar.gz (leave it out: the CLI uploads source_dir and fills it in)")
    entry_point = value.get("entry_point", "train.py")
    if not isinstance(entry_point, str) or not ENTRY_POINT_RE.match(entry_point) or ".." in entry_point.split("/"):
        raise ConfigError(f"{path}.entry_point", f"{entry_point!r} is not a script inside source_dir",
                          "a relative path to a .py (or .sh) file, e.g. train.py")
    definitions = value.get("metric_definitions") or []
    if not isinstance(definitions, list):
        raise ConfigError(f"{path}.metric_definitions", "must be a list of {Name, Regex}")
    if len(definitions) > MAX_USER_METRICS:
        raise ConfigError(f"{path}.metric_definitions", f"has {len(definitions)} entries; SageMaker takes 40 metric "
                          f"definitions per job and the lab's own metric lines use 8, so at most {MAX_USER_METRICS}")
    parsed: list[tuple[str, str]] = []
    for i, entry in enumerate(definitions):
        where = f"{path}.metric_definitions[{i}]"
        _check_keys(entry, {"Name", "Regex"}, where)
        name, regex = entry.get("Name"), entry.get("Regex")
        if not isinstance(name, str) or not re.match(r"^.{1,255}$", name):
            raise ConfigError(f"{where}.Name", f"{name!r} is not a metric name (1-255 characters)")
        if not isinstance(regex, str) or not 1 <= len(regex) <= 500:
            raise ConfigError(f"{where}.Regex", "must be a regular expression of 1-500 characters")
        try:
            compiled = re.compile(regex)
        except re.error as err:
            raise ConfigError(f"{where}.Regex", f"{regex!r} is not a regular expression ({err})") from None
        if compiled.groups < 1:
            raise ConfigError(f"{where}.Regex", "has no capturing group: SageMaker records the first group's number",
                              "e.g. 'loss=([0-9.]+)'")
        if name in (n for n, _ in parsed):
            raise ConfigError(f"{where}.Name", f"metric {name!r} is defined twice")
        parsed.append((name, regex))
    return Script(entry_point=entry_point, source_dir=source_dir, code_uri=code_uri, metric_definitions=tuple(parsed),
                  packages_in_image=_bool(value.get("packages_in_image", False), f"{path}.packages_in_image"))


def _parse_dataset(value: Any, path: str, catalog: dict[str, dict[str, Any]]) -> Dataset:
    if isinstance(value, str):
        if value not in catalog:
            raise ConfigError(path, f"unknown dataset '{value}'", sorted(catalog) or "a mapping with name and format")
        value = catalog[value]
    _check_keys(value, DATASET_KEYS, path)
    name = value.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError(f"{path}.name", f"{name!r} is not a valid dataset name",
                          "lower-case letters, digits and '-', 1-40 characters")
    fmt = value.get("format")
    if fmt not in FORMATS:
        raise ConfigError(f"{path}.format", f"{fmt!r} is not a dataset format", FORMATS)
    prefix = value.get("prefix", name)
    if not isinstance(prefix, str) or not PREFIX_RE.match(prefix) or ".." in prefix:
        raise ConfigError(f"{path}.prefix", f"{prefix!r} is not a usable S3 key prefix",
                          "a path under the bucket's datasets/ prefix, e.g. 'caltech-jpg-1x'")
    source = _choice(value.get("source", "s3"), f"{path}.source", SOURCES)
    files = value.get("files")
    if files is not None:
        files = _int(files, f"{path}.files", 1)
    size = value.get("bytes")
    if size is not None:   # 2TB, 54GB, 1.5 GiB or a whole number of bytes, as --bytes takes them
        size = parse_bytes(size, f"{path}.bytes")
        if files is not None:
            check_file_bytes(files, size, f"{path}.bytes", f"{path}.files")
    generate = value.get("generate") or {}
    if isinstance(generate, dict) and "record_bytes" in generate:
        _check_keys(generate, DLIO_GENERATE_KEYS, f"{path}.generate")
        for key in ("files", "samples_per_file", "record_bytes"):
            if key not in generate:
                raise ConfigError(f"{path}.generate.{key}", "missing: a DLIO-shaped recipe gives files, samples_per_file "
                                  "and record_bytes (and record_bytes_stdev, seed)")
            _int(generate[key], f"{path}.generate.{key}", 1)
        for key in ("record_bytes_stdev", "seed"):
            if key in generate:
                _int(generate[key], f"{path}.generate.{key}", 0)
        return Dataset(name=name, format=fmt, prefix=prefix.strip("/"), source=source, files=files,
                       bytes=size, generate=dict(generate))
    if fmt == NPZ and generate:
        raise ConfigError(f"{path}.generate", "an npz dataset is generated from a DLIO workload's shape",
                          "workload: <DLIO file> (or generate: {files, samples_per_file, record_bytes, record_bytes_stdev})")
    _check_keys(generate, GENERATE_KEYS, f"{path}.generate")
    for key in ("images", "classes", "copies", "seed"):
        if key in generate:
            _int(generate[key], f"{path}.generate.{key}", 0 if key == "seed" else 1)
    if "classes" in generate and "images" in generate and generate["classes"] > generate["images"]:
        raise ConfigError(f"{path}.generate.classes", "cannot exceed generate.images")
    return Dataset(name=name, format=fmt, prefix=prefix.strip("/"), source=source, files=files,
                   bytes=size, generate=dict(generate))


def _parse_checkpoint(value: Any, workload: Any, path: str) -> CheckpointTrial:
    """A checkpoint trial's ``checkpoint:`` (every key optional): its targets (default all four), and the workload's
    writes, reads and seconds between checkpoints as the trial runs them (default the file's), and whether the sync
    targets get a restore job (default true)."""
    from dataclasses import replace
    from ..modes import CHECKPOINT_TARGETS
    value = {} if value is None else value
    _check_keys(value, CHECKPOINT_KEYS, path.rstrip("."))
    raw = value.get("targets", list(CHECKPOINT_TARGETS))
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path}targets", "must be a non-empty list of checkpoint targets", CHECKPOINT_TARGETS)
    targets: list[str] = []
    for i, target in enumerate(raw):
        target = str(target).lower()
        if target not in CHECKPOINT_TARGETS:
            hint = _closest(target, set(CHECKPOINT_TARGETS))
            raise ConfigError(f"{path}targets[{i}]", f"{raw[i]!r} is not a checkpoint target"
                              + (f" (did you mean '{hint}'?)" if hint else ""), CHECKPOINT_TARGETS)
        if target in targets:
            raise ConfigError(f"{path}targets[{i}]", f"{target} is listed twice")
        targets.append(target)
    writes = _int(value.get("writes", workload.writes), f"{path}writes", 1, 1000)
    reads = _int(value.get("reads", workload.reads), f"{path}reads", 0, 1000)
    if reads > writes:   # DLIO's own rule (ConfigArguments.validate): a read needs a checkpoint written before it
        raise ConfigError(f"{path}reads", f"{reads} is more than the {writes} checkpoints written", f"at most {writes}")
    seconds = value.get("seconds_between", max(0.0, workload.interval_seconds))
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds <= 86400:
        raise ConfigError(f"{path}seconds_between", f"{seconds!r} is not a number of seconds", "0..86400")
    return CheckpointTrial(replace(workload, writes=writes, reads=reads, interval_seconds=float(seconds)),
                           tuple(targets), _bool(value.get("restore", True), f"{path}restore"))


def _parse_trial(merged: dict[str, Any], path: str, name: str, catalog: dict[str, dict[str, Any]],
                 given: frozenset[str] = frozenset(), own: frozenset[str] = frozenset()) -> Trial:
    """``given``: the keys the document states for this trial (its own or the base's), as against DEFAULTS: a
    workload's dataset, compute, epochs and readers fill in only what the document does not state. ``own``: the keys
    the trial's own entry states (a checkpoint trial refuses those that shape a data job)."""
    modes_raw = merged["modes"]
    if isinstance(modes_raw, str):
        modes_raw = [modes_raw]
    if not isinstance(modes_raw, list) or not modes_raw:
        raise ConfigError(f"{path}modes", "must be a non-empty list", MODES)
    modes: list[str] = []
    for i, raw in enumerate(modes_raw):
        mode = canonical_mode(raw)
        if mode is None:
            raise ConfigError(f"{path}modes[{i}]", f"unknown mode {raw!r}", MODES)
        if mode in modes:
            raise ConfigError(f"{path}modes[{i}]", f"mode {mode} is listed twice")
        modes.append(mode)

    workload = None
    checkpoint = None
    if merged.get("workload") is not None:
        workload = parse_workload_entry(merged["workload"], f"{path}workload", checkpointing=True)
        from ..workloads.checkpoint import CheckpointWorkload
        if isinstance(workload, CheckpointWorkload):
            checkpoint = _parse_checkpoint(merged.get("checkpoint"), workload, f"{path}checkpoint.")
            for key in ("modes", "datasets", "storage", "script", "s3_data_type", "distribution", "record_wrapper"):
                if key in own and not (key == "datasets" and merged.get("datasets") == []):
                    raise ConfigError(f"{path}{key}", f"a checkpoint trial ({workload.source} is a checkpointing "
                                      "workload) writes checkpoints, not a dataset: where it writes is checkpoint.targets",
                                      ["checkpoint: {targets: [s3, express, fsx, efs]}"])
            workload = None
    if checkpoint is None and merged.get("checkpoint") is not None:
        raise ConfigError(f"{path}checkpoint", "goes with a checkpointing workload (workflow: {train: False, checkpoint: "
                          "True}, as MLPerf Storage's llama3 files)", "workload: <a llama3_*.yaml file>, or drop it")
    datasets_raw = merged.get("datasets")
    if checkpoint is not None:
        datasets_raw = []   # a checkpoint trial reads no dataset
    elif datasets_raw is None:
        datasets_raw = [] if workload else [d["name"] for d in DEFAULT_DATASETS]
    if workload is not None and isinstance(datasets_raw, list):
        # The workload's dataset beside the ones listed (first), read by every mode of the trial.
        datasets_raw = [workload.dataset(), *datasets_raw]
    if not isinstance(datasets_raw, list) or (not datasets_raw and checkpoint is None):
        raise ConfigError(f"{path}datasets", "must be a non-empty list of dataset names or mappings", sorted(catalog))
    datasets = tuple(_parse_dataset(d, f"{path}datasets[{i}]", catalog) for i, d in enumerate(datasets_raw))
    names = [d.name for d in datasets]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{path}datasets", f"dataset '{dupes[0]}' is listed twice")

    instance_type = merged["instance_type"]
    if not isinstance(instance_type, str) or not INSTANCE_TYPE_RE.match(instance_type):
        raise ConfigError(f"{path}instance_type", f"{instance_type!r} is not a SageMaker instance type",
                          "ml.<family>.<size>, e.g. ml.p3.2xlarge")
    hyperparameters = merged["hyperparameters"]
    if not isinstance(hyperparameters, dict):
        raise ConfigError(f"{path}hyperparameters", "must be a mapping of names to values")
    # What CreateTrainingJob accepts (HyperParameters: at most 100 entries, keys of 1-256 characters and
    # values of at most 2,500, both matching ".*": no line breaks; SageMaker API reference and botocore's
    # model), less the "sagemaker_" names the framework container keeps for itself. Dashes are fine: the
    # container passes each one as "--learning-rate 0.01", as argparse scripts expect.
    if len(hyperparameters) > MAX_USER_HYPERPARAMETERS:
        raise ConfigError(f"{path}hyperparameters", f"has {len(hyperparameters)} entries; SageMaker takes 100 in all, "
                          f"{100 - MAX_USER_HYPERPARAMETERS} of them the container's (sagemaker_program, ...)",
                          f"at most {MAX_USER_HYPERPARAMETERS}")
    for key, val in hyperparameters.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 256 or "\n" in key or "\r" in key:
            raise ConfigError(f"{path}hyperparameters.{str(key)[:40]}", "is not a valid hyperparameter name",
                              "1 to 256 characters on one line (SageMaker's limit)")
        if key.startswith("sagemaker_"):
            raise ConfigError(f"{path}hyperparameters.{key}", "names starting with sagemaker_ belong to the framework container",
                              "another name")
        if isinstance(val, (dict, list)):
            raise ConfigError(f"{path}hyperparameters.{key}", "must be a scalar (SageMaker passes strings)")
        if len(json.dumps(val)) > 2500 or "\n" in json.dumps(val):
            raise ConfigError(f"{path}hyperparameters.{key}", "is longer than SageMaker's 2,500 characters for a value",
                              "a shorter value (or a file in the dataset or the code)")
    if merged["script"] is None and "s3_concurrency" in hyperparameters:
        # The lab's script keeps this many GETs in flight in Script mode, and every estimate prices it so: a value it
        # would refuse at run time (train.py) is refused here, before anything is created.
        _int(hyperparameters["s3_concurrency"], f"{path}hyperparameters.s3_concurrency", 1, SCRIPT_CONCURRENCY_MAX)
    image_uri = merged["image_uri"]
    if image_uri is not None and (not isinstance(image_uri, str) or len(image_uri) > 255 or " " in image_uri):
        raise ConfigError(f"{path}image_uri", f"{image_uri!r} is not an image URI", "<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>")
    shuffle_seed = merged["shuffle_seed"]
    if shuffle_seed is not None:
        _int(shuffle_seed, f"{path}shuffle_seed", 0, 2**63 - 1)
    epochs, workers = merged["epochs"], merged["workers"]
    if merged["compute"] is not None:
        compute_doc = merged["compute"]
    elif workload is not None or merged["script"] is not None or checkpoint is not None:
        # A workload states its compute (below); a user's script computes what it computes: the lab's emulation
        # does not run, and V100's rate only stands in for it in estimates.
        compute_doc = "v100"
    else:
        compute_doc = _instance_preset(instance_type, path)
    if workload is not None:
        # As DLIO emulates it: each accelerator takes batch_size samples every computation_time seconds, for the
        # workload's epochs, with read_threads readers per accelerator; what the experiment states wins.
        if "compute" not in given:
            # On the instance's accelerator: MLPerf's own timing of it where a published file gives one (the
            # premise names the swap, answers.premise_of_trial); the file's as given otherwise.
            timed, _ = workload.on_accelerator(accelerator_kind(instance_type))
            compute_doc = {"batch_size": timed.batch_size, "seconds_per_batch": timed.computation_time}
        if "epochs" not in given:
            epochs = workload.epochs
        if "workers" not in given:
            accelerators = (compute_doc.get("accelerators") if isinstance(compute_doc, dict) else None) \
                or _instance_accelerators(instance_type)
            workers = min(256, workload.readers(accelerators))

    if checkpoint is not None:
        from ..modes import CHECKPOINT_TARGET_MODES
        datasets = ()
        modes = list(dict.fromkeys(CHECKPOINT_TARGET_MODES[t] for t in checkpoint.targets))
        for key in CHECKPOINT_HYPERPARAMETERS:
            if key in hyperparameters:
                raise ConfigError(f"{path}hyperparameters.{key}", "is the lab's to set in a checkpoint trial: it plans "
                                  "the checkpoints and names where they go", "drop it")
    elif any(key in hyperparameters for key in ("checkpoint_channel", "checkpoint_dir")):
        key = next(key for key in ("checkpoint_channel", "checkpoint_dir") if key in hyperparameters)
        raise ConfigError(f"{path}hyperparameters.{key}", "names where a checkpoint trial's checkpoints go, and this "
                          "trial is not one: its channels are read-only (FileSystemAccessMode ro), which a checkpoint "
                          "cannot be written to", "a trial with a checkpointing workload (workload: llama3_8b.yaml), "
                          "whose FSx and EFS targets get a read-write channel")
    trial = Trial(
        name=name,
        datasets=datasets,
        modes=tuple(modes),
        instance_type=instance_type,
        instance_count=_int(merged["instance_count"], f"{path}instance_count", 1, MAX_INSTANCE_COUNT),
        # None: sized for the data (premise.volume_for: the default, raised to what File mode's share needs).
        volume_size_gb=(None if merged["volume_size_gb"] is None else
                        _int(merged["volume_size_gb"], f"{path}volume_size_gb", 1, MAX_VOLUME_SIZE_GB)),
        epochs=_int(epochs, f"{path}epochs", 1, MAX_EPOCHS),
        compute=_parse_compute(compute_doc, f"{path}compute"),
        max_run_seconds=_int(merged["max_run_seconds"], f"{path}max_run_seconds", 60, MAX_RUNTIME_SECONDS),
        hyperparameters=dict(hyperparameters),
        image_uri=image_uri,
        s3_data_type=_choice(merged["s3_data_type"], f"{path}s3_data_type", S3_DATA_TYPES),
        distribution=_choice(merged["distribution"], f"{path}distribution", DISTRIBUTIONS),
        shuffle_seed=shuffle_seed,
        record_wrapper=_choice(merged["record_wrapper"], f"{path}record_wrapper", RECORD_WRAPPERS),
        max_samples=_int(merged["max_samples"], f"{path}max_samples", 0),
        workers=_int(workers, f"{path}workers", 0, 256),
        prefetch=_int(merged["prefetch"], f"{path}prefetch", 0, 4096),
        spot=_bool(merged["spot"], f"{path}spot"),
        script=_parse_script(merged["script"], f"{path}script"),
        storage=_choice(merged["storage"], f"{path}storage", STORAGES),
        workload=workload,
        given=given,
        checkpoint=checkpoint,
    )
    if checkpoint is not None:
        _check_checkpoint_storage(trial, path)
    return trial


def _check_checkpoint_storage(trial: Trial, path: str) -> None:
    """The checkpoint trial's cluster splits the model into whole ranks (its plan, refused naming instance_count), and
    each instance's volume holds what SageMaker's sync keeps on it: the writer's own files of every checkpoint written
    (DLIO keeps each in its own folder), and at a restore every host's (SageMaker copies the whole S3 URI onto each
    instance). A volume asked too small, or NVMe instance storage too small, is refused before anything runs."""
    from ..modes import SYNC_TARGETS
    plan = trial.checkpoint.plan(trial, f"{path}instance_count")
    if not any(t in SYNC_TARGETS for t in trial.checkpoint.targets):
        return
    writes = trial.checkpoint.workload.writes
    needed = max(plan.host_bytes(h) for h in range(plan.hosts)) * writes
    if trial.checkpoint.restore and trial.checkpoint.workload.reads:
        needed = max(needed, plan.bytes * writes)
    volume = volume_for(trial.instance_type, trial.volume_size_gb, needed)
    if not volume.fits:
        where = f"{path}volume_size_gb" if not volume.nvme else f"{path}workload.scale"
        raise ConfigError(where, f"SageMaker's checkpoint sync keeps {volume.needed_gb:,} GB of {trial.checkpoint.workload.name}'s "
                          f"checkpoints on each instance ({writes} written, at scale {plan.scale:g}"
                          + (", every host's at a restore" if plan.hosts > 1 else "") + f"), more than its "
                          f"{volume.describe()}", "a larger volume_size_gb, fewer checkpoint.writes, or a smaller scale"
                          if not volume.nvme else "a smaller scale or fewer checkpoint.writes")


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, val in override.items():
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], val)
        else:
            out[key] = copy.deepcopy(val)
    return out


def parse_experiment(document: Any, source: str | None = None) -> Experiment:
    """Validate an experiment document and return it normalised. Raises ConfigError naming the key."""
    try:
        return _parse_experiment(document if document not in (None, {}) else DEFAULT_DOCUMENT)
    except ConfigError as err:
        raise err.with_source(source) if source else err


def _parse_experiment(document: Any) -> Experiment:
    doc = _check_keys(document, TOP_LEVEL_KEYS, "")
    merged = _deep_merge(DEFAULTS, {k: v for k, v in doc.items() if k != "trials"})

    catalog = {d["name"]: d for d in DEFAULT_DATASETS}
    extra_catalog = merged.get("dataset_catalog") or []
    if not isinstance(extra_catalog, list):
        raise ConfigError("dataset_catalog", "must be a list of dataset mappings")
    for i, entry in enumerate(extra_catalog):
        ds = _parse_dataset(entry, f"dataset_catalog[{i}]", catalog)
        catalog[ds.name] = {**entry, "prefix": ds.prefix}

    name = merged["name"]
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError("name", f"{name!r} is not a valid experiment name",
                          "lower-case letters, digits and '-', 1-40 characters")
    job_prefix = merged["job_prefix"]
    if not isinstance(job_prefix, str) or not re.match(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$", job_prefix):
        raise ConfigError("job_prefix", f"{job_prefix!r} is not allowed in a training-job name",
                          "letters, digits and single '-', starting with a letter or digit")
    if len(job_prefix) > JOB_PREFIX_MAX:
        raise ConfigError("job_prefix", f"is {len(job_prefix)} characters; job names are limited to 63, "
                          f"so the prefix may have at most {JOB_PREFIX_MAX}")

    base = {k: merged[k] for k in TRIAL_KEYS if k in merged}
    trials_raw = doc.get("trials") or [{}]
    if not isinstance(trials_raw, list):
        raise ConfigError("trials", "must be a list of overrides of the base trial")
    trials = []
    for i, override in enumerate(trials_raw):
        path = f"trials[{i}]." if "trials" in doc else ""
        _check_keys(override, TRIAL_KEYS | TRIAL_ONLY_KEYS, f"trials[{i}]")
        trial_name = override.get("name", f"trial{i}" if len(trials_raw) > 1 else "base")
        if not isinstance(trial_name, str) or not NAME_RE.match(trial_name):
            raise ConfigError(f"trials[{i}].name", f"{trial_name!r} is not a valid trial name",
                              "lower-case letters, digits and '-'")
        trial_doc = _deep_merge(base, {k: v for k, v in override.items() if k != "name"})
        if "workload" in override:   # a trial's workload replaces the base's (never merged into it)
            trial_doc["workload"] = copy.deepcopy(override["workload"])
        given = frozenset(k for k in (*doc, *override) if k != "trials")
        own = frozenset(k for k in override if k != "name")
        counts = trial_doc.get("instance_count")
        if isinstance(counts, list):
            # A sweep: one trial per cluster size, named "<trial>-n<count>" (the report draws them against N).
            if not counts or len(set(map(str, counts))) != len(counts):
                raise ConfigError(f"{path}instance_count", f"{counts!r}: a sweep lists distinct instance counts",
                                  "e.g. [1, 2, 4]")
            for count in counts:
                trials.append(_parse_trial({**trial_doc, "instance_count": count}, path, f"{trial_name}-n{count}", catalog,
                                           given, own))
            continue
        trials.append(_parse_trial(trial_doc, path, trial_name, catalog, given, own))
    if len({t.name for t in trials}) != len(trials):
        raise ConfigError("trials", "trial names must be unique")

    experiment = Experiment(
        name=name,
        description=str(merged.get("description") or ""),
        trials=tuple(trials),
        repeats=_int(merged["repeats"], "repeats", 1, MAX_REPEATS),
        order=_choice(merged["order"], "order", ORDERS),
        seed=_int(merged["seed"], "seed", 0, 2**63 - 1),
        max_concurrency=_int(merged["max_concurrency"], "max_concurrency", 1, 40),
        teardown_fsx=_bool(merged["teardown_fsx"], "teardown_fsx"),
        job_prefix=job_prefix,
        fsx_import_wait_minutes=_int(merged["fsx_import_wait_minutes"], "fsx_import_wait_minutes", 0, 24 * 60),
        document={},
        calibration=_calibration(merged.get("calibration")),
    )
    normalised = normalise(experiment)
    check_combinations(experiment)
    return Experiment(**{**experiment.__dict__, "document": normalised})


def _calibration(value: Any):
    """The ``calibration:`` key: the calibration file's content, as the experiment file's reader puts it there (with
    its path as "source"); nothing: the shipped calibration."""
    from ..model.calibration import SHIPPED, in_use_from_document
    if value is None:
        return SHIPPED
    if isinstance(value, str):
        raise ConfigError("calibration", f"{value!r}: a calibration file's path is read with the experiment file "
                          "(`dslab plan|run|recommend|export --experiment FILE`), relative to it")
    if not isinstance(value, dict):
        raise ConfigError("calibration", f"{value!r} is not a calibration file: give the path of one `dslab calibrate` "
                          "wrote")
    return in_use_from_document({k: v for k, v in value.items() if k != "source"},
                                str(value.get("source") or "the experiment's calibration"), "calibration")


def normalise(experiment: Experiment) -> dict[str, Any]:
    """The experiment as run: every default filled in, so the record alone reproduces the run (a calibration file
    it names is kept whole, with its path)."""
    calibration = experiment.calibration
    kept = ({"calibration": {**calibration.document, "source": calibration.source}}
            if calibration.source and calibration.document is not None else {})
    return {**kept, **{
        "name": experiment.name,
        "description": experiment.description,
        "repeats": experiment.repeats,
        "order": experiment.order,
        "seed": experiment.seed,
        "max_concurrency": experiment.max_concurrency,
        "teardown_fsx": experiment.teardown_fsx,
        "fsx_import_wait_minutes": experiment.fsx_import_wait_minutes,
        "job_prefix": experiment.job_prefix,
        "trials": [_normal_trial(t) for t in experiment.trials],
    }}


def _normal_trial(t: Trial) -> dict[str, Any]:
    """One trial as run; a checkpoint trial without the data-job keys it refuses (its jobs are its targets)."""
    out = {
        "name": t.name,
        # A workload's dataset is its to make (its entry below): listed, it would be added twice.
        "datasets": [d.to_dict() for d in t.datasets
                     if t.workload is None or d.name != t.workload.dataset_name],
        "modes": list(t.modes),
        "instance_type": t.instance_type,
        "instance_count": t.instance_count,
        "volume_size_gb": t.volume_size_gb,
        "epochs": t.epochs,
        "compute": t.compute.to_dict(),
        "max_run_seconds": t.max_run_seconds,
        "hyperparameters": t.hyperparameters,
        "image_uri": t.image_uri,
        "s3_data_type": t.s3_data_type,
        "distribution": t.distribution,
        "shuffle_seed": t.shuffle_seed,
        "record_wrapper": t.record_wrapper,
        "max_samples": t.max_samples,
        "workers": t.workers,
        "prefetch": t.prefetch,
        "spot": t.spot,
        "script": None if t.script is None else t.script.to_dict(),
        "storage": t.storage,
        **({"workload": t.workload.entry()} if t.workload is not None else {}),
    }
    if t.checkpoint is not None:
        for key in ("modes", "storage", "script", "s3_data_type", "distribution", "record_wrapper"):
            out.pop(key)   # what shapes a data job; its datasets stay, none
        out["workload"] = t.checkpoint.workload.entry()
        out["checkpoint"] = t.checkpoint.to_dict()
    return out


def check_combinations(experiment: Experiment) -> None:
    """Refuse the combinations SageMaker (or physics) would refuse, before any job is created."""
    multi = len(experiment.trials) > 1
    for ti, trial in enumerate(experiment.trials):
        base = f"trials[{ti}]." if multi else ""
        for mode in trial.modes:
            if mode == FASTFILE and trial.s3_data_type != "S3Prefix":
                raise ConfigError(f"{base}s3_data_type",
                                  f"FastFile reads only an S3Prefix, not a {trial.s3_data_type}; "
                                  "set s3_data_type: S3Prefix or drop FastFile from modes", ["S3Prefix"])
            if mode in FILE_SYSTEM_MODES and trial.distribution == "ShardedByS3Key":
                raise ConfigError(f"{base}distribution",
                                  f"{mode} is a mounted file system: every instance sees all files, "
                                  "ShardedByS3Key applies to S3 channels only; shard inside the script instead",
                                  ["auto", "FullyReplicated"])
            if trial.storage == EXPRESS and mode not in S3_READ_MODES:
                raise ConfigError(f"{base}storage",
                                  f"storage: express is where the S3 modes read; {mode} reads its own file system. "
                                  "Put the Express modes in a trial of their own (see experiments/local.yaml)",
                                  list(S3_READ_MODES))
            if mode == SCRIPT and trial.s3_data_type != "S3Prefix":
                raise ConfigError(f"{base}s3_data_type",
                                  f"Script mode has no input channel: the script lists and reads the dataset's prefix "
                                  f"itself, so a {trial.s3_data_type} means nothing to it; set s3_data_type: S3Prefix "
                                  "or put Script in a trial of its own", ["S3Prefix"])
            if mode == SCRIPT and "dataset_uri" in trial.hyperparameters:
                raise ConfigError(f"{base}hyperparameters.dataset_uri",
                                  "is the lab's to set in Script mode: the job gets the URI of the dataset it reads",
                                  "drop it, and name the dataset under datasets")
            if mode == SCRIPT and trial.distribution == "ShardedByS3Key":
                raise ConfigError(f"{base}distribution",
                                  "Script mode has no input channel, so SageMaker shards nothing: each instance reads "
                                  "its share itself (SM_HOSTS/SM_CURRENT_HOST, as the lab's script does); "
                                  "use FullyReplicated or put Script in a trial of its own", ["auto", "FullyReplicated"])
            if trial.storage == EXPRESS and trial.s3_data_type != "S3Prefix":
                raise ConfigError(f"{base}s3_data_type",
                                  "the workflow stages dataset prefixes into the directory bucket, not manifests; "
                                  "use S3Prefix with storage: express", ["S3Prefix"])
            if mode != PIPE and trial.record_wrapper == "RecordIO":
                raise ConfigError(f"{base}record_wrapper",
                                  f"RecordIO wrapping exists only for Pipe mode, not {mode}", ["auto", "None"])
            for di, ds in enumerate(trial.datasets):
                if ds.source == "efs" and mode != EFS:
                    raise ConfigError(f"{base}datasets[{di}].source",
                                      f"dataset '{ds.name}' lives in EFS, so mode {mode} cannot read it "
                                      f"({'Pipe streams from S3 only' if mode == PIPE else mode + ' reads from S3'}); "
                                      "use mode EFS or copy the data to S3 and set source: s3", ["s3"])


def default_experiment() -> Experiment:
    return parse_experiment({})
