"""The model held to public figures, each with its source (issue 58): the source post's cells and statements ("Choose
the best data source for your Amazon SageMaker training job", /work/shared/reference/seed-blog.md, and Bencher's
stored notebook, dslab/contracts/bencher-cells.csv), the SageMaker Developer Guide's "50 GB in 100 MB shards in about 5
minutes", FSx for Lustre's and EFS's documented throughput per TiB and per mode, and S3's request prices. The expected
figures are the sources' own, written here, never read from the code."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dslab.core.facts.compute import compute_rate
from dslab.core.facts.prices import PriceTable
from dslab.core.model.estimate import FSX_IMPORT_RATE, estimate_mode
from dslab.core.model.provisioning import AS_DEPLOYED, EfsConfig, FsxConfig
from dslab.core.shape import DatasetShape

V100 = compute_rate("v100")[0]
CELLS = Path(__file__).resolve().parent.parent / "dslab" / "contracts" / "bencher-cells.csv"
MIB = 1.048576   # MB per MiB


def _estimate(mode: str, files: int, nbytes: float, **kwargs):
    base = dict(instance_type="ml.p3.2xlarge", instance_count=1, epochs=1, rate=V100, prices=PriceTable(),
                provisioning=AS_DEPLOYED)
    return estimate_mode(mode, DatasetShape(files=files, bytes=int(nbytes)), **{**base, **kwargs})


def _cells() -> list[dict[str, str]]:
    lines = [line for line in CELLS.read_text().splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


# ---- the source post -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cell", _cells(), ids=lambda c: f"{c['scenario']}-{c['mode']}")
def test_each_of_the_posts_cells_is_estimated_within_a_quarter_of_what_bencher_measured(cell):
    # Bencher's notebook (aws-samples/sagemaker-bencher, the post's tool): TrainingTimeInSeconds per cell, ml.p3.2xlarge,
    # ResNet-50 on one V100, one epoch. The model's downloading + training + other is the same span.
    found = _estimate(cell["mode"], int(cell["files"]), float(cell["dataset_gb"]) * 1e9)
    measured = float(cell["total_s"])
    assert found.downloading + found.training + found.other == pytest.approx(measured, rel=0.25), cell


def test_the_posts_large_small_file_scenario_fsx_in_about_5000_s_and_file_downloading_about_10000_s():
    # The post, scenario C (1.5 M small JPEGs, 54 GB): "FSx fastest, about 5,000 s total"; File mode "downloads for
    # about 10,000 s before training starts".
    fsx = _estimate("FSx", 1_530_350, 54e9)
    assert 4_000 <= fsx.downloading + fsx.training + fsx.other <= 6_000
    file = _estimate("File", 1_530_350, 54e9)
    assert 8_000 <= file.downloading <= 12_000
    # "FSx and File train equally fast" (within 10%), FastFile is I/O-bound in training.
    assert file.training == pytest.approx(fsx.training, rel=0.10)
    assert _estimate("FastFile", 1_530_350, 54e9).training > 1.5 * fsx.training


def test_fastfile_lists_about_5500_objects_a_second_whatever_their_size():
    # The post: "SageMaker lists the metadata of every object under the prefix, at about 5,500 objects per second
    # whatever their size": 1,100,000 more objects take 1,100,000 / 5,500 = 200 s more, small or large.
    small = _estimate("FastFile", 100_000, 10e9).downloading
    more = _estimate("FastFile", 1_200_000, 10e9).downloading
    larger = _estimate("FastFile", 1_200_000, 100e9).downloading
    assert more - small == pytest.approx(200.0, rel=0.01)
    assert larger == pytest.approx(more, rel=0.01)


def test_fsx_indexes_about_two_million_objects_an_hour():
    # The post: "initialisation time grows with the file count (about one hour to index about 2 million S3 objects)".
    assert FSX_IMPORT_RATE * 3600 == pytest.approx(2_000_000)


def test_file_mode_on_an_ebs_backed_p3_tops_out_at_250_mb_per_second():
    # The post: "EBS-backed instances (ml.p3.*) top out at 250 MB/s": 540 GB of 100 MB shards cannot download in less
    # than 540,000 MB / 250 MB/s = 2,160 s.
    found = _estimate("File", 5_400, 540e9, volume_size_gb=1000)
    assert found.downloading >= 540_000 / 250


# ---- the SageMaker Developer Guide -----------------------------------------------------------------------------------

def test_file_mode_downloads_50_gb_in_100_mb_shards_in_about_5_minutes():
    # SageMaker Developer Guide (model-access-training-data.html), quoted by the post: "50 GB in 100 MB shards takes
    # about 5 minutes". 500 shards of 100 MB on the post's ml.p3.2xlarge: between 4 and 6.5 minutes.
    found = _estimate("File", 500, 50e9, volume_size_gb=100)
    assert 4 * 60 <= found.downloading <= 6.5 * 60


# ---- FSx for Lustre and EFS, as their guides give them ---------------------------------------------------------------

@pytest.mark.parametrize("config, mbps", [
    # FSx for Lustre User Guide (performance.html): Scratch 2, 200 MB/s per TiB of storage baseline: 1.2 TiB (1,200 GiB)
    # gives 1,200 / 1,024 x 200 = 234.4 MB/s; 2.4 TiB 468.75 MB/s.
    (FsxConfig(capacity_gib=1200), 1200 / 1024 * 200),
    (FsxConfig(capacity_gib=2400), 468.75),
    # Persistent 2: 125, 250, 500 and 1,000 MB/s per TiB: 4,800 GiB = 4.6875 TiB.
    (FsxConfig.persistent2(125, 4800), 4.6875 * 125),
    (FsxConfig.persistent2(250, 4800), 4.6875 * 250),
    (FsxConfig.persistent2(500, 4800), 4.6875 * 500),
    (FsxConfig.persistent2(1000, 4800), 4_687.5),
])
def test_fsx_throughput_is_its_documented_rate_per_tib(config, mbps):
    assert config.throughput_mbps == pytest.approx(mbps)


def test_fsx_bills_its_capacity_at_the_posts_140_dollars_per_tb_month():
    # The post: "FSx for Lustre Scratch 2, 1.2 TB: $168 / month ($140 per TB)"; billed per hour of a 730-hour month:
    # 1,200 x $0.140 / 730 = $0.2301/h, $168 a month.
    assert FsxConfig(capacity_gib=1200).hourly(PriceTable()) * 730 == pytest.approx(168.0)


@pytest.mark.parametrize("mode, per_client_mibps", [("elastic", 1500.0), ("bursting", 500.0)])
def test_efs_per_client_throughput_is_the_user_guides(mode, per_client_mibps):
    # EFS User Guide (performance.html): one client reads at most 1,500 MiB/s with Elastic throughput, 500 MiB/s with
    # Bursting and Provisioned.
    assert EfsConfig(mode).per_client_mibps == per_client_mibps
    assert EfsConfig("provisioned", 100).per_client_mibps == 500.0


def test_efs_per_file_system_limits_in_us_east_1_are_the_quotas_pages():
    # EFS User Guide (limits.html), us-east-1, General Purpose: Elastic 60 GiB/s reads and 5 GiB/s writes (the
    # document history of 2 May 2025 raised reads "from 20 GiBps to 60 GiBps" in the large Regions); Provisioned
    # 10 / 3.33 GiB/s; Bursting 5 / 3 GiB/s. Figures in MiB/s.
    assert EfsConfig("elastic").limits == pytest.approx((60 * 1024, 5 * 1024))
    assert EfsConfig("provisioned", 100).limits == pytest.approx((10 * 1024, 3.33 * 1024), rel=1e-3)
    assert EfsConfig("bursting").limits == pytest.approx((5 * 1024, 3 * 1024))


# ---- S3's, FSx's and EFS's prices, as their pricing pages and the post give them -------------------------------------

@pytest.mark.parametrize("name, value", [
    # aws.amazon.com/s3/pricing, S3 Standard, us-east-1: GET $0.0004 per 1,000 (the post: "$0.40 per million"),
    # PUT, COPY, POST, LIST $0.005 per 1,000, storage $0.023 per GB-month (the post: "1 TB about $23 a month").
    ("s3_get_per_million", 0.40), ("s3_put_per_million", 5.00), ("s3_list_per_million", 5.00),
    ("s3_storage_gb_month", 0.023),
    # S3 Express One Zone: GET $0.00003 and PUT $0.00113 per 1,000.
    ("express_get_per_thousand", 0.00003), ("express_put_per_thousand", 0.00113),
    # The post: ml.p3.2xlarge "for one hour $3.825", "a 100 GB EBS volume for that hour $0.02" (100 x $0.14 / 730 h =
    # $0.019); FSx Scratch 2 "$140 per TB-month".
    ("ml_storage_gb_month", 0.14), ("fsx_scratch2_gb_month", 0.140),
    # aws.amazon.com/efs/pricing: Standard storage $0.30 per GB-month, Provisioned throughput $6.00 per MiB/s-month.
    ("efs_standard_gb_month", 0.30), ("efs_provisioned_mibps_month", 6.00),
])
def test_the_price_table_holds_the_published_prices(name, value):
    assert PriceTable()[name] == value


def test_the_posts_hour_of_p3_and_its_volume():
    prices = PriceTable()
    assert prices.instance_hourly("ml.p3.2xlarge") == 3.825
    assert round(100 * prices["ml_storage_gb_month"] / 730, 2) == 0.02


# ---- AWS's errors, as the services' error references name them (dslab/core/facts/aws_errors.py) --------------------

class FakeClientError(Exception):
    """botocore's ClientError as aws_errors reads it: ``response`` and ``operation_name``."""

    def __init__(self, code=None, message="", status=None, attempts=0, operation="GetObject"):
        super().__init__(code)
        error = {} if code is None else {"Code": code, "Message": message}
        self.response = {"Error": error, "ResponseMetadata": {**({"HTTPStatusCode": status} if status else {}),
                                                             "RetryAttempts": attempts}}
        self.operation_name = operation


