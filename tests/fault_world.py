"""The world the fault matrix's injections run in: one in-process stand-in (moto with the project's patches) holding a
deployed-looking lab, and a driver per entry point that runs the product's own code (the CLI's main, a workflow
function's handler, the Express emptier's handler, the training script's reader) so that every call site of the
matrix is reached. Errors are injected where the stand-in answers (HOOKS.api_fault), only for calls made at the
call site under test (its frame is the innermost product frame on the stack), in the service's own protocol."""

from __future__ import annotations

import ast
import datetime as dt
import functools
import importlib.util
import io
import json
import shutil
import sys
import tarfile
import threading
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from dslab.aws import faults

REPO = Path(__file__).resolve().parents[1]
ACCOUNT, REGION = "123456789012", "us-east-1"
BUCKET = "datasourcelab-data-123456789012-us-east-1"
EXPRESS = "cli--use1-az4--x-s3"          # `dslab express`'s directory bucket
STAGED = "staged--use1-az4--x-s3"        # the workflow's staging target
EMPTIED = "emptied--use1-az4--x-s3"      # the emptier's
UPLOADED = "upload--use1-az4--x-s3"      # `dslab dataset upload`'s target (a directory bucket: HeadObject digests)
SM_NAME, SM_IDLE, SM_RUN = "DataSourceLab-Benchmark", "DataSourceLab-Idle", "DataSourceLab-Runs"
FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER = "/datasourcelab/fsx/file-system-id", "/datasourcelab/fsx/mount-name"
RUNNING = "run-a"            # a running execution of SM_NAME with FSx and EFS jobs, plan.json stored, no results.json
WATCHED = "run-watched"      # an execution that has ended (ABORTED): `dslab status --wait` follows it to its end
PRODUCT_FILES = {str(p): p.relative_to(REPO).as_posix() for p in faults._scanned_files(REPO)}
# Frames a call passes through that are not its call site: comprehensions, and helpers handed a client's method.
PASS_THROUGH = {("dslab/workflow/fsx_data.py", "_pages")}


def arn(kind: str, name: str) -> str:
    return f"arn:aws:states:{REGION}:{ACCOUNT}:{kind}:{name}"


# ---- injection ------------------------------------------------------------------------------------------------
def unmutated(qualname: str) -> str:
    """The function's own name where `make bench-mutation` runs a mutant: mutmut renames each function it mutates
    (x_f__mutmut_orig, x_f__mutmut_3; a method xǁClassǁf__mutmut_orig) behind a trampoline of the original name."""
    import re
    parts = [re.sub(r"^x(?:_|ǁ\w+ǁ)(.+?)__mutmut_\w+$", r"\1", part) for part in qualname.split(".")]
    return ".".join(parts)


