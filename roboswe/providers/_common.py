"""Small helpers the adapters share when mapping the neutral conversation."""

from __future__ import annotations

import base64
import json
from typing import Any

from roboswe.protocol.participant import DecisionRequest, ImagePart, Turn


def image_b64(request: DecisionRequest, image: ImagePart) -> str:
    """Base64 of an image referenced by the conversation; raises ValueError if it is missing."""
    data = request.images.get(image.digest)
    if data is None:
        raise ValueError(
            f"image {image.digest[:12]} ({image.camera}) is referenced by the conversation but not in "
            f"DecisionRequest.images; pass every referenced image with the request"
        )
    return base64.b64encode(data).decode("ascii")


def data_url(request: DecisionRequest, image: ImagePart) -> str:
    return f"data:{image.media_type};base64,{image_b64(request, image)}"


def call_arguments(arguments: str) -> dict[str, Any]:
    """Tool call arguments as an object (providers that want objects, not JSON text)."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"_unparsed": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def native_items(turn: Turn, kind: str) -> Any | None:
    """The exact provider output of an assistant turn, when it came from this provider."""
    if turn.role == "assistant" and turn.provider == kind and turn.native:
        return json.loads(turn.native)
    return None


def merge_roles(messages: list[dict[str, Any]], content_key: str = "content") -> list[dict[str, Any]]:
    """Merge consecutive messages of the same role (providers that require alternation)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            out[-1] = {**out[-1], content_key: list(out[-1][content_key]) + list(m[content_key])}
        else:
            out.append(m)
    return out
