"""The data sources of a SageMaker training job and the dataset formats the lab knows.

Five input modes (File, FastFile, Pipe, FSx, EFS) and, for the three S3 modes, where the objects
live: the lab's general purpose bucket ("standard") or its S3 Express One Zone directory bucket in
the training subnet's zone ("express"). Storage is its own dimension, so a record's mode stays one
of the five the results contract names, and experiment files written before Express keep working.
"""

from __future__ import annotations

FILE, FASTFILE, PIPE, FSX, EFS = "File", "FastFile", "Pipe", "FSx", "EFS"
MODES = (FILE, FASTFILE, PIPE, FSX, EFS)
S3_MODES = (FILE, FASTFILE, PIPE)
FILE_SYSTEM_MODES = (FSX, EFS)

STANDARD, EXPRESS = "standard", "express"
STORAGES = (STANDARD, EXPRESS)

JPG, TFRECORD = "jpg", "tfrecord"
FORMATS = (JPG, TFRECORD)

# Where a dataset's bytes live before the experiment starts. "efs" is the flowchart's first branch:
# data produced by tools that write to EFS, never copied to S3.
SOURCES = ("s3", "efs")


def canonical_mode(value: str) -> str | None:
    """Case-insensitive match of a user's spelling to a mode name, or None."""
    for mode in MODES:
        if str(value).lower() == mode.lower():
            return mode
    return None


def source_label(mode: str, storage: str | None = None) -> str:
    """How reports and the CLI name a data source: "FastFile", or "Express FastFile" on the directory bucket."""
    return f"Express {mode}" if storage == EXPRESS else mode


# The order sources appear in tables and charts: the S3 modes, their Express variants, the file systems.
SOURCE_ORDER = (FILE, FASTFILE, PIPE, *(source_label(m, EXPRESS) for m in S3_MODES), FSX, EFS)
