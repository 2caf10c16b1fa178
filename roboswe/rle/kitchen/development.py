"""Family 01's development scene (``DevelopmentScene``, roboswe/rle/scene.py) and the kitchen both phases share.

``KitchenScene`` is one RoboCasa task through sim/robocasa's backend: the manifest's RoboCasa task
class and its own ``_check_success`` (held for the kitchen manifest's success interval), PandaOmron's
native 12-component action, the kitchen manifest's cameras (RGB-D with calibration) and
proprioception. The harness level decides what else the participant reads:

- L1: cameras (RGB-D), proprioception, native actions;
- L2: L1, plus the client skills and harness manual copied into the workspace (``workspace_files``:
  ``kitchen_skills.py`` and ``HARNESS_MANUAL.md``, sandbox-side code, no model weights);
- L3: L2, plus selected privileged state under ``priv_*`` keys (``PRIVILEGED``): the task object's
  pose, extent and grasp state, and the target fixture's exterior box and joint openings.

Development loads public seed *s* as RoboCasa seed *s* in the kit's (or the manifest's) kitchen; the
hidden evaluation kitchens (plan.py) are built by the evaluation simulator from the same class.
"""

from __future__ import annotations

import math
import os
from importlib import resources
from pathlib import Path

import msgspec
import numpy as np

from roboswe.configs import CONFIGS_DIR
from roboswe.protocol import sim as simp

from ..manifest import RleTask
from .plan import HiddenKitchen, kit_variant
from .rules import PRIVILEGED_PREFIX

KIT_DIR_ENV = "ROBOSWE_ROBOCASA_KIT"
"""Where the placeholder kit lives when set (tests share one); else sim/robocasa's default cache."""
RESEED = 1_000_003
"""A seed whose reset already satisfies the predicate is replaced by seed + RESEED (deterministically, so replay agrees)."""
MAX_RESEEDS = 4
SKILLS_FILES = ("kitchen_skills.py", "HARNESS_MANUAL.md")
PRIVILEGED = {  # key: (what, length)
    "priv_obj_pos": "the task object's centre, world frame, m (3)",
    "priv_obj_quat": "the task object's orientation, world frame, (w, x, y, z) (4)",
    "priv_obj_extent": "the task object's full size along its own axes, m (3)",
    "priv_obj_grasped": "1.0 while the gripper grasps the task object, else 0.0 (1)",
    "priv_fixture_box": "the target fixture's exterior box, world frame: corner p0 and the corners along its x, y, z edges, m (12)",
    "priv_fixture_interior": "the target fixture's first interior region (a drawer's moves with it), world frame, corners as priv_fixture_box, m (12)",
    "priv_fixture_joints": "the target fixture's door/drawer joints, 0 closed .. 1 open, in RoboCasa's joint order (n)",
}
"""L3's selected privileged state; absent parts (a task with no object) are not in the spec."""


def kitchen_manifest_for(task: RleTask, kitchen: HiddenKitchen | None = None):
    """The kitchen manifest that backs the task: its kitchen_task with the task's RoboCasa class and reviewed predicate."""
    from roboswe.sim.robocasa.backend import load_kitchen_manifest

    k = task.kitchen
    base = load_kitchen_manifest(CONFIGS_DIR / "tasks" / f"{k.kitchen_task}.toml")
    upstream = msgspec.structs.replace(base.upstream, env=k.env)
    if kitchen is not None and kitchen.layout is not None:  # real assets: RoboCasa's own layout and style
        upstream = msgspec.structs.replace(upstream, layout=kitchen.layout, style=kitchen.style)
    success = msgspec.structs.replace(base.success, review=k.review, predicate_sha256=k.predicate_sha256)
    return msgspec.structs.replace(base, id=task.id, instruction=task.instruction.strip(), upstream=upstream,
                                   success=success)


