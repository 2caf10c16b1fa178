"""The commanded action of every control step is recorded beside the state and replay compares it.

In process (tests/evaluation/harness.py: the real handlers around the fake simulator): the
actions a plan file commanded, read back from the trial's own write_file operation, must be
the recorded action rows of the steps its exec used; a wait records the hold action; and a
recorded action changed after the run makes the replay a ``mismatch`` at that step, while the
states still agree.
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np
from roboswe.sim.physics_state import control_trace, states_from_traces, trace_arrays

from roboswe.records.reader import RunReader
from roboswe.records.store import DB_NAME

from .agents import ReachAgent
from .test_replay_divergence import _series_then_replay


async def test_recorded_actions_are_what_the_plan_commanded_and_the_replay_verifies_them(tmp_path):
    run_dir, plan, end, record = await _series_then_replay(tmp_path, ReachAgent())
    assert end.outcome == "success" and record.verdict == "verified", record.first_divergence
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        ops = reader.operations(view.trial_id)
        states = states_from_traces(reader.control_traces(view.trial_id))
    commanded = np.array(json.loads(next(o for o in ops if o.operation == "write_file").arguments["content"])["actions"])
    run = next(o for o in ops if o.operation == "exec")
    wait = next(o for o in ops if o.operation == "wait")
    row = {int(s): i for i, s in enumerate(states.step)}
    assert states.action.shape == (len(states), 4)
    # Action k of an exec starting at control step s leaves the state labelled s + k + 1.
    executed = states.action[[row[run.step_start + k + 1] for k in range(len(commanded))]]
    np.testing.assert_array_equal(executed, commanded)
    # A wait holds: no motion, the last grip command (the fake backend's hold rule).
    held = states.action[[row[s + 1] for s in range(wait.step_start, wait.step_end)]]
    assert len(held) == 5
    np.testing.assert_array_equal(held, np.tile([0.0, 0.0, 0.0, commanded[-1][3]], (5, 1)))
    assert record.detail["actions"] == {"compared": len(states), "differing_steps": 0}


async def test_a_tampered_recorded_action_is_a_mismatch_at_its_step(tmp_path):
    tampered: list[int] = []

    def change_one_recorded_action():
        # After the run, before the replay: one action component of one recorded step changes.
        with sqlite3.connect(tmp_path / "run" / DB_NAME) as db:
            rows = db.execute("SELECT trial_id, seq, step_start, step_end, layout, dtype, data FROM control_traces "
                              "ORDER BY step_start").fetchall()
            for trial_id, seq, start, stop, layout, dtype, data in rows:
                arrays = {k: v.copy() for k, v in trace_arrays(_trace(trial_id, seq, start, stop, layout, dtype, data)).items()}
                commanded = np.flatnonzero(np.isfinite(arrays.get("action", np.zeros((0, 0)))).all(axis=1))
                if len(commanded) > 1:
                    i = int(commanded[1])
                    arrays["action"][i, 1] += 0.25
                    changed = control_trace(trial_id, seq, start, arrays)
                    # Damage after the fact, as an edit outside the recorder would: the store's guard goes first.
                    db.execute("DROP TRIGGER control_traces_no_update")
                    db.execute("UPDATE control_traces SET data = ? WHERE trial_id = ? AND seq = ?",
                               (changed.data, trial_id, seq))
                    tampered.append(start + i)
                    return

    *_, record = await _series_then_replay(tmp_path, ReachAgent(), before_verify=change_one_recorded_action)
    assert tampered, "no recorded trace carried actions"
    assert record.verdict == "mismatch"
    assert record.first_divergence.startswith(f"commanded action diverges at control step {tampered[0]}: "), record.first_divergence
    assert record.detail["states"]["max_abs_qpos_diff"] == 0.0  # the physics agreed; only the record of the command differs
    assert record.detail["actions"]["differing_steps"] == 1


def _trace(trial_id, seq, start, stop, layout, dtype, data):
    from roboswe.protocol.recorder import ControlTrace

    return ControlTrace(trial_id=trial_id, seq=seq, step_start=start, step_end=stop, layout=json.loads(layout),
                        dtype=dtype, data=data)
