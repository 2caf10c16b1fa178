"""The participant's instructions are generated from the live spec, never hand-copied."""

from __future__ import annotations

from roboswe.protocol.participant import INTERFACES

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
    for name in INTERFACES["code"]:
        assert f"- {name}:" in text
    assert "- act:" not in text
    assert "321 control steps" in text and "at most 17 control steps" in text
    assert "files and this conversation are kept" in text
    fresh = system_prompt(spec, budgets, trials=5, retain="none")
    assert "start empty again" in fresh


def test_the_actions_interface_is_told_its_tools_track_and_bounds_and_no_exec():
    spec = ToyRobot().spec()
    budgets = Budgets(trial_steps=10, trial_seconds=60.0, script_steps=5, script_seconds=9.0, interface="actions",
                      track="decisions", decision_calls=5, action_prefix=2, identity="toy/decision-5-prefix-2/v1")
    text = system_prompt(spec, budgets, trials=1, retain="retain")
    assert [n for n in INTERFACES if f"- {n}:" in text] == [] and "- exec:" not in text and "- act:" in text
    assert "at most 5 replies (calls) per trial" in text and "first 2 actions" in text
    assert "toy/decision-5-prefix-2/v1" in text
    for c in spec.action.components:
        assert f"{c.index}: {c.name} in [{c.low:g}, {c.high:g}]" in text


def test_an_rle_session_is_told_it_is_one_session_and_only_of_tools_it_has():
    """An RLE-Bench phase is one session of a one-trial series: "You get 1 trials" and the success-interval ending
    would be wrong, and the evaluation phase (no wait) must not be told of wait."""
    spec = ToyRobot().spec()
    for interface, track in (("code", "development"), ("evaluation", "evaluation")):
        budgets = Budgets(trial_steps=5000, trial_seconds=600.0, script_steps=200, script_seconds=60.0,
                          interface=interface, track=track, identity="rle:speedrun-kit/1")
        text = system_prompt(spec, budgets, trials=1, retain="retain")
        assert f"one session of the task's {track} phase" in text and "## Budgets (this session)" in text
        assert "trials of this task" not in text and "consecutive control steps" not in text
        assert ("wait" in text) == (interface == "code"), interface
        assert ("exec and wait both use them" in text) == (interface == "code")


def test_trial_opening_reports_the_previous_outcome_and_figures():
    assert "workspace is empty" in trial_opening(1, 5, None)
    text = trial_opening(2, 5, {"index": 1, "outcome": "failure", "reason": "budget",
                                "control_steps": 6000, "sim_time": 300.0, "active_time": 42.5})
    assert "Trial 1 did not succeed (budget)" in text and "6000 control steps" in text


def test_trial_opening_carries_the_instruction_cameras_sensor_readings_and_points_at_the_interface():
    text = trial_opening(1, 5, None, instruction="Lift the cube.", cameras=["agentview", "robot0_eye_in_hand"],
                         sensors=["robot0_eef_pos: [0.1000, 0.2000, 0.3000]"])
    assert text.startswith("Trial 1 of 5 begins.")  # agents find trial boundaries by it (configs/agents/lift_demo)
    assert "Task: Lift the cube." in text
    assert "Current camera images (attached): agentview, robot0_eye_in_hand." in text
    assert "  robot0_eef_pos: [0.1000, 0.2000, 0.3000]" in text
    assert "`robot` module" in text
    later = trial_opening(2, 5, {"index": 1, "outcome": "success", "reason": "success_interval", "control_steps": 90,
                                 "sim_time": 4.5, "active_time": 3.0}, instruction="Lift the cube.")
    assert later.startswith("Trial 2 of 5 begins.") and "Trial 1 succeeded (success_interval)" in later


def test_system_prompt_and_opening_agree_on_what_is_told_of_success():
    spec = ToyRobot().spec()
    budgets = Budgets(trial_steps=100, trial_seconds=60.0, script_steps=10, script_seconds=5.0)
    retain = system_prompt(spec, budgets, trials=5, retain="retain")
    fresh = system_prompt(spec, budgets, trials=5, retain="none")
    assert "you are not told it directly" not in retain  # the next opening does tell it in retain mode
    assert "the opening of the next trial says how the previous one ended" in retain
    assert "no trial is told how an earlier one ended" in fresh and "opening of the next trial" not in fresh
    for text in (retain, fresh):
        assert "Each trial opens with the task, the current\ncamera images and the robot's sensor readings" in text
