"""Node workspaces benchmark: what keeping a worker's workspace on its node costs per operation and checkpoint.

Usage: ``.venv/bin/python benchmarks/carry.py [--quick]``. Compares, on one machine, the two places a
workspace can be ([fleet] workspaces, docs/fleet.md):

- host: the coordinator's ``Workspace`` on a directory here, and the recorder's ``capture`` from the path;
- node: the same requests to a bridge serving ``NodeWorkspaces`` in another process, over tcp loopback
  with the real runtime (Server/Client, codec), and each checkpoint captured there, carried and stored with
  ``sandbox.carry.receive`` (every blob's sha256 checked and read back), then the receipt sent back.

Workspaces: "small" (4 files, 8 KB: a participant's scripts) and "large" (64 files, 32 MiB of random
bytes: a script's outputs). A checkpoint is timed twice: the first (every blob new) and after one small
file changed (what a checkpoint after a write usually is).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from roboswe.actors import Client, Server
from roboswe.logs import configure_logging
from roboswe.protocol.bridge import (
    BRIDGE_CODEC,
    CaptureWorkspace,
    FreshWorkspace,
    WorkspaceCarried,
    WorkspaceRead,
    WorkspaceWrite,
)
from roboswe.sandbox.carry import receive
from roboswe.sandbox.checkpoints import BlobStore, capture
from roboswe.sandbox.workspace import Workspace

SIZES = {"small": (4, 2048), "large": (64, 512 * 1024)}


async def serve(root: str) -> None:
    from roboswe.bridge.workspaces import NodeWorkspaces

    node = NodeWorkspaces(Path(root))

    async def handle(decoded):
        return await trio.to_thread.run_sync(node.answer, decoded.message, decoded.blobs)

    server = Server("bench_bridge", "tcp://127.0.0.1:0", BRIDGE_CODEC, handle)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        print("bound", server.endpoint, flush=True)


def fill(directory: Path, files: int, size: int) -> None:
    for i in range(files):
        (directory / f"f{i:03}.bin").write_bytes(os.urandom(size))


def host_figures(tmp: Path, kind: str, rounds: int) -> dict[str, float]:
    ws = tmp / f"host-{kind}"
    ws.mkdir()
    fill(ws, *SIZES[kind])
    files, store = Workspace(ws), BlobStore(tmp / f"host-blobs-{kind}")
    writes = []
    for i in range(rounds):
        t0 = time.perf_counter()
        files.write("lift.py", f"print({i})\n")
        writes.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    capture(ws, store, "t")
    first = time.perf_counter() - t0
    files.write("lift.py", "print('changed')\n")
    t0 = time.perf_counter()
    capture(ws, store, "t")
    again = time.perf_counter() - t0
    return {"write_ms": 1000 * statistics.median(writes), "first_ms": 1000 * first, "again_ms": 1000 * again}


async def node_figures(endpoint: str, tmp: Path, root: Path, kind: str, rounds: int) -> dict[str, float]:
    name = f"workspaces/{kind}"
    store = BlobStore(tmp / "head-blobs")  # one run, one head store: the node skips what it already acknowledged
    async with Client("bench_coordinator", endpoint, BRIDGE_CODEC) as bridge:
        await bridge.request(FreshWorkspace(workspace=name))
        fill(root / "w" / name, *SIZES[kind])  # what a script left there
        writes = []
        for i in range(rounds):
            t0 = time.perf_counter()
            await bridge.request(WorkspaceWrite(workspace=name, path="lift.py", content=f"print({i})\n"))
            writes.append(time.perf_counter() - t0)
        await bridge.request(WorkspaceRead(workspace=name, path="lift.py", max_bytes=1024))

        async def checkpoint() -> float:
            t0 = time.perf_counter()
            reply = await bridge.request(CaptureWorkspace(workspace=name, trial="t"))
            m = reply.message
            _, read_back = receive(m.manifest, m.manifest_sha256, m.blobs, reply.blobs[0] if reply.blobs else b"", store, "t")
            await bridge.request(WorkspaceCarried(workspace=name, sha256=read_back))
            return time.perf_counter() - t0

        first = await checkpoint()
        await bridge.request(WorkspaceWrite(workspace=name, path="lift.py", content="print('changed')\n"))
        again = await checkpoint()
    return {"write_ms": 1000 * statistics.median(writes), "first_ms": 1000 * first, "again_ms": 1000 * again}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", metavar="ROOT", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    args = parser.parse_args()
    configure_logging(run_dir=None, console=False, level="warning")
    if args.serve:
        trio.run(serve, args.serve)
        return
    rounds = 50 if args.quick else 500
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}")
    print(f"{'where':5} {'workspace':9} {'write ms':>9} {'1st ckpt ms':>12} {'next ckpt ms':>13}")
    with tempfile.TemporaryDirectory(prefix="roboswe-bench-") as tmp_name:
        tmp, root = Path(tmp_name), Path(tmp_name) / "node"
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(root)], stdout=subprocess.PIPE, text=True)
        try:
            endpoint = server.stdout.readline().split()[1]
            for kind in SIZES:
                for where, figures in (("host", host_figures(tmp, kind, rounds)),
                                       ("node", trio.run(node_figures, endpoint, tmp, root, kind, rounds))):
                    print(f"{where:5} {kind:9} {figures['write_ms']:9.3f} {figures['first_ms']:12.1f} "
                          f"{figures['again_ms']:13.1f}", flush=True)
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
