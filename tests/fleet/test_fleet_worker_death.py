"""A fleet worker's simulator killed mid-trial (SIGKILL) with two series running at once.

The supervisor restarts that worker's simulator; the trial it was running ends ``incomplete``
(interrupted) within the restart deadline and runs again as a linked attempt on the restarted
worker; the series on the other worker runs
exactly as it would have (its first trial to its full step budget, nothing recorded about
the death), and the other worker's simulator is never restarted.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from roboswe.records.reader import RunReader
from tests.series.conftest import operations_of, start_run, write_config
from tests.series.test_restarts import SIMULATOR_DEADLINE

pytestmark = pytest.mark.slow
STEPS = 200  # 2 steps per ~0.25 s decision: the re-run and the other series each take ~25 s


def test_a_dead_worker_costs_only_its_own_trial(work_dir, admitted_three):
    path = write_config(work_dir, "fleet-death", agent='agent = "tests.series.restart_agents:SlowWaitAgent"',
                        series=f"trials = 2\ntrial_steps = {STEPS}")
    run_dir = work_dir / "fleet-death"
    run = start_run(run_dir, admitted_three, path, "--no-verify", "--workers", "2", "--tasks", "lift-a,lift-b")
    try:
        deadline = time.monotonic() + 600
        # Series start in the job's order, each on the first free worker: lift-b runs on worker 2.
        while operations_of(run_dir, "lift-b/t1a0") < 3 or operations_of(run_dir, "lift-a/t1a0") < 3:
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "the trials never got going"
            time.sleep(0.1)
        actors = json.loads((run_dir / "supervisor.json").read_text())["actors"]
        killed_at = time.time()
        os.kill(actors["simulator.2"]["pid"], signal.SIGKILL)
        output, _ = run.communicate(timeout=900)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output
    actors = json.loads((run_dir / "supervisor.json").read_text())["actors"]
    assert actors["simulator.2"]["restarts"] == 1 and actors["simulator.1"]["restarts"] == 0
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    on_worker = {(e["series"].rsplit("/", 1)[1], e["worker"]) for e in events if "worker" in e and "series" in e}
    assert on_worker == {("lift-a", 1), ("lift-b", 2)}
    with RunReader(run_dir) as reader:
        series = {s.task: s.series_id for s in reader.series()}
        hit_one, hit_again, hit_two = reader.trials(series["lift-b"])
        assert (hit_one.end.outcome, hit_one.end.cause) == ("incomplete", "interrupted")
        assert hit_one.end.ended_at - killed_at < SIMULATOR_DEADLINE
        # re-run as a linked attempt on the restarted worker, to its full budget like the other series' trial 1
        assert (hit_again.start.index, hit_again.start.attempt, hit_again.start.recovers) == (1, 1, hit_one.trial_id)
        assert (hit_again.end.outcome, hit_again.end.reason, hit_again.end.control_steps) == ("failure", "step_budget", STEPS)
        assert hit_two.start.index == 2 and (hit_two.end.outcome, hit_two.end.reason) == ("failure", "finish")
        other_one, other_two = reader.trials(series["lift-a"])
        assert other_one.end.control_steps == STEPS, other_one.end  # ran to its budget, unaffected by the death
        assert "infrastructure" not in other_one.end.reason and other_one.end.outcome != "incomplete"
        assert (other_two.end.outcome, other_two.end.reason) == ("failure", "finish")
        assert hit_two.start.fingerprint == other_one.start.fingerprint  # a fresh simulator, the same scene
