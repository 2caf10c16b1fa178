"""RoboCasa365 kitchen backend: real RoboCasa task classes on robosuite, through the same contract.

A kitchen task is built from a manifest (task class, layout, style, seed, robot, controller,
cameras, observation allowlist, budgets, pinned versions). Everything after construction is
the robosuite backend's: reject-not-clip validation, the consecutive-step success interval
over the task's own ``_check_success``, rendering from a scratch copy of the state, per-step
state records for video. What differs:

- RoboCasa rebuilds the whole MuJoCo model on every reset (its ``hard_reset``), so the model,
  action parts, renderer and model digest are (re)bound after each reset;
- the action is the mobile manipulator's: arm (OSC_POSE delta), gripper, mobile base
  (velocity), torso (lift delta) and the base/arm mode switch;
- the fingerprint also covers RoboCasa's version and the asset files the model uses, and
  says whether those assets are RoboCasa's or the placeholder kit (``versions["assets"]``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
import structlog
from roboswe.protocol.sim import Fingerprint

from ..backend import ResetError, SimError
from ..fingerprint import (
    FILE_ATTR,
    compiled_model_digest,
    path_tokens,
    portable,
    sha256_hex,
    used_assets,
)
from ..manifest import ManifestError, Success, TaskManifest
from ..physics_state import snapshot
from ..robosuite.backend import RobosuiteBackend, _Part

log = structlog.get_logger()

Positive = Annotated[int, msgspec.Meta(gt=0)]
Scene = int | Literal["kit"]

DEFAULT_KIT_DIR = Path.home() / ".cache" / "roboswe" / "robocasa-kit"
"""Where the placeholder kit is written when the caller names no directory (one per RoboCasa version)."""

class AssetsMissing(SimError):
    """RoboCasa's downloaded assets are not where the task needs them; names the missing path."""

    code = "assets_missing"


# ---- manifest --------------------------------------------------------------------------------


