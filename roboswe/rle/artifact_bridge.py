"""The artifact bridge: the sealed artifact restored read-only into a fresh sandbox, driven call by call.

Layout of one verification's sandbox (a fresh temporary directory, removed afterwards):

    bridge/             bound read-only at /bridge
      runner.py         roboswe/rle/_artifact_runner.py
      artifact/         the sealed files (0444, directories 0555)
      artifact.sock     the verifier's end (bridge/wire.py framing; one connection)
    workspace/          bound read-write at /workspace: the artifact's scratch, never read back

Nothing of the scoring code, the salt, the seeds or the battery is in either. Every call is timed
here, from the request's first byte sent to the reply's last byte received; a call that does not
answer within its cap, or a run past the cumulative budget, ends the sandbox. A reply larger than
the cap is refused unread. Whatever the artifact does (crash, hang, fork, flood its output) ends
as a failed call recorded here, never as an exception out of ``ArtifactSession.call``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket as pysocket
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

import msgspec
import trio

from roboswe.bridge import wire
from roboswe.protocol.bridge import ScriptLimits
from roboswe.sandbox import backend_class
from roboswe.sandbox._backend import SANDBOX_PATH, ProcessOutcome
from roboswe.sandbox.images import SandboxImage
from roboswe.sandbox.walk import remove_tree

from .manifest import CallLimits
from .seal import write_sealed

SOCKET_NAME = "artifact.sock"
RUNNER_IN_SANDBOX = "/bridge/runner.py"
_ENV = {"PATH": SANDBOX_PATH, "HOME": "/workspace", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1"}


class CallResult(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    seconds: float
    value: object = None
    error: str | None = None  # the artifact's exception, or why there was no answer
    fatal: bool = False  # the sandbox is gone (hang, crash, protocol violation): no further calls


class SandboxEnd(msgspec.Struct, frozen=True, kw_only=True):
    exit_status: int | None
    limit: str | None
    stdout_tail: str
    stderr_tail: str
    wall_seconds: float | None


class ArtifactSession:
    """One sandboxed artifact, driven by ``call``; made by ``artifact_session`` (its sandbox, its cleanup).
    ``end`` says how the sandbox ended, once it has."""

    def __init__(self, limits: CallLimits, listener):
        self.limits = limits
        self.end: SandboxEnd | None = None
        self.spent = 0.0  # cumulative seconds of every call
        self._listener = listener
        self._stream: trio.SocketStream | None = None
        self._dead = False
        self._exited = trio.Event()
        self._sandbox_scope = trio.CancelScope()

    async def run(self, sandbox, argv: list[str], limits: ScriptLimits) -> None:
        with self._sandbox_scope:
            try:
                self._record_end(await sandbox.run(argv, dict(_ENV), limits))
            finally:
                self._exited.set()

    def _record_end(self, o: ProcessOutcome) -> None:
        self.end = SandboxEnd(exit_status=o.exit_status, limit=o.limit, stdout_tail=o.stdout.text[-4000:],
                              stderr_tail=o.stderr.text[-8000:], wall_seconds=round(o.wall_seconds, 3))

    async def _connect(self, deadline: float) -> str | None:
        """Accept the runner's connection before ``deadline``; why not, else None."""
        async def accept(cancel: trio.CancelScope) -> None:
            conn, _ = await self._listener.accept()
            self._stream = trio.SocketStream(conn)
            cancel.cancel()

        async def gone(cancel: trio.CancelScope) -> None:
            await self._exited.wait()
            await trio.sleep(0.05)  # a connection made just before the exit still counts
            cancel.cancel()

        with trio.move_on_at(deadline):
            async with trio.open_nursery() as n:
                n.start_soon(accept, n.cancel_scope)
                n.start_soon(gone, n.cancel_scope)
        if self._stream is not None:
            return None
        return "the artifact's process exited before it answered" if self._exited.is_set() else "no connection in time"

    async def call(self, head: dict, blobs: tuple[bytes, ...] = (), *, cap: float | None = None) -> CallResult:
        """One call; its seconds count against the cumulative budget. Never raises for the artifact's doing."""
        if self._dead:
            return CallResult(ok=False, seconds=0.0, error="the sandbox has ended", fatal=True)
        cap = self.limits.call_seconds if cap is None else cap
        left = self.limits.total_seconds + self.limits.load_seconds - self.spent
        if left <= 0:
            return await self._fail(0.0, f"the cumulative budget of {self.limits.total_seconds:g} s is spent")
        budget_bound = left < cap
        started = time.perf_counter()
        deadline = trio.current_time() + min(cap, left)
        if self._stream is None:
            why = await self._connect(deadline)
            if why:
                return await self._fail(time.perf_counter() - started, why)
        try:
            with trio.move_on_at(deadline):
                await self._stream.send_all(wire.encode([json.dumps(head).encode(), *blobs]))
                frames = await self._read_reply()
                seconds = time.perf_counter() - started
                self.spent += seconds
                return self._decode(frames, seconds)
        except (trio.BrokenResourceError, trio.ClosedResourceError, EOFError, OSError) as e:
            return await self._fail(time.perf_counter() - started, f"the artifact's process went away ({type(e).__name__})",
                                    settle=True)
        except (wire.FrameError, ValueError) as e:
            return await self._fail(time.perf_counter() - started, f"malformed reply: {e}")
        seconds = time.perf_counter() - started
        why = (f"the cumulative budget of {self.limits.total_seconds:g} s ran out during the call" if budget_bound
               else f"no answer within the {cap:g} s cap of one call")
        return await self._fail(seconds, why)

    async def _read_reply(self) -> list[bytes]:
        async def exactly(n: int) -> bytes:
            buf = bytearray()
            while len(buf) < n:
                chunk = await self._stream.receive_some(n - len(buf))
                if not chunk:
                    raise EOFError
                buf += chunk
            return bytes(buf)

        total, count = wire.header(await exactly(wire.HEADER.size))
        if total > self.limits.reply_bytes:
            raise wire.FrameError(f"a reply of {total} bytes exceeds the {self.limits.reply_bytes}-byte cap")
        return wire.split(await exactly(total), count)

    @staticmethod
    def _decode(frames: list[bytes], seconds: float) -> CallResult:
        try:
            reply = msgspec.json.decode(frames[0])
        except msgspec.DecodeError as e:
            return CallResult(ok=False, seconds=seconds, error=f"reply is not JSON: {e}")
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            return CallResult(ok=False, seconds=seconds, error="reply is not {ok, value | error}")
        if reply["ok"]:
            return CallResult(ok=True, seconds=seconds, value=reply.get("value"))
        return CallResult(ok=False, seconds=seconds, error=str(reply.get("error"))[:2000])

    async def _fail(self, seconds: float, why: str, *, settle: bool = False) -> CallResult:
        """A call that ends the sandbox: kill it, so nothing of the artifact runs on. ``settle``: the
        process is ending by itself (its socket closed); give it a moment, so its exit is on record."""
        self.spent += seconds
        self._dead = True
        if settle:
            with trio.move_on_after(2):
                await self._exited.wait()
        self._sandbox_scope.cancel()
        return CallResult(ok=False, seconds=seconds, error=why, fatal=True)

    async def close(self) -> None:
        """Ask the runner to stop, give it a moment, then end the sandbox whatever it does."""
        if not self._dead and self._stream is not None:
            with trio.move_on_after(2):
                try:
                    await self._stream.send_all(wire.encode([b'{"call": "close"}']))
                    await self._exited.wait()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
        self._dead = True
        self._sandbox_scope.cancel()
        if self._stream is not None:
            with trio.CancelScope(shield=True):
                await self._stream.aclose()


