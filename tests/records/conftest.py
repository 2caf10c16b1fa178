"""Shared builders for record tests: a run with one series and trials."""

from __future__ import annotations

import time

import pytest
from roboswe.protocol.recorder import RunPins, RunRecord, SeriesRecord, TrialEnded, TrialStarted

from roboswe.records.store import RunStore


def run_records(run_id: str = "r1", series_id: str = "r1/lift", mode: str = "retain") -> list:
    now = time.time()
    return [
        RunRecord(run_id=run_id, created_at=now, config=RunPins(backend="bwrap", workers=2), admitted_sha256="ab" * 32),
        SeriesRecord(series_id=series_id, run_id=run_id, task="Lift", model="demo", mode=mode, created_at=now),
    ]


def trial_records(series_id: str, index: int, outcome: str | None, *, attempt: int = 0,
                  steps: int = 100, recovers: str | None = None) -> list:
    trial_id = f"{series_id}/t{index}a{attempt}"
    now = time.time()
    out = [TrialStarted(trial_id=trial_id, series_id=series_id, index=index, attempt=attempt,
                        fingerprint="f" * 64, started_at=now, recovers=recovers)]
    if outcome is not None:
        out.append(TrialEnded(trial_id=trial_id, outcome=outcome, control_steps=steps, sim_time=steps * 0.05,
                              active_time=1.5, timing={"provider": 1.0, "physics": 0.5}, ended_at=now + 1))
    return out


@pytest.fixture
def store(tmp_path):
    s = RunStore.open(tmp_path / "run", flush_interval=0.01)
    yield s
    s.close()
