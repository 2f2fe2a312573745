"""Key paths into a configuration (('hardware', 'hbm', 'stacks')): whether a path names a value of
the hardware or workload schema, and why not. `--set`, the API's parameters and a sweep's
`set:` and parameters name values this way; the loader and the sweep both check them here.
"""

from __future__ import annotations

import difflib
from typing import Any, get_args, get_origin

from archsim.config.hw_schema import HardwareCfg
from archsim.config.workload_schema import WorkloadCfg

ROOTS = {"hardware": HardwareCfg, "workload": WorkloadCfg}


def path_problem(path: tuple[str, ...]) -> str | None:
    """Why `path` (e.g. ('hardware', 'hbm', 'stacks')) names no value of a config; None if it does."""
    model: Any = ROOTS.get(path[0])
    if model is None:
        return f"must start with hardware. or workload. (got {'.'.join(path)!r})"
    for i, part in enumerate(path[1:], start=1):
        where = ".".join(path[:i])
        fields = getattr(model, "model_fields", None)
        if fields is None:
            return f"{where} is a value, it has no key {part!r}"
        if part not in fields:
            hint = difflib.get_close_matches(part, list(fields), n=1)
            return f"{where} has no key {part!r}" + (
                f"; did you mean {hint[0]!r}?" if hint else f"; expected one of {', '.join(sorted(fields))}"
            )
        ann = fields[part].annotation
        if get_origin(ann) is dict:  # a mapping such as k_per_cycle: one of its keys is the value
            keys = [str(k) for k in get_args(get_args(ann)[0])]
            rest = path[i + 1 :]
            if len(rest) != 1:
                return f"{where}.{part} is a mapping: give one of its keys ({', '.join(keys)})"
            if keys and rest[0] not in keys:
                return f"{where}.{part} has no key {rest[0]!r}; expected one of {', '.join(keys)}"
            return None
        model = next((a for a in (get_args(ann) or (ann,)) if hasattr(a, "model_fields")), None)
    if hasattr(model, "model_fields") and len(path) > 1:
        return f"{'.'.join(path)} is a section, not a value"
    return None
