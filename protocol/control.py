"""Messages every actor speaks, whatever its boundary: handshake, errors, liveness, statistics."""

from __future__ import annotations

import msgspec

from ._base import Message
from ._codec import Codec


class Hello(Message, frozen=True, kw_only=True):
    """First message a client sends; carries its protocol version."""

    version: tuple[int, int]
    actor: str
    pid: int


class Ready(Message, frozen=True, kw_only=True):
    """Answer to Hello: the server's version and name."""

    version: tuple[int, int]
    actor: str
    pid: int


class Error(Message, frozen=True, kw_only=True):
    """Typed failure reply. ``code`` is machine-readable, ``detail`` is for a person."""

    code: str  # e.g. "decode", "version", "invalid_action", "refused", "peer_dead", "timeout", "internal"
    detail: str
    data: dict[str, str | int | float | bool | None] = msgspec.field(default_factory=dict)


class Heartbeat(Message, frozen=True, kw_only=True):
    pass


class StatisticsRequest(Message, frozen=True, kw_only=True):
    pass


class Statistics(Message, frozen=True, kw_only=True):
    """Frozen snapshot of an actor's timing accounts (seconds) and counters."""

    actor: str
    pid: int
    uptime: float
    idle: float
    handling: dict[str, float]  # message kind -> total handling seconds
    handled: dict[str, int]  # message kind -> count
    waiting: dict[str, float]  # peer name -> seconds spent waiting on replies
    errors: int
    extra: dict[str, float] = msgspec.field(default_factory=dict)


class Shutdown(Message, frozen=True, kw_only=True):
    reason: str = ""


class Ok(Message, frozen=True, kw_only=True):
    """Generic empty success reply."""


Control = Hello | Ready | Error | Heartbeat | StatisticsRequest | Statistics | Shutdown | Ok

CONTROL_CODEC: Codec = Codec(Control)
"""Codec for links that speak only control messages (supervisor, status, placeholders)."""
