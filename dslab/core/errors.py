"""One error type for bad input, carrying the field that is wrong and how to fix it."""

from __future__ import annotations

from typing import Iterable


class ConfigError(ValueError):
    """Bad user input, raised before anything is created or spent.

    ``field`` is a dotted key path (``datasets[1].format``); the message says what is allowed.
    """

    def __init__(self, field: str, problem: str, allowed: Iterable[object] | str | None = None,
                 source: str | None = None):
        self.field = field
        self.problem = problem
        self.allowed = allowed if isinstance(allowed, (str, type(None))) else list(allowed)
        self.source = source
        super().__init__(self._render())

    def with_source(self, source: str) -> "ConfigError":
        return ConfigError(self.field, self.problem, self.allowed, source)

    def _render(self) -> str:
        where = f"{self.source}: " if self.source else ""
        text = f"{where}{self.field}: {self.problem}"
        if self.allowed is not None:
            allowed = self.allowed if isinstance(self.allowed, str) else ", ".join(map(str, self.allowed))
            text += f" (allowed: {allowed})"
        return text
