"""Runs one authored script inside the sandbox and reports an uncaught exception on a channel the
script cannot write (installed in the image as ``roboswe_runner``; stdlib only).

The runner forks: the child runs the script with its stdout and stderr on pipes to the
parent, and on an uncaught exception sends a report on a third, private pipe. The parent
(the runner proper) relays the script's output to the real stdout and stderr, escaping the
report marker byte in what it relays, checks the child's report (bounded size, a JSON
object of three strings) and writes it, re-encoded, as the last stderr line. So a marker
line on the real stderr was written by the runner: a script can garble only its own
report pipe, and a garbled report is dropped. The parent is made non-dumpable so the
script (same uid) cannot open its descriptors through /proc.
"""

import json
import os
import runpy
import select
import signal
import sys
import time
import traceback

MARKER = "\x1eroboswe-exception "
RS = b"\x1e"
ESCAPED_RS = b"\\x1e"  # a record separator in the script's stderr, shown as text
MAX_REPORT_BYTES = 48 * 1024  # the bridge keeps 16 KiB of stderr's tail; tracebacks are cut to fit
MAX_TRACEBACK_CHARS = 8 * 1024
DRAIN_SECONDS = 0.3  # after the script exits, output still in flight; leftover children are killed by the sandbox
_CHUNK = 1 << 16
_ROBOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "robot.py")


def _user_frames(tb):
    # Drop the runner's and runpy's frames so the traceback starts in authored code.
    skip = (__file__, runpy.__file__, "<frozen runpy>")
    while tb is not None and tb.tb_frame.f_code.co_filename in skip:
        tb = tb.tb_next
    return tb


def _report(e: BaseException) -> dict:
    try:
        te = traceback.TracebackException(type(e), e, _user_frames(e.__traceback__))
        # The robot module's own frames say nothing to the author: end at the robot.* call.
        while len(te.stack) > 1 and te.stack[-1].filename == _ROBOT:
            te.stack = traceback.StackSummary.from_list(list(te.stack)[:-1])
        text = "".join(te.format())
    except Exception:  # noqa: BLE001 - e.g. a recursion too deep to format
        text = f"{type(e).__name__} (the traceback could not be formatted)\n"
    name = type(e).__qualname__
    module = type(e).__module__
    if module not in ("builtins", "__main__"):
        name = f"{module}.{name}"
    try:
        message = str(e)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the report
        message = "<unprintable>"
    return {"type": name, "message": message, "traceback": text}


def _run_script(script: str, report_fd: int) -> None:
    """The child: run the script; on an uncaught exception print the traceback and send the report."""
    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - everything the script raised is reported
        report = _report(e)
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        try:
            sys.stderr.write(report["traceback"])
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        report["traceback"] = report["traceback"][-MAX_TRACEBACK_CHARS:]
        report["message"] = report["message"][:2048]
        try:
            os.write(report_fd, json.dumps(report).encode()[:MAX_REPORT_BYTES])
        except OSError:
            pass
        os._exit(1)  # atexit handlers of the script are not ours to run after a crash


def _checked(data: bytes) -> dict | None:
    """The child's report if it is a JSON object of three strings within the size cap, else None."""
    if len(data) > MAX_REPORT_BYTES:
        return None
    try:
        report = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(report, dict) or set(report) != {"type", "message", "traceback"}:
        return None
    if not all(isinstance(v, str) for v in report.values()):
        return None
    return report


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except OSError:
            return  # the reader is gone: nothing more can be shown


def _set_dumpable(flag: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, flag, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:  # noqa: BLE001 - without it the script could only garble its own feedback
        pass


def _relay(child: int, out_r: int, err_r: int, rep_r: int) -> tuple[int, bytes]:
    """Copy the child's output through until it exited and its pipes are drained; returns (wait status, report)."""
    report = bytearray()
    open_fds = {out_r: 1, err_r: 2, rep_r: None}
    status = None
    drain_until = None
    while open_fds:
        if status is None:
            pid, st = os.waitpid(child, os.WNOHANG)
            if pid:
                status, drain_until = st, time.monotonic() + DRAIN_SECONDS
        if drain_until is not None and time.monotonic() > drain_until:
            break
        timeout = 0.05 if status is None else max(drain_until - time.monotonic(), 0)
        ready, _, _ = select.select(list(open_fds), [], [], timeout)
        for fd in ready:
            data = os.read(fd, _CHUNK)
            if not data:
                del open_fds[fd]
                os.close(fd)
                continue
            target = open_fds[fd]
            if target is None:
                if len(report) <= MAX_REPORT_BYTES:
                    report += data[: MAX_REPORT_BYTES + 1 - len(report)]
            elif target == 2:
                _write_all(2, data.replace(RS, ESCAPED_RS))
            else:
                _write_all(1, data)
    if status is None:
        _, status = os.waitpid(child, 0)
    return status, bytes(report)


def main() -> None:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python3 -m roboswe_runner SCRIPT.py\n")
        sys.exit(2)
    script = sys.argv[1]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    # Non-dumpable before the fork: made after it, a script that starts at once could open the
    # runner's stderr through /proc before the flag is set. The child is made dumpable again (its
    # own /proc, core limits and children as without the runner).
    _set_dumpable(0)
    child = os.fork()
    if child == 0:
        _set_dumpable(1)
        for fd in (out_r, err_r, rep_r):
            os.close(fd)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.close(out_w)
        os.close(err_w)
        _run_script(script, rep_w)
        return  # a normal end: the interpreter exits with the script's status
    for fd in (out_w, err_w, rep_w):
        os.close(fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)  # the sandbox ends the runner; the script cannot ask it to
    status, raw = _relay(child, out_r, err_r, rep_r)
    report = _checked(raw) if raw else None
    if report is not None:
        line = "\n" + MARKER + json.dumps(report) + "\n"
        _write_all(2, line.encode("utf-8", "replace"))
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)  # end as the script did, so the sandbox reads the same limit
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
