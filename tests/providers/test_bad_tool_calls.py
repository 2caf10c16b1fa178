"""What a model sends is never an exception in the harness: a tool call whose text holds a lone
surrogate, or whose arguments nest 2,000 deep, is an invalid decision through each real SDK, its
exact bytes kept, and the next request (that turn and an error result) is accepted by the strict fake."""

from __future__ import annotations

import json

import msgspec
import pytest
import trio
from roboswe.protocol.participant import Finish, ReasoningPart, TextPart, result_turn
from roboswe.protocol.provider import PROVIDER_CODEC, Decide, Decided

from roboswe.providers import create_participant
from roboswe.providers.anthropic import assemble_stream

from .fakes import REPLY, FakeProvider, Reply, anthropic_reply
from .test_adapters import KEY_ENV, WIRES, config, request

LONE = "\ud83d"  # the first half of a surrogate pair, alone: valid JSON as "\ud83d", not encodable as UTF-8
DEPTH = 2000
DEEP = "[" * DEPTH + "]" * DEPTH
OBJECT_WIRES = ("anthropic", "google")  # the arguments come as a JSON object; the others send JSON text


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "fake-key")


def surrogate_reply(wire: str) -> Reply:
    """A reply whose text and write_file content hold a lone surrogate (as the JSON escape \\ud83d)."""
    return REPLY[wire](tool=("write_file", {"path": "a.py", "content": f"x{LONE}"}), text=f"Writing {LONE} now.")


def literal_surrogate_reply(wire: str) -> Reply:
    """OpenAI/OpenRouter: the arguments TEXT itself holds the lone surrogate (the outer JSON escapes it)."""
    body = json.loads(REPLY[wire](tool=("write_file", {"path": "a.py", "content": "x"})).body)
    arguments = '{"path": "a.py", "content": "' + LONE + '"}'
    if wire == "openai":
        body["output"][-1]["arguments"] = arguments
    else:
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    return Reply(body=json.dumps(body).encode(), headers={"content-type": "application/json"})


def deep_reply(wire: str) -> Reply:
    """A write_file whose path is 2,000 nested arrays: an object on the object wires, JSON text on the others
    (built by substitution: Python's json cannot write it)."""
    reply = REPLY[wire](tool=("write_file", {"path": "@DEEP@", "content": "x"}))
    marker = b'"@DEEP@"' if wire in OBJECT_WIRES else b'\\"@DEEP@\\"'
    assert marker in reply.body
    return Reply(body=reply.body.replace(marker, DEEP.encode()), headers=reply.headers)


CASES = {"surrogate": (surrogate_reply, "holds a lone surrogate"), "deep": (deep_reply, "nested deeper than 32 levels")}


async def _bad_then_next(wire: str, reply: Reply, why: str) -> None:
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake))
        fake.queue(reply, REPLY[wire](tool=("finish", {"reason": "done"})))
        d = await p.decide(request())
        assert d.operation is None and why in d.invalid and d.call_id, d.invalid
        assert [a.outcome for a in d.attempts] == ["ok"]
        assert d.attempts[0].response == reply.body and d.attempts[0].request == fake.seen[-1].body  # exact evidence
        call = d.turn.tool_calls()[0]
        assert call.operation is None
        if "deep" in why and wire in OBJECT_WIRES:  # an object is cut where it nests too deep to be read
            assert "left out: nested deeper than 64 levels" in call.arguments and len(call.arguments) < 1000
        elif "deep" in why:  # JSON text is kept as the model wrote it (bounded by its max_output_tokens)
            assert call.arguments == '{"path": ' + DEEP + ', "content": "x"}'
        PROVIDER_CODEC.encode(Decided(decision=d), sender="provider_client")  # onto the wire, as the actor sends it
        answer = result_turn(d, id="r1", text=f"Your reply could not be used as an operation: {d.invalid}",
                             is_error=True, trial=1)
        second = await p.decide(request(d.turn, answer))
        assert second.operation == Finish(reason="done")
        assert not fake.rejected, fake.rejected
        sent = fake.seen[-1].json()
        assert why in json.dumps(sent)  # the error result reached the model
        await p.aclose()


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("wire", WIRES)
async def test_a_bad_tool_call_is_an_invalid_decision_and_the_next_request_is_accepted(wire, case):
    build, why = CASES[case]
    await _bad_then_next(wire, build(wire), why)


@pytest.mark.parametrize("wire", ["openai", "openrouter"])
async def test_a_lone_surrogate_in_the_arguments_text_itself_is_an_invalid_decision(wire):
    await _bad_then_next(wire, literal_surrogate_reply(wire), "holds a lone surrogate")


@pytest.mark.parametrize("wire", WIRES)
async def test_lone_surrogates_in_text_become_replacement_characters_and_the_call_stands(wire):
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake))
        reply = REPLY[wire](tool=("list_files", {}), text=f"Listing {LONE} first.")
        fake.queue(reply, REPLY[wire](tool=("finish", {})))
        d = await p.decide(request())
        assert d.operation is not None and d.invalid == ""
        texts = [x.text for x in d.turn.parts if isinstance(x, TextPart)]
        assert texts == ["Listing \ufffd first."]
        assert d.turn.native and b"\\ud83d" in d.turn.native  # the provider's exact output stays as it came
        msgspec.msgpack.encode(d)
        await p.decide(request(d.turn, result_turn(d, id="r1", text="(empty)")))
        assert not fake.rejected
        await p.aclose()


