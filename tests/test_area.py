"""Die area: the formula on a made-up chip computed by hand, the reticle limit, the shipped dies
against their published sizes, and the area section's units and messages."""

import math
from pathlib import Path

import pytest
import yaml

import archsim
from archsim.config.loader import load_system
from archsim.errors import ConfigError
from archsim.hardware.area import (
    LANE_UM2_45NM,
    MAC_UM2_45NM,
    NODES,
    RETICLE_MM2,
    AreaSpec,
    Node,
    die_area,
)
from archsim.hardware.chip import system_area
from archsim.units import Dim, parse_quantity

ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20


def test_area_units():
    """mm2 is the unit; um2 is a millionth of it; a density is an area per byte."""
    assert parse_quantity("814 mm2", Dim.AREA) == 814.0
    assert parse_quantity("814 mm²", Dim.AREA) == 814.0
    assert parse_quantity("2500 um2", Dim.AREA) == pytest.approx(0.0025)
    assert parse_quantity("0.7 mm2/MiB", Dim.AREA_PER_BYTE) == pytest.approx(0.7 / MIB)
    assert parse_quantity("1 mm2/KB", Dim.AREA_PER_BYTE) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="unit 'mm2' is mm2, but bytes is due"):
        parse_quantity("5 mm2", Dim.BYTES)
    with pytest.raises(ValueError, match="unknown unit 'mm2/s'"):
        parse_quantity("5 mm2/s", Dim.AREA_PER_BYTE)


def test_area_of_a_made_up_chip_from_its_densities():
    """10 cores (2 more on the die) of 1,000 PEs (bf16 at 100 um2 and int8 at 10 um2 each: 0.11 mm2),
    100 lanes of 1,000 um2 (0.1 mm2), 0.5 mm2 of logic and 2 MiB of SRAM at 0.5 mm2/MiB (1 mm2):
    1.71 mm2 a core, 12 x 1.71 = 20.52 mm2; 16 MiB of L2 at 1 mm2/MiB = 16 mm2; NoC 3 mm2; 2 HBM
    PHYs of 10 mm2 and 4 link PHYs of 1 mm2 = 24 mm2. Modelled 63.52 mm2, a fifth of the die
    uncore: 63.52 / 0.8 = 79.4 mm2, of which 15.88 mm2 uncore."""
    spec = AreaSpec(
        node=Node.N7,
        mac_mm2=(("bf16", 100e-6), ("int8", 10e-6)),
        lane_mm2=1000e-6,
        core_logic_mm2=0.5,
        sram_mm2_per_byte=0.5 / MIB,
        l2_mm2_per_byte=1.0 / MIB,
        noc_mm2=3.0,
        hbm_phy_mm2=10.0,
        link_phy_mm2=1.0,
        uncore_share=0.2,
        harvested_cores=2,
    )
    a = die_area(
        spec,
        cores=10,
        pes_per_core=1000,
        dtypes=("bf16", "int8"),
        lanes_per_core=100,
        sram_bytes_per_core=2 * MIB,
        l2_bytes=16 * MIB,
        hbm_stacks=2,
        links=4,
    )
    assert a.parts() == pytest.approx(
        {
            "matrix": 12 * 0.11,
            "lanes": 12 * 0.1,
            "core_logic": 12 * 0.5,
            "sram": 12 * 1.0,
            "l2": 16.0,
            "noc": 3.0,
            "hbm_phy": 20.0,
            "link_phy": 4.0,
            "uncore": 15.88,
        }
    )
    assert a.die_mm2 == pytest.approx(79.4)
    assert a.fits_reticle and a.dies == 1


def test_node_defaults_are_horowitz_scaled_by_logic_density():
    """A bf16 MAC (16-bit FP multiply 1,640 um2 + 32-bit FP add 4,184 um2 at 45 nm) at N7: x 3.33 /
    91.2 = 212.7 um2; an N7 scratchpad: 0.027 um2 x 8 bits / 0.30 = 0.755 mm2 per MiB."""
    spec = AreaSpec(node=Node.N7)
    assert spec.mac("bf16") == pytest.approx(5824e-6 * 3.33 / 91.2)
    assert MAC_UM2_45NM["bf16"] == 5824.0 and LANE_UM2_45NM == 11884.0
    assert NODES[Node.N7].sram_mm2_per_byte * MIB == pytest.approx(0.027 * 8 * MIB * 1e-6 / 0.30)


def test_a_die_over_the_reticle_needs_chiplets():
    """The H200 with four times its SMs: about 4 x 516 mm2 of SMs and the rest, over 858 mm2."""
    big = archsim.with_params(archsim.load_system("h200"), {"cores.count": 528})
    a = system_area(big.system)
    assert a.die_mm2 > RETICLE_MM2 and not a.fits_reticle
    assert a.dies == math.ceil(a.die_mm2 / RETICLE_MM2) >= 3


