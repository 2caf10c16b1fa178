"""Simulator boundary: the coordinator's `control` endpoint and the bridge's `robot` endpoint.

Two unions, two codecs (``SIM_ROBOT_CODEC``, ``SIM_CODEC``). ``SimRobotMessage`` is the robot subset the sandbox bridge may use
(spec, state, observe, step, and reset, which only an RLE-Bench development simulator answers); admin
messages (load, wait, success, recorded states) are not in it, so the robot endpoint cannot even decode
a grading request. ``SimControlMessage``
is everything, for the coordinator.

Images travel as blobs: ``CameraImage.rgb_blob`` / ``depth_blob`` index the reply's blob frames.
RGB is uint8 H x W x 3, row-major, top image row first. Depth is float32 H x W in metres
(distance along the camera's optical axis). K is the 3x3 pinhole intrinsic matrix and
T_world_camera the 4x4 camera pose in the world frame, both in the OpenCV convention
(x right, y down, z forward), so ``p_world = T_world_camera @ [z*(u-cx)/fx, z*(v-cy)/fy, z, 1]``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ._base import Message
from ._codec import Codec
from .control import Control, Error

StepStop = Literal["done", "invalid_action", "trial_budget"]
"""Why a Step or Wait stopped: every action applied, one was rejected (nothing applied), or the
trial's step budget ran out part-way."""

# ---- plain data carried inside messages -------------------------------------------------


class Fingerprint(msgspec.Struct, frozen=True, kw_only=True):
    """Identity of an initial state: sha256 over model XML, compiled model, initial qpos/qvel/act/mocap, seed, versions."""

    digest: str
    seed: int
    model_xml_sha256: str
    initial_state_sha256: str
    versions: dict[str, str]
    # sha256 of the compiled binary model (mj_saveModel) as the trial starts: catches changed mesh or
    # texture files that leave the XML unchanged.
    compiled_model_sha256: str = ""


