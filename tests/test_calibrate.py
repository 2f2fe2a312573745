"""tools/calibrate.py on a case file of the user's own (`--cases`): a bad file is one line naming
what is wrong and exit 2; a good one is fitted and its error reported."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _calibrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "calibrate.py"), "--chip", "h200", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_bad_case_file_is_named_with_what_is_wrong(tmp_path):
    missing = _calibrate("--cases", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and missing.stderr.strip() == f"{tmp_path / 'none.json'}: no such case file"
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"cases": [{"id": "x", "kind": "gemm", "M": 0, "K": 4, "N": 4, "dtype": "bf16", "measured_ms": 1}]})
    )
    got = _calibrate("--cases", str(bad), "--rounds", "1")
    assert got.returncode == 2 and got.stderr.strip() == "x: M must be from 1 to 1,048,576 (got 0)"
    assert "Traceback" not in got.stderr


def test_the_dgx_a100_fits_only_its_bulk_protocols_efficiencies():
    # NCCL's latency constants are published (h200x8's too): only LL128's and Simple's payload
    # efficiencies move, and the file's values are where the fit ends
    got = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "calibrate.py"), "--chip", "a100x8", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert got.returncode == 0, got.stderr
    fitted = [line.split()[0] for line in got.stdout.splitlines() if line.startswith("  ")]
    assert fitted == ["protocol.ll128.efficiency", "protocol.simple.efficiency"]
    assert "(was 0.487)" in got.stdout and "(was 0.408)" in got.stdout


def test_a_case_file_of_ones_own_is_fitted(tmp_path):
    shipped = json.loads((ROOT / "archsim" / "data" / "h200_calibration.json").read_text())
    mine = tmp_path / "mine.json"
    mine.write_text(
        json.dumps({"meta": shipped["meta"], "cases": [c for c in shipped["cases"] if c["kind"] == "gemm"][:3]})
    )
    got = _calibrate("--cases", str(mine), "--rounds", "1", "--params", "chip.overheads.matrix_setup_cycles")
    assert got.returncode == 0, got.stderr
    assert "chip.overheads.matrix_setup_cycles = " in got.stdout and "calibration: gemm " in got.stdout
    # a 4,096-element add measured at 0.4 us, under what its one L2 round trip and the fixed cost
    # per kernel at the bottom of its range (0.5 us) allow, pulls that cost under 0.5 us: printed,
    # then refused (exit 3) naming what such a value stands in for. (The H200's own tiny profiled
    # kernels, a 1.07 us add and a 3.0 us SiLU and multiply, their blocks spread over cores as
    # PyTorch's are, pull it to about 0.9 us, within the range.)
    kernels = json.loads((ROOT / "archsim" / "data" / "h200_kernels.json").read_text())
    add = [dict(c, measured_ms=0.0004) for c in kernels["cases"] if c["id"].endswith("b1.add")]
    tiny = tmp_path / "tiny.json"
    tiny.write_text(json.dumps({"meta": kernels["meta"], "cases": add}))
    low = _calibrate("--cases", str(tiny), "--rounds", "1", "--params", "chip.overheads.kernel_s")
    assert low.returncode == 3 and "chip.overheads.kernel_s = " in low.stdout
    assert "is under its physical range 5e-07-4e-06: missing kernels overlapping their neighbours" in low.stderr


# Leave one chip out (tools/calibrate.py --transfer, stored as archsim/data/transfer.json).

TRANSFER = ROOT / "archsim" / "data" / "transfer.json"


def _transfer_tool():
    """tools/transfer.py as a module (it imports tools/calibrate.py by name, as the script does)."""
    tools = str(ROOT / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import transfer

    return transfer


def test_the_transfer_tool_fits_one_chip_and_predicts_the_other(tmp_path):
    out = tmp_path / "transfer.json"
    got = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "calibrate.py"), "--transfer", "--rounds", "1", "--stride", "5"]
        + ["--kinds", "copy", "allreduce", "--params", "chip.overheads.kernel_s", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert got.returncode == 0, got.stderr
    result = json.loads(out.read_text())
    assert set(result["meta"]) >= {"date", "code_version", "configs", "sets", "rounds", "stride", "kinds"}
    ways = {(d["source"], d["target"]): d for d in result["directions"]}
    assert set(ways) == {("h200", "a100_pcie"), ("a100_pcie", "h200")}
    # the H200's copies fit its kernel cost; the A100 set has no copy, so its constants stay its file's
    assert ways["h200", "a100_pcie"]["shared"]["fitted_on"] == ["copy"]
    assert ways["a100_pcie", "h200"]["shared"]["fitted_on"] == [] and ways["a100_pcie", "h200"]["shared"]["moved"] == []
    # the A100's all-reduce is predicted with the H200 system's (published, unfitted) collective costs
    assert ways["h200", "a100_pcie"]["shared"]["collectives"] == "h200x8"
    # ... its latency constants only: the payload efficiency is the system's own, the A100's fitted
    # on its own set and named as such
    assert not [k for k in ways["h200", "a100_pcie"]["shared"]["values"] if k.endswith(".efficiency")]
    assert "interconnect.protocols.ll128.efficiency" in ways["h200", "a100_pcie"]["own_fitted"]
    roles = ways["h200", "a100_pcie"]["sets"]["a100_calibration"]
    assert set(roles) == {"calibration", "held out"} and set(roles["held out"]["transfer"]) == {"allreduce"}
    assert set(ways["a100_pcie", "h200"]["sets"]) == {"h200_calibration", "h200_holdout"}
    assert "cores.max_requests" in ways["a100_pcie", "h200"]["own_fitted"], "the H200's own fitted values are named"
    assert "hbm.latency" not in ways["a100_pcie", "h200"]["own_fitted"], "a measured latency is no fit"
    assert "transfer from h200" in got.stdout


def test_the_stored_transfer_is_what_the_tool_predicts_now():
    """The stored result's chip files and its first cases of each kind, predicted again with its
    shared constants, are as stored: a change to a chip file or the model leaves it stale, and
    `python3 tools/calibrate.py --transfer` writes it anew."""
    from archsim.config.loader import load_system
    from archsim.runner import transfer as stored_transfer
    from archsim.runner.validation import validate_cases

    tool = _transfer_tool()
    result = json.loads(TRANSFER.read_text())
    assert stored_transfer.stale(result) == [], "chip files changed: rerun python3 tools/calibrate.py --transfer"
    for d in result["directions"]:
        target = tool.CHIPS[d["target"]]
        chip = tool.with_shared(load_system(target.chip)[0], tool.SHARED_CHIP, d["shared"]["values"])
        coll = target.collectives and load_system(target.collectives)[0]
        coll = coll and tool.with_shared(coll, tool.SHARED_COLLECTIVES, d["shared"]["values"])
        for _role, _name, cases, meta in tool.roles(target, None):
            by_id = {c["id"]: c for c in cases}
            first: dict[str, list] = {}
            for cid, kind, role, error_pct in d["cases"]:
                if cid in by_id and role == _role and len(first.setdefault(kind, [])) < 2:
                    first[kind].append((by_id[cid], error_pct))
            picked = [pair for pairs in first.values() for pair in pairs]
            results, errors = validate_cases([c for c, _ in picked], chip, meta, coll or None)
            assert not errors
            for r, (_c, error_pct) in zip(results, picked, strict=True):
                assert abs(r.error_pct - error_pct) < 1e-3, (
                    f"{d['source']} -> {d['target']} {r.id}: {r.error_pct:.4f}% now, {error_pct}% stored: "
                    "rerun python3 tools/calibrate.py --transfer"
                )


def test_a_band_is_the_quantile_of_the_absolute_transfer_error():
    from archsim.runner.transfer import Band, bands, coverage, quantile, transfer_coverage
    from archsim.runner.validation import CaseResult

    # |e| of the calibration cases: 0.05, 0.10, 0.20, 0.40; the 0.5-quantile lies halfway between
    # the 2nd and 3rd: 0.10 + 0.5 x 0.10 = 0.15 (the held-out case never enters it)
    cases = [["a", "gemm", "calibration", -10.0], ["b", "gemm", "calibration", 5.0]]
    cases += [["c", "gemm", "calibration", 20.0], ["d", "gemm", "calibration", 40.0], ["e", "gemm", "held out", -14.0]]
    result = {"directions": [{"target": "x", "cases": cases}]}
    assert quantile([0.4, 0.05, 0.2, 0.1], 0.5) == 0.15000000000000002
    got = bands(result, 50)
    assert set(got) == {"gemm"} and abs(got["gemm"].q - 0.15) < 1e-12 and got["gemm"].n == 4
    # a time predicted as 1 ms was measured between 1 / 1.15 = 0.8696 and 1 / 0.85 = 1.1765 ms
    low, high = got["gemm"].interval_ms(1.0)
    assert abs(low - 0.869565) < 1e-6 and abs(high - 1.176471) < 1e-6
    assert Band(1.2, 3).interval_ms(1.0)[1] == float("inf"), "no upper end at q >= 1"
    # the stored held-out case errs 14% <= 15%: inside
    assert transfer_coverage(result, got) == {"x": {"gemm": {"n": 1, "coverage_pct": 100.0}}}
    # measured 1.0, predicted 1.1 (10%, inside) and 1.2 (20%, outside); a kind without a band is left out
    own = [CaseResult("p", "gemm", 1.0, 1.1, 1.1), CaseResult("q", "gemm", 1.0, 1.2, 1.2)]
    own.append(CaseResult("r", "copy", 1.0, 1.0, 1.0))
    assert coverage(own, got) == {"gemm": {"n": 2, "coverage_pct": 50.0}}


def test_validate_all_shows_transfer_beside_each_chips_own_fit(tmp_path):
    from archsim.cli import main

    out = tmp_path / "all.json"
    assert main(["validate", "all", "--kind", "copy", "--interval", "90", "--quiet", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = data["transfer"]["rows"]
    assert {(r["chip"], r["source"], r["set"], r["role"], r["kind"]) for r in rows} == {
        ("h200", "a100_pcie", "h200_calibration", "calibration", "copy"),
        ("h200", "a100_pcie", "h200_holdout", "held out", "copy"),
    }
    assert data["transfer"]["stale"] == [] and data["transfer"]["meta"]["made_by"]
    cov = data["coverage"]["h200"]["copy"]
    assert cov["n"] == 4 and 0 <= cov["coverage_pct"] <= 100 and cov["q_pct"] > 0
    assert main(["validate", "all", "--interval", "100"]) == 2, "a level is below 100%"


# Transfer's bounds: the stored mean absolute error per set and kind (the cases the target chip's
# own fit is judged on: its calibration cases), rounded up by about half a point; they move only
# down unless a change says why. A change that improves a chip's own fit and worsens its transfer
# is not an improvement. Targets: transfer both ways GEMM <= 8%, vector <= 12%, attention <= 12%,
# all-reduce <= 20%, each within 1.5x of that chip's own fit. As measured (own fit -> transfer):
# A100 PCIe from the H200: GEMM 5.6 -> 5.6%, vector 9.2 -> 9.2%, all-reduce on a100x8 with
# h200x8's NCCL latency constants 37.6 -> 37.6% (both state NCCL's published ones; the payload
# efficiency is each system's own; when every protocol cost was fitted, 31.7 -> 44.9%, and before
# the wait for the last rank was its own term, 29.1 -> 57.4%); H200 from the A100 PCIe: GEMM 4.5 -> 4.4%, vector 8.2 -> 7.8%, attention decode
# 3.5 -> 3.3%, prefill 3.3 -> 3.4%, copy 2.8 -> 3.9%, model step 3.5 -> 4.4%; its per-kernel
# durations: GEMM 3.9 -> 3.7%, attention 0.6 -> 0.5% and 8.4 -> 8.8%, the tiny vector kernels 53
# -> 57% (not fitted: MODEL.md section 6). With a small vectorised op's blocks dealt over cores as
# PyTorch's are: H200 vector 6.3 -> 6.0%, model step 3.2 -> 3.5%, the tiny kernels 37.8 -> 42.3%. Before the H200 was fitted on its per-kernel durations
# too (its matrix prologue 0.1 us, all of its L2 dirty after a flush), GEMM transfer was 8.8% to
# the A100 and 7.7% to the H200; at its former fitted latencies, 9.4% and 8.9%.
TRANSFER_BOUNDS = {  # (source, target): {target set: {kind: mean absolute error in %}}
    ("h200", "a100_pcie"): {"a100_calibration": {"gemm": 6.0, "vector": 9.5, "allreduce": 38.0}},
    ("a100_pcie", "h200"): {
        "h200_calibration": {
            "attention_decode": 4.5,
            "attention_prefill": 4.0,
            "copy": 4.5,
            "gemm": 5.0,
            "model_step": 4.0,
            "vector": 6.5,
        },
        "h200_kernels": {"attention_decode": 1.5, "attention_prefill": 9.5, "gemm": 4.5, "vector": 43.0},
    },
}


def test_transfer_per_kind_is_bounded():
    result = json.loads(TRANSFER.read_text())
    assert result["meta"]["kinds"] is None, "the stored result covers every kind"
    for d in result["directions"]:
        bounds = TRANSFER_BOUNDS[d["source"], d["target"]]
        calibration = {
            name: parts["calibration"]["transfer"] for name, parts in d["sets"].items() if "calibration" in parts
        }
        assert {n: set(k) for n, k in calibration.items()} == {n: set(k) for n, k in bounds.items()}, (
            "every kind of the target's calibration sets is bounded"
        )
        for name, kinds in bounds.items():
            for kind, bound in kinds.items():
                got = calibration[name][kind]["mean_abs_error_pct"]
                assert got <= bound, f"{d['source']} -> {d['target']} {name} {kind}: transfer {got:.1f}% > {bound}%"
