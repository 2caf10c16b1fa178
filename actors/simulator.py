"""The simulator actor: owns physics and grading, serves two endpoints.

- ``control`` (the actor's endpoint): the coordinator's door. Everything in
  ``SimControlMessage``: Load, Wait, SuccessQuery, TakeStates, plus the robot subset.
- ``robot`` (``robot_endpoint(control)``): the sandbox bridge's door. Its codec decodes only
  ``SimRobotMessage`` (GetSpec, GetState, Observe, Step), so a reset or a grading request
  from that side does not even parse.

One thread owns the scene (MuJoCo GL contexts belong to a thread); the trio loop only
awaits it, so heartbeats flow while physics and rendering run. Requests from both
endpoints are applied one at a time in arrival order.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Callable
from typing import Any, TypeVar, assert_never

import structlog
import trio
from roboswe.actors import Accounts, Actor, CurveServerKeys, Server, actor_main
from roboswe.protocol import Decoded
from roboswe.protocol.control import Error
from roboswe.protocol.sim import (
    SIM_CODEC,
    SIM_ROBOT_CODEC,
    GetSpec,
    GetState,
    Load,
    Observe,
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

ROBOT_SUFFIX = "-robot"


def robot_endpoint(control_endpoint: str) -> str:
    """Where the robot endpoint listens, given the control endpoint (same rule on every host).

    ipc://DIR/simulator.sock -> ipc://DIR/simulator-robot.sock; tcp://HOST:PORT -> tcp://HOST:PORT+1
    (tcp port 0 stays 0: the OS picks one and the server reports it).
    """
    if control_endpoint.startswith("ipc://"):
        path = control_endpoint[6:]
        stem, dot, ext = path.rpartition(".")
        return f"ipc://{stem}{ROBOT_SUFFIX}.{ext}" if dot else f"ipc://{path}{ROBOT_SUFFIX}"
    if control_endpoint.startswith("tcp://"):
        host, _, port = control_endpoint[6:].rpartition(":")
        return f"tcp://{host}:{int(port) + 1 if int(port) else 0}"
    raise ValueError(f"simulator endpoint {control_endpoint!r}: expected ipc:// or tcp://")


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

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class SimulatorService:
    """Message handlers for both endpoints over one SimSession."""

    def __init__(self, session: SimSession, accounts: Accounts):
        self.session = session
        self.accounts = accounts
        self.scene = _SceneThread()
        self._lock = trio.Lock()  # both endpoints share the scene: one request at a time

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        def work() -> tuple[Any, dict[str, float]]:
            try:
                return fn(*args), self.session.accounting()
            except SimError as e:
                return Error(code=e.code, detail=str(e)), self.session.accounting()

        async with self._lock:
            reply, accounting = await self.scene.run(work)
        for name, amount in accounting.items():
            self.accounts.add(name, amount)
        return reply

    async def handle_robot(self, decoded: Decoded[SimRobotMessage]) -> SimRobotReply | tuple[SimRobotReply, list[bytes]]:
        """The bridge's subset; anything else that decodes here is refused."""
        s = self.session
        message = decoded.message
        if not isinstance(message, SimRobotRequest):
            kind = type(message).__name__
            log.warning("robot_request_refused", kind=kind, sender=decoded.envelope.sender)
            return Error(code="refused", detail=f"the robot endpoint does not accept {kind}")
        match message:
            case GetSpec():
                return await self._call(s.spec)
            case GetState():
                return await self._call(s.state)
            case Observe(cameras=cameras, depth=depth):
                return await self._call(s.observe, cameras, depth)
            case Step(actions=actions):
                if not actions:
                    return Error(code="invalid_action", detail="Step needs at least one action")
                return await self._call(s.step, actions)
            case _:
                assert_never(message)

    async def handle_control(self, decoded: Decoded[SimControlMessage]) -> SimReply | tuple[SimReply, list[bytes]]:
        s = self.session
        message = decoded.message
        if not isinstance(message, SimRequest):
            return Error(code="unsupported", detail=f"simulator does not handle {type(message).__name__}")
        match message:
            case Load(manifest=manifest, seed=seed, trial_steps=trial_steps, backend=backend):
                reply = await self._call(s.load, manifest, seed, trial_steps, backend)
                if not isinstance(reply, Error):
                    log.info("task_loaded", task=reply.spec.task_id, seed=seed, fingerprint=reply.fingerprint.digest)
                return reply
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
            case GetSpec() | GetState() | Observe() | Step():
                return await self.handle_robot(decoded)
            case _:
                assert_never(message)

    async def aclose(self) -> None:
        """Close the scene; always finishes, logging (not raising) a failure to free it."""
        try:
            with trio.CancelScope(shield=True):
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
    service = SimulatorService(SimSession(require_fixed_hash_seed=require_fixed_hash_seed), accounts)
    control_server = Server(name, control, SIM_CODEC, service.handle_control, curve=curve, accounts=accounts, concurrent=False)

    async def keep_robot_endpoint(task_status=trio.TASK_STATUS_IGNORED) -> None:
        # The runtime answers Shutdown on every endpoint; only the coordinator may stop the
        # simulator, so a robot-side Shutdown just re-opens the robot endpoint.
        endpoint = robot or robot_endpoint(control)
        while True:
            server = Server(f"{name}.robot", endpoint, SIM_ROBOT_CODEC, service.handle_robot,
                            curve=curve, accounts=accounts, concurrent=False)
            async with trio.open_nursery() as inner:
                await inner.start(server.serve)
                endpoint = server.endpoint  # keep the port the OS picked for tcp://...:0
                task_status.started(endpoint)
                task_status = trio.TASK_STATUS_IGNORED
            log.warning("robot_shutdown_ignored", detail="Shutdown on the robot endpoint; serving it again")

    try:
        async with trio.open_nursery() as nursery:
            robot_bound = await nursery.start(keep_robot_endpoint)
            await nursery.start(control_server.serve)
            log.info("simulator_ready", control=control_server.endpoint, robot=robot_bound)
            task_status.started((control_server.endpoint, robot_bound))
            await control_server.shutdown_requested.wait()
            await trio.sleep(0.1)  # let the Ok leave
            nursery.cancel_scope.cancel()
    finally:
        await service.aclose()


async def main(actor: Actor) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")  # headless offscreen rendering; set before mujoco loads
    await serve_simulator(actor.name, actor.endpoint, accounts=actor.accounts)


if __name__ == "__main__":
    actor_main("simulator", main)
