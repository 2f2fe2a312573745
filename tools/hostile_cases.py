"""The inputs of `tools/hostile.py`, one generator per surface.

Every case is deterministic given the seed; `all_cases(full=False)` is the CI subset (a few
hundred cheap inputs), `all_cases(full=True)` adds every flag with every hostile value and the
random variants (thousands). Cases whose failure is a problem of the simulator's core carry a
`known` reason, so that the suite reports them apart (and CI marks them as expected failures).
"""

from __future__ import annotations

import json
import os
import random
import signal
from pathlib import Path

from hostile import DEFAULT_TIMEOUT_S, Case, Expect, Outcome, Prop, Verdict
from hostile_props import (
    file_is,
    json_key,
    json_plausible,
    no_temp_files,
    parquet_rows,
    shows_literally,
    stays_unchanged,
    written_mode,
)

from archsim.errors import printable

ROOT = Path(__file__).resolve().parents[1]
H200 = (ROOT / "hw_configs" / "h200.yaml").read_text()
LLAMA = (ROOT / "workloads" / "llama3_8b.yaml").read_text()
HF_LLAMA = json.loads((ROOT / "tests" / "data" / "hf" / "Meta-Llama-3-8B" / "config.json").read_text())
SHIPPED_CASES = json.loads((ROOT / "archsim" / "data" / "h200_calibration.json").read_text())["cases"]
AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
PLAIN_HEAD = "arrival_s,prompt_tokens,output_tokens\n"

SMALL = ("--prompt", "16", "--generate", "2")
RUN = ("run", "--quiet", *SMALL)
SERVE = ("serve", "--requests", "4", "--quiet")
SERVE_LOUD = ("serve", "--requests", "4")
SECRET = "SECRET-7f3a-TOKEN"  # text of a file that is not a config: must never be shown

# hostile names: escape sequences (window title, clear screen), rich markup, bidi overrides
HOSTILE_NAMES = {
    "esc-title": "\x1b]0;owned\x07\x1b[2Jchip",
    "esc-color": "\x1b[31mred\x1b[0m",
    "markup-close": "chip[/]",
    "markup-style": "[bold red]loud[/bold red] chip",
    "markup-link": "[link=https://example.invalid]click[/link]",
    "bidi": "chip\u202egnp.exe",
    "carriage-return": "chip\rOVERWRITTEN",
    "backspace": "chip\x08\x08\x08XYZ",
    "c1-csi": "chip\x9b2J",
    "unicode": "チップ 🚀 Ω",
    "mathtext": "chip $\\frac{a}{ x$",  # matplotlib would parse it as math in a plot title
}
PLOT_NAMES = ("mathtext", "markup-close", "esc-title")


def set_key(text: str, key_path: str, value: str) -> str:
    """`text` (block-style YAML) with the value of `key_path` ('hbm.latency') replaced by `value`
    (YAML source text), the indent and any comment kept."""
    lines = text.splitlines(keepends=True)
    want, depth, indents = key_path.split("."), 0, []
    for i, line in enumerate(lines):
        body = line.split("#")[0].rstrip()
        if not body.strip():
            continue
        indent = len(body) - len(body.lstrip())
        while indents and indent <= indents[-1]:
            indents.pop()
            depth = len(indents)
        if depth < len(want) and body.strip().startswith(want[depth] + ":"):
            if depth == len(want) - 1:
                lines[i] = f"{' ' * indent}{want[-1]}: {value}\n"
                return "".join(lines)
            indents.append(indent)
            depth += 1
    raise KeyError(key_path)


def yq(value: str) -> str:
    """A YAML double-quoted scalar holding `value` exactly (escapes for every control character)."""
    return json.dumps(value)


def hf(**fields) -> str:
    """The Llama-3-8B config.json with `fields` set (a value of ... removes the field)."""
    data = {k: v for k, v in {**HF_LLAMA, **fields}.items() if v is not ...}
    return json.dumps(data, indent=1)


def case_file(*cases: dict) -> str:
    return json.dumps({"cases": list(cases)}, indent=1)


def small_cases() -> list[dict]:
    """One cheap shipped case of each single-kernel kind."""
    out, seen = [], set()
    for c in SHIPPED_CASES:
        if c["kind"] != "model_step" and c["kind"] not in seen:
            seen.add(c["kind"])
            out.append(c)
    return out


def spec(**over) -> str:
    """A two-point sweep spec on a tiny scenario, with `over` replacing its top-level keys."""
    data = {
        "name": "tiny",
        "hardware": "h200",
        "workload": "llama3_8b",
        "set": {
            "workload.scenario.batch": 1,
            "workload.scenario.prompt_tokens": 16,
            "workload.scenario.output_tokens": 2,
        },
        "kv_stride": 4096,
        "parameters": {"clock": {"path": "hardware.clock", "values": [1.5, 1.9], "unit": "GHz"}},
        "objectives": {"tpot_ms": "tpot_s * 1000"},
        **over,
    }
    return json.dumps(data, indent=1)  # JSON is YAML


# 20,000 valid designs of the tiny scenario: far more than a signal sent seconds after the first
# chunk's part lets 1 or 2 workers run (500 points run in under a second)
LONG_SWEEP = spec(
    parameters={
        "x": {"path": "hardware.clock", "range": [1, 1.9], "steps": 500, "unit": "GHz"},
        "y": {"path": "workload.scenario.output_tokens", "range": [2, 41], "steps": 40},
    }
)


def ranked(text: str) -> dict:
    """An objective `o` of `text` said to be maximised: one of numbers alone has no direction of
    its own (archsim/sweep/directions.py), and these reach the evaluator's bounds."""
    return {"o": {"expr": text, "goal": "maximize"}}


def _mkfifo(name: str):
    def make(folder: Path) -> None:
        os.mkfifo(folder / name)

    return make


def _sparse(name: str, size: int, head: bytes = b""):
    def make(folder: Path) -> None:
        with open(folder / name, "wb") as f:
            f.write(head)
            f.truncate(size)

    return make


def _symlink(name: str, target: str):
    def make(folder: Path) -> None:
        os.symlink(target.replace("{dir}", str(folder)), folder / name)

    return make


def _mkdir(name: str):
    def make(folder: Path) -> None:
        (folder / name).mkdir(parents=True)

    return make


def _all(*setups):
    def make(folder: Path) -> None:
        for s in setups:
            s(folder)

    return make


# ------------------------------------------------------------------------------------------ names


CI_NAMES = ("esc-title", "markup-close", "markup-style", "bidi", "c1-csi", "mathtext")


def names_cases(full: bool) -> list[Case]:
    """A hostile name in every place archsim prints one."""
    out = []
    for key, name in HOSTILE_NAMES.items():
        if not full and key not in CI_NAMES:
            continue
        shown = Prop("shown as written", shows_literally(printable(name)), Verdict.SECURITY) if "[" in name else None
        props = (shown,) if shown else ()
        last = name.rstrip("/").rsplit("/", 1)[-1]  # a Hugging Face name is shown from its last part
        hf_props = (
            (Prop("shown as written", shows_literally(printable(last)), Verdict.SECURITY),) if "[" in last else ()
        )
        hw = set_key(H200, "name", yq(name))
        wl = set_key(LLAMA, "name", yq(name))
        out += [
            Case(
                f"names/hw-run-{key}", (*RUN, "--hw", "hw.yaml"), files=(("hw.yaml", hw),), where="hw.yaml", props=props
            ),
            Case(
                f"names/hw-op-{key}",
                ("op", "gemm", "--M", "64", "--K", "64", "--N", "64", "--hw", "hw.yaml"),
                files=(("hw.yaml", hw),),
                where="hw.yaml",
                props=props,
            ),
            *(
                [
                    Case(
                        f"names/hw-plots-{key}",
                        (*RUN, "--hw", "hw.yaml", "--plots", "plots"),
                        files=(("hw.yaml", hw),),
                        where="hw.yaml",
                        props=props,
                        timeout_s=60,
                    )
                ]
                if key in PLOT_NAMES and (full or key == "mathtext")
                else []
            ),
            Case(
                f"names/hw-compare-csv-{key}",
                ("compare", "hw.yaml", "a100", *SMALL, "--format", "csv"),
                files=(("hw.yaml", hw),),
                where="hw.yaml",
            ),
            Case(
                f"names/hw-compare-{key}",
                ("compare", "hw.yaml", "a100", *SMALL),
                files=(("hw.yaml", hw),),
                where="hw.yaml",
                props=(),  # compare labels a chip by its file
            ),
            Case(
                f"names/hw-serve-{key}",
                (*SERVE_LOUD, "--hw", "hw.yaml"),
                files=(("hw.yaml", hw),),
                where="hw.yaml",
                props=props,
            ),
            Case(
                f"names/hw-validate-{key}",
                ("validate", "c.json", "--hw", "hw.yaml"),
                files=(("hw.yaml", hw), ("c.json", case_file(small_cases()[0]))),
                where="hw.yaml",
                props=props,
            ),
            Case(
                f"names/workload-run-{key}",
                (*RUN, "--workload", "w.yaml"),
                files=(("w.yaml", wl),),
                where="w.yaml",
                props=props,
            ),
            Case(
                f"names/workload-scale-{key}",
                ("scale", "--workload", "w.yaml", "--tp", "1,2"),
                files=(("w.yaml", wl),),
                where="w.yaml",
                props=props,
            ),
            Case(
                f"names/hf-{key}",
                (*RUN, "--model", "config.json"),
                files=(("config.json", hf(_name_or_path=name)),),
                where="config.json",
                props=hf_props,
            ),
            Case(
                f"names/case-id-{key}",
                ("validate", "c.json"),
                files=(("c.json", case_file({**small_cases()[0], "id": name})),),
                where="c.json",
                props=props,
            ),
            Case(
                f"names/spec-{key}",
                ("sweep", "s.yaml", "--out", "out", "--workers", "1"),
                files=(("s.yaml", spec(name=name)),),
                where="s.yaml",
                props=props,
            ),
            Case(f"names/flag-value-{key}", ("serve", "--policy", name), expect=Expect.REFUSE, where="--policy"),
            Case(f"names/hw-arg-{key}", ("run", "--hw", name), expect=Expect.REFUSE, where="--hw" if False else None),
            Case(
                f"names/trace-file-{key}",
                (*SERVE, "--requests-from", f"t{key}.csv"),
                files=((f"t{key}.csv", PLAIN_HEAD + "x,1,1\n"),),
                expect=Expect.REFUSE,
            ),
            Case(f"names/out-path-{key}", (*RUN, "--json", f"sub/{name}/o.json"), setup=_sparse("sub", 10)),
        ]
    return out


