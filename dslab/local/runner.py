"""The local container runner: runs a CreateTrainingJob request on this machine, the way SageMaker would.

It builds a private ``/opt/ml``-shaped tree (configs, SM_* environment, hyperparameters as strings),
provides the channel per mode — File: objects copied in before the script starts (timed as
Downloading); FastFile: a read-only view; Pipe: FIFOs fed per epoch (RecordIO-wrapped where the
channel says so); FSx/EFS: the file system's directory — runs the script as a subprocess, uploads the
model and output archives, and returns a DescribeTrainingJob-shaped outcome.

Where the objects and file systems come from is a ``Storage``: a folder stand-in here (one folder
per bucket, one per file-system ID); the embedded lab gives it a real S3 endpoint and FUSE mounts."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..aws.validation import RequestInvalid, validate_request
from ..core.requests import DATASET_URI_HYPERPARAMETER, ENTRY_POINT
from .channels import PipeFeeder, channel_objects, common_prefix
from .container import (
    JobFailed,
    decode_hyperparameter,
    extract_code,
    install_requirements,
    scrape_metrics,
    script_arguments,
    tar_gz,
)
from .job_storage import DROPPED_AWS_VARIABLES, FolderStorage, Storage, StorageError, split_s3_uri

# Script processes running now, so an interrupted lab can stop them all.
RUNNING: set[subprocess.Popen] = set()


_RUNNING_LOCK = threading.Lock()


def kill_running() -> int:
    with _RUNNING_LOCK:
        procs = list(RUNNING)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(procs)


DOWNLOAD_THREADS = 8


CAPACITY_ERROR = "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass
class Phase:
    status: str
    start: dt.datetime
    end: dt.datetime | None = None
    message: str = ""

    def to_api(self) -> dict[str, Any]:
        out = {"Status": self.status, "StartTime": self.start.isoformat(), "StatusMessage": self.message}
        if self.end is not None:
            out["EndTime"] = self.end.isoformat()
        return out


@dataclass
class JobOutcome:
    describe: dict[str, Any]
    metrics: dict[str, Any] | None
    log: str
    artifacts: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return self.describe["TrainingJobStatus"]


def check_request(request: dict[str, Any]) -> None:
    """What SageMaker would refuse: the service model (enums included) plus its cross-field rules."""
    validate_request("sagemaker", "CreateTrainingJob", request)
    channels = request.get("InputDataConfig") or []
    names = [c["ChannelName"] for c in channels]
    if len(set(names)) != len(names):
        raise RequestInvalid("InputDataConfig: channel names must be unique")
    for i, channel in enumerate(channels):
        mode = channel.get("InputMode") or request["AlgorithmSpecification"].get("TrainingInputMode", "File")
        source = channel["DataSource"]
        where = f"InputDataConfig[{i}]"
        if "FileSystemDataSource" in source:
            fs = source["FileSystemDataSource"]
            if mode == "Pipe" and fs["FileSystemType"] == "EFS":
                raise RequestInvalid(f"{where}: Pipe input mode is not supported with an EFS file system")
            if mode != "File":
                raise RequestInvalid(f"{where}: a {fs['FileSystemType']} channel is mounted; use InputMode File")
            if not request.get("VpcConfig"):
                raise RequestInvalid(f"{where}: a {fs['FileSystemType']} channel needs VpcConfig (subnets and security groups)")
        elif "S3DataSource" in source:
            s3 = source["S3DataSource"]
            if mode == "FastFile" and s3["S3DataType"] != "S3Prefix":
                raise RequestInvalid(f"{where}: FastFile input mode supports only S3DataType S3Prefix")
            if channel.get("RecordWrapperType") == "RecordIO" and mode != "Pipe":
                raise RequestInvalid(f"{where}: RecordWrapperType RecordIO applies to Pipe input mode only")
        else:
            raise RequestInvalid(f"{where}: DataSource needs S3DataSource or FileSystemDataSource")




def run_training_job(request: dict[str, Any], storage: Storage, workdir: Path, *, code_dir: Path | None = None,
                     python: str = sys.executable, cpus: int | None = None, simulate: str | None = None,
                     on_phase: Callable[[str], None] | None = None) -> JobOutcome:
    """Run one training job locally and return its outcome (never raises for a job failure).

    ``simulate="capacity"`` makes the job fail the way SageMaker reports missing capacity, so the
    workflow's capacity retry can be exercised without AWS.
    """
    check_request(request)
    name = request["TrainingJobName"]
    region = decode_hyperparameter(request.get("HyperParameters", {}).get("sagemaker_region", '"us-east-1"')) or "us-east-1"
    arn = f"arn:aws:sagemaker:{region}:123456789012:training-job/{name.lower()}"
    created = _now()
    phases: list[Phase] = []
    log_lines: list[str] = []

    def enter(status: str, message: str) -> None:
        now = _now()
        if phases and phases[-1].end is None:
            phases[-1].end = now
        phases.append(Phase(status, now, None, message))
        if on_phase:
            on_phase(status)

    base = workdir / "opt_ml"
    if base.exists():
        shutil.rmtree(base)
    status, failure, secondary = "Completed", None, "Completed"
    metrics = None
    artifacts: dict[str, str] = {}
    feeder: PipeFeeder | None = None
    training_start = None
    enter("Starting", "Preparing the instances for training")
    try:
        if simulate == "capacity":
            time.sleep(0.05)
            raise JobFailed(CAPACITY_ERROR)
        config_dir = base / "input" / "config"
        data_dir = base / "input" / "data"
        for d in (config_dir, data_dir, base / "model", base / "output" / "data", base / "code"):
            d.mkdir(parents=True)
        hps = dict(request.get("HyperParameters") or {})
        (config_dir / "hyperparameters.json").write_text(json.dumps(hps))
        channels = request.get("InputDataConfig") or []
        default_mode = request["AlgorithmSpecification"].get("TrainingInputMode", "File")
        count = request["ResourceConfig"]["InstanceCount"]
        (config_dir / "resourceconfig.json").write_text(json.dumps(
            {"current_host": "algo-1", "hosts": [f"algo-{i + 1}" for i in range(count)], "network_interface_name": "eth0"}))
        (config_dir / "inputdataconfig.json").write_text(json.dumps({
            c["ChannelName"]: {
                # FastFile is written as File in the container's config, as SageMaker does.
                "TrainingInputMode": "File" if c.get("InputMode", default_mode) == "FastFile" else c.get("InputMode", default_mode),
                "S3DistributionType": c["DataSource"].get("S3DataSource", {}).get("S3DataDistributionType", "FullyReplicated"),
                "RecordWrapperType": c.get("RecordWrapperType", "None"),
                **({"ContentType": c["ContentType"]} if c.get("ContentType") else {}),
            } for c in channels}))
        extract_code(storage, decode_hyperparameter(hps.get("sagemaker_submit_directory", '""')), base / "code", code_dir)
        program = decode_hyperparameter(hps.get("sagemaker_program", json.dumps(ENTRY_POINT)))
        if not (base / "code" / program).exists():
            raise JobFailed(f"AlgorithmError: the training code has no entry point {program}")

        training_start = _now()
        pipes: list[tuple[str, list[tuple[str, str]], str, int | None]] = []
        downloaded = False
        for channel in channels:
            mode = channel.get("InputMode", default_mode)
            target = data_dir / channel["ChannelName"]
            source = channel["DataSource"]
            if "S3DataSource" in source:
                objects = channel_objects(storage, source["S3DataSource"])
                if not objects:
                    raise JobFailed(f"ClientError: No S3 objects found under S3 URL \"{source['S3DataSource']['S3Uri']}\" "
                                     f"given in input data source. Please ensure that the bucket exists in the selected region "
                                     f"(us-east-1), that objects exist under that S3 prefix, and that the role has access.")
                if mode == "File":
                    if not downloaded:
                        enter("Downloading", "Downloading input data")
                        downloaded = True
                    prefix = common_prefix(source["S3DataSource"])
                    # SageMaker copies a File channel with parallel downloads.
                    with ThreadPoolExecutor(DOWNLOAD_THREADS) as pool:
                        list(pool.map(lambda obj: storage.download(obj[0], obj[1], target / obj[1][len(prefix):].lstrip("/")),
                                      objects))
                elif mode == "FastFile":
                    bucket, prefix = split_s3_uri(source["S3DataSource"]["S3Uri"])
                    os.symlink(storage.fastfile_view(bucket, prefix), target, target_is_directory=True)
                else:
                    seed = channel.get("ShuffleConfig", {}).get("Seed")
                    pipes.append((channel["ChannelName"], objects, channel.get("RecordWrapperType", "None"), seed))
            else:
                fs = source["FileSystemDataSource"]
                root = storage.file_system_root(fs["FileSystemId"], fs["FileSystemType"])
                parts = [p for p in fs["DirectoryPath"].split("/") if p]
                if fs["FileSystemType"] == "FSxLustre":
                    parts = parts[1:]  # "/<mount name>/<path>": the mount name is the file system's root
                path = root.joinpath(*parts)
                if not path.is_dir():
                    raise JobFailed(f"ClientError: the DirectoryPath {fs['DirectoryPath']} does not exist on "
                                     f"{fs['FileSystemType']} file system {fs['FileSystemId']}")
                os.symlink(path, target, target_is_directory=True)

        enter("Training", "Training image download completed. Training in progress.")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_"))},
               "SAGEMAKER_BASE_DIR": str(base), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
               "SM_CURRENT_HOST": "algo-1", "SM_NUM_CPUS": str(cpus or os.cpu_count() or 1), "SM_NUM_GPUS": "0",
               "SM_MODEL_DIR": str(base / "model"), "SM_OUTPUT_DATA_DIR": str(base / "output" / "data"),
               "SM_OUTPUT_DIR": str(base / "output"), "SM_INPUT_DIR": str(base / "input"),
               "SM_INPUT_CONFIG_DIR": str(config_dir), "SM_HPS": json.dumps({k: decode_hyperparameter(v) for k, v in hps.items()}),
               "SM_TRAINING_ENV": json.dumps({"job_name": name}),
               "SM_CHANNELS": json.dumps([c["ChannelName"] for c in channels]), "TRAINING_JOB_NAME": name}
        for channel in channels:
            env[f"SM_CHANNEL_{channel['ChannelName'].upper()}"] = str(data_dir / channel["ChannelName"])
        env["SM_INPUT_DATA_CONFIG"] = (config_dir / "inputdataconfig.json").read_text()
        env["SM_USER_ARGS"] = json.dumps(script_arguments(hps))
        # S3 for the script itself, as the job's role gives it on SageMaker: the stand-in's endpoint and
        # keys (a Script job, which has no channel, reads its dataset_uri there).
        dataset_uri = decode_hyperparameter(hps.get(DATASET_URI_HYPERPARAMETER, '""')) if not channels else ""
        for key in DROPPED_AWS_VARIABLES:
            env.pop(key, None)
        env.update(storage.s3_environment([dataset_uri] if isinstance(dataset_uri, str) and dataset_uri else []))
        if (base / "code" / "requirements.txt").exists():
            install_requirements(base / "code", python, log_lines)
        command = ["/bin/sh" if program.endswith(".sh") else python, program, *script_arguments(hps)]
        proc = subprocess.Popen(command, cwd=base / "code", env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        with _RUNNING_LOCK:
            RUNNING.add(proc)
        feeders = [PipeFeeder(data_dir, ch, objs, storage.read_object, wrapper, seed, lambda: proc.poll() is None)
                   for ch, objs, wrapper, seed in pipes]
        for feeder in feeders:
            feeder.start()
        deadline = time.monotonic() + request["StoppingCondition"]["MaxRuntimeInSeconds"]
        reader = threading.Thread(target=lambda: log_lines.extend(proc.stdout), daemon=True)
        reader.start()
        timed_out = False
        while proc.poll() is None:
            if time.monotonic() > deadline:
                timed_out = True
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
        proc.wait()
        with _RUNNING_LOCK:
            RUNNING.discard(proc)
        reader.join(5)
        for feeder in feeders:
            feeder.stop()
            feeder.join(5)
            if feeder.error is not None:
                raise JobFailed(f"InternalServerError: feeding Pipe input failed: {feeder.error}")
        metrics_file = base / "output" / "data" / "metrics.json"
        if metrics_file.exists():
            try:
                metrics = json.loads(metrics_file.read_text())
            except json.JSONDecodeError:
                metrics = None  # a user's file of that name that is not the lab's: the log's metric lines still count
        if timed_out:
            status, secondary = "Stopped", "MaxRuntimeExceeded"
            failure = f"Training job reached MaxRuntimeInSeconds ({request['StoppingCondition']['MaxRuntimeInSeconds']} s)"
        elif proc.returncode != 0:
            failure_file = base / "output" / "failure"
            reason = failure_file.read_text().strip() if failure_file.exists() else "".join(log_lines[-5:]).strip()
            raise JobFailed(f"AlgorithmError: {reason}, exit code: {proc.returncode}")

        enter("Uploading", "Uploading generated training model")
        output = request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        bucket, prefix = split_s3_uri(output)
        for archive, directory in (("model.tar.gz", base / "model"), ("output.tar.gz", base / "output" / "data")):
            key = f"{prefix}/{name}/output/{archive}".lstrip("/")
            storage.put_object(bucket, key, tar_gz(directory))
            artifacts[archive] = f"s3://{bucket}/{key}"
    except JobFailed as err:
        status, secondary, failure = "Failed", "Failed", str(err)
    except StorageError as err:
        status, secondary, failure = "Failed", "Failed", f"ClientError: {err}"
    except RequestInvalid:
        raise
    finally:
        storage.release()

    end = _now()
    enter(secondary, {"Completed": "Training job completed", "Failed": f"Training job failed. Reason: {failure}",
                      "MaxRuntimeExceeded": "Training job stopped: MaxRuntimeInSeconds reached"}.get(secondary, secondary))
    phases[-1].end = end
    start = training_start or end
    seconds = max(1, math.ceil((end - start).total_seconds())) if training_start else 0
    count = request["ResourceConfig"]["InstanceCount"]
    describe: dict[str, Any] = {
        "TrainingJobName": name, "TrainingJobArn": arn, "TrainingJobStatus": status, "SecondaryStatus": secondary,
        "HyperParameters": request.get("HyperParameters", {}),
        "AlgorithmSpecification": request["AlgorithmSpecification"], "RoleArn": request.get("RoleArn"),
        **({"InputDataConfig": request["InputDataConfig"]} if request.get("InputDataConfig") else {}),
        "OutputDataConfig": request["OutputDataConfig"],
        "ResourceConfig": request["ResourceConfig"], "StoppingCondition": request["StoppingCondition"],
        "CreationTime": created.isoformat(), "LastModifiedTime": end.isoformat(),
        "SecondaryStatusTransitions": [p.to_api() for p in phases],
        "EnableManagedSpotTraining": bool(request.get("EnableManagedSpotTraining")),
    }
    if request.get("VpcConfig"):
        describe["VpcConfig"] = request["VpcConfig"]
    if training_start:
        describe.update(TrainingStartTime=start.isoformat(), TrainingEndTime=end.isoformat(),
                        TrainingTimeInSeconds=seconds, BillableTimeInSeconds=seconds * count)
    if failure:
        describe["FailureReason"] = failure
    if "model.tar.gz" in artifacts:
        describe["ModelArtifacts"] = {"S3ModelArtifacts": artifacts["model.tar.gz"]}
    final = scrape_metrics(request["AlgorithmSpecification"].get("MetricDefinitions") or [], log_lines)
    if final:
        describe["FinalMetricDataList"] = [{"MetricName": key, "Value": value, "Timestamp": end.isoformat()}
                                           for key, value in final.items()]
    return JobOutcome(describe=describe, metrics=metrics, log="".join(log_lines), artifacts=artifacts)



def write_outcome(outcome: JobOutcome, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "describe.json").write_text(json.dumps(outcome.describe, indent=2))
    if outcome.metrics is not None:
        (out / "metrics.json").write_text(json.dumps(outcome.metrics, indent=2))
    (out / "job.log").write_text(outcome.log)


def run_request_file(request_path: Path, s3_root: Path, fs_root: Path | None, out: Path,
                     code_dir: Path | None = None) -> JobOutcome:
    try:
        request = json.loads(request_path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RequestInvalid(f"--request {request_path}: {err}") from None
    storage = FolderStorage(s3_root, fs_root)
    with tempfile.TemporaryDirectory(prefix="dslab-job-") as work:
        outcome = run_training_job(request, storage, Path(work), code_dir=code_dir)
        write_outcome(outcome, out)
        for archive, uri in outcome.artifacts.items():
            bucket, key = split_s3_uri(uri)
            shutil.copyfile(s3_root / bucket / key, out / archive)
    return outcome
