"""Messages of the provider client boundary: decide, count tokens, and typed failure.

Image bytes travel as blob frames (`image_digests[i]` names blob i), never in msgpack.
API keys never cross this boundary: only the provider client reads them.
"""

from __future__ import annotations

import msgspec

from ._base import Message
from ._codec import Codec
from .control import Control, Error
from .participant import Attempt, Decision, DecisionRequest, TokenCount


class Decide(Message, frozen=True, kw_only=True):
    """Ask the participant for one decision (request.images empty; the images are blobs)."""

    request: DecisionRequest
    image_digests: list[str] = msgspec.field(default_factory=list)


class Decided(Message, frozen=True, kw_only=True):
    decision: Decision


class CountTokens(Message, frozen=True, kw_only=True):
    """Count the input units of a request with the provider's method (images as blobs)."""

    request: DecisionRequest
    image_digests: list[str] = msgspec.field(default_factory=list)


class Counted(Message, frozen=True, kw_only=True):
    count: TokenCount


class ProviderFailed(Message, frozen=True, kw_only=True):
    """The provider did not answer after the last attempt: the trial becomes incomplete
    with `reason`; `attempts` is the evidence of every attempt."""

    detail: str
    reason: str = "provider"
    attempts: list[Attempt] = msgspec.field(default_factory=list)


ProviderRequest = Decide | CountTokens
ProviderReply = Decided | Counted | ProviderFailed | Error

# One codec decodes both directions (the runtime's Server and Client share it).
ProviderMessage = Control | ProviderRequest | ProviderReply
PROVIDER_CODEC: Codec = Codec(ProviderMessage)
