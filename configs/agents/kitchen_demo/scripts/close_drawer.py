"""Close the open drawer: back the base up, find the drawer front in RGB-D, push it shut.

Progress lives in plan.json next to this script (phase, drawer estimate, counters), so the
script is safe to run again and again: each run continues the current phase within its
per-script step budget and saves after every phase change. Write {"phase": "back"} to
plan.json to start over in a new scene.

Conventions relied on (RoboCasa PandaOmron, HYBRID_MOBILE_BASE, through roboswe; robot.spec()
states them):
- action (12) = arm [dx, dy, dz, dax, day, daz] (OSC_POSE delta in the mobile base's frame:
  x forward, y left, z up; 1.0 = 0.05 m / 0.5 rad per step, relative to the current pose, so
  zeros hold), grip (sign: -1 open, +1 close), base [forward, side, yaw] velocity (-1..1,
  base heading), torso lift delta, mode (> 0 base mode: the arm's goal moves with the base;
  <= 0 arm mode).
- robot0_eef_pos: the gripper site between the fingertips, world frame, metres;
  robot0_eef_quat / robot0_base_quat: world orientations as (x, y, z, w);
  robot0_base_pos: the mobile base's origin in the world.
- observe(depth=True): RGB upright, depth in metres along the optical axis, K (pixel u covers
  [u, u+1)), T_world_camera with OpenCV axes. robot0_agentview_center rides on the base.
Only camera images and proprioception are used: no object or fixture state.
"""

import json
import os

import numpy as np

import robot

PLAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plan.json")
CAMERA = "robot0_agentview_center"
BACK = 0.35  # m the base backs up from its start, so the drawer front is in front of the arm
PITCH = np.radians(80)  # fingers tilted from straight down to almost straight ahead: the hand
#                         then fits under the counter top's overhang while it pushes
STANDOFF = 0.12  # m in front of the drawer face (robot side) before moving in
BELOW_TOP = 0.07  # m below the drawer front's top edge for the pushing point
MAX_TRAVEL = 0.45  # m pushed beyond the face at most (the drawer stops us first)
EDGE_MARGIN = 0.10  # m from the drawer front's side edge for the pushing point
HOLD_STEPS = 12  # steps pressing once stalled (the task needs 10 consecutive steps closed)
MAX_ATTEMPTS = 2
GAIN = 1.5  # proportional gain: action = GAIN * error / 0.05 m, clipped to [-1, 1]
ROT_GAIN = 1.0  # action = ROT_GAIN * angle error / 0.5 rad


def load_plan():
    plan = {}
    if os.path.exists(PLAN):
        with open(PLAN) as f:
            plan = json.load(f)
    plan.setdefault("phase", "back")
    plan.setdefault("attempt", 1)
    plan.setdefault("counter", 0)
    plan.setdefault("log", [])
    return plan


def save_plan(plan):
    tmp = PLAN + ".tmp"
    with open(tmp, "w") as f:
        json.dump(plan, f, indent=1)
    os.replace(tmp, PLAN)  # atomic: a script killed mid-write never leaves half a plan


def enter(plan, phase, note=""):
    plan["phase"], plan["counter"] = phase, 0
    plan["log"].append(f"{phase} {note}".strip())
    save_plan(plan)
    print("phase ->", phase, note, flush=True)


# ---------------------------------------------------------------- geometry


def quat_to_matrix(q):
    x, y, z, w = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def axis_angle(R):
    """The rotation vector (axis * angle) of a rotation matrix."""
    angle = np.arccos(np.clip((np.trace(R) - 1) / 2, -1.0, 1.0))
    if angle < 1e-6:
        return np.zeros(3)
    axis = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    n = np.linalg.norm(axis)
    if n < 1e-9:  # angle near pi: the axis is the eigenvector of R + I
        _, v = np.linalg.eigh((R + np.eye(3)) / 2)
        return v[:, -1] * angle
    return axis / n * angle


def target_orientation(R_base):
    """Gripper pitched PITCH from straight down towards the base's forward, fingers closing sideways."""
    c, s = np.cos(PITCH), np.sin(PITCH)
    # columns: gripper x, y (finger axis), z (approach), in the base frame
    R = np.array([[c, 0.0, s], [0.0, -1.0, 0.0], [s, 0.0, -c]])
    return R_base @ R


# ---------------------------------------------------------------- state and motion

_state = {}


def now():
    if not _state:
        _state.update(robot.state())
    return _state


