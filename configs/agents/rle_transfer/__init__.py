"""The RLE-Bench harness-transfer demo participant (family 02, on the kit), scripted.

``agent = "roboswe.agents.rle_transfer:TransferAgent"`` (provider kind ``python``): a fixed plan over the real
operations, each decision a pure function of the conversation so far (so a fresh conversation is a fresh
agent: nothing of another carries over), its scripts run in the sandbox over ``import robot``.

Development (no ``finish_trial`` among the tools): list_files; write the harness, ``agent_harness/``
(``geometry.py``: the depth geometry and arm motion, the same code as the speed-run's skills; ``pickplace.py``:
the speed-run participant's pick from the counter into a drawer; ``drawer.py``: locating an open drawer and
pushing it closed; ``MANUAL.md``); keep its own notes outside it (``notes.md``: not sealed, never
transferred); write and exec ``develop.py``, which visits each practice task once (a reset opens the next)
and on the drawer task pushes the drawer closed (charged; ``practice = false``: it only observes); finish.

A fresh agent (the ``evaluation`` interface: ``finish_trial`` offered): list_files. With a harness it reads
``agent_harness/MANUAL.md`` and, when the manual has the recipe for the instruction it was given, writes and
execs ``attempt.py`` (the recipe over the harness's modules); with an empty workspace (the control) it has
nothing but the robot calls and execs ``blind.py``, a blind reach (close, down, up). Then finish_trial, finish.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from roboswe.protocol import participant as pp

HERE = Path(__file__).resolve().parent
HARNESS = "agent_harness"
MANUAL = f"{HARNESS}/MANUAL.md"
NOTES = "notes.md"
RECIPE_NEEDS = ("drawer.locate_front", "pickplace.main", "drawer.push_closed")
ON_PATH = '''import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_harness"))

import robot
'''
DEVELOP = ON_PATH + '''
import drawer
import geometry

log = []
for n in range({tasks}):  # each practice task once, one public kitchen each; a reset opens the next
    if n:
        robot.reset()
    state = robot.state()
    task = int(state["practice_task"][0])
    entry = {{"practice_task": task, "stages_at_start": [float(s) for s in state["stages"]]}}
    if {practice} and task == 0:  # the drawer task: practise the push
        located = drawer.locate_front(robot, state)
        drawer.push_closed(geometry.Arm(robot, robot.spec()), located, robot.state())
        entry["stages_after_push"] = [float(s) for s in robot.state()["stages"]]
    log.append(entry)
print("PRACTICE " + json.dumps(log))
'''
ATTEMPT = ON_PATH + '''
import drawer
import geometry
import pickplace

located = drawer.locate_front(robot, robot.state())  # before picking: a held object hides the drawer later
picked = pickplace.main(robot)
if {close}:
    drawer.push_closed(geometry.Arm(robot, robot.spec()), located, robot.state())
print("ATTEMPT " + json.dumps({{"used": {used}, "picked": picked}}))
'''
BLIND = '''import robot

spec = robot.spec()
names = [c["name"] for c in spec["action"]["components"]]
arm_z = names.index("right.dx") + 2 if "right.dx" in names else 2
grip = next((i for i, n in enumerate(names) if "grip" in n), 6)
mode = names.index("mode") if "mode" in names else spec["action_dim"] - 1
rows = []
for dz, g in [(-0.4, -1.0)] * 20 + [(0.0, 1.0)] * 10 + [(0.4, 1.0)] * 20:
    row = [0.0] * spec["action_dim"]
    row[arm_z], row[grip], row[mode] = dz, g, -1.0
    rows.append(row)
robot.step_many(rows)
print("BLIND " + str(len(rows)) + " actions")
'''


def harness_files() -> dict[str, str]:
    """What the developer writes into agent_harness/."""
    skills = resources.files("roboswe.rle.kitchen").joinpath("kitchen_skills.py").read_text()
    return {"geometry.py": skills,
            "pickplace.py": (HERE.parent / "rle_speedrun" / "scripts" / "policy.py").read_text(),
            "drawer.py": (HERE / "harness" / "drawer.py").read_text(),
            "MANUAL.md": (HERE / "harness" / "MANUAL.md").read_text()}


class TransferAgent:
    def __init__(self, practice: bool = True, tasks: int = 3):
        self.practice, self.tasks = practice, tasks

    def decide(self, request: pp.DecisionRequest) -> pp.AnyOperation:
        calls = [p for turn in request.conversation if turn.role == "assistant" for p in turn.parts
                 if isinstance(p, pp.ToolCallPart)]
        results = [p.text for turn in request.conversation for p in turn.parts if isinstance(p, pp.ToolResultPart)]
        attempting = any(tool.name == "finish_trial" for tool in request.tools)
        plan = self._attempt(results, request.system) if attempting else self._development()
        if len(calls) < len(plan):
            return plan[len(calls)]
        said = [line for text in results for line in text.splitlines() if line.startswith(("PRACTICE ", "ATTEMPT ", "BLIND "))]
        return pp.Finish(reason=f"{'attempt' if attempting else 'development'} done: {said}"[:4000])

    def _development(self) -> list[pp.AnyOperation]:
        writes = [pp.WriteFile(path=f"{HARNESS}/{name}", content=text) for name, text in harness_files().items()]
        notes = "developer's notes, not for the harness: the push closes the practice drawer; the cabinets are untried\n"
        return [pp.ListFiles(), *writes, pp.WriteFile(path=NOTES, content=notes),
                pp.WriteFile(path="develop.py", content=DEVELOP.format(tasks=self.tasks, practice=self.practice)),
                pp.Exec(path="develop.py")]

    def _attempt(self, results: list[str], instruction: str) -> list[pp.AnyOperation]:
        """list_files; with a harness its manual, then the manual's recipe; without one (or no recipe) a blind reach."""
        plan: list[pp.AnyOperation] = [pp.ListFiles()]
        if not results:
            return plan
        has_harness = MANUAL in results[0]
        if has_harness:
            plan.append(pp.ReadFile(path=MANUAL))
            if len(results) < 2:
                return plan
        if has_harness and all(name in results[1] for name in RECIPE_NEEDS) and "drawer" in instruction:
            script = pp.WriteFile(path="attempt.py", content=ATTEMPT.format(close="close" in instruction,
                                                                            used=list(RECIPE_NEEDS)))
        else:
            script = pp.WriteFile(path="attempt.py", content=BLIND)
        return [*plan, script, pp.Exec(path="attempt.py"), pp.FinishTrial()]
