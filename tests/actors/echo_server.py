"""A tiny actor process for transport tests: echoes, naps, hogs the loop, crunches off it.

Run: ``python tests/actors/echo_server.py ENDPOINT [--curve-keys SERVER_PUB SERVER_SEC CLIENT_PUB]``.
Prints ``bound <endpoint>`` on stdout once serving.
"""

from __future__ import annotations

import sys
import time

import trio

from roboswe.actors import CurveServerKeys, Server, run_off_loop
from roboswe.logs import configure_logging
from roboswe.protocol import Codec, Message
from roboswe.protocol.control import Control, Ok


class Echo(Message, frozen=True, kw_only=True):
    text: str


class Nap(Message, frozen=True, kw_only=True):
    seconds: float


class Hog(Message, frozen=True, kw_only=True):
    """Block the event loop (a bug an actor must not have): heartbeats stop."""

    seconds: float


class Crunch(Message, frozen=True, kw_only=True):
    """The same CPU-bound wait, done the right way (run_off_loop)."""

    seconds: float


ECHO_CODEC = Codec(Control | Echo | Nap | Hog | Crunch)


async def handle(decoded):
    match decoded.message:
        case Echo():
            return decoded.message, list(decoded.blobs)
        case Nap(seconds=s):
            await trio.sleep(s)
            return Ok()
        case Hog(seconds=s):
            time.sleep(s)
            return Ok()
        case Crunch(seconds=s):
            await run_off_loop(time.sleep, s)
            return Ok()


async def main(endpoint: str, curve: CurveServerKeys | None) -> None:
    server = Server("echo", endpoint, ECHO_CODEC, handle, curve=curve)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        print("bound", server.endpoint, flush=True)


if __name__ == "__main__":
    configure_logging(run_dir=None, actor="echo", console=False)
    curve = None
    if "--curve-keys" in sys.argv:
        i = sys.argv.index("--curve-keys")
        pub, sec, client = (k.encode() for k in sys.argv[i + 1 : i + 4])
        curve = CurveServerKeys(public_key=pub, secret_key=sec, allowed_clients=[client])
    trio.run(main, sys.argv[1], curve)
