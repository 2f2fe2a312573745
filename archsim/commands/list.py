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


LOW_BIT = ("nvfp4", "mxfp4", "int4", "fp8", "mxfp8", "int8")  # the narrowest format a chip multiplies, in this order


def low_bit_peak(chip) -> tuple[str, float]:
    """(format, dense FLOP/s) of the narrowest format the chip's matrix units take natively."""
    from archsim.hardware import DType

    for name in LOW_BIT:
        flops = chip.peak_flops(DType(name))
        if flops > 0:
            return name, flops
    return "bf16", chip.peak_flops(DType.BF16)


def _loaded_chips():
    """(name, path, System, main memory kind) of each shipped chip file that loads, and the red
    rows of those that do not (name, message)."""
    from archsim.config.loader import load_system, shipped_dir

    loaded, failed = [], []
    for path in sorted(shipped_dir("hw_configs").glob("*.yaml")):
        try:
            system, cfg = load_system(str(path))
            loaded.append((path.stem, path, system, "SRAM" if cfg.get("memory") else "HBM"))
        except ConfigError as err:
            failed.append((path.stem, err.problems[0].message))
    return loaded, failed


def chip_provenance(loaded) -> dict:
    """Each file's provenance; a multi-chip system takes its chip file's (the single-chip file
    with the same chip)."""
    from archsim.config.provenance import provenance

    own = {name: provenance(path) for name, path, _s, _m in loaded}
    singles = [(name, s.chip) for name, _p, s, _m in loaded if s.chips == 1]
    out = {}
    for name, _path, s, _m in loaded:
        base = next((n for n, chip in singles if chip == s.chip), name) if s.chips > 1 else name
        out[name] = (own[base], base)
    return out


def chips_table(records: list | None = None):
    from rich.table import Table

    from archsim.config.provenance import label
    from archsim.hardware import DType
    from archsim.hardware.area import system_area

    records = [] if records is None else records
    t = Table(title="chips (--hw)", title_justify="left")
    t.add_column("name", no_wrap=True)
    t.add_column("chip", max_width=22, overflow="fold")
    for col in ("bf16\nTFLOP/s", "low-bit\nTFLOP/s", "memory\nTB/s", "memory\nGB"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("confidence", overflow="fold")
    loaded, failed = _loaded_chips()
    origin = chip_provenance(loaded)
    for name, _path, s, kind in loaded:
        c = s.chip
        prov, base = origin[name]
        fmt, low = low_bit_peak(c)
        area = system_area(s)
        records.append(
            {
                "name": name,
                "chip": c.name,
                "chips": s.chips,
                "cores": c.cores,
                "bf16_flops_per_s": c.peak_flops(DType.BF16),
                "low_bit_format": fmt,
                "low_bit_flops_per_s": low,
                "memory": kind,
                "hbm_bytes_per_s": c.hbm.peak_bandwidth_bytes_per_s,
                "hbm_capacity_bytes": c.hbm.capacity_bytes,
                "power_limit_w": c.power.limit_w if c.power else None,
                "area_mm2": area.die_mm2 if area else None,
                "confidence": prov.confidence,
                "estimated_share": prov.estimated_share,
                "sources": prov.sources,
                "sources_file": base,
                "source": str(s.source),
            }
        )
        t.add_row(
            shown(name),
            shown(c.name) + (f" x{s.chips}" if s.chips > 1 else ""),
            _num(c.peak_flops(DType.BF16) / 1e12),
            f"{_num(low / 1e12)} {fmt}",
            _num(c.hbm.peak_bandwidth_bytes_per_s / 1e12) + ("" if kind == "HBM" else " SRAM"),
            _num(c.hbm.capacity_bytes / 1e9),
            label(prov),
        )
    for name, message in failed:
        t.add_row(shown(name), f"[red]{shown(message)}[/red]")
    return t


def sources_table(records: list[dict]):
    """Where each chip file's numbers come from (a system: its chip file's sources)."""
    from rich.table import Table

    t = Table(title="sources of the chip files ([EST]: estimated, with the reason in the file)", title_justify="left")
    t.add_column("name", no_wrap=True)
    t.add_column("sources", overflow="fold")
    for r in records:
        if r["chips"] == 1:
            t.add_row(shown(r["name"]), shown(r["sources"]) or "-")
    return t


def workloads_table(records: list | None = None):
    from rich.table import Table

    from archsim.config.loader import load_workload
    from archsim.graph.params import active_params, total_params

    records = [] if records is None else records
    t = Table(title="workloads (--workload)", title_justify="left")
    t.add_column("name", no_wrap=True)
    t.add_column("model", overflow="fold")
    for col in ("params", "active", "layers", "heads\n/kv", "experts\n/top-k"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("batch x\nprompt+gen", no_wrap=True)
    for name, w in _shipped("workloads", load_workload, t):
        m, sc = w.model, w.scenario
        records.append(
            {
                "name": name,
                "model": m.name,
                "params": total_params(m),
                "active_params": active_params(m),
                "attention": m.attention.value,
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
            f"{total_params(m) / 1e9:.1f}B",
            f"{active_params(m) / 1e9:.1f}B",
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
    tables = [chips_table(chips), sources_table(chips), workloads_table(workloads)]
    emit(args, console(args), tables, data={"chips": chips, "workloads": workloads})
    return 0
