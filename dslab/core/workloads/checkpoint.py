"""DLIO checkpointing workloads, the format MLPerf Storage v2.0 publishes its checkpoint benchmarks in, read as published.

mlcommons/storage's configs/dlio/workload/llama3_8b.yaml, _70b, _405b and _1t (vendored under dslab/contracts/dlio/)
set ``workflow: {train: False, checkpoint: True}``: DLIO then only writes checkpoints and reads them back. What a
checkpoint is comes from the ``model`` block (layers, transformer shape, datatypes, tensor/pipeline/data parallelism,
ZeRO stage) through DLIO's formula (training/dslab_train/checkpoint_layout.py: the files every rank writes and their
bytes); how often from the ``checkpoint`` block (num_checkpoints_write/read, time_between_checkpoints, mode).

Keys are read as DLIO's LoadConfig reads them in argonne-lcf/dlio_benchmark branch mlperf_storage_v2.0 at 392621b
(the DLIO mlcommons/storage v2.0 installs; main at e1919d7 reads the same keys for these sections): a key it does not
read is refused with the closest one (DLIO would ignore it silently: ``model.model_size`` for ``model_size_bytes``
falls back to 10240 bytes). DLIO's own defaults apply where a field is absent, each said so.

Two keys the lab applies whatever the file says, because DLIO as coded never does (LoadConfig stores them under
names its checkpointing never reads): ``fsync`` (stored as ``args.checkpoint_sync``; the writer reads
``checkpoint_fsync``) and ``recovery_rank_shift`` (stored as ``checkpoint_recover_rank_shift``; the reader reads
``checkpoint_recovery_rank_shift``). MLPerf's Submission_guidelines.md: "We enforce ``fsync`` to be applied during
checkpoint writes to ensure data is flushed to persistent storage." No I/O here: the CLI reads the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

from .sections import check_sections, read_number, read_section
from ..errors import ConfigError

from dslab_train.checkpoint_layout import (DATATYPE_BYTES, GIB, ModelShape, RankState,
                                           num_parameters, rank_state, scaled_bytes)

DLIO_RELEASE = "argonne-lcf/dlio_benchmark mlperf_storage_v2.0 at 392621b"

# The keys LoadConfig reads (dlio_benchmark/utils/config.py at 392621b, lines 864-943 and 964-975).
MODEL_KEYS = {"name", "type", "model_size_bytes", "optimization_groups", "num_layers", "layer_parameters",
              "model_datatype", "optimizer_datatype", "parallelism", "transformer"}
PARALLELISM_KEYS = {"tensor", "pipeline", "data", "zero_stage"}
TRANSFORMER_KEYS = {"vocab_size", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads"}
CHECKPOINT_KEYS = {"checkpoint_folder", "checkpoint_after_epoch", "epochs_between_checkpoints",
                   "steps_between_checkpoints", "type", "checkpoint_mechanism_classname", "fsync",
                   "time_between_checkpoints", "num_checkpoints_write", "num_checkpoints_read", "recovery_rank_shift",
                   "rank_sync", "mode", "randomize_tensor", "ksm"}
KSM_KEYS = {"madv_mergeable_id", "high_ram_trigger", "low_ram_exit", "await_time"}
WORKFLOW_KEYS = {"train", "generate_data", "evaluation", "checkpoint", "profiling"}
FRAMEWORKS = ("pytorch", "tensorflow")          # FrameworkType; DLIO's default is tensorflow
MODES = ("default", "subset")                    # CheckpointModeType
LOCATION_TYPES = ("rank_zero", "all_ranks")      # CheckpointLocationType
# ConfigArguments' defaults (config.py at 392621b, lines 46-136) for the checkpoint fields.
CHECKPOINT_DEFAULTS = {"framework": "tensorflow", "mode": "default", "num_checkpoints_write": -1,
                       "num_checkpoints_read": -1, "time_between_checkpoints": -1, "fsync": False,
                       "recovery_rank_shift": False, "rank_sync": False, "randomize_tensor": True,
                       "checkpoint_folder": "./checkpoints/", "data": -1, "name": "default"}
MAX_CHECKPOINTS = 1000

# MLPerf's hosts: "The number of MPI processes must be set to 8, 64, 512, and 1024 for the respective models for
# CLOSE submission. ... they may adjust the number of GPUs per host, as long as each host uses more than 4 GPUs"
# (mlcommons/storage Submission_guidelines.md at caa90c9, section 2.2.1). The lab counts 8 a host (ml.p5.48xlarge,
# ml.p4d.24xlarge) unless told otherwise.
GPUS_PER_HOST = 8


@dataclass(frozen=True)
class GuidelineRow:
    """A column of the guidelines' Table 2 (Submission_guidelines.md at caa90c9, lines 99-110)."""
    model: str            # "8B"
    tensor: int
    pipeline: int
    data: int             # Parallelism (TPxPPxDP)
    zero_stage: int
    size: str             # Checkpoint size, as printed
    size_gib: float       # the same in DLIO's unit: DLIO prints GiB and calls them "GB" (base_checkpointing.py
                          # lines 164-184), so "105 GB" is 105 GiB and "5.29 TB" 5,290 of them

    @property
    def processes(self) -> int:
        return self.tensor * self.pipeline * self.data


