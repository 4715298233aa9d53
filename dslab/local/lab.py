"""`dslab local`: the whole lab, offline, for real.

1. Starts the embedded AWS stand-in (moto server on loopback, with the stand-in's own CloudFormation).
2. Deploys the lab into it the way a user does: the pinned CDK CLI runs `cdk bootstrap` and
   `cdk deploy` (synthesizing bound to the stand-in's account, after its context lookups), publishes
   the assets and deploys the three stacks through change sets; the lab reads the stacks' outputs.
3. Generates (or reuses, cached) the experiment's datasets and uploads them to the stand-in's bucket.
4. Executes the workflow in the stand-in's Step Functions engine; each training job it creates is
   run by the local container runner with real data movement per mode (see ``storage``).
5. Writes the report (results.json per the contract, CSV, Markdown, HTML, chart), marked local,
   with the estimate for the same experiment on AWS beside it.
Everything it started is stopped and unmounted on success, failure and Ctrl-C.

Finished work survives an interrupt: results.json is written as each job ends, and on SIGINT or SIGTERM
a report of what finished, marked partial. The same command with the same --out then resumes: the same
execution name (so the same job names), only the jobs not yet completed; --fresh starts over.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import pickle
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from botocore.exceptions import ClientError

from ..inputs import datasets as dataset_tools
from ..inputs import user_code
from ..core.errors import ConfigError
from ..core.experiment import JPG, Experiment, expand
from ..core.facts.prices import PriceTable
from ..core.progress import ENDED, RunProgress
from ..core.requests import KEEP_JOBS, RESULTS_PREFIX, check_every_host_gets_data, check_job_count
from ..core.results import read_results, summarise
from ..emulator.functions import RUNTIME_SERVICE
from ..emulator.lab import EmulatedLab
from ..emulator.snapshot import SUFFIX as SNAPSHOT_SUFFIX, SnapshotUnusable, snapshot_key
from ..inputs.experiment_file import load_experiment
from ..progress_view import ProgressView
from ..report import INTERRUPTED, write_report
from ..workflow.collect import job_record, results_document
from .job_storage import free_port
from .runner import kill_running, run_training_job
from .storage import FUSE_HELP, LabStorage, S3Mounts, fuse_available, unmount_all

REPO = Path(__file__).resolve().parent.parent.parent
DEFAULT_EXPERIMENT = REPO / "experiments" / "local.yaml"
SYNTH_INPUTS = ("app.py", "cdk.json", "stacks", "dslab/core", "dslab/workflow", "training")


def _fingerprint(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for base in paths:
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for path in files:
            digest.update(str(path.relative_to(REPO)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cached_assembly(cache: Path, say: Callable[[str], None]) -> tuple[Path, Path | None, Callable[[], None]]:
    """(the CLI's working folder, the assembly it synthesized last if the sources are unchanged, a
    callback that marks a fresh synthesis as current). None: `cdk deploy` synthesizes, bound to the
    stand-in's account after its context lookups, as it does with credentials."""
    workdir = cache / "cdk"
    assembly = workdir / "cdk.out"
    stamp = cache / "cdk.out.fingerprint"
    fingerprint = _fingerprint([REPO / p for p in SYNTH_INPUTS])
    if (assembly / "manifest.json").exists() and stamp.exists() and stamp.read_text() == fingerprint:
        say("stacks: reusing the synthesized assembly (sources unchanged)")
        return workdir, assembly, lambda: None
    if not (REPO / "node_modules" / ".bin" / "cdk").exists():
        raise ConfigError("make setup", "the pinned CDK CLI is missing (node_modules/.bin/cdk): run make setup")
    stamp.unlink(missing_ok=True)
    return workdir, None, lambda: stamp.write_text(fingerprint)


