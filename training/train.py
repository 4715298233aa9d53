"""DataSourceLab training script: reads the job's channel in any mode and format, runs the
(emulated or real) model, and measures the data pipeline.

SageMaker script mode runs it as the entry point (``sagemaker_program=train.py``). It learns the
input mode from the container contract, prints metric lines for the job's metric definitions
(``metric_definitions.json``), writes ``metrics.json`` to the output data directory (on a cluster,
``metrics-<host>.json`` on every host) and, on the first host only, a model artifact to the model
directory. On failure it writes one line to ``/opt/ml/output/failure`` (the
job's FailureReason) and exits non-zero. Given a ``checkpoint_plan`` hyperparameter it writes and reads
checkpoints instead, as DLIO does for MLPerf Storage (``run_checkpoint_trial``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dslab_train.checkpoint import CheckpointError, CheckpointSpec, run_checkpoints  # noqa: E402
from dslab_train.compute import PRESETS, EmulatedCompute, TorchResNet50  # noqa: E402
from dslab_train.contract import SCRIPT_INPUT, ContractError, JobContext, load_context  # noqa: E402
from dslab_train.pipeline import (DataError, EpochPipeline, JpgSource, NpzSource, PipelineConfig,  # noqa: E402
                                  ShardSource, default_workers, detect_format, jpg_records, npz_records, pipe_records,
                                  s3_jpg_records, s3_shard_records, shard_records)
from dslab_train.s3source import (DEFAULT_CONCURRENCY, JPEG_SUFFIXES, S3Reads, S3ReadError, detect_s3_format,  # noqa: E402
                                  jpg_labels)
from dslab_train.records import RecordError  # noqa: E402

from dslab_report import dlio_au, metric, metrics_file_name  # noqa: E402  one format for the lab's metric lines and users'


def _int(hp: dict, key: str, default: int) -> int:
    value = hp.get(key, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ContractError(f"hyperparameter {key}={value!r} must be a whole number") from None


def build_compute(hp: dict, num_classes: int):
    model = hp.get("model")
    if model:
        if model != "resnet50":
            raise ContractError(f"hyperparameter model={model!r}: only 'resnet50' is available")
        return TorchResNet50(num_classes, _int(hp, "batch_size", 64), _int(hp, "seed", 0))
    preset = hp.get("compute_preset")
    # The lab names every preset it emulates (premise.py has more than MLPerf Storage's three) and sends its batch and
    # step time beside the name; a preset alone must be one this script knows.
    if preset and preset not in PRESETS and "compute_seconds_per_batch" not in hp:
        raise ContractError(f"hyperparameter compute_preset={preset!r}: use one of {', '.join(PRESETS)}, or give "
                            "compute_seconds_per_batch and batch_size")
    batch_default, seconds_default = PRESETS.get(preset or "v100", PRESETS["v100"])
    seconds = float(hp.get("compute_seconds_per_batch", seconds_default))
    # MLPerf Storage's simulated accelerators per host: each step takes one batch per accelerator (data
    # parallel, synchronous), so the host eats `accelerators` times one accelerator's samples per second.
    accelerators = _int(hp, "accelerators", 1)
    if accelerators < 1:
        raise ContractError(f"hyperparameter accelerators={accelerators}: give 1 or more")
    return EmulatedCompute(seconds, _int(hp, "batch_size", batch_default) * accelerators, accelerators)


def make_sources(ctx: JobContext, dataset_format: str):
    """Directory modes: scan once (the listing is what FastFile pre-fetches as metadata)."""
    root = ctx.channel_dir
    if not root.exists():
        raise ContractError(f"channel directory {root} does not exist: the channel '{ctx.channel}' was not mounted")
    if dataset_format == "auto":
        dataset_format = detect_format(root)
    rank, hosts = ctx.shard
    if dataset_format == "jpg":
        source = JpgSource.scan(root, rank, hosts)
        if not source.files:
            raise DataError(f"channel '{ctx.channel}' is empty: no .jpg files under {root}. Check the dataset "
                            "prefix (upload it with `dslab dataset upload`) or the file system's DirectoryPath")
        return "jpg", jpg_records(source), len(source.classes)
    if dataset_format == "npz":   # a DLIO workload's (3D U-Net's): read with zipfile and numpy, not decoded
        source = NpzSource.scan(root, rank, hosts)
        if not source.files:
            raise DataError(f"channel '{ctx.channel}' is empty: no .npz files under {root}. Check the dataset prefix "
                            "(`dslab dataset generate --workload` then `dslab dataset upload`) or the file system's DirectoryPath")
        return "npz", npz_records(source), 1
    if dataset_format == "tfrecord":
        jpgs = [p for p in root.rglob("*.jpg")][:1]
        if jpgs:
            raise DataError(f"dataset_format=tfrecord but {root} holds JPEG files ({jpgs[0].name}); "
                            "set dataset_format: jpg or point the channel at the packed shards")
        source = ShardSource.scan(root, rank, hosts)
        if not source.shards:
            raise DataError(f"channel '{ctx.channel}' is empty: no TFRecord shards under {root}. Check the dataset "
                            "prefix or the file system's DirectoryPath")
        return "tfrecord", shard_records(source), 257
    if dataset_format == "unknown":
        raise DataError(f"channel '{ctx.channel}' is empty or holds neither JPEG files nor TFRecord shards ({root})")
    raise ContractError(f"hyperparameter dataset_format={dataset_format!r}: use jpg, tfrecord, npz or auto")


def make_s3_sources(ctx: JobContext, dataset_format: str):
    """Script mode: list the dataset's prefix (this host's share of it) and read it with GETs."""
    hp = ctx.hyperparameters
    reads = S3Reads(str(hp["dataset_uri"]), str(hp.get("s3_client", "auto")),
                    _int(hp, "s3_concurrency", DEFAULT_CONCURRENCY), region=hp.get("sagemaker_region"))
    objects = reads.list()
    if dataset_format == "auto":
        dataset_format = detect_s3_format(objects)
    if dataset_format == "jpg":
        objects = [o for o in objects if o.key.lower().endswith(JPEG_SUFFIXES)]
        labels, classes = jpg_labels(objects, reads.prefix)
        rank, hosts = ctx.shard
        objects, labels = objects[rank::hosts], labels[rank::hosts]
        if not objects:
            raise DataError(f"{reads.uri} holds no .jpg objects: check the dataset prefix (upload it with "
                            "`dslab dataset upload`) or dataset_format")
        return reads, "jpg", s3_jpg_records(reads, objects, labels, _int(hp, "s3_concurrency", DEFAULT_CONCURRENCY)), len(classes)
    if dataset_format == "npz":
        rank, hosts = ctx.shard
        objects = [o for o in objects if o.key.lower().endswith(".npz")][rank::hosts]
        if not objects:
            raise DataError(f"{reads.uri} holds no .npz objects: check the dataset prefix or dataset_format")
        return reads, "npz", s3_jpg_records(reads, objects, [-1] * len(objects),
                                            _int(hp, "s3_concurrency", DEFAULT_CONCURRENCY), npz=True), 1
    if dataset_format == "tfrecord":
        jpgs = [o.key for o in objects if o.key.lower().endswith(JPEG_SUFFIXES)][:1]
        if jpgs:
            raise DataError(f"dataset_format=tfrecord but {reads.uri} holds JPEG objects ({jpgs[0]}); "
                            "set dataset_format: jpg or point dataset_uri at the packed shards")
        rank, hosts = ctx.shard
        shards = [o for o in objects if not o.key.endswith((".json", ".manifest", ".txt"))][rank::hosts]
        if not shards:
            raise DataError(f"{reads.uri} holds no TFRecord shards: check the dataset prefix")
        return reads, "tfrecord", s3_shard_records(reads, shards), 257
    if dataset_format == "unknown":
        raise DataError(f"{reads.uri} is empty: no objects under the prefix. Upload the dataset "
                        "(`dslab dataset upload`) or fix dataset_uri")
    raise ContractError(f"hyperparameter dataset_format={dataset_format!r}: use jpg, tfrecord, npz or auto")


def checkpoint_directory(ctx: JobContext) -> tuple[Path, bool]:
    """Where checkpoints go, and whether every host sees the same folder. ``checkpoint_channel``: a read-write file
    system channel (FSx for Lustre, EFS), shared by the hosts, with ``checkpoint_dir`` a folder inside it; else
    ``checkpoint_dir``, default SageMaker's checkpoint LocalPath, /opt/ml/checkpoints ("The default directory is
    /opt/ml/checkpoints/", CheckpointConfig.LocalPath), each host's own volume, which SageMaker syncs to S3."""
    hp = ctx.hyperparameters
    channel, folder = hp.get("checkpoint_channel"), hp.get("checkpoint_dir")
    if channel:
        if channel not in ctx.channel_dirs:
            raise ContractError(f"hyperparameter checkpoint_channel={channel!r} names no input channel "
                                f"(have: {', '.join(sorted(ctx.channel_dirs)) or 'none'})")
        if folder and Path(str(folder)).is_absolute():
            raise ContractError(f"hyperparameter checkpoint_dir={folder!r} must be a folder inside the channel "
                                "checkpoint_channel names, not an absolute path")
        return ctx.channel_dirs[channel] / str(folder or ""), True
    return (Path(str(folder)) if folder else ctx.base / "checkpoints"), False


