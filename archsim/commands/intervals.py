"""`--interval LEVEL` on validate, op, run and compare: intervals at LEVEL % from the measured
transfer error per kind (archsim/runner/transfer.py, loaded only when the flag is given)."""

from __future__ import annotations

from collections.abc import Callable

from archsim.commands import UsageError


def add_interval_flag(parser) -> None:
    """`--interval LEVEL`, the same on every command that takes it."""
    parser.add_argument(
        "--interval",
        type=float,
        metavar="LEVEL",
        help="intervals at LEVEL %% from the measured transfer error per kind",
    )


def check_interval(args) -> None:
    """A usage error unless --interval, where given, is a level in percent, above 0 and below 100."""
    level = getattr(args, "interval", None)
    if level is not None and not 0 < level < 100:
        raise UsageError(f"--interval: a level in percent, above 0 and below 100 (got {level:g})")


def interval_text(record: dict | None, kind: str, level: float, unit: Callable[[float], str]) -> str:
    """`record` (transfer.interval's) as one clause for a command's line: its times' intervals,
    or that no stored transfer error has the kind."""
    if record is None:
        return f"; no {level:g}% interval: no stored transfer errors of a {kind}"
    parts = [
        f"{name.removesuffix('_s')} {unit(low)} to {unit(high) if high is not None else 'unbounded'}"
        for name, (low, high) in ((k, v) for k, v in record.items() if isinstance(v, list))
    ]
    head = f"; {level:g}% interval ({kind} transfer error, q {100 * record['q']:.1f}% of {record['n']}): "
    return head + ", ".join(parts)


def step_interval(level: float, result, data: dict) -> str:
    """A run's interval at `level` % (TTFT, TPOT and the whole run, from the stored transfer error
    of model steps) into `data["interval"]`, and as a clause for a line."""
    from archsim.runner.transfer import interval
    from archsim.units import format_seconds

    times = {"ttft_s": result.ttft_s, "tpot_s": result.tpot_s, "total_time_s": result.total_time_s}
    data["interval"] = record = interval("model_step", level, times)
    return interval_text(record, "model_step", level, format_seconds)
