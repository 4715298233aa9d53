"""How a dataset lies under its channel prefix, and how readers see through it.

`dslab dataset upload --prefixes N` spreads a dataset's objects over N S3 prefixes directly under the dataset's own:
``datasets/<name>/p00/<class>/<image>.jpg``, ``datasets/<name>/p01/...``. S3 serves "at least 3,500 PUT/COPY/POST/
DELETE or 5,500 GET/HEAD requests per second per partitioned Amazon S3 prefix" and "there are no limits to the
number of prefixes in a bucket" (S3 User Guide, optimizing-performance.html), so a cluster that asks more GETs than
one prefix serves reads from N. Every source still reads the one channel prefix: SageMaker's S3 channels, FSx's
link and EFS's DataSync copy take everything under it (sub-folders included), and the readers here walk the tree;
only the class of a JPEG (its folder) must look past a spread folder, for datasets whose files sit at the top.
Standard library only (the training script imports it).
"""

from __future__ import annotations

import re

SPREAD_FOLDER = re.compile(r"^p\d{2,}$")


def spread_folder(index: int, count: int) -> str:
    """The prefix the ``index``-th file (in sorted order) goes to: round-robin, so that files read in any order
    (shuffled, sharded per host, consecutive) spread their GETs over every prefix."""
    return f"p{index % count:0{max(2, len(str(count - 1)))}d}"


def spread_count(top_level: set[str]) -> int:
    """How many prefixes a dataset is spread over, from the names directly under its prefix (1: not spread)."""
    return len(top_level) if len(top_level) > 1 and all(SPREAD_FOLDER.match(n) for n in top_level) else 1


def class_folder(folders: tuple[str, ...] | list[str], spread: bool) -> str | None:
    """The class of a file from the folders between the dataset's root and the file (the Caltech-256 layout: the
    last folder), past a leading spread folder; None for a file at the top."""
    folders = tuple(folders)
    if spread and folders and SPREAD_FOLDER.match(folders[0]):
        folders = folders[1:]
    return folders[-1] if folders else None
