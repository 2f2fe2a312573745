"""Collectives on a full mesh (archsim/hardware/collectives_mesh.py): each formula against a value
computed by hand, the shipped eight-MI300X system's small all-reduce from RCCL's own costs, what
changes with the ranks taking part, and the config checks of a mesh."""

from pathlib import Path

import pytest

from archsim.config.loader import load_system
from archsim.errors import ConfigError
from archsim.hardware.collectives import Algorithm, Collective, collective_time, system_fabric
from archsim.hardware.collectives_mesh import (
    mesh_direct_gather,
    mesh_one_shot_allreduce,
    mesh_ring_allreduce,
    mesh_two_shot_allreduce,
    peer_bandwidth_bytes_per_s,
)

ROOT = Path(__file__).resolve().parents[1]
MI300X8 = load_system(str(ROOT / "hw_configs" / "mi300x_x8.yaml"))[0]
H200X8 = load_system(str(ROOT / "hw_configs" / "h200x8.yaml"))[0]
US = 1e-6


def test_peer_bandwidth_by_hand():
    # 7 links over 7 peers at 64 GB/s: one link, 64 GB/s; 14 links over 7 peers: 128 GB/s
    assert peer_bandwidth_bytes_per_s(7, 8, 64e9) == pytest.approx(64e9)
    assert peer_bandwidth_bytes_per_s(14, 8, 64e9) == pytest.approx(128e9)


def test_mesh_ring_allreduce_by_hand():
    # 8 ranks, 8 MB, 1 us, 48 GB/s a peer: 14 steps; 2*7/8 * 8e6 / (7 * 48e9) = 41.667 us
    lat, tr = mesh_ring_allreduce(8, 8e6, 1e-6, 48e9)
    assert (lat, tr) == pytest.approx((14e-6, 41.6667e-6), rel=1e-5)


def test_mesh_one_shot_allreduce_by_hand():
    # 16 KiB to each peer at 24 GB/s: 16384 / 24e9 = 0.68267 us, one step of 0.8 us
    assert mesh_one_shot_allreduce(8, 16384, 0.8e-6, 24e9) == pytest.approx((0.8e-6, 0.68267e-6), rel=1e-4)


def test_mesh_two_shot_allreduce_by_hand():
    # 8 MB: 1 MB shards, twice, at 48 GB/s: 2e6 / 48e9 = 41.667 us (the ring's transfer), 2 steps
    assert mesh_two_shot_allreduce(8, 8e6, 1e-6, 48e9) == pytest.approx((2e-6, 41.6667e-6), rel=1e-5)


def test_mesh_direct_gather_by_hand():
    # all-gather of 8 MB: 1 MB to each peer at 48 GB/s = 20.833 us, one step
    assert mesh_direct_gather(8, 8e6, 1e-6, 48e9) == pytest.approx((1e-6, 20.8333e-6), rel=1e-5)


def test_mi300x8_small_allreduce_from_rccl_costs():
    """16 KiB (a 70B model's batch-1 hidden state in bf16) on eight MI300X: the one-shot all-pairs
    algorithm with LL, 12 us (RCCL's baseLat) + 0.8 us (one hop) + 16384 / (64 GB/s x 0.375)
    = 12.8 + 0.68267 = 13.483 us."""
    t = collective_time(system_fabric(MI300X8, 8), Collective.ALL_REDUCE, 8, 16384)
    assert (t.algorithm, t.protocol) == (Algorithm.ONE_SHOT, "ll")
    assert t.time_s == pytest.approx(13.4827 * US, rel=1e-4)


def test_mi300x8_small_allreduce_is_no_slower_than_nvswitch_without_a_reason():
    """One hop to every peer on the mesh, two through NVSwitch: with RCCL's 12 us fixed cost
    against NCCL's 6.6 us, the mesh's small all-reduce lies within 1.2x of the H200 system's."""
    mesh, nvs = (collective_time(system_fabric(s, 8), Collective.ALL_REDUCE, 8, 16384) for s in (MI300X8, H200X8))
    assert mesh.time_s < 1.2 * nvs.time_s


def test_mesh_large_allreduce_uses_every_link():
    """1 GiB on eight: ring and two-shot move 2(n-1)/n S over seven links at 48 GB/s, busbw
    7 x 48 = 336 GB/s less the latency; with four of the eight ranks only three links of each
    rank carry it (RCCL's README on fewer than 8 MI300X), busbw 3 x 48 = 144 GB/s."""
    f = system_fabric(MI300X8, 8)
    eight = collective_time(f, Collective.ALL_REDUCE, 8, 1 << 30)
    four = collective_time(f, Collective.ALL_REDUCE, 4, 1 << 30)
    assert eight.bus_bandwidth_bytes_per_s == pytest.approx(336e9, rel=0.01)
    assert four.bus_bandwidth_bytes_per_s == pytest.approx(144e9, rel=0.01)


def test_mesh_send_uses_the_links_to_its_peer():
    # 48 MB to one peer at 48 GB/s = 1 ms, plus Simple's 17 us and a 2.1 us step
    t = collective_time(system_fabric(MI300X8, 8), Collective.SEND, 2, 48e6)
    assert t.time_s == pytest.approx(1e-3 + 17 * US + 2.1 * US, rel=1e-6)


def _mutated(tmp_path, old: str, new: str) -> str:
    text = (ROOT / "hw_configs" / "mi300x_x8.yaml").read_text()
    assert old in text
    extended = text.replace("extends: mi300x ", f"extends: {ROOT / 'hw_configs' / 'mi300x.yaml'} ", 1)
    out = tmp_path / "mesh.yaml"
    out.write_text(extended.replace(old, new, 1))
    return str(out)


def test_mesh_refuses_a_tree_and_a_switch_reduction(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_system(_mutated(tmp_path, "algorithms: [ring, one_shot, two_shot]", "algorithms: [tree]"))
    assert "mesh.yaml:" in str(err.value) and "interconnect.algorithms: a tree needs a switch" in str(err.value)


def test_mesh_runs_direct_algorithms_without_a_custom_protocol(tmp_path):
    system = load_system(_mutated(tmp_path, "algorithms: [ring, one_shot, two_shot]", "algorithms: [two_shot]"))[0]
    t = collective_time(system_fabric(system, 8), Collective.ALL_REDUCE, 8, 16384)
    assert t.algorithm is Algorithm.TWO_SHOT
