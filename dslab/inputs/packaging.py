"""Byte-reproducible packaging of the training script (used by the stacks, the CLI and the local lab)."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import tempfile
from pathlib import Path

EXCLUDED_PARTS = {"__pycache__", ".pytest_cache"}


def _files(source_dir: Path) -> list[Path]:
    return sorted(p for p in source_dir.rglob("*")
                  if p.is_file() and not EXCLUDED_PARTS.intersection(p.relative_to(source_dir).parts)
                  and p.suffix != ".pyc")


def build_sourcedir(source_dir: Path, build_dir: Path, extra_files: dict[str, Path] | None = None) -> tuple[Path, str]:
    """Write ``build_dir/sourcedir-<hash>.tar.gz`` from ``source_dir``; return its path and sha256.

    Entries are sorted with fixed owners, modes and times, so the same sources give the same bytes
    (and the same CDK asset hash) on every machine. ``extra_files`` adds files (archive name ->
    local file) that the folder does not have itself.
    """
    entries = {str(p.relative_to(source_dir)): p for p in _files(source_dir)}
    for name, path in (extra_files or {}).items():
        entries.setdefault(name, path)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(entries, key=Path):  # the order of the paths, as before extra_files existed
            data = entries[name].read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    compressed = gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0)
    digest = hashlib.sha256(compressed).hexdigest()
    build_dir.mkdir(parents=True, exist_ok=True)
    out = build_dir / f"sourcedir-{digest[:12]}.tar.gz"
    if not out.exists():
        write_atomically(out, compressed)
    return out, digest


def write_atomically(path: Path, data: bytes) -> None:
    """Write through a temporary file and a rename: a concurrent reader (another synthesis, a test
    worker) sees the whole file or none of it."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