def prepare_dataset(dataset, cache: Path, say: Callable[[str], None]) -> Path:
    """The dataset's files on local disk, generated (and packed) once per distinct recipe."""
    spec = dataset.generate
    if not spec:
        raise ConfigError(f"datasets.{dataset.name}.generate", "the local lab builds its datasets itself",
                          "generate: {images: N, classes: K, seed: S} (and shard_size_mb for tfrecord)")
    if "record_bytes" in spec:   # a DLIO workload's shape (core/workloads/dlio.py): its files, samples and record sizes
        files, per_file = int(spec["files"]), int(spec["samples_per_file"])
        record, stdev, seed = int(spec["record_bytes"]), int(spec.get("record_bytes_stdev", 0)), int(spec.get("seed", 0))
        folder = cache / "datasets" / f"dlio-{dataset.format}-{files}-{per_file}-{record}-{stdev}-{seed}"
        if dataset.format == JPG:   # jpeg drawn as DLIO draws it (datasets.py): not an earlier layout's cached files
            folder = folder.with_name(folder.name + "-as-dlio")
        if not (folder / "dataset.json").exists():
            shutil.rmtree(folder, ignore_errors=True)
            say(f"data: generating {files} {dataset.format} files of {per_file} x ~{record / 1e6:.2f} MB for {dataset.name} ...")
            dataset_tools.generate_dlio(folder, dataset.format, files, per_file, record, stdev, seed)
        return folder
    images, classes = int(spec.get("images", 1000)), int(spec.get("classes", 16))
    seed, mean_kb = int(spec.get("seed", 0)), float(spec.get("mean_kb", dataset_tools.CALTECH_MEAN_KB))
    copies = int(spec.get("copies", 1))
    jpg_key = f"jpg-{images}-{classes}-{seed}-{mean_kb:g}"
    jpg_dir = cache / "datasets" / jpg_key
    if not (jpg_dir / "dataset.json").exists():
        shutil.rmtree(jpg_dir, ignore_errors=True)
        say(f"data: generating {images} JPEGs for {dataset.name} ...")
        dataset_tools.generate(jpg_dir, images=images, classes=classes, seed=seed, mean_kb=mean_kb)
    source = jpg_dir
    if dataset.format != JPG:
        shard_mb = float(spec.get("shard_size_mb", dataset_tools.DEFAULT_SHARD_MB))
        tfr_dir = cache / "datasets" / f"tfr-{jpg_key}-{shard_mb:g}"
        if not (tfr_dir / "manifest.json").exists():
            shutil.rmtree(tfr_dir, ignore_errors=True)
            say(f"data: packing {dataset.name} into {shard_mb:g} MB TFRecord shards ...")
            dataset_tools.pack(jpg_dir, tfr_dir, shard_size=int(shard_mb * 1e6), seed=seed)
        source = tfr_dir
    if copies > 1:
        copies_dir = cache / "datasets" / f"{source.name}-x{copies}"
        if not (copies_dir / "dataset.json").exists():
            shutil.rmtree(copies_dir, ignore_errors=True)
            dataset_tools.replicate(source, copies, copies_dir)
        source = copies_dir
    return source


class DatasetsBeside:
    """The experiment's datasets prepared (prepare_dataset) in a thread of their own, beside the lab's set-up: a first
    run generates them (seconds of CPU) while the CDK CLI synthesizes and deploys. ``folder`` waits for a dataset's
    and raises what preparing it raised (no room on the disk, say: said when the upload needs it, after the set-up)."""

    def __init__(self, datasets, cache: Path, say: Callable[[str], None]):
        self._folders: dict[str, Path] = {}
        self._error: BaseException | None = None
        self._done = threading.Event()

        def prepare() -> None:
            try:
                for dataset in datasets:
                    self._folders[dataset.name] = prepare_dataset(dataset, cache, say)
            except BaseException as err:  # noqa: BLE001 - raised where the folder is asked for
                self._error = err
            finally:
                self._done.set()

        # A daemon: a run stopped during its set-up does not wait for it (a dataset left half-made has no
        # dataset.json, and the next run makes it again).
        threading.Thread(target=prepare, name="datasets", daemon=True).start()

    def wait(self) -> None:
        self._done.wait()

    def folder(self, dataset) -> Path:
        self._done.wait()
        if dataset.name in self._folders:
            return self._folders[dataset.name]
        if self._error is not None:
            raise self._error
        raise KeyError(dataset.name)


IN_PROGRESS = "in progress"   # results.json's partial state while jobs run (and after a kill no handler saw)
OUTPUTS = ("results.json", "results.csv", "report.md", "report.html", "breakdown.png", "scaling.png")


class WorkflowFailed(RuntimeError):
    """The execution ended without results (Plan refused the experiment, or Collect could not store them): the message
    is Step Functions' error and cause, which name why (a module the deployed code lacks, say)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by `dslab local`'s handler: the run stops as on Ctrl-C."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped (SIGINT or SIGTERM) after its workflow started: what finished is in results.json and
    a partial report (``paths``)."""

    def __init__(self, done: int, total: int, paths: dict[str, Path], terminated: bool):
        super().__init__(f"interrupted at {done}/{total} jobs")
        self.done, self.total, self.paths, self.terminated = done, total, paths, terminated


@dataclass
class Resume:
    """An interrupted run in --out, resumed: its execution name (so every job keeps its name), the records of
    the jobs it completed (kept as they are), and which attempt this one is."""
    execution: str
    kept: list[dict[str, Any]]
    attempt: int


