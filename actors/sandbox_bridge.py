"""The sandbox bridge actor: owns each trial's sandbox and the only door from authored code to the robot.

The coordinator sends OpenTrial / ExecScript / CloseTrial on the actor's endpoint. For each
open trial the bridge listens on a unix socket in a per-trial directory mounted read-only
into the sandbox; requests there are screened by ``bridge.allowlist`` (refusals become
``bridge_refused`` events and never reach the simulator) and served by ``bridge.door``
against the simulator's robot endpoint.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Any, AsyncIterator

import structlog
import trio
import zmq
import zmq.utils.monitor
from roboswe.actors import Actor, Client, RemoteError, actor_main
from roboswe.bridge.allowlist import Refusal, screen
from roboswe.bridge.door import Refused, RobotDoor, ScriptSession, refusal_error
from roboswe.protocol import Decoded, Message
from roboswe.protocol import sim as simp
from roboswe.protocol.bridge import (
    BRIDGE_CODEC,
    BRIDGE_ROBOT_CODEC,
    CloseTrial,
    ExecFeedback,
    ExecScript,
    OpenTrial,
    ScriptException,
    ScriptLimits,
    TrialOpened,
)
from roboswe.protocol.control import Error, Ok
from roboswe.sandbox import (
    ProcessOutcome,
    SandboxBackend,
    SandboxError,
    backend_class,
    choose_backend,
)
from roboswe.sandbox.images import SandboxImage, load_image

from ._socket import AsyncSocket

log = structlog.get_logger()

SOCKET_NAME = "robot.sock"
HARD_MAX_FRAME = 1 << 20  # ZMQ_MAXMSGSIZE: a peer sending a bigger frame is dropped before buffering
DROP_BEFORE_EXIT = 0.5  # seconds; see TrialSandbox._report_drops
SIM_DEADLINE = 120.0  # one robot call (a chunk of steps, or rendering every camera)
RUNNER = ["python3", "-m", "roboswe_runner"]
LIMIT_REACHED_TYPES = ("robot.LimitReached", "LimitReached")


def sandbox_env(token: str) -> dict[str, str]:
    """The whole environment of a sandboxed program: nothing of the bridge's own environment leaks in."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",  # replays see the same set/dict iteration order
        "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ in the checkpointed workspace
        "PYTHONUNBUFFERED": "1",  # output printed before a kill is not lost
        "ROBOSWE_BRIDGE": f"ipc:///bridge/{SOCKET_NAME}",
        "ROBOSWE_TOKEN": token,
    }


def _script_path(script: str) -> str:
    p = PurePosixPath(script)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"script {script!r} must be a path relative to the workspace, without '..'")
    return str(p)