PUBLISHED = {  # chip file: (die mm2, source)
    "h200": (814, "GH100"),
    "h100": (814, "GH100"),
    "a100_pcie": (826, "GA100"),
    "a100": (826, "GA100"),
    "tpu_v5e": (400, "TPU v4i"),
    "lpu": (725, "GroqChip 1"),
    "wafer": (46225, "WSE-3"),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shipped_dies_are_within_15_percent_of_their_published_size(name):
    published, die = PUBLISHED[name]
    a = system_area(load_system(name)[0])
    assert abs(a.die_mm2 / published - 1) < 0.15, f"{name}: {a.die_mm2:.0f} mm2 against {die}'s {published}"
    text = (ROOT / "hw_configs" / f"{name}.yaml").read_text()
    assert f"{published:,} mm2" in text and die in text  # the file names what it is checked against


def test_an_sram_only_chip_has_its_memory_on_the_die_once():
    """The LPU's 230 MB memory is also its L2 and its scratchpad: one SRAM. At 16 nm (a 0.074 um2
    bitcell, 30% of a macro) it and the 4 MiB of accumulators take
    (230e6 + 4 x 2^20) B x 8 x 0.074 um2 / 0.30 = 462.1 mm2; no L2 besides, no HBM PHY."""
    a = system_area(load_system("lpu")[0])
    assert a.sram_mm2 == pytest.approx((230e6 + 4 * MIB) * 8 * 0.074e-6 / 0.30)
    assert a.l2_mm2 == 0 and a.hbm_phy_mm2 == 0
    assert a.fits_reticle
    wafer = system_area(load_system("wafer")[0])
    assert not wafer.fits_reticle and wafer.dies == math.ceil(wafer.die_mm2 / 858)


def test_the_a100s_lane_is_the_h200s_at_n7_not_fitted_to_ga100():
    """GA100's lane is GH100's fitted one scaled by the nodes' logic densities (N4/N7), so its die
    (756 mm2, 8.5% under 826) checks the model rather than restates it."""
    h200, a100 = load_system("h200")[0].chip.area, load_system("a100_pcie")[0].chip.area
    scale = NODES[Node.N4].logic_mtr_per_mm2 / NODES[Node.N7].logic_mtr_per_mm2
    assert a100.lane_mm2 == pytest.approx(h200.lane_mm2 * scale, rel=1e-3)


def test_the_area_follows_the_design():
    """Two more HBM stacks add two 12 mm2 PHYs (and their share of the 10% uncore); a clock or power
    limit changes nothing."""
    h200 = archsim.load_system("h200")
    base = system_area(h200.system).die_mm2
    more = system_area(archsim.with_params(h200, {"hbm.stacks": 8}).system).die_mm2
    assert more - base == pytest.approx(2 * 12 / 0.9)
    for params in ({"clock": "1.5 GHz"}, {"power.limit": "500 W"}):
        assert system_area(archsim.with_params(h200, params).system).die_mm2 == base


def test_a_file_without_an_area_section_keeps_its_configuration():
    """No `area: null` in the resolved config of a file without one, nor an SRAM energy not given,
    so results recorded before areas existed keep their hash."""
    config = load_system("scalesim_ws_128x128")[1]
    assert "area" not in config
    assert "sram" not in load_system("h200")[1]["power"]["energy"]
    assert system_area(load_system("scalesim_ws_128x128")[0]) is None


def _with_area(tmp_path, area: str) -> str:
    text = (ROOT / "hw_configs" / "scalesim_ws_128x128.yaml").read_text() + area
    path = tmp_path / "chip.yaml"
    path.write_text(text)
    return str(path)


def test_area_mistakes_are_located(tmp_path):
    base_lines = len((ROOT / "hw_configs" / "scalesim_ws_128x128.yaml").read_text().splitlines())
    path = _with_area(tmp_path, "area:\n  node: n6\n  hbm_phy: 12 mm\n  uncore: 1\n  lanes: 3 um2\n")
    with pytest.raises(ConfigError) as err:
        load_system(path)
    messages = {p.key: (p.line, p.message) for p in err.value.problems}
    assert messages["area.node"][0] == base_lines + 2
    assert "expected 'n16', 'n7', 'n5', 'n4' or 'n3'" in messages["area.node"][1]
    assert messages["area.hbm_phy"] == (base_lines + 3, "unknown unit 'mm'; expected e.g. '814 mm2' (got '12 mm')")
    assert messages["area.uncore"] == (
        base_lines + 4,
        "expected a share of the die from 0 up to, not including, 1 (got 1)",
    )
    assert "did you mean 'lane'?" in messages["area.lanes"][1]


def test_a_chip_file_states_its_area(tmp_path):
    path = _with_area(tmp_path, "area:\n  node: n5\n  hbm_phy: 10 mm2\n  uncore: 0.1\n")
    a = system_area(load_system(path)[0])
    scalesim = yaml.safe_load((ROOT / "hw_configs" / "scalesim_ws_128x128.yaml").read_text())
    assert scalesim["hbm"]["stacks"] == 1
    assert a.hbm_phy_mm2 == 10.0 and a.uncore_mm2 == pytest.approx(a.die_mm2 * 0.1)
