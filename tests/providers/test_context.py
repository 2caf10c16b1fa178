"""The context policy driven with synthetic histories far larger than any budget."""

from __future__ import annotations

import math
import random

import pytest
from roboswe.protocol.participant import (
    DecisionRequest,
    Exec,
    TextPart,
    TokenCount,
    ToolCallPart,
    ToolResultPart,
    Turn,
    Usage,
)

from roboswe.context.policy import (
    PROXY_CONSTANT,
    SAFETY_ALLOWANCE,
    ContextOverflow,
    ContextWindow,
    SearchUnavailable,
    format_hits,
)
from roboswe.providers._estimate import estimate_request


class ExactCounter:
    """A native-count stand-in: exact = the local estimate; counts its calls."""

    def __init__(self, *, proxy: bool = False, exact: bool = True):
        self.calls = 0
        self.turns_sent = 0
        self.proxy = proxy
        self.exact = exact and not proxy

    async def __call__(self, request: DecisionRequest) -> TokenCount:
        self.calls += 1
        self.turns_sent += len(request.conversation)
        return TokenCount(tokens=estimate_request(request), method="test.count", exact=self.exact, proxy=self.proxy)


def exchange(n: int, size_chars: int, trial: int = 1, marker: str = "") -> tuple[Turn, Turn]:
    call = Turn(id=f"a{n}", role="assistant", trial=trial, parts=[
        ToolCallPart(call_id=f"c{n}", name="exec", arguments='{"path": "x.py"}', operation=Exec(path="x.py"))])
    result = Turn(id=f"r{n}", role="user", trial=trial, parts=[
        ToolResultPart(call_id=f"c{n}", text=(marker + " " if marker else "") + "o" * size_chars)])
    return call, result


def opening(pinned: bool = True) -> Turn:
    return Turn(id="u0", role="user", trial=1, pinned=pinned, parts=[TextPart(text="Lift the red cube. " * 20)])


def window(counter, *, C=400_000, O=16_000, **kw) -> ContextWindow:
    return ContextWindow(context_window=C, max_output_tokens=O, counter=counter, series="s1", **kw)


def assert_pairs_whole(w: ContextWindow) -> None:
    ids = {t.id for t in w.active}
    for t in w.archive:
        if t.id.startswith("a"):
            assert (t.id in ids) == ("r" + t.id[1:] in ids), f"exchange {t.id} was split"


async def test_budget_is_c_minus_o_minus_s():
    w = window(ExactCounter(), C=300_000, O=20_000)
    assert w.budget == 300_000 - 20_000 - SAFETY_ALLOWANCE == 275_904
    with pytest.raises(ValueError, match="no input budget"):
        window(ExactCounter(), C=10_000, O=8_000)


async def test_no_slide_under_budget_and_count_cached_per_request():
    counter = ExactCounter()
    w = window(counter)
    w.append(opening())
    for n in range(5):
        for t in exchange(n, 1000):
            w.append(t)
    p1 = await w.prepare("system", 1)
    p2 = await w.prepare("system", 1)
    assert p1.slide is None and p2.slide is None
    assert counter.calls == 2  # instructions+tools once, the new turns once; the same request not again
    assert counter.turns_sent == len(w.archive)
    for t in exchange(5, 1000):
        w.append(t)
    await w.prepare("system", 1)
    assert counter.calls == 3 and counter.turns_sent == len(w.archive)  # only the two new turns were sent
    assert p1.count.method == "test.count:per_message_sum"
    # A sum of per-turn counts is no count of this request: recorded as estimated, never as exact.
    assert p1.count.exact_tokens is None and p1.count.estimated_units == p1.count.units == p1.count.base_tokens
    assert [t.id for t in p1.request.conversation] == [t.id for t in w.archive][:11]
    # search_history is offered from the first request: the tool list never changes within a series (it is
    # part of every thinking block's prefix and of the cached prefix), and before a slide it says so.
    assert "search_history" in [t.name for t in p1.request.tools]
    with pytest.raises(SearchUnavailable, match="no slide yet"):
        w.search("anything")