class TrialSandbox:
    """One open trial: its sandbox, its bridge socket and its door. Use ``open_trial``."""

    def __init__(self, trial: str, backend: SandboxBackend, door: RobotDoor, bridge_dir: Path, limits: ScriptLimits):
        self.trial = trial
        self.backend = backend
        self.door = door
        self.bridge_dir = bridge_dir
        self.limits = limits
        self.refused_total = 0
        self._lock = trio.Lock()
        self._in_flight = 0
        self._idle = trio.Event()

    @property
    def endpoint(self) -> str:
        return f"ipc://{self.bridge_dir / SOCKET_NAME}"

    async def exec(self, script: str, limits: ScriptLimits | None = None) -> ExecFeedback:
        """Run one workspace script to its end or a limit; raises ValueError for a bad path."""
        script = _script_path(script)
        limits = limits or self.limits
        async with self._lock:  # one script at a time per trial
            session = self.door.begin(script, limits)
            log.info("script_started", trial=self.trial, script=script, backend=self.backend.name)
            try:
                outcome = await self.backend.run([*RUNNER, script], sandbox_env(session.token), limits)
                # setuid/setgid bits the script set must not survive on the host
                await trio.to_thread.run_sync(self.backend.own_workspace)
                # A call the program made just before it ended may still be at the simulator: let it
                # land so the feedback counts every step that moved the robot.
                with trio.move_on_after(SIM_DEADLINE):
                    await self._wait_idle()
            finally:
                self.door.end()
            self._report_drops(session, time.monotonic())
            feedback = _feedback(script, outcome, session, self.backend.name)
        log.info(
            "script_finished",
            trial=self.trial,
            script=script,
            exit_status=feedback.exit_status,
            steps=feedback.steps,
            wall_seconds=round(feedback.wall_seconds, 3),
            limit=feedback.limit,
            exception=feedback.exception.type if feedback.exception else None,
            refused=feedback.refused,
            stdout_bytes=feedback.stdout_bytes,
            stderr_bytes=feedback.stderr_bytes,
        )
        return feedback

    # --- the sandbox-facing socket -----------------------------------------------------------

    async def serve_socket(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        raw = zmq.Context.instance().socket(zmq.ROUTER)
        raw.setsockopt(zmq.MAXMSGSIZE, HARD_MAX_FRAME)
        raw.setsockopt(zmq.LINGER, 0)
        path = self.bridge_dir / SOCKET_NAME
        raw.bind(f"ipc://{path}")
        os.chmod(path, 0o666)  # the sandbox user connects; the directory itself stays read-only to it
        monitor = raw.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        sock, mon = AsyncSocket(raw), AsyncSocket(monitor)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_drops, mon)
                task_status.started()
                while True:
                    frames = await sock.receive()
                    identity, request = frames[0], frames[1:]
                    reply, blobs = await self._answer(request)
                    _env, out = BRIDGE_ROBOT_CODEC.encode(reply, sender="sandbox_bridge", correlation_id=_correlation(request), blobs=blobs)
                    await sock.send([identity, *out])
        finally:
            raw.disable_monitor()
            mon.close(0)
            sock.close(0)

    async def _wait_idle(self) -> None:
        while self._in_flight:
            await self._idle.wait()

    async def _answer(self, request: list[bytes]) -> tuple[Message, list[Any]]:
        self._in_flight += 1
        try:
            return await self._answer_one(request)
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()
                self._idle = trio.Event()

    async def _answer_one(self, request: list[bytes]) -> tuple[Message, list[Any]]:
        screened = screen(request)
        if isinstance(screened, Refusal):
            self._refuse(screened.kind, screened.reason)
            return refusal_error(screened.reason), []
        try:
            with trio.fail_after(SIM_DEADLINE):
                return await self.door.handle(screened)
        except Refused as e:
            self._refuse(e.kind, e.reason)
            return refusal_error(e.reason), []
        except RemoteError as e:
            log.warning("bridge_sim_error", trial=self.trial, code=e.error.code, detail=e.error.detail)
            return Error(code="bridge", detail=f"the simulator refused: {e.error.detail}"), []
        except trio.TooSlowError:
            log.error("bridge_sim_timeout", trial=self.trial, seconds=SIM_DEADLINE)
            return Error(code="bridge", detail=f"the simulator did not answer within {SIM_DEADLINE:.0f} s"), []
        except Exception as e:  # noqa: BLE001 - the bridge keeps serving whatever went wrong
            log.exception("bridge_error", trial=self.trial)
            return Error(code="bridge", detail=f"bridge failure: {type(e).__name__}: {e}"), []

    def _refuse(self, kind: str, reason: str, session: ScriptSession | None = None) -> None:
        self.refused_total += 1
        session = session or self.door.session
        if session is not None:
            session.refused += 1
        log.warning("bridge_refused", trial=self.trial, kind=kind, reason=reason, script=session.script if session else None)

    async def _watch_drops(self, mon: AsyncSocket) -> None:
        while True:
            frames = await mon.receive()
            event = zmq.utils.monitor.parse_monitor_message(frames)
            session = self.door.session
            if session is not None and event["event"] == zmq.EVENT_DISCONNECTED:
                session.drops.append(time.monotonic())

    def _report_drops(self, session: ScriptSession, ended: float) -> None:
        # ZeroMQ drops a peer that sends a frame over HARD_MAX_FRAME without telling us why. The robot
        # module's connection lives as long as the program, so a drop well before the program
        # ended is such a refusal (or a program closing its own socket); a drop at exit is not.
        for dropped in session.drops:
            if ended - dropped > DROP_BEFORE_EXIT:
                self._refuse(
                    "dropped_connection",
                    f"connection dropped {ended - dropped:.1f} s before the program ended: a frame over {HARD_MAX_FRAME} bytes",
                    session,
                )


