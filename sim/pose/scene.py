"""The pose scene in MuJoCo: a table (top at z = 0, the table frame's origin at its centre), one red
block on a free joint, a pushing stick on a mocap body (the tool of an arm whose link runs out of
view), and one fixed oblique camera. ``frame`` renders a still; ``push`` drives the stick in a
straight line through the block and renders every ``frame_steps`` physics steps."""

from __future__ import annotations

import math

import msgspec
import numpy as np

from . import shapes

CAMERA = "oblique"
TIMESTEP = 0.002
FRAME_STEPS = 25  # physics steps per rendered frame in a push episode (20 frames per simulated second)
STICK_RADIUS = 0.012
TABLE_HALF = 0.45  # the block is on the table while |x|, |y| stay below this
_RED = "0.78 0.08 0.07 1"


def scene_xml(shape: str) -> str:
    geoms = "\n".join(
        f'<geom type="box" pos="{cx:.5f} {cy:.5f} 0" size="{hx:.5f} {hy:.5f} {shapes.HEIGHT / 2:.5f}" '
        f'rgba="{_RED}" contype="3" conaffinity="3" friction="0.6 0.005 0.0001" density="600"/>'
        for cx, cy, hx, hy in shapes.boxes(shape)
    )
    # Camera: at (0, -0.52, 0.46) looking at the table centre; xyaxes = its x and up directions.
    d = np.array([0.0, 0.52, -0.46]) / math.hypot(0.52, 0.46)
    up = np.cross(-d, [1.0, 0.0, 0.0])
    return f"""
<mujoco model="pose-{shape}">
  <option timestep="{TIMESTEP}" gravity="0 0 -9.81" integrator="implicitfast"/>
  <visual><global offwidth="640" offheight="480"/>
    <headlight ambient="0.35 0.35 0.35" diffuse="0.4 0.4 0.4"/></visual>
  <asset>
    <texture name="wood" type="2d" builtin="checker" rgb1="0.55 0.52 0.47" rgb2="0.58 0.55 0.50" width="256" height="256"/>
    <material name="table" texture="wood" texrepeat="6 6"/>
  </asset>
  <worldbody>
    <light pos="0.2 -0.3 1.2" dir="-0.1 0.2 -1" diffuse="0.55 0.55 0.55" castshadow="false"/>
    <geom name="floor" type="plane" pos="0 0 -0.75" size="3 3 0.1" rgba="0.3 0.3 0.32 1" contype="0" conaffinity="0"/>
    <geom name="table" type="box" pos="0 0 -0.02" size="{TABLE_HALF + 0.15} {TABLE_HALF + 0.15} 0.02" material="table"
          contype="1" conaffinity="1"/>
    <camera name="{CAMERA}" pos="0 -0.52 0.46" xyaxes="1 0 0 {up[0]:.6f} {up[1]:.6f} {up[2]:.6f}" fovy="45"/>
    <body name="block" pos="0 0 {shapes.HEIGHT / 2}">
      <freejoint name="block"/>
      {geoms}
    </body>
    <body name="stick" mocap="true" pos="0.3 0.3 0">
      <geom name="stick" type="capsule" fromto="0 0 0.022 0 0 0.26" size="{STICK_RADIUS}" rgba="0.25 0.26 0.3 1"
            contype="2" conaffinity="2"/>
      <geom name="link" type="box" pos="0.12 0.05 0.27" size="0.13 0.02 0.02" euler="0 0 20" rgba="0.85 0.85 0.88 1"
            contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""


class Pose(msgspec.Struct, frozen=True, array_like=True):
    x: float
    y: float
    yaw: float  # wrapped to (-pi, pi]


def wrap(angle: float) -> float:
    return float(math.atan2(math.sin(angle), math.cos(angle)))


class Frame(msgspec.Struct, frozen=True, kw_only=True):
    rgb: np.ndarray  # (H, W, 3) uint8
    depth: np.ndarray  # (H, W) float32 metres along the optical axis
    truth: Pose


class PoseScene:
    """One block shape's scene with a renderer at width x height."""

    def __init__(self, shape: str, width: int, height: int):
        import mujoco
        from roboswe.sim.render import SceneRenderer

        self._mj = mujoco
        self.shape = shape
        self.model = mujoco.MjModel.from_xml_string(scene_xml(shape))
        self.data = mujoco.MjData(self.model)
        self.width, self.height = width, height
        self.renderer = SceneRenderer(self.model, max_width=width, max_height=height)
        self._block_qpos = self.model.jnt_qposadr[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, "block")]

    def close(self) -> None:
        self.renderer.close()

    def camera(self) -> dict[str, list]:
        """K and table_from_camera (OpenCV axes), as the artifact receives them."""
        f = self._render(depth=False, calibration=True)
        return {"K": f.K.round(9).tolist(), "table_from_camera": f.T_world_camera.round(9).tolist()}

    def set_block(self, x: float, y: float, yaw: float) -> None:
        q = self._block_qpos
        self.data.qpos[q : q + 3] = (x, y, shapes.HEIGHT / 2)
        self.data.qpos[q + 3 : q + 7] = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
        self.data.qvel[:] = 0.0

    def set_stick(self, x: float, y: float) -> None:
        self.data.mocap_pos[0] = (x, y, 0.0)

    def block_pose(self) -> Pose:
        q = self._block_qpos
        w, _, _, z = self.data.qpos[q + 3 : q + 7]
        x, y, _ = self.data.qpos[q : q + 3]
        return Pose(float(x), float(y), wrap(2 * math.atan2(z, w)))

    def _render(self, *, depth: bool = True, calibration: bool = False):
        state = {name: getattr(self.data, name).copy() for name in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat")}
        self.renderer.load_state(state)
        return self.renderer.render(CAMERA, self.width, self.height, depth=depth, calibration=calibration)

    def frame(self) -> Frame:
        self._mj.mj_forward(self.model, self.data)
        f = self._render()
        return Frame(rgb=f.rgb, depth=f.depth, truth=self.block_pose())

    def push(self, start: tuple[float, float], direction: float, speed: float, frames: int) -> list[Frame]:
        """Move the stick from ``start`` along ``direction`` (radians) at ``speed`` m/s; a frame every
        FRAME_STEPS physics steps, ending early once the block leaves the table."""
        mj, out = self._mj, []
        dx, dy = math.cos(direction) * speed * TIMESTEP, math.sin(direction) * speed * TIMESTEP
        sx, sy = start
        self.set_stick(sx, sy)
        mj.mj_forward(self.model, self.data)
        for _ in range(frames):
            for _ in range(FRAME_STEPS):
                sx, sy = sx + dx, sy + dy
                self.data.mocap_pos[0, :2] = (sx, sy)
                mj.mj_step(self.model, self.data)
            pose = self.block_pose()
            if max(abs(pose.x), abs(pose.y)) > TABLE_HALF - 0.05:
                break
            f = self._render()
            out.append(Frame(rgb=f.rgb, depth=f.depth, truth=pose))
        return out
