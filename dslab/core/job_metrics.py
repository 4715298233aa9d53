"""A training job's metrics from what its hosts wrote to ``/opt/ml/output/data``.

SageMaker merges every host's output folder into one ``output.tar.gz``: "If multiple containers in a
single training job write to this directory they should ensure no file/directory names clash.
SageMaker AI aggregates the result in a TAR file" (Developer Guide, "How Amazon SageMaker AI Processes
Training Output"). So on a cluster each host writes its own ``metrics-<host>.json``; a single host
writes ``metrics.json``, as the lab's script and ``dslab_report`` always have (training/dslab_report.py
names both). Collect (reading the archive) and the local runner (reading the merged folders) turn the
files into one job's metrics here.
"""

from __future__ import annotations

import json
import re
from typing import Any

METRICS_FILE = "metrics.json"
_PER_HOST = re.compile(r"^metrics-(?P<host>[A-Za-z0-9._-]+)\.json$")


def is_metrics_file(name: str) -> bool:
    """Is this output-archive member (a path relative to the output folder) one of the lab's metrics files?"""
    name = name[2:] if name.startswith("./") else name
    return name == METRICS_FILE or _PER_HOST.match(name) is not None


def _host_order(host: str) -> tuple[str, int]:
    """algo-2 before algo-10: SageMaker numbers its hosts algo-1 ... algo-N, and algo-1 is the leader."""
    stem = host.rstrip("0123456789")
    return stem, int(host[len(stem):] or 0)


def cluster_metrics(per_host: dict[str, dict[str, Any] | None], hosts: int | None = None) -> dict[str, Any]:
    """What the instances did together: aggregate throughput and each host's AU (MLPerf Storage reports
    the cluster's samples/s and every simulated accelerator's AU). The totals need every host's figures:
    with a host missing they would understate the cluster, so they are None."""
    done = {h: m for h, m in per_host.items() if m}
    hosts = max(hosts or 0, len(per_host))

    def total(key: str) -> float | None:
        values = [m.get(key) for m in done.values()]
        complete = len(done) == hosts and all(isinstance(v, (int, float)) for v in values)
        return sum(values) if values and complete else None
    aus = [m.get("au_percent") for m in done.values()]
    per_epoch = _au_per_epoch(list(done.values())) if len(done) == hosts else None
    checkpoint = {"checkpoint": _checkpoint_cluster(list(done.values()) if len(done) == hosts else [])} \
        if any(isinstance(m.get("checkpoint"), dict) for m in done.values()) else {}
    return {**checkpoint, "hosts": hosts, "hosts_reported": len(done), "samples": total("samples"),
            "samples_per_second": total("samples_per_second"), "mb_per_second": total("mb_per_second"),
            "au_percent_per_host": {h: m.get("au_percent") for h, m in done.items()},
            "au_percent_min": min((a for a in aus if a is not None), default=None),
            "au_percent_per_epoch": per_epoch,
            "au_percent": (sum(per_epoch) / len(per_epoch) if per_epoch else
                           sum(aus) / len(aus) if aus and len(done) == hosts and None not in aus else None)}


def _au_per_epoch(hosts: list[dict[str, Any]]) -> list[float] | None:
    """The cluster's AU per epoch as DLIO computes it: every rank's epoch AU summed and divided by the ranks
    (dlio_benchmark/utils/statscounter.py at 03b5ed329fe8, end_run lines 148-152: ``train_au =
    allreduce(train_au) / comm.size``), whose mean over the epochs is the job's AU (``au_percent``). A host runs
    its accelerators in one step, so each of its accelerators has its AU. None unless every host gave every epoch's."""
    epochs = [m.get("au_percent_per_epoch") for m in hosts]
    if not epochs or any(not isinstance(e, list) or len(e) != len(epochs[0]) or not e for e in epochs):
        return None
    by_epoch = list(zip(*epochs))
    if any(not all(isinstance(a, (int, float)) for a in epoch) for epoch in by_epoch):
        return None
    return [sum(epoch) / len(epoch) for epoch in by_epoch]


def _checkpoint_cluster(hosts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A checkpoint trial's figures for the cluster, as MLPerf Storage takes them: "The metric for duration is the
    maximum time across all GPUs. The metric for throughput is the minimum across all GPUs" (Submission_guidelines.md
    2.2.3): per checkpoint the slowest host's seconds, and the whole checkpoint's GiB over them (DLIO divides the whole
    checkpoint by each rank's time). None unless every host gave every checkpoint's figures."""
    figures = [m.get("checkpoint") for m in hosts]
    if not figures or not all(isinstance(f, dict) for f in figures):
        return None
    out: dict[str, Any] = {"hosts": len(figures), "bytes_per_checkpoint": figures[0].get("bytes_per_checkpoint")}
    gib = (out["bytes_per_checkpoint"] or 0) / 1024 ** 3
    for phase in ("save", "stall", "durable", "load"):
        per_host = [f.get(f"{phase}_seconds") for f in figures]
        if phase == "durable" and all(v is None for v in per_host):
            continue   # a file-system target: durable once saved
        if any(not isinstance(v, list) or len(v) != len(per_host[0]) for v in per_host):
            return None
        # A checkpoint is durable when the last host's files are in S3 (None: a host never saw them there).
        slowest = [None if None in step else max(step) for step in zip(*per_host)]
        known = [s for s in slowest if s is not None]
        out[f"{phase}_seconds"] = slowest
        out[f"{phase}_seconds_mean"] = sum(known) / len(known) if known else None
        if phase in ("save", "load"):
            rates = [gib / s for s in known if s > 0]
            out[f"{phase}_gb_per_second"] = rates
            out[f"{phase}_gb_per_second_mean"] = sum(rates) / len(rates) if rates else None
    return out


def job_au_percent(metrics: dict[str, Any] | None) -> float | None:
    """A job's AU: on a cluster the hosts' as DLIO averages them (``cluster.au_percent``), else the host's own."""
    metrics = metrics or {}
    cluster = metrics.get("cluster") or {}
    if cluster.get("au_percent") is not None:
        return cluster["au_percent"]
    return metrics.get("au_percent")


def _parse(data: bytes | str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None  # a user's file of that name that is not the lab's: the log's metric lines still count
    return parsed if isinstance(parsed, dict) else None


def job_metrics(files: dict[str, bytes | str], instance_count: int) -> dict[str, Any] | None:
    """The job's metrics from its metrics files (archive member name -> content): the leader's own
    figures, and on a cluster ``cluster`` with every host's. Without per-host files (an older script, or
    a user's that writes ``metrics.json`` on every host, so one copy survived) there is no cluster view:
    the report then draws no scaling row for the job rather than multiply one host by N."""
    named = {(n[2:] if n.startswith("./") else n): data for n, data in files.items()}
    per_host = {m.group("host"): _parse(data) for n, data in named.items() if (m := _PER_HOST.match(n))}
    if per_host:
        hosts = sorted(per_host, key=_host_order)
        leader = next((per_host[h] for h in hosts if per_host[h]), None)
        if leader is None:
            return None
        if instance_count > 1 or len(per_host) > 1:
            return {**leader, "cluster": cluster_metrics({h: per_host[h] for h in hosts}, instance_count)}
        return leader
    if METRICS_FILE in named:
        return _parse(named[METRICS_FILE])
    return None
