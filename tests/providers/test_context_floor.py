"""The 200,000-unit slide floor, checked with the counter's own figures instead of the slide record.

A slide record reports how many units it removed; a policy that over-reports would pass a
test that reads that figure back. Here every removed exchange is counted again, alone, by the
same counter the window uses (its size = a request holding only that exchange minus the same
request with no conversation), and the sum must reach the floor, fit the budget, and agree
with what the record says.
"""

from __future__ import annotations

import math

import msgspec
import pytest
from roboswe.protocol.participant import (
    DecisionRequest,
    Exec,
    TextPart,
    TokenCount,
    ToolCallPart,
    ToolResultPart,
    Turn,
)

from roboswe.context.policy import SLIDE_MIN_UNITS, ContextWindow
from roboswe.providers._estimate import estimate_request


class Counter:
    """A count endpoint stand-in: tokens = the local estimate of the request it is given."""

    def __init__(self, *, proxy: bool = False):
        self.proxy = proxy

    async def __call__(self, request: DecisionRequest) -> TokenCount:
        return TokenCount(tokens=estimate_request(request), method="test.count", exact=not self.proxy, proxy=self.proxy)


def _exchange(n: int, chars: int, trial: int) -> list[Turn]:
    call = Turn(id=f"a{n}", role="assistant", trial=trial, parts=[
        ToolCallPart(call_id=f"c{n}", name="exec", arguments='{"path": "x.py"}', operation=Exec(path="x.py"))])
    result = Turn(id=f"r{n}", role="user", trial=trial, parts=[ToolResultPart(call_id=f"c{n}", text=f"{n} " + "o" * chars)])
    return [call, result]


async def _tokens_alone(counter: Counter, template: DecisionRequest, turns: list[Turn]) -> int:
    """What the counter says these turns add to a request, counted with nothing else in it."""
    empty = msgspec.structs.replace(template, conversation=[], images={})
    alone = msgspec.structs.replace(template, conversation=turns, images={})
    return (await counter(alone)).tokens - (await counter(empty)).tokens


@pytest.mark.parametrize("proxy", [False, True], ids=["exact", "openrouter_proxy"])
@pytest.mark.parametrize("chars", [9_000, 60_000], ids=["3k_token_exchanges", "20k_token_exchanges"])
async def test_every_slide_removes_at_least_200k_units_by_the_counters_own_figures(proxy, chars):
    counter = Counter(proxy=proxy)
    w = ContextWindow(context_window=400_000, max_output_tokens=16_000, counter=counter, series="s")
    w.append(Turn(id="u0", role="user", trial=1, pinned=True, parts=[TextPart(text="Lift the red cube. " * 20)]))
    by_id: dict[str, Turn] = {"u0": w.archive[0]}
    slides = 0
    for n in range(60 if chars > 10_000 else 260):
        for turn in _exchange(n, chars, trial=1 + n // 50):
            w.append(turn)
            by_id[turn.id] = turn
        prepared = await w.prepare("system instructions", 1 + n // 50)
        slide = prepared.slide
        if slide is None:
            continue
        slides += 1
        removed = [by_id[i] for i in slide.removed_turn_ids]
        assert "u0" not in slide.removed_turn_ids
        pairs = [removed[k:k + 2] for k in range(0, len(removed), 2)]
        assert all(a.id[1:] == r.id[1:] and a.id[0] == "a" and r.id[0] == "r" for a, r in pairs), slide.removed_turn_ids
        tokens = [await _tokens_alone(counter, prepared.request, pair) for pair in pairs]
        # Units as the policy defines them for this counting method: exact tokens, or m x N for the proxy
        # (its +8192 is per request, so it does not belong to any one exchange).
        units = [math.ceil(slide.multiplier * t) if proxy else t for t in tokens]
        assert slide.multiplier >= (1.30 if proxy else 1.0)
        assert sum(units) >= SLIDE_MIN_UNITS, (sum(units), slide.removed_units)
        # Removing the newest of those exchanges would have left the floor unmet: no more was removed than needed
        # (the request fitted with fewer, so the floor is what stopped the removal).
        assert sum(units[:-1]) < SLIDE_MIN_UNITS or slide.before_units - sum(units[:-1]) > w.budget
        # The record agrees with the counter (within the per-turn rounding of the window's cache).
        assert abs(slide.removed_units - sum(units)) <= 0.01 * sum(units) + 4 * len(units), (slide.removed_units, sum(units))
        # And the request that goes out fits, counted whole by the same counter.
        whole = (await counter(prepared.request)).tokens
        sent = math.ceil(w.proxy_multiplier * whole) + 8192 if proxy else whole
        assert sent <= w.budget and prepared.count.units == sent
    assert slides >= 2
