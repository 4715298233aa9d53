"""The lab inside the embedded AWS stand-in: the synthesized workflow, executed for real.

``EmulatedLab`` reads the ``DataSourceLab`` template that ``cdk synth`` wrote — the state-machine
definition ``cdk deploy`` would ship, its Lambda functions' handlers and environment, the DataSync
task — creates the lab's resources in moto (bucket, roles, network, EFS, FSx and its SSM
parameters, functions, the DataSync task) and the state machine from that very definition, with
only CloudFormation's tokens substituted by the stand-in's ARNs.
"""

from __future__ import annotations

import io
import json
import logging
import os
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..core.requests import DATASETS_PREFIX, FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER, FSX_STACK
from . import patches

ACCOUNT = "123456789012"
STACK = "DataSourceLab"
FUNCTIONS = ("PlanFunction", "FsxDataFunction", "CollectFunction", "TeardownFunction", "ExpressStagingFunction")
# The directory bucket's name as CloudFormation would generate it: "<base>--<zone-id>--x-s3".
EXPRESS_ZONE_ID = "use1-az4"
# Environment keys the emulator may add that the template does not have (endpoint, backend, test knobs).
EMULATOR_ONLY_ENV = {"DSLAB_AWS_ENDPOINT", "DSLAB_BACKEND", "DSLAB_STAGING_BUDGET_SECONDS"}


class TemplateError(RuntimeError):
    """The synthesized template is not what the emulator expects (a construct changed?)."""


def load_template(assembly_dir: Path, stack: str = STACK) -> dict[str, Any]:
    path = assembly_dir / f"{stack}.template.json"
    if not path.exists():
        raise TemplateError(f"{path} not found: synthesize the stacks first (make synth)")
    return json.loads(path.read_text())


def find_resource(template: dict[str, Any], path_suffix: str, type_name: str) -> tuple[str, dict[str, Any]]:
    """A resource by its construct path (``aws:cdk:path`` metadata, which `cdk synth` writes) or,
    where that metadata is off, by the logical-ID prefix CDK derives from the same path."""
    prefix = path_suffix.removesuffix("/Resource").replace("/", "")
    for logical, resource in template["Resources"].items():
        if resource["Type"] != type_name:
            continue
        path = resource.get("Metadata", {}).get("aws:cdk:path")
        if (path and path.endswith(path_suffix)) or (not path and logical.startswith(prefix) and len(logical) == len(prefix) + 8):
            return logical, resource
    raise TemplateError(f"no {type_name} at .../{path_suffix} in the template")


def _has_env_key(template: dict[str, Any], key: str) -> bool:
    """Does the workflow's Plan function get ``key`` in its environment (what the stacks decided)?"""
    _, resource = find_resource(template, "Workflow/PlanFunction/Resource", "AWS::Lambda::Function")
    return key in resource["Properties"].get("Environment", {}).get("Variables", {})


