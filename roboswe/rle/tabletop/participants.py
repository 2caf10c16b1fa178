"""Scripted calibration participants for family 03. Each drives a robot client (``state()``, ``step(rows)``,
``observe()``: the participant's side of the robot subset, no more) and knows only the public geometry
(sim/tabletop_physics/tasks.py, stated in the instructions): they find block counts and sizes by closing
the fingers on the slots, the scale's balance by its pointer, a box's centre of mass by pinching it and
reading its tilt off a camera image.
"""

from __future__ import annotations

import math

import numpy as np

from roboswe.sim.tabletop_physics import tasks as t
from roboswe.sim.tabletop_physics.scene import MAX_MOVE_M, MAX_TURN_RAD

SAFE_Z = 0.2
FIRM, PINCH, OPEN = 1.0, 0.3, 0.0
SETTLE_ROWS = 5  # still rows after a move: the arm's reference lags a moving set point by up to 1 cm


class Hand:
    """Straight-line moves at the controller's step limit, each followed by SETTLE_ROWS still rows (the arm
    arrives where it was sent before the fingers act); every row goes through the robot client."""

    def __init__(self, robot, width: int):
        self.robot, self.width = robot, width
        self.grip = OPEN

    def pose(self) -> list[float]:
        return self.robot.state()["hand"]

    def rows(self, rows: list[list[float]]) -> None:
        self.robot.step([r + [0.0] * (self.width - len(r)) for r in rows])

    def move(self, x: float, y: float, z: float, yaw: float | None = None) -> None:
        hx, hy, hz, hyaw = self.pose()
        yaw = hyaw if yaw is None else yaw
        delta = np.array([x - hx, y - hy, z - hz, yaw - hyaw])
        n = max(1, math.ceil(max(np.abs(delta[:3]).max() / MAX_MOVE_M, abs(delta[3]) / MAX_TURN_RAD) / 0.999))
        self.rows([list(delta / n) + [self.grip]] * n + [[0.0, 0.0, 0.0, 0.0, self.grip]] * SETTLE_ROWS)

    def hold(self, grip: float, steps: int) -> None:
        self.grip = grip
        self.rows([[0.0, 0.0, 0.0, 0.0, grip]] * steps)

    def gap(self) -> float:
        return self.robot.state()["finger_gap"][0]

    def feel(self, x: float, y: float, z: float, travel: float = SAFE_Z) -> float:
        """Close the fingers at (x, y, z), come from above at ``travel`` unless already over (x, y); the opening
        they stop at (about the width held; ~0 when nothing is there)."""
        hx, hy, hz, _ = self.pose()
        if math.hypot(x - hx, y - hy) > 1e-3 or hz < z:
            self.move(hx, hy, max(hz, travel))
            self.move(x, y, max(hz, travel))
        self.move(x, y, z)
        self.hold(FIRM, 8)
        return self.gap()

    def place(self, x: float, y: float, z: float) -> None:
        """Carry what is held over (x, y) above the place (at least SAFE_Z), lower it to z, open, and rise."""
        carry = max(SAFE_Z, z + 0.08)
        self.move(self.pose()[0], self.pose()[1], carry)
        self.move(x, y, carry)
        self.move(x, y, z)
        self.hold(OPEN, 8)
        self.move(x, y, carry)


GRASP_Z = 0.02  # the tool-centre point's height above a block's bottom when it picks it up
ROW_Z = 0.075  # clears a row of cubes standing on the table


def tower(robot, k: int | None = None) -> dict:
    """Find the cubes (slots), then stack the first ``k`` (all by default) on the first one."""
    hand = Hand(robot, 5)
    edges = []
    for i in range(8):  # along the row just above the cubes (the fingers reach 0.015 below the pads' centre)
        width = hand.feel(t.TOWER_SLOTS_X0 + t.TOWER_SLOT_PITCH * i, t.TOWER_SLOT_Y, GRASP_Z, travel=ROW_Z)
        hand.hold(OPEN, 6)
        hand.move(*hand.pose()[:2], ROW_Z)
        if width < 0.02:
            break
        edges.append(width)
    k = len(edges) if k is None else min(k, len(edges))
    x0, y0 = t.TOWER_SLOTS_X0, t.TOWER_SLOT_Y
    catch0 = catch_height(hand, x0, y0, edges[0] + 0.025)
    offset, top = 0.0, catch0  # the first cube's top is below where the fingers first catch it
    for i in range(1, k):
        hand.feel(t.TOWER_SLOTS_X0 + t.TOWER_SLOT_PITCH * i, y0, GRASP_Z)
        hand.place(x0, y0, top + GRASP_Z + 0.003)
        if i == 1:  # two catches a cube apart: the true edge of cube 1, so how much the gap under-reads
            catch1 = catch_height(hand, x0, y0, catch0 + edges[1] + 0.012)
            offset = catch1 - catch0 - edges[1]
            top = edges[0] + offset + edges[1] + offset
        else:
            top += edges[i] + offset
    return {"cubes": len(edges), "stacked": k, "widths": [round(e, 4) for e in edges], "width_offset": round(offset, 4)}


