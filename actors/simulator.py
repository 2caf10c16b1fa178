"""The simulator actor: owns physics and grading, serves two endpoints.

- ``control`` (the actor's endpoint): the coordinator's door. Everything in
  ``SimControlMessage``: Load, Wait, SuccessQuery, TakeStates, plus the robot subset.
- ``robot`` (``actors._endpoints.robot_endpoint(control)``): the sandbox bridge's door. Its codec decodes only
  ``SimRobotMessage`` (GetSpec, GetState, Observe, Step, and Reset, which a series scene refuses: a
  series trial has no reset), so a grading request from that side does not even parse.

``LoadDevelopment`` puts an RLE-Bench development phase in place of the series scene
(``roboswe.rle.scene.DevelopmentSim``: the family's development scene and the ledger, on this
trusted side): both endpoints' robot requests, Reset included, answer from it (``_development``)
until a Load ends it. ``LoadEvaluation`` does the same for an evaluation phase drawn from the salt here
(``roboswe.rle.scene.EVALUATIONS``): a speed-run's five hidden kitchens (family 01's ``EvaluationSim``),
whose trials ``FinishTrial`` and ``NextTrial`` (control endpoint only: the coordinator forwards the
participant's operations) move through, or one harness-transfer attempt in its hidden kitchen (family 02's
``TransferTrialSim``, the attempt named in the message). ``EndAttempt`` (control endpoint only) ends a
Tabletop Physical Reasoning attempt there (released, settled and scored on this side), a speed-run's
evaluation or a transfer attempt (its stage record); the run directory's files are in the reply.

  A bridge on the same host reaches the same door over a plain unix stream beside it
  (actors/_robot_stream.py): fewer wake-ups per step than ZeroMQ's I/O threads.

One thread owns the scene's GL context and does the building and rendering; the trio loop only
awaits it, so heartbeats flow while physics and rendering run. A robot stream's connection
thread steps the scene itself (physics is not tied to a thread). A lock keeps the scene to one
thread at a time; requests of one endpoint are applied in arrival order.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, assert_never

import msgspec
import structlog
import trio
from roboswe.actors import Accounts, Actor, CurveServerKeys, Server, actor_main
from roboswe.actors._endpoints import robot_endpoint, stream_path
from roboswe.actors._robot_stream import RobotStreamServer
from roboswe.protocol import Decoded
from roboswe.protocol.bridge import RESET_ONLY_IN_DEVELOPMENT
from roboswe.protocol.control import Error, Ok
from roboswe.protocol.sim import (
    SIM_CODEC,
    SIM_ROBOT_CODEC,
    EndAttempt,
    FinishTrial,
    GetGoal,
    GetSpec,
    GetState,
    Load,
    LoadDevelopment,
    LoadEvaluation,
    NextTrial,
    Observe,
    Prepare,
    Reset,
    SimControlMessage,
    SimReply,
    SimRequest,
    SimRobotMessage,
    SimRobotReply,
    SimRobotRequest,
    Step,
    SuccessQuery,
    TakeStates,
    TakeTaskRecord,
    Wait,
)
from roboswe.sim.backend import SimError
from roboswe.sim.session import SimSession

log = structlog.get_logger()

T = TypeVar("T")

def _hops(sent_at: float, arrived: float, stamps: list[float], actions: int) -> dict[str, float]:
    """One robot Step's hops (CLOCK_MONOTONIC, comparable across processes on one host) as accounts.

    Reported under ``Statistics.extra`` as ``hop.step1.*`` (one action) or ``hop.stepN.*`` (a
    chunk): seconds summed per hop, and ``count``; benchmarks/sandbox.py prints them per step.
    ``stamps``: physics start and end; the call's end is now (back on the loop over ZeroMQ, on the
    connection thread over the stream).
    """
    prefix = "hop.step1." if actions == 1 else "hop.stepN."
    done = time.monotonic()
    return {prefix + "count": 1.0, prefix + "bridge_to_sim": arrived - sent_at,
            prefix + "sim_before_physics": stamps[0] - arrived, prefix + "physics": stamps[1] - stamps[0],
            prefix + "sim_after_physics": done - stamps[1]}


class RobotCall:
    """One accepted robot request: the scene call that answers it and, for a Step, its hop stamps (``_hops``)."""

    def __init__(self, fn: Callable[..., Any], args: tuple = (), *, renders: bool = False,
                 stamped: tuple[float, int] | None = None):
        self.fn = fn
        self.renders = renders  # needs the GL context: only the scene thread may run it
        self.arrived = time.monotonic()
        self._stamped = stamped  # (the request envelope's sent_at, actions in the chunk)
        self._stamps: list[float] = []  # physics start and end, appended by the stepping call
        self.args = (*args, self._stamps) if stamped else args

    def accounted(self, accounting: dict[str, float]) -> dict[str, float]:
        """The scene call's accounting, plus this Step's hops once its physics ran (stamped now: back on the caller)."""
        if self._stamped is None or len(self._stamps) != 2:
            return accounting
        sent_at, actions = self._stamped
        return {**accounting, **_hops(sent_at, self.arrived, self._stamps, actions)}


class _SceneThread:
    """The one thread that builds, steps and renders the scene."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sim-scene")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the scene thread; the trio loop keeps serving meanwhile.

        One thread hop each way (the future's callback wakes the loop), rather than parking a
        trio worker thread on the future. A step cannot be interrupted, so cancellation waits.
        """
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()
        future = self._pool.submit(fn, *args)
        future.add_done_callback(lambda _: token.run_sync_soon(done.set))
        with trio.CancelScope(shield=True):
            await done.wait()
        return future.result()

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        """Queue ``fn(*args)`` on the scene thread from any other thread."""
        return self._pool.submit(fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class SimulatorService:
    """Message handlers for both endpoints over one SimSession."""

    def __init__(self, session: SimSession, accounts: Accounts):
        self.session = session
        self.accounts = accounts
        self.scene = _SceneThread()
        self._lock = trio.Lock()  # both endpoints share the scene: one request at a time
        # The robot stream's connection threads step the scene themselves (no hop to the scene
        # thread); this lock keeps the scene to one thread at a time. GL work stays on the scene thread.
        self._scene_lock = threading.Lock()
        self._unsent = threading.local()  # per stream thread: the accounting of the reply being sent
        self.nursery: trio.Nursery | None = None  # where Prepare's builds run (serve_simulator's)
        self._staging: trio.Event | None = None  # set when the scene Prepare asked for is staged (or failed)
        # An RLE-Bench phase while it lasts: a roboswe.rle.scene.DevelopmentSim (LoadDevelopment) or a family's
        # evaluation phase (LoadEvaluation, roboswe.rle.scene.EVALUATIONS); both answer the same calls.
        self.development: Any = None

    def _guarded(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, dict[str, float]]:
        """Run ``fn`` with the scene to itself; a SimError becomes the Error reply. Any thread."""
        with self._scene_lock:
            try:
                return fn(*args), self.session.accounting()
            except SimError as e:
                return Error(code=e.code, detail=str(e)), self.session.accounting()

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        async with self._lock:
            reply, accounting = await self.scene.run(self._guarded, fn, *args)
        self._account(accounting)
        return reply

    def _account(self, accounting: dict[str, float]) -> None:
        """Add a scene call's accounting; any thread (the stream's threads add theirs without waking the loop)."""
        self.accounts.add_all(accounting)

    # --- the robot endpoint: one call path, two transports -------------------------------------

    def robot_call(self, decoded: Decoded[SimRobotMessage]) -> RobotCall | Error:
        """What a robot request runs on the scene, or the Error that refuses it (anything outside the
        bridge's subset, an empty Step). Both transports take this path: ZeroMQ (``handle_robot``) and
        the local unix stream (``answer_robot_stream``)."""
        message = decoded.message
        if not isinstance(message, SimRobotRequest):
            kind = type(message).__name__
            log.warning("robot_request_refused", kind=kind, sender=decoded.envelope.sender)
            return Error(code="refused", detail=f"the robot endpoint does not accept {kind}")
        if self.development is not None:  # a development phase (LoadDevelopment): its scene and ledger answer
            # Observe renders and Reset builds the next scene: the scene thread, which owns GL; the rest need no GL.
            return RobotCall(self.development.answer, (message,), renders=isinstance(message, Observe | Reset))
        s = self.session
        match message:
            case Observe(cameras=cameras, depth=depth):
                return RobotCall(s.observe, (cameras, depth), renders=True)
            case Step(actions=actions) if actions:
                return RobotCall(self._stamped_step, (actions,), stamped=(decoded.envelope.sent_at, len(actions)))
            case Step():
                return Error(code="invalid_action", detail="Step needs at least one action")
            case GetSpec():
                return RobotCall(s.spec)
            case GetState():
                return RobotCall(s.state)
            case Reset():
                return Error(code="reset", detail=RESET_ONLY_IN_DEVELOPMENT)
            case _:
                assert_never(message)

    def _stamped_step(self, actions: list[list[float]], stamps: list[float]) -> Any:
        stamps.append(time.monotonic())
        try:
            return self.session.step(actions)
        finally:
            stamps.append(time.monotonic())

    async def handle_robot(self, decoded: Decoded[SimRobotMessage]) -> SimRobotReply | tuple[SimRobotReply, list[bytes]]:
        """A robot call over ZeroMQ: run on the scene thread, one request at a time with the control endpoint's."""
        call = self.robot_call(decoded)
        if isinstance(call, Error):
            return call
        async with self._lock:
            reply, accounting = await self.scene.run(self._guarded, call.fn, *call.args)
        self._account(call.accounted(accounting))
        return reply

    def answer_robot_stream(self, decoded: Decoded[SimRobotMessage]) -> Any:
        """A robot call from a local bridge (actors/_robot_stream.py), answered on the calling connection thread.

        Everything but Observe runs right here under the scene lock (physics has no thread
        affinity); Observe renders on the scene thread, which owns the GL context.
        """
        call = self.robot_call(decoded)
        if isinstance(call, Error):
            return call
        if call.renders:
            reply, accounting = self.scene.submit(self._guarded, call.fn, *call.args).result()
        else:
            reply, accounting = self._guarded(call.fn, *call.args)
        self._unsent.accounting = call.accounted(accounting)  # handed to the loop once the reply is out (after_robot_reply)
        return reply

    def after_robot_reply(self) -> None:
        accounting, self._unsent.accounting = getattr(self._unsent, "accounting", None), None
        if accounting:
            self._account(accounting)

    async def handle_control(self, decoded: Decoded[SimControlMessage]) -> SimReply | tuple[SimReply, list[bytes]]:
        s = self.session
        message = decoded.message
        if not isinstance(message, SimRequest):
            return Error(code="unsupported", detail=f"simulator does not handle {type(message).__name__}")
        if isinstance(message, LoadDevelopment | LoadEvaluation) or (self.development is not None and not isinstance(message, Load)):
            return await self._development(message)
        match message:
            case Load(manifest=manifest, seed=seed, trial_steps=trial_steps, backend=backend):
                await self._end_development()
                await self._staging_done()  # the scene being staged may be the one asked for
                reply = await self._call(s.load, manifest, seed, trial_steps, backend)
                if not isinstance(reply, Error):
                    log.info("task_loaded", task=reply.spec.task_id, seed=seed, fingerprint=reply.fingerprint.digest,
                             staged=reply.staged)
                return reply
            case Prepare(manifest=manifest, seed=seed, trial_steps=trial_steps, backend=backend):
                await self._staging_done()  # one build at a time
                assert self.nursery is not None
                self._staging = trio.Event()
                self.nursery.start_soon(self._stage, manifest, seed, trial_steps, backend, self._staging)
                return Ok()
            case Wait(steps=steps):
                if steps < 0:
                    return Error(code="invalid_action", detail=f"Wait steps must be >= 0, got {steps}")
                return await self._call(s.wait, steps)
            case SuccessQuery():
                return await self._call(s.success)
            case TakeStates():
                return await self._call(s.take_states)
            case TakeTaskRecord(end=end):
                return await self._call(s.task_record, end)
            case GetGoal():
                return await self._call(s.goal)
            case GetSpec() | GetState() | Observe() | Step() | Reset():
                return await self.handle_robot(decoded)
            case LoadDevelopment() | LoadEvaluation():
                raise AssertionError("answered by _development")
            case EndAttempt():
                return Error(code="refused", detail="no RLE-Bench attempt is loaded (LoadDevelopment first)")
            case FinishTrial() | NextTrial():
                return Error(code="refused", detail="no RLE-Bench evaluation phase is loaded (LoadEvaluation first)")
            case _:
                assert_never(message)

    async def _development(self, message: SimRequest) -> Any:
        """The control endpoint during an RLE-Bench development phase (protocol/sim.py LoadDevelopment).

        Every call holds the scene lock as the robot stream's do (``_call``): the coordinator's GetState
        never interleaves with a script's Step, and the ledger's charge/confirm pairs stay whole."""
        from roboswe.rle import scene

        dev = self.development
        match message:
            case LoadDevelopment() | LoadEvaluation():
                await self._end_development()
                # built on the scene thread, which owns GL (the scene's renderer)
                self.development = dev = await self._call(scene.phase_from_wire, message)
                log.info("development_loaded", task=dev.task.id, phase=type(message).__name__)
                return dev.loaded()
            case FinishTrial() | NextTrial() if hasattr(dev, "move_trial"):  # NextTrial builds a kitchen: the scene thread
                return await self._call(dev.move_trial, message)
            case FinishTrial() | NextTrial():
                return Error(code="refused", detail=f"{dev.task.id}: a development phase has no trials to move through")
            case GetSpec() | GetState() | Observe() | Step() | Reset():
                return await self._call(dev.answer, message)
            case SuccessQuery():
                return await self._call(dev.success)
            case TakeTaskRecord():
                return await self._call(dev.task_record)
            case TakeStates():
                return dev.no_states()
            case EndAttempt():  # the trusted side scores the attempt (family 03), on the scene thread
                return await self._call(dev.end_attempt)
            case GetGoal():
                return scene.NO_GOAL
        return Error(code="refused", detail=f"a development phase does not take {type(message).__name__}")

    async def _end_development(self) -> None:
        if self.development is not None:
            dev, self.development = self.development, None
            await self._call(dev.close)

    async def _stage(self, manifest: msgspec.Raw, seed: int, trial_steps: int | None, backend: str | None, done: trio.Event) -> None:
        """Build the next scene on a worker thread, neither on the scene thread nor under the scene lock: the
        loaded scene keeps stepping and rendering meanwhile (the model compile and GL-free build mostly run
        without the GIL), so a trial that waits on its participant hides the build entirely. A failed
        build is logged; that Load builds the scene itself."""
        t0 = time.monotonic()
        try:
            # First the scene this trial's Load replaced (its GL side already went to the loaded scene): a
            # robosuite close collects the whole heap and frees the model, ~35 ms the Load no longer waits for.
            for retired in await self._call(self.session.take_retired):
                await trio.to_thread.run_sync(retired.close)
            # abandon_on_cancel: a stopping simulator does not wait seconds for a kitchen it will never use
            staged = await trio.to_thread.run_sync(self.session.build, manifest, seed, trial_steps, backend,
                                                   abandon_on_cancel=True)
            await self._call(self.session.stage, staged)
            log.info("scene_staged", seed=seed, seconds=round(time.monotonic() - t0, 3))
        except Exception as e:  # noqa: BLE001 - staging is an optimisation; Load reports a real failure
            log.warning("scene_staging_failed", seed=seed, error=f"{type(e).__name__}: {e}")
        finally:
            done.set()

    async def _staging_done(self) -> None:
        if self._staging is not None:
            await self._staging.wait()
            self._staging = None

    async def aclose(self) -> None:
        """Close the scene; always finishes, logging (not raising) a failure to free it."""
        try:
            with trio.CancelScope(shield=True):
                await self._end_development()
                await self.scene.run(self.session.close)
        except Exception:
            log.exception("scene_close_failed")
        finally:
            self.scene.close()


async def serve_simulator(
    name: str,
    control: str,
    robot: str | None = None,
    *,
    curve: CurveServerKeys | None = None,
    accounts: Accounts | None = None,
    require_fixed_hash_seed: bool = True,
    task_status=trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve both endpoints until Shutdown arrives on the control endpoint.

    ``task_status.started`` receives (control endpoint, robot endpoint) as actually bound.
    """
    accounts = accounts or Accounts(name)
    service = SimulatorService(SimSession(require_fixed_hash_seed=require_fixed_hash_seed, settle_heap=True), accounts)
    control_server = Server(name, control, SIM_CODEC, service.handle_control, curve=curve, accounts=accounts, concurrent=False)

    # Only the coordinator may stop the simulator: the robot endpoint refuses a Shutdown and keeps serving.
    robot_server = Server(f"{name}.robot", robot or robot_endpoint(control), SIM_ROBOT_CODEC, service.handle_robot,
                          curve=curve, accounts=accounts, concurrent=False, stops_on_shutdown=False)

    stream = None
    try:
        async with trio.open_nursery() as nursery:
            service.nursery = nursery
            await nursery.start(robot_server.serve)
            robot_bound = robot_server.endpoint  # the port the OS picked for tcp://...:0
            if (path := stream_path(robot_bound)) is not None:  # a bridge on this host skips ZeroMQ's threads
                stream = RobotStreamServer(path, service.answer_robot_stream, name=f"{name}.robot",
                                           after_reply=service.after_robot_reply)
                stream.start()
            await nursery.start(control_server.serve)
            log.info("simulator_ready", control=control_server.endpoint, robot=robot_bound)
            task_status.started((control_server.endpoint, robot_bound))
            await control_server.shutdown_requested.wait()
            await trio.sleep(0.1)  # let the Ok leave
            nursery.cancel_scope.cancel()
    finally:
        if stream is not None:
            stream.close()
        await service.aclose()


async def main(actor: Actor) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")  # headless offscreen rendering; set before mujoco loads
    await serve_simulator(actor.name, actor.endpoint, accounts=actor.accounts)


if __name__ == "__main__":
    actor_main("simulator", main)
