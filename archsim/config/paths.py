"""Key paths into a configuration (('hardware', 'hbm', 'stacks')): whether a path names a value of
the hardware or workload schema, and why not. `--set`, the API's parameters and a sweep's
`set:` and parameters name values this way; the loader and the sweep both check them here.
"""

from __future__ import annotations

import difflib
from functools import cache
from typing import Any, get_args, get_origin

from archsim.config.hw_schema import HardwareCfg
from archsim.config.workload_schema import WorkloadCfg

ROOTS = {"hardware": HardwareCfg, "workload": WorkloadCfg}
MEMORY_SECTION = ("hardware", "hbm")  # typed as the default model's section; `hbm.model` picks another


@cache
def memory_keys() -> frozenset[str]:
    """The keys of every main-memory model's section (archsim/hardware/memory_models)."""
    from archsim.config.declared import memory_section
    from archsim.hardware import memory_models

    return frozenset(key for name in memory_models.names() for key in memory_section(name).model_fields)


def path_problem(path: tuple[str, ...]) -> str | None:
    """Why `path` (e.g. ('hardware', 'hbm', 'stacks')) names no value of a config; None if it does."""
    from archsim.config.derived import is_derived

    if path[0] == "hardware" and is_derived(path[1:]):  # a total the loader turns into its parameters
        return None
    model: Any = ROOTS.get(path[0])
    if model is None:
        return f"must start with hardware. or workload. (got {'.'.join(path)!r})"
    for i, part in enumerate(path[1:], start=1):
        where = ".".join(path[:i])
        fields = getattr(model, "model_fields", None)
        if fields is None:
            return f"{where} is a value, it has no key {part!r}"
        if part not in fields and path[:i] == MEMORY_SECTION and len(path) == i + 1 and part in memory_keys():
            return None  # a key of another memory model: the section is checked as its `model` says
        if part not in fields:
            known = sorted(set(fields) | memory_keys()) if path[:i] == MEMORY_SECTION else sorted(fields)
            hint = difflib.get_close_matches(part, known, n=1)
            return f"{where} has no key {part!r}" + (
                f"; did you mean {hint[0]!r}?" if hint else f"; expected one of {', '.join(known)}"
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
