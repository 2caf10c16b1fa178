"""Offline stand-in scenes for the GR1 tabletop family: robosuite tables with our own predicates.

These are not RoboCasa GR1 tasks. They exist so the GR1 contract (29-D absolute joint action,
the egoview pipeline, the 29 encoders) can be exercised and admitted without RoboCasa's assets.
Their task ids are distinct from the native ones and every record says
``fidelity = "offline-standin"``. Importing this module registers the environments with
robosuite (its EnvMeta does that on class creation); it needs robosuite and robocasa_gr1 (for
the GR1ArmsAndWaistFourierHands robot class).

The egoview camera is mounted on the robot's ``head_pitch`` body at the native offset, pose and
field of view (contract ``observation.pipeline``), so the policy image is framed as natively.
"""

from __future__ import annotations

import numpy as np
import robocasa_gr1.models.robots  # noqa: F401  (registers GR1ArmsAndWaistFourierHands with robosuite)
from robosuite.environments.manipulation.manipulation_env import ManipulationEnv
from robosuite.models.arenas import TableArena
from robosuite.models.objects import BoxObject, CylinderObject
from robosuite.models.objects.composite import Bin
from robosuite.models.tasks import ManipulationTask
from robosuite.utils.mjcf_utils import array_to_string, find_elements
from robosuite.utils.placement_samplers import (
    SequentialCompositeSampler,
    UniformRandomSampler,
)
from robosuite.utils.transform_utils import quat2mat

from .contract import Pipeline, load_contract


def mount_egoview(robot_model, pipeline: Pipeline) -> None:
    """Add the egoview camera to the robot's head body, as robocasa_gr1's Tabletop.set_cameras does."""
    import xml.etree.ElementTree as ET

    head = find_elements(root=robot_model.worldbody, tags="body", attribs={"name": pipeline.camera_parent_body})
    if head is None:
        raise RuntimeError(f"the robot has no body {pipeline.camera_parent_body!r} to mount the egoview on")
    cam = ET.Element("camera", attrib={"mode": "fixed", "name": pipeline.camera, "pos": array_to_string(pipeline.camera_pos),
                                       "quat": array_to_string(pipeline.camera_quat), "fovy": f"{pipeline.camera_fovy:g}"})
    head.append(cam)


class Gr1StandinTabletop(ManipulationEnv):
    """A table in front of the fixed-base GR1 with the task's objects; subclasses add objects and a predicate."""

    language = ""

    def __init__(self, robots, *, table_full_size=(0.8, 1.2, 0.05), table_friction=(1.0, 5e-3, 1e-4),
                 use_object_obs=True, **kwargs):
        self.table_full_size = table_full_size
        self.table_friction = table_friction
        self.table_offset = np.array((0.0, 0.0, 0.8))
        self.use_object_obs = use_object_obs
        self._pipeline = load_contract().observation.pipeline
        kwargs.setdefault("camera_names", [])
        kwargs.pop("reward_shaping", None)
        super().__init__(robots=robots, base_types="default", **kwargs)

    # subclasses: objects (list), samplers, predicate
    def _objects(self) -> list:
        raise NotImplementedError

    def _sampler(self) -> SequentialCompositeSampler:
        raise NotImplementedError

    def _load_model(self):
        super()._load_model()
        robot = self.robots[0].robot_model
        robot.set_base_xpos(robot.base_xpos_offset["table"](self.table_full_size[0]))
        mount_egoview(robot, self._pipeline)
        arena = TableArena(table_full_size=self.table_full_size, table_friction=self.table_friction,
                           table_offset=self.table_offset)
        arena.set_origin([0, 0, 0])
        self.objects = self._objects()
        self.placement_initializer = self._sampler()
        self.model = ManipulationTask(mujoco_arena=arena, mujoco_robots=[robot], mujoco_objects=self.objects)

    def _setup_references(self):
        super()._setup_references()
        self.obj_body_id = {o.name: self.sim.model.body_name2id(o.root_body) for o in self.objects}

    def _reset_internal(self):
        super()._reset_internal()
        if not self.deterministic_reset:
            for pos, quat, obj in self.placement_initializer.sample().values():
                self.sim.data.set_joint_qpos(obj.joints[0], np.concatenate([np.array(pos), np.array(quat)]))

    def reward(self, action=None):
        return 1.0 if self._check_success() else 0.0

    def get_ep_meta(self):
        meta = super().get_ep_meta()
        meta["lang"] = self.language
        return meta

    # ---- predicate helpers (current scene only, stateless) ----------------------------------

    def _pos(self, name: str) -> np.ndarray:
        return np.array(self.sim.data.body_xpos[self.obj_body_id[name]])

    def _upright(self, name: str, max_tilt_deg: float = 15.0) -> bool:
        z = quat2mat(np.array(self.sim.data.body_xquat[self.obj_body_id[name]])[[1, 2, 3, 0]])[:, 2]
        return float(z[2]) >= np.cos(np.deg2rad(max_tilt_deg))

    def _touches_hand(self, obj) -> bool:
        robot = self.robots[0]
        return any(self.check_contact(robot.gripper[arm], obj) for arm in robot.arms)


