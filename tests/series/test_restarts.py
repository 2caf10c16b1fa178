"""Actors killed while a trial is under way, with stated deadlines.

- The simulator killed mid-trial (SIGKILL; the supervisor restarts it): the trial ends ``incomplete``
  (interrupted) within SIMULATOR_DEADLINE seconds of the kill, runs again as a linked attempt, and
  the next trial runs.
- The supervisor killed (SIGKILL) while the coordinator waits on a slow provider: every actor process
  is gone within SUPERVISOR_DEADLINE seconds.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from roboswe.records.reader import RunReader

from .conftest import actor_pid, operations_of, start_run, write_config

pytestmark = pytest.mark.slow

# Heartbeats here are 1.0 s x 5 (TOLERANT_HEARTBEATS): a peer is declared dead after ~5 s; the rest is the
# restart back-off and closing the trial on a busy 2-core machine.
SIMULATOR_DEADLINE = 30.0
# The re-run waits to its budget 2 steps per decision, ~0.25 s each: 200 steps keep that to ~25 s.
STEPS = 200
SUPERVISOR_DEADLINE = 10.0  # README: every actor notices the lifeline pipe close and exits


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_simulator_killed_mid_trial_ends_it_incomplete_within_the_deadline_and_the_next_trial_runs(work_dir, admitted):
    path = write_config(work_dir, "simkill", agent='agent = "tests.series.restart_agents:SlowWaitAgent"',
                        series=f"trials = 2\ntrial_steps = {STEPS}")
    run_dir = work_dir / "simkill"
    run = start_run(run_dir, admitted, path, "--no-verify")
    try:
        deadline = time.monotonic() + 600
        while operations_of(run_dir, "/t1a0") < 3:  # trial 1 is under way: it has waited a few times
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "trial 1 never got going"
            time.sleep(0.1)
        simulator = actor_pid(run_dir, "simulator")
        killed_at = time.time()
        os.kill(simulator, signal.SIGKILL)
        output, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        one, again, two = reader.trials(series.series_id)
        assert (one.end.outcome, one.end.cause) == ("incomplete", "interrupted"), one.end.reason
        assert one.end.ended_at - killed_at < SIMULATOR_DEADLINE, one.end.ended_at - killed_at
        assert one.end.control_steps < STEPS  # it did not run on to its budget
        # the death cost that attempt only: trial 1 ran again, linked to it, on the restarted simulator
        assert (again.start.index, again.start.attempt, again.start.recovers) == (1, 1, one.trial_id)
        assert (again.end.outcome, again.end.reason) == ("failure", "step_budget"), again.end.reason
        assert two.start.index == 2 and two.end.outcome == "failure" and two.end.reason == "finish", two.end.reason
        assert two.start.fingerprint == one.start.fingerprint  # a fresh simulator, the same admitted scene
        died = [e for _, e in reader.events() if e.event in ("actor_died", "actor_restarted")]
    assert "simulator" in output or died


def test_supervisor_killed_while_the_coordinator_waits_on_a_slow_provider_every_actor_exits(work_dir, admitted):
    marker = work_dir / "stalling.marker"
    marker.unlink(missing_ok=True)
    path = write_config(work_dir, "supkill", agent='agent = "tests.series.restart_agents:StallingAgent"',
                        series="trials = 1", extra=f'\n[provider.options]\nmarker = "{marker}"\nseconds = 120.0\n')
    run_dir = work_dir / "supkill"
    run = start_run(run_dir, admitted, path, "--no-verify")
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():  # the coordinator has asked for a decision and is waiting on it
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "the provider was never asked"
            time.sleep(0.1)
        state = json.loads((run_dir / "supervisor.json").read_text())
        pids = [a["pid"] for a in state["actors"].values() if a.get("pid")]
        assert len(pids) == 6 and all(_alive(p) for p in pids), state
        assert state["supervisor_pid"] == run.pid
        run.kill()  # SIGKILL: the supervisor runs no shutdown path
        run.wait(10)
        killed = time.monotonic()
        while time.monotonic() - killed < SUPERVISOR_DEADLINE and any(_alive(p) for p in pids):
            time.sleep(0.1)
        left = {p: open(f"/proc/{p}/cmdline").read().replace("\0", " ")[:120] for p in pids if _alive(p)}
        assert left == {}, f"still running {SUPERVISOR_DEADLINE} s after the supervisor was killed: {left}"
    finally:
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        if run.poll() is None:
            run.kill()
            run.wait()
