"""A user's own training code: checked, packaged byte-reproducibly and uploaded before a run.

The experiment names a local ``script.source_dir``; the workflow (in AWS) can only read S3, so the
CLI (`dslab plan`, `dslab run`, `dslab local`) packages the folder the same way as the lab's own
code (dslab/inputs/packaging.py), adds the dependency-free ``dslab_report.py`` helper unless the folder has
one, uploads it content-addressed (``code/user/<sha256>/sourcedir.tar.gz``: the same code is
uploaded once, and the key names exactly what ran) and writes that URI into the experiment as run.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.experiment import Experiment, parse_experiment
from ..core.requests import CODE_PREFIX
from .packaging import build_sourcedir

REPO = Path(__file__).resolve().parents[2]
HELPER = REPO / "training" / "dslab_report.py"
USER_CODE_PREFIX = f"{CODE_PREFIX}/user"

# Training jobs run in isolated subnets with no route to PyPI: SageMaker's framework containers
# `pip install -r requirements.txt` at start-up and would hang there until pip gives up. Refused at
# plan time unless the experiment declares the packages are already in the image.
REQUIREMENTS_HELP = ("the lab's training subnets have no internet, so the container's pip install at start-up would "
                     "hang or fail: use an image that has the packages (image_uri), or vendor wheels into source_dir "
                     "and install them from your script; if the image already has every package listed, set "
                     "script.packages_in_image: true")


@dataclass(frozen=True)
class PackagedCode:
    trial: str
    folder: Path
    tarball: Path
    sha256: str

    def key(self) -> str:
        return f"{USER_CODE_PREFIX}/{self.sha256[:32]}/sourcedir.tar.gz"


def _field(experiment: Experiment, index: int, key: str) -> str:
    return f"trials[{index}].script.{key}" if len(experiment.trials) > 1 else f"script.{key}"


def check_folder(experiment: Experiment, index: int, base_dir: Path) -> Path:
    """The trial's source_dir as a folder with its entry point and no requirements.txt to install."""
    script = experiment.trials[index].script
    folder = Path(script.source_dir).expanduser()
    if not folder.is_absolute():
        folder = (base_dir / folder).resolve()
    if not folder.is_dir():
        raise ConfigError(_field(experiment, index, "source_dir"), f"{folder} is not a folder",
                          "a path to your training code, relative to the experiment file")
    if not (folder / script.entry_point).is_file():
        raise ConfigError(_field(experiment, index, "entry_point"),
                          f"{script.entry_point} is not a file in {folder}")
    requirements = folder / "requirements.txt"
    if requirements.exists() and not script.packages_in_image:
        raise ConfigError(_field(experiment, index, "source_dir"), f"{requirements} would be installed when the job starts; "
                          + REQUIREMENTS_HELP)
    return folder


def package(experiment: Experiment, base_dir: Path, build_dir: Path) -> list[PackagedCode]:
    """Every trial's user code, checked and packaged (nothing is uploaded)."""
    out: list[PackagedCode] = []
    for index, trial in enumerate(experiment.trials):
        if trial.script is None or trial.script.source_dir is None:
            continue
        folder = check_folder(experiment, index, base_dir)
        tarball, digest = build_sourcedir(folder, build_dir, extra_files={HELPER.name: HELPER})
        out.append(PackagedCode(trial.name, folder, tarball, digest))
    return out


def with_code_uris(experiment: Experiment, bucket: str, packaged: list[PackagedCode]) -> Experiment:
    """The experiment as run: each packaged trial's script.code_uri set to where its code is uploaded."""
    if not packaged:
        return experiment
    document: dict[str, Any] = copy.deepcopy(experiment.document)
    by_trial = {p.trial: p for p in packaged}
    for trial in document["trials"]:
        code = by_trial.get(trial["name"])
        if code is not None:
            trial["script"]["code_uri"] = f"s3://{bucket}/{code.key()}"
    return parse_experiment(document)


def upload(packaged: list[PackagedCode], bucket: str, s3_client) -> None:
    """Upload each tarball unless that exact content is already there (the key is its hash)."""
    from botocore.exceptions import ClientError
    for code in packaged:
        try:
            s3_client.head_object(Bucket=bucket, Key=code.key())
            continue
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                raise
        s3_client.upload_file(str(code.tarball), bucket, code.key())


def prepare(experiment: Experiment, experiment_path: Path | None, bucket: str, build_dir: Path,
            s3_client=None) -> Experiment:
    """Check and package the user's code, upload it when a client is given, and return the experiment
    as it will run (with code URIs). An experiment without a user script is returned unchanged."""
    base_dir = experiment_path.resolve().parent if experiment_path else Path.cwd()
    packaged = package(experiment, base_dir, build_dir)
    if s3_client is not None:
        upload(packaged, bucket, s3_client)
    return with_code_uris(experiment, bucket, packaged)
