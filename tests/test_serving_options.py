"""The options of a serving run (archsim/serving/options.py): one record built from the API's
keywords or the command's flags, checked in one place with each bad option named; the setup
built from it (archsim/serving/build.py)."""

import argparse
import dataclasses
from pathlib import Path

import pytest

import archsim
from archsim.cli import build_parser, main
from archsim.commands.serve_flags import FLAGS
from archsim.errors import ConfigError
from archsim.serving.build import ServeInputs, build_setup
from archsim.serving.host import PROFILES
from archsim.serving.options import (
    HOST_PROFILES,
    KEYWORDS,
    POLICIES,
    PREEMPTIONS,
    DisaggregationOptions,
    KvPoolOptions,
    LayoutOptions,
    SchedulerOptions,
    ServeOptions,
    SloOptions,
    SpeculativeOptions,
)
from archsim.serving.scheduler import Policy, Preemption

ROOT = Path(__file__).resolve().parents[1]


def test_keywords_fill_the_sub_records():
    o = ServeOptions.from_keywords(
        policy="sarathi", kv_blocks=300, tp=2, host="none", spec_tokens=4, mtp_layers=1, spec_acceptance=0.7,
        decode_instances=2, slo_ttft_s=0.2, attainment=0.5,
    )  # fmt: skip
    assert o.scheduler == SchedulerOptions(policy="sarathi")
    assert o.kv_pool == KvPoolOptions(kv_blocks=300)
    assert o.layout == LayoutOptions(tp=2)
    assert o.host == "none"
    assert o.speculative == SpeculativeOptions(mtp_layers=1, tokens=4, acceptance=0.7)
    assert o.disaggregation == DisaggregationOptions(decode_instances=2)  # prefill: 1 instance of --hw
    assert o.slo == SloOptions(ttft_s=0.2, attainment=0.5)
    # speculative decoding and disaggregation are off unless a draft, MTP heads or an instance
    # count or chip of either side is given; a None keyword is the default
    plain = ServeOptions.from_keywords(spec_acceptance=0.7, prefill_instances=None)
    assert plain.speculative is None and plain.disaggregation is None
    assert ServeOptions.from_keywords() == ServeOptions()
    with pytest.raises(TypeError, match="unexpected keyword argument 'polcy'"):
        ServeOptions.from_keywords(polcy="vllm")


def test_every_problem_is_named_by_its_keyword():
    """All at once, each under the keyword a user gives, in keyword order."""
    o = ServeOptions.from_keywords(
        policy="static", preemption="swap", max_num_seqs=0, gpu_memory_utilization=1e-4, tp=2, instances=2,
        step_resolution=65, draft="llama3_8b", mtp_layers=1, decode_instances=2, slo_ttft_s=-1.0, attainment=True,
    )  # fmt: skip
    with pytest.raises(ConfigError) as err:
        o.check()
    assert [str(p) for p in err.value.problems] == [
        "archsim.serve: max_num_seqs: must be 1 to 1,048,576 (got 0)",
        "archsim.serve: preemption: the static policy never preempts: swap preemption is for vllm and sarathi",
        "archsim.serve: gpu_memory_utilization: must be at least 0.001 of the memory (got 0.0001)",
        "archsim.serve: step_resolution: must be 0 to 64 (got 65)",
        "archsim.serve: mtp_layers: give a draft model or MTP heads for speculative decoding, not both",
        "archsim.serve: spec_acceptance: speculative decoding needs an acceptance rate from 0 to 1 (got none)",
        "archsim.serve: policy: speculative decoding needs a paged policy (vllm, sarathi, trtllm), not static",
        "archsim.serve: policy: static batching cannot be disaggregated; use the vllm, sarathi or orca policy",
        "archsim.serve: instances: instances are for co-located serving; give prefill and decode instances instead",
        "archsim.serve: tp: tp, pp and ep lay out co-located instances; a disaggregated one is TP over its chips",
        "archsim.serve: slo_ttft_s: must be in (0, 86400] (got -1.0)",
        "archsim.serve: attainment: must be a number (got True)",
    ]
    ServeOptions().check()  # the defaults are fine


