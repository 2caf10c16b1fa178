"""Sandbox backends: one small abstract class and a registry, selected by name."""

from __future__ import annotations

import abc
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import msgspec
import structlog
from roboswe.protocol.bridge import ScriptLimits
from roboswe.sandbox.images import SandboxImage

from ._output import Captured
from .walk import Found, Refused, walk

log = structlog.get_logger()

WORKSPACE = "/workspace"
BRIDGE_DIR = "/bridge"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
OPEN_FILES = 256
"""RLIMIT_NOFILE of every sandboxed program (both backends): a script cannot hold thousands of
connections to the bridge or exhaust the host's descriptors."""

SIGNAL_LIMITS = {24: "cpu_time", 25: "file_size"}  # SIGXCPU, SIGXFSZ: the rlimit that sent them


def limit_reached(*, timed_out: bool, signal: int, report: dict | None, killed_by_oom: bool = False) -> str | None:
    """Which sandbox limit ended a program, from how it ended (the same reading on every backend)."""
    if timed_out:
        return "wall_time"
    if signal in SIGNAL_LIMITS:
        return SIGNAL_LIMITS[signal]
    if killed_by_oom or (report and report.get("type") == "MemoryError"):
        return "memory"
    return None


class SandboxError(Exception):
    """The sandbox could not be created or used; the message says what to do."""


class ProcessOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How one program in the sandbox ended (before the bridge adds step counts)."""

    exit_status: int  # 128+N when killed by signal N
    stdout: Captured
    stderr: Captured
    exception: dict | None  # runner's report: type, message, traceback
    wall_seconds: float
    limit: str | None  # "wall_time" | "memory" | "processes" | "cpu_time" | "file_size" | None


class SandboxBackend(abc.ABC):
    """One trial's sandbox: ``start`` once, ``run`` per script, ``cleanup`` at the end."""

    name: ClassVar[str]

    def __init__(self, image: SandboxImage, workspace: Path, bridge_dir: Path, *, trial: str = "trial"):
        self.image = image
        self.workspace = Path(workspace).resolve()
        self.bridge_dir = Path(bridge_dir).resolve()
        self.trial = trial

    @classmethod
    def available(cls) -> str | None:
        """None when usable here, else why not."""
        return None

    @abc.abstractmethod
    async def start(self, limits: ScriptLimits) -> None:
        """Create the trial's sandbox (trial-wide resource limits); raises SandboxError."""

    @abc.abstractmethod
    async def run(self, argv: list[str], env: dict[str, str], limits: ScriptLimits) -> ProcessOutcome:
        """Run one program to completion or to a limit; every process it started is gone afterwards."""

    @abc.abstractmethod
    async def cleanup(self, interrupted: bool = False) -> None:
        """Remove the sandbox; always safe to call, also after a failed start."""

    def own_workspace(self) -> list[Refused]:
        """Hand workspace entries to the sandbox user (so scripts can edit what the harness wrote) and
        strip setuid/setgid bits (so none a script set survives on the host); returns what the bounded
        walk would not touch. Never follows links; never raises for what the workspace holds."""
        uid, gid = self.image.uid, self.image.gid
        as_root = os.geteuid() == 0
        refused: list[Refused] = []
        try:
            root = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                if as_root:
                    os.fchown(root, uid, gid)
                # A script may chmod its own workspace to 000: the next program must still start in it.
                os.fchmod(root, (stat.S_IMODE(os.fstat(root).st_mode) | 0o755) & 0o777)
            finally:
                os.close(root)
        except OSError as e:
            return [Refused(".", "directory", f"the workspace could not be walked: {e.strerror}")]
        for item in walk(self.workspace):  # fds in each item are valid only within its iteration
            if isinstance(item, Refused):
                refused.append(item)
                continue
            st = item.st
            try:
                if as_root and (st.st_uid != uid or st.st_gid != gid):
                    os.chown(item.name, uid, gid, dir_fd=item.dir_fd, follow_symlinks=False)
                if st.st_mode & _SET_ID and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                    _strip_set_id(item)
            except OSError as e:  # changed since the walk looked
                refused.append(Refused(item.path, "other", f"could not be handed over: {e.strerror}"))
        if refused:
            log.warning("workspace_entries_refused", trial=self.trial, count=len(refused),
                        refused=[f"{r.path}: {r.reason}" for r in refused[:20]])
        return refused


_SET_ID = stat.S_ISUID | stat.S_ISGID


def _strip_set_id(item: Found) -> None:
    if item.fd >= 0:
        os.fchmod(item.fd, stat.S_IMODE(item.st.st_mode) & ~_SET_ID)
        return
    fd = os.open(item.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=item.dir_fd)
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_SET_ID)
    finally:
        os.close(fd)


_BACKENDS: dict[str, type[SandboxBackend]] = {}


def sandbox_backend(name: str) -> Callable[[type[SandboxBackend]], type[SandboxBackend]]:
    """Register a backend class under ``name`` (``-e NAME`` selects it)."""

    def register(cls: type[SandboxBackend]) -> type[SandboxBackend]:
        cls.name = name
        _BACKENDS[name] = cls
        return cls

    return register


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def backend_class(name: str) -> type[SandboxBackend]:
    """The registered backend; raises SandboxError naming the known ones."""
    try:
        return _BACKENDS[name]
    except KeyError:
        raise SandboxError(f"unknown sandbox backend {name!r}: choose one of {backend_names()}") from None


def choose_backend(requested: str | None, image: SandboxImage) -> str:
    """``requested`` if usable; without one, docker when a daemon answers and the image is imported, else bwrap."""
    if requested:
        why = backend_class(requested).available()
        if why:
            raise SandboxError(f"sandbox backend {requested!r} is not usable here: {why}")
        if requested == "docker" and not image.docker_tag:
            raise SandboxError("the sandbox image is not imported into Docker: run `roboswe images build` with dockerd running")
        return requested
    if backend_class("docker").available() is None and image.docker_tag:
        return "docker"
    why = backend_class("bwrap").available()
    if why:
        raise SandboxError(f"no sandbox backend is usable: docker does not answer and bwrap: {why}")
    return "bwrap"
