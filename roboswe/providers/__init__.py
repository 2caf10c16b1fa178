"""Participants: hosted-model adapters (openai, anthropic, google, openrouter) and the local
`python` kind, all behind `Participant`.

The provider kinds are registered here, once, with light factories (`@provider`); each
imports its adapter, and with it the provider's SDK, only when that kind is used. Build a
participant with `create_participant(ProviderConfig(...))`.
"""

from ._config import SAFETY_ALLOWANCE as SAFETY_ALLOWANCE
from ._config import MissingKey as MissingKey
from ._config import MissingSDK as MissingSDK
from ._config import ProviderConfig as ProviderConfig
from ._config import decode_provider_config as decode_provider_config
from ._config import effective_limits as effective_limits
from ._config import images_per_request as images_per_request
from ._config import request_bytes as request_bytes
from ._estimate import estimate_request as estimate_request
from ._profiles import ModelProfile as ModelProfile
from ._profiles import model_profile as model_profile
from ._profiles import profile_lines as profile_lines
from ._registry import Participant as Participant
from ._registry import ProviderEntry as ProviderEntry
from ._registry import create_participant as create_participant
from ._registry import hosted_kinds as hosted_kinds
from ._registry import participant_class as participant_class
from ._registry import provider as provider
from ._registry import provider_entry as provider_entry
from ._registry import provider_kinds as provider_kinds

# Images per request, as documented. Anthropic (build-with-claude/vision): 100 for models with a
# 200k-token window, 600 for the others. OpenAI (guides/images-vision): 500. Gemini
# (image-understanding): 3,600. OpenRouter routes to many upstreams: the smallest of theirs, 100.
# Request bytes: Anthropic 32 MB (api/overview, request size limits), OpenAI 50 MB of images
# per request (images-vision), Gemini 20 MB with inline data (image-understanding);
# OpenRouter the smallest of those upstreams.
MB = 1_000_000


@provider("openai", key_env="OPENAI_API_KEY", image_limit=lambda c: 500, request_bytes=50 * MB)
def openai() -> type[Participant]:
    from .openai import OpenAIParticipant

    return OpenAIParticipant


@provider("anthropic", key_env="ANTHROPIC_API_KEY", image_limit=lambda c: 100 if c.context_window <= 200_000 else 600,
          request_bytes=32 * MB)
def anthropic() -> type[Participant]:
    from .anthropic import AnthropicParticipant

    return AnthropicParticipant


@provider("google", key_env="GEMINI_API_KEY", image_limit=lambda c: 3600, request_bytes=20 * MB)
def google() -> type[Participant]:
    from .google import GoogleParticipant

    return GoogleParticipant


@provider("openrouter", key_env="OPENROUTER_API_KEY", image_limit=lambda c: 100, request_bytes=20 * MB)
def openrouter() -> type[Participant]:
    from .openrouter import OpenRouterParticipant

    return OpenRouterParticipant


@provider("python", hosted=False)
def python() -> type[Participant]:
    from .local import PythonParticipant

    return PythonParticipant
