"""The job's live figures, as the coordinator answers GetProgress.

The figures are the protocol's ``Progress`` message itself, so its field list is written
once (protocol/coordinator.py); the job replaces some of them as it goes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgspec
import structlog

from roboswe.protocol.coordinator import Progress as ProgressMessage

log = structlog.get_logger()


class Progress:
    """Live figures of the job (``figures``), its log lines, and the running trial's active-time clock."""

    def __init__(self) -> None:
        self.figures = ProgressMessage(state="starting")
        self.lines: list[str] = []
        self.active_clock: Callable[[], float] | None = None  # the running trial's active time, read at each query

    def update(self, **figures: Any) -> None:
        """Replace some figures; raises TypeError for a name the Progress message does not have."""
        self.figures = msgspec.structs.replace(self.figures, **figures)

    def message(self, after: int = 0) -> ProgressMessage:
        """The answer to GetProgress(after): the figures as of now and the log lines after ``after``."""
        active = self.active_clock() if self.active_clock is not None else self.figures.active_s
        return msgspec.structs.replace(self.figures, active_s=active, lines=self.lines[after:], line_count=len(self.lines))

    def say(self, line: str) -> None:
        self.lines.append(f"{time.strftime('%H:%M:%S')} {line}")
        log.info("progress", line=line)