class Gr1StandinCubeToBin(Gr1StandinTabletop):
    """Put the red cube into the open bin; holds while the cube's centre is inside the bin and no hand touches it."""

    language = "pick up the red cube and place it in the bin"
    bin_size = (0.2, 0.2, 0.08)
    bin_pos = (-0.1, -0.22)

    def _objects(self):
        self.cube = BoxObject(name="cube", size_min=[0.022] * 3, size_max=[0.022] * 3, rgba=[0.85, 0.1, 0.1, 1], rng=self.rng)
        self.bin = Bin(name="bin", bin_size=self.bin_size, wall_thickness=0.01, transparent_walls=False,
                       rgba=(0.45, 0.3, 0.15, 1.0))
        return [self.cube, self.bin]

    def _sampler(self):
        s = SequentialCompositeSampler(name="placement")
        s.append_sampler(UniformRandomSampler(
            name="bin", mujoco_objects=self.bin, x_range=[self.bin_pos[0]] * 2, y_range=[self.bin_pos[1]] * 2,
            rotation=0.0, ensure_object_boundary_in_range=False, ensure_valid_placement=False,
            reference_pos=self.table_offset, z_offset=0.0, rng=self.rng))
        s.append_sampler(UniformRandomSampler(
            name="cube", mujoco_objects=self.cube, x_range=[-0.16, -0.06], y_range=[0.10, 0.22], rotation=None,
            ensure_object_boundary_in_range=False, ensure_valid_placement=True, reference_pos=self.table_offset,
            z_offset=0.01, rng=self.rng))
        return s

    def _check_success(self):
        cube, box = self._pos("cube"), self._pos("bin")
        half_x, half_y, height = self.bin_size[0] / 2 - 0.01, self.bin_size[1] / 2 - 0.01, self.bin_size[2]
        inside = (abs(cube[0] - box[0]) < half_x and abs(cube[1] - box[1]) < half_y
                  and box[2] < cube[2] < box[2] + height)
        return bool(inside and not self._touches_hand(self.cube))


class Gr1StandinCupToTray(Gr1StandinTabletop):
    """Stand the cup on the tray: cup on the tray's top, upright, touching the tray and no hand."""

    language = "pick up the cup and place it upright on the tray"
    tray_half = (0.08, 0.1, 0.008)
    tray_pos = (-0.1, -0.2)

    def _objects(self):
        self.cup = CylinderObject(name="cup", size_min=[0.03, 0.045], size_max=[0.03, 0.045],
                                  rgba=[0.15, 0.35, 0.85, 1], rng=self.rng)
        self.tray = BoxObject(name="tray", size_min=list(self.tray_half), size_max=list(self.tray_half),
                              rgba=[0.6, 0.6, 0.6, 1], rng=self.rng)
        return [self.cup, self.tray]

    def _sampler(self):
        s = SequentialCompositeSampler(name="placement")
        s.append_sampler(UniformRandomSampler(
            name="tray", mujoco_objects=self.tray, x_range=[self.tray_pos[0]] * 2, y_range=[self.tray_pos[1]] * 2,
            rotation=0.0, ensure_object_boundary_in_range=False, ensure_valid_placement=False,
            reference_pos=self.table_offset, z_offset=0.0, rng=self.rng))
        s.append_sampler(UniformRandomSampler(
            name="cup", mujoco_objects=self.cup, x_range=[-0.16, -0.06], y_range=[0.10, 0.22], rotation=0.0,
            ensure_object_boundary_in_range=False, ensure_valid_placement=True, reference_pos=self.table_offset,
            z_offset=0.01, rng=self.rng))
        return s

    def _check_success(self):
        cup, tray = self._pos("cup"), self._pos("tray")
        on_top = abs(cup[0] - tray[0]) < self.tray_half[0] and abs(cup[1] - tray[1]) < self.tray_half[1]
        return bool(on_top and cup[2] > tray[2] and self.check_contact(self.cup, self.tray)
                    and self._upright("cup") and not self._touches_hand(self.cup))


