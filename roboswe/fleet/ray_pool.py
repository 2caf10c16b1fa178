"""The coordinator's side of a Ray fleet: connect, place each worker, relink a lost one, release.

Ray decides where a worker goes (its resource request: ``[fleet] ray_cpus``, ``ray_memory_gib``,
``ray_gpus``; SPREAD across nodes; a node that refused a worker is excluded by its
``ray.io/node-id`` label), queues a worker the cluster cannot hold yet (``ray status`` shows the
demand), and restarts a worker whose node or process died (``max_restarts``). The coordinator
only links to what Ray placed: the worker's simulator and bridge over tcp with CURVE, under a
client key pair made for this job (the servers admit only its public key).

When a worker's links die under a trial (node lost, raylet or process killed) the trial ends
``interrupted`` as for any dead peer; the series then waits for its peers (``FleetLinks.wait_alive``),
which relinks the worker to its restarted instance (or a fresh one) before the linked re-run.

Each worker's placement, state and series, and its processes' Statistics sampled every
``SAMPLE_SECONDS`` over the job's own links, go to RUN_DIR/fleet/workers.json (``roster``) for
`roboswe status`.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import structlog
import trio

from roboswe.actors import Actor, Client, CurveClientKeys, new_key_pair
from roboswe.evaluation.peers import RESTART_WAIT, Bridge, Links, Recorder, Simulator
from roboswe.fleet.capacity import Infeasible, NodeCapacity, plan_workers
from roboswe.fleet.node import TOKEN_FILE, Placement, WorkerHost, WorkerSpec, boot_id
from roboswe.fleet.roster import RosterFile
from roboswe.protocol import bridge as bridgep
from roboswe.protocol import sim as simp

log = structlog.get_logger()

NAMESPACE = "roboswe"
MAX_RESTARTS = 3  # Ray restarts of one worker (node or process lost); then a fresh worker is placed
MAX_REFUSALS = 8  # nodes refused (image digest, run dir) before the job gives up placing a worker
RELINK_SECONDS = 600.0  # a lost worker back (Ray notices the node, restarts the actor, the processes bind)
LINK_SECONDS = 120.0  # a placed worker's simulator and bridge answering
SAMPLE_SECONDS = 2.0  # how often each running worker's Statistics are sampled for `roboswe status`
NODE_ID = re.compile(r"node ([0-9a-f]{56})")


class FleetUnavailable(RuntimeError):
    """Ray is not installed, the cluster cannot be reached, or no node can take a worker."""


def connect(address: str) -> None:
    """Join the cluster at ``address`` ("auto" or HOST:PORT) as a driver."""
    try:
        import ray
    except ImportError:
        raise FleetUnavailable("--ray needs Ray: pip install 'roboswe[ray]'") from None
    if not ray.is_initialized():
        _reachable(address)
        try:
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level="WARNING")
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise FleetUnavailable(f"--ray {address}: cannot join the cluster: {e}") from None


def _reachable(address: str, seconds: float = 5.0) -> None:
    """Refuse at once an address nothing answers on (ray.init would retry for minutes)."""
    if address == "auto":
        return  # ray.init finds the local cluster's address file or says there is none
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=seconds).close()
    except (OSError, ValueError) as e:
        raise FleetUnavailable(f"--ray {address}: no Ray head answers there ({e}); expected HOST:PORT of "
                               "`ray start --head` (its --port, 6379 by default) or auto") from None


def cluster_nodes(address: str) -> list[NodeCapacity]:
    """The cluster's alive nodes and what each holds, asked by a short-lived driver (the command, before
    any actor starts): a worker must fit on one node, so the totals alone would mislead (capacity.py)."""
    try:
        connect(address)
        return _alive_nodes()
    finally:
        import sys

        if "ray" in sys.modules:
            sys.modules["ray"].shutdown()


def _alive_nodes() -> list[NodeCapacity]:
    import ray

    return [NodeCapacity.from_ray(n) for n in ray.nodes() if n.get("Alive")]


class RayFleet:
    """The job's workers on the cluster: their Ray actors and the keys the coordinator links with."""

    def __init__(self, address: str, actor: Actor, run_id: str, recorder: Recorder):
        self.address = address
        self.actor = actor
        self.run_id = run_id
        self.recorder = recorder
        self.fleet = actor.config.fleet
        self.public, self.secret = new_key_pair()
        self.excluded: dict[str, str] = {}  # node id -> why it refused
        self.handles: list[Any] = []
        self._host_class: Any = None
        self.nursery: trio.Nursery | None = None  # holds each worker's links (``RayWorker._hold``) and the sampling
        self._spec: dict[str, Any] = {}
        self.workers: list[RayWorker] = []
        self.roster = RosterFile(actor.run_dir, run_id, address, boot_id())
        self._sampling = trio.CancelScope()
        # Each worker keeps its workspaces on its node (bridge/workspaces.py), so RUN_DIR need not be shared.
        self.node_workspaces = self.fleet.workspaces == "node"

    async def open(self, nursery: trio.Nursery) -> None:
        """Join the cluster and prepare what every node checks (the image digest, the run dir token)."""
        from roboswe.sandbox.images import load_image

        self.nursery = nursery
        await trio.to_thread.run_sync(connect, self.address)
        import ray

        nodes = _alive_nodes()
        try:  # again: the cluster may have shrunk since the command planned the workers
            plan_workers(nodes, self.fleet, tasks=1)
        except Infeasible as e:
            raise FleetUnavailable(f"--ray {self.address}: {e}") from None

        token_path = Path(self.actor.run_dir) / TOKEN_FILE
        token_path.parent.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(16)
        token_path.write_text(token)
        transport = self.actor.config.transport
        # A node keeping its own workspaces is not told RUN_DIR: nothing of it may depend on seeing it.
        self._spec = {"run_dir": "" if self.node_workspaces else str(self.actor.run_dir), "run_token": token,
                      "node_workspaces": self.node_workspaces, "image_digest": load_image().digest,
                      "client_public_key": self.public.decode(), "head_boot_id": boot_id(),
                      "heartbeat_interval": transport.heartbeat_interval,
                      "heartbeat_liveness": max(transport.heartbeat_liveness, 5),
                      "log_level": self.actor.config.logging.level}
        self._host_class = ray.remote(WorkerHost)
        log.info("ray_joined", address=self.address, nodes=[n.describe() for n in nodes])
        self.roster.write()
        nursery.start_soon(self._sample)

    async def _sample(self) -> None:
        """Record each running worker's Statistics in the roster, every SAMPLE_SECONDS until the fleet closes.

        Asked here, over the links the job already holds, because only this process has the client key.
        """
        with self._sampling:
            while True:
                await trio.sleep(SAMPLE_SECONDS)
                async with trio.open_nursery() as nursery:
                    for worker in self.workers:
                        if self.roster.row(worker.number).state == "running":
                            nursery.start_soon(worker.sample)
                self.roster.write()

    def _options(self, number: int) -> dict[str, Any]:
        f = self.fleet
        options: dict[str, Any] = {
            "num_cpus": f.ray_cpus, "memory": int(f.ray_memory_gib * 2**30), "max_restarts": MAX_RESTARTS,
            "max_task_retries": -1, "scheduling_strategy": "SPREAD", "namespace": NAMESPACE,
            "name": f"{self.run_id}/worker.{number}/{secrets.token_hex(3)}"}
        if f.ray_gpus:
            options["num_gpus"] = f.ray_gpus
        if self.excluded:
            options["label_selector"] = {"ray.io/node-id": f"!in({','.join(sorted(self.excluded))})"}
        return options

    async def place(self, number: int) -> tuple[Any, Placement]:
        """A new Ray actor for worker ``number`` and where it serves; waits while the cluster has no room."""
        import ray

        spec = msgspec.msgpack.encode(WorkerSpec(number=number, **self._spec))
        for _ in range(MAX_REFUSALS):
            handle = self._host_class.options(**self._options(number)).remote(spec)
            self.handles.append(handle)
            try:
                data = await self._placed(number, handle.endpoints.remote())
            except ray.exceptions.RayActorError as e:
                node = NODE_ID.search(str(e))
                if "NodeRefused" not in str(e) or node is None:
                    raise
                why = str(e)[node.start():].splitlines()[0]
                self.excluded[node.group(1)] = why
                log.warning("node_refused", worker=number, node=node.group(1), reason=why)
                await self.recorder.event("node_refused", None, worker=number, node=node.group(1), reason=why)
                continue
            return handle, msgspec.msgpack.decode(data, type=Placement)
        raise FleetUnavailable(f"worker {number}: {MAX_REFUSALS} nodes refused it: {self.excluded}")

    async def _placed(self, number: int, endpoints: Any) -> bytes:
        """The placed worker's endpoints; a worker still unplaced after ``[fleet] ray_pending_notice`` seconds is
        reported (a ``worker_pending`` event, the roster's ``pending`` for `roboswe status`), never a silent wait."""
        import ray

        waited, notice = 0.0, self.fleet.ray_pending_notice
        while True:
            wait = notice if waited == 0 else 30.0
            try:
                data = await trio.to_thread.run_sync(lambda: ray.get(endpoints, timeout=wait), abandon_on_cancel=True)
            except ray.exceptions.GetTimeoutError:
                waited += wait
                why = (f"not placed and started after {waited:.0f} s: when no node has room for its request it waits "
                       "in Ray's queue (`ray status` shows the pending demand) until a worker finishes or a node joins")
                if waited == notice:
                    log.warning("worker_pending", worker=number, waited=waited)
                    await self.recorder.event("worker_pending", None, worker=number, waited_s=waited)
                self.roster.update(number, pending=why)
                continue
            self.roster.update(number, pending=None)
            return data

    async def replacement(self, number: int, handle: Any, old: Placement) -> tuple[Any, Placement]:
        """The lost worker back: its instance Ray restarted, or a fresh one when Ray gave up on it."""
        import ray

        with trio.fail_after(RELINK_SECONDS):
            while True:
                try:
                    data = await trio.to_thread.run_sync(
                        lambda: ray.get(handle.endpoints.remote(), timeout=30), abandon_on_cancel=True)
                except ray.exceptions.GetTimeoutError:
                    continue
                except ray.exceptions.RayActorError:  # out of restarts, or its restart was refused
                    return await self.place(number)
                placement = msgspec.msgpack.decode(data, type=Placement)
                if (placement.pid, placement.started_at) != (old.pid, old.started_at):
                    return handle, placement
                # The same instance answers while its links are dead (a partition): have Ray restart it.
                log.warning("worker_unreachable_restarting", node=old.node_id, host=old.host)
                await trio.to_thread.run_sync(lambda: ray.kill(handle, no_restart=False))
                await trio.sleep(1.0)

    def client_keys(self, placement: Placement) -> CurveClientKeys:
        return CurveClientKeys(public_key=self.public, secret_key=self.secret,
                               server_key=placement.server_public_key.encode())

    async def release(self, handle: Any) -> None:
        """Stop a worker's processes and end its actor for good (its resources go back to the cluster)."""
        import ray

        with trio.move_on_after(30):
            with contextlib.suppress(Exception):
                await trio.to_thread.run_sync(
                    lambda: ray.get(handle.stop.remote(), timeout=25), abandon_on_cancel=True)
        with contextlib.suppress(Exception):
            ray.kill(handle, no_restart=True)
        with contextlib.suppress(ValueError):
            self.handles.remove(handle)

    async def close(self, workers: list[RayWorker] = ()) -> None:
        import ray

        self._sampling.cancel()
        for worker in workers:
            if worker._release is not None:
                worker._release.set()
            self.roster.update(worker.number, state="released", series=None)
        with trio.CancelScope(shield=True):
            for handle in list(self.handles):
                await self.release(handle)
            await trio.to_thread.run_sync(ray.shutdown)


