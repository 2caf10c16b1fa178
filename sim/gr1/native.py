"""GR1 tabletop NATIVE tasks (the GR1 tabletop protocol): robocasa_gr1's own task classes under the 29-D contract.

The env is built the way robocasa_gr1's gym factory builds it (``gymnasium_basic.create_env_robosuite``
behind ``gr1_unified/<task>_GR1ArmsAndWaistFourierHands_Env``): the robot's default composite
config turned BASIC with no part ordering and ``control_delta = False``, the task class's own
defaults (hard reset, its distractors, ``horizon`` 1000, ``ignore_done``), no layout or style
arguments (the factory does not forward them), seed 20260907. Only rendering differs: roboswe
draws the egoview on demand from the state (sim/render.py) instead of on every step, then
applies the native image pipeline.

Native part order is robosuite's (right, left, torso, right_gripper, left_gripper); the
contract's 29-D order is [left arm, right arm, left hand, right hand, waist]. Each action is
validated in contract order (reject, never clip) and then placed into the native slots by part,
exactly as the native gym wrapper assembles its action dict.

Seeding: a fresh native constructor and one explicit seeded reset (``np.random.seed(seed)``,
then ``env.reset()``), as the gym wrapper does; a second reset builds a fresh constructor again,
so a replay starts from the same state. Success is the task's ``_check_success`` as robosuite's
``reward`` gives it on each step (``info.success = reward > 0``), with no second query.

Assets: ``upstream.assets_root`` in the manifest, else ``$ROBOCASA_GR1_ASSETS``, else
robocasa_gr1's own ``models/assets`` (where its download scripts write). robocasa_gr1 reads its
asset root once at import, so the backend points it at the chosen root before importing it; one
simulator process serves one root. ``upstream.assets = "placeholder"`` runs on the generated kit
(sim/gr1/kit.py) and every record says so.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import structlog
from roboswe.protocol.sim import Fingerprint

from ..backend import PhysicsFailure, ResetError, SimError
from ..fingerprint import (
    FILE_ATTR,
    compiled_model_digest,  # path-free: the kit or the assets may live anywhere
    path_tokens,
    portable,
    sha256_hex,
    used_assets,
)
from ..physics_state import snapshot
from ..render import SceneRenderer
from .manifest import (
    NATIVE_ASSET_FOLDERS,
    AssetsMissing,
    Gr1Manifest,
    check_hash_sentinel,
    contract_for,
    gr1_manifest,
    pinned_versions,
)
from .standin import Gr1StandinBackend

log = structlog.get_logger()

ENV_VAR = "ROBOCASA_GR1_ASSETS"
DEFAULT_KIT_DIR = Path.home() / ".cache" / "roboswe" / "robocasa-gr1-kit"
# ---- the asset root --------------------------------------------------------------------------


def package_assets() -> Path:
    from .kit import package_dir

    return package_dir() / "models" / "assets"


def resolve_asset_root(manifest: Gr1Manifest) -> tuple[Path, str]:
    """(root, where it came from): the manifest's ``assets_root``, ``$ROBOCASA_GR1_ASSETS``, or the package's folder."""
    if manifest.upstream.assets_root:
        return Path(manifest.upstream.assets_root).expanduser().resolve(), "upstream.assets_root"
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser().resolve(), f"${ENV_VAR}"
    if manifest.upstream.assets == "placeholder":
        return DEFAULT_KIT_DIR.resolve(), "the default kit folder"
    return package_assets().resolve(), "robocasa_gr1/models/assets"


def asset_problems(root: Path) -> list[str]:
    """What a real-asset root lacks: missing folders, and fixture meshes/textures the shipped fixture XML names."""
    from .kit import missing_shipped_files

    missing = [str(root / folder) for folder in NATIVE_ASSET_FOLDERS if not (root / folder).is_dir()]
    if (root / "fixtures").is_dir():
        # The package ships fixture XML without their meshes; the fixtures download brings them.
        absent = [rel for rel in missing_shipped_files(package_assets()) if rel.startswith("fixtures/")
                  and not (root / rel).exists()]
        if absent:
            missing.append(f"{len(absent)} fixture mesh/texture files under {root / 'fixtures'} (e.g. {root / absent[0]})")
    return missing


def prepare_assets(manifest: Gr1Manifest) -> tuple[Path, str]:
    """The asset root this task runs on (writing the kit for placeholder tasks); raises AssetsMissing or SimError."""
    from . import kit as gr1_kit

    root, source = resolve_asset_root(manifest)
    if manifest.upstream.assets == "placeholder":
        try:
            return gr1_kit.write_kit(root), source
        except gr1_kit.KitError as e:
            raise SimError(f"task {manifest.id!r}: {e}") from None
    if gr1_kit.is_kit(root):
        raise AssetsMissing(f"task {manifest.id!r} needs RoboCasa GR1's assets but {root} ({source}) is the placeholder kit")
    missing = asset_problems(root)
    if missing:
        raise AssetsMissing(
            f"task {manifest.id!r} ({manifest.upstream.env}, native): RoboCasa GR1 assets missing under {root} ({source}): "
            f"{missing}. Download them with robocasa_gr1's scripts (python -m robocasa_gr1.scripts.download_tabletop_assets -y "
            f"fetches textures, fixtures, objaverse, sketchfab and lightwheel into the package) on a machine that can, then "
            f"point roboswe at that folder (upstream.assets_root or ${ENV_VAR})")
    return root, source


def redirect_asset_root(root: Path) -> None:
    """Make ``robocasa_gr1.models.assets_root`` be ``root`` before robocasa_gr1 reads it at import (its
    object registry scan and ``BASE_ASSET_ZOO_PATH``); raises SimError if it was imported with another root."""
    from ..robocasa.shims import RobocasaShimError
    from ..robocasa.shims import redirect_asset_root as redirect

    try:
        redirect(root, package="robocasa_gr1")
    except RobocasaShimError as e:
        raise SimError(str(e)) from None


# ---- the native constructor ------------------------------------------------------------------


def native_controller_config(robot: str) -> dict:
    """robocasa_gr1's RoboCasaEnv controller config: the robot's default, BASIC, no part ordering, absolute."""
    from robosuite.controllers import load_composite_controller_config

    cfg = load_composite_controller_config(controller=None, robot=robot)
    cfg["type"] = "BASIC"
    cfg["composite_controller_specific_configs"] = {}
    cfg["control_delta"] = False
    return cfg


def native_env_kwargs(manifest: Gr1Manifest, robot: str, image_size: tuple[int, int], seed: int) -> dict:
    """``create_env_robosuite``'s kwargs for the task, except that robosuite renders nothing (roboswe renders on demand)."""
    width, height = image_size
    return {
        "robots": [robot], "controller_configs": native_controller_config(robot), "camera_names": ["egoview"],
        "camera_widths": width, "camera_heights": height, "has_renderer": False,
        "has_offscreen_renderer": False, "use_camera_obs": False,  # native: enable_render=True; no effect on physics
        "ignore_done": True, "use_object_obs": True, "camera_depths": False, "seed": seed, "translucent_robot": False,
        "obj_instance_split": None, "generative_textures": None, "randomize_cameras": False,
    }


