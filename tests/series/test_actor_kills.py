"""Peers SIGKILLed while a trial is under way: the sandbox bridge, the provider client, the recorder
(each restarted by the supervisor) and a remote simulator (`roboswe sim serve`, CURVE over tcp,
which nobody restarts: the test serves it again at the same address once the trial has ended).

One series of four trials over the served simulator (`roboswe run --sim`), so one run covers
every kill; the python participant is restart_agents.HoldUntilKilledAgent: an attempt that began
before its kill only ever waits, so it never ends by itself. Trial 1: the bridge is killed, trial 2
the provider client, trial 3 the recorder, trial 4 the simulator. (The local simulator actor
killed mid-trial is tests/series/test_restarts.py.) DESIGN.md section 8 (attribution): a death
that is not the participant's is ``incomplete``, and such a slot is re-run as a linked attempt.
So, per kill:

- the attempt under way ends ``incomplete`` (reason ``interrupted: PeerDead ...``) within its
  deadline after the kill, before its step budget;
- it runs again as attempt 1 whose ``recovers`` names it (after serve is back, for the simulator),
  and that attempt ends by the participant's own ``finish``;
- the series completes (every slot's latest attempt ended, the run exits 0);
- what was committed before the recorder died is untouched (the rows of the trials that had
  ended, compared with a read-only snapshot taken just before the kill).

Had serve not come back within peers.RESTART_WAIT (120 s), the re-run's scene load fails and the
remaining slots end ``incomplete``/``infrastructure``, which `roboswe run --resume RUN_DIR
--retry-incomplete` re-runs.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest

from roboswe.records.reader import RunReader
from tests.sim.test_remote import serve_on_a_port_pair, start_serve

from .conftest import actor_pid, operations_of, roboswe, start_run, write_config

pytestmark = pytest.mark.slow

# Heartbeats here are 1.0 s x 5 (TOLERANT_HEARTBEATS). A restarted actor: the supervisor sees the exit at
# once and restarts it after its back-off; the coordinator's link sees a new pid answer at the endpoint
# (or 5 s of silence) and the trial's watch ends it. A served simulator: only the silence (~5 s).
# Measured on the 2-core VM at load 8-9: 1.8-2.4 s for the actors, 4.9 s for the simulator.
KILL_DEADLINE = 15.0
REMOTE_DEADLINE = 20.0
STEPS = 400  # trial_steps: an attempt that is never interrupted waits on to this budget (the failure mode)
KILLS = {1: "sandbox_bridge", 2: "provider_client", 3: "recorder", 4: "simulator"}
# Tables whose rows a trial writes; their rows for ended trials must not change when the recorder dies.
TRIAL_TABLES = ("trials", "trial_ends", "messages", "operations", "control_traces", "slides", "checkpoints")


def _query(run_dir, sql: str, params=()) -> list[tuple]:
    """Rows as stored, read-only, beside the live recorder."""
    conn = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def _rows(run_dir, trial_ids: list[str]) -> dict[str, list[tuple]]:
    marks = ",".join("?" * len(trial_ids))
    return {t: _query(run_dir, f"SELECT * FROM {t} WHERE trial_id IN ({marks}) ORDER BY rowid", trial_ids)
            for t in TRIAL_TABLES}


def _ended(run_dir) -> list[str]:
    return [r[0] for r in _query(run_dir, "SELECT trial_id FROM trial_ends ORDER BY rowid")]


def test_bridge_provider_recorder_and_remote_simulator_killed_mid_trial_each_cost_one_linked_attempt(
        work_dir, admitted):
    keys = work_dir / "kills-keys"
    if not keys.exists():
        roboswe("keys", "generate", str(keys), check=True)
    state = work_dir / "kills-state"
    state.mkdir(exist_ok=True)
    for stale in state.iterdir():
        stale.unlink()
    path = write_config(work_dir, "kills", agent='agent = "tests.series.restart_agents:HoldUntilKilledAgent"',
                        series=f"trials = 4\ntrial_steps = {STEPS}",
                        extra=f'\n[provider.options]\nstate = "{state}"\npause = 0.2\n')
    run_dir = work_dir / "kills"
    served = ("--keys", str(keys), "--log-level", "warning")  # few log lines: nothing drains serve's pipes
    serve, port = serve_on_a_port_pair(*served)
    serves = [serve]
    run = start_run(run_dir, admitted, path, "--no-verify", "--sim", f"tcp://127.0.0.1:{port}", "--keys", str(keys))
    killed_at: dict[int, float] = {}
    before: dict[str, list[tuple]] = {}
    ended_before: list[str] = []
    back_at = 0.0
    try:
        for index, actor in KILLS.items():
            deadline = time.monotonic() + 600
            while operations_of(run_dir, f"/t{index}a0") < 3:  # the attempt is under way: it has waited a few times
                assert run.poll() is None, run.stdout.read()
                assert time.monotonic() < deadline, f"trial {index} never got going"
                time.sleep(0.1)
            if actor == "recorder":
                ended_before = _ended(run_dir)
                before = _rows(run_dir, ended_before)
            (state / f"killed.{index}").write_text(actor)  # the re-run (a fresh attempt) finishes at once
            killed_at[index] = time.time()
            if actor == "simulator":
                serve.kill()
                serve.wait(10)
            else:
                os.kill(actor_pid(run_dir, actor), signal.SIGKILL)
        while not _query(run_dir, "SELECT 1 FROM trial_ends WHERE trial_id LIKE '%/t4a0'"):  # ended while unserved
            assert run.poll() is None, run.stdout.read()
            assert time.time() - killed_at[4] < 2 * REMOTE_DEADLINE, "trial 4 did not end after the kill"
            time.sleep(0.2)
        for _ in range(20):  # serve again at the same address (its ports are free again)
            again, line = start_serve("--bind", f"tcp://127.0.0.1:{port}", *served)
            serves.append(again)
            if line.startswith("simulator control="):
                break
            again.wait(30)
            time.sleep(0.5)
        else:
            raise AssertionError(f"could not serve tcp://127.0.0.1:{port} again")
        back_at = time.time()
        output, _ = run.communicate(timeout=600)
    finally:
        for proc in [run, *serves]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert run.returncode == 0, output

    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        views = reader.trials(series.series_id)
        seen = [(v.start.index, v.start.attempt, v.end and v.end.outcome, v.end and v.end.reason) for v in views]
        assert [(v.start.index, v.start.attempt) for v in views] == [(i, a) for i in KILLS for a in (0, 1)], seen
        took = {}
        for index, actor in KILLS.items():
            first, again = (v for v in views if v.start.index == index)
            assert first.end.outcome == "incomplete", (actor, seen)
            assert first.end.cause == "interrupted" and first.end.detail.startswith("PeerDead"), (actor, seen)
            assert actor in first.end.detail, (actor, seen)
            took[actor] = first.end.ended_at - killed_at[index]
            limit = REMOTE_DEADLINE if actor == "simulator" else KILL_DEADLINE
            assert 0 < took[actor] < limit, f"{actor}: trial {index} ended {took[actor]:.1f} s after the kill"
            assert first.end.control_steps < STEPS, (actor, first.end.control_steps)
            assert again.start.recovers == first.trial_id, (actor, seen)
            assert (again.end.outcome, again.end.reason) == ("failure", "finish"), (actor, seen)
            assert [op.operation for op in reader.operations(again.trial_id)] == ["list_files", "finish"], actor
            assert again.start.fingerprint == first.start.fingerprint  # the admitted scene, on the fresh simulator too
        # the simulator's re-run waited for serve to be back, then ran on the new process
        assert views[-1].start.started_at >= back_at - 1.0, (views[-1].start.started_at, back_at)
        print("seconds from kill to the attempt's end:", {a: round(t, 2) for a, t in took.items()})

    # the trials that had ended before the recorder died (1, 1's re-run, 2, 2's re-run) are as they were
    assert len(ended_before) == 4, ended_before
    assert _rows(run_dir, ended_before) == before
