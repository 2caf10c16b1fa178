"""The simulator's robot endpoint as a plain unix stream, for a sandbox bridge on the same host.

Over ZeroMQ ipc a robot call wakes five threads after the physics (the simulator's loop, its
ZeroMQ I/O thread, the bridge's I/O thread, the bridge's loop, the sandboxed program); on a
small shared machine each wake-up of a core that idled through a 6 ms step costs tenths of a
millisecond (benchmarks/sandbox.py's accounting). Here the simulator answers each connection
on a thread of its own that blocks on the socket and runs the step itself, and the bridge's
trio loop reads the reply straight from the socket: two wake-ups after the physics.

Same messages as the ZeroMQ robot endpoint (``SIM_ROBOT_CODEC``: admin requests do not even
decode), same framing as the bridge socket (``bridge.wire``), in the simulator's socket
directory next to its ipc endpoints (the sandbox never sees it). A remote (tcp) simulator is
reached over ZeroMQ with CURVE as before.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import structlog
import trio
from roboswe.bridge import wire
from roboswe.bridge.door import SimLink, SimRefused
from roboswe.protocol import PROTOCOL_VERSION, Decoded, DecodeError, Message
from roboswe.protocol.control import Error
from roboswe.protocol.sim import SIM_ROBOT_CODEC

from ._client import Client
from ._endpoints import stream_path
from ._errors import PeerDead, ProtocolError, RemoteError

log = structlog.get_logger()

MAX_REQUEST = 4 << 20  # a StepMany of the allow-list's 1000 rows is well under this
MAX_REPLY = 256 << 20  # an Observe of every camera with depth
MAX_CONNECTIONS = 16  # one per open trial of the bridges on this host


Answer = Callable[[Decoded[Any]], "Message | tuple[Message, Sequence[bytes]]"]


class RobotStreamServer:
    """Accepts bridge connections on ``path``; each is served on its own thread by ``answer`` (blocking).

    ``after_reply`` runs on that thread once each reply is written: bookkeeping that would wake
    another thread (and hand it the GIL) belongs there, not between the physics and the reply.
    """

    def __init__(self, path: str, answer: Answer, *, name: str = "simulator", after_reply: Callable[[], None] | None = None):
        self.path = path
        self.name = name
        self._answer = answer
        self._after_reply = after_reply
        self._listener: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._guard = threading.Lock()

    def start(self) -> None:
        try:
            os.unlink(self.path)  # a stale socket from a killed simulator
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(MAX_CONNECTIONS)
        self._listener = listener
        threading.Thread(target=self._accept, name="sim-robot-accept", daemon=True).start()
        log.info("robot_stream_listening", path=self.path)

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        with self._guard:
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)  # the blocked reader sees EOF and its thread ends
                except OSError:
                    pass

    def _accept(self) -> None:
        while (listener := self._listener) is not None:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed
            with self._guard:
                if len(self._connections) >= MAX_CONNECTIONS:
                    log.warning("robot_stream_refused", reason=f"more than {MAX_CONNECTIONS} connections")
                    conn.close()
                    continue
                self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="sim-robot-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = wire.FrameReader(MAX_REQUEST, what="request", chunk=1 << 20)
        try:
            while True:
                frames = wire.read_message(conn.recv, reader)
                reply, correlation = self._reply_to(frames)
                message, blobs = reply if isinstance(reply, tuple) else (reply, ())
                _env, out = SIM_ROBOT_CODEC.encode(message, sender=self.name, correlation_id=correlation, blobs=blobs)
                conn.sendall(wire.encode(out))
                if self._after_reply is not None:
                    self._after_reply()
        except (EOFError, OSError):
            pass  # the bridge closed its trial, or the simulator is stopping
        except wire.FrameError as e:
            log.warning("robot_stream_garbage", error=str(e))
        finally:
            with self._guard:
                self._connections.discard(conn)
            conn.close()

    def _reply_to(self, frames: list[bytes]) -> tuple[Any, str | None]:
        try:
            decoded = SIM_ROBOT_CODEC.decode(frames)
        except DecodeError as e:
            return Error(code="decode", detail=e.reason), e.envelope.message_id if e.envelope else None
        env = decoded.envelope
        if env.version[0] != PROTOCOL_VERSION[0]:
            return Error(code="version", detail=f"{env.sender} speaks protocol {env.version}, the simulator {PROTOCOL_VERSION}"), env.message_id
        try:
            return self._answer(decoded), env.message_id
        except Exception as e:  # noqa: BLE001 - a handler bug is answered, never fatal to the simulator
            log.exception("robot_stream_handler_failed", kind=type(decoded.message).__name__)
            return Error(code="internal", detail=f"simulator failed handling {type(decoded.message).__name__}: {e}"), env.message_id


class RobotStreamLink:
    """The bridge's side: one request at a time over the stream (the door serves calls one at a time).

    ``request`` has the runtime Client's contract: the decoded reply, RemoteError for an Error reply,
    PeerDead when the simulator is gone (the next request connects again: a restarted simulator
    answers not_loaded, as over ZeroMQ). A request cut short by the caller's deadline closes the
    connection, so a late reply is never taken for the next one's.
    """

    def __init__(self, path: str, name: str = "sandbox_bridge"):
        self.path = path
        self.name = name
        self._stream: trio.SocketStream | None = None
        self._reader = wire.FrameReader(MAX_REPLY, what="reply", read_ahead=True)  # a reply usually in one read

    async def request(self, message: Message, blobs: Sequence[bytes] = ()) -> Decoded[Any]:
        env, frames = SIM_ROBOT_CODEC.encode(message, sender=self.name, blobs=blobs)
        try:
            if self._stream is None:
                self._stream = await trio.open_unix_socket(self.path)
                self._reader.clear()
            await self._stream.send_all(wire.encode(frames))
            reply = await wire.receive_message(self._stream.receive_some, self._reader)
        except (OSError, EOFError, trio.BrokenResourceError, trio.ClosedResourceError) as e:
            await self.aclose()
            raise PeerDead("simulator", self.path, 0.0) from e
        except BaseException:
            await self.aclose()
            raise
        try:
            decoded = SIM_ROBOT_CODEC.decode(reply)
        except DecodeError as e:
            raise ProtocolError(f"reply from the simulator does not decode: {e.reason}") from None
        if decoded.envelope.correlation_id != env.message_id:
            await self.aclose()
            raise ProtocolError("the simulator answered another request")
        if isinstance(decoded.message, Error):
            raise RemoteError(decoded.message)
        return decoded

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        self._reader.clear()
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()


@asynccontextmanager
async def robot_link(endpoint: str, *, name: str = "sandbox_bridge", heartbeat_interval: float = 1.0, liveness: int = 5,
                     curve: Any = None, transport: str = "auto") -> AsyncIterator[SimLink]:
    """The bridge door's way to the simulator's robot endpoint (``bridge.door.SimLink``): its unix stream
    when the simulator is on this host and serves one (fewer wake-ups per step), else the ZeroMQ
    endpoint (remote, CURVE). ``transport`` "zmq" always takes ZeroMQ."""
    path = stream_path(endpoint)
    if transport == "auto" and curve is None and path is not None and os.path.exists(path):
        link = RobotStreamLink(path, name)
        try:
            yield _refusing(link.request)
        finally:
            await link.aclose()
        return
    async with Client(name, endpoint, SIM_ROBOT_CODEC, peer="simulator", heartbeat_interval=heartbeat_interval,
                      liveness=liveness, curve=curve) as sim:
        yield _refusing(sim.request)


def _refusing(request: Callable[..., Any]) -> SimLink:
    """The runtime's request with the simulator's Error reply raised as the door's SimRefused, not RemoteError."""

    async def ask(message: Message, blobs: Sequence[bytes] = ()) -> Decoded[Any]:
        try:
            return await request(message, blobs)
        except RemoteError as e:
            raise SimRefused(e.error) from None

    return ask

