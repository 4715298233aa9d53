"""Reading a DLIO workload file's sections: the checks its training and its checkpointing parsers share (a mapping
of the sections DLIO knows, keys it knows with a "did you mean", numbers within bounds)."""

from __future__ import annotations

import difflib
import math
from typing import Any

from ..errors import ConfigError

# The sections DLIO reads (LoadConfig), and the ones files in circulation carry beside them.
SECTIONS = {"model", "framework", "workflow", "dataset", "reader", "data_reader", "train", "evaluation",
            "checkpoint", "storage", "profiling", "output", "metric", "logging", "transformer", "hydra"}


def check_sections(document: Any, source: str, where: str, expected: str) -> None:
    """A DLIO workload document is a non-empty mapping of DLIO's sections (``expected`` names the ones it needs); a
    typo is refused naming the key and the section it likely meant."""
    if not isinstance(document, dict) or not document:
        raise ConfigError(where.rstrip(".") or "--workload", f"{source} is not a DLIO workload (a mapping with "
                          f"{expected} sections)")
    unknown = sorted(set(map(str, document)) - SECTIONS)
    if unknown:
        hint = closest_key(unknown[0], SECTIONS)
        raise ConfigError(f"{where}{unknown[0]}", "is not a DLIO section" + (f" (did you mean '{hint}'?)" if hint else ""),
                          sorted(SECTIONS))


def closest_key(word: str, candidates: set[str]) -> str | None:
    match = difflib.get_close_matches(str(word), sorted(candidates), n=1, cutoff=0.6)
    return match[0] if match else None


def read_section(document: dict, name: str, allowed: set[str] | None, where: str) -> dict[str, Any]:
    value = document.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}{name}", f"must be a mapping, got {type(value).__name__}")
    if allowed is not None:
        unknown = sorted(set(value) - allowed, key=str)
        if unknown:
            hint = closest_key(unknown[0], allowed)
            raise ConfigError(f"{where}{name}.{unknown[0]}", "is not a DLIO key" + (f" (did you mean '{hint}'?)" if hint else ""),
                              sorted(allowed))
    return value


def read_number(value: Any, path: str, low: float, high: float, whole: bool = False, above: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if ok and whole and float(value) != int(value):
        ok = False
    if ok and (value <= low if above else value < low) or ok and value > high:
        ok = False
    if not ok:
        rng = f"{'above' if above else 'from'} {low:g} to {high:g}" + (", a whole number" if whole else "")
        raise ConfigError(path, f"{value!r} is out of range", rng)
    return int(value) if whole else float(value)


def read_one_of(section: dict, names: tuple[str, ...], path: str) -> tuple[str | None, Any]:
    given = [n for n in names if n in section]
    if len(given) > 1:
        raise ConfigError(f"{path}.{given[1]}", f"and {path}.{given[0]} name the same field; keep one")
    return (given[0], section[given[0]]) if given else (None, None)
