"""`estimate`, `recommend` and `size` for a checkpointing --workload: where its checkpoints should go on the cluster,
every K minutes (core/model/checkpoint_estimate.py), on the premise every answer prints first (question.py)."""

from __future__ import annotations

from ..core.model.checkpoint_estimate import Question, option_name
from .common import print_json
from .question import premise_json, premise_of, workload_of


def question_of(args, prices):
    premise = premise_of(args, prices=prices)
    c = premise.checkpoint
    return premise, Question(c.plan, premise.instance_type, c.every_seconds, c.keep, prices, premise.lab,
                             premise.volume_size_gb)


def _seconds(value: float) -> str:
    from ..report import duration
    return f"{value:,.1f} s" if value < 120 else duration(value)


def _header() -> str:
    return (f"{'target':13s} {'save':>9s} {'stall':>9s} {'restore':>9s} {'idle/save':>10s} {'$/day':>10s}  "
            f"{'(idle':>8s} {'storage':>8s} {'requests':>8s})  provisioned as")


def _row(o) -> str:
    if o.blocker:
        return f"{o.label:13s} {'-':>9s} {'-':>9s} {'-':>9s} {'-':>10s} {'-':>10s}  cannot: {o.blocker}"
    storage = o.storage_usd_per_day + o.standing_usd_per_day
    line = (f"{o.label:13s} {_seconds(o.save_seconds):>9s} {_seconds(o.stall_seconds):>9s} "
            f"{_seconds(o.restore_seconds):>9s} {o.idle_usd_per_save:10,.2f} {o.usd_per_day:10,.2f}  "
            f"({o.idle_usd_per_day:7,.2f} {storage:8,.2f} {o.requests_usd_per_day:8,.2f})  {o.provision}"
            f"{'' if o.premise == 'as deployed' else ' [' + o.premise + ']'}")
    return line + "".join(f"\n{'':13s} ! {w}" for w in o.warnings)


def _notes(options, premise, prices) -> None:
    for o in options:
        if o.bound and not o.blocker:
            print(f"note: {o.label} ({o.provision[:40]}...): save bound by {o.bound}" if len(o.provision) > 40
                  else f"note: {o.label} ({o.provision}): save bound by {o.bound}")
    for line in dict.fromkeys(a for o in options for a in o.assumptions):
        print(f"note: {line}")
    print("save: until the checkpoint is whole on the target (the sync: written to the instance's volume, then uploaded "
          "behind the script); stall: what training waits; restore: a new job back at the last checkpoint (the sync: "
          "SageMaker's copy-in of the S3 URI, then the read); idle/save: the cluster's instances during a stall; "
          "$/day at the interval: idle, storage of the checkpoints kept (FSx: its capacity; EFS Provisioned: its "
          "throughput) and requests")
    print(prices.label())


def _print_premise(premise, args) -> None:
    from .common import print_ignored
    print(premise.describe())
    print_ignored([workload_of(args)])
    for line in premise.checkpoint.plan.describe():
        print(line)


def cmd_estimate(args, prices) -> int:
    from ..core.model.checkpoint_estimate import estimate_targets
    premise, q = question_of(args, prices)
    options = estimate_targets(q)
    if args.json:
        print_json({**premise_json(premise, workload_of(args)), "estimates": [o.to_dict() for o in options],
                    "prices": prices.label(), "lab": premise.lab.to_dict()})
        return 0
    _print_premise(premise, args)
    print(_header())
    for o in options:
        print(_row(o))
    _notes(options, premise, prices)
    return 0


