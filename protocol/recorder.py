"""Messages to the recorder: the records of a run, and durable-write requests.

Every record is also the row type the run database stores, so what the
coordinator sends is exactly what the recorder writes. Records sent on their
own are fire-and-forget; records wrapped in ``Durable`` are answered with
``Recorded`` only after they are committed to disk.

Ids are chosen by the sender (e.g. ``run/series/t3a0``) so records can be sent
without waiting for the database to assign keys.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ._base import Message
from ._codec import Codec
from .control import Control, Error, Ok
from .participant import OperationName

Outcome = Literal["success", "failure", "incomplete", "pending"]
Verdict = Literal["verified", "mismatch", "error"]
RetainMode = Literal["retain", "none"]
RecordedOperation = Literal[OperationName, "invalid"]
"""An operation's tool name, or "invalid" for a decision that carried no usable operation."""
CheckpointLabel = Literal["trial_start", "after_write", "after_exec"]
ArtifactKind = Literal["video", "video_index", "results", "canvas"]
Json = dict[str, Any]

NonNegative = Annotated[int, msgspec.Meta(ge=0)]


def _empty() -> dict[str, Any]:
    return {}


class RunRecord(Message, frozen=True, kw_only=True):
    """A run: its pins (model, budgets, backend, versions) and admitted-file digest."""

    run_id: str
    created_at: float
    config: Json = msgspec.field(default_factory=_empty)
    admitted_sha256: str = ""
    roboswe_version: str = ""


class SeriesRecord(Message, frozen=True, kw_only=True):
    """One task x one model, T trials, retaining workspace and conversation or not."""

    series_id: str
    run_id: str
    task: str
    model: str
    mode: RetainMode
    trials: Annotated[int, msgspec.Meta(ge=1)] = 5
    created_at: float
    pins: Json = msgspec.field(default_factory=_empty)


class TrialStarted(Message, frozen=True, kw_only=True):
    """A trial attempt began; ``recovers`` links a re-run to the interrupted original."""

    trial_id: str
    series_id: str
    index: Annotated[int, msgspec.Meta(ge=1)]  # 1..T
    attempt: NonNegative = 0
    fingerprint: str
    started_at: float
    recovers: str | None = None


class TrialEnded(Message, frozen=True, kw_only=True):
    """A trial attempt's outcome and figures; written once, never updated."""

    trial_id: str
    outcome: Outcome
    reason: str = ""
    control_steps: NonNegative = 0
    sim_time: float = 0.0
    active_time: float = 0.0
    # seconds per component: provider, execution, transport, physics, rendering, waits, recovery
    timing: dict[str, float] = msgspec.field(default_factory=dict)
    success_interval: tuple[int, int] | None = None  # control steps [first, last] the predicate held
    ended_at: float


class MessageRecord(Message, frozen=True, kw_only=True):
    """One provider call: the exact request and response bytes with their sha256."""

    message_id: str
    trial_id: str
    attempt: NonNegative = 0  # retry number of this call
    provider: str
    model: str = ""
    request: bytes
    response: bytes | None = None
    request_sha256: str = ""  # filled (or checked) by the recorder
    response_sha256: str = ""
    requested_at: float
    responded_at: float | None = None
    latency: float | None = None
    usage: Json = msgspec.field(default_factory=_empty)
    error: str = ""


class OperationRecord(Message, frozen=True, kw_only=True):
    """One operation of a trial with its feedback and the control steps it used."""

    trial_id: str
    seq: NonNegative
    operation: RecordedOperation
    arguments: Json = msgspec.field(default_factory=_empty)
    feedback: Json = msgspec.field(default_factory=_empty)
    step_start: NonNegative = 0  # control steps [step_start, step_end) consumed
    step_end: NonNegative = 0
    started_at: float
    ended_at: float
    message_id: str | None = None  # the provider call that decided it


class ControlTrace(Message, frozen=True, kw_only=True):
    """Per-step physics states for steps [step_start, step_end), as a compact array."""

    trial_id: str
    seq: NonNegative
    step_start: NonNegative
    step_end: NonNegative
    layout: dict[str, int] = msgspec.field(default_factory=dict)  # field -> width, in row order
    dtype: str = "<f8"
    data: bytes = b""  # (step_end - step_start) rows x sum(layout) columns, C order


class SlideRecord(Message, frozen=True, kw_only=True):
    """A context slide: which archived messages left the active request."""

    trial_id: str
    seq: NonNegative
    at: float
    removed: list[str] = msgspec.field(default_factory=list)
    before_units: NonNegative = 0
    after_units: NonNegative = 0
    method: str = ""  # how the request was counted: the TokenCount.method, e.g. "anthropic.count_tokens"


class EventRecord(Message, frozen=True, kw_only=True):
    """A notable event (refused call, restart, budget hit) for the run's timeline."""

    run_id: str
    event: str
    at: float
    trial_id: str | None = None
    data: Json = msgspec.field(default_factory=_empty)


