"""report.html as a reader opens it: a `make lab` run's results (tests/data/lab-results.json) written by the report
code, opened in headless Chromium (Debian's, driven by the pinned playwright-core through scripts/report-page.mjs):
every image decodes, the console stays clean, the answer's pick is in the first screen, nothing is wider than it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dslab.report import write_report

from .conftest import REPO

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists() or shutil.which("node") is None,
                                reason="Debian's chromium is needed (make setup installs it as root; .ci/run does)")


def open_in_browser(page: Path, *extra: str) -> dict:
    done = subprocess.run(["node", str(REPO / "scripts" / "report-page.mjs"), str(page), *extra],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_lab_report_reads_in_a_browser_answer_first(tmp_path):
    results = json.loads((REPO / "tests" / "data" / "lab-results.json").read_text())
    assert results["backend"] == "local" and len(results["records"]) == 14   # a whole `make lab` run
    paths = write_report(results, tmp_path)
    picks = re.findall(r"\*\*(Pick: [^*]+)\*\*", paths["report.md"].read_text())
    assert picks, "the report answers"
    seen = open_in_browser(paths["report.html"], "--screenshot", str(tmp_path / "first-screen.png"))

    assert seen["console_errors"] == []
    assert seen["images"], "the chart is on the page"
    for image in seen["images"]:
        assert image["decoded"] and image["natural_width"] > 0, image   # the embedded PNG decodes
        assert image["fits"] and image["shown_width"] <= seen["view"]["width"], image   # scaled to the width
    # The answer comes first, and its (first dataset's) pick shows without scrolling.
    assert seen["first_heading"] == "Answer"
    assert seen["pick"]["text"] == picks[0] and seen["pick"]["in_first_screen"], seen["pick"]
    # Wide tables scroll inside themselves: the page is never wider than the window; their text stays readable.
    assert seen["page_width"] <= seen["view"]["width"]
    assert seen["tables"] and all(t["right"] <= seen["view"]["width"] and t["font_px"] >= 12 for t in seen["tables"])
    shot = (tmp_path / "first-screen.png").read_bytes()
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(shot) < 300_000


def test_the_readmes_picture_is_a_first_screen_the_build_made():
    """docs/images/report.png comes from scripts/report_picture.py (`make docs`): a PNG of the browser's window,
    small enough to keep in the repository."""
    picture = REPO / "docs" / "images" / "report.png"
    data = picture.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 300_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 800)
    assert "docs/images/report.png" in (REPO / "Makefile").read_text() or "report_picture.py" in (REPO / "Makefile").read_text()
