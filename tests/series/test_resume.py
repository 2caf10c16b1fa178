"""kill -9 of the coordinator mid-trial, then `roboswe run --resume`: nothing written is rewritten."""

from __future__ import annotations

import os
import signal
import time

import pytest

from roboswe.records.reader import RunReader
from roboswe.records.store import APPEND_ONLY

from .conftest import actor_pid, operations_of, roboswe, start_run, write_config

pytestmark = pytest.mark.slow



def test_kill_9_mid_trial_then_resume_keeps_completed_records_byte_for_byte(work_dir, admitted):
    # max_restarts = 0: the supervisor stops the run when the coordinator dies, as a crash would.
    config = write_config(work_dir, "resume", series="trials = 2",
                          extra="[supervisor.actors.coordinator]\nmax_restarts = 0\n")
    run_dir = work_dir / "resume"
    run = start_run(run_dir, admitted, config)
    try:
        deadline = time.monotonic() + 600
        while operations_of(run_dir, "/t2a0") < 2:  # trial 2 is under way: it has written files
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "trial 2 never started"
            time.sleep(0.2)
        coordinator = actor_pid(run_dir, "coordinator")
        os.kill(coordinator, signal.SIGKILL)
        output, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1, output
    assert "coordinator died" in output

    with RunReader(run_dir) as reader:
        before = {table: reader.row_digests(table) for table in APPEND_ONLY}
        (series,) = reader.series()
        views = reader.trials(series.series_id)
        assert [(v.start.index, v.outcome) for v in views] == [(1, "success"), (2, None)]

    proc = roboswe("run", "--resume", str(run_dir), timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "was interrupted: recorded incomplete, re-running" in proc.stdout

    with RunReader(run_dir) as reader:
        for table, rows in before.items():
            after = reader.row_digests(table)
            assert {k: after.get(k) for k in rows} == rows, f"{table}: an earlier row changed"
        views = reader.trials(series.series_id)
        one, interrupted, rerun = views
        assert (one.start.index, one.start.attempt, one.outcome) == (1, 0, "success")
        assert (interrupted.start.index, interrupted.start.attempt) == (2, 0)
        assert (interrupted.end.outcome, interrupted.end.reason) == ("incomplete", "interrupted")
        assert (rerun.start.index, rerun.start.attempt, rerun.start.recovers) == (2, 1, interrupted.trial_id)
        assert interrupted.recovered_by == rerun.trial_id
        assert rerun.end.outcome == "success"
        for v in (one, rerun):
            assert v.verification.verdict == "verified", (v.trial_id, v.verification.first_divergence, v.verification.detail)
        assert interrupted.verification is None
        # the re-run continues from trial 1's workspace and conversation, as the original attempt did
        first = reader.operations(rerun.trial_id, limit=1)[0]
        assert "lift_cube.py" in first.feedback["text"]
        assert b"Trial 1 of 2 begins" in reader.messages(rerun.trial_id)[0].request
        assert reader.checkpoints(rerun.trial_id)[0].manifest_sha256 == reader.checkpoints(interrupted.trial_id)[0].manifest_sha256
        # verification ran once per trial, after the resumed series ended
        assert len(reader.verifications(one.trial_id)) == 1


def test_a_restarted_context_manager_costs_one_incomplete_trial_and_the_conversation_is_rebuilt(work_dir, admitted):
    config = write_config(work_dir, "ctxloss", series="trials = 3")
    run_dir = work_dir / "ctxloss"
    run = start_run(run_dir, admitted, config, "--no-verify")
    try:
        deadline = time.monotonic() + 600
        while operations_of(run_dir, "/t2a0") < 1:
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "trial 2 never started"
            time.sleep(0.1)
        context = actor_pid(run_dir, "context_manager")
        os.kill(context, signal.SIGKILL)  # the supervisor restarts it, empty
        output, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        trials = reader.trials(series.series_id)
        seen = [(v.start.index, v.start.attempt, v.end and v.end.outcome, v.end and v.end.reason) for v in trials]
        assert len(trials) == 4, seen
        one, two, again, three = trials
        assert one.end.outcome == "success" and three.end.outcome == "success"
        assert (two.end.outcome, two.end.cause) == ("incomplete", "interrupted"), two.end.reason
        assert (again.start.index, again.start.recovers, again.end.outcome) == (2, two.trial_id, "success")
        # the linked re-run restored the conversation from the records, as a resumed run does
        events = [e for _, e in reader.events() if e.event == "series_resumed"]
        assert len(events) == 1 and events[0].data["turns"] > 0
        # trial 3's first request holds the whole recorded conversation again, trial 1 included
        first = reader.messages(three.trial_id)[0].request
        assert b"Trial 1 of 3 begins" in first and b"Trial 2 of 3 begins" in first
