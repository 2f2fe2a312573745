"""The kernels compiled ahead of time (archsim/aot.py): built once, the JIT's numbers to the bit,
given only the argument types they were compiled for, and a run that uses them never loads
Numba."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from attention_ops import gqa_attention

from archsim import aot, stopping
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="no compiled kernels")


@pytest.fixture(scope="module")
def module():
    """The module for this machine and these sources, built here if no process built it yet.
    Without a C compiler it cannot be built: the rest of archsim then runs on Numba's JIT."""
    if not aot.enabled():
        pytest.skip("ARCHSIM_AOT=0")
    built = aot.load(build=True)
    if built is None:
        why = (aot.folder() / aot.FAILED).read_text() if (aot.folder() / aot.FAILED).exists() else "?"
        if shutil.which("cc") or shutil.which("gcc"):
            pytest.fail(f"the kernels could not be compiled ahead of time: {why}")
        pytest.skip(f"no C compiler: {why}")
    return built


ENTRIES = {  # the entry kernels and the letters their annotations give (aot.ARGUMENT_TYPES)
    "archsim.engine.kernels.simulate_phase": "IIGIiPbI",
    "archsim.compiler.l2reuse._walk_waves": "IIIIIIiiFI",
    "archsim.compiler.program.deal_cores": "FiI",
    "archsim.serving.kernels.book_decodes": "IIIIIiFFIF",
    "archsim.serving.kernels.apply_tokens": "IIIIIFFfIF",
    "archsim.serving.kernels.decode_bounds": "IIIIIiib",
    "archsim.serving.kernels.plan_running": "IIIIIIIi",
    "archsim.serving.kernels.step_shape": "IIIII",
}


def _py_func(qualified: str):
    import importlib

    module, name = qualified.rsplit(".", 1)
    return getattr(importlib.import_module(module), name).py_func


def compiled(module, qualified: str):
    return aot.adapter(getattr(module, aot.export_name(qualified)), *aot.signature(_py_func(qualified)))


def test_the_entries_and_their_signatures_come_from_the_kernels():
    """The entry kernels are those made with njit_entry (found by the builder in their modules);
    each one's argument types are its annotations, a record named by its class."""
    from archsim import aot_build, jit
    from archsim.hardware.memory import MemoryParams

    for name in aot_build.entry_modules():
        __import__(name)
    assert set(jit.entry_names()) == set(ENTRIES)
    for qualified, codes in ENTRIES.items():
        got, record = aot.signature(_py_func(qualified))
        assert got == codes, qualified
        assert record is (MemoryParams if "P" in codes else None)


def test_a_kernel_whose_annotation_is_not_a_kernel_type_is_refused():
    def kernel(a: "I64Array", b: "list"):  # noqa: F821
        return a

    with pytest.raises(TypeError, match="argument 'b' is annotated 'list'"):
        aot.signature(kernel)

    def unannotated(a):
        return a

    with pytest.raises(TypeError, match="argument 'a' is annotated None"):
        aot.signature(unannotated)


def test_every_entry_is_in_the_module(module):
    for qualified in ENTRIES:
        assert callable(getattr(module, aot.export_name(qualified))), qualified


def accepts(codes: str, args: tuple, record: type | None = None) -> bool:
    """Whether the adapter of an entry of `codes` passes `args` on."""
    return aot.adapter(lambda *a: None, codes, record)(args)[0]


def test_only_the_types_an_entry_was_compiled_for_are_passed_to_it(h200):
    """A compiled function would read any argument as its own type (an int32 array as int64
    elements: garbage or a crash), so the adapter takes only exact types."""
    from archsim.hardware.memory import MemoryParams, memory_params

    p = memory_params(h200.chip, 0.0, 1e6)
    ints, rows = np.arange(4, dtype=np.int64), np.zeros((5, 4))
    ok = (ints, ints, rows, ints, 2, p, False, stopping.FLAG)
    codes = ENTRIES["archsim.engine.kernels.simulate_phase"]
    assert accepts(codes, ok, MemoryParams)
    readonly = rows.copy()
    readonly.flags.writeable = False
    wrong = {
        0: ints.astype(np.int32),  # another dtype
        2: np.zeros((5, 8))[:, ::2],  # not contiguous
        3: np.arange(4.0),  # float where int64
        4: 2.0,  # float where int64
        5: tuple(p),  # a tuple, not the record
        6: 1,  # int where bool
    }
    for i, value in wrong.items():
        assert not accepts(codes, ok[:i] + (value,) + ok[i + 1 :], MemoryParams), i
    assert not accepts(codes, ok[:2] + (readonly,) + ok[3:], MemoryParams)  # read-only (Numba types it apart)
    assert not accepts(codes, ok[:2] + (np.zeros(4),) + ok[3:], MemoryParams)  # 1-D where 2-D
    assert not accepts(codes, ok[:-1], MemoryParams)  # one argument short
    assert not accepts("i", (True,)) and not accepts("i", (2**63,))  # a bool is no int64; nor a huge int
    assert accepts("i", (np.int64(3),)) and accepts("f", (np.float64(1.5),))
    assert not accepts("f", (np.float32(1.5),))


