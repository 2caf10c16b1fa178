"""Malformed frames never kill an actor: each gets a typed Error reply and the actor keeps serving."""

from __future__ import annotations

import msgspec
import pytest
import zmq
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from roboswe.protocol import PROTOCOL_VERSION, DecodeError
from roboswe.protocol._base import envelope
from roboswe.protocol.control import Error

from ..actors.echo_server import ECHO_CODEC, Echo

CASES = settings(max_examples=700, deadline=None, suppress_health_check=list(HealthCheck), database=None)
_msgpack = msgspec.msgpack.Encoder()


@pytest.fixture(scope="module")
def raw_link(tmp_path_factory):
    """A running echo actor process and a raw DEALER socket that can send it anything."""
    from ..conftest import EchoProcess

    server = EchoProcess(f"ipc://{tmp_path_factory.mktemp('malformed')}/echo.sock")
    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.linger = 0
    socket.rcvtimeo = 3000
    socket.connect(server.endpoint)
    yield server, socket
    socket.close()
    assert server.process.poll() is None, "the actor died of malformed input"
    server.stop()


def exchange(link, frames: list[bytes]) -> Error:
    server, socket = link
    socket.send_multipart(frames)
    reply = ECHO_CODEC.decode(socket.recv_multipart())
    assert isinstance(reply.message, Error), reply.message
    return reply.message


def must_not_decode(frames: list[bytes]) -> None:
    try:
        ECHO_CODEC.decode(frames)
    except DecodeError:
        return
    assume(False)  # hypothesis found a valid message by chance: not a malformed case


def valid_envelope(blobs: int = 0) -> bytes:
    return _msgpack.encode(envelope("fuzzer", blobs=blobs))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=20) | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)


@CASES
@given(st.lists(st.binary(max_size=64), min_size=1, max_size=5))
def test_garbage_bytes_get_decode_error(raw_link, frames):
    must_not_decode(frames)
    assert exchange(raw_link, frames).code == "decode"


@CASES
@given(st.text(max_size=20), st.dictionaries(st.sampled_from(["text", "seconds", "x"]), json_values, max_size=3))
def test_unknown_tag_gets_decode_error_naming_it(raw_link, tag, fields):
    assume(tag not in {"Echo", "Nap", "Hog", "Crunch", "Hello", "Ready", "Error", "Heartbeat",
                       "StatisticsRequest", "Statistics", "Shutdown", "Ok"})
    frames = [valid_envelope(), _msgpack.encode({"kind": tag, **fields})]
    must_not_decode(frames)
    error = exchange(raw_link, frames)
    assert error.code == "decode" and "kind" in error.detail


@CASES
@given(st.sampled_from(["Echo", "Nap", "Hello", "Shutdown"]), st.dictionaries(st.sampled_from(["text", "seconds", "version", "actor", "pid", "reason"]), json_values, min_size=1, max_size=4))
def test_wrong_field_types_get_decode_error(raw_link, tag, fields):
    frames = [valid_envelope(), _msgpack.encode({"kind": tag, **fields})]
    must_not_decode(frames)
    assert exchange(raw_link, frames).code == "decode"


@CASES
@given(st.integers(0, 5), st.integers(0, 5), st.booleans())
def test_truncated_or_padded_multipart_gets_decode_error(raw_link, announced, sent, drop_body):
    body = [] if drop_body else [_msgpack.encode(Echo(text="x"))]
    frames = [valid_envelope(blobs=announced), *body, *[b"blob"] * sent]
    must_not_decode(frames)
    assert exchange(raw_link, frames).code == "decode"


def test_other_major_version_is_refused_with_clear_detail(raw_link):
    from roboswe.protocol.control import Hello

    future = (PROTOCOL_VERSION[0] + 1, 0)
    error = exchange(raw_link, [valid_envelope(), _msgpack.encode(Hello(version=future, actor="future", pid=1))])
    assert error.code == "version"
    assert f"{future[0]}.0" in error.detail and "major versions must match" in error.detail
    foreign_envelope = _msgpack.encode(msgspec.structs.replace(envelope("future"), version=future))
    error = exchange(raw_link, [foreign_envelope, _msgpack.encode(Echo(text="x"))])
    assert error.code == "version"


def test_actor_still_serves_after_malformed_input(raw_link):
    _, frames = ECHO_CODEC.encode(Echo(text="alive"), sender="fuzzer")
    exchange(raw_link, [b"\xff"])
    server, socket = raw_link
    socket.send_multipart(frames)
    reply = ECHO_CODEC.decode(socket.recv_multipart())
    assert reply.message == Echo(text="alive")
    assert '"event": "frame_rejected"' in server.log() or '"event":"frame_rejected"' in server.log()
