"""``dslab deploy-check``: before `make deploy` (and deploy-again, fsx-up), refuse what FSx or EFS would refuse.

The deployed lab is read from CloudFormation: each stack's template (GetTemplate) holds the very properties
CloudFormation compares the new template's with, and calls UpdateFileSystem only where they differ (the stack
outputs name neither FSx's Lustre version nor its import path, which decide whether FSx is replaced; and labs
deployed before an output existed lack it). When EFS's throughput last changed is read from the Core stack's events:
DescribeFileSystems gives no such time, the stack's LastUpdatedTime moves with any change of any of its resources,
and CloudTrail's event history comes minutes late (a deploy just before would be missed) and needs its own
permission; the events are there at once, and each carries the properties CloudFormation applied. The lab's EFS is
changed by CloudFormation only (what it is changed by elsewhere, the events do not show).

The rules themselves, and what each refusal says, are in dslab/core/deploy_guard.py.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.deploy_guard import (EFS_THROUGHPUT_WAIT, EfsThroughput, LustreShape, efs_throughput_refusal,
                                 fsx_increase_refusal, fsx_shrink_refusal, fsx_throughput_refusal,
                                 last_throughput_change)
from ..core.errors import ConfigError
from ..core.requests import CORE_STACK, FSX_STACK
from ..core.stack_check import refuse_unpriced
from .common import REPO, UserError, add_command, explain_aws, lab_context

# Stack statuses that hold no deployed resources: a failed creation (the CDK CLI deletes it and creates it again),
# a stack waiting for its first change set, a deleted one.
NOT_BUILT = {"ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "CREATE_FAILED", "REVIEW_IN_PROGRESS", "DELETE_COMPLETE",
             "DELETE_IN_PROGRESS", "DELETE_FAILED"}
# What deploys what: `make deploy`/`deploy-again` deploy Core and the workflow (and FSx with FSX=up); `make fsx-up` and
# `dslab fsx up` the FSx stack alone. Each with the commands that take FSx down and bring it up again.
TARGETS = {"deploy": ("make deploy FSX=down", "make deploy FSX=up"),
           "deploy-again": ("make deploy-again FSX=down", "make deploy-again FSX=up"),
           "fsx-up": ("make fsx-down", "make fsx-up"),
           "dslab-fsx-up": ("dslab fsx down", "dslab fsx up")}


@dataclass
class DeployedLab:
    """What CloudFormation has deployed of FSx and EFS (None: that part is not deployed)."""
    zone_id: str | None = None
    fsx: LustreShape | None = None
    fsx_id: str = "?"
    fsx_actions: list[dict[str, Any]] | None = None   # DescribeFileSystems' AdministrativeActions (None: not read)
    efs: EfsThroughput | None = None
    efs_id: str = "?"
    efs_last_change: dt.datetime | None = None


def _stack(cfn, name: str) -> dict[str, Any] | None:
    """DescribeStacks' stack, or None where it does not exist or holds nothing yet. DescribeStacks documents no
    errors of its own: a missing stack is the ValidationError "Stack with id X does not exist"."""
    try:
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
    except cfn.exceptions.ClientError as err:
        if "does not exist" in str(err):
            return None
        raise
    return None if stack["StackStatus"] in NOT_BUILT else stack


def _resource(cfn, stack: str, kind: str) -> tuple[str, dict[str, Any]] | None:
    """The (logical ID, properties) of the stack's one resource of ``kind``, as its deployed template has it."""
    body = cfn.get_template(StackName=stack, TemplateStage="Original")["TemplateBody"]
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None            # not the lab's own (CDK writes JSON): nothing to compare
    found = [(lid, r.get("Properties") or {}) for lid, r in (body.get("Resources") or {}).items() if r.get("Type") == kind]
    return found[0] if len(found) == 1 else None


