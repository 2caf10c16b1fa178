"""Docker backend: one networkless, read-only, capability-less container per trial, one exec per script."""

from __future__ import annotations

import functools
import math
import os
import time

import structlog
import trio
from roboswe.protocol.bridge import ScriptLimits
from roboswe.sandbox.images import docker_client

from ._backend import (
    BRIDGE_DIR,
    OPEN_FILES,
    WORKSPACE,
    ProcessOutcome,
    SandboxBackend,
    SandboxError,
    limit_reached,
    sandbox_backend,
)
from ._output import OutputBuffer
from ._process import pid_alive

log = structlog.get_logger()

_EXIT_POLL = 0.25  # how often to look for a program that exited while a leftover child holds its output
TRIAL_LABEL = "roboswe.trial"
BRIDGE_PID_LABEL = "roboswe.bridge_pid"  # the host pid of the process that owns the container


def remove_orphans(client=None) -> int:
    """Remove trial containers whose owning process is gone (a crashed bridge, a killed `roboswe exec`),
    and those from before owners were labelled; returns how many. Never raises."""
    try:
        client = client or docker_client()
        if client is None:
            return 0
        removed = 0
        for container in client.containers.list(all=True, filters={"label": TRIAL_LABEL}):
            owner = container.labels.get(BRIDGE_PID_LABEL, "")
            if owner.isdigit() and pid_alive(int(owner)):
                continue
            container.remove(force=True)
            removed += 1
            log.info("sandbox_orphan_removed", container=container.id[:12], trial=container.labels.get(TRIAL_LABEL),
                     owner=owner or None)
        return removed
    except Exception as e:  # noqa: BLE001 - a cleanup must never stop a bridge from starting
        log.warning("sandbox_orphan_sweep_failed", error=str(e)[:300])
        return 0