def durable_listing(ctx: JobContext, shared: bool):
    """(uri, listing) for a writer SageMaker's S3 sync uploads for (``checkpoint_s3_uri``): the keys under the URI,
    relative to it, with their sizes; None for a file-system target or a job that names no URI."""
    uri = ctx.hyperparameters.get("checkpoint_s3_uri")
    if not uri or shared:
        return None
    reads = S3Reads(str(uri), "boto3", concurrency=1, denied_fix=(
        "the job's role may not list the checkpoints: give it s3:ListBucket on the bucket for the checkpoint prefix "
        "(the lab's role has it for checkpoints/)"))

    def listing() -> dict[str, int]:
        return {o.key[len(reads.prefix):]: o.size for o in reads.list()}
    return str(uri), listing


def run_checkpoint_trial(ctx: JobContext) -> dict:
    """A checkpoint trial: the plan's checkpoints written, the cache dropped, read back (dslab_train/checkpoint.py)."""
    started = time.perf_counter()
    spec = CheckpointSpec.from_hyperparameter(ctx.hyperparameters["checkpoint_plan"])
    directory, shared = checkpoint_directory(ctx)
    print(f"dslab: checkpoints of {spec.workload} ({spec.mode} mode, {spec.processes} processes, scale {spec.scale:g}) "
          f"in {directory} ({'shared by the hosts' if shared else 'this host'}): {spec.writes} written, {spec.reads} "
          f"read, {spec.interval_seconds:g} s apart; host {ctx.current_host}/{len(ctx.hosts)}", flush=True)
    cleanup = str(ctx.hyperparameters.get("checkpoint_cleanup", False)).lower() in ("1", "true")
    figures = run_checkpoints(spec, directory, ctx.host_rank, len(ctx.hosts), shared, cleanup=cleanup,
                              durable=durable_listing(ctx, shared))
    for phase in ("save", "stall", "durable", "load"):
        for step, seconds in enumerate(figures.get(f"{phase}_seconds") or [], start=1):
            if seconds is not None:
                metric(f"checkpoint_{phase}_seconds", seconds, checkpoint=step)
    # The last line of each name is the value SageMaker keeps: the mean over the checkpoints, as DLIO's summary.
    for name in ("save_seconds", "save_gb_per_second", "stall_seconds", "durable_seconds", "load_seconds",
                 "load_gb_per_second"):
        if figures.get(f"{name}_mean") is not None:
            metric(f"checkpoint_{name}", figures[f"{name}_mean"])
    summary = {"checkpoint": figures, "input_mode": ctx.input_mode, "host": ctx.current_host, "hosts": len(ctx.hosts),
               "script_seconds": time.perf_counter() - started}
    ctx.output_data_dir.mkdir(parents=True, exist_ok=True)
    (ctx.output_data_dir / metrics_file_name(ctx.current_host, ctx.hosts)).write_text(json.dumps(summary, indent=2))
    ctx.model_dir.mkdir(parents=True, exist_ok=True)
    if ctx.host_rank == 0:
        (ctx.model_dir / "model.json").write_text(json.dumps({"model": "checkpoint trial", "workload": spec.workload}))
    return summary