def catch_height(hand: Hand, x: float, y: float, z: float) -> float:
    """The highest tool-centre-point height, in 1 mm steps down from ``z``, at which closing the fingers catches
    something (a fixed distance above the top of what is caught)."""
    for _ in range(60):  # open between probes, the hand stays over (x, y) and steps down
        caught = hand.feel(x, y, z) > 0.01
        hand.hold(OPEN, 4)
        if caught:
            return z
        z -= 0.001
    raise RuntimeError(f"nothing to catch at ({x}, {y}) down to z = {z:.3f}")


def cantilever(robot, margin: float = 0.9) -> dict:
    """Count the blocks in the pile (the highest level whose block the fingers catch), then build the harmonic
    stack scaled by ``margin`` from the bottom up at y = 0.3, taking blocks off the top of the pile."""
    hand = Hand(robot, 5)
    length, _, height = t.CANTILEVER_BLOCK
    count = 0
    for level in range(t.CANTILEVER_COUNT_RANGE[1], 0, -1):
        caught = hand.feel(*t.CANTILEVER_PILE, height * (level - 0.5)) > 0.02
        hand.hold(OPEN, 6)
        hand.move(*t.CANTILEVER_PILE, SAFE_Z)
        if caught:
            count = level
            break
    for level in range(count):  # level 0 at the bottom is block count-level from the top
        k = count - level
        right_end = t.CANTILEVER_EDGE_X + margin * length / 2 * sum(1.0 / i for i in range(k, count + 1))
        hand.feel(*t.CANTILEVER_PILE, height * (count - level - 0.5))
        hand.place(right_end - length / 2, 0.3, level * height + height / 2 + 0.002)
    return {"blocks": count, "margin": margin}


def _surface_z(x: float, tilt_deg: float) -> float:
    return t.BALANCE_PIVOT[2] - x * math.sin(math.radians(tilt_deg))


def balance(robot, rounds: int = 5, level_deg: float = 0.08) -> dict:
    """Weigh by the pointer: add the cubes outermost first until the beam passes level, learning each one's
    effect per metre of arm as it goes on; then move the cube whose shift alone can level the beam (else the
    last one as far as it can go) along the arm, until the pointer reads level."""
    hand = Hand(robot, 5)

    def pointer() -> float:
        return robot.state()["pointer_deg"][0]

    y, half, gap = t.BALANCE_PIVOT[1], t.BALANCE_CUBE_HALF, 2 * t.BALANCE_CUBE_HALF + 0.008
    arms: list[float] = []  # x of the cubes on the beam, outermost first (slot i's cube is arms[i])
    per_m: list[float] = []  # degrees per metre of arm, each cube's
    hand.hold(OPEN, 50)  # the scale comes to rest under its load
    before = pointer()
    for slot, arm in enumerate(t.BALANCE_ARMS):
        if before >= -level_deg:
            break
        hand.feel(*t.BALANCE_SLOTS[slot], half)
        hand.place(arm, y, _surface_z(arm, before) + half + 0.004)
        hand.hold(OPEN, 50)  # the scale settles
        now = pointer()
        arms.append(arm)
        per_m.append((now - before) / arm)
        before = now
    for _ in range(rounds):
        tilt = pointer()
        if abs(tilt) <= level_deg or not arms:
            break
        bounds = [(arms[j + 1] + gap if j + 1 < len(arms) else 0.03, arms[j - 1] - gap if j else 0.23) for j in range(len(arms))]
        targets = [arms[j] - tilt / per_m[j] for j in range(len(arms))]
        fits = [j for j in reversed(range(len(arms))) if bounds[j][0] <= targets[j] <= bounds[j][1]]
        j = fits[0] if fits else len(arms) - 1
        target = float(np.clip(targets[j], *bounds[j]))
        hand.feel(arms[j] * math.cos(math.radians(tilt)), y, _surface_z(arms[j], tilt) + half)
        hand.place(target, y, _surface_z(target, tilt) + half + 0.004)
        hand.hold(OPEN, 50)
        arms[j] = target
    return {"arms": [round(a, 4) for a in arms], "pointer_deg": pointer()}


