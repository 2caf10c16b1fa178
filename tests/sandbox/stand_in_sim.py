"""A small stand-in for the simulator's robot endpoint (the real Server, a toy robot):
it records every request it receives, so tests can prove refused requests never arrive."""

from __future__ import annotations

import numpy as np
import trio
from roboswe.actors import Server
from roboswe.protocol import sim as simp

DIM = 4


class ToyRobot:
    def __init__(self, trial_steps: int = 6000, *, legacy: bool = False):
        self.legacy = legacy  # answer Step without StepResult.values, as simulators before that field did
        self.qpos = [0.0] * DIM
        self.control_step = 0
        self.trial_steps = trial_steps
        self.received: list[str] = []
        self.observed: list[list[str]] = []  # the camera lists Observe asked for

    def spec(self) -> simp.TaskSpec:
        low, high = [-1.0] * DIM, [1.0] * DIM
        comps = [simp.ActionComponent(index=i, name=f"j{i}", low=-1.0, high=1.0, unit="rad") for i in range(DIM)]
        return simp.TaskSpec(
            task_id="toy", instruction="move", privileged=False, action_dim=DIM, action_low=low, action_high=high,
            action=simp.ActionSpec(dim=DIM, low=low, high=high, components=comps, hold=[0.0] * DIM, hold_rule="zero", doc="toy"),
            control_hz=20, control_dt=0.05, cameras=[simp.CameraInfo(name="front", width=8, height=6, depth=True, calibration=True)],
            state_keys=["qpos"], script_limits=simp.Limits(steps=50, seconds=90.0), trial_limits=simp.Limits(steps=self.trial_steps, seconds=1800.0),
        )  # fmt: skip

    def state(self) -> simp.RobotState:
        return simp.RobotState(
            control_step=self.control_step, sim_time=self.control_step * 0.05,
            steps_left=self.trial_steps - self.control_step, values={"qpos": list(self.qpos)},
        )  # fmt: skip

    async def handle(self, decoded):
        msg = decoded.message
        self.received.append(type(msg).__name__)
        match msg:
            case simp.GetSpec():
                return self.spec()
            case simp.GetState():
                return self.state()
            case simp.Observe():
                self.observed.append(list(msg.cameras))
                rgb = np.full((6, 8, 3), 7, np.uint8).tobytes()
                depth = np.full((6, 8), 1.5, np.float32).tobytes()
                img = simp.CameraImage(camera="front", width=8, height=6, rgb_blob=0, depth_blob=1 if msg.depth else None,
                                       K=np.eye(3).tolist(), T_world_camera=np.eye(4).tolist())  # fmt: skip
                obs = simp.Observation(control_step=self.control_step, sim_time=0.0, images=[img], state=self.state(), render_seconds=0.0)
                return obs, [rgb, depth] if msg.depth else [rgb]
            case simp.Step(actions=actions):
                applied = 0
                for row in actions:
                    if self.control_step >= self.trial_steps:
                        break
                    self.qpos = [q + a * 0.01 for q, a in zip(self.qpos, row)]
                    self.control_step += 1
                    applied += 1
                stopped = "done" if applied == len(actions) else "trial_budget"
                values = None if self.legacy else self.state().values
                return simp.StepResult(applied=applied, control_step=self.control_step, sim_time=0.0,
                                       steps_left=self.trial_steps - self.control_step, stopped=stopped, values=values)
        raise AssertionError(f"unexpected {msg}")


async def serve_toy_robot(endpoint: str, robot: ToyRobot, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    server = Server("simulator", endpoint, simp.SIM_ROBOT_CODEC, robot.handle, concurrent=False)
    await server.serve(task_status=task_status)
