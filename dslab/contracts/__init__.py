"""The results-record contract (a copy of ../shared/contracts/results-record.schema.json; a test keeps them equal)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("results-record.schema.json")


@functools.lru_cache(maxsize=1)
def record_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def validate_record(record: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError if the record breaks the contract."""
    import jsonschema
    jsonschema.validate(record, record_schema())


def validate_results(results: dict[str, Any]) -> None:
    for key in ("experiment", "backend", "records"):
        if key not in results:
            raise ValueError(f"results: missing '{key}'")
    if results["backend"] not in ("aws", "local"):
        raise ValueError(f"results: backend must be 'aws' or 'local', not {results['backend']!r}")
    for record in results["records"]:
        validate_record(record)
