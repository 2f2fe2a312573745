"""Decode power and energy per token against batch on the shipped H100 and H200, for the README.

    python3 tools/energy_curves.py                  # the markdown table the README shows
    python3 tools/energy_curves.py --plot out.png   # and the two curves as a PNG

Llama-3-8B, a 1,024-token prompt and 128 generated tokens, at batches from 1 to 256: each row
is a full `run_generation`, its energy from `archsim.runner.energy.run_energy`.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from archsim.config.loader import load_system, load_workload
from archsim.runner.energy import run_energy
from archsim.runner.generation import run_generation

CHIPS = ("h100", "h200")
BATCHES = (1, 4, 16, 64, 256)
PROMPT, GENERATE, KV_STRIDE = 1024, 128, 64


def curves() -> dict[str, list[dict]]:
    w = load_workload("llama3_8b")[0]
    out: dict[str, list[dict]] = {}
    for name in CHIPS:
        system = load_system(name)[0]
        rows = []
        for b in BATCHES:
            wb = replace(w, scenario=replace(w.scenario, batch=b, prompt_tokens=PROMPT, output_tokens=GENERATE))
            r = run_generation(wb, system, KV_STRIDE)
            e = run_energy(r, wb, system, KV_STRIDE)
            rows.append(
                {
                    "batch": b,
                    "decode_tokens_per_s": r.decode_tokens_per_s,
                    "decode_power_w": e.decode_power_w,
                    "decode_j_per_token": e.decode_j_per_token,
                    "average_power_w": e.average_power_w,
                    "peak_power_w": e.peak_power_w,
                    "limit_w": e.limit_w,
                }
            )
        out[system.chip.name] = rows
    return out


def table(data: dict[str, list[dict]]) -> str:
    lines = [
        "| chip | batch | decode tokens/s | decode power | J per token | whole run: average / peak power |",
        "|---|---|---|---|---|---|",
    ]
    for chip, rows in data.items():
        for r in rows:
            lines.append(
                f"| {chip} | {r['batch']} | {r['decode_tokens_per_s']:,.0f} | {r['decode_power_w']:.0f} W "
                f"| {r['decode_j_per_token']:.3g} J | {r['average_power_w']:.0f} / {r['peak_power_w']:.0f} W "
                f"(limit {r['limit_w']:.0f} W) |"
            )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plot", metavar="PATH", help="also draw the curves to a PNG")
    args = p.parse_args()
    data = curves()
    print(table(data))
    if args.plot:
        from pathlib import Path

        from archsim.report.energy_plots import power_by_batch

        series = [
            (
                chip,
                [r["batch"] for r in rows],
                [r["decode_power_w"] for r in rows],
                [r["decode_j_per_token"] for r in rows],
                rows[0]["limit_w"],
            )
            for chip, rows in data.items()
        ]
        title = f"Llama-3-8B decode: prompt {PROMPT}, generate {GENERATE}"
        print(f"plot {power_by_batch(Path(args.plot), series, title)}")


if __name__ == "__main__":
    main()
