"""The speed-run end to end on the kit: the scripted participant develops on public kitchens, is sealed,
acts in the five hidden kitchens and is verified by replay (RoboCasa, placeholder assets).

One case in the default run (L3: privileged state, at least 3 of 5 kitchens solved); L1 (depth only,
3 of 5 measured with the public salt) is exhaustive. Each checks what the
participant received for the hidden kitchens' identity, a reset and an oversized batch refused in the
evaluation phase, the reward against the formula from the recorded counts, and the index entry.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported: the L1 policy reads depth

pytestmark = pytest.mark.skipif(importlib.util.find_spec("robocasa") is None, reason="robocasa is not installed here")

TASK = "speedrun-kit-pickplacecountertodrawer"


class Probing:
    """The demo participant, which first tries what the evaluation phase must refuse."""

    def __init__(self):
        from roboswe.agents.rle_speedrun import SpeedrunParticipant

        self.inner, self.refusals = SpeedrunParticipant(), []

    def develop(self, robot, workspace):
        return self.inner.develop(robot, workspace)

    def evaluate(self, robot, workspace):
        from roboswe.rle.kitchen.runner import Refused

        hold = [0.0] * robot.spec().action_dim
        for attempt in (robot.reset, lambda: robot.step_many([hold] * 201)):
            with pytest.raises(Refused) as refused:
                attempt()
            self.refusals.append(refused.value.code)
        self.refusals.append(int(robot.state()["actions_left"][0]))  # nothing of the refused batch applied
        return self.inner.evaluate(robot, workspace)


def _speedrun(level, run_dir):
    from roboswe.rle.kitchen.plan import at_level
    from roboswe.rle.kitchen.runner import run_speedrun
    from roboswe.rle.manifest import load_task
    from roboswe.rle.seeds import public_salt

    seen = []
    participant = Probing()
    task = at_level(load_task(TASK), level)
    report, figures = run_speedrun(task, participant, public_salt(), run_dir, on_evaluation=seen.append)
    return task, report, figures, participant, seen[0]


def _check(task, report, figures, participant, evaluation, run_dir, solved):
    from roboswe.rle import rundir
    from roboswe.rle.kitchen.rules import speedrun_reward
    from roboswe.rle.ledger import decode_rows, verify_chain

    assert participant.refusals == ["reset", "invalid_action", 1000]
    assert report.status == "scored" and report.placeholder and not figures["replay_differences"]
    parts = {c.name: c.value for c in report.components}
    successes = round(parts["success_rate"] * task.kitchen.trials)
    assert successes >= solved, figures["evaluate"]
    spent = verify_chain(decode_rows((run_dir / rundir.LEDGER).read_bytes())).spent  # the recorded count
    assert parts["development_steps"] == spent == figures["development_steps"] > 0
    assert parts["budget"] == task.budget.charged_steps == 50_000
    assert report.reward == speedrun_reward(task.kitchen, successes, spent, task.budget.charged_steps)
    # the hidden kitchens' identity never reached the participant
    seen = b"\n".join(evaluation.visible)
    for kitchen in evaluation.plan.kitchens:
        assert str(kitchen.seed).encode() not in seen
    assert evaluation.plan.commitment.encode() not in seen and b"stack_" not in seen
    assert sorted(report.revealed_seeds) == sorted(k.seed for k in evaluation.plan.kitchens)  # revealed after
    index = json.loads(subprocess.run([sys.executable, "-m", "roboswe.cli", "index", str(run_dir), "--json"],
                                      capture_output=True, text=True, check=True).stdout)
    (entry,) = [e for e in index["tasks"] if e["task"] == task.id]
    assert entry["reward"] == report.reward and index["placeholder"] is True
    assert {k: entry["components"][k] for k in ("success_rate", "development_steps", "budget")} == {
        "success_rate": parts["success_rate"], "development_steps": spent, "budget": 50_000}


def test_the_l3_participant_reads_privileged_state_solves_three_hidden_kitchens_and_the_reward_is_the_formulas(tmp_path):
    task, report, figures, participant, evaluation = _speedrun("L3", tmp_path / "run")
    assert "priv_obj_pos" in report.privileged and "priv_fixture_interior" in report.privileged
    _check(task, report, figures, participant, evaluation, tmp_path / "run", solved=3)


@pytest.mark.exhaustive
def test_the_l1_participant_acts_from_depth_only(tmp_path):
    task, report, figures, participant, evaluation = _speedrun("L1", tmp_path / "run")
    assert report.privileged == ()
    _check(task, report, figures, participant, evaluation, tmp_path / "run", solved=3)
    again = subprocess.run([sys.executable, "-m", "roboswe.cli", "verify", str(tmp_path / "run")],
                           capture_output=True, text=True, check=False)
    assert again.returncode == 0 and "reproduced" in again.stdout, again.stderr
