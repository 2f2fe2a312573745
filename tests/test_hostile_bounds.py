"""The bounds and refusals behind the hostile-input suite, one behaviour each, with values worked
out by hand: escaped output, YAML 1.2 scalars and reader caps, strict JSON, trace timestamps,
output-path safety, the op-size estimate, bounded expressions, confined sweep specs and results
folders, the Dask address check and the flag bounds."""

import os
import time
from pathlib import Path

import pytest
from attention_ops import gqa_attention

from archsim.errors import ConfigError, OutputError, TooLargeError, printable

# output


def test_printable_escapes_what_a_terminal_would_act_on():
    assert printable("\x1b]0;owned\x07\x1b[2Jchip") == "\\x1b]0;owned\\x07\\x1b[2Jchip"
    assert printable("chip\u202egnp.exe") == "chip\\u202egnp.exe"  # a right-to-left override
    assert printable("chip\x9b2J") == "chip\\x9b2J"  # the one-byte C1 form of ESC [
    assert printable("a\tb\nc") == "a\tb\\nc" and printable("a\nb", newlines=True) == "a\nb"
    assert printable("チップ 🚀 [/]") == "チップ 🚀 [/]"  # printable text and markup are kept as they are


def test_names_are_shown_as_text_by_rich():
    from rich.console import Console

    from archsim.commands import shown

    console = Console(record=True, width=200)
    console.print(f"on {shown('[bold red]loud[/] chip[/]')} and {shown(chr(27) + '[2J')}")
    assert console.export_text().strip() == "on [bold red]loud[/] chip[/] and \\x1b[2J"


# YAML


def _yaml(tmp_path: Path, text: str):
    from archsim.config.yamlfile import read_yaml

    path = tmp_path / "x.yaml"
    path.write_text(text)
    return read_yaml(path).data


def test_yaml_scalars_follow_yaml_1_2(tmp_path):
    data = _yaml(
        tmp_path,
        "a: 1e3\nb: 0132\nc: 0x84\nd: 1:30\ne: 3_2\nf: yes\ng: .inf\nh: 2001-12-14\ni: ~\nj: True\nk: -0.5\nl: 0o17\n",
    )
    assert data == {
        "a": 1000.0,  # YAML 1.1: the text '1e3'
        "b": 132,  # YAML 1.1: octal 90
        "c": "0x84",  # YAML 1.1: 132
        "d": "1:30",  # YAML 1.1: sexagesimal 90
        "e": "3_2",  # YAML 1.1: 32
        "f": "yes",  # YAML 1.1: True
        "g": float("inf"),
        "h": "2001-12-14",  # YAML 1.1: a date
        "i": None,
        "j": True,
        "k": -0.5,
        "l": "0o17",  # decimal numbers only
    }


def test_yaml_nodes_are_counted_while_composing(tmp_path):
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="too large: more than 100,000 YAML nodes"):
        _yaml(tmp_path, "a: [" + "1," * 150_000 + "1]\n")
    assert time.perf_counter() - start < 10  # stops at the cap instead of building 150,001 nodes


def test_yaml_values_are_bounded_alone_and_expanded(tmp_path):
    with pytest.raises(ConfigError, match="a value longer than 65,536 characters"):
        _yaml(tmp_path, "a: " + "x" * 70_000 + "\n")
    # 60,000 characters aliased 20 times: 1,200,000 > 1,048,576 once expanded
    with pytest.raises(ConfigError, match="aliases expanded, are longer than 1,048,576 characters"):
        _yaml(tmp_path, "a: &s " + "x" * 60_000 + "\nb: [" + ", ".join(["*s"] * 20) + "]\n")
    with pytest.raises(ConfigError, match="a key longer than 256 characters"):
        _yaml(tmp_path, "k" * 300 + ": 1\n")


def test_a_file_that_is_not_a_mapping_is_never_quoted(tmp_path):
    with pytest.raises(ConfigError) as err:
        _yaml(tmp_path, "root:x:0:0:SECRET:/root:/bin/bash\n")
    assert "SECRET" not in str(err.value) and "holds a single value" in str(err.value)


