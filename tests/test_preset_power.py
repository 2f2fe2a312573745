"""Every shipped chip reports energy and power: each preset's power section loads (its limit above
what the chip draws at its lowest clock idle and streaming its main memory), a run reports joules
and an average power between the chip's idle floor and its limit, and `run` prints the energy line."""

from pathlib import Path

import pytest
import yaml

import archsim
from archsim.cli import main
from archsim.config.loader import load_system
from archsim.hardware.power import idle_power_w, streaming_floor_w

HW = Path(__file__).resolve().parents[1] / "hw_configs"
# SCALE-Sim's parity arrays are idealised (unlimited memory bandwidth, cycles only), not chips: no power
PRESETS = sorted(p.stem for p in HW.glob("*.yaml") if not p.stem.startswith("scalesim_"))
NEW = ("tpu_v6e", "tpu_v7", "trainium2", "lpu", "wafer")  # the chips whose power sections are estimated here
TINY = {
    "name": "tiny",
    "model": {"layers": 2, "hidden": 512, "heads": 8, "kv_heads": 2, "head_dim": 64, "ffn": 1024, "vocab": 1000},
    "scenario": {"batch": 2, "prompt_tokens": 64, "output_tokens": 4},
}


def test_the_presets_are_all_here():
    assert set(NEW) < set(PRESETS) and len(PRESETS) >= 30


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_reports_energy_between_its_floor_and_its_limit(name):
    """A small model on one chip of each preset (a multi-chip file runs on one of its chips): some
    joules, and an average power no lower than the chip idle at its lowest clock and no higher
    than its limit."""
    chip = load_system(name)[0].chip
    p = chip.power
    assert p is not None, f"{name} has no power section"
    assert streaming_floor_w(p, chip.hbm.peak_bandwidth_bytes_per_s) < p.limit_w
    e = archsim.run(archsim.load_system(name), archsim.load_workload(TINY)).energy
    assert e is not None and e.energy_j > 0
    assert idle_power_w(p) <= e.average_power_w <= e.limit_w == p.limit_w


def test_an_idle_floor_by_hand():
    """TPU v6e at its lowest clock, doing nothing: static 52 W plus idle 59 W scaled by the clock
    and the voltage squared, (500 MHz / 1.75 GHz) x (0.7 V / 0.9 V)^2 = 0.285714 x 0.604938, so
    52 + 59 x 0.172840 = 52 + 10.197 = 62.197 W. Streaming its 1,638.4 GB/s at that clock adds
    HBM at 3.9 pJ/bit (1638.4e9 x 8 x 3.9e-12 = 51.118 W) and the DMA path at 2 pJ/B at v^2
    (1638.4e9 x 2e-12 x 0.604938 = 1.982 W): 115.30 W, under the 490 W limit."""
    p = load_system("tpu_v6e")[0].chip.power
    assert idle_power_w(p) == pytest.approx(62.197, abs=1e-3)
    assert streaming_floor_w(p, 1638.4e9) == pytest.approx(115.297, abs=1e-3)


@pytest.mark.parametrize("name", NEW)
def test_sram_only_and_estimated_chips_print_their_energy(name, tmp_path, capsys):
    """`archsim run --hw NAME --quiet` gives the energy against the chip's limit in its summary."""
    wl = tmp_path / "tiny.yaml"
    wl.write_text(yaml.safe_dump(TINY))
    assert main(["run", "--hw", name, "--workload", str(wl), "--quiet"]) == 0
    limit = load_system(name)[0].chip.power.limit_w
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip("│ ").startswith("energy "))
    assert "W avg" in line and f"{limit:,.0f} W limit" in line


@pytest.mark.parametrize("name", ("lpu", "wafer"))
def test_an_sram_only_chip_prices_its_main_memory_as_sram(name):
    """Main memory on-chip: a bit read from it costs a fraction of an HBM bit (an SRAM read, 0.06
    and 0.02 pJ/bit against the H200's 3.9), and no SRAM energy is counted apart."""
    e = load_system(name)[0].chip.power.energies
    assert e.hbm_j_per_bit <= 0.1e-12 and e.sram_j_per_byte == 0.0
