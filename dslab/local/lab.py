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
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..inputs import datasets as dataset_tools
from ..inputs import user_code
from ..core.errors import ConfigError
from ..core.experiment import JPG, Experiment, expand
from ..core.progress import RunProgress
from ..core.requests import check_every_host_gets_data
from ..emulator.lab import EmulatedLab
from ..inputs.experiment_file import load_experiment
from ..progress_view import ProgressView
from ..report import write_report
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


@dataclass
class LocalRun:
    results: dict[str, Any]
    paths: dict[str, Path]
    execution_status: str
    execution_error: str | None
    timings: dict[str, float] = field(default_factory=dict)


class LocalLab:
    """The embedded lab: a context manager that owns the stand-in, the mounts and the job processes."""

    def __init__(self, experiment: Experiment, out: Path, cache: Path, *, say: Callable[[str], None] = print,
                 time_scale: float = 0.01, fsx: bool = True, user_code_packages: list | None = None,
                 live_progress: bool | None = False, assembly: Path | None = None):
        self.experiment, self.out, self.cache, self.say = experiment, out, cache, say
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

    # ---- set-up ------------------------------------------------------------------------------
    def __enter__(self) -> "LocalLab":
        try:
            return self._enter()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def _enter(self) -> "LocalLab":
        t0 = time.monotonic()
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
            # The user's deploy path: the pinned CDK CLI bootstraps the stand-in's account and deploys the
            # stacks into its CloudFormation (synthesizing first unless the sources are unchanged).
            workdir, assembly, synthesized = cached_assembly(self.cache, self.say)
            self.lab = EmulatedLab(assembly, via_cli=True, cli_workdir=workdir, **common)
            self.lab.__enter__()
            synthesized()
        self.mounts = S3Mounts(self.lab.endpoint, self.work / "mounts")
        if self.with_fsx and fuse_available():
            # FSx linked to the bucket: one mount for the lab's life, lazily filled cache.
            self.fsx_root = self.mounts.mount(self.lab.bucket, "", "fsx", cache_dir=self.work / "fsx-cache")
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

    def _fsx_down(self) -> None:
        if self.fsx_root is not None and self.mounts is not None:
            self.mounts.unmount(self.fsx_root)
            self.fsx_root = None

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
            local = prepare_dataset(dataset, self.cache, self.say)
            self.local_datasets[dataset.name] = local
            result = dataset_tools.upload(local, f"s3://{self.lab.bucket}/datasets/{dataset.prefix}/", s3_client=s3)
            self.say(f"data: {dataset.name}: {result['files']} files uploaded to the stand-in's S3")
        self.timings["data"] = time.monotonic() - t0

    # ---- jobs -----------------------------------------------------------------------------------
    def _execute(self, request: dict, update: Callable[[dict], None]) -> dict:
        storage = LabStorage(self.lab.client("s3"), self.mounts, self.work / "efs", self.fsx_root,
                             self.lab.fsx_id, self.lab.efs_id,
                             fsx_problem=None if fuse_available() else FUSE_HELP)
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
        execution_arn = self.lab.start(self.experiment.document)
        run_progress = RunProgress(len(expand(self.experiment)), self.experiment.max_concurrency, started=self._started)
        plan_key = f"results/{execution_arn.rsplit(':', 1)[-1]}/plan.json"
        planned = {"read": False}

        def progress() -> None:
            if not planned["read"]:
                try:  # how many jobs Plan skipped (FSx down, say): they never start
                    run_progress.skipped = sum(1 for j in self.lab.read_json(plan_key)["jobs"] if j.get("skip_reason"))
                    planned["read"] = True
                except Exception:  # noqa: BLE001 - Plan has not written it yet
                    pass
            # Every call is a request to the stand-in, which the FUSE-backed jobs need too: describe
            # only the jobs that have not ended.
            sagemaker = self.lab.client("sagemaker")
            for summary in sagemaker.list_training_jobs(MaxResults=100)["TrainingJobSummaries"]:
                name = summary["TrainingJobName"]
                known = run_progress.jobs.get(name)
                if known is not None and known.status in ("Completed", "Failed", "Stopped"):
                    continue
                state = sagemaker.describe_training_job(TrainingJobName=name)
                view.observe(name, state["TrainingJobStatus"], state.get("SecondaryStatus", ""))
            view.tick()

        with ProgressView(run_progress, live=self.live_progress, say=self.say) as view:
            execution = self.lab.wait(execution_arn, timeout=3600, poll=2.0, on_poll=progress)
            progress()
        self.say(f"jobs: {run_progress.summary(time.monotonic())}")
        self.timings["jobs"] = time.monotonic() - t0
        t1 = time.monotonic()
        try:
            results = self.lab.results(execution)
        except Exception:
            raise RuntimeError(f"the workflow ended {execution.status} without results: {execution.error}: {execution.cause}") from None
        paths = write_report(results, self.out)
        self.timings["reporting"] = time.monotonic() - t1
        return LocalRun(results, paths, execution.status, execution.error, dict(self.timings))


def run_local(experiment_path: Path | None, out: Path, cache: Path | None = None, say: Callable[[str], None] = print,
              fsx: bool = True, live_progress: bool | None = False, assembly: Path | None = None) -> LocalRun:
    path = experiment_path or DEFAULT_EXPERIMENT
    experiment = load_experiment(path)
    for i, dataset in enumerate(experiment.datasets):
        if not dataset.generate:
            raise ConfigError(f"{path}: datasets[{i}].generate", f"dataset '{dataset.name}' has no generate recipe; "
                              "the local lab builds its datasets itself",
                              "generate: {images: N, classes: K, seed: S}")
    if out.exists() and not out.is_dir():
        raise ConfigError("--out", f"{out} exists and is not a folder")
    cache = cache or REPO / ".lab-cache"
    packaged = user_code.package(experiment, path.resolve().parent, cache / "build" / "user-code")
    started = time.monotonic()
    # The datasets are built (cached) and counted before the stand-in starts, so that a trial with more
    # instances than a dataset has objects is refused before anything runs (Plan refuses it too).
    prepared = {dataset.name: prepare_dataset(dataset, cache, say) for dataset in experiment.datasets}
    check_every_host_gets_data(experiment, {name: dataset_tools.stats(str(folder))["files"]
                                            for name, folder in prepared.items()})
    preparing = time.monotonic() - started
    with LocalLab(experiment, out, cache, say=say, fsx=fsx, user_code_packages=packaged, live_progress=live_progress,
                  assembly=assembly) as lab:
        lab.upload()
        run = lab.run()
    run.timings["data"] = run.timings.get("data", 0.0) + preparing
    run.timings["total"] = time.monotonic() - started
    return run


__all__ = ["run_local", "LocalLab", "LocalRun", "cached_assembly", "prepare_dataset", "DEFAULT_EXPERIMENT"]
