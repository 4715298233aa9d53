"""The data pipeline: parallel readers with prefetch, JPEG decode, random-resized-crop, flip, batching.

Threads do the work: file reads and Pillow's decode and resize release the GIL, and a training
step (emulated with a sleep, or a real model on the GPU) leaves the CPU to the pipeline.

    sources (files / shards / a Pipe FIFO) -> reader threads -> shuffle buffer -> decode pool
        -> in-order prefetch queue -> batches
"""

from __future__ import annotations

import io
import math
import queue
import zipfile
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from PIL import Image

from .layout import class_folder, spread_count
from .records import (RecordError, decode_example, is_dlio_example, looks_like_tfrecord, read_recordio, read_tfrecords,
                      RECORDIO_MAGIC)
from .s3source import RANGES_AHEAD, RangeStream, ordered_fetch

IMAGE_SIZE = 224
JPEG_SUFFIXES = {".jpg", ".jpeg"}
NPZ_SUFFIX = ".npz"
# A DLIO sample, read and not decoded (DLIO's readers hand the bytes to a sleep that stands for the model): its
# batch carries no pixels, only its bytes counted.
DLIO_SAMPLE = np.empty(0, dtype=np.uint8)
LABEL_COMMENT = b"dslab:label="


class DataError(RuntimeError):
    """The data cannot be read as asked; the message tells the operator what to change."""


@dataclass
class Item:
    image: np.ndarray
    label: int
    nbytes: int


@dataclass
class Batch:
    images: np.ndarray
    labels: np.ndarray
    nbytes: int


# ---- Labels embedded in JPEGs (so a Pipe stream, which carries no key names, keeps them) -------

def jpeg_comment_label(data: bytes) -> int:
    """The class stored in a JPEG COM segment ``dslab:label=<n>``, or -1."""
    if data[:2] != b"\xff\xd8":
        return -1
    pos, end = 2, min(len(data), 4096)
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            return -1
        marker = data[pos + 1]
        if marker == 0xDA:  # start of scan: no more header segments
            return -1
        length = (data[pos + 2] << 8) | data[pos + 3]
        if marker == 0xFE:
            body = data[pos + 4:pos + 2 + length]
            if body.startswith(LABEL_COMMENT):
                try:
                    return int(body[len(LABEL_COMMENT):].split(b"\0")[0])
                except ValueError:
                    return -1
        pos += 2 + length
    return -1


def with_label_comment(jpeg: bytes, label: int) -> bytes:
    """Insert a COM segment after SOI: the image data is untouched (no re-encoding)."""
    if jpeg[:2] != b"\xff\xd8":
        raise ValueError("not a JPEG file")
    body = LABEL_COMMENT + str(label).encode()
    return jpeg[:2] + b"\xff\xfe" + (len(body) + 2).to_bytes(2, "big") + body + jpeg[2:]


# ---- Decode and augmentation ---------------------------------------------------------------------

