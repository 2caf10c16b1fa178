"""The bridge socket's framing: a whole message is announced before it is read (stdlib only;
copied into the sandbox image for the robot module).

A message is ``[envelope, body, *blobs]`` (see ``roboswe.protocol``) sent on a plain unix
stream socket as::

    u32 total   bytes that follow this 8-byte header
    u32 count   frames in the message
    count x (u32 length, bytes)

all big-endian. The bridge reads the header, refuses a message whose ``total`` exceeds its
cap before reading any of it, and then reads exactly ``total`` bytes: a peer cannot make
the bridge buffer more than one capped message per connection, however it sends.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">II")
LENGTH = struct.Struct(">I")
MAX_FRAMES = 64


class FrameError(ValueError):
    """Bytes that are not a well-formed message; the message says what was wrong."""


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


def read_message(receive_exactly, max_bytes: int | None = None) -> list[bytes]:
    """Read one message with ``receive_exactly(n) -> bytes`` (blocking); raises FrameError, EOFError."""
    total, count = header(receive_exactly(HEADER.size))
    if max_bytes is not None and total > max_bytes:
        raise FrameError(f"a message of {total} bytes exceeds {max_bytes} bytes")
    return split(receive_exactly(total), count)
