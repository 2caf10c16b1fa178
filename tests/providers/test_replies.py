"""Adapter behaviour the strict fakes made necessary: thinking form by model, streaming of
long Anthropic requests, empty replies as failed attempts, forward-compatible Gemini replay."""

from __future__ import annotations

import json

import pytest
from roboswe.protocol.participant import OpaquePart, Turn, result_turn

from roboswe.providers import ProviderConfig, create_participant

from .fakes import (
    REPLY,
    FakeProvider,
    Reply,
    anthropic_reply,
    google_reply,
    openai_reply,
)
from .test_adapters import KEY_ENV, config, request


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "fake-key")


@pytest.mark.parametrize(("model", "reasoning", "thinking", "output_config", "beta"), [
    ("claude-opus-4-7", {"effort": "high"}, {"type": "adaptive"}, {"effort": "high"}, None),
    ("claude-opus-4-6", {"effort": "medium"}, {"type": "adaptive"}, {"effort": "medium"}, None),
    ("claude-sonnet-4-5-20250929", {"effort": "high"}, {"type": "enabled", "budget_tokens": 16_384}, None,
     "interleaved-thinking-2025-05-14"),
    ("claude-sonnet-4-5-20250929", {"budget_tokens": 4096}, {"type": "enabled", "budget_tokens": 4096}, None,
     "interleaved-thinking-2025-05-14"),
])
async def test_thinking_form_is_chosen_by_model_and_accepted_across_a_tool_loop(model, reasoning, thinking,
                                                                               output_config, beta):
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake, model=model, reasoning=reasoning, max_output_tokens=20_000))
        fake.queue(anthropic_reply(tool=("list_files", {})), anthropic_reply(tool=("finish", {})))
        first = await p.decide(request())
        body = fake.seen[-1].json()
        assert body["thinking"] == thinking and body.get("output_config") == output_config
        assert fake.seen[-1].headers.get("anthropic-beta") == beta
        await p.decide(request(first.turn, result_turn(first, id="r1", text="(empty)")))  # the strict fake accepts it
        assert not fake.rejected
        await p.aclose()


@pytest.mark.parametrize(("model", "reasoning", "match"), [
    ("claude-opus-4-7", {"type": "enabled", "budget_tokens": 8000}, "takes only adaptive thinking"),
    ("claude-sonnet-4-5", {"type": "adaptive"}, "does not take adaptive thinking"),
    ("claude-sonnet-4-5", {"budget_tokens": 20_000}, "below max_output_tokens 16384"),
    ("claude-opus-4-7", {"effort": "high", "budgett": 1}, "unknown"),
])
def test_thinking_settings_a_model_would_refuse_are_config_errors(model, reasoning, match):
    with pytest.raises(ValueError, match=match):
        create_participant(ProviderConfig(kind="anthropic", model=model, api_key_env=KEY_ENV, reasoning=reasoning))


def test_shipped_anthropic_config_works_for_current_and_older_models():
    import msgspec

    from roboswe.config import load_config
    from roboswe.providers.anthropic import thinking_settings

    from .test_configs import RUNS

    provider = load_config(RUNS / "anthropic.toml").provider
    forms = {m: thinking_settings(msgspec.structs.replace(provider, model=m))[0]["type"]
             for m in ("claude-opus-4-8", "claude-opus-4-7", "claude-sonnet-4-6", "claude-sonnet-4-5-20250929")}
    assert forms == {"claude-opus-4-8": "adaptive", "claude-opus-4-7": "adaptive", "claude-sonnet-4-6": "adaptive",
                     "claude-sonnet-4-5-20250929": "enabled"}


async def test_long_generations_are_streamed_and_assembled_from_the_recorded_events():
    with FakeProvider("anthropic") as fake:
        # display = "summarized": Opus 4.7 and later omit the thinking text otherwise (the fake does too)
        p = create_participant(config(fake, model="claude-opus-4-7", reasoning={"effort": "high", "display": "summarized"},
                                      max_output_tokens=64_000))
        fake.queue(anthropic_reply(tool=("exec", {"path": "lift.py"}), text="Running."), anthropic_reply(tool=("finish", {})))
        d = await p.decide(request())
        assert fake.seen[-1].json()["stream"] is True
        assert d.attempts[-1].response.startswith(b"event: message_start")  # the exact stream is the evidence
        assert d.operation is not None and d.operation.path == "lift.py" and d.usage.output_tokens == 80
        thinking = [json.loads(x.data) for x in d.turn.parts if isinstance(x, OpaquePart)]
        assert thinking[0]["signature"] and thinking[0]["thinking"] == "Let me plan the grasp."
        await p.decide(request(d.turn, result_turn(d, id="r1", text="exit 0")))  # signature replayed unchanged
        assert not fake.rejected
        await p.aclose()


