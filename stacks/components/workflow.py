"""The benchmark workflow: Plan -> Stage EFS -> Run one training job per mode -> Collect -> Teardown FSx.

Plan and Collect are Lambda functions whose code is the ``dslab`` domain core (the same package the
CLI uses, copied without Docker). Everything else is native Step Functions: the S3, DataSync and
CloudFormation SDK integrations and ``sagemaker:createTrainingJob.sync``.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack, aws_iam as iam
from aws_cdk import aws_events as events, aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_, aws_logs as logs, aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn, aws_stepfunctions_tasks as tasks
from constructs import Construct

from .efs_staging import EfsStaging

from dslab.core.facts import limits
from dslab.workflow.fsx_guard import GUARD_SCHEDULE_MINUTES
from dslab.core.requests import (CHECKPOINT_CONFIG, CHECKPOINT_REQUEST_KEYS, DATASETS_PREFIX, REQUEST_KEYS,
                                 RESULTS_PREFIX, OUTPUT_PREFIX, SCRIPT_REQUEST_KEYS, STATS_SUFFIX)

# A fixed name: IAM statements (the teardown guard lists this machine's executions) and people can
# name it without a reference, which would be circular (the machine references the functions).
STATE_MACHINE_NAME = "DataSourceLab-Benchmark"
MAX_LANES = 40  # the experiment's max_concurrency is validated to 1..40
LAMBDA_PACKAGES = ("core", "workflow", "contracts")   # contracts: the calibration cells the estimate reads
# The training script's modules the core imports too (standard library only), shipped at the asset's root as the
# training archive ships them: DLIO's checkpoint layout, one implementation for the job and for Plan's sizing.
LAMBDA_TRAINING_MODULES = ("dslab_train/__init__.py", "dslab_train/checkpoint_layout.py")

# How Step Functions reports SageMaker API errors from the optimized integration: service errors
# with a modelled exception come as "SageMaker.<Name>Exception", the rest (throttling, validation)
# as "SageMaker.AmazonSageMakerException" with the service's error code in the Cause. AWS's own
# training-job example retries exactly SageMaker.AmazonSageMakerException and
# SageMaker.ResourceLimitExceededException
# (https://docs.aws.amazon.com/step-functions/latest/dg/connect-sagemaker.html). A failed .sync
# job is States.TaskFailed with its DescribeTrainingJob JSON as the Cause.
SAGEMAKER_API_ERRORS = ["SageMaker.AmazonSageMakerException", "SageMaker.ResourceLimitExceededException"]
# Which of those are worth retrying, by what the Cause says: throttling, a busy quota (jobs end and free it), and
# a temporary failure on AWS's side ("ServiceUnavailable: The request has failed due to a temporary failure of the
# server", "InternalFailure", SageMaker's Common Errors). A quota of 0 can never free up, and validation errors never
# pass on retry.
RETRYABLE_CAUSES = ["*ThrottlingException*", "*Rate exceeded*", "*ResourceLimitExceeded*", "*ServiceUnavailable*",
                    "*InternalFailure*"]
HOPELESS_CAUSES = ["*is 0 Instances*"]
# AWS's recommended retrier for Lambda tasks adds TooManyRequests to the service exceptions
# (https://docs.aws.amazon.com/step-functions/latest/dg/sfn-best-practices.html#bp-lambda-serviceexception).
LAMBDA_THROTTLED = ["Lambda.TooManyRequestsException"]
# DataSync's answers that a later look may not get: throttling and a temporary failure, named as Step Functions
# names an SDK integration's errors ("ServiceName.ErrorName ... always add the Exception suffix",
# https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html): DataSync's modelled
# InternalException, and the common errors ThrottlingException and ServiceUnavailable.
DATASYNC_TRANSIENT = ["DataSync.ThrottlingException", "DataSync.ServiceUnavailableException", "DataSync.InternalException"]


def _lambda_sources(repo_root: Path) -> list[tuple[Path, Path]]:
    """(file in the repository, its path in the asset) for every file the functions import."""
    sources = [repo_root / "dslab" / "__init__.py"]
    for package in LAMBDA_PACKAGES:
        sources += sorted(p for p in (repo_root / "dslab" / package).rglob("*")
                          if p.is_file() and p.suffix != ".pyc" and "__pycache__" not in p.parts)
    placed = [(path, path.relative_to(repo_root)) for path in sources]
    return placed + [(repo_root / "training" / name, Path(name)) for name in LAMBDA_TRAINING_MODULES]


def build_lambda_package(repo_root: Path, build_dir: Path) -> Path:
    """Copy the parts of ``dslab`` (and of the training script's ``dslab_train``) the Lambda functions import
    (standard library + boto3 only) into ``build_dir/lambda-<hash>/``. Named by content and moved into place
    whole, so syntheses running at once (test workers, the local lab) never see each other's half-written copy."""
    sources = _lambda_sources(repo_root)
    digest = hashlib.sha256()
    for path, placed in sources:
        digest.update(str(placed).encode() + b"\0" + path.read_bytes())
    out_dir = build_dir / f"lambda-{digest.hexdigest()[:12]}"
    if out_dir.exists():
        return out_dir
    build_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=build_dir, prefix=".lambda-"))
    for path, placed in sources:
        target = staging / placed
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    try:
        staging.rename(out_dir)
    except OSError:  # another synthesis got there first with the same content
        shutil.rmtree(staging, ignore_errors=True)
        return out_dir
    for old in [*build_dir.glob("lambda-*"), build_dir / "lambda"]:  # earlier sources' copies
        if old != out_dir and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return out_dir