@functools.lru_cache(maxsize=None)
def _own_references(filename: str, first_line: int, call: str) -> tuple[tuple[int, int], ...]:
    """(first line, last line) of each reference to ``call`` in the function that starts at ``first_line``, in source
    order, not counting the functions and classes nested in it (the scan's rule for occurrences)."""
    tree = ast.parse(Path(filename).read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and first_line in (
                node.lineno, *(d.lineno for d in node.decorator_list)):
            found, todo = [], list(ast.iter_child_nodes(node))
            while todo:
                child = todo.pop()
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                if isinstance(child, ast.Attribute) and child.attr == call and isinstance(child.ctx, ast.Load):
                    found.append((child.lineno, child.col_offset, child.end_lineno))
                todo.extend(ast.iter_child_nodes(child))
            return tuple((line, end) for line, _, end in sorted(found))
    return ()


def occurrence_at(frame, call: str) -> int | None:
    """Which call of ``call`` the frame stands on (1: the first in its function's source), read from the code that
    runs: under `make bench-mutation` that is mutmut's renamed copy or mutant, whose lines are not the source's."""
    for number, (line, end) in enumerate(_own_references(frame.f_code.co_filename, frame.f_code.co_firstlineno,
                                                         call), 1):
        if line <= frame.f_lineno <= end:
            return number
    return None


@dataclass
class Injector:
    """Answers ``fault`` for calls of ``site``'s operation made at ``site`` (up to ``limit`` requests)."""
    site: faults.Site
    fault: faults.Fault
    limit: int | None = None
    hits: int = 0
    qualname: str = ""
    service_id: str = ""
    # Every request the entry point made while it ran (service, operation, URL, body), answered or injected: what
    # the code did after the error is read from it (the object sent again, the deletion that still went on).
    requests: list = field(default_factory=list)
    entry: str = ""

    def __post_init__(self):
        self.qualname = faults.python_qualname(self.site.function, self.site.module)
        self.service_id = faults.service_model(self.site.service).service_id.hyphenize()

    def at_site(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            module = PRODUCT_FILES.get(frame.f_code.co_filename)
            name = unmutated(frame.f_code.co_qualname)
            if module is not None and not name.split(".")[-1].startswith("<") and (module, name) not in PASS_THROUGH:
                return (module, name) == (self.site.module, self.qualname) and (
                    self.site.calls == 1 or occurrence_at(frame, self.site.call) == self.site.occurrence)
            frame = frame.f_back
        # No product frame: a managed transfer's own worker thread (s3transfer), which a transfer call site starts
        # (a driver's own set-up runs in the main thread).
        return self.site.call in faults.TRANSFER and threading.current_thread() is not threading.main_thread()

    def __call__(self, service_id: str, operation: str, request=None):
        body = getattr(request, "body", b"") or b""
        self.requests.append((service_id, operation, str(getattr(request, "url", "")),
                              body.decode(errors="replace") if isinstance(body, bytes) else str(body)))
        if service_id != self.service_id or operation != self.site.operation or not self.at_site():
            return None
        if self.limit is not None and self.hits >= self.limit:
            return None
        self.hits += 1
        return self.fault.status, self.fault.code, self.fault.message or f"injected {self.fault.code} for the matrix"


@dataclass
class Observation:
    rc: int | None = None
    out: str = ""
    err: str = ""
    result: Any = None
    raised: BaseException | None = None
    notes: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join([self.out, self.err, json.dumps(self.result, default=str) if self.result is not None else "",
                          str(self.raised or "")])


# ---- the world ---------------------------------------------------------------------------------------------------
class World:
    """The lab as deployed, in the stand-in; reset what each driver changes before it runs."""

    def __init__(self, tmp: Path):
        import boto3

        from dslab.emulator.patches import create_directory_bucket
        self.tmp = tmp
        self.c = {name: boto3.client(name, region_name=REGION) for name in
                  ("s3", "ssm", "fsx", "efs", "ec2", "datasync", "stepfunctions", "cloudformation", "sagemaker")}
        s3 = self.c["s3"]
        s3.create_bucket(Bucket=BUCKET)
        for name in (EXPRESS, STAGED, EMPTIED, UPLOADED):
            create_directory_bucket(name)
        for i in range(3):
            s3.put_object(Bucket=BUCKET, Key=f"datasets/tiny/c1/img-{i}.jpg", Body=b"x" * (100 + i))
        self.write_stats(BUCKET, "tiny")
        # EC2: the lab's subnet, in a zone whose ID the CLI is told (follow-zone must find FSx where it is)
        ec2 = self.c["ec2"]
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        zone = ec2.describe_availability_zones()["AvailabilityZones"][0]
        self.az_name, self.az_id = zone["ZoneName"], zone["ZoneId"]
        self.subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone=self.az_name)["Subnet"]["SubnetId"]
        # FSx, its parameters, its association and import (the stand-in's hooks)
        fs = self.c["fsx"].create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[self.subnet],
                                              LustreConfiguration={"DeploymentType": "SCRATCH_2"})["FileSystem"]
        self.fsx_id = fs["FileSystemId"]
        from moto.fsx.models import fsx_backends
        fsx_backends[ACCOUNT][REGION].file_systems[self.fsx_id].lifecycle = "AVAILABLE"
        ssm = self.c["ssm"]
        ssm.put_parameter(Name=FSX_ID_PARAMETER, Value=self.fsx_id, Type="String")
        ssm.put_parameter(Name=FSX_MOUNT_PARAMETER, Value="abcdefgh", Type="String")
        from dslab.emulator.patches import HOOKS
        association = {"AssociationId": "dra-0123456789abcdef0", "FileSystemId": self.fsx_id, "Lifecycle": "AVAILABLE",
                       "FileSystemPath": "/datasets", "DataRepositoryPath": f"s3://{BUCKET}/datasets/",
                       "BatchImportMetaDataOnCreate": True, "CreationTime": "2020-01-01T00:00:00+00:00"}
        HOOKS.fsx_repository = lambda: ([association], [])
        HOOKS.fsx_create_task = lambda params: {"TaskId": "task-0123456789abcdef0", "Lifecycle": "PENDING",
                                                "Type": params["Type"], "FileSystemId": params["FileSystemId"],
                                                "Paths": params.get("Paths", [])}
        # EFS and the DataSync tasks
        self.efs_id = self.c["efs"].create_file_system(CreationToken="lab")["FileSystemId"]
        # Step Functions: the workflow, an idle one (the guard's), one `dslab run` starts executions of
        sfn = self.c["stepfunctions"]
        definition = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
        role = f"arn:aws:iam::{ACCOUNT}:role/sfn"
        for name in (SM_NAME, SM_IDLE, SM_RUN):
            sfn.create_state_machine(name=name, definition=definition, roleArn=role)
        sfn.start_execution(stateMachineArn=arn("stateMachine", SM_NAME), name=RUNNING)
        self.put_json(f"results/{RUNNING}/plan.json", self.plan_document(RUNNING))
        # the Cause the state machine kept for the failed job: a report reads it for the record's reason
        self.c["s3"].put_object(Bucket=BUCKET, Key=f"results/{RUNNING}/failures/job-b.txt", Body=b"AlgorithmError: corrupted")
        watched = sfn.start_execution(stateMachineArn=arn("stateMachine", SM_IDLE), name=WATCHED)["executionArn"]
        sfn.stop_execution(executionArn=watched)
        self.watched = watched
        self.put_json(f"results/{WATCHED}/plan.json", self.plan_document(WATCHED))
        # SageMaker: a completed job, a failed one, one in progress (reading S3, not FSx)
        for name, status in (("job-a", "Completed"), ("job-b", "Failed"), ("job-live", "InProgress")):
            self.training_job(name, status)
        self.put_metrics_archive("job-a")
        # DataSync
        self.datasync_tasks()
        # CloudFormation: the three stacks (moto's own engine) and the outputs files
        self.stack_outputs = {
            "BucketName": BUCKET, "SubnetId": self.subnet, "TrainingSecurityGroupId": "sg-0123456789abcdef0",
            "TrainingRoleArn": f"arn:aws:iam::{ACCOUNT}:role/training", "TrainingCodeUri": f"s3://{BUCKET}/code/x.tar.gz",
            "TrainingImageUri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-gpu-py312",
            "EfsFileSystemId": self.efs_id, "ExpressEnabled": "true", "ExpressBucketName": EXPRESS,
            "ExpressBucketArn": f"arn:aws:s3express:{REGION}:{ACCOUNT}:bucket/{EXPRESS}", "ExpressZoneId": "use1-az4",
            "StateMachineArn": arn("stateMachine", SM_NAME), "EfsSyncTaskArn": self.sync_task,
            "EfsEmptyTaskArn": self.empty_task, "FsxFileSystemId": self.fsx_id, "FsxMountName": "abcdefgh"}
        self.deploy_stacks()
        self.outputs = self.outputs_file("outputs.json")
        self.outputs_without_workflow = self.outputs_file("outputs-no-sm.json", StateMachineArn=None)
        self.outputs_runs = self.outputs_file("outputs-runs.json", StateMachineArn=arn("stateMachine", SM_RUN))
        self.experiments()

    # -- state helpers --
    def put_json(self, key: str, document: Any, bucket: str = BUCKET) -> None:
        self.c["s3"].put_object(Bucket=bucket, Key=key, Body=json.dumps(document).encode())

    def write_stats(self, bucket: str, name: str, files: int = 3, size: int = 303) -> None:
        self.put_json(f"datasets/{name}.stats.json", {"files": files, "bytes": size, "format": "jpg",
                                                     "written_at": "2030-01-01T00:00:00Z"}, bucket)

    def plan_document(self, execution: str) -> dict:
        return {"execution": execution, "fsx_paths": ["/datasets/tiny"], "efs_prefixes": ["tiny"],
                "fsx_datasets": [{"path": "/datasets/tiny", "written_at": "2030-01-01T00:00:00Z"}],
                "express_bucket": STAGED, "express_prefixes": ["tiny"],
                "experiment": {"name": "fm", "trials": [{"name": "base", "datasets": [{"name": "tiny", "prefix": "tiny"}]}]},
                "experiment_hash": "0" * 16, "environment": {"code_version": "test", "bucket": BUCKET},
                "dataset_stats": {"tiny": {"files": 3, "bytes": 303}}, "fsx_capacity_gib": 1200, "lab": None,
                "quotas": {"concurrency": 1},
                "jobs": [{"index": 0, "name": "job-a", "mode": "File", "dataset": "tiny", "repeat": 0, "trial": "base",
                          "storage": "standard", "instance_type": "ml.m5.xlarge", "instance_count": 1, "epochs": 1,
                          "format": "jpg", "kept": False, "skip_reason": None},
                         {"index": 1, "name": "job-b", "mode": "FastFile", "dataset": "tiny", "repeat": 0,
                          "trial": "base", "storage": "standard", "instance_type": "ml.m5.xlarge", "instance_count": 1,
                          "epochs": 1, "format": "jpg", "kept": False, "skip_reason": None}]}

    def training_job(self, name: str, status: str) -> None:
        from moto.sagemaker.models import sagemaker_backends
        self.c["sagemaker"].create_training_job(
            TrainingJobName=name, AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/training",
            InputDataConfig=[{"ChannelName": "train", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/datasets/tiny/", "S3DataDistributionType": "FullyReplicated"}}}],
            OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/output"},
            ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
            StoppingCondition={"MaxRuntimeInSeconds": 3600})
        job = sagemaker_backends[ACCOUNT][REGION].training_jobs[name]
        start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
        job.training_job_status, job.secondary_status = status, status
        job.training_start_time, job.training_end_time = start, start + dt.timedelta(seconds=145)
        job.training_time_in_seconds, job.billable_time_in_seconds = 145, 145
        job.secondary_status_transitions = [
            {"Status": "Starting", "StartTime": start, "EndTime": start + dt.timedelta(seconds=5)},
            {"Status": "Training", "StartTime": start + dt.timedelta(seconds=5), "EndTime": start + dt.timedelta(seconds=145)}]
        job.final_metric_data_list = []
        if status == "Failed":
            job.failure_reason = ""

    def put_metrics_archive(self, job: str) -> None:
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w:gz") as tar:
            body = json.dumps({"au_percent": 97.0}).encode()
            info = tarfile.TarInfo("metrics.json")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        self.c["s3"].put_object(Bucket=BUCKET, Key=f"output/{job}/output/output.tar.gz", Body=data.getvalue())

    def datasync_tasks(self) -> None:
        ds = self.c["datasync"]
        source = ds.create_location_s3(S3BucketArn=f"arn:aws:s3:::{BUCKET}",
                                       S3Config={"BucketAccessRoleArn": f"arn:aws:iam::{ACCOUNT}:role/ds"})["LocationArn"]
        target = ds.create_location_smb(ServerHostname="efs", Subdirectory="/datasets", User="u", Password="p",
                                        AgentArns=[f"arn:aws:datasync:{REGION}:{ACCOUNT}:agent/agent-0123456789abcdef0"])["LocationArn"]
        self.sync_task = ds.create_task(SourceLocationArn=source, DestinationLocationArn=target)["TaskArn"]
        self.empty_task = ds.create_task(SourceLocationArn=source, DestinationLocationArn=target)["TaskArn"]

    def settle_datasync(self) -> None:
        """moto keeps a task RUNNING after an execution started until it is described to its end."""
        from moto.datasync.models import datasync_backends
        backend = datasync_backends[ACCOUNT][REGION]
        for task in backend.tasks.values():
            task.status = "AVAILABLE"
            task.current_task_execution_arn = None

    def deploy_stacks(self) -> None:
        cfn = self.c["cloudformation"]
        body = {"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}
        keys = {"DataSourceLab-Core": [k for k in self.stack_outputs if not k.startswith(("StateMachine", "Efs", "Fsx"))]
                + ["EfsFileSystemId"],
                "DataSourceLab": ["StateMachineArn", "EfsSyncTaskArn", "EfsEmptyTaskArn"],
                "DataSourceLab-Fsx": ["FsxFileSystemId", "FsxMountName"]}
        efs = {"Type": "AWS::EFS::FileSystem", "Properties": {"PerformanceMode": "maxIO", "ThroughputMode": "bursting"}}
        for stack, outputs in keys.items():
            template = {"Resources": {**body["Resources"], **({"Efs": efs} if stack == "DataSourceLab-Core" else {})},
                        "Outputs": {k: {"Value": self.stack_outputs[k]} for k in outputs}}
            cfn.create_stack(StackName=stack, TemplateBody=json.dumps(template),
                             RoleARN=f"arn:aws:iam::{ACCOUNT}:role/cdk-cfn-exec-role")
        self.fsx_stack_id = cfn.describe_stacks(StackName="DataSourceLab-Fsx")["Stacks"][0]["StackId"]

    def fsx_stack_up(self) -> str:
        """The FSx stack (a teardown or the guard deletes it): created again where it is gone."""
        cfn = self.c["cloudformation"]
        try:
            stack = cfn.describe_stacks(StackName="DataSourceLab-Fsx")["Stacks"][0]
            if stack["StackStatus"] != "DELETE_COMPLETE":
                return stack["StackId"]
        except cfn.exceptions.ClientError:
            pass
        template = {"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
                    "Outputs": {"FsxFileSystemId": {"Value": self.fsx_id}}}
        return cfn.create_stack(StackName="DataSourceLab-Fsx", TemplateBody=json.dumps(template),
                                RoleARN=f"arn:aws:iam::{ACCOUNT}:role/cdk-cfn-exec-role")["StackId"]

    def outputs_file(self, name: str, **changes) -> str:
        outputs = {k: v for k, v in {**self.stack_outputs, **changes}.items() if v is not None}
        path = self.tmp / name
        path.write_text(json.dumps({"DataSourceLab-Core": outputs}))
        return str(path)

    def experiments(self) -> None:
        code = self.tmp / "code"
        if not code.exists():
            shutil.copytree(REPO / "examples" / "own-script" / "code", code)
        base = {"name": "fm", "datasets": [{"name": "tiny", "format": "jpg", "files": 3, "bytes": "303KB"}],
                "modes": ["File"], "instance_type": "ml.m5.xlarge", "compute": "v100"}
        self.experiment = self.tmp / "experiment.json"
        self.experiment.write_text(json.dumps({**base, "trials": [
            {"name": "pair", "instance_count": 2},
            {"name": "own", "script": {"source_dir": "code", "entry_point": "train.py"}}]}))
        self.plain_experiment = self.tmp / "plain.json"
        self.plain_experiment.write_text(json.dumps(base))
        self.upload_src = self.tmp / "up"
        self.upload_src.mkdir(exist_ok=True)
        for i in range(2):
            (self.upload_src / f"f{i}.bin").write_bytes(bytes([i]) * 1000)
        self.big_src = self.tmp / "big"
        self.big_src.mkdir(exist_ok=True)
        (self.big_src / "big.bin").write_bytes(b"\1" * (17 * 1024 * 1024))   # over s3transfer's 16 MB threshold here

    def function_env(self, **extra) -> dict[str, str]:
        return {"AWS_REGION": REGION, "DSLAB_BUCKET": BUCKET, "DSLAB_FSX_ID_PARAMETER": FSX_ID_PARAMETER,
                "DSLAB_FSX_MOUNT_PARAMETER": FSX_MOUNT_PARAMETER, "DSLAB_ROLE_ARN": f"arn:aws:iam::{ACCOUNT}:role/training",
                "DSLAB_SUBNET_IDS": self.subnet, "DSLAB_SECURITY_GROUP_IDS": "sg-0123456789abcdef0",
                "DSLAB_IMAGE_URI": self.stack_outputs["TrainingImageUri"], "DSLAB_CODE_URI": f"s3://{BUCKET}/code/x.tar.gz",
                "DSLAB_EFS_ID": self.efs_id, "DSLAB_EXPRESS_BUCKET": STAGED, "DSLAB_TIME_SCALE": "0.001",
                "DSLAB_FSX_STACK": "DataSourceLab-Fsx", **extra}


# ---- drivers: one per entry point ---------------------------------------------------------------------------------
def _product_starts() -> None:
    """The driver's set-up is done: the requests from here on are the product's."""
    from dslab.emulator.patches import HOOKS
    if isinstance(HOOKS.api_fault, Injector):
        HOOKS.api_fault.requests.clear()


def run_cli(argv: list[str]) -> Observation:
    from dslab.cli import main
    _product_starts()
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exit_:
            rc = exit_.code if isinstance(exit_.code, int) else 2
    return Observation(rc=rc, out=out.getvalue(), err=err.getvalue())


def run_function(world: World, handler: Callable, event: dict, **env) -> Observation:
    from dslab.workflow import common
    from dslab.workflow.runtime import function_environment
    common.CLIENT_CACHE.clear()
    _product_starts()
    with function_environment(world.function_env(**env)):
        try:
            return Observation(result=handler(event, None))
        except Exception as err:  # noqa: BLE001 - the state machine's Catch (or EventBridge's retry) meets it
            return Observation(raised=err)


def _reset_express(world: World, bucket: str, *, uploads: int = 0) -> None:
    s3 = world.c["s3"]
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    if listed:
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": o["Key"]} for o in listed]})
    for i in range(2):
        s3.put_object(Bucket=bucket, Key=f"datasets/tiny/old-{i}.jpg", Body=b"old")
    s3.put_object(Bucket=bucket, Key="datasets/tiny.stats.json", Body=b'{"files": 9, "bytes": 9}')
    if uploads:
        for upload in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
        for i in range(uploads):
            s3.create_multipart_upload(Bucket=bucket, Key=f"datasets/tiny/partial-{i}.bin")


def drive(world: World, entry: str, site: faults.Site, monkeypatch) -> Observation:
    """Run ``entry`` the way a user or AWS runs it, so that ``site`` is reached."""
    w = world
    in_outputs = site.function == "outputs_from_cloudformation"
    outputs = [] if in_outputs else ["--outputs", w.outputs]
    if entry == "dslab status":
        if site.function == "cmd_status":
            return run_cli(["status", *outputs, "--region", REGION])
        return run_cli(["status", arn("execution", f"{SM_NAME}:{RUNNING}"), *outputs, "--region", REGION])
    if entry == "dslab status --wait":
        monkeypatch.setattr("dslab.cli.runs.time.sleep", lambda s: None)
        return run_cli(["status", w.watched, "--outputs", w.outputs, "--wait", "--poll", "0.1", "--plain"])
    if entry == "dslab plan":
        return run_cli(["plan", "--experiment", str(w.plain_experiment), "--region", REGION])
    if entry in ("dslab run", "dslab export --upload"):   # the code package is uploaded once: gone again here
        s3 = w.c["s3"]
        for obj in s3.list_objects_v2(Bucket=BUCKET, Prefix="code/").get("Contents", []):
            s3.delete_object(Bucket=BUCKET, Key=obj["Key"])
    if entry == "dslab run":
        return run_cli(["run", "--experiment", str(w.experiment),
                        *([] if in_outputs else ["--outputs", w.outputs_runs]), "--region", REGION])
    if entry == "dslab report":   # what it reads, not how it draws: the report's files are another test's
        drawn: list = []
        monkeypatch.setattr("dslab.report.write_report", lambda results, out, calibration=None: drawn.append(results) or {})
        observed = run_cli(["report", arn("execution", f"{SM_NAME}:{RUNNING}"), "--out", str(w.tmp / "report"),
                            "--region", REGION])
        observed.notes["results"] = drawn[0] if drawn else None
        return observed
    if entry == "dslab export --upload":
        return run_cli(["export", "--experiment", str(w.experiment), "--outputs", w.outputs, "--mode", "File",
                        "--dataset", "tiny", "--trial", "own", "--upload", "--out", str(w.tmp / "export.py"),
                        "--region", REGION])
    if entry == "dslab recommend --experiment":
        return run_cli(["recommend", "--experiment", str(w.plain_experiment), "--outputs", w.outputs])
    if entry == "dslab fsx status":
        w.fsx_stack_up()
        return run_cli(["fsx", "status", *outputs, "--region", REGION])
    if entry == "dslab fsx follow-zone":
        return run_cli(["fsx", "follow-zone", "-c", f"azId={w.az_id}", "--region", REGION])
    if entry == "dslab express status":
        _reset_express(w, EXPRESS, uploads=1)
        return run_cli(["express", "status", *outputs, "--region", REGION])
    if entry == "dslab express empty":
        # two uploads where an abort is injected: the other is still aborted
        _reset_express(w, EXPRESS, uploads=2 if site.operation == "AbortMultipartUpload" else 1)
        observed = run_cli(["express", "empty", "--dataset", "tiny", "--yes", *outputs, "--region", REGION])
        observed.notes["uploads left"] = len(w.c["s3"].list_multipart_uploads(Bucket=EXPRESS).get("Uploads", []))
        observed.notes["objects left"] = sorted(o["Key"] for o in w.c["s3"].list_objects_v2(Bucket=EXPRESS).get("Contents", []))
        return observed
    if entry == "dslab efs empty":
        w.settle_datasync()
        uses_workflow = site.module == "dslab/workflow/plan.py" or in_outputs
        chosen = [] if in_outputs else ["--outputs", w.outputs if uses_workflow else w.outputs_without_workflow]
        observed = run_cli(["efs", "empty", "--dataset", "tiny", "--yes", "--poll", "0.001", *chosen, "--region", REGION])
        w.settle_datasync()
        return observed
    if entry == "dslab doctor":
        return run_cli(["doctor", "--az-id", w.az_id, "--region", REGION, "--instance-type", "ml.m5.xlarge",
                        *([] if in_outputs else ["--outputs", w.outputs])])
    if entry == "dslab deploy-check":
        if site.function == "fsx_actions":   # FSx's administrative actions are read where its stack stands
            w.fsx_stack_up()
        return run_cli(["deploy-check", "deploy", "--fsx", "up", "--region", REGION])
    if entry == "dslab dataset stats":
        return run_cli(["dataset", "stats", f"s3://{BUCKET}/datasets/tiny/", "--write"])
    if entry == "dslab dataset upload":
        s3 = w.c["s3"]
        for obj in s3.list_objects_v2(Bucket=UPLOADED).get("Contents", []):
            s3.delete_object(Bucket=UPLOADED, Key=obj["Key"])
        s3.put_object(Bucket=UPLOADED, Key="datasets/up/f0.bin", Body=b"\0" * 1000)   # same size: its digest is read
        (w.upload_src / "dataset.json").write_text('{"name": "up"}')   # metadata: sent beside the prefix (2nd PutObject)
        multipart = site.operation in ("CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")
        src = w.big_src if multipart else w.upload_src
        observed = run_cli(["dataset", "upload", "--src", str(src), "--to", f"s3://{UPLOADED}/datasets/up/"])
        observed.notes["stats file"] = any(o["Key"] == "datasets/up.stats.json"
                                           for o in s3.list_objects_v2(Bucket=UPLOADED).get("Contents", []))
        return observed
    # ---- the workflow's functions ----
    from dslab.workflow import handlers
    if entry == "Plan":
        trials = [{"name": "base", "datasets": [{"name": "tiny", "format": "jpg"}], "modes": ["File", "FSx", "EFS"]}]
        if site.function == "wake_directory_bucket":   # a dataset only Express jobs read, in the directory bucket only
            trials.append({"name": "express", "storage": "express", "modes": ["FastFile"],
                           "datasets": [{"name": "xonly", "format": "jpg"}]})
            w.c["s3"].put_object(Bucket=STAGED, Key="datasets/xonly/a.jpg", Body=b"x")
            w.write_stats(STAGED, "xonly", files=1, size=1)
        experiment = {"name": "fm", "instance_type": "ml.m5.xlarge", "compute": "v100", "trials": trials}
        return run_function(w, handlers.plan, {"experiment": experiment, "execution": "exec-plan",
                                               "state_machine": arn("stateMachine", SM_NAME)})
    if entry == "CheckFsxData":
        w.put_json("results/exec-fsx/plan.json", w.plan_document("exec-fsx"))
        return run_function(w, handlers.fsx_data, {"plan": {"bucket": BUCKET, "plan_key": "results/exec-fsx/plan.json",
                                                            "fsx_wait_checks": 5}, "checks": 0})
    if entry == "StageExpress":
        _reset_express(w, STAGED)
        s3 = w.c["s3"]
        # another execution's lock, left long ago (its holder died): taken over
        w.put_json("datasets/tiny.staging-lock.json", {"execution": "exec-dead", "taken_at": 0}, STAGED)
        w.put_json("results/exec-stage/plan.json", w.plan_document("exec-stage"))
        if site.call == "copy":   # the branch for objects over CopyObject's 5 GB, with the objects at hand
            monkeypatch.setattr("dslab.workflow.express_staging.COPY_OBJECT_MAX_BYTES", 0)
        observed = run_function(w, handlers.stage_express, {"plan": {"bucket": BUCKET, "plan_key": "results/exec-stage/plan.json"},
                                                            "cursor": {}, "execution": "exec-stage"})
        observed.notes["staged"] = {o["Key"] for o in s3.list_objects_v2(Bucket=STAGED).get("Contents", [])}
        return observed
    if entry == "Collect":
        w.put_json("results/exec-collect/plan.json", w.plan_document("exec-collect"))
        s3 = w.c["s3"]
        s3.put_object(Bucket=BUCKET, Key="results/exec-collect/failures/job-b.txt", Body=b"AlgorithmError: corrupted")
        for key in ("results/exec-collect/results.json",):
            s3.delete_object(Bucket=BUCKET, Key=key)
        observed = run_function(w, handlers.collect, {
            "plan": {"bucket": BUCKET, "base": "results/exec-collect", "plan_key": "results/exec-collect/plan.json"},
            "results": [[{"index": 0, "name": "job-a", "status": "Completed"},
                         {"index": 1, "name": "job-b", "status": "Failed", "error": "States.TaskFailed"}]],
            "prepared": {}})
        listed = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="results/exec-collect/").get("Contents", [])}
        observed.notes["stored"] = (json.loads(s3.get_object(Bucket=BUCKET, Key="results/exec-collect/results.json")
                                               ["Body"].read()) if "results/exec-collect/results.json" in listed else None)
        return observed
    if entry in ("Teardown (start)", "Teardown (check)"):
        stack_id = w.fsx_stack_up()
        w.put_json("results/exec-down/results.json", {"records": [], "summary": {}})
        if entry == "Teardown (check)":
            event = {"action": "check", "plan": {"bucket": BUCKET, "base": "results/exec-down"},
                     "teardown": {"stack_id": stack_id, "checks": 0, "status": "DELETE_IN_PROGRESS"}}
        else:
            blocker = site.module == "dslab/workflow/teardown.py" and site.function in ("teardown_blocker", "_record_teardown") \
                or (site.module == "dslab/workflow/common.py")
            event = {"action": "start", "plan": {"bucket": BUCKET, "base": "results/exec-down"},
                     "state_machine": arn("stateMachine", SM_NAME) if blocker else "",
                     "execution_arn": arn("execution", f"{SM_NAME}:exec-down")}
        observed = run_function(w, handlers.teardown, event)
        s3 = w.c["s3"]
        observed.notes["results"] = s3.get_object(Bucket=BUCKET, Key="results/exec-down/results.json")["Body"].read()
        listed = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="results/exec-down/").get("Contents", [])}
        observed.notes["teardown.json"] = (json.loads(s3.get_object(Bucket=BUCKET, Key="results/exec-down/teardown.json")
                                                      ["Body"].read()) if "results/exec-down/teardown.json" in listed
                                           else None)
        s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in listed]})
        observed.notes["fsx_stack"] = _stack_status(w)
        return observed
    if entry == "idle guard":
        w.fsx_stack_up()
        observed = run_function(w, handlers.teardown, {"action": "idle", "state_machine": arn("stateMachine", SM_IDLE),
                                                       "idle_hours": 1e-9})
        observed.notes["fsx_stack"] = _stack_status(w)
        return observed
    if entry == "ExpressBucketEmptier":
        _reset_express(w, EMPTIED, uploads=2 if site.operation == "AbortMultipartUpload" else 1)
        emptier = _emptier()
        answers = []
        monkeypatch.setattr(emptier, "respond", lambda event, status, physical, reason, data=None: answers.append((status, reason)))
        _product_starts()
        try:
            emptier.handler({"RequestType": "Delete", "ResourceProperties": {"BucketName": EMPTIED}, "StackId": "s",
                             "RequestId": "r", "LogicalResourceId": "l", "ResponseURL": "https://x"}, None)
        except Exception as err:  # noqa: BLE001
            return Observation(raised=err)
        s3 = w.c["s3"]
        return Observation(result={"status": answers[0][0], "reason": answers[0][1]}, notes={
            "uploads left": len(s3.list_multipart_uploads(Bucket=EMPTIED).get("Uploads", [])),
            "objects left": [o["Key"] for o in s3.list_objects_v2(Bucket=EMPTIED).get("Contents", [])]})
    if entry == "training script":
        if str(REPO / "training") not in sys.path:
            sys.path.insert(0, str(REPO / "training"))
        from dslab_train.s3source import S3Reads
        reads = S3Reads(f"s3://{BUCKET}/datasets/tiny/", "boto3", region=REGION)
        try:
            if site.function == "S3Reads.list":
                return Observation(result=[o.key for o in reads.list()])
            if site.function == "S3Reads.get":
                return Observation(result=len(reads.get("datasets/tiny/c1/img-0.jpg")))
            return Observation(result=len(reads.get_range("datasets/tiny/c1/img-0.jpg", 0, 10)))
        except Exception as err:  # noqa: BLE001 - train.py writes it to the failure file
            return Observation(raised=err)
    if entry == "checkpoint writer (durability)":
        # A sync writer's listing of its checkpoint S3 URI (training/dslab_train/checkpoint.py DurableWatch), which
        # train.py durable_listing builds on S3Reads.list: one checkpoint saved, then the wait for S3 to list it.
        import tempfile
        from dataclasses import replace
        if str(REPO / "training") not in sys.path:
            sys.path.insert(0, str(REPO / "training"))
        import train
        from dslab_train.checkpoint import CheckpointRun, CheckpointSpec
        from dslab.core.workloads.checkpoint import parse_checkpoint_workload
        import yaml
        path = REPO / "dslab" / "contracts" / "dlio" / "llama3_8b.yaml"
        workload = replace(parse_checkpoint_workload(yaml.safe_load(path.read_text()), path.name).with_scale(1e-6),
                           writes=1, reads=0, interval_seconds=0)
        spec = CheckpointSpec.from_hyperparameter(workload.plan().hyperparameters()["checkpoint_plan"])
        ctx = type("Ctx", (), {"hyperparameters": {"checkpoint_s3_uri": f"s3://{BUCKET}/checkpoints/x/ck/"}})()
        with tempfile.TemporaryDirectory() as folder:
            try:
                run = CheckpointRun(spec, Path(folder), 0, 1, False, log=lambda line: None, wait_seconds=5,
                                    durable=train.durable_listing(ctx, False))
                return Observation(result=run.run().get("durable_seconds"))
            except Exception as err:  # noqa: BLE001 - train.py writes it to the failure file
                return Observation(raised=err)
    if entry == "local runner":
        return _local_runner_job(w, monkeypatch, site)
    if entry == "dslab job run-local":
        return _job_run_local(w, monkeypatch)
    if entry in ("dslab local", "dslab local (interrupted)"):
        return _local_lab_run(w, monkeypatch, interrupted=entry == "dslab local (interrupted)")
    raise AssertionError(f"no driver for {entry}")


