"""One process of a Ray-placed worker: the simulator or the sandbox bridge, serving tcp with CURVE.

``python -m roboswe.fleet.node_process simulator|sandbox_bridge --dir DIR --bind tcp://HOST:0
--keys KEYS`` serves until told to stop (SIGTERM/SIGINT) or until its parent, the worker's
Ray actor process, is gone (the lifeline pipe closes): a worker whose node lost its raylet
leaves no simulator or sandbox behind. Once bound it writes the endpoint it got to
``DIR/<name>.endpoint`` for the parent to read.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog
import trio

log = structlog.get_logger()

LIFELINE_ENV = "ROBOSWE_LIFELINE_FD"  # the same contract as the supervisor's actors (actors/_entry.py)


def endpoint_file(directory: Path, name: str) -> Path:
    return directory / f"{name}.endpoint"


def _announce(directory: Path, name: str, endpoint: str) -> None:
    path = endpoint_file(directory, name)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(endpoint)
    tmp.replace(path)


async def _until_gone(work: Callable[[], Awaitable[None]], directory: Path) -> None:
    """Run ``work`` until it returns, a stop signal arrives or the parent's lifeline closes.

    With its host gone (killed with its node's raylet) nobody else removes the worker's directory.
    """
    orphaned: list[bool] = []
    async with trio.open_nursery() as nursery:

        async def signals() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                async for signum in received:
                    log.info("stop_signal", signal=signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()

        async def lifeline(fd: int) -> None:
            await trio.lowlevel.wait_readable(fd)  # EOF: the worker's Ray actor process is gone
            log.warning("worker_host_gone")
            orphaned.append(True)
            nursery.cancel_scope.cancel()

        nursery.start_soon(signals)
        if os.environ.get(LIFELINE_ENV):
            nursery.start_soon(lifeline, int(os.environ[LIFELINE_ENV]))
        await work()
        nursery.cancel_scope.cancel()
    if orphaned:
        shutil.rmtree(directory, ignore_errors=True)


async def _simulator(args: argparse.Namespace, curve) -> None:
    from roboswe.actors.simulator import serve_simulator

    async def work() -> None:
        async with trio.open_nursery() as nursery:
            control, _robot = await nursery.start(
                lambda task_status: serve_simulator(args.name, args.bind, args.robot, curve=curve, task_status=task_status))
            _announce(args.dir, args.name, control)

    await _until_gone(work, args.dir)


async def _bridge(args: argparse.Namespace, curve) -> None:
    from roboswe.actors import Actor, Server
    from roboswe.actors.sandbox_bridge import main as bridge_main
    from roboswe.config import RunConfig, TransportConfig
    from roboswe.sandbox.volume import WORKSPACE_MB

    class NodeBridge(Actor):
        """The bridge actor with its endpoint served under CURVE, reporting the port it bound."""

        async def serve(self, codec, handler, *, concurrent=True, curve=None, task_status=trio.TASK_STATUS_IGNORED):
            self.server = Server(self.name, self.endpoint, codec, handler, accounts=self.accounts,
                                 concurrent=concurrent, curve=server_curve)
            async with trio.open_nursery() as nursery:
                await nursery.start(self.server.serve)
                _announce(args.dir, args.name, self.server.endpoint)
                task_status.started(self.server)

    server_curve = curve
    workspace_mb = None if args.no_workspace_volume else WORKSPACE_MB
    transport = TransportConfig(endpoints={"sandbox_bridge": args.bind}, heartbeat_interval=args.heartbeat_interval,
                                heartbeat_liveness=args.heartbeat_liveness)
    actor = NodeBridge("sandbox_bridge", args.dir, RunConfig(transport=transport), None)
    await _until_gone(lambda: bridge_main(actor, workspace_mb=workspace_mb, workspace_root=args.workspace_root), args.dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m roboswe.fleet.node_process")
    parser.add_argument("kind", choices=["simulator", "sandbox_bridge"])
    parser.add_argument("--dir", type=Path, required=True, help="the worker's private directory on this node")
    parser.add_argument("--bind", required=True, help="tcp://HOST:0 (the port the OS picks is written to DIR)")
    parser.add_argument("--robot", default=None, help="simulator only: the robot endpoint (ipc:// inside DIR)")
    parser.add_argument("--keys", type=Path, required=True, help="CURVE server keys admitting the coordinator")
    parser.add_argument("--heartbeat-interval", type=float, default=1.0)
    parser.add_argument("--heartbeat-liveness", type=int, default=5)
    parser.add_argument("--no-workspace-volume", action="store_true",
                        help="sandbox_bridge only: never mount a sized workspace (the coordinator is on another host)")
    parser.add_argument("--workspace-root", type=Path, default=None,
                        help="sandbox_bridge only: keep the workspaces here, on this node ([fleet] workspaces = \"node\")")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    args.name = args.kind
    os.environ.setdefault("MUJOCO_GL", "egl")
    from roboswe.actors import server_keys
    from roboswe.logs import configure_logging

    configure_logging(run_dir=args.dir, actor=args.kind, level=args.log_level, console=False, cache=True)
    curve = server_keys(args.keys)
    run = _simulator if args.kind == "simulator" else _bridge
    try:
        trio.run(run, args, curve)
    except BaseException:
        log.exception("node_process_crashed", kind=args.kind)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
