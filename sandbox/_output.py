"""Bounded capture of a program's stdout/stderr: keep a head and a tail, count the rest."""

from __future__ import annotations

import msgspec

# Escaping for a terminal is the commands' concern (roboswe/terminal.py, stdlib only); re-exported
# here and from roboswe.sandbox for the code that imported it from the sandbox.
from roboswe.terminal import terminal_safe as terminal_safe  # noqa: PLC0414 - the re-export roboswe.sandbox makes

MARKER = b"\x1eroboswe-exception "  # written by roboswe_runner on an uncaught exception
_TAIL_SHARE = 4  # a quarter of the cap is kept from the end, where tracebacks are


class Captured(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    total_bytes: int
    truncated: bool


class OutputBuffer:
    """Accepts any amount of output and keeps at most ``cap`` bytes of it (head and tail)."""

    def __init__(self, cap: int):
        self.cap = cap
        self._tail_cap = max(cap // _TAIL_SHARE, 1)
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - self._tail_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data[-self._tail_cap :]
            del self._tail[: max(len(self._tail) - self._tail_cap, 0)]

    def raw(self) -> bytes:
        return bytes(self._head + self._tail)

    def finish(self, strip_report: bool = False) -> tuple[Captured, dict | None]:
        """The kept text with a truncation marker, and the runner's exception report if asked.

        The runner writes its report as the last stderr line and escapes the marker byte in
        everything it relays, so only the last line is looked at. A report that does not
        decode is left in the text as the program's own output; this never raises.
        """
        report = None
        head, tail = bytes(self._head), bytes(self._tail)
        if strip_report:
            buf = tail or head
            i = buf.rfind(MARKER)
            line_end = buf.find(b"\n", i) if i >= 0 else -1
            if i >= 0 and (line_end < 0 or line_end == len(buf) - 1):
                report = parse_report(buf[i + len(MARKER) : line_end if line_end >= 0 else len(buf)])
            if report is not None:
                cut = buf[:i].rstrip(b"\n") + b"\n" if buf[:i].strip() else b""
                if tail:
                    tail = cut
                else:
                    head = cut
        dropped = self.total - len(self._head) - len(self._tail)
        if dropped > 0:
            text = (
                head.decode("utf-8", "replace")
                + f"\n[... {dropped} bytes not shown: output is capped at {self.cap} bytes per stream ...]\n"
                + tail.decode("utf-8", "replace")
            )
        else:
            text = (head + tail).decode("utf-8", "replace")
        return Captured(text=text, total_bytes=self.total, truncated=dropped > 0), report


class RunnerReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The runner's report of an uncaught exception, as it must look."""

    type: str
    message: str
    traceback: str


MAX_REPORT_BYTES = 64 * 1024
_report_decoder = msgspec.json.Decoder(RunnerReport)


def parse_report(line: bytes) -> dict | None:
    """The report as a dict, or None for anything else (too long, not JSON, wrong shape, too deep)."""
    if len(line) > MAX_REPORT_BYTES:
        return None
    try:
        return msgspec.structs.asdict(_report_decoder.decode(line))
    except Exception:  # noqa: BLE001 - whatever it is, it is the program's own output
        return None
