"""The README's picture: the first screen of a lab report, as headless Chromium shows it (scripts/report-page.mjs),
into docs/images/report.png. The report is `make lab`'s (lab-out/results.json) when it has run here, otherwise the lab
report kept in tests/data/lab-results.json (a `make lab` run's results); either is rendered afresh by the report code.
`make docs` runs it: `python scripts/report_picture.py [RESULTS.json]`."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PICTURE = REPO / "docs" / "images" / "report.png"
KEPT = REPO / "tests" / "data" / "lab-results.json"


def main(argv: list[str]) -> int:
    from dslab.report import write_report
    results = Path(argv[0]) if argv else next(p for p in (REPO / "lab-out" / "results.json", KEPT) if p.exists())
    with tempfile.TemporaryDirectory() as folder:
        paths = write_report(json.loads(results.read_text()), Path(folder))
        PICTURE.parent.mkdir(parents=True, exist_ok=True)
        seen = subprocess.run(["node", str(REPO / "scripts" / "report-page.mjs"), str(paths["report.html"]),
                               "--screenshot", str(PICTURE)], capture_output=True, text=True, cwd=REPO)
    if seen.returncode:
        print(seen.stderr.strip(), file=sys.stderr)
        return seen.returncode
    page = json.loads(seen.stdout)
    print(f"wrote {PICTURE.relative_to(REPO)} ({PICTURE.stat().st_size // 1024} KB) from {results}: the first screen "
          f"shows {page['pick']['text'] if page['pick'] else 'no pick'}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
