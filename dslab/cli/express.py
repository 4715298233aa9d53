"""``dslab express status|empty``: the S3 Express One Zone bucket's contents and cost, and emptying it
(the operations themselves: dslab/aws/express.py)."""

from __future__ import annotations

import argparse
from typing import Any

from ..aws import express
from ..core.errors import ConfigError
from ..core.requests import DATASETS_PREFIX
from .common import add_command, can_confirm, confirmed, lab_outputs, price_table, print_json, region_of


def _bucket_from_args(args) -> dict[str, Any] | None:
    outputs = lab_outputs(args)
    return express.express_bucket(outputs, region_of(args))


def _monthly(prices, size: int) -> float:
    return size / 1e9 * prices["express_gb_month"]   # decimal GB, as everywhere in the lab's prices


OFF = ("S3 Express One Zone: off (the lab was deployed with -c express=false); deploy with -c express=true to add "
       "the directory bucket")


def cmd_express_status(args) -> int:
    info = _bucket_from_args(args)
    if info is None:
        if args.json:
            print_json({"enabled": False})
        else:
            print(OFF)
        return 0
    prices = price_table(args.prices)
    found = express.inventory(express.s3_client(info["region"]), info["bucket"])
    per_gb = prices["express_gb_month"]
    state = {"enabled": True, **info, **found, "usd_per_month": round(_monthly(prices, found["bytes"]), 2),
             "usd_per_gb_month": per_gb, "prices": prices.label()}
    for entry in state["datasets"].values():
        entry["usd_per_month"] = round(_monthly(prices, entry["bytes"]), 2)
    if args.json:
        print_json(state)
        return 0
    print(f"S3 Express One Zone bucket {info['bucket']} (zone {info['zone_id']}, {info['region']})")
    if not found["objects"] and not found["multipart_uploads"]:
        print("  empty: it costs nothing for storage while it is empty")
        return 0
    print(f"  {found['objects']:,} objects, {found['bytes'] / 1e9:.2f} GB: ${state['usd_per_month']:.2f} per month "
          f"at ${per_gb:g} per GB-month ({prices.footer()})")
    for name, entry in state["datasets"].items():
        where = f"{DATASETS_PREFIX}/{name}/" if name != "(other)" else "other keys"
        print(f"  {where:40s} {entry['objects']:>10,} objects {entry['bytes'] / 1e9:>9.2f} GB  ${entry['usd_per_month']:.2f}/month")
    if found["multipart_uploads"]:
        print(f"  {found['multipart_uploads']} multipart uploads in progress (their parts bill as storage; "
              "the bucket's lifecycle rule aborts them after a day)")
    print("  done with them? `dslab express empty --yes` (or --dataset NAME): the datasets stay in the data bucket")
    return 0


def cmd_express_empty(args) -> int:
    dataset = args.dataset
    if dataset is not None and (not dataset.strip() or "/" in dataset or dataset in (".", "..")):
        raise ConfigError("--dataset", f"{dataset!r} is not a dataset name", "a name as under datasets/, without '/', "
                          "e.g. caltech-jpg-1x")
    info = _bucket_from_args(args)
    if info is None:
        print(OFF + ": nothing to empty")
        return 0
    s3 = express.s3_client(info["region"])
    what = f"s3://{info['bucket']}/{DATASETS_PREFIX}/{dataset}/" if dataset else f"s3://{info['bucket']}"
    objects, size, uploads = express.count(s3, info["bucket"], dataset)
    if not objects and not uploads:
        print(f"{what}: nothing to delete")
        return 0
    monthly = _monthly(price_table(getattr(args, "prices", None)), size)
    print(f"{what}: {objects:,} objects, {size / 1e9:.2f} GB (${monthly:.2f} per month)"
          + (f", {uploads} multipart uploads in progress" if uploads else ""))
    can_confirm(args, "deleting the staged copies needs a confirmation (the datasets themselves stay in the data bucket)")
    if not confirmed(args, "delete them? the datasets stay in the data bucket"):
        return 1
    done = express.empty(s3, info["bucket"], dataset)
    print(f"{what}: deleted {done['objects_deleted']:,} objects ({done['bytes_deleted'] / 1e9:.2f} GB)"
          + (f", aborted {done['uploads_aborted']} multipart uploads" if done["uploads_aborted"] else "")
          + "; the datasets are still in the data bucket, and the workflow stages them again when an Express job needs them")
    return 0


def register(sub) -> None:
    group = sub.add_parser("express", help="the S3 Express One Zone bucket: status (objects, bytes, cost per month), "
                           "empty (delete the staged copies)", formatter_class=argparse.RawDescriptionHelpFormatter,
                           description="The S3 Express One Zone bucket: status, empty.\n\nexample:\n"
                                       "  dslab express status\n  dslab express empty --dataset caltech-jpg-1x --yes")
    esub = group.add_subparsers(dest="express_command", required=True)
    p = add_command(esub, "status", cmd_express_status, "The S3 Express One Zone bucket: its zone, objects and bytes per dataset, "
                    "and what it costs per month while they sit there.", "dslab express status --outputs cdk-outputs.json")
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--region")
    p.add_argument("--prices", help="YAML file overriding prices")
    p.add_argument("--json", action="store_true")
    p = add_command(esub, "empty", cmd_express_empty, "Delete the staged copies in the S3 Express One Zone bucket (all, or one "
                    "dataset's): it bills storage while data sits in it. The datasets stay in the data bucket.",
                    "dslab express empty --dataset caltech-jpg-1x --yes")
    p.add_argument("--dataset", help="only this dataset's copy (datasets/NAME/ and its datasets/NAME.* files)")
    p.add_argument("--yes", action="store_true", help="delete without asking")
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--region")
    p.add_argument("--prices", help="YAML file overriding prices")
