"""Sandbox bridge boundary: the robot calls authored code may make, and the trial control
the coordinator sends to the bridge actor.

Two unions, two codecs (``BRIDGE_ROBOT_CODEC``, ``BRIDGE_CODEC``). ``RobotCall`` is everything a sandboxed program may send on the
bridge socket (decoded only after the allow-list accepted its kind); ``BridgeMessage`` is
what the coordinator speaks with the bridge actor. Arrays travel as raw blob frames
described by ``Array``; they are never inside msgpack.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ._base import Message
from ._codec import Codec
from .control import Control, Error

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


RobotCall = GetSpec | GetState | Observe | Step | StepMany | GetStepsLeft
RobotReply = SpecReply | StateReply | ObserveReply | StepReply | StepsLeftReply | Error

ALLOWED_KINDS = frozenset(t.__name__ for t in (GetSpec, GetState, Observe, Step, StepMany, GetStepsLeft))
"""The only request kinds the bridge forwards. Everything else is refused and recorded."""

BRIDGE_ROBOT_CODEC: Codec = Codec(RobotCall | RobotReply)

# Error codes the robot module turns into its exceptions.
INVALID_ACTION = "invalid_action"
LIMIT_REACHED = "limit_reached"
REFUSED = "refused"

# --- coordinator side: trial control ----------------------------------------------------------

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
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
    backend: str | None = None  # "docker" | "bwrap"; None: docker when a daemon answers, else bwrap
    limits: ScriptLimits = ScriptLimits()
    sim_endpoint: str | None = None  # the simulator's robot endpoint; None: the run's configured one
    sim_keys: str | None = None  # CURVE key directory (`roboswe keys generate`) for a remote simulator


class TrialOpened(Message, frozen=True, kw_only=True):
    trial: str
    backend: str
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
    limit: str | None  # "steps" | "wall_time" | "memory" | "processes" | "cpu_time" | "file_size" | None
    backend: str
    refused: NonNegative = 0  # bridge requests refused during this script


class CloseTrial(Message, frozen=True, kw_only=True):
    trial: str


BridgeMessage = Control | OpenTrial | TrialOpened | ExecScript | ExecFeedback | CloseTrial
BRIDGE_CODEC: Codec = Codec(BridgeMessage)
