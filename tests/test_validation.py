"""How `archsim validate` models the timer of a case file: a profiler that reports each kernel's
whole microseconds (`meta.resolution`), and the per-kernel durations it reads."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.choose import Condition, kernel_durations_s, simulate_op
from archsim.choose.conditions import prologue_s
from archsim.config.loader import load_system
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware import DType
from archsim.program import Family
from archsim.runner.validation import CaseError, CaseFile, case_ops, predict_ms, truncate


@pytest.fixture(scope="module")
def a100():
    return load_system("a100_pcie")[0]


def test_truncate_keeps_whole_multiples_of_the_resolution():
    # a 2.7 us kernel reads 2 us on a 1 us timer (integer division of its nanoseconds by 1000);
    # 3 us less a rounding error reads 3; a 0.4 us one reads 0; an exact timer changes nothing
    assert truncate(2.7e-6, 1e-6) == pytest.approx(2e-6)
    assert truncate(3e-6 * (1 - 1e-12), 1e-6) == pytest.approx(3e-6)
    assert truncate(0.4e-6, 1e-6) == 0.0
    assert truncate(2.7e-6, 0.0) == 2.7e-6


def test_meta_resolution_is_a_time_with_its_unit():
    assert CaseFile.from_meta({"resolution": "1 us"}).resolution_s == pytest.approx(1e-6)
    assert CaseFile.from_meta({}).resolution_s == 0.0
    for bad, why in (("1", "a unit is required"), ("1 MB", "is bytes"), ("0 us", "greater than zero")):
        with pytest.raises(CaseError, match=f"meta.resolution.*{why}"):
            CaseFile.from_meta({"resolution": bad})


def test_kernel_durations_add_up_to_the_kernel_timed_op(a100):
    chip = a100.chip
    # Llama-3-8B's down projection for 64 tokens: the A100 runs it split-K, then reduces
    gemm = Op(OpKind.GEMM, DType.FP16, m=64, k=14336, n=4096, out_dtype=DType.BF16, scaling=Scaling.FIXED)
    rms = Op(
        OpKind.VECTOR, DType.FP16, m=4096, n=4096, vop=VectorOp.RMSNORM, per_row=True, hot=True, scaling=Scaling.FIXED
    )
    for op in (gemm, rms):
        timing = simulate_op(op, chip, Condition.KERNEL, first=False)
        durations = kernel_durations_s(op, chip)
        assert len(durations) == timing.kernels
        # the op's total is rounded to a whole cycle, the durations are not
        assert abs(sum(durations) - timing.time_s) <= 1 / chip.clock_hz
    split = kernel_durations_s(gemm, chip)
    assert len(split) == 2, "the split-K GEMM and its reduction"
    # each kernel carries its own overhead; the matrix prologue is the first kernel's alone
    o = chip.overheads
    assert split[0] > o.kernel_s + prologue_s(chip, Family.GEMM) and o.kernel_s < split[1] < split[0]


def test_a_kernel_timed_case_is_predicted_as_its_timer_reads_it(a100):
    case = {"id": "c", "kind": "gemm", "M": 64, "K": 14336, "N": 4096, "dtype": "fp16", "measured_ms": 0.088}
    exact = CaseFile(Condition.KERNEL)
    timer = CaseFile(Condition.KERNEL, resolution_s=1e-6)
    (op,) = case_ops(case, timer)
    durations_us = [d * 1e6 for d in kernel_durations_s(op, a100.chip)]
    assert len(durations_us) == 2
    # each kernel's whole microseconds, summed: at most a microsecond less than it per kernel
    us = predict_ms(case, a100, timer) * 1e3
    assert us == pytest.approx(sum(math.floor(d) for d in durations_us))
    assert 0 < predict_ms(case, a100, exact) * 1e3 - us < len(durations_us)


def test_validate_keeps_the_simulated_time_beside_the_timers_reading(a100, tmp_path):
    from archsim.cli import main

    case = {"id": "c", "kind": "gemm", "M": 64, "K": 14336, "N": 4096, "dtype": "fp16", "measured_ms": 0.088}
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"meta": {"timing": "kernel", "resolution": "1 us"}, "cases": [case]}))
    out = tmp_path / "o.json"
    assert main(["validate", str(path), "--hw", "a100_pcie", "--quiet", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["cases"]
    exact = predict_ms(case, a100, CaseFile(Condition.KERNEL))
    # the reading drops each kernel's fraction of a microsecond; the simulated time is the model's
    assert row["simulated_ms"] == pytest.approx(exact)
    assert row["predicted_ms"] * 1e3 == pytest.approx(round(row["predicted_ms"] * 1e3))
    assert row["predicted_ms"] < row["simulated_ms"]


def test_the_floor_is_the_least_error_of_predictions_that_never_fall_as_a_case_grows():
    from archsim.runner.floor import chain_floor, floor_by_kind

    # measured 2, 1, 2 at sizes 1, 2, 3: predictions p1 <= p2 <= p3. (1, 1, 2) errs |1 - 2| / 2 =
    # 0.5 on the first alone; (2, 2, 2) errs 1 on the second; anything between errs more than 0.5
    # (the first case's error falls at half the rate the second's grows): the floor is 0.5
    assert chain_floor([1, 2, 3], [2.0, 1.0, 2.0]) == pytest.approx(0.5)
    # two cases of one size get one prediction v: |v - 1| / 1 + |v - 2| / 2 is least at v = 1
    assert chain_floor([4, 4], [1.0, 2.0]) == pytest.approx(0.5)
    assert chain_floor([1, 2, 3], [1.0, 2.0, 3.0]) == 0.0, "measurements that grow with size cost nothing"

    def gemm(i, m, n, ms):
        return {"id": f"g{i}", "kind": "gemm", "dtype": "bf16", "M": m, "K": 64, "N": n, "measured_ms": ms}

    step = {"id": "s", "kind": "model_step", "dtype": "bf16", "measured_ms": 1.0}
    cases = [gemm(0, 1, 8, 2.0), gemm(1, 2, 8, 1.0), gemm(2, 1, 16, 1.0), step]
    # the N = 8 pair is one chain (0.5, as above), the N = 16 case a chain of its own (0): a mean
    # of 0.5 / 3 over the GEMMs; a model step has no size axis
    assert floor_by_kind(cases) == pytest.approx({"gemm": 100 * 0.5 / 3, "model_step": 0.0})


def test_an_error_within_one_step_of_the_timer_is_not_beyond_its_resolution():
    from archsim.runner.validation import CaseResult

    # on a 1 us timer a kernel of 1.99 us reads 1 and one of 2.0 us reads 2: a reading of 1 us
    # predicted as 2 us is +100% but within one step; 3 us against 1 is 1 us beyond it, +100%
    assert CaseResult("a", "vector", 0.001, 0.002, 0.002).beyond_resolution_pct(0.001) == 0.0
    assert CaseResult("b", "vector", 0.001, 0.003, 0.003).beyond_resolution_pct(0.001) == pytest.approx(100.0)
    # 10 us predicted as 8.5 us is 1.5 us off, 0.5 us beyond the step: 5% of the reading
    assert CaseResult("c", "gemm", 0.010, 0.0085, 0.0085).beyond_resolution_pct(0.001) == pytest.approx(5.0)
    # an exact timer: the whole error
    assert CaseResult("d", "gemm", 0.010, 0.0085, 0.0085).beyond_resolution_pct(0.0) == pytest.approx(15.0)


# ---- every field of a case modelled or refused by name ----

GEMM = {"id": "g", "kind": "gemm", "dtype": "bf16", "M": 64, "K": 4096, "N": 4096, "measured_ms": 0.02}
ADD = {"id": "v", "kind": "vector", "op": "add", "dtype": "bf16", "M": 4096, "N": 4096, "measured_ms": 0.05}
DECODE = {
    "id": "d", "kind": "attention_decode", "dtype": "bf16", "batch": 1, "heads_q": 32, "heads_kv": 8,
    "head_dim": 128, "kv_len": 8192, "measured_ms": 0.1,
}  # fmt: skip


@pytest.fixture(scope="module")
def h200():
    return load_system("h200")[0]


def with_host_cost(system, host_s):
    """`system` whose chip states a host launch-and-synchronize round trip of `host_s`."""
    from dataclasses import replace

    chip = system.chip
    return replace(system, chip=replace(chip, overheads=replace(chip.overheads, host_s=host_s)))


def test_a_batched_gemm_is_one_kernel_over_its_groups(h200):
    (op,) = case_ops({**GEMM, "groups": 4})
    assert op.groups == 4 and (op.m, op.k, op.n) == (64, 4096, 4096)
    # 2 x 4 x 64 x 4096 x 4096 = 8,589,934,592 flops; each group reads its own 4096 x 4096 weights
    # and 64 x 4096 inputs and writes 64 x 4096 outputs, 2 bytes each: 4 x (524,288 + 33,554,432 +
    # 524,288) = 138,412,032 bytes
    assert op.flops() == 8_589_934_592 and op.min_bytes() == 138_412_032
    one = simulate_op(case_ops(GEMM)[0], h200.chip, Condition.STANDALONE)
    four = simulate_op(op, h200.chip, Condition.STANDALONE)
    assert four.kernels == one.kernels, "one launch (and its reduction, if split) for all groups, not one per group"
    # four groups stream four times the weights in one launch: more than one group, less than four
    # launches of one (each paying its own lone launch)
    t1, t4 = predict_ms(GEMM, h200), predict_ms({**GEMM, "groups": 4}, h200)
    assert t4 == pytest.approx(1e3 * four.time_s) and t1 < t4 < 4 * t1


def test_count_runs_timed_together_are_back_to_back_after_the_first(h200, a100):
    chip = h200.chip
    launch = chip.overheads.launch_s
    # standalone: the first run pays the lone launch (an add streams, so no flush write-back);
    # each later one follows back to back, the graph time of one run: the standalone run less the
    # lone launch. Three runs: 3 t1 - 2 launch (to a cycle each)
    t1 = predict_ms(ADD, h200)
    assert predict_ms({**ADD, "count": 3}, h200) == pytest.approx(3 * t1 - 2e3 * launch, abs=3e3 / chip.clock_hz)
    (op,) = case_ops(ADD)
    assert t1 - 1e3 * simulate_op(op, chip, Condition.GRAPH).time_s == pytest.approx(
        1e3 * launch, abs=1e3 / chip.clock_hz
    )
    # a GEMM after the first runs without the flush's write-back: as in a graph
    (g,) = case_ops(GEMM)
    standalone, graph = simulate_op(g, chip, Condition.STANDALONE), simulate_op(g, chip, Condition.GRAPH)
    assert predict_ms({**GEMM, "count": 2}, h200) == pytest.approx(1e3 * (standalone.time_s + graph.time_s))
    # kernel timing: only the kernels' durations add, each read in whole microseconds: n times one
    kernel = CaseFile(Condition.KERNEL, resolution_s=1e-6)
    case = {**GEMM, "K": 14336, "dtype": "fp16"}
    assert predict_ms({**case, "count": 5}, a100, kernel) == pytest.approx(5 * predict_ms(case, a100, kernel))


def test_host_timing_adds_the_chips_round_trip_once_or_is_refused(h200):
    from archsim.runner.validation import predict

    host = {**ADD, "timing": "host"}
    with pytest.raises(CaseError) as err:
        predict(host, with_host_cost(h200, 0.0))
    assert str(err.value) == (
        "timing host: NVIDIA H200 SXM states no host launch-and-synchronize cost (overheads.host), the round "
        "trip a host wall-clock time adds to the kernels; host-timed cases are refused until the chip states a "
        "sourced value"
    )
    # a chip that states 12 us: the add back to back (its graph time) plus 12 us, once for two runs
    stated = with_host_cost(h200, 12e-6)
    (op,) = case_ops(ADD)
    graph_ms = 1e3 * simulate_op(op, h200.chip, Condition.GRAPH).time_s
    cycle_ms = 1e3 / h200.chip.clock_hz
    assert predict_ms(host, stated) == pytest.approx(graph_ms + 0.012, abs=cycle_ms)
    assert predict_ms({**host, "count": 2}, stated) == pytest.approx(2 * graph_ms + 0.012, abs=2 * cycle_ms)
    # the shipped H200 states 7.35 us (an A100 host's 9.65 us empty-kernel round trip less the
    # H200's own 1.85 us kernel and 0.45 us gap): the add's graph time plus 7.35 us
    assert h200.chip.overheads.host_s == pytest.approx(7.35e-6)
    assert predict_ms(host, h200) == pytest.approx(graph_ms + 0.00735, abs=cycle_ms)
    case = {"id": "x", "kind": "model_step", "timing": "host", **_minimal("model_step")}
    with pytest.raises(CaseError) as err:
        predict(case, stated)
    assert str(err.value) == "timing host: the host round trip of a model_step is not modelled (only single ops')"


def test_a_host_timed_all_reduce_adds_the_round_trip_to_the_lone_collective():
    from archsim.hardware.collectives import lone_wait_s, system_fabric

    system = load_system("h200x8")[0]
    case = {"id": "x", "kind": "allreduce", **_minimal("allreduce")}
    kernel = predict_ms(case, system)
    # 2 ranks wait 9.65 us x (H_2 - 1) = 4.825 us for the last; the host adds its 7.35 us round trip
    assert lone_wait_s(system_fabric(system), 2) == pytest.approx(4.825e-6)
    assert predict_ms({**case, "timing": "host"}, system) == pytest.approx(kernel + 0.00735)


def _minimal(kind):
    if kind == "allreduce":
        return {"dtype": "fp16", "ranks": 2, "bytes": 1 << 20, "measured_ms": 0.1}
    model = {"layers": 1, "hidden": 256, "heads": 4, "kv_heads": 4, "head_dim": 64, "ffn": 512, "vocab": 1000}
    return {"dtype": "bf16", "model": model, "phase": "decode", "batch": 1, "new_tokens": 1, "kv_len": 16,
            "embedding_and_head": False, "measured_ms": 0.1}  # fmt: skip


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ({**GEMM, "grups": 2}, "unknown field 'grups': a gemm case has M, K, N, groups, count, model, tp"),
        ({**ADD, "groups": 2}, "unknown field 'groups': a vector case has op, M, N, heads_q, heads_kv, head_dim, count, model, tp"),
        ({**DECODE, "causal": True}, "unknown field 'causal': an attention_decode case has batch, heads_q, heads_kv, head_dim, kv_len, split_kv, count, model, tp"),
        ({**ADD, "heads_q": 8}, "heads_q applies to a rotary case, not add"),
        (
            {**ADD, "op": "rotary", "N": 5120, "heads_q": 32},
            "a rotary case that gives heads_q needs heads_q and heads_kv",
        ),
        ({**GEMM, "count": 0}, "count must be from 1 to 65,536 (got 0)"),
        ({**GEMM, "groups": 0}, "groups must be from 1 to 1,048,576 (got 0)"),
        ({**GEMM, "model": {"layers": 2}}, "model must be a name (got {'layers': 2})"),
        ({"id": "s", "kind": "model_step", **_minimal("model_step"), "count": 2}, "unknown field 'count': a model_step case has model, phase, batch, new_tokens, kv_len, embedding_and_head"),
        ({"id": "s", "kind": "model_step", **_minimal("model_step") | {"model": {**_minimal("model_step")["model"], "experts": 8}}}, "unknown field model.experts: a model has layers, hidden, heads, kv_heads, head_dim, ffn, vocab"),
    ],
)  # fmt: skip
def test_a_field_no_case_of_its_kind_has_is_refused_by_name(case, message):
    from archsim.runner.validation import check_case

    with pytest.raises(CaseError) as err:
        check_case(case)
    assert str(err.value) == message


def test_validate_names_the_file_the_case_and_the_unknown_field(tmp_path, capsys):
    from archsim.cli import main

    path = tmp_path / "c.json"
    path.write_text(json.dumps({"cases": [GEMM, {**GEMM, "id": "g2", "batch_count": 3}]}))
    assert main(["validate", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: case g2: unknown field 'batch_count': a gemm case has M, K, N, groups, count, model, tp" in err


@pytest.mark.parametrize(
    "bad", [{"kind": 0}, {"kind": None}, {"kind": {}}, {"measured_ms": "x"}, {"measured_ms": None}]
)
def test_a_case_that_repeats_an_earlier_ones_id_is_refused_and_left_out_of_the_summary(tmp_path, capsys, bad):
    """Results, held-out sets and the JSON name cases by id: a second case of one id is an error
    of its own (exit 2), whatever else is wrong with it, and the first's result and its kind's
    floor stand as if it were alone (a repeated id's bad fields once reached the floor's sort)."""
    from archsim.cli import main

    path = tmp_path / "c.json"
    path.write_text(json.dumps({"cases": [GEMM, {**GEMM, **bad}]}))
    out = tmp_path / "o.json"
    assert main(["validate", str(path), "--quiet", "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: case {GEMM['id']}: id '{GEMM['id']}' is case #0's too: each case needs its own id" in err
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps({"cases": [GEMM]}))
    main(["validate", str(alone), "--quiet", "--json", str(tmp_path / "a.json")])
    assert json.loads(out.read_text())["summary"] == json.loads((tmp_path / "a.json").read_text())["summary"]


def test_validate_names_a_case_without_an_id_by_its_place_in_the_file(tmp_path):
    """`#1` for the file's second case (each case is simulated on its own, where it was `#0`)."""
    from archsim.cli import main

    path, out = tmp_path / "c.json", tmp_path / "o.json"
    anonymous = {k: v for k, v in GEMM.items() if k != "id"}
    path.write_text(json.dumps({"cases": [GEMM, anonymous]}))
    assert main(["validate", str(path), "--quiet", "--json", str(out)]) == 0
    assert [c["id"] for c in json.loads(out.read_text())["cases"]] == [GEMM["id"], "#1"]