def _empty(wire: str) -> Reply:
    if wire == "anthropic":
        return anthropic_reply(thinking=False)  # end_turn, no content
    if wire == "google":
        body = json.loads(google_reply(thought=False).body)
        body["candidates"][0]["content"] = {"role": "model"}  # a candidate without parts
        return Reply(body=json.dumps(body).encode())
    if wire == "openai":
        return openai_reply()  # only a reasoning item
    return REPLY[wire](reasoning=False)


@pytest.mark.parametrize("wire", ["anthropic", "openai", "google", "openrouter"])
async def test_an_empty_reply_is_a_failed_attempt_retried_and_recorded(wire):
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake))
        fake.queue(_empty(wire), REPLY[wire](tool=("list_files", {})))
        d = await p.decide(request())
        assert [a.outcome for a in d.attempts] == ["empty_reply", "ok"]
        assert d.attempts[0].response and "no text and no tool call" in d.attempts[0].detail
        assert d.turn.tool_calls()  # the turn that enters the history is the usable one
        await p.aclose()


async def test_gemini_replay_drops_fields_this_sdk_does_not_know():
    with FakeProvider("google") as fake:
        p = create_participant(config(fake))
        body = json.loads(google_reply(tool=("list_files", {})).body)
        body["candidates"][0]["content"]["futureField"] = {"x": 1}
        body["candidates"][0]["content"]["parts"][-1]["partFutureField"] = True
        fake.queue(Reply(body=json.dumps(body).encode()), google_reply(tool=("finish", {})))
        d = await p.decide(request())
        assert b"futureField" in d.turn.native  # kept as it came ...
        await p.decide(request(d.turn, result_turn(d, id="r1", text="ok")))  # ... and sent back without it
        sent = json.dumps(fake.seen[-1].json())
        assert "futureField" not in sent and "thoughtSignature" in sent and not fake.rejected
        await p.aclose()


async def test_openai_reasoning_model_asks_for_encrypted_reasoning_without_a_reasoning_setting():
    with FakeProvider("openai") as fake:
        p = create_participant(config(fake, model="gpt-5.2-2026-01-01"))
        fake.queue(openai_reply(tool=("list_files", {})))
        await p.decide(request())
        assert fake.seen[-1].json()["include"] == ["reasoning.encrypted_content"]
        await p.aclose()


async def test_openai_turn_without_encrypted_reasoning_is_replayed_without_item_ids():
    from roboswe.providers.openai import input_items

    with FakeProvider("openai") as fake:
        p = create_participant(config(fake))
        fake.queue(openai_reply(tool=("list_files", {})))
        d = await p.decide(request())
        await p.aclose()
    plain = [{k: v for k, v in i.items() if k != "encrypted_content"} for i in json.loads(d.turn.native)]
    stripped = Turn(id=d.turn.id, role="assistant", parts=d.turn.parts, provider="openai", native=json.dumps(plain).encode())
    items = input_items(request(stripped, result_turn(d, id="r1", text="x")), "openai", "auto")
    calls = [i for i in items if i.get("type") == "function_call"]
    assert calls and "id" not in calls[0] and not any(i.get("type") == "reasoning" for i in items)


@pytest.mark.parametrize(("model", "form"), [
    ("claude-sonnet-4-5@20250929", "enabled"), ("anthropic.claude-sonnet-4-5-20250929-v1:0", "enabled"),
    ("claude-opus-4-1-20250805", "enabled"), ("claude-opus-4-20250514", "enabled"), ("claude-3-7-sonnet-20250219", "enabled"),
    ("claude-opus-4-6", "adaptive"), ("claude-sonnet-4-6", "adaptive"), ("claude-opus-4-7", "adaptive"),
    ("claude-opus-5-5", "adaptive"), ("claude-fable-5-1", "adaptive"),
])
def test_thinking_form_by_model_name_across_platform_spellings(model, form):
    from roboswe.providers.anthropic import thinking_settings

    cfg = ProviderConfig(kind="anthropic", model=model, reasoning={"effort": "high"}, max_output_tokens=32_000)
    assert thinking_settings(cfg)[0]["type"] == form
