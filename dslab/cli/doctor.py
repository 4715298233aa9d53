"""``dslab doctor``: with the user's credentials, does the lab's zone offer what the experiment needs? And, where
the lab is deployed, what its EFS file system holds and costs per month."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError
from .common import (REPO, NotDeployed, UserError, add_command, explain_aws, lab_context, outputs_from_cloudformation,
                     outputs_from_file, price_table, print_json, region_of)

DEFAULT_DOCTOR_EXPERIMENT = REPO / "experiments" / "all-modes-20-jobs.yaml"


def cmd_doctor(args) -> int:
    import boto3

    from ..aws.doctor import check_zone
    context = lab_context()
    region = args.region or context.get("region") or region_of(args)
    az_id = args.az_id or context.get("azId")
    if not az_id:
        raise ConfigError("azId", "not set: pass --az-id or set azId in cdk.json", "a zone ID such as use1-az4")
    instance_types = list(args.instance_type or [])
    needs_express = False
    if args.experiment or not instance_types:
        from ..core.experiment import expand
        from ..inputs.experiment_file import load_experiment
        # Which zones offer the types is asked of any type, priced or not.
        experiment = load_experiment(Path(args.experiment) if args.experiment else DEFAULT_DOCTOR_EXPERIMENT, priced=False)
        specs = expand(experiment)
        instance_types += [spec.trial.instance_type for spec in specs]
        needs_express = any(spec.trial.storage == "express" for spec in specs)
    from .common import lab_provisioning
    report = check_zone(boto3.client("ec2", region_name=region), boto3.client("fsx", region_name=region),
                        region=region, az_id=az_id, instance_types=instance_types, needs_express=needs_express,
                        logs=boto3.client("logs", region_name=region),
                        service_quotas=boto3.client("service-quotas", region_name=region),
                        lab_fsx=lab_provisioning(args).fsx)
    stored = efs_stored(args, region)
    if args.json:
        print_json({**report.to_dict(), "efs": stored})
    else:
        print("\n".join(report.lines()))
        print("\n".join(efs_lines(stored)))
    return 0 if report.ok else 1


def efs_stored(args, region: str) -> dict:
    """What the deployed lab's EFS holds and costs per month (nothing to say where no lab is deployed)."""
    import boto3

    from ..aws.efs import file_system_id, usage
    from botocore.exceptions import ClientError
    try:
        outputs = outputs_from_file(Path(args.outputs)) if args.outputs else outputs_from_cloudformation(region)
        return {"deployed": True, **usage(boto3.client("efs", region_name=region), file_system_id(outputs),
                                          price_table(args.prices))}
    except NotDeployed as err:   # no lab here: nothing stored
        return {"deployed": False, "detail": str(err)}
    except (UserError, ClientError) as err:   # not readable now: the zone's report stands, and this line says why
        return {"deployed": None, "detail": explain_aws(err) if isinstance(err, ClientError) else str(err)}


def efs_lines(stored: dict) -> list[str]:
    from ..aws.efs import usage_lines
    if stored["deployed"] is None:
        return [f"EFS: what it holds was not read: {stored['detail']}"]
    if not stored["deployed"]:
        return ["EFS: no lab deployed in this account and region, so nothing is stored"]
    return usage_lines(stored)


def register(sub) -> None:
    p = add_command(sub, "doctor", cmd_doctor, "With your credentials: does the lab's zone (azId) offer the experiment's "
                    "training instance types and FSx for Lustre, and which zone IDs of the region would? Exit 1 when it does not. "
                    "Where the lab is deployed: what its EFS holds per storage class and costs per month.",
                    "dslab doctor --experiment experiments/post-12-jobs.yaml --az-id use1-az4")
    p.add_argument("--experiment", help=f"experiment whose instance types to check (default {DEFAULT_DOCTOR_EXPERIMENT.relative_to(REPO)})")
    p.add_argument("--instance-type", action="append", help="a SageMaker training instance type (repeatable), e.g. ml.g5.xlarge")
    p.add_argument("--az-id", help="zone ID to check (default: azId in cdk.json)")
    p.add_argument("--region", help="region (default: region in cdk.json)")
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON of the lab whose EFS to report (else read from "
                   "CloudFormation, where a lab is deployed)")
    p.add_argument("--prices", help="YAML file overriding prices")
    p.add_argument("--json", action="store_true")
