"""The dataset's shape, and sizes as the CLI and the experiment files take them.

Every answer starts from a dataset's files, bytes and samples (``DatasetShape``); the DLIO workload files, the
estimate and the experiment read it from here. Standard library only, no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

# ---- sizes, as the CLI and the experiment files take them ------------------------------------------
SIZE_UNITS = {"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15, "KIB": 1024, "MIB": 1024 ** 2,
              "GIB": 1024 ** 3, "TIB": 1024 ** 4, "PIB": 1024 ** 5, "B": 1}


# A bare number below this is taken for a size with its unit forgotten (--bytes 1.5), not for bytes.
BARE_BYTES_MINIMUM = 1000
_SIZE_RE = re.compile(r"^([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)([A-Z]*)$")


def parse_bytes(text: Any, field: str, *, example: str = "2TB, 54GB, 1.5 GiB") -> int:
    """A size in bytes from ``2TB``, ``54GB``, ``1.5 GiB``, ``110MiB`` or a whole number of bytes. A bare number
    below 1 KB (or with a fraction) is refused with a "did you mean": ``--bytes 1.5`` is not 1.5 bytes."""
    if isinstance(text, bool):
        raise ConfigError(field, f"{text!r} is not a size", f"e.g. {example}")
    value = str(text).strip().upper().replace(" ", "").replace(",", "").replace("_", "")
    match = _SIZE_RE.match(value)
    if not match or match.group(2) not in SIZE_UNITS and match.group(2) != "":
        raise ConfigError(field, f"{text!r} is not a size", f"e.g. {example}")
    number, unit = float(match.group(1)), match.group(2)
    if not math.isfinite(number):
        raise ConfigError(field, f"{text!r} is not a size", f"e.g. {example}")
    if unit == "" and (number < BARE_BYTES_MINIMUM or number != int(number)):
        shown = match.group(1)
        raise ConfigError(field, f"{text!r} has no unit: {shown} bytes is not a dataset; did you mean {shown}GB or "
                          f"{shown}TB?", f"a number with its unit, e.g. {example}")
    size = int(number * SIZE_UNITS[unit or "B"])
    if size <= 0:
        raise ConfigError(field, f"{text!r}: must be positive", f"e.g. {example}")
    return size


# A size given with a file count that leaves each file under this is taken for a unit forgotten or a count swapped
# (--files 1000 --bytes 5000: 5 bytes a file), not for a dataset: a JPEG's header alone is larger.
MIN_FILE_BYTES = 100


def check_file_bytes(files: int, size: int, field: str, files_field: str) -> None:
    """Refuse a size that, spread over ``files``, gives each file under MIN_FILE_BYTES, with the per-file figure and
    the unit that would make it a dataset; ``field``/``files_field`` name the size and the count as the user gave
    them (--bytes/--files, or an experiment's keys)."""
    if files < 1 or size / files >= MIN_FILE_BYTES:
        return
    each = size / files
    # The smallest decimal unit that brings each file to at least MIN_FILE_BYTES: the likely forgotten one.
    unit = next((u for u in ("KB", "MB", "GB", "TB") if each * SIZE_UNITS[u] >= MIN_FILE_BYTES), None)
    meant = f"did you mean {size}{unit}, or fewer files?" if unit else "did you mean fewer files?"
    raise ConfigError(field, f"{size:,} bytes over {files:,} files ({files_field}) is {each:,.3g} bytes a file, under "
                      f"{MIN_FILE_BYTES}: {meant}",
                      f"a size with its unit that gives each file at least {MIN_FILE_BYTES} bytes, e.g. 54GB")


def format_bytes(value: float) -> str:
    """Decimal units as the CLI prints sizes: 2.00 TB, 54.00 GB, 40.0 MB."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9)):
        if value >= scale:
            return f"{value / scale:,.2f} {unit}"
    return f"{value / 1e6:,.1f} MB"


# ---- the dataset's shape ------------------------------------------------------------------------
SAMPLE_BYTES = 35_900         # bytes per image in a packed dataset when only bytes are known (Caltech-256: 1.1 GB / 30,607)
LARGE_FILE_BYTES = 1_000_000  # files above this are containers of many samples


@dataclass(frozen=True)
class DatasetShape:
    files: int
    bytes: int
    samples: int | None = None

    def __post_init__(self):
        if self.files < 1:
            raise ConfigError("--files", "must be at least 1")
        if self.bytes < 1:
            raise ConfigError("--bytes", "must be at least 1")
        if self.samples is not None and self.samples < 1:
            raise ConfigError("--samples", f"{self.samples}: a dataset holds at least one sample",
                              "a whole number from 1, or leave it out to count files (or bytes / 35.9 KB)")

    @property
    def mean_file_bytes(self) -> float:
        return self.bytes / self.files

    def sample_count(self) -> tuple[int, str | None]:
        if self.samples:
            return self.samples, None
        if self.mean_file_bytes <= LARGE_FILE_BYTES:
            return self.files, None
        count = max(self.files, int(self.bytes / SAMPLE_BYTES))
        return count, (f"samples not given: assumed {count:,} ({SAMPLE_BYTES / 1000:.1f} KB per sample, "
                       "Caltech-256's mean) inside the large files")

    def samples_said(self) -> str:
        """Where the sample count comes from, in a few words (the premise line says it)."""
        if self.samples:
            return "given"
        if self.mean_file_bytes <= LARGE_FILE_BYTES:
            return "one per file"
        return (f"assumed at {SAMPLE_BYTES / 1000:.1f} KB each (Caltech-256's mean) inside files of "
                f"{self.mean_file_bytes / 1e6:,.0f} MB: give --samples (samples:) to say")
