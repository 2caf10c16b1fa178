"""The provider client actor: the only process that holds a provider API key.

It builds the participant named by the run config's [provider] section (a hosted-model
adapter or the local `python` kind) and answers Decide and CountTokens. A provider that
fails after its last attempt is answered with ProviderFailed carrying every attempt, so
the coordinator records the evidence and marks the trial incomplete (reason "provider").
"""

from __future__ import annotations

from typing import Any

import structlog
import trio

from roboswe.actors import Actor, actor_main
from roboswe.protocol import Decoded
from roboswe.protocol.control import Error
from roboswe.protocol.participant import ProviderFailure, join_images
from roboswe.protocol.provider import PROVIDER_CODEC, CountTokens, Counted, Decide, Decided, ProviderFailed
from roboswe.providers import Participant

log = structlog.get_logger()


def provider_handler(participant: Participant, concurrency: int | None = None) -> Any:
    """The message handler for a participant (usable without an actor process in tests).

    Requests are served concurrently (several fleet workers decide at once); ``concurrency``
    caps how many reach the provider at a time, since its rate limits are per key.
    """
    limiter = trio.Semaphore(concurrency) if concurrency else None

    async def handle(decoded: Decoded[Any]) -> Any:
        if limiter is None:
            return await answer(decoded)
        async with limiter:
            return await answer(decoded)

    async def answer(decoded: Decoded[Any]) -> Any:
        match decoded.message:
            case Decide(request=request, image_digests=digests):
                try:
                    decision = await participant.decide(join_images(request, digests, decoded.blobs))
                except ProviderFailure as e:
                    return ProviderFailed(detail=e.detail, reason=e.reason, attempts=e.attempts)
                return Decided(decision=decision)
            case CountTokens(request=request, image_digests=digests):
                try:
                    count = await participant.count_tokens(join_images(request, digests, decoded.blobs))
                except ProviderFailure as e:
                    return ProviderFailed(detail=e.detail, reason=e.reason, attempts=e.attempts)
                return Counted(count=count)
            case other:
                return Error(code="unsupported", detail=f"provider_client does not handle {type(other).__name__}")

    return handle


def _refusing(detail: str) -> Any:
    async def handle(decoded: Decoded[Any]) -> Error:
        return Error(code="config", detail=detail)

    return handle


async def main(actor: Actor) -> None:
    from roboswe.providers import create_participant

    config = actor.config.provider
    if config is None:
        handler = _refusing("the run config has no [provider] section; add one (see configs/runs/)")
        await actor.serve(PROVIDER_CODEC, handler)
        return
    try:
        participant = create_participant(config)
    except Exception as e:  # noqa: BLE001 - a bad provider setup is answered, not fatal to the run's actors
        log.error("provider_unavailable", kind=config.kind, detail=str(e))
        await actor.serve(PROVIDER_CODEC, _refusing(f"provider {config.kind} unavailable: {e}"))
        return
    log.info("provider_ready", kind=config.kind, model=config.model or config.agent)
    try:
        await actor.serve(PROVIDER_CODEC, provider_handler(participant, actor.config.fleet.provider_concurrency))
    finally:
        await participant.aclose()


if __name__ == "__main__":
    actor_main("provider_client", main)
