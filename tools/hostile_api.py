"""The inputs of `tools/hostile.py` past the files and flags: the Python API called with every
kind of wrong argument (`api`), the environment archsim reads (`env`), inputs that cannot be
physically (`physics`: a context past the model's positions, an L2 larger than its memory, a
power limit below what the chip draws idle) and the fields of a Hugging Face config that name a
mechanism archsim does not model (`families`).

An API case calls archsim in the forked child through `_api_main`: a refusal must be an
`archsim.ConfigError` (exit 2, its message naming the argument), a call that must run returns
(exit 0); any other exception reaches the harness as a traceback, the verdict this surface
exists to catch. The others run archsim's command line as a user would.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

from hostile import Case, Expect, Prop
from hostile_cases import HF_LLAMA, ROOT, RUN, SERVE, hf
from hostile_props import json_plausible

NAN, INF = math.nan, math.inf

# ---------------------------------------------------------------------------------------------- api

SMALL_SCENARIO = {"scenario": {"batch": 1, "prompt_tokens": 16, "output_tokens": 2}}


def _wl():
    import archsim

    return archsim.load_workload("llama3_8b", SMALL_SCENARIO)


def _reqs(n: int = 3, prompt: int | str = 16, output: int | str = 2):
    import archsim

    return archsim.generate_requests(1.0, n, prompt, output)


def _run(**kw):
    import archsim

    return lambda: archsim.run("h200", _wl(), **kw)


def _serve(**kw):
    import archsim

    return lambda: archsim.serve("h200", _wl(), _reqs(), **kw)


def _gen(*args, **kw):
    import archsim

    full = (1.0, 3, 16, 2)
    return lambda: archsim.generate_requests(*args, *full[len(args) :], **kw)


def _call(name: str, *args, **kw):
    import archsim

    return lambda: getattr(archsim, name)(*args, **kw)


# name -> (the call, what a refusal must name; None: the call must run)
API: dict[str, tuple[Callable[[], Callable[[], object]], str | None]] = {
    # run: counts as --tp/--pp/--ep/--kv-stride take them
    **{f"run-{k}-{label}": (lambda k=k, v=v: _run(**{k: v}), k)
       for k in ("tp", "pp", "ep", "kv_stride")
       for label, v in (("zero", 0), ("negative", -1), ("nan", NAN), ("float", 2.0), ("text", "2"), ("bool", True),
                        ("huge", 10**30), ("none", None))},
    "run-progress-int": (lambda: _run(progress=3), "progress"),
    "run-hardware-int": (lambda: _call("run", 5, "llama3_8b"), "hardware"),
    "run-hardware-none": (lambda: _call("run", None, "llama3_8b"), "hardware"),
    "run-hardware-list": (lambda: _call("run", ["h200"], "llama3_8b"), "hardware"),
    "run-workload-bytes": (lambda: _call("run", "h200", b"llama3_8b"), "workload"),
    "run-swapped": (lambda: _call("run", _wl(), "h200"), "hardware"),
    "run-hardware-missing": (lambda: _call("run", "no_such_chip", "llama3_8b"), "no_such_chip"),
    "run-system-unvalidated": (lambda: _call("run", __import__("archsim").load_system("h200").system, "llama3_8b"), "hardware"),
    "run-small": (lambda: _run(), None),
    # loads
    "load-system-int": (lambda: _call("load_system", 3), "name_or_path"),
    "load-system-empty": (lambda: _call("load_system", ""), "name_or_path"),
    "load-system-nul": (lambda: _call("load_system", "h2\x0000"), "name_or_path"),
    "load-system-params-list": (lambda: _call("load_system", "h200", [1]), "params"),
    "load-system-params-text": (lambda: _call("load_system", "h200", "clock=1"), "params"),
    "load-system-section-value": (lambda: _call("load_system", "h200", hbm=5), "hbm"),
    "load-system-key-int": (lambda: _call("load_system", "h200", {1: 2}), "dotted path"),
    "load-system-nan": (lambda: _call("load_system", "h200", {"clock": NAN}), "clock"),
    "load-system-path": (lambda: _call("load_system", ROOT / "hw_configs" / "h200.yaml"), None),
    "load-workload-hf-int": (lambda: _call("load_workload", "llama3_8b", hf_config=3), "hf_config"),
    "load-workload-hf-missing": (lambda: _call("load_workload", "llama3_8b", hf_config="/nonexistent/c.json"), "c.json"),
    "load-workload-hf-dtypes-text": (lambda: _call("load_workload", "llama3_8b", hf_dtypes="yes"), "hf_dtypes"),
    "load-workload-batch-zero": (lambda: _call("load_workload", "llama3_8b", {"scenario.batch": 0}), "batch"),
    "with-params-none": (lambda: _call("with_params", None, {}), "obj"),
    "with-params-list": (lambda: _call("with_params", _wl(), [1]), "params"),
    "with-params-where-int": (lambda: _call("with_params", _wl(), {}, 3), "where"),
    # requests
    **{f"generate-{label}": (lambda a=a, kw=kw: _gen(*a, **kw), key) for label, a, kw, key in (
        ("rate-nan", (NAN,), {}, "rate_per_s"), ("rate-zero", (0.0,), {}, "rate_per_s"),
        ("rate-text", ("1",), {}, "rate_per_s"), ("count-zero", (1.0, 0), {}, "count"),
        ("count-text", (1.0, "3"), {}, "count"), ("count-huge", (1.0, 10**9), {}, "count"),
        ("prompt-float", (1.0, 3, 10.5), {}, "prompt_tokens"), ("prompt-none", (1.0, 3, None), {}, "prompt_tokens"),
        ("prompt-bad-spec", (1.0, 3, "lognormal:x"), {}, "prompt_tokens"),
        ("output-negative", (1.0, 3, 16, -2), {}, "output_tokens"),
        ("arrival-int", (), {"arrival": 3}, "arrival"), ("arrival-unknown", (), {"arrival": "weibull"}, "arrival"),
        ("cv-inf", (), {"cv": INF}, "cv"), ("seed-float", (), {"seed": 1.5}, "seed"), ("seed-negative", (), {"seed": -1}, "seed"),
    )},
    "load-requests-int": (lambda: _call("load_requests", 5), "name_or_path"),
    "load-requests-count-text": (lambda: _call("load_requests", "azure_llm_2023_conv", "3"), "count"),
    "load-requests-count-zero": (lambda: _call("load_requests", "azure_llm_2023_conv", 0), "count"),
    "load-requests-missing": (lambda: _call("load_requests", "/nonexistent/t.csv"), "t.csv"),
    # serve: the SLOs as numbers or durations, the rate, the requests, the keywords
    "serve-slo-nan": (lambda: _serve(slo_ttft_s=NAN), "slo_ttft_s"),
    "serve-slo-negative": (lambda: _serve(slo_tpot_s=-1.0), "slo_tpot_s"),
    "serve-slo-bare-text": (lambda: _serve(slo_ttft_s="0.2"), "slo_ttft_s"),
    "serve-slo-bad-unit": (lambda: _serve(slo_ttft_s="200 parsecs"), "slo_ttft_s"),
    "serve-slo-two-days": (lambda: _serve(slo_ttft_s="2 d"), "slo_ttft_s"),
    "serve-slo-duration": (lambda: _serve(slo_ttft_s="200ms", slo_tpot_s="50 ms"), None),
    "serve-attainment-high": (lambda: _serve(attainment=1.5), "attainment"),
    "serve-attainment-text": (lambda: _serve(attainment="0.9"), "attainment"),
    "serve-rate-negative": (lambda: _serve(rate_per_s=-1.0), "rate_per_s"),
    "serve-rate-nan": (lambda: _serve(rate_per_s=NAN), "rate_per_s"),
    "serve-blocks-absurd": (lambda: _serve(kv_blocks=10**15), "kv_blocks"),
    "serve-unknown-keyword": (lambda: _serve(bogus=1), "bogus"),
    "serve-options-int": (lambda: _serve(options=3), "options"),
    "serve-requests-int": (lambda: _call("serve", "h200", _wl(), 5), "requests"),
    "serve-requests-list": (lambda: _call("serve", "h200", _wl(), [1, 2]), "requests"),
    "serve-small": (lambda: _serve(), None),
    # sweeps
    "sweep-spec-int": (lambda: _call("sweep", 3, "out"), "spec"),
    "sweep-out-int": (lambda: _call("sweep", "h200_variants", 5), "out_dir"),
    "sweep-workers-zero": (lambda: _call("sweep", "h200_variants", "out", workers=0), "workers"),
    "sweep-chunk-float": (lambda: _call("sweep", "h200_variants", "out", chunk_size=1.5), "chunk_size"),
    "sweep-allow-text": (lambda: _call("sweep", "h200_variants", "out", allow_paths="/tmp"), "allow_paths"),
    "sweep-callback-int": (lambda: _call("sweep", "h200_variants", "out", on_progress=1), "on_progress"),
    "load-sweep-int": (lambda: _call("load_sweep", 5), "out_dir"),
    "load-sweep-missing": (lambda: _call("load_sweep", "no-such-folder"), "no-such-folder"),
    "load-sweep-file": (lambda: _call("load_sweep", "/etc/hostname"), "hostname"),
}  # fmt: skip


def _api_main(argv: list[str]) -> int:
    """Make the call `argv[1]` names and run it: exit 2 with its message for an
    archsim.ConfigError, 0 when it returns; anything else is raised (a traceback)."""
    import archsim

    make, _ = API[argv[1]]
    try:
        make()()
    except archsim.ConfigError as err:
        print(f"archsim: error: {err}", file=sys.stderr)
        return 2
    return 0


def api_cases(full: bool) -> list[Case]:
    """Every public call with wrong arguments: refused as an archsim.ConfigError naming the
    argument, never an internal exception; a few right ones run."""
    return [
        Case(
            f"api/{name}",
            ("api", name),
            expect=Expect.REFUSE if where is not None else Expect.RUN,
            where=where,
            target=_api_main,
            timeout_s=30,
        )
        for name, (_, where) in API.items()
    ]


# ---------------------------------------------------------------------------------------------- env


def _mode(path: str, mode: int):
    def make(folder: Path) -> None:
        (folder / path).mkdir(parents=True, exist_ok=True)
        os.chmod(folder / path, mode)

    return make


def _file(path: str, data: bytes = b""):
    return lambda folder: (folder / path).write_bytes(data)


def _fifo(path: str):
    return lambda folder: os.mkfifo(folder / path)


def env_cases(full: bool) -> list[Case]:
    """The variables archsim reads while it runs: odd, empty, hostile or pointing anywhere; a
    cache folder others may write is refused by name, anything else runs or is refused, never
    ends in an internal error or a hang."""
    run = (*RUN, "--json", "o.json")
    plausible = (Prop("result plausible", json_plausible("o.json", kind="run")),)
    cases: list[tuple[str, tuple[tuple[str, str], ...], Expect, object, str | None]] = [
        # the op cache and config memo folder
        ("cache-empty", (("ARCHSIM_CACHE_DIR", ""),), Expect.RUN, None, None),
        ("cache-relative", (("ARCHSIM_CACHE_DIR", "c"),), Expect.RUN, None, None),
        ("cache-deep", (("ARCHSIM_CACHE_DIR", "a/b/c/d/e/f"),), Expect.RUN, None, None),
        ("cache-a-file", (("ARCHSIM_CACHE_DIR", "f"),), Expect.RUN, _file("f"), None),
        ("cache-under-a-file", (("ARCHSIM_CACHE_DIR", "f/c"),), Expect.RUN, _file("f"), None),
        ("cache-dev-null", (("ARCHSIM_CACHE_DIR", "/dev/null"),), Expect.RUN, None, None),
        ("cache-fifo", (("ARCHSIM_CACHE_DIR", "p"),), Expect.RUN, _fifo("p"), None),
        ("cache-proc", (("ARCHSIM_CACHE_DIR", "/proc/self"),), Expect.EITHER, None, None),
        ("cache-newline", (("ARCHSIM_CACHE_DIR", "c\nd"),), Expect.RUN, None, None),
        ("cache-escape", (("ARCHSIM_CACHE_DIR", "c\x1b[2J"),), Expect.RUN, None, None),
        ("cache-long", (("ARCHSIM_CACHE_DIR", "x" * 300),), Expect.RUN, None, None),
        ("cache-very-long", (("ARCHSIM_CACHE_DIR", "/".join(["y" * 200] * 30)),), Expect.RUN, None, None),
        ("cache-read-only", (("ARCHSIM_CACHE_DIR", "ro"),), Expect.RUN, _mode("ro", 0o500), None),
        ("cache-world-writable", (("ARCHSIM_CACHE_DIR", "ww"),), Expect.REFUSE, _mode("ww", 0o777), "ww"),
        ("cache-group-writable", (("ARCHSIM_CACHE_DIR", "gw"),), Expect.REFUSE, _mode("gw", 0o770), "gw"),
        ("cache-sticky-world", (("ARCHSIM_CACHE_DIR", "st"),), Expect.REFUSE, _mode("st", 0o1777), "st"),
        ("cache-private", (("ARCHSIM_CACHE_DIR", "pv"),), Expect.RUN, _mode("pv", 0o700), None),
        ("cache-others-may-read", (("ARCHSIM_CACHE_DIR", "rd"),), Expect.RUN, _mode("rd", 0o755), None),
        *((f"no-cache-{label}", (("ARCHSIM_NO_CACHE", v),), Expect.RUN, None, None)
          for label, v in (("1", "1"), ("0", "0"), ("yes", "yes"), ("empty", ""), ("text", "\x1b[2J"))),
        # where ~/.cache is
        ("xdg-empty", (("XDG_CACHE_HOME", ""),), Expect.RUN, None, None),
        ("xdg-relative", (("XDG_CACHE_HOME", "x"), ("ARCHSIM_CACHE_DIR", "")), Expect.RUN, None, None),
        ("xdg-a-file", (("XDG_CACHE_HOME", "f"), ("ARCHSIM_CACHE_DIR", "")), Expect.RUN, _file("f"), None),
        ("xdg-world-writable", (("XDG_CACHE_HOME", "xw"), ("ARCHSIM_CACHE_DIR", "")), Expect.RUN, _mode("xw", 0o777),
         None),  # the folder archsim makes inside it is its own, 0700
        ("xdg-archsim-world-writable", (("XDG_CACHE_HOME", "xa"), ("ARCHSIM_CACHE_DIR", "")), Expect.REFUSE,
         _mode("xa/archsim", 0o777), "archsim"),
        ("home-empty", (("HOME", ""),), Expect.RUN, None, None),
        ("home-a-file", (("HOME", "f"),), Expect.RUN, _file("f"), None),
        ("home-missing", (("HOME", "/nonexistent/home"),), Expect.RUN, None, None),
        # kernels
        *((f"aot-{label}", (("ARCHSIM_AOT", v),), Expect.RUN, None, None)
          for label, v in (("off", "0"), ("on", "1"), ("text", "maybe"), ("empty", ""))),
        ("numba-cache-a-file", (("NUMBA_CACHE_DIR", "f"),), Expect.RUN, _file("f"), None),
        ("numba-cache-relative", (("NUMBA_CACHE_DIR", "n"),), Expect.RUN, None, None),
        ("numba-cache-world-writable", (("NUMBA_CACHE_DIR", "nw"),), Expect.EITHER, _mode("nw", 0o777), None),
        ("numba-disable-jit", (("NUMBA_DISABLE_JIT", "1"),), Expect.RUN, None, None),
        # the terminal and the locale
        *((f"columns-{label}", (("COLUMNS", v),), Expect.RUN, None, None)
          for label, v in (("zero", "0"), ("negative", "-5"), ("one", "1"), ("huge", "999999999"), ("text", "wide"),
                           ("float", "80.5"))),
        *((f"lines-{label}", (("LINES", v),), Expect.RUN, None, None) for label, v in (("zero", "0"), ("text", "x"))),
        ("term-dumb", (("TERM", "dumb"),), Expect.RUN, None, None),
        ("term-empty", (("TERM", ""),), Expect.RUN, None, None),
        ("term-escape", (("TERM", "\x1b[2J"),), Expect.RUN, None, None),
        ("no-color", (("NO_COLOR", "1"),), Expect.RUN, None, None),
        ("lang-c", (("LANG", "C"), ("LC_ALL", "C")), Expect.RUN, None, None),
        ("lang-unknown", (("LANG", "xx_YY.FOO"), ("LC_ALL", "xx_YY.FOO")), Expect.RUN, None, None),
        ("tz-odd", (("TZ", "Mars/Olympus_Mons"),), Expect.RUN, None, None),
        ("tmpdir-missing", (("TMPDIR", "/nonexistent/tmp"),), Expect.RUN, None, None),
        ("tmpdir-a-file", (("TMPDIR", "f"),), Expect.RUN, _file("f"), None),
        ("debug-set", (("ARCHSIM_DEBUG", "1"),), Expect.RUN, None, None),
        ("pythonioencoding-ascii", (("PYTHONIOENCODING", "ascii"),), Expect.RUN, None, None),
    ]  # fmt: skip
    out = []
    for name, env, expect, setup, where in cases:
        out.append(
            Case(
                f"env/{name}",
                run,
                env=env,
                setup=setup,  # type: ignore[arg-type]
                expect=expect,
                where=where,
                props=plausible if expect is Expect.RUN else (),
                timeout_s=60,
            )
        )
    out.append(  # --no-cache: nothing is read from the folder, so nothing is refused
        Case(
            "env/cache-world-writable-no-cache",
            (*run, "--no-cache"),
            env=(("ARCHSIM_CACHE_DIR", "ww"),),
            setup=_mode("ww", 0o777),
            expect=Expect.RUN,
            props=plausible,
            timeout_s=60,
        )
    )
    return out


# ------------------------------------------------------------------------------------------ physics


def physics_cases(full: bool) -> list[Case]:
    """Inputs no machine or model can be: each refused with the numbers that clash, before any
    step is costed; the nearest possible ones run."""
    out: list[Case] = []

    def c(name, argv, expect=Expect.REFUSE, where=None, files=(), timeout_s=30.0):
        props = (Prop("result plausible", json_plausible("o.json", kind="run")),) if expect is Expect.RUN else ()
        out.append(
            Case(f"physics/{name}", argv, files=files, expect=expect, where=where, props=props, timeout_s=timeout_s)
        )

    json_out = ("--json", "o.json")
    # an L2 larger than the main memory it caches (H200: 143,771 MiB of HBM)
    for chip in ("h200", "a100", "b200", "h100", "mi300x", "tpu_v6e"):
        for label, size in (("1TiB", "1 TiB"), ("1PiB", "1 PiB")):
            c(f"l2-{label}-{chip}", (*RUN, "--hw", chip, "--set", f"hardware.l2.capacity={size}"), where="l2.capacity")
    c("l2-just-past-hbm", (*RUN, "--set", "hardware.l2.capacity=143772 MiB"), where="l2.capacity")
    c("l2-equal-to-hbm", (*RUN, "--set", "hardware.l2.capacity=143771 MiB", *json_out), Expect.EITHER)
    c("hbm-below-l2", (*RUN, "--set", "hardware.hbm.capacity=32 MiB"), where="l2.capacity")
    # a power limit below what the chip draws at its lowest clock, idle and streaming its memory
    for chip in ("h200", "a100", "b200", "h100", "mi300x"):
        for watts in ("1 W", "10 W", "0.001 W"):
            c(f"power-{watts.replace(' ', '')}-{chip}", (*RUN, "--hw", chip, "--set", f"hardware.power.limit={watts}"),
              where="power.limit")  # fmt: skip
    # a context past the model's positions, as serving engines derive the maximum
    llama = {**HF_LLAMA}  # max_position_embeddings 8,192
    for label, fields, prompt, generate in (
        ("llama-8192-plus-1", {}, 8000, 193),
        ("llama-twice", {}, 16000, 384),
        (
            "linear-x2-past",
            {"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2}},
            8000,
            200,
        ),
        (
            "yarn-past",
            {"rope_scaling": {"rope_type": "yarn", "factor": 2, "original_max_position_embeddings": 2048}},
            4000,
            200,
        ),
        ("llama3-rope-keeps-max", {"rope_scaling": {"rope_type": "llama3", "factor": 8}}, 9000, 100),
        ("seq-length-smaller", {"seq_length": 1024}, 1000, 100),
        ("n-positions-smaller", {"n_positions": 512}, 500, 100),
        ("max-seq-len-smaller", {"max_seq_len": 2048}, 2048, 1),
        ("model-max-length-smaller", {"model_max_length": 256}, 250, 10),
    ):
        data = json.dumps({**llama, **fields})
        c(f"context-{label}", ("run", "--quiet", "--model", "config.json", "--prompt", str(prompt), "--generate",
                               str(generate)), where="maximum", files=(("config.json", data),))  # fmt: skip
    for label, fields, prompt, generate in (
        ("llama-at-max", {}, 8000, 192),
        (
            "linear-x2-within",
            {"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2}},
            8000,
            192,
        ),
        (
            "yarn-within",
            {"rope_scaling": {"rope_type": "yarn", "factor": 2, "original_max_position_embeddings": 2048}},
            4000,
            96,
        ),
        ("max-len-not-a-number", {"max_position_embeddings": "8k"}, 100, 10),
    ):
        data = json.dumps({**llama, **fields})
        c(f"context-{label}", ("run", "--quiet", "--model", "config.json", "--prompt", str(prompt), "--generate",
                               str(generate), *json_out), Expect.EITHER if "number" in label else Expect.RUN,
          files=(("config.json", data),), timeout_s=120)  # fmt: skip
    c("context-gpt2-learned", ("run", "--quiet", "--model", "config.json", "--prompt", "1000", "--generate", "25"),
      where="1,024", files=(("config.json", hf(n_positions=1024, max_position_embeddings=...)),))  # fmt: skip
    # served requests longer than the model takes, and a max_model_len past it
    cfg = (("config.json", json.dumps(llama)),)
    c("serve-request-past-max", (*SERVE, "--model", "config.json", "--prompt", "8000", "--generate", "500"),
      where="maximum", files=cfg)  # fmt: skip
    c("serve-max-model-len-past", (*SERVE, "--model", "config.json", "--max-model-len", "10000"), where="max_model_len",
      files=cfg)  # fmt: skip
    c("serve-distribution-past-max", (*SERVE, "--model", "config.json", "--prompt", "uniform:7000:9000"),
      where="maximum", files=cfg)  # fmt: skip
    # clocks off the voltage curve and other limits of the silicon
    c("clock-above-curve", (*RUN, "--set", "hardware.clock=10 GHz"), where="clock")
    c("clock-zero", (*RUN, "--set", "hardware.clock=0 GHz"), where="clock")
    c("sram-below-a-tile", (*RUN, "--set", "hardware.cores.sram.capacity=1 KiB"), where="sram.capacity")
    c("batch-not-fitting", (*RUN, "--batch", "100000", "--prompt", "8000", "--generate", "100"), Expect.REFUSE)
    return out


# ----------------------------------------------------------------------------------------- families

# mechanism fields, each with a value that turns it on: a config of a family that does not read
# them must be refused by name (archsim/config/hf_unmodelled.py), never costed as dense attention
MECHANISMS = {
    "ssm_cfg": {"d_state": 16},
    "state_size": 16,
    "ssm_state_size": 128,
    "mamba_d_state": 64,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_n_heads": 128,
    "mamba_d_head": 64,
    "mamba_head_dim": 64,
    "mamba_n_groups": 8,
    "mamba_chunk_size": 256,
    "mamba_dt_rank": 256,
    "time_step_rank": 256,
    "attn_layer_period": 8,
    "attn_layer_offset": 4,
    "attn_layer_indices": [3, 7, 11],
    "hybrid_override_pattern": "M-M-M*-M-M-",
    "layers_block_type": ["mamba", "attention"],
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "linear_attn_config": {"kda_layers": [1, 2]},
    "full_attention_interval": 4,
    "attn_type_list": [0, 0, 1],
    "index_topk": 2048,
    "index_n_heads": 64,
    "index_head_dim": 128,
    "sparse_attention_config": {"block": 64},
    "block_sparse_attention": True,
    "cross_attention_layers": [3, 8, 13],
    "add_cross_attention": True,
    "is_encoder_decoder": True,
    "sliding_window": 4096,
    "use_sliding_window": True,
    "sliding_window_pattern": 6,
    "attention_window": 512,
    "attention_types": [[["global", "local"], 16]],
    "window_size": 256,
    "local_attention": 128,
    "global_attn_every_n_layers": 3,
}


def family_cases(full: bool) -> list[Case]:
    """A known family's config carrying a field of a mechanism archsim does not model: refused
    naming the field; the same fields left off (null, false, zero, empty) and the windows the
    families read run."""
    run = (*RUN, "--model", "config.json", "--json", "o.json")
    plausible = (Prop("result plausible", json_plausible("o.json", kind="run")),)
    out = [
        Case(
            f"families/llama-{key}", run, files=(("config.json", hf(**{key: value})),), expect=Expect.REFUSE, where=key
        )
        for key, value in MECHANISMS.items()
    ]
    mixtral = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_local_experts": 8,
               "num_experts_per_tok": 2}  # fmt: skip
    for key in ("ssm_state_size", "linear_num_value_heads", "index_topk", "cross_attention_layers"):
        out.append(
            Case(
                f"families/mixtral-{key}",
                run,
                files=(("config.json", hf(**mixtral, **{key: MECHANISMS[key]})),),
                expect=Expect.REFUSE,
                where=key,
            )
        )
    off = {"off-null": None, "off-false": False, "off-zero": 0, "off-empty-list": []}
    for label, value in off.items():
        for key in ("ssm_state_size", "cross_attention_layers", "sliding_window"):
            out.append(
                Case(
                    f"families/llama-{key}-{label}",
                    run,
                    files=(("config.json", hf(**{key: value})),),
                    expect=Expect.RUN,
                    props=plausible,
                )
            )
    runs = {
        "qwen2-window-off": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "sliding_window": 4096,
                             "use_sliding_window": False, "max_window_layers": 28},
        "qwen2-window-on": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "sliding_window": 4096,
                            "use_sliding_window": True, "max_window_layers": 28},
        "mistral-window": {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 4096},
        "llama-window-turned-off": {"sliding_window": 4096, "use_sliding_window": False},
    }  # fmt: skip
    for label, fields in runs.items():
        out.append(
            Case(f"families/{label}", run, files=(("config.json", hf(**fields)),), expect=Expect.RUN, props=plausible)
        )
    return out


__all__ = ["api_cases", "env_cases", "family_cases", "physics_cases"]
