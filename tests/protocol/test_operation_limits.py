"""parse_operation refuses what a participant can send that would break the harness, before any work:
lone surrogates, arguments nested 2,000 deep (as text or as an object), oversized chunks and batches.
Each refusal is an InvalidOperation naming what was wrong; the tool schemas state the same maxima."""

from __future__ import annotations

import json

import msgspec
import pytest
from roboswe.protocol import participant as pp
from roboswe.protocol.participant import (
    InvalidOperation,
    json_depth,
    parse_operation,
    tool_spec,
)

LONE = "\ud83d"
DEEP_TEXT = '{"path": ' + "[" * 2000 + "]" * 2000 + "}"


def deep_object(levels: int = 2000) -> dict:
    root: list = []
    inner = root
    for _ in range(levels - 1):
        inner.append([])
        inner = inner[0]
    return {"path": root}


def waypoint() -> dict:
    return {"position": [0.1, 0.4, 0.2], "quaternion_xyzw": [0.0, 0.0, 0.0, 1.0], "duration_s": 0.5}


@pytest.mark.parametrize("arguments", [
    '{"path": "a.py", "content": "\\ud83d"}',  # valid JSON text that decodes to a lone surrogate
    '{"path": "a.py", "content": "' + LONE + '"}',  # the surrogate itself in the text
    {"path": "a.py", "content": "ok " + LONE},  # an object, as Anthropic's input or Gemini's args arrive
    b'{"path": "\\ud83d.py", "content": ""}',
])
def test_a_lone_surrogate_anywhere_in_the_arguments_is_refused(arguments):
    with pytest.raises(InvalidOperation, match=r"lone surrogate \('\\ud83d'"):
        parse_operation("write_file", arguments)


def test_a_lone_surrogate_in_a_key_or_a_list_item_is_refused():
    with pytest.raises(InvalidOperation, match="lone surrogate"):
        parse_operation("observe", {"cameras": ["agentview", LONE]})
    with pytest.raises(InvalidOperation, match="lone surrogate"):
        parse_operation("list_files", {LONE: 1})


def test_a_surrogate_pair_is_one_character_and_fine():
    assert parse_operation("write_file", '{"path": "a.py", "content": "\\ud83d\\ude00"}').content == "\U0001f600"


@pytest.mark.parametrize("arguments", [DEEP_TEXT, DEEP_TEXT.encode(), deep_object(), '{"path": ' + "[" * 5000])
def test_arguments_nested_2000_deep_are_refused_without_recursion(arguments):
    with pytest.raises(InvalidOperation, match="nested deeper than 32 levels"):
        parse_operation("write_file", arguments)


def test_the_depth_scan_skips_strings_and_the_operations_fit_under_the_bound():
    assert json_depth('{"a": "[[[[{{{{", "b": [[1], {"c": []}]}') == 4
    assert json_depth(r'{"a": "\"[[[["}') == 1
    assert json_depth("[" * 40) == 40
    batch = {"waypoints": [waypoint()]}
    assert json_depth(json.dumps(batch)) == 4 <= pp.MAX_ARGUMENT_DEPTH  # the deepest operation
    assert parse_operation("move_flange", json.dumps(batch)).waypoints[0].duration_s == 0.5
    nested = {"cameras": ["a"], "x": json.loads("[" * 30 + "]" * 30)}  # unknown fields are ignored, still bounded
    assert parse_operation("observe", nested).cameras == ["a"]


def test_an_act_chunk_over_the_maximum_is_refused_naming_it():
    rows = [[0.0] * 7] * 100_000
    with pytest.raises(InvalidOperation, match=r"act: Expected `array` of length <= 1000 - at `\$.actions`"):
        parse_operation("act", json.dumps({"actions": rows}))
    assert len(parse_operation("act", {"actions": [[0.0] * 7] * pp.MAX_ACT_ROWS}).actions) == pp.MAX_ACT_ROWS
    with pytest.raises(InvalidOperation, match=r"length <= 64 - at `\$.actions\[0\]`"):
        parse_operation("act", {"actions": [[0.0] * 65]})


