"""The robot API through the real sandbox and bridge: calls work, limits hold, feedback is complete."""

from __future__ import annotations

import msgspec
import pytest

from roboswe.protocol.bridge import ScriptLimits
from roboswe.sandbox import SandboxError, backend_class


async def test_robot_calls_round_trip_arrays(trial):
    fb = await trial.run(
        """
        import robot, numpy as np
        s = robot.spec()
        assert s["action_dim"] == 4 and s["script_limits"]["steps"] == 50, s
        assert isinstance(s["action_low"], np.ndarray)
        st = robot.state()
        assert st["qpos"].dtype == np.float64 and st["qpos"].shape == (4,)
        obs = robot.observe(depth=True)
        front = obs["front"]
        assert front["rgb"].shape == (6, 8, 3) and front["rgb"].dtype == np.uint8 and (front["rgb"] == 7).all()
        assert front["depth"].dtype == np.float32 and front["depth"].shape == (6, 8)
        assert front["K"].shape == (3, 3) and front["T_world_camera"].shape == (4, 4)
        new = robot.step([1.0, 0, 0, 0])
        assert abs(new["qpos"][0] - 0.01) < 1e-12
        new = robot.step_many(np.zeros((3, 4)))
        print("left", robot.steps_left())
        """
    )
    assert fb.exit_status == 0, fb.stderr
    assert fb.exception is None and fb.limit is None
    assert fb.steps == 4
    assert fb.refused == 0  # a program exiting closes its connection: that is not a refusal
    assert "left 46" in fb.stdout
    assert trial.robot.control_step == 4
    # Steps carry their new state: GetState is asked only by state() and steps_left().
    assert trial.robot.received.count("Step") == 2 and trial.robot.received.count("GetState") == 2, trial.robot.received


async def test_invalid_action_is_rejected_not_clipped(trial):
    fb = await trial.run(
        """
        import robot
        for bad in ([2.0, 0, 0, 0], [0.0, 0, 0], [float("nan"), 0, 0, 0]):
            try:
                robot.step(bad)
            except robot.InvalidAction as e:
                print("rejected:", e)
        try:
            robot.step_many([[0, 0, 0, 0], [0, 0, 0, 5]])
        except robot.InvalidAction as e:
            print("rejected:", e)
        """
    )
    assert fb.exit_status == 0, fb.stderr
    assert fb.stdout.count("rejected:") == 4
    assert "outside [-1.0, 1.0]" in fb.stdout and "never clipped" in fb.stdout
    assert trial.robot.control_step == 0 and fb.steps == 0


async def test_step_limit_raises_limit_reached_and_nothing_more_moves(trial):
    fb = await trial.run(
        """
        import robot
        n = 0
        while True:
            robot.step([0.1, 0, 0, 0])
            n += 1
        """
    )
    assert fb.steps == 50 and trial.robot.control_step == 50
    assert fb.limit == "steps"
    assert fb.exception is not None and fb.exception.type == "robot.LimitReached"
    assert "robot.LimitReached" in fb.stderr
    # the next script has its own budget
    fb2 = await trial.run("import robot; robot.step_many([[0, 0, 0, 0]] * 60)")
    assert fb2.steps == 50 and fb2.limit == "steps" and trial.robot.control_step == 100


async def test_feedback_fields_are_distinct(trial):
    fb = await trial.run(
        """
        import sys
        print("to stdout")
        print("to stderr", file=sys.stderr)
        raise KeyError("missing")
        """
    )
    assert fb.exit_status == 1
    assert fb.stdout == "to stdout\n"
    assert fb.stderr.startswith("to stderr\n") and "KeyError: 'missing'" in fb.stderr
    assert "roboswe-exception" not in fb.stderr
    assert fb.exception.type == "KeyError" and fb.exception.message == "'missing'"
    assert 'File "script.py", line 5' in fb.exception.traceback and "runpy" not in fb.exception.traceback
    assert fb.wall_seconds > 0 and fb.limit is None
    fb = await trial.run("import sys; sys.exit(3)")
    assert fb.exit_status == 3 and fb.exception is None


async def test_a_sandbox_that_cannot_start_is_an_error_not_a_script_failure(image, scratch):
    broken = msgspec.structs.replace(image, rootfs=str(scratch / "no-rootfs"))
    (scratch / "no-rootfs" / "usr" / "bin").mkdir(parents=True)
    (scratch / "no-rootfs" / "usr" / "bin" / "python3").touch()
    ws, br = scratch / "ws", scratch / "br"
    ws.mkdir(), br.mkdir()
    sandbox = backend_class("bwrap")(broken, ws, br)
    await sandbox.start(ScriptLimits())
    with pytest.raises(SandboxError, match="bwrap could not start the program"):
        await sandbox.run(["python3", "-c", "pass"], {}, ScriptLimits())
