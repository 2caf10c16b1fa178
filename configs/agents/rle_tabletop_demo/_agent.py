"""The tabletop participant: a fixed plan over the real operations.

list_files → write attempt.py → exec it → finish, quoting the summary line it printed. attempt.py is the
scripted calibration participant's own code (participants.py: ``Hand``, the task's strategy), its public
constants written in as literals and a small client over the sandbox's `robot` module, so the sandbox needs
nothing of roboswe. Each decision is a pure function of the conversation so far.
"""

from __future__ import annotations

import inspect
import json
import re

from roboswe.protocol import participant as pp

SCRIPT = "attempt.py"
SUMMARY_PREFIX = "ATTEMPT "  # the line attempt.py prints its JSON summary on
STRATEGIES = {
    "tower": ("tower", "catch_height"),
    "cantilever": ("cantilever",),
    "balance": ("balance", "_surface_z"),
    "com": ("probe_com", "tilt_from_image"),
}
"""Task kind → the participants.py functions its script carries (its first the strategy; ``Hand`` besides)."""
TASK_HELPERS = {"com": ("com_depth_below",)}
"""Task kind → the public functions of sim/tabletop_physics/tasks.py its strategy calls as ``t.*``."""
CONSTANT = re.compile(r"\b([A-Z][A-Z0-9_]+)\b")

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
    """attempt.py for a task kind: participants.py's code for it, runnable in the sandbox. The constants the
    code names are written in as literals: participants.py's own, and the public geometry of tasks.py (stated
    in the instructions) that it reads as ``t.*``; nothing else of the harness reaches the sandbox."""
    from roboswe.sim.tabletop_physics import tasks as t

    from roboswe.rle.tabletop import participants as p

    helpers = [inspect.getsource(getattr(t, name)) for name in TASK_HELPERS.get(kind, ())]
    code = [inspect.getsource(p.Hand), *(inspect.getsource(getattr(p, name)) for name in STRATEGIES[kind])]
    names = sorted({n for src in code + helpers for n in CONSTANT.findall(src) if hasattr(p, n) or hasattr(t, n)})
    literals = [f"{n} = {getattr(p, n) if hasattr(p, n) else getattr(t, n)!r}" for n in names]
    public = [n for n in names if hasattr(t, n)] + list(TASK_HELPERS.get(kind, ()))
    header = ["import json", "import math", "import types", "", "import numpy as np", "import robot as _robot", "",
              *literals, ""]
    namespace = "t = types.SimpleNamespace(" + ", ".join(f"{n}={n}" for n in public) + ")\n"
    main = f"print({SUMMARY_PREFIX!r} + json.dumps({STRATEGIES[kind][0]}(Robot())))\n"
    return "\n".join(header) + "\n\n" + "\n\n".join([*helpers, namespace, *code, CLIENT]) + "\n\n" + main


def task_kind(request: pp.DecisionRequest) -> str:
    """The tabletop task's kind from the series id (``RUN_ID/tabletop-balance`` → ``balance``)."""
    return request.series.rsplit("/", 1)[-1].removeprefix("tabletop-")


class TabletopDemoAgent:
    """agent = "roboswe.agents.rle_tabletop_demo:TabletopDemoAgent" (kind = "python"); the strategy is the task's."""

    def decide(self, request: pp.DecisionRequest) -> pp.AnyOperation:
        kind = task_kind(request)
        if kind not in STRATEGIES:
            return pp.Finish(reason=f"no scripted strategy for {request.series!r}; the scene is scored as it stands")
        plan = [pp.ListFiles(), pp.WriteFile(path=SCRIPT, content=script_source(kind)), pp.Exec(path=SCRIPT)]
        calls = [p for turn in request.conversation if turn.role == "assistant" for p in turn.parts
                 if isinstance(p, pp.ToolCallPart) and p.operation is not None]
        if len(calls) < len(plan):
            return plan[len(calls)]
        results = [p for turn in request.conversation for p in turn.parts if isinstance(p, pp.ToolResultPart)]
        summary = next((line[len(SUMMARY_PREFIX):] for r in reversed(results) for line in r.text.splitlines()
                        if line.startswith(SUMMARY_PREFIX)), None)
        if summary is None:
            return pp.Finish(reason="the attempt script printed no summary; the scene is scored as it stands")
        return pp.Finish(reason=f"{kind} attempt done: {json.dumps(json.loads(summary))}")
