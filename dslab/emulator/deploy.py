"""Deploying a synthesized cloud assembly into the stand-in, the way the CDK CLI does it.

Two paths, one CloudFormation (the stand-in's engine):
- ``CliDeployer`` runs the pinned CDK CLI itself (``cdk bootstrap``, ``cdk deploy``, ``cdk destroy``)
  against the stand-in's server (``AWS_ENDPOINT_URL``): STS, the bootstrap version parameter, asset
  publishing to the bootstrap bucket, change sets, stack events and outputs, exactly as on AWS.
- ``InProcessDeployer`` does the same steps from Python for tests that run the stand-in in-process
  (no server for a CLI to reach): the CLI's own bootstrap template, every file asset of the
  assembly's asset manifests published to its destination, one change set per stack, executed and
  followed to its end.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

from .cloudformation import CloudFormationStandIn
from .cloudformation.model import NO_CHANGES, CloudFormationError

REPO = Path(__file__).resolve().parent.parent.parent
CDK = REPO / "node_modules" / ".bin" / "cdk"
BOOTSTRAP_TEMPLATE = REPO / "node_modules" / "aws-cdk" / "lib" / "api" / "bootstrap" / "bootstrap-template.yaml"
TOOLKIT_STACK = "CDKToolkit"
QUALIFIER = "hnb659fds"
# What `cdk bootstrap` passes by default ("Using default execution policy of
# 'arn:aws:iam::aws:policy/AdministratorAccess'"; the asset bucket encrypted with the AWS managed key).
BOOTSTRAP_PARAMETERS = {"CloudFormationExecutionPolicies": "arn:aws:iam::aws:policy/AdministratorAccess",
                        "Qualifier": QUALIFIER, "FileAssetsBucketKmsKeyId": "AWS_MANAGED_KEY",
                        "PublicAccessBlockConfiguration": "true"}


class DeployError(RuntimeError):
    """A stack did not deploy (or delete); the message is CloudFormation's reason."""


def _substitute(text: str, account: str, region: str) -> str:
    return (text.replace("${AWS::AccountId}", account).replace("${AWS::Region}", region)
            .replace("${AWS::Partition}", "aws").replace("unknown-account", account))


