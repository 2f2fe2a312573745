"""Operator graphs of LLM steps: ops, the model description and the step builder."""
