"""bubblewrap backend: each script in fresh namespaces over the read-only image rootfs."""

from __future__ import annotations

import math
import os
import resource
import shutil
from pathlib import Path

import structlog
import trio

from roboswe.protocol.bridge import ScriptLimits

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
from ._process import run_process

log = structlog.get_logger()


@sandbox_backend("bwrap")
class BwrapSandbox(SandboxBackend):
    """No daemon: a new user/pid/net/ipc/uts/cgroup namespace per script; killing bwrap kills them all."""

    @classmethod
    def available(cls) -> str | None:
        return None if shutil.which("bwrap") else "bwrap is not installed (apt-get install bubblewrap)"

    async def start(self, limits: ScriptLimits | None = None) -> None:
        why = self.available()
        if why:
            raise SandboxError(why)
        if not os.path.exists(os.path.join(self.image.rootfs, "usr/bin/python3")):
            raise SandboxError(f"sandbox rootfs {self.image.rootfs} is missing: run `roboswe images build`")
        self.workspace.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            for path in (Path(self.image.rootfs), self.workspace, self.bridge_dir):
                self._check_reachable(path)

    def _check_reachable(self, path: Path) -> None:
        """bwrap binds as the sandbox user, so every parent directory must let that user through."""
        uid, gid = self.image.uid, self.image.gid
        for p in [path, *path.parents]:
            st = p.stat()
            ok = st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100) or (st.st_gid == gid and st.st_mode & 0o010)
            if not ok:
                raise SandboxError(
                    f"{path} is not reachable by the sandbox user (uid {uid}): {p} has mode {st.st_mode & 0o777:o}. "
                    "Put workspaces and the image cache under directories others may traverse (chmod o+x), or use -e docker."
                )

    _tmp_bytes = ScriptLimits().tmp_mb << 20

    def command(self, argv: list[str], env: dict[str, str], status_fd: int | None = None) -> list[str]:
        cmd = [
            "bwrap",
            *(["--json-status-fd", str(status_fd)] if status_fd is not None else []),
            "--unshare-all",  # ipc, pid, net (loopback only), uts, cgroup
            "--unshare-user",  # required, not "try": the program must not keep host ids
            "--disable-userns",  # no nested user namespaces for the program
            "--uid", str(self.image.uid), "--gid", str(self.image.gid),
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",  # no TIOCSTI into a controlling terminal
            "--cap-drop", "ALL",
            "--ro-bind", self.image.rootfs, "/",
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", str(self._tmp_bytes), "--tmpfs", "/tmp",
            "--bind", str(self.workspace), WORKSPACE,
            "--ro-bind", str(self.bridge_dir), BRIDGE_DIR,
            "--chdir", WORKSPACE,
            "--clearenv",
        ]  # fmt: skip
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        return [*cmd, "--", *argv]

    def _preexec(self, limits: ScriptLimits):
        uid, gid = self.image.uid, self.image.gid
        cpu = math.ceil(limits.seconds) + 1
        rlimits = [
            (resource.RLIMIT_AS, limits.memory_mb << 20),
            (resource.RLIMIT_NPROC, limits.processes),
            (resource.RLIMIT_CPU, cpu),
            (resource.RLIMIT_FSIZE, limits.file_size_mb << 20),
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_NOFILE, OPEN_FILES),
        ]
        as_root = os.geteuid() == 0

        def preexec() -> None:
            for which, value in rlimits:
                resource.setrlimit(which, (value, value))
            if as_root:
                # Run bwrap itself as the sandbox user: the namespaces then hold no host privilege.
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)

        return preexec

    async def run(self, argv: list[str], env: dict[str, str], limits: ScriptLimits) -> ProcessOutcome:
        await trio.to_thread.run_sync(self.own_workspace)
        self._tmp_bytes = limits.tmp_mb << 20
        status_read, status_write = os.pipe()
        try:
            raw = await run_process(
                self.command(argv, env, status_write),
                seconds=limits.seconds,
                output_cap=limits.output_bytes,
                preexec_fn=self._preexec(limits),
                env={"PATH": "/usr/bin:/bin"},
                pass_fds=(status_write,),
            )
            status = _read_all(status_read)
        finally:
            os.close(status_read)
        stdout, _ = raw.stdout.finish()
        stderr, report = raw.stderr.finish(strip_report=True)
        if not raw.timed_out and b'"exit-code"' not in status:
            # bwrap reports the program's exit only if the program ran: this is a sandbox failure
            raise SandboxError(f"bwrap could not start the program (exit {raw.exit_status}): {stderr.text.strip()[-2000:]}")
        limit = limit_reached(timed_out=raw.timed_out, signal=raw.signal, report=report)
        return ProcessOutcome(
            exit_status=raw.exit_status,
            stdout=stdout,
            stderr=stderr,
            exception=report,
            wall_seconds=raw.wall,
            limit=limit,
        )

    async def cleanup(self, interrupted: bool = False) -> None:
        return None  # nothing outlives a script


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)  # bwrap is gone; never wait on a writer that should not exist
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks)
