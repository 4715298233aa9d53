"""The training script through the local container runner: every mode x format, failures, formats."""

from __future__ import annotations

import copy
import io
import json
import re
import subprocess
import sys
import tarfile

import pytest

from dslab.inputs import datasets
from dslab.core.requests import CHECKPOINT_METRIC_DEFINITIONS, METRIC_DEFINITIONS
from dslab.local.runner import FolderStorage, check_request, run_training_job
from dslab.aws.validation import RequestInvalid

from .helpers import BUCKET, TRAINING, make_stand_in, tiny_requests

sys.path.insert(0, str(TRAINING))
from dslab_train.pipeline import jpeg_comment_label  # noqa: E402
from dslab_train.records import (RecordError, decode_example, encode_example, read_recordio,  # noqa: E402
                                 read_tfrecords, recordio_frame, tfrecord_frame)

MODES = ["File", "FastFile", "Pipe", "FSx", "EFS", "Script"]


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    return make_stand_in(tmp_path_factory.mktemp("stand-in"))


def run(stand, request, tmp_path, **kwargs):
    return run_training_job(request, FolderStorage(stand.s3_root, stand.fs_root), tmp_path, code_dir=TRAINING, **kwargs)


@pytest.mark.parametrize("dataset", ["tiny-jpg", "tiny-tfr"])
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_and_format_reads_every_sample_with_its_label(stand, tmp_path, mode, dataset):
    epochs = 2  # Pipe must cross to a second FIFO
    request = tiny_requests(epochs=epochs, modes=MODES)[(dataset, mode)]
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Completed", outcome.describe.get("FailureReason", "") + outcome.log[-2000:]
    metrics = outcome.metrics
    assert metrics["samples"] == stand.images * epochs
    assert metrics["epochs"] == epochs and len(metrics["epoch_seconds"]) == epochs
    assert {int(k): v for k, v in metrics["label_counts"].items()} == {k: v * epochs for k, v in stand.class_counts.items()}
    expected_mode = mode if mode in ("Pipe", "Script") else "File"
    assert metrics["input_mode"] == expected_mode
    if mode == "Script":  # no channel: the script listed and read the prefix itself, through S3's API
        assert "InputDataConfig" not in request and metrics["s3_client"] == "boto3"
        assert metrics["dataset_uri"] == request["HyperParameters"]["dataset_uri"].strip('"')
        shards = len(list(stand.tfr.glob("*.tfrecord")))
        assert metrics["s3_requests"] == 1 + epochs * (stand.images if dataset == "tiny-jpg" else shards)
    phases = [t["Status"] for t in outcome.describe["SecondaryStatusTransitions"]]
    assert phases[0] == "Starting" and phases[-1] == "Completed" and "Training" in phases and "Uploading" in phases
    assert ("Downloading" in phases) == (mode == "File")
    assert outcome.describe["BillableTimeInSeconds"] >= 1
    assert outcome.artifacts["model.tar.gz"].startswith(f"s3://{BUCKET}/output/tiny/")
    with tarfile.open(stand.s3_root / BUCKET / outcome.artifacts["model.tar.gz"].split(f"{BUCKET}/")[1]) as tar:
        assert "model.json" in tar.getnames()
    for key in ("samples_per_second", "mb_per_second", "time_to_first_batch_seconds"):
        assert metrics[key] > 0


def test_pipe_jpg_is_recordio_wrapped_and_tfrecord_is_not():
    requests = tiny_requests()
    assert requests[("tiny-jpg", "Pipe")]["InputDataConfig"][0]["RecordWrapperType"] == "RecordIO"
    assert requests[("tiny-tfr", "Pipe")]["InputDataConfig"][0]["RecordWrapperType"] == "None"


def test_metric_lines_match_the_metric_definitions(stand, tmp_path):
    outcome = run(stand, tiny_requests()[("tiny-tfr", "File")], tmp_path)
    for definition in METRIC_DEFINITIONS:
        if definition["Name"] == "epoch_seconds" or definition["Name"] == "data_stall_seconds":
            continue
        values = re.findall(definition["Regex"], outcome.log)
        assert values, f"no line for {definition['Name']}"
        float(values[-1])
    assert float(re.findall(METRIC_DEFINITIONS[-1]["Regex"], outcome.log)[-1]) == stand.images
    # The file lists a checkpoint trial's too (tests/test_checkpoint.py checks their lines).
    assert json.loads((TRAINING / "metric_definitions.json").read_text()) == METRIC_DEFINITIONS + CHECKPOINT_METRIC_DEFINITIONS


