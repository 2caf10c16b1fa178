"""The supervisor: starts every actor as its own process, watches it, restarts it, stops them all.

Each actor runs as ``python -m roboswe.actors.<kind> --run-dir DIR --name NAME [--config RUN.toml]``
in its own session (so its process group can be signalled as a whole); a fleet worker's
simulator is kind ``simulator``, name ``simulator.2``. A pipe whose write end only the
supervisor holds (the lifeline) makes every actor stop if the supervisor dies, however it
dies. Death is noticed by process exit (at once) or heartbeat loss (liveness window, under
3 s by default). State goes to ``DIR/supervisor.json`` for ``roboswe status``.
"""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import structlog
import trio

from roboswe.config import ACTOR_NAMES, RunConfig, actor_kind
from roboswe.protocol.control import CONTROL_CODEC

from ._client import Client
from ._endpoints import actor_endpoints, socket_dir
from ._entry import LIFELINE_ENV
from ._errors import PeerDead

log = structlog.get_logger()

STATE_FILE = "supervisor.json"


class ActorState(msgspec.Struct, kw_only=True):
    """One actor as ``supervisor.json`` records it."""

    pid: int | None
    state: str  # starting | ready | restarting | stopping | stopped | failed
    restarts: int
    endpoint: str
    started_at: float | None
    last_heartbeat: float | None  # wall time
    last_exit: str | None


class SupervisorState(msgspec.Struct, kw_only=True):
    """``DIR/supervisor.json``: the supervisor's state, rewritten whole (atomically) as it changes and every second."""

    supervisor_pid: int
    state: str  # starting | running | stopping | stopped | failed
    failure: str | None
    updated_at: float | None = None  # wall time of the write (hand-written files in tests leave it out)
    run_dir: str | None = None
    actors: dict[str, ActorState]


class SupervisorStateError(ValueError):
    """A ``supervisor.json`` that is not the supervisor's state (truncated, hand-edited, another program's)."""


def read_state(run_dir: Path) -> SupervisorState:
    """The run's supervisor state; raises FileNotFoundError without one, SupervisorStateError for a malformed one."""
    path = run_dir / STATE_FILE
    try:
        return msgspec.json.decode(path.read_bytes(), type=SupervisorState)
    except msgspec.DecodeError as e:  # ValidationError included
        raise SupervisorStateError(f"{path} is not a supervisor state file: {e}") from None


def run_active(run_dir: Path) -> bool:
    """Whether the run's supervisor lives and is starting or running; raises SupervisorStateError (a
    ValueError) for a malformed supervisor.json."""
    try:
        state = read_state(run_dir)
        os.kill(state.supervisor_pid, 0)
    except OSError:  # no state file, or its supervisor is gone
        return False
    return state.state in ("starting", "running")


class SupervisorFailed(Exception):
    """The run cannot continue (an actor never became ready, or exhausted its restarts)."""


@dataclass
class ActorSlot:
    """One actor of the run, across its incarnations."""

    name: str
    endpoint: str
    pid: int | None = None
    state: str = "starting"  # starting | ready | restarting | stopping | stopped | failed
    restarts: int = 0
    started_at: float | None = None
    last_heartbeat: float | None = None  # wall time
    last_exit: str | None = None
    process: trio.Process | None = field(default=None, repr=False)