@pytest.mark.parametrize(
    "keywords,problem",
    [
        ({"policy": "fifo"}, "policy: must be one of vllm, sarathi, trtllm, orca, static (got 'fifo')"),
        ({"host": "tgi"}, "host: must be one of vllm, vllm_async, sglang, trtllm, none (got 'tgi')"),
        ({"max_batched_tokens": 2.5}, "max_batched_tokens: must be a whole number (got 2.5)"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization: must be in (0, 1] (got 1.5)"),
        ({"swap_space_bytes": 0.0}, "swap_space_bytes: must be in (0, 1.1259e+15] (got 0.0)"),
        ({"kv_offload_bytes": float("nan")}, "kv_offload_bytes: must be a number (got nan)"),
        ({"max_model_len": 0}, "max_model_len: must be 1 to 16,777,216 (got 0)"),
        ({"mtp_layers": 1, "spec_acceptance": 1.5}, "spec_acceptance: speculative decoding needs an acceptance"),
        ({"mtp_layers": 1, "spec_acceptance": 0.5, "spec_tokens": 65}, "spec_tokens: must be 1 to 64 (got 65)"),
        ({"prefill_instances": 1025}, "prefill_instances: must be 1 to 1,024 (got 1025)"),
        ({"prefix_caching": "no"}, "prefix_caching: must be True or False (got 'no')"),
    ],
)
def test_a_bad_option_is_a_config_error(keywords, problem):
    with pytest.raises(ConfigError) as err:
        ServeOptions.from_keywords(**keywords).check()
    assert problem in str(err.value)


def test_the_api_checks_options_before_reading_any_file():
    """A bad option is reported as such even where the chip named does not exist."""
    with pytest.raises(ConfigError, match=r"archsim\.serve: policy: must be one of"):
        archsim.serve("no_such_chip", "llama3_8b", "no_such_trace", policy="fifo")
    with pytest.raises(ConfigError, match=r"archsim\.serve: attainment: must be in"):
        archsim.serve("no_such_chip", "llama3_8b", "no_such_trace", attainment=0.0)
    with pytest.raises(ConfigError, match="not both"):
        archsim.serve("h200", "llama3_8b", "no_such_trace", options=ServeOptions(), policy="vllm")


def test_options_as_a_record_serve_as_the_keywords_do():
    requests = archsim.generate_requests(20.0, 12, 64, 4, seed=3)
    kw = archsim.serve("h200", "llama3_8b", requests, slo_ttft_s=0.2, policy="sarathi", host="none")
    options = archsim.ServeOptions(
        scheduler=archsim.SchedulerOptions(policy="sarathi"), host="none", slo=archsim.SloOptions(ttft_s=0.2)
    )
    rec = archsim.serve("h200", "llama3_8b", requests, options=options)
    assert rec.config_hash == kw.config_hash
    assert rec.metrics == kw.metrics


def test_the_setup_and_its_resolved_part():
    hw, wl = archsim.load_system("h200"), archsim.load_workload("llama3_8b")
    setup, serving = build_setup(ServeInputs(hw, wl), ServeOptions())
    assert setup.scheduler.policy is Policy.VLLM and setup.scheduler.preemption is Preemption.RECOMPUTE
    assert setup.host.name == "vllm" and setup.parallelism is None and setup.speculation is None
    assert setup.swap_space_bytes == 4 * 2**30  # vLLM's --swap-space default, 4 GiB
    assert serving["max_batched_tokens"] == 8192  # vLLM's default for the vllm policy
    assert serving["swap_space_bytes"] is None  # recorded only under swap preemption
    sarathi, _ = build_setup(ServeInputs(hw, wl), ServeOptions.from_keywords(policy="sarathi"))
    assert sarathi.scheduler.max_batched_tokens == 512  # Sarathi-Serve's small budget
    mtp = ServeOptions.from_keywords(mtp_layers=1, spec_tokens=2, spec_acceptance=0.8, decode_instances=2)
    setup, serving = build_setup(ServeInputs(hw, wl), mtp)
    assert setup.speculation is not None and setup.speculation.mtp and setup.speculation.tokens == 2
    assert serving["speculation"] == {"draft": None, "mtp_layers": 1, "tokens": 2, "acceptance": 0.8}
    assert serving["disaggregation"]["decode_instances"] == 2 and serving["prefill_hardware"] is None
    assert list(serving)[-2:] == ["prefill_hardware", "decode_hardware"]  # as the config hash has them


def test_the_command_names_a_bad_option_by_its_flag(capsys):
    assert main(["serve", "--policy", "static", "--decode-instances", "2"]) == 2
    err = capsys.readouterr().err
    assert "archsim serve: --policy: static batching cannot be disaggregated" in err
    assert main(["serve", "--mtp-layers", "1", "--tp", "1", "--prefill-instances", "1"]) == 2
    err = capsys.readouterr().err
    assert "archsim serve: --spec-acceptance: speculative decoding needs an acceptance rate" in err
    assert "archsim serve: --tp: tp, pp and ep lay out co-located instances" in err


def test_every_keyword_has_its_flag():
    parser = build_parser("serve")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["serve"]
    flags = {s for action in sub._actions for s in action.option_strings}
    assert set(FLAGS) == set(KEYWORDS)
    assert {key: flag for key, flag in FLAGS.items() if flag not in flags} == {}
    fields = {f.name for f in dataclasses.fields(ServeOptions)}
    assert {group or name for group, name in KEYWORDS.values()} == fields
    # the names the checks accept are those the simulator knows
    assert set(HOST_PROFILES) == set(PROFILES) and tuple(p.value for p in Policy) == POLICIES
    assert tuple(p.value for p in Preemption) == PREEMPTIONS
