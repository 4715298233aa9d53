"""The data sources of a SageMaker training job and the dataset formats the lab knows.

Five input modes (File, FastFile, Pipe, FSx, EFS) and, for the three S3 modes, where the objects
live: the lab's general purpose bucket ("standard") or its S3 Express One Zone directory bucket in
the training subnet's zone ("express"). Storage is its own dimension, so a record's mode stays one
of the five the results contract names, and experiment files written before Express keep working.
"""

from __future__ import annotations

FILE, FASTFILE, PIPE, FSX, EFS = "File", "FastFile", "Pipe", "FSx", "EFS"
# "Script": the source post's "Bring your own data ingestion". The job has no input channel; the
# training script reads the dataset's S3 prefix itself (boto3 or the S3 Connector for PyTorch) with
# the job's role. Not one of SageMaker's input modes, so results records (whose contract names the
# five modes above) carry it as mode FastFile, the nearest SageMaker source (streams from S3 on demand,
# nothing downloaded first), with "ingestion": "script". (The job itself declares TrainingInputMode File:
# without a channel nothing is downloaded, and no document covers FastFile without one.)
SCRIPT = "Script"
MODES = (FILE, FASTFILE, PIPE, FSX, EFS, SCRIPT)
S3_MODES = (FILE, FASTFILE, PIPE)
# Modes that read the lab's buckets (standard or Express): SageMaker's three and the script's own reads.
S3_READ_MODES = (FILE, FASTFILE, PIPE, SCRIPT)
FILE_SYSTEM_MODES = (FSX, EFS)
CONTRACT_MODES = (FILE, FASTFILE, PIPE, FSX, EFS)
SCRIPT_INGESTION = "script"

STANDARD, EXPRESS = "standard", "express"
STORAGES = (STANDARD, EXPRESS)

JPG, TFRECORD = "jpg", "tfrecord"
# NumPy's .npz (a zip of .npy arrays): DLIO's format for 3D U-Net; samples of a DLIO workload (core/workloads/dlio.py).
NPZ = "npz"
FORMATS = (JPG, TFRECORD, NPZ)

# Where a dataset's bytes live before the experiment starts. "efs" is the flowchart's first branch:
# data produced by tools that write to EFS, never copied to S3.
SOURCES = ("s3", "efs")


def canonical_mode(value: str) -> str | None:
    """Case-insensitive match of a user's spelling to a mode name, or None."""
    for mode in MODES:
        if str(value).lower() == mode.lower():
            return mode
    return None


def parse_source(value: str, field: str = "--mode") -> tuple[str, str | None]:
    """A data source as the user names it: a mode ("fastfile") or a label the lab prints ("Express FastFile"),
    as (mode, storage: "express" for an Express label, else None). Anything else is refused with the
    closest names ("did you mean FastFile?")."""
    from .errors import ConfigError
    words = str(value).replace("_", " ").replace("-", " ").split()
    storage = None
    if len(words) > 1 and words[0].lower() == EXPRESS:
        storage, words = EXPRESS, words[1:]
    mode = canonical_mode("".join(words))
    if mode is not None and (storage is None or mode in S3_READ_MODES):
        return mode, storage
    import difflib
    close = difflib.get_close_matches(str(value).lower(), [label.lower() for label in SOURCE_ORDER], n=2, cutoff=0.6)
    labels = {label.lower(): label for label in SOURCE_ORDER}
    hint = f"; did you mean {' or '.join(labels[c] for c in close)}?" if close else ""
    raise ConfigError(field, f"unknown mode {value!r}{hint}", SOURCE_ORDER)


def source_label(mode: str, storage: str | None = None) -> str:
    """How reports and the CLI name a data source: "FastFile", or "Express FastFile" on the directory bucket."""
    return f"Express {mode}" if storage == EXPRESS else mode


def record_mode(mode: str) -> tuple[str, dict[str, str]]:
    """A lab mode as the results contract writes it: (contract mode, extra record fields)."""
    return (FASTFILE, {"ingestion": SCRIPT_INGESTION}) if mode == SCRIPT else (mode, {})


def lab_mode(record: dict) -> str:
    """A results record's lab mode: the contract's mode, or Script where the script read S3 itself."""
    return SCRIPT if record.get("ingestion") == SCRIPT_INGESTION else record["mode"]


# The order sources appear in tables and charts: the S3 modes, their Express variants, the file systems,
# then the script's own reads.
SOURCE_ORDER = (FILE, FASTFILE, PIPE, *(source_label(m, EXPRESS) for m in S3_MODES), FSX, EFS,
                SCRIPT, source_label(SCRIPT, EXPRESS))

# Where a checkpoint trial writes (core/model/checkpoint_estimate.py, requests.py): SageMaker's checkpoint sync
# (CheckpointConfig: the instance's LocalPath, copied to S3 behind the script) to the lab's bucket or to its S3
# Express One Zone directory bucket, or a read-write FSx for Lustre or EFS channel every host shares. A record keeps
# the contract's mode (the sync targets read and write through the instance's volume as File mode does: File, its
# storage naming the bucket) and names the target beside it ("checkpoint_target").
CKPT_S3, CKPT_EXPRESS, CKPT_FSX, CKPT_EFS = "s3", "express", "fsx", "efs"
CHECKPOINT_TARGETS = (CKPT_S3, CKPT_EXPRESS, CKPT_FSX, CKPT_EFS)
SYNC_TARGETS = (CKPT_S3, CKPT_EXPRESS)
CHECKPOINT_TARGET_MODES = {CKPT_S3: FILE, CKPT_EXPRESS: FILE, CKPT_FSX: FSX, CKPT_EFS: EFS}
CHECKPOINT_TARGET_LABELS = {CKPT_S3: "S3 sync", CKPT_EXPRESS: "Express sync", CKPT_FSX: "FSx", CKPT_EFS: "EFS"}
# A checkpoint "dataset": what a checkpoint trial's jobs name in the records' dataset field (its model), never uploaded.
CHECKPOINT_FORMAT = "checkpoint"


def checkpoint_target_label(target: str, restore: bool = False) -> str:
    """How reports and the CLI name a checkpoint target: "S3 sync", "FSx", ...; its restore job "S3 sync restore"."""
    return CHECKPOINT_TARGET_LABELS[target] + (" restore" if restore else "")
