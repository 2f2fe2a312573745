"""Fuzz the config loaders with mutated copies of the shipped hardware and workload files.

Each example takes one of `hw_configs/*.yaml` or `workloads/*.yaml` and mutates it: keys
dropped, added, renamed or duplicated, values retyped or corrupted, lines moved, bytes
flipped. Loading the result must either succeed or raise a `ConfigError` whose every problem
reads `path:LINE: ...`; anything else (another exception, a problem without a line) is a bug.
`--cli N` also runs `archsim run` on every Nth example and requires exit code 0 or 2.

    python3 tools/fuzz_configs.py                    # 5,000 examples
    python3 tools/fuzz_configs.py --examples 500 --cli 20 --seed 1
    python3 tools/fuzz_configs.py --examples 300 --cli 1 --gentle   # valid-ish chips, end to end

`tests/test_fuzz.py` imports the strategies and checks from here and runs a few hundred.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from archsim.config.loader import load_system, load_workload  # noqa: E402
from archsim.errors import ConfigError  # noqa: E402

HW_FILES = tuple(sorted((ROOT / "hw_configs").glob("*.yaml")))
WORKLOAD_FILES = tuple(sorted((ROOT / "workloads").glob("*.yaml")))
CONTENTS = {p: p.read_bytes() for p in HW_FILES + WORKLOAD_FILES}  # read once: examples must replay alike
UNITS = (
    "B",
    "KiB",
    "MiB",
    "GiB",
    "kB",
    "MB",
    "GB",
    "TB",
    "B/s",
    "GB/s",
    "TB/s",
    "GiB/s",
    "Hz",
    "MHz",
    "GHz",
    "s",
    "ms",
    "us",
    "ns",
    "ps",
    "Gbps",
    "b/s",
    "FLOP/s",
    "TFLOP/s",
    "furlongs",
    "",
    "%",
    "Gb",
)
QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S*)\s*$")
KNOWN_WORDS = (
    "ws",
    "os",
    "is",
    "pipelined",
    "serial",
    "bf16",
    "fp8",
    "int4",
    "fp32",
    "eager",
    "fused",
    "switch",
    "ring",
    "torus2d",
    "true",
    "false",
    "null",
    "~",
    "yes",
    "no",
)


@dataclass(frozen=True)
class Case:
    """One mutated file: which shipped file it came from, its kind, how it was mutated, its bytes."""

    source: Path
    kind: str  # "hw" or "workload"
    how: str
    content: bytes


# ---- values -----------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(-3, 3),
    st.integers(-(2**40), 2**70),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.5, 1e-30, 1e30, 1e400, -0.0, 0.3]),
)
quantities = st.builds(
    lambda n, sep, u: f"{n}{sep}{u}", numbers, st.sampled_from(["", " ", "  "]), st.sampled_from(UNITS)
)
scalars = st.one_of(
    numbers,
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    quantities,
    st.sampled_from(KNOWN_WORDS),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.text(min_size=1, max_size=6), scalars, max_size=2),
)


def typo(draw, name: str) -> str:
    """A near miss of a key name: a letter dropped, doubled, swapped or replaced, or the case changed."""
    if not name:
        return "x"
    i = draw(st.integers(0, len(name) - 1))
    op = draw(st.sampled_from(["drop", "double", "swap", "replace", "upper", "suffix"]))
    if op == "drop":
        return name[:i] + name[i + 1 :] or "x"
    if op == "double":
        return name[:i] + name[i] + name[i:]
    if op == "swap" and len(name) > 1:
        i = min(i, len(name) - 2)
        return name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    if op == "upper":
        return name.upper() if name.upper() != name else name + "_"
    if op == "suffix":
        return name + draw(st.sampled_from(["s", "_bytes", "2", " "]))
    return name[:i] + draw(st.sampled_from("aeiouxz_")) + name[i + 1 :]


# ---- structured mutations on the parsed data --------------------------------------------------


def node_paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in nested dicts and lists (the root excluded)."""
    out = []
    if isinstance(data, dict):
        for k, v in data.items():
            out.append(prefix + (k,))
            out.extend(node_paths(v, prefix + (k,)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.append(prefix + (i,))
            out.extend(node_paths(v, prefix + (i,)))
    return out


def _parent(data: Any, path: tuple) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


def _corrupt_scalar(draw, value: Any) -> Any:
    """A plausible mistake in a value: the number scaled or negated, the unit swapped or dropped."""
    if isinstance(value, bool):
        return draw(st.sampled_from([not value, "true", 1, None]))
    if isinstance(value, int):
        return draw(st.sampled_from([-value, 0, value * 10**9, value + 0.5, str(value), float(value), -1]))
    if isinstance(value, str):
        m = QUANTITY.match(value)
        if m:
            num, unit = m.groups()
            return draw(
                st.sampled_from(
                    [
                        f"{num} {draw(st.sampled_from(UNITS))}",
                        num,
                        f"-{num} {unit}",
                        f"0 {unit}",
                        f"{num}{unit}",
                        f"{num} {unit.lower()}",
                        f"{num}e300 {unit}",
                        f"{num},5 {unit}",
                        f"{num} {unit} {unit}",
                    ]
                )
            )
        return draw(st.sampled_from([value.upper(), value[:-1], value + "x", "", " ", value * 2]))
    return draw(values)


LITERAL_SETS = (
    ("ws", "os", "is"),
    ("serial", "pipelined"),
    ("bf16", "fp16", "fp8", "int8", "int4", "fp32"),
    ("eager", "fused"),
    ("switch", "ring", "torus2d", "torus3d"),
)


def _perturb_scalar(draw, value: Any) -> Any:
    """A plausible variation that may still be valid: a count or quantity scaled, a choice swapped."""
    factor = draw(st.sampled_from([0.25, 0.5, 2, 3, 8]))
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return max(1, int(value * factor))
    if isinstance(value, str):
        m = QUANTITY.match(value)
        if m:
            return f"{float(m.group(1)) * factor:g} {m.group(2)}"
        for group in LITERAL_SETS:
            if value in group:
                return draw(st.sampled_from(group))
    return value


DATA_OPS = ("drop", "add", "rename", "retype", "corrupt", "corrupt", "perturb", "perturb", "perturb", "root")


@st.composite
def mutated_data(draw, data: Any, ops: tuple[str, ...] = DATA_OPS) -> tuple[Any, list[str]]:
    """Apply 1-3 structured mutations; return the new data and a description of each."""
    notes = []
    for _ in range(draw(st.integers(1, 3))):
        paths = node_paths(data)
        op = draw(st.sampled_from(ops))
        if op == "root" or not paths:
            data = draw(st.sampled_from([None, [], {}, 0, "text", [data]]))
            notes.append(f"root -> {data!r:.40}")
            break
        path = draw(st.sampled_from(paths))
        parent, key = _parent(data, path), path[-1]
        if op == "drop":
            del parent[key]
        elif op == "add":
            target = parent if isinstance(parent, dict) else None
            if target is None:
                parent.append(draw(values))
            else:
                name = draw(st.one_of(st.text(min_size=1, max_size=10), st.just(typo(draw, str(key)))))
                target[name] = draw(values)
                key = name
        elif op == "rename" and isinstance(parent, dict):
            new = typo(draw, str(key))
            parent[new] = parent.pop(key)
            key = f"{path[-1]}->{new}"
        elif op == "retype":
            parent[key] = draw(values)
        elif op == "perturb":
            parent[key] = _perturb_scalar(draw, parent[key])
        else:
            parent[key] = _corrupt_scalar(draw, parent[key])
        notes.append(f"{op} {'.'.join(map(str, path[:-1] + (key,)))}")
    return data, notes


# ---- text and byte mutations of the file as written ------------------------------------------


@st.composite
def mutated_text(draw, text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    i = draw(st.integers(0, len(lines) - 1))
    op = draw(st.sampled_from(["duplicate", "delete", "swap", "indent", "dedent", "insert", "truncate"]))
    if op == "duplicate":
        lines.insert(i, lines[i])
    elif op == "delete":
        del lines[i]
    elif op == "swap":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "indent":
        lines[i] = "  " + lines[i]
    elif op == "dedent":
        lines[i] = lines[i].lstrip(" ")
    elif op == "insert":
        lines.insert(i, draw(st.text(max_size=30)) + "\n")
    else:
        cut = draw(st.integers(0, len(text)))
        return text[:cut], f"truncate at char {cut}"
    return "".join(lines), f"{op} line {i + 1}"


@st.composite
def mutated_bytes(draw, raw: bytes) -> tuple[bytes, str]:
    i = draw(st.integers(0, len(raw)))
    op = draw(st.sampled_from(["flip", "insert", "nul", "invalid_utf8", "bom", "garbage"]))
    if op == "flip" and i < len(raw):
        return raw[:i] + bytes([raw[i] ^ (1 << draw(st.integers(0, 7)))]) + raw[i + 1 :], f"flip byte {i}"
    if op == "nul":
        return raw[:i] + b"\x00" + raw[i:], f"NUL at byte {i}"
    if op == "invalid_utf8":
        return raw[:i] + b"\xff\xfe" + raw[i:], f"0xff 0xfe at byte {i}"
    if op == "bom":
        return b"\xef\xbb\xbf" + raw, "UTF-8 byte-order mark"
    if op == "garbage":
        return draw(st.binary(max_size=64)), "random bytes"
    return raw[:i] + draw(st.binary(min_size=1, max_size=8)) + raw[i:], f"bytes inserted at {i}"


@st.composite
def cases(draw, gentle: bool = False) -> Case:
    """A mutated copy of one shipped file; `gentle` only scales values and swaps valid choices,
    so that most cases load and run."""
    kind = draw(st.sampled_from(["hw", "workload"]))
    source = draw(st.sampled_from(HW_FILES if kind == "hw" else WORKLOAD_FILES))
    raw = CONTENTS[source]
    level = "data" if gentle else draw(st.sampled_from(["data", "data", "data", "text", "bytes"]))
    if level == "data":
        data, notes = draw(mutated_data(yaml.safe_load(raw), ("perturb",) if gentle else DATA_OPS))
        content = yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()
        how = "; ".join(notes)
    elif level == "text":
        text, how = draw(mutated_text(raw.decode()))
        content = text.encode()
    else:
        content, how = draw(mutated_bytes(raw))
    return Case(source, kind, how, content)


# ---- the checks -------------------------------------------------------------------------------


def write_case(case: Case, folder: str | Path) -> str:
    path = Path(folder) / case.source.name
    path.write_bytes(case.content)
    return str(path)


def check_load(case: Case, folder: str | Path) -> str:
    """Load the mutated file: success, or a ConfigError whose every problem reads `path:LINE: `.

    Returns "ok" or "error"; raises AssertionError (or the unexpected exception) otherwise.
    """
    path = write_case(case, folder)
    load = load_system if case.kind == "hw" else load_workload
    try:
        load(path)
    except ConfigError as err:
        assert err.problems, f"ConfigError without problems ({case.how})"
        prefix = re.compile(re.escape(path) + r":\d+: \S")
        for problem in err.problems:
            assert prefix.match(str(problem)), f"{str(problem)!r} lacks '{path}:LINE: ' ({case.how})"
            assert "\n" not in str(problem), f"multi-line problem {str(problem)!r} ({case.how})"
        return "error"
    return "ok"


CLI_SCENARIO = ["--prompt", "64", "--generate", "2", "--quiet"]


def check_cli(case: Case, folder: str | Path) -> int:
    """`archsim run` on the mutated file: exit 0 or 2, never another exception or a traceback."""
    from archsim.cli import main

    path = write_case(case, folder)
    flag = "--hw" if case.kind == "hw" else "--workload"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["run", flag, path, *CLI_SCENARIO])
        except SystemExit as exc:
            code = exc.code
    assert code in (0, 2), f"exit {code} ({case.how}): {err.getvalue()[-2000:]}"
    assert "Traceback" not in err.getvalue(), f"traceback ({case.how}): {err.getvalue()[-2000:]}"
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=5000, help="hypothesis examples (default 5000)")
    ap.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    ap.add_argument("--cli", type=int, default=0, metavar="N", help="also run `archsim run` on every Nth example")
    ap.add_argument("--keep", metavar="DIR", help="copy each failing input into DIR")
    ap.add_argument("--gentle", action="store_true", help="only rescale values and swap valid choices (most load)")
    ap.add_argument("--verbose", action="store_true", help="print each example before checking it")
    args = ap.parse_args(argv)

    counts: collections.Counter = collections.Counter()
    failures: list[str] = []
    start = time.perf_counter()
    scratch = tempfile.TemporaryDirectory(prefix="archsim-fuzz-")
    folder = scratch.name

    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases(gentle=args.gentle))
    def one(case: Case) -> None:
        counts["examples"] += 1
        if args.verbose:
            print(f"{counts['examples']}: {case.source.name}: {case.how}"[:300], flush=True)
        try:
            counts[check_load(case, folder)] += 1
            if args.cli and counts["examples"] % args.cli == 0:
                counts[f"cli exit {check_cli(case, folder)}"] += 1
        except Exception as exc:
            counts["FAILED"] += 1
            failures.append(f"{case.source.name}: {case.how}: {type(exc).__name__}: {exc}"[:600])
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                (Path(args.keep) / f"{counts['FAILED']:04d}-{case.source.name}").write_bytes(case.content)

    with scratch:
        seed(args.seed)(one)()
    elapsed = time.perf_counter() - start
    print(
        f"{counts['examples']} examples in {elapsed:.1f} s: {counts['ok']} loaded, "
        f"{counts['error']} refused with located problems, {counts['FAILED']} failed"
    )
    for key in sorted(k for k in counts if k.startswith("cli")):
        print(f"  {key}: {counts[key]}")
    for line in failures[:50]:
        print("FAIL", line)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
