"""Transport benchmark: request/reply latency and one-way throughput between two actor processes.

Usage: ``.venv/bin/python benchmarks/transport.py [--quick]``. Starts a server process per
transport (ipc, tcp loopback) and measures from this process, with the real runtime
(Server/Client, codec, heartbeats on). Payloads: a small message, and a 256x256x3 uint8
image carried as one raw blob frame (the request carries it; the reply is small).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time

import trio

from roboswe.actors import Client, Server
from roboswe.logs import configure_logging
from roboswe.protocol import Codec, Message
from roboswe.protocol.control import Control, Ok

IMAGE = os.urandom(256 * 256 * 3)


class Ping(Message, frozen=True, kw_only=True):
    step: int
    note: str = "small"


class Push(Message, frozen=True, kw_only=True):
    step: int


class Count(Message, frozen=True, kw_only=True):
    pushes: int = 0


CODEC = Codec(Control | Ping | Push | Count)


async def serve(endpoint: str) -> None:
    pushes = 0

    async def handle(decoded):
        nonlocal pushes
        match decoded.message:
            case Ping():
                return Ok()
            case Push():
                pushes += 1
                return None
            case Count():
                return Count(pushes=pushes)

    server = Server("bench_server", endpoint, CODEC, handle)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        print("bound", server.endpoint, flush=True)


async def measure(endpoint: str, blob: bytes | None, rounds: int, pushes: int) -> dict[str, float]:
    blobs = [blob] if blob else []
    async with Client("bench_client", endpoint, CODEC) as client:
        for i in range(min(200, rounds)):  # warm up
            await client.request(Ping(step=i), blobs)
        samples = []
        for i in range(rounds):
            started = time.perf_counter()
            await client.request(Ping(step=i), blobs)
            samples.append(time.perf_counter() - started)
        samples.sort()
        before = (await client.request(Count())).message.pushes
        started = time.perf_counter()
        for i in range(pushes):
            await client.send(Push(step=i), blobs)
        while (await client.request(Count())).message.pushes < before + pushes:
            pass
        elapsed = time.perf_counter() - started
    return {
        "p50_ms": 1000 * samples[len(samples) // 2],
        "p99_ms": 1000 * samples[int(len(samples) * 0.99)],
        "msgs_per_s": pushes / elapsed,
        "mb_per_s": pushes * len(blob) / elapsed / 1e6 if blob else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", metavar="ENDPOINT", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    args = parser.parse_args()
    configure_logging(run_dir=None, console=False, level="warning")
    if args.serve:
        trio.run(serve, args.serve)
        return
    rounds, pushes = (300, 1000) if args.quick else (5000, 20000)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"{'transport':9} {'payload':16} {'p50 ms':>8} {'p99 ms':>8} {'msgs/s':>9} {'MB/s':>8}")
    with tempfile.TemporaryDirectory(prefix="roboswe-bench-") as tmp:
        for transport, endpoint in (("ipc", f"ipc://{tmp}/bench.sock"), ("tcp", "tcp://127.0.0.1:0")):
            server = subprocess.Popen([sys.executable, __file__, "--serve", endpoint], stdout=subprocess.PIPE, text=True)
            try:
                bound = server.stdout.readline().split()[1]
                for payload, blob in (("small", None), ("image 256x256x3", IMAGE)):
                    n = pushes if blob is None else pushes // 10
                    r = trio.run(measure, bound, blob, rounds if blob is None else rounds // 5, n)
                    print(f"{transport:9} {payload:16} {r['p50_ms']:8.3f} {r['p99_ms']:8.3f} {r['msgs_per_s']:9.0f} {r['mb_per_s']:8.1f}", flush=True)
            finally:
                server.kill()
                server.wait()


if __name__ == "__main__":
    main()