# A cabinet with one drawer on a slide joint (opening towards the robot, -x), fixed to the table.
_DRAWER_XML = """<mujoco model="standin_drawer">
  <worldbody>
    <body>
      <body name="object">
        <geom name="top" type="box" pos="0 0 0.165" size="0.12 0.15 0.005" rgba="0.55 0.4 0.25 1" group="0"/>
        <geom name="base" type="box" pos="0 0 0.005" size="0.12 0.15 0.005" rgba="0.55 0.4 0.25 1" group="0"/>
        <geom name="side_left" type="box" pos="0 0.145 0.085" size="0.12 0.005 0.075" rgba="0.55 0.4 0.25 1" group="0"/>
        <geom name="side_right" type="box" pos="0 -0.145 0.085" size="0.12 0.005 0.075" rgba="0.55 0.4 0.25 1" group="0"/>
        <geom name="back" type="box" pos="0.115 0 0.085" size="0.005 0.14 0.075" rgba="0.55 0.4 0.25 1" group="0"/>
        <body name="drawer" pos="0 0 0.012">
          <joint name="slide" type="slide" axis="1 0 0" range="-0.16 0" damping="20" frictionloss="1" limited="true"/>
          <geom name="drawer_floor" type="box" pos="0 0 0.004" size="0.105 0.135 0.004" rgba="0.8 0.7 0.55 1" group="0"/>
          <geom name="drawer_front" type="box" pos="-0.11 0 0.07" size="0.006 0.14 0.07" rgba="0.7 0.55 0.35 1" group="0"/>
          <geom name="drawer_back" type="box" pos="0.1 0 0.05" size="0.005 0.135 0.05" rgba="0.8 0.7 0.55 1" group="0"/>
          <geom name="drawer_left" type="box" pos="0 0.13 0.05" size="0.105 0.005 0.05" rgba="0.8 0.7 0.55 1" group="0"/>
          <geom name="drawer_right" type="box" pos="0 -0.13 0.05" size="0.105 0.005 0.05" rgba="0.8 0.7 0.55 1" group="0"/>
          <geom name="handle" type="box" pos="-0.135 0 0.08" size="0.02 0.06 0.008" rgba="0.2 0.2 0.2 1" group="0"/>
        </body>
      </body>
      <site rgba="0 0 0 0" size="0.005" pos="0 0 0" name="bottom_site"/>
      <site rgba="0 0 0 0" size="0.005" pos="0 0 0.17" name="top_site"/>
      <site rgba="0 0 0 0" size="0.005" pos="0.12 0.15 0" name="horizontal_radius_site"/>
    </body>
  </worldbody>
</mujoco>
"""


def drawer_cabinet(name: str):
    """The drawer cabinet as a robosuite object without a free joint (it stands where the scene puts it)."""
    import tempfile
    from pathlib import Path

    from robosuite.models.objects import MujocoXMLObject

    with tempfile.TemporaryDirectory() as tmp:  # parsed in the constructor; the model keeps no file path
        path = Path(tmp) / "standin_drawer.xml"
        path.write_text(_DRAWER_XML)
        return MujocoXMLObject(str(path), name=name, joints=None, obj_type="all", duplicate_collision_geoms=True)


