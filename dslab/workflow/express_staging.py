"""Express staging: copy the datasets the Express jobs read into the S3 Express One Zone directory bucket."""

from __future__ import annotations

import json
from typing import Any

from ..core.facts.limits import (COPY_OBJECT_MAX_BYTES, EXPRESS_COPY_BYTES_PER_SECOND, EXPRESS_COPY_SECONDS,
                                 EXPRESS_COPY_THREADS, EXPRESS_STAGING_BUDGET_SECONDS,
                                 EXPRESS_STAGING_TIMEOUT_SECONDS, EXPRESS_WAKE_SECONDS)
from ..core.requests import DATASETS_PREFIX, stats_key
from ..core.facts.aws_errors import explain, is_transient
from .common import express_client, is_missing, time_scale
from .runtime import environ as function_environ

ROLE = "the ExpressStaging function's role"


def wake_directory_bucket(s3, bucket: str, deadline: float) -> None:
    """A directory bucket with no requests for 90 days is inactive and answers 503 until it is active
    again, "typically within a few minutes" (S3 User Guide, directory buckets overview): keep asking,
    backing off, until it answers or ``deadline`` (monotonic) passes; then the last error stands."""
    import time
    base = time_scale()
    wait = base
    while True:
        try:
            s3.list_objects_v2(Bucket=bucket, Prefix=f"{DATASETS_PREFIX}/", MaxKeys=1)
            return
        except s3.exceptions.ClientError as err:
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status != 503 or time.monotonic() + wait > deadline:
                raise
        time.sleep(wait)
        wait = min(wait * 2, 30 * base)