def base_pose():
    s = now()
    return np.asarray(s["robot0_base_pos"], dtype=np.float64), quat_to_matrix(s["robot0_base_quat"])


def eef_pos():
    return np.asarray(now()["robot0_eef_pos"], dtype=np.float64)


def to_base(p_world):
    """World point -> the base frame (forward, left, up from the base origin)."""
    p0, R = base_pose()
    return R.T @ (np.asarray(p_world, dtype=np.float64) - p0)


def to_world(p_base):
    p0, R = base_pose()
    return p0 + R @ np.asarray(p_base, dtype=np.float64)


def step(arm=(0, 0, 0), rot=(0, 0, 0), grip=1.0, base=(0, 0, 0), mode=-1.0):
    action = np.zeros(12)
    action[0:3] = arm
    action[3:6] = rot
    action[6] = grip
    action[7:10] = base
    action[11] = mode
    _state.update(robot.step(action))


def arm_command(target_world):
    """(translation, rotation) actions towards a world position with the pushing orientation."""
    _, R_base = base_pose()
    err = R_base.T @ (np.asarray(target_world, dtype=np.float64) - eef_pos())
    R_cur = quat_to_matrix(now()["robot0_eef_quat"])
    rot_err = R_base.T @ axis_angle(target_orientation(R_base) @ R_cur.T)
    arm = np.clip(GAIN * err / 0.05, -1.0, 1.0)
    rot = np.clip(ROT_GAIN * rot_err / 0.5, -1.0, 1.0)
    return arm, rot, float(np.linalg.norm(err)), float(np.linalg.norm(rot_err))


def move_towards(target_world, tol, rot_tol=0.05):
    """One control step towards a world position (and the pushing orientation); True once there."""
    arm, rot, dist, ang = arm_command(target_world)
    if dist < tol and ang < rot_tol:
        return True
    step(arm, rot)
    return False


# ---------------------------------------------------------------- perception


def world_points(view):
    """World points (N x 3) of every pixel with a finite depth."""
    z = np.asarray(view["depth"], dtype=np.float64)
    v, u = np.nonzero(np.isfinite(z) & (z > 0.05))
    z = z[v, u]
    K = np.asarray(view["K"], dtype=np.float64)
    x = (u + 0.5 - K[0, 2]) / K[0, 0] * z
    y = (v + 0.5 - K[1, 2]) / K[1, 1] * z
    T = np.asarray(view["T_world_camera"], dtype=np.float64)
    return (np.stack([x, y, z, np.ones_like(z)], axis=1) @ T.T)[:, :3]


def base_frame_points():
    """The base-mounted camera's points in the base frame (forward, left, up)."""
    view = robot.observe(cameras=[CAMERA], depth=True)[CAMERA]
    p0, R = base_pose()
    return (world_points(view) - p0) @ R  # each row: R.T @ (p - p0)


def counter(pts):
    """(height, front edge forward distance) of the counter top: the most populated horizontal level."""
    z = pts[:, 2] + p_base_height()
    level = (z > 0.5) & (z < 1.3) & (pts[:, 0] > 0.1)
    hist, edges = np.histogram(z[level], bins=np.arange(0.5, 1.3, 0.01))
    top = float(edges[np.argmax(hist)] + 0.005)
    on_top = level & (np.abs(z - top) < 0.012)
    return top, float(np.percentile(pts[on_top, 0], 2))


def p_base_height():
    return float(base_pose()[0][2])


def drawer_front(pts):
    """The open drawer's front panel in the base frame, or None: what sticks out below the counter."""
    top, edge = counter(pts)
    z = pts[:, 2] + p_base_height()
    robot_body = (np.abs(pts[:, 1]) < 0.25) & (pts[:, 0] < 0.25)
    out = (z > 0.3) & (z < top - 0.02) & (pts[:, 0] < edge - 0.03) & ~robot_body
    if out.sum() < 30:
        return None
    d = pts[out]
    front = float(np.percentile(d[:, 0], 3))  # the handle, where it is seen, sticks out 3-5 cm more
    face = d[d[:, 0] < front + 0.06]
    fz = face[:, 2] + p_base_height()
    return {
        "front": front,  # forward distance of the face from the base origin
        "left": [float(np.percentile(face[:, 1], 3)), float(np.percentile(face[:, 1], 97))],
        "z": [float(np.percentile(fz, 3)), float(np.percentile(fz, 97))],
        "counter_top": top,
        "counter_edge": edge,
        "points": int(out.sum()),
    }


