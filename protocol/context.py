"""Messages of the context manager boundary: append turns, prepare the next request,
record usage, search archived history, and the records a slide leaves behind."""

from __future__ import annotations

import msgspec

from ._base import Message
from ._codec import Codec
from .control import Control, Error, Ok
from .participant import Attempt, DecisionRequest, Role, Turn, Usage


class CountRecord(msgspec.Struct, frozen=True, kw_only=True):
    """How large one prepared request was. Exact counts (a provider count endpoint) and
    estimated units (local estimate, OpenRouter proxy) are kept in separate fields."""

    trial: int
    at: float  # wall clock
    method: str  # TokenCount.method of the count behind it, e.g. "anthropic.count_tokens"
    units: int  # what the policy compared with the budget
    exact_tokens: int | None = None
    estimated_units: int | None = None
    base_tokens: int = 0  # N before the proxy/estimate multiplier
    multiplier: float = 1.0
    budget: int = 0
    turns: int = 0
    images: int = 0  # image blocks in the request
    images_dropped: int = 0  # older images replaced by a placeholder to stay within the provider's per-request limit
    attempts: list[Attempt] = msgspec.field(default_factory=list)  # count-endpoint exchanges behind this count
    # The request's history was rewritten (`rewrite` says how: a slide, images left out) and the model
    # checks each thinking block's prefix: these retained turns were sent from here on without their thinking.
    rewrite: str = ""
    thinking_removed: list[str] = msgspec.field(default_factory=list)


class SlideRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One context slide: which turns left the active request and the counts around it."""

    series: str
    trial: int
    at: float
    removed_turn_ids: list[str]
    before_units: int
    after_units: int
    removed_units: int  # sum of the removed exchanges' units
    budget: int
    method: str
    multiplier: float = 1.0
    number: int = 1  # 1 for the series' first slide


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    turn_id: str
    trial: int
    role: Role
    excerpt: str
    active: bool  # still in the active request


class OverflowEvidence(msgspec.Struct, frozen=True, kw_only=True):
    """Why a request could not be made to fit: budget, size, and the indivisible exchanges left."""

    series: str
    trial: int
    budget: int
    units: int
    method: str
    kept_exchanges: list[list[str]]  # turn ids of each exchange that could not be removed
    kept_units: list[int]


# ---- wire messages (coordinator -> context manager)


class AppendTurns(Message, frozen=True, kw_only=True):
    """Add turns to the archive and the active conversation; blob i is the image whose
    digest is image_digests[i]."""

    turns: list[Turn]
    image_digests: list[str] = msgspec.field(default_factory=list)


class PrepareRequest(Message, frozen=True, kw_only=True):
    """Build the next DecisionRequest, sliding the window first when it would not fit."""

    system: str
    trial: int
    interface: str = "code"  # which tool set the request offers (participant.INTERFACES)


class Prepared(Message, frozen=True, kw_only=True):
    """The request to send (images as blobs, in image_digests order) and its accounting."""

    request: DecisionRequest
    image_digests: list[str]
    count: CountRecord
    slide: SlideRecord | None = None


class RecordUsage(Message, frozen=True, kw_only=True):
    """The provider-reported usage of the last prepared request (raises the proxy multiplier)."""

    usage: Usage


class SearchHistoryRequest(Message, frozen=True, kw_only=True):
    query: str


class SearchHistoryResult(Message, frozen=True, kw_only=True):
    hits: list[SearchHit]
    text: str  # the tool result text for the participant


class ResetContext(Message, frozen=True, kw_only=True):
    """Start a new, empty history (a new series, or each trial of the fresh-context control)."""

    series: str


class ContextState(Message, frozen=True, kw_only=True):
    """Reply to ResetContext / AppendTurns: sizes of the archive and active request."""

    archived: int
    active: int
    slides: int


ContextRequest = AppendTurns | PrepareRequest | RecordUsage | SearchHistoryRequest | ResetContext
ContextReply = Prepared | SearchHistoryResult | ContextState | Ok | Error

# One codec decodes both directions (the runtime's Server and Client share it).
ContextMessage = Control | ContextRequest | ContextReply
CONTEXT_CODEC: Codec = Codec(ContextMessage)
