"""S3: buckets (and their kept names), bucket policies, S3 Express One Zone directory buckets."""

from __future__ import annotations

import json
from typing import Any

from ..model import ResourceFailed
from .base import Provider


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
        kwargs = {} if self.env.region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": self.env.region}}
        s3.create_bucket(Bucket=name, **kwargs)
        self._configure(name, props)
        return name, self._attributes(name)

    def _configure(self, name: str, props: dict[str, Any]) -> None:
        s3 = self.client("s3")
        if props.get("VersioningConfiguration"):
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": props["VersioningConfiguration"]["Status"]})
        if props.get("PublicAccessBlockConfiguration"):
            s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"])
        if props.get("Tags"):
            s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": props["Tags"]})

    def _attributes(self, name: str) -> dict[str, Any]:
        region = self.env.region
        return {"Arn": f"arn:aws:s3:::{name}", "DomainName": f"{name}.s3.amazonaws.com",
                "RegionalDomainName": f"{name}.s3.{region}.amazonaws.com", "DualStackDomainName": f"{name}.s3.dualstack.{region}.amazonaws.com",
                "WebsiteURL": f"http://{name}.s3-website-{region}.amazonaws.com"}

    def update(self, old, props):
        self._configure(old.physical_id, props)
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
        patches.create_directory_bucket(name, self.env.region, self.env.account)
        return name, {"Arn": f"arn:aws:s3express:{self.env.region}:{self.env.account}:bucket/{name}",
                      "AvailabilityZoneName": zone}

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
