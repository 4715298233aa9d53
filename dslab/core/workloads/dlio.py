"""DLIO workload files, the format MLPerf Storage runs its training workloads in, read as they are published.

A workload file (argonne-lcf/dlio_benchmark, dlio_benchmark/configs/workload/*.yaml; mlcommons/storage vendors
them) describes a dataset and an emulated accelerator. The lab takes from it what shapes I/O and compute:

- the dataset: ``dataset.num_files_train`` files of ``num_samples_per_file`` samples, each of the record length
  (mean and stdev) in ``format``: the dataset's files, bytes and samples (the estimate's ``DatasetShape``) and
  the recipe the lab generates it from;
- the compute, as DLIO emulates it: each accelerator takes ``reader.batch_size`` samples every
  ``train.computation_time`` seconds (MLPerf Storage's Submission_guidelines.md: the benchmark "replaces the
  training on the accelerator for a single batch of data with a sleep() call"), for ``train.epochs`` epochs;
- ``reader.read_threads`` readers per accelerator (the ``data_loader``'s workers: PyTorch's DataLoader
  workers, tf.data's parallel reads, DALI's threads): the readers that overlap per-file latency;
- ``metric.au``: the AU the workload must keep (DLIO's default 0.90). AU is what DLIO computes and MLPerf Storage
  reports (dlio_benchmark/utils/statscounter.py at 03b5ed329fe8): per epoch ``au = total_compute_time /
  total_time``, the first step left out (compute_metrics_train, lines 340-349), averaged over the ranks per epoch
  and then over the epochs, ``train_au_mean_percentage = np.mean(train_au)``, which meets the target when it is
  ``>= au * 100`` (end_run, lines 148-156). The estimate (estimate.py), the training script and its helper
  (training/dslab_report.py dlio_au) and a cluster's figures (job_metrics.py) all compute it so.

Everything else (checkpointing, evaluation, storage options, profiling, output's folders) is ignored, each said in one
line. A checkpointing workload (``workflow: {train: False, checkpoint: True}``, MLPerf Storage's llama3 files) is
core/workloads/checkpoint.py's: ``parse_any_workload`` hands it there. Only key spellings some DLIO release reads are read (its LoadConfig, dlio_benchmark/utils/config.py):
``record_length``/``record_length_stdev`` (up to v2.0.0) or ``record_length_bytes``/``record_length_bytes_stdev``
(v2.0.1 on), ``model: name`` or ``model: {name: ...}``, ``data_reader`` or ``reader``, ``output.metric.exclude_start_steps``
and ``exclude_end_steps`` (v2.0.1 on: the lab's AU honours their defaults, 1 and 0, and refuses others). Spellings found in
published files that no release reads (``record_length_std``, ``train.epoch``) are said and left at DLIO's default, as
DLIO left them. Where a field is absent, DLIO's own default applies (ConfigArguments) and the workload says so. A full-size
workload's file count is said against what MLPerf Storage's datasize step gives the cluster (Workload.mlperf_size). No I/O here:
the CLI reads the file.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from ..facts.limits import MAX_EPOCHS
from ..modes import JPG, NPZ, TFRECORD
from ..shape import DatasetShape
from .sections import check_sections, closest_key, read_number, read_one_of, read_section

# DLIO's formats the lab generates, uploads and its training script reads, as the lab's dataset format.
# DLIO's formats the lab generates, uploads and its training script reads, as the lab's dataset format.
LAB_FORMATS = {"npz": NPZ, "tfrecord": TFRECORD, "jpeg": JPG}


# Loaders that read the files with read_threads workers per accelerator (DLIO's DataLoaderType). "synthetic"
# makes data in memory (no storage read: nothing to measure) and "custom" names a class the lab cannot know.
DATA_LOADERS = ("pytorch", "tensorflow", "dali", "native_dali")


# DLIO's defaults (dlio_benchmark/utils/config.py ConfigArguments, at e1919d7) for the fields the lab uses.
DLIO_DEFAULTS = {"num_samples_per_file": 1, "record_length": 64 * 1024, "record_length_stdev": 0,
                 "format": "tfrecord", "batch_size": 1, "read_threads": 1, "data_loader": "tensorflow",
                 "epochs": 1, "au": 0.90}


# The accelerator each published workload file emulates: (model, accelerator) -> (batch_size, computation_time), as
# the files vendored under dslab/contracts/dlio/ give them (tests/test_dlio.py holds this table equal to the files).
# MLPerf Storage publishes an A100 and an H100 file per training workload (mlcommons/storage configs/dlio/workload/);
# DLIO kept a V100 ResNet-50 file until 6027937. A workload run on another accelerator takes that accelerator's own
# timing where a file gives one (Workload.on_accelerator), and says so.
MLPERF_TIMINGS: dict[tuple[str, str], tuple[int, float, str]] = {
    ("resnet50", "v100"): (64, 0.195, "resnet50_v100@6027937.yaml"),
    ("resnet50", "a100"): (400, 0.435, "resnet50_a100.yaml"),
    ("resnet50", "h100"): (400, 0.224, "resnet50_h100.yaml"),
    ("unet3d", "a100"): (7, 0.636, "unet3d_a100.yaml"),
    ("unet3d", "h100"): (7, 0.323, "unet3d_h100.yaml"),
    ("cosmoflow", "a100"): (1, 0.00551, "cosmoflow_a100.yaml"),
    ("cosmoflow", "h100"): (1, 0.00350, "cosmoflow_h100.yaml"),
}
ACCELERATOR_NAMES = {"v100": "V100", "a100": "A100", "h100": "H100"}


# MLPerf Storage's dataset rules (Submission_guidelines.md, "Minimum dataset size": HOST_MEMORY_MULTIPLIER = 5,
# num_steps_per_epoch "is a minimum of 500"); Workload.mlperf_files computes them as mlpstorage's datasize step does.
MLPERF_MEMORY_MULTIPLIER = 5
MLPERF_MIN_STEPS = 500




# Keys of the sections the lab reads: DLIO's LoadConfig at e1919d7 and older spellings found in published files.
# A key outside these is refused with the closest (a typo in a used field must not fall back to a default).
DATASET_KEYS = {
    "num_files_train", "num_samples_per_file", "record_length_bytes", "record_length", "record_length_bytes_stdev",
    "record_length_stdev", "record_length_std", "record_length_bytes_resize", "record_length_resize", "format",
    "data_folder", "num_files_eval", "eval_num_samples_per_file", "num_subfolders_train", "num_subfolders_eval",
    "file_prefix", "keep_files", "generation_buffer_size", "enable_chunking", "chunk_size", "compression",
    "compression_level", "record_element_bytes", "record_element_type", "record_dims", "hdf5", "file_access",
    "daos_pool", "daos_cont"}


READER_KEYS = {
    "batch_size", "read_threads", "data_loader", "batch_size_eval", "computation_threads", "dont_use_mmap",
    "reader_classname", "multiprocessing_context", "data_loader_classname", "data_loader_sampler", "prefetch_size",
    "file_shuffle", "file_access", "shuffle_size", "sample_shuffle", "read_type", "transfer_size", "odirect",
    "preprocess_time", "preprocess_time_stdev", "pin_memory", "transformed_record_dims",
    "transformed_record_element_type", "eval_every_step", "eval_num_samples_per_file", "steps_between_evals"}


TRAIN_KEYS = {"computation_time", "computation_time_stdev", "epochs", "epoch", "seed_change_epoch", "seed",
              "total_training_steps", "total_eval_steps"}


METRIC_KEYS = {"au"}


# Aliases, newest spelling first: each names one field; a file giving two spellings of one field is refused.
RECORD_LENGTH = ("record_length_bytes", "record_length")
RECORD_STDEV = ("record_length_bytes_stdev", "record_length_stdev")
EPOCHS = ("epochs",)


# Which DLIO releases read each spelling (LoadConfig, dlio_benchmark/utils/config.py): record_length and
# record_length_stdev up to v2.0.0; record_length_bytes and record_length_bytes_stdev from v2.0.1 (commit 67f0fbf), with
# no alias for the old names.
READ_BY = {"record_length": "DLIO up to v2.0.0", "record_length_stdev": "DLIO up to v2.0.0",
           "record_length_bytes": "DLIO v2.0.1 on", "record_length_bytes_stdev": "DLIO v2.0.1 on"}


# Spellings in published files that no DLIO release reads (LoadConfig at 6027937, d22548d, v2.0.0, v2.0.1 and e1919d7
# reads record_length_stdev / record_length_bytes_stdev and train.epochs): DLIO ran such a file on its default, and so
# does the lab, saying so.
NEVER_READ = {"dataset.record_length_std": ("record_length_stdev (record_length_bytes_stdev from v2.0.1)", "0 bytes"),
              "train.epoch": ("train.epochs", "1 epoch")}


# output.metric (DLIO v2.0.1 on: statscounter.py leaves out exclude_start_steps steps at the start of an epoch and
# exclude_end_steps at its end when it computes AU; defaults 1 and 0). The lab computes AU with the first step left out
# (training/dslab_report.py, estimate.py): those defaults are honoured, other values refused.
OUTPUT_METRIC_KEYS = {"exclude_start_steps": 1, "exclude_end_steps": 0}


# Why a field the lab does not use changes nothing it measures (one line each).
IGNORED_WHY = {
    "checkpoint": "checkpoint writes and reads; the lab measures reading the training data",
    "evaluation": "evaluation passes; the lab measures the training epochs",
    "storage": "DLIO's storage back end and its options; the lab reads from each SageMaker source instead",
    "profiling": "DLIO's profiler",
    "output": "DLIO's output folder and logs; the lab writes its own report",
    "logging": "DLIO's logging",
    "framework": "the framework DLIO imports; the lab's script reads with the standard library and numpy",
    "transformer": "a model's shape for checkpoint sizes",
    "hydra": "hydra's settings",
    "model": "the model's size and shape, which set checkpoint sizes; its name names the dataset",
    "workflow": "DLIO's phases; the lab generates the data itself and runs training",
    "dataset.record_length_bytes_resize": "the size a sample is resized to after it is read: no I/O",
    "dataset.record_length_resize": "the size a sample is resized to after it is read: no I/O",
    "dataset.data_folder": "where DLIO keeps the data; the lab's dataset lives under its bucket's datasets/ prefix",
    "dataset.num_files_eval": "evaluation files",
    "dataset.num_subfolders_eval": "evaluation files",
    "dataset.eval_num_samples_per_file": "evaluation files",
    "reader.batch_size_eval": "evaluation batches",
    "reader.computation_threads": "threads of the emulated compute, which sleeps",
    "reader.file_shuffle": "the lab's script shuffles the file order every epoch",
    "reader.sample_shuffle": "the lab's script shuffles samples through a buffer",
    "reader.shuffle_size": "the lab's script shuffles samples through a buffer",
    "reader.dont_use_mmap": "the lab's script reads files (no mmap)",
    "reader.transfer_size": "the lab's script reads whole objects or 8 MiB ranges",
    "reader.prefetch_size": "the lab's script prefetches four batches",
    "train.seed_change_epoch": "the lab's script reseeds its shuffle every epoch",
    "train.seed": "the lab's generator is seeded with 0",
    "train.computation_time_stdev": "the emulated step takes computation_time exactly (the mean)",
}


@dataclass(frozen=True)
class Workload:
    """A DLIO workload as the lab runs it, at ``scale`` (a fraction of the files, record sizes kept)."""
    name: str                    # model.name: names the dataset
    source: str                  # the file as given
    format: str                  # DLIO's format: npz, tfrecord, jpeg
    num_files: int               # num_files_train, unscaled
    samples_per_file: int
    record_bytes: float          # mean record length
    record_bytes_stdev: float
    batch_size: int              # per accelerator
    computation_time: float      # seconds per batch per accelerator
    epochs: int
    read_threads: int            # per accelerator
    data_loader: str
    au: float                    # metric.au, a fraction
    used: tuple[str, ...] = ()   # "dataset.num_files_train: 168" for every field read (defaults said so)
    ignored: tuple[str, ...] = ()
    scale: float = 1.0
    sha256: str | None = None    # the file's digest, where the CLI read it
    document: str = field(default="{}", repr=False)   # the file's content as JSON, in its order

    @property
    def lab_format(self) -> str:
        return LAB_FORMATS[self.format]

    @property
    def rate(self) -> float:
        """Samples per second one emulated accelerator consumes."""
        return self.batch_size / self.computation_time

    @property
    def au_percent(self) -> float:
        return 100.0 * self.au

    @property
    def files(self) -> int:
        """The files at this scale: a fraction of num_files_train, at least one."""
        return max(1, round(self.num_files * self.scale))

    @property
    def samples(self) -> int:
        return self.files * self.samples_per_file

    @property
    def bytes(self) -> int:
        """The dataset's bytes as generated: its records; for jpeg, the JPEG files DLIO's generator writes (one
        image per file of random pixels, which JPEG compresses to ~56% of the record length: jpeg_file_bytes)."""
        if self.format == "jpeg":
            return int(round(self.files * jpeg_file_bytes(round(self.record_bytes), round(self.record_bytes_stdev))))
        return int(round(self.samples * self.record_bytes))

    @property
    def accelerator(self) -> str | None:
        """The accelerator the file's timing emulates ("v100", "a100", "h100"): named by the file (``*_h100.yaml``), or
        found by its timing among MLPerf's own; None where neither says."""
        stem = re.split(r"[\\/]", self.source)[-1].rsplit(".", 1)[0].split("@")[0].lower()
        named = next((acc for acc in ACCELERATOR_NAMES if re.search(rf"(^|[_-]){acc}($|[_-])", stem)), None)
        if named:
            return named
        return next((acc for (model, acc), (batch, seconds, _) in MLPERF_TIMINGS.items()
                     if model == self.name and batch == self.batch_size and abs(seconds - self.computation_time) < 1e-9),
                    None)

    def on_accelerator(self, accelerator: str | None) -> tuple["Workload", str | None]:
        """The workload run on ``accelerator`` (the instance's: "v100", "a100", "h100", or None for another kind), and
        the sentence that says what was done: MLPerf's own timing of that accelerator where a published file gives one,
        else the file's timing kept, the mismatch named. (None: nothing to say.)"""
        own = self.accelerator
        if own is None or own == accelerator:
            return self, None
        from ..facts.compute import INSTANCE_OF_ACCELERATOR
        target = ACCELERATOR_NAMES.get(accelerator or "", "another accelerator")
        its_own = f"--instance {INSTANCE_OF_ACCELERATOR[own]} runs it on {ACCELERATOR_NAMES[own]}"
        timing = MLPERF_TIMINGS.get((self.name, accelerator or ""))
        if timing is not None:
            batch, seconds, source = timing
            return (replace(self, batch_size=batch, computation_time=seconds),
                    f"{self.source} emulates {ACCELERATOR_NAMES[own]} and the instance has {target}: MLPerf's own "
                    f"{target} timing of {self.name} is used ({source}: batch {batch} every {seconds:g} s); {its_own}")
        return self, (f"{self.source} emulates {ACCELERATOR_NAMES[own]}, but the instance has {target} and no published "
                      f"{self.name} file emulates {target}: its {ACCELERATOR_NAMES[own]} timing is used as given; {its_own}")

    def mlperf_files(self, hosts: int, host_memory_gib: float, accelerators: int) -> int:
        """The training files MLPerf Storage's datasize step asks for ``hosts`` of ``host_memory_gib`` each running
        ``accelerators`` in all: "the dataset size must be at least 5x larger than the sum of memory across all of the
        MLPerf Storage nodes" and at least 500 steps an epoch (Submission_guidelines.md; mlpstorage's rules.py
        calculate_training_data_size: max((5 x memory) // file size, (500 x accelerators x batch) // samples per file))."""
        file_bytes = self.samples_per_file * self.record_bytes
        by_memory = int(MLPERF_MEMORY_MULTIPLIER * hosts * host_memory_gib * 2**30 // file_bytes)
        by_steps = int(MLPERF_MIN_STEPS * accelerators * self.batch_size // self.samples_per_file)
        return max(by_memory, by_steps)

    def mlperf_size(self, hosts: int, host_memory_gib: float, accelerators: int, field: str = "--instance-count") -> str | None:
        """The file count the figures use against MLPerf Storage's for this cluster (mlperf_files), said in one sentence
        (None where the workload already meets it). A workload that would train no step an epoch measures nothing (DLIO
        trains 0 steps): refused, naming the files MLPerf asks. The lab never changes the file's count itself: the
        question stays the user's, and a scaled workload (a local run's fraction) is said as such."""
        need = self.mlperf_files(hosts, host_memory_gib, accelerators)
        if self.num_files >= need:
            return None
        steps = self.samples // max(1, accelerators * self.batch_size)
        mlperf = (f"MLPerf Storage runs {self.name} with {need:,} files on {hosts:,} host(s) of {host_memory_gib:,g} GiB "
                  f"({accelerators:,} accelerators): at least 5 x their memory and {MLPERF_MIN_STEPS} steps an epoch")
        if steps < 1:
            raise ConfigError(field, f"{self.source}'s {self.files:,} files of {self.samples_per_file:,} sample(s) give "
                              f"0 steps an epoch on {accelerators:,} accelerators of batch {self.batch_size}: DLIO would "
                              f"train nothing; {mlperf}",
                              "fewer instances or accelerators, or a workload with num_files_train of at least "
                              f"{need:,} (a copy of the file)")
        scaled = f" (--scale {self.scale:g}: a fraction, for a local run)" if self.scale != 1 else ""
        return (f"these figures use {self.source}'s {self.files:,} files{scaled}, {steps:,} steps an epoch: {mlperf}, "
                "so they are not an MLPerf-valid run")

    def readers(self, accelerators: int) -> int:
        """Files in flight on one instance: read_threads per accelerator (0: DLIO reads in the training process)."""
        return max(1, self.read_threads) * max(1, accelerators)

    def shape(self) -> DatasetShape:
        return DatasetShape(files=self.files, bytes=self.bytes, samples=self.samples)

    def with_scale(self, scale: float, field_name: str = "--scale") -> "Workload":
        return replace(self, scale=check_scale(scale, field_name))

    def recipe(self) -> dict[str, Any]:
        """What `dslab dataset generate` makes for it (inputs/datasets.py generate_dlio), seeded."""
        return {"files": self.files, "samples_per_file": self.samples_per_file,
                "record_bytes": int(round(self.record_bytes)), "record_bytes_stdev": int(round(self.record_bytes_stdev)),
                "seed": 0}

    @property
    def dataset_name(self) -> str:
        """A dataset name per shape: the same files make the same name (an A100 and an H100 file share it)."""
        digest = hashlib.sha256(json.dumps([self.format, self.recipe()], sort_keys=True).encode()).hexdigest()[:6]
        slug = re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")[:20].strip("-") or "dlio"
        return f"{slug}-n{self.files}-{digest}"

    def dataset(self) -> dict[str, Any]:
        """The workload's dataset as an experiment declares one (parsing.py reads it like any other)."""
        return {"name": self.dataset_name, "format": self.lab_format, "files": self.files, "bytes": self.bytes,
                "generate": self.recipe()}

    def entry(self) -> dict[str, Any]:
        """The experiment's `workload:` as run: the file's name, scale, digest and content (so the record alone
        reproduces the run, and the workflow needs no file)."""
        out = {"file": self.source, "scale": self.scale, "dlio": json.loads(self.document)}
        return {**out, "sha256": self.sha256} if self.sha256 else out

    def describe(self) -> str:
        mb, sd = self.record_bytes / 1e6, self.record_bytes_stdev / 1e6
        scaled = (f"; scale {self.scale:g}: {self.files:,} of its {self.num_files:,} files"
                  if self.scale != 1 else "")
        if self.format == "jpeg":   # what DLIO's generator writes (jpeg_file_bytes), and so the lab's
            scaled = f"; DLIO's JPEGs of random pixels, ~{self.bytes / self.files / 1e6:,.3f} MB a file{scaled}"
        return (f"workload {self.name} ({self.source}): {self.num_files:,} {self.format} files x {self.samples_per_file:,} "
                f"sample(s) of {mb:,.3f} MB (stdev {sd:,.3f} MB){scaled}; each accelerator takes a batch of "
                f"{self.batch_size} every {self.computation_time:g} s ({self.rate:,.1f} samples/s); {self.epochs} epoch(s); "
                f"{self.read_threads} read thread(s) per accelerator ({self.data_loader}); AU target "
                f"{self.au_percent:g}% (metric.au)")


# DLIO's jpeg generator (dlio_benchmark/data_generator/jpeg_generator.py at 03b5ed329fe8) writes one image per file,
# whatever num_samples_per_file says (its reader serves that image num_samples_per_file times), of dim1 x dim2
# pixels each drawn from N(int(sqrt(record_length)), record_length_stdev / 2 / sqrt(record_length)) (config.py
# derive_configurations, data_generator.py get_dimension), random grey values saved by Pillow as JPEG at its
# defaults (quality 75). JPEG compresses noise to ~0.555 bytes a pixel; libjpeg pads each side to a multiple of 8
# with copies of the edge, which compress better. Fitted on Pillow's encoder (tests/test_dlio.py checks the fit
# against the files `dslab dataset generate` writes): within 1% from 100,000 pixels, 5% from 10,000.
JPEG_HEADER_BYTES = 554.0
JPEG_BYTES_PER_PIXEL = 0.5552
JPEG_BYTES_PER_PADDING_PIXEL = 0.303


def jpeg_dimension(record_length: float, record_length_stdev: float) -> tuple[int, float]:
    """The mean and stdev of a DLIO JPEG's side, as DLIO derives them from the record length and its stdev."""
    return int(math.sqrt(record_length)), record_length_stdev / 2.0 / math.sqrt(record_length)


def jpeg_file_bytes(record_length: float, record_length_stdev: float = 0.0) -> float:
    """The mean size of the JPEG files DLIO's generator writes for this record length (see JPEG_HEADER_BYTES)."""
    mean, stdev = jpeg_dimension(record_length, record_length_stdev)

    def padded(d: float) -> float:
        return math.ceil(d / 8) * 8
    if stdev <= 0:
        side, side_padded = float(max(mean, 1)), float(padded(max(mean, 1)))
    elif stdev * 16 <= 200_000:
        # A side is max(int(x), 1) of x ~ N(mean, stdev): sum over the values it takes, within 8 stdev.
        def cdf(x: float) -> float:
            return 0.5 * (1 + math.erf((x - mean) / (stdev * math.sqrt(2))))
        below = cdf(2)   # int() truncates: every x under 2 gives 1
        side, side_padded = below * 1.0, below * 8.0
        for d in range(max(2, int(mean - 8 * stdev)), int(mean + 8 * stdev) + 2):
            p = cdf(d + 1) - cdf(d)
            side += p * d
            side_padded += p * padded(d)
    else:   # sides of hundreds of thousands of pixels: truncation (-0.5) and padding (+3.5) on average
        side, side_padded = max(mean - 0.5, 1.0), max(mean - 0.5, 1.0) + 3.5
    pixels, padded_pixels = side * side, side_padded * side_padded   # the two sides are drawn independently
    return JPEG_HEADER_BYTES + JPEG_BYTES_PER_PIXEL * pixels + JPEG_BYTES_PER_PADDING_PIXEL * (padded_pixels - pixels)


def ignored_lines(workloads) -> list[str]:
    """``ignored: <field>: <why>``, one line per field a workload names and the lab does not use, as every command
    that takes a workload prints them (size, estimate, recommend, plan, run, local, dataset generate) and the report
    lists them. ``workloads``: Workloads (or None, a trial without one), each said once; where an experiment runs
    several, each line names its file."""
    distinct = list({(w.source, w.document): w for w in workloads if w is not None}.values())
    return [f"ignored{f' ({w.source})' if len(distinct) > 1 else ''}: {line}" for w in distinct for line in w.ignored]


def check_scale(scale: Any, field_name: str = "--scale") -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or not 0 < scale <= 1:
        raise ConfigError(field_name, f"{scale!r}: the fraction of the workload's files to generate and read",
                          "a number above 0 and at most 1 (record sizes are kept)")
    return float(scale)


def parse_workload(document: Any, source: str, where: str = "") -> Workload:
    """A DLIO workload document (the YAML file as loaded), validated; ConfigError names the key path."""
    check_sections(document, source, where, "dataset, reader and train")
    used: list[str] = []
    ignored: list[str] = []

    def note(path: str, value: Any, default: bool = False) -> None:
        used.append(f"{path}: {value}" + (" (not given: DLIO's default)" if default else ""))

    workflow = read_section(document, "workflow", None, where)
    if workflow.get("train") is False and workflow.get("checkpoint") is True:
        # A checkpointing workload (core/workloads/checkpoint.py reads it, refusing its typos): its size said, then refused
        # here, where the lab emulates training reads.
        from .checkpoint import GIB, parse_checkpoint_workload
        try:
            plan = parse_checkpoint_workload(document, source, where).plan()
            size = f" ({plan.full_bytes / GIB:,.1f} GiB per checkpoint on {plan.processes} processes by DLIO's formula)"
        except ConfigError as err:
            size = f" (and not a valid one: {err.field}: {err.problem})"
        raise ConfigError(f"{where}workflow.train", f"is False in {source}: a checkpointing workload, which trains "
                          f"nothing{size}, and this command emulates training reads",
                          "a workload with workflow.train: True (unet3d, resnet50, cosmoflow)")
    if workflow.get("train") is False:
        raise ConfigError(f"{where}workflow.train", f"is False in {source}: the workload trains nothing (a "
                          "checkpointing or data-generation workload), and the lab emulates training reads",
                          "a workload with workflow.train: True (unet3d, resnet50, cosmoflow)")
    model = document.get("model")
    name = model.get("name") if isinstance(model, dict) else model
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"{where}model.name", f"{name!r} is not a model name")
    name = name or "default"
    note("model.name", name, default=model is None)

    dataset = read_section(document, "dataset", DATASET_KEYS, where)
    if not dataset:
        raise ConfigError(f"{where}dataset", f"{source} has no dataset section", "num_files_train, format, record_length_bytes, ...")
    if "num_files_train" not in dataset:
        raise ConfigError(f"{where}dataset.num_files_train", f"missing in {source}: the workload's files are its dataset")
    files = read_number(dataset["num_files_train"], f"{where}dataset.num_files_train", 1, 10**9, whole=True)
    note("dataset.num_files_train", files)
    spf = read_number(dataset.get("num_samples_per_file", DLIO_DEFAULTS["num_samples_per_file"]),
                  f"{where}dataset.num_samples_per_file", 1, 10**9, whole=True)
    note("dataset.num_samples_per_file", spf, "num_samples_per_file" not in dataset)
    key, value = read_one_of(dataset, RECORD_LENGTH, f"{where}dataset")
    record = read_number(DLIO_DEFAULTS["record_length"] if key is None else value, f"{where}dataset.{key or RECORD_LENGTH[0]}",
                     1, 16 * 2**30)
    note(f"dataset.{key or RECORD_LENGTH[0]}", f"{record:,.0f} bytes" + (f" (read by {READ_BY[key]})" if key else ""),
         key is None)
    key, value = read_one_of(dataset, RECORD_STDEV, f"{where}dataset")
    stdev = read_number(0 if key is None else value, f"{where}dataset.{key or RECORD_STDEV[0]}", 0, 16 * 2**30)
    note(f"dataset.{key or RECORD_STDEV[0]}", f"{stdev:,.0f} bytes" + (f" (read by {READ_BY[key]})" if key else ""),
         key is None)
    if "record_dims" in dataset:
        raise ConfigError(f"{where}dataset.record_dims", "gives a record's shape, which the lab does not size",
                          "record_length_bytes (and record_length_bytes_stdev)")
    fmt = dataset.get("format", DLIO_DEFAULTS["format"])
    if fmt not in LAB_FORMATS:
        raise ConfigError(f"{where}dataset.format", f"{fmt!r}: the lab generates, uploads and reads only these DLIO "
                          "formats", list(LAB_FORMATS))
    note("dataset.format", fmt, "format" not in dataset)
    if fmt == "jpeg" and spf > 1:
        raise ConfigError(f"{where}dataset.num_samples_per_file", f"{spf} with format jpeg: DLIO's jpeg generator writes "
                          "one image per file whatever it says, and its reader serves that image as each of the file's "
                          "samples; the lab's script reads a JPEG as one sample, so it would train on 1/"
                          f"{spf} of the workload's samples", "num_samples_per_file: 1 with jpeg, or format npz or tfrecord")
    if files * spf * record > 10**16:
        raise ConfigError(f"{where}dataset.num_files_train", f"{files:,} files of {spf:,} x {record:g} bytes is past "
                          "10 PB: not a dataset a SageMaker job reads")

    reader_name = "data_reader" if "data_reader" in document and "reader" not in document else "reader"
    if "reader" in document and "data_reader" in document:
        raise ConfigError(f"{where}data_reader", "and reader are the same section (DLIO reads data_reader first); keep one")
    reader = read_section(document, reader_name, READER_KEYS, where)
    batch = read_number(reader.get("batch_size", DLIO_DEFAULTS["batch_size"]), f"{where}{reader_name}.batch_size", 1, 4096, whole=True)
    note(f"{reader_name}.batch_size", batch, "batch_size" not in reader)
    threads = read_number(reader.get("read_threads", DLIO_DEFAULTS["read_threads"]), f"{where}{reader_name}.read_threads",
                      0, 256, whole=True)
    note(f"{reader_name}.read_threads", threads, "read_threads" not in reader)
    loader = reader.get("data_loader")
    if loader is None:   # absent, or written empty (`data_loader:` in resnet50_tf.yaml at d22548d)
        loader = DLIO_DEFAULTS["data_loader"]
        note(f"{reader_name}.data_loader", loader, default=True)
    elif loader not in DATA_LOADERS:
        raise ConfigError(f"{where}{reader_name}.data_loader", f"{loader!r}: "
                          + ("a synthetic loader reads no storage" if loader == "synthetic" else
                             "the lab runs loaders that read the files with read_threads workers per accelerator"),
                          list(DATA_LOADERS))
    else:
        note(f"{reader_name}.data_loader", f"{loader} (read_threads readers per accelerator)")

    train = read_section(document, "train", TRAIN_KEYS, where)
    if "computation_time" not in train:
        raise ConfigError(f"{where}train.computation_time", f"missing in {source}: the seconds one accelerator takes "
                          "per batch (without it there is no compute, and no AU)")
    seconds = train["computation_time"]
    if isinstance(seconds, dict):   # DLIO takes {mean, stdev} too
        if "mean" not in seconds:
            raise ConfigError(f"{where}train.computation_time", "a mapping needs 'mean' (seconds per batch)", ["mean", "stdev"])
        if seconds.get("stdev"):
            ignored.append(f"train.computation_time.stdev: {IGNORED_WHY['train.computation_time_stdev']}")
        seconds = seconds["mean"]
    seconds = read_number(seconds, f"{where}train.computation_time", 0, 600, above=True)
    note("train.computation_time", f"{seconds:g} s per batch")
    if train.get("total_training_steps") not in (None, -1):
        raise ConfigError(f"{where}train.total_training_steps", "stops each epoch after that many steps; the lab reads "
                          "whole epochs (num_files_train x num_samples_per_file samples)", "leave it out")
    key, value = read_one_of(train, EPOCHS, f"{where}train")
    epochs = read_number(DLIO_DEFAULTS["epochs"] if key is None else value, f"{where}train.{key or 'epochs'}", 1, MAX_EPOCHS,
                     whole=True)
    note(f"train.{key or 'epochs'}", epochs, key is None)

    if isinstance(document.get("metric"), dict) and set(document["metric"]) & set(OUTPUT_METRIC_KEYS):
        misplaced = sorted(set(document["metric"]) & set(OUTPUT_METRIC_KEYS))[0]
        raise ConfigError(f"{where}metric.{misplaced}", "is read by DLIO under output.metric, not metric",
                          f"output: {{metric: {{{misplaced}: ...}}}}")
    metric = read_section(document, "metric", METRIC_KEYS, where)
    au = read_number(metric.get("au", DLIO_DEFAULTS["au"]), f"{where}metric.au", 0, 1, above=True)
    note("metric.au", f"{au:g}", "au" not in metric)
    output = document.get("output") if isinstance(document.get("output"), dict) else {}
    output_metric = output.get("metric") if isinstance(output.get("metric"), dict) else {}
    for key, honoured in OUTPUT_METRIC_KEYS.items():
        if key in output_metric:
            value = read_number(output_metric[key], f"{where}output.metric.{key}", 0, 10**6, whole=True)
            if value != honoured:
                raise ConfigError(f"{where}output.metric.{key}", f"{value}: the lab computes AU as DLIO does by default, "
                                  "the first step of each epoch left out (exclude_start_steps 1, exclude_end_steps 0)",
                                  f"{key}: {honoured}, or leave it out")
            note(f"output.metric.{key}", value)
    for path, (read, default) in NEVER_READ.items():
        section, key = path.split(".")
        if isinstance(document.get(section), dict) and key in document[section]:
            ignored.append(f"{path}: no DLIO release reads it (they read {read}): DLIO ran this file with {default}, "
                           "and so does the lab")

    # One line per ignored field: a whole section, or a field of a section the lab reads.
    read_fields = {"dataset": {"num_files_train", "num_samples_per_file", "format", *RECORD_LENGTH, *RECORD_STDEV,
                               "record_length_std"},
                   reader_name: {"batch_size", "read_threads", "data_loader"},
                   "train": {"computation_time", *EPOCHS, "total_training_steps", "epoch"}, "metric": {"au"}}
    for section, value in document.items():
        section = str(section)
        if section in read_fields:
            for key in value or {}:
                if key not in read_fields[section]:
                    why = IGNORED_WHY.get(f"{'reader' if section == 'data_reader' else section}.{key}",
                                          "a DLIO setting that changes neither the data read nor the compute")
                    ignored.append(f"{section}.{key}: {why}")
        elif section == "workflow" and isinstance(value, dict):
            rest = sorted(str(k) for k in value if k != "train")   # train is read: a workload that trains
            if rest:
                ignored.append(f"workflow ({', '.join(rest)}): {IGNORED_WHY['workflow']}")
        elif section == "output" and isinstance(value, dict):
            rest = sorted(str(k) for k in value if k != "metric")   # output.metric is read (OUTPUT_METRIC_KEYS)
            if rest:
                ignored.append(f"output ({', '.join(rest)}): {IGNORED_WHY['output']}")
        elif section == "model":
            rest = sorted(k for k in value if k != "name") if isinstance(value, dict) else []
            if rest:
                ignored.append(f"model ({', '.join(rest)}): {IGNORED_WHY['model']}")
        else:
            keys = f" ({', '.join(map(str, value))})" if isinstance(value, dict) and value else ""
            ignored.append(f"{section}{keys}: {IGNORED_WHY.get(section, 'not read by the lab')}")
    return Workload(name=name, source=source, format=fmt, num_files=files, samples_per_file=spf, record_bytes=record,
                    record_bytes_stdev=stdev, batch_size=batch, computation_time=seconds, epochs=epochs,
                    read_threads=threads, data_loader=loader, au=au, used=tuple(used), ignored=tuple(ignored),
                    document=json.dumps(document, default=str))   # in the file's order, as its lines are said


def parse_any_workload(document: Any, source: str, where: str = ""):
    """A training workload (``Workload``), or a checkpointing one (core/workloads/checkpoint.py ``CheckpointWorkload``: DLIO's
    ``workflow: {train: False, checkpoint: True}``, as MLPerf Storage's llama3 files)."""
    from .checkpoint import is_checkpointing, parse_checkpoint_workload
    if is_checkpointing(document):
        return parse_checkpoint_workload(document, source, where)
    return parse_workload(document, source, where)


ENTRY_KEYS = {"file", "scale", "dlio", "sha256"}


def parse_entry(value: Any, path: str, checkpointing: bool = False):
    """An experiment's ``workload:`` as the CLI resolved it: ``{file, scale, dlio: <the file's content>, sha256}``.
    A bare file name reaches here only where no CLI read it (the workflow's input): refused, saying so. With
    ``checkpointing``, a checkpointing workload is read too (core/workloads/checkpoint.py's CheckpointWorkload: a checkpoint
    trial's); without it, refused where the caller reads training workloads only."""
    if isinstance(value, str):
        raise ConfigError(path, f"{value!r} is a file: the dslab CLI reads it into the experiment (dslab plan/run/local)",
                          "{file, scale, dlio: <the workload's content>}")
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be a DLIO workload file name or a mapping, got {type(value).__name__}",
                          sorted(ENTRY_KEYS))
    unknown = sorted(set(value) - ENTRY_KEYS, key=str)
    if unknown:
        hint = closest_key(unknown[0], ENTRY_KEYS)
        raise ConfigError(f"{path}.{unknown[0]}", "unknown key" + (f" (did you mean '{hint}'?)" if hint else ""),
                          sorted(ENTRY_KEYS))
    if "dlio" not in value:
        raise ConfigError(f"{path}.file" if "file" in value else path, "the workload file was not read",
                          "run it through dslab plan/run/local, which read the file")
    source = str(value.get("file") or "inline")
    read = parse_any_workload if checkpointing else parse_workload
    workload = read(value["dlio"], source, f"{path}.dlio.")
    workload = workload.with_scale(value.get("scale", 1.0), f"{path}.scale")
    sha = value.get("sha256")
    if sha is not None and (not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha)):
        raise ConfigError(f"{path}.sha256", f"{sha!r} is not a sha256 digest")
    return replace(workload, sha256=sha)
