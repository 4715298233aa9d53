"""What the command groups share: exit codes, output helpers, prices, and the deployed lab's stack outputs."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

from ..core.errors import ConfigError
from ..core.requests import CORE_STACK, FSX_STACK, WORKFLOW_STACK

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = REPO / "build" / "user-code"  # packaged user code (dslab/inputs/user_code.py)
EXIT_BAD_INPUT = 2


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""


class NotDeployed(ConfigError):
    """The lab's stacks are not in this account and region."""


# botocore's words for a ClientError, which boto3's S3UploadFailedError quotes: "An error occurred (Code) when calling
# the Operation operation (reached max retries: 4): message".
_CLIENT_ERROR_WORDS = re.compile(r".*?An error occurred \((?P<code>[^)]+)\) when calling the (?P<operation>\w+) operation"
                                 r"(?: \(reached max retries: (?P<retries>\d+)\))?: (?P<message>.*)", re.S)


def find_client_error(err: BaseException | None):
    """The botocore ClientError in ``err`` or its causes, or None. boto3's S3UploadFailedError raises from the
    ClientError it caught; where that context is missing (an error re-raised while another is handled takes that one
    as its context), the ClientError is read back from its words."""
    from botocore.exceptions import ClientError
    first = err
    for _ in range(5):
        if isinstance(err, ClientError):
            return err
        if err is None:
            break
        # `raise X from None` says the error it replaced is not the story: its context is not followed
        err = err.__cause__ or (None if err.__suppress_context__ else err.__context__)
    from boto3.exceptions import S3UploadFailedError
    words = _CLIENT_ERROR_WORDS.match(str(first)) if isinstance(first, S3UploadFailedError) else None
    if words is None:
        return None
    response = {"Error": {"Code": words["code"], "Message": words["message"]},
                "ResponseMetadata": {"RetryAttempts": int(words["retries"] or 0)}}
    return ClientError(response, words["operation"])


def explain_aws(err: BaseException, what: str | None = None) -> str:
    """One line for an AWS error met with the user's credentials: the operation, the code and AWS's message, the
    attempts botocore made, and the fix (dslab/core/facts/aws_errors.py; the fault matrix lists every pair)."""
    from ..aws.faults import cli_service_of
    from ..core.facts.aws_errors import explain
    found = find_client_error(err)
    operation = getattr(found, "operation_name", None) or ""
    return explain(found if found is not None else err, service=cli_service_of(operation), what=what)


def aws_failure(err: BaseException, what: str | None = None) -> UserError:
    return UserError(explain_aws(err, what))


class Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line (exit 2): argparse prints its usage block before them."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} -h)\n")


# Numeric options are parsed by these (argparse ``type=``): a bad value is refused with the flag's name
# before any command runs. ``kind`` tells what the option holds (tests fuzz every such option).
def whole(low: int, high: int | None = None, unit: str = "") -> Callable[[str], int]:
    """A whole number in low..high (no upper bound when ``high`` is None)."""
    allowed = f"{low:,}..{high:,}" if high is not None else f"{low:,} or more"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number ({allowed}{unit})") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value:,} is out of range: give {allowed}{unit}")
        return value
    parse.kind = int  # type: ignore[attr-defined]
    parse.__name__ = "whole number"
    return parse


def real(above: float, high: float, unit: str = "") -> Callable[[str], float]:
    """A finite number greater than ``above`` and at most ``high``."""
    import math
    allowed = f"above {above:g} and at most {high:,g}{unit}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number ({allowed})") from None
        if not math.isfinite(value) or not above < value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: give a number {allowed}")
        return value
    parse.kind = float  # type: ignore[attr-defined]
    parse.__name__ = "number"
    return parse


