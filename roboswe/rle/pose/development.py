"""Family 06's development scene (``DevelopmentScene``, roboswe/rle/scene.py): the stick, the block, the camera.

One charged control step moves the stick (``[dx, dy]``, at most ``STICK_STEP_M`` per axis) over
``FRAME_STEPS`` physics steps: one frame of a push episode (20 Hz). The state is the stick's (x, y)
and ``label``: the block's x, y, yaw with the manifest's label noise, never its shape. The camera is
the artifact's (the evaluation's sensor noise, depth only in RGB-D, K and the table-from-camera pose).
"""

from __future__ import annotations

import numpy as np

from roboswe.protocol import sim as simp
from roboswe.sim.pose import battery as pose_battery
from roboswe.sim.pose.scene import CAMERA, FRAME_STEPS, TABLE_HALF, TIMESTEP, Pose, wrap

from ..manifest import RleTask

CONTROL_HZ = round(1 / (TIMESTEP * FRAME_STEPS))  # one control step = one frame of a push episode (20 Hz)
STICK_STEP_M = 0.01
"""Largest stick displacement per control step and axis (0.2 m/s at 20 Hz, twice a battery push)."""
STICK_REACH_M = TABLE_HALF
STATE_KEYS = ["stick", "label"]


class PoseDevelopmentScene:
    """The pose scene on public seeds (each seed: one still's shape, block pose and stick position)."""

    control_hz = CONTROL_HZ
    state_keys = STATE_KEYS

    def __init__(self, task: RleTask, salt: object = None):  # salt: development runs on public seeds only
        import mujoco  # the scene's own physics; imported here, as sim/pose does, so importing this module loads no GL

        self._mj = mujoco
        self.task = task
        ev = task.evaluation
        self._renderer = pose_battery.Renderer(ev.width, ev.height)
        self._camera = self._renderer.camera()
        low, high = [-STICK_STEP_M] * 2, [STICK_STEP_M] * 2
        components = [simp.ActionComponent(index=i, name=f"stick.d{axis}", low=-STICK_STEP_M, high=STICK_STEP_M,
                                           unit="metres per control step, table frame")
                      for i, axis in enumerate("xy")]
        self.action = simp.ActionSpec(dim=2, low=low, high=high, components=components, hold=[0.0, 0.0],
                                      hold_rule="a zero displacement holds the stick",
                                      doc=f"[dx, dy]: the stick's displacement in one control step ({CONTROL_HZ} Hz), metres")
        self.cameras = [simp.CameraInfo(name=CAMERA, width=ev.width, height=ev.height, depth=ev.variant == "rgbd",
                                        calibration=True)]

    def close(self) -> None:
        self._renderer.close()

    def load(self, seed: int) -> None:
        self.seed = seed
        (still,) = pose_battery.group_spec(seed, 1).stills
        self.scene = self._renderer.scene(still.shape)
        self.scene.set_block(still.block.x, still.block.y, still.block.yaw)
        self.scene.set_stick(*still.stick)
        self._mj.mj_forward(self.scene.model, self.scene.data)

    def step(self, row: list[float]) -> None:
        mj, data = self._mj, self.scene.data
        dx, dy = row
        for _ in range(FRAME_STEPS):
            x, y = data.mocap_pos[0, :2] + (dx / FRAME_STEPS, dy / FRAME_STEPS)
            data.mocap_pos[0, :2] = (float(np.clip(x, -STICK_REACH_M, STICK_REACH_M)),
                                     float(np.clip(y, -STICK_REACH_M, STICK_REACH_M)))
            mj.mj_step(self.scene.model, data)

    def label(self, control_step: int) -> Pose:
        """The block's pose with the manifest's label noise (drawn from the public seed and the step)."""
        dev, truth = self.task.development, self.scene.block_pose()
        rng = np.random.default_rng([self.seed, 2, control_step])
        return Pose(truth.x + rng.normal(0, dev.label_noise_m), truth.y + rng.normal(0, dev.label_noise_m),
                    wrap(truth.yaw + rng.normal(0, dev.label_noise_rad)))

    def values(self, control_step: int) -> dict[str, list[float]]:
        label, stick = self.label(control_step), self.scene.data.mocap_pos[0, :2]
        return {"stick": [float(stick[0]), float(stick[1])], "label": [label.x, label.y, label.yaw]}

    def observe(self, control_step: int, depth: bool) -> tuple[list[simp.CameraImage], list[bytes]]:
        ev = self.task.evaluation
        frame = self.scene.frame()
        [(rgb, noisy_depth)] = pose_battery.noisy([frame], self.seed * 1_000_003 + control_step,
                                                  ev.rgb_noise, ev.depth_noise_m)
        blobs = [rgb.tobytes()]
        with_depth = depth and ev.variant == "rgbd"
        if with_depth:
            blobs.append(noisy_depth.tobytes())
        image = simp.CameraImage(camera=CAMERA, width=ev.width, height=ev.height, rgb_blob=0,
                                 depth_blob=1 if with_depth else None, K=self._camera["K"],
                                 T_world_camera=self._camera["table_from_camera"])
        return [image], blobs

    def guide(self) -> str:
        return (f"Free: robot.observe(depth=True) (camera {CAMERA!r}, as the estimator will get it) and robot.state(): "
                f"{STATE_KEYS} (stick x, y; the block's x, y, yaw with label noise; no shape). A row of "
                f"robot.step_many([[dx, dy], ...]) is the stick's displacement in one control step, at most "
                f"{STICK_STEP_M} m per axis.")