@pytest.mark.parametrize("code, status, kind", [
    # The Common Errors page of each API reference: "InternalFailure ... HTTP Status Code: 500", "ServiceUnavailable
    # ... 503"; S3's error best practices: "If Amazon S3 returns an InternalError response, retry the request".
    ("InternalFailure", 500, "unavailable"), ("InternalError", 500, "unavailable"), ("InternalFailure", None, "unavailable"),
    ("InternalError", None, "unavailable"), ("ServiceUnavailable", 503, "unavailable"), ("RequestTimeout", None, "unavailable"),
    # Any HTTP 5xx is AWS's side; 499 is not.
    ("SomethingNew", 502, "unavailable"), ("SomethingNew", 500, "unavailable"), ("SomethingNew", 499, "other"),
    # Throttling: S3's "SlowDown" (503), EC2's "RequestLimitExceeded", the common "ThrottlingException" (400).
    ("SlowDown", 503, "throttled"), ("RequestLimitExceeded", 503, "throttled"), ("ThrottlingException", 400, "throttled"),
    ("Throttling", None, "throttled"),
    # Expired credentials or a clock off by more than 15 minutes.
    ("ExpiredToken", 400, "expired"), ("ExpiredTokenException", 400, "expired"), ("RequestExpired", 400, "expired"),
    # Refusals of access.
    ("AccessDenied", 403, "denied"), ("AccessDeniedException", 400, "denied"), ("UnauthorizedOperation", 403, "denied"),
    # The not-found codes of the operations called.
    ("NoSuchKey", 404, "missing"), ("ResourceNotFound", 400, "missing"), ("ParameterNotFound", 400, "missing"),
    ("ValidationException", 400, "other"), ("SomethingNew", None, "other"),
])
def test_each_error_code_is_classed_as_its_reference_says(code, status, kind):
    from dslab.core.facts import aws_errors
    assert aws_errors.kind(code, status) == kind
    assert aws_errors.is_transient_code(code, status) == (kind in ("throttled", "unavailable"))


