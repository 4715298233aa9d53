"""The lab's S3 bucket: datasets, training code, job output and results under fixed prefixes."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack, aws_s3 as s3
from constructs import Construct

from dslab.core.requests import CODE_PREFIX, DATASETS_PREFIX, OUTPUT_PREFIX, RESULTS_PREFIX


def data_bucket_name(stack: Stack) -> str:
    """The bucket's name, derivable in any stack of the lab without a cross-stack export."""
    return f"datasourcelab-data-{stack.account}-{stack.region}"


class DataBucket(Construct):
    """Private, encrypted, TLS-only bucket with server access logs.

    It survives ``cdk destroy`` by default (datasets and results are the lab's memory);
    ``-c disposableBucket=true`` empties and deletes it with the stack for throw-away labs.
    """

    PREFIXES = {"datasets": DATASETS_PREFIX, "code": CODE_PREFIX, "output": OUTPUT_PREFIX, "results": RESULTS_PREFIX}

    def __init__(self, scope: Construct, construct_id: str, *, disposable: bool) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.DESTROY if disposable else RemovalPolicy.RETAIN
        common = dict(
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            removal_policy=removal,
            auto_delete_objects=disposable,
        )
        self.access_logs = s3.Bucket(
            self, "AccessLogs", object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))], **common)
        stack = Stack.of(self)
        self.bucket = s3.Bucket(
            self, "Bucket",
            # A readable, predictable name: the CLI, IAM statements and people can find it.
            bucket_name=data_bucket_name(stack),
            server_access_logs_bucket=self.access_logs, server_access_logs_prefix="data-bucket/",
            lifecycle_rules=[s3.LifecycleRule(prefix=f"{OUTPUT_PREFIX}/", expiration=Duration.days(180)),
                             s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(2))],
            **common)

    def arn_for(self, prefix_key: str) -> str:
        return self.bucket.arn_for_objects(f"{self.PREFIXES[prefix_key]}/*")