# ---- the local lab's drivers: a job the local runner runs, `dslab job run-local`, `dslab local`'s looks ------------
LOCAL_CHECKPOINTS = "checkpoints/local/"
LOCAL_CODE = "local-code/sourcedir.tar.gz"
# A training script that keeps the checkpoint sync busy: a new checkpoint (uploaded), the one copied in removed
# (deleted in S3), a model file (model.tar.gz).
# (--pause: how long it leaves the sync between its steps; 0 where the sync is not the call site under test.
# --settle: how long it lives on after removing step-1.pt. The sync never looks once the script has ended ("Writes to
# S3 when job is terminated: No"), so where the deletion is the call site under test the script leaves a loaded
# machine's sync a whole second of 10 ms looks to see it.)
LOCAL_SCRIPT = """set -e
pause=0.1
settle=""
while [ $# -gt 0 ]; do if [ "$1" = --pause ]; then pause="$2"; fi; if [ "$1" = --settle ]; then settle="$2"; fi; shift; done
[ -n "$settle" ] || settle="$pause"
ck="$SAGEMAKER_BASE_DIR/checkpoints"
mkdir -p "$ck"
echo two > "$ck/step-2.pt"
echo model > "$SM_MODEL_DIR/model.txt"
sleep "$pause"
rm -f "$ck/step-1.pt"
sleep "$settle"
"""


