"""Reports: results.json, results.csv, report.md, a self-contained report.html and breakdown.png.

The chart is the source post's: stacked bars of Downloading / Training / Other seconds per mode (one instance's
wall clock, as SageMaker's transitions give them), grouped by scenario (dataset). With repeats, bars show the mean
and the report flags configurations whose repeats disagree by more than 5%.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .contracts import field_path, validate_results
from .core.errors import ConfigError
from .core.job_metrics import job_au_percent
from .core.modes import SOURCE_ORDER, STANDARD, lab_mode, source_label
from .core.facts.prices import PriceTable
from .core.results import (RECORD_VERSION, read_results, record_from_describe, spot_saving, summarise, to_csv,
                           wall_seconds)
from .core.model.spread import spread as runs_spread
from .core.answer.decision import duration  # noqa: F401  (the CLI reads it from here too)
from .inputs.experiment_file import read_json_file

DISAGREEMENT = 0.05
LOCAL_NOTE = ("This is a LOCAL run on the embedded AWS stand-in: its seconds measure loopback networking, "
              "local disk and this machine's CPUs, not AWS. Compare its modes with each other, never with AWS figures.")


def shared_cpus(results: dict[str, Any]) -> str:
    """How many jobs of a local run shared this machine's CPUs (its figures move with the neighbours' load)."""
    local = results.get("local_run") or {}
    if not local.get("max_concurrency"):
        return ""
    at_once = int(local["max_concurrency"])
    return (f" Its jobs ran {'one at a time' if at_once == 1 else f'up to {at_once} at a time'} on "
            f"{local.get('cpus', '?')} CPUs (max_concurrency: {at_once}).")


def load_results(path: Path) -> dict[str, Any]:
    """A results.json, checked against the contract and read at this dslab's schema version (an older file as
    core.results.VERSION_NOTES says; one whose records mix versions refused in one line)."""
    results = read_json_file(path, "--results")
    try:
        validate_results(results)
    except Exception as err:
        where = field_path(err) if hasattr(err, "absolute_path") else ""
        raise ConfigError("--results", f"{path} does not follow the results contract: "
                          f"{f'{where}: ' if where else ''}{str(err).splitlines()[0]}") from None
    return read_results(results, f"--results {path}")


def results_from_describe_dir(directory: Path, prices: PriceTable) -> dict[str, Any]:
    """Records from raw DescribeTrainingJob JSON files (as `aws sagemaker describe-training-job` prints them)."""
    if not directory.is_dir():
        raise ConfigError("--describe-json", f"{directory} is not a folder")
    files = sorted(directory.glob("*.json"))
    if not files:
        raise ConfigError("--describe-json", f"{directory} holds no .json files",
                          "one DescribeTrainingJob output per file")
    records = []
    for path in files:
        describe = read_json_file(path, "--describe-json")
        if not isinstance(describe, dict) or "TrainingJobName" not in describe:
            raise ConfigError("--describe-json", f"{path.name} is not a DescribeTrainingJob output (no TrainingJobName)")
        tags = {t["Key"]: t["Value"] for t in describe.get("Tags", [])} if isinstance(describe.get("Tags"), list) else None
        records.append(record_from_describe(describe, prices=prices, tags=tags))
    return {"schema_version": RECORD_VERSION, "experiment": {"name": "imported", "source": str(directory)},
            "backend": "aws", "records": records,
            "prices": {"date": prices.date, "source": prices.source, "region": prices.data["region"]}}


# ---- aggregation -----------------------------------------------------------------------------

def data_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of jobs that read a dataset (a checkpoint trial's have their own section: checkpoint_lines)."""
    return [r for r in records if not r.get("checkpoint_target")]


def source(record: dict[str, Any]) -> str:
    """The data source a record's bars are labelled with: its mode, "Express <mode>" on the directory bucket; a
    checkpoint job's, its target ("S3 sync", "FSx", ...)."""
    if record.get("checkpoint_target"):
        from .core.modes import checkpoint_target_label
        return checkpoint_target_label(record["checkpoint_target"], bool(record.get("checkpoint_restore")))
    return source_label(lab_mode(record), record.get("storage"))


def _source_rank(label: str) -> int:
    return SOURCE_ORDER.index(label) if label in SOURCE_ORDER else len(SOURCE_ORDER)


def trials_collide(records: list[dict[str, Any]]) -> bool:
    """Do two trials share a dataset and a source (two scripts, two instance types)? Only then does
    a bar need its trial's name; Express jobs in a trial of their own sit beside the others."""
    seen: dict[tuple[str, str], set] = defaultdict(set)
    for r in records:
        seen[(r["dataset"], source(r))].add(r.get("trial"))
    return any(len(trials) > 1 for trials in seen.values())


def scenario(record: dict[str, Any], several_trials: bool) -> str:
    """The group a job's bars belong to: its dataset, and its trial when trials collide."""
    return f"{record['dataset']} · {record['trial']}" if several_trials and record.get("trial") else record["dataset"]


def group(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    several_trials = trials_collide(records)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(scenario(r, several_trials), source(r))].append(r)
    return groups


