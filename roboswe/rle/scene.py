"""The RLE-Bench development simulator, family-neutral: the ledger and budgets here, the scene from the family.

A family supplies its development SCENE (``DevelopmentScene``): what the robot does in one charged
control step, what the camera shows, what the participant may read, and how a public seed is loaded.
``DevelopmentSim`` (the trusted side) wraps any scene with what every RLE task shares: the ``Ledger``
(budget: the manifest's ``charged_steps``), the reset budget (the manifest's ``resets``), the
public-seed cycle (the first scene is seed 0, each reset the next, modulo ``public_seeds``), the
participant's remaining budget in every state, and the robot subset of the simulator protocol
(protocol/sim.py: ``GetSpec``, ``GetState``, ``Observe``, ``Step``, ``Reset``). Observing is free;
``Step`` rows and ``Reset`` are charged before they run and confirmed after; a charge the budget
cannot pay is refused before anything moves. Every ledger row is appended to ``record`` as it is
written (a charge before its operation runs).

A family registers its scene by the manifest's ``development.scene`` in ``DEVELOPMENT_SCENES``
(``"module:factory"``, imported only when a task names it); the factory takes the ``RleTask`` and the
run's salt (a scene on public seeds ignores it) and returns the scene. Family 06's is ``roboswe.rle.pose.development:PoseDevelopmentScene``.

A scene with ``end_attempt`` (family 03's ``ScoredAttempt``) is itself what is scored: its session runs on
the hidden instance rather than public seeds, and ``EndAttempt`` ends it here, on the trusted side (the
scene releases, settles, scores and seals the ledger), where another family's ends in a sealed workspace.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import msgspec

from roboswe.protocol import Decoded, Message
from roboswe.protocol import sim as simp
from roboswe.protocol.control import Error

from . import diagnostic
from .ledger import BudgetExhausted, Ledger, encode_rows
from .manifest import RleTask, task_digest
from .seeds import Salt, load_salt, public_salt

SENDER = "rle-develop"
BUDGET_KEYS = ["budget_left", "resets_left"]
"""State keys every development scene's state carries after its own: what the participant has left."""

TASK_RECORD_FAMILY = "rle-development"
"""The ``family`` of a development's task record (the ledger rows, in the run database's task_record event)."""
NO_GOAL = simp.Goal()

DEVELOPMENT_SCENES: dict[str, str] = {
    "pose": "roboswe.rle.pose.development:PoseDevelopmentScene",
    "kitchen": "roboswe.rle.kitchen.development:KitchenDevelopmentScene",
    "tabletop": "roboswe.rle.tabletop.runner:tabletop_development",
    "transfer": "roboswe.rle.transfer.scene:TransferDevelopmentScene",
}
"""``development.scene`` → ``"module:factory"``: ``factory(task: RleTask, salt: Salt) -> DevelopmentScene``
(``salt``: the run's hidden salt, for a scene that is a hidden instance; a scene on public seeds ignores it)."""

EVALUATIONS: dict[str, str] = {
    "kitchen": "roboswe.rle.kitchen.evaluation:open_evaluation",
    "transfer": "roboswe.rle.transfer.trial:open_trial",
}
"""``development.scene`` → ``"module:factory"`` of a family with an evaluation phase on the simulator's side
(family 01's hidden kitchens, protocol.sim.LoadEvaluation): ``factory(task: RleTask, salt: Salt)`` returns the
phase's simulator, which answers what a DevelopmentSim answers (``answer_robot``, loaded, success, task_record,
no_states, end_attempt, close) and ``move_trial`` (FinishTrial, NextTrial). A load naming an ``attempt`` (family
02's fresh agents) calls ``factory(task, salt, attempt, handoff_digest)``: that one attempt's trial."""


class DevelopmentScene(Protocol):
    """One RLE family's development scene on public seeds. ``DevelopmentSim`` owns the ledger and the
    budgets; the scene never charges, counts resets or knows the budget."""

    control_hz: int  # charged control steps per simulated second
    action: simp.ActionSpec  # one Step row; rows outside low..high are refused before anything is charged
    cameras: list[simp.CameraInfo]
    state_keys: list[str]  # the keys of ``values()``, the scene's own (BUDGET_KEYS follow them)

    def load(self, seed: int) -> None:
        """Public development seed ``seed`` as a fresh scene (control step 0)."""

    def values(self, control_step: int) -> dict[str, list[float]]:
        """What the participant may read of the scene now (a family's labels included); free."""

    def observe(self, control_step: int, depth: bool) -> tuple[list[simp.CameraImage], list[bytes]]:
        """The cameras as the artifact will see them (blobs indexed from the images); free."""

    def step(self, row: list[float]) -> None:
        """One charged control step applying ``row`` (already within ``action``'s bounds)."""

    def guide(self) -> str:
        """What the participant is told of this scene beside the task's instruction."""

    def close(self) -> None: ...


