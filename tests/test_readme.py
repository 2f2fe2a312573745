"""The manual cannot drift from the code: every `archsim` command line in the code blocks of
README.md and of the pages under docs/ runs (as a process, in a scratch folder, under a time
limit), a `$ archsim` line shows what it prints, and the Python examples of README.md and
docs/api.md run, each page's cells in order.

A page says where a command runs on a smaller scenario here, in an HTML comment before its
block: `<!-- readme-test: replace "TEXT" with "OTHER" -->` applies to the commands after it on
that page.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# docs/whatif.md's commands read the files it shows: tests/test_extends.py writes and runs them
PAGES = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "whatif.md")]
LIMIT_S = 120  # per command; the slowest (a serving trace, a sweep on a Dask cluster) take ~10 s
FENCE = re.compile(r"^```(\w*)\s*$")
DIRECTIVE = re.compile(r'<!-- readme-test: replace "(.+?)" with "(.+?)" -->')


def blocks(text: str):
    """(language, lines, replacements in force) of every fenced block."""
    replacements: list[tuple[str, str]] = []
    lang, body = None, []
    for line in text.splitlines():
        fence = FENCE.match(line)
        if lang is None:
            replacements += DIRECTIVE.findall(line)
            if fence:
                lang, body = fence.group(1), []
        elif fence:
            yield lang, body, list(replacements)
            lang = None
        else:
            body.append(line)


def commands(text: str) -> list[tuple[str, str | None]]:
    """(command line, what its first line of output starts with, for `$ ` lines)."""
    out = []
    for lang, body, replacements in blocks(text):
        for i, line in enumerate(body):
            shown = line.startswith("$ ")
            if lang != "bash" and not shown:
                continue
            for part in line.removeprefix("$ ").split("&&"):
                words = shlex.split(part, comments=True)
                if not words or words[0] != "archsim":
                    continue
                command = shlex.join(words)
                for old, new in replacements:
                    command = command.replace(old, new)
                expected = body[i + 1].split("...")[0].rstrip() if shown and i + 1 < len(body) else None
                out.append((command, expected))
    return out


COMMANDS = [c for page in PAGES for c in commands(page.read_text())]


def test_the_manual_has_its_commands():
    assert len(COMMANDS) >= 30
    assert len(commands(README.read_text())) >= 3
    assert any(c.startswith("archsim run --hw h200 --workload llama3_70b") for c, _ in commands(README.read_text()))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A folder where README's relative paths (hw_configs/..., tests/data/...) resolve."""
    d = tmp_path_factory.mktemp("readme")
    for name in ("hw_configs", "workloads", "tests"):
        (d / name).symlink_to(ROOT / name)
    return d


@pytest.mark.parametrize("command,expected", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_readme_command_runs(scratch, command, expected):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHSIM_")}
    env["COLUMNS"] = "100"
    args = [sys.executable, "-m", "archsim", *shlex.split(command)[1:]]
    done = subprocess.run(args, cwd=scratch, env=env, capture_output=True, text=True, timeout=LIMIT_S)
    if expected is not None and expected.startswith("archsim: error:"):
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith(expected), done.stderr
        return
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if expected is not None:
        assert done.stdout.startswith(expected)


def python_cells(path: Path) -> list[str]:
    return ["\n".join(body) for lang, body, _ in blocks(path.read_text()) if lang == "python"]


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "api.md"], ids=lambda p: p.name)
def test_python_examples_run(page, tmp_path, monkeypatch, capsys):
    cells = python_cells(page)
    assert cells, f"{page.name} has no Python example"
    monkeypatch.chdir(tmp_path)
    if any("pandas" in c for c in cells):
        pytest.importorskip("pandas")
    namespace: dict = {"__name__": "__main__"}
    for cell in cells:
        exec(compile(cell, str(page), "exec"), namespace)
    printed = capsys.readouterr().out
    if page == README:  # what the example's comment says it prints
        assert "with_params: hbm.data_rate: must be greater than zero (got '-8 Gbps')" in printed
        assert printed.count("TPOT") == 3
