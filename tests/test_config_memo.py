"""The memo of validated configurations (archsim/config/memo.py): a document that validated is
read back equal to what validation builds, and nothing else is: not a changed file, not a bad
one, not one whose values were set by other paths, not when the cache is off, and nothing at
all outside the command line."""

import pytest

import archsim
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
    (entry,) = list(cache_dir.rglob("*.json"))
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
    """An entry keeps every record of every shipped chip and workload: what the second load reads
    back is what the first built, to its repr, and its resolved configuration is equal."""
    load = loader.load_system if kind == "hw_configs" else loader.load_workload
    seen = _validated(monkeypatch)
    built = load(name)
    kept = load(name)
    assert len(seen) == 1 and len(_entries(cache_dir)) == 1
    assert repr(kept[0]) == repr(built[0]) and kept[1] == built[1]


def test_a_main_memory_of_any_model_reads_back_and_only_a_model_stands_for_one(cache_dir, tmp_path, monkeypatch):
    """`Chip.hbm` is typed by what a main memory provides (memory_models.MainMemory), so an entry
    names its model's record: an H200 on the ideal model reads back as built; a record of another
    kind named in its place (an L2, which provides none of it) makes the entry a miss."""
    import json

    import yaml

    chip = yaml.safe_load((ROOT / "hw_configs" / "h200.yaml").read_text())
    chip["hbm"] = {"model": "ideal", "capacity": "80 GiB", "bandwidth": "2 TB/s", "latency": "500 ns"}
    path = tmp_path / "ideal.yaml"
    path.write_text(yaml.safe_dump(chip, sort_keys=False))
    seen = _validated(monkeypatch)
    built, kept = loader.load_system(str(path)), loader.load_system(str(path))
    assert len(seen) == 1 and repr(kept[0]) == repr(built[0])
    entry = _entry(cache_dir)
    doc = json.loads(entry.read_text())
    assert doc["record"]["chip"]["hbm"][memo.SUBCLASS] == "archsim.hardware.memory_models.ideal:IdealMemory"
    doc["record"]["chip"]["hbm"] = dict(doc["record"]["chip"]["l2"], **{memo.SUBCLASS: "archsim.hardware.chip:L2"})
    entry.write_text(json.dumps(doc))
    loader.load_system(str(path))
    assert len(seen) == 2  # the tampered entry was a miss: validated again


# --- an entry is data, checked on read -----------------------------------------------------------


def _entry(cache):
    (entry,) = [p for p in cache.rglob("*.json") if p.parent.name == memo.FOLDER]
    return entry


def _reload_validates(monkeypatch, name: str = "h200") -> int:
    """Validations a second load runs: 1 where the entry was a miss, 0 where it was read."""
    seen = _validated(monkeypatch)
    loaded = loader.load_system(name)[0]
    assert loaded.chip.name == "NVIDIA H200 SXM" and loaded.chip.clock_hz == 1.98e9
    return len(seen)


def test_a_planted_pickle_is_never_loaded(cache_dir, monkeypatch, tmp_path):
    """A pickle under the name an entry once had runs nothing: entries are JSON, read as data."""
    import pickle

    loader.load_system("h200")
    entry = _entry(cache_dir)
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    entry.with_suffix(".pickle").write_bytes(pickle.dumps(Payload()))
    entry.write_bytes(pickle.dumps(Payload()))
    assert _reload_validates(monkeypatch) == 1 and not marker.exists()


def _tamper(entry, change) -> None:
    import json

    doc = json.loads(entry.read_text())
    change(doc)
    entry.write_text(json.dumps(doc))