# JSON


def _json(tmp_path: Path, text: str):
    from archsim.config.jsonfile import read_json

    path = tmp_path / "c.json"
    path.write_text(text)
    return read_json(path)[0]


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": -Infinity}', "-Infinity is not a JSON number"),
        ('{\n "a": 1,\n "a": 2\n}', "key 'a' is given twice"),
        ('{"a": ' + "9" * 101 + "}", "a number of 101 digits"),
        ('{"a": ' + "[" * 65 + "]" * 65 + "}", "nested more than 64 deep"),
        ("[1,", "not valid JSON: Expecting value"),
    ],
)
def test_json_is_read_strictly(tmp_path, text, why):
    with pytest.raises(ConfigError, match=None) as err:
        _json(tmp_path, text)
    assert why in str(err.value)


def test_json_duplicate_keys_are_located(tmp_path):
    with pytest.raises(ConfigError) as err:
        _json(tmp_path, '{\n "a": 1,\n "a": 2\n}')
    assert str(err.value).startswith(f"{tmp_path / 'c.json'}:2: ")  # the first "a":


def test_json_inputs_must_be_regular_files(tmp_path):
    from archsim.config.jsonfile import read_json

    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(ConfigError, match="is not a regular file"):
        read_json(tmp_path / "fifo.json")  # a read would block forever


# traces


def test_azure_timestamps_are_whole_nanoseconds_without_wraparound():
    from archsim.serving.tracefile import timestamp_ns

    assert timestamp_ns("1970-01-01 00:00:01.5") == 1_500_000_000
    assert timestamp_ns("1970-01-01 01:00:00+01:00") == 0  # an hour east of UTC is midnight UTC
    # past datetime64[ns]'s year 2262 the difference stays exact: one day is 86,400 s
    assert timestamp_ns("2300-01-02 00:00:00") - timestamp_ns("2300-01-01 00:00:00") == 86_400 * 10**9
    for bad in ("2023-13-01 00:00:00", "2023-02-30 00:00:00", "2023-11-16 25:00:00", "1700000000", "NaT", ""):
        assert timestamp_ns(bad) is None


def test_a_trace_is_read_only_as_far_as_asked(tmp_path):
    from archsim.serving.requests import load_trace

    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,2\n1,20,3\nbad,bad,bad\n")
    assert load_trace(str(path), limit=2).prompt_tokens.tolist() == [10, 20]  # the bad line is never read
    with pytest.raises(ConfigError, match=r"t\.csv:4: arrival_s"):
        load_trace(str(path))


def test_a_trace_that_is_not_one_is_not_quoted(tmp_path):
    from archsim.serving.requests import load_trace

    path = tmp_path / "passwd"
    path.write_text("root:x:0:0:SECRET:/root:/bin/bash\n")
    with pytest.raises(ConfigError) as err:
        load_trace(str(path))
    assert "SECRET" not in str(err.value) and "not a trace header" in str(err.value)


# output paths


def test_output_paths_that_are_not_regular_files_are_refused(tmp_path):
    from archsim.report.export import check_output, check_outputs

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is not a regular file"):
        check_output(tmp_path / "fifo")
    with pytest.raises(OutputError, match="is a folder, not a file"):
        check_output(tmp_path / "dir")
    with pytest.raises(OutputError, match="is a file, not a folder"):
        check_output(tmp_path / "file" / "o.json")
    with pytest.raises(OutputError, match="is an input of this run"):
        check_output(tmp_path / "file", inputs=(str(tmp_path / "file"),))
    with pytest.raises(OutputError, match="given to both --json and --csv"):
        check_outputs([("--json", str(tmp_path / "o")), ("--csv", str(tmp_path / "o"))])


def test_a_failed_write_leaves_nothing_and_names_the_path(tmp_path, monkeypatch):
    import errno

    from archsim.report import export

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export.os, "replace", full)
    with pytest.raises(OutputError, match=r"o\.json: cannot write \(No space left on device\)"):
        export.write_json(tmp_path / "o.json", {"a": 1})
    assert list(tmp_path.iterdir()) == []