# Table 2: "| Parallelism (TPxPPxDP) | 1×1×8 | 8×1x8 | 8×32×2 | 8×64×2 |", "| ZeRO | 3 | 3 | 1 | 1 |",
# "| Checkpoint size | 105 GB | 912 GB | 5.29 TB | 18 TB |". Keyed by the vendored files' model.name.
GUIDELINES = {
    "llama_8b": GuidelineRow("8B", 1, 1, 8, 3, "105 GB", 105.0),
    "llama_70b": GuidelineRow("70B", 8, 1, 8, 3, "912 GB", 912.0),
    "llama_405b": GuidelineRow("405B", 8, 32, 2, 1, "5.29 TB", 5290.0),
    "llama_1t": GuidelineRow("1T", 8, 64, 2, 1, "18 TB", 18000.0),
}
# Where the guidelines and the formula part: DLIO's formula gives llama3_1t 16,564,174,094,592 bytes, 15,426.6 GiB
# (15.07 TiB, 16.56 TB), not 18 TB. mlpstorage's own table (mlpstorage/config.py LLM_SIZE_BY_RANK, "These need to be
# updated with actual values") lists 1T as (model 2571, optimizer 15426) GB: its optimizer figure is the formula's
# whole checkpoint, and adding a model figure to it gives 17,997, the "18 TB" (our reading; no document says so).
GUIDELINES_1T_NOTE = ("the guidelines' 18 TB for llama3_1t is not what DLIO writes: its formula gives 15,426.6 GiB "
                      "(15.07 TiB); mlpstorage's table has 1T as model 2571 + optimizer 15426 GB, and 15426 is already "
                      "the formula's whole checkpoint, so 18 TB looks like the model counted twice")


