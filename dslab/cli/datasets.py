"""``dslab dataset``: generate, pack, replicate, import, stats and upload datasets (dslab/inputs/datasets.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import ConfigError
from .common import add_command, print_json, progress_bar, real, whole

# Bounds on what the tooling is asked to make (beyond them a number is a typo, and the work would not end):
GENERATE_MAX_IMAGES = 10_000_000   # the post's largest set is 1.5 M JPEGs, made by `replicate` from 30,607
GENERATE_MAX_MEAN_KB = 10_240.0    # a photo's JPEG; larger files are what `dataset pack` makes
REPLICATE_MAX_COPIES = 1_000       # the post replicates 50x; each copy is a folder of links to every file
SEED_MAX = 2**63 - 1               # as an experiment's seed


def cmd_dataset_generate(args) -> int:
    from ..inputs import datasets
    if args.workload:
        return _generate_workload(args)
    if args.scale is not None:
        raise ConfigError("--scale", "goes with --workload (the fraction of its files to generate)")
    args.images = 30607 if args.images is None else args.images
    args.classes = 257 if args.classes is None else args.classes
    args.mean_kb = 39.0 if args.mean_kb is None else args.mean_kb
    if args.images > GENERATE_MAX_IMAGES:   # (under 1: generate says so)
        raise ConfigError("--images", f"{args.images:,} is more than this tool makes at once",
                          f"1..{GENERATE_MAX_IMAGES:,}; `dataset replicate` makes copies of a set")
    with progress_bar() as progress:
        task = progress.add_task("generating JPEGs", total=args.images)
        result = datasets.generate(Path(args.out), images=args.images, classes=args.classes, seed=args.seed,
                                   mean_kb=args.mean_kb, progress=lambda n: progress.advance(task, n))
    print(f"generated {result.images} JPEGs in {result.classes} classes, {result.bytes / 1e6:.1f} MB "
          f"(mean {result.bytes / result.images / 1024:.1f} KiB) in {result.out}")
    return 0


def _generate_workload(args) -> int:
    """A DLIO workload's dataset (core/workloads/dlio.py): its files at --scale, records drawn with its mean and stdev."""
    from ..inputs import datasets
    from .common import print_workload
    from .question import workload_of
    for flag in ("images", "classes", "mean_kb"):
        if getattr(args, flag) is not None:
            raise ConfigError(f"--{flag.replace('_', '-')}", "the workload file gives the dataset's shape with --workload; drop it")
    workload = workload_of(args)
    from ..core.workloads.checkpoint import CheckpointWorkload
    if isinstance(workload, CheckpointWorkload):   # its checkpoints are what its jobs write: there is no dataset
        raise ConfigError("--workload", f"{workload.source} is a checkpointing workload (workflow.train: False): it "
                          "reads no dataset; its training jobs write its checkpoints", "dslab estimate, recommend or "
                          "size --workload for where they should go, or dslab local --workload to run it")
    print_workload(workload)
    recipe = workload.recipe()
    with progress_bar() as progress:
        task = progress.add_task(f"generating {workload.format} files", total=recipe["files"])
        info = datasets.generate_dlio(Path(args.out), workload.lab_format, recipe["files"], recipe["samples_per_file"],
                                      recipe["record_bytes"], recipe["record_bytes_stdev"], args.seed,
                                      progress=lambda n: progress.advance(task, n))
    print(f"generated {info['files']:,} {workload.format} files of {info['samples_per_file']:,} sample(s) "
          f"({info['samples']:,} samples, {info['bytes'] / 1e6:,.1f} MB; `dslab size --workload` counts "
          f"{workload.bytes / 1e6:,.1f} MB, {100 * (info['bytes'] / workload.bytes - 1):+.1f}%) in {args.out}"
          + (f": scale {workload.scale:g} of the workload's {workload.num_files:,} files" if workload.scale != 1 else "")
          + f"; upload it with dslab dataset upload --src {args.out} --to s3://<bucket>/datasets/{workload.dataset_name}/")
    return 0


def cmd_dataset_pack(args) -> int:
    from ..inputs import datasets
    shard_size = datasets.parse_size(args.shard_size)
    if not Path(args.src).is_dir():
        raise ConfigError("--src", f"{args.src} is not a folder")
    files, _ = datasets.list_jpgs(Path(args.src))
    with progress_bar() as progress:
        task = progress.add_task("packing records", total=len(files))
        manifest = datasets.pack(Path(args.src), Path(args.out), shard_size=shard_size, seed=args.seed,
                                 progress=lambda n: progress.advance(task, n))
    print(f"packed {manifest['images']} images into {len(manifest['shards'])} TFRecord shards "
          f"({manifest['bytes'] / 1e6:.1f} MB) in {args.out}; manifest: {Path(args.out) / 'manifest.json'}")
    return 0


def cmd_dataset_replicate(args) -> int:
    from ..inputs import datasets
    info = datasets.replicate(Path(args.src), args.copies, Path(args.out))
    print(f"{args.copies} copies: {info['files']} files, {info['bytes'] / 1e6:.1f} MB in {args.out}")
    return 0


def cmd_dataset_import(args) -> int:
    from ..inputs import datasets
    result = datasets.import_folder(Path(args.src), Path(args.out))
    print(f"imported {result.images} images in {result.classes} classes ({result.bytes / 1e6:.1f} MB) into {result.out}")
    return 0


