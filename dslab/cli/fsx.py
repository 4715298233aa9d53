"""``dslab fsx``: FSx for Lustre's status, down, up, and follow-zone before a deploy that moves the lab."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Callable

from ..core.errors import ConfigError
from ..core.requests import FSX_ID_PARAMETER, FSX_STACK
from .common import REPO, add_command, aws_failure, lab_context, lab_outputs, lab_provisioning, print_json, region_of


def fsx_state(region: str, state_machine_arn: str, idle_hours: float, fsx) -> dict[str, Any]:
    """FSx as it is: stack, file system, age, cost per hour (its deployment type, throughput and capacity:
    provisioning.FsxConfig), the idle guard's deadline, and how far the S3 metadata import of the datasets has
    come (the same checks the workflow makes)."""
    import boto3

    from ..core.facts.prices import PriceTable
    from ..workflow.fsx_data import import_status
    from ..workflow.fsx_guard import idle_status
    hourly = fsx.hourly(PriceTable())
    cfn, sfn = boto3.client("cloudformation", region_name=region), boto3.client("stepfunctions", region_name=region)
    state = {**idle_status(cfn, sfn, FSX_STACK, state_machine_arn, idle_hours), "capacity_gib": fsx.capacity_gib,
             "deployment_type": fsx.deployment_type, "mbps_per_tib": fsx.mbps_per_tib, "label": fsx.label(),
             "usd_per_hour": round(hourly, 4)}
    if not state["up"]:
        return state
    state["cost_so_far_usd"] = round(hourly * state["age_hours"], 2)
    found = boto3.client("ssm", region_name=region).get_parameters(Names=[FSX_ID_PARAMETER]).get("Parameters", [])
    if found:
        state["file_system_id"] = found[0]["Value"]
        state["data"] = import_status(boto3.client("fsx", region_name=region), found[0]["Value"], ["/datasets"])
    return state


def cmd_fsx(args) -> int:
    from ..core.facts.prices import PriceTable
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    fsx = lab_provisioning().fsx          # what `fsx up` deploys: cdk.json's settings
    hourly = fsx.hourly(PriceTable())
    cdk = REPO / "node_modules" / ".bin" / "cdk"
    if args.action == "status":
        outputs = lab_outputs(args)
        idle_hours = float(outputs.get("FsxIdleHours", context.get("fsxIdleHours", 0)) or 0)
        state = fsx_state(region_of(args), outputs.get("StateMachineArn", ""), idle_hours,
                          lab_provisioning(outputs=outputs, where=args.outputs or "CloudFormation").fsx)
        if args.json:
            print_json(state)
            return 0
        if not state["up"]:
            print(f"FSx: DOWN (no {FSX_STACK} stack); `dslab fsx up` brings it back "
                  f"(${state['usd_per_hour']:.3f} per hour while up)")
            return 0
        print(f"FSx: UP ({state.get('file_system_id', '?')}, stack {state['stack_status']}), up {state['age_hours']:.1f} h: "
              f"{state['label']} at ${state['usd_per_hour']:.3f}/h (${state['usd_per_hour'] * 24:.2f}/day), "
              f"about ${state['cost_so_far_usd']:.2f} so far")
        if state["running_executions"]:
            print(f"in use: execution {', '.join(state['running_executions'])} is running")
        elif state["deadline"]:
            print(f"idle guard: deletes FSx at {state['deadline']} ({state['idle_hours']:g} h after the last activity, "
                  f"{state['last_activity']}) unless a workflow execution runs")
        else:
            print("idle guard: off (deploy with -c fsxIdleHours=N to turn it on); `dslab fsx down` when done")
        data = state.get("data")
        if data:
            print(f"datasets: {'ready' if data['ready'] else 'NOT READY'}: {data['reason']}")
            for task in data.get("imports", []):
                print(f"  S3 metadata import {task['task']}: {task['lifecycle']}, {task['done']:,} of {task['total']:,} objects")
        return 0
    if args.action == "follow-zone":
        return cmd_fsx_follow_zone(args)
    if args.action == "up":   # FSx up at a smaller size than it stands would be refused by FSx: say so first
        from .deploy_check import check
        check("dslab-fsx-up", "up", None, args.region)
    command = ([str(cdk), "destroy", FSX_STACK, "--exclusively", "--force"] if args.action == "down"
               else [str(cdk), "deploy", FSX_STACK, "--exclusively", "--require-approval", "never"])
    print(f"{'removing' if args.action == 'down' else 'creating'} FSx ({fsx.label()}, ${hourly:.3f}/hour while up): "
          f"{' '.join(command[1:])}")
    return subprocess.call(command, cwd=REPO)


def fsx_zone(ssm, fsx, ec2) -> str | None:
    """The zone ID FSx for Lustre is in (from its subnet), or None while the FSx stack is down."""
    try:
        file_system_id = ssm.get_parameter(Name=FSX_ID_PARAMETER)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return None
    try:
        found = fsx.describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    except fsx.exceptions.FileSystemNotFound:
        return None   # its stack is being deleted: nothing to move
    if not found:
        return None
    subnets = ec2.describe_subnets(SubnetIds=found[0]["SubnetIds"][:1])["Subnets"]
    return subnets[0].get("AvailabilityZoneId") if subnets else None


def follow_zone(current: str | None, target: str, take_down: Callable[[], int], say: Callable[[str], None]) -> int:
    """Before a deploy moves the lab to ``target``: FSx up in another zone goes down first.

    Core replaces the subnet when the zone changes, and EC2 refuses to delete a subnet that still holds a
    network interface ("has dependencies and cannot be deleted"): FSx's would keep the old subnet, and
    CloudFormation would leave it behind in the clean-up (the stack still ends UPDATE_COMPLETE). So FSx
    leaves first, through its stack; the deploy (FSX=up) brings it back in the new zone."""
    if current is None or current == target:
        return 0
    say(f"FSx for Lustre is up in {current} and the lab moves to {target}: taking FSx down first (its subnet is "
        f"replaced), through the {FSX_STACK} stack; FSX=up brings it back in {target}")
    return take_down()


def cmd_fsx_follow_zone(args) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError
    overrides = dict(item.split("=", 1) for item in (args.context or []) if "=" in item)
    local = Path.cwd() / "cdk.json"
    context = {**lab_context(local if local.exists() else REPO / "cdk.json"), **overrides}
    region = args.region or context.get("region") or region_of(args)
    target = context.get("azId")
    if not target:
        raise ConfigError("azId", "not set in cdk.json or -c azId=...", "a zone ID such as use1-az4")
    try:
        current = fsx_zone(boto3.client("ssm", region_name=region), boto3.client("fsx", region_name=region),
                           boto3.client("ec2", region_name=region))
    except ClientError as err:
        raise aws_failure(err, "could not read where FSx is") from None
    except BotoCoreError as err:   # no credentials, no network: the deploy itself needs them too
        raise ConfigError("AWS credentials", f"could not read where FSx is ({type(err).__name__}: {err})",
                          "credentials for the lab's account (the deploy needs them too)") from None
    cdk = REPO / "node_modules" / ".bin" / "cdk"
    context_args = [arg for key, value in overrides.items() for arg in ("-c", f"{key}={value}")]
    return follow_zone(current, target, lambda: subprocess.call(
        [str(cdk), "destroy", FSX_STACK, "--exclusively", "--force", *context_args], cwd=Path.cwd()), print)


def register(sub) -> None:
    p = add_command(sub, "fsx", cmd_fsx, "FSx for Lustre: status (age, cost per hour, the idle guard's deadline, S3 import "
                    "progress), down (delete its stack), up (deploy it again), follow-zone (before a deploy that moves the "
                    "lab to another zone: take FSx down first; `make deploy` runs it).", "dslab fsx status")
    p.add_argument("action", choices=["status", "down", "up", "follow-zone"])
    p.add_argument("-c", "--context", action="append", metavar="KEY=VALUE",
                   help="follow-zone: the deploy's settings on top of cdk.json's, as given to cdk (e.g. -c azId=use1-az6)")
    p.add_argument("--region")
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--json", action="store_true")
