"""The lab inside the embedded AWS stand-in: the synthesized stacks deployed, the workflow executed for real.

``EmulatedLab`` deploys the cloud assembly `cdk synth` wrote (or the CDK CLI writes as it deploys)
through the stand-in's CloudFormation (``cloudformation/``): the three stacks with every resource
they define — bucket, roles, network, EFS, FSx and its association, the functions with their real
code assets and environment, the DataSync task, the state machine from its very definition, the
directory bucket and its emptier. Nothing is made beside the templates; what the lab uses is read
from the stacks' outputs.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..core.requests import CORE_STACK, FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER, FSX_STACK, WORKFLOW_STACK
from ..aws.zones import express_zone_ids
from ..core.model.efs import metered_size
from . import patches, snapshot
from .cloudformation import CloudFormationStandIn
from .deploy import CliDeployer, InProcessDeployer
from .functions import RUNTIME_SERVICE, function_endpoint

ACCOUNT = "123456789012"
STACK = WORKFLOW_STACK
# Environment keys the emulator may add that the template does not have (endpoint, backend, test knobs).
EMULATOR_ONLY_ENV = {"DSLAB_AWS_ENDPOINT", "DSLAB_BACKEND", "DSLAB_STAGING_BUDGET_SECONDS", "DSLAB_TIME_SCALE"}
# The process's own settings while a stand-in runs: moto has no S3 Express CreateSession, so clients
# reach directory buckets with plain SigV4 (botocore's switch).
PROCESS_ENV = {"AWS_S3_DISABLE_EXPRESS_SESSION_AUTH": "true"}
# A new IAM role is not assumable by a service at once: the stand-in holds it back this long (stand-in
# seconds; IAM "usually" takes seconds, and the lab's own wait is IAM_PROPAGATION_SECONDS of efs_staging.py).
IAM_PROPAGATION_SECONDS = 10.0
# What DataSync's PreserveDeletedFiles=REMOVE deletes when an execution has include filters. No DataSync document
# says. The stand-in's default, REMOVE_WITHIN_FILTERS, is an inference from two quotes: "DataSync scans and
# transfers only files and folders that match the include filters" (filtering.html) and, of REMOVE with
# TransferMode ALL, "When you transfer all data, DataSync doesn't scan your destination location and doesn't know
# what to delete" (API_Options.html): deletions follow the scan, which the filters limit. REMOVE_WHOLE_LOCATION
# emulates the other reading: every destination file absent from the filtered source is deleted (EmulatedLab's
# datasync_remove), so the lab can be checked under both.
REMOVE_WITHIN_FILTERS = "within-include-filters"
REMOVE_WHOLE_LOCATION = "whole-location"


# The functions every execution invokes (Plan first, Collect last): `dslab local` starts their environments at once.
PREWARMED = ("dslab.workflow.handlers.plan", "dslab.workflow.handlers.collect")
STATUS_POLL = 0.05   # seconds between two looks at whether an execution has ended (a request to the stand-in)


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
    history_events: int = 0       # every event of the execution (AWS fails one at 25,000)
    max_state_bytes: int = 0      # the largest state input/output the stand-in saw (AWS limit: 256 KiB)
    fetch_history: Callable[[], list[dict[str, Any]]] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def history(self) -> list[dict[str, Any]]:
        """Every event of the execution, page after page of GetExecutionHistory, fetched when first asked for (the
        largest run's ~8,000 events are seconds of CPU through the stand-in's serializer)."""
        return self.fetch_history() if self.fetch_history else []


def _interpreter_workers() -> list[threading.Thread]:
    """Live threads of the Step Functions interpreter's Map iterations and Parallel branches (moto's parser
    runs each in a thread whose target is its worker's eval)."""
    found = []
    for thread in threading.enumerate():
        owner = getattr(getattr(thread, "_target", None), "__self__", None)
        module = type(owner).__module__ if owner is not None else ""
        if thread.is_alive() and module.startswith("moto.stepfunctions.parser") and ".program." not in module:
            found.append(thread)
    return found


def _new_client(service: str, region: str, endpoint: str | None):
    import boto3
    kwargs = {"endpoint_url": endpoint} if endpoint else {}
    return boto3.client(service, region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing",
                        **kwargs)


