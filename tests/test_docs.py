"""The documentation holds together: README stays a door (under 400 lines, linking the pages
that hold the rest), every relative link of README and docs/ names a file that exists, and the
configuration reference is the one the schemas generate (tools/config_reference.py)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 400
    for page in ("tutorial", "configuration", "MODEL", "api", "validation"):
        assert f"(docs/{page}.md)" in readme, page
    assert (ROOT / "LICENSE").is_file() and (ROOT / "CITATION.cff").is_file()


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file does not exist (web addresses and anchors aside)."""
    targets = [t for t in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:|#", t)]
    return [t for t in targets if not (page.parent / t.split("#")[0]).exists()]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_names_a_file(page):
    assert broken_links(page) == []


def test_a_broken_link_is_found(tmp_path):
    """The check above can fail: a link to a page that is not there is reported, a web address
    and an anchor are not."""
    (tmp_path / "here.md").write_text("")
    page = tmp_path / "page.md"
    page.write_text("[a](MODEL.md) [b](https://example.org) [c](#top) [d](here.md#part)\n")
    assert broken_links(page) == ["MODEL.md"]


def test_the_configuration_reference_is_current():
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "config_reference.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_every_key_of_a_workload_file_is_described():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import config_reference
    finally:
        sys.path.pop(0)
    from archsim.config.workload_schema import WorkloadCfg

    assert [k for k, _, _, why in config_reference.rows(WorkloadCfg) if not why] == []
