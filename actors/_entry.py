"""How an actor process starts: one ``actor_main`` call at the bottom of each actor module."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import structlog
import trio

from roboswe.config import ConfigError, RunConfig, load_config
from roboswe.logs import bind_context, configure_logging
from roboswe.protocol import Codec, Decoded
from roboswe.protocol.control import Error

from ._accounts import Accounts
from ._client import Client
from ._curve import CurveServerKeys
from ._endpoints import actor_endpoints
from ._server import Handler, Server

log = structlog.get_logger()

T = TypeVar("T")

LIFELINE_ENV = "ROBOSWE_LIFELINE_FD"
"""Env var naming the read end of a pipe whose write end only the supervisor holds."""


class Actor:
    """What an actor's ``main`` receives: its name, run dir, config, peers' endpoints, accounts."""

    def __init__(self, name: str, run_dir: Path, config: RunConfig, config_path: Path | None):
        self.name = name
        self.run_dir = run_dir
        self.config = config
        self.config_path = config_path
        self.endpoints = actor_endpoints(run_dir, config)
        self.endpoint = self.endpoints[name]
        self.accounts = Accounts(name)
        self.server: Server | None = None

    async def serve(
        self,
        codec: Codec[Any],
        handler: Handler,
        *,
        concurrent: bool = True,
        curve: CurveServerKeys | None = None,
        task_status=trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve this actor's endpoint until Shutdown arrives or the process is told to stop."""
        self.server = Server(
            self.name, self.endpoint, codec, handler, accounts=self.accounts, concurrent=concurrent, curve=curve
        )
        await self.server.serve(task_status=task_status)

    def client(self, peer: str, codec: Codec[Any], **options: Any) -> Client:
        """A link to another actor of the run, to use as ``async with actor.client(...) as c``."""
        options.setdefault("heartbeat_interval", self.config.transport.heartbeat_interval)
        options.setdefault("liveness", self.config.transport.heartbeat_liveness)
        return Client(self.name, self.endpoints[peer], codec, peer=peer, accounts=self.accounts, **options)


async def run_off_loop(work: Callable[..., T], *args: Any) -> T:
    """Run CPU-heavy or blocking ``work(*args)`` in a worker thread so the actor keeps answering.

    Physics steps, rendering, compression and blocking I/O go through here: the trio loop
    stays free to answer heartbeats and Statistics meanwhile. Cancelling the caller waits
    for ``work`` to finish (threads cannot be interrupted), so keep each call bounded.
    """
    return await trio.to_thread.run_sync(work, *args)


def refuse_unhandled(actor_name: str) -> Handler:
    """A handler for actors whose domain messages are not built yet: answers Error(code="unsupported")."""

    async def handler(decoded: Decoded[Any]) -> Error:
        kind = type(decoded.message).__name__
        return Error(code="unsupported", detail=f"{actor_name} does not handle {kind} messages (yet)")

    return handler


def actor_main(name: str, main: Callable[[Actor], Awaitable[None]], argv: list[str] | None = None) -> NoReturn:
    """Entry point of an actor process: parse args, configure logs, run ``main(actor)`` under trio.

    Arguments: ``--run-dir DIR [--config RUN.toml]``. Exits 0 after a clean stop (SIGTERM,
    SIGINT, Shutdown, or the supervisor's death), 1 if ``main`` raised, 2 on a bad config.
    """
    parser = argparse.ArgumentParser(prog=f"python -m roboswe.actors.{name}")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--name", default=name, help=f"this instance's name: {name}, or {name}.N for fleet worker N")
    args = parser.parse_args(argv)
    kind, dot, number = args.name.partition(".")
    if kind != name or (dot and not number.isdigit()):
        parser.error(f"--name {args.name!r}: expected {name} or {name}.N")
    name = args.name
    run_dir = args.run_dir.resolve()
    try:
        config = load_config(args.config)
    except ConfigError as e:
        print(f"roboswe {name}: {e}", file=sys.stderr)
        sys.exit(2)
    configure_logging(run_dir=run_dir, actor=name, level=config.logging.level, console=False, cache=True)
    bind_context(run=run_dir.name)
    actor = Actor(name, run_dir, config, args.config)
    try:
        trio.run(_run, actor, main)
    except BaseException:
        log.exception("actor_crashed")
        traceback.print_exc()  # also into DIR/actors/<name>.log, where the supervisor points people
        sys.exit(1)
    log.info("actor_stopped")
    sys.exit(0)


async def _run(actor: Actor, main: Callable[[Actor], Awaitable[None]]) -> None:
    log.info("actor_started", endpoint=actor.endpoint)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, actor, nursery.cancel_scope)
        lifeline = os.environ.get(LIFELINE_ENV)
        if lifeline:
            nursery.start_soon(_stop_when_supervisor_gone, int(lifeline), nursery.cancel_scope)
        await main(actor)
        nursery.cancel_scope.cancel()


async def _stop_on_signal(actor: Actor, scope: trio.CancelScope) -> None:
    # A serving actor stops its server, which drains what is queued (the recorder's records)
    # and returns, so main ends on its own; the deadline bounds that, and a second signal
    # stops at once.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            server = actor.server
            log.info("stop_signal", signal=signal.Signals(signum).name, drain=server is not None and not server.stopping)
            if server is None or server.stopping:
                scope.cancel()
                return
            server.stop()
            scope.deadline = min(scope.deadline, trio.current_time() + server.drain_seconds + 1.0)


async def _stop_when_supervisor_gone(fd: int, scope: trio.CancelScope) -> None:
    # The supervisor holds the only write end; EOF means it died, however it died,
    # so no actor outlives it (prctl PDEATHSIG would follow trio's spawning thread instead).
    await trio.lowlevel.wait_readable(fd)
    log.warning("supervisor_gone")
    scope.cancel()
