"""The coordinator's job (RUN_DIR/job.json): a run of series, or a verification, start to results.json.

The coordinator actor calls ``run_job`` and answers GetProgress from the ``Progress`` it
updates. Peers start alongside the coordinator, so each link waits (bounded by the
supervisor's ready timeout) for its peer's Ready before the job begins.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import msgspec
import trio

from roboswe.actors import Actor, Client, CurveClientKeys
from roboswe.config import RunConfig
from roboswe.evaluation.admission import read_admitted
from roboswe.evaluation.job import read_job
from roboswe.evaluation.peers import (
    Bridge,
    Context,
    Links,
    Provider,
    Recorder,
    Simulator,
)
from roboswe.evaluation.plan import SeriesPlan
from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.evaluation.series_config import effective_budgets
from roboswe.evaluation.verify import verify_series
from roboswe.protocol import Codec
from roboswe.protocol import bridge as bridgep
from roboswe.protocol import recorder as rec
from roboswe.protocol import sim as simp
from roboswe.protocol.context import CONTEXT_CODEC
from roboswe.protocol.provider import PROVIDER_CODEC
from roboswe.records.reader import RunReader


def sim_curve(keys_dir: str | None) -> CurveClientKeys | None:
    """Client keys for a remote simulator (a `roboswe keys generate` directory), or None."""
    if not keys_dir:
        return None
    from roboswe.actors import client_keys

    return client_keys(keys_dir)


async def run_job(actor: Actor, progress: Progress) -> None:
    """Carry out the job file's run or verification, updating ``progress`` as it goes."""
    from roboswe.actors.simulator import robot_endpoint

    job = read_job(actor.run_dir)
    progress.update(job=job.kind)
    admitted = read_admitted(job.admitted_path)
    if admitted.digest != job.admitted_sha256:
        raise RuntimeError(f"{job.admitted_path} is not the admitted file this run started with "
                           f"(digest {admitted.digest[:16]} vs {job.admitted_sha256[:16]})")
    config = actor.config
    series_config = config.series
    sim_endpoint = job.sim_endpoint or actor.endpoints["simulator"]
    curve = sim_curve(job.sim_keys)
    async with contextlib.AsyncExitStack() as stack:

        async def link(client: Client) -> Client:
            # Peers start alongside the coordinator: wait for each one's Ready (bounded by ready_timeout).
            await stack.enter_async_context(client)
            with trio.fail_after(config.supervisor.ready_timeout):
                await client.wait_connected()
            return client

        if job.sim_endpoint:
            sim_client = _remote(actor, sim_endpoint, simp.SIM_CODEC, curve)
        else:
            sim_client = actor.client("simulator", simp.SIM_CODEC, curve=curve, handshake=False)
        links = Links(
            sim=Simulator(await link(sim_client)),
            bridge=Bridge(await link(actor.client("sandbox_bridge", bridgep.BRIDGE_CODEC, handshake=False)),
                          sim_endpoint=robot_endpoint(sim_endpoint), sim_keys=job.sim_keys),
            recorder=Recorder(await link(actor.client("recorder", rec.RECORDER_CODEC, handshake=False)), job.run_id))
        if job.kind == "run":
            links.provider = Provider(await link(actor.client("provider_client", PROVIDER_CODEC, handshake=False)))
            links.context = Context(await link(actor.client("context_manager", CONTEXT_CODEC, handshake=False)))
        recording = links.recorder
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
        progress.update(series_total=len(job.tasks), state="running")
        for n, task_id in enumerate(job.tasks):
            task = admitted.task(task_id)
            budgets = effective_budgets(series_config, task.task_manifest())
            series_id = f"{job.run_id}/{task_id}" + ("" if series_config.retain == "retain" else "/fresh")
            plan = SeriesPlan(run_id=job.run_id, series_id=series_id, task=task, budgets=budgets,
                              trials=series_config.trials, retain=series_config.retain, backend=job.backend,
                              model=model, run_dir=str(actor.run_dir))
            if job.kind == "run":
                await run_series(links, plan, progress, reader)
                await recording.durable()  # commit this series' control traces before the worker reads them
                videos.submit_series(series_id, task.task_manifest())
            if job.kind == "verify" or job.verify:
                with reader() as r:
                    await verify_series(links, r, progress, actor.run_dir, series_id, task.manifest,
                                        plan.reference_fingerprint, only_unverified=job.kind == "run",
                                        trial_ids=job.trials or None)
            progress.update(series_done=n + 1)
        if videos is not None:
            progress.update(state="videos", detail="rendering trial videos")
            await videos.record(recording)
        await store_results(actor, recording, job.run_id, job.tasks, job.kind, progress)


async def store_results(actor: Actor, recorder: Recorder, run_id: str, tasks: list[str], kind: str,
                        progress: Progress) -> None:
    """Compute the run's figures from its database and have the recorder store RUN_DIR/results.json."""
    from roboswe.records.artifacts import build_results

    await recorder.flush()  # everything sent so far is in the database

    def build() -> bytes:
        with RunReader(actor.run_dir) as reader:
            results = build_results(reader, run_id, admitted_tasks=tasks)
        return msgspec.json.format(msgspec.json.encode(results), indent=2)

    data = await trio.to_thread.run_sync(build)
    stored = await recorder.store_artifact(f"{run_id}/results/{int(time.time() * 1000)}", "results", "results.json",
                                           data, meta={"job": kind})
    progress.say(f"results: {actor.run_dir / stored.path} (sha256 {stored.sha256[:16]})")


def _remote(actor: Actor, endpoint: str, codec: Codec[Any], curve: CurveClientKeys | None) -> Client:
    return Client(actor.name, endpoint, codec, peer="simulator", curve=curve, accounts=actor.accounts,
                  heartbeat_interval=actor.config.transport.heartbeat_interval,
                  liveness=actor.config.transport.heartbeat_liveness, handshake=False)


def _model_pin(config: RunConfig) -> str:
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
