"""SageMaker's checkpoint sync as the local runner emulates it (dslab/local/checkpoint_sync.py): what a job finds in
each host's LocalPath when it starts (every object under the S3Uri, on every host), what reaches S3 while it runs (a
file once it held still between two looks, again when it changed, deleted when the script deletes it), the marker
beside a file being uploaded, and what the job's log and warnings say when it ends (the figures, two hosts writing one
key, files left behind). S3 is a small in-memory stand-in that records what the sync did to it."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from dslab.aws.validation import RequestInvalid
from dslab.local import checkpoint_sync
from dslab.local.checkpoint_sync import CheckpointSync, SyncFigures

BUCKET = "ckpt"
MARK = ".sagemaker-uploading"


class MemoryS3:
    """S3 as a dict of key -> bytes (folder markers "x/" included, as the console makes them). Each upload records the
    key, whether the ".sagemaker-uploading" marker stood beside the file meanwhile, and when; ``before_upload`` runs
    first (a script's clean-up happening while the sync uploads)."""

    def __init__(self, objects: dict[str, bytes] | None = None):
        self.objects = dict(objects or {})
        self.uploads: list[tuple[str, bool, float]] = []
        self.before_upload = None

    def list_objects(self, bucket: str, prefix: str) -> list[tuple[str, int]]:
        assert bucket == BUCKET
        return [(key, len(data)) for key, data in sorted(self.objects.items()) if key.startswith(prefix)]

    def download(self, bucket: str, key: str, target: Path) -> None:
        assert bucket == BUCKET
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.objects[key])

    def upload(self, bucket: str, key: str, source: Path) -> None:
        assert bucket == BUCKET
        marked = source.with_name(source.name + MARK).exists()
        if self.before_upload is not None:
            self.before_upload(key, source)
        self.objects[key] = source.read_bytes()   # FileNotFoundError when the file is gone, as boto3's upload_file
        self.uploads.append((key, marked, time.monotonic()))

    def delete_object(self, bucket: str, key: str) -> None:
        assert bucket == BUCKET
        self.objects.pop(key, None)


def _sync(tmp_path: Path, s3: MemoryS3, hosts=("algo-1",), uri="s3://ckpt/run/one", **config) -> CheckpointSync:
    return CheckpointSync(s3, {"S3Uri": uri, **config}, {host: tmp_path / host for host in hosts}, lambda line: None)


def _write(path: Path, data: bytes, mtime: int = 1_700_000_000) -> None:
    """A checkpoint file with a given modification time (seconds), so that "changed" is the test's to say."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    ns = mtime * 1_000_000_000
    os.utime(path, ns=(ns, ns))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _folder(tmp_path: Path, host: str = "algo-1") -> Path:
    return tmp_path / host / "checkpoints"


def test_copy_in_puts_every_object_under_the_uri_on_every_host_and_skips_folder_markers(tmp_path):
    """A restore: every object under the S3Uri lands in every host's LocalPath before the script starts, the prefix's
    own key and the folder markers ("dir/") make no files, objects beside the prefix stay out; the figures count each
    host's copy. What was copied in is what S3 holds: nothing is uploaded back, nothing is left behind."""
    big = bytes(range(256)) * 6   # 1,536 bytes
    s3 = MemoryS3({"run/one/": b"", "run/one/a.pt": b"abc", "run/one/dir/": b"", "run/one/dir/b.bin": big,
                   "run/one/dir/sub/": b"", "run/oneother/c.pt": b"no", "other/d.pt": b"no"})
    (tmp_path / "algo-1" / "checkpoints").mkdir(parents=True)   # one host's folder is there already, one's base not
    sync = _sync(tmp_path, s3, hosts=("algo-1", "algo-2"))
    sync.copy_in()
    for host in ("algo-1", "algo-2"):
        assert _files(_folder(tmp_path, host)) == {"a.pt": b"abc", "dir/b.bin": big}
        assert not (_folder(tmp_path, host) / "dir" / "sub").exists()
    assert (sync.figures.copied_in_files, sync.figures.copied_in_bytes) == (4, 3078)
    assert 0 <= sync.figures.copy_in_seconds < 5
    sync.sync(final=True)
    sync.stop()
    assert s3.uploads == [] and sync.figures.left_behind == [] and sync.figures.warnings() == []
    assert sync.figures.describe().startswith("checkpoint sync: 4 file(s), 3,078 bytes copied in (")