class RayWorker:
    """One worker as the job sees it: its number, its links, and the Ray actor behind them."""

    def __init__(self, fleet: RayFleet, number: int, links: FleetLinks):
        self.fleet = fleet
        self.number = number
        self.links = links
        links.worker = self
        self.handle: Any = None
        self.placement: Placement | None = None
        self.claimed: str | None = None  # the task it runs next, taken from the job's queue during its last trial
        self._release: trio.Event | None = None  # set: the current links close
        fleet.workers.append(self)
        fleet.roster.update(number, state="placing")

    @property
    def series(self) -> str | None:
        """The series this worker runs now (the job sets it; the roster shows it)."""
        return self.fleet.roster.row(self.number).series

    @series.setter
    def series(self, series_id: str | None) -> None:
        self.fleet.roster.run_series(self.number, series_id)

    async def place(self) -> None:
        try:
            self.handle, placement = await self.fleet.place(self.number)
        except trio.Cancelled:
            self.fleet.roster.update(self.number, state="released")  # every series had a worker: not needed
            raise
        await self._link(placement)

    async def relink(self) -> None:
        """Link to the worker Ray restarted (or a fresh one) after this one's links died."""
        assert self.placement is not None
        log.warning("worker_lost", worker=self.number, node=self.placement.node_id, host=self.placement.host)
        await self.fleet.recorder.event("worker_lost", None, worker=self.number, node=self.placement.node_id)
        row = self.fleet.roster.row(self.number)
        self.fleet.roster.update(self.number, state="lost", restarts=row.restarts + 1, statistics={}, sampled_at=None)
        self.handle, placement = await self.fleet.replacement(self.number, self.handle, self.placement)
        await self._link(placement)

    async def _link(self, placement: Placement) -> None:
        if self._release is not None:
            self._release.set()  # the lost links close in their holder task
        self._release = trio.Event()
        sim, bridge = await self.fleet.nursery.start(self._hold, placement, self._release)
        # The bridge reaches the simulator's robot endpoint on its own node; no keys cross the network.
        self.links.sim = Simulator(sim)
        self.links.bridge = Bridge(bridge, sim_endpoint=placement.robot, sim_keys=None)
        self.placement = placement
        where = {"node": placement.node_id, "host": placement.host, "sim": placement.sim, "bridge": placement.bridge}
        log.info("worker_placed", worker=self.number, pid=placement.pid, **where)
        await self.fleet.recorder.event("worker_placed", None, worker=self.number, image=placement.image_digest,
                                        at=time.time(), workspaces=placement.workspaces or None, **where)
        # The processes' pids as their links' handshakes reported them.
        pids = {"host": placement.pid, "simulator": sim.peer_pid, "sandbox_bridge": bridge.peer_pid}
        self.fleet.roster.update(self.number, state="running", placed_at=placement.started_at,
                                 pids={k: v for k, v in pids.items() if v is not None}, **where)

    async def _hold(self, placement: Placement, release: trio.Event, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Open the links to a placed worker and hold them until ``release`` (a trio task owns what it enters)."""
        actor, transport = self.fleet.actor, self.fleet.actor.config.transport
        curve = self.fleet.client_keys(placement)

        def client(endpoint: str, codec: Any, peer: str) -> Client:
            return Client(actor.name, endpoint, codec, peer=peer, curve=curve, accounts=actor.accounts,
                          heartbeat_interval=transport.heartbeat_interval, liveness=transport.heartbeat_liveness,
                          handshake=False)

        async with client(placement.sim, simp.SIM_CODEC, "simulator") as sim, \
                client(placement.bridge, bridgep.BRIDGE_CODEC, "sandbox_bridge") as bridge:
            with trio.fail_after(LINK_SECONDS):
                await sim.wait_connected()
                await bridge.wait_connected()
            task_status.started((sim, bridge))
            await release.wait()

    async def sample(self) -> None:
        """Ask this worker's simulator and bridge for Statistics (a second at most) into the roster."""
        sampled: dict[str, dict[str, Any]] = {}
        with trio.move_on_after(1.0):
            for kind, peer in (("simulator", self.links.sim), ("sandbox_bridge", self.links.bridge)):
                with contextlib.suppress(Exception):  # a dying link: the next sample, or relink, tells
                    sampled[kind] = msgspec.to_builtins(await peer.statistics())
        if sampled:
            row = self.fleet.roster.row(self.number)
            row.statistics, row.sampled_at = sampled, time.time()

    async def release(self) -> None:
        self.fleet.roster.update(self.number, state="released", series=None)
        if self._release is not None:
            self._release.set()
        if self.handle is not None:
            await self.fleet.release(self.handle)
            self.handle = None


@dataclass
class FleetLinks(Links):
    """Links whose simulator and bridge belong to a Ray-placed worker: waiting for them relinks a lost one."""

    worker: RayWorker | None = field(default=None, repr=False)

    async def wait_alive(self, seconds: float = RESTART_WAIT) -> float:
        t0 = trio.current_time()
        if self.worker is not None and not (self.sim.alive and self.bridge.alive):
            await self.worker.relink()
        return trio.current_time() - t0 + await super().wait_alive(seconds)
