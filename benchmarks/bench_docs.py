"""Documentation benchmark (`make bench-docs`): prints figures, asserts nothing.

1. the README's size (lines, words, bytes, lines over 300 characters) and the site's written pages';
2. `mkdocs build --strict` of the site, wall time over three builds (the first pays Python's imports);
3. a lab report opened in headless Chromium (scripts/report-page.mjs: start, load, the checks, one screenshot),
   wall time over three opens.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def size(path: Path) -> dict:
    text = path.read_text()
    return {"lines": len(text.splitlines()), "words": len(text.split()), "bytes": len(text.encode()),
            "long_lines": sum(1 for line in text.splitlines() if len(line) > 300)}


def timed(command: list[str], runs: int = 3, **kwargs) -> list[float]:
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, **kwargs)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> int:
    from dslab.report import write_report
    print(f"measured {datetime.date.today()} on {os.cpu_count()} cores")
    readme = size(REPO / "README.md")
    print(f"README.md: {readme['lines']:,} lines, {readme['words']:,} words, {readme['bytes'] / 1024:.0f} KB, "
          f"{readme['long_lines']} lines over 300 characters")
    pages = [p for p in (REPO / "docs").rglob("*.md") if "reference" not in p.parts and p.name != "README-draft.md"]
    words = sum(size(p)["words"] for p in pages)
    print(f"docs/: {len(pages)} written pages, {words:,} words; generated: "
          + ", ".join(f"{p.relative_to(REPO)} ({size(p)['lines']:,} lines)" for p in sorted((REPO / "docs" / "reference").glob("*.md"))))
    with tempfile.TemporaryDirectory() as folder:
        build = timed([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", f"{folder}/site"], cwd=REPO,
                      env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        print(f"mkdocs build --strict: {statistics.median(build):.2f} s median of {len(build)} "
              f"({', '.join(f'{s:.2f}' for s in build)})")
        paths = write_report(json.loads((REPO / "tests" / "data" / "lab-results.json").read_text()), Path(folder) / "r")
        command = ["node", str(REPO / "scripts" / "report-page.mjs"), str(paths["report.html"]),
                   "--screenshot", f"{folder}/shot.png"]
        opened = timed(command, cwd=REPO)
        print(f"the report in headless Chromium (start, load, checks, screenshot): {statistics.median(opened):.2f} s "
              f"median of {len(opened)} ({', '.join(f'{s:.2f}' for s in opened)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
