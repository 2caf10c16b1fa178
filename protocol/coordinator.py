"""Coordinator boundary: the `roboswe run` / `verify` front end asks how the job is going.

The job itself is described by RUN_DIR/job.json (written by the CLI before the actors
start), so a coordinator restarted by the supervisor picks it up again and resumes.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ._base import Message
from ._codec import Codec
from .control import Control
from .recorder import Outcome, TrialCause

JobState = Literal["starting", "running", "videos", "done", "failed"]  # "videos": rendering trial videos after the series


class GetProgress(Message, frozen=True, kw_only=True):
    """Ask for the current progress; ``after`` = number of log lines already seen."""

    after: int = 0


class LastEnd(msgspec.Struct, frozen=True, kw_only=True):
    """The latest trial end, typed: what the front end decides on (a configuration stop), never the display line."""

    trial: int
    outcome: Outcome
    cause: TrialCause | None = None
    detail: str = ""


class WorkerProgress(msgspec.Struct, frozen=True, kw_only=True):
    """What one fleet worker is doing (with --workers N > 1 every running series has one)."""

    worker: int
    series_id: str = ""
    task: str = ""
    trial: int = 0
    trials: int = 0
    operation: str = ""
    steps_used: int = 0
    steps_budget: int = 0
    active_s: float = 0.0
    last_outcome: str = ""  # "trial N: OUTCOME (REASON)", for display
    last_end: LastEnd | None = None


class Progress(Message, frozen=True, kw_only=True):
    """Where the job stands: the live figures and the log lines after ``GetProgress.after``."""

    state: JobState
    detail: str = ""
    job: str = "run"  # "run" | "verify"
    series_done: int = 0
    series_total: int = 0
    task: str = ""
    series_id: str = ""
    mode: str = ""
    trial: int = 0
    trials: int = 0
    operation: str = ""
    steps_used: int = 0
    steps_budget: int = 0
    active_s: float = 0.0
    active_budget_s: float = 0.0
    last_outcome: str = ""  # "trial N: OUTCOME (REASON)", for display only
    last_end: LastEnd | None = None  # the same end, typed (the front end's configuration stop reads it)
    lines: list[str] = msgspec.field(default_factory=list)
    line_count: int = 0  # total log lines so far (pass as the next ``after``)
    running: list[WorkerProgress] = msgspec.field(default_factory=list)  # each busy worker's series (--workers N > 1)
    # the job's totals (every worker's): elapsed time and an estimate of the time left are read from these
    started_at: float = 0.0  # wall time the job began
    trials_done: int = 0
    trials_total: int = 0
    input_tokens: int = 0  # cached input and cache writes included, as the report counts them
    output_tokens: int = 0  # reasoning included
    cost: float | None = None  # at the run's pinned [provider.price]; None with ``cost_note`` saying why
    cost_note: str = ""
    currency: str = "USD"


CoordinatorMessage = Control | GetProgress | Progress
COORDINATOR_CODEC: Codec = Codec(CoordinatorMessage)
