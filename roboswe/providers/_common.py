"""Small helpers the adapters share when mapping the neutral conversation."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import msgspec

from roboswe.protocol.participant import (
    MAX_ARGUMENT_DEPTH,
    DecisionRequest,
    ImagePart,
    OpaquePart,
    ReasoningPart,
    Turn,
    clean_text,
    json_depth,
)

# A provider response's envelope nests about ten levels above a tool call's arguments (Gemini:
# candidates, content, parts, functionCall, args); anything deeper can only be arguments that
# parse_operation refuses anyway. Deeper containers are cut before the response is decoded, so no
# decoder, encoder or SDK of ours or of the provider's ever recurses past it.
MAX_RESPONSE_DEPTH = MAX_ARGUMENT_DEPTH + 32
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


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
    """Tool call arguments as an object (providers that want objects, not JSON text); text that is not
    a JSON object, or nests deeper than MAX_ARGUMENT_DEPTH, travels as a string."""
    if json_depth(arguments) > MAX_ARGUMENT_DEPTH:
        return {"_unparsed": arguments}
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return {"_unparsed": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def clean_json(value: Any) -> Any:
    """A decoded JSON value (dicts, lists, strings; other objects pass through) with every lone
    surrogate replaced by U+FFFD, in keys too: the SDKs encode bodies as UTF-8 (``ensure_ascii=False``),
    which a lone surrogate breaks. The same object when nothing needed it."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        items = [(clean_json(k), clean_json(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, list):
        cleaned = [clean_json(v) for v in value]
        return value if all(a is b for a, b in zip(cleaned, value)) else cleaned
    return value


def prune_text(text: str, max_depth: int = MAX_RESPONSE_DEPTH) -> str:
    """JSON text with every array or object nested deeper than ``max_depth`` replaced by a string saying
    so (still valid JSON); the same object when nothing is that deep. Strings are skipped whole."""
    if json_depth(text) <= max_depth:
        return text
    pieces: list[str] = []
    depth, last = 0, 0
    for m in _TOKEN.finditer(text):
        c = text[m.start()]
        if c == '"':
            continue
        if c in "[{":
            depth += 1
            if depth == max_depth + 1:
                pieces.append(text[last:m.start()])
        else:
            if depth == max_depth + 1:
                pieces.append(f'"(left out: nested deeper than {max_depth} levels)"')
                last = m.end()
            depth -= 1
    if depth <= max_depth:
        pieces.append(text[last:])
    return "".join(pieces)


def prune_json(raw: bytes, max_depth: int = MAX_RESPONSE_DEPTH) -> bytes:
    """`prune_text` for response bytes; bytes that are not UTF-8 pass through unchanged where kept."""
    text = raw.decode("utf-8", "surrogateescape")
    pruned = prune_text(text, max_depth)
    return raw if pruned is text else pruned.encode("utf-8", "surrogateescape")


# A lone surrogate's escape ("\ud83d" without its pair) is valid JSON but not text that msgspec's
# decoders (every adapter's envelope) accept. A response holding one is read with each lone escape
# stood in for by a private-use character of plane 16 (U+100000 + its index), and the turn read
# from it gets the original escapes back: in bytes (native, opaque items) exactly, in text as the
# lone surrogate itself, which parse_operation then refuses in a tool call and clean_turn replaces
# in the rest. A response that already holds plane-16 characters is read with U+FFFD instead.
_LONE_ESCAPE = re.compile(
    rb"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    rb"|(?<!\\)((?:\\\\)*)\\u([dD][c-fC-F][0-9a-fA-F]{2})")
_PLANE_16 = re.compile(rb"\\u[dD][bB][c-fC-F][0-9a-fA-F]|\xf4[\x80-\x8f]")
_STAND_IN = 0x100000
_STAND_IN_ESCAPE = re.compile(r"\\udb[c-f][0-9a-f]\\ud[c-f][0-9a-f]{2}")
_STAND_IN_CHAR = re.compile("[\U00100000-\U0010fffd]")


def mask_lone_surrogates(raw: bytes) -> tuple[bytes, list[tuple[bytes, int]]]:
    """(raw with each lone surrogate escape replaced by a stand-in, the original escapes and their
    code points in order); raw itself and [] when it holds none."""
    if not re.search(rb"\\u[dD][89a-fA-F]", raw):
        return raw, []
    table: list[tuple[bytes, int]] = []
    lossy = bool(_PLANE_16.search(raw))

    def stand_in(m: re.Match[bytes]) -> bytes:
        if m.group(3):  # a valid pair
            return m.group(0)
        prefix, escape = (m.group(1), m.group(2)) if m.group(2) else (m.group(4), m.group(5))
        if lossy or len(table) >= 0xFFFE:
            return prefix + b"\\ufffd"
        table.append((b"\\u" + escape, int(escape, 16)))
        cp = _STAND_IN + len(table) - 1 - 0x10000
        return prefix + b"\\u%04x\\u%04x" % (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF))

    return _LONE_ESCAPE.sub(stand_in, raw), table


