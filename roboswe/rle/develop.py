"""The RLE-Bench development session in one process (kept for tests that drive a ``DevelopmentSim`` directly).

``develop``: a participant decides operations over a conversation; write/read/list act on the
workspace (roboswe.evaluation.workspace.Workspace, links never followed), exec runs the script in the
trial sandbox (bridge/trial.py, resets allowed) against the development simulator reached through
``sim``. The phase ends when the participant finishes, the ledger cannot pay one more step, the
wall-time budget is spent, or the operation cap is reached. The development simulator itself is
roboswe/rle/scene.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import trio

from roboswe.bridge.door import SimLink
from roboswe.protocol import sim as simp
from roboswe.protocol.bridge import ScriptLimits
from roboswe.protocol.participant import (
    DecisionRequest,
    Exec,
    Finish,
    ListFiles,
    ReadFile,
    TextPart,
    Turn,
    WriteFile,
    result_turn,
)
from roboswe.sandbox.volume import WORKSPACE_MB

from .manifest import RleTask

# --- the session ---------------------------------------------------------------------------------


class OperationRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One development operation as recorded: what was asked, what came back, what the ledger said after."""

    n: int
    operation: str
    path: str | None = None
    text: str
    error: bool
    exec: object = None  # the ExecFeedback of an exec
    budget_left: int
    seconds: float


class DevelopmentResult(msgspec.Struct, kw_only=True):
    operations: list[OperationRecord]
    ended: str  # finished | budget | wall_time | operation_cap
    finish_reason: str = ""
    wall_seconds: float


MAX_TEXT = 4000  # characters of an operation's answer kept in its record (the conversation holds the rest)


async def develop(task: RleTask, participant, sim: SimLink, workspace: Path, *, backend: str | None = None,
                  image=None, max_operations: int = 40, script_seconds: float = 120.0,
                  workspace_mb: int | None = WORKSPACE_MB) -> DevelopmentResult:
    """Carry out ``participant``'s operations until it finishes or the budget ends the phase. ``sim`` reaches the
    development simulator (its process: ``robot_link``; in this process: ``DevelopmentSim.link``)."""
    from roboswe.bridge.trial import open_trial
    from roboswe.evaluation.workspace import Workspace, WorkspaceError

    started = time.monotonic()
    ws = Workspace(workspace)
    spec = (await sim(simp.GetSpec())).message  # its instruction carries the development guide (scene.py)
    conversation = [Turn(id="develop", role="user", trial=1, parts=[TextPart(text=spec.instruction)])]
    records: list[OperationRecord] = []
    limits = ScriptLimits(steps=task.budget.charged_steps, seconds=script_seconds)
    ended, reason = "operation_cap", ""
    async def state() -> simp.RobotState:
        return (await sim(simp.GetState())).message

    async with open_trial("rle-develop", workspace, sim, backend=backend, limits=limits, image=image,
                          workspace_mb=workspace_mb, resets=True) as sandbox:
        for n in range(max_operations):
            if (await state()).steps_left <= 0:
                ended = "budget"
                break
            if time.monotonic() - started > task.budget.wall_seconds:
                ended = "wall_time"
                break
            decision = await participant.decide(DecisionRequest(system="", tools=[], conversation=list(conversation), trial=1))
            conversation.append(decision.turn)
            op, op_started, feedback = decision.operation, time.monotonic(), None
            try:
                match op:
                    case WriteFile(path=path, content=content):
                        text, error = f"Wrote {await trio.to_thread.run_sync(ws.write, path, content)} bytes to {path}.", False
                    case ReadFile(path=path):
                        text, error = (await trio.to_thread.run_sync(ws.read, path))[0], False
                    case ListFiles():
                        text, error = await trio.to_thread.run_sync(ws.listing_text), False
                    case Exec(path=path):  # a script runs at most until the phase's wall time is spent
                        left = task.budget.wall_seconds - (time.monotonic() - started)
                        feedback = await sandbox.exec(path, ScriptLimits(steps=limits.steps, seconds=max(1.0, min(script_seconds, left))))
                        text = (f"exit {feedback.exit_status}, {feedback.steps} steps, limit {feedback.limit}; "
                                f"budget left {(await state()).steps_left}\n{feedback.stdout}\n{feedback.stderr}")
                        error = feedback.exit_status != 0
                    case Finish(reason=reason):
                        text, error = "Development finished.", False
                    case _:
                        text, error = f"{type(op).__name__} is not offered in the development phase", True
            except (WorkspaceError, ValueError) as e:
                text, error = str(e), True
            records.append(OperationRecord(n=n, operation=type(op).__name__, path=getattr(op, "path", None),
                                           text=text[:MAX_TEXT], error=error, exec=feedback, budget_left=(await state()).steps_left,
                                           seconds=round(time.monotonic() - op_started, 3)))
            conversation.append(result_turn(decision, id=f"r{n}", text=text, is_error=error, trial=1))
            if isinstance(op, Finish):
                ended = "finished"
                break
    return DevelopmentResult(operations=records, ended=ended, finish_reason=reason,
                             wall_seconds=round(time.monotonic() - started, 3))