def test_au_follows_the_emulated_compute(stand, tmp_path):
    # Compute far slower than reading: the accelerator is busy nearly all the time. Six steps of 0.25 s: the
    # first batch (the script's start, a few tenths of a second on a loaded machine) stays a small part of it.
    request = tiny_requests(compute={"batch_size": 16, "seconds_per_batch": 0.25})[("tiny-tfr", "EFS")]
    metrics = run(stand, request, tmp_path).metrics
    assert metrics["au_percent"] > 80
    assert metrics["data_stall_seconds"] < 0.2 * sum(metrics["epoch_seconds"])
    # End to end (first batch included) is lower than AU, but compute still dominates the epoch.
    assert 60 < metrics["end_to_end_efficiency_percent"] <= 100


def test_au_is_the_mean_of_the_epochs_au_as_dlio_computes_it(stand, tmp_path):
    """DLIO (dlio_benchmark/utils/statscounter.py at 03b5ed329fe8): per epoch, the steps' compute after the first
    over the epoch's time after the first step; the run's AU is those epochs' mean (train_au_mean_percentage), and
    the script keeps each epoch's (train_au_percentage)."""
    request = tiny_requests(epochs=3, compute={"batch_size": 16, "seconds_per_batch": 0.02})[("tiny-tfr", "File")]
    metrics = run(stand, request, tmp_path).metrics
    epochs = metrics["per_epoch"]
    assert len(epochs) == 3 and all(e["steps"] == 6 for e in epochs)
    dlio = [100 * e["compute_seconds"] / e["measured_seconds"] for e in epochs]
    assert metrics["au_percent_per_epoch"] == pytest.approx(dlio) and [e["au_percent"] for e in epochs] == pytest.approx(dlio)
    assert metrics["au_percent"] == pytest.approx(sum(dlio) / 3)
    assert all(0 < e["compute_seconds"] and e["measured_seconds"] < e["epoch_seconds"] for e in epochs)   # 1st step out


# ---- failures ----------------------------------------------------------------------------------

def test_jpg_through_pipe_without_recordio_fails_with_the_fix(stand, tmp_path):
    request = tiny_requests(record_wrapper="None")[("tiny-jpg", "Pipe")]
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Failed"
    assert "RecordWrapperType" in outcome.describe["FailureReason"] and "RecordIO" in outcome.describe["FailureReason"]


def test_wrong_format_is_reported(stand, tmp_path):
    request = copy.deepcopy(tiny_requests()[("tiny-jpg", "EFS")])
    request["HyperParameters"]["dataset_format"] = '"tfrecord"'
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Failed"
    assert "dataset_format=tfrecord" in outcome.describe["FailureReason"]


def test_empty_channel_fails_with_a_clear_reason(stand, tmp_path):
    (stand.fs_root / "fs-0fedcba9876543210" / "datasets" / "empty").mkdir(parents=True, exist_ok=True)
    request = copy.deepcopy(tiny_requests()[("tiny-jpg", "EFS")])
    request["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]["DirectoryPath"] = "/datasets/empty"
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Failed" and "is empty" in outcome.describe["FailureReason"]
    s3_request = copy.deepcopy(tiny_requests()[("tiny-jpg", "File")])
    s3_request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] = f"s3://{BUCKET}/datasets/nothing-here/"
    outcome = run(stand, s3_request, tmp_path)
    assert outcome.status == "Failed" and "No S3 objects found" in outcome.describe["FailureReason"]


