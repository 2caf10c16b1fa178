"""A conservative local estimate of request tokens, for providers without a count endpoint.

Text: ceil(UTF-8 bytes / 3) -- BPE tokenizers of current models average about 4 bytes
per token on English and 3.3-3.8 on code and JSON, so /3 over-counts. Images: the largest
of the published per-image formulas we know (OpenAI tiles after upscaling the short side
to 768 px: 85 + 170 per 512-px tile; 32-px patches capped at 1536; Anthropic w*h/750),
so an image is never under-counted. Each part and turn adds a small framing allowance.
"""

from __future__ import annotations

import json
import math

from roboswe.protocol.participant import (
    DecisionRequest,
    ImagePart,
    OpaquePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Turn,
)

BYTES_PER_TOKEN = 3
PART_OVERHEAD = 6
TURN_OVERHEAD = 8
REQUEST_OVERHEAD = 64


def text_tokens(text: str | bytes) -> int:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return math.ceil(len(data) / BYTES_PER_TOKEN)


def image_tokens(width: int, height: int) -> int:
    """Upper bound of what current providers charge for one image of this size."""
    if width <= 0 or height <= 0:
        width = height = 2048  # unknown size: assume a large image
    # OpenAI tiles: fit in 2048x2048, then scale the short side to 768 (assume upscaling).
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    s = 768 / min(w, h)
    w, h = w * s, h * s
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    tile_tokens = 85 + 170 * tiles
    patch_tokens = min(1536, math.ceil(width / 32) * math.ceil(height / 32))
    anthropic = math.ceil(width * height / 750)
    return max(tile_tokens, patch_tokens, min(anthropic, 1600)) + PART_OVERHEAD


def turn_tokens(turn: Turn) -> int:
    """Estimated tokens of one turn (opaque items count by their byte size)."""
    total = TURN_OVERHEAD
    for p in turn.parts:
        match p:
            case TextPart(text=t):
                total += text_tokens(t) + PART_OVERHEAD
            case ReasoningPart():
                pass  # derived from an opaque item, which is what is sent back
            case ImagePart(width=w, height=h):
                total += image_tokens(w, h)
            case ToolCallPart(name=n, arguments=a, call_id=c):
                total += text_tokens(n) + text_tokens(a) + text_tokens(c) + PART_OVERHEAD
            case ToolResultPart(text=t, images=ims, call_id=c):
                total += text_tokens(t) + text_tokens(c) + PART_OVERHEAD
                total += sum(image_tokens(i.width, i.height) for i in ims)
            case OpaquePart(data=d):
                total += text_tokens(d)
    return total


def estimate_request(request: DecisionRequest) -> int:
    """Estimated input tokens of a whole request: instructions, tool schemas, conversation."""
    tools = json.dumps([{"name": t.name, "description": t.description, "parameters": t.parameters} for t in request.tools])
    return REQUEST_OVERHEAD + text_tokens(request.system) + text_tokens(tools) + sum(turn_tokens(t) for t in request.conversation)
