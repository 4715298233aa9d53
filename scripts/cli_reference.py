"""The CLI reference page, docs/reference/cli.md, written from the parser itself (dslab.cli.build_parser()), so that it
cannot drift from the commands: `python scripts/cli_reference.py` writes it (`make docs` runs it), `--check` exits 1
when the committed page differs (tests/test_docs.py asserts the same)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [] if str(REPO / "scripts") in sys.path else [str(REPO / "scripts")]
from generated_page import write_or_check  # noqa: E402  (scripts/ is not a package)
PAGE = REPO / "docs" / "reference" / "cli.md"
WIDTH = 100   # usage lines are wrapped at a fixed width, whatever the terminal, so the page is the same everywhere

HEAD = """# CLI reference

Every `dslab` command, its options and an example, generated from the parser (`dslab.cli.build_parser()`) by
`scripts/cli_reference.py`; `make docs` writes it and `tests/test_docs.py` fails when it and the parser differ.
Each command also answers `-h` with the same text. Bad input exits 2 with one line naming the option and the fix.
"""


def walk(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """(words, parser, one-line help) for every command that runs (those with subcommands are walked, not listed)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                yield from _command(child, (*words, name), helps.get(name) or "")


def _command(parser, words, help_text):
    if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
        yield from walk(parser, words)
    else:
        yield words, parser, help_text


def anchor(words) -> str:
    return "dslab-" + "-".join(words)


def prose(text: str) -> str:
    """Markdown-safe text: outside `code spans`, characters Markdown would take for emphasis or HTML are escaped."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"([\\*_<>\[\]])", r"\\\1", parts[i])
    return "`".join(parts)


def cell(text: str) -> str:
    return prose(" ".join(text.split())).replace("|", "\\|")


def usage(parser: argparse.ArgumentParser) -> str:
    formatter = parser.formatter_class(prog=parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def value_of(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    metavar = action.metavar or (action.dest if not action.option_strings else action.dest.upper())
    return f"`{metavar}`" + (" ..." if action.nargs in ("*", "+", argparse.REMAINDER) else "")


def section(words, parser: argparse.ArgumentParser) -> list[str]:
    description = (parser.description or "").split("\n\nexample")
    text, example = description[0], description[1] if len(description) > 1 else ""
    lines = [f"## dslab {' '.join(words)}", "", prose(" ".join(text.split())), ""]
    examples = [line.strip() for line in example.splitlines()[1:] if line.strip()]
    if examples:
        lines += ["Example:", "", "```bash", *examples, "```", ""]
    lines += ["```text", usage(parser), "```", ""]
    formatter = parser.formatter_class(prog=parser.prog, width=WIDTH)
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        name = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
        help_text = formatter._expand_help(action) if action.help else ""
        default = action.default
        if action.option_strings and default not in (None, False, argparse.SUPPRESS, []) and action.nargs != 0:
            help_text += f" (default: `{default}`)" if f"default" not in help_text else ""
        rows.append(f"| {name} | {value_of(action)} | {cell(help_text)} |")
    if rows:
        lines += ["| argument | value | what it does |", "|---|---|---|", *rows, ""]
    return lines


def render() -> str:
    from dslab.cli import build_parser
    commands = list(walk(build_parser()))
    lines = [HEAD, "| command | what it does |", "|---|---|"]
    lines += [f"| [`dslab {' '.join(w)}`](#{anchor(w)}) | {cell(h.replace('%%', '%'))} |" for w, _, h in commands]
    lines.append("")
    for words, parser, _ in commands:
        lines += section(words, parser)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    return write_or_check(PAGE, render(), argv, source="parser", script="cli_reference.py")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
