"""Development check of estimator.py on labelled renders (public seeds): observe (free), compare with
the label, push the block a little (charged steps), reset to the next scene (charged), and print a
one-line JSON summary. Runs in the sandbox through the `robot` module."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import robot

sys.path.insert(0, str(Path(__file__).resolve().parent))
from estimator import make_estimator

SCENES = 3  # the first scene and two resets
PUSH_STEPS = 6


def obs_of(camera):
    obs = {"rgb": camera["rgb"], "camera": {"K": camera["K"].tolist(), "table_from_camera": camera["T_world_camera"].tolist()}}
    if "depth" in camera:
        obs["depth"] = camera["depth"]
    return obs


def check(est, errors):
    (camera,) = robot.observe(depth=True).values()
    x, y, yaw = robot.state()["label"]
    e = est.estimate(obs_of(camera))
    dyaw = math.atan2(math.sin(e["yaw"] - yaw), math.cos(e["yaw"] - yaw))
    errors.append((math.hypot(e["x"] - x, e["y"] - y), abs(dyaw)))
    print(f"label ({x:+.3f}, {y:+.3f}, {math.degrees(yaw):+.0f} deg)  estimate ({e['x']:+.3f}, {e['y']:+.3f}, "
          f"{math.degrees(e['yaw']):+.0f} deg) {e['shape']}")


est = make_estimator()
errors = []
for scene in range(SCENES):
    if scene:
        robot.reset()
    est.reset()
    check(est, errors)
    # push: the stick steps toward the labelled block centre, and the estimate follows the block
    state = robot.state()
    towards = np.asarray(state["label"][:2]) - np.asarray(state["stick"])
    step = towards / max(np.linalg.norm(towards), 1e-9) * 0.008
    robot.step_many(np.tile(step, (PUSH_STEPS, 1)))
    check(est, errors)

t, a = np.mean(errors, axis=0)
print("DEVELOPMENT " + json.dumps({"renders": len(errors), "mean_error_m": float(t), "mean_error_deg": float(np.degrees(a)),
                                    "budget_left": int(robot.state()["budget_left"][0])}))
