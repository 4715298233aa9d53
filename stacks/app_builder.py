"""Wires the lab's stacks into an App. Shared by app.py and the tests (which pass cdk.json's context)."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from .checkov import suppress_checkov
from .config import CORE_STACK, FSX_STACK, WORKFLOW_STACK, LabConfig
from .core_stack import CoreStack
from .fsx_stack import FsxStack
from .workflow_stack import WorkflowStack


def build_app(app: cdk.App, repo_root: Path, account: str | None = None, nag: bool = True) -> cdk.App:
    config = LabConfig.from_node(app.node, account=account)
    env = cdk.Environment(account=account, region=config.region)
    core = CoreStack(app, CORE_STACK, config=config, repo_root=repo_root, env=env)
    fsx = FsxStack(app, FSX_STACK, config=config, env=env)
    workflow = WorkflowStack(app, WORKFLOW_STACK, config=config, core=core, repo_root=repo_root, env=env)
    # Order, not references: the other stacks read Core's values from SSM at deploy time (no export
    # can then block a Core change), so Core must be deployed first.
    fsx.add_stack_dependency(core, "FSx reads Core's network from its SSM handoff")
    workflow.add_stack_dependency(core, "the workflow reads Core's role, network and file systems from its SSM handoff")
    # No reference either way: the workflow finds FSx through SSM at run time, so deleting the FSx
    # stack is never blocked. Whether deploying the workflow deploys FSx is explicit (-c fsx=up|keep):
    # an update never silently recreates a torn-down file system that bills by the hour.
    if config.fsx_deploy == "up":
        workflow.add_stack_dependency(fsx, "-c fsx=up: deploying the workflow deploys FSx for Lustre too")
    for stack in (core, fsx, workflow):
        cdk.Tags.of(stack).add("project", "DataSourceLab")
    suppress_checkov(core, fsx, workflow)  # each checkov finding acknowledged with its reason (stacks/checkov.py)
    if nag:
        # cdk-nag 3.x is a policy-validation plugin: findings fail synthesis unless acknowledged.
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(verbose=True))
    return app
