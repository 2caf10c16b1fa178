"""GR1 tabletop family: the 29-D joint contract, the offline stand-in scenes, and native admission.

A GR1 manifest says its ``fidelity``. ``offline-standin``: our robosuite scenes (sim/gr1/scenes.py)
with the GR1ArmsAndWaistFourierHands robot, legs and head unactuated, a fixed base, the BASIC
composite controller (arms and waist absolute joint positions, hands as unscaled grips) and
``body_part_ordering`` [left, right, left_gripper, right_gripper, torso], which gives the
contract's 29-D order. ``native``: a RoboCasa GR1 task class (sim/gr1/native.py), which needs the
user's RoboCasa GR1 assets; without them the backend refuses with AssetsMissing naming every
missing path.

What crosses the policy boundary is the contract's allowlist and nothing else: one uint8
256x256 RGB egoview made by the native pipeline, the coarse-action language (the spec's
instruction, ``unlocked_waist: ...``) and the 29 encoders in contract order. After every reset
the compiled joint ranges, actuator mapping and encoder identities are checked against the
contract; a mismatch refuses the scene.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from roboswe.protocol.sim import CameraInfo, Fingerprint, Limits, TaskSpec

from ..backend import SimError
from ..fingerprint import path_tokens, portable, sha256_hex
from ..manifest import TaskManifest
from ..physics_state import snapshot
from ..render import CameraFrame, SceneRenderer
from ..robosuite.backend import RobosuiteBackend, _Part
from .contract import policy_image_from_upright, validate_action
from .manifest import (
    ContractMismatch,
    check_hash_sentinel,
    contract_for,
    gr1_manifest,
    pinned_versions,
)

# ---- the stand-in backend ------------------------------------------------------------------------


class Gr1StandinBackend(RobosuiteBackend):
    """A stand-in GR1 tabletop scene under the GR1 tabletop contract. One thread must own it (GL context)."""

    def __init__(self, manifest: TaskManifest | dict, *, trial_steps: int | None = None,
                 require_fixed_hash_seed: bool = False):
        manifest = gr1_manifest(manifest)
        if manifest.fidelity != "offline-standin":
            raise SimError(f"task {manifest.id!r} is {manifest.fidelity}; Gr1StandinBackend runs offline stand-ins only")
        if require_fixed_hash_seed:
            check_hash_sentinel()
        import mujoco
        import robocasa_gr1
        import robosuite

        from . import scenes as gr1_scenes

        up = manifest.upstream
        self.contract, self._contract_sha256 = contract_for(manifest)
        versions = pinned_versions(manifest)
        if up.env not in gr1_scenes.STANDIN_ENVS:
            raise SimError(f"task {manifest.id!r}: no stand-in scene {up.env!r}; known: {sorted(gr1_scenes.STANDIN_ENVS)}")
        self.manifest = manifest
        self._mujoco = mujoco
        self._start_trial_bookkeeping(manifest, trial_steps)
        t0 = time.perf_counter()
        try:
            self.env = robosuite.make(
                up.env, robots=self.contract.robot.name, controller_configs=self.controller_config(),
                has_renderer=False, has_offscreen_renderer=False,  # we render from a scratch copy of the state
                use_camera_obs=False, control_freq=manifest.control_hz,
                horizon=self.contract.protocol.native_horizon, ignore_done=True,  # our budgets govern
                hard_reset=False, seed=manifest.seed)
        except Exception as e:
            raise SimError(f"task {manifest.id!r}: robosuite could not build {up.env} with {self.contract.robot.name}: {e}") from e
        self.build_seconds = time.perf_counter() - t0
        self.control_dt = float(self.env.control_timestep)
        self._bind_model()
        self._low, self._high = self.contract.low, self.contract.high
        self._names = self.contract.component_names
        self._units = [u for p in self._parts for u in p.units]
        pipe = self.contract.observation.pipeline
        video = manifest.video
        self._renderer = SceneRenderer(self.model, max(pipe.width, video.width), max(pipe.height, video.height))
        tokens = path_tokens({str(Path(robosuite.__file__).parent): "{robosuite}",
                              str(Path(robocasa_gr1.__file__).parent): "{robocasa_gr1}"})
        self._xml_sha256 = sha256_hex(portable(self.env.model.get_xml(), tokens).encode())
        self._versions = {**versions, "fidelity": manifest.fidelity, "contract_sha256": self._contract_sha256}
        self._last = np.zeros(len(self._low))
        self.check_contract()

    def controller_config(self) -> dict:
        """The robot's robosuite parts as BASIC: arms and waist absolute joint positions, hands unscaled grips, in contract order."""
        from robosuite.controllers import load_composite_controller_config

        robot = self.contract.robot
        cfg = load_composite_controller_config(controller=None, robot=robot.name)
        cfg["type"] = robot.composite
        cfg["composite_controller_specific_configs"] = {"body_part_ordering": list(robot.body_part_ordering)}
        parts = {p for p in robot.body_part_ordering if not p.endswith("_gripper")}
        cfg["body_parts"] = {k: v for k, v in cfg["body_parts"].items() if k in parts}
        for name, part in cfg["body_parts"].items():
            if part.get("type") != "JOINT_POSITION" or part.get("input_type") != "absolute":
                raise SimError(f"{robot.name}'s default {name} controller is {part.get('type')} {part.get('input_type')}, "
                               "the contract needs absolute JOINT_POSITION")
        return cfg

    def _derive_parts(self) -> list[_Part]:
        """Action parts straight from the contract (check_contract proves the compiled model agrees)."""
        parts = []
        for s in self.contract.action.slices:
            hand = s.part.endswith("_gripper")
            unit = "rad, absolute finger joint target (0 = open)" if hand else "rad, absolute joint position target"
            parts.append(_Part(
                name=s.part, start=s.start, low=np.array(s.low, dtype=float), high=np.array(s.high, dtype=float),
                names=[f"{s.name}.{j}" for j in s.joints], units=[unit] * (s.stop - s.start), hold="last",
                doc=(f"[{s.start}:{s.stop}] {s.name}: absolute targets in rad for {s.joints}"
                     + ("; each command drives two coupled finger actuators (thumb yaw one)" if hand else "")
                     + "; out-of-bound values are rejected, never clipped; repeating holds."),
            ))
        return parts

    # ---- the contract recheck ---------------------------------------------------------------

    def contract_problems(self) -> list[str]:
        """Every way the compiled scene differs from the contract (empty when it agrees)."""
        mj, m, c = self._mujoco, self.model, self.contract
        robot, cc = self._robot, self._robot.composite_controller
        problems: list[str] = []
        name = lambda kind, i: mj.mj_id2name(m, kind, int(i))
        J, A = mj.mjtObj.mjOBJ_JOINT, mj.mjtObj.mjOBJ_ACTUATOR
        if type(cc).__name__ != "CompositeController" or getattr(cc, "name", "") != c.robot.composite:
            problems.append(f"composite controller is {type(cc).__name__}, not {c.robot.composite}")
        problems += self.contract_split_problems({k: tuple(v) for k, v in cc._action_split_indexes.items()})
        for part in c.robot.unactuated:
            if robot._ref_actuators_indexes_dict.get(part):
                problems.append(f"{part} still has actuators")
        if any(m.jnt_type[j] == mj.mjtJoint.mjJNT_FREE for j in range(m.njnt) if (name(J, j) or "").startswith("robot0_")):
            problems.append("the robot base has a free joint (the contract needs a fixed base)")
        expansion = np.asarray(c.action.hand.expansion)
        for s in c.action.slices:
            if s.part.endswith("_gripper"):
                gripper = cc.grippers[s.part]
                if getattr(cc.part_controllers[s.part], "use_action_scaling", True):
                    problems.append(f"{s.name} controller scales its input; the contract's hand targets are absolute radians")
                mapping = np.asarray(gripper.format_action(np.arange(s.stop - s.start, dtype=float))).astype(int)
                if mapping.tolist() != expansion.tolist():
                    problems.append(f"{s.name} expands commands as {mapping.tolist()}, not {expansion.tolist()}")
                    continue
                acts = np.asarray(robot._ref_actuators_indexes_dict[s.part])
                short = [name(A, a).split("_", 3)[-1].removesuffix("_drive") for a in acts]
                if short != c.action.hand.actuators:
                    problems.append(f"{s.name} actuators are {short}, not {c.action.hand.actuators}")
                    continue
                gear = m.actuator_gear[acts, 0]
                joints = m.actuator_trnid[acts, 0]
                lo = np.maximum(m.actuator_ctrlrange[acts, 0] * gear, m.jnt_range[joints, 0])
                hi = np.minimum(m.actuator_ctrlrange[acts, 1] * gear, m.jnt_range[joints, 1])
                for i in range(s.stop - s.start):
                    sel = expansion == i
                    bound = (float(lo[sel].max()), float(hi[sel].min()))
                    if not np.allclose(bound, (s.low[i], s.high[i]), rtol=0, atol=1e-9):
                        problems.append(f"{s.name}.{s.joints[i]}: compiled joint/actuator bound {bound} != contract "
                                        f"[{s.low[i]}, {s.high[i]}]")
            else:
                ctrl = cc.part_controllers[s.part]
                if type(ctrl).__name__ != "JointPositionController" or ctrl.input_type != "absolute":
                    problems.append(f"{s.part} is {type(ctrl).__name__} ({ctrl.input_type}), not absolute joint position")
                if list(ctrl.joint_names) != s.joints:
                    problems.append(f"{s.name} joints are {list(ctrl.joint_names)}, not {s.joints}")
                    continue
                ids = [mj.mj_name2id(m, J, j) for j in s.joints]
                if not all(m.jnt_limited[i] for i in ids):
                    problems.append(f"{s.name} has unlimited joints")
                rng = np.array([m.jnt_range[i] for i in ids])
                if not (np.allclose(rng[:, 0], s.low, atol=1e-9, rtol=0) and np.allclose(rng[:, 1], s.high, atol=1e-9, rtol=0)):
                    problems.append(f"{s.name} compiled ranges {rng.tolist()} differ from the contract bounds")
                acts = [name(A, a) for a in robot._ref_actuators_indexes_dict[s.part]]
                if acts != s.joints:
                    problems.append(f"{s.name} actuators are {acts}, not {s.joints}")
        # Encoders: the native reader's identities (gather_robot_observations + unformat_gripper_space).
        for part, names in c.state.parts.items():
            robot_part = {"left_arm": "left", "right_arm": "right", "left_hand": "left_gripper",
                          "right_hand": "right_gripper", "waist": "torso"}.get(part)
            if robot_part is None:
                problems.append(f"encoder part {part!r} has no robot part")
                continue
            joints = [name(J, j) for j in robot._ref_joints_indexes_dict[robot_part]]
            if robot_part.endswith("_gripper"):
                joints = [joints[i] for i in (0, 1, 4, 6, 8, 10)][::-1] if len(joints) == 11 else joints
            if joints != names:
                problems.append(f"encoders {part} read {joints}, not {names}")
            elif any(m.jnt_type[mj.mj_name2id(m, J, j)] != mj.mjtJoint.mjJNT_HINGE for j in names):
                problems.append(f"encoders {part} include a joint that is not a hinge")
        pipe = c.observation.pipeline
        cam = mj.mj_name2id(m, mj.mjtObj.mjOBJ_CAMERA, pipe.camera)
        if cam < 0:
            problems.append(f"no {pipe.camera} camera")
        elif abs(float(m.cam_fovy[cam]) - pipe.camera_fovy) > 1e-9 or name(mj.mjtObj.mjOBJ_BODY, m.cam_bodyid[cam]) != pipe.camera_parent_body:
            problems.append(f"{pipe.camera} camera is not mounted on {pipe.camera_parent_body} with fovy {pipe.camera_fovy}")
        return problems

    def contract_split_problems(self, split: dict[str, tuple[int, int]]) -> list[str]:
        """The stand-in's parts sit exactly at the contract's slices (body_part_ordering)."""
        want = {s.part: (s.start, s.stop) for s in self.contract.action.slices}
        if split != want or list(split) != self.contract.robot.body_part_ordering:
            return [f"action split {split} differs from the contract's {want}"]
        return []

    def check_contract(self) -> None:
        """Raise ContractMismatch (and unload) if the compiled scene differs from the contract."""
        problems = self.contract_problems()
        if problems:
            self._loaded = False
            raise ContractMismatch(f"task {self.manifest.id!r}: the compiled scene does not match contract "
                                   f"{self.contract.id!r}: " + "; ".join(problems))
        idx = [self._mujoco.mj_name2id(self.model, self._mujoco.mjtObj.mjOBJ_JOINT, j) for j in self.contract.encoder_names]
        self._encoder_qpos = np.array([self.model.jnt_qposadr[i] for i in idx])

    # ---- lifecycle ------------------------------------------------------------------------

    def reset(self, seed: int) -> Fingerprint:
        """One seeded reset, then the contract recheck; success at reset is a ResetError, never resampled."""
        fingerprint = super().reset(seed)
        self.check_contract()
        return fingerprint

    # ---- the allowlist ----------------------------------------------------------------------

    def language(self) -> str:
        """``annotation.human.coarse_action`` as the native wrapper builds it."""
        return self.contract.observation.language_prefix + str(self.env.get_ep_meta().get("lang", ""))

    def spec(self) -> TaskSpec:
        m, obs = self.manifest, self.contract.observation
        action = self.action_spec()
        w, h = obs.pipeline.output
        return TaskSpec(
            task_id=m.id, instruction=self.language(), privileged=False,
            action_dim=action.dim, action_low=action.low, action_high=action.high, action=action,
            control_hz=m.control_hz, control_dt=self.control_dt,
            cameras=[CameraInfo(name=obs.image, width=w, height=h, depth=False, calibration=False)],
            state_keys=[obs.state],
            script_limits=Limits(steps=m.budgets.script.steps, seconds=m.budgets.script.seconds),
            trial_limits=Limits(steps=self._trial_steps, seconds=m.budgets.trial.seconds),
        )

    def validate(self, action: Sequence[float]) -> np.ndarray:
        return validate_action(self.contract, action)

    def observe(self, cameras: Sequence[str] = (), depth: bool = True) -> list[CameraFrame]:
        """The one allowed image, whatever else is asked for is refused; no depth, no calibration."""
        self._require_loaded()
        image = self.contract.observation.image
        unknown = [c for c in cameras if c != image]
        if unknown:
            raise SimError(f"cameras {unknown} are not allowed for task {self.manifest.id!r}; allowed: [{image!r}]")
        pipe = self.contract.observation.pipeline
        self._renderer.ready()
        t0 = time.perf_counter()
        self._renderer.load_state(snapshot(self.data))
        upright = self._renderer.render(pipe.camera, pipe.width, pipe.height, depth=False, calibration=False).rgb
        rgb = policy_image_from_upright(upright, pipe)
        self._render_s += time.perf_counter() - t0
        self._frames += 1
        self._observes += 1
        return [CameraFrame(camera=image, rgb=rgb)]

    def state(self) -> dict[str, np.ndarray]:
        """The 29 measured encoders (rad) in contract order, under the contract's one state key."""
        self._require_loaded()
        return {self.contract.observation.state: np.array(self.data.qpos[self._encoder_qpos], dtype=np.float64)}