# ------------------------------------------------------------------------------------------- yaml


HW_QUANTITIES = {  # key path -> (tiny, huge) values that a schema without physical bounds lets through
    "clock": ("1 MHz", "100 GHz"),
    "cores.sram.capacity": ("1 B", "1e30 B"),
    "cores.sram.bandwidth": ("1 B", "1e30 B"),
    "cores.accumulators.capacity": ("1 B", "1e30 B"),
    "cores.dma.max_inflight": ("1 B", "1e30 B"),
    "cores.vector_unit.access_bytes": ("1 B", "1e30 B"),
    "l2.capacity": ("1 B", "1e30 B"),
    "l2.bandwidth": ("1e-300 B/s", "1e300 B/s"),
    "l2.latency": ("1e-300 s", "1e300 s"),
    "hbm.data_rate": ("1 Mbps", "1e300 bps"),
    "hbm.capacity": ("1 B", "1e30 B"),
    "hbm.latency": ("1e-300 s", "1e300 s"),
    "hbm.interleave": ("1 B", "1e30 B"),
    "hbm.refresh_interval": ("1e-300 s", "1e300 s"),
    "hbm.turnaround": ("0 s", "1e300 s"),
    "hbm.rw_batch": ("1 B", "1e30 B"),
    "noc.bandwidth": ("1e-300 B/s", "1e300 B/s"),
    "noc.hop_latency": ("0 s", "1e300 s"),
    "overheads.kernel": ("0 s", "1e300 s"),
    "overheads.launch": ("0 s", "1e300 s"),
}
HW_AT_BOUNDS = {  # the bounds themselves: must run to a plausible result, in time
    "l2.bandwidth": ("1 MB/s", "1 EB/s"),
    "noc.bandwidth": ("1 MB/s", "1 EB/s"),
    "l2.latency": ("1 fs", "1 s"),
    "hbm.latency": ("1 fs", "1 s"),
    "hbm.data_rate": ("1 Mbps", "1 Pbps"),
    "overheads.kernel": ("0 s", "1 s"),
    "cores.dma.max_inflight": ("1 B", "1 PiB"),
    "l2.capacity": ("1 B", "1 PiB"),
}
HW_COUNTS = (
    "cores.count",
    "cores.matrix_units.count",
    "cores.matrix_units.rows",
    "cores.matrix_units.cols",
    "cores.vector_unit.lanes",
    "cores.vector_unit.special_per_cycle",
    "cores.vector_unit.lanes_per_request",
    "cores.sram.banks",
    "cores.dma.max_requests",
    "hbm.stacks",
    "hbm.channels_per_stack",
    "hbm.channel_width_bits",
    "noc.hops",
)
WL_COUNTS = (
    "model.layers",
    "model.hidden",
    "model.heads",
    "model.kv_heads",
    "model.head_dim",
    "model.ffn",
    "model.vocab",
    "scenario.batch",
    "scenario.prompt_tokens",
    "scenario.output_tokens",
)
YAML11 = {  # YAML 1.1 forms that YAML 1.2 reads as text, not numbers or booleans
    "hex": "0x84",
    "octal": "0o204",
    "sexagesimal": "2:12",
    "underscore": "13_2",
    "binary": "0b10000100",
}


def _op_plausible() -> Prop:
    return Prop("result plausible", json_plausible("o.json", kind="op"))


def yaml_cases(full: bool) -> list[Case]:
    out = []
    plausible = Prop("result plausible", json_plausible("o.json", kind="run"))
    for key, (tiny, huge) in HW_QUANTITIES.items():
        for label, value in (("tiny", tiny), ("huge", huge)):
            hw = set_key(H200, key, yq(value))
            out.append(
                Case(
                    f"yaml/hw-{key}-{label}",
                    (*RUN, "--hw", "hw.yaml", "--json", "o.json"),
                    files=(("hw.yaml", hw),),
                    where="hw.yaml",
                    props=(plausible,),
                    ci=full or label == "tiny" or key.startswith(("l2", "cores.sram")),
                )
            )
    for key, (low, high) in HW_AT_BOUNDS.items():
        for label, value in (("at-low", low), ("at-high", high)):
            out.append(
                Case(
                    f"yaml/hw-{key}-{label}",
                    (*RUN, "--hw", "hw.yaml", "--json", "o.json"),
                    files=(("hw.yaml", set_key(H200, key, yq(value))),),
                    where="hw.yaml",
                    props=(plausible,),
                    timeout_s=60,
                )
            )
    for key in HW_COUNTS if full else HW_COUNTS[::3]:
        for value in ("2147483647", "1048576") if full else ("2147483647",):
            out.append(
                Case(
                    f"yaml/hw-{key}-{value}",
                    (*RUN, "--hw", "hw.yaml", "--json", "o.json"),
                    files=(("hw.yaml", set_key(H200, key, value)),),
                    where="hw.yaml",
                    props=(plausible,),
                )
            )
    for key in WL_COUNTS:
        for value in ("2147483647", "10000000", "65536") if full else ("2147483647",):
            out.append(
                Case(
                    f"yaml/wl-{key}-{value}",
                    ("run", "--quiet", "--workload", "w.yaml", "--json", "o.json"),
                    files=(("w.yaml", set_key(LLAMA, key, value)),),
                    where="w.yaml",
                    props=(plausible,),
                    # 65,536 generated tokens is a valid run of 27-29 s alone: room for a loaded machine
                    timeout_s=90 if value == "65536" else DEFAULT_TIMEOUT_S,
                )
            )
    for label, value in YAML11.items():
        out.append(
            Case(
                f"yaml/yaml11-{label}-count",
                (*RUN, "--hw", "hw.yaml", "--json", "o.json"),
                files=(("hw.yaml", set_key(H200, "cores.count", value)),),
                expect=Expect.REFUSE,
                where="hw.yaml",
            )
        )
        out.append(
            Case(
                f"yaml/yaml11-{label}-batch",
                ("run", "--quiet", "--workload", "w.yaml", "--generate", "2", "--prompt", "16"),
                files=(("w.yaml", set_key(LLAMA, "scenario.batch", value)),),
                expect=Expect.REFUSE,
                where="w.yaml",
            )
        )
    out += [
        Case(
            "yaml/dtype-without-a-rate-fp32",
            ("run", "--quiet", "--workload", "w.yaml", *SMALL, "--json", "o.json"),
            files=(("w.yaml", set_key(LLAMA, "dtypes.activations", "fp32")),),
            expect=Expect.REFUSE,
            where="fp32",
        ),
        Case(
            "yaml/dtype-without-a-rate-fp8",
            (*RUN, "--hw", "hw.yaml", "--workload", "w.yaml", "--json", "o.json"),
            files=(
                ("hw.yaml", set_key(H200, "cores.matrix_units.k_per_cycle", "{bf16: 1}")),
                ("w.yaml", set_key(set_key(LLAMA, "dtypes.weights", "fp8"), "dtypes.activations", "fp8")),
            ),
            expect=Expect.REFUSE,
            where="fp8",
        ),
        Case(
            "yaml/dtype-int4-activations",
            ("run", "--quiet", "--workload", "w.yaml", *SMALL, "--json", "o.json"),
            files=(("w.yaml", set_key(LLAMA, "dtypes.activations", "int4")),),
            expect=Expect.REFUSE,
            where="int4",
        ),
        Case(
            "yaml/yaml12-leading-zero-is-decimal",
            (*RUN, "--hw", "hw.yaml", "--json", "o.json"),
            files=(("hw.yaml", set_key(H200, "cores.count", "0132")),),
            props=(Prop("0132 read as 132", json_plausible("o.json", kind="run", cores=132)),),
        ),
        Case(
            "yaml/yaml11-yes-is-text",
            ("run", "--quiet", "--workload", "w.yaml", *SMALL),
            files=(("w.yaml", set_key(LLAMA, "model.tied_embeddings", "yes")),),
            expect=Expect.REFUSE,
            where="w.yaml",
        ),
        Case(
            "yaml/yaml11-on-key",
            ("run", "--quiet", "--workload", "w.yaml", *SMALL),
            files=(("w.yaml", LLAMA + "on: true\n"),),
            expect=Expect.REFUSE,
            where="w.yaml",
        ),
        Case(
            "yaml/exponent-float-batch",
            ("run", "--quiet", "--workload", "w.yaml", *SMALL, "--json", "o.json"),
            files=(("w.yaml", set_key(LLAMA, "scenario.batch", "1e0")),),
            where="w.yaml",
        ),
        Case(
            "yaml/date-name",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", set_key(H200, "name", "2001-12-14")),),
            expect=Expect.RUN,
            props=(Prop("date kept as text", shows_literally("2001-12-14")),),
        ),
        Case(
            "yaml/int-5000-digits",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", set_key(H200, "cores.count", "9" * 5000)),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/int-4000-digits",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", set_key(H200, "cores.count", "9" * 4000)),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/float-overflow",
            ("run", "--quiet", "--workload", "w.yaml", *SMALL),
            files=(("w.yaml", set_key(LLAMA, "scenario.batch", "1e999")),),
            expect=Expect.REFUSE,
            where="w.yaml",
        ),
        Case(
            "yaml/nan-count",
            ("run", "--quiet", "--workload", "w.yaml", *SMALL),
            files=(("w.yaml", set_key(LLAMA, "scenario.batch", ".nan")),),
            expect=Expect.REFUSE,
            where="w.yaml",
        ),
        Case(
            "yaml/deep-flow-nesting",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", "a: " + "[" * 100_000 + "]" * 100_000 + "\n"),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/deep-block-nesting",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", "".join(" " * i + f"k{i}:\n" for i in range(3000)) + " " * 3000 + "v: 1\n"),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/many-nodes-small-file",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", "a: [" + "1," * 3_000_000 + "1]\n"),),
            expect=Expect.REFUSE,
            where="hw.yaml",
            timeout_s=20,
        ),
        Case(
            "yaml/many-keys",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", "".join(f"k{i}: {i}\n" for i in range(400_000))),),
            expect=Expect.REFUSE,
            where="hw.yaml",
            timeout_s=20,
        ),
        Case(
            "yaml/billion-laughs",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", _laughs()),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/aliased-big-string",
            ("run", "--quiet", "--workload", "w.yaml", *SMALL),
            files=(("w.yaml", _aliased_string()),),
            expect=Expect.REFUSE,
            where="w.yaml",
            timeout_s=20,
        ),
        Case(
            "yaml/huge-scalar",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", "name: " + "x" * (15 << 20) + "\n"),),
            expect=Expect.REFUSE,
            where="hw.yaml",
            timeout_s=20,
        ),
        Case(
            "yaml/too-large-sparse",
            (*RUN, "--hw", "hw.yaml"),
            setup=_sparse("hw.yaml", 10 << 30, b"name: x\n"),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/python-tag",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", "name: !!python/object/apply:os.system ['echo owned']\n"),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/binary-tag",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", set_key(H200, "name", "!!binary aGVsbG8=")),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/set-tag",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", set_key(H200, "name", "!!set {a, b}")),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/merge-key",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", H200 + "base: &b {x: 1}\nother:\n  <<: *b\n"),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/two-documents",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", H200 + "---\nname: again\n"),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/crlf", (*RUN, "--hw", "hw.yaml"), files=(("hw.yaml", H200.replace("\n", "\r\n")),), expect=Expect.RUN
        ),
        Case(
            "yaml/bom",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", "\ufeff" + H200),),
            expect=Expect.EITHER,
            where="hw.yaml",
        ),
        Case(
            "yaml/nul",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", H200.replace("cores:", "cores:\x00", 1)),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/latin1",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", H200.encode().replace(b"SXM", b"S\xe9M")),),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case(
            "yaml/fifo",
            (*RUN, "--hw", "hw.yaml"),
            setup=_mkfifo("hw.yaml"),
            expect=Expect.REFUSE,
            where="hw.yaml",
            timeout_s=10,
        ),
        Case("yaml/dev-zero", (*RUN, "--hw", "/dev/zero"), expect=Expect.REFUSE, where="/dev/zero", timeout_s=10),
        Case(
            "yaml/dev-stdin",  # a regular file on standard input here: read as any file
            (*RUN, "--hw", "/dev/stdin"),
            expect=Expect.EITHER,
            where="/dev/stdin",
            timeout_s=10,
            stdin=H200.encode(),
        ),
        Case(
            "yaml/symlink-loop",
            (*RUN, "--hw", "hw.yaml"),
            setup=_all(_symlink("hw.yaml", "{dir}/b.yaml"), _symlink("b.yaml", "{dir}/hw.yaml")),
            expect=Expect.REFUSE,
            where="hw.yaml",
        ),
        Case("yaml/directory", (*RUN, "--hw", "d.yaml"), setup=_mkdir("d.yaml"), expect=Expect.REFUSE, where="d.yaml"),
        Case("yaml/empty", (*RUN, "--hw", "hw.yaml"), files=(("hw.yaml", ""),), expect=Expect.REFUSE, where="hw.yaml"),
        Case(
            "yaml/long-key-name",
            (*RUN, "--hw", "hw.yaml"),
            files=(("hw.yaml", H200 + "k" * 1_000_000 + ": 1\n"),),
            expect=Expect.REFUSE,
            where="hw.yaml",
            timeout_s=20,
        ),
        Case(
            "yaml/secret-scalar-as-hw",
            (*RUN, "--hw", "passwd"),
            files=(("passwd", f"root:x:0:0:{SECRET}:/root:/bin/bash\n"),),
            expect=Expect.REFUSE,
            where="passwd",
            secret=SECRET,
        ),
        Case(
            "yaml/secret-env-as-workload",
            (*RUN, "--workload", "env"),
            files=(("env", f"TOKEN={SECRET}\n"),),
            expect=Expect.REFUSE,
            where="env",
            secret=SECRET,
        ),
        Case(
            "yaml/secret-list-as-hw",
            (*RUN, "--hw", "list"),
            files=(("list", f"- {SECRET}\n- two\n"),),
            expect=Expect.REFUSE,
            where="list",
            secret=SECRET,
        ),
        Case(
            "yaml/secret-json-as-hw",
            (*RUN, "--hw", "x.json"),
            files=(("x.json", json.dumps([SECRET])),),
            expect=Expect.REFUSE,
            where="x.json",
            secret=SECRET,
        ),
    ]
    return out


