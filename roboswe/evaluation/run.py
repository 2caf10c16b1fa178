"""The coordinator's job (RUN_DIR/job.json): a run of series, or a verification, start to results.json.

The coordinator actor calls ``run_job`` and answers GetProgress from the ``Progress`` it
updates. Peers start alongside the coordinator, so each link waits (bounded by the
supervisor's ready timeout) for its peer's Ready before the job begins.
"""

from __future__ import annotations

import collections
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog
import trio

from roboswe.actors import Actor, Client, CurveClientKeys
from roboswe.config import RunConfig, worker_name
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
from roboswe.evaluation.series import run_series, stage_next_scene
from roboswe.evaluation.series_config import effective_budgets
from roboswe.evaluation.verify import verify_series
from roboswe.fleet.roster import LOCAL, RosterFile
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


class Worker:
    """One local worker as the job sees it: its number, the links its series uses, its row in the roster."""

    def __init__(self, number: int, links: Links, roster: RosterFile):
        self.number = number
        self.links = links
        self.roster = roster
        self.claimed: str | None = None  # the task it runs next, taken from the queue during its last trial
        roster.update(number, state="idle")

    @property
    def series(self) -> str | None:
        """The series it runs now; `roboswe status` shows it from the roster."""
        return self.roster.row(self.number).series

    @series.setter
    def series(self, series_id: str | None) -> None:
        self.roster.run_series(self.number, series_id, state="idle" if series_id is None else "running")

    async def release(self) -> None:
        self.roster.update(self.number, state="released")  # no series left for it; its actors stop with the run