def random_resized_crop_box(width: int, height: int, rng: random.Random,
                            scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop box: (left, top, width, height)."""
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        h, w = height, int(round(height * ratio[1]))
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def decode_and_augment(data: bytes, rng: random.Random, size: int = IMAGE_SIZE) -> np.ndarray:
    image = Image.open(io.BytesIO(data))
    width, height = image.size
    left, top, w, h = random_resized_crop_box(width, height, rng)
    if image.format == "JPEG" and w > 2 * size and h > 2 * size:
        # Let libjpeg decode at a reduced scale while the crop still covers >= size pixels.
        image.draft("RGB", (math.ceil(width * size / w), math.ceil(height * size / h)))
        sx, sy = image.size[0] / width, image.size[1] / height
        left, top, w, h = int(left * sx), int(top * sy), max(1, int(w * sx)), max(1, int(h * sy))
    if image.mode != "RGB":
        image = image.convert("RGB")
    image = image.resize((size, size), Image.BILINEAR, box=(left, top, left + w, top + h))
    if rng.random() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(image, dtype=np.uint8)


# ---- Sources -----------------------------------------------------------------------------------

@dataclass
class JpgSource:
    """One JPEG per file, the class from its folder (Caltech-256 layout); file order shuffled per epoch."""
    files: list[Path]
    labels: list[int]
    classes: list[str]

    @classmethod
    def scan(cls, root: Path, host_rank: int = 0, host_count: int = 1) -> "JpgSource":
        files = sorted(p for p in root.rglob("*") if p.suffix.lower() in JPEG_SUFFIXES and p.is_file())
        # The class is the file's folder, past the p00/, p01/... a dataset spread over S3 prefixes has (layout.py).
        folders = [p.relative_to(root).parts[:-1] for p in files]
        spread = spread_count({f[0] if f else "" for f in folders}) > 1
        names = [class_folder(f, spread) for f in folders]
        classes = sorted({n for n in names if n})
        index = {name: i for i, name in enumerate(classes)}
        return cls(files[host_rank::host_count], [index.get(n, -1) for n in names][host_rank::host_count], classes)


@dataclass
class ShardSource:
    """TFRecord shards; shard order shuffled per epoch, records mixed through a shuffle buffer."""
    shards: list[Path]

    @classmethod
    def scan(cls, root: Path, host_rank: int = 0, host_count: int = 1) -> "ShardSource":
        shards = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() not in JPEG_SUFFIXES
                        and not p.name.startswith(".") and p.suffix not in (".json", ".manifest", ".txt"))
        return cls(shards[host_rank::host_count])


@dataclass
class NpzSource:
    """NumPy .npz files (a DLIO workload's, e.g. 3D U-Net's): each holds ``x``, samples along its last axis."""
    files: list[Path]

    @classmethod
    def scan(cls, root: Path, host_rank: int = 0, host_count: int = 1) -> "NpzSource":
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() == NPZ_SUFFIX)
        return cls(files[host_rank::host_count])


def npz_items(data, where: str) -> list[Item]:
    """The samples of an .npz (a file path or its bytes), read as DLIO's npz reader reads them (``x``, one sample per
    index of its last axis), with the standard library's zipfile and numpy's .npy reader."""
    try:
        with zipfile.ZipFile(data if isinstance(data, Path) else io.BytesIO(data)) as archive:
            with archive.open("x.npy") as member:
                x = np.lib.format.read_array(member, allow_pickle=False)
    except KeyError:
        raise DataError(f"{where}: an .npz without the array 'x' (DLIO's layout: x = samples, y = labels)") from None
    except (zipfile.BadZipFile, ValueError, OSError) as err:
        raise DataError(f"{where}: not a readable .npz ({err}); remove or replace the file") from None
    count = x.shape[-1] if x.ndim else 1
    per_sample = x.nbytes // max(1, count)
    return [Item(DLIO_SAMPLE, -1, per_sample) for _ in range(count)]


def npz_records(source: NpzSource):
    """One task per file (its samples come back together), files in the epoch's shuffled order."""
    def records(pipe: EpochPipeline):
        order = list(range(len(source.files)))
        pipe.rng.shuffle(order)
        for i in order:
            path = source.files[i]
            yield (lambda rng, path=path: npz_items(path, str(path))), pipe.rng.getrandbits(32)
    return records


def detect_format(root: Path) -> str:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            if path.suffix.lower() in JPEG_SUFFIXES:
                return "jpg"
            if path.suffix.lower() == NPZ_SUFFIX:
                return "npz"
            with open(path, "rb") as handle:
                if looks_like_tfrecord(handle.read(12)):
                    return "tfrecord"
    return "unknown"


# ---- The pipeline ----------------------------------------------------------------------------

@dataclass
class PipelineConfig:
    batch_size: int
    workers: int
    prefetch: int                       # decoded samples in flight
    reader_threads: int = 2
    shuffle_buffer: int = 1024
    seed: int = 0
    verify_crc: bool = False
    max_samples: int = 0                # per epoch; 0 = all
    image_size: int = IMAGE_SIZE


_END = object()