def run(ctx: JobContext) -> dict:
    hp = ctx.hyperparameters
    if hp.get("checkpoint_plan"):
        return run_checkpoint_trial(ctx)
    started = time.perf_counter()
    epochs = _int(hp, "epochs", 1)
    dataset_format = str(hp.get("dataset_format", "auto"))
    workers = _int(hp, "workers", 0) or default_workers(ctx.num_cpus)
    is_pipe = ctx.input_mode == "Pipe"
    reads = None

    if ctx.input_mode == SCRIPT_INPUT:
        reads, dataset_format, records, num_classes = make_s3_sources(ctx, dataset_format)
        records_for_epoch = lambda epoch: records
    elif is_pipe:
        if dataset_format not in ("jpg", "tfrecord", "npz"):
            raise ContractError("Pipe mode needs hyperparameter dataset_format (jpg, tfrecord or npz): a stream cannot be listed")
        records_for_epoch = lambda epoch: pipe_records(ctx.pipe_path(epoch), ctx.record_wrapper, dataset_format,
                                                       float(hp.get("pipe_timeout_seconds", 600)), shard=ctx.shard)
        num_classes = _int(hp, "num_classes", 257)
    else:
        dataset_format, records, num_classes = make_sources(ctx, dataset_format)
        records_for_epoch = lambda epoch: records

    compute = build_compute(hp, num_classes)
    batch_size = compute.batch_size
    config = PipelineConfig(
        batch_size=batch_size, workers=workers,
        prefetch=_int(hp, "prefetch", 0) or min(2048, max(4 * batch_size, 4 * workers)),  # four batches absorb decode jitter
        reader_threads=_int(hp, "reader_threads", 4),
        shuffle_buffer=_int(hp, "shuffle_buffer", 1024),
        seed=_int(hp, "seed", 0),
        verify_crc=str(hp.get("verify_crc", "false")).lower() in ("1", "true"),
        max_samples=_int(hp, "max_samples", 0))
    kind = "Pipe" if is_pipe else (f"S3 ({reads.client_name})" if reads else "directory")
    print(f"dslab: mode={kind} input_mode={ctx.input_mode} "
          f"wrapper={ctx.record_wrapper} format={dataset_format} epochs={epochs} batch={batch_size} "
          f"workers={workers} prefetch={config.prefetch} compute={compute.device} "
          f"accelerators={getattr(compute, 'accelerators', 1)} host={ctx.current_host}/{len(ctx.hosts)}", flush=True)

    per_epoch = []
    labels: Counter = Counter()
    total_samples = total_bytes = 0
    total_stall = total_compute_all = 0.0
    first_batch_overall = None
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="decode") as pool:
        for epoch in range(epochs):
            epoch_start = time.perf_counter()
            pipeline = EpochPipeline(config, pool, epoch, records_for_epoch(epoch))
            samples = nbytes = steps = 0
            compute_s = stall_s = compute_all = 0.0
            first_batch = first_step_end = None
            last = epoch_start
            try:
                for batch in pipeline:
                    got = time.perf_counter()
                    step_compute = compute.step(batch.images, batch.labels)
                    now = time.perf_counter()
                    compute_all += step_compute
                    if steps == 0:  # MLPerf Storage: the first step is excluded from AU
                        first_batch = got - epoch_start
                        first_step_end = now
                    else:
                        compute_s += step_compute
                        stall_s += got - last
                    steps += 1
                    samples += len(batch.labels)
                    nbytes += batch.nbytes
                    labels.update(batch.labels.tolist())
                    last = now
            finally:
                pipeline.close()
            epoch_end = time.perf_counter()
            wall = epoch_end - epoch_start
            if samples == 0:
                raise DataError(f"epoch {epoch} read no samples: the channel '{ctx.channel}' is empty")
            measured = epoch_end - first_step_end if steps > 1 else 0.0
            au = 100.0 * compute_s / measured if measured > 0 else None
            # AU (MLPerf Storage, like DLIO) leaves the first step out; what the instance bills for is
            # the whole epoch, first batch included: compute over that is the end-to-end efficiency.
            end_to_end = 100.0 * compute_all / wall
            stats = {"epoch": epoch, "samples": samples, "bytes": nbytes, "steps": steps,
                     "end_to_end_efficiency_percent": end_to_end,
                     "epoch_seconds": wall, "samples_per_second": samples / wall,
                     "mb_per_second": nbytes / wall / 1e6, "time_to_first_batch_seconds": first_batch,
                     "data_stall_seconds": stall_s, "compute_seconds": compute_s, "measured_seconds": measured,
                     "au_percent": au}
            per_epoch.append(stats)
            metric("epoch_seconds", wall, epoch=epoch)
            metric("samples_per_second", stats["samples_per_second"], epoch=epoch)
            metric("mb_per_second", stats["mb_per_second"], epoch=epoch)
            metric("data_stall_seconds", stall_s, epoch=epoch)
            if au is not None:
                metric("au_percent", au, epoch=epoch)
            metric("end_to_end_efficiency_percent", end_to_end, epoch=epoch)
            if first_batch_overall is None:
                first_batch_overall = first_batch
            total_samples += samples
            total_bytes += nbytes
            total_compute_all += compute_all
            total_stall += stall_s

    wall = sum(e["epoch_seconds"] for e in per_epoch)
    summary = {
        "samples_per_second": total_samples / wall,
        "mb_per_second": total_bytes / wall / 1e6,
        # DLIO's (MLPerf Storage's) AU: the mean of the epochs' AU, not compute over all the epochs' time (dlio_au).
        "au_percent": dlio_au(e["au_percent"] for e in per_epoch),
        "au_percent_per_epoch": [e["au_percent"] for e in per_epoch],
        "end_to_end_efficiency_percent": 100.0 * total_compute_all / wall,
        "time_to_first_batch_seconds": first_batch_overall,
        "epoch_seconds": [e["epoch_seconds"] for e in per_epoch],
        "data_stall_seconds": total_stall,
        "samples": total_samples,
        "bytes": total_bytes,
        "epochs": epochs,
        "per_epoch": per_epoch,
        "label_counts": {str(k): v for k, v in sorted(labels.items())},
        "input_mode": ctx.input_mode,
        "record_wrapper": ctx.record_wrapper,
        "dataset_format": dataset_format,
        "workers": workers,
        "prefetch": config.prefetch,
        "batch_size": batch_size,
        "compute": compute.device,
        "accelerators": getattr(compute, "accelerators", 1),
        "host": ctx.current_host,
        "hosts": len(ctx.hosts),
        "script_seconds": time.perf_counter() - started,
    }
    if reads is not None:
        summary.update(s3_client=reads.client_name, s3_requests=reads.requests, dataset_uri=reads.uri)
    metric("samples", total_samples)
    metric("samples_per_second", summary["samples_per_second"])
    metric("mb_per_second", summary["mb_per_second"])
    if summary["au_percent"] is not None:
        metric("au_percent", summary["au_percent"])
    metric("end_to_end_efficiency_percent", summary["end_to_end_efficiency_percent"])
    if first_batch_overall is not None:
        metric("time_to_first_batch_seconds", first_batch_overall)

    ctx.output_data_dir.mkdir(parents=True, exist_ok=True)
    # SageMaker merges every host's output and model folders into one archive each and asks that no
    # names clash: each host its own metrics file, and one model, the first host's (data-parallel
    # replicas hold the same weights).
    (ctx.output_data_dir / metrics_file_name(ctx.current_host, ctx.hosts)).write_text(json.dumps(summary, indent=2))
    ctx.model_dir.mkdir(parents=True, exist_ok=True)
    if ctx.host_rank == 0:
        if isinstance(compute, TorchResNet50):
            compute.save(ctx.model_dir / "model.pt")
        else:
            (ctx.model_dir / "model.json").write_text(json.dumps(
                {"model": "emulated", "seconds_per_batch": compute.seconds_per_batch, "batch_size": batch_size,
                 "samples_seen": total_samples}, indent=2))
    return summary


def fail(ctx_failure_file: Path | None, message: str) -> int:
    line = " ".join(message.split())[:1000]
    if ctx_failure_file is None:  # the contract itself was unreadable: use its default place
        ctx_failure_file = Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml")) / "output" / "failure"
    print(f"dslab: FAILED: {line}", file=sys.stderr, flush=True)
    if ctx_failure_file is not None:
        try:
            ctx_failure_file.parent.mkdir(parents=True, exist_ok=True)
            ctx_failure_file.write_text(line + "\n")
        except OSError:
            pass
    return 1


def main() -> int:
    ctx = None
    try:
        ctx = load_context()
        run(ctx)
        return 0
    except (ContractError, DataError, RecordError, CheckpointError, S3ReadError) as err:
        return fail(ctx.failure_file if ctx else None, str(err))
    except Exception as err:  # an unexpected bug: still give the operator one line and the trace in the log
        traceback.print_exc()
        return fail(ctx.failure_file if ctx else None, f"{type(err).__name__}: {err}")


if __name__ == "__main__":
    sys.exit(main())
