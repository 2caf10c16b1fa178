"""The door's message flow to the simulator: one round trip per step, checks before anything is sent."""

from __future__ import annotations

import msgspec
import numpy as np
from roboswe.bridge.door import RobotDoor, chunk_control_steps
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


class _TimedScene(ToyRobot):
    """A scene whose chunk is ONE action of timed rows (as RoboPaint's MoveFlange): component 3 is each
    row's duration in seconds, and the chunk runs round(sum * 20 Hz) control steps."""

    def spec(self) -> simp.TaskSpec:
        spec = super().spec()
        action = msgspec.structs.replace(spec.action, low=[-1.0, -1.0, -1.0, 0.05], chunk_is_one_action=True, duration_component=3)
        return msgspec.structs.replace(spec, action=action, action_low=action.low)

    async def handle(self, decoded):
        msg = decoded.message
        if not isinstance(msg, simp.Step):
            return await super().handle(decoded)
        self.received.append("Step")
        steps = min(round(sum(row[3] for row in msg.actions) * 20), self.trial_steps - self.control_step)
        self.control_step += steps
        return simp.StepResult(applied=steps, control_step=self.control_step, sim_time=0.0,
                               steps_left=self.trial_steps - self.control_step,
                               stopped="done" if self.control_step < self.trial_steps else "trial_budget",
                               values=self.state().values)


async def test_a_one_action_chunk_that_does_not_fit_the_scripts_steps_is_refused_whole_never_cut():
    scene = _TimedScene()
    door = RobotDoor(_link(scene))
    session = door.begin("s.py", bp.ScriptLimits(steps=50))
    reply, _ = await _call(door, bp.StepMany(token=session.token, actions=[[0, 0, 0, 1.0], [0, 0, 0, 0.5]]))
    assert isinstance(reply, bp.StepReply) and reply.steps == 30 and reply.steps_left == 20 and not reply.limit_reached
    # Two rows with 20 steps left: the old door sent rows[:20] (both rows: 22 control steps, over the
    # script's budget); with fewer steps left than rows it cut the batch. Now it is refused whole.
    reply, _ = await _call(door, bp.StepMany(token=session.token, actions=[[0, 0, 0, 0.5], [0, 0, 0, 0.6]]))
    assert isinstance(reply, Error) and reply.code == bp.LIMIT_REACHED
    assert "one action of 22 control steps" in reply.detail and "20 left" in reply.detail and "never cut" in reply.detail
    assert scene.received == ["GetSpec", "Step"] and scene.control_step == 30  # the scene never saw it
    assert session.steps == 30 and not session.limit_hit  # the script may still send one that fits
    reply, _ = await _call(door, bp.Step(token=session.token, action=[0, 0, 0, 1.0]))  # exactly the 20 left
    assert isinstance(reply, bp.StepReply) and reply.steps == 20 and reply.steps_left == 0 and not reply.limit_reached
    reply, _ = await _call(door, bp.Step(token=session.token, action=[0, 0, 0, 0.05]))
    assert isinstance(reply, Error) and reply.code == bp.LIMIT_REACHED and session.limit_hit
    assert scene.control_step == 50 and session.steps == 50  # never over the script's budget


def test_the_doors_count_of_a_moveflange_is_the_paint_scenes_plan():
    """chunk_control_steps must agree with the control steps the paint controller plans for a batch."""
    from roboswe.sim.paint import control as pc
    from roboswe.sim.paint import scene as ps
    from roboswe.sim.paint.backend import WAYPOINT_NAMES

    spec = msgspec.structs.replace(ToyRobot().spec(), control_hz=ps.CONTROL_HZ, action=msgspec.structs.replace(
        ToyRobot().spec().action, chunk_is_one_action=True, duration_component=WAYPOINT_NAMES.index("duration_s")))
    start, down = [0.0, 0.45, 0.3], [1.0, 0.0, 0.0, 0.0]
    rng = np.random.default_rng(4)
    for n in (1, 2, 7, 32):
        for _ in range(20):
            durations = rng.uniform(pc.MIN_DURATION_S, pc.MAX_BATCH_S / n, n).round(rng.integers(2, 6))
            rows = [[*start, *down, float(d)] for d in np.maximum(durations, pc.MIN_DURATION_S)]
            plan = pc.validate_batch(pc.parse_batch([{"position": r[:3], "quaternion": r[3:7], "duration_s": r[7]} for r in rows]),
                                     np.array(start), pc.quat_xyzw_to_wxyz(down))
            assert chunk_control_steps(rows, spec) == sum(steps for _, _, steps in plan), rows
