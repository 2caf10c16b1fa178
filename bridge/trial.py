"""One open trial of the sandbox bridge: its sandbox, the per-trial bridge socket and the door behind it.

For each open trial the bridge listens on a plain unix stream socket in a per-trial directory
mounted read-only into the sandbox. Its protocol is the bridge's own (``bridge.wire``: a message is
announced with its whole size and refused unread above HARD_MAX_REQUEST), at most
MAX_CONNECTIONS connections are held at once and all of them close when the script ends,
so no sandboxed program can make the bridge buffer, hold descriptors or recurse without
bound. Requests are screened by ``bridge.allowlist`` (refusals become ``bridge_refused``
events and never reach the simulator) and served one at a time by ``bridge.door`` against
the simulator's robot endpoint, reached through the ``SimLink`` the caller opens (``roboswe.actors.robot_link``:
no ZeroMQ here).

The actor (actors/sandbox_bridge.py) only turns OpenTrial / ExecScript / CloseTrial into
``open_trial`` and ``TrialSandbox.exec``; tests, benchmarks and ``roboswe exec`` use them directly.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import structlog
import trio
from roboswe.protocol import Message
from roboswe.protocol._codec import _envelope_decoder
from roboswe.protocol.bridge import (
    BRIDGE_ROBOT_CODEC,
    ExecFeedback,
    ScriptException,
    ScriptLimits,
)
from roboswe.protocol.control import Error
from roboswe.sandbox import (
    ProcessOutcome,
    SandboxBackend,
    backend_class,
    choose_backend,
)
from roboswe.sandbox.images import SandboxImage, load_image
from roboswe.sandbox.volume import WORKSPACE_MB, VolumeError, WorkspaceVolume
from roboswe.sandbox.volume import available as volume_available

from . import wire
from .allowlist import Refusal, request_kind, screen
from .door import Refused, RobotDoor, ScriptSession, SimLink, SimRefused, refusal_error

log = structlog.get_logger()

SOCKET_NAME = "robot.sock"
HARD_MAX_REQUEST = 1 << 20
"""A request announcing more bytes is refused unread and its connection closed (the allow-list
refuses anything over MAX_REQUEST_BYTES, 256 KiB, on a connection that stays open)."""
MAX_CONNECTIONS = 8
"""Connections to the bridge socket held at once; one more is refused and closed."""
MAX_LOGGED_REFUSALS = 100
"""bridge_refused events logged per script; the rest are counted (a flood must not flood the log)."""
SIM_DEADLINE = 120.0  # one robot call (a chunk of steps, or rendering every camera)
LANDING_SECONDS = 30.0  # after the program ended, for its last call to land (the coordinator allows 60 s)
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
        "ROBOSWE_BRIDGE": f"/bridge/{SOCKET_NAME}",
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
        self._serving = trio.Lock()  # robot calls reach the door one at a time, whatever the connection
        self._connections: set[trio.CancelScope] = set()
        # Per robot-call kind (Step, StepMany): seconds summed per hop and a count; see hop_accounting.
        self.hops: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))

    @property
    def socket_path(self) -> Path:
        return self.bridge_dir / SOCKET_NAME

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
                # land so the feedback counts every step that moved the robot, but within the
                # coordinator's margin for an exec (a late chunk must not make the exec time out there).
                with trio.move_on_after(LANDING_SECONDS):
                    await self._wait_idle()
            finally:
                self.door.end()
                for connection in list(self._connections):
                    connection.cancel()  # nothing of this script keeps talking to the bridge
            if session.refused > MAX_LOGGED_REFUSALS:
                log.warning("bridge_refusals_not_logged", trial=self.trial, script=script,
                            count=session.refused - MAX_LOGGED_REFUSALS)
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
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(str(self.socket_path))
        sock.listen(64)  # the kernel's queue, not the bridge's memory: refused connections drain fast
        os.chmod(self.socket_path, 0o666)  # the sandbox user connects; the directory itself stays read-only to it
        listener = trio.SocketListener(sock)
        async with listener, trio.open_nursery() as nursery:
            task_status.started()
            while True:
                try:
                    stream = await listener.accept()
                except OSError as e:  # e.g. EMFILE: the bridge's own descriptors ran short; wait, never die
                    log.warning("bridge_accept_failed", trial=self.trial, error=e.strerror)
                    await trio.sleep(0.1)
                    continue
                if len(self._connections) >= MAX_CONNECTIONS:
                    self._refuse("too_many_connections", f"at most {MAX_CONNECTIONS} connections to the bridge at once")
                    await stream.aclose()
                    continue
                scope = trio.CancelScope()
                self._connections.add(scope)
                nursery.start_soon(self._serve_connection, stream, scope)

    async def _serve_connection(self, stream: trio.SocketStream, scope: trio.CancelScope) -> None:
        """Answer one connection's requests in order until it closes, breaks the framing or the script ends."""
        reader = wire.FrameReader(HARD_MAX_REQUEST, what="request")  # exact reads: nothing read ahead
        try:
            with scope:
                async with stream:
                    while True:
                        try:
                            request = await wire.receive_message(stream.receive_some, reader)
                        except EOFError:
                            return
                        except wire.FrameError as e:
                            kind = "oversized" if isinstance(e, wire.FrameTooLarge) else "garbage"
                            self._refuse(kind, f"{e}; the connection is closed")
                            await self._send(stream, refusal_error(str(e)), [], None)
                            return
                        arrived = time.monotonic()
                        self.door.last_sim = None
                        reply, blobs = await self._answer(request)
                        await self._send(stream, reply, blobs, _correlation(request))
                        self._account_hops(request, arrived)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the program went away
        finally:
            self._connections.discard(scope)

    async def _send(self, stream: trio.SocketStream, reply: Message, blobs: list[Any], correlation: str | None) -> None:
        _env, out = BRIDGE_ROBOT_CODEC.encode(reply, sender="sandbox_bridge", correlation_id=correlation, blobs=blobs)
        await stream.send_all(wire.encode(out))

    def _account_hops(self, request: list[bytes], arrived: float) -> None:
        """Add one answered Step / StepMany's hops (CLOCK_MONOTONIC stamps: the request's envelope, ours,
        the simulator reply's envelope); the simulator accounts its own inner hops (actors/simulator.py)."""
        sim = self.door.last_sim
        if sim is None or len(request) < 2:
            return
        kind = request_kind(request)
        if kind not in ("Step", "StepMany"):
            return
        try:
            sent_at = _envelope_decoder.decode(request[0]).sent_at
        except Exception:  # noqa: BLE001 - already answered; a garbled envelope has no stamp
            return
        sent, sim_replied, received = sim
        h = self.hops[kind]
        h["count"] += 1
        h["runner_to_bridge"] += arrived - sent_at
        h["bridge_in"] += sent - arrived
        h["sim_round_trip"] += received - sent
        h["sim_to_bridge"] += received - sim_replied
        h["bridge_out"] += time.monotonic() - received

    async def _wait_idle(self) -> None:
        while self._in_flight:
            await self._idle.wait()

    async def _answer(self, request: list[bytes]) -> tuple[Message, list[Any]]:
        self._in_flight += 1
        try:
            async with self._serving:
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
        except SimRefused as e:
            log.warning("bridge_sim_error", trial=self.trial, code=e.error.code, detail=e.error.detail)
            return Error(code="bridge", detail=f"the simulator refused: {e.error.detail}"), []
        except trio.TooSlowError:
            log.error("bridge_sim_timeout", trial=self.trial, seconds=SIM_DEADLINE)
            return Error(code="bridge", detail=f"the simulator did not answer within {SIM_DEADLINE:.0f} s"), []
        except Exception as e:  # noqa: BLE001 - the bridge keeps serving whatever went wrong
            log.exception("bridge_error", trial=self.trial)
            return Error(code="bridge", detail=f"bridge failure: {type(e).__name__}: {e}"), []

    def _refuse(self, kind: str, reason: str) -> None:
        self.refused_total += 1
        session = self.door.session
        if session is not None:
            session.refused += 1
            if session.refused > MAX_LOGGED_REFUSALS:
                return
        elif self.refused_total > MAX_LOGGED_REFUSALS:
            return
        log.warning("bridge_refused", trial=self.trial, kind=kind, reason=reason, script=session.script if session else None)


