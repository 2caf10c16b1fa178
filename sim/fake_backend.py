"""A kinematic stand-in simulator (numpy only): a gripper point that moves to reach a target.

Registered as the ``fake`` backend (``upstream.package = "fake"`` in a manifest), so series,
trial and verify logic can be tested in-process in seconds with the same interface, the
same validation rules and the same records as the robosuite backend: actions outside their
bounds are rejected (never clipped), the trial step budget stops motion, the success
predicate must hold for the manifest's interval, and every control step's state is logged.
It is deterministic in the seed, so a replay reproduces it bit for bit.

The scene: the gripper starts at a seeded point and the target at another. One control step
moves the gripper by ``MAX_MOVE`` times the action's first three components (metres) and
sets the grip from the fourth. The predicate holds while the gripper is within ``REACH``
of the target with the grip closed (> 0.5).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence

import numpy as np

from roboswe.protocol.sim import ActionComponent, ActionSpec, CameraInfo, Fingerprint, Limits, TaskSpec

from .backend import (
    BackendStatistics,
    InvalidAction,
    NotLoaded,
    ResetError,
    SimBackend,
    StepOutcome,
    SuccessRecord,
    SuccessTracker,
)
from .manifest import TaskManifest
from .physics_state import PhysicsStates, StateLog, fingerprint_bytes
from .render import CameraFrame

VERSION = "fake-1"
MAX_MOVE = 0.05  # metres per control step at action 1.0
REACH = 0.02  # metres
NAMES = ("dx", "dy", "dz", "grip")
UNITS = (f"{MAX_MOVE} m", f"{MAX_MOVE} m", f"{MAX_MOVE} m", "-1 open, +1 closed")
STATE_KEYS = {  # allowed state key -> how to read it
    "robot0_eef_pos": lambda s: s._pos.copy(),
    "robot0_gripper_qpos": lambda s: np.array([s._grip]),
    "target_pos": lambda s: s._target.copy(),
}


class FakeBackend(SimBackend):
    """The kinematic reach scene; see the module docs."""

    def __init__(self, manifest: TaskManifest, *, trial_steps: int | None = None, require_fixed_hash_seed: bool = False):
        unknown = [k for k in manifest.allowed_state_keys if k not in STATE_KEYS]
        if unknown:
            raise InvalidAction(f"task {manifest.id!r}: the fake backend has no state keys {unknown}; "
                                f"it offers {sorted(STATE_KEYS)}")
        self.manifest = manifest
        self.control_dt = 1.0 / manifest.control_hz
        self._trial_steps = trial_steps if trial_steps is not None else manifest.budgets.trial.steps
        self._tracker = SuccessTracker(manifest.success.interval)
        self._states = StateLog()
        self._loaded = False
        self._step = 0
        self._pos = np.zeros(3)
        self._vel = np.zeros(3)
        self._grip = -1.0
        self._target = np.zeros(3)
        self.fingerprint: Fingerprint | None = None
        self._physics_s = self._render_s = 0.0
        self._frames = self._observes = self._rejected = self._total_steps = 0

    # ---- scene --------------------------------------------------------------------------

    def reset(self, seed: int) -> Fingerprint:
        rng = np.random.default_rng(seed)
        self._pos = rng.uniform(-0.2, 0.2, 3)
        self._target = rng.uniform(-0.2, 0.2, 3)
        if np.linalg.norm(self._pos - self._target) < 4 * REACH:
            raise ResetError(f"seed {seed}: the gripper starts at the target; choose another seed")
        self._vel, self._grip, self._step = np.zeros(3), -1.0, 0
        self._tracker.reset()
        self._states = StateLog()
        self._loaded = True
        model = hashlib.sha256(f"{VERSION}:{self.manifest.id}:{MAX_MOVE}:{REACH}".encode()).hexdigest()
        initial = hashlib.sha256(fingerprint_bytes(self._physics())).hexdigest()
        versions = {"fake_backend": VERSION, "numpy": np.__version__}
        body = f"{model}|{initial}|{seed}|{sorted(versions.items())}"
        self.fingerprint = Fingerprint(digest=hashlib.sha256(body.encode()).hexdigest(), seed=seed,
                                       model_xml_sha256=model, initial_state_sha256=initial, versions=versions)
        return self.fingerprint

    def _physics(self) -> dict[str, np.ndarray]:
        return {"qpos": np.array([*self._pos, self._grip]), "qvel": np.array([*self._vel, 0.0]),
                "act": np.zeros(0), "mocap_pos": self._target.reshape(1, 3).copy(), "mocap_quat": np.zeros((0, 4))}

    def action_spec(self) -> ActionSpec:
        low, high = [-1.0] * 4, [1.0] * 4
        return ActionSpec(
            dim=4, low=low, high=high, hold=self.hold_action().tolist(), hold_rule="zero motion, grip kept",
            components=[ActionComponent(index=i, name=n, low=-1.0, high=1.0, unit=u) for i, (n, u) in enumerate(zip(NAMES, UNITS))],
            doc=f"[dx, dy, dz, grip]: the gripper moves by {MAX_MOVE} m per unit per control step; grip > 0.5 closes it.")

    def hold_action(self) -> np.ndarray:
        return np.array([0.0, 0.0, 0.0, self._grip])

    def spec(self) -> TaskSpec:
        m, a = self.manifest, self.action_spec()
        return TaskSpec(
            task_id=m.id, instruction=m.instruction, privileged=m.privileged, action_dim=a.dim, action_low=a.low,
            action_high=a.high, action=a, control_hz=m.control_hz, control_dt=self.control_dt,
            cameras=[CameraInfo(name=c.name, width=c.width, height=c.height, depth=c.depth, calibration=c.calibration)
                     for c in m.observation.cameras],
            state_keys=m.allowed_state_keys,
            script_limits=Limits(steps=m.budgets.script.steps, seconds=m.budgets.script.seconds),
            trial_limits=Limits(steps=self._trial_steps, seconds=m.budgets.trial.seconds))

    def validate(self, action: Sequence[float]) -> np.ndarray:
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidAction(f"action must be a flat list of 4 numbers, got {action!r:.80}") from None
        if a.shape != (4,):
            raise InvalidAction(f"action has shape {list(a.shape)} but this task takes 4 numbers: {list(NAMES)}")
        for i, v in enumerate(a):
            if not math.isfinite(v) or not -1.0 <= v <= 1.0:
                raise InvalidAction(f"action[{i}] ({NAMES[i]}) = {v:g} is outside its bound [-1, 1] ({UNITS[i]}); "
                                    "actions are rejected, never clipped",
                                    index=i, component=NAMES[i], value=float(v), low=-1.0, high=1.0)
        return a

    # ---- control ------------------------------------------------------------------------

    @property
    def control_step(self) -> int:
        return self._step

    @property
    def sim_time(self) -> float:
        return round(self._step * self.control_dt, 9)

    @property
    def steps_left(self) -> int:
        return max(0, self._trial_steps - self._step)

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise NotLoaded("no task is loaded; reset(seed) first")

    def step(self, actions: Sequence[Sequence[float]]) -> StepOutcome:
        self._require_loaded()
        checked = []
        for k, action in enumerate(actions):
            try:
                checked.append(self.validate(action))
            except InvalidAction as e:
                self._rejected += 1
                e.chunk_index = k
                raise
        return self._apply(checked)

    def wait(self, steps: int) -> StepOutcome:
        self._require_loaded()
        if steps < 0:
            raise InvalidAction(f"wait steps must be >= 0, got {steps}")
        return self._apply([self.hold_action()] * steps)

    def _apply(self, actions: list[np.ndarray]) -> StepOutcome:
        applied, stopped = 0, "done"
        t0 = time.perf_counter()
        for a in actions:
            if self.steps_left <= 0:
                stopped = "trial_budget"
                break
            self._vel = a[:3] * MAX_MOVE / self.control_dt
            self._pos = self._pos + a[:3] * MAX_MOVE
            self._grip = float(a[3])
            self._step += 1
            self._total_steps += 1
            applied += 1
            self._tracker.update(self._step, self.predicate_now())
            self._states.append(self._step, self.sim_time, self._physics(), a)
        self._physics_s += time.perf_counter() - t0
        return StepOutcome(applied=applied, control_step=self._step, sim_time=self.sim_time,
                           steps_left=self.steps_left, stopped=stopped)

    def predicate_now(self) -> bool:
        return bool(np.linalg.norm(self._pos - self._target) < REACH and self._grip > 0.5)

    # ---- observation --------------------------------------------------------------------

    def observe(self, cameras: Sequence[str] = (), depth: bool = True) -> list[CameraFrame]:
        """A top view: the gripper as a white square, the target as a red one, on grey."""
        self._require_loaded()
        t0 = time.perf_counter()
        names = list(cameras) or [c.name for c in self.manifest.observation.cameras]
        frames = []
        for name in names:
            cam = self.manifest.camera(name)  # KeyError names the allowed cameras
            rgb = np.full((cam.height, cam.width, 3), 96, np.uint8)
            for point, colour in ((self._target, (200, 30, 30)), (self._pos, (255, 255, 255))):
                row = int((0.5 - point[1]) * cam.height) % cam.height
                col = int((point[0] + 0.5) * cam.width) % cam.width
                rgb[max(0, row - 2):row + 3, max(0, col - 2):col + 3] = colour
            d = np.full((cam.height, cam.width), 1.0, np.float32) if depth and cam.depth else None
            frames.append(CameraFrame(camera=name, rgb=rgb, depth=d))
        self._frames += len(frames)
        self._observes += 1
        self._render_s += time.perf_counter() - t0
        return frames

    def state(self) -> dict[str, np.ndarray]:
        self._require_loaded()
        return {k: STATE_KEYS[k](self) for k in self.manifest.allowed_state_keys}

    def success(self) -> SuccessRecord:
        return self._tracker.record()

    def take_states(self) -> PhysicsStates:
        return self._states.take()

    def statistics(self) -> BackendStatistics:
        return BackendStatistics(control_steps=self._total_steps, sim_time=self.sim_time, physics_seconds=self._physics_s,
                                 render_seconds=self._render_s, frames_rendered=self._frames, observes=self._observes,
                                 rejected_actions=self._rejected)
