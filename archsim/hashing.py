"""A frozen dataclass's hash worked out once per object.

Records that key memo tables (a chip, an op) are hashed on every lookup, and a dataclass's own
hash walks every field again each time (a chip's nested records: about a hundred values). This
one is the same function of the same fields (those that take part in equality), kept on the
object after its first use. It never leaves the process with the object: string hashes differ
between processes, so a pickled or copied record (`record_state`) is hashed afresh.
"""

from __future__ import annotations

from dataclasses import fields

_KEY = "_cached_hash"


def cached_hash(record: object) -> int:
    """hash() of the record's compared fields, computed once."""
    value = record.__dict__.get(_KEY)
    if value is None:
        value = hash(tuple(getattr(record, f.name) for f in fields(record) if f.compare))  # type: ignore[arg-type]
        object.__setattr__(record, _KEY, value)
    return value


def record_state(record: object) -> dict:
    """The record's fields for pickle and copy, without its cached hash."""
    state = dict(record.__dict__)
    state.pop(_KEY, None)
    return state
