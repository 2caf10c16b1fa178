"""End to end with robosuite and a real sandbox: a script that moves the robot differently on replay but
prints the same output is a ``mismatch`` at the first control step it moved, while every exec figure agrees;
the trial failed, so its slot still scores 0 (a divergent replay cannot lift a failure), and the report says so."""

from __future__ import annotations

import pytest

from roboswe.records.reader import RunReader

from .conftest import roboswe, write_config

pytestmark = pytest.mark.slow


def test_random_motion_with_fixed_output_is_a_mismatch_at_the_scripts_first_step(work_dir, admitted):
    config = write_config(work_dir, "noisy", agent='agent = "tests.series.restart_agents:NoisyMoveAgent"',
                          series="trials = 1")
    run_dir = work_dir / "noisy"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        (view,) = reader.trials(series.series_id)
        (op,) = [o for o in reader.operations(view.trial_id) if o.operation == "exec"]
        traces = reader.control_traces(view.trial_id)
    assert view.end.outcome == "failure" and op.step_end - op.step_start == 5
    # The script's first action leaves the state recorded for control step step_start + 1; nothing moved before it.
    expected = op.step_start + 1
    assert any(t.step_start <= expected < t.step_end for t in traces)
    v = view.verification
    assert v.verdict == "mismatch", (v.verdict, v.first_divergence, v.detail.get("cause"))
    assert v.first_divergence.startswith(f"per-step states diverge from control step {expected} "), v.first_divergence
    (exec_detail,) = v.detail["execs"]
    assert exec_detail["agree"], exec_detail  # steps, exit status, stdout/stderr digests and limit all agree
    assert v.outcome_reproduced is True and v.replay_outcome == "failure"  # a failure, reproduced
    from roboswe.records.metrics import series_metrics, series_outcomes

    with RunReader(run_dir) as reader:
        (m,) = [series_metrics(o) for o in series_outcomes(reader, series.run_id)]
    assert m.statuses == ["failure"] and m.y == [0] and m.completed
    report = roboswe("report", str(run_dir))
    assert "diverged: per-step states diverge" in report.stdout and "scored as the recorded failure" in report.stdout
