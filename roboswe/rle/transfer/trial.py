"""The trusted side of one fresh agent's attempt at the held-out composite: it writes the stage records.

``TransferTrialSim`` answers the robot subset of the simulator protocol (``GetSpec``, ``GetState``,
``Observe``, ``Step``; ``Reset`` refused: the trial is open when the agent starts and it has one) for
one hidden kitchen, and ``finish_trial()``, which ends the attempt. After every applied action row it
evaluates the composite's stages (stages.py) on its own env and records each instant the vector
changes; the vector at reset is recorded before the agent acts. A trial also ends at the manifest's
``agent_actions`` or ``agent_seconds``. The agent is never told the stages, the kitchen or the seed:
its spec's task id is ``held-out``, its instruction the composite's. ``visible`` keeps every answer it
got (as JSON), which the runner writes as the agent's messages.
"""

from __future__ import annotations

import time
from typing import Literal

import msgspec

from roboswe.protocol import Message
from roboswe.protocol import sim as simp
from roboswe.protocol.control import Error

from ..kitchen.evaluation import refused_batch, state_sha256
from ..kitchen.plan import HiddenKitchen
from ..manifest import RleTask
from .scene import CompositeScene

Arm = Literal["harness", "control"]
TrialEnd = Literal["finish_trial", "actions", "wall_time", "returned", "unreached"]
TRANSFER = "transfer.json"
SPEC_TASK_ID = "held-out"  # what the agent's spec calls its task (never the composite's or the kitchen's name)


