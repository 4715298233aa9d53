"""`dslab local`: the whole lab offline, for real — the default experiment, failures, clean-up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dslab.core.modes import lab_mode
from dslab.cli import main
from dslab.contracts import validate_results
from dslab.inputs.experiment_file import load_experiment
from dslab.local import lab as local_lab
from dslab.local import storage as local_storage
from dslab.local.lab import DEFAULT_EXPERIMENT, LocalLab, run_local
from dslab.local.storage import fuse_available, mounts_under

from .conftest import REPO

pytestmark = pytest.mark.skipif(not fuse_available(), reason="s3fs-fuse and /dev/fuse are needed (.ci/run installs them)")


@pytest.fixture(scope="module")
def cache(lab_cache) -> Path:
    return lab_cache


def _processes() -> list[tuple[list[str], str]]:
    """(command line, working directory) of every process this user can see, but this one."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:   # gone meanwhile, or not ours to read
            continue
        found.append(([a for a in argv if a], cwd))
    return found


def _under(path: str, root: Path) -> bool:
    top = str(root.resolve())
    return path == top or path.startswith(top + "/")


def s3fs_processes(root: Path) -> list[str]:
    """s3fs processes whose mount point is under ``root``: the lab's own (another lab's s3fs is not ours)."""
    return [" ".join(argv) for argv, _ in _processes()
            if argv and Path(argv[0]).name == "s3fs" and any(_under(a, root) for a in argv[1:])]


def script_processes(root: Path) -> list[str]:
    """Training scripts the lab started under ``root`` (each job's code folder is its working directory)."""
    return [" ".join(argv) for argv, cwd in _processes()
            if any("train.py" in a for a in argv) and (_under(cwd, root) or any(_under(a, root) for a in argv))]


def assert_clean(cache: Path) -> None:
    """Nothing the lab started under ``cache`` is left: mounts, s3fs, training scripts, work folders."""
    assert mounts_under(cache) == [], "a FUSE mount was left behind"
    assert s3fs_processes(cache) == []
    assert script_processes(cache) == []
    assert not list(cache.glob("dslab-lab-*")), "the lab's work folder (FIFOs, job trees) was left behind"


# `make lab` runs experiments/local.yaml at full size (1,000 JPEGs, 4,000 TFRecord images); the test runs
# the same experiment (every trial, mode, storage class, setting) on fewer images: the same paths, a
# tenth of the requests to the stand-in's S3 (at least two batches of the V100 preset's 64 per dataset).
SMALLER = {"local-jpg": {"images": 80}, "local-tfr": {"images": 160, "shard_size_mb": 2}}


def smaller_default_experiment(tmp_path: Path) -> Path:
    doc = yaml.safe_load(DEFAULT_EXPERIMENT.read_text())
    for dataset in doc["dataset_catalog"]:
        assert dataset["name"] in SMALLER, "a dataset was added to local.yaml: give it a smaller size here"
        dataset["generate"].update(SMALLER[dataset["name"]])
    # Two jobs at a time: at these sizes a job is mostly its start and its end (the workflow's steps,
    # a process start), which overlap well; `make lab` keeps one at a time for its figures.
    doc["max_concurrency"] = 2
    for trial in doc["trials"]:   # a workload file named relative to experiments/, from the copy's folder
        if isinstance(trial.get("workload"), dict):
            trial["workload"]["file"] = str((DEFAULT_EXPERIMENT.parent / trial["workload"]["file"]).resolve())
    path = tmp_path / "local-smaller.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_make_lab_runs_the_default_experiment():
    assert DEFAULT_EXPERIMENT == REPO / "experiments" / "local.yaml"
    assert "dslab local --out lab-out" in (REPO / "Makefile").read_text()  # no --experiment: the default