class ActionComponent(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    name: str  # e.g. "right.dx", "right.r_elbow_pitch", "right_gripper.grip"
    low: float
    high: float
    unit: str  # what 1.0 means, in which frame


class ActionSpec(msgspec.Struct, frozen=True, kw_only=True):
    """The action vector: bounds are enforced exactly (rejected outside, never clipped)."""

    dim: int
    low: list[float]
    high: list[float]
    components: list[ActionComponent]
    hold: list[float]  # the action `wait` repeats right now (current targets, zero deltas)
    hold_rule: str  # how `wait` holds targets for this controller
    doc: str  # units, frames and scaling, generated from the live controller config
    # False: one row of a Step is one action of one control step, so a budget may end a chunk after any
    # row. True: the whole chunk is ONE environment action (RoboPaint's MoveFlange: its rows are timed
    # waypoints) spanning as many control steps as its rows' durations (``duration_component``, seconds,
    # summed in row order, times control_hz, rounded) and never cut: a chunk that does not fit a script's
    # steps left is refused whole (bridge/door.py), nothing runs.
    chunk_is_one_action: bool = False
    duration_component: int | None = None


class CameraInfo(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    width: int
    height: int
    depth: bool
    calibration: bool


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    steps: int
    seconds: float


class ActionError(msgspec.Struct, frozen=True, kw_only=True):
    """Why an action was rejected; nothing in its chunk was applied."""

    chunk_index: int  # which action of the chunk
    component_index: int | None  # which component (None: wrong length)
    component: str | None
    value: float | None
    low: float | None
    high: float | None
    detail: str


class CameraImage(msgspec.Struct, frozen=True, kw_only=True):
    camera: str
    width: int
    height: int
    rgb_blob: int
    depth_blob: int | None = None
    K: list[list[float]] | None = None
    T_world_camera: list[list[float]] | None = None


class GoalImage(msgspec.Struct, frozen=True, kw_only=True):
    """One image of a task's goal, as the participant is shown it; its bytes are the reply's blob ``blob``."""

    name: str  # the family's label for it, e.g. "goal"; says nothing of the scene's coordinates
    media_type: str  # "image/png"
    width: int
    height: int
    sha256: str  # of the encoded bytes (the file), as recorded with the trial and shown in the gallery
    blob: int


# ---- robot subset (bridge) --------------------------------------------------------------


class GetSpec(Message, frozen=True, kw_only=True):
    pass


class TaskSpec(Message, frozen=True, kw_only=True):
    """Everything authored code may know about the task and the robot."""

    task_id: str
    instruction: str
    privileged: bool
    action_dim: int
    action_low: list[float]
    action_high: list[float]
    action: ActionSpec
    control_hz: int
    control_dt: float
    cameras: list[CameraInfo]
    state_keys: list[str]
    script_limits: Limits
    trial_limits: Limits


class GetState(Message, frozen=True, kw_only=True):
    pass


class RobotState(Message, frozen=True, kw_only=True):
    control_step: int
    sim_time: float
    steps_left: int
    values: dict[str, list[float]]


class Observe(Message, frozen=True, kw_only=True):
    cameras: list[str] = msgspec.field(default_factory=list)  # empty: every allowed camera
    depth: bool = True  # only for cameras whose manifest exposes depth


class Observation(Message, frozen=True, kw_only=True):
    control_step: int
    sim_time: float
    images: list[CameraImage]
    state: RobotState
    render_seconds: float
    # The GL renderer that drew the images (GL_RENDERER: "llvmpipe (...)" is the CPU, "NVIDIA H200/..." the
    # GPU), so the observation's evidence says which device rendered it. "" from a simulator predating it.
    renderer: str = ""


class Step(Message, frozen=True, kw_only=True):
    """A chunk of one or more actions, applied one control step each."""

    actions: list[list[float]]


class StepResult(Message, frozen=True, kw_only=True):
    applied: int
    control_step: int
    sim_time: float
    steps_left: int
    stopped: StepStop
    error: ActionError | None = None
    # The allowed state after the last applied step (RobotState.values, same allow-list), so a
    # step is one round trip. None: the sender predates this field (ask GetState instead).
    values: dict[str, list[float]] | None = None


class Reset(Message, frozen=True, kw_only=True):
    """The next development scene (a RobotState of it comes back). Only an RLE-Bench development
    simulator (roboswe/rle/scene.py; the simulator actor while it serves a LoadDevelopment) answers it,
    charging its ledger; a series scene refuses it (protocol.bridge.RESET_ONLY_IN_DEVELOPMENT)."""


# ---- admin (coordinator only) -----------------------------------------------------------


def encode_manifest(manifest: Any) -> msgspec.Raw:
    """A task manifest as Load and Prepare carry it: its Struct (or the to_builtins() form admitted.json
    keeps) encoded once; the simulator decodes it straight into its family's manifest Struct
    (``roboswe.sim.manifest.manifest_from_wire``), so a malformed manifest is refused field by field there."""
    return msgspec.Raw(msgspec.msgpack.encode(manifest))


class Load(Message, frozen=True, kw_only=True):
    """Build the task's scene fresh and reset it with ``seed``; ``trial_steps`` overrides the manifest budget."""

    manifest: msgspec.Raw  # encode_manifest(TaskManifest)
    seed: int
    trial_steps: int | None = None
    # A simulator family's name (sim/families.py); None: the manifest's own (upstream.package). Deliberately
    # open (not a Literal): simulator families are folders found by name, and the simulator answers an
    # unknown name with an Error that lists the ones it has, where a closed type would only give a decode error.
    backend: str | None = None


class Prepare(Message, frozen=True, kw_only=True):
    """Build the scene the next ``Load`` with these same fields will ask for, in the background.

    Every trial of a series loads the same manifest and seed, so the series sends this as soon as a
    trial's scene is loaded; the simulator builds the next one on a thread of its own while the
    loaded scene keeps stepping and rendering, and the next Load (waiting for the build if it is
    still running) takes the staged scene instead of building one. The staged scene is built fresh
    and reset with ``seed`` exactly as Load would (never a used scene reset), untouched until that
    Load, which reports its fingerprint for the usual check; a Load with other fields builds fresh
    and drops it. Answered with Ok at once; a failed build is only logged.
    """

    manifest: msgspec.Raw  # encode_manifest(TaskManifest)
    seed: int
    trial_steps: int | None = None
    backend: str | None = None  # as Load's


class Loaded(Message, frozen=True, kw_only=True):
    fingerprint: Fingerprint
    spec: TaskSpec
    manifest_digest: str
    staged: bool = False  # the scene was built ahead by Prepare (fresh, untouched), not by this Load


class LoadDevelopment(Message, frozen=True, kw_only=True):
    """An RLE-Bench development phase in place of a series scene: ``task`` is the RLE task manifest (encode_manifest).

    The simulator serves the task's development scene with the ledger on its side (roboswe/rle/scene.py):
    the robot subset answers from it (Reset included, charged), SuccessQuery reports the ledger's spent
    units as ``control_step`` (never achieved), TakeTaskRecord gives the ledger rows. Each row is also
    appended to ``record`` (a path on the simulator's host) as it is written. A family whose scene is a
    hidden instance draws it from the salt in ``salt_file``, read there. Reply: Loaded (fingerprint
    digest = the task manifest's digest). A Load ends it.
    """

    task: msgspec.Raw
    record: str | None = None
    salt_file: str | None = None  # the hidden salt's file on the simulator's host (None: the public salt)


class EndAttempt(Message, frozen=True, kw_only=True):
    """End an RLE-Bench phase on the simulator's side and take its evidence. An attempt whose reward is the
    scene's own final state (Tabletop Physical Reasoning): release, settle, snapshot, score, the ledger sealed
    over the attempt record (roboswe/rle/tabletop/runner.py). A speed-run's evaluation (LoadEvaluation): an open
    trial ends as it stands, trials never opened are failures (roboswe/rle/kitchen/evaluation.py). Reply: a
    TaskRecord whose files are that RLE run directory's; a development that ends in a sealed workspace, or none
    loaded, is refused."""


class LoadEvaluation(Message, frozen=True, kw_only=True):
    """An RLE-Bench speed-run's evaluation phase (family 01): ``task`` is the RLE task manifest (encode_manifest).

    The simulator draws the hidden kitchens from the salt in ``salt_file`` (read there; None: the public salt),
    opens trial 1 in the first and answers the robot subset from it (Reset refused); FinishTrial and NextTrial
    move through the trials; EndAttempt ends the phase and gives its record. The plan never leaves the simulator:
    every reply names the trial only by its number. Reply: Loaded (fingerprint digest = the task manifest's digest).
    A harness-transfer task (family 02) names one fresh agent's ``attempt`` (``agent_k`` / ``control_k``: it gets
    hidden kitchen k, alone) and the ``handoff_digest`` of what its workspace was given (the sealed harness's, or
    "" for an empty one), which its stage record carries.
    """

    task: msgspec.Raw
    salt_file: str | None = None
    attempt: str | None = None
    handoff_digest: str = ""


class FinishTrial(Message, frozen=True, kw_only=True):
    """The evaluation's current trial ends as it stands (the participant's finish_trial). Reply: EvaluationTrial."""


class NextTrial(Message, frozen=True, kw_only=True):
    """The next hidden kitchen opens once the current trial is finished (the participant's next_trial). Reply:
    EvaluationTrial."""


class EvaluationTrial(Message, frozen=True, kw_only=True):
    """Where the evaluation stands after FinishTrial or NextTrial: ``text`` is what the participant is told."""

    trial: int  # 1-based, the trial now current
    trials: int
    open: bool  # the current trial still takes actions
    text: str


class Wait(Message, frozen=True, kw_only=True):
    """Advance ``steps`` control steps holding the current targets (ActionSpec.hold)."""

    steps: int


class SuccessQuery(Message, frozen=True, kw_only=True):
    pass


class SuccessStatus(Message, frozen=True, kw_only=True):
    achieved: bool  # predicate held for `interval` consecutive control steps at some point
    interval: int
    achieved_step: int | None  # control step at which the interval was first completed
    first_held_step: int | None  # first control step at which the predicate held at all
    current_run: int  # consecutive steps it holds now
    longest_run: int
    control_step: int
    sim_time: float


class TakeStates(Message, frozen=True, kw_only=True):
    """Hand over (and forget) the per-step physics states recorded since the last TakeStates."""


class RecordedStates(Message, frozen=True, kw_only=True):
    """Per-control-step physics states; each array is a float64 blob, row-major, ``count`` rows."""

    fingerprint_digest: str
    seed: int
    count: int
    fields: dict[str, list[int]]  # name -> [blob index, columns]; names: sim.physics_state.RECORD_FIELDS


class TakeTaskRecord(Message, frozen=True, kw_only=True):
    """The task family's own evidence of the trial so far (e.g. RoboPaint's action log and canvas).

    ``end`` is the trial's end reason when it ends (None: a look, nothing changes); the family
    may finalize on it (RoboPaint saves the canvas; ``finish`` submits it). Most families have none.
    """

    end: str | None = None


class GetGoal(Message, frozen=True, kw_only=True):
    """The loaded task's goal images: what its family shows the participant as each trial opens,
    besides the instruction and the cameras (RoboPaint's image goal: the 1280x800 PNG whose SHA-256
    its manifest records). A family with a written goal only, or none, answers no images."""


class Goal(Message, frozen=True, kw_only=True):
    images: list[GoalImage] = msgspec.field(default_factory=list)


class TaskRecord(Message, frozen=True, kw_only=True):
    """``data``: the family's evidence (empty when it keeps none); ``files``: name -> blob index (e.g. canvas.png)."""

    data: dict[str, Any]
    files: dict[str, int] = msgspec.field(default_factory=dict)


SimRobotRequest = GetSpec | GetState | Observe | Step | Reset
"""What the sandbox bridge may ask on the robot endpoint."""

SimRobotReply = TaskSpec | RobotState | Observation | StepResult | Error

SimRequest = (SimRobotRequest | Load | Prepare | Wait | SuccessQuery | TakeStates | TakeTaskRecord | GetGoal | LoadDevelopment
              | EndAttempt | LoadEvaluation | FinishTrial | NextTrial)
"""What the coordinator may ask on the control endpoint: the robot subset plus the admin requests."""

SimReply = SimRobotReply | Loaded | SuccessStatus | RecordedStates | TaskRecord | Goal | EvaluationTrial

# One codec per endpoint decodes both directions (the runtime's Server and Client share it).
SimRobotMessage = Control | SimRobotRequest | SimRobotReply
SimControlMessage = Control | SimRequest | SimReply

SIM_ROBOT_CODEC: Codec = Codec(SimRobotMessage)
SIM_CODEC: Codec = Codec(SimControlMessage)
