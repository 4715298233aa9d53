"""What the lab's EFS file system holds and what that costs each month, per storage class.

EFS bills storage by the GB-month for as long as the staged datasets sit there, and the metered size is
not the bytes of the files:

- Metering (https://docs.aws.amazon.com/efs/latest/ug/metered-sizes.html): "Each of these objects is
  metered for 2 kibibytes (KiB) of metadata (for its inode) and one or more increments of 4 KiB of data";
  "The metered data size of a regular file is the logical size of the file rounded to the next 4-KiB
  increment"; a directory's is "the actual storage used for the directory entries ... rounded to the next
  4-KiB increment".
- Lifecycle (https://docs.aws.amazon.com/efs/latest/ug/lifecycle-management-efs.html): "Files smaller than
  128 KB aren't eligible for lifecycle management and are always stored in the Standard class." A dataset of
  small JPEGs therefore stays in Standard whatever the lifecycle policy; TFRecord shards move to IA.
- DescribeFileSystems reports the metered size per storage class (SizeInBytes: Value, ValueInStandard,
  ValueInIA, ValueInArchive); "ValueInIA displays the last metered size in IA storage" (same page).

Standard library only: the stand-in meters its EFS folder with these rules, `dslab doctor` and
`dslab efs empty` price what DescribeFileSystems reports.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

KIB = 1024
METADATA_BYTES = 2 * KIB    # per file or directory (its inode)
BLOCK_BYTES = 4 * KIB       # data is metered in 4 KiB increments
IA_MIN_FILE_BYTES = 128 * KIB   # smaller files always stay in Standard

# The lab's lifecycle policy (stacks/components/efs.py): files unread for this long move to IA, and back to
# Standard on their first read.
TRANSITION_TO_IA = "AFTER_7_DAYS"
TRANSITION_TO_IA_DAYS = 7

# The DataSync task that empties EFS copies from this folder of the data bucket's datasets/ prefix, which
# never holds an object (a dataset name cannot start with "."): with PreserveDeletedFiles=REMOVE every file
# it scans in EFS is "not present in the source" (stacks/components/efs_staging.py).
EMPTY_SOURCE_FOLDER = ".dslab-empty"


def metered_file_bytes(size: int) -> int:
    """A regular file's metered size: its inode's metadata plus its data in whole 4 KiB increments."""
    return METADATA_BYTES + max(1, math.ceil(size / BLOCK_BYTES)) * BLOCK_BYTES


def metered_directory_bytes(entries_bytes: int = 0) -> int:
    """A directory's metered size: metadata plus its entries in whole 4 KiB increments (at least one)."""
    return METADATA_BYTES + max(1, math.ceil(entries_bytes / BLOCK_BYTES)) * BLOCK_BYTES


def metered_size(file_sizes: Iterable[int], directories: int = 0) -> int:
    """What EFS meters for these files and (small) directories."""
    return sum(metered_file_bytes(s) for s in file_sizes) + directories * metered_directory_bytes()


def dataset_estimate(files: int, size: int, *, lifecycle: bool = True) -> dict[str, float]:
    """What a dataset of ``files`` files and ``size`` bytes meters in EFS, and where it settles once unread
    for the lifecycle's days: from the mean file size only (a dataset's stats file has no per-file sizes),
    so every file is taken as IA-eligible or none is. The half block each file rounds up to on average is
    counted; per-directory metadata is not (a few per thousand files)."""
    metered = size + files * (METADATA_BYTES + BLOCK_BYTES / 2) if files else 0.0
    eligible = lifecycle and files > 0 and size / files >= IA_MIN_FILE_BYTES
    return {"metered_bytes": metered, "standard_bytes": 0.0 if eligible else metered,
            "ia_bytes": metered if eligible else 0.0}


def monthly_usd(size_in_bytes: Mapping[str, Any], prices) -> dict[str, float]:
    """The monthly storage cost of what DescribeFileSystems reports, per storage class (decimal GB, as every
    price in the lab). Archive needs Elastic throughput, which the lab does not offer (Bursting or
    Provisioned): what it holds there is counted as Standard rather than dropped."""
    total = float(size_in_bytes.get("Value") or 0)
    ia = float(size_in_bytes.get("ValueInIA") or 0)
    standard = float(size_in_bytes.get("ValueInStandard", total - ia) or 0)
    standard += float(size_in_bytes.get("ValueInArchive") or 0)
    standard_usd = standard / 1e9 * prices["efs_standard_gb_month"]
    ia_usd = ia / 1e9 * prices["efs_ia_gb_month"]
    return {"bytes": total, "standard_bytes": standard, "ia_bytes": ia, "standard_usd": standard_usd,
            "ia_usd": ia_usd, "usd_per_month": standard_usd + ia_usd}