def _efs_events(cfn, stack: str, logical_id: str, now: dt.datetime) -> list[dict[str, Any]]:
    """The stack's events (newest first) as far back as the check needs: past the 24 hours, to the last completed
    operation on the file system before them (its throughput then)."""
    window_start = now - EFS_THROUGHPUT_WAIT
    events: list[dict[str, Any]] = []
    for page in cfn.get_paginator("describe_stack_events").paginate(StackName=stack):
        events.extend(page["StackEvents"])
        if any(e.get("LogicalResourceId") == logical_id and e["ResourceStatus"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE")
               and _utc(e["Timestamp"]) < window_start for e in page["StackEvents"]):
            break
    return events


def _utc(when: dt.datetime) -> dt.datetime:
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def read_deployed(cfn, now: dt.datetime, *, fsx: bool = True, efs: bool = True) -> DeployedLab:
    lab = DeployedLab()
    core = _stack(cfn, CORE_STACK)
    if core is not None:
        outputs = {o["OutputKey"]: o["OutputValue"] for o in core.get("Outputs", [])}
        lab.zone_id, lab.efs_id = outputs.get("AvailabilityZoneId"), outputs.get("EfsFileSystemId", "?")
        found = _resource(cfn, CORE_STACK, "AWS::EFS::FileSystem") if efs else None
        if found is not None:
            logical_id, props = found
            lab.efs = EfsThroughput.from_properties(props)
            lab.efs_last_change = last_throughput_change(_efs_events(cfn, CORE_STACK, logical_id, now), logical_id)
    fsx_stack = _stack(cfn, FSX_STACK) if fsx else None
    if fsx_stack is not None:
        found = _resource(cfn, FSX_STACK, "AWS::FSx::FileSystem")
        lab.fsx = LustreShape.from_properties(found[1]) if found else None
        lab.fsx_id = {o["OutputKey"]: o["OutputValue"] for o in fsx_stack.get("Outputs", [])}.get("FsxFileSystemId", "?")
    return lab


def fsx_actions(fsx_client, file_system: str) -> list[dict[str, Any]]:
    """The file system's administrative actions (DescribeFileSystems): its capacity increases and the storage
    optimization after each, which decide when it may grow again, and its throughput-tier changes, which decide when
    its tier may change again. A file system gone since: none."""
    try:
        found = fsx_client.describe_file_systems(FileSystemIds=[file_system])["FileSystems"]
    except fsx_client.exceptions.FileSystemNotFound:
        return []
    return list((found[0] if found else {}).get("AdministrativeActions") or [])


def deploy_settings(words: list[str] | None) -> dict[str, Any]:
    """cdk.json's context (the project folder's, as the CDK CLI reads it) under the deploy's -c key=value words."""
    local = Path.cwd() / "cdk.json"
    overrides = dict(word.split("=", 1) for word in (words or []) if "=" in word)
    return {**lab_context(local if local.exists() else REPO / "cdk.json"), **overrides}


def refusals(target: str, fsx_choice: str, config, lab: DeployedLab, now: dt.datetime,
             words: list[str] | None = None) -> list[tuple[str, str]]:
    """(setting, why) for each refused change this deploy would make to the deployed ``lab``. ``config``: the
    deploy's LabConfig (stacks/config.py)."""
    from ..core.facts.storage import FSX_LINK_VERSIONS
    found: list[tuple[str, str]] = []
    stack_only = target in ("fsx-up", "dslab-fsx-up")
    if stack_only or fsx_choice == "up":   # FSX=keep and FSX=down deploy no FSx (it is no dependency then)
        wanted = LustreShape(config.fsx_deployment_type, config.fsx_capacity_gib, FSX_LINK_VERSIONS[config.fsx_link],
                             config.fsx_link == "import-path", config.fsx_mbps_per_tib)
        context = f' CONTEXT="{" ".join(words)}"' if words else ""
        take_down, bring_up = TARGETS[target]
        # A deploy that moves the lab's zone takes FSx down first (`dslab fsx follow-zone`): it comes back anew.
        moves_zone = not stack_only and lab.zone_id not in (None, config.az_id)
        # The deploys again with the same words (`make fsx-down` destroys only: it needs none).
        why = fsx_shrink_refusal(lab.fsx, wanted, moves_zone=moves_zone,
                                 take_down=take_down + ("" if stack_only else context),
                                 bring_up=bring_up + ("" if target == "dslab-fsx-up" else context))
        why = why or fsx_increase_refusal(lab.fsx_id, lab.fsx, wanted, lab.fsx_actions or [], now, moves_zone=moves_zone)
        if why:
            found.append(("fsxCapacity", why))
        # Persistent 2's tier: changed in place, but not again within 6 hours or while the last change optimizes.
        why = fsx_throughput_refusal(lab.fsx_id, lab.fsx, wanted, lab.fsx_actions or [], now, moves_zone=moves_zone)
        if why:
            found.append(("fsxThroughputPerTiB", why))
    if not stack_only:
        wanted_efs = EfsThroughput(config.efs_performance, config.efs_throughput,
                                   float(config.efs_provisioned_mibps) if config.efs_provisioned_mibps else None)
        why = efs_throughput_refusal(lab.efs_id, lab.efs, wanted_efs, lab.efs_last_change, now)
        if why:
            found.append(("efsThroughput" if wanted_efs.mode != lab.efs.mode else "efsProvisionedMibps", why))
    return found


def check(target: str, fsx_choice: str, words: list[str] | None, region: str | None = None,
          now: dt.datetime | None = None, cfn=None, fsx_client=None) -> None:
    """Raise ConfigError naming each refused setting; return where the deploy may go (nothing deployed, no
    credentials: the deploy itself will say)."""
    from stacks.config import LabConfig, LabConfigError
    settings = deploy_settings(words)
    try:
        config = LabConfig.from_mapping(settings.get)
    except LabConfigError as err:   # what synthesis would refuse, said before anything runs
        raise UserError(str(err)) from None
    # What the model cannot price (a setting its reading refuses, a price row the table lacks) is not deployed either:
    # every answer would price another lab than the one standing. Named by its context key (exit 2).
    refuse_unpriced(settings.get)
    now = now or dt.datetime.now(dt.timezone.utc)
    if cfn is None:
        import boto3
        cfn = boto3.client("cloudformation", region_name=region or config.region)
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    stack_only = target in ("fsx-up", "dslab-fsx-up")
    try:
        lab = read_deployed(cfn, now, fsx=stack_only or fsx_choice == "up", efs=not stack_only)
    except NoCredentialsError:
        return                                   # no credentials: nothing can be read, nor deployed
    except (ClientError, BotoCoreError) as err:  # AccessDenied, throttling, no network: say so, leave it to the deploy
        print(f"dslab deploy-check: could not read the deployed lab ({explain_aws(err)}); FSx's capacity and EFS's "
              "throughput were not compared with it", file=sys.stderr)
        return
    if lab.fsx_id != "?":
        try:
            if fsx_client is None:
                import boto3
                fsx_client = boto3.client("fsx", region_name=region or config.region)
            lab.fsx_actions = fsx_actions(fsx_client, lab.fsx_id)
        except (ClientError, BotoCoreError) as err:   # said; the shrink and EFS checks stand, the deploy goes on
            print(f"dslab deploy-check: could not read FSx {lab.fsx_id}'s administrative actions ({explain_aws(err)}); "
                  "whether it grew in the last 6 hours was not checked", file=sys.stderr)
    found = refusals(target, fsx_choice, config, lab, now, words)
    if found:
        raise ConfigError(" and ".join(setting for setting, _ in found), "; and ".join(why for _, why in found))


def cmd_deploy_check(args) -> int:
    if args.target in ("deploy", "deploy-again") and args.fsx is None:
        raise ConfigError("--fsx", f"{args.target} needs what FSx should be", ["up", "keep", "down"])
    check(args.target, args.fsx or "up", args.context, args.region)
    return 0


def register(sub) -> None:
    p = add_command(sub, "deploy-check", cmd_deploy_check,
                    "Before a deploy (the Makefile runs it): refuse, naming the way through, what FSx or EFS would refuse "
                    "and CloudFormation roll back: FSx for Lustre shrunk in place (FSx=down, then up) or grown again "
                    "within 6 hours of its last increase (or while its storage optimization runs), Persistent 2's "
                    "throughput tier changed again within 6 hours of its last change (or while that change optimizes), "
                    "EFS's throughput mode changed or its provisioned throughput lowered within 24 hours of its last "
                    "change (the time after which it may); and a setting the model cannot price, named by its key.",
                    "dslab deploy-check deploy --fsx up -c fsxCapacity=2400")
    p.add_argument("target", choices=sorted(TARGETS), help="what deploys: make deploy, deploy-again, fsx-up, dslab fsx up")
    p.add_argument("--fsx", choices=["up", "keep", "down"], help="deploy, deploy-again: the FSX= of the make command")
    p.add_argument("-c", "--context", action="append", metavar="KEY=VALUE",
                   help="the deploy's settings on top of cdk.json's, as given to cdk (e.g. -c fsxCapacity=2400)")
    p.add_argument("--region")
