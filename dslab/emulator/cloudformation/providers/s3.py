"""S3: buckets (and their kept names), bucket policies, S3 Express One Zone directory buckets."""

from __future__ import annotations

import json
from typing import Any

from ..model import ResourceFailed
from .base import Provider

# AWS::S3::Bucket Rule's properties the stand-in turns into PutBucketLifecycleConfiguration's LifecycleRule (the
# CloudFormation Template Reference, aws-properties-s3-bucket-rule.html, beside the S3 API reference's LifecycleRule);
# a property outside them fails the resource (the stand-in does not model it) rather than being dropped unseen.
BUCKET_RULE_KEYS = {"Id", "Prefix", "Status", "ExpirationInDays", "ExpiredObjectDeleteMarker",
                    "NoncurrentVersionExpiration", "NoncurrentVersionExpirationInDays", "AbortIncompleteMultipartUpload",
                    "ObjectSizeGreaterThan", "ObjectSizeLessThan"}
# AWS::S3Express::DirectoryBucket Rule: "AbortIncompleteMultipartUpload, ExpirationInDays, Id, ObjectSizeGreaterThan,
# ObjectSizeLessThan, Prefix, Status", and "You must specify at least one of the following properties:
# AbortIncompleteMultipartUpload, or ExpirationInDays" (aws-properties-s3express-directorybucket-rule.html): no
# versioning (so no noncurrent actions) and no transitions.
DIRECTORY_RULE_KEYS = {"AbortIncompleteMultipartUpload", "ExpirationInDays", "Id", "ObjectSizeGreaterThan",
                       "ObjectSizeLessThan", "Prefix", "Status"}


def lifecycle_rule(rule: dict[str, Any], index: int, *, directory: bool = False) -> dict[str, Any]:
    """A CloudFormation lifecycle rule as the S3 API's LifecycleRule; what CloudFormation's schema refuses fails the
    resource with its message ("Properties validation failed ... extraneous key [X] is not permitted")."""
    where = f"#/LifecycleConfiguration/Rules/{index}"
    allowed = DIRECTORY_RULE_KEYS if directory else BUCKET_RULE_KEYS
    extra = sorted(set(rule) - allowed)
    if extra:
        raise ResourceFailed(f"Properties validation failed for resource with message: {where}: extraneous key "
                             f"[{extra[0]}] is not permitted" + ("" if directory else " (in the stand-in)"))
    if rule.get("Status") not in ("Enabled", "Disabled"):
        raise ResourceFailed(f"Properties validation failed for resource with message: {where}/Status: "
                             f"{rule.get('Status')!r} is not a valid enum value (Enabled, Disabled)")
    if directory and not ({"AbortIncompleteMultipartUpload", "ExpirationInDays"} & set(rule)):
        raise ResourceFailed(f"Properties validation failed for resource with message: {where}: required key "
                             "[AbortIncompleteMultipartUpload or ExpirationInDays] not found")
    out: dict[str, Any] = {"Status": rule["Status"]}
    if rule.get("Id"):
        out["ID"] = rule["Id"]
    sizes = {k: int(rule[k]) for k in ("ObjectSizeGreaterThan", "ObjectSizeLessThan") if rule.get(k) is not None}
    prefix = rule.get("Prefix")
    if sizes:
        parts = {**({"Prefix": prefix} if prefix is not None else {}), **sizes}
        out["Filter"] = {"And": parts} if len(parts) > 1 else parts
    else:
        out["Filter"] = {"Prefix": prefix or ""}
    expiration: dict[str, Any] = {}
    if rule.get("ExpirationInDays") is not None:
        expiration["Days"] = int(rule["ExpirationInDays"])
    if rule.get("ExpiredObjectDeleteMarker") is not None:
        expiration["ExpiredObjectDeleteMarker"] = bool(rule["ExpiredObjectDeleteMarker"])
    if expiration:
        out["Expiration"] = expiration
    noncurrent = rule.get("NoncurrentVersionExpiration")
    if not noncurrent and rule.get("NoncurrentVersionExpirationInDays"):
        noncurrent = {"NoncurrentDays": rule["NoncurrentVersionExpirationInDays"]}
    if noncurrent:
        out["NoncurrentVersionExpiration"] = {k: int(v) for k, v in noncurrent.items()}
    if rule.get("AbortIncompleteMultipartUpload"):
        out["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": int(rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])}
    return out


