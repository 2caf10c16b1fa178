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

from roboswe.protocol.coordinator import LastEnd, WorkerProgress
from roboswe.protocol.coordinator import Progress as ProgressMessage

__all__ = ["LastEnd", "Progress"]

log = structlog.get_logger()


class Progress:
    """Live figures of the job (``figures``), its log lines, and the running trial's active-time clock."""

    def __init__(self) -> None:
        self.figures = ProgressMessage(state="starting")
        self.lines: list[str] = []
        self.active_clock: Callable[[], float] | None = None  # the running trial's active time, read at each query
        self.workers: dict[int, Progress] = {}  # busy fleet worker -> its series' figures
        self._parent: Progress | None = None

    def for_worker(self, worker: int) -> Progress:
        """Figures for the series fleet worker ``worker`` runs now; its log lines are the job's."""
        child = Progress()
        child.lines = self.lines  # one log: a worker's say() appends to the job's lines
        child._parent = self
        self.workers[worker] = child
        return child

    def worker_done(self, worker: int) -> None:
        self.workers.pop(worker, None)

    def update(self, **figures: Any) -> None:
        """Replace some figures; raises TypeError for a name the Progress message does not have.

        A trial's end is given as ``last_end`` (typed, what decisions read) with ``last_outcome`` (its display line).
        """
        self.figures = msgspec.structs.replace(self.figures, **figures)
        ended = {k: figures[k] for k in ("last_outcome", "last_end") if k in figures}
        if self._parent is not None and ended:  # the front end stops on a configuration end: the job's
            self._parent.update(**ended)

    def message(self, after: int = 0) -> ProgressMessage:
        """The answer to GetProgress(after): the figures as of now and the log lines after ``after``."""
        active = self.active_clock() if self.active_clock is not None else self.figures.active_s
        running = []
        for w, child in sorted(self.workers.items()):
            f = child.figures
            running.append(WorkerProgress(
                worker=w, series_id=f.series_id, task=f.task, trial=f.trial, trials=f.trials, operation=f.operation,
                steps_used=f.steps_used, steps_budget=f.steps_budget, last_outcome=f.last_outcome, last_end=f.last_end,
                active_s=child.active_clock() if child.active_clock is not None else f.active_s))
        return msgspec.structs.replace(self.figures, active_s=active, lines=self.lines[after:], line_count=len(self.lines),
                                       running=running)

    def say(self, line: str) -> None:
        self.lines.append(f"{time.strftime('%H:%M:%S')} {line}")
        log.info("progress", line=line)
