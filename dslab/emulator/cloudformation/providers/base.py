"""What every provider shares: the Provider interface (create, update, delete; replacement and custom-name
properties) and the names CloudFormation generates."""

from __future__ import annotations

import random
import string
from typing import TYPE_CHECKING, Any

from ..model import Resource

if TYPE_CHECKING:  # annotations only: the environment imports the providers' helpers
    from .environment import Environment


def _random(n: int = 12) -> str:
    return "".join(random.choices(string.ascii_uppercase + string.digits, k=n))


def generated_name(stack: str, logical_id: str, limit: int = 64, lower: bool = False) -> str:
    """CloudFormation's generated physical names: "<stack>-<logical ID>-<random>", trimmed to the limit."""
    suffix = f"-{_random()}"
    head = f"{stack}-{logical_id}"[: limit - len(suffix)]
    name = head + suffix
    return name.lower() if lower else name


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
        return f"{logical_id}-{_random(8).lower()}", {}
