"""Input files: experiment files (YAML), loaded strictly, and JSON documents; every error names the
option, the file and, for experiments, the key path."""

from __future__ import annotations

import json

from pathlib import Path
from typing import Any

import yaml

from ..core.errors import ConfigError
from ..core.experiment import Experiment, parse_experiment


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice (PyYAML would silently keep the last one)."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ConfigError(str(key), f"is given twice (line {key_node.start_mark.line + 1}); keep one")
        seen[key] = loader.construct_object(value_node, deep=deep)
    return seen


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def read_document(path: Path, field: str = "--experiment") -> Any:
    """A YAML (or JSON) file read strictly (a key twice is refused); ``field``: the option that named it."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(field, f"cannot read {path}: {err.strerror}") from None
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as err:
        raise err.with_source(str(path)) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(field, f"{path} is not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    return document   # None: the file is empty or holds only comments


def read_workload(path: Path, field: str = "--workload"):
    """A DLIO workload file (core/workloads/dlio.py), read as published: (its document, its sha256)."""
    import hashlib
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(field, f"cannot read {path}: {err.strerror}") from None
    try:
        document = yaml.load(data.decode("utf-8", errors="replace"), Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass
    except ConfigError as err:
        raise ConfigError(field, f"{path}: {err.field} {err.problem}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(field, f"{path} is not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    return document, hashlib.sha256(data).hexdigest()


def workload_entry(value, base: Path, field: str) -> dict[str, Any]:
    """An experiment's ``workload:`` (a file name, or {file, scale}) with the file read in: what the core parses
    and the workflow receives (it reads no files). Relative names are taken from ``base``."""
    if isinstance(value, (str, Path)):
        value = {"file": str(value)}
    if not isinstance(value, dict) or "dlio" in value or not isinstance(value.get("file"), str):
        return value   # inline, or not a file: the core parser says what is wrong
    path = Path(value["file"]).expanduser()
    document, digest = read_workload(path if path.is_absolute() else base / path, f"{field}.file" if field != "--workload" else field)
    return {**value, "dlio": document, "sha256": digest}


def _with_workloads(document: Any, base: Path, workload: Path | None, scale: float | None) -> Any:
    """The experiment document with every workload file read in; ``workload``/``scale`` are the CLI's --workload
    and --scale, which add one workload to the experiment (or make the experiment, without --experiment)."""
    if scale is not None and workload is None:
        raise ConfigError("--scale", "goes with --workload (the fraction of its files to generate and read)")
    if not isinstance(document, dict):
        return document
    document = dict(document)
    trials = document.get("trials") if isinstance(document.get("trials"), list) else []
    if workload is not None:
        if document.get("workload") is not None or any(isinstance(t, dict) and t.get("workload") for t in trials):
            raise ConfigError("--workload", "the experiment names its own workload: give it in one place")
        from ..core.workloads.checkpoint import is_checkpointing
        from ..core.workloads.dlio import check_scale
        entry = {"file": str(workload)}
        if scale is not None:
            entry["scale"] = check_scale(scale)
        entry = workload_entry(entry, Path.cwd(), "--workload")
        if is_checkpointing(entry.get("dlio")) and (trials or document.get("datasets") or document.get("modes")):
            # A checkpointing workload beside an experiment's data trials: a trial of its own (its jobs are its
            # checkpoint targets), the others left as they are.
            from ..core.workloads.checkpoint import parse_checkpoint_workload
            try:
                slug = parse_checkpoint_workload(entry["dlio"], str(workload)).slug
            except ConfigError as err:
                raise err.with_source(str(workload)) from None
            document["trials"] = [*(trials or [{"name": "base"}]), {"name": f"{slug}-checkpoints", "workload": entry}]
            trials = []
        else:
            document["workload"] = entry
    elif document.get("workload") is not None:
        document["workload"] = workload_entry(document["workload"], base, "workload")
    if trials:
        document["trials"] = [{**t, "workload": workload_entry(t["workload"], base, f"trials[{i}].workload")}
                              if isinstance(t, dict) and t.get("workload") is not None else t
                              for i, t in enumerate(trials)]
    return document


def workload_experiment(workload: Path, scale: float | None) -> dict[str, Any]:
    """The experiment `--workload F` runs without --experiment: the workload's dataset, compute and epochs on the
    default experiment's instance and sources, with a File-mode volume that holds the dataset."""
    import math
    import re
    from ..core.workloads.dlio import check_scale, parse_workload
    from ..core.facts.limits import MAX_VOLUME_SIZE_GB
    document, _ = read_workload(workload)
    from ..core.workloads.checkpoint import is_checkpointing, parse_checkpoint_workload
    if is_checkpointing(document):   # a checkpoint trial on every target (its volume sized for what it keeps)
        try:
            checkpointing = parse_checkpoint_workload(document, str(workload))
        except ConfigError as err:
            raise err.with_source(str(workload)) from None
        return {"name": f"{checkpointing.slug}-checkpoints", "description": checkpointing.describe()}
    try:
        parsed = parse_workload(document, str(workload))
    except ConfigError as err:
        raise err.with_source(str(workload)) from None
    if scale is not None:
        parsed = parsed.with_scale(check_scale(scale))
    volume = min(MAX_VOLUME_SIZE_GB, max(100, math.ceil(parsed.bytes * 1.05 / 1e9) + 1))
    name = (re.sub(r"[^a-z0-9]+", "-", parsed.name.lower()).strip("-")[:30].strip("-") or "dlio") + "-dlio"
    return {"name": name, "description": parsed.describe(), "volume_size_gb": volume}