def test_a_restored_file_the_script_deletes_is_deleted_in_s3(tmp_path):
    s3 = MemoryS3({"run/one/a.pt": b"a", "run/one/b.pt": b"b", "run/one/c.pt": b"c"})
    sync = _sync(tmp_path, s3)
    sync.copy_in()
    (_folder(tmp_path) / "a.pt").unlink()
    (_folder(tmp_path) / "c.pt").unlink()
    sync.sync()
    assert s3.objects == {"run/one/b.pt": b"b"} and sync.figures.deleted_keys == 2
    sync.sync()   # deleted once
    assert sync.figures.deleted_keys == 2 and s3.uploads == []


@pytest.mark.parametrize("uri,key", [("s3://ckpt/run/one", "run/one/model.pt"),
                                     ("s3://ckpt/run/one/", "run/one/model.pt"),
                                     ("s3://ckpt", "model.pt"), ("s3://ckpt/", "model.pt")])
def test_the_s3uri_is_a_folder_and_a_bucket_alone_is_its_root(tmp_path, uri, key):
    """A URI without a trailing "/" is a folder all the same (run/one/..., never run/onemodel.pt); a bucket alone syncs
    with its root (model.pt, not /model.pt), and copies in every object in it."""
    s3 = MemoryS3({"run/one/old.pt": b"old", "run/onex/other.pt": b"x"})
    sync = _sync(tmp_path, s3, uri=uri)
    assert (sync.bucket, sync.prefix) == ("ckpt", key[:-len("model.pt")])
    sync.copy_in()
    _write(_folder(tmp_path) / "model.pt", b"weights")
    sync.sync(final=True)
    assert s3.objects[key] == b"weights" and [k for k, _, _ in s3.uploads] == [key]
    restored = {"run/one/model.pt": {"old.pt": b"old"},
                "model.pt": {"run/one/old.pt": b"old", "run/onex/other.pt": b"x"}}
    assert {k: v for k, v in _files(_folder(tmp_path)).items() if k != "model.pt"} == restored[key]


@pytest.mark.parametrize("config,folder", [
    ({}, "checkpoints"), ({"LocalPath": ""}, "checkpoints"), ({"LocalPath": "/opt/ml/checkpoints/"}, "checkpoints"),
    ({"LocalPath": "/opt/ml"}, ""), ({"LocalPath": "/opt/ml/"}, ""), ({"LocalPath": "/opt/ml//run//X/"}, "run/X"),
    ({"LocalPath": "/opt/ml/ckpt "}, "ckpt "), ({"LocalPath": "/opt/ml/a/b/c"}, "a/b/c")])
def test_each_hosts_localpath_is_its_own_folder_under_its_opt_ml(tmp_path, config, folder):
    """The LocalPath the script writes to (default /opt/ml/checkpoints) is that folder under each host's own /opt/ml,
    named exactly as the script names it."""
    sync = _sync(tmp_path, MemoryS3({"run/one/a.pt": b"abc"}), hosts=("algo-1", "algo-2"), **config)
    sync.copy_in()
    for host in ("algo-1", "algo-2"):
        assert (tmp_path / host / folder / "a.pt").read_bytes() == b"abc"
    assert checkpoint_sync.local_folder(tmp_path, config.get("LocalPath", "")) == tmp_path / folder


@pytest.mark.parametrize("local_path",
                         ["/tmp/ckpt", "/opt/mlx/ckpt", "opt/ml/ckpt", "/opt", "/opt/ml ", "/OPT/ML/ckpt"])
def test_a_localpath_outside_opt_ml_is_refused(tmp_path, local_path):
    with pytest.raises(RequestInvalid) as err:
        _sync(tmp_path, MemoryS3(), LocalPath=local_path)
    assert str(err.value) == (f"CheckpointConfig.LocalPath '{local_path}': the local runner keeps each host's files "
                              "under its own /opt/ml; use a path under /opt/ml (default /opt/ml/checkpoints)")


