"""CloudFormation templates as CloudFormation reads them: JSON or YAML (short-form tags too), parameters
(SSM-typed ones resolved from Parameter Store), conditions, intrinsic functions and dependencies.

Only what a template needs to deploy is modelled; an intrinsic the stand-in does not know is an error
naming it, never a silent pass (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/intrinsic-function-reference.html).
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import yaml

NO_VALUE = object()   # what Ref AWS::NoValue evaluates to: the property (or list item) disappears
INTRINSICS = {"Ref", "Fn::GetAtt", "Fn::Join", "Fn::Sub", "Fn::Select", "Fn::Split", "Fn::If", "Fn::Equals",
              "Fn::Not", "Fn::And", "Fn::Or", "Fn::ImportValue", "Fn::GetAZs", "Fn::Base64", "Fn::FindInMap",
              "Fn::Length", "Fn::ToJsonString", "Condition"}
SUB_RE = re.compile(r"\$\{([^}!][^}]*)\}")


class TemplateError(ValueError):
    """The template cannot be deployed as written (CloudFormation's "Template format error" or a
    validation error); the message says what and where."""


class _Loader(yaml.SafeLoader):
    pass


def _short_form(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    tag = suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if tag == "Fn::GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {tag: value}


_Loader.add_multi_constructor("!", _short_form)


def load(body: str) -> dict[str, Any]:
    """A template body as CloudFormation accepts it: JSON, or YAML with ``!Ref``-style tags. Each call gets its own
    copy (callers may change it); a body seen before is not parsed again (the CDK's bootstrap template, ~0.3 s of
    YAML, comes with every deploy)."""
    return copy.deepcopy(_parsed(body))


@functools.lru_cache(maxsize=32)
def _parsed(body: str) -> dict[str, Any]:
    try:
        template = json.loads(body)
    except json.JSONDecodeError:
        try:
            template = yaml.load(body, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as err:
            raise TemplateError(f"Template format error: {err}") from None
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict) or not template["Resources"]:
        raise TemplateError("Template format error: At least one Resources member must be defined.")
    return template


def references(value: Any) -> set[str]:
    """The logical IDs a value refers to through Ref, Fn::GetAtt and Fn::Sub (pseudo parameters and
    parameters included; the caller keeps the resources)."""
    found: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if len(v) == 1:
                (key, arg), = v.items()
                if key == "Ref" and isinstance(arg, str):
                    found.add(arg)
                    return
                if key == "Fn::GetAtt":
                    parts = arg.split(".", 1) if isinstance(arg, str) else arg
                    found.add(parts[0])
                    return
                if key == "Fn::Sub":
                    text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
                    for name in SUB_RE.findall(text):
                        if name.split(".")[0] not in variables:
                            found.add(name.split(".")[0])
                    walk(variables)
                    return
            for item in v.values():
                walk(item)
        elif isinstance(v, list):
            for item in v:
                walk(item)

    walk(value)
    return found


def imports(value: Any) -> set[str]:
    """The export names a value imports (literal names; an import name built at deploy time is resolved
    by the caller's evaluator)."""
    found: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if len(v) == 1 and "Fn::ImportValue" in v and isinstance(v["Fn::ImportValue"], str):
                found.add(v["Fn::ImportValue"])
                return
            for item in v.values():
                walk(item)
        elif isinstance(v, list):
            for item in v:
                walk(item)

    walk(value)
    return found


@dataclass
class Context:
    """What an evaluation can see: parameters, pseudo parameters, resources' Refs and attributes,
    conditions, exports, mappings and the region's zones."""
    parameters: dict[str, Any]
    pseudo: dict[str, Any]
    conditions: dict[str, bool] = field(default_factory=dict)
    mappings: dict[str, Any] = field(default_factory=dict)
    ref: Callable[[str], Any] = lambda name: (_ for _ in ()).throw(TemplateError(f"Unresolved resource dependencies [{name}]"))
    get_att: Callable[[str, str], Any] = lambda name, attr: (_ for _ in ()).throw(TemplateError(f"Unresolved GetAtt {name}.{attr}"))
    import_value: Callable[[str], Any] = lambda name: (_ for _ in ()).throw(TemplateError(f"No export named {name} found."))
    zones: list[str] = field(default_factory=list)

    def evaluate(self, value: Any) -> Any:
        result = self._eval(value)
        return None if result is NO_VALUE else result

    def _eval(self, v: Any) -> Any:
        if isinstance(v, list):
            return [x for x in (self._eval(i) for i in v) if x is not NO_VALUE]
        if not isinstance(v, dict):
            return v
        if len(v) == 1:
            (key, arg), = v.items()
            if key in INTRINSICS and key != "Condition":
                return self._intrinsic(key, arg)
            if key.startswith("Fn::"):
                raise TemplateError(f"Template format error: the stand-in does not know the intrinsic {key}")
        out = {}
        for key, item in v.items():
            value = self._eval(item)
            if value is not NO_VALUE:
                out[key] = value
        return out

    def condition(self, v: Any) -> bool:
        """A condition expression (Fn::Equals/And/Or/Not, {Condition: Name})."""
        if isinstance(v, dict) and len(v) == 1 and "Condition" in v:
            name = v["Condition"]
            if name not in self.conditions:
                raise TemplateError(f"Template format error: Unresolved condition dependency {name}")
            return self.conditions[name]
        result = self._eval(v)
        if not isinstance(result, bool):
            raise TemplateError(f"Template format error: a condition must be a boolean, got {result!r}")
        return result

    def _intrinsic(self, key: str, arg: Any) -> Any:
        if key == "Ref":
            if arg == "AWS::NoValue":
                return NO_VALUE
            if arg in self.pseudo:
                return self.pseudo[arg]
            if arg in self.parameters:
                return self.parameters[arg]
            return self.ref(arg)
        if key == "Fn::GetAtt":
            name, attr = arg.split(".", 1) if isinstance(arg, str) else (arg[0], self._eval(arg[1]))
            return self.get_att(name, attr)
        if key == "Fn::Join":
            separator, items = arg[0], self._eval(arg[1])
            return separator.join(_text(i) for i in items)
        if key == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self._eval(arg[1]))

            def substitute(match: re.Match) -> str:
                name = match.group(1)
                if name in variables:
                    return _text(variables[name])
                if "." in name and name.split(".", 1)[0] not in self.parameters and name not in self.pseudo:
                    resource, attr = name.split(".", 1)
                    return _text(self.get_att(resource, attr))
                return _text(self._intrinsic("Ref", name))
            return SUB_RE.sub(substitute, text).replace("${!", "${")
        if key == "Fn::Select":
            index, items = int(self._eval(arg[0])), self._eval(arg[1])
            if not 0 <= index < len(items):
                raise TemplateError(f"Template error: Fn::Select cannot select nonexistent value at index {index}")
            return items[index]
        if key == "Fn::Split":
            return _text(self._eval(arg[1])).split(arg[0])
        if key == "Fn::If":
            name, if_true, if_false = arg
            if name not in self.conditions:
                raise TemplateError(f"Template format error: Unresolved condition dependency {name} in Fn::If")
            return self._eval(if_true if self.conditions[name] else if_false)
        if key == "Fn::Equals":
            left, right = (self._eval(a) for a in arg)
            return _text(left) == _text(right)
        if key == "Fn::Not":
            return not self.condition(arg[0])
        if key == "Fn::And":
            return all(self.condition(c) for c in arg)
        if key == "Fn::Or":
            return any(self.condition(c) for c in arg)
        if key == "Fn::ImportValue":
            return self.import_value(_text(self._eval(arg)))
        if key == "Fn::GetAZs":
            return list(self.zones)
        if key == "Fn::Base64":
            return base64.b64encode(_text(self._eval(arg)).encode()).decode()
        if key == "Fn::FindInMap":
            name, top, second = (self._eval(a) for a in arg)
            try:
                return self.mappings[name][top][second]
            except KeyError:
                raise TemplateError(f"Template error: Unable to get mapping for {name}::{top}::{second}") from None
        if key == "Fn::Length":
            return len(self._eval(arg))
        if key == "Fn::ToJsonString":
            return json.dumps(self._eval(arg), separators=(",", ":"))
        raise TemplateError(f"Template format error: unsupported intrinsic {key}")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise TemplateError(f"Template error: a string was expected, got {json.dumps(value)[:200]}")
    return str(value)


