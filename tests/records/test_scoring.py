"""One scoring function: a run with every kind of slot, scored by hand; report --json and results.json agree."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import msgspec
import pytest
from roboswe.protocol.recorder import RunPins, RunRecord, SeriesRecord, VerificationRecord

from roboswe.evaluation.admission import FORMAT, Admitted, AdmittedTask, _content_digest
from roboswe.records.artifacts import build_results, load_results, write_results
from roboswe.records.reader import RunReader
from roboswe.records.report import run_summary

from .conftest import trial_records

RUN = "r1"
ADMITTED = ["Lift", "Stack", "Door", "Wipe", "Never"]


def _verify(trial_id: str, verdict: str, reproduced: bool | None) -> VerificationRecord:
    now = time.time()
    return VerificationRecord(verification_id=f"{trial_id}/v", trial_id=trial_id, verdict=verdict,
                              outcome_reproduced=reproduced, started_at=now, ended_at=now + 1)


def _verified(sid: str, index: int, outcome: str, steps: int = 100, attempt: int = 0, **kw) -> list:
    records = trial_records(sid, index, outcome, steps=steps, attempt=attempt, **kw)
    return [*records, _verify(f"{sid}/t{index}a{attempt}", "verified", True)]


def _admitted_file(path) -> str:
    tasks = [AdmittedTask(id=t, status="admitted", manifest={}, manifest_digest="d", privileged=False)
             for t in ADMITTED]
    tasks += [AdmittedTask(id="Broken", status="excluded", manifest={}, manifest_digest="", privileged=False,
                           reason="scene does not load: missing asset"),
              AdmittedTask(id="Spare", status="admitted", manifest={}, manifest_digest="d", privileged=False)]
    admitted = Admitted(format=FORMAT, dataset={}, created_at="", host={}, run_config_sha256=None, tasks=tasks)
    admitted = msgspec.structs.replace(admitted, digest=_content_digest(admitted))
    path.write_bytes(msgspec.json.encode(admitted))
    return admitted.digest


@pytest.fixture
def every_kind_of_slot(store, tmp_path):
    """Lift FFSSS verified (slot 2 incomplete, then re-run); Stack SSSSS (slot 3 interrupted, then re-run);
    Door and Wipe with every kind of unscored slot."""
    digest = _admitted_file(tmp_path / "admitted.json")
    now = time.time()
    records: list = [RunRecord(run_id=RUN, created_at=now, admitted_sha256=digest,
                               config=RunPins(tasks=["Lift", "Stack", "Door", "Wipe", "Never"],
                                              admitted_path=str(tmp_path / "admitted.json")))]
    for n, task in enumerate(["Lift", "Stack", "Door", "Wipe"]):
        records.append(SeriesRecord(series_id=f"{RUN}/{task}", run_id=RUN, task=task, model="demo", mode="retain",
                                    created_at=now + n))
    lift, stack, door, wipe = (f"{RUN}/{t}" for t in ("Lift", "Stack", "Door", "Wipe"))
    for t, (outcome, steps) in enumerate([("failure", 900), ("failure", 800), ("success", 600),
                                          ("success", 400), ("success", 300)], 1):
        if t == 2:  # ended incomplete (provider outage), then re-run as a linked attempt
            records += trial_records(lift, t, "incomplete")
            records += _verified(lift, t, outcome, steps, attempt=1, recovers=f"{lift}/t2a0")
            continue
        records += _verified(lift, t, outcome, steps)
    for t in (1, 2, 4, 5):
        records += _verified(stack, t, "success", 500)
    records += trial_records(stack, 3, None)  # interrupted: no end ...
    records += _verified(stack, 3, "success", 500, attempt=1, recovers=f"{stack}/t3a0")  # ... re-run as a link
    records += _verified(door, 1, "failure")
    records += [*trial_records(door, 2, "success"), _verify(f"{door}/t2a0", "mismatch", False)]
    records += [*trial_records(door, 3, "failure"), _verify(f"{door}/t3a0", "error", None)]
    records += trial_records(door, 4, "success")  # never replayed
    records += [*trial_records(door, 5, "failure"), _verify(f"{door}/t5a0", "mismatch", True)]  # diverged: still 0
    records += _verified(wipe, 1, "success") + _verified(wipe, 2, "failure") + _verified(wipe, 3, "success")
    records += trial_records(wipe, 4, "incomplete")  # provider outage; slot 5 never started
    store.put_durable(*records)
    return tmp_path / "run"


def test_every_kind_of_slot_scores_as_worked_by_hand(every_kind_of_slot):
    with RunReader(every_kind_of_slot) as reader:
        results = build_results(reader, RUN)
    series = {m.task: m for m in results.series}
    with RunReader(every_kind_of_slot) as reader:
        recovered = [v for v in reader.trials(f"{RUN}/Lift") if v.start.index == 2]
    assert [v.end.outcome for v in recovered] == ["incomplete", "failure"]  # both attempts kept
    assert recovered[0].recovered_by == recovered[1].trial_id
    assert series["Lift"].y == [0, 0, 1, 1, 1] and series["Lift"].completed
    assert series["Lift"].A == pytest.approx(0.6) and series["Lift"].Q == pytest.approx(0.6)
    assert series["Lift"].trajectory == "sustained_conversion" and series["Lift"].conversion_trial == 3
    assert series["Lift"].efficiency.steps_ratio == pytest.approx(2.0)  # 600 / 300, successes only
    assert series["Stack"].y == [1] * 5 and series["Stack"].completed and series["Stack"].A == 1.0
    assert series["Stack"].trajectory == "from_outset"
    door = series["Door"]
    assert door.statuses == ["failure", "mismatch", "replay_error", "unverified", "failure"]
    assert door.y == [0, None, None, None, 0] and not door.completed and door.A is None and door.Q is None
    assert door.unscored == {"mismatch": 1, "replay_error": 1, "unverified": 1, "incomplete": 0, "not_started": 0}
    wipe = series["Wipe"]
    assert wipe.statuses == ["success", "failure", "success", "incomplete", "not_started"]
    assert not wipe.completed and wipe.A is None and wipe.A_lower == pytest.approx(0.4) and wipe.Q_lower == 0.0

    (d,) = results.datasets
    assert (d.admitted_tasks, d.completed_tasks, d.series_recorded, d.series_completed) == (5, 2, 4, 2)
    assert d.missing_tasks == ["Door", "Wipe", "Never"]
    assert d.slots == {"success": 10, "failure": 5, "mismatch": 1, "replay_error": 1, "unverified": 1,
                       "incomplete": 1, "not_started": 1}
    assert d.missing_slots == 3 + 2 + 5
    assert d.A.mean == pytest.approx(0.8) and d.A.n == 2 and d.Q.mean == pytest.approx(0.8)
    assert d.A_lower.mean == pytest.approx((0.6 + 1 + 0 + 0.4 + 0) / 5) and d.A_lower.n == 5
    assert d.Q_lower.mean == pytest.approx((0.6 + 1) / 5)
    assert (d.trial1.numerator, d.trial1.denominator) == (1, 2)
    assert d.trial1.low == pytest.approx(0.0945, abs=1e-4) and d.trial1.high == pytest.approx(0.9055, abs=1e-4)
    assert [(p.numerator, p.denominator) for p in d.success_by_trial] == [(1, 2), (1, 2), (2, 2), (2, 2), (2, 2)]
    assert d.gain.mean == pytest.approx(0.5) and d.gain.n == 2 and d.gain.low <= 0.5 <= d.gain.high
    assert d.first_success == {"1": 1, "2": 0, "3": 1, "4": 0, "5": 0, "none": 0}
    assert (d.recovery.numerator, d.recovery.denominator) == (1, 1)
    # geometric mean over tasks of first/last: Lift 600/300 = 2, Stack 500/500 = 1
    assert d.efficiency_steps_ratio.mean == pytest.approx(2 ** 0.5) and d.efficiency_steps_ratio.n == 2
    assert d.headline.startswith("A = 0.80") and "over 2 of 5 admitted tasks" in d.headline
    assert "10 slot(s) missing" in d.headline and "lower bound counting them as failures: 0.40" in d.headline

    assert results.denominators.admitted == ADMITTED
    assert results.denominators.excluded == {"Broken": "scene does not load: missing asset",
                                             "Spare": "admitted, not selected for this run (--tasks)"}


def test_report_json_and_results_json_agree_on_every_figure(every_kind_of_slot):
    with RunReader(every_kind_of_slot) as reader:
        stored = write_results(every_kind_of_slot, build_results(reader, RUN))
    results = load_results(stored.path)
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "report", str(every_kind_of_slot), "--json"],
                         check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["datasets"] == results["datasets"]
    assert report["denominators"] == results["denominators"] and report["bootstrap"] == results["bootstrap"]
    assert [s["metrics"] for s in report["series"]] == results["series"]
    assert results["bootstrap"]["resamples"] == 10_000 and results["bootstrap"]["seed"] == 0


def test_report_table_shows_unscored_columns_headline_and_exclusions(every_kind_of_slot):
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "report", str(every_kind_of_slot)],
                         check=False, capture_output=True, text=True, timeout=120,
                         env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "10 slot(s) missing" in text and "excluded Broken: scene does not load" in text
    assert "replay_error" in text and "unverified" in text and "not_started" in text and "superseded" in text
    assert "1 / 1 / 1 / 1 / 1" in text  # mismatch / replay error / unverified / incomplete / not started


def test_an_edited_admitted_file_leaves_exclusions_unknown_not_wrong(every_kind_of_slot, tmp_path):
    path = tmp_path / "admitted.json"
    data = json.loads(path.read_bytes())
    data["tasks"][-1]["reason"] = "edited"
    path.write_text(json.dumps(data))
    with RunReader(every_kind_of_slot) as reader:
        summary = run_summary(reader)
    assert summary["denominators"]["excluded"] == {}
    assert summary["denominators"]["source"].startswith("unknown:")
    assert summary["denominators"]["admitted"] == ADMITTED


def test_an_incomplete_series_cannot_raise_the_headline_unseen(store, tmp_path):
    """Issue 16's two-task case: Door failed honestly (A = 0.50), or its trials ended incomplete (a crashed
    harness): A over completed tasks rises to 1.00, but the headline says so and the lower bound stays 0.50."""
    from roboswe.records.metrics import series_metrics, series_outcomes
    from roboswe.records.scoring import dataset_metrics

    now = time.time()
    records: list = [RunRecord(run_id=RUN, created_at=now, config=RunPins(tasks=["Lift", "Door"]))]
    for task in ("Lift", "Door", "DoorCrashed"):
        records.append(SeriesRecord(series_id=f"{RUN}/{task}", run_id=RUN, task=task, model="m", mode="retain",
                                    created_at=now))
    for t in range(1, 6):
        records += _verified(f"{RUN}/Lift", t, "success")
        records += _verified(f"{RUN}/Door", t, "failure")
        records += trial_records(f"{RUN}/DoorCrashed", t, "incomplete")
    store.put_durable(*records)
    with RunReader(tmp_path / "run") as reader:
        by_task = {m.task: m for m in (series_metrics(o) for o in series_outcomes(reader, RUN))}
    honest = {"Lift": by_task["Lift"], "Door": by_task["Door"]}
    crashed = {"Lift": by_task["Lift"], "Door": msgspec.structs.replace(by_task["DoorCrashed"], task="Door")}
    (h,) = dataset_metrics(list(honest.values()), admitted_tasks=["Lift", "Door"])
    (c,) = dataset_metrics(list(crashed.values()), admitted_tasks=["Lift", "Door"])
    assert h.A.mean == pytest.approx(0.5) and h.A_lower.mean == pytest.approx(0.5) and h.missing_slots == 0
    assert c.A.mean == pytest.approx(1.0) and c.completed_tasks == 1
    assert c.A_lower.mean == pytest.approx(0.5) and c.missing_slots == 5  # the bound does not move
    assert c.headline.startswith("A = 1.00") and "over 1 of 2 admitted tasks; 5 slot(s) missing" in c.headline
    assert "lower bound counting them as failures: 0.50" in c.headline
