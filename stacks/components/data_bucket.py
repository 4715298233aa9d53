"""The lab's S3 bucket: datasets, training code, job output and results under fixed prefixes."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack, aws_s3 as s3
from constructs import Construct

from dslab.core.facts.storage import (CHECKPOINT_EXPIRY_DAYS, CHECKPOINT_NONCURRENT_DAYS, DATA_BUCKET_VERSIONED,
                                     DATA_MULTIPART_ABORT_DAYS, DATA_NONCURRENT_DAYS, OUTPUT_EXPIRY_DAYS)
from dslab.core.requests import CHECKPOINTS_PREFIX, CODE_PREFIX, DATASETS_PREFIX, OUTPUT_PREFIX, RESULTS_PREFIX


def data_bucket_name(stack: Stack) -> str:
    """The bucket's name, derivable in any stack of the lab without a cross-stack export."""
    return f"datasourcelab-data-{stack.account}-{stack.region}"


class DataBucket(Construct):
    """Private, encrypted, TLS-only bucket with server access logs.

    It survives ``cdk destroy`` by default (datasets and results are the lab's memory), and so do the
    policies that guard it: each bucket policy gets the removal policy of its bucket, so a kept bucket
    stays TLS-only (and its access-log bucket keeps the grant that lets S3 deliver logs).
    ``-c disposableBucket=true`` empties and deletes both buckets with the stack for throw-away labs.

    Coming back after a destroy (``-c adoptBucket=true``, `make deploy-again`): the bucket's fixed name
    now belongs to the kept bucket, so creating it again fails ("already exists"). The stack then
    references the kept bucket by name and creates no S3 resource at all. Why not the alternatives:
      - a new AWS::S3::BucketPolicy for the referenced bucket: the kept bucket still has its policy
        (retained above), and CloudFormation refuses to create a bucket policy where one exists
        ("The bucket policy already exists on bucket", e.g. aws-samples/aws-cdk-examples#1022);
        the kept policy is the same TLS-only document this stack wrote, so nothing is lost;
      - CloudFormation resource import (`cdk import`) of both buckets and both policies: possible
        (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/resource-import-supported-resources.html),
        but it needs the access-log bucket's generated name, an import-only first deployment and then a
        second one, and cannot be exercised without an account; adopting by name is one command, and
        every IAM statement and path reads the same fixed name either way.
    An adopted bucket is no longer the stack's: `make destroy` leaves it (and its policy) untouched.
    """

    PREFIXES = {"datasets": DATASETS_PREFIX, "code": CODE_PREFIX, "output": OUTPUT_PREFIX, "results": RESULTS_PREFIX,
                "checkpoints": CHECKPOINTS_PREFIX}

    def __init__(self, scope: Construct, construct_id: str, *, disposable: bool, adopt: bool = False) -> None:
        super().__init__(scope, construct_id)
        self.adopted = adopt
        self.access_logs: s3.IBucket | None = None
        if adopt:
            self.bucket: s3.IBucket = s3.Bucket.from_bucket_name(self, "Bucket", data_bucket_name(Stack.of(self)))
            return
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
            # Versioned: results and uploaded code are the lab's memory, and an overwrite or a delete
            # (a wrong `aws s3 rm --recursive`, a re-run writing the same key) stays recoverable for a
            # week. The cost stays bounded: a re-uploaded dataset keeps its old copy for 7 days, then
            # S3 expires it; delete markers left alone are removed
            # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-configuration-examples.html).
            versioned=DATA_BUCKET_VERSIONED,
            # Every figure is the model's (facts/storage.py), which prices what these rules keep; the synthesized
            # template is held to it for every context (dslab/core/stack_check.py).
            # Checkpoint trials' checkpoints are deleted by the job that reads them last (SageMaker's sync deletes in S3
            # what the job deletes): each becomes a noncurrent version, expired a day later by the checkpoints/ rule
            # (the bucket-wide week also matches it: "if two expiration policies overlap, the shorter expiration
            # policy is honored", S3 User Guide, lifecycle-conflicts.html). A run stopped before the job that deletes
            # them leaves them current: gone after a week, their noncurrent versions a day after that.
            lifecycle_rules=[s3.LifecycleRule(prefix=f"{OUTPUT_PREFIX}/", expiration=Duration.days(OUTPUT_EXPIRY_DAYS)),
                             s3.LifecycleRule(prefix=f"{CHECKPOINTS_PREFIX}/",
                                              expiration=Duration.days(CHECKPOINT_EXPIRY_DAYS),
                                              noncurrent_version_expiration=Duration.days(CHECKPOINT_NONCURRENT_DAYS)),
                             s3.LifecycleRule(
                                 abort_incomplete_multipart_upload_after=Duration.days(DATA_MULTIPART_ABORT_DAYS),
                                 noncurrent_version_expiration=Duration.days(DATA_NONCURRENT_DAYS)),
                             s3.LifecycleRule(expired_object_delete_marker=True)],
            **common)
        # The L2 gives each bucket policy DeletionPolicy Delete whatever the bucket's: a kept bucket
        # would lose its TLS-only guard with the stack. Keep each policy exactly as long as its bucket.
        for bucket in (self.bucket, self.access_logs):
            bucket.policy.apply_removal_policy(removal)

    def arn_for(self, prefix_key: str) -> str:
        return self.bucket.arn_for_objects(f"{self.PREFIXES[prefix_key]}/*")