class EpochPipeline:
    """Iterates one epoch as batches; reading and decoding run ahead on background threads."""

    def __init__(self, config: PipelineConfig, pool: ThreadPoolExecutor, epoch: int,
                 records: Callable[["EpochPipeline"], Iterator[tuple[Callable[[random.Random], Item], int]]]):
        self.config = config
        self.pool = pool
        self.epoch = epoch
        self.rng = random.Random(config.seed * 1_000_003 + epoch)
        self._records = records
        self._futures: queue.Queue = queue.Queue(maxsize=max(1, config.prefetch))
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._dispatcher = threading.Thread(target=self._dispatch, name=f"dispatch-{epoch}", daemon=True)
        self._dispatcher.start()

    def _dispatch(self) -> None:
        try:
            count = 0
            for task, task_seed in self._records(self):
                if self._stop.is_set():
                    break
                self._futures.put(self.pool.submit(task, random.Random(task_seed)))
                count += 1
                if self.config.max_samples and count >= self.config.max_samples:
                    break
        except BaseException as err:  # surfaced in the consuming thread
            self._error = err
        finally:
            self._futures.put(_END)

    def close(self) -> None:
        self._stop.set()
        while self._dispatcher.is_alive():
            try:
                self._futures.get(timeout=0.05)
            except queue.Empty:
                pass

    def __iter__(self) -> Iterator[Batch]:
        size = self.config.batch_size
        images: list[np.ndarray] = []
        labels: list[int] = []
        nbytes = 0
        while True:
            future = self._futures.get()
            if future is _END:
                break
            result = future.result()
            for item in (result if isinstance(result, list) else (result,)):   # a file of several samples: a list
                images.append(item.image)
                labels.append(item.label)
                nbytes += item.nbytes
                if len(images) == size:
                    yield Batch(np.stack(images), np.asarray(labels, dtype=np.int64), nbytes)
                    images, labels, nbytes = [], [], 0
        if self._error is not None:
            raise self._error
        if images:
            yield Batch(np.stack(images), np.asarray(labels, dtype=np.int64), nbytes)


def _decode_task(data: bytes, label: int, size: int, where: str) -> Callable[[random.Random], Item]:
    def run(rng: random.Random) -> Item:
        try:
            image = decode_and_augment(data, rng, size)
        except Exception as err:
            raise DataError(f"{where}: cannot decode the image ({type(err).__name__}); the record is not an image "
                            "or is damaged: keep only images under the dataset prefix") from None
        return Item(image, label, len(data))
    return run


def _file_task(path: Path, label: int, size: int) -> Callable[[random.Random], Item]:
    def run(rng: random.Random) -> Item:
        try:
            data = path.read_bytes()
        except OSError as err:
            raise DataError(f"{path}: cannot read ({err.strerror})") from None
        try:
            image = decode_and_augment(data, rng, size)
        except Exception as err:
            raise DataError(f"{path}: cannot decode the JPEG ({type(err).__name__}); remove or replace the file") from None
        return Item(image, label, len(data))
    return run


def jpg_records(source: JpgSource):
    def records(pipe: EpochPipeline):
        order = list(range(len(source.files)))
        pipe.rng.shuffle(order)
        for i in order:
            yield _file_task(source.files[i], source.labels[i], pipe.config.image_size), pipe.rng.getrandbits(32)
    return records


# Records a shuffle buffer holds before it yields the first one. A buffer that must fill completely
# first (tf.data's) makes a sequential source (a Pipe FIFO, a shard) wait for buffer_size records
# before the first batch: 1,024 JPEGs through a FIFO was most of a small epoch. WebDataset's shuffle
# starts after `initial` records and grows the buffer to its full size while it yields.
SHUFFLE_INITIAL = 100


def _shuffled(items: Iterator[tuple[bytes, int, str]], buffer_size: int, rng: random.Random,
              initial: int = SHUFFLE_INITIAL):
    """A shuffle buffer on a sequential source: yields from ``initial`` records on, reading two
    records per yield until it holds ``buffer_size``, then one (WebDataset's shuffle(bufsize, initial))."""
    initial = max(1, min(initial, buffer_size))
    buffer: list = []
    source = iter(items)
    for item in source:
        buffer.append(item)
        if len(buffer) < buffer_size:
            extra = next(source, _END)
            if extra is not _END:
                buffer.append(extra)
        if len(buffer) < initial:
            continue
        i = rng.randrange(len(buffer))
        buffer[i], buffer[-1] = buffer[-1], buffer[i]
        yield buffer.pop()
    rng.shuffle(buffer)
    yield from buffer


_END = object()


def _open_file(shard: Path):
    return open(shard, "rb", buffering=4 * 1024 * 1024)


