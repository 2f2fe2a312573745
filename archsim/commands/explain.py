"""`archsim explain`: why a run (its prefill and first decode step) or an op (`archsim explain op
gemm --M 1 --K 8192 --N 28672`) takes its time, the resource that binds it, and what doubling
each resource would do to it, in sentences with numbers (archsim/api/explanation.py)."""

from __future__ import annotations

from archsim.commands import UsageError, check_outputs
from archsim.commands.output import add_output_flags, console, emit, progress
from archsim.commands.run import DEFAULT_HW, add_cache_flag, add_parallel_flags, add_set_flag, add_workload_flags


def add_parser(sub) -> None:
    p = sub.add_parser(
        "explain",
        help="why a run or an op takes its time, and what each resource is worth",
        description="Explain a run (the flags of archsim run) or, after `op`, one op (the flags of archsim op): "
        "its time by cause, what binds it, and how much faster it would be with each resource doubled "
        "(each fixed cost halved), from what-if simulations of its steps.",
    )
    p.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    add_workload_flags(p)
    add_parallel_flags(p)
    add_cache_flag(p)
    p.add_argument("--json", metavar="PATH", help="write the explanation as JSON")
    add_output_flags(p, formats=("table", "json"), quiet_help="no progress bar")
    targets = p.add_subparsers(dest="target", metavar="op")
    from archsim.commands.op import add_op_arguments

    op = targets.add_parser("op", help="explain one op, given as archsim op takes it")
    add_op_arguments(op)
    add_set_flag(op)
    op.add_argument("--json", metavar="PATH", help="write the explanation as JSON")
    add_output_flags(op, formats=("table", "json"), quiet_help=None)


def run(args) -> int:
    from archsim.commands.run import apply_cache_flag
    from archsim.report.export import write_json

    check_outputs(args, ("json",), inputs=(args.hw,))
    apply_cache_flag(args)
    explanation = explain_op(args) if args.target == "op" else explain_run(args)
    emit(args, console(args), explanation.lines(), data=explanation.to_dict())
    if args.json:
        write_json(args.json, explanation.to_dict())
    return 0


def explain_run(args):
    from archsim.api.explanation import explain_run as explain
    from archsim.commands.run import load_inputs, simulate_run

    hardware, workload = load_inputs(args, args.hw)
    with progress(args, "simulating the run, then what-ifs of its steps") as bar:
        return explain(simulate_run(args, hardware, workload, bar))


def explain_op(args):
    from archsim.api import load_system
    from archsim.api.explanation import explain_op as explain
    from archsim.choose import Condition
    from archsim.commands.op import COLLECTIVES, check_sizes, op_from_args
    from archsim.commands.run import set_values
    from archsim.runner.size import check_op

    if args.kind in COLLECTIVES:
        raise UsageError(
            f"explain op: a {args.kind} is timed by the links alone; archsim op {args.kind} gives its terms"
        )
    check_sizes(args)
    settings = args.set or []
    for root, path, _value in settings:
        if root != "hardware":
            raise UsageError(f"--set: {root}.{path}: an op runs no workload; set hardware.PATH=VALUE")
    hardware = set_values(load_system(args.hw), settings, "hardware")
    op = op_from_args(args)
    check_op(op, hardware.system.chip, args.kind)
    return explain(op, hardware, Condition.STANDALONE if args.standalone else Condition.GRAPH)