def resolve(value: Any, refs: dict[str, Any], region: str = "us-east-1") -> Any:
    """CloudFormation intrinsics as CloudFormation would resolve them, from ``refs``."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return [resolve(v, refs, region) for v in value]
    if isinstance(value, dict) and len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref":
            pseudo = {"AWS::Partition": "aws", "AWS::Region": region, "AWS::AccountId": ACCOUNT,
                      "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": STACK}
            if arg in pseudo:
                return pseudo[arg]
            if arg in refs:
                return refs[arg]
            raise TemplateError(f"the emulator cannot resolve Ref {arg}")
        if key == "Fn::GetAtt":
            name = f"{arg[0]}.{arg[1]}"
            if name in refs:
                return refs[name]
            raise TemplateError(f"the emulator cannot resolve Fn::GetAtt {name}")
        if key == "Fn::Join":
            return arg[0].join(str(resolve(v, refs, region)) for v in arg[1])
        if key == "Fn::ImportValue":
            if f"import:{arg}" in refs:
                return refs[f"import:{arg}"]
            raise TemplateError(f"the emulator cannot resolve Fn::ImportValue {arg}")
    if isinstance(value, dict):
        return {k: resolve(v, refs, region) for k, v in value.items()}
    return value


# The stand-in account's SageMaker training quotas (Service Quotas answers them, CreateTrainingJob
# enforces them). Instance types not listed are neither answered nor enforced.
TRAINING_INSTANCE_TYPES = ("ml.m5.large", "ml.m5.xlarge", "ml.c5.2xlarge", "ml.p3.2xlarge", "ml.p3.8xlarge",
                           "ml.p3.16xlarge", "ml.g5.xlarge", "ml.g5.2xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge")
DEFAULT_QUOTAS = {**{f"{t} for training job usage": 8.0 for t in TRAINING_INSTANCE_TYPES},
                  **{f"{t} for spot training job usage": 8.0 for t in TRAINING_INSTANCE_TYPES},
                  "Number of instances across all training jobs": 40.0}


@dataclass
class Execution:
    arn: str
    name: str
    status: str
    output: dict[str, Any] | None
    error: str | None
    cause: str | None
    history: list[dict[str, Any]] = field(default_factory=list)
    history_events: int = 0       # every event of the execution (AWS fails one at 25,000)
    max_state_bytes: int = 0      # the largest state input/output the stand-in saw (AWS limit: 256 KiB)


class EmulatedLab:
    """Use as a context manager. ``executor`` runs each training job (see ``patches.Hooks``)."""

    def __init__(self, assembly_dir: Path, *, executor: patches.JobExecutor,
                 efs_root: Path, fsx: bool = True, time_scale: float = 0.01, region: str = "us-east-1",
                 server_port: int | None = None, backend: str = "local",
                 on_fsx_down: Callable[[], None] | None = None, quotas: dict[str, float] | None = None,
                 fsx_import_seconds: float = 0.0, fsx_delete_seconds: float = 0.0,
                 fsx_delete_failure: str | None = None, extra_env: dict[str, str] | None = None):
        """``fsx_import_seconds``: how long (stand-in seconds, scaled by ``time_scale``) FSx's S3
        metadata import runs after the file system exists; ``fsx_delete_seconds`` /
        ``fsx_delete_failure``: how DeleteStack of the FSx stack ends."""
        self.template = load_template(assembly_dir)
        self.quotas = dict(DEFAULT_QUOTAS if quotas is None else quotas)
        self.fsx_import_seconds, self.fsx_delete_seconds = fsx_import_seconds, fsx_delete_seconds
        self.fsx_delete_failure = fsx_delete_failure
        self._fsx_created = 0.0
        self._fsx_repository: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.executor, self.efs_root, self.with_fsx = executor, efs_root, fsx
        self.time_scale, self.region, self.server_port, self.backend = time_scale, region, server_port, backend
        self.on_fsx_down = on_fsx_down
        self.bucket = f"datasourcelab-data-{ACCOUNT}-{region}"
        # The S3 Express One Zone bucket, when the synthesized lab has one (-c express=true).
        self.express_bucket: str | None = (f"datasourcelab-express--{EXPRESS_ZONE_ID}--x-s3"
                                           if _has_env_key(self.template, "DSLAB_EXPRESS_BUCKET") else None)
        # Test knobs for the functions' environment (EMULATOR_ONLY_ENV), e.g. the staging time budget.
        self.extra_env: dict[str, str] = dict(extra_env or {})
        if set(self.extra_env) - EMULATOR_ONLY_ENV:
            raise ValueError(f"extra_env may set only {sorted(EMULATOR_ONLY_ENV)}")
        self._mock = None
        self._server = None
        self.state_machine_arn = ""
        self.fsx_id: str | None = None
        self.fsx_mount: str | None = None
        self.efs_id = ""

    # ---- clients -------------------------------------------------------------------------
    @property
    def endpoint(self) -> str | None:
        return f"http://127.0.0.1:{self.server_port}" if self.server_port else None

    def client(self, service: str):
        import boto3
        kwargs = {"endpoint_url": self.endpoint} if self.endpoint else {}
        return boto3.client(service, region_name=self.region, aws_access_key_id="testing",
                            aws_secret_access_key="testing", **kwargs)

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "EmulatedLab":
        # The stand-in's request log and its engine's evaluation notes (e.g. an IsPresent probe of an
        # absent path, which is how Choice states work) are not the user's business.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
        patches.install()
        patches.reset_hooks()
        patches.HOOKS.job_executor = self.executor
        patches.HOOKS.stager = self._stage_efs
        patches.HOOKS.on_stack_delete = self._on_stack_delete
        patches.HOOKS.time_scale = self.time_scale
        patches.HOOKS.quotas = self.quotas
        patches.HOOKS.fsx_repository = self._fsx_repository_now
        patches.HOOKS.stack_deletion = lambda name: ((self.fsx_delete_seconds, self.fsx_delete_failure)
                                                     if name == FSX_STACK else (0.0, None))
        # moto has no CreateSession: clients reach the stand-in's directory bucket with plain SigV4
        # (botocore's switch; the stand-in lists it the way AWS does, see patches._patch_directory_buckets).
        self._express_auth = os.environ.get("AWS_S3_DISABLE_EXPRESS_SESSION_AUTH")
        os.environ["AWS_S3_DISABLE_EXPRESS_SESSION_AUTH"] = "true"
        config = {"stepfunctions": {"execute_state_machine": True}}
        if self.server_port:
            from moto.server import ThreadedMotoServer
            os.environ["MOTO_PORT"] = str(self.server_port)
            self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.server_port, verbose=False)
            self._server.start()
            import urllib.request
            # A fresh stand-in: backends live per process, so clear what an earlier lab left there.
            urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"), timeout=10).read()
            urllib.request.urlopen(urllib.request.Request(
                f"{self.endpoint}/moto-api/config", data=json.dumps(config).encode(), method="POST",
                headers={"Content-Type": "application/json"}), timeout=10).read()
        else:
            from moto import mock_aws
            self._mock = mock_aws(config=config)
            self._mock.start()
        try:
            self._create_resources()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for thread in list(patches.HOOKS.threads):
            thread.join(timeout=60)
        patches.reset_hooks()
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        if self._server is not None:
            self._server.stop()
            self._server = None
            os.environ.pop("MOTO_PORT", None)
        if getattr(self, "_express_auth", None) is None:
            os.environ.pop("AWS_S3_DISABLE_EXPRESS_SESSION_AUTH", None)
        else:
            os.environ["AWS_S3_DISABLE_EXPRESS_SESSION_AUTH"] = self._express_auth

    # ---- resources -------------------------------------------------------------------------
    def _create_resources(self) -> None:
        s3 = self.client("s3")
        s3.create_bucket(Bucket=self.bucket)
        if self.express_bucket:
            patches.create_directory_bucket(self.express_bucket, self.region, ACCOUNT)
        iam = self.client("iam")
        trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                 "Principal": {"Service": ["sagemaker.amazonaws.com", "lambda.amazonaws.com", "states.amazonaws.com"]}}]}
        roles = {}
        for name in ("DataSourceLabTraining", "DataSourceLabWorkflow", "DataSourceLabFunctions"):
            roles[name] = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        self.training_role_arn = roles["DataSourceLabTraining"]
        ec2 = self.client("ec2")
        vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
        self.subnet_id = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.0.0/20",
                                           AvailabilityZone=f"{self.region}a")["Subnet"]["SubnetId"]
        self.security_group_id = ec2.create_security_group(GroupName="training", Description="training",
                                                           VpcId=vpc)["GroupId"]
        self.efs_id = self.client("efs").create_file_system(PerformanceMode="maxIO", Encrypted=True,
                                                            CreationToken="dslab")["FileSystemId"]
        self.efs_root.mkdir(parents=True, exist_ok=True)
        if self.with_fsx:
            self.fsx_up()

        # The Lambda functions, as the template defines them (handler, environment keys).
        functions = {}
        for part in FUNCTIONS:
            logical, resource = find_resource(self.template, f"Workflow/{part}/Resource", "AWS::Lambda::Function")
            props = resource["Properties"]
            template_env = set(props.get("Environment", {}).get("Variables", {}))
            environment = self.function_environment()
            if set(environment) - EMULATOR_ONLY_ENV != template_env:
                raise TemplateError(f"{part}'s environment in the template ({sorted(template_env)}) differs from "
                                    f"what the emulator provides ({sorted(environment)})")
            arn = self.client("lambda").create_function(
                FunctionName=f"{STACK}-{part}", Runtime="python3.12", Role=roles["DataSourceLabFunctions"],
                Handler=props["Handler"], Code={"ZipFile": _tiny_zip()}, Timeout=int(props.get("Timeout", 300)),
                Environment={"Variables": environment})["FunctionArn"]
            functions[f"{logical}.Arn"] = arn

        sync_logical, sync_resource = find_resource(self.template, "Workflow/EfsStaging/EfsSyncTask", "AWS::DataSync::Task")
        datasync = self.client("datasync")
        source = datasync.create_location_s3(S3BucketArn=f"arn:aws:s3:::{self.bucket}", Subdirectory=f"/{DATASETS_PREFIX}/",
                                             S3Config={"BucketAccessRoleArn": roles["DataSourceLabWorkflow"]})["LocationArn"]
        destination = datasync.create_location_s3(S3BucketArn=f"arn:aws:s3:::{self.bucket}-efs-stand-in",
                                                  S3Config={"BucketAccessRoleArn": roles["DataSourceLabWorkflow"]})["LocationArn"]
        self.sync_task_arn = datasync.create_task(SourceLocationArn=source, DestinationLocationArn=destination,
                                                  Name=sync_resource["Properties"].get("Name", "efs-sync"))["TaskArn"]
        refs = {**functions, f"{sync_logical}.TaskArn": self.sync_task_arn}
        _, machine = find_resource(self.template, "Workflow/StateMachine/Resource", "AWS::StepFunctions::StateMachine")
        self.definition = resolve(machine["Properties"]["DefinitionString"], refs, self.region)
        self.state_machine_arn = self.client("stepfunctions").create_state_machine(
            name="DataSourceLabWorkflow", definition=self.definition, roleArn=roles["DataSourceLabWorkflow"])["stateMachineArn"]

    def function_environment(self) -> dict[str, str]:
        env = {
            "DSLAB_BUCKET": self.bucket,
            "DSLAB_ROLE_ARN": self.training_role_arn,
            "DSLAB_SUBNET_IDS": self.subnet_id,
            "DSLAB_SECURITY_GROUP_IDS": self.security_group_id,
            "DSLAB_IMAGE_URI": f"763104351884.dkr.ecr.{self.region}.amazonaws.com/pytorch-training:2.6.0-gpu-py312",
            "DSLAB_IMAGE_URI_CPU": f"763104351884.dkr.ecr.{self.region}.amazonaws.com/pytorch-training:2.6.0-cpu-py312",
            # Per-family images as the stacks derive them (dslab/images.py): V100 families keep a CUDA 12 image.
            "DSLAB_IMAGE_URIS": json.dumps({family: f"763104351884.dkr.ecr.{self.region}.amazonaws.com/pytorch-training:2.8.0-gpu-py312"
                                            for family in ("p3", "p3dn")}),
            "DSLAB_CODE_URI": f"s3://{self.bucket}/code/local/sourcedir.tar.gz",
            "DSLAB_CODE_VERSION": "local",
            "DSLAB_EFS_ID": self.efs_id,
            "DSLAB_FSX_ID_PARAMETER": FSX_ID_PARAMETER,
            "DSLAB_FSX_MOUNT_PARAMETER": FSX_MOUNT_PARAMETER,
            "DSLAB_FSX_CAPACITY_GIB": "1200",
            "DSLAB_EFS_THROUGHPUT_MIBPS": "0",
            "DSLAB_FSX_STACK": FSX_STACK,
            "DSLAB_BACKEND": self.backend,
        }
        if self.express_bucket:
            env["DSLAB_EXPRESS_BUCKET"] = self.express_bucket
        if self.endpoint:
            env["DSLAB_AWS_ENDPOINT"] = self.endpoint
        env.update(self.extra_env)
        return env

    # ---- FSx up / down -----------------------------------------------------------------------
    def fsx_up(self) -> None:
        fsx = self.client("fsx").create_file_system(
            FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[self.subnet_id],
            LustreConfiguration={"DeploymentType": "SCRATCH_2"})["FileSystem"]
        self.fsx_id = fsx["FileSystemId"]
        self.fsx_mount = fsx.get("LustreConfiguration", {}).get("MountName") or "emulated"
        # The FSx stack, as CloudFormation knows it: it owns the two SSM parameters (the file system
        # itself is made above: moto's CloudFormation skips AWS::FSx::FileSystem).
        template = {"Resources": {
            "IdParameter": {"Type": "AWS::SSM::Parameter",
                            "Properties": {"Name": FSX_ID_PARAMETER, "Type": "String", "Value": self.fsx_id}},
            "MountNameParameter": {"Type": "AWS::SSM::Parameter",
                                   "Properties": {"Name": FSX_MOUNT_PARAMETER, "Type": "String", "Value": self.fsx_mount}}}}
        self.client("cloudformation").create_stack(StackName=FSX_STACK, TemplateBody=json.dumps(template))
        self._fsx_created = time.monotonic()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        association = {"AssociationId": "dra-0123456789abcdef0", "FileSystemId": self.fsx_id, "Lifecycle": "AVAILABLE",
                       "FileSystemPath": "/datasets", "DataRepositoryPath": f"s3://{self.bucket}/{DATASETS_PREFIX}/",
                       "BatchImportMetaDataOnCreate": True, "CreationTime": now}
        task = {"TaskId": "task-0123456789abcdef0", "Type": "IMPORT_METADATA_FROM_REPOSITORY", "FileSystemId": self.fsx_id,
                "Paths": ["/datasets"], "CreationTime": now}
        self._fsx_repository = (association, task)

    def _fsx_repository_now(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The association and its import task as they stand now: the import runs
        ``fsx_import_seconds`` (stand-in time) after the file system was created."""
        if self._fsx_repository is None or self.fsx_id is None:
            return [], []
        association, task = self._fsx_repository
        elapsed = (time.monotonic() - self._fsx_created) / max(self.time_scale, 1e-9)
        s3 = self.client("s3")
        total = s3.list_objects_v2(Bucket=self.bucket, Prefix=f"{DATASETS_PREFIX}/").get("KeyCount", 0)
        done = total if elapsed >= self.fsx_import_seconds else int(total * elapsed / self.fsx_import_seconds)
        lifecycle = "SUCCEEDED" if elapsed >= self.fsx_import_seconds else "EXECUTING"
        return [association], [{**task, "Lifecycle": lifecycle,
                                "Status": {"TotalCount": total, "SucceededCount": done, "FailedCount": 0}}]

    def _on_stack_delete(self, name: str) -> None:
        if name != FSX_STACK or self.fsx_id is None:
            return
        # What deleting the FSx stack deletes besides its parameters (CloudFormation removed those).
        self.client("ssm").delete_parameters(Names=[FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER])
        self.client("fsx").delete_file_system(FileSystemId=self.fsx_id)
        self.fsx_id = self.fsx_mount = None
        self._fsx_repository = None
        if self.on_fsx_down:
            self.on_fsx_down()

    @property
    def fsx_present(self) -> bool:
        names = [FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER]
        return len(self.client("ssm").get_parameters(Names=names).get("Parameters", [])) == 2

    # ---- EFS staging (DataSync's work) ---------------------------------------------------------
    def _stage_efs(self, task_arn: str, includes: str) -> None:
        s3 = self.client("s3")
        for prefix in [p.strip("/") for p in includes.split("|") if p.strip("/")]:
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=f"{DATASETS_PREFIX}/{prefix}/")
            for page in pages:
                for obj in page.get("Contents", []):
                    target = self.efs_root / DATASETS_PREFIX / obj["Key"][len(DATASETS_PREFIX) + 1:]
                    if target.exists() and target.stat().st_size == obj["Size"]:
                        continue  # TransferMode CHANGED: what is there already stays
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(s3.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"].read())

    # ---- running -----------------------------------------------------------------------------
    def start(self, experiment: dict[str, Any], name: str | None = None) -> str:
        # AWS names an unnamed execution with a UUID; moto leaves it empty, so name it here.
        name = name or str(uuid.uuid4())
        return self.client("stepfunctions").start_execution(
            stateMachineArn=self.state_machine_arn, input=json.dumps(experiment), name=name)["executionArn"]

    def wait(self, execution_arn: str, timeout: float = 600.0, poll: float = 0.1,
             on_poll: Callable[[], None] | None = None) -> Execution:
        sfn = self.client("stepfunctions")
        deadline = time.monotonic() + timeout
        while True:
            described = sfn.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"execution {execution_arn} still running after {timeout:.0f} s")
            if on_poll:
                on_poll()
            time.sleep(poll)
        output = json.loads(described["output"]) if described.get("output") else None
        history = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000).get("events", [])
        return Execution(arn=execution_arn, name=described.get("name") or execution_arn.rsplit(":", 1)[-1],
                         status=described["status"], output=output, error=described.get("error"),
                         cause=described.get("cause"), history=history,
                         history_events=max(patches.HOOKS.history_events.values(), default=0),
                         max_state_bytes=patches.HOOKS.max_state_bytes)

    def run(self, experiment: dict[str, Any], timeout: float = 600.0, **kwargs) -> Execution:
        return self.wait(self.start(experiment), timeout=timeout, **kwargs)

    def read_json(self, key: str) -> Any:
        return json.loads(self.client("s3").get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def results(self, execution: Execution) -> dict[str, Any]:
        return self.read_json(f"results/{execution.name}/results.json")

    def training_job_names(self) -> list[str]:
        return [j["TrainingJobName"] for j in self.client("sagemaker").list_training_jobs(MaxResults=100)["TrainingJobSummaries"]]


def _tiny_zip() -> bytes:
    """The functions run in-process from the installed dslab package; the zip only satisfies the API."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "DataSourceLab functions run in-process from the dslab package.\n")
    return buffer.getvalue()


__all__ = ["EmulatedLab", "Execution", "load_template", "resolve", "TemplateError"]
