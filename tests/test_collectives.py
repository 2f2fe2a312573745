"""Collectives over the interconnect: each α–β formula against a hand-computed value, the choice
of algorithm and protocol, the invariants (more link bandwidth never slower, more bytes never
faster), the shipped multi-chip systems against the public NCCL results they were calibrated on,
their config checks, and `archsim op allreduce`."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.config.loader import load_system
from archsim.errors import ConfigError
from archsim.hardware import Topology
from archsim.hardware.collectives import (
    Algorithm,
    Collective,
    CollectiveError,
    Fabric,
    Protocol,
    TorusDim,
    bus_factor,
    collective_time,
    default_torus_dims,
    direct_alltoall,
    in_network_allreduce,
    point_to_point,
    ring_allreduce,
    ring_gather,
    system_fabric,
    torus_alltoall,
    torus_gather,
    tree_allreduce,
)

ROOT = Path(__file__).resolve().parents[1]
H200X8 = load_system(str(ROOT / "hw_configs" / "h200x8.yaml"))[0]
TPU8 = load_system(str(ROOT / "hw_configs" / "tpu_v5e_x8.yaml"))[0]
US = 1e-6


def switch(**kw) -> Fabric:
    """Ten links of 10 GB/s (100 GB/s a direction), 1 us a hop, bare links unless told."""
    return Fabric(
        links_per_chip=10, link_bandwidth_bytes_per_s=10e9, link_latency_s=1e-6, topology=Topology.SWITCH, **kw
    )


# --- formulas, by hand ----------------------------------------------------------------------------


def test_ring_allreduce_by_hand():
    # 8 ranks, 8 MB, 1 us, 100 GB/s: 2*7 = 14 steps; 2*7/8 * 8e6 / 1e11 = 140 us
    assert ring_allreduce(8, 8e6, 1e-6, 100e9) == pytest.approx((14e-6, 140e-6))


def test_tree_allreduce_by_hand():
    # 2*ceil(log2 8) = 6 steps; 2 * 8e6 / 1e11 = 160 us
    assert tree_allreduce(8, 8e6, 1e-6, 100e9) == pytest.approx((6e-6, 160e-6))


def test_in_network_allreduce_by_hand():
    # 10 us + 2 hops; (1 + 1/8) * 8e6 / (0.5 * 1e11) = 180 us
    assert in_network_allreduce(8, 8e6, 1e-6, 100e9, 0.5, 10e-6) == pytest.approx((12e-6, 180e-6))


def test_gather_alltoall_and_send_by_hand():
    assert ring_gather(4, 4e6, 1e-6, 100e9) == pytest.approx((3e-6, 30e-6))  # 3 steps, 3/4 * 4e6 / 1e11
    assert direct_alltoall(4, 4e6, 1e-6, 100e9) == pytest.approx((1e-6, 30e-6))
    assert point_to_point(1e6, 2e-6, 100e9) == pytest.approx((2e-6, 10e-6))


def test_torus_reduce_scatter_by_hand():
    # 2 x 4 wrapping dims of 100 GB/s, 16 MB in two parts of 8 MB taking the dims in turn:
    # phase 1: max(1/2 * 8e6, 3/4 * 8e6) / 1e11 = 60 us; phase 2: max(3/4 * 4e6, 1/2 * 2e6) / 1e11 = 30 us
    shape = (TorusDim(2, True, 100e9), TorusDim(4, True, 100e9))
    assert torus_gather(shape, 16e6, 1e-6) == pytest.approx(((1 + 3) * 1e-6, 90e-6))


def test_torus_alltoall_by_hand():
    # a wrapping ring of 4: each rank sends S/4 to ranks 1, 2, 1 hops away: S/4 * 4 hops = S over 100 GB/s
    assert torus_alltoall((TorusDim(4, True, 100e9),), 4e6, 1e-6) == pytest.approx((2e-6, 40e-6))


def test_nccl_bus_factors():
    assert bus_factor(Collective.ALL_REDUCE, 8) == 1.75
    assert bus_factor(Collective.ALL_GATHER, 8) == bus_factor(Collective.ALL_TO_ALL, 8) == 0.875
    assert bus_factor(Collective.SEND, 2) == 1.0


def test_default_torus_shapes():
    assert default_torus_dims(Topology.TORUS2D, 8) == (2, 4)
    assert default_torus_dims(Topology.TORUS3D, 8) == (2, 2, 2)
    assert default_torus_dims(Topology.RING, 6) == (6,)
    assert default_torus_dims(Topology.SWITCH, 8) == ()


# --- choosing and combining -----------------------------------------------------------------------


def test_protocol_overhead_and_step_sync_add_to_the_hop():
    # ring, 4 ranks, 4 MB, protocol: 5 us overhead, 1 us sync a step, half the rate
    f = switch(
        protocols=(Protocol(name="p", overhead_s=5e-6, step_s=1e-6, efficiency=0.5),), algorithms=(Algorithm.RING,)
    )
    t = collective_time(f, Collective.ALL_REDUCE, 4, 4e6)
    assert t.latency_s == pytest.approx(5e-6 + 6 * 2e-6)
    assert t.transfer_s == pytest.approx(1.5 * 4e6 / 50e9)


def test_chunks_pay_the_latency_again_not_the_bytes():
    f = switch(
        protocols=(Protocol(name="p", overhead_s=5e-6, step_s=0.0, efficiency=1.0),), algorithms=(Algorithm.RING,)
    )
    one, four = (collective_time(f, Collective.ALL_REDUCE, 8, 64e6, chunks=c) for c in (1, 4))
    assert four.latency_s == pytest.approx(4 * one.latency_s)
    assert four.transfer_s == pytest.approx(one.transfer_s)


def test_the_fastest_algorithm_is_taken():
    f = switch()
    assert collective_time(f, Collective.ALL_REDUCE, 8, 1e3).algorithm is Algorithm.TREE  # fewer steps
    assert collective_time(f, Collective.ALL_REDUCE, 8, 1e9).algorithm is Algorithm.RING  # fewer bytes
    assert (
        collective_time(replace(f, algorithms=(Algorithm.RING,)), Collective.ALL_REDUCE, 8, 1e3).algorithm
        is Algorithm.RING
    )


def test_collectives_refuse_what_the_system_cannot_run():
    h200 = load_system(str(ROOT / "hw_configs" / "h200.yaml"))[0]
    with pytest.raises(CollectiveError, match="has 1"):
        system_fabric(h200, 8)
    with pytest.raises(CollectiveError, match="5 ranks do not form a sub-torus of the 2 x 4 torus2d"):
        collective_time(replace(system_fabric(TPU8, 8), torus_dims=(2, 4)), Collective.ALL_REDUCE, 5, 1e6)


LINKS = st.sampled_from(
    [
        system_fabric(H200X8, 8),
        system_fabric(TPU8, 8),
        switch(),
        replace(switch(), topology=Topology.RING, torus_dims=(8,)),
        replace(switch(), topology=Topology.TORUS3D, torus_dims=(2, 2, 2)),
    ]
)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    f=LINKS,
    kind=st.sampled_from(list(Collective)),
    ranks=st.sampled_from([2, 4, 8]),
    nbytes=st.floats(1, 1e10),
    more=st.floats(1.0, 8.0),
    chunks=st.sampled_from([1, 2, 8]),
)
def test_more_link_bandwidth_is_never_slower_and_more_bytes_never_faster(f, kind, ranks, nbytes, more, chunks):
    ranks = 2 if kind is Collective.SEND else ranks
    base = collective_time(f, kind, ranks, nbytes, chunks)
    faster = collective_time(
        replace(f, link_bandwidth_bytes_per_s=more * f.link_bandwidth_bytes_per_s), kind, ranks, nbytes, chunks
    )
    bigger = collective_time(f, kind, ranks, more * nbytes, chunks)
    assert faster.time_s <= base.time_s * (1 + 1e-12)
    assert bigger.time_s >= base.time_s * (1 - 1e-12)
    assert base.latency_s > 0 and base.transfer_s > 0


# --- the shipped systems against public NCCL results ---------------------------------------------


def _busbw_gb(f, ranks, nbytes):
    return collective_time(f, Collective.ALL_REDUCE, ranks, nbytes).bus_bandwidth_bytes_per_s / 1e9


def test_h200x8_large_allreduce_reaches_nccls_480_gbps():
    f = system_fabric(H200X8, 8)
    assert _busbw_gb(f, 8, 4 << 30) == pytest.approx(480, rel=0.03)  # nccl-tests#212, nccl#1442
    assert collective_time(f, Collective.ALL_REDUCE, 8, 4 << 30).algorithm is Algorithm.IN_NETWORK
    rings = replace(f, algorithms=(Algorithm.RING,))
    assert _busbw_gb(rings, 8, 4 << 30) == pytest.approx(368, rel=0.02)  # NCCL_ALGO=RING, nccl#1455


@pytest.mark.parametrize("ranks,busbw", [(5, 420), (6, 440), (7, 460), (8, 480)])
def test_h200x8_nvls_busbw_by_gpu_count(ranks, busbw):
    assert _busbw_gb(system_fabric(H200X8, 8), ranks, 4 << 30) == pytest.approx(busbw, rel=0.03)  # nccl#1455


# 8 x H20 (NVLink 4 x 18 like the H200) NCCL all_reduce_perf: DeepEP#303 (8 B), Mooncake#3484 (the rest)
H20_US = {
    8: 12.49,
    4096: 16.69,
    65536: 18.95,
    1 << 20: 27.76,
    4 << 20: 53.24,
    16 << 20: 121.33,
    128 << 20: 700.25,
    1 << 30: 5252.64,
}


@pytest.mark.parametrize("nbytes", sorted(H20_US))
def test_h200x8_rings_follow_measured_allreduce_times(nbytes):
    rings = replace(system_fabric(H200X8, 8), algorithms=(Algorithm.RING,))
    t = collective_time(rings, Collective.ALL_REDUCE, 8, nbytes).time_s / US
    assert t == pytest.approx(H20_US[nbytes], rel=0.21)


def test_a100x8_takes_nccls_published_latencies_and_rings():
    # NCCL's tuning constants are the library's, one set on every NVIDIA system: the DGX A100 states
    # the h200x8's overheads, steps and hop, and, a node's trees being chains, runs rings only
    a100, h200 = system_fabric(load_system("a100x8")[0]), system_fabric(H200X8)
    assert a100.link_latency_s == h200.link_latency_s == pytest.approx(0.6 * US)
    for p in h200.protocols:
        q = next(q for q in a100.protocols if q.name == p.name)
        assert (q.overhead_s, q.step_s) == (p.overhead_s, p.step_s), p.name
    assert a100.algorithms == (Algorithm.RING,)
    # 2 KiB on 2 ranks by LL: 6.6 us + 2 x (2 - 1) x (0.6 + 0) us = 7.8 us of latency, and the
    # buffer once over Ampere's llMaxBw, 0.292 x 12 x 25 GB/s = 87.6 GB/s: 2048 / 87.6e9 = 23.4 ns
    t = collective_time(a100, Collective.ALL_REDUCE, 2, 2048)
    assert (t.algorithm, t.protocol) == (Algorithm.RING, "ll")
    assert t.latency_s == pytest.approx(7.8 * US) and t.transfer_s == pytest.approx(23.38e-9, rel=1e-3)


def test_h200x8_small_allreduce_is_latency_bound():
    f = system_fabric(H200X8, 8)
    tiny, small = (collective_time(f, Collective.ALL_REDUCE, 8, b) for b in (8, 16 << 10))
    assert small.time_s < 1.05 * tiny.time_s and tiny.latency_s > 1e3 * tiny.transfer_s
    assert 10 * US < tiny.time_s < 20 * US


MULTI_CHIP = {  # each shipped multi-chip file and the chip file it extends
    "h200x8": "h200",
    "h100x8": "h100",
    "a100x8": "a100",
    "b200x8": "b200",
    "gb200_nvl72": "gb200",
    "mi300x_x8": "mi300x",
    "mi325x_x8": "mi325x",
    "tpu_v5e_x8": "tpu_v5e",
    "tpu_v6e_x8": "tpu_v6e",
    "tpu_v6e_x256": "tpu_v6e",
    "tpu_v7_x8": "tpu_v7",
    "tpu_v7_x64": "tpu_v7",
    "trainium2_x16": "trainium2",
    "lpu_x576": "lpu",
    "wafer_x4": "wafer",
}


def test_every_multi_chip_file_is_listed():
    """A shipped file of more than one chip is one of MULTI_CHIP (so the test below covers it)."""
    shipped = {p.stem for p in (ROOT / "hw_configs").glob("*.yaml")}
    assert {name for name in shipped if load_system(name)[0].chips > 1} == set(MULTI_CHIP)


@pytest.mark.parametrize("multi,single", sorted(MULTI_CHIP.items()))
def test_multi_chip_files_extend_their_chip(multi, single):
    """A multi-chip file extends its chip's file and overrides no chip section, so a change to the
    chip reaches its systems: it holds only `extends`, `description`, `chips` and `interconnect`
    keys, and its chip is the chip file's."""
    from archsim.config.yamlfile import read_yaml

    doc = read_yaml(ROOT / "hw_configs" / f"{multi}.yaml")
    assert doc.data["extends"] == single and next(iter(doc.data)) == "extends"
    assert set(doc.data) <= {"extends", "description", "chips", "interconnect"}
    many, one = load_system(multi)[0], load_system(single)[0]
    assert many.chip == one.chip and many.chips > 1


