"""MoveFlange: timed flange waypoints, their validation, and the task-owned controller that executes them.

A batch is 1-32 waypoints, each a position in robot-base metres (x right, y forward, z up), a
unit quaternion (x, y, z, w) and a duration (s). A batch is checked whole before any physics
runs; the first violated rule rejects it with the waypoint index and the rule's name, and
nothing is ever clipped. RoboPaint fixes the count, the minimum duration and the batch total;
it states no workspace or speed numbers, so ``WORKSPACE`` and the speed limits are ours and
are published with the task spec.

Execution: the target pose moves linearly (position) and by slerp (orientation) from the
previous target to each waypoint over its duration, sampled at 100 Hz; at each sample a damped
least-squares IK step on the Panda's 7 joints (on a scratch MjData, so contact never feeds back
into the plan) gives joint targets, and a joint PD with gravity compensation tracks them over
five 500 Hz physics ticks. A contact force above ``PROTECTIVE_STOP_N`` on the robot or brush
ends the batch at once and is reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np

from . import scene as ps

MAX_WAYPOINTS = 32
MIN_DURATION_S = 0.08
MAX_BATCH_S = 20.0
QUAT_NORM_TOL = 1e-3  # |‖q‖ - 1| allowed; the controller normalises within it
WORKSPACE = {"x": (-0.35, 0.35), "y": (0.25, 0.80), "z": (0.10, 0.60)}  # robot-base metres, flange origin
MAX_LINEAR_SPEED = 0.5  # m/s, flange origin, per waypoint segment (ours: the seed states none)
MAX_ANGULAR_SPEED = 2.0  # rad/s, flange orientation, per waypoint segment
MAX_TILT_RAD = math.radians(75)  # the tool axis (flange +z) may tilt at most this far from straight down
PROTECTIVE_STOP_N = 30.0  # N: summed normal force of robot/brush contacts that stops the batch
IK_DAMPING = 0.05
IK_ITERATIONS = 3


class Waypoint(msgspec.Struct, frozen=True, kw_only=True):
    position: tuple[float, float, float]  # robot-base metres: x right, y forward, z up
    quaternion: tuple[float, float, float, float]  # x, y, z, w
    duration_s: float


class BatchRejected(ValueError):
    """A MoveFlange batch that breaks a rule; nothing was executed. ``index`` is None for batch-level rules."""

    def __init__(self, rule: str, detail: str, index: int | None = None):
        where = "batch" if index is None else f"waypoint {index}"
        super().__init__(f"MoveFlange rejected ({rule}) at {where}: {detail}. Nothing was executed; fix that and resend the batch.")
        self.rule, self.detail, self.index = rule, detail, index


class ProtectiveStop(msgspec.Struct, frozen=True, kw_only=True):
    waypoint_index: int
    control_step: int
    sim_time: float
    force_n: float
    contact: str  # "geom1/geom2" carrying the largest force


class ContactSummary(msgspec.Struct, kw_only=True):
    paper_ticks: int = 0
    pigment_ticks: int = 0
    max_force_n: float = 0.0
    coverage: float = 0.0  # pixel-units of pigment laid down


def quat_xyzw_to_wxyz(q: Sequence[float]) -> np.ndarray:
    return np.array([q[3], q[0], q[1], q[2]], dtype=np.float64)


def quat_wxyz_to_xyzw(q: Sequence[float]) -> np.ndarray:
    return np.array([q[1], q[2], q[3], q[0]], dtype=np.float64)


def _angle_between(a: np.ndarray, b: np.ndarray) -> float:
    """Rotation angle between unit quaternions (wxyz), sign-independent."""
    return 2.0 * math.acos(min(1.0, abs(float(np.dot(a, b)))))


def _tool_axis(q_wxyz: np.ndarray) -> np.ndarray:
    import mujoco

    m = np.zeros(9)
    mujoco.mju_quat2Mat(m, q_wxyz)
    return m.reshape(3, 3)[:, 2]


def parse_batch(raw: object) -> list[Waypoint]:
    """Decode a batch from builtins (list of {position, quaternion, duration_s}); raises BatchRejected naming the field."""
    try:
        return msgspec.convert(raw, list[Waypoint])
    except msgspec.ValidationError as e:
        raise BatchRejected("malformed", f"{e}; each waypoint is {{position: [x, y, z], quaternion: [x, y, z, w], duration_s}}") from None


def validate_batch(batch: Sequence[Waypoint], start_pos: np.ndarray, start_quat_wxyz: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Check every rule on the whole batch; return (position, unit quat wxyz, control steps) per waypoint.

    Raises BatchRejected with the first violated rule (rules: count, duration, batch_duration, finite,
    quaternion_norm, workspace, tilt, linear_speed, angular_speed).
    """
    n = len(batch)
    if not 1 <= n <= MAX_WAYPOINTS:
        raise BatchRejected("count", f"{n} waypoints; a batch has 1 to {MAX_WAYPOINTS}")
    total = 0.0
    elapsed_steps = 0
    out = []
    prev_p, prev_q = np.asarray(start_pos, float), np.asarray(start_quat_wxyz, float)
    for i, w in enumerate(batch):
        values = [*w.position, *w.quaternion, w.duration_s]
        if not all(math.isfinite(v) for v in values):
            raise BatchRejected("finite", f"non-finite value in {values}", i)
        if w.duration_s < MIN_DURATION_S:
            raise BatchRejected("duration", f"duration_s = {w.duration_s:g} is below the minimum {MIN_DURATION_S} s", i)
        total += w.duration_s
        norm = math.sqrt(sum(v * v for v in w.quaternion))
        if abs(norm - 1.0) > QUAT_NORM_TOL:
            raise BatchRejected("quaternion_norm", f"quaternion {list(w.quaternion)} has norm {norm:.6f}; "
                                f"it must be 1 within {QUAT_NORM_TOL} (order x, y, z, w)", i)
        p = np.array(w.position, dtype=np.float64)
        for axis, value in zip("xyz", p):
            low, high = WORKSPACE[axis]
            if not low <= value <= high:
                raise BatchRejected("workspace", f"{axis} = {value:.4f} m is outside the workspace [{low}, {high}] m "
                                    f"(robot-base frame, flange origin)", i)
        q = quat_xyzw_to_wxyz(w.quaternion) / norm
        tilt = math.acos(max(-1.0, min(1.0, -float(_tool_axis(q)[2]))))
        if tilt > MAX_TILT_RAD:
            raise BatchRejected("tilt", f"the tool axis (flange +z) is {math.degrees(tilt):.1f} deg from straight down; "
                                f"at most {math.degrees(MAX_TILT_RAD):.0f} deg", i)
        speed = float(np.linalg.norm(p - prev_p)) / w.duration_s
        if speed > MAX_LINEAR_SPEED:
            raise BatchRejected("linear_speed", f"{speed:.3f} m/s from the previous target exceeds {MAX_LINEAR_SPEED} m/s; "
                                "lengthen duration_s or add waypoints", i)
        omega = _angle_between(prev_q, q) / w.duration_s
        if omega > MAX_ANGULAR_SPEED:
            raise BatchRejected("angular_speed", f"{omega:.3f} rad/s from the previous target exceeds {MAX_ANGULAR_SPEED} rad/s", i)
        # Each waypoint ends at the control step nearest its cumulative time, so rounding never drifts over a batch.
        end = round(total * ps.CONTROL_HZ)
        out.append((p, q, max(1, end - elapsed_steps)))
        elapsed_steps = end
        prev_p, prev_q = p, q
    if total > MAX_BATCH_S + 1e-9:
        raise BatchRejected("batch_duration", f"durations sum to {total:g} s; a batch lasts at most {MAX_BATCH_S} s")
    return out