def _local_request(name: str, bucket: str, checkpoints: str, **hyperparameters) -> dict:
    return {"TrainingJobName": name, "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/training",
            "HyperParameters": {"sagemaker_program": json.dumps("train.sh"), **hyperparameters},
            "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/local-output"},
            "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
            "StoppingCondition": {"MaxRuntimeInSeconds": 60},
            "CheckpointConfig": {"S3Uri": f"s3://{bucket}/{checkpoints}"}}


def _keys(world: World, bucket: str, prefix: str) -> list[str]:
    return sorted(o["Key"] for o in world.c["s3"].list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))


def _local_runner_job(w: World, monkeypatch, site: faults.Site | None = None) -> Observation:
    """A File-channel job with a CheckpointConfig, run by the local lab's executor (LocalLab._execute: the local runner
    on the stand-in's S3) when the stand-in's SageMaker is asked to create it, as the workflow's Run map asks."""
    import uuid
    from types import SimpleNamespace

    from moto.sagemaker.models import sagemaker_backends

    from dslab.emulator.patches import HOOKS
    from dslab.local.lab import LocalLab
    s3 = w.c["s3"]
    for key in _keys(w, BUCKET, LOCAL_CHECKPOINTS) + _keys(w, BUCKET, "local-output/"):
        s3.delete_object(Bucket=BUCKET, Key=key)
    s3.put_object(Bucket=BUCKET, Key=LOCAL_CHECKPOINTS + "step-1.pt", Body=b"one")   # copied in before the script
    code = io.BytesIO()
    with tarfile.open(fileobj=code, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.sh")
        info.size = len(LOCAL_SCRIPT)
        tar.addfile(info, io.BytesIO(LOCAL_SCRIPT.encode()))
    s3.put_object(Bucket=BUCKET, Key=LOCAL_CODE, Body=code.getvalue())
    monkeypatch.setattr("dslab.local.checkpoint_sync.POLL_SECONDS", 0.01)
    lab = object.__new__(LocalLab)   # the lab's executor, on the stand-in of this process
    said: list[str] = []
    lab.lab = SimpleNamespace(client=lambda name: w.c[name], fsx_id=None, efs_id=w.efs_id)
    lab.mounts, lab.fsx_root, lab.say = None, None, said.append
    lab.work, lab.out = w.tmp / "local-lab", w.tmp / "local-out"
    monkeypatch.setattr(HOOKS, "job_executor", lab._execute)
    name = f"local-{uuid.uuid4().hex[:8]}"
    request = _local_request(name, BUCKET, LOCAL_CHECKPOINTS,
                             sagemaker_submit_directory=json.dumps(f"s3://{BUCKET}/{LOCAL_CODE}"),
                             pause=json.dumps(0 if site is not None and site.function == "LabStorage.put_object" else 0.1),
                             settle=json.dumps(1.0 if site is not None and site.function == "LabStorage.delete_object"
                                               else 0 if site is not None and site.function == "LabStorage.put_object"
                                               else 0.1))
    request["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/datasets/tiny/", "S3DataDistributionType": "FullyReplicated"}}}]
    errors = len(HOOKS.errors)
    _product_starts()
    w.c["sagemaker"].create_training_job(**request)
    HOOKS.threads[-1].join(60)
    HOOKS.api_fault = None   # what the job left is read without the fault
    described = w.c["sagemaker"].describe_training_job(TrainingJobName=name)
    sagemaker_backends[ACCOUNT][REGION].training_jobs.pop(name, None)   # the world's other drivers never see it
    log = lab.out / "jobs" / f"{name}.log"
    return Observation(result={k: described.get(k) for k in ("TrainingJobStatus", "SecondaryStatus", "FailureReason")},
                       notes={"checkpoints": _keys(w, BUCKET, LOCAL_CHECKPOINTS),
                              "artifacts": _keys(w, BUCKET, f"local-output/{name}/"),
                              "log": log.read_text() if log.exists() else "", "said": said,
                              "executor errors": HOOKS.errors[errors:]})


