"""The trusted side of a family 03 attempt: ``TabletopScene``, the family's development scene (the seam of
roboswe/rle/scene.py: ``DevelopmentSim`` holds the ledger and the budgets, this holds the physics) over
the HIDDEN instance, and the record of everything that happened to it.

RLE-Bench's family 03 has no development/evaluation split: one continuous attempt, and what is scored
is the simulator's final state. So the scene records every row it applied (``events``) and, at
``submit``, releases the structure (fingers open, the hand withdrawn straight up), takes a snapshot,
simulates the settle interval, takes another: the reward is computed from those two snapshots (and for
Hidden COM from the estimates it took from submit rows and the boxes' centres of mass as compiled),
never from anything the participant writes. ``load`` (the first scene and every ``robot.reset()``)
restores the same private initial scene, as RLE-Bench's reset does.
"""

from __future__ import annotations

import math
import time

import msgspec
import numpy as np

from roboswe.protocol import sim as simp
from roboswe.sim.tabletop_physics import tasks as t
from roboswe.sim.tabletop_physics.scene import (
    CONTROL_HZ,
    FIRM,
    MAX_MOVE_M,
    MAX_TURN_RAD,
    Layout,
    Scene,
)

from ..manifest import RleTask
from .plan import Plan
from .rules import Tabletop

WITHDRAW_Z = 0.55


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    time: float
    qpos: list[float]
    qvel: list[float]


class AttemptRecord(msgspec.Struct, kw_only=True):
    """What the trusted side keeps of one attempt (the plan is revealed in it after scoring)."""

    task: str
    plan: Plan
    events: list[list[float]] = msgspec.field(default_factory=list)  # [] a load; [applied, *row] a step
    released: Snapshot | None = None  # after release and withdrawal
    settled: Snapshot | None = None  # settle_seconds later
    estimates: list[list[float]] = msgspec.field(default_factory=list)  # com: one [x, y] per box, in order
    box_com: list[list[float]] = msgspec.field(default_factory=list)  # com: each box's compiled centre of mass
    submitted: bool = False
    unstable_steps: int = 0  # MuJoCo's bad-acceleration warnings (it resets the state): 0 in a sound attempt


def layouts(plan: Plan) -> list[Layout]:
    """The scenes of an instance: one, or (Hidden COM) one per box, in order."""
    inst = plan.instance
    if isinstance(inst, t.TowerInstance):
        return [t.tower_layout(inst)]
    if isinstance(inst, t.CantileverInstance):
        return [t.cantilever_layout(inst)]
    if isinstance(inst, t.BalanceInstance):
        return [t.balance_layout(inst)]
    return [t.com_layout(inst, i) for i in range(len(inst.ballast))]


def _snapshot(scene: Scene) -> Snapshot:
    d = scene.data
    return Snapshot(time=float(d.time), qpos=d.qpos.tolist(), qvel=d.qvel.tolist())


def action_components(kind: str) -> list[simp.ActionComponent]:
    move = "metres per control step, table frame (the tool-centre point between the finger pads)"
    parts = [("hand.dx", -MAX_MOVE_M, MAX_MOVE_M, move), ("hand.dy", -MAX_MOVE_M, MAX_MOVE_M, move),
             ("hand.dz", -MAX_MOVE_M, MAX_MOVE_M, move), ("hand.dyaw", -MAX_TURN_RAD, MAX_TURN_RAD, "radians per control step about z"),
             ("gripper.grip", 0.0, 1.0, f"0 open; below {FIRM} a light pinch (a box pivots between the pads); {FIRM} or more a firm grip")]
    if kind == "com":
        h = t.COM_BOX_HALF[0]
        parts += [("submit", 0.0, 1.0, "1 submits est_x, est_y for the current box (once per box, final; the hand holds still)"),
                  ("est_x", -h, h, "metres, the box frame (its centre, axes as the table's at the start)"),
                  ("est_y", -h, h, "metres, the box frame")]
    return [simp.ActionComponent(index=i, name=n, low=lo, high=hi, unit=u) for i, (n, lo, hi, u) in enumerate(parts)]


