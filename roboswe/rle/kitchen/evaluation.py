"""The trusted evaluation phase: five hidden kitchens, one trial each, no reset.

``EvaluationSim`` is the simulator actor's phase during a ``LoadEvaluation`` (protocol/sim.py; built by
``open_evaluation`` from the run's salt, on the simulator's side). It answers the robot subset of the
simulator protocol (``GetSpec``, ``GetState``, ``Observe``, ``Step``; ``Reset`` refused: roboswe/rle/scene.py's
``answer_robot``) for the current trial's hidden kitchen, and the participant's two phase operations, which
the coordinator forwards as ``FinishTrial`` and ``NextTrial``: ``finish_trial()`` ends the current trial
(RoboCasa's predicate held for the success interval at some step of it decides it; the participant is not
told), ``next_trial()`` opens the next kitchen once the current one is finished. ``EndAttempt`` ends the
phase and answers ``evaluation.json``. A trial also ends at ``trial_actions`` actions; a batch holds
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

from ..manifest import RleTask, task_digest
from ..scene import answer_robot, phase_loaded
from ..seeds import Salt
from .development import KitchenScene, privileged_keys
from .plan import HiddenPlan, hidden_plan
from .rules import batch_refusal

TrialEnd = Literal["finish_trial", "actions", "unreached"]
EVALUATION = "evaluation.json"
TASK_RECORD_FAMILY = "rle-evaluation"
"""The ``family`` of the evaluation trial's task record (in the run database: each trial's end and actions, no plan)."""


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


def observation(sim, depth: bool) -> tuple[simp.Observation, list[bytes]]:
    """A free observation in a hidden kitchen (``sim``: a phase's simulator with ``scene`` and ``state()``): the
    cameras at the current control step, the state beside them."""
    started, b = time.monotonic(), sim.scene.backend
    images, blobs = sim.scene.observe(b.control_step, depth)
    return simp.Observation(control_step=b.control_step, sim_time=b.sim_time, images=images, state=sim.state(),
                            render_seconds=time.monotonic() - started), blobs


def refused_batch(actions: list[list[float]], allowance: int, batch_max: int, action) -> Error | None:
    """The refusal of a batch of actions, whole (nothing applied, nothing charged), or None: its size
    against ``batch_max`` and the ``allowance`` left, then every row against ``action``'s bounds."""
    if (why := batch_refusal(len(actions), allowance, batch_max)) is not None:
        return Error(code="invalid_action" if len(actions) > batch_max else "limit_reached", detail=why)
    low, high = action.low, action.high
    for i, row in enumerate(actions):
        if len(row) != len(low) or any(not lo <= v <= hi for v, lo, hi in zip(row, low, high)):
            return Error(code="invalid_action", detail=f"row {i} is outside the action bounds; nothing was applied")
    return None


def open_evaluation(task: RleTask, salt: Salt) -> EvaluationSim:
    """``scene.EVALUATIONS["kitchen"]``: the evaluation phase on the plan the salt draws."""
    return EvaluationSim(task, hidden_plan(task, salt))


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
        self.applied = 0  # actions applied over every trial (the phase's control step, as the coordinator sees it)
        self.record: EvaluationRecord | None = None  # set when the phase has ended
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
        """End the phase (once; again: the same record): an open trial ends as it stands, trials never opened
        are failures."""
        if self.record is not None:
            return self.record
        if not self._finished:
            self._finish("finish_trial")
        done = {t.index for t in self.trials}
        self.trials += [TrialRecord(index=i, ended="unreached") for i in range(self.rules.trials) if i not in done]
        if self.scene is not None:
            self.scene.close()
            self.scene = None
        self.record = EvaluationRecord(task=self.task.id, level=self.rules.level, plan_commitment=self.plan.commitment,
                                       trials=sorted(self.trials, key=lambda t: t.index), privileged=self.privileged)
        return self.record

    # --- the control endpoint's view (the simulator actor during a LoadEvaluation) -------------

    def move_trial(self, message: simp.FinishTrial | simp.NextTrial) -> simp.EvaluationTrial | Error:
        """The participant's finish_trial / next_trial, forwarded by the coordinator."""
        if self.record is not None:
            return Error(code="refused", detail="the evaluation phase has ended")
        text = self.finish_trial() if isinstance(message, simp.FinishTrial) else self.next_trial()
        return simp.EvaluationTrial(trial=self.index + 1, trials=self.rules.trials, open=not self._finished, text=text)

    def loaded(self) -> simp.Loaded:
        return phase_loaded(self.task, self.spec())  # nothing of the plan

    def success(self) -> simp.SuccessStatus:
        """Never achieved (the participant is not told how a trial went); ``control_step`` is the actions applied
        over every trial, so the coordinator's step budget is the phase's trials × trial_actions."""
        return simp.SuccessStatus(achieved=False, interval=1, achieved_step=None, first_held_step=None, current_run=0,
                                  longest_run=0, control_step=self.applied, sim_time=self.applied / self.task_hz)

    @property
    def task_hz(self) -> int:
        return self.scene.control_hz if self.scene is not None else 20

    def task_record(self) -> simp.TaskRecord:
        """How each trial so far ended and how many actions it took (the run database's; nothing of the plan)."""
        trials = [{"trial": t.index + 1, "ended": t.ended, "actions": len(t.rows)} for t in self.trials]
        return simp.TaskRecord(data={"family": TASK_RECORD_FAMILY, "task": self.task.id, "trials": trials,
                                     "actions": self.applied})

    def no_states(self) -> simp.RecordedStates:
        return simp.RecordedStates(fingerprint_digest=task_digest(self.task), seed=0, count=0, fields={})

    def end_attempt(self) -> tuple[simp.TaskRecord | Error, list[bytes]]:
        """EndAttempt: the phase ends (``close``) and its record is the run directory's evaluation.json."""
        if self.record is not None:
            return Error(code="refused", detail=f"{self.task.id}: the evaluation phase has already ended"), []
        record = msgspec.json.encode(self.close())
        return simp.TaskRecord(data={"task": self.task.id}, files={EVALUATION: 0}), [record]

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
        if self.record is not None:
            return self._seen((Error(code="refused", detail="the evaluation phase has ended"), []))
        return self._seen(answer_robot(self, message, "the evaluation simulator"))

    def observe(self, depth: bool) -> tuple[simp.Observation, list[bytes]]:
        return observation(self, depth)

    def reset(self) -> Error:
        return Error(code="reset", detail="there is no reset in the evaluation phase")

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
        if (refused := refused_batch(actions, self.actions_left, self.rules.batch_max, self.scene.action)) is not None:
            return refused
        for row in actions:
            self.scene.step(row)
            self._rows.append([float(v) for v in row])
            self.applied += 1
        if self.actions_left == 0:
            self._finish("actions")
        b = self.scene.backend
        return simp.StepResult(applied=len(actions), control_step=b.control_step, sim_time=b.sim_time,
                               steps_left=self.actions_left, stopped="done" if not self._finished else "trial_budget",
                               values=self.state().values)
