"""robosuite's Panda in the tabletop scene: the 7-joint arm (robot.xml, its meshes and torque motors) with the
Panda gripper on its hand, both loaded from the installed robosuite package, and the controller that drives it.

The controller turns a tool-centre-point set point (x, y, z, yaw; the hand pointing straight down) into the
seven joint torques, once per 2 ms physics step:

- **Inverse kinematics** (``Ik``): damped least squares on the arm's 6x7 Jacobian of the ``tcp`` body, warm
  started from the previous solution, the seventh degree of freedom pulled toward robosuite's rest posture
  in the null space; on a scratch ``MjData`` (kinematics only), so the live physics is never touched.
  A set point it cannot reach to ``IK_TOLERANCE_M`` within ``IK_ITERATIONS`` (out of reach, past a joint
  limit) is refused and the old one kept: the hand holds there.
- **A smooth joint reference** (``Arm.drive``): the inverse kinematics' solution, interpolated over the
  control step, passes through a critically damped second-order filter (``FILTER_OMEGA``): the reference
  never overshoots where a move stops (the hand does not dip below where it was sent), at the price of a
  lag while moving (2 v / omega: 1 cm at the top speed, 0.2 m/s) that settles in about four control steps.
- **Computed torque** on the arm's torque motors: tau = M(q) (qdd_ref + Kp (q_ref - q) + Kd (qd_ref - qd)) +
  MuJoCo's bias forces (gravity and Coriolis of the arm and the gripper), clipped to the motors' limits
  (80 N·m, 12 N·m for the wrist's last two); M is the arm's block of the mass matrix (armature included).
  External loads (a held block, a push against the table) are not compensated: the arm gives under them
  as a stiff impedance does.

The arm's links, the hand and the fingers are collision bodies (their robosuite collision meshes): they
touch the table, the blocks and the beam like any body. The base stands on the table top where the layout
puts it (scene.py's ``Layout.base``: each task's, tasks.py).
"""

from __future__ import annotations

import math
from importlib.util import find_spec
from pathlib import Path

import numpy as np

REST_Q = (0.0, math.pi / 16, 0.0, -math.pi / 2 - math.pi / 3, 0.0, math.pi - 0.2, math.pi / 4)
"""robosuite's Panda ``init_qpos``: where the first inverse kinematics starts and the null space pulls."""
DAMPING = (0.1, 0.1, 0.1, 0.1, 0.1, 0.01, 0.01)  # robosuite's Panda (models/robots/manipulators/panda_robot.py)
ARMATURE = tuple(5.0 / (i + 1) for i in range(7))  # robosuite's RobotModel defaults for every arm
FRICTIONLOSS = 0.1
FILTER_OMEGA = 40.0  # rad/s, the reference filter's
TRACK_OMEGA = 80.0  # rad/s, the tracking loop's (critically damped): KP = omega², KD = 2 omega, per unit inertia
IK_ITERATIONS, IK_TOLERANCE_M, IK_TOLERANCE_RAD, IK_DAMPING = 30, 1e-7, 1e-6, 1e-4
NULL_GAIN = 0.05  # per iteration, of the way back toward REST_Q in the null space
TCP_QUAT = (0.0, math.sqrt(0.5), math.sqrt(0.5), 0.0)
"""The ``tcp`` body in the gripper's frame: z up and x, y the table's at yaw 0 when the hand points down (the
fingers close along y)."""


def robosuite_asset(*parts: str) -> Path:
    spec = find_spec("robosuite")
    if spec is None or spec.origin is None:
        raise RuntimeError("robosuite is not installed (the tabletop scene uses its Panda arm and gripper models)")
    return Path(spec.origin).parent.joinpath("models", "assets", *parts)


def _load(*parts: str):
    import mujoco

    path = robosuite_asset(*parts)
    spec = mujoco.MjSpec.from_file(str(path))
    spec.meshdir = str(path.parent)
    return spec


def attach_panda(spec, site: str, tcp_depth: float) -> None:
    """robosuite's Panda arm at ``site`` of ``spec``, its gripper on the arm's hand, every name prefixed
    ``panda_``; a massless body ``panda_tcp`` at the finger pads' centre, ``tcp_depth`` along the gripper's
    axis. The gripper's force/torque sensors are removed (the participant gets no force readings, nothing
    else reads them), robosuite's marker sites hidden, its two robot cameras dropped (not offered)."""
    arm, gripper = _load("robots", "panda", "robot.xml"), _load("grippers", "panda_gripper.xml")
    for sensor in list(gripper.sensors):
        sensor.delete()
    for camera in list(arm.cameras):
        camera.delete()
    for s in (*arm.sites, *gripper.sites):  # a 10 m grip-axis cylinder among them stays out of the images
        s.rgba = (0.0, 0.0, 0.0, 0.0)
    for i in range(7):
        joint = arm.joint(f"joint{i + 1}")
        joint.damping, joint.armature, joint.frictionloss = DAMPING[i], ARMATURE[i], FRICTIONLOSS
    gripper.body("right_gripper").add_body(name="tcp", pos=[0.0, 0.0, tcp_depth], quat=list(TCP_QUAT))
    arm.attach(gripper, site=arm.body("right_hand").add_site(name="gripper_mount"), prefix="")
    spec.attach(arm, site=spec.site(site), prefix="panda_")


