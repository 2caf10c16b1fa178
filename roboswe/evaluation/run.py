"""The coordinator's job (RUN_DIR/job.json): a run of series, or a verification, start to results.json.

The coordinator actor calls ``run_job`` and answers GetProgress from the ``Progress`` it
updates. Peers start alongside the coordinator, so each link waits (bounded by the
supervisor's ready timeout) for its peer's Ready before the job begins.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import time
from typing import Any

import msgspec
import structlog
import trio

from roboswe.actors import Actor, Client, CurveClientKeys
from roboswe.cli import installed_version
from roboswe.config import RunConfig, worker_name
from roboswe.evaluation.admission import Admitted, read_admitted
from roboswe.evaluation.job import Job, read_job
from roboswe.evaluation.peers import (
    INFRA_ERRORS,
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
from roboswe.evaluation.workspace import open_workspace
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
    job = read_job(actor.run_dir)
    progress.update(job=job.kind)
    if job.rle:  # one development session per RLE task through these same actors, no admitted file
        from roboswe.rle.run import run_rle_job

        return await run_rle_job(actor, progress, job)
    admitted = read_admitted(job.admitted_path)
    if admitted.digest != job.admitted_sha256:
        raise RuntimeError(f"{job.admitted_path} is not the admitted file this run started with "
                           f"(digest {admitted.digest[:16]} vs {job.admitted_sha256[:16]})")
    if job.sim_endpoint and job.workers > 1:
        raise RuntimeError(f"job.json: workers = {job.workers} with a remote simulator ({job.sim_endpoint}); "
                           "a remote simulator serves one series at a time: run with --workers 1")
    async with contextlib.AsyncExitStack() as stack:
        run = JobRun(actor, progress, job, admitted, stack)
        await run.link_shared()
        if job.ray:
            await run.place_fleet()
        else:
            await run.link_local_workers()
        run.open_videos()
        await run.record_start()
        await run.dispatch()
        if run.videos is not None:
            progress.update(state="videos", detail="rendering trial videos")
            await run.videos.record(run.recording, say=progress.say)
        await store_results(actor, run.recording, job.run_id, job.tasks, job.kind, progress)


class JobRun:
    """One job's run, step by step: link the peers, build the worker pool, record the run, hand series to workers.

    The series queue (``pending``) is in the job's order; a worker in its last trial may claim the next
    series early (``claim_and_stage``), so the dispatcher and the workers both take from it.
    """

    def __init__(self, actor: Actor, progress: Progress, job: Job, admitted: Admitted,
                 stack: contextlib.AsyncExitStack):
        self.actor, self.progress, self.job, self.admitted, self.stack = actor, progress, job, admitted, stack
        self.config = actor.config
        self.workers = max(1, job.workers)
        self.curve = sim_curve(job.sim_keys)
        self.model = _model_pin(self.config)
        self.pool: list[Any] = []
        self.fleet: Any = None  # a RayFleet when the workers are placed on a cluster
        self.videos: Any = None  # SeriesVideos when the job renders trial videos
        self.provider_client: Client | None = None
        self.done = 0
        self.pending = collections.deque(job.tasks)
        # Free workers, and one None: the wake-up when a claim took the queue's last series (claim_and_stage).
        self.free_send, self.free_receive = trio.open_memory_channel[Any](self.workers + 1)

    def reader(self) -> RunReader:
        return RunReader(self.actor.run_dir)

    async def link(self, client: Client) -> Client:
        # Peers start alongside the coordinator: wait for each one's Ready (bounded by ready_timeout).
        await self.stack.enter_async_context(client)
        with trio.fail_after(self.config.supervisor.ready_timeout):
            await client.wait_connected()
        return client

    async def link_shared(self) -> None:
        """Shared by every worker: one SQLite writer, one holder of the provider key."""
        self.recorder_client = await self.link(self.actor.client("recorder", rec.RECORDER_CODEC, handshake=False))
        self.recording = Recorder(self.recorder_client, self.job.run_id)
        if self.job.kind == "run":
            self.provider_client = await self.link(self.actor.client("provider_client", PROVIDER_CODEC,
                                                                     handshake=False))

    async def head_links(self, number: int, links: Links) -> Links:
        # What stays on this machine: the recorder and provider (shared), the worker's context window.
        if self.job.kind == "run":
            links.provider = Provider(self.provider_client)
            context_name = worker_name("context_manager", number, self.workers)
            links.context = Context(await self.link(self.actor.client(context_name, CONTEXT_CODEC, handshake=False)))
        return links

    async def place_fleet(self) -> None:
        """Each worker's simulator and bridge on a cluster node, placed by Ray (roboswe/fleet)."""
        from roboswe.fleet.ray_pool import FleetLinks, RayFleet, RayWorker

        self.fleet = RayFleet(self.job.ray, self.actor, self.job.run_id, self.recording)
        await self.fleet.open(await self.stack.enter_async_context(trio.open_nursery()))
        self.stack.push_async_callback(self.fleet.close, self.pool)  # before the nursery closes: it ends the links' holders
        for number in range(1, self.workers + 1):
            links = FleetLinks(sim=None, bridge=None, recorder=Recorder(self.recorder_client, self.job.run_id),  # type: ignore[arg-type]
                               node_workspaces=self.actor.run_dir if self.fleet.node_workspaces else None)
            self.pool.append(RayWorker(self.fleet, number, await self.head_links(number, links)))

    async def link_local_workers(self) -> None:
        """Each worker's simulator (or the one remote simulator) and sandbox bridge, started by this run's supervisor."""
        from roboswe.actors import robot_endpoint
        from roboswe.fleet.node import boot_id

        job, actor = self.job, self.actor
        roster = RosterFile(actor.run_dir, job.run_id, LOCAL, boot_id())
        for number in range(1, self.workers + 1):
            sim_name = worker_name("simulator", number, self.workers)
            sim_endpoint = job.sim_endpoint or actor.endpoints[sim_name]
            if job.sim_endpoint:
                sim_client = _remote(actor, sim_endpoint, simp.SIM_CODEC, self.curve)
            else:
                sim_client = actor.client(sim_name, simp.SIM_CODEC, curve=self.curve, handshake=False)
            bridge_client = actor.client(worker_name("sandbox_bridge", number, self.workers), bridgep.BRIDGE_CODEC,
                                         handshake=False)
            # Facades are per worker (each keeps its own waiting figures); the clients under them are shared.
            links = Links(
                sim=Simulator(await self.link(sim_client)),
                bridge=Bridge(await self.link(bridge_client), sim_endpoint=robot_endpoint(sim_endpoint),
                              sim_keys=job.sim_keys),
                recorder=Recorder(self.recorder_client, job.run_id))
            self.pool.append(Worker(number, await self.head_links(number, links), roster))

    def open_videos(self) -> None:
        if self.job.kind == "run" and self.job.videos:  # rendered from the recorded states in a worker process
            from roboswe.records.video import SeriesVideos

            self.videos = SeriesVideos(self.actor.run_dir, self.job.run_id)
            self.stack.callback(self.videos.close)

    async def record_start(self) -> None:
        """A new run's record (its pins), or a resumed run's event."""
        if self.job.kind != "run":
            return
        with self.reader() as r:
            has_run = any(x.run_id == self.job.run_id for x in r.runs())
        if not has_run:
            await self.recording.durable(rec.RunRecord(
                run_id=self.job.run_id, created_at=time.time(), admitted_sha256=self.admitted.digest,
                roboswe_version=installed_version(), config=_run_config(self.job, self.config, self.admitted, self.workers)))
        else:
            await self.recording.event("run_resumed", None, pid=os.getpid(), workers=self.workers)

    def plan_for(self, task_id: str) -> SeriesPlan:
        job, series_config = self.job, self.config.series
        task = self.admitted.task(task_id)
        series_id = series_id_for(job, series_config, task_id)
        return SeriesPlan(run_id=job.run_id, series_id=series_id, task=task,
                          budgets=effective_budgets(series_config, task.task_manifest()), trials=series_config.trials,
                          retain=series_config.retain, backend=job.backend, model=self.model,
                          run_dir=str(self.actor.run_dir))

    async def claim_and_stage(self, worker: Any) -> None:
        # The worker's last trial has its scene: it takes the next series in the queue now, and the
        # simulator builds that series' first scene while this trial (and the replay after it) runs.
        if worker.claimed is None and self.pending:
            worker.claimed = self.pending.popleft()
            if not self.pending:
                self.free_send.send_nowait(None)  # the dispatcher may be waiting for a worker it no longer needs
        if worker.claimed is not None:
            await stage_next_scene(worker.links, self.plan_for(worker.claimed))

    async def one_series(self, task_id: str, worker: Any) -> None:
        """Run ``task_id`` on ``worker``, then any series it claimed meanwhile; then free or release it."""
        while True:
            await self.series_on(task_id, worker)
            if worker.claimed is None:
                break
            task_id, worker.claimed = worker.claimed, None  # taken during its last trial (claim_and_stage)
        if not self.pending:
            await worker.release()  # no series left for it: a Ray worker's resources go back to the cluster
        else:
            self.free_send.send_nowait(worker)

    async def series_on(self, task_id: str, worker: Any) -> None:
        job, progress = self.job, self.progress
        links = worker.links
        # A task's context is its own copy, so the series id bound here is on this series' events only.
        shown = progress if self.workers == 1 else progress.for_worker(worker.number)
        plan = self.plan_for(task_id)
        task, series_id = plan.task, plan.series_id
        structlog.contextvars.bind_contextvars(series=series_id, worker=worker.number)
        worker.series = series_id
        if job.kind == "run":
            manifest = task.task_manifest()

            async def queue_video(_ended: Any) -> None:  # it renders while the next trial and the replays run
                await links.recorder.durable()  # commit the trial's control traces before the worker reads them
                self.videos.submit_series(series_id, manifest)

            await run_series(links, plan, shown, self.reader, retry_incomplete=job.retry_incomplete,
                             next_series=functools.partial(self.claim_and_stage, worker),
                             trial_done=queue_video if self.videos is not None else None)
            await links.recorder.durable()
            if self.videos is not None:  # any trial still without a video (a re-run's, say)
                self.videos.submit_series(series_id, manifest)
        if job.kind == "verify" or job.verify:
            with self.reader() as r:
                await verify_series(links, r, shown, self.actor.run_dir, series_id, task.manifest,
                                    plan.reference_fingerprint, only_unverified=job.kind == "run",
                                    trial_ids=job.trials or None)
        if links.node_workspaces is not None:  # its checkpoints are at the head: the node's copy goes
            try:
                await open_workspace(links, plan.workspace_dir()).release()
            except INFRA_ERRORS as e:  # a node gone took it along; the worker's directory goes on release
                structlog.get_logger().warning("node_workspace_not_dropped", series=series_id, error=f"{type(e).__name__}: {e}")
        self.done += 1
        worker.series = None
        progress.update(series_done=self.done)
        if self.workers > 1:
            progress.worker_done(worker.number)

    async def place(self, worker: Any) -> None:
        await worker.place()  # Ray queues it while the cluster has no room
        self.progress.say(f"worker {worker.number}: on node {worker.placement.host} ({worker.placement.node_id[:12]})")
        self.free_send.send_nowait(worker)

    async def dispatch(self) -> None:
        """Hand the queue's series, in the job's order, to workers as they come free; then release the idle ones."""
        self.progress.update(series_total=len(self.job.tasks), state="running")
        provider = self.config.provider
        self.progress.started(len(self.job.tasks) * self.config.series.trials, provider.price if provider is not None else None)
        async with trio.open_nursery() as nursery:
            async with trio.open_nursery() as placing:
                for worker in self.pool:
                    if self.fleet is None:
                        self.free_send.send_nowait(worker)
                    else:
                        placing.start_soon(self.place, worker)
                while self.pending:  # each series waits for a free worker
                    worker = await self.free_receive.receive()
                    if worker is None:
                        continue
                    if not self.pending:  # claimed meanwhile by a worker in its last trial
                        self.free_send.send_nowait(worker)
                        break
                    nursery.start_soon(self.one_series, self.pending.popleft(), worker)
                placing.cancel_scope.cancel()  # every series has a worker: the rest are not needed
            while True:  # idle workers (placed, or local): give their resources back now
                try:
                    idle = self.free_receive.receive_nowait()
                except trio.WouldBlock:
                    break
                if idle is not None:
                    nursery.start_soon(idle.release)


