"""A serving engine's defaults as vLLM ships them (vllm/config: gpu_memory_utilization,
max_num_batched_tokens, max_num_seqs, block_size), shared by run's memory plan
(archsim/runner/memory.py), the serving scheduler, `archsim serve`'s flags and the Python API.
Imports nothing, so the command line can name them at start-up."""

GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default --gpu-memory-utilization
MAX_BATCHED_TOKENS = 8192  # vLLM's default max_num_batched_tokens for an online server
MAX_NUM_SEQS = 256  # vLLM's default max_num_seqs
BLOCK_SIZE = 16  # tokens per KV block, vLLM's default
