"""The API text rendered from a live spec, and the allow-list's screening of raw frames."""

from __future__ import annotations

import msgspec
from roboswe.bridge.allowlist import Refusal, screen
from roboswe.bridge.apidoc import render_robot_api
from roboswe.protocol._base import envelope
from roboswe.protocol.bridge import BRIDGE_ROBOT_CODEC, Step

from tests.sandbox.stand_in_sim import ToyRobot

ENV = msgspec.msgpack.encode(envelope("test"))


def test_api_text_carries_the_tasks_own_bounds_cameras_and_limits():
    text = render_robot_api(ToyRobot().spec())
    assert "robot.step_many(actions)" in text and "never clipped" in text
    assert "[0] j0: [-1, 1] rad" in text
    assert "front: 8x6 rgb, depth, K and T_world_camera" in text
    assert "50 control steps and run 90 s" in text and "6000 control steps" in text
    for forbidden in ("reset", "set_state", "success()"):
        assert f"robot.{forbidden}" not in text


def test_allowed_call_is_decoded():
    _env, frames = BRIDGE_ROBOT_CODEC.encode(Step(token="t", action=[0.0]), sender="x")
    decoded = screen([bytes(f) for f in frames])
    assert not isinstance(decoded, Refusal) and decoded.message == Step(token="t", action=[0.0])


def test_everything_else_is_refused_by_kind():
    cases = {
        "Reset": [ENV, msgspec.msgpack.encode({"kind": "Reset"})],
        "StepReply": [ENV, msgspec.msgpack.encode({"kind": "StepReply"})],
        "garbage": [b"\x00"],
        "Step": [ENV, msgspec.msgpack.encode({"kind": "Step", "token": "t", "action": "fast"})],
        "oversized": [ENV, b"\xc1" * 300_000],
    }
    for kind, frames in cases.items():
        result = screen(frames)
        assert isinstance(result, Refusal) and result.kind == kind, (kind, result)
    weird = screen([ENV, msgspec.msgpack.encode({"kind": "\x07" * 500})])
    assert weird.kind == "?" * 64
