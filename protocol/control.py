"""Messages every actor speaks, whatever its boundary: handshake, errors, liveness, statistics."""

from __future__ import annotations

from typing import Literal

import msgspec

from ._base import Message
from ._codec import Codec

ErrorCode = Literal[
    # the runtime
    "decode", "version", "internal", "unsupported", "config",
    # requests a peer must not make, or made badly
    "refused", "bad_request", "invalid",
    # the simulator (sim.backend.SimError.code) and the robot API
    "sim", "reset", "not_loaded", "physics", "invalid_action", "limit_reached",
    # simulator families' own SimError codes
    "assets_missing", "contract_mismatch", "round_over",
    # the sandbox bridge
    "bridge", "sandbox", "workspace",
    # the context manager and provider client
    "context_overflow", "provider", "search_unavailable",
    # the recorder
    "checkpoint", "artifact",
]
"""Machine-readable ``Error.code`` values. A new code is added here first (tests/protocol checks
every ``Error(code=...)`` in the tree against this list): a peer cannot decode a code it lacks."""


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

    code: ErrorCode  # a dead peer or a timeout is the client's exception (PeerDead, trio.TooSlowError), never an Error
    detail: str
    data: dict[str, str | int | float | bool | None] = msgspec.field(default_factory=dict)


class Heartbeat(Message, frozen=True, kw_only=True):
    pid: int | None = None  # the sender's process id: a client sees a restarted peer by a new pid


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
"""Every control message; each boundary's codec union includes it so the runtime's replies decode."""

CONTROL_CODEC: Codec = Codec(Control)
"""Codec for links that speak only control messages (supervisor, status, placeholders)."""
