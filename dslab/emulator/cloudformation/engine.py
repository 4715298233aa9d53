"""The stand-in's CloudFormation: stacks, change sets, exports and imports, events, and the status
transitions the CDK CLI and the lab depend on.

moto's own CloudFormation copies the API's shapes but not its rules: a stack created by a change set gets
no outputs or exports, an export in use can be changed or deleted, unsupported resource types are skipped
and custom resources need Docker. This engine replaces it (``api.py`` plugs it into moto's server and
in-process mock) and provisions every resource through the stand-in's other services (``providers/``).

The rules it enforces, each from the CloudFormation User Guide:
- **Exports** are unique per region; "After another stack imports an output value, you can't delete
  the stack that is exporting the output value or modify the exported output value"
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-stack-exports.html); an
  import of an export that does not exist fails the deployment.
- **Operations are asynchronous**: CreateStack, ExecuteChangeSet and DeleteStack return at once; the
  stack moves through *_IN_PROGRESS to *_COMPLETE, *_FAILED or a rollback
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/view-stack-events.html#cfn-console-view-stack-data-resources-status-codes).
- **A failed create rolls back** (ROLLBACK_COMPLETE, and the stack can then only be deleted); **a
  failed update rolls back** to the previous resources (UPDATE_ROLLBACK_COMPLETE).
- **Replacement**: a property change that requires replacement creates the new resource first and
  deletes the old one in the clean-up phase; a resource with a custom name cannot be replaced
  ("CloudFormation cannot update a stack when a custom-named resource requires replacing").
- **Clean-up failures do not fail an update**: the stack ends UPDATE_COMPLETE and the old resource is
  left behind, still billing.
- **DeletionPolicy Retain** keeps a resource (and its name) when it leaves the template or the stack is
  deleted; a deleted stack is visible by its ID only.
- **A change set without changes** ends FAILED with "The submitted information didn't contain changes."
"""

from __future__ import annotations

import copy
import json
import threading
import time
import traceback
import uuid
from typing import Any, Callable

from . import template as tpl
from .model import (
    NO_CHANGES,
    ChangeSet,
    CloudFormationError,
    Resource,
    ResourceFailed,
    Stack,
    now,
)
from .template import TemplateError


