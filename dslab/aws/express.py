"""The lab's S3 Express One Zone directory bucket: what is in it, and emptying it (``dslab express``, dslab/cli/express.py).

The bucket holds staged copies of datasets (the datasets themselves stay in the data bucket, under the
same ``datasets/<name>/`` keys), and it bills storage by the GB-month while they sit there.

Directory buckets list differently from general purpose buckets: ListObjectsV2 "does not return objects
in lexicographical (alphabetical) order", accepts only prefixes that end in "/" and no StartAfter
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-differences.html). So every listing
here is either the whole bucket or a ``.../`` prefix, pages by continuation token only, and never relies
on key order.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from ..core.errors import ConfigError
from ..core.requests import DATASETS_PREFIX

DELETE_BATCH = 1000  # DeleteObjects takes up to 1,000 keys a request
MAX_WALKS = 10      # whole listings while emptying: each deletes what it finds; the last one finds nothing


# ---- the bucket, from the stack outputs ----------------------------------------------------------

def express_bucket(outputs: dict[str, str], region: str) -> dict[str, Any] | None:
    """The bucket the Core stack reports (ExpressBucketName, ExpressBucketArn, ExpressZoneId), or None when
    the lab was deployed with -c express=false."""
    name = outputs.get("ExpressBucketName")
    if not name:
        if str(outputs.get("ExpressEnabled", "")).lower() == "false":
            return None
        raise ConfigError("--outputs", "stack output ExpressBucketName is missing: the lab was deployed before it had an "
                          "S3 Express One Zone bucket; deploy it again (`make deploy FSX=keep`), or pass the "
                          "current cdk-outputs.json")
    arn = outputs.get("ExpressBucketArn", "")
    parts = arn.split(":")
    # arn:aws:s3express:<region>:<account>:bucket/<name>: the bucket's own region wins over the default.
    bucket_region = parts[3] if len(parts) > 5 and parts[2] == "s3express" and parts[3] else region
    # <base>--<zone-id>--x-s3: the name carries the zone too.
    zone = outputs.get("ExpressZoneId") or (name.split("--")[-2] if name.endswith("--x-s3") else None)
    return {"bucket": name, "arn": arn or None, "zone_id": zone, "region": bucket_region}


def s3_client(region: str):
    """An S3 client for the directory bucket. botocore signs its requests with CreateSession credentials;
    a stand-in reached through an endpoint override (moto, the local lab) has no CreateSession, so there
    the session auth is switched off (botocore's ``disable_s3_express_session_auth``)."""
    import boto3
    from botocore.config import Config
    override = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    config = Config(s3={"disable_s3_express_session_auth": True}) if override else None
    return boto3.client("s3", region_name=region, config=config)


# ---- listing and deleting under the directory-bucket rules ---------------------------------------

def _prefix(prefix: str | None) -> dict[str, str]:
    if prefix is None:
        return {}
    if not prefix.endswith("/"):
        raise ValueError(f"directory buckets list only prefixes that end in '/': {prefix!r}")
    return {"Prefix": prefix}


def list_objects(s3, bucket: str, prefix: str | None = None) -> Iterator[list[dict]]:
    """Pages of ListObjectsV2 (whole bucket, or a prefix ending in "/"), by continuation token."""
    token = None
    while True:
        page = s3.list_objects_v2(Bucket=bucket, **_prefix(prefix), **({"ContinuationToken": token} if token else {}))
        yield page.get("Contents", [])
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return


def sidecar_objects(s3, bucket: str, name: str) -> list[dict]:
    """Objects beside a dataset's folder (datasets/<name>.stats.json, .manifest, ...): the objects directly
    under datasets/ (a "/" prefix with the "/" delimiter), filtered here, never by a key fragment."""
    found, token = [], None
    while True:
        page = s3.list_objects_v2(Bucket=bucket, Prefix=f"{DATASETS_PREFIX}/", Delimiter="/",
                                  **({"ContinuationToken": token} if token else {}))
        found += [o for o in page.get("Contents", []) if o["Key"].startswith(f"{DATASETS_PREFIX}/{name}.")]
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return found


def multipart_uploads(s3, bucket: str, prefix: str | None = None) -> list[dict]:
    """In-progress multipart uploads; directory buckets page them by KeyMarker alone (no UploadIdMarker)."""
    uploads, marker = [], None
    while True:
        page = s3.list_multipart_uploads(Bucket=bucket, **_prefix(prefix), **({"KeyMarker": marker} if marker else {}))
        uploads += page.get("Uploads", [])
        marker = page.get("NextKeyMarker")
        if not page.get("IsTruncated") or not marker:
            return uploads


def dataset_of(key: str) -> str:
    parts = key.split("/")
    if parts[0] == DATASETS_PREFIX and len(parts) > 2:
        return parts[1]
    if parts[0] == DATASETS_PREFIX and len(parts) == 2 and "." in parts[1]:
        return parts[1].split(".", 1)[0]   # datasets/<name>.stats.json and friends
    return "(other)"


def inventory(s3, bucket: str) -> dict[str, Any]:
    """Objects and bytes of the whole bucket, and per dataset."""
    datasets: dict[str, dict[str, int]] = {}
    objects = size = 0
    for page in list_objects(s3, bucket):
        for obj in page:
            objects += 1
            size += obj.get("Size", 0)
            entry = datasets.setdefault(dataset_of(obj["Key"]), {"objects": 0, "bytes": 0})
            entry["objects"] += 1
            entry["bytes"] += obj.get("Size", 0)
    return {"objects": objects, "bytes": size, "datasets": dict(sorted(datasets.items())),
            "multipart_uploads": len(multipart_uploads(s3, bucket))}


def _delete(s3, bucket: str, keys: list[str]) -> None:
    for start in range(0, len(keys), DELETE_BATCH):
        result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[start:start + DELETE_BATCH]],
                                                          "Quiet": True})
        errors = result.get("Errors") or []
        if errors:
            first = errors[0]
            raise ConfigError("express empty", f"DeleteObjects refused {len(errors)} keys of {bucket}, e.g. "
                              f"{first.get('Key')}: {first.get('Code')} {first.get('Message')}")