def aggregate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (dataset, mode): means over completed repeats, spread, and the >5% flag."""
    rows = []
    for (dataset, mode), items in sorted(group(records).items(), key=lambda kv: (kv[0][0], _source_rank(kv[0][1]))):
        done = [r for r in items if r["status"] == "Completed" and r["billable_seconds"] is not None]
        totals = [r["billable_seconds"] for r in done]
        mean = statistics.fmean(totals) if totals else None
        # One run has no measured spread (None, shown "n/a (one run)"), never a spread of 0.
        spread = (max(totals) - min(totals)) if len(totals) > 1 else None
        row = {
            "dataset": dataset, "mode": mode, "runs": len(items), "completed": len(done),
            "dataset_name": items[0]["dataset"], "trials": sorted({r.get("trial") or "" for r in items}),
            "mode_name": lab_mode(items[0]), "storage": items[0].get("storage") or STANDARD,
            # One instance's clock from start to end (TrainingTimeInSeconds; billable seconds less any spot saving).
            "wall_mean": _mean(done, wall_seconds),
            "wall": runs_spread(w for w in map(wall_seconds, done) if w is not None),
            "spot_saving": _mean(done, spot_saving),
            "statuses": sorted({r["status"] for r in items}),
            "billable_mean": mean, "billable_spread": spread, "billable": runs_spread(totals),
            # The cost of each completed run: the answer says when the pick and the runner-up are within it.
            "cost": runs_spread(r["cost_usd"]["total"] for r in done),
            "disagree": bool(mean and len(totals) > 1 and spread / mean > DISAGREEMENT),
            "downloading": _mean(done, lambda r: r["breakdown"]["downloading"]),
            "training": _mean(done, lambda r: r["breakdown"]["training"]),
            "other": _mean(done, lambda r: r["breakdown"]["other"]),
            "samples_per_second": _mean(done, lambda r: r["metrics"].get("samples_per_second")),
            "mb_per_second": _mean(done, lambda r: r["metrics"].get("mb_per_second")),
            # DLIO's AU: the mean of the epochs' (on a cluster, of every host's per epoch: job_metrics.py).
            "au_percent": _mean(done, lambda r: job_au_percent(r["metrics"])),
            "end_to_end_percent": _mean(done, lambda r: r["metrics"].get("end_to_end_efficiency_percent")),
            "first_batch_seconds": _mean(done, lambda r: r["metrics"].get("time_to_first_batch_seconds")),
            "slow_first_batch": any(_slow_first_batch(r) for r in done),
            "cost_instance": _mean(done, lambda r: r["cost_usd"]["instance"]),
            "cost_storage": _mean(done, lambda r: r["cost_usd"].get("storage", 0.0)),
            "cost_requests": _mean(done, lambda r: r["cost_usd"].get("requests", 0.0)),
            "cost_total": _mean(done, lambda r: r["cost_usd"]["total"]),
            "reasons": sorted({r["failure_reason"] for r in items if r.get("failure_reason")}),
        }
        rows.append(row)
    return rows


# A first batch that takes more than this share of its epoch is flagged: AU leaves the first step
# out, so such a job can show a high AU while the instance waited (billed) for its data.
SLOW_FIRST_BATCH = 0.10


def _slow_first_batch(record: dict[str, Any]) -> bool:
    metrics = record["metrics"]
    first, epochs = metrics.get("time_to_first_batch_seconds"), metrics.get("epoch_seconds") or []
    return bool(first and epochs and epochs[0] and first > SLOW_FIRST_BATCH * epochs[0])


def ranking(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Modes per dataset by what the user pays for: cost, then billable time; never by AU alone."""
    done = [r for r in rows if r["cost_total"] is not None]
    return sorted(done, key=lambda r: (r["dataset"], r["cost_total"], r["billable_mean"] or 0.0))


def _mean(items, key):
    values = [key(r) for r in items]
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.fmean(values) if values else None


# ---- chart -------------------------------------------------------------------------------------

def breakdown_chart(rows: list[dict[str, Any]], path: Path, title: str) -> dict[str, Any]:
    """Stacked bars per data source (mode, and storage for the S3 modes), one panel per dataset with only the sources
    it ran (no empty slots), each panel titled with the dataset's whole name; every label inside the image. Returns
    what was drawn (for tests and the report)."""
    import textwrap

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({r["dataset"] for r in rows})
    modes = sorted({r["mode"] for r in rows}, key=_source_rank)
    drawn = [r for r in rows if r["wall_mean"] is not None]
    per_dataset = {d: sorted((r for r in drawn if r["dataset"] == d), key=lambda r: _source_rank(r["mode"]))
                   for d in datasets}
    panels = [d for d in datasets if per_dataset[d]] or datasets[:1] or ["no job completed"]   # an empty run: one frame
    widths = [max(1, len(per_dataset.get(d) or [])) for d in panels]
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.0, 0.55 * sum(widths) + 1.2 * len(panels) + 1.5), 5.2),
                             dpi=110, sharey=True, squeeze=False, gridspec_kw={"width_ratios": widths})
    colours = {"downloading": "#4C72B0", "training": "#55A868", "other": "#C44E52"}
    bars = []
    top = max((r["wall_mean"] or 0.0 for r in drawn), default=1.0) or 1.0
    for ax, dataset in zip(axes[0], panels):
        for x, row in enumerate(per_dataset.get(dataset) or []):
            bottom = 0.0
            for part in ("downloading", "training", "other"):
                value = row[part] or 0.0
                ax.bar(x, value, 0.8, bottom=bottom, color=colours[part])
                bottom += value
            runs = row["wall"]   # the bars' own seconds: one instance's wall clock, never the spot-discounted time
            if runs is not None and runs.runs > 1:   # the runs' min-max; one run has no measured spread
                ax.errorbar(x, runs.mean, yerr=[[runs.mean - runs.low], [runs.high - runs.mean]], color="black",
                            capsize=3, lw=1)
            bars.append({"dataset": dataset, "mode": row["mode"], "x": x, "height": bottom})
        shown = per_dataset.get(dataset) or []
        ax.set_xticks(range(len(shown)))
        ax.set_xticklabels([r["mode"] for r in shown], rotation=90, fontsize=8)
        ax.set_xlim(-0.6, max(len(shown), 1) - 0.4)
        ax.set_title("\n".join(textwrap.wrap(dataset, 28)) or dataset, fontsize=9)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    axes[0][0].set_ylabel("seconds per instance (wall clock)")
    axes[0][0].set_ylim(0, top * 1.12)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[p]) for p in ("downloading", "training", "other")]
    fig.legend(handles, ["Downloading", "Training", "Other"], loc="upper right", fontsize=8, ncol=3)
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, format="png", bbox_inches="tight")   # whatever the names' lengths, nothing falls off the image
    plt.close(fig)
    return {"bars": bars, "datasets": datasets, "modes": modes, "panels": panels}


# ---- scaling: the same source at several cluster sizes -----------------------------------------------

REPLICATED_MARK = " (replicated)"   # a multi-instance row whose S3 channel was FullyReplicated


