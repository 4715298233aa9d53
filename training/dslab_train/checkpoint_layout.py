"""DLIO's checkpoint layout: the files every rank writes per checkpoint, their names and their sizes.

Written from argonne-lcf/dlio_benchmark, branch mlperf_storage_v2.0 at 392621b (the DLIO that mlcommons/storage
v2.0 installs), dlio_benchmark/checkpointing/base_checkpointing.py (identical on main at e1919d7 for what is used
here): ``get_num_parameters`` (lines 284-302), ``get_layer_parameters`` (304-329), ``get_layer_state`` (330-338),
``get_optimization_groups`` (340-358), ``get_layer_index`` (360-382), the rank decomposition and the state each rank
allocates (``__init__``, 56-184) and the file each state is saved to (``save_checkpoint``, 385-418). A file's bytes
are its tensors' (elements x the datatype's size); DLIO's ``torch.save`` adds a small zip container around them.

One implementation for both sides: the training script computes its ranks' files from it (checkpoint.py), and the
lab sizes checkpoints with it (dslab/core/workloads/checkpoint.py). Standard library only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

# base_checkpointing.py get_datatype_size (lines 33-43).
DATATYPE_BYTES = {"int8": 1, "uint8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}
# DLIO's PyTorch checkpointing (pytorch_checkpointing.py: ``super().__init__("pt")``) names every file <suffix>.pt.
EXTENSION = "pt"
GIB = 1024 ** 3   # DLIO's "GB": checkpoint_size is divided by 1024**3 (base_checkpointing.py lines 164-165)


@dataclass(frozen=True)
class ModelShape:
    """What DLIO's checkpoint sizes depend on: the ``model`` block of a workload (DLIO's defaults where absent)."""
    num_layers: int = -1            # model.num_layers (<= 0: no transformer layers)
    hidden_size: int = 2048         # model.transformer.*
    ffn_hidden_size: int = 8192
    num_attention_heads: int = 32
    num_kv_heads: int = 8
    vocab_size: int = 32000
    model_datatype: str = "fp16"    # model.model_datatype
    optimizer_datatype: str = "fp32"
    tensor: int = 1                 # model.parallelism.*
    pipeline: int = 1
    zero_stage: int = 0
    model_type: str | None = None   # model.type: "transformer" writes no model_states file
    model_size_bytes: int = 10240   # model.model_size_bytes: a non-transformer model's one state

    @property
    def model_parallelism(self) -> int:
        return self.tensor * self.pipeline

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict) -> "ModelShape":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise ValueError(f"unknown model shape field {unknown[0]!r}")
        return cls(**value)


def num_parameters(shape: ModelShape) -> int:
    """get_num_parameters: embedding + L x (norms, QKV, dense, gated MLP) + final norm + lm_head."""
    if shape.num_layers <= 0:
        return 0
    h = shape.hidden_size
    dim_kv = (h // shape.num_attention_heads) * shape.num_kv_heads
    embedding = shape.vocab_size * h
    per_layer = h + h * (h + 2 * dim_kv) + h * h + h + shape.ffn_hidden_size * 2 * h + shape.ffn_hidden_size * h
    return embedding + per_layer * shape.num_layers + h + embedding


def layer_parameters(shape: ModelShape, layer: int, data_parallelism: int) -> list[int]:
    """get_layer_parameters: the elements of each tensor of layer ``layer`` on one rank. Layers 0 and L+1 are the
    embedding and lm_head (split by TP), L+2 the final norm (not split by TP); ZeRO 3 also shards over DP."""
    if shape.num_layers <= 0:
        return []
    h, tp = shape.hidden_size, shape.tensor
    sf = 1 if shape.zero_stage < 3 else data_parallelism
    dim_kv = (h // shape.num_attention_heads) * shape.num_kv_heads
    if layer == 0 or layer == shape.num_layers + 1:
        return [h * shape.vocab_size // tp // sf]
    if layer == shape.num_layers + 2:
        return [h // sf]
    return [h // sf, h * (h + 2 * dim_kv) // tp // sf, h * h // tp // sf, h // sf,
            h * 2 * shape.ffn_hidden_size // tp // sf, h * shape.ffn_hidden_size // tp // sf]


def layer_bytes(shape: ModelShape, layer: int, data_parallelism: int) -> int:
    """get_layer_state: only tensors of more than 0 elements are allocated."""
    return sum(n for n in layer_parameters(shape, layer, data_parallelism) if n > 0) * DATATYPE_BYTES[shape.model_datatype]


def layer_range(shape: ModelShape, pipeline_rank: int) -> tuple[int, int]:
    """get_layer_index: the layers of a pipeline stage, inclusive; the first stage also holds the embedding (0), the
    last the lm_head and final norm (L+1, L+2)."""
    per_stage, remainder = divmod(shape.num_layers, shape.pipeline)
    if pipeline_rank < remainder:
        start = pipeline_rank * (per_stage + 1) + 1
        end = start + per_stage
    else:
        start = remainder * (per_stage + 1) + (pipeline_rank - remainder) * per_stage + 1
        end = start + per_stage - 1
    if pipeline_rank == shape.pipeline - 1:
        end = shape.num_layers + 2
    if pipeline_rank == 0:
        start = 0
    return start, end


def optimizer_groups(shape: ModelShape, data_parallelism: int) -> list[int]:
    """get_optimization_groups: three copies of (this rank's share of the parameters, 5 x hidden)."""
    if shape.num_layers <= 0:
        return []
    if shape.zero_stage > 0:
        n = num_parameters(shape) // (data_parallelism * shape.model_parallelism)
    else:   # without ZeRO only the first data-parallel instance saves the optimizer
        n = num_parameters(shape) // shape.model_parallelism
    return [n, shape.hidden_size * 5] * 3 if n > 0 else []


@dataclass(frozen=True)
class RankState:
    """What one rank holds and saves: its files (name within a checkpoint's folder, bytes), and the model and
    optimizer bytes DLIO counts in its reported checkpoint size (which for ZeRO 2 includes model state that
    data-parallel ranks other than 0 hold but do not write)."""
    rank: int
    files: tuple[tuple[str, int], ...]
    counted_model_bytes: int
    counted_optimizer_bytes: int

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.files)


