"""The `[provider]` section of a run config: which participant decides, and how."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from roboswe.records.usage import Price


class ProviderConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A participant: a hosted model (model pin, limits, key variable NAME) or a local agent.

    The key itself is never part of the config; `api_key_env` names the environment
    variable that holds it, read once when the adapter is built.
    """

    kind: str  # a registered provider kind (roboswe.providers registers each one)
    model: str = ""  # exact model pin, e.g. a dated snapshot
    api_key_env: str = ""  # NAME of the environment variable holding the key
    base_url: str | None = None  # provider endpoint override (proxies, tests)
    max_output_tokens: Annotated[int, msgspec.Meta(gt=0)] = 16_384  # O in B = C - O - S
    # After a reply stopped at max_output_tokens (Anthropic max_tokens, OpenAI incomplete: max_output_tokens,
    # Gemini MAX_TOKENS, OpenRouter length) the same request is sent once more with this limit, within the
    # window left after its input and the model's output cap; both replies stay in the evidence. 0: no raise.
    max_output_tokens_raise: Annotated[int, msgspec.Meta(ge=0)] = 0
    context_window: Annotated[int, msgspec.Meta(gt=0)] = 200_000  # C in B = C - O - S
    # Passed as the provider's native reasoning setting: OpenAI `reasoning`, Anthropic
    # `thinking`, Google `thinking_config`, OpenRouter `reasoning`.
    reasoning: dict[str, Any] = msgspec.field(default_factory=dict)
    extra_body: dict[str, Any] = msgspec.field(default_factory=dict)  # merged into each request body
    attempts: Annotated[int, msgspec.Meta(ge=1, le=20)] = 5
    backoff_initial_s: Annotated[float, msgspec.Meta(ge=0)] = 2.0
    backoff_max_s: Annotated[float, msgspec.Meta(ge=0)] = 60.0
    retry_after_max_s: Annotated[float, msgspec.Meta(ge=0)] = 120.0  # cap on a server's Retry-After
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 600.0  # per attempt
    connect_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 15.0
    image_detail: Literal["auto", "low", "high"] = "auto"  # OpenAI / OpenRouter image detail
    # Images per request; 0: the provider's documented limit (see images_per_request).
    max_images_per_request: Annotated[int, msgspec.Meta(ge=0)] = 0
    # OpenRouter counting: "local" (conservative estimate) or "google" (Gemini count_tokens
    # on the mapped request, for Gemini models; needs count_model and count_api_key_env).
    count_via: Literal["local", "google"] = "local"
    count_model: str = ""
    count_api_key_env: str = ""
    count_base_url: str | None = None
    # Prompt caching where the provider offers it (Anthropic automatic caching, cache_control breakpoints
    # for Claude behind OpenRouter, OpenAI's prompt_cache_key per series); false sends none of it.
    cache: bool = True
    # [provider.price]: per million tokens, pinned with the run; absent means cost is not reported
    price: Price | None = None
    # kind = "python": the local participant class ("package.module:Class") and its options.
    agent: str = ""
    options: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        from ._registry import provider_entry

        provider_entry(self.kind)  # ValueError naming the known kinds (a ValidationError when decoded)
        if self.max_output_tokens_raise and self.max_output_tokens_raise <= self.max_output_tokens:
            raise ValueError(f"max_output_tokens_raise {self.max_output_tokens_raise} must be above max_output_tokens "
                             f"{self.max_output_tokens} (or 0: no raise)")

    @property
    def input_budget(self) -> int:
        """B = min(C - O, the model's input cap) - S (S = 4096): the most request tokens a decision may use."""
        return effective_limits(self)[1]


SAFETY_ALLOWANCE = 4096


def effective_limits(config: ProviderConfig) -> tuple[int, int]:
    """(C, B) for the config's model: the window C is the config's, capped by the model profile's;
    B = min(C - O, the profile's input cap) - S (the GPT-5 family takes at most 272k input tokens
    of its 400k window: a request between the two is refused)."""
    from ._profiles import model_profile

    profile = model_profile(config)
    window = min(config.context_window, profile.context_window or config.context_window)
    room = window - config.max_output_tokens
    if profile.max_input_tokens:
        room = min(room, profile.max_input_tokens)
    return window, room - SAFETY_ALLOWANCE

def images_per_request(config: ProviderConfig) -> int | None:
    """The most image blocks one request may carry (the config's, else the provider's documented
    limit from the registry; None: no limit)."""
    from ._registry import provider_entry

    if config.max_images_per_request:
        return config.max_images_per_request
    limit = provider_entry(config.kind).image_limit
    return limit(config) if limit is not None else None


def request_bytes(config: ProviderConfig) -> int | None:
    """The documented most bytes of one request for this provider (None: none known)."""
    from ._registry import provider_entry

    return provider_entry(config.kind).request_bytes


class MissingKey(Exception):
    """The environment variable named by `api_key_env` is unset or empty."""


class MissingSDK(ImportError):
    """A provider SDK that is not installed; the message says what to install."""


def decode_provider_config(data: dict[str, Any] | bytes) -> ProviderConfig:
    """Decode a provider section (TOML bytes of the section or a dict)."""
    if isinstance(data, bytes):
        return msgspec.toml.decode(data, type=ProviderConfig)
    return msgspec.convert(data, ProviderConfig)