def _correlation(request: list[bytes]) -> str | None:
    try:
        from roboswe.protocol._codec import _envelope_decoder

        return _envelope_decoder.decode(request[0]).message_id
    except Exception:  # noqa: BLE001 - garbage has no id to correlate
        return None


def _feedback(script: str, outcome: ProcessOutcome, session: ScriptSession, backend: str) -> ExecFeedback:
    """The exec's feedback; never raises, since the outcome carries whatever the program printed."""
    try:
        return _feedback_of(script, outcome, session, backend)
    except Exception as e:  # noqa: BLE001 - the program's output must never fail the bridge
        log.exception("feedback_unreadable", script=script)
        return ExecFeedback(
            script=script, exit_status=outcome.exit_status, stdout="", stderr=f"[roboswe: the program's output could not be shown: {type(e).__name__}]",
            stdout_bytes=outcome.stdout.total_bytes, stderr_bytes=outcome.stderr.total_bytes, stdout_truncated=True,
            stderr_truncated=True, exception=None, steps=session.steps, wall_seconds=outcome.wall_seconds,
            limit=outcome.limit, backend=backend, refused=session.refused,
        )  # fmt: skip


def _feedback_of(script: str, outcome: ProcessOutcome, session: ScriptSession, backend: str) -> ExecFeedback:
    exception = None
    if outcome.exception:
        exception = ScriptException(
            type=str(outcome.exception.get("type", "?")),
            message=str(outcome.exception.get("message", "")),
            traceback=str(outcome.exception.get("traceback", "")),
        )
    limit = outcome.limit
    if limit is None and (session.limit_hit or (exception and exception.type in LIMIT_REACHED_TYPES)):
        limit = "steps"
    return ExecFeedback(
        script=script,
        exit_status=outcome.exit_status,
        stdout=outcome.stdout.text,
        stderr=outcome.stderr.text,
        stdout_bytes=outcome.stdout.total_bytes,
        stderr_bytes=outcome.stderr.total_bytes,
        stdout_truncated=outcome.stdout.truncated,
        stderr_truncated=outcome.stderr.truncated,
        exception=exception,
        steps=session.steps,
        wall_seconds=outcome.wall_seconds,
        limit=limit,
        backend=backend,
        refused=session.refused,
    )


@asynccontextmanager
async def open_trial(
    trial: str,
    workspace: Path,
    sim_endpoint: str,
    *,
    backend: str | None = None,
    limits: ScriptLimits = ScriptLimits(),
    image: SandboxImage | None = None,
    name: str = "sandbox_bridge",
    heartbeat_interval: float = 1.0,
    liveness: int = 5,
    curve: Any = None,
) -> AsyncIterator[TrialSandbox]:
    """Open a trial's sandbox and bridge socket against the simulator's robot endpoint; closes both on exit."""
    image = image or load_image()
    chosen = choose_backend(backend, image)
    # Short path: unix socket paths are limited to ~107 bytes.
    bridge_dir = Path(tempfile.mkdtemp(prefix="roboswe-bridge-", dir="/tmp"))
    os.chmod(bridge_dir, 0o755)
    sandbox = backend_class(chosen)(image, workspace, bridge_dir, trial=trial)
    log.info("sandbox_backend_chosen", trial=trial, backend=chosen, requested=backend, image=image.digest)
    try:
        link = Client(name, sim_endpoint, simp.SIM_ROBOT_CODEC, peer="simulator", heartbeat_interval=heartbeat_interval,
                      liveness=liveness, curve=curve)
        async with link as sim:
            door = RobotDoor(sim.request)
            await sandbox.start(limits)
            try:
                trial_sandbox = TrialSandbox(trial, sandbox, door, bridge_dir, limits)
                async with trio.open_nursery() as nursery:
                    await nursery.start(trial_sandbox.serve_socket)
                    yield trial_sandbox
                    nursery.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    await sandbox.cleanup()
    finally:
        shutil.rmtree(bridge_dir, ignore_errors=True)