def slerp(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    if float(np.dot(a, b)) < 0:
        b = -b
    d = min(1.0, float(np.dot(a, b)))
    theta = math.acos(d)
    if theta < 1e-9:
        return a.copy()
    s = math.sin(theta)
    q = (math.sin((1 - t) * theta) * a + math.sin(t * theta) * b) / s
    return q / np.linalg.norm(q)


class ArmController:
    """Damped least-squares IK (100 Hz, scratch data) and joint PD with bias compensation (500 Hz)."""

    def __init__(self, model):
        import mujoco

        self._mj = mujoco
        self.model = model
        self.scratch = mujoco.MjData(model)
        self.flange = model.body(ps.FLANGE_BODY).id
        self.qadr = np.array([model.joint(n).qposadr[0] for n in ps.JOINTS])
        self.dadr = np.array([model.joint(n).dofadr[0] for n in ps.JOINTS])
        self.lo = model.jnt_range[[model.joint(n).id for n in ps.JOINTS], 0]
        self.hi = model.jnt_range[[model.joint(n).id for n in ps.JOINTS], 1]
        self.q_des = ps.HOME_Q.copy()
        self.qd_des = np.zeros(7)
        self._jacp = np.zeros((3, model.nv))
        self._jacr = np.zeros((3, model.nv))

    def flange_pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flange position and quaternion (wxyz) for joint angles ``q`` (forward kinematics on the scratch data)."""
        d = self.scratch
        d.qpos[self.qadr] = q
        self._mj.mj_kinematics(self.model, d)
        return d.xpos[self.flange].copy(), d.xquat[self.flange].copy()

    def solve(self, q: np.ndarray, pos: np.ndarray, quat: np.ndarray, iterations: int = IK_ITERATIONS) -> np.ndarray:
        """Joint angles near ``q`` that put the flange at (pos, quat wxyz): DLS steps with a nullspace pull home."""
        mj, d = self._mj, self.scratch
        q = q.copy()
        err_rot = np.zeros(3)
        neg = np.zeros(4)
        dq_err = np.zeros(4)
        for _ in range(iterations):
            d.qpos[self.qadr] = q
            mj.mj_kinematics(self.model, d)
            mj.mj_comPos(self.model, d)
            err_pos = pos - d.xpos[self.flange]
            mj.mju_negQuat(neg, d.xquat[self.flange])
            mj.mju_mulQuat(dq_err, quat, neg)
            mj.mju_quat2Vel(err_rot, dq_err, 1.0)
            mj.mj_jacBody(self.model, d, self._jacp, self._jacr, self.flange)
            J = np.vstack([self._jacp[:, self.dadr], self._jacr[:, self.dadr]])
            e = np.concatenate([err_pos, err_rot])
            JJt = J @ J.T + (IK_DAMPING**2) * np.eye(6)
            dq = J.T @ np.linalg.solve(JJt, e)
            pinv = J.T @ np.linalg.solve(JJt, np.eye(6))
            dq += (np.eye(7) - pinv @ J) @ (0.1 * (ps.HOME_Q - q))
            q = np.clip(q + dq, self.lo, self.hi)
        return q

    def torque(self, data) -> np.ndarray:
        q, qd = data.qpos[self.qadr], data.qvel[self.dadr]
        return ps.KP * (self.q_des - q) + ps.KD * (self.qd_des - qd) + data.qfrc_bias[self.dadr]


class MoveReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one executed MoveFlange batch did."""

    waypoints_completed: int
    control_steps: int
    sim_time: float
    protective_stop: ProtectiveStop | None
    paper_contact_steps: int  # physics ticks with the tip on the paper
    pigment_contact_steps: int  # physics ticks with the tip in the pigment
    max_contact_force_n: float
    coverage: float
    brush_load: float  # 0..1 after the batch
    flange_position: tuple[float, float, float]
    flange_quaternion: tuple[float, float, float, float]  # x, y, z, w


class PaintRig:
    """The live scene: physics, controller, canvas and brush load. One thread owns it."""

    def __init__(self) -> None:
        import mujoco

        self._mj = mujoco
        self.model, self.compiled = ps.build_model()
        self.data = mujoco.MjData(self.model)
        self.arm = ArmController(self.model)
        self.canvas = ps.Canvas()
        g = self.model.geom
        self.tip, self.paper, self.pigment = g("tip").id, g("paper").id, g("pigment").id
        self.robot_bodies = self._robot_body_ids()
        self.board_mocap = self.model.body("board").mocapid[0]
        self.dish_mocap = self.model.body("dish").mocapid[0]
        self.canvas_tex = self.model.texture("canvas").id
        self.layout: ps.Layout | None = None
        self.load = 0.0
        self.control_step = 0
        self.target_pos = np.zeros(3)
        self.target_quat = np.array([1.0, 0, 0, 0])
        self.on_control_step = None  # callback(rig) after each control step (state log)
        self._force = np.zeros(6)
        self._paper_R = np.eye(3)
        self._paper_c = np.zeros(3)
        self.physics_ticks = 0
        self.canvas_seconds = 0.0

    def _robot_body_ids(self) -> set[int]:
        root = self.model.body("base").id
        ids = set()
        for b in range(self.model.nbody):
            p = b
            while p != 0 and p != root:
                p = self.model.body_parentid[p]
            if p == root:
                ids.add(b)
        return ids

    def reset(self, layout: ps.Layout) -> None:
        """Blank paper, empty brush, arm at home, paper and dish where ``layout`` puts them."""
        mj, m, d = self._mj, self.model, self.data
        mj.mj_resetData(m, d)
        self.layout = layout
        board_pos = np.array([layout.paper_xy[0], layout.paper_xy[1], 0.01])
        yaw = np.array([math.cos(layout.paper_yaw / 2), 0, 0, math.sin(layout.paper_yaw / 2)])
        d.mocap_pos[self.board_mocap] = board_pos
        d.mocap_quat[self.board_mocap] = yaw
        d.mocap_pos[self.dish_mocap] = [layout.dish_xy[0], layout.dish_xy[1], 0.01]
        d.mocap_quat[self.dish_mocap] = [1, 0, 0, 0]
        # Home: straight down above the paper centre, solved from the nominal posture.
        home_quat = np.array([0.0, 1.0, 0.0, 0.0])  # wxyz: 180 deg about x, tool axis straight down
        home_pos = np.array([layout.paper_xy[0], layout.paper_xy[1], 0.35])
        q = ps.HOME_Q.copy()
        for _ in range(20):
            q = self.arm.solve(q, home_pos, home_quat)
        d.qpos[self.arm.qadr] = q
        self.arm.q_des, self.arm.qd_des = q.copy(), np.zeros(7)
        mj.mj_forward(m, d)
        rot = np.zeros(9)
        mj.mju_quat2Mat(rot, yaw)
        self._paper_R = rot.reshape(3, 3)
        self._paper_c = board_pos
        self.target_pos, self.target_quat = self.arm.flange_pose(q)
        self.canvas.clear()
        self.upload_canvas()  # the model's texture is part of the compiled-model fingerprint: blank it too
        self.load = 0.0
        self.control_step = 0

    # ---- one physics tick ----------------------------------------------------------------

    def _tick(self, summary: ContactSummary) -> tuple[float, str]:
        """Advance one 500 Hz tick; handle tip contacts (pigment, paper); return the largest robot contact force."""
        mj, m, d = self._mj, self.model, self.data
        d.ctrl[:7] = self.arm.torque(d)
        mj.mj_step(m, d)
        self.physics_ticks += 1
        total, worst, worst_name = 0.0, 0.0, ""
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = int(c.geom1), int(c.geom2)
            b1, b2 = m.geom_bodyid[g1], m.geom_bodyid[g2]
            if not ((b1 in self.robot_bodies) ^ (b2 in self.robot_bodies)):
                continue
            mj.mj_contactForce(m, d, i, self._force)
            f = abs(float(self._force[0]))
            total += f
            if f > worst:
                worst, worst_name = f, f"{mj.mj_id2name(m, mj.mjtObj.mjOBJ_GEOM, g1)}/{mj.mj_id2name(m, mj.mjtObj.mjOBJ_GEOM, g2)}"
            if self.tip in (g1, g2):
                other = g2 if g1 == self.tip else g1
                if other == self.pigment and f > ps.RELOAD_MIN_N:
                    summary.pigment_ticks += 1
                    self.load += ps.RELOAD_RATE * ps.PHYSICS_DT * (1.0 - self.load)
                elif other == self.paper:
                    summary.paper_ticks += 1
                    self._paint(np.array(c.pos), f, summary)
        summary.max_force_n = max(summary.max_force_n, total)
        return total, worst_name

    def _paint(self, point: np.ndarray, force: float, summary: ContactSummary) -> None:
        import time

        t0 = time.perf_counter()
        local = self._paper_R.T @ (point - self._paper_c)
        half = ps.PAPER_SIZE / 2
        px = ps.CANVAS_PX / ps.PAPER_SIZE
        col, row = (local[0] + half) * px, (half - local[1]) * px  # row 0 = the paper's far (+y) edge
        splay = min(1.0, force / ps.SPLAY_FULL_N)
        radius = (ps.SPLAY_MIN + (ps.SPLAY_MAX - ps.SPLAY_MIN) * splay) * px
        coverage = min(1.0, ps.COVER_RATE * ps.PHYSICS_DT * self.load * min(1.0, force / ps.PRESSURE_FULL_N))
        laid = self.canvas.deposit(row, col, radius, coverage)
        self.load = max(0.0, self.load - laid * ps.LOAD_SPENT_PER_PIXEL)
        summary.coverage += laid
        self.canvas_seconds += time.perf_counter() - t0

    # ---- MoveFlange ------------------------------------------------------------------------

    def move(self, plan: list[tuple[np.ndarray, np.ndarray, int]], max_steps: int | None = None) -> MoveReport:
        """Execute a validated plan (validate_batch's output); stops early on a protective stop or ``max_steps``."""
        summary = ContactSummary()
        stop: ProtectiveStop | None = None
        done = 0
        dt_c = 1.0 / ps.CONTROL_HZ
        steps = 0
        for index, (pos, quat, n) in enumerate(plan):
            p0, q0 = self.target_pos, self.target_quat
            for k in range(1, n + 1):
                if max_steps is not None and steps >= max_steps:
                    break
                t = k / n
                tp, tq = p0 + (pos - p0) * t, slerp(q0, quat, t)
                q_new = self.arm.solve(self.arm.q_des, tp, tq)
                self.arm.qd_des = (q_new - self.arm.q_des) / dt_c
                self.arm.q_des = q_new
                for _ in range(ps.TICKS_PER_CONTROL):
                    force, where = self._tick(summary)
                    if force > PROTECTIVE_STOP_N:
                        stop = ProtectiveStop(waypoint_index=index, control_step=self.control_step + 1,
                                              sim_time=round(self.data.time, 9), force_n=round(force, 3), contact=where)
                        break
                self.control_step += 1
                steps += 1
                if self.on_control_step is not None:
                    self.on_control_step(self)
                if stop is not None:
                    break
            if stop is not None or (max_steps is not None and steps >= max_steps and k < n):
                break
            done += 1
            self.target_pos, self.target_quat = pos.copy(), quat.copy()
        if stop is not None:
            # Hold where the arm is: the next batch starts from the measured flange pose.
            q = self.data.qpos[self.arm.qadr].copy()
            self.arm.q_des, self.arm.qd_des = q, np.zeros(7)
            self.target_pos, self.target_quat = self.arm.flange_pose(q)
        fpos, fquat = self.flange()
        return MoveReport(waypoints_completed=done, control_steps=steps, sim_time=round(steps * dt_c, 9), protective_stop=stop,
                          paper_contact_steps=summary.paper_ticks, pigment_contact_steps=summary.pigment_ticks,
                          max_contact_force_n=round(summary.max_force_n, 4), coverage=round(summary.coverage, 3),
                          brush_load=round(self.load, 6), flange_position=tuple(float(v) for v in fpos),
                          flange_quaternion=tuple(float(v) for v in fquat))

    def hold(self, steps: int) -> None:
        """Advance ``steps`` control steps holding the current joint targets."""
        summary = ContactSummary()
        self.arm.qd_des = np.zeros(7)
        for _ in range(steps):
            for _ in range(ps.TICKS_PER_CONTROL):
                self._tick(summary)
            self.control_step += 1
            if self.on_control_step is not None:
                self.on_control_step(self)

    def flange(self) -> tuple[np.ndarray, np.ndarray]:
        """The measured flange position (m) and quaternion (x, y, z, w) in the robot-base frame."""
        # Forward kinematics of the current joints (MjData's xpos lags qpos by one step after mj_step).
        pos, quat = self.arm.flange_pose(self.data.qpos[self.arm.qadr])
        return pos, quat_wxyz_to_xyzw(quat)

    def upload_canvas(self) -> None:
        """Copy the canvas into the model's texture (on the paper box's top face texture row 0 lies at the +y edge, as canvas row 0)."""
        adr = self.model.tex_adr[self.canvas_tex]
        n = ps.CANVAS_PX * ps.CANVAS_PX * 3
        self.model.tex_data[adr:adr + n] = self.canvas.rgb().reshape(-1)