def test_corrupted_shard_is_reported_with_shard_and_offset(stand, tmp_path):
    shards = sorted((stand.s3_root / BUCKET / "datasets" / "tiny-tfr").glob("*.tfrecord"))
    bad_dir = stand.s3_root / BUCKET / "datasets" / "bad-tfr"
    bad_dir.mkdir(parents=True, exist_ok=True)
    data = bytearray(shards[1].read_bytes())
    offsets = [offset for offset, _ in read_tfrecords(io.BytesIO(bytes(data)), "x")]
    data[offsets[3] + 2] ^= 0xFF  # damage the length of the fourth record
    (bad_dir / shards[1].name).write_bytes(bytes(data))
    (bad_dir / shards[0].name).write_bytes(shards[0].read_bytes())
    request = copy.deepcopy(tiny_requests()[("tiny-tfr", "File")])
    request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] = f"s3://{BUCKET}/datasets/bad-tfr/"
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Failed"
    reason = outcome.describe["FailureReason"]
    assert shards[1].name in reason and f"offset {offsets[3]}" in reason and "CRC" in reason
    failure_file = tmp_path / "opt_ml" / "output" / "failure"
    assert failure_file.read_text().strip() in reason


def test_real_model_without_torch_says_what_to_do(stand, tmp_path):
    pytest.importorskip is not None
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed here")
    except ImportError:
        pass
    request = tiny_requests(compute="resnet50")[("tiny-tfr", "EFS")]
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Failed" and "torch" in outcome.describe["FailureReason"]


@pytest.mark.parametrize("mutate, words", [
    (lambda r: r["InputDataConfig"][0].update(InputMode="Stream"), ["InputMode", "'Stream'"]),
    (lambda r: r["InputDataConfig"][0]["DataSource"]["S3DataSource"].update(S3DataType="ManifestFile"), ["FastFile", "S3Prefix"]),
    (lambda r: r.update(TrainingJobName="x" * 64), ["TrainingJobName"]),
    (lambda r: r["ResourceConfig"].update(InstanceType="ml.p99.huge"), ["InstanceType"]),
])
def test_runner_rejects_what_sagemaker_rejects(mutate, words):
    request = copy.deepcopy(tiny_requests()[("tiny-jpg", "FastFile")])
    mutate(request)
    with pytest.raises(RequestInvalid) as err:
        check_request(request)
    for word in words:
        assert word in str(err.value)


def test_runner_rejects_pipe_with_efs():
    request = copy.deepcopy(tiny_requests()[("tiny-jpg", "EFS")])
    request["InputDataConfig"][0]["InputMode"] = "Pipe"
    with pytest.raises(RequestInvalid, match="Pipe input mode is not supported with an EFS"):
        check_request(request)


def test_max_runtime_stops_the_job(stand, tmp_path):
    request = tiny_requests(compute={"batch_size": 16, "seconds_per_batch": 5.0})[("tiny-jpg", "EFS")]
    request["StoppingCondition"]["MaxRuntimeInSeconds"] = 1
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Stopped" and outcome.describe["SecondaryStatus"] == "MaxRuntimeExceeded"


# ---- formats -------------------------------------------------------------------------------------

def test_tfrecord_round_trip_is_bit_exact(stand):
    originals = {p.read_bytes() for p in stand.jpg.rglob("*.jpg")}
    seen = set()
    for shard in sorted(stand.tfr.glob("*.tfrecord")):
        with open(shard, "rb") as handle:
            for _, payload in read_tfrecords(handle, shard.name, verify_data=True):
                image, label = decode_example(payload)
                assert label == jpeg_comment_label(image)
                seen.add(image)
    assert seen == originals
    assert decode_example(encode_example(b"\xff\xd8abc", 300)) == (b"\xff\xd8abc", 300)
    framed = tfrecord_frame(b"payload")
    assert list(read_tfrecords(io.BytesIO(framed), "x", verify_data=True)) == [(0, b"payload")]


def test_corrupted_payload_is_caught_when_verifying():
    framed = bytearray(tfrecord_frame(b"some payload bytes"))
    framed[15] ^= 1
    with pytest.raises(RecordError, match="data"):
        list(read_tfrecords(io.BytesIO(bytes(framed)), "shard-x", verify_data=True))


def test_recordio_round_trip_including_the_magic_word_inside_data():
    magic = (0xCED7230A).to_bytes(4, "little")
    records = [b"", b"abc", magic + b"xyz" + magic, b"1234" + magic + b"5678" * 3]
    stream = b"".join(recordio_frame(r) for r in records)
    assert [data for _, data in read_recordio(io.BytesIO(stream), "x")] == records