# --- the actor ------------------------------------------------------------------------------


def _sim_curve(keys_dir: str | None) -> Any:
    """CURVE client keys for a remote simulator's robot endpoint (OpenTrial.sim_keys), or None."""
    if not keys_dir:
        return None
    from roboswe.commands.keys import client_keys

    return client_keys(keys_dir)


def _sim_robot_endpoint(actor: Actor) -> str:
    from roboswe.actors.simulator import (
        robot_endpoint,  # lazy: the simulator module imports sim/
    )

    return robot_endpoint(actor.endpoints["simulator"])


async def main(actor: Actor) -> None:
    # trial id -> (its sandbox, set to close it, set once it is fully closed)
    trials: dict[str, tuple[TrialSandbox, trio.Event, trio.Event]] = {}

    async with trio.open_nursery() as nursery:

        async def hold_trial(msg: OpenTrial, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
            close, closed = trio.Event(), trio.Event()
            endpoint = msg.sim_endpoint or _sim_robot_endpoint(actor)
            transport = actor.config.transport
            started = False
            try:
                async with open_trial(
                    msg.trial, Path(msg.workspace), endpoint, backend=msg.backend, limits=msg.limits,
                    heartbeat_interval=transport.heartbeat_interval, liveness=max(transport.heartbeat_liveness, 5),
                    curve=_sim_curve(msg.sim_keys),
                ) as t:  # fmt: skip
                    trials[msg.trial] = (t, close, closed)
                    started = True
                    task_status.started(t)
                    await close.wait()
            except Exception:
                if not started:
                    raise  # nursery.start hands it to the OpenTrial handler
                log.exception("trial_failed", trial=msg.trial)  # the actor keeps serving other trials
            finally:
                trials.pop(msg.trial, None)
                closed.set()

        async def handle(decoded: Decoded) -> Message:
            match decoded.message:
                case OpenTrial() as msg:
                    if msg.trial in trials:
                        return Error(code="bad_request", detail=f"trial {msg.trial!r} is already open; close it first")
                    try:
                        t = await nursery.start(hold_trial, msg)
                    except Exception as e:  # noqa: BLE001 - reported to the coordinator, the actor keeps serving
                        log.exception("trial_open_failed", trial=msg.trial)
                        return Error(code="sandbox", detail=f"could not open trial {msg.trial!r}: {e}")
                    return TrialOpened(trial=msg.trial, backend=t.backend.name, image_digest=t.backend.image.digest, bridge_dir=str(t.bridge_dir))
                case ExecScript(script=script, limits=limits, trial=trial):
                    if trial is None and len(trials) == 1:
                        trial = next(iter(trials))
                    if trial not in trials:
                        return Error(code="bad_request", detail=f"no open trial {trial!r}; open: {sorted(trials)}")
                    t = trials[trial][0]
                    try:
                        return await t.exec(script, limits)
                    except ValueError as e:
                        return Error(code="bad_request", detail=str(e))
                    except SandboxError as e:
                        log.error("sandbox_failed", trial=trial, script=script, error=str(e))
                        return Error(code="sandbox", detail=str(e))
                case CloseTrial(trial=trial):
                    entry = trials.get(trial)
                    if entry is None:
                        return Error(code="bad_request", detail=f"trial {trial!r} is not open")
                    _t, close, closed = entry
                    close.set()
                    with trio.move_on_after(60):
                        await closed.wait()  # the container is removed before the coordinator hears Ok
                    return Ok()
            return Error(code="unsupported", detail=f"sandbox_bridge does not handle {type(decoded.message).__name__}")

        await actor.serve(BRIDGE_CODEC, handle)
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    actor_main("sandbox_bridge", main)
