"""A calibration file (`dslab calibrate` writes it) read from disk, as the answers use it."""

from __future__ import annotations

from pathlib import Path

from ..core.model.calibration import SHIPPED, InUse, in_use_from_document
from .experiment_file import read_json_file


def read_calibration(path: str | Path | None, where: str = "--calibration") -> InUse:
    """The calibration at ``path`` (None: the shipped one); a missing or malformed file is one ConfigError line."""
    if not path:
        return SHIPPED
    return in_use_from_document(read_json_file(Path(path), where), str(path), where)