def test_files_are_created_as_the_umask_allows(tmp_path):
    from archsim.report.export import write_text

    old = os.umask(0o027)
    try:
        write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640  # 0666 less 027


# the op-size estimate


@pytest.fixture(scope="module")
def h200():
    from archsim.config.loader import load_system

    return load_system("h200")[0].chip


def test_attention_entries_by_hand(h200):
    from archsim.runner.size import attention_entries

    # 228 KiB of SRAM, head_dim 128, bf16: 128x128 blocks fit ((2*128*128 + 4*128*128) * 2 B = 192 KiB),
    # 256x128 do not; 1024 queries are 8 blocks, and causal block i reads i + 1 K/V blocks:
    # 1 + 2 + ... + 8 = 36 per head, 32 heads
    prefill = gqa_attention(1024, 1024, causal=True)
    assert attention_entries(prefill, h200) == 32 * 36
    # decode: one item per (sequence, KV head) in 128-key blocks: 2 x 8 x ceil(1000 / 128) = 2 x 8 x 8
    decode = gqa_attention(1, 1000, batch=2)
    assert attention_entries(decode, h200) == 128


def test_gemm_and_vector_entries_by_hand(h200, monkeypatch):
    import archsim.compiler.gemm as gemm
    import archsim.runner.size as size
    from archsim.compiler.gemm_phases import GemmMapping
    from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
    from archsim.hardware import DType
    from archsim.runner.size import gemm_entries, streaming_entries

    # one 128x128x64 tiling of 1024^3 on 132 cores: 64 tiles of 16 K steps; items 64, a core
    # sequence ceil(64 / 132) = 1 item of 16 steps (min(3, 132) = 3 distinct at most): 64 + 3 x 16;
    # under stream-K also a tail of min(64, 2 x 132) = 64 tiles x 16 steps: + 1024
    gemm_op = Op(OpKind.GEMM, DType.BF16, m=1024, k=1024, n=1024, scaling=Scaling.FIXED)
    monkeypatch.setattr(size, "shortlist_head", lambda op, chip, count: [gemm.Tiling(128, 128, 64)])
    assert gemm_entries(gemm_op, h200) == 64 + 48
    stream_k = gemm.Tiling(128, 128, 64, GemmMapping.STREAM_K)
    monkeypatch.setattr(size, "shortlist_head", lambda op, chip, count: [gemm.Tiling(128, 128, 64), stream_k])
    assert gemm_entries(gemm_op, h200) == 64 + 48 + 1024
    # 1000 x 4096 bf16 is 8,192,000 B in quarters of SRAM (58,368 B): 141, plus a chain per row
    vector = Op(OpKind.VECTOR, DType.BF16, m=1000, n=4096, vop=VectorOp.RMSNORM, scaling=Scaling.FIXED)
    assert streaming_entries(vector, h200) == 141 + 1000


def test_an_op_past_the_limit_is_refused_with_the_numbers(h200):
    from archsim.limits import MAX_PROGRAM_ENTRIES
    from archsim.runner.size import check_op

    huge = gqa_attention(10**6, 10**6)
    with pytest.raises(TooLargeError) as err:
        check_op(huge, h200, "attention")
    assert f"more than the limit of {MAX_PROGRAM_ENTRIES:,}" in str(err.value)
    assert "1,000,000 queries over 1,000,000 keys" in str(err.value)
    assert "a smaller batch, prompt or prefill chunk" in str(err.value)  # how to shrink it


# expressions


@pytest.mark.parametrize(
    "text, why",
    [
        ("round(5, -10**9)", "round takes at most 400 digits"),
        ("((10**1000)**1000)**1000", "the power would have about 3,321,000 bits"),  # log2(10^1000) = 3321
        ("(-8) ** 0.5", "is not a real number"),
        ("2**1000 * 2**1000 * 2**1000 * 2**1000 * 2**1000", "a whole number of 5,001 bits"),  # 2^5000
    ],
)
def test_expression_values_are_bounded(text, why):
    from archsim.sweep.expr import parse_expr

    with pytest.raises(ValueError) as err:
        parse_expr(text, set()).evaluate({})
    assert why in str(err.value)


