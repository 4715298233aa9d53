"""The answer's JSON (`dslab estimate|recommend|size --json`), field by field, written to docs/reference/answer.md from
its schema (dslab/contracts/answer.schema.json). `python scripts/answer_reference.py` writes the page (`make docs` runs
it); `--check` exits 1 when the committed page differs (tests/test_docs.py asserts the same, and that real answers
satisfy the schema)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [] if str(REPO / "scripts") in sys.path else [str(REPO / "scripts")]
from generated_page import write_or_check  # noqa: E402  (scripts/ is not a package)
PAGE = REPO / "docs" / "reference" / "answer.md"
SCHEMA = REPO / "dslab" / "contracts" / "answer.schema.json"

HEAD = """# The answer

`dslab estimate`, `recommend` and `size` answer one question with one object: each is a view of it (a table of its
own), and each prints it whole with `--json`, the same for all three. It holds every source (or, with a checkpointing
`--workload`, every checkpoint target) **priced as `dslab size` provisions it for this question**, with the lab as it
stands beside it (`as_deployed`) and where that differs; the pick and the runner-up, chosen once; and the question it
answers. `recommend --experiment --json` gives one per scenario (`answers[].answer`) and per checkpoint trial.

Generated from `dslab/contracts/answer.schema.json` by `scripts/answer_reference.py` (`make docs`);
`tests/test_docs.py` fails when this page and the schema differ, and validates real answers against the schema.
Times are seconds; money is US dollars.
"""

SECTIONS = (("answer", "The data answer"), ("question", "`question`"), ("source", "`sources[]`: each source"),
            ("as_deployed", "`sources[].as_deployed`: the lab as it stands"),
            ("estimate", "`sources[].estimate`: the estimate behind the figures"),
            ("provisioning", "`lab` and `sources[].estimate.provisioning`: a lab"),
            ("checkpoint_answer", "The checkpoint answer (a checkpointing `--workload`)"),
            ("target", "`targets[]`: each checkpoint target"),
            ("target_as_deployed", "`targets[].as_deployed`: the target as the lab stands"))


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        return f"[{spec['$ref'].rsplit('/', 1)[-1]}](#{spec['$ref'].rsplit('/', 1)[-1].replace('_', '-')})"
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    kind = spec.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    shown = [f"array of {_type(spec['items'])}" if k == "array" and "items" in spec else k for k in kinds]
    return " or ".join(shown)


def render() -> str:
    schema = json.loads(SCHEMA.read_text())
    lines = [HEAD]
    for name, title in SECTIONS:
        spec = schema["$defs"][name]
        lines += [f'<a id="{name.replace("_", "-")}"></a>', "", f"## {title}", ""]
        if spec.get("description"):
            lines += [spec["description"], ""]
        lines += ["| field | type | always | what it is |", "|---|---|---|---|"]
        required = set(spec.get("required", ()))
        for field, sub in spec["properties"].items():
            about = " ".join(sub.get("description", "").split()).replace("|", "\\|")
            lines.append(f"| `{field}` | {_type(sub)} | {'yes' if field in required else ''} | {about} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return write_or_check(PAGE, render(), argv, source="schema", script="answer_reference.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
