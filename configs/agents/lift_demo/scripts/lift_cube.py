"""Lift the red cube: find it in RGB-D, move above it, descend, grasp, lift, check, hold.

Progress lives in plan.json next to this script (phase, cube estimate, counters), so the
script is safe to run again and again: each run continues the current phase within its
per-script step budget and saves after every phase change. Write {"phase": "locate"} to
plan.json to start over in a new scene.

Conventions relied on (robosuite Lift/Panda through roboswe; robot.spec() states them):
- action = [dx, dy, dz, dax, day, daz, grip] in [-1, 1]; dx..dz move the gripper by up to
  0.05 m per control step and dax..daz rotate it by up to 0.5 rad, in the robot base frame,
  which for Panda on the Lift table is the world frame shifted (same axes); the goal is
  relative to the current pose, so zeros hold. grip: only the sign counts, -1 open, +1 close.
- robot0_eef_pos: the gripper site (between the fingertips) in the world frame, metres.
- observe(depth=True): RGB upright (row 0 = top), depth in metres along the optical axis,
  K = 3x3 pinhole with the principal point at (W/2, H/2) in MuJoCo's pixel convention
  (pixel u covers [u, u+1), so its centre is u + 0.5), T_world_camera = camera pose in
  the world with OpenCV axes (x right, y down, z forward).
Only camera images and proprioception are used: no object state.
"""

import json
import os

import numpy as np

import robot

PLAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plan.json")
CUBE_HALF = 0.021  # m; robosuite Lift samples the cube half size in [0.020, 0.022]
HOVER = 0.08  # m above the cube centre before descending
LIFT = 0.15  # m above the grasp height at the end (success needs > 0.04 m)
GRASP_STEPS = 8  # steps with the gripper closing before lifting (it closes in ~8 steps)
HOLD_STEPS = 12  # steps holding the cube up (the task needs 10 consecutive steps)
RELEASE_STEPS = 6
MAX_ATTEMPTS = 3
GAIN = 1.5  # proportional gain: action = GAIN * error / 0.05 m, clipped to [-1, 1]


def load_plan():
    plan = {}
    if os.path.exists(PLAN):
        with open(PLAN) as f:
            plan = json.load(f)
    plan.setdefault("phase", "locate")
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


# ---------------------------------------------------------------- perception


def red_points(view):
    """World points (N x 3) of the red pixels of one camera view; empty without depth."""
    if "depth" not in view or "K" not in view or "T_world_camera" not in view:
        return np.zeros((0, 3))
    rgb = view["rgb"].astype(np.int32)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    mask = (r > 80) & (r > 2 * g) & (r > 2 * b)  # the cube is pure red; table, floor, robot are not
    v, u = np.nonzero(mask)
    z = np.asarray(view["depth"], dtype=np.float64)[v, u]
    ok = np.isfinite(z) & (z > 0)
    u, v, z = u[ok], v[ok], z[ok]
    K = np.asarray(view["K"], dtype=np.float64)
    x = (u + 0.5 - K[0, 2]) / K[0, 0] * z
    y = (v + 0.5 - K[1, 2]) / K[1, 1] * z
    cam = np.stack([x, y, z, np.ones_like(z)], axis=1)
    T = np.asarray(view["T_world_camera"], dtype=np.float64)
    return (cam @ T.T)[:, :3]


def locate_cube():
    """(centre xyz, pixel count) of the cube in the world from every camera, or None if unseen."""
    views = robot.observe(cameras=None, depth=True)
    pts = np.concatenate([red_points(v) for v in views.values()] + [np.zeros((0, 3))])
    if len(pts) < 10:
        return None
    # A few stray pixels (edges, reflections) must not move the estimate: keep the points
    # near the median, the cube being ~4.2 cm across.
    pts = pts[np.linalg.norm(pts - np.median(pts, axis=0), axis=1) < 0.05]
    if len(pts) < 10:
        return None
    # Every camera looks down on the cube, so its top face is seen whole: its centre is the
    # cube's xy, and its height minus the half size is the cube's centre height.
    top = np.percentile(pts[:, 2], 95)
    top_face = pts[pts[:, 2] > top - 0.006]
    xy = np.median(top_face[:, :2], axis=0)
    return [float(xy[0]), float(xy[1]), float(top - CUBE_HALF)], int(len(pts))


# ---------------------------------------------------------------- motion

_state = {}


def eef_pos():
    if not _state:
        _state.update(robot.state())
    return np.asarray(_state["robot0_eef_pos"], dtype=np.float64)


def step(arm_xyz, grip):
    action = np.zeros(7)
    action[:3] = arm_xyz
    action[6] = grip
    _state.update(robot.step(action))


def move_towards(target, grip, tol):
    """One control step towards a world position; True (and no step) once within tol metres."""
    err = np.asarray(target, dtype=np.float64) - eef_pos()
    if np.linalg.norm(err) < tol:
        return True
    step(np.clip(GAIN * err / 0.05, -1.0, 1.0), grip)
    return False


def retry_or_fail(plan, why):
    plan["attempt"] += 1
    if plan["attempt"] > MAX_ATTEMPTS:
        enter(plan, "failed", why)
    else:
        enter(plan, "release", why)


def run(plan):
    # locate and check take no control steps, so they run even with no steps left.
    while robot.steps_left() > 0 or plan["phase"] in ("locate", "check"):
        phase = plan["phase"]
        if phase in ("done", "failed"):
            return
        if phase == "locate":
            found = locate_cube()
            if found is None:
                retry_or_fail(plan, "cube not seen")
                continue
            plan["cube"], n = found
            enter(plan, "approach", f"cube at {np.round(plan['cube'], 3).tolist()} ({n} px)")
        elif phase == "approach":
            if move_towards(np.add(plan["cube"], [0, 0, HOVER]), -1, 0.01):
                enter(plan, "descend")
        elif phase == "descend":
            if move_towards(plan["cube"], -1, 0.006):
                enter(plan, "grasp")
        elif phase == "grasp":
            step(0, 1)
            plan["counter"] += 1
            if plan["counter"] >= GRASP_STEPS:
                enter(plan, "lift")
        elif phase == "lift":
            if move_towards(np.add(plan["cube"], [0, 0, LIFT]), 1, 0.01):
                enter(plan, "check")
        elif phase == "check":
            found = locate_cube()
            if found is not None and found[0][2] > plan["cube"][2] + 0.5 * LIFT:
                enter(plan, "hold", f"cube up at {np.round(found[0], 3).tolist()}")
            else:
                retry_or_fail(plan, "cube not lifted")
        elif phase == "hold":
            step(0, 1)
            plan["counter"] += 1
            if plan["counter"] >= HOLD_STEPS:
                enter(plan, "done")
        elif phase == "release":
            step([0, 0, 0.5], -1)  # open and back off upwards, then look again
            plan["counter"] += 1
            if plan["counter"] >= RELEASE_STEPS:
                enter(plan, "locate", f"attempt {plan['attempt']}")
        else:
            raise SystemExit(f"plan.json has unknown phase {phase!r}; write {{\"phase\": \"locate\"}} to start over")


plan = load_plan()
try:
    run(plan)
except robot.LimitReached:
    pass  # out of steps for this run; the next run continues the same phase
finally:
    save_plan(plan)
print("phase:", plan["phase"], flush=True)
