"""``dslab export``: one of the lab's CreateTrainingJob requests as ready-to-run SageMaker Python SDK code.

The code is generated FROM the request that ``dslab.core.requests.build_request`` made, walking it
with the CreateTrainingJob model, so no channel rule is derived twice: whatever the request builder
puts in a request (a new source, a new channel field) is exported as it is, and anything the SDK
cannot take fails here instead of being dropped.

Which SDK (measured 2026-11, Python 3.11, pip --no-cache-dir, SDK v3 packages of one release line):
- ``sagemaker`` 3.27.0, the full v3 distribution: a fresh venv gets 134 packages, ~1.0 GB, 136 s;
  over this project's .venv it adds 66 packages, ~488 MB (mlflow, pyarrow, scikit-learn, SQLAlchemy,
  FastAPI, the serving and MLOps parts).
- ``sagemaker-train`` 1.27.0, its training part (the release that goes with sagemaker-core 2.27.0):
  116 packages, ~935 MB, 67 s fresh; over .venv 48 packages, ~428 MB (mlflow and its stack).
- ``sagemaker-core`` 2.27.0, the SDK's core package, is already pinned in requirements.txt: nothing added.
ModelTrainer (sagemaker-train) reproduces the lab's request only when it is handed raw
``sagemaker.core.shapes.Channel`` objects (its InputData has no RecordWrapperType nor ShuffleConfig);
tried so against a stub, the channel, VPC, resources, stopping condition, role, image, hyperparameters,
tags and spot flag equalled the lab's (OutputDataConfig gained CompressionType GZIP). But building a
ModelTrainer also calls iam:SimulatePrincipalPolicy on the role without resource ARNs and, by its own
rule, refuses a role whose smoke-test actions are resource-scoped: the lab's least-privilege role scopes
ec2:CreateNetworkInterface to its subnet (unless SAGEMAKER_VALIDATE_ROLE=false); and train() sends a
telemetry request to an S3 endpoint. So the exported code calls
``sagemaker.core.resources.TrainingJob.create`` with ``sagemaker.core.shapes``: 1:1 with the API,
nothing to install beyond the pin the lab already has, no call besides CreateTrainingJob and its Describe.
"""

from __future__ import annotations

import functools
import re
from typing import Any

SDK_REQUIREMENT = "sagemaker-core==2.27.0"  # the pin in requirements.txt (a test keeps them equal)
WIDTH = 120  # wrap a value over several lines past this column


@functools.lru_cache(maxsize=1)
def _create_training_job_input():
    """CreateTrainingJob's input shape in botocore's SageMaker model: the shape names are the
    class names in sagemaker.core.shapes (sagemaker-core is generated from the same model)."""
    import botocore.session
    return botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob").input_shape


# sagemaker.core.resources defines a resource class Tag that shadows shapes.Tag, and TrainingJob.create
# validates its tags against it: pass tags as dicts of the same keywords (as the SDK's ModelTrainer does).
AS_DICT = {"Tag"}


def _constructor(shape) -> str:
    return "dict" if shape.name in AS_DICT else f"shapes.{shape.name}"


def _snake(name: str) -> str:
    """A member's Python name, by sagemaker-core's own rule (sagemaker.core.utils.utils.pascal_to_snake)."""
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _members(value: dict[str, Any], shape) -> list[tuple[str, Any, Any]]:
    unknown = [k for k in value if k not in shape.members]
    if unknown:
        raise ValueError(f"{shape.name} has no member {unknown[0]!r}: the SageMaker model does not know it")
    return [(_snake(k), v, shape.members[k]) for k, v in value.items()]


def _flat(value: Any, shape) -> str:
    if shape.type_name == "structure":
        return f"{_constructor(shape)}(" + ", ".join(f"{k}={_flat(v, s)}" for k, v, s in _members(value, shape)) + ")"
    if shape.type_name == "list":
        return "[" + ", ".join(_flat(v, shape.member) for v in value) + "]"
    if shape.type_name == "map":
        return "{" + ", ".join(f"{k!r}: {_flat(v, shape.value)}" for k, v in value.items()) + "}"
    return repr(value)


