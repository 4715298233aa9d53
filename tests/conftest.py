"""Shared fixtures. Tests never reach AWS: fake credentials, and one synthesis per test session."""

from __future__ import annotations

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


def cdk_context(**overrides) -> dict:
    """cdk.json's context (a plain App ignores cdk.json, so tests would see another template)."""
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    context.update(overrides)
    return context


class SynthesizedLab:
    def __init__(self, outdir: Path, **context):
        import aws_cdk as cdk
        from aws_cdk.assertions import Template

        from stacks.app_builder import build_app
        from stacks.config import CORE_STACK, FSX_STACK, WORKFLOW_STACK

        self.app = build_app(cdk.App(context=cdk_context(**context), outdir=str(outdir)), REPO)
        self.assembly = self.app.synth()
        self.outdir = outdir
        stacks = {s.stack_name: s for s in self.app.node.children if isinstance(s, cdk.Stack)}
        self.core = Template.from_stack(stacks[CORE_STACK])
        self.fsx = Template.from_stack(stacks[FSX_STACK])
        self.workflow = Template.from_stack(stacks[WORKFLOW_STACK])
        self.stacks = stacks

    def template_files(self) -> list[Path]:
        return sorted(self.outdir.glob("*.template.json"))

    def raw(self, stack_name: str) -> dict:
        return json.loads((self.outdir / f"{stack_name}.template.json").read_text())


@pytest.fixture(scope="session")
def lab_cache(tmp_path_factory) -> Path:
    """One local-lab cache (synthesized templates, generated datasets) for every local-lab test."""
    return tmp_path_factory.mktemp("lab-cache")


@pytest.fixture(scope="session")
def lab(tmp_path_factory) -> SynthesizedLab:
    return SynthesizedLab(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture
def emulated(lab, tmp_path):
    """Makes an EmulatedLab that runs this session's synthesized workflow, Waits compressed 1000-fold."""
    from dslab.emulator.lab import EmulatedLab

    def make(executor, **kwargs) -> EmulatedLab:
        kwargs.setdefault("time_scale", 0.001)
        return EmulatedLab(lab.outdir, executor=executor, efs_root=tmp_path / "efs", **kwargs)
    return make
