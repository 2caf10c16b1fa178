"""The trusted side of one fresh agent's attempt at the held-out composite: it writes the stage records.

``TransferTrialSim`` is the simulator actor's phase during a ``LoadEvaluation`` that names an ``attempt``
(protocol/sim.py; built by ``open_trial`` from the run's salt, on the simulator's side: agent *k* and
control agent *k* get hidden kitchen *k*). It answers the robot subset of the simulator protocol
(``GetSpec``, ``GetState``, ``Observe``, ``Step``; ``Reset`` refused: roboswe/rle/scene.py's
``answer_robot``) for that one kitchen, and the participant's ``finish_trial``, which the coordinator
forwards as ``FinishTrial`` and which ends the attempt (``next_trial`` is answered: there is none).
After every applied action row it evaluates the composite's stages (stages.py) on its own env and
records each instant the vector changes; the vector at reset is recorded before the agent acts. A
trial also ends at the manifest's ``agent_actions`` or ``agent_seconds``. ``EndAttempt`` ends it and
answers its ``StageRecord``. The agent is never told the stages, the kitchen or the seed: its spec's
task id is ``held-out``, its instruction the composite's and what its workspace was given.
"""

from __future__ import annotations

import time
from typing import Literal, get_args

import msgspec

from roboswe.protocol import Message
from roboswe.protocol import sim as simp
from roboswe.protocol.control import Error

from ..kitchen.evaluation import observation, refused_batch, state_sha256
from ..kitchen.plan import HiddenKitchen
from ..manifest import RleTask, task_digest
from ..scene import answer_robot, phase_loaded
from ..seeds import Salt
from .plan import hidden_plan
from .scene import CompositeScene

Arm = Literal["harness", "control"]
TrialEnd = Literal["finish_trial", "actions", "wall_time", "returned", "unreached"]
TRANSFER = "transfer.json"
SPEC_TASK_ID = "held-out"  # what the agent's spec calls its task (never the composite's or the kitchen's name)
STAGE_RECORD = "stage_record.json"  # EndAttempt's one file: the attempt's StageRecord
TASK_RECORD_FAMILY = "rle-transfer-trial"
"""The ``family`` of a fresh agent's task record (in the run database: how its attempt ended, no kitchen)."""


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


def attempt_kitchen(task: RleTask, attempt: str) -> tuple[Arm, int]:
    """``agent_k`` / ``control_k`` -> its arm and its kitchen's index in the hidden plan (k - 1)."""
    prefix, _, k = attempt.rpartition("_")
    arm = {"agent": "harness", "control": "control"}.get(prefix)
    if arm is None or not k.isdigit() or not 1 <= int(k) <= task.transfer.agents:
        raise ValueError(f"{task.id}: no attempt {attempt!r}; they are agent_1..agent_{task.transfer.agents} "
                         f"and control_1..control_{task.transfer.agents}")
    return arm, int(k) - 1


def open_trial(task: RleTask, salt: Salt, attempt: str, handoff_digest: str) -> TransferTrialSim:
    """``scene.EVALUATIONS["transfer"]``: one fresh agent's trial, its kitchen from the plan the salt draws."""
    arm, k = attempt_kitchen(task, attempt)
    plan = hidden_plan(task, salt)
    return TransferTrialSim(task, plan.kitchens[k], agent=attempt, arm=arm, handoff_digest=handoff_digest,
                            plan_commitment=plan.commitment)


