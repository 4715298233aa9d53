"""`make setup`'s installer (scripts/install-requirements.sh): uv where it installs what pip would, pip where
the machine's pip configuration sends it elsewhere (a mirror uv would not read) or uv fails. Run against a
recording `python` and `uv`, so nothing is downloaded."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPT = REPO / "scripts" / "install-requirements.sh"

# A venv whose python answers `-m pip config list` with $PIP_CONFIG_LIST, installs uv, records every call.
FAKE_PYTHON = """#!/usr/bin/env bash
echo "python $*" >> "$CALLS"
if [[ "$*" == "-m pip config list" ]]; then printf '%s' "$PIP_CONFIG_LIST"; exit 0; fi
if [[ "$*" == *" uv==0.13.9" ]]; then cp "$UV_STAND_IN" "$(dirname "$0")/uv"; fi
exit 0
"""
FAKE_UV = """#!/usr/bin/env bash
echo "uv $*" >> "$CALLS"
exit "${UV_EXIT:-0}"
"""


def install(tmp_path: Path, config: str, uv_exit: int = 0) -> list[str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    uv = tmp_path / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "CALLS": str(calls), "PIP_CONFIG_LIST": config, "UV_STAND_IN": str(uv), "UV_EXIT": str(uv_exit)}
    done = subprocess.run([str(SCRIPT), str(venv), "-r", "requirements-dev.txt"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return [line.replace(str(venv), "VENV") for line in calls.read_text().splitlines() if "config list" not in line]


PIP = "python -m pip install -q --no-compile --disable-pip-version-check"


def test_uv_installs_with_the_constraint_files_pip_is_configured_with(tmp_path):
    config = ("global.constraint='/etc/pip/constraints.txt'\nglobal.extra-index-url='file:///opt/pypi/simple'\n"
              ":env:.constraint='/tmp/a.txt /tmp/b.txt'\n")
    assert install(tmp_path, config) == [
        f"{PIP} uv==0.13.9",
        "uv pip install -q --python VENV/bin/python -c /etc/pip/constraints.txt -c /tmp/a.txt -c /tmp/b.txt "
        "-r requirements-dev.txt"]


@pytest.mark.parametrize("setting", ["global.index-url='https://mirror.example/simple'",
                                     ":env:.index-url='https://mirror.example/simple'", "install.no-index='true'"])
def test_pip_installs_where_it_is_configured_with_an_index_of_its_own(tmp_path, setting):
    assert install(tmp_path, f"global.extra-index-url='x'\n{setting}\n") == [f"{PIP} -r requirements-dev.txt"]


def test_pip_installs_where_uv_fails(tmp_path):
    assert install(tmp_path, "", uv_exit=2) == [
        f"{PIP} uv==0.13.9", "uv pip install -q --python VENV/bin/python -r requirements-dev.txt",
        f"{PIP} -r requirements-dev.txt"]


def test_the_makefile_installs_every_environment_through_it():
    makefile = (REPO / "Makefile").read_text()
    assert "INSTALL = scripts/install-requirements.sh" in makefile
    assert makefile.count("$(call INSTALL,") == 2   # .venv and .venv-scan


@pytest.mark.parametrize("args", [[], ["/nonexistent-venv", "-r", "requirements.txt"]])
def test_a_missing_environment_is_a_usage_error_not_a_traceback(args):
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "usage:" in done.stderr and "python3 -m venv" in done.stderr, done.stderr


def test_make_lab_sets_up_only_what_the_lab_needs():
    """checkov's .venv-scan and Chromium serve `make test` alone: `make lab` (and the benchmarks that run the lab) set
    up the lab's environment, the CDK CLI and FUSE. `make -n -B` prints every recipe a set-up would run, running none."""
    def recipes(target: str) -> str:
        done = subprocess.run(["make", "-n", "-B", "--no-print-directory", target], cwd=REPO, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout
    lab = recipes("lab-setup")
    assert ".venv/.installed" in lab and "npm ci" in lab and "ensure-system-packages.sh lab" in lab
    assert ".venv-scan" not in lab and "requirements-scan" not in lab
    full = recipes("setup")
    assert "requirements-scan.txt" in full and "ensure-system-packages.sh test" in full
    makefile = (REPO / "Makefile").read_text()
    for target in ("lab", "bench-lab", "bench-scaling"):
        recipe = makefile.split(f"\n{target}:\n", 1)[1].split("\n\n", 1)[0]
        assert "$(LAB_SETUP)" in recipe and "$(SETUP)" not in recipe, target
    script = (REPO / "scripts" / "ensure-system-packages.sh").read_text()
    assert 'if [ "$want" = test ] && [ ! -x /usr/bin/chromium ]' in script   # Chromium for `make test` only


def test_pip_install_dot_installs_the_cli_alone_and_the_lab_as_an_extra():
    """`pip install .` gives the dslab CLI what it needs to answer and to run on AWS (its pins are requirements.txt's);
    `.[lab]` adds the offline lab's; together they are requirements.txt, no more, no less. The package carries what
    the CLI reads at run time (the contracts, the DLIO files, the stand-in's outputs, the training script's layouts)."""
    import tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = {line.split("#")[0].strip() for line in (REPO / "requirements.txt").read_text().splitlines()
            if line.split("#")[0].strip()}
    cli, lab = set(project["dependencies"]), set(project["optional-dependencies"]["lab"])
    assert cli | lab == pins and not cli & lab
    assert not {p for p in cli if p.split("==")[0].split("[")[0] in ("moto", "aws-cdk-lib", "constructs", "cdk-nag")}
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "dslab_train*" in find["packages"]["find"]["include"] and "training" in find["packages"]["find"]["where"]
    assert "*.json" in find["package-data"]["dslab.local"]


def test_dslab_local_without_the_lab_extras_says_how_to_get_them(monkeypatch, capsys):
    import importlib.util

    from dslab.cli import main
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "moto" else real(name, *a))
    assert main(["local", "--out", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install '.[lab]'" in err and "make lab" in err
