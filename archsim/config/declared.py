"""Config models built from the hardware records' declarations (archsim/hardware/params.py).

`section_model(Record)` is the pydantic model of a chip file's section of that record: one field
per declared parameter, under its key, of its unit's type (archsim/config/fields.py), with its
description and the record field's default (an omittable key: null), and a validator per `Check`
the record lists. Imported with the schemas only, where a file is validated.
"""

from __future__ import annotations

from dataclasses import MISSING
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, create_model, field_validator, model_serializer

from archsim.config import fields as units
from archsim.config.fields import Strict
from archsim.hardware import memory_models
from archsim.hardware.params import Check, declared


def section_model(
    record: type,
    name: str,
    base: type[BaseModel] = Strict,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    validators: dict[str, Any] | None = None,
) -> type[BaseModel]:
    """The model of a section that gives `record`'s declared parameters, with the keys a record
    does not declare one to one (`before` and `after` them, each `(annotation, Field)`) and their
    `validators` (pydantic's)."""
    model_fields: dict[str, Any] = dict(before or {})
    for f, p in declared(record):
        kind: Any = getattr(units, p.unit)
        if p.omittable:
            model_fields[p.key] = (kind | None, Field(None, description=p.description))
        elif f.default is MISSING:
            model_fields[p.key] = (kind, Field(description=p.description))
        else:
            model_fields[p.key] = (kind, Field(f.default, description=p.description))
    model_fields.update(after or {})
    checks = {f"_check_{c.key}": _validator(c) for c in getattr(record, "checks", ())}
    return create_model(
        name, __base__=base, __validators__={**checks, **(validators or {})}, __doc__=record.__doc__, **model_fields
    )


def _validator(check: Check) -> Any:
    def run(cls, value: Any, info: ValidationInfo) -> Any:
        why = check.rule(value, info.data)
        if why is not None:
            raise ValueError(why)
        return value

    return field_validator(check.key)(run)


class MemoryCfg(Strict):
    """A main-memory section: its `model` is omitted from the resolved config where it is the
    default, so that files written before models existed keep their config hash."""

    @model_serializer(mode="wrap")
    def _omit_default_model(self, handler):
        out = handler(self)
        if out.get("model") == memory_models.DEFAULT:
            del out["model"]
        return out


@cache
def memory_section(name: str) -> type[BaseModel]:
    """The model of an `hbm: {model: NAME, ...}` section: `model` and the model's parameters."""
    model_key = (Literal[name], Field(name, description="the memory model: archsim/hardware/memory_models/<model>.py"))
    title = "".join(part.title() for part in name.split("_")) + "Cfg"
    return section_model(memory_models.record(name), title, MemoryCfg, before={"model": model_key})
