"""Whole series through each adapter against the strict fakes, with the context policy
assembling every request as the context manager does (no simulator: operation results
are canned, observations carry real PNG bytes).

One series per provider holds what used to poison a retained conversation: thinking (or
reasoning items, thought signatures, reasoning_details) on every turn, a context slide
under thinking, an infrastructure failure that leaves a tool call unanswered mid-trial,
and an empty reply. A second, slow series makes more than 100 observations with images.
The strict fakes refuse any request the real service documents as invalid, so a series
that ends without a refusal is one the real API would have accepted request by request.
"""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from roboswe.protocol.participant import (
    DecisionRequest,
    TextPart,
    Turn,
    image_part,
    result_turn,
)

from roboswe.context.policy import window_for
from roboswe.providers import ProviderConfig, create_participant

from .fakes import REPLY, FakeProvider, Reply, Seen
from .test_replies import _empty

KEY_ENV = "ROBOSWE_SERIES_WIRE_KEY"
WIRES = ["anthropic", "openai", "google", "openrouter"]
# Thinking on, in each provider's own form.
MODELS = {"anthropic": ("claude-opus-4-7", {"effort": "high"}), "openai": ("gpt-5.2-2026-01-01", {"effort": "high"}),
          "google": ("gemini-3-pro-fake", {"include_thoughts": True}), "openrouter": ("anthropic/claude-opus-4.7", {"effort": "high"})}
PLAN = ["list_files", "observe", "write_file", "exec", "observe", "finish"]  # one trial's decisions


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "fake-key")


def png(seed: int, size: int = 48) -> bytes:
    """A distinct, valid PNG per observation (its bytes, not just its name, reach the model)."""
    raw = b"".join(b"\x00" + bytes((seed * 7 + x * 3 + y) % 256 for x in range(size * 3)) for y in range(size))

    def chunk(t: bytes, d: bytes) -> bytes:
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    ihdr = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")


ARGS = {"list_files": {}, "observe": {}, "write_file": {"path": "lift.py", "content": "import robot\n"},
        "exec": {"path": "lift.py"}, "finish": {"reason": "done"}}


def plan(fake: FakeProvider, ops: list[str]) -> None:
    """Queue replies that make the given operations in order (thinking on every reply)."""
    it = iter(ops)

    def reply(seen: Seen) -> Reply:
        name = next(it)
        return REPLY[fake.wire](tool=(name, ARGS[name]))

    fake.queue(*[reply] * len(ops))


class Series:
    """The coordinator's side of a series, reduced to the request/answer loop."""

    def __init__(self, wire: str, fake: FakeProvider, *, image_size: int = 48, **overrides):
        self.image_size = image_size
        model, reasoning = MODELS[wire]
        cfg = dict(kind=wire, model=model, api_key_env=KEY_ENV, base_url=fake.base_url, reasoning=reasoning,
                   attempts=3, backoff_initial_s=0.0, backoff_max_s=0.0, timeout_s=10.0)
        self.config = ProviderConfig(**{**cfg, **overrides})
        self.participant = create_participant(self.config)
        self.window = window_for(self.config, self.participant.count_tokens, "s1")  # as the context manager builds it
        self.turns = 0
        self.observations = 0
        self.requests: list[DecisionRequest] = []
        self.counts = []
        self.decisions = []

    def _id(self) -> str:
        self.turns += 1
        return f"t{self.turns}"

    async def trial(self, index: int, ops: int, *, fail_after: int | None = None) -> None:
        """`ops` decisions; with fail_after, the harness dies while running that decision's operation."""
        self.window.append(Turn(id=self._id(), role="user", trial=index, pinned=index == 1,
                                parts=[TextPart(text=f"Trial {index} of 5 begins. Lift the cube.")]))
        for n in range(ops):
            prepared = await self.window.prepare("You control a robot by writing Python.", index)
            self.requests.append(prepared.request)
            self.counts.append(prepared.count)
            decision = await self.participant.decide(prepared.request)
            self.decisions.append(decision)
            self.window.append(decision.turn)
            self.window.record_usage(decision.usage)
            if fail_after == n:
                return  # the operation never answered: an infrastructure failure ends the trial
            name = decision.turn.tool_calls()[0].name
            images = []
            if name == "observe":
                data = png(self.observations, self.image_size)
                self.observations += 1
                images = [(image_part(data, "agentview"), data)]
            turn = result_turn(decision, id=self._id(), text=f"{name}: ok", images=[p for p, _ in images], trial=index)
            self.window.append(turn, {p.digest: d for p, d in images})
            if name == "finish":
                return

    async def aclose(self) -> None:
        await self.participant.aclose()


# One series per adapter. The default run keeps the two that cost seconds: Claude with the prefix check (the
# most rules at once) and OpenRouter; the Anthropic, OpenAI and Gemini repeats (17-37 s each, most of it the
# count endpoints) are a pre-release check (`pytest -m exhaustive`).
SERIES = [pytest.param(w, None, marks=pytest.mark.exhaustive) for w in ("anthropic", "openai", "google")] + [
    ("openrouter", None), ("anthropic", "claude-sonnet-5-5")]