class Supervisor:
    """Runs the actors of one run dir until a stop signal or an unrecoverable failure."""

    def __init__(self, run_dir: Path, config: RunConfig, config_path: Path | None = None, *, actors: tuple[str, ...] = ACTOR_NAMES):
        self.run_dir = run_dir.resolve()
        self.config = config
        self.config_path = config_path.resolve() if config_path else None
        endpoints = actor_endpoints(self.run_dir, config)
        self.slots = {name: ActorSlot(name, endpoints[name]) for name in actors}
        self.state = "starting"
        self.failure: str | None = None
        self._stop = trio.Event()
        self._starting: trio.CancelScope | None = None
        self._lifeline_read = -1
        self._lifeline_write = -1

    async def run(self, on_ready=lambda supervisor: None) -> int:
        """Start, watch, and stop; returns the process exit code (0 after a clean stop).

        ``on_ready(supervisor)`` is called once every actor is ready; if it returns an
        awaitable, that runs as a task beside the watchers (e.g. wait for a job, then
        ``supervisor.request_stop()``). An exception from it stops the run as a failure.
        """
        (self.run_dir / "actors").mkdir(parents=True, exist_ok=True)
        self._lifeline_read, self._lifeline_write = os.pipe()
        log.info("supervisor_started", run_dir=str(self.run_dir), actors=list(self.slots))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._stop_on_signal)
                nursery.start_soon(self._write_state_periodically)
                try:
                    async with trio.open_nursery() as starting:
                        self._starting = starting.cancel_scope
                        for slot in self.slots.values():
                            starting.start_soon(self._start_one, slot, nursery)
                except SupervisorFailed as e:
                    self.failure = str(e)
                except BaseExceptionGroup as group:
                    failed, rest = group.split(SupervisorFailed)
                    if rest is not None:
                        raise rest from None
                    self.failure = str(failed.exceptions[0])
                self._starting = None
                if self.failure is None and not self._stop.is_set():
                    self.state = "running"
                    self._write_state()
                    log.info("run_ready", actors=len(self.slots))
                    follow_up = on_ready(self)
                    if inspect.isawaitable(follow_up):
                        nursery.start_soon(self._run_follow_up, follow_up)
                    await self._stop.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await self._stop_all()
        if self.failure:
            log.error("supervisor_failed", reason=self.failure)
            return 1
        return 0

    async def _run_follow_up(self, follow_up) -> None:
        try:
            await follow_up
        except Exception as e:
            log.exception("on_ready_failed")
            self.request_stop(f"on_ready task failed: {type(e).__name__}: {e}")

    def request_stop(self, failure: str | None = None) -> None:
        """Stop the run (gracefully); a ``failure`` makes ``run`` return 1 and is reported."""
        if failure and self.failure is None:
            self.failure = failure
        self._stop.set()
        if self._starting is not None:
            self._starting.cancel()

    async def _stop_on_signal(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("stop_signal", signal=signal.Signals(signum).name)
                self.request_stop()

    async def _start_one(self, slot: ActorSlot, nursery: trio.Nursery) -> None:
        await nursery.start(self._keep_alive, slot)

    async def _keep_alive(self, slot: ActorSlot, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Own one actor for the whole run: start it, watch it, restart it per policy.

        Reports started once the first incarnation is ready; raises SupervisorFailed if it never is.
        """
        policy = self.config.supervisor.policy_for(slot.name)
        sup = self.config.supervisor
        while True:
            await self._spawn(slot)
            async with Client(
                "supervisor", slot.endpoint, CONTROL_CODEC, peer=slot.name,
                heartbeat_interval=sup.heartbeat_interval, liveness=sup.heartbeat_liveness, handshake=False,
            ) as link:
                failure = await self._wait_ready(slot, link)
                if failure is not None:
                    await self._kill(slot)
                    if slot.restarts == 0:
                        raise SupervisorFailed(failure)
                    slot.state = "failed"
                    self.request_stop(failure)
                    return
                if slot.restarts == 0:
                    task_status.started()
                else:
                    log.info("actor_restarted", by="supervisor", actor=slot.name, pid=slot.pid, restarts=slot.restarts)
                cause = await self._wait_death(slot, link)
            await self._kill(slot)
            code = slot.process.returncode
            slot.last_exit = _describe_exit(code) if cause == "exit" else f"heartbeat lost; {_describe_exit(code)}"
            log.error(
                "actor_died", by="supervisor", actor=slot.name, pid=slot.pid, cause=cause,
                exit_code=code if code is not None and code >= 0 else None,
                signal=signal.Signals(-code).name if code is not None and code < 0 else None, restarts=slot.restarts,
            )
            if slot.restarts >= policy.max_restarts:
                slot.state = "failed"
                self._write_state()
                self.request_stop(
                    f"actor {slot.name} died ({slot.last_exit}) after {slot.restarts} restart(s); restart limit "
                    f"{policy.max_restarts} reached. See: roboswe logs --run-dir {self.run_dir} --actor {slot.name}"
                )
                return
            delay = policy.backoff(slot.restarts)
            slot.state = "restarting"
            self._write_state()
            await trio.sleep(delay)
            slot.restarts += 1

    async def _wait_ready(self, slot: ActorSlot, link: Client) -> str | None:
        """Knock (Hello) until Ready; returns why not if the process exits or ready_timeout passes."""
        assert slot.process is not None
        timeout = self.config.supervisor.ready_timeout
        exited = False
        with trio.move_on_after(timeout):
            async with trio.open_nursery() as race:

                async def watch_exit() -> None:
                    nonlocal exited
                    await slot.process.wait()
                    exited = True
                    race.cancel_scope.cancel()

                race.start_soon(watch_exit)
                while True:
                    try:
                        await link.connect()
                        break
                    except PeerDead:
                        continue  # still importing: keep knocking
                race.cancel_scope.cancel()
        if exited or slot.process.returncode is not None:
            detail = _describe_exit(slot.process.returncode)
        elif link.peer_pid is None:
            detail = f"no Ready within {timeout:g} s"
        else:
            slot.state = "ready"
            slot.last_heartbeat = time.time()
            log.info("actor_ready", by="supervisor", actor=slot.name, pid=slot.pid, restarts=slot.restarts)
            self._write_state()
            return None
        return (
            f"actor {slot.name} did not become ready ({detail}); see {self.run_dir / 'actors' / (slot.name + '.log')}"
            f" and `roboswe logs --run-dir {self.run_dir} --actor {slot.name}`"
        )

    async def _spawn(self, slot: ActorSlot) -> None:
        command = [sys.executable, "-m", f"roboswe.actors.{actor_kind(slot.name)}", "--run-dir", str(self.run_dir),
                   "--name", slot.name]
        if self.config_path:
            command += ["--config", str(self.config_path)]
        env = {**os.environ, "PYTHONHASHSEED": "0", LIFELINE_ENV: str(self._lifeline_read)}
        output = open(self.run_dir / "actors" / f"{slot.name}.log", "ab")
        try:
            slot.process = await trio.lowlevel.open_process(
                command, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                start_new_session=True, pass_fds=(self._lifeline_read,),
            )
        finally:
            output.close()
        slot.pid = slot.process.pid
        slot.started_at = time.time()
        log.info("actor_spawned", by="supervisor", actor=slot.name, pid=slot.pid)
        self._write_state()

    async def _wait_death(self, slot: ActorSlot, link: Client) -> str:
        assert slot.process is not None
        cause = "exit"
        async with trio.open_nursery() as race:

            async def exit_seen() -> None:
                await slot.process.wait()
                race.cancel_scope.cancel()

            async def silence_seen() -> None:
                nonlocal cause
                await link.wait_peer_dead()
                cause = "heartbeat"
                race.cancel_scope.cancel()

            async def note_heartbeats() -> None:
                while True:
                    slot.last_heartbeat = time.time() - (trio.current_time() - link.last_seen)
                    await trio.sleep(self.config.supervisor.heartbeat_interval)

            race.start_soon(exit_seen)
            race.start_soon(silence_seen)
            race.start_soon(note_heartbeats)
        if slot.process.returncode is not None:
            cause = "exit"
        return cause

    async def _kill(self, slot: ActorSlot) -> None:
        """SIGKILL the actor's whole process group and reap it."""
        if slot.process is None:
            return
        _signal_group(slot.process.pid, signal.SIGKILL)
        await slot.process.wait()

    async def _stop_all(self) -> None:
        """SIGTERM every actor group, wait up to stop_grace, then SIGKILL; remove socket files."""
        self.state = "stopping"
        alive = [s for s in self.slots.values() if s.process is not None and s.process.returncode is None]
        for slot in alive:
            slot.state = "stopping"
            _signal_group(slot.process.pid, signal.SIGTERM)
        self._write_state()
        with trio.move_on_after(self.config.supervisor.stop_grace):
            for slot in alive:
                await slot.process.wait()
        for slot in alive:
            if slot.process.returncode is None:
                log.warning("actor_kill_after_grace", by="supervisor", actor=slot.name, pid=slot.pid)
            # The group may hold descendants (sandboxes) even after the leader exited.
            _signal_group(slot.process.pid, signal.SIGKILL)
            await slot.process.wait()
        for slot in self.slots.values():
            if slot.state != "failed":
                slot.state = "stopped"
            if slot.endpoint.startswith("ipc://"):
                Path(slot.endpoint[6:]).unlink(missing_ok=True)
        sockets = socket_dir(self.run_dir)
        try:
            sockets.rmdir()
        except OSError:
            pass
        for fd in (self._lifeline_read, self._lifeline_write):
            if fd >= 0:
                os.close(fd)
        self._lifeline_read = self._lifeline_write = -1
        self.state = "failed" if self.failure else "stopped"
        self._write_state()
        log.info("supervisor_stopped", state=self.state)

    async def _write_state_periodically(self) -> None:
        while True:
            await trio.sleep(1.0)
            self._write_state()

    def _write_state(self) -> None:
        state = SupervisorState(
            supervisor_pid=os.getpid(), state=self.state, failure=self.failure, updated_at=time.time(),
            run_dir=str(self.run_dir),
            actors={s.name: ActorState(pid=s.pid, state=s.state, restarts=s.restarts, endpoint=s.endpoint,
                                       started_at=s.started_at, last_heartbeat=s.last_heartbeat, last_exit=s.last_exit)
                    for s in self.slots.values()},
        )
        tmp = self.run_dir / (STATE_FILE + ".tmp")
        tmp.write_bytes(msgspec.json.format(msgspec.json.encode(state), indent=1))
        tmp.replace(self.run_dir / STATE_FILE)


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


