"""`estimate`, `recommend` and `size` for a checkpointing --workload: where its checkpoints should go on the cluster,
every K minutes. Each is a view of one ``CheckpointAnswer`` (core/answer/checkpoints.py): the answer in its first
line, one table, the premise in two lines; the rest behind --explain."""

from __future__ import annotations

from ..core.answer.decision import duration
from .common import print_ignored, print_json
from .question import workload_json
from .render import DIFFERS, WIDTH, fit, print_lines, table, wrap


def _seconds(value: float) -> str:
    return f"{value:,.1f} s" if value < 120 else duration(value)


def _short(estimate) -> str:
    """What a target is priced on, in a few words for a table."""
    text = estimate.provision
    if text.startswith("the lab's data bucket"):
        return "data bucket"
    if text.startswith("the lab's S3 Express"):
        return "directory bucket"
    if estimate.target == "fsx":
        kind, size = text.split(", ")[:2]
        kind = "Scratch 2" if kind.startswith("Scratch") else "P2-" + kind.split()[2]
        return f"FSx {kind} {size.split(' (')[0]}"
    return text


def headline(answer) -> str:
    c = answer.premise.checkpoint
    every = f"{c.every_seconds / 60:g} min" if c.every_seconds >= 60 else f"{c.every_seconds:g} s"
    if answer.pick is None:
        return fit(f"answer: none of the targets keeps up with a save every {every}: {answer.why}")
    p = answer.pick.estimate
    text = (f"answer: checkpoints every {every} go to {p.label} ({_short(p)}): ${p.usd_per_day:,.2f} a day, "
            f"{_seconds(p.stall_seconds)} stall a save, {_seconds(p.restore_seconds)} to restore")
    if answer.runner_up is not None:
        r = answer.runner_up.estimate
        runner = f"; runner-up {r.label}, ${r.usd_per_day:,.2f} (+${r.usd_per_day - p.usd_per_day:,.2f})"
        # What the pick is provisioned as (its row says it) gives way to width before the runner-up does.
        shorter = text.replace(f" ({_short(p)})", "", 1)
        text = text + runner if len(text + runner) <= WIDTH else shorter + runner
    return fit(text)


def premise_line(p, lead: str = "premise: ") -> str:
    """A checkpoint question in one line: the cluster, the workload's ranks and checkpoint, how often and how many
    are kept. The whole premise is under --explain."""
    c = p.checkpoint
    plan = c.plan
    from ..core.workloads.checkpoint import GIB
    every = f"{c.every_seconds / 60:g} min" if c.every_seconds >= 60 else f"{c.every_seconds:g} s"
    cluster = f"{p.instance_count:,} x {p.instance_type}"
    rest = (f"{plan.workload.name}: {plan.processes:,} ranks, {plan.files:,} files, {plan.bytes / GIB:,.1f} GiB a "
            f"checkpoint; a save every {every}, the last {c.keep} kept"
            + (f", each within {c.save_under:g} s" if c.save_under else ""))
    full = f"{lead}{cluster} ({p.accelerators} x {p.accelerator or 'no accelerator'}); {rest}"
    # The accelerators (the instance names them) give way to width first.
    return full if len(full) <= WIDTH else fit(f"{lead}{cluster}; {rest}")


def premise_lines(answer) -> list[str]:
    from .render import priced_line
    second = priced_line("priced: each target as provisioned for this question (FSx, EFS: the cheapest day)",
                         answer.question.question.lab, answer.premise.defaults)
    return [premise_line(answer.premise), fit(second)]