def _correlation(request: list[bytes]) -> str | None:
    try:
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
    sim: SimLink,
    *,
    backend: str | None = None,
    limits: ScriptLimits = ScriptLimits(),
    image: SandboxImage | None = None,
    workspace_mb: int | None = WORKSPACE_MB,
    resets: bool = False,
) -> AsyncIterator[TrialSandbox]:
    """Open a trial's sandbox and bridge socket, its door asking the simulator through ``sim`` (e.g.
    ``async with roboswe.actors.robot_link(endpoint) as sim``); closes both on exit.

    With ``workspace_mb`` (and root), the workspace is a filesystem of that size while the trial is open.
    ``resets``: the door forwards robot.reset() (an RLE-Bench development phase only; a series trial refuses it).
    """
    image = image or load_image()
    chosen = choose_backend(backend, image)
    # Short path: unix socket paths are limited to ~107 bytes.
    bridge_dir = Path(tempfile.mkdtemp(prefix="roboswe-bridge-", dir="/tmp"))
    os.chmod(bridge_dir, 0o755)
    sandbox = backend_class(chosen)(image, workspace, bridge_dir, trial=trial)
    log.info("sandbox_backend_chosen", trial=trial, backend=chosen, requested=backend, image=image.digest)
    volume = None
    try:
        if workspace_mb:
            volume = await _mount_volume(trial, sandbox.workspace, workspace_mb, image)
        await sandbox.start(limits)
        try:
            trial_sandbox = TrialSandbox(trial, sandbox, RobotDoor(sim, resets=resets), bridge_dir, limits)
            async with trio.open_nursery() as nursery:
                await nursery.start(trial_sandbox.serve_socket)
                yield trial_sandbox
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await sandbox.cleanup()
    finally:
        shutil.rmtree(bridge_dir, ignore_errors=True)
        if volume is not None:
            with trio.CancelScope(shield=True):
                try:
                    await trio.to_thread.run_sync(volume.unmount)
                except VolumeError as e:  # the trial's checkpoints still hold its files
                    log.error("workspace_volume_unmount_failed", trial=trial, error=str(e))




async def _mount_volume(trial: str, workspace: Path, size_mb: int, image: SandboxImage) -> WorkspaceVolume | None:
    """The trial's sized workspace, mounted; None (and an event saying why) where it cannot be had."""
    why = volume_available()
    if why is None:
        workspace.mkdir(parents=True, exist_ok=True)
        volume = WorkspaceVolume(workspace, size_mb=size_mb, uid=image.uid, gid=image.gid)
        try:
            await trio.to_thread.run_sync(volume.mount)
            return volume
        except VolumeError as e:
            why = str(e)
    log.warning("workspace_volume_unavailable", trial=trial, reason=why, bound_by="checkpoint caps only")
    return None

