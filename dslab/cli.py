"""``dslab``: the operator's command line. Every command has help with an example (``dslab CMD -h``).

Bad input exits with code 2 and one line naming the field and the fix; nothing is started or written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from .core.errors import ConfigError
from .validation import RequestInvalid

EXIT_BAD_INPUT = 2


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""


def _console():
    from rich.console import Console
    return Console(stderr=True)


def _progress():
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeRemainingColumn(), console=_console(), transient=True)


def _print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


# ---- dataset ---------------------------------------------------------------------------------

def cmd_dataset_generate(args) -> int:
    from . import datasets
    with _progress() as progress:
        task = progress.add_task("generating JPEGs", total=args.images)
        result = datasets.generate(Path(args.out), images=args.images, classes=args.classes, seed=args.seed,
                                   mean_kb=args.mean_kb, progress=lambda n: progress.advance(task, n))
    print(f"generated {result.images} JPEGs in {result.classes} classes, {result.bytes / 1e6:.1f} MB "
          f"(mean {result.bytes / result.images / 1024:.1f} KiB) in {result.out}")
    return 0


def cmd_dataset_pack(args) -> int:
    from . import datasets
    shard_size = datasets.parse_size(args.shard_size)
    if not Path(args.src).is_dir():
        raise ConfigError("--src", f"{args.src} is not a folder")
    files, _ = datasets.list_jpgs(Path(args.src))
    with _progress() as progress:
        task = progress.add_task("packing records", total=len(files))
        manifest = datasets.pack(Path(args.src), Path(args.out), shard_size=shard_size, seed=args.seed,
                                 progress=lambda n: progress.advance(task, n))
    print(f"packed {manifest['images']} images into {len(manifest['shards'])} TFRecord shards "
          f"({manifest['bytes'] / 1e6:.1f} MB) in {args.out}; manifest: {Path(args.out) / 'manifest.json'}")
    return 0


def cmd_dataset_replicate(args) -> int:
    from . import datasets
    info = datasets.replicate(Path(args.src), args.copies, Path(args.out))
    print(f"{args.copies} copies: {info['files']} files, {info['bytes'] / 1e6:.1f} MB in {args.out}")
    return 0


def cmd_dataset_import(args) -> int:
    from . import datasets
    result = datasets.import_folder(Path(args.src), Path(args.out))
    print(f"imported {result.images} images in {result.classes} classes ({result.bytes / 1e6:.1f} MB) into {result.out}")
    return 0


def cmd_dataset_stats(args) -> int:
    from . import datasets
    info = datasets.stats(args.path, write=args.write)
    if args.json:
        _print_json(info)
    else:
        print(f"{info['path']}: {info['files']} files, {info['bytes'] / 1e6:.1f} MB, format {info['format']}; "
              f"size mean {info['mean_bytes'] / 1024:.1f} KiB, median {info['median_bytes'] / 1024:.1f} KiB, "
              f"p10 {info['p10_bytes'] / 1024:.1f} KiB, p90 {info['p90_bytes'] / 1024:.1f} KiB")
        if info.get("stats_file"):
            print(f"written to {info['stats_file']}: the workflow now plans this dataset without listing it")
    return 0


def cmd_dataset_upload(args) -> int:
    from . import datasets
    with _progress() as progress:
        task = progress.add_task("uploading bytes", total=None)
        result = datasets.upload(Path(args.src), args.to, progress=lambda n: progress.advance(task, n),
                                 total_cb=lambda total: progress.update(task, total=total))
    print(f"{result['to']}: {result['uploaded']} files uploaded ({result['bytes_uploaded'] / 1e6:.1f} MB), "
          f"{result['skipped']} already there; manifest {result['manifest']}, stats {result['stats']}")
    return 0


# ---- job -------------------------------------------------------------------------------------

def cmd_job_run_local(args) -> int:
    from .local.runner import run_request_file
    outcome = run_request_file(Path(args.request), Path(args.s3_root), Path(args.fs_root) if args.fs_root else None,
                               Path(args.out), code_dir=Path(args.code) if args.code else None)
    d = outcome.describe
    line = f"{d['TrainingJobName']}: {d['TrainingJobStatus']}"
    if d.get("FailureReason"):
        line += f" - {d['FailureReason']}"
    if outcome.metrics:
        m = outcome.metrics
        au = m.get("au_percent")
        line += (f"; {m['samples']} samples, {m['samples_per_second']:.1f} samples/s, {m['mb_per_second']:.1f} MB/s"
                 + (f", AU {au:.1f}%" if au is not None else ""))
    print(line)
    print(f"describe.json, metrics.json and the model artifact are in {args.out}")
    return 0 if d["TrainingJobStatus"] == "Completed" else 1


# ---- parser ----------------------------------------------------------------------------------

def _add(sub, name: str, handler: Callable, help_text: str, example: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=f"{help_text}\n\nexample:\n  {example}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(handler=handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dslab", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="DataSourceLab: which data source should a SageMaker training job read from, and what will it cost?\n\n"
                    "examples:\n  dslab local --out lab-out\n  dslab estimate --files 30607 --bytes 1.1GB\n"
                    "  dslab dataset generate --out data/caltech --images 2000")
    sub = parser.add_subparsers(dest="command", required=True)

    dataset = sub.add_parser("dataset", help="generate, pack, replicate, import, stats and upload datasets",
                             formatter_class=argparse.RawDescriptionHelpFormatter,
                             description="Dataset tooling: generate, pack, replicate, import, stats, upload.\n\nexample:\n"
                                         "  dslab dataset generate --out data/caltech-jpg --images 2000\n"
                                         "  dslab dataset stats data/caltech-jpg")
    dsub = dataset.add_subparsers(dest="dataset_command", required=True)
    p = _add(dsub, "generate", cmd_dataset_generate, "Generate a deterministic Caltech-256-like jpg dataset.",
             "dslab dataset generate --out data/caltech-jpg --images 30607 --classes 257 --seed 0")
    p.add_argument("--out", required=True, help="new folder to write")
    p.add_argument("--images", type=int, default=30607, help="number of JPEGs (default 30,607 as Caltech-256)")
    p.add_argument("--classes", type=int, default=257, help="number of classes (default 257)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mean-kb", type=float, default=39.0, help="mean file size in KiB (default 39)")
    p = _add(dsub, "pack", cmd_dataset_pack, "Pack a jpg folder into TFRecord shards with a manifest.",
             "dslab dataset pack --src data/caltech-jpg --out data/caltech-tfr --shard-size 110MB")
    p.add_argument("--src", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--shard-size", default="110MB", help="target shard size (default 110MB)")
    p.add_argument("--seed", type=int, default=0)
    p = _add(dsub, "replicate", cmd_dataset_replicate, "Make N copies of a dataset (hard links, no re-encoding).",
             "dslab dataset replicate --src data/caltech-tfr --copies 50 --out data/caltech-tfr-50x")
    p.add_argument("--src", required=True)
    p.add_argument("--copies", type=int, required=True)
    p.add_argument("--out", required=True)
    p = _add(dsub, "import", cmd_dataset_import, "Import your own <class>/<image>.jpg folder in the lab's layout.",
             "dslab dataset import --src ~/photos --out data/my-photos")
    p.add_argument("--src", required=True)
    p.add_argument("--out", required=True)
    p = _add(dsub, "stats", cmd_dataset_stats, "File count, bytes and size distribution of a folder or S3 prefix; "
             "--write stores them beside the prefix, where the workflow reads them (for datasets uploaded by other tools).",
             "dslab dataset stats s3://my-bucket/datasets/caltech-jpg-1x/ --write")
    p.add_argument("path", metavar="PATH|s3://...")
    p.add_argument("--json", action="store_true")
    p.add_argument("--write", action="store_true",
                   help="store the stats as s3://.../<prefix>.stats.json (what the workflow's Plan reads)")
    p = _add(dsub, "upload", cmd_dataset_upload, "Upload a dataset to S3 (the lab's bucket, or its S3 Express One Zone "
             "bucket: stack output ExpressBucketName); only missing or changed files are sent.",
             "dslab dataset upload --src data/caltech-jpg --to s3://datasourcelab-data-123456789012-us-east-1/datasets/caltech-jpg-1x/")
    p.add_argument("--src", required=True)
    p.add_argument("--to", required=True)

    job = sub.add_parser("job", help="run one CreateTrainingJob request locally", formatter_class=argparse.RawDescriptionHelpFormatter,
                         description="Run one CreateTrainingJob request on this machine.\n\nexample:\n"
                                     "  dslab job run-local --request req.json --s3-root stand-in/s3 --out job-out")
    jsub = job.add_subparsers(dest="job_command", required=True)
    p = _add(jsub, "run-local", cmd_job_run_local,
             "Run a CreateTrainingJob request on this machine against a folder stand-in for S3 and file systems.",
             "dslab job run-local --request req.json --s3-root stand-in/s3 --fs-root stand-in/fs --out job-out")
    p.add_argument("--request", required=True, help="CreateTrainingJob request JSON (as `dslab plan --json` prints)")
    p.add_argument("--s3-root", required=True, help="folder with one sub-folder per bucket")
    p.add_argument("--fs-root", help="folder with one sub-folder per file-system ID (FSx, EFS)")
    p.add_argument("--out", required=True)
    p.add_argument("--code", help="use this folder as the training code instead of sagemaker_submit_directory")

    from . import cli_ops
    cli_ops.register(sub, _add)
    return parser


def _aws_error(err: Exception) -> str | None:
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, NoRegionError
    if isinstance(err, NoCredentialsError):
        return "no AWS credentials: set AWS_PROFILE (or keys), or run the lab offline with `dslab local`"
    if isinstance(err, NoRegionError):
        return "no AWS region: pass --region or set AWS_REGION"
    if isinstance(err, EndpointConnectionError):
        return f"AWS cannot be reached ({err}); check the network or run the lab offline with `dslab local`"
    if isinstance(err, ClientError):
        error = err.response.get("Error", {})
        return f"AWS said {error.get('Code')}: {error.get('Message')}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (ConfigError, RequestInvalid, UserError) as err:
        print(f"dslab: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:  # AWS errors: one line and the fix, not a traceback
        message = _aws_error(err)
        if message is None:
            raise
        print(f"dslab: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("dslab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `dslab recommend ... | head`: the reader has what it wanted
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit
        return 0


if __name__ == "__main__":
    sys.exit(main())