class Gr1StandinCupToDrawer(Gr1StandinTabletop):
    """Put the cup in the open drawer and close it: the cup's centre inside the drawer, the drawer within 1 cm of shut."""

    language = "put the cup in the drawer and close the drawer"
    cabinet_pos = (0.02, -0.2)
    initial_opening = -0.14  # slide joint: 0 = shut, -0.16 = fully open (towards the robot)
    closed_within = 0.01

    def _objects(self):
        self.cup = CylinderObject(name="cup", size_min=[0.028, 0.04], size_max=[0.028, 0.04],
                                  rgba=[0.15, 0.35, 0.85, 1], rng=self.rng)
        self.cabinet = drawer_cabinet("cabinet")
        return [self.cup, self.cabinet]

    def _sampler(self):
        s = SequentialCompositeSampler(name="placement")
        s.append_sampler(UniformRandomSampler(
            name="cabinet", mujoco_objects=self.cabinet, x_range=[self.cabinet_pos[0]] * 2,
            y_range=[self.cabinet_pos[1]] * 2, rotation=0.0, ensure_object_boundary_in_range=False,
            ensure_valid_placement=False, reference_pos=self.table_offset, z_offset=0.0, rng=self.rng))
        s.append_sampler(UniformRandomSampler(
            name="cup", mujoco_objects=self.cup, x_range=[-0.16, -0.06], y_range=[0.10, 0.22], rotation=0.0,
            ensure_object_boundary_in_range=False, ensure_valid_placement=True, reference_pos=self.table_offset,
            z_offset=0.01, rng=self.rng))
        return s

    def _setup_references(self):
        super()._setup_references()
        m = self.sim.model
        self.drawer_body_id = m.body_name2id(self.cabinet.naming_prefix + "drawer")
        self.slide_qpos_addr = m.get_joint_qpos_addr(self.cabinet.naming_prefix + "slide")

    def _reset_internal(self):
        # the cabinet has no free joint: its placement moves the body itself (as robosuite's Door does)
        super(Gr1StandinTabletop, self)._reset_internal()
        if not self.deterministic_reset:
            for pos, quat, obj in self.placement_initializer.sample().values():
                if obj is self.cabinet:
                    body = self.sim.model.body_name2id(obj.root_body)
                    self.sim.model.body_pos[body] = pos
                    self.sim.model.body_quat[body] = quat
                else:
                    self.sim.data.set_joint_qpos(obj.joints[0], np.concatenate([np.array(pos), np.array(quat)]))
            self.sim.data.qpos[self.slide_qpos_addr] = self.initial_opening
            self.sim.forward()

    def drawer_opening(self) -> float:
        """How far the drawer is out, in metres (0 = shut)."""
        return float(-self.sim.data.qpos[self.slide_qpos_addr])

    def _check_success(self):
        cup = self._pos("cup")
        drawer = np.array(self.sim.data.body_xpos[self.drawer_body_id])
        inside = abs(cup[0] - drawer[0]) < 0.1 and abs(cup[1] - drawer[1]) < 0.125 and drawer[2] < cup[2] < drawer[2] + 0.12
        return bool(inside and self.drawer_opening() <= self.closed_within and not self._touches_hand(self.cup))


class Gr1StandinCloseDrawer(Gr1StandinCupToDrawer):
    """Close the open drawer (the drawer cabinet alone): holds while the drawer is within 1 cm of shut.

    A push task for joint-space policies without grasping (the scripted GR1 policy completes it).
    """

    language = "close the drawer"

    def _objects(self):
        self.cabinet = drawer_cabinet("cabinet")
        return [self.cabinet]

    def _sampler(self):
        s = SequentialCompositeSampler(name="placement")
        s.append_sampler(UniformRandomSampler(
            name="cabinet", mujoco_objects=self.cabinet, x_range=[self.cabinet_pos[0]] * 2,
            y_range=[self.cabinet_pos[1]] * 2, rotation=0.0, ensure_object_boundary_in_range=False,
            ensure_valid_placement=False, reference_pos=self.table_offset, z_offset=0.0, rng=self.rng))
        return s

    def _check_success(self):
        return bool(self.drawer_opening() <= self.closed_within)


STANDIN_ENVS = {c.__name__: c for c in (Gr1StandinCubeToBin, Gr1StandinCupToTray, Gr1StandinCupToDrawer,
                                         Gr1StandinCloseDrawer)}
