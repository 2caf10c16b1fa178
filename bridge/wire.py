"""The bridge socket's framing: a whole message is announced before it is read (stdlib only;
copied into the sandbox image for the robot module).

A message is ``[envelope, body, *blobs]`` (see ``roboswe.protocol``) sent on a plain unix
stream socket as::

    u32 total   bytes that follow this 8-byte header
    u32 count   frames in the message
    count x (u32 length, bytes)

all big-endian. The bridge reads the header, refuses a message whose ``total`` exceeds its
cap before reading any of it (``FrameTooLarge``), and then reads exactly ``total`` bytes: a
peer cannot make the bridge buffer more than one capped message per connection, however it sends.

``FrameReader`` is the one reader of this framing, at both ends of the bridge socket and of the
simulator's robot stream; ``read_message`` drives it from a blocking socket, ``receive_message``
from an async stream (a trio one, without this module importing trio).
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">II")
LENGTH = struct.Struct(">I")
MAX_FRAMES = 64


class FrameError(ValueError):
    """Bytes that are not a well-formed message; the message says what was wrong."""


class FrameTooLarge(FrameError):
    """A message announcing more bytes than the reader's cap: refused before any of its body is read."""

    def __init__(self, total: int, limit: int, what: str = "message"):
        super().__init__(f"a {what} of {total} bytes exceeds {limit} bytes")
        self.total = total
        self.limit = limit


def encode(frames) -> bytes:
    """One message's bytes (header, then each frame with its length)."""
    parts = []
    for frame in frames:
        data = bytes(frame)
        parts.append(LENGTH.pack(len(data)))
        parts.append(data)
    body = b"".join(parts)
    return HEADER.pack(len(body), len(frames)) + body


def header(data: bytes) -> tuple[int, int]:
    """(total, count) from the 8 header bytes; raises FrameError for a count beyond MAX_FRAMES."""
    total, count = HEADER.unpack(data)
    if not 1 <= count <= MAX_FRAMES:
        raise FrameError(f"a message has 1 to {MAX_FRAMES} frames, this one announces {count}")
    return total, count


def split(body: bytes, count: int) -> list[bytes]:
    """The ``count`` frames of a message body; raises FrameError when the lengths do not add up."""
    frames = []
    view = memoryview(body)
    at = 0
    for _ in range(count):
        if at + LENGTH.size > len(view):
            raise FrameError("a frame length runs past the announced message size")
        (n,) = LENGTH.unpack_from(view, at)
        at += LENGTH.size
        if at + n > len(view):
            raise FrameError("a frame runs past the announced message size")
        frames.append(bytes(view[at : at + n]))
        at += n
    if at != len(view):
        raise FrameError(f"{len(view) - at} bytes after the last frame")
    return frames


class FrameReader:
    """Messages out of a byte stream, whatever pieces the bytes arrive in (no I/O of its own).

    ``max_bytes``: a message announcing more raises FrameTooLarge as soon as its header is in.
    ``wanted()`` says how many bytes to ask the transport for next: exactly what the message
    still lacks, at most ``chunk`` at once, so a hostile peer's next message is never read ahead;
    with ``read_ahead`` (a trusted peer) at least ``chunk``, so a small reply takes one read.
    """

    def __init__(self, max_bytes: int | None = None, *, what: str = "message", chunk: int = 1 << 16,
                 read_ahead: bool = False):
        self.max_bytes = max_bytes
        self.what = what
        self.chunk = chunk
        self.read_ahead = read_ahead
        self._buffer = bytearray()
        self._announced: tuple[int, int] | None = None  # (total, count) of the message being read

    def clear(self) -> None:
        """Forget a partly read message (its connection was closed)."""
        self._buffer.clear()
        self._announced = None

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def wanted(self) -> int:
        announced = self._announced
        need = HEADER.size + (announced[0] if announced else 0) - len(self._buffer)
        return max(need, self.chunk) if self.read_ahead else min(need, self.chunk)

    def next_message(self) -> list[bytes] | None:
        """The next whole message, or None until more bytes are fed; raises FrameError, FrameTooLarge."""
        if self._announced is None:
            if len(self._buffer) < HEADER.size:
                return None
            total, count = header(bytes(self._buffer[: HEADER.size]))
            if self.max_bytes is not None and total > self.max_bytes:
                raise FrameTooLarge(total, self.max_bytes, self.what)
            self._announced = (total, count)
        total, count = self._announced
        end = HEADER.size + total
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[HEADER.size : end])
        del self._buffer[:end]
        self._announced = None
        return split(body, count)


def read_message(receive, reader: FrameReader | None = None) -> list[bytes]:
    """One message from a blocking ``receive(n)`` (at most n bytes, b"" at the end, like ``socket.recv``);
    raises FrameError, FrameTooLarge, EOFError. Pass the connection's reader when it has a cap."""
    reader = reader or FrameReader()
    while (message := reader.next_message()) is None:
        data = receive(reader.wanted())
        if not data:
            raise EOFError
        reader.feed(data)
    return message


async def receive_message(receive_some, reader: FrameReader) -> list[bytes]:
    """``read_message`` for an async stream (``await receive_some(n)``, e.g. a trio SocketStream's)."""
    while (message := reader.next_message()) is None:
        data = await receive_some(reader.wanted())
        if not data:
            raise EOFError
        reader.feed(data)
    return message