def _laughs() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _aliased_string() -> str:
    big = "x" * (1 << 20)
    refs = ", ".join(["*s"] * 5000)
    return set_key(LLAMA, "dtypes.weights", f"&s {big}") + f"extra: [{refs}]\n"


# --------------------------------------------------------------------------------------------- hf


def hf_cases(full: bool) -> list[Case]:
    run = (*RUN, "--model", "config.json", "--json", "o.json")

    def c(name, data, expect=Expect.REFUSE, known=None, props=(), secret=None, timeout_s=30.0):
        return Case(
            f"hf/{name}",
            run,
            files=(("config.json", data),),
            expect=expect,
            where="config.json",
            known=known,
            props=props,
            secret=secret,
            timeout_s=timeout_s,
        )

    plausible = Prop("result plausible", json_plausible("o.json", kind="run"))
    out = [
        c("valid", hf(), expect=Expect.RUN, props=(plausible,)),
        c(
            "moe-num-experts",
            hf(num_experts=64, num_experts_per_tok=8, moe_intermediate_size=1024),
            expect=Expect.RUN,
            props=(Prop("runs as MoE", json_key("o.json", "config.workload.model.moe.experts", 64)),),
        ),
        c(
            "moe-n-routed-experts",
            hf(n_routed_experts=256, num_experts_per_tok=8, n_shared_experts=1, moe_intermediate_size=2048),
        ),
        c("moe-shared-experts", hf(num_local_experts=8, num_experts_per_tok=2, shared_expert_intermediate_size=5632)),
        c("moe-dense-first-layers", hf(num_local_experts=8, num_experts_per_tok=2, first_k_dense_replace=3)),
        c("mla-kv-lora", hf(kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64)),
        c(
            "mixtral-valid",
            hf(num_local_experts=8, num_experts_per_tok=2, model_type="mixtral"),
            expect=Expect.RUN,
            props=(plausible,),
        ),
        c("torch-dtype-list", hf(torch_dtype=["bfloat16"])),
        c("torch-dtype-dict", hf(torch_dtype={"a": 1})),
        c("model-type-dict", hf(model_type={"x": 1}), expect=Expect.EITHER),
        c("model-type-list", hf(model_type=["llama"]), expect=Expect.EITHER),
        c("name-list", hf(_name_or_path=["a", "b"]), expect=Expect.EITHER),
        c("hidden-act-list", hf(hidden_act=["silu"]), expect=Expect.EITHER),
        c("rope-scaling-string", hf(rope_scaling="linear"), expect=Expect.EITHER),
        c("layers-1e30-float", hf(num_hidden_layers=1e30)),
        c("layers-10e30-int", hf(num_hidden_layers=10**30)),
        c("layers-10-million", hf(num_hidden_layers=10_000_000), timeout_s=20),
        c("layers-negative", hf(num_hidden_layers=-32)),
        c("layers-bool", hf(num_hidden_layers=True)),
        c("layers-string", hf(num_hidden_layers="32")),
        c("layers-float", hf(num_hidden_layers=32.0)),
        c("heads-kv-not-dividing", hf(num_key_value_heads=5)),
        c("hidden-huge", hf(hidden_size=2**31 - 1, head_dim=128)),
        c("vocab-huge", hf(vocab_size=2**31 - 1)),
        c("head-dim-huge", hf(head_dim=2**30)),
        c("experts-top-k-above", hf(num_local_experts=8, num_experts_per_tok=9)),
        c("tie-string", hf(tie_word_embeddings="false")),
        c("missing-layers", hf(num_hidden_layers=...)),
        c("int-5000-digits", hf().replace('"num_hidden_layers": 32', '"num_hidden_layers": ' + "9" * 5000)),
        c("deep-nesting", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        c("nan-literal", hf().replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": NaN')),
        c("nan-layers", hf().replace('"num_hidden_layers": 32', '"num_hidden_layers": NaN')),
        c("infinity-hidden", hf().replace('"hidden_size": 4096', '"hidden_size": Infinity')),
        c("duplicate-key", hf().replace('"num_hidden_layers": 32', '"num_hidden_layers": 32, "num_hidden_layers": 64')),
        c("top-level-list", "[1, 2]"),
        c("empty", ""),
        c("binary", "\x00\x01\x02\xff"),
        c("latin1", hf().encode().replace(b"llama", b"ll\xe9ma")),
        c("yaml-not-json", "hidden_size: 4096\n"),
        c("bom", "\ufeff" + hf(), expect=Expect.EITHER),
        c("secret-passwd", f"root:x:0:0:{SECRET}:/root\n", secret=SECRET),
        c("secret-in-string-field", hf(torch_dtype=SECRET), secret=None),
        Case(
            "hf/too-large-sparse",
            run,
            setup=_sparse("config.json", 10 << 30, b"{"),
            expect=Expect.REFUSE,
            where="config.json",
            timeout_s=20,
        ),
        Case("hf/fifo", run, setup=_mkfifo("config.json"), expect=Expect.REFUSE, where="config.json", timeout_s=10),
        Case("hf/directory", run, setup=_mkdir("config.json"), expect=Expect.REFUSE, where="config.json"),
    ]
    return out


# ------------------------------------------------------------------------------------------ trace


def trace_cases(full: bool) -> list[Case]:
    def c(
        name,
        text,
        expect=Expect.REFUSE,
        fmt="csv",
        extra=(),
        props=(),
        secret=None,
        timeout_s=30.0,
        setup=None,
        known=None,
    ):
        files = () if text is None else ((f"t.{fmt}", text),)
        return Case(
            f"trace/{name}",
            ("serve", "--quiet", "--requests-from", f"t.{fmt}", "--json", "o.json", *extra),
            files=files,
            setup=setup,
            expect=expect,
            where=f"t.{fmt}",
            props=props,
            secret=secret,
            timeout_s=timeout_s,
            known=known,
        )

    plausible = Prop("result plausible", json_plausible("o.json", kind="serve"))
    az = AZURE_HEAD + "2023-11-16 18:15:46.6805900,374,44\n"
    out = [
        c("azure-valid", az + "2023-11-16 18:15:47.0,100,10\n", expect=Expect.RUN, props=(plausible,)),
        c("plain-valid", PLAIN_HEAD + "0,100,10\n0.5,50,5\n", expect=Expect.RUN, props=(plausible,)),
        c(
            "jsonl-valid",
            '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 2}\n',
            fmt="jsonl",
            expect=Expect.RUN,
            props=(plausible,),
        ),
        c("azure-year-1500", az + "1500-01-01 00:00:00,100,10\n"),
        c("azure-year-2300", az + "2300-01-01 00:00:00,100,10\n"),
        c("azure-year-9999", az + "9999-12-31 23:59:59,100,10\n"),
        c("azure-year-negative", az + "-0001-01-01 00:00:00,100,10\n"),
        c("azure-year-5-digits", az + "12023-11-16 18:15:47,100,10\n"),
        c("azure-month-13", az + "2023-13-16 18:15:47,100,10\n"),
        c("azure-hour-25", az + "2023-11-16 25:15:47,100,10\n"),
        c("azure-timezone", az + "2023-11-16T18:15:47+05:00,100,10\n", expect=Expect.EITHER),
        c(
            "azure-spread-10-centuries",
            AZURE_HEAD + "1700-01-01 00:00:00,10,1\n2200-01-01 00:00:00,10,1\n",
            expect=Expect.EITHER,
            props=(plausible,),
        ),
        c("azure-nat", az + "NaT,100,10\n"),
        c("azure-empty-stamp", az + ",100,10\n"),
        c("azure-epoch-number", az + "1700000000,100,10\n"),
        c("plain-arrival-nan", PLAIN_HEAD + "nan,1,1\n"),
        c("plain-arrival-inf", PLAIN_HEAD + "inf,1,1\n"),
        c("plain-arrival-negative", PLAIN_HEAD + "-1,1,1\n"),
        c("plain-arrival-1e308", PLAIN_HEAD + "0,1,1\n1e308,1,1\n"),
        c("plain-arrival-1e300", PLAIN_HEAD + "0,1,1\n1e300,1,1\n"),
        c("plain-arrival-hex", PLAIN_HEAD + "0x10,1,1\n"),
        c("plain-arrival-underscore", PLAIN_HEAD + "1_0,1,1\n", expect=Expect.REFUSE),
        c("plain-tokens-zero", PLAIN_HEAD + "0,0,1\n"),
        c("plain-tokens-negative", PLAIN_HEAD + "0,-5,1\n"),
        c("plain-tokens-fraction", PLAIN_HEAD + "0,1.5,1\n"),
        c("plain-tokens-1e30", PLAIN_HEAD + "0,1e30,1\n"),
        c("plain-tokens-2e9", PLAIN_HEAD + "0,2000000000,1\n"),
        c("plain-tokens-5000-digits", PLAIN_HEAD + "0," + "9" * 5000 + ",1\n"),
        c("plain-tokens-text", PLAIN_HEAD + "0,abc,1\n"),
        c("plain-output-huge", PLAIN_HEAD + "0,10,100000000\n", timeout_s=20),
        c("plain-missing-column", "arrival_s,prompt_tokens\n0,1\n"),
        c("plain-short-row", PLAIN_HEAD + "0,1\n"),
        c("plain-header-only", PLAIN_HEAD),
        c("plain-quoted-newline", PLAIN_HEAD + '"0\n",1,1\n'),
        c("plain-nul", PLAIN_HEAD + "0,1\x00,1\n"),
        c("plain-crlf", PLAIN_HEAD.replace("\n", "\r\n") + "0,10,2\r\n", expect=Expect.RUN),
        c("plain-bom", "\ufeff" + PLAIN_HEAD + "0,10,2\n", expect=Expect.EITHER),
        c("plain-latin1", (PLAIN_HEAD + "0,10,2\n# caf\xe9\n").encode("latin-1")),
        c("plain-long-line", PLAIN_HEAD + "0,1," + "1" * (50 << 20) + "\n", timeout_s=30),
        c("jsonl-not-object", "[1,2,3]\n", fmt="jsonl"),
        c(
            "jsonl-nested",
            '{"arrival_s": ' + "[" * 50_000 + "]" * 50_000 + ', "prompt_tokens": 1, "output_tokens": 1}\n',
            fmt="jsonl",
        ),
        c("jsonl-bool", '{"arrival_s": true, "prompt_tokens": 1, "output_tokens": 1}\n', fmt="jsonl"),
        c("jsonl-tokens-float-huge", '{"arrival_s": 0, "prompt_tokens": 1e300, "output_tokens": 1}\n', fmt="jsonl"),
        c("jsonl-tokens-nan", '{"arrival_s": 0, "prompt_tokens": NaN, "output_tokens": 1}\n', fmt="jsonl"),
        c("jsonl-tokens-string", '{"arrival_s": 0, "prompt_tokens": "10", "output_tokens": 1}\n', fmt="jsonl"),
        c(
            "jsonl-5000-digits",
            '{"arrival_s": 0, "prompt_tokens": ' + "9" * 5000 + ', "output_tokens": 1}\n',
            fmt="jsonl",
        ),
        c(
            "jsonl-duplicate-key",
            '{"arrival_s": 0, "prompt_tokens": 10, "prompt_tokens": 99, "output_tokens": 1}\n',
            fmt="jsonl",
        ),
        c("empty", ""),
        c("binary", b"\x89PNG\r\n\x1a\n\x00\x00"),
        c("secret-passwd", f"root:x:0:0:{SECRET}:/root:/bin/bash\n", secret=SECRET),
        c("secret-json", json.dumps({"token": SECRET}) + "\n", fmt="jsonl", secret=SECRET),
        c("too-large-sparse", None, setup=_sparse("t.csv", 10 << 30, PLAIN_HEAD.encode()), timeout_s=20),
        c("fifo", None, setup=_mkfifo("t.csv"), timeout_s=10),
        c("directory", None, setup=_mkdir("t.csv")),
        c(
            "many-rows-first-few",
            PLAIN_HEAD + "".join(f"{i * 0.01:.2f},10,2\n" for i in range(400_000)),
            expect=Expect.RUN,
            extra=("--requests", "5"),
            timeout_s=20,
        ),
        c("unsorted", PLAIN_HEAD + "5,10,2\n1,10,2\n3,10,2\n", expect=Expect.RUN, props=(plausible,)),
        c("same-time", PLAIN_HEAD + "0,10,2\n0,10,2\n", expect=Expect.RUN, props=(plausible,)),
    ]
    return out + _session_trace_cases(c, plausible)


def _session_trace_cases(c, plausible) -> list[Case]:
    """Sessions' turns as JSON lines (archsim/serving/session_trace.py)."""
    s0 = '{"session": 1, "turn": 0, "start_s": 0, "new_tokens": 10, "output_tokens": 2}\n'

    def later(**kv) -> str:
        return json.dumps({"session": 1, "turn": 1, "new_tokens": 10, "output_tokens": 2, **kv}) + "\n"

    return [
        c("session-valid", s0 + later(think_s=0.5, tool_s=0.1), fmt="jsonl", expect=Expect.RUN, props=(plausible,)),
        c("session-turn-skipped", s0 + later(turn=2), fmt="jsonl"),
        c("session-starts-late", later(), fmt="jsonl"),
        c("session-think-negative", s0 + later(think_s=-1), fmt="jsonl"),
        c(
            "session-think-nan",
            s0 + '{"session": 1, "turn": 1, "think_s": NaN, "new_tokens": 1, "output_tokens": 1}\n',
            fmt="jsonl",
        ),
        c("session-think-1e308", s0 + later(think_s=1e308), fmt="jsonl"),
        c("session-id-1e300", s0.replace('"session": 1', '"session": 1e300'), fmt="jsonl"),
        c("session-context-overflow", s0 + later(new_tokens=16_777_000, output_tokens=200), fmt="jsonl"),
        c("session-unknown-key", s0 + later(prefix_id=3), fmt="jsonl"),
    ]


# ------------------------------------------------------------------------------------------ sweep


def spec_cases(full: bool) -> list[Case]:
    def c(
        name,
        text,
        expect=Expect.REFUSE,
        extra=(),
        props=(),
        secret=None,
        files=(),
        setup=None,
        timeout_s=60.0,
        where="s.yaml",
        known=None,
        send=None,
    ):
        return Case(
            f"spec/{name}",
            ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet", *extra),
            files=(("s.yaml", text), *files),
            setup=setup,
            expect=expect,
            where=where,
            props=props,
            secret=secret,
            timeout_s=timeout_s,
            known=known,
            send=send,
            failed_ok=expect is not Expect.REFUSE,
        )

    param = lambda **p: {"x": {"path": "hardware.clock", "values": [1.5, 1.9], "unit": "GHz", **p}}  # noqa: E731
    out = [
        c("valid", spec(), expect=Expect.RUN, props=(Prop("2 rows", parquet_rows("out", ok=2)),)),
        c(
            "hardware-secret-file",
            spec(hardware="../passwd"),
            setup=lambda d: (d.parent / "passwd").write_text(f"root:{SECRET}\n"),
            secret=SECRET,
        ),
        c("hardware-absolute-outside", spec(hardware="/etc/hostname"), secret=None),
        Case(
            "spec/hardware-absolute-yaml-outside",
            ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet"),
            setup=_spec_naming_outside(),
            expect=Expect.REFUSE,
            where="s.yaml",
        ),
        c("hardware-shipped-absolute", spec(hardware=str(ROOT / "hw_configs" / "h200.yaml")), expect=Expect.RUN),
        c("hardware-parent-yaml", spec(hardware="../h.yaml"), setup=lambda d: (d.parent / "h.yaml").write_text(H200)),
        c("hardware-local-yaml", spec(hardware="h.yaml"), files=(("h.yaml", H200),), expect=Expect.RUN),
        c(
            "hardware-local-yaml-secret",
            spec(hardware="notes.txt"),
            files=(("notes.txt", f"token: {SECRET}\n"),),
            secret=SECRET,
            where="notes.txt",
        ),
        c(
            "path-hardware-values-secret",
            spec(parameters={"chip": {"path": "hardware", "values": ["h200", "/etc/passwd"]}}),
            secret="root:x",
        ),
        c(
            "path-hardware-values-outside",
            spec(parameters={"chip": {"path": "hardware", "values": ["h200", "../h.yaml"]}}),
            setup=lambda d: (d.parent / "h.yaml").write_text(H200),
        ),
        c(
            "allow-path",
            spec(hardware="../h.yaml"),
            setup=lambda d: (d.parent / "h.yaml").write_text(H200),
            extra=("--allow-path", "{dir}/.."),
            expect=Expect.RUN,
        ),
        c(
            "pathless-unused",
            spec(parameters={**param(), "unused": {"values": [1, 2, 3]}}),
            expect=Expect.EITHER,
            props=(Prop("no point lost", parquet_rows("out", rows=6)),),
        ),
        c(
            "pathless-objective",
            spec(parameters={**param(), "w": {"values": [1, 2]}}, objectives={"score": "w * tpot_s"}),
            expect=Expect.RUN,
            props=(Prop("4 rows", parquet_rows("out", ok=4)),),
        ),
        c(
            "int64-overflow-values",
            spec(parameters={**param(), "big": {"values": [1, 2**70]}}, objectives=ranked("big * 1.0")),
            expect=Expect.EITHER,
            props=(Prop("valid points recorded", parquet_rows("out", at_least_ok=2)),),
        ),
        c(
            "int64-overflow-derived",
            spec(derived={"huge": {"expr": "10 ** 30", "integer": True}}),
            expect=Expect.EITHER,
            props=(Prop("points recorded", parquet_rows("out", rows=2)),),
        ),
        c(
            "int64-overflow-range",
            spec(
                parameters={"x": {"path": "workload.scenario.batch", "range": [1, 1e30], "steps": 3, "integer": True}}
            ),
            expect=Expect.EITHER,
            props=(Prop("points recorded", parquet_rows("out", at_least_rows=1)),),
        ),
        c(
            "grid-steps-huge",
            spec(parameters={"x": {"path": "hardware.clock", "range": [1, 2], "steps": 2_000_000_000, "unit": "GHz"}}),
            timeout_s=20,
        ),
        c(
            "grid-product-huge",
            spec(parameters={f"p{i}": {"path": None, "values": list(range(40))} for i in range(8)}),
            timeout_s=20,
        ),
        c(
            "grid-million",
            spec(parameters={"x": {"path": "hardware.clock", "range": [1, 2], "steps": 1_000_000, "unit": "GHz"}}),
            expect=Expect.STOP,
            send=(12.0, signal.SIGINT),
            timeout_s=40,
            props=(Prop("parts written before the stop", parquet_rows("out", at_least_rows=1), Verdict.HANG),),
        ),
        c(
            "halton-10-million",
            spec(parameters=param(), strategy={"kind": "halton", "points": 10_000_000, "seed": 0}),
            expect=Expect.EITHER,
            send=(12.0, signal.SIGINT),
            timeout_s=40,
        ),
        c("halton-points-huge", spec(strategy={"kind": "halton", "points": 2**31 - 1}), timeout_s=20),
        c("expr-round-huge-digits", spec(objectives=ranked("round(5, -10**9)")), expect=Expect.EITHER, timeout_s=20),
        c("expr-nested-power", spec(objectives=ranked("((10**1000)**1000)**1000")), expect=Expect.EITHER, timeout_s=20),
        c("expr-power-tower", spec(objectives=ranked("9**9**9")), expect=Expect.EITHER, timeout_s=20),
        c(
            "expr-multiply-chain",
            spec(derived={"d": {"expr": "*".join(["10**300"] * 400)}}),
            expect=Expect.EITHER,
            timeout_s=20,
        ),
        c("expr-100k-terms", spec(objectives={"o": "+".join(["1"] * 100_000)}), timeout_s=20),
        c("expr-deep-parens", spec(objectives={"o": "(" * 5000 + "1" + ")" * 5000}), timeout_s=20),
        c("expr-long-name", spec(objectives={"o": "a" * 100_000}), timeout_s=20),
        c(
            "expr-divide-zero",
            spec(objectives=ranked("1 / 0")),
            expect=Expect.EITHER,
            props=(Prop("failed points recorded", parquet_rows("out", failed=2)),),
        ),
        c(
            "expr-complex",
            spec(objectives=ranked("(-8) ** 0.5")),
            expect=Expect.EITHER,
            props=(Prop("failed points recorded", parquet_rows("out", failed=2)),),
        ),
        c("expr-float-overflow", spec(objectives=ranked("10.0 ** 400")), expect=Expect.EITHER),
        c("expr-exp-overflow", spec(objectives=ranked("exp(1e6)")), expect=Expect.EITHER),
        c("expr-log-zero", spec(objectives=ranked("log(0)")), expect=Expect.EITHER),
        c("expr-max-empty", spec(objectives=ranked("max()")), expect=Expect.EITHER),
        c("expr-attribute-escape", spec(objectives={"o": "().__class__.__bases__"})),
        c("expr-dunder-name", spec(objectives={"o": "__import__('os').system('echo owned')"})),
        c("expr-lambda", spec(objectives={"o": "(lambda: 1)()"})),
        c("expr-string-constant", spec(objectives={"o": "'a' * 10**9"})),
        c("unit-injection", spec(parameters=param(unit="GHz; rm -rf /")), expect=Expect.EITHER),
        c("unit-markup", spec(parameters=param(unit="[red]GHz")), expect=Expect.EITHER),
        c(
            "yaml11-hex-values",
            spec(parameters={"x": {"path": "hardware.cores.matrix_units.count", "values": ["0x2", "0x4"]}})
            .replace('"0x2"', "0x2")
            .replace('"0x4"', "0x4"),
            expect=Expect.EITHER,
            props=(Prop("hex values are not numbers", parquet_rows("out", ok=0)),),
        ),
        c(
            "exponent-values",
            spec(parameters={"x": {"path": "hardware.cores.matrix_units.count", "values": ["1e0", "2e0"]}})
            .replace('"1e0"', "1e0")
            .replace('"2e0"', "2e0"),
            expect=Expect.RUN,
            props=(Prop("1e0 read as 1", parquet_rows("out", ok=2)),),
        ),
        c("name-collision", spec(parameters={"status": {"path": "hardware.clock", "values": [1], "unit": "GHz"}})),
        c("path-bad", spec(parameters={"x": {"path": "hardware.nope", "values": [1]}})),
        c("values-mixed", spec(parameters={"x": {"path": "hardware.clock", "values": [1, "a"]}})),
        c("range-reversed", spec(parameters={"x": {"path": "hardware.clock", "range": [2, 1], "steps": 2}})),
        c(
            "range-nan",
            spec(parameters={"x": {"path": "hardware.clock", "range": [0.5, 2], "steps": 2, "unit": "GHz"}}).replace(
                "0.5", ".nan"
            ),
        ),
        c("seed-negative", spec(strategy={"kind": "random", "points": 2, "seed": -1})),
        c("seed-huge", spec(strategy={"kind": "random", "points": 2, "seed": 2**80}), expect=Expect.EITHER),
        c("chunk-size-huge", spec(), extra=("--chunk-size", "2147483647"), expect=Expect.EITHER, where="--chunk-size"),
        c("chunk-size-at-bound", spec(), extra=("--chunk-size", "1000000"), expect=Expect.RUN),
        c("workers-huge", spec(), extra=("--workers", "100000"), where="--workers"),
        Case(
            "spec/dask-bad-scheme",
            ("sweep", "s.yaml", "--out", "out", "--dask", "foo"),
            files=(("s.yaml", spec()),),
            expect=Expect.REFUSE,
            where="--dask",
            timeout_s=15,
        ),
        Case(
            "spec/dask-bad-port",
            ("sweep", "s.yaml", "--out", "out", "--dask", "tcp://127.0.0.1:99999"),
            files=(("s.yaml", spec()),),
            expect=Expect.REFUSE,
            where="--dask",
            timeout_s=15,
        ),
        Case(
            "spec/dask-refused",
            ("sweep", "s.yaml", "--out", "out", "--dask", "tcp://127.0.0.1:9"),
            files=(("s.yaml", spec()),),
            expect=Expect.REFUSE,
            where="127.0.0.1:9",
            timeout_s=15,
        ),
        Case(
            "spec/dask-unresolvable",
            ("sweep", "s.yaml", "--out", "out", "--dask", "tcp://no-such-host.invalid:8786"),
            files=(("s.yaml", spec()),),
            expect=Expect.REFUSE,
            where="no-such-host.invalid",
            timeout_s=15,
        ),
        c("spec-is-secret", f"root:x:0:0:{SECRET}\n", secret=SECRET),
        c("spec-is-list", f"- {SECRET}\n", secret=SECRET),
    ]
    return out


def _spec_naming_outside():
    """A spec whose hardware is a valid chip file outside its folder, named by absolute path."""

    def make(folder: Path) -> None:
        outside = folder.parent / "elsewhere.yaml"
        outside.write_text(H200)
        (folder / "s.yaml").write_text(spec(hardware=str(outside)))

    return make


def store_cases(full: bool) -> list[Case]:
    """`sweep --out` into folders it did not make, and `pareto` on broken results."""
    out = [
        Case(
            "store/out-has-foreign-files",
            ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet"),
            files=(
                ("s.yaml", spec()),
                ("out/summary.json", "my notes\n"),
                ("out/.part-keep", "mine\n"),
                ("out/thesis.tex", "mine\n"),
            ),
            expect=Expect.REFUSE,
            where="out",
            props=(
                Prop(
                    "user's files kept",
                    stays_unchanged(
                        {"out/summary.json": "my notes\n", "out/.part-keep": "mine\n", "out/thesis.tex": "mine\n"}
                    ),
                    Verdict.DATA,
                ),
            ),
        ),
        Case(
            "store/out-is-file",
            ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet"),
            files=(("s.yaml", spec()), ("out", "mine\n")),
            expect=Expect.REFUSE,
            where="out",
            props=(Prop("file kept", stays_unchanged({"out": "mine\n"}), Verdict.DATA),),
        ),
        Case(
            "store/out-is-fifo",
            ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet"),
            files=(("s.yaml", spec()),),
            setup=_mkfifo("out"),
            expect=Expect.REFUSE,
            where="out",
            timeout_s=10,
        ),
        Case(
            "store/out-resume",
            ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet"),
            files=(("s.yaml", spec()),),
            setup=_prior_sweep(),
            expect=Expect.RUN,
            props=(Prop("rows kept", parquet_rows("out", ok=2)),),
        ),
        Case(
            "store/out-other-settings",
            ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet"),
            files=(("s.yaml", spec(kv_stride=64)),),
            setup=_prior_sweep(),
            expect=Expect.REFUSE,
            where="out",
        ),
    ]
    pareto = ("pareto", "out", "--maximize", "tpot_ms", "--minimize", "clock", "--no-plot")
    breakages = {
        "truncated-manifest": lambda d: (d / "out" / "sweep.json").write_text('{"format": 1, "sett'),
        "manifest-list": lambda d: (d / "out" / "sweep.json").write_text("[1, 2]"),
        "manifest-binary": lambda d: (d / "out" / "sweep.json").write_bytes(b"\xff\xfe\x00"),
        "manifest-directory": lambda d: ((d / "out" / "sweep.json").unlink(), (d / "out" / "sweep.json").mkdir()),
        "truncated-part": _truncate_part,
        "part-not-parquet": lambda d: (d / "out" / "points" / "part-0000000000000000.parquet").write_text(
            "not parquet"
        ),
        "part-sparse-huge": lambda d: _sparse("out/points/part-1111111111111111.parquet", 10 << 30)(d),
        "part-other-schema": _other_schema_part,
        "part-is-directory": lambda d: (d / "out" / "points" / "part-2222222222222222.parquet").mkdir(),
        "part-fifo": lambda d: os.mkfifo(d / "out" / "points" / "part-3333333333333333.parquet"),
    }
    for name, breakage in breakages.items():
        out.append(
            Case(
                f"store/pareto-{name}",
                pareto,
                setup=_all(_prior_sweep(), breakage),
                expect=Expect.REFUSE,
                where="out",
                timeout_s=20,
            )
        )
        out.append(
            Case(
                f"store/resume-{name}",
                ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet"),
                files=(("s.yaml", spec()),),
                setup=_all(_prior_sweep(), breakage),
                expect=Expect.EITHER,
                where="out",
                timeout_s=30,
            )
        )
    out += [
        Case("store/pareto-empty-dir", pareto, setup=_mkdir("out"), expect=Expect.REFUSE, where="out"),
        Case("store/pareto-missing", pareto, expect=Expect.REFUSE, where="out"),
        Case("store/pareto-valid", pareto, setup=_prior_sweep(), expect=Expect.RUN),
        Case(
            "store/pareto-column-markup",
            ("pareto", "out", "--maximize", "[red]x", "--minimize", "\x1b[2Jy", "--no-plot"),
            setup=_prior_sweep(),
            expect=Expect.REFUSE,
            where="out",
        ),
        Case(
            "store/pareto-top-zero", (*pareto, "--top", "0"), setup=_prior_sweep(), expect=Expect.REFUSE, where="--top"
        ),
        Case(
            "store/pareto-plot-fifo",
            ("pareto", "out", "--maximize", "tpot_ms", "--minimize", "clock", "--plot", "p.png"),
            setup=_all(_prior_sweep(), _mkfifo("p.png")),
            expect=Expect.REFUSE,
            where="p.png",
            timeout_s=15,
        ),
    ]
    return out


def _prior_sweep():
    """A finished two-point sweep of `spec()` in `out/` (run in the harness process, once)."""

    def make(folder: Path) -> None:
        src = _prior_sweep_dir()
        import shutil

        shutil.copytree(src, folder / "out", dirs_exist_ok=True)

    return make


_PRIOR: list[Path] = []


def _prior_sweep_dir() -> Path:
    """The finished sweep, made once by a separate `archsim sweep` (pyarrow stays out of the
    harness process, which forks the cases)."""
    if not _PRIOR:
        import subprocess
        import sys
        import tempfile

        d = Path(tempfile.mkdtemp(prefix="archsim-hostile-prior-"))
        (d / "s.yaml").write_text(spec())
        argv = [sys.executable, "-m", "archsim", "sweep", str(d / "s.yaml"), "--out", str(d / "out"), "--workers", "1"]
        done = subprocess.run([*argv, "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert done.returncode == 0, f"the prior sweep must run: {done.stderr[-500:]}"
        _PRIOR.append(d / "out")
    return _PRIOR[0]


def _truncate_part(folder: Path) -> None:
    part = next((folder / "out" / "points").glob("part-*.parquet"))
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])


def _other_schema_part(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"config_hash": ["x"], "other": [1]}), folder / "out" / "points" / "part-4444444444444444.parquet"
    )