def yaw_quat(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


class Ik:
    """Joint positions that put the ``tcp`` body at a pose (damped least squares on a scratch MjData)."""

    def __init__(self, model, qpos: np.ndarray, dofs: np.ndarray, body: int):
        import mujoco

        self._mj, self.model = mujoco, model
        self.data = mujoco.MjData(model)
        self.qpos, self.dofs, self.body = qpos, dofs, body
        self.lo, self.hi = model.jnt_range[model.dof_jntid[dofs]].T
        self._jacp, self._jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        self._rest = np.array(REST_Q)

    def pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tcp body's position and quaternion at joint positions ``q``."""
        mj, d = self._mj, self.data
        d.qpos[self.qpos] = q
        mj.mj_kinematics(self.model, d)
        return d.xpos[self.body].copy(), d.xquat[self.body].copy()

    def solve(self, pos, yaw: float, q0: np.ndarray, iterations: int = IK_ITERATIONS) -> np.ndarray | None:
        """The joint positions for ``pos`` and ``yaw`` (hand down) nearest ``q0``'s branch, or None when the
        pose is not reached to IK_TOLERANCE_M and IK_TOLERANCE_RAD within ``iterations``."""
        mj, m, d = self._mj, self.model, self.data
        target_quat, q = yaw_quat(yaw), np.array(q0, float)
        err_r = np.zeros(3)
        for _ in range(iterations + 1):
            x, quat = self.pose(q)
            mj.mju_subQuat(err_r, target_quat, quat)  # in the tcp frame: rotate it to the world's
            err = np.concatenate([np.asarray(pos) - x, _rotate(quat, err_r)])
            if np.abs(err[:3]).max() < IK_TOLERANCE_M and np.abs(err[3:]).max() < IK_TOLERANCE_RAD:
                return q
            mj.mj_comPos(m, d)
            mj.mj_jacBody(m, d, self._jacp, self._jacr, self.body)
            jac = np.vstack([self._jacp[:, self.dofs], self._jacr[:, self.dofs]])
            jjt = jac @ jac.T + IK_DAMPING ** 2 * np.eye(6)
            pinv = jac.T @ np.linalg.inv(jjt)
            dq = pinv @ err + (np.eye(len(q)) - pinv @ jac) @ (NULL_GAIN * (self._rest - q))
            q = np.clip(q + dq, self.lo, self.hi)
        return None


def _rotate(quat: np.ndarray, v: np.ndarray) -> np.ndarray:
    import mujoco

    out = np.zeros(3)
    mujoco.mju_rotVecQuat(out, v, quat)
    return out


class Arm:
    """The arm's joints and motors in a compiled scene, its inverse kinematics, and the controller (its
    reference filter's state is the arm's: ``reset`` with the joint positions the scene starts at)."""

    def __init__(self, model):
        import mujoco

        self._mj, self.model = mujoco, model
        joints = [model.joint(f"panda_joint{i + 1}") for i in range(7)]
        self.qpos = np.array([j.qposadr[0] for j in joints])
        self.dofs = np.array([j.dofadr[0] for j in joints])
        self.motors = np.array([model.actuator(f"panda_torq_j{i + 1}").id for i in range(7)])
        self.limits = model.actuator_ctrlrange[self.motors].T
        self.tcp = model.body("panda_tcp").id
        self.ik = Ik(model, self.qpos, self.dofs, self.tcp)
        self._accel, self._force = np.zeros(model.nv), np.zeros(model.nv)
        self.reset(np.array(REST_Q))

    def reset(self, q: np.ndarray) -> None:
        self.q_ref, self.qd_ref = np.array(q, float), np.zeros(len(q))

    def drive(self, data, goal: np.ndarray) -> None:
        """One physics step of the reference filter toward ``goal`` and the motors' torques to follow it, from
        the state, mass matrix and bias forces of mj_step1."""
        w, dt = FILTER_OMEGA, self.model.opt.timestep
        qdd_ref = w * w * (goal - self.q_ref) - 2 * w * self.qd_ref
        self.qd_ref = self.qd_ref + dt * qdd_ref
        self.q_ref = self.q_ref + dt * self.qd_ref
        q, qd = data.qpos[self.qpos], data.qvel[self.dofs]
        self._accel[self.dofs] = qdd_ref + TRACK_OMEGA ** 2 * (self.q_ref - q) + 2 * TRACK_OMEGA * (self.qd_ref - qd)
        self._mj.mj_mulM(self.model, data, self._force, self._accel)  # only the arm's rows are read: M_aa a
        tau = self._force[self.dofs] + data.qfrc_bias[self.dofs]
        data.ctrl[self.motors] = np.clip(tau, *self.limits)
