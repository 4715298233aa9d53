"""The operator commands built on the workflow: plan, run, status, report, estimate, recommend, fsx, local."""

from __future__ import annotations


def register(sub, add) -> None:
    """Adds the operator commands to the ``dslab`` parser (filled in as each command lands)."""
