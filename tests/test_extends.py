"""Files that extend others (archsim/config/extends.py): `extends: NAME_OR_PATH` takes a base
file's keys, and the keys below it override them mapping by mapping; each problem is located in
the file that holds the bad value; the resolved configuration and its hash are the merged
document's."""

from pathlib import Path

import pytest

from archsim import api
from archsim.cli import main
from archsim.config import loader, memo
from archsim.config.extends import MAX_DEPTH, ONLY_IN
from archsim.config.resolved import config_hash
from archsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
H200 = (ROOT / "hw_configs" / "h200.yaml").read_text()


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def line_of(path: str, needle: str) -> int:
    return next(i for i, line in enumerate(Path(path).read_text().splitlines(), 1) if needle in line)


def problems(load, path) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load(path)
    return [str(p) for p in err.value.problems]


# --- merging ---------------------------------------------------------------------------------------


def test_a_mapping_merges_key_by_key(tmp_path):
    """hbm.stacks overridden, the other hbm keys h200's: 8 stacks x 16 channels x 64 bit x
    6.25 Gb/s / 8 = 6.4 TB/s (h200: 6 stacks, 4.8 TB/s); k_per_cycle, a mapping too, keeps bf16."""
    path = write(
        tmp_path / "wide.yaml",
        "extends: h200\nhbm:\n  stacks: 8\ncores:\n  matrix_units:\n    k_per_cycle: {fp8: 4}\n",
    )
    chip, h200 = loader.load_system(path)[0].chip, loader.load_system("h200")[0].chip
    assert chip.hbm.stacks == 8 and chip.hbm.peak_bandwidth_bytes_per_s == pytest.approx(6.4e12)
    assert chip.hbm.latency_s == h200.hbm.latency_s and chip.hbm.capacity_bytes == h200.hbm.capacity_bytes
    assert dict(chip.core.array.k_per_cycle) == {"bf16": 1, "fp16": 1, "fp8": 4, "int8": 2}
    assert chip.clock_hz == h200.clock_hz and chip.l2 == h200.l2


def test_a_list_replaces_the_bases(tmp_path):
    """h200x8 runs [ring, in_network]; the override's list is the whole list, its protocols stay."""
    from archsim.hardware.collectives import Algorithm

    path = write(tmp_path / "rings.yaml", "extends: h200x8\ninterconnect:\n  algorithms: [ring]\n")
    fabric = loader.load_system(path)[0].interconnect
    assert fabric.algorithms == (Algorithm.RING,)
    assert [p.name for p in fabric.protocols] == ["ll", "ll128", "simple"]


def test_bases_chain_and_the_nearest_file_wins(tmp_path):
    """c extends b (a path from c's folder) extends h200: b's clock, c's stacks over b's, h200's
    rest; the working directory plays no part."""
    write(tmp_path / "b.yaml", "extends: h200\nclock: 1.5 GHz\nhbm:\n  stacks: 5\n  latency: 1 us\n")
    path = write(tmp_path / "sub" / "c.yaml", "extends: ../b.yaml\nhbm:\n  stacks: 4\n")
    chip = loader.load_system(path)[0].chip
    assert (chip.clock_hz, chip.hbm.stacks, chip.hbm.latency_s) == (1.5e9, 4, 1e-6)
    assert chip.hbm.channels_per_stack == 16  # h200's


def test_null_removes_the_bases_key(tmp_path):
    """`power: null` drops h200's power section (the schema's default: none); `name: null` drops a
    required key, reported missing at the line that removed it."""
    path = write(tmp_path / "nopower.yaml", "extends: h200\npower: null\n")
    assert loader.load_system(path)[0].chip.power is None
    path = write(tmp_path / "noname.yaml", "extends: h200\nname: null\n")
    assert problems(loader.load_system, path) == [f"{path}:2: name: missing required key"]


def test_a_workload_extends_a_workload(tmp_path):
    path = write(tmp_path / "big_batch.yaml", "extends: llama3_8b\nscenario:\n  batch: 4\n")
    workload, base = loader.load_workload(path)[0], loader.load_workload("llama3_8b")[0]
    assert workload.scenario.batch == 4 and base.scenario.batch != 4
    assert workload.scenario.prompt_tokens == base.scenario.prompt_tokens and workload.model == base.model


