"""Dataset tooling: generate a Caltech-256-like dataset, pack it into TFRecord shards, replicate it,
import a user's folder, describe a folder or S3 prefix, and upload to the lab's bucket.

Record formats come from the training side (``training/dslab_train``) so that the writer and the
reader can never disagree.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from ..core.errors import ConfigError
from ..core.requests import is_express_bucket, stats_key

from dslab_train.pipeline import JPEG_SUFFIXES, jpeg_comment_label, with_label_comment
from dslab_train.layout import spread_count, spread_folder
from dslab_train.records import encode_dlio_example, encode_example, tfrecord_frame

# Caltech-256: 30,607 images in 257 classes (256 + clutter), mean file size about 39 KB
# (../shared/calibration/bencher-measured.csv: 1.1 GB / 30,607 files).
CALTECH_IMAGES = 30607
CALTECH_CLASSES = 257
CALTECH_MEAN_KB = 39.0
SIZE_SIGMA = 0.55            # spread (log-normal) of file sizes around the mean
DEFAULT_SHARD_MB = 110       # the post's TFRecord shards
JPEG_QUALITY = 88

Progress = Callable[[int], None]


def _noop(_: int) -> None:
    pass


# ---- generate --------------------------------------------------------------------------------

def class_dir_name(index: int) -> str:
    return f"{index + 1:03d}.class-{index + 1:03d}"


def _class_counts(images: int, classes: int, rng: np.random.Generator) -> list[int]:
    if classes > images:
        raise ConfigError("--classes", f"{classes} classes cannot share {images} images", f"1..{images}")
    weights = rng.uniform(0.4, 1.6, size=classes)
    extra = images - classes
    counts = np.ones(classes, dtype=int) + rng.multinomial(extra, weights / weights.sum())
    return counts.tolist()


def _synth_image(rng: np.random.Generator, label: int, width: int, height: int) -> Image.Image:
    """A textured picture: class-tinted low-frequency field, a few shapes, fine grain."""
    hue = np.array([(label * 37) % 256, (label * 91) % 256, (label * 53) % 256], dtype=np.float32)
    coarse = rng.uniform(0, 255, size=(6, 6, 3)).astype(np.float32) * 0.6 + hue * 0.4
    field = Image.fromarray(coarse.astype(np.uint8)).resize((width, height), Image.BICUBIC)
    draw = ImageDraw.Draw(field)
    for _ in range(int(rng.integers(2, 6))):
        x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
        x1, y1 = x0 + int(rng.integers(8, max(9, width // 2))), y0 + int(rng.integers(8, max(9, height // 2)))
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=colour)
    grain = rng.normal(0, 14, size=(height, width, 3))
    pixels = np.clip(np.asarray(field, dtype=np.float32) + grain, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels).filter(ImageFilter.SMOOTH) if rng.random() < 0.3 else Image.fromarray(pixels)


MIN_JPEG_KB = 2.0   # generate's smallest pictures (64 x 64 with grain): 1.8-2.6 KB (measured, --mean-kb 0.001)


def _check_room(out: Path, needed_bytes: float, what: str) -> None:
    """Refuse before writing when the file system under ``out`` has not the room for ``needed_bytes``."""
    import shutil
    where = out
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    if needed_bytes > free:
        raise ConfigError("--images", f"{what} need ~{needed_bytes / 1e9:,.1f} GB; {where} has {free / 1e9:,.1f} GB free",
                          "fewer --images, a smaller --mean-kb, or --out on a larger disk")


@dataclass
class GenerateResult:
    out: Path
    images: int
    classes: int
    bytes: int


def generate(out: Path, images: int = CALTECH_IMAGES, classes: int = CALTECH_CLASSES, seed: int = 0,
             mean_kb: float = CALTECH_MEAN_KB, progress: Progress = _noop, threads: int | None = None) -> GenerateResult:
    """Write a deterministic Caltech-256-like dataset: ``<out>/<NNN>.class-NNN/<NNN>_<iiii>.jpg``.

    Each JPEG carries its class in a COM segment, so a Pipe stream (which has no file names) keeps it.
    The same (images, classes, seed, mean_kb) always gives the same files, byte for byte.
    """
    if images < 1:
        raise ConfigError("--images", "must be at least 1")
    if classes < 1:
        raise ConfigError("--classes", "must be at least 1")
    if out.exists() and any(out.iterdir()):
        raise ConfigError("--out", f"{out} exists and is not empty; choose a new folder (nothing was overwritten)")
    _check_room(out, images * max(mean_kb, MIN_JPEG_KB) * 1024, f"{images:,} JPEGs of ~{mean_kb:g} KiB")
    rng = np.random.default_rng(seed)
    counts = _class_counts(images, classes, rng)
    jobs = [(c, i) for c in range(classes) for i in range(counts[c])]
    # Target sizes: log-normal around the mean; bytes per pixel for this content is ~0.32 at this quality (measured).
    targets = rng.lognormal(math.log(mean_kb * 1024) - SIZE_SIGMA ** 2 / 2, SIZE_SIGMA, size=len(jobs))

    def make(n: int) -> int:
        label, i = jobs[n]
        local = np.random.default_rng([seed, label, i])
        pixels = max(64 * 64, int(targets[n] / 0.32))
        aspect = local.uniform(0.7, 1.45)
        width = max(64, int(math.sqrt(pixels * aspect)))
        height = max(64, int(pixels / width))
        buffer = io.BytesIO()
        _synth_image(local, label, width, height).save(buffer, "JPEG", quality=JPEG_QUALITY)
        data = with_label_comment(buffer.getvalue(), label)
        path = out / class_dir_name(label) / f"{label + 1:03d}_{i + 1:04d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return len(data)

    out.mkdir(parents=True, exist_ok=True)
    total = 0
    with ThreadPoolExecutor(threads or (os.cpu_count() or 2)) as pool:
        for size in pool.map(make, range(len(jobs)), chunksize=64):
            total += size
            progress(1)
    (out / "dataset.json").write_text(json.dumps({"format": "jpg", "images": images, "classes": classes,
                                                   "seed": seed, "mean_kb": mean_kb, "bytes": total}, indent=2))
    return GenerateResult(out, images, classes, total)


# ---- a DLIO workload's dataset -----------------------------------------------------------------

DLIO_EXTENSIONS = {"npz": "npz", "tfrecord": "tfrecord", "jpg": "jpeg"}   # as DLIO names its files (format)


def dlio_record_sizes(files: int, record_bytes: int, record_bytes_stdev: int, seed: int) -> list[int]:
    """One record length per file, drawn from a normal distribution of the workload's mean and stdev, at least
    one byte (DLIO's generators draw one per file as well: data_generator.py get_dimension)."""
    if not record_bytes_stdev:
        return [record_bytes] * files
    drawn = np.random.default_rng(seed).normal(record_bytes, record_bytes_stdev, size=files)
    return [max(1, int(v)) for v in drawn]


def generate_dlio(out: Path, fmt: str, files: int, samples_per_file: int, record_bytes: int, record_bytes_stdev: int = 0,
                  seed: int = 0, progress: Progress = _noop, threads: int | None = None) -> dict:
    """A dataset of a DLIO workload's shape (core/workloads/dlio.py Workload.recipe), as DLIO's generators lay it out:
    ``img_<i>_of_<files>.<format>``, each file ``samples_per_file`` samples of random bytes of its record length.

    - npz: ``x`` an array of (record length, samples) bytes and ``y`` the labels (zeros), as np.savez writes
      them (DLIO's npz_generator.py); the training script reads it with the standard library's zipfile;
    - tfrecord: a tf.train.Example per sample, "image" (the bytes) and "size" (tf_generator.py);
    - jpeg: exactly what DLIO's jpeg_generator.py (at 03b5ed329fe8) writes on one rank, not the record length:
      one image per file whatever ``samples_per_file`` says, dim1 x dim2 pixels each drawn from N(int(sqrt(record
      length)), stdev / 2 / sqrt(record length)), random grey values (``randint(255)``), numpy's legacy generator
      seeded with DLIO's 10 (plus ``seed``, 0 in every workload's recipe), saved as Pillow's JPEG at its defaults.
      JPEG compresses noise to ~56% of the record length; the workload's bytes count that (core/workloads/dlio.py
      jpeg_file_bytes), so `dslab size --workload` sizes the files generated. Matching DLIO, not the record
      length, keeps the bytes a source serves those a DLIO run of the same file reads from its storage.
    The same recipe always gives the same files, byte for byte (jpeg: for one Pillow, whose libjpeg encodes)."""
    if fmt not in DLIO_EXTENSIONS:
        raise ConfigError("format", f"{fmt!r}: DLIO datasets are generated as npz, tfrecord or jpeg", list(DLIO_EXTENSIONS))
    if files < 1 or samples_per_file < 1 or record_bytes < 1:
        raise ConfigError("--workload", "a DLIO dataset has at least one file, one sample per file and one byte per record")
    if out.exists() and any(out.iterdir()):
        raise ConfigError("--out", f"{out} exists and is not empty; choose a new folder (nothing was overwritten)")
    if fmt == "jpg" and samples_per_file != 1:
        raise ConfigError("num_samples_per_file", f"{samples_per_file} with jpeg: DLIO writes one image per file, which "
                          "the lab's script reads as one sample", "1")
    width = len(str(files))
    extension = DLIO_EXTENSIONS[fmt]
    workers = threads or min(8, os.cpu_count() or 2)
    if fmt == "jpg":
        total = _generate_dlio_jpeg(out, files, record_bytes, record_bytes_stdev, seed, progress, workers)
    else:
        sizes = dlio_record_sizes(files, record_bytes, record_bytes_stdev, seed)
        _check_room(out, sum(sizes) * samples_per_file * 1.01 + files * 4096, f"{files:,} {fmt} files")
        out.mkdir(parents=True, exist_ok=True)

        def make(i: int) -> int:
            rng = np.random.default_rng([seed, i])
            size = sizes[i]
            path = out / f"img_{i:0{width}d}_of_{files}.{extension}"
            if fmt == "npz":
                records = np.frombuffer(rng.bytes(size * samples_per_file), dtype=np.uint8).reshape(size, samples_per_file)
                with open(path, "wb") as handle:
                    np.savez(handle, x=records, y=np.zeros(samples_per_file, dtype=np.int64))
            else:
                with open(path, "wb") as handle:
                    for _ in range(samples_per_file):
                        handle.write(tfrecord_frame(encode_dlio_example(rng.bytes(size), size)))
            return path.stat().st_size

        total = 0
        with ThreadPoolExecutor(workers) as pool:
            for size in pool.map(make, range(files)):
                total += size
                progress(1)
    info = {"format": fmt, "dlio": True, "files": files, "samples_per_file": samples_per_file,
            "samples": files * samples_per_file, "record_bytes": record_bytes, "record_bytes_stdev": record_bytes_stdev,
            "seed": seed, "bytes": total}
    (out / "dataset.json").write_text(json.dumps(info, indent=2))
    return info


DLIO_JPEG_SEED = 10   # jpeg_generator.py: np.random.seed(10) before it draws the sides, then each file's pixels


def dlio_jpeg_sides(files: int, record_bytes: int, record_bytes_stdev: int, rng: np.random.RandomState) -> list[int]:
    """Two sides per file, as DLIO's get_dimension draws them (data_generator.py): N(int(sqrt(record length)),
    stdev / 2 / sqrt(record length)), each max(int(x), 1); every file the same sides without a stdev (no draw)."""
    from ..core.workloads.dlio import jpeg_dimension
    mean, stdev = jpeg_dimension(record_bytes, record_bytes_stdev)
    if stdev > 0:
        return [max(int(d), 1) for d in rng.normal(mean, stdev, 2 * files)]
    return [mean] * (2 * files)


def _generate_dlio_jpeg(out: Path, files: int, record_bytes: int, record_bytes_stdev: int, seed: int,
                        progress: Progress, workers: int) -> int:
    """DLIO's jpeg_generator.py on one rank: the sides, then file by file ``randint(255, size=(dim1, dim2))``
    from one generator (so the pixels are drawn in order; Pillow encodes them on ``workers`` threads)."""
    from ..core.workloads.dlio import jpeg_file_bytes
    rng = np.random.RandomState(DLIO_JPEG_SEED + seed)
    sides = dlio_jpeg_sides(files, record_bytes, record_bytes_stdev, rng)
    _check_room(out, files * jpeg_file_bytes(record_bytes, record_bytes_stdev) * 1.05 + files * 4096,
                f"{files:,} jpeg files")
    out.mkdir(parents=True, exist_ok=True)
    width = len(str(files))

    def save(item: tuple[int, np.ndarray]) -> int:
        i, pixels = item
        path = out / f"img_{i:0{width}d}_of_{files}.jpeg"
        Image.fromarray(pixels).save(path, format="JPEG", bits=8)   # as DLIO's img.save
        return path.stat().st_size

    total = 0
    with ThreadPoolExecutor(workers) as pool:
        for start in range(0, files, 2 * workers):   # a few images in memory at a time, drawn in DLIO's order
            batch = [(i, rng.randint(255, size=(sides[2 * i], sides[2 * i + 1]), dtype=np.uint8))
                     for i in range(start, min(files, start + 2 * workers))]
            for size in pool.map(save, batch):
                total += size
                progress(1)
    return total


# ---- jpg folders -----------------------------------------------------------------------------

def list_jpgs(src: Path) -> tuple[list[Path], list[str]]:
    files = sorted(p for p in src.rglob("*") if p.suffix.lower() in JPEG_SUFFIXES and p.is_file())
    classes = sorted({p.parent.name for p in files if p.parent != src})
    return files, classes


def import_folder(src: Path, out: Path, progress: Progress = _noop) -> GenerateResult:
    """Copy a user's ``<class>/<image>.jpg`` folder into the lab's layout, labels embedded (no re-encoding)."""
    files, classes = list_jpgs(src)
    if not files:
        raise ConfigError("--src", f"{src} holds no .jpg/.jpeg files", "a folder of class folders of JPEG files")
    if out.exists() and any(out.iterdir()):
        raise ConfigError("--out", f"{out} exists and is not empty; choose a new folder")
    index = {name: i for i, name in enumerate(classes)}
    total = 0
    for path in files:
        data = path.read_bytes()
        if data[:2] != b"\xff\xd8":
            raise ConfigError("--src", f"{path} is not a JPEG file (starts with {data[:4]!r})")
        label = index.get(path.parent.name, 0)
        if jpeg_comment_label(data) < 0:
            data = with_label_comment(data, label)
        target = out / path.parent.name / path.name if path.parent != src else out / "unlabelled" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        total += len(data)
        progress(1)
    (out / "dataset.json").write_text(json.dumps({"format": "jpg", "images": len(files), "classes": len(classes),
                                                   "imported_from": str(src), "bytes": total}, indent=2))
    return GenerateResult(out, len(files), len(classes), total)


# ---- pack ------------------------------------------------------------------------------------

def parse_size(text: str | int, field: str = "--shard-size") -> int:
    """A size with its unit (110MB, 150MiB, 1GB), as every size the lab takes (premise.parse_bytes)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    from ..core.shape import parse_bytes
    return parse_bytes(text, field, example="110MB, 150MiB, 1GB")


def pack(src: Path, out: Path, shard_size: int = DEFAULT_SHARD_MB * 1_000_000, seed: int = 0,
         progress: Progress = _noop) -> dict:
    """Pack a jpg folder into TFRecord shards of about ``shard_size`` bytes, with ``manifest.json``.

    Files are shuffled (seeded) before packing so each shard mixes classes; reading shards in order
    with a shuffle buffer then approximates a global shuffle.
    """
    files, classes = list_jpgs(src)
    if not files:
        raise ConfigError("--src", f"{src} holds no .jpg files to pack")
    if out.exists() and any(out.iterdir()):
        raise ConfigError("--out", f"{out} exists and is not empty; choose a new folder")
    out.mkdir(parents=True)
    index = {name: i for i, name in enumerate(classes)}
    order = np.random.default_rng(seed).permutation(len(files))
    shards: list[dict] = []
    handle = None
    written = 0

    def close():
        nonlocal handle
        if handle is not None:
            handle.close()
            handle = None

    try:
        for n in order:
            path = files[n]
            data = path.read_bytes()
            label = jpeg_comment_label(data)
            if label < 0:
                label = index.get(path.parent.name, 0)
            record = tfrecord_frame(encode_example(data, label))
            if handle is None or (written >= shard_size):
                close()
                name = f"shard-{len(shards):05d}.tfrecord"
                handle = open(out / name, "wb")
                shards.append({"file": name, "records": 0, "bytes": 0})
                written = 0
            handle.write(record)
            written += len(record)
            shards[-1]["records"] += 1
            shards[-1]["bytes"] += len(record)
            progress(1)
    finally:
        close()
    manifest = {"format": "tfrecord", "source": str(src), "images": len(files), "classes": len(classes),
                "shard_size_target": shard_size, "seed": seed, "shards": shards,
                "bytes": sum(s["bytes"] for s in shards)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


# ---- replicate -------------------------------------------------------------------------------

def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def replicate(src: Path, copies: int, out: Path, progress: Progress = _noop) -> dict:
    """N copies of a dataset (the post's 50x), as ``copy-NNN/...``: hard links where possible, never re-encoded."""
    if copies < 1:
        raise ConfigError("--copies", "must be at least 1")
    files = sorted(p for p in src.rglob("*") if p.is_file() and p.name not in ("dataset.json", "manifest.json"))
    if not files:
        raise ConfigError("--src", f"{src} is empty")
    if out.exists() and any(out.iterdir()):
        raise ConfigError("--out", f"{out} exists and is not empty; choose a new folder")
    total = 0
    for c in range(copies):
        for path in files:
            _link_or_copy(path, out / f"copy-{c:03d}" / path.relative_to(src))
            total += path.stat().st_size
            progress(1)
    info = {"source": str(src), "copies": copies, "files": len(files) * copies, "bytes": total}
    (out / "dataset.json").write_text(json.dumps(info, indent=2))
    return info


# ---- stats -----------------------------------------------------------------------------------

def _summary(sizes: list[int], where: str) -> dict:
    if not sizes:
        raise ConfigError("PATH", f"{where} holds no data files", "a dataset folder or s3://bucket/prefix/ with objects")
    ordered = sorted(sizes)

    def pct(p: float) -> int:
        return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))]

    return {"path": where, "files": len(sizes), "bytes": sum(sizes), "mean_bytes": statistics.fmean(sizes),
            "median_bytes": pct(0.5), "p10_bytes": pct(0.1), "p90_bytes": pct(0.9),
            "min_bytes": ordered[0], "max_bytes": ordered[-1]}


