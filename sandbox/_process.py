"""Run a host process to completion or to a wall limit, draining its output into bounded buffers."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from collections.abc import Callable

import trio

from ._output import OutputBuffer

_CHUNK = 1 << 16


class ProcessRun:
    """The raw result of one process: exit status (128+N for signal N), buffers, wall time, timed out?"""

    def __init__(self, returncode: int, stdout: OutputBuffer, stderr: OutputBuffer, wall: float, timed_out: bool):
        self.exit_status = 128 - returncode if returncode < 0 else returncode
        self.signal = -returncode if returncode < 0 else (returncode - 128 if returncode > 128 else 0)
        self.stdout, self.stderr, self.wall, self.timed_out = stdout, stderr, wall, timed_out


async def _drain(stream: trio.abc.ReceiveStream, buf: OutputBuffer) -> None:
    while chunk := await stream.receive_some(_CHUNK):
        buf.feed(chunk)


async def run_process(
    argv: list[str],
    *,
    seconds: float,
    output_cap: int,
    preexec_fn: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> ProcessRun:
    """Run ``argv``; SIGKILL it at ``seconds``. Output beyond ``output_cap`` per stream is counted only.

    ``pass_fds`` are inherited by the child and closed here once it started.

    The child is forked by a thread that stays until the child exits: a child asking for
    PR_SET_PDEATHSIG (bwrap --die-with-parent) is killed when the *thread* that forked it
    exits, and trio's own spawning threads retire after 10 s idle, which SIGKILLed programs
    running longer than that.
    """
    out, err = OutputBuffer(output_cap), OutputBuffer(output_cap)
    started = time.monotonic()
    spawned: list[subprocess.Popen] = []
    ready, exited = trio.Event(), trio.Event()

    def fork_and_hold() -> None:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=preexec_fn,
            env=env if env is not None else {},
            start_new_session=True,
            pass_fds=pass_fds,
        )
        spawned.append(proc)
        trio.from_thread.run_sync(ready.set)
        proc.wait()

    async def hold() -> None:
        await trio.to_thread.run_sync(fork_and_hold)  # not abandoned on cancel: the thread must outlive the child
        exited.set()

    timed_out = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold)
        await ready.wait()  # a Popen failure raises out of hold() and cancels this wait
        (proc,) = spawned
        for fd in pass_fds:
            os.close(fd)
        streams = []
        for pipe in (proc.stdout, proc.stderr):
            streams.append(trio.lowlevel.FdStream(os.dup(pipe.fileno())))
            pipe.close()
        try:
            async with trio.open_nursery() as drains:
                drains.start_soon(_drain, streams[0], out)
                drains.start_soon(_drain, streams[1], err)
                with trio.move_on_after(seconds if math.isfinite(seconds) else 1e9) as scope:
                    await exited.wait()
                if scope.cancelled_caught:
                    timed_out = True
                    proc.send_signal(signal.SIGKILL)
                    await exited.wait()
                # The pipes close when the last holder is gone; the sandbox guarantees none outlives the
                # program, but never wait on a leaked pipe forever.
                drains.cancel_scope.deadline = trio.current_time() + 2
        finally:
            if not exited.is_set():
                proc.send_signal(signal.SIGKILL)  # hold() returns once the child is reaped
            for stream in streams:
                with trio.CancelScope(shield=True):
                    await stream.aclose()
    return ProcessRun(proc.returncode, out, err, time.monotonic() - started, timed_out)


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists (one owned by another user counts as alive)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
