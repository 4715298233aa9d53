"""Check API requests against botocore's service models: types, required members, lengths,
ranges, and the enums and patterns botocore's own validator leaves unchecked."""

from __future__ import annotations

import functools
import re
from typing import Any

import botocore
import botocore.session
from botocore.validate import ParamValidator


class RequestInvalid(ValueError):
    """The request would be refused by the service; the message lists every problem."""


@functools.lru_cache(maxsize=None)
def _service_model(service: str):
    return botocore.session.get_session().get_service_model(service)


def operation_names(service: str) -> list[str]:
    return list(_service_model(service).operation_names)


@functools.lru_cache(maxsize=None)
def _compiled(pattern: str | None):
    """The model's pattern, or None where it uses Java-only syntax (\\p{...}) Python cannot read."""
    if not pattern:
        return None
    try:
        return re.compile(pattern, flags=re.DOTALL)
    except re.error:
        return None


def _walk(shape, value: Any, path: str, problems: list[str], dynamic: frozenset[str] = frozenset()) -> None:
    if value is None:
        return
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        for name, member in shape.members.items():
            if name in value:
                _walk(member, value[name], f"{path}.{name}" if path else name, problems, dynamic)
    elif kind == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            _walk(shape.member, item, f"{path}[{i}]", problems, dynamic)
    elif kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            _walk(shape.key, key, f"{path} key", problems, dynamic)
            _walk(shape.value, item, f"{path}.{key}", problems, dynamic)
    elif kind == "string" and isinstance(value, str) and path not in dynamic:
        if shape.enum and value not in shape.enum:
            shown = ", ".join(shape.enum[:12]) + (", ..." if len(shape.enum) > 12 else "")
            problems.append(f"{path}: {value!r} is not one of {shown}")
        pattern = _compiled(shape.metadata.get("pattern"))
        if pattern is not None and not pattern.fullmatch(value):
            problems.append(f"{path}: {value!r} does not match the pattern {pattern}")


def validate_request(service: str, operation: str, params: dict[str, Any], dynamic: set[str] | None = None) -> None:
    """Raise RequestInvalid if ``params`` would not be accepted by ``service.operation``.

    ``dynamic``: member paths whose values are only known at run time (a state's JSONPath): their
    types are checked, their patterns and enums cannot be.
    """
    model = _service_model(service)
    api_name = operation[0].upper() + operation[1:]
    if api_name not in model.operation_names:
        raise RequestInvalid(f"{service} has no operation {operation}")
    shape = model.operation_model(api_name).input_shape
    problems: list[str] = []
    report = ParamValidator().validate(params, shape)
    if report.has_errors():
        problems.extend(line.strip() for line in report.generate_report().splitlines()[1:] if line.strip())
    _walk(shape, params, "", problems, frozenset(dynamic or ()))
    if problems:
        raise RequestInvalid(f"{service}.{api_name} request is invalid:\n  " + "\n  ".join(problems))


@functools.lru_cache(maxsize=None)
def training_instance_types() -> tuple[str, ...]:
    """The instance types CreateTrainingJob accepts (ResourceConfig.InstanceType), from botocore's model."""
    return tuple(_service_model("sagemaker").shape_for("TrainingInstanceType").enum)


def instance_type_problem(value: str) -> str | None:
    """Why ``value`` is not a SageMaker training instance type (with the closest ones), or None."""
    import difflib
    known = training_instance_types()
    if value in known:
        return None
    close = difflib.get_close_matches(str(value), known, n=2, cutoff=0.75)
    hint = f": did you mean {' or '.join(close)}?" if close else ": ml.<family>.<size>, e.g. ml.g5.xlarge"
    # One line that fits 160 columns with the field before it (botocore names the types SageMaker accepts).
    return f"{value!r} is not a SageMaker training instance type (botocore {botocore.__version__}){hint}"
