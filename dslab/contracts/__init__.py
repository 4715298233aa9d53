"""Material vendored from ../shared, so a fresh clone without ../shared runs every check.

- ``results-record.schema.json``: the results-record contract (../shared/contracts/).
- ``bencher-measured.csv``: the measured SageMaker jobs the estimate model is fitted on (../shared/calibration/).

- ``record-extensions.schema.json`` (the lab's own, not vendored): the fields the lab adds beside the contract, which
  the contract allows without naming (trial, storage, ingestion, checkpoint_target, metrics.checkpoint, ...), typed.

``vendored.json`` records each copy's sha256; tests/test_operator.py::test_vendored_copies_match keeps
the copies equal to it, and to ../shared where it exists.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("results-record.schema.json")
EXTENSIONS_PATH = Path(__file__).with_name("record-extensions.schema.json")
CALIBRATION_PATH = Path(__file__).with_name("bencher-measured.csv")
VENDORED_MANIFEST = Path(__file__).with_name("vendored.json")


@functools.lru_cache(maxsize=1)
def record_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@functools.lru_cache(maxsize=1)
def extensions_schema() -> dict[str, Any]:
    return json.loads(EXTENSIONS_PATH.read_text())


def validate_record(record: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError if the record breaks the contract, or types a field the lab adds wrongly."""
    import jsonschema
    jsonschema.validate(record, record_schema())
    jsonschema.validate(record, extensions_schema())


def field_path(error: Any) -> str:
    """A jsonschema error's place as a reader finds it: records[3].metrics.checkpoint.save_seconds_mean."""
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


# results.json's envelope: what a reader of this version can rely on (Collect writes it; a file without the key was
# written before the key was, and is version 1). 2: billable_seconds is one instance's, as AWS's BillableTimeInSeconds
# (each record says its own version too; dslab.core.results.read_results reads a version-1 file, VERSION_NOTES).
RESULTS_SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


def validate_results(results: dict[str, Any]) -> None:
    for key in ("experiment", "backend", "records"):
        if key not in results:
            raise ValueError(f"results: missing '{key}'")
    version = results.get("schema_version", 1)
    if version not in READABLE_VERSIONS:
        raise ValueError(f"results: schema_version {version!r}; this dslab reads versions "
                         f"{', '.join(map(str, READABLE_VERSIONS))}: read it with the dslab that wrote it")
    if results["backend"] not in ("aws", "local"):
        raise ValueError(f"results: backend must be 'aws' or 'local', not {results['backend']!r}")
    import jsonschema
    for index, record in enumerate(results["records"]):
        try:
            validate_record(record)
        except jsonschema.ValidationError as err:   # where in results.json: records[i] before the record's own path
            err.path.extendleft([index, "records"])
            raise