class _NoServer:
    """The process `dslab job run-local` would start for a Script job's S3 (moto's server): the stand-in of this
    process answers instead, at S3's own endpoint, so that the fault reaches it."""
    def terminate(self):
        return None

    def wait(self, timeout=None):
        return 0


FOLDER_BUCKET = "folder-bucket"


def _job_run_local(w: World, monkeypatch) -> Observation:
    """`dslab job run-local` of a Script job (its dataset_uri read from S3 by the script) with a CheckpointConfig the
    script's checkpoint writer lists (checkpoint_s3_uri), against a folder stand-in."""
    root = w.tmp / "folder-s3"
    shutil.rmtree(root, ignore_errors=True)
    (root / FOLDER_BUCKET / "datasets" / "tiny").mkdir(parents=True)
    (root / FOLDER_BUCKET / "datasets" / "tiny" / "a.jpg").write_bytes(b"x" * 10)
    (root / FOLDER_BUCKET / "checkpoints" / "ck").mkdir(parents=True)
    (root / FOLDER_BUCKET / "checkpoints" / "ck" / "step-1.pt").write_bytes(b"one")
    code = w.tmp / "folder-code"
    code.mkdir(exist_ok=True)
    (code / "train.sh").write_text(LOCAL_SCRIPT)
    request = _local_request("folder-job", FOLDER_BUCKET, "checkpoints/ck/",
                             dataset_uri=json.dumps(f"s3://{FOLDER_BUCKET}/datasets/tiny/"),
                             checkpoint_s3_uri=json.dumps(f"s3://{FOLDER_BUCKET}/checkpoints/ck/"))
    (w.tmp / "folder-request.json").write_text(json.dumps(request))
    monkeypatch.setattr("dslab.local.checkpoint_sync.POLL_SECONDS", 0.01)
    monkeypatch.setattr("dslab.local.job_storage.start_s3_server",
                        lambda timeout=30.0: (_NoServer(), f"https://s3.{REGION}.amazonaws.com"))
    observed = run_cli(["job", "run-local", "--request", str(w.tmp / "folder-request.json"), "--s3-root", str(root),
                        "--out", str(w.tmp / "folder-out"), "--code", str(code)])
    from dslab.emulator.patches import HOOKS
    HOOKS.api_fault = None
    s3 = w.c["s3"]
    try:   # what the script's endpoint held, then gone for the next run
        observed.notes["script's objects"] = _keys(w, FOLDER_BUCKET, "")
        for key in observed.notes["script's objects"]:
            s3.delete_object(Bucket=FOLDER_BUCKET, Key=key)
        s3.delete_bucket(Bucket=FOLDER_BUCKET)
    except s3.exceptions.NoSuchBucket:
        observed.notes["script's objects"] = None
    observed.notes["folder checkpoints"] = sorted(p.name for p in (root / FOLDER_BUCKET / "checkpoints" / "ck").iterdir())
    return observed