def resume_of(out: Path, experiment: Experiment, fresh: bool) -> Resume | None:
    """An interrupted run of this experiment in --out, to resume (None: start over there). An interrupted run
    of another experiment is refused, naming --fresh, before anything is created or removed."""
    results_path = out / "results.json"
    try:
        previous = json.loads(results_path.read_text()) if results_path.is_file() else None
    except ValueError:
        previous = None   # not a run to resume: replaced
    if fresh or not isinstance(previous, dict) or not previous.get("partial"):
        return None
    local = previous.get("local_run") or {}
    if local.get("experiment_hash") != experiment.content_hash:
        raise ConfigError("--out", f"{out} holds an interrupted run of another experiment "
                          f"({previous.get('experiment', {}).get('name', '?')}, {local.get('experiment_hash', '?')}; "
                          f"this one is {experiment.content_hash})",
                          "add --fresh to start over there, or give another --out")
    # Kept records read at this dslab's schema version, so the resumed file never mixes versions (an older run's
    # seconds x count read as one instance's: core.results.VERSION_NOTES).
    kept = [r for r in read_results(previous, str(results_path))["records"] if r.get("status") == "Completed"]
    return Resume(previous["execution"], kept, int(local.get("attempt") or 1) + 1)


# Where a run that starts over keeps the earlier run's results, report and logs until it ends (finish_out).
PREVIOUS = ".previous"


def prepare_out(out: Path, resume: Resume | None, experiment: Experiment, fresh: bool,
                say: Callable[[str], None]) -> Path | None:
    """Resuming: the logs of the earlier attempt's unfinished jobs are set apart under jobs/attempt-N/ (the kept
    jobs' stay in jobs/). Starting over (a finished run there, or --fresh): the earlier run's results, report and
    job logs move aside into <out>/.previous/, which the new run deletes when it ends and puts back where it stops
    before its first result (finish_out): a run that starts over never leaves less than there was. Either is said;
    the folder set aside is returned (None: nothing was)."""
    logs = out / "jobs"
    if resume is not None:
        names = {r["job_name"] for r in resume.kept}
        apart = logs / f"attempt-{resume.attempt - 1}"
        moved = 0
        for log in sorted(logs.glob("*.log")) if logs.is_dir() else []:
            if log.stem not in names:
                apart.mkdir(parents=True, exist_ok=True)
                log.replace(apart / log.name)
                moved += 1
        say(f"resuming the interrupted run in {out} (attempt {resume.attempt}): {len(resume.kept)} completed jobs kept, "
            f"the other {len(expand(experiment)) - len(resume.kept)} run now under the same names"
            + (f"; {moved} log{'s' if moved != 1 else ''} of attempt {resume.attempt - 1}'s unfinished jobs moved to "
               f"{apart}/" if moved else ""))
        return
    files = [out / name for name in OUTPUTS if (out / name).is_file()]
    job_logs = sorted(logs.rglob("*.log")) if logs.is_dir() else []
    if not files and not job_logs:
        return None
    aside = out / PREVIOUS
    if aside.is_dir():
        # A finished run set aside by a start-over that stopped after its first result: that one is kept, and what is
        # in --out now (the interrupted start-over, or another finished run) is dropped for the new one.
        for path in files:
            path.unlink()
        shutil.rmtree(logs, ignore_errors=True)
        say(f"{out}: starting over{' (--fresh)' if fresh else ''}: the earlier finished run stays in {aside}/ until "
            "this one ends; the interrupted run's files were removed")
        return aside
    aside.mkdir()
    for path in files:
        path.replace(aside / path.name)
    if logs.is_dir():
        logs.replace(aside / "jobs")
    say(f"{out}: starting over{' (--fresh)' if fresh else ''}: the earlier run's {len(files)} result and report files "
        f"and {len(job_logs)} job logs are kept in {aside}/ until this run ends (Ctrl-C before its first result puts "
        "them back)")
    return aside


def finish_out(out: Path, aside: Path | None, ended: bool, say: Callable[[str], None]) -> None:
    """The earlier run set aside by prepare_out: deleted when the new run ``ended``; put back in place when the new
    run stopped before its first completed job; otherwise kept aside (the new run's partial results are what a rerun
    resumes), and said."""
    if aside is None or not aside.is_dir():
        return
    if ended:
        shutil.rmtree(aside, ignore_errors=True)
        return
    try:
        current = json.loads((out / "results.json").read_text())
    except (OSError, ValueError):
        current = None
    done = [r for r in (current or {}).get("records", []) if r.get("status") == "Completed"]
    if done:
        say(f"the earlier finished run stays in {aside}/ until a run in {out} ends")
        return
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "jobs", ignore_errors=True)
    for path in aside.iterdir():
        path.replace(out / path.name)
    aside.rmdir()
    say(f"{out}: the earlier run is back in place (this one stopped before its first result)")


@dataclass
class LocalRun:
    results: dict[str, Any]
    paths: dict[str, Path]
    execution_status: str
    execution_error: str | None
    timings: dict[str, float] = field(default_factory=dict)


REGION = "us-east-1"   # the stand-in's region (EmulatedLab's default)


