"""The GR1 tabletop protocol's contract (configs/contracts/gr1-tabletop.toml), typed and applied.

The contract file is the one place the seed's numbers live: the 29-D action slices with their
orders and bounds, the hand expansion, the 29 encoder identities, the egoview pipeline and the
protocol identities of the two budget tracks. This module decodes it, validates actions against
it (reject, never clip), builds the policy image exactly as the native pipeline does, and names
a run's protocol identity. It imports numpy and cv2 only; no simulator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import numpy as np

from ..backend import InvalidAction
from ..manifest import CONFIGS_DIR, ManifestError

CONTRACT_PATH = CONFIGS_DIR / "contracts" / "gr1-tabletop.toml"

Fidelity = Literal["native", "offline-standin"]


class _Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class Source(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    repository: str
    revision: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{40}$")]
    package: str
    package_version: str
    module: str
    module_version: str


class Runtime(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    mujoco: str
    numpy: str
    python: str


class Sources(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    robocasa_gr1: Source
    robosuite: Source
    runtime: Runtime


class Robot(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    composite: Literal["BASIC"]
    unactuated: list[str]
    body_part_ordering: list[str]
    native_env_id: str


class ActionSlice(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    part: str  # robosuite composite-controller part
    start: int
    stop: int
    joints: list[str]
    low: list[float]
    high: list[float]


class Hand(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    expansion: list[int]
    actuators: list[str]


class Action(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    slices: list[ActionSlice]
    hand: Hand


class State(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    parts: dict[str, list[str]]


class Pipeline(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    camera: str
    camera_parent_body: str
    camera_pos: list[float]
    camera_quat: list[float]
    camera_fovy: float
    width: int
    height: int
    flip: Literal["vertical"]
    crop_rows: tuple[int, int]
    crop_cols: tuple[int, int]
    resize: tuple[int, int]
    pad: str
    output: tuple[int, int]
    resample: Literal["cv2.INTER_LINEAR"]
    dtype: Literal["uint8"]


class ObservationContract(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    image: str
    language: str
    language_prefix: str
    state: str
    metadata: list[str]
    pipeline: Pipeline


class Protocol(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    horizon: str
    horizon_cap_max: int
    decisions: str
    decisions_calls_max: int
    decisions_prefix_max: int
    selections: list[str]
    native_horizon: int


class FidelityRule(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    allowed: list[Fidelity]


class NativeTask(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    index: int
    task: str
    scope: str
    layouts: list[int]
    styles: list[int]


class Native(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    tasks: list[NativeTask]


class Contract(_Strict, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The GR1 tabletop protocol's contract; ``__post_init__`` checks its internal consistency."""

    id: str
    seed: str
    control_hz: int
    default_seed: int
    python_hash_seed: str
    sources: Sources
    robot: Robot
    action: Action
    state: State
    observation: ObservationContract
    protocol: Protocol
    fidelity: FidelityRule
    native: Native

    def __post_init__(self) -> None:
        at = 0
        for s in self.action.slices:
            n = s.stop - s.start
            if s.start != at or n <= 0 or not (len(s.joints) == len(s.low) == len(s.high) == n):
                raise ManifestError(f"contract action slice {s.name!r} [{s.start}:{s.stop}] does not continue at {at} "
                                    "or its joints/low/high lengths differ from its width")
            if any(lo > hi for lo, hi in zip(s.low, s.high)):
                raise ManifestError(f"contract action slice {s.name!r} has a low bound above its high bound")
            at = s.stop
        if [s.part for s in self.action.slices] != self.robot.body_part_ordering:
            raise ManifestError("contract action slices are not in robot.body_part_ordering")
        if len(self.action.hand.expansion) != len(self.action.hand.actuators):
            raise ManifestError("contract hand expansion and actuator list differ in length")

    @property
    def action_dim(self) -> int:
        return self.action.slices[-1].stop

    @property
    def low(self) -> np.ndarray:
        return np.concatenate([s.low for s in self.action.slices]).astype(np.float64)

    @property
    def high(self) -> np.ndarray:
        return np.concatenate([s.high for s in self.action.slices]).astype(np.float64)

    @property
    def component_names(self) -> list[str]:
        """One name per action component, e.g. ``left_arm.robot0_l_elbow_pitch``, ``right_hand.thumb_yaw``."""
        return [f"{s.name}.{j}" for s in self.action.slices for j in s.joints]

    @property
    def encoder_names(self) -> list[str]:
        """The 29 encoder joints in contract order."""
        return [j for joints in self.state.parts.values() for j in joints]


def load_contract(path: str | Path = CONTRACT_PATH) -> Contract:
    """Decode the contract file; raises ManifestError naming the file and the field."""
    path = Path(path)
    try:
        return msgspec.toml.decode(path.read_bytes(), type=Contract)
    except OSError as e:
        raise ManifestError(f"cannot read the GR1 contract {path}: {e.strerror}") from None
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise ManifestError(f"{path}: invalid GR1 contract: {e}") from None
    except ManifestError as e:
        raise ManifestError(f"{path}: {e}") from None


