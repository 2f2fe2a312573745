"""Dies joined by a link as one GPU (archsim/hardware/chiplet.py, `die_link:`): the far share,
its latency and the link's cap by hand; the B200's near values and NV-HBI; a slower link holding
HBM and L2; one die unchanged; the section's checks."""

from dataclasses import replace
from pathlib import Path

import pytest

from archsim.choose import simulate_op
from archsim.config.loader import load_system
from archsim.dtypes import DType
from archsim.errors import ConfigError
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.hardware.chiplet import DieLink, far_share, link_capped_bandwidth, numa_latency_s
from archsim.hardware.memory import hbm_bandwidth, hbm_latency_s, l2_bandwidth, l2_latency_s, memory_params

ROOT = Path(__file__).resolve().parents[1]
B200 = load_system(str(ROOT / "hw_configs" / "b200.yaml"))[0].chip
H200 = load_system(str(ROOT / "hw_configs" / "h200.yaml"))[0].chip
GEMV = Op(OpKind.GEMM, DType.BF16, m=1, k=8192, n=8192, scaling=Scaling.FIXED)


def _link(chip, **changes):
    return replace(chip, die_link=replace(chip.die_link, **changes))


def test_far_share_latency_and_link_cap_by_hand():
    """Pages over 2 dies: half of every access is far; over 4: three quarters; over 1: none.
    Near 150 ns, link 120 ns, half far: 150 + 0.5 x 120 = 210 ns. HBM at 8 TB/s, half of it
    crossing a 10 TB/s link: the link carries 4 of its 10, the cap 10 / 0.5 = 20 TB/s does not
    bind; a 2 TB/s link: 2 / 0.5 = 4 TB/s binds; nothing crossing: unchanged."""
    assert (far_share(2), far_share(4), far_share(1)) == (0.5, 0.75, 0.0)
    assert numa_latency_s(150e-9, 120e-9, 0.5) == pytest.approx(210e-9)
    assert link_capped_bandwidth(8e12, 10e12, 0.5) == 8e12
    assert link_capped_bandwidth(8e12, 2e12, 0.5) == pytest.approx(4e12)
    assert link_capped_bandwidth(8e12, 2e12, 0.0) == 8e12


def test_the_b200_is_two_dies_on_nv_hbi_whose_means_are_the_h200s():
    """Two dies, NV-HBI 10 TB/s, 120 ns to the far die. A near L2 hit 110 + 2 x 20 = 150 ns, a
    far one 270 ns: mean 210 ns. A near HBM access 270 + 40 = 310 ns, a far one 430 ns: mean 370 ns
    (the H200's, whose own means are over its two L2 partitions). The link caps each pool at
    10 / 0.5 = 20 TB/s: neither the L2's 10.5 TB/s nor HBM's 8 binds."""
    link = B200.die_link
    assert (link.dies, link.bandwidth_bytes_per_s, link.latency_s) == (2, 10e12, pytest.approx(120e-9))
    assert B200.l2.partitions == 1  # each die's L2 caches its own memory's lines: a line held once
    assert l2_latency_s(B200) == pytest.approx(210e-9) and hbm_latency_s(B200) == pytest.approx(370e-9)
    assert l2_latency_s(B200) == pytest.approx(l2_latency_s(H200))
    assert hbm_latency_s(B200) == pytest.approx(hbm_latency_s(H200))
    one = replace(B200, die_link=None)
    assert l2_bandwidth(B200) == l2_bandwidth(one) == 10.5e12
    assert hbm_bandwidth(B200, 0.0) == hbm_bandwidth(one, 0.0)
    gb200 = load_system(str(ROOT / "hw_configs" / "gb200.yaml"))[0].chip
    assert gb200.die_link == B200.die_link  # the same two dies
    assert load_system("b200x8")[0].chip.die_link == B200.die_link  # a system of B200s keeps them


def test_the_far_half_waits_the_links_latency():
    """A link of 320 ns: L2 150 + 0.5 x 320 = 310 ns, HBM 310 + 160 = 470 ns; in cycles at
    1.856 GHz, 470 ns is 872.3."""
    slow = _link(B200, latency_s=320e-9)
    assert l2_latency_s(slow) == pytest.approx(310e-9) and hbm_latency_s(slow) == pytest.approx(470e-9)
    assert memory_params(slow, 0.0, 65536.0).hbm_latency == pytest.approx(470e-9 * 1.856e9)


def test_a_slower_link_holds_hbm_and_the_l2():
    """A 2 TB/s link carries at most 2 TB/s of far bytes, so HBM and the L2 hits each flow at
    2 / 0.5 = 4 TB/s at most (HBM streams 7.22 TB/s, the L2 10.5). A GEMV's 134 MB of weights
    then take at least 134,217,728 B / 4 TB/s = 33.6 us, against 23.3 us over NV-HBI."""
    slow = _link(B200, bandwidth_bytes_per_s=2e12)
    assert hbm_bandwidth(slow, 0.0) == pytest.approx(4e12) and l2_bandwidth(slow) == pytest.approx(4e12)
    assert memory_params(slow, 0.0, 65536.0).hbm_bytes_per_cycle == pytest.approx(4e12 / 1.856e9)
    fast_s, slow_s = simulate_op(GEMV, B200).time_s, simulate_op(GEMV, slow).time_s
    assert slow_s >= 8192 * 8192 * 2 / 4e12 and fast_s < 0.75 * slow_s


def test_one_die_is_unchanged():
    """No link, or a link over one die (nothing far): the memory figures of the chip without
    one, to the bit."""
    for chip in (H200, replace(H200, die_link=DieLink(dies=1, bandwidth_bytes_per_s=1e9, latency_s=1e-6))):
        p = memory_params(chip, 0.25, 65536.0)
        eff = chip.hbm.efficiency(0.25)
        assert p.hbm_bytes_per_cycle == chip.hbm.peak_bandwidth_bytes_per_s * eff / chip.clock_hz
        assert p.hbm_latency == (chip.hbm.latency_s + chip.noc.hops * chip.noc.hop_latency_s) * chip.clock_hz
        assert p.l2_latency == (chip.l2.latency_s + chip.noc.hops * chip.noc.hop_latency_s) * chip.clock_hz
        assert l2_bandwidth(chip) == min(chip.l2.bandwidth_bytes_per_s, chip.noc.bandwidth_bytes_per_s)


def _mutated(tmp_path, old: str, new: str) -> str:
    text = (ROOT / "hw_configs" / "b200.yaml").read_text()
    assert old in text
    out = tmp_path / "two_dies.yaml"
    out.write_text(text.replace(old, new, 1))
    return str(out)


def test_die_link_keys_are_checked(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_system(_mutated(tmp_path, "  bandwidth: 10 TB/s   ", "  bandwith: 10 TB/s   "))
    assert "two_dies.yaml:" in str(err.value)
    assert "die_link.bandwith: unknown key; did you mean 'bandwidth'?" in str(err.value)


def test_dies_with_a_shared_cache_and_their_own_memories_are_not_both(tmp_path):
    dies = "dies:\n  count: 2  # [EST]\n  l2_capacity: 4 MB  # [EST]\n  l2_bandwidth: 4 TB/s  # [EST]\ndie_link:"
    with pytest.raises(ConfigError) as err:
        load_system(_mutated(tmp_path, "die_link:", dies))
    assert "die_link: a chip's dies share a memory-side cache (`dies`) or each have their own memory" in str(err.value)


def test_files_without_a_die_link_keep_their_resolved_config():
    _, resolved = load_system(str(ROOT / "hw_configs" / "h200.yaml"))
    assert "die_link" not in resolved and H200.die_link is None
