"""The actor runtime: typed messages over ZeroMQ, driven by trio, one OS process per actor.

Writing an actor
----------------
An actor is a module ``actors/<name>.py`` (``<name>`` is one of ``roboswe.config.ACTOR_NAMES``)
whose last lines are::

    async def main(actor: Actor) -> None:
        simulator = Simulator(actor.config.sim)         # domain object from sim/, no ZeroMQ inside
        async def handle(decoded: Decoded[SimMessage]):
            match decoded.message:
                case Step(action=a):
                    result = await run_off_loop(simulator.step, a)   # CPU work off the loop
                    return StepResult(...)                            # or (message, [blobs]) or None
        await actor.serve(SIM_CODEC, handle, concurrent=False)

    if __name__ == "__main__":
        actor_main("simulator", main)

- The supervisor runs it as ``python -m roboswe.actors.<name> --run-dir DIR [--config RUN.toml]``
  with ``PYTHONHASHSEED=0``, in its own process group; stdout/stderr go to
  ``DIR/actors/<name>.log``. ``actor_main`` configures structlog (JSON lines to
  ``DIR/events.jsonl``, ``actor`` and ``run`` bound), stops ``main`` on SIGTERM/SIGINT or
  when the supervisor dies, and exits 0 after a clean stop.
- ``actor.serve(codec, handler)`` binds the actor's endpoint (ipc ``DIR/sock/<name>.sock`` by
  default; ``[transport.endpoints]`` in the run config overrides, e.g. a tcp simulator) and
  returns on Shutdown or SIGTERM after draining: messages already received are handled
  (in order, for ``concurrent=False``) and answered, within ``Server.drain_seconds``. Hello/Ready, Heartbeat, StatisticsRequest and Shutdown are answered by
  the runtime; undecodable frames get ``Error(code="decode")``; a handler exception gets
  ``Error(code="internal")`` and a log event. The handler receives ``Decoded`` (envelope,
  message, blobs) for every other message. ``concurrent=False`` handles requests one at a
  time in arrival order.
- Call other actors with ``async with actor.client("recorder", RECORDER_CODEC) as recorder:``
  then ``await recorder.request(msg, blobs)`` (deadline: wrap in ``trio.move_on_after`` /
  ``fail_after``) or ``await recorder.send(msg)`` (no reply). Failures are typed: ``PeerDead``
  (peer silent for 3 heartbeat intervals; pending requests fail at once), ``RemoteError``
  (the peer answered ``Error``; ``.error`` has code/detail), ``ProtocolError``.
  ``wait_peer_dead()`` / ``wait_peer_alive()`` wait for liveness changes (trio's clock, so
  the autojump clock drives them in tests); ``wait_connected()`` waits for a peer that is
  still starting; ``aclose()`` is safe to call twice or before entering.
- Blobs (images, frames) travel as raw frames; those above 64 KiB are sent zero-copy, so
  pass bytes or a buffer you will not mutate afterwards (not a reused render buffer).
- Physics, rendering, compression, blocking I/O: ``await run_off_loop(fn, *args)`` so
  heartbeats keep flowing. Never block the trio thread for more than a few ms.
- Each codec's union must include ``protocol.control.Control`` so the runtime's replies decode.

Standalone use (tests, ``roboswe sim serve``): ``Server(name, endpoint, codec, handler,
curve=CurveServerKeys(...))`` with ``await server.serve()`` in a nursery (``nursery.start``
reports when bound), and ``Client(name, endpoint, codec, curve=CurveClientKeys(...))``.
"""

from ._accounts import Accounts as Accounts
from ._client import Client as Client
from ._curve import CurveClientKeys as CurveClientKeys
from ._curve import CurveServerKeys as CurveServerKeys
from ._curve import KeyDirError as KeyDirError
from ._curve import client_keys as client_keys
from ._curve import generate_key_dir as generate_key_dir
from ._curve import new_key_pair as new_key_pair
from ._curve import server_keys as server_keys
from ._endpoints import actor_endpoints as actor_endpoints
from ._endpoints import robot_endpoint as robot_endpoint
from ._endpoints import socket_dir as socket_dir
from ._endpoints import stream_path as stream_path
from ._entry import Actor as Actor
from ._entry import actor_main as actor_main
from ._entry import refuse_unhandled as refuse_unhandled
from ._entry import run_off_loop as run_off_loop
from ._errors import PeerDead as PeerDead
from ._errors import ProtocolError as ProtocolError
from ._errors import RemoteError as RemoteError
from ._robot_stream import robot_link as robot_link
from ._server import Server as Server
