"""The trusted evaluation phase: five hidden kitchens, one trial each, no reset.

``EvaluationSim`` answers the robot subset of the simulator protocol (``GetSpec``, ``GetState``,
``Observe``, ``Step``; ``Reset`` refused) for the current trial's hidden kitchen, and two phase
operations: ``finish_trial()`` ends the current trial (RoboCasa's predicate held for the success
interval at some step of it decides it; the participant is not told), ``next_trial()`` opens the next
kitchen once the current one is finished. A trial also ends at ``trial_actions`` actions; a batch holds
1..``batch_max`` actions within what the trial has left or is refused whole; trials never opened are
failures. Every answer is what the participant sees, and none of it names the kitchen: the spec's
task id is the task's, the only position it learns is "trial k of n". ``visible`` keeps each answer
(JSON, and its blobs), so a test can search everything the participant was given.

The committed evidence (``EvaluationRecord``) holds every applied row of every trial and the trusted
side's own digests of each kitchen's initial and final physics state; the verifier replays each trial
from the revealed plan and must reach the same states (verify.py). The hidden plan's seeds are not in
it: only the plan's commitment.
"""

from __future__ import annotations

import hashlib
import time
from typing import Literal

import msgspec

from roboswe.protocol import Message
from roboswe.protocol import sim as simp
from roboswe.protocol.control import Error
from roboswe.sim.physics_state import fingerprint_bytes, snapshot

from ..manifest import RleTask
from .development import KitchenScene, privileged_keys
from .plan import HiddenPlan
from .rules import batch_refusal

TrialEnd = Literal["finish_trial", "actions", "unreached"]
EVALUATION = "evaluation.json"


