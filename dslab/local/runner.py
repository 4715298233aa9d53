"""The local container runner: runs a CreateTrainingJob request on this machine, the way SageMaker would.

It builds a private ``/opt/ml``-shaped tree (configs, SM_* environment, hyperparameters as strings),
provides the channel per mode — File: objects copied in before the script starts (timed as
Downloading); FastFile: a read-only view; Pipe: FIFOs fed per epoch (RecordIO-wrapped where the
channel says so); FSx/EFS: the file system's directory — runs the script as a subprocess, uploads the
model and output archives, and returns a DescribeTrainingJob-shaped outcome.

Where the objects and file systems come from is a ``Storage``: a folder stand-in here (one folder
per bucket, one per file-system ID); the embedded lab gives it a real S3 endpoint and FUSE mounts.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
import errno
import io
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from ..core.requests import ENTRY_POINT
from ..validation import RequestInvalid, validate_request

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "training"))
from dslab_train.records import recordio_frame  # noqa: E402

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


class StorageError(RuntimeError):
    """The job's data source cannot be provided (a mount failed, a file system is gone)."""


class Storage(Protocol):
    """Where a job's data comes from and its artifacts go."""

    def list_objects(self, bucket: str, prefix: str) -> list[tuple[str, int]]: ...
    def read_object(self, bucket: str, key: str) -> bytes: ...
    def download(self, bucket: str, key: str, target: Path) -> None: ...
    def put_object(self, bucket: str, key: str, data: bytes) -> None: ...
    def fastfile_view(self, bucket: str, prefix: str) -> Path: ...
    def file_system_root(self, file_system_id: str, file_system_type: str) -> Path: ...
    def release(self) -> None: ...


@dataclass
class FolderStorage:
    """The folder stand-in: ``s3_root/<bucket>/<key>`` and ``fs_root/<file-system-id>/...``."""
    s3_root: Path
    fs_root: Path | None = None

    def _bucket(self, bucket: str) -> Path:
        path = self.s3_root / bucket
        if not path.is_dir():
            raise RequestInvalid(f"bucket {bucket!r} does not exist under --s3-root {self.s3_root}")
        return path

    def list_objects(self, bucket: str, prefix: str) -> list[tuple[str, int]]:
        root = self._bucket(bucket)
        out = []
        for path in sorted(root.rglob("*")):
            if path.is_file():
                key = path.relative_to(root).as_posix()
                if key.startswith(prefix):
                    out.append((key, path.stat().st_size))
        return out

    def read_object(self, bucket: str, key: str) -> bytes:
        return (self._bucket(bucket) / key).read_bytes()

    def download(self, bucket: str, key: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._bucket(bucket) / key, target)

    def put_object(self, bucket: str, key: str, data: bytes) -> None:
        path = self.s3_root / bucket / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def fastfile_view(self, bucket: str, prefix: str) -> Path:
        return self._bucket(bucket) / prefix

    def file_system_root(self, file_system_id: str, file_system_type: str) -> Path:
        if self.fs_root is None:
            raise RequestInvalid(f"{file_system_type} file system {file_system_id}: no --fs-root was given")
        root = self.fs_root / file_system_id
        if not root.is_dir():
            raise RequestInvalid(f"{file_system_type} file system {file_system_id} does not exist under --fs-root {self.fs_root}")
        return root

    def release(self) -> None:
        pass


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


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


PIPE_PREFETCH = 8                    # GETs in flight at once
PIPE_READ_AHEAD_BYTES = 64 * 1024 * 1024  # fetched and held ahead of the reader (128 small objects at most)
PIPE_READ_AHEAD_MAX = 128