def test_an_internal_failure_or_error_is_tried_again_and_a_refusal_is_not():
    from dslab.core.facts.aws_errors import is_transient
    assert is_transient(FakeClientError("InternalFailure", status=500))
    assert is_transient(FakeClientError("InternalError", status=500))
    assert is_transient(FakeClientError("SlowDown", status=503))
    assert not is_transient(FakeClientError("AccessDenied", status=403))
    assert not is_transient(ValueError("not an AWS error"))
    # Read by its code whatever the status, and by its status (any 5xx) whatever the code.
    assert is_transient(FakeClientError("ThrottlingException", status=400))
    assert is_transient(FakeClientError("InternalFailure"))
    assert is_transient(FakeClientError("SomethingNew", status=502))
    assert not is_transient(FakeClientError("SomethingNew", status=400))
    # A ClientError inside another exception (boto3's S3UploadFailedError wraps one) is read through its cause.
    try:
        try:
            raise FakeClientError("InternalError", status=500)
        except FakeClientError as inner:
            raise RuntimeError("upload failed") from inner
    except RuntimeError as outer:
        assert is_transient(outer)


def test_an_aws_error_is_read_with_its_code_message_status_operation_and_attempts():
    from dslab.core.facts.aws_errors import AwsError, aws_error
    found = aws_error(FakeClientError("SlowDown", "Please reduce\n  your request rate.", 503, 4, "PutObject"))
    assert found == AwsError("SlowDown", "Please reduce your request rate.", 503, "PutObject", 5)
    # No code: the HTTP status stands for it; neither: "Unknown". A message is cut at 300 characters.
    assert aws_error(FakeClientError(None, status=503)).code == "503"
    assert aws_error(FakeClientError(None)).code == "Unknown"
    assert len(aws_error(FakeClientError("X", "y" * 400)).message) == 300
    no_name = FakeClientError("X")
    no_name.operation_name = None
    assert aws_error(no_name).operation == "?" and aws_error(no_name).attempts == 1
    del no_name.operation_name   # an error without the attribute at all
    assert aws_error(no_name).operation == "?"
    assert aws_error(ValueError("x")) is None
    # Causes are followed five deep, no further.
    err: BaseException = FakeClientError("X")
    for depth in range(6):
        wrapper = RuntimeError(depth)
        wrapper.__cause__ = err
        err = wrapper
        assert (aws_error(err) is not None) == (depth < 4), depth
    # A context (raised while handling it) counts as a cause.
    ctx = RuntimeError("during")
    ctx.__context__ = FakeClientError("Y")
    assert aws_error(ctx).code == "Y"


