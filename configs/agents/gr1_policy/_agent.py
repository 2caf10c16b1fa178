"""Deterministic GR1 participants for the close-drawer stand-in: a policy (actions interface) and a coder.

Both follow one joint-space plan (drawer_waypoints.json): 26 waypoints of the 14 arm joints
and 3 waist joints (action components 0-13 and 26-28), five control steps each, that swing
the right hand behind the open drawer's front and push it shut (hands open, all 29 values
within the contract's bounds). The waypoints were solved offline by damped least-squares IK
on the stand-in's kinematics; at run time neither participant sees anything but what crosses
the boundary: the allowlisted observation (egoview, language, 29 encoders) and the results.

``Gr1DrawerPolicy`` answers each observation with an ``act`` chunk of ``chunk`` actions (the
next rows of the plan, interpolated from the encoders the trial opened with), and ``finish``
once the plan is done. ``Gr1DrawerCoder`` writes close_drawer.py, which does the same through
``import robot`` (``robot.state()`` and ``robot.step_many``), and runs it until the plan is done.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from roboswe.protocol.participant import Act, DecisionRequest, Exec, Finish, WriteFile

PLAN = json.loads((Path(__file__).with_name("drawer_waypoints.json")).read_text())
ACTION_DIM = 29
_ENCODERS = re.compile(r"joint_encoders: \[([^\]]*)\]")
_STEP = re.compile(r"control step (\d+) of")


def plan_rows(start: list[float], plan: dict = PLAN) -> list[list[float]]:
    """The plan's actions from ``start`` (29 encoders): each waypoint reached linearly over its steps; hands open."""
    comps = plan["components"]
    at = [start[c] for c in comps]
    rows = []
    for steps, target in plan["waypoints"]:
        for k in range(1, steps + 1):
            row = [0.0] * ACTION_DIM
            for c, a, b in zip(comps, at, target):
                row[c] = round(a + (b - a) * k / steps, 6)
            rows.append(row)
        at = target
    return rows


def _texts(request: DecisionRequest) -> list[str]:
    """What the harness said in this trial (the opening, then each result), oldest first."""
    return [p.text for t in request.conversation if t.role == "user" and t.trial == request.trial
            for p in t.parts if hasattr(p, "text")]


class Gr1DrawerPolicy:
    """A scripted policy: each call returns the next ``chunk`` plan rows (1..K) as one ``act``."""

    def __init__(self, chunk: int = 5):
        self.chunk = chunk
        self._rows: dict[int, list[list[float]]] = {}

    def decide(self, request: DecisionRequest):
        texts = _texts(request)
        if request.trial not in self._rows:  # the trial's opening carries the encoders the plan starts from
            encoders = _ENCODERS.search(texts[0])
            if encoders is None:
                return Finish(reason="no joint encoders in the observation")
            self._rows[request.trial] = plan_rows([float(x) for x in encoders.group(1).split(",")])
        rows = self._rows[request.trial]
        done = next((int(m.group(1)) for t in reversed(texts) for m in [_STEP.search(t)] if m), 0)
        if done >= len(rows):
            return Finish(reason="the plan is done")
        return Act(actions=rows[done:done + self.chunk])


SCRIPT = '''"""Close the drawer: follow the joint plan from the encoders this trial started with, as far as this exec may."""
import json
from pathlib import Path

import robot

PLAN = {plan}
DIM = 29
progress = Path("progress.json")
state = json.loads(progress.read_text()) if progress.exists() else {{}}
if "start" not in state:
    state = {{"start": [float(x) for x in robot.state()["joint_encoders"]], "done": 0}}
rows, at = [], [state["start"][c] for c in PLAN["components"]]
for steps, target in PLAN["waypoints"]:
    for k in range(1, steps + 1):
        row = [0.0] * DIM
        for c, a, b in zip(PLAN["components"], at, target):
            row[c] = round(a + (b - a) * k / steps, 6)
        rows.append(row)
    at = target
if state["done"] == 0:  # what a script can receive: the 29 encoders, the egoview (no depth, no pose), the spec
    seen = robot.observe(depth=True)
    print("receives:", json.dumps({{"state": {{k: list(v.shape) for k, v in robot.state().items()}},
                                    "cameras": {{c: {{k: list(v.shape) for k, v in f.items()}} for c, f in seen.items()}},
                                    "action_dim": robot.spec()["action_dim"]}}))
n = min(robot.steps_left(), len(rows) - state["done"])
if n > 0:
    robot.step_many(rows[state["done"]:state["done"] + n])
    state["done"] += n
progress.write_text(json.dumps(state))
print(f"plan rows done: {{state['done']}} of {{len(rows)}}")
'''


class Gr1DrawerCoder:
    """A scripted coding agent: write close_drawer.py (and a fresh progress file), exec it until the plan is done."""

    def decide(self, request: DecisionRequest):
        texts = _texts(request)
        ops = sum(1 for t in request.conversation if t.role == "assistant" and t.trial == request.trial)
        if ops == 0:
            return WriteFile(path="progress.json", content="{}")
        if ops == 1:
            return WriteFile(path="close_drawer.py", content=SCRIPT.format(plan=json.dumps(PLAN)))
        if texts and re.search(r"plan rows done: (\d+) of \1\b", texts[-1]):
            return Finish(reason="the plan is done")
        if ops > 12:
            return Finish(reason="gave up")
        return Exec(path="close_drawer.py")
