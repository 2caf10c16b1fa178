"""Typed failures a caller of the actor runtime can catch."""

from __future__ import annotations

from roboswe.protocol.control import Error


class PeerDead(Exception):
    """The peer stopped answering (no message within its liveness window), or was restarted
    (``restarted``: a new process answers at its endpoint; requests sent to the old one are lost)."""

    def __init__(self, peer: str, endpoint: str, silent_for: float, *, restarted: bool = False):
        if restarted:
            super().__init__(f"peer {peer!r} at {endpoint} was restarted; requests in flight to it are lost")
        else:
            super().__init__(f"peer {peer!r} at {endpoint} silent for {silent_for:.1f} s; declared dead")
        self.peer = peer
        self.endpoint = endpoint
        self.silent_for = silent_for
        self.restarted = restarted


class RemoteError(Exception):
    """The peer answered with a typed ``Error``; ``error`` carries it."""

    def __init__(self, error: Error):
        super().__init__(f"{error.code}: {error.detail}")
        self.error = error

    @property
    def code(self) -> str:
        return self.error.code


class ProtocolError(Exception):
    """A reply from the peer could not be decoded."""