@asynccontextmanager
async def artifact_session(image: SandboxImage, backend: str, contents: dict[str, bytes], entry_file: str,
                           entry_function: str, limits: CallLimits) -> AsyncIterator[ArtifactSession]:
    """The artifact restored into a fresh sandbox, its runner started; everything removed on exit."""
    root = Path(tempfile.mkdtemp(prefix="rle-verify-", dir="/tmp"))
    os.chmod(root, 0o755)  # the sandbox user traverses it
    bridge, workspace = root / "bridge", root / "workspace"
    listener = trio.socket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM)
    sandbox = None
    try:
        bridge.mkdir()
        workspace.mkdir()
        write_sealed(bridge / "artifact", contents)
        (bridge / "runner.py").write_bytes(resources.files("roboswe.rle").joinpath("_artifact_runner.py").read_bytes())
        os.chmod(bridge / "runner.py", 0o444)
        await listener.bind(str(bridge / SOCKET_NAME))
        listener.listen(1)
        os.chmod(bridge / SOCKET_NAME, 0o777)
        os.chmod(bridge, 0o555)
        sandbox = backend_class(backend)(image, workspace, bridge, trial="rle-verify")
        script_limits = ScriptLimits(steps=1, seconds=limits.load_seconds + limits.total_seconds + 30,
                                     memory_mb=limits.memory_mb, processes=limits.processes, cpus=1.0)
        await sandbox.start(script_limits)
        session = ArtifactSession(limits, listener)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run, sandbox, ["python3", "-I", RUNNER_IN_SANDBOX, entry_file, entry_function],
                               script_limits)
            try:
                yield session
            finally:
                with trio.CancelScope(shield=True):
                    await session.close()
    finally:
        with trio.CancelScope(shield=True):
            listener.close()
            if sandbox is not None:
                await sandbox.cleanup()
        for d in (bridge, *bridge.rglob("*")):
            if d.is_dir() and not d.is_symlink():
                d.chmod(0o755)  # the sealed copy is read-only; ours to remove
        remove_tree(workspace)  # written by the artifact: the bounded, link-free removal
        shutil.rmtree(root, ignore_errors=True)
