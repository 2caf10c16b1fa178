"""The coordinator's peers as it sees them: one small facade per actor, each owning its deadlines.

A facade sends one boundary's requests over a runtime ``Client`` and checks the type of
each reply, so series, trial and verify read typed replies and never touch a socket. What
a facade may raise for reasons outside the participant is ``INFRA_ERRORS``: ``PeerDead``
(the peer went silent), ``RemoteError`` (it answered ``Error``), ``ProtocolError`` (the
reply did not decode, or ``UnexpectedReply``: it decoded to the wrong type) and
``trio.TooSlowError`` (it missed the facade's deadline).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import structlog
import trio

from roboswe.actors import Client, PeerDead, ProtocolError, RemoteError
from roboswe.protocol import Decoded, Message
from roboswe.protocol import recorder as rec
from roboswe.protocol import sim as simp
from roboswe.protocol.bridge import (
    CloseTrial,
    ExecFeedback,
    ExecScript,
    OpenTrial,
    ScriptLimits,
    TrialOpened,
)
from roboswe.protocol.context import (
    AppendTurns,
    ContextState,
    Prepared,
    PrepareRequest,
    RecordUsage,
    ResetContext,
    SearchHistoryRequest,
    SearchHistoryResult,
)
from roboswe.protocol.control import Ok, Statistics, StatisticsRequest
from roboswe.protocol.participant import DecisionRequest, Turn, Usage
from roboswe.protocol.provider import Decide, Decided, ProviderFailed
from roboswe.sim.backend import PhysicsStates

log = structlog.get_logger()

LOAD_DEADLINE = 300.0  # building a scene (the first robosuite import in a fresh process is slow)
SIM_DEADLINE = 120.0  # any other simulator request
WAIT_ALLOWANCE = 0.5  # seconds per waited control step, on top of SIM_DEADLINE
BRIDGE_DEADLINE = 120.0  # opening and closing a sandbox
EXEC_MARGIN = 60.0  # on top of the script's own wall limit (sandbox start, teardown)
CONTEXT_DEADLINE = 120.0
RECORD_DEADLINE = 60.0
RESTART_WAIT = 120.0  # how long to wait for a peer the supervisor is restarting
DEATH_POLL = 0.25  # how often a trial's watch looks at its peers' links (a few attribute reads)

R = TypeVar("R", bound=Message)


class UnexpectedReply(ProtocolError):
    """A peer answered a request with a message of the wrong type."""

    def __init__(self, peer: str, request: Message, expected: tuple[type, ...], got: Message):
        names = " or ".join(t.__name__ for t in expected)
        super().__init__(f"{peer} answered {type(request).__name__} with {type(got).__name__}, expected {names}")
        self.got = got


INFRA_ERRORS = (PeerDead, RemoteError, ProtocolError, trio.TooSlowError, OSError)
"""What a peer call may raise for reasons outside the participant."""


class Peer:
    """One actor as the coordinator sees it: typed requests with deadlines over a runtime Client."""

    def __init__(self, client: Client):
        self.client = client

    @property
    def alive(self) -> bool:
        return self.client.peer_alive

    async def wait_alive(self) -> None:
        """Return once the peer answers again (after a restart); no deadline of its own."""
        await self.client.wait_peer_alive()

    async def ask(self, message: Message, expected: type[R] | tuple[type, ...], deadline: float,
                  blobs: Sequence[bytes | memoryview] = ()) -> Decoded[R]:
        """Request with a deadline; raises UnexpectedReply unless the reply is of an ``expected`` type."""
        with trio.fail_after(deadline):
            decoded = await self.client.request(message, blobs)
        types = expected if isinstance(expected, tuple) else (expected,)
        if not isinstance(decoded.message, types):
            raise UnexpectedReply(self.client.peer, message, types, decoded.message)
        return decoded

    async def statistics(self) -> Statistics:
        return (await self.ask(StatisticsRequest(), Statistics, SIM_DEADLINE)).message


class Simulator(Peer):
    """The simulator's control endpoint: load a scene, wait, query success, take the recorded states."""

    async def load(self, manifest: dict[str, Any], seed: int, trial_steps: int) -> simp.Loaded:
        """Build the task's scene fresh; the backend is the manifest's simulator family."""
        load = simp.Load(manifest=simp.encode_manifest(manifest), seed=seed, trial_steps=trial_steps)
        return (await self.ask(load, simp.Loaded, LOAD_DEADLINE)).message

    async def compute_seconds(self) -> tuple[float, float]:
        """(physics, rendering) seconds the simulator has spent since its scene was loaded."""
        extra = (await self.statistics()).extra
        return extra.get("physics_seconds", 0.0), extra.get("render_seconds", 0.0)

    async def success(self) -> simp.SuccessStatus:
        return (await self.ask(simp.SuccessQuery(), simp.SuccessStatus, SIM_DEADLINE)).message

    async def wait(self, steps: int) -> simp.StepResult:
        """Advance ``steps`` control steps holding the current targets."""
        return (await self.ask(simp.Wait(steps=steps), simp.StepResult, SIM_DEADLINE + steps * WAIT_ALLOWANCE)).message

    async def observe(self, cameras: list[str], depth: bool) -> tuple[simp.Observation, tuple[bytes | memoryview, ...]]:
        """Camera images (as blobs, indexed from the Observation) and the robot state; physics does not advance."""
        reply = await self.ask(simp.Observe(cameras=cameras, depth=depth), simp.Observation, SIM_DEADLINE)
        return reply.message, reply.blobs

    async def take_states(self) -> PhysicsStates | None:
        """The per-step physics states recorded since the last call (None when there are none)."""
        from roboswe.sim.physics_state import states_from_blobs

        reply = await self.ask(simp.TakeStates(), simp.RecordedStates, SIM_DEADLINE)
        if reply.message.count == 0:
            return None
        return states_from_blobs(reply.message, reply.blobs)

    async def task_record(self, end: str | None) -> tuple[dict[str, Any], dict[str, bytes]]:
        """The task family's evidence of the trial (data, files by name); ``end`` finalizes it (sim.TakeTaskRecord)."""
        reply = await self.ask(simp.TakeTaskRecord(end=end), simp.TaskRecord, SIM_DEADLINE)
        return reply.message.data, {name: bytes(reply.blobs[i]) for name, i in reply.message.files.items()}


    async def goal(self) -> list[tuple[simp.GoalImage, bytes]]:
        """The loaded task's goal images with their bytes (sim.GetGoal); none for most families."""
        reply = await self.ask(simp.GetGoal(), simp.Goal, SIM_DEADLINE)
        return [(image, bytes(reply.blobs[image.blob])) for image in reply.message.images]


