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
    return tar_gz_tree({path.relative_to(directory).as_posix(): path for path in directory.rglob("*")})


def tar_gz_tree(tree: dict[str, Path]) -> bytes:
    """An archive of ``tree`` (name in the archive -> the file or folder on disk), in name order."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in sorted(tree):
            tar.add(tree[name], arcname=name, recursive=False)
    return buffer.getvalue()


def merge_host_folders(folders: dict[str, Path]) -> tuple[dict[str, Path], list[str]]:
    """Every host's folder as one tree, the way SageMaker aggregates /opt/ml/model and /opt/ml/output/data:
    "If multiple containers in a single training job write to this directory they should ensure no
    file/directory names clash. SageMaker AI aggregates the result in a TAR file" (Developer Guide, How
    Amazon SageMaker AI Processes Training Output). Folders of the same name merge. A name two hosts
    both wrote as files is the clash the guide warns of; what SageMaker then keeps is not documented, so
    the stand-in keeps the first host's (``folders`` in host order) and returns a line naming the path
    and the hosts, for the job's log. Returns (name -> path kept, clash lines)."""
    tree: dict[str, tuple[str, Path]] = {}
    clashes: dict[str, list[str]] = {}
    for host, folder in folders.items():
        lost: list[str] = []   # this host's names that lost a clash: nothing beneath them is kept
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            name = path.relative_to(folder).as_posix()
            if any(name.startswith(f"{gone}/") for gone in lost):
                continue
            kept = tree.get(name)
            if kept is None:
                tree[name] = (host, path)
            elif not (kept[1].is_dir() and path.is_dir()):
                clashes.setdefault(name, [kept[0]]).append(host)
                lost.append(name)
    lines = [f"{name} was written by {' and '.join(hosts)}: SageMaker asks that hosts' names not clash and documents "
             f"no order for merging them; the stand-in kept {hosts[0]}'s" for name, hosts in sorted(clashes.items())]
    return {name: path for name, (_, path) in tree.items()}, lines


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
        # The job fails, as SageMaker's does when its container finds no code there (the request itself was valid).
        raise JobFailed(f"ClientError: training code {uri} not found: upload sourcedir.tar.gz there (or pass --code "
                        "DIR)") from None
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
                             "-r", "requirements.txt"], cwd=code_dir, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL)
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
