"""`--quiet` computes nothing it does not print: `archsim serve --quiet` prints the summary table
alone, so it prices no energy (a timeline priced step by step, with step shapes only the energy
needs) and builds no JSON document; `archsim run --quiet` builds neither the JSON document nor
the per-op rows. Each is built again where it is shown or written."""

import json

import pytest

from archsim.cli import main


@pytest.fixture
def counted(monkeypatch):
    """How often the serving energy, the JSON documents and the per-op rows are built."""
    from archsim.api import results
    from archsim.serving import energy

    calls = {"serve_energy": 0, "to_dict": 0, "ops": 0}

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(energy, "serve_energy", counting("serve_energy", energy.serve_energy))
    monkeypatch.setattr(results.ServeReport, "to_dict", counting("to_dict", results.ServeReport.to_dict))
    monkeypatch.setattr(results.RunReport, "to_dict", counting("to_dict", results.RunReport.to_dict))
    monkeypatch.setattr(results.RunReport, "ops", counting("ops", results.RunReport.ops))
    return calls


def test_serve_quiet_prices_no_energy_and_builds_no_json(tmp_path, tiny, counted, capsys):
    args = ["serve", "--workload", tiny, "--requests", "20", "--rate", "500"]
    assert main([*args, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "requests served / refused" in out and "energy per output token" not in out
    assert counted == {"serve_energy": 0, "to_dict": 0, "ops": 0}
    assert main(args) == 0  # the energy table is shown without --quiet
    assert "energy per output token" in capsys.readouterr().out
    assert counted["serve_energy"] == 1 and counted["to_dict"] == 0
    assert main([*args, "--quiet", "--json", str(tmp_path / "s.json")]) == 0  # and written with --json
    assert counted == {"serve_energy": 2, "to_dict": 1, "ops": 0}
    assert json.loads((tmp_path / "s.json").read_text())["energy"]["energy_j"] > 0


def test_run_quiet_builds_no_json_and_no_op_rows(tmp_path, tiny, counted, capsys):
    args = ["run", "--workload", tiny, "--generate", "2"]
    assert main([*args, "--quiet", "--interval", "90"]) == 0
    assert "time to first token" in capsys.readouterr().out
    assert counted["to_dict"] == counted["ops"] == 0
    assert main([*args, "--quiet", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["ttft_s"] > 0
    assert main([*args, "--quiet", "--format", "csv"]) == 0
    assert counted["to_dict"] == counted["ops"] == 1