def test_a_mapping_given_to_the_api_extends_too():
    hw = api.load_system({"extends": "h200", "clock": "1 GHz"})
    assert hw.system.chip.clock_hz == 1e9 and hw.system.chip.cores == 132
    with pytest.raises(ConfigError, match=r"^<python>: extends: expected a shipped hardware name"):
        api.load_system({"extends": 5})


# --- where problems are reported -------------------------------------------------------------------


def test_a_bad_override_is_located_in_the_extending_file(tmp_path):
    path = write(tmp_path / "bad.yaml", "extends: h200\nclock: 1.5 GHz\nhbm:\n  stacks: -2\n")
    assert problems(loader.load_system, path) == [f"{path}:4: hbm.stacks: must be greater than 0 (got -2)"]


def test_a_bad_inherited_value_is_located_in_its_base(tmp_path):
    """The base holds the bad value and the extending file another key: the problem is at the
    base's line, as loading the base itself reports it."""
    base = write(tmp_path / "base.yaml", H200.replace("  count: 132", "  count: -4"))
    path = write(tmp_path / "child.yaml", "extends: base.yaml\nclock: 1.5 GHz\n")
    where = f"{base}:{line_of(base, 'count: -4')}: cores.count: "
    assert [p for p in problems(loader.load_system, path) if p.startswith(where)]
    assert problems(loader.load_system, path) == problems(loader.load_system, base)


def test_a_cross_check_points_at_the_override(tmp_path):
    """The fabric's own checks (not the schema's) locate the torus the extending file gives."""
    path = write(tmp_path / "torus.yaml", "extends: tpu_v5e_x8\ninterconnect:\n  torus: [2, 2]\n")
    (problem,) = problems(loader.load_system, path)
    assert problem.startswith(f"{path}:3: interconnect.torus: must be 2 dimension(s) whose product is chips (8)")


def test_a_base_that_is_not_yaml_is_its_own_problem(tmp_path):
    base = write(tmp_path / "base.yaml", "name: [unclosed\n")
    path = write(tmp_path / "child.yaml", "extends: base.yaml\n")
    (problem,) = problems(loader.load_system, path)
    assert problem.startswith(f"{base}:") and "not valid YAML" in problem


# --- bases that cannot be ------------------------------------------------------------------------


def test_a_circle_of_bases_is_one_problem(tmp_path):
    a = write(tmp_path / "a.yaml", "extends: b.yaml\nclock: 1 GHz\n")
    b = write(tmp_path / "b.yaml", "name: x\nextends: a.yaml\n")
    assert problems(loader.load_system, a) == [f"{b}:2: extends: circular: {a} extends {b} extends {a}"]
    self = write(tmp_path / "self.yaml", "extends: self.yaml\n")
    assert problems(loader.load_system, self) == [f"{self}:1: extends: a file cannot extend itself (got 'self.yaml')"]


def test_a_missing_base_is_one_problem(tmp_path):
    path = write(tmp_path / "gone.yaml", "extends: nothing.yaml\n")
    assert problems(loader.load_system, path) == [f"{path}:1: extends: no such file: {tmp_path / 'nothing.yaml'}"]
    path = write(tmp_path / "typo.yaml", "extends: h2000\n")
    (problem,) = problems(loader.load_system, path)
    assert problem.startswith(f"{path}:1: extends: 'h2000': no such file or shipped hw_configs name")
    assert "did you mean 'h200'?" in problem


@pytest.mark.parametrize("value", ["3", "[h200]", "{name: h200}", "''", ""])
def test_extends_must_be_a_name(tmp_path, value):
    path = write(tmp_path / "odd.yaml", f"name: x\nextends: {value}\n")
    (problem,) = problems(loader.load_system, path)
    assert problem.startswith(f"{path}:2: extends: expected a shipped hardware name or a file's path (got ")


def test_a_base_of_the_other_kind_is_refused(tmp_path):
    workload = ROOT / "workloads" / "llama3_8b.yaml"
    path = write(tmp_path / "chip.yaml", f"extends: {workload}\n")
    assert problems(loader.load_system, path) == [
        f"{path}:1: extends: {workload} is a workload file (it has `model`), not a hardware file"
    ]
    path = write(tmp_path / "model.yaml", "extends: ../hw/h200.yaml\n")
    chip = write(tmp_path.parent / "hw" / "h200.yaml", H200)
    assert problems(loader.load_workload, path) == [
        f"{path}:1: extends: {tmp_path / '..' / 'hw' / 'h200.yaml'} is a hardware file (it has `clock`), not a workload file"
    ]
    assert Path(chip).is_file()


