"""``dslab efs empty``: delete the datasets staged in the lab's EFS file system (all, or one dataset's), through
the lab's DataSync emptying task (the operations: dslab/aws/efs.py). What EFS holds and costs: ``dslab doctor``."""

from __future__ import annotations

import argparse
import math
import sys

from ..aws import efs
from ..core.model import efs as efs_core
from ..core.errors import ConfigError
from ..core.requests import DATASETS_PREFIX
from .common import add_command, can_confirm, confirmed, explain_aws, lab_outputs, price_table, region_of


def _dataset_name(dataset: str | None) -> str | None:
    if dataset is not None and (not dataset.strip() or "/" in dataset or dataset.startswith(".") or "*" in dataset
                                or "|" in dataset):
        raise ConfigError("--dataset", f"{dataset!r} is not a dataset name", "a name as under datasets/, without "
                          "'/', '*' or '|', e.g. caltech-jpg-1x")
    return dataset


def cmd_efs_empty(args) -> int:
    import boto3
    from botocore.exceptions import ClientError

    dataset = _dataset_name(args.dataset)
    if not math.isfinite(args.poll) or not 0 < args.poll <= 3600:
        raise ConfigError("--poll", f"{args.poll:g} is not a number of seconds", "above 0 and at most 3600, e.g. --poll 10")
    can_confirm(args, "deleting from EFS needs a confirmation (the datasets themselves stay in S3)")
    outputs = lab_outputs(args)
    fs_id, task_arn = efs.file_system_id(outputs), efs.empty_task_arn(outputs)
    region = region_of(args)
    prices = price_table(args.prices)
    efs_client, datasync = boto3.client("efs", region_name=region), boto3.client("datasync", region_name=region)
    print("\n".join(efs.usage_lines(efs.usage(efs_client, fs_id, prices))[:1]))
    s3 = boto3.client("s3", region_name=region)
    found = None
    if dataset:
        what = f"{dataset} (EFS {DATASETS_PREFIX}/{dataset}/)"
        try:
            found = efs.dataset_in_s3(s3, outputs.get("BucketName", ""), dataset)
            unread = "no stats file in the data bucket"
        except ClientError as err:   # said; emptying does not need the size
            found, unread = None, f"its stats file could not be read ({explain_aws(err)})"
        if found:
            estimate = efs_core.dataset_estimate(found["files"], found["bytes"], lifecycle=False)
            print(f"  {dataset}: {found['files']:,} files, {found['bytes'] / 1e9:.2f} GB in S3 (its stats file), about "
                  f"{estimate['metered_bytes'] / 1e9:.2f} GB metered in EFS when staged: up to "
                  f"${estimate['metered_bytes'] / 1e9 * prices['efs_standard_gb_month']:.2f} per month")
        else:
            print(f"  {dataset}: {unread}, so its size is not known here")
    else:
        what = f"everything under EFS {DATASETS_PREFIX}/"
    busy = efs.running_staging(datasync, [t for t in (outputs.get("EfsSyncTaskArn"), task_arn) if t])
    if busy:
        print(f"dslab: DataSync is writing into EFS now ({busy}): a workflow's staging or an earlier emptying; "
              "run this again when it has ended", file=sys.stderr)
        return 1
    if outputs.get("StateMachineArn"):
        readers = efs.executions_reading_efs(s3, boto3.client("stepfunctions", region_name=region),
                                             outputs.get("BucketName", ""), outputs["StateMachineArn"])
        if readers:
            print("\n".join(["dslab: a running execution may read EFS now; run this again when it has ended:",
                             *efs.reading_lines(readers, dataset)]), file=sys.stderr)
            return 1
    else:
        print("  (no StateMachineArn output: whether an execution reads EFS now was not checked)")
    if dataset:
        print(f"  {efs.UNSCOPED_CAVEAT}")
    if not confirmed(args, f"delete {what}? the datasets stay in S3"):
        return 1
    execution = efs.start_empty(datasync, task_arn, dataset)
    print(f"emptying {what}: DataSync task execution {execution}")
    try:
        final = efs.wait(datasync, execution, poll=args.poll, say=lambda status: print(f"  {status}", flush=True))
    except KeyboardInterrupt:
        print(f"dslab: stopped following; the deletion goes on in DataSync: `aws datasync describe-task-execution "
              f"--task-execution-arn {execution}`", file=sys.stderr)
        return 130
    if final.get("Status") != "SUCCESS":
        result = final.get("Result") or {}
        detail = " ".join(str(result[k]) for k in ("ErrorCode", "ErrorDetail") if result.get(k)) or "no detail given"
        print(f"dslab: the DataSync execution ended {final.get('Status')}: {detail}; its log group is the task's "
              "(CloudWatch Logs, /aws/datasync)", file=sys.stderr)
        return 1
    deleted = efs.deleted_line(final, dataset, found)
    if deleted:
        print(f"  {deleted}")
    try:
        after = efs.usage(efs_client, fs_id, prices)
        now = (f"EFS now reports {after['size_in_bytes'].get('Value', 0) / 1e9:.2f} GB (${after['usd_per_month']:.2f} "
               "per month; its metered size catches up within a couple of hours)")
    except ClientError as err:   # emptying is done: only the look after it failed
        now = f"EFS's size could not be read afterwards ({explain_aws(err)}): `dslab doctor` shows it"
    print(f"deleted {what}; {now}. The datasets are still in S3, and the workflow stages them again when an EFS job "
          "needs them")
    return 0


def register(sub) -> None:
    group = sub.add_parser("efs", help="the lab's EFS file system: empty (delete the staged datasets); "
                           "`dslab doctor` shows what it holds and costs", formatter_class=argparse.RawDescriptionHelpFormatter,
                           description="The lab's EFS file system: empty.\n\nexample:\n"
                                       "  dslab efs empty --dataset caltech-jpg-50x --yes")
    esub = group.add_subparsers(dest="efs_command", required=True)
    p = add_command(esub, "empty", cmd_efs_empty, "Delete the datasets staged in EFS (all, or one dataset's folder) "
                    "through the lab's DataSync emptying task: EFS bills them by the GB-month while they sit there. "
                    "The datasets stay in S3. Waits while DataSync writes into EFS or a running execution's EFS jobs "
                    "may read it.", "dslab efs empty --dataset caltech-jpg-1x --yes")
    p.add_argument("--dataset", help="only this dataset's folder (datasets/NAME/ in EFS), by its include filter: "
                   "whether DataSync's REMOVE keeps to it is not documented, and if not, every dataset is emptied "
                   "(all stay in S3 and are copied again when needed)")
    p.add_argument("--yes", action="store_true", help="delete without asking")
    p.add_argument("--poll", type=float, default=10.0, help="seconds between looks at the DataSync execution (default 10)")
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--region")
    p.add_argument("--prices", help="YAML file overriding prices")
