"""The hidden evaluation kitchens: five distinct kitchens per task from the hidden plan's seeds.

Kitchen *i* of a task comes from hidden seed *i* (roboswe/rle/seeds.py: HMAC of the salt over the
family's plan key, which is the subtask and protocol version, not the level's task id, so L1-L3 share
the plan). On the kit a kitchen is a generated layout variant of the kit's one-wall kitchen (the order
of the three base-cabinet stacks, where the run of stacks starts along the counter, where the wall
row starts) plus the RoboCasa seed that places the robot, picks the target fixture and places the
objects; the kit has one style (placeholder textures). With real assets the seed picks RoboCasa's own
layout and style from their test split (1-10). The kitchens of one plan are distinct by construction:
the stack orders of a plan are five different permutations of the six.

Nothing here is participant-visible: the evaluation simulator builds from a ``HiddenKitchen`` and
tells the participant only "trial k of n".
"""

from __future__ import annotations

import itertools

import msgspec
import numpy as np

from ..manifest import RleTask
from ..seeds import Salt, commitment, hidden_seeds
from .rules import LEVELS, Level

STACK_ORDERS = list(itertools.permutations(range(3)))  # of the kit layout's stack_1..stack_3
STACK_START_X = (0.2, 0.9)  # m: left edge of the first stack along the 3.8 m counter run (1.9 m of stacks)
WALL_ROW_SHIFT_X = (-0.05, 0.35)  # m: shift of the wall cabinets and microwave (3.2 m between walls 4.4 m apart)
REAL_SPLIT = range(1, 11)  # RoboCasa's test layouts and styles


class HiddenKitchen(msgspec.Struct, frozen=True, kw_only=True):
    """One evaluation kitchen: what the trusted side builds; revealed into the record only after verification."""

    index: int
    seed: int  # the hidden seed: RoboCasa's scene seed (robot, target fixture, objects)
    stack_order: tuple[int, ...] = ()  # kit: the base stacks, left to right
    stack_start_x: float = 0.0
    wall_shift_x: float = 0.0
    layout: int | None = None  # real assets: RoboCasa layout and style ids
    style: int | None = None


class HiddenPlan(msgspec.Struct, frozen=True, kw_only=True):
    task: str  # the plan key (subtask)
    version: str
    salt_sha256: str
    salt_label: str
    kitchens: tuple[HiddenKitchen, ...]

    @property
    def commitment(self) -> str:
        return commitment(self)


def plan_key(task: RleTask) -> str:
    return f"speedrun/{task.kitchen.subtask}"


def hidden_plan(task: RleTask, salt: Salt) -> HiddenPlan:
    seeds = hidden_seeds(salt, plan_key(task), task.protocol.version, task.kitchen.trials)
    return plan_from_seeds(task, seeds, salt.sha256, salt.label)


def plan_from_seeds(task: RleTask, seeds: list[int], salt_sha256: str, salt_label: str) -> HiddenPlan:
    """The plan the seeds make (``roboswe verify`` rebuilds it from a report's revealed seeds)."""
    return HiddenPlan(task=plan_key(task), version=task.protocol.version, salt_sha256=salt_sha256,
                      salt_label=salt_label, kitchens=kitchens_from_seeds(seeds, kit=task.placeholder))


def kitchens_from_seeds(seeds: list[int], *, kit: bool) -> tuple[HiddenKitchen, ...]:
    """One hidden kitchen per seed: a kit layout variant (stack order and offsets), or a real layout and style."""
    orders = _distinct_orders(seeds[0], len(seeds))
    kitchens = []
    for i, seed in enumerate(seeds):
        rng = np.random.default_rng([seed, 11])
        if kit:
            kitchens.append(HiddenKitchen(
                index=i, seed=seed, stack_order=orders[i],
                stack_start_x=round(float(rng.uniform(*STACK_START_X)), 3),
                wall_shift_x=round(float(rng.uniform(*WALL_ROW_SHIFT_X)), 3)))
        else:
            kitchens.append(HiddenKitchen(index=i, seed=seed, layout=int(rng.choice(REAL_SPLIT)),
                                          style=int(rng.choice(REAL_SPLIT))))
    return tuple(kitchens)


def _distinct_orders(seed: int, count: int) -> list[tuple[int, ...]]:
    if count > len(STACK_ORDERS):
        raise ValueError(f"the kit has {len(STACK_ORDERS)} distinct stack orders, the plan asks for {count} kitchens")
    start = seed % len(STACK_ORDERS)
    return [STACK_ORDERS[(start + i) % len(STACK_ORDERS)] for i in range(count)]


def kit_variant(kitchen: HiddenKitchen) -> dict:
    """The kit's kitchen layout with this kitchen's stack order and offsets (a fresh dict: RoboCasa edits it)."""
    from roboswe.sim.robocasa.kit import kit_layout

    layout = kit_layout()
    group = layout["main_group"]
    stacks = [dict(s) for s in group["bottom_row_cabinets"]]
    anchor = list(stacks[0]["pos"])  # the kit's first stack: depth and height of the row
    ordered = [stacks[i] for i in kitchen.stack_order]
    for s in ordered:
        for key in ("pos", "align_to", "alignment", "side"):
            s.pop(key, None)
    first = ordered[0]
    first["pos"] = [kitchen.stack_start_x + first["size"][0] / 2, anchor[1], anchor[2]]
    for prev, s in itertools.pairwise(ordered):
        s.update(align_to=prev["name"], alignment="top_back", side="right")
    group["bottom_row_cabinets"] = ordered
    top = group["top_row"][0]
    top["pos"] = [top["pos"][0] + kitchen.wall_shift_x, *top["pos"][1:]]
    return layout


def at_level(task: RleTask, level: Level) -> RleTask:
    """The same task, plan, seeds and weights at another harness level (its id says the level; L1 is the manifest's)."""
    if level not in LEVELS:
        raise ValueError(f"no harness level {level!r}; the levels are {LEVELS}")
    base = task.id.removesuffix(f"-{task.kitchen.level.lower()}") if task.kitchen.level != "L1" else task.id
    return msgspec.structs.replace(task, id=base if level == "L1" else f"{base}-{level.lower()}",
                                   kitchen=msgspec.structs.replace(task.kitchen, level=level))
