"""Reports: results.json, results.csv, report.md, a self-contained report.html and breakdown.png.

The chart is the source post's: stacked bars of Downloading / Training / Other billable seconds per
mode, grouped by scenario (dataset). With repeats, bars show the mean and the report flags
configurations whose repeats disagree by more than 5%.
"""

from __future__ import annotations

import base64
import html
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .contracts import validate_results
from .core.errors import ConfigError
from .core.modes import SOURCE_ORDER, source_label
from .core.prices import PriceTable
from .core.results import record_from_describe, summarise, to_csv
from .experiment_file import read_json_file

DISAGREEMENT = 0.05
LOCAL_NOTE = ("This is a LOCAL run on the embedded AWS stand-in: its seconds measure loopback networking, "
              "local disk and this machine's CPUs, not AWS. Compare its modes with each other, never with AWS figures.")


def load_results(path: Path) -> dict[str, Any]:
    results = read_json_file(path, "--results")
    try:
        validate_results(results)
    except Exception as err:
        raise ConfigError("--results", f"{path} does not follow the results contract: {str(err).splitlines()[0]}") from None
    return results


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
    return {"experiment": {"name": "imported", "source": str(directory)}, "backend": "aws", "records": records,
            "prices": {"date": prices.date, "source": prices.source, "region": prices.data["region"]}}


# ---- aggregation -----------------------------------------------------------------------------