def test_generation_is_deterministic_and_caltech_like(tmp_path):
    a = datasets.generate(tmp_path / "a", images=40, classes=4, seed=3)
    b = datasets.generate(tmp_path / "b", images=40, classes=4, seed=3)
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.jpg"))
    assert files_a == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.jpg"))
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files_a)
    assert len(files_a) == 40 and len({f.parent for f in files_a}) == 4
    assert 25 < a.bytes / a.images / 1024 < 55  # mean size near Caltech-256's 39 KiB
    assert a.bytes == b.bytes


def test_replicate_makes_copies_without_reencoding(stand, tmp_path):
    info = datasets.replicate(stand.tfr, 3, tmp_path / "x3")
    shards = list((tmp_path / "x3").rglob("*.tfrecord"))
    assert info["copies"] == 3 and len(shards) == 3 * len(list(stand.tfr.glob("*.tfrecord")))
    assert shards[0].read_bytes() == (stand.tfr / shards[0].name).read_bytes()


def test_training_script_imports_nothing_outside_its_allowance():
    import ast
    allowed = {"numpy", "PIL", "torch", "torchvision", "dslab_train", "crc32c", "dslab_report"}
    stdlib = set(sys.stdlib_module_names)
    for path in list(TRAINING.rglob("*.py")):
        # The helper users' scripts import must run in any image: the standard library only.
        permitted = stdlib | ({"__future__"} if path.name == "dslab_report.py" else allowed | {"__future__"})
        if path.name == "s3source.py":
            # Script mode only: boto3 is in every PyTorch training image, the S3 Connector in 2.5-2.10 (taken
            # where it is installed); both imported inside the functions that Script mode calls.
            permitted = permitted | {"boto3", "botocore", "s3torchconnector"}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module.split(".")[0]]
            else:
                continue
            for module in modules:
                assert module in permitted, f"{path.name} imports {module}"


def test_job_run_local_cli(stand, tmp_path):
    request = tiny_requests()[("tiny-tfr", "FSx")]
    (tmp_path / "req.json").write_text(json.dumps(request))
    result = subprocess.run([sys.executable, "-m", "dslab.cli", "job", "run-local", "--request", str(tmp_path / "req.json"),
                             "--s3-root", str(stand.s3_root), "--fs-root", str(stand.fs_root), "--out", str(tmp_path / "out"),
                             "--code", str(TRAINING)], capture_output=True, text=True, cwd=TRAINING.parent)
    assert result.returncode == 0, result.stderr
    describe = json.loads((tmp_path / "out" / "describe.json").read_text())
    assert describe["TrainingJobStatus"] == "Completed"
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["samples"] == stand.images
    assert (tmp_path / "out" / "model.tar.gz").exists()
    bad = subprocess.run([sys.executable, "-m", "dslab.cli", "job", "run-local", "--request", str(tmp_path / "nope.json"),
                          "--s3-root", str(stand.s3_root), "--out", str(tmp_path / "o2")], capture_output=True, text=True,
                         cwd=TRAINING.parent)
    assert bad.returncode == 2 and "--request" in bad.stderr


def test_shuffle_buffer_starts_early_and_yields_every_record_once():
    """A Pipe FIFO or a shard is read sequentially: the shuffle buffer must not wait to be full
    (1,024 records) before the first record, or time to first batch is most of a small epoch."""
    import random

    from dslab_train.pipeline import SHUFFLE_INITIAL, _shuffled

    consumed = []

    def source(n):
        for i in range(n):
            consumed.append(i)
            yield i

    stream = _shuffled(source(5000), 1024, random.Random(3))
    first = next(stream)
    assert len(consumed) <= SHUFFLE_INITIAL + 1 and first in consumed
    rest = list(stream)
    assert sorted([first, *rest]) == list(range(5000))
    assert [first, *rest][:50] != list(range(50))            # still shuffled
    for n, size in ((0, 10), (3, 1024), (50, 1)):
        assert sorted(_shuffled(iter(range(n)), size, random.Random(0))) == list(range(n))


