"""What the records keep of each operation's result (OperationRecord.feedback), as typed Structs.

Trial writes these and verify reads them back, through ``feedback_record`` and
``read_feedback``: one encoding, so a field renamed on one side cannot silently read as
missing on the other. On disk each is a JSON object with the Struct's fields plus
``is_error`` and ``text`` (the result the participant saw, cut to 4000 characters).
``SandboxOpened`` is the same for the ``trial_opened`` event a replay is pinned to.
``OpResult`` is an operation's whole result inside the trial: the text and images the
participant is told, with the feedback kept.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import msgspec

from roboswe.evaluation.series_config import Budgets
from roboswe.protocol.bridge import ExecFeedback, ScriptException
from roboswe.protocol.participant import ACTION_OPERATIONS, ImagePart
from roboswe.protocol.sim import StepStop

TEXT_KEPT = 4000  # characters of the participant's result text kept with the operation


class Refused(msgspec.Struct, frozen=True, kw_only=True):
    """The operation was refused before it ran (bad path, invalid decision, unavailable search)."""

    error: str


class FileFeedback(msgspec.Struct, frozen=True, kw_only=True):
    """write_file / read_file: the file's size in bytes."""

    bytes: int


class Listed(msgspec.Struct, frozen=True, kw_only=True):
    """list_files (the listing itself is the text)."""


class ExecOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """One exec as recorded: the bridge's feedback, digests for replay comparison, success after it."""

    script: str
    exit_status: int
    steps: int
    limit: str | None
    stdout: str
    stderr: str
    stdout_sha256: str
    stderr_sha256: str
    stdout_bytes: int
    stderr_bytes: int
    exception: ScriptException | None
    wall_seconds: float
    backend: str
    refused: int = 0
    success_after: bool = False

    @classmethod
    def of(cls, fb: ExecFeedback, *, success_after: bool) -> ExecOutcome:
        return cls(script=fb.script, exit_status=fb.exit_status, steps=fb.steps, limit=fb.limit, stdout=fb.stdout,
                   stderr=fb.stderr, stdout_sha256=sha256_text(fb.stdout), stderr_sha256=sha256_text(fb.stderr),
                   stdout_bytes=fb.stdout_bytes, stderr_bytes=fb.stderr_bytes, exception=fb.exception,
                   wall_seconds=fb.wall_seconds, backend=fb.backend, refused=fb.refused, success_after=success_after)


class Observed(msgspec.Struct, frozen=True, kw_only=True):
    cameras: list[str]
    images: list[str]  # image digests, as the turn's image parts name them
    render_seconds: float
    control_step: int
    renderer: str = ""  # the GL renderer that drew them (Observation.renderer): "llvmpipe ..." is the CPU


ChunkStop = Literal[StepStop, "success"]
"""Why a direct-action chunk stopped: a simulator Step's stop, or the success interval completed mid-chunk."""


class Waited(msgspec.Struct, frozen=True, kw_only=True):
    applied: int
    stopped: StepStop
    success_after: bool = False


class Acted(msgspec.Struct, frozen=True, kw_only=True):
    """A direct-action chunk (act, or a family's action tool): how much of it ran and why it stopped.

    ``executed`` actions ran, one control step each, from ``step_start``; ``stopped`` is
    ``done`` (the executed prefix ran), ``success`` (the success interval completed mid-chunk),
    ``trial_budget`` (the control-step cap) or ``invalid_action`` (the simulator refused one).
    A chunk refused before any physics is recorded as ``Refused`` instead.

    A ``one_action`` chunk (move_flange) is one environment action over many control steps:
    ``executed`` is all its rows once the scene accepted it, ``controls`` the control steps it
    ran; one the scene rejected (``stopped = invalid_action``, ``executed = 0``) is still recorded
    here, not as ``Refused``: the scene counted it, so the replay sends it again.
    """

    requested: int  # actions in the chunk
    executable: int  # the prefix the track allows (K in the decisions track, else the chunk)
    executed: int
    stopped: ChunkStop
    step_start: int
    success_after: bool = False
    call: int = 0  # the participant call (0-based decision index) that answered this chunk
    controls: int = 0  # control steps the chunk ran
    one_action: bool = False  # the chunk was one environment action (sent whole in one Step)


class Searched(msgspec.Struct, frozen=True, kw_only=True):
    hits: int


class Finished(msgspec.Struct, frozen=True, kw_only=True):
    reason: str


class TrialMoved(msgspec.Struct, frozen=True, kw_only=True):
    """finish_trial / next_trial (an RLE-Bench speed-run's evaluation): the trial now current and whether it is open."""

    trial: int
    open: bool


Feedback: TypeAlias = (Refused | FileFeedback | Listed | ExecOutcome | Observed | Waited | Acted | Searched | Finished
                       | TrialMoved)

_BY_OPERATION: dict[str, type] = {
    "write_file": FileFeedback, "read_file": FileFeedback, "list_files": Listed, "exec": ExecOutcome,
    "observe": Observed, "wait": Waited, "search_history": Searched, "finish": Finished,
    "finish_trial": TrialMoved, "next_trial": TrialMoved,
}


class SandboxOpened(msgspec.Struct, frozen=True, kw_only=True):
    """The ``trial_opened`` event's data: what a replay of the trial must run under."""

    backend: str
    image_digest: str
    budgets: Budgets
    seed: int

    def event_data(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @classmethod
    def from_event(cls, data: dict[str, Any]) -> SandboxOpened:
        """Raises ValueError naming the field that does not fit."""
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as e:
            raise ValueError(f"trial_opened event does not fit: {e}") from None


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def feedback_record(feedback: Feedback, *, is_error: bool, text: str) -> dict[str, Any]:
    """The OperationRecord.feedback object for one operation's result."""
    return {**msgspec.to_builtins(feedback), "is_error": is_error, "text": text[:TEXT_KEPT]}


def read_feedback(operation: str, data: dict[str, Any]) -> Feedback:
    """The typed feedback of a recorded operation; raises ValueError naming the operation if it does not fit."""
    kind = Refused if "error" in data else _BY_OPERATION.get(operation, Acted if operation in ACTION_OPERATIONS else None)
    if kind is None:
        return Refused(error=str(data.get("text", f"unknown operation {operation!r}")))
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as e:
        raise ValueError(f"recorded {operation} feedback is not a {kind.__name__}: {e}") from None


@dataclass
class OpResult:
    """One operation's result: what the participant is told (text, images) and the feedback recorded."""

    text: str
    error: bool = False
    images: list[tuple[ImagePart, bytes]] = field(default_factory=list)
    feedback: Feedback = field(default_factory=Listed)
    step_end: int | None = None
    success: bool = False  # the success interval has been reached