def resolve_parameters(template: dict[str, Any], given: dict[str, str], previous: dict[str, str],
                       ssm_get: Callable[[str], str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(values for evaluation, the stack's parameter values as DescribeStacks shows them).

    ``given``: ParameterKey -> value, or None for UsePreviousValue. SSM-typed parameters hold the
    parameter's *name*; their value is read from Parameter Store at every deployment ("CloudFormation
    ... retrieves the value from Parameter Store" on each create and update:
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/parameters-section-structure.html#aws-ssm-parameter-types).
    """
    values: dict[str, Any] = {}
    shown: dict[str, str] = {}
    declared = template.get("Parameters", {}) or {}
    unknown = set(given) - set(declared)
    if unknown:
        raise TemplateError(f"Parameters: [{', '.join(sorted(unknown))}] do not exist in the template")
    for name, spec in declared.items():
        if name in given:
            raw = previous.get(name) if given[name] is None else given[name]
        else:
            raw = spec.get("Default")
        if raw is None:
            raise TemplateError(f"Parameters: [{name}] must have values")
        raw = str(raw) if not isinstance(raw, list) else ",".join(raw)
        shown[name] = raw
        kind = spec.get("Type", "String")
        allowed = spec.get("AllowedValues")
        if kind.startswith("AWS::SSM::Parameter::Value<"):
            value: Any = ssm_get(raw)
            if "List<" in kind:
                value = value.split(",")
        elif kind == "Number":
            value = float(raw) if "." in raw else int(raw)
        elif kind == "CommaDelimitedList" or kind.startswith("List<"):
            value = [] if raw == "" else [part.strip() for part in raw.split(",")]
        else:
            value = raw
        if allowed and raw not in [str(a) for a in allowed]:
            raise TemplateError(f"Parameter '{name}' must be one of AllowedValues")
        values[name] = value
    return values, shown


def resolve_conditions(template: dict[str, Any], context: Context) -> dict[str, bool]:
    declared = template.get("Conditions", {}) or {}
    resolved: dict[str, bool] = {}
    pending = dict(declared)
    context.conditions = resolved
    while pending:
        progressed = False
        for name, expression in list(pending.items()):
            needed = _condition_names(expression)
            if needed - set(resolved):
                if needed - set(declared):
                    raise TemplateError(f"Template format error: Unresolved condition dependencies {sorted(needed - set(declared))} in {name}")
                continue
            resolved[name] = context.condition(expression)
            del pending[name]
            progressed = True
        if not progressed:
            raise TemplateError(f"Template format error: circular conditions {sorted(pending)}")
    return resolved


def _condition_names(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        if len(value) == 1 and "Condition" in value and isinstance(value["Condition"], str):
            found.add(value["Condition"])
        elif len(value) == 1 and "Fn::If" in value:
            found.add(value["Fn::If"][0])
            for item in value["Fn::If"][1:]:
                found |= _condition_names(item)
        else:
            for item in value.values():
                found |= _condition_names(item)
    elif isinstance(value, list):
        for item in value:
            found |= _condition_names(item)
    return found


def dependency_order(resources: dict[str, dict[str, Any]]) -> list[str]:
    """Logical IDs so that each comes after everything it refers to or DependsOn (CloudFormation's
    creation order); a cycle is CloudFormation's "Circular dependency between resources" error."""
    graph: dict[str, set[str]] = {}
    for logical, resource in resources.items():
        depends = resource.get("DependsOn", [])
        depends = [depends] if isinstance(depends, str) else list(depends)
        missing = [d for d in depends if d not in resources]
        if missing:
            raise TemplateError(f"Template format error: Unresolved resource dependencies {missing} in the Resources block")
        graph[logical] = (references({k: v for k, v in resource.items() if k != "DependsOn"}) & set(resources)) | set(depends)
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        if state.get(node) == 2:
            return
        if state.get(node) == 1:
            raise TemplateError(f"Circular dependency between resources: {sorted(set(path))}")
        state[node] = 1
        for dep in sorted(graph[node]):
            visit(dep, path + [node])
        state[node] = 2
        order.append(node)

    for node in sorted(graph):
        visit(node, [])
    return order