# One case per way a host comes to its share: SageMaker's shard (File, FastFile), a replicated stream
# read by rank (Pipe), a shared directory read by rank (FSx; EFS is the same path), the script's own list.
@pytest.mark.parametrize("mode, distribution", [
    ("File", "ShardedByS3Key"), ("FastFile", "ShardedByS3Key"), ("Pipe", "FullyReplicated"), ("FSx", None), ("Script", None)])
def test_every_host_of_a_cluster_reads_its_share_once(stand, tmp_path, mode, distribution):
    """Two instances at once, each its own process and /opt/ml: where SageMaker shards (ShardedByS3Key) each
    host reads what it was given; where it does not (FullyReplicated, FSx, EFS, no channel) each reads its
    share by SM_HOSTS/SM_CURRENT_HOST. Together they read every sample exactly once per epoch."""
    overrides = {"instance_count": 2, "modes": [mode], **({"distribution": distribution} if distribution else {})}
    request = tiny_requests(**overrides)[("tiny-jpg", mode)]
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Completed", outcome.describe.get("FailureReason", "") + outcome.log[-2000:]
    cluster = outcome.metrics["cluster"]
    assert cluster["hosts"] == 2 and cluster["samples"] == stand.images
    assert set(cluster["au_percent_per_host"]) == {"algo-1", "algo-2"} and cluster["samples_per_second"] > 0
    assert outcome.metrics["hosts"] == 2 and outcome.metrics["accelerators"] == 1
    # BillableTimeInSeconds is one instance's wall clock (its training time), not the two hosts' sum.
    d = outcome.describe
    assert "[algo-2] dslab: mode=" in outcome.log and d["BillableTimeInSeconds"] == d["TrainingTimeInSeconds"] >= 1


def test_each_host_of_a_cluster_writes_its_own_metrics_and_the_first_the_model(stand, tmp_path):
    """SageMaker merges the hosts' /opt/ml/output/data and /opt/ml/model into one archive each: "If multiple
    containers in a single training job write to this directory they should ensure no file/directory names
    clash. SageMaker AI aggregates the result in a TAR file." Every host's figures reach the job's
    output.tar.gz under its own name, and the one model is the first host's."""
    request = tiny_requests(instance_count=2, modes=["File"])[("tiny-jpg", "File")]
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Completed", outcome.describe.get("FailureReason", "") + outcome.log[-2000:]
    archives = {}
    for name, uri in outcome.artifacts.items():
        with tarfile.open(stand.s3_root / BUCKET / uri.split(f"{BUCKET}/")[1]) as tar:
            archives[name] = {m.name: json.loads(tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()}
    assert set(archives["output.tar.gz"]) == {"metrics-algo-1.json", "metrics-algo-2.json"}
    assert sum(m["samples"] for m in archives["output.tar.gz"].values()) == stand.images
    assert {m["host"] for m in archives["output.tar.gz"].values()} == {"algo-1", "algo-2"}
    assert list(archives["model.tar.gz"]) == ["model.json"] and outcome.warnings == []
    assert outcome.metrics["cluster"]["samples"] == stand.images and outcome.metrics["host"] == "algo-1"


def test_a_script_job_with_an_unknown_s3_client_fails_naming_the_hyperparameter(stand, tmp_path):
    request = tiny_requests(modes=["Script"], hyperparameters={"s3_client": "nope"})[("tiny-tfr", "Script")]
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Failed" and "s3_client='nope'" in outcome.describe["FailureReason"]
    assert "boto3" in outcome.describe["FailureReason"]


def test_an_instance_emulates_every_accelerator_it_has(stand, tmp_path):
    """ml.p3.8xlarge has four V100s: each step takes four batches in one batch's time."""
    request = tiny_requests(modes=["File"], instance_type="ml.p3.8xlarge",
                            compute={"batch_size": 8, "seconds_per_batch": 0.01})[("tiny-tfr", "File")]
    assert json.loads(request["HyperParameters"]["accelerators"]) == 4
    outcome = run(stand, request, tmp_path)
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    assert outcome.metrics["accelerators"] == 4 and outcome.metrics["batch_size"] == 32
    assert "accelerators=4" in outcome.log
