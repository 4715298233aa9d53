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


def read_document(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError("--experiment", f"cannot read {path}: {err.strerror}") from None
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as err:
        raise err.with_source(str(path)) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError("--experiment", f"{path} is not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    return document   # None: the file is empty or holds only comments


def load_experiment(path: Path, prices=None, priced: bool = True, repeats: int | None = None) -> Experiment:
    """An experiment file, parsed, with every trial's instance type checked against botocore's
    SageMaker model and (``priced``) against the price table its results are costed with (``prices``,
    default the lab's): a typo or an unpriced type is refused here, before any command builds, uploads
    or runs anything. An empty file is refused too: it would silently run the default experiment.
    ``repeats`` (the CLI's --repeats) replaces the file's repeats: the experiment as run records it."""
    document = read_document(path)
    if repeats is not None and isinstance(document, dict):
        document = {**document, "repeats": repeats}
    if document is None:
        from ..core.experiment import default_experiment, expand
        raise ConfigError("--experiment", f"{path} is empty (or holds only comments): write {{}} in it to run the default "
                          f"experiment ({len(expand(default_experiment()))} jobs: the source post's matrix and Express "
                          "FastFile), or name trials as experiments/*.yaml do", source=None)
    experiment = parse_experiment(document, source=str(path))
    from ..aws.validation import instance_type_problem
    from ..core.prices import PriceTable
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
            raise ConfigError(field, f"no price for {trial.instance_type} in the price table of {table.date}: pick a "
                              "priced type, or add it under instance_hourly in dslab/core/prices.py (the workflow "
                              "prices results with it) or, for recommend and report, in a --prices YAML file",
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
