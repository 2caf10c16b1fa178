"""A stop that is the model's outcome (a refusal, max_tokens, an incomplete response, a safety block)
is a decision: recorded on the turn with the provider's own field, never sent again unchanged, and
the participant is told in the next message (docs: Anthropic build-with-claude/handling-stop-reasons,
OpenAI api-reference/responses `status`/`incomplete_details`, Gemini api/generate-content
`finishReason`/`promptFeedback.blockReason`, OpenRouter api-reference `finish_reason`)."""

from __future__ import annotations

import json

import pytest
from roboswe.protocol.participant import OpaquePart, result_turn

from roboswe.providers import create_participant

from .fakes import REPLY, FakeProvider, outcome_reply
from .test_adapters import KEY_ENV, config, request

OUTCOMES = [("anthropic", "refusal"), ("anthropic", "max_tokens"), ("openai", "max_output_tokens"),
            ("openai", "content_filter"), ("google", "SAFETY"), ("google", "blocked"), ("google", "MAX_TOKENS"),
            ("openrouter", "content_filter"), ("openrouter", "length")]


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "fake-key")


@pytest.mark.parametrize(("wire", "stop"), OUTCOMES)
async def test_a_stop_that_is_the_models_outcome_is_a_decision_not_a_retry(wire, stop):
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake))
        fake.queue(outcome_reply(wire, stop), REPLY[wire](tool=("list_files", {})))
        d = await p.decide(request())
        assert len(fake.generations()) == 1  # not sent again: the same request would pay for the same outcome
        assert [a.outcome for a in d.attempts] == ["ok"] and d.operation is None
        assert stop.split(":")[0] in d.stop_reason or stop == "blocked"
        assert "the response stopped with" in d.invalid and p.STOP_FIELD.split(" ")[0] in d.invalid
        (kept,) = [x for x in d.turn.parts if isinstance(x, OpaquePart) and x.kind == "stop"]
        assert json.loads(kept.data) == {p.STOP_FIELD: d.stop_reason}  # on the turn, in the provider's own field
        # The next request tells the participant and is one the service accepts (the empty or cut-off
        # reply is left out where it cannot be sent back).
        told = result_turn(d, id="r1", text=f"Your reply could not be used as an operation: {d.invalid}")
        nxt = await p.decide(request(d.turn, told))
        await p.aclose()
    assert nxt.operation is not None and fake.rejected == []
    first, second = (g.body for g in fake.generations())
    assert first != second and d.invalid.encode()[:40] in second.replace(b"\\'", b"'")


async def test_an_empty_end_turn_is_still_retried():
    """An empty reply that is no outcome of the model (end_turn with nothing) stays a failed attempt."""
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake))
        fake.queue(REPLY["anthropic"](thinking=False), REPLY["anthropic"](tool=("list_files", {})))
        d = await p.decide(request())
        await p.aclose()
    assert [a.outcome for a in d.attempts] == ["empty_reply", "ok"]