def test_a_file_is_uploaded_once_it_held_still_between_two_looks_and_again_when_it_changed(tmp_path):
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3)
    folder = _folder(tmp_path)
    _write(folder / "b.pt", b"v1")
    sync.sync()
    assert s3.objects == {}   # seen once: it may still be being written
    _write(folder / "a.pt", b"aaaa")
    sync.sync()   # b.pt held still; a.pt (listed before it) is new
    assert s3.objects == {"run/one/b.pt": b"v1"}
    sync.sync()
    assert s3.objects == {"run/one/a.pt": b"aaaa", "run/one/b.pt": b"v1"}
    _write(folder / "c.pt", b"c")
    sync.sync()
    sync.sync()   # a.pt and b.pt (listed before c.pt) are in S3 as they are
    assert s3.objects["run/one/c.pt"] == b"c" and len(s3.uploads) == 3
    _write(folder / "b.pt", b"v22", mtime=1_700_000_100)
    sync.sync()
    assert s3.objects["run/one/b.pt"] == b"v1"
    sync.sync()
    assert s3.objects["run/one/b.pt"] == b"v22"
    _write(folder / "b.pt", b"v33", mtime=1_700_000_200)   # same size, later: changed all the same
    sync.sync()
    sync.sync()
    sync.sync()
    assert s3.objects["run/one/b.pt"] == b"v33"
    assert [k for k, _, _ in s3.uploads] == ["run/one/b.pt", "run/one/a.pt", "run/one/c.pt", "run/one/b.pt",
                                             "run/one/b.pt"]
    assert (sync.figures.uploaded_files, sync.figures.uploaded_bytes, sync.figures.deleted_keys) == (5, 13, 0)
    sync.stop()
    assert sync.figures.left_behind == []


def test_the_final_look_uploads_what_changed_at_once(tmp_path):
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3)
    _write(_folder(tmp_path) / "a.pt", b"12345")
    _write(_folder(tmp_path) / "deep" / "b.pt", b"123")
    sync.sync(final=True)
    assert s3.objects == {"run/one/a.pt": b"12345", "run/one/deep/b.pt": b"123"}
    sync.sync(final=True)   # unchanged: not sent again
    assert (sync.figures.uploaded_files, sync.figures.uploaded_bytes) == (2, 8) and len(s3.uploads) == 2


def test_a_deleted_file_is_deleted_in_s3(tmp_path):
    s3 = MemoryS3({"run/one/keep-others.pt": b"k"})
    sync = _sync(tmp_path, s3)
    for name in ("a.pt", "b.pt", "c.pt"):
        _write(_folder(tmp_path) / name, name.encode())
    sync.sync(final=True)
    (_folder(tmp_path) / "a.pt").unlink()
    (_folder(tmp_path) / "c.pt").unlink()
    sync.sync()
    assert s3.objects == {"run/one/b.pt": b"b.pt", "run/one/keep-others.pt": b"k"}
    assert (sync.figures.deleted_keys, sync.figures.uploaded_files) == (2, 3)
    sync.stop()
    assert "3 uploaded (12 bytes); 2 deleted in S3; 0 not uploaded" in sync.figures.describe()


def test_a_file_being_uploaded_is_marked_and_marked_files_are_never_uploaded(tmp_path):
    """Beside a file being uploaded stands "<name>.sagemaker-uploading", gone once it is in S3; a file whose name ends
    so (a marker SageMaker's own uploader left) is neither uploaded nor said to be left behind."""
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3)
    folder = _folder(tmp_path)
    _write(folder / "sub" / "model.pt", b"m")
    _write(folder / "old.pt.sagemaker-uploading", b"")
    _write(folder / "sub" / "x.sagemaker-uploading", b"marker")
    sync.sync(final=True)
    assert s3.uploads == [("run/one/sub/model.pt", True, s3.uploads[0][2])]
    assert not (folder / "sub" / "model.pt.sagemaker-uploading").exists()
    assert s3.objects == {"run/one/sub/model.pt": b"m"}
    sync.stop()
    assert sync.figures.left_behind == [] and sync.figures.uploaded_files == 1


CLASH = ("run/one/model.pt: hosts algo-1 and algo-2 both wrote it; S3 keeps algo-2's (the last upload): name each "
         "host's files apart")


