"""The stand-in's CloudFormation API: the Query protocol CloudFormation speaks (form-encoded requests,
XML responses), read and written from botocore's CloudFormation service model so every shape is the
real one, in front of the engine. It replaces moto's CloudFormation handler in the server (what the CDK
CLI talks to) and in the in-process mock (what tests and the Lambda handlers use).
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import urllib.parse
import uuid
from typing import Any, Callable
from xml.sax.saxutils import escape

from .engine import Engine
from .model import ChangeSet, CloudFormationError, Stack
from .template import TemplateError

NAMESPACE = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
ACTIVE: dict[str, Engine] = {}       # region -> engine, set by the running emulator


@functools.lru_cache(maxsize=1)
def _model():
    import botocore.session
    return botocore.session.get_session().get_service_model("cloudformation")


# ---- the Query protocol -----------------------------------------------------------------------------

def parse(shape, form: dict[str, str], prefix: str = "") -> Any:
    kind = shape.type_name
    if kind == "structure":
        out = {}
        for name, member in shape.members.items():
            key = f"{prefix}.{name}" if prefix else name
            value = parse(member, form, key)
            if value is not None:
                out[name] = value
        return out if out or not prefix else (out if any(k.startswith(prefix + ".") for k in form) else None)
    if kind == "list":
        items, index = [], 1
        while True:
            value = parse(shape.member, form, f"{prefix}.member.{index}")
            if value is None:
                break
            items.append(value)
            index += 1
        if not items:
            return [] if prefix in form else None
        return items
    if kind == "map":
        out, index = {}, 1
        while f"{prefix}.entry.{index}.key" in form:
            out[form[f"{prefix}.entry.{index}.key"]] = parse(shape.value, form, f"{prefix}.entry.{index}.value")
            index += 1
        return out or None
    if prefix not in form:
        return None
    raw = form[prefix]
    if kind == "boolean":
        return raw.lower() == "true"
    if kind in ("integer", "long"):
        return int(raw)
    return raw


def _timestamp(value: dt.datetime) -> str:
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def serialize(shape, value: Any, name: str) -> str:
    if value is None:
        return ""
    kind = shape.type_name
    if kind == "structure":
        inner = "".join(serialize(member, value.get(key), key) for key, member in shape.members.items() if key in value)
        return f"<{name}>{inner}</{name}>"
    if kind == "list":
        return f"<{name}>" + "".join(serialize(shape.member, item, "member") for item in value) + f"</{name}>"
    if kind == "map":
        entries = "".join(f"<entry><key>{escape(str(k))}</key>{serialize(shape.value, v, 'value')}</entry>" for k, v in value.items())
        return f"<{name}>{entries}</{name}>"
    if kind == "timestamp":
        text = _timestamp(value) if isinstance(value, dt.datetime) else str(value)
    elif kind == "boolean":
        text = "true" if value else "false"
    else:
        text = str(value)
    return f"<{name}>{escape(text)}</{name}>"


def response(action: str, result: dict[str, Any]) -> str:
    operation = _model().operation_model(action)
    body = ""
    if operation.output_shape is not None:
        body = "".join(serialize(member, result.get(key), key) for key, member in operation.output_shape.members.items()
                       if key in result)
    return (f'<{action}Response xmlns="{NAMESPACE}"><{action}Result>{body}</{action}Result>'
            f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata></{action}Response>")


def error(code: str, message: str) -> str:
    return (f'<ErrorResponse xmlns="{NAMESPACE}"><Error><Type>Sender</Type><Code>{escape(code)}</Code>'
            f"<Message>{escape(message)}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>")


# ---- views of the engine's objects, in the API's shapes ---------------------------------------------

def stack_view(stack: Stack) -> dict[str, Any]:
    view: dict[str, Any] = {
        "StackId": stack.stack_id, "StackName": stack.name, "CreationTime": stack.created, "StackStatus": stack.status,
        "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in stack.parameters.items()],
        "Capabilities": stack.capabilities, "Outputs": stack.outputs, "Tags": stack.tags,
        "EnableTerminationProtection": stack.termination_protection, "DisableRollback": False,
        "DriftInformation": {"StackDriftStatus": "NOT_CHECKED"}, "NotificationARNs": [],
    }
    if stack.description:
        view["Description"] = stack.description
    if stack.reason:
        view["StackStatusReason"] = stack.reason
    if stack.updated:
        view["LastUpdatedTime"] = stack.updated
    if stack.deleted:
        view["DeletionTime"] = stack.deleted
    if stack.role_arn:
        view["RoleARN"] = stack.role_arn
    return view


def change_set_view(change_set: ChangeSet) -> dict[str, Any]:
    view: dict[str, Any] = {
        "ChangeSetName": change_set.name, "ChangeSetId": change_set.change_set_id, "StackId": change_set.stack_id,
        "StackName": change_set.stack_name, "CreationTime": change_set.created, "Status": change_set.status,
        "ExecutionStatus": change_set.execution_status, "Capabilities": change_set.capabilities,
        "Parameters": [{"ParameterKey": k, "ParameterValue": v or "", **({"UsePreviousValue": True} if v is None else {})}
                       for k, v in change_set.parameters.items()],
        "Changes": change_set.changes, "NotificationARNs": [], "IncludeNestedStacks": False,
    }
    if change_set.tags:
        view["Tags"] = change_set.tags
    if change_set.reason:
        view["StatusReason"] = change_set.reason
    if change_set.description:
        view["Description"] = change_set.description
    return view


# ---- actions -----------------------------------------------------------------------------------------------

def _parameters(params: dict[str, Any]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for item in params.get("Parameters", []) or []:
        out[item["ParameterKey"]] = None if item.get("UsePreviousValue") else item.get("ParameterValue", "")
    return out


def _template_body(engine: Engine, params: dict[str, Any], stack: Stack | None = None) -> str:
    if params.get("TemplateBody"):
        return params["TemplateBody"]
    if params.get("UsePreviousTemplate") and stack is not None:
        return stack.body
    url = params.get("TemplateURL")
    if not url:
        raise CloudFormationError("ValidationError", "Either Template URL or Template Body must be specified.")
    bucket, key = _s3_location(url)
    try:
        obj = engine.providers.env.client("s3").get_object(Bucket=bucket, Key=key)
    except Exception as err:  # noqa: BLE001
        raise CloudFormationError("ValidationError", f"S3 error: Access Denied or no such object for TemplateURL {url} ({err})") from None
    return obj["Body"].read().decode("utf-8")


def _s3_location(url: str) -> tuple[str, str]:
    """TemplateURL forms: https://s3.<region>.amazonaws.com/<bucket>/<key> (what the CDK CLI sends),
    https://s3.amazonaws.com/<bucket>/<key>, https://<bucket>.s3[.<region>].amazonaws.com/<key>."""
    parsed = urllib.parse.urlparse(url)
    path = urllib.parse.unquote(parsed.path.lstrip("/"))
    host = parsed.netloc
    virtual = re.match(r"^(.+)\.s3[.-]", host)
    if virtual and not host.startswith("s3."):
        return virtual.group(1), path
    bucket, _, key = path.partition("/")
    return bucket, key