class StageChange(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    step: int  # actions applied when the vector was read
    stages: tuple[bool, ...]


class StageRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One fresh agent's trial as the trusted side recorded it."""

    agent: str  # agent_k (with the harness) or control_k (an empty workspace)
    arm: Arm
    kitchen: int  # the hidden plan's kitchen index
    stages: tuple[str, ...]
    ended: TrialEnd
    reset: tuple[bool, ...] = ()
    changes: tuple[StageChange, ...] = ()  # every instant the stage vector changed, in order
    success: bool = False  # every stage held at one instant (the trusted side's word; the verifier re-derives it)
    handoff_digest: str = ""  # the restored workspace's digest: the sealed harness's, or "" (an empty workspace)
    rows: tuple[tuple[float, ...], ...] = ()
    initial_sha256: str = ""
    final_sha256: str = ""
    seconds: float = 0.0
    error: str | None = None  # what the agent's own code raised, if it did (its failure, recorded)


class TransferRecord(msgspec.Struct, frozen=True, kw_only=True):
    task: str
    heldout: str
    plan_commitment: str
    retain: Literal["none"] = "none"  # fresh agents keep nothing of the development or of each other
    trials: tuple[StageRecord, ...]


def best_vector(record: StageRecord) -> tuple[bool, ...]:
    """The best whole stage vector seen at one instant (the first of the highest count), reset included."""
    best = record.reset
    for change in record.changes:
        if sum(change.stages) > sum(best):
            best = change.stages
    return best


class TransferTrialSim:
    """One fresh agent's trial in one hidden kitchen (trusted side; the kitchen never leaves it)."""

    def __init__(self, task: RleTask, kitchen: HiddenKitchen, *, agent: str, arm: Arm, handoff_digest: str):
        self.task, self.rules, self.kitchen = task, task.transfer, kitchen
        self.agent, self.arm, self.handoff = agent, arm, handoff_digest
        self.scene = CompositeScene(self.rules.heldout, steps=self.rules.agent_actions, kitchen=kitchen)
        self.scene.load(kitchen.seed)
        self.visible: list[str] = []
        self._rows: list[tuple[float, ...]] = []
        self._reset = self._last = self.scene.stages()
        self._changes: list[StageChange] = []
        self._success = all(self._reset)
        self._initial = state_sha256(self.scene)
        self._ended: TrialEnd | None = None
        self._started = time.monotonic()

    def brief(self, workspace_files: list[str]) -> str:
        """The agent's opening message: its task, its caps, and what its workspace holds (nothing else)."""
        r = self.rules
        holds = (f"Your workspace holds {r.harness_dir}/ (read {r.manual} first): {workspace_files}." if workspace_files
                 else "Your workspace is empty.")
        return self._seen(f"{r.heldout.instruction.strip()}\n\nOne attempt in a kitchen you have not seen, through "
                          f"`import robot`: at most {r.agent_actions} actions in batches of 1..{r.batch_max}, "
                          f"{r.agent_seconds:.0f} s, no reset. finish_trial() ends the attempt. {holds}")

    def _seen(self, answer):
        if isinstance(answer, str):
            self.visible.append(answer)
        else:
            self.visible.append(msgspec.json.encode(answer[0]).decode())
        return answer

    @property
    def actions_left(self) -> int:
        return 0 if self._ended else self.rules.agent_actions - len(self._rows)

    def answer(self, message: Message) -> tuple[Message, list[bytes]]:
        if self._ended is None and time.monotonic() - self._started > self.rules.agent_seconds:
            self._ended = "wall_time"
        return self._seen(self._answer(message))

    def _answer(self, message: Message) -> tuple[Message, list[bytes]]:
        match message:
            case simp.GetSpec():
                return self.spec(), []
            case simp.GetState():
                return self.state(), []
            case simp.Observe(depth=depth):
                b = self.scene.backend
                images, blobs = self.scene.observe(b.control_step, depth)
                return simp.Observation(control_step=b.control_step, sim_time=b.sim_time, images=images,
                                        state=self.state(), render_seconds=0.0), blobs
            case simp.Step(actions=actions):
                return self.step(actions), []
            case simp.Reset():
                return Error(code="reset", detail="there is no reset in a transfer trial"), []
        return Error(code="refused", detail=f"the trial does not accept {type(message).__name__}"), []

    def spec(self) -> simp.TaskSpec:
        action, r = self.scene.action, self.rules
        limits = simp.Limits(steps=r.agent_actions, seconds=r.agent_seconds)
        return simp.TaskSpec(
            task_id=SPEC_TASK_ID, instruction=r.heldout.instruction.strip(), privileged=False, action_dim=action.dim,
            action_low=action.low, action_high=action.high, action=action, control_hz=self.scene.control_hz,
            control_dt=1 / self.scene.control_hz, cameras=self.scene.cameras,
            state_keys=[*self.scene.state_keys, "actions_left"], script_limits=limits, trial_limits=limits)

    def state(self) -> simp.RobotState:
        b = self.scene.backend
        return simp.RobotState(control_step=b.control_step, sim_time=b.sim_time, steps_left=self.actions_left,
                               values={**self.scene.values(b.control_step), "actions_left": [float(self.actions_left)]})

    def step(self, actions: list[list[float]]) -> simp.StepResult | Error:
        if self._ended is not None:
            return Error(code="limit_reached", detail=f"the attempt has ended ({self._ended})")
        if (refused := refused_batch(actions, self.actions_left, self.rules.batch_max, self.scene.action)) is not None:
            return refused
        for row in actions:
            self.scene.step(row)
            self._rows.append(tuple(float(v) for v in row))
            self._read_stages()
        if self.actions_left == 0:
            self._ended = "actions"
        b = self.scene.backend
        return simp.StepResult(applied=len(actions), control_step=b.control_step, sim_time=b.sim_time,
                               steps_left=self.actions_left, stopped="done" if self._ended is None else "trial_budget",
                               values=self.state().values)

    def _read_stages(self) -> None:
        now = self.scene.stages()
        if now != self._last:
            self._changes.append(StageChange(step=len(self._rows), stages=now))
            self._last = now
        self._success = self._success or all(now)

    def finish_trial(self) -> str:
        if self._ended is None:
            self._ended = "finish_trial"
        return self._seen(f"the attempt is over after {len(self._rows)} actions")

    def close(self, error: str | None = None) -> StageRecord:
        """End the trial (an agent that returned without finish_trial ends it as it stands) and give its record."""
        record = StageRecord(
            agent=self.agent, arm=self.arm, kitchen=self.kitchen.index, stages=self.rules.heldout.stages,
            ended=self._ended or "returned", reset=self._reset, changes=tuple(self._changes), success=self._success,
            handoff_digest=self.handoff, rows=tuple(self._rows), initial_sha256=self._initial,
            final_sha256=state_sha256(self.scene), seconds=round(time.monotonic() - self._started, 3), error=error)
        self.scene.close()
        return record