def test_a_name_is_never_repeated_or_grown_by_arithmetic():
    # "abc" * 10**9 would build a 3 GB string before anything checked it: text takes part in no
    # arithmetic but joining two names, and a join is bounded like an expression (4,096 chars)
    from archsim.sweep.expr import parse_expr

    e = parse_expr("name * 10**9", {"name"})
    with pytest.raises(TypeError, match="cannot be an operand of mult"):
        e.evaluate({"name": "abc"})
    assert parse_expr("a + b", {"a", "b"}).evaluate({"a": "h2", "b": "00"}) == "h200"
    with pytest.raises(ValueError, match="5,000 characters"):
        parse_expr("a + a", {"a"}).evaluate({"a": "x" * 2500})


def test_expressions_are_bounded_in_length_and_depth():
    from archsim.sweep.expr import ExprError, parse_expr

    with pytest.raises(ExprError, match="at most 4,096 characters"):
        parse_expr("+".join(["1"] * 3000), set())
    with pytest.raises(ExprError, match="nested more than 100 deep"):
        parse_expr("-" * 120 + "1", set())  # 120 nested negations


# sweep specs and results folders


SPEC = """\
name: t
hardware: {hw}
workload: llama3_8b
set:
  workload.scenario.prompt_tokens: 16
  workload.scenario.output_tokens: 2
parameters:
  clock:
    path: hardware.clock
    values: [1.5, 1.9]
    unit: GHz
{extra}objectives:
  tpot_ms: tpot_s * 1000
"""