def cmd_dataset_stats(args) -> int:
    from ..inputs import datasets
    info = datasets.stats(args.path, write=args.write)
    if args.json:
        print_json(info)
    else:
        print(f"{info['path']}: {info['files']} files, {info['bytes'] / 1e6:.1f} MB, format {info['format']}; "
              f"size mean {info['mean_bytes'] / 1024:.1f} KiB, median {info['median_bytes'] / 1024:.1f} KiB, "
              f"p10 {info['p10_bytes'] / 1024:.1f} KiB, p90 {info['p90_bytes'] / 1024:.1f} KiB")
        if info.get("stats_file"):
            print(f"written to {info['stats_file']}: the workflow now plans this dataset without listing it")
    return 0


def cmd_dataset_upload(args) -> int:
    from ..inputs import datasets
    with progress_bar() as progress:
        task = progress.add_task("uploading bytes", total=None)
        result = datasets.upload(Path(args.src), args.to, progress=lambda n: progress.advance(task, n),
                                 total_cb=lambda total: progress.update(task, total=total), prefixes=args.prefixes)
    print(f"{result['to']}: {result['uploaded']} files uploaded ({result['bytes_uploaded'] / 1e6:.1f} MB), "
          f"{result['skipped']} already there; manifest {result['manifest']}, stats {result['stats']}"
          + (f"; spread over {result['prefixes']} S3 prefixes (p00/...)" if result["prefixes"] > 1 else ""))
    return 0


def register(sub) -> None:
    dataset = sub.add_parser("dataset", help="generate, pack, replicate, import, stats and upload datasets",
                             formatter_class=argparse.RawDescriptionHelpFormatter,
                             description="Dataset tooling: generate, pack, replicate, import, stats, upload.\n\nexample:\n"
                                         "  dslab dataset generate --out data/caltech-jpg --images 2000\n"
                                         "  dslab dataset stats data/caltech-jpg")
    dsub = dataset.add_subparsers(dest="dataset_command", required=True)
    p = add_command(dsub, "generate", cmd_dataset_generate, "Generate a deterministic Caltech-256-like jpg dataset, or "
                    "with --workload a DLIO workload's dataset (npz, tfrecord or jpeg files of its record sizes).",
                    "dslab dataset generate --out data/caltech-jpg --images 30607 --classes 257 --seed 0\n"
                    "  dslab dataset generate --workload dslab/contracts/dlio/cosmoflow_a100.yaml --scale 0.001 --out data/cosmoflow")
    p.add_argument("--out", required=True, help="new folder to write")
    p.add_argument("--images", type=int, help="number of JPEGs (default 30,607 as Caltech-256)")
    p.add_argument("--classes", type=whole(1), help="number of classes (default 257)")
    p.add_argument("--seed", type=whole(0, SEED_MAX), default=0)
    p.add_argument("--mean-kb", type=real(0, GENERATE_MAX_MEAN_KB), help="mean file size in KiB (default 39)")
    from .question import add_workload_flags
    add_workload_flags(p)
    p = add_command(dsub, "pack", cmd_dataset_pack, "Pack a jpg folder into TFRecord shards with a manifest.",
                    "dslab dataset pack --src data/caltech-jpg --out data/caltech-tfr --shard-size 110MB")
    p.add_argument("--src", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--shard-size", default="110MB", help="target shard size (default 110MB)")
    p.add_argument("--seed", type=whole(0, SEED_MAX), default=0)
    p = add_command(dsub, "replicate", cmd_dataset_replicate, "Make N copies of a dataset (hard links, no re-encoding).",
                    "dslab dataset replicate --src data/caltech-tfr --copies 50 --out data/caltech-tfr-50x")
    p.add_argument("--src", required=True)
    p.add_argument("--copies", type=whole(1, REPLICATE_MAX_COPIES), required=True)
    p.add_argument("--out", required=True)
    p = add_command(dsub, "import", cmd_dataset_import, "Import your own <class>/<image>.jpg folder in the lab's layout.",
                    "dslab dataset import --src ~/photos --out data/my-photos")
    p.add_argument("--src", required=True)
    p.add_argument("--out", required=True)
    p = add_command(dsub, "stats", cmd_dataset_stats, "File count, bytes and size distribution of a folder or S3 prefix; "
                    "--write stores them beside the prefix, where the workflow reads them (for datasets uploaded by other tools).",
                    "dslab dataset stats s3://my-bucket/datasets/caltech-jpg-1x/ --write")
    p.add_argument("path", metavar="PATH|s3://...")
    p.add_argument("--json", action="store_true")
    p.add_argument("--write", action="store_true",
                   help="store the stats as s3://.../<prefix>.stats.json (what the workflow's Plan reads)")
    p = add_command(dsub, "upload", cmd_dataset_upload, "Upload a dataset to S3 (the lab's bucket, or its S3 Express One Zone "
                    "bucket: stack output ExpressBucketName); only missing or changed files are sent.",
                    "dslab dataset upload --src data/caltech-jpg --to s3://datasourcelab-data-123456789012-us-east-1/datasets/caltech-jpg-1x/")
    p.add_argument("--src", required=True)
    p.add_argument("--to", required=True)
    p.add_argument("--prefixes", type=whole(1, 10_000), default=1,
                   help="spread the objects over N S3 prefixes under --to (p00/, p01/, ...), each serving 5,500 GET/s; "
                        "every source and the training script read through them (`dslab size` says how many)")