def _stop_server(server) -> None:
    """Stop moto's threaded server now: its loop looks for a stop request every half second (socketserver's
    poll_interval), ~0.4 s of every local run's end; a connection wakes it to look at once."""
    import socket
    stopping = threading.Thread(target=server.stop, name="stop-stand-in", daemon=True)
    stopping.start()
    host, port = server.get_host_and_port()
    while stopping.is_alive():
        try:
            socket.create_connection((host, port), timeout=1.0).close()
        except OSError:
            break   # no longer listening: it has stopped
        stopping.join(0.02)
    stopping.join()


_IN_PROCESS_CLIENTS: dict[tuple[str, str], Any] = {}
_IN_PROCESS_CLIENTS_LOCK = threading.Lock()


def _in_process_client(service: str, region: str):
    with _IN_PROCESS_CLIENTS_LOCK:
        if (service, region) not in _IN_PROCESS_CLIENTS:
            _IN_PROCESS_CLIENTS[service, region] = _new_client(service, region, None)
        return _IN_PROCESS_CLIENTS[service, region]


class EmulatedLab:
    """Use as a context manager. ``executor`` runs each training job (see ``patches.Hooks``).

    On entry the stand-in starts and the lab is deployed into it from ``assembly_dir`` through the
    stand-in's CloudFormation: in-process (tests), or by the real CDK CLI against the server
    (``via_cli``; ``assembly_dir`` None lets the CLI synthesize bound to the stand-in's account, as
    `cdk deploy` does with credentials). Every value the lab then uses (bucket, role, subnet, file
    systems, state machine, directory bucket) is read from the stacks' outputs.
    """

    def __init__(self, assembly_dir: Path | None, *, executor: patches.JobExecutor,
                 efs_root: Path, fsx: bool = True, time_scale: float = 0.01, region: str = "us-east-1",
                 server_port: int | None = None, backend: str = "local",
                 on_fsx_down: Callable[[], None] | None = None, quotas: dict[str, float] | None = None,
                 fsx_import_seconds: float = 0.0, fsx_delete_seconds: float = 0.0,
                 fsx_delete_failure: str | None = None, extra_env: dict[str, str] | None = None,
                 via_cli: bool = False, cli_workdir: Path | None = None, say: Callable[[str], None] | None = None,
                 deploy: bool = True, fsx_import_failures: int = 0, datasync_remove: str = REMOVE_WITHIN_FILTERS,
                 restore: Path | None = None, restore_key: str | None = None):
        """``fsx_import_seconds``: how long (stand-in seconds, scaled by ``time_scale``) FSx's S3
        metadata import runs after the file system exists; ``fsx_delete_seconds`` /
        ``fsx_delete_failure``: how DeleteStack of the FSx stack ends; ``datasync_remove``: which reading of
        DataSync's REMOVE with include filters the stand-in emulates (REMOVE_WITHIN_FILTERS, REMOVE_WHOLE_LOCATION);
        ``restore``: a deployment saved by ``save_deployment`` (under ``restore_key``) to start from instead of
        deploying: snapshot.SnapshotUnusable if it cannot be used."""
        if datasync_remove not in (REMOVE_WITHIN_FILTERS, REMOVE_WHOLE_LOCATION):
            raise ValueError(f"datasync_remove: {REMOVE_WITHIN_FILTERS} or {REMOVE_WHOLE_LOCATION}, not {datasync_remove!r}")
        self.datasync_remove = datasync_remove
        if (via_cli or not deploy) and not server_port:
            raise ValueError("the CDK CLI needs the stand-in's server: give server_port")
        self.deploy_on_enter = deploy
        self.restore_from, self.restore_key = (Path(restore) if restore else None), restore_key
        self.assembly_dir = Path(assembly_dir) if assembly_dir else None
        self.via_cli, self.cli_workdir, self.say = via_cli, cli_workdir, say or (lambda line: None)
        self.quotas = dict(DEFAULT_QUOTAS if quotas is None else quotas)
        self.fsx_import_seconds, self.fsx_delete_seconds = fsx_import_seconds, fsx_delete_seconds
        self.fsx_delete_failure = fsx_delete_failure
        self._fsx_created = 0.0
        self.fsx_import_failures = fsx_import_failures   # objects the association's first import fails on
        self._fsx_association: dict[str, Any] | None = None
        self._fsx_tasks: list[dict[str, Any]] = []       # import tasks, each with its start ("_started")
        self._fsx_lock = threading.Lock()
        self.executor, self.efs_root, self.with_fsx = executor, efs_root, fsx
        self.time_scale, self.region, self.server_port, self.backend = time_scale, region, server_port, backend
        self.on_fsx_down = on_fsx_down
        # Test knobs for the functions' environment (EMULATOR_ONLY_ENV), e.g. the staging time budget.
        self.extra_env: dict[str, str] = dict(extra_env or {})
        if set(self.extra_env) - EMULATOR_ONLY_ENV:
            raise ValueError(f"extra_env may set only {sorted(EMULATOR_ONLY_ENV)}")
        self._mock = None
        self._server = None
        self._clients: dict[str, Any] = {}
        self.cloudformation: CloudFormationStandIn | None = None
        self.deployer: InProcessDeployer | CliDeployer | None = None
        self.outputs: dict[str, dict[str, str]] = {}
        self.state_machine_arn = ""
        self.bucket = ""
        self.express_bucket: str | None = None
        self.fsx_id: str | None = None
        self.fsx_mount: str | None = None
        self.efs_id = ""

    # ---- clients -------------------------------------------------------------------------
    @property
    def endpoint(self) -> str | None:
        return f"http://127.0.0.1:{self.server_port}" if self.server_port else None

    def client(self, service: str):
        """A client of the stand-in, one per service. In-process stand-ins (no server) share theirs with the
        labs the process starts after them: clients are thread-safe and keep nothing of a stand-in's state, and
        making one, tens of milliseconds, was a second of each such lab's start. A server's clients are its own
        (their pooled connections are to that server)."""
        if service not in self._clients:
            self._clients[service] = _in_process_client(service, self.region) if self.endpoint is None else \
                _new_client(service, self.region, self.endpoint)
        return self._clients[service]

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
        patches.HOOKS.efs_size = self._efs_size
        patches.HOOKS.on_stack_delete = self._on_stack_delete
        patches.HOOKS.time_scale = self.time_scale
        patches.HOOKS.quotas = self.quotas
        patches.HOOKS.fsx_repository = self._fsx_repository_now
        patches.HOOKS.fsx_create_task = self._create_task
        patches.HOOKS.stack_deletion = lambda name: ((self.fsx_delete_seconds, self.fsx_delete_failure)
                                                     if name == FSX_STACK else (0.0, None))
        patches.HOOKS.function_env = self._functions_env()
        # moto has no CreateSession: clients reach the stand-in's directory bucket with plain SigV4
        # (botocore's switch; the stand-in lists it the way AWS does, see patches/s3.py).
        self._saved_env = {k: os.environ.get(k) for k in PROCESS_ENV}
        os.environ.update(PROCESS_ENV)
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
            self._deploy()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for thread in list(patches.HOOKS.threads):
            thread.join(timeout=60)
        RUNTIME_SERVICE.close()   # the functions' execution environments end with their stand-in
        if self.cloudformation is not None:
            self.cloudformation.close()
            self.cloudformation = None
        patches.reset_hooks()
        self._clients.clear()
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        if self._server is not None:
            _stop_server(self._server)
            self._server = None
            os.environ.pop("MOTO_PORT", None)
        for key, value in getattr(self, "_saved_env", {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def _emulator_env(self) -> dict[str, str]:
        """What the stand-in adds to its functions' environment (the template's comes with each function)."""
        env = {"DSLAB_BACKEND": self.backend, "DSLAB_TIME_SCALE": str(self.time_scale), **self.extra_env}
        if self.endpoint:
            env["DSLAB_AWS_ENDPOINT"] = self.endpoint
        return env

    @property
    def functions_endpoint(self) -> str:
        """Where the functions, each in an interpreter of its own, reach the stand-in: its server, or for an
        in-process stand-in a loopback server over the same backends (functions.function_endpoint)."""
        return self.endpoint or function_endpoint()

    def _functions_env(self) -> dict[str, str]:
        """What the stand-in adds to a workflow function's environment: the emulator's settings, the endpoint for
        the product's clients (DSLAB_AWS_ENDPOINT) and for any other boto3 client (AWS_ENDPOINT_URL)."""
        endpoint = self.functions_endpoint
        return {**self._emulator_env(), **PROCESS_ENV, "DSLAB_AWS_ENDPOINT": endpoint, "AWS_ENDPOINT_URL": endpoint}

    # ---- deployment ------------------------------------------------------------------------------
    def _deploy(self) -> None:
        self.cloudformation = CloudFormationStandIn(
            self.client, account=ACCOUNT, region=self.region, hooks=patches.HOOKS,
            express_zones=set(express_zone_ids(self.region)),
            function_env=lambda: {"DSLAB_TIME_SCALE": str(self.time_scale), **PROCESS_ENV,
                                  "AWS_ENDPOINT_URL": self.functions_endpoint},
            on_fsx_created=self._on_fsx_created, on_association=self._on_association,
            iam_propagation_seconds=IAM_PROPAGATION_SECONDS, time_scale=lambda: self.time_scale)
        if self.restore_from is not None:
            self._restore()
            return
        if not self.deploy_on_enter:
            return  # an empty account: the user's own `cdk bootstrap` / `make deploy` come next (refresh() after)
        stacks = [CORE_STACK] + ([FSX_STACK] if self.with_fsx else []) + [WORKFLOW_STACK]
        if self.via_cli:
            self.deployer = CliDeployer(self.endpoint, self.cli_workdir or Path(tempfile.mkdtemp(prefix="dslab-cdk-")),
                                        region=self.region)
            self.say("stacks: cdk bootstrap, then cdk deploy into the stand-in ...")
            app = self.assembly_dir
            if app is None:
                # The synthesis (the app's ~10 s) and the bootstrap (~2.5 s) need nothing of each other: side by side,
                # then `cdk deploy` of the assembly synthesized.
                from concurrent.futures import ThreadPoolExecutor
                with ThreadPoolExecutor(1, thread_name_prefix="cdk-synth") as pool:
                    synthesized = pool.submit(self.deployer.synthesize)
                    try:
                        self.deployer.bootstrap(ACCOUNT)
                    except BaseException:   # a failed bootstrap, Ctrl-C or SIGTERM: the synthesis ends with it
                        self.deployer.stop()
                        raise
                    app = synthesized.result()
            else:
                self.deployer.bootstrap(ACCOUNT)
            self.deployer.deploy(*stacks, app=app)
        else:
            if self.assembly_dir is None:
                raise ValueError("the in-process deployer needs a synthesized assembly")
            self.deployer = InProcessDeployer(self.cloudformation, self.assembly_dir)
            self.deployer.deploy(*stacks)
        self._read_outputs()
        self.efs_root.mkdir(parents=True, exist_ok=True)

    def prewarm_functions(self, handlers: tuple[str, ...] = PREWARMED) -> int:
        """Start an execution environment for each deployed function whose handler is in ``handlers`` (the ones every
        execution invokes), as provisioned concurrency would: their interpreters start while the lab goes on."""
        from moto.awslambda.models import lambda_backends
        functions = [f for f in lambda_backends[ACCOUNT][self.region].list_functions() if f.handler in handlers]
        for function in functions:
            RUNTIME_SERVICE.prewarm(function, patches.HOOKS.function_env)
        return len(functions)

    # ---- a deployment saved and restored (snapshot.py) ------------------------------------------------------
    def save_deployment(self, path: Path, key: str) -> None:
        """Save the stand-in as the deploy left it: before any data, job or result (the caller's moment)."""
        engine, env = self.cloudformation.engine, self.cloudformation.env
        with engine.lock, self._fsx_lock:
            now = time.monotonic()
            state = {"stacks": engine.stacks, "change_sets": engine.change_sets,
                     "fsx_versions": env.fsx_versions, "efs_throughput_changes": env.efs_throughput_changes,
                     "name_draws": env.names.draws(),
                     # monotonic clocks kept as ages: a restored FSx is as far into its import as it was
                     "fsx_age": now - self._fsx_created if self._fsx_created else None,
                     "fsx_association": self._fsx_association,
                     "fsx_tasks": [{**t, "_started": now - t["_started"]} for t in self._fsx_tasks],
                     "parsed_definitions": patches.stepfunctions.saved_programs(self._state_machine_definitions())}
            snapshot.save(path, key, state)

    def _state_machine_definitions(self) -> list[str]:
        from moto.stepfunctions.parser.models import stepfunctions_parser_backends
        backend = stepfunctions_parser_backends[ACCOUNT][self.region]
        return [machine.definition for machine in backend.state_machines]

    def _restore(self) -> None:
        state = snapshot.load(self.restore_from, self.restore_key or "")
        engine, env = self.cloudformation.engine, self.cloudformation.env
        now = time.monotonic()
        with engine.lock:
            engine.stacks, engine.change_sets = state["stacks"], state["change_sets"]
        env.fsx_versions.update(state["fsx_versions"])
        env.efs_throughput_changes.update(state["efs_throughput_changes"])
        env.names.continue_from(state["name_draws"])
        self._fsx_created = now - state["fsx_age"] if state["fsx_age"] is not None else 0.0
        self._fsx_association = state["fsx_association"]
        self._fsx_tasks = [{**t, "_started": now - t["_started"]} for t in state["fsx_tasks"]]
        patches.stepfunctions.restore_programs(state.get("parsed_definitions") or {})
        if self.via_cli:   # later deploys (FSx up) take the user's path, as before
            self.deployer = CliDeployer(self.endpoint, self.cli_workdir or Path(tempfile.mkdtemp(prefix="dslab-cdk-")),
                                        region=self.region)
        else:
            self.deployer = InProcessDeployer(self.cloudformation, self.assembly_dir)
        self._read_outputs()
        self.efs_root.mkdir(parents=True, exist_ok=True)

    def stack_outputs(self, stack: str) -> dict[str, str]:
        """A stack's outputs as CloudFormation reports them (DescribeStacks), {} if the stack is not there."""
        try:
            described = self.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
        except Exception:  # noqa: BLE001 - absent
            return {}
        return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}

    def refresh(self) -> None:
        """Read the stacks' outputs again (after a deployment made from outside, by the CLI)."""
        self._read_outputs()

    def _read_outputs(self) -> None:
        core, workflow = self.stack_outputs(CORE_STACK), self.stack_outputs(WORKFLOW_STACK)
        self.outputs = {CORE_STACK: core, WORKFLOW_STACK: workflow, FSX_STACK: self.stack_outputs(FSX_STACK)}
        self.bucket = core["BucketName"]
        self.training_role_arn = core["TrainingRoleArn"]
        self.subnet_id = core["SubnetId"]
        self.security_group_id = core["TrainingSecurityGroupId"]
        self.efs_id = core["EfsFileSystemId"]
        self.express_bucket = core.get("ExpressBucketName") if core.get("ExpressEnabled") == "true" else None
        self.state_machine_arn = workflow["StateMachineArn"]
        self.sync_task_arn = workflow["EfsSyncTaskArn"]
        self.definition = self.client("stepfunctions").describe_state_machine(
            stateMachineArn=self.state_machine_arn)["definition"]
        fsx = self.outputs[FSX_STACK]
        self.fsx_id, self.fsx_mount = fsx.get("FsxFileSystemId"), fsx.get("FsxMountName")

    def function_environment(self) -> dict[str, str]:
        """The Plan function's environment as deployed (the template's), with what the stand-in adds: read where the
        stand-in keeps it (a Lambda client of its own and a ListFunctions of every function's configuration were
        ~0.4 s of a local run's start, beside the execution's)."""
        from moto.awslambda.models import lambda_backends
        functions = lambda_backends[ACCOUNT][self.region].list_functions()
        plan = next(f for f in functions if f.handler == "dslab.workflow.handlers.plan")
        return {**{k: str(v) for k, v in (plan.environment_vars or {}).items()}, **self._emulator_env()}

    # ---- FSx up / down -----------------------------------------------------------------------
    def fsx_up(self) -> None:
        """`make fsx-up`: deploy the FSx stack (through the same deployer as the rest)."""
        if self.via_cli:
            self.deployer.deploy(FSX_STACK, app=self.assembly_dir)
        else:
            self.deployer.deploy(FSX_STACK)
        fsx = self.outputs[FSX_STACK] = self.stack_outputs(FSX_STACK)
        self.fsx_id, self.fsx_mount = fsx.get("FsxFileSystemId"), fsx.get("FsxMountName")

    def _on_fsx_created(self, file_system_id: str, props: dict[str, Any]) -> None:
        self._fsx_created = time.monotonic()

    def _on_association(self, association_id: str, props: dict[str, Any]) -> None:
        """The FSx stack made its data repository association: its S3 metadata import starts now."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._fsx_association = {"AssociationId": association_id, "FileSystemId": props["FileSystemId"], "Lifecycle": "AVAILABLE",
                                 "FileSystemPath": props.get("FileSystemPath", "/datasets"),
                                 "DataRepositoryPath": props["DataRepositoryPath"],
                                 "BatchImportMetaDataOnCreate": bool(props.get("BatchImportMetaDataOnCreate")),
                                 "CreationTime": now}
        # The association's own import (BatchImportMetaDataOnCreate) is an import task like any other, so
        # its paths are S3 paths, as CreateDataRepositoryTask's are (below): the association's DataRepositoryPath.
        self._fsx_tasks = [self._new_task(props["FileSystemId"], [props["DataRepositoryPath"]],
                                          failures=self.fsx_import_failures)]

    def _new_task(self, file_system_id: str, paths: list[str], failures: int = 0,
                  invalid: str | None = None) -> dict[str, Any]:
        return {"TaskId": f"task-{uuid.uuid4().hex[:17]}", "Type": "IMPORT_METADATA_FROM_REPOSITORY",
                "FileSystemId": file_system_id, "Paths": paths,
                "CreationTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "_started": time.monotonic(), "_seconds": self.fsx_import_seconds, "_failures": failures,
                "_invalid": invalid}

    def end_fsx_imports(self) -> None:
        """Every import task still running ends now (a test's way to say when; fsx_import_seconds, which each
        task takes when it is made, then says how long the next ones run)."""
        with self._fsx_lock:
            for task in self._fsx_tasks:
                task["_seconds"] = min(task["_seconds"], (time.monotonic() - task["_started"]) / max(self.time_scale, 1e-9))

    def _create_task(self, params: dict[str, Any]) -> dict[str, Any]:
        """CreateDataRepositoryTask (an import of the given paths), as the stand-in's FSx answers it.

        Refusals (FSx API reference, CreateDataRepositoryTask, and its error shapes in botocore's FSx model):
        - "A CreateDataRepositoryTask operation will fail if a data repository is not linked to the FSx file
          system": BadRequest ("A generic error indicating a failure with a client request"; which error is
          not documented), and FileSystemNotFound ("No Amazon FSx file systems were found based upon supplied
          parameters") for a file system the stand-in does not have.
        - Paths: a list of at most 100 ("max": 100; botocore checks only minimums): BadRequest (an inference,
          as above).
        - DataRepositoryTaskExecuting: "An existing data repository task is currently executing on the file
          system. Wait until the existing task has completed, then create the new task." The association's
          own import (BatchImportMetaDataOnCreate) is such a task, and so is another caller's import.
        Import paths: "For import tasks, the list contains paths in the Amazon S3 bucket from which POSIX
        metadata changes are imported to the FSx for Lustre file system. The path can be an S3 bucket or
        prefix in the format s3://bucket-name/prefix" and "If a path that you provide isn't valid, the task
        fails" (CreateDataRepositoryTask.Paths): a file-system path, or an S3 path outside the linked
        repository, makes a task that ends FAILED having imported nothing."""
        file_system_id = params.get("FileSystemId")
        if not self.client("fsx").describe_file_systems(FileSystemIds=[file_system_id]).get("FileSystems"):
            raise patches.ServiceRefusal("FileSystemNotFound", f"File system '{file_system_id}' does not exist.")
        if self._fsx_association is None or file_system_id != self._fsx_association["FileSystemId"]:
            raise patches.ServiceRefusal("BadRequest", f"File system {file_system_id} is not linked to a data repository.")
        paths = list(params.get("Paths") or [])
        if len(paths) > 100:
            raise patches.ServiceRefusal("BadRequest", f"Paths: at most 100 paths, not {len(paths)}.")
        with self._fsx_lock:   # two callers at once: one task is made, the other is refused
            executing = next((t for t in self._fsx_tasks if t["FileSystemId"] == file_system_id
                              and self._task_now(t)["Lifecycle"] in ("PENDING", "EXECUTING")), None)
            if executing is not None:
                raise patches.ServiceRefusal(
                    "DataRepositoryTaskExecuting", f"Data repository task {executing['TaskId']} is currently "
                    "executing on the file system. Wait until the existing task has completed, then create the new task.")
            repository = self._fsx_association["DataRepositoryPath"].rstrip("/") + "/"
            invalid = next((p for p in paths if not (p.rstrip("/") + "/").startswith(repository)), None)
            reason = None
            if invalid is not None:
                reason = (f"Invalid path {invalid}: import paths are S3 paths (s3://bucket-name/prefix) in the linked "
                          f"data repository {repository}")
            task = self._new_task(file_system_id, paths, invalid=reason)
            self._fsx_tasks.append(task)
            return self._task_now(task)

    def _task_now(self, task: dict[str, Any]) -> dict[str, Any]:
        """The task as it stands: it runs ``fsx_import_seconds`` as it was when the task was made (stand-in time),
        then SUCCEEDED, or FAILED with FailedCount objects (the others imported); an invalid path fails it at once."""
        view = {k: v for k, v in task.items() if not k.startswith("_")}
        if task.get("_invalid"):
            return {**view, "Lifecycle": "FAILED", "Status": {"TotalCount": 0, "SucceededCount": 0, "FailedCount": 0},
                    "FailureDetails": {"Message": task["_invalid"]}}
        elapsed = (time.monotonic() - task["_started"]) / max(self.time_scale, 1e-9)
        if "_total" not in task:  # the objects under its paths when it is first looked at: counted once
            s3 = self.client("s3")
            # No paths: "import all files from S3", i.e. the linked repository.
            uris = task["Paths"] or [self._fsx_association["DataRepositoryPath"]]
            prefixes = [uri[len("s3://"):].partition("/")[2].strip("/") for uri in uris]
            task["_total"] = sum(s3.list_objects_v2(Bucket=self.bucket, Prefix=f"{p}/" if p else "").get("KeyCount", 0)
                                 for p in prefixes)
        total = task["_total"]
        if elapsed < task["_seconds"]:
            done = int(total * elapsed / task["_seconds"])
            return {**view, "Lifecycle": "EXECUTING", "Status": {"TotalCount": total, "SucceededCount": done, "FailedCount": 0}}
        failed = min(task["_failures"], total)
        if failed:
            return {**view, "Lifecycle": "FAILED", "Status": {"TotalCount": total, "SucceededCount": total - failed, "FailedCount": failed},
                    "FailureDetails": {"Message": f"{failed} files failed to import"}}
        return {**view, "Lifecycle": "SUCCEEDED", "Status": {"TotalCount": total, "SucceededCount": total, "FailedCount": 0}}

    def _fsx_repository_now(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The association and its import tasks as they stand now."""
        if self._fsx_association is None:
            return [], []
        return [self._fsx_association], [self._task_now(t) for t in self._fsx_tasks]

    def _on_stack_delete(self, name: str) -> None:
        if name != FSX_STACK:
            return
        # CloudFormation deleted the file system, its association and its SSM parameters.
        self.fsx_id = self.fsx_mount = None
        self._fsx_association, self._fsx_tasks = None, []
        if self.on_fsx_down:
            self.on_fsx_down()

    @property
    def fsx_present(self) -> bool:
        names = [FSX_ID_PARAMETER, FSX_MOUNT_PARAMETER]
        return len(self.client("ssm").get_parameters(Names=names).get("Parameters", [])) == 2

    # ---- DataSync from S3 into EFS (the stand-in's EFS is the folder efs_root) --------------------------
    def _stage_efs(self, task_arn: str, includes: str, overrides: dict[str, Any]) -> None:
        """One task execution, as the DataSync guide describes it: the task's options (with the execution's
        OverrideOptions), its S3 source and EFS destination locations, the execution's include filters."""
        datasync = self.client("datasync")
        task = datasync.describe_task(TaskArn=task_arn)
        options = {**(task.get("Options") or {}), **overrides}   # checked when the execution started
        # moto writes s3://<bucket>/<subdirectory> with the subdirectory's own leading "/"
        bucket, _, source_path = datasync.describe_location_s3(
            LocationArn=task["SourceLocationArn"])["LocationUri"].removeprefix("s3://").partition("/")
        host, _, target_path = datasync.describe_location_efs(
            LocationArn=task["DestinationLocationArn"])["LocationUri"].removeprefix("efs://").partition("/")
        if host.rsplit(".", 1)[-1] != self.efs_id:
            raise ValueError(f"the EFS location's file system {host} is not the lab's ({self.efs_id})")
        source_prefix = f"{source_path.strip('/')}/" if source_path.strip("/") else ""
        target_root = self.efs_root / target_path.strip("/")
        # "All filters are relative to the source location path"; "/dir" and "/dir/" match "both the folder and
        # its content"; "Include filters support the wildcard (*) character only as the rightmost character"
        # (https://docs.aws.amazon.com/datasync/latest/userguide/filtering.html).
        patterns = [p.strip() for p in includes.split("|") if p.strip()]

        def included(path: str) -> bool:
            return not patterns or any(path.startswith(p[:-1]) if p.endswith("*") else
                                       (path == p.rstrip("/") or path.startswith(p.rstrip("/") + "/")) for p in patterns)

        # "DataSync scans and transfers only files and folders that match the include filters" (same page).
        s3 = self.client("s3")
        source: dict[str, dict[str, Any]] = {}
        for pattern in patterns or ["/"]:
            listed = source_prefix + pattern.strip("/").rstrip("*")
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=listed):
                for obj in page.get("Contents", []):
                    path = "/" + obj["Key"][len(source_prefix):]
                    if not obj["Key"].endswith("/") and included(path):
                        source[path] = obj
        for path, obj in source.items():
            target = target_root / path.lstrip("/")
            # CHANGED: "DataSync copies only data or metadata that is new or different content from the source
            # location to the destination location"; ALL copies everything (API_Options.html)
            if options.get("TransferMode", "CHANGED") == "CHANGED" and target.is_file() and target.stat().st_size == obj["Size"]:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
        if options.get("PreserveDeletedFiles") != "REMOVE":
            return
        # "REMOVE - Deletes destination files that aren't present in the source" (API_Options.html). Within the
        # include filters' folders only (REMOVE_WITHIN_FILTERS, the default: an inference, see its comment), or
        # everywhere in the location (REMOVE_WHOLE_LOCATION, the other reading).
        within_filters = self.datasync_remove == REMOVE_WITHIN_FILTERS
        folders = {"/".join(path.split("/")[:i]) for path in source for i in range(2, path.count("/") + 1)}
        for item in sorted(target_root.rglob("*") if target_root.is_dir() else [], key=lambda p: len(p.parts), reverse=True):
            path = "/" + item.relative_to(target_root).as_posix()
            if within_filters and not included(path):
                continue
            if item.is_dir() and path not in folders and not any(item.iterdir()):
                item.rmdir()
            elif not item.is_dir() and path not in source:
                item.unlink()

    def _efs_size(self, file_system_id: str) -> dict[str, int] | None:
        """DescribeFileSystems' SizeInBytes for the lab's EFS: its folder, metered as EFS meters (dslab/core/model/efs.py).
        Stand-in files never stay unread for the lifecycle's days: all of it is in Standard."""
        if file_system_id != self.efs_id:
            return None
        items = list(self.efs_root.rglob("*")) if self.efs_root.is_dir() else []
        size = metered_size((p.stat().st_size for p in items if p.is_file()),
                            directories=1 + sum(1 for p in items if p.is_dir()))
        return {"Value": size, "ValueInStandard": size, "ValueInIA": 0}

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
        # ``poll`` is how often ``on_poll`` looks (the caller's progress: a request per job); whether the execution
        # has ended is asked every STATUS_POLL seconds, so the lab does not sit up to a whole poll past its end.
        next_look = time.monotonic()
        while True:
            described = sfn.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"execution {execution_arn} still running after {timeout:.0f} s")
            if on_poll and time.monotonic() >= next_look:
                on_poll()
                next_look = time.monotonic() + poll
            time.sleep(min(poll, STATUS_POLL))
        # A failed Map ends the execution while its other iterations are still being aborted, each adding
        # history events (as on AWS): the snapshot waits until the count has settled and the interpreter's
        # iteration threads have ended (a loaded machine can pause one longer than a few polls), or for 3 s
        # of no change where another execution keeps threads alive.
        settled, count = 0, -1
        for _ in range(200 if described["status"] != "SUCCEEDED" else 0):
            now_count = max(patches.HOOKS.history_events.values(), default=0)
            settled = settled + 1 if now_count == count else 0
            if (settled >= 3 and not _interpreter_workers()) or settled >= 30:
                break
            count = now_count
            time.sleep(0.1)
        output = json.loads(described["output"]) if described.get("output") else None

        def fetch_history() -> list[dict[str, Any]]:
            if self._mock is None and self._server is None:   # its client would call AWS, or a stopped server
                raise RuntimeError(f"the lab is closed: read {execution_arn}'s history inside the `with EmulatedLab(...)` "
                                   "block that ran it")
            pages = sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn,
                                                                         PaginationConfig={"PageSize": 1000})
            return [event for page in pages for event in page["events"]]
        return Execution(arn=execution_arn, name=described.get("name") or execution_arn.rsplit(":", 1)[-1],
                         status=described["status"], output=output, error=described.get("error"),
                         cause=described.get("cause"), fetch_history=fetch_history,
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


__all__ = ["EmulatedLab", "Execution", "load_template", "resolve", "TemplateError", "REMOVE_WITHIN_FILTERS",
           "REMOVE_WHOLE_LOCATION"]