def series_id_for(job: Job, series_config: Any, task_id: str) -> str:
    """The id of the job's series of ``task_id`` (the fresh-context control's carries /fresh)."""
    return f"{job.run_id}/{task_id}" + ("" if series_config.retain == "retain" else "/fresh")


def work_left(run_dir: Any, job: Job, series_config: Any) -> list[str]:
    """What running ``job`` in ``run_dir`` would still do, one line each; empty when the run finished.

    Trials still to run (series.SeriesHistory, with the job's --retry-incomplete), ended trials not
    replayed (when the job verifies), videos not made (when it renders them), results.json unwritten.
    """
    from pathlib import Path

    from roboswe.evaluation.series import SeriesHistory
    from roboswe.evaluation.verify import replayable

    run_dir = Path(run_dir)
    if not (run_dir / "run.sqlite").exists():
        return ["nothing recorded yet"]
    left = []
    with RunReader(run_dir) as reader:
        videos = {a.trial_id for a in reader.artifacts() if a.artifact == "video"}
        for task in job.tasks:
            series_id = series_id_for(job, series_config, task)
            trials = series_config.trials
            history = SeriesHistory.read(reader, series_id, trials, retry_incomplete=job.retry_incomplete)
            if history.next_index <= trials:
                left.append(f"{task}: trial {history.next_index} of {trials} to run")
                continue
            views = reader.trials(series_id)
            unverified = sum(replayable(v) and v.verification is None for v in views) if job.verify else 0
            unrendered = sum(v.end is not None and v.trial_id not in videos and bool(reader.control_traces(v.trial_id))
                             for v in views) if job.videos else 0
            left += [f"{task}: {unverified} trial(s) to replay"] * bool(unverified)
            left += [f"{task}: {unrendered} video(s) to render"] * bool(unrendered)
    if not (run_dir / "results.json").exists():
        left.append("results.json to write")
    return left


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


def _run_config(job: Job, config: RunConfig, admitted: Admitted, workers: int) -> rec.RunPins:
    """The run's pins as its RunRecord keeps them."""
    return rec.RunPins(run_config=msgspec.to_builtins(config, builtin_types=()), config_sha256=job.config_sha256,
                       tasks=list(job.tasks), backend=job.backend, sim_endpoint=job.sim_endpoint,
                       admitted_path=job.admitted_path, host=dict(admitted.host), workers=workers, ray=job.ray)


def _model_pin(config: RunConfig) -> str:
    p = config.provider
    if p is None:
        return "none"
    return f"{p.kind}:{p.model or p.agent}"
