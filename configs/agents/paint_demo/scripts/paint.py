"""Paint the strokes planned in strokes.json: each batch is one MoveFlange (robot.step_many of its waypoints).

A waypoint is [x, y, z, qx, qy, qz, qw, duration_s]: the flange position in robot-base metres,
its orientation quaternion (xyzw) and the seconds to reach it. The painter writes the plan
before each run; this script only carries it out and reports each batch's result.
"""

import json

import robot

with open("strokes.json", encoding="utf-8") as f:
    plan = json.load(f)

for i, batch in enumerate(plan["batches"]):
    try:
        state = robot.step_many(batch)
    except robot.InvalidAction as e:
        print(f"batch {i}: rejected: {e}")
        continue
    except robot.LimitReached as e:
        print(f"batch {i}: stopped at the step limit after {e.steps_applied} control steps")
        break
    print(f"batch {i}: done; flange at {[round(float(v), 4) for v in state['flange_pos']]}")