TAMPERINGS = {
    "another-format": lambda d: d.update(format=2),
    "format-true": lambda d: d.update(format=True),
    "another-key": lambda d: d.update(key="0" * 32),
    "another-kind": lambda d: d.update(kind="workload"),
    "another-source": lambda d: d.update(source="/elsewhere/h200.yaml"),
    "record-source": lambda d: d["record"].update(source="/elsewhere/h200.yaml"),
    "clock-text": lambda d: d["record"]["chip"].update(clock_hz="fast"),
    "clock-bool": lambda d: d["record"]["chip"].update(clock_hz=True),
    "cores-float": lambda d: d["record"]["chip"].update(cores=132.5),
    "cores-other": lambda d: d["record"]["chip"].update(cores=8),  # not the cores its configuration names
    "name-other": lambda d: d["record"]["chip"].update(name="NVIDIA A100"),
    "chips-other": lambda d: d["record"].update(chips=64),
    "field-missing": lambda d: d["record"]["chip"].pop("clock_hz"),
    "field-extra": lambda d: d["record"]["chip"].update(turbo=1),
    "enum-unknown": lambda d: d["record"]["chip"]["core"]["array"].update(dataflow="xs"),
    "record-list": lambda d: d.update(record=[1, 2]),
    "config-list": lambda d: d.update(config=[]),
    "subclass-os": lambda d: d["record"]["chip"].update({"@": "os:system"}),
    "subclass-not-archsim": lambda d: d["record"]["chip"].update({"@": "json.decoder:JSONDecoder"}),
    "subclass-not-a-subclass": lambda d: d["record"]["chip"].update({"@": "archsim.hardware.chip:Hbm"}),
    "subclass-dotted": lambda d: d["record"]["chip"].update({"@": "archsim.hardware.chip:Chip.__class__"}),
    "subclass-missing-module": lambda d: d["record"]["chip"].update({"@": "archsim.no_such:Chip"}),
}


@pytest.mark.parametrize("change", TAMPERINGS.values(), ids=TAMPERINGS.keys())
def test_a_tampered_entry_is_a_miss(cache_dir, monkeypatch, change):
    loader.load_system("h200")
    _tamper(_entry(cache_dir), change)
    assert _reload_validates(monkeypatch) == 1


def test_an_entry_of_another_chip_under_the_key_is_a_miss(cache_dir, monkeypatch):
    """The A100's entry copied under the H200's key (its key, kind and source edited to match):
    its configuration names the H200 by the file, its record is the A100's."""
    import json

    loader.load_system("h200")
    h200 = _entry(cache_dir)
    kept = json.loads(h200.read_text())
    h200.unlink()
    loader.load_system("a100")
    a100 = _entry(cache_dir)
    doc = json.loads(a100.read_text())
    doc.update(key=kept["key"], source=kept["source"], config=kept["config"])
    doc["record"]["source"] = kept["record"]["source"]
    h200.write_text(json.dumps(doc))
    assert _reload_validates(monkeypatch) == 1


@pytest.mark.parametrize("text", [b"", b"{", b"NaN", b'{"format": 1, "record": NaN}', b"\xff\xfe", b"[]"])
def test_an_entry_that_is_not_json_is_a_miss(cache_dir, monkeypatch, text):
    loader.load_system("h200")
    _entry(cache_dir).write_bytes(text)
    assert _reload_validates(monkeypatch) == 1


def test_an_entry_that_is_a_fifo_or_a_link_or_huge_is_a_miss(cache_dir, monkeypatch, tmp_path):
    import os
    import signal

    loader.load_system("h200")
    entry = _entry(cache_dir)
    good = entry.read_bytes()
    signal.alarm(10)  # a read that blocked would fail the test, not hang it
    try:
        entry.unlink()
        os.mkfifo(entry)
        assert _reload_validates(monkeypatch) == 1
        entry.unlink()
        (tmp_path / "elsewhere.json").write_bytes(good)
        entry.symlink_to(tmp_path / "elsewhere.json")
        assert _reload_validates(monkeypatch) == 1
        entry.unlink()
        with open(entry, "wb") as f:
            f.write(good)
            f.truncate(memo.MAX_ENTRY_BYTES + 1)
        assert _reload_validates(monkeypatch) == 1
    finally:
        signal.alarm(0)


def test_entries_are_private_and_not_read_from_a_folder_others_may_write(cache_dir, monkeypatch):
    import os
    import stat

    loader.load_system("h200")
    entry = _entry(cache_dir)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(entry.parent.stat().st_mode) == 0o700
    os.chmod(entry.parent, 0o777)
    opcache._refused.clear()
    with pytest.raises(archsim.CacheFolderError, match=f"chmod 700 {entry.parent}"):  # refused, never read
        _reload_validates(monkeypatch)