def test_tpu_torus_beats_one_of_its_dimensions():
    f = system_fabric(TPU8, 8)
    assert f.torus_dims == (2, 4) and f.torus_wraps == (False, False)  # a slice of the 16 x 16 pod
    # one dimension's links, one direction each (its two ends unjoined: the ring folds onto a line)
    one_dim = f.links_per_chip / 4 * f.link_bandwidth_bytes_per_s * f.protocols[0].efficiency
    # both dimensions' links work at once: more than one dimension's rate, less than the chip's
    assert one_dim / 1e9 < _busbw_gb(f, 8, 1 << 30) < 2 * one_dim / 1e9


def test_a_slice_without_wraparound_runs_its_rings_on_lines_by_hand():
    # 2 x 4 torus2d, 4 links of 10 GB/s a direction, bare links, 1 us a hop: a dimension's rate
    # is 4 x 10 / 2 = 20 GB/s joined, 10 GB/s as a line. Reduce-scatter of 16 MB, parts of 8 MB
    # taking the dimensions in turn: phase 1 max(1/2 x 8e6 / r2, 3/4 x 8e6 / r4), phase 2 the
    # parts' remainders (4 MB on the 4, 2 MB on the 2): max(3/4 x 4e6 / r4, 1/2 x 2e6 / r2).
    # Wrapping: 300 + 150 = 450 us; lines: twice, 900 us. All-reduce: twice that; latency
    # 2 x (1 + 3) hops x 1 us either way.
    torus = Fabric(links_per_chip=4, link_bandwidth_bytes_per_s=10e9, link_latency_s=1e-6, topology=Topology.TORUS2D)
    joined = replace(torus, torus_dims=(2, 4))
    lines = replace(joined, torus_wraps=(False, False))
    assert collective_time(joined, Collective.ALL_REDUCE, 8, 16e6).time_s == pytest.approx(8e-6 + 900e-6)
    assert collective_time(lines, Collective.ALL_REDUCE, 8, 16e6).time_s == pytest.approx(8e-6 + 1800e-6)
    # one dimension joined, the other not: phase 1 max(1/2 x 8e6 / 20e9, 3/4 x 8e6 / 10e9) = 600 us,
    # phase 2 max(3/4 x 4e6 / 10e9, 1/2 x 2e6 / 20e9) = 300 us
    half = replace(joined, torus_wraps=(True, False))
    assert collective_time(half, Collective.ALL_REDUCE, 8, 16e6).time_s == pytest.approx(8e-6 + 1800e-6)