def _spec(folder: Path, hw: str = "h200", extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "s.yaml"
    path.write_text(SPEC.format(hw=hw, extra=extra))
    return path


def test_a_spec_names_files_under_its_folder_or_an_allowed_one(tmp_path):
    from archsim.sweep.spec import load_spec

    (tmp_path / "chip.yaml").write_text((Path(__file__).parents[1] / "hw_configs" / "h200.yaml").read_text())
    spec = _spec(tmp_path / "specs", hw="../chip.yaml")
    with pytest.raises(ConfigError, match="is outside the spec's folder"):
        load_spec(spec)
    assert load_spec(spec, allowed=(str(tmp_path),)).hardware == str((tmp_path / "chip.yaml").resolve())


def test_a_parameter_without_a_path_is_read_or_refused(tmp_path):
    from archsim.sweep.points import resolve_points
    from archsim.sweep.spec import load_spec

    spec = _spec(tmp_path)
    weighted = spec.read_text().replace("    unit: GHz\n", "    unit: GHz\n  weight:\n    values: [1, 2]\n")
    spec.write_text(weighted.replace("tpot_s * 1000", "tpot_s * 1000 * weight"))
    tasks = resolve_points(load_spec(spec))
    assert len(tasks) == 4 and len({t.config_hash for t in tasks}) == 4  # 2 clocks x 2 weights, none merged
    spec.write_text(weighted)  # nothing reads `weight`: its two values would be one design
    with pytest.raises(ConfigError, match=r"parameters\.weight: has no path and no derived value"):
        load_spec(spec)


def test_a_too_wide_whole_number_is_a_failed_point(tmp_path):
    from archsim.sweep.points import resolve_points
    from archsim.sweep.spec import load_spec

    spec = _spec(tmp_path, extra="derived:\n  huge:\n    expr: 10 ** 30\n    integer: true\n")
    tasks = resolve_points(load_spec(spec))
    assert [t.error for t in tasks] == ["huge: a 100-bit whole number does not fit a 64-bit column"] * 2
    assert all(dict(t.values)["huge"] is None and dict(t.values)["clock"] in (1.5, 1.9) for t in tasks)


def test_a_results_folder_with_other_files_is_refused(tmp_path):
    pytest.importorskip("pyarrow")
    from archsim.sweep.store import ResultStore, StoreError

    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    with pytest.raises(StoreError, match=r"holds files archsim sweep did not write \(thesis.tex\)"):
        ResultStore(out, {}, []).open()
    assert (out / "thesis.tex").read_text() == "mine"
    (out / "thesis.tex").unlink()
    (out / "points").mkdir()
    (out / "points" / ".part-0123456789abcdef.parquet.42.tmp").write_text("half")  # being written when killed
    with ResultStore(out, {}, []):
        pass
    assert sorted(p.name for p in out.iterdir()) == [".lock", "points", "sweep.json"]
    assert list((out / "points").iterdir()) == []
    (out / "points" / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match=r"points/notes\.txt"):
        ResultStore(out, {}, []).open()


def test_a_damaged_manifest_is_named(tmp_path):
    pytest.importorskip("pyarrow")
    from archsim.sweep.store import StoreError, read_manifest

    (tmp_path / "sweep.json").write_text('{"format": 1, "sett')
    with pytest.raises(StoreError, match=r"sweep\.json: not a readable results manifest"):
        read_manifest(tmp_path)


def test_a_bad_dask_address_is_refused_in_seconds():
    from archsim.sweep.executors import ExecutorUnavailable, check_dask_address

    for address, why in (
        ("foo", "is not scheme://host:port"),
        ("tcp://127.0.0.1:99999", "is not scheme://host:port"),
        ("tcp://no-such-host.invalid:8786", "cannot resolve the host"),
        ("tcp://127.0.0.1:9", "nothing answers at 127.0.0.1:9"),
    ):
        start = time.perf_counter()
        with pytest.raises(ExecutorUnavailable, match=None) as err:
            check_dask_address(address)
        assert why in str(err.value) and time.perf_counter() - start < 10


# Hugging Face configs


def test_experts_under_other_names_are_read_and_what_cannot_be_modelled_is_refused(tmp_path):
    import json

    from archsim.config.hf import load_hf_config

    base = json.loads((Path(__file__).parent / "data" / "hf" / "Meta-Llama-3-8B" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, "num_experts": 64, "num_experts_per_tok": 8, "moe_intermediate_size": 1024}))
    model = load_hf_config(str(path)).model
    assert (model.experts, model.top_k, model.ffn) == (64, 8, 1024)  # OLMoE / Qwen3-MoE field names
    path.write_text(json.dumps({**base, "num_local_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1}))
    with pytest.raises(ConfigError, match="n_shared_experts: shared experts are read for DeepseekV2ForCausalLM"):
        load_hf_config(str(path))


# flags


@pytest.mark.parametrize(
    "argv, message",
    [
        (["serve", "--seed", "-1"], "argument --seed: must be at least 0 (got -1)"),
        (["serve", "--cv", "1e-300"], "argument --cv: must be at least 0.001 (got 1e-300)"),
        (["serve", "--rate", "inf"], "argument --rate: must be a number (got 'inf')"),
        (["serve", "--requests", "10000001"], "argument --requests: must be at most 10,000,000 (got 10000001)"),
        (["serve", "--instances", "2147483647"], "argument --instances: must be at most 1,024"),
        (["run", "--prompt", "16777217"], "argument --prompt: must be at most 16,777,216 (got 16777217)"),
        (["sweep", "s.yaml", "--out", "o", "--workers", "1025"], "argument --workers: must be at most 1,024"),
    ],
)
def test_flag_values_are_bounded(capsys, argv, message):
    from archsim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_prompt_and_generation_together_are_bounded(capsys):
    from archsim.cli import main

    assert main(["run", "--prompt", "16777216", "--generate", "2"]) == 2
    # the flags go into the workload before validation, so its schema's bound speaks for them
    assert (
        "flags: scenario.output_tokens: prompt_tokens + output_tokens must be at most 16,777,216 (got 16,777,218)"
        in capsys.readouterr().err
    )
