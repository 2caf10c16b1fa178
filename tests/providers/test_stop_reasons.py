"""A stop that is the model's outcome (a refusal, max_tokens, an incomplete response, a safety block)
is a decision: recorded on the turn with the provider's own field, never sent again unchanged, and
the participant is told in the next message (docs: Anthropic build-with-claude/handling-stop-reasons,
OpenAI api-reference/responses `status`/`incomplete_details`, Gemini api/generate-content
`finishReason`/`promptFeedback.blockReason`, OpenRouter api-reference `finish_reason`)."""

from __future__ import annotations

import json

import pytest
from roboswe.protocol.participant import OpaquePart, result_turn

from roboswe.providers import ProviderConfig, create_participant

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


LENGTH_STOPS = {"anthropic": "max_tokens", "openai": "max_output_tokens", "google": "MAX_TOKENS", "openrouter": "length"}


def _output_limit(wire: str, body: dict) -> int:
    """The output limit as each wire carries it."""
    return {"anthropic": lambda b: b["max_tokens"], "openai": lambda b: b["max_output_tokens"],
            "google": lambda b: b["generationConfig"]["maxOutputTokens"], "openrouter": lambda b: b["max_tokens"]}[wire](body)


@pytest.mark.parametrize("wire", sorted(LENGTH_STOPS))
async def test_a_max_tokens_stop_is_sent_again_once_with_the_configured_raise_and_recorded(wire):
    """`max_output_tokens_raise`: after a reply cut at the limit the same request goes once more with the
    raised limit; the cut reply stays in the evidence (billed) under its own outcome, naming both limits."""
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake, max_output_tokens=4000, max_output_tokens_raise=12000))
        fake.queue(outcome_reply(wire, LENGTH_STOPS[wire]), REPLY[wire](tool=("list_files", {})))
        d = await p.decide(request())
        await p.aclose()
    first, second = (g.json() for g in fake.generations())
    assert (_output_limit(wire, first), _output_limit(wire, second)) == (4000, 12000)
    assert fake.rejected == [] and d.operation is not None and not d.invalid
    assert [a.outcome for a in d.attempts] == ["max_tokens_raised", "ok"] and [a.number for a in d.attempts] == [1, 2]
    assert "at max_output_tokens 4000; sent again with 12000" in d.attempts[0].detail
    assert d.attempts[0].response and d.attempts[0].response != d.attempts[1].response  # the billed cut reply kept


async def test_the_raise_stays_within_the_window_the_input_left_and_happens_once():
    """A raise that would not fit the window after the billed input is not sent, and a second cut reply
    at the raised limit is the model's outcome (a decision), never a third request."""
    with FakeProvider("anthropic") as fake:
        tight = create_participant(config(fake, context_window=9_000, max_output_tokens=4000, max_output_tokens_raise=12000))
        fake.queue(outcome_reply("anthropic", "max_tokens"))
        d = await tight.decide(request())  # the fake bills 1,200 input tokens: 9,000 - 1,200 - 4,096 < 4,000
        await tight.aclose()
        assert len(fake.generations()) == 1 and d.operation is None and "max_tokens" in d.stop_reason
        p = create_participant(config(fake, max_output_tokens=4000, max_output_tokens_raise=12000))
        fake.queue(outcome_reply("anthropic", "max_tokens"), outcome_reply("anthropic", "max_tokens"))
        d = await p.decide(request())
        await p.aclose()
    assert len(fake.generations()) == 3 and d.operation is None and d.stop_reason == "max_tokens"
    assert [a.outcome for a in d.attempts] == ["max_tokens_raised", "ok"]


def test_a_raise_below_the_limit_is_a_config_error():
    with pytest.raises(ValueError, match="max_output_tokens_raise 2000 must be above max_output_tokens 4000"):
        ProviderConfig(kind="anthropic", model="m", max_output_tokens=4000, max_output_tokens_raise=2000)


async def test_a_raise_past_the_sdks_unstreamed_limit_is_streamed():
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake, max_output_tokens=8000, max_output_tokens_raise=32000))
        fake.queue(outcome_reply("anthropic", "max_tokens"), REPLY["anthropic"](tool=("list_files", {})))
        d = await p.decide(request())
        await p.aclose()
    first, second = (g.json() for g in fake.generations())
    assert "stream" not in first and second["stream"] is True and second["max_tokens"] == 32000
    assert d.operation is not None and fake.rejected == []
