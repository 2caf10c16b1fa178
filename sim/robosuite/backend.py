"""robosuite 1.5.2 backend: real MuJoCo scenes, strict action bounds, on-demand rendering."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import structlog
from roboswe.protocol.sim import ActionComponent, ActionSpec, Fingerprint

from ..backend import ControlLoop, InvalidAction, PhysicsFailure, ResetError, SimError
from ..manifest import TaskManifest
from ..physics_state import fingerprint_bytes, snapshot
from ..render import CameraFrame, SceneRenderer

log = structlog.get_logger()

# Grippers whose robosuite format_action integrates sign(action) into a persistent command:
# magnitude is ignored, 0 keeps the current command.
_INCREMENTAL_GRIPPERS = {"PandaGripper", "RethinkGripper", "Robotiq85Gripper", "Robotiq140Gripper", "BDGripper"}


class _Part(msgspec.Struct, kw_only=True):
    """One slice of the action vector and how `wait` holds it."""

    name: str
    start: int
    low: np.ndarray
    high: np.ndarray
    names: list[str]
    units: list[str]
    hold: str  # "zero": zero keeps the target; "last": repeat the last commanded target
    doc: str


def import_simulator() -> tuple[Any, Any]:
    """robosuite and MuJoCo, imported on first use only (importing sim/ loads no simulator: tests/sim/test_layering.py)."""
    import mujoco
    import robosuite

    return mujoco, robosuite


def _versions() -> dict[str, str]:
    mujoco, robosuite = import_simulator()
    return {"robosuite": robosuite.__version__, "mujoco": mujoco.__version__, "numpy": np.__version__}


def controller_config(manifest: TaskManifest) -> dict:
    """robosuite's BASIC composite config for the robot, with the manifest's part replacements."""
    from robosuite.controllers import load_composite_controller_config

    cfg = load_composite_controller_config(controller=manifest.controller.composite, robot=manifest.upstream.robot)
    for part, part_cfg in manifest.controller.parts.items():
        cfg["body_parts"][part] = copy.deepcopy(part_cfg)
    return cfg


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class RobosuiteBackend(ControlLoop):
    """A robosuite task scene built from a manifest. One thread must own it (GL context)."""

    def __init__(self, manifest: TaskManifest, *, trial_steps: int | None = None, require_fixed_hash_seed: bool = False):
        if require_fixed_hash_seed and sys.flags.hash_randomization:
            raise SimError(
                "this simulator process runs with hash randomization; start it with PYTHONHASHSEED=0 "
                "so set/dict iteration order cannot change the scene"
            )
        mujoco, robosuite = import_simulator()
        versions = _versions()
        up = manifest.upstream
        if versions["robosuite"] != up.version or not versions["mujoco"].startswith(up.mujoco + "."):
            raise SimError(
                f"task {manifest.id!r} pins robosuite {up.version} / mujoco {up.mujoco}.x but this process has "
                f"robosuite {versions['robosuite']} / mujoco {versions['mujoco']}; install the pinned versions"
            )
        self.manifest = manifest
        self._mujoco = mujoco
        self._start_trial_bookkeeping(manifest, trial_steps)
        t0 = time.perf_counter()
        try:
            self.env = robosuite.make(
                up.env,
                robots=up.robot,
                controller_configs=controller_config(manifest),
                has_renderer=False,
                has_offscreen_renderer=False,  # we render from a scratch copy of the state (sim/render.py)
                use_camera_obs=False,
                use_object_obs=True,  # needed by some upstream predicates; filtered by the allowlist
                control_freq=manifest.control_hz,
                horizon=10**9,  # our budgets govern, not the upstream horizon
                ignore_done=True,
                hard_reset=False,  # keep one compiled model; reset re-seeds and re-places in place
                reward_shaping=False,
                seed=manifest.seed,
                **up.env_kwargs,
            )
        except Exception as e:
            raise SimError(f"task {manifest.id!r}: robosuite could not build {up.env} with {up.robot}: {e}") from e
        self.build_seconds = time.perf_counter() - t0
        self.control_dt = float(self.env.control_timestep)
        self._bind_model()
        self._bind_action_bounds("robosuite")
        self._check_allowlist()
        self._renderer = self._scene_renderer()
        xml = self.env.model.get_xml().replace(str(Path(robosuite.__file__).parent), "{robosuite}")
        self._xml_sha256 = _sha256(xml.encode())
        self._versions = versions
        self._last = np.zeros(len(self._low))

    # ---- construction helpers -------------------------------------------------------------

    def _bind_model(self) -> None:
        """Take the model robosuite compiled: its data pointers, the robot and its action parts."""
        self.model = self.env.sim.model._model
        self.data = self.env.sim.data._data
        self._robot = self.env.robots[0]
        self._parts = self._derive_parts()

    def _bind_action_bounds(self, upstream: str) -> None:
        """The action vector's bounds, names and units, concatenated from the parts in order."""
        self._low = np.concatenate([p.low for p in self._parts])
        self._high = np.concatenate([p.high for p in self._parts])
        self._names = [n for p in self._parts for n in p.names]
        self._units = [u for p in self._parts for u in p.units]
        if len(self._low) != self.env.action_dim:
            raise SimError(f"derived {len(self._low)} action bounds but {upstream} expects {self.env.action_dim}")

    def _scene_renderer(self) -> SceneRenderer:
        """A renderer for the compiled model, large enough for every observation camera and the video."""
        m = self.manifest
        sizes = [(c.width, c.height) for c in m.observation.cameras] + [(m.video.width, m.video.height)]
        return SceneRenderer(self.model, max(w for w, _ in sizes), max(h for _, h in sizes))

    def _derive_parts(self) -> list[_Part]:
        """Read real bounds and units from the live composite controller and compiled model."""
        m = self.model
        cc = self._robot.composite_controller
        parts = []
        for part_name, (start, end) in cc._action_split_indexes.items():
            ctrl = cc.part_controllers[part_name]
            n = end - start
            if part_name in cc.grippers:
                parts.append(self._gripper_part(part_name, start, n, ctrl, cc.grippers[part_name]))
            elif ctrl.name == "OSC_POSE" and ctrl.input_type == "delta" and ctrl.impedance_mode == "fixed":
                scale = np.asarray(ctrl.output_max, dtype=float)
                frame = f"robot {ctrl.input_ref_frame} frame"
                axes = ["dx", "dy", "dz", "dax", "day", "daz"]
                units = [f"1.0 = {scale[i]:g} m per control step, {frame}" for i in range(3)]
                units += [f"1.0 = {scale[i]:g} rad (axis-angle) per control step, {frame}" for i in range(3, 6)]
                parts.append(_Part(
                    name=part_name, start=start,
                    low=np.asarray(ctrl.input_min, dtype=float).copy(), high=np.asarray(ctrl.input_max, dtype=float).copy(),
                    names=[f"{part_name}.{a}" for a in axes], units=units, hold="zero",
                    doc=(f"{part_name} arm, OSC_POSE delta: [dx, dy, dz] end-effector translation scaled by "
                         f"{scale[:3].tolist()} m and [dax, day, daz] axis-angle rotation scaled by {scale[3:].tolist()} rad, "
                         f"in the {frame}, relative to the current measured pose; zero holds the current pose."),
                ))
            elif ctrl.name == "JOINT_POSITION" and ctrl.input_type == "absolute" and ctrl.impedance_mode == "fixed":
                joints = list(ctrl.joint_names)
                ids = [self._mujoco.mj_name2id(m, self._mujoco.mjtObj.mjOBJ_JOINT, j) for j in joints]
                low = np.array([m.jnt_range[i, 0] if m.jnt_limited[i] else -np.inf for i in ids])
                high = np.array([m.jnt_range[i, 1] if m.jnt_limited[i] else np.inf for i in ids])
                short = [re.sub(r"^robot\d+_", "", j) for j in joints]
                parts.append(_Part(
                    name=part_name, start=start, low=low, high=high,
                    names=[f"{part_name}.{s}" for s in short], units=["rad, absolute joint position target"] * n,
                    hold="last",
                    doc=(f"{part_name} arm, JOINT_POSITION absolute targets (rad) for {short}; bounds are the compiled "
                         "model's joint ranges; repeating the last target holds it."),
                ))
            else:
                raise SimError(
                    f"task {self.manifest.id!r}: controller part {part_name!r} ({ctrl.name}, input {getattr(ctrl, 'input_type', '?')}) "
                    "has no validated action spec in roboswe yet; use OSC_POSE delta or JOINT_POSITION absolute"
                )
        return parts

    def _gripper_part(self, part_name: str, start: int, n: int, ctrl, gripper) -> _Part:
        m = self.model
        kind = type(gripper).__name__
        if getattr(ctrl, "use_action_scaling", True):
            if kind not in _INCREMENTAL_GRIPPERS:
                raise SimError(f"gripper {kind} with action scaling is not supported by roboswe's action spec yet")
            speed = float(gripper.speed)
            return _Part(
                name=part_name, start=start,
                low=np.full(n, float(np.max(ctrl.input_min))), high=np.full(n, float(np.min(ctrl.input_max))),
                names=[f"{part_name}.grip"] if n == 1 else [f"{part_name}.grip{i}" for i in range(n)],
                units=[f"sign only: >0 closes, <0 opens, 0 keeps; the command moves {speed:g} of its range per control step"] * n,
                hold="zero",
                doc=(f"{part_name} ({kind}): only the sign counts (robosuite integrates sign(a)*{speed:g} per control step "
                     "into a command in [-1 open, +1 closed], mapped onto the finger actuator range); 0 keeps the current "
                     "command. After reset the command is 0 (half closed) until the first non-zero grip."),
            )
        # Unscaled hands: each input is an absolute actuator target, copied onto one or more actuators.
        mapping = np.asarray(gripper.format_action(np.arange(n, dtype=float))).astype(int)
        act_ids = np.asarray(self._robot._ref_actuators_indexes_dict[part_name])
        gear = m.actuator_gear[act_ids, 0]
        lo = m.actuator_ctrlrange[act_ids, 0] * gear
        hi = m.actuator_ctrlrange[act_ids, 1] * gear
        low, high, names = np.empty(n), np.empty(n), []
        for i in range(n):
            sel = mapping == i
            low[i], high[i] = lo[sel].max(), hi[sel].min()
            acts = [re.sub(r"^gripper\d+_(right|left)_[RL]_|_joint_drive$", "", self._mujoco.mj_id2name(m, self._mujoco.mjtObj.mjOBJ_ACTUATOR, int(a))) for a in act_ids[sel]]
            names.append(f"{part_name}." + "+".join(acts))
        return _Part(
            name=part_name, start=start, low=low, high=high, names=names,
            units=["rad, absolute finger joint target (0 = open)"] * n, hold="last",
            doc=(f"{part_name} ({kind}): absolute finger targets in rad, no scaling; each input drives the actuators in "
                 "its name; bounds are the intersection of those actuators' control ranges; repeating holds."),
        )

    def _check_allowlist(self) -> None:
        available = set(self.env._observables)
        missing = [k for k in self.manifest.allowed_state_keys if k not in available]
        if missing:
            raise SimError(f"task {self.manifest.id!r}: state keys {missing} do not exist; robosuite offers {sorted(available)}")
        cams = {self._mujoco.mj_id2name(self.model, self._mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(self.model.ncam)}
        wanted = [c.name for c in self.manifest.observation.cameras] + list(self.manifest.video.cameras)
        bad = [c for c in wanted if c not in cams]
        if bad:
            raise SimError(f"task {self.manifest.id!r}: cameras {bad} do not exist; the scene has {sorted(cams)}")

    # ---- lifecycle ----------------------------------------------------------------------

    def reset(self, seed: int) -> Fingerprint:
        """Re-seed robosuite's generator in place (placement samplers share it) and reset the scene."""
        rng = self.env.rng
        rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state
        t0 = time.perf_counter()
        self.env.reset()
        self._physics_s += time.perf_counter() - t0
        self._step = 0
        self._tracker.reset()
        self._states.take()
        self._loaded = True
        for p in self._parts:  # initial hold: current joint positions for absolute arms, zeros otherwise
            if p.hold == "last" and p.units[0].startswith("rad, absolute joint"):
                ctrl = self._robot.composite_controller.part_controllers[p.name]
                self._last[p.start:p.start + len(p.low)] = np.clip(np.array(ctrl.joint_pos), p.low, p.high)
            else:
                self._last[p.start:p.start + len(p.low)] = np.clip(0.0, p.low, p.high)
        initial = snapshot(self.data)
        self._states.append(0, 0.0, initial)
        if self.env._check_success():
            self._loaded = False
            raise ResetError(f"task {self.manifest.id!r} seed {seed}: the reset state already satisfies success; "
                             "this seed cannot be admitted (pick another seed in the manifest)")
        compiled = np.zeros(self._mujoco.mj_sizeModel(self.model), dtype=np.uint8)
        self._mujoco.mj_saveModel(self.model, None, compiled)
        self._fingerprinted(initial, hashlib.sha256(compiled).hexdigest(), seed, self._versions)
        log.info("sim.reset", task=self.manifest.id, seed=seed, fingerprint=self.fingerprint.digest[:16])
        return self.fingerprint

    def _fingerprinted(self, initial: dict[str, np.ndarray], compiled_sha: str, seed: int, versions: dict[str, str]) -> Fingerprint:
        """The reset scene's fingerprint (model XML, compiled model, initial state, seed, versions), kept as
        ``self.fingerprint``; the renderer learns the compiled model, so the next trial's scene reuses its GL side."""
        state_sha = _sha256(fingerprint_bytes(initial))
        body = json.dumps({"model_xml_sha256": self._xml_sha256, "compiled_model_sha256": compiled_sha,
                           "initial_state_sha256": state_sha, "seed": seed, "versions": versions}, sort_keys=True)
        self.fingerprint = Fingerprint(digest=_sha256(body.encode()), seed=seed, model_xml_sha256=self._xml_sha256,
                                       initial_state_sha256=state_sha, versions=dict(versions),
                                       compiled_model_sha256=compiled_sha)
        self._renderer.model_digest = compiled_sha
        return self.fingerprint

    def close(self) -> None:
        try:
            self._renderer.close()
        finally:
            self.env.close()

    # ---- contract -----------------------------------------------------------------------

    def hold_action(self) -> np.ndarray:
        """The action that keeps current targets: zero for delta/incremental parts, last target otherwise."""
        hold = self._last.copy()
        for p in self._parts:
            if p.hold == "zero":
                hold[p.start:p.start + len(p.low)] = 0.0
        return hold

    def action_spec(self) -> ActionSpec:
        comps = [ActionComponent(index=i, name=self._names[i], low=float(self._low[i]), high=float(self._high[i]), unit=self._units[i])
                 for i in range(len(self._low))]
        rule = ("wait repeats the hold action: zero for delta and sign-incremental components (keeps the current goal / "
                "gripper command), the last commanded value for absolute targets (initially the reset joint positions)")
        return ActionSpec(dim=len(self._low), low=self._low.tolist(), high=self._high.tolist(), components=comps,
                          hold=self.hold_action().tolist(), hold_rule=rule, doc="\n".join(p.doc for p in self._parts))

    def validate(self, action: Sequence[float]) -> np.ndarray:
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidAction(f"action must be a flat list of {len(self._low)} numbers, got {action!r:.80}") from None
        if a.shape != self._low.shape:
            raise InvalidAction(
                f"action has shape {list(a.shape)} but this task takes {len(self._low)} numbers: {self._names}"
            )
        for i, v in enumerate(a):
            lo, hi = float(self._low[i]), float(self._high[i])
            if not math.isfinite(v):
                raise InvalidAction(f"action[{i}] ({self._names[i]}) is {v}; every component must be finite, within [{lo:g}, {hi:g}]",
                                    index=i, component=self._names[i], value=float(v), low=lo, high=hi)
            if v < lo or v > hi:
                raise InvalidAction(
                    f"action[{i}] ({self._names[i]}) = {v:g} is outside its bound [{lo:g}, {hi:g}] ({self._units[i]}); "
                    "actions are rejected, never clipped",
                    index=i, component=self._names[i], value=float(v), low=lo, high=hi)
        return a

    # ---- control ------------------------------------------------------------------------

    def _instability_warnings(self) -> int:
        w, kind = self.data.warning, self._mujoco.mjtWarning
        return int(w[kind.mjWARN_BADQPOS].number + w[kind.mjWARN_BADQVEL].number + w[kind.mjWARN_BADQACC].number)

    def _physics_step(self, action: np.ndarray) -> None:
        unstable_before = self._instability_warnings()
        try:
            self.env.step(action)
        except Exception as e:
            self._loaded = False
            raise PhysicsFailure(f"control step {self._step + 1} failed inside robosuite/MuJoCo: {type(e).__name__}: {e}") from e
        # MuJoCo silently resets the state when accelerations blow up; that must not pass as a step.
        if self._instability_warnings() != unstable_before or not np.isfinite(self.data.qpos).all():
            self._loaded = False
            raise PhysicsFailure(f"physics became unstable at control step {self._step + 1} (MuJoCo found a bad position, "
                                 "velocity or acceleration and reset the data, or the state is non-finite); the scene is retired, load the task again")
        self._last = action.copy()

    def _physics_state(self) -> dict[str, np.ndarray]:
        return snapshot(self.data)

    # ---- sensing ------------------------------------------------------------------------

    def observe(self, cameras: Sequence[str] = (), depth: bool = True) -> list[CameraFrame]:
        self._require_loaded()
        allowed = self.manifest.observation.cameras
        names = list(cameras) or [c.name for c in allowed]
        specs = []
        for name in names:
            try:
                specs.append(self.manifest.camera(name))
            except KeyError as e:
                raise SimError(e.args[0]) from None
        self._renderer.ready()
        t0 = time.perf_counter()
        self._renderer.load_state(snapshot(self.data))
        frames = [self._renderer.render(c.name, c.width, c.height, depth=depth and c.depth, calibration=c.calibration)
                  for c in specs]
        self._render_s += time.perf_counter() - t0
        self._frames += len(frames)
        self._observes += 1
        return frames

    def state(self) -> dict[str, np.ndarray]:
        self._require_loaded()
        obs = self.env._get_observations(force_update=True)
        return {k: np.atleast_1d(np.asarray(obs[k], dtype=np.float64)) for k in self.manifest.allowed_state_keys}

    def predicate_now(self) -> bool:
        """The upstream predicate on the current state (no interval); for tests and admission."""
        return bool(self.env._check_success())