class BenchmarkWorkflow(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, repo_root: Path, bucket: s3.IBucket,
                 training_role: iam.IRole, subnet_id: str,
                 training_sg_id: str, efs_file_system_arn: str,
                 environment: dict[str, str], fsx_stack_name: str, fsx_parameters: tuple[str, str],
                 efs_mount_auth: str = "anonymous", fsx_idle_hours: float = 0.0,
                 express_bucket_arn: str | None = None) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.bucket = bucket
        self.state_machine_arn = stack.format_arn(service="states", resource="stateMachine",
                                                  resource_name=STATE_MACHINE_NAME, arn_format=ArnFormat.COLON_RESOURCE_NAME)
        environment = {**environment, "DSLAB_FSX_STACK": fsx_stack_name}

        # ---- Lambda functions: the shared domain core --------------------------------------
        # Timeouts: Plan makes S3_REQUESTS_PER_DATASET requests per dataset, ~20 Service Quotas pages
        # and one PutObject per job (at most MAX_JOBS): a few hundred requests, seconds, against 5 minutes.
        package_dir = build_lambda_package(repo_root, repo_root / "build")
        code = lambda_.Code.from_asset(str(package_dir))
        self.plan_fn = self._function("PlanFunction", code, "dslab.workflow.handlers.plan", environment,
                                      "Validates an experiment and writes its CreateTrainingJob requests")
        self.fsx_data_fn = self._function("FsxDataFunction", code, "dslab.workflow.handlers.fsx_data", environment,
                                          "Checks that FSx has imported the S3 listing the FSx jobs read")
        self.collect_fn = self._function("CollectFunction", code, "dslab.workflow.handlers.collect", environment,
                                         "Turns finished training jobs into result records in S3")
        self.teardown_fn = self._function("TeardownFunction", code, "dslab.workflow.handlers.teardown", environment,
                                          "Deletes the FSx stack unless another execution still needs it, and follows the deletion")
        # Copies for up to EXPRESS_STAGING_BUDGET_SECONDS per invocation, so it gets Lambda's 15-minute maximum.
        self.express_fn = self._function("ExpressStagingFunction", code, "dslab.workflow.handlers.stage_express",
                                         environment, "Copies the Express jobs' datasets into the S3 Express One Zone bucket",
                                         timeout=Duration.seconds(limits.EXPRESS_STAGING_TIMEOUT_SECONDS))
        results_objects = bucket.arn_for_objects(f"{RESULTS_PREFIX}/*")
        fsx_parameter_arns = [stack.format_arn(service="ssm", resource="parameter", resource_name=p.lstrip("/"))
                              for p in fsx_parameters]
        # Without s3:ListBucket a missing object answers 403 instead of 404; the handlers tell the two
        # apart only with it (scoped to the prefix each function reads).
        def list_prefix(prefix: str) -> iam.PolicyStatement:
            return iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
                                       conditions={"StringLike": {"s3:prefix": [f"{prefix}/*"]}})

        self.plan_fn.add_to_role_policy(iam.PolicyStatement(actions=["s3:PutObject"], resources=[results_objects]))
        # The EFS sync names the datasets other running executions' EFS jobs read too (plan.efs_datasets_in_use):
        # which executions run, and their plan.json and results.json.
        self.plan_fn.add_to_role_policy(iam.PolicyStatement(actions=["states:ListExecutions"], resources=[self.state_machine_arn]))
        self.plan_fn.add_to_role_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[results_objects]))
        self.plan_fn.add_to_role_policy(list_prefix(RESULTS_PREFIX))
        self.plan_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{DATASETS_PREFIX}/*{STATS_SUFFIX}")]))
        self.plan_fn.add_to_role_policy(list_prefix(DATASETS_PREFIX))
        # Service Quotas' List* actions have no resource type: "*" is the only resource they take
        # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_servicequotas.html).
        self.plan_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas"], resources=["*"]))
        for fn in (self.plan_fn, self.fsx_data_fn):
            fn.add_to_role_policy(iam.PolicyStatement(actions=["ssm:GetParameters"], resources=fsx_parameter_arns))
        # FSx Describe* actions have no resource type either (list_amazonfsx.html).
        self.plan_fn.add_to_role_policy(iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"]))
        self.fsx_data_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["fsx:DescribeFileSystems", "fsx:DescribeDataRepositoryAssociations", "fsx:DescribeDataRepositoryTasks"],
            resources=["*"]))
        # An import of a dataset uploaded while FSx was up (fsx_data.imports_to_start): the file system's ID
        # is known only at run time (it comes and goes with its stack), the task's when it is made.
        self.fsx_data_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["fsx:CreateDataRepositoryTask"],
            resources=[stack.format_arn(service="fsx", resource="file-system", resource_name="*"),
                       stack.format_arn(service="fsx", resource="task", resource_name="*")]))
        self.fsx_data_fn.add_to_role_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[results_objects]))
        self.collect_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject"], resources=[results_objects]))
        self.collect_fn.add_to_role_policy(list_prefix(RESULTS_PREFIX))
        self.collect_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{OUTPUT_PREFIX}/*")]))
        self.collect_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"],
            resources=[stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")]))
        self._grant_teardown(fsx_stack_name, results_objects, list_prefix(RESULTS_PREFIX))
        # Express staging: CopyObject from a general purpose bucket into a directory bucket needs
        # s3:GetObject on the source and s3express:CreateSession (not ReadOnly) on the destination
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html).
        self.express_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{DATASETS_PREFIX}/*"), results_objects]))
        self.express_fn.add_to_role_policy(list_prefix(DATASETS_PREFIX))
        if express_bucket_arn:
            self.express_fn.add_to_role_policy(iam.PolicyStatement(
                actions=["s3express:CreateSession"], resources=[express_bucket_arn]))
            # Plan reads the stats file of a dataset uploaded straight into the directory bucket (one only
            # Express jobs read): its ListObjectsV2 and GetObject need a session, read-only
            # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-security-iam-example-bucket-policies.html).
            self.plan_fn.add_to_role_policy(iam.PolicyStatement(
                actions=["s3express:CreateSession"], resources=[express_bucket_arn],
                conditions={"StringEquals": {"s3express:SessionMode": "ReadOnly"}}))

        # ---- EFS staging with DataSync -------------------------------------------------------
        self.staging = EfsStaging(self, "EfsStaging", bucket=bucket, subnet_id=subnet_id, security_group_id=training_sg_id,
                                  efs_file_system_arn=efs_file_system_arn, efs_mount_auth=efs_mount_auth)
        self.sync_task = self.staging.task
        self.empty_task = self.staging.empty_task

        # ---- The state machine ------------------------------------------------------------------
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=RemovalPolicy.DESTROY)
        definition = self._definition()
        self.state_machine = sfn.StateMachine(
            self, "StateMachine",
            state_machine_name=STATE_MACHINE_NAME,
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
            tracing_enabled=True,
            comment="DataSourceLab: one SageMaker training job per data-source mode, every result kept",
        )
        self._grant_training_jobs(training_role)
        self.idle_guard = self._idle_guard(fsx_idle_hours) if fsx_idle_hours > 0 else None

    # ------------------------------------------------------------------------------------------
    def _function(self, cid: str, code: lambda_.Code, handler: str, environment: dict[str, str],
                  description: str, timeout: Duration = Duration.minutes(5)) -> lambda_.Function:
        log_group = logs.LogGroup(self, f"{cid}Logs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=RemovalPolicy.DESTROY)
        role = iam.Role(self, f"{cid}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        role.add_to_policy(iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                               resources=[f"{log_group.log_group_arn}:*"]))
        return lambda_.Function(
            self, cid, runtime=lambda_.Runtime.PYTHON_3_14, handler=handler, code=code,
            timeout=timeout, memory_size=512, environment=environment, role=role,
            log_group=log_group, description=description, tracing=lambda_.Tracing.ACTIVE)

    def _invoke(self, cid: str, fn: lambda_.IFunction, payload: dict, comment: str, **kwargs) -> tasks.LambdaInvoke:
        task = tasks.LambdaInvoke(self, cid, lambda_function=fn, comment=comment,
                                  payload=sfn.TaskInput.from_object(payload), **kwargs)
        task.add_retry(errors=LAMBDA_THROTTLED, interval=Duration.seconds(2), max_attempts=6, backoff_rate=2,
                       jitter_strategy=sfn.JitterType.FULL)
        return task

    # ------------------------------------------------------------------------------------------
    def _definition(self) -> sfn.IChainable:
        # What flows between states stays small and bounded per job (dslab/core/facts/limits.py): Plan
        # returns a summary and the lanes; the Run map writes its outcomes over the lanes; failure
        # causes go to S3; Collect's summary message is capped.
        # Plan answers a refusal in its result ({"error", "failed"}: ExperimentInvalid or PlanFailed, and a
        # readable reason); a function that does not finish at all (timeout, throttled past its retries)
        # is caught too, so no Plan problem ends the execution with a stack trace as its cause.
        refused = sfn.Fail(self, "PlanRefused", error_path="$.plan.error", cause_path="$.plan.failed")
        plan = self._invoke(
            "Plan", self.plan_fn,
            {"experiment.$": "$", "execution.$": "$$.Execution.Name", "state_machine.$": "$$.StateMachine.Id"},
            "Validate the experiment, check quotas and write one CreateTrainingJob request per job",
            result_selector={"plan.$": "$.Payload.plan", "lanes.$": "$.Payload.lanes"}, result_path="$")
        unfinished = sfn.Pass(self, "PlanDidNotFinish", parameters={
            "error": "PlanFailed",
            "failed.$": "States.Format('Plan did not finish ({}): the Plan state in the execution history says why', $.error.Error)"},
            result_path="$.plan")
        plan.add_catch(unfinished, errors=["States.ALL"], result_path="$.error")
        unfinished.next(refused)

        # Prepare: fill EFS and wait for FSx's S3 import side by side, before any job starts.
        prepare = sfn.Parallel(self, "PrepareData", parameters={"plan.$": "$.plan"},
                               comment="Data ready before jobs: EFS staged by DataSync, FSx's S3 listing imported, "
                                       "the Express datasets copied into the directory bucket",
                               result_selector={"staging.$": "$[0]", "fsx_data.$": "$[1]", "express.$": "$[2]"},
                               result_path="$.prepared")
        prepare.branch(self._efs_staging())
        prepare.branch(self._fsx_data_wait())
        prepare.branch(self._express_staging())
        run_jobs = self._run_map()

        # Collect: describe every job, price it, store results.json and results.csv.
        collect = self._invoke(
            "Collect", self.collect_fn,
            {"plan.$": "$.plan", "results.$": "$.lanes", "execution.$": "$$.Execution.Name", "prepared.$": "$.prepared"},
            "Describe every job and store results.json / results.csv before any teardown",
            result_selector={"summary.$": "$.Payload"}, result_path="$.collected")
        collect_failed = sfn.Pass(self, "CollectFailed", parameters={
            "failed": -1, "message.$": "States.Format('Collect could not store the results ({}): `dslab report "
                                       "EXECUTION` rebuilds them from SageMaker; the error of the Collect state in the "
                                       "execution history says why', $.collectError.Error)"},
            result_path="$.collected.summary")
        collect.add_catch(collect_failed, result_path="$.collectError")

        jobs_failed = sfn.Fail(self, "JobsFailed", error="JobsFailed", cause_path="$.collected.summary.message")
        results_not_stored = sfn.Fail(self, "ResultsNotStored", error="ResultsNotStored",
                                      cause_path="$.collected.summary.message")
        teardown_failed = sfn.Fail(self, "FsxTeardownFailed", error="FsxTeardownFailed", cause_path="$.teardown.message")
        done = sfn.Succeed(self, "AllJobsCompleted")
        teardown_bad = sfn.Condition.and_(
            sfn.Condition.is_present("$.teardown.status"),
            sfn.Condition.or_(*(sfn.Condition.string_equals("$.teardown.status", s)
                                for s in ("DELETE_FAILED", "TIMED_OUT", "ERROR", "NO_SERVICE_ROLE"))))
        verdict = (sfn.Choice(self, "Verdict")
                   .when(sfn.Condition.number_less_than("$.collected.summary.failed", 0), results_not_stored)
                   .when(teardown_bad, teardown_failed)
                   .when(sfn.Condition.number_greater_than("$.collected.summary.failed", 0), jobs_failed)
                   .otherwise(done))
        teardown = self._teardown(verdict)
        teardown_choice = (sfn.Choice(self, "TeardownFsx?")
                           .when(sfn.Condition.and_(sfn.Condition.boolean_equals("$.plan.teardown_fsx", True),
                                                    sfn.Condition.boolean_equals("$.plan.fsx_available", True)),
                                 teardown)
                           .otherwise(verdict))
        collect.next(teardown_choice)
        collect_failed.next(teardown_choice)
        run_jobs.next(collect)
        prepare.next(run_jobs)
        plan.next(sfn.Choice(self, "Planned?").when(sfn.Condition.is_present("$.plan.failed"), refused).otherwise(prepare))
        return plan

    def _efs_staging(self) -> sfn.IChainable:
        """Copy the datasets the EFS jobs need from S3 into EFS (only what changed), polled at most
        plan.efs_wait_checks times (every poll costs history events: dslab/core/facts/limits.py counts them);
        a copy still running then is cancelled. Ends {"status"}: SUCCESS, ERROR, TIMED_OUT or NOT_NEEDED."""
        start_sync = tasks.CallAwsService(
            self, "StartEfsSync", service="datasync", action="startTaskExecution",
            parameters={"TaskArn": self.sync_task.attr_task_arn,
                        "Includes": [{"FilterType": "SIMPLE_PATTERN", "Value.$": "$.plan.efs_include"}]},
            iam_resources=[self.sync_task.attr_task_arn],
            result_selector={"arn.$": "$.TaskExecutionArn", "status": "LAUNCHING", "checks": 0}, result_path="$.staging")
        wait_sync = sfn.Wait(self, "WaitEfsSync", time=sfn.WaitTime.duration(Duration.seconds(limits.EFS_SYNC_POLL_SECONDS)))
        describe_sync = tasks.CallAwsService(
            self, "DescribeEfsSync", service="datasync", action="describeTaskExecution",
            parameters={"TaskExecutionArn.$": "$.staging.arn"},
            iam_resources=[f"{self.sync_task.attr_task_arn}/execution/*"],
            result_selector={"status.$": "$.Status"}, result_path="$.sync")
        count = sfn.Pass(self, "CountEfsSyncCheck", parameters={
            "arn.$": "$.staging.arn", "status.$": "$.sync.status", "checks.$": "States.MathAdd($.staging.checks, 1)"},
            result_path="$.staging")
        staging_failed = sfn.Pass(self, "EfsStagingFailed", result=sfn.Result.from_object({"status": "ERROR"}))
        start_sync.add_catch(staging_failed, result_path="$.stagingError")
        # A throttled or unavailable look is a check all the same (counted, so the loop keeps its cap and its events
        # per round): the next one looks again. Anything else fails the staging.
        look_failed = sfn.Pass(self, "EfsSyncLookFailed", parameters={
            "arn.$": "$.staging.arn", "status.$": "$.staging.status", "checks.$": "States.MathAdd($.staging.checks, 1)"},
            result_path="$.staging")
        describe_sync.add_catch(look_failed, errors=DATASYNC_TRANSIENT, result_path="$.syncError")
        describe_sync.add_catch(staging_failed, result_path="$.stagingError")
        staged = sfn.Pass(self, "EfsStaged", parameters={"status.$": "$.staging.status"})
        timed_out = sfn.Pass(self, "EfsStagingTimedOut", result=sfn.Result.from_object({"status": "TIMED_OUT"}))
        cancel = tasks.CallAwsService(
            self, "CancelEfsSync", service="datasync", action="cancelTaskExecution",
            parameters={"TaskExecutionArn.$": "$.staging.arn"},
            iam_resources=[f"{self.sync_task.attr_task_arn}/execution/*"], result_path=sfn.JsonPath.DISCARD)
        cancel.add_catch(timed_out, result_path="$.cancelError")
        cancel.next(timed_out)
        not_needed = sfn.Pass(self, "NoEfsStaging", result=sfn.Result.from_object({"status": "NOT_NEEDED"}))
        start_sync.next(wait_sync)
        wait_sync.next(describe_sync)
        describe_sync.next(count)
        done = (sfn.Choice(self, "EfsSyncDone?")
                .when(sfn.Condition.string_equals("$.staging.status", "SUCCESS"), staged)
                .when(sfn.Condition.string_equals("$.staging.status", "ERROR"), staged)
                .when(sfn.Condition.number_greater_than_equals_json_path("$.staging.checks", "$.plan.efs_wait_checks"), cancel)
                .otherwise(wait_sync))
        count.next(done)
        look_failed.next(done)
        return (sfn.Choice(self, "NeedEfsStaging?")
                .when(sfn.Condition.string_equals("$.plan.efs_include", ""), not_needed)
                .otherwise(start_sync))

    def _fsx_data_wait(self) -> sfn.IChainable:
        """Until FSx has imported the S3 listing the FSx jobs read, bounded. Ends {"ready", "reason", ...}."""
        first = sfn.Pass(self, "FirstFsxCheck", result=sfn.Result.from_object({"checks": 0}), result_path="$.fsx")
        check = self._invoke("CheckFsxData", self.fsx_data_fn, {"plan.$": "$.plan", "checks.$": "$.fsx.checks"},
                             "Is the S3 metadata import of FSx's data repository association complete?",
                             result_selector={"ready.$": "$.Payload.ready", "final.$": "$.Payload.final",
                                              "checks.$": "$.Payload.checks", "reason.$": "$.Payload.reason"},
                             result_path="$.fsx")
        # At most FSX_DATA_MAX_CHECKS checks, spread over the experiment's fsx_import_wait_minutes (Plan says how far apart).
        wait = sfn.Wait(self, "WaitFsxData", time=sfn.WaitTime.seconds_path("$.plan.fsx_poll_seconds"))
        check_failed = sfn.Pass(self, "FsxCheckFailed", result=sfn.Result.from_object({
            "ready": False, "final": True, "checks": -1,
            "reason": "the FSx readiness check failed: see the CheckFsxData state's error in the execution history"}))
        check.add_catch(check_failed, result_path="$.fsxError")
        settled = sfn.Pass(self, "FsxDataSettled", parameters={"ready.$": "$.fsx.ready", "reason.$": "$.fsx.reason",
                                                               "checks.$": "$.fsx.checks"})
        no_fsx_jobs = sfn.Pass(self, "NoFsxJobs", result=sfn.Result.from_object(
            {"ready": True, "reason": "no FSx jobs to wait for", "checks": 0}))
        first.next(check)
        wait.next(check)
        check.next(sfn.Choice(self, "FsxDataReady?")
                   .when(sfn.Condition.boolean_equals("$.fsx.ready", True), settled)
                   .when(sfn.Condition.boolean_equals("$.fsx.final", True), settled)
                   .otherwise(wait))
        return (sfn.Choice(self, "NeedFsxData?")
                .when(sfn.Condition.number_greater_than("$.plan.fsx_jobs", 0), first)
                .otherwise(no_fsx_jobs))

    def _express_staging(self) -> sfn.IChainable:
        """Copy the Express jobs' datasets into the directory bucket, one bounded invocation after
        another (each returns a small cursor). Ends {"ready", "reason", "invocations"}."""
        first = sfn.Pass(self, "FirstExpressCopy", result=sfn.Result.from_object({"cursor": {}, "invocations": 0}),
                         result_path="$.express")
        copy = self._invoke("StageExpress", self.express_fn,
                            {"plan.$": "$.plan", "cursor.$": "$.express.cursor", "execution.$": "$$.Execution.Name"},
                            "Copy the datasets the Express jobs read into the S3 Express One Zone bucket",
                            result_selector={"done.$": "$.Payload.done", "ready.$": "$.Payload.ready",
                                             "wait.$": "$.Payload.wait", "cursor.$": "$.Payload.cursor",
                                             "reason.$": "$.Payload.reason", "invocations.$": "$.Payload.invocations"},
                            result_path="$.express")
        failed = sfn.Pass(self, "ExpressStagingFailed", result=sfn.Result.from_object({
            "ready": False, "invocations": -1,
            "reason": "copying into the S3 Express One Zone bucket failed: see the StageExpress state's error"}))
        copy.add_catch(failed, result_path="$.expressError")
        settled = sfn.Pass(self, "ExpressStaged", parameters={"ready.$": "$.express.ready", "reason.$": "$.express.reason",
                                                             "invocations.$": "$.express.invocations"})
        out_of_time = sfn.Pass(self, "ExpressStagingTooLong", parameters={
            "ready": False, "invocations.$": "$.express.invocations",
            "reason.$": "States.Format('still copying after {} invocations: {}', $.express.invocations, $.express.reason)"})
        # Another execution is staging the same dataset (it holds the dataset's lock): wait, bounded.
        wait = sfn.Wait(self, "WaitExpressLock", time=sfn.WaitTime.duration(Duration.seconds(limits.EXPRESS_LOCK_WAIT_SECONDS)))
        waited_too_long = sfn.Pass(self, "ExpressLockHeldTooLong", parameters={
            "ready": False, "invocations.$": "$.express.invocations",
            "reason.$": "States.Format('gave up waiting after {} checks: {}', $.express.cursor.waits, $.express.reason)"})
        nothing = sfn.Pass(self, "NoExpressJobs", result=sfn.Result.from_object(
            {"ready": True, "reason": "no Express jobs", "invocations": 0}))
        first.next(copy)
        wait.next(copy)
        copy.next(sfn.Choice(self, "ExpressStagingDone?")
                  .when(sfn.Condition.boolean_equals("$.express.done", True), settled)
                  .when(sfn.Condition.boolean_equals("$.express.wait", True),
                        sfn.Choice(self, "ExpressLockWaitOver?")
                        .when(sfn.Condition.number_greater_than_equals_json_path("$.express.cursor.waits",
                                                                                "$.plan.express_max_waits"), waited_too_long)
                        .otherwise(wait))
                  .when(sfn.Condition.number_greater_than_equals_json_path("$.express.invocations",
                                                                          "$.plan.express_wait_checks"), out_of_time)
                  .otherwise(copy))
        return (sfn.Choice(self, "NeedExpressStaging?")
                .when(sfn.Condition.number_greater_than("$.plan.express_datasets", 0), first)
                .otherwise(nothing))

    def _teardown(self, verdict: sfn.IChainable) -> sfn.IChainable:
        """DeleteStack of the FSx stack, unless another execution needs FSx, then follow it to its end."""
        def step(cid: str, payload: dict, comment: str) -> tasks.LambdaInvoke:
            return self._invoke(cid, self.teardown_fn, {"plan.$": "$.plan", **payload}, comment,
                                payload_response_only=True, result_path="$.teardown")

        start = step("StartTeardown", {"action": "start", "state_machine.$": "$$.StateMachine.Id",
                                       "execution_arn.$": "$$.Execution.Id"},
                     "The same mechanism as `make fsx-down`: delete the FSx stack through CloudFormation")
        check = step("CheckTeardown", {"action": "check", "teardown.$": "$.teardown"},
                     "DeleteStack is asynchronous: follow the FSx stack to DELETE_COMPLETE or DELETE_FAILED")
        wait = sfn.Wait(self, "WaitTeardown", time=sfn.WaitTime.duration(Duration.seconds(limits.TEARDOWN_POLL_SECONDS)))
        error = sfn.Pass(self, "TeardownError", parameters={
            "status": "ERROR", "final": True,
            "message.$": "States.Format('Tearing FSx down failed ({}): FSx may still exist and bill; check with `dslab fsx status`', $.teardownError.Error)"},
            result_path="$.teardown")
        for task in (start, check):
            task.add_catch(error, result_path="$.teardownError")
        error.next(verdict)
        done = (sfn.Choice(self, "TeardownSettled?")
                .when(sfn.Condition.boolean_equals("$.teardown.final", True), verdict)
                .otherwise(wait))
        start.next(done)
        wait.next(check)
        check.next(done)
        return start

    def _run_map(self) -> sfn.Map:
        # Concurrency: Plan deals the jobs round-robin into lanes (max_concurrency, lowered to what
        # the account's quotas allow); lanes run side by side and each runs its jobs one at a time.
        # (MaxConcurrencyPath would say the same in one Map, but the ASL validators in use do not know it.)
        # The outcomes are written over $.lanes: the job list is not needed once the jobs have run.
        lanes = sfn.Map(
            self, "RunLanes", items_path="$.lanes", max_concurrency=MAX_LANES,
            item_selector={"lane.$": "$$.Map.Item.Value", "bucket.$": "$.plan.bucket", "base.$": "$.plan.base",
                           "staging.$": "$.prepared.staging.status", "fsx_ready.$": "$.prepared.fsx_data.ready",
                           "express_ready.$": "$.prepared.express.ready"},
            result_path="$.lanes")
        run = sfn.Map(
            self, "RunJobs", items_path="$.lane", max_concurrency=1,
            item_selector={"job.$": "$$.Map.Item.Value", "bucket.$": "$.bucket", "base.$": "$.base",
                           "staging.$": "$.staging", "fsx_ready.$": "$.fsx_ready", "express_ready.$": "$.express_ready",
                           "backoff": list(limits.API_BACKOFF_SECONDS)})

        def record(cid: str, status: str, error: str | None = None, name_path: str = "$.job.name") -> sfn.Pass:
            fields = {"index.$": "$.job.index", "name.$": name_path, "status": status}
            if error:
                fields["error"] = error
            return sfn.Pass(self, cid, parameters=fields)

        skipped = record("RecordSkipped", "Skipped")
        staging_failed = record("RecordStagingFailed", "Failed", "EfsStagingFailed")
        fsx_not_ready = record("RecordFsxNotReady", "Skipped", "FsxDataNotReady")
        express_not_staged = record("RecordExpressNotStaged", "Skipped", "ExpressNotStaged")
        first_attempt = sfn.Pass(self, "FirstAttempt", parameters={"jobName.$": "$.job.name", "attempt": 1, "retries": 0},
                                 result_path="$.run")
        load = tasks.CallAwsService(
            self, "LoadRequest", service="s3", action="getObject",
            parameters={"Bucket.$": "$.bucket", "Key.$": "States.Format('{}/requests/{}.json', $.base, $.job.name)"},
            iam_resources=[self.bucket.arn_for_objects(f"{RESULTS_PREFIX}/*")], iam_action="s3:GetObject",
            result_selector={"request.$": "States.StringToJson($.Body)"}, result_path="$.loaded")
        completed = sfn.Pass(self, "RecordCompleted", parameters={
            "index.$": "$.job.index", "name.$": "$.outcome.name", "status.$": "$.outcome.status"})

        # A failed attempt: its full Cause goes to S3 (Collect reads it), only the error name stays.
        failed = sfn.Pass(self, "RecordFailed", parameters={
            "index.$": "$.job.index", "name.$": "$.run.jobName", "status": "Failed", "error.$": "$.error.Error"})
        keep_cause = tasks.CallAwsService(
            self, "KeepFailureCause", service="s3", action="putObject",
            parameters={"Bucket.$": "$.bucket", "Key.$": "States.Format('{}/failures/{}.txt', $.base, $.run.jobName)",
                        "Body.$": "$.error.Cause", "ContentType": "text/plain"},
            iam_resources=[self.bucket.arn_for_objects(f"{RESULTS_PREFIX}/*")], iam_action="s3:PutObject",
            result_path=sfn.JsonPath.DISCARD)
        keep_cause.add_catch(failed, result_path=sfn.JsonPath.DISCARD)
        keep_cause.next(failed)
        has_cause = (sfn.Choice(self, "HasCause?")
                     .when(sfn.Condition.is_present("$.error.Cause"), keep_cause)
                     .otherwise(failed))

        # Two attempt loops, one per request shape: a Task's Parameters name every key it passes, and a
        # Script job has no InputDataConfig (CreateTrainingJob takes it absent but refuses an empty list:
        # the shape's minimum is one channel). The choice is made once per job, so the worst job's
        # history grows by one Choice (2 events), not by one per attempt (dslab/core/facts/limits.py).
        # A checkpoint trial's SageMaker-sync job has no channel either, and a CheckpointConfig: a third loop, chosen
        # by the same Choice.
        train = self._attempt_loop("", REQUEST_KEYS, completed, has_cause)
        train_script = self._attempt_loop("Script", SCRIPT_REQUEST_KEYS, completed, has_cause)
        train_checkpoint = self._attempt_loop("Checkpoint", CHECKPOINT_REQUEST_KEYS, completed, has_cause)
        has_channel = (sfn.Choice(self, "HasInputChannel?")
                       .when(sfn.Condition.is_present("$.loaded.request.InputDataConfig"), train)
                       .when(sfn.Condition.is_present(f"$.loaded.request.{CHECKPOINT_CONFIG}"), train_checkpoint)
                       .otherwise(train_script))
        load.add_catch(has_cause, result_path="$.error")
        iteration = (sfn.Choice(self, "Skipped?")
                     .when(sfn.Condition.is_present("$.job.skip"), skipped)
                     .when(sfn.Condition.and_(sfn.Condition.string_equals("$.job.mode", "EFS"),
                                              sfn.Condition.not_(sfn.Condition.string_equals("$.staging", "SUCCESS"))),
                           staging_failed)
                     .when(sfn.Condition.and_(sfn.Condition.string_equals("$.job.mode", "FSx"),
                                              sfn.Condition.boolean_equals("$.fsx_ready", False)), fsx_not_ready)
                     .when(sfn.Condition.and_(sfn.Condition.is_present("$.job.express"),
                                              sfn.Condition.boolean_equals("$.express_ready", False)), express_not_staged)
                     .otherwise(first_attempt.next(load).next(has_channel)))
        run.item_processor(iteration)
        lanes.item_processor(run)
        return lanes

    def _attempt_loop(self, kind: str, keys: tuple[str, ...], completed: sfn.IChainable,
                      has_cause: sfn.IChainable) -> sfn.State:
        """CreateTrainingJob.sync for requests with ``keys``, and its retries: a capacity shortage under a
        new name after CAPACITY_BACKOFF_SECONDS, throttling and busy quotas with full jitter; any other
        failure goes to ``has_cause``. ``kind`` keeps the states' names apart ("" for channel jobs)."""
        parameters = {key + ".$": f"$.loaded.request.{key}" for key in keys}
        parameters["TrainingJobName.$"] = "$.run.jobName"
        train = sfn.CustomState(self, f"Run{kind}TrainingJob", state_json={
            "Type": "Task",
            "Resource": f"arn:{Stack.of(self).partition}:states:::sagemaker:createTrainingJob.sync",
            "Parameters": parameters,
            "ResultSelector": {"name.$": "$.TrainingJobName", "status.$": "$.TrainingJobStatus"},
            "ResultPath": "$.outcome",
        })
        # Capacity shortage: the job failed with CapacityError; try again later under a new name.
        capacity_wait = sfn.Wait(self, f"{kind}CapacityBackOff",
                                 time=sfn.WaitTime.duration(Duration.seconds(limits.CAPACITY_BACKOFF_SECONDS)))
        next_attempt = sfn.Pass(self, f"{kind}NextAttempt", parameters={
            "jobName.$": "States.Format('{}-a{}', $.job.name, States.MathAdd($.run.attempt, 1))",
            "attempt.$": "States.MathAdd($.run.attempt, 1)", "retries.$": "$.run.retries"}, result_path="$.run")
        # Throttling or a busy quota: the same request again after a random wait up to the step's cap
        # ("full jitter"), at most API_RETRIES times.
        api_delay = sfn.Pass(self, f"{kind}ApiBackOffDelay", parameters={
            "seconds.$": "States.MathRandom(1, States.ArrayGetItem($.backoff, $.run.retries))"}, result_path="$.delay")
        api_wait = sfn.Wait(self, f"{kind}ApiBackOff", time=sfn.WaitTime.seconds_path("$.delay.seconds"))
        api_retry = sfn.Pass(self, f"{kind}ApiRetry", parameters={
            "jobName.$": "$.run.jobName", "attempt.$": "$.run.attempt",
            "retries.$": "States.MathAdd($.run.retries, 1)"}, result_path="$.run")
        cause = "$.error.Cause"
        capacity = sfn.Condition.and_(sfn.Condition.is_present(cause),
                                      sfn.Condition.string_matches(cause, "*CapacityError*"),
                                      sfn.Condition.number_less_than("$.run.attempt", limits.CAPACITY_ATTEMPTS))
        retryable = sfn.Condition.and_(
            sfn.Condition.is_present(cause),
            sfn.Condition.or_(*(sfn.Condition.string_equals("$.error.Error", e) for e in SAGEMAKER_API_ERRORS)),
            sfn.Condition.or_(*(sfn.Condition.string_matches(cause, p) for p in RETRYABLE_CAUSES)),
            sfn.Condition.not_(sfn.Condition.or_(*(sfn.Condition.string_matches(cause, p) for p in HOPELESS_CAUSES))),
            sfn.Condition.number_less_than("$.run.retries", limits.API_RETRIES))
        classify = (sfn.Choice(self, f"Classify{kind}Error")
                    .when(capacity, capacity_wait)
                    .when(retryable, api_delay)
                    .otherwise(has_cause))
        capacity_wait.next(next_attempt)
        next_attempt.next(train)
        api_delay.next(api_wait)
        api_wait.next(api_retry)
        api_retry.next(train)
        # Every failure of a job becomes data (a result record); one job never stops the others.
        train.add_catch(classify, errors=["States.ALL"], result_path="$.error")
        train.next(completed)
        return train

    # ------------------------------------------------------------------------------------------
    def _idle_guard(self, idle_hours: float) -> events.Rule:
        """FSx bills by the hour: delete it after ``idle_hours`` without a workflow execution
        (dslab/workflow/fsx_guard.py). Costs ~1,500 Lambda invocations a month (cents at most)."""
        return events.Rule(
            self, "FsxIdleGuard", schedule=events.Schedule.rate(Duration.minutes(GUARD_SCHEDULE_MINUTES)),
            description=f"DataSourceLab: delete FSx for Lustre after {idle_hours:g} h without a workflow execution",
            targets=[targets.LambdaFunction(self.teardown_fn, retry_attempts=2, event=events.RuleTargetInput.from_object(
                {"action": "idle", "state_machine": self.state_machine_arn, "idle_hours": idle_hours}))])

    def _grant_training_jobs(self, training_role: iam.IRole) -> None:
        stack = Stack.of(self)
        role = self.state_machine.role
        role.add_to_principal_policy(iam.PolicyStatement(
            sid="TrainingJobs",
            actions=["sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob",
                     "sagemaker:AddTags", "sagemaker:ListTags"],
            resources=[stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")]))
        role.add_to_principal_policy(iam.PolicyStatement(
            sid="SyncTrainingJobEvents", actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
            resources=[stack.format_arn(service="events", resource="rule",
                                        resource_name="StepFunctionsGetEventsForSageMakerTrainingJobsRule")]))
        role.add_to_principal_policy(iam.PolicyStatement(
            sid="PassTrainingRole", actions=["iam:PassRole"], resources=[training_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}))

    def _grant_teardown(self, fsx_stack_name: str, results_objects: str, list_results: iam.PolicyStatement) -> None:
        stack = Stack.of(self)
        fn = self.teardown_fn
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["cloudformation:DescribeStacks", "cloudformation:DeleteStack"],
            resources=[stack.format_arn(service="cloudformation", resource="stack", resource_name=f"{fsx_stack_name}/*")]))
        # No iam:PassRole: DeleteStack without RoleARN "uses the role that was previously associated
        # with the stack" (the CDK bootstrap's cfn-exec-role), and CloudFormation "uses this role even
        # if the users don't have permission to pass it" (API_CreateStack, RoleARN;
        # https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DeleteStack.html).
        fn.add_to_role_policy(iam.PolicyStatement(actions=["states:ListExecutions"], resources=[self.state_machine_arn]))
        fn.add_to_role_policy(iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[results_objects]))
        fn.add_to_role_policy(list_results)
        # FSx stays while any InProgress training job reads it, the workflow's or not: ListTrainingJobs takes
        # no resource ("*"), DescribeTrainingJob the jobs (service authorization reference for SageMaker).
        fn.add_to_role_policy(iam.PolicyStatement(actions=["sagemaker:ListTrainingJobs"], resources=["*"]))
        fn.add_to_role_policy(iam.PolicyStatement(
            actions=["sagemaker:DescribeTrainingJob"],
            resources=[stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")]))