class Gr1NativeBackend(Gr1StandinBackend):
    """A robocasa_gr1 tabletop task under the GR1 tabletop contract (the stand-in's checks, allowlist and validation)."""

    def __init__(self, manifest: Gr1Manifest | dict, *, trial_steps: int | None = None,
                 require_fixed_hash_seed: bool = False):
        manifest = gr1_manifest(manifest)
        if manifest.fidelity != "native":
            raise SimError(f"task {manifest.id!r} is {manifest.fidelity}; Gr1NativeBackend runs native tasks only")
        if require_fixed_hash_seed:
            check_hash_sentinel()
        self.assets_root, self.assets_source = prepare_assets(manifest)
        redirect_asset_root(self.assets_root)
        import mujoco
        import robocasa_gr1  # registers the task classes with robosuite
        import robosuite
        from robosuite.environments.base import REGISTERED_ENVS

        up = manifest.upstream
        self.contract, self._contract_sha256 = contract_for(manifest)
        versions = pinned_versions(manifest)
        self._task_cls = REGISTERED_ENVS.get(up.env)
        if self._task_cls is None or list(getattr(self._task_cls, "VALID_LAYOUTS", []) or []) != up.layouts:
            raise SimError(f"task {manifest.id!r}: robocasa_gr1 has no task {up.env!r} with VALID_LAYOUTS {up.layouts}")
        self.manifest = manifest
        self._mujoco = mujoco
        self._start_trial_bookkeeping(manifest, trial_steps)
        self._paths = path_tokens({str(self.assets_root): "{assets}", str(Path(robocasa_gr1.__file__).parent): "{robocasa_gr1}",
                                   str(Path(robosuite.__file__).parent): "{robosuite}"})
        self._versions = {**versions, "fidelity": manifest.fidelity, "contract_sha256": self._contract_sha256,
                          "assets": up.assets, "native_env_id": self.contract.robot.native_env_id.format(task=up.env)}
        self._low, self._high = self.contract.low, self.contract.high
        self._names = self.contract.component_names
        self._renderer: SceneRenderer | None = None
        self._asset_hashes: dict[str, str] = {}
        self._native_success = False
        self.env = None
        self._fresh_for: int | None = None
        self._construct(manifest.seed)
        self.control_dt = float(self.env.control_timestep)

    # ---- construction and the scene reset rebuilt ------------------------------------------

    def _construct(self, seed: int) -> None:
        """A fresh native constructor with ``seed`` (the previous env, if any, is closed)."""
        if self.env is not None:
            self.env.close()
            self.env = None
        import robosuite

        pipe = self.contract.observation.pipeline
        kwargs = native_env_kwargs(self.manifest, self.contract.robot.name, (pipe.width, pipe.height), seed)
        t0 = time.perf_counter()
        try:
            self.env = robosuite.make(self.manifest.upstream.env, **kwargs)
        except Exception as e:
            raise SimError(f"task {self.manifest.id!r}: robocasa_gr1 could not build {self.manifest.upstream.env}: "
                           f"{type(e).__name__}: {e}") from e
        self.build_seconds = time.perf_counter() - t0
        self._fresh_for = seed

    def _bind_scene(self) -> None:
        """Take the model the reset compiled: pointers, parts, renderer, native slots, XML and asset digests."""
        self._bind_model()
        self._units = [u for p in self._parts for u in p.units]
        split = self._robot.composite_controller._action_split_indexes
        try:
            self._native_index = np.concatenate([np.arange(*split[s.part]) for s in self.contract.action.slices])
        except KeyError as e:
            raise SimError(f"task {self.manifest.id!r}: the native controller has no part {e.args[0]!r}") from None
        if self._renderer is not None:
            self._renderer.close()
        pipe, video = self.contract.observation.pipeline, self.manifest.video
        self._renderer = SceneRenderer(self.model, max(pipe.width, video.width), max(pipe.height, video.height))
        xml = self.env.model.get_xml()
        self._scene_xml = portable(xml, self._paths)
        self._xml_sha256 = sha256_hex(self._scene_xml.encode())
        self._used_assets = used_assets(self.manifest.id, sorted(set(FILE_ATTR.findall(xml))), self._paths,
                                        self._asset_hashes)
        self._assets_sha256 = sha256_hex(json.dumps(self._used_assets).encode())

    def contract_split_problems(self, split: dict[str, tuple[int, int]]) -> list[str]:
        """Native parts keep robosuite's order; only their widths must be the contract's (actions are placed by part)."""
        want = {s.part: s.stop - s.start for s in self.contract.action.slices}
        widths = {k: b - a for k, (a, b) in split.items()}
        return [] if widths == want else [f"native action parts {widths} differ from the contract's {want}"]

    # ---- lifecycle ------------------------------------------------------------------------

    def reset(self, seed: int) -> Fingerprint:
        """A fresh native constructor (unless this one is still unused for ``seed``) and one seeded reset."""
        self._loaded = False
        if self._fresh_for != seed:
            self._construct(seed)
        self._fresh_for = None  # used: the next reset needs a fresh constructor
        np.random.seed(seed)  # the gym wrapper's reset does this before env.reset()
        t0 = time.perf_counter()
        try:
            self.env.reset()
        except Exception as e:
            raise SimError(f"task {self.manifest.id!r} seed {seed}: robocasa_gr1 could not build the scene: "
                           f"{type(e).__name__}: {e}") from e
        self.reset_seconds = time.perf_counter() - t0
        self._physics_s += self.reset_seconds
        self._bind_scene()
        self.check_contract()
        self._step = 0
        self._tracker.reset()
        self._states.take()
        self._last = np.zeros(len(self._low))
        joint = lambda j: self.data.qpos[self.model.jnt_qposadr[self._mujoco.mj_name2id(self.model, self._mujoco.mjtObj.mjOBJ_JOINT, j)]]
        for s in self.contract.action.slices:  # initial hold: the measured arm/waist joints (the native reset
            if not s.part.endswith("_gripper"):  # sets the elbows after its controllers last read them), open hands
                self._last[s.start:s.stop] = np.clip([joint(j) for j in s.joints], s.low, s.high)
        initial = snapshot(self.data)
        self._states.append(0, 0.0, initial)
        if self.env._check_success():
            raise ResetError(f"task {self.manifest.id!r} seed {seed}: the native reset state already satisfies success; "
                             "that is an error of this seed, never a reason to resample")
        self._native_success = False
        self._loaded = True
        self._fingerprinted(initial, compiled_model_digest(self.model), seed,
                            {**self._versions, "assets_sha256": self._assets_sha256, "native_layout": str(self.env.layout_id),
                             "native_style": str(self.env.style_id)})
        log.info("sim.reset", task=self.manifest.id, seed=seed, assets=self.manifest.upstream.assets,
                 layout=self.env.layout_id, style=self.env.style_id, fingerprint=self.fingerprint.digest[:16])
        return self.fingerprint

    def close(self) -> None:
        try:
            if self._renderer is not None:
                self._renderer.close()
        finally:
            if self.env is not None:
                self.env.close()

    # ---- control ------------------------------------------------------------------------

    def native_action(self, action: np.ndarray) -> np.ndarray:
        """A validated contract-order action placed into the native part slots."""
        native = np.empty(len(action))
        native[self._native_index] = action
        return native

    def _physics_step(self, action: np.ndarray) -> None:
        unstable_before = self._instability_warnings()
        try:
            _, reward, _, _ = self.env.step(self.native_action(action))
        except Exception as e:
            self._loaded = False
            raise PhysicsFailure(f"control step {self._step + 1} failed inside robocasa_gr1/MuJoCo: {type(e).__name__}: {e}") from e
        if self._instability_warnings() != unstable_before or not np.isfinite(self.data.qpos).all():
            self._loaded = False
            raise PhysicsFailure(f"physics became unstable at control step {self._step + 1}; the scene is retired, load the task again")
        self._native_success = bool(reward > 0)  # the gym wrapper's info.success; reward() is _check_success()
        self._last = action.copy()

    def predicate_now(self) -> bool:
        return self._native_success

    # ---- evidence -----------------------------------------------------------------------

    def task_record(self, end: str | None) -> tuple[dict, dict[str, bytes]]:
        """Private native evidence: actual layout/style, episode metadata, assets label, compiled scene XML, used assets."""
        if not hasattr(self, "_scene_xml"):
            return {}, {}
        ep = self.env.get_ep_meta()
        data = {"assets": self.manifest.upstream.assets, "assets_source": self.assets_source,
                "native_env_id": self._versions["native_env_id"], "layout_id": int(self.env.layout_id),
                "style_id": int(self.env.style_id), "lang": str(ep.get("lang", "")),
                "used_assets": len(self._used_assets), "assets_sha256": self._assets_sha256}
        files = {"scene.xml": self._scene_xml.encode(),
                 "used_assets.json": json.dumps(self._used_assets, indent=1).encode()}
        return data, files


