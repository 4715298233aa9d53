"""The documentation site (mkdocs.yml, docs/): built strictly, so a broken link or anchor fails; the pages generated
from the code (the CLI reference, the model's constants) are what the code generates now; what the pages say the
CLI prints is what it prints."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import yaml

from dslab.core.facts.prices import PriceTable

from .conftest import REPO

# Not --quiet: mkdocs then counts no warnings, and --strict passes a broken link.
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*MKDOCS, "--config-file", str(config), "--site-dir", str(site)], capture_output=True,
                          text=True, cwd=config.parent, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)


def test_the_site_builds_strictly_with_every_page_in_its_nav(tmp_path):
    built = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert config["strict"] is True and config["validation"]["anchors"] == "warn"   # warnings fail under strict
    for page in ("index.html", "reference/cli/index.html", "reference/model-constants/index.html",
                 "local-lab/index.html", "costs/index.html"):
        assert (tmp_path / "site" / page).exists(), page


def test_a_broken_anchor_or_link_fails_the_build(tmp_path):
    """The project's validation settings, on two pages: one links to an anchor the other does not have."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[sizing](other.md#no-such-heading)\n")
    (docs / "other.md").write_text("# Other\n\n## A heading\n\n[gone](missing.md)\n")
    small = {key: config[key] for key in ("strict", "validation", "markdown_extensions")}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump({"site_name": "t", "docs_dir": "docs", **small}))
    built = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    said = built.stdout + built.stderr
    assert built.returncode != 0 and "no-such-heading" in said and "missing.md" in said, said


def test_the_cli_reference_is_what_the_parser_generates():
    reference = _script("cli_reference")
    assert reference.PAGE.read_text() == reference.render(), "run `python scripts/cli_reference.py` (make docs)"
    from dslab.cli import build_parser
    page = reference.PAGE.read_text()
    for words, parser, _ in reference.walk(build_parser()):
        assert f"## dslab {' '.join(words)}\n" in page
        for action in parser._actions:
            for option in ([] if action.dest == "help" else action.option_strings):
                assert f"`{option}`" in page


def test_the_model_constants_page_is_what_the_code_generates():
    constants = _script("model_constants")
    assert constants.PAGE.read_text() == constants.render(), "run `python scripts/model_constants.py` (make docs)"
    rows = dict((name, value) for name, value, _, _ in constants.constants("dslab.core.model.estimate"))
    from dslab.core.model import estimate  # the model's own figures, by name (fitted ones as the fit gives them)
    assert float(rows["FASTFILE_GET_LATENCY"]) == pytest.approx(estimate.FASTFILE_GET_LATENCY, rel=1e-3)
    assert "OTHER_FLOOR" in rows
    from dslab.core.answer.decision import INFRA_MARGIN
    assert f"| `INFRA_MARGIN` | `{INFRA_MARGIN:g}` |" in constants.PAGE.read_text()


def test_the_results_record_page_is_what_its_two_schemas_say():
    reference = _script("record_reference")
    assert reference.PAGE.read_text() == reference.render(), "run `python scripts/record_reference.py` (make docs)"
    page = reference.PAGE.read_text()
    for field in ("`job_name`", "`checkpoint_target`", "`metrics.checkpoint.stall_seconds`", "`ingestion`"):
        assert field in page
    assert "Where `checkpoint_target` is `express`: `storage` present" in page


def test_the_answer_page_is_what_its_schema_says_and_every_answer_satisfies_the_schema(capsys):
    """docs/reference/answer.md is generated from dslab/contracts/answer.schema.json; the schema holds what every
    command prints with --json (no field undocumented: each object of it is closed), for a data question (with and
    without a workload, with blocked sources, several deploys) and a checkpoint question."""
    import json

    import jsonschema

    from dslab.cli import main
    reference = _script("answer_reference")
    assert reference.PAGE.read_text() == reference.render(), "run `python scripts/answer_reference.py` (make docs)"
    schema = json.loads(reference.SCHEMA.read_text())
    dlio = REPO / "dslab" / "contracts" / "dlio"
    questions = [["recommend", "--files", "30607", "--bytes", "1.1GB"],
                 ["estimate", "--files", "16666667", "--bytes", "2TB", "--instance", "ml.p4d.24xlarge", "--count", "8",
                  "--epochs", "10"],
                 ["size", "--files", "1530350", "--bytes", "54GB", "--instance", "ml.p4d.24xlarge", "--count", "16"],
                 ["recommend", "--files", "1000", "--bytes", "10TB", "--instance", "ml.g5.xlarge", "--random-access"],
                 ["size", "--workload", str(dlio / "unet3d_h100.yaml"), "--instance", "ml.p5.48xlarge", "--count", "2"],
                 ["recommend", "--workload", str(dlio / "llama3_70b.yaml"), "--instance", "ml.p5.48xlarge", "--count", "8"],
                 ["size", "--workload", str(dlio / "llama3_8b.yaml"), "--instance", "ml.p5.48xlarge", "--save-under", "30s"]]
    kinds = set()
    for argv in questions:
        assert main([*argv, "--json"]) in (0, 1), argv
        answer = json.loads(capsys.readouterr().out)
        jsonschema.validate(answer, schema)
        kinds.add("targets" in answer)
        if "sources" in answer:
            assert answer["sources"][0]["rank"] == 1 and answer["sources"][0]["source"] == answer["pick"]
    assert kinds == {True, False}
    # A field the schema does not name is refused: the page cannot fall behind the code.
    main(["recommend", "--files", "30607", "--bytes", "1.1GB", "--json"])
    answer = json.loads(capsys.readouterr().out)
    answer["sources"][0]["undocumented"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(answer, schema)


def test_the_estimated_tables_the_pages_quote_are_what_the_cli_answers_now():
    """Every estimated table of the pages (the post's four cells, the sizing tables, the workload table, ...) sits
    between markers that scripts/estimate_tables.py rewrites from the CLI's own --json answers: a figure the code no
    longer gives fails here, naming the script that rewrites it."""
    tables = _script("estimate_tables")
    for page in tables.pages():
        text = page.read_text()
        assert set(tables.BLOCK.findall(text)) >= {name for name, (where, _) in tables.TABLES.items()
                                                    if REPO / where == page}, page
        assert tables.render(page) == text, f"{page.relative_to(REPO)}: run `python scripts/estimate_tables.py` (make docs)"


def test_the_price_footer_the_pages_show_is_the_one_every_answer_prints():
    assert f"```text\n{PriceTable().footer()}\n```" in (REPO / "docs" / "costs.md").read_text()
