"""The held-out task's hidden kitchens: one per fresh agent, from the hidden plan's seeds.

Agent *k* (and control agent *k*: the pair shares a kitchen, so the transfer effect is read off kitchen
by kitchen) attempts the held-out composite in kitchen *k*, drawn from hidden seed *k* = HMAC(salt,
``transfer/<held-out>|<version>|k``) exactly as family 01 draws its kitchens (roboswe/rle/kitchen/plan.py:
on the kit a generated variant of the kit's one-wall kitchen, the seed as RoboCasa's scene seed). Nothing
here is participant-visible.
"""

from __future__ import annotations

import numpy as np

from ..kitchen.plan import STACK_START_X, WALL_ROW_SHIFT_X, HiddenKitchen, HiddenPlan, _distinct_orders
from ..manifest import RleTask
from ..seeds import Salt, hidden_seeds


def plan_key(task: RleTask) -> str:
    return f"transfer/{task.transfer.heldout.name}"


def hidden_plan(task: RleTask, salt: Salt) -> HiddenPlan:
    seeds = hidden_seeds(salt, plan_key(task), task.protocol.version, task.transfer.agents)
    return plan_from_seeds(task, seeds, salt.sha256, salt.label)


def plan_from_seeds(task: RleTask, seeds: list[int], salt_sha256: str, salt_label: str) -> HiddenPlan:
    """The plan the seeds make (a report's revealed seeds rebuild it). Kit kitchens only: the composites are kit tasks."""
    if not task.placeholder:
        raise ValueError(f"{task.id}: the harness-transfer composites are built on the kit only")
    orders = _distinct_orders(seeds[0], len(seeds))
    kitchens = []
    for i, seed in enumerate(seeds):
        rng = np.random.default_rng([seed, 11])
        kitchens.append(HiddenKitchen(index=i, seed=seed, stack_order=orders[i],
                                      stack_start_x=round(float(rng.uniform(*STACK_START_X)), 3),
                                      wall_shift_x=round(float(rng.uniform(*WALL_ROW_SHIFT_X)), 3)))
    return HiddenPlan(task=plan_key(task), version=task.protocol.version, salt_sha256=salt_sha256,
                      salt_label=salt_label, kitchens=tuple(kitchens))
