"""The local runner's training job (dslab/local/runner.py run_training_job): what a job on this machine gets and what
its DescribeTrainingJob-shaped outcome says. The container's view (its /opt/ml configs, SM_* environment, command
line and channels per input mode: File, FastFile, Pipe, FSx, EFS), the status transitions with their messages and
times, the archives uploaded and the reason a user reads when the job fails. Objects and file systems are the folder
stand-in's (FolderStorage), watched by a recording Storage; the clock is a fake one (a second per look), so every
time in the outcome is written here; the scripts are small shell scripts (fast). Expected values are literals."""

from __future__ import annotations

import re

import datetime as dt
import io
import json
import tarfile
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from dslab.aws.validation import RequestInvalid
from dslab.local import runner
from dslab.local.job_storage import FolderStorage, StorageError

BUCKET = "bkt"
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)


def at(seconds: float) -> str:
    """The fake clock's time ``seconds`` after T0, as the outcome writes it."""
    return (T0 + dt.timedelta(seconds=seconds)).isoformat()


# A job that never ends fails its test after 20 s rather than hang the run.
pytestmark = pytest.mark.timeout(20, method="signal")


@pytest.fixture
def clock(monkeypatch):
    """The runner's clock: T0, then one `step` later at every look (step 1 s unless a test changes it)."""
    state = {"n": 0, "step": 1.0}

    def now():
        value = T0 + dt.timedelta(seconds=state["n"] * state["step"])
        state["n"] += 1
        return value
    monkeypatch.setattr(runner, "_now", now)
    return state


class Recording:
    """The folder stand-in (FolderStorage), with every call the runner makes written down."""

    def __init__(self, root: Path, fs_root: Path | None = None, env: dict | None = None):
        self.folder = FolderStorage(root / "s3", fs_root)
        self.calls: list[tuple] = []
        self.env = env if env is not None else {"AWS_ENDPOINT_URL": "http://stand-in:9000"}
        self.released = 0
        self.fail_put: Exception | None = None

    def list_objects(self, bucket, prefix):
        self.calls.append(("list", bucket, prefix))
        return self.folder.list_objects(bucket, prefix)

    def read_object(self, bucket, key):
        self.calls.append(("read", bucket, key))
        return self.folder.read_object(bucket, key)

    def download(self, bucket, key, target):
        self.calls.append(("download", bucket, key, target))
        return self.folder.download(bucket, key, target)

    def put_object(self, bucket, key, data):
        self.calls.append(("put", bucket, key))
        if self.fail_put is not None:
            raise self.fail_put
        return self.folder.put_object(bucket, key, data)

    def upload(self, bucket, key, source):
        self.calls.append(("upload", bucket, key))
        return self.folder.upload(bucket, key, source)

    def delete_object(self, bucket, key):
        self.calls.append(("delete", bucket, key))
        return self.folder.delete_object(bucket, key)

    def fastfile_view(self, bucket, prefix):
        self.calls.append(("fastfile", bucket, prefix))
        return self.folder.fastfile_view(bucket, prefix)

    def file_system_root(self, file_system_id, file_system_type, writable=False):
        self.calls.append(("fs", file_system_id, file_system_type, writable))
        return self.folder.file_system_root(file_system_id, file_system_type, writable)

    def s3_environment(self, uris):
        self.calls.append(("s3env", list(uris)))
        return dict(self.env)

    def release(self):
        self.released += 1

    def kinds(self, kind: str) -> list[tuple]:
        return [c[1:] for c in self.calls if c[0] == kind]


def run_job(request_: dict, storage, workdir: Path, **options):
    """run_training_job, with whatever it raises re-raised from here: the exception and its message as they were,
    without the runner's frames (so a failure is reported at once)."""
    try:
        return runner.run_training_job(request_, storage, workdir, **options)
    except BaseException as err:   # noqa: BLE001 - re-raised unchanged, from here
        err.__cause__ = err.__context__ = None
        raise err.with_traceback(None) from None


def put(root: Path, key: str, body: bytes = b"x", bucket: str = BUCKET) -> None:
    path = root / "s3" / bucket / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def code(root: Path, script: str, name: str = "train.sh") -> Path:
    folder = root / "code"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(script)
    return folder


def request(name: str = "Job-A", *, channels: list | None = None, mode: str | None = "File", count: int = 1,
            hps: dict | None = None, program: str | None = "train.sh", **extra) -> dict:
    algorithm = {"TrainingImage": "img"}
    if mode is not None:
        algorithm["TrainingInputMode"] = mode
    hyperparameters = {**({"sagemaker_program": json.dumps(program)} if program else {}), **(hps or {})}
    out = {"TrainingJobName": name, "AlgorithmSpecification": algorithm,
           "RoleArn": "arn:aws:iam::123456789012:role/training", "HyperParameters": hyperparameters,
           "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/out/"},
           "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": count, "VolumeSizeInGB": 5},
           "StoppingCondition": {"MaxRuntimeInSeconds": 60}, **extra}
    if channels is not None:
        out["InputDataConfig"] = channels
    return out


def s3_channel(name: str = "train", uri: str = f"s3://{BUCKET}/data/", **fields) -> dict:
    source = {"S3DataType": fields.pop("data_type", "S3Prefix"), "S3Uri": uri,
              "S3DataDistributionType": fields.pop("distribution", "FullyReplicated")}
    return {"ChannelName": name, "DataSource": {"S3DataSource": source}, **fields}


def members(root: Path, key: str) -> dict[str, bytes | None]:
    """An uploaded archive's members: name -> content (None: a folder)."""
    with tarfile.open(fileobj=io.BytesIO((root / "s3" / BUCKET / key).read_bytes()), mode="r:gz") as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()}


def environment(base: Path) -> dict[str, str]:
    """What the script saw in its environment (it wrote `env` to its /opt/ml's env.txt)."""
    lines = (base / "env.txt").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


SEEN = """set -e
env > "$SAGEMAKER_BASE_DIR/env.txt"
echo "$@" > "$SAGEMAKER_BASE_DIR/args.txt"
(cd "$SM_CHANNEL_TRAIN" && find -L . -type f | sort > "$SAGEMAKER_BASE_DIR/seen.txt")
echo "loss=0.5"
echo "loss=0.25"
echo weights > "$SM_MODEL_DIR/model.txt"
mkdir -p "$SM_OUTPUT_DATA_DIR/logs"
echo done > "$SM_OUTPUT_DATA_DIR/logs/result.txt"
echo '{"samples_per_second": 12.5}' > "$SM_OUTPUT_DATA_DIR/metrics.json"
"""