def _zip_directory(folder: Path) -> bytes:
    """A directory asset as the CLI zips it: files in sorted order, fixed timestamps."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(str(path.relative_to(folder)), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


class InProcessDeployer:
    """``cdk bootstrap`` / ``cdk deploy`` / ``cdk destroy`` done from Python against the engine."""

    def __init__(self, standin: CloudFormationStandIn, assembly: Path):
        self.standin, self.assembly = standin, Path(assembly)
        self.engine = standin.engine
        self.account, self.region = standin.env.account, standin.env.region

    def client(self, service: str):
        return self.standin.env.client(service)

    def bootstrap(self) -> None:
        if self.engine.find(TOOLKIT_STACK, deleted=False) is not None:
            return
        self._apply(TOOLKIT_STACK, BOOTSTRAP_TEMPLATE.read_text(), parameters=BOOTSTRAP_PARAMETERS, role_arn=None)

    def publish(self, stack: str) -> None:
        manifest = json.loads((self.assembly / f"{stack}.assets.json").read_text())
        s3 = self.client("s3")
        for asset in manifest.get("files", {}).values():
            source = self.assembly / asset["source"]["path"]
            for destination in asset["destinations"].values():
                bucket = _substitute(destination["bucketName"], self.account, self.region)
                key = _substitute(destination["objectKey"], self.account, self.region)
                # The CLI checks with ListObjectsV2, not HeadObject, and skips what is there.
                if s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("KeyCount", 0):
                    continue
                body = _zip_directory(source) if asset["source"].get("packaging") == "zip" and source.is_dir() else source.read_bytes()
                s3.put_object(Bucket=bucket, Key=key, Body=body)

    def deploy(self, *stacks: str) -> dict[str, dict[str, str]]:
        """Deploys the stacks in the order given; their outputs, as `--outputs-file` writes them."""
        self.bootstrap()
        manifest = json.loads((self.assembly / "manifest.json").read_text())
        outputs = {}
        for stack in stacks:
            artifact = manifest["artifacts"][stack]
            self.publish(stack)
            role = artifact["properties"].get("cloudFormationExecutionRoleArn")
            body = (self.assembly / artifact["properties"]["templateFile"]).read_text()
            self._apply(stack, body, parameters={}, role_arn=_substitute(role, self.account, self.region) if role else None)
            outputs[stack] = {o["OutputKey"]: o["OutputValue"] for o in self.engine.get(stack).outputs}
        return outputs

    def _apply(self, stack: str, body: str, *, parameters: dict[str, str], role_arn: str | None) -> None:
        existing = self.engine.find(stack, deleted=False)
        if existing is not None and existing.status in ("ROLLBACK_COMPLETE", "REVIEW_IN_PROGRESS"):
            self.destroy(stack)  # what the CLI does with a stack whose creation rolled back
            existing = None
        name = f"cdk-deploy-change-set-{int(time.time() * 1000)}"
        change_set = self.engine.create_change_set(stack_name=stack, name=name, body=body,
                                                   kind="UPDATE" if existing else "CREATE", parameters=parameters,
                                                   capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
                                                   role_arn=role_arn)
        if change_set.status == "FAILED":
            self.engine.delete_change_set(change_set.change_set_id)
            if change_set.reason == NO_CHANGES:
                return
            raise DeployError(f"{stack}: {change_set.reason}")
        self.engine.execute_change_set(change_set.change_set_id)
        final = self._settle(stack)
        if not final.status.endswith("_COMPLETE") or "ROLLBACK" in final.status:
            raise DeployError(f"{stack}: {final.status}: {final.reason}")

    def destroy(self, stack: str) -> None:
        existing = self.engine.find(stack, deleted=False)
        if existing is None:
            return
        self.engine.delete_stack(existing.stack_id)
        final = self._settle(existing.stack_id)
        if final.status != "DELETE_COMPLETE":
            raise DeployError(f"{stack}: {final.status}: {final.reason}")

    def _settle(self, stack: str, timeout: float = 300.0):
        deadline = time.monotonic() + timeout
        while True:
            current = self.engine.get(stack)
            if not current.status.endswith("_IN_PROGRESS"):
                return current
            if time.monotonic() > deadline:
                raise DeployError(f"{stack} still {current.status} after {timeout:.0f} s")
            time.sleep(0.02)


class CliDeployer:
    """The pinned CDK CLI against the stand-in's server: what `make deploy` runs, pointed at loopback.

    ``workdir`` holds the CLI's ``cdk.json`` (the project's, with ``app`` pointing at this repository)
    and its ``cdk.context.json``, so the lookups the CLI caches for the stand-in's account never land
    in the project's own context file, and its home (``CDK_HOME``: the account cache mapping the stand-in's
    key to its account), so nothing lands in the user's ~/.cdk either.
    """

    def __init__(self, endpoint: str, workdir: Path, *, region: str = "us-east-1",
                 say: Callable[[str], None] | None = None):
        self.endpoint, self.workdir, self.region = endpoint, Path(workdir), region
        self.say = say or (lambda line: None)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._running: set[subprocess.Popen] = set()   # the CLI's processes now running (stop() ends them)
        project = json.loads((REPO / "cdk.json").read_text())
        project["app"] = f"{REPO / '.venv' / 'bin' / 'python'} {REPO / 'app.py'}"
        project.pop("watch", None)
        (self.workdir / "cdk.json").write_text(json.dumps(project, indent=2))

    @property
    def cdk_home(self) -> Path:
        return self.workdir / "cdk-home"

    def environment(self) -> dict[str, str]:
        return stand_in_environment(self.endpoint, self.region, cdk_home=self.cdk_home)

    def run(self, *args: str, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
        if not CDK.exists():
            raise DeployError("the pinned CDK CLI is missing (node_modules/.bin/cdk): run make setup")
        # No notices: fetching them is a request to the internet (cli.cdk.dev-tools.aws.dev) on every call. No
        # terminal either: on a TTY stdin the CLI's keypress reader puts the user's terminal in raw mode (Ctrl-C
        # then no longer interrupts `dslab local`).
        # A process group of its own, ended whole: the CLI runs the app (`python app.py`) as its child, which holds
        # the output pipes too.
        command = [str(CDK), *args, "--no-notices"]
        with subprocess.Popen(command, cwd=cwd or self.workdir, env=self.environment(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                              start_new_session=True) as process:
            self._running.add(process)
            try:
                stdout, stderr = process.communicate()
            except BaseException:   # as subprocess.run: Ctrl-C or SIGTERM here ends the CLI too
                _kill_group(process)
                raise
            finally:
                self._running.discard(process)
        result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
        if check and result.returncode != 0:
            raise DeployError(f"cdk {' '.join(args)} failed:\n{_tail(result.stdout + result.stderr)}")
        return result

    def bootstrap(self, account: str = "123456789012") -> None:
        # From a folder with no cdk.json, as `cdk bootstrap aws://ACCOUNT/REGION` is run outside a project: inside
        # one the CLI first synthesizes the app (twice, with its context lookup: ~35 s of the local lab's start)
        # only to bootstrap the environment it was given anyway. The lab keeps the default qualifier.
        outside = self.workdir / "bootstrap"
        outside.mkdir(exist_ok=True)
        self.run("bootstrap", f"aws://{account}/{self.region}", cwd=outside)

    def stop(self) -> None:
        """End the CLI's processes still running (a command beside the one that failed or was interrupted)."""
        for process in list(self._running):
            _kill_group(process)

    def synthesize(self) -> Path:
        """`cdk synth` in the project folder, as `cdk deploy` synthesizes: bound to the stand-in's account after the
        CLI's context lookups (the region's zones seeded first, as the CLI's own lookup writes them). The assembly is
        the folder's cdk.out, which `cdk deploy --app` then deploys."""
        self.seed_zone_lookup()
        self.run("synth", "--all", "--quiet")
        return self.workdir / "cdk.out"

    def seed_zone_lookup(self, account: str = "123456789012") -> None:
        """Write the one lookup the app needs (the region's zones) into the CLI's cdk.context.json, as the
        CLI's own AZ provider reads it: DescribeAvailabilityZones, the names of the zones whose State is
        "available". Without it the CLI synthesizes, finds the lookup missing, looks it up and synthesizes
        again: ~15 s more on the local lab's first run. The CLI's own lookup path is rehearsed by
        tests/test_deploy_path.py, whose project starts with no context file."""
        import boto3
        path = self.workdir / "cdk.context.json"
        context = json.loads(path.read_text()) if path.exists() else {}
        key = f"availability-zones:account={account}:region={self.region}"
        if key in context:
            return
        env = self.environment()
        ec2 = boto3.client("ec2", region_name=self.region, endpoint_url=self.endpoint,
                           aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                           aws_session_token=env["AWS_SESSION_TOKEN"])
        context[key] = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]
                        if z.get("State") == "available"]
        path.write_text(json.dumps(context, indent=2))

    def deploy(self, *stacks: str, app: Path | None = None, context: dict[str, str] | None = None) -> dict[str, Any]:
        outputs = self.workdir / "outputs.json"
        if app is None:
            self.seed_zone_lookup()
        args = ["deploy", *stacks, "--require-approval", "never", "--outputs-file", str(outputs), "--progress", "events"]
        if app is not None:
            args += ["--app", str(app)]
        for key, value in (context or {}).items():
            args += ["-c", f"{key}={value}"]
        self.run(*args)
        return json.loads(outputs.read_text()) if outputs.exists() else {}

    def destroy(self, *stacks: str, exclusively: bool = False) -> None:
        self.run("destroy", *stacks, "--force", *(["--exclusively"] if exclusively else []))


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stand_in_environment(endpoint: str, region: str = "us-east-1", *, cdk_home: Path) -> dict[str, str]:
    """A process environment whose AWS clients (the CDK CLI's SDK, boto3) all reach the stand-in, and whose
    CDK CLI keeps to ``cdk_home`` and to itself.

    The CLI caches which account an access key belongs to in ``<CDK home>/cache/accounts_partitions.json``
    (the home is ``CDK_HOME``, else the user's ``~/.cdk``): the stand-in's key mapped to its account would make
    every later `cdk synth` with that key look the account up for real. Its telemetry is a request to AWS after
    each command; ``CDK_DISABLE_CLI_TELEMETRY`` turns it off (the pinned CLI's ``canCollectTelemetry``).
    Notices: pass ``--no-notices`` on each call (no environment variable turns them off)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") or k == "AWS_CA_BUNDLE"}
    env.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": region, "AWS_REGION": region,
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH": "true",
                "CDK_DISABLE_VERSION_CHECK": "1", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
                "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
                "CDK_HOME": str(cdk_home), "CDK_DISABLE_CLI_TELEMETRY": "true"})
    return env


def _tail(text: str, lines: int = 40) -> str:
    noise = ("!!", "NodeVersionSupportWarning", "node >=22", "January 2027", "upgrade to node", "a.co/", "--trace-warnings")
    kept = [line for line in text.splitlines() if line.strip() and not any(n in line for n in noise)]
    return "\n".join(kept[-lines:])


__all__ = ["CliDeployer", "DeployError", "InProcessDeployer", "stand_in_environment", "CloudFormationError"]
