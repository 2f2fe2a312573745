"""The package's import structure: imports point down the pipeline with no circles between
archsim's modules, and the engine and the reports read the compiler's output (archsim/program.py)
without importing the compiler. Imports are read from the source (module-level and inside
functions alike: a lazy import still ties the two modules together)."""

from __future__ import annotations

import ast
from pathlib import Path

import archsim

PACKAGE = Path(archsim.__file__).resolve().parent

# Circles still being taken apart elsewhere; each pair is an import inside a circle. Empty this
# as they go: a circle not listed here fails the test.
ALLOWED_CIRCLES = {
    ("archsim.aot", "archsim.hardware.memory"),  # aot <-> jit <-> hardware.memory
    ("archsim.aot", "archsim.jit"),
    ("archsim.hardware.memory", "archsim.jit"),
    ("archsim.hardware.area", "archsim.hardware.chip"),
    ("archsim.serving.disaggregated", "archsim.serving.simulate"),
}


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    files = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        files[".".join(parts).removesuffix(".__init__")] = path
    return files


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that module `name` imports anywhere in its source: `import a.b`,
    `from a import b` (a module `a.b` or a name of `a`), relative imports resolved; never its own
    package above it (which Python has imported before the module runs)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return {t for t in found & modules if t != name and not name.startswith(t + ".")}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    files = module_files(root)
    return {m: imports_of(m, p, set(files)) for m, p in files.items()}


def circle_pairs(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every import a -> b where b leads back to a, as the sorted pair (a, b)."""

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {m: reach(m) for m in graph}
    return {(min(a, b), max(a, b)) for a in graph for b in graph[a] if a in reached[b]}


def test_no_import_circles_between_modules():
    circles = circle_pairs(import_graph()) - ALLOWED_CIRCLES
    assert not circles, "imports inside a circle: " + "; ".join(f"{a} <-> {b}" for a, b in sorted(circles))


def test_the_engine_and_the_reports_import_nothing_from_the_compiler():
    graph = import_graph()
    wrong = sorted(
        f"{m} imports {t}"
        for m, targets in graph.items()
        if m.startswith(("archsim.engine", "archsim.report"))
        for t in targets
        if t == "archsim.compiler" or t.startswith("archsim.compiler.")
    )
    assert not wrong, "; ".join(wrong)


def test_the_checks_see_circles_and_lazy_imports(tmp_path):
    """A made-up package: a imports b at module level, b imports a inside a function, c imports
    the compiler's program relatively, and d imports a alone: one circle (a, b), found through
    the lazy import, and c's import resolved to pkg.compiler.program."""
    pkg = tmp_path / "pkg"
    (pkg / "compiler").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "compiler" / "__init__.py").write_text("")
    (pkg / "compiler" / "program.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    import pkg.a\n")
    (pkg / "c.py").write_text("from .compiler.program import Program\n")
    (pkg / "d.py").write_text("from pkg.a import f\n")
    graph = import_graph(pkg)
    assert circle_pairs(graph) == {("pkg.a", "pkg.b")}
    assert graph["pkg.c"] == {"pkg.compiler.program"}
    assert graph["pkg.d"] == {"pkg.a"}
