"""The sandbox bridge, the provider client and the recorder each SIGKILLed while a trial is under way.

One series of three trials (the python participant, restart_agents.HoldUntilKilledAgent: an attempt
that began before its kill only ever waits, so it never ends by itself) on the real actors:
the bridge is killed in trial 1, the provider client in trial 2, the recorder in trial 3. The
supervisor restarts each. DESIGN.md section 8 (attribution): a death that is not the participant's
is ``incomplete``, and such a slot is re-run as a linked attempt. So, per kill:

- the attempt under way ends ``incomplete`` (reason ``interrupted...``) within KILL_DEADLINE
  seconds of the kill, before its step budget;
- it runs again as attempt 1 whose ``recovers`` names it, and that attempt ends by the
  participant's own ``finish``;
- the series goes on and completes (every slot's latest attempt ended, the run exits 0);
- what was committed before the kill is untouched (the rows of the trials that had ended, compared
  with a read-only snapshot taken just before killing the recorder).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest

from roboswe.records.reader import RunReader

from .conftest import actor_pid, operations_of, start_run, write_config

pytestmark = pytest.mark.slow

# Heartbeats here are 1.0 s x 5 (TOLERANT_HEARTBEATS): the supervisor sees the exit at once and restarts
# the actor after its back-off; the coordinator sees the death on its link (a new pid answering at the
# same endpoint, or 5 s of silence) and ends the trial. Measured 1.8-2.4 s from kill to the recorded end
# on the 2-core VM at load 8; the rest is room for a slower restart (the silence bound holds regardless).
KILL_DEADLINE = 15.0
STEPS = 400  # trial_steps: an attempt that is never interrupted waits on to this budget (the failure mode)
KILLS = {1: "sandbox_bridge", 2: "provider_client", 3: "recorder"}
# Tables whose rows a trial writes; their rows for ended trials must not change when the recorder dies.
TRIAL_TABLES = ("trials", "trial_ends", "messages", "operations", "control_traces", "slides", "checkpoints")


def _rows(run_dir, trial_ids: list[str]) -> dict[str, list[tuple]]:
    """Every row of ``trial_ids`` in the trial tables, as stored (read-only, beside the live recorder)."""
    conn = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
    try:
        marks = ",".join("?" * len(trial_ids))
        return {t: conn.execute(f"SELECT * FROM {t} WHERE trial_id IN ({marks}) ORDER BY rowid", trial_ids).fetchall()
                for t in TRIAL_TABLES}
    finally:
        conn.close()


def _ended_trials(run_dir) -> list[str]:
    conn = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT trial_id FROM trial_ends ORDER BY rowid")]
    finally:
        conn.close()


def test_bridge_provider_and_recorder_killed_mid_trial_each_cost_one_linked_attempt(work_dir, admitted):
    state = work_dir / "kills-state"
    state.mkdir(exist_ok=True)
    for stale in state.iterdir():
        stale.unlink()
    path = write_config(work_dir, "kills", agent='agent = "tests.series.restart_agents:HoldUntilKilledAgent"',
                        series=f"trials = 3\ntrial_steps = {STEPS}",
                        extra=f'\n[provider.options]\nstate = "{state}"\npause = 0.2\n')
    run_dir = work_dir / "kills"
    run = start_run(run_dir, admitted, path, "--no-verify")
    killed_at: dict[int, float] = {}
    before: dict[str, list[tuple]] = {}
    ended_before: list[str] = []
    try:
        for index, actor in KILLS.items():
            deadline = time.monotonic() + 600
            while operations_of(run_dir, f"/t{index}a0") < 3:  # the attempt is under way: it has waited a few times
                assert run.poll() is None, run.stdout.read()
                assert time.monotonic() < deadline, f"trial {index} never got going"
                time.sleep(0.1)
            if actor == "recorder":
                ended_before = _ended_trials(run_dir)
                before = _rows(run_dir, ended_before)
            (state / f"killed.{index}").write_text(actor)  # the re-run (a fresh attempt) finishes at once
            pid = actor_pid(run_dir, actor)
            killed_at[index] = time.time()
            os.kill(pid, signal.SIGKILL)
        output, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output

    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        views = reader.trials(series.series_id)
        seen = [(v.start.index, v.start.attempt, v.end and v.end.outcome, v.end and v.end.reason) for v in views]
        assert [(v.start.index, v.start.attempt) for v in views] == [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)], seen
        for index, actor in KILLS.items():
            first, again = (v for v in views if v.start.index == index)
            assert first.end.outcome == "incomplete" and first.end.reason.startswith("interrupted"), (actor, seen)
            took = first.end.ended_at - killed_at[index]
            assert 0 < took < KILL_DEADLINE, f"{actor}: trial {index} ended {took:.1f} s after the kill"
            assert first.end.control_steps < STEPS, (actor, first.end.control_steps)
            assert again.start.recovers == first.trial_id, (actor, seen)
            assert (again.end.outcome, again.end.reason) == ("failure", "finish"), (actor, seen)
            assert [op.operation for op in reader.operations(again.trial_id)] == ["list_files", "finish"], actor
        print("seconds from kill to the attempt's end:", {KILLS[i]: round(next(v for v in views if v.start.index == i)
                                                                         .end.ended_at - t, 2) for i, t in killed_at.items()})

    # the trials that had ended before the recorder died (1, 1's re-run, 2, 2's re-run) are as they were
    assert len(ended_before) == 4, ended_before
    assert _rows(run_dir, ended_before) == before