# ---- a File job from start to end ----------------------------------------------------------------------------------
def test_a_file_job_completes_and_its_outcome_says_every_phase_time_artifact_and_metric(tmp_path, clock):
    """A one-host File job: its objects copied in under the channel (prefix stripped), the script run, model and
    output archives uploaded under S3OutputPath/<name>/output/, and DescribeTrainingJob's fields: ARN (the name in
    lower case, us-east-1), the five transitions with their messages and times, training and billable seconds, the
    final metric scraped from the log (last value), and the job's metrics file."""
    put(tmp_path, "data/a.txt", b"aa")
    put(tmp_path, "data/sub/b.txt", b"bbb")
    put(tmp_path, "other/c.txt")
    storage = Recording(tmp_path)
    phases: list[str] = []
    req = request(channels=[s3_channel()], hps={"epochs": "2"},
                  AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File",
                                          "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]})
    outcome = run_job(req, storage, tmp_path / "work", code_dir=code(tmp_path, SEEN),
                                      on_phase=phases.append)
    assert phases == ["Starting", "Downloading", "Training", "Uploading", "Completed"]
    assert outcome.status == "Completed"
    assert outcome.describe == {
        "TrainingJobName": "Job-A", "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-a",
        "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
        "HyperParameters": {"sagemaker_program": '"train.sh"', "epochs": "2"},
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File",
                                   "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]},
        "RoleArn": "arn:aws:iam::123456789012:role/training",
        "InputDataConfig": [s3_channel()],
        "OutputDataConfig": {"S3OutputPath": "s3://bkt/out/"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "CreationTime": at(0), "LastModifiedTime": at(6),
        "SecondaryStatusTransitions": [
            {"Status": "Starting", "StartTime": at(1), "EndTime": at(3),
             "StatusMessage": "Preparing the instances for training"},
            {"Status": "Downloading", "StartTime": at(3), "EndTime": at(4), "StatusMessage": "Downloading input data"},
            {"Status": "Training", "StartTime": at(4), "EndTime": at(5),
             "StatusMessage": "Training image download completed. Training in progress."},
            {"Status": "Uploading", "StartTime": at(5), "EndTime": at(7),
             "StatusMessage": "Uploading generated training model"},
            {"Status": "Completed", "StartTime": at(7), "EndTime": at(6), "StatusMessage": "Training job completed"}],
        "EnableManagedSpotTraining": False,
        "TrainingStartTime": at(2), "TrainingEndTime": at(6), "TrainingTimeInSeconds": 4, "BillableTimeInSeconds": 4,
        "ModelArtifacts": {"S3ModelArtifacts": "s3://bkt/out/Job-A/output/model.tar.gz"},
        "FinalMetricDataList": [{"MetricName": "loss", "Value": 0.25, "Timestamp": at(6)}]}
    assert outcome.artifacts == {"model.tar.gz": "s3://bkt/out/Job-A/output/model.tar.gz",
                                 "output.tar.gz": "s3://bkt/out/Job-A/output/output.tar.gz"}
    assert outcome.metrics == {"samples_per_second": 12.5}
    assert outcome.warnings == []
    assert outcome.log == "loss=0.5\nloss=0.25\n"
    base = tmp_path / "work" / "opt_ml"
    assert (base / "seen.txt").read_text() == "./a.txt\n./sub/b.txt\n"
    assert (base / "args.txt").read_text() == "--epochs 2\n"
    work = tmp_path / "work" / "opt_ml" / "input" / "data" / "train"
    assert sorted(storage.kinds("download")) == [(BUCKET, "data/a.txt", work / "a.txt"),
                                                 (BUCKET, "data/sub/b.txt", work / "sub" / "b.txt")]
    assert storage.kinds("put") == [(BUCKET, "out/Job-A/output/model.tar.gz"),
                                    (BUCKET, "out/Job-A/output/output.tar.gz")]
    assert members(tmp_path, "out/Job-A/output/model.tar.gz") == {"model.txt": b"weights\n"}
    assert members(tmp_path, "out/Job-A/output/output.tar.gz") == {
        "logs": None, "logs/result.txt": b"done\n", "metrics.json": b'{"samples_per_second": 12.5}\n'}
    assert storage.kinds("s3env") == [([],)] and storage.released == 1


def test_the_container_gets_sagemakers_configs_and_environment_and_none_of_the_users_own(tmp_path, clock, monkeypatch):
    """/opt/ml/input/config's three files and the SM_* variables as SageMaker's containers set them (FastFile written
    as File, the channel's distribution, wrapper and content type); the user's own SM_*/SAGEMAKER_* variables and AWS
    profile/session variables are dropped, the storage's S3 variables given, the rest of the environment kept."""
    monkeypatch.setenv("SM_STALE", "user's")
    monkeypatch.setenv("SAGEMAKER_STALE", "user's")
    monkeypatch.setenv("AWS_PROFILE", "mine")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "tok")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "tok")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://real")
    monkeypatch.setenv("KEPT_BY_RUNNER", "yes")
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)   # the runner sets both, whatever this process has
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    put(tmp_path, "data/a.txt")
    put(tmp_path, "ff/f.txt")
    storage = Recording(tmp_path, env={"AWS_ENDPOINT_URL": "http://stand-in:9000", "AWS_REGION": "us-east-1"})
    channels = [s3_channel(ContentType="application/x-image", distribution="ShardedByS3Key"),
                s3_channel("fast", f"s3://{BUCKET}/ff/", InputMode="FastFile")]
    req = request(channels=channels, hps={"lr": "0.5", "sagemaker_region": '"us-east-1"', "name": '"abc"'})
    outcome = run_job(req, storage, tmp_path / "work", code_dir=code(tmp_path, SEEN), cpus=3)
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    base = tmp_path / "work" / "opt_ml"
    config = base / "input" / "config"
    assert json.loads((config / "hyperparameters.json").read_text()) == {
        "sagemaker_program": '"train.sh"', "lr": "0.5", "sagemaker_region": '"us-east-1"', "name": '"abc"'}
    assert json.loads((config / "resourceconfig.json").read_text()) == {
        "current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0"}
    input_config = {"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key",
                              "RecordWrapperType": "None", "ContentType": "application/x-image"},
                    "fast": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                             "RecordWrapperType": "None"}}
    assert json.loads((config / "inputdataconfig.json").read_text()) == input_config
    env = environment(base)
    assert {k: v for k, v in env.items() if k.startswith(("SM_", "SAGEMAKER_"))} == {
        "SAGEMAKER_BASE_DIR": str(base), "SM_CURRENT_HOST": "algo-1", "SM_HOSTS": '["algo-1"]',
        "SM_NUM_CPUS": "3", "SM_NUM_GPUS": "0", "SM_MODEL_DIR": f"{base}/model",
        "SM_OUTPUT_DATA_DIR": f"{base}/output/data", "SM_OUTPUT_DIR": f"{base}/output", "SM_INPUT_DIR": f"{base}/input",
        "SM_INPUT_CONFIG_DIR": f"{base}/input/config",
        "SM_HPS": '{"sagemaker_program": "train.sh", "lr": 0.5, "sagemaker_region": "us-east-1", "name": "abc"}',
        "SM_TRAINING_ENV": '{"job_name": "Job-A", "current_host": "algo-1", "hosts": ["algo-1"]}',
        "SM_CHANNELS": '["train", "fast"]', "SM_CHANNEL_TRAIN": f"{base}/input/data/train",
        "SM_CHANNEL_FAST": f"{base}/input/data/fast", "SM_INPUT_DATA_CONFIG": json.dumps(input_config),
        "SM_USER_ARGS": '["--lr", "0.5", "--name", "abc"]'}
    assert (env["PYTHONUNBUFFERED"], env["PYTHONDONTWRITEBYTECODE"], env["TRAINING_JOB_NAME"]) == ("1", "1", "Job-A")
    assert (env["AWS_ENDPOINT_URL"], env["AWS_REGION"], env["KEPT_BY_RUNNER"]) == ("http://stand-in:9000", "us-east-1",
                                                                                   "yes")
    assert not {"AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL_S3"} & set(env)
    assert (base / "args.txt").read_text() == "--lr 0.5 --name abc\n"
    assert storage.kinds("fastfile") == [(BUCKET, "ff/")]
    fast = base / "input" / "data" / "fast"
    assert fast.is_symlink() and fast.readlink() == tmp_path / "s3" / BUCKET / "ff"


def test_the_cpu_count_defaults_to_the_machines_and_a_region_hyperparameter_names_the_arns_region(tmp_path, clock,
                                                                                                  monkeypatch):
    """Without `cpus`, SM_NUM_CPUS is the machine's count (1 where it cannot be told); sagemaker_region (a JSON
    string) is the ARN's region; a job without channels gets no InputDataConfig in its outcome, and the default
    input mode File."""
    monkeypatch.setattr(runner.os, "cpu_count", lambda: None)
    storage = Recording(tmp_path)
    req = request(mode=None, hps={"sagemaker_region": '"eu-west-1"'})
    outcome = run_job(req, storage, tmp_path / "work",
                                      code_dir=code(tmp_path, 'env > "$SAGEMAKER_BASE_DIR/env.txt"\n'))
    assert outcome.describe["TrainingJobArn"] == "arn:aws:sagemaker:eu-west-1:123456789012:training-job/job-a"
    assert "InputDataConfig" not in outcome.describe
    env = environment(tmp_path / "work" / "opt_ml")
    assert (env["SM_NUM_CPUS"], env["SM_CHANNELS"], env["SM_INPUT_DATA_CONFIG"]) == ("1", "[]", "{}")
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 7)
    run_job(req, storage, tmp_path / "work",
                            code_dir=code(tmp_path, 'env > "$SAGEMAKER_BASE_DIR/env.txt"\n'))
    assert environment(tmp_path / "work" / "opt_ml")["SM_NUM_CPUS"] == "7"