class ReadAhead:
    """An epoch's objects in order, fetched PIPE_PREFETCH at a time and held up to PIPE_READ_AHEAD_BYTES
    ahead of the reader. It starts fetching when made, before the script opens the FIFO: SageMaker's
    Pipe mode streams from S3 as the job starts, so the script's own start-up overlaps the first GETs."""

    def __init__(self, pool: ThreadPoolExecutor, objects: list[tuple[str, str]], read: Callable[[str, str], bytes],
                 halt: threading.Event):
        self.pool, self.objects, self.read, self.halt = pool, iter(objects), read, halt
        self.pending: deque = deque()
        self.depth = PIPE_PREFETCH  # until the first object's size is known
        self._fill()

    def _fill(self) -> None:
        while len(self.pending) < self.depth:
            following = next(self.objects, None)
            if following is None:
                return
            self.pending.append(self.pool.submit(self.read, *following))

    def __iter__(self):
        while True:
            self._fill()
            if not self.pending or self.halt.is_set():
                return
            data = self.pending.popleft().result()
            # Small objects (JPEGs) many ahead; large ones (TFRecord shards) two, which bounds the memory held.
            self.depth = max(2, min(PIPE_READ_AHEAD_MAX, PIPE_READ_AHEAD_BYTES // max(1, len(data))))
            yield data


class PipeFeeder(threading.Thread):
    """Feeds ``<channel>_<epoch>`` FIFOs, one per epoch, each read once to EOF, as SageMaker does."""

    def __init__(self, fifo_dir: Path, channel: str, objects: list[tuple[str, str]], read: Callable[[str, str], bytes],
                 wrapper: str, seed: int | None, alive: Callable[[], bool]):
        super().__init__(daemon=True, name=f"pipe-{channel}")
        self.fifo_dir, self.channel, self.objects, self.read = fifo_dir, channel, objects, read
        self.wrapper, self.seed, self.alive = wrapper, seed, alive
        self.epochs_fed = 0
        self.bytes_fed = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        try:
            epoch = 0
            with ThreadPoolExecutor(PIPE_PREFETCH, thread_name_prefix=f"pipe-{self.channel}-get") as pool:
                while not self._halt.is_set():
                    path = self.fifo_dir / f"{self.channel}_{epoch}"
                    os.mkfifo(path)
                    order = list(self.objects)
                    if self.seed is not None:
                        random.Random(self.seed + epoch).shuffle(order)
                    ahead = ReadAhead(pool, order, self.read, self._halt)  # fetching starts now
                    fd = self._open_when_read(path)
                    if fd is None:
                        return
                    try:
                        with os.fdopen(fd, "wb", buffering=1024 * 1024) as pipe:
                            for data in ahead:
                                chunk = recordio_frame(data) if self.wrapper == "RecordIO" else data
                                pipe.write(chunk)
                                pipe.flush()  # the reader gets each object as soon as it is fetched
                                self.bytes_fed += len(chunk)
                    except BrokenPipeError:
                        pass  # the script stopped reading this epoch early (max_samples): fine
                    self.epochs_fed += 1
                    epoch += 1
        except BaseException as err:
            self.error = err

    def _open_when_read(self, path: Path) -> int | None:
        while not self._halt.is_set() and self.alive():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as err:
                if err.errno == errno.ENXIO:  # no reader yet
                    time.sleep(0.005)
                    continue
                raise
            os.set_blocking(fd, True)
            return fd
        return None


def _tar_gz(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            tar.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)
    return buffer.getvalue()


def _extract_code(storage: Storage, uri: str, target: Path, code_dir: Path | None) -> None:
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


def _decode(value: str) -> Any:
    try:
        return json.loads(value)
    except (TypeError, json.JSONDecodeError):
        return value


def run_training_job(request: dict[str, Any], storage: Storage, workdir: Path, *, code_dir: Path | None = None,
                     python: str = sys.executable, cpus: int | None = None, simulate: str | None = None,
                     on_phase: Callable[[str], None] | None = None) -> JobOutcome:
    """Run one training job locally and return its outcome (never raises for a job failure).

    ``simulate="capacity"`` makes the job fail the way SageMaker reports missing capacity, so the
    workflow's capacity retry can be exercised without AWS.
    """
    check_request(request)
    name = request["TrainingJobName"]
    region = _decode(request.get("HyperParameters", {}).get("sagemaker_region", '"us-east-1"')) or "us-east-1"
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
            raise _JobFailed(CAPACITY_ERROR)
        config_dir = base / "input" / "config"
        data_dir = base / "input" / "data"
        for d in (config_dir, data_dir, base / "model", base / "output" / "data", base / "code"):
            d.mkdir(parents=True)
        hps = dict(request.get("HyperParameters") or {})
        (config_dir / "hyperparameters.json").write_text(json.dumps(hps))
        channels = request["InputDataConfig"]
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
        _extract_code(storage, _decode(hps.get("sagemaker_submit_directory", '""')), base / "code", code_dir)
        program = _decode(hps.get("sagemaker_program", json.dumps(ENTRY_POINT)))
        if not (base / "code" / program).exists():
            raise _JobFailed(f"AlgorithmError: the training code has no entry point {program}")

        training_start = _now()
        pipes: list[tuple[str, list[tuple[str, str]], str, int | None]] = []
        downloaded = False
        for channel in channels:
            mode = channel.get("InputMode", default_mode)
            target = data_dir / channel["ChannelName"]
            source = channel["DataSource"]
            if "S3DataSource" in source:
                objects = _channel_objects(storage, source["S3DataSource"])
                if not objects:
                    raise _JobFailed(f"ClientError: No S3 objects found under S3 URL \"{source['S3DataSource']['S3Uri']}\" "
                                     f"given in input data source. Please ensure that the bucket exists in the selected region "
                                     f"(us-east-1), that objects exist under that S3 prefix, and that the role has access.")
                if mode == "File":
                    if not downloaded:
                        enter("Downloading", "Downloading input data")
                        downloaded = True
                    prefix = _common_prefix(source["S3DataSource"])
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
                    raise _JobFailed(f"ClientError: the DirectoryPath {fs['DirectoryPath']} does not exist on "
                                     f"{fs['FileSystemType']} file system {fs['FileSystemId']}")
                os.symlink(path, target, target_is_directory=True)

        enter("Training", "Training image download completed. Training in progress.")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_"))},
               "SAGEMAKER_BASE_DIR": str(base), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
               "SM_CURRENT_HOST": "algo-1", "SM_NUM_CPUS": str(cpus or os.cpu_count() or 1), "SM_NUM_GPUS": "0",
               "SM_MODEL_DIR": str(base / "model"), "SM_OUTPUT_DATA_DIR": str(base / "output" / "data"),
               "SM_OUTPUT_DIR": str(base / "output"), "SM_INPUT_DIR": str(base / "input"),
               "SM_INPUT_CONFIG_DIR": str(config_dir), "SM_HPS": json.dumps({k: _decode(v) for k, v in hps.items()}),
               "SM_TRAINING_ENV": json.dumps({"job_name": name}),
               "SM_CHANNELS": json.dumps([c["ChannelName"] for c in channels]), "TRAINING_JOB_NAME": name}
        for channel in channels:
            env[f"SM_CHANNEL_{channel['ChannelName'].upper()}"] = str(data_dir / channel["ChannelName"])
        env["SM_INPUT_DATA_CONFIG"] = (config_dir / "inputdataconfig.json").read_text()
        env["SM_USER_ARGS"] = json.dumps(script_arguments(hps))
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
                raise _JobFailed(f"InternalServerError: feeding Pipe input failed: {feeder.error}")
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
            raise _JobFailed(f"AlgorithmError: {reason}, exit code: {proc.returncode}")

        enter("Uploading", "Uploading generated training model")
        output = request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        bucket, prefix = split_s3_uri(output)
        for archive, directory in (("model.tar.gz", base / "model"), ("output.tar.gz", base / "output" / "data")):
            key = f"{prefix}/{name}/output/{archive}".lstrip("/")
            storage.put_object(bucket, key, _tar_gz(directory))
            artifacts[archive] = f"s3://{bucket}/{key}"
    except _JobFailed as err:
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
        "InputDataConfig": request["InputDataConfig"], "OutputDataConfig": request["OutputDataConfig"],
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


class _JobFailed(Exception):
    pass


def script_arguments(hyperparameters: dict[str, str]) -> list[str]:
    """The entry point's command line, as SageMaker's framework containers build it: every
    hyperparameter but the ``sagemaker_*`` ones as ``--name value``, values JSON-decoded."""
    args: list[str] = []
    for key, raw in hyperparameters.items():
        if key.startswith("sagemaker_"):
            continue
        args += [f"--{key}", str(_decode(raw))]
    return args


def install_requirements(code_dir: Path, python: str, log_lines: list[str]) -> None:
    """The container's start-up ``pip install -r requirements.txt``, offline as in the lab's isolated
    subnets: it passes only when every package is already installed (the image has them)."""
    result = subprocess.run([python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "-q",
                             "-r", "requirements.txt"], cwd=code_dir, capture_output=True, text=True)
    log_lines.append(result.stdout + result.stderr)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise _JobFailed(f"AlgorithmError: installing requirements.txt failed without internet access ({last})")


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


def _common_prefix(s3: dict[str, Any]) -> str:
    bucket, prefix = split_s3_uri(s3["S3Uri"])
    return prefix if s3["S3DataType"] == "S3Prefix" else ""


def _channel_objects(storage: Storage, s3: dict[str, Any]) -> list[tuple[str, str]]:
    bucket, prefix = split_s3_uri(s3["S3Uri"])
    if s3["S3DataType"] == "S3Prefix":
        return [(bucket, key) for key, _ in storage.list_objects(bucket, prefix) if not key.endswith("/")]
    manifest = json.loads(storage.read_object(bucket, prefix))
    if not manifest or "prefix" not in manifest[0]:
        raise _JobFailed(f"ClientError: {s3['S3Uri']} is not a manifest file ([{{\"prefix\": ...}}, key, ...])")
    base_bucket, base_prefix = split_s3_uri(manifest[0]["prefix"])
    return [(base_bucket, base_prefix + key) for key in manifest[1:]]


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

