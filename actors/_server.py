"""The serving side of an actor: a ROUTER socket answering requests from many clients."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import msgspec
import structlog
import trio
import zmq

from roboswe.protocol import PROTOCOL_VERSION, Codec, Decoded, DecodeError, Message
from roboswe.protocol.control import (
    Error,
    Heartbeat,
    Hello,
    Ok,
    Ready,
    Shutdown,
    Statistics,
    StatisticsRequest,
)

from ._accounts import Accounts
from ._curve import CurveServerKeys
from ._socket import AsyncSocket

log = structlog.get_logger()

_CONTROL = (Hello, Heartbeat, StatisticsRequest, Shutdown)

DRAIN_SECONDS = 8.0
"""How long a stopping server lets queued and running handlers finish (under the supervisor's 10 s stop grace)."""

Reply: TypeAlias = "Message | tuple[Message, Sequence[bytes | memoryview]] | None"
Handler: TypeAlias = Callable[[Decoded[Any]], Awaitable[Any]]


class Server:
    """Serves one endpoint: control messages answered here, everything else goes to ``handler``.

    ``handler(decoded)`` returns a reply Message, ``(Message, blobs)``, or None (no reply).
    With ``concurrent=True`` handlers for different requests run at the same time; with
    False they run one at a time in arrival order (for actors whose state must change in
    order, such as a simulator). Control messages are always answered at once.

    Stopping (``stop()``, a Shutdown message, or the actor's SIGTERM) ends reading, then
    drains: messages already in the socket are dispatched, the in-order queue is handled to
    its end and running handlers finish, all within ``drain_seconds``; only then does
    ``serve`` return. So records queued at the recorder when it is told to stop are kept.
    """

    def __init__(
        self,
        name: str,
        endpoint: str,
        codec: Codec[Any],
        handler: Handler,
        *,
        curve: CurveServerKeys | None = None,
        accounts: Accounts | None = None,
        concurrent: bool = True,
        context: zmq.Context | None = None,
        drain_seconds: float = DRAIN_SECONDS,
        stops_on_shutdown: bool = True,
    ):
        self.name = name
        self.endpoint = endpoint
        self.codec = codec
        self.accounts = accounts or Accounts(name)
        self._handler = handler
        self._curve = curve
        self._concurrent = concurrent
        self._context = context or zmq.Context.instance()
        self._socket: AsyncSocket | None = None
        self._nursery: trio.Nursery | None = None
        self._in_order: trio.MemorySendChannel[tuple[bytes, Decoded[Any]]] | None = None
        self._reading: trio.CancelScope | None = None
        self.drain_seconds = drain_seconds
        self.shutdown_requested = trio.Event()  # a Shutdown message arrived
        # False: a Shutdown is refused and the endpoint keeps serving (an endpoint whose peers may not
        # stop the actor; closing and re-binding it would race libzmq over the ipc file and lose messages).
        self.stops_on_shutdown = stops_on_shutdown
        self.stopping = False

    def statistics(self) -> Statistics:
        """Frozen snapshot of this actor's timing accounts."""
        return self.accounts.statistics()

    def stop(self) -> None:
        """Stop reading new messages and drain (see the class docs); ``serve`` returns when drained."""
        if not self.stopping:
            self.stopping = True
            log.info("server_stopping", endpoint=self.endpoint)
        if self._reading is not None:
            self._reading.cancel()

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Bind and serve until stopped (then drain) or cancelled (then drop what is queued)."""
        raw = self._context.socket(zmq.ROUTER)
        raw.linger = 100
        if self._curve is not None:
            self._curve.apply(raw, self.name)
        if self.endpoint.startswith("ipc://"):
            Path(self.endpoint[6:]).parent.mkdir(parents=True, exist_ok=True)
        try:
            raw.bind(self.endpoint)
        except zmq.ZMQError as e:
            raw.close(linger=0)
            raise OSError(f"{self.name}: cannot bind {self.endpoint}: {e}") from None
        # tcp://host:0 picks a free port: report the real one.
        self.endpoint = raw.getsockopt_string(zmq.LAST_ENDPOINT)
        self._socket = AsyncSocket(raw)
        log.info("server_listening", endpoint=self.endpoint)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if not self._concurrent:
                    send, receive = trio.open_memory_channel[tuple[bytes, Decoded[Any]]](1024)
                    self._in_order = send
                    nursery.start_soon(self._handle_in_order, receive)
                task_status.started(self)
                unsent = await self._read_until_stopped()
                await self._drain(unsent)
                # Handlers still running (and the in-order queue) get drain_seconds, then are cancelled.
                nursery.cancel_scope.deadline = trio.current_time() + self.drain_seconds
            if nursery.cancel_scope.cancelled_caught:
                log.warning("server_drain_cut", endpoint=self.endpoint, seconds=self.drain_seconds)
        finally:
            self._socket.close()
            if self.endpoint.startswith("ipc://"):
                try:
                    os.unlink(self.endpoint[6:])
                except FileNotFoundError:
                    pass
            log.info("server_closed", endpoint=self.endpoint)

    async def _read_until_stopped(self) -> tuple[bytes, Decoded[Any]] | None:
        """Receive and dispatch until stopped; returns a message read but not yet queued in order, if any."""
        assert self._socket is not None
        unsent = None
        with trio.CancelScope() as reading:
            self._reading = reading
            if self.stopping:
                reading.cancel()
            while True:
                unsent = self._dispatch(await self._socket.receive())
                if unsent is not None:
                    # Backpressure, never drops: with the queue full, reading pauses until
                    # the handler catches up (a burst of the recorder's fire-and-forget
                    # records must not be lost).
                    await self._in_order.send(unsent)
                    unsent = None
        self._reading = None
        return unsent

    async def _drain(self, unsent: tuple[bytes, Decoded[Any]] | None) -> None:
        """Dispatch what is already in the socket, then close the in-order queue (its handler finishes it)."""
        assert self._socket is not None
        if unsent is not None:
            await self._in_order.send(unsent)
        drained = 0
        while (frames := self._socket.receive_nowait()) is not None:
            drained += 1
            in_order = self._dispatch(frames)
            if in_order is not None:
                await self._in_order.send(in_order)
        if self._in_order is not None:
            await self._in_order.aclose()
        log.info("server_draining", endpoint=self.endpoint, read_after_stop=drained)

    def _dispatch(self, frames: list[bytes]) -> tuple[bytes, Decoded[Any]] | None:
        """Answer what can be answered at once; returns a request to queue in order, if any."""
        identity, body = frames[0], frames[1:]
        try:
            decoded = self.codec.decode(body)
        except DecodeError as e:
            self.accounts.count_error()
            log.warning("frame_rejected", reason=e.reason, frames=len(body))
            self._reply(identity, Error(code="decode", detail=e.reason), e.envelope.message_id if e.envelope else None)
            return None
        env = decoded.envelope
        if env.version[0] != PROTOCOL_VERSION[0]:
            self.accounts.count_error()
            log.warning("peer_refused", peer=env.sender, peer_version=list(env.version))
            self._reply(identity, _version_error(self.name, env.sender, env.version), env.message_id)
            return None
        message = decoded.message
        if isinstance(message, _CONTROL):
            started = self.accounts.begin_handling()
            self._answer_control(identity, decoded)
            self.accounts.end_handling(type(message).__name__, started)
        elif self._in_order is not None:
            return identity, decoded
        else:
            assert self._nursery is not None
            self._nursery.start_soon(self._handle, identity, decoded)
        return None

    def _answer_control(self, identity: bytes, decoded: Decoded[Any]) -> None:
        env, message = decoded.envelope, decoded.message
        match message:
            case Hello(version=version, actor=peer):
                if version[0] != PROTOCOL_VERSION[0]:
                    self.accounts.count_error()
                    log.warning("peer_refused", peer=peer, peer_version=list(version))
                    self._reply(identity, _version_error(self.name, peer, version), env.message_id)
                else:
                    log.info("peer_connected", peer=peer, peer_pid=message.pid)
                    self._reply(identity, Ready(version=PROTOCOL_VERSION, actor=self.name, pid=os.getpid()), env.message_id)
            case Heartbeat():
                self._reply(identity, Heartbeat(pid=os.getpid()), env.message_id)
            case StatisticsRequest():
                self._reply(identity, self.statistics(), env.message_id)
            case Shutdown(reason=reason) if not self.stops_on_shutdown:
                log.warning("shutdown_refused", by=env.sender, reason=reason)
                detail = f"{env.sender} may not stop {self.name}: Shutdown is not served on this endpoint"
                self._reply(identity, Error(code="refused", detail=detail), env.message_id)
            case Shutdown(reason=reason):
                log.info("shutdown_requested", by=env.sender, reason=reason)
                self._reply(identity, Ok(), env.message_id)  # the socket's linger lets it leave after close
                self.shutdown_requested.set()
                self.stop()

    async def _handle_in_order(self, receive: trio.MemoryReceiveChannel[tuple[bytes, Decoded[Any]]]) -> None:
        async for identity, decoded in receive:
            await self._handle(identity, decoded)

    async def _handle(self, identity: bytes, decoded: Decoded[Any]) -> None:
        kind = type(decoded.message).__name__
        started = self.accounts.begin_handling()
        try:
            reply = await self._handler(decoded)
        except Exception as e:  # a handler bug is answered, never fatal to the actor
            self.accounts.count_error()
            log.exception("handler_failed", kind=kind, sender=decoded.envelope.sender)
            reply = Error(code="internal", detail=f"{self.name} failed handling {kind}: {type(e).__name__}: {e}")
        finally:
            self.accounts.end_handling(kind, started)
        if reply is None:
            return
        try:
            message, blobs = reply if isinstance(reply, tuple) else (reply, ())
            if not isinstance(message, Message):
                raise TypeError(f"handler returned {type(message).__name__}, expected a Message")
            self._reply(identity, message, decoded.envelope.message_id, blobs)
        except (TypeError, ValueError, msgspec.EncodeError) as e:  # a malformed reply is a handler bug, not fatal
            self.accounts.count_error()
            log.error("reply_unencodable", kind=kind, error=str(e))
            detail = f"{self.name} produced an unencodable reply to {kind}: {e}"
            self._reply(identity, Error(code="internal", detail=detail), decoded.envelope.message_id)

    def _reply(self, identity: bytes, message: Message, correlation_id: str | None, blobs: Sequence[bytes | memoryview] = ()) -> None:
        if self._socket is None:
            return
        _, frames = self.codec.encode(message, sender=self.name, correlation_id=correlation_id, blobs=blobs)
        # ROUTER never blocks: at the high-water mark or for a vanished peer it drops, which is
        # what a reply to a gone client deserves.
        self._socket.send_nowait([identity, *frames])


def _version_error(name: str, peer: str, version: tuple[int, int] | list[int]) -> Error:
    ours = ".".join(map(str, PROTOCOL_VERSION))
    theirs = ".".join(map(str, version))
    return Error(
        code="version",
        detail=f"{peer} speaks protocol {theirs} but {name} speaks {ours}; major versions must match, upgrade the older side",
        data={"expected_major": PROTOCOL_VERSION[0], "received_major": int(version[0])},
    )