def test_default_local_experiment_end_to_end(cache, tmp_path):
    out = tmp_path / "lab-out"
    lines: list[str] = []
    path = smaller_default_experiment(tmp_path)
    run = run_local(path, out, cache=cache, say=lines.append)
    assert run.execution_status == "SUCCEEDED", run.execution_error
    results = run.results
    validate_results(results)
    assert results["backend"] == "local"
    experiment = load_experiment(path)
    images = {d.name: d.generate["images"] for d in experiment.datasets}
    assert images == {"local-jpg": 80, "local-tfr": 160}
    # The llama3_8b checkpoint trial: its four targets (and the sync targets' restore jobs) through the workflow.
    checkpoints = [r for r in results["records"] if r.get("checkpoint_target")]
    records = [r for r in results["records"] if not r.get("checkpoint_target")]
    assert len(records) == 14 and len(checkpoints) == 8
    assert_checkpoint_trial(checkpoints, out)
    sources = {(r["dataset"], lab_mode(r), r.get("storage", "standard")) for r in records}
    assert sources == {(d, m, "standard") for d in images for m in ("File", "FastFile", "Pipe", "FSx", "EFS", "Script")} | {
        ("local-jpg", "File", "express"), ("local-jpg", "FastFile", "express")}
    for r in records:
        assert r["status"] == "Completed", (r["mode"], r["dataset"], r["failure_reason"])
        assert r["metrics"]["samples"] == images[r["dataset"]]
        assert r["billable_seconds"] >= 1 and "Training" in r["phases"]
        assert ("Downloading" in r["phases"]) == (r["mode"] == "File")
        assert r["metrics"]["au_percent"] is not None
    # Script: the lab's script listed and read the stand-in's S3 itself (through AWS_ENDPOINT_URL), and the
    # report names it beside SageMaker's sources.
    script = [r for r in records if lab_mode(r) == "Script"]
    assert {r["mode"] for r in script} == {"FastFile"} and all(r["ingestion"] == "script" for r in script)
    # The Express jobs read the stand-in's directory bucket, staged by the workflow before they ran.
    assert results["express_staging"]["ready"] is True and f"{images['local-jpg']:,} objects copied" in results["express_staging"]["reason"]
    for name in ("results.json", "results.csv", "report.md", "report.html", "breakdown.png"):
        assert (out / name).exists()
    assert (out / "breakdown.png").read_bytes()[:4] == b"\x89PNG"
    report = (out / "report.md").read_text()
    assert "LOCAL run" in report and "estimated (not measured)" in report
    assert "Express FastFile" in report and "Express File" in report and "| Script |" in report
    # The answer leads, local and estimated on AWS, per dataset; `dslab report` rebuilds the same report.
    # (and once more in the checkpoint section, for the checkpoint trial)
    assert report.splitlines()[2] == "## Answer" and report.count("**Pick: ") == 2 and report.count("Estimated on AWS") == 3
    assert main(["report", "--results", str(out / "results.json"), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "report.md").read_text() == report
    assert {"setup", "data", "jobs", "reporting", "total"} <= set(run.timings)
    # Progress, a line per change (not a terminal): where the run stands each time, and how it ended.
    changes = [line for line in lines if line.startswith("  [")]
    assert any("InProgress/Training (" in line for line in changes) and changes[-1].endswith("(22/22 done)")
    assert any("left)" in line for line in changes)   # an estimate of the time left once a job has ended
    assert "jobs: 22/22 jobs done, 0 running;" in "\n".join(lines)
    assert_clean(cache)


def assert_checkpoint_trial(records: list[dict], out: Path) -> None:
    """Every target wrote and read back llama3_8b's 16 files a checkpoint (scaled), SageMaker's sync restored by its
    second job (the copy-in a phase of its own) and emptied in S3 when that job deleted them; the report opens its
    checkpoint section with the answer."""
    by = {(r["checkpoint_target"], r["checkpoint_restore"]): r for r in records}
    assert set(by) == {(t, restore) for t in ("s3", "express", "fsx", "efs") for restore in (False, True)}
    for (target, restore), r in by.items():
        assert r["status"] == "Completed", (target, restore, r["failure_reason"])
        assert r["mode"] == {"s3": "File", "express": "File", "fsx": "FSx", "efs": "EFS"}[target]
        figures = r["metrics"]["checkpoint"]
        assert figures["files_per_checkpoint"] == 16 and figures["fsync_calls"] == (0 if restore else 32)
        # A file system's writer writes only; its restore job reads on a new instance (MLPerf's separate runs). The
        # sync's writer reads its own volume back too.
        reads = 0 if target in ("fsx", "efs") and not restore else 2
        assert len(figures["load_seconds"]) == reads and len(figures["save_seconds"]) == (0 if restore else 2)
        # SageMaker's copy of the S3 URI, before the script (the sync's restore only)
        assert ("Downloading" in r["phases"]) == (restore and target in ("s3", "express"))
        if target in ("s3", "express"):
            assert r["checkpoint_s3_uri"] == by[(target, not restore)]["checkpoint_s3_uri"]
        # The sync's writers waited until S3 listed each checkpoint (durable); FSx and EFS hold a save once fsynced.
        durable = figures.get("durable_seconds")
        if target in ("s3", "express") and not restore:
            assert len(durable) == 2 and all(d is not None and d >= s for d, s in zip(durable, figures["save_seconds"]))
            assert figures["durable_checked"].startswith(f"listed {r['checkpoint_s3_uri']} every 0.5 s")
        else:
            assert durable is None
    assert by[("express", False)]["storage"] == "express" and by[("express", False)]["checkpoint_s3_uri"].split("/")[2].endswith("--x-s3")
    log = (out / "jobs" / f"{by[('s3', True)]['job_name']}.log").read_text()
    # Everything the writer's sync uploaded (2 checkpoints x 16 files, 11,242,568 bytes each at scale 0.0001) was copied
    # in; the restore job deleted what it read, and SageMaker's sync deleted it in S3.
    assert "checkpoint sync: 32 file(s), 22,485,136 bytes copied in" in log and "32 deleted in S3" in log
    report = (out / "report.md").read_text()
    section = report[report.index("## Checkpoints: where they should go"):]
    assert section.splitlines()[4].startswith("### llama-8b · llama3-8b-checkpoints")
    assert "**Pick (measured): " in section and "**Estimated on AWS**" in section
    assert "| save s | stall s | durable s | restore s |" in section
    # Reads apart from the writes, but one run where MLPerf takes five: said.
    assert "- Not MLPerf Storage's sequence: 1 run(s), where MLPerf takes the mean of 5 (repeats: 5)" in section
    # The estimate names its premise, as every answer does: the checkpoint at full size, the cluster, the interval,
    # and the lab it is priced on (the stand-in's deployed lab here).
    estimated = next(line for line in section.splitlines() if "**Estimated on AWS**" in line)
    assert "at full size on 1 x ml.p5.48xlarge, every 30 min, the last 2 kept; priced on " in estimated, estimated
    assert section.index("**Pick (measured)") < section.index("| model · trial | target |")


def test_corrupted_shard_fails_one_real_job_others_complete_results_stored_teardown_runs(cache, tmp_path, bound_lab):
    experiment = load_experiment_text(tmp_path, """
name: failure-scenario
teardown_fsx: true
max_concurrency: 1
instance_type: ml.m5.xlarge
volume_size_gb: 5
compute: {batch_size: 32, seconds_per_batch: 0.01}
trials:
  - name: good
    datasets: [{name: good-tfr, format: tfrecord, generate: {images: 120, classes: 4, seed: 5, shard_size_mb: 1}}]
    modes: [File, FastFile, FSx, EFS]
  - name: bad
    datasets: [{name: bad-tfr, format: tfrecord, generate: {images: 120, classes: 4, seed: 6, shard_size_mb: 1}}]
    modes: [Pipe]
""")
    out = tmp_path / "out"
    with LocalLab(experiment, out, cache, say=lambda _: None, assembly=bound_lab.outdir) as lab:
        lab.upload()
        s3 = lab.lab.client("s3")
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=lab.lab.bucket, Prefix="datasets/bad-tfr/")["Contents"])
        body = bytearray(s3.get_object(Bucket=lab.lab.bucket, Key=keys[0])["Body"].read())
        body[2] ^= 0xFF  # the first record's length: its CRC no longer matches
        s3.put_object(Bucket=lab.lab.bucket, Key=keys[0], Body=bytes(body))
        run = lab.run()
        assert not lab.lab.fsx_present  # torn down after the failure, through the FSx stack's deletion
    assert run.execution_status == "FAILED" and run.execution_error == "JobsFailed"
    records = {(r["dataset"], r["mode"]): r for r in run.results["records"]}
    failed = records[("bad-tfr", "Pipe")]
    assert failed["status"] == "Failed" and "CRC" in failed["failure_reason"] and "byte offset 0" in failed["failure_reason"]
    assert all(records[("good-tfr", m)]["status"] == "Completed" for m in ("File", "FastFile", "FSx", "EFS"))
    stored = json.loads((out / "results.json").read_text())
    assert len(stored["records"]) == 5
    assert_clean(cache)


