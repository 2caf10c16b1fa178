"""The coordinator killed mid-trial under a restart policy (max_restarts >= 1): the supervisor restarts it and
the run resumes by itself, as `roboswe run --resume` would: the interrupted trial is closed ``incomplete``
(``interrupted``) and re-run as a linked attempt, and the run ends normally."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from roboswe.records.reader import RunReader

from .conftest import actor_pid, operations_of, start_run, write_config

pytestmark = pytest.mark.slow



def test_a_killed_coordinator_is_restarted_and_the_run_resumes_by_itself(work_dir, admitted):
    config = write_config(work_dir, "corestart", series="trials = 2",
                          extra="[supervisor.actors.coordinator]\nmax_restarts = 1\n")
    run_dir = work_dir / "corestart"
    run = start_run(run_dir, admitted, config)
    try:
        deadline = time.monotonic() + 600
        while operations_of(run_dir, "/t2a0") < 2:  # trial 2 is under way
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "trial 2 never started"
            time.sleep(0.2)
        coordinator = actor_pid(run_dir, "coordinator")
        os.kill(coordinator, signal.SIGKILL)
        output, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output
    after = json.loads((run_dir / "supervisor.json").read_text())["actors"]["coordinator"]
    assert after["restarts"] == 1 and after["pid"] != coordinator, after
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        one, interrupted, rerun = reader.trials(series.series_id)
    assert (one.start.index, one.end.outcome) == (1, "success")
    assert (interrupted.start.index, interrupted.start.attempt) == (2, 0)
    assert (interrupted.end.outcome, interrupted.end.reason) == ("incomplete", "interrupted")
    assert (rerun.start.index, rerun.start.attempt, rerun.start.recovers) == (2, 1, interrupted.trial_id)
    assert rerun.end.outcome == "success"
    assert [v.verification.verdict for v in (one, rerun)] == ["verified", "verified"]
    assert interrupted.verification is None