def test_tpu_slices_and_the_pod_agree_on_eight_chips():
    # a v6e-8 slice has no wraparound; eight ranks inside the 16 x 16 pod span 2 x 4 of it: the same lines
    slice8 = system_fabric(load_system(str(ROOT / "hw_configs" / "tpu_v6e_x8.yaml"))[0], 8)
    pod = system_fabric(load_system(str(ROOT / "hw_configs" / "tpu_v6e_x256.yaml"))[0], 8)
    assert pod.torus_wraps == () and slice8.torus_wraps == (False, False)
    for nbytes in (16e3, 256e6):
        ours = collective_time(slice8, Collective.ALL_REDUCE, 8, nbytes).time_s
        assert ours == pytest.approx(collective_time(pod, Collective.ALL_REDUCE, 8, nbytes).time_s)


# --- config ---------------------------------------------------------------------------------------


def _mutated(tmp_path, old: str, new: str) -> str:
    text = (ROOT / "hw_configs" / "tpu_v5e_x8.yaml").read_text()
    assert old in text
    out = tmp_path / "tpu.yaml"
    out.write_text(text.replace(old, new, 1))
    return str(out)


@pytest.mark.parametrize(
    "old,new,fragment",
    [
        ("torus: [2, 4]", "torus: [2, 2]", "interconnect.torus: must be 2 dimension(s) whose product is chips (8)"),
        ("torus: [2, 4]", "torus: [2, 4]\n  algorithms: [tree]", "interconnect.algorithms: a tree needs a switch"),
        (
            "torus: [2, 4]",
            "torus: [2, 4]\n  in_network_reduction: {efficiency: 0.8, latency: 1 us}",
            "interconnect.in_network_reduction: only a switch reduces",
        ),
        ("efficiency: 0.9", "efficiency: 1.5", "interconnect.protocols.ici.efficiency: must be at most 1"),
        ("wraps: [false, false]", "wraps: [false]", "interconnect.wraps: must give one entry per torus dimension (2"),
    ],
)
def test_collective_settings_are_checked(tmp_path, old, new, fragment):
    with pytest.raises(ConfigError) as err:
        load_system(_mutated(tmp_path, old, new))
    assert fragment in str(err.value) and "tpu.yaml:" in str(err.value)


