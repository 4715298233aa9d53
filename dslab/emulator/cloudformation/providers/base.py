"""What every provider shares: the Provider interface (create, update, delete; replacement and custom-name
properties) and the names CloudFormation generates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..model import Resource, ResourceFailed

if TYPE_CHECKING:  # annotations only: the environment imports the providers' helpers
    from .environment import Environment


def _error(err: Exception) -> str:
    return getattr(err, "response", {}).get("Error", {}).get("Message") or str(err)


class Provider:
    name_property: str | None = None
    replace_on: tuple[str, ...] = ()      # top-level properties; ("*",) = every property

    def __init__(self, env: "Environment"):
        self.env = env

    def requires_replacement(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        if self.replace_on == ("*",):
            return old != new
        return any(old.get(key) != new.get(key) for key in self.replace_on)

    def create(self, logical_id: str, kind: str, props: dict[str, Any], *, stack) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def update(self, old: Resource, props: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return old.physical_id, old.attributes

    def delete(self, resource: Resource) -> None:
        return None

    def client(self, service: str):
        return self.env.client(service)

    def generated_name(self, stack: str, logical_id: str, limit: int = 64, lower: bool = False) -> str:
        return self.env.names.generated_name(stack, logical_id, limit, lower)

    def token(self, key: str, n: int = 12) -> str:
        """A random-looking part of a name, drawn for ``key`` (what the name belongs to)."""
        return self.env.names.token(key, n)

    @staticmethod
    def refuse_if_taken(kind: str, name: str, find: Callable[[], Any]) -> None:
        """Fails the creation of ``name`` when ``find()`` finds it (answers truthy; raising means absent). Some
        create calls do not refuse a taken name (Step Functions answers with the existing machine, EventBridge's
        PutRule overwrites), others refuse in words of their own (SSM, CloudWatch Logs). CloudFormation's resource type handler contract: "AlreadyExists:
        The specified resource already existed before the execution of this handler. This error is applicable to
        create handlers only." (its contract test creates a resource twice "with the expectation that the second
        create operation will fail with the AlreadyExists error code"). The lab meets it only through a name it
        gave explicitly, or stand-ins sharing one moto state without a reset (their generated names are drawn
        alike, NameSource): both fail loudly instead of sharing a resource."""
        try:
            found = find()
        except Exception:  # noqa: BLE001 - absent: the name is free
            return
        if found:
            raise ResourceFailed(f"Resource of type '{kind}' with identifier '{name}' already exists.")

    @staticmethod
    def unless_gone(call, **kwargs):
        """``call(**kwargs)``, or None where it fails because what it reads or deletes is already gone (a
        delete of what a failed create never made, or of what someone removed by hand)."""
        try:
            return call(**kwargs)
        except Exception:  # noqa: BLE001 - already gone
            return None


class Record(Provider):
    """Types with no behaviour the lab depends on: kept as CloudFormation's record of them."""
    replace_on = ("*",)

    def create(self, logical_id, kind, props, *, stack):
        return f"{logical_id}-{self.token(f'{stack.name}/{logical_id}', 8).lower()}", {}
