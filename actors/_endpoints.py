"""Where each actor of a run listens (ipc sockets inside the run dir unless configured), and the endpoints
derived from one: the simulator's robot endpoint and, beside an ipc one, its unix stream. Every process
derives them here, so the coordinator, the bridge and the simulator agree."""

from __future__ import annotations

import hashlib
from pathlib import Path

from roboswe.config import ACTOR_NAMES, RunConfig, actor_kind

# Unix socket paths are limited to 107 bytes (sun_path); keep a margin.
_MAX_IPC_PATH = 100
ROBOT_SUFFIX = "-robot"
STREAM_SUFFIX = ".stream"


def socket_dir(run_dir: str | Path) -> Path:
    """Directory holding the run's ipc socket files (inside the run dir when the path is short enough)."""
    run_dir = Path(run_dir).resolve()
    inside = run_dir / "sock"
    longest = max(len(name) for name in ACTOR_NAMES) + len(".64") + len(".sock") + 1  # ".64": a worker instance
    if len(str(inside)) + longest <= _MAX_IPC_PATH:
        return inside
    digest = hashlib.sha256(str(run_dir).encode()).hexdigest()[:12]
    return Path("/tmp") / f"roboswe-{digest}"


class Endpoints(dict):
    """actor name -> endpoint; a fleet worker instance ("simulator.2") is added when first looked up."""

    def __init__(self, sockets: Path, configured: dict[str, str]):
        super().__init__()
        self._sockets = sockets
        self._configured = configured
        for name in ACTOR_NAMES:
            self[name] = configured.get(name, f"ipc://{sockets / name}.sock")

    def __missing__(self, name: str) -> str:
        try:
            actor_kind(name)
        except ValueError as e:
            raise KeyError(str(e)) from None
        endpoint = self[name] = self._configured.get(name, f"ipc://{self._sockets / name}.sock")
        return endpoint


def actor_endpoints(run_dir: str | Path, config: RunConfig) -> dict[str, str]:
    """actor name -> ZeroMQ endpoint, the same answer in every process of the run."""
    return Endpoints(socket_dir(run_dir), config.transport.endpoints)


def robot_endpoint(control_endpoint: str) -> str:
    """Where the robot endpoint listens, given the control endpoint (same rule on every host).

    ipc://DIR/simulator.sock -> ipc://DIR/simulator-robot.sock; tcp://HOST:PORT -> tcp://HOST:PORT+1
    (tcp port 0 stays 0: the OS picks one and the server reports it).
    """
    if control_endpoint.startswith("ipc://"):
        path = control_endpoint[6:]
        stem, dot, ext = path.rpartition(".")
        return f"ipc://{stem}{ROBOT_SUFFIX}.{ext}" if dot else f"ipc://{path}{ROBOT_SUFFIX}"
    if control_endpoint.startswith("tcp://"):
        host, _, port = control_endpoint[6:].rpartition(":")
        return f"tcp://{host}:{int(port) + 1 if int(port) else 0}"
    raise ValueError(f"simulator endpoint {control_endpoint!r}: expected ipc:// or tcp://")


def stream_path(robot_endpoint: str) -> str | None:
    """The stream socket beside an ipc robot endpoint (``ipc://DIR/x-robot.sock`` -> ``DIR/x-robot.stream``); None for tcp."""
    if not robot_endpoint.startswith("ipc://"):
        return None
    path = robot_endpoint[6:]
    stem, dot, _ext = path.rpartition(".")
    return (stem if dot else path) + STREAM_SUFFIX
