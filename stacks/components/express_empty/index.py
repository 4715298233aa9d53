"""Empties the lab's S3 Express One Zone directory bucket before CloudFormation deletes it.

A Lambda-backed custom resource (the function is the ServiceToken; it answers CloudFormation itself
through the pre-signed ResponseURL). Standard library and boto3 only.

- Delete: abort every in-progress multipart upload, then delete every object, then answer SUCCESS;
  CloudFormation deletes the bucket next (the custom resource refers to it, so it goes first).
  "You can delete only empty Amazon S3 directory buckets. Before you delete your directory bucket, you
  must delete all objects in the bucket and abort all in-progress multipart uploads."
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/directory-bucket-delete.html)
- Create: nothing. Update: nothing, unless the bucket was replaced (a new zone ID, say): then the old
  bucket is emptied, because CloudFormation deletes it in the clean-up phase and that fails on a bucket
  with contents (aws-cdk-lib's own S3 auto-delete handler does the same on a bucket-name change).

Listing follows the directory-bucket rules: ListObjectsV2 "does not return objects in lexicographical
(alphabetical) order" and "only prefixes that end in a delimiter (/) are supported"; StartAfter is not
supported (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-differences.html,
ListObjectsV2 API reference). So: no prefix at all, and continuation tokens only, never a key as a
marker. ListMultipartUploads pages with KeyMarker alone ("The upload-id-marker element and the
NextUploadIdMarker element aren't supported by directory buckets", ListMultipartUploads API reference).
DeleteObjects takes at most 1,000 keys a request (DeleteObjects API reference).
"""

from __future__ import annotations

import json
import logging
import urllib.request

from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

BATCH = 1000                 # DeleteObjects: "a list of up to 1,000 keys"
DELETE_THREADS = 8           # DeleteObjects requests in flight at once (the client's pool holds as many)
STOP_BEFORE_TIMEOUT_MS = 60_000  # answer FAILED (instead of timing out) when less than this is left

log = logging.getLogger()
log.setLevel(logging.INFO)


class OutOfTime(Exception):
    pass


def handler(event, context):
    request = event.get("RequestType")
    props = event.get("ResourceProperties") or {}
    bucket = props.get("BucketName", "")
    physical_id = event.get("PhysicalResourceId") or f"empty-{bucket}"
    try:
        if request == "Delete":
            outcome = empty(_client(), bucket, context)
        elif request == "Update":
            old = (event.get("OldResourceProperties") or {}).get("BucketName")
            outcome = empty(_client(), old, context) if old and old != bucket else {"emptied": None}
        else:
            outcome = {"emptied": None}
        log.info(json.dumps({"request": request, "bucket": bucket, **outcome}))
        respond(event, "SUCCESS", physical_id, "", {k: str(v) for k, v in outcome.items()})
    except OutOfTime as err:
        respond(event, "FAILED", physical_id, str(err))
    except Exception as err:  # CloudFormation must always get an answer, or the stack waits an hour
        log.exception("emptying %s failed", bucket)
        respond(event, "FAILED", physical_id,
                f"emptying directory bucket {bucket} failed: {err.__class__.__name__}: {err}. "
                "Empty it with `dslab express empty --yes`, then delete the stack again.")


def _client():
    return boto3.client("s3", config=Config(max_pool_connections=DELETE_THREADS + 2))


def empty(s3, bucket: str, context=None) -> dict:
    """Aborts the bucket's multipart uploads and deletes all its objects; a missing bucket is already empty."""
    aborted = deleted = 0
    try:
        aborted = abort_uploads(s3, bucket, context)
        while True:  # passes until one finds nothing: objects written meanwhile go too
            found = delete_pass(s3, bucket, context)
            deleted += found
            if not found:
                break
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "NoSuchBucket":
            return {"emptied": bucket, "objects_deleted": deleted, "uploads_aborted": aborted, "note": "no such bucket"}
        raise
    except OutOfTime as err:
        raise OutOfTime(f"directory bucket {bucket} is not empty yet ({deleted} objects deleted, {aborted} uploads "
                        f"aborted in this attempt, {err}); delete the stack again to continue, or run "
                        "`dslab express empty --yes` first") from None
    return {"emptied": bucket, "objects_deleted": deleted, "uploads_aborted": aborted}


def delete_pass(s3, bucket: str, context=None) -> int:
    """One walk of ListObjectsV2 (no prefix, continuation tokens), deleting the pages DELETE_THREADS at a
    time while the walk goes on (one request after another would take an hour for millions of objects)."""
    count, token = 0, None
    with ThreadPoolExecutor(DELETE_THREADS) as pool:
        pending = []
        while True:
            _check_time(context)
            page = s3.list_objects_v2(Bucket=bucket, **({"ContinuationToken": token} if token else {}))
            keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
            pending += [pool.submit(_delete_batch, s3, bucket, keys[start:start + BATCH])
                        for start in range(0, len(keys), BATCH)]
            count += len(keys)
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
        for done in pending:
            done.result()   # the first refusal, if any, fails the pass
    return count


def _delete_batch(s3, bucket: str, keys: list[dict]) -> None:
    result = s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    errors = result.get("Errors") or []
    if errors:
        first = errors[0]
        raise RuntimeError(f"DeleteObjects refused {len(errors)} keys, e.g. {first.get('Key')}: "
                           f"{first.get('Code')} {first.get('Message')}")


def abort_uploads(s3, bucket: str, context=None) -> int:
    count, marker = 0, None
    while True:
        _check_time(context)
        page = s3.list_multipart_uploads(Bucket=bucket, **({"KeyMarker": marker} if marker else {}))
        for upload in page.get("Uploads", []):
            try:
                s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") != "NoSuchUpload":
                    raise
                continue   # it ended meanwhile: nothing to abort
            count += 1
        marker = page.get("NextKeyMarker")
        if not page.get("IsTruncated") or not marker:
            return count


def _check_time(context) -> None:
    if context is not None and context.get_remaining_time_in_millis() < STOP_BEFORE_TIMEOUT_MS:
        raise OutOfTime("the function's 15 minutes are nearly up")


def respond(event, status: str, physical_id: str, reason: str, data: dict | None = None) -> None:
    """The custom-resource response: a PUT of this JSON to the pre-signed ResponseURL
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html)."""
    body = json.dumps({
        "Status": status, "Reason": (reason or status)[:3500], "PhysicalResourceId": physical_id,
        "StackId": event.get("StackId"), "RequestId": event.get("RequestId"),
        "LogicalResourceId": event.get("LogicalResourceId"), "NoEcho": False, "Data": data or {},
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (CloudFormation's https URL)
        log.info("CloudFormation answered %s", response.status)