class Bucket(Provider):
    name_property = "BucketName"
    replace_on = ("BucketName",)

    def create(self, logical_id, kind, props, *, stack):
        s3 = self.client("s3")
        name = props.get("BucketName") or self.generated_name(stack.name, logical_id, 63, lower=True)
        try:
            s3.head_bucket(Bucket=name)
            # CreateBucket in us-east-1 answers 200 for a bucket one already owns; CloudFormation does not.
            raise ResourceFailed(f"{name} already exists")
        except ResourceFailed:
            raise
        except Exception:  # noqa: BLE001 - absent: create it
            pass
        self._rules(props)   # what CloudFormation's schema refuses, refused before the bucket is made
        kwargs = {} if self.env.region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": self.env.region}}
        s3.create_bucket(Bucket=name, **kwargs)
        self._configure(name, props)
        return name, self._attributes(name)

    def _configure(self, name: str, props: dict[str, Any], updating: bool = False) -> None:
        s3 = self.client("s3")
        if props.get("VersioningConfiguration"):
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": props["VersioningConfiguration"]["Status"]})
        if props.get("PublicAccessBlockConfiguration"):
            s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"])
        if props.get("Tags"):
            s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": props["Tags"]})
        rules = self._rules(props)
        if rules:
            # What CloudFormation asks of S3: PutBucketLifecycleConfiguration with the rules in the API's shape, so
            # the stand-in's S3 holds (and validates) the rules the model prices (GetBucketLifecycleConfiguration).
            s3.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": rules})
        elif updating and self._had_lifecycle(name):   # the rules removed from the template: gone from the bucket
            s3.delete_bucket_lifecycle(Bucket=name)

    @staticmethod
    def _rules(props) -> list[dict[str, Any]]:
        config = props.get("LifecycleConfiguration") or {}
        return [lifecycle_rule(rule, i) for i, rule in enumerate(config.get("Rules") or [])]

    def _had_lifecycle(self, name: str) -> bool:
        try:
            return bool(self.client("s3").get_bucket_lifecycle_configuration(Bucket=name).get("Rules"))
        except Exception:  # noqa: BLE001 - NoSuchLifecycleConfiguration: none to remove
            return False

    def _attributes(self, name: str) -> dict[str, Any]:
        region = self.env.region
        return {"Arn": f"arn:aws:s3:::{name}", "DomainName": f"{name}.s3.amazonaws.com",
                "RegionalDomainName": f"{name}.s3.{region}.amazonaws.com", "DualStackDomainName": f"{name}.s3.dualstack.{region}.amazonaws.com",
                "WebsiteURL": f"http://{name}.s3-website-{region}.amazonaws.com"}

    def update(self, old, props):
        self._configure(old.physical_id, props, updating=True)
        return old.physical_id, self._attributes(old.physical_id)

    def delete(self, resource):
        s3 = self.client("s3")
        listed = self.unless_gone(s3.list_object_versions, Bucket=resource.physical_id, MaxKeys=1)
        if listed is None:
            return
        if listed.get("Versions") or listed.get("DeleteMarkers"):
            raise ResourceFailed(f"The bucket you tried to delete is not empty. You must delete all versions in the bucket. "
                                 f"(Bucket: {resource.physical_id})")
        s3.delete_bucket(Bucket=resource.physical_id)


class BucketPolicy(Provider):
    replace_on = ("Bucket",)

    def create(self, logical_id, kind, props, *, stack):
        s3 = self.client("s3")
        bucket = props["Bucket"]
        try:
            s3.get_bucket_policy(Bucket=bucket)
            raise ResourceFailed(f"The bucket policy already exists on bucket {bucket}.")
        except ResourceFailed:
            raise
        except Exception:  # noqa: BLE001 - no policy yet
            pass
        s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(props["PolicyDocument"]))
        return bucket, {}

    def update(self, old, props):
        self.client("s3").put_bucket_policy(Bucket=old.physical_id, Policy=json.dumps(props["PolicyDocument"]))
        return old.physical_id, {}

    def delete(self, resource):
        try:
            self.client("s3").delete_bucket_policy(Bucket=resource.physical_id)
        except Exception:  # noqa: BLE001 - the bucket is gone with it
            pass