METADATA_FILES = {"dataset.json", "manifest.json"}


def stats(path: str, s3_client=None, write: bool = False) -> dict:
    """File count, bytes and size distribution of a folder or an S3 prefix.

    ``write`` (S3 only) stores the result as the dataset's stats file beside the prefix, which is
    what the workflow's Plan reads instead of listing a prefix of maybe millions of objects.
    """
    if write and not path.startswith("s3://"):
        raise ConfigError("--write", "only an S3 prefix has a stats file", "s3://<bucket>/datasets/<name>/")
    if path.startswith("s3://"):
        bucket, prefix = parse_s3_uri(path, "PATH")
        client = s3_client or _s3_client()
        sizes, names = [], []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""):
            for obj in page.get("Contents", []):
                if obj["Key"].rsplit("/", 1)[-1] not in METADATA_FILES:
                    sizes.append(obj["Size"])
                    names.append(obj["Key"])
    else:
        root = Path(path)
        if not root.exists():
            raise ConfigError("PATH", f"{path} does not exist")
        files = [p for p in root.rglob("*") if p.is_file() and p.name not in METADATA_FILES]
        sizes, names = [p.stat().st_size for p in files], [p.name for p in files]
    result = _summary(sizes, path)
    result["format"] = _format_of(names)
    if write:
        result["stats_file"] = _put_stats(client, bucket, prefix, result, "dslab dataset stats --write")
    return result