def with_overrides(document: Any, overrides: dict[str, Any] | None) -> Any:
    """The document with the CLI's --instance, --instance-count and --epochs (``overrides``, experiment keys) set on
    the experiment and taken out of every trial, so that they hold for every job, as --repeats does."""
    if not overrides or not isinstance(document, dict):
        return document
    out = {**document, **overrides}
    if isinstance(out.get("trials"), list):
        out["trials"] = [{k: v for k, v in t.items() if k not in overrides} if isinstance(t, dict) else t
                         for t in out["trials"]]
    return out


def _runs_a_workload(document: Any) -> bool:
    trials = document.get("trials") if isinstance(document, dict) else None
    return isinstance(document, dict) and (document.get("workload") is not None or any(
        isinstance(t, dict) and t.get("workload") is not None for t in (trials if isinstance(trials, list) else [])))


def _with_calibration(document: Any, base: Path) -> Any:
    """The calibration file the document's ``calibration:`` key names (relative to the experiment file), read into
    it whole with its path as "source": the experiment as run carries it, so its Plan on AWS reads no other file."""
    if not (isinstance(document, dict) and isinstance(document.get("calibration"), str)):
        return document
    given = document["calibration"]
    found = Path(given) if Path(given).is_absolute() else base / given
    content = read_json_file(found, "calibration")
    return {**document, "calibration": {**content, "source": given} if isinstance(content, dict) else content}


def load_experiment(path: Path | None, prices=None, priced: bool = True, repeats: int | None = None,
                    workload: Path | None = None, scale: float | None = None,
                    overrides: dict[str, Any] | None = None,
                    workload_defaults: dict[str, Any] | None = None) -> Experiment:
    """An experiment file, parsed, with every trial's instance type checked against botocore's
    SageMaker model and (``priced``) against the price table its results are costed with (``prices``,
    default the lab's): a typo or an unpriced type is refused here, before any command builds, uploads
    or runs anything. An empty file is refused too: it would silently run the default experiment.
    ``repeats`` (the CLI's --repeats) replaces the file's repeats: the experiment as run records it.
    ``workload`` (--workload, with ``scale``) adds a DLIO workload to the experiment, or without ``path``
    is the experiment (workload_experiment); workload files the experiment names are read here. ``overrides``:
    the CLI's --instance, --instance-count and --epochs as experiment keys (with_overrides); ``workload_defaults``:
    keys set where the document runs a DLIO workload and does not state them (the local lab's one job at a time)."""
    if path is None and workload is None:
        raise ConfigError("--experiment", "give an experiment file or --workload")
    if path is None:
        document = workload_experiment(workload, scale)
        path = workload
    else:
        document = read_document(path)
        if document is None and workload is not None:
            document = {}
    document = _with_workloads(document, path.resolve().parent, workload, scale)
    if repeats is not None and isinstance(document, dict):
        document = {**document, "repeats": repeats}
    if workload_defaults and _runs_a_workload(document):   # the caller's defaults for what the document leaves out
        document = {**workload_defaults, **document}
    document = with_overrides(document, overrides)
    document = _with_calibration(document, path.resolve().parent)
    if document is None:
        from ..core.experiment import default_experiment, expand
        raise ConfigError("--experiment", f"{path} is empty (or holds only comments): write {{}} in it to run the default "
                          f"experiment ({len(expand(default_experiment()))} jobs: the source post's matrix and Express "
                          "FastFile), or name trials as experiments/*.yaml do", source=None)
    experiment = parse_experiment(document, source=str(path))
    from ..aws.validation import instance_type_problem
    from ..core.facts.prices import PriceTable
    table = prices or PriceTable()
    trial_docs = document.get("trials") if isinstance(document, dict) and isinstance(document.get("trials"), list) else []
    for i, trial in enumerate(experiment.trials):
        own = i < len(trial_docs) and isinstance(trial_docs[i], dict) and "instance_type" in trial_docs[i]
        field = f"trials[{i}].instance_type" if own else "instance_type"
        problem = instance_type_problem(trial.instance_type)
        if problem:
            raise ConfigError(field, problem, source=str(path))
        if priced and table.instance_hourly(trial.instance_type) is None:
            # Its records would cost the jobs $0 (the workflow prices them with the lab's table).
            raise ConfigError(field, f"no price for {trial.instance_type} ({table.date}): pick a type `dslab prices` "
                              "lists, or add it to dslab/core/facts/prices.py",
                              source=str(path))
    return experiment


def read_json_file(path: Path, option: str) -> Any:
    """A JSON document given on the command line; a bad one is a ConfigError naming the option."""
    try:
        return json.loads(path.read_text())
    except OSError as err:
        raise ConfigError(option, f"cannot read {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise ConfigError(option, f"{path} is not JSON ({err})") from None
