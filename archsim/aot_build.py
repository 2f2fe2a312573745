"""Compile archsim's entry kernels ahead of time into one extension module (archsim/aot.py says
why and how it is found and loaded): run as `python -m archsim.aot_build OUT_FOLDER`, in a child
process, as Numba, its compiler and the C toolchain load here.

The entry kernels are those made with `jit.njit_entry` in the package's modules (found by that
decorator in their source); each is compiled for the types its annotations name
(`aot.signature`), a record argument (MemoryParams) exported as a float64 array of its fields.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from archsim import aot, jit

ENTRY_DECORATOR = "@njit_entry"


def entry_modules(root: Path | None = None) -> list[str]:
    """The archsim modules that define entry kernels."""
    root = root or Path(__file__).resolve().parent
    names = []
    for path in sorted(root.rglob("*.py")):
        if ENTRY_DECORATOR in path.read_text(encoding="utf-8"):
            parts = path.relative_to(root.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [name for name in names if name != __name__]


def build(out: Path) -> Path:
    """Compile every entry kernel into the module `aot.MODULE` in folder `out`; its path."""
    import warnings

    jit.load()
    import numba
    from numba import types
    from numba.core.codegen import AOTCPUCodegen

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba.pycc's pending deprecation: the module is what counts
        from numba.pycc import CC

    cc = CC(aot.MODULE)
    cc.output_dir = str(out)
    # for this machine as Numba's JIT compiles: its CPU and the features it reports (by default
    # the ahead-of-time compiler takes the features a CPU model has, which a virtual machine may
    # not offer)
    cc.target_cpu = "host"
    AOTCPUCodegen._customize_tm_features = lambda self: self._get_host_cpu_features()  # type: ignore[method-assign]
    _release_the_gil()
    kernel_types = {"I": types.int64[::1], "F": types.float64[::1], "G": types.float64[:, ::1], "i": types.int64}
    kernel_types |= {"f": types.float64, "b": types.boolean}
    for module_name in entry_modules():
        importlib.import_module(module_name)
    for qualified in sorted(jit.entry_names()):
        module, name = qualified.rsplit(".", 1)
        kernel = getattr(importlib.import_module(module), name)
        codes, record = aot.signature(kernel.py_func)
        fields = len(getattr(record, "_fields", ()))
        types_of = kernel_types | ({"P": numba.typeof(record(*[0.0] * fields))} if record else {})
        arg_types = tuple(types_of[c] for c in codes)
        kernel.compile(arg_types)
        returns = kernel.overloads[arg_types].signature.return_type
        export_types = tuple(types.float64[::1] if c == "P" else types_of[c] for c in codes)
        cc.export(aot.export_name(qualified), returns(*export_types))(_export_function(kernel, codes, record))
    cc.compile()
    path = aot.module_file(out)
    assert path is not None, f"numba.pycc wrote no {aot.MODULE} into {out}"
    return path


def _release_the_gil() -> None:
    """Make the module's exported functions release the GIL while they run, as Numba's JIT does
    for archsim's kernels (`nogil`, archsim/jit.py): the command line's watchdog thread must run
    during a long kernel to ask it to stop (archsim/stopping.py). numba.pycc builds each export
    under flags of its own making, which take no such option: they are made with it set."""
    from numba.pycc import compiler

    class ReleasingFlags(compiler.Flags):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.release_gil = True

    compiler.Flags = ReleasingFlags  # type: ignore[misc]


def _export_function(kernel, codes: str, record: type | None):
    """A function of the entry's arguments that calls `kernel`, a record rebuilt from its fields
    (a record the module's callers cannot pass)."""
    n = len(getattr(record, "_fields", ()))
    params = [f"a{i}" for i in range(len(codes))]
    args = [f"_P({', '.join(f'a{i}[{j}]' for j in range(n))})" if c == "P" else f"a{i}" for i, c in enumerate(codes)]
    source = f"def entry({', '.join(params)}):\n    return _kernel({', '.join(args)})\n"
    scope = {"_kernel": kernel, "_P": record}
    exec(source, scope)  # a function of fixed arity for the compiler to type
    return scope["entry"]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m archsim.aot_build OUT_FOLDER", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    build(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
