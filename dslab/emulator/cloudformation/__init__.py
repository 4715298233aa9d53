"""The embedded stand-in's CloudFormation (see engine.py for the rules it enforces)."""

from __future__ import annotations

from typing import Any, Callable

from . import api
from .engine import Engine
from .model import CloudFormationError, ResourceFailed, Stack
from .providers import Environment, Providers, ResponseListener
from .template import TemplateError


class CloudFormationStandIn:
    """The engine of one account and region, routed from moto's CloudFormation endpoints while open.

    ``client(service)`` makes a client of the stand-in (in-process mock or server); ``hooks`` shapes
    deletions (``stack_deletion``, ``time_scale``) and hears of them (``on_stack_delete``);
    ``express_zones`` are the zone IDs where directory buckets may be made (None: any).
    """

    def __init__(self, client: Callable[[str], Any], *, account: str = "123456789012", region: str = "us-east-1",
                 hooks: Any = None, express_zones: set[str] | None = None, function_env: Callable[[], dict] | None = None,
                 **environment: Any):
        self.responses = ResponseListener()
        self.env = Environment(client=client, account=account, region=region, express_zones=express_zones,
                               responses=self.responses, function_env=function_env or (lambda: {}), **environment)
        # The zones are asked for only where a template looks them up: the EC2 client (its service model is
        # megabytes of JSON) is made then.
        self.engine = Engine(
            Providers(self.env), account=account, region=region, hooks=hooks,
            zones=lambda: [z["ZoneName"] for z in client("ec2").describe_availability_zones()["AvailabilityZones"]],
            ssm_get=self._ssm_get)
        api.install()
        api.ACTIVE[region] = self.engine

    def _ssm_get(self, name: str) -> str:
        try:
            return self.env.client("ssm").get_parameter(Name=name)["Parameter"]["Value"]
        except Exception:  # noqa: BLE001
            raise TemplateError(f"Parameters: [ssm:{name}] cannot be found.") from None

    def close(self) -> None:
        self.engine.closing.set()
        self.engine.wait(timeout=120)
        if api.ACTIVE.get(self.env.region) is self.engine:
            del api.ACTIVE[self.env.region]
        self.responses.close()


__all__ = ["CloudFormationStandIn", "CloudFormationError", "Engine", "ResourceFailed", "Stack", "TemplateError"]
