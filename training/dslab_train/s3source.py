"""Script mode: the script reads the dataset's S3 prefix itself (the source post's "Bring your own data
ingestion"), JPEG objects with many GETs in flight and TFRecord shards with ranged GETs.

Only what the PyTorch training images carry: boto3 is in every one (aws/deep-learning-containers,
e.g. pytorch/training/docker/2.8/py3/cu129/Dockerfile.gpu and docker/pytorch/2.13/cuda/pyproject.toml);
the Amazon S3 Connector for PyTorch (``s3torchconnector``) is in the 2.5-2.10 images (the lab's
ml.p3 image, 2.8.0, has it) but not in the 2.11+ Amazon Linux 2023 ones. ``s3_client: auto`` (the
default) takes the connector where it is installed with its range-based reader (v1.4.2+), else boto3.

Credentials come from the job's role (both clients' default chains). The endpoint: boto3 reads
AWS_ENDPOINT_URL itself; the connector takes it as an argument (it does not read the variable), so
it is passed on, with path-style addressing (what a local endpoint such as the lab's stand-in needs).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from .contract import ContractError
from .layout import class_folder, spread_count

JPEG_SUFFIXES = (".jpg", ".jpeg")
# S3's performance guidelines: ranged GETs of 8-16 MB, one connection per 85-90 MB/s wanted
# (https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/use-byte-range-fetches.html).
RANGE_BYTES = 8 * 1024 * 1024
RANGES_AHEAD = 2                       # per shard being read: the part in use and the next
DEFAULT_CONCURRENCY = 64               # GETs in flight for JPEG objects (latency-bound: ~10-100 ms each)
CLIENTS = ("auto", "boto3", "s3torchconnector")


def split_uri(uri: str) -> tuple[str, str]:
    if not isinstance(uri, str) or not uri.startswith("s3://") or "/" not in uri[5:] or uri.startswith("s3:///"):
        raise ContractError(f"hyperparameter dataset_uri={uri!r} is not an S3 prefix (s3://bucket/prefix/)")
    bucket, _, prefix = uri[5:].partition("/")
    # Directory buckets take only prefixes that end in "/" (and any prefix is a folder here).
    return bucket, prefix if not prefix or prefix.endswith("/") else prefix + "/"


class S3ReadError(RuntimeError):
    """S3 refused a read the script needs, after the client's retries: one line naming the fix (train.py writes it
    to /opt/ml/output/failure, the job's FailureReason)."""


# What to do about S3's answer, by its code (the lab's fault matrix, dslab/aws/faults.py, lists each pair).
THROTTLED = ("SlowDown", "Throttling", "ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded", "503")
UNAVAILABLE = ("ServiceUnavailable", "InternalError", "RequestTimeout", "500", "502", "504")
DENIED = ("AccessDenied", "403", "AccessDeniedException")
EXPIRED = ("ExpiredToken", "ExpiredTokenException", "RequestExpired")


DENIED_FIX = ("the job's role may not read it: give the training role s3:ListBucket on the bucket and s3:GetObject on "
              "the dataset's prefix (the lab's role has both for datasets/ in the data bucket)")


def read_error(err, uri: str, what: str, denied_fix: str = DENIED_FIX) -> S3ReadError:
    """An S3ReadError for botocore's ClientError ``err`` met while reading ``what`` of ``uri``."""
    error = err.response.get("Error", {})
    meta = err.response.get("ResponseMetadata", {})
    code, attempts = str(error.get("Code") or meta.get("HTTPStatusCode") or "?"), int(meta.get("RetryAttempts") or 0) + 1
    said = f"S3 answered {code} ({error.get('Message') or 'no message'}) for {what} of {uri} after {attempts} attempts"
    if code in THROTTLED or code in UNAVAILABLE or int(meta.get("HTTPStatusCode") or 0) >= 500:
        fix = "a temporary refusal that outlasted the client's retries: run the job again; a lower s3_concurrency asks less of S3"
    elif code in DENIED:
        fix = denied_fix
    elif code in EXPIRED:
        fix = ("the job's credentials had expired, or its clock was more than 15 minutes off: SageMaker renews the "
               "role's credentials, so run the job again")
    elif code == "NoSuchBucket":
        fix = "the bucket does not exist: fix dataset_uri"
    elif code in ("NoSuchKey", "404"):
        fix = "the object went away while the job read it: leave the dataset unchanged while jobs read it"
    elif code == "InvalidObjectState":
        fix = "the object is archived (an S3 Glacier storage class): restore it or upload the dataset again"
    else:
        fix = "fix what S3's message names"
    return S3ReadError(f"{said}: {fix}")


@dataclass
class S3Object:
    key: str
    size: int


