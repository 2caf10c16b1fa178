"""Participants for the in-process tests (local agents, as the `python` provider kind runs them)."""

from __future__ import annotations

import json
import math
import re

from roboswe.protocol.participant import DecisionRequest, Exec, Finish, ListFiles, Observe, Wait, WriteFile

MAX_MOVE = 0.05  # the fake scene's metres per step at action 1.0
_STATE = re.compile(r"^\s*(\w+): \[([^\]]*)\]", re.M)


def results(request: DecisionRequest, trial: int | None = None) -> list[str]:
    """The harness's result texts so far (this trial only when ``trial`` is given), oldest first."""
    return [p.text for t in request.conversation if t.role == "user" and (trial is None or t.trial == trial)
            for p in t.tool_results()]


def decided(request: DecisionRequest) -> int:
    """How many decisions this trial has had."""
    return sum(1 for t in request.conversation if t.role == "assistant" and t.trial == request.trial)


def reach_plan(state_text: str, *, clock: bool = False) -> str:
    """A plan file that moves the gripper from its observed position onto the target and closes it."""
    values = {k: [float(x) for x in v.split(",")] for k, v in _STATE.findall(state_text)}
    pos, target = values["robot0_eef_pos"], values["target_pos"]
    delta = [t - p for p, t in zip(pos, target)]
    n = max(1, math.ceil(max(abs(d) for d in delta) / MAX_MOVE - 1e-9))
    actions = [[d / n / MAX_MOVE for d in delta] + [1.0] for _ in range(n)]
    return json.dumps({"actions": actions, "say": "reaching", "clock": clock})


class ReachAgent:
    """Trial 1: observe, write reach.json, run it, wait out the success interval, finish.
    Later trials: the workspace kept reach.json, so list files, run it, wait, finish."""

    def __init__(self, clock: bool = False):
        self.clock = clock

    def decide(self, request: DecisionRequest):
        n = decided(request)
        kept = [t for t in request.conversation if t.trial < request.trial]  # empty in the fresh-context control
        if not any("reach.json" in p.text for t in kept for p in t.tool_results()):
            plan = [Observe(cameras=["agentview"]), "write", Exec(path="reach.json"), Wait(steps=5), Finish(reason="reached")]
        else:
            plan = [ListFiles(), Exec(path="reach.json"), Wait(steps=5), Finish(reason="reached again")]
        step = plan[min(n, len(plan) - 1)]
        if step == "write":
            return WriteFile(path="reach.json", content=reach_plan(results(request, request.trial)[-1], clock=self.clock))
        return step


class WanderAgent:
    """Runs a plan that moves away from the target, waits, finishes: every trial fails."""

    def decide(self, request: DecisionRequest):
        plan = [WriteFile(path="away.json", content=json.dumps({"actions": [[0.0, 0.0, 1.0, -1.0]] * 4})),
                Exec(path="away.json"), Wait(steps=3), Finish(reason="gave up")]
        return plan[min(decided(request), len(plan) - 1)]


class BadPlanAgent:
    """Writes plans the bridge and simulator must refuse or cut, then finishes."""

    def decide(self, request: DecisionRequest):
        plan = [
            WriteFile(path="wild.json", content=json.dumps({"actions": [[2.0, 0.0, 0.0, 0.0]]})),  # out of bounds
            Exec(path="wild.json"),
            WriteFile(path="long.json", content=json.dumps({"actions": [[0.0, 0.0, 0.0, 0.0]] * 80})),  # > 50 steps
            Exec(path="long.json"),
            Exec(path="../outside.json"),
            Finish(reason="done"),
        ]
        return plan[min(decided(request), len(plan) - 1)]


class SandboxDiesAgent:
    """Trial 1 runs a plan under which the sandbox dies (its call stays unanswered); later trials list and finish."""

    def decide(self, request: DecisionRequest):
        if request.trial == 1:
            plan = [WriteFile(path="sandbox-dies.json", content="{}"), Exec(path="sandbox-dies.json")]
        else:
            plan = [ListFiles(), Finish(reason="done")]
        return plan[min(decided(request), len(plan) - 1)]


class BadDecisionsAgent:
    """Makes every decision a participant can get wrong without the harness failing -- unvalidated
    Operations, a lone surrogate, oversized and 2,000-deep arguments, its own exception, a wrong
    return type -- then finishes. Each is an invalid decision: an error result, no control steps."""

    def decide(self, request: DecisionRequest):
        from roboswe.protocol.participant import Act

        deep: list = []
        for _ in range(2000):
            deep = [deep]
        plan = [Act(actions=[]), Act(actions="not a list"), WriteFile(path="a.py", content="\ud83d"),
                Act(actions=[[0.0] * 4] * 100_000), Exec(path=deep), Wait(steps=10**9), "raise", "wrong type",
                Finish(reason="done")]
        step = plan[min(decided(request), len(plan) - 1)]
        if step == "raise":
            raise RuntimeError("the agent's own bug")
        if step == "wrong type":
            return {"op": "finish"}
        return step
