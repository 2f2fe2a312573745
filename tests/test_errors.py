"""Every kind of bad input gets one located, quoted answer: `path:LINE: key.path: why (got VALUE)`.

Each case edits a shipped file the way a user might get it wrong and checks the exact message,
line included; the CLI cases check exit code 2 and that no traceback reaches the user.
"""

from pathlib import Path

import pytest

from archsim.cli import main
from archsim.config.loader import load_system, load_workload
from archsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
H200 = "hw_configs/h200.yaml"
LLAMA = "workloads/llama3_8b.yaml"
MIXTRAL = "workloads/mixtral_8x7b.yaml"


def _edit(tmp_path, src: str, old: str, new: str) -> str:
    """A copy of shipped `src` with `old` replaced by `new` on the first line holding it; an `old`
    written as a key path ('hbm.latency=') has that key's whole line replaced (indent and
    comment kept), whatever its value today."""
    lines = (ROOT / src).read_text().splitlines(keepends=True)
    if old.endswith("="):
        i = _key_line(lines, old[:-1])
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        comment = lines[i][lines[i].index("#") :] if "#" in lines[i] else "\n"
        lines[i] = f"{indent}{new}  {comment}"
    else:
        i = next(i for i, line in enumerate(lines) if old in line)
        lines[i] = lines[i].replace(old, new, 1)
    out = tmp_path / Path(src).name
    out.write_text("".join(lines))
    return str(out)


def _key_line(lines: list[str], key_path: str) -> int:
    """Index of the line of a block-style key path such as 'hbm.latency'."""
    want, depth, indents = key_path.split("."), 0, []
    for i, line in enumerate(lines):
        text = line.split("#")[0].rstrip()
        if not text.strip():
            continue
        indent = len(text) - len(text.lstrip())
        while indents and indent <= indents[-1]:
            indents.pop()
            depth = len(indents)
        if depth < len(want) and text.strip().startswith(want[depth] + ":"):
            if depth == len(want) - 1:
                return i
            indents.append(indent)
            depth += 1
    raise KeyError(key_path)


def _line_of(path: str, needle: str) -> int:
    """Line whose content (comment aside) is `needle`, else the first that holds it."""
    lines = [line.split("#")[0].strip() for line in Path(path).read_text().splitlines()]
    exact = [i for i, text in enumerate(lines, 1) if text == needle.strip()]
    return exact[0] if exact else next(i for i, text in enumerate(lines, 1) if needle.strip() in text)