@dataclass(frozen=True)
class CheckpointWorkload:
    """A DLIO checkpointing workload as the lab runs it, at ``scale`` (a fraction of every file's bytes)."""
    name: str                        # model.name
    source: str
    shape: ModelShape
    framework: str
    mode: str                        # checkpoint.mode: default | subset
    data_parallelism: int | None     # model.parallelism.data (subset only; default mode derives it)
    writes: int                      # num_checkpoints_write (0: none)
    reads: int                       # num_checkpoints_read (0: none)
    interval_seconds: float          # time_between_checkpoints: emulated compute before each save and load
    rank_sync: bool                  # a barrier after each save, inside the timed part
    folder: str                      # checkpoint_folder
    fsync_in_file: bool
    recovery_rank_shift_in_file: bool
    used: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    scale: float = 1.0
    sha256: str | None = None
    document: str = field(default="{}", repr=False)

    @property
    def num_parameters(self) -> int:
        return num_parameters(self.shape)

    @property
    def guideline(self) -> GuidelineRow | None:
        return GUIDELINES.get(self.name)

    def with_scale(self, scale: Any, field_name: str = "--scale") -> "CheckpointWorkload":
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or not 0 < scale <= 1:
            raise ConfigError(field_name, f"{scale!r}: the fraction of every checkpoint file's bytes to write and read",
                              "a number above 0 and at most 1 (the files per rank are kept)")
        return replace(self, scale=float(scale))

    def plan(self, hosts: int | None = None, gpus_per_host: int = GPUS_PER_HOST,
             hosts_field: str = "--instance-count") -> "CheckpointPlan":
        """The run on ``hosts`` hosts of ``gpus_per_host`` GPUs, one process (rank) per GPU, as MLPerf runs it.

        Without ``hosts``: MLPerf's CLOSED process count for the four llama3 models (Table 2), one host in subset
        mode, else the fewest hosts whose GPUs split into whole TP x PP groups. As mlpstorage does
        (mlpstorage/benchmarks/dlio.py add_checkpoint_params: ``if self.args.num_processes < ClosedGPUs:
        self.params_dict['checkpoint.mode'] = "subset"; self.params_dict['model.parallelism.data'] =
        configured_data_parallelism``), fewer processes than a llama3 model's CLOSED count run in subset mode with
        Table 2's data parallelism."""
        gpus = int(read_number(gpus_per_host, "gpus per host", 1, 64, whole=True))
        mp = self.shape.model_parallelism
        row = self.guideline
        mode, dp, why = self.mode, self.data_parallelism, None
        if hosts is None:
            if mode == "subset":
                hosts = 1   # "checkpointing is simulated on a single host" (Submission_guidelines.md 2.2.2)
            else:
                wanted = row.processes if row else math.lcm(mp, gpus)
                hosts = math.ceil(wanted / gpus)
        hosts = int(read_number(hosts, hosts_field, 1, 10_000, whole=True))
        processes = hosts * gpus
        if mode == "default":
            if row is not None and processes < row.processes:
                mode, dp = "subset", row.data
                why = (f"{processes} processes are fewer than MLPerf's {row.processes} for {self.name}: subset mode "
                       f"with Table 2's data parallelism {row.data}, as mlpstorage runs it")
            elif processes % mp:
                step = math.lcm(mp, gpus) // gpus
                raise ConfigError(hosts_field, f"{hosts} host(s) x {gpus} GPUs = {processes} processes do not split "
                                  f"into whole copies of the model's TP x PP = {self.shape.tensor} x "
                                  f"{self.shape.pipeline} = {mp} GPUs (model.parallelism in {self.source})",
                                  f"a multiple of {step} host(s) of {gpus} GPUs")
            else:
                dp = processes // mp
        if mode == "subset" and processes > dp * mp:
            raise ConfigError(hosts_field, f"{hosts} host(s) x {gpus} GPUs = {processes} processes are more than the "
                              f"subset's DP x TP x PP = {dp} x {self.shape.tensor} x {self.shape.pipeline} = {dp * mp} "
                              f"ranks (model.parallelism.data in {self.source})",
                              f"at most {dp * mp // gpus} host(s), or a larger model.parallelism.data")
        ranks = tuple(rank_state(self.shape, r, dp) for r in range(processes))
        return CheckpointPlan(self, hosts, gpus, processes, mode, dp, ranks, why)

    def entry(self) -> dict[str, Any]:
        """The experiment's `workload:` as run (dlio.Workload.entry's shape): the file's name, scale, content and
        digest, so the record alone reproduces the run and the workflow reads no file."""
        out = {"file": self.source, "scale": self.scale, "dlio": json.loads(self.document)}
        return {**out, "sha256": self.sha256} if self.sha256 else out

    @property
    def slug(self) -> str:
        """The model's name as the records' dataset and the jobs' names carry it ("llama-8b")."""
        import re
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")[:30].strip("-") or "checkpoint"

    def describe(self) -> str:
        s = self.shape
        layers = (f"{s.num_layers} layers, hidden {s.hidden_size:,}, FFN {s.ffn_hidden_size:,}, "
                  f"{s.num_attention_heads} heads ({s.num_kv_heads} KV), vocabulary {s.vocab_size:,}; "
                  if s.num_layers > 0 else f"a {s.model_size_bytes:,}-byte model state; ")
        phases = ", ".join(p for p in (f"{self.writes} checkpoint(s) written" if self.writes else "",
                                       f"{self.reads} read back" if self.reads else "") if p)
        scaled = f"; scale {self.scale:g} of every file's bytes" if self.scale != 1 else ""
        return (f"checkpoint workload {self.name} ({self.source}): {self.num_parameters / 1e9:,.2f} B parameters "
                f"({layers}{s.model_datatype} model, {s.optimizer_datatype} optimizer); TP {s.tensor} x PP "
                f"{s.pipeline}, ZeRO {s.zero_stage}; {self.mode} mode; {phases}, "
                f"{max(0.0, self.interval_seconds):g} s apart{scaled}")