def test_without_fuse_fastfile_and_fsx_fail_and_say_how_to_enable_it(cache, tmp_path, monkeypatch, bound_lab):
    monkeypatch.setattr(local_storage, "fuse_available", lambda: False)
    monkeypatch.setattr(local_lab, "fuse_available", lambda: False)
    experiment = load_experiment_text(tmp_path, """
name: no-fuse
instance_type: ml.m5.xlarge
volume_size_gb: 5
compute: {batch_size: 32, seconds_per_batch: 0.01}
datasets: [{name: nofuse-tfr, format: tfrecord, generate: {images: 60, classes: 3, seed: 2, shard_size_mb: 1}}]
modes: [File, FastFile, FSx]
""")
    with LocalLab(experiment, tmp_path / "out", cache, say=lambda _: None, assembly=bound_lab.outdir) as lab:
        lab.upload()
        run = lab.run()
    records = {r["mode"]: r for r in run.results["records"]}
    assert records["File"]["status"] == "Completed"
    for mode in ("FastFile", "FSx"):
        assert records[mode]["status"] == "Failed"
        assert "apt-get install s3fs fuse3" in records[mode]["failure_reason"]
    assert_clean(cache)


def load_experiment_text(tmp_path: Path, text: str):
    path = tmp_path / "experiment.yaml"
    path.write_text(text)
    return load_experiment(path)



