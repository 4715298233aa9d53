"""The SageMaker training container's contract, as the local runner keeps it: the code archive, the
script's arguments from hyperparameters, requirements.txt, and metrics scraped from the log."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from ..aws.validation import RequestInvalid
from .job_storage import Storage, split_s3_uri


class JobFailed(Exception):
    """The job fails with this FailureReason (the way SageMaker words it)."""


def tar_gz(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            tar.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)
    return buffer.getvalue()


def extract_code(storage: Storage, uri: str, target: Path, code_dir: Path | None) -> None:
    if code_dir is not None:
        shutil.copytree(code_dir, target, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        return
    if not uri.startswith("s3://"):
        raise RequestInvalid(f"HyperParameters.sagemaker_submit_directory {uri!r} is not an S3 URI")
    bucket, key = split_s3_uri(uri)
    try:
        data = storage.read_object(bucket, key)
    except (FileNotFoundError, KeyError, RequestInvalid):
        raise RequestInvalid(f"training code {uri} not found: upload sourcedir.tar.gz there (or pass --code DIR)") from None
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(target, filter="data")


def decode_hyperparameter(value: str) -> Any:
    try:
        return json.loads(value)
    except (TypeError, json.JSONDecodeError):
        return value


def script_arguments(hyperparameters: dict[str, str]) -> list[str]:
    """The entry point's command line, as SageMaker's framework containers build it: every
    hyperparameter but the ``sagemaker_*`` ones as ``--name value``, values JSON-decoded."""
    args: list[str] = []
    for key, raw in hyperparameters.items():
        if key.startswith("sagemaker_"):
            continue
        args += [f"--{key}", str(decode_hyperparameter(raw))]
    return args


def install_requirements(code_dir: Path, python: str, log_lines: list[str]) -> None:
    """The container's start-up ``pip install -r requirements.txt``, offline as in the lab's isolated
    subnets: it passes only when every package is already installed (the image has them)."""
    result = subprocess.run([python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "-q",
                             "-r", "requirements.txt"], cwd=code_dir, capture_output=True, text=True)
    log_lines.append(result.stdout + result.stderr)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise JobFailed(f"AlgorithmError: installing requirements.txt failed without internet access ({last})")


def scrape_metrics(definitions: list[dict[str, str]], log_lines: list[str]) -> dict[str, float]:
    """What SageMaker does with MetricDefinitions: match each regex against the log and keep, per
    metric, the last value (DescribeTrainingJob's FinalMetricDataList)."""
    import re
    compiled = [(d["Name"], re.compile(d["Regex"])) for d in definitions]
    final: dict[str, float] = {}
    for line in "".join(log_lines).splitlines():
        for name, regex in compiled:
            match = regex.search(line)
            if match:
                try:
                    final[name] = float(match.group(1))
                except (IndexError, ValueError):
                    pass
    return final