@dataclass(frozen=True)
class CheckpointPlan:
    """A checkpoint workload on a cluster: every rank's files, unscaled (``bytes`` at the workload's scale)."""
    workload: CheckpointWorkload
    hosts: int
    gpus_per_host: int
    processes: int
    mode: str
    data_parallelism: int
    ranks: tuple[RankState, ...] = field(repr=False)
    mode_why: str | None = None

    @property
    def scale(self) -> float:
        return self.workload.scale

    @property
    def files(self) -> int:
        """Files per checkpoint, every rank's."""
        return sum(len(r.files) for r in self.ranks)

    @property
    def full_bytes(self) -> int:
        """Bytes per checkpoint by DLIO's formula, unscaled: every file every rank writes."""
        return sum(r.bytes for r in self.ranks)

    @property
    def bytes(self) -> int:
        """Bytes per checkpoint at the workload's scale."""
        return sum(scaled_bytes(size, self.scale) for r in self.ranks for _, size in r.files)

    @property
    def dlio_reported_gib(self) -> float:
        """The "Total checkpoint size" DLIO prints, in GiB it calls GB: the model and optimizer state every rank
        allocates, summed over the ranks (equal to the bytes written except with ZeRO 2, whose data-parallel ranks
        other than 0 hold the model but do not write it, and for a non-transformer model, counted once)."""
        s = self.workload.shape
        if s.model_type != "transformer" and s.model_size_bytes > 0:
            model = s.model_size_bytes
        else:
            model = sum(r.counted_model_bytes for r in self.ranks)
        return (model + sum(r.counted_optimizer_bytes for r in self.ranks)) / GIB

    def host_ranks(self, host: int) -> tuple[RankState, ...]:
        return self.ranks[host * self.gpus_per_host:(host + 1) * self.gpus_per_host]

    def host_bytes(self, host: int) -> int:
        return sum(scaled_bytes(size, self.scale) for r in self.host_ranks(host) for _, size in r.files)

    @property
    def rank_bytes(self) -> tuple[int, int]:
        """(smallest, largest) rank's bytes per checkpoint, unscaled."""
        sizes = [r.bytes for r in self.ranks]
        return min(sizes), max(sizes)

    def hyperparameters(self) -> dict[str, Any]:
        """What the training job needs to write and read this plan (training/dslab_train/checkpoint.py): the model's
        shape, from which each host computes its ranks' files with the same formula. SageMaker takes hyperparameter
        values of at most 2,500 characters (botocore's HyperParameterValue)."""
        w = self.workload
        return {"checkpoint_plan": {
            "workload": w.name, "shape": w.shape.to_dict(), "mode": self.mode, "processes": self.processes,
            "data_parallelism": self.data_parallelism, "ranks_per_host": self.gpus_per_host, "scale": w.scale,
            "writes": w.writes, "reads": w.reads, "interval_seconds": max(0.0, w.interval_seconds),
            "rank_sync": w.rank_sync}}

    def describe(self) -> list[str]:
        low, high = self.rank_bytes
        lines = [f"checkpoint of {self.workload.name}: {self.processes} processes on {self.hosts} host(s) of "
                 f"{self.gpus_per_host} GPUs (TP {self.workload.shape.tensor} x PP {self.workload.shape.pipeline} x "
                 f"DP {self.data_parallelism}, {self.mode} mode); {self.files:,} files, "
                 f"{self.full_bytes:,} bytes = {self.full_bytes / GIB:,.1f} GiB per checkpoint by DLIO's formula "
                 f"({low / GIB:,.2f} to {high / GIB:,.2f} GiB a rank)"]
        if self.scale != 1:
            lines.append(f"at scale {self.scale:g}: {self.bytes:,} bytes per checkpoint, the same files")
        if self.mode_why:
            lines.append(self.mode_why)
        row = self.workload.guideline
        if row is not None and self.processes == row.processes and self.mode == "default":
            lines.append(guideline_line(self.workload.name, self.full_bytes))
        return lines


def guideline_line(name: str, formula_bytes: int) -> str:
    """DLIO's formula beside the guidelines' Table 2, in the guidelines' own unit (DLIO's GiB called GB)."""
    row = GUIDELINES[name]
    gib = formula_bytes / GIB
    off = 100.0 * (gib - row.size_gib) / row.size_gib
    line = (f"MLPerf's Table 2 gives {row.model} {row.size}; DLIO's formula {gib:,.1f} GiB ({gib / 1024:,.2f} TiB, "
            f"{formula_bytes / 1e12:,.2f} TB), {off:+.1f}% against it read as DLIO's GiB-called-GB")
    return line + ("; " + GUIDELINES_1T_NOTE if name == "llama_1t" else "")