def test_the_kind_markers_are_each_kinds_own_required_keys():
    """ONLY_IN tells the kinds apart by keys each schema requires and the other has not."""
    from archsim.config.hw_schema import HardwareCfg
    from archsim.config.workload_schema import WorkloadCfg

    schemas = {"hardware": HardwareCfg, "workload": WorkloadCfg}
    for kind, keys in ONLY_IN.items():
        other = next(s for k, s in schemas.items() if k != kind)
        for key in keys:
            assert schemas[kind].model_fields[key].is_required() and key not in other.model_fields


def test_a_chain_too_deep_is_refused(tmp_path):
    for i in range(MAX_DEPTH + 1):
        write(tmp_path / f"f{i}.yaml", f"extends: f{i + 1}.yaml\n")
    write(tmp_path / f"f{MAX_DEPTH + 1}.yaml", H200)
    (problem,) = problems(loader.load_system, str(tmp_path / "f0.yaml"))
    assert f"extends: more than {MAX_DEPTH} files extend one another" in problem


def test_the_command_line_reports_a_bad_base_in_one_line_and_exits_2(tmp_path, capsys):
    a = write(tmp_path / "a.yaml", "extends: b.yaml\n")
    write(tmp_path / "b.yaml", "extends: a.yaml\n")
    assert main(["run", "--hw", a, "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "extends: circular:" in err[0]


# --- what the merged document is ----------------------------------------------------------------


def test_extending_and_overriding_nothing_is_the_base(tmp_path):
    """The resolved configuration, its hash and the System are the base's."""
    path = write(tmp_path / "same.yaml", "extends: h200\n")
    (system, config), (h200, h200_config) = loader.load_system(path), loader.load_system("h200")
    assert config == h200_config and config_hash(config) == config_hash(h200_config)
    assert system == h200 and system.source == path
    same, base = tmp_path / "same.json", tmp_path / "h200.json"
    for hw, out in ((path, same), ("h200", base)):
        assert main(["run", "--hw", hw, "--prompt", "64", "--generate", "2", "--quiet", "--json", str(out)]) == 0
    import json

    a, b = json.loads(same.read_text()), json.loads(base.read_text())
    assert a["config_hash"] == b["config_hash"] and a["config"] == b["config"] and a["ttft_s"] == b["ttft_s"]


def test_set_applies_on_top_of_the_merged_document(tmp_path):
    """--set, the API's with_params and a sweep's values land on the merged document: the base's
    6 stacks, the file's 5, then the value set (4)."""
    from archsim.sweep.design import DesignCache

    path = write(tmp_path / "five.yaml", "extends: h200\nhbm:\n  stacks: 5\n")
    doc = loader.read_config(path, "hardware")
    system, config, _ = loader.build("hardware", doc, [(("hbm", "stacks"), 4)])
    assert system.chip.hbm.stacks == 4 and config["hbm"]["stacks"] == 4
    assert system.chip.hbm.latency_s == loader.load_system("h200")[0].chip.hbm.latency_s
    assert api.load_system(path).with_params({"hbm.stacks": 4}).system == system
    workload = loader.resolve_path("llama3_8b", "workloads")
    design = DesignCache().design(path, ((("hbm", "stacks"), 4),), workload, ())
    assert design.system == system
    out = tmp_path / "run.json"
    args = ["run", "--hw", path, "--set", "hardware.hbm.stacks=4", "--prompt", "64", "--generate", "2"]
    assert main([*args, "--quiet", "--json", str(out)]) == 0
    import json

    assert json.loads(out.read_text())["config"]["hardware"]["hbm"]["stacks"] == 4
    with pytest.raises(ConfigError, match=r"^--set: hbm.stacks: must be greater than 0"):
        loader.build("hardware", doc, [(("hbm", "stacks"), 0)])


def test_editing_a_base_reaches_the_memo_of_the_files_extending_it(cache_dir, tmp_path, monkeypatch):
    """The command line's memo of validated files (config/memo.py) keys a file by its merged
    document: a base edited after a load is read again, not the kept result."""
    monkeypatch.setattr(memo, "_active", [True])
    base = write(tmp_path / "base.yaml", H200)
    path = write(tmp_path / "child.yaml", "extends: base.yaml\nclock: 1.5 GHz\n")
    assert loader.load_system(path)[0].chip.hbm.stacks == 6
    assert loader.load_system(path)[0].chip.hbm.stacks == 6  # (read back)
    write(tmp_path / "base.yaml", H200.replace("  stacks: 6 ", "  stacks: 5 "))
    assert loader.load_system(path)[0].chip.hbm.stacks == 5
    kept = [p for p in cache_dir.rglob("*.json") if p.parent.name == memo.FOLDER]
    assert len(kept) == 2 and Path(base).is_file()


def test_a_sweep_spec_reads_no_base_outside_its_folders(tmp_path):
    """A spec names files under its folder, the shipped ones and --allow-path folders only: so
    must the files they extend be (a spec is often someone else's; its errors quote files)."""
    from archsim.sweep.design import resolve_file

    write(tmp_path / "private" / "chip.yaml", H200)
    write(tmp_path / "spec" / "inside.yaml", "extends: h200\nclock: 1 GHz\n")
    write(tmp_path / "spec" / "chip.yaml", "extends: ../private/chip.yaml\n")
    write(tmp_path / "spec" / "chain.yaml", "extends: inside.yaml\n")
    spec = tmp_path / "spec"
    assert resolve_file("inside.yaml", "hw_configs", spec) == str((spec / "inside.yaml").resolve())
    assert resolve_file("chain.yaml", "hw_configs", spec) == str((spec / "chain.yaml").resolve())
    with pytest.raises(ConfigError, match=r"extends .*private/chip.yaml, outside the spec's folder"):
        resolve_file("chip.yaml", "hw_configs", spec)
    assert resolve_file("chip.yaml", "hw_configs", spec, (str(tmp_path / "private"),)).endswith("chip.yaml")


def test_the_what_if_page_runs(tmp_path, monkeypatch, capsys):
    """docs/whatif.md: its files load, its commands run (on a short scenario here), and the
    error it shows is the one a bad override gives."""
    import re
    import shlex

    from tests.test_readme import blocks

    page = (ROOT / "docs" / "whatif.md").read_text()
    monkeypatch.chdir(tmp_path)
    files = {}
    for lang, body, _ in blocks(page):
        if lang == "yaml":
            name = re.match(r"# (\S+\.yaml):", body[0]).group(1)
            files[name] = write(tmp_path / name, "\n".join(body) + "\n")
    assert set(files) == {"h200_hbm4.yaml", "h200_hbm4_x8.yaml", "llama3_8b_long.yaml"}
    hbm4, hbm4_x8 = loader.load_system("h200_hbm4.yaml")[0], loader.load_system("h200_hbm4_x8.yaml")[0]
    # 6 stacks x 32 channels x 64 bit x 8 Gb/s / 8 = 12.288 TB/s
    assert hbm4.chip.hbm.peak_bandwidth_bytes_per_s == pytest.approx(12.288e12)
    assert hbm4_x8.chip == hbm4.chip and hbm4_x8.chips == 8
    commands = [line for lang, body, _ in blocks(page) if lang == "bash" for line in body if line.strip()]
    assert len(commands) == 5
    for line in commands:
        args = shlex.split(line, comments=True)
        assert args[0] == "archsim" and main([*args[1:], "--prompt", "64", "--generate", "2"]) == 0, line
    shown = next(line.strip() for line in page.splitlines() if "h200_hbm4.yaml:5:" in line)
    write(tmp_path / "h200_hbm4.yaml", Path(files["h200_hbm4.yaml"]).read_text().replace(": 32 ", ": 0  "))
    assert problems(loader.load_system, "h200_hbm4.yaml") == [shown]


def test_a_name_no_file_system_takes_is_one_problem(tmp_path):
    path = write(tmp_path / "long.yaml", f"extends: {'x' * 300}\n")
    (problem,) = problems(loader.load_system, path)
    assert problem.startswith(f"{path}:1: extends: 'xxx") and problem.endswith(
        "cannot name a file (File name too long)"
    )
