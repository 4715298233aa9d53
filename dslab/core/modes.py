"""The five data sources of a SageMaker training job and the dataset formats the lab knows."""

from __future__ import annotations

FILE, FASTFILE, PIPE, FSX, EFS = "File", "FastFile", "Pipe", "FSx", "EFS"
MODES = (FILE, FASTFILE, PIPE, FSX, EFS)
S3_MODES = (FILE, FASTFILE, PIPE)
FILE_SYSTEM_MODES = (FSX, EFS)

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