def _programs(chip):
    """Phases of every shape the event loop meets: a stream-K GEMM of many distinct cores, a
    decode GEMV, causal prefill attention, split-KV decode attention and its combine, a
    streaming vector kernel."""
    from archsim.compiler.compile import compile_candidates

    ops = [
        Op(OpKind.GEMM, m=512, k=4096, n=28672, scaling=Scaling.FIXED),
        Op(OpKind.GEMM, m=1, k=4096, n=14336, scaling=Scaling.FIXED),
        gqa_attention(1024, 1024, batch=2, causal=True),
        gqa_attention(1, 3000, batch=4, split_kv=True),
        Op(OpKind.VECTOR, m=4096, n=4096, vop=VectorOp.RMSNORM, scaling=Scaling.FIXED),
    ]
    return [p for op in ops for p in compile_candidates(op, chip)[:2]]


def test_the_compiled_event_loop_plays_as_the_jit_to_the_bit(module, h200):
    """Every output of the event loop, with and without a trace, is the JIT's bit for bit: the
    same LLVM code for the same CPU, without fast-math."""
    from archsim import jit
    from archsim.engine import kernels
    from archsim.engine.simulate import phase_entries, phase_memory

    jit.load()
    play = compiled(module, "archsim.engine.kernels.simulate_phase")
    phases = 0
    for program in _programs(h200.chip):
        for ph in program.phases:
            args = (ph.core_start, ph.core_weight, phase_entries(ph), ph.compute_cycles, int(ph.stages))
            args += (phase_memory(ph, h200.chip),)
            for trace in (False, True):
                took, got = play((*args, trace, stopping.FLAG))
                assert took
                want = kernels.simulate_phase(*args, trace, stopping.FLAG)
                for a, b in zip(got, want, strict=True):
                    a, b = np.atleast_1d(np.asarray(a, np.float64)), np.atleast_1d(np.asarray(b, np.float64))
                    assert a.view(np.uint64).tolist() == b.view(np.uint64).tolist()
            phases += 1
    assert phases >= 8


def test_an_entry_releases_the_gil_and_returns_when_asked_to_stop(module):
    """The module's functions run without the GIL, as Numba's JIT runs archsim's kernels: another
    thread runs meanwhile (the command line's watchdog) and may ask the kernel to return
    (archsim/stopping.py). The L2 walk of 200,000 waves of fresh 1-byte panels with room for half
    of them sums 1e10 stack distances (seconds); asked to stop 0.3 s in, it returns at once."""
    walk = compiled(module, "archsim.compiler.l2reuse._walk_waves")
    n = 200_000
    t = np.arange(n, dtype=np.int64)
    one = np.ones(n, np.int64)
    ran = []

    def ask():
        time.sleep(0.3)
        ran.append(time.monotonic())
        stopping.request()

    thread = threading.Thread(target=ask)
    start = time.monotonic()
    thread.start()
    try:
        took, _ = walk((t, n + t, one, one, one, t, n, 2 * n, np.array([1.0, 1.0, 1.0, 1.0, n]), stopping.FLAG))
    finally:
        stopping.clear()
        thread.join()
    returned = time.monotonic()
    assert took and ran, "the kernel held the GIL"
    assert ran[0] - start < 1.0 and returned - ran[0] < 0.5


RUN = """
import json, sys
from archsim import jit
jit.for_command_line()
from archsim.cli import main
main(["run", "--workload", "llama3_8b", "--batch", "4", "--prompt", "512", "--generate", "8", "--quiet",
      "--json", sys.argv[1]])
print(json.dumps("numba" in sys.modules))
"""


