"""The robot, as authored code sees it: ``import robot``.

    robot.spec()                  task, action bounds, control rate, cameras, state keys, limits
    robot.state()                 dict[str, np.ndarray] of allowed proprioception
    robot.observe(cameras=None, depth=False)
                                  {camera: {"rgb": HxWx3 uint8, "depth": HxW float32 m,
                                            "K": 3x3, "T_world_camera": 4x4}}
    robot.step(action)            one control step; returns the new state dict
    robot.step_many(actions)      an (N, action_dim) chunk in one round trip
    robot.steps_left()            control steps left for this script
    robot.reset()                 a new scene: only in an RLE-Bench development phase (charged);
                                  anywhere else robot.ResetRefused

Errors: robot.InvalidAction, robot.LimitReached, robot.ResetRefused, robot.BridgeError. There
is nothing else: no state setting, no success or reward. Every call goes over a unix
socket to the sandbox bridge, which may refuse it.
"""

from __future__ import annotations

import os as _os
import socket as _socket
import time as _time

import numpy as _np
from roboswe.bridge import wire as _wire
from roboswe.protocol import DecodeError as _DecodeError
from roboswe.protocol.bridge import (
    BRIDGE_ROBOT_CODEC as _codec,
)
from roboswe.protocol.bridge import (
    INVALID_ACTION as _INVALID_ACTION,
)
from roboswe.protocol.bridge import (
    LIMIT_REACHED as _LIMIT_REACHED,
)
from roboswe.protocol.bridge import (
    REFUSED as _REFUSED,
)
from roboswe.protocol.bridge import (
    RESET_ONLY_IN_DEVELOPMENT as _RESET_ONLY_IN_DEVELOPMENT,
)
from roboswe.protocol.bridge import (
    RESET_REFUSED as _RESET_REFUSED,
)
from roboswe.protocol.bridge import (
    GetSpec as _GetSpec,
)
from roboswe.protocol.bridge import (
    GetState as _GetState,
)
from roboswe.protocol.bridge import (
    GetStepsLeft as _GetStepsLeft,
)
from roboswe.protocol.bridge import (
    Observe as _Observe,
)
from roboswe.protocol.bridge import (
    ObserveReply as _ObserveReply,
)
from roboswe.protocol.bridge import (
    Reset as _Reset,
)
from roboswe.protocol.bridge import (
    SpecReply as _SpecReply,
)
from roboswe.protocol.bridge import (
    StateReply as _StateReply,
)
from roboswe.protocol.bridge import (
    Step as _Step,
)
from roboswe.protocol.bridge import (
    StepMany as _StepMany,
)
from roboswe.protocol.bridge import (
    StepReply as _StepReply,
)
from roboswe.protocol.bridge import (
    StepsLeftReply as _StepsLeftReply,
)
from roboswe.protocol.control import Error as _Error

__all__ = [
    "BridgeError",
    "InvalidAction",
    "LimitReached",
    "ResetRefused",
    "observe",
    "reset",
    "spec",
    "state",
    "step",
    "step_many",
    "steps_left",
]

_TIMEOUT_MS = 120_000  # a chunk of steps plus rendering; the bridge's own wall limit ends scripts sooner
_CONNECT_SECONDS = 10.0


class BridgeError(RuntimeError):
    """The bridge refused the call or could not be reached."""


class InvalidAction(ValueError):
    """The action was rejected (wrong shape, not finite, or outside the bounds in spec()); nothing moved."""


class LimitReached(RuntimeError):
    """This script used all its control steps; ``steps_applied`` says how many of the last chunk ran."""

    def __init__(self, message: str, steps_applied: int = 0, state: dict | None = None):
        super().__init__(message)
        self.steps_applied = steps_applied
        self.state = state


class _Refused(BridgeError):
    """The bridge refused the call (Error code "refused"); a BridgeError to callers."""


class ResetRefused(RuntimeError):
    """robot.reset() outside an RLE-Bench development phase (a series trial, an artifact's verification)."""



class _Connection:
    def __init__(self) -> None:
        path = _os.environ.get("ROBOSWE_BRIDGE")
        if not path:
            raise BridgeError("no bridge: this module only works inside a roboswe sandbox (ROBOSWE_BRIDGE unset)")
        self.token = _os.environ.get("ROBOSWE_TOKEN", "")
        self.socket = _connect(path)
        self.reader = _wire.FrameReader(chunk=1 << 20)

    def call(self, message):
        _env, frames = _codec.encode(message, sender="robot")
        try:
            self.socket.sendall(_wire.encode(frames))
            reply_frames = _wire.read_message(self.socket.recv, self.reader)
        except TimeoutError:
            raise BridgeError(f"no answer from the bridge within {_TIMEOUT_MS / 1000:.0f} s") from None
        except (OSError, EOFError, _wire.FrameError) as e:
            raise BridgeError(f"the bridge connection failed: {e or type(e).__name__}") from None
        try:
            decoded = _codec.decode(reply_frames)
        except _DecodeError as e:
            raise BridgeError(f"unreadable reply from the bridge: {e.reason}") from None
        reply = decoded.message
        if isinstance(reply, _Error):
            if reply.code == _INVALID_ACTION:
                raise InvalidAction(reply.detail)
            if reply.code == _LIMIT_REACHED:
                raise LimitReached(reply.detail)
            if reply.code == _RESET_REFUSED:
                raise ResetRefused(reply.detail)
            if reply.code == _REFUSED:
                raise _Refused(f"{reply.code}: {reply.detail}")
            raise BridgeError(f"{reply.code}: {reply.detail}")
        return reply, decoded.blobs