def unmask(value: Any, table: list[tuple[bytes, int]]) -> Any:
    """Text or bytes read from `mask_lone_surrogates` output with the original escapes (bytes, and escapes
    in text) and surrogates (characters in text) back; anything else unchanged."""
    def index(cp: int) -> int | None:
        i = cp - _STAND_IN
        return i if 0 <= i < len(table) else None

    def escape(m: re.Match[str]) -> str:
        text = m.group(0)
        cp = 0x10000 + ((int(text[2:6], 16) - 0xD800) << 10) + (int(text[8:12], 16) - 0xDC00)
        i = index(cp)
        return text if i is None else table[i][0].decode("ascii")

    def char(m: re.Match[str]) -> str:
        i = index(ord(m.group(0)))
        return m.group(0) if i is None else chr(table[i][1])

    if isinstance(value, str):
        return _STAND_IN_CHAR.sub(char, _STAND_IN_ESCAPE.sub(escape, value))
    if isinstance(value, bytes):  # JSON bytes: the stand-ins are escapes there (never characters)
        return _STAND_IN_ESCAPE.sub(escape, value.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
    return value


def unmask_turn(turn: Turn, table: list[tuple[bytes, int]]) -> Turn:
    """A turn read from `mask_lone_surrogates` output with the original escapes and surrogates back."""
    if not table:
        return turn
    parts = []
    for part in turn.parts:
        fixes = {f: unmask(v, table) for f in part.__struct_fields__ if isinstance(v := getattr(part, f), (str, bytes))}
        parts.append(msgspec.structs.replace(part, **fixes))
    return msgspec.structs.replace(turn, parts=parts, native=unmask(turn.native, table))


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


THINKING_KINDS = ("thinking", "redacted_thinking")  # Anthropic's thinking blocks (OpaquePart kinds, native block types)
# OpenRouter's reasoning_details entries ("reasoning.text", "reasoning.encrypted", "reasoning.summary"), which
# it turns back into the upstream's thinking blocks (docs: openrouter.ai use-cases/reasoning-tokens): for a
# Claude model they are its thinking, with the same prefix check.
ROUTED_REASONING = "reasoning"
ROUTED_REASONING_FIELDS = ("reasoning_details", "reasoning")  # the chat message's fields that carry it


def _thinking(part: object) -> bool:
    return isinstance(part, OpaquePart) and (part.kind in THINKING_KINDS or (
        part.provider == "openrouter" and part.kind.startswith(ROUTED_REASONING)))


def without_thinking(turn: Turn) -> Turn | None:
    """An assistant turn without its thinking (Anthropic thinking blocks, or the reasoning_details a router
    sends back as them; native bytes and parts alike), or None when it has none. After a context rewrite
    (a slide, images left out) a model with preserved thinking would refuse them: their prefix changed
    (docs: preserved-thinking/prefix-checks, "after trimming older turns, remove thinking from the
    retained turns")."""
    if turn.role != "assistant" or not any(_thinking(p) for p in turn.parts):
        return None
    parts = [p for p in turn.parts if not _thinking(p) and not isinstance(p, ReasoningPart)]
    native = turn.native
    if native and turn.provider == "anthropic":
        blocks = [b for b in json.loads(native) if not (isinstance(b, dict) and b.get("type") in THINKING_KINDS)]
        native = json.dumps(blocks).encode()
    elif native and turn.provider == "openrouter":
        message = {k: v for k, v in json.loads(native).items() if k not in ROUTED_REASONING_FIELDS}
        native = json.dumps(message).encode()
    return msgspec.structs.replace(turn, parts=parts, native=native)
