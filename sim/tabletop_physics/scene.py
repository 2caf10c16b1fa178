"""The tabletop scene in MuJoCo: a table (top at z = 0), robosuite's Panda (the 7-joint arm with its gripper,
arm.py), and the instance's free bodies (blocks, boxes) and, for Balance, a beam on a pivot.

The robot. The arm stands on the table where the layout puts its ``base`` (each task's, tasks.py) and is
simulated: its links, hand and fingers are collision bodies, its joints driven by torque through arm.py's
controller (inverse kinematics to a tool-centre-point set point, a smoothed joint reference, computed
torque). Each 20 Hz control step moves the set point by at most ``MAX_MOVE_M`` per axis and
``MAX_TURN_RAD`` of yaw (the hand pointing down). A set point outside ``REACH`` is clipped to it; one the
arm cannot reach (a Panda reaches a top-down tool-centre point at table height between about 0.3 and
0.75 m from its base, so not all of ``REACH``; a joint limit) is refused: the hand holds.
``hand`` reads the set point, not the measured pose: under the controller's finite stiffness the measured
pose would give way to contact and load, a force reading the manifests exclude.

The grasp. The fingers are simulated: they close on what is between them under their actuators' 20 N limit
and report their opening (``finger_gap``) as a Panda does. Two grasp rules stay on top of that:

- a firm grip (``grip`` >= 0.5) on a body touched by both finger pads is made rigid by a weld between the
  ``panda_tcp`` body and the block: the cubes are placed to a millimetre and the tower's calibration reads
  heights off where the fingers catch, which needs a hold that neither slips nor turns (a stand-in for the
  Panda's force-controlled grasp; a hold by the pads' friction alone was not tried with the arm);
- a light grip (0 < ``grip`` < 0.5) pinches a box so it pivots about the line between the pads (two point
  constraints): Hidden COM's probe is a box swinging freely on the pinch line, which a friction patch
  between two flat pads does not give.

A held body's contacts with the hand and fingers are switched off while the constraint carries it (the
fingers stay where they closed); it still touches the arm's links, the table and the other bodies.
``grip`` 0 opens the fingers and frees the body.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

from .arm import REST_Q, Arm, attach_panda

TIMESTEP = 0.002
FRAME_STEPS = 25  # physics steps per control step
CONTROL_HZ = round(1 / (TIMESTEP * FRAME_STEPS))  # 20 Hz, RLE-Bench's control rate
MAX_MOVE_M = 0.01
MAX_TURN_RAD = 0.1
REACH = ((-0.45, 0.45), (-0.45, 0.45), (0.0, 0.6))  # where the tool-centre point may go (table frame)
HOME = (0.0, 0.0, 0.35)
PAD_DEPTH = 0.0934  # the finger pads' centre below the gripper base, along its axis (robosuite's model)
FIRM, OPEN = 0.5, 0.0
_PAD_BIT, _BODY_BITS = 2, 3  # pads collide with bit 2; free bodies carry bits 1|2
_STIFF = 'friction="0.8 0.005 0.0001" solref="0.01 1" solimp="0.99 0.999 0.001"'
"""Blocks and table: stiff contacts, so a resting stack sinks well under a millimetre (heights are scored)."""
_HELD_BITS = (8, 9)  # a held body touches the table and the other bodies, not the hand (its constraint carries it)


class Geom(msgspec.Struct, frozen=True, kw_only=True):
    """A box geom: half sizes, position in its body, mass; ``hidden`` ones neither render nor collide."""

    half: tuple[float, float, float]
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    mass: float
    rgba: str = "0.7 0.7 0.7 1"
    hidden: bool = False


class FreeBody(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    pos: tuple[float, float, float]
    geoms: tuple[Geom, ...]
    damping: float = 0.0  # on the free joint's dofs (a hanging box's swing dies out)


class Beam(msgspec.Struct, frozen=True, kw_only=True):
    """A balance: a plank on a hinge about y at ``pivot`` (the plank's top at the pivot), a keel below it that
    makes it a pendulum scale (tilt proportional to the torque imbalance), a fixed load on its left arm."""

    pivot: tuple[float, float, float]
    half_length: float
    half_width: float
    keel_mass: float
    keel_depth: float
    load_x: float
    load_half: float
    load_mass: float
    range_deg: float = 20.0
    damping: float = 0.3


class Layout(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one scene is built from (the instance, public geometry and hidden values together: the
    trusted side's)."""

    table_x: tuple[float, float] = (-0.5, 0.5)  # the table top's extent along x (Cantilever: the edge at the max)
    base: tuple[float, float, float] = (-0.4, 0.05, 0.0)  # the arm's base on the table top: x, y, yaw (rad; 0 faces +x)
    bodies: tuple[FreeBody, ...] = ()
    beam: Beam | None = None
    cameras: tuple[tuple[str, tuple[float, float, float], tuple[float, float, float]], ...] = ()  # name, pos, look-at


def _camera_xml(name: str, pos, target) -> str:
    d = np.subtract(target, pos)
    d = d / np.linalg.norm(d)
    right = np.cross(d, [0.0, 0.0, 1.0])
    right = right / np.linalg.norm(right) if np.linalg.norm(right) > 1e-6 else np.array([1.0, 0.0, 0.0])
    up = np.cross(right, d)
    return (f'<camera name="{name}" pos="{pos[0]} {pos[1]} {pos[2]}" fovy="45" '
            f'xyaxes="{right[0]:.6f} {right[1]:.6f} {right[2]:.6f} {up[0]:.6f} {up[1]:.6f} {up[2]:.6f}"/>')


def _body_xml(body: FreeBody) -> str:
    geoms = "".join(
        f'<geom type="box" size="{g.half[0]} {g.half[1]} {g.half[2]}" pos="{g.pos[0]} {g.pos[1]} {g.pos[2]}" '
        f'mass="{g.mass}" '
        + ('rgba="0 0 0 0" contype="0" conaffinity="0" group="3"/>' if g.hidden else
           f'rgba="{g.rgba}" contype="{_BODY_BITS}" conaffinity="{_BODY_BITS}" {_STIFF}/>')
        for g in body.geoms)
    return (f'<body name="{body.name}" pos="{body.pos[0]} {body.pos[1]} {body.pos[2]}">'
            f'<joint name="{body.name}" type="free" damping="{body.damping}"/>{geoms}</body>')


def _beam_xml(b: Beam) -> str:
    px, py, pz = b.pivot
    return f"""
    <geom name="stand" type="box" pos="{px} {py + b.half_width + 0.012} {pz / 2}" size="0.01 0.01 {pz / 2}" rgba="0.3 0.3 0.3 1"
          contype="0" conaffinity="0"/>
    <body name="beam" pos="{px} {py} {pz}">
      <joint name="beam" type="hinge" axis="0 1 0" range="-{b.range_deg} {b.range_deg}" damping="{b.damping}"/>
      <geom name="plank" type="box" size="{b.half_length} {b.half_width} 0.005" pos="0 0 -0.005" mass="0.3"
            rgba="0.62 0.45 0.25 1" contype="{_BODY_BITS}" conaffinity="{_BODY_BITS}" friction="1.0 0.005 0.0001"/>
      <geom name="keel" type="box" size="0.02 0.02 0.02" pos="0 0 -{b.keel_depth}" mass="{b.keel_mass}" rgba="0.3 0.3 0.3 1"
            contype="0" conaffinity="0"/>
      <geom name="rod" type="box" size="0.004 0.004 {b.keel_depth / 2}" pos="0 0 -{b.keel_depth / 2}" mass="0.01"
            rgba="0.3 0.3 0.3 1" contype="0" conaffinity="0"/>
      <geom name="load" type="box" size="{b.load_half} {b.load_half} {b.load_half}" pos="{b.load_x} 0 {b.load_half}"
            mass="{b.load_mass}" rgba="0.35 0.35 0.4 1" contype="{_BODY_BITS}" conaffinity="{_BODY_BITS}"/>
      <geom name="pointer" type="box" size="0.002 0.002 0.04" pos="0 -{b.half_width + 0.004} 0.04" mass="0.001"
            rgba="0.9 0.1 0.1 1" contype="0" conaffinity="0"/>
    </body>"""


def scene_xml(layout: Layout) -> str:
    x0, x1 = layout.table_x
    cx, hx = (x0 + x1) / 2, (x1 - x0) / 2
    bx, by, byaw = layout.base
    equalities = "".join(
        f'<weld name="{b.name}.firm" body1="panda_tcp" body2="{b.name}" active="false" solref="0.004 1"/>'
        f'<connect name="{b.name}.pin1" body1="panda_tcp" body2="{b.name}" anchor="0 0.01 0" active="false"/>'
        f'<connect name="{b.name}.pin2" body1="panda_tcp" body2="{b.name}" anchor="0 -0.01 0" active="false"/>'
        for b in layout.bodies)
    return f"""
<mujoco model="tabletop">
  <option timestep="{TIMESTEP}" gravity="0 0 -9.81" integrator="implicitfast" cone="elliptic" impratio="5"/>
  <visual><global offwidth="512" offheight="512"/><headlight ambient="0.4 0.4 0.4" diffuse="0.45 0.45 0.45"/></visual>
  <worldbody>
    <light pos="0.2 -0.4 1.4" dir="-0.1 0.25 -1" diffuse="0.5 0.5 0.5" castshadow="false"/>
    <geom name="floor" type="plane" pos="0 0 -0.75" size="3 3 0.1" rgba="0.3 0.3 0.32 1" contype="0" conaffinity="0"/>
    <geom name="table" type="box" pos="{cx} 0 -0.02" size="{hx} 0.5 0.02" rgba="0.56 0.53 0.48 1" contype="1" conaffinity="{_BODY_BITS}"
          {_STIFF}/>
    {"".join(_camera_xml(n, p, t) for n, p, t in layout.cameras)}
    <site name="base" pos="{bx} {by} 0" quat="{math.cos(byaw / 2)} 0 0 {math.sin(byaw / 2)}" rgba="0 0 0 0"/>
    {"".join(_body_xml(b) for b in layout.bodies)}
    {_beam_xml(layout.beam) if layout.beam else ""}
  </worldbody>
  <equality>{equalities}</equality>
</mujoco>"""


def build_model(layout: Layout):
    """The compiled MjModel: the scene with robosuite's Panda (arm.py) at the base site."""
    import mujoco

    spec = mujoco.MjSpec.from_string(scene_xml(layout))
    attach_panda(spec, "base", PAD_DEPTH)
    for pad in ("panda_finger1_pad_collision", "panda_finger2_pad_collision"):  # touch free bodies through the pad bit
        spec.geom(pad).contype, spec.geom(pad).conaffinity = _PAD_BIT, _PAD_BIT  # (a held body clears it)
    hand = spec.geom("panda_hand_collision")  # touches free bodies and the links, not a held body
    hand.contype, hand.conaffinity = 4, 1
    return spec.compile()


class Scene:
    """A compiled layout with its data: one control step at a time, the arm driven and the grasp constraints
    managed here."""

    def __init__(self, layout: Layout):
        import mujoco

        self._mj = mujoco
        self.layout = layout
        self.model = build_model(layout)
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.arm = Arm(m)
        self._fingers = [m.joint("panda_finger_joint1").qposadr[0], m.joint("panda_finger_joint2").qposadr[0]]
        self._grip = [m.actuator("panda_gripper_finger_joint1").id, m.actuator("panda_gripper_finger_joint2").id]
        self._pads = {m.geom("panda_finger1_pad_collision").id, m.geom("panda_finger2_pad_collision").id}
        self._bodies = {b.name: m.body(b.name).id for b in layout.bodies}
        self._home_q = self.arm.ik.solve(HOME, 0.0, np.array(REST_Q), iterations=200)
        if self._home_q is None:
            raise RuntimeError(f"the arm at {layout.base} cannot reach HOME {HOME}")
        self.held: tuple[str, str] | None = None  # (body, "firm" | "pinch")
        self.reset()

    def reset(self) -> None:
        mj, d = self._mj, self.data
        mj.mj_resetData(self.model, d)
        d.qpos[self.arm.qpos] = self._home_q
        self.target, self.yaw, self._q = np.array(HOME, float), 0.0, self._home_q.copy()
        self.arm.reset(self._home_q)
        d.ctrl[self._grip] = (0.04, -0.04)
        d.eq_active[:] = 0
        self.held = None
        mj.mj_forward(self.model, d)

    # --- readings -------------------------------------------------------------------------------

    @property
    def hand(self) -> tuple[float, float, float, float]:
        """The tool-centre point's set point (x, y, z, yaw): where the controller holds the hand."""
        x, y, z = self.target
        return float(x), float(y), float(z), self.yaw

    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The tool-centre point's measured position and quaternion (the trusted side's: tests, figures)."""
        return self.data.xpos[self.arm.tcp].copy(), self.data.xquat[self.arm.tcp].copy()

    @property
    def finger_gap(self) -> float:
        """The opening between the pads' inner faces, metres (the Panda's finger width)."""
        q1, q2 = (float(self.data.qpos[a]) for a in self._fingers)
        return q1 - q2 - 0.001

    def body_pose(self, name: str) -> np.ndarray:
        """(x, y, z, qw, qx, qy, qz) of a free body: the trusted side's, never the participant's."""
        adr = self.model.jnt_qposadr[self.model.body_jntadr[self._bodies[name]]]
        return self.data.qpos[adr:adr + 7].copy()

    def beam_angle(self) -> float:
        """The beam's tilt, radians (positive: its +x arm down)."""
        return float(self.data.qpos[self.model.joint("beam").qposadr[0]])

    # --- one control step -----------------------------------------------------------------------

    def step(self, dx: float, dy: float, dz: float, dyaw: float, grip: float) -> None:
        """Move the tool-centre point's set point by (dx, dy, dz) and its yaw by dyaw over one control step (held
        where the arm cannot reach the new one), with the grip command (0 open, < FIRM pinch, >= FIRM firm)."""
        d = self.data
        closing = grip > OPEN and self.held is None
        if grip <= OPEN:
            self._release()
            d.ctrl[self._grip] = (0.04, -0.04)
        elif closing:
            d.ctrl[self._grip] = (0.0, 0.0)
        target = np.array([float(np.clip(s + v, lo, hi)) for s, v, (lo, hi) in zip(self.target, (dx, dy, dz), REACH)])
        yaw = float(np.clip(self.yaw + dyaw, -math.pi, math.pi))
        q0 = self._q
        q1 = q0 if (target == self.target).all() and yaw == self.yaw else self.arm.ik.solve(target, yaw, q0)
        if q1 is None:  # out of the arm's reach: the hand holds
            q1, target, yaw = q0, self.target, self.yaw
        for k in range(1, FRAME_STEPS + 1):
            self._physics_step(q0 + k / FRAME_STEPS * (q1 - q0))
            if closing and self.held is None:  # the grasp takes hold at the first substep both pads touch
                self._grasp("firm" if grip >= FIRM else "pinch")
        self.target, self.yaw, self._q = target, yaw, q1

    def _physics_step(self, goal: np.ndarray) -> None:
        mj, m, d = self._mj, self.model, self.data
        mj.mj_step1(m, d)
        self.arm.drive(d, goal)
        mj.mj_step2(m, d)

    def settle(self, seconds: float) -> None:
        """Simulate ``seconds`` with the arm holding the hand where it is (the structure on its own)."""
        for _ in range(round(seconds / TIMESTEP)):
            self._physics_step(self._q)

    def _touching_both_pads(self) -> str | None:
        """The free body both finger pads touch now, if any."""
        d, m, touched = self.data, self.model, {}
        ids = {v: k for k, v in self._bodies.items()}
        for c in d.contact[: d.ncon]:
            for pad, other in ((c.geom1, c.geom2), (c.geom2, c.geom1)):
                if pad in self._pads and m.geom_bodyid[other] in ids:
                    touched.setdefault(ids[m.geom_bodyid[other]], set()).add(pad)
        both = [name for name, pads in touched.items() if len(pads) == 2]
        return both[0] if both else None

    def _grasp(self, mode: str) -> None:
        name = self._touching_both_pads()
        if name is None:
            return
        mj, m, d = self._mj, self.model, self.data
        body = self._bodies[name]
        hand_pos, hand_quat = d.xpos[self.arm.tcp], d.xquat[self.arm.tcp]
        if mode == "firm":
            eq = m.equality(f"{name}.firm").id
            inv = np.zeros(4)
            mj.mju_negQuat(inv, hand_quat)
            rel_pos, rel_quat = np.zeros(3), np.zeros(4)
            mj.mju_rotVecQuat(rel_pos, d.xpos[body] - hand_pos, inv)
            mj.mju_mulQuat(rel_quat, inv, d.xquat[body])
            m.eq_data[eq, :3] = 0.0
            m.eq_data[eq, 3:6] = rel_pos
            m.eq_data[eq, 6:10] = rel_quat
            m.eq_data[eq, 10] = 1.0
            d.eq_active[eq] = 1
        else:  # two pins on the line between the pads: the box pivots about it
            axis = np.zeros(3)
            mj.mju_rotVecQuat(axis, np.array([0.0, 1.0, 0.0]), hand_quat)
            inv = np.zeros(4)
            mj.mju_negQuat(inv, d.xquat[body])
            for sign, suffix in ((1, "pin1"), (-1, "pin2")):
                eq = m.equality(f"{name}.{suffix}").id
                point, local = hand_pos + sign * 0.01 * axis, np.zeros(3)
                mj.mju_rotVecQuat(local, point - d.xpos[body], inv)
                m.eq_data[eq, :3] = (0.0, sign * 0.01, 0.0)
                m.eq_data[eq, 3:6] = local
                d.eq_active[eq] = 1
        self._set_bits(body, *_HELD_BITS)
        q1, q2 = (float(d.qpos[a]) for a in self._fingers)
        d.ctrl[self._grip] = (q1, q2)  # the fingers hold where they closed (the constraint carries the body)
        self.held = (name, mode)

    def _set_bits(self, body: int, contype: int, conaffinity: int) -> None:
        m = self.model
        for g in range(m.ngeom):
            if m.geom_bodyid[g] == body and m.geom_contype[g]:
                m.geom_contype[g], m.geom_conaffinity[g] = contype, conaffinity

    def _release(self) -> None:
        if self.held is None:
            return
        m, d = self.model, self.data
        name, _ = self.held
        for suffix in ("firm", "pin1", "pin2"):
            d.eq_active[m.equality(f"{name}.{suffix}").id] = 0
        self._set_bits(self._bodies[name], _BODY_BITS, _BODY_BITS)
        self.held = None

    def unstable_steps(self) -> int:
        """How often MuJoCo found a bad acceleration and reset the state (0 in a sound simulation)."""
        return int(self.data.warning[self._mj.mjtWarning.mjWARN_BADQACC].number)
