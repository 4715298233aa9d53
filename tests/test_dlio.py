"""MLPerf Storage's DLIO workload files, accepted as published (issue 30): the files read unchanged with every key
spelling in circulation, compute as DLIO emulates it and AU as MLPerf Storage computes it, datasets of the workload's
shape in npz, tfrecord and jpeg read by the training script in every mode, `dslab size/estimate/recommend --workload`
on the one model, and `workload:` in an experiment. AU is DLIO's (dlio_benchmark/utils/statscounter.py at 03b5ed329fe8):
the epochs' mean of each epoch's compute over its time, written out here from DLIO's code, not from the lab's."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from dslab.cli import main
from dslab.core.workloads.dlio import parse_workload
from dslab.core.errors import ConfigError
from dslab.core.model.estimate import TRAIN_FIXED, estimate_mode
from dslab.core.experiment import parse_experiment
from dslab.core.facts.prices import PriceTable
from dslab.core.requests import plan
from dslab.inputs import datasets
from dslab.inputs.experiment_file import load_experiment
from dslab.local.runner import FolderStorage, run_training_job

from .helpers import TRAINING, StandIn, lab_environment

sys.path.insert(0, str(TRAINING))
from dslab_train.crc32c import masked_crc32c  # noqa: E402
from dslab_train.records import decode_example, is_dlio_example, read_tfrecords  # noqa: E402

DLIO = Path(__file__).resolve().parent.parent / "dslab" / "contracts" / "dlio"
UNET3D, RESNET50, COSMOFLOW = DLIO / "unet3d_a100.yaml", DLIO / "resnet50_a100.yaml", DLIO / "cosmoflow_a100.yaml"


def workload(path: Path):
    return parse_workload(yaml.safe_load(path.read_text()), str(path))


def run_cli(capsys, *argv):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(code, err, *words) -> bool:
    line = err.strip()
    return code == 2 and "\n" not in line and all(w in line for w in words)


# ---- the files, as published -----------------------------------------------------------------------

def test_the_vendored_workload_files_are_byte_for_byte_as_published():
    sources = json.loads((DLIO / "sources.json").read_text())["files"]
    assert set(sources) == {p.name for p in DLIO.glob("*.yaml")}
    for name, entry in sources.items():
        data = (DLIO / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], f"{name} changed: vendored files stay as published"
        # The git blob id: what `git ls-tree <commit> <path>` shows in the source repository.
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == entry["git_blob"], name
        assert entry["repository"].startswith("https://github.com/") and len(entry["commit"]) == 40


def test_the_three_a100_training_workloads_read_as_mlperf_storage_publishes_them():
    """The figures of each file, and MLPerf Storage's AU thresholds: "3D U-Net ... 90%", "ResNet-50 ... 90%",
    "CosmoFlow ... 70%" (mlcommons/storage Submission_guidelines.md)."""
    unet, resnet, cosmo = workload(UNET3D), workload(RESNET50), workload(COSMOFLOW)
    assert (unet.format, unet.num_files, unet.samples_per_file, unet.record_bytes, unet.record_bytes_stdev) == \
        ("npz", 168, 1, 146600628, 68341808)
    assert (unet.batch_size, unet.computation_time, unet.epochs, unet.read_threads, unet.data_loader, unet.au) == \
        (7, 0.636, 5, 4, "pytorch", 0.90)
    assert (resnet.format, resnet.num_files, resnet.samples_per_file, resnet.record_bytes) == ("tfrecord", 1024, 1251, 114660.07)
    assert (resnet.batch_size, resnet.computation_time, resnet.read_threads, resnet.au) == (400, 0.435, 8, 0.90)
    assert (cosmo.format, cosmo.num_files, cosmo.record_bytes, cosmo.record_bytes_stdev) == ("tfrecord", 524288, 2828486, 71311)
    assert (cosmo.batch_size, cosmo.computation_time, cosmo.au_percent) == (1, 0.00551, 70.0)
    shape = cosmo.shape()
    assert (shape.files, shape.samples, shape.bytes) == (524288, 524288, 524288 * 2828486)
    assert unet.rate == pytest.approx(7 / 0.636) and resnet.rate == pytest.approx(400 / 0.435)


def test_only_the_key_spellings_a_dlio_release_read_are_read():
    """mlcommons/storage's v0.5 unet3d.yaml writes `model: unet3d`, `record_length`, `record_length_stdev` (read by DLIO up
    to v2.0.0); the A100 file `record_length_bytes` (v2.0.1 on). DLIO's resnet50_tf.yaml at d22548d writes
    `record_length_std` and resnet50_v100.yaml at 6027937 `epoch`, which no DLIO release reads (LoadConfig there reads
    record_length_stdev and train.epochs): DLIO ran them with a stdev of 0 and 1 epoch, and so does the lab, saying so."""
    old = workload(DLIO / "unet3d@db54a51.yaml")
    new = parse_workload({**yaml.safe_load(UNET3D.read_text())}, "unet3d_a100.yaml")
    assert old.name == new.name == "unet3d"
    assert (old.record_bytes, old.record_bytes_stdev, old.num_files, old.epochs) == (146600628, 68341808, 168, 5)
    assert old.dataset_name == new.dataset_name          # one shape, one dataset (the A100 file's compute differs)
    assert any("record_length: 146,600,628 bytes (read by DLIO up to v2.0.0)" in line for line in old.used)
    assert any("(read by DLIO v2.0.1 on)" in line for line in new.used)
    tf = workload(DLIO / "resnet50_tf@d22548d.yaml")
    assert tf.record_bytes_stdev == 0 and tf.data_loader == "tensorflow"   # DLIO's defaults
    assert any(line.startswith("dataset.record_length_std: no DLIO release reads it") for line in tf.ignored)
    v100 = yaml.safe_load((DLIO / "resnet50_v100@6027937.yaml").read_text())
    v100["dataset"]["format"] = "tfrecord"               # the file is png: its spellings, read in a format the lab makes
    spelled = parse_workload(v100, "resnet50_v100.yaml")
    assert spelled.epochs == 1 and any(line.startswith("train.epoch: no DLIO release reads it") for line in spelled.ignored)


def test_exclude_start_steps_is_honoured_at_dlios_defaults_and_refused_otherwise():
    document = yaml.safe_load(UNET3D.read_text())
    honoured = parse_workload({**document, "output": {"folder": "out", "metric": {"exclude_start_steps": 1,
                                                                                  "exclude_end_steps": 0}}}, "w.yaml")
    assert "output.metric.exclude_start_steps: 1" in honoured.used
    assert any(line.startswith("output (folder)") for line in honoured.ignored)
    with pytest.raises(ConfigError, match=r"output\.metric\.exclude_start_steps: 3: the lab computes AU as DLIO does"):
        parse_workload({**document, "output": {"metric": {"exclude_start_steps": 3}}}, "w.yaml")
    with pytest.raises(ConfigError, match=r"metric\.exclude_start_steps: is read by DLIO under output\.metric"):
        parse_workload({**document, "metric": {"au": 0.9, "exclude_start_steps": 1}}, "w.yaml")


def test_a_workload_under_mlperfs_dataset_size_says_so_and_one_that_trains_no_step_is_refused(capsys):
    """`size --workload unet3d_a100.yaml --count 8` sized 168 files for 64 accelerators: 0 steps an epoch. MLPerf
    Storage's datasize step asks max(5 x the hosts' memory, 500 steps x accelerators x batch) (Submission_guidelines.md;
    mlpstorage rules.py): the figures say which count they use against MLPerf's; no step at all is refused."""
    unet = workload(UNET3D)
    assert unet.mlperf_files(1, 61, 1) == max(5 * 61 * 2**30 // 146600628, 500 * 1 * 7) == 3500
    code, _, err = run_cli(capsys, "size", "--workload", UNET3D, "--instance", "ml.p4d.24xlarge", "--count", "8")
    assert one_line_error(code, err, "--instance-count", "0 steps an epoch on 64 accelerators", "337,502 files"), err
    result = sized(capsys, "--workload", UNET3D, "--instance", "ml.p3.2xlarge")
    assert result["files"] == 168
    assert any("these figures use" in n and "168 files, 24 steps an epoch" in n and "3,500 files" in n
               for n in result["premise"]["notes"])


def test_data_reader_is_reader_as_older_files_spell_it():
    """DLIO's first workload files name the reader section `data_reader` (DLIO reads it first); one file giving both
    is refused, naming them."""
    document = yaml.safe_load(UNET3D.read_text())
    reader = document.pop("reader")
    older = parse_workload({**document, "data_reader": reader}, "unet3d_data_reader.yaml")
    new = workload(UNET3D)
    assert (older.batch_size, older.read_threads, older.data_loader) == (new.batch_size, new.read_threads, new.data_loader) \
        == (7, 4, "pytorch")
    assert older.rate == new.rate and older.dataset_name == new.dataset_name
    assert any(line.startswith("data_reader.batch_size: 7") for line in older.used)
    extra = parse_workload({**document, "data_reader": {**reader, "prefetch_size": 2}}, "x.yaml")
    assert any(line.startswith("data_reader.prefetch_size: ") for line in extra.ignored)   # its ignored keys named so
    with pytest.raises(ConfigError, match=r"data_reader.*same section"):
        parse_workload({**document, "reader": reader, "data_reader": reader}, "x.yaml")
    with pytest.raises(ConfigError, match=r"data_reader\.batch_sise.*did you mean 'batch_size'"):
        parse_workload({**document, "data_reader": {**reader, "batch_sise": 7}}, "x.yaml")


def test_evaluation_is_ignored_in_one_line(capsys, tmp_path):
    """DLIO's unet3d.yaml carries an evaluation section (eval_time, epochs_between_evals) and dataset.num_files_eval:
    the lab measures the training epochs, and says so for each."""
    document = yaml.safe_load(UNET3D.read_text())
    document["evaluation"] = {"eval_time": 11.572, "epochs_between_evals": 2}
    document["dataset"]["num_files_eval"] = 42
    (tmp_path / "eval.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    code, out, err = run_cli(capsys, "size", "--workload", tmp_path / "eval.yaml", "--explain")
    assert code == 0, err
    ignored = [line for line in out.splitlines() if line.startswith("ignored: ")]
    assert [line for line in ignored if line.startswith("ignored: evaluation")] == \
        ["ignored: evaluation (eval_time, epochs_between_evals): evaluation passes; the lab measures the training epochs"]
    assert "ignored: dataset.num_files_eval: evaluation files" in ignored
    assert workload(UNET3D).shape() == parse_workload(document, "eval.yaml").shape()   # nothing it reads changed


def test_a_format_the_lab_cannot_read_is_refused_with_the_formats_it_can(capsys):
    code, _, err = run_cli(capsys, "size", "--workload", DLIO / "resnet50_v100@6027937.yaml")
    assert one_line_error(code, err, "dataset.format", "'png'", "npz, tfrecord, jpeg"), err


def test_every_ignored_field_is_said_in_one_line(capsys):
    """unet3d_a100_s3.yaml carries storage_options (keys and an endpoint) and checkpointing: neither changes what the
    lab measures, and each is named."""
    code, out, _ = run_cli(capsys, "size", "--workload", DLIO / "unet3d_a100_s3.yaml", "--count", "2", "--explain")
    assert code == 0
    ignored = [line for line in out.splitlines() if line.startswith("ignored: ")]
    assert any(line.startswith("ignored: storage (storage_type, storage_root, storage_options)") for line in ignored)
    assert any(line.startswith("ignored: checkpoint (checkpoint_folder") for line in ignored)
    assert any(line.startswith("ignored: dataset.record_length_bytes_resize") for line in ignored)
    assert not any("num_files_train" in line or "batch_size" in line for line in ignored)


def test_a_typo_in_a_field_the_lab_reads_is_refused_naming_the_key(capsys, tmp_path):
    text = COSMOFLOW.read_text().replace("num_files_train", "num_file_train")
    (tmp_path / "typo.yaml").write_text(text)
    code, _, err = run_cli(capsys, "size", "--workload", tmp_path / "typo.yaml")
    assert one_line_error(code, err, "dataset.num_file_train", "did you mean 'num_files_train'"), err
    (tmp_path / "ckpt.yaml").write_text("model: {name: llama_7b}\nworkflow: {train: False, checkpoint: True}\n"
                                        "checkpoint: {checkpoint_folder: x}\n")
    code, _, err = run_cli(capsys, "size", "--workload", tmp_path / "ckpt.yaml")   # read as a checkpointing workload
    assert one_line_error(code, err, "checkpoint.num_checkpoints_write", "nothing to write or read"), err


# ---- compute as DLIO emulates it, AU as DLIO computes it -------------------------------------------

def dlio_epoch_au(step_compute: list[float], step_proc: list[float], epoch_seconds: float, exclude_start: int = 1) -> float:
    """One epoch's AU (percent) as DLIO computes it, written from dlio_benchmark/utils/statscounter.py at 03b5ed329fe8,
    compute_metrics_train (lines 340-349): total_compute_time is the steps' compute past the first
    metric_exclude_start_steps (default 1), total_time the epoch's wall time less those steps' load and compute."""
    total_compute_time = sum(step_compute[exclude_start:])
    total_time = epoch_seconds - sum(step_proc[:exclude_start])
    return 0.0 if total_compute_time == 0 else 100 * total_compute_time / total_time


def dlio_train_au_mean(au_per_rank_and_epoch: list[list[float]]) -> float:
    """end_run (lines 148-152): train_au = allreduce(train_au) / comm.size (per epoch, over the ranks), then
    train_au_mean_percentage = np.mean(train_au) (over the epochs)."""
    ranks = np.array(au_per_rank_and_epoch, dtype=float)
    train_au = ranks.sum(axis=0) / len(ranks)
    return float(np.mean(train_au))


def test_au_is_dlios_mean_of_the_epochs_au_not_compute_over_the_whole_run():
    """CosmoFlow on one ml.p4d.24xlarge with FSx Persistent 2 that feeds it once warm: the first epoch lazy-loads
    from S3 and takes 4.6 times the others. DLIO (whose AU MLPerf Storage reports) averages the epochs' AU, so that
    epoch weighs one fifth: 84%, where compute over the run's whole time would say 58%."""
    from dslab.core.model.provisioning import FsxConfig, Provisioning
    w = workload(COSMOFLOW)
    accelerators, hosts = 8, 1
    e = estimate_mode("FSx", w.shape(), instance_type="ml.p4d.24xlarge", epochs=w.epochs, rate=w.rate,
                      prices=PriceTable(), readers=w.readers(accelerators),
                      provisioning=Provisioning(fsx=FsxConfig.persistent2(1000, 4800)))
    assert len(e.epoch_seconds) == 5 and e.epoch_seconds[0] > 4 * e.epoch_seconds[1] == 4 * e.epoch_seconds[4]
    assert e.training == pytest.approx(TRAIN_FIXED + sum(e.epoch_seconds))   # the framework's start
    # Each simulated accelerator (a rank) takes batch_size samples per step, computation_time each: every one of
    # the 8 ranks has the same steps, and each step of an epoch takes that epoch's share of its wall time.
    steps = w.num_files * w.samples_per_file // (hosts * accelerators) // w.batch_size
    per_rank = [[dlio_epoch_au([w.computation_time] * steps, [t / steps] * steps, t) for t in e.epoch_seconds]] * accelerators
    expected = dlio_train_au_mean(per_rank)
    assert e.au_percent == pytest.approx(expected, rel=1e-3)
    assert e.au_percent_per_epoch == pytest.approx(per_rank[0], rel=1e-3)
    assert expected == pytest.approx(84.4, abs=0.1)
    compute_over_running = 100 * steps * w.computation_time * w.epochs / sum(e.epoch_seconds)
    assert compute_over_running == pytest.approx(58.4, abs=0.1)   # what the lab said before
    # FastFile reads every epoch alike: there the two agree.
    same = estimate_mode("FastFile", w.shape(), instance_type="ml.p4d.24xlarge", epochs=w.epochs, rate=w.rate,
                         prices=PriceTable(), readers=w.readers(accelerators))
    assert len(set(same.au_percent_per_epoch)) == 1 and same.au_percent == pytest.approx(same.au_percent_per_epoch[0])


def test_the_training_helper_averages_the_epochs_au_as_dlio_does(tmp_path):
    """dslab_report.Meter (training/train.py's definitions): a slow first epoch (each batch 3 s late) and a fast second
    (0.5 s late), a 1 s step. Each epoch's AU leaves its first step out, and the run's is their mean."""
    sys.path.insert(0, str(TRAINING))
    from dslab_report import Meter, dlio_au
    now = [0.0]
    waits = {0: 3.0, 1: 0.5}

    def loader(epoch):
        for _ in range(5):
            now[0] += waits[epoch]
            yield [0] * 4

    meter = Meter(output_dir=tmp_path, clock=lambda: now[0])
    for epoch in (0, 1):
        for _ in meter.epoch(loader(epoch)):
            now[0] += 1.0
    summary = meter.summary()
    epochs = []
    for epoch in (0, 1):
        step_proc = [waits[epoch] + 1.0] * 5   # DLIO's proc: from start_loading to the step's end
        epochs.append(dlio_epoch_au([1.0] * 5, step_proc, sum(step_proc)))
    assert summary["au_percent_per_epoch"] == pytest.approx(epochs) == [25.0, 200 / 3]
    assert summary["au_percent"] == pytest.approx(dlio_train_au_mean([epochs])) == pytest.approx(45.83, abs=0.01)
    assert 100 * 8 / (16 + 6) != pytest.approx(summary["au_percent"], abs=1)   # not the two epochs' compute over time
    assert dlio_au([None, 50.0, 70.0]) == 60.0 and dlio_au([None]) is None   # an epoch of one step measures nothing


def test_a_clusters_au_is_every_hosts_per_epoch_averaged_then_the_epochs_mean():
    """DLIO's allreduce over the ranks per epoch, then the epochs' mean: what the report judges a workload's AU by."""
    from dslab.core.job_metrics import job_au_percent, job_metrics
    from dslab.report import aggregate
    hosts = {"metrics-algo-1.json": {"samples": 10, "samples_per_second": 5.0, "au_percent": 70.0,
                                     "au_percent_per_epoch": [40.0, 100.0]},
             "metrics-algo-2.json": {"samples": 10, "samples_per_second": 4.0, "au_percent": 90.0,
                                     "au_percent_per_epoch": [80.0, 100.0]}}
    metrics = job_metrics({name: json.dumps(m) for name, m in hosts.items()}, 2)
    expected = dlio_train_au_mean([[40.0, 100.0], [80.0, 100.0]])
    assert metrics["cluster"]["au_percent_per_epoch"] == [60.0, 100.0] and metrics["cluster"]["au_percent"] == expected == 80.0
    assert metrics["au_percent"] == 70.0 and job_au_percent(metrics) == 80.0   # the leader's own, and the job's
    record = {"dataset": "d", "mode": "FSx", "status": "Completed", "billable_seconds": 10.0, "instance_count": 2,
              "breakdown": {"downloading": 1.0, "training": 8.0, "other": 1.0}, "metrics": metrics,
              "cost_usd": {"total": 1.0, "instance": 1.0}, "failure_reason": None}
    assert aggregate([record])[0]["au_percent"] == 80.0
    missing = job_metrics({"metrics-algo-1.json": json.dumps(hosts["metrics-algo-1.json"])}, 2)
    assert missing["cluster"]["au_percent"] is None and job_au_percent(missing) == 70.0


def test_read_threads_are_the_readers_that_overlap_per_file_latency():
    """CosmoFlow reads 2.8 MB files: FastFile's per-file latency spread over 4 readers per accelerator (8 on a p4d:
    32) leaves the accelerators waiting more than over the instance's 96 vCPUs."""
    w = workload(COSMOFLOW)
    common = dict(instance_type="ml.p4d.24xlarge", rate=w.rate, prices=PriceTable())
    few = estimate_mode("FastFile", w.shape(), readers=w.readers(8), **common)
    many = estimate_mode("FastFile", w.shape(), **common)
    assert w.readers(8) == 32 and few.au_percent < many.au_percent


# ---- dslab size / estimate / recommend --workload ------------------------------------------------

def sized(capsys, *args) -> dict:
    """`dslab size --json`: the answer, with its premise's and demand's figures at hand."""
    code, out, err = run_cli(capsys, "size", *args, "--json")
    assert code == 0, err
    answer = json.loads(out)
    premise = answer["question"]["premise"]
    return {**answer, "premise": premise, "files": premise["files"], "bytes": premise["bytes"],
            "au_target_percent": answer["demand"]["au_target_percent"],
            "accelerators_per_instance": answer["demand"]["accelerators_per_instance"],
            "samples_per_second_per_accelerator": premise["samples_per_second_per_accelerator"]}


def test_size_workload_gives_the_accelerators_each_source_feeds_at_the_workloads_au_target(capsys):
    result = sized(capsys, "--workload", COSMOFLOW, "--instance", "ml.p4d.24xlarge", "--count", "8")
    assert result["au_target_percent"] == 70.0 and result["accelerators_per_instance"] == 8
    assert result["workload"]["file"].endswith("cosmoflow_a100.yaml") and result["workload"]["epochs"] == 5
    assert result["samples_per_second_per_accelerator"] == pytest.approx(1 / 0.00551, abs=0.1)
    for source in result["sources"]:
        assert source["max_accelerators_at_target_au"] == source["max_instances_at_target_au"] * 8, source["source"]
        # A source feeds N instances exactly when its AU at N (here 8) is at the workload's 70%, not 90%.
        assert (source["au_percent"] >= 70.0) == (source["max_instances_at_target_au"] >= 8), source["source"]
    unet = sized(capsys, "--workload", UNET3D, "--instance", "ml.p4d.24xlarge")
    assert unet["au_target_percent"] == 90.0 and unet["files"] == 168


@pytest.mark.parametrize("count", [1, 8])
def test_estimate_recommend_and_size_price_a_workload_alike(capsys, count):
    """One answer: the workload's cluster costs the same in estimate, recommend and size: the same object."""
    common = ["--workload", RESNET50, "--instance", "ml.p4d.24xlarge", "--instance-count", count, "--json"]
    answers = []
    for command in ("estimate", "recommend", "size"):
        code, out, err = run_cli(capsys, command, *common)
        assert code == 0, err
        answers.append(json.loads(out))
    assert answers[0] == answers[1] == answers[2]
    ranked = {s["source"]: s for s in answers[0]["sources"] if not s["blocker"]}
    # Whatever cannot run as premised is refused, never ranked (146.9 GB fits p4d's 8,000 GB of NVMe).
    assert len(ranked) >= 8 and set(answers[0]["blocked"]) == {s["source"] for s in answers[0]["sources"]} - set(ranked)
    for source, row in ranked.items():   # the cost to a result is the job and its set-up, as priced
        assert row["cost_to_result_usd"] == pytest.approx(row["job_usd"] + row["setup_usd"], abs=0.0002), source
        assert row["au_percent"] == pytest.approx(row["estimate"]["au_percent"], abs=0.06), source
    assert "resnet50 as DLIO emulates it" in answers[0]["question"]["premise"]["compute"]


def test_accelerators_means_the_same_in_estimate_recommend_and_size(capsys):
    """--accelerators N: N emulated accelerators per instance, each at the workload's rate with read_threads readers,
    in estimate and recommend as in size (one flag, one rule: cli/advice.py), bounded alike."""
    common = ["--workload", COSMOFLOW, "--instance", "ml.p4d.24xlarge", "--accelerators", "4"]
    by_size = {s["source"]: s for s in sized(capsys, *common, "--count", "2")["sources"]}
    assert sized(capsys, *common)["accelerators_per_instance"] == 4
    code, out, err = run_cli(capsys, "estimate", *common, "--instance-count", "2", "--json")
    assert code == 0, err
    estimated = {s["source"]: s for s in json.loads(out)["sources"]}
    code, out, err = run_cli(capsys, "estimate", "--workload", COSMOFLOW, "--instance", "ml.p4d.24xlarge",
                             "--instance-count", "2", "--json")
    eight = {s["source"]: s for s in json.loads(out)["sources"]}
    for source in ("File", "FastFile", "FSx", "EFS"):
        assert estimated[source]["au_percent"] == pytest.approx(by_size[source]["au_percent"], abs=0.06), source
        assert any("2 instance(s) x 4 accelerator(s)" in a for a in estimated[source]["estimate"]["assumptions"]), source
    # Half the accelerators ask half the data: the sources that starved 8 keep 4 busier.
    assert estimated["FastFile"]["au_percent"] > eight["FastFile"]["au_percent"]
    code, out, err = run_cli(capsys, "recommend", *common, "--instance-count", "2", "--json")
    assert code == 0, err
    ranked = {s["source"]: s for s in json.loads(out)["sources"]}
    for source in ranked:
        assert ranked[source]["cost_to_result_usd"] == by_size[source]["cost_to_result_usd"], source
    code, out, err = run_cli(capsys, "recommend", *common)
    assert code == 0 and "1 x ml.p4d.24xlarge (4 x A100" in out, err   # the cluster's sizing names the accelerators asked for
    for command in ("size", "estimate", "recommend"):
        for bad in ("0", "65", "two"):
            code, _, err = run_cli(capsys, command, "--workload", COSMOFLOW, "--accelerators", bad)
            assert code == 2 and "--accelerators" in err, (command, bad, err)
    code, _, err = run_cli(capsys, "recommend", "--experiment", "experiments/smoke.yaml", "--accelerators", "2")
    assert one_line_error(code, err, "--accelerators", "experiment"), err


def test_scale_keeps_record_sizes_takes_a_fraction_of_the_files_and_is_bounded(capsys):
    full, scaled = workload(COSMOFLOW), workload(COSMOFLOW).with_scale(0.001)
    assert scaled.files == 524 and scaled.bytes / scaled.files == pytest.approx(full.bytes / full.files)
    result = sized(capsys, "--workload", COSMOFLOW, "--scale", "0.001")
    assert (result["files"], result["workload"]["scale"]) == (524, 0.001)
    for bad in ("0", "1.5", "nan", "-1"):
        code, _, err = run_cli(capsys, "size", "--workload", COSMOFLOW, "--scale", bad)
        assert one_line_error(code, err, "--scale"), (bad, err)
    code, _, err = run_cli(capsys, "size", "--files", "10", "--bytes", "1GB", "--scale", "0.5")
    assert one_line_error(code, err, "--scale", "--workload"), err
    code, _, err = run_cli(capsys, "size", "--workload", COSMOFLOW, "--files", "10")
    assert one_line_error(code, err, "--files", "workload"), err


# ---- datasets of the workload's shape ----------------------------------------------------------

def test_generated_datasets_have_the_workloads_files_samples_and_record_sizes(tmp_path):
    mean, stdev = 200_000, 40_000
    for fmt, per_file in (("npz", 3), ("tfrecord", 3), ("jpg", 1)):   # DLIO's jpeg: one image per file
        info = datasets.generate_dlio(tmp_path / fmt, fmt, 24, per_file, mean, stdev, seed=0)
        files = sorted(p for p in (tmp_path / fmt).iterdir() if p.name != "dataset.json")
        assert len(files) == 24 and info["samples"] == 24 * per_file
        assert files[0].name == ("img_00_of_24." + {"npz": "npz", "tfrecord": "tfrecord", "jpg": "jpeg"}[fmt])
    with pytest.raises(ConfigError, match="one image per file"):
        datasets.generate_dlio(tmp_path / "jpg3", "jpg", 4, 3, mean, stdev, seed=0)
    sizes = datasets.dlio_record_sizes(24, mean, stdev, 0)
    assert abs(np.mean(sizes) - mean) < 3 * stdev / np.sqrt(24) and 0.5 * stdev < np.std(sizes) < 1.5 * stdev
    with zipfile.ZipFile(sorted((tmp_path / "npz").glob("*.npz"))[0]) as archive:   # DLIO's layout: x, y
        with archive.open("x.npy") as member:
            x = np.lib.format.read_array(member)
    assert x.shape == (sizes[0], 3) and x.dtype == np.uint8
    with open(sorted((tmp_path / "tfrecord").glob("*.tfrecord"))[0], "rb") as handle:
        records = list(read_tfrecords(handle, "shard", verify_data=True))   # every payload's CRC checked
    assert len(records) == 3 and all(is_dlio_example(bytes(p)) for _, p in records)
    assert len(decode_example(bytes(records[0][1]))[0]) == sizes[0]
    datasets.generate_dlio(tmp_path / "again", "npz", 24, 3, mean, stdev, seed=0)   # seeded: the same bytes again
    first = sorted((tmp_path / "npz").glob("*.npz"))[0].name
    assert (tmp_path / "again" / first).read_bytes() == (tmp_path / "npz" / first).read_bytes()


def dlio_jpeg_generator(files: int, record_length: float, record_length_stdev: float) -> list[np.ndarray]:
    """The images DLIO's jpeg generator draws on one rank, written from dlio_benchmark at 03b5ed329fe8:
    config.py derive_configurations (dimension = int(sqrt(record_length)), dimension_stdev = record_length_stdev /
    2.0 / sqrt(record_length)), data_generator.py get_dimension and jpeg_generator.py generate (np.random.seed(10);
    per file records = np.random.randint(255, size=(dim1, dim2), dtype=np.uint8), saved with img.save(..., 'JPEG'))."""
    import math
    dimension = int(math.sqrt(record_length))
    dimension_stdev = record_length_stdev / 2.0 / math.sqrt(record_length)
    np.random.seed(10)
    if dimension_stdev > 0:
        dim = [max(int(d), 1) for d in np.random.normal(dimension, dimension_stdev, 2 * files)]
    else:
        dim = np.ones(2 * files, dtype=np.int64) * int(dimension)
    images = [np.random.randint(255, size=(dim[2 * i], dim[2 * i + 1]), dtype=np.uint8) for i in range(files)]
    np.random.seed()
    return images


@pytest.mark.parametrize("record, stdev", [(30_000, 6_000), (250_000, 0)])
def test_jpeg_datasets_are_dlios_own_files_and_size_counts_their_bytes(tmp_path, capsys, record, stdev):
    """DLIO writes one JPEG of random pixels per file, which JPEG compresses to ~56% of the record length: the lab
    writes the same images (byte for byte, Pillow encoding both), and the workload's bytes, which `dslab size
    --workload` sizes, are those files' (within 4%: the sides are drawn at random), not the record length's."""
    import io
    from PIL import Image
    files = 40
    datasets.generate_dlio(tmp_path / "lab", "jpg", files, 1, record, stdev, seed=0)
    made = sorted((tmp_path / "lab").glob("*.jpeg"))
    assert len(made) == files
    for path, pixels in zip(made, dlio_jpeg_generator(files, record, stdev)):
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", bits=8)
        assert path.read_bytes() == buffer.getvalue(), path.name
    on_disk = sum(p.stat().st_size for p in made)
    document = tiny_workload("jpeg", files, 1, record)
    document["dataset"]["record_length_bytes_stdev"] = stdev
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(document))
    result = sized(capsys, "--workload", tmp_path / "w.yaml")
    assert result["files"] == files and result["bytes"] == pytest.approx(on_disk, rel=0.04)
    assert 0.5 < on_disk / (files * record) < 0.65     # DLIO's JPEGs are not the record length
    code, out, err = run_cli(capsys, "dataset", "generate", "--workload", tmp_path / "w.yaml", "--out", tmp_path / "cli")
    assert code == 0, err
    said = f"`dslab size --workload` counts {result['bytes'] / 1e6:,.1f} MB"
    assert said in out and f"{on_disk / 1e6:,.1f} MB;" in out   # the same files again, and the difference said
    # More than one sample per JPEG file: DLIO's reader serves its one image for each, the lab's script reads one.
    document["dataset"]["num_samples_per_file"] = 4
    (tmp_path / "w4.yaml").write_text(yaml.safe_dump(document))
    code, _, err = run_cli(capsys, "size", "--workload", tmp_path / "w4.yaml")
    assert one_line_error(code, err, "dataset.num_samples_per_file", "one image per file"), err


def test_crc32c_of_large_records_is_the_castagnoli_crc():
    """The check value of CRC-32C is 0xE3069283 for "123456789" (RFC 3720 B.4); a DLIO record of megabytes takes
    the chunked path and must give what the byte-by-byte table gives."""
    from dslab_train import crc32c as crc
    assert crc.crc32c(b"123456789") == 0xE3069283
    data = np.random.default_rng(1).bytes(300_007)
    assert crc.crc32c(data) == crc._update(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    assert masked_crc32c(data) == (((crc.crc32c(data) >> 15) | (crc.crc32c(data) << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_dataset_generate_workload_cli(capsys, tmp_path):
    code, out, err = run_cli(capsys, "dataset", "generate", "--workload", UNET3D, "--scale", "0.02", "--out", tmp_path / "u")
    assert code == 0, err
    assert "3 npz files" in out and "ignored: checkpoint" in out
    assert len(list((tmp_path / "u").glob("*.npz"))) == 3
    code, _, err = run_cli(capsys, "dataset", "generate", "--workload", UNET3D, "--images", "5", "--out", tmp_path / "v")
    assert one_line_error(code, err, "--images"), err


def test_a_generated_workload_dataset_uploads_like_any_other_and_its_stats_file_answers(capsys, tmp_path, monkeypatch):
    """`dslab dataset generate --workload` then `dslab dataset upload` to the prefix it names: every file under the
    dataset's prefix, its stats file beside it (what the workflow's Plan reads), and `recommend --experiment --outputs`
    answers from that stats file, as for any uploaded dataset."""
    import boto3
    from moto import mock_aws
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    document = tiny_workload("tfrecord", 6, 3, 20_000)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(document))
    code, out, err = run_cli(capsys, "dataset", "generate", "--workload", tmp_path / "w.yaml", "--out", tmp_path / "data")
    assert code == 0, err
    name = parse_workload(document, "w.yaml").dataset_name
    assert f"s3://<bucket>/datasets/{name}/" in out
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="lab")
        code, out, err = run_cli(capsys, "dataset", "upload", "--src", tmp_path / "data", "--to", f"s3://lab/datasets/{name}/")
        assert code == 0, err
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="lab", Prefix=f"datasets/{name}/")["Contents"])
        assert len(keys) == 6 and all(k.endswith(".tfrecord") for k in keys)
        stats = json.loads(s3.get_object(Bucket="lab", Key=f"datasets/{name}.stats.json")["Body"].read())
        on_disk = sum(p.stat().st_size for p in (tmp_path / "data").glob("*.tfrecord"))
        assert (stats["files"], stats["bytes"], stats["format"]) == (6, on_disk, "tfrecord")
        assert stats["written_by"] == "dslab dataset upload"
        (tmp_path / "exp.yaml").write_text("name: w\nmodes: [File, FastFile]\nworkload: w.yaml\n")
        (tmp_path / "outputs.json").write_text(json.dumps({"DataSourceLab": {"BucketName": "lab"}}))
        code, out, err = run_cli(capsys, "recommend", "--experiment", tmp_path / "exp.yaml", "--outputs",
                                 tmp_path / "outputs.json", "--json")
    assert code == 0, err
    answer = json.loads(out)["answers"][0]
    assert (answer["assumed"]["files"], answer["assumed"]["bytes"]) == (6, on_disk), answer["assumed"]
    assert answer["assumed"]["samples"] == 18 and "stats file" in answer["assumed"]["from"]


# ---- the training script reads each format in every mode -----------------------------------------

def tiny_workload(fmt: str, files: int, per_file: int, record: int) -> dict:
    return {"model": {"name": f"tiny-{fmt}"}, "framework": "pytorch", "workflow": {"train": True},
            "dataset": {"format": fmt, "num_files_train": files, "num_samples_per_file": per_file,
                        "record_length_bytes": record, "record_length_bytes_stdev": record // 5},
            "reader": {"data_loader": "pytorch", "batch_size": 4, "read_threads": 2},
            "train": {"epochs": 2, "computation_time": 0.001},
            "checkpoint": {"checkpoint_folder": "checkpoints/x"}}


@pytest.fixture(scope="module")
def workload_stand(tmp_path_factory):
    root = tmp_path_factory.mktemp("dlio-stand-in")
    stand = StandIn(root, root / "unused", root / "unused", 0, {})
    shapes = {"npz": (12, 2, 60_000), "tfrecord": (6, 5, 40_000), "jpeg": (10, 1, 30_000)}
    experiments = {}
    for fmt, (files, per_file, record) in shapes.items():
        experiment = parse_experiment({"name": f"w-{fmt}", "instance_type": "ml.m5.xlarge",
                                       "modes": ["File", "FastFile", "Pipe", "FSx", "EFS", "Script"],
                                       "workload": {"file": f"tiny-{fmt}.yaml", "dlio": tiny_workload(fmt, files, per_file, record)}})
        dataset = experiment.trials[0].datasets[0]
        recipe = dataset.generate
        folder = root / "src" / dataset.name
        datasets.generate_dlio(folder, dataset.format, recipe["files"], recipe["samples_per_file"], recipe["record_bytes"],
                               recipe["record_bytes_stdev"], recipe["seed"])
        stand.add_dataset(dataset.prefix, folder)
        experiments[fmt] = (experiment, files * per_file)
    return stand, experiments


@pytest.mark.parametrize("fmt, mode", [("npz", m) for m in ("File", "FastFile", "Pipe", "FSx", "EFS", "Script")]
                         + [("tfrecord", "File"), ("tfrecord", "Pipe"), ("tfrecord", "Script"), ("jpeg", "FastFile"),
                            ("jpeg", "Pipe")])
def test_the_training_script_reads_every_sample_of_a_workload_dataset(workload_stand, tmp_path, fmt, mode):
    stand, experiments = workload_stand
    experiment, samples = experiments[fmt]
    job = next(j for j in plan(experiment, lab_environment(), "test-exec") if j.spec.mode == mode)
    if mode == "Pipe":   # every object its own record, except self-delimiting TFRecord
        assert job.request["InputDataConfig"][0]["RecordWrapperType"] == ("None" if fmt == "tfrecord" else "RecordIO")
    hp = job.request["HyperParameters"]
    assert (hp["batch_size"], hp["compute_seconds_per_batch"], hp["epochs"]) == ("4", "0.001", "2")
    outcome = run_training_job(job.request, FolderStorage(stand.s3_root, stand.fs_root), tmp_path, code_dir=TRAINING)
    assert outcome.status == "Completed", outcome.describe.get("FailureReason", "") + outcome.log[-2000:]
    metrics = outcome.metrics
    assert metrics["samples"] == samples * 2 and metrics["dataset_format"] == ("jpg" if fmt == "jpeg" else fmt)
    assert metrics["bytes"] > 0.5 * samples * 2 * {"npz": 60_000, "tfrecord": 40_000, "jpeg": 5_000}[fmt]


# ---- workload: in an experiment --------------------------------------------------------------------

def test_an_experiment_names_workloads_beside_its_datasets_and_the_record_reproduces_it(tmp_path):
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "cosmo.yaml").write_bytes(COSMOFLOW.read_bytes())
    (folder / "exp.yaml").write_text(
        "name: mlperf\ninstance_type: ml.p4d.24xlarge\nmodes: [FastFile, FSx]\nvolume_size_gb: 2000\n"
        "workload: {file: cosmo.yaml, scale: 0.01}\n"
        "datasets: [{name: extra-jpg, format: jpg, generate: {images: 10, classes: 2}}]\n"
        f"trials:\n  - name: cosmoflow\n  - name: unet3d\n    workload: {UNET3D}\n    epochs: 1\n")
    experiment = load_experiment(folder / "exp.yaml")
    cosmo, unet = experiment.trials
    assert [d.name for d in cosmo.datasets] == [cosmo.workload.dataset_name, "extra-jpg"]
    assert cosmo.workload.files == 5243 and cosmo.workload.sha256 == hashlib.sha256(COSMOFLOW.read_bytes()).hexdigest()
    assert (cosmo.compute.batch_size, cosmo.compute.seconds_per_batch, cosmo.epochs) == (1, 0.00551, 5)
    assert cosmo.workers == 4 * 8   # read_threads per accelerator, 8 A100s
    assert unet.workload.name == "unet3d" and unet.workload.scale == 1.0 and unet.epochs == 1   # stated: kept
    assert unet.datasets[0].format == "npz" and (unet.compute.batch_size, unet.compute.seconds_per_batch) == (7, 0.636)
    # The experiment as run names each workload with its content: the workflow re-parses it without any file.
    again = parse_experiment(json.loads(json.dumps(experiment.document)))
    assert again.content_hash == experiment.content_hash and again.trials == experiment.trials
    with pytest.raises(ConfigError, match="workload.*CLI reads it"):
        parse_experiment({"workload": "cosmo.yaml"})


def test_plan_and_local_refuse_what_cannot_run_before_anything_starts(capsys, tmp_path):
    code, _, err = run_cli(capsys, "plan", "--workload", tmp_path / "missing.yaml", "--offline")
    assert one_line_error(code, err, "--workload", "cannot read"), err
    code, _, err = run_cli(capsys, "local", "--workload", DLIO / "resnet50_v100@6027937.yaml", "--out", tmp_path / "o",
                           "--cache", tmp_path / "c")
    assert one_line_error(code, err, "dataset.format"), err
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()
    code, _, err = run_cli(capsys, "plan", "--experiment", "experiments/smoke.yaml", "--scale", "0.1", "--offline")
    assert one_line_error(code, err, "--scale"), err


def test_plan_workload_runs_the_workloads_dataset_and_compute(capsys):
    code, out, err = run_cli(capsys, "plan", "--workload", UNET3D, "--offline", "--json")
    assert code == 0, err
    planned = json.loads(out)
    assert len(planned["jobs"]) == 5 and planned["experiment"]["trials"][0]["workload"]["file"] == str(UNET3D)
    request = planned["jobs"][0]["request"]
    hp = request["HyperParameters"]
    assert (hp["dataset_format"], hp["batch_size"], hp["compute_seconds_per_batch"], hp["epochs"]) == ('"npz"', "7", "0.636", "5")
    # File mode downloads the 24.6 GB dataset: the experiment --workload makes holds it.
    assert request["ResourceConfig"]["VolumeSizeInGB"] >= 24.63 * 1.05


S3_WORKLOAD_IGNORED = ("ignored: storage (storage_type, storage_root, storage_options)", "ignored: checkpoint (checkpoint_folder",
                       "ignored: dataset.record_length_bytes_resize")


def said_once_each(out: str, starts=S3_WORKLOAD_IGNORED) -> bool:
    lines = out.splitlines()
    return all(sum(line.startswith(start) for line in lines) == 1 for start in starts)


def test_plan_run_and_local_say_every_ignored_field_in_one_line(capsys, tmp_path):
    """What size, estimate and recommend print, the commands that run a workload print too: --workload, or `workload:`
    in an experiment; each field once, before anything runs (plan --json: under workloads)."""
    s3 = DLIO / "unet3d_a100_s3.yaml"
    expected = workload(s3).ignored
    code, out, err = run_cli(capsys, "plan", "--workload", s3, "--offline")
    assert code == 0 and said_once_each(out), err + out
    assert [line.removeprefix("ignored: ") for line in out.splitlines() if line.startswith("ignored: ")] == list(expected)
    code, out, err = run_cli(capsys, "plan", "--workload", s3, "--offline", "--json")
    assert code == 0 and json.loads(out)["workloads"][0]["ignored"] == list(expected), err
    (tmp_path / "s3.yaml").write_bytes(s3.read_bytes())
    (tmp_path / "exp.yaml").write_text("name: w\nmodes: [File]\nworkload: s3.yaml\n")
    code, out, err = run_cli(capsys, "plan", "--experiment", tmp_path / "exp.yaml", "--offline")
    assert code == 0 and said_once_each(out), err + out
    # dslab run says them before it looks for the deployed workflow (here: none, refused in one line).
    (tmp_path / "outputs.json").write_text("{}")
    code, out, err = run_cli(capsys, "run", "--workload", s3, "--outputs", tmp_path / "outputs.json")
    assert one_line_error(code, err, "StateMachineArn") and said_once_each(out), err + out
    # dslab local says them before its checks (here an extra dataset it cannot build: refused before anything runs).
    (tmp_path / "bad.yaml").write_text("name: w\nmodes: [File]\nworkload: s3.yaml\n"
                                       "datasets: [{name: mine, format: jpg}]\n")
    code, out, err = run_cli(capsys, "local", "--experiment", tmp_path / "bad.yaml", "--out", tmp_path / "o",
                             "--cache", tmp_path / "c")
    assert one_line_error(code, err, "generate") and said_once_each(out), err + out
    assert not (tmp_path / "o").exists()


# ---- the report and the local lab ----------------------------------------------------------------

def test_the_report_says_the_workload_its_scale_and_each_sources_au_against_its_target():
    experiment = parse_experiment({"name": "w", "workload": {"file": "cosmoflow_a100.yaml", "scale": 0.0002,
                                                             "dlio": yaml.safe_load(COSMOFLOW.read_text())}})
    name = experiment.trials[0].workload.dataset_name
    rows = [{"dataset_name": name, "mode": "File", "au_percent": 75.0},
            {"dataset_name": name, "mode": "FastFile", "au_percent": 65.0}]
    from dslab.report import workload_lines
    text = "\n".join(workload_lines(experiment.document, rows))
    assert "scale 0.0002" in text and "105 of its 524,288 tfrecord files" in text
    assert "AU target 70% (the workload's metric.au): File 75.0% meets it, FastFile 65.0% below" in text
    # The fields the lab ignores, one line each, as the commands print them (dslab local prints them before the run).
    ignored = [line for line in text.splitlines() if line.startswith("  - ignored: ")]
    assert [line.removeprefix("  - ignored: ") for line in ignored] == list(experiment.trials[0].workload.ignored)
    assert any(line.startswith("  - ignored: reader.file_shuffle: ") for line in ignored)
    assert not any("ignored" in line for line in workload_lines(experiment.document, rows, ignored=False))


def test_report_md_of_a_workload_run_lists_the_ignored_fields(tmp_path):
    from dslab.report import write_report
    experiment = parse_experiment({"name": "w", "workload": {"file": "unet3d_a100_s3.yaml",
                                                             "dlio": yaml.safe_load((DLIO / "unet3d_a100_s3.yaml").read_text())}})
    name = experiment.trials[0].workload.dataset_name
    record = {"job_name": "j-file", "mode": "File", "dataset": name, "repeat": 0, "status": "Completed",
              "instance_type": "ml.p3.2xlarge", "instance_count": 1, "billable_seconds": 300.0, "phases": {"Training": 60.0},
              "breakdown": {"downloading": 20.0, "training": 60.0, "other": 220.0},
              "metrics": {"samples_per_second": 10.0, "au_percent": 95.0, "au_percent_per_epoch": [94.0, 96.0],
                          "epoch_seconds": [30.0, 30.0]},
              "cost_usd": {"instance": 0.3, "total": 0.3}}
    results = {"backend": "local", "experiment": experiment.document, "records": [record]}
    paths = write_report(results, tmp_path)
    text = paths["report.md"].read_text()
    for start in S3_WORKLOAD_IGNORED:
        assert sum(line.startswith("  - " + start) for line in text.splitlines()) == 1, start
    assert "ignored: storage" in paths["report.html"].read_text()


def test_the_local_lab_generates_a_workload_dataset_once(tmp_path):
    from dslab.local.lab import prepare_dataset
    experiment = parse_experiment({"workload": {"file": "t.yaml", "dlio": tiny_workload("npz", 4, 2, 10_000)}})
    dataset = experiment.trials[0].datasets[0]
    said: list[str] = []
    folder = prepare_dataset(dataset, tmp_path, said.append)
    assert len(list(folder.glob("*.npz"))) == 4 and len(said) == 1
    assert prepare_dataset(dataset, tmp_path, said.append) == folder and len(said) == 1   # cached: not made again


@pytest.mark.slow
def test_dslab_local_runs_a_published_workload_at_a_small_scale(lab_cache, tmp_path, capsys, monkeypatch, bound_lab):
    from dslab.local import lab as local_lab
    from dslab.local.storage import fuse_available
    if not fuse_available():
        pytest.skip("s3fs-fuse and /dev/fuse are needed for FastFile and FSx")
    # `dslab local` as typed, its lab deployed in-process from the session's synthesis (the CLI's deploy into the
    # stand-in is tests/test_local_lab.py's business: ~30 s of two cores saved here).
    real_run_local = local_lab.run_local
    monkeypatch.setattr(local_lab, "run_local", lambda *a, **k: real_run_local(*a, **{**k, "assembly": bound_lab.outdir}))
    out = tmp_path / "out"
    code, printed, err = run_cli(capsys, "local", "--workload", COSMOFLOW, "--scale", "0.00002", "--out", out,
                                 "--cache", lab_cache, "--plain")
    assert code == 0, err + printed[-2000:]
    results = json.loads((out / "results.json").read_text())
    records = results["records"]
    assert sorted(r["mode"] for r in records) == sorted(["File", "FastFile", "Pipe", "FSx", "EFS"])
    for r in records:   # 10 files of one 2.8 MB sample, 5 epochs, each read whole
        assert r["status"] == "Completed", r["failure_reason"]
        assert r["metrics"]["samples"] == 10 * 5 and r["metrics"]["bytes"] > 10 * 5 * 2_700_000
    report = (out / "report.md").read_text()
    assert "scale 2e-05" in report and "10 of its 524,288 tfrecord files" in report and "AU target 70%" in report
    assert "AU target 70%" in printed


def test_mlperf_datasize_sizes_the_dataset_as_mlperfs_own_step_does(capsys):
    """--mlperf-datasize answers MLPerf Storage's own question: the workload's dataset with as many files as its datasize
    step gives the cluster; without it, the file's count and the sentence that compares them."""
    sized_ = sized(capsys, "--workload", UNET3D, "--instance", "ml.p4d.24xlarge", "--count", "8", "--mlperf-datasize")
    assert sized_["files"] == workload(UNET3D).mlperf_files(8, 1152, 64) == 337_502
    assert "--mlperf-datasize" in sized_["premise"]["dataset_from"] and not sized_["premise"]["notes"][1:]
    code, _, err = run_cli(capsys, "size", "--files", "10", "--bytes", "1GB", "--mlperf-datasize")
    assert one_line_error(code, err, "--mlperf-datasize", "--workload"), err