class Engine:
    """One account and region of the stand-in's CloudFormation.

    ``providers`` provision resources (``providers.Providers``); ``hooks`` lets the emulator shape how
    a deletion ends (``stack_deletion(name) -> (seconds, failure)``, ``time_scale``) and learn when a
    stack is gone (``on_stack_delete(name)``).
    """

    def __init__(self, providers: Any, *, account: str = "123456789012", region: str = "us-east-1",
                 zones: Callable[[], list[str]] | None = None, ssm_get: Callable[[str], str] | None = None,
                 hooks: Any = None, synchronous: bool = False, answer_within: float = 2.0):
        self.providers, self.account, self.region = providers, account, region
        self.zones = zones or (lambda: [f"{region}{c}" for c in "abcdef"])
        self.ssm_get = ssm_get or (lambda name: (_ for _ in ()).throw(TemplateError(f"SSM parameter {name} not found")))
        self.hooks = hooks
        self.synchronous = synchronous
        # An operation still runs on its own (a slow one is seen *_IN_PROGRESS), but the API call that
        # started it answers once it has ended if that takes under this long: the stand-in's resources
        # are made in milliseconds, and callers (the CDK CLI polls every 5 s) need not wait a poll.
        self.answer_within = answer_within
        self.lock = threading.RLock()
        self.stacks: list[Stack] = []          # every stack ever made, deleted ones too (visible by ID)
        self.change_sets: dict[str, ChangeSet] = {}
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []
        self.closing = threading.Event()   # set when the stand-in stops: a deletion still waiting gives up

    # ---- lookup ----------------------------------------------------------------------------------
    def find(self, name_or_id: str, *, deleted: bool = True) -> Stack | None:
        with self.lock:
            for stack in reversed(self.stacks):
                if stack.stack_id == name_or_id:
                    return stack if deleted or stack.status != "DELETE_COMPLETE" else None
                if stack.name == name_or_id and stack.status != "DELETE_COMPLETE":
                    return stack
        return None

    def get(self, name_or_id: str) -> Stack:
        stack = self.find(name_or_id)
        if stack is None:
            raise CloudFormationError("ValidationError", f"Stack with id {name_or_id} does not exist")
        return stack

    def live_stacks(self) -> list[Stack]:
        with self.lock:
            return [s for s in self.stacks if s.status not in ("DELETE_COMPLETE",)]

    def exports(self) -> dict[str, tuple[str, Stack]]:
        """Export name -> (value, exporting stack), for stacks that exist."""
        out: dict[str, tuple[str, Stack]] = {}
        for stack in self.live_stacks():
            if stack.status in ("REVIEW_IN_PROGRESS", "ROLLBACK_COMPLETE"):
                continue
            for name, value in stack.exports.items():
                out[name] = (value, stack)
        return out

    def importers(self, export_name: str, *, besides: Stack | None = None) -> list[str]:
        return sorted(s.name for s in self.live_stacks()
                      if export_name in s.imports and s is not besides and s.status != "REVIEW_IN_PROGRESS")

    # ---- change sets ---------------------------------------------------------------------------------
    def create_change_set(self, *, stack_name: str, name: str, body: str, kind: str = "UPDATE",
                          parameters: dict[str, str | None] | None = None, capabilities: list[str] | None = None,
                          role_arn: str | None = None, tags: list[dict[str, str]] | None = None,
                          description: str | None = None) -> ChangeSet:
        template = tpl.load(body)
        with self.lock:
            existing = self.find(stack_name, deleted=False)
            if kind == "CREATE":
                if existing is not None and existing.status != "REVIEW_IN_PROGRESS":
                    raise CloudFormationError("AlreadyExistsException", f"Stack [{stack_name}] already exists")
                stack = existing or self._new_stack(stack_name, template, body, "REVIEW_IN_PROGRESS")
            else:
                if existing is None or existing.status == "REVIEW_IN_PROGRESS":
                    raise CloudFormationError("ValidationError", f"Stack [{stack_name}] does not exist")
                self._require_settled(existing)
                stack = existing
            if any(cs.name == name and cs.stack_id == stack.stack_id for cs in self.change_sets.values()):
                raise CloudFormationError("AlreadyExistsException", f"ChangeSet [{name}] already exists")
            region_account = f"{self.region}:{self.account}"
            change_set = ChangeSet(name=name, change_set_id=f"arn:aws:cloudformation:{region_account}:changeSet/{name}/{uuid.uuid4()}",
                                   stack_id=stack.stack_id, stack_name=stack.name, kind=kind, template=template,
                                   body=body, parameters=dict(parameters or {}), capabilities=list(capabilities or []),
                                   role_arn=role_arn, tags=tags, description=description)
            self.change_sets[change_set.change_set_id] = change_set
        try:
            change_set.changes = self._changes(stack, template, change_set.parameters)
            has_changes = bool(change_set.changes) or kind == "CREATE" or self._other_changes(stack, template, change_set)
            if has_changes:
                change_set.status, change_set.execution_status = "CREATE_COMPLETE", "AVAILABLE"
            else:
                change_set.status, change_set.reason = "FAILED", NO_CHANGES
        except (TemplateError, CloudFormationError, ResourceFailed) as err:
            change_set.status, change_set.reason = "FAILED", str(err.args[0] if err.args else err)
        return change_set

    def change_set(self, name_or_arn: str, stack_name: str | None = None) -> ChangeSet:
        with self.lock:
            if name_or_arn in self.change_sets:
                return self.change_sets[name_or_arn]
            stack = self.find(stack_name) if stack_name else None
            for cs in self.change_sets.values():
                if cs.name == name_or_arn and (stack is None or cs.stack_id == stack.stack_id):
                    return cs
        raise CloudFormationError("ChangeSetNotFound", f"ChangeSet [{name_or_arn}] does not exist", 404)

    def delete_change_set(self, name_or_arn: str, stack_name: str | None = None) -> None:
        try:
            change_set = self.change_set(name_or_arn, stack_name)
        except CloudFormationError:
            return  # nothing to delete (CloudFormation answers success)
        if change_set.execution_status == "EXECUTE_IN_PROGRESS":
            raise CloudFormationError("InvalidChangeSetStatus", "Cannot delete a change set while it executes")
        with self.lock:
            self.change_sets.pop(change_set.change_set_id, None)
            stack = self.find(change_set.stack_id)
            if stack is not None and stack.status == "REVIEW_IN_PROGRESS" and not any(
                    cs.stack_id == stack.stack_id for cs in self.change_sets.values()):
                stack.status, stack.deleted = "DELETE_COMPLETE", now()

    def execute_change_set(self, name_or_arn: str, stack_name: str | None = None) -> None:
        change_set = self.change_set(name_or_arn, stack_name)
        if change_set.execution_status != "AVAILABLE":
            raise CloudFormationError("InvalidChangeSetStatus",
                                      f"ChangeSet [{change_set.change_set_id}] cannot be executed in its current "
                                      f"status of [{change_set.status}]")
        stack = self.get(change_set.stack_id)
        self._require_settled(stack)
        change_set.execution_status = "EXECUTE_IN_PROGRESS"

        def done() -> None:
            change_set.execution_status = "EXECUTE_COMPLETE"
            with self.lock:  # executing a change set deletes every other change set of the stack
                for other in [c for c in self.change_sets.values() if c.stack_id == stack.stack_id]:
                    self.change_sets.pop(other.change_set_id, None)

        self._start(lambda: (self._deploy(stack, change_set.template, change_set.body, change_set.parameters,
                                          change_set.capabilities, change_set.role_arn, change_set.tags,
                                          creating=change_set.kind == "CREATE"), done()))

    # ---- direct operations -------------------------------------------------------------------------
    def create_stack(self, *, name: str, body: str, parameters: dict[str, str | None] | None = None,
                     capabilities: list[str] | None = None, role_arn: str | None = None,
                     tags: list[dict[str, str]] | None = None) -> Stack:
        template = tpl.load(body)
        with self.lock:
            if self.find(name, deleted=False) is not None:
                raise CloudFormationError("AlreadyExistsException", f"Stack [{name}] already exists")
            stack = self._new_stack(name, template, body, "CREATE_IN_PROGRESS")
        self._start(lambda: self._deploy(stack, template, body, dict(parameters or {}), list(capabilities or []),
                                         role_arn, tags, creating=True))
        return stack

    def update_stack(self, *, name: str, body: str, parameters: dict[str, str | None] | None = None,
                     capabilities: list[str] | None = None, role_arn: str | None = None,
                     tags: list[dict[str, str]] | None = None) -> Stack:
        stack = self.get(name)
        self._require_settled(stack)
        template = tpl.load(body)
        if not self._changes(stack, template, dict(parameters or {})) and not self._other_changes(
                stack, template, ChangeSet("", "", stack.stack_id, name, "UPDATE", template, body, dict(parameters or {}),
                                           [], role_arn, tags)):
            raise CloudFormationError("ValidationError", "No updates are to be performed.")
        self._start(lambda: self._deploy(stack, template, body, dict(parameters or {}), list(capabilities or []),
                                         role_arn, tags, creating=False))
        return stack

    def delete_stack(self, name_or_id: str, role_arn: str | None = None) -> None:
        stack = self.find(name_or_id)
        if stack is None or stack.status == "DELETE_COMPLETE":
            return  # deleting a stack that does not exist succeeds
        if stack.status == "DELETE_IN_PROGRESS":
            return
        if stack.termination_protection:
            raise CloudFormationError("ValidationError", f"Stack [{stack.name}] cannot be deleted while TerminationProtection is enabled")
        if stack.status.endswith("_IN_PROGRESS") and stack.status != "REVIEW_IN_PROGRESS":
            # (a stack whose creation rolled back, ROLLBACK_COMPLETE, can only be deleted: that is allowed)
            raise CloudFormationError("ValidationError", f"Stack:{stack.stack_id} is in {stack.status} state and can not be deleted.")
        if role_arn:
            stack.role_arn = role_arn
        stack.status, stack.reason = "DELETE_IN_PROGRESS", "User Initiated"
        self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, "DELETE_IN_PROGRESS", "User Initiated")
        # A deletion the emulator says takes time (or fails) is answered at once, as AWS answers DeleteStack.
        seconds, failure = self._deletion_outcome(stack)
        self._start(lambda: self._delete(stack), settle=seconds <= 0 and not failure)

    def wait(self, timeout: float = 600.0) -> None:
        """Until every operation started so far has ended (tests and the in-process deployer)."""
        deadline = time.monotonic() + timeout
        for thread in list(self.threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    # ---- internals ---------------------------------------------------------------------------------
    def _new_stack(self, name: str, template: dict[str, Any], body: str, status: str) -> Stack:
        stack = Stack(name=name, stack_id=f"arn:aws:cloudformation:{self.region}:{self.account}:stack/{name}/{uuid.uuid4()}",
                      status=status, template=template, body=body)
        self.stacks.append(stack)
        return stack

    def _require_settled(self, stack: Stack) -> None:
        if stack.status.endswith("_IN_PROGRESS") and stack.status != "REVIEW_IN_PROGRESS":
            raise CloudFormationError("ValidationError",
                                      f"Stack:{stack.stack_id} is in {stack.status} state and can not be updated.")
        if stack.status == "ROLLBACK_COMPLETE":
            raise CloudFormationError("ValidationError",
                                      f"Stack:{stack.stack_id} is in ROLLBACK_COMPLETE state and can not be updated.")

    def _deletion_outcome(self, stack: Stack) -> tuple[float, str | None]:
        hook = getattr(self.hooks, "stack_deletion", None) if self.hooks is not None else None
        return hook(stack.name) if hook else (0.0, None)

    def _start(self, work: Callable[[], None], settle: bool = True) -> None:
        def run() -> None:
            try:
                work()
            except Exception:  # an engine bug: keep it visible to tests
                self.errors.append(traceback.format_exc())
        if self.synchronous:
            run()
            return
        thread = threading.Thread(target=run, daemon=True, name="cloudformation-operation")
        self.threads.append(thread)
        thread.start()
        if settle:
            thread.join(self.answer_within)

    def _event(self, stack: Stack, logical: str, kind: str, physical: str, status: str, reason: str | None = None,
               properties: dict[str, Any] | None = None) -> None:
        event = {"StackId": stack.stack_id, "EventId": str(uuid.uuid4()), "StackName": stack.name,
                 "LogicalResourceId": logical, "PhysicalResourceId": physical or "", "ResourceType": kind,
                 "Timestamp": now(), "ResourceStatus": status}
        if reason:
            event["ResourceStatusReason"] = reason
        if properties is not None:
            # CloudFormation's events carry the resource's properties (DescribeStackEvents: "BLOB of the properties
            # used to create the resource"); `dslab deploy-check` reads EFS's throughput changes from them.
            event["ResourceProperties"] = json.dumps(properties, default=str)
        with self.lock:
            stack.events.insert(0, event)

    def _pseudo(self, stack: Stack) -> dict[str, Any]:
        return {"AWS::AccountId": self.account, "AWS::Region": self.region, "AWS::Partition": "aws",
                "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": stack.name, "AWS::StackId": stack.stack_id,
                "AWS::NotificationARNs": []}

    def _context(self, stack: Stack, template: dict[str, Any], parameters: dict[str, Any],
                 live: dict[str, Resource], placeholders: bool = False) -> tpl.Context:
        exports = self.exports()

        def ref(name: str) -> Any:
            if name in live:
                return live[name].physical_id
            if placeholders and name in template.get("Resources", {}):
                return f"{{pending:{name}}}"
            raise TemplateError(f"Template format error: Unresolved resource dependencies [{name}] in the Resources block of the template")

        def get_att(name: str, attr: str) -> Any:
            if name in live:
                attributes = live[name].attributes
                if attr in attributes:
                    return attributes[attr]
                if placeholders:
                    return f"{{pending:{name}.{attr}}}"
                raise TemplateError(f"Template error: resource {name} does not support attribute type {attr} in Fn::GetAtt")
            if placeholders and name in template.get("Resources", {}):
                return f"{{pending:{name}.{attr}}}"
            raise TemplateError(f"Template error: instance of Fn::GetAtt references undefined resource {name}")

        def import_value(name: str) -> Any:
            if name not in exports:
                raise TemplateError(f"No export named {name} found.")
            return exports[name][0]

        context = tpl.Context(parameters=parameters, pseudo=self._pseudo(stack), mappings=template.get("Mappings", {}),
                              ref=ref, get_att=get_att, import_value=import_value, zones=self.zones())
        tpl.resolve_conditions(template, context)
        return context

    def _resources_of(self, template: dict[str, Any], context: tpl.Context) -> dict[str, dict[str, Any]]:
        return {lid: r for lid, r in template["Resources"].items()
                if not r.get("Condition") or context.conditions.get(r["Condition"], False)}

    def _parameters(self, stack: Stack, template: dict[str, Any], given: dict[str, str | None]) -> tuple[dict, dict]:
        return tpl.resolve_parameters(template, given, stack.parameters, self.ssm_get)

    def _changes(self, stack: Stack, template: dict[str, Any], given: dict[str, str | None]) -> list[dict[str, Any]]:
        """The resource changes a deployment of ``template`` would make, as DescribeChangeSet lists them."""
        values, _ = self._parameters(stack, template, given)
        live = dict(stack.resources)
        context = self._context(stack, template, values, live, placeholders=True)
        resources = self._resources_of(template, context)
        changes = []
        for lid in tpl.dependency_order(resources):
            spec = resources[lid]
            for name in tpl.imports(spec):
                context.import_value(name)
            props = context.evaluate(spec.get("Properties", {})) or {}
            old = live.get(lid)
            provider = self.providers.for_type(spec["Type"])   # an unknown type fails the change set
            if old is None or old.type != spec["Type"]:
                changes.append(_change("Add", lid, spec["Type"]))
            elif old.properties != props:
                replace = provider.requires_replacement(old.properties, props)
                changes.append(_change("Modify", lid, spec["Type"], old.physical_id, "True" if replace else "False"))
        for lid, old in live.items():
            if lid not in resources:
                changes.append(_change("Remove", lid, old.type, old.physical_id))
        return changes

    def _other_changes(self, stack: Stack, template: dict[str, Any], change_set: ChangeSet) -> bool:
        """Changes that touch no resource: outputs, parameters' values, tags, the template's text."""
        if tpl.load(stack.body) != template:
            return True
        _, shown = self._parameters(stack, template, change_set.parameters)
        return shown != stack.parameters or (change_set.tags is not None and change_set.tags != stack.tags)

    def _deploy(self, stack: Stack, template: dict[str, Any], body: str, given: dict[str, str | None],
                capabilities: list[str], role_arn: str | None, tags: list[dict[str, str]] | None, *, creating: bool) -> None:
        verb = "CREATE" if creating else "UPDATE"
        stack.status, stack.reason = f"{verb}_IN_PROGRESS", "User Initiated"
        self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, stack.status, "User Initiated")
        old_resources = dict(stack.resources)
        old_template = stack.template
        created: list[Resource] = []                  # made by this operation (rolled back by deletion)
        updated: list[tuple[Resource, Resource]] = []  # (before, after) updated in place
        replaced: list[Resource] = []                 # old physical resources to delete in clean-up
        live: dict[str, Resource] = {}
        try:
            values, shown = self._parameters(stack, template, given)
            context = self._context(stack, template, values, live)
            resources = self._resources_of(template, context)
            order = tpl.dependency_order(resources)
            stack.imports = set()
            for lid in order:
                spec = resources[lid]
                stack.imports |= {n for n in tpl.imports(spec)}
                props = context.evaluate(spec.get("Properties", {})) or {}
                policy = spec.get("DeletionPolicy", "Delete")
                provider = self.providers.for_type(spec["Type"])
                old = old_resources.get(lid)
                if old is not None and old.type == spec["Type"] and old.properties == props:
                    old.deletion_policy = policy
                    live[lid] = old
                    continue
                if old is not None and old.type == spec["Type"] and not provider.requires_replacement(old.properties, props):
                    self._event(stack, lid, spec["Type"], old.physical_id, "UPDATE_IN_PROGRESS", properties=props)
                    physical, attributes = self._call(stack, lid, provider.update, old, props)
                    new = Resource(lid, spec["Type"], physical, props, attributes, policy, "UPDATE_COMPLETE")
                    updated.append((old, new))
                    if physical != old.physical_id:  # a new physical resource: the old one goes in clean-up
                        replaced.append(old)
                    self._event(stack, lid, spec["Type"], physical, "UPDATE_COMPLETE", properties=props)
                else:
                    if old is not None:
                        name_key = provider.name_property
                        if name_key and props.get(name_key) and props.get(name_key) == old.properties.get(name_key):
                            raise ResourceFailed(
                                f"CloudFormation cannot update a stack when a custom-named resource requires replacing. "
                                f"Rename {props[name_key]} and update the stack again.", lid)
                        self._event(stack, lid, spec["Type"], old.physical_id, "UPDATE_IN_PROGRESS",
                                    "Requested update requires the creation of a new physical resource; hence creating one.",
                                    properties=props)
                        replaced.append(old)
                    else:
                        self._event(stack, lid, spec["Type"], "", "CREATE_IN_PROGRESS", properties=props)
                    physical, attributes = self._call(stack, lid, provider.create, lid, spec["Type"], props)
                    new = Resource(lid, spec["Type"], physical, props, attributes, policy)
                    created.append(new)
                    self._event(stack, lid, spec["Type"], physical, "UPDATE_COMPLETE" if old else "CREATE_COMPLETE",
                                properties=props)
                live[lid] = new
            outputs = self._outputs(template, context)
            self._check_exports(stack, outputs)
        except (ResourceFailed, TemplateError, CloudFormationError) as err:
            reason = err.message if isinstance(err, CloudFormationError) else str(err.args[0] if err.args else err)
            failed = err.args[1] if isinstance(err, ResourceFailed) and len(err.args) > 1 else stack.name
            self._rollback(stack, creating, reason, failed, created, updated, old_resources)
            return
        # Success: the new state, then the clean-up of what left the template or was replaced.
        with self.lock:
            stack.template, stack.body, stack.parameters = template, body, shown
            stack.capabilities, stack.outputs, stack.resources = capabilities, outputs, live
            if role_arn:
                stack.role_arn = role_arn
            if tags is not None:
                stack.tags = tags
            if not creating:
                stack.updated = now()
        if not creating:
            stack.status = "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS"
            self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, stack.status)
            leaving = [r for lid, r in old_resources.items() if lid not in live] + replaced
            order = _reverse_order(old_template, [r.logical_id for r in leaving])
            by_id = {id(r): r for r in leaving}
            for resource in sorted(by_id.values(), key=lambda r: order.index(r.logical_id) if r.logical_id in order else 0):
                self._remove(stack, resource, cleanup=True)
        stack.status, stack.reason = f"{verb}_COMPLETE", None
        self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, stack.status)

    def _call(self, stack: Stack, lid: str, method: Callable, *args) -> tuple[str, dict[str, Any]]:
        try:
            return method(*args, stack=stack) if _takes_stack(method) else method(*args)
        except ResourceFailed as err:
            raise ResourceFailed(str(err.args[0]), lid) from None
        except Exception as err:  # a provider's service call failed: the resource fails with its message
            message = getattr(err, "response", {}).get("Error", {}).get("Message") or str(err)
            raise ResourceFailed(f"Resource handler returned message: \"{message}\"", lid) from None

    def _outputs(self, template: dict[str, Any], context: tpl.Context) -> list[dict[str, str]]:
        outputs = []
        for key, spec in (template.get("Outputs") or {}).items():
            if spec.get("Condition") and not context.conditions.get(spec["Condition"], False):
                continue
            value = context.evaluate(spec["Value"])
            output = {"OutputKey": key, "OutputValue": value if isinstance(value, str) else
                      (",".join(value) if isinstance(value, list) else json.dumps(value) if isinstance(value, dict) else str(value))}
            if spec.get("Description"):
                output["Description"] = spec["Description"]
            if spec.get("Export"):
                output["ExportName"] = str(context.evaluate(spec["Export"]["Name"]))
            outputs.append(output)
        return outputs

    def _check_exports(self, stack: Stack, outputs: list[dict[str, str]]) -> None:
        new = {o["ExportName"]: o["OutputValue"] for o in outputs if o.get("ExportName")}
        others = {name: owner for name, (_, owner) in self.exports().items() if owner is not stack}
        for name in new:
            if name in others:
                raise CloudFormationError("ValidationError", f"Export with name {name} is already exported by stack {others[name].name}")
        for name, value in stack.exports.items():
            users = self.importers(name, besides=stack)
            if not users:
                continue
            if name not in new:
                raise CloudFormationError("ValidationError", f"Export {name} cannot be deleted as it is in use by {', '.join(users)}")
            if new[name] != value:
                raise CloudFormationError("ValidationError", f"Cannot update export {name} as it is in use by {', '.join(users)}")

    def _rollback(self, stack: Stack, creating: bool, reason: str, failed: str, created: list[Resource],
                  updated: list[tuple[Resource, Resource]], old_resources: dict[str, Resource]) -> None:
        verb = "CREATE" if creating else "UPDATE"
        self._event(stack, failed, "AWS::CloudFormation::Stack" if failed == stack.name else
                    (stack.template.get("Resources", {}).get(failed, {}).get("Type") or "Unknown"), "", f"{verb}_FAILED", reason)
        stack.status = "ROLLBACK_IN_PROGRESS" if creating else "UPDATE_ROLLBACK_IN_PROGRESS"
        stack.reason = f"The following resource(s) failed to {verb.lower()}: [{failed}]. {reason}" if failed != stack.name else reason
        self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, stack.status, stack.reason)
        problems = []
        for before, after in reversed(updated):
            # Updated in place again, back to the properties it had: an update of its own, with its events.
            self._event(stack, before.logical_id, before.type, after.physical_id, "UPDATE_IN_PROGRESS",
                        properties=before.properties)
            try:
                provider = self.providers.for_type(before.type)
                physical, attributes = provider.update(after, before.properties)
                before.physical_id, before.attributes = physical, attributes
                self._event(stack, before.logical_id, before.type, physical, "UPDATE_COMPLETE", properties=before.properties)
            except Exception as err:  # noqa: BLE001 - recorded as the rollback's failure
                problems.append(f"{before.logical_id}: {err}")
                self._event(stack, before.logical_id, before.type, after.physical_id, "UPDATE_FAILED", str(err),
                            properties=before.properties)
        for resource in reversed(created):
            try:
                self.providers.for_type(resource.type).delete(resource)
                self._event(stack, resource.logical_id, resource.type, resource.physical_id, "DELETE_COMPLETE")
            except Exception as err:  # noqa: BLE001
                problems.append(f"{resource.logical_id}: {err}")
        if creating:
            stack.resources = {}
            stack.status = "ROLLBACK_FAILED" if problems else "ROLLBACK_COMPLETE"
        else:
            stack.resources = old_resources
            stack.status = "UPDATE_ROLLBACK_FAILED" if problems else "UPDATE_ROLLBACK_COMPLETE"
        if problems:
            stack.reason = f"{stack.reason}; rollback failed: {'; '.join(problems)}"
        self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, stack.status, stack.reason)

    def _remove(self, stack: Stack, resource: Resource, *, cleanup: bool) -> bool:
        if resource.deletion_policy in ("Retain", "RetainExceptOnCreate"):
            self._event(stack, resource.logical_id, resource.type, resource.physical_id, "DELETE_SKIPPED")
            return True
        self._event(stack, resource.logical_id, resource.type, resource.physical_id, "DELETE_IN_PROGRESS")
        try:
            provider = self.providers.for_type(resource.type)
            if _takes_stack(provider.delete):
                provider.delete(resource, stack=stack)
            else:
                provider.delete(resource)
        except Exception as err:  # noqa: BLE001 - the resource's DELETE_FAILED reason
            message = getattr(err, "response", {}).get("Error", {}).get("Message") or str(err)
            self._event(stack, resource.logical_id, resource.type, resource.physical_id, "DELETE_FAILED", message)
            return False
        self._event(stack, resource.logical_id, resource.type, resource.physical_id, "DELETE_COMPLETE")
        return True

    def _delete(self, stack: Stack) -> None:
        hooks = self.hooks
        seconds, failure = self._deletion_outcome(stack)
        if seconds > 0 and self.closing.wait(seconds * (getattr(hooks, "time_scale", 1.0) or 1.0)):
            return  # the stand-in stopped while the deletion was still running
        if failure:
            stack.status, stack.reason = "DELETE_FAILED", failure
            self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, "DELETE_FAILED", failure)
            return
        for name in stack.exports:
            users = self.importers(name, besides=stack)
            if users:
                reason = f"Export {name} cannot be deleted as it is in use by {', '.join(users)}"
                stack.status, stack.reason = "DELETE_FAILED", reason
                self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, "DELETE_FAILED", reason)
                return
        order = _reverse_order(stack.template, list(stack.resources))
        failed = []
        for lid in order:
            resource = stack.resources.get(lid)
            if resource is None:
                continue
            if self._remove(stack, resource, cleanup=False):
                del stack.resources[lid]
            else:
                failed.append(lid)
        if failed:
            stack.status = "DELETE_FAILED"
            stack.reason = f"The following resource(s) failed to delete: [{', '.join(failed)}]. "
            self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, "DELETE_FAILED", stack.reason)
            return
        with self.lock:
            stack.status, stack.reason, stack.deleted = "DELETE_COMPLETE", None, now()
            stack.outputs = []
            stack.imports = set()
        self._event(stack, stack.name, "AWS::CloudFormation::Stack", stack.stack_id, "DELETE_COMPLETE")
        if hooks is not None and getattr(hooks, "on_stack_delete", None):
            hooks.on_stack_delete(stack.name)