def test_a_region_hyperparameter_that_decodes_to_nothing_leaves_us_east_1(tmp_path, clock):
    req = request(hps={"sagemaker_region": '""'})
    outcome = run_job(req, Recording(tmp_path), tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert outcome.describe["TrainingJobArn"] == "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-a"


def test_a_python_entry_point_runs_with_the_given_interpreter_and_a_shell_one_with_sh(tmp_path, clock):
    """sagemaker_program train.py runs as `<python> train.py <args>` (here a shell script stands in for python and
    says what it was given); a .sh entry point runs with /bin/sh whatever `python` is."""
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\necho "python ran with $*"\n')
    python.chmod(0o755)
    folder = code(tmp_path, 'echo "the file ran as a shell script"\n', "train.py")
    outcome = run_job(request(program="train.py", hps={"k": '"v"'}), Recording(tmp_path),
                                      tmp_path / "work", code_dir=folder, python=str(python))
    assert (outcome.status, outcome.log) == ("Completed", "python ran with train.py --k v\n")
    folder = code(tmp_path, 'echo "sh ran"\n', "go.sh")
    outcome = run_job(request(program="go.sh"), Recording(tmp_path), tmp_path / "work",
                                      code_dir=folder, python="/nonexistent/python")
    assert (outcome.status, outcome.log) == ("Completed", "sh ran\n")


def test_the_scripts_errors_are_in_its_log_with_its_output_and_it_reads_no_terminal(tmp_path, clock):
    """stderr joins stdout in the job's log, in order; stdin is empty (a script that reads it ends at once)."""
    script = 'echo out\necho err >&2\nread line || echo "stdin empty"\n'
    outcome = run_job(request(), Recording(tmp_path), tmp_path / "work", code_dir=code(tmp_path, script))
    assert (outcome.status, outcome.log) == ("Completed", "out\nerr\nstdin empty\n")


def test_without_sagemaker_program_the_entry_point_is_train_py(tmp_path, clock):
    """No sagemaker_program and no HyperParameters at all: train.py is run; the outcome's HyperParameters is {}."""
    req = request(program=None)
    del req["HyperParameters"]
    outcome = run_job(req, Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, "echo default entry\n", "train.py"), python="/bin/sh")
    assert (outcome.status, outcome.log, outcome.describe["HyperParameters"]) == ("Completed", "default entry\n", {})


def test_the_code_comes_from_the_submit_directorys_archive_in_s3(tmp_path, clock):
    """sagemaker_submit_directory (a JSON string) names sourcedir.tar.gz in S3: it is read there and unpacked."""
    data = io.BytesIO()
    script = b"echo from the archive\n"
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.sh")
        info.size = len(script)
        tar.addfile(info, io.BytesIO(script))
    put(tmp_path, "code/sourcedir.tar.gz", data.getvalue())
    storage = Recording(tmp_path)
    req = request(hps={"sagemaker_submit_directory": json.dumps(f"s3://{BUCKET}/code/sourcedir.tar.gz")})
    outcome = run_job(req, storage, tmp_path / "work")
    assert (outcome.status, outcome.log) == ("Completed", "from the archive\n")
    assert storage.kinds("read") == [(BUCKET, "code/sourcedir.tar.gz")]


def test_without_a_submit_directory_or_code_folder_the_request_is_refused(tmp_path, clock):
    with pytest.raises(RequestInvalid, match="HyperParameters.sagemaker_submit_directory '' is not an S3 URI"):
        run_job(request(), Recording(tmp_path), tmp_path / "work")


def test_a_folder_left_by_an_earlier_run_is_removed_before_the_job_starts(tmp_path, clock):
    stale = tmp_path / "work" / "opt_ml" / "model" / "old.txt"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    outcome = run_job(request(), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, 'echo new > "$SM_MODEL_DIR/new.txt"\n'))
    assert outcome.status == "Completed" and not stale.exists()
    assert members(tmp_path, "out/Job-A/output/model.tar.gz") == {"new.txt": b"new\n"}


