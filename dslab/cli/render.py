"""Views of one ``Answer`` (core/answer/answer.py) for a terminal: the answer in its first line, one table, the
premise in two lines; the why, the passed-over reasons, the assumptions and the ranges behind ``--explain``.

Every line of the default output fits 160 columns (``WIDTH``); `--explain` wraps its sentences to the same width.
Nothing here prices, provisions or picks: each figure is read off the answer.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable, Sequence

from ..core.answer.decision import duration, usd, usd_difference
from ..core.model.estimate import SCRIPT_CONCURRENCY

WIDTH = 160
DIFFERS = "*"   # marks a row where the lab as it stands gives another answer (said under --explain)


def fit(line: str, width: int = WIDTH) -> str:
    """A line cut to ``width`` columns (an ellipsis says it was cut)."""
    return line if len(line) <= width else line[: width - 1] + "…"


def wrap(text: str, indent: str = "  ", width: int = WIDTH) -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=True) or [indent]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """Plain columns, two spaces apart; the columns in ``right`` right-aligned; the last column cut to fit."""
    widths = [max([len(h)] + [len(r[i]) for r in rows if i < len(r)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = []
        for i, cell in enumerate(cells):
            if i == len(cells) - 1 and i >= len(widths) - 1:
                parts.append(cell)
            else:
                parts.append(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]))
        return fit("  ".join(parts).rstrip())
    return [line(headers)] + [line(r) for r in rows]


def cost_range(pair: tuple[float, float] | None) -> str:
    return f"{usd(pair[0])}-{usd(pair[1])}" if pair else "-"


# ---- the data answer -------------------------------------------------------------------------------------------

def headline(answer) -> str:
    """The first line: the pick, its cost to a result with its range, its time to a result (with the set-up's share
    where it is most of it), what it is priced on; the runner-up, and why it is not the pick where it is cheaper."""
    pick, runner = answer.pick, answer.runner_up
    cost = f"answer: {pick.source}, {usd(pick.cost_usd)} per run ({cost_range(pick.cost_range)})"
    first = f"{cost}, {duration(pick.seconds_to_result)} to a result{setup_share(pick)}"
    where = f", as {pick.provisioned_as or 'the lab stands'}"
    if runner is None:
        return fit(first + where) if len(first + where) <= WIDTH else fit(first)
    difference = usd_difference(runner.cost_usd - pick.cost_usd)
    name = f"; runner-up {runner.source}, {usd(runner.cost_usd)}"
    time = f", {duration(runner.seconds_to_result)}"
    full, brief, least = _why_not_runner(answer)
    # What gives way to width, in turn: what the pick is provisioned as (its row says it), the runner-up's time, the
    # weighed figures (the table's column shows them); never why a cheaper runner-up is not the pick.
    for text in (first + where + name + f" ({difference}{full})" + time, first + name + f" ({difference}{full})" + time,
                 first + name + f" ({difference}{full})", first + name + f" ({difference}{brief})",
                 first + name + f" ({difference}{least})"):
        if len(text) <= WIDTH:
            return text
    return fit(text)


# The set-up in a few words, by source: what its time to a result waits for before (or beside) the job.
SETUP_WORDS = {"FSx": "FSx's import", "EFS": "the copy into EFS"}


def setup_share(s) -> str:
    """", 8.3 h of it FSx's import" where the set-up is at least half the time to a result; else nothing."""
    setup = s.option.setup.seconds
    if setup <= 0 or setup < s.seconds_to_result / 2:
        return ""
    what = ("the copy out of EFS" if s.option.data_in_efs and s.mode != "EFS" else
            "the staging copy" if s.storage == "express" else SETUP_WORDS.get(s.mode, "the set-up"))
    return f", {duration(setup)} of it {what}"


def _why_not_runner(answer) -> tuple[str, str, str]:
    """Where the runner-up is cheaper than the pick, why it is not the pick, in a few words and in fewer: its weighed
    cost (the table's order) above the pick's, and what raised it. Nothing where the pick is the cheaper."""
    from ..core.answer.decision import weighed
    pick, runner = answer.pick, answer.runner_up
    if runner.cost_usd >= pick.cost_usd:
        return "", "", ""
    o = runner.option
    reasons = (["its range's top"] if o.pick_usd > o.cost_usd else []) + ([f"{o.margin:.0%} to save"] if o.margin else [])
    why = ", ".join(reasons)
    return (f"; weighed {usd(weighed(o))} > {usd(weighed(pick.option))}: {why}", f"; weighed higher: {why}",
            "; weighed higher")


def legend(answer, weighed_shown: bool) -> str:
    """One line under the table: what its cost and time columns are, and why its rows are in their order."""
    from ..core.answer.decision import INFRA_MARGIN
    keep = 1 - INFRA_MARGIN
    order = "rows by weighed" if weighed_shown else "rows by weighed cost (recommend)"
    return fit(f"cost, time: to a result (job + set-up); {order}: the cost at its range's top with no measured cell, "
               f"/ {keep:g} if it needs its own")


def _compute_short(premise) -> str:
    """The compute in a few words (the whole sentence is under --explain)."""
    said = premise.compute
    if "MLPerf Storage emulates" in said:   # "ResNet-50 on V100 as MLPerf Storage emulates it: ...": the preset's
        on = said.split(" as MLPerf Storage emulates")[0].rsplit(" on ", 1)
        return f"MLPerf Storage {on[1] if len(on) == 2 else (premise.accelerator or 'preset').split()[0]}"
    if "published" in said:
        return "a published training rate"
    if "as DLIO emulates it" in said:
        return "the workload file's compute"
    if said.startswith("the model consumes"):
        return "given"
    if said.endswith("(the experiment's compute)"):
        return "the experiment's compute"
    if "trained for real" in said:
        return said.split(";")[0]
    return said.split(":")[0][:40]


def _lab_name(lab) -> str:
    """The lab as it stands, in a few words: "the lab cdk.json deploys", "the lab as deployed (cdk-outputs.json)"."""
    return "the lab cdk.json deploys" if "cdk.json would" in lab.name else lab.name


# The parts a premise took by default, in its second line's words.
DEFAULT_WORDS = {"instance": "type", "instance_count": "count", "epochs": "epochs", "every": "interval",
                 "keep": "kept", "save_under": "save target"}


def premise_line(p, lead: str = "premise: ") -> str:
    """The question in one line: the cluster, its compute, the epochs, the dataset and (where it fits) where its size
    came from. The whole premise is under --explain."""
    samples, _ = p.shape.sample_count()
    from ..core.shape import format_bytes
    epochs = f"{p.epochs:,} epoch{'s' if p.epochs != 1 else ''}"
    each = f"{p.accelerators} x {p.accelerator}" if p.accelerator else "no accelerator"
    first = (f"{lead}{p.instance_count:,} x {p.instance_type} ({each}) "
             f"at {p.rate:,.0f} samples/s each ({_compute_short(p)}), {epochs}; {p.shape.files:,} files, "
             f"{format_bytes(p.shape.bytes)}, {samples:,} samples")
    for origin in (f" ({p.shape_origin})", f" ({p.shape_origin.split(',')[0].split(';')[0]})", ""):
        if len(first) + len(origin) <= WIDTH:
            first += origin
            break
    return fit(first)


def premise_lines(answer) -> list[str]:
    """The premise in two lines: the question (cluster, compute, epochs, dataset and where it came from), then what it
    is priced on (the rule, the lab as it stands, the defaults taken). The whole premise is under --explain."""
    p = answer.premise
    lines = [premise_line(p), priced_line(f"priced: {answer.rule}", answer.lab, p.defaults)]
    if p.calibration.source:   # a user's file: its own line, so that its path is never cut
        lines.append(fit(f"constants: {p.calibration.describe()}"))
    if p.s3_concurrency is not None:   # asked, not the script's default: every Script row is priced at it
        lines.append(fit(f"script: s3_concurrency {p.s3_concurrency} (GETs in flight a Script job keeps; default "
                         f"{SCRIPT_CONCURRENCY})"))
    return lines


def priced_line(rule: str, lab, defaults) -> str:
    """What an answer is priced on, in one line: the rule, the lab as it stands (its FSx and EFS where they fit), the
    defaults the premise took."""
    taken = [words for part, words in DEFAULT_WORDS.items() if part in defaults]
    tail = f"; defaults: {', '.join(taken)}" if taken else ""
    details = f" (FSx {lab.fsx.short()}, {lab.efs.short()})"
    for said in (details, ""):
        line = f"{rule}; {DIFFERS}: where {_lab_name(lab)}{said} differs{tail}"
        if len(line) <= WIDTH:
            return line
    return fit(line)


def lab_line(rule: str, lab, defaults) -> str:
    """The experiment commands' rule in one line: each job on the lab as it stands, which lab, the defaults taken."""
    taken = [words for part, words in DEFAULT_WORDS.items() if part in defaults]
    tail = f"; defaults: {', '.join(taken)}" if taken else ""
    for said in (f" (FSx {lab.fsx.short()}, {lab.efs.short()})", ""):
        line = f"{rule}: {_lab_name(lab)}{said}{tail}"
        if len(line) <= WIDTH:
            return line
    return fit(line)


def footer(answer) -> str:
    """The last line of every answer: the price table's date, region and what comes from elsewhere (a file's path is
    never cut: it is a command to copy). A calibration file has a premise line of its own; the shipped calibration is
    named in the whole premise (--explain, --json)."""
    return answer.question.prices.footer()


def _provisioned(s) -> str:
    """What the row is priced on, marked where the lab as it stands differs."""
    return s.provisioned_as + (f" {DIFFERS}" if s.differs else "")


def blocked_lines(answer, columns: int) -> list[str]:
    return [fit(f"{'--':>3s}  {s.source:17s} cannot serve: {s.blocker}") for s in answer.sources if s.blocker]


def recommend_lines(answer, explain: bool = False) -> list[str]:
    """`dslab recommend`: the answer, the ranking by the decision's own order (its weighed column), the premise."""
    from ..core.answer.decision import weighed
    rows = [[str(s.rank), s.source, usd(s.cost_usd), cost_range(s.cost_range), usd(weighed(s.option)),
             duration(s.seconds_to_result), duration(s.job_seconds), s.option.bound or "-", _provisioned(s)]
            for s in answer.serving]
    lines = [headline(answer)]
    lines += table(["#", "source", "cost", "range", "weighed", "time", "job time", "bound", "provisioned as"], rows,
                   right=(0, 2, 3, 4, 5, 6))
    lines.append(legend(answer, weighed_shown=True))
    lines += blocked_lines(answer, 8)
    lines += premise_lines(answer)
    lines.append(footer(answer))
    if explain:
        lines += explain_lines(answer)
    return lines


def estimate_lines(answer, shown: Callable[[Any], bool] = lambda s: True, explain: bool = False) -> list[str]:
    """`dslab estimate`: the same answer, each source's phases (one instance's clock, seconds) and dollars."""
    rows = []
    for s in answer.serving:
        if not shown(s):
            continue
        e, o = s.estimate, s.option
        hosts = max(1, e.instance_count)
        rows.append([str(s.rank), s.source, f"{e.downloading / hosts:,.0f}", f"{e.training / hosts:,.0f}",
                     f"{e.other / hosts:,.0f}", usd(o.job_usd), usd(o.setup.usd), usd(o.cost_usd), cost_range(s.cost_range),
                     duration(s.seconds_to_result), duration(s.job_seconds), o.bound or "-", _provisioned(s)])
    lines = [headline(answer)]
    lines += table(["#", "source", "download", "training", "other", "job", "set-up", "cost", "range", "time",
                    "job time", "bound", "provisioned as"], rows, right=(0, 2, 3, 4, 5, 6, 7, 8, 9, 10))
    lines.append(legend(answer, weighed_shown=False))
    lines += [line for line, s in zip(blocked_lines(answer, 14), [s for s in answer.sources if s.blocker]) if shown(s)]
    lines += premise_lines(answer)
    lines.append(footer(answer))
    if explain:
        lines += explain_lines(answer)
    return lines


def _largest(n: int, per_instance: int) -> str:
    from ..core.answer.sizing import MAX_CLUSTER
    return f">={MAX_CLUSTER:,}" if n >= MAX_CLUSTER else f"{n:,}"


def size_lines(answer, *, as_deployed: bool = False, explain: bool = False) -> list[str]:
    """`dslab size`: the same answer, each source's AU at this cluster, the largest cluster it feeds, its cost and
    times, what it is provisioned as (``as_deployed``: every figure on the lab as it stands instead)."""
    sizing = answer.sizing
    target = f"{sizing.au_target:g}%"
    rows = []
    for s in answer.serving:
        if as_deployed:
            d, o = s.sized.deployed, s.deployed
            if o.blocker:
                continue
            rows.append([str(s.rank), s.source, f"{d['au_percent']:.1f}%", _largest(d["max_instances_at_target_au"], 1),
                         usd(o.cost_usd), "-", duration(o.seconds), duration(o.job_seconds), d["premise"]])
            continue
        rows.append([str(s.rank), s.source, f"{s.sized.au_percent:.1f}%", _largest(s.sized.max_instances_at_target_au, 1),
                     usd(s.cost_usd), cost_range(s.cost_range), duration(s.seconds_to_result), duration(s.job_seconds),
                     _provisioned(s)])
    lines = [headline(answer)]
    heading = "as the lab stands" if as_deployed else "provisioned as"
    lines += table(["#", "source", "AU", f"largest at AU>={target}", "cost", "range", "time", "job time",
                    heading], rows, right=(0, 2, 3, 4, 5, 6, 7))
    lines.append(legend(answer, weighed_shown=False))
    if as_deployed:
        lines += [fit(f"{'--':>3s}  {s.source:17s} cannot run as the lab stands: {s.deployed.blocker}")
                  for s in answer.sources if s.deployed.blocker]
    else:
        lines += blocked_lines(answer, 10)
    pick = answer.pick
    if not as_deployed and pick.commands:
        lines.append(fit(f"to provision {pick.source}: {pick.commands[0]}"
                         + (f" (and {len(pick.commands) - 1} more: --explain)" if len(pick.commands) > 1 else "")))
    lines.append(fit(f"demand: each instance asks {sizing.demand_mbps_per_host:,.0f} MB/s "
                     f"({sizing.demand_objects_per_host:,.0f} objects/s) for {sizing.accelerators} accelerator(s); largest: "
                     f"the most instances fed at AU >= {target}, each source provisioned for them"))
    lines += premise_lines(answer)
    lines.append(footer(answer))
    if explain:
        lines += explain_lines(answer, provisioning=True)
    return lines


def explain_lines(answer, provisioning: bool = False) -> list[str]:
    """What the default output leaves out: the why, the runner-up, the passed-over reasons, precision, the post's
    flowchart, advice, where the lab as it stands differs and what provisions each source, the ranges and their
    evidence, the assumptions, the whole premise."""
    d = answer.decision
    out = ["", "why:"]
    out += wrap(f"{answer.pick.source}: {d.why}")
    for source, why in d.passed_over.items():
        out += wrap(f"{source}: {why}")
    if d.noise:
        out += wrap(f"precision: {d.noise}")
    agrees = ("agrees" if answer.flowchart_source == d.pick.mode and d.pick.storage == "standard" else
              f"the estimates pick {d.pick.source} instead, for the reason above")
    out += wrap(f"the post's flowchart: {'; '.join(answer.flowchart)} ({agrees})")
    if answer.break_even is not None:
        out += wrap(f"FSx against Express FastFile, by epochs: {answer.break_even.sentence()}")
    if answer.advice:
        out.append("advice:")
        for line in answer.advice:
            out += wrap(line)
    differing = [s for s in answer.sources if s.differs or s.commands or (provisioning and s.sized.provision)]
    if provisioning:
        out += provision_lines(answer)
    elif differing:
        out.append("provisioned for this question, and the lab as it stands:")
        for s in differing:
            text = f"{s.source}: {s.sized.provision or s.provisioned_as}"
            if s.differs:
                text += f"; {s.differs}"
            for command in s.commands:
                text += f"; `{command}`"
            out += wrap(text)
    out.append("ranges (where one run may fall) and their evidence:")
    for s in answer.serving:
        r = s.estimate.range
        if r is not None:
            out += wrap(f"{s.source}: {r.billable_low:,.0f}-{r.billable_high:,.0f} billable s, "
                        f"{cost_range(s.cost_range)} to a result: {r.summary()}")
    said: dict[str, str] = {}
    for s in answer.serving:
        r = s.estimate.range
        for a, value, _ in (r.moves if r is not None else ()):
            said.setdefault(a.what, a.describe(value))
    for text in said.values():
        out += wrap(f"range: {text}")
    out.append("assumptions:")
    notes = dict.fromkeys(line for s in answer.sources for line in s.sized.assumptions)
    for line in [answer.premise.compute, *answer.assumptions, *notes, *answer.sizing.notes]:
        out += wrap(line)
    out.append("the whole premise, as every answer of this question states it:")
    out += wrap(answer.premise.describe(), indent="")
    return out


# How the commands an answer gives begin where they are for a shell (the rest are steps in words).
SHELL_COMMANDS = ("make ", "dslab ", ".venv/bin/dslab ", "aws ", "node_modules/", "cdk ", "npx ")


def command_lines(label: str, command: str, note: str = "") -> list[str]:
    """A command to copy, under its label: on the label's line where it fits, else on its own line below; a command
    longer than a line is split at a space with a backslash-newline, which the shell removes (inside double quotes
    too), with the next part at the line's start so that nothing is added to a quoted CONTEXT."""
    line = f"  {label:17s} {command}{note}"
    if len(line) <= WIDTH:
        return [line]
    # The label, then the command (its own lines), then the note: a command on its line is whole to copy.
    out = [f"  {label}"] if label.strip() else []
    after = [fit(f"    {note.strip()}")] if note.strip() else []
    if not command.startswith(SHELL_COMMANDS):   # words to follow (a support case and its URL): wrapped, never split
        return out + textwrap.wrap(command, width=WIDTH, initial_indent="    ", subsequent_indent="    ",
                                   break_long_words=False, break_on_hyphens=False) + after
    indent, rest = "    ", command
    while len(indent) + len(rest) > WIDTH:
        cut = rest.rfind(" ", 0, WIDTH - len(indent) - 2)
        if cut <= 0:
            break
        out.append(f"{indent}{rest[:cut + 1]}\\")
        indent, rest = "", rest[cut + 1:]
    out.append(indent + rest)
    return out + after


def provision_lines(answer) -> list[str]:
    """`dslab size --explain`: what each source is provisioned as and the commands that provision it, row by row (a
    row the lab already provisions says so), where several rows deploy the one deploy that sets them all, and what a
    deploy's CONTEXT holds. Commands are never cut or wrapped: they are for copying."""
    from ..core.answer.sizing import CONTEXT_HOLDS
    out = ["provisioned for this question, and the lab as it stands:"]
    for s in answer.sources:
        text = f"{s.source}: {s.sized.provision or s.provisioned_as}"
        if s.differs:
            text += f"; {s.differs}"
        out += wrap(text)
    count = answer.premise.instance_count
    out.append(f"to provision for {count} instance(s):")
    said = False
    for s in answer.sources:
        if s.sized.unchanged:
            out.append(f"  {s.source:17s} {s.sized.unchanged}")
            said = True
        for command in s.commands:
            standing = (f"  # ${s.sized.standing_usd_per_hour:,.2f}/hour while it stands"
                        if s.sized.standing_usd_per_hour and command.startswith("make deploy") else "")
            out += command_lines(s.source, command, standing)
            said = True
    if not said:
        out.append("  nothing: every source feeds them as the lab stands")
    combined = answer.sizing.combined_deploy()
    if combined:
        standing = (f"  # ${combined['standing_usd_per_hour']:,.2f}/hour while it stands"
                    if combined["standing_usd_per_hour"] else "")
        out += wrap(f"{' + '.join(combined['sources'])} together (one deploy sets them all: run it instead of the "
                    "separate deploys, which undo each other):")
        out += command_lines("", combined["command"], standing)
    if any(s.sized.deploy_settings for s in answer.sources):
        out += wrap(CONTEXT_HOLDS)
    return out


def print_lines(lines: list[str]) -> None:
    for line in lines:
        print(line)


__all__ = ["WIDTH", "DIFFERS", "cost_range", "estimate_lines", "explain_lines", "fit", "headline", "premise_lines",
           "print_lines", "recommend_lines", "size_lines", "table", "wrap"]
