"""The RLE-Bench development phase: the trusted development simulator that holds the ledger, and the
session that carries a participant's operations out on its workspace and sandbox.

``DevelopmentSim`` answers the robot subset of the simulator protocol (protocol/sim.py) for the
task's development scene on PUBLIC seeds only: ``GetSpec``, ``GetState`` and ``Observe`` are free
(observing is free), ``Step`` and ``Reset`` are charged to its ``Ledger`` before they run and
confirmed after. A charge the budget cannot pay is refused before anything moves. The participant
sees only what is left (``state()["budget_left"]``, ``["resets_left"]``) and a noisy pose label of
the block (``state()["label"]``: x, y, yaw in the table frame, never the shape). It is reached by
the sandbox bridge's door through ``link`` (a SimLink: every reply goes through the simulator
codec, as over the wire), so scripts in the sandbox drive it with the normal ``robot`` module.

``develop`` is the session: a participant (the python participant of roboswe/providers/local.py)
decides operations over a conversation; write/read/list act on the workspace (roboswe.evaluation.
workspace.Workspace, links never followed), exec runs the script in the trial sandbox (bridge/trial.py)
against this simulator. The phase ends when the participant finishes, the ledger cannot pay one more
step, the wall-time budget is spent, or the operation cap is reached.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import numpy as np
import trio

from roboswe.bridge.door import SimLink, SimRefused
from roboswe.protocol import Decoded, Message
from roboswe.protocol import sim as simp
from roboswe.protocol.bridge import ScriptLimits
from roboswe.protocol.control import Error
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
from roboswe.sim.pose import battery as pose_battery
from roboswe.sim.pose.scene import CAMERA, FRAME_STEPS, TABLE_HALF, TIMESTEP, Pose, wrap

from .ledger import BudgetExhausted, Ledger, encode_rows
from .manifest import RleTask

SENDER = "rle-develop"
CONTROL_HZ = round(1 / (TIMESTEP * FRAME_STEPS))  # one control step = one frame of a push episode (20 Hz)
STICK_STEP_M = 0.01
"""Largest stick displacement per control step and axis (0.2 m/s at 20 Hz, twice a battery push)."""
STICK_REACH_M = TABLE_HALF
STATE_KEYS = ["stick", "label", "budget_left", "resets_left"]


class DevelopmentSim:
    """The trusted side of a development phase: the public scene, the ledger, the budget."""

    def __init__(self, task: RleTask, *, record: Path | None = None):
        import mujoco  # the scene's own physics; imported here, as sim/pose does, so importing this module loads no GL

        self._mj = mujoco
        self.task = task
        self.ledger = Ledger(task.budget.charged_steps)
        self._record, self._recorded = record, 0  # where each ledger row is appended as it is written
        self.resets = 0
        self.control_step = 0
        self._renderer = pose_battery.Renderer(task.evaluation.width, task.evaluation.height)
        self._camera = self._renderer.camera()
        self._load(0)

    def close(self) -> None:
        self._renderer.close()

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

    # --- the scene ---------------------------------------------------------------------------

    def _load(self, seed: int) -> None:
        """Public development seed ``seed`` (the seeds cycle through 0..public_seeds-1)."""
        self.seed = seed
        (still,) = pose_battery.group_spec(seed, 1).stills
        self.scene = self._renderer.scene(still.shape)
        self.scene.set_block(still.block.x, still.block.y, still.block.yaw)
        self.scene.set_stick(*still.stick)
        self._mj.mj_forward(self.scene.model, self.scene.data)

    def _move_stick(self, dx: float, dy: float) -> None:
        """One control step: the stick moves (dx, dy) over FRAME_STEPS physics steps."""
        mj, data = self._mj, self.scene.data
        for _ in range(FRAME_STEPS):
            x, y = data.mocap_pos[0, :2] + (dx / FRAME_STEPS, dy / FRAME_STEPS)
            data.mocap_pos[0, :2] = (float(np.clip(x, -STICK_REACH_M, STICK_REACH_M)),
                                     float(np.clip(y, -STICK_REACH_M, STICK_REACH_M)))
            mj.mj_step(self.scene.model, data)
        self.control_step += 1

    def label(self) -> Pose:
        """The block's pose with the manifest's label noise (drawn from the public seed and the step)."""
        dev, truth = self.task.development, self.scene.block_pose()
        rng = np.random.default_rng([self.seed, 2, self.control_step])
        return Pose(truth.x + rng.normal(0, dev.label_noise_m), truth.y + rng.normal(0, dev.label_noise_m),
                    wrap(truth.yaw + rng.normal(0, dev.label_noise_rad)))

    # --- the robot subset of the simulator protocol ------------------------------------------

    async def link(self, message: Message) -> Decoded:
        """The door's SimLink: the reply encoded and decoded by the simulator's robot codec; an Error raises SimRefused."""
        reply, blobs = self.answer(message)
        if isinstance(reply, Error):  # as roboswe.actors.robot_link does for the series simulator
            raise SimRefused(reply)
        _, frames = simp.SIM_ROBOT_CODEC.encode(reply, sender=SENDER, blobs=blobs)
        return simp.SIM_ROBOT_CODEC.decode(frames)

    def answer(self, message: Message) -> tuple[Message, list[bytes]]:
        match message:
            case simp.GetSpec():
                return self.spec(), []
            case simp.GetState():
                return self.state(), []
            case simp.Observe(depth=depth):
                return self.observe(depth)
            case simp.Step(actions=actions) if actions:
                return self.step(actions), []
            case simp.Step():
                return Error(code="invalid_action", detail="Step needs at least one action"), []
            case simp.Reset():
                return self.reset(), []
        return Error(code="refused", detail=f"the development simulator does not accept {type(message).__name__}"), []

    def spec(self) -> simp.TaskSpec:
        low, high = [-STICK_STEP_M] * 2, [STICK_STEP_M] * 2
        components = [simp.ActionComponent(index=i, name=f"stick.d{axis}", low=-STICK_STEP_M, high=STICK_STEP_M,
                                           unit="metres per control step, table frame")
                      for i, axis in enumerate("xy")]
        action = simp.ActionSpec(dim=2, low=low, high=high, components=components, hold=[0.0, 0.0],
                                 hold_rule="a zero displacement holds the stick",
                                 doc=f"[dx, dy]: the stick's displacement in one control step ({CONTROL_HZ} Hz), metres")
        ev, budget = self.task.evaluation, self.task.budget
        camera = simp.CameraInfo(name=CAMERA, width=ev.width, height=ev.height, depth=ev.variant == "rgbd", calibration=True)
        return simp.TaskSpec(
            task_id=self.task.id, instruction=self.task.instruction, privileged=False, action_dim=2,
            action_low=low, action_high=high, action=action, control_hz=CONTROL_HZ, control_dt=1 / CONTROL_HZ,
            cameras=[camera], state_keys=STATE_KEYS,
            script_limits=simp.Limits(steps=budget.charged_steps, seconds=budget.wall_seconds),
            trial_limits=simp.Limits(steps=budget.charged_steps, seconds=budget.wall_seconds))

    @property
    def resets_left(self) -> int:
        return self.task.budget.resets - self.resets

    def state(self) -> simp.RobotState:
        label, stick = self.label(), self.scene.data.mocap_pos[0, :2]
        return simp.RobotState(
            control_step=self.control_step, sim_time=self.control_step / CONTROL_HZ, steps_left=self.ledger.remaining,
            values={"stick": [float(stick[0]), float(stick[1])], "label": [label.x, label.y, label.yaw],
                    "budget_left": [float(self.ledger.remaining)], "resets_left": [float(self.resets_left)]})

    def observe(self, depth: bool) -> tuple[simp.Observation, list[bytes]]:
        """The camera as the artifact will see it (the task's sensor noise); free."""
        started, ev = time.monotonic(), self.task.evaluation
        frame = self.scene.frame()
        [(rgb, noisy_depth)] = pose_battery.noisy([frame], self.seed * 1_000_003 + self.control_step,
                                                  ev.rgb_noise, ev.depth_noise_m)
        blobs = [rgb.tobytes()]
        with_depth = depth and ev.variant == "rgbd"
        if with_depth:
            blobs.append(noisy_depth.tobytes())
        image = simp.CameraImage(camera=CAMERA, width=ev.width, height=ev.height, rgb_blob=0,
                                 depth_blob=1 if with_depth else None, K=self._camera["K"],
                                 T_world_camera=self._camera["table_from_camera"])
        return simp.Observation(control_step=self.control_step, sim_time=self.control_step / CONTROL_HZ, images=[image],
                                state=self.state(), render_seconds=time.monotonic() - started), blobs

    def step(self, actions: list[list[float]]) -> simp.StepResult:
        """Charged before it runs: as many rows as the ledger can pay (none: nothing moves)."""
        pay = min(len(actions), self.ledger.remaining)
        if pay == 0:
            return self._stepped(0, "trial_budget")
        self._charge("step", pay)
        try:
            for dx, dy in actions[:pay]:
                self._move_stick(dx, dy)
        except Exception as e:
            self._confirm(f"error: {type(e).__name__}")
            raise
        self._confirm("ok")
        return self._stepped(pay, "done" if pay == len(actions) else "trial_budget")

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
        self.control_step = 0
        self._load(self.resets % self.task.development.public_seeds)
        self._confirm(f"seed {self.seed}")
        return self.state()


def development_guide(task: RleTask) -> str:
    """What the participant is told about the development phase, beside the task's instruction."""
    art, budget = task.artifact, task.budget
    return (f"Development phase: scripts you exec in the sandbox drive the development scene through `import robot` "
            f"(public seeds only). Free: robot.observe(depth=True) (camera {CAMERA!r}, as the estimator will get it) and "
            f"robot.state(): {STATE_KEYS} (stick x, y; the block's x, y, yaw with label noise; no shape). Charged: each "
            f"row of robot.step_many([[dx, dy], ...]) (the stick's displacement per step, at most {STICK_STEP_M} m per axis) "
            f"costs 1 and robot.reset() (the next scene) costs 1 and one of {budget.resets} resets, out of {budget.charged_steps} "
            f"in all; the phase ends when you finish or the budget or {budget.wall_seconds:.0f} s are spent. Then the "
            f"workspace is sealed: {art.entry_file} (defining {art.entry_function}) and files matching {list(art.include)}, "
            f"at most {art.max_files} files; nothing else is kept.")


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
    conversation = [Turn(id="develop", role="user", trial=1, parts=[TextPart(text=task.instruction.strip() + "\n\n" + development_guide(task))])]
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