def source(record: dict[str, Any]) -> str:
    """The data source a record's bars are labelled with: its mode, "Express <mode>" on the directory bucket."""
    return source_label(record["mode"], record.get("storage"))


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
        spread = (max(totals) - min(totals)) if len(totals) > 1 else 0.0
        row = {
            "dataset": dataset, "mode": mode, "runs": len(items), "completed": len(done),
            "statuses": sorted({r["status"] for r in items}),
            "billable_mean": mean, "billable_spread": spread,
            "disagree": bool(mean and len(totals) > 1 and spread / mean > DISAGREEMENT),
            "downloading": _mean(done, lambda r: r["breakdown"]["downloading"]),
            "training": _mean(done, lambda r: r["breakdown"]["training"]),
            "other": _mean(done, lambda r: r["breakdown"]["other"]),
            "samples_per_second": _mean(done, lambda r: r["metrics"].get("samples_per_second")),
            "mb_per_second": _mean(done, lambda r: r["metrics"].get("mb_per_second")),
            "au_percent": _mean(done, lambda r: r["metrics"].get("au_percent")),
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
    """Stacked bars per data source (mode, and storage for the S3 modes), grouped by dataset. Returns what was drawn (for tests and the report)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({r["dataset"] for r in rows})
    modes = sorted({r["mode"] for r in rows}, key=_source_rank)
    drawn = [r for r in rows if r["billable_mean"] is not None]
    width = 0.8 / max(1, len(modes))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(datasets) * max(1, len(modes)) * 0.5 + 2), 4.8), dpi=110)
    colours = {"downloading": "#4C72B0", "training": "#55A868", "other": "#C44E52"}
    bars = []
    for di, dataset in enumerate(datasets):
        for mi, mode in enumerate(modes):
            row = next((r for r in drawn if r["dataset"] == dataset and r["mode"] == mode), None)
            if row is None:
                continue
            x = di + (mi - (len(modes) - 1) / 2) * width
            bottom = 0.0
            for part in ("downloading", "training", "other"):
                value = row[part] or 0.0
                ax.bar(x, value, width * 0.92, bottom=bottom, color=colours[part],
                       label=part.capitalize() if not bars and part else None)
                bottom += value
            if row["billable_spread"]:
                ax.errorbar(x, row["billable_mean"], yerr=row["billable_spread"] / 2, color="black", capsize=3, lw=1)
            ax.text(x, bottom, mode, ha="center", va="bottom", fontsize=7, rotation=90)
            bars.append({"dataset": dataset, "mode": mode, "x": x, "height": bottom})
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[p]) for p in ("downloading", "training", "other")]
    ax.legend(handles, ["Downloading", "Training", "Other"], loc="upper left", fontsize=8)
    ax.set_xticks(range(len(datasets)))
    ax.set_xticklabels(datasets, fontsize=8)
    ax.set_ylabel("billable seconds")
    ax.set_title(title, fontsize=10)
    top = max((b["height"] for b in bars), default=1.0)
    ax.set_ylim(0, top * 1.25)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return {"bars": bars, "datasets": datasets, "modes": modes}


# ---- documents --------------------------------------------------------------------------------

def _fmt(value, digits=1, prefix="") -> str:
    if value is None:
        return "-"
    return f"{prefix}{value:,.{digits}f}"


def markdown(results: dict[str, Any], rows: list[dict[str, Any]], estimates: list[dict[str, Any]] | None) -> str:
    experiment = results.get("experiment", {})
    summary = summarise(results["records"])
    lines = [f"# DataSourceLab report: {experiment.get('name', 'experiment')}", ""]
    if results["backend"] == "local":
        lines += [f"> **{LOCAL_NOTE}**", ""]
    lines += [f"- backend: **{results['backend']}**; execution: `{results.get('execution', '-')}`",
              f"- experiment hash: `{results.get('experiment_hash', '-')}`; code version: `{results.get('code_version', '-')}`",
              f"- prices: {results.get('prices', {}).get('date', '-')} ({results.get('prices', {}).get('region', '-')}): "
              f"{results.get('prices', {}).get('source', '-')}",
              f"- jobs: {summary['message'].split(';')[0]}; total cost ${summary['cost_usd']:.4f}", ""]
    lines += ["## Billable time per data source (seconds, mean over completed repeats)", "",
              "| dataset | source | runs | downloading | training | other | billable | spread | samples/s | MB/s | AU % | end-to-end % | 1st batch s | status |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        flag = " ⚠ repeats disagree >5%" if r["disagree"] else ""
        slow = " ⚠ >10% of the epoch" if r["slow_first_batch"] else ""
        lines.append(f"| {r['dataset']} | {r['mode']} | {r['completed']}/{r['runs']} | {_fmt(r['downloading'])} | "
                     f"{_fmt(r['training'])} | {_fmt(r['other'])} | {_fmt(r['billable_mean'])} | ±{_fmt(r['billable_spread'] / 2 if r['billable_spread'] else 0.0)}{flag} | "
                     f"{_fmt(r['samples_per_second'])} | {_fmt(r['mb_per_second'])} | {_fmt(r['au_percent'])} | "
                     f"{_fmt(r['end_to_end_percent'])} | {_fmt(r['first_batch_seconds'])}{slow} | {', '.join(r['statuses'])} |")
    lines += ["", "AU (MLPerf Storage) leaves the first step out; end-to-end % is compute over the whole epoch, "
              "first batch included. Modes are ranked below by what you pay for, not by AU.", "",
              "## Ranking by cost, then billable time", "", "| dataset | rank | source | cost | billable s |", "|---|---|---|---|---|"]
    rank, current = 0, None
    for r in ranking(rows):
        rank = rank + 1 if r["dataset"] == current else 1
        current = r["dataset"]
        lines.append(f"| {r['dataset']} | {rank} | {r['mode']} | {_fmt(r['cost_total'], 4, '$')} | {_fmt(r['billable_mean'])} |")
    lines += ["", "![Downloading / Training / Other per mode](breakdown.png)", "",
              "## Cost per job (US dollars, mean)", "",
              "| dataset | source | instance | storage (volume, FSx uptime, Express copy) | requests | total |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['mode']} | {_fmt(r['cost_instance'], 4, '$')} | {_fmt(r['cost_storage'], 4, '$')} | "
                     f"{_fmt(r['cost_requests'], 4, '$')} | {_fmt(r['cost_total'], 4, '$')} |")
    failures = [(r, reason) for r in rows for reason in r["reasons"]]
    if failures:
        lines += ["", "## Failed and skipped jobs", ""]
        lines += [f"- {r['dataset']} / {r['mode']}: {reason}" for r, reason in failures]
    if estimates:
        lines += ["", "## The same experiment on AWS, estimated (not measured)", "",
                  "| dataset | source | downloading | training | other | billable | cost | bound |", "|---|---|---|---|---|---|---|---|"]
        for e in estimates:
            lines.append(f"| {e['dataset']} | {e['mode']} | {_fmt(e['downloading'])} | {_fmt(e['training'])} | {_fmt(e['other'])} | "
                         f"{_fmt(e['billable_seconds'])} | {_fmt(e['cost_usd']['total'], 4, '$')} | {e['bound']} |")
    lines.append("")
    return "\n".join(lines)


def html_document(markdown_text: str, chart_png: bytes, title: str) -> str:
    """A self-contained page: the Markdown's tables as HTML, the chart embedded as data."""
    body = []
    in_table = False
    for line in markdown_text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            if not in_table:
                body.append("<table>")
                in_table = True
                body.append("<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cells) + "</tr>")
            else:
                body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
            continue
        if in_table:
            body.append("</table>")
            in_table = False
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("> "):
            body.append(f"<p class='note'>{html.escape(line[2:].strip('*'))}</p>")
        elif line.startswith("!["):
            data = base64.b64encode(chart_png).decode()
            body.append(f"<img alt='Downloading / Training / Other per mode' src='data:image/png;base64,{data}'>")
        elif line.startswith("- "):
            body.append(f"<p>{html.escape(line[2:]).replace('**', '')}</p>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    if in_table:
        body.append("</table>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;font-size:13px;text-align:right}"
             "th{background:#eee}.note{background:#fff3cd;border:1px solid #e0c36a;padding:8px}img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>")


def write_report(results: dict[str, Any], out: Path, estimates: list[dict[str, Any]] | None = None) -> dict[str, Path]:
    """Write every output into ``out``; returns their paths."""
    validate_results(results)
    out.mkdir(parents=True, exist_ok=True)
    rows = aggregate(results["records"])
    title = f"{results.get('experiment', {}).get('name', 'experiment')} ({results['backend']})"
    paths = {name: out / name for name in ("results.json", "results.csv", "report.md", "report.html", "breakdown.png")}
    paths["results.json"].write_text(json.dumps(results, indent=2, default=str))
    paths["results.csv"].write_text(to_csv(results["records"]))
    breakdown_chart(rows, paths["breakdown.png"], f"Billable time per data source: {title}")
    text = markdown(results, rows, estimates)
    paths["report.md"].write_text(text)
    paths["report.html"].write_text(html_document(text, paths["breakdown.png"].read_bytes(), title))
    return paths