class RobocasaUpstream(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which RoboCasa task and scene a manifest pins; ``registry_horizon`` is recorded only."""

    package: Literal["robocasa"] = "robocasa"
    version: str  # robocasa.__version__, e.g. "1.0.0" (praxis-robocasa)
    robosuite: str = "1.5.2"  # robosuite.__version__ (praxis-robosuite reports 1.5.2)
    mujoco: str  # major.minor series, e.g. "3.3"
    env: str  # RoboCasa task class, e.g. "OpenDrawer"
    robot: str = "PandaOmron"
    layout: Scene  # RoboCasa layout id, or "kit" for the placeholder kit's kitchen
    style: Scene  # RoboCasa style id, or "kit"
    assets: Literal["robocasa", "placeholder"] = "robocasa"
    registry_horizon: Positive
    obj_registries: list[Literal["objaverse", "aigen", "lightwheel"]] = msgspec.field(default_factory=lambda: ["objaverse", "lightwheel"])
    env_kwargs: dict[str, str | int | float | bool] = {}

    def __post_init__(self) -> None:
        kit_scene = self.layout == "kit" or self.style == "kit"
        if kit_scene != (self.assets == "placeholder"):
            raise ManifestError(
                f"upstream: layout = {self.layout!r}, style = {self.style!r} with assets = {self.assets!r}; the kit's "
                "kitchen (layout = style = \"kit\") needs assets = \"placeholder\", and RoboCasa layouts need assets = \"robocasa\""
            )


class KitchenController(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """RoboCasa's composite controller for the robot (PandaOmron: HYBRID_MOBILE_BASE), with part replacements."""

    composite: Literal["HYBRID_MOBILE_BASE"] = "HYBRID_MOBILE_BASE"
    parts: dict[str, dict[str, Any]] = {}


class KitchenSuccess(Success, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The interval, plus the predicate review: what RoboCasa's ``_check_success`` checks, as a person read it,
    and the sha256 of the source they read (sim/robocasa/review.py; admission excludes the task when it changed)."""

    review: Annotated[str, msgspec.Meta(min_length=10)]
    predicate_sha256: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]


class KitchenManifest(TaskManifest, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A task manifest whose upstream is a RoboCasa kitchen task (everything else as TaskManifest)."""

    upstream: RobocasaUpstream
    controller: KitchenController = KitchenController()
    success: KitchenSuccess


def load_kitchen_manifest(path: str | Path) -> KitchenManifest:
    """Decode a kitchen task manifest (TOML); raises ManifestError naming the file and the field."""
    path = Path(path)
    try:
        return msgspec.toml.decode(path.read_bytes(), type=KitchenManifest)
    except OSError as e:
        raise ManifestError(f"cannot read task manifest {path}: {e.strerror}") from None
    except msgspec.ValidationError as e:
        raise ManifestError(f"{path}: invalid kitchen task manifest: {e}. Compare configs/tasks/kit-opendrawer.toml") from None
    except msgspec.DecodeError as e:
        raise ManifestError(f"{path}: not valid TOML: {e}") from None
    except ManifestError as e:
        raise ManifestError(f"{path}: {e}") from None


def kitchen_manifest(manifest: TaskManifest | dict) -> KitchenManifest:
    """The manifest as a KitchenManifest (from its builtins form if needed); raises ManifestError."""
    if isinstance(manifest, KitchenManifest):
        return manifest
    data = manifest.to_builtins() if isinstance(manifest, TaskManifest) else manifest
    try:
        return msgspec.convert(data, KitchenManifest)
    except msgspec.ValidationError as e:
        raise ManifestError(f"not a RoboCasa kitchen manifest: {e}") from None


# ---- assets ----------------------------------------------------------------------------------


def asset_problems(root: Path, manifest: KitchenManifest) -> list[str]:
    """Paths a task needs under a real RoboCasa asset root that are missing (empty when loadable)."""
    from . import assets as robocasa_assets

    return robocasa_assets.missing(root, robocasa_assets.parts_needed(manifest.upstream.obj_registries,
                                                                       manifest.upstream.env_kwargs))


def assets_exclusion(manifest: KitchenManifest, assets_root: Path | None = None) -> str | None:
    """Why a real-asset task cannot load here, naming the missing paths and the fix; None when it can (or is a kit task)."""
    from . import assets as robocasa_assets
    from . import kit as robocasa_kit

    if manifest.upstream.assets == "placeholder":
        return None
    root, source = robocasa_assets.resolve_root(assets_root)
    if root is None:
        return f"task {manifest.id!r}: RoboCasa is not installed here, so it has no asset root; install praxis-robocasa"
    if robocasa_kit.is_kit(root):
        return f"task {manifest.id!r} needs RoboCasa's assets but {root} ({source}) is the placeholder kit"
    by_part = robocasa_assets.missing_by_part(root, robocasa_assets.parts_needed(
        manifest.upstream.obj_registries, manifest.upstream.env_kwargs))
    if not any(paths for _, paths in by_part):
        return None
    return (f"task {manifest.id!r}: RoboCasa assets missing under {root} ({source}): "
            f"{robocasa_assets.describe_missing(root, by_part)}. Get them with RoboCasa's script "
            f"({robocasa_assets.download_hint(root, by_part)}) or point roboswe at them (`roboswe assets robocasa --path DIR`)")


def _prepare_assets(manifest: KitchenManifest, assets_root: Path | None, kit_dir: Path | None) -> Path:
    """The asset root this task runs on, made current for RoboCasa before it is imported."""
    from . import kit as robocasa_kit
    from . import shims as robocasa_shims

    # RoboCasa's asset root is fixed for the process once imported; a caller that names no
    # root (a video renderer, replay) gets the one this process already serves, if it fits.
    current = sys.modules.get("robocasa.models")
    if (current is not None and kit_dir is None and assets_root is None
            and robocasa_kit.is_kit(current.assets_root) == (manifest.upstream.assets == "placeholder")):
        return Path(current.assets_root).resolve()
    if manifest.upstream.assets == "placeholder":
        package = robocasa_kit.robocasa_package_dir()
        root = (kit_dir or DEFAULT_KIT_DIR / manifest.upstream.version)
        root = robocasa_kit.write_kit(root, package=package)
    else:
        from . import assets as robocasa_assets

        problem = assets_exclusion(manifest, assets_root)
        if problem:
            raise AssetsMissing(problem)
        root = robocasa_assets.resolve_root(assets_root)[0]
    robocasa_shims.redirect_asset_root(root)
    return Path(root).resolve()


# ---- backend ---------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    import mujoco
    import robocasa
    import robosuite

    return {"robosuite": robosuite.__version__, "robocasa": robocasa.__version__, "mujoco": mujoco.__version__,
            "numpy": np.__version__}


class RobocasaBackend(RobosuiteBackend):
    """A RoboCasa kitchen task scene built from a manifest. One thread must own it (GL context)."""

    def __init__(self, manifest: TaskManifest | dict, *, trial_steps: int | None = None,
                 require_fixed_hash_seed: bool = False, assets_root: Path | None = None, kit_dir: Path | None = None,
                 kit_layout: dict | None = None, hidden_seed: bool = False):
        # kit_layout: a generated variant of the kit's kitchen in place of kit.kit_layout() (RLE-Bench's hidden
        # kitchens, roboswe/rle/kitchen/plan.py); only for a kit task (layout = "kit"). hidden_seed: the seeds
        # are a hidden plan's, never logged (the run's events.jsonl would hold them before the verifier reveals them)
        self._hidden_seed = hidden_seed
        if require_fixed_hash_seed and sys.flags.hash_randomization:
            raise SimError("this simulator process runs with hash randomization; start it with PYTHONHASHSEED=0 "
                           "so set/dict iteration order cannot change the scene")
        manifest = kitchen_manifest(manifest)
        up = manifest.upstream
        self.assets_root = _prepare_assets(manifest, assets_root, kit_dir)
        self.assets_label = up.assets
        import mujoco
        import robocasa
        import robosuite
        from robosuite.controllers import load_composite_controller_config

        from . import kit as robocasa_kit
        from . import shims as robocasa_shims

        robocasa_shims.install()
        versions = _versions()
        if (versions["robocasa"] != up.version or versions["robosuite"] != up.robosuite
                or not versions["mujoco"].startswith(up.mujoco + ".")):
            raise SimError(
                f"task {manifest.id!r} pins robocasa {up.version} / robosuite {up.robosuite} / mujoco {up.mujoco}.x but "
                f"this process has robocasa {versions['robocasa']} / robosuite {versions['robosuite']} / mujoco "
                f"{versions['mujoco']}; install praxis-robocasa=={up.version}"
            )
        task_cls = robocasa.environments.kitchen.kitchen.REGISTERED_KITCHEN_ENVS.get(up.env)
        if task_cls is None:
            raise SimError(f"task {manifest.id!r}: RoboCasa has no task class {up.env!r}")
        self.manifest = manifest
        self._mujoco = mujoco
        self._start_trial_bookkeeping(manifest, trial_steps)
        cfg = load_composite_controller_config(controller=None, robot=up.robot)
        if cfg.get("type") != manifest.controller.composite:
            raise SimError(f"task {manifest.id!r}: {up.robot}'s default controller is {cfg.get('type')}, the manifest "
                           f"says {manifest.controller.composite}")
        for part, part_cfg in manifest.controller.parts.items():
            cfg["body_parts"][part] = dict(part_cfg)
        if kit_layout is not None and up.layout != "kit":
            raise SimError(f"task {manifest.id!r}: a kit layout variant needs a kit task (layout = \"kit\")")
        layout = (kit_layout or robocasa_kit.kit_layout()) if up.layout == "kit" else up.layout
        style = robocasa_kit.kit_style() if up.style == "kit" else up.style
        self._paths = path_tokens({str(self.assets_root): "{assets}", str(Path(robocasa.__file__).parent): "{robocasa}",
                                   str(Path(robosuite.__file__).parent): "{robosuite}"})
        t0 = time.perf_counter()
        try:
            self.env = robocasa_shims.task_class(task_cls)(
                robots=up.robot, controller_configs=cfg, has_renderer=False,
                has_offscreen_renderer=False,  # we render from a scratch copy of the state (sim/render.py)
                use_camera_obs=False, use_object_obs=True, control_freq=manifest.control_hz,
                horizon=10**9, ignore_done=True,  # our budgets govern, not the upstream horizon
                seed=manifest.seed, layout_ids=layout, style_ids=style, renderer=robocasa_shims.RENDERER,
                obj_registries=tuple(up.obj_registries), translucent_robot=False, randomize_cameras=False,
                **up.env_kwargs,
            )
        except Exception as e:
            raise SimError(f"task {manifest.id!r}: RoboCasa could not set up {up.env} with {up.robot}: {e}") from e
        self.build_seconds = time.perf_counter() - t0
        self.control_dt = 1.0 / manifest.control_hz  # robosuite sets control_timestep only when the model loads
        self._versions = {**versions, "assets": up.assets}
        self._renderer = None
        self._asset_hashes: dict[str, str] = {}
        self.reset_seconds: float | None = None

    # ---- the scene RoboCasa rebuilt -------------------------------------------------------

    def _bind_scene(self) -> None:
        """Take the freshly built model: data pointers, action parts, allowlist, renderer, digests."""
        self._bind_model()
        self._bind_action_bounds("RoboCasa")
        self._check_allowlist()
        if self._renderer is not None:
            self._renderer.close()
        self._renderer = self._scene_renderer()
        xml = self.env.model.get_xml()
        files = sorted(set(FILE_ATTR.findall(xml)))
        self._xml_sha256 = sha256_hex(portable(xml, self._paths).encode())  # the compiled model keeps file paths
        # sha256 over (placeholder path, content sha256) of every file the model names: the asset tree it uses
        self._assets_sha256 = sha256_hex(json.dumps(used_assets(self.manifest.id, files, self._paths,
                                                                self._asset_hashes)).encode())

    def _derive_parts(self) -> list[_Part]:
        """Arm, gripper, mobile base, torso and the mode switch, read from the live controllers and model."""
        cc = self._robot.composite_controller
        parts: list[_Part] = []
        for part_name, (start, end) in cc._action_split_indexes.items():
            ctrl = cc.part_controllers[part_name]
            n = end - start
            if n == 0:
                continue
            if part_name in cc.grippers:
                parts.append(self._gripper_part(part_name, start, n, ctrl, cc.grippers[part_name]))
            elif ctrl.name == "OSC_POSE" and ctrl.input_type == "delta" and ctrl.impedance_mode == "fixed":
                scale = np.asarray(ctrl.output_max, dtype=float)
                frame = f"robot {ctrl.input_ref_frame} frame"
                units = [f"1.0 = {scale[i]:g} m per control step, {frame}" for i in range(3)]
                units += [f"1.0 = {scale[i]:g} rad (axis-angle) per control step, {frame}" for i in range(3, 6)]
                parts.append(_Part(
                    name=part_name, start=start, low=np.asarray(ctrl.input_min, dtype=float).copy(),
                    high=np.asarray(ctrl.input_max, dtype=float).copy(),
                    names=[f"{part_name}.{a}" for a in ("dx", "dy", "dz", "dax", "day", "daz")], units=units, hold="zero",
                    doc=(f"{part_name} arm, OSC_POSE delta: [dx, dy, dz] end-effector translation scaled by "
                         f"{scale[:3].tolist()} m and [dax, day, daz] axis-angle rotation scaled by {scale[3:].tolist()} rad, "
                         f"in the {frame} (the mobile base), relative to the current pose; zero holds the pose."),
                ))
            elif part_name == "base" and ctrl.name == "JOINT_VELOCITY":
                lo_v, hi_v = np.asarray(ctrl.actuator_min, dtype=float), np.asarray(ctrl.actuator_max, dtype=float)
                axes = ["forward", "side", "yaw"][:n]
                units = [f"velocity command: -1..1 spans the actuator range [{lo_v[i]:g}, {hi_v[i]:g}] "
                         f"({'rad/s' if a == 'yaw' else 'm/s'}), in the base's current heading" for i, a in enumerate(axes)]
                parts.append(_Part(
                    name=part_name, start=start, low=np.asarray(ctrl.input_min, dtype=float).copy(),
                    high=np.asarray(ctrl.input_max, dtype=float).copy(), names=[f"base.{a}" for a in axes], units=units,
                    hold="zero",
                    doc=("mobile base, joint velocity: [forward, side, yaw] relative to the base's current heading, each "
                         "-1..1 mapped linearly onto its actuator's velocity range; zero stops the base."),
                ))
            elif part_name == "torso" and ctrl.name == "JOINT_POSITION" and ctrl.input_type == "delta":
                scale = float(np.asarray(ctrl.output_max, dtype=float).reshape(-1)[0])
                parts.append(_Part(
                    name=part_name, start=start, low=np.asarray(ctrl.input_min, dtype=float).reshape(-1)[:n].copy(),
                    high=np.asarray(ctrl.input_max, dtype=float).reshape(-1)[:n].copy(), names=["torso.lift"],
                    units=[f"1.0 = {scale:g} m change of the torso lift target per control step"], hold="zero",
                    doc=f"torso lift, JOINT_POSITION delta: 1.0 raises the lift target by {scale:g} m; zero holds it.",
                ))
            else:
                raise SimError(
                    f"task {self.manifest.id!r}: controller part {part_name!r} ({ctrl.name}, input "
                    f"{getattr(ctrl, 'input_type', '?')}) has no validated action spec in roboswe yet"
                )
        used = sum(len(p.low) for p in parts)
        if self.env.action_dim == used + 1:  # HYBRID_MOBILE_BASE appends the mode switch
            parts.append(_Part(
                name="mode", start=used, low=np.array([-1.0]), high=np.array([1.0]), names=["mode"],
                units=["sign only: > 0 base mode, <= 0 arm mode"], hold="zero",
                doc=("mode switch (last component): > 0 = base mode (the arm's goal moves with the base), <= 0 = arm mode "
                     "(the arm holds its pose in the world while the base moves); RoboCasa's demonstrations use -1 "
                     "except while driving."),
            ))
        return sorted(parts, key=lambda p: p.start)

    # ---- lifecycle ----------------------------------------------------------------------

    def reset(self, seed: int) -> Fingerprint:
        """Re-seed RoboCasa's generator (and numpy's global one, see robocasa_shims) and rebuild the kitchen."""
        from . import shims as robocasa_shims

        self.env.rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state
        robocasa_shims.seed_global_rng(seed)
        self._loaded = False
        t0 = time.perf_counter()
        try:
            self.env.reset()
        except robocasa_shims.RobocasaShimError as e:
            raise SimError(f"task {self.manifest.id!r}: {e}") from e
        except Exception as e:
            raise SimError(f"task {self.manifest.id!r} seed {seed}: RoboCasa could not build the kitchen: "
                           f"{type(e).__name__}: {e}") from e
        self.reset_seconds = time.perf_counter() - t0
        self._physics_s += self.reset_seconds
        self._bind_scene()
        self._step = 0
        self._tracker.reset()
        self._states.take()
        self._last = np.zeros(len(self._low))
        initial = snapshot(self.data)
        self._states.append(0, 0.0, initial)
        if self.env._check_success():
            raise ResetError(f"task {self.manifest.id!r} seed {seed}: the reset state already satisfies success; "
                             "this seed cannot be admitted (pick another seed in the manifest)")
        self._loaded = True
        self._fingerprinted(initial, compiled_model_digest(self.model), seed,
                            {**self._versions, "assets_sha256": self._assets_sha256})
        log.info("sim.reset", task=self.manifest.id, seed="hidden" if self._hidden_seed else seed, assets=self.assets_label,
                 fingerprint=self.fingerprint.digest[:16], reset_seconds=round(self.reset_seconds, 2))
        return self.fingerprint

    def close(self) -> None:
        try:
            if self._renderer is not None:
                self._renderer.close()
        finally:
            self.env.close()

    def language(self) -> str:
        """RoboCasa's own instruction for the current episode (e.g. 'Open the left drawer.')."""
        return str(self.env.get_ep_meta().get("lang", ""))
