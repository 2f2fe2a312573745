"""archsim: a cycle-approximate accelerator architecture simulator for LLM inference.

The pipeline (see README): YAML configs -> typed hardware and workload -> operator graph
-> compiled Program per op -> event-driven engine -> step and run results -> reports.
"""

__version__ = "0.1.0"