class TrialRecord(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    ended: TrialEnd
    rows: list[list[float]] = []
    success: bool = False  # the live simulator's word; the verifier's replay decides
    achieved_step: int | None = None
    initial_sha256: str = ""  # physics state at the trial's start, as the trusted side built it
    final_sha256: str = ""


class EvaluationRecord(msgspec.Struct, frozen=True, kw_only=True):
    task: str
    level: str
    plan_commitment: str
    trials: list[TrialRecord]
    privileged: list[str] = []  # the priv_* keys the participant could read (L3)


def state_sha256(scene: KitchenScene) -> str:
    return hashlib.sha256(fingerprint_bytes(snapshot(scene.backend.data))).hexdigest()


class EvaluationSim:
    """The evaluation simulator for one task on one hidden plan (trusted side; the plan never leaves it)."""

    def __init__(self, task: RleTask, plan: HiddenPlan):
        self.task, self.plan, self.rules = task, plan, task.kitchen
        self.trials: list[TrialRecord] = []
        self.visible: list[bytes] = []  # every answer the participant got, encoded as the wire carries it
        self.scene: KitchenScene | None = None
        self._rows: list[list[float]] = []
        self._finished = True
        self.privileged: list[str] = []
        self._open(0)

    # --- the trial lifecycle -----------------------------------------------------------------

    def _open(self, index: int) -> None:
        if self.scene is not None:
            self.scene.close()
        kitchen = self.plan.kitchens[index]
        self.scene = KitchenScene(self.task, steps=self.rules.trial_actions, kitchen=kitchen)
        self.scene.load(kitchen.seed)
        self.index, self._rows, self._finished = index, [], False
        self._initial = state_sha256(self.scene)
        self.privileged = sorted(set(self.privileged) | set(privileged_keys(self.scene.state_keys)))

    def _finish(self, ended: TrialEnd) -> None:
        record = self.scene.backend.success()
        self.trials.append(TrialRecord(index=self.index, ended=ended, rows=self._rows, success=record.achieved,
                                       achieved_step=record.achieved_step, initial_sha256=self._initial,
                                       final_sha256=state_sha256(self.scene)))
        self._finished = True

    def finish_trial(self) -> str:
        if self._finished:
            return self._seen(f"trial {self.index + 1} of {self.rules.trials} is already finished; call next_trial()")
        self._finish("finish_trial")
        return self._seen(f"trial {self.index + 1} of {self.rules.trials} finished after {len(self._rows)} actions")

    def next_trial(self) -> str:
        if not self._finished:
            return self._seen(f"trial {self.index + 1} is still open; call finish_trial() first")
        if self.index + 1 >= self.rules.trials:
            return self._seen(f"all {self.rules.trials} trials are done; the evaluation phase is finished")
        self._open(self.index + 1)
        return self._seen(f"trial {self.index + 1} of {self.rules.trials} is open: a kitchen you have not seen")

    def close(self) -> EvaluationRecord:
        """End the phase: an open trial ends as it stands, trials never opened are failures."""
        if not self._finished:
            self._finish("finish_trial")
        done = {t.index for t in self.trials}
        self.trials += [TrialRecord(index=i, ended="unreached") for i in range(self.rules.trials) if i not in done]
        if self.scene is not None:
            self.scene.close()
            self.scene = None
        return EvaluationRecord(task=self.task.id, level=self.rules.level, plan_commitment=self.plan.commitment,
                                trials=sorted(self.trials, key=lambda t: t.index), privileged=self.privileged)

    # --- the robot subset, as the participant sees it ----------------------------------------

    def _seen(self, answer):
        """Keep what the participant receives (a message, its blobs, or an operation's text) and pass it on."""
        if isinstance(answer, str):
            self.visible.append(answer.encode())
        else:  # the message as JSON (searchable), its blobs (pixels) as they go out
            reply, blobs = answer
            self.visible.append(msgspec.json.encode(reply))
            self.visible.extend(bytes(b) for b in blobs)
        return answer

    def answer(self, message: Message) -> tuple[Message, list[bytes]]:
        return self._seen(self._answer(message))

    def _answer(self, message: Message) -> tuple[Message, list[bytes]]:
        match message:
            case simp.GetSpec():
                return self.spec(), []
            case simp.GetState():
                return self.state(), []
            case simp.Observe(depth=depth):
                started = time.monotonic()
                images, blobs = self.scene.observe(self.scene.backend.control_step, depth)
                return simp.Observation(control_step=self.scene.backend.control_step, sim_time=self.scene.backend.sim_time,
                                        images=images, state=self.state(), render_seconds=time.monotonic() - started), blobs
            case simp.Step(actions=actions):
                return self.step(actions), []
            case simp.Reset():
                return Error(code="reset", detail="there is no reset in the evaluation phase"), []
        return Error(code="refused", detail=f"the evaluation simulator does not accept {type(message).__name__}"), []

    @property
    def actions_left(self) -> int:
        return 0 if self._finished else self.rules.trial_actions - len(self._rows)

    def spec(self) -> simp.TaskSpec:
        action, r = self.scene.action, self.rules
        limits = simp.Limits(steps=r.trial_actions, seconds=r.evaluate_seconds)
        guide = (f"Evaluation phase: trial {self.index + 1} of {r.trials}, in a kitchen you have not seen; at most "
                 f"{r.trial_actions} actions per trial, batches of 1..{r.batch_max}, no reset. finish_trial() ends this "
                 f"trial, next_trial() opens the next; trials never opened count as failures.")
        return simp.TaskSpec(
            task_id=self.task.id, instruction=self.task.instruction.strip() + "\n\n" + guide,
            privileged=self.scene.privileged, action_dim=action.dim, action_low=action.low, action_high=action.high,
            action=action, control_hz=self.scene.control_hz, control_dt=1 / self.scene.control_hz,
            cameras=self.scene.cameras, state_keys=[*self.scene.state_keys, "actions_left"], script_limits=limits,
            trial_limits=limits)

    def state(self) -> simp.RobotState:
        b = self.scene.backend
        return simp.RobotState(control_step=b.control_step, sim_time=b.sim_time, steps_left=self.actions_left,
                               values={**self.scene.values(b.control_step), "actions_left": [float(self.actions_left)]})

    def step(self, actions: list[list[float]]) -> simp.StepResult | Error:
        if self._finished:
            return Error(code="limit_reached", detail=f"trial {self.index + 1} is finished; call next_trial()")
        if (why := batch_refusal(len(actions), self.actions_left, self.rules.batch_max)) is not None:
            return Error(code="invalid_action" if len(actions) > self.rules.batch_max else "limit_reached", detail=why)
        low, high = self.scene.action.low, self.scene.action.high
        for i, row in enumerate(actions):
            if len(row) != len(low) or any(not lo <= v <= hi for v, lo, hi in zip(row, low, high)):
                return Error(code="invalid_action", detail=f"row {i} is outside the action bounds; nothing was applied")
        for row in actions:
            self.scene.step(row)
            self._rows.append([float(v) for v in row])
        if self.actions_left == 0:
            self._finish("actions")
        b = self.scene.backend
        return simp.StepResult(applied=len(actions), control_step=b.control_step, sim_time=b.sim_time,
                               steps_left=self.actions_left, stopped="done" if not self._finished else "trial_budget",
                               values=self.state().values)