def guidelines_comparison(plans: dict[str, CheckpointPlan]) -> list[dict[str, Any]]:
    """Rows of the sizes table: each llama3 model at MLPerf's CLOSED process count, formula beside Table 2."""
    rows = []
    for name, row in GUIDELINES.items():
        plan = plans[name]
        gib = plan.full_bytes / GIB
        rows.append({"model": row.model, "parallelism": f"{row.tensor}x{row.pipeline}x{row.data}", "zero": row.zero_stage,
                     "processes": plan.processes, "hosts": plan.hosts, "files": plan.files,
                     "guidelines": row.size, "formula_bytes": plan.full_bytes, "formula_gib": round(gib, 3),
                     "formula_tib": round(gib / 1024, 4), "formula_tb": round(plan.full_bytes / 1e12, 3),
                     "difference_percent": round(100.0 * (gib - row.size_gib) / row.size_gib, 2)})
    return rows


# ---- parsing ----------------------------------------------------------------------------------------------------

def is_checkpointing(document: Any) -> bool:
    """DLIO's checkpoint-only run: ``if not args.do_train: ... if args.do_checkpoint: args.checkpoint_only = True``
    (LoadConfig, config.py lines 977-981). DLIO's defaults: train True, checkpoint False."""
    workflow = document.get("workflow") if isinstance(document, dict) else None
    return isinstance(workflow, dict) and workflow.get("train", True) is False and workflow.get("checkpoint") is True


def _bool(section: dict, key: str, path: str) -> bool:
    value = section.get(key, CHECKPOINT_DEFAULTS[key])
    if not isinstance(value, bool):
        raise ConfigError(path, f"{value!r} is not true or false")
    return value


