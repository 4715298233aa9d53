"""``dslab size``: how many accelerators each data source feeds, and what to provision for a cluster."""

from __future__ import annotations

from .asked import Asked, ask
from .common import add_command, print_ignored, print_json
from .question import add_question_flags, workload_json


def cmd_size(args) -> int:
    return show_size(ask(args))


def show_size(asked: Asked) -> int:
    """`size`'s view of what it was asked: the checkpoint answer with each target's deploy command, or the one
    answer's provisioning per source (--as-deployed: every source on the lab as it stands)."""
    from ..core.answer.answer import answer
    from .render import print_lines, size_lines
    if asked.checkpoint is not None:
        from . import checkpoints
        return checkpoints.show(asked.checkpoint, json=asked.json, explain=asked.explain, commands=True)
    result = answer(asked.question)
    workload = asked.question.workload
    if asked.json:
        print_json({**result.to_dict(), **({"workload": workload_json(workload)} if workload else {})})
        return 0
    print_lines(size_lines(result, as_deployed=asked.as_deployed, explain=asked.explain))
    print_ignored([workload], brief=not asked.explain)
    return 0


def register(sub) -> None:
    p = add_command(sub, "size", cmd_size,
                    "How many accelerators each data source feeds at AU >= 90% (MLPerf Storage's question), the AU at a "
                    "cluster size, and what to provision for it (FSx capacity and deployment type, EFS throughput mode, "
                    "S3 prefixes), with the cost per hour and per run.",
                    "dslab size --files 1530350 --bytes 54GB --instance ml.p4d.24xlarge --instance-count 16")
    add_question_flags(p)
    p.add_argument("--outputs", help="the deployed lab's stack outputs file: its FSx and EFS as deployed (default: the "
                   "cdk-outputs.json `make deploy` wrote here, with the cdk-outputs-fsx.json of `make fsx-up`; without "
                   "them, the lab as cdk.json would deploy it)")
    p.add_argument("--as-deployed", action="store_true", help="provision nothing: every source on the lab as it stands")