# ---- action -------------------------------------------------------------------------------------


def validate_action(contract: Contract, action: Sequence[float]) -> np.ndarray:
    """The action as float64 if it is exactly 29 finite radians within the contract's bounds.

    Raises InvalidAction naming the component, its value and its bound; nothing is clipped.
    """
    names, low, high = contract.component_names, contract.low, contract.high
    try:
        a = np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidAction(f"action must be a flat list of {len(low)} numbers (radians), got {action!r:.80}") from None
    if a.shape != low.shape:
        raise InvalidAction(f"action has shape {list(a.shape)} but the GR1 contract takes {len(low)} absolute joint targets "
                            f"in radians: {names}")
    for i, v in enumerate(a):
        lo, hi = float(low[i]), float(high[i])
        if not math.isfinite(v):
            raise InvalidAction(f"action[{i}] ({names[i]}) is {v}; every component must be a finite angle within "
                                f"[{lo:g}, {hi:g}] rad", index=i, component=names[i], value=float(v), low=lo, high=hi)
        if v < lo or v > hi:
            raise InvalidAction(f"action[{i}] ({names[i]}) = {v:g} rad is outside its bound [{lo:g}, {hi:g}] rad; "
                                "actions are rejected, never clipped", index=i, component=names[i], value=float(v),
                                low=lo, high=hi)
    return a


# ---- observation pipeline -------------------------------------------------------------------------


def crop_egoview(upright: np.ndarray, pipeline: Pipeline) -> np.ndarray:
    """Rows crop_rows and columns crop_cols of an upright (row 0 = top) egoview."""
    if upright.shape != (pipeline.height, pipeline.width, 3) or upright.dtype != np.uint8:
        raise ValueError(f"egoview must be uint8 {pipeline.height}x{pipeline.width}x3, got {upright.dtype} {upright.shape}")
    (r0, r1), (c0, c1) = pipeline.crop_rows, pipeline.crop_cols
    return upright[r0:r1, c0:c1]


def policy_image(raw_gl: np.ndarray, pipeline: Pipeline) -> np.ndarray:
    """The seed's egoview image from a raw OpenGL-order frame (row 0 = bottom), as the native code makes it.

    gymnasium_basic flips rows (``img[::-1]``), then gymnasium_groot.process_img_cotrain crops,
    resizes to 720x480, pads rows to a square with zeros and resizes to 256x256, both resizes
    bilinear (cv2's default; see the contract's ``resample``).
    """
    return policy_image_from_upright(np.copy(raw_gl[::-1]), pipeline)


def policy_image_from_upright(upright: np.ndarray, pipeline: Pipeline) -> np.ndarray:
    """The same pipeline after the flip: ``upright`` is the egoview with row 0 at the top."""
    import cv2

    img = crop_egoview(upright, pipeline)
    img = cv2.resize(img, tuple(pipeline.resize), interpolation=cv2.INTER_LINEAR)
    pad = (img.shape[1] - img.shape[0]) // 2
    img = np.pad(img, ((pad, pad), (0, 0), (0, 0)), mode="constant", constant_values=0)
    out = cv2.resize(img, tuple(pipeline.output), interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(out, dtype=np.uint8)


# ---- protocol identities ---------------------------------------------------------------------------


def protocol_identity(contract: Contract, *, selection: str, track: Literal["horizon", "decisions"],
                      control_step_cap: int | None = None, calls: int | None = None, prefix: int | None = None) -> str:
    """The run's protocol identity for one budget track; raises ValueError on a budget the track does not allow.

    ``horizon``: ``control_step_cap`` in 1..1000, no decision limits. ``decisions``: ``calls`` (D) in
    1..200 and ``prefix`` (K) in 1..5, no control cap. The two tracks are never one protocol.
    """
    p = contract.protocol
    if selection not in p.selections:
        raise ValueError(f"selection {selection!r} is not one of {p.selections}")
    if track == "horizon":
        if calls is not None or prefix is not None:
            raise ValueError("the horizon track takes no decision limits (calls/prefix); use track='decisions'")
        if not isinstance(control_step_cap, int) or not 1 <= control_step_cap <= p.horizon_cap_max:
            raise ValueError(f"control_step_cap must be an integer in 1..{p.horizon_cap_max}, got {control_step_cap!r}")
        return p.horizon.format(selection=selection, cap=control_step_cap)
    if track == "decisions":
        if control_step_cap is not None:
            raise ValueError("control_step_cap is not accepted in the decisions track; use track='horizon'")
        if not isinstance(calls, int) or not 1 <= calls <= p.decisions_calls_max:
            raise ValueError(f"calls (D) must be an integer in 1..{p.decisions_calls_max}, got {calls!r}")
        if not isinstance(prefix, int) or not 1 <= prefix <= p.decisions_prefix_max:
            raise ValueError(f"prefix (K) must be an integer in 1..{p.decisions_prefix_max}, got {prefix!r}")
        return p.decisions.format(selection=selection, calls=calls, prefix=prefix)
    raise ValueError(f"unknown budget track {track!r}; expected 'horizon' or 'decisions'")
