"""The RLE-Bench speed-run demo participant (family 01 on the kit: PickPlaceCounterToDrawer, TurnOnMicrowave), scripted.

``agent = "roboswe.agents.rle_speedrun:SpeedrunAgent"`` (provider kind ``python``): a fixed plan over the real
operations, each decision a pure function of the conversation so far, its scripts run in the sandbox over
``import robot``.

Development: list_files; write its policy for the task (``POLICIES``: scripts/policy.py, the pick-and-place;
scripts/press_button.py, TurnOnMicrowave at L3) as ``policy.py`` (at L1, where the listing
shows no ``kitchen_skills.py`` from the harness, also its own ``geometry.py``: the same geometry and motion
code an agent would have to write); write ``develop.py`` (the policy tried on ``practice`` public kitchens,
charged, a reset after each) and ``trial.py`` (one episode in the current kitchen); exec develop.py; finish.
Evaluation (the ``evaluation`` interface offers finish_trial): in each hidden kitchen exec trial.py, then
finish_trial and next_trial; finish after the last. ``probe = true`` first writes and execs ``probe.py``, which
tries what the evaluation must refuse (robot.reset(), a batch of 201 actions) and prints what happened.
At L3 the policy reads the object and drawer from the ``priv_*`` state; at L1 and L2 from the base camera's depth.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from roboswe.protocol import participant as pp

HERE = Path(__file__).resolve().parent
SKILLS = "kitchen_skills.py"  # the harness's L2/L3 client skills (roboswe/rle/kitchen/development.py SKILLS_FILES)
SUMMARY = "EPISODE "  # the line develop.py and trial.py print each episode's JSON summary on
DEVELOP = '''import json

import robot

import policy


def episode():
    try:
        return policy.main(robot)
    except Exception as e:  # a failed attempt is this participant's, reported as such
        return {{"error": f"{{type(e).__name__}}: {{e}}"}}


for _ in range({practice}):
    print({summary!r} + json.dumps(episode()))
    robot.reset()
'''
TRIAL = DEVELOP.split("\n\nfor _ in")[0] + "\n\nprint({summary!r} + json.dumps(episode()))\n"
PROBE = '''import json

import robot

seen = {}
try:
    robot.reset()
    seen["reset"] = "accepted"
except robot.ResetRefused as e:
    seen["reset"] = "ResetRefused: " + str(e)
hold = [0.0] * robot.spec()["action_dim"]
try:
    robot.step_many([hold] * 201)
    seen["batch_201"] = "accepted"
except (robot.InvalidAction, robot.LimitReached) as e:
    seen["batch_201"] = type(e).__name__ + ": " + str(e)
seen["actions_left"] = float(robot.state()["actions_left"][0])
print("PROBE " + json.dumps(seen))
'''
TRIALS = re.compile(r"trial \d+ of (\d+)")
POLICIES = {"turnonmicrowave": "press_button.py"}
"""A kit subtask (in the series id) -> its policy script; any other: scripts/policy.py (PickPlaceCounterToDrawer)."""


class SpeedrunAgent:
    def __init__(self, practice: int = 1, probe: bool = False):
        self.practice, self.probe = practice, probe

    def decide(self, request: pp.DecisionRequest) -> pp.AnyOperation:
        calls = [p for turn in request.conversation if turn.role == "assistant" for p in turn.parts
                 if isinstance(p, pp.ToolCallPart)]
        results = [p.text for turn in request.conversation for p in turn.parts if isinstance(p, pp.ToolResultPart)]
        evaluating = any(tool.name == "finish_trial" for tool in request.tools)
        plan = self._evaluation(request.system) if evaluating else self._development(results, request.series)
        if len(calls) < len(plan):
            return plan[len(calls)]
        episodes = [line[len(SUMMARY):] for text in results for line in text.splitlines() if line.startswith(SUMMARY)]
        return pp.Finish(reason=f"{'evaluation' if evaluating else 'development'} done; episodes: {episodes}"[:4000])

    def _development(self, results: list[str], series: str) -> list[pp.AnyOperation]:
        plan: list[pp.AnyOperation] = [pp.ListFiles()]
        if not results:
            return plan
        script = next((s for subtask, s in POLICIES.items() if f"-{subtask}" in series), "policy.py")
        plan.append(pp.WriteFile(path="policy.py", content=(HERE / "scripts" / script).read_text()))
        if SKILLS not in results[0]:  # L1: the harness ships no skills; this participant wrote its own
            skills = resources.files("roboswe.rle.kitchen").joinpath(SKILLS).read_text()
            plan.append(pp.WriteFile(path="geometry.py", content=skills))
        return [*plan, pp.WriteFile(path="develop.py", content=DEVELOP.format(practice=self.practice, summary=SUMMARY)),
                pp.WriteFile(path="trial.py", content=TRIAL.format(summary=SUMMARY)), pp.Exec(path="develop.py")]

    def _evaluation(self, system: str) -> list[pp.AnyOperation]:
        found = TRIALS.search(system)
        trials = int(found.group(1)) if found else 5
        plan: list[pp.AnyOperation] = [pp.WriteFile(path="probe.py", content=PROBE), pp.Exec(path="probe.py")] if self.probe else []
        for k in range(trials):
            plan += [pp.Exec(path="trial.py"), pp.FinishTrial()]
            if k + 1 < trials:
                plan.append(pp.NextTrial())
        return plan

