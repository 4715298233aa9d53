"""S3 in the stand-in: injected faults (503 while a directory bucket wakes), bucket policies evaluated as for
HTTPS, and S3 Express One Zone directory buckets with their own listing rules."""

from __future__ import annotations

import json

from .hooks import HOOKS


def patch_s3_faults() -> None:
    """S3 answers the emulator's faults (HOOKS.s3_fault) with the HTTP status and XML error S3 sends, so
    clients react as they would on AWS (botocore retries a 503, for instance)."""
    from xml.sax.saxutils import escape

    from moto.s3.responses import S3Response

    original_bucket, original_key = S3Response._bucket_response, S3Response._key_response

    def fault(self, request, full_url: str, key: str | None):
        if HOOKS.s3_observer is not None:
            from urllib.parse import parse_qs, urlparse
            query = {k: v[0] for k, v in parse_qs(urlparse(full_url).query, keep_blank_values=True).items()}
            HOOKS.s3_observer(request.method, self.parse_bucket_name_from_url(request, full_url), key, query)
        if HOOKS.s3_fault is None:
            return None
        bucket = self.parse_bucket_name_from_url(request, full_url)
        answer = HOOKS.s3_fault(request.method, bucket, key) if bucket else None
        if answer is None:
            return None
        status, code, message = answer
        return status, {"content-type": "application/xml"}, (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>'
            f"<BucketName>{escape(bucket)}</BucketName><RequestId>{uuid_token()}</RequestId></Error>")

    def _bucket_response(self, request, full_url):
        return fault(self, request, full_url, None) or original_bucket(self, request, full_url)

    def _key_response(self, request, full_url):
        key = self.parse_key_name()
        return (fault(self, request, full_url, key) or directory_copy_refusal(self, request, full_url)
                or original_key(self, request, full_url))

    def directory_copy_refusal(self, request, full_url: str):
        """CopyObject into a directory bucket takes only the empty tag-set: "When you don't set the
        x-amz-tagging-directive header and the source object has non-empty tags" (its default is COPY), or
        REPLACE with non-empty tags, S3 answers 501 Not Implemented (CopyObject API reference)."""
        headers = request.headers
        source = headers.get("x-amz-copy-source")
        bucket = self.parse_bucket_name_from_url(request, full_url)
        if request.method != "PUT" or not source or not bucket or not is_directory_bucket(bucket):
            return None
        from urllib.parse import unquote
        source_bucket, _, source_key = unquote(source.split("?", 1)[0]).lstrip("/").partition("/")
        directive = (headers.get("x-amz-tagging-directive") or "COPY").upper()
        if directive == "REPLACE":
            tagged = bool(headers.get("x-amz-tagging"))
        else:
            found = self.backend.get_object(source_bucket, source_key)
            tagged = bool(found is not None and self.backend.get_object_tagging(found).get("Tags"))
        if not tagged:
            return None
        return 501, {"content-type": "application/xml"}, (
            '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided '
            f"implies functionality that is not implemented</Message><RequestId>{uuid_token()}</RequestId></Error>")

    S3Response._bucket_response = _bucket_response
    S3Response._key_response = _key_response


def patch_bucket_policy_transport() -> None:
    """Every AWS request is TLS; the stand-in's arrive over plain HTTP on loopback. moto evaluates a
    bucket policy without the request's context, so a TLS-only policy (Deny when aws:SecureTransport is
    false: the CDK bootstrap bucket's, the lab's data bucket's) would refuse every request. The stand-in
    evaluates it as AWS would for an HTTPS request."""
    import fnmatch

    from moto.iam import policy_conditions
    from moto.iam.access_control import IAMPolicyStatement, PermissionResult
    from moto.s3.models import FakeBucket

    # moto evaluates StringEquals only and takes every other operator as matched, which makes any
    # conditional Deny deny everything. The operators the lab's and CDK's bucket policies use:
    def _any(expected, actual: str, test) -> bool:
        return any(test(str(e), actual) for e in (expected if isinstance(expected, list) else [expected]))

    policy_conditions.CONDITION_OPERATIONS.update({
        "Bool": lambda expected, actual: _any(expected, actual, lambda e, a: e.lower() == a.lower()),
        "StringLike": lambda expected, actual: _any(expected, actual, fnmatch.fnmatchcase),
        "ArnLike": lambda expected, actual: _any(expected, actual, fnmatch.fnmatchcase),
        "ArnEquals": lambda expected, actual: _any(expected, actual, lambda e, a: e == a),
        "StringNotEquals": lambda expected, actual: not _any(expected, actual, lambda e, a: e == a),
    })

    def get_permission(self, action: str, resource: str):
        # moto also answers DENIED for a statement whose condition does not hold; in IAM such a statement
        # does not apply at all (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
        if self.policy is None:
            return PermissionResult.NEUTRAL
        document = json.loads(self.policy.decode() if isinstance(self.policy, bytes) else self.policy)
        statements = document["Statement"] if isinstance(document["Statement"], list) else [document["Statement"]]
        permitted = False
        for raw in statements:
            statement = IAMPolicyStatement(raw)
            concerned = (not statement._check_element_matches("NotAction", action) if "NotAction" in raw
                         else statement._check_element_matches("Action", action))
            if not concerned or statement.is_unknown_principal(raw.get("Principal")):
                continue
            if not statement._check_conditions({"aws:SecureTransport": "true"}):
                continue
            if "Resource" in raw and not statement._check_element_matches("Resource", resource):
                continue
            if raw["Effect"] == "Deny":
                return PermissionResult.DENIED
            permitted = True
        return PermissionResult.PERMITTED if permitted else PermissionResult.NEUTRAL

    FakeBucket.get_permission = get_permission