def _stack_for_change_set(engine: Engine, params: dict[str, Any]) -> ChangeSet:
    return engine.change_set(params["ChangeSetName"], params.get("StackName"))


ACTIONS: dict[str, Callable[[Engine, dict[str, Any]], dict[str, Any]]] = {}


def action(name: str):
    def register(fn):
        ACTIONS[name] = fn
        return fn
    return register


@action("DescribeStacks")
def _describe_stacks(engine, params):
    if params.get("StackName"):
        return {"Stacks": [stack_view(engine.get(params["StackName"]))]}
    return {"Stacks": [stack_view(s) for s in engine.live_stacks()]}


@action("ListStacks")
def _list_stacks(engine, params):
    wanted = set(params.get("StackStatusFilter") or [])
    with engine.lock:
        stacks = [s for s in engine.stacks if not wanted or s.status in wanted]
    return {"StackSummaries": [{"StackId": s.stack_id, "StackName": s.name, "CreationTime": s.created,
                                "StackStatus": s.status, **({"DeletionTime": s.deleted} if s.deleted else {})} for s in stacks]}


@action("GetTemplate")
def _get_template(engine, params):
    if params.get("ChangeSetName"):
        return {"TemplateBody": _stack_for_change_set(engine, params).body, "StagesAvailable": ["Original", "Processed"]}
    return {"TemplateBody": engine.get(params["StackName"]).body, "StagesAvailable": ["Original", "Processed"]}