# ------------------------------------------------------------------------------------------ cases


def cases_cases(full: bool) -> list[Case]:
    base = small_cases()
    by_kind = {c["kind"]: c for c in base}
    out = []

    def c(name, cases, expect=Expect.REFUSE, known=None, text=None, props=(), secret=None, timeout_s=30.0, setup=None):
        body = text if text is not None or setup else case_file(*cases)
        return Case(
            f"cases/{name}",
            ("validate", "c.json", "--json", "o.json"),
            files=() if setup else (("c.json", body),),
            setup=setup,
            expect=expect,
            where="c.json",
            known=known,
            props=props,
            secret=secret,
            timeout_s=timeout_s,
        )

    ok_kept = Prop("the good case is still predicted", shows_literally(base[0]["id"]), Verdict.DATA)
    hostile_values = {
        "negative": -64,
        "zero": 0,
        "fraction": 64.5,
        "bool": True,
        "string": "64",
        "null": None,
        "list": [64],
        "huge": 10**7,
        "nan": float("nan"),
        "inf": float("inf"),
    }
    for kind, fields in {
        "gemm": ("M", "K", "N"),
        "attention_prefill": ("batch", "heads_q", "heads_kv", "head_dim", "seq"),
        "attention_decode": ("batch", "heads_q", "heads_kv", "head_dim", "kv_len"),
        "vector": ("M", "N"),
        "copy": ("bytes",),
    }.items():
        if kind not in by_kind:
            continue
        for field_name in fields if full else fields[:2]:
            for label, value in hostile_values.items():
                if not full and label not in ("negative", "zero", "nan", "bool"):
                    continue
                bad = {**by_kind[kind], "id": f"bad/{kind}/{field_name}/{label}", field_name: value}
                expect = Expect.EITHER if label == "huge" else Expect.REFUSE  # a large shape is a shape
                out.append(c(f"{kind}-{field_name}-{label}", [base[0], bad], expect=expect, props=(ok_kept,)))
    out += [
        c(
            "measured-missing",
            [base[0], {k: v for k, v in base[1].items() if k != "measured_ms"}],
            props=(ok_kept,),
        ),
        c("measured-zero", [base[0], {**base[1], "measured_ms": 0}], props=(ok_kept,)),
        c("measured-nan", [base[0], {**base[1], "measured_ms": float("nan")}], props=(ok_kept,)),
        c(
            "causal-string",
            [base[0], {**by_kind.get("attention_prefill", base[1]), "causal": "false"}],
            props=(ok_kept,),
        ),
        c(
            "heads-kv-not-dividing",
            [base[0], {**by_kind.get("attention_decode", base[1]), "heads_kv": 5}],
            props=(ok_kept,),
        ),
        c("dtype-fp32", [base[0], {**base[1], "dtype": "fp32"}], props=(ok_kept,)),
        c("kind-unknown", [base[0], {**base[1], "kind": "conv"}], props=(ok_kept,)),
        c("case-not-object", [base[0], [1, 2]], props=(ok_kept,)),
        c("id-list", [base[0], {**base[1], "id": ["a"]}], expect=Expect.EITHER),
        c(
            "seq-ten-million",
            [base[0], {**by_kind.get("attention_prefill", base[1]), "seq": 10**7}],
            props=(ok_kept,),
            timeout_s=30,
        ),
        c("not-json", None, text="cases: []\n"),
        c("top-level-list", None, text="[]"),
        c("cases-not-list", None, text='{"cases": {"a": 1}}'),
        c("no-cases", None, text='{"cases": []}', expect=Expect.EITHER),
        c("deep-nesting", None, text='{"cases": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        c(
            "int-5000-digits",
            None,
            text=case_file(base[0]).replace(f'"M": {base[0].get("M", 1)}', '"M": ' + "9" * 5000, 1),
        ),
        c("duplicate-key", None, text=case_file(base[0]).replace('"kind"', '"kind": "copy", "kind"', 1)),
        c("secret", None, text=f"root:x:0:0:{SECRET}\n", secret=SECRET),
        c("too-large-sparse", None, setup=_sparse("c.json", 10 << 30, b'{"cases": ['), timeout_s=20),
        c("fifo", None, setup=_mkfifo("c.json"), timeout_s=10),
    ]
    meta_values = {  # meta fields whose values are refused before any case runs
        "resolution-bare": {"resolution": "1"},
        "resolution-bytes": {"resolution": "1 MB"},
        "resolution-zero": {"resolution": "0 us"},
        "resolution-negative": {"resolution": "-1 us"},
        "resolution-number": {"resolution": 1},
        "resolution-list": {"resolution": ["1 us"]},
        "timing-unknown": {"timing": "wallclock: around the launch"},
        "vector-kernels-style": {"vector_kernels": {"rmsnorm": "fused"}},
        "vector-kernels-list": {"vector_kernels": ["rmsnorm"]},
    }
    for name, meta in meta_values.items():
        out.append(c(f"meta-{name}", None, text=json.dumps({"meta": meta, "cases": base[:1]})))
    rotary = {"id": "rot", "kind": "vector", "op": "rotary", "M": 8, "N": 640, "dtype": "fp16", "measured_ms": 0.003}
    per_token = {"vector_kernels": {"rotary": "per_token"}}
    for name, fields in {  # a per-token rotary needs its q and k heads, and they must make N
        "rotary-heads-missing": {},
        "rotary-heads-mismatch": {"heads_q": 4, "heads_kv": 2},
        "rotary-heads-string": {"heads_q": "4", "heads_kv": 1},
        "rotary-heads-zero": {"heads_q": 0, "heads_kv": 5},
    }.items():
        cases = [base[0], {**rotary, **fields}]
        out.append(c(name, None, text=json.dumps({"meta": per_token, "cases": cases}), props=(ok_kept,)))
    return out