def test_files_without_collective_settings_keep_their_resolved_config():
    _, resolved = load_system(str(ROOT / "hw_configs" / "h200.yaml"))
    assert set(resolved["interconnect"]) == {"links_per_chip", "link_bandwidth", "link_latency", "topology"}


# --- archsim op -----------------------------------------------------------------------------------


def test_op_allreduce_reports_time_and_bus_bandwidth(tmp_path, capsys):
    out = tmp_path / "ar.json"
    assert main(["op", "allreduce", "--bytes", str(1 << 30), "--hw", "h200x8", "--json", str(out)]) == 0
    assert "busbw 48" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["ranks"] == 8 and data["algorithm"] == "in_network"
    assert data["busbw_bytes_per_s"] == pytest.approx(1.75 * data["bytes"] / data["time_s"])


@pytest.mark.parametrize("kind", ["allgather", "reducescatter", "alltoall", "send"])
def test_op_other_collectives(kind, capsys):
    assert main(["op", kind, "--bytes", "1048576", "--hw", "tpu_v5e_x8"]) == 0
    assert "busbw" in capsys.readouterr().out


def test_op_collective_on_one_chip_exits_2(capsys):
    assert main(["op", "allreduce", "--bytes", "1024", "--hw", "h200"]) == 2
    assert "needs at least 2 chips" in capsys.readouterr().err


