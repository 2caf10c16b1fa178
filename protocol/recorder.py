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
from .bridge import CarriedBlob
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


class RunPins(msgspec.Struct, frozen=True, kw_only=True):
    """What a run pinned when it started (``RunRecord.config``), written once by the coordinator.

    Stored as one JSON column; a field a run recorded before it existed reads as its default, and a
    key this version no longer knows is ignored, so older run databases stay readable.
    """

    run_config: Json = msgspec.field(default_factory=_empty)  # the run config (roboswe.config.RunConfig) as plain data
    config_sha256: str = ""  # of the run config file's bytes (RUN_DIR's copy); empty bytes for the default config
    tasks: list[str] = msgspec.field(default_factory=list)  # the admitted tasks the run was asked for, in order
    backend: str | None = None  # the sandbox backend (docker, bwrap); None: the config's [series] backend
    sim_endpoint: str | None = None  # a remote simulator (`roboswe sim serve`); None: the run's own
    admitted_path: str = ""  # the admitted file (its digest: RunRecord.admitted_sha256)
    host: dict[str, str] = msgspec.field(default_factory=dict)  # the admitting host's versions (Admitted.host)
    workers: int = 1  # series at once when the run started
    ray: str | None = None  # the Ray cluster its workers were placed on

    @property
    def provider(self) -> Json:
        """The run config's [provider] section (empty when it had none)."""
        return dict(self.run_config.get("provider") or {})


class RunRecord(Message, frozen=True, kw_only=True):
    """A run: its pins (model, budgets, backend, versions) and admitted-file digest."""

    run_id: str
    created_at: float
    config: RunPins = msgspec.field(default_factory=RunPins)
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


ParticipantCause = Literal[
    "success_interval",  # the success predicate held for the task's interval: a success
    "finish",  # the participant called finish
    "step_budget",  # the trial's control steps are used up
    "time_budget",  # the trial's active time is used up (also while waiting for a decision)
    "decision_budget",  # the series' decision calls are used up (actions interface)
]
"""What ended a trial the participant played to its end: outcome ``success`` or ``failure``."""
IncompleteCause = Literal[
    "provider",  # the provider did not answer after its retries (an outage, a rate limit)
    "configuration",  # a provider setting every later trial would repeat: a refused key, an unknown model, no SDK
    "infrastructure",  # a peer, the sandbox or the simulator failed (the scene's load, the opening, a goal image)
    "interrupted",  # a peer died or was restarted under the trial, or the run was killed: re-run as a linked attempt
    "fingerprint_mismatch",  # the fresh scene is not the admitted one
    "context_overflow",  # one exchange is larger than the input budget B: the series stops
    "internal",  # a harness error (a bug): this trial ends, not the run
]
"""What ended a trial for a cause outside the participant: outcome ``incomplete``, never scored."""
TrialCause = Literal[ParticipantCause, IncompleteCause]
PARTICIPANT_CAUSES: tuple[str, ...] = ParticipantCause.__args__  # type: ignore[attr-defined]
INCOMPLETE_CAUSES: tuple[str, ...] = IncompleteCause.__args__  # type: ignore[attr-defined]
TRIAL_CAUSES: tuple[str, ...] = (*PARTICIPANT_CAUSES, *INCOMPLETE_CAUSES)


class TrialTiming(msgspec.Struct, kw_only=True):
    """Seconds per component of one trial, as ``TrialEnded.timing`` records them (a dict of these keys).

    Components overlap (``load`` and ``sandbox_open`` run side by side) and are not a partition of
    ``wall``; every figure is wall-clock seconds on the coordinator unless it says otherwise.
    """

    provider: float = 0.0  # the whole decision round trip (a local participant's own compute included)
    provider_http: float = 0.0  # time inside the provider's HTTP API, summed over attempts
    execution: float = 0.0  # scripts' wall time in the sandbox, as the bridge measured it
    script_sim: float = 0.0  # physics + rendering the scripts and direct actions asked of the simulator
    transport: float = 0.0  # round trips to the bridge and the simulator beyond the work they reported
    physics: float = 0.0  # the simulator's physics seconds (its own reading)
    rendering: float = 0.0  # the simulator's rendering seconds (its own reading)
    waits: float = 0.0  # wait operations, end to end
    context: float = 0.0  # preparing requests and appending turns (the context manager)
    recording: float = 0.0  # time the recorder link spent during the trial
    load: float = 0.0  # the scene's Load
    recovery: float = 0.0  # provider retry back-off (not active time)
    sandbox_open: float | None = None  # opening the sandbox (overlaps the load); absent when it never opened
    wall: float = 0.0  # the attempt, from its load to its end

    def record(self) -> dict[str, float]:
        """The recorded form: every component rounded to the microsecond, ``sandbox_open`` only when it opened."""
        return {k: round(v, 6) for k, v in msgspec.structs.asdict(self).items() if v is not None}


class TrialEnded(Message, frozen=True, kw_only=True):
    """A trial attempt's outcome and figures; written once, never updated.

    ``cause`` is what ended it, for every reader that decides something (retry eligibility, the
    configuration stop, the report); ``detail`` the human words; ``reason`` the line shown
    (``cause: detail``), kept for records written before causes were typed (their ``cause`` is None).
    """

    trial_id: str
    outcome: Outcome
    reason: str = ""
    control_steps: NonNegative = 0
    sim_time: float = 0.0
    active_time: float = 0.0
    # seconds per component, the keys of TrialTiming (a dict on the wire, so old runs and the viewer read it as is)
    timing: dict[str, float] = msgspec.field(default_factory=dict)
    success_interval: tuple[int, int] | None = None  # control steps [first, last] the predicate held
    ended_at: float
    cause: TrialCause | None = None  # None: recorded before causes were typed (read ``reason``)
    detail: str = ""


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
    # CarryCheckpoint only: the sha256 of every carried blob as the recorder read it back from its store
    carried: list[str] = msgspec.field(default_factory=list)


class CarryCheckpoint(Message, frozen=True, kw_only=True):
    """A checkpoint captured on a fleet worker's node (its workspace lives there, not under RUN_DIR):
    the manifest and, in blob 0 one after another, the blobs the head does not hold yet.

    Answered with ``CheckpointCaptured`` once every blob read back with its sha256 and the record is
    committed; its ``carried`` names those blobs, the node's receipt to drop its own copies.
    """

    checkpoint_id: str
    trial_id: str
    label: CheckpointLabel
    op_seq: int | None = None
    manifest: bytes
    manifest_sha256: str
    blobs: list[CarriedBlob] = msgspec.field(default_factory=list)


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


RecorderRequest = Record | Durable | Flush | CaptureCheckpoint | CarryCheckpoint | StoreArtifact
"""A bare Record is fire-and-forget (no reply); every other request is answered."""

RecorderReply = Recorded | CheckpointCaptured | ArtifactStored | Error | Ok

# One codec decodes both directions (the runtime's Server and Client share it).
RecorderMessage = Control | RecorderRequest | RecorderReply

RECORDER_CODEC: Codec = Codec(RecorderMessage)
