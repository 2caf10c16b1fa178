"""The calling side of an actor link: a DEALER socket with request/reply and heartbeats."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import structlog
import trio
import zmq
from roboswe.protocol import PROTOCOL_VERSION, Codec, Decoded, DecodeError, Message
from roboswe.protocol.control import Error, Heartbeat, Hello, Ready

from ._accounts import Accounts
from ._curve import CurveClientKeys
from ._errors import PeerDead, ProtocolError, RemoteError
from ._socket import AsyncSocket

log = structlog.get_logger()


class _Pending:
    __slots__ = ("done", "failure", "reply")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: Decoded[Any] | None = None
        self.failure: Exception | None = None


class Client:
    """One link to a peer actor; use as ``async with Client(...) as client:``.

    Entering connects the socket, starts heartbeats and (unless ``handshake=False``)
    exchanges Hello/Ready. Deadlines are the caller's trio cancel scopes. A peer silent
    for ``liveness`` heartbeat intervals is declared dead: pending and new requests raise
    ``PeerDead`` until it answers again (e.g. after the supervisor restarts it).
    Liveness runs on trio's clock (``trio.current_time()``), so tests can drive it with
    the autojump clock. ``aclose()`` may be called any number of times, even unentered.
    """

    def __init__(
        self,
        name: str,
        endpoint: str,
        codec: Codec[Any],
        *,
        peer: str | None = None,
        curve: CurveClientKeys | None = None,
        accounts: Accounts | None = None,
        heartbeat_interval: float = 1.0,
        liveness: int = 3,
        handshake: bool = True,
        context: zmq.Context | None = None,
    ):
        self.name = name
        self.endpoint = endpoint
        self.codec = codec
        self.peer = peer or endpoint
        self.accounts = accounts or Accounts(name)
        self.heartbeat_interval = heartbeat_interval
        self.liveness = liveness
        self.peer_pid: int | None = None
        self._curve = curve
        self._handshake = handshake
        self._context = context or zmq.Context.instance()
        self._socket: AsyncSocket | None = None
        self._pending: dict[str, _Pending] = {}
        self._last_seen = 0.0  # trio.current_time(); set on entering
        self._dead = False
        self._dead_event = trio.Event()
        self._alive_event = trio.Event()
        self._alive_event.set()
        self._stack: contextlib.AsyncExitStack | None = None

    @property
    def last_seen(self) -> float:
        """trio.current_time() of the last message received from the peer."""
        return self._last_seen

    @property
    def peer_alive(self) -> bool:
        return not self._dead

    async def __aenter__(self) -> Client:
        stack = contextlib.AsyncExitStack()
        nursery: trio.Nursery | None = None
        # The link's own loops are shielded from the caller's cancellation and end only when the
        # link closes: a request the caller shields while it is being cancelled (closing a
        # sandbox, committing a trial's end) still gets its reply, or PeerDead, not silence.
        loops = trio.CancelScope(shield=True)
        try:
            raw = self._context.socket(zmq.DEALER)
            raw.linger = 0
            if self._curve is not None:
                self._curve.apply(raw)
            raw.connect(self.endpoint)
            self._socket = AsyncSocket(raw)
            stack.callback(self._socket.close, 0)
            self._last_seen = trio.current_time()
            nursery = await stack.enter_async_context(trio.open_nursery())
            nursery.start_soon(self._run_loops, loops)
            stack.callback(nursery.cancel_scope.cancel)
            stack.callback(loops.cancel)
            if self._handshake:
                await self.connect()
        except BaseException:
            # Close without handing the error to the nursery, so callers see PeerDead etc.
            # itself rather than wrapped in an ExceptionGroup.
            loops.cancel()
            if nursery is not None:
                nursery.cancel_scope.cancel()
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> bool | None:
        await self.aclose()  # the body's own exception propagates unwrapped
        return None

    async def aclose(self) -> None:
        """Close the link; pending requests fail with ProtocolError. Closing again, or unentered, does nothing."""
        stack, self._stack = self._stack, None
        if stack is None:
            return
        self._fail_pending(lambda: ProtocolError(f"link to {self.peer} closed"))
        await stack.aclose()

    async def connect(self) -> Ready:
        """Exchange Hello/Ready; raises RemoteError (code "version") if the peer refuses us."""
        hello = Hello(version=PROTOCOL_VERSION, actor=self.name, pid=os.getpid())
        while True:
            sent = trio.current_time()
            with trio.move_on_after(self.heartbeat_interval * self.liveness):
                decoded = await self._request(hello, (), probe=True)
                break
            if self._dead or self._last_seen <= sent:  # silent for the whole window: not there (yet)
                raise PeerDead(self.peer, self.endpoint, trio.current_time() - self._last_seen)
            # The peer answers heartbeats but not this Hello: it went out on a connection that dropped (ZeroMQ
            # keeps nothing written to a closed socket). Hello is answered at once and idempotent: say it again.
            log.warning("hello_unanswered", peer=self.peer, endpoint=self.endpoint)
        ready = decoded.message
        if not isinstance(ready, Ready):
            raise ProtocolError(f"{self.peer} answered Hello with {type(ready).__name__}, expected Ready")
        if ready.version[0] != PROTOCOL_VERSION[0]:
            raise RemoteError(
                Error(code="version", detail=f"{ready.actor} speaks protocol {ready.version}, we speak {PROTOCOL_VERSION}")
            )
        self.peer_pid = ready.pid
        if self.peer == self.endpoint:
            self.peer = ready.actor
        return ready

    async def wait_connected(self) -> Ready:
        """Exchange Hello/Ready with a peer that may still be starting; the caller's cancel scope bounds the wait.

        A Hello sent before the peer binds waits in the socket's queue; if the liveness window
        passes first, this waits until the peer answers anything, then says Hello again.
        Raises RemoteError (code "version") if the peer refuses us.
        """
        while True:
            try:
                return await self.connect()
            except PeerDead:
                await self.wait_peer_alive()

    async def request(self, message: Message, blobs: Sequence[bytes | memoryview] = ()) -> Decoded[Any]:
        """Send a request and wait for its reply.

        Raises PeerDead if the peer is or becomes dead, RemoteError if it answers with Error,
        ProtocolError if its reply does not decode; the caller's cancel scope is the deadline.
        Blobs above 64 KiB are sent zero-copy: do not mutate their buffers afterwards.
        """
        return await self._request(message, blobs, probe=False)

    async def send(self, message: Message, blobs: Sequence[bytes | memoryview] = ()) -> None:
        """Fire-and-forget: queue a message that expects no reply."""
        assert self._socket is not None, "use `async with Client(...)` first"
        _, frames = self.codec.encode(message, sender=self.name, blobs=blobs)
        await self._socket.send(frames)

    async def wait_peer_dead(self) -> None:
        """Return once the peer has been declared dead."""
        await self._dead_event.wait()

    async def wait_peer_alive(self) -> None:
        """Return once the peer is alive: at once unless it has been declared dead and not heard from since."""
        while self._dead:
            await self._alive_event.wait()

    async def _request(self, message: Message, blobs: Sequence[bytes | memoryview], *, probe: bool) -> Decoded[Any]:
        assert self._socket is not None, "use `async with Client(...)` first"
        if self._dead and not probe:
            raise PeerDead(self.peer, self.endpoint, trio.current_time() - self._last_seen)
        env, frames = self.codec.encode(message, sender=self.name, blobs=blobs)
        pending = self._pending[env.message_id] = _Pending()
        started = time.monotonic()
        try:
            await self._socket.send(frames)
            await pending.done.wait()
        finally:
            del self._pending[env.message_id]
            self.accounts.add_waiting(self.peer, time.monotonic() - started)
        if pending.failure is not None:
            raise pending.failure
        assert pending.reply is not None
        if isinstance(pending.reply.message, Error):
            raise RemoteError(pending.reply.message)
        return pending.reply

    async def _run_loops(self, loops: trio.CancelScope) -> None:
        with loops:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._receive_loop)
                nursery.start_soon(self._heartbeat_loop)

    async def _receive_loop(self) -> None:
        assert self._socket is not None
        while True:
            frames = await self._socket.receive()
            self._last_seen = trio.current_time()
            if self._dead:
                self._dead = False
                self._dead_event = trio.Event()
                self._alive_event.set()
                log.info("peer_alive", peer=self.peer, endpoint=self.endpoint)
            try:
                decoded = self.codec.decode(frames)
            except DecodeError as e:
                log.warning("reply_rejected", peer=self.peer, reason=e.reason)
                waiting = self._pending.get(e.envelope.correlation_id or "") if e.envelope else None
                if waiting is not None:
                    waiting.failure = ProtocolError(f"reply from {self.peer} does not decode: {e.reason}")
                    waiting.done.set()
                continue
            if isinstance(decoded.message, Heartbeat) and decoded.message.pid is not None:
                self._note_peer_pid(decoded.message.pid)
            waiting = self._pending.get(decoded.envelope.correlation_id or "")
            if waiting is not None:
                waiting.reply = decoded
                waiting.done.set()
            elif not isinstance(decoded.message, Heartbeat):
                log.debug("unmatched_reply", peer=self.peer, kind=type(decoded.message).__name__)

    async def _heartbeat_loop(self) -> None:
        assert self._socket is not None
        window = self.heartbeat_interval * self.liveness
        next_beat = trio.current_time()
        while True:
            now = trio.current_time()
            if now >= next_beat:
                _, frames = self.codec.encode(Heartbeat(), sender=self.name)
                self._socket.send_nowait(frames)  # skipped while the peer's queue is full
                next_beat = now + self.heartbeat_interval
            silent = now - self._last_seen
            if not self._dead and silent > window:
                self._declare_dead(silent)
            wake = next_beat if self._dead else min(next_beat, self._last_seen + window + 0.001)
            await trio.sleep_until(wake)

    def _note_peer_pid(self, pid: int) -> None:
        # A new pid at the same endpoint is a restarted peer (e.g. by the supervisor, faster than
        # the liveness window): what we sent the old process will never be answered.
        if self.peer_pid is not None and pid != self.peer_pid:
            log.warning("peer_restarted", peer=self.peer, endpoint=self.endpoint, old_pid=self.peer_pid, pid=pid,
                        failed_requests=len(self._pending))
            self._fail_pending(lambda: PeerDead(self.peer, self.endpoint, 0.0, restarted=True))
        self.peer_pid = pid

    def _declare_dead(self, silent: float) -> None:
        self._dead = True
        self._alive_event = trio.Event()
        log.warning("peer_dead", peer=self.peer, endpoint=self.endpoint, silent_for=round(silent, 3), failed_requests=len(self._pending))
        self._fail_pending(lambda: PeerDead(self.peer, self.endpoint, silent))
        self._dead_event.set()

    def _fail_pending(self, failure: Callable[[], Exception]) -> None:
        # A fresh exception per waiter: one instance raised in several tasks would tangle tracebacks.
        for waiting in self._pending.values():
            if not waiting.done.is_set():
                waiting.failure = failure()
                waiting.done.set()
