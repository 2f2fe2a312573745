"""`archsim list`: shipped chips and models with their headline numbers, 80 columns wide."""

from __future__ import annotations

from archsim.commands import shown
from archsim.errors import ConfigError


def add_parser(sub) -> None:
    from archsim.commands.output import add_output_flags

    p = sub.add_parser("list", help="shipped chips and models with their headline numbers")
    add_output_flags(p, formats=("table", "json"), quiet_help=None)


def _num(x: float) -> str:
    """3 significant digits with a metric prefix past a thousand: 989, 4.8, 1.89k, 131M."""
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale * 0.9995:
            return f"{x / scale:.3g}{prefix}"
    return f"{x:.3g}"


def _shipped(folder: str, load, t):
    """(name, loaded) of each shipped file in `folder`; a file that does not load becomes a red row
    of table `t` with its first problem."""
    from archsim.config.loader import shipped_dir

    for path in sorted(shipped_dir(folder).glob("*.yaml")):
        try:
            yield path.stem, load(str(path))[0]
        except ConfigError as err:
            t.add_row(shown(path.stem), f"[red]{shown(err.problems[0].message)}[/red]")


def chips_table(records: list | None = None):
    from rich.table import Table

    from archsim.config.loader import load_system
    from archsim.hardware import DType

    records = [] if records is None else records
    t = Table(title="chips (--hw)", title_justify="left")
    t.add_column("name", no_wrap=True)
    t.add_column("chip", max_width=20, overflow="fold")
    for col in ("cores", "bf16\nTFLOP/s", "HBM\nTB/s", "HBM\nGB"):
        t.add_column(col, justify="right", no_wrap=True)
    for name, s in _shipped("hw_configs", load_system, t):
        c = s.chip
        records.append(
            {
                "name": name,
                "chip": c.name,
                "chips": s.chips,
                "cores": c.cores,
                "bf16_flops_per_s": c.peak_flops(DType.BF16),
                "hbm_bytes_per_s": c.hbm.peak_bandwidth_bytes_per_s,
                "hbm_capacity_bytes": c.hbm.capacity_bytes,
                "source": str(s.source),
            }
        )
        t.add_row(
            shown(name),
            shown(c.name) + (f" x{s.chips}" if s.chips > 1 else ""),
            str(c.cores),
            _num(c.peak_flops(DType.BF16) / 1e12),
            _num(c.hbm.peak_bandwidth_bytes_per_s / 1e12),
            _num(c.hbm.capacity_bytes / 1e9),
        )
    return t


def workloads_table(records: list | None = None):
    from rich.table import Table

    from archsim.config.loader import load_workload

    records = [] if records is None else records
    t = Table(title="workloads (--workload)", title_justify="left")
    t.add_column("name", no_wrap=True)
    t.add_column("model", overflow="fold")
    for col in ("params", "layers", "heads\n/kv", "experts\n/top-k"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("batch x\nprompt+gen", no_wrap=True)
    for name, w in _shipped("workloads", load_workload, t):
        m, sc = w.model, w.scenario
        records.append(
            {
                "name": name,
                "model": m.name,
                "params": m.params(),
                "layers": m.layers,
                "heads": m.heads,
                "kv_heads": m.kv_heads,
                "experts": m.experts,
                "top_k": m.top_k,
                "batch": sc.batch,
                "prompt_tokens": sc.prompt_tokens,
                "output_tokens": sc.output_tokens,
                "source": w.source,
            }
        )
        t.add_row(
            shown(name),
            shown(m.name),
            f"{m.params() / 1e9:.1f}B",
            str(m.layers),
            f"{m.heads}/{m.kv_heads}",
            f"{m.experts}/{m.top_k}" if m.is_moe else "-",
            f"{sc.batch}x{sc.prompt_tokens}+{sc.output_tokens}",
        )
    return t


def run(args) -> int:
    from archsim.commands.output import console, emit

    chips: list[dict[str, object]] = []
    workloads: list[dict[str, object]] = []
    tables = [chips_table(chips), workloads_table(workloads)]
    emit(args, console(args), tables, data={"chips": chips, "workloads": workloads})
    return 0