@sandbox_backend("docker")
class DockerSandbox(SandboxBackend):
    """The image from `roboswe images build`; the container idles as root (no capabilities), scripts run as the sandbox user."""

    _client = None
    _container_id: str | None = None

    @classmethod
    def available(cls) -> str | None:
        return None if docker_client() is not None else "no Docker daemon answers (start dockerd, or use -e bwrap)"

    async def start(self, limits: ScriptLimits | None = None) -> None:
        limits = limits or ScriptLimits()
        if not self.image.docker_tag:
            raise SandboxError("the sandbox image is not imported into Docker: run `roboswe images build` with dockerd running")
        self._client = await trio.to_thread.run_sync(docker_client)
        if self._client is None:
            raise SandboxError("no Docker daemon answers (start dockerd, or use -e bwrap)")
        self.workspace.mkdir(parents=True, exist_ok=True)
        await trio.to_thread.run_sync(self.own_workspace)
        self._limits = limits
        try:
            self._container_id = await trio.to_thread.run_sync(self._create, limits)
        except Exception as e:
            await trio.to_thread.run_sync(self._remove_created)  # created but not started: not left behind
            raise SandboxError(f"docker could not start the trial container: {e}") from e
        log.info("sandbox_started", backend="docker", container=self._container_id[:12], trial=self.trial)

    def _create(self, limits: ScriptLimits) -> str:
        from docker.types import Ulimit

        mem = f"{limits.memory_mb}m"
        container = self._client.containers.run(
            self.image.docker_tag,
            command=["sleep", "infinity"],
            detach=True,
            init=True,  # reaps zombies the scripts leave
            user="0:0",  # only the idle process; scripts are exec'd as the sandbox user and cannot signal it
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmp_mb}m"},
            volumes={
                str(self.workspace): {"bind": WORKSPACE, "mode": "rw"},
                str(self.bridge_dir): {"bind": BRIDGE_DIR, "mode": "ro"},
            },
            working_dir=WORKSPACE,
            environment={},
            hostname="sandbox",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=limits.processes,
            mem_limit=mem,
            memswap_limit=mem,
            nano_cpus=int(limits.cpus * 1e9),
            ulimits=[
                Ulimit(name="fsize", soft=limits.file_size_mb << 20, hard=limits.file_size_mb << 20),
                Ulimit(name="core", soft=0, hard=0),
                Ulimit(name="nofile", soft=OPEN_FILES, hard=OPEN_FILES),
            ],
            ipc_mode="private",
            labels={TRIAL_LABEL: self.trial, "roboswe.image": self.image.digest, BRIDGE_PID_LABEL: str(os.getpid())},
        )
        return container.id

    async def run(self, argv: list[str], env: dict[str, str], limits: ScriptLimits) -> ProcessOutcome:
        if self._container_id is None:
            raise SandboxError("docker sandbox used before start()")
        await trio.to_thread.run_sync(self.own_workspace)
        api = self._client.api
        user = f"{self.image.uid}:{self.image.gid}"
        cpu = math.ceil(limits.seconds) + 1
        # Per-script rlimits for CPU time, address space and file size, as on bwrap. Processes are
        # bounded by the container's pids cgroup (per trial): RLIMIT_NPROC would count every
        # process of this uid on the host.
        rlimits = " && ".join(
            f"ulimit -{flag} {value}"
            for flag, value in (("t", cpu), ("v", limits.memory_mb << 10), ("f", limits.file_size_mb << 11), ("n", OPEN_FILES))
        )
        wrapped = ["/bin/sh", "-c", f'{rlimits} && exec "$@"', "sh", *argv]
        out, err = OutputBuffer(limits.output_bytes), OutputBuffer(limits.output_bytes)
        started = time.monotonic()
        create = functools.partial(
            api.exec_create, self._container_id, wrapped, stdout=True, stderr=True, stdin=False,
            tty=False, environment=env, workdir=WORKSPACE, user=user,
        )  # fmt: skip
        try:
            exec_id = (await trio.to_thread.run_sync(create))["Id"]
        except Exception as e:  # noqa: BLE001 - e.g. the container stopped: start it again, once
            log.warning("sandbox_container_restart", container=self._container_id[:12], error=str(e))
            try:
                await trio.to_thread.run_sync(functools.partial(api.restart, self._container_id, timeout=0))
                exec_id = (await trio.to_thread.run_sync(create))["Id"]
            except Exception as e2:  # noqa: BLE001
                raise SandboxError(f"docker container {self._container_id[:12]} is unusable: {e2}") from e2

        def pump() -> None:
            for o, e in api.exec_start(exec_id, stream=True, demux=True):
                if o:
                    out.feed(o)
                if e:
                    err.feed(e)

        timed_out = False
        pumped = trio.Event()

        async def pump_task() -> None:
            try:
                await trio.to_thread.run_sync(pump, abandon_on_cancel=True)
            finally:
                pumped.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump_task)
            with trio.move_on_after(limits.seconds) as scope:
                while True:
                    with trio.move_on_after(_EXIT_POLL):
                        await pumped.wait()
                    if pumped.is_set():
                        break
                    info = await trio.to_thread.run_sync(api.exec_inspect, exec_id)
                    if not info["Running"]:
                        break  # the program ended; a leftover process still holds its output
            wall = time.monotonic() - started
            timed_out = scope.cancelled_caught
            await self._kill_leftovers()
            with trio.move_on_after(2):
                await pumped.wait()
            nursery.cancel_scope.cancel()
        info = await trio.to_thread.run_sync(api.exec_inspect, exec_id)
        code = info.get("ExitCode")
        code = 137 if code is None else code
        stdout, _ = out.finish()
        stderr, report = err.finish(strip_report=True)
        sig = code - 128 if code > 128 else 0
        # only the cgroup's OOM killer sends SIGKILL to a script we did not time out
        limit = limit_reached(timed_out=timed_out, signal=sig, report=report, killed_by_oom=sig == 9)
        return ProcessOutcome(
            exit_status=code, stdout=stdout, stderr=stderr, exception=report, wall_seconds=wall, limit=limit
        )

    async def _kill_leftovers(self) -> None:
        """SIGKILL every process of the sandbox user (background children, daemons, the program itself)."""
        api = self._client.api
        user = f"{self.image.uid}:{self.image.gid}"

        def kill() -> None:
            exec_id = api.exec_create(self._container_id, ["/bin/sh", "-c", "kill -9 -1 2>/dev/null; true"], user=user)["Id"]
            api.exec_start(exec_id)

        try:
            await trio.to_thread.run_sync(kill)
        except Exception as e:  # noqa: BLE001 - e.g. the pids limit is full: restart the container instead
            log.warning("sandbox_kill_failed", backend="docker", error=str(e), action="restart")
            await trio.to_thread.run_sync(functools.partial(self._client.api.restart, self._container_id, timeout=0))

    def _remove_created(self) -> None:
        try:
            filters = {"label": [f"{TRIAL_LABEL}={self.trial}", f"{BRIDGE_PID_LABEL}={os.getpid()}"]}
            for container in self._client.containers.list(all=True, filters=filters):
                container.remove(force=True)
        except Exception as e:  # noqa: BLE001 - the sweep at the next bridge start removes it
            log.warning("sandbox_remove_failed", trial=self.trial, error=str(e)[:300])

    async def cleanup(self, interrupted: bool = False) -> None:
        if self._container_id is None or self._client is None:
            return
        cid, self._container_id = self._container_id, None
        with trio.CancelScope(shield=True):
            try:
                await trio.to_thread.run_sync(functools.partial(self._client.api.remove_container, cid, force=True))
            except Exception as e:  # noqa: BLE001 - already gone is fine
                log.warning("sandbox_remove_failed", container=cid[:12], error=str(e))
        log.info("sandbox_stopped", backend="docker", container=cid[:12], interrupted=interrupted)
