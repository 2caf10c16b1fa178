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

A replay (roboswe/evaluation/verify.py) re-parses the recorded operation, takes the first
``executed`` actions of its chunk and steps them in one request: same actions, same physics.

To offer another family's action tools (e.g. a painting robot's flange moves), subclass
``ActionOperation`` in protocol/participant.py with its tag and fields and a ``chunk()`` that
maps them to action rows, add it to the operation union and a tool set in ``INTERFACES``;
this module, the records and the replay then handle it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from roboswe.bridge.door import check_actions
from roboswe.evaluation.peers import SIM_DEADLINE, Simulator
from roboswe.protocol import sim as simp


@dataclass
class ChunkRun:
    """What happened to one chunk: refused (``problem``), or how far it ran and why it stopped."""

    requested: int
    executable: int
    executed: int = 0
    stopped: str = "done"  # done | success | trial_budget | invalid_action
    problem: str = ""  # the refusal or the simulator's rejection, naming the component
    status: simp.SuccessStatus | None = None


def executable_prefix(chunk: list[list[float]], prefix: int | None) -> list[list[float]]:
    """The actions a track lets run: the first ``prefix`` (K) of the chunk, or all of it."""
    return chunk[:prefix] if prefix else chunk


async def run_chunk(sim: Simulator, spec: simp.TaskSpec, chunk: list[list[float]], prefix: int | None) -> ChunkRun:
    """Check the chunk, then execute its prefix one control step per action (see the module docs)."""
    rows = executable_prefix(chunk, prefix)
    run = ChunkRun(requested=len(chunk), executable=len(rows))
    problem = check_actions(chunk, spec)
    if problem:
        run.stopped, run.problem = "invalid_action", problem
        return run
    for row in rows:
        result = await step(sim, [row])
        if result.stopped == "invalid_action":
            run.stopped = "invalid_action"
            run.problem = result.error.detail if result.error else "the simulator rejected the action"
            break
        run.executed += result.applied
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


async def step(sim: Simulator, rows: list[list[float]]) -> simp.StepResult:
    """One simulator Step (the robot endpoint's message, sent on the control endpoint)."""
    return (await sim.ask(simp.Step(actions=rows), simp.StepResult, SIM_DEADLINE + len(rows))).message