def test_an_output_path_without_a_prefix_puts_the_archives_under_the_jobs_name(tmp_path, clock):
    (tmp_path / "s3" / BUCKET).mkdir(parents=True)
    storage = Recording(tmp_path)
    outcome = run_job(request(OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}"}), storage,
                                      tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert outcome.artifacts == {"model.tar.gz": "s3://bkt/Job-A/output/model.tar.gz",
                                 "output.tar.gz": "s3://bkt/Job-A/output/output.tar.gz"}
    assert storage.kinds("put") == [(BUCKET, "Job-A/output/model.tar.gz"), (BUCKET, "Job-A/output/output.tar.gz")]


def test_the_archives_keys_keep_every_letter_of_the_output_path_and_the_jobs_name(tmp_path, clock):
    """Only slashes are trimmed: an output path ending in X and a job named X-ray keep their X."""
    (tmp_path / "s3" / BUCKET).mkdir(parents=True)
    storage = Recording(tmp_path)
    outcome = run_job(request("X-ray", OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/BOX/"}), storage,
                      tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert outcome.artifacts == {"model.tar.gz": "s3://bkt/BOX/X-ray/output/model.tar.gz",
                                 "output.tar.gz": "s3://bkt/BOX/X-ray/output/output.tar.gz"}
    outcome = run_job(request("X-ray", OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}"}), storage,
                      tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert outcome.artifacts["model.tar.gz"] == "s3://bkt/X-ray/output/model.tar.gz"


def test_a_job_shorter_than_a_second_bills_one_second_and_says_spot_vpc_and_checkpoints_as_asked(tmp_path, clock):
    """A job whose clock does not move bills 1 second (never 0) per instance; EnableManagedSpotTraining, VpcConfig
    and CheckpointConfig are in the outcome as asked."""
    clock["step"] = 0.0
    vpc = {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]}
    checkpoints = {"S3Uri": f"s3://{BUCKET}/ck/"}
    (tmp_path / "s3" / BUCKET).mkdir(parents=True)
    outcome = run_job(request(EnableManagedSpotTraining=True, VpcConfig=vpc,
                                              CheckpointConfig=checkpoints), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, "true\n"))
    d = outcome.describe
    assert (d["TrainingTimeInSeconds"], d["BillableTimeInSeconds"], d["EnableManagedSpotTraining"]) == (1, 1, True)
    assert (d["VpcConfig"], d["CheckpointConfig"]) == (vpc, checkpoints)


def test_training_seconds_round_up_and_billable_seconds_are_one_instances(tmp_path, clock):
    """1.3 s between the looks: training from look 2 to look 5 (3.9 s) is 4 seconds, and 4 billable on each of the two
    instances (BillableTimeInSeconds is one instance's wall clock: "Multiply BillableTimeInSeconds by the number of
    instances", DescribeTrainingJob)."""
    clock["step"] = 1.3
    outcome = run_job(request(count=2), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, "true\n"))
    d = outcome.describe
    assert (d["TrainingTimeInSeconds"], d["BillableTimeInSeconds"]) == (4, 4)
    assert [p["Status"] for p in d["SecondaryStatusTransitions"]] == ["Starting", "Training", "Uploading", "Completed"]


# ---- several hosts ---------------------------------------------------------------------------------------------------
HOSTS = """set -e
env > "$SAGEMAKER_BASE_DIR/env.txt"
(cd "$SM_CHANNEL_TRAIN" && find -L . -type f | sort > "$SAGEMAKER_BASE_DIR/seen.txt")
echo "hello from $SM_CURRENT_HOST"
echo "$SM_CURRENT_HOST" > "$SM_MODEL_DIR/same.txt"
echo "$SM_CURRENT_HOST" > "$SM_MODEL_DIR/$SM_CURRENT_HOST.txt"
"""


def test_a_sharded_file_channel_gives_each_host_its_share_and_the_archives_merge_every_host(tmp_path, clock):
    """Two hosts, ShardedByS3Key: algo-1 gets objects 1 and 3, algo-2 objects 2 and 4, each in its own /opt/ml; the
    model archive holds both hosts' files, a name both wrote kept from algo-1 and said as a warning (outcome and
    log); algo-2's log lines are prefixed with its name."""
    for name in "abcd":
        put(tmp_path, f"data/{name}.txt")
    storage = Recording(tmp_path)
    outcome = run_job(request(count=2, channels=[s3_channel(distribution="ShardedByS3Key")]),
                                      storage, tmp_path / "work", code_dir=code(tmp_path, HOSTS))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    one, two = tmp_path / "work" / "algo-1-opt_ml", tmp_path / "work" / "algo-2-opt_ml"
    assert (one / "seen.txt").read_text() == "./a.txt\n./c.txt\n"
    assert (two / "seen.txt").read_text() == "./b.txt\n./d.txt\n"
    clash = ("model.tar.gz: same.txt was written by algo-1 and algo-2: SageMaker asks that hosts' names not clash "
             "and documents no order for merging them; the stand-in kept algo-1's")
    assert outcome.warnings == [clash]
    assert outcome.log == f"hello from algo-1\n[algo-2] hello from algo-2\ndslab stand-in: warning: {clash}\n"
    assert members(tmp_path, "out/Job-A/output/model.tar.gz") == {
        "algo-1.txt": b"algo-1\n", "algo-2.txt": b"algo-2\n", "same.txt": b"algo-1\n"}
    env = environment(two)
    assert (env["SM_CURRENT_HOST"], env["SM_HOSTS"], env["SAGEMAKER_BASE_DIR"]) == ("algo-2", '["algo-1", "algo-2"]',
                                                                                    str(two))
    assert json.loads((two / "input" / "config" / "resourceconfig.json").read_text()) == {
        "current_host": "algo-2", "hosts": ["algo-1", "algo-2"], "network_interface_name": "eth0"}
    assert (two / "code" / "train.sh").read_text() == HOSTS
    assert not (tmp_path / "work" / "opt_ml").exists()
    # One instance's seconds, however many hosts ran (SageMaker's BillableTimeInSeconds, per instance).
    assert outcome.describe["BillableTimeInSeconds"] == outcome.describe["TrainingTimeInSeconds"] == 4


def test_a_fully_replicated_channel_gives_every_host_every_object(tmp_path, clock):
    for name in "abc":
        put(tmp_path, f"data/{name}.txt")
    outcome = run_job(request(count=2, channels=[s3_channel()]), Recording(tmp_path),
                                      tmp_path / "work", code_dir=code(tmp_path, HOSTS))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    for host in ("algo-1", "algo-2"):
        assert (tmp_path / "work" / f"{host}-opt_ml" / "seen.txt").read_text() == "./a.txt\n./b.txt\n./c.txt\n"


def test_a_sharded_fastfile_channel_links_each_hosts_share_into_the_mounted_prefix(tmp_path, clock):
    """FastFile with ShardedByS3Key on two hosts (objects a, c, sub/deep/b in key order): each host's channel holds links
    to its own objects in the view (sub-folders kept); nothing is downloaded and there is no Downloading phase."""
    for key in ("data/a.txt", "data/sub/deep/b.txt", "data/c.txt"):
        put(tmp_path, key, key.encode())
    storage = Recording(tmp_path)
    channel = s3_channel(distribution="ShardedByS3Key", InputMode="FastFile")
    outcome = run_job(request(count=2, channels=[channel]), storage, tmp_path / "work",
                                      code_dir=code(tmp_path, HOSTS))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    one, two = (tmp_path / "work" / f"{h}-opt_ml" / "input" / "data" / "train" for h in ("algo-1", "algo-2"))
    view = tmp_path / "s3" / BUCKET / "data"
    assert (one / "a.txt").readlink() == view / "a.txt"
    assert (one / "sub" / "deep" / "b.txt").readlink() == view / "sub" / "deep" / "b.txt"
    assert (two / "c.txt").readlink() == view / "c.txt"
    assert (tmp_path / "work" / "algo-1-opt_ml" / "seen.txt").read_text() == "./a.txt\n./sub/deep/b.txt\n"
    assert (tmp_path / "work" / "algo-2-opt_ml" / "seen.txt").read_text() == "./c.txt\n"
    assert storage.kinds("download") == [] and storage.kinds("fastfile") == [(BUCKET, "data/"), (BUCKET, "data/")]
    assert "Downloading" not in [p["Status"] for p in outcome.describe["SecondaryStatusTransitions"]]


def test_an_objects_name_is_kept_whole_below_the_prefix_in_file_and_sharded_fastfile_channels(tmp_path, clock):
    """Only the prefix and the slash after it are cut from a key: data/XY.txt is the channel's XY.txt (its first
    letters kept), downloaded in File mode, linked in a sharded FastFile channel (XY.txt sorts before a.txt)."""
    put(tmp_path, "data/XY.txt", b"xy")
    put(tmp_path, "data/a.txt", b"a")
    storage = Recording(tmp_path)
    outcome = run_job(request(channels=[s3_channel()]), storage, tmp_path / "work", code_dir=code(tmp_path, SEEN))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert (tmp_path / "work" / "opt_ml" / "seen.txt").read_text() == "./XY.txt\n./a.txt\n"
    channel = s3_channel(distribution="ShardedByS3Key", InputMode="FastFile")
    outcome = run_job(request(count=2, channels=[channel]), storage, tmp_path / "work", code_dir=code(tmp_path, HOSTS))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    one = tmp_path / "work" / "algo-1-opt_ml" / "input" / "data" / "train"
    assert (one / "XY.txt").readlink() == tmp_path / "s3" / BUCKET / "data" / "XY.txt"


def test_a_channels_own_input_mode_is_the_one_its_container_is_told_and_given(tmp_path, clock):
    """A File channel in a job whose mode is FastFile: inputdataconfig.json says File, and its objects are
    downloaded, not linked into a mount."""
    put(tmp_path, "data/a.txt", b"a")
    storage = Recording(tmp_path)
    outcome = run_job(request(mode="FastFile", channels=[s3_channel(InputMode="File")]), storage, tmp_path / "work",
                      code_dir=code(tmp_path, SEEN))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    base = tmp_path / "work" / "opt_ml"
    config = json.loads((base / "input" / "config" / "inputdataconfig.json").read_text())
    assert config == {"train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                                "RecordWrapperType": "None"}}
    assert storage.kinds("fastfile") == [] and not (base / "input" / "data" / "train").is_symlink()


def test_a_manifest_channel_places_its_objects_by_their_full_key(tmp_path, clock):
    """A sharded File channel of a ManifestFile whose objects lie under another prefix: each host gets its share,
    placed by the object's whole key (a manifest has no common prefix)."""
    put(tmp_path, "elsewhere/x.txt", b"x")
    put(tmp_path, "elsewhere/y.txt", b"y")
    put(tmp_path, "m/manifest", json.dumps([{"prefix": f"s3://{BUCKET}/elsewhere/"}, "x.txt", "y.txt"]).encode())
    channel = s3_channel(uri=f"s3://{BUCKET}/m/manifest", data_type="ManifestFile", distribution="ShardedByS3Key")
    outcome = run_job(request(count=2, channels=[channel]), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, HOSTS))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert (tmp_path / "work" / "algo-1-opt_ml" / "seen.txt").read_text() == "./elsewhere/x.txt\n"
    assert (tmp_path / "work" / "algo-2-opt_ml" / "seen.txt").read_text() == "./elsewhere/y.txt\n"


def test_a_prefix_without_a_slash_places_objects_below_the_channel_not_at_the_root(tmp_path, clock):
    """S3Uri s3://bkt/data (no trailing slash): a File object data/a.txt is the channel's a.txt, and a sharded
    FastFile host's link sub/b.txt sits inside its channel."""
    put(tmp_path, "data/a.txt", b"a")
    put(tmp_path, "data/sub/b.txt", b"b")
    storage = Recording(tmp_path)
    outcome = run_job(request(channels=[s3_channel(uri=f"s3://{BUCKET}/data")]), storage,
                                      tmp_path / "work", code_dir=code(tmp_path, SEEN))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert (tmp_path / "work" / "opt_ml" / "seen.txt").read_text() == "./a.txt\n./sub/b.txt\n"
    channel = s3_channel(uri=f"s3://{BUCKET}/data", distribution="ShardedByS3Key", InputMode="FastFile")
    outcome = run_job(request(count=2, channels=[channel]), storage, tmp_path / "work",
                                      code_dir=code(tmp_path, HOSTS))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    link = tmp_path / "work" / "algo-2-opt_ml" / "input" / "data" / "train" / "sub" / "b.txt"
    assert link.readlink() == tmp_path / "s3" / BUCKET / "data" / "sub" / "b.txt"


# ---- Pipe ------------------------------------------------------------------------------------------------------------
WAIT = 'until [ -p "$SM_INPUT_DIR/data/train_0" ]; do sleep 0.01; done\n'
PIPE = """set -e
until [ -p "$SM_INPUT_DIR/data/train_0" ]; do sleep 0.01; done
cat "$SM_INPUT_DIR/data/train_0" > "$SM_OUTPUT_DATA_DIR/epoch0.bin"
until [ -p "$SM_INPUT_DIR/data/train_1" ]; do sleep 0.01; done
cat "$SM_INPUT_DIR/data/train_1" > "$SM_OUTPUT_DATA_DIR/epoch1.bin"
"""


def test_a_pipe_channel_is_fed_one_fifo_per_epoch_in_the_shuffle_configs_order(tmp_path, clock):
    """Pipe mode: train_0, train_1 ... FIFOs fed with every object, in the order ShuffleConfig's seed gives each epoch;
    nothing is downloaded."""
    for name in "abcdef":
        put(tmp_path, f"data/{name}", name.encode())
    storage = Recording(tmp_path)
    channel = s3_channel(ShuffleConfig={"Seed": 3})
    outcome = run_job(request(mode="Pipe", channels=[channel]), storage, tmp_path / "work",
                                      code_dir=code(tmp_path, PIPE))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    fed = members(tmp_path, "out/Job-A/output/output.tar.gz")
    assert (fed["epoch0.bin"], fed["epoch1.bin"]) == (b"acdfeb", b"dfeacb")
    assert storage.kinds("download") == []


def test_a_pipe_channel_without_a_shuffle_config_is_fed_in_key_order_and_recordio_frames_each_object(tmp_path, clock):
    put(tmp_path, "data/a", b"A")
    put(tmp_path, "data/b", b"BB")
    channel = s3_channel(RecordWrapperType="RecordIO")
    outcome = run_job(request(mode="Pipe", channels=[channel]), Recording(tmp_path),
                                      tmp_path / "work", code_dir=code(tmp_path, PIPE))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    fed = members(tmp_path, "out/Job-A/output/output.tar.gz")
    framed = b"\n#\xd7\xce\x01\x00\x00\x00A\x00\x00\x00" + b"\n#\xd7\xce\x02\x00\x00\x00BB\x00\x00"
    assert fed["epoch0.bin"] == fed["epoch1.bin"] == framed
    config = json.loads((tmp_path / "work" / "opt_ml" / "input" / "config" / "inputdataconfig.json").read_text())
    assert config == {"train": {"TrainingInputMode": "Pipe", "S3DistributionType": "FullyReplicated",
                                "RecordWrapperType": "RecordIO"}}


def test_a_sharded_pipe_channel_feeds_each_host_its_share(tmp_path, clock):
    for name in "abcd":
        put(tmp_path, f"data/{name}", name.encode())
    script = WAIT + 'cat "$SM_INPUT_DIR/data/train_0" > "$SM_MODEL_DIR/$SM_CURRENT_HOST.bin"\n'
    outcome = run_job(request(mode="Pipe", count=2, channels=[s3_channel(distribution="ShardedByS3Key")]),
                                      Recording(tmp_path), tmp_path / "work", code_dir=code(tmp_path, script))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert members(tmp_path, "out/Job-A/output/model.tar.gz") == {"algo-1.bin": b"ac", "algo-2.bin": b"bd"}


def test_a_pipe_object_that_cannot_be_read_fails_the_job_saying_the_feed_failed(tmp_path, clock):
    put(tmp_path, "data/a", b"A")

    class Unreadable(Recording):
        def read_object(self, bucket, key):
            raise OSError(f"gone: {key}")
    outcome = run_job(request(mode="Pipe", channels=[s3_channel()]), Unreadable(tmp_path),
                                      tmp_path / "work", code_dir=code(tmp_path, WAIT + 'cat "$SM_INPUT_DIR/data/train_0"\n'))
    assert (outcome.status, outcome.describe["FailureReason"]) == (
        "Failed", "InternalServerError: feeding Pipe input failed: gone: data/a")


# ---- file systems ----------------------------------------------------------------------------------------------------
def _fs_channel(kind: str, fs_id: str, path: str, access: str = "ro", name: str = "train") -> dict:
    return {"ChannelName": name, "DataSource": {"FileSystemDataSource": {
        "FileSystemId": fs_id, "FileSystemType": kind, "DirectoryPath": path, "FileSystemAccessMode": access}}}


FSX, EFS = "fs-0123456789abcdef0", "fs-0fedcba9876543210"
VPC = {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]}