# ---- S3 Express One Zone directory buckets -----------------------------------------------------
# moto has no directory buckets: a bucket named "<base>--<zone-id>--x-s3" is an ordinary moto bucket
# (clients reach it with session auth off: AWS_S3_DISABLE_EXPRESS_SESSION_AUTH, set by EmulatedLab).
# What breaks tools is how such a bucket lists, so the stand-in lists the way AWS documents it
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-differences.html and the
# ListObjectsV2 API reference): not in lexicographic order; a Prefix must end in the delimiter "/";
# "/" is the only delimiter; no StartAfter; ListObjects (v1) is not supported at all.
DIRECTORY_PREFIX_MESSAGE = ("This bucket does not support a prefix that does not end in a delimiter. "
                            "Specify a prefix path ending with a delimiter and try again.")


def create_directory_bucket(name: str, region: str = "us-east-1", account: str = "123456789012") -> None:
    """The stand-in's directory bucket, made in moto's backend: botocore sends CreateBucket for a
    "--x-s3" name to the s3express-control endpoint, which moto does not serve."""
    from moto.s3.models import s3_backends
    s3_backends[account]["global"].create_bucket(name, region)


def delete_directory_bucket(name: str, account: str = "123456789012") -> None:
    """DeleteBucket likewise goes to the s3express-control endpoint: the stand-in's is made in moto's backend."""
    from moto.s3.models import s3_backends
    s3_backends[account]["global"].delete_bucket(name)


def is_directory_bucket(name: str) -> bool:
    from ...core.requests import is_express_bucket  # the one naming rule, as botocore's
    return is_express_bucket(name)


def directory_listing_order(name: str) -> str:
    """A stable order that is not lexicographic (AWS gives no order at all)."""
    import hashlib
    return hashlib.sha256(name.encode()).hexdigest()


def patch_directory_buckets() -> None:
    from moto.s3.exceptions import S3ClientError
    from moto.s3.models import FakeKey, S3Backend
    from moto.s3.responses import S3Response

    def refuse(message: str):
        return S3ClientError("InvalidRequest", message)

    original_v2 = S3Backend.list_objects_v2

    def list_objects_v2(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys):
        if not is_directory_bucket(bucket.name):
            return original_v2(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys)
        if prefix and not prefix.endswith("/"):
            raise refuse(DIRECTORY_PREFIX_MESSAGE)
        if delimiter and delimiter != "/":
            raise refuse("Only the '/' delimiter is supported for directory buckets.")
        if start_after:
            raise refuse("StartAfter is not supported for directory buckets.")
        keys, folders, _, _ = self.list_objects(bucket, prefix, delimiter, marker=None, max_keys=None)
        ordered = sorted([*keys, *folders], key=lambda k: directory_listing_order(k.name if isinstance(k, FakeKey) else k))
        start = 0
        if continuation_token:
            start = self._pagination_tokens.get(continuation_token)
            if not isinstance(start, int):
                from moto.s3.exceptions import InvalidContinuationToken
                raise InvalidContinuationToken()
        page = ordered[start:start + max_keys] if max_keys else []
        truncated = start + len(page) < len(ordered) and max_keys > 0
        token = None
        if truncated:
            token = uuid_token()
            self._pagination_tokens[token] = start + len(page)
        return page, truncated, token

    S3Backend.list_objects_v2 = list_objects_v2

    original_v1 = S3Response.list_objects

    def list_objects(self):
        if is_directory_bucket(self.bucket_name):
            raise refuse("ListObjects is not supported for directory buckets: use ListObjectsV2.")
        return original_v1(self)

    S3Response.list_objects = list_objects

    # ListMultipartUploads: the same prefix rule; upload-id-marker is not supported for directory buckets.
    original_uploads = S3Response.list_multipart_uploads

    def list_multipart_uploads(self):
        if is_directory_bucket(self.bucket_name):
            prefix = self.querystring.get("prefix", [None])[0]
            if prefix and not prefix.endswith("/"):
                raise refuse(DIRECTORY_PREFIX_MESSAGE)
            if self.querystring.get("upload-id-marker", [None])[0]:
                raise refuse("UploadIdMarker is not supported for directory buckets.")
        return original_uploads(self)

    S3Response.list_multipart_uploads = list_multipart_uploads

    # "The ETag for the object in a directory bucket isn't the MD5 digest of the object" (PutObject
    # API reference): tools that compare ETags with local MD5s must not find them equal here either.
    original_etag = FakeKey.etag

    def etag(self) -> str:
        value = original_etag.fget(self)
        if self.bucket_name and is_directory_bucket(self.bucket_name):
            import hashlib
            return f'"{hashlib.sha256(value.encode()).hexdigest()[:32]}"'
        return value

    FakeKey.etag = property(etag)


def uuid_token() -> str:
    import uuid
    return uuid.uuid4().hex