@pytest.mark.parametrize(("wire", "model"), SERIES)
async def test_five_trials_with_thinking_a_slide_an_infrastructure_failure_and_an_empty_reply(wire, model):
    """claude-sonnet-5-5 has preserved thinking (the prefix check): after the slide the retained turns
    go back without their thinking, recorded with the count record, and the turns made since keep theirs;
    every request is counted whole."""
    with FakeProvider(wire) as fake:
        # A small window so the retained conversation slides during the series (OpenRouter's proxy
        # adds 8,192 units to every count, so its window is larger).
        series = Series(wire, fake, context_window=24_000 if wire == "openrouter" else 16_000, max_output_tokens=2048,
                        **({"model": model} if model else {}))
        plan(fake, PLAN)
        await series.trial(1, len(PLAN))
        plan(fake, PLAN[:3])  # trial 2: the harness fails while running write_file
        await series.trial(2, 3, fail_after=2)
        fake.queue(_empty(wire))  # trial 3 opens with an empty reply, then works
        plan(fake, PLAN)
        await series.trial(3, len(PLAN))
        for index in (4, 5):
            plan(fake, PLAN)
            await series.trial(index, len(PLAN))
        slides = list(series.window.slides)
        bodies = [g.json() for g in fake.generations()]
        await series.aclose()
    assert fake.rejected == []  # every request was one the service documents as valid
    if model:  # turns sent after a slide changed their prefix lose their thinking; later turns keep it
        assistants = [m for b in bodies for m in b["messages"] if m["role"] == "assistant"]
        thinking = [any(c["type"] == "thinking" for c in m["content"]) for m in assistants]
        assert True in thinking and False in thinking
        removed = [c for c in series.counts if c.thinking_removed]
        assert removed and all(c.rewrite.startswith("slide") for c in removed)
        assert all(c.method.endswith(":whole_request") for c in series.counts)
        assert len({json.dumps([b["system"], b["tools"]]) for b in bodies}) == 1  # byte-identical every request
    assert slides, "the series was meant to slide its window at least once"
    # Trial 3's first request answers the call trial 2 left open, with an error result.
    opened = next(r for r in series.requests if any("Trial 3 of 5" in t.text() for t in r.conversation))
    answered = [p for t in opened.conversation for p in t.tool_results() if p.is_error]
    assert answered and "did not complete" in answered[-1].text
    # The count-endpoint exchanges travel with the count records, as evidence like the generations.
    counted = [a for c in series.counts for a in c.attempts]
    if wire == "openrouter":
        assert counted == [] and all("proxy" in c.method for c in series.counts)
    else:
        assert counted and all(a.outcome == "ok" and a.request and a.response for a in counted)
        assert {a.url.rsplit("/", 1)[-1] for a in counted} == {"anthropic": {"count_tokens"}, "openai": {"input_tokens"},
                                                               "google": {f"{series.config.model}:countTokens"}}[wire]
    empty = [d for d in series.decisions if d.attempts[0].outcome == "empty_reply"]
    assert len(empty) == 1 and [a.outcome for a in empty[0].attempts] == ["empty_reply", "ok"]
    assert all(t.tool_calls() or t.role == "user" for t in series.window.archive)  # no empty turn in the history
    after_slide = series.requests[-1]
    assert after_slide.conversation[0].pinned and "search_history" in [t.name for t in after_slide.tools]


@pytest.mark.slow
# The limit is the context policy's, the same for every wire; openai and google (12-20 s each) repeat it with a
# configured limit and are a pre-release check (`pytest -m exhaustive`).
@pytest.mark.parametrize("wire", [w if w not in ("openai", "google") else pytest.param(w, marks=pytest.mark.exhaustive)
                                  for w in WIRES])
async def test_more_than_100_observations_stay_within_the_image_limit(wire):
    # Anthropic (200k window) and OpenRouter are limited to 100 images by their defaults; for OpenAI
    # (500) and Gemini (3,600) the same limit is set in the config and the fake, to keep this short.
    limit = {"anthropic": None, "openrouter": None, "openai": 100, "google": 100}[wire]
    with FakeProvider(wire, max_images=100) as fake:
        series = Series(wire, fake, image_size=8, context_window=200_000, max_output_tokens=16_384,
                        **({"max_images_per_request": limit} if limit else {}))
        ops = ["observe"] * 110 + ["finish"]
        plan(fake, ops)
        await series.trial(1, len(ops))
        await series.aclose()
    assert fake.rejected == [] and series.observations == 110
    assert not series.window.slides  # the images, not the window, were the limit
    last = series.requests[-1]
    sent = sum(len(p.images) for t in last.conversation for p in t.tool_results())
    assert 0 < sent <= 100
    text = json.dumps([t.text() for t in last.conversation])
    assert "removed from this request" in text and "at most 100 images" in text