class S3Reads:
    """One client for the job: list a prefix, GET an object or a byte range; counts its requests."""

    def __init__(self, uri: str, client: str = "auto", concurrency: int = DEFAULT_CONCURRENCY, region: str | None = None,
                 denied_fix: str = DENIED_FIX):
        if client not in CLIENTS:
            raise ContractError(f"hyperparameter s3_client={client!r}: use one of {', '.join(CLIENTS)}")
        self.uri, self.denied_fix = uri, denied_fix
        self.bucket, self.prefix = split_uri(uri)
        self.region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        self.endpoint = os.environ.get("AWS_ENDPOINT_URL") or None
        self.requests = 0
        self._lock = threading.Lock()
        self._connector = None
        if client in ("auto", "s3torchconnector"):
            self._connector = _connector(self.region, self.endpoint)
            if self._connector is None and client == "s3torchconnector":
                raise ContractError("hyperparameter s3_client=s3torchconnector, but the image has no s3torchconnector "
                                    "1.4.2+ (the 2.11+ PyTorch images have none): use s3_client: boto3 or auto")
        self.client_name = "s3torchconnector" if self._connector is not None else "boto3"
        if self._connector is None:
            import boto3
            from botocore.config import Config
            self._s3 = boto3.client("s3", region_name=self.region, config=Config(
                max_pool_connections=max(10, concurrency), retries={"mode": "adaptive", "max_attempts": 10}))

    def _count(self, n: int = 1) -> None:
        with self._lock:
            self.requests += n

    def list(self) -> list[S3Object]:
        """Every object under the prefix, sorted by key (directory buckets list in no order)."""
        out: list[S3Object] = []
        if self._connector is not None:
            for page in self._connector.list_objects(self.bucket, self.prefix):
                self._count()
                out += [S3Object(o.key, int(o.size)) for o in page.object_info]
        else:
            from botocore.exceptions import ClientError
            try:
                for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
                    self._count()
                    out += [S3Object(o["Key"], int(o["Size"])) for o in page.get("Contents", [])]
            except ClientError as err:
                raise read_error(err, self.uri, "the listing", self.denied_fix) from None
        return sorted((o for o in out if not o.key.endswith("/")), key=lambda o: o.key)

    def get(self, key: str) -> bytes:
        self._count()
        if self._connector is not None:
            return self._connector.get_object(self.bucket, key).read()
        from botocore.exceptions import ClientError
        try:
            return self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as err:
            raise read_error(err, self.where(key), "the object", self.denied_fix) from None

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes start..end-1 of an object, one ranged GET."""
        self._count()
        if self._connector is not None:
            from s3torchconnector import S3ReaderConstructor
            reader = self._connector.get_object(self.bucket, key, reader_constructor=S3ReaderConstructor.range_based())
            reader.seek(start)
            return reader.read(end - start)
        from botocore.exceptions import ClientError
        try:
            return self._s3.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end - 1}")["Body"].read()
        except ClientError as err:
            raise read_error(err, self.where(key), f"bytes {start}-{end - 1}", self.denied_fix) from None

    def where(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


def _connector(region: str, endpoint: str | None):
    """The connector's client where the image has it with its range reader (v1.4.2+), else None."""
    try:
        from s3torchconnector import S3ClientConfig, S3ReaderConstructor  # noqa: F401
        from s3torchconnector._s3client import S3Client
    except Exception:  # not installed, or a version without the range reader
        return None
    config = S3ClientConfig(force_path_style=True) if endpoint else None
    return S3Client(region, endpoint=endpoint, s3client_config=config)


class RangeStream:
    """A file-like view of one object read in RANGE_BYTES ranged GETs, RANGES_AHEAD of them in flight,
    so a TFRecord reader streams a shard without holding it whole."""

    def __init__(self, reads: S3Reads, key: str, size: int, pool: ThreadPoolExecutor):
        self.reads, self.key, self.size, self.pool = reads, key, size, pool
        self.next_start = 0
        self.pending: deque = deque()
        self.buffer = b""
        self._fill()

    def _fill(self) -> None:
        while len(self.pending) < RANGES_AHEAD and self.next_start < self.size:
            end = min(self.size, self.next_start + RANGE_BYTES)
            self.pending.append(self.pool.submit(self.reads.get_range, self.key, self.next_start, end))
            self.next_start = end

    def read(self, n: int) -> bytes:
        while len(self.buffer) < n and self.pending:
            self.buffer += self.pending.popleft().result()
            self._fill()
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def close(self) -> None:
        for future in self.pending:
            future.cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def ordered_fetch(pool: ThreadPoolExecutor, keys: list[str], fetch: Callable[[str], bytes], depth: int):
    """(key, bytes) in ``keys`` order, ``depth`` GETs in flight ahead of the consumer."""
    pending: deque = deque()
    todo = iter(keys)
    try:
        while True:
            while len(pending) < depth:
                key = next(todo, None)
                if key is None:
                    break
                pending.append((key, pool.submit(fetch, key)))
            if not pending:
                return
            key, future = pending.popleft()
            yield key, future.result()
    finally:
        for _, future in pending:
            future.cancel()


def jpg_labels(objects: list[S3Object], prefix: str) -> tuple[list[int], list[str]]:
    """The class of each JPEG from its folder under the prefix (the Caltech-256 layout), past the p00/, p01/... of a
    dataset spread over S3 prefixes, as JpgSource does (layout.py)."""
    folders = [tuple(o.key[len(prefix):].lstrip("/").split("/")[:-1]) for o in objects]
    spread = spread_count({f[0] if f else "" for f in folders}) > 1
    parents = [class_folder(f, spread) for f in folders]
    classes = sorted({p for p in parents if p})
    index = {name: i for i, name in enumerate(classes)}
    return [index.get(p, -1) for p in parents], classes


def detect_s3_format(objects: list[S3Object]) -> str:
    if any(o.key.lower().endswith(JPEG_SUFFIXES) for o in objects):
        return "jpg"
    if any(o.key.lower().endswith(".npz") for o in objects):
        return "npz"
    return "tfrecord" if objects else "unknown"
