"""Nothing read from a sweep's results folder is trusted (archsim/sweep/store.py): a manifest of
another format, a value no sweep writes, or a part of another sweep's settings is refused with
one line naming the folder or the part, never ranked."""

import json

import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from archsim.sweep.pareto import Goal, find_front  # noqa: E402
from archsim.sweep.store import (  # noqa: E402
    MANIFEST,
    SETTINGS_KEY,
    ResultStore,
    StoreError,
    read_manifest,
    read_results,
    settings_digest,
)

COLUMNS = [("clock", "float", "parameter"), ("cores", "int", "parameter"), ("tpot_ms", "float", "objective")]
SETTINGS = {"kv_stride": 64, "columns": [list(c) for c in COLUMNS], "derived": {}, "constraints": [], "objectives": {}}
GOALS = [Goal("tpot_ms", False), Goal("clock", False)]


def _row(i: int, **over) -> dict:
    return {
        "config_hash": f"{i:016x}",
        "status": "ok",
        "error": None,
        "fidelity": "full",
        "clock": 1.0 + i,
        "cores": 100 + i,
        "tpot_ms": 5.0 - i,
        **over,
    }


def _folder(tmp_path, *rows, settings=SETTINGS):
    out = tmp_path / "out"
    with ResultStore(out, settings, COLUMNS) as store:
        store.write_part(list(rows) or [_row(0), _row(1)])
    return out


def test_a_sweeps_folder_reads_back_and_its_parts_name_their_settings(tmp_path):
    out = _folder(tmp_path)
    table = read_results(out)
    assert table.num_rows == 2 and len(find_front(out, GOALS).rows) == 2
    (part,) = (out / "points").iterdir()
    assert pq.read_schema(part).metadata[SETTINGS_KEY].decode() == settings_digest(SETTINGS)


@pytest.mark.parametrize("fmt", [3, 0, "1", True, None, 1.0, 10**30])
def test_a_manifest_of_another_format_is_refused(tmp_path, fmt):
    out = _folder(tmp_path)
    manifest = json.loads((out / MANIFEST).read_text())
    if fmt is None:
        del manifest["format"]
    else:
        manifest["format"] = fmt
    (out / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match="this archsim reads format 2") as err:
        read_manifest(out)
    assert "\n" not in str(err.value) and str(out / MANIFEST) in str(err.value)
    with pytest.raises(StoreError):
        ResultStore(out, SETTINGS, COLUMNS).open()  # nor resumed into


@pytest.mark.parametrize(
    "columns", [None, "x", [["clock", "float"]], [["clock", "complex", "parameter"]], [[1, "float", "parameter"]]]
)
def test_a_manifest_whose_columns_are_not_a_sweeps_is_refused(tmp_path, columns):
    out = _folder(tmp_path)
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["settings"]["columns"] = columns
    (out / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match="settings are not as a sweep writes them"):
        read_results(out)


@pytest.mark.parametrize(
    ("over", "column"),
    [
        ({"tpot_ms": float("nan")}, "tpot_ms"),
        ({"tpot_ms": float("inf")}, "tpot_ms"),
        ({"tpot_ms": None}, "tpot_ms"),
        ({"clock": float("nan")}, "clock"),
        ({"status": "great"}, "status"),
        ({"config_hash": "not-a-hash"}, "config_hash"),
        ({"config_hash": f"{1:016x}"}, "config_hash"),  # the other row's: one point recorded twice
    ],
)
def test_a_tampered_value_is_refused(tmp_path, over, column):
    out = _folder(tmp_path, _row(0, **over), _row(1))
    with pytest.raises(StoreError, match=f"column {column}: ") as err:
        find_front(out, GOALS)
    assert "\n" not in str(err.value)


def test_a_failed_rows_missing_objective_is_as_written(tmp_path):
    out = _folder(tmp_path, _row(0, status="failed", error="why", tpot_ms=None), _row(1))
    assert len(find_front(out, GOALS).rows) == 1