def _read_shards_in_parallel(shards: list, threads: int, verify: bool, stop: threading.Event,
                             opener: Callable = _open_file, name: Callable = str):
    """Several shards read sequentially at once (what makes FastFile and FSx fast on large files).
    ``opener`` gives a shard's byte stream: a file, or ranged GETs of an S3 object (Script mode)."""
    out: queue.Queue = queue.Queue(maxsize=256)
    todo: queue.Queue = queue.Queue()
    for shard in shards:
        todo.put(shard)
    done = object()

    def reader():
        try:
            while not stop.is_set():
                try:
                    shard = todo.get_nowait()
                except queue.Empty:
                    break
                with opener(shard) as handle:
                    for offset, payload in read_tfrecords(handle, name(shard), verify):
                        out.put((payload, shard, offset))
                        if stop.is_set():
                            break
        except BaseException as err:
            out.put(err)
        finally:
            out.put(done)

    count = max(1, min(threads, len(shards)))
    workers = [threading.Thread(target=reader, daemon=True, name=f"shard-reader-{i}") for i in range(count)]
    for worker in workers:
        worker.start()
    finished = 0
    while finished < count:
        item = out.get()
        if item is done:
            finished += 1
        elif isinstance(item, BaseException):
            stop.set()
            raise item
        else:
            yield item


def _example_task(payload: bytes, where: str, size: int) -> Callable[[random.Random], Item]:
    def run(rng: random.Random) -> Item:
        try:
            if is_dlio_example(payload):   # a DLIO sample: its bytes are read, not decoded
                return Item(DLIO_SAMPLE, -1, len(payload))
            image, label = decode_example(payload)
        except ValueError as err:
            raise DataError(f"{where}: unreadable record ({err})") from None
        return _decode_task(image, label, size, where)(rng)
    return run


def _shard_epoch(pipe: EpochPipeline, shards: list, opener: Callable = _open_file, name: Callable = str):
    """One epoch of TFRecord shards in a shuffled order, reader_threads at a time, records through the
    shuffle buffer: files (``shard_records``) or S3 objects in ranged GETs (``s3_shard_records``)."""
    shards = list(shards)
    pipe.rng.shuffle(shards)
    stop = threading.Event()
    raw = ((payload, f"{name(shard)} record at byte offset {offset}")
           for payload, shard, offset in _read_shards_in_parallel(shards, pipe.config.reader_threads,
                                                                    pipe.config.verify_crc, stop, opener, name))
    try:
        for payload, where in _shuffled(raw, pipe.config.shuffle_buffer, pipe.rng):
            yield _example_task(payload, where, pipe.config.image_size), pipe.rng.getrandbits(32)
    finally:
        stop.set()


def shard_records(source: ShardSource):
    def records(pipe: EpochPipeline):
        yield from _shard_epoch(pipe, source.shards)
    return records


def s3_jpg_records(reads, objects, labels: list[int], concurrency: int, npz: bool = False):
    """Script mode, JPEG objects (``npz``: .npz objects): GETs ``concurrency`` at a time in the epoch's shuffled order."""
    def records(pipe: EpochPipeline):
        order = list(range(len(objects)))
        pipe.rng.shuffle(order)
        keys = [objects[i].key for i in order]
        label_of = {objects[i].key: labels[i] for i in order}
        with ThreadPoolExecutor(concurrency, thread_name_prefix="s3-get") as fetchers:
            for key, data in ordered_fetch(fetchers, keys, reads.get, concurrency):
                if npz:
                    yield (lambda rng, data=data, key=key: npz_items(data, reads.where(key))), pipe.rng.getrandbits(32)
                else:
                    yield _decode_task(data, label_of[key], pipe.config.image_size, reads.where(key)), pipe.rng.getrandbits(32)
    return records


def s3_shard_records(reads, objects):
    """Script mode, TFRecord shards: reader_threads shards at once, each streamed in ranged GETs."""
    def records(pipe: EpochPipeline):
        with ThreadPoolExecutor(max(2, pipe.config.reader_threads * RANGES_AHEAD), thread_name_prefix="s3-range") as fetchers:
            yield from _shard_epoch(pipe, objects, opener=lambda o: RangeStream(reads, o.key, o.size, fetchers),
                                    name=lambda o: reads.where(o.key))
    return records


