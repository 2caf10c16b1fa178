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
from roboswe.protocol.sim import ActionComponent, ActionSpec, Fingerprint

from ..backend import ControlLoop, InvalidAction, ResetError
from ..manifest import TaskManifest
from ..physics_state import StateLog, fingerprint_bytes
from ..render import CameraFrame

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


class FakeBackend(ControlLoop):
    """The kinematic reach scene; see the module docs."""

    def __init__(self, manifest: TaskManifest, *, trial_steps: int | None = None, require_fixed_hash_seed: bool = False):
        unknown = [k for k in manifest.allowed_state_keys if k not in STATE_KEYS]
        if unknown:
            raise InvalidAction(f"task {manifest.id!r}: the fake backend has no state keys {unknown}; "
                                f"it offers {sorted(STATE_KEYS)}")
        self.manifest = manifest
        self.control_dt = 1.0 / manifest.control_hz
        self._start_trial_bookkeeping(manifest, trial_steps)
        self._pos = np.zeros(3)
        self._vel = np.zeros(3)
        self._grip = -1.0
        self._target = np.zeros(3)

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
        initial = hashlib.sha256(fingerprint_bytes(self._physics_state())).hexdigest()
        versions = {"fake_backend": VERSION, "numpy": np.__version__}
        body = f"{model}|{initial}|{seed}|{sorted(versions.items())}"
        self.fingerprint = Fingerprint(digest=hashlib.sha256(body.encode()).hexdigest(), seed=seed,
                                       model_xml_sha256=model, initial_state_sha256=initial, versions=versions)
        return self.fingerprint

    def _physics_state(self) -> dict[str, np.ndarray]:
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

    def _physics_step(self, action: np.ndarray) -> None:
        self._vel = action[:3] * MAX_MOVE / self.control_dt
        self._pos = self._pos + action[:3] * MAX_MOVE
        self._grip = float(action[3])

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