def rank_state(shape: ModelShape, rank: int, data_parallelism: int) -> RankState:
    """The files rank ``rank`` writes per checkpoint (base_checkpointing.py ``__init__`` and ``save_checkpoint``)."""
    mp = shape.model_parallelism
    pipeline_rank = (rank // shape.tensor) % shape.pipeline
    dp_rank, mp_rank = rank // mp, rank % mp
    # ZeRO 0: only the first model-parallel group checkpoints (rank_to_checkpoint, lines 93-98).
    if shape.zero_stage == 0 and rank >= mp:
        return RankState(rank, (), 0, 0)
    files: list[tuple[str, int]] = []
    model_bytes = optimizer_bytes = 0
    if shape.model_size_bytes > 0 and shape.model_type != "transformer":
        # A non-transformer model: one int8 tensor of model_size bytes (lines 159-160, 392-393).
        files.append((f"model_states-{rank}", shape.model_size_bytes))
    layers: dict[int, int] = {}
    if shape.num_layers > 0 and not (shape.zero_stage == 1 and dp_rank != 0):   # lines 120-132
        start, end = layer_range(shape, pipeline_rank)
        layers = {i: layer_bytes(shape, i, data_parallelism) for i in range(start, end + 1)}
        model_bytes = sum(layers.values())
    if layers:
        if 0 < shape.zero_stage < 3:
            if dp_rank == 0:
                if shape.pipeline > 1:   # saved layer by layer
                    files += [(f"layer_{i}-model_{mp_rank}_model_states", size) for i, size in layers.items()]
                else:
                    files.append((f"model_{mp_rank}_model_states", model_bytes))
        else:   # ZeRO 0 or 3: the model is sharded across the data-parallel ranks
            files.append((f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_model_states", model_bytes))
    groups = [g for g in optimizer_groups(shape, data_parallelism) if g > 0]
    if groups:
        optimizer_bytes = sum(groups) * DATATYPE_BYTES[shape.optimizer_datatype]
        files.append((f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_optim_states", optimizer_bytes))
    return RankState(rank, tuple((f"{name}.{EXTENSION}", size) for name, size in files), model_bytes, optimizer_bytes)


def checkpoint_folder(step: int, epoch: int = 1) -> str:
    """save_checkpoint's folder per checkpoint: main.py's _checkpoint_write and _checkpoint_read number the steps
    1, 2, ... within epoch 1."""
    return f"global_epoch{epoch}_step{step}"


def scaled_bytes(size: int, scale: float) -> int:
    """A file's bytes at ``scale`` (the lab's --scale for local runs): every file kept, at least one byte."""
    return 0 if size == 0 else max(1, round(size * scale))


def recovery_source(rank: int, processes: int, ranks_per_host: int, hosts: int) -> int:
    """The rank whose files ``rank`` reads back: DLIO's recovery_rank_shift (load_checkpoint, lines 421-427),
    ``(rank + npernode) % size``: a rank of the next host, whose page cache never held them. On one host there is
    no other host's files (DLIO warns "checkpoint_recovery_rank_shift does not apply"): each rank reads its own."""
    if hosts < 2:
        return rank
    return (rank + ranks_per_host) % processes


__all__ = ["ModelShape", "RankState", "rank_state", "num_parameters", "layer_range", "layer_parameters",
           "optimizer_groups", "checkpoint_folder", "scaled_bytes", "recovery_source", "DATATYPE_BYTES", "GIB",
           "EXTENSION"]