def test_a_missing_training_job_is_recognised_in_sagemakers_words():
    from dslab.core.facts.aws_errors import training_job_missing
    # DescribeTrainingJob of a job that does not exist: "ValidationException: Requested resource not found."
    assert training_job_missing(FakeClientError("ValidationException", "Requested resource not found."))
    assert training_job_missing(FakeClientError("ValidationException", "Could not find training job 'x'"))
    assert training_job_missing(FakeClientError("ResourceNotFound", ""))
    assert training_job_missing(FakeClientError("ResourceNotFoundException", ""))
    assert not training_job_missing(FakeClientError("ValidationException", "1 validation error detected"))
    assert not training_job_missing(FakeClientError("AccessDenied", "not found"))
    assert not training_job_missing(ValueError("not found"))


def test_the_iam_action_is_named_as_iam_names_it():
    from dslab.core.facts.aws_errors import iam_action
    # S3 User Guide: ListObjectsV2 needs s3:ListBucket; HeadObject s3:GetObject.
    assert iam_action("s3", "ListObjectsV2") == "s3:ListBucket"
    assert iam_action("s3", "HeadObject") == "s3:GetObject"
    assert iam_action("s3", "GetObject") == "s3:GetObject"
    assert iam_action("stepfunctions", "StartExecution") == "states:StartExecution"
    assert iam_action("efs", "DescribeFileSystems") == "elasticfilesystem:DescribeFileSystems"
    assert iam_action(None, "ListObjectsV2") == "ListObjectsV2"
    assert iam_action("unknown", "Do") == "Do"