def _connect(path: str) -> _socket.socket:
    # A unix socket refuses connections (EAGAIN) while the bridge's backlog is full: wait a little.
    deadline = _time.monotonic() + _CONNECT_SECONDS
    delay = 0.01
    while True:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(_TIMEOUT_MS / 1000)
        try:
            sock.connect(path)
            return sock
        except (BlockingIOError, ConnectionRefusedError) as e:
            sock.close()
            if _time.monotonic() > deadline:
                raise BridgeError(f"cannot reach the bridge at {path}: {e.strerror}") from None
        except OSError as e:
            sock.close()
            raise BridgeError(f"cannot reach the bridge at {path}: {e.strerror}") from None
        _time.sleep(delay)
        delay = min(delay * 2, 0.2)


_connection: _Connection | None = None


def _call(message):
    global _connection
    if _connection is None:
        _connection = _Connection()
    return _connection.call(message)


def _token() -> str:
    return _connection.token if _connection else _os.environ.get("ROBOSWE_TOKEN", "")


def _array(ref, blobs) -> _np.ndarray:
    # Copy out of the frame so the array is writable.
    return _np.frombuffer(blobs[ref.blob], dtype=_np.dtype(ref.dtype)).reshape(ref.shape).copy()


def _arrays(refs: dict, blobs) -> dict[str, _np.ndarray]:
    return {name: _array(ref, blobs) for name, ref in refs.items()}


def _as_action_rows(actions, what: str) -> list[list[float]]:
    try:
        a = _np.asarray(actions, dtype=_np.float64)
    except (TypeError, ValueError) as e:
        raise InvalidAction(f"{what} must be numbers, got {type(actions).__name__}: {e}") from None
    if what == "action":
        if a.ndim != 1:
            raise InvalidAction(f"action must be a 1-d sequence of floats, got shape {a.shape}")
        return [a.tolist()]
    if a.ndim != 2:
        raise InvalidAction(f"actions must be an (N, action_dim) array, got shape {a.shape}")
    return a.tolist()


def spec() -> dict:
    """The task: id, instruction, action_dim/low/high, control_hz, cameras, state keys, script limits."""
    reply, _ = _call(_GetSpec(token=_token()))
    assert isinstance(reply, _SpecReply)
    s = dict(reply.spec)
    for key in ("action_low", "action_high"):
        if key in s:
            s[key] = _np.asarray(s[key], dtype=_np.float64)
    return s


def state() -> dict[str, _np.ndarray]:
    """Current allowed proprioception; physics does not advance."""
    reply, blobs = _call(_GetState(token=_token()))
    assert isinstance(reply, _StateReply)
    return _arrays(reply.state, blobs)


def observe(cameras: list[str] | str | None = None, depth: bool = False) -> dict[str, dict[str, _np.ndarray]]:
    """Render the allowed cameras (all when ``cameras`` is None); physics does not advance."""
    if isinstance(cameras, str):
        cameras = [cameras]
    reply, blobs = _call(_Observe(token=_token(), cameras=list(cameras) if cameras is not None else None, depth=bool(depth)))
    assert isinstance(reply, _ObserveReply)
    return {cam: _arrays(fields, blobs) for cam, fields in reply.cameras.items()}


def _stepped(reply, blobs, requested: int) -> dict[str, _np.ndarray]:
    assert isinstance(reply, _StepReply)
    new_state = _arrays(reply.state, blobs)
    if reply.limit_reached:
        raise LimitReached(
            f"script step limit reached: applied {reply.steps} of {requested} requested step(s); no steps left",
            steps_applied=reply.steps,
            state=new_state,
        )
    return new_state


def step(action) -> dict[str, _np.ndarray]:
    """Apply one action for one control step; returns the new state. Raises InvalidAction, LimitReached."""
    (row,) = _as_action_rows(action, "action")
    reply, blobs = _call(_Step(token=_token(), action=row))
    return _stepped(reply, blobs, 1)


def step_many(actions) -> dict[str, _np.ndarray]:
    """Apply an (N, action_dim) chunk, one row per control step, in one round trip; returns the last state.

    The whole chunk is validated first (InvalidAction: nothing moved). If the script's step
    limit cuts the chunk short, LimitReached carries ``steps_applied`` and ``state``.
    """
    rows = _as_action_rows(actions, "actions")
    if not rows:
        raise InvalidAction("actions is empty: give at least one row")
    reply, blobs = _call(_StepMany(token=_token(), actions=rows))
    return _stepped(reply, blobs, len(rows))


def steps_left() -> int:
    """Control steps this script may still take."""
    reply, _ = _call(_GetStepsLeft(token=_token()))
    assert isinstance(reply, _StepsLeftReply)
    return reply.steps_left


def reset() -> dict[str, _np.ndarray]:
    """Start the next development scene; returns its state. Only in an RLE-Bench development phase, where
    each reset is charged to the ledger (state()["budget_left"]); elsewhere ResetRefused."""
    if not _os.environ.get("ROBOSWE_BRIDGE"):  # an artifact under verification has no robot at all
        raise ResetRefused(_RESET_ONLY_IN_DEVELOPMENT)
    try:
        reply, blobs = _call(_Reset(token=_token()))
    except _Refused as e:  # a series trial's bridge refuses the call itself
        raise ResetRefused(str(e).removeprefix("refused: ")) from None
    assert isinstance(reply, _StateReply)
    return _arrays(reply.state, blobs)
