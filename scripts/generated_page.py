"""Write a generated documentation page, or check it (`--check`): what scripts/cli_reference.py,
scripts/model_constants.py and scripts/record_reference.py share. tests/test_docs.py compares each page with its
script's render() directly."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_or_check(page: Path, text: str, argv: list[str], *, source: str, script: str) -> int:
    """With ``--check`` in ``argv``: exit status 1, naming ``script``, when ``page`` differs from ``text`` (generated
    from ``source``); otherwise write it."""
    if "--check" in argv:
        if not page.exists() or page.read_text() != text:
            print(f"{page.relative_to(REPO)} differs from the {source}: run `python scripts/{script}`", file=sys.stderr)
            return 1
        return 0
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    print(f"wrote {page.relative_to(REPO)}")
    return 0
