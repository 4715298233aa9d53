"""Shared fixtures. Tests never reach AWS: fake credentials, and one synthesis per test session."""

from __future__ import annotations

import fcntl
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO))

for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                   "AWS_EC2_METADATA_DISABLED": "true",
                   "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}.items():
    os.environ[key] = value
os.environ.pop("AWS_PROFILE", None)
# matplotlib keeps its font cache under ~/.cache or ~/.config: the suite's own, removed when it ends (the suite leaves
# the user's home as it found it), for every process it starts too.
if "MPLCONFIGDIR" not in os.environ:
    import atexit
    import shutil
    import tempfile
    os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="dslab-mpl-")
    atexit.register(shutil.rmtree, os.environ["MPLCONFIGDIR"], True)


# How `make test`'s pytest-xdist workers share the work: whole modules, so that a module's fixtures
# (checkov's runs, the variant syntheses) are built once, not once per worker; the modules whose tests
# run training scripts and FUSE mounts together on one worker, one after another, so that no two local
# labs (each a stand-in server, s3fs mounts and job processes, checked for leftovers under the worker's
# own lab folder by test_local_lab.assert_clean) compete for the two cores. The longest units start
# first (`make test` keeps this order: --no-loadscope-reorder). Grouped here rather than with
# xdist_group marks: with pytest 9.2, xdist 3.8's loadgroup silently ignores them
# (pytest-dev/pytest-xdist#1386).
ONE_WORKER_MODULES = ("tests/test_local_lab.py", "tests/test_own_script.py", "tests/test_training.py", "tests/test_dlio.py",
                      "tests/test_spread_prefixes.py", "tests/test_multi_host.py",
                      "tests/test_checkpoint_targets.py", "tests/test_reactions_runner.py")
LONGEST_FIRST = ("tests/test_deploy_path.py", "tests/test_workflow_at_scale.py", "tests/test_scanners.py")


def _module(nodeid: str) -> str:
    return nodeid.split("::")[0]


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        module = _module(item.nodeid)
        if module in ONE_WORKER_MODULES:
            return 0
        return 1 + LONGEST_FIRST.index(module) if module in LONGEST_FIRST else 1 + len(LONGEST_FIRST)
    items.sort(key=rank)  # stable: each module keeps its own order


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        """A module is one unit of work; ONE_WORKER_MODULES are one unit together."""
        def _split_scope(self, nodeid: str) -> str:
            module = _module(nodeid)
            return "one-worker" if module in ONE_WORKER_MODULES else module

    return ByModule(config, log)


def documented_pages() -> dict[str, str]:
    """The README and every written page of the documentation site (docs/; its reference/ pages are generated from the
    code), by path: what tests that hold the documentation to the code read."""
    pages = [REPO / "README.md"] + sorted(p for p in (REPO / "docs").rglob("*.md") if "reference" not in p.parts)
    return {str(p.relative_to(REPO)): p.read_text() for p in pages}


def cdk_context(**overrides) -> dict:
    """cdk.json's context (a plain App ignores cdk.json, so tests would see another template)."""
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    context.update(overrides)
    return context


ACCOUNT = "123456789012"
# The zone names a region's lookup answers (the CLI caches them in cdk.context.json under this key).
ZONE_NAMES = {"us-east-1": [f"us-east-1{c}" for c in "abcdef"], "eu-west-1": [f"eu-west-1{c}" for c in "abc"],
              "us-west-2": [f"us-west-2{c}" for c in "abcd"], "ap-southeast-2": [f"ap-southeast-2{c}" for c in "abc"]}


def bound_context(account: str = ACCOUNT, **overrides) -> dict:
    """cdk.json's context plus the AZ lookup as `cdk deploy` caches it for a concrete account."""
    context = cdk_context(**overrides)
    region = context["region"]
    context[f"availability-zones:account={account}:region={region}"] = ZONE_NAMES[region]
    return context