class DirectoryBucket(Provider):
    """AWS::S3Express::DirectoryBucket: "<base>--<zone-id>--x-s3" in the stand-in's S3 (listed the way
    AWS lists directory buckets, see patches); only an empty one can be deleted."""
    name_property = "BucketName"
    replace_on = ("BucketName", "LocationName", "DataRedundancy")

    def create(self, logical_id, kind, props, *, stack):
        from ... import patches
        zone = props["LocationName"]
        name = props.get("BucketName") or f"{self.generated_name(stack.name, logical_id, 63 - len(zone) - 9, lower=True)}--{zone}--x-s3"
        if not name.endswith(f"--{zone}--x-s3"):
            raise ResourceFailed(f"Bucket name {name} must end with --{zone}--x-s3")
        if self.env.express_zones is not None and zone not in self.env.express_zones:
            raise ResourceFailed(f"S3 Express One Zone is not available in Availability Zone {zone}")
        rules = self._rules(props)   # refused before anything is made, as CloudFormation validates first
        patches.create_directory_bucket(name, self.env.region, self.env.account)
        self._apply(name, rules)
        return name, self._attributes(name, zone)

    def _attributes(self, name: str, zone: str) -> dict[str, Any]:
        return {"Arn": f"arn:aws:s3express:{self.env.region}:{self.env.account}:bucket/{name}",
                "AvailabilityZoneName": zone}

    @staticmethod
    def _rules(props) -> list[dict[str, Any]] | None:
        config = props.get("LifecycleConfiguration")
        if config is None:
            return None
        return [lifecycle_rule(rule, i, directory=True) for i, rule in enumerate(config.get("Rules") or [])]

    def _apply(self, name: str, rules: list[dict[str, Any]] | None) -> None:
        """The rules on the stand-in's bucket (PutBucketLifecycleConfiguration goes to the Regional s3express-control
        endpoint, which moto does not serve: set in its backend, where GetBucketLifecycleConfiguration reads them)."""
        from moto.s3.models import s3_backends
        bucket = s3_backends[self.env.account]["global"].get_bucket(name)
        if rules:
            bucket.set_lifecycle([_xml_shaped(rule) for rule in rules])
        else:
            bucket.delete_lifecycle()

    def update(self, old, props):
        self._apply(old.physical_id, self._rules(props))
        return old.physical_id, self._attributes(old.physical_id, props["LocationName"])

    def delete(self, resource):
        s3 = self.client("s3")
        listed = self.unless_gone(s3.list_objects_v2, Bucket=resource.physical_id, MaxKeys=1)
        if listed is None:
            return
        uploads = s3.list_multipart_uploads(Bucket=resource.physical_id).get("Uploads", [])
        if listed.get("KeyCount", 0) or uploads:
            raise ResourceFailed(f"The bucket you tried to delete is not empty (Bucket: {resource.physical_id})")
        from ... import patches
        patches.delete_directory_bucket(resource.physical_id, self.env.account)


def _xml_shaped(rule: dict[str, Any]) -> dict[str, Any]:
    """An API-shaped rule as moto's backend takes it: what its XML parser would give (every value a string)."""
    return {k: (_xml_shaped(v) if isinstance(v, dict) else str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in rule.items()}


class DirectoryBucketPolicy(Provider):
    """AWS::S3Express::BucketPolicy: the directory bucket's policy (PutBucketPolicy on the Regional endpoint), kept on
    the stand-in's bucket, where GetBucketPolicy finds it. "Bucket" names the directory bucket; the policy document is
    required (aws-resource-s3express-bucketpolicy.html)."""
    replace_on = ("Bucket",)

    def create(self, logical_id, kind, props, *, stack):
        self._put(props)
        return props["Bucket"], {}

    def _put(self, props) -> None:
        from moto.s3.models import s3_backends
        from ... import patches
        bucket, document = props.get("Bucket"), props.get("PolicyDocument")
        if not bucket or not patches.is_directory_bucket(bucket):
            raise ResourceFailed(f"Bucket {bucket!r} is not a directory bucket (<name>--<zone-id>--x-s3)")
        if not isinstance(document, dict) or not document.get("Statement"):
            raise ResourceFailed("Properties validation failed for resource with message: #: required key "
                                 "[PolicyDocument] not found")
        try:
            s3_backends[self.env.account]["global"].put_bucket_policy(bucket, json.dumps(document).encode())
        except Exception as err:  # noqa: BLE001 - NoSuchBucket: the bucket is not made (yet)
            raise ResourceFailed(f"The specified bucket does not exist ({bucket}): {err}") from None

    def update(self, old, props):
        self._put(props)
        return old.physical_id, {}

    def delete(self, resource):
        from moto.s3.models import s3_backends
        try:
            s3_backends[self.env.account]["global"].delete_bucket_policy(resource.physical_id)
        except Exception:  # noqa: BLE001 - the bucket is gone with it
            pass
