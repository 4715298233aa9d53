"""Report a training loop's data-pipeline figures the way DataSourceLab's own script does.

Standard library only: copy it next to your training script, or let `dslab` add it to your
``source_dir`` when it packages it (it does unless the folder has its own copy). Usage::

    from dslab_report import Meter

    meter = Meter()
    for epoch in range(epochs):
        for images, labels in meter.epoch(loader, samples=lambda batch: len(batch[1])):
            train_step(images, labels)          # the time spent here is compute
    meter.finish()

``meter.epoch`` wraps any iterable of batches: the time spent waiting for the next batch is the
data stall, the time between batches is compute. ``finish`` prints the ``dslab_metric name=value``
lines the lab's metric definitions scrape (samples/s, MB/s, AU, end-to-end efficiency, time to
first batch, data stall) and writes ``metrics.json`` to ``SM_OUTPUT_DATA_DIR`` (``metrics-<host>.json``
on each host of a cluster, see ``metrics_file_name``), so a job's record, report and chart carry them
exactly as for the lab's own script.

Definitions (as in the lab's script): AU is MLPerf Storage's accelerator utilisation as DLIO computes
it: per epoch, compute over wall time with the first step left out, and for the run the mean of the
epochs' AU (``dlio_au``); end-to-end efficiency is compute over the whole epoch, first batch included. On a GPU, compute runs asynchronously: pass ``sync=torch.cuda.synchronize``
so a step's time is the accelerator's, not the launch's.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

PREFIX = "dslab_metric"


def metrics_file_name(current_host: str | None = None, hosts: list[str] | tuple[str, ...] | None = None) -> str:
    """Where this host's summary goes in the output data folder: ``metrics.json`` on one host,
    ``metrics-<host>.json`` on each host of a cluster. SageMaker merges every host's folder into one
    output.tar.gz and asks that "no file/directory names clash" (How Amazon SageMaker AI Processes
    Training Output): with one name for all, only one host's figures would survive."""
    if hosts is None:
        hosts = json.loads(os.environ.get("SM_HOSTS", "[]") or "[]")
    current_host = current_host or os.environ.get("SM_CURRENT_HOST", "")
    return f"metrics-{current_host}.json" if len(hosts) > 1 and current_host else "metrics.json"


def dlio_au(per_epoch: Iterable[float | None]) -> float | None:
    """A run's AU from its epochs' AU (percent), as DLIO computes it, which is what MLPerf Storage reports.
    dlio_benchmark/utils/statscounter.py at 03b5ed329fe8: each epoch's ``au = total_compute_time / total_time``,
    the first step (metric_exclude_start_steps) left out of both (compute_metrics_train, lines 340-349; end_train,
    213-223), then ``train_au_mean_percentage = np.mean(train_au)``, the mean over the epochs (end_run, lines
    148-152). Not the run's compute over its whole time: a slow epoch weighs as one epoch, whatever its length.
    An epoch of one step measures nothing (DLIO would count it 0%): it is left out, and None if none measured."""
    measured = [float(a) for a in per_epoch if a is not None]
    return sum(measured) / len(measured) if measured else None


def metric(name: str, value: float, **labels: Any) -> None:
    """One metric line, in the format the lab's MetricDefinitions match."""
    extra = "".join(f" {k}={v}" for k, v in labels.items())
    print(f"{PREFIX} {name}={value:.6g}{extra}", flush=True)


class Meter:
    def __init__(self, output_dir: str | os.PathLike | None = None, sync: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.output_dir = Path(output_dir or os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"))
        self.sync, self.clock = sync, clock
        self.epochs: list[dict[str, Any]] = []

    def epoch(self, batches: Iterable[Any], samples: Callable[[Any], int] = len,
              nbytes: Callable[[Any], int] | None = None) -> Iterator[Any]:
        """Yield the batches of one epoch, timing the wait for each and the work between them."""
        clock = self.clock
        start = clock()
        count = total_bytes = steps = 0
        compute = compute_all = stall = 0.0
        first_batch = first_step_end = None
        iterator = iter(batches)
        last = start
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                break
            got = clock()
            yield batch  # the caller's training step runs now
            if self.sync is not None:
                self.sync()
            now = clock()
            step = now - got
            compute_all += step
            if steps == 0:  # MLPerf Storage leaves the first step out of AU
                first_batch, first_step_end = got - start, now
            else:
                compute += step
                stall += got - last
            steps += 1
            count += int(samples(batch))
            total_bytes += int(nbytes(batch)) if nbytes else 0
            last = now
        end = clock()
        wall = end - start
        measured = end - first_step_end if first_step_end is not None and steps > 1 else 0.0
        stats = {"epoch": len(self.epochs), "samples": count, "bytes": total_bytes if nbytes else None, "steps": steps,
                 "epoch_seconds": wall, "samples_per_second": count / wall if wall > 0 else None,
                 "mb_per_second": total_bytes / wall / 1e6 if nbytes and wall > 0 else None,
                 "time_to_first_batch_seconds": first_batch, "data_stall_seconds": stall,
                 "compute_seconds": compute, "compute_seconds_all": compute_all, "measured_seconds": measured,
                 "au_percent": 100.0 * compute / measured if measured > 0 else None,
                 "end_to_end_efficiency_percent": 100.0 * compute_all / wall if wall > 0 else None}
        self.epochs.append(stats)
        metric("epoch_seconds", wall, epoch=stats["epoch"])
        for key in ("samples_per_second", "mb_per_second", "au_percent", "end_to_end_efficiency_percent"):
            if stats[key] is not None:
                metric(key, stats[key], epoch=stats["epoch"])
        metric("data_stall_seconds", stall, epoch=stats["epoch"])

    def summary(self) -> dict[str, Any]:
        epochs = self.epochs
        wall = sum(e["epoch_seconds"] for e in epochs)
        samples = sum(e["samples"] for e in epochs)
        has_bytes = bool(epochs) and all(e["bytes"] is not None for e in epochs)
        total_bytes = sum(e["bytes"] for e in epochs) if has_bytes else None
        return {
            "samples_per_second": samples / wall if wall > 0 else None,
            "mb_per_second": total_bytes / wall / 1e6 if has_bytes and wall > 0 else None,
            "au_percent": dlio_au(e["au_percent"] for e in epochs),   # the epochs' mean, as DLIO
            "au_percent_per_epoch": [e["au_percent"] for e in epochs],
            "end_to_end_efficiency_percent": (100.0 * sum(e["compute_seconds_all"] for e in epochs) / wall
                                              if wall > 0 else None),
            "time_to_first_batch_seconds": epochs[0]["time_to_first_batch_seconds"] if epochs else None,
            "epoch_seconds": [e["epoch_seconds"] for e in epochs],
            "data_stall_seconds": sum(e["data_stall_seconds"] for e in epochs),
            "samples": samples,
            **({"bytes": total_bytes} if has_bytes else {}),
            "epochs": len(epochs),
            "per_epoch": epochs,
            "reported_by": "dslab_report",
        }

    def finish(self) -> dict[str, Any]:
        """Print the run's metric lines and write metrics.json (metrics-<host>.json on a cluster); returns the summary."""
        summary = self.summary()
        metric("samples", summary["samples"])
        for key in ("samples_per_second", "mb_per_second", "au_percent", "end_to_end_efficiency_percent",
                    "time_to_first_batch_seconds"):
            if summary[key] is not None:
                metric(key, summary[key])
        self.output_dir.mkdir(parents=True, exist_ok=True)
        (self.output_dir / metrics_file_name()).write_text(json.dumps(summary, indent=2))
        return summary