def add_command(sub, name: str, handler: Callable, help_text: str, example: str) -> argparse.ArgumentParser:
    # argparse %-formats help strings (not descriptions): "AU >= 90%" must reach it as "90%%".
    parser = sub.add_parser(name, help=help_text.replace("%", "%%"), description=f"{help_text}\n\nexample:\n  {example}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(handler=handler)
    return parser


def can_confirm(args, why: str) -> None:
    """Refuse early, before anything is read or deleted, when a deletion could be neither confirmed with
    --yes nor asked about (no terminal): ``why`` says what --yes agrees to."""
    if not args.yes and not sys.stdin.isatty():
        raise ConfigError("--yes", f"{why}: pass --yes")


def confirmed(args, question: str) -> bool:
    """--yes, or the user's y on the terminal; otherwise says nothing was deleted."""
    if args.yes or input(f"{question} [y/N] ").strip().lower() in ("y", "yes"):
        return True
    print("nothing deleted")
    return False


def console():
    from rich.console import Console
    return Console(stderr=True)


def progress_bar():
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeRemainingColumn(), console=console(), transient=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def num(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def price_table(path: str | None):
    from ..core.facts.prices import PriceTable
    if not path:
        return PriceTable()
    from ..inputs.experiment_file import read_document
    return PriceTable.with_overrides(read_document(Path(path), "--prices"), source=path)


def region_of(args) -> str:
    return getattr(args, "region", None) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def stepfunctions(region: str):
    import boto3
    return boto3.client("stepfunctions", region_name=region)


# ---- the deployed lab ------------------------------------------------------------------------------

def lab_context(path: Path = REPO / "cdk.json") -> dict[str, Any]:
    """The lab's deploy settings (cdk.json's context), for commands that check them before a deploy."""
    try:
        return json.loads(path.read_text()).get("context", {})
    except (OSError, ValueError):
        return {}


def lab_fsx_capacity(args=None) -> int:
    """FSx's size: --fsx-capacity, else the lab's as deployed (lab_provisioning)."""
    return lab_provisioning(args).fsx.capacity_gib


# The stack outputs that say how the lab's FSx and EFS are deployed, as the context keys that built them.
LAB_OUTPUT_SETTINGS = {"FsxDeploymentType": "fsxDeploymentType", "FsxCapacityGiB": "fsxCapacity",
                       "FsxThroughputPerTiB": "fsxThroughputPerTiB", "EfsThroughputMode": "efsThroughput",
                       "EfsProvisionedMibps": "efsProvisionedMibps"}
# The outputs files the Makefile writes in the project folder: `make deploy` (cdk deploy DataSourceLab
# --outputs-file cdk-outputs.json: the stacks that deploy deployed) and `make fsx-up` (the FSx stack alone).
OUTPUTS_FILE, FSX_OUTPUTS_FILE = "cdk-outputs.json", "cdk-outputs-fsx.json"


def _fsx_found(outputs: dict[str, str]) -> dict[str, str]:
    """The FSx settings in stack outputs, as context keys (empty where they name no deployment type)."""
    found = {key: outputs[name] for name, key in LAB_OUTPUT_SETTINGS.items()
             if key.startswith("fsx") and outputs.get(name) not in (None, "")}
    if "fsxDeploymentType" not in found:
        return {}
    if found["fsxDeploymentType"] != "PERSISTENT_2":
        found.pop("fsxThroughputPerTiB", None)   # Scratch 2's output is its baseline, not a setting
    return found


def _efs_found(outputs: dict[str, str]) -> dict[str, str]:
    """The EFS settings in stack outputs, as context keys (empty where they name no throughput mode)."""
    found = {key: outputs[name] for name, key in LAB_OUTPUT_SETTINGS.items()
             if key.startswith("efs") and outputs.get(name) not in (None, "")}
    if "efsThroughput" not in found:
        return {}
    if found["efsThroughput"] != "provisioned":
        found.pop("efsProvisionedMibps", None)
    if outputs.get("EfsPerformanceMode"):
        found["efsPerformance"] = outputs["EfsPerformanceMode"]
    return found


def _stacks_of(path: Path, flag: str = "--outputs") -> dict[str, dict[str, str]]:
    """A `cdk deploy --outputs-file` document as it is written: {stack name: {output key: value}}."""
    from ..inputs.experiment_file import read_json_file
    data = read_json_file(path, flag)
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError(flag, f"{path} is not a cdk --outputs-file document ({{stack: {{output: value}}}})")
    return {stack: {k: str(v) for k, v in outputs.items()} for stack, outputs in data.items()}


def _in_stacks(stacks: dict[str, dict[str, str]], stack: str, key: str) -> dict[str, str]:
    """The outputs of ``stack``, or of whichever stack has output ``key`` (a file written by hand)."""
    if key in stacks.get(stack, {}):
        return stacks[stack]
    return next((outputs for outputs in stacks.values() if key in outputs), {})


def lab_provisioning(args=None, outputs: dict[str, str] | None = None, where: str = "CloudFormation"):
    """The lab an answer prices, named by where each part came from.

    ``outputs``: stack outputs already read (CloudFormation's, where a missing FSx stack means FSx is down). Else
    the outputs file: --outputs FILE, or, for a command that takes --outputs and was given none, the cdk-outputs.json
    `make deploy` wrote in the working folder; beside it, the cdk-outputs-fsx.json `make fsx-up` writes (the newer
    of the two says FSx). A file without the FSx stack (`make deploy FSX=keep` leaves FSx as it was, up or down)
    does not say FSx is down: FSx is unknown from it and priced as cdk.json would deploy it. Without any file, the
    whole lab as cdk.json would deploy it. --fsx-capacity sets FSx's size on top."""
    from dataclasses import replace

    from ..core.model.provisioning import CDK_JSON, lab_from_settings
    context = lab_context()
    settings = dict(context)
    if outputs is not None:
        fsx, efs = _fsx_found(outputs), _efs_found(outputs)
        fsx_source = where if fsx else CDK_JSON
        efs_source = where if efs else CDK_JSON
        notes = [] if fsx else ["FSx is down, no FSx stack: as cdk.json would bring it up" if where == "CloudFormation"
                                else "FSx unknown from it: as cdk.json would deploy it"]
        if not efs:
            notes.append("EFS as cdk.json would deploy it")
        shown = where
    else:
        fsx, efs, fsx_source, efs_source, notes, shown = _from_outputs_files(args)
    settings.update(fsx)
    settings.update(efs)
    idle = _idle_hours_deployed(args, outputs)
    if idle is not None:   # the idle guard as the workflow stack was deployed (its FsxIdleHours output)
        settings["fsxIdleHours"] = idle
    if shown is None or (fsx_source == efs_source == CDK_JSON):
        name = "the lab as cdk.json would deploy it" + (f" ({shown} names neither FSx nor EFS)" if shown else "")
        source = "cdk.json"
    else:
        name = f"the lab as deployed ({shown}" + "".join(f"; {note}" for note in notes) + ")"
        source = shown if fsx_source == efs_source else f"{shown}, {fsx_source}"
    # What a later deploy must repeat to keep the deployed parts as they stand (CONTEXT holds for one deploy).
    keep = tuple((key, value) for key, value in {**fsx, **efs}.items() if str(context.get(key)) != str(value))
    lab = lab_from_settings(settings.get, source, name, fsx_source=fsx_source, efs_source=efs_source,
                            keep_settings=keep)
    capacity = getattr(args, "fsx_capacity", None)
    if capacity is not None:
        from ..core.facts.storage import fsx_capacity_problem
        problem = fsx_capacity_problem(capacity, lab.fsx.deployment_type)
        if problem:
            raise ConfigError("--fsx-capacity", problem, "1200, 2400, 4800, ...")
        at = f"FSx at --fsx-capacity {capacity}"
        lab = replace(lab.with_fsx_capacity(capacity),
                      name=f"{lab.name[:-1]}; {at})" if lab.name.endswith(")") else f"{lab.name} ({at})")
    return lab


def _idle_hours_deployed(args, outputs: dict[str, str] | None) -> str | None:
    """The deployed workflow stack's FsxIdleHours output: from ``outputs`` (CloudFormation's), else from the outputs
    file lab_provisioning reads (--outputs, or the cdk-outputs.json `make deploy` wrote); None where neither says."""
    from ..core.requests import WORKFLOW_STACK
    if outputs is not None:
        return outputs.get("FsxIdleHours") or None
    given = getattr(args, "outputs", None)
    path = Path(given) if given else None
    if path is None and args is not None and hasattr(args, "outputs"):
        path = Path.cwd() / OUTPUTS_FILE
    if path is None or not path.is_file():
        return None
    return _in_stacks(_stacks_of(path), WORKFLOW_STACK, "FsxIdleHours").get("FsxIdleHours") or None


def _from_outputs_files(args):
    """(FSx settings, EFS settings, FSx's source, EFS's source, notes, the file shown) from the outputs files
    lab_provisioning reads; the file shown is None where there is none."""
    from ..core.model.provisioning import CDK_JSON
    given = getattr(args, "outputs", None)
    if given:
        main, shown = Path(given), str(given)
    elif args is not None and hasattr(args, "outputs") and (Path.cwd() / OUTPUTS_FILE).is_file():
        main, shown = Path.cwd() / OUTPUTS_FILE, OUTPUTS_FILE
    else:
        main, shown = None, None
    fsx_file = (main.parent if main is not None else Path.cwd()) / FSX_OUTPUTS_FILE
    if main is None and not (args is not None and hasattr(args, "outputs") and fsx_file.is_file()):
        return {}, {}, CDK_JSON, CDK_JSON, [], None
    from ..core.requests import CORE_STACK, FSX_STACK
    stacks = _stacks_of(main) if main is not None else {}
    fsx = _fsx_found(_in_stacks(stacks, FSX_STACK, "FsxDeploymentType"))
    efs = _efs_found(_in_stacks(stacks, CORE_STACK, "EfsThroughputMode"))
    fsx_source = shown if fsx else CDK_JSON
    notes: list[str] = []
    newer = main is None or (fsx_file.is_file() and fsx_file.stat().st_mtime > main.stat().st_mtime)
    if fsx_file.is_file() and (not fsx or newer):
        from_fsx_file = _fsx_found(_in_stacks(_stacks_of(fsx_file), FSX_STACK, "FsxDeploymentType"))
        if from_fsx_file:   # `make fsx-up` after the deploy, or a deploy that left FSx as it was
            fsx, fsx_source = from_fsx_file, FSX_OUTPUTS_FILE if not given else str(fsx_file)
            notes.append(f"FSx as {fsx_source} says (`make fsx-up`)")
    if shown is None:
        shown = fsx_source
        notes = [n for n in notes if not n.startswith("FSx as")]
    if not fsx:
        notes.append("FSx unknown from it, no FSx stack in it: as cdk.json would deploy it" if FSX_STACK not in stacks else
                     "FSx's settings not in its outputs (deployed before them): as cdk.json would deploy it")
    if not efs:
        notes.append("EFS as cdk.json would deploy it")
    return fsx, efs, fsx_source, shown if efs else CDK_JSON, notes, shown


def outputs_from_file(path: Path) -> dict[str, str]:
    """Flatten `cdk deploy --outputs-file` JSON ({stack: {key: value}}) into one mapping."""
    from ..inputs.experiment_file import read_json_file
    data = read_json_file(path, "--outputs")
    if not isinstance(data, dict):
        raise ConfigError("--outputs", f"{path} is not a cdk --outputs-file document ({{stack: {{output: value}}}})")
    flat: dict[str, str] = {}
    for stack_outputs in data.values():
        if isinstance(stack_outputs, dict):
            flat.update({k: str(v) for k, v in stack_outputs.items()})
    return flat


# The stand-in lab's stack outputs (what `cdk deploy` writes for the embedded stand-in's account): plan
# and export read them with --offline, to show the requests without an AWS account. A test compares the
# file's keys with the outputs the stand-in's CloudFormation reports after a deploy.
OFFLINE_OUTPUTS = Path(__file__).resolve().parents[1] / "local" / "stand-in-outputs.json"


OFFLINE_HINT = "or add --offline to use the stand-in lab's outputs (no account needed)"


LOCAL_HINT = "offline, `make lab` (dslab local) runs the whole lab on the embedded stand-in, no account needed"


def lab_outputs(args) -> dict[str, str]:
    """The deployed lab's stack outputs: --outputs FILE, --offline (the stand-in's), else CloudFormation's."""
    offline = getattr(args, "offline", None)
    if offline:
        if args.outputs:
            raise ConfigError("--offline", "reads the stand-in lab's outputs: give --offline or --outputs, not both")
        print(f"offline: the stand-in lab's stack outputs ({OFFLINE_OUTPUTS.name}, account 123456789012, us-east-1); "
              "deploy the lab and drop --offline for your account's", file=sys.stderr)
        return outputs_from_file(OFFLINE_OUTPUTS)
    if getattr(args, "outputs", None):
        return outputs_from_file(Path(args.outputs))
    return outputs_from_cloudformation(region_of(args), hint=OFFLINE_HINT if offline is not None else LOCAL_HINT)


def outputs_from_cloudformation(region: str | None = None, hint: str = LOCAL_HINT) -> dict[str, str]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    client = boto3.client("cloudformation", region_name=region)
    flat: dict[str, str] = {}
    try:
        for stack in (CORE_STACK, FSX_STACK, WORKFLOW_STACK):
            try:
                described = client.describe_stacks(StackName=stack)["Stacks"][0]
            except ClientError as err:
                if "does not exist" in str(err) and stack == FSX_STACK:
                    continue  # FSx is down: that is a state, not an error
                raise
            flat.update({o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])})
    except NoCredentialsError:
        raise ConfigError("AWS credentials", f"none found: set AWS_PROFILE (or AWS_ACCESS_KEY_ID and "
                          f"AWS_SECRET_ACCESS_KEY) for the lab's account; {hint}") from None
    except ClientError as err:
        if "does not exist" in str(err):
            raise NotDeployed("stack", "DataSourceLab is not deployed in this account/region: run `make deploy FSX=up`; "
                              f"{hint}") from None
        raise aws_failure(err, "reading the lab's stack outputs") from None
    except BotoCoreError as err:
        raise ConfigError("AWS", f"{err}") from None
    return flat


