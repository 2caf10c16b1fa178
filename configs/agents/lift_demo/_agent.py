"""The Lift demo participant: a deterministic policy over the real operations.

Per trial it lists the workspace, reuses its script when a retained copy is intact (else
writes it), resets the script's progress file for the new scene, observes once, runs the
script until plan.json says the cube is up (or that it gave up), and finishes. Every
decision is a pure function of the current trial's part of the conversation, so a fresh
instance, a resumed run and every trial of a series decide the same way.
"""

from __future__ import annotations

import json
import re
from importlib import resources

from roboswe.protocol.participant import (
    AnyOperation,
    DecisionRequest,
    Exec,
    Finish,
    ListFiles,
    Observe,
    Operation,
    ReadFile,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    WriteFile,
)

SCRIPT = "lift_cube.py"
PLAN = "plan.json"
FRESH_PLAN = json.dumps({"phase": "locate"}) + "\n"
_OPENING = re.compile(r"Trial \d+ of \d+ begins\.")  # roboswe.evaluation.instructions.trial_opening
_PHASE = re.compile(r'"phase"\s*:\s*"([a-z_]+)"')


def script_source() -> str:
    """The authored script shipped next to this module (configs/agents/lift_demo/scripts/)."""
    return resources.files(__package__).joinpath("scripts", SCRIPT).read_text(encoding="utf-8")


class Step:
    """One operation of this trial and the harness's answer to it (None while unanswered)."""

    def __init__(self, op: Operation, result: ToolResultPart | None):
        self.op = op
        self.text = result.text if result is not None else ""
        self.error = result is None or result.is_error


def trial_steps(request: DecisionRequest) -> list[Step]:
    """The operations this participant made in the request's current trial, with their results.

    Turns are tagged with their trial; where they are not (trial 0, e.g. a hosted model's
    view), the trial starts at the harness's last trial opening or after the last `finish`.
    """
    turns = request.conversation
    if request.trial:
        earlier = [i for i, t in enumerate(turns) if t.trial and t.trial != request.trial]
        turns = turns[earlier[-1] + 1:] if earlier else turns
    else:
        openings = [i for i, t in enumerate(turns) if t.role == "user" and any(
            isinstance(p, TextPart) and _OPENING.match(p.text) for p in t.parts)]
        turns = turns[openings[-1]:] if openings else turns
    calls: list[ToolCallPart] = []
    results: dict[str, ToolResultPart] = {}
    for turn in turns:
        for part in turn.parts:
            if isinstance(part, ToolCallPart) and turn.role == "assistant" and part.operation is not None:
                calls.append(part)
            elif isinstance(part, ToolResultPart):
                results[part.call_id] = part
    finishes = [i for i, c in enumerate(calls) if isinstance(c.operation, Finish)]
    if finishes:
        calls = calls[finishes[-1] + 1:]
    return [Step(c.operation, results.get(c.call_id)) for c in calls]


def plan_phase(text: str) -> str | None:
    """The phase recorded in plan.json as read_file returned it, or None if unreadable."""
    found = _PHASE.findall(text)
    return found[-1] if found else None


class LiftDemoAgent:
    """Deterministic Lift participant for the `python` provider kind (agent = "roboswe.agents.lift_demo:LiftDemoAgent").

    A subclass with another script sets the class attributes below (configs/agents/kitchen_demo).
    """

    script_name = SCRIPT
    fresh_plan = FRESH_PLAN
    done_reason = "plan.json says done: the cube is grasped and held up"
    failed_reason = "plan.json says failed: the cube could not be lifted"

    def __init__(self, max_execs: int = 12, max_retries: int = 3, observe_depth: bool = True):
        self.max_execs = max_execs
        self.max_retries = max_retries
        self.observe_depth = observe_depth
        self.script = self.read_script()

    @staticmethod
    def read_script() -> str:
        """The script this participant writes and runs."""
        return script_source()

    def decide(self, request: DecisionRequest) -> AnyOperation:
        """The next operation for this request."""
        return self.next_operation(trial_steps(request))

    def next_operation(self, steps: list[Step]) -> AnyOperation:
        """The next operation given this trial's operations so far and their results."""
        write_script = WriteFile(path=self.script_name, content=self.script)
        reset_plan = WriteFile(path=PLAN, content=self.fresh_plan)
        if not steps:
            return ListFiles()
        last = steps[-1]
        execs = sum(isinstance(s.op, Exec) for s in steps)
        match last.op:
            case ListFiles():
                # Retained workspace (trials 2-5): check the script before trusting it.
                if not last.error and re.search(rf"(?<![\w./-]){re.escape(self.script_name)}(?![\w.-])", last.text):
                    return ReadFile(path=self.script_name)
                return write_script
            case ReadFile(path=path) if path == self.script_name:
                return reset_plan if not last.error and self.script in last.text else write_script
            case WriteFile() if last.error:
                if sum(isinstance(s.op, WriteFile) and s.error for s in steps) >= self.max_retries:
                    return Finish(reason=f"could not write {last.op.path}: {last.text[:200]}")
                return last.op
            case WriteFile(path=path) if path == self.script_name:
                return reset_plan
            case WriteFile(path=path) if path == PLAN:
                return Observe(cameras=None, depth=self.observe_depth)
            case Observe():
                return Exec(path=self.script_name)
            case Exec():
                return ReadFile(path=PLAN)
            case ReadFile(path=path) if path == PLAN:
                phase = plan_phase(last.text) if not last.error else None
                if phase == "done":
                    return Finish(reason=self.done_reason)
                if phase == "failed":
                    return Finish(reason=self.failed_reason)
                if execs >= self.max_execs:
                    return Finish(reason=f"{self.script_name} ran {execs} times without finishing (phase {phase})")
                return Exec(path=self.script_name)
        return Finish(reason=f"unexpected state after {type(last.op).__name__}; stopping")
