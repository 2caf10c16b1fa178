"""The coordinator actor: runs the job in RUN_DIR/job.json (a run of series, or a verification).

It holds no simulator and runs no authored code: it asks the context manager for the next
request, the provider client for a decision, carries the operation out through the
simulator and the sandbox bridge, and sends every record to the recorder (roboswe.evaluation.series).
Its own endpoint answers GetProgress, which `roboswe run` polls for its display. A
coordinator restarted by the supervisor reads the same job and continues from the run
database, exactly as `roboswe run --resume` does.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import msgspec
import structlog
import trio
from roboswe.actors import Actor, CurveClientKeys, PeerDead, actor_main
from roboswe.protocol import Decoded
from roboswe.protocol.control import Error
from roboswe.protocol.coordinator import CODEC, GetProgress
from roboswe.protocol.coordinator import Progress as ProgressMessage

log = structlog.get_logger()


def progress_message(p: Any, after: int) -> ProgressMessage:
    return ProgressMessage(**p.snapshot(), lines=p.lines[after:], line_count=len(p.lines))


def sim_curve(keys_dir: str | None) -> CurveClientKeys | None:
    """Client keys for a remote simulator (a `roboswe keys generate` directory), or None."""
    if not keys_dir:
        return None
    from roboswe.commands.keys import client_keys

    return client_keys(keys_dir)


async def run_job(actor: Actor, progress: Any) -> None:
    """Carry out the job file's run or verification, updating ``progress`` as it goes."""
    from roboswe.actors.simulator import robot_endpoint
    from roboswe.protocol import bridge as bridgep
    from roboswe.protocol import recorder as rec
    from roboswe.protocol import sim as simp
    from roboswe.protocol.context import CONTEXT_CODEC
    from roboswe.protocol.provider import PROVIDER_CODEC

    from roboswe.evaluation.admission import read_admitted
    from roboswe.evaluation.job import read_job
    from roboswe.evaluation.series import Links, Recording, SeriesPlan, run_series
    from roboswe.evaluation.series_config import effective_budgets
    from roboswe.evaluation.verify import verify_series
    from roboswe.records.reader import RunReader

    job = read_job(actor.run_dir)
    progress.job = job.kind
    admitted = read_admitted(job.admitted_path)
    if admitted.digest != job.admitted_sha256:
        raise RuntimeError(f"{job.admitted_path} is not the admitted file this run started with "
                           f"(digest {admitted.digest[:16]} vs {job.admitted_sha256[:16]})")
    config = actor.config
    series_config = config.series
    sim_endpoint = job.sim_endpoint or actor.endpoints["simulator"]
    curve = sim_curve(job.sim_keys)
    async with contextlib.AsyncExitStack() as stack:

        async def link(make: Any) -> Any:
            # Peers start alongside the coordinator: knock until each answers (bounded by ready_timeout).
            deadline = trio.current_time() + config.supervisor.ready_timeout
            while True:
                try:
                    return await stack.enter_async_context(make())
                except PeerDead:
                    if trio.current_time() > deadline:
                        raise
                    await trio.sleep(0.5)

        sim = await link(lambda: actor.client("simulator", simp.control_codec, curve=curve) if not job.sim_endpoint
                         else _remote(actor, sim_endpoint, simp.control_codec, curve))
        bridge = await link(lambda: actor.client("sandbox_bridge", bridgep.codec))
        recorder = await link(lambda: actor.client("recorder", rec.CODEC))
        provider = context = None
        if job.kind == "run":
            provider = await link(lambda: actor.client("provider_client", PROVIDER_CODEC))
            context = await link(lambda: actor.client("context_manager", CONTEXT_CODEC))
        links = Links(sim=sim, bridge=bridge, recorder=recorder, provider=provider, context=context,
                      sim_robot_endpoint=robot_endpoint(sim_endpoint), sim_keys=job.sim_keys)
        recording = Recording(recorder, job.run_id)
        videos = None
        if job.kind == "run":  # trial videos are rendered from the recorded states in a worker process
            from roboswe.records.video import SeriesVideos

            videos = SeriesVideos(actor.run_dir, job.run_id)
            stack.callback(videos.close)

        def reader() -> RunReader:
            return RunReader(actor.run_dir)

        with reader() as r:
            has_run = any(x.run_id == job.run_id for x in r.runs())
        if job.kind == "run" and not has_run:
            await recording.durable(rec.RunRecord(
                run_id=job.run_id, created_at=time.time(), admitted_sha256=admitted.digest,
                roboswe_version=_version(),
                config={"run_config": msgspec.to_builtins(config, builtin_types=()), "config_sha256": job.config_sha256,
                        "tasks": job.tasks, "backend": job.backend, "sim_endpoint": job.sim_endpoint,
                        "admitted_path": job.admitted_path, "host": admitted.host}))
        elif job.kind == "run":
            await recording.event("run_resumed", None, pid=os.getpid())
        model = _model_pin(config)
        progress.series_total = len(job.tasks)
        progress.state = "running"
        for n, task_id in enumerate(job.tasks):
            task = admitted.task(task_id)
            budgets = effective_budgets(series_config, task.task_manifest())
            series_id = f"{job.run_id}/{task_id}" + ("" if series_config.retain == "retain" else "/fresh")
            plan = SeriesPlan(run_id=job.run_id, series_id=series_id, task=task, budgets=budgets,
                              trials=series_config.trials, retain=series_config.retain, backend=job.backend,
                              model=model, run_dir=str(actor.run_dir))
            if job.kind == "run":
                await run_series(links, plan, recording, progress, reader)
                await recording.durable()  # commit this series' control traces before the worker reads them
                videos.submit_series(series_id, task.task_manifest())
            if job.kind == "verify" or job.verify:
                with reader() as r:
                    await verify_series(links, r, recording, progress, actor.run_dir, series_id, task.manifest,
                                        plan.reference_fingerprint, only_unverified=job.kind == "run",
                                        trial_ids=job.trials or None)
            progress.series_done = n + 1
        if videos is not None:
            progress.state, progress.detail = "videos", "rendering trial videos"
            await videos.record(recording)
        await store_results(actor, recorder, job.run_id, job.tasks, job.kind, progress)


