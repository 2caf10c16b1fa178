"""`roboswe export RUN_DIR --table FILE`: one row per slot, the report's numbers, CSV and Parquet alike."""

from __future__ import annotations

import csv

import pytest

from roboswe.cli import main
from roboswe.records.reader import RunReader
from roboswe.records.report import run_summary
from roboswe.viewer._table import COLUMNS


def test_the_table_has_one_row_per_slot_with_the_reports_numbers(fixture_run, tmp_path, capsys):
    out = tmp_path / "trials.csv"
    assert main(["export", str(fixture_run["run_dir"]), "--table", str(out)]) == 0
    assert "table written" in capsys.readouterr().out and not (tmp_path / "index.html").exists()  # no site asked for
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["task"], r["trial"]) for r in rows] == [("lift-panda", str(i)) for i in range(1, 6)] + [
        ("stack-panda", str(i)) for i in range(1, 6)]
    lift, stack = rows[:5], rows[5:]
    assert [r["slot"] for r in lift] == ["failure", "success", "success", "mismatch", "success"]
    assert [r["y"] for r in lift] == ["0", "1", "1", "", "1"]  # a mismatch is unscored, not a zero
    assert [r["slot"] for r in stack] == ["failure", "incomplete", "unverified", "not_started", "not_started"]
    assert stack[3]["trial_id"] == "" and stack[3]["attempts"] == "0"  # a slot no attempt reached
    assert lift[1]["verdict"] == "verified" and lift[1]["control_steps"] == "26"
    assert lift[1]["input_tokens"] == "1240" and lift[1]["output_tokens"] == "80"
    with RunReader(fixture_run["run_dir"]) as reader:
        summary = run_summary(reader)
    lift_metrics = summary["series"][0]["metrics"]
    assert sum(int(r["y"] or 0) for r in lift) / 5 == lift_metrics["A_lower"]  # unscored as failures: the lower bound
    assert sum(float(r["cost"] or 0) for r in rows) == pytest.approx(summary["usage"]["run_cost"]["amount"])


def test_parquet_holds_the_same_rows_typed(fixture_run, tmp_path):
    import pyarrow.parquet as pq  # the tables extra, installed with the test extra
    assert main(["export", str(fixture_run["run_dir"]), "--table", str(tmp_path / "trials.parquet")]) == 0
    table = pq.read_table(tmp_path / "trials.parquet")
    assert table.column_names == [name for name, _ in COLUMNS]
    assert str(table.schema.field("y").type) == "int64" and str(table.schema.field("cost").type) == "double"
    rows = table.to_pylist()
    assert len(rows) == 10 and rows[3]["y"] is None and rows[1]["y"] == 1 and rows[8]["slot"] == "not_started"


def test_a_wrong_table_name_or_nothing_to_write_is_refused_before_any_work(tmp_path, capsys):
    assert main(["export", str(tmp_path / "no-such-run"), "--table", str(tmp_path / "trials.xlsx")]) == 2
    assert "expected a .csv or .parquet file name" in capsys.readouterr().err
    assert main(["export", str(tmp_path)]) == 2
    assert "--out SITE_DIR" in capsys.readouterr().err