def test_a_part_of_another_sweep_is_refused_not_ranked(tmp_path):
    """Two sweeps of the same columns at another KV stride: a part copied from one folder into the
    other would rank designs timed differently together."""
    out = _folder(tmp_path)
    other = _folder(tmp_path / "b", _row(5), settings={**SETTINGS, "kv_stride": 1})
    (part,) = (other / "points").iterdir()
    (out / "points" / part.name).write_bytes(part.read_bytes())
    with pytest.raises(StoreError, match="other settings") as err:
        find_front(out, GOALS)
    assert part.name in str(err.value)


def test_a_part_written_before_parts_named_their_settings_is_read(tmp_path):
    out = _folder(tmp_path)
    (part,) = (out / "points").iterdir()
    table = pq.read_table(part).replace_schema_metadata(None)
    pq.write_table(table, part)
    assert read_results(out).num_rows == 2


def test_pareto_says_it_in_one_line(tmp_path, capsys):
    from archsim.cli import main

    out = _folder(tmp_path, _row(0, tpot_ms=float("nan")), _row(1))
    assert main(["pareto", str(out), "--minimize", "tpot_ms", "--minimize", "clock", "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tpot_ms" in err and str(out) in err


def test_an_objective_that_is_not_finite_fails_its_point(h200):
    """An objective of tpot_s * 1e308 * 1e308 overflows to inf: the point is recorded failed, with
    why, and tpot_s * 1000 beside it runs."""
    from dataclasses import replace

    from test_serving import TINY

    from archsim.graph.model import Scenario
    from archsim.sweep.design import Design
    from archsim.sweep.directions import Direction
    from archsim.sweep.evaluate import Evaluation, evaluate_point
    from archsim.sweep.expr import parse_expr
    from archsim.sweep.metrics import metric_names
    from archsim.sweep.points import PointTask
    from archsim.sweep.spec import Objective

    w = replace(TINY, scenario=Scenario(1, 16, 2))
    task = PointTask("0" * 16, (), Design(h200, w, "0" * 16))
    for text, status in (("tpot_s * 1000", "ok"), ("tpot_s * 1e308 * 1e308", "failed")):
        ev = Evaluation((), (Objective("x", parse_expr(text, metric_names()), Direction.MAXIMIZE),), 64)
        row = evaluate_point(task, ev)
        assert row["status"] == status, row
    assert "not a finite number" in row["error"]


def test_a_resumed_sweep_refuses_a_status_or_hash_no_sweep_writes(tmp_path):
    """A point recorded as 'great' would be skipped as done: the resume refuses the folder."""
    for bad in ({"status": "great"}, {"config_hash": "zz"}):
        out = _folder(tmp_path / str(len(bad)) / next(iter(bad)), _row(0, **bad), _row(1))
        with pytest.raises(StoreError, match=next(iter(bad))), ResultStore(out, SETTINGS, COLUMNS) as store:
            store.done()


def test_a_part_laid_out_directly_is_the_table_pyarrow_makes_of_the_same_rows():
    """`table_of` builds a part's columns in Arrow's buffers itself; for any rows, of the types a
    sweep records or not, it gives what `pyarrow.Table.from_pylist` gives, or leaves the rows to
    it (so a value it refuses is refused the same way). E.g. 2**53 + 1 in a float column is not
    a float64 exactly: pyarrow refuses it, and so does the store."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from archsim.sweep.store import table_of

    schema = pa.schema([("s", pa.string()), ("b", pa.bool_()), ("i", pa.int64()), ("f", pa.float64())])
    anything = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=False), st.text(max_size=5)
    )
    row = st.fixed_dictionaries(
        {},
        optional={
            "s": st.one_of(st.none(), st.text(max_size=5), anything),
            "b": st.one_of(st.none(), st.booleans(), anything),
            "i": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), anything),
            "f": st.one_of(st.none(), st.floats(allow_nan=False), st.integers(-(2**60), 2**60), anything),
        },
    )

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(st.lists(row, max_size=6))
    def same(rows):
        try:
            want = pa.Table.from_pylist(rows, schema=schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            with pytest.raises(type(e)):
                table_of(rows, schema)
            return
        assert table_of(rows, schema).equals(want)

    same()
    with pytest.raises(pa.ArrowInvalid):
        table_of([{"f": 2**53 + 1}], schema)