class Bridge(Peer):
    """The sandbox bridge: open a trial's sandbox, run workspace scripts in it, close it."""

    def __init__(self, client: Client, *, sim_endpoint: str | None = None, sim_keys: str | None = None):
        super().__init__(client)
        self.sim_endpoint = sim_endpoint  # the simulator robot endpoint the bridge connects to; None: the run's own
        self.sim_keys = sim_keys  # CURVE key directory the bridge uses for a remote simulator

    async def open(self, trial: str, workspace: Path | str, backend: str | None, limits: ScriptLimits) -> TrialOpened:
        """The trial's sandbox around ``workspace``: a host path, or the name of one the bridge keeps on its node."""
        opened = OpenTrial(trial=trial, workspace=str(workspace), backend=backend, limits=limits,
                           sim_endpoint=self.sim_endpoint, sim_keys=self.sim_keys)
        return (await self.ask(opened, TrialOpened, BRIDGE_DEADLINE)).message

    async def exec(self, trial: str, script: str, script_seconds: float) -> ExecFeedback:
        """Run one workspace script to its end or a limit (the deadline is its wall limit plus a margin)."""
        return (await self.ask(ExecScript(script=script, trial=trial), ExecFeedback, script_seconds + EXEC_MARGIN)).message

    async def close(self, trial: str) -> None:
        await self.ask(CloseTrial(trial=trial), Ok, BRIDGE_DEADLINE)