def push_line(drawer):
    """(start, end) of the push in the base frame: across the face nearest the arm, below its top."""
    lo, hi = drawer["left"]
    left = float(np.clip(0.0, lo + EDGE_MARGIN, hi - EDGE_MARGIN)) if hi - lo > 2 * EDGE_MARGIN else (lo + hi) / 2
    z = drawer["z"][1] - BELOW_TOP - p_base_height()
    start = [drawer["front"] - STANDOFF, left, z]
    end = [drawer["front"] + MAX_TRAVEL, left, z]
    return start, end


# ---------------------------------------------------------------- phases


def retry_or_fail(plan, why):
    plan["attempt"] += 1
    enter(plan, "failed" if plan["attempt"] > MAX_ATTEMPTS else "retreat", why)


def run(plan):
    # look and check take no control steps, so they run even with no steps left.
    while robot.steps_left() > 0 or plan["phase"] in ("look", "check"):
        phase = plan["phase"]
        if phase in ("done", "failed"):
            return
        if phase == "back":
            p0, R = base_pose()
            if "start" not in plan:
                plan["start"] = p0.tolist()
                plan["heading"] = R[:, 0].tolist()
            moved = float(np.dot(p0 - np.asarray(plan["start"]), plan["heading"]))
            err = -BACK - moved
            if abs(err) < 0.01:
                plan["counter"] += 1
                step(base=(0, 0, 0), mode=1.0)  # let the base come to rest
                if plan["counter"] >= 6:
                    enter(plan, "look", f"backed up {moved:.3f} m")
            else:
                step(base=(float(np.clip(err / 0.1, -1, 1)), 0, 0), mode=1.0)
        elif phase == "look":
            drawer = drawer_front(base_frame_points())
            if drawer is None:
                enter(plan, "failed", "no open drawer seen below the counter")
                continue
            plan["drawer"] = drawer
            start, end = push_line(drawer)
            plan["start_push"], plan["end_push"] = to_world(start).tolist(), to_world(end).tolist()
            enter(plan, "orient", "drawer front {:.3f} m ahead, left {}, z {}".format(
                drawer["front"], np.round(drawer["left"], 3).tolist(), np.round(drawer["z"], 3).tolist()))
        elif phase == "orient":
            # pitch the closed hand forward where it is (above the counter), then go down
            if move_towards(eef_pos(), 1.0, rot_tol=0.05):
                enter(plan, "approach")
        elif phase == "approach":
            above = np.asarray(plan["start_push"]) + [0, 0, 0.0]
            if move_towards(above, 0.015, rot_tol=0.08):
                enter(plan, "push")
        elif phase == "push":
            # progress in the world along the push: the drawer does not move with the base
            start, end = np.asarray(plan["start_push"]), np.asarray(plan["end_push"])
            along = (end - start) / np.linalg.norm(end - start)
            track = plan.setdefault("track", [])
            track.append(float(np.dot(eef_pos() - start, along)) - STANDOFF)
            if move_towards(end, 0.01, rot_tol=1.0) or (len(track) > 10 and track[-1] - track[-7] < 0.006):
                enter(plan, "hold", f"stopped {track[-1]:.3f} m past where the face was")
        elif phase == "hold":
            arm, rot, _, _ = arm_command(plan["end_push"])
            step(arm, rot)  # keep pressing while the drawer settles shut
            plan["counter"] += 1
            if plan["counter"] >= HOLD_STEPS:
                enter(plan, "check")
        elif phase == "check":
            pushed = plan["track"][-1]
            if pushed > plan["drawer"]["counter_edge"] - plan["drawer"]["front"] - 0.02:
                enter(plan, "done", f"pushed {pushed:.3f} m past where the face was")
            else:
                retry_or_fail(plan, f"pushed only {pushed:.3f} m")
        elif phase == "retreat":
            plan.pop("track", None)
            if move_towards(plan["start_push"], 0.02, rot_tol=1.0):
                enter(plan, "push", f"attempt {plan['attempt']}")
        else:
            raise SystemExit(f"plan.json has unknown phase {phase!r}; write {{\"phase\": \"back\"}} to start over")


plan = load_plan()
try:
    run(plan)
except robot.LimitReached:
    pass  # out of steps for this run; the next run continues the same phase
finally:
    save_plan(plan)
print("phase:", plan["phase"], flush=True)
