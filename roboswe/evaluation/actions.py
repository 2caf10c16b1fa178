"""Direct-action operations: a chunk of actions executed by the trial through the simulator.

In a series whose interface is ``actions`` (``[series] interface``), the participant answers
with action chunks instead of code: ``act(actions=[[...], ...])``, or a family's own action
tool. Any ``ActionOperation`` (protocol/participant.py) is executed here the same way:

1. The whole chunk is checked before any physics with the bridge's own check
   (bridge/door.py ``check_actions``: length, finiteness, bounds): a bad chunk is refused
   whole, naming the action, component, value and bound. Nothing is clipped.
2. The executable prefix (K actions in the decisions track, else the whole chunk) runs one
   action per simulator ``Step``: one native control step each, on the robot endpoint's own
   path (the same validation, physics, success bookkeeping and per-step state log as a
   script's steps), so the control trace is recorded the same way.
3. After each control the success status is read; the chunk stops at the first completed
   success interval or at the trial's control-step cap, mid-chunk if need be.

A chunk that is ONE environment action (``one_action``: RoboPaint's MoveFlange, whose rows are
its waypoints) takes steps 1 and 3 the same way, but step 2 is a single ``Step`` of the whole
chunk: the scene runs it over as many control steps as it takes (a protective stop may end it
early), and the decisions track's K does not cut it. If the scene rejects it (its own rules,
e.g. a speed limit), the scene still took it as an action: it is recorded as acted
(``invalid_action``) and replayed, unlike a chunk the check in step 1 refused, which never
reached the scene.

A replay (roboswe/evaluation/verify.py) re-parses the recorded operation, takes the first
``executed`` actions of its chunk (a one-action chunk: all of it, even a rejected one) and steps
them in one request: same actions, same physics.

To offer another family's action tools, subclass ``ActionOperation`` in protocol/participant.py
with its tag and fields and a ``chunk()`` that maps them to action rows, add it to the operation
union and a tool set in ``INTERFACES``; this module, the records and the replay then handle it
unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roboswe.bridge.door import check_actions
from roboswe.evaluation.feedback import ChunkStop
from roboswe.evaluation.peers import SIM_DEADLINE, Simulator
from roboswe.evaluation.series_config import Budgets
from roboswe.protocol import sim as simp


@dataclass
class ChunkRun:
    """What happened to one chunk: refused (``problem``), or how far it ran and why it stopped."""

    requested: int
    executable: int
    executed: int = 0  # actions run (a one-action chunk: all its rows once the scene accepted it)
    controls: int = 0  # control steps the chunk ran
    stopped: ChunkStop = "done"
    problem: str = ""  # the refusal or the simulator's rejection, naming the component
    status: simp.SuccessStatus | None = None
    one_action: bool = False
    sent: bool = False  # the scene received the chunk (a one-action chunk it rejected is still its action)

    @property
    def refused(self) -> bool:
        """Nothing took effect: the check refused the chunk, or the scene rejected a per-control chunk's first action."""
        return bool(self.problem) and not self.executed and not (self.one_action and self.sent)


@dataclass
class ActionEvidence:
    """A policy trial's evidence (event ``action_evidence``): accepted chunks, executed prefixes, first success."""

    action_decisions: int = 0  # accepted chunks (a stop-only answer or a refused chunk is none)
    executed_prefixes: list[int] = field(default_factory=list)  # actions executed per accepted chunk, in order
    first_success: tuple[int | None, int] | None = None  # (control step, call index) where success completed

    def accepted(self, run: ChunkRun, status: simp.SuccessStatus, call: int) -> None:
        """Count a chunk the scene took; the first completed success names its control step and call."""
        self.action_decisions += 1
        self.executed_prefixes.append(run.executed)
        if status.achieved and self.first_success is None:
            self.first_success = (status.achieved_step, call)

    def figures(self, budgets: Budgets, *, policy_calls: int, controls: int) -> dict[str, Any]:
        """The event's data: the track's identity and budgets beside the trial's counts."""
        first = self.first_success
        return {"identity": budgets.identity, "track": budgets.track, "policy_calls": policy_calls,
                "action_decisions": self.action_decisions, "executed_prefixes": self.executed_prefixes,
                "controls": controls, "decision_calls": budgets.decision_calls, "action_prefix": budgets.action_prefix,
                "first_success_control": first[0] if first else None,
                "first_success_call": first[1] if first else None}


def executable_prefix(chunk: list[list[float]], prefix: int | None) -> list[list[float]]:
    """The actions a track lets run: the first ``prefix`` (K) of the chunk, or all of it."""
    return chunk[:prefix] if prefix else chunk


async def run_chunk(sim: Simulator, spec: simp.TaskSpec, chunk: list[list[float]], prefix: int | None, *,
                    one_action: bool = False) -> ChunkRun:
    """Check the chunk, then execute its prefix one control step per action, or (``one_action``) the
    whole chunk as one environment action (see the module docs)."""
    rows = chunk if one_action else executable_prefix(chunk, prefix)
    run = ChunkRun(requested=len(chunk), executable=len(rows), one_action=one_action)
    problem = check_actions(chunk, spec)
    if problem:
        run.stopped, run.problem = "invalid_action", problem
        return run
    if one_action:
        return await _run_one_action(sim, run, rows)
    for row in rows:
        result = await step(sim, [row])
        if result.stopped == "invalid_action":
            run.stopped = "invalid_action"
            run.problem = result.error.detail if result.error else "the simulator rejected the action"
            break
        run.executed += result.applied
        run.controls += result.applied
        if result.applied == 0:
            run.stopped = "trial_budget"
            break
        run.status = await sim.success()
        if run.status.achieved:
            run.stopped = "success"
            break
        if result.stopped == "trial_budget" or result.steps_left == 0:
            run.stopped = "trial_budget"
            break
    return run


async def _run_one_action(sim: Simulator, run: ChunkRun, rows: list[list[float]]) -> ChunkRun:
    result = await step(sim, rows)
    run.sent, run.controls = True, result.applied
    if result.stopped == "invalid_action":
        run.stopped = "invalid_action"
        run.problem = result.error.detail if result.error else "the scene rejected the action"
    else:
        run.executed = len(rows)
        if result.stopped == "trial_budget" or result.steps_left == 0:
            run.stopped = "trial_budget"
    run.status = await sim.success()
    if run.status.achieved and run.stopped == "done":
        run.stopped = "success"
    return run


async def step(sim: Simulator, rows: list[list[float]]) -> simp.StepResult:
    """One simulator Step (the robot endpoint's message, sent on the control endpoint)."""
    return (await sim.ask(simp.Step(actions=rows), simp.StepResult, SIM_DEADLINE + len(rows))).message