def _change(action: str, lid: str, kind: str, physical: str | None = None, replacement: str | None = None) -> dict[str, Any]:
    change: dict[str, Any] = {"Action": action, "LogicalResourceId": lid, "ResourceType": kind, "Scope": [], "Details": []}
    if physical:
        change["PhysicalResourceId"] = physical
    if replacement:
        change["Replacement"] = replacement
    if action == "Modify":
        change["Scope"] = ["Properties"]
    return {"Type": "Resource", "ResourceChange": change}


def _reverse_order(template: dict[str, Any], logical_ids: list[str]) -> list[str]:
    """Deletion order: dependents before what they depend on (the template's creation order reversed)."""
    resources = template.get("Resources", {})
    known = {lid: resources[lid] for lid in logical_ids if lid in resources}
    try:
        order = [lid for lid in tpl.dependency_order(_closure(resources, known)) if lid in known]
    except TemplateError:
        order = list(known)
    order.reverse()
    return order + [lid for lid in logical_ids if lid not in known]


def _closure(resources: dict[str, Any], chosen: dict[str, Any]) -> dict[str, Any]:
    """``chosen`` plus whatever they refer to, so the ordering sees every dependency."""
    out = dict(chosen)
    pending = list(chosen)
    while pending:
        lid = pending.pop()
        deps = tpl.references(resources.get(lid, {})) & set(resources)
        depends = resources.get(lid, {}).get("DependsOn", [])
        deps |= set([depends] if isinstance(depends, str) else depends) & set(resources)
        for dep in deps - set(out):
            out[dep] = resources[dep]
            pending.append(dep)
    return out


def _takes_stack(method: Callable) -> bool:
    import inspect
    try:
        return "stack" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def deep_copy(value: Any) -> Any:
    return copy.deepcopy(value)