def test_fsx_and_efs_channels_are_their_file_systems_directories_on_every_host(tmp_path, clock):
    """FSx's DirectoryPath starts with its mount name (the file system's root), EFS's does not; every host's channel
    is a link to that directory; the file system is asked for read-write only where the channel is rw."""
    fs = tmp_path / "fs"
    (fs / FSX / "datasets" / "tiny").mkdir(parents=True)
    (fs / FSX / "datasets" / "tiny" / "f.txt").write_text("f")
    (fs / EFS / "stage" / "tiny").mkdir(parents=True)
    (fs / EFS / "stage" / "tiny" / "e.txt").write_text("e")
    storage = Recording(tmp_path, fs_root=fs)
    channels = [_fs_channel("FSxLustre", FSX, "/mnt1/datasets/tiny"),
                _fs_channel("EFS", EFS, "/stage/tiny/", access="rw", name="efs")]
    script = HOSTS + '(cd "$SM_CHANNEL_EFS" && ls > "$SAGEMAKER_BASE_DIR/efs.txt")\n'
    outcome = run_job(request(count=2, channels=channels, VpcConfig=VPC), storage, tmp_path / "work",
                                      code_dir=code(tmp_path, script))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert storage.kinds("fs") == [(FSX, "FSxLustre", False), (EFS, "EFS", True)]
    for host in ("algo-1", "algo-2"):
        data = tmp_path / "work" / f"{host}-opt_ml" / "input" / "data"
        assert (data / "train").readlink() == fs / FSX / "datasets" / "tiny"
        assert (data / "efs").readlink() == fs / EFS / "stage" / "tiny"
        assert (tmp_path / "work" / f"{host}-opt_ml" / "seen.txt").read_text() == "./f.txt\n"
        assert (tmp_path / "work" / f"{host}-opt_ml" / "efs.txt").read_text() == "e.txt\n"
    assert outcome.describe["VpcConfig"] == VPC
    assert [p["Status"] for p in outcome.describe["SecondaryStatusTransitions"]] == [
        "Starting", "Training", "Uploading", "Completed"]
    config = tmp_path / "work" / "algo-1-opt_ml" / "input" / "config" / "inputdataconfig.json"
    assert json.loads(config.read_text()) == {
        "train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
        "efs": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}}


