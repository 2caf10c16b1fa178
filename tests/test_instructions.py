"""The participant's instructions are generated from the live spec, never hand-copied."""

from __future__ import annotations

from roboswe.protocol.participant import OPERATIONS

from roboswe.evaluation.instructions import system_prompt, trial_opening
from roboswe.evaluation.series_config import Budgets

from .sandbox.stand_in_sim import ToyRobot


def test_system_prompt_carries_the_live_action_bounds_cameras_operations_and_budgets():
    spec = ToyRobot().spec()
    budgets = Budgets(trial_steps=321, trial_seconds=654.0, script_steps=17, script_seconds=9.0)
    text = system_prompt(spec, budgets, trials=5, retain="retain")
    assert spec.instruction in text
    for c in spec.action.components:
        assert f"[{c.index}] {c.name}: [{c.low:g}, {c.high:g}]" in text
    for cam in spec.cameras:
        assert cam.name in text
    for name in OPERATIONS:
        assert f"- {name}:" in text
    assert "321 control steps" in text and "at most 17 control steps" in text
    assert "files and this conversation are kept" in text
    fresh = system_prompt(spec, budgets, trials=5, retain="none")
    assert "start empty again" in fresh


def test_trial_opening_reports_the_previous_outcome_and_figures():
    assert "workspace is empty" in trial_opening(1, 5, None)
    text = trial_opening(2, 5, {"index": 1, "outcome": "failure", "reason": "budget",
                                "control_steps": 6000, "sim_time": 300.0, "active_time": 42.5})
    assert "Trial 1 did not succeed (budget)" in text and "6000 control steps" in text