async def run_job(actor: Actor, progress: Progress) -> None:
    """Carry out the job file's run or verification, updating ``progress`` as it goes.

    With ``job.workers`` N > 1, up to N series run at once, each on a free worker (its own
    simulator, sandbox bridge and context manager); the recorder and provider client are shared.
    With ``job.ray`` each worker's simulator and bridge are placed on a Ray cluster's node
    (roboswe/fleet); its context manager stays here, and a worker is released once no series is left.
    """
    from roboswe.actors import robot_endpoint

    job = read_job(actor.run_dir)
    progress.update(job=job.kind)
    admitted = read_admitted(job.admitted_path)
    if admitted.digest != job.admitted_sha256:
        raise RuntimeError(f"{job.admitted_path} is not the admitted file this run started with "
                           f"(digest {admitted.digest[:16]} vs {job.admitted_sha256[:16]})")
    config = actor.config
    series_config = config.series
    workers = max(1, job.workers)
    if job.sim_endpoint and workers > 1:
        raise RuntimeError(f"job.json: workers = {workers} with a remote simulator ({job.sim_endpoint}); "
                           "a remote simulator serves one series at a time: run with --workers 1")
    curve = sim_curve(job.sim_keys)
    async with contextlib.AsyncExitStack() as stack:

        async def link(client: Client) -> Client:
            # Peers start alongside the coordinator: wait for each one's Ready (bounded by ready_timeout).
            await stack.enter_async_context(client)
            with trio.fail_after(config.supervisor.ready_timeout):
                await client.wait_connected()
            return client

        # Shared by every worker: one SQLite writer, one holder of the provider key.
        recorder_client = await link(actor.client("recorder", rec.RECORDER_CODEC, handshake=False))
        recording = Recorder(recorder_client, job.run_id)
        provider_client = None
        if job.kind == "run":
            provider_client = await link(actor.client("provider_client", PROVIDER_CODEC, handshake=False))

        async def head_links(number: int, links: Links) -> Links:
            # What stays on this machine: the recorder and provider (shared), the worker's context window.
            if job.kind == "run":
                links.provider = Provider(provider_client)
                context_name = worker_name("context_manager", number, workers)
                links.context = Context(await link(actor.client(context_name, CONTEXT_CODEC, handshake=False)))
            return links

        pool: list[Any] = []
        fleet = None
        if job.ray:  # each worker's simulator and bridge on a cluster node, placed by Ray (roboswe/fleet)
            from roboswe.fleet.ray_pool import FleetLinks, RayFleet, RayWorker

            fleet = RayFleet(job.ray, actor, job.run_id, recording)
            await fleet.open(await stack.enter_async_context(trio.open_nursery()))
            stack.push_async_callback(fleet.close, pool)  # before the nursery closes: it ends the links' holders
            for number in range(1, workers + 1):
                links = FleetLinks(sim=None, bridge=None, recorder=Recorder(recorder_client, job.run_id))  # type: ignore[arg-type]
                pool.append(RayWorker(fleet, number, await head_links(number, links)))
        else:
            from roboswe.fleet.node import boot_id

            roster = RosterFile(actor.run_dir, job.run_id, LOCAL, boot_id())
            for number in range(1, workers + 1):
                sim_name = worker_name("simulator", number, workers)
                sim_endpoint = job.sim_endpoint or actor.endpoints[sim_name]
                if job.sim_endpoint:
                    sim_client = _remote(actor, sim_endpoint, simp.SIM_CODEC, curve)
                else:
                    sim_client = actor.client(sim_name, simp.SIM_CODEC, curve=curve, handshake=False)
                bridge_client = actor.client(worker_name("sandbox_bridge", number, workers), bridgep.BRIDGE_CODEC,
                                             handshake=False)
                # Facades are per worker (each keeps its own waiting figures); the clients under them are shared.
                links = Links(
                    sim=Simulator(await link(sim_client)),
                    bridge=Bridge(await link(bridge_client), sim_endpoint=robot_endpoint(sim_endpoint), sim_keys=job.sim_keys),
                    recorder=Recorder(recorder_client, job.run_id))
                pool.append(Worker(number, await head_links(number, links), roster))
        videos = None
        if job.kind == "run" and job.videos:  # trial videos are rendered from the recorded states in a worker process
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
                        "admitted_path": job.admitted_path, "host": admitted.host, "workers": workers, "ray": job.ray}))
        elif job.kind == "run":
            await recording.event("run_resumed", None, pid=os.getpid(), workers=workers)
        model = _model_pin(config)
        progress.update(series_total=len(job.tasks), state="running")
        done = 0

        def plan_for(task_id: str) -> SeriesPlan:
            task = admitted.task(task_id)
            series_id = f"{job.run_id}/{task_id}" + ("" if series_config.retain == "retain" else "/fresh")
            return SeriesPlan(run_id=job.run_id, series_id=series_id, task=task,
                              budgets=effective_budgets(series_config, task.task_manifest()), trials=series_config.trials,
                              retain=series_config.retain, backend=job.backend, model=model, run_dir=str(actor.run_dir))

        def next_series(worker: Any) -> Callable[[], Awaitable[None]]:
            async def claim_and_stage() -> None:
                # The worker's last trial has its scene: it takes the next series in the queue now, and the
                # simulator builds that series' first scene while this trial (and the replay after it) runs.
                if worker.claimed is None and pending:
                    worker.claimed = pending.popleft()
                    if not pending:
                        free_send.send_nowait(None)  # the dispatcher may be waiting for a worker it no longer needs
                if worker.claimed is not None:
                    await stage_next_scene(worker.links, plan_for(worker.claimed))
            return claim_and_stage

        async def one_series(task_id: str, worker: Any, free: trio.MemorySendChannel[Worker | None]) -> None:
            while True:
                await series_on(task_id, worker)
                if worker.claimed is None:
                    break
                task_id, worker.claimed = worker.claimed, None  # taken during its last trial (next_series)
            if not pending:
                await worker.release()  # no series left for it: a Ray worker's resources go back to the cluster
            else:
                free.send_nowait(worker)

        async def series_on(task_id: str, worker: Any) -> None:
            nonlocal done
            links = worker.links
            # A task's context is its own copy, so the series id bound here is on this series' events only.
            shown = progress if workers == 1 else progress.for_worker(worker.number)
            plan = plan_for(task_id)
            task, series_id = plan.task, plan.series_id
            structlog.contextvars.bind_contextvars(series=series_id, worker=worker.number)
            worker.series = series_id
            if job.kind == "run":
                await run_series(links, plan, shown, reader, retry_incomplete=job.retry_incomplete,
                                 next_series=next_series(worker))
                await links.recorder.durable()  # commit this series' control traces before the worker reads them
                if videos is not None:
                    videos.submit_series(series_id, task.task_manifest())
            if job.kind == "verify" or job.verify:
                with reader() as r:
                    await verify_series(links, r, shown, actor.run_dir, series_id, task.manifest,
                                        plan.reference_fingerprint, only_unverified=job.kind == "run",
                                        trial_ids=job.trials or None)
            done += 1
            worker.series = None
            progress.update(series_done=done)
            if workers > 1:
                progress.worker_done(worker.number)

        async def place(worker: Any, free: trio.MemorySendChannel[Worker | None]) -> None:
            await worker.place()  # Ray queues it while the cluster has no room
            progress.say(f"worker {worker.number}: on node {worker.placement.host} ({worker.placement.node_id[:12]})")
            free.send_nowait(worker)

        # Free workers, and one None: the wake-up when a claim took the queue's last series (next_series).
        free_send, free_receive = trio.open_memory_channel[Worker | None](workers + 1)
        pending = collections.deque(job.tasks)  # in the job's order; a worker may claim the next one early
        async with trio.open_nursery() as nursery:
            async with trio.open_nursery() as placing:
                for worker in pool:
                    if fleet is None:
                        free_send.send_nowait(worker)
                    else:
                        placing.start_soon(place, worker, free_send)
                while pending:  # in the job's order; each series waits for a free worker
                    worker = await free_receive.receive()
                    if worker is None:
                        continue
                    if not pending:  # claimed meanwhile by a worker in its last trial
                        free_send.send_nowait(worker)
                        break
                    nursery.start_soon(one_series, pending.popleft(), worker, free_send)
                placing.cancel_scope.cancel()  # every series has a worker: the rest are not needed
            while True:  # idle workers (placed, or local): give their resources back now
                try:
                    idle = free_receive.receive_nowait()
                except trio.WouldBlock:
                    break
                if idle is not None:
                    nursery.start_soon(idle.release)
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
