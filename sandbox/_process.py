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
    """
    out, err = OutputBuffer(output_cap), OutputBuffer(output_cap)
    started = time.monotonic()
    proc = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=preexec_fn,
        env=env if env is not None else {},
        start_new_session=True,
        pass_fds=pass_fds,
    )
    for fd in pass_fds:
        os.close(fd)
    timed_out = False
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, proc.stdout, out)
            nursery.start_soon(_drain, proc.stderr, err)
            with trio.move_on_after(seconds if math.isfinite(seconds) else 1e9) as scope:
                await proc.wait()
            if scope.cancelled_caught:
                timed_out = True
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
            # The pipes close when the last holder is gone; the sandbox guarantees none outlives the
            # program, but never wait on a leaked pipe forever.
            nursery.cancel_scope.deadline = trio.current_time() + 2
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            with trio.CancelScope(shield=True):
                await proc.wait()
    return ProcessRun(proc.returncode, out, err, time.monotonic() - started, timed_out)
