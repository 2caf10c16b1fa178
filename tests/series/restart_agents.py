"""Participants for the restart and replay tests (importable by the provider_client actor process)."""

from __future__ import annotations

import time
from pathlib import Path

from roboswe.protocol.participant import DecisionRequest, Finish, ListFiles, Wait


class SlowWaitAgent:
    """Trial 1 never ends by itself: a short wait per decision, a little apart, so a test can kill an actor
    while it is under way. Later trials list files and finish at once."""

    def __init__(self, pause: float = 0.2):
        self.pause = pause

    def decide(self, request: DecisionRequest):
        if request.trial == 1:
            time.sleep(self.pause)
            return Wait(steps=2)
        mine = sum(1 for t in request.conversation if t.role == "assistant" and t.trial == request.trial)
        return ListFiles() if mine == 0 else Finish(reason="done")


class StallingAgent:
    """Marks ``marker`` when asked for its first decision, then takes ``seconds`` to answer: a slow provider."""

    def __init__(self, marker: str, seconds: float = 120.0):
        self.marker = Path(marker)
        self.seconds = seconds

    def decide(self, request: DecisionRequest):
        self.marker.write_text(str(time.time()))
        time.sleep(self.seconds)
        return Finish(reason="too late")


class NoisyMoveAgent:
    """Writes a script whose actions come from os.urandom but whose output is fixed, runs it, finishes:
    a replay moves the robot differently while every exec figure (steps, exit status, output) agrees."""

    SCRIPT = (
        "import os, robot\n"
        "spec = robot.spec()\n"
        "hold = list(spec['action']['hold'])\n"
        "for _ in range(5):\n"
        "    a = list(hold)\n"
        "    a[0] = (int.from_bytes(os.urandom(8), 'little') / 2**64 - 0.5) * 0.4\n"
        "    robot.step(a)\n"
        "print('moved 5 steps')\n"
    )

    def decide(self, request: DecisionRequest):
        from roboswe.protocol.participant import Exec, WriteFile

        mine = sum(1 for t in request.conversation if t.role == "assistant" and t.trial == request.trial)
        plan = [WriteFile(path="noisy.py", content=self.SCRIPT), Exec(path="noisy.py"), Finish(reason="done")]
        return plan[min(mine, len(plan) - 1)]


class HoldUntilKilledAgent:
    """An attempt that begins before ``<state>/killed.<trial>`` exists only ever waits (a short wait per
    decision, ``pause`` apart), so a test can kill an actor while it is under way and the attempt never
    ends by itself; an attempt that begins after it (the linked re-run) lists files and finishes.
    The choice is read back from the attempt's first call, so a restarted provider client keeps it."""

    def __init__(self, state: str, pause: float = 0.2):
        self.state = Path(state)
        self.pause = pause

    def decide(self, request: DecisionRequest):
        calls = [c.name for t in request.conversation if t.role == "assistant" and t.trial == request.trial
                 for c in t.tool_calls()]
        if not calls:
            if (self.state / f"killed.{request.trial}").exists():
                return ListFiles()
        elif calls[0] == "list_files":
            return Finish(reason="done")
        time.sleep(self.pause)
        return Wait(steps=2)
