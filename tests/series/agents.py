"""Test participants for the `python` provider kind (importable by the provider_client actor)."""

from __future__ import annotations

import time

from roboswe.protocol.participant import (
    Attempt,
    DecisionRequest,
    Finish,
    ListFiles,
    ProviderFailure,
    Wait,
)


class WaitOnlyAgent:
    """Only ever waits: the trial must end at its control-step budget."""

    def __init__(self, steps: int = 25):
        self.steps = steps

    def decide(self, request: DecisionRequest):
        return Wait(steps=self.steps)


class OutageAgent:
    """Trial 1: one good decision, then every call fails as a provider outage would; later trials finish at once."""

    def decide(self, request: DecisionRequest):
        if request.trial == 1:
            answered = sum(1 for t in request.conversation if t.role == "assistant")
            if answered >= 1:
                now = time.time()
                attempts = [Attempt(number=n, started_at=now, latency_s=0.01, outcome="http_503", status=503,
                                    detail="service unavailable", request=b'{"simulated": true}', backoff_s=0.05 * n)
                            for n in (1, 2, 3)]
                raise ProviderFailure("HTTP 503 after 3 attempts (simulated outage)", attempts)
            return ListFiles()
        return Finish(reason="nothing to do after the outage")


class ClockAgent:
    """Writes a script whose output depends on the wall clock, runs it, finishes: a replay cannot agree."""

    SCRIPT = "import time, robot\nrobot.step(robot.spec()['action']['hold'])\nprint('now', time.time_ns())\n"

    def decide(self, request: DecisionRequest):
        from roboswe.protocol.participant import Exec, WriteFile

        done = [t for t in request.conversation if t.role == "assistant" and t.trial == request.trial]
        if request.trial > 1 and not done:
            return ListFiles()  # the retained clock.py is there
        plan = [WriteFile(path="clock.py", content=self.SCRIPT), Exec(path="clock.py"), Finish(reason="done")]
        if request.trial > 1:
            plan = [ListFiles(), *plan]
        return plan[min(len(done), len(plan) - 1)]


class BadDecisionsAgent:
    """Makes every kind of bad decision once, then finishes: each gets an error result and no steps."""

    def decide(self, request: DecisionRequest):
        from roboswe.protocol.participant import (
            Decision,
            Exec,
            Observe,
            ReadFile,
            SearchHistory,
            ToolCallPart,
            Turn,
            WriteFile,
        )

        done = sum(1 for t in request.conversation if t.role == "assistant" and t.trial == request.trial)
        if done == 0:
            turn = Turn(id=f"bad-{request.trial}-0", role="assistant", trial=request.trial, provider="python",
                        parts=[ToolCallPart(call_id="c0", name="fly", arguments='{"to": "moon"}')])
            return Decision(turn=turn, operation=None, call_id="c0", invalid="unknown operation 'fly'")
        plan = [WriteFile(path="../escape.py", content="x"), Exec(path="/etc/passwd"), Exec(path="missing.py"),
                ReadFile(path="nope.txt"), Observe(cameras=["no_such_camera"]), SearchHistory(query="anything"),
                Finish(reason="done")]
        return plan[min(done - 1, len(plan) - 1)]


class ArchiveSearchAgent:
    """Writes large notes until the context slides, then searches the archive once and finishes."""

    def decide(self, request: DecisionRequest):
        from roboswe.protocol.participant import SearchHistory, WriteFile

        mine = [p for t in request.conversation if t.role == "assistant" for p in t.tool_calls()]
        if any(c.name == "search_history" for c in mine):
            return Finish(reason="found it")
        # search_history is offered from the first request; the slide shows as the context manager's notice
        if any("earlier turns were removed" in t.text() for t in request.conversation if t.role == "user"):
            return SearchHistory(query="MARKER-0 ")
        n = sum(c.name == "write_file" for c in mine)
        return WriteFile(path=f"note{n}.txt", content=f"MARKER-{n} " + "lorem ipsum " * 1500)


class GiveUpLiftAgent:
    """The Lift demo participant, except that in ``give_up`` trials it runs a script that only holds the
    arm still for 20 control steps and then finishes: an honest failure with real physics, which must score 0."""

    HOLD = "import robot\nhold = robot.spec()['action']['hold']\nfor _ in range(20):\n    robot.step(hold)\nprint('held')\n"

    def __init__(self, give_up: tuple[int, ...] = (2,)):
        from roboswe.agents.lift_demo import LiftDemoAgent

        self.demo = LiftDemoAgent()
        self.give_up = tuple(give_up)

    def decide(self, request: DecisionRequest):
        from roboswe.agents.lift_demo._agent import trial_steps
        from roboswe.protocol.participant import Exec, Observe, WriteFile

        steps = trial_steps(request)
        if request.trial in self.give_up and any(isinstance(s.op, Observe) for s in steps):
            plan = [WriteFile(path="hold.py", content=self.HOLD), Exec(path="hold.py"),
                    Finish(reason="giving up: the arm only held still (an honest failure)")]
            done = len(steps) - 1 - next(i for i, s in enumerate(steps) if isinstance(s.op, Observe))
            return plan[min(done, len(plan) - 1)]
        return self.demo.next_operation(steps)
