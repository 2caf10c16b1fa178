"""Sandbox bridge boundary: the robot calls authored code may make, and the trial control
the coordinator sends to the bridge actor.

Two boundaries, two codecs. ``RobotCall`` is everything a sandboxed program may send on the
bridge socket (decoded only after the allow-list accepted its kind), answered with a
``RobotReply`` (``BRIDGE_ROBOT_CODEC``). ``BridgeRequest`` is what the coordinator asks the
bridge actor, answered with a ``BridgeReply`` (``BRIDGE_CODEC``). Arrays travel as raw blob frames
described by ``Array``; they are never inside msgpack.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ._base import Message
from ._codec import Codec
from .control import Control, Error, ErrorCode, Ok

SandboxBackendName = Literal["docker", "bwrap"]

ScriptLimit = Literal["steps", "wall_time", "memory", "processes", "cpu_time", "file_size"]
"""Which per-script limit ended a program: the bridge's step limit, or one the sandbox enforces."""

# --- sandbox side: the robot API ------------------------------------------------------------


class Array(msgspec.Struct, frozen=True, array_like=True):
    """An n-d array carried in blob frame ``blob`` of the same message."""

    blob: int
    dtype: str  # numpy dtype string, e.g. "<f8", "|u1"
    shape: tuple[int, ...]


class _Call(Message, frozen=True, kw_only=True):
    token: str  # per-script secret from the environment; stale or foreign callers are refused


class GetSpec(_Call, frozen=True, kw_only=True):
    pass


class GetState(_Call, frozen=True, kw_only=True):
    pass


class Observe(_Call, frozen=True, kw_only=True):
    cameras: list[str] | None = None  # None: every allowed camera
    depth: bool = False


class Step(_Call, frozen=True, kw_only=True):
    action: list[float]


class StepMany(_Call, frozen=True, kw_only=True):
    actions: list[list[float]]


class GetStepsLeft(_Call, frozen=True, kw_only=True):
    pass


class Reset(_Call, frozen=True, kw_only=True):
    """A new scene: exists only in an RLE-Bench development phase (charged on its ledger); a series
    trial's simulator and an artifact's verification refuse it (Error code "reset")."""


class SpecReply(Message, frozen=True, kw_only=True):
    spec: dict[str, Any]  # plain JSON-like task description; see bridge.robot.spec()


class StateReply(Message, frozen=True, kw_only=True):
    state: dict[str, Array]


class ObserveReply(Message, frozen=True, kw_only=True):
    cameras: dict[str, dict[str, Array]]  # camera -> {"rgb", "depth", "K", "T_world_camera"}


class StepReply(Message, frozen=True, kw_only=True):
    state: dict[str, Array]
    steps: int  # control steps applied by this request
    steps_left: int
    limit_reached: bool = False  # a chunk stopped early at the script's step limit


class StepsLeftReply(Message, frozen=True, kw_only=True):
    steps_left: int


RobotCall = GetSpec | GetState | Observe | Step | StepMany | GetStepsLeft | Reset
RobotReply = SpecReply | StateReply | ObserveReply | StepReply | StepsLeftReply | Error

ALLOWED_KINDS = frozenset(t.__name__ for t in RobotCall.__args__)
"""The only request kinds the bridge forwards. Everything else is refused and recorded."""

BRIDGE_ROBOT_CODEC: Codec = Codec(RobotCall | RobotReply)

# Error codes the robot module turns into its exceptions.
INVALID_ACTION: ErrorCode = "invalid_action"
LIMIT_REACHED: ErrorCode = "limit_reached"
REFUSED: ErrorCode = "refused"
RESET_REFUSED: ErrorCode = "reset"  # robot.reset() outside a development phase
RESET_ONLY_IN_DEVELOPMENT = ("robot.reset() exists only in an RLE-Bench development phase; a series trial "
                             "and an artifact's verification start from the scene they are given")

# --- coordinator side: trial control ----------------------------------------------------------

NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class CarriedBlob(msgspec.Struct, frozen=True, array_like=True):
    """One content-addressed blob in a carried checkpoint's blob frame: its claimed sha256 and size.
    Here, not with the recorder's messages, because this module is also the sandbox image's copy."""

    sha256: str
    size: NonNegative