def test_a_directory_path_missing_on_the_file_system_fails_the_job_naming_it(tmp_path, clock):
    (tmp_path / "fs" / EFS).mkdir(parents=True)
    storage = Recording(tmp_path, fs_root=tmp_path / "fs")
    outcome = run_job(request(channels=[_fs_channel("EFS", EFS, "/nope")], VpcConfig=VPC),
                                      storage, tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert (outcome.status, outcome.describe["SecondaryStatus"], outcome.describe["FailureReason"]) == (
        "Failed", "Failed", "ClientError: the DirectoryPath /nope does not exist on EFS file system fs-0fedcba9876543210")
    assert storage.kinds("put") == [] and storage.released == 1
    assert outcome.describe["SecondaryStatusTransitions"][-1] == {
        "Status": "Failed", "StartTime": at(4), "EndTime": at(3),
        "StatusMessage": "Training job failed. Reason: ClientError: the DirectoryPath /nope does not exist on EFS "
                         "file system fs-0fedcba9876543210"}


def test_an_fsx_path_that_is_a_file_is_not_a_directory_and_fails_the_job(tmp_path, clock):
    (tmp_path / "fs" / FSX).mkdir(parents=True)
    (tmp_path / "fs" / FSX / "datasets").write_text("a file")
    outcome = run_job(request(channels=[_fs_channel("FSxLustre", FSX, "/mnt1/datasets")],
                                              VpcConfig=VPC), Recording(tmp_path, fs_root=tmp_path / "fs"),
                                      tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert outcome.describe["FailureReason"] == (
        "ClientError: the DirectoryPath /mnt1/datasets does not exist on FSxLustre file system fs-0123456789abcdef0")


# ---- failures ----------------------------------------------------------------------------------------------------
def test_a_simulated_capacity_shortage_fails_before_training_with_sagemakers_words(tmp_path, clock):
    """simulate="capacity": Failed with SageMaker's CapacityError before any training (no training times, nothing
    billed, no archives); the code is never looked at."""
    storage = Recording(tmp_path)
    phases: list[str] = []
    outcome = run_job(request(), storage, tmp_path / "work", simulate="capacity",
                                      on_phase=phases.append)
    reason = ("CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML "
              "instance type.")
    d = outcome.describe
    assert (d["TrainingJobStatus"], d["SecondaryStatus"], d["FailureReason"]) == ("Failed", "Failed", reason)
    assert d["SecondaryStatusTransitions"] == [
        {"Status": "Starting", "StartTime": at(1), "EndTime": at(3),
         "StatusMessage": "Preparing the instances for training"},
        {"Status": "Failed", "StartTime": at(3), "EndTime": at(2),
         "StatusMessage": f"Training job failed. Reason: {reason}"}]
    assert not {"TrainingStartTime", "TrainingEndTime", "TrainingTimeInSeconds", "BillableTimeInSeconds",
                "ModelArtifacts", "FinalMetricDataList"} & set(d)
    assert (d["CreationTime"], d["LastModifiedTime"]) == (at(0), at(2))
    assert (outcome.metrics, outcome.artifacts, outcome.log, storage.calls) == (None, {}, "", [])
    assert phases == ["Starting", "Failed"] and storage.released == 1


def test_a_code_folder_without_the_entry_point_fails_the_job_naming_it(tmp_path, clock):
    outcome = run_job(request(program="main.sh"), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, "true\n"))
    assert outcome.describe["FailureReason"] == "AlgorithmError: the training code has no entry point main.sh"
    assert "TrainingStartTime" not in outcome.describe


def test_a_channel_with_no_objects_fails_the_job_with_s3s_words_and_the_uri(tmp_path, clock):
    put(tmp_path, "elsewhere/a.txt")
    outcome = run_job(request(channels=[s3_channel(uri=f"s3://{BUCKET}/empty/")]), Recording(tmp_path),
                                      tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert outcome.describe["FailureReason"] == (
        'ClientError: No S3 objects found under S3 URL "s3://bkt/empty/" given in input data source. Please ensure '
        "that the bucket exists in the selected region (us-east-1), that objects exist under that S3 prefix, and that "
        "the role has access.")
    assert outcome.describe["TrainingStartTime"] == at(2) and outcome.describe["TrainingTimeInSeconds"] == 1


def test_a_failing_script_fails_the_job_with_its_failure_file_and_exit_code(tmp_path, clock):
    """The script's /opt/ml/output/failure (stripped) is the reason, with its exit code; nothing is uploaded."""
    script = 'echo "  out of memory  " > "$SM_OUTPUT_DIR/failure"\nexit 3\n'
    storage = Recording(tmp_path)
    outcome = run_job(request(), storage, tmp_path / "work", code_dir=code(tmp_path, script))
    d = outcome.describe
    assert (d["TrainingJobStatus"], d["SecondaryStatus"], d["FailureReason"]) == (
        "Failed", "Failed", "AlgorithmError: out of memory, exit code: 3")
    assert storage.kinds("put") == [] and outcome.artifacts == {} and "ModelArtifacts" not in d
    assert [p["Status"] for p in d["SecondaryStatusTransitions"]] == ["Starting", "Training", "Failed"]


def test_a_failing_script_without_a_failure_file_is_told_by_its_last_five_log_lines(tmp_path, clock):
    script = "for i in 1 2 3 4 5 6 7; do echo line$i; done\nexit 2\n"
    outcome = run_job(request(), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, script))
    assert outcome.describe["FailureReason"] == "AlgorithmError: line3\nline4\nline5\nline6\nline7, exit code: 2"


def test_on_several_hosts_the_first_failing_host_is_named(tmp_path, clock):
    script = '[ "$SM_CURRENT_HOST" = algo-2 ] && { echo "bad shard"; exit 4; }\necho fine\n'
    outcome = run_job(request(count=3), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, script))
    assert outcome.describe["FailureReason"] == "AlgorithmError: bad shard, exit code: 4 on algo-2"
    outcome = run_job(request(count=2), Recording(tmp_path), tmp_path / "work", code_dir=code(tmp_path, script))
    assert outcome.describe["FailureReason"] == "AlgorithmError: bad shard, exit code: 4 on algo-2"
    outcome = run_job(request(count=1), Recording(tmp_path), tmp_path / "work",
                      code_dir=code(tmp_path, 'echo "bad shard"; exit 4\n'))
    assert outcome.describe["FailureReason"] == "AlgorithmError: bad shard, exit code: 4"


def test_one_host_failing_stops_the_others_and_fails_the_job_at_once(tmp_path, clock):
    """A host that would wait for its failed peer (a checkpoint reader for the writer's files) is stopped with the
    job, not left running to MaxRuntimeInSeconds; the failed host is named, not the one stopped."""
    script = ('[ "$SM_CURRENT_HOST" = algo-2 ] && { echo "bad shard"; exit 4; }\n'
              'echo waiting > "$SM_MODEL_DIR/m.txt"\nexec sleep 60\n')
    storage = Recording(tmp_path)
    began = time.monotonic()
    outcome = run_job(request(count=2), storage, tmp_path / "work", code_dir=code(tmp_path, script))
    assert time.monotonic() - began < 30
    d = outcome.describe
    assert (d["TrainingJobStatus"], d["FailureReason"]) == ("Failed", "AlgorithmError: bad shard, exit code: 4 on algo-2")
    assert storage.kinds("put") == [] and runner.RUNNING == set()


def test_a_job_past_its_max_runtime_is_stopped_and_says_so(tmp_path, clock):
    """A script still running at MaxRuntimeInSeconds is ended then (not seconds later): Stopped / MaxRuntimeExceeded with its reason, and what
    it wrote is still uploaded."""
    script = 'echo early > "$SM_MODEL_DIR/m.txt"\nexec sleep 30\n'
    storage = Recording(tmp_path)
    began = time.monotonic()
    outcome = run_job(request(StoppingCondition={"MaxRuntimeInSeconds": 1}), storage,
                                      tmp_path / "work", code_dir=code(tmp_path, script))
    assert time.monotonic() - began < 5   # ended at its limit, not left running
    d = outcome.describe
    assert (d["TrainingJobStatus"], d["SecondaryStatus"], d["FailureReason"]) == (
        "Stopped", "MaxRuntimeExceeded", "Training job reached MaxRuntimeInSeconds (1 s)")
    assert d["SecondaryStatusTransitions"][-1]["StatusMessage"] == "Training job stopped: MaxRuntimeInSeconds reached"
    assert [p["Status"] for p in d["SecondaryStatusTransitions"]] == [
        "Starting", "Training", "Uploading", "MaxRuntimeExceeded"]
    assert members(tmp_path, "out/Job-A/output/model.tar.gz") == {"m.txt": b"early\n"}
    assert runner.RUNNING == set()


