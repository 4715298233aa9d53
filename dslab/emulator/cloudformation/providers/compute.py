"""Lambda functions, Step Functions state machines, EventBridge rules, ECR repositories."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any, Callable

from .base import Provider


class LambdaFunction(Provider):
    name_property = "FunctionName"
    replace_on = ("FunctionName",)

    def create(self, logical_id, kind, props, *, stack):
        name = props.get("FunctionName") or self.generated_name(stack.name, logical_id, 64)
        kwargs = self._config(props)
        code = props["Code"]
        kwargs["Code"] = ({"ZipFile": _zip_inline(code["ZipFile"])} if "ZipFile" in code else
                          {"S3Bucket": code["S3Bucket"], "S3Key": code["S3Key"]})
        function = _retry_iam(lambda: self.client("lambda").create_function(FunctionName=name, **kwargs))
        return name, {"Arn": function["FunctionArn"]}

    @staticmethod
    def _config(props: dict[str, Any]) -> dict[str, Any]:
        kwargs = {"Role": props["Role"], "Handler": props.get("Handler", "index.handler"),
                  "Runtime": props.get("Runtime", "python3.12"), "Timeout": int(props.get("Timeout", 3)),
                  "MemorySize": int(props.get("MemorySize", 128)), "Description": props.get("Description", ""),
                  "Environment": {"Variables": {k: str(v) for k, v in props.get("Environment", {}).get("Variables", {}).items()}}}
        if props.get("TracingConfig"):
            kwargs["TracingConfig"] = props["TracingConfig"]
        return kwargs

    def update(self, old, props):
        lam = self.client("lambda")
        lam.update_function_configuration(FunctionName=old.physical_id, **self._config(props))
        code = props["Code"]
        if code != old.properties.get("Code"):
            if "ZipFile" in code:
                lam.update_function_code(FunctionName=old.physical_id, ZipFile=_zip_inline(code["ZipFile"]))
            else:
                lam.update_function_code(FunctionName=old.physical_id, S3Bucket=code["S3Bucket"], S3Key=code["S3Key"])
        return old.physical_id, old.attributes

    def delete(self, resource):
        self.client("lambda").delete_function(FunctionName=resource.physical_id)


def _zip_inline(source: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.py", source)
    return buffer.getvalue()


def _retry_iam(call: Callable[[], Any]) -> Any:
    """Lambda refuses a role IAM has not propagated yet ("The role defined for the function cannot be
    assumed by Lambda"); CloudFormation's handler retries, so does this one (the stand-in's IAM is instant)."""
    return call()


class StateMachine(Provider):
    name_property = "StateMachineName"
    replace_on = ("StateMachineName", "StateMachineType")

    def create(self, logical_id, kind, props, *, stack):
        name = props.get("StateMachineName") or self.generated_name(stack.name, logical_id, 80)
        definition = props.get("DefinitionString") or json.dumps(props.get("Definition", {}))
        sfn = self.client("stepfunctions")
        self.refuse_if_taken(kind, name, lambda: sfn.describe_state_machine(
            stateMachineArn=f"arn:aws:states:{self.env.region}:{self.env.account}:stateMachine:{name}"))
        arn = sfn.create_state_machine(
            name=name, definition=definition, roleArn=props["RoleArn"], type=props.get("StateMachineType", "STANDARD"))["stateMachineArn"]
        return arn, {"Arn": arn, "Name": name}

    def update(self, old, props):
        definition = props.get("DefinitionString") or json.dumps(props.get("Definition", {}))
        self.client("stepfunctions").update_state_machine(stateMachineArn=old.physical_id, definition=definition,
                                                          roleArn=props["RoleArn"])
        return old.physical_id, old.attributes

    def delete(self, resource):
        self.client("stepfunctions").delete_state_machine(stateMachineArn=resource.physical_id)


class EventsRule(Provider):
    name_property = "Name"
    replace_on = ("Name", "EventBusName")

    def create(self, logical_id, kind, props, *, stack):
        name = props.get("Name") or self.generated_name(stack.name, logical_id, 64)
        self.refuse_if_taken(kind, name, lambda: self.client("events").describe_rule(Name=name))   # the default bus, as _put
        self._put(name, props)
        return name, {"Arn": f"arn:aws:events:{self.env.region}:{self.env.account}:rule/{name}"}

    def _put(self, name: str, props: dict[str, Any]) -> None:
        events = self.client("events")
        kwargs = {"Name": name, "State": props.get("State", "ENABLED")}
        if props.get("ScheduleExpression"):
            kwargs["ScheduleExpression"] = props["ScheduleExpression"]
        if props.get("EventPattern"):
            kwargs["EventPattern"] = json.dumps(props["EventPattern"])
        events.put_rule(**kwargs)
        if props.get("Targets"):
            events.put_targets(Rule=name, Targets=[{"Id": t["Id"], "Arn": t["Arn"], **({"Input": t["Input"]} if "Input" in t else {})}
                                                   for t in props["Targets"]])

    def update(self, old, props):
        self._put(old.physical_id, props)
        return old.physical_id, old.attributes

    def delete(self, resource):
        events = self.client("events")
        targets = [t["Id"] for t in resource.properties.get("Targets", [])]
        if targets:
            events.remove_targets(Rule=resource.physical_id, Ids=targets)
        events.delete_rule(Name=resource.physical_id)


class EcrRepository(Provider):
    name_property = "RepositoryName"
    replace_on = ("RepositoryName",)

    def create(self, logical_id, kind, props, *, stack):
        name = props.get("RepositoryName") or self.generated_name(stack.name, logical_id, 256, lower=True)
        repo = self.client("ecr").create_repository(repositoryName=name)["repository"]
        return name, {"Arn": repo["repositoryArn"], "RepositoryUri": repo["repositoryUri"]}

    def delete(self, resource):
        self.client("ecr").delete_repository(repositoryName=resource.physical_id, force=True)