def random_com(robot, rng: np.random.Generator) -> dict:
    """Guess each box's centre of mass uniformly over the square the ballast can make, without touching it."""
    share = t.COM_BALLAST_MASS / (t.COM_SHELL_MASS + t.COM_BALLAST_MASS)
    s = share * t.COM_BALLAST_RANGE
    guesses = [list(rng.uniform(-s, s, 2)) for _ in range(t.COM_BOXES)]
    for g in guesses:
        robot.step([[0.0] * 5 + [1.0, *g]])
    return {"guesses": guesses}


PINCH_Z = 0.04  # the pads' height when pinching a box resting on the table (its top at 0.05)
LIFT_Z = 0.3


def tilt_from_image(rgb: np.ndarray) -> float | None:
    """The box's tilt in the image plane, radians (+: its right side lower), from its orange silhouette's lower
    edge: per column the lowest orange pixel, a line fitted over the middle of the span."""
    r, g, b = (rgb[..., i].astype(int) for i in range(3))
    mask = (r > 120) & (r - b > 90) & (g < r - 40)
    cols = np.flatnonzero(mask.any(axis=0))
    if len(cols) < 10:
        return None
    lo, hi = cols[0] + (cols[-1] - cols[0]) // 5, cols[-1] - (cols[-1] - cols[0]) // 5
    xs = np.arange(lo, hi + 1)
    bottoms = np.array([np.flatnonzero(mask[:, c])[-1] if mask[:, c].any() else -1 for c in xs])
    keep = bottoms >= 0
    slope = np.polyfit(xs[keep], bottoms[keep], 1)[0]
    return math.atan(slope)


def probe_com(robot) -> dict:
    """For each box: pinch it at its centre with the fingers along y, lift, let it swing to rest, read its tilt
    on the x camera; put it down; the same with the fingers along x for y. The centre of mass hangs below the
    pinch line: offset = depth · tan(tilt), the depth from the public masses and ballast height. A box put
    down tilted lands on its low corner and tips flat about it, so the second pinch goes where it tipped to
    (``tipped_x``): where the fingers along x clear its sides."""
    hand = Hand(robot, 8)
    depth = t.com_depth_below(PINCH_Z - t.COM_BOX_HALF[2])

    def tipped_x(offset: float) -> float:
        """Where the box, pinched at its centre and hanging with its centre of mass ``offset`` along x, rests
        once put down and let go: its low corner (PINCH_Z below the pinch, half a box out) lands and stays,
        the box tips flat about it, its centre ending up on the side away from the offset."""
        tilt, half = math.atan2(abs(offset), depth), t.COM_BOX_HALF[0]
        return t.COM_BOX_POS[0] - math.copysign(PINCH_Z * math.sin(tilt) + half * (1 - math.cos(tilt)), offset)

    estimates = []
    for _ in range(t.COM_BOXES):
        est, x = [], t.COM_BOX_POS[0]
        for yaw, camera in ((0.0, "tilt_x"), (math.pi / 2, "tilt_y")):
            hand.move(x, t.COM_BOX_POS[1], SAFE_Z, yaw)
            hand.move(x, t.COM_BOX_POS[1], PINCH_Z)
            hand.hold(PINCH, 8)
            hand.move(x, t.COM_BOX_POS[1], LIFT_Z)
            hand.hold(PINCH, 40)
            tilt = tilt_from_image(robot.observe()[camera])
            est.append(depth * math.tan(tilt) if tilt is not None else 0.0)
            hand.move(x, t.COM_BOX_POS[1], PINCH_Z + 0.004)
            hand.hold(OPEN, 10)
            hand.move(x, t.COM_BOX_POS[1], SAFE_Z)
            x = tipped_x(est[0])
        hand.move(*t.COM_BOX_POS, SAFE_Z, 0.0)
        robot.step([[0.0] * 5 + [1.0, *est]])
        estimates.append([round(v, 5) for v in est])
    return {"estimates": estimates}
