"""The participant interface and the provider registry: one place names every provider kind.

A provider adapter registers with ``@participant_kind("anthropic")``; ``create_participant``
imports the adapter's module only when its kind is used, so a missing SDK fails only then.
"""

from __future__ import annotations

import abc
import importlib
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

from roboswe.protocol.participant import Decision, DecisionRequest, TokenCount


class Participant(abc.ABC):
    """Anything that turns a DecisionRequest into a Decision (a hosted model or a local agent)."""

    kind: ClassVar[str] = ""

    @abc.abstractmethod
    async def decide(self, request: DecisionRequest) -> Decision:
        """Return one decision; raises ProviderFailure when the provider cannot answer."""

    async def count_tokens(self, request: DecisionRequest) -> TokenCount:
        """Input units of a request for the context policy; raises ProviderFailure.

        Every registered participant implements it (hosted adapters count natively or
        estimate; the `python` kind estimates)."""
        raise NotImplementedError(f"{type(self).__name__} does not count tokens")

    async def aclose(self) -> None:
        """Release connections; always safe to call."""


_REGISTRY: dict[str, Callable[[Any], Participant]] = {}
_KIND_MODULES = {
    "openai": "roboswe.providers.openai",
    "anthropic": "roboswe.providers.anthropic",
    "google": "roboswe.providers.google",
    "openrouter": "roboswe.providers.openrouter",
    "python": "roboswe.providers.local",
}


def participant_kind(kind: str) -> Callable[[Callable[[Any], Participant]], Callable[[Any], Participant]]:
    """Class decorator / factory decorator registering a participant for a provider kind."""

    def register(factory: Callable[[Any], Participant]) -> Callable[[Any], Participant]:
        _REGISTRY[kind] = factory
        if isinstance(factory, type):
            factory.kind = kind  # type: ignore[attr-defined]
        return factory

    return register


def create_participant(config: Any) -> Participant:
    """Build the participant for a provider config (`config.kind`); raises ValueError for an
    unknown kind."""
    kind = config.kind
    if kind not in _REGISTRY and kind in _KIND_MODULES:
        importlib.import_module(_KIND_MODULES[kind])
    factory = _REGISTRY.get(kind)
    if factory is None:
        raise ValueError(
            f"unknown provider kind {kind!r} in the run config; expected one of {', '.join(sorted(_KIND_MODULES))}"
        )
    return factory(config)


def load_object(spec: str) -> Any:
    """Import "module:attribute"; raises ValueError naming the spec when it cannot be found."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"agent {spec!r} must look like 'package.module:ClassName'")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"cannot import agent module {module!r} ({e}); check the run config's agent setting") from e
    for name in attr.split("."):
        obj = getattr(obj, name, None)
        if obj is None:
            raise ValueError(f"module {module!r} has no attribute {attr!r}; check the run config's agent setting")
    return obj


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