class Context(Peer):
    """The context manager: the series' conversation, the next request, search over archived turns."""

    async def reset(self, series: str) -> ContextState:
        return (await self.ask(ResetContext(series=series), ContextState, CONTEXT_DEADLINE)).message

    async def append(self, turns: list[Turn], image_digests: list[str] = (),
                     images: Sequence[bytes | memoryview] = ()) -> ContextState:
        """Add turns (blob i is the image whose digest is image_digests[i]); the reply counts the archive."""
        message = AppendTurns(turns=turns, image_digests=list(image_digests))
        return (await self.ask(message, ContextState, CONTEXT_DEADLINE, images)).message

    async def archived(self) -> int:
        """How many turns the context manager holds (fewer than acknowledged after a restart)."""
        return (await self.append([])).archived

    async def prepare(self, system: str, trial: int, interface: str = "code") -> tuple[Prepared, tuple[bytes | memoryview, ...]]:
        """The next request offering ``interface``'s tools (sliding the window first if needed) and its images as blobs."""
        reply = await self.ask(PrepareRequest(system=system, trial=trial, interface=interface), Prepared, CONTEXT_DEADLINE)
        return reply.message, reply.blobs

    async def record_usage(self, usage: Usage) -> None:
        await self.ask(RecordUsage(usage=usage), Ok, CONTEXT_DEADLINE)

    async def search(self, query: str) -> SearchHistoryResult:
        return (await self.ask(SearchHistoryRequest(query=query), SearchHistoryResult, CONTEXT_DEADLINE)).message


class Provider(Peer):
    """The provider client: one decision per request."""

    async def decide(self, request: DecisionRequest, image_digests: list[str], images: Sequence[bytes | memoryview],
                     within: float) -> Decided | ProviderFailed | None:
        """The participant's decision, or None when ``within`` seconds (the active time left) ran out first."""
        with trio.move_on_after(max(within, 0.0)):
            reply = await self.client.request(Decide(request=request, image_digests=image_digests), images)
            if not isinstance(reply.message, Decided | ProviderFailed):
                raise UnexpectedReply(self.client.peer, Decide(request=request), (Decided, ProviderFailed), reply.message)
            return reply.message
        return None


class Recorder(Peer):
    """The recorder: fire-and-forget records, durable receipts, checkpoints and artifacts.

    ``seconds`` sums the time spent waiting for receipts (the trial's ``recording`` figure).
    """

    def __init__(self, client: Client, run_id: str):
        super().__init__(client)
        self.run_id = run_id
        self.seconds = 0.0

    async def record(self, record: rec.Record) -> None:
        """Queue a record for the next batch (no receipt)."""
        await self.client.send(record)

    put = record  # roboswe.records.video hands its records to ``put``

    async def durable(self, *records: rec.Record) -> None:
        """Commit records; after a recorder restart, waits for it and sends them again (a repeat is a no-op)."""
        t0 = time.monotonic()
        for attempt in range(2):
            try:
                await self.ask(rec.Durable(records=list(records)), rec.Recorded, RECORD_DEADLINE)
                break
            except PeerDead:
                if attempt:
                    raise
                with trio.move_on_after(RECORD_DEADLINE):
                    await self.wait_alive()
        self.seconds += time.monotonic() - t0

    async def flush(self) -> None:
        """Return once everything sent so far is in the database."""
        await self.ask(rec.Flush(), rec.Recorded, RECORD_DEADLINE)

    async def event(self, event: str, trial: str | None = None, /, **data: Any) -> None:
        await self.record(rec.EventRecord(run_id=self.run_id, event=event, at=time.time(), trial_id=trial, data=data))

    async def checkpoint(self, trial: str, checkpoint_id: str, label: str, workspace: Path,
                         op_seq: int | None) -> rec.CheckpointCaptured:
        """Capture the workspace as a checkpoint (answered after the commit)."""
        t0 = time.monotonic()
        capture = rec.CaptureCheckpoint(checkpoint_id=checkpoint_id, trial_id=trial, label=label,
                                        workspace=str(workspace), op_seq=op_seq)
        reply = await self.ask(capture, rec.CheckpointCaptured, RECORD_DEADLINE)
        self.seconds += time.monotonic() - t0
        return reply.message

    async def carry_checkpoint(self, carry: rec.CarryCheckpoint, frame: bytes | memoryview) -> rec.CheckpointCaptured:
        """Store a checkpoint captured on a worker's node (answered once every blob read back and the commit)."""
        t0 = time.monotonic()
        reply = await self.ask(carry, rec.CheckpointCaptured, RECORD_DEADLINE, [frame])
        self.seconds += time.monotonic() - t0
        return reply.message

    async def store_artifact(self, artifact_id: str, artifact: str, path: str, data: bytes,
                             meta: dict[str, Any], trial_id: str | None = None) -> rec.ArtifactStored:
        """Have the recorder write ``data`` at RUN_DIR/``path``, read it back and record it.

        Raises ProtocolError unless the receipt's sha256 and size are those of ``data``: a path alone is no receipt.
        """
        store = rec.StoreArtifact(artifact_id=artifact_id, run_id=self.run_id, artifact=artifact, path=path, meta=meta,
                                  trial_id=trial_id)
        stored = (await self.ask(store, rec.ArtifactStored, RECORD_DEADLINE, [data])).message
        if (stored.sha256, stored.size) != (hashlib.sha256(data).hexdigest(), len(data)):
            raise ProtocolError(f"artifact {artifact_id}: the recorder's receipt ({stored.sha256[:16]}, {stored.size} "
                                f"bytes) is not the bytes sent ({len(data)})")
        return stored


