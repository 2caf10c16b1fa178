"""The RoboPaint demo participant: the scripted painter (sim/paint/painter.py) over the real operations.

Each trial is one ICL round. Code mode (the default; ``[series] interface = "code"``): list the
workspace, reuse ``paint.py`` when a retained copy is intact (else write it), write this round's
stroke plan to ``strokes.json``, observe once, run the script (each planned batch is one
MoveFlange through ``robot.step_many``), and finish, which in code mode submits the painting.
The plan is the painter's three horizontal strokes, pressing a little harder each round, the
way a participant's revisions would differ. Every decision is a pure function of the current
trial's part of the conversation, so a fresh instance, a resumed run and the fresh-context
control decide the same way.
"""

from __future__ import annotations

import json
from importlib import resources

from roboswe.agents.lift_demo._agent import Step, trial_steps
from roboswe.protocol.participant import (
    AnyOperation,
    DecisionRequest,
    Exec,
    Finish,
    ListFiles,
    Observe,
    ReadFile,
    WriteFile,
)
from roboswe.sim.paint.painter import batch_rows, three_strokes

SCRIPT = "paint.py"
PLAN = "strokes.json"


def script_source() -> str:
    """The authored script shipped next to this module (configs/agents/paint_demo/scripts/)."""
    return resources.files(__package__).joinpath("scripts", SCRIPT).read_text(encoding="utf-8")


def stroke_plan(round_number: int) -> str:
    """strokes.json for ICL round ``round_number`` (1-based): the painter's batches as waypoint vectors."""
    batches = [batch_rows(b) for b in three_strokes(round_number - 1)]
    return json.dumps({"round": round_number, "batches": batches}) + "\n"


class PaintDemoAgent:
    """Deterministic painter for the `python` provider kind (agent = "roboswe.agents.paint_demo:PaintDemoAgent")."""

    def __init__(self, max_execs: int = 2, max_retries: int = 3):
        self.max_execs = max_execs
        self.max_retries = max_retries
        self.script = script_source()

    def decide(self, request: DecisionRequest) -> AnyOperation:
        return self.next_operation(trial_steps(request), max(1, request.trial))

    def next_operation(self, steps: list[Step], round_number: int) -> AnyOperation:
        """The next operation given this round's operations so far and their results."""
        write_script = WriteFile(path=SCRIPT, content=self.script)
        write_plan = WriteFile(path=PLAN, content=stroke_plan(round_number))
        if not steps:
            return ListFiles()
        last = steps[-1]
        match last.op:
            case ListFiles():
                return ReadFile(path=SCRIPT) if not last.error and SCRIPT in last.text.split() else write_script
            case ReadFile(path=path) if path == SCRIPT:
                return write_plan if not last.error and self.script in last.text else write_script
            case WriteFile() if last.error:
                if sum(isinstance(s.op, WriteFile) and s.error for s in steps) >= self.max_retries:
                    return Finish(reason=f"could not write {last.op.path}: {last.text[:200]}")
                return last.op
            case WriteFile(path=path) if path == SCRIPT:
                return write_plan
            case WriteFile(path=path) if path == PLAN:
                return Observe()
            case Observe():
                return Exec(path=SCRIPT)
            case Exec():
                execs = sum(isinstance(s.op, Exec) for s in steps)
                if last.error and execs < self.max_execs:
                    return Exec(path=SCRIPT)
                return Finish(reason=f"round {round_number}: the planned strokes are painted; submitting the painting")
        return Finish(reason=f"unexpected state after {type(last.op).__name__}; submitting what is there")
