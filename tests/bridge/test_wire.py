"""The one frame reader (bridge/wire.py): whole messages out of any split of the bytes, a cap refused by
type before the body is read, nothing read ahead for a hostile peer, and a trusted peer's read-ahead kept."""

from __future__ import annotations

import pytest
import trio
from roboswe.bridge import wire

ONE = [b"envelope", b"body", b"\x00" * 300]
TWO = [b"e2", b"b2"]


class Peer:
    """A blocking ``receive(n)`` over fixed bytes, at most ``piece`` at a time; records each n asked for."""

    def __init__(self, data: bytes, piece: int = 1 << 30):
        self.data, self.piece, self.asked = data, piece, []

    def recv(self, n: int) -> bytes:
        self.asked.append(n)
        out, self.data = self.data[: min(n, self.piece)], self.data[min(n, self.piece) :]
        return out


def test_messages_come_whole_whatever_pieces_the_bytes_arrive_in():
    peer = Peer(wire.encode(ONE) + wire.encode(TWO), piece=1)
    reader = wire.FrameReader()
    assert wire.read_message(peer.recv, reader) == ONE
    assert wire.read_message(peer.recv, reader) == TWO
    with pytest.raises(EOFError):
        wire.read_message(peer.recv, reader)


def test_a_message_over_the_cap_is_refused_by_type_after_its_header_only():
    huge = wire.HEADER.pack(8 << 20, 2) + b"x" * 1000
    peer = Peer(huge)
    with pytest.raises(wire.FrameTooLarge) as refused:
        wire.read_message(peer.recv, wire.FrameReader(1 << 20, what="request"))
    assert (refused.value.total, refused.value.limit) == (8 << 20, 1 << 20)
    assert peer.asked == [wire.HEADER.size] and len(peer.data) == 1000  # the body was never read
    assert isinstance(refused.value, wire.FrameError)


@pytest.mark.parametrize("raw", [wire.HEADER.pack(10, 100_000), wire.HEADER.pack(3, 1) + b"\x00\x00\x00"])
def test_malformed_messages_are_frame_errors_not_too_large(raw):
    with pytest.raises(wire.FrameError) as bad:
        wire.read_message(Peer(raw).recv, wire.FrameReader(1 << 20))
    assert not isinstance(bad.value, wire.FrameTooLarge)


def test_exact_reads_never_take_the_next_message_and_read_ahead_keeps_it():
    data = wire.encode(ONE) + wire.encode(TWO)
    exact = Peer(data)
    wire.read_message(exact.recv, wire.FrameReader())
    assert exact.data == wire.encode(TWO)  # left in the socket, not in the bridge's memory

    ahead, reader = Peer(data), wire.FrameReader(read_ahead=True)
    assert wire.read_message(ahead.recv, reader) == ONE and ahead.data == b""
    assert wire.read_message(ahead.recv, reader) == TWO and len(ahead.asked) == 1  # from what was read ahead


def test_the_async_driver_reads_the_same_messages():
    async def main() -> list[list[bytes]]:
        peer = Peer(wire.encode(ONE) + wire.encode(TWO), piece=7)

        async def receive_some(n: int) -> bytes:
            await trio.lowlevel.checkpoint()
            return peer.recv(n)

        reader = wire.FrameReader(1 << 20)
        return [await wire.receive_message(receive_some, reader) for _ in range(2)]

    assert trio.run(main) == [ONE, TWO]