def test_a_script_that_ignores_sigterm_at_its_max_runtime_is_killed_ten_seconds_later(tmp_path, clock):
    """SIGTERM first, to the script's whole process group; one that ignores it is given ten seconds, then SIGKILL. The
    job still ends Stopped, its files uploaded (this test waits the ten seconds)."""
    script = 'echo early > "$SM_MODEL_DIR/m.txt"\ntrap "" TERM\nwhile :; do sleep 0.1; done\n'
    storage = Recording(tmp_path)
    began = time.monotonic()
    outcome = run_job(request(StoppingCondition={"MaxRuntimeInSeconds": 1}), storage,
                      tmp_path / "work", code_dir=code(tmp_path, script))
    assert 10 <= time.monotonic() - began < 15
    assert (outcome.describe["TrainingJobStatus"], outcome.describe["SecondaryStatus"]) == (
        "Stopped", "MaxRuntimeExceeded")
    assert members(tmp_path, "out/Job-A/output/model.tar.gz") == {"m.txt": b"early\n"}
    assert runner.RUNNING == set()


def test_a_refusal_the_storage_words_fails_the_job_as_a_client_error(tmp_path, clock):
    storage = Recording(tmp_path)
    storage.fail_put = StorageError("uploading s3://bkt/out/x: AWS PutObject failed (AccessDenied)")
    (tmp_path / "s3" / BUCKET).mkdir(parents=True)
    outcome = run_job(request(), storage, tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    reason = "ClientError: uploading s3://bkt/out/x: AWS PutObject failed (AccessDenied)"
    d = outcome.describe
    assert (d["TrainingJobStatus"], d["SecondaryStatus"], d["FailureReason"]) == ("Failed", "Failed", reason)
    assert d["SecondaryStatusTransitions"][-1]["StatusMessage"] == f"Training job failed. Reason: {reason}"
    assert outcome.artifacts == {} and storage.released == 1


def test_an_aws_error_the_storage_did_not_word_fails_the_job_with_botocores_words(tmp_path, clock):
    storage = Recording(tmp_path)
    storage.fail_put = ClientError({"Error": {"Code": "SlowDown", "Message": "Reduce your request rate."}},
                                   "PutObject")
    outcome = run_job(request(), storage, tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    reason = "ClientError: An error occurred (SlowDown) when calling the PutObject operation: Reduce your request rate."
    d = outcome.describe
    assert (d["TrainingJobStatus"], d["SecondaryStatus"], d["FailureReason"]) == ("Failed", "Failed", reason)
    assert d["SecondaryStatusTransitions"][-1]["StatusMessage"] == f"Training job failed. Reason: {reason}"


def test_a_request_the_storage_finds_invalid_is_raised_not_turned_into_a_failed_job(tmp_path, clock):
    """A bucket that does not exist under the folder stand-in is the caller's mistake: RequestInvalid is raised
    (and the storage released)."""
    storage = Recording(tmp_path)
    (tmp_path / "s3").mkdir()
    with pytest.raises(RequestInvalid, match="bucket 'bkt' does not exist under --s3-root"):
        run_job(request(channels=[s3_channel()]), storage, tmp_path / "work",
                                code_dir=code(tmp_path, "true\n"))
    assert storage.released == 1


def test_an_unexpected_error_is_raised_and_the_storage_still_released(tmp_path, clock):
    class Broken(Recording):
        def s3_environment(self, uris):
            raise ValueError("boom")
    storage = Broken(tmp_path)
    with pytest.raises(ValueError, match="boom"):
        run_job(request(), storage, tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert storage.released == 1


# ---- requirements, checkpoints and what the script reads of S3 -----------------------------------------------------
def test_a_requirements_file_is_installed_with_the_jobs_python_before_the_script(tmp_path, clock, monkeypatch):
    installed = []

    def install(folder, python, log_lines):
        installed.append((folder, python))
        log_lines.append("pip: all satisfied\n")
    monkeypatch.setattr(runner, "install_requirements", install)
    folder = code(tmp_path, "echo script\n")
    (folder / "requirements.txt").write_text("numpy\n")
    outcome = run_job(request(), Recording(tmp_path), tmp_path / "work", code_dir=folder,
                                      python="/opt/py")
    assert installed == [(tmp_path / "work" / "opt_ml" / "code", "/opt/py")]
    assert outcome.log == "pip: all satisfied\nscript\n"
    (folder / "requirements.txt").unlink()
    installed.clear()
    run_job(request(), Recording(tmp_path), tmp_path / "work", code_dir=folder, python="/opt/py")
    assert installed == []


CHECKPOINT = """set -e
ls "$SAGEMAKER_BASE_DIR/checkpoints" > "$SAGEMAKER_BASE_DIR/restored.txt"
echo new > "$SAGEMAKER_BASE_DIR/checkpoints/new.pt"
"""


def test_checkpoints_in_s3_are_copied_in_as_a_downloading_phase_and_what_was_not_uploaded_is_said(tmp_path, clock,
                                                                                                  monkeypatch):
    """With checkpoints under CheckpointConfig.S3Uri: a Downloading phase says the copy, the script finds them; a
    checkpoint it wrote that the sync had not sent when it ended is a warning (outcome and log), with the sync's
    figures in the log; the script's S3 is given the checkpoint URI when it names checkpoint_s3_uri."""
    monkeypatch.setattr("dslab.local.checkpoint_sync.POLL_SECONDS", 3600)
    put(tmp_path, "ck/old.pt", b"old")
    storage = Recording(tmp_path)
    req = request(CheckpointConfig={"S3Uri": f"s3://{BUCKET}/ck/"}, hps={"checkpoint_s3_uri": '"s3://bkt/ck/"'})
    outcome = run_job(req, storage, tmp_path / "work", code_dir=code(tmp_path, CHECKPOINT))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert (tmp_path / "work" / "opt_ml" / "restored.txt").read_text() == "old.pt\n"
    assert outcome.describe["SecondaryStatusTransitions"][1] == {
        "Status": "Downloading", "StartTime": at(3), "EndTime": at(4),
        "StatusMessage": "Downloading checkpoints from S3 into the CheckpointConfig LocalPath"}
    left = ("CheckpointConfig: 1 file(s) in the LocalPath were not in S3 when the job ended (e.g. algo-1:new.pt): "
            "SageMaker does not write to S3 once the job ends, so a restore will not find them; a script that needs "
            "them there waits until it sees them listed under the S3Uri")
    assert outcome.warnings == [left]
    assert outcome.log.startswith("dslab stand-in: checkpoint sync: 1 file(s), 3 bytes copied in (")
    assert outcome.log.endswith("s); 0 uploaded (0 bytes); 0 deleted in S3; 1 not uploaded when the job ended\n"
                                f"dslab stand-in: warning: {left}\n")
    assert storage.kinds("s3env") == [(["s3://bkt/ck/"],)]
    assert ("list", BUCKET, "ck/") in storage.calls


def test_a_checkpoint_config_with_nothing_in_s3_has_no_downloading_phase_and_the_script_not_told(tmp_path, clock,
                                                                                                 monkeypatch):
    """Nothing under the S3Uri: no Downloading phase; a script without checkpoint_s3_uri gets no URI for its S3."""
    monkeypatch.setattr("dslab.local.checkpoint_sync.POLL_SECONDS", 3600)
    (tmp_path / "s3" / BUCKET).mkdir(parents=True)
    storage = Recording(tmp_path)
    outcome = run_job(request(CheckpointConfig={"S3Uri": f"s3://{BUCKET}/ck/"}), storage,
                                      tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert [p["Status"] for p in outcome.describe["SecondaryStatusTransitions"]] == [
        "Starting", "Training", "Uploading", "Completed"]
    assert storage.kinds("s3env") == [([],)]
    # the copy-in's seconds are measured on the real clock (0.01 s on a loaded machine): the rest is exact
    assert re.fullmatch(r"dslab stand-in: checkpoint sync: 0 file\(s\), 0 bytes copied in \(\d+\.\d\d s\); 0 uploaded "
                        r"\(0 bytes\); 0 deleted in S3; 0 not uploaded when the job ended\n", outcome.log), outcome.log
    assert outcome.warnings == []


def test_a_sync_that_uploads_while_the_script_runs_stores_the_checkpoint_in_s3(tmp_path, clock, monkeypatch):
    monkeypatch.setattr("dslab.local.checkpoint_sync.POLL_SECONDS", 0.01)
    (tmp_path / "s3" / BUCKET).mkdir(parents=True)
    script = 'mkdir -p "$SAGEMAKER_BASE_DIR/checkpoints"\necho ck > "$SAGEMAKER_BASE_DIR/checkpoints/a.pt"\nsleep 0.3\n'
    storage = Recording(tmp_path)
    outcome = run_job(request(CheckpointConfig={"S3Uri": f"s3://{BUCKET}/ck/"}), storage,
                                      tmp_path / "work", code_dir=code(tmp_path, script))
    assert outcome.status == "Completed" and outcome.warnings == []
    assert storage.kinds("upload") == [(BUCKET, "ck/a.pt")]
    assert (tmp_path / "s3" / BUCKET / "ck" / "a.pt").read_bytes() == b"ck\n"


def test_a_sync_that_fails_fails_the_job_with_the_storages_refusal(tmp_path, clock, monkeypatch):
    monkeypatch.setattr("dslab.local.checkpoint_sync.POLL_SECONDS", 0.01)
    (tmp_path / "s3" / BUCKET).mkdir(parents=True)

    class Refusing(Recording):
        def upload(self, bucket, key, source):
            raise StorageError(f"uploading {source.name} to s3://{bucket}/{key}: AccessDenied")
    script = 'mkdir -p "$SAGEMAKER_BASE_DIR/checkpoints"\necho ck > "$SAGEMAKER_BASE_DIR/checkpoints/a.pt"\nsleep 0.3\n'
    outcome = run_job(request(CheckpointConfig={"S3Uri": f"s3://{BUCKET}/ck/"}), Refusing(tmp_path),
                                      tmp_path / "work", code_dir=code(tmp_path, script))
    assert (outcome.status, outcome.describe["FailureReason"]) == (
        "Failed", "ClientError: uploading a.pt to s3://bkt/ck/a.pt: AccessDenied")


def test_a_script_job_without_channels_gets_its_dataset_uri_for_its_own_s3(tmp_path, clock):
    """No channels: the dataset_uri hyperparameter (a JSON string) is what the script's S3 must hold; with a channel
    it is not (the channel provides the data)."""
    storage = Recording(tmp_path)
    run_job(request(hps={"dataset_uri": '"s3://bkt/datasets/tiny/"'}), storage, tmp_path / "work",
                            code_dir=code(tmp_path, "true\n"))
    assert storage.kinds("s3env") == [(["s3://bkt/datasets/tiny/"],)]
    put(tmp_path, "data/a.txt")
    storage = Recording(tmp_path)
    run_job(request(channels=[s3_channel()], hps={"dataset_uri": '"s3://bkt/datasets/tiny/"'}), storage,
                            tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert storage.kinds("s3env") == [([],)]
    storage = Recording(tmp_path)
    run_job(request(hps={"dataset_uri": "5"}), storage, tmp_path / "work",
                            code_dir=code(tmp_path, "true\n"))
    assert storage.kinds("s3env") == [([],)]


def test_metrics_of_every_host_give_the_cluster_view(tmp_path, clock):
    """Each host writes metrics-<host>.json: the job's metrics are the leader's with the cluster's sum."""
    script = 'echo "{\\"samples_per_second\\": 2}" > "$SM_OUTPUT_DATA_DIR/metrics-$SM_CURRENT_HOST.json"\n'
    outcome = run_job(request(count=2), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, script))
    assert outcome.metrics["samples_per_second"] == 2
    assert outcome.metrics["cluster"]["hosts"] == 2


def test_a_host_that_wrote_no_metrics_leaves_the_clusters_totals_unknown(tmp_path, clock):
    """Two instances, only algo-1 wrote metrics-algo-1.json: the leader's figures with a cluster of 2 hosts, 1
    reporting, and no totals."""
    script = ('[ "$SM_CURRENT_HOST" = algo-1 ] && echo "{\\"samples_per_second\\": 2}" > '
              '"$SM_OUTPUT_DATA_DIR/metrics-algo-1.json"\nexit 0\n')
    outcome = run_job(request(count=2), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, script))
    assert outcome.metrics == {"samples_per_second": 2, "cluster": {
        "hosts": 2, "hosts_reported": 1, "samples": None, "samples_per_second": None, "mb_per_second": None,
        "au_percent_per_host": {"algo-1": None}, "au_percent_min": None, "au_percent_per_epoch": None,
        "au_percent": None}}


def test_a_folder_named_like_the_metrics_file_is_no_metrics(tmp_path, clock):
    outcome = run_job(request(), Recording(tmp_path), tmp_path / "work",
                                      code_dir=code(tmp_path, 'mkdir "$SM_OUTPUT_DATA_DIR/metrics.json"\n'))
    assert (outcome.status, outcome.metrics) == ("Completed", None)


def test_a_job_wide_fastfile_mode_on_one_host_is_the_mounted_prefix_itself_even_when_sharded(tmp_path, clock):
    """TrainingInputMode FastFile (the channel says no mode): the container's config says File, and on one host a
    ShardedByS3Key channel is the whole view (a link to it), with nothing downloaded."""
    put(tmp_path, "data/a.txt")
    storage = Recording(tmp_path)
    outcome = run_job(request(mode="FastFile", channels=[s3_channel(distribution="ShardedByS3Key")]),
                                      storage, tmp_path / "work", code_dir=code(tmp_path, SEEN))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    base = tmp_path / "work" / "opt_ml"
    assert (base / "input" / "data" / "train").readlink() == tmp_path / "s3" / BUCKET / "data/"
    assert json.loads((base / "input" / "config" / "inputdataconfig.json").read_text()) == {
        "train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key", "RecordWrapperType": "None"}}
    assert (base / "seen.txt").read_text() == "./a.txt\n"
    assert storage.kinds("download") == [] and storage.kinds("fastfile") == [(BUCKET, "data/")]


def test_checkpoint_warnings_come_after_the_archives_clashes(tmp_path, clock, monkeypatch):
    """Two hosts that both wrote model/same.txt and each left a checkpoint the sync had not sent: the clash and then
    the checkpoint warning, in the outcome and in the log."""
    monkeypatch.setattr("dslab.local.checkpoint_sync.POLL_SECONDS", 3600)
    (tmp_path / "s3" / BUCKET).mkdir(parents=True)
    script = ('echo x > "$SM_MODEL_DIR/same.txt"\nmkdir -p "$SAGEMAKER_BASE_DIR/checkpoints"\n'
              'echo c > "$SAGEMAKER_BASE_DIR/checkpoints/$SM_CURRENT_HOST.pt"\n')
    outcome = run_job(request(count=2, CheckpointConfig={"S3Uri": f"s3://{BUCKET}/ck/"}), Recording(tmp_path),
                      tmp_path / "work", code_dir=code(tmp_path, script))
    assert outcome.warnings == [
        "model.tar.gz: same.txt was written by algo-1 and algo-2: SageMaker asks that hosts' names not clash and "
        "documents no order for merging them; the stand-in kept algo-1's",
        "CheckpointConfig: 2 file(s) in the LocalPath were not in S3 when the job ended (e.g. algo-1:algo-1.pt): "
        "SageMaker does not write to S3 once the job ends, so a restore will not find them; a script that needs them "
        "there waits until it sees them listed under the S3Uri"]
    assert outcome.log.count("dslab stand-in: warning: ") == 2


def test_without_a_training_input_mode_a_channel_is_copied_in_as_file(tmp_path, clock):
    """No TrainingInputMode in the request and none on the channel: File (the container's config says so, and the
    objects are downloaded)."""
    put(tmp_path, "data/a.txt", b"a")
    storage = Recording(tmp_path)
    outcome = run_job(request(mode=None, channels=[s3_channel()]), storage, tmp_path / "work",
                      code_dir=code(tmp_path, SEEN))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    base = tmp_path / "work" / "opt_ml"
    assert json.loads((base / "input" / "config" / "inputdataconfig.json").read_text()) == {
        "train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}}
    assert storage.kinds("download") == [(BUCKET, "data/a.txt", base / "input" / "data" / "train" / "a.txt")]