@action("GetTemplateSummary")
def _get_template_summary(engine, params):
    from . import template as tpl
    stack = engine.find(params["StackName"]) if params.get("StackName") else None
    body = stack.body if stack else _template_body(engine, params)
    template = tpl.load(body)
    return {"Parameters": [{"ParameterKey": k, "DefaultValue": str(v.get("Default", "")), "ParameterType": v.get("Type", "String"),
                            "NoEcho": bool(v.get("NoEcho", False)), "Description": v.get("Description", "")}
                           for k, v in (template.get("Parameters") or {}).items()],
            "Description": template.get("Description", ""), "Capabilities": [],
            "ResourceTypes": sorted({r["Type"] for r in template["Resources"].values()}), "Version": "2010-09-09"}


@action("ValidateTemplate")
def _validate_template(engine, params):
    from . import template as tpl
    template = tpl.load(_template_body(engine, params))
    return {"Parameters": [{"ParameterKey": k, "DefaultValue": str(v.get("Default", "")), "NoEcho": False,
                            "Description": v.get("Description", "")} for k, v in (template.get("Parameters") or {}).items()],
            "Description": template.get("Description", "")}


@action("CreateChangeSet")
def _create_change_set(engine, params):
    stack = engine.find(params["StackName"], deleted=False)
    change_set = engine.create_change_set(
        stack_name=params["StackName"], name=params["ChangeSetName"], body=_template_body(engine, params, stack),
        kind=params.get("ChangeSetType", "UPDATE"), parameters=_parameters(params), capabilities=params.get("Capabilities"),
        role_arn=params.get("RoleARN"), tags=params.get("Tags"), description=params.get("Description"))
    return {"Id": change_set.change_set_id, "StackId": change_set.stack_id}


@action("DescribeChangeSet")
def _describe_change_set(engine, params):
    return change_set_view(_stack_for_change_set(engine, params))


@action("ListChangeSets")
def _list_change_sets(engine, params):
    stack = engine.get(params["StackName"])
    with engine.lock:
        sets = [c for c in engine.change_sets.values() if c.stack_id == stack.stack_id]
    return {"Summaries": [{"StackId": c.stack_id, "StackName": c.stack_name, "ChangeSetId": c.change_set_id,
                           "ChangeSetName": c.name, "ExecutionStatus": c.execution_status, "Status": c.status,
                           "CreationTime": c.created} for c in sets]}


@action("ExecuteChangeSet")
def _execute_change_set(engine, params):
    engine.execute_change_set(params["ChangeSetName"], params.get("StackName"))
    return {}


@action("DeleteChangeSet")
def _delete_change_set(engine, params):
    engine.delete_change_set(params["ChangeSetName"], params.get("StackName"))
    return {}


@action("CreateStack")
def _create_stack(engine, params):
    stack = engine.create_stack(name=params["StackName"], body=_template_body(engine, params), parameters=_parameters(params),
                                capabilities=params.get("Capabilities"), role_arn=params.get("RoleARN"), tags=params.get("Tags"))
    return {"StackId": stack.stack_id}


@action("UpdateStack")
def _update_stack(engine, params):
    stack = engine.get(params["StackName"])
    engine.update_stack(name=params["StackName"], body=_template_body(engine, params, stack), parameters=_parameters(params),
                        capabilities=params.get("Capabilities"), role_arn=params.get("RoleARN"), tags=params.get("Tags"))
    return {"StackId": stack.stack_id}


@action("DeleteStack")
def _delete_stack(engine, params):
    engine.delete_stack(params["StackName"], params.get("RoleARN"))
    return {}


@action("DescribeStackEvents")
def _describe_stack_events(engine, params):
    stack = engine.get(params["StackName"])
    with engine.lock:
        return {"StackEvents": list(stack.events)}


