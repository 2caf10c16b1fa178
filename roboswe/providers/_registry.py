"""The participant interface and the provider registry: the one place provider kinds are named.

Each kind is registered in `roboswe.providers` with a light factory, inspect_ai style:

    @provider("anthropic", key_env="ANTHROPIC_API_KEY")
    def anthropic() -> type[Participant]:
        from .anthropic import AnthropicParticipant  # the SDK is imported only here
        return AnthropicParticipant

so a missing SDK fails only when that kind is used. The config's `kind`, the preflight's
hosted kinds, the doctor's key variables and the viewer's readers all come from here.
"""

from __future__ import annotations

import abc
import importlib
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import msgspec

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


class ProviderEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A registered provider kind: how to get its participant class, and what it needs."""

    kind: str
    load: Callable[[], type[Participant]]  # imports the adapter (and its SDK) when called
    hosted: bool = True  # a model behind an API key (False: a local agent)
    key_env: str = ""  # the conventional NAME of the key variable (doctor, example configs)
    # The documented most images per request, given the config (None: no limit known).
    image_limit: Callable[[Any], int | None] | None = None
    request_bytes: int | None = None  # the documented most bytes of one request (None: none known)


_PROVIDERS: dict[str, ProviderEntry] = {}


def provider(kind: str, *, hosted: bool = True, key_env: str = "",
             image_limit: Callable[[Any], int | None] | None = None, request_bytes: int | None = None,
             ) -> Callable[[Callable[[], type[Participant]]], Callable[[], type[Participant]]]:
    """Register a light factory returning the participant class of a provider kind."""

    def register(load: Callable[[], type[Participant]]) -> Callable[[], type[Participant]]:
        _PROVIDERS[kind] = ProviderEntry(kind=kind, load=load, hosted=hosted, key_env=key_env, image_limit=image_limit,
                                         request_bytes=request_bytes)
        return load

    return register


def provider_kinds() -> tuple[str, ...]:
    """Every registered provider kind, in registration order."""
    return tuple(_PROVIDERS)


def provider_entry(kind: str) -> ProviderEntry:
    """The registry entry of a kind; raises ValueError naming the known kinds."""
    entry = _PROVIDERS.get(kind)
    if entry is None:
        raise ValueError(f"unknown provider kind {kind!r} in the run config; expected one of {', '.join(_PROVIDERS)}")
    return entry


def hosted_kinds() -> tuple[str, ...]:
    return tuple(k for k, e in _PROVIDERS.items() if e.hosted)


def participant_class(kind: str) -> type[Participant] | None:
    """The adapter class of a registered kind (imports it), or None for an unknown kind."""
    entry = _PROVIDERS.get(kind)
    return entry.load() if entry is not None else None


def create_participant(config: Any) -> Participant:
    """Build the participant for a provider config (`config.kind`); raises ValueError for an
    unknown kind and MissingSDK when the kind's SDK is not installed."""
    return provider_entry(config.kind).load()(config)


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
