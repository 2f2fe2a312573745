"""The memo of validated configurations (archsim/config/memo.py): a document that validated is
read back equal to what validation builds, and nothing else is: not a changed file, not a bad
one, not one whose values were set by other paths, not when the cache is off, and nothing at
all outside the command line."""

import pytest

from archsim import opcache
from archsim.config import loader, memo
from archsim.config.yamlfile import read_yaml
from archsim.errors import ConfigError

ROOT = loader.ROOT


@pytest.fixture(autouse=True)
def command_line(monkeypatch):
    """The memo as archsim's command line has it (a Python session has none)."""
    monkeypatch.setattr(memo, "_active", [True])


def _entries(cache) -> list[str]:
    return sorted(p.name for p in cache.rglob("*") if p.parent.name == memo.FOLDER)


def _validated(monkeypatch) -> list[str]:
    """Record every document validation builds from (a memo hit builds none)."""
    seen: list[str] = []
    for name in ("system_from_doc", "workload_from_doc"):
        build = getattr(loader, name)

        def counting(doc, build=build):
            seen.append(doc.path)
            return build(doc)

        monkeypatch.setattr(loader, name, counting)
    return seen


def test_a_file_validated_once_is_read_back_as_built(cache_dir, monkeypatch):
    seen = _validated(monkeypatch)
    first = loader.load_system("h200")
    again = loader.load_system("h200")
    assert len(seen) == 1 and len(_entries(cache_dir)) == 1
    fresh = loader.system_from_doc(read_yaml(loader.resolve_path("h200", "hw_configs")))
    assert repr(again[0]) == repr(first[0]) == repr(fresh[0]) and again[1] == fresh[1]


def test_a_changed_file_is_validated_again(cache_dir, tmp_path, monkeypatch):
    chip = tmp_path / "chip.yaml"
    text = (ROOT / "hw_configs" / "h200.yaml").read_text()
    chip.write_text(text)
    seen = _validated(monkeypatch)
    assert loader.load_system(str(chip))[0].chip.clock_hz == 1.98e9
    chip.write_text(text.replace("clock: 1.98 GHz", "clock: 1.5 GHz"))
    assert loader.load_system(str(chip))[0].chip.clock_hz == 1.5e9
    assert len(seen) == 2


def test_a_bad_file_is_refused_every_time_and_never_kept(cache_dir, tmp_path):
    chip = tmp_path / "bad.yaml"
    chip.write_text((ROOT / "hw_configs" / "h200.yaml").read_text().replace("count: 132", "count: -1"))
    for _ in range(2):
        with pytest.raises(ConfigError, match="count"):
            loader.load_system(str(chip))
    assert _entries(cache_dir) == []


def test_values_set_by_path_are_part_of_the_key(cache_dir):
    """The same document with a value set is another entry; a bad path is refused though its
    document was kept."""
    doc = read_yaml(loader.resolve_path("h200", "hw_configs"))
    base = loader.build("hardware", doc)[0]
    slower = loader.build("hardware", doc, [(("clock",), "1 GHz")])[0]
    assert base.chip.clock_hz == 1.98e9 and slower.chip.clock_hz == 1e9
    assert len(_entries(cache_dir)) == 2
    with pytest.raises(ConfigError, match="has no key 'clok'"):
        loader.build("hardware", doc, [(("clok",), "1 GHz")])


def test_an_entry_cut_short_is_a_miss(cache_dir, monkeypatch):
    loader.load_system("h200")
    (entry,) = list(cache_dir.rglob("*.pickle"))
    entry.write_bytes(entry.read_bytes()[:100])
    seen = _validated(monkeypatch)
    assert loader.load_system("h200")[0].chip.cores == 132
    assert len(seen) == 1


def test_no_cache_neither_reads_nor_writes(cache_dir, monkeypatch):
    opcache.set_enabled(False)
    seen = _validated(monkeypatch)
    loader.load_system("h200")
    loader.load_system("h200")
    assert len(seen) == 2 and _entries(cache_dir) == []


def test_a_python_session_neither_reads_nor_writes_it(cache_dir, monkeypatch):
    monkeypatch.setattr(memo, "_active", [False])
    seen = _validated(monkeypatch)
    loader.load_system("h200")
    loader.load_system("h200")
    assert len(seen) == 2 and _entries(cache_dir) == []


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path, monkeypatch):
    """The cache folder lies under a regular file: every write fails, the load does not."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ARCHSIM_CACHE_DIR", str(tmp_path / "file" / "cache"))
    opcache.set_enabled(True)
    assert loader.load_system("h200")[0].chip.cores == 132
    assert loader.load_system("h200")[0].chip.cores == 132


def _shipped(kind: str) -> list[str]:
    return sorted(p.stem for p in (ROOT / kind).glob("*.yaml"))


@pytest.mark.parametrize(
    ("kind", "name"),
    [("hw_configs", n) for n in _shipped("hw_configs")] + [("workloads", n) for n in _shipped("workloads")],
)
def test_every_shipped_file_reads_back_as_validation_builds_it(cache_dir, monkeypatch, kind, name):
    """Pickling keeps every record of every shipped chip and workload: what the second load reads
    back is what the first built, to its repr, and its resolved configuration is equal."""
    load = loader.load_system if kind == "hw_configs" else loader.load_workload
    seen = _validated(monkeypatch)
    built = load(name)
    kept = load(name)
    assert len(seen) == 1 and len(_entries(cache_dir)) == 1
    assert repr(kept[0]) == repr(built[0]) and kept[1] == built[1]