def scaling(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (dataset, source, instances): the cluster's samples/s and every host's AU, where a dataset and a
    source ran at two cluster sizes or more (an instance_count sweep). Means over completed repeats.
    A multi-instance job is drawn only from every host's own figures (``cluster``): one host's times N
    would hide exactly what the section is for, the hosts that starve. A multi-instance job whose S3 channel
    was FullyReplicated (set on purpose: every instance downloads or streams the whole dataset) is a row of its
    own, marked ``replicated``: `dslab size` models a cluster's S3 channels sharded (ShardedByS3Key)."""
    points: dict[tuple[str, str, int, bool], list[tuple[float, list[float]]]] = defaultdict(list)
    for r in records:
        metrics = r.get("metrics") or {}
        if r["status"] != "Completed" or metrics.get("samples_per_second") is None:
            continue
        n = int(r.get("instance_count") or 1)
        cluster = metrics.get("cluster") or {}
        if n > 1:
            if cluster.get("samples_per_second") is None:
                continue  # no per-host data (a script that wrote one metrics.json on every host)
            throughput = float(cluster["samples_per_second"])
            aus = [float(a) for a in (cluster.get("au_percent_per_host") or {}).values() if a is not None]
        else:
            throughput = float(metrics["samples_per_second"])
            aus = [float(metrics["au_percent"])] if metrics.get("au_percent") is not None else []
        replicated = n > 1 and r.get("distribution") == "FullyReplicated"
        points[(r["dataset"], source(r), n, replicated)].append((throughput, aus))
    sizes: dict[tuple[str, str], set[int]] = defaultdict(set)
    for dataset, label, n, _ in points:
        sizes[(dataset, label)].add(n)
    rows = []
    for (dataset, label, n, replicated), runs in sorted(
            points.items(), key=lambda kv: (kv[0][0], _source_rank(kv[0][1]), kv[0][2], kv[0][3])):
        if len(sizes[(dataset, label)]) < 2:
            continue
        aus = [a for _, host_aus in runs for a in host_aus]
        rows.append({"dataset": dataset, "source": label, "instances": n, "replicated": replicated,
                     "samples_per_second": statistics.fmean(t for t, _ in runs),
                     "au_mean": statistics.fmean(aus) if aus else None, "au_min": min(aus) if aus else None})
    for row in rows:
        one = next((r for r in rows if r["dataset"] == row["dataset"] and r["source"] == row["source"] and r["instances"] == 1), None)
        row["speedup"] = row["samples_per_second"] / one["samples_per_second"] if one and one["samples_per_second"] else None
    return rows


def scaling_chart(rows: list[dict[str, Any]], path: Path, title: str) -> dict[str, Any]:
    """Aggregate samples/s and per-host AU against the number of instances, a line per (dataset, source)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=110)
    lines = []
    # A line per (dataset, source, replicated or not), each from the source's one-instance point.
    for dataset, label_source, replicated in sorted({(r["dataset"], r["source"], r["replicated"]) for r in rows
                                                     if r["instances"] > 1}):
        points = [r for r in rows if (r["dataset"], r["source"]) == (dataset, label_source)
                  and (r["instances"] == 1 or r["replicated"] == replicated)]
        xs = [r["instances"] for r in points]
        label = f"{label_source}{REPLICATED_MARK if replicated else ''} · {dataset}"
        left.plot(xs, [r["samples_per_second"] for r in points], marker="o", label=label)
        right.plot(xs, [r["au_mean"] if r["au_mean"] is not None else float("nan") for r in points], marker="o", label=label)
        lines.append({"label": label, "instances": xs})
    for ax, name in ((left, "aggregate samples/s"), (right, "AU % per instance (mean)")):
        ax.set_xlabel("instances")
        ax.set_ylabel(name)
        ax.set_xticks(sorted({r["instances"] for r in rows}))
    right.axhline(90, color="grey", lw=0.8, ls="--")
    right.set_ylim(0, 105)
    left.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return {"lines": lines}


# ---- the answer ---------------------------------------------------------------------------------

class Answers:
    """What the report answers: each scenario's pick from the measured jobs and, for a local run, the
    estimated AWS answer for the same experiment (``core/answer/scenarios.py``, as recommend and export)."""

    def __init__(self, results: dict[str, Any], rows: list[dict[str, Any]], calibration: Any = None):
        from .core.answer import scenarios as answers
        from .core.experiment import parse_experiment
        prices = results.get("prices") or {}
        self.prices = PriceTable.with_overrides(prices.get("overrides"), "results.json: prices.overrides")
        self.fsx_capacity_gib = int(results.get("fsx_capacity_gib") or 1200)
        # The FSx and EFS the run ran on (its plan recorded them), which every answer here prices.
        from .core.model.provisioning import Provisioning, as_deployed
        self.lab = Provisioning.from_dict(results.get("lab"), as_deployed(self.fsx_capacity_gib))
        stats = results.get("dataset_stats") or {}
        try:
            self.experiment = parse_experiment(results.get("experiment") or {"name": "?"})
        except ConfigError:
            self.experiment = None  # imported DescribeTrainingJob outputs: no experiment document
        if self.experiment is not None and calibration is not None:   # --calibration over the run's own
            self.experiment = dataclasses.replace(self.experiment, calibration=calibration)
        datasets = {d.name: d for d in self.experiment.datasets} if self.experiment else {}
        names = {r["dataset_name"] for r in rows}
        shapes = {n: (answers.shape_of(datasets[n], stats) if n in datasets else _stats_shape(stats.get(n))) for n in names}
        # A local run's seconds are this machine's: its time to a result leaves out the set-up's AWS duration
        # (its dollars, priced per file and byte, stay).
        self.measured = answers.measured(rows, self.prices, shapes=shapes, fsx_capacity_gib=self.fsx_capacity_gib,
                                         data_in_efs={n: d.source == "efs" for n, d in datasets.items()},
                                         setup_time=results.get("backend") != "local", lab=self.lab,
                                         local_setup=(results.get("local_run") or {}).get("setup_seconds")
                                         if results.get("backend") == "local" else None)
        self.estimated = (answers.estimated(self.experiment, self.prices, stats=stats, lab=self.lab)
                          if self.experiment is not None and results.get("backend") == "local" else [])
        # An AWS run checks the estimate: each completed job's estimate for its own premise beside what it measured.
        self.checked: list[Any] = []
        self.unchecked: str | None = None
        if results.get("backend") == "aws" and self.experiment is not None:
            from .core import measured
            try:
                self.checked = measured.compare(measured.measured_jobs(results), self.prices,
                                                self.experiment.calibration)
            except ConfigError as err:
                self.unchecked = str(err)

    def estimate_for(self, measured) -> Any:
        """The estimated answer of the same dataset and trials, if any."""
        return next((a for a in self.estimated if a.scenario.dataset.name == measured.dataset
                     and set(measured.trials) & set(a.scenario.trial_names)), None)


def _stats_shape(found: dict[str, Any] | None):
    from .core.shape import DatasetShape
    if not found or not found.get("files") or not found.get("bytes"):
        return None
    return DatasetShape(files=int(found["files"]), bytes=int(found["bytes"]))


def answer_lines(answers: Answers, *, bold=lambda text: f"**{text}**", heading=lambda label: f"### {label}") -> list[str]:
    """The answer, one block per scenario (markdown; ``bold`` and ``heading`` plain for a terminal)."""
    from .core.answer.decision import usd, usd_difference
    lines: list[str] = []
    for m in answers.measured:
        lines.append(heading(m.label))
        if heading(m.label).startswith("#"):
            lines.append("")
        d = m.decision
        if d is None:
            lines.append(f"- no measured answer: {m.missing}")
        else:
            setup = "nothing to set up" if not d.pick.setup.usd else f"{usd(d.pick.setup.usd)} of it set-up"
            lines.append(f"- {bold('Pick: ' + d.pick.source)}: {usd(d.pick.cost_usd)} per run "
                         f"({setup}), {duration(d.pick.seconds)} to a result. Why: {d.why}.")
            if d.runner_up is not None:
                lines.append(f"- Runner-up (the pick if the pick were not there): {d.runner_up.source}: "
                             f"{usd(d.runner_up.cost_usd)} per run ({usd_difference(d.runner_up.cost_usd - d.pick.cost_usd)}), "
                             f"{duration(d.runner_up.seconds)} to a result.")
            for source, why in d.passed_over.items():
                option = next(o for o in d.ranking if o.source == source)
                lines.append(f"- {source} ({usd(option.cost_usd)}) {why}.")
            for source, why in d.blocked.items():
                lines.append(f"- {source} cannot serve it: {why}.")
            if d.noise:
                lines.append(f"- Precision: {d.noise}.")
        estimate = answers.estimate_for(m)
        if estimate is not None and estimate.decision is not None:
            e = estimate.decision
            runner = (f"; runner-up {e.runner_up.source}, {usd(e.runner_up.cost_usd)}{_range(e.runner_up)}"
                      if e.runner_up else "")
            lines.append(f"- {bold('Estimated on AWS')} (the same jobs at AWS speed, not measured): pick "
                         f"{e.pick.source}, {usd(e.pick.cost_usd)} per run{_range(e.pick)}, {duration(e.pick.seconds)} "
                         f"to a result{runner}. Why: {e.why}." + (f" Precision: {e.noise}." if e.noise else ""))
            if estimate.premise is not None:   # what the estimate assumed, as every answer says it
                lines.append(f"- Premise of the estimate: {estimate.premise.describe().removeprefix('premise: ')}; "
                             f"{estimate.answer.rule}, the lab as it stands beside it.")
            differs = [s for s in estimate.answer.sources if s.differs]
            if differs:
                lines.append("- Where the lab as it stands differs (estimated): "
                             + "; ".join(f"{s.source} as {s.provisioned_as}, {s.differs}" for s in differs) + ".")
            for advice in estimate.answer.advice:
                lines.append(f"- Advice (estimated on AWS): {advice}.")
        lines.append("")
    return lines


def _range(option) -> str:
    """" ($0.36-$0.41)": an estimate's range of cost to a result (calibration.py), "" without one."""
    from .core.answer.decision import usd
    interval = option.cost_interval
    return f" ({usd(interval[0])}-{usd(interval[1])})" if interval and not option.runs else ""


# ---- documents --------------------------------------------------------------------------------

def _fmt(value, digits=1, prefix="") -> str:
    if value is None:
        return "-"
    return f"{prefix}{value:,.{digits}f}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def workload_lines(experiment: dict[str, Any], rows: list[dict[str, Any]], ignored: bool = True) -> list[str]:
    """Per DLIO workload a trial ran (core/workloads/dlio.py): its file, the scale (how many of its files were read), each
    source's measured AU against the workload's target (metric.au), as MLPerf Storage judges a run (DLIO's
    train_au_meet_expectation: the mean of the epochs' AU at least metric.au), and with ``ignored`` the fields the
    lab does not use, one line each, as the commands print them."""
    from .core.workloads.checkpoint import CheckpointWorkload
    from .core.workloads.dlio import ignored_lines, parse_entry
    lines, seen = [], set()
    for trial in experiment.get("trials") or []:
        entry = trial.get("workload")
        key = json.dumps([entry, trial.get("checkpoint")], sort_keys=True)
        if not entry or key in seen:
            continue
        seen.add(key)
        try:
            workload = parse_entry(entry, "workload", checkpointing=True)
        except ValueError:   # a record written by another version: say what it names
            lines.append(f"- workload: {entry.get('file', '?')} (not read by this version)")
            continue
        if isinstance(workload, CheckpointWorkload):
            ran = trial.get("checkpoint") or {}
            if ran:   # the trial's own writes, reads and interval, as it ran them (the file's are its defaults)
                workload = dataclasses.replace(
                    workload, writes=int(ran.get("writes", workload.writes)), reads=int(ran.get("reads", workload.reads)),
                    interval_seconds=float(ran.get("seconds_between", workload.interval_seconds)))
            digest = f", sha256 {workload.sha256[:12]}" if workload.sha256 else ""
            lines.append(f"- checkpoint workload (DLIO, MLPerf Storage): `{workload.source}`{digest}: **scale "
                         f"{workload.scale:g}** of every file's bytes; {workload.describe()}")
            if ignored:
                lines += [f"  - {line}" for line in ignored_lines([workload])]
            continue
        digest = f", sha256 {workload.sha256[:12]}" if workload.sha256 else ""
        lines.append(f"- workload (DLIO, MLPerf Storage): `{workload.source}`{digest}: **scale {workload.scale:g}**, "
                     f"{workload.files:,} of its {workload.num_files:,} {workload.format} files ({workload.samples:,} samples), "
                     f"record sizes as published ({workload.record_bytes / 1e6:,.3f} MB, stdev "
                     f"{workload.record_bytes_stdev / 1e6:,.3f} MB); batch {workload.batch_size} every "
                     f"{workload.computation_time:g} s per accelerator; {workload.epochs} epoch(s)")
        measured = [r for r in rows if r["dataset_name"] == workload.dataset_name and r.get("au_percent") is not None]
        if measured:
            verdicts = ", ".join(f"{r['mode']} {r['au_percent']:.1f}%"
                                 + (" meets it" if r["au_percent"] >= workload.au_percent else " below")
                                 for r in measured)
            lines.append(f"- AU target {workload.au_percent:g}% (the workload's metric.au): {verdicts}")
        if ignored:
            lines += [f"  - {line}" for line in ignored_lines([workload])]
    return lines


def _short(seconds: float | None) -> str:
    """Seconds as the checkpoint section says them: milliseconds kept below a minute (a local save takes a few)."""
    if seconds is None:
        return "an unmeasured time"
    return f"{seconds:,.3f} s" if seconds < 60 else duration(seconds)


def checkpoint_lines(results: dict[str, Any], answers: Answers) -> list[str]:
    """The checkpoint section (a run with checkpoint trials): per trial, the answer first (the measured pick: the
    shortest stall, then restore; and where the same checkpoints at the workload's full size should go on AWS, every
    30 minutes, estimated), then each target's measured save, stall, restore and GB/s."""
    from .core.answer.checkpoints import trial_checkpoint_answer
    from .core.answer.decision import usd
    from .core.model.checkpoint_estimate import (DEFAULT_EVERY_SECONDS, measured_pick, measured_targets,
                                                 option_name)
    from .core.workloads.checkpoint import GIB
    targets = measured_targets(results["records"])
    if not targets:
        return []
    local = results.get("backend") == "local"
    lines = ["## Checkpoints: where they should go", ""]
    if local:
        lines += ["> Local seconds: this machine's disk and loopback S3, at the trial's --scale of each file's bytes; "
                  "compare the targets with each other, and read the estimate for AWS.", ""]
    trials = {t.name: t for t in answers.experiment.trials if t.checkpoint is not None} if answers.experiment else {}
    by_trial: dict[str, list] = defaultdict(list)
    for t in targets:
        by_trial[t.trial].append(t)
    for trial_name, group in by_trial.items():
        pick, runner = measured_pick(group)
        lines.append(f"### {group[0].model} · {trial_name}")
        lines.append("")
        if pick is None:
            lines.append("- no measured answer: no target's writer job completed"
                         + (f" ({'; '.join(f for t in group for f in t.failures)[:600]})" if any(t.failures for t in group) else ""))
        else:
            restore = f", {_short(pick.restore_seconds)} to restore" if pick.restore_seconds is not None else ""
            lines.append(f"- **Pick (measured): {pick.label}**: a save is durable in {_short(pick.durable_seconds)}, "
                         f"training waits {_short(pick.stall_seconds)} for it{restore}. Why: the soonest durable save "
                         "(then the shortest stall, then restore) of the targets this run measured.")
            if runner is not None:
                lines.append(f"- Runner-up: {runner.label}: durable in {_short(runner.durable_seconds)}, "
                             f"{_short(runner.stall_seconds)} stall"
                             + (f", {_short(runner.restore_seconds)} to restore" if runner.restore_seconds is not None else "")
                             + ".")
                if (runner.durable_seconds is not None and pick.durable_seconds is not None
                        and runner.durable_seconds <= pick.durable_seconds * (1 + DISAGREEMENT * 2)):
                    lines.append(f"- Precision: {pick.label} and {runner.label} are durable within 10% of each other: "
                                 "this run does not separate them (`repeats: 3`, or a larger scale of the workload's "
                                 "bytes).")
        # Never MLPerf Storage's sequence: its last condition ("The 5 runs must be done on the same machine(s)") is
        # one no SageMaker job can promise, so mlperf_sequence always names it.
        apart = [t.mlperf_sequence() for t in group]
        lines.append("- Not MLPerf Storage's sequence: " + "; ".join(dict.fromkeys(w for a in apart for w in a))
                     + ": compare these targets with each other, not with MLPerf's published results.")
        trial = trials.get(trial_name)
        if trial is not None:
            try:   # the same answer `dslab recommend --experiment` gives the trial
                answer = trial_checkpoint_answer(trial, answers.lab, answers.prices, answers.experiment.calibration)
                plan = answer.premise.checkpoint.plan
            except ConfigError as err:
                lines.append(f"- Estimated on AWS: not priced: {err}")
                answer = None
            if answer is not None and answer.pick is not None:
                p = answer.pick.estimate
                lab_said = answers.lab.describe() if answers.lab is not None else "the lab as cdk.json would deploy it"
                runner_text = (f"; runner-up {option_name(answer.runner_up.estimate)}, "
                               f"${answer.runner_up.estimate.usd_per_day:,.2f} a day" if answer.runner_up else "")
                lines.append(f"- {'**Estimated on AWS**' if local else 'Estimated'} (not measured: {plan.files:,} files, "
                             f"{plan.bytes / GIB:,.1f} GiB a checkpoint at full size on {trial.instance_count} x "
                             f"{trial.instance_type}, every {DEFAULT_EVERY_SECONDS / 60:g} min, the last {answer.question.question.keep} kept; "
                             f"priced on {lab_said}): "
                             f"{option_name(p)}, ${p.usd_per_day:,.2f} a day, {p.stall_seconds:,.1f} s stall a save, "
                             f"{duration(p.restore_seconds)} to restore{runner_text}. Why: {answer.why}.")
        lines.append("")
    lines += ["| model · trial | target | jobs | save s | stall s | durable s | restore s | of it the copy-in s | "
              "save GB/s | load GB/s | GiB a checkpoint | cost |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in targets:
        gib = f"{t.bytes_per_checkpoint / GIB:,.4f}" if t.bytes_per_checkpoint else "-"
        lines.append(f"| {t.model} · {t.trial} | {t.label} | {t.completed}/{t.jobs} | {_fmt(t.save_seconds, 3)} | "
                     f"{_fmt(t.stall_seconds, 3)} | {_fmt(t.durable_seconds, 3)} | {_fmt(t.restore_seconds, 3)} | "
                     f"{_fmt(t.copy_in_seconds, 3)} | "
                     f"{_fmt(t.save_gb_per_second, 2)} | {_fmt(t.load_gb_per_second, 2)} | {gib} | {usd(t.cost_usd)} |")
    lines += ["", "save: each checkpoint's slowest rank, from its start to its last fsync (MLPerf Storage's \"maximum time "
              "across all GPUs\"); stall: how long the host waited for all its ranks (the sync: the write to the "
              "instance's volume; the upload ran behind the script); durable: until a restore could count on the save (the "
              "sync: until the writer saw every file of it listed in S3, which SageMaker does not finish once the job "
              "ends, so the writer waits for it; FSx and EFS: the save); restore: a new job back at the checkpoint (the sync: "
              "the restore job's copy-in of the S3 URI, reported as Downloading, then its reads; FSx and EFS: the restore "
              "job's reads on a new instance, or the writer's own without one, another host's files where there are "
              "several). GB/s: the whole checkpoint's GiB (1024³ bytes, which DLIO calls GB) over the save or load. Means over the checkpoints and the repeats.", ""]
    failed = [f for t in targets for f in t.failures]
    if failed:
        lines += [f"- failed: {_cell(f)}" for f in failed] + [""]
    return lines


def storage_optimization_note(found: dict[str, Any]) -> str:
    """The mark on a run's FSx results when FSx was optimizing while the run read it: rebalancing its storage after a
    capacity increase, or moving to a new throughput tier (a FILE_SYSTEM_UPDATE of PerUnitStorageThroughput)."""
    progress = found.get("progress_percent")
    how = f"{progress}% done" if progress is not None else str(found.get("status") or "running")
    fsx = f"FSx {found.get('file_system', '')}".rstrip()
    if found.get("action") == "FILE_SYSTEM_UPDATE":
        tier = found.get("target_mbps_per_tib")
        towards = f" to {tier} MB/s/TiB" if tier is not None else ""
        return (f"{fsx} was changing its throughput tier{towards} when this run started ({how}): \"Your read operations "
                "will see disk I/O performance between the previous level and the new level until your file system is "
                "no longer in this state\" (FSx for Lustre User Guide, monitoring-throughput-capacity-changes.html), so "
                "its FSx figures are neither tier's: run the FSx jobs again once `dslab fsx status` shows the change "
                "COMPLETED")
    return (f"{fsx} was rebalancing its storage after a capacity increase when this run "
            f"started ({how}): \"you might see decreased file system performance\" until it completes (FSx for Lustre "
            "User Guide), so its FSx figures may be below what it gives afterwards: run the FSx jobs again once "
            "`dslab fsx status` shows it done")


def markdown(results: dict[str, Any], rows: list[dict[str, Any]], answers: Answers) -> str:
    from .core.answer.decision import usd
    experiment = results.get("experiment", {})
    summary = summarise(results["records"])
    lines = [f"# DataSourceLab report: {experiment.get('name', 'experiment')}", "", "## Answer", ""]
    if results["backend"] == "local":
        lines += [f"> **{LOCAL_NOTE}**{shared_cpus(results)}", ""]
    if results.get("partial"):
        lines += [f"> **{partial_note(results)}**", ""]
    if results.get("read_as"):
        lines += [f"> {read_as_note(results['read_as'])}", ""]
    if results.get("resumed"):
        resumed = results["resumed"]
        lines += [f"> Resumed: {resumed['kept']} jobs kept from the interrupted attempt, {resumed['ran']} run in "
                  f"attempt {resumed['attempt']} (their logs under jobs/; superseded attempts' under "
                  "jobs/attempt-N/).", ""]
    optimizing = results.get("fsx_storage_optimization")
    if optimizing:
        lines += [f"> **{storage_optimization_note(optimizing)}**", ""]
    reads = bool(rows) or not any(r.get("checkpoint_target") for r in results["records"])   # jobs that read data
    if reads:
        lines += ["Cost to a result is what one run pays: its jobs (measured) and its set-up (priced from the dataset's "
                  "files and bytes: the copy into EFS, the staging copy into the directory bucket, FSx's uptime while it "
                  "imports). A source that needs more than the S3 bucket is picked only when it saves enough to be worth it.", ""]
    lines += [f"Priced on {answers.lab.describe()}.", ""]
    lines += answer_lines(answers)
    lines += checkpoint_lines(results, answers)
    prices = results.get("prices", {})
    lines += ["## The run", "",
              f"- backend: **{results['backend']}**; execution: `{results.get('execution', '-')}`",
              f"- experiment hash: `{results.get('experiment_hash', '-')}`; code version: `{results.get('code_version', '-')}`",
              f"- prices: {prices.get('date', '-')} ({prices.get('region', '-')}): {prices.get('source', '-')}",
              f"- {summary['message'].split(';')[0]}; total cost ${summary['cost_usd']:.4f}",
              *workload_lines(experiment, rows), ""]
    if not reads:   # checkpoint trials only: their section above is the report
        failures = [f"- {r['job_name']}: {_cell(r.get('failure_reason') or r['status'])}" for r in results["records"]
                    if r["status"] != "Completed"]
        return "\n".join(lines + (["## Failed and skipped jobs", "", *failures, ""] if failures else []))
    lines += ["## Time per data source (one instance's seconds, mean over completed repeats)", "",
              "| dataset | source | runs | downloading | training | other | billable | spread of the runs | samples/s | MB/s | AU % | end-to-end % | 1st batch s | status |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        flag = " ⚠ repeats disagree >5%" if r["disagree"] else ""
        slow = " ⚠ >10% of the epoch" if r["slow_first_batch"] else ""
        lines.append(f"| {r['dataset']} | {r['mode']} | {r['completed']}/{r['runs']} | {_fmt(r['downloading'])} | "
                     f"{_fmt(r['training'])} | {_fmt(r['other'])} | {_fmt(r['billable_mean'])} | {r['billable'].describe() if r['billable'] else '-'}{flag} | "
                     f"{_fmt(r['samples_per_second'])} | {_fmt(r['mb_per_second'])} | {_fmt(r['au_percent'])} | "
                     f"{_fmt(r['end_to_end_percent'])} | {_fmt(r['first_batch_seconds'])}{slow} | {', '.join(r['statuses'])} |")
    lines += ["", "Every figure is one instance's, as SageMaker reports it: downloading, training and other are the "
              "wall seconds of its status transitions (never scaled to the billable time); billable is "
              "BillableTimeInSeconds, one instance's wall clock after any spot saving, so the instances cost "
              "billable x instances x the hourly price. Spread of the runs: one run has none measured (n/a: "
              "`repeats: 3` or `--repeats 3` measures it); two "
              "show their min–max; from three, also the mean's 95% confidence interval (Student's t). Billable time "
              "counts whole seconds. MLPerf Storage reports the mean of 5 runs on the same machine(s), which "
              "SageMaker jobs cannot promise: these are not MLPerf Storage results."]
    saved = [r for r in rows if r.get("spot_saving")]
    if saved:   # DescribeTrainingJob: "(1 - BillableTimeInSeconds / TrainingTimeInSeconds) * 100"
        lines += ["", "Managed spot training saved " + "; ".join(
            f"{r['dataset']} / {r['mode']} {r['spot_saving']:.0%}" for r in saved)
            + " (1 - billable / training time): its bars stay the wall seconds the instances ran."]
    lines += ["", "AU (MLPerf Storage) leaves the first step out; end-to-end % is compute over the whole epoch, "
              "first batch included. Sources are ranked below by what a result costs, not by AU.", "",
              "![Downloading / Training / Other per mode](breakdown.png)", "",
              "## Ranking by cost to a result (measured jobs, priced set-up)", "",
              "| dataset | rank | source | jobs | set-up | cost to a result | time to a result | note |",
              "|---|---|---|---|---|---|---|---|"]
    for m in answers.measured:
        if m.decision is None:
            continue
        for rank, o in enumerate(m.decision.ranking, 1):
            lines.append(f"| {m.label} | {rank} | {o.source} | {usd(o.job_usd)} | {usd(o.setup.usd)} | {usd(o.cost_usd)} | "
                         f"{duration(o.seconds)} | {_cell(m.decision.note(o))} |")
    lines += ["", "## Cost per job (US dollars, mean)", "",
              "| dataset | source | instance | storage (volume, FSx uptime, Express copy) | requests | total |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['mode']} | {_fmt(r['cost_instance'], 4, '$')} | {_fmt(r['cost_storage'], 4, '$')} | "
                     f"{_fmt(r['cost_requests'], 4, '$')} | {_fmt(r['cost_total'], 4, '$')} |")
    scale = scaling(data_records(results["records"]))
    if scale:
        lines += ["", "## Scaling: the same source on more instances", "",
                  "| dataset | source | instances | aggregate samples/s | speed-up | AU % per instance (mean) | AU % (lowest host) |",
                  "|---|---|---|---|---|---|---|"]
        for r in scale:
            lines.append(f"| {r['dataset']} | {r['source']}{REPLICATED_MARK if r['replicated'] else ''} | {r['instances']} | "
                         f"{_fmt(r['samples_per_second'])} | "
                         f"{_fmt(r['speedup'], 2)}{'x' if r['speedup'] else ''} | {_fmt(r['au_mean'])} | {_fmt(r['au_min'])} |")
        lines += ["", "Each instance runs every accelerator of its type (MLPerf Storage's simulated accelerators); "
                  "a source that shares its limits among the instances shows it as falling AU."]
        if any(r["replicated"] for r in scale):
            lines += ["", "**Replicated:** those rows ran their S3 channel FullyReplicated, as the experiment set it: every "
                      "instance downloads or streams the whole dataset (S3DataSource: \"the entire dataset on each ML "
                      "compute instance\"). `dslab size` and `dslab estimate` model a cluster's S3 channels sharded by default "
                      "(ShardedByS3Key, each instance about 1/n of the objects), so these rows do not measure what they "
                      "model; `distribution: auto` (the experiment's default) shards them."]
        lines += ["", "![Aggregate throughput and AU per instance against instances](scaling.png)"]
    failures = [(r, reason) for r in rows for reason in r["reasons"]]
    if failures:
        lines += ["", "## Failed and skipped jobs", ""]
        lines += [f"- {r['dataset']} / {r['mode']}: {_cell(reason)}" for r, reason in failures]
    lines += measured_beside_estimated(answers)
    if answers.estimated:
        lines += ["", "## The same experiment on AWS, estimated (not measured)", "",
                  "| dataset | rank | source | downloading | training | other | billable | job | set-up | cost to a result (range) | "
                  "time to a result | bound | note |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for a in answers.estimated:
            if a.decision is None:
                lines.append(f"| {a.scenario.label} | - | - | | | | | | | | | | {_cell(a.missing)} |")
                continue
            for rank, o in enumerate(a.decision.ranking, 1):
                e = a.answer.source(o.source).estimate
                lines.append(f"| {a.scenario.label} | {rank} | {o.source} | {_fmt(e.downloading)} | {_fmt(e.training)} | "
                             f"{_fmt(e.other)} | {_fmt(e.billable_seconds)} | {usd(o.job_usd)} | {usd(o.setup.usd)} | "
                             f"{usd(o.cost_usd)}{_range(o)} | {duration(o.seconds)} | {e.bound} | {_cell(a.decision.note(o))} |")
    lines.append("")
    return "\n".join(lines)


def measured_beside_estimated(answers: Answers) -> list[str]:
    """Each completed job of an AWS run: the estimate for its own premise beside what it measured, and where the
    measurement fell outside the estimate's range, the constants the phase that moved rests on."""
    if answers.unchecked:
        return ["", "## Measured beside estimated", "", f"Not compared: {_cell(answers.unchecked)}"]
    if not answers.checked:
        return []
    from .core.measured import ranged_constants
    lines = ["", "## Measured beside estimated", "",
             "Each completed job's estimate for its own premise (its instance, count, epochs and compute, the dataset "
             "as the run found it, the FSx and EFS it ran on), with "
             f"{answers.experiment.calibration.describe()}: one instance's seconds, as SageMaker reports them (the "
             "training time, which is the billable time unless spot saved some), then each phase as measured / "
             "estimated.",
             "", "| job | source | instances | measured | estimated (range) | error | inside | downloading | training | "
             "other |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in answers.checked:
        low, high = c.estimated_range or (c.estimated, c.estimated)
        phases = [f"{_fmt(p.measured)} / {_fmt(p.estimated)}" for p in c.phases]
        lines.append(f"| {c.job.job} | {c.job.source} | {c.job.premise.instance_count} x {c.job.premise.instance_type} | "
                     f"{_fmt(c.measured)} | {_fmt(c.estimated)} ({_fmt(low)}-{_fmt(high)}) | {c.error:+.1%} | "
                     f"{'yes' if c.inside else '**no**'} | " + " | ".join(phases) + " |")
    errors = [abs(c.error) for c in answers.checked]
    inside = sum(bool(c.inside) for c in answers.checked)
    lines += ["", f"{inside} of {len(errors)} jobs inside the estimate's range; mean error {sum(errors) / len(errors):.1%}."]
    ranges = ranged_constants()
    model = answers.experiment.calibration.model
    outside = [(c, line) for c in answers.checked for line in c.phase_lines(ranges, model)]
    if outside:
        lines += ["", "Phases far from their estimate, and what each rests on:", ""]
        lines += [f"- {c.job.job} ({c.job.source}): {_cell(line)}" for c, line in outside]
        lines += ["", "`dslab calibrate --results results.json --out calibration.json` fits these constants on this run."]
    return lines


def read_as_note(found: dict[str, Any]) -> str:
    """What a results file of an older schema version was read as (core.results.read_results): said, never silent."""
    changed = found.get("records_changed") or []
    said = f"Read from results schema version {found['from_version']} ({found['backend']} run) as version " \
           f"{found['to_version']}"
    if not changed:
        return f"{said}: every record reads as it was written (one instance each, no spot saving)."
    return (f"{said}: {len(changed)} record{'s' if len(changed) != 1 else ''} read differently "
            f"({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}). {found['how']}")


def partial_note(results: dict[str, Any]) -> str:
    """"Partial: interrupted at 9/14 jobs: ..." for results that hold only the jobs that finished."""
    partial = results["partial"]
    left = partial["total"] - partial["done"]
    text = (f"Partial: {partial['reason']} at {partial['done']}/{partial['total']} jobs. The answer and the tables "
            f"rest on the {partial['done']} that finished")
    if results.get("backend") == "local" and partial["reason"] == INTERRUPTED:
        text += (f"; the same `dslab local` command with the same --out runs the other {left} and keeps these "
                 "(--fresh starts over)")
    return text + "."


INTERRUPTED = "interrupted"


# The page's own stylesheet (no file beside it, no network): the answer first, in a box a reader sees without
# scrolling; compact notes; tables that scroll inside themselves rather than widen the page, with a header row that
# stays in view; charts scaled to the width. tests/test_report_page.py opens the page in headless Chromium.
REPORT_CSS = """
:root{color-scheme:light;--line:#d0d7de;--muted:#57606a}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1180px;padding:14px 24px 48px;color:#1f2328;background:#fff;
 font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
h1{font-size:1.4em;margin:.2em 0 .5em}
h2{font-size:1.2em;margin:1.6em 0 .5em;padding-bottom:.2em;border-bottom:1px solid var(--line)}
h3{font-size:1.05em;margin:.9em 0 .2em}
p,ul{margin:.4em 0}
ul{padding-left:1.3em}
li{margin:.15em 0}
section.answer{border:1px solid #9ec5fe;background:#f4f8ff;border-radius:6px;padding:2px 18px 8px;margin-bottom:1.2em}
section.answer h2{margin-top:.5em;border:0}
section.answer>p,blockquote{font-size:13px;color:var(--muted)}
section.answer li:first-child{font-size:16px;color:#1f2328}
blockquote{margin:.5em 0;padding:5px 10px;background:#fff8e1;border-left:4px solid #d4a72c}
blockquote p{margin:0}
table{display:block;max-width:100%;overflow:auto;max-height:80vh;border-collapse:collapse;margin:.6em 0 1.2em;
 font-size:13px;font-variant-numeric:tabular-nums}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{position:sticky;top:0;background:#f6f8fa;white-space:nowrap}
tbody tr:nth-child(even){background:#fafbfc}
img{display:block;max-width:100%;height:auto;margin:.6em 0;border:1px solid var(--line)}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f3f4f6;padding:0 3px;border-radius:3px}
@media print{section.answer{break-inside:avoid}table{display:table;max-height:none;overflow:visible}th{position:static}}
"""


def _sections(body: str) -> str:
    """Each `## ...` part of the page in a <section> (the Answer's marked, for the stylesheet)."""
    head, *parts = body.split("<h2>")
    out = [head]
    for part in parts:
        title = part.split("</h2>", 1)[0]
        css = " class='answer'" if title == "Answer" else ""
        out.append(f"<section{css}><h2>{part}</section>")
    return "".join(out)


def html_document(markdown_text: str, chart_png: bytes, title: str, scaling_png: bytes | None = None) -> str:
    """A self-contained page: the Markdown rendered by markdown-it (CommonMark with tables), the charts
    embedded as data, and the page's own stylesheet (REPORT_CSS)."""
    from markdown_it import MarkdownIt
    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    data = base64.b64encode(chart_png).decode()
    text = markdown_text.replace("](breakdown.png)", f"](data:image/png;base64,{data})")
    if scaling_png is not None:
        text = text.replace("](scaling.png)", f"](data:image/png;base64,{base64.b64encode(scaling_png).decode()})")
    body = _sections(renderer.render(text))
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>"
            f"<style>{' '.join(REPORT_CSS.split())}</style></head><body>{body}</body></html>")


def write_report(results: dict[str, Any], out: Path, calibration: Any = None) -> dict[str, Path]:
    """Write every output into ``out``; returns their paths. The same results give the same report,
    whoever writes it (`dslab local`, the workflow's results through `dslab report`). ``calibration``: the constants
    its estimates use (default: the run's experiment's, else the shipped ones)."""
    validate_results(results)
    results = read_results(results)   # before anything is written: records that mix versions are refused
    out.mkdir(parents=True, exist_ok=True)
    rows = aggregate(data_records(results["records"]))
    answers = Answers(results, rows, calibration)
    title = f"{results.get('experiment', {}).get('name', 'experiment')} ({results['backend']})"
    paths = {name: out / name for name in ("results.json", "results.csv", "report.md", "report.html", "breakdown.png")}
    paths["results.json"].write_text(json.dumps(results, indent=2, default=str))
    paths["results.csv"].write_text(to_csv(results["records"]))
    breakdown_chart(rows, paths["breakdown.png"], f"Time per data source, one instance: {title}")
    scale = scaling(data_records(results["records"]))
    if scale:
        paths["scaling.png"] = out / "scaling.png"
        scaling_chart(scale, paths["scaling.png"], f"Scaling: {title}")
    text = markdown(results, rows, answers)
    paths["report.md"].write_text(text)
    paths["report.html"].write_text(html_document(text, paths["breakdown.png"].read_bytes(), title,
                                                  paths["scaling.png"].read_bytes() if scale else None))
    return paths