def test_each_class_of_error_says_what_to_do_for_the_user_and_for_a_role():
    from dslab.core.facts.aws_errors import explain, fix
    assert fix("SlowDown", 503) == ("AWS is throttling this account's requests (other tools calling the same API share "
                                    "the rate): try again in a minute")
    assert fix("SlowDown", 503, who="the Plan function").endswith(
        "share the rate): it passes: what stopped here can start again later")
    assert fix("InternalFailure") == "a temporary failure on AWS's side: try again in a few minutes"
    assert fix("InternalError", who="r") == ("a temporary failure on AWS's side: it passes: what stopped here can start "
                                             "again later")
    assert fix("ExpiredToken").startswith("your credentials have expired, or this machine's clock is more than 15 "
                                          "minutes off: refresh them (`aws sso login`")
    assert fix("ExpiredToken", who="the Collect function").startswith(
        "the Collect function's temporary credentials had expired")
    assert fix("AccessDenied", operation="ListObjectsV2", service="s3") == (
        "your credentials may not call s3:ListBucket: use the profile of the account the lab is deployed in "
        "(AWS_PROFILE) or ask for that permission")
    assert fix("AccessDenied", operation="ListObjectsV2", service="s3", who="the Plan function's role") == (
        "the Plan function's role may not call s3:ListBucket: deploy the lab again so the role has it "
        "(`make deploy FSX=keep`); a bucket policy or an organization's SCP can also refuse it")
    assert fix("NoSuchKey").startswith("the object is not there")
    assert fix("SomethingNew") == "AWS answered SomethingNew: fix what its message names, and report it if it stays"
    assert fix("SomethingNew", 503) == "a temporary failure on AWS's side: try again in a few minutes"
    # No operation named: the IAM action is "?".
    assert fix("AccessDenied", service="s3").startswith("your credentials may not call s3:?: ")
    said = explain(FakeClientError("NoSuchKey", "The specified key does not exist.", 404, 2, "GetObject"),
                   service="s3", what="reading the stats")
    assert said == ("reading the stats: AWS GetObject failed after 3 attempts (NoSuchKey: The specified key does not "
                    "exist.); the object is not there (deleted or never written): write it again (for a dataset, "
                    "`dslab dataset upload`) or name the right key")
    assert explain(FakeClientError("NoSuchKey", "", 404)) == (
        "AWS GetObject failed (NoSuchKey); the object is not there (deleted or never written): write it again (for a "
        "dataset, `dslab dataset upload`) or name the right key")
    assert explain(ValueError("boom"), what="uploading") == "uploading: ValueError: boom"
    # Two attempts are said; the status, the operation, the service and the role reach the fix.
    assert explain(FakeClientError("AccessDenied", "no", 403, 1, "ListObjectsV2"), service="s3",
                   who="the Plan function's role") == (
        "AWS ListObjectsV2 failed after 2 attempts (AccessDenied: no); the Plan function's role may not call "
        "s3:ListBucket: deploy the lab again so the role has it (`make deploy FSX=keep`); a bucket policy or an "
        "organization's SCP can also refuse it")
    assert explain(FakeClientError("SomethingNew", "", 503)) == (
        "AWS GetObject failed (SomethingNew); a temporary failure on AWS's side: try again in a few minutes")
    assert explain(ValueError("boom")) == "ValueError: boom"


# ---- FSx's API refusals, quotas and capacities; EFS's limits by Region, as the guides give them --------------------

def test_fsx_capacities_are_1200_2400_or_a_multiple_of_2400_gib():
    from dslab.core.facts.storage import fsx_capacity_for, fsx_capacity_problem
    # CreateFileSystem StorageCapacity: "the valid values are 1200 GiB, 2400 GiB, and increments of 2400 GiB".
    assert [fsx_capacity_for(g) for g in (1, 1200, 1201, 2400, 2401, 4800, 4801)] == [1200, 1200, 2400, 2400, 4800,
                                                                                      4800, 7200]
    assert fsx_capacity_problem(1200) is None and fsx_capacity_problem(7200, "PERSISTENT_2") is None
    assert fsx_capacity_problem(3600) == "3600 GiB is not a valid SCRATCH_2 capacity: 1200, 2400 or a multiple of 2400 GiB"
    assert fsx_capacity_problem(0) is not None and fsx_capacity_problem(-2400) is not None


