"""What a simulation takes, as the Python API hands it out: `Hardware` (a chip or multi-chip
system) and `Workload` (model, dtypes, scenario, fusion), each validated like a file.

Both are read from a shipped name, a YAML path or a mapping holding what such a file would,
and changed only by `with_params` (dotted paths, as a sweep spec names them). Every change goes
into the document before validation, so the same schemas check it with the same messages as a
file: `'8 Gbps'` parsed, `-1` refused, an SRAM too small for any tile reported. A problem in a
value given here is located at where it was given (`with_params: hbm.data_rate: ...`), one in
the file at its `file:line`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Self, TypeVar

from archsim.api import arguments
from archsim.config.loader import build, extended, read_config
from archsim.config.resolved import config_hash
from archsim.config.yamlfile import KeyPath, YamlDoc
from archsim.errors import ConfigError
from archsim.graph.model import Workload as FrozenWorkload
from archsim.hardware import System

PYTHON_SOURCE = "<python>"  # the file name of a document given as a mapping


class _Validated:
    """A document, what it was validated into, and its resolved (canonical-unit) configuration."""

    ROOT = ""
    __slots__ = ("_config", "_doc", "_value", "max_context", "warnings")

    def __init__(
        self,
        doc: YamlDoc,
        value: Any,
        config: dict,
        warnings: tuple[str, ...] = (),
        max_context: tuple[int, str] | None = None,
    ):
        self._doc, self._value, self._config, self.warnings = doc, value, config, warnings
        self.max_context = max_context  # a Workload's longest sequence and where that bound is from

    @property
    def config(self) -> dict:
        """The resolved configuration (a copy): what `--json` records and the hash is taken of."""
        return copy.deepcopy(self._config)

    @property
    def config_hash(self) -> str:
        return config_hash(self._config)

    @property
    def source(self) -> str:
        """The file it was read from (`<python>` for a mapping)."""
        return self._doc.path

    def with_params(self, params: Mapping[str, Any], where: str = "with_params") -> Self:
        """A copy with values set at dotted paths, validated again (see `with_params`)."""
        return with_params(self, params, where)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._config == self._config

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.config_hash))


_V = TypeVar("_V", bound=_Validated)  # Hardware or Workload: what goes in comes out


class Hardware(_Validated):
    """A chip or a system of identical chips, validated like a `hw_configs/` file."""

    ROOT = "hardware"
    __slots__ = ()

    @property
    def system(self) -> System:
        """The frozen hardware model the simulator runs."""
        return self._value

    @property
    def name(self) -> str:
        return self._value.chip.name

    @property
    def chips(self) -> int:
        return self._value.chips

    def __repr__(self) -> str:
        chips = f" x{self.chips}" if self.chips > 1 else ""
        return f"Hardware({self.name}{chips}, from {self.source}, config {self.config_hash})"


class Workload(_Validated):
    """A model with its dtypes, scenario and fusion profile, validated like a `workloads/` file."""

    ROOT = "workload"
    __slots__ = ()

    @property
    def workload(self) -> FrozenWorkload:
        """The frozen workload the simulator runs."""
        return self._value

    @property
    def name(self) -> str:
        return self._value.model.name

    def __repr__(self) -> str:
        s = self._value.scenario
        return (
            f"Workload({self.name}, batch {s.batch}, prompt {s.prompt_tokens}, generate {s.output_tokens}, "
            f"from {self.source}, config {self.config_hash})"
        )


def flatten(params: Mapping[str, Any], prefix: KeyPath = ()) -> list[tuple[KeyPath, Any]]:
    """`{"hbm": {"data_rate": v}, "clock": c}` or `{"hbm.data_rate": v}` -> [(('hbm', 'data_rate'), v), ...]."""
    out: list[tuple[KeyPath, Any]] = []
    for key, value in params.items():
        if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
            raise ConfigError.single("with_params", "", f"a parameter is a dotted path of keys (got {key!r})")
        path = prefix + tuple(key.split("."))
        if isinstance(value, Mapping):
            out += flatten(value, path)
        else:
            out.append((path, value))
    return out


def _read(name_or_data: object, root: str, where: str) -> YamlDoc:
    """The document named or given, laid over the files it extends (a mapping's `extends` paths
    are found from the working directory)."""
    given = arguments.name_or_path(where, "name_or_path", name_or_data)
    if isinstance(given, Mapping):
        return extended(YamlDoc(PYTHON_SOURCE, copy.deepcopy(dict(given)), {(): None}), root)  # no lines
    return read_config(given, root)


def _build(
    cls: type[_V],
    doc: YamlDoc,
    params: list[tuple[KeyPath, Any]],
    where: str,
    warnings: tuple[str, ...] = (),
    max_context: tuple[int, str] | None = None,
) -> _V:
    """Apply `params` to `doc`, validate, and build (`loader.build`); ConfigError with every problem."""
    params = [(p[1:] if len(p) > 1 and p[0] == cls.ROOT else p, v) for p, v in params]  # "hardware.hbm.x", as --set
    value, config, edited = build(cls.ROOT, doc, params, where)
    return cls(edited, value, config, tuple(warnings), max_context)


def load_system(
    name_or_path: str | os.PathLike | Mapping, params: Mapping[str, Any] | None = None, /, **overrides
) -> Hardware:
    """A shipped chip (`"h200"`), a hardware YAML file, or a mapping of what such a file holds,
    with values set by dotted path (`params`) or by section (`hbm={"data_rate": "8 Gbps"}`)."""
    given = flatten(arguments.mapping("archsim.load_system", "params", params)) + flatten(overrides)
    return _build(Hardware, _read(name_or_path, "hardware", "archsim.load_system"), given, "load_system")


def load_workload(
    name_or_path: str | os.PathLike | Mapping,
    params: Mapping[str, Any] | None = None,
    /,
    *,
    hf_config: str | None = None,
    hf_dtypes: bool = False,
    **overrides,
) -> Workload:
    """A shipped workload (`"llama3_8b"`), a workload YAML file, or a mapping; values set as in
    `load_system` (`scenario={"batch": 8}`). `hf_config`: a Hugging Face `config.json` whose
    model replaces the file's, the scenario and dtypes kept (`hf_dtypes`: the checkpoint's
    formats, torch_dtype and quantization_config, replace the dtypes too); what archsim does not
    model of it is listed in `.warnings`."""
    where = "archsim.load_workload"
    doc = _read(name_or_path, "workload", where)
    given = flatten(arguments.mapping(where, "params", params)) + flatten(overrides)
    arguments.flag(where, "hf_dtypes", hf_dtypes)
    warnings: tuple[str, ...] = ()
    max_context = None
    if hf_config is not None:
        hf_config = arguments.path(where, "hf_config", hf_config)
        from archsim.config.hf import load_hf_config, model_cfg

        hf = load_hf_config(hf_config)
        if hf.unmodelled:
            warnings = (f"{hf_config}: archsim does not model: {'; '.join(hf.unmodelled)}",)
        data = {**doc.data, "name": hf.model.name, "model": model_cfg(hf.model)}
        if hf_dtypes and hf.dtypes:
            data["dtypes"] = hf.dtypes
        doc = replace(doc, data=data)
        if hf.max_model_len is not None:
            length, field = hf.max_model_len
            max_context = (length, f"{field} of {hf_config}")
    return _build(Workload, doc, given, "load_workload", warnings, max_context)


def with_params(obj: _V, params: Mapping[str, Any], where: str = "with_params") -> _V:
    """A copy of `obj` with each value set at its dotted path (`{"hbm.data_rate": "8 Gbps"}`,
    `{"scenario.batch": 8}`), validated again as a file would be; ConfigError naming every bad
    path or value, located at `where`."""
    if not isinstance(obj, _Validated):
        raise arguments.refusal(
            "archsim.with_params",
            "obj",
            f"must be a Hardware or a Workload from archsim.load_system or load_workload (got {type(obj).__name__})",
        )
    if not isinstance(where, str) or not where:
        raise arguments.refusal("archsim.with_params", "where", f"must be a non-empty string (got {where!r:.60})")
    params = arguments.mapping("archsim.with_params", "params", params)
    return _build(type(obj), obj._doc, flatten(params), where, obj.warnings, obj.max_context)


def _as_checked(value: object, where: str, key: str, checked: type, frozen: tuple[type, str], load, made_by: str):
    """`value` if it is the `checked` record, else loaded from a name, path or mapping by
    `load`; a `frozen` record built elsewhere is refused, as nothing has validated it, and so is
    anything else; `frozen` is that record's type and what a message calls it."""
    if isinstance(value, checked):
        return value
    name = f"archsim.{checked.__name__}"
    if isinstance(value, frozen[0]):
        why = f"pass an {name} ({made_by}, with_params): {frozen[1]} built directly is not validated"
        raise arguments.refusal(where, key, why)
    if not isinstance(value, (str, os.PathLike, Mapping)):
        raise arguments.refusal(
            where, key, f"must be an {name}, a shipped name, a path or a mapping (got {type(value).__name__})"
        )
    return load(value)


def as_hardware(value: object, where: str = "archsim.run", key: str = "hardware") -> Hardware:
    """A Hardware as given, or loaded (`_as_checked`); a System built directly is refused."""
    return _as_checked(value, where, key, Hardware, (System, "a System"), load_system, "archsim.load_system")


def as_workload(value: object, where: str = "archsim.run", key: str = "workload") -> Workload:
    """A Workload as given, or loaded (`_as_checked`); a workload built directly is refused."""
    return _as_checked(
        value, where, key, Workload, (FrozenWorkload, "a workload"), load_workload, "archsim.load_workload"
    )
