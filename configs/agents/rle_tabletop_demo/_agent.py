"""The tabletop participant: a fixed plan over the real operations.

list_files → write attempt.py → exec it → finish, quoting the summary line it printed. attempt.py is the
scripted calibration participant's own code (participants.py: ``Hand``, the task's strategy), its public
constants written in as literals and a small client over the sandbox's `robot` module, so the sandbox needs
nothing of roboswe. Each decision is a pure function of the conversation so far.
"""

from __future__ import annotations

import inspect
import json

from roboswe.protocol.participant import (
    AnyOperation,
    DecisionRequest,
    Exec,
    Finish,
    ListFiles,
    ToolCallPart,
    ToolResultPart,
    WriteFile,
)

SCRIPT = "attempt.py"
SUMMARY_PREFIX = "ATTEMPT "  # the line attempt.py prints its JSON summary on
STRATEGIES = {"balance": ("balance", "_surface_z")}
"""Task kind → the participants.py functions its script carries (besides ``Hand``)."""
PUBLIC = ("BALANCE_PIVOT", "BALANCE_CUBE_HALF", "BALANCE_ARMS", "BALANCE_SLOTS")
"""The public geometry (sim/tabletop_physics/tasks.py, stated in the instructions) the strategies read as ``t.*``."""

CLIENT = '''
class Robot:
    """The participant's robot client (state, step, observe) over the sandbox's `robot` module."""

    def state(self):
        return {k: [float(v) for v in np.ravel(a)] for k, a in _robot.state().items()}

    def step(self, rows):
        _robot.step_many([[float(v) for v in row] for row in rows])

    def observe(self):
        return {name: view["rgb"] for name, view in _robot.observe().items()}
'''


def script_source(kind: str) -> str:
    """attempt.py for a task kind: participants.py's code for it, runnable in the sandbox."""
    from roboswe.sim.tabletop_physics import tasks as t

    from roboswe.rle.tabletop import participants as p

    header = ["import json", "import math", "import types", "", "import numpy as np", "import robot as _robot", "",
              f"MAX_MOVE_M, MAX_TURN_RAD = {p.MAX_MOVE_M!r}, {p.MAX_TURN_RAD!r}",
              f"SAFE_Z, FIRM, PINCH, OPEN = {p.SAFE_Z!r}, {p.FIRM!r}, {p.PINCH!r}, {p.OPEN!r}",
              f"GRASP_Z, ROW_Z = {p.GRASP_Z!r}, {p.ROW_Z!r}",
              "t = types.SimpleNamespace(" + ", ".join(f"{name}={getattr(t, name)!r}" for name in PUBLIC) + ")", ""]
    code = [inspect.getsource(p.Hand), *(inspect.getsource(getattr(p, name)) for name in STRATEGIES[kind]), CLIENT]
    main = f"print({SUMMARY_PREFIX!r} + json.dumps({STRATEGIES[kind][0]}(Robot())))\n"
    return "\n".join(header) + "\n\n" + "\n\n".join(code) + "\n\n" + main


class TabletopDemoAgent:
    """agent = "roboswe.agents.rle_tabletop_demo:TabletopDemoAgent" (kind = "python")."""

    def __init__(self, kind: str = "balance"):
        self.plan: list[AnyOperation] = [ListFiles(), WriteFile(path=SCRIPT, content=script_source(kind)), Exec(path=SCRIPT)]

    def decide(self, request: DecisionRequest) -> AnyOperation:
        calls = [p for turn in request.conversation if turn.role == "assistant" for p in turn.parts
                 if isinstance(p, ToolCallPart) and p.operation is not None]
        if len(calls) < len(self.plan):
            return self.plan[len(calls)]
        results = [p for turn in request.conversation for p in turn.parts if isinstance(p, ToolResultPart)]
        summary = next((line[len(SUMMARY_PREFIX):] for r in reversed(results) for line in r.text.splitlines()
                        if line.startswith(SUMMARY_PREFIX)), None)
        if summary is None:
            return Finish(reason="the attempt script printed no summary; the scene is scored as it stands")
        return Finish(reason=f"balance attempt done: {json.dumps(json.loads(summary))}")