@pytest.mark.parametrize("args, kwargs, found", [
    (("SCRATCH_2", 1200), {}, []),
    (("PERSISTENT_2", 2400, 250), {}, []),
    (("SCRATCH_1", 1200), {}, [("deployment_type", "'SCRATCH_1' is not a deployment type the lab builds: SCRATCH_2 or "
                                                   "PERSISTENT_2")]),
    # PerUnitStorageThroughput: "For PERSISTENT_2 SSD storage: 125, 250, 500, 1000 MB/s/TiB".
    (("PERSISTENT_2", 2400), {}, [("throughput", "PERSISTENT_2 needs a throughput per TiB of 125, 250, 500, 1000 "
                                                 "MB/s/TiB")]),
    (("PERSISTENT_2", 2400, 200), {}, [("throughput", "PERSISTENT_2 needs a throughput per TiB of 125, 250, 500, 1000 "
                                                      "MB/s/TiB, not 200")]),
    # "This option is only valid for PERSISTENT_1 and PERSISTENT_2 deployment types" (200 is Scratch 2's own).
    (("SCRATCH_2", 1200, 200), {}, []),
    (("SCRATCH_2", 1200, 500), {}, [("throughput", "SCRATCH_2 has no throughput setting (it gives 200 MB/s per TiB): "
                                                   "drop it, or choose PERSISTENT_2")]),
    # Persistent 2 links to S3 only through a data repository association; never on Lustre 2.10.
    (("PERSISTENT_2", 2400, 125), {"link": "import-path"},
     [("link", "PERSISTENT_2 links to S3 only through a data repository association: the legacy import path is for "
               "Scratch 1, Scratch 2 and Persistent 1")]),
    (("PERSISTENT_2", 2400, 125), {"link": None, "lustre_version": "2.10"},
     [("version", "PERSISTENT_2 does not run Lustre 2.10: use 2.12 or 2.15")]),
    # "Data repository associations are supported on all FSx for Lustre 2.12 and 2.15 file systems".
    (("SCRATCH_2", 1200), {"lustre_version": "2.10"}, [("version", "a data repository association needs Lustre 2.12 "
                                                                   "or 2.15, not 2.10")]),
    (("SCRATCH_2", 1200), {"link": "import-path"}, []),
    (("SCRATCH_2", 1200), {"link": "dra", "lustre_version": "2.12"}, []),
    (("SCRATCH_2", 1200), {"link": None, "lustre_version": "2.10"}, []),
    (("SCRATCH_2", 1000), {}, [("capacity", "1000 GiB is not a valid SCRATCH_2 capacity: 1200, 2400 or a multiple of "
                                            "2400 GiB")]),
])
def test_what_create_file_system_refuses(args, kwargs, found):
    from dslab.core.facts.storage import fsx_problems
    assert fsx_problems(*args, **kwargs) == found


def test_an_fsx_past_the_default_quota_of_100800_gib_says_which_quota_to_raise():
    from dslab.core.facts.storage import fsx_quota
    # FSx for Lustre User Guide, limits.html: "Lustre Scratch storage capacity 100800", "Lustre Persistent 2 ... 100800".
    assert fsx_quota(FsxConfig(capacity_gib=100_800)) is None
    found = fsx_quota(FsxConfig(capacity_gib=103_200))
    assert (found["code"], found["quota"], found["limit_gib"], found["needed_gib"]) == (
        "L-AD2FC696", "Lustre Scratch storage capacity", 100_800.0, 103_200)
    assert found["command"] == ("aws service-quotas request-service-quota-increase --service-code fsx --quota-code "
                                "L-AD2FC696 --desired-value 103200")
    assert (found["default_gib"], found["source"]) == (100_800, "FSx for Lustre User Guide, limits.html (defaults); "
                                                                 "Service Quotas codes as public listings give them")
    assert found["summary"].startswith('103,200 GiB is above the account\'s default quota "Lustre Scratch storage '
                                       'capacity" (100,800 GiB, L-AD2FC696)')
    persistent = fsx_quota(FsxConfig.persistent2(1000, 103_200))
    assert persistent["code"] == "L-8F1B9C74"
    # A quota already raised in the account holds it.
    assert fsx_quota(FsxConfig(capacity_gib=103_200), applied_gib=200_000) is None
    assert fsx_quota(FsxConfig(capacity_gib=103_200), applied_gib=0)["limit_gib"] == 0.0


@pytest.mark.parametrize("mode, region, read_gib, write_gib", [
    ("elastic", "us-east-1", 60, 5), ("elastic", "eu-west-2", 60, 1), ("elastic", "sa-east-1", 20, 1),
    ("provisioned", "us-west-2", 10, 3.33), ("provisioned", "eu-central-1", 3, 1),
    ("bursting", "ap-southeast-2", 5, 3), ("bursting", "ap-northeast-1", 3, 1),
])
def test_efs_limits_per_file_system_by_region(mode, region, read_gib, write_gib):
    # EFS User Guide limits.html, and its document history of 2 May 2025 (Elastic reads 20 -> 60 GiB/s in London,
    # Mumbai, Seoul, Sydney; writes unchanged).
    from dslab.core.facts.storage import efs_limits
    assert efs_limits(mode, region) == pytest.approx((read_gib * 1024, write_gib * 1024))
