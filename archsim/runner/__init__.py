"""Runners: a generation (prefill, then decode with a growing KV cache) on top of the engine."""