# ------------------------------------------------------------------------------------------ flags


INT_VALUES = ("0", "-1", "2147483647", "2147483648", "9" * 30, "1e3", "0x10", "", "nan", "\x1b[2J7")
FLOAT_VALUES = ("0", "-1", "1e-320", "1e-300", "1e300", "1e309", "inf", "nan", "0x1p3", "", "abc", "5e-324")
DURATION_VALUES = ("200", "200ms", "-5ms", "0ms", "1e309s", "nan", "inf", "5 furlongs", "200 MB", "1e-300s", "1e300")
LENGTH_VALUES = (
    "uniform:1:1e300",
    "uniform:0:5",
    "uniform:5:1",
    "exponential:-1",
    "exponential:1e300",
    "lognormal:1000:1e300",
    "lognormal:1e300:1",
    "lognormal:1000:1e-300",
    "exponential:nan",
    "2147483648",
    "1e9",
    "fixed",
    ":",
)
BASE_ARGS = {  # a cheap run of each command, to which one hostile flag is added
    "run": RUN,
    "op": ("op", "gemm", "--M", "64", "--K", "64", "--N", "64"),
    "explain": ("explain", "--quiet", *SMALL),
    "serve": SERVE,
    "compare": ("compare", "h200", "a100", *SMALL),
    "scale": ("scale", "--workload", "llama3_8b", "--hw", "h200x8", "--tp", "1,2"),
    "validate": ("validate", "c.json"),
    "list": ("list",),
    "sweep": ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet"),
    "pareto": ("pareto", "out", "--maximize", "tpot_ms", "--minimize", "clock", "--no-plot"),
}
PATH_FLAGS = {
    "--json",
    "--csv",
    "--trace",
    "--trace-out",
    "--requests-from",
    "--timeline",
    "--plots",
    "--plot",
    "--out",
    "--hw",
    "--system",
    "--workload",
    "--model",
    "--prefill-hw",
    "--decode-hw",
    "--draft",
    "--allow-path",
}
SKIP_FLAGS = {"--help", "--dask", "--dask-local"}


