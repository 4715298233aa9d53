"""``dslab size``: how many accelerators each data source feeds, and what to provision for a cluster."""

from __future__ import annotations

from ..core.errors import ConfigError
from .common import add_command, print_ignored, print_json, price_table
from .question import add_question_flags, checkpoint_question_of, is_checkpoint_question, question_of, workload_json


def _check_instance(args) -> None:
    from ..core.facts.instances import INSTANCES
    from .question import check_instance
    if args.instance is not None:   # the refusal estimate and recommend give first (a type SageMaker lacks, no price)
        check_instance(args.instance, price_table(args.prices))
    if args.instance is not None and args.instance not in INSTANCES:
        import difflib
        close = difflib.get_close_matches(args.instance, INSTANCES, n=2)
        raise ConfigError("--instance", f"{args.instance!r} is not in the instance table (dslab/core/facts/instances.py)"
                          + (f"; did you mean {' or '.join(close)}?" if close else ""), sorted(INSTANCES))


def cmd_size(args) -> int:
    from ..core.answer.answer import answer
    from .render import print_lines, size_lines
    if is_checkpoint_question(args):
        from . import checkpoints
        if args.as_deployed:
            raise ConfigError("--as-deployed", "`dslab estimate --workload` gives every checkpoint target as the lab stands")
        return checkpoints.show(checkpoint_question_of(args, price_table(args.prices)), json=args.json,
                                explain=args.explain, commands=True)
    _check_instance(args)
    question = question_of(args)
    result = answer(question)
    if args.json:
        print_json({**result.to_dict(), **({"workload": workload_json(question.workload)} if question.workload else {})})
        return 0
    print_lines(size_lines(result, as_deployed=args.as_deployed, explain=args.explain))
    print_ignored([question.workload], brief=not args.explain)
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
