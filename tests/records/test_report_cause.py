"""The report, results.json's slots and the viewer's summary show each attempt's typed cause."""

from __future__ import annotations

import io
import time

from rich.console import Console
from roboswe.protocol.recorder import TrialEnded, TrialStarted

from roboswe.records.metrics import series_outcomes
from roboswe.records.reader import RunReader
from roboswe.records.report import print_report, run_summary

from .conftest import run_records

SERIES = "r1/lift"


def ended(index: int, outcome: str, cause: str | None, detail: str = "", reason: str = "") -> list:
    trial_id = f"{SERIES}/t{index}a0"
    now = time.time()
    return [TrialStarted(trial_id=trial_id, series_id=SERIES, index=index, fingerprint="f" * 64, started_at=now),
            TrialEnded(trial_id=trial_id, outcome=outcome, cause=cause, detail=detail,
                       reason=reason or (f"{cause}: {detail}" if detail else cause or ""), ended_at=now + 1)]


def test_each_attempt_shows_its_cause_and_detail(store, tmp_path):
    store.put_durable(*run_records(), *ended(1, "failure", "step_budget"),
                      *ended(2, "incomplete", "configuration", "provider: anthropic: http_401 invalid x-api-key"),
                      *ended(3, "incomplete", None, reason="provider: HTTP 503 (recorded without a cause)"),
                      TrialStarted(trial_id=f"{SERIES}/t4a0", series_id=SERIES, index=4, fingerprint="f" * 64,
                                   started_at=time.time()))
    with RunReader(tmp_path / "run") as reader:
        summary = run_summary(reader)
        (outcome,) = series_outcomes(reader, "r1")
    attempts = summary["series"][0]["attempts"]
    assert [(a["cause"], a["detail"]) for a in attempts] == [
        ("step_budget", ""), ("configuration", "provider: anthropic: http_401 invalid x-api-key"),
        (None, "provider: HTTP 503 (recorded without a cause)"), ("interrupted", "no end recorded")]
    assert [s.cause for s in outcome.slots[:4]] == ["step_budget", "configuration", None, "interrupted"]

    out = io.StringIO()
    print_report(summary, Console(file=out, width=220, color_system=None))
    text = out.getvalue()
    assert "cause" in text and "detail" in text
    rows = {cells[0]: cells for line in text.splitlines() if len(cells := line.split()) > 2 and cells[0].isdigit()}
    assert "step_budget" in rows["1"] and "configuration" in rows["2"] and "http_401" in rows["2"]
    assert "-" in rows["3"] and "503" in rows["3"] and "interrupted" in rows["4"]