class KitchenScene:
    """One RoboCasa kitchen task at the task's harness level; a fresh backend per kitchen layout."""

    def __init__(self, task: RleTask, *, steps: int, kitchen: HiddenKitchen | None = None):
        from roboswe.sim.robocasa.backend import RobocasaBackend

        self.task, self.level = task, task.kitchen.level
        self.manifest = kitchen_manifest_for(task, kitchen)
        layout = kit_variant(kitchen) if kitchen is not None and task.placeholder else None
        kit_dir = os.environ.get(KIT_DIR_ENV)
        self.backend = RobocasaBackend(self.manifest, trial_steps=steps, kit_dir=Path(kit_dir) if kit_dir else None,
                                       kit_layout=layout, hidden_seed=kitchen is not None)
        self.control_hz = self.manifest.control_hz
        self.cameras = [simp.CameraInfo(name=c.name, width=c.width, height=c.height, depth=c.depth,
                                        calibration=c.calibration) for c in self.manifest.observation.cameras]
        self.seed: int | None = None
        self.privileged: bool = self.level == "L3"

    @property
    def action(self) -> simp.ActionSpec:
        return self.backend.action_spec()

    @property
    def state_keys(self) -> list[str]:
        return [*self.manifest.allowed_state_keys, *(self._privileged().keys() if self.privileged else ())]

    def load(self, seed: int) -> None:
        """RoboCasa seed ``seed`` (or its deterministic replacement when its first state is already a success)."""
        from roboswe.sim.backend import ResetError

        for k in range(MAX_RESEEDS + 1):
            try:
                self.backend.reset(seed + k * RESEED)
                self.seed = seed + k * RESEED
                return
            except ResetError:
                if k == MAX_RESEEDS:
                    raise

    def values(self, control_step: int) -> dict[str, list[float]]:
        out = {k: v.astype(float).tolist() for k, v in self.backend.state().items()}
        if self.privileged:
            out.update(self._privileged())
        return out

    def observe(self, control_step: int, depth: bool) -> tuple[list[simp.CameraImage], list[bytes]]:
        frames = self.backend.observe([c.name for c in self.cameras], depth)
        blobs: list[bytes] = []
        images = []
        for f in frames:
            rgb_blob = len(blobs)
            blobs.append(np.ascontiguousarray(f.rgb).tobytes())
            depth_blob = None
            if f.depth is not None:
                depth_blob = len(blobs)
                blobs.append(f.depth.astype("<f4").tobytes())
            h, w = f.rgb.shape[:2]
            images.append(simp.CameraImage(camera=f.camera, width=w, height=h, rgb_blob=rgb_blob, depth_blob=depth_blob,
                                           K=None if f.K is None else f.K.tolist(),
                                           T_world_camera=None if f.T_world_camera is None else f.T_world_camera.tolist()))
        return images, blobs

    def step(self, row: list[float]) -> None:
        self.backend.step([row])

    def succeeded(self) -> bool:
        """RoboCasa's predicate held for the success interval at some step of this kitchen."""
        return self.backend.success().achieved

    def close(self) -> None:
        self.backend.close()

    # --- L3 ----------------------------------------------------------------------------------

    def _privileged(self) -> dict[str, list[float]]:
        env = self.backend.env
        out: dict[str, list[float]] = {}
        body = getattr(env, "obj_body_id", {}).get("obj")
        if body is not None:
            obj = env.objects["obj"]
            out["priv_obj_pos"] = env.sim.data.body_xpos[body].astype(float).tolist()
            out["priv_obj_quat"] = env.sim.data.body_xquat[body].astype(float).tolist()
            out["priv_obj_extent"] = np.asarray(getattr(obj, "size", [math.nan] * 3), dtype=float).tolist()[:3]
            grasped = env._check_grasp(gripper=env.robots[0].gripper["right"], object_geoms=obj)
            out["priv_obj_grasped"] = [1.0 if grasped else 0.0]
        fixture = _target_fixture(env)
        if fixture is not None:
            try:
                box = fixture.get_ext_sites(relative=False)
                out["priv_fixture_box"] = np.concatenate([np.asarray(p, dtype=float) for p in box]).tolist()
            except (ValueError, KeyError):
                pass
            interior = fixture.get_int_sites(relative=False) if getattr(fixture, "_regions", None) else {}
            if interior:
                corners = next(iter(interior.values()))
                out["priv_fixture_interior"] = np.concatenate([np.asarray(p, dtype=float) for p in corners]).tolist()
            joints = list(getattr(fixture, "door_joint_names", []) or [])
            if joints:
                state = fixture.get_joint_state(env, joints)
                out["priv_fixture_joints"] = [float(state[j]) for j in joints]
        return out


def _target_fixture(env):
    """The task's own fixture, as the RoboCasa task class names it (fxtr, drawer, microwave, ...)."""
    for name in ("fxtr", "drawer", "microwave", "stove", "fridge", "cab"):
        fixture = getattr(env, name, None)
        if hasattr(fixture, "get_ext_sites"):
            return fixture
    return None


class KitchenDevelopmentScene(KitchenScene):
    """The development scene on public seeds (``DEVELOPMENT_SCENES["kitchen"]``)."""

    max_batch: int

    def __init__(self, task: RleTask, salt: object = None):  # salt: the registry's second argument; public seeds need none
        super().__init__(task, steps=task.budget.charged_steps + 1)  # the ledger governs; the backend never cuts
        self.max_batch = task.kitchen.batch_max

    def guide(self) -> str:
        k = self.task.kitchen
        text = (f"Free: robot.observe(depth=True) ({[c.name for c in self.cameras]}, RGB-D with K and T_world_camera) "
                f"and robot.state() ({self.manifest.allowed_state_keys}). A row of robot.step_many([...]) is one native "
                f"action of {len(self.action.low)} components (robot.spec() names them); a batch holds 1..{k.batch_max} "
                f"rows and never more than the budget left (a larger one is refused whole). Each reset is a new public "
                f"kitchen. Level {self.level}.")
        if self.level in ("L2", "L3"):
            text += f" Client skills: {SKILLS_FILES[0]} in your workspace, documented in {SKILLS_FILES[1]}."
        if self.level == "L3":
            text += f" Privileged state (also in robot.state(), recorded as privileged): {sorted(self._privileged())}."
        return text


def workspace_files(level: str) -> dict[str, bytes]:
    """What the harness copies into the workspace before development at this level (L2, L3: the skills and manual)."""
    if level not in ("L2", "L3"):
        return {}
    here = resources.files("roboswe.rle.kitchen")
    return {name: here.joinpath(name).read_bytes() for name in SKILLS_FILES}


def privileged_keys(state_keys: list[str]) -> list[str]:
    return [k for k in state_keys if k.startswith(PRIVILEGED_PREFIX)]
