"""The held-out task's hidden kitchens: one per fresh agent, from the hidden plan's seeds.

Agent *k* (and control agent *k*: the pair shares a kitchen, so the transfer effect is read off kitchen
by kitchen) attempts the held-out composite in kitchen *k*, drawn from hidden seed *k* = HMAC(salt,
``transfer/<held-out>|<version>|k``) exactly as family 01 draws its kitchens (roboswe/rle/kitchen/plan.py:
on the kit a generated variant of the kit's one-wall kitchen, the seed as RoboCasa's scene seed). Nothing
here is participant-visible.
"""

from __future__ import annotations

from ..kitchen.plan import HiddenPlan, kitchens_from_seeds
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
    return HiddenPlan(task=plan_key(task), version=task.protocol.version, salt_sha256=salt_sha256,
                      salt_label=salt_label, kitchens=kitchens_from_seeds(seeds, kit=True))
