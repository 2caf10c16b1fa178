"""The context policy (DESIGN.md section 5): what fits in the next request, and the archive.

Input budget B = min(C - O, the model's input cap) - S with S = 4096. The accounting covers the
instructions, tool schemas, images and conversation of the actual request. When the next request would
exceed B, the oldest complete exchanges leave the active request (an assistant turn and
the user turn answering its tool calls leave together; pinned turns stay) until at least
200,000 units are removed, or more if needed to fit. If the exchanges that may not be
removed still exceed B, that is a ContextOverflow carrying the evidence -- never a
silent truncation. The trial then ends ``incomplete`` (``context_overflow``) and its series
stops: the remaining slots stay missing, and the evidence is in the records (the trial's
``context_overflow`` event and the series' ``series_stopped`` event; roboswe/evaluation/series.py).
The archive keeps every turn; the participant may search what left the request
(`search_history`, offered from the first request so the tool list never changes; before the first
slide it answers that nothing has left yet).

Units: a provider's exact count of the whole request where it has a count endpoint (Anthropic,
OpenAI); for OpenRouter the proxy ceil(m*N) + 8192, m starting at 1.30 and raised after each
response to max(m, 1.1*U/N), never lowered within the series; for every other total -- local
estimates (the `python` kind, a count endpoint that failed), Google's contents-only count, and
the sum of per-turn counts, which adds up counts made with different neighbours and framing --
ceil(e*N) with e starting at 1.0 and raised the same way, so a total that turned out low is
corrected upward for the rest of the series. Only a whole request counted by the endpoint is
recorded as exact (``exact_tokens``); every other total is recorded as estimated units.

For a model that binds thinking to its prefix (its profile's prefix_check) every request is counted
whole by the provider: a turn's thinking is sent or left out depending on what came before it, so
per-turn counts could not add up exactly. Otherwise counting is cached per turn: each new turn is counted once (all new turns of a request in
one call, with the same instructions and tools, minus the cached count of instructions
and tools alone), and a request's size is the cached sum, so a long series does not
re-count its history on every request. Near the budget (above 95% of B) and after every
slide the actual request is counted whole, so slide decisions rest on the real request;
the method recorded says which (":per_message_sum" or ":whole_request").

The request is assembled so the provider accepts it whatever the trial loop did
(`history`): a tool call left without a result (an infrastructure failure mid-operation)
is answered with an error result before the next request, and the oldest images are
replaced by placeholders before the provider's per-request image limit is reached.
Slides remove whole exchanges, so a tool call leaves with its result and an assistant
turn with its thinking or reasoning items, which stay at its start as the provider sent
them.

With a 200k-token window (B about 180k) the 200,000-unit minimum exceeds B, so a slide
removes every removable exchange: the request keeps the pinned turns and the newest
exchange. With a 1M window a slide removes about a fifth of the window.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog

from roboswe.protocol.context import (
    CountRecord,
    OverflowEvidence,
    SearchHit,
    SlideRecord,
)
from roboswe.protocol.participant import (
    Attempt,
    DecisionRequest,
    TextPart,
    TokenCount,
    Turn,
    Usage,
    offered_tools,
)
from roboswe.providers._estimate import turn_tokens

from .history import ImageLimit, answer_turn, image_count, unanswered_calls

log = structlog.get_logger()

SAFETY_ALLOWANCE = 4096  # S
SLIDE_MIN_UNITS = 200_000  # a slide removes at least this many units (or everything removable)
PROXY_START = 1.30
PROXY_CONSTANT = 8192
USAGE_MARGIN = 1.1
NEAR_BUDGET = 0.95  # above this share of B the actual request is counted whole
PER_MESSAGE = ":per_message_sum"  # method suffix: base + cached per-turn counts
WHOLE = ":whole_request"  # method suffix: the actual request counted in one call

SEARCH_MAX_HITS = 20
SEARCH_RADIUS = 160  # characters either side of a match
SEARCH_MAX_CHARS = 8000

Counter = Callable[[DecisionRequest], Awaitable[TokenCount]]


class ContextOverflow(Exception):
    """The exchanges that may not be removed are larger than the input budget; the trial ends
    incomplete, the series stops (roboswe/evaluation/series.py, ``stops_series``) and `evidence`,
    stored with the ``series_stopped`` event, says what did not fit."""

    reason = "context_overflow"

    def __init__(self, detail: str, evidence: OverflowEvidence):
        super().__init__(detail)
        self.detail = detail
        self.evidence = evidence


class SearchUnavailable(Exception):
    """search_history before the first slide: there is no archived turn outside the request."""


class Prepared(msgspec.Struct, frozen=True, kw_only=True):
    request: DecisionRequest
    count: CountRecord
    slide: SlideRecord | None = None


def input_budget(context_window: int, max_output_tokens: int, max_input_tokens: int | None = None) -> int:
    """B = min(C - O, the model's input cap) - S; raises ValueError when nothing would be left for input."""
    room = context_window - max_output_tokens
    budget = min(room, max_input_tokens or room) - SAFETY_ALLOWANCE
    if budget <= 0:
        raise ValueError(
            f"context_window {context_window} leaves no input budget after max_output_tokens {max_output_tokens} "
            f"and the {SAFETY_ALLOWANCE}-token safety allowance; raise context_window or lower max_output_tokens"
        )
    return budget


def window_for(config: Any, counter: Counter, series: str = "") -> ContextWindow:
    """The ContextWindow a run's [provider] section gets: the window and input cap of its model profile
    (configs/models.toml), the provider's image and request-size limits, and whole-request counting
    plus thinking removal after rewrites for models that bind thinking to its prefix."""
    from roboswe.providers import effective_limits, images_per_request, model_profile, request_bytes

    profile = model_profile(config)
    window, _ = effective_limits(config)
    return ContextWindow(context_window=window, max_output_tokens=config.max_output_tokens, counter=counter,
                         series=series, max_images=images_per_request(config), max_request_bytes=request_bytes(config),
                         max_input_tokens=profile.max_input_tokens, bound_thinking=profile.prefix_check)


class ContextWindow:
    """One series' archive and active request under the context policy."""

    def __init__(
        self,
        *,
        context_window: int,
        max_output_tokens: int,
        counter: Counter,
        series: str = "",
        clock: Callable[[], float] = time.time,
        slide_min_units: int = SLIDE_MIN_UNITS,
        max_images: int | None = None,
        max_request_bytes: int | None = None,
        max_input_tokens: int | None = None,
        bound_thinking: bool = False,
    ):
        self.budget = input_budget(context_window, max_output_tokens, max_input_tokens)
        # The model checks each thinking block's prefix (its profile): per-turn counts of its turns cannot
        # be exact, so every request is counted whole, and after a rewrite the retained turns lose their thinking.
        self.bound_thinking = bound_thinking
        self._rewrite = ""  # how the history was rewritten since the last prepared request ("" none)
        self._thinking_removed: list[str] = []
        self.counter = counter
        self.series = series
        self.clock = clock
        self.slide_min_units = slide_min_units
        self.archive: list[Turn] = []
        self.active: list[Turn] = []
        self.images: dict[str, bytes] = {}
        self.slides: list[SlideRecord] = []
        self.counts: list[CountRecord] = []
        self.proxy_multiplier = PROXY_START  # m, OpenRouter proxy; never lowered in a series
        self.estimate_multiplier = 1.0  # e, local estimates; never lowered in a series
        self._ids: set[str] = set()
        self._turn_tokens: dict[str, int] = {}  # per-turn count, made once per turn (cache)
        self._bases: dict[tuple[Any, ...], TokenCount] = {}  # instructions + tools, per tool set
        self._last: tuple[tuple[Any, ...], TokenCount] | None = None  # (request key, count)
        self._last_prepared: TokenCount | None = None
        # The provider's per-request image count and request byte limits (None: none).
        self.image_limit = ImageLimit(max_images, max_request_bytes)
        self._image_sizes: dict[str, int] = {}
        self._count_attempts: list[Attempt] = []  # count-endpoint exchanges since the last prepared request

    # ---- archive

    def append(self, turn: Turn, images: dict[str, bytes] | None = None) -> None:
        """Add a turn to the archive and the active request (after answering any tool call the
        previous turn left unanswered); raises ValueError on a repeated id."""
        if turn.id in self._ids:
            raise ValueError(f"turn id {turn.id!r} is already in the archive; every turn needs a new id")
        self._answer_unanswered(turn)
        self._add(turn)
        if images:
            self.images.update(images)
            self._image_sizes.update({d: len(b) for d, b in images.items()})

    def _add(self, turn: Turn) -> None:
        self._ids.add(turn.id)
        self.archive.append(turn)
        self.active.append(turn)

    def _answer_unanswered(self, following: Turn | None) -> None:
        previous = self.archive[-1] if self.archive else None
        missing = unanswered_calls(previous, following)
        if previous is not None and missing and f"{previous.id}/unanswered" not in self._ids:
            self._add(answer_turn(previous, missing))

    @property
    def search_offered(self) -> bool:
        return bool(self.slides)

    # ---- accounting

    def units(self, count: TokenCount) -> int:
        """Budget units of a count under the policy for its method."""
        if count.exact:
            return count.tokens
        if count.proxy:
            return math.ceil(self.proxy_multiplier * count.tokens) + PROXY_CONSTANT
        return math.ceil(self.estimate_multiplier * count.tokens)

    def _scale(self, count: TokenCount | None) -> float:
        if count is None or count.exact:
            return 1.0
        return self.proxy_multiplier if count.proxy else self.estimate_multiplier

    def record_usage(self, usage: Usage) -> None:
        """Raise the multiplier after a response: m = max(m, 1.1*U/N); never lowered."""
        count = self._last_prepared
        if count is None or count.exact or count.tokens <= 0 or usage.input_tokens <= 0:
            return
        observed = USAGE_MARGIN * usage.input_tokens / count.tokens
        if count.proxy:
            if observed > self.proxy_multiplier:
                log.info("proxy_multiplier_raised", series=self.series, old=self.proxy_multiplier, new=observed)
                self.proxy_multiplier = observed
        elif observed > self.estimate_multiplier:
            log.info("estimate_multiplier_raised", series=self.series, old=self.estimate_multiplier, new=observed)
            self.estimate_multiplier = observed

    async def _count(self, request: DecisionRequest, *, actual: bool = False) -> TokenCount:
        """Units of a request. Each turn is counted once, when it is new (one call for all new
        turns, with the same instructions and tools), and the request total is the cached
        sum. The actual request is counted whole when the sum comes near the budget, after
        a slide, or when `actual` is set, so a slide decision rests on the real request."""
        key = _request_key(request)
        if self._last is not None and self._last[0] == key and (self._last[1].method.endswith(WHOLE) or not actual):
            return self._last[1]
        if self.bound_thinking:  # per-turn counts cannot be exact: the thinking a turn carries depends on its prefix
            whole = await self._counted(request)
            count = msgspec.structs.replace(whole, method=whole.method + WHOLE)
            self._last = (key, count)
            return count
        base = self._bases.get(key[:2])
        if base is None:  # instructions + tool schemas (+ request framing)
            base = await self._counted(msgspec.structs.replace(request, conversation=[], images={}))
            self._bases[key[:2]] = base
        new = _with_partners(request.conversation, {t.id for t in request.conversation if t.id not in self._turn_tokens})
        if new:
            part = await self._counted(_subrequest(request, new))
            share = max(part.tokens - base.tokens, len(new))
            estimates = {t.id: max(1, turn_tokens(t)) for t in new}
            total = sum(estimates.values())
            for t in new:
                self._turn_tokens[t.id] = max(1, math.ceil(share * estimates[t.id] / total))
        summed = base.tokens + sum(self._turn_tokens[t.id] for t in request.conversation)
        # Inexact even when each part was counted exactly: the parts were counted with other neighbours.
        count = TokenCount(tokens=summed, method=base.method + PER_MESSAGE, exact=False, proxy=base.proxy)
        if actual or self.units(count) > NEAR_BUDGET * self.budget:
            whole = await self._counted(request)
            count = msgspec.structs.replace(whole, method=whole.method + WHOLE)
        self._last = (key, count)
        return count

    async def _counted(self, request: DecisionRequest) -> TokenCount:
        """One count call; its exchanges go with the next CountRecord as evidence."""
        count = await self.counter(request)
        self._count_attempts += count.attempts
        return count

    def _exchange_units(self, exchange: list[Turn], count: TokenCount) -> int:
        base = sum(self._turn_tokens.get(t.id, turn_tokens(t)) for t in exchange)
        return math.ceil(base * self._scale(count))

    # ---- the request

    def _request(self, system: str, trial: int, interface: str = "code") -> DecisionRequest:
        conversation: list[Turn] = []
        notice_due = bool(self.slides)
        for turn in self.active:
            if notice_due and not turn.pinned:
                conversation.append(self._notice())
                notice_due = False
            conversation.append(turn)
        if notice_due:
            conversation.append(self._notice())
        conversation, stripped = self.image_limit.apply(conversation, self._image_sizes)
        for turn_id in stripped:  # counted again as sent, without their images
            self._turn_tokens.pop(turn_id, None)
        if stripped:
            self._rewrote(f"images of {len(stripped)} older turn(s) replaced by placeholders")
            if self._thinking_removed:  # the assistant turns as they now stand in the active request
                current = {t.id: t for t in self.active}
                conversation = [current.get(t.id, t) if t.role == "assistant" else t for t in conversation]
        # search_history is offered from the first request, so the tool list (part of every thinking block's
        # prefix and of the cached prefix) never changes within a series; before a slide it answers that
        # nothing has left the conversation yet (SearchUnavailable).
        request = DecisionRequest(system=system, tools=offered_tools(search_history=True, interface=interface),
                                  conversation=conversation, trial=trial, series=self.series)
        wanted = request.referenced_images()
        return msgspec.structs.replace(request, images={d: self.images[d] for d in wanted if d in self.images})

    def _rewrote(self, how: str) -> None:
        """The history before the newest turns changed (`how`): for a model that binds thinking to its
        prefix, every retained turn's thinking is removed from the active request for good (the archive
        keeps it), so the request is append-only again from here; what was removed and why goes with
        the next count record (the trial's ``request_count`` event)."""
        self._rewrite = f"{self._rewrite}; {how}" if self._rewrite else how
        if not self.bound_thinking:
            return
        from roboswe.providers._common import without_thinking

        for i, turn in enumerate(self.active):
            bare = without_thinking(turn)
            if bare is not None:
                self.active[i] = bare
                self._turn_tokens.pop(turn.id, None)
                self._thinking_removed.append(turn.id)
        if self._thinking_removed:
            log.info("thinking_removed", series=self.series, turns=len(self._thinking_removed), why=self._rewrite)

    def _notice(self) -> Turn:
        removed = len(self.archive) - len(self.active)
        text = (
            f"[Context window: {removed} earlier turns were removed from this request to fit the model's context; "
            f"they remain in the archive. Use search_history(query) to find text in them.]"
        )
        return Turn(id=f"slide-notice-{len(self.slides)}", role="user", parts=[TextPart(text=text)])

    def exchanges(self) -> list[list[Turn]]:
        """The active turns grouped into indivisible exchanges, oldest first: an assistant turn
        with tool calls and the user turn holding their results form one exchange."""
        groups: list[list[Turn]] = []
        i = 0
        turns = self.active
        while i < len(turns):
            group = [turns[i]]
            calls = {c.call_id for c in turns[i].tool_calls()} if turns[i].role == "assistant" else set()
            if calls and i + 1 < len(turns) and turns[i + 1].role == "user":
                if calls & {r.call_id for r in turns[i + 1].tool_results()}:
                    group.append(turns[i + 1])
                    i += 1
            groups.append(group)
            i += 1
        return groups

    async def prepare(self, system: str, trial: int, interface: str = "code") -> Prepared:
        """The next request, sliding the window first if it would exceed B; raises
        ContextOverflow (archive intact) when the indivisible part cannot fit, and
        ProviderFailure when a count call fails."""
        self._answer_unanswered(None)  # a request never ends on an unanswered tool call
        self._count_attempts = []
        request = self._request(system, trial, interface)
        count = await self._count(request)
        before = self.units(count)
        if before <= self.budget:
            return self._prepared(request, count, trial, None)

        saved_active = list(self.active)
        groups = self.exchanges()
        # The newest exchange is the state the participant must answer; pinned turns stay.
        removable = [g for g in groups[:-1] if not any(t.pinned for t in g)]
        removed: list[Turn] = []
        removed_units = 0
        estimated = before
        queue = list(removable)
        while queue and (removed_units < self.slide_min_units or estimated > self.budget):
            group = queue.pop(0)
            units = self._exchange_units(group, count)
            removed += group
            removed_units += units
            estimated -= units
        while True:
            gone = {t.id for t in removed}
            self.active = [t for t in saved_active if t.id not in gone]
            pending_slide = SlideRecord(
                series=self.series, trial=trial, at=self.clock(), removed_turn_ids=[t.id for t in removed],
                before_units=before, after_units=0, removed_units=removed_units, budget=self.budget,
                method=count.method, multiplier=self._scale(count), number=len(self.slides) + 1,
            )
            self.slides.append(pending_slide)
            self._rewrite, self._thinking_removed = "", []  # this attempt's removal (an earlier one was undone)
            self._rewrote(f"slide {pending_slide.number}: {len(removed)} older turn(s) left the request")
            request = self._request(system, trial, interface)
            try:
                after_count = await self._count(request, actual=True)
            except BaseException:
                self.slides.pop()
                self.active = saved_active
                raise
            after = self.units(after_count)
            if after <= self.budget:
                break
            self.slides.pop()
            if not queue:
                self.active = saved_active
                kept = self.exchanges()
                evidence = OverflowEvidence(
                    series=self.series, trial=trial, budget=self.budget, units=after, method=after_count.method,
                    kept_exchanges=[[t.id for t in g] for g in kept if not set(t.id for t in g) & gone],
                    kept_units=[self._exchange_units(g, after_count) for g in kept if not set(t.id for t in g) & gone],
                )
                log.error("context_overflow", series=self.series, trial=trial, budget=self.budget, units=after)
                raise ContextOverflow(
                    f"the request needs {after} units ({after_count.method}) after removing every removable exchange, "
                    f"but the input budget is {self.budget}; an indivisible exchange or the pinned turns are too large",
                    evidence,
                )
            group = queue.pop(0)
            removed += group
            removed_units += self._exchange_units(group, count)
        slide = msgspec.structs.replace(self.slides[-1], after_units=after, removed_units=removed_units, at=self.clock())
        self.slides[-1] = slide
        log.info("context_slide", series=self.series, trial=trial, removed=len(slide.removed_turn_ids),
                 before=before, after=after, removed_units=removed_units, method=count.method)
        return self._prepared(request, after_count, trial, slide)

    def _prepared(self, request: DecisionRequest, count: TokenCount, trial: int, slide: SlideRecord | None) -> Prepared:
        units = self.units(count)
        record = CountRecord(
            trial=trial, at=self.clock(), method=count.method, units=units,
            exact_tokens=count.tokens if count.exact else None,
            estimated_units=None if count.exact else units,
            base_tokens=count.tokens, multiplier=self._scale(count), budget=self.budget,
            turns=len(request.conversation), images=sum(image_count(t) for t in request.conversation),
            images_dropped=self.image_limit.dropped_images, attempts=self._count_attempts,
            rewrite=self._rewrite, thinking_removed=self._thinking_removed,
        )
        self._count_attempts, self._rewrite, self._thinking_removed = [], "", []
        self.counts.append(record)
        self._last_prepared = count
        return Prepared(request=request, count=record, slide=slide)

    # ---- search

    def search(self, query: str, *, max_hits: int = SEARCH_MAX_HITS) -> list[SearchHit]:
        """Case-insensitive literal search over archived turns, oldest first, bounded;
        raises SearchUnavailable before the first slide and ValueError for an empty query."""
        if not self.slides:
            raise SearchUnavailable("search_history finds turns only after the first context slide removed them from "
                                    "this conversation; there has been no slide yet, so every earlier turn is still in it")
        if not query.strip():
            raise ValueError("search_history needs a non-empty query")
        needle = query.lower()
        active = {t.id for t in self.active}
        hits: list[SearchHit] = []
        for turn in self.archive:
            text = turn.text()
            at = text.lower().find(needle)
            if at < 0:
                continue
            start, end = max(0, at - SEARCH_RADIUS), min(len(text), at + len(query) + SEARCH_RADIUS)
            excerpt = ("..." if start else "") + text[start:end] + ("..." if end < len(text) else "")
            hits.append(SearchHit(turn_id=turn.id, trial=turn.trial, role=turn.role, excerpt=excerpt, active=turn.id in active))
            if len(hits) >= max_hits:
                break
        return hits


def format_hits(query: str, hits: list[SearchHit], *, max_chars: int = SEARCH_MAX_CHARS) -> str:
    """The search_history tool result text: one excerpt per hit with its turn id, bounded."""
    if not hits:
        return f"No archived turn contains {query!r}."
    lines = [f"{len(hits)} archived turn(s) contain {query!r}:"]
    used = len(lines[0])
    for h in hits:
        entry = f"--- turn {h.turn_id} (trial {h.trial}, {h.role}{', still in context' if h.active else ''}):\n{h.excerpt}"
        if used + len(entry) > max_chars:
            lines.append(f"[{len(hits) - len(lines) + 1} more hit(s) not shown; search for a longer phrase]")
            break
        lines.append(entry)
        used += len(entry)
    return "\n".join(lines)


def _with_partners(turns: list[Turn], ids: set[str]) -> list[Turn]:
    """The turns named by `ids`, each with the other half of its exchange (a tool result with
    its call and a call with its result), in order: a count request is a request too, and a
    provider refuses a tool result whose call is not in front of it."""
    wanted = set(ids)
    for i, t in enumerate(turns):
        if t.id not in ids:
            continue
        if t.tool_results() and i > 0:
            wanted.add(turns[i - 1].id)
        if t.tool_calls() and i + 1 < len(turns) and turns[i + 1].tool_results():
            wanted.add(turns[i + 1].id)
    return [t for t in turns if t.id in wanted]


def _subrequest(request: DecisionRequest, turns: list[Turn]) -> DecisionRequest:
    """The same instructions and tools with only `turns` (and their images)."""
    sub = msgspec.structs.replace(request, conversation=turns, images={})
    wanted = sub.referenced_images()
    return msgspec.structs.replace(sub, images={d: request.images[d] for d in wanted if d in request.images})


def _request_key(request: DecisionRequest) -> tuple[Any, ...]:
    system = hashlib.sha256(request.system.encode()).hexdigest()
    tools = tuple(t.name for t in request.tools)
    # The image count tells a request apart from the same turns before older images were left out.
    return (system, tools, tuple(t.id for t in request.conversation), sum(image_count(t) for t in request.conversation))