def deployed_path(cache: Path, assembly: Path, with_fsx: bool, key: str | None = None) -> Path:
    """Where the deployment of ``assembly``'s templates is saved (snapshot.py), named by its key (``key``: the key,
    already made: it hashes the templates and the emulator's code)."""
    return cache / "deployed" / f"{key or snapshot_key(assembly, with_fsx=with_fsx, region=REGION)}{SNAPSHOT_SUFFIX}"


def deployed_before(assembly: Path, workdir: Path, cache: Path, with_fsx: bool, lab_settings: dict,
                    say: Callable[[str], None]) -> EmulatedLab | None:
    """The stand-in as the last run's `cdk deploy` of these templates left it, entered; or None: nothing saved for
    them, or what was saved cannot be used (said in one line, and removed)."""
    key = snapshot_key(assembly, with_fsx=with_fsx, region=REGION)
    path = deployed_path(cache, assembly, with_fsx, key)
    if not path.exists():
        return None
    lab = EmulatedLab(assembly, via_cli=True, cli_workdir=workdir, restore=path, restore_key=key, **lab_settings)
    try:
        lab.__enter__()
    except SnapshotUnusable as why:
        say(f"stacks: the saved deployment {path.name} cannot be used ({why}): deploying afresh")
        path.unlink(missing_ok=True)
        return None
    say("stacks: as the last `cdk deploy` of these templates left them (--redeploy deploys again)")
    return lab


def save_deployed(lab: EmulatedLab, cache: Path, assembly: Path, with_fsx: bool, say: Callable[[str], None]) -> None:
    """Save the stand-in as `cdk deploy` of ``assembly`` left it, for the next run of these templates. A save that
    fails costs the next run a deploy, never this run: said in one line."""
    try:
        key = snapshot_key(assembly, with_fsx=with_fsx, region=REGION)
        lab.save_deployment(deployed_path(cache, assembly, with_fsx, key), key)
    except (OSError, pickle.PicklingError, TypeError, AttributeError) as err:
        say(f"stacks: the deployment could not be saved ({type(err).__name__}: {err}): the next run deploys again")


# The set-up fills the heap with objects that live as long as the lab: moto's services and Step Functions parser, the
# SDK's service models, the restored deployment. Python's full collections walk every object each time the heap grows
# by a quarter: ~1.4 s of the CPU of a cached smoke run went to walking them (9 full collections of ~0.2 s). During
# the set-up the full collections wait (gen0 and gen1, which free the young cycles, go on as ever); after it its
# objects are frozen (gc.freeze: never walked again while the lab lives), the thresholds are Python's again, and the
# lab's exit unfreezes them (an in-process caller's heap is collected as before).
SET_UP_GC_THRESHOLD2 = 10_000


@dataclass
class _Heap:
    threshold: tuple[int, int, int]
    frozen: bool = False

    @classmethod
    def setting_up(cls) -> "_Heap":
        heap = cls(gc.get_threshold())
        gc.set_threshold(heap.threshold[0], heap.threshold[1], max(heap.threshold[2], SET_UP_GC_THRESHOLD2))
        return heap

    def set_up(self) -> None:
        gc.freeze()
        self.frozen = True
        gc.set_threshold(*self.threshold)

    def release(self) -> None:
        gc.set_threshold(*self.threshold)
        if self.frozen:
            gc.unfreeze()
            self.frozen = False


