"""Host and framework time per step: what a serving engine's CPU does between the GPU's steps
(scheduling, preparing inputs, launching the step's CUDA graph, processing sampled tokens,
detokenising and streaming them), as named software profiles. Seconds.

A step's host work is `step_s` + `per_request_s` x sequences in the step + `per_token_s` x
tokens emitted. Without overlap the engine runs it between GPU steps, so a step takes GPU + host.
With asynchronous scheduling (NanoFlow's overlap; SGLang's zero-overhead scheduler, vLLM's
--async-scheduling, TensorRT-LLM's overlap scheduler) the host prepares step n + 1 while the GPU
runs step n: a step takes max(GPU, host) + `exposed_s`, the part that still serialises (the
sampled tokens' copy back and the launch). The serving results report the host's share of the
time between tokens.

Profiles and their sources (vLLM issues and pull requests on github.com/vllm-project/vllm):

* `vllm`: vLLM V1 with synchronous scheduling. 1.5 ms a step: a Llama-3.2-1B decode, about a
  millisecond of GPU work on a Hopper GPU, served at batch 1 with a TPOT of 2.73 ms (PR 17866,
  May 2025); 16 us per request: the gap between two decode steps of Llama-2-7B at batch 256 was
  5-6 ms (issue 10634, Nov 2024), (5.5 - 1.5) ms / 256.
* `vllm_async`: the same work overlapped (--async-scheduling, PR 19970, June 2025); 0.16 ms stays
  exposed: the gap at batch 256 fell to 150-170 us with the step prepared ahead (PR 11133).
* `sglang`: SGLang's overlap scheduler (default since v0.4, Dec 2024: the CPU prepares the next
  batch while the GPU runs), host work as vLLM's (both schedulers are Python), the exposed part
  as vllm_async's.
* `trtllm`: TensorRT-LLM's C++ executor with its overlap scheduler (default in its PyTorch
  backend: the CPU work of step n runs while the GPU computes step n + 1); a tenth of vLLM's host
  work (a C++ runtime against Python: an estimate), the exposed part as vllm_async's.
* `none`: the bare GPU step, as `archsim run` times it.

The sampler's kernels (softmax, top-k/top-p over the vocabulary) are not in the step's op graph;
the measured gaps above include them, so the fixed cost stands for them too. Detokenising and
streaming run in another process in all three engines (vLLM V1's API server, SGLang's
detokenizer manager, TensorRT-LLM's postprocess workers) and delay no step: `per_token_s` is 0
in every profile, kept for engines that do them in the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HostProfile:
    name: str
    step_s: float  # host work per step
    per_request_s: float  # per sequence in the step
    per_token_s: float  # per token emitted (sampled-token processing, detokenise, stream)
    overlap: bool  # host work of the next step runs under this GPU step
    exposed_s: float = 0.0  # with overlap: the part that still serialises each step

    def host_s(self, sequences: int, emitted: int) -> float:
        """Host work of a step of `sequences` sequences emitting `emitted` tokens."""
        return self.step_s + self.per_request_s * sequences + self.per_token_s * emitted

    def wall_s(self, gpu_s: float, sequences: int, emitted: int) -> float:
        """Time of a step whose GPU work takes `gpu_s`."""
        host = self.host_s(sequences, emitted)
        if self.overlap:
            return max(gpu_s, host) + self.exposed_s
        return gpu_s + host

    def wall_series_s(self, gpu_s: np.ndarray, sequences: int, emitted: int) -> np.ndarray:
        """wall_s of each of a run of steps of the same batch."""
        host = self.host_s(sequences, emitted)
        if self.overlap:
            return np.maximum(gpu_s, host) + self.exposed_s
        return gpu_s + host


VLLM_STEP_S = 1.5e-3
VLLM_PER_REQUEST_S = 16e-6
OVERLAP_EXPOSED_S = 0.16e-3

PROFILES = {
    p.name: p
    for p in (
        HostProfile("none", 0.0, 0.0, 0.0, overlap=False),
        HostProfile("vllm", VLLM_STEP_S, VLLM_PER_REQUEST_S, 0.0, overlap=False),
        HostProfile("vllm_async", VLLM_STEP_S, VLLM_PER_REQUEST_S, 0.0, overlap=True, exposed_s=OVERLAP_EXPOSED_S),
        HostProfile("sglang", VLLM_STEP_S, VLLM_PER_REQUEST_S, 0.0, overlap=True, exposed_s=OVERLAP_EXPOSED_S),
        HostProfile(
            "trtllm", VLLM_STEP_S / 10, VLLM_PER_REQUEST_S / 10, 0.0, overlap=True, exposed_s=OVERLAP_EXPOSED_S
        ),
    )
}
DEFAULT_PROFILE = "vllm"
NO_HOST = PROFILES["none"]


def host_profile(name: str) -> HostProfile:
    """The named profile; ValueError naming the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown host profile {name!r}; known: {', '.join(PROFILES)}") from None