def _problems(load, path: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load(path)
    return [str(p) for p in err.value.problems]


# (file, old text, new text, line to point at, key, message)
HW_CASES = [
    ("cores.count=", "count: '132'", "cores.count", "expected a whole number (got '132')"),
    ("cores.count=", "count: 132.5", "cores.count", "expected a whole number (got 132.5)"),
    ("cores.count=", "count: true", "cores.count", "expected a whole number (got True)"),
    ("cores.count=", "count: [1, 2]", "cores.count", "expected a whole number (got [1, 2])"),
    ("cores.count=", "count: 0", "cores.count", "must be greater than 0 (got 0)"),
    ("cores.count=", "count: -4", "cores.count", "must be greater than 0 (got -4)"),
    ("cores.count=", "count: 5000000", "cores.count", "must be at most 1048576 (got 5000000)"),
    ("cores.sram.capacity=", "capacity: 0 KiB", "cores.sram.capacity", "must be greater than zero (got '0 KiB')"),
    ("cores.sram.capacity=", "capacity: -2 KiB", "cores.sram.capacity", "must be greater than zero (got '-2 KiB')"),
    (
        "cores.sram.capacity=",
        "capacity: 0.5 B",
        "cores.sram.capacity",
        "must be at least 1 B; check the unit prefix (got '0.5 B')",
    ),
    (
        "cores.sram.capacity=",
        "capacity: 1e400 B",
        "cores.sram.capacity",
        "number out of range; expected e.g. '60 MiB' (got '1e400 B')",
    ),
    ("l2.capacity=", "capacity: 60 GB/s", "l2.capacity", "unit 'GB/s' is bytes/s, but bytes is due (got '60 GB/s')"),
    ("l2.capacity=", "capacity: 60", "l2.capacity", "a unit is required, e.g. '60 MiB' (got 60)"),
    (
        "l2.capacity=",
        "capacity: 60 furlongs",
        "l2.capacity",
        "unknown unit 'furlongs'; expected e.g. '60 MiB' (got '60 furlongs')",
    ),
    (
        "l2.capacity=",
        "capacity: {size: 60}",
        "l2.capacity",
        "expected a quantity in bytes such as '60 MiB' (got {'size': 60})",
    ),
    ("clock=", "clock: 1.755 Hz", "clock", "must be at least 1 MHz; check the unit prefix (got '1.755 Hz')"),
    (
        "hbm.data_rate=",
        "data_rate: 6.25 bps",
        "hbm.data_rate",
        "must be at least 1 Mbps; check the unit prefix (got '6.25 bps')",
    ),
    (
        "cores.matrix_units.dataflow=",
        "dataflow: WS",
        "cores.matrix_units.dataflow",
        "expected 'ws', 'os' or 'is' (got 'WS'); did you mean 'ws'?",
    ),
    (
        "cores.matrix_units.dataflow=",
        "dataflow: diagonal",
        "cores.matrix_units.dataflow",
        "expected 'ws', 'os' or 'is' (got 'diagonal')",
    ),
    (
        "k_per_cycle: {bf16: 1,",
        "k_per_cycle: {bf61: 1,",
        "cores.matrix_units.k_per_cycle.bf61",
        "expected 'bf16', 'fp16', 'fp8', 'int8', 'fp32', 'int4', 'mxfp8', 'mxfp4' or 'nvfp4' (got 'bf61'); did you mean 'bf16'?",
    ),
    (
        "k_per_cycle: {bf16: 1,",
        "k_per_cycle: {",
        "cores.matrix_units.k_per_cycle",
        "a bf16 rate is required (got {'fp16': 1, 'fp8': 2, 'int8': 2})",
    ),
    (
        "hbm.refresh_time=",
        "refresh_time: 5 us",
        "hbm.refresh_time",
        "must be shorter than refresh_interval (3.90 us) (got 5.00 us)",
    ),
    ("hbm.latency=", "latncy: 650 ns", "hbm.latncy", "unknown key; did you mean 'latency'?"),
    ("name=", "name: ''", "name", "must not be empty (got '')"),
    ("name=", "name: 200", "name", "expected text (got 200)"),
    ("name=", "name: !!int H200", "name", "cannot be read as int (got 'H200')"),
    ("noc.hops=", "hops: 2\n  hops: 3", "noc.hops", "duplicate key (first given on line FIRST)"),
]


@pytest.mark.parametrize(
    "old,new,key,message", HW_CASES, ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None
)
def test_hardware_mistakes_are_located_and_quoted(tmp_path, old, new, key, message):
    path = _edit(tmp_path, H200, old, new)
    first = _line_of(path, new.strip().split("\n")[0])
    line = first + 1 if "duplicate" in message else first
    assert f"{path}:{line}: {key}: {message.replace('FIRST', str(first))}" in _problems(load_system, path)


WORKLOAD_CASES = [
    (LLAMA, "  kv_heads: 8", "  kv_heads: 7", "model.kv_heads", "kv_heads (7) must divide heads (32)"),
    # YAML 1.2: 1e3 is the float 1000.0, `yes` is text (YAML 1.1 read them as '1e3' and True)
    (LLAMA, "  layers: 32", "  layers: 1e3", "model.layers", "expected a whole number (got 1000.0)"),
    (LLAMA, "  batch: 1", "  batch: yes", "scenario.batch", "expected a whole number (got 'yes')"),
    (LLAMA, "  batch: 1", "  batch: 0x10", "scenario.batch", "expected a whole number (got '0x10')"),
    (LLAMA, "  batch: 1", "  batch: 1:30", "scenario.batch", "expected a whole number (got '1:30')"),
    (LLAMA, "  batch: 1", "  batch: 3_2", "scenario.batch", "expected a whole number (got '3_2')"),
    (LLAMA, "  layers: 32", "  layers: 5000", "model.layers", "must be at most 4096 (got 5000)"),
    (
        LLAMA,
        "  output_tokens: 256",
        "  output_tokens: 16776000",
        "scenario.output_tokens",
        "prompt_tokens + output_tokens must be at most 16,777,216 (got 16,778,048)",
    ),
    (LLAMA, "  batch: 1", "  batch: 0", "scenario.batch", "must be greater than 0 (got 0)"),
    (
        LLAMA,
        "tied_embeddings: false",
        "tied_embeddings: 'no'",
        "model.tied_embeddings",
        "expected true or false (got 'no')",
    ),
    (
        LLAMA,
        "  weights: bf16",
        "  weights: bf15",
        "dtypes.weights",
        "expected 'fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4', 'mxfp8', 'mxfp4' or 'nvfp4' (got 'bf15'); did you mean 'bf16'?",
    ),
    (
        LLAMA,
        "fusion: fused",
        "fusion: fusd",
        "fusion",
        "expected 'eager' or 'fused' (got 'fusd'); did you mean 'fused'?",
    ),
    (LLAMA, "dtypes:", "dtypes: [bf16]\nunused:", "dtypes", "expected a mapping of keys to values (got ['bf16'])"),
    (MIXTRAL, "top_k: 2", "top_k: 9", "model.moe.top_k", "top_k (9) must not exceed experts (8)"),
]


@pytest.mark.parametrize(
    "src,old,new,key,message", WORKLOAD_CASES, ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None
)
def test_workload_mistakes_are_located_and_quoted(tmp_path, src, old, new, key, message):
    path = _edit(tmp_path, src, old, new)
    line = _line_of(path, new.strip().split("\n")[0])
    assert f"{path}:{line}: {key}: {message}" in _problems(load_workload, path)


def test_missing_and_misspelt_section(tmp_path):
    path = _edit(tmp_path, LLAMA, "scenario:", "scenarios:")
    assert _problems(load_workload, path) == [
        f"{path}:2: scenario: missing required key",
        f"{path}:{_line_of(path, 'scenarios:')}: scenarios: unknown key; did you mean 'scenario'?",
    ]


def test_every_problem_in_a_file_at_once(tmp_path):
    path = _edit(tmp_path, H200, "cores.count=", "count: 0")
    Path(path).write_text(
        Path(path).read_text().replace("dataflow: ws", "dataflow: xs").replace("capacity: 60 MiB", "capacity: 60 GB/s")
    )
    keys = [p.split(": ")[1] for p in _problems(load_system, path)]
    assert keys == ["cores.count", "cores.matrix_units.dataflow", "l2.capacity"]


@pytest.mark.parametrize(
    "content,line,message",
    [
        (b"", 1, "is empty"),
        (b"# only a comment\n", 1, "is empty"),
        (b"name: x\nclock: \xff\xfe GHz\n", 2, "is not UTF-8 text (binary data at byte 15)"),
        (b"name: x\n\nclock: 1\x00 GHz\n", 3, "is not a text file (contains NUL bytes)"),
        (b"name: x\nclock: \x07\n", 2, "not valid YAML: control character #x0007 is not allowed"),
        (b"name: [unclosed\nclock: 1 GHz\n", 2, "not valid YAML: expected ',' or ']', but got ':'"),
        (b"name: x\n  clock: 1 GHz\n", 2, "not valid YAML: mapping values are not allowed here"),
        # not a config file: what it holds is named, what it says is never quoted
        (b"- a\n- b\n", 1, "must be a mapping of keys to values (`key: value` lines); this file holds a list"),
        (
            b"just some text\n",
            1,
            "must be a mapping of keys to values (`key: value` lines); this file holds a single value (text or a number), not keys",
        ),
        (
            b"name: x\n---\nname: y\n",
            2,
            "not valid YAML: expected a single document in the stream, but found another document",
        ),
        (b"a: &x [1, *x]\n", 1, "a[1]: an alias refers to the node that contains it"),
        (
            b"a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            b"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
            1,
            "too large: expands to more than 100,000 YAML nodes (nested too deeply or aliased too often)",
        ),
        (b"[" * 1000 + b"]" * 1000, 1, "not valid YAML: nested too deeply"),
        (
            b"name: !!python/object/apply:os.system [ls]\n",
            1,
            "name: not valid YAML: unknown tag 'tag:yaml.org,2002:python/object/apply:os.system'",
        ),
        (
            b"name: !!python/name:os.system x\n",
            1,
            "name: not valid YAML: unknown tag 'tag:yaml.org,2002:python/name:os.system'",
        ),
        (b"? [a, b]\n: 1\n", 1, "keys must be plain names"),
    ],
    ids=lambda v: repr(v)[:24] if isinstance(v, bytes) else None,
)
def test_unreadable_files_are_located(tmp_path, content, line, message):
    path = tmp_path / "chip.yaml"
    path.write_bytes(content)
    problems = _problems(load_system, str(path))
    assert problems[0] == f"{path}:{line}: {message}"


def test_paths_that_are_not_files(tmp_path):
    assert _problems(load_system, str(tmp_path)) == [f"{tmp_path}: is a directory, not a YAML file"]
    assert _problems(load_system, str(tmp_path / "nope.yaml")) == [f"{tmp_path / 'nope.yaml'}: no such file"]
    assert _problems(load_system, "/dev/null") == ["/dev/null: is not a regular file (a device, pipe or socket)"]
    assert _problems(load_workload, "lama3_8b") == [
        "lama3_8b: no such file or shipped workloads name; did you mean 'llama3_8b'?"
    ]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["run", "--batch", "-3"], "archsim: error: argument --batch: must be greater than zero (got -3)"),
        (["run", "--generate", "0"], "archsim: error: argument --generate: must be greater than zero (got 0)"),
        (["run", "--prompt", "1.5"], "archsim: error: argument --prompt: must be a whole number (got '1.5')"),
        (
            ["run", "--batch", "9" * 30],
            "archsim: error: argument --batch: must be at most 1,048,576 (got " + "9" * 30 + ")",
        ),
        (["run", "--hw", "h201"], "h201: no such file or shipped hw_configs name; did you mean 'h200'?"),
        (
            ["run", "--workload", "mixtral"],
            "mixtral: no such file or shipped workloads name; did you mean 'mixtral_8x7b'?",
        ),
    ],
)
def test_bad_flags_exit_2_with_one_line(capsys, argv, message):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err.splitlines() and "Traceback" not in err


