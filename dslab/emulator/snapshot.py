"""A deployed stand-in, saved once and restored: `cdk deploy` runs once per set of templates.

What the CDK CLI's deploy left in the stand-in (every service's state in moto's backends, the stand-in's own
CloudFormation stacks and their events, the names it drew, the FSx association it made) is pickled right after the
deploy, before any data, job or result exists, under a key made of the templates, the lab's settings and the code
that holds that state. A later run whose key matches starts from it instead of deploying again; anything else (a
changed template, another moto, python or emulator version, a corrupt or half-written file) is refused with its
reason, and the caller deploys afresh. Files are written whole (a temporary file renamed into place), so a run
interrupted while saving leaves nothing a later run would trust.
"""

from __future__ import annotations

import collections
import hashlib
import importlib
import io
import os
import pickle
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any

FORMAT = 1
SUFFIX = ".deployed"
EMULATOR = Path(__file__).resolve().parent


class SnapshotUnusable(Exception):
    """The saved deployment cannot be used; the message says why."""


def snapshot_key(assembly: Path, *, with_fsx: bool, region: str) -> str:
    """What a saved deployment must match: the templates (their assets are named by hash inside them), the stacks
    deployed, the region, and the versions of what holds the state (moto, Python, the emulator's own code)."""
    import moto
    digest = hashlib.sha256(f"{FORMAT}|{with_fsx}|{region}|{moto.__version__}|{sys.version}".encode())
    for path in sorted(Path(assembly).glob("*.template.json")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for path in sorted(EMULATOR.rglob("*.py")):
        digest.update(str(path.relative_to(EMULATOR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


def _backend_dicts() -> dict[str, Any]:
    """Every moto backend registry loaded in this process, by ``module:name``."""
    from moto.core.base_backend import BackendDict
    found = {}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("moto.") or module is None:
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, BackendDict):
                found[f"{module_name}:{name}"] = value
    return found


def _nested_dict_factory() -> collections.defaultdict:
    return collections.defaultdict(dict)


def _new_rlock():
    return threading.RLock()


def _new_lock():
    return threading.Lock()


def _weak_values(items: dict) -> weakref.WeakValueDictionary:
    return weakref.WeakValueDictionary(items)


def _defaultdict_of_dict(items: dict) -> collections.defaultdict:
    out: collections.defaultdict = collections.defaultdict(dict)
    out.update(items)
    return out


def _defaultdict_of_dicts(items: dict) -> collections.defaultdict:
    out: collections.defaultdict = collections.defaultdict(_nested_dict_factory)
    out.update(items)
    return out


def _defaultdict_subclass(cls, factory, attributes: dict, items: dict):
    out = cls.__new__(cls)
    collections.defaultdict.__init__(out, factory)
    out.__dict__.update(attributes)
    dict.update(out, items)
    return out


_RLOCK, _LOCK = type(threading.RLock()), type(threading.Lock())
# The factories of moto's that pickle cannot name: SSM's resource tags, defaultdict(lambda: defaultdict(dict)), and
# Lambda's aliases, defaultdict(lambda: {}). Any other is refused (the lab then deploys every run, saying why).
_LOCAL_FACTORIES = {"SimpleSystemManagerBackend.__init__.<locals>.<lambda>": _defaultdict_of_dicts,
                    "LambdaStorage.__init__.<locals>.<lambda>": _defaultdict_of_dict}


class _Pickler(pickle.Pickler):
    """Locks are made anew; weak maps keep their (strongly held elsewhere) values; moto's defaultdicts keep their
    shape."""

    def reducer_override(self, obj):
        if isinstance(obj, _RLOCK):
            return _new_rlock, ()
        if isinstance(obj, _LOCK):
            return _new_lock, ()
        if isinstance(obj, weakref.WeakValueDictionary):
            return _weak_values, (dict(obj.items()),)
        if isinstance(obj, collections.defaultdict) and getattr(obj.default_factory, "__name__", "") == "<lambda>":
            rebuild = _LOCAL_FACTORIES.get(obj.default_factory.__qualname__)
            if rebuild is None:
                raise pickle.PicklingError(f"a defaultdict with an unknown factory {obj.default_factory.__qualname__}")
            return rebuild, (dict(obj),)
        if isinstance(obj, collections.defaultdict) and type(obj) is not collections.defaultdict:
            # moto's own defaultdicts (SSM's ParameterDict) take other arguments than defaultdict's: made without
            # their __init__, their attributes and items put back
            return _defaultdict_subclass, (type(obj), obj.default_factory, dict(vars(obj)), dict(obj))
        return NotImplemented


def save(path: Path, key: str, state: dict[str, Any]) -> None:
    """Pickle the stand-in's backends with ``state`` (the caller's own: its CloudFormation, its FSx model) to
    ``path``, whole or not at all; every other saved deployment beside it is removed (it no longer matches)."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(
        {"format": FORMAT, "key": key, "saved": time.time(), "backends": _backend_dicts(), "state": state})
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".saving-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(hashlib.sha256(buffer.getvalue()).hexdigest().encode() + b"\n")
            out.write(buffer.getvalue())
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    for other in path.parent.glob(f"*{SUFFIX}"):
        if other != path:
            other.unlink(missing_ok=True)


def load(path: Path, key: str) -> dict[str, Any]:
    """The saved deployment's backends put back in place; the caller's state returned. SnapshotUnusable if the file
    is missing, corrupt, from another format or for another key."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SnapshotUnusable(f"cannot read it ({err.strerror})") from None
    digest, _, body = raw.partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != digest:
        raise SnapshotUnusable("it is corrupt (its checksum does not match)")
    try:
        saved = pickle.loads(body)
    except Exception as err:  # noqa: BLE001 - any unpickling failure: another version's classes, say
        raise SnapshotUnusable(f"it does not load ({type(err).__name__}: {err})") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise SnapshotUnusable(f"it is of another format ({saved.get('format') if isinstance(saved, dict) else '?'})")
    if saved.get("key") != key:
        raise SnapshotUnusable("it was saved for other templates, settings or versions")
    for name, content in saved["backends"].items():
        module_name, _, attribute = name.partition(":")
        try:
            target = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError):
            raise SnapshotUnusable(f"moto has no {name} any more") from None
        target.clear()
        target.update(content)
    return saved["state"]


__all__ = ["SnapshotUnusable", "load", "save", "snapshot_key"]
