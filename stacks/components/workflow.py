"""The benchmark workflow: Plan -> Stage EFS -> Run one training job per mode -> Collect -> Teardown FSx.

Plan and Collect are Lambda functions whose code is the ``dslab`` domain core (the same package the
CLI uses, copied without Docker). Everything else is native Step Functions: the S3, DataSync and
CloudFormation SDK integrations and ``sagemaker:createTrainingJob.sync``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Stack, aws_datasync as datasync, aws_ec2 as ec2, aws_iam as iam
from aws_cdk import aws_lambda as lambda_, aws_logs as logs, aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn, aws_stepfunctions_tasks as tasks
from constructs import Construct

from dslab.core.requests import DATASETS_PREFIX, FS_DATASETS_PATH, REQUEST_KEYS, RESULTS_PREFIX, OUTPUT_PREFIX

# Errors worth retrying with backoff: API throttling and account quotas that free up as jobs end.
THROTTLING_ERRORS = ["SageMaker.ThrottlingException", "SageMaker.ResourceLimitExceededException",
                     "SageMaker.ResourceLimitExceeded", "ThrottlingException"]
# A job that fails for lack of capacity is retried under a new name ("-a2", "-a3").
CAPACITY_ATTEMPTS = 3
CAPACITY_BACKOFF_SECONDS = 120
MAX_LANES = 40  # the experiment's max_concurrency is validated to 1..40
LAMBDA_PACKAGES = ("core", "workflow")


def build_lambda_package(repo_root: Path, out_dir: Path) -> Path:
    """Copy the parts of ``dslab`` the Lambda functions import (standard library + boto3 only)."""
    target = out_dir / "dslab"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.copy2(repo_root / "dslab" / "__init__.py", target / "__init__.py")
    for package in LAMBDA_PACKAGES:
        shutil.copytree(repo_root / "dslab" / package, target / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return out_dir


class BenchmarkWorkflow(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, repo_root: Path, bucket: s3.IBucket,
                 training_role: iam.IRole, subnet: ec2.ISubnet,
                 training_sg: ec2.ISecurityGroup, efs_file_system_arn: str,
                 environment: dict[str, str], fsx_stack_name: str, fsx_parameters: tuple[str, str]) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.bucket = bucket

        # ---- Lambda functions: the shared domain core --------------------------------------
        package_dir = build_lambda_package(repo_root, repo_root / "build" / "lambda")
        code = lambda_.Code.from_asset(str(package_dir))
        self.plan_fn = self._function("PlanFunction", code, "dslab.workflow.handlers.plan", environment,
                                      "Validates an experiment and writes its CreateTrainingJob requests")
        self.collect_fn = self._function("CollectFunction", code, "dslab.workflow.handlers.collect", environment,
                                         "Turns finished training jobs into result records in S3")
        results_objects = bucket.arn_for_objects(f"{RESULTS_PREFIX}/*")
        self.plan_fn.add_to_role_policy(iam.PolicyStatement(actions=["s3:PutObject"], resources=[results_objects]))
        self.plan_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["ssm:GetParameters"],
            resources=[stack.format_arn(service="ssm", resource="parameter", resource_name=p.lstrip("/"))
                       for p in fsx_parameters]))
        self.plan_fn.add_to_role_policy(iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"]))
        self.plan_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{DATASETS_PREFIX}/*"]}}))
        self.collect_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject"], resources=[results_objects]))
        self.collect_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{OUTPUT_PREFIX}/*")]))
        self.collect_fn.add_to_role_policy(iam.PolicyStatement(
            actions=["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"],
            resources=[stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")]))

        # ---- EFS staging with DataSync -------------------------------------------------------
        self.sync_task = self._efs_sync_task(bucket, subnet, training_sg, efs_file_system_arn)

        # ---- The state machine ------------------------------------------------------------------
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=RemovalPolicy.DESTROY)
        definition = self._definition(fsx_stack_name)
        self.state_machine = sfn.StateMachine(
            self, "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
            tracing_enabled=True,
            comment="DataSourceLab: one SageMaker training job per data-source mode, every result kept",
        )
        self._grant_training_jobs(training_role)
        self._grant_teardown(fsx_stack_name)

    # ------------------------------------------------------------------------------------------
    def _function(self, cid: str, code: lambda_.Code, handler: str, environment: dict[str, str],
                  description: str) -> lambda_.Function:
        log_group = logs.LogGroup(self, f"{cid}Logs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=RemovalPolicy.DESTROY)
        role = iam.Role(self, f"{cid}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        role.add_to_policy(iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                               resources=[f"{log_group.log_group_arn}:*"]))
        return lambda_.Function(
            self, cid, runtime=lambda_.Runtime.PYTHON_3_14, handler=handler, code=code,
            timeout=Duration.minutes(5), memory_size=512, environment=environment, role=role,
            log_group=log_group, description=description, tracing=lambda_.Tracing.ACTIVE)

    def _efs_sync_task(self, bucket: s3.IBucket, subnet: ec2.ISubnet, training_sg: ec2.ISecurityGroup,
                       efs_file_system_arn: str) -> datasync.CfnTask:
        stack = Stack.of(self)
        role = iam.Role(self, "DataSyncRole", assumed_by=iam.ServicePrincipal("datasync.amazonaws.com"),
                        description="DataSourceLab: DataSync reads datasets/ to fill EFS")
        role.add_to_policy(iam.PolicyStatement(
            actions=["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
            resources=[bucket.bucket_arn]))
        role.add_to_policy(iam.PolicyStatement(
            actions=["s3:GetObject", "s3:GetObjectTagging", "s3:GetObjectVersion", "s3:GetObjectVersionTagging"],
            resources=[bucket.arn_for_objects(f"{DATASETS_PREFIX}/*")]))
        source = datasync.CfnLocationS3(
            self, "DatasetsLocation", s3_bucket_arn=bucket.bucket_arn, subdirectory=f"/{DATASETS_PREFIX}/",
            s3_config=datasync.CfnLocationS3.S3ConfigProperty(bucket_access_role_arn=role.role_arn))
        destination = datasync.CfnLocationEFS(
            self, "EfsLocation", efs_filesystem_arn=efs_file_system_arn, subdirectory=FS_DATASETS_PATH,
            in_transit_encryption="TLS1_2",
            ec2_config=datasync.CfnLocationEFS.Ec2ConfigProperty(
                subnet_arn=stack.format_arn(service="ec2", resource="subnet", resource_name=subnet.subnet_id),
                security_group_arns=[stack.format_arn(service="ec2", resource="security-group",
                                                      resource_name=training_sg.security_group_id)]))
        sync_logs = logs.LogGroup(self, "DataSyncLogs", retention=logs.RetentionDays.THREE_MONTHS,
                                  removal_policy=RemovalPolicy.DESTROY)
        task = datasync.CfnTask(
            self, "EfsSyncTask", name="datasourcelab-datasets-to-efs",
            source_location_arn=source.attr_location_arn, destination_location_arn=destination.attr_location_arn,
            cloud_watch_log_group_arn=sync_logs.log_group_arn,
            options=datasync.CfnTask.OptionsProperty(
                transfer_mode="CHANGED",  # only what is missing or changed: re-staging is cheap
                verify_mode="ONLY_FILES_TRANSFERRED", overwrite_mode="ALWAYS",
                preserve_deleted_files="PRESERVE", log_level="BASIC"))
        return task

    # ------------------------------------------------------------------------------------------
    def _definition(self, fsx_stack_name: str) -> sfn.IChainable:
        stack = Stack.of(self)

        invalid = sfn.Fail(self, "ExperimentInvalid", error="ExperimentInvalid", cause_path="$.error.Cause")
        plan = tasks.LambdaInvoke(
            self, "Plan", lambda_function=self.plan_fn,
            comment="Validate the experiment and write one CreateTrainingJob request per job",
            payload=sfn.TaskInput.from_object({"experiment.$": "$", "execution.$": "$$.Execution.Name"}),
            result_selector={"plan.$": "$.Payload", "staging": {"status": "NOT_NEEDED"}},
            result_path="$")
        plan.add_catch(invalid, errors=["ExperimentInvalid"], result_path="$.error")

        # Stage: copy the datasets the EFS jobs need from S3 into EFS (only what changed).
        start_sync = tasks.CallAwsService(
            self, "StartEfsSync", service="datasync", action="startTaskExecution",
            parameters={"TaskArn": self.sync_task.attr_task_arn,
                        "Includes": [{"FilterType": "SIMPLE_PATTERN", "Value.$": "$.plan.efs_include"}]},
            iam_resources=[self.sync_task.attr_task_arn],
            result_selector={"arn.$": "$.TaskExecutionArn", "status": "LAUNCHING"}, result_path="$.staging")
        wait_sync = sfn.Wait(self, "WaitEfsSync", time=sfn.WaitTime.duration(Duration.seconds(20)))
        describe_sync = tasks.CallAwsService(
            self, "DescribeEfsSync", service="datasync", action="describeTaskExecution",
            parameters={"TaskExecutionArn.$": "$.staging.arn"},
            iam_resources=[f"{self.sync_task.attr_task_arn}/execution/*"],
            result_selector={"arn.$": "$.TaskExecutionArn", "status.$": "$.Status"}, result_path="$.staging")
        staging_failed = sfn.Pass(self, "EfsStagingFailed", result=sfn.Result.from_object({"status": "ERROR"}),
                                  result_path="$.staging")
        start_sync.add_catch(staging_failed, result_path="$.stagingError")
        describe_sync.add_catch(staging_failed, result_path="$.stagingError")

        run_jobs = self._run_map()
        stage_choice = (sfn.Choice(self, "NeedEfsStaging?")
                        .when(sfn.Condition.string_equals("$.plan.efs_include", ""), run_jobs)
                        .otherwise(start_sync))
        start_sync.next(wait_sync)
        wait_sync.next(describe_sync)
        staging_failed.next(run_jobs)
        describe_sync.next(sfn.Choice(self, "EfsSyncDone?")
                           .when(sfn.Condition.string_equals("$.staging.status", "SUCCESS"), run_jobs)
                           .when(sfn.Condition.string_equals("$.staging.status", "ERROR"), run_jobs)
                           .otherwise(wait_sync))

        # Collect: describe every job, price it, store results.json and results.csv.
        collect = tasks.LambdaInvoke(
            self, "Collect", lambda_function=self.collect_fn,
            comment="Describe every job and store results.json / results.csv before any teardown",
            payload=sfn.TaskInput.from_object({"plan.$": "$.plan", "results.$": "$.jobResults",
                                               "execution.$": "$$.Execution.Name",
                                               "staging.$": "$.staging"}),
            result_selector={"summary.$": "$.Payload"}, result_path="$.collected")
        collect_failed = sfn.Pass(self, "CollectFailed", parameters={"failed": -1, "message.$": "$.collectError.Cause"},
                                  result_path="$.collected.summary")
        collect.add_catch(collect_failed, result_path="$.collectError")

        teardown = tasks.CallAwsService(
            self, "TeardownFsx", service="cloudformation", action="deleteStack",
            comment="The same mechanism as `make fsx-down`: delete the FSx stack through CloudFormation",
            parameters={"StackName": fsx_stack_name},
            iam_resources=[stack.format_arn(service="cloudformation", resource="stack",
                                            resource_name=f"{fsx_stack_name}/*")],
            result_path=sfn.JsonPath.DISCARD)
        teardown_failed = sfn.Pass(self, "TeardownFailed", result_path=sfn.JsonPath.DISCARD)
        teardown.add_catch(teardown_failed, result_path="$.teardownError")

        jobs_failed = sfn.Fail(self, "JobsFailed", error="JobsFailed", cause_path="$.collected.summary.message")
        results_not_stored = sfn.Fail(self, "ResultsNotStored", error="ResultsNotStored",
                                      cause_path="$.collected.summary.message")
        done = sfn.Succeed(self, "AllJobsCompleted")
        verdict = (sfn.Choice(self, "Verdict")
                   .when(sfn.Condition.number_less_than("$.collected.summary.failed", 0), results_not_stored)
                   .when(sfn.Condition.number_greater_than("$.collected.summary.failed", 0), jobs_failed)
                   .otherwise(done))
        teardown.next(verdict)
        teardown_failed.next(verdict)
        teardown_choice = (sfn.Choice(self, "TeardownFsx?")
                           .when(sfn.Condition.and_(sfn.Condition.boolean_equals("$.plan.teardown_fsx", True),
                                                    sfn.Condition.boolean_equals("$.plan.fsx_available", True)),
                                 teardown)
                           .otherwise(verdict))
        collect.next(teardown_choice)
        collect_failed.next(teardown_choice)
        run_jobs.next(collect)
        return plan.next(stage_choice)

    def _run_map(self) -> sfn.Map:
        # Concurrency: Plan deals the jobs round-robin into `max_concurrency` lanes; lanes run side
        # by side and each lane runs its jobs one at a time. (MaxConcurrencyPath would say the same
        # in one Map, but the ASL validators in use do not know that field yet.)
        lanes = sfn.Map(
            self, "RunLanes", items_path="$.plan.lanes", max_concurrency=MAX_LANES,
            item_selector={"lane.$": "$$.Map.Item.Value", "bucket.$": "$.plan.bucket", "staging.$": "$.staging.status"},
            result_path="$.jobResults")
        run = sfn.Map(
            self, "RunJobs", items_path="$.lane", max_concurrency=1,
            item_selector={"job.$": "$$.Map.Item.Value", "bucket.$": "$.bucket", "staging.$": "$.staging"})

        skipped = sfn.Pass(self, "RecordSkipped", parameters={
            "index.$": "$.job.index", "name.$": "$.job.name", "status": "Skipped", "reason.$": "$.job.skip_reason"})
        staging_failed = sfn.Pass(self, "RecordStagingFailed", parameters={
            "index.$": "$.job.index", "name.$": "$.job.name", "status": "Failed", "error": "EfsStagingFailed",
            "reason": "Copying the dataset from S3 to EFS (DataSync) failed; see the DataSync task's log group"})
        load = tasks.CallAwsService(
            self, "LoadRequest", service="s3", action="getObject",
            parameters={"Bucket.$": "$.bucket", "Key.$": "$.job.request_key"},
            iam_resources=[self.bucket.arn_for_objects(f"{RESULTS_PREFIX}/*")],
            result_selector={"request.$": "States.StringToJson($.Body)"}, result_path="$.loaded")
        first_attempt = sfn.Pass(self, "FirstAttempt", parameters={"jobName.$": "$.job.name", "attempt": 1},
                                 result_path="$.run")
        parameters = {key + ".$": f"$.loaded.request.{key}" for key in REQUEST_KEYS}
        parameters["TrainingJobName.$"] = "$.run.jobName"
        train = sfn.CustomState(self, "RunTrainingJob", state_json={
            "Type": "Task",
            "Resource": f"arn:{Stack.of(self).partition}:states:::sagemaker:createTrainingJob.sync",
            "Parameters": parameters,
            "ResultSelector": {"name.$": "$.TrainingJobName", "status.$": "$.TrainingJobStatus"},
            "ResultPath": "$.outcome",
        })
        train.add_retry(errors=THROTTLING_ERRORS, interval=Duration.seconds(30), max_attempts=8, backoff_rate=2,
                        max_delay=Duration.seconds(900), jitter_strategy=sfn.JitterType.FULL)
        completed = sfn.Pass(self, "RecordCompleted", parameters={
            "index.$": "$.job.index", "name.$": "$.outcome.name", "status.$": "$.outcome.status"})
        failed = sfn.Pass(self, "RecordFailed", parameters={
            "index.$": "$.job.index", "name.$": "$.run.jobName", "status": "Failed", "error.$": "$.error.Error", "reason.$": "$.error.Cause"})
        back_off = sfn.Wait(self, "CapacityBackOff", time=sfn.WaitTime.duration(Duration.seconds(CAPACITY_BACKOFF_SECONDS)))
        next_attempt = sfn.Pass(self, "NextAttempt", parameters={
            "jobName.$": "States.Format('{}-a{}', $.job.name, States.MathAdd($.run.attempt, 1))",
            "attempt.$": "States.MathAdd($.run.attempt, 1)"}, result_path="$.run")
        capacity = (sfn.Choice(self, "CapacityError?")
                    .when(sfn.Condition.and_(sfn.Condition.string_matches("$.error.Cause", "*CapacityError*"),
                                             sfn.Condition.number_less_than("$.run.attempt", CAPACITY_ATTEMPTS)),
                          back_off)
                    .otherwise(failed))
        request_missing = sfn.Pass(self, "RecordRequestMissing", parameters={
            "index.$": "$.job.index", "name.$": "$.job.name", "status": "Failed", "error.$": "$.error.Error", "reason.$": "$.error.Cause"})
        load.add_catch(request_missing, result_path="$.error")
        # Every failure of a job becomes data (a result record); one job never stops the others.
        train.add_catch(capacity, errors=["States.ALL"], result_path="$.error")
        back_off.next(next_attempt)
        next_attempt.next(train)
        train.next(completed)
        iteration = (sfn.Choice(self, "Skipped?")
                     .when(sfn.Condition.is_present("$.job.skip_reason"), skipped)
                     .when(sfn.Condition.and_(sfn.Condition.string_equals("$.job.mode", "EFS"),
                                              sfn.Condition.string_equals("$.staging", "ERROR")), staging_failed)
                     .otherwise(load.next(first_attempt).next(train)))
        run.item_processor(iteration)
        lanes.item_processor(run)
        return lanes

    # ------------------------------------------------------------------------------------------
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

    def _grant_teardown(self, fsx_stack_name: str) -> None:
        stack = Stack.of(self)
        # DeleteStack reuses the role the stack was deployed with (the CDK bootstrap's CloudFormation
        # execution role); the caller must be allowed to pass it.
        self.state_machine.role.add_to_principal_policy(iam.PolicyStatement(
            sid="PassCloudFormationExecutionRole", actions=["iam:PassRole"],
            resources=[f"arn:{stack.partition}:iam::{stack.account}:role/cdk-hnb659fds-cfn-exec-role-{stack.account}-{stack.region}"],
            conditions={"StringEquals": {"iam:PassedToService": "cloudformation.amazonaws.com"}}))
