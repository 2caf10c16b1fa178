"""The real openai, anthropic and google-genai SDKs against loopback fakes of each wire."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import time
import zlib

import pytest
import structlog

from roboswe.protocol.participant import (
    DecisionRequest,
    Exec,
    Finish,
    OpaquePart,
    ProviderFailure,
    ReasoningPart,
    TextPart,
    Turn,
    image_part,
    offered_tools,
    result_turn,
)
from roboswe.providers import MissingKey, MissingSDK, ProviderConfig, create_participant
from roboswe.providers._hosted import import_sdk

from .fakes import REPLY, FakeProvider, error_reply, malformed_reply, stall_reply

KEY = "sk-test-SECRET-0123456789"
KEY_ENV = "ROBOSWE_TEST_PROVIDER_KEY"
WIRES = ["openai", "anthropic", "google", "openrouter"]


def png(w: int = 8, h: int = 6) -> bytes:
    raw = b"".join(b"\x00" + b"\x90\x20\x20" * w for _ in range(h))

    def chunk(t: bytes, d: bytes) -> bytes:
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


IMAGE = png()
PART = image_part(IMAGE, "agentview")
OPENING = Turn(id="u0", role="user", trial=1, parts=[TextPart(text="Lift the cube."), PART])


def request(*turns: Turn) -> DecisionRequest:
    return DecisionRequest(system="You control a robot by writing Python.", tools=offered_tools(search_history=False),
                           conversation=[OPENING, *turns], images={PART.digest: IMAGE}, trial=1)


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def config(fake: FakeProvider, **kw) -> ProviderConfig:
    defaults = dict(kind=fake.wire, model="fake-model-2026-01-01", api_key_env=KEY_ENV, base_url=fake.base_url,
                    timeout_s=5.0, attempts=3, backoff_initial_s=0.01, backoff_max_s=0.05)
    return ProviderConfig(**{**defaults, **kw})


def key_header(fake: FakeProvider) -> str:
    h = fake.seen[-1].headers
    return h.get("x-api-key") or h.get("x-goog-api-key") or h.get("authorization", "")


@pytest.mark.parametrize("wire", WIRES)
async def test_tool_call_images_usage_and_opaque_items_round_trip(wire):
    with FakeProvider(wire) as fake, structlog.testing.capture_logs() as logs:
        participant = create_participant(config(fake))
        fake.queue(REPLY[wire](tool=("exec", {"path": "lift.py"}), text="Running it.", usage=(1500, 90)))
        first = await participant.decide(request())
        assert first.operation == Exec(path="lift.py") and first.invalid == ""
        assert first.usage.input_tokens == 1500 and first.usage.output_tokens >= 90
        assert first.attempt_count == 1 and first.attempts[0].outcome == "ok"
        a = first.attempts[0]
        assert a.request == fake.seen[-1].body  # the exact bytes the SDK sent
        assert a.request_sha256 == hashlib.sha256(a.request).hexdigest()
        assert a.response_sha256 == hashlib.sha256(a.response).hexdigest()
        assert KEY in key_header(fake)  # the key reached the provider ...
        assert KEY not in (a.request + a.response).decode() and KEY not in a.url  # ... and is in no record
        sent = json.dumps(fake.seen[-1].json())
        assert has_image(sent)  # the camera image in the provider's native image format
        opaque = [p for p in first.turn.parts if isinstance(p, OpaquePart)]
        assert opaque and all(p.provider == wire for p in opaque)
        assert any(isinstance(p, ReasoningPart) for p in first.turn.parts)
        assert first.turn.trial == 1 and first.turn.native

        answer = result_turn(first, id="r1", text="exit 0, 12 steps", images=[PART], trial=1)
        fake.queue(REPLY[wire](tool=("finish", {"reason": "lifted"})))
        second = await participant.decide(request(first.turn, answer))
        assert second.operation == Finish(reason="lifted")
        body = json.dumps(fake.seen[-1].json())  # normalised: SDKs differ in separators
        assert "exit 0, 12 steps" in body
        for marker in OPAQUE_MARKERS[wire]:  # signatures / encrypted reasoning sent back unchanged
            assert marker in body, marker
        await participant.aclose()
    assert KEY not in repr(logs)


IMAGE_B64 = base64.b64encode(IMAGE).decode()


def has_image(text: str) -> bool:
    # google-genai sends bytes as URL-safe base64; the others as standard base64.
    return IMAGE_B64 in text or base64.urlsafe_b64encode(IMAGE).decode() in text
OPAQUE_MARKERS = {
    "openai": ['"encrypted_content": "gAAAAB-opaque-reasoning=="', '"type": "reasoning"'],
    "anthropic": ['"signature": "ZmFrZS1zaWduYXR1cmUtYnl0ZXMtMDEyMzQ1Njc4OQ=="', '"thinking": "Let me plan the grasp."'],
    "google": ['"thoughtSignature": "ZmFrZS1zaWduYXR1cmUtYnl0ZXMtMDEyMzQ1Njc4OQ=="'],
    "openrouter": ['"reasoning_details": [{"type": "reasoning.encrypted", "data": "opaque=="'],
}


async def test_anthropic_redacted_thinking_is_kept_and_sent_back_but_not_readable():
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake))
        fake.queue(REPLY["anthropic"](tool=("observe", {}), thinking=False, redacted=True))
        d = await p.decide(request())
        # (an unknown model is profiled as one that binds thinking: its turns also record their prefix)
        assert [x.kind for x in d.turn.parts if isinstance(x, OpaquePart) and x.kind != "prefix"] == ["redacted_thinking"]
        assert not any(isinstance(x, ReasoningPart) for x in d.turn.parts)
        fake.queue(REPLY["anthropic"](tool=("finish", {})))
        await p.decide(request(d.turn, result_turn(d, id="r1", text="ok")))
        assert '"data": "EncryptedRedactedThinking=="' in json.dumps(fake.seen[-1].json())
        await p.aclose()


COUNT_METHOD = {"anthropic": "anthropic.count_tokens", "openai": "openai.input_tokens",
                # The Developer API counts contents only: instructions and tools ride as text, so approximate.
                "google": "google.count_tokens(approximate: instructions and tools as text)"}


@pytest.mark.parametrize("wire", ["anthropic", "google", "openai"])
async def test_native_count_endpoints_count_the_actual_request(wire):
    with FakeProvider(wire, count=lambda body: 4321) as fake:
        p = create_participant(config(fake))
        count = await p.count_tokens(request())
        assert count.tokens == 4321 and count.method == COUNT_METHOD[wire]
        assert count.exact == (wire != "google")
        seen = fake.counts()[-1].body.decode()
        assert has_image(seen) and "Lift the cube." in seen and "write_file" in seen
        assert "You control a robot" in seen  # instructions are part of the accounting
        assert count.attempts and count.attempts[0].request == fake.counts()[-1].body
        await p.aclose()


async def test_openrouter_counts_locally():
    with FakeProvider("openrouter") as fake:
        p = create_participant(config(fake))
        count = await p.count_tokens(request())
        assert not count.exact and count.tokens > 800  # the image alone is estimated at >= 765
        assert count.proxy
        assert fake.seen == []
        await p.aclose()


async def test_openai_count_falls_back_to_a_labelled_estimate_with_the_failed_attempts():
    with FakeProvider("openai") as fake:
        p = create_participant(config(fake, attempts=1))
        fake.count_script.append(error_reply(404, message="Unknown endpoint"))
        count = await p.count_tokens(request())
        assert not count.exact and count.method == "openai.local_estimate(fallback)" and count.tokens > 800
        assert [a.status for a in count.attempts] == [404]  # the failed exchange is evidence
        await p.aclose()


@pytest.mark.parametrize("wire", WIRES)
async def test_429_retry_after_is_honoured_then_success(wire):
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake))
        fake.queue(error_reply(429, retry_after=0.3), REPLY[wire](tool=("list_files", {})))
        t0 = time.monotonic()
        d = await p.decide(request())
        assert time.monotonic() - t0 >= 0.3
        assert [a.outcome for a in d.attempts] == ["http_429", "ok"]
        assert d.attempts[0].backoff_s == pytest.approx(0.3)
        assert d.attempts[0].status == 429 and b"rate_limit" in d.attempts[0].response
        await p.aclose()


async def test_retry_after_is_capped():
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake, retry_after_max_s=0.1))
        fake.queue(error_reply(429, retry_after=3600), REPLY["anthropic"](tool=("list_files", {})))
        d = await p.decide(request())
        assert d.attempts[0].backoff_s == pytest.approx(0.1)
        await p.aclose()


@pytest.mark.parametrize("wire", WIRES)
async def test_500_overloaded_and_malformed_are_retried_and_recorded(wire):
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake, attempts=4))
        fake.queue(error_reply(500), error_reply(529), malformed_reply(), REPLY[wire](tool=("list_files", {})))
        d = await p.decide(request())
        assert [a.outcome for a in d.attempts] == ["http_500", "overloaded", "malformed", "ok"]
        assert [a.number for a in d.attempts] == [1, 2, 3, 4]
        assert d.attempts[2].response == malformed_reply().body  # the bad bytes are kept as evidence
        assert d.attempts[0].backoff_s < d.attempts[1].backoff_s <= 0.05  # capped exponential back-off
        await p.aclose()


@pytest.mark.parametrize("wire", WIRES)
async def test_stalled_connection_times_out_and_is_retried(wire):
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake, timeout_s=0.5))
        fake.queue(stall_reply(3.0), REPLY[wire](tool=("list_files", {})))
        d = await p.decide(request())
        assert [a.outcome for a in d.attempts] == ["timeout", "ok"]
        assert 0.4 < d.attempts[0].latency_s < 2.5
        await p.aclose()


@pytest.mark.parametrize("wire", WIRES)
async def test_last_attempt_failure_is_a_provider_failure_with_every_attempt(wire):
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake, attempts=3))
        fake.queue(error_reply(503), error_reply(503), error_reply(429, retry_after=0.01))
        with pytest.raises(ProviderFailure) as err:
            await p.decide(request())
        assert err.value.reason == "provider"
        assert [a.outcome for a in err.value.attempts] == ["http_503", "http_503", "http_429"]
        assert err.value.attempts[-1].backoff_s == 0  # no sleep after the last attempt
        await p.aclose()


async def test_bad_request_is_not_retried():
    with FakeProvider("openai") as fake:
        p = create_participant(config(fake, attempts=5))
        fake.queue(error_reply(400, message="invalid model"))
        with pytest.raises(ProviderFailure, match="http_400") as err:
            await p.decide(request())
        assert len(err.value.attempts) == 1
        await p.aclose()


async def test_openrouter_error_inside_200_is_classified():
    with FakeProvider("openrouter") as fake:
        p = create_participant(config(fake))
        upstream = b'{"error": {"code": 502, "message": "upstream overloaded"}}'
        from .fakes import Reply

        fake.queue(Reply(body=upstream), REPLY["openrouter"](tool=("list_files", {})))
        d = await p.decide(request())
        assert [a.outcome for a in d.attempts] == ["http_502", "ok"]
        await p.aclose()


@pytest.mark.parametrize("wire", WIRES)
async def test_unusable_answers_become_invalid_decisions(wire):
    with FakeProvider(wire) as fake:
        p = create_participant(config(fake))
        fake.queue(REPLY[wire](text="I think I am done."), REPLY[wire](tool=("teleport", {"x": 1})),
                   REPLY[wire](tool=("wait", {"steps": -3})))
        no_call = await p.decide(request())
        assert no_call.operation is None and "no tool call" in no_call.invalid
        unknown = await p.decide(request())
        assert unknown.operation is None and "unknown operation 'teleport'" in unknown.invalid
        assert unknown.call_id  # the loop answers this call with an error result
        bad = await p.decide(request())
        assert bad.operation is None and "bad arguments for wait" in bad.invalid
        await p.aclose()


async def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(MissingKey, match=KEY_ENV):
        create_participant(ProviderConfig(kind="anthropic", model="m", api_key_env=KEY_ENV))


def test_missing_sdk_says_what_to_install():
    with pytest.raises(MissingSDK, match="pip install some-sdk"):
        import_sdk("roboswe_no_such_sdk", "some-sdk")


def test_unknown_kind_is_refused_by_the_config():
    import msgspec

    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"kind": "bard"}, ProviderConfig)


@pytest.mark.parametrize("wire", WIRES)
async def test_agent_driven_fake_replays_a_local_agent_through_the_wire(wire):
    """The reusable series driver: the fake answers what the agent would decide from the wire."""
    from roboswe.protocol.participant import ListFiles

    from .fakes import agent_reply

    class Counting:
        def decide(self, request):
            done = sum(len(t.tool_calls()) for t in request.conversation)
            return ListFiles() if done < 3 else Finish(reason=f"{done} calls seen")

    with FakeProvider(wire) as fake:
        fake.queue(*[agent_reply(Counting(), wire)] * 4)
        p = create_participant(config(fake))
        turns: list[Turn] = []
        for n in range(4):
            d = await p.decide(request(*turns))
            turns += [d.turn, result_turn(d, id=f"r{n}", text=f"listing {n}")]
        assert [type(t.tool_calls()[0].operation).__name__ for t in turns[::2]] == ["ListFiles"] * 3 + ["Finish"]
        assert turns[-2].tool_calls()[0].operation == Finish(reason="3 calls seen")
        await p.aclose()


@pytest.mark.parametrize("wire", WIRES)
async def test_lift_demo_agent_trial_through_each_wire(wire):
    """One trial of the Lift demo agent's decisions, carried by each adapter and its fake
    (harness answers are canned here; the real series runs them in the simulator)."""
    from roboswe.agents.lift_demo import LiftDemoAgent

    from .fakes import agent_reply

    canned = {"list_files": "(empty workspace)", "write_file": "written", "observe": "2 images",
              "exec": "exit 0; 50 control steps", "read_file": '{"phase": "done"}'}
    with FakeProvider(wire) as fake:
        fake.queue(*[agent_reply(LiftDemoAgent(), wire)] * 10)
        p = create_participant(config(fake))
        turns: list[Turn] = []
        names = []
        for n in range(10):
            d = await p.decide(request(*turns))
            call = d.turn.tool_calls()[0]
            names.append(call.name if call.name not in ("write_file", "read_file") else f"{call.name}:{call.operation.path}")
            if call.name == "finish":
                break
            turns += [d.turn, result_turn(d, id=f"r{n}", text=canned[call.name])]
        assert names == ["list_files", "write_file:lift_cube.py", "write_file:plan.json", "observe", "exec",
                         "read_file:plan.json", "finish"]
        await p.aclose()


async def test_openrouter_counts_gemini_requests_with_google_count_tokens():
    with FakeProvider("openrouter") as router, FakeProvider("google", count=lambda body: 777) as google:
        p = create_participant(config(router, count_via="google", count_model="gemini-fake", count_api_key_env=KEY_ENV,
                                      count_base_url=google.base_url))
        count = await p.count_tokens(request())
        assert (count.tokens, count.proxy, count.exact) == (777, True, False)
        assert count.method == "openrouter.proxy(google.count_tokens)"
        assert "gemini-fake" in google.counts()[0].path and router.seen == []
        await p.aclose()


async def test_openai_reasoning_items_replayed_only_with_encrypted_content():
    with FakeProvider("openai") as fake:
        p = create_participant(config(fake, reasoning={"effort": "high", "summary": "auto"}))
        fake.queue(REPLY["openai"](tool=("list_files", {})))
        d = await p.decide(request())
        sent = fake.seen[-1].json()
        assert sent["include"] == ["reasoning.encrypted_content"] and sent["reasoning"]["effort"] == "high"
        assert sent["store"] is False
        await p.aclose()
    plain = json.loads(d.turn.native)
    for item in plain:
        item.pop("encrypted_content", None)
    stripped = Turn(id=d.turn.id, role="assistant", parts=d.turn.parts, provider="openai", native=json.dumps(plain).encode())
    from roboswe.providers.openai import input_items

    items = input_items(request(stripped, result_turn(d, id="r1", text="x")), "openai", "auto")
    assert [i.get("type") for i in items if i.get("type")] == ["function_call", "function_call_output"]


async def test_no_tool_call_says_why_the_response_stopped():
    with FakeProvider("anthropic") as fake:
        p = create_participant(config(fake))
        fake.queue(REPLY["anthropic"](text="thinking out loud"))
        d = await p.decide(request())
        assert d.operation is None and d.stop_reason == "end_turn" and "'end_turn'" in d.invalid
        await p.aclose()
