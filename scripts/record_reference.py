"""The results record, field by field, written to docs/reference/results-record.md from its two schemas: the shared
contract (dslab/contracts/results-record.schema.json, vendored byte for byte) and the fields the lab adds beside it
(dslab/contracts/record-extensions.schema.json). `python scripts/record_reference.py` writes the page (`make docs`
runs it); `--check` exits 1 when the committed page differs (tests/test_docs.py asserts the same)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [] if str(REPO / "scripts") in sys.path else [str(REPO / "scripts")]
from generated_page import write_or_check  # noqa: E402  (scripts/ is not a package)
PAGE = REPO / "docs" / "reference" / "results-record.md"

HEAD = """# The results record

`results.json` holds `{"experiment": ..., "backend": "aws" | "local", "records": [record, ...]}`, one record a
training job (or a job skipped, with its reason). Every tool that writes or reads results keeps to one shape: the
workflow's collect step, `dslab local`, `dslab report`. A record must satisfy two schemas, checked whenever a report
loads results (`dslab.contracts.validate_results`):

- **the shared contract** (`dslab/contracts/results-record.schema.json`, kept byte for byte as other tools hold it);
- **the lab's fields beside it** (`dslab/contracts/record-extensions.schema.json`): the contract allows fields it does
  not name, and these are the ones the lab writes, typed so that a reader can rely on them. A field absent means
  what the contract alone says.

Generated from both schemas by `scripts/record_reference.py` (`make docs`); `tests/test_docs.py` fails when this
page and the schemas differ. Times are seconds; money is US dollars. `results.csv` flattens the same records
(`dslab.core.results.CSV_COLUMNS`): new columns are only ever appended.
"""


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        return _type(_DEFS[spec["$ref"].rsplit("/", 1)[-1]])
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    if "const" in spec:
        return f"`{spec['const']}`"
    kind = spec.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    shown = []
    for k in kinds:
        if k == "array" and "items" in spec:
            shown.append(f"array of {_type(spec['items'])}")
        elif k == "object" and isinstance(spec.get("additionalProperties"), dict):
            shown.append(f"object of {_type(spec['additionalProperties'])}")
        else:
            shown.append(k)
    text = " or ".join(shown)
    bounds = [f"≥ {spec['minimum']}" if "minimum" in spec else "", f"≤ {spec['maximum']}" if "maximum" in spec else "",
              f"matches `{spec['pattern']}`" if "pattern" in spec else ""]
    return ", ".join([text, *(b for b in bounds if b)])


_DEFS: dict[str, Any] = {}


def _rows(properties: dict[str, Any], required: set[str], prefix: str = "") -> list[str]:
    rows = []
    for name, spec in properties.items():
        path = f"{prefix}{name}"
        need = "yes" if name in required else ""
        about = " ".join(spec.get("description", "").split()).replace("|", "\\|")
        rows.append(f"| `{path}` | {_type(spec)} | {need} | {about} |")
        if spec.get("properties"):
            rows += _rows(spec["properties"], set(spec.get("required", ())), f"{path}.")
    return rows


def _rules(schema: dict[str, Any]) -> list[str]:
    out = []
    for field, needs in schema.get("dependentRequired", {}).items():
        out.append(f"- `{field}` only with {', '.join(f'`{n}`' for n in needs)}.")
    for rule in schema.get("allOf", ()):
        when = rule["if"].get("properties", {})
        field, value = next(iter(when.items())) if when else (rule["if"]["required"][0], {})
        value = value.get("const", value.get("enum", "present")) if isinstance(value, dict) else value
        then = rule["then"]
        if "not" in then:
            said = f"no `{then['not']['required'][0]}`"
        elif "required" in then:
            said = f"`{then['required'][0]}` present"
        else:
            key, spec = next(iter(then["properties"].items()))
            said = f"`{key}` is `{spec['const']}`"
        condition = (f"`{field}` is {' or '.join(f'`{v}`' for v in value)}" if isinstance(value, list)
                     else f"`{field}` is present" if value == "present" else f"`{field}` is `{value}`")
        about = rule.get("description", "").rstrip(".")
        why = f" ({about[:1].lower()}{about[1:]})" if about else ""
        out.append(f"- Where {condition}: {said}{why}.")
    return out


def _versions() -> list[str]:
    """What each schema version's seconds mean, and how an older record is read (dslab.core.results)."""
    from dslab.core.results import VERSION_NOTES, read_results
    lines = ["## Schema versions", "",
             "Each record says its version (`schema_version`; absent: 1), and so does the file. A file whose records "
             "mix versions is refused in one line naming the record and its version, and nothing is written (`dslab "
             "report`, `dslab calibrate` exit 2). An older file is read as below (`"
             f"{read_results.__module__}.read_results`), and the report says which records it read so.", ""]
    for version, said in sorted(VERSION_NOTES.items(), reverse=True):
        lines += [f"- **{version}**: {said}"]
    return lines


def render() -> str:
    sys.path.insert(0, str(REPO))
    from dslab.contracts import extensions_schema, record_schema
    contract, extensions = record_schema(), extensions_schema()
    _DEFS.clear()
    _DEFS.update(extensions.get("$defs", {}))
    header = ["| field | type | required | what it holds |", "|---|---|---|---|"]
    lines = [HEAD, "## The shared contract", "", " ".join(contract["description"].split()), "", *header,
             *_rows(contract["properties"], set(contract["required"])), "",
             "## The lab's fields beside it", "", " ".join(extensions["description"].split()), "", *header,
             *_rows(extensions["properties"], set(extensions.get("required", ()))), "",
             "Rules between fields:", "", *_rules(extensions), "", *_versions(), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    return write_or_check(PAGE, render(), argv, source="schemas", script="record_reference.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