def wait_for_fifo(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise DataError(f"Pipe input {path} did not appear within {timeout:.0f} s: is the channel's InputMode Pipe?")
        time.sleep(0.01)


class _Prefixed:
    """A stream with bytes already read put back in front (a FIFO cannot seek)."""

    def __init__(self, head: bytes, stream):
        self._head, self._stream = head, stream

    def read(self, n: int) -> bytes:
        if not self._head:
            return self._stream.read(n)
        if n <= len(self._head):
            out, self._head = self._head[:n], self._head[n:]
            return out
        out, self._head = self._head, b""
        return out + self._stream.read(n - len(out))


def _own_share(items, shard: tuple[int, int]):
    """Every hosts-th record from rank on: a FullyReplicated stream read by several hosts."""
    rank, hosts = shard
    if hosts <= 1:
        yield from items
        return
    for i, item in enumerate(items):
        if i % hosts == rank:
            yield item


def pipe_records(fifo: Path, record_wrapper: str, dataset_format: str, timeout: float = 600.0,
                 shard: tuple[int, int] = (0, 1)):
    """Records of one epoch's FIFO: TFRecord shards as streamed, or jpg objects wrapped in RecordIO. A
    FullyReplicated stream reaches every host whole: each keeps its share (``shard``: rank, hosts)."""
    def records(pipe: EpochPipeline):
        wait_for_fifo(fifo, timeout)
        with open(fifo, "rb", buffering=4 * 1024 * 1024) as raw_stream:
            head = raw_stream.read(12)
            stream = _Prefixed(head, raw_stream)
            if not head:
                raise DataError(f"Pipe {fifo.name} delivered no data: the dataset prefix is empty")
            is_recordio = int.from_bytes(head[:4], "little") == RECORDIO_MAGIC
            if dataset_format == "npz":
                if not is_recordio:
                    raise DataError("an npz dataset arrived through Pipe as one concatenated byte stream: file "
                                    "boundaries are lost. Set the channel's RecordWrapperType to RecordIO (dslab's "
                                    "record_wrapper: auto does this for npz datasets)")
                for offset, data in _own_share(read_recordio(stream, fifo.name), shard):
                    where = f"{fifo.name} record at byte offset {offset}"
                    yield (lambda rng, data=data, where=where: npz_items(data, where)), pipe.rng.getrandbits(32)
                return
            if dataset_format == "jpg" or (is_recordio and dataset_format != "tfrecord"):
                if not is_recordio:
                    if head[:2] == b"\xff\xd8":
                        raise DataError("a jpg dataset arrived through Pipe as one concatenated byte stream: "
                                        "image boundaries are lost. Set the channel's RecordWrapperType to "
                                        "RecordIO (dslab's record_wrapper: auto does this for jpg datasets)")
                    raise DataError(f"Pipe {fifo.name}: expected RecordIO-wrapped JPEG objects, got other data; "
                                    "check dataset_format and the channel's RecordWrapperType")
                raw = ((data, jpeg_comment_label(data), f"{fifo.name} record at byte offset {offset}")
                       for offset, data in _own_share(read_recordio(stream, fifo.name), shard))
                for data, label, where in _shuffled(raw, pipe.config.shuffle_buffer, pipe.rng):
                    yield _decode_task(data, label, pipe.config.image_size, where), pipe.rng.getrandbits(32)
            else:
                if is_recordio:
                    raise DataError("a TFRecord dataset arrived RecordIO-wrapped: set RecordWrapperType None "
                                    "for TFRecord shards (TFRecord framing already delimits records)")
                raw = ((payload, f"{fifo.name} record at byte offset {offset}")
                       for offset, payload in _own_share(read_tfrecords(stream, fifo.name, pipe.config.verify_crc), shard))
                for payload, where in _shuffled(raw, pipe.config.shuffle_buffer, pipe.rng):
                    yield _example_task(payload, where, pipe.config.image_size), pipe.rng.getrandbits(32)
    return records


def default_workers(num_cpus: int) -> int:
    # Decode is CPU-bound and releases the GIL: one thread per core, plus one to cover I/O waits.
    return max(2, num_cpus + 1)


__all__ = ["DataError", "RecordError", "PipelineConfig", "EpochPipeline", "JpgSource", "ShardSource", "NpzSource",
           "jpg_records", "shard_records", "npz_records", "npz_items", "pipe_records", "s3_jpg_records", "s3_shard_records", "detect_format", "default_workers",
           "with_label_comment", "jpeg_comment_label", "decode_and_augment"]
