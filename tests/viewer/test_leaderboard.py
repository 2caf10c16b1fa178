"""`roboswe leaderboard`: models x tasks over runs with the report's numbers, pin groups as `roboswe compare` checks.

The runs are copies of the shared fixture run with records appended (the run database is
append-only): a later verification that completes Lift, a second model's series, and a
series pinned to another protocol."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from roboswe.protocol.recorder import (
    SeriesRecord,
    TrialEnded,
    TrialStarted,
    VerificationRecord,
)

from roboswe.cli import main
from roboswe.records.reader import RunReader
from roboswe.records.report import run_summary
from roboswe.records.store import RunStore
from tests.viewer.fixture_run import RUN_ID


def _append(run_dir: Path, records: list) -> None:
    store = RunStore.open(run_dir)
    try:
        for r in records:
            store.put(r)
    finally:
        store.close()


def _series(series_id: str, task: str, model: str, outcomes: str, pins: dict, at: float) -> list:
    """A verified series: one trial per letter of ``outcomes`` (s success, f failure)."""
    records: list = [SeriesRecord(series_id=series_id, run_id=RUN_ID, task=task, model=model, mode="retain",
                                  created_at=at, pins=pins)]
    for i, o in enumerate(outcomes, 1):
        tid = f"{series_id}/t{i}a0"
        outcome = "success" if o == "s" else "failure"
        records += [TrialStarted(trial_id=tid, series_id=series_id, index=i, fingerprint="f" * 64, started_at=at + i),
                    TrialEnded(trial_id=tid, outcome=outcome, reason="finish", cause="finish", control_steps=10,
                               sim_time=0.5, active_time=1.0, timing={}, ended_at=at + i + 0.5,
                               success_interval=(5, 9) if outcome == "success" else None),
                    VerificationRecord(verification_id=f"{tid}/v0", trial_id=tid, verdict="verified",
                                       outcome_reproduced=True, started_at=at + i + 0.6, ended_at=at + i + 0.7)]
    return records


@pytest.fixture(scope="module")
def runs(fixture_run, tmp_path_factory):
    base = tmp_path_factory.mktemp("leaderboard")
    out = {}
    for name in ("a", "b", "c"):
        out[name] = base / name
        shutil.copytree(fixture_run["run_dir"], out[name])
    late = 1_764_600_000.0
    lift4 = fixture_run["lift"][3]  # its replay disagreed; a later replay agrees: Lift is completed in run a
    _append(out["a"], [VerificationRecord(verification_id=f"{lift4}/v1", trial_id=lift4, verdict="verified",
                                          outcome_reproduced=True, started_at=late, ended_at=late + 1)])
    _append(out["b"], _series(f"{RUN_ID}/lift-panda-b", "lift-panda", "fixture-b", "ffsss", {}, late))
    _append(out["c"], _series(f"{RUN_ID}/lift-panda-c", "lift-panda", "fixture-c", "sssss",
                              {"budgets": {"identity": "other-track/v9"}}, late))
    return out


def test_models_by_tasks_carry_the_reports_figures_and_differing_pins_split_the_runs(runs, tmp_path, capsys):
    # run b is a copy of the fixture run too: given first, its "fixture" series are superseded by run a's
    assert main(["leaderboard", str(runs["b"]), str(runs["a"]), str(runs["c"]), "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    first, second = board["groups"]
    assert first["runs"] == [str(runs["b"]), str(runs["a"])]
    assert second["runs"] == [str(runs["c"])]
    assert [d["field"] for d in second["differs_from_first"]] == ["protocol"]  # compare's pin check names it
    models = {m["model"]: m for m in first["models"]}
    assert sorted(models) == ["fixture", "fixture-b"]
    with RunReader(runs["a"]) as reader:
        report = run_summary(reader)
    (report_fixture,) = report["datasets"]
    for figure in ("A", "Q", "A_lower", "trial1", "gain", "success_by_trial", "missing_slots"):
        assert models["fixture"][figure] == report_fixture[figure], figure  # the report's numbers, run a alone
    assert models["fixture"]["A"]["mean"] == pytest.approx(0.8) and models["fixture"]["completed_tasks"] == 1
    lift = models["fixture"]["cells"]["lift-panda"]
    assert lift["y"] == [0, 1, 1, 1, 1] and lift["run_dir"] == str(runs["a"])
    assert lift["cost"] == report["usage"]["series_cost"][f"{RUN_ID}/lift-panda"]
    assert models["fixture"]["cost"]["reason"] == "no provider calls recorded"  # Stack made no calls
    b = models["fixture-b"]
    assert b["cells"]["lift-panda"]["y"] == [0, 0, 1, 1, 1] and b["trial1"]["value"] == 0.0
    assert [p["value"] for p in b["success_by_trial"]] == [0.0, 0.0, 1.0, 1.0, 1.0] and b["gain"]["mean"] == 1.0
    assert b["missing_slots"] == 5  # Stack, admitted in run b, has no series of this model
    assert models["fixture"]["cells"]["lift-panda"]["run_dir"] == str(runs["a"])  # a task's latest series
    assert [r["group"] for r in board["runs"]] == [1, 1, 2]


def test_allowed_differences_pool_the_runs_and_the_pages_are_written(runs, tmp_path, capsys):
    site = tmp_path / "board"
    assert main(["leaderboard", str(runs["a"]), str(runs["c"]), "--allow-differ", "protocol", "--out", str(site)]) == 0
    out = capsys.readouterr().out
    assert "pooled although protocol differs" in out and "fixture-c" in out
    tables = [line for line in out.splitlines() if not line.startswith(("group", "intervals", "  "))]
    assert tables and max(len(line) for line in tables) <= 80  # the tables read at 80 columns
    assert (site / "leaderboard.html").is_file() and (site / "runs.html").is_file()
    text = (site / "data" / "leaderboard.js").read_text()
    data = json.loads(text[text.index(",") + 1:text.rindex(")")])
    assert len(data["groups"]) == 1 and [r["run_dir"] for r in data["runs"]] == [str(runs["a"]), str(runs["c"])]


def test_a_run_directory_without_a_database_is_named(tmp_path, capsys):
    assert main(["leaderboard", str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


@pytest.mark.exhaustive
def test_the_leaderboard_and_run_pages_render_from_file_url(runs, tmp_path, browser):
    from tests.viewer.test_viewer import page_errors, wait_for

    site = tmp_path / "board"
    assert main(["leaderboard", str(runs["b"]), str(runs["a"]), str(runs["c"]), "--out", str(site)]) == 0
    page_errors(browser)
    browser.get((site / "leaderboard.html").as_uri())
    wait_for(browser, "document.body.dataset.ready")
    assert browser.execute_script("return document.querySelectorAll('section.group').length") == 2
    assert browser.execute_script("return document.querySelectorAll('svg.success-plot polyline').length") == 3
    assert "pinned unlike group 1: protocol" in browser.find_element("id", "boards").text
    browser.get((site / "runs.html").as_uri())
    wait_for(browser, "document.body.dataset.ready")
    rows = browser.execute_script("return [...document.querySelectorAll('table.runs tr')].slice(1).map(r => r.cells[3].textContent)")
    assert rows == ["1", "1", "2"]
    assert page_errors(browser) == []