def test_custom_one_shot_and_two_shot_all_reduce():
    """A custom kernel over a switch (10 links of 10 GB/s: 100 GB/s; hop 1 us) with its own
    protocol: 2 us launch, 0.5 us per barrier step, full rate, so alpha = 1.5 us. Four ranks:
    one-shot reads 3 peers' buffers after a barrier: 2 + 2 x 1.5 = 5 us + 3 S / B; two-shot
    takes three barrier steps, 2 + 3 x 1.5 = 6.5 us, and moves 2 x 3/4 S. At 1 kB one-shot wins
    (5.03 us); at 1 MB two-shot does (6.5 + 15 = 21.5 us against 5 + 30 = 35 us)."""
    custom = Protocol(name="custom", overhead_s=2e-6, step_s=0.5e-6, efficiency=1.0)
    f = switch(protocols=(custom,), algorithms=(Algorithm.ONE_SHOT, Algorithm.TWO_SHOT))
    small = collective_time(f, Collective.ALL_REDUCE, 4, 1e3)
    assert small.algorithm is Algorithm.ONE_SHOT and small.time_s == pytest.approx(5e-6 + 3e3 / 1e11)
    large = collective_time(f, Collective.ALL_REDUCE, 4, 1e6)
    assert large.algorithm is Algorithm.TWO_SHOT and large.time_s == pytest.approx(21.5e-6)
    # the custom kernel only all-reduces: an all-gather on the same fabric takes the bare links
    assert collective_time(f, Collective.ALL_GATHER, 4, 1e6).protocol == "ideal"