def test_sigterm_keeps_finished_jobs_and_the_same_out_runs_only_the_rest_under_the_same_names(cache, tmp_path, bound_lab):
    """Issue 28: at 9 of 14 jobs, Ctrl-C left only logs, and the rerun repeated all 14 (24 logs for a 14-job report)."""
    from dslab.core.experiment import expand
    from dslab.core.requests import job_name
    experiment = tmp_path / "four.yaml"
    experiment.write_text("""
name: resumed
instance_type: ml.m5.xlarge
volume_size_gb: 5
compute: {batch_size: 16, seconds_per_batch: 0.3}
datasets: [{name: resume-tfr, format: tfrecord, generate: {images: 96, classes: 4, seed: 4, shard_size_mb: 1}}]
modes: [File, Pipe, EFS, FastFile]
""")
    out = tmp_path / "out"
    # No --plain: its output is a pipe, not a terminal, so it prints a line per change by itself ("(2/4 done").
    proc = subprocess.Popen([sys.executable, "-m", "dslab.cli", "local", "--experiment", str(experiment), "--out", str(out),
                             "--cache", str(cache)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    deadline = time.monotonic() + 300
    for line in proc.stdout:
        seen.append(line)
        if "(2/4 done" in line:
            break
        assert time.monotonic() < deadline, "".join(seen)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, "".join(seen) + rest
    # What finished is kept: results.json as the jobs ended, and a report of them marked partial.
    partial = json.loads((out / "results.json").read_text())
    done = partial["partial"]["done"]
    assert partial["partial"] == {"done": done, "total": 4, "reason": "interrupted"} and done >= 2
    assert [r["status"] for r in partial["records"]] == ["Completed"] * done
    assert f"**Partial: interrupted at {done}/4 jobs." in (out / "report.md").read_text()
    assert f"interrupted at {done}/4 jobs: {out / 'report.html'} reports the {done} that finished" in rest
    assert_clean(cache)
    # The same --out again: only the other jobs run, under the names the execution gave them; the finished
    # records are kept as they were, and the superseded attempt's logs are set apart.
    lines: list[str] = []
    run = run_local(experiment, out, cache=cache, say=lines.append, assembly=bound_lab.outdir)
    assert run.execution_status == "SUCCEEDED", run.execution_error
    records = run.results["records"]
    planned = [job_name(load_experiment(experiment), spec, partial["execution"]) for spec in expand(load_experiment(experiment))]
    assert run.results["execution"] == partial["execution"] and [r["job_name"] for r in records] == planned
    assert [r for r in records if r["job_name"] in {k["job_name"] for k in partial["records"]}] == partial["records"]
    assert {r["status"] for r in records} == {"Completed"} and "partial" not in run.results
    kept = {r["job_name"] for r in partial["records"]}
    ran = {line.split("] ", 1)[1].split(":", 1)[0] for line in lines if line.startswith("  [")}
    assert ran == set(planned) - kept, "\n".join(lines)
    assert run.results["resumed"] == {"kept": done, "ran": 4 - done, "attempt": 2}
    assert any(line.startswith(f"resuming the interrupted run in {out} (attempt 2): {done} completed jobs kept") for line in lines)
    assert sorted(p.stem for p in (out / "jobs").glob("*.log")) == sorted(planned)
    assert {p.stem for p in (out / "jobs" / "attempt-1").glob("*.log")} <= set(planned) - kept
    assert f"> Resumed: {done} jobs kept from the interrupted attempt" in (out / "report.md").read_text()
    assert_clean(cache)


def test_on_a_terminal_the_live_table_is_drawn_while_jobs_run_and_ctrl_c_leaves_nothing(cache, tmp_path):
    """Issue 28: in a real terminal `dslab local` showed its table only at the end or on Ctrl-C. Under a
    pseudo-terminal, the table (a row per job, its phase) is drawn while the jobs are in progress; lines per
    change are for output that is not a terminal (test_default_local_experiment_end_to_end). Then Ctrl-C, typed
    on that terminal (SIGINT to its whole foreground process group, training scripts included) while a
    FastFile job trains on its FUSE mount: exit 130, and no mount, s3fs, script or work folder is left (that
    the same --out then resumes: the SIGTERM test below)."""
    import pty
    import re
    import select
    import termios
    experiment = tmp_path / "two.yaml"
    experiment.write_text("""
name: on-a-terminal
instance_type: ml.m5.xlarge
volume_size_gb: 5
compute: {batch_size: 16, seconds_per_batch: 2.0}
datasets: [{name: tty-tfr, format: tfrecord, generate: {images: 200, classes: 4, seed: 7, shard_size_mb: 1}}]
modes: [File, FastFile]
""")
    pid, terminal = pty.fork()
    if pid == 0:   # the child: `dslab local` with a terminal for its standard output
        os.chdir(REPO)
        os.environ.update({"TERM": "xterm", "COLUMNS": "160", "LINES": "50"})
        # As an interactive shell starts a foreground job: SIGINT at its default. A suite started in the background
        # (`make test &`) inherits SIGINT ignored, which exec keeps and Python then leaves ignored.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        os.execv(sys.executable, [sys.executable, "-m", "dslab.cli", "local", "--experiment", str(experiment),
                                  "--out", str(tmp_path / "out"), "--cache", str(cache)])
    training = re.compile(r"│ dsl-tty-tfr-\w+-r0-\w+ +│ InProgress/Training +│")
    shown, deadline, typed, typed_modes = b"", time.monotonic() + 400, None, (0, 0)
    try:
        while time.monotonic() < deadline:
            if select.select([terminal], [], [], 0.5)[0]:
                try:
                    chunk = os.read(terminal, 65536)
                except OSError:   # the child closed the terminal: it ended
                    break
                if not chunk:
                    break
                shown += chunk
            text = shown.decode(errors="replace")
            if typed is None and len(training.findall(text)) >= 2 and mounts_under(cache):
                typed = text
                # The user's terminal as the run found it: no child (the CDK CLI reading a TTY stdin, say) left it
                # in raw mode, where Ctrl-C is a byte and not SIGINT.
                modes = termios.tcgetattr(terminal)[3]
                typed_modes = (modes & termios.ISIG, modes & termios.ICANON)
                os.write(terminal, b"\x03")   # Ctrl-C, as the terminal's line discipline turns it into SIGINT
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(terminal)
    text = shown.decode(errors="replace")
    assert typed is not None, "no frame showed a job training on a FUSE mount:\n" + text[-3000:]
    assert all(typed_modes), f"the terminal was left without ISIG/ICANON {typed_modes}: Ctrl-C could not interrupt"
    drawn_running = re.findall(r"│ dsl-tty-tfr-\w+-r0-\w+ +│ InProgress/\w+ +│", typed)
    assert len(drawn_running) >= 2, typed[-3000:]     # frames drawn while jobs were in progress, not only the last
    assert not re.search(r"(?m)^  \[ *\d", text)    # a table, not the lines for output that is not a terminal
    assert os.waitstatus_to_exitcode(status) == 130, text[-3000:]
    # Ctrl-C keeps what finished as SIGTERM does: results.json and a report, marked partial (none had finished).
    partial = json.loads((tmp_path / "out" / "results.json").read_text())
    assert partial["partial"] == {"done": 0, "total": 2, "reason": "interrupted"} and partial["records"] == []
    assert "**Partial: interrupted at 0/2 jobs." in (tmp_path / "out" / "report.md").read_text()
    assert "interrupted at 0/2 jobs" in text
    assert_clean(cache)


