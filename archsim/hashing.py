"""A frozen dataclass's hash worked out once per object.

Records that key memo tables (a chip, an op) are hashed on every lookup, and a dataclass's own
hash walks every field again each time (a chip's nested records: about a hundred values). This
one is the same function of the same fields (those that take part in equality), kept on the
object after its first use. It never leaves the process with the object: string hashes differ
between processes, so a pickled or copied record (`record_state`) is hashed afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from functools import cache
from operator import attrgetter

_KEY = "_cached_hash"


def cached_hash(record: object) -> int:
    """hash() of the record's compared fields, computed once."""
    value = record.__dict__.get(_KEY)
    if value is None:
        cls: type = type(record)
        value = hash(_compared_values(cls)(record))
        object.__setattr__(record, _KEY, value)
    return value


@cache
def _compared_values(cls: type) -> Callable[[object], tuple]:
    """A function of a record of `cls` that returns the tuple of its compared fields' values."""
    names = [name for name, compare in _compared(cls).items() if compare]
    if len(names) > 1:
        return attrgetter(*names)
    return lambda record: tuple(getattr(record, name) for name in names)  # attrgetter of one is no tuple


@cache
def _compared(cls: type) -> dict[str, bool]:
    """Each field of a dataclass and whether it takes part in equality (and so in the hash)."""
    return {f.name: f.compare for f in fields(cls)}


def copy_with(record, **changes):
    """`dataclasses.replace(record, **changes)` without running `__init__` again (graphs copy a
    record for every op of every step they build): the fields copied and `changes` set; the
    cached hash is kept when only fields that take no part in it change."""
    compared = _compared(type(record))
    if not changes.keys() <= compared.keys():
        unknown = sorted(set(changes) - set(compared))
        raise TypeError(f"{type(record).__name__} has no field {unknown[0]!r}")
    out = object.__new__(type(record))
    state = out.__dict__  # a frozen record's fields are plain entries of its __dict__
    state.update(record.__dict__)
    state.update(changes)
    for name in changes:
        if compared[name]:
            state.pop(_KEY, None)
            break
    return out


def record_state(record: object) -> dict:
    """The record's fields for pickle and copy, without its cached hash."""
    state = dict(record.__dict__)
    state.pop(_KEY, None)
    return state
