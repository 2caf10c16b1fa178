"""`roboswe compare`: series paired by task across runs, paired differences with intervals, pins checked."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from roboswe.protocol.recorder import (
    EventRecord,
    RunPins,
    RunRecord,
    SeriesRecord,
    VerificationRecord,
)

from roboswe.records.compare import ComparisonRefused, compare_runs
from roboswe.records.store import RunStore

from .conftest import trial_records

BUDGETS = {"trial_steps": 6000, "trial_seconds": 1800.0, "script_steps": 50, "script_seconds": 90.0}


def _build(run_dir, mode: str, patterns: dict[str, str], *, budgets=BUDGETS, image: str = "sha256:img1",
           admitted=None) -> str:
    """A run database with one verified series per task; 'I' marks an incomplete slot; ``admitted``: its file."""
    run_id = f"run-{mode}"
    now = time.time()
    records: list = [RunRecord(run_id=run_id, created_at=now, admitted_sha256=admitted.digest if admitted else "cd" * 32,
                               config=RunPins(tasks=list(patterns), run_config={"provider": {"kind": "python"}},
                                              admitted_path=str(admitted.path) if admitted else ""))]
    for n, (task, pattern) in enumerate(patterns.items()):
        sid = f"{run_id}/{task}"
        records.append(SeriesRecord(series_id=sid, run_id=run_id, task=task, model="python:demo", mode=mode,
                                    created_at=now + n, pins={"budgets": budgets, "manifest_digest": f"m-{task}"}))
        for t, c in enumerate(pattern, 1):
            outcome = {"S": "success", "F": "failure", "I": "incomplete"}[c]
            records += trial_records(sid, t, outcome)
            records.append(EventRecord(run_id=run_id, event="trial_opened", at=now, trial_id=f"{sid}/t{t}a0",
                                       data={"backend": "bwrap", "image_digest": image}))
            if c != "I":
                records.append(VerificationRecord(verification_id=f"{sid}/t{t}/v", trial_id=f"{sid}/t{t}a0",
                                                  verdict="verified", outcome_reproduced=True,
                                                  started_at=now, ended_at=now + 1))
    with RunStore.open(run_dir) as store:
        store.put_durable(*records)
    return str(run_dir)


@pytest.fixture
def retain_and_fresh(tmp_path):
    a = _build(tmp_path / "retain", "retain", {"Lift": "FFSSS", "Stack": "SSSSS", "Door": "FFFFF", "Wipe": "SFSSS"})
    b = _build(tmp_path / "fresh", "none", {"Lift": "FFFFS", "Stack": "SSSSS", "Door": "FSSSS", "Wipe": "SFIFS"})
    return a, b


def test_paired_differences_by_task_with_intervals(retain_and_fresh):
    a, b = retain_and_fresh
    c = compare_runs(a, b)
    assert c.tasks_both == ["Door", "Lift", "Stack"] and c.only_a == ["Wipe"] and c.only_b == [] and c.neither == []
    assert c.factor["mode"] == [["retain"], ["none"]] and c.pin_differences == []
    fig = {f.figure: f for f in c.figures}
    # per task (Door, Lift, Stack): A 0, .6, 1 vs .8, .2, 1
    assert fig["A"].a.mean == pytest.approx(1.6 / 3) and fig["A"].b.mean == pytest.approx(2.0 / 3)
    assert fig["A"].difference.mean == pytest.approx((0.8 - 0.4 + 0) / 3) and fig["A"].difference.n == 3
    assert fig["A"].difference.low < fig["A"].difference.mean < fig["A"].difference.high
    assert fig["trial1"].difference.mean == 0.0
    assert fig["success_by_T"].a.mean == pytest.approx(2 / 3) and fig["success_by_T"].b.mean == 1.0
    assert fig["gain"].difference.mean == pytest.approx(1 / 3)
    # paired: the interval of B - A is over task differences, not two independent samples
    assert fig["trial1"].difference.low == fig["trial1"].difference.high == 0.0


def test_a_mismatched_pin_is_refused_naming_it_unless_allowed(tmp_path):
    a = _build(tmp_path / "a", "retain", {"Lift": "FFSSS"})
    b = _build(tmp_path / "b", "none", {"Lift": "FSSSS"}, budgets={**BUDGETS, "trial_steps": 3000})
    with pytest.raises(ComparisonRefused, match=r"budgets \(Lift: trial_steps 6000 vs 3000\).*--allow-differ budgets"):
        compare_runs(a, b)
    c = compare_runs(a, b, allow_differ=["budgets"])
    (d,) = c.pin_differences
    assert d.field == "budgets" and d.allowed and "trial_steps 6000 vs 3000" in d.detail
    other_image = _build(tmp_path / "c", "none", {"Lift": "FSSSS"}, image="sha256:img2")
    with pytest.raises(ComparisonRefused, match=r"image \(\['sha256:img1'\] vs \['sha256:img2'\]\)"):
        compare_runs(a, other_image)


def _admit(path, *, created_at: str, build_seconds: float, fingerprint: str = "f1", budgets=None):
    """An admitted file of one task, Lift, with these measurements (and this reference fingerprint)."""
    from roboswe.evaluation.admission import (
        FORMAT,
        Admitted,
        AdmittedTask,
        write_admitted,
    )

    task = AdmittedTask(id="Lift", status="admitted", manifest={"id": "Lift", "budgets": budgets or {"trial": {"steps": 6000}}},
                        manifest_digest="m-Lift", privileged=False, fingerprint={"digest": fingerprint, "seed": 0},
                        measured={"build_seconds": build_seconds, "step_ms": build_seconds / 10, "observe_ms": [3.1]})
    sealed = write_admitted(Admitted(format=FORMAT, dataset={"id": "d", "tasks": ["Lift"]}, created_at=created_at,
                                     host={"python": "3.12"}, run_config_sha256=None, tasks=[task]), path)
    return SimpleNamespace(digest=sealed.digest, path=path)


def test_two_admissions_of_the_same_tasks_compare_and_a_changed_task_set_is_named(tmp_path):
    first = _admit(tmp_path / "a.json", created_at="2026-12-01T10:00:00Z", build_seconds=1.9)
    again = _admit(tmp_path / "b.json", created_at="2026-12-01T11:00:00Z", build_seconds=2.4)
    assert first.digest != again.digest  # the files differ, by measurements only
    a = _build(tmp_path / "a", "retain", {"Lift": "FFSSS"}, admitted=first)
    c = compare_runs(a, _build(tmp_path / "b", "none", {"Lift": "FSSSS"}, admitted=again))
    assert c.pin_differences == [] and c.tasks_both == ["Lift"]
    other = _admit(tmp_path / "c.json", created_at="2026-12-01T12:00:00Z", build_seconds=2.0, fingerprint="f2",
                   budgets={"trial": {"steps": 3000}})
    with pytest.raises(ComparisonRefused, match=r"admitted_set \(Lift budgets '[0-9a-f]{16}' vs '[0-9a-f]{16}', "
                                                r"Lift fingerprint 'f1' vs 'f2'\)"):
        compare_runs(a, _build(tmp_path / "c", "none", {"Lift": "FSSSS"}, admitted=other))


def test_compare_cli_json_table_and_viewer_page(retain_and_fresh, tmp_path):
    a, b = retain_and_fresh
    site = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "compare", a, b, "--json", "--viewer", str(site)],
                         check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (c,) = json.loads(out.stdout)
    assert c["tasks_both"] == ["Door", "Lift", "Stack"]
    assert {f["figure"] for f in c["figures"]} == {"A", "Q", "trial1", "success_by_T", "gain"}
    assert (site / "compare.html").exists() and b'"tasks_both":["Door","Lift","Stack"]' in (
        site / "data" / "compare.js").read_bytes()
    table = subprocess.run([sys.executable, "-m", "roboswe.cli", "compare", a, b], check=False, capture_output=True,
                           text=True, timeout=120, env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"})
    assert table.returncode == 0, table.stderr
    assert "paired by task over 3 task(s)" in table.stdout and "+0.13" in table.stdout
    assert "completed by A only: Wipe" in table.stdout


def test_compare_cli_refuses_with_the_difference_and_exit_2(tmp_path):
    a = _build(tmp_path / "a", "retain", {"Lift": "FFSSS"})
    b = _build(tmp_path / "b", "none", {"Lift": "FSSSS"}, budgets={**BUDGETS, "script_steps": 20})
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "compare", a, b], check=False, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "script_steps 50 vs 20" in out.stderr and "--allow-differ budgets" in out.stderr


def test_two_budget_tracks_are_never_pooled_the_protocol_pin_names_them(tmp_path):
    horizon = {**BUDGETS, "trial_steps": 1000, "interface": "actions", "track": "horizon",
               "identity": "gr1-tabletop-offline-standin/rgb256-qpos29/control-1000/v2"}
    decisions = {**horizon, "track": "decisions", "decision_calls": 200, "action_prefix": 5,
                 "identity": "gr1-tabletop-offline-standin/rgb256-qpos29/decision-200-prefix-5/v1"}
    a = _build(tmp_path / "a", "retain", {"Cube": "FFSSS"}, budgets=horizon)
    b = _build(tmp_path / "b", "retain", {"Cube": "FSSSS"}, budgets=decisions)
    with pytest.raises(ComparisonRefused, match=r"^.*protocol \(Cube: '[^']*/control-1000/v2 \(actions interface\)' vs "
                                                r"'[^']*/decision-200-prefix-5/v1 \(actions interface\)'\)"):
        compare_runs(a, b)
    coder = _build(tmp_path / "c", "retain", {"Cube": "FSSSS"}, budgets={**horizon, "interface": "code"})
    with pytest.raises(ComparisonRefused, match=r"protocol \(Cube: .*\(actions interface\)' vs .*\(code interface\)'\)"):
        compare_runs(a, coder)
    same = compare_runs(a, _build(tmp_path / "d", "none", {"Cube": "SSSSS"}, budgets=horizon))
    assert same.a.pins["protocol"] == {"Cube": f"{horizon['identity']} (actions interface)"}
