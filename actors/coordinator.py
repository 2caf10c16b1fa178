"""The coordinator actor: runs the job in RUN_DIR/job.json (a run of series, or a verification).

It holds no simulator and runs no authored code; the job itself is
``roboswe.evaluation.run.run_job``. This module is the actor's message loop: its endpoint
answers GetProgress, which `roboswe run` polls for its display. A coordinator restarted by
the supervisor reads the same job and continues from the run database, exactly as
`roboswe run --resume` does.
"""

from __future__ import annotations

from typing import Any

import structlog
import trio
from roboswe.actors import Actor, actor_main
from roboswe.protocol import Decoded
from roboswe.protocol.control import Error
from roboswe.protocol.coordinator import COORDINATOR_CODEC, GetProgress

log = structlog.get_logger()


async def main(actor: Actor) -> None:
    from roboswe.evaluation.progress import Progress
    from roboswe.evaluation.run import run_job

    progress = Progress()

    async def handle(decoded: Decoded[Any]):
        match decoded.message:
            case GetProgress(after=after):
                return progress.message(after)
        return Error(code="unsupported", detail=f"coordinator does not handle {type(decoded.message).__name__}")

    async def job() -> None:
        try:
            await run_job(actor, progress)
        except Exception as e:
            log.exception("job_failed")
            progress.update(detail=f"{type(e).__name__}: {e}")
            progress.say(f"job failed: {progress.figures.detail}")
            progress.update(state="failed")
            return
        progress.update(state="done", operation="")
        progress.say("job done")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(job)
        await actor.serve(COORDINATOR_CODEC, handle)
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    actor_main("coordinator", main)