def test_two_hosts_writing_one_key_are_told_which_upload_s3_keeps(tmp_path):
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3, hosts=("algo-1", "algo-2", "algo-3"))   # algo-3 writes nothing (no folder)
    _write(_folder(tmp_path, "algo-1") / "model.pt", b"one")
    _write(_folder(tmp_path, "algo-2") / "model.pt", b"two")
    _write(_folder(tmp_path, "algo-2") / "rank-1.pt", b"r1")
    sync.sync(final=True)
    assert s3.objects == {"run/one/model.pt": b"two", "run/one/rank-1.pt": b"r1"}
    assert sync.figures.clashes == [CLASH]
    _write(_folder(tmp_path, "algo-1") / "model.pt", b"ONE!", mtime=1_700_000_100)
    sync.sync(final=True)
    assert s3.objects["run/one/model.pt"] == b"ONE!"
    assert sync.figures.clashes[1:] == ["run/one/model.pt: hosts algo-2 and algo-1 both wrote it; S3 keeps algo-1's "
                                        "(the last upload): name each host's files apart"]
    sync.stop()
    assert sync.figures.warnings() == sync.figures.clashes and len(sync.figures.clashes) == 2


def test_a_host_rewriting_its_own_file_is_no_clash(tmp_path):
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3, hosts=("algo-1", "algo-2"))
    _write(_folder(tmp_path, "algo-1") / "model.pt", b"one")
    _write(_folder(tmp_path, "algo-2") / "rank-1.pt", b"r1")
    sync.sync(final=True)
    _write(_folder(tmp_path, "algo-1") / "model.pt", b"one-again", mtime=1_700_000_100)
    sync.sync(final=True)
    assert s3.objects == {"run/one/model.pt": b"one-again", "run/one/rank-1.pt": b"r1"}
    assert sync.figures.clashes == [] and sync.figures.uploaded_files == 3


def test_stop_says_which_files_s3_did_not_get(tmp_path):
    """The job ended: what no look uploaded (new, or changed since its upload) stays out of S3 and is named
    "host:relative path", the warning giving the first; a host with no LocalPath folder has nothing to say."""
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3, hosts=("algo-1", "algo-2", "algo-3"))
    _write(_folder(tmp_path, "algo-1") / "b.pt", b"b")
    _write(_folder(tmp_path, "algo-1") / "c.pt", b"c")
    sync.sync(final=True)
    _write(_folder(tmp_path, "algo-1") / "b.pt", b"B", mtime=1_700_000_100)
    _write(_folder(tmp_path, "algo-1") / "a.pt", b"a")
    _write(_folder(tmp_path, "algo-2") / "z" / "late.pt", b"late")
    sync.stop()   # never started: nothing to wait for
    assert sync.figures.left_behind == ["algo-1:a.pt", "algo-1:b.pt", "algo-2:z/late.pt"]
    assert s3.objects == {"run/one/b.pt": b"b", "run/one/c.pt": b"c"}
    assert sync.figures.warnings() == [
        "3 file(s) in the LocalPath were not in S3 when the job ended (e.g. algo-1:a.pt): SageMaker does not write to "
        "S3 once the job ends, so a restore will not find them; a script that needs them there waits until it sees "
        "them listed under the S3Uri"]
    assert sync.figures.describe().endswith(
        "; 2 uploaded (2 bytes); 0 deleted in S3; 3 not uploaded when the job ended")


def test_the_figures_read_with_thousands_separators():
    figures = SyncFigures(copied_in_files=3, copied_in_bytes=1_234_567, copy_in_seconds=1.236, uploaded_files=2,
                          uploaded_bytes=9_876_543_210, deleted_keys=4, left_behind=["algo-1:a.pt", "algo-2:b.pt"])
    assert figures.describe() == ("checkpoint sync: 3 file(s), 1,234,567 bytes copied in (1.24 s); 2 uploaded "
                                  "(9,876,543,210 bytes); 4 deleted in S3; 2 not uploaded when the job ended")
    assert SyncFigures().describe() == ("checkpoint sync: 0 file(s), 0 bytes copied in (0.00 s); 0 uploaded (0 bytes); "
                                        "0 deleted in S3; 0 not uploaded when the job ended")
    assert SyncFigures(clashes=["k: hosts"]).warnings() == ["k: hosts"]


def test_a_file_the_script_removes_while_it_is_uploaded_is_skipped(tmp_path):
    """The script's clean-up removes a folder while the sync uploads from it: nothing is sent or counted for it, its
    marker goes with it, the other files are uploaded, and no later look deletes or reports it."""
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3)
    folder = _folder(tmp_path)
    _write(folder / "gone" / "a.pt", b"aaa")
    _write(folder / "keep.pt", b"kk")

    def clean_up(key, source):
        if key == "run/one/gone/a.pt":
            shutil.rmtree(folder / "gone")
    s3.before_upload = clean_up
    sync.sync(final=True)
    assert s3.objects == {"run/one/keep.pt": b"kk"} and [k for k, _, _ in s3.uploads] == ["run/one/keep.pt"]
    assert (sync.figures.uploaded_files, sync.figures.uploaded_bytes) == (1, 2)
    sync.sync(final=True)
    sync.stop()
    assert (sync.figures.deleted_keys, sync.figures.left_behind) == (0, [])
    assert _files(folder) == {"keep.pt": b"kk"}


