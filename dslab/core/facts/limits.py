"""AWS service limits the workflow is built around, and the arithmetic that sizes it.

Every number here comes from AWS documentation (cited) or is measured in the embedded stand-in,
which enforces the same rules (``dslab/emulator/patches/``); the tests run the largest experiment
``MAX_JOBS`` allows and check the measured figures against this arithmetic.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

# ---- Step Functions (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html) ----
# "Maximum input or output size for a task, state, or execution: 256 KiB of data as a UTF-8 encoded
# string." Exceeding it raises States.DataLimitExceeded, "a terminal error which cannot be caught by
# the States.ALL error type" (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html):
# the execution dies before Collect, so no results and no teardown. Hence everything below.
MAX_STATE_BYTES = 256 * 1024
# "25,000 events in a single state machine execution history. If the execution history reaches this
# quota, the execution will fail." (same quotas page)
MAX_HISTORY_EVENTS = 25_000

# ---- What flows through the state machine per job (bytes of JSON, worst case) ------------------
# A lane item: {"index":1234,"name":"<59 chars>","mode":"FastFile","express":true,"skip":true} <= 130 B
# A job outcome: {"index":1234,"name":"<59>-a3","status":"Completed","error":"<= 80 chars>"} <= 190 B
# The lanes list is replaced by the outcomes (the Run map writes its result over it), so the state
# holds one or the other, never both. Failure causes (a failed .sync job's Cause is its whole
# DescribeTrainingJob JSON, several KB) go to S3 and never into the state.
JOB_ITEM_BYTES = 130
JOB_OUTCOME_BYTES = 190
# Everything that does not grow with the job count: the plan summary, staging and FSx readiness,
# Collect's summary (its message is capped at SUMMARY_MESSAGE_CHARS), the teardown outcome.
FIXED_STATE_BYTES = 24 * 1024
SUMMARY_MESSAGE_CHARS = 4000
# Error names are identifiers (e.g. SageMaker.AmazonSageMakerException); longer ones are cut.
ERROR_NAME_CHARS = 80

# ---- History events per job, worst case (measured in the stand-in, see tests) ------------------
# A completed job costs ~20 events (map iteration, choices — skipped? and has an input channel? —,
# request load, the .sync task, record). Script jobs (no channel) take a second attempt loop of their
# own, so the channel choice is made once per job, never once per attempt.
# The worst job exhausts every retry: API_RETRIES throttling/quota retries and CAPACITY_ATTEMPTS - 1
# capacity retries (each ~10 events: catch, classify, wait, bump, task again), then stores its
# cause and is recorded failed. ``tests/test_workflow_at_scale.py`` measures it and keeps this bound true.
HISTORY_EVENTS_PER_JOB_WORST = 120

# ---- Polling loops: each bounded, each round's events counted -------------------------------------
# A loop that runs as long as the work it waits for (DataSync to EFS, FSx's S3 import, the FSx stack's
# deletion, Express staging behind another execution's lock) would, unbounded, cross 25,000 events on
# its own (DataSync polled every 20 s: ~1,600 events an hour) and fail the execution before Collect and
# the teardown, FSx still billing. So every loop has a cap, and every cap is in the budget below.
EFS_SYNC_POLL_SECONDS = 120
EFS_SYNC_MAX_CHECKS = 180           # 6 hours of DataSync; then the copy is cancelled and the EFS jobs fail
FSX_DATA_POLL_SECONDS = 60
FSX_DATA_MAX_CHECKS = 120           # spread over fsx_import_wait_minutes (24 h: a check every 12 minutes)
FSX_DATA_MAX_WAIT_MINUTES = 120     # default of the experiment's fsx_import_wait_minutes
TEARDOWN_POLL_SECONDS = 30
TEARDOWN_MAX_CHECKS = 90            # 45 minutes; deleting a Scratch 2 file system takes minutes
EXPRESS_STAGING_MAX_INVOCATIONS = 20   # 4 hours of copying; then the Express jobs are skipped
EXPRESS_LOCK_WAIT_SECONDS = 120     # between checks of another execution's staging lock
EXPRESS_LOCK_MAX_WAITS = 120        # 4 hours behind another execution's staging, then Skipped
# Events per round, measured in the stand-in (tests/test_workflow_at_scale.py runs every loop to its cap):
# a Wait (entered, exited), a task (entered, scheduled, started, succeeded, exited), a Pass, a Choice.
EVENTS_PER_EFS_CHECK = 11           # Wait, DescribeEfsSync, CountEfsSyncCheck, EfsSyncDone?
EVENTS_PER_FSX_CHECK = 9            # Wait, CheckFsxData, FsxDataReady?
EVENTS_PER_TEARDOWN_CHECK = 9       # Wait, CheckTeardown, TeardownSettled?
EVENTS_PER_EXPRESS_INVOCATION = 7   # StageExpress, ExpressStagingDone?
EVENTS_PER_EXPRESS_WAIT = 11        # StageExpress, ExpressStagingDone?, ExpressLockWaitOver?, Wait
HISTORY_EVENTS_BASE = 200           # plan, prepare, collect, verdict and the loops' first and last steps
HISTORY_EVENTS_FIXED = (HISTORY_EVENTS_BASE + EFS_SYNC_MAX_CHECKS * EVENTS_PER_EFS_CHECK
                        + FSX_DATA_MAX_CHECKS * EVENTS_PER_FSX_CHECK + TEARDOWN_MAX_CHECKS * EVENTS_PER_TEARDOWN_CHECK
                        + EXPRESS_STAGING_MAX_INVOCATIONS * EVENTS_PER_EXPRESS_INVOCATION
                        + EXPRESS_LOCK_MAX_WAITS * EVENTS_PER_EXPRESS_WAIT)

# ---- The bound ----------------------------------------------------------------------------------
# payload: (262,144 - 24,576) / 190 = 1,250 jobs; history: (25,000 - 5,480) / 120 = 162 jobs, every loop
# at its cap and every job at its worst. History is the tighter rule; 160 keeps it. (Bigger studies:
# split into several executions.)
MAX_JOBS = min((MAX_STATE_BYTES - FIXED_STATE_BYTES) // max(JOB_ITEM_BYTES, JOB_OUTCOME_BYTES),
               (MAX_HISTORY_EVENTS - HISTORY_EVENTS_FIXED) // HISTORY_EVENTS_PER_JOB_WORST) // 10 * 10

# ---- Retries of CreateTrainingJob -----------------------------------------------------------------
# Throttling and busy quotas are retried with full jitter (a random wait up to the capped
# exponential step), at most API_RETRIES times; validation errors never; capacity errors (a failed
# job whose reason says CapacityError) under a new name, CAPACITY_ATTEMPTS attempts in all.
API_RETRIES = 5
API_BACKOFF_SECONDS = (30, 60, 120, 240, 480)
CAPACITY_ATTEMPTS = 3
CAPACITY_BACKOFF_SECONDS = 120

# ---- Plan's cost per dataset --------------------------------------------------------------------
# ListObjectsV2 returns at most 1,000 keys a page, so listing 1.5 million objects is 1,500 requests:
# Plan never lists. It reads the stats file `dslab dataset upload` writes beside the prefix (one
# GetObject) and checks the prefix is not empty (one ListObjectsV2 with MaxKeys=1).
S3_REQUESTS_PER_DATASET = 2


# ---- Staging into the S3 Express One Zone bucket ---------------------------------------------------
# One Lambda invocation copies for at most EXPRESS_STAGING_BUDGET_SECONDS of its 15-minute timeout
# (Lambda's maximum), EXPRESS_COPY_THREADS CopyObject calls at a time, then hands the state machine a
# cursor (dataset index, ListObjectsV2 continuation token, objects done in that page: small and bounded) to go on from. At
# ~30 ms per copy that is ~2,000 objects/s: 1.5 million JPEGs in ~13 minutes, two invocations.
EXPRESS_STAGING_TIMEOUT_SECONDS = 15 * 60
EXPRESS_STAGING_BUDGET_SECONDS = 12 * 60
EXPRESS_COPY_THREADS = 64
# Before each batch of copies the function checks it can finish the batch within its budget: a copy
# takes EXPRESS_COPY_SECONDS plus its bytes at EXPRESS_COPY_BYTES_PER_SECOND (conservative assumptions,
# not measured: the largest object of the batch decides), and the 3 minutes between the budget and
# Lambda's 15-minute timeout absorb an estimate that is wrong by 25%.
EXPRESS_COPY_SECONDS = 1.0
EXPRESS_COPY_BYTES_PER_SECOND = 100 * 1024**2
# An inactive directory bucket (no requests for 90 days) answers 503 while it wakes, "typically within
# a few minutes" (S3 User Guide, directory buckets overview): staging keeps asking for up to this long.
EXPRESS_WAKE_SECONDS = 5 * 60
# CopyObject copies up to 5 GB in one call; larger objects go through multipart UploadPartCopy
# (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html).
COPY_OBJECT_MAX_BYTES = 5 * 1024**3


# ---- A training job's length ------------------------------------------------------------------------
# CreateTrainingJob StoppingCondition.MaxRuntimeInSeconds: "The default value is 1 day. The maximum value
# is 28 days." (SageMaker API reference, StoppingCondition; the same text in botocore's sagemaker model).
# An estimate longer than that is a job SageMaker would stop before it ends.
MAX_RUNTIME_SECONDS = 28 * 24 * 3600


# The inputs that make a job longer, named when every source's job is too long, and what brings it under.
RUNTIME_FIELDS = "--epochs/--samples/--instance-count"
RUNTIME_FIX = "fewer epochs/samples or more instances"
# The same in an experiment file's words (`dslab plan`/`run`, `recommend --experiment`, `export`).
EXPERIMENT_RUNTIME_FIX = "fewer epochs:, a larger instance_count:, a faster compute: or another of its modes:"


def none_too_long(seconds: dict[str, float], field: str = RUNTIME_FIELDS, fix: str = RUNTIME_FIX,
                  what: str = "{source}", points: dict[str, float] | None = None) -> dict[str, str]:
    """Each source whose job (the top of its range, ``seconds`` on one instance's clock; ``points``: its estimate)
    may outlast SageMaker's limit, with why; refused, naming ``field`` and the quickest one's length, when every one
    does. ``what`` names a job."""
    from ..errors import ConfigError
    problems = {source: runtime_problem(length, what.format(source=source), fix, (points or {}).get(source))
                for source, length in seconds.items()}
    problems = {source: problem for source, problem in problems.items() if problem}
    if seconds and len(problems) == len(seconds):
        raise ConfigError(field, problems[min(seconds, key=seconds.get)])
    return problems


def runtime_problem(seconds: float, what: str = "the job", fix: str = RUNTIME_FIX,
                    point_seconds: float | None = None) -> str | None:
    """Why a job whose range tops at ``seconds`` (wall time, each instance's clock) cannot run on SageMaker, or None.
    ``point_seconds``: its estimate, said beside the top where the top alone passes the limit."""
    if seconds <= MAX_RUNTIME_SECONDS:
        return None
    length = f"{_days(seconds)} days" if seconds < float("inf") else "without end"
    if point_seconds is not None and seconds < float("inf") and _days(point_seconds) != _days(seconds):
        length = f"{_days(point_seconds)} days (up to {_days(seconds)})"
    return f"{what} runs {length}, past the 28-day MaxRuntimeInSeconds: {fix}"


def _days(seconds: float) -> str:
    return f"{seconds / 86400:,.1f}" if seconds < 100 * 86400 else f"{seconds / 86400:,.0f}"


# ---- The lab's own bounds on what a job asks for (experiment files and the CLI alike) --------------
MAX_EPOCHS = 1000            # epochs of one job; recommend's break-even table estimates every count up to it
MAX_VOLUME_SIZE_GB = 16384   # the training volume: EBS gp2's largest volume is 16 TiB (SageMaker provisions gp2)
MAX_ACCELERATORS = 64        # emulated accelerators per instance (the largest type in instances.py has 16)
# The most s3_concurrency (GETs in flight) the lab's script is given, and `dslab size` advises: the script runs a
# thread per GET in flight (training/dslab_train/pipeline.py, s3_jpg_records); past about a thousand, one process's
# threads cost more than the GETs they overlap save (assumption).
SCRIPT_CONCURRENCY_MAX = 1024


# ---- defaults and bounds, the same for every command and every experiment file ----------------------
DEFAULT_INSTANCE = "ml.p3.2xlarge"   # the source post's instance (one V100)
DEFAULT_INSTANCE_COUNT = 1
DEFAULT_EPOCHS = 1


# Instances of one job: the largest cluster `dslab size` searches, and the most an experiment or a flag may ask.
MAX_INSTANCE_COUNT = 4096


def check_instance_count(count: Any, field: str) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_INSTANCE_COUNT:
        raise ConfigError(field, f"{count!r} instances", f"1..{MAX_INSTANCE_COUNT:,}")
    return count