@pytest.mark.parametrize(("arguments", "match"), [
    ({"actions": []}, r"length >= 1"),
    ({"actions": "not a list"}, r"Expected `array`, got `str`"),
    ({}, r"missing required field `actions`"),
])
def test_malformed_act_chunks_are_refused(arguments, match):
    with pytest.raises(InvalidOperation, match=match):
        parse_operation("act", arguments)


def test_move_flange_caps_at_256_so_33_still_reach_the_scene_rule():
    assert len(parse_operation("move_flange", {"waypoints": [waypoint()] * 33}).waypoints) == 33  # the scene refuses it
    assert len(parse_operation("move_flange", {"waypoints": [waypoint()] * pp.MAX_WAYPOINTS}).waypoints) == 256
    with pytest.raises(InvalidOperation, match=r"length <= 256 - at `\$.waypoints`"):
        parse_operation("move_flange", json.dumps({"waypoints": [waypoint()] * 100_000}))


@pytest.mark.parametrize(("name", "arguments", "match"), [
    ("wait", {"steps": 10**9}, r"<= 100000"),
    ("write_file", {"path": "p" * 1025, "content": ""}, r"length <= 1024"),
    ("read_file", {"path": "p" * 1025}, r"length <= 1024"),
    ("exec", {"path": "p" * 1025}, r"length <= 1024"),
    ("search_history", {"query": "q" * 4097}, r"length <= 4096"),
    ("finish", {"reason": "r" * 4097}, r"length <= 4096"),
    ("observe", {"cameras": ["c"] * 33}, r"length <= 32"),
])
def test_other_maxima_are_refused_at_parse(name, arguments, match):
    with pytest.raises(InvalidOperation, match=match):
        parse_operation(name, arguments)


def test_refusal_messages_are_bounded_and_encodable():
    with pytest.raises(InvalidOperation) as err:
        parse_operation("x" * 100_000 + LONE, "{}")
    assert len(str(err.value)) < 1200
    msgspec.json.encode(str(err.value))


def test_the_tool_schemas_state_the_maxima():
    act = tool_spec("act").parameters["properties"]["actions"]
    assert (act["minItems"], act["maxItems"], act["items"]["maxItems"]) == (1, 1000, 64)
    assert tool_spec("move_flange").parameters["properties"]["waypoints"]["maxItems"] == 256
    assert tool_spec("wait").parameters["properties"]["steps"]["maximum"] == 100_000
    write = tool_spec("write_file").parameters["properties"]
    assert write["content"]["maxLength"] == 4 * 1024 * 1024 and write["path"]["maxLength"] == 1024
    assert tool_spec("search_history").parameters["properties"]["query"]["maxLength"] == 4096
    cameras = tool_spec("observe").parameters["properties"]["cameras"]
    assert (cameras["maxItems"], cameras["items"]["maxLength"]) == (32, 256) and "anyOf" not in cameras


def test_the_stated_write_and_path_maxima_are_the_workspace_s_own():
    from roboswe.sandbox.walk import MAX_PATH_BYTES
    from roboswe.sim.paint.control import MAX_WAYPOINTS

    from roboswe.evaluation.workspace import MAX_WRITE_BYTES

    assert pp.MAX_WRITE_BYTES == MAX_WRITE_BYTES and pp.MAX_PATH_CHARS == MAX_PATH_BYTES
    assert pp.MAX_WAYPOINTS > MAX_WAYPOINTS  # the scene's own rule stays reachable


def test_clean_turn_replaces_lone_surrogates_and_keeps_native_exact():
    from roboswe.protocol.participant import (
        ReasoningPart,
        TextPart,
        ToolCallPart,
        Turn,
        clean_turn,
    )

    turn = Turn(id="t", role="assistant", native=b'{"text": "\\ud83d"}', parts=[
        TextPart(text=f"a{LONE}b"), ReasoningPart(text=LONE), ToolCallPart(call_id="c", name="x", arguments=f'"{LONE}"')])
    cleaned = clean_turn(turn)
    assert [p.text for p in cleaned.parts[:2]] == ["a\ufffdb", "\ufffd"] and cleaned.parts[2].arguments == '"\ufffd"'
    assert cleaned.native == turn.native
    msgspec.msgpack.encode(cleaned)
    plain = Turn(id="t", role="user", parts=[TextPart(text="fine é")])
    assert clean_turn(plain) is plain
