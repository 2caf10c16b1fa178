"""Bounded capture of a program's stdout/stderr: keep a head and a tail, count the rest."""

from __future__ import annotations

import json

import msgspec

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
        """The kept text with a truncation marker, and the runner's exception report if asked."""
        report = None
        head, tail = bytes(self._head), bytes(self._tail)
        if strip_report:
            for part in ("tail", "head"):
                buf = tail if part == "tail" else head
                i = buf.rfind(MARKER)
                if i < 0:
                    continue
                line_end = buf.find(b"\n", i)
                line = buf[i + len(MARKER) : line_end if line_end >= 0 else len(buf)]
                try:
                    report = json.loads(line)
                except ValueError:
                    break
                # drop the report line (and the blank line before it) from what the model sees
                cut = buf[:i].rstrip(b"\n") + b"\n" + (buf[line_end + 1 :] if line_end >= 0 else b"")
                if part == "tail":
                    tail = cut
                else:
                    head = cut
                break
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
