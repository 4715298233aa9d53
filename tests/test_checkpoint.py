"""MLPerf Storage's checkpointing workloads (issue 40, first part): the four llama3 files read as published, checkpoint
sizes by DLIO's formula beside the guidelines' Table 2, the processes and hosts a model's parallelism needs, bad input
in one line, and the training side writing and reading checkpoints as DLIO does (per-rank files, fsync, the cache
dropped, another host's files read back, default and subset modes, GB/s of 1024**3 bytes) into the results record."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from dslab.cli import main
from dslab.contracts import validate_record
from dslab.core.workloads.checkpoint import GUIDELINES, guidelines_comparison, parse_checkpoint_workload
from dslab.core.workloads.dlio import Workload, parse_any_workload
from dslab.core.errors import ConfigError
from dslab.core.job_metrics import job_metrics
from dslab.core.facts.prices import PriceTable
from dslab.core.requests import CHECKPOINT_METRIC_DEFINITIONS
from dslab.core.results import metrics_from, record_from_describe

from .helpers import TRAINING

sys.path.insert(0, str(TRAINING))
import train  # noqa: E402
from dslab_train import checkpoint as trainer  # noqa: E402
from dslab_train.checkpoint import CheckpointError, CheckpointSpec, run_checkpoints  # noqa: E402
from dslab_train.checkpoint_layout import GIB, checkpoint_folder  # noqa: E402
from dslab_train.contract import ContractError, load_context  # noqa: E402

DLIO = Path(__file__).resolve().parent.parent / "dslab" / "contracts" / "dlio"
LLAMA = {name: DLIO / f"llama3_{name}.yaml" for name in ("8b", "70b", "405b", "1t")}


def document(name: str) -> dict:
    return yaml.safe_load(LLAMA[name].read_text())


def workload(name: str):
    return parse_checkpoint_workload(document(name), LLAMA[name].name)


def layout_digest(plan) -> str:
    rows = sorted([r.rank, name, size] for r in plan.ranks for name, size in r.files)
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


# ---- the files, as published --------------------------------------------------------------------------------------

def test_the_four_llama3_files_are_vendored_as_published():
    """tests/test_dlio.py checks every vendored file against sources.json's sha256 and git blob; these four are there,
    from mlcommons/storage, without the trailing newline they are published without."""
    sources = json.loads((DLIO / "sources.json").read_text())["files"]
    for path in LLAMA.values():
        entry = sources[path.name]
        assert entry["repository"] == "https://github.com/mlcommons/storage"
        assert entry["path"] == f"configs/dlio/workload/{path.name}"
        data = path.read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"] and not data.endswith(b"\n")


def test_the_files_are_the_guidelines_table_2_models():
    """Submission_guidelines.md Table 2: hidden, FFN, heads, KV heads, layers, TP x PP and ZeRO of each model."""
    table = {"8b": (4096, 14336, 32, 8, 32), "70b": (8192, 28672, 128, 8, 80), "405b": (16384, 53248, 128, 8, 126),
             "1t": (25872, 98304, 192, 32, 128)}
    for name, (hidden, ffn, heads, kv, layers) in table.items():
        w = workload(name)
        s, row = w.shape, GUIDELINES[w.name]
        assert (s.hidden_size, s.ffn_hidden_size, s.num_attention_heads, s.num_kv_heads, s.num_layers) == \
            (hidden, ffn, heads, kv, layers)
        assert (s.tensor, s.pipeline, s.zero_stage) == (row.tensor, row.pipeline, row.zero_stage)
        assert (w.framework, w.mode, w.writes, w.reads, w.interval_seconds) == ("pytorch", "default", 10, 10, 5)
        assert (s.model_datatype, s.optimizer_datatype, s.vocab_size) == ("fp16", "fp32", 128256)


def test_a_training_workload_still_reads_as_one_and_a_checkpointing_one_goes_to_its_module():
    assert isinstance(parse_any_workload(yaml.safe_load((DLIO / "unet3d_a100.yaml").read_text()), "u.yaml"), Workload)
    assert parse_any_workload(document("70b"), "llama3_70b.yaml").name == "llama_70b"


# ---- DLIO's formula --------------------------------------------------------------------------------------------

# What DLIO's own code gives: base_checkpointing.py (mlperf_storage_v2.0 at 392621b) run rank by rank with MPI and
# torch stubbed (a tensor's bytes = elements x datatype size), every save_state call's file name and bytes recorded:
# model:processes:mode -> (files, bytes per checkpoint, sha256 of the sorted [rank, file, bytes] rows).
DLIO_RUN = {
    ("8b", 8, "default"): (16, 112_425_623_552, "30ec541781a47a1540dfc935a2d2df034c1c704c09fdcd9e3501822e733b6857"),
    ("70b", 64, "default"): (128, 978_406_572_032, "38afeffe39327a389f0f9254f5ff621ff771a5921fb7ad3c931273ed30ac29a8"),
    ("405b", 512, "default"): (1544, 5_682_508_791_808, "1f5ccb5503d7970104990d16413fd9f60a2e34f782621ff4cd7d78828ad370d0"),
    ("1t", 1024, "default"): (2072, 16_564_174_094_592, "773b534b8db35843464ed0253c0fca6d1389cf388c5201d79abc6ca406eb0499"),
    ("70b", 8, "subset"): (16, 122_300_821_504, "b60bb94ba2020f7c45b4bc2bfb636393e7f27f763d55695b1f0a2427cb1ea149"),
    ("405b", 8, "subset"): (48, 105_811_532_800, "55481cc1d5ce36930db868657afbe4a0b91253b5bbaeb29254ea8dd8f7af79b6"),
    ("1t", 8, "subset"): (32, 154_322_342_880, "15cea01ab7a59ae356d99c5269b81cff7175a89e59806c6aec62dd9eb3e8b9bf"),
}


@pytest.mark.parametrize("key", list(DLIO_RUN), ids=[f"{m}-{p}-{mode}" for m, p, mode in DLIO_RUN])
def test_every_rank_writes_the_files_dlio_writes(key):
    name, processes, mode = key
    files, total, digest = DLIO_RUN[key]
    plan = workload(name).plan(hosts=processes // 8)
    assert (plan.processes, plan.mode, plan.files, plan.full_bytes) == (processes, mode, files, total)
    assert layout_digest(plan) == digest


def test_the_sizes_per_rank_follow_dlios_code():
    """ZeRO 3 (8B, 70B): every rank holds 1/(DP x TP) of the model and (3 x floor(N / (DP x TP x PP)) + 15 h) fp32
    optimizer values (get_optimization_groups); ZeRO 1 with pipelines (405B, 1T): data-parallel rank 0 also writes
    its stage's layers, one file each, the others only the optimizer."""
    w8 = workload("8b")
    plan = w8.plan()
    n = w8.num_parameters
    assert n == 8_030_261_248
    optimizer = (3 * (n // 8) + 15 * 4096) * 4
    assert all(r.files == (("zero_pp_rank_%d_mp_rank_0_model_states.pt" % r.rank, 16_060_522_496 // 8),
                           ("zero_pp_rank_%d_mp_rank_0_optim_states.pt" % r.rank, optimizer)) for r in plan.ranks)
    assert plan.rank_bytes == (14_053_202_944, 14_053_202_944)
    assert workload("70b").plan().rank_bytes == (15_287_602_688, 15_287_602_688)
    p405 = workload("405b").plan()
    assert p405.rank_bytes == (9_513_171_840, 13_226_441_600)
    first = p405.ranks[0].files
    assert [f for f, _ in first] == [f"layer_{i}-model_0_model_states.pt" for i in range(0, 5)] + \
        ["zero_pp_rank_0_mp_rank_0_optim_states.pt"]
    assert [f for f, _ in p405.ranks[256].files] == ["zero_pp_rank_1_mp_rank_0_optim_states.pt"]   # DP rank 1
    p1t = workload("1t").plan()
    assert p1t.rank_bytes == (13_865_244_924, 19_290_344_604) and p1t.ranks[0].bytes == 19_290_292_860
    # DLIO's printed "Total checkpoint size" (GiB, called GB) is the same bytes for these four.
    assert p1t.dlio_reported_gib == pytest.approx(16_564_174_094_592 / GIB)


def test_the_sizes_beside_the_guidelines_table():
    """Table 2's 105 GB, 912 GB and 5.29 TB are DLIO's GiB (which it prints as GB); its 18 TB for 1T is not: the
    formula gives 15,426.6 GiB, 15.07 TiB."""
    plans = {w.name: w.plan() for w in map(workload, LLAMA)}
    rows = {r["model"]: r for r in guidelines_comparison(plans)}
    assert [rows[m]["processes"] for m in ("8B", "70B", "405B", "1T")] == [8, 64, 512, 1024]
    assert [rows[m]["hosts"] for m in ("8B", "70B", "405B", "1T")] == [1, 8, 64, 128]
    for model in ("8B", "70B", "405B"):
        assert abs(rows[model]["difference_percent"]) < 0.5, rows[model]
    assert rows["1T"]["formula_tib"] == pytest.approx(15.065, abs=0.001)
    assert rows["1T"]["difference_percent"] == pytest.approx(-14.3, abs=0.1)
    line = plans["llama_1t"].describe()[-1]
    assert "18 TB" in line and "15.07 TiB" in line and "counted twice" in line


# ---- processes and hosts --------------------------------------------------------------------------------------------

def test_the_processes_follow_tp_pp_dp_at_eight_gpus_a_host():
    p70 = workload("70b").plan(hosts=8)
    assert (p70.processes, p70.data_parallelism, p70.mode, len(p70.host_ranks(7))) == (64, 8, "default", 8)
    # Fewer processes than MLPerf's CLOSED count run in subset mode with Table 2's DP, as mlpstorage runs them.
    one = workload("70b").plan(hosts=1)
    assert (one.mode, one.data_parallelism, one.full_bytes) == ("subset", 8, 122_300_821_504)
    assert "subset mode" in one.mode_why
    # OPEN: more GPUs in multiples of TP x PP.
    p8 = workload("8b").plan(hosts=2)
    assert (p8.processes, p8.data_parallelism, p8.files) == (16, 16, 32)


def test_a_parallelism_that_does_not_divide_the_hosts_gpus_is_refused():
    with pytest.raises(ConfigError) as err:
        workload("405b").plan(hosts=65)
    assert err.value.field == "--instance-count" and "\n" not in str(err.value)
    assert all(w in str(err.value) for w in ("520 processes", "TP x PP = 8 x 32 = 256", "a multiple of 32 host(s)"))
    # Not a llama3 model: its own TP x PP must divide the GPUs.
    doc = document("8b")
    doc["model"] = {**doc["model"], "name": "mine", "parallelism": {"tensor": 8, "pipeline": 2, "zero_stage": 1}}
    with pytest.raises(ConfigError, match="a multiple of 2 host"):
        parse_checkpoint_workload(doc, "mine.yaml").plan(hosts=3)
    assert parse_checkpoint_workload(doc, "mine.yaml").plan().hosts == 2
    # Subset: no more processes than the DP x TP x PP ranks it takes a fraction of.
    doc["checkpoint"] = {**doc["checkpoint"], "mode": "subset"}
    doc["model"]["parallelism"]["data"] = 1
    with pytest.raises(ConfigError, match="more than the subset's DP x TP x PP = 1 x 8 x 2 = 16"):
        parse_checkpoint_workload(doc, "mine.yaml").plan(hosts=3)


# ---- bad input in one line ------------------------------------------------------------------------------------------

def edit(name: str, section: str, change: dict, drop: tuple[str, ...] = ()) -> dict:
    doc = document(name)
    target = doc
    for key in section.split(".") if section else []:
        target = target.setdefault(key, {})
    target.update(change)
    for key in drop:
        target.pop(key)
    return doc


@pytest.mark.parametrize("doc, field, words", [
    (edit("8b", "model.transformer", {"hidden_sise": 4096}, ("hidden_size",)), "model.transformer.hidden_sise",
     "did you mean 'hidden_size'"),
    (edit("8b", "model", {"model_size": 10}), "model.model_size", "did you mean 'model_size_bytes'"),
    (edit("8b", "model.parallelism", {"zero": 3}, ("zero_stage",)), "model.parallelism.zero", "zero_stage"),
    (edit("8b", "checkpoint", {"num_checkpoint_write": 2}), "checkpoint.num_checkpoint_write", "'num_checkpoints_write'"),
    (edit("8b", "model", {"model_datatype": "fp8"}), "model.model_datatype", "int8, uint8, fp16, bf16, fp32, fp64"),
    (edit("8b", "checkpoint", {"mode": "partial"}), "checkpoint.mode", "default, subset"),
    (edit("8b", "model.parallelism", {"data": 8}), "model.parallelism.data", "in default mode"),
    (edit("405b", "checkpoint", {"mode": "subset"}), "model.parallelism.data", "needed in subset mode"),
    (edit("405b", "model.parallelism", {"zero_stage": 3}), "model.parallelism.zero_stage", "pipeline"),
    (edit("8b", "checkpoint", {"num_checkpoints_read": 11}), "checkpoint.num_checkpoints_read", "more than the 10"),
    (edit("8b", "checkpoint", {"num_checkpoints_read": 0, "num_checkpoints_write": 0}),
     "checkpoint.num_checkpoints_write", "nothing to write or read"),
    (edit("405b", "model", {"num_layers": 16}), "model.num_layers", "32 pipeline stages"),
    (edit("8b", "model", {"layer_parameters": [1, 2]}), "model.layer_parameters", "predefined"),
    (edit("8b", "checkpoint", {"fsync": "yes"}), "checkpoint.fsync", "not true or false"),
    (edit("8b", "model.parallelism", {"tensor": 0}), "model.parallelism.tensor", "out of range"),
    (edit("8b", "checkpoint", {"ksm": {"await_time": 5}}), "checkpoint.ksm", "randomize_tensor: False"),
    (edit("8b", "", {"checkpoints": {}}), "checkpoints", "did you mean 'checkpoint'"),
])
def test_bad_input_is_refused_in_one_line_naming_the_field(doc, field, words):
    with pytest.raises(ConfigError) as err:
        parse_checkpoint_workload(doc, "w.yaml")
    assert err.value.field == field and words in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_cli_says_what_a_checkpointing_workload_is_where_it_emulates_training(capsys, tmp_path):
    """size, estimate and recommend answer where its checkpoints go (tests/test_checkpoint_targets.py); generating its
    dataset is refused: it has none."""
    code = main(["dataset", "generate", "--workload", str(LLAMA["8b"]), "--out", str(tmp_path / "none")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "--workload" in err and "a checkpointing workload" in err
    assert not (tmp_path / "none").exists()
    from dslab.core.workloads.dlio import parse_workload  # where the lab emulates training reads, its size is said
    with pytest.raises(ConfigError, match="104.7 GiB per checkpoint on 8 processes"):
        parse_workload(document("8b"), "llama3_8b.yaml")
    assert main(["size", "--workload", str(LLAMA["8b"])]) == 0
    capsys.readouterr()
    (tmp_path / "typo.yaml").write_text(LLAMA["8b"].read_text().replace("ffn_hidden_size", "ffn_hiden_size"))
    code = main(["size", "--workload", str(tmp_path / "typo.yaml")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "model.transformer.ffn_hiden_size" in err and "did you mean 'ffn_hidden_size'" in err


def test_what_the_lab_does_differently_from_dlio_as_coded_is_said():
    w = workload("8b")
    used = "\n".join(w.used)
    assert "checkpoint.fsync: True (the lab fsyncs every file" in used and "checkpoint_sync" in used
    assert "recovery_rank_shift: False" in used and "(not given: DLIO's default)" in used
    assert w.ignored == ("checkpoint.checkpoint_folder: where DLIO writes; the lab writes to each target's folder",)


def test_scale_shrinks_every_file_and_keeps_them_all():
    plan = workload("8b").with_scale(0.001).plan()
    assert plan.files == 16 and plan.bytes == pytest.approx(112_425_623_552 * 0.001, rel=1e-6)
    assert plan.hyperparameters()["checkpoint_plan"]["scale"] == 0.001
    assert len(json.dumps(plan.hyperparameters()["checkpoint_plan"])) <= 2500   # SageMaker's HyperParameterValue max
    with pytest.raises(ConfigError, match="--scale: 0: the fraction of every checkpoint file's bytes"):
        workload("8b").with_scale(0)


# ---- the training side ------------------------------------------------------------------------------------------

def spec_of(name: str, hosts: int | None = None, scale: float = 1e-5, writes: int = 2, reads: int = 2) -> CheckpointSpec:
    w = replace(workload(name).with_scale(scale), writes=writes, reads=reads, interval_seconds=0)
    return CheckpointSpec.from_hyperparameter(w.plan(hosts=hosts).hyperparameters()["checkpoint_plan"])


class Recorder:
    """os.fsync, os.posix_fadvise and the reader's open, recorded in order (by thread: the ranks run one each)."""

    def __init__(self, monkeypatch):
        self.events: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        real_fsync, real_fadvise, real_open = os.fsync, os.posix_fadvise, open

        def fsync(fd):
            self.add("fsync", os.readlink(f"/proc/self/fd/{fd}"))
            return real_fsync(fd)

        def fadvise(fd, offset, length, advice):
            assert advice == os.POSIX_FADV_DONTNEED
            self.add("drop", os.readlink(f"/proc/self/fd/{fd}"))
            return real_fadvise(fd, offset, length, advice)

        def reader_open(path, *args, **kwargs):
            self.add("read", str(path))
            return real_open(path, *args, **kwargs)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "posix_fadvise", fadvise)
        monkeypatch.setattr(trainer, "open", reader_open, raising=False)

    def add(self, kind: str, path: str) -> None:
        with self.lock:
            self.events.append((kind, path, threading.current_thread().name))

    def paths(self, kind: str) -> list[str]:
        return [p for k, p, _ in self.events if k == kind]


def written(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*.pt"))}


def test_each_rank_writes_its_files_fsyncs_them_drops_the_cache_then_reads(tmp_path, monkeypatch):
    spec = spec_of("8b")
    record = Recorder(monkeypatch)
    figures = run_checkpoints(spec, tmp_path, host=0, hosts=1, shared=False, log=lambda line: None)
    expected = {f"{checkpoint_folder(step)}/{name}": size for step in (1, 2) for rank in range(8)
                for name, size in spec.files(rank)}
    assert written(tmp_path) == expected and len(expected) == 32
    assert {name.split("/")[1] for name in expected} == {f"zero_pp_rank_{r}_mp_rank_0_{kind}_states.pt"
                                                         for r in range(8) for kind in ("model", "optim")}
    # Every file fsynced before its save counted, by the rank that wrote it; the cache dropped after every write
    # and before any read; each read by its rank (one host: its own files).
    assert sorted(record.paths("fsync")) == sorted(str(tmp_path / n) for n in expected) == sorted(record.paths("drop"))
    kinds = [k for k, _, _ in record.events]
    assert max(i for i, k in enumerate(kinds) if k == "fsync") < min(i for i, k in enumerate(kinds) if k == "drop")
    assert max(i for i, k in enumerate(kinds) if k == "drop") < min(i for i, k in enumerate(kinds) if k == "read")
    for kind, path, thread in record.events:
        if kind in ("fsync", "read"):
            assert f"zero_pp_rank_{thread.split('-')[1]}_mp_rank_0" in path, (kind, path, thread)
    assert sorted(record.paths("read")) == sorted(record.paths("fsync"))
    assert figures["fsync_calls"] == 32 and figures["cache_drop"].startswith("posix_fadvise")
    assert figures["recovery_rank_shift"] == {}
    # GB/s as DLIO reports it: the whole checkpoint in GiB (1024**3 bytes) over the longest rank's seconds.
    assert figures["bytes_per_checkpoint"] == spec.total_bytes == sum(expected.values()) // 2
    for phase in ("save", "load"):
        seconds = figures[f"{phase}_seconds"]
        assert len(seconds) == 2 and all(s > 0 for s in seconds)
        assert seconds == [max(r[i] for r in figures[f"rank_{phase}_seconds"].values()) for i in range(2)]
        assert figures[f"{phase}_gb_per_second"] == [spec.total_bytes / 1024 ** 3 / s for s in seconds]
    assert all(stall >= save for stall, save in zip(figures["stall_seconds"], figures["save_seconds"]))


def test_a_rank_of_a_cluster_reads_back_the_next_hosts_files(tmp_path, monkeypatch):
    """recovery_rank_shift on a shared folder: rank r reads what rank r + 8 (the next host) wrote, waiting until that
    host has fsynced it."""
    spec = spec_of("8b", hosts=2)
    record = Recorder(monkeypatch)
    results: dict[int, dict] = {}

    def host(h: int) -> None:
        results[h] = run_checkpoints(spec, tmp_path, host=h, hosts=2, shared=True, wait_seconds=60, log=lambda line: None)
    threads = [threading.Thread(target=host, args=(h,)) for h in (1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[0]["recovery_rank_shift"] == {str(r): r + 8 for r in range(8)}
    assert results[1]["recovery_rank_shift"] == {str(r): r - 8 for r in range(8, 16)}
    assert len(written(tmp_path)) == 2 * 16 * 2
    reads = [(path, thread) for kind, path, thread in record.events if kind == "read"]
    assert len(reads) == 2 * 16 * 2
    for path, thread in reads:   # thread rank-r reads only rank (r + 8) % 16's files
        source = (int(thread.split("-")[1]) + 8) % 16
        assert f"zero_pp_rank_{source}_mp_rank_0" in path, (path, thread)
    # The cluster's figures, as MLPerf takes them: the slowest host's seconds, the whole checkpoint over them.
    files = {f"metrics-algo-{h + 1}.json": json.dumps({"checkpoint": results[h]}) for h in (0, 1)}
    cluster = job_metrics(files, 2)["cluster"]["checkpoint"]
    for phase in ("save", "load"):
        slowest = [max(a, b) for a, b in zip(results[0][f"{phase}_seconds"], results[1][f"{phase}_seconds"])]
        assert cluster[f"{phase}_seconds"] == slowest
        assert cluster[f"{phase}_gb_per_second"] == [spec.total_bytes / GIB / s for s in slowest]


def test_subset_mode_writes_the_hosts_fraction_of_the_ranks(tmp_path):
    """MLPerf's subset mode: one host writes num_gpus / (TP x PP x DP) of the checkpoint: llama3_405b's first 8 of 512
    ranks, data-parallel rank 0 of pipeline stage 0, each its stage's layers (0-4) and its optimizer shard."""
    spec = spec_of("405b", hosts=1, writes=1, reads=1)
    assert (spec.mode, spec.processes, spec.data_parallelism) == ("subset", 8, 2)
    figures = run_checkpoints(spec, tmp_path, host=0, hosts=1, shared=False, log=lambda line: None)
    files = written(tmp_path)
    assert len(files) == 48 and figures["files_per_checkpoint"] == 48
    assert {n.split("/")[1] for n in files} == {f"layer_{i}-model_{r}_model_states.pt" for i in range(5) for r in range(8)} | \
        {f"zero_pp_rank_0_mp_rank_{r}_optim_states.pt" for r in range(8)}
    assert sum(files.values()) == figures["bytes_per_checkpoint"] == \
        workload("405b").with_scale(1e-5).plan(hosts=1).bytes


def test_a_read_finds_what_it_expects_or_says_what_is_wrong(tmp_path):
    only_read = spec_of("8b", writes=0, reads=1)
    with pytest.raises(CheckpointError, match="is missing: nothing wrote it"):
        run_checkpoints(only_read, tmp_path, host=0, hosts=1, shared=False, log=lambda line: None)
    run_checkpoints(spec_of("8b", writes=1, reads=0), tmp_path, host=0, hosts=1, shared=False, log=lambda line: None)
    assert run_checkpoints(only_read, tmp_path, host=0, hosts=1, shared=False, log=lambda line: None)["load_seconds"]
    bigger = spec_of("8b", scale=2e-5, writes=0, reads=1)
    with pytest.raises(CheckpointError, match="expected: another plan or job wrote it"):
        run_checkpoints(bigger, tmp_path, host=0, hosts=1, shared=False, log=lambda line: None)
    with pytest.raises(CheckpointError, match="is for 2 host"):
        run_checkpoints(spec_of("8b", hosts=2), tmp_path, host=0, hosts=1, shared=False)


# ---- the job: train.py, its metric lines, the record ----------------------------------------------------------------

def job(tmp_path: Path, hyperparameters: dict, channels: dict | None = None, env: dict | None = None):
    config = tmp_path / "ml" / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps({k: json.dumps(v) for k, v in hyperparameters.items()}))
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    if channels:
        (config / "inputdataconfig.json").write_text(json.dumps(channels))
    return load_context({"SAGEMAKER_BASE_DIR": str(tmp_path / "ml"), **(env or {})})


def test_the_training_script_runs_a_checkpoint_trial_into_the_results_record(tmp_path, capsys):
    plan = replace(workload("8b").with_scale(1e-5), writes=2, reads=1, interval_seconds=0).plan()
    ctx = job(tmp_path, plan.hyperparameters())
    summary = train.run(ctx)
    figures = summary["checkpoint"]
    # SageMaker's checkpoint LocalPath by default: /opt/ml/checkpoints, this host's own.
    assert figures["directory"] == str(tmp_path / "ml" / "checkpoints") and figures["shared"] is False
    assert len(written(tmp_path / "ml" / "checkpoints")) == 32
    log = capsys.readouterr().out
    for definition in CHECKPOINT_METRIC_DEFINITIONS:
        values = [float(v) for v in re.findall(definition["Regex"], log)]
        key = definition["Name"][len("checkpoint_"):]
        if key == "durable_seconds":   # only a job that names its checkpoint_s3_uri lists it (below)
            assert values == [] and "durable_seconds" not in figures
            continue
        assert values and values[-1] == pytest.approx(figures[f"{key}_mean"], rel=1e-5), definition["Name"]
    stored = json.loads((tmp_path / "ml" / "output" / "data" / "metrics.json").read_text())
    assert stored["checkpoint"]["save_seconds"] == figures["save_seconds"]
    # Into the record: metrics.json's figures as they are, or the scraped means where the archive is missing.
    from .test_operator import _describe
    describe = _describe("ckpt-1", "File")
    record = record_from_describe(describe, prices=PriceTable(), script_metrics=stored)
    assert record["metrics"]["checkpoint"] == stored["checkpoint"]
    validate_record(record)   # the contract takes it as it is (its metrics allow more properties)
    scraped = {**describe, "FinalMetricDataList": [{"MetricName": "checkpoint_save_seconds", "Value": 1.5},
                                                   {"MetricName": "checkpoint_load_gb_per_second", "Value": 3.0}]}
    assert metrics_from(scraped, None)["checkpoint"] == {"save_seconds_mean": 1.5, "load_gb_per_second_mean": 3.0}


class Uploads:
    """SageMaker's sync as the writer sees it through its listings: a file reaches "S3" ``lag`` looks after it was
    first listed as pending (never, with lag None), its ``.sagemaker-uploading`` marker beside it meanwhile when
    ``marked``; a fake clock the writer's sleeps advance."""

    def __init__(self, folder: Path, lag: int | None = 2, marked: int = 0, sizes: dict[str, int] | None = None):
        self.folder, self.lag, self.marked, self.sizes = folder, lag, marked, sizes or {}
        self.now, self.looks, self.first_seen = 0.0, 0, {}
        self.in_s3: dict[str, int] = {}

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def listing(self) -> dict[str, int]:
        self.looks += 1
        for path in sorted(self.folder.rglob("*")):
            rel = path.relative_to(self.folder).as_posix()
            if not path.is_file() or rel.endswith(trainer.UPLOADING_SUFFIX):
                continue
            seen = self.first_seen.setdefault(rel, self.looks)
            if self.lag is not None and self.looks - seen >= self.lag:
                self.in_s3[rel] = self.sizes.get(rel, path.stat().st_size)
            # The marker stands for ``marked`` looks, listed or not (a part still going up).
            marker = path.with_name(path.name + trainer.UPLOADING_SUFFIX)
            marker.touch() if self.looks - seen < self.marked else marker.unlink(missing_ok=True)
        for rel in [r for r in self.in_s3 if not (self.folder / r).exists()]:   # deleted in the container
            del self.in_s3[rel]
        return dict(self.in_s3)


def durable_run(tmp_path, uploads: Uploads, writes: int = 3, interval: float = 10.0, **options):
    spec = replace(spec_of("8b", writes=writes, reads=0), interval_seconds=interval)
    return trainer.CheckpointRun(spec, uploads.folder, 0, 1, False, sleep=uploads.sleep, clock=uploads.clock,
                                 log=lambda line: None, poll_seconds=1.0,
                                 durable=("s3://bucket/checkpoints/x/", uploads.listing), **options)


def test_a_sync_writer_times_each_checkpoint_until_s3_lists_it_and_waits_for_the_last(tmp_path):
    """SageMaker does not write to S3 once the job ends: the writer looks during the training between saves, times
    each checkpoint from its save's start until every file of it is listed, and before it ends waits until the last
    one is there too."""
    uploads = Uploads(tmp_path / "ckpt", lag=2)
    run = durable_run(tmp_path, uploads)
    figures = run.run()
    # The first look after a save finds its files pending; S3 lists them two looks (a second apart) later: durable
    # 2 s after the save's start (the save's own time is real, which the fake clock does not see).
    assert figures["durable_seconds"] == [2.0, 2.0, 2.0]
    assert figures["durable_seconds_mean"] == 2.0
    assert "listed s3://bucket/checkpoints/x/ every 1 s" in figures["durable_checked"]
    # Everything this host wrote is in "S3" when the run returns: the last checkpoint was waited for.
    mine = {f"{checkpoint_folder(step)}/{name}" for step in (1, 2, 3) for files in run.files.values() for name, _ in files}
    assert mine <= set(uploads.in_s3)
    # The waiting is untimed: the stalls are the writes alone.
    assert figures["stall_seconds"] == [0.0, 0.0, 0.0]
    # Clean-up deletes the local files and waits until S3 has dropped them too.
    assert run.clean_up().startswith("emptied") and not uploads.in_s3


def test_a_file_still_marked_uploading_or_listed_at_another_size_is_not_durable(tmp_path):
    slow = Uploads(tmp_path / "a", lag=1, marked=4)
    figures = durable_run(tmp_path, slow, writes=1).run()
    assert figures["durable_seconds"] == [4.0]   # listed after one look, but marked uploading until the fourth
    folder = tmp_path / "b"
    spec = replace(spec_of("8b", writes=1, reads=0), interval_seconds=0)
    name = next(iter(spec.files(0)))[0]
    short = Uploads(folder, lag=0, sizes={f"{checkpoint_folder(1)}/{name}": 1})
    with pytest.raises(CheckpointError) as err:
        durable_run(tmp_path, short, writes=1, wait_seconds=5).run()
    assert f"{checkpoint_folder(1)}/{name}" in str(err.value)


def test_a_checkpoint_that_never_reaches_s3_fails_the_writer_naming_it_before_the_job_ends(tmp_path):
    uploads = Uploads(tmp_path / "ckpt", lag=None)
    with pytest.raises(CheckpointError) as err:
        durable_run(tmp_path, uploads, writes=2, wait_seconds=30).run()
    text = str(err.value)
    assert text.startswith("checkpoint 1 was not whole in s3://bucket/checkpoints/x/ 30 s after its save")
    assert "SageMaker does not write to S3 once the job ends, so a restore would miss it" in text
    # A file-system target (shared) or a job with no S3 URI does not list anything.
    assert trainer.CheckpointRun(spec_of("8b", writes=1, reads=0), tmp_path / "fs", 0, 1, True,
                                 durable=("s3://b/x/", uploads.listing)).watch is None


def test_a_file_system_channel_holds_the_checkpoints_of_every_host(tmp_path):
    plan = replace(workload("8b").with_scale(1e-5), writes=1, reads=1, interval_seconds=0).plan()
    mount = tmp_path / "fsx"
    channels = {"checkpoints": {"TrainingInputMode": "File"}}
    ctx = job(tmp_path, {**plan.hyperparameters(), "checkpoint_channel": "checkpoints", "checkpoint_dir": "trial-1"},
              channels, {"SM_CHANNEL_CHECKPOINTS": str(mount)})
    figures = train.run(ctx)["checkpoint"]
    assert figures["shared"] is True and len(written(mount / "trial-1")) == 16
    with pytest.raises(ContractError, match="checkpoint_channel='efs' names no input channel"):
        train.checkpoint_directory(replace(ctx, hyperparameters={**ctx.hyperparameters, "checkpoint_channel": "efs"}))


def test_the_formula_runs_anywhere_the_lab_or_a_job_does():
    """checkpoint_layout.py is imported by dslab/core (no numpy there) and by the job: the standard library only."""
    import ast
    tree = ast.parse((TRAINING / "dslab_train" / "checkpoint_layout.py").read_text())
    imported = {(n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
                for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in (n.names if isinstance(n, ast.Import) else [n])}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