def table_lines(answer, *, commands: bool = False) -> list[str]:
    rows = []
    for t in answer.targets:
        e = t.estimate
        rank = str(t.rank) if t.rank else "--"
        if e.blocker:
            rows.append([rank, e.label, "-", "-", "-", "-", "-", f"cannot: {e.blocker}"])
            continue
        provisioned = _short(e) + (f" {DIFFERS}" if t.differs else "") + (" (cannot keep up)" if e.warnings else "")
        rows.append([rank, e.label, _seconds(e.save_seconds), _seconds(e.stall_seconds), _seconds(e.restore_seconds),
                     f"${e.idle_usd_per_save:,.2f}", f"${e.usd_per_day:,.2f}", provisioned])
    # durable: until a restore can count on the save (SageMaker's sync: written, then uploaded; FSx, EFS: written).
    lines = table(["#", "target", "durable", "stall", "restore", "idle/save", "a day", "provisioned as"], rows,
                  right=(0, 2, 3, 4, 5, 6))
    if commands:
        for t in answer.targets:
            command = t.estimate.command() if not t.estimate.blocker else None
            if command:
                lines.append(fit(f"to provision {t.label}: {command}"))
            if t.estimate.quota:
                lines.append(fit(f"  first: {t.estimate.quota['summary']}: {t.estimate.quota['command']}"))
    elif answer.pick is not None and answer.pick.estimate.command():
        lines.append(fit(f"to provision {answer.pick.label}: {answer.pick.estimate.command()}"))
    return lines


def explain_lines(answer) -> list[str]:
    out = ["", "why:"]
    out += wrap(answer.why)
    for name, why in answer.passed_over.items():
        out += wrap(f"passed over: {name}: {why}")
    out += wrap("durable: until a restore can count on a save (SageMaker's sync: written to the volume, then uploaded, "
                "which SageMaker does not finish once a job ends; FSx, EFS: written and fsynced); stall: what training "
                "waits for it", indent="")
    out.append("each target, as provisioned and as the lab stands:")
    for t in answer.targets:
        e = t.estimate
        text = f"{e.label}: {e.provision} ({e.premise}); save bound by {e.bound or '-'}"
        if t.differs:
            text += f"; {t.differs}"
        for w in e.warnings:
            text += f"; ! {w}"
        out += wrap(text)
    out.append("assumptions:")
    for line in dict.fromkeys(a for t in answer.targets for a in t.estimate.assumptions):
        out += wrap(line)
    out += wrap("save: until the checkpoint is whole on the target (the sync: written to the instance's volume, then "
                "uploaded behind the script); stall: what training waits; restore: a new job back at the last checkpoint "
                "(the sync: SageMaker's copy-in of the S3 URI, then the read); idle/save: the cluster's instances during "
                "a stall; a day: idle, storage of the checkpoints kept (FSx: its capacity; EFS Provisioned: its "
                "throughput) and requests at the interval")
    out.append("the whole premise, as every answer of this question states it:")
    out += wrap(answer.premise.describe(), indent="")
    for line in answer.premise.checkpoint.plan.describe():
        out += wrap(line)
    return out


def answer_lines(answer, *, commands: bool = False, explain: bool = False) -> list[str]:
    lines = [headline(answer)] + table_lines(answer, commands=commands) + premise_lines(answer)
    lines.append(answer.question.question.prices.footer())
    if explain:
        lines += explain_lines(answer)
    return lines


def show(question, *, json: bool, explain: bool, commands: bool) -> int:
    """A checkpoint question (cli/asked.py ask: the flags read once) answered and printed: the
    answer's --json, or its view (``commands``: with the deploy command of each target, as `dslab size` prints)."""
    from ..core.answer.checkpoints import checkpoint_answer
    answer = checkpoint_answer(question)
    if json:
        print_json({**answer.to_dict(), "workload": workload_json(question.workload)})
        return 0 if answer.pick else 1
    print_lines(answer_lines(answer, commands=commands, explain=explain))
    print_ignored([question.workload], brief=not explain)
    return 0 if answer.pick else 1


def trial_answer(trial, lab, prices, calibration=None):
    """A checkpoint trial's answer (`recommend --experiment`, the report): where its checkpoints at the workload's full
    size go on its cluster, every 30 minutes, the last 2 kept."""
    from ..core.answer.checkpoints import trial_checkpoint_answer
    return trial_checkpoint_answer(trial, lab, prices, calibration)


def print_trial_answer(trial, lab, prices, *, explain: bool = False, calibration=None) -> None:
    answer = trial_answer(trial, lab, prices, calibration)
    print(f"== {trial.name} (checkpoints to {', '.join(trial.checkpoint.targets)}; at the workload's full size)")
    print_lines(answer_lines(answer, explain=explain))
