"""Main-memory models (archsim/hardware/memory_models/): each model's figures for the event loop
computed by hand, the choice by `hbm: {model: NAME}` (hbm when absent, with the same System and
config hash), and the messages of a bad choice or key."""

from pathlib import Path

import pytest
import yaml

import archsim
from archsim.config.loader import load_system
from archsim.errors import ConfigError
from archsim.hardware import memory_models
from archsim.hardware.memory import memory_params
from archsim.hardware.memory_models.hbm import Hbm
from archsim.hardware.memory_models.ideal import IdealMemory

ROOT = Path(__file__).resolve().parents[1]
H200 = yaml.safe_load((ROOT / "hw_configs" / "h200.yaml").read_text())
IDEAL = {"model": "ideal", "capacity": "80 GiB", "bandwidth": "2 TB/s", "channels": 8, "latency": "500 ns"}


def _chip_file(tmp_path: Path, hbm: dict) -> str:
    path = tmp_path / "chip.yaml"
    path.write_text(yaml.safe_dump(dict(H200, hbm=hbm), sort_keys=False))
    return str(path)


def test_hbm_model_by_hand(h200):
    """The H200's six stacks of 16 channels, 64 bits at 6.25 Gb/s a pin: 50 GB/s a channel,
    96 x 50 = 4.8 TB/s. Refresh 380 ns of every 3.9 us: reads stream at 1 - 0.0974359 = 0.9025641
    of the peak; half writes turn the bus once per 8 KiB batch (163.84 ns at 50 GB/s) for 1.84 ns:
    0.9025641 / (1 + 1.84 / 163.84) = 0.9025641 / 1.0112305 = 0.8925405. At 1.98 GHz: 4.8e12 x 0.9025641 / 1.98e9 =
    2188.034 bytes a cycle, a channel 50e9 x 0.9025641 / 1.98e9 = 22.79202; latency (330 ns and
    two 20 ns hops) x 1.98 GHz = 732.6 cycles."""
    hbm = h200.chip.hbm
    assert isinstance(hbm, Hbm)
    assert (hbm.channels, hbm.channel_bandwidth_bytes_per_s, hbm.peak_bandwidth_bytes_per_s) == (96, 50e9, 4.8e12)
    assert hbm.efficiency(0.0) == pytest.approx(0.9025641, rel=1e-7)
    assert hbm.efficiency(0.5) == pytest.approx(0.8925405, rel=1e-6)
    p = memory_params(h200.chip, 0.0, 1e6)
    assert p.hbm_bytes_per_cycle == pytest.approx(2188.034, rel=1e-6)
    assert p.channel_bytes_per_cycle == pytest.approx(22.79202, rel=1e-6)
    assert p.hbm_latency == pytest.approx(732.6)
    assert (p.channels, p.interleave_bytes, p.hbm_queue_latency) == (96.0, 256.0, 0.0)


def test_ideal_model_by_hand(tmp_path):
    """2 TB/s over 8 channels, whatever the mix: at 1.98 GHz 2e12 / 1.98e9 = 1010.101 bytes a
    cycle, a channel 126.2626; latency (500 ns and two 20 ns hops) x 1.98 GHz = 1069.2 cycles; the
    interleave its default, 256 B; no PHYs on the die."""
    system, config = load_system(_chip_file(tmp_path, IDEAL))
    memory = system.chip.hbm
    assert isinstance(memory, IdealMemory)
    assert memory.capacity_bytes == 80 * 2**30 and memory.phys == 0
    for write_fraction in (0.0, 0.5):
        p = memory_params(system.chip, write_fraction, 1e6)
        assert p.hbm_bytes_per_cycle == pytest.approx(1010.101, rel=1e-6)
        assert p.channel_bytes_per_cycle == pytest.approx(126.2626, rel=1e-6)
        assert p.hbm_latency == pytest.approx(1069.2)
        assert (p.channels, p.interleave_bytes) == (8.0, 256.0)
    assert config["hbm"]["model"] == "ideal"  # a model not the default is part of the resolved config


def test_ideal_memory_is_faster_than_hbm(tmp_path, llama8b):
    """An ideal memory at the H200's peak (4.8 TB/s over its 96 channels, its latency) never makes
    a decode slower: HBM loses 6% or more of that peak to refresh."""
    same = dict(IDEAL, bandwidth="4.8 TB/s", channels=96, latency="330 ns", capacity="143771 MiB")
    ideal = archsim.load_system(_chip_file(tmp_path, same))
    h200 = archsim.load_system("h200")
    wl = archsim.load_workload("llama3_8b").with_params({"scenario.prompt_tokens": 128, "scenario.output_tokens": 4})
    assert archsim.run(ideal, wl).tpot_s < archsim.run(h200, wl).tpot_s


def test_the_default_model_is_hbm(tmp_path, h200):
    """`model: hbm` and no `model` build the same System with the same resolved config (files
    written before models existed keep their hash)."""
    system, config = load_system(_chip_file(tmp_path, {"model": "hbm", **H200["hbm"]}))
    assert system == h200 and "model" not in config["hbm"]
    assert config == load_system("h200")[1]
    assert memory_models.DEFAULT == "hbm" and {"hbm", "ideal"} <= set(memory_models.names())


@pytest.mark.parametrize(
    "hbm,expected",
    [
        (dict(IDEAL, model="idael"), "hbm.model: expected 'hbm' or 'ideal' (got 'idael'); did you mean 'ideal'?"),
        (dict(IDEAL, bandwith="2 TB/s"), "hbm.bandwith: unknown key; did you mean 'bandwidth'?"),
        ({**IDEAL, "bandwidth": "2 GHz"}, "hbm.bandwidth: "),
        ({k: v for k, v in IDEAL.items() if k != "latency"}, "hbm.latency: missing required key"),
        (dict(H200["hbm"], refresh_time="5 us"), "hbm.refresh_time: must be shorter than refresh_interval"),
    ],
)
def test_a_bad_memory_section_is_located(tmp_path, hbm, expected):
    """Each problem names its file, line and key as everywhere else."""
    path = _chip_file(tmp_path, hbm)
    with pytest.raises(ConfigError) as err:
        load_system(path)
    assert f"{path}:" in str(err.value) and expected in str(err.value)


def test_a_key_of_another_model_can_be_set(tmp_path):
    """`--set hardware.hbm.bandwidth` names a key the default model lacks: it is taken for a chip
    whose `model` has it (2 TB/s -> 4 TB/s doubles the peak), and for the HBM model it is a total
    set through the pin rate (archsim/config/derived.py): 4 TB/s over 6144 bits is 5.21 Gb/s."""
    ideal = archsim.load_system(_chip_file(tmp_path, IDEAL))
    faster = archsim.with_params(ideal, {"hbm.bandwidth": "4 TB/s"})
    assert faster.system.chip.hbm.peak_bandwidth_bytes_per_s == 2 * ideal.system.chip.hbm.peak_bandwidth_bytes_per_s
    hbm = archsim.with_params(archsim.load_system("h200"), {"hbm.bandwidth": "4 TB/s"}).system.chip.hbm
    assert hbm.peak_bandwidth_bytes_per_s == pytest.approx(4e12) and hbm.data_rate_bits_per_s == pytest.approx(
        4e12 * 8 / 6144
    )
    with pytest.raises(archsim.ConfigError, match="did you mean 'bandwidth'"):
        archsim.with_params(ideal, {"hbm.bandwith": "4 TB/s"})