class LocalLab:
    """The embedded lab: a context manager that owns the stand-in, the mounts and the job processes."""

    def __init__(self, experiment: Experiment, out: Path, cache: Path, *, say: Callable[[str], None] = print,
                 time_scale: float = 0.01, fsx: bool = True, user_code_packages: list | None = None,
                 live_progress: bool | None = False, assembly: Path | None = None, resume: Resume | None = None,
                 redeploy: bool = False, datasets: DatasetsBeside | None = None):
        self.experiment, self.out, self.cache, self.say = experiment, out, cache, say
        self.redeploy = redeploy   # the user's path (`cdk deploy`) even where the last run's deployment still matches
        self.datasets = datasets   # being prepared beside the set-up (None: prepared when uploaded)
        # An interrupted run resumed (prepare_out), and the experiment as loaded, which a rerun must match
        # (its document gains the code's S3 URIs at upload).
        self.resume, self.experiment_hash = resume, experiment.content_hash
        self.user_code = list(user_code_packages or [])  # checked and packaged before the lab starts
        self.time_scale, self.with_fsx = time_scale, fsx
        self.live_progress = live_progress  # a live table (None: when stdout is a terminal), else a line per change
        # None: the user's path, the pinned CDK CLI deploys into the stand-in (synthesizing when the sources
        # changed). An assembly synthesized bound to the stand-in's account: deployed in-process, seconds
        # instead of the CLI's half a minute (tests whose subject is not the deploy).
        self.assembly = assembly
        cache.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="dslab-lab-", dir=str(cache)))
        self.timings: dict[str, float] = {}
        self.local_datasets: dict[str, Path] = {}
        self.lab: EmulatedLab | None = None
        self.fsx_root: Path | None = None
        self.mounts: S3Mounts | None = None
        self._started = time.monotonic()
        self._heap: _Heap | None = None

    # ---- set-up ------------------------------------------------------------------------------
    def __enter__(self) -> "LocalLab":
        try:
            return self._enter()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def _enter(self) -> "LocalLab":
        t0 = time.monotonic()
        self._heap = _Heap.setting_up()
        # The functions' runtime (its SDK imported) starts beside the set-up: Plan's environment is forked from it.
        RUNTIME_SERVICE.start_runtime()
        self.cache.mkdir(parents=True, exist_ok=True)
        stale = unmount_all(self.cache)
        if stale:
            self.say(f"clean-up: unmounted {stale} mounts left by an earlier run")
        if not fuse_available():
            self.say("warning: FUSE is unavailable: FastFile and FSx jobs will fail and say how to enable it")
        port = free_port()
        common = dict(executor=self._execute, efs_root=self.work / "efs", fsx=self.with_fsx, time_scale=self.time_scale,
                      server_port=port, backend="local", on_fsx_down=self._fsx_down, say=self.say)
        if self.assembly is not None:
            self.lab = EmulatedLab(self.assembly, **common)
            self.lab.__enter__()
        else:
            workdir, assembly, synthesized = cached_assembly(self.cache, self.say)
            if assembly is not None and not self.redeploy:
                self.lab = deployed_before(assembly, workdir, self.cache, self.with_fsx, common, self.say)
            if self.lab is None:
                # The user's deploy path: the pinned CDK CLI bootstraps the stand-in's account and deploys the
                # stacks into its CloudFormation (synthesizing first unless the sources are unchanged).
                self.lab = EmulatedLab(assembly, via_cli=True, cli_workdir=workdir, **common)
                self.lab.__enter__()
                synthesized()
                assembly = workdir / "cdk.out"
                # Saved before any data, job or result: the next run with these templates starts from here.
                save_deployed(self.lab, self.cache, assembly, self.with_fsx, self.say)
        self.lab.prewarm_functions()   # Plan's and Collect's interpreters start while the data uploads
        self.mounts = S3Mounts(self.lab.endpoint, self.work / "mounts")
        if self.with_fsx and fuse_available():
            # FSx linked to the bucket: one mount for the lab's life, lazily filled cache.
            self.fsx_root = self.mounts.mount(self.lab.bucket, "", "fsx", cache_dir=self.work / "fsx-cache")
        self._heap.set_up()
        self.timings["setup"] = time.monotonic() - t0
        return self

    def __exit__(self, *exc) -> None:
        kill_running()
        if self.lab is not None:
            try:
                self.lab.__exit__(*exc)
            finally:
                self.lab = None
        if self.mounts is not None:
            self.mounts.unmount_all()
        unmount_all(self.work)
        shutil.rmtree(self.work, ignore_errors=True)
        if self._heap is not None:
            self._heap.release()
            self._heap = None

    def _fsx_down(self) -> None:
        if self.fsx_root is not None and self.mounts is not None:
            self.mounts.unmount(self.fsx_root)
            self.fsx_root = None
            shutil.rmtree(self.work / "fsx-lustre", ignore_errors=True)   # what FSx held beside its link goes with it

    # ---- data ----------------------------------------------------------------------------------
    def upload(self) -> None:
        t0 = time.monotonic()
        s3 = self.lab.client("s3")
        # The lab's own training code arrived as the Core stack's file asset (`cdk deploy` published it).
        if self.user_code:
            user_code.upload(self.user_code, self.lab.bucket, s3)
            self.experiment = user_code.with_code_uris(self.experiment, self.lab.bucket, self.user_code)
            for code in self.user_code:
                self.say(f"code: {code.folder} uploaded for trial {code.trial} (sha256 {code.sha256[:12]})")
        for dataset in self.experiment.datasets:
            local = self.datasets.folder(dataset) if self.datasets else prepare_dataset(dataset, self.cache, self.say)
            self.local_datasets[dataset.name] = local
            result = dataset_tools.upload(local, f"s3://{self.lab.bucket}/datasets/{dataset.prefix}/", s3_client=s3)
            self.say(f"data: {dataset.name}: {result['files']} files uploaded to the stand-in's S3")
        self.timings["data"] = time.monotonic() - t0

    # ---- jobs -----------------------------------------------------------------------------------
    def _execute(self, request: dict, update: Callable[[dict], None]) -> dict:
        storage = LabStorage(self.lab.client("s3"), self.mounts, self.work / "efs", self.fsx_root,
                             self.lab.fsx_id, self.lab.efs_id,
                             fsx_problem=None if fuse_available() else FUSE_HELP,
                             fsx_lustre_root=self.work / "fsx-lustre" if self.fsx_root is not None else None)
        workdir = self.work / "jobs" / request["TrainingJobName"]
        workdir.mkdir(parents=True, exist_ok=True)
        outcome = run_training_job(request, storage, workdir, on_phase=lambda s: update({"SecondaryStatus": s}))
        for warning in outcome.warnings:
            self.say(f"warning: {request['TrainingJobName']}: {warning}")
        logs = self.out / "jobs"
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"{request['TrainingJobName']}.log").write_text(outcome.log)
        shutil.rmtree(workdir, ignore_errors=True)
        return outcome.describe

    def run(self) -> LocalRun:
        t0 = time.monotonic()
        kept = {r["job_name"]: r for r in (self.resume.kept if self.resume else [])}
        # A resumed run reuses the execution's name, so Plan names every job as before, and skips the kept ones.
        name = self.resume.execution if self.resume else str(uuid.uuid4())
        document = {**self.experiment.document, **({KEEP_JOBS: sorted(kept)} if kept else {})}
        execution_arn = self.lab.start(document, name=name)
        run_progress = RunProgress(len(expand(self.experiment)), self.experiment.max_concurrency, started=self._started)
        run_progress.kept = len(kept)
        finished = FinishedJobs(self, name, kept)

        def progress() -> None:
            plan = finished.plan()
            if plan is not None:   # how many jobs Plan skipped (FSx down, say): they never start
                run_progress.skipped = sum(1 for j in plan["jobs"] if j.get("skip_reason") and not j.get("kept"))
            # Every call is a request to the stand-in, which the FUSE-backed jobs need too: describe
            # only the jobs that have not ended.
            sagemaker = self.lab.client("sagemaker")
            try:
                for summary in sagemaker.list_training_jobs(MaxResults=100)["TrainingJobSummaries"]:
                    job = summary["TrainingJobName"]
                    known = run_progress.jobs.get(job)
                    if known is not None and known.status in ENDED:
                        continue
                    state = sagemaker.describe_training_job(TrainingJobName=job)
                    view.observe(job, state["TrainingJobStatus"], state.get("SecondaryStatus", ""))
                    if state["TrainingJobStatus"] in ENDED:
                        finished.record(job, state["TrainingJobStatus"])   # results.json as each job ends
            except ClientError:
                pass   # the stand-in refused this look (after botocore's retries): the next one looks again
            view.tick()

        try:
            with ProgressView(run_progress, live=self.live_progress, say=self.say) as view:
                execution = self.lab.wait(execution_arn, timeout=3600, poll=2.0, on_poll=progress)
                progress()
        except KeyboardInterrupt as stop:
            # Ctrl-C or SIGTERM: what ended meanwhile, then a report of what finished (the stand-in is still up).
            if finished.plan() is None:
                raise   # Plan never finished: nothing ran (an earlier attempt's results.json stays as it was)
            finished.sweep()
            results = finished.results(INTERRUPTED)
            paths = write_report(results, self.out)
            raise Interrupted(results["partial"]["done"], results["partial"]["total"], paths,
                              isinstance(stop, Terminated)) from None
        self.say(f"jobs: {run_progress.summary(time.monotonic())}")
        self.timings["jobs"] = time.monotonic() - t0
        t1 = time.monotonic()
        try:
            results = self.lab.results(execution)
        except Exception:
            raise WorkflowFailed(f"the workflow ended {execution.status} without results: {execution.error}: "
                                 f"{execution.cause}") from None
        if kept:   # Plan skipped them as kept: their records are the earlier attempt's
            results["records"] = [kept.get(r["job_name"], r) for r in results["records"]]
            results["summary"] = summarise(results["records"])
            results["resumed"] = {"kept": len(kept), "ran": len(results["records"]) - len(kept), "attempt": finished.attempt}
        finished.local_run["setup_seconds"] = prepare_seconds(execution.history, json.loads(self.lab.definition))
        results["local_run"] = finished.local_run
        paths = write_report(results, self.out)
        self.timings["reporting"] = time.monotonic() - t1
        return LocalRun(results, paths, execution.status, execution.error, dict(self.timings))