def _factory(registry: dict[str, str], task: RleTask, what: str) -> Callable:
    target = registry.get(task.development.scene)
    if target is None:
        raise ValueError(f"{task.id}: no {what} for {task.development.scene!r}; registered: {sorted(registry)}")
    module, factory = target.split(":")
    return getattr(importlib.import_module(module), factory)


def open_scene(task: RleTask, salt: Salt | None = None) -> DevelopmentScene:
    """The development scene the task's manifest names (``DEVELOPMENT_SCENES``); ``salt`` (None: the
    public one) is for a family whose scene is a hidden instance drawn from it."""
    make: Callable[[RleTask, Salt], DevelopmentScene] = _factory(DEVELOPMENT_SCENES, task, "development scene")
    return make(task, salt if salt is not None else public_salt())


def phase_from_wire(load: simp.LoadDevelopment | simp.LoadEvaluation):
    """The simulator of a LoadDevelopment or LoadEvaluation (the simulator actor builds it on its scene thread):
    the task as protocol.sim.encode_manifest encodes it, the salt read here, on the trusted side."""
    task = msgspec.msgpack.decode(load.task, type=RleTask)
    salt = load_salt(Path(load.salt_file) if load.salt_file else None)
    if isinstance(load, simp.LoadEvaluation):
        make = _factory(EVALUATIONS, task, "evaluation phase")
        return make(task, salt) if load.attempt is None else make(task, salt, load.attempt, load.handoff_digest)
    return DevelopmentSim(task, record=Path(load.record) if load.record else None, scene=open_scene(task, salt))


def phase_loaded(task: RleTask, spec: simp.TaskSpec) -> simp.Loaded:
    """An RLE phase's Loaded: its fingerprint is the task manifest's digest (the plan's reference), nothing else."""
    digest = task_digest(task)
    fingerprint = simp.Fingerprint(digest=digest, seed=0, model_xml_sha256="", initial_state_sha256="",
                                   versions={"rle": task.protocol.version})
    return simp.Loaded(fingerprint=fingerprint, spec=spec, manifest_digest=digest)


def answer_robot(sim, message: Message, what: str) -> tuple[Message, list[bytes]]:
    """The robot subset of the simulator protocol answered by a phase's simulator (``sim``: a DevelopmentSim or a
    family's evaluation phase, with spec, state, observe, step and reset); anything else is refused."""
    match message:
        case simp.GetSpec():
            return sim.spec(), []
        case simp.GetState():
            return sim.state(), []
        case simp.Observe(depth=depth):
            return sim.observe(depth)
        case simp.Step(actions=actions) if actions:
            return sim.step(actions), []
        case simp.Step():
            return Error(code="invalid_action", detail="Step needs at least one action"), []
        case simp.Reset():
            return sim.reset(), []
    return Error(code="refused", detail=f"{what} does not accept {type(message).__name__}"), []