def stage_express(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Copy the datasets the Express jobs read from the data bucket into the directory bucket.

    One invocation copies until its time budget is spent and returns a cursor (the state machine
    loops, bounded). A dataset is skipped when the directory bucket already holds its stats file
    with the same files and bytes as the source's: the marker is written only after every object
    of the prefix was copied, so a half-copied dataset is never taken for a staged one.

    Mechanism: CopyObject from the general purpose bucket into the directory bucket, which AWS
    supports ("You can copy individual objects between general purpose buckets and directory
    buckets", CopyObject API reference); DataSync documents no directory-bucket location and
    `aws s3 sync` refuses directory buckets, and S3 Batch Operations would add a manifest, a job role
    and a report bucket for the same CopyObject calls. Listing is of the *source* bucket (lexicographic,
    any prefix), so the directory bucket's listing rules never matter here.

    Bounded in time: the budget is checked before each batch of EXPRESS_COPY_THREADS copies (not per
    1,000-key page), and a batch is not started when its largest object might not finish before the
    budget; the cursor names the listing page and how many of its objects are done, so a new
    invocation goes on exactly there. Serialized per dataset: a lock object in the directory bucket
    (a conditional PUT, If-None-Match) names the execution staging it; another execution waits for it
    (the state machine's Wait) instead of clearing its copies.
    """
    import time
    from concurrent.futures import ThreadPoolExecutor
    s3 = express_client()
    started = time.monotonic()
    env = function_environ()
    budget = float(env.get("DSLAB_STAGING_BUDGET_SECONDS") or EXPRESS_STAGING_BUDGET_SECONDS)
    summary = event["plan"]
    execution = str(event.get("execution") or "manual")
    cursor = dict(event.get("cursor") or {})
    invocations = int(cursor.get("invocations") or 0) + 1
    try:
        document = json.loads(s3.get_object(Bucket=summary["bucket"], Key=summary["plan_key"])["Body"].read())
    except s3.exceptions.ClientError as err:
        if is_transient(err):
            return {"done": False, "ready": False, "wait": True, "invocations": invocations - 1,
                    "cursor": {**cursor, "invocations": invocations - 1, "waits": int(cursor.get("waits") or 0) + 1},
                    "reason": f"{explain(err, who=ROLE)}; staging goes on after a wait"}
        return _not_staged(err, invocations, s3, None, None, execution)
    source, target = summary["bucket"], document.get("express_bucket")
    prefixes: list[str] = document.get("express_prefixes") or []
    stats_by_prefix = {d["prefix"]: document["dataset_stats"][d["name"]]
                       for t in document["experiment"]["trials"] for d in t.get("datasets") or []
                       if d["name"] in document["dataset_stats"]}
    index, token, skip = int(cursor.get("index") or 0), cursor.get("token"), int(cursor.get("skip") or 0)
    copied, skipped = int(cursor.get("copied") or 0), int(cursor.get("skipped") or 0)
    removed = int(cursor.get("removed") or 0)  # stale objects of an earlier staging, deleted first
    waits = int(cursor.get("waits") or 0)
    copied_now = 0
    if not target:
        return {"done": True, "ready": False, "wait": False, "invocations": invocations, "cursor": {},
                "reason": "the lab has no S3 Express One Zone bucket (deployed with -c express=false)"}

    def hand_on(reason: str, *, wait: bool = False) -> dict[str, Any]:
        # A waiting invocation copied nothing: it counts as a wait, not against the copying invocations.
        spent = invocations - 1 if wait else invocations
        return {"done": False, "ready": False, "wait": wait, "invocations": spent,
                "cursor": {"index": index, "token": token, "skip": skip, "copied": copied, "skipped": skipped,
                           "removed": removed, "invocations": spent, "waits": waits + (1 if wait else 0)},
                "reason": reason}

    def copy(key: str, size: int) -> None:
        if size > COPY_OBJECT_MAX_BYTES:  # multipart UploadPartCopy above CopyObject's 5 GB (no tags are copied)
            s3.copy({"Bucket": source, "Key": key}, target, key)
        else:
            # A directory bucket takes only the empty tag-set, and CopyObject's default is to copy the
            # source's tags (501 Not Implemented when it has any): REPLACE them with none.
            s3.copy_object(Bucket=target, Key=key, CopySource={"Bucket": source, "Key": key}, TaggingDirective="REPLACE")

    def time_left() -> float:
        return budget - (time.monotonic() - started)

    def stage(pool) -> dict[str, Any]:
        nonlocal index, token, skip, copied, skipped, removed, copied_now
        while index < len(prefixes):
            prefix = prefixes[index]
            expected = stats_by_prefix.get(prefix, {})
            marker = stats_key(f"{DATASETS_PREFIX}/{prefix}")
            holder = take_staging_lock(s3, target, prefix, execution, stale_after=2 * EXPRESS_STAGING_TIMEOUT_SECONDS)
            if holder is not None:
                return hand_on(f"waiting: execution {holder} is staging {prefix}", wait=True)
            if token is None and skip == 0:
                if _same_stats(s3, target, marker, expected):
                    release_staging_lock(s3, target, prefix, execution)
                    skipped += 1
                    index += 1
                    continue
                # A dataset staged from another version of the source: start from an empty prefix, so no
                # object the source no longer has is left for the jobs to read.
                removed += _clear_prefix(s3, target, f"{DATASETS_PREFIX}/{prefix}/", marker)
            while True:
                kwargs = {"Bucket": source, "Prefix": f"{DATASETS_PREFIX}/{prefix}/", "MaxKeys": 1000}
                if token:
                    kwargs["ContinuationToken"] = token
                page = s3.list_objects_v2(**kwargs)
                objects = [(o["Key"], int(o["Size"])) for o in page.get("Contents", [])]
                while skip < len(objects):
                    batch = objects[skip:skip + EXPRESS_COPY_THREADS]
                    needs = EXPRESS_COPY_SECONDS + max(size for _, size in batch) / EXPRESS_COPY_BYTES_PER_SECOND
                    if copied_now and needs > time_left():   # each invocation copies at least one batch
                        return hand_on(f"copied {copied:,} objects so far")
                    list(pool.map(lambda o: copy(*o), batch))
                    copied += len(batch)
                    copied_now += len(batch)
                    skip += len(batch)
                next_token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
                if next_token is None:
                    token, skip = None, 0
                    break
                token, skip = next_token, 0
            s3.put_object(Bucket=target, Key=marker, Body=json.dumps({**{k: expected.get(k) for k in ("files", "bytes")},
                                                                      "staged_from": f"s3://{source}/{DATASETS_PREFIX}/{prefix}/"}).encode(),
                          ContentType="application/json")
            release_staging_lock(s3, target, prefix, execution)
            index += 1
            if index < len(prefixes) and time_left() <= 0:
                return hand_on(f"copied {copied:,} objects so far")
        return {"done": True, "ready": True, "wait": False, "invocations": invocations, "cursor": {},
                "reason": f"{len(prefixes)} datasets in s3://{target}/: {copied:,} objects copied, {skipped} already "
                          "there" + (f", {removed:,} stale objects removed first" if removed else "")}

    try:
        wake_directory_bucket(s3, target, started + min(budget, EXPRESS_WAKE_SECONDS * time_scale()))
        with ThreadPoolExecutor(EXPRESS_COPY_THREADS) as pool:
            return stage(pool)
    except s3.exceptions.ClientError as err:
        if is_transient(err):   # botocore has retried it already: after a Wait the next invocation goes on here
            return hand_on(f"{explain(err, who=ROLE)}; staging goes on after a wait", wait=True)
        return _not_staged(err, invocations, s3, target, prefixes[index] if index < len(prefixes) else None, execution)


def _not_staged(err, invocations: int, s3, target: str | None, prefix: str | None, execution: str) -> dict[str, Any]:
    """Staging ends, not ready, with a reason that names the fix (the Express jobs are skipped with it). The dataset's
    stats marker is written only once every object is copied, so what was copied is never taken for a staged dataset;
    this execution's lock on it is released, so another execution need not wait for it to turn stale."""
    if target and prefix:
        try:
            release_staging_lock(s3, target, prefix, execution)
        except s3.exceptions.ClientError:
            pass   # it turns stale and is taken over (take_staging_lock)
    return {"done": True, "ready": False, "wait": False, "invocations": invocations, "cursor": {},
            "reason": f"copying into the S3 Express One Zone bucket failed: {explain(err, who=ROLE)}"}


def _lock_key(prefix: str) -> str:
    return f"{DATASETS_PREFIX}/{prefix}.staging-lock.json"


def take_staging_lock(s3, bucket: str, prefix: str, execution: str, stale_after: float) -> str | None:
    """Hold the dataset's staging lock for ``execution``: None when it is ours (taken now or earlier),
    else the execution that holds it. A lock older than ``stale_after`` seconds (its holder died
    mid-copy) is taken over. Conditional writes (If-None-Match: "*") make taking it atomic
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html)."""
    import time
    key = _lock_key(prefix)
    body = json.dumps({"execution": execution, "taken_at": time.time()}).encode()
    for _ in range(3):
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*", ContentType="application/json")
            return None
        except s3.exceptions.ClientError as err:
            if err.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                raise
        try:
            held = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        except s3.exceptions.ClientError as err:
            if not is_missing(err):
                raise
            continue  # released meanwhile: try again
        if held.get("execution") == execution:
            return None
        if time.time() - float(held.get("taken_at") or 0) > stale_after:
            s3.delete_object(Bucket=bucket, Key=key)
            continue
        return str(held.get("execution") or "another execution")
    return "another execution"


def release_staging_lock(s3, bucket: str, prefix: str, execution: str) -> None:
    key = _lock_key(prefix)
    try:
        held = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except s3.exceptions.ClientError as err:
        if not is_missing(err):
            raise
        return
    if held.get("execution") == execution:
        s3.delete_object(Bucket=bucket, Key=key)


def _clear_prefix(s3, bucket: str, prefix: str, marker: str) -> int:
    """Delete the stats marker, then every object under ``prefix`` in the directory bucket (its
    ListObjectsV2 takes only prefixes ending in "/" and lists in no order: every page is deleted as read)."""
    s3.delete_object(Bucket=bucket, Key=marker)
    removed = 0
    while True:
        page = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1000)
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if not keys:
            return removed
        s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        removed += len(keys)


def _same_stats(s3, bucket: str, key: str, expected: dict[str, Any]) -> bool:
    """Is the dataset already staged: the directory bucket's stats file says the source's files and bytes."""
    try:
        staged = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except s3.exceptions.ClientError as err:
        if is_missing(err):
            return False
        raise
    except ValueError:
        return False
    return bool(expected) and staged.get("files") == expected.get("files") and staged.get("bytes") == expected.get("bytes")