async def test_anthropic_reasoning_with_a_lone_surrogate_is_readable_and_encodable():
    body = json.loads(anthropic_reply(tool=("list_files", {})).body)
    body["content"][0]["thinking"] = f"Plan {LONE}"
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake))
        fake.queue(Reply(body=json.dumps(body).encode()))
        d = await p.decide(request())
        assert [x.text for x in d.turn.parts if isinstance(x, ReasoningPart)] == ["Plan \ufffd"]
        msgspec.msgpack.encode(d)
        await p.aclose()


def test_a_streamed_tool_input_nested_2000_deep_assembles_cut():
    """The streamed form: Anthropic sends tool input as partial JSON text, assembled after the stream."""
    message = json.loads(assemble_stream(_deep_stream()))
    path = message["content"][0]["input"]["path"]
    depth = 0
    while isinstance(path, list):
        path, depth = path[0], depth + 1
    assert 32 < depth < 100 and "left out" in path


async def test_a_bad_tool_call_through_the_provider_client_actor(tmp_path):
    """The real provider_client handler and Server: the Decision is encoded onto the wire and decoded again."""
    from roboswe.actors import Client, Server
    from roboswe.actors.provider_client import provider_handler
    from roboswe.protocol.participant import split_images

    with FakeProvider("google") as fake:
        participant = create_participant(config(fake))
        endpoint = f"ipc://{tmp_path}/provider.sock"
        fake.queue(surrogate_reply("google"), deep_reply("google"), REPLY["google"](tool=("finish", {})))
        async with trio.open_nursery() as nursery:
            await nursery.start(Server("provider_client", endpoint, PROVIDER_CODEC, provider_handler(participant)).serve)
            async with Client("coordinator", endpoint, PROVIDER_CODEC) as client:
                turns = []
                for n, why in enumerate(["holds a lone surrogate", "nested deeper than 32 levels", ""]):
                    stripped, digests, blobs = split_images(request(*turns))
                    with trio.fail_after(30):
                        reply = (await client.request(Decide(request=stripped, image_digests=digests), blobs)).message
                    assert isinstance(reply, Decided), reply
                    d = reply.decision
                    assert why in d.invalid and (d.operation is None) == bool(why)
                    turns += [d.turn, result_turn(d, id=f"r{n}", text=d.invalid or "ok", is_error=bool(why), trial=1)]
            nursery.cancel_scope.cancel()
        assert not fake.rejected
        await participant.aclose()



def _retyped(wire: str, value) -> Reply:
    """A reply whose tool call carries ``value`` where the wire has a string (the name, or OpenRouter's arguments)."""
    body = json.loads(REPLY[wire](tool=("list_files", {})).body)
    if wire == "anthropic":
        body["content"][-1]["name"] = value
    else:
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = value
    return Reply(body=json.dumps(body).encode())


@pytest.mark.parametrize(("wire", "value"), [("anthropic", ["list_files"]), ("openrouter", {"path": "a.py"}),
                                             ("openrouter", 7)])
async def test_a_tool_call_of_the_wrong_shape_is_a_malformed_attempt_with_its_bytes(wire, value):
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake))
        bad = _retyped(wire, value)
        fake.queue(bad, REPLY[wire](tool=("list_files", {})))
        d = await p.decide(request())
        assert [a.outcome for a in d.attempts] == ["malformed", "ok"] and d.attempts[0].response == bad.body
        assert "not text" in d.attempts[0].detail
        await p.aclose()


@pytest.mark.parametrize("wire", WIRES)
async def test_a_200_body_of_the_wrong_shape_is_a_malformed_attempt(wire):
    shapes = {"anthropic": {"type": "message", "content": ["not a block"]}, "openai": {"output": [7]},
              "google": {"candidates": [{"content": {"parts": ["x"]}}]}, "openrouter": {"choices": [{"message": []}]}}
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake))
        fake.queue(Reply(body=json.dumps(shapes[wire]).encode()), REPLY[wire](tool=("list_files", {})))
        d = await p.decide(request())
        assert [a.outcome for a in d.attempts] == ["malformed", "ok"], d.attempts[0].detail
        await p.aclose()


@pytest.mark.parametrize("case", list(CASES))
async def test_a_bad_tool_call_in_a_streamed_anthropic_reply_is_an_invalid_decision(case):
    """Long generations stream (the tool input then arrives as partial JSON text); the same rules hold."""
    build, why = CASES[case]
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake, model="claude-opus-4-7", reasoning={"effort": "high"},
                                      max_output_tokens=64_000))
        if case == "deep":  # the fake's stream builder cannot read it: stream the deep input as text by hand
            fake.queue(lambda seen: Reply(body=_deep_stream(), headers={"content-type": "text/event-stream"}))
        else:
            fake.queue(build("anthropic"))
        fake.queue(REPLY["anthropic"](tool=("finish", {})))
        d = await p.decide(request())
        assert fake.seen[0].json()["stream"] is True and d.attempts[0].response.startswith(b"event: ")
        assert d.operation is None and why in d.invalid, d.invalid
        PROVIDER_CODEC.encode(Decided(decision=d), sender="provider_client")
        second = await p.decide(request(d.turn, result_turn(d, id="r1", text=d.invalid, is_error=True, trial=1)))
        assert second.operation == Finish() and not fake.rejected, fake.rejected
        await p.aclose()


def _deep_stream() -> bytes:
    events = [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "fake",
                                              "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_deep", "name": "write_file", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
                                                             "partial_json": '{"path": ' + DEEP + "}"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