def prepare_seconds(history: list[dict[str, Any]], definition: dict[str, Any]) -> dict[str, float]:
    """Each source's set-up as this machine ran it: seconds from the workflow's PrepareData entered to the last step of
    the branch that prepares it (the copy into EFS, FSx's import check, the Express staging copy), from the execution's
    history. The report adds them to a local run's time to a result, as the AWS answer adds AWS's."""
    branches = definition["States"]["PrepareData"]["Branches"]
    entered = next((e["timestamp"] for e in history if e.get("type") == "ParallelStateEntered"
                    and (e.get("stateEnteredEventDetails") or {}).get("name") == "PrepareData"), None)
    if entered is None:
        return {}
    out: dict[str, float] = {}
    for branch in branches:
        names = set(branch["States"])
        label = "FSx" if "CheckFsxData" in names else "Express" if "StageExpress" in names else "EFS"
        ends = [e["timestamp"] for e in history if (e.get("stateExitedEventDetails") or {}).get("name") in names]
        if ends:
            out[label] = round(max(0.0, (max(ends) - entered).total_seconds()), 3)
    return out


class FinishedJobs:
    """The jobs of a local run that have ended, as result records made by the workflow's own Collect code,
    written to results.json (marked partial) as each one ends: an interrupted run keeps what finished."""

    def __init__(self, lab: LocalLab, execution: str, kept: dict[str, dict[str, Any]]):
        self.lab, self.execution, self.kept = lab, execution, kept
        self.attempt = lab.resume.attempt if lab.resume else 1
        # How many jobs shared this machine's CPUs: local figures depend on it (the report says it).
        self.local_run = {"experiment_hash": lab.experiment_hash, "attempt": self.attempt,
                          "max_concurrency": lab.experiment.max_concurrency, "cpus": os.cpu_count() or 1}
        self.records: dict[str, dict[str, Any]] = {}
        self._plan: dict[str, Any] | None = None
        environment = lab.lab.function_environment()   # the prices Collect uses: the deployed functions'
        self.overrides = json.loads(environment["DSLAB_PRICES"]) if environment.get("DSLAB_PRICES") else None
        self.prices = PriceTable.with_overrides(self.overrides)

    @property
    def base(self) -> str:
        return f"{RESULTS_PREFIX}/{self.execution}"

    def plan(self) -> dict[str, Any] | None:
        """The plan Plan stored (None until it has)."""
        if self._plan is None:
            try:
                self._plan = self.lab.lab.read_json(f"{self.base}/plan.json")
            except Exception:  # noqa: BLE001 - Plan has not written it yet
                return None
        return self._plan

    def record(self, name: str, status: str) -> None:
        plan = self.plan()
        job = next((j for j in plan["jobs"] if j["name"] == name), None) if plan else None
        if job is None or name in self.records:
            return
        lab = self.lab.lab
        self.records[name] = job_record(lab.client("s3"), lab.client("sagemaker"), lab.bucket, self.base, plan, job,
                                        {"status": status, "name": name}, self.prices)
        self.write(IN_PROGRESS)

    def sweep(self) -> None:
        """Every job that has ended and has no record yet (an interrupt comes between two looks)."""
        sagemaker = self.lab.lab.client("sagemaker")
        try:
            summaries = sagemaker.list_training_jobs(MaxResults=100)["TrainingJobSummaries"]
        except ClientError:
            return   # the stand-in refused the listing: the report holds the jobs recorded as they ended
        for summary in summaries:
            if summary["TrainingJobName"] not in self.records and summary["TrainingJobStatus"] in ENDED:
                self.record(summary["TrainingJobName"], summary["TrainingJobStatus"])

    def results(self, state: str) -> dict[str, Any]:
        """results.json of what finished, kept jobs included, in the plan's order, marked partial."""
        plan = self.plan()
        mine = {**self.kept, **self.records}
        records = [mine[j["name"]] for j in plan["jobs"] if j["name"] in mine]
        results = results_document(plan, records, self.prices, self.overrides)
        to_run = sum(1 for j in plan["jobs"] if not j.get("skip_reason") or j.get("kept"))
        results["partial"] = {"done": len(records), "total": to_run, "reason": state}
        results["local_run"] = self.local_run
        if self.kept:
            results["resumed"] = {"kept": len(self.kept), "ran": len(self.records), "attempt": self.attempt}
        return results

    def write(self, state: str) -> None:
        out = self.lab.out
        out.mkdir(parents=True, exist_ok=True)
        partial = out / "results.json.partial"
        partial.write_text(json.dumps(self.results(state), indent=2, default=str))
        os.replace(partial, out / "results.json")   # never a torn results.json, whenever the run stops


