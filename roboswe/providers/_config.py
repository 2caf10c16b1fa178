"""The `[provider]` section of a run config: which participant decides, and how."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from roboswe.records.usage import Price

Kind = Literal["openai", "anthropic", "google", "openrouter", "python"]


class ProviderConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A participant: a hosted model (model pin, limits, key variable NAME) or a local agent.

    The key itself is never part of the config; `api_key_env` names the environment
    variable that holds it, read once when the adapter is built.
    """

    kind: Kind
    model: str = ""  # exact model pin, e.g. a dated snapshot
    api_key_env: str = ""  # NAME of the environment variable holding the key
    base_url: str | None = None  # provider endpoint override (proxies, tests)
    max_output_tokens: Annotated[int, msgspec.Meta(gt=0)] = 16_384  # O in B = C - O - S
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
    # [provider.price]: per million tokens, pinned with the run; absent means cost is not reported
    price: Price | None = None
    # kind = "python": the local participant class ("package.module:Class") and its options.
    agent: str = ""
    options: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def input_budget(self) -> int:
        """B = C - O - S (S = 4096): the most request tokens a decision may use."""
        return self.context_window - self.max_output_tokens - SAFETY_ALLOWANCE


SAFETY_ALLOWANCE = 4096

# Documented images-per-request limits. Anthropic (build-with-claude/vision): 100 for models
# with a 200k-token window, 600 for the others. OpenAI (guides/images-vision): 500.
# Gemini (image-understanding): 3,600. OpenRouter routes to many upstreams: the smallest
# of those, 100, unless the config says otherwise.
IMAGE_LIMITS = {"openai": 500, "google": 3600, "openrouter": 100}


def images_per_request(config: ProviderConfig) -> int | None:
    """The most image blocks one request may carry for this provider (None: no limit)."""
    if config.max_images_per_request:
        return config.max_images_per_request
    if config.kind == "anthropic":
        return 100 if config.context_window <= 200_000 else 600
    return IMAGE_LIMITS.get(config.kind)


class MissingKey(Exception):
    """The environment variable named by `api_key_env` is unset or empty."""


class MissingSDK(ImportError):
    """A provider SDK that is not installed; the message says what to install."""


def decode_provider_config(data: dict[str, Any] | bytes) -> ProviderConfig:
    """Decode a provider section (TOML bytes of the section or a dict)."""
    if isinstance(data, bytes):
        return msgspec.toml.decode(data, type=ProviderConfig)
    return msgspec.convert(data, ProviderConfig)
