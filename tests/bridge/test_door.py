"""The door's message flow to the simulator: one round trip per step, checks before anything is sent."""

from __future__ import annotations

import numpy as np
from roboswe.bridge.door import RobotDoor
from roboswe.protocol import bridge as bp
from roboswe.protocol import sim as simp
from roboswe.protocol.control import Error

from tests.sandbox.stand_in_sim import ToyRobot


def _link(robot: ToyRobot):
    """A SimLink through the real robot codec (wire bytes both ways) to the toy robot."""

    async def ask(message):
        _, frames = simp.SIM_ROBOT_CODEC.encode(message, sender="sandbox_bridge")
        reply = await robot.handle(simp.SIM_ROBOT_CODEC.decode(frames))
        reply, blobs = reply if isinstance(reply, tuple) else (reply, [])
        _, frames = simp.SIM_ROBOT_CODEC.encode(reply, sender="simulator", blobs=blobs)
        return simp.SIM_ROBOT_CODEC.decode(frames)

    return ask


async def _call(door: RobotDoor, message):
    _, frames = bp.BRIDGE_ROBOT_CODEC.encode(message, sender="robot")
    return await door.handle(bp.BRIDGE_ROBOT_CODEC.decode(frames))


def _state(reply, blobs) -> dict[str, np.ndarray]:
    return {k: np.frombuffer(blobs[a.blob], dtype=a.dtype).reshape(a.shape) for k, a in reply.state.items()}


async def test_a_step_is_one_round_trip_carrying_the_new_state():
    robot = ToyRobot()
    door = RobotDoor(_link(robot))
    session = door.begin("s.py", bp.ScriptLimits(steps=50))
    reply, blobs = await _call(door, bp.Step(token=session.token, action=[1.0, 0, 0, 0]))
    assert robot.received == ["GetSpec", "Step"]  # the spec is fetched once per trial, then cached
    reply, blobs = await _call(door, bp.StepMany(token=session.token, actions=[[1.0, 0, 0, 0]] * 3))
    assert robot.received == ["GetSpec", "Step", "Step"]  # no GetState after a step
    assert isinstance(reply, bp.StepReply) and reply.steps == 3 and reply.steps_left == 46
    np.testing.assert_allclose(_state(reply, blobs)["qpos"], [0.04, 0, 0, 0])
    # The state a step returns is exactly what GetState returns afterwards.
    state, state_blobs = await _call(door, bp.GetState(token=session.token))
    np.testing.assert_array_equal(_state(state, state_blobs)["qpos"], _state(reply, blobs)["qpos"])


async def test_an_older_simulator_without_step_values_gets_a_get_state():
    robot = ToyRobot(legacy=True)
    door = RobotDoor(_link(robot))
    session = door.begin("s.py", bp.ScriptLimits(steps=50))
    reply, blobs = await _call(door, bp.Step(token=session.token, action=[0.5, 0, 0, 0]))
    assert robot.received == ["GetSpec", "Step", "GetState"]
    np.testing.assert_allclose(_state(reply, blobs)["qpos"], [0.005, 0, 0, 0])


async def test_bad_actions_and_exhausted_budgets_never_reach_the_simulator():
    robot = ToyRobot()
    door = RobotDoor(_link(robot))
    session = door.begin("s.py", bp.ScriptLimits(steps=2))
    for bad in ([1.5, 0, 0, 0], [float("nan"), 0, 0, 0], [0, 0, 0]):
        reply, _ = await _call(door, bp.Step(token=session.token, action=bad))
        assert isinstance(reply, Error) and reply.code == bp.INVALID_ACTION, bad
    assert robot.received == ["GetSpec"] and robot.control_step == 0
    reply, _ = await _call(door, bp.StepMany(token=session.token, actions=[[0.1, 0, 0, 0]] * 5))
    assert isinstance(reply, bp.StepReply) and reply.steps == 2 and reply.limit_reached and reply.steps_left == 0
    reply, _ = await _call(door, bp.Step(token=session.token, action=[0.1, 0, 0, 0]))
    assert isinstance(reply, Error) and reply.code == bp.LIMIT_REACHED
    assert robot.received == ["GetSpec", "Step"] and robot.control_step == 2


class _OneActionScene(ToyRobot):
    """A scene whose Step is one environment action over many control steps (as RoboPaint's MoveFlange),
    here ended after one control step by its own rule (a protective stop), not by any budget."""

    async def handle(self, decoded):
        msg = decoded.message
        if isinstance(msg, simp.Step) and len(msg.actions) > 1:
            self.received.append("Step")
            self.control_step += 1
            return simp.StepResult(applied=1, control_step=self.control_step, sim_time=0.0,
                                   steps_left=self.trial_steps - self.control_step, stopped="done",
                                   values=self.state().values)
        return await super().handle(decoded)


async def test_a_batch_the_scene_ends_early_is_not_a_step_limit():
    door = RobotDoor(_link(_OneActionScene()))
    session = door.begin("s.py", bp.ScriptLimits(steps=50))
    reply, _ = await _call(door, bp.StepMany(token=session.token, actions=[[0.1, 0, 0, 0]] * 4))
    assert isinstance(reply, bp.StepReply) and reply.steps == 1 and not reply.limit_reached
    assert not session.limit_hit  # the exec feedback would say "stopped at the script's steps limit"
    session = door.begin("s.py", bp.ScriptLimits(steps=2))  # the script's budget trims the rows: that is a cut
    reply, _ = await _call(door, bp.StepMany(token=session.token, actions=[[0.1, 0, 0, 0]] * 4))
    assert reply.limit_reached and session.limit_hit
