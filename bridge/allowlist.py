"""The bridge's door policy: which requests from authored code may reach the robot.

Pure functions over received frames (no ZeroMQ): every request is screened before it is
decoded as a robot call, so a forged administrative message, an unknown kind, an
oversized frame or garbage is refused by kind and never reaches the simulator.
"""

from __future__ import annotations

import msgspec
from roboswe.protocol import Decoded, DecodeError
from roboswe.protocol.bridge import ALLOWED_KINDS, BRIDGE_ROBOT_CODEC

MAX_REQUEST_BYTES = 256 * 1024
"""Largest request accepted (a StepMany of a few thousand rows fits). The bridge socket refuses
unread, and closes, a request announcing more than a larger hard cap."""

MAX_CHUNK_ROWS = 1000


class Refusal(msgspec.Struct, frozen=True):
    """A refused request: its kind as far as it could be read, and why."""

    kind: str
    reason: str


class _Kind(msgspec.Struct):
    kind: str = "?"


_kind_decoder = msgspec.msgpack.Decoder(_Kind)


def _printable(kind: str) -> str:
    kind = "".join(c if c.isprintable() else "?" for c in kind[:64])
    return kind or "?"


def request_kind(frames: list[bytes]) -> str:
    """The ``kind`` a request claims, or a label for what it is when it claims none."""
    if len(frames) < 2:
        return "garbage"
    try:
        return _printable(_kind_decoder.decode(frames[1]).kind)
    except Exception:  # noqa: BLE001 - DecodeError, ValidationError, RecursionError on deep nesting: all garbage
        return "garbage"


def screen(frames: list[bytes], *, max_bytes: int = MAX_REQUEST_BYTES) -> Decoded | Refusal:
    """Accept an allowed robot call, decoded; anything else becomes a Refusal naming its kind. Never raises."""
    try:
        return _screen(frames, max_bytes)
    except Exception as e:  # noqa: BLE001 - whatever a request holds, it is refused, never a bridge failure
        return Refusal(request_kind(frames), f"the request could not be read ({type(e).__name__})")


def _screen(frames: list[bytes], max_bytes: int) -> Decoded | Refusal:
    size = sum(len(f) for f in frames)
    kind = request_kind(frames)
    if size > max_bytes:
        return Refusal(kind if kind != "garbage" else "oversized", f"request of {size} bytes exceeds {max_bytes} bytes")
    if kind not in ALLOWED_KINDS:
        if kind == "garbage":
            return Refusal(kind, "not a roboswe message: expected [envelope, body] msgpack frames")
        return Refusal(kind, f"{kind!r} is not allowed; the robot API allows only {sorted(ALLOWED_KINDS)}")
    if len(frames) != 2:
        return Refusal(kind, f"robot calls carry no blob frames; got {len(frames) - 2}")
    try:
        decoded = BRIDGE_ROBOT_CODEC.decode(frames)
    except DecodeError as e:
        return Refusal(kind, e.reason)
    if decoded.message.__class__.__name__ not in ALLOWED_KINDS:  # defence in depth: tag and type must agree
        return Refusal(kind, "kind and body disagree")
    rows = getattr(decoded.message, "actions", None)
    if rows is not None and len(rows) > MAX_CHUNK_ROWS:
        return Refusal(kind, f"a chunk holds at most {MAX_CHUNK_ROWS} rows, got {len(rows)}")
    return decoded