def test_validate_cases_refuses_a_repeated_id_and_names_an_anonymous_case_by_its_place(a100):
    from archsim.runner.validation import summarise, validate_cases

    cases = [GEMM, {**GEMM, "M": 2}, {k: v for k, v in GEMM.items() if k != "id"}]
    results, errors = validate_cases(cases, a100)
    assert [r.id for r in results] == [GEMM["id"], "#2"]
    assert errors == [(GEMM["id"], f"id '{GEMM['id']}' is case #0's too: each case needs its own id")]
    assert summarise(results, cases)["gemm"]["n"] == 2


def test_layernorm_and_gelu_are_the_ops_archsim_op_runs(h200):
    for name, vop in (("layernorm", VectorOp.LAYERNORM), ("gelu", VectorOp.GELU)):
        (op,) = case_ops({**ADD, "op": name})
        assert op.vop is vop and op.kind is OpKind.VECTOR and (op.m, op.n) == (4096, 4096)
        assert predict_ms({**ADD, "op": name}, h200) == pytest.approx(
            1e3 * simulate_op(op, h200.chip, Condition.STANDALONE).time_s
        )


def test_decode_attention_splits_its_kv_as_the_library_does_unless_a_case_says(h200):
    from archsim.compiler.attention import kv_splits

    (split,) = case_ops(DECODE)
    (kept,) = case_ops({**DECODE, "split_kv": False})
    (file_kept,) = case_ops(DECODE, CaseFile(split_kv=False))
    (case_split,) = case_ops({**DECODE, "split_kv": True}, CaseFile(split_kv=False))
    assert split.split_kv and case_split.split_kv and not kept.split_kv and not file_kept.split_kv
    # batch 1 x 8 KV heads is 8 work items on 132 cores, under 80% of them: the library splits
    # the 8,192 keys (64 blocks of 128 at least) several ways, so the kernel runs faster
    assert kv_splits(8, h200.chip.cores, 8192 // 128) > 1
    assert predict_ms(DECODE, h200) < predict_ms({**DECODE, "split_kv": False}, h200)
    prefill = {**DECODE, "kind": "attention_prefill", "seq": 16, "causal": True}
    del prefill["kv_len"]
    (p,) = case_ops(prefill)
    assert not p.split_kv


def test_the_h200_sets_file_as_measured_keeps_its_decode_kernels_unsplit(tmp_path):
    from archsim.commands.validate import _as_measured, _shipped_meta, load_case_file

    # the ground truth's own copy has no archsim additions: it is known by its meta, and gets
    # the shipped set's split_kv: false (its README: one work item per sequence and KV head)
    path = tmp_path / "h200.json"
    path.write_text(json.dumps({"meta": _as_measured(_shipped_meta("h200_calibration")), "cases": [DECODE]}))
    _cases, meta, name = load_case_file(str(path))
    assert name == "h200_calibration" and meta.split_kv is False
    assert load_case_file("h200_holdout")[1].split_kv is True
    with pytest.raises(CaseError, match=r"meta\.split_kv must be true or false"):
        CaseFile.from_meta({"split_kv": "no"})


def test_every_field_of_every_shipped_case_is_modelled():
    import archsim
    from archsim.runner.validation import check_case, known_fields

    data = Path(archsim.__file__).parent / "data"
    used: dict[str, set] = {}
    for path in sorted(data.glob("*.json")):
        doc = json.loads(path.read_text())
        for case in doc.get("cases", []):
            check_case(case)  # raises on a field it does not model
            used.setdefault(case["kind"], set()).update(case)
    for kind, fields in used.items():
        assert fields <= set(known_fields(kind)), kind
    # what the shipped sets use beyond every case's fields (README's validation section lists them)
    assert {k: sorted(v - {"id", "kind", "dtype", "measured_ms"}) for k, v in used.items()} == {
        "gemm": ["K", "M", "N", "model", "tp"],
        "vector": ["M", "N", "heads_kv", "heads_q", "model", "op", "tp"],
        "allreduce": ["bytes", "ranks"],
        "attention_decode": ["batch", "head_dim", "heads_kv", "heads_q", "kv_len", "split_kv"],
        "attention_prefill": ["batch", "causal", "head_dim", "heads_kv", "heads_q", "seq"],
        "copy": ["bytes"],
        "model_step": ["batch", "embedding_and_head", "kv_len", "model", "new_tokens", "phase"],
    }


def test_op_attention_splits_decode_kv_unless_told_not_to(tmp_path):
    from archsim.cli import main

    times = {}
    for flags in ((), ("--no-split-kv",)):
        out = tmp_path / f"{len(flags)}.json"
        args = ["op", "attention", "--kv-len", "8192", "--json", str(out), *flags]
        assert main(args) == 0
        doc = json.loads(out.read_text())
        assert doc["config"]["options"]["op"]["split_kv"] is not bool(flags)
        times[flags] = doc["time_s"]
    assert times[()] < times[("--no-split-kv",)]
    assert main(["op", "gemm", "--M", "1", "--K", "64", "--N", "64", "--no-split-kv"]) == 2


# ---- any case file: a result or a refusal by name, never an internal error ----

HOSTILE_VALUES = [0, -1, 1.5, 10**9, "x", "", None, True, [], {}, float("nan"), float("inf")]


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(
    picks=st.lists(
        st.tuples(
            st.sampled_from([GEMM, ADD, DECODE]),
            st.one_of(st.none(), st.tuples(st.text(min_size=1, max_size=12), st.sampled_from(HOSTILE_VALUES))),
            st.booleans(),  # take the first case's id
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_mutation_of_a_case_file_is_validated_or_refused_by_case(tmp_path_factory, picks):
    """Cases built from good ones with a field set to a hostile value (a known field or not), some
    sharing an id: `validate` runs the good ones and names every bad one (exit 0 or 2), or refuses
    the file as a whole, and its summary counts one result per case that ran."""
    from archsim.cli import main

    cases = []
    for i, (case, change, same_id) in enumerate(picks):
        case = {**case, "M": 1, "K": 64, "N": 64} if case["kind"] == "gemm" else dict(case)
        case["id"] = GEMM["id"] if same_id else f"c{i}"
        if change is not None:
            key, value = change
            case[rng_key(case, key)] = value
        cases.append(case)
    folder = tmp_path_factory.mktemp("cases")
    path, out = folder / "c.json", folder / "o.json"
    path.write_text(json.dumps({"cases": cases}))
    code = main(["validate", str(path), "--quiet", "--json", str(out)])
    assert code in (0, 2)
    if not out.exists():  # the file as a whole refused (NaN or infinity is no JSON number)
        assert code == 2
        return
    data = json.loads(out.read_text())
    assert sum(s["n"] for s in data["summary"].values()) == len(data["cases"])
    assert len({c["id"] for c in data["cases"]}) == len(data["cases"])


def rng_key(case: dict, text: str) -> str:
    """A field of `case` chosen by `text` (one of its own, mostly), or `text` itself as a new field."""
    keys = sorted(case)
    return keys[len(text) % len(keys)] if len(text) < 9 else text