class TabletopScene:
    """The family's development scene on the hidden instance (``DevelopmentScene`` of roboswe/rle/scene.py)."""

    control_hz = CONTROL_HZ

    def __init__(self, task: RleTask, plan: Plan):
        self.task, self.rules = task, task.tabletop
        self.plan = plan
        self.record = AttemptRecord(task=task.id, plan=plan)
        self._layouts = layouts(plan)
        comps = action_components(self.rules.kind)
        hold = [0.0] * len(comps)
        self.action = simp.ActionSpec(
            dim=len(comps), low=[c.low for c in comps], high=[c.high for c in comps], components=comps, hold=hold,
            hold_rule="zero displacement holds the hand; grip is absolute (repeat it to keep holding)",
            doc=f"one row per {CONTROL_HZ} Hz control step: {', '.join(c.name for c in comps)}")
        size = self.rules.image_size
        self.cameras = [simp.CameraInfo(name=name, width=size, height=size, depth=False, calibration=True)
                        for name, _, _ in self._layouts[0].cameras]
        self.state_keys = ["hand", "finger_gap"] + {"balance": ["pointer_deg"], "com": ["box", "box_steps_left"]}.get(self.rules.kind, [])
        self.scene: Scene | None = None
        self._renderer = None
        self.box, self.box_steps, self._box_started = 0, 0, time.monotonic()

    # --- the DevelopmentScene interface --------------------------------------------------------

    def load(self, seed: int) -> None:
        """The private initial scene (the seed is the public cycle's; this family has one hidden instance)."""
        self.record.events.append([])
        self.box, self.box_steps, self._box_started = 0, 0, time.monotonic()
        self._open(0)

    def _open(self, index: int) -> None:
        self.close()
        self._count_instability()
        self.scene = Scene(self._layouts[index])
        if self.rules.kind == "com":
            self.record.box_com.append([float(v) for v in self.scene.model.body_ipos[self.scene.model.body("box").id][:2]])

    def values(self, control_step: int) -> dict[str, list[float]]:
        s = self.scene
        out = {"hand": [round(v, 6) for v in s.hand], "finger_gap": [round(s.finger_gap, 5)]}
        if self.rules.kind == "balance":
            out["pointer_deg"] = [round(math.degrees(s.beam_angle()), 3)]
        if self.rules.kind == "com":
            out["box"] = [float(self.box)]
            out["box_steps_left"] = [float(max(0, self.rules.box_steps - self.box_steps))]
        return out

    def observe(self, control_step: int, depth: bool) -> tuple[list[simp.CameraImage], list[bytes]]:
        from roboswe.sim.render import SceneRenderer

        s = self.scene
        if self._renderer is None:
            self._renderer = SceneRenderer(s.model, max_width=self.rules.image_size, max_height=self.rules.image_size)
        d = s.data
        self._renderer.load_state({k: getattr(d, k).copy() for k in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat")})
        images, blobs = [], []
        for cam in self.cameras:
            f = self._renderer.render(cam.name, cam.width, cam.height, depth=False, calibration=True)
            images.append(simp.CameraImage(camera=cam.name, width=cam.width, height=cam.height, rgb_blob=len(blobs),
                                           K=f.K.round(9).tolist(), T_world_camera=f.T_world_camera.round(9).tolist()))
            blobs.append(np.ascontiguousarray(f.rgb).tobytes())
        return images, blobs

    def step(self, row: list[float]) -> None:
        applied = self._apply(row, live=True)
        self.record.events.append([1.0 if applied else 0.0, *row])

    def _apply(self, row: list[float], *, live: bool) -> bool:
        """One row: a Hidden COM submit takes the estimate (final for the box) and opens the next box; a movement
        row past the box's step or wall budget holds still (the participant can still observe and submit)."""
        if self.rules.kind == "com":
            if row[5] >= 0.5:
                self.record.estimates.append([float(row[6]), float(row[7])])
                self.box, self.box_steps, self._box_started = self.box + 1, 0, time.monotonic()
                if self.box < len(self._layouts):
                    self._open(self.box)
                return True
            over_time = live and self.rules.box_seconds and time.monotonic() - self._box_started > self.rules.box_seconds
            if self.box >= len(self._layouts) or self.box_steps >= self.rules.box_steps or over_time:
                return False
            self.box_steps += 1
        self.scene.step(*row[:5])
        return True

    def guide(self) -> str:
        return (f"One continuous session; robot.reset() "
                f"{'is not offered' if self.task.budget.resets == 0 else 'restores the same initial scene'}. "
                f"Free: robot.observe() (RGB cameras {[c.name for c in self.cameras]}, {self.rules.image_size}x{self.rules.image_size}, no depth) "
                f"and robot.state(): {self.state_keys} (the tool-centre point x, y, z, yaw; the opening between the finger pads"
                f"{'; the scale pointer, degrees, + when the right arm is down' if self.rules.kind == 'balance' else ''}). "
                f"No object poses, masses, forces or contacts. A row moves the hand at most {MAX_MOVE_M} m per axis. "
                f"When you stop, the structure is released and scored after {self.rules.settle_seconds} s of settling.")

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # --- the end of the attempt ----------------------------------------------------------------

    def submit(self) -> AttemptRecord:
        """Release, withdraw, snapshot, settle, snapshot (Hidden COM: nothing moves; its record is the estimates)."""
        if self.rules.kind != "com":
            release(self.scene, self.rules)
            self.record.released, self.record.settled = self._settle()
        self.record.submitted = True
        self._count_instability()
        self.close()
        return self.record

    def _count_instability(self) -> None:
        if self.scene is not None:
            self.record.unstable_steps += self.scene.unstable_steps()
            self.scene = None

    def _settle(self) -> tuple[Snapshot, Snapshot]:
        before = _snapshot(self.scene)
        self.scene.settle(self.rules.settle_seconds)
        return before, _snapshot(self.scene)


def release(scene: Scene, rules: Tabletop) -> None:
    """Open the fingers for half a second, then lift the hand straight up out of the way: to WITHDRAW_Z, or as
    high as the arm reaches there (a row the arm cannot make holds the hand)."""
    for _ in range(CONTROL_HZ // 2):
        scene.step(0.0, 0.0, 0.0, 0.0, 0.0)
    while scene.hand[2] < WITHDRAW_Z - 1e-9:
        z = scene.hand[2]
        scene.step(0.0, 0.0, min(MAX_MOVE_M, WITHDRAW_Z - z), 0.0, 0.0)
        if scene.hand[2] <= z:
            break

