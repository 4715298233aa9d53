"""The estimate model's constants and the instance table, each with the source its module gives it, written to
docs/reference/model-constants.md from the code itself (the constants, and the comments beside or above them), so
the page cannot drift from the model: `python scripts/model_constants.py` writes it (`make docs` runs it), `--check`
exits 1 when the committed page differs (tests/test_docs.py asserts the same)."""

from __future__ import annotations

import ast
import importlib
import re
import io
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [] if str(REPO / "scripts") in sys.path else [str(REPO / "scripts")]
from generated_page import write_or_check  # noqa: E402  (scripts/ is not a package)
PAGE = REPO / "docs" / "reference" / "model-constants.md"
# The modules the estimate, the pick and the sizing read their figures from, in the order a reader meets them.
MODULES = (
    ("dslab.core.model.estimate", "the single-job estimate"),
    ("dslab.core.facts.limits", "a question's defaults and bounds, and the AWS limits the workflow is built around"),
    ("dslab.core.facts.compute", "the compute: what one accelerator eats"),
    ("dslab.core.shape", "the dataset's shape"),
    ("dslab.core.model.volume", "the instance's storage"),
    ("dslab.core.facts.storage", "what each shared source serves (S3, S3 Express, FSx, EFS)"),
    ("dslab.core.answer.decision", "the pick and the set-up of each source"),
    ("dslab.core.answer.sizing", "the largest cluster a source feeds"),
    ("dslab.core.workloads.checkpoint", "a checkpoint's files and bytes by DLIO's formula, and MLPerf Storage's table beside it"),
    ("dslab.core.model.checkpoint_estimate", "where checkpoints go: each target's save, stall and restore"),
)
VALUE_CHARS = 90

HEAD = """# The model's constants

Every constant the estimate (`dslab/core/model/estimate.py`), the premise, the provisioning, the pick and the sizing rest
on, and the checkpoint estimate's limits, with the source its module gives beside or above it, then the instance table with each row's source. Generated
from the code by `scripts/model_constants.py` (`make docs`); `tests/test_docs.py` fails when this page and the code
differ. Prices are a table of their own: `dslab prices` lists each row with its date and source
([costs](../costs.md)). How the constants combine: [the estimate model](../estimate.md).
"""


def _numeric(value) -> bool:
    """A number, or a tuple/dict whose values hold at least one number (and nothing but numbers, text and such)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, (tuple, list)):
        return any(_numeric(v) for v in value) and all(isinstance(v, (int, float, str, tuple, dict)) for v in value)
    if isinstance(value, dict):
        return any(_numeric(v) for v in value.values())
    return False


def _show(value) -> str:
    if isinstance(value, float):
        return f"{int(value):,}" if value.is_integer() else f"{value:,.6g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    return str(value)


def _comments(source: str) -> dict[int, str]:
    """Line number -> the comment on it."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = token.string.lstrip("#").strip()
            found[token.start[0]] = re.sub(r"^-{2,}\s*(.*?)\s*-{2,}$", r"\1:", text)   # a section's ruled title
    return found


def constants(module_name: str) -> list[tuple[str, str, str, str]]:
    """(name, value as the code computes it, the expression when it is not a plain literal, its source) for every
    numeric module-level constant: the comment on its line(s), else the comment block right above it (which a run
    of constants under one comment shares)."""
    module = importlib.import_module(module_name)
    path = Path(module.__file__)
    source = path.read_text()
    lines = source.splitlines()
    comments = _comments(source)
    out = []
    block = ""
    previous_end = 0
    for node in ast.parse(source).body:
        targets = (node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign)
                   else [])
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        # The comment block above this statement, if any (only comment lines between it and the statement before).
        above = []
        line = node.lineno - 1
        while line > previous_end and line in comments and lines[line - 1].lstrip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        if above:
            block = " ".join(above)
        elif line > previous_end and not lines[line - 1].strip():
            block = ""   # a blank line ends what a block above covers
        previous_end = node.end_lineno
        for name in names:
            if not name.isupper() or name.startswith("_") or not _numeric(getattr(module, name, None)):
                continue
            if isinstance(node.value, (ast.DictComp, ast.ListComp, ast.SetComp)):
                continue   # a view of another table (estimate.INSTANCES of instances.py's): that table is listed
            inline = " ".join(comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments)
            expression = " ".join((ast.get_source_segment(source, node.value) or "").split())
            try:
                ast.literal_eval(node.value)
                expression = ""   # a literal: its value says it all
            except ValueError:
                pass
            out.append((name, _show(getattr(module, name)), expression, inline or block or "(no source given in the code)"))
    return out


def _cell(text: str, limit: int | None = None) -> str:
    text = " ".join(str(text).split())
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|").replace("<", "&lt;")


def render() -> str:
    lines = [HEAD]
    for name, what in MODULES:
        path = name.replace(".", "/") + ".py"
        lines += [f"## `{path}`", "", f"{what[0].upper()}{what[1:]}.", "",
                  "| constant | value | source (the code's comment) |", "|---|---|---|"]
        for constant, value, expression, source in constants(name):
            shown = f"`{_cell(value, VALUE_CHARS)}`" + (f" (`{_cell(expression, VALUE_CHARS)}`)" if expression else "")
            lines.append(f"| `{constant}` | {shown} | {_cell(source)} |")
        lines.append("")
    from dslab.core.facts.instances import INSTANCES
    lines += ["## The instance table (`dslab/core/facts/instances.py`)", "",
              "Sustained network is what a run of hours gets once an \"up to\" size's burst credits are spent (the sizing "
              "uses it); each row's sustained figure is checked against AWS's baseline bandwidth by "
              "`tests/test_cli_robustness.py`.", "",
              "| instance | vCPUs | accelerators | network Gbit/s (sustained) | NVMe GB | checked | source |",
              "|---|---|---|---|---|---|---|"]
    for i in INSTANCES.values():
        accelerators = f"{i.accelerators} x {i.accelerator}" if i.accelerators else "-"
        lines.append(f"| `{i.name}` | {i.vcpus} | {accelerators} | {i.network_gbps:g} ({i.network_baseline_gbps:g}) | "
                     f"{i.nvme_gb:,} | {i.checked} | {_cell(i.source)} |")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    return write_or_check(PAGE, render(), argv, source="code", script="model_constants.py")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
