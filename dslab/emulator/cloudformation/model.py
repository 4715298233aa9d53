"""What the stand-in's CloudFormation keeps: stacks, their resources and change sets, the statuses that end
an operation, and the errors it answers with."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

TERMINAL = {"CREATE_COMPLETE", "CREATE_FAILED", "ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "UPDATE_COMPLETE",
            "UPDATE_ROLLBACK_COMPLETE", "UPDATE_ROLLBACK_FAILED", "DELETE_COMPLETE", "DELETE_FAILED",
            "REVIEW_IN_PROGRESS", "IMPORT_COMPLETE"}


NO_CHANGES = "The submitted information didn't contain changes. Submit different information to create a change set."


class CloudFormationError(Exception):
    """An API error as CloudFormation answers it (code, message, HTTP status)."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


class ResourceFailed(Exception):
    """A resource operation failed; the message is the resource's status reason."""


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass
class Resource:
    logical_id: str
    type: str
    physical_id: str
    properties: dict[str, Any]
    attributes: dict[str, Any] = field(default_factory=dict)
    deletion_policy: str = "Delete"
    status: str = "CREATE_COMPLETE"
    updated: dt.datetime = field(default_factory=now)


@dataclass
class Stack:
    name: str
    stack_id: str
    status: str
    template: dict[str, Any]
    body: str
    parameters: dict[str, str] = field(default_factory=dict)
    capabilities: list[str] = field(default_factory=list)
    role_arn: str | None = None
    tags: list[dict[str, str]] = field(default_factory=list)
    outputs: list[dict[str, str]] = field(default_factory=list)
    resources: dict[str, Resource] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    created: dt.datetime = field(default_factory=now)
    updated: dt.datetime | None = None
    deleted: dt.datetime | None = None
    termination_protection: bool = False
    imports: set[str] = field(default_factory=set)   # export names this stack's template imports

    @property
    def description(self) -> str | None:
        return self.template.get("Description")

    @property
    def exports(self) -> dict[str, str]:
        return {o["ExportName"]: o["OutputValue"] for o in self.outputs if o.get("ExportName")}


@dataclass
class ChangeSet:
    name: str
    change_set_id: str
    stack_id: str
    stack_name: str
    kind: str                       # CREATE | UPDATE
    template: dict[str, Any]
    body: str
    parameters: dict[str, str | None]
    capabilities: list[str]
    role_arn: str | None
    tags: list[dict[str, str]] | None
    description: str | None = None
    status: str = "CREATE_PENDING"
    execution_status: str = "UNAVAILABLE"
    reason: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)
    created: dt.datetime = field(default_factory=now)