async def store_results(actor: Actor, recorder: Any, run_id: str, tasks: list[str], kind: str, progress: Any) -> None:
    """Compute the run's figures from its database and have the recorder store RUN_DIR/results.json."""
    from roboswe.protocol import recorder as rec

    from roboswe.records.artifacts import build_results
    from roboswe.records.reader import RunReader

    with trio.fail_after(60):
        await recorder.request(rec.Flush())  # everything sent so far is in the database

    def build() -> bytes:
        with RunReader(actor.run_dir) as reader:
            results = build_results(reader, run_id, admitted_tasks=tasks)
        return msgspec.json.format(msgspec.json.encode(results), indent=2)

    data = await trio.to_thread.run_sync(build)
    with trio.fail_after(60):
        stored = (await recorder.request(rec.StoreArtifact(
            artifact_id=f"{run_id}/results/{int(time.time() * 1000)}", run_id=run_id, artifact="results",
            path="results.json", meta={"job": kind}), [data])).message
    progress.say(f"results: {actor.run_dir / stored.path} (sha256 {stored.sha256[:16]})")


def _remote(actor: Actor, endpoint: str, codec: Any, curve: CurveClientKeys | None):
    from roboswe.actors import Client

    return Client(actor.name, endpoint, codec, peer="simulator", curve=curve, accounts=actor.accounts,
                  heartbeat_interval=actor.config.transport.heartbeat_interval,
                  liveness=actor.config.transport.heartbeat_liveness)


def _model_pin(config: Any) -> str:
    p = config.provider
    if p is None:
        return "none"
    return f"{p.kind}:{p.model or p.agent}"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("roboswe")
    except Exception:  # noqa: BLE001 - an uninstalled checkout still runs
        return "0+unknown"


async def main(actor: Actor) -> None:
    from roboswe.evaluation.series import Progress

    progress = Progress()

    async def handle(decoded: Decoded[Any]):
        match decoded.message:
            case GetProgress(after=after):
                return progress_message(progress, after)
        return Error(code="unsupported", detail=f"coordinator does not handle {type(decoded.message).__name__}")

    async def job() -> None:
        try:
            await run_job(actor, progress)
        except Exception as e:  # noqa: BLE001 - reported to the front end, which stops the run
            log.exception("job_failed")
            progress.detail = f"{type(e).__name__}: {e}"
            progress.say(f"job failed: {progress.detail}")
            progress.state = "failed"
            return
        progress.state = "done"
        progress.operation = ""
        progress.say("job done")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(job)
        await actor.serve(CODEC, handle)
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    actor_main("coordinator", main)