def _code(value: Any, shape, indent: int, column: int) -> str:
    """value as Python source starting at ``column`` on a line indented by ``indent``: on one line
    when it fits, else one member or item per line."""
    flat = _flat(value, shape)
    if column + len(flat) <= WIDTH or shape.type_name not in ("structure", "list", "map"):
        return flat
    pad, inner = " " * indent, " " * (indent + 4)
    if shape.type_name == "structure":
        lines = [f"{inner}{k}={_code(v, s, indent + 4, indent + 5 + len(k))}" for k, v, s in _members(value, shape)]
        return f"{_constructor(shape)}(\n" + ",\n".join(lines) + f",\n{pad})"
    if shape.type_name == "list":
        lines = [inner + _code(v, shape.member, indent + 4, indent + 4) for v in value]
        return "[\n" + ",\n".join(lines) + f",\n{pad}]"
    lines = [f"{inner}{k!r}: {_code(v, shape.value, indent + 4, indent + 6 + len(repr(k)))}" for k, v in value.items()]
    return "{\n" + ",\n".join(lines) + f",\n{pad}}}"


def generate(request: dict[str, Any], region: str) -> str:
    """Python source that starts ``request`` as a new training job in ``region`` (a pure function)."""
    tags = {t["Key"]: t["Value"] for t in request.get("Tags") or []}
    channel = (request.get("InputDataConfig") or [{}])[0]
    mode = tags.get("dslab:mode") or channel.get("InputMode", "?")
    if tags.get("dslab:storage") not in (None, "standard"):
        mode += f" ({tags['dslab:storage']} storage)"
    # The lab's names end in a digest of its execution; each run of the script gets a fresh name instead
    # (SageMaker names are unique per account and region), kept within 63 characters.
    base = re.sub(r"-[0-9a-f]{8}$", "", request["TrainingJobName"])[:47].rstrip("-")
    dataset = tags.get("dslab:dataset", "?")
    if "dslab:checkpoint-target" in tags:   # a checkpoint trial's job reads no dataset: it writes (or restores) these
        role = "the restore" if tags.get("dslab:checkpoint-restore") == "true" else "the writer"
        what = f"checkpoints of {dataset} on {tags['dslab:checkpoint-target']}, {role}"
    else:
        what = f"mode {mode} on dataset {dataset}"
    shape = _create_training_job_input()
    arguments = []
    for key, value in request.items():
        if key == "TrainingJobName":
            continue
        if key not in shape.members:
            raise ValueError(f"CreateTrainingJob has no parameter {key!r}")
        name = _snake(key)
        arguments.append(f"        {name}={_code(value, shape.members[key], 8, 9 + len(name))},")
    body = "\n".join(arguments)
    return f'''\
# DataSourceLab job {request["TrainingJobName"]}: {what} (trial {tags.get("dslab:trial", "?")}, repeat {tags.get("dslab:repeat", "?")}).
# Generated by `dslab export` from experiment {tags.get("dslab:experiment", "?")} (hash {tags.get("dslab:experiment-hash", "?")}): the lab's own request.
# Run: python THIS_FILE [--wait]   (pip install {SDK_REQUIREMENT}; AWS credentials allowed to pass the role)
"""Start the training job with the SageMaker Python SDK (sagemaker.core: TrainingJob.create, 1:1 with the API).

The training code is the lab's framework-container contract: the image downloads the tarball in
hyperparameter sagemaker_submit_directory and runs sagemaker_program from it.
"""

import sys
import time

from sagemaker.core import shapes
from sagemaker.core.resources import TrainingJob

REGION = {region!r}
BASE_NAME = {base!r}


def start_training_job(name=None):
    """Create the training job; returns sagemaker.core.resources.TrainingJob."""
    return TrainingJob.create(
        training_job_name=name or f"{{BASE_NAME}}-{{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}}",
{body}
        region=REGION,
    )


def _no_credentials():
    """One line naming what is missing, or None (boto3's own chain: env, profile, SSO, instance role)."""
    import boto3
    if boto3.Session(region_name=REGION).get_credentials() is None:
        return ("no AWS credentials found: set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) "
                f"for the account the lab is deployed in ({{REGION}}), then run this again")
    return None


if __name__ == "__main__":
    missing = _no_credentials()
    if missing:
        sys.exit(missing)
    from botocore.exceptions import BotoCoreError, ClientError
    try:
        job = start_training_job()
    except (BotoCoreError, ClientError) as err:  # one line, not a traceback
        sys.exit(f"CreateTrainingJob failed: {{err}}")
    print(f"started training job {{job.training_job_name}} in {{REGION}}")
    if "--wait" in sys.argv[1:]:
        job.wait(logs=True)
'''
