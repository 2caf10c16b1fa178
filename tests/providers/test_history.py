"""The context policy keeps the active history acceptable to the provider: unanswered tool
calls get an error result, images stay within the per-request limit, and the 200,000-unit
slide rule behaves as the README says for 200k and 1M windows."""

from __future__ import annotations

import pytest
import structlog
from roboswe.protocol.participant import (
    ImagePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Turn,
)

from roboswe.context.history import UNANSWERED
from roboswe.context.policy import SAFETY_ALLOWANCE, ContextWindow
from roboswe.providers import ProviderConfig, images_per_request

from .test_context import ExactCounter, assert_pairs_whole, exchange, opening


def call(n: int) -> Turn:
    return Turn(id=f"a{n}", role="assistant", trial=1, parts=[ToolCallPart(call_id=f"c{n}", name="exec",
                                                                           arguments='{"path": "x.py"}')])


def observation(n: int, images: int = 2) -> tuple[Turn, Turn, dict[str, bytes]]:
    ims = [ImagePart(digest=f"d{n}-{k}", camera=f"cam{k}", width=64, height=64) for k in range(images)]
    result = Turn(id=f"r{n}", role="user", trial=1, parts=[ToolResultPart(call_id=f"c{n}", text=f"obs {n}", images=ims)])
    return call(n), result, {i.digest: b"png" for i in ims}


async def test_a_tool_call_left_unanswered_gets_an_error_result_before_the_next_request():
    w = ContextWindow(context_window=200_000, max_output_tokens=16_000, counter=ExactCounter())
    w.append(opening())
    w.append(call(1))  # the operation failed for an infrastructure reason: no result turn
    with structlog.testing.capture_logs() as logs:
        w.append(Turn(id="t2", role="user", trial=2, parts=[TextPart(text="Trial 2 of 5 begins.")]))
    p = await w.prepare("sys", 2)
    ids = [t.id for t in p.request.conversation]
    assert ids == ["u0", "a1", "a1/unanswered", "t2"]
    (answer,) = p.request.conversation[2].tool_results()
    assert answer.call_id == "c1" and answer.is_error and answer.text == UNANSWERED
    assert any(e["event"] == "unanswered_tool_calls_answered" for e in logs)
    assert [t.id for t in w.exchanges()[1]] == ["a1", "a1/unanswered"]  # a slide keeps them together


async def test_a_request_never_ends_on_an_unanswered_call():
    w = ContextWindow(context_window=200_000, max_output_tokens=16_000, counter=ExactCounter())
    w.append(opening())
    w.append(call(1))
    p = await w.prepare("sys", 1)
    assert p.request.conversation[-1].tool_results()[0].call_id == "c1"
    again = await w.prepare("sys", 1)  # answered once, not twice
    assert [t.id for t in again.request.conversation] == [t.id for t in p.request.conversation]


@pytest.mark.parametrize(("kind", "window", "limit"), [("anthropic", 200_000, 100), ("anthropic", 1_000_000, 600),
                                                       ("openai", 400_000, 500), ("google", 1_048_576, 3600),
                                                       ("openrouter", 1_000_000, 100), ("python", 200_000, None)])
def test_documented_image_limits_by_provider(kind, window, limit):
    assert images_per_request(ProviderConfig(kind=kind, context_window=window)) == limit
    assert images_per_request(ProviderConfig(kind=kind, context_window=window, max_images_per_request=7)) == 7


async def test_oldest_images_become_placeholders_before_the_limit_in_stable_batches():
    w = ContextWindow(context_window=1_000_000, max_output_tokens=16_000, counter=ExactCounter(), max_images=100)
    w.append(opening())
    dropped_at = []
    previous_prefix = None
    for n in range(120):  # 240 images in all
        a, r, blobs = observation(n)
        w.append(a)
        w.append(r, blobs)
        p = await w.prepare("sys", 1)
        sent = sum(len(x.images) for t in p.request.conversation for x in t.tool_results())
        assert sent <= 100 and p.count.images == sent
        assert set(p.request.images) == set(p.request.referenced_images())  # only the images sent travel
        if p.count.images_dropped and (not dropped_at or p.count.images_dropped != dropped_at[-1][1]):
            dropped_at.append((n, p.count.images_dropped))
        prefix = [t for t in p.request.conversation if t.id.startswith("r")][:5]
        if previous_prefix is not None and dropped_at and dropped_at[-1][0] != n:
            assert prefix == previous_prefix  # between batches the request prefix does not change
        previous_prefix = prefix
    assert dropped_at[0] == (50, 2 * 14)  # 102 images -> at most 75 (14 turns out, 74 left)
    assert len(dropped_at) < 10  # a batch at a time, not one per observation
    first = p.request.conversation[1:3]
    text = first[1].tool_results()[0].text
    assert "obs 0" in text and "removed from this request" in text and "at most 100 images" in text


@pytest.mark.parametrize(("window", "kept_share"), [(200_000, 0.0), (1_000_000, 0.7)])
async def test_the_200k_unit_slide_rule_on_a_200k_and_a_1m_window(window, kept_share):
    """C = 200k: B is about 180k, below the 200,000-unit minimum, so a slide removes every removable
    exchange (the pinned opening and the newest exchange stay). C = 1M: a slide removes about 200k units
    and keeps the rest of the history."""
    w = ContextWindow(context_window=window, max_output_tokens=16_000, counter=ExactCounter())
    assert w.budget == window - 16_000 - SAFETY_ALLOWANCE
    w.append(opening())
    n = 0
    while True:
        for t in exchange(n, 15_000):  # ~5,000 tokens per exchange
            w.append(t)
        n += 1
        p = await w.prepare("sys", 1)
        if p.slide is not None:
            break
    kept = [t for t in p.request.conversation if t.id.startswith(("a", "r"))]
    assert kept[-1].id == f"r{n - 1}" and p.request.conversation[0].id == "u0"
    assert p.slide.removed_units >= min(200_000, p.slide.before_units - 5_000 * 2)
    assert_pairs_whole(w)
    if kept_share == 0.0:
        assert [t.id for t in kept] == [f"a{n - 1}", f"r{n - 1}"]  # only the newest exchange
    else:
        assert len(kept) / 2 > kept_share * n  # most of the history stays
        assert 200_000 <= p.slide.removed_units < 220_000


async def test_images_also_stay_within_the_request_byte_limit():
    """Gemini takes 20 MB per request with inline images: 300 KB camera frames reach that long before
    3,600 images; base64 makes each 400 KB on the wire."""
    w = ContextWindow(context_window=1_048_576, max_output_tokens=16_000, counter=ExactCounter(), max_images=3600,
                      max_request_bytes=20_000_000)
    w.append(opening())
    for n in range(60):
        a, r, _ = observation(n, images=1)
        w.append(a)
        w.append(r, {r.tool_results()[0].images[0].digest: b"x" * 300_000})
        p = await w.prepare("sys", 1)
        sent = [i for t in p.request.conversation for x in t.tool_results() for i in x.images]
        assert len(sent) * 400_000 <= 0.75 * 20_000_000  # images fill at most three quarters of the request
    assert p.count.images_dropped > 0 and "3600 images and 20 MB" in p.request.conversation[2].text()