def test_a_run_whose_cache_and_its_folder_do_not_exist_yet_starts(tmp_path, monkeypatch):
    """The datasets are made beside the set-up, after the checks: the cache folder is made before the checkpoint check
    asks its disk for room (it was made by the datasets' preparation before)."""
    asked = []
    monkeypatch.setattr(local_lab, "check_checkpoints_fit", lambda experiment, cache, flag=None: asked.append(cache.is_dir()))
    monkeypatch.setattr(local_lab, "LocalLab", _StopBeforeTheStandIn)
    experiment = tmp_path / "tiny.yaml"
    experiment.write_text("name: tiny\ninstance_type: ml.m5.xlarge\nvolume_size_gb: 5\nmodes: [File]\n"
                          "compute: {batch_size: 2, seconds_per_batch: 0.01}\n"
                          "datasets: [{name: tiny, format: jpg, generate: {images: 4, classes: 2, seed: 1}}]\n")
    with pytest.raises(_StoppedBeforeTheStandIn):
        local_lab.run_local(experiment, tmp_path / "out", cache=tmp_path / "new" / "cache")
    assert asked == [True]


class _StoppedBeforeTheStandIn(Exception):
    pass


class _StopBeforeTheStandIn:
    def __init__(self, *args, datasets=None, **kwargs):
        self.datasets = datasets

    def __enter__(self):
        raise _StoppedBeforeTheStandIn()

    def __exit__(self, *exc):
        return False
