"""The local container runner: runs a CreateTrainingJob request on this machine, the way SageMaker would.

It builds a private ``/opt/ml``-shaped tree (configs, SM_* environment, hyperparameters as strings),
provides the channel per mode — File: objects copied in before the script starts (timed as
Downloading); FastFile: a read-only view; Pipe: FIFOs fed per epoch (RecordIO-wrapped where the
channel says so); FSx/EFS: the file system's directory — runs the script as a subprocess (one per
host), uploads the model and output archives (every host's folders merged into one each, a name two
hosts wrote logged as a warning), and returns a DescribeTrainingJob-shaped outcome.

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
from typing import Any, Callable, Iterable

from ..aws.validation import RequestInvalid, validate_request
from ..core.job_metrics import is_metrics_file, job_metrics
from ..core.requests import DATASET_URI_HYPERPARAMETER, ENTRY_POINT
from botocore.exceptions import ClientError

from .channels import PipeFeeder, channel_objects, common_prefix
from .checkpoint_sync import CheckpointSync
from .container import (
    JobFailed,
    decode_hyperparameter,
    extract_code,
    install_requirements,
    merge_host_folders,
    scrape_metrics,
    script_arguments,
    tar_gz_tree,
)
from .job_storage import DROPPED_AWS_VARIABLES, FolderStorage, Storage, StorageError, split_s3_uri

# Script processes running now, so an interrupted lab can stop them all.
RUNNING: set[subprocess.Popen] = set()


_RUNNING_LOCK = threading.Lock()


def stop_hosts(procs: Iterable[subprocess.Popen]) -> None:
    """SIGTERM to each script still running (its whole process group), then SIGKILL to one still there 10 s later."""
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


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
    warnings: list[str] = field(default_factory=list)   # what SageMaker would not say, but a user should know

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
    # The lab's script writes a checkpoint trial's checkpoints into the channel its checkpoint_channel hyperparameter
    # names: "A directory can be mounted either in ro (read-only) or in rw (read-write) mode" (FileSystemDataSource,
    # SageMaker API reference), and a read-only one fails the job's first write: refused before anything starts.
    named = decode_hyperparameter((request.get("HyperParameters") or {}).get("checkpoint_channel", "null"))
    if named:
        channel = next((c for c in channels if c["ChannelName"] == named), None)
        fs = (channel or {}).get("DataSource", {}).get("FileSystemDataSource")
        if fs is None:
            raise RequestInvalid(f"HyperParameters.checkpoint_channel: {named!r} names no file-system channel of the job")
        if fs.get("FileSystemAccessMode") != "rw":
            raise RequestInvalid(f"HyperParameters.checkpoint_channel: channel {named!r} is mounted "
                                 f"{fs.get('FileSystemAccessMode')!r} (read-only); checkpoints need FileSystemAccessMode rw")




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

    count = request["ResourceConfig"]["InstanceCount"]
    hosts = [f"algo-{i + 1}" for i in range(count)]
    # One /opt/ml per host, as each instance has its own; the first is the job's (its output is uploaded).
    bases = {host: workdir / ("opt_ml" if count == 1 else f"{host}-opt_ml") for host in hosts}
    for base in bases.values():
        if base.exists():
            shutil.rmtree(base)
    base = bases[hosts[0]]
    status, failure, secondary = "Completed", None, "Completed"
    metrics = None
    artifacts: dict[str, str] = {}
    warnings: list[str] = []
    training_start = None
    sync: CheckpointSync | None = None
    enter("Starting", "Preparing the instances for training")
    try:
        if simulate == "capacity":
            time.sleep(0.05)
            raise JobFailed(CAPACITY_ERROR)
        hps = dict(request.get("HyperParameters") or {})
        channels = request.get("InputDataConfig") or []
        default_mode = request["AlgorithmSpecification"].get("TrainingInputMode", "File")
        input_config = json.dumps({
            c["ChannelName"]: {
                # FastFile is written as File in the container's config, as SageMaker does.
                "TrainingInputMode": "File" if c.get("InputMode", default_mode) == "FastFile" else c.get("InputMode", default_mode),
                "S3DistributionType": c["DataSource"].get("S3DataSource", {}).get("S3DataDistributionType", "FullyReplicated"),
                "RecordWrapperType": c.get("RecordWrapperType", "None"),
                **({"ContentType": c["ContentType"]} if c.get("ContentType") else {}),
            } for c in channels})
        for host, host_base in bases.items():
            config_dir = host_base / "input" / "config"
            for d in (config_dir, host_base / "input" / "data", host_base / "model", host_base / "output" / "data", host_base / "code"):
                d.mkdir(parents=True)
            (config_dir / "hyperparameters.json").write_text(json.dumps(hps))
            (config_dir / "resourceconfig.json").write_text(json.dumps(
                {"current_host": host, "hosts": hosts, "network_interface_name": "eth0"}))
            (config_dir / "inputdataconfig.json").write_text(input_config)
        extract_code(storage, decode_hyperparameter(hps.get("sagemaker_submit_directory", '""')), base / "code", code_dir)
        for host in hosts[1:]:
            shutil.copytree(base / "code", bases[host] / "code", dirs_exist_ok=True)
        program = decode_hyperparameter(hps.get("sagemaker_program", json.dumps(ENTRY_POINT)))
        if not (base / "code" / program).exists():
            raise JobFailed(f"AlgorithmError: the training code has no entry point {program}")

        training_start = _now()
        pipes: list[tuple[str, str, list[tuple[str, str]], str, int | None]] = []   # host, channel, objects, wrapper, seed
        downloads: list[tuple[str, str, Path]] = []
        for channel in channels:
            mode = channel.get("InputMode", default_mode)
            source = channel["DataSource"]
            if "S3DataSource" in source:
                objects = channel_objects(storage, source["S3DataSource"])
                if not objects:
                    raise JobFailed(f"ClientError: No S3 objects found under S3 URL \"{source['S3DataSource']['S3Uri']}\" "
                                     f"given in input data source. Please ensure that the bucket exists in the selected region "
                                     f"(us-east-1), that objects exist under that S3 prefix, and that the role has access.")
                sharded = source["S3DataSource"].get("S3DataDistributionType") == "ShardedByS3Key"
                prefix = common_prefix(source["S3DataSource"])
                for rank, host in enumerate(hosts):
                    # ShardedByS3Key: each instance gets its share of the objects; otherwise all of them.
                    mine = objects[rank::count] if sharded else objects
                    target = bases[host] / "input" / "data" / channel["ChannelName"]
                    if mode == "File":
                        downloads += [(obj[0], obj[1], target / obj[1][len(prefix):].lstrip("/")) for obj in mine]
                    elif mode == "FastFile":
                        bucket, key_prefix = split_s3_uri(source["S3DataSource"]["S3Uri"])
                        view = storage.fastfile_view(bucket, key_prefix)
                        if sharded and count > 1:
                            # The instance's share: its objects, as links into the mounted prefix.
                            target.mkdir(parents=True)
                            for _, key in mine:
                                relative = key[len(key_prefix):].lstrip("/") if key.startswith(key_prefix) else Path(key).name
                                (target / relative).parent.mkdir(parents=True, exist_ok=True)
                                os.symlink(view / relative, target / relative)
                        else:
                            os.symlink(view, target, target_is_directory=True)
                    else:
                        seed = channel.get("ShuffleConfig", {}).get("Seed")
                        pipes.append((host, channel["ChannelName"], mine, channel.get("RecordWrapperType", "None"), seed))
            else:
                fs = source["FileSystemDataSource"]
                root = storage.file_system_root(fs["FileSystemId"], fs["FileSystemType"],
                                                writable=fs.get("FileSystemAccessMode") == "rw")
                parts = [p for p in fs["DirectoryPath"].split("/") if p]
                if fs["FileSystemType"] == "FSxLustre":
                    parts = parts[1:]  # "/<mount name>/<path>": the mount name is the file system's root
                path = root.joinpath(*parts)
                if not path.is_dir():
                    raise JobFailed(f"ClientError: the DirectoryPath {fs['DirectoryPath']} does not exist on "
                                     f"{fs['FileSystemType']} file system {fs['FileSystemId']}")
                for host in hosts:  # every instance mounts the same file system
                    os.symlink(path, bases[host] / "input" / "data" / channel["ChannelName"], target_is_directory=True)
        if downloads:
            enter("Downloading", "Downloading input data")
            # SageMaker copies a File channel with parallel downloads (on every instance at once).
            with ThreadPoolExecutor(DOWNLOAD_THREADS * min(count, 4)) as pool:
                list(pool.map(lambda d: storage.download(*d), downloads))
        if request.get("CheckpointConfig"):
            sync = CheckpointSync(storage, request["CheckpointConfig"], bases, log_lines.append)
            if storage.list_objects(sync.bucket, sync.prefix):
                # Where SageMaker reports this copy (Downloading, or inside Training) is not documented: the runner
                # reports it as Downloading, so that a restore's copy-in is a phase of its own.
                enter("Downloading", "Downloading checkpoints from S3 into the CheckpointConfig LocalPath")
            sync.copy_in()

        enter("Training", "Training image download completed. Training in progress.")
        dataset_uri = decode_hyperparameter(hps.get(DATASET_URI_HYPERPARAMETER, '""')) if not channels else ""
        # What the script reads of S3 itself: a Script job's dataset, a checkpoint writer's S3Uri (it lists it).
        s3_uris = [dataset_uri] if isinstance(dataset_uri, str) and dataset_uri else []
        if request.get("CheckpointConfig") and "checkpoint_s3_uri" in hps:
            s3_uris.append(request["CheckpointConfig"]["S3Uri"])
        s3_env = storage.s3_environment(s3_uris)
        if (base / "code" / "requirements.txt").exists():
            install_requirements(base / "code", python, log_lines)
        procs: dict[str, subprocess.Popen] = {}
        logs: dict[str, list[str]] = {host: (log_lines if host == hosts[0] else []) for host in hosts}
        for host in hosts:
            host_base = bases[host]
            config_dir = host_base / "input" / "config"
            env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_"))},
                   "SAGEMAKER_BASE_DIR": str(host_base), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
                   "SM_CURRENT_HOST": host, "SM_HOSTS": json.dumps(hosts),
                   "SM_NUM_CPUS": str(cpus or os.cpu_count() or 1), "SM_NUM_GPUS": "0",
                   "SM_MODEL_DIR": str(host_base / "model"), "SM_OUTPUT_DATA_DIR": str(host_base / "output" / "data"),
                   "SM_OUTPUT_DIR": str(host_base / "output"), "SM_INPUT_DIR": str(host_base / "input"),
                   "SM_INPUT_CONFIG_DIR": str(config_dir), "SM_HPS": json.dumps({k: decode_hyperparameter(v) for k, v in hps.items()}),
                   "SM_TRAINING_ENV": json.dumps({"job_name": name, "current_host": host, "hosts": hosts}),
                   "SM_CHANNELS": json.dumps([c["ChannelName"] for c in channels]), "TRAINING_JOB_NAME": name}
            for channel in channels:
                env[f"SM_CHANNEL_{channel['ChannelName'].upper()}"] = str(host_base / "input" / "data" / channel["ChannelName"])
            env["SM_INPUT_DATA_CONFIG"] = input_config
            env["SM_USER_ARGS"] = json.dumps(script_arguments(hps))
            # S3 for the script itself, as the job's role gives it on SageMaker: the stand-in's endpoint and
            # keys (a Script job, which has no channel, reads its dataset_uri there).
            for key in DROPPED_AWS_VARIABLES:
                env.pop(key, None)
            env.update(s3_env)
            command = ["/bin/sh" if program.endswith(".sh") else python, program, *script_arguments(hps)]
            procs[host] = subprocess.Popen(command, cwd=host_base / "code", env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                           stdin=subprocess.DEVNULL)
            with _RUNNING_LOCK:
                RUNNING.add(procs[host])
        alive = lambda: any(proc.poll() is None for proc in procs.values())  # noqa: E731
        feeders = [PipeFeeder(bases[host] / "input" / "data", ch, objs, storage.read_object, wrapper, seed,
                              lambda proc=procs[host]: proc.poll() is None)
                   for host, ch, objs, wrapper, seed in pipes]
        for feeder in feeders:
            feeder.start()
        if sync is not None:
            sync.start()
        deadline = time.monotonic() + request["StoppingCondition"]["MaxRuntimeInSeconds"]
        readers = [threading.Thread(target=lambda p=proc, h=host: logs[h].extend(p.stdout), daemon=True)
                   for host, proc in procs.items()]
        for reader in readers:
            reader.start()
        timed_out, failed_host = False, None
        while alive():
            # One host's script failing fails the job, and its other hosts are stopped with it: left running, they
            # would wait on a peer that never comes (a checkpoint reader waits for the host that writes the files).
            failed_host = next((host for host, proc in procs.items() if proc.poll() not in (None, 0)), None)
            timed_out = failed_host is None and time.monotonic() > deadline
            if failed_host is not None or timed_out:
                stop_hosts(procs.values())
                break
            time.sleep(0.02)
        for proc in procs.values():
            proc.wait()
            with _RUNNING_LOCK:
                RUNNING.discard(proc)
        for reader in readers:
            reader.join(5)
        for feeder in feeders:
            feeder.stop()
            feeder.join(5)
            if feeder.error is not None:
                raise JobFailed(f"InternalServerError: feeding Pipe input failed: {feeder.error}")
        for host in hosts[1:]:
            log_lines.extend(f"[{host}] {line}" for line in logs[host])
        # Every host's model and output folders become one archive each, as SageMaker aggregates them.
        archives: dict[str, dict[str, Path]] = {}
        for archive, folder in (("model.tar.gz", "model"), ("output.tar.gz", "output/data")):
            archives[archive], clashes = merge_host_folders({host: bases[host] / folder for host in hosts})
            warnings += [f"{archive}: {line}" for line in clashes]
        log_lines.extend(f"dslab stand-in: warning: {line}\n" for line in warnings)
        metrics = job_metrics({name: path.read_bytes() for name, path in archives["output.tar.gz"].items()
                               if is_metrics_file(name) and path.is_file()}, count)
        failed_host = failed_host or next((h for h in hosts if procs[h].returncode != 0), None)
        if timed_out:
            status, secondary = "Stopped", "MaxRuntimeExceeded"
            failure = f"Training job reached MaxRuntimeInSeconds ({request['StoppingCondition']['MaxRuntimeInSeconds']} s)"
        elif failed_host is not None:
            failure_file = bases[failed_host] / "output" / "failure"
            reason = failure_file.read_text().strip() if failure_file.exists() else "".join(logs[failed_host][-5:]).strip()
            where = f" on {failed_host}" if count > 1 else ""
            raise JobFailed(f"AlgorithmError: {reason}, exit code: {procs[failed_host].returncode}{where}")

        enter("Uploading", "Uploading generated training model")
        if sync is not None:   # the sync ends with the scripts: what it had not sent stays out of S3
            sync.stop()
            log_lines.append(f"dslab stand-in: {sync.figures.describe()}\n")
            warnings += [f"CheckpointConfig: {line}" for line in sync.figures.warnings()]
            log_lines.extend(f"dslab stand-in: warning: CheckpointConfig: {line}\n" for line in sync.figures.warnings())
        output = request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        bucket, prefix = split_s3_uri(output)
        for archive, tree in archives.items():
            key = f"{prefix}/{name}/output/{archive}".lstrip("/")
            storage.put_object(bucket, key, tar_gz_tree(tree))
            artifacts[archive] = f"s3://{bucket}/{key}"
    except JobFailed as err:
        status, secondary, failure = "Failed", "Failed", str(err)
    except StorageError as err:
        status, secondary, failure = "Failed", "Failed", f"ClientError: {err}"
    except RequestInvalid:
        raise
    except ClientError as err:   # a request the storage did not word itself (it words S3's refusals: StorageError)
        status, secondary, failure = "Failed", "Failed", f"ClientError: {err}"
    finally:
        if sync is not None:
            sync._stop.set()
        storage.release()

    end = _now()
    enter(secondary, {"Completed": "Training job completed", "Failed": f"Training job failed. Reason: {failure}",
                      "MaxRuntimeExceeded": "Training job stopped: MaxRuntimeInSeconds reached"}.get(secondary, secondary))
    phases[-1].end = end
    start = training_start or end
    seconds = max(1, math.ceil((end - start).total_seconds())) if training_start else 0
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
    if request.get("CheckpointConfig"):
        describe["CheckpointConfig"] = request["CheckpointConfig"]
    if training_start:
        # BillableTimeInSeconds is one instance's wall clock, as SageMaker's: "Multiply BillableTimeInSeconds by the
        # number of instances (InstanceCount) ... to get the total compute time SageMaker bills you" (API reference,
        # DescribeTrainingJob). Spot saves nothing here: the stand-in never interrupts a job nor discounts its time.
        describe.update(TrainingStartTime=start.isoformat(), TrainingEndTime=end.isoformat(),
                        TrainingTimeInSeconds=seconds, BillableTimeInSeconds=seconds)
    if failure:
        describe["FailureReason"] = failure
    if "model.tar.gz" in artifacts:
        describe["ModelArtifacts"] = {"S3ModelArtifacts": artifacts["model.tar.gz"]}
    final = scrape_metrics(request["AlgorithmSpecification"].get("MetricDefinitions") or [], log_lines)
    if final:
        describe["FinalMetricDataList"] = [{"MetricName": key, "Value": value, "Timestamp": end.isoformat()}
                                           for key, value in final.items()]
    return JobOutcome(describe=describe, metrics=metrics, log="".join(log_lines), artifacts=artifacts, warnings=warnings)



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
