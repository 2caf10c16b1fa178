"""Family 03's rewards, from recorded physics states only (rules.py states each formula).

``BodyState`` is what a recorded snapshot says of one free body; the functions here never see the
participant's files or claims, only the snapshots the trusted side took before and after the settle
interval (and, for Hidden COM, the estimates it recorded from the participant's submit rows).
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

from roboswe.sim.tabletop_physics import tasks as t

from ..report import Component
from .rules import Tabletop


class BodyState(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    half: tuple[float, float, float]  # the body's box half sizes (its first, visible geom)
    pos0: tuple[float, float, float]  # at release
    quat0: tuple[float, float, float, float]
    pos1: tuple[float, float, float]  # after the settle interval
    quat1: tuple[float, float, float, float]
    speed1: float  # linear speed after the settle interval, m/s


def _rotation(q) -> np.ndarray:
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def corners(b: BodyState) -> np.ndarray:
    """The eight corners of the body's box after the settle interval, (8, 3)."""
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
    return np.asarray(b.pos1) + (signs * np.asarray(b.half)) @ _rotation(b.quat1).T


def turned_deg(q0, q1) -> float:
    dot = abs(float(np.dot(np.asarray(q0) / np.linalg.norm(q0), np.asarray(q1) / np.linalg.norm(q1))))
    return math.degrees(2 * math.acos(min(1.0, dot)))


def stable(b: BodyState, rules: Tabletop) -> bool:
    moved = float(np.linalg.norm(np.subtract(b.pos1, b.pos0)))
    return moved < rules.stable_move_m and turned_deg(b.quat0, b.quat1) < rules.stable_turn_deg and b.speed1 < rules.rest_speed


def tower_reward(bodies: list[BodyState], inst: t.TowerInstance, rules: Tabletop) -> tuple[float, tuple[Component, ...]]:
    """H / sum(edges): H the highest top corner of a stable cube (a cube lying on the table counts its edge)."""
    optimum = sum(inst.edges)
    tops = [float(corners(b)[:, 2].max()) for b in bodies if stable(b, rules)]
    height = max(tops, default=0.0)
    reward = min(1.0, max(0.0, height / optimum))
    return reward, (Component(name="height_m", value=round(height, 6), high=None),
                    Component(name="optimum_m", value=round(optimum, 6), high=None),
                    Component(name="stable_blocks", value=float(len(tops)), high=None))


def tower_formula(edges: tuple[float, ...], k: int) -> float:
    """The reward of a tower of the first ``k`` cubes (the others left on the table): the taller of that
    tower and the largest single cube, over the sum of all edges."""
    return max(sum(edges[:k]), max(edges)) / sum(edges)


def cantilever_reward(bodies: list[BodyState], inst: t.CantileverInstance, rules: Tabletop) -> tuple[float, tuple[Component, ...]]:
    """O / ((L/2)·H_n): O the farthest corner of a stable block past the table edge."""
    optimum = t.cantilever_optimum(inst.count)
    reach = [float(corners(b)[:, 0].max()) - t.CANTILEVER_EDGE_X for b in bodies if stable(b, rules)]
    overhang = max(0.0, max(reach, default=0.0))
    return min(1.0, overhang / optimum), (Component(name="overhang_m", value=round(overhang, 6), high=None),
                                          Component(name="optimum_m", value=round(optimum, 6), high=None),
                                          Component(name="stable_blocks", value=float(len(reach)), high=None))


def balance_reward(bodies: list[BodyState], angle0: float, angle1: float, beam_speed: float,
                   rules: Tabletop) -> tuple[float, tuple[Component, ...]]:
    """1 when the beam rests within level_deg of level after the settle interval with every cube at rest, else 0."""
    tilt = abs(math.degrees(angle1))
    at_rest = all(b.speed1 < rules.rest_speed for b in bodies) and beam_speed < math.radians(0.5)
    level = tilt <= rules.level_deg and at_rest
    return (1.0 if level else 0.0), (Component(name="tilt_deg", value=round(tilt, 6), high=None),
                                     Component(name="level", value=1.0 if level else 0.0))


def com_box_reward(estimate: tuple[float, float] | None, truth: tuple[float, float], rules: Tabletop) -> float:
    if estimate is None:
        return 0.0
    return max(0.0, 1.0 - math.dist(estimate, truth) / rules.com_error_m)


def com_reward(estimates: list[tuple[float, float] | None], truths: list[tuple[float, float]],
               rules: Tabletop) -> tuple[float, tuple[Component, ...]]:
    per_box = [com_box_reward(e, c, rules) for e, c in zip(estimates, truths)]
    errors = [math.dist(e, c) if e is not None else None for e, c in zip(estimates, truths)]
    components = tuple(Component(name=f"box{i}", value=round(r, 9)) for i, r in enumerate(per_box))
    components += tuple(Component(name=f"box{i}_error_m", value=round(e, 9), high=None)
                        for i, e in enumerate(errors) if e is not None)
    return sum(per_box) / len(per_box), components


def random_guess_expectation(rules: Tabletop, grid: int = 1201) -> tuple[float, float]:
    """A guesser uniform over the centres of mass the ballast can make ([-s, s]^2, s = share · ballast range):
    the expected per-box reward and its standard deviation, by midpoint quadrature of E[max(0, 1 - |D|/e0)]
    over D = guess - truth, whose axes are independent and triangular on [-2s, 2s]."""
    share = t.COM_BALLAST_MASS / (t.COM_SHELL_MASS + t.COM_BALLAST_MASS)
    a = 2 * share * t.COM_BALLAST_RANGE  # the square's side
    u = (np.arange(grid) + 0.5) / grid * 2 * a - a  # midpoints over [-a, a]
    w = (a - np.abs(u)) / a ** 2 * (2 * a / grid)  # triangular density times the cell width
    d = np.hypot(u[:, None], u[None, :])
    r = np.maximum(0.0, 1.0 - d / rules.com_error_m)
    weight = w[:, None] * w[None, :]
    mean = float((weight * r).sum())
    return mean, math.sqrt(max(0.0, float((weight * r * r).sum()) - mean ** 2))
