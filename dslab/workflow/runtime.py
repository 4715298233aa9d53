"""The Lambda functions' view of their environment.

On AWS it is the process environment the Lambda runtime sets (the function's variables, region and
credentials). The embedded stand-in runs the functions in-process, in several threads at once; it
hands each invocation its own environment here instead of rewriting ``os.environ``, which other
threads read at the same time (boto3 reads it for proxies and credentials).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Iterator

_OVERRIDE: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("dslab_function_env", default=None)


def environ() -> dict[str, str]:
    override = _OVERRIDE.get()
    return dict(override) if override is not None else dict(os.environ)


@contextlib.contextmanager
def function_environment(variables: dict[str, str]) -> Iterator[None]:
    """Run code as a function whose environment is ``variables`` (this thread only)."""
    token = _OVERRIDE.set({k: str(v) for k, v in variables.items()})
    try:
        yield
    finally:
        _OVERRIDE.reset(token)