class SynthesizedLab:
    """The lab synthesized as `cdk synth` does (cdk.json's context), environment-agnostic, or with
    ``account`` bound to a concrete account after the CLI's context lookups, as `cdk deploy` does
    with credentials."""

    def __init__(self, outdir: Path, *, account: str | None = None, synthesize: bool = True, **context):
        self.account = account
        self.outdir = outdir
        app_context = bound_context(account, **context) if account else cdk_context(**context)
        self.region = app_context["region"]
        if synthesize:
            import aws_cdk as cdk

            from stacks.app_builder import build_app
            self.app = build_app(cdk.App(context=app_context, outdir=str(outdir)), REPO, account=account)
            self.assembly = self.app.synth()
            self.stacks = {s.stack_name: s for s in self.app.node.children if isinstance(s, cdk.Stack)}
        self._templates()

    @classmethod
    def load(cls, outdir: Path, *, account: str | None = None) -> "SynthesizedLab":
        """The templates another test worker synthesized into ``outdir``."""
        return cls(outdir, account=account, synthesize=False)

    def _templates(self) -> None:
        from aws_cdk.assertions import Template

        from stacks.config import CORE_STACK, FSX_STACK, WORKFLOW_STACK
        self.core = Template.from_json(self.raw(CORE_STACK))
        self.fsx = Template.from_json(self.raw(FSX_STACK))
        self.workflow = Template.from_json(self.raw(WORKFLOW_STACK))

    def template_files(self) -> list[Path]:
        return sorted(self.outdir.glob("*.template.json"))

    def raw(self, stack_name: str) -> dict:
        return json.loads((self.outdir / f"{stack_name}.template.json").read_text())


@pytest.fixture(scope="session")
def lab_cache(tmp_path_factory) -> Path:
    """One local-lab cache (synthesized templates, generated datasets) for every local-lab test."""
    return tmp_path_factory.mktemp("lab-cache")


_SYNTHESIZED: dict[str, SynthesizedLab] = {}


def synthesized(form: str, tmp_path_factory) -> SynthesizedLab:
    """One synthesis per form per test session, shared by pytest-xdist's workers: the first to come
    synthesizes into the run's common temporary folder under a lock, the others read its templates."""
    if form not in _SYNTHESIZED:
        account = ACCOUNT if form == "bound" else None
        root = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            root = root.parent  # the folder all workers of this run share
        outdir, done = root / f"cdk.out-{form}", root / f"cdk.out-{form}.done"
        with open(root / f"cdk.out-{form}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if done.exists():
                _SYNTHESIZED[form] = SynthesizedLab.load(outdir, account=account)
            else:
                _SYNTHESIZED[form] = SynthesizedLab(outdir, account=account)
                done.touch()
    return _SYNTHESIZED[form]


@pytest.fixture(scope="session", params=["agnostic", "bound"])
def lab(request, tmp_path_factory) -> SynthesizedLab:
    """The synthesized lab in both forms every check runs on: environment-agnostic (`cdk synth`
    without credentials) and bound to an account with the lookups supplied (`cdk deploy` with them)."""
    return synthesized(request.param, tmp_path_factory)


@pytest.fixture(scope="session")
def bound_lab(tmp_path_factory) -> SynthesizedLab:
    return synthesized("bound", tmp_path_factory)


@pytest.fixture
def emulated(bound_lab, tmp_path):
    """Makes an EmulatedLab that deploys this session's synthesized lab (bound to the stand-in's account,
    as `cdk deploy` would synthesize it) and runs its workflow, Waits compressed 1000-fold."""
    from dslab.emulator.lab import EmulatedLab

    def make(executor, **kwargs) -> EmulatedLab:
        kwargs.setdefault("time_scale", 0.001)
        return EmulatedLab(bound_lab.outdir, executor=executor, efs_root=tmp_path / "efs", **kwargs)
    return make