@dataclass
class Links:
    """The peers a job talks to; provider and context only for a run (a verification needs neither)."""

    sim: Simulator
    bridge: Bridge
    recorder: Recorder
    provider: Provider | None = None
    context: Context | None = None
    # The head's RUN_DIR when each workspace lives on the bridge's node under its name relative to it
    # ([fleet] workspaces = "node"); None: under RUN_DIR here (roboswe/evaluation/workspace.py).
    node_workspaces: Path | None = None

    def peers(self) -> list[Peer]:
        return [p for p in (self.sim, self.bridge, self.recorder, self.provider, self.context) if p is not None]

    async def wait_alive(self, seconds: float = RESTART_WAIT) -> float:
        """Wait (bounded) until every peer answers again, e.g. after the supervisor restarted one; returns seconds waited."""
        t0 = trio.current_time()
        with trio.move_on_after(seconds):
            for peer in self.peers():
                await peer.wait_alive()
        waited = trio.current_time() - t0
        if waited > 0.5:
            log.info("peers_back", waited=round(waited, 2))
        return waited

    @asynccontextmanager
    async def interrupt_on_death(self) -> AsyncIterator[None]:
        """Run the body while every peer stays the process it was on entry; else cancel it and raise PeerDead.

        A peer that dies under a trial costs that trial even when the trial never asks it again:
        a recorder that died lost the records it had queued, a bridge that died took the trial's
        sandbox with it. Its link sees the death within the liveness window (silence), or sooner
        when the supervisor's restart answers at the same endpoint with a new pid.
        """
        watched = [(peer, peer.client.peer_pid) for peer in self.peers()]
        death: list[PeerDead] = []

        async def watch(scope: trio.CancelScope) -> None:
            while True:
                for peer, pid in watched:
                    link = peer.client
                    replaced = pid is not None and link.peer_pid is not None and link.peer_pid != pid
                    if replaced or not link.peer_alive:
                        silent = trio.current_time() - link.last_seen
                        death.append(PeerDead(link.peer, link.endpoint, silent, restarted=replaced))
                        log.warning("peer_lost_under_trial", peer=link.peer, old_pid=pid, pid=link.peer_pid)
                        scope.cancel()
                        return
                await trio.sleep(DEATH_POLL)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch, nursery.cancel_scope)
                yield
                nursery.cancel_scope.cancel()  # the body is done: stop watching
        except BaseExceptionGroup as group:  # the body's own error (or the death's), unwrapped for the caller's except
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        if death:
            raise death[0]
