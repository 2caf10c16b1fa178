"""Envelope and base types shared by every boundary."""

from __future__ import annotations

import itertools
import os
import time
from typing import Annotated

import msgspec

PROTOCOL_VERSION = (1, 0)
"""(major, minor). Peers with another major version are refused at Hello."""


class Message(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """Base of every wire message; subclasses are tagged by their class name."""


class Envelope(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """Routing and timing metadata sent as the first frame of every message."""

    version: tuple[int, int]
    message_id: str
    correlation_id: str | None
    sender: str
    sent_at: float  # time.monotonic() of the sender (same host) for latency accounting
    blobs: Annotated[int, msgspec.Meta(ge=0)] = 0


_counter = itertools.count()
_prefix = f"{os.getpid():x}-{os.urandom(3).hex()}"


def new_message_id() -> str:
    """A process-unique, sortable message id."""
    return f"{_prefix}-{next(_counter):x}"


def envelope(sender: str, *, correlation_id: str | None = None, blobs: int = 0) -> Envelope:
    return Envelope(
        version=PROTOCOL_VERSION,
        message_id=new_message_id(),
        correlation_id=correlation_id,
        sender=sender,
        sent_at=time.monotonic(),
        blobs=blobs,
    )
