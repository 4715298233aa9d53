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
    return {} if document is None else document


def load_experiment(path: Path) -> Experiment:
    """An experiment file, parsed, with every trial's instance type checked against botocore's
    SageMaker model: a typo is refused here, before any command builds, uploads or runs anything."""
    document = read_document(path)
    experiment = parse_experiment(document, source=str(path))
    from ..aws.validation import instance_type_problem
    trial_docs = document.get("trials") if isinstance(document, dict) and isinstance(document.get("trials"), list) else []
    for i, trial in enumerate(experiment.trials):
        problem = instance_type_problem(trial.instance_type)
        if problem:
            own = i < len(trial_docs) and isinstance(trial_docs[i], dict) and "instance_type" in trial_docs[i]
            raise ConfigError(f"trials[{i}].instance_type" if own else "instance_type", problem, source=str(path))
    return experiment


def read_json_file(path: Path, option: str) -> Any:
    """A JSON document given on the command line; a bad one is a ConfigError naming the option."""
    try:
        return json.loads(path.read_text())
    except OSError as err:
        raise ConfigError(option, f"cannot read {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise ConfigError(option, f"{path} is not JSON ({err})") from None
