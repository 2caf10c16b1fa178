"""Family 01's pure rules: the manifests, the reward formula from recorded counts, the whole-batch refusal."""

from __future__ import annotations

import pytest

from roboswe.rle.kitchen.rules import batch_refusal, speedrun_reward
from roboswe.rle.manifest import load_task, task_names

KIT = ["speedrun-kit-openmicrowave", "speedrun-kit-closecabinet", "speedrun-kit-turnonmicrowave",
       "speedrun-kit-pickplacecountertodrawer", "speedrun-kit-pickplacemicrowavetocounter"]
REAL = ["speedrun-open-fridge", "speedrun-close-cabinet", "speedrun-turn-on-stove",
        "speedrun-pick-place-counter-to-drawer", "speedrun-pick-place-microwave-to-counter"]


def test_the_kit_five_and_the_real_five_cover_rle_benchs_subtasks_on_their_side_of_the_asset_line():
    assert set(KIT) | set(REAL) == {n for n in task_names() if n.startswith("speedrun-")}
    kit, real = [load_task(n) for n in KIT], [load_task(n) for n in REAL]
    assert [t.kitchen.subtask for t in kit] == [t.kitchen.subtask for t in real]
    assert all(t.placeholder and t.kit and t.kitchen.kitchen_task.startswith("kit-") for t in kit)
    assert not any(t.placeholder or t.kitchen.kitchen_task.startswith("kit-") for t in real)
    assert {t.protocol.version for t in kit}.isdisjoint({t.protocol.version for t in real})
    for t in kit + real:  # the RLE-Bench paper's numbers, pinned in the manifest
        assert (t.budget.charged_steps, t.kitchen.trials, t.kitchen.trial_actions, t.kitchen.batch_max) == (50_000, 5, 1000, 200)
        assert (t.kitchen.outcome_weight, t.kitchen.efficiency_weight) == (0.8, 0.2)
    # a kit task that is not the subtask's own RoboCasa class says what it stands in for
    assert [t.kitchen.env for t in kit if t.kitchen.stands_in_for] == ["OpenMicrowave", "TurnOnMicrowave"]
    assert [t.kitchen.env for t in real] == ["OpenFridge", "CloseCabinet", "TurnOnStove", "PickPlaceCounterToDrawer",
                                             "PickPlaceMicrowaveToCounter"]


@pytest.mark.parametrize("successes,steps,expected", [
    (5, 0, 1.0), (5, 50_000, 0.8), (3, 12_500, 0.6 * (0.8 + 0.2 * 0.75)), (0, 0, 0.0), (0, 50_000, 0.0)])
def test_reward_is_success_rate_times_outcome_plus_scaled_efficiency(successes, steps, expected):
    kitchen = load_task(KIT[1]).kitchen
    assert speedrun_reward(kitchen, successes, steps, 50_000) == pytest.approx(expected)


def test_reward_refuses_counts_outside_the_plan_and_budget():
    kitchen = load_task(KIT[1]).kitchen
    with pytest.raises(ValueError):
        speedrun_reward(kitchen, 6, 0, 50_000)
    with pytest.raises(ValueError):
        speedrun_reward(kitchen, 1, 50_001, 50_000)


def test_a_batch_is_one_to_two_hundred_actions_within_the_allowance_or_refused_whole():
    assert batch_refusal(1, 1, 200) is None and batch_refusal(200, 1000, 200) is None
    assert "1..200" in batch_refusal(0, 1000, 200) and "1..200" in batch_refusal(201, 1000, 200)
    assert "exceeds the 10 left" in batch_refusal(11, 10, 200)