def check_checkpoints_fit(experiment: Experiment, cache: Path, flag: str | None = None) -> None:
    """A checkpoint trial's jobs write every checkpoint of every host on this machine (and the sync targets a second
    copy into the stand-in's S3): more than the disk under ``cache`` has free is refused before anything runs, naming
    the scale that shrinks them (``flag``: the CLI's --scale, else the trial's workload.scale)."""
    from ..core.workloads.checkpoint import GIB
    from ..core.modes import SYNC_TARGETS
    free = shutil.disk_usage(cache if cache.exists() else cache.parent).free
    for index, trial in enumerate(experiment.trials):
        if trial.checkpoint is None:
            continue
        plan = trial.checkpoint.plan(trial)
        copies = 2 if any(t in SYNC_TARGETS for t in trial.checkpoint.targets) else 1
        needed = plan.bytes * trial.checkpoint.workload.writes * copies
        if needed > free:
            scale = trial.checkpoint.workload.scale * free / needed / 2
            raise ConfigError(flag or f"trials[{index}].workload.scale", f"trial {trial.name} writes {needed / GIB:,.1f} GiB "
                              f"of checkpoints on this machine ({trial.checkpoint.workload.writes} x "
                              f"{plan.bytes / GIB:,.2f} GiB{', and the sync keeps a copy in the stand-in' if copies > 1 else ''}) "
                              f"and {cache} has {free / GIB:,.1f} GiB free", f"a scale of at most {scale:.2g}, or fewer writes")


