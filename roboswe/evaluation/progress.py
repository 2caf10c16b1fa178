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
from roboswe.records.usage import Price, TokenUsage, call_usage, cost

__all__ = ["LastEnd", "Progress", "job_figures"]

log = structlog.get_logger()


class Progress:
    """Live figures of the job (``figures``), its log lines, and the running trial's active-time clock."""

    def __init__(self) -> None:
        self.figures = ProgressMessage(state="starting")
        self.lines: list[str] = []
        self.active_clock: Callable[[], float] | None = None  # the running trial's active time, read at each query
        self.workers: dict[int, Progress] = {}  # busy fleet worker -> its series' figures
        self._parent: Progress | None = None
        self.usage = TokenUsage()  # the job's provider calls so far (kept on the job's Progress)
        self.price: Price | None = None

    def _job(self) -> Progress:
        return self._parent if self._parent is not None else self

    def started(self, trials_total: int, price: Price | None) -> None:
        """The job began now, with ``trials_total`` trials to run, its calls priced at ``price``."""
        job = self._job()
        job.price = price
        job.update(started_at=time.time(), trials_total=trials_total)

    def provider_call(self, provider: str, response: bytes | None, recorded: dict[str, Any], error: str) -> None:
        """One provider attempt, counted as the report will count it (records/usage.py)."""
        job = self._job()
        job.usage = job.usage + call_usage(provider, response, recorded, error)

    def job_message(self) -> ProgressMessage:
        """The job's figures (every worker's totals), as GetProgress answers them."""
        return self._job().message(after=len(self._job().lines))

    def trial_ended(self) -> None:
        job = self._job()
        job.update(trials_done=job.figures.trials_done + 1)

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
        spent = cost(self.usage, self.price)
        return msgspec.structs.replace(self.figures, active_s=active, lines=self.lines[after:], line_count=len(self.lines),
                                       running=running, input_tokens=self.usage.input, output_tokens=self.usage.output,
                                       cost=spent.amount, cost_note=spent.reason, currency=spent.currency or self.figures.currency)

    def say(self, line: str) -> None:
        self.lines.append(f"{time.strftime('%H:%M:%S')} {line}")
        log.info("progress", line=line)


def job_figures(p: ProgressMessage, now: float | None = None) -> str:
    """The job so far in one line: '4 min elapsed, about 11 min left; 51.2k in / 3.1k out tokens, 0.42 USD'.

    The time left assumes the trials to come take as long as those done (what a researcher budgets
    with; the figure is called an estimate where shown). Tokens and cost appear once a call reported any.
    """
    if not p.started_at:
        return ""
    elapsed = max(0.0, (time.time() if now is None else now) - p.started_at)
    parts = [f"{_duration(elapsed)} elapsed"]
    if p.trials_done and p.trials_total > p.trials_done:
        parts.append(f"about {_duration(elapsed / p.trials_done * (p.trials_total - p.trials_done))} left")
    text = ", ".join(parts)
    if p.input_tokens or p.output_tokens:
        spent = f"{p.cost:.2f} {p.currency}" if p.cost is not None else "cost not reported"
        text += f"; {_tokens(p.input_tokens)} in / {_tokens(p.output_tokens)} out tokens, {spent}"
    return text


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _tokens(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)