def environment_from_outputs(outputs: dict[str, str], region: str):
    from ..core.requests import LabEnvironment
    missing = [k for k in ("BucketName", "SubnetId", "TrainingSecurityGroupId", "TrainingRoleArn", "TrainingCodeUri",
                           "TrainingImageUri") if k not in outputs]
    if missing:
        raise ConfigError("--outputs", f"stack outputs {', '.join(missing)} are missing; deploy the whole lab with "
                          "`make deploy FSX=up` (it writes cdk-outputs.json), or use --offline for the stand-in lab's")
    fsx = None
    if outputs.get("FsxFileSystemId") and outputs.get("FsxMountName"):
        fsx = {"file_system_id": outputs["FsxFileSystemId"], "mount_name": outputs["FsxMountName"]}
    return LabEnvironment.from_dict({
        "bucket": outputs["BucketName"], "region": region, "role_arn": outputs["TrainingRoleArn"],
        "subnet_ids": outputs["SubnetId"], "security_group_ids": outputs["TrainingSecurityGroupId"],
        "image_uri": outputs["TrainingImageUri"], "image_uri_cpu": outputs.get("TrainingImageUriCpu"),
        "image_uris": outputs.get("TrainingImageUris"),
        "code_uri": outputs["TrainingCodeUri"], "code_version": outputs.get("TrainingCodeVersion"),
        "fsx": fsx, "efs": {"file_system_id": outputs["EfsFileSystemId"]} if outputs.get("EfsFileSystemId") else None,
        "express_bucket": outputs.get("ExpressBucketName") or None,
    })


def workflow_of(args) -> tuple[str, str | None]:
    """(state machine ARN, bucket) of the deployed lab."""
    outputs = lab_outputs(args)
    if "StateMachineArn" not in outputs:
        raise ConfigError("stack", "the DataSourceLab workflow stack has no StateMachineArn output: run `make deploy FSX=keep`")
    return outputs["StateMachineArn"], outputs.get("BucketName")


def print_workload(workload) -> None:
    print(workload.describe())
    print_ignored([workload])


def print_ignored(workloads, *, brief: bool = False) -> None:
    """The DLIO fields the lab does not use, one line each (core/workloads/dlio.py ignored_lines), as every command that
    takes a workload prints them; ``brief`` (an answer's default output): one line that counts them."""
    from ..core.workloads.dlio import ignored_lines
    from .render import fit
    lines = ignored_lines(workloads)
    if brief and lines:
        fields = [line.split(": ", 1)[1].split(":")[0].split(" (")[0] for line in lines]
        print(fit(f"ignored: {len(lines)} part(s) of the workload file the lab does not use ({', '.join(fields)}): "
                  "--explain says why"))
        return
    for line in lines:
        print(line)