class DevelopmentSim:
    """The trusted side of a development phase: a family's public scene, the ledger, the budgets."""

    def __init__(self, task: RleTask, *, record: Path | None = None, scene: DevelopmentScene | None = None):
        self.task = task
        self.ledger = Ledger(task.budget.charged_steps)
        self._record, self._recorded = record, 0  # where each ledger row is appended as it is written
        self.resets = 0
        self.control_step = 0
        self.ended = False  # EndAttempt ran (a scene that is itself scored)
        self.scene = scene if scene is not None else open_scene(task)
        self._load(0)

    def close(self) -> None:
        self.scene.close()

    def _load(self, seed: int) -> None:
        self.seed, self.control_step = seed, 0
        self.scene.load(seed)

    def _charge(self, op: str, cost: int) -> None:
        """Charge the ledger and put the row on record before the operation runs."""
        self.ledger.charge(op, cost)
        self._write_rows()

    def _confirm(self, outcome: str) -> None:
        self.ledger.confirm(outcome)
        self._write_rows()

    def _write_rows(self) -> None:
        """Append the rows written since the last call to the record (the ledger's own JSON lines)."""
        if self._record is not None and len(self.ledger.rows) > self._recorded:
            with open(self._record, "ab") as f:
                f.write(encode_rows(self.ledger.rows[self._recorded:]))
            self._recorded = len(self.ledger.rows)

    # --- the robot subset of the simulator protocol ------------------------------------------

    async def link(self, message: Message) -> Decoded:
        """The door's SimLink: the reply encoded and decoded by the simulator's robot codec; an Error raises SimRefused."""
        from roboswe.bridge.door import SimRefused

        reply, blobs = self.answer(message)
        if isinstance(reply, Error):  # as roboswe.actors.robot_link does for the series simulator
            raise SimRefused(reply)
        _, frames = simp.SIM_ROBOT_CODEC.encode(reply, sender=SENDER, blobs=blobs)
        return simp.SIM_ROBOT_CODEC.decode(frames)

    def answer(self, message: Message) -> tuple[Message, list[bytes]]:
        if self.ended:  # the scene was released and scored: nothing reads or moves it again
            return Error(code="refused", detail=f"{self.task.id}: the attempt has ended"), []
        return answer_robot(self, message, "the development simulator")

    def spec(self) -> simp.TaskSpec:
        action, budget = self.scene.action, self.task.budget
        limits = simp.Limits(steps=budget.charged_steps, seconds=budget.wall_seconds)
        return simp.TaskSpec(
            task_id=self.task.id, instruction=self.task.instruction.strip() + "\n\n" + self.guide(),
            privileged=bool(getattr(self.scene, "privileged", False)), action_dim=action.dim,
            action_low=action.low, action_high=action.high, action=action, control_hz=self.scene.control_hz,
            control_dt=1 / self.scene.control_hz, cameras=self.scene.cameras,
            state_keys=[*self.scene.state_keys, *BUDGET_KEYS], script_limits=limits, trial_limits=limits)

    @property
    def resets_left(self) -> int:
        return self.task.budget.resets - self.resets

    def state(self) -> simp.RobotState:
        return simp.RobotState(
            control_step=self.control_step, sim_time=self.control_step / self.scene.control_hz,
            steps_left=self.ledger.remaining,
            values={**self.scene.values(self.control_step), "budget_left": [float(self.ledger.remaining)],
                    "resets_left": [float(self.resets_left)]})

    def observe(self, depth: bool) -> tuple[simp.Observation, list[bytes]]:
        started = time.monotonic()
        images, blobs = self.scene.observe(self.control_step, depth)
        return simp.Observation(control_step=self.control_step, sim_time=self.control_step / self.scene.control_hz,
                                images=images, state=self.state(), render_seconds=time.monotonic() - started), blobs

    def step(self, actions: list[list[float]]) -> simp.StepResult | Error:
        """Charged before it runs: as many rows as the ledger can pay (none: nothing moves)."""
        if (refused := self._out_of_bounds(actions)) is not None:
            return refused
        if (refused := self._batch_refused(len(actions))) is not None:
            return refused
        pay = min(len(actions), self.ledger.remaining)
        if pay == 0:
            return self._stepped(0, "trial_budget")
        self._charge("step", pay)
        try:
            for row in actions[:pay]:
                self.scene.step(row)
                self.control_step += 1
        except Exception as e:
            self._confirm(f"error: {type(e).__name__}")
            raise
        self._confirm("ok")
        return self._stepped(pay, "done" if pay == len(actions) else "trial_budget")

    def _out_of_bounds(self, actions: list[list[float]]) -> Error | None:
        """A row of the wrong length or outside the scene's bounds: refused whole, nothing charged."""
        low, high = self.scene.action.low, self.scene.action.high
        for i, row in enumerate(actions):
            if len(row) != len(low) or any(not lo <= v <= hi for v, lo, hi in zip(row, low, high)):
                return Error(code="invalid_action", detail=f"row {i} {row} is outside the action bounds {low}..{high}")
        return None

    def _batch_refused(self, size: int) -> Error | None:
        """A scene with ``max_batch`` (family 01: RLE-Bench's 1-200) takes a batch whole or not at all: one
        larger than that or than the ledger's remaining allowance is refused before anything is charged."""
        max_batch = getattr(self.scene, "max_batch", None)
        if max_batch is None:
            return None
        from .kitchen.rules import batch_refusal

        why = batch_refusal(size, self.ledger.remaining, max_batch)
        if why is None:
            return None
        return Error(code="invalid_action" if size > max_batch else "limit_reached", detail=why)

    def _stepped(self, applied: int, stopped: simp.StepStop) -> simp.StepResult:
        state = self.state()
        return simp.StepResult(applied=applied, control_step=self.control_step, sim_time=state.sim_time,
                               steps_left=self.ledger.remaining, stopped=stopped, values=state.values)

    def reset(self) -> simp.RobotState | Error:
        """The next public scene, charged one step of the ledger and one of the reset budget."""
        if self.resets_left <= 0:
            return Error(code="limit_reached", detail=f"the development phase's {self.task.budget.resets} resets are used up")
        try:
            self._charge("reset", 1)
        except BudgetExhausted as e:
            return Error(code="limit_reached", detail=f"the development budget cannot pay a reset: {e}")
        self.resets += 1
        self._load(self.resets % self.task.development.public_seeds)
        self._confirm(f"seed {self.seed}")
        return self.state()

    # --- the control endpoint's view (the simulator actor during a LoadDevelopment) --------------

    def loaded(self) -> simp.Loaded:
        return phase_loaded(self.task, self.spec())

    def success(self) -> simp.SuccessStatus:
        """Never achieved; ``control_step`` is the ledger's spent units, so a trial's step budget is the ledger's."""
        return simp.SuccessStatus(achieved=False, interval=1, achieved_step=None, first_held_step=None, current_run=0,
                                  longest_run=0, control_step=self.ledger.spent,
                                  sim_time=self.control_step / self.scene.control_hz)

    def task_record(self) -> simp.TaskRecord:
        """The ledger rows so far (the coordinator checks their chain and seals them) and what was spent."""
        return simp.TaskRecord(data={
            "family": TASK_RECORD_FAMILY, "task": self.task.id, "ledger": msgspec.to_builtins(self.ledger.rows),
            "spent": self.ledger.spent, "budget": self.ledger.budget, "resets": self.resets})

    def no_states(self) -> simp.RecordedStates:
        return simp.RecordedStates(fingerprint_digest=task_digest(self.task), seed=self.seed, count=0, fields={})

    def end_attempt(self) -> tuple[simp.TaskRecord | Error, list[bytes]]:
        """EndAttempt: a scene that is itself scored ends its attempt (``end_attempt`` over the ledger's rows); the
        reply's files are the RLE run directory it gives. Any other family's development is refused."""
        end = getattr(self.scene, "end_attempt", None)
        if end is None:
            return Error(code="refused", detail=f"{self.task.id}: its development ends in a sealed workspace, not an attempt"), []
        if self.ended:
            return Error(code="refused", detail=f"{self.task.id}: the attempt has already ended"), []
        self.ended = True
        files = end(self.ledger.rows)
        return simp.TaskRecord(data={"task": self.task.id}, files={name: i for i, name in enumerate(files)}), list(files.values())

    def guide(self) -> str:
        """What the participant is told about the development phase, beside the task's instruction."""
        art, budget = self.task.artifact, self.task.budget
        if hasattr(self.scene, "end_attempt"):  # the scene itself is scored (family 03)
            phase, scene, reset = "The attempt", "this task's scene (its hidden instance)", "robot.reset()"
            ends = ("Then the trusted side ends the attempt and scores the scene's final state; the workspace is kept "
                    "for the record only.")
        else:
            phase, scene, reset = "Development phase", "the development scene (public seeds only)", "robot.reset() (the next scene)"
            ends = (f"Then the workspace is sealed: {art.entry_file} (defining {art.entry_function}) and files matching "
                    f"{list(art.include)}, at most {art.max_files} files; nothing else is kept.")
        return (f"{phase}: scripts you exec in the sandbox drive {scene} through `import robot`. {self.scene.guide()} "
                f"robot.state() also carries {BUDGET_KEYS}. Charged: each row of robot.step_many([...]) costs 1 and "
                f"{reset} costs 1 and one of {budget.resets} resets, out of {budget.charged_steps} in all; observing is "
                f"free. It ends when you finish or the budget or {budget.wall_seconds:.0f} s are spent. {ends}"
                f"{diagnostic.guide(self.task)}")