class BlobRecord(Message, frozen=True, kw_only=True):
    """A content blob under RUN_DIR/blobs whose bytes read back with this sha256."""

    sha256: str
    size: NonNegative
    stored_at: float


class CheckpointRecord(Message, frozen=True, kw_only=True):
    """A workspace checkpoint: its manifest (canonical JSON) and digest."""

    checkpoint_id: str
    trial_id: str
    label: CheckpointLabel
    op_seq: int | None = None  # the operation it follows, None at trial start
    manifest_sha256: str
    files: NonNegative
    total_bytes: NonNegative
    manifest: bytes
    created_at: float


class VerificationRecord(Message, frozen=True, kw_only=True):
    """One replay of a trial: verified, mismatch (first divergence) or error (cause).

    ``verdict`` is about execution: ``verified`` when the replay agreed on every control step
    (commanded actions, physics states, the success interval, the family's own record),
    ``mismatch`` naming the first place it did not. Program output (exit status, stdout,
    stderr, a script's limit) is compared and kept in ``detail["output_differences"]``, never a
    mismatch: the score is the robot's. ``replay_outcome`` is what the replay reached
    (``success`` or ``failure``; None when it did not run to the end) and ``outcome_reproduced``
    whether that is the trial's recorded outcome over the same control steps.
    """

    verification_id: str
    trial_id: str
    verdict: Verdict
    outcome_reproduced: bool | None = None
    replay_outcome: Literal["success", "failure"] | None = None
    first_divergence: str = ""
    detail: Json = msgspec.field(default_factory=_empty)  # per-exec agreement, cause of error
    started_at: float
    ended_at: float


class ArtifactRecord(Message, frozen=True, kw_only=True):
    """A file under RUN_DIR (video, index, results.json) stored after sha256 readback."""

    artifact_id: str
    run_id: str
    trial_id: str | None = None
    artifact: ArtifactKind
    camera: str = ""
    path: str  # relative to RUN_DIR
    sha256: str
    size: NonNegative
    meta: Json = msgspec.field(default_factory=_empty)
    created_at: float


Record = (
    RunRecord
    | SeriesRecord
    | TrialStarted
    | TrialEnded
    | MessageRecord
    | OperationRecord
    | ControlTrace
    | SlideRecord
    | EventRecord
    | BlobRecord
    | CheckpointRecord
    | VerificationRecord
    | ArtifactRecord
)
RECORD_TYPES: tuple[type, ...] = Record.__args__  # type: ignore[attr-defined]


class Durable(Message, frozen=True, kw_only=True):
    """Records to commit before replying ``Recorded``; a reply is a durability receipt."""

    records: list[Record]


class Flush(Message, frozen=True, kw_only=True):
    """Commit everything sent before it; replied with ``Recorded``."""


class Recorded(Message, frozen=True, kw_only=True):
    """Receipt: the records are committed (survive kill -9 of any process)."""

    count: NonNegative


class CaptureCheckpoint(Message, frozen=True, kw_only=True):
    """Capture the workspace at ``workspace`` (a host path) as a durable checkpoint."""

    checkpoint_id: str
    trial_id: str
    label: CheckpointLabel
    workspace: str
    op_seq: int | None = None


class CheckpointCaptured(Message, frozen=True, kw_only=True):
    """Receipt for ``CaptureCheckpoint``: the blobs read back and the record is committed."""

    checkpoint_id: str
    manifest_sha256: str
    files: NonNegative
    total_bytes: NonNegative
    new_blobs: NonNegative
    refused: list[str] = msgspec.field(default_factory=list)  # "path: why" for skipped entries


class StoreArtifact(Message, frozen=True, kw_only=True):
    """Write a run-level file (blob 0) at ``path`` under RUN_DIR, read it back, record it; replied with ``ArtifactStored``."""

    artifact_id: str
    run_id: str
    artifact: ArtifactKind
    path: str  # relative to RUN_DIR, e.g. "results.json"
    trial_id: str | None = None  # a trial's file (e.g. a RoboPaint canvas)
    meta: Json = msgspec.field(default_factory=_empty)


class ArtifactStored(Message, frozen=True, kw_only=True):
    """Receipt: the file read back with this sha256 and its ArtifactRecord is committed."""

    artifact_id: str
    path: str
    sha256: str
    size: NonNegative


RecorderRequest = Record | Durable | Flush | CaptureCheckpoint | StoreArtifact
"""A bare Record is fire-and-forget (no reply); every other request is answered."""

RecorderReply = Recorded | CheckpointCaptured | ArtifactStored | Error | Ok

# One codec decodes both directions (the runtime's Server and Client share it).
RecorderMessage = Control | RecorderRequest | RecorderReply

RECORDER_CODEC: Codec = Codec(RecorderMessage)
