"""A remote simulator (`roboswe sim serve`, CURVE over tcp) SIGKILLed mid-trial, then served again.

The coordinator's link to a remote simulator sees the death as silence (no supervisor restarts
it, so no new pid answers): the trial under way ends ``incomplete`` (``interrupted``) within
REMOTE_DEADLINE seconds of the kill. The series then waits for its peers (peers.RESTART_WAIT,
120 s) and, once serve answers again at the same address, re-runs that attempt as a linked
attempt on the fresh simulator, and the next trial runs. (Served back later than that, the
re-run's scene load fails and the remaining slots end ``incomplete``/``infrastructure``, which
``roboswe run --resume RUN_DIR --retry-incomplete`` re-runs.)
"""

from __future__ import annotations

import sqlite3
import time

import pytest

from roboswe.records.reader import RunReader
from tests.sim.test_remote import serve_on_a_port_pair, start_serve

from .conftest import operations_of, roboswe, start_run, write_config

pytestmark = pytest.mark.slow

# The transport's liveness window here is 1.0 s x 5 (TOLERANT_HEARTBEATS): ~5 s of silence, then the
# trial's watch cancels it and its end is committed. Measured 4.9 s on the 2-core VM (load 9).
REMOTE_DEADLINE = 20.0


def _ended_at(run_dir, trial_suffix: str) -> float | None:
    conn = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT ended_at FROM trial_ends WHERE trial_id LIKE ?", (f"%{trial_suffix}",)).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def test_a_killed_remote_simulator_ends_the_trial_interrupted_and_the_series_goes_on_once_served_again(
        work_dir, admitted):
    keys = work_dir / "remote-keys"
    if not keys.exists():
        roboswe("keys", "generate", str(keys), check=True)
    state = work_dir / "remote-state"
    state.mkdir(exist_ok=True)
    for stale in state.iterdir():
        stale.unlink()
    (state / "killed.2").write_text("")  # trial 2 has nothing to wait for: it lists files and finishes
    path = write_config(work_dir, "remote-kill", agent='agent = "tests.series.restart_agents:HoldUntilKilledAgent"',
                        series="trials = 2\ntrial_steps = 400", extra=f'\n[provider.options]\nstate = "{state}"\n')
    run_dir = work_dir / "remote-kill"
    served = ("--keys", str(keys), "--log-level", "warning")  # few log lines: nothing drains serve's pipes
    serve, port = serve_on_a_port_pair(*served)
    serves = [serve]
    run = start_run(run_dir, admitted, path, "--no-verify", "--sim", f"tcp://127.0.0.1:{port}", "--keys", str(keys))
    try:
        deadline = time.monotonic() + 600
        while operations_of(run_dir, "/t1a0") < 3:  # trial 1 is under way on the remote simulator
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "trial 1 never got going"
            time.sleep(0.1)
        (state / "killed.1").write_text("")  # the re-run finishes at once
        killed_at = time.time()
        serve.kill()
        serve.wait(10)
        while _ended_at(run_dir, "/t1a0") is None:  # the trial ends while nothing serves the address
            assert run.poll() is None, run.stdout.read()
            assert time.time() - killed_at < 2 * REMOTE_DEADLINE, "trial 1 did not end after the kill"
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
        one, again, two = reader.trials(series.series_id)
        seen = [(v.start.index, v.start.attempt, v.end.outcome, v.end.reason) for v in (one, again, two)]
        assert (one.start.index, one.start.attempt, one.end.outcome) == (1, 0, "incomplete"), seen
        assert one.end.reason.startswith("interrupted") and "simulator" in one.end.reason, one.end.reason
        took = one.end.ended_at - killed_at
        assert 0 < took < REMOTE_DEADLINE, f"trial 1 ended {took:.1f} s after the kill"
        assert one.end.control_steps < 400
        # the re-run waited for the simulator to be served again, then ran on it, linked
        assert (again.start.index, again.start.attempt, again.start.recovers) == (1, 1, one.trial_id), seen
        assert again.start.started_at >= back_at - 1.0, (again.start.started_at, back_at)
        assert (again.end.outcome, again.end.reason) == ("failure", "finish"), seen
        assert (two.start.index, two.end.outcome, two.end.reason) == (2, "failure", "finish"), seen
        assert again.start.fingerprint == two.start.fingerprint == one.start.fingerprint  # the admitted scene
        print(f"remote simulator: trial ended {took:.2f} s after the kill")