def _local_lab_run(w: World, monkeypatch, *, interrupted: bool) -> Observation:
    """`dslab local`'s run (LocalLab.run) while the workflow's execution runs: its looks at the jobs (two, then the
    execution has ended), or Ctrl-C before the first look (the partial report of what ended). The execution and its
    results are the stand-in's part, given here."""
    from types import SimpleNamespace

    from dslab.inputs.experiment_file import load_experiment
    from dslab.local import lab as local_lab
    execution = "local-exec"
    w.put_json(f"results/{execution}/plan.json", w.plan_document(execution))
    reports: list = []
    monkeypatch.setattr(local_lab, "write_report", lambda results, out, calibration=None: reports.append(results)
                        or {"report.html": out / "report.html"})

    def wait(arn_, timeout, poll, on_poll):
        if interrupted:
            raise KeyboardInterrupt()
        on_poll()
        on_poll()
        return SimpleNamespace(status="SUCCEEDED", error=None, cause=None, history=[], name=execution)

    stand_in = SimpleNamespace(
        start=lambda document, name: arn("execution", f"{SM_NAME}:{name}"), wait=wait, bucket=BUCKET,
        client=lambda name: w.c[name], function_environment=dict,
        read_json=lambda key: json.loads(w.c["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read()),
        results=lambda ex: {"records": [], "summary": {}, "execution": ex.name},
        definition=json.dumps({"States": {"PrepareData": {"Branches": []}}}))
    experiment = load_experiment(w.plain_experiment)
    run = object.__new__(local_lab.LocalLab)
    said: list[str] = []
    run.experiment, run.experiment_hash, run.resume, run.lab = experiment, experiment.content_hash, None, stand_in
    run.out, run.say, run.live_progress, run.timings = w.tmp / "local-run", said.append, False, {}
    run._started = 0.0
    shutil.rmtree(run.out, ignore_errors=True)
    monkeypatch.setattr(local_lab.uuid, "uuid4", lambda: execution)   # the execution's name, as the stand-in gave it
    _product_starts()
    try:
        result = run.run()
    except Exception as err:  # noqa: BLE001 - the CLI's
        return Observation(raised=err, notes={"reports": reports, "said": said})
    except KeyboardInterrupt as stop:
        return Observation(raised=stop, notes={"reports": reports, "said": said})
    partial = run.out / "results.json"
    return Observation(result=result, notes={"reports": reports, "said": said,
                                             "results.json": json.loads(partial.read_text()) if partial.exists() else None})


def _stack_status(world: World) -> str:
    cfn = world.c["cloudformation"]
    try:
        return cfn.describe_stacks(StackName="DataSourceLab-Fsx")["Stacks"][0]["StackStatus"]
    except cfn.exceptions.ClientError:
        return "GONE"


_EMPTIER = None


def _emptier():
    global _EMPTIER
    if _EMPTIER is None:
        # Named as its path from the repository root: mutmut switches a mutant on by its function's module name.
        spec = importlib.util.spec_from_file_location("stacks.components.express_empty.index",
                                                      REPO / "stacks" / "components" / "express_empty" / "index.py")
        _EMPTIER = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_EMPTIER)
    return _EMPTIER


# ---- the world as a fixture, shared by the matrix and the reaction tests of each module --------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    import boto3
    import botocore.endpoint
    from moto import mock_aws

    from dslab.emulator import patches
    patches.install()
    saved = {k: __import__("os").environ.get(k) for k in ("AWS_S3_DISABLE_EXPRESS_SESSION_AUTH",)}
    __import__("os").environ["AWS_S3_DISABLE_EXPRESS_SESSION_AUTH"] = "true"
    real_time = botocore.endpoint.time

    class NoWait:   # botocore's retries wait between attempts on AWS; here the attempts are counted instead
        time = staticmethod(real_time.time)
        monotonic = staticmethod(real_time.monotonic)

        @staticmethod
        def sleep(seconds):
            return None

    botocore.endpoint.time = NoWait
    from botocore.retries import bucket   # adaptive mode's client-side rate limiter waits in real time too
    real_acquire = bucket.TokenBucket.acquire
    bucket.TokenBucket.acquire = lambda self, amount=1, block=True: True
    from botocore.retries import standard   # every client its full retries: a fresh client's, as on AWS
    real_quota = standard.RetryQuotaChecker.acquire_retry_quota
    standard.RetryQuotaChecker.acquire_retry_quota = lambda self, context: True
    try:
        # Step Functions records executions without running them (an emulated lab in this process turns running on)
        with mock_aws(config={"stepfunctions": {"execute_state_machine": False}}):
            boto3.setup_default_session(region_name="us-east-1")
            _reuse_clients(boto3.DEFAULT_SESSION)
            yield World(tmp_path_factory.mktemp("fault-world"))
    finally:
        standard.RetryQuotaChecker.acquire_retry_quota = real_quota
        botocore.endpoint.time = real_time
        bucket.TokenBucket.acquire = real_acquire
        patches.reset_hooks()
        boto3.DEFAULT_SESSION = None
        for key, value in saved.items():
            if value is None:
                __import__("os").environ.pop(key, None)
            else:
                __import__("os").environ[key] = value


def _reuse_clients(session) -> None:
    """One client per service and settings for the whole module: making a client costs ~20 ms, and the code under test
    makes several per run. Shared clients behave as new ones here: their retry quota never runs out (above), adaptive
    mode's rate limiter never waits, and every request goes to the same in-process stand-in."""
    made: dict = {}
    create = session.client

    def client(*args, **kwargs):
        config = kwargs.get("config")
        key = (args, tuple(sorted((k, repr(v)) for k, v in kwargs.items() if k != "config")),
               repr(getattr(config, "_user_provided_options", None)))
        if key not in made:
            made[key] = create(*args, **kwargs)
        return made[key]

    session.client = client


def blockers_machine(world, name: str, executions: dict) -> str:
    """A state machine of its own with RUNNING executions, each with the plan.json given (None: still planning)."""
    sfn = world.c["stepfunctions"]
    machine = sfn.create_state_machine(
        name=name, roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn",
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))["stateMachineArn"]
    for execution, plan in executions.items():
        sfn.start_execution(stateMachineArn=machine, name=execution)
        if plan is not None:
            world.put_json(f"results/{execution}/plan.json", plan)
    return machine


def custom_fsx_stack(world, name: str) -> str:
    template = {"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
                "Outputs": {"FsxFileSystemId": {"Value": world.fsx_id}}}
    return world.c["cloudformation"].create_stack(StackName=name, TemplateBody=json.dumps(template),
                                                  RoleARN=f"arn:aws:iam::{ACCOUNT}:role/cdk-cfn-exec-role")["StackId"]