def _run(tmp_path, name: str, aot_on: bool) -> tuple[dict, bool]:
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "ARCHSIM_NO_CACHE": "1", "ARCHSIM_AOT": "1" if aot_on else "0"}
    res = subprocess.run([sys.executable, "-c", RUN, str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text()), json.loads(res.stdout.strip().splitlines()[-1])


def test_a_run_on_the_compiled_kernels_loads_no_numba_and_reports_what_the_jit_does(module, tmp_path):
    compiled_doc, numba_loaded = _run(tmp_path, "aot", True)
    jit_doc, jit_numba = _run(tmp_path, "jit", False)
    assert not numba_loaded and jit_numba
    assert compiled_doc == jit_doc


OTHER_TYPES = """
import json, sys
import numpy as np
from archsim import jit
from archsim import stopping
from archsim.compiler.program import deal_cores  # the first kernel call imports no other kernels
costs = np.linspace(1.0, 3.0, 20000)  # beyond what runs as Python
as_compiled = deal_cores(costs, 132, stopping.FLAG)
from archsim.serving import kernels  # kernels defined once the module is loaded
late = kernels.step_shape.compiled is not None
before = "numba" in sys.modules
other = deal_cores(costs.astype(np.float32), 132, stopping.FLAG)  # a type the module was not built for
print(json.dumps([before, late, "numba" in sys.modules, as_compiled.tolist() == other.tolist()]))
"""


def test_a_call_of_other_types_goes_to_the_jit(module):
    """A call the module does not take loads Numba and gives the same result; a kernel whose
    module is imported after the compiled module was loaded gets its function too."""
    env = {**os.environ, "ARCHSIM_AOT": "1"}
    res = subprocess.run([sys.executable, "-c", OTHER_TYPES], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == [False, True, True, True]


def test_a_module_that_cannot_be_built_is_kept_as_failed_and_not_tried_again(tmp_path, monkeypatch):
    """The reason is written into the folder; later loads do not build again (each would cost a
    child process and its compilation) and use the JIT."""
    calls = []

    def failing(where):
        calls.append(where)
        return "error: command 'cc' failed: No such file or directory"

    monkeypatch.setattr(aot, "_run_build", failing)
    monkeypatch.setattr(aot, "folder", lambda: tmp_path / "aot")
    aot._loaded.clear()
    try:
        assert aot.buildable()
        assert aot.load(build=True) is None
        assert "No such file" in (tmp_path / "aot" / aot.FAILED).read_text()
        assert not aot.buildable()
        aot._loaded.clear()  # a later process
        assert aot.load(build=True) is None
        assert len(calls) == 1
    finally:
        aot._loaded.clear()


def test_a_failed_build_is_kept_with_its_exception_line(tmp_path, monkeypatch):
    """The child's exception line names why (numba.pycc prints a hint after it)."""
    child = (
        "import sys; print('Traceback ...', file=sys.stderr); sys.exit('RuntimeError: no C compiler\\n#> install gcc')"
    )
    run = subprocess.run
    monkeypatch.setattr(aot.subprocess, "run", lambda *a, **k: run([sys.executable, "-c", child], **k))
    assert aot._run_build(tmp_path) == "RuntimeError: no C compiler"


def test_a_killed_build_is_tried_again_not_kept_as_failed(tmp_path, monkeypatch):
    """A build killed by a signal (the machine's memory, Ctrl-C) did not fail: nothing is kept,
    and the next process builds the module."""
    run = subprocess.run
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    monkeypatch.setattr(aot.subprocess, "run", lambda *a, **k: run([sys.executable, "-c", killed], **k))
    assert aot._run_build(tmp_path) == f"{aot.KILLED} 9"
    calls = []
    monkeypatch.setattr(aot, "_run_build", lambda where: calls.append(where) or f"{aot.KILLED} 9")
    monkeypatch.setattr(aot, "folder", lambda: tmp_path / "aot")
    aot._loaded.clear()
    try:
        assert aot.load(build=True) is None
        assert not (tmp_path / "aot" / aot.FAILED).exists() and aot.buildable()
        aot._loaded.clear()  # a later process
        assert aot.load(build=True) is None
        assert len(calls) == 2
    finally:
        aot._loaded.clear()


@pytest.mark.parametrize("which", ["parent", "folder", "module"])
def test_the_module_is_loaded_only_from_a_folder_others_cannot_write(tmp_path, monkeypatch, which):
    """Imported, the module runs as code: a folder or file others may write is refused with the fix."""
    import os

    import archsim

    where = tmp_path / "kernels" / "aot"
    where.mkdir(parents=True, mode=0o700)
    os.chmod(where.parent, 0o700)
    module = where / f"{aot.MODULE}.so"
    module.write_bytes(b"")
    os.chmod(module, 0o600)
    assert aot.trusted(where, module)
    os.chmod({"parent": where.parent, "folder": where, "module": module}[which], 0o777 if which != "module" else 0o666)
    with pytest.raises(archsim.CacheFolderError, match=r"writable by group or others .*fix: chmod"):
        aot.trusted(where, module)
    monkeypatch.setattr(aot, "folder", lambda: where)
    aot._loaded.clear()
    try:
        with pytest.raises(archsim.CacheFolderError):
            aot.load(build=False)
    finally:
        aot._loaded.clear()


def test_the_modules_folder_may_sit_in_a_sticky_folder_but_not_a_writable_one(tmp_path):
    import os

    import archsim

    where = tmp_path / "shared" / "aot"
    where.mkdir(parents=True, mode=0o700)
    os.chmod(where.parent, 0o1777)  # /tmp: others add, but cannot swap the module's own folder
    assert aot.trusted(where)
    os.chmod(where.parent, 0o777)
    with pytest.raises(archsim.CacheFolderError):
        aot.trusted(where)


def test_numbas_cache_folder_others_may_write_is_refused(monkeypatch, tmp_path):
    import os

    import archsim
    from archsim import jit, kernel_sources

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    jit.private_folders(kernel_sources.kernel_cache_dir())
    os.chmod(kernel_sources.kernel_cache_dir(), 0o777)
    with pytest.raises(archsim.CacheFolderError, match="fix: chmod 700"):
        jit._use_kernel_cache_dir()
    assert "NUMBA_CACHE_DIR" not in os.environ  # Numba is not pointed there


def test_the_kernel_folders_are_made_private(monkeypatch, tmp_path):
    import os
    import stat

    from archsim import jit, kernel_sources

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    old = os.umask(0o002)  # a umask that would leave them group-writable
    try:
        jit.private_folders(kernel_sources.kernel_cache_dir())
    finally:
        os.umask(old)
    root = tmp_path / "xdg" / "archsim"
    for folder in (root, *(p for p in kernel_sources.kernel_cache_dir().parents if root in p.parents)):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
    assert stat.S_IMODE(os.stat(kernel_sources.kernel_cache_dir()).st_mode) == 0o700


def test_the_folder_follows_the_sources_and_the_cpu(monkeypatch, tmp_path):
    """A changed kernel source or a changed list of what each entry takes must not find a
    module built before (it would read its arguments as other types); the CPU is in the name."""
    from archsim import kernel_sources

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    before = aot.folder()
    assert before.parent == tmp_path and aot._cpu_key() in before.name
    monkeypatch.setattr(kernel_sources, "kernel_sources_digest", lambda root=None: "another")
    assert aot.folder() != before


def _archsim_imports(path) -> set[str]:
    """The archsim modules a file imports, at its top or inside functions."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("archsim"):
            names |= {f"{node.module}.{a.name}" if node.module == "archsim" else node.module for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.startswith("archsim")}
    return names


def test_the_loader_imports_no_kernel_nor_the_jit():
    """No circle through the kernels compiled ahead of time: archsim/jit.py (imported by every
    kernel module, hardware/memory.py among them) asks aot.py, which asks only kernel_sources.py
    (which asks nothing of archsim) and cache_folders.py (whether its folder may be read: it asks
    errors.py alone); only the builder, run as a child process, imports the kernels."""
    from pathlib import Path

    import archsim

    root = Path(archsim.__file__).parent
    assert _archsim_imports(root / "aot.py") == {"archsim.kernel_sources", "archsim.cache_folders"}
    assert _archsim_imports(root / "cache_folders.py") == {"archsim.errors"}
    assert _archsim_imports(root / "kernel_sources.py") == set()
    assert _archsim_imports(root / "jit.py") == {"archsim.kernel_sources", "archsim.aot", "archsim.cache_folders"}
