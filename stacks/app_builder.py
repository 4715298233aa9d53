"""Wires the lab's stacks into an App. Shared by app.py and the tests (which pass cdk.json's context)."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from .config import CORE_STACK, FSX_STACK, WORKFLOW_STACK, LabConfig
from .core_stack import CoreStack
from .fsx_stack import FsxStack
from .workflow_stack import WorkflowStack


def build_app(app: cdk.App, repo_root: Path, account: str | None = None, nag: bool = True) -> cdk.App:
    config = LabConfig.from_node(app.node, account=account)
    env = cdk.Environment(account=account, region=config.region)
    core = CoreStack(app, CORE_STACK, config=config, repo_root=repo_root, env=env)
    fsx = FsxStack(app, FSX_STACK, config=config, core=core, env=env)
    workflow = WorkflowStack(app, WORKFLOW_STACK, config=config, core=core, repo_root=repo_root, env=env)
    # Order only, no reference: `cdk deploy DataSourceLab` brings FSx up first, and deleting the
    # FSx stack is never blocked by an export the workflow imports.
    workflow.add_stack_dependency(fsx, "The workflow runs FSx jobs; it finds the file system through SSM at run time")
    for stack in (core, fsx, workflow):
        cdk.Tags.of(stack).add("project", "DataSourceLab")
    if nag:
        # cdk-nag 3.x is a policy-validation plugin: findings fail synthesis unless acknowledged.
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(verbose=True))
    return app