# ---- admission ------------------------------------------------------------------------------


# ---- native --------------------------------------------------------------------------------------


def check_native(manifest: Gr1Manifest) -> None:
    """Raise AssetsMissing naming every missing asset path of a native task, SimError if robocasa_gr1 lacks its class.

    Checks the assets before importing robocasa_gr1 (the import fixes its asset root for the process).
    The task class must be robocasa_gr1's, with the manifest's layouts as its VALID_LAYOUTS.
    """
    root, _ = prepare_assets(manifest)
    redirect_asset_root(root)
    from robocasa_gr1.environments.tabletop.tabletop import (
        Tabletop,  # registers its task classes with robosuite
    )
    from robosuite.environments.base import REGISTERED_ENVS

    up = manifest.upstream
    task_cls = REGISTERED_ENVS.get(up.env)
    if not (isinstance(task_cls, type) and issubclass(task_cls, Tabletop)):
        raise SimError(f"task {manifest.id!r}: robocasa_gr1 has no task class {up.env!r}")
    valid = list(getattr(task_cls, "VALID_LAYOUTS", []) or [])
    if valid != up.layouts:
        raise SimError(f"task {manifest.id!r}: {up.env}.VALID_LAYOUTS is {valid} but the manifest says layouts = {up.layouts}")