def _format_of(names: list[str]) -> str:
    jpgs = sum(1 for n in names if Path(n).suffix.lower() in JPEG_SUFFIXES)
    if jpgs > len(names) / 2:
        return "jpg"
    if sum(1 for n in names if n.endswith(".npz")) > len(names) / 2:
        return "npz"
    return "tfrecord" if any(n.endswith(".tfrecord") for n in names) else "other"


def _put_stats(client, bucket: str, prefix: str, summary: dict, written_by: str) -> str:
    """The stats file the workflow's Plan reads (one GetObject, whatever the dataset's size)."""
    document = {**{k: v for k, v in summary.items() if k != "path"}, "prefix": f"s3://{bucket}/{prefix}/",
                "written_by": written_by, "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    key = stats_key(prefix)
    client.put_object(Bucket=bucket, Key=key, Body=json.dumps(document, indent=2).encode(),
                      ContentType="application/json")
    return f"s3://{bucket}/{key}"


# ---- upload ----------------------------------------------------------------------------------

def _s3_client(endpoint_url: str | None = None):
    import boto3
    return boto3.client("s3", endpoint_url=endpoint_url or os.environ.get("DSLAB_S3_ENDPOINT"))


def s3_etag(path: Path, part_size: int, threshold: int) -> str:
    """The ETag S3 gives an object uploaded with these settings (MD5, or MD5 of part MD5s)."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        if size < threshold:
            return hashlib.md5(handle.read()).hexdigest()
        digests = []
        while chunk := handle.read(part_size):
            digests.append(hashlib.md5(chunk).digest())
    return f"{hashlib.md5(b''.join(digests)).hexdigest()}-{len(digests)}"


def parse_s3_uri(uri: str, field: str = "--to") -> tuple[str, str]:
    if not uri.startswith("s3://") or len(uri) <= 5:
        raise ConfigError(field, f"{uri!r} is not an S3 URI", "s3://<bucket>/datasets/<name>/")
    bucket, _, prefix = uri[5:].partition("/")
    if not bucket:
        raise ConfigError(field, f"{uri!r} names no bucket")
    return bucket, prefix.strip("/")


DIGEST_METADATA = "dslab-etag"  # on directory buckets: the ETag a general purpose bucket would give


def _stored_digest(client, bucket: str, key: str) -> str | None:
    from botocore.exceptions import ClientError
    try:
        return client.head_object(Bucket=bucket, Key=key).get("Metadata", {}).get(DIGEST_METADATA)
    except ClientError:
        return None


def upload(src: Path, to: str, s3_client=None, threads: int = 8, part_size: int = 16 * 1024 * 1024,
           progress: Callable[[int], None] = _noop, total_cb: Callable[[int], None] = _noop,
           prefixes: int = 1) -> dict:
    """Upload a dataset folder; only what is missing or changed (size and ETag) is sent.

    Writes a SageMaker ManifestFile beside the prefix (``<prefix>.manifest``) listing every object. ``prefixes``
    > 1 spreads the files round-robin over that many S3 prefixes under it (``p00/``, ``p01/``, ...: each serves
    its own 5,500 GETs a second), which every source and the training script read through (training/dslab_train/
    layout.py); `dslab size` says how many a cluster needs.
    """
    from boto3.s3.transfer import TransferConfig

    if not src.is_dir():
        raise ConfigError("--src", f"{src} is not a folder")
    bucket, prefix = parse_s3_uri(to)
    client = s3_client or _s3_client()
    every = sorted(p for p in src.rglob("*") if p.is_file())
    # Metadata (dataset.json, manifest.json) goes beside the prefix, not in it: a Pipe channel
    # streams every object under the prefix, and must see data only.
    files = [p for p in every if p.name not in METADATA_FILES]
    metadata = [p for p in every if p.name in METADATA_FILES and p.parent == src]
    if not files:
        raise ConfigError("--src", f"{src} is empty: nothing to upload")
    if not 1 <= prefixes <= len(files):
        raise ConfigError("--prefixes", f"{prefixes}: give 1 to the dataset's {len(files):,} files (each prefix holds some)")
    existing: dict[str, tuple[int, str]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/"):
        for obj in page.get("Contents", []):
            existing[obj["Key"]] = (obj["Size"], obj["ETag"].strip('"'))
    # A channel reads everything under the prefix: another spread would leave the old objects beside the new ones.
    there = spread_count({key[len(prefix) + 1:].split("/", 1)[0] if "/" in key[len(prefix) + 1:] else ""
                          for key in existing})
    if existing and there != prefixes:
        raise ConfigError("--prefixes", f"s3://{bucket}/{prefix}/ holds {len(existing):,} objects spread over {there} "
                          f"prefix(es), and a channel would read both layouts", f"--prefixes {there}, or delete them "
                          f"first (aws s3 rm --recursive s3://{bucket}/{prefix}/)")
    config = TransferConfig(multipart_threshold=part_size, multipart_chunksize=part_size, max_concurrency=4,
                            use_threads=True)
    # A directory bucket's ETag is not the object's MD5 (PutObject API reference), so there the MD5
    # travels as metadata and an existing object of the same size is compared through HeadObject.
    directory = is_express_bucket(bucket)
    todo = []
    sized = []
    for index, path in enumerate(files):
        spread = f"{spread_folder(index, prefixes)}/" if prefixes > 1 else ""
        key = f"{prefix}/{spread}{path.relative_to(src).as_posix()}"
        size = path.stat().st_size
        sized.append((path, key, size))
        known = existing.get(key)
        if known and known[0] == size:
            digest = s3_etag(path, part_size, part_size)
            if (_stored_digest(client, bucket, key) if directory else known[1]) == digest:
                continue
        todo.append((path, key, size))
    total_cb(sum(size for _, _, size in todo))

    def send(item):
        path, key, size = item
        extra = {"Metadata": {DIGEST_METADATA: s3_etag(path, part_size, part_size)}} if directory else None
        client.upload_file(str(path), bucket, key, Config=config, Callback=progress, ExtraArgs=extra)
        return size

    with ThreadPoolExecutor(threads) as pool:
        sent = sum(pool.map(send, todo))
    keys = [key[len(prefix) + 1:] for _, key, _ in sized]
    manifest = [{"prefix": f"s3://{bucket}/{prefix}/"}] + keys
    client.put_object(Bucket=bucket, Key=f"{prefix}.manifest", Body=json.dumps(manifest).encode())
    for path in metadata:
        client.put_object(Bucket=bucket, Key=f"{prefix}.{path.name}", Body=path.read_bytes())
    summary = {**_summary([size for _, _, size in sized], f"s3://{bucket}/{prefix}/"), "format": _format_of(keys),
               "prefixes": prefixes}
    stats_file = _put_stats(client, bucket, prefix, summary, "dslab dataset upload")
    return {"to": f"s3://{bucket}/{prefix}/", "files": len(files), "uploaded": len(todo),
            "skipped": len(files) - len(todo), "bytes_uploaded": sent, "manifest": f"s3://{bucket}/{prefix}.manifest",
            "prefixes": prefixes,
            "stats": stats_file}