def test_bad_config_through_the_cli(tmp_path, capsys):
    path = _edit(tmp_path, H200, "dataflow: ws", "dataflow: diagonal")
    assert main(["run", "--hw", path, "--prompt", "64", "--generate", "2"]) == 2
    line = _line_of(path, "dataflow: diagonal")
    assert capsys.readouterr().err == (
        f"{path}:{line}: cores.matrix_units.dataflow: expected 'ws', 'os' or 'is' (got 'diagonal')\n"
    )


def _refusal(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    return err


def test_does_not_fit_names_weights_kv_and_capacity(capsys):
    # Llama-3-70B: 70,553,706,496 parameters x 2 B = 141 GB; KV 2304 tokens x 2 x 80 layers x 8 heads
    # x 128 x 2 B = 755 MB; activations of the profile step of an engine configured for one sequence
    # of 2304 tokens: 2304 x (57344 + 2 x 8192) x 2 B + 1 x 128256 x 4 B = 340 MB; the engine takes
    # 90% of 16 GB.
    err = _refusal(capsys, ["run", "--hw", "tpu_v5e", "--workload", "llama3_70b"])
    assert err.startswith(
        "archsim: error: Llama-3-70B with batch 1 and context 2304 does not fit on Google TPU v5e: "
        "weights 141 GB + KV cache 755 MB + activations 340 MB = 142 GB > 90% of capacity 16 GB (14.4 GB); "
        "not even one sequence fits: use a chip with more memory, more chips, or smaller dtypes"
    )


def test_does_not_fit_names_the_largest_batch(capsys):
    # Llama-3-8B, context 8192: per sequence 8192 x 131072 B of KV. As a serving engine plans it, 90%
    # of the 143,771 MiB (150,754,820,096 B) the device reports, less 16,060,522,496 B of weights,
    # less one step's activations (8192 x (28672 + 8192) x 2 B + 256 x 128256 x 4 B = 735 MB),
    # leaves 118,883,501,670 B: room for 110 sequences.
    per_seq = 8192 * 131072
    room = 143_771 * 2**20 * 0.9 - 16_060_522_496 - (8192 * (28672 + 8192) * 2 + 256 * 128256 * 4)
    assert 110 * per_seq <= room < 111 * per_seq
    err = _refusal(capsys, ["run", "--batch", "4096", "--prompt", "4096", "--generate", "4096"])
    assert err.startswith(
        "archsim: error: Llama-3-8B with batch 4096 and context 8192 does not fit on NVIDIA H200 SXM: "
        "weights 16.1 GB + KV cache 4.4 TB + activations 735 MB = 4.41 TB > 90% of capacity 151 GB (136 GB); "
        "the largest batch that fits is 110"
    )


def test_unwritable_output_path_exits_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["run", "--prompt", "64", "--generate", "2", "--quiet", "--json", str(blocker / "out.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("archsim: error: ") and str(blocker) in err and "Traceback" not in err


def test_a_bug_is_one_line_and_exit_1_unless_debugging(monkeypatch, capsys):
    import archsim.commands.list as listing

    def broken(args):
        raise RuntimeError("unexpected state")

    monkeypatch.setattr(listing, "run", broken)
    monkeypatch.delenv("ARCHSIM_DEBUG", raising=False)
    assert main(["list"]) == 1
    assert capsys.readouterr().err == (
        "archsim: internal error: RuntimeError: unexpected state "
        "(a bug in archsim; set ARCHSIM_DEBUG=1 for the traceback)\n"
    )
    monkeypatch.setenv("ARCHSIM_DEBUG", "1")
    with pytest.raises(RuntimeError, match="unexpected state"):
        main(["list"])
