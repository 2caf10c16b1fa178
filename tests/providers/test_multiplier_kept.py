"""The count multipliers are never lowered within a series: a fresh-context trial or a rebuild resets
the window (ResetContext) but keeps them; another series starts from the defaults."""

from __future__ import annotations

from roboswe.actors.context_manager import ContextService
from roboswe.protocol import Decoded
from roboswe.protocol.context import ResetContext

from roboswe.context.policy import PROXY_START
from roboswe.providers import ProviderConfig


async def _reset(service: ContextService, series: str) -> None:
    await service.handle(Decoded(envelope=None, message=ResetContext(series=series), blobs=[]))


async def test_a_reset_of_the_same_series_keeps_raised_multipliers_and_another_series_does_not():
    service = ContextService(ProviderConfig(kind="python", agent="x:Y"), counter=None)
    await _reset(service, "run/lift")
    service.window.proxy_multiplier, service.window.estimate_multiplier = 1.9, 1.4  # raised by responses
    await _reset(service, "run/lift")  # the fresh-context control's next trial
    assert (service.window.proxy_multiplier, service.window.estimate_multiplier) == (1.9, 1.4)
    await _reset(service, "run/door")
    assert (service.window.proxy_multiplier, service.window.estimate_multiplier) == (PROXY_START, 1.0)