# A DLIO workload run locally: one job at a time unless the experiment asks for more (as experiments/local.yaml
# does): jobs side by side share this machine's cores, and a workload's figures (AU against its target) then move
# with the neighbours' load from run to run.
LOCAL_WORKLOAD_DEFAULTS = {"max_concurrency": 1}


def run_local(experiment_path: Path | None, out: Path, cache: Path | None = None, say: Callable[[str], None] = print,
              fsx: bool = True, live_progress: bool | None = False, assembly: Path | None = None,
              fresh: bool = False, repeats: int | None = None, workload: Path | None = None,
              scale: float | None = None, overrides: dict | None = None, redeploy: bool = False) -> LocalRun:
    """The lab, offline. ``repeats`` replaces the experiment's; ``fresh`` starts over where --out holds an
    interrupted run (which is otherwise resumed: see prepare_out). ``workload`` (a DLIO file, at ``scale``) is
    added to the experiment, or without one is the experiment (experiment_file.load_experiment). ``redeploy``: run
    `cdk deploy` even where the last run's deployment of the same templates is saved."""
    from ..emulator import patches
    patches.share_sdk_loader()   # the experiment's checks read SageMaker's model: parsed once, with the stand-in's
    path = experiment_path or (None if workload else DEFAULT_EXPERIMENT)
    experiment = load_experiment(path, repeats=repeats, workload=workload, scale=scale, overrides=overrides,
                                 workload_defaults=LOCAL_WORKLOAD_DEFAULTS)
    path = path or workload
    from ..core.workloads.dlio import ignored_lines
    for line in ignored_lines(t.workload for t in experiment.trials):   # the DLIO fields not used, one line each
        say(line)
    check_job_count(experiment, "--repeats" if repeats else "repeats")
    for i, dataset in enumerate(experiment.datasets):
        if not dataset.generate:
            raise ConfigError(f"{path}: datasets[{i}].generate", f"dataset '{dataset.name}' has no generate recipe; "
                              "the local lab builds its datasets itself",
                              "generate: {images: N, classes: K, seed: S}")
    if out.exists() and not out.is_dir():
        raise ConfigError("--out", f"{out} exists and is not a folder")
    resume = resume_of(out, experiment, fresh)
    cache = cache or REPO / ".lab-cache"
    packaged = user_code.package(experiment, path.resolve().parent, cache / "build" / "user-code")
    started = time.monotonic()
    beside = not any(trial.instance_count > 1 for trial in experiment.trials)
    if not beside:
        # The datasets are built (cached) and counted before the stand-in starts, so that a trial with more
        # instances than a dataset has objects is refused before anything runs (Plan refuses it too).
        prepared = {dataset.name: prepare_dataset(dataset, cache, say) for dataset in experiment.datasets}
        check_every_host_gets_data(experiment, {name: dataset_tools.stats(str(folder))["files"]
                                                for name, folder in prepared.items()})
    cache.mkdir(parents=True, exist_ok=True)   # the disk it is on is asked how much room it has
    check_checkpoints_fit(experiment, cache, "--scale" if workload is not None else None)
    preparing = time.monotonic() - started
    aside = prepare_out(out, resume, experiment, fresh, say)   # every check passed: only now is anything moved
    # One instance per job: no object count can refuse a trial, so the datasets are built beside the set-up.
    datasets = DatasetsBeside(experiment.datasets, cache, say) if beside else None
    try:
        with LocalLab(experiment, out, cache, say=say, fsx=fsx, user_code_packages=packaged,
                      live_progress=live_progress, assembly=assembly, resume=resume, redeploy=redeploy,
                      datasets=datasets) as lab:
            lab.upload()
            run = lab.run()
    except BaseException as stop:   # Ctrl-C, SIGTERM or a failure: nothing the earlier run had is lost
        if datasets is not None and not isinstance(stop, KeyboardInterrupt):
            datasets.wait()   # a failure returns to a caller that may run again: nothing still writes the cache
        finish_out(out, aside, False, say)
        raise
    finish_out(out, aside, True, say)
    run.timings["data"] = run.timings.get("data", 0.0) + preparing
    run.timings["total"] = time.monotonic() - started
    return run


__all__ = ["run_local", "LocalLab", "LocalRun", "cached_assembly", "prepare_dataset", "prepare_out", "resume_of", "DEFAULT_EXPERIMENT",
           "Interrupted", "Terminated", "Resume", "WorkflowFailed"]
