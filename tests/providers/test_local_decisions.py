"""The `python` participant validates its agent's Operation as a hosted model's tool call is
validated: what the agent gets wrong is an invalid decision, never a harness failure."""

from __future__ import annotations

import hashlib
import json

import msgspec
import pytest
from roboswe.protocol.participant import (
    Act,
    Decision,
    DecisionRequest,
    Exec,
    Finish,
    ListFiles,
    MoveFlange,
    ProviderFailure,
    ToolCallPart,
    Turn,
    WriteFile,
    offered_tools,
)
from roboswe.protocol.provider import PROVIDER_CODEC, Decided

from roboswe.providers import ProviderConfig
from roboswe.providers.local import MAX_TURN_ARGUMENT_BYTES, PythonParticipant

LONE = "\ud83d"


class Says:
    """An agent that answers with what it was given (or raises it)."""

    def __init__(self, answer):
        self.answer = answer

    def decide(self, request):
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def request() -> DecisionRequest:
    return DecisionRequest(system="s", tools=offered_tools(search_history=False, interface="actions"), trial=1,
                           conversation=[Turn(id="u0", role="user", parts=[])])


async def decide(answer) -> Decision:
    p = PythonParticipant(ProviderConfig(kind="python"), agent=Says(answer))
    d = await p.decide(request())
    PROVIDER_CODEC.encode(Decided(decision=d), sender="provider_client")  # every decision crosses the wire
    return d


@pytest.mark.parametrize(("operation", "why"), [
    (Act(actions=[]), "bad arguments for act: Expected `array` of length >= 1 - at `$.actions`"),
    (Act(actions="not a list"), "bad arguments for act: Expected `array`, got `str` - at `$.actions`"),
    (Act(actions=[[0.0] * 7] * 100_000), "bad arguments for act: Expected `array` of length <= 1000 - at `$.actions`"),
    (WriteFile(path="a.py", content=LONE), "$.content holds a lone surrogate"),
    (MoveFlange(waypoints=[{"position": [0, 0, 0]}]), "bad arguments for move_flange"),
    (Exec(path=json.loads("[" * 40 + "]" * 40)), "nested deeper than 32 levels"),
    (Exec(path=object()), "arguments of exec could not be read: not JSON values"),
])
async def test_an_unvalidated_operation_is_an_invalid_decision_with_its_call_kept(operation, why):
    d = await decide(operation)
    assert d.operation is None and why in d.invalid, d.invalid
    (call,) = d.turn.tool_calls()
    assert call.call_id == d.call_id and call.operation is None  # the loop answers this call with an error result
    assert len(call.arguments.encode()) <= MAX_TURN_ARGUMENT_BYTES + 1024


async def test_an_operation_nested_2000_deep_is_an_invalid_decision():
    path: list = []
    for _ in range(2000):
        path = [path]
    d = await decide(Exec(path=path))
    assert d.operation is None and "nested too deeply" in d.invalid


async def test_a_lone_surrogate_keeps_its_exact_text_in_the_evidence():
    d = await decide(WriteFile(path="a.py", content=f"x{LONE}"))
    call = d.turn.tool_calls()[0]
    assert json.loads(call.arguments) == {"path": "a.py", "content": f"x{LONE}"}  # exact, as JSON escapes
    assert call.arguments.isascii()
    exact = msgspec.json.decode(d.attempts[0].response)["parts"][0]
    assert exact["arguments"] == call.arguments


async def test_an_oversized_chunk_is_summarized_in_the_turn_and_kept_exactly_in_the_attempt():
    d = await decide(Act(actions=[[0.25] * 7] * 100_000))
    call = d.turn.tool_calls()[0]
    summary = json.loads(call.arguments)
    exact = msgspec.json.decode(d.attempts[0].response)["parts"][0]["arguments"]
    assert len(exact) > 3_000_000 and len(call.arguments) < 2000
    assert summary["bytes"] == len(exact.encode()) and summary["sha256"] == hashlib.sha256(exact.encode()).hexdigest()
    assert exact.startswith(summary["first_bytes"]) and "over the 65536-byte bound" in summary["_summary"]
    assert d.attempts[0].response_sha256 == hashlib.sha256(d.attempts[0].response).hexdigest()


async def test_a_valid_operation_is_unchanged():
    d = await decide(Act(actions=[[0.0] * 7] * 3))
    assert d.operation == Act(actions=[[0.0] * 7] * 3) and d.invalid == ""
    assert json.loads(d.turn.tool_calls()[0].arguments) == {"actions": [[0.0] * 7] * 3}


@pytest.mark.parametrize(("answer", "why"), [
    (ValueError("the policy lost its weights"), "the agent's decide raised ValueError: the policy lost its weights"),
    (KeyError(LONE), "the agent's decide raised KeyError"),
    ("finish", "Says.decide returned str; expected an Operation or a Decision"),
    (None, "Says.decide returned NoneType"),
])
async def test_an_agent_that_raises_or_answers_wrongly_makes_an_invalid_decision(answer, why):
    d = await decide(answer)
    assert d.operation is None and why in d.invalid and d.turn.tool_calls() == []
    assert d.attempts and d.attempts[0].detail == d.invalid


async def test_a_provider_failure_is_still_an_outage():
    with pytest.raises(ProviderFailure, match="simulated outage"):
        await decide(ProviderFailure("simulated outage", []))


async def test_a_full_decision_s_operation_is_validated_too():
    call = ToolCallPart(call_id="c1", name="act", arguments='{"actions": []}', operation=Act(actions=[]))
    turn = Turn(id="t1", role="assistant", provider="python", parts=[call])
    d = await decide(Decision(turn=turn, operation=Act(actions=[]), call_id="c1"))
    assert d.operation is None and "length >= 1" in d.invalid and d.turn.tool_calls()[0].operation is None
    good = Decision(turn=turn, operation=ListFiles(), call_id="c1")
    assert (await decide(good)).operation == ListFiles()
    assert (await decide(Finish(reason=f"done {LONE}"))).operation is None  # a note must be valid text too
