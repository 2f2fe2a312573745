"""The event loop plays a fixed set of phases as it did when they were recorded, bit for bit:
every output, per sequence, per entry and per event, with and without a trace.

The phases, their memory records and the outputs are in tests/data/engine_phases.npz, written by
tools/record_engine.py (its docstring lists the cases). A change to the loop that changes its
results on purpose re-records them with that tool and says why."""

from pathlib import Path

import numpy as np
import pytest

from archsim.engine.simulate import play_phase_on
from archsim.hardware.memory import MemoryParams
from archsim.program import Phase

RECORDED = Path(__file__).parent / "data" / "engine_phases.npz"
PHASE_ARRAYS = (
    "core_start",
    "core_weight",
    "hbm_bytes",
    "l2_bytes",
    "compute_cycles",
    "store_bytes",
    "store_l2_bytes",
    "load_trips",
)


def _recorded() -> dict[str, dict[str, np.ndarray]]:
    with np.load(RECORDED) as data:
        cases: dict[str, dict[str, np.ndarray]] = {}
        for key in data.files:
            case, field = key.split("/", 1)
            cases.setdefault(case, {})[field] = data[key]
    return cases


CASES = _recorded()


def outputs(r) -> dict[str, np.ndarray]:
    """What a play of `play_phase_on` gives, by the names the recording keeps it under."""
    got = {"end_cycles": r.end_cycles, "busy_cycles": r.busy_cycles, "stall_cycles": r.stall_cycles}
    got["total_cycles"] = np.array(r.total_cycles)
    if r.timeline is not None:
        tl = r.timeline
        got |= {"load_issue": tl.load_issue, "load_done": tl.load_done, "compute_end": tl.compute_end}
        got |= {"event_cycles": tl.event_cycles, "hbm_read": tl.hbm_read, "hbm_write": tl.hbm_write}
    return got


def test_the_recording_holds_every_kind_of_phase():
    """The cases tools/record_engine.py writes: 9 compiled phases and 2 written by hand."""
    assert len(CASES) == 11
    assert {"stream-k gemm", "gemv split-k reduce", "causal prefill attention", "split-kv combine"} <= set(CASES)
    assert any((c["load_trips"] > 1).any() for c in CASES.values())  # loads of several trips
    assert any((c["hbm_bytes"] + c["l2_bytes"] == 0).any() for c in CASES.values())  # loads of no bytes
    assert max(len(c["core_weight"]) for c in CASES.values()) > 100  # many distinct cores


@pytest.mark.parametrize("trace", [False, True], ids=["plain", "trace"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_recorded_phase_plays_as_recorded(case, trace):
    rec = CASES[case]
    phase = Phase(**{name: rec[name] for name in PHASE_ARRAYS}, stages=int(rec["stages"]))
    r = play_phase_on(phase, MemoryParams(*(float(x) for x in rec["memory"])), trace)
    got = outputs(r)
    if trace:
        assert len(r.timeline.compute_end) == phase.entries
    kind = "trace" if trace else "plain"
    expected = {k.split("/", 1)[1]: v for k, v in rec.items() if k.startswith(kind + "/")}
    assert set(got) == set(expected)
    for field, value in expected.items():
        np.testing.assert_array_equal(got[field], value, err_msg=f"{case}: {field}")