Positive = Annotated[int, msgspec.Meta(gt=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]


class ScriptLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Per-script limits (manifest budgets plus sandbox resource limits)."""

    steps: Positive = 50
    seconds: PositiveFloat = 90.0
    memory_mb: Positive = 2048
    processes: Positive = 64
    file_size_mb: Positive = 256
    output_bytes: Positive = 64 * 1024  # kept per stream; the rest is counted, not stored
    tmp_mb: Positive = 64  # the private /tmp is memory-backed: bounded so it cannot eat the host's RAM
    cpus: PositiveFloat = 1.0


class OpenTrial(Message, frozen=True, kw_only=True):
    """Create the trial's sandbox around ``workspace`` (a host directory)."""

    trial: str
    workspace: str
    backend: SandboxBackendName | None = None  # None: docker when a daemon answers, else bwrap
    limits: ScriptLimits = ScriptLimits()
    sim_endpoint: str | None = None  # the simulator's robot endpoint; None: the run's configured one
    sim_keys: str | None = None  # CURVE key directory (`roboswe keys generate`) for a remote simulator


class TrialOpened(Message, frozen=True, kw_only=True):
    trial: str
    backend: SandboxBackendName
    image_digest: str
    bridge_dir: str


class ExecScript(Message, frozen=True, kw_only=True):
    """Run one workspace script (path relative to the workspace) in the open trial's sandbox."""

    script: str
    limits: ScriptLimits | None = None  # None: the trial's limits
    trial: str | None = None  # None: the only open trial


class ScriptException(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    message: str
    traceback: str


class ExecFeedback(Message, frozen=True, kw_only=True):
    """What one exec did, as distinct fields. Says nothing about task success."""

    script: str
    exit_status: int  # 128+N when killed by signal N
    stdout: str
    stderr: str
    stdout_bytes: NonNegative  # total produced, including what was not kept
    stderr_bytes: NonNegative
    stdout_truncated: bool
    stderr_truncated: bool
    exception: ScriptException | None
    steps: NonNegative  # control steps completed by this script
    wall_seconds: float
    limit: ScriptLimit | None
    backend: SandboxBackendName
    refused: NonNegative = 0  # bridge requests refused during this script


class CloseTrial(Message, frozen=True, kw_only=True):
    trial: str


# --- coordinator side: a workspace kept on the bridge's node ------------------------------------
# A fleet worker's bridge with workspaces of its own (`[fleet] workspaces = "node"`) keeps each one
# under its node-local root, named by ``workspace`` (relative; OpenTrial.workspace is that name too),
# and applies the participant's file operations there. Refusals are Error(code="workspace"), whose
# detail is the participant's error result. Blobs travel in blob 0, one after another, as listed.


class _OnWorkspace(Message, frozen=True, kw_only=True):
    workspace: str  # the workspace's name under the node's root, e.g. "workspaces/run-1-lift"


class FreshWorkspace(_OnWorkspace, frozen=True, kw_only=True):
    """An empty workspace at ``workspace`` (earlier content removed: the head holds its checkpoints)."""


class RestoreWorkspace(_OnWorkspace, frozen=True, kw_only=True):
    """A checkpoint's files into the empty workspace: its manifest and every blob it names (blob 0)."""

    manifest: bytes
    blobs: list[CarriedBlob] = msgspec.field(default_factory=list)


class WorkspaceWrite(_OnWorkspace, frozen=True, kw_only=True):
    path: str
    content: str


class WorkspaceRead(_OnWorkspace, frozen=True, kw_only=True):
    path: str
    max_bytes: Positive


class WorkspaceList(_OnWorkspace, frozen=True, kw_only=True):
    pass


class CaptureWorkspace(_OnWorkspace, frozen=True, kw_only=True):
    """Snapshot the workspace for ``trial``'s checkpoint; replied with ``WorkspaceCaptured``."""

    trial: str


class WorkspaceCarried(_OnWorkspace, frozen=True, kw_only=True):
    """The head's receipt: these blobs read back there with their sha256, so the node drops its copies."""

    sha256: list[str]


class DropWorkspace(_OnWorkspace, frozen=True, kw_only=True):
    """Remove the workspace from the node (its series is over, or a replay's)."""


class WorkspaceFile(Message, frozen=True, kw_only=True):
    size: NonNegative  # the file's size in bytes (written, or on disk)
    text: str = ""  # a read's text, cut at max_bytes


class WorkspaceListing(Message, frozen=True, kw_only=True):
    text: str  # the list_files result as the participant reads it


class WorkspaceCaptured(Message, frozen=True, kw_only=True):
    """The checkpoint's manifest and, in blob 0, the blobs the head has not acknowledged yet."""

    manifest: bytes
    manifest_sha256: str
    blobs: list[CarriedBlob] = msgspec.field(default_factory=list)


WorkspaceRequest = (FreshWorkspace | RestoreWorkspace | WorkspaceWrite | WorkspaceRead | WorkspaceList
                    | CaptureWorkspace | WorkspaceCarried | DropWorkspace)

BridgeRequest = OpenTrial | ExecScript | CloseTrial | WorkspaceRequest
BridgeReply = TrialOpened | ExecFeedback | WorkspaceFile | WorkspaceListing | WorkspaceCaptured | Ok | Error

# One codec decodes both directions (the runtime's Server and Client share it).
BridgeMessage = Control | BridgeRequest | BridgeReply
BRIDGE_CODEC: Codec = Codec(BridgeMessage)
