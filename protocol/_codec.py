"""One codec per boundary: a message becomes ZMQ frames and back.

Frame layout: ``[envelope, body, *blobs]``. The envelope and body are msgpack;
blobs are raw bytes (images, video frames) referenced by index from the body, so
large payloads are never copied into msgpack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import msgspec

from ._base import Envelope, Message, envelope

M = TypeVar("M", bound=Message)

MAX_FRAMES = 64


class DecodeError(Exception):
    """A frame sequence that is not a valid message; ``reason`` says why."""

    def __init__(self, reason: str, *, envelope: Envelope | None = None):
        super().__init__(reason)
        self.reason = reason
        self.envelope = envelope


class Decoded(msgspec.Struct, Generic[M], frozen=True):
    envelope: Envelope
    message: M
    blobs: tuple[memoryview | bytes, ...]


_envelope_encoder = msgspec.msgpack.Encoder()
_envelope_decoder = msgspec.msgpack.Decoder(Envelope)


class Codec(Generic[M]):
    """Encodes and decodes one tagged union; encoders and decoders are built once."""

    def __init__(self, union: Any):
        self.union = union
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(union)

    def encode(
        self,
        message: M,
        *,
        sender: str,
        correlation_id: str | None = None,
        blobs: Sequence[bytes | memoryview] = (),
    ) -> tuple[Envelope, list[bytes | memoryview]]:
        env = envelope(sender, correlation_id=correlation_id, blobs=len(blobs))
        frames: list[bytes | memoryview] = [
            _envelope_encoder.encode(env),
            self._encoder.encode(message),
            *blobs,
        ]
        return env, frames

    def decode(self, frames: Sequence[bytes | memoryview | Any]) -> Decoded[M]:
        """Decode a multipart message; raises DecodeError naming what was wrong."""
        frames = [f.buffer if hasattr(f, "buffer") else f for f in frames]
        if len(frames) < 2:
            raise DecodeError(f"expected at least 2 frames (envelope, body), got {len(frames)}")
        if len(frames) > MAX_FRAMES:
            raise DecodeError(f"too many frames: {len(frames)} > {MAX_FRAMES}")
        try:
            env = _envelope_decoder.decode(frames[0])
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise DecodeError(f"bad envelope: {e}") from None
        if env.blobs != len(frames) - 2:
            raise DecodeError(
                f"envelope announces {env.blobs} blob frame(s) but {len(frames) - 2} arrived",
                envelope=env,
            )
        try:
            message = self._decoder.decode(frames[1])
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise DecodeError(f"bad message body: {e}", envelope=env) from None
        return Decoded(env, message, tuple(frames[2:]))