def empty(s3, bucket: str, dataset: str | None = None) -> dict[str, int]:
    """Aborts the in-progress uploads and deletes the objects of the bucket, or of one dataset's staged copy.
    Walks until a walk finds nothing, so objects written meanwhile (and listing pages shifted by the
    deletions) are not left behind."""
    prefix = f"{DATASETS_PREFIX}/{dataset}/" if dataset else None
    aborted = 0
    for upload in multipart_uploads(s3, bucket, prefix):
        try:
            s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
        except s3.exceptions.NoSuchUpload:
            continue   # it ended meanwhile (completed or aborted): nothing to abort
        aborted += 1
    deleted = size = 0
    for _ in range(MAX_WALKS):
        found = 0
        pages = list_objects(s3, bucket, prefix)
        if dataset:
            pages = _chain(pages, [sidecar_objects(s3, bucket, dataset)])
        for page in pages:
            if page:
                _delete(s3, bucket, [o["Key"] for o in page])
                found += len(page)
                size += sum(o.get("Size", 0) for o in page)
        deleted += found
        if not found:
            return {"objects_deleted": deleted, "bytes_deleted": size, "uploads_aborted": aborted}
    raise ConfigError("express empty", f"{bucket} still lists objects after {MAX_WALKS} walks ({deleted:,} deleted): "
                      "is something writing into it (a running workflow's staging)? Run it again when that is done")


def _chain(first, second):
    yield from first
    yield from second


def count(s3, bucket: str, dataset: str | None) -> tuple[int, int, int]:
    prefix = f"{DATASETS_PREFIX}/{dataset}/" if dataset else None
    objects = size = 0
    pages = list_objects(s3, bucket, prefix)
    if dataset:
        pages = _chain(pages, [sidecar_objects(s3, bucket, dataset)])
    for page in pages:
        objects += len(page)
        size += sum(o.get("Size", 0) for o in page)
    return objects, size, len(multipart_uploads(s3, bucket, prefix))
