"""The typed wire: request and reply unions per boundary, closed enums, handlers that cover every request.

Without a type checker in the toolchain, these tests are what makes the ``Literal`` types and
the handlers' ``match`` statements checkable: a new request kind without a handler case, or an
``Error(code=...)`` the protocol does not list, fails here instead of on the wire.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import msgspec
import pytest
from roboswe.protocol import bridge, context, control, participant, provider, recorder, sim
from roboswe.protocol.control import Error

ROOT = Path(__file__).resolve().parents[2]

BOUNDARIES = [
    # (codec, its requests, its replies)
    (sim.SIM_CODEC, sim.SimRequest, sim.SimReply),
    (sim.SIM_ROBOT_CODEC, sim.SimRobotRequest, sim.SimRobotReply),
    (bridge.BRIDGE_CODEC, bridge.BridgeRequest, bridge.BridgeReply),
    (bridge.BRIDGE_ROBOT_CODEC, bridge.RobotCall, bridge.RobotReply),
    (context.CONTEXT_CODEC, context.ContextRequest, context.ContextReply),
    (provider.PROVIDER_CODEC, provider.ProviderRequest, provider.ProviderReply),
    (recorder.RECORDER_CODEC, recorder.RecorderRequest, recorder.RecorderReply),
]

HANDLERS = [
    # (file, dotted path of the handler, the requests it must answer, requests handled before its match)
    ("actors/simulator.py", "SimulatorService.robot_call", sim.SimRobotRequest, ()),
    ("actors/simulator.py", "SimulatorService.handle_control", sim.SimRequest, ()),
    ("actors/recorder.py", "Recorder.handle", recorder.RecorderRequest, typing.get_args(recorder.Record)),
    ("actors/context_manager.py", "ContextService.handle", context.ContextRequest, ()),
    ("actors/provider_client.py", "provider_handler.answer", provider.ProviderRequest, ()),
    ("actors/sandbox_bridge.py", "main.handle", bridge.BridgeRequest, ()),
]


def members(union) -> set[type]:
    return set(typing.get_args(union))


@pytest.mark.parametrize("codec, requests, replies", BOUNDARIES)
def test_requests_and_replies_are_separate_and_the_codec_decodes_both(codec, requests, replies):
    asked, answered = members(requests), members(replies)
    assert not asked & answered, f"in both directions: {sorted(t.__name__ for t in asked & answered)}"
    assert Error in answered  # every request can fail with a typed Error
    decodable = members(codec.union)
    assert asked | answered <= decodable
    assert decodable - asked - answered <= members(control.Control)  # the rest is the runtime's


def test_every_error_code_in_the_tree_is_a_listed_code():
    allowed = set(typing.get_args(control.ErrorCode))
    used: dict[str, str] = {}
    for folder in ("actors", "sim", "sandbox", "bridge", "roboswe", "protocol"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                # Error(code="...") calls, and `code = "..."` class attributes of SimError subclasses
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Error":
                    for kw in node.keywords:
                        if kw.arg == "code" and isinstance(kw.value, ast.Constant):
                            used[kw.value.value] = f"{path.relative_to(ROOT)}:{node.lineno}"
                elif (isinstance(node, ast.Assign) and path.parent.name == "sim" and len(node.targets) == 1
                      and getattr(node.targets[0], "id", None) == "code" and isinstance(node.value, ast.Constant)):
                    used[node.value.value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    unlisted = {code: where for code, where in used.items() if code not in allowed}
    assert not unlisted, f"add these to protocol.control.ErrorCode: {unlisted}"
    assert {"decode", "version", "internal", "not_loaded", "invalid_action"} <= set(used)  # the scan sees real sites


def test_an_unlisted_enum_value_is_refused_on_decode():
    body = msgspec.msgpack.encode({"kind": "Error", "code": "peer_dead", "detail": "x"})
    with pytest.raises(msgspec.ValidationError, match="Invalid enum value 'peer_dead'"):
        msgspec.msgpack.decode(body, type=control.Control)
    op = {"trial_id": "t", "seq": 0, "operation": "teleport", "started_at": 0.0, "ended_at": 0.0}
    with pytest.raises(msgspec.ValidationError, match="operation"):
        msgspec.convert(op, recorder.OperationRecord)


def test_operation_names_are_the_operation_tags():
    assert list(typing.get_args(participant.OperationName)) == list(participant.OPERATIONS)
    assert set(typing.get_args(recorder.RecordedOperation)) == {*participant.OPERATIONS, "invalid"}


def test_bridge_allow_list_is_the_robot_call_union():
    assert bridge.ALLOWED_KINDS == {t.__name__ for t in typing.get_args(bridge.RobotCall)}


def _find(tree: ast.AST, dotted: str) -> ast.AST:
    node = tree
    for name in dotted.split("."):
        node = next(n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and n.name == name and n is not node)
    return node


def _cased(function: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.MatchClass):
            names.add(node.cls.attr if isinstance(node.cls, ast.Attribute) else node.cls.id)
    return names


@pytest.mark.parametrize("path, handler, requests, exempt", HANDLERS, ids=[f"{p}:{h}" for p, h, _, _ in HANDLERS])
def test_each_handler_has_a_case_for_every_request_of_its_boundary(path, handler, requests, exempt):
    function = _find(ast.parse((ROOT / path).read_text()), handler)
    missing = {t.__name__ for t in members(requests) - set(exempt)} - _cased(function)
    assert not missing, f"{path} {handler} has no `case` for {sorted(missing)}"
