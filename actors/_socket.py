"""A ZeroMQ socket driven from trio through its file descriptor.

ZeroMQ's ``FD`` is edge-triggered: it signals "the socket's state may have changed",
not "a message is waiting", and *any* operation on the socket (a send, reading
``EVENTS``) may consume that signal. So the reader drains with ``NOBLOCK`` until
``Again`` before it sleeps on the FD, and every send re-checks ``EVENTS`` and wakes
the sleeping reader if input became ready meanwhile. One task reads; any task of
the same trio thread may send (trio is cooperative, so sends never overlap).
"""

from __future__ import annotations

from collections.abc import Sequence

import trio
import zmq

# Fallback only while a send is blocked by the high-water mark: re-check at this period
# in case the FD edge that frees the queue was consumed elsewhere.
_BLOCKED_SEND_RECHECK = 0.01


class AsyncSocket:
    """Owns one ZeroMQ socket for one trio task tree; ``receive`` must have a single caller."""

    def __init__(self, socket: zmq.Socket):
        self.raw = socket
        self._fd = socket.getsockopt(zmq.FD)
        self._reader_sleep: trio.CancelScope | None = None
        self._changed = trio.Event()
        self._closed = False

    def send_nowait(self, frames: Sequence[bytes | memoryview]) -> bool:
        """Queue one multipart message; False when the high-water mark is reached."""
        try:
            # copy=False: frames above pyzmq's copy_threshold (64 KiB, images) are sent zero-copy.
            self.raw.send_multipart(frames, zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return False
        self._wake_reader_if_readable()
        return True

    async def send(self, frames: Sequence[bytes | memoryview]) -> None:
        """Queue one multipart message, waiting while the peer's queue is full."""
        while not self.send_nowait(frames):
            with trio.move_on_after(_BLOCKED_SEND_RECHECK):
                await self._changed.wait()
        await trio.lowlevel.checkpoint()

    async def receive(self) -> list[bytes]:
        """Wait for the next multipart message."""
        while True:
            try:
                frames = self.raw.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                pass
            else:
                # Yield even when messages keep coming, so a flood cannot starve the
                # handlers and heartbeat tasks of this actor; never raise Cancelled here,
                # which would drop a message already taken off the socket.
                await trio.lowlevel.cancel_shielded_checkpoint()
                return frames
            if self._closed:
                raise trio.ClosedResourceError("socket closed")
            with trio.CancelScope() as sleep:
                self._reader_sleep = sleep
                try:
                    if not self.raw.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                        await trio.lowlevel.wait_readable(self._fd)
                finally:
                    self._reader_sleep = None
            # The FD fired: whatever changed may also have freed a blocked sender.
            self._changed.set()
            self._changed = trio.Event()

    def receive_nowait(self) -> list[bytes] | None:
        """The next multipart message if one is waiting, else None."""
        if self._closed:
            return None
        try:
            return self.raw.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return None

    def _wake_reader_if_readable(self) -> None:
        if self._reader_sleep is not None and self.raw.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            self._reader_sleep.cancel()

    def close(self, linger_ms: int = 100) -> None:
        """Close the socket; a blocked ``receive`` raises ClosedResourceError."""
        if self._closed:
            return
        self._closed = True
        trio.lowlevel.notify_closing(self._fd)
        self.raw.close(linger=linger_ms)
