"""The hidden instance of a family 03 task: drawn from the hidden plan's seed (seeds.py: HMAC-SHA256 of the
salt), so only a holder of the salt knows it before the attempt; the plan (seed and instance) is committed
in the report and revealed after scoring, so a replay rebuilds the same scene."""

from __future__ import annotations

import msgspec
import numpy as np

from roboswe.sim.tabletop_physics import tasks as t

from ..manifest import RleTask
from ..seeds import Salt, commitment, hidden_seeds


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    task: str
    version: str
    seed: int
    instance: t.TowerInstance | t.CantileverInstance | t.BalanceInstance | t.ComInstance


def draw_instance(kind: str, seed: int):
    """The instance a seed makes (deterministic in the seed; rounded so the record is exact)."""
    rng = np.random.default_rng(seed)
    if kind == "tower":
        n = int(rng.integers(t.TOWER_COUNT_RANGE[0], t.TOWER_COUNT_RANGE[1] + 1))
        return t.TowerInstance(edges=tuple(round(float(e), 4) for e in rng.uniform(*t.TOWER_EDGE_RANGE, n)))
    if kind == "cantilever":
        return t.CantileverInstance(count=int(rng.integers(t.CANTILEVER_COUNT_RANGE[0], t.CANTILEVER_COUNT_RANGE[1] + 1)))
    if kind == "balance":
        while True:  # the cubes at their outermost places must out-weigh the load (a balance exists)
            load = round(float(rng.uniform(*t.BALANCE_LOAD_RANGE)), 4)
            masses = tuple(round(float(m), 4) for m in rng.uniform(*t.BALANCE_CUBE_RANGE, len(t.BALANCE_SLOTS)))
            if sum(m * a for m, a in zip(sorted(masses, reverse=True), t.BALANCE_ARMS)) >= 1.15 * load * -t.BALANCE_LOAD_X:
                return t.BalanceInstance(load_mass=load, masses=masses)
    if kind == "com":
        r = t.COM_BALLAST_RANGE
        return t.ComInstance(ballast=tuple((round(float(x), 5), round(float(y), 5))
                                           for x, y in rng.uniform(-r, r, (t.COM_BOXES, 2))))
    raise ValueError(f"no tabletop task kind {kind!r}")


def make_plan(task: RleTask, salt: Salt | None = None, seed: int | None = None) -> Plan:
    """The plan from the salt (the trusted side's draw) or from a revealed seed (a replay)."""
    if seed is None:
        if salt is None:
            raise ValueError("a plan needs the salt or a revealed seed")
        (seed,) = hidden_seeds(salt, task.id, task.protocol.version, 1)
    return Plan(task=task.id, version=task.protocol.version, seed=seed, instance=draw_instance(task.tabletop.kind, seed))


def plan_commitment(plan: Plan) -> str:
    return commitment(plan)
