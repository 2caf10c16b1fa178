"""The simulator backend interface, its registry, and the parts every backend shares.

A backend owns one scene: it resets with a seed, validates and applies actions, tracks the
task's success predicate, renders cameras on demand and records per-step physics states for
video. Backends register by name (``@sim_backend("robosuite")``) and import their heavy
dependencies inside the factory, so a missing simulator only fails when it is used.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec
import numpy as np
from roboswe.protocol.sim import ActionSpec, Fingerprint, TaskSpec

from .physics_state import PhysicsStates as PhysicsStates  # backends return it from take_states

if TYPE_CHECKING:
    from .manifest import TaskManifest
    from .render import CameraFrame


class SimError(Exception):
    """A simulator failure that the caller can report; ``code`` is machine-readable."""

    code = "sim"


class ResetError(SimError):
    """The reset state is unusable (e.g. it already satisfies success); never resampled."""

    code = "reset"


class NotLoaded(SimError):
    code = "not_loaded"


class PhysicsFailure(SimError):
    """The physics diverged (MuJoCo reset an unstable state, or state became non-finite); the scene is retired."""

    code = "physics"


class InvalidAction(SimError):
    """An action that is rejected before physics; names the component, value and bound."""

    code = "invalid_action"

    def __init__(self, detail: str, *, index: int | None = None, component: str | None = None,
                 value: float | None = None, low: float | None = None, high: float | None = None):
        super().__init__(detail)
        self.detail = detail
        self.index = index
        self.component = component
        self.value = value
        self.low = low
        self.high = high
        self.chunk_index: int | None = None


class SuccessRecord(msgspec.Struct, frozen=True, kw_only=True):
    achieved: bool
    interval: int
    achieved_step: int | None
    first_held_step: int | None
    current_run: int
    longest_run: int


class SuccessTracker:
    """Counts consecutive control steps on which the upstream predicate holds."""

    def __init__(self, interval: int):
        self.interval = interval
        self.reset()

    def reset(self) -> None:
        self.current_run = 0
        self.longest_run = 0
        self.first_held_step: int | None = None
        self.achieved_step: int | None = None

    def update(self, step: int, holds: bool) -> None:
        if not holds:
            self.current_run = 0
            return
        self.current_run += 1
        self.longest_run = max(self.longest_run, self.current_run)
        if self.first_held_step is None:
            self.first_held_step = step
        if self.achieved_step is None and self.current_run >= self.interval:
            self.achieved_step = step

    def record(self) -> SuccessRecord:
        return SuccessRecord(
            achieved=self.achieved_step is not None,
            interval=self.interval,
            achieved_step=self.achieved_step,
            first_held_step=self.first_held_step,
            current_run=self.current_run,
            longest_run=self.longest_run,
        )


class StepOutcome(msgspec.Struct, frozen=True, kw_only=True):
    applied: int
    control_step: int
    sim_time: float
    steps_left: int
    stopped: str  # "done" | "trial_budget"


class BackendStatistics(msgspec.Struct, frozen=True, kw_only=True):
    control_steps: int
    sim_time: float
    physics_seconds: float
    render_seconds: float
    frames_rendered: int
    observes: int
    rejected_actions: int


class SimBackend(abc.ABC):
    """One task scene. Not thread-safe: one thread owns it (GL contexts are per thread)."""

    manifest: TaskManifest

    @abc.abstractmethod
    def reset(self, seed: int) -> Fingerprint:
        """Reset to the seeded initial state; raises ResetError if it already satisfies success."""

    @abc.abstractmethod
    def action_spec(self) -> ActionSpec:
        """Action bounds, units and the current hold action."""

    @abc.abstractmethod
    def spec(self) -> TaskSpec:
        """Everything authored code may know: action spec plus the observation contract."""

    @abc.abstractmethod
    def validate(self, action: Sequence[float]) -> np.ndarray:
        """Return the action as float64; raises InvalidAction (wrong length, non-finite, out of bounds)."""

    @abc.abstractmethod
    def step(self, actions: Sequence[Sequence[float]]) -> StepOutcome:
        """Validate the whole chunk, then apply one control step per action until done or the trial budget."""

    @abc.abstractmethod
    def wait(self, steps: int) -> StepOutcome:
        """Advance ``steps`` control steps holding the current targets."""

    @abc.abstractmethod
    def observe(self, cameras: Sequence[str] = (), depth: bool = True) -> list[CameraFrame]:
        """Render allowed cameras from the current state; physics does not advance."""

    @abc.abstractmethod
    def state(self) -> dict[str, np.ndarray]:
        """Allowed proprioceptive (and, if labelled, privileged) values."""

    @abc.abstractmethod
    def success(self) -> SuccessRecord:
        """Success bookkeeping; private to the simulator actor."""

    @abc.abstractmethod
    def take_states(self) -> PhysicsStates:
        """Per-step physics states recorded since the last call."""

    @abc.abstractmethod
    def statistics(self) -> BackendStatistics: ...

    @property
    @abc.abstractmethod
    def control_step(self) -> int: ...

    @property
    @abc.abstractmethod
    def sim_time(self) -> float: ...

    @property
    @abc.abstractmethod
    def steps_left(self) -> int: ...

    def close(self) -> None:
        """Release the scene and its GL context."""


_REGISTRY: dict[str, Callable[..., SimBackend]] = {}


def sim_backend(name: str):
    """Register a backend factory under ``name``."""

    def register(factory: Callable[..., SimBackend]):
        _REGISTRY[name] = factory
        return factory

    return register


def create_backend(name: str, manifest: TaskManifest, **kwargs) -> SimBackend:
    """Build a registered backend for a manifest; raises KeyError naming the known backends."""
    if name not in _REGISTRY and name.isidentifier():
        # A family whose module registers itself (sim/<family>_backend.py) is imported on first use.
        import importlib.util

        if importlib.util.find_spec(f"{__package__}.{name}_backend") is not None:
            importlib.import_module(f"{__package__}.{name}_backend")
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown simulator backend {name!r}; known: {sorted(_REGISTRY)}") from None
    return factory(manifest, **kwargs)


# The families this package ships. Each factory imports its module only when used, so a
# missing simulator (robosuite, MuJoCo) fails only for the tasks that need it.


@sim_backend("robosuite")
def _robosuite(manifest: TaskManifest, **kwargs) -> SimBackend:
    from .robosuite_backend import RobosuiteBackend

    return RobosuiteBackend(manifest, **kwargs)


@sim_backend("fake")
def _fake(manifest: TaskManifest, **kwargs) -> SimBackend:
    from .fake_backend import FakeBackend  # numpy only: a kinematic stand-in for in-process tests

    return FakeBackend(manifest, **kwargs)
