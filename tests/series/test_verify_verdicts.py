"""Replay verdicts stay distinct: a script that prints the wall clock agrees on execution (its output
differences are recorded, and its failures score 0: printing the time cannot opt a trial out of
scoring), while a corrupt checkpoint is an error."""

from __future__ import annotations

import pytest
from roboswe.sandbox.checkpoints import load_manifest

from roboswe.records.metrics import series_metrics, series_outcomes
from roboswe.records.reader import RunReader

from .conftest import roboswe, write_config

pytestmark = pytest.mark.slow


def test_clock_output_is_recorded_not_a_mismatch_and_a_corrupt_checkpoint_is_an_error(work_dir, admitted):
    config = write_config(work_dir, "clock", agent='agent = "tests.series.agents:ClockAgent"', series="trials = 2")
    run_dir = work_dir / "clock"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        one, two = reader.trials(series.series_id)
        for view in (one, two):
            assert view.end.outcome == "failure" and view.end.control_steps == 1
            v = view.verification
            assert v.verdict == "verified" and v.first_divergence == "", v.first_divergence
            assert v.outcome_reproduced is True and v.replay_outcome == "failure"
            seq = next(o.seq for o in reader.operations(view.trial_id) if o.operation == "exec")
            assert v.detail["execs"][0]["differs"] == ["stdout_sha256"]  # steps and exit status agree
            assert v.detail["output_differences"] == [{"seq": seq, "script": "clock.py", "differs": ["stdout_sha256"]}]
        (m,) = [series_metrics(o) for o in series_outcomes(reader, series.run_id)]
        assert m.statuses == ["failure", "failure"] and m.y == [0, 0] and m.A == 0.0
        (start,) = [c for c in reader.checkpoints(two.trial_id) if c.label == "trial_start"]
        (entry,) = load_manifest(start.manifest).entries  # trial 2 starts with trial 1's clock.py
    report = roboswe("report", str(run_dir))
    assert "output differs (not scored)" in report.stdout and "stdout_sha256" in report.stdout, report.stdout
    # A blob that no longer hashes to its name: restoring trial 2's start refuses, the verdict is `error`.
    blob = next((run_dir / "blobs").rglob(entry.sha256))
    blob.chmod(0o644)
    blob.write_bytes(b"tampered")
    proc = roboswe("verify", str(run_dir))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        assert [x.verdict for x in reader.verifications(one.trial_id)] == ["verified", "verified"]
        latest = reader.verifications(two.trial_id)[-1]
    assert latest.verdict == "error" and latest.outcome_reproduced is None
    assert "trial_start" in latest.detail["cause"] or "refused" in latest.detail["cause"]
