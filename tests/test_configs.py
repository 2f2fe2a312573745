"""Every shipped file loads; bad input gives `file:line: key: message`."""

from pathlib import Path

import pytest

from archsim.config.loader import load_system, load_workload
from archsim.errors import ConfigError
from archsim.graph.params import total_params

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "hw_configs").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_hw_loads(path):
    system, resolved = load_system(str(path))
    assert system.chip.cores > 0 and resolved["name"]


@pytest.mark.parametrize("path", sorted((ROOT / "workloads").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_workload_loads(path):
    w, _ = load_workload(str(path))
    assert total_params(w.model) > 1e9


def _mutated(tmp_path, src: str, old: str, new: str) -> str:
    text = (ROOT / src).read_text()
    assert old in text
    out = tmp_path / Path(src).name
    out.write_text(text.replace(old, new, 1))
    return str(out)


def _line_of(path: str, needle: str) -> int:
    return next(i for i, line in enumerate(Path(path).read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    "old,new,key,fragment",
    [
        ("capacity: 60 MiB", "capacity: 60 GB/s", "l2.capacity", "bytes/s, but bytes is due"),
        ("capacity: 60 MiB", "capacity: 60", "l2.capacity", "a unit is required"),
        ("  count: 132", "  count: -4", "cores.count", "greater than 0"),
        ("dataflow: ws", "dataflow: diagonal", "cores.matrix_units.dataflow", "'ws', 'os' or 'is'"),
        ("  interleave: 256 B", "  interleve: 256 B", "hbm.interleve", "did you mean 'interleave'"),
        ("clock: 1.98 GHz", "clock: fast", "clock", "not a quantity"),
        # a prologue is cycles of the clock the kernel runs at, never a fixed time
        ("matrix_setup: 3881 cycles", "matrix_setup: 1.96 us", "overheads.matrix_setup", "s, but cycles is due"),
    ],
)
def test_hw_errors_are_located(tmp_path, old, new, key, fragment):
    path = _mutated(tmp_path, "hw_configs/h200.yaml", old, new)
    with pytest.raises(ConfigError) as err:
        load_system(path)
    line = _line_of(path, new.strip())
    text = str(err.value)
    assert f"{path}:{line}: {key}: " in text and fragment in text


def test_all_problems_reported_at_once(tmp_path):
    path = _mutated(tmp_path, "hw_configs/h200.yaml", "capacity: 60 MiB", "capacity: 60 GB/s")
    Path(path).write_text(Path(path).read_text().replace("  count: 132", "  count: 0"))
    with pytest.raises(ConfigError) as err:
        load_system(path)
    assert len(err.value.problems) == 2


def test_duplicate_key_refused(tmp_path):
    path = _mutated(tmp_path, "workloads/llama3_8b.yaml", "  layers: 32\n", "  layers: 32\n  layers: 33\n")
    with pytest.raises(ConfigError) as err:
        load_workload(path)
    first = _line_of(path, "layers: 32")
    assert f"{path}:{first + 1}: model.layers: duplicate key (first given on line {first})" in str(err.value)


def test_missing_key_and_cross_field(tmp_path):
    path = _mutated(tmp_path, "workloads/llama3_8b.yaml", "  kv_heads: 8", "  kv_heads: 7")
    with pytest.raises(ConfigError) as err:
        load_workload(path)
    assert "kv_heads (7) must divide heads (32)" in str(err.value)
    path = _mutated(tmp_path, "workloads/llama3_8b.yaml", "  vocab: 128256\n", "")
    with pytest.raises(ConfigError) as err:
        load_workload(path)
    assert "model.vocab: missing required key" in str(err.value)


def test_moe_top_k_above_experts(tmp_path):
    path = _mutated(tmp_path, "workloads/mixtral_8x7b.yaml", "top_k: 2", "top_k: 9")
    with pytest.raises(ConfigError) as err:
        load_workload(path)
    assert "top_k (9) must not exceed experts (8)" in str(err.value)


@pytest.mark.parametrize(
    "content,fragment",
    [
        (b"", "is empty"),
        (b"\x00\x01\xff\xfe garbage", "not UTF-8"),
        (b"name: [unclosed", "not valid YAML"),
        (b"- a\n- b\n", "must be a mapping"),
    ],
)
def test_unreadable_files(tmp_path, content, fragment):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_system(str(path))
    assert str(path) in str(err.value) and fragment in str(err.value)


def test_directory_and_missing(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_system(str(tmp_path))
    with pytest.raises(ConfigError, match="no such file"):
        load_system(str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigError, match="did you mean 'h200'"):
        load_system("h20")


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.mark.parametrize(
    "derived,base,datasheet",
    [
        (
            "h100",
            "h200",
            {
                "name",
                "description",
                "hbm.stacks",
                "hbm.data_rate",
                "hbm.capacity",
                "l2.capacity",
                "power.limit",
                # the same die: what the H100 leaves off of it follows from its stacks and L2
                "area.harvested.l2",
                "area.harvested.hbm_stacks",
            },
        ),
        ("a100", "a100_pcie", {"name", "description", "hbm.data_rate", "power.limit", "power.static"}),
    ],
)
def test_a_derived_chip_changes_datasheet_values_only(derived, base, datasheet):
    """A chip derived from a calibrated one (another SKU of its die) differs from it only in what
    its datasheet states; everything calibrated is the base chip's (tools/derive_chips.py)."""
    from archsim.config.loader import load_system

    a, b = _flat(load_system(derived)[1]), _flat(load_system(base)[1])
    changed = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert changed <= datasheet, f"{derived} differs from {base} beyond its datasheet: {sorted(changed - datasheet)}"


# design points and SCALE-Sim's idealised arrays: their values are choices, not sourced facts
DESIGN_FILES = ("scalesim_", "dataflow_", "lpu", "wafer")
UNSOURCED_KEYS = {"name", "description", "dataflow", "fold_mode", "split", "topology", "node", "algorithms", "chips"}


def unsourced_values(text: str) -> list[int]:
    """Lines of a chip file that set a value with no comment on the line or on a section above
    it (where a comment states the source of what it holds)."""
    sections: list[tuple[int, bool]] = []  # (indent, commented) of the open sections
    bad = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        body, _, comment = line.partition("#")
        indent = len(line) - len(line.lstrip())
        while sections and sections[-1][0] >= indent:
            sections.pop()
        key, _, value = body.strip().partition(":")
        if not value.strip():
            sections.append((indent, bool(comment.strip())))
        elif key not in UNSOURCED_KEYS and not comment.strip() and not any(c for _, c in sections):
            bad.append(number)
    return bad


def test_every_value_of_a_real_chip_states_its_source():
    """A chip file's values each carry a comment with their source tag or reasoning ([DS],
    [WP], [CAL], [EST], ...), on their line or on the section that holds them."""
    assert unsourced_values("a:\n  b: 1 # [DS]\n  c: 2\nd:  # [EST]\n  e: 3\n") == [3]
    for path in sorted((ROOT / "hw_configs").glob("*.yaml")):
        if not path.name.startswith(DESIGN_FILES):
            assert unsourced_values(path.read_text()) == [], path.name