def flag_specs():
    """(command, flag, kind) of every option of every subcommand, read from archsim's parser."""
    import argparse

    from archsim.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, p in sub.choices.items():
        for action in p._actions:
            flags = [o for o in action.option_strings if o.startswith("--")]
            if not flags or flags[0] in SKIP_FLAGS or flags[0] in PATH_FLAGS:
                continue
            if action.nargs == 0:
                continue
            kind = _flag_kind(action)
            yield command, flags[0], kind, action


def _flag_kind(action) -> str:
    """What a flag takes, found by probing its argparse type."""
    if action.choices:
        return "choice"
    if action.type is None:
        return "text"

    def takes(text: str) -> bool:
        try:
            action.type(text)
        except Exception:
            return False
        return True

    if takes("200ms"):
        return "duration"
    if takes("uniform:1:5"):
        return "length"
    if takes("0.5"):
        return "float"
    if takes("7"):
        return "int"
    return "text"


def flags_cases(full: bool) -> list[Case]:
    out = []
    files = (("c.json", case_file(small_cases()[0])), ("s.yaml", spec()))
    for command, flag, kind, _action in flag_specs():
        values = {
            "int": INT_VALUES,
            "float": FLOAT_VALUES,
            "duration": DURATION_VALUES,
            "length": LENGTH_VALUES,
            "choice": ("nope", "\x1b[2J", "[/]"),
            "text": ("", "\x1b[2J", "x" * 10_000),
        }[kind]
        if not full:  # two values of each flag: the first and one from the middle
            values = (values[0], values[len(values) // 2])
        base = BASE_ARGS[command]
        setup = _prior_sweep() if command == "pareto" else None
        for value in values:
            argv = (*base, flag, value)
            label = f"{command}-{flag.lstrip('-')}-{_slug(value)}"
            out.append(
                Case(f"flags/{label}", argv, files=files, setup=setup, expect=Expect.EITHER, where=flag, timeout_s=30)
            )
    out += [
        Case(
            "flags/serve-requests-huge",
            ("serve", "--quiet", "--requests", "2147483647"),
            expect=Expect.EITHER,
            where="--requests",
            timeout_s=30,
        ),
        Case(
            "flags/serve-instances-huge",
            ("serve", "--quiet", "--requests", "4", "--instances", "2147483647"),
            expect=Expect.EITHER,
            where="--instances",
            timeout_s=30,
        ),
        Case(
            "flags/serve-kv-blocks-huge",
            ("serve", "--quiet", "--requests", "4", "--kv-blocks", "2147483647"),
            expect=Expect.EITHER,
            where="--kv-blocks",
            timeout_s=30,
        ),
        Case(
            "flags/serve-seed-negative",
            ("serve", "--quiet", "--requests", "4", "--seed", "-1"),
            expect=Expect.EITHER,
            where="--seed",
        ),
        Case(
            "flags/serve-cv-tiny",
            ("serve", "--quiet", "--requests", "4", "--arrival", "gamma", "--cv", "1e-300"),
            expect=Expect.EITHER,
            where="--cv",
        ),
        Case(
            "flags/serve-cv-huge",
            ("serve", "--quiet", "--requests", "4", "--arrival", "gamma", "--cv", "1e300"),
            expect=Expect.EITHER,
            where="--cv",
        ),
        Case(
            "flags/serve-rate-tiny",
            ("serve", "--quiet", "--requests", "4", "--rate", "1e-320"),
            expect=Expect.EITHER,
            where="--rate",
        ),
        Case(
            "flags/serve-prompt-uniform-huge",
            ("serve", "--quiet", "--requests", "4", "--prompt", "uniform:1:1e300"),
            expect=Expect.EITHER,
            where="--prompt",
        ),
        Case(
            "flags/op-attention-huge",
            ("op", "attention", "--q-len", "1000000", "--kv-len", "1000000"),
            expect=Expect.EITHER,
            where="--q-len",
            timeout_s=30,
        ),
        Case(
            "flags/op-attention-batch-huge",
            ("op", "attention", "--batch", "2147483647", "--kv-len", "1024"),
            expect=Expect.EITHER,
            where="--batch",
            timeout_s=30,
        ),
        Case(
            "flags/op-gemm-huge",
            ("op", "gemm", "--M", "1000000", "--K", "1000000", "--N", "1000000"),
            expect=Expect.EITHER,
            where="--M",
            timeout_s=30,
        ),
        Case(
            "flags/op-gemm-k-huge",
            ("op", "gemm", "--M", "1", "--K", "2147483647", "--N", "2147483647"),
            expect=Expect.EITHER,
            where="--K",
            timeout_s=30,
        ),
        Case(
            "flags/op-rmsnorm-huge",
            ("op", "rmsnorm", "--M", "2147483647", "--N", "2147483647"),
            expect=Expect.EITHER,
            where="--M",
            timeout_s=30,
        ),
        Case(
            "flags/op-kv-len-huge",
            ("op", "attention", "--kv-len", "2147483647"),
            expect=Expect.EITHER,
            where="--kv-len",
            timeout_s=30,
        ),
        Case(
            "flags/op-copy-huge",
            ("op", "copy", "--bytes", "2147483647"),
            expect=Expect.EITHER,
            where="--bytes",
            timeout_s=30,
        ),
        Case(
            "flags/run-prompt-huge",
            ("run", "--quiet", "--prompt", "2147483647", "--generate", "2"),
            expect=Expect.EITHER,
            where="--prompt",
            timeout_s=30,
        ),
        Case(
            "flags/run-generate-huge",
            ("run", "--quiet", "--prompt", "16", "--generate", "2147483647"),
            expect=Expect.EITHER,
            where="--generate",
            timeout_s=30,
        ),
        Case(
            "flags/run-batch-huge",
            ("run", "--quiet", "--batch", "2147483647", *SMALL),
            expect=Expect.EITHER,
            where="--batch",
            timeout_s=30,
        ),
        Case(
            "flags/run-long-prompt-big-chip",
            ("run", "--quiet", "--hw", "hw.yaml", "--prompt", "1000000", "--generate", "2"),
            files=(("hw.yaml", set_key(H200, "hbm.capacity", yq("100 TB"))),),
            expect=Expect.EITHER,
            where="--prompt",
            timeout_s=30,
        ),
        Case(
            "flags/run-tp-huge",
            ("run", "--quiet", "--hw", "h200x8", "--tp", "2147483647", *SMALL),
            expect=Expect.EITHER,
            where="--tp",
        ),
        Case(
            "flags/run-pp-huge",
            ("run", "--quiet", "--hw", "h200x8", "--pp", "2147483647", *SMALL),
            expect=Expect.EITHER,
            where="--pp",
        ),
        Case(
            "flags/run-trace-step-huge",
            ("run", "--quiet", *SMALL, "--trace-out", "t.json", "--trace-step", "decode:99999999999999999999"),
            expect=Expect.REFUSE,
            where="--trace-step",
        ),
        Case("flags/scale-tp-list-huge", ("scale", "--tp", "1," + "9" * 30), expect=Expect.REFUSE, where="--tp"),
        Case(
            "flags/scale-tp-many",
            ("scale", "--tp", ",".join(str(i) for i in range(1, 100_000))),
            expect=Expect.REFUSE,
            where="--tp",
            timeout_s=20,
        ),
        Case("flags/unknown-command", ("frobnicate",), expect=Expect.REFUSE, where="frobnicate"),
        Case("flags/op-unknown-kind", ("op", "\x1b[2Jconv"), expect=Expect.REFUSE, where="conv"),
        Case("flags/argv-huge", ("run", "--hw", "x" * 200_000), expect=Expect.REFUSE, where="--hw" if False else None),
    ]
    return out


def _slug(value: str) -> str:
    out = "".join(ch if ch.isalnum() or ch in ".:-" else "_" for ch in value)[:24]
    return out or "empty"


# ---------------------------------------------------------------------------------------- outputs


def outputs_cases(full: bool) -> list[Case]:
    """Output paths of every command: FIFOs, devices, folders, missing parents, disk full."""
    writers = {
        "run-json": (*RUN, "--json", "{p}"),
        "run-csv": (*RUN, "--csv", "{p}"),
        "run-trace": (*RUN, "--trace-out", "{p}"),
        "op-json": ("op", "gemm", "--M", "64", "--K", "64", "--N", "64", "--json", "{p}"),
        "op-trace": ("op", "gemm", "--M", "64", "--K", "64", "--N", "64", "--trace-out", "{p}"),
        "serve-json": (*SERVE, "--json", "{p}"),
        "serve-timeline": (*SERVE, "--trace-out", "{p}"),
        "validate-json": ("validate", "c.json", "--json", "{p}"),
        "compare-json": ("compare", "h200", "a100", *SMALL, "--json", "{p}"),
        "scale-json": ("scale", "--tp", "1,2", "--workload", "llama3_8b", "--json", "{p}"),
        "pareto-json": ("pareto", "out", "--maximize", "tpot_ms", "--minimize", "clock", "--no-plot", "--json", "{p}"),
    }
    if not full:
        writers = {k: v for k, v in writers.items() if k in ("run-json", "run-trace", "serve-timeline", "pareto-json")}
    files = (("c.json", case_file(small_cases()[0])),)
    out = []
    for writer, argv in writers.items():
        setup0 = _prior_sweep() if writer.startswith("pareto") else None

        def c(
            name,
            path,
            setup=None,
            expect=Expect.REFUSE,
            props=(),
            env=(),
            where=None,
            fsize=None,
            writer=writer,
            argv=argv,
            setup0=setup0,
        ):
            full_setup = _all(*(s for s in (setup0, setup) if s)) if (setup0 or setup) else None
            args = tuple(a.replace("{p}", path) for a in argv)
            extra_env = env + ((("ARCHSIM_HOSTILE_FSIZE", str(fsize)),) if fsize else ())
            return Case(
                f"outputs/{writer}-{name}",
                args,
                files=files,
                setup=full_setup,
                expect=expect,
                where=where or path,
                props=(Prop("no temp files left", no_temp_files(), Verdict.DATA), *props),
                env=extra_env,
                timeout_s=30,
                target=_fsize_main if fsize else None,
            )

        out += [
            c(
                "fifo",
                "o.out",
                setup=_mkfifo("o.out"),
                props=(Prop("FIFO kept", file_is("o.out", "fifo"), Verdict.DATA),),
            ),
            c("dev-null", "null.out", setup=_symlink("null.out", "/dev/null")),  # never the device itself:
            c("dev-full", "full.out", setup=_symlink("full.out", "/dev/full")),  # a bug would replace it
            c("directory", "d", setup=_mkdir("d"), props=(Prop("folder kept", file_is("d", "dir"), Verdict.DATA),)),
            c("parent-is-file", "f/o.out", setup=_sparse("f", 4)),
            c("parent-missing", "missing/deeper/o.out", expect=Expect.EITHER),
            c("name-too-long", "n" * 300 + ".out"),
            c("dangling-symlink", "l.out", setup=_symlink("l.out", "{dir}/nowhere/x"), expect=Expect.EITHER),
            c(
                "symlink-to-fifo",
                "l.out",
                setup=_all(_mkfifo("f.fifo"), _symlink("l.out", "{dir}/f.fifo")),
                props=(Prop("FIFO kept", file_is("f.fifo", "fifo"), Verdict.DATA),),
            ),
            c(
                "existing-file",
                "o.out",
                setup=lambda d: (d / "o.out").write_text("old\n"),
                expect=Expect.RUN,
                props=(Prop("written 0644", written_mode("o.out", 0o644)),),
            ),
            c("umask-022", "o.out", expect=Expect.RUN, props=(Prop("written 0644", written_mode("o.out", 0o644)),)),
        ]
        if writer in LARGE_OUTPUTS:  # larger than the file-size limit, unlike the console output
            out.append(
                c(
                    "disk-full",
                    "o.out",
                    expect=Expect.REFUSE,
                    fsize=4096,
                    props=(Prop("no partial file", file_is("o.out", "absent"), Verdict.DATA),),
                )
            )
        if writer == "run-json":
            out += [
                c("control-chars", "o\x1b[2J.json", expect=Expect.RUN),
            ]
    out += [
        Case(
            "outputs/run-json-and-csv-same",
            (*RUN, "--json", "o.out", "--csv", "o.out"),
            expect=Expect.REFUSE,
            where="o.out",
        ),
        Case(
            "outputs/run-json-input-hw",
            (*RUN, "--hw", "hw.yaml", "--json", "hw.yaml"),
            files=(("hw.yaml", H200),),
            expect=Expect.REFUSE,
            where="hw.yaml",
            props=(Prop("input kept", stays_unchanged({"hw.yaml": H200}), Verdict.DATA),),
        ),
        Case(
            "outputs/checked-before-simulating",
            ("run", "--quiet", "--prompt", "8192", "--generate", "4096", "--json", "d"),
            setup=_mkdir("d"),
            expect=Expect.REFUSE,
            where="d",
            timeout_s=5,
        ),
        Case(
            "outputs/plots-is-file",
            (*RUN, "--plots", "p"),
            setup=_sparse("p", 4),
            expect=Expect.REFUSE,
            where="p",
            timeout_s=30,
        ),
        Case(
            "outputs/serve-plots-is-file",
            (*SERVE, "--plots", "p"),
            setup=_sparse("p", 4),
            expect=Expect.REFUSE,
            where="p",
            timeout_s=30,
        ),
    ]
    return out


LARGE_OUTPUTS = ("run-json", "run-csv", "run-trace", "serve-json", "serve-timeline")


def _fsize_main(argv: list[str]) -> int:
    """archsim's main with the file-size limit of ARCHSIM_HOSTILE_FSIZE: writes past it fail as
    they do on a full disk (EFBIG; Python ignores SIGXFSZ)."""
    import resource

    from archsim.cli import main

    limit = int(os.environ["ARCHSIM_HOSTILE_FSIZE"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return main(argv)


# ---------------------------------------------------------------------------------------- signals


def signals_cases(full: bool) -> list[Case]:
    long_run = ("run", "--prompt", "512", "--generate", "100000", "--kv-stride", "1", "--json", "o.json")
    return [
        Case(
            "signals/run-sigint",
            long_run,
            expect=Expect.STOP,
            send=(2.0, signal.SIGINT),
            timeout_s=20,
            props=(Prop("no temp files left", no_temp_files(), Verdict.DATA),),
        ),
        Case(
            "signals/run-sigterm",
            long_run,
            expect=Expect.STOP,
            send=(2.0, signal.SIGTERM),
            timeout_s=20,
            props=(Prop("no temp files left", no_temp_files(), Verdict.DATA),),
        ),
        Case(
            "signals/run-sighup",
            long_run,
            expect=Expect.STOP,
            send=(2.0, signal.SIGHUP),
            timeout_s=20,
            props=(Prop("no temp files left", no_temp_files(), Verdict.DATA),),
        ),
        Case(
            "signals/serve-sigint",
            ("serve", "--requests", "200000", "--rate", "100", "--json", "o.json"),
            expect=Expect.STOP,
            send=(3.0, signal.SIGINT),
            timeout_s=20,
        ),
        Case(
            "signals/sweep-sigint",
            ("sweep", "s.yaml", "--out", "out", "--workers", "1"),
            files=(("s.yaml", LONG_SWEEP),),
            expect=Expect.STOP,
            send=(2.0, signal.SIGINT),
            send_once="out/points/part-*.parquet",  # a loaded machine may take longer for the first chunk
            timeout_s=60,
            props=(Prop("parts kept", parquet_rows("out", at_least_rows=1), Verdict.DATA),),
        ),
        Case(
            "signals/sweep-sigterm",
            ("sweep", "s.yaml", "--out", "out", "--workers", "2"),
            files=(("s.yaml", LONG_SWEEP),),
            expect=Expect.STOP,
            send=(2.0, signal.SIGTERM),
            send_once="out/points/part-*.parquet",  # the signal lands once the pool has run a chunk
            timeout_s=60,
            props=(Prop("no temp files left", no_temp_files("out"), Verdict.DATA),),
        ),
        Case(
            "signals/validate-sigint",
            ("validate", "h200_calibration", "--json", "o.json"),
            expect=Expect.STOP,
            send=(1.0, signal.SIGINT),
            timeout_s=20,
        ),
    ]


# ------------------------------------------------------------------------------------------ all


def random_variants(seed: int, count: int) -> list[Case]:
    """Random mutations of traces and case files (the full suite only)."""
    rng = random.Random(seed)
    out = []
    tokens = [
        "0",
        "-1",
        "1e308",
        "nan",
        "inf",
        "",
        "x",
        "9" * 40,
        "1.5",
        "2023-11-16 18:15:46",
        "\x1b[2J",
        "[/]",
        "1e-320",
        "0x10",
    ]
    for i in range(count):
        rows = [",".join(rng.choice(tokens) for _ in range(3)) for _ in range(rng.randint(1, 5))]
        head = rng.choice([PLAIN_HEAD, AZURE_HEAD])
        out.append(
            Case(
                f"trace/random-{i}",
                ("serve", "--quiet", "--requests-from", "t.csv"),
                files=(("t.csv", head + "\n".join(rows) + "\n"),),
                expect=Expect.EITHER,
                where="t.csv",
                ci=False,
            )
        )
        case = dict(rng.choice(small_cases()))
        key = rng.choice(sorted(case))
        case[key] = rng.choice([0, -1, 1.5, 10**9, "x", None, True, [], {}, float("nan")])
        out.append(
            Case(
                f"cases/random-{i}",
                ("validate", "c.json"),
                files=(("c.json", case_file(small_cases()[0], case)),),
                expect=Expect.EITHER,
                where="c.json",
                ci=False,
            )
        )
    return out


def all_cases(full: bool = True, seed: int = 0) -> list[Case]:
    cases = (
        names_cases(full)
        + yaml_cases(full)
        + hf_cases(full)
        + trace_cases(full)
        + spec_cases(full)
        + store_cases(full)
        + cases_cases(full)
        + flags_cases(full)
        + outputs_cases(full)
        + signals_cases(full)
    )
    from hostile_trust import cache_cases, store_trust_cases, stream_cases  # (they use this module's helpers)

    cases += store_trust_cases(full) + cache_cases(full) + stream_cases(full)
    from hostile_api import api_cases, env_cases, family_cases, physics_cases

    cases += api_cases(full) + env_cases(full) + physics_cases(full) + family_cases(full)
    if full:
        cases += random_variants(seed, 1000)
    else:
        cases = [c for c in cases if c.ci]
    ids = [c.id for c in cases]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, f"case ids must be unique: {dupes[:5]}"
    return cases


__all__ = ["Outcome", "all_cases"]
