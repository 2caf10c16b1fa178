"""What the bridge does with an allowed robot call: per-script step accounting, action checks,
and translation to the simulator's robot endpoint. No ZeroMQ here: the simulator is reached
through an async ``SimLink`` the actor provides.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
import numpy as np
import structlog
from roboswe.protocol import Decoded, Message
from roboswe.protocol import sim as simp
from roboswe.protocol.bridge import (
    INVALID_ACTION,
    LIMIT_REACHED,
    REFUSED,
    RESET_ONLY_IN_DEVELOPMENT,
    RESET_REFUSED,
    Array,
    GetSpec,
    GetState,
    GetStepsLeft,
    Observe,
    ObserveReply,
    Reset,
    ScriptLimits,
    SpecReply,
    StateReply,
    Step,
    StepMany,
    StepReply,
    StepsLeftReply,
)
from roboswe.protocol.control import Error

log = structlog.get_logger()

SimLink = Callable[[Message], Awaitable[Decoded]]
"""Sends one request to the simulator's robot endpoint and returns its decoded reply; raises SimRefused when
the simulator answers an Error (``roboswe.actors.robot_link`` provides one)."""


class SimRefused(Exception):
    """The simulator answered a robot call with an Error; ``error`` carries it."""

    def __init__(self, error: Error):
        super().__init__(f"{error.code}: {error.detail}")
        self.error = error

Reply = tuple[Message, list[Any]]


class ScriptSession:
    """One running script: its secret token, its step budget, what it used and what was refused."""

    def __init__(self, script: str, limits: ScriptLimits):
        self.script = script
        self.limits = limits
        self.token = secrets.token_hex(16)
        self.steps = 0
        self.refused = 0
        self.limit_hit = False  # a step was asked for after the budget ran out, or a chunk was cut

    @property
    def steps_left(self) -> int:
        return max(self.limits.steps - self.steps, 0)


class _Blobs:
    def __init__(self) -> None:
        self.frames: list[Any] = []

    def add(self, data: Any, dtype: str, shape: Sequence[int]) -> Array:
        self.frames.append(data)
        return Array(len(self.frames) - 1, dtype, tuple(int(s) for s in shape))

    def array(self, a: np.ndarray) -> Array:
        a = np.ascontiguousarray(a)
        return self.add(a.tobytes(), a.dtype.str, a.shape)


def _values_arrays(values: dict[str, list[float]], blobs: _Blobs) -> dict[str, Array]:
    return {k: blobs.array(np.asarray(v, dtype=np.float64)) for k, v in values.items()}


def check_actions(rows: list[list[float]], spec: simp.TaskSpec) -> str | None:
    """None when every row is a finite in-bounds action, else what is wrong (nothing is clipped)."""
    low, high = spec.action_low, spec.action_high
    for i, row in enumerate(rows):
        where = f"action {i} of the chunk" if len(rows) > 1 else "action"
        if len(row) != spec.action_dim:
            return f"{where} has {len(row)} components; expected action_dim = {spec.action_dim}"
        for j, x in enumerate(row):
            name = spec.action.components[j].name if j < len(spec.action.components) else str(j)
            if not math.isfinite(x):
                return f"{where}, component {j} ({name}): {x} is not finite; actions are rejected, never clipped"
            if x < low[j] or x > high[j]:
                return f"{where}, component {j} ({name}) = {x} is outside [{low[j]}, {high[j]}]; actions are rejected, never clipped"
    return None


def chunk_control_steps(rows: list[list[float]], spec: simp.TaskSpec) -> int:
    """Control steps a checked chunk takes: one per row, or (a one-action chunk) its rows' durations at
    control_hz, summed in row order and rounded as the scene plans them (sim/paint/control.py)."""
    action = spec.action
    if not action.chunk_is_one_action or action.duration_component is None:
        return len(rows)
    return round(sum(row[action.duration_component] for row in rows) * spec.control_hz)


class RobotDoor:
    """Serves allowed robot calls for the current script against the simulator."""

    def __init__(self, sim: SimLink, *, resets: bool = False):
        self.sim = sim
        # Only an RLE-Bench development phase's door forwards robot.reset() (its simulator charges it); a
        # series trial's door refuses it here, so it never reaches the simulator (which refuses it too).
        self.resets = resets
        self.session: ScriptSession | None = None
        self._spec: simp.TaskSpec | None = None
        # The last simulator round trip: (request sent, reply's envelope sent_at, reply received), all
        # time.monotonic(), for the per-hop accounting (the bridge actor reads it after each call).
        self.last_sim: tuple[float, float, float] | None = None

    def begin(self, script: str, limits: ScriptLimits) -> ScriptSession:
        self.session = ScriptSession(script, limits)
        return self.session

    def end(self) -> ScriptSession | None:
        session, self.session = self.session, None
        return session

    async def spec(self) -> simp.TaskSpec:
        """The task spec (action bounds do not change within a trial, so it is fetched once)."""
        if self._spec is None:
            self._spec = await self._ask(simp.GetSpec(), simp.TaskSpec)
        return self._spec

    async def _ask(self, message: Message, expected: type) -> Any:
        return (await self._ask_blobs(message, expected))[0]

    async def _ask_blobs(self, message: Message, expected: type) -> tuple[Any, tuple]:
        sent = time.monotonic()
        decoded = await self.sim(message)
        self.last_sim = (sent, decoded.envelope.sent_at, time.monotonic())
        if not isinstance(decoded.message, expected):
            raise BridgeFault(f"simulator answered {type(decoded.message).__name__} to {type(message).__name__}")
        return decoded.message, decoded.blobs

    async def handle(self, decoded: Decoded) -> Reply:
        """The reply to one allowed call; a wrong token or no running script is a refusal."""
        message = decoded.message
        session = self.session
        if session is None or not secrets.compare_digest(message.token, session.token):
            raise Refused(type(message).__name__, "no script of this sandbox is running with that token")
        match message:
            case GetSpec():
                return await self._get_spec(session), []
            case GetState():
                blobs = _Blobs()
                state = await self._ask(simp.GetState(), simp.RobotState)
                return StateReply(state=_values_arrays(state.values, blobs)), blobs.frames
            case Observe(cameras=cameras, depth=depth):
                return await self._observe(cameras, depth)
            case Step(action=action):
                return await self._step(session, [action])
            case StepMany(actions=actions):
                return await self._step(session, actions)
            case GetStepsLeft():
                state = await self._ask(simp.GetState(), simp.RobotState)
                return StepsLeftReply(steps_left=min(session.steps_left, state.steps_left)), []
            case Reset() if self.resets:
                return await self._reset()
            case Reset():
                raise Refused("Reset", RESET_ONLY_IN_DEVELOPMENT)
        raise Refused(type(message).__name__, "not a robot call")

    async def _get_spec(self, session: ScriptSession) -> Message:
        spec = await self._ask(simp.GetSpec(), simp.TaskSpec)
        self._spec = spec
        data = msgspec.to_builtins(spec)
        data.pop("kind", None)
        data["script_limits"] = {"steps": session.limits.steps, "seconds": session.limits.seconds}
        return SpecReply(spec=data)

    async def _observe(self, cameras: list[str] | None, depth: bool) -> Reply:
        if cameras:
            # Each name once, and only the task's cameras: 400 copies of one name must not render 400 frames.
            cameras = list(dict.fromkeys(cameras))
            allowed = [c.name for c in (await self.spec()).cameras]
            unknown = [c for c in cameras if c not in allowed]
            if unknown:
                shown = ", ".join(repr(c[:64]) for c in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
                return Error(code="bridge", detail=f"unknown camera(s) {shown}; this task's cameras are {allowed}"), []
        obs, sim_blobs = await self._ask_blobs(simp.Observe(cameras=list(cameras or []), depth=depth), simp.Observation)
        blobs = _Blobs()
        out: dict[str, dict[str, Array]] = {}
        for img in obs.images:
            fields = {"rgb": blobs.add(sim_blobs[img.rgb_blob], "|u1", (img.height, img.width, 3))}
            if img.depth_blob is not None:
                fields["depth"] = blobs.add(sim_blobs[img.depth_blob], "<f4", (img.height, img.width))
            if img.K is not None:
                fields["K"] = blobs.array(np.asarray(img.K, dtype=np.float64))
            if img.T_world_camera is not None:
                fields["T_world_camera"] = blobs.array(np.asarray(img.T_world_camera, dtype=np.float64))
            out[img.camera] = fields
        return ObserveReply(cameras=out), blobs.frames

    async def _reset(self) -> Reply:
        """A new development scene (the development simulator charges it); its refusal comes back as the robot
        module's ResetRefused and a spent development budget as LimitReached, not as bridge faults."""
        try:
            state = await self._ask(simp.Reset(), simp.RobotState)
        except SimRefused as e:
            if e.error.code not in (RESET_REFUSED, LIMIT_REACHED):
                raise
            return _error(RESET_REFUSED, e.error.detail), []
        blobs = _Blobs()
        return StateReply(state=_values_arrays(state.values, blobs)), blobs.frames

    async def _step(self, session: ScriptSession, rows: list[list[float]]) -> Reply:
        if session.steps_left == 0:
            session.limit_hit = True
            return _error(LIMIT_REACHED, f"this script used all {session.limits.steps} control steps; no further step is accepted"), []
        spec = await self.spec()
        problem = check_actions(rows, spec)
        if problem:
            return _error(INVALID_ACTION, problem), []
        if spec.action.chunk_is_one_action:
            # One environment action (a MoveFlange): sent whole or not at all, never cut to the steps left.
            need = chunk_control_steps(rows, spec)
            if need > session.steps_left:
                return _error(LIMIT_REACHED, f"this chunk is one action of {need} control steps (its durations at "
                                             f"{spec.control_hz} Hz) and this script has {session.steps_left} left: it was "
                                             "refused whole, nothing moved (a chunk is never cut); send a shorter one"), []
            allowed = rows
        else:
            allowed = rows[: session.steps_left]
        try:
            result = await self._ask(simp.Step(actions=allowed), simp.StepResult)
        except SimRefused as e:  # an RLE-Bench phase refuses a batch whole (over 200, or beyond what is left)
            if e.error.code not in (INVALID_ACTION, LIMIT_REACHED):
                raise
            session.limit_hit |= e.error.code == LIMIT_REACHED
            return _error(e.error.code, e.error.detail), []
        session.steps += result.applied
        if result.stopped == "invalid_action":
            detail = result.error.detail if result.error else "the simulator rejected the action"
            return _error(INVALID_ACTION, detail), []
        if result.stopped == "trial_budget" and result.applied == 0:
            session.limit_hit = True
            return _error(LIMIT_REACHED, "the trial's control-step budget is used up"), []
        # Cut: the script's budget trimmed the rows, or the trial's ran out under them. Not applied <
        # len(rows): a family whose one row is not one control step (a MoveFlange waypoint spans many)
        # may end a batch early on its own (a protective stop), which is no step limit.
        cut = len(allowed) < len(rows) or result.stopped == "trial_budget"
        session.limit_hit |= cut
        values = result.values
        if values is None:  # a simulator older than StepResult.values: one more round trip
            values = (await self._ask(simp.GetState(), simp.RobotState)).values
        blobs = _Blobs()
        reply = StepReply(
            state=_values_arrays(values, blobs),
            steps=result.applied,
            steps_left=min(session.steps_left, result.steps_left),
            limit_reached=cut,
        )
        return reply, blobs.frames


class Refused(Exception):
    """A request the door will not serve; becomes Error(code="refused") and a bridge_refused event."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


class BridgeFault(Exception):
    """The simulator answered something unexpected."""


def _error(code: str, detail: str) -> Error:
    return Error(code=code, detail=detail)


def refusal_error(reason: str) -> Error:
    return Error(code=REFUSED, detail=reason)