async def test_growing_series_slides_remove_at_least_200k_keep_pairs_and_pins():
    counter = ExactCounter()
    w = window(counter)  # B = 379,904
    w.append(opening())
    slides = []
    naive = 0  # turns a whole-request count on every request would send
    for n in range(600):  # ~20,000 tokens per exchange: 12M tokens in all, 30x the budget
        for t in exchange(n, 60_000, trial=1 + n // 120):
            w.append(t)
        prepared = await w.prepare("system instructions", 1 + n // 120)
        first_tools = first_tools if n else prepared.request.tools
        assert prepared.count.units <= w.budget
        naive += len(prepared.request.conversation)
        assert prepared.request.conversation[0].id == "u0"  # pinned
        assert prepared.request.conversation[-1].id == f"r{n}"  # the newest exchange always stays
        assert_pairs_whole(w)
        if prepared.slide:
            s = prepared.slide
            slides.append(s)
            assert s.removed_units >= 200_000
            assert s.before_units > w.budget >= s.after_units
            assert "u0" not in s.removed_turn_ids
            assert len(s.removed_turn_ids) % 2 == 0
            assert prepared.request.tools == first_tools  # the same tools before and after every slide
    assert len(slides) >= 20
    assert len(w.archive) == 1 + 2 * 600  # the archive never shrinks
    # Turns are counted once each, plus whole-request counts near the budget and after each
    # slide; re-counting every request whole would send ~18,000 turns here.
    assert counter.turns_sent < naive / 2
    assert all(s.method.endswith(":whole_request") for s in slides)


async def test_history_far_larger_than_budget_removes_more_than_200k_to_fit():
    w = window(ExactCounter())
    w.append(opening(pinned=False))
    for n in range(400):  # ~8M tokens appended before the first request
        for t in exchange(n, 60_000):
            w.append(t)
    p = await w.prepare("system", 2)
    assert p.slide is not None
    assert p.slide.removed_units > 7_000_000
    assert p.count.units <= w.budget
    assert p.request.conversation[0].id == "slide-notice-1"  # the model is told what happened
    assert_pairs_whole(w)


async def test_oversized_indivisible_exchange_is_an_error_with_evidence():
    w = window(ExactCounter(), C=100_000, O=10_000)
    w.append(opening())
    for n in range(3):
        for t in exchange(n, 3_000):
            w.append(t)
    for t in exchange(99, 400_000):  # ~133k tokens in one call+result pair
        w.append(t)
    archive_before = list(w.archive)
    active_before = list(w.active)
    with pytest.raises(ContextOverflow) as err:
        await w.prepare("system", 1)
    ev = err.value.evidence
    assert ev.budget == w.budget and ev.units > w.budget
    assert ["a99", "r99"] in ev.kept_exchanges
    assert w.archive == archive_before and w.active == active_before  # evidence kept, nothing truncated


async def test_pinned_turns_larger_than_budget_are_an_error():
    w = window(ExactCounter(), C=50_000, O=10_000)
    w.append(Turn(id="big", role="user", pinned=True, parts=[TextPart(text="x" * 200_000)]))
    for t in exchange(1, 10):
        w.append(t)
    with pytest.raises(ContextOverflow):
        await w.prepare("system", 1)


async def test_proxy_units_and_multiplier_monotone():
    w = window(ExactCounter(proxy=True))
    w.append(opening())
    for t in exchange(1, 3000):
        w.append(t)
    p = await w.prepare("system", 1)
    n = p.count.base_tokens
    assert p.count.units == math.ceil(1.30 * n) + PROXY_CONSTANT
    assert p.count.exact_tokens is None and p.count.estimated_units == p.count.units
    seen = [w.proxy_multiplier]
    for u in (int(n * 0.5), int(n * 1.4), int(n * 1.0), int(n * 2.0), 10):
        w.record_usage(Usage(input_tokens=u))
        seen.append(w.proxy_multiplier)
    assert seen == sorted(seen)  # never lowered
    assert seen[0] == 1.30
    assert math.isclose(seen[2], 1.1 * int(n * 1.4) / n)
    assert math.isclose(seen[-1], 1.1 * int(n * 2.0) / n)
    w.append(exchange(2, 10)[0])
    p2 = await w.prepare("system", 1)
    assert p2.count.units == math.ceil(w.proxy_multiplier * p2.count.base_tokens) + PROXY_CONSTANT


async def test_search_only_after_slide_and_finds_archived_turns():
    w = window(ExactCounter())
    w.append(opening())
    with pytest.raises(SearchUnavailable):
        w.search("anything")
    for n in range(60):
        for t in exchange(n, 60_000, marker=f"GRIP-WIDTH-{n:03d}=0.{n:03d}"):
            w.append(t)
    p = await w.prepare("system", 1)
    assert p.slide is not None
    removed = set(p.slide.removed_turn_ids)
    hits = w.search("grip-width-002")
    assert [h.turn_id for h in hits] == ["r2"] and "r2" in removed and not hits[0].active
    assert "GRIP-WIDTH-002=0.002" in hits[0].excerpt and len(hits[0].excerpt) < 400
    many = w.search("GRIP-WIDTH")
    assert len(many) == 20  # bounded
    text = format_hits("GRIP-WIDTH", many)
    assert len(text) <= 8_100 and "turn r0" in text
    assert "No archived turn" in format_hits("nothing", w.search("no-such-text"))


@pytest.mark.parametrize("seed", range(5))
async def test_random_histories_never_split_pairs(seed):
    rng = random.Random(seed)
    w = window(ExactCounter(), C=rng.choice([250_000, 500_000, 1_000_000]), O=rng.choice([8_000, 32_000]))
    w.append(opening())
    n = 0
    for _ in range(150):
        if rng.random() < 0.1:  # trial boundary note, pinned sometimes
            w.append(Turn(id=f"note{n}", role="user", pinned=rng.random() < 0.2, parts=[TextPart(text="trial n begins")]))
        for t in exchange(n, rng.randint(10, 150_000)):
            w.append(t)
        n += 1
        p = await w.prepare("sys", 1)
        assert p.count.units <= w.budget
        assert_pairs_whole(w)
        assert all(t.id in {x.id for x in w.active} for t in w.archive if t.pinned)


async def test_a_per_turn_sum_that_ran_low_is_corrected_and_only_a_whole_count_is_exact():
    """The sum of exactly counted turns is no count of the request (each part was counted with other
    neighbours); it is recorded as estimated, and when the billed input shows it ran low the margin
    rises for the rest of the series, while a whole request counted near the budget stays exact."""
    w = window(ExactCounter(), C=60_000, O=8_000)
    w.append(opening())
    for t in exchange(1, 3000):
        w.append(t)
    first = await w.prepare("system", 1)
    n = first.count.base_tokens
    assert first.count.method.endswith(":per_message_sum") and first.count.exact_tokens is None
    w.record_usage(Usage(input_tokens=int(n * 1.2)))  # the service billed 20% more than the sum said
    assert w.estimate_multiplier == pytest.approx(1.1 * int(n * 1.2) / n)
    for t in exchange(2, 3000):
        w.append(t)
    second = await w.prepare("system", 1)
    assert second.count.units == math.ceil(w.estimate_multiplier * second.count.base_tokens) > second.count.base_tokens
    for n_ in range(3, 60):  # toward the budget: above 95% of B the request is counted whole, exactly
        for t in exchange(n_, 3000):
            w.append(t)
    near = await w.prepare("system", 1)
    assert near.count.method.endswith(":whole_request") and near.count.exact_tokens == near.count.units