def cmd_recommend(args, prices) -> int:
    from ..core.model.checkpoint_estimate import recommend
    premise, q = question_of(args, prices)
    answer = recommend(q)
    if args.json:
        print_json({**premise_json(premise, workload_of(args)), **answer.to_dict(), "lab": premise.lab.to_dict()})
        return 0 if answer.pick else 1
    _print_premise(premise, args)
    if answer.pick is None:
        print(f"no answer: {answer.why}")
    else:
        p = answer.pick
        print(f"checkpoints every {q.every_seconds / 60:g} min go to: {option_name(p)}: ${p.usd_per_day:,.2f} a day, "
              f"{_seconds(p.stall_seconds)} stall a save, {_seconds(p.restore_seconds)} to restore")
        print(f"  why: {answer.why}")
        if p.settings:
            print(f"  to provision it: {p.command()}" + (f"  # ${p.standing_usd_per_day / 24:,.2f}/hour while it stands"
                                                         if p.standing_usd_per_day else ""))
        if p.quota:
            print(f"  first: {p.quota['summary']}: {p.quota['command']}")
        if answer.runner_up is not None:
            r = answer.runner_up
            print(f"  runner-up: {option_name(r)}: ${r.usd_per_day:,.2f} a day (+${r.usd_per_day - p.usd_per_day:,.2f}), "
                  f"{_seconds(r.stall_seconds)} stall, {_seconds(r.restore_seconds)} to restore")
    print("every target, by a day's cost (those that cannot keep up or hold them last):")
    print(_header())
    for o in answer.options:
        print(_row(o))
    for name, why in answer.passed_over.items():
        print(f"passed over: {name}: {why}")
    _notes(answer.options, premise, prices)
    return 0 if answer.pick else 1


def trial_answer(trial, lab, prices):
    """(premise, answer) of a checkpoint trial of `recommend --experiment`: where its checkpoints at the workload's full
    size go on its cluster, every 30 minutes, the last 2 kept (as the report estimates it)."""
    from dataclasses import replace

    from ..core.answer.scenarios import checkpoint_premise_of_trial
    from ..core.model.checkpoint_estimate import DEFAULT_EVERY_SECONDS, DEFAULT_KEEP, recommend
    from ..core.answer.premise import CheckpointPremise
    full = replace(trial, checkpoint=replace(trial.checkpoint, workload=replace(trial.checkpoint.workload, scale=1.0)))
    premise = checkpoint_premise_of_trial(full, lab)
    premise = replace(premise, checkpoint=CheckpointPremise(premise.checkpoint.plan, DEFAULT_EVERY_SECONDS, DEFAULT_KEEP))
    answer = recommend(Question(premise.checkpoint.plan, trial.instance_type, DEFAULT_EVERY_SECONDS, DEFAULT_KEEP, prices,
                                lab, trial.volume_size_gb))
    return premise, answer


def print_trial_answer(trial, lab, prices) -> None:
    from ..core.model.checkpoint_estimate import DEFAULT_EVERY_SECONDS
    premise, answer = trial_answer(trial, lab, prices)
    print(f"== {trial.name} (checkpoints to {', '.join(trial.checkpoint.targets)}; at the workload's full size)")
    print(premise.describe())
    if answer.pick is None:
        print(f"no answer: {answer.why}")
        return
    p = answer.pick
    print(f"checkpoints every {DEFAULT_EVERY_SECONDS / 60:g} min go to: {option_name(p)}: ${p.usd_per_day:,.2f} a day, "
          f"{_seconds(p.stall_seconds)} stall a save, {_seconds(p.restore_seconds)} to restore")
    print(f"  why: {answer.why}")
    if answer.runner_up is not None:
        r = answer.runner_up
        print(f"  runner-up: {option_name(r)}: ${r.usd_per_day:,.2f} a day")


def cmd_size(args, prices) -> int:
    from ..core.model.checkpoint_estimate import size
    from ..core.answer.sizing import CONTEXT_HOLDS
    premise, q = question_of(args, prices)
    target = premise.checkpoint.save_under
    rows = size(q, target)
    if args.json:
        print_json({**premise_json(premise, workload_of(args)), "save_under_seconds": target,
                    "targets": [o.to_dict() for o in rows], "note": CONTEXT_HOLDS})
        return 0
    _print_premise(premise, args)
    print(f"what makes a save shorter than {target:g} s:")
    print(_header())
    for o in rows:
        print(_row(o))
    print(f"to provision for {premise.instance_count:,} instance(s), a save within {target:g} s:")
    said = False
    for o in rows:
        command = o.command() if not o.blocker else None
        if command:
            hourly = o.standing_usd_per_day / 24
            print(f"  {o.label:13s} {command}" + (f"  # ${hourly:,.2f}/hour while it stands" if hourly else ""))
            if o.quota:
                print(f"  {'':13s} first: {o.quota['summary']}: {o.quota['command']}")
            said = True
    if not said:
        print("  nothing the lab deploys meets it (see each row)")
    else:
        print(f"  {CONTEXT_HOLDS}")
    _notes(rows, premise, prices)
    return 0
