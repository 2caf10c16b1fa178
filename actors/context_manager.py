"""The context manager actor: holds each series' archive and decides what fits next.

Domain logic is `roboswe.context.policy.ContextWindow`; counts come from the provider client
(CountTokens), since only that actor holds the provider key.
"""

from __future__ import annotations

from typing import Any

import msgspec
import structlog
import trio
from roboswe.actors import Actor, Client, PeerDead, actor_main
from roboswe.protocol import Decoded
from roboswe.protocol.context import (
    CONTEXT_CODEC,
    AppendTurns,
    ContextState,
    Prepared,
    PrepareRequest,
    RecordUsage,
    ResetContext,
    SearchHistoryRequest,
    SearchHistoryResult,
)
from roboswe.protocol.control import Error, Ok
from roboswe.protocol.participant import (
    DecisionRequest,
    ProviderFailure,
    TokenCount,
    split_images,
)
from roboswe.protocol.provider import (
    PROVIDER_CODEC,
    Counted,
    CountTokens,
    ProviderFailed,
)

from roboswe.context.policy import (
    ContextOverflow,
    ContextWindow,
    SearchUnavailable,
    format_hits,
    window_for,
)
from roboswe.providers import ProviderConfig

log = structlog.get_logger()
PROVIDER_RETURN_S = 30.0  # within the coordinator's deadline for a context request (CONTEXT_DEADLINE, 120 s)
_json = msgspec.json.Encoder()


class ContextService:
    """Message handling around one ContextWindow at a time (one series at a time)."""

    def __init__(self, config: ProviderConfig, counter: Any):
        self.config = config
        self.counter = counter
        self.window = self._new_window("")

    def _new_window(self, series: str) -> ContextWindow:
        return window_for(self.config, self.counter, series)

    def _state(self) -> ContextState:
        w = self.window
        return ContextState(archived=len(w.archive), active=len(w.active), slides=len(w.slides))

    async def handle(self, decoded: Decoded[Any]) -> Any:
        match decoded.message:
            case ResetContext(series=series):
                previous, self.window = self.window, self._new_window(series)
                if previous.series == series:
                    # The same series starting afresh (a fresh-context trial, a rebuild): its count
                    # multipliers are never lowered within a series (DESIGN.md section 5).
                    self.window.proxy_multiplier = previous.proxy_multiplier
                    self.window.estimate_multiplier = previous.estimate_multiplier
                return self._state()
            case AppendTurns(turns=turns, image_digests=digests):
                if len(digests) != len(decoded.blobs):
                    return Error(code="invalid", detail=f"{len(digests)} image digest(s) but {len(decoded.blobs)} blob(s)")
                images = {d: bytes(b) for d, b in zip(digests, decoded.blobs)}
                try:
                    for turn in turns:
                        self.window.append(turn, images)
                except ValueError as e:
                    return Error(code="invalid", detail=str(e))
                return self._state()
            case PrepareRequest(system=system, trial=trial, interface=interface):
                try:
                    prepared = await self.window.prepare(system, trial, interface)
                except ContextOverflow as e:
                    return Error(code="context_overflow", detail=e.detail,
                                 data={"evidence": _json.encode(e.evidence).decode()})
                except ProviderFailure as e:
                    return Error(code="provider", detail=e.detail, data={"attempts": len(e.attempts)})
                request, digests, blobs = split_images(prepared.request)
                reply = Prepared(request=request, image_digests=digests, count=prepared.count, slide=prepared.slide)
                return reply, blobs
            case RecordUsage(usage=usage):
                self.window.record_usage(usage)
                return Ok()
            case SearchHistoryRequest(query=query):
                try:
                    hits = self.window.search(query)
                except (SearchUnavailable, ValueError) as e:
                    return Error(code="search_unavailable", detail=str(e))
                return SearchHistoryResult(hits=hits, text=format_hits(query, hits))
            case other:
                return Error(code="unsupported", detail=f"context_manager does not handle {type(other).__name__}")


def provider_counter(provider: Client) -> Any:
    """Counts through the provider client over the context manager's one link to it. A count that finds
    the provider client dead (not started yet, or being restarted by the supervisor) asks again once it
    answers, for up to PROVIDER_RETURN_S, then fails with PeerDead; counting has no side effect."""

    async def count(request: DecisionRequest) -> TokenCount:
        stripped, digests, blobs = split_images(request)
        give_up = trio.current_time() + PROVIDER_RETURN_S
        while True:
            try:
                reply = await provider.request(CountTokens(request=stripped, image_digests=digests), blobs)
                break
            except PeerDead:
                if trio.current_time() >= give_up:
                    raise
                with trio.move_on_after(give_up - trio.current_time()):
                    await provider.wait_peer_alive()
        match reply.message:
            case Counted(count=c):
                return c
            case ProviderFailed(detail=detail, attempts=attempts):
                raise ProviderFailure(detail, attempts)
        raise ProviderFailure(f"provider_client answered CountTokens with {type(reply.message).__name__}", [])

    return count


async def main(actor: Actor) -> None:
    config = actor.config.provider or ProviderConfig(kind="python")
    # One link for the actor's life (a link per count paid a connect and a Hello/Ready before every
    # decision), entered without a handshake: the provider client may start after this actor, and a
    # request waits in the socket's queue until it is up; a restarted one is reached again the same way.
    async with actor.client("provider_client", PROVIDER_CODEC, handshake=False) as provider:
        service = ContextService(config, provider_counter(provider))
        await actor.serve(CONTEXT_CODEC, service.handle, concurrent=False)


if __name__ == "__main__":
    actor_main("context_manager", main)