def parse_checkpoint_workload(document: Any, source: str, where: str = "") -> CheckpointWorkload:
    """A DLIO checkpointing workload (the YAML file as loaded), validated as DLIO's ConfigArguments.validate does;
    ConfigError names the key path."""
    check_sections(document, source, where, "model, workflow and checkpoint")
    used: list[str] = []
    ignored: list[str] = []

    def note(path: str, value: Any, default: bool = False) -> None:
        used.append(f"{path}: {value}" + (" (not given: DLIO's default)" if default else ""))

    workflow = read_section(document, "workflow", WORKFLOW_KEYS, where)
    if not is_checkpointing(document):
        raise ConfigError(f"{where}workflow", f"{source} is not a checkpointing workload",
                          "workflow: {train: False, checkpoint: True}")
    rest = sorted(k for k in workflow if k not in ("train", "checkpoint") and workflow[k])
    if rest:
        ignored.append(f"workflow ({', '.join(rest)}): DLIO's other phases; a checkpoint trial writes and reads checkpoints")

    framework = document.get("framework", CHECKPOINT_DEFAULTS["framework"])
    if framework not in FRAMEWORKS:
        raise ConfigError(f"{where}framework", f"{framework!r} is not a DLIO framework", FRAMEWORKS)
    note("framework", framework, "framework" not in document)
    if framework == "tensorflow":
        ignored.append("framework: tensorflow: DLIO's TensorFlow checkpointing saves each state as tf.train.Checkpoint's "
                       "index and data files; the lab writes one file a state, as DLIO's PyTorch checkpointing does "
                       "(the same bytes)")

    model = read_section(document, "model", MODEL_KEYS, where)
    mpath = f"{where}model."
    for key in ("layer_parameters", "optimization_groups"):
        if key in model:
            raise ConfigError(f"{mpath}{key}", "gives DLIO's older predefined state sizes, which its reported "
                              "checkpoint size leaves out; the lab sizes transformer checkpoints from the model's shape",
                              "num_layers with model.transformer")
    name = model.get("name", CHECKPOINT_DEFAULTS["name"])
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{mpath}name", f"{name!r} is not a model name")
    note("model.name", name, "name" not in model)
    model_type = model.get("type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError(f"{mpath}type", f"{model_type!r} is not a model type", "transformer, or leave it out")
    defaults = ModelShape()

    def whole(section: dict, key: str, path: str, low: int, high: int) -> int:
        given = key in section
        value = int(read_number(section.get(key, getattr(defaults, key)), path, low, high, whole=True))
        note(path[len(where):], value, not given)
        return value

    num_layers = whole(model, "num_layers", f"{mpath}num_layers", -1, 100_000)
    if model_type != "transformer":
        model_size = whole(model, "model_size_bytes", f"{mpath}model_size_bytes", 0, 2 ** 50)
    else:   # DLIO writes a model_states file only `if self.args.model_type != "transformer"`
        model_size = defaults.model_size_bytes
        if "model_size_bytes" in model:
            ignored.append("model.model_size_bytes: a transformer's size comes from its layers")
    datatypes = {}
    for key in ("model_datatype", "optimizer_datatype"):
        value = model.get(key, getattr(defaults, key))
        if value not in DATATYPE_BYTES:
            raise ConfigError(f"{mpath}{key}", f"{value!r} is not a datatype DLIO sizes", list(DATATYPE_BYTES))
        datatypes[key] = value
        note(f"model.{key}", value, key not in model)
    parallelism = read_section(model, "parallelism", PARALLELISM_KEYS, mpath)
    ppath = f"{mpath}parallelism."
    tensor = whole(parallelism, "tensor", f"{ppath}tensor", 1, 4096)
    pipeline = whole(parallelism, "pipeline", f"{ppath}pipeline", 1, 4096)
    zero = int(read_number(parallelism.get("zero_stage", 0), f"{ppath}zero_stage", 0, 3, whole=True))
    note("model.parallelism.zero_stage", zero, "zero_stage" not in parallelism)
    data = int(read_number(parallelism.get("data", -1), f"{ppath}data", -1, 1_000_000, whole=True))
    if data == 0:
        raise ConfigError(f"{ppath}data", "0 data-parallel copies", "1 or more, in subset mode only")
    transformer = read_section(model, "transformer", TRANSFORMER_KEYS, mpath)
    tpath = f"{mpath}transformer."
    shape_fields = {key: whole(transformer, key, f"{tpath}{key}", 1, 10_000_000)
                    for key in ("vocab_size", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads")}
    shape = ModelShape(num_layers=num_layers, tensor=tensor, pipeline=pipeline, zero_stage=zero, model_type=model_type,
                       model_size_bytes=model_size, **datatypes, **shape_fields)

    checkpoint = read_section(document, "checkpoint", CHECKPOINT_KEYS, where)
    cpath = f"{where}checkpoint."
    if "checkpoint_mechanism_classname" in checkpoint:
        raise ConfigError(f"{cpath}checkpoint_mechanism_classname", "names a checkpointing class of the user's, which "
                          "the lab cannot know", "leave it out: DLIO's own checkpointing")
    mode = checkpoint.get("mode", CHECKPOINT_DEFAULTS["mode"])
    if mode not in MODES:
        raise ConfigError(f"{cpath}mode", f"{mode!r} is not a DLIO checkpoint mode", MODES)
    note("checkpoint.mode", mode, "mode" not in checkpoint)
    counts = {}
    for key in ("num_checkpoints_write", "num_checkpoints_read"):
        value = int(read_number(checkpoint.get(key, CHECKPOINT_DEFAULTS[key]), f"{cpath}{key}", -1, MAX_CHECKPOINTS, whole=True))
        counts[key] = max(0, value)   # DLIO runs a phase only `if self.args.num_checkpoints_write > 0` (main.py)
        note(f"checkpoint.{key}", value, key not in checkpoint)
    writes, reads = counts["num_checkpoints_write"], counts["num_checkpoints_read"]
    if not writes and not reads:
        raise ConfigError(f"{cpath}num_checkpoints_write", "and num_checkpoints_read are both 0 or less: nothing to "
                          "write or read", "a number of checkpoints to write (and to read back)")
    if writes and reads > writes:   # ConfigArguments.validate, lines 300-302
        raise ConfigError(f"{cpath}num_checkpoints_read", f"{reads} is more than the {writes} checkpoints written",
                          f"at most {writes}")
    interval = read_number(checkpoint.get("time_between_checkpoints", -1), f"{cpath}time_between_checkpoints", -1, 86400)
    note("checkpoint.time_between_checkpoints", f"{interval:g} s", "time_between_checkpoints" not in checkpoint)
    fsync = _bool(checkpoint, "fsync", f"{cpath}fsync")
    note("checkpoint.fsync", f"{fsync} (the lab fsyncs every file, as MLPerf requires; DLIO as coded never does: "
         "LoadConfig stores fsync as checkpoint_sync, its writer reads checkpoint_fsync)", "fsync" not in checkpoint)
    shift = _bool(checkpoint, "recovery_rank_shift", f"{cpath}recovery_rank_shift")
    note("checkpoint.recovery_rank_shift", f"{shift} (on a cluster the lab reads the next host's files whatever it "
         "says, so that no page cache serves them; DLIO as coded never shifts: LoadConfig stores it as "
         "checkpoint_recover_rank_shift)", "recovery_rank_shift" not in checkpoint)
    rank_sync = _bool(checkpoint, "rank_sync", f"{cpath}rank_sync")
    randomize = _bool(checkpoint, "randomize_tensor", f"{cpath}randomize_tensor")
    if "ksm" in checkpoint:
        read_section(checkpoint, "ksm", KSM_KEYS, cpath)
        if randomize:   # ConfigArguments.validate, lines 303-304
            raise ConfigError(f"{cpath}ksm", "requires checkpoint.randomize_tensor: False (DLIO refuses it beside random "
                              "tensors)")
    if not randomize:
        ignored.append("checkpoint.randomize_tensor: False: DLIO then writes tensors of ones; the lab writes random "
                       "bytes, which no storage compresses")
    if "ksm" in checkpoint:
        ignored.append("checkpoint.ksm: DLIO's memory sharing for its tensors; the lab holds no tensors")
    folder = checkpoint.get("checkpoint_folder", CHECKPOINT_DEFAULTS["checkpoint_folder"])
    if not isinstance(folder, str) or not folder.strip():
        raise ConfigError(f"{cpath}checkpoint_folder", f"{folder!r} is not a folder")
    kind = checkpoint.get("type")
    if kind is not None and kind not in LOCATION_TYPES:
        raise ConfigError(f"{cpath}type", f"{kind!r} is not a DLIO checkpoint location type", LOCATION_TYPES)
    for key, why in (("checkpoint_folder", "where DLIO writes; the lab writes to each target's folder"),
                     ("type", "which ranks checkpoint during training; a checkpointing workload's ranks follow ZeRO"),
                     ("checkpoint_after_epoch", "checkpoints during training; a checkpointing workload writes "
                      "num_checkpoints_write back to back"),
                     ("epochs_between_checkpoints", "checkpoints during training"),
                     ("steps_between_checkpoints", "checkpoints during training")):
        if key in checkpoint:
            ignored.append(f"checkpoint.{key}: {why}")
    if mode == "subset":   # ConfigArguments.validate, lines 292-296
        if data <= 0:
            raise ConfigError(f"{ppath}data", "is needed in subset mode: the data parallelism of the whole run, a "
                              "fraction of which the host writes", "a whole number of data-parallel copies")
    elif data > 0:         # lines 290-291
        raise ConfigError(f"{ppath}data", f"{data} in default mode, where DLIO derives it from the processes "
                          "(processes / (TP x PP)) and refuses it", "leave it out, or checkpoint.mode: subset")
    if num_layers > 0 and num_layers < pipeline:   # lines 284-287
        raise ConfigError(f"{mpath}num_layers", f"{num_layers} layers cannot fill {pipeline} pipeline stages",
                          f"at least {pipeline} layers, or a smaller model.parallelism.pipeline")
    if pipeline > 1 and zero == 3:                 # lines 288-289
        raise ConfigError(f"{ppath}zero_stage", "3 with pipeline parallelism, which DLIO refuses",
                          "ZeRO 0, 1 or 2 with pipeline > 1")

    for section, value in document.items():
        section = str(section)
        if section in ("model", "checkpoint", "workflow", "framework"):
            continue
        keys = f" ({', '.join(map(str, value))})" if isinstance(value, dict) and value else ""
        ignored.append(f"{section}{keys}: not read by a checkpointing workload")
    return CheckpointWorkload(
        name=name, source=source, shape=shape, framework=framework, mode=mode,
        data_parallelism=data if mode == "subset" else None, writes=writes, reads=reads, interval_seconds=interval,
        rank_sync=rank_sync, folder=folder.rstrip("/"), fsync_in_file=fsync, recovery_rank_shift_in_file=shift,
        used=tuple(used), ignored=tuple(ignored), document=json.dumps(document, default=str))


__all__ = ["CheckpointWorkload", "CheckpointPlan", "GuidelineRow", "GUIDELINES", "GPUS_PER_HOST", "DLIO_RELEASE",
           "parse_checkpoint_workload", "is_checkpointing", "guidelines_comparison", "guideline_line"]
