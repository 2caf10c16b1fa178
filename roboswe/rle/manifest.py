"""An RLE-Bench task manifest: what the participant is told, what it may spend, what it must hand in,
how the verifier evaluates it and with which constants. Typed TOML under ``configs/tasks/rle/``."""

from __future__ import annotations

import tomllib
import types
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from roboswe.configs import CONFIGS_DIR

from .kitchen.rules import Kitchen
from .tabletop.rules import Tabletop
from .transfer.rules import Transfer

TASKS_DIR = CONFIGS_DIR / "tasks" / "rle"

Positive = Annotated[int, msgspec.Meta(gt=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
Weight = Annotated[float, msgspec.Meta(ge=0, le=1)]

WORKFLOWS = ("Interactive Control", "Policy Learning", "Perception and Estimation", "Mechanical Design")
"""The four workflows of the RLE Index, equally weighted."""
Workflow = Literal["Interactive Control", "Policy Learning", "Perception and Estimation", "Mechanical Design"]


class Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class Development(Strict, kw_only=True):
    """The development phase: public scenes and seeds only."""

    scene: str  # the sim family folder that renders it (sim/<scene>/)
    public_seeds: Positive  # seeds 0..N-1 of the public development set
    label_noise_m: float = 0.0  # labelled renders carry noisy pose labels and no shape label
    label_noise_rad: float = 0.0
    diagnostic_calls: int = 0  # design-set evaluations the participant may ask for


class Budget(Strict, kw_only=True):
    """What the development phase may spend; the ledger charges against it."""

    wall_seconds: PositiveFloat
    charged_steps: Positive  # renders, actions: everything that costs the simulator
    resets: int = 0
    tokens: int | None = None  # where the participant is a model


class ArtifactContract(Strict, kw_only=True):
    """What is sealed: the entry point plus files matching ``include``; everything else is refused."""

    entry_file: str  # e.g. estimator.py
    entry_function: str  # e.g. make_estimator
    include: tuple[str, ...]  # glob patterns (relative to the workspace root), e.g. "*.py", "data/*.npz"
    max_files: Positive = 64
    max_file_bytes: Positive = 8 << 20
    max_total_bytes: Positive = 32 << 20
    max_depth: Positive = 4


class CallLimits(Strict, kw_only=True):
    """The verifier's clock on the artifact: every call is timed on the verifier's side."""

    load_seconds: PositiveFloat  # import + factory
    call_seconds: PositiveFloat  # hang cap of one call
    total_seconds: PositiveFloat  # cumulative over all calls
    memory_mb: Positive = 2048
    processes: Positive = 32
    reply_bytes: Positive = 64 << 10  # a reply larger than this is refused unread


class Evaluation(Strict, kw_only=True):
    """The hidden battery (sizes; which seeds is the salt's business) and the sandbox it runs in."""

    variant: Literal["rgb", "rgbd"]
    width: Positive
    height: Positive
    stage_a_groups: Positive
    stage_a_frames_per_group: Positive
    stage_b_episodes: Positive
    stage_b_frames: Positive  # at most; an episode ends early when the block leaves the table
    rgb_noise: float = 0.0  # std of additive pixel noise (0..255 scale)
    depth_noise_m: float = 0.0
    image: Literal["artifact"] = "artifact"  # the sandbox image variant with numpy, scipy, OpenCV
    calls: CallLimits


class Scoring(Strict, kw_only=True):
    """Per group/episode: mean of two Gaussian kernels exp(-(e/w)^2) over the mean of its worst-k
    translation and wrapped-angle errors, 0 when any shape id in it is wrong; reward =
    a·A + b·B - D, D = max_deduction·clip[0,1]((full_rate_hz - ν)/(full_rate_hz - zero_rate_hz)), clipped to [0, 1]."""

    rule: Literal["pose-kernel"]
    stage_a_weight: Weight
    stage_b_weight: Weight
    worst_k: Positive
    translation_width_m: PositiveFloat
    angle_width_rad: PositiveFloat
    full_rate_hz: PositiveFloat
    zero_rate_hz: PositiveFloat
    max_deduction: Weight


class Protocol(Strict, kw_only=True):
    """Who the task belongs to and which version of its rules; a new salt is a new version."""

    name: Literal["RLE-Bench"] = "RLE-Bench"
    version: str  # e.g. pose/1
    family: str  # e.g. "06 Blind Planar Pose Estimation"
    workflow: Workflow


class RleTask(Strict, kw_only=True):
    id: str
    instruction: str
    placeholder: bool = False  # kit/placeholder assets: labelled, never pooled with real ones
    kit: str | None = None  # what the placeholder stands in for
    protocol: Protocol
    development: Development
    budget: Budget
    artifact: ArtifactContract
    evaluation: Evaluation | None = None  # the verifier's hidden battery (a family whose artifact is verified)
    scoring: Scoring | None = None
    tabletop: Tabletop | None = None  # family 03: one attempt on the hidden instance, scored from recorded physics
    kitchen: Kitchen | None = None  # family 01: the RoboCasa speed-run subtask, level and evaluation caps
    transfer: Transfer | None = None  # family 02: the practice and held-out composites, the fresh agents' caps


class TaskError(ValueError):
    """A task name or file that does not load; the message says which ones exist."""


def task_names() -> list[str]:
    return sorted(p.stem for p in TASKS_DIR.glob("*.toml"))


def load_task(name_or_path: str | Path) -> RleTask:
    """A shipped task by id (``pose-rgb``), or a TOML file a user names by path. A speed-run task at another
    harness level is its id with the level's suffix (``speedrun-kit-closecabinet-l3``: kitchen/plan.py at_level)."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = TASKS_DIR / f"{name_or_path}.toml"
        base, _, level = str(name_or_path).rpartition("-")
        if not path.exists() and level in ("l2", "l3") and (TASKS_DIR / f"{base}.toml").exists():
            task = load_task(base)
            if task.kitchen is not None:
                from .kitchen.plan import at_level

                return at_level(task, level.upper())  # type: ignore[arg-type] - one of LEVELS
        if not path.exists():
            raise TaskError(f"no RLE task {name_or_path!r}; the shipped ones are {task_names()}")
    try:
        return msgspec.convert(tomllib.loads(path.read_text()), RleTask)
    except (OSError, tomllib.TOMLDecodeError, msgspec.ValidationError) as e:
        raise TaskError(f"{path}: {e}") from e


def task_digest(task: RleTask) -> str:
    """sha256 of the manifest's canonical JSON: the report names the exact rules it was scored under.

    An optional section the task does not have (a family's own table, say) is left out rather than
    written as null, so adding a section for a new family leaves every other task's digest (and its
    recorded runs' ``roboswe verify``) as it was."""
    import hashlib

    fields = msgspec.to_builtins(task)
    for name in OPTIONAL_SECTIONS:
        if fields.get(name, ...) is None:
            del fields[name]
    return hashlib.sha256(msgspec.json.encode(fields, order="sorted")).hexdigest()


OPTIONAL_SECTIONS = tuple(f.name for f in msgspec.structs.fields(RleTask)
                          if f.default is None and isinstance(f.type, types.UnionType)
                          and any(isinstance(t, type) and issubclass(t, msgspec.Struct) for t in f.type.__args__))
"""RleTask's Struct-typed fields that default to None: its optional sections."""