def _resource_rows(stack: Stack) -> list[dict[str, Any]]:
    return [{"StackName": stack.name, "StackId": stack.stack_id, "LogicalResourceId": r.logical_id,
             "PhysicalResourceId": r.physical_id, "ResourceType": r.type, "Timestamp": r.updated,
             "LastUpdatedTimestamp": r.updated, "ResourceStatus": r.status,
             "DriftInformation": {"StackResourceDriftStatus": "NOT_CHECKED"}} for r in stack.resources.values()]


@action("DescribeStackResources")
def _describe_stack_resources(engine, params):
    rows = _resource_rows(engine.get(params["StackName"]))
    if params.get("LogicalResourceId"):
        rows = [r for r in rows if r["LogicalResourceId"] == params["LogicalResourceId"]]
    return {"StackResources": rows}


@action("DescribeStackResource")
def _describe_stack_resource(engine, params):
    for row in _resource_rows(engine.get(params["StackName"])):
        if row["LogicalResourceId"] == params["LogicalResourceId"]:
            return {"StackResourceDetail": row}
    raise CloudFormationError("ValidationError", f"Resource {params['LogicalResourceId']} does not exist for stack {params['StackName']}")


@action("ListStackResources")
def _list_stack_resources(engine, params):
    return {"StackResourceSummaries": _resource_rows(engine.get(params["StackName"]))}


@action("ListExports")
def _list_exports(engine, params):
    return {"Exports": [{"ExportingStackId": owner.stack_id, "Name": name, "Value": value}
                        for name, (value, owner) in sorted(engine.exports().items())]}


@action("ListImports")
def _list_imports(engine, params):
    name = params["ExportName"]
    if name not in engine.exports():
        raise CloudFormationError("ValidationError", f"Export '{name}' does not exist.")
    return {"Imports": engine.importers(name)}


@action("UpdateTerminationProtection")
def _update_termination_protection(engine, params):
    stack = engine.get(params["StackName"])
    stack.termination_protection = bool(params.get("EnableTerminationProtection"))
    return {"StackId": stack.stack_id}


def handle(region: str, body: bytes | str) -> tuple[int, dict[str, str], str]:
    """One API request: (HTTP status, headers, XML body)."""
    text = body.decode("utf-8") if isinstance(body, bytes) else (body or "")
    form = {k: v[0] for k, v in urllib.parse.parse_qs(text, keep_blank_values=True).items()}
    name = form.get("Action", "")
    headers = {"Content-Type": "text/xml"}
    engine = ACTIVE.get(region)
    if engine is None:
        return 400, headers, error("ValidationError", "the stand-in's CloudFormation is not running")
    if name not in ACTIONS:
        return 400, headers, error("InvalidAction", f"The action {name} is not valid for this web service (stand-in)")
    params = parse(_model().operation_model(name).input_shape, form) or {}
    try:
        return 200, headers, response(name, ACTIONS[name](engine, params))
    except CloudFormationError as err:
        return err.status, headers, error(err.code, err.message)
    except TemplateError as err:
        return 400, headers, error("ValidationError", str(err))


def install() -> None:
    """Route moto's CloudFormation endpoints (server and in-process mock) to the engine of the region."""
    from moto.cloudformation import urls
    from moto.cloudformation.responses import CloudFormationResponse

    if getattr(CloudFormationResponse, "_dslab_engine", False):
        return

    class StandInCloudFormationResponse(CloudFormationResponse):
        @classmethod
        def dispatch(cls, request, full_url, headers):  # moto's server wants a bound classmethod per route
            region = _region_of(headers) or "us-east-1"
            if region not in ACTIVE:
                return super().dispatch(request, full_url, headers)
            return handle(region, _body(request))

    for key in list(urls.url_paths):
        if key.endswith("/$"):
            urls.url_paths[key] = StandInCloudFormationResponse.dispatch
    CloudFormationResponse._dslab_engine = True


def _region_of(headers) -> str | None:
    auth = (headers.get("Authorization") or headers.get("authorization") or "") if headers else ""
    found = re.search(r"Credential=[^/]+/[^/]+/([^/]+)/cloudformation/", auth)
    return found.group(1) if found else None


def _body(request) -> bytes:
    if hasattr(request, "get_data"):
        return request.get_data()
    body = getattr(request, "body", b"") or b""
    if hasattr(body, "read"):
        body = body.read()
    return body if isinstance(body, bytes) else str(body).encode()