class TransferTrialSim:
    """One fresh agent's trial in one hidden kitchen (trusted side; the kitchen never leaves it)."""

    def __init__(self, task: RleTask, kitchen: HiddenKitchen, *, agent: str, arm: Arm, handoff_digest: str,
                 plan_commitment: str = ""):
        assert arm in get_args(Arm)
        self.task, self.rules, self.kitchen = task, task.transfer, kitchen
        self.agent, self.arm, self.handoff, self.plan_commitment = agent, arm, handoff_digest, plan_commitment
        self.scene = CompositeScene(self.rules.heldout, steps=self.rules.agent_actions, kitchen=kitchen)
        self.scene.load(kitchen.seed)
        self._rows: list[tuple[float, ...]] = []
        self._reset = self._last = self.scene.stages()
        self._changes: list[StageChange] = []
        self._success = all(self._reset)
        self._initial = state_sha256(self.scene)
        self._ended: TrialEnd | None = None
        self._started = time.monotonic()
        self.record: StageRecord | None = None  # set when the attempt has ended (EndAttempt)

    def instruction(self) -> str:
        """What the agent is told: its task, its caps, and whether its workspace holds a harness (nothing else)."""
        r = self.rules
        holds = (f"Your workspace holds {r.harness_dir}/, left by an earlier agent (read {r.manual} first)."
                 if self.arm == "harness" else "Your workspace is empty.")
        return (f"{r.heldout.instruction.strip()}\n\nOne attempt in a kitchen you have not seen: scripts you exec in the "
                f"sandbox drive the robot through `import robot`: at most {r.agent_actions} actions in batches of "
                f"1..{r.batch_max}, {r.agent_seconds:.0f} s, no reset. finish_trial() ends the attempt. {holds}")

    @property
    def actions_left(self) -> int:
        return 0 if self._ended else self.rules.agent_actions - len(self._rows)

    def answer(self, message: Message) -> tuple[Message, list[bytes]]:
        if self.record is not None:
            return Error(code="refused", detail="the attempt has ended"), []
        if self._ended is None and time.monotonic() - self._started > self.rules.agent_seconds:
            self._ended = "wall_time"
        return answer_robot(self, message, "the transfer trial")

    def observe(self, depth: bool) -> tuple[simp.Observation, list[bytes]]:
        return observation(self, depth)

    def reset(self) -> Error:
        return Error(code="reset", detail="there is no reset in a transfer trial")

    def spec(self) -> simp.TaskSpec:
        action, r = self.scene.action, self.rules
        limits = simp.Limits(steps=r.agent_actions, seconds=r.agent_seconds)
        return simp.TaskSpec(
            task_id=SPEC_TASK_ID, instruction=self.instruction(), privileged=False, action_dim=action.dim,
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

    # --- the control endpoint's view (the simulator actor during a LoadEvaluation with an attempt) ------

    def move_trial(self, message: simp.FinishTrial | simp.NextTrial) -> simp.EvaluationTrial | Error:
        """The participant's finish_trial (the attempt ends) or next_trial (there is none), forwarded."""
        if self.record is not None:
            return Error(code="refused", detail="the attempt has ended")
        if isinstance(message, simp.NextTrial):
            text = "there is no next trial: this attempt is your only one"
        else:
            self._ended = self._ended or "finish_trial"
            text = f"the attempt is over after {len(self._rows)} actions"
        return simp.EvaluationTrial(trial=1, trials=1, open=self._ended is None, text=text)

    def loaded(self) -> simp.Loaded:
        return phase_loaded(self.task, self.spec())  # nothing of the plan

    def success(self) -> simp.SuccessStatus:
        """Never achieved (the agent is not told); ``control_step`` is the actions applied (the trial's step budget)."""
        n = len(self._rows)
        return simp.SuccessStatus(achieved=False, interval=1, achieved_step=None, first_held_step=None, current_run=0,
                                  longest_run=0, control_step=n, sim_time=n / self.scene.control_hz)

    def task_record(self) -> simp.TaskRecord:
        return simp.TaskRecord(data={"family": TASK_RECORD_FAMILY, "task": self.task.id, "attempt": self.agent,
                                     "ended": self._ended or "open", "actions": len(self._rows)})

    def no_states(self) -> simp.RecordedStates:
        return simp.RecordedStates(fingerprint_digest=task_digest(self.task), seed=0, count=0, fields={})

    def end_attempt(self) -> tuple[simp.TaskRecord | Error, list[bytes]]:
        """EndAttempt: the attempt ends (``close``); its StageRecord is the reply's one file, the plan's commitment beside it."""
        if self.record is not None:
            return Error(code="refused", detail=f"{self.agent}: the attempt has already ended"), []
        record = msgspec.json.encode(self.close())
        return simp.TaskRecord(data={"task": self.task.id, "plan_commitment": self.plan_commitment},
                               files={STAGE_RECORD: 0}), [record]

    def close(self) -> StageRecord:
        """End the trial once (an agent that returned without finish_trial ends it as it stands) and give its record."""
        if self.record is not None:
            return self.record
        self.record = StageRecord(
            agent=self.agent, arm=self.arm, kitchen=self.kitchen.index, stages=self.rules.heldout.stages,
            ended=self._ended or "returned", reset=self._reset, changes=tuple(self._changes), success=self._success,
            handoff_digest=self.handoff, rows=tuple(self._rows), initial_sha256=self._initial,
            final_sha256=state_sha256(self.scene), seconds=round(time.monotonic() - self._started, 3))
        self.scene.close()
        return self.record
