"""Where each actor of a run listens: ipc sockets inside the run dir unless configured."""

from __future__ import annotations

import hashlib
from pathlib import Path

from roboswe.config import ACTOR_NAMES, RunConfig

# Unix socket paths are limited to 107 bytes (sun_path); keep a margin.
_MAX_IPC_PATH = 100


def socket_dir(run_dir: str | Path) -> Path:
    """Directory holding the run's ipc socket files (inside the run dir when the path is short enough)."""
    run_dir = Path(run_dir).resolve()
    inside = run_dir / "sock"
    longest = max(len(name) for name in ACTOR_NAMES) + len(".sock") + 1
    if len(str(inside)) + longest <= _MAX_IPC_PATH:
        return inside
    digest = hashlib.sha256(str(run_dir).encode()).hexdigest()[:12]
    return Path("/tmp") / f"roboswe-{digest}"


def actor_endpoints(run_dir: str | Path, config: RunConfig) -> dict[str, str]:
    """actor name -> ZeroMQ endpoint, the same answer in every process of the run."""
    sockets = socket_dir(run_dir)
    return {
        name: config.transport.endpoints.get(name, f"ipc://{sockets / name}.sock")
        for name in ACTOR_NAMES
    }
