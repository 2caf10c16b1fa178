"""Where a resumed series goes on, read from a real run database (no processes)."""

from __future__ import annotations

import time

import pytest
from roboswe.protocol.recorder import RunRecord, SeriesRecord, TrialEnded, TrialStarted

from roboswe.evaluation.series import SeriesHistory
from roboswe.records.reader import RunReader
from roboswe.records.store import RunStore

SERIES = "run/lift-panda"


def start(index: int, attempt: int = 0, recovers: str | None = None) -> TrialStarted:
    return TrialStarted(trial_id=f"{SERIES}/t{index}a{attempt}", series_id=SERIES, index=index, attempt=attempt,
                        fingerprint="f" * 64, started_at=time.time(), recovers=recovers)


def end(index: int, attempt: int = 0, outcome: str = "success", reason: str = "success_interval") -> TrialEnded:
    cause, _, detail = reason.partition(": ")  # the end as trial.py records it: cause, detail, "cause: detail"
    return TrialEnded(trial_id=f"{SERIES}/t{index}a{attempt}", outcome=outcome, reason=reason, cause=cause, detail=detail,
                      control_steps=50 * index, sim_time=2.5, active_time=3.0, ended_at=time.time())


@pytest.fixture
def history(tmp_path):
    def read(*records) -> SeriesHistory:
        store = RunStore.open(tmp_path / "run")
        store.put_durable(RunRecord(run_id="run", created_at=time.time()),
                          SeriesRecord(series_id=SERIES, run_id="run", task="lift-panda", model="python:x",
                                       mode="retain", trials=3, created_at=time.time()), *records)
        store.close()
        with RunReader(tmp_path / "run") as reader:
            return SeriesHistory.read(reader, SERIES, 3)

    return read


def test_a_new_series_starts_at_trial_one(tmp_path):
    RunStore.open(tmp_path / "run").close()
    with RunReader(tmp_path / "run") as reader:
        h = SeriesHistory.read(reader, SERIES, 3)
    assert (h.recorded, h.next_index, h.interrupted, h.next_attempt, h.previous) == (False, 1, None, 0, None)


def test_a_started_trial_without_an_end_is_rerun_as_the_next_attempt(history):
    h = history(start(1), end(1), start(2))
    assert h.next_index == 2 and h.next_attempt == 1
    assert h.interrupted.trial_id == f"{SERIES}/t2a0"
    assert [v.trial_id for v in h.kept] == [f"{SERIES}/t1a0"]
    assert h.previous == {"index": 1, "outcome": "success", "reason": "success_interval", "control_steps": 50,
                          "sim_time": 2.5, "active_time": 3.0}


def test_killed_after_closing_the_interrupted_trial_but_before_its_rerun_started(history):
    h = history(start(1), end(1), start(2), end(2, outcome="incomplete", reason="interrupted"))
    assert h.next_index == 2 and h.next_attempt == 1 and h.interrupted.end.reason == "interrupted"


def test_a_recovered_trial_counts_and_the_series_goes_on(history):
    h = history(start(1), end(1), start(2), end(2, outcome="incomplete", reason="interrupted"),
                start(2, 1, recovers=f"{SERIES}/t2a0"), end(2, 1, outcome="failure", reason="finish"))
    assert h.next_index == 3 and h.interrupted is None and h.next_attempt == 0
    assert [v.trial_id for v in h.kept] == [f"{SERIES}/t1a0", f"{SERIES}/t2a1"]  # the interrupted attempt's turns are dropped
    assert h.previous["outcome"] == "failure" and h.previous["index"] == 2


def test_incomplete_slots_are_kept_not_rerun(history):
    h = history(start(1), end(1, outcome="incomplete", reason="provider: HTTP 503"))
    assert h.next_index == 2 and h.interrupted is None
    assert h.previous["outcome"] == "incomplete"


def test_a_finished_series_has_nothing_left(history):
    h = history(start(1), end(1), start(2), end(2), start(3), end(3, outcome="failure", reason="step_budget"))
    assert h.next_index == 4 and h.interrupted is None
