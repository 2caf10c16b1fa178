"""The development simulator as its own process: ``python -m roboswe.rle.development_simulator
TASK_JSON ENDPOINT LEDGER_JSONL``.

It serves ``DevelopmentSim`` (scene.py) on ENDPOINT with the actors runtime's Server and the
simulator's robot codec, as the series simulator serves its robot endpoint, so the sandbox bridge's
door reaches it through ``roboswe.actors.robot_link`` exactly as in a series trial. The ledger lives
here, on the trusted side, apart from the coordinator, the bridge and the sandbox; every row is
appended to LEDGER_JSONL as it is written (a charge before the operation runs). A Shutdown from the
coordinator ends it; the coordinator then reads the rows and seals them over the artifact.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import msgspec
import trio

from .manifest import RleTask


async def serve_development(task: RleTask, endpoint: str, ledger: Path, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    from roboswe.actors import Server
    from roboswe.protocol.sim import SIM_ROBOT_CODEC

    from .scene import DevelopmentSim

    sim = DevelopmentSim(task, record=ledger)

    async def handle(decoded):
        return sim.answer(decoded.message)

    try:
        server = Server("rle_development_simulator", endpoint, SIM_ROBOT_CODEC, handle,
                        concurrent=False)  # one request at a time: the ledger's charge/confirm pairs never interleave
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            task_status.started(server.endpoint)
            await server.shutdown_requested.wait()
            await trio.sleep(0.1)  # let the Ok leave
            nursery.cancel_scope.cancel()
    finally:
        sim.close()


def main(argv: list[str]) -> int:
    task_file, endpoint, ledger = argv
    task = msgspec.json.decode(Path(task_file).read_bytes(), type=RleTask)
    trio.run(serve_development, task, endpoint, Path(ledger))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    sys.exit(main(sys.argv[1:]))
