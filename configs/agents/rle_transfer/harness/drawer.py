"""Drawers from depth, and pushing one closed: the harness's drawer tools (numpy; geometry.py's Arm).

``locate_front(robot, state)``: the open drawer in front of the robot, from the base camera's depth: the
counter top (the dominant level), the counter's front edge along the robot's heading, and the drawer's
front face (what stands below the counter top nearer the robot than that edge). ``push_closed(arm,
drawer)``: the gripper closed, in front of the face at its middle height, then pushed along the robot's
heading until the face is back under the counter's edge, then backed off.
"""

import numpy as np

import geometry as ks

CAMERA = "robot0_agentview_center"
FACE_BELOW_TOP = 0.09  # m: where the push meets the drawer's face, under the counter top
STAND_OFF = 0.07  # m in front of the face before the push
PAST_EDGE = 0.05  # m: the push ends this far behind the counter's front edge (0.02 left drawers 6 % open)
BACK_OFF = 0.25  # m: back toward the robot after the push


def frame(state):
    base = np.asarray(state["robot0_base_pos"], dtype=float)
    heading = ks.yaw_of(ks.quat_xyzw_to_matrix(state["robot0_base_quat"]))
    return base, np.array([np.cos(heading), np.sin(heading)]), np.array([-np.sin(heading), np.cos(heading)])


def locate_front(robot, state):
    """{"top", "edge", "front", "lateral"}: distances along the robot's heading (m) and the face's lateral centre."""
    points = ks.backproject(robot.observe(depth=True)[CAMERA], stride=1)
    top = ks.dominant_level(points)
    base, forward, left = frame(state)
    counter = points[np.abs(points[:, 2] - top) < 0.01]
    edge = float(np.percentile((counter[:, :2] - base[:2]) @ forward, 2))
    rim = points[(points[:, 2] < top - 0.03) & (points[:, 2] > top - 0.35)]
    ahead = (rim[:, :2] - base[:2]) @ forward
    rim, ahead = rim[ahead < edge - 0.03], ahead[ahead < edge - 0.03]
    if len(rim) < 20:
        raise RuntimeError("no open drawer in view")
    front = float(np.percentile(ahead, 2))
    face = (rim[ahead < front + 0.03, :2] - base[:2]) @ left
    lateral = float((np.percentile(face, 5) + np.percentile(face, 95)) / 2)
    return {"top": top, "edge": edge, "front": front, "lateral": lateral}


def push_closed(arm, drawer, state):
    """Push the located drawer's face back to the counter's edge; the gripper ends backed off toward the robot."""
    base, forward, left = frame(state)

    def at(ahead, z):
        return np.array([*(base[:2] + forward * ahead + left * drawer["lateral"]), z])

    z = drawer["top"] - FACE_BELOW_TOP
    arm.close(8)
    arm.move_to(at(drawer["front"] - STAND_OFF, drawer["top"] + 0.10), max_steps=120)
    arm.move_to(at(drawer["front"] - STAND_OFF, z), max_steps=80)
    arm.move_to(at(drawer["edge"] + PAST_EDGE, z), tol=0.01, gain=1.0, max_steps=150)
    arm.move_to(at(drawer["edge"] - BACK_OFF, z + 0.15), max_steps=100)