def test_a_folder_removed_before_its_file_is_marked_is_skipped(tmp_path):
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3)
    folder = _folder(tmp_path)
    _write(folder / "a.pt", b"a")
    _write(folder / "sub" / "x.pt", b"x")
    _write(folder / "z.pt", b"zz")

    def clean_up(key, source):
        if key == "run/one/a.pt":
            shutil.rmtree(folder / "sub")
    s3.before_upload = clean_up
    sync.sync(final=True)
    assert s3.objects == {"run/one/a.pt": b"a", "run/one/z.pt": b"zz"}
    assert (sync.figures.uploaded_files, sync.figures.uploaded_bytes) == (2, 3)
    sync.sync()
    assert sync.figures.deleted_keys == 0 and _files(folder) == {"a.pt": b"a", "z.pt": b"zz"}


def _until(condition, seconds: float = 2.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the background sync did not get there in time"
        time.sleep(0.005)


def _stopped(sync: CheckpointSync) -> BaseException | None:
    """stop(), and what it raised."""
    try:
        sync.stop()
    except BaseException as err:
        return err
    return None


def test_started_the_sync_uploads_behind_the_script_until_stopped(tmp_path, monkeypatch):
    """Between start() and stop() a background daemon thread, "checkpoint-sync", uploads what the script writes."""
    monkeypatch.setattr(checkpoint_sync, "POLL_SECONDS", 0.01)
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3)
    sync.copy_in()
    sync.start()
    try:   # stopped whatever happens: a thread left running would keep the test's process alive
        running = [t for t in threading.enumerate() if t.name == "checkpoint-sync"]
        _write(_folder(tmp_path) / "step-10.pt", b"ten")
        _until(lambda: "run/one/step-10.pt" in s3.objects)
    finally:
        sync.stop()
    assert len(running) == 1 and running[0].daemon and not running[0].is_alive()
    assert s3.objects == {"run/one/step-10.pt": b"ten"} and sync.figures.left_behind == []


def test_the_background_sync_waits_for_a_file_to_hold_still(tmp_path, monkeypatch):
    """A file that appears during a look is first uploaded one look later (at least one poll interval on), never in
    the look that first saw it (it may still be being written)."""
    monkeypatch.setattr(checkpoint_sync, "POLL_SECONDS", 0.05)
    s3 = MemoryS3()
    sync = _sync(tmp_path, s3, hosts=("algo-1", "algo-2"))
    _write(_folder(tmp_path, "algo-1") / "steady.pt", b"s")
    _folder(tmp_path, "algo-2").mkdir(parents=True)
    appeared = []

    def write_fresh(key, source):   # algo-1's upload, in the look that lists algo-2 next
        if key == "run/one/steady.pt":
            _write(_folder(tmp_path, "algo-2") / "fresh.pt", b"f")
            appeared.append(time.monotonic())
    s3.before_upload = write_fresh
    sync.start()
    try:
        _until(lambda: "run/one/fresh.pt" in s3.objects)
    finally:
        sync.stop()
    uploaded = dict((k, t) for k, _, t in s3.uploads)
    assert uploaded["run/one/fresh.pt"] - appeared[0] >= 0.04


def test_an_error_in_the_background_sync_is_raised_when_it_stops(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint_sync, "POLL_SECONDS", 0.01)
    s3 = MemoryS3()
    attempts = []

    def refuse(key, source):
        attempts.append(key)
        raise RuntimeError("S3 refused the upload (AccessDenied)")
    s3.before_upload = refuse
    sync = _sync(tmp_path, s3)
    sync.start()
    try:
        _write(_folder(tmp_path) / "a.pt", b"a")
        _until(lambda: attempts)
    finally:
        raised = _stopped(sync)
    assert type(raised) is RuntimeError and str(raised) == "S3 refused the upload (AccessDenied)"
    assert s3.objects == {} and attempts == ["run/one/a.pt"]
