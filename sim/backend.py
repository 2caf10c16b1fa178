"""The simulator backend interface, and the parts every backend shares.

A backend owns one scene: it resets with a seed, validates and applies actions, tracks the
task's success predicate, renders cameras on demand and records per-step physics states for
video. Each simulator family's folder builds its backends (sim/families.py: ``Family.build``) and
imports its heavy dependencies inside the factory, so a missing simulator only fails when it is used.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec
import numpy as np
from roboswe.protocol.sim import (
    ActionSpec,
    CameraInfo,
    Fingerprint,
    Limits,
    StepStop,
    TaskSpec,
)

from .physics_state import PhysicsStates, StateLog

if TYPE_CHECKING:
    from .manifest import TaskManifest
    from .render import CameraFrame, SceneRenderer


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
    stopped: StepStop


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
    _renderer: SceneRenderer | None = None  # a family that renders keeps its renderer here

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

    def task_record(self, end: str | None) -> tuple[dict, dict[str, bytes]]:
        """The family's own evidence of this trial (data, files by name); ``end`` finalizes it. Most families keep none."""
        return {}, {}

    def goal_images(self) -> dict[str, bytes]:
        """The goal shown to the participant as each trial opens (name -> encoded PNG bytes); most families have none."""
        return {}

    def close_renderer(self) -> None:
        """Free the GL side now, or leave it to the next scene of the same model (close() does this too);
        the rest of the scene may then be closed on any thread, while another scene renders."""
        if self._renderer is not None:
            self._renderer.close()

    def close(self) -> None:
        """Release the scene and its GL context."""


class TrialBookkeeping(SimBackend):
    """What every backend keeps per trial: the step budget, success interval, state log and counters.

    A subclass calls ``_start_trial_bookkeeping`` in its constructor, sets ``control_dt``, and
    brings its own physics, validation and rendering. ``control_step`` counts this trial's
    control steps; a backend whose controller keeps its own count overrides it.
    """

    control_dt: float

    def _start_trial_bookkeeping(self, manifest: TaskManifest, trial_steps: int | None) -> None:
        self._trial_steps = trial_steps if trial_steps is not None else manifest.budgets.trial.steps
        self._tracker = SuccessTracker(manifest.success.interval)
        self._states = StateLog()
        self._loaded = False
        self._step = 0
        self._physics_s = self._render_s = 0.0
        self._frames = self._observes = self._rejected = self._total_steps = 0
        self.fingerprint: Fingerprint | None = None

    @property
    def control_step(self) -> int:
        return self._step

    @property
    def sim_time(self) -> float:
        return round(self.control_step * self.control_dt, 9)

    @property
    def steps_left(self) -> int:
        return max(0, self._trial_steps - self.control_step)

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise NotLoaded("no task is loaded; reset(seed) first")

    def spec(self) -> TaskSpec:
        m, a = self.manifest, self.action_spec()
        return TaskSpec(
            task_id=m.id, instruction=m.instruction, privileged=m.privileged,
            action_dim=a.dim, action_low=a.low, action_high=a.high, action=a,
            control_hz=m.control_hz, control_dt=self.control_dt,
            cameras=[CameraInfo(name=c.name, width=c.width, height=c.height, depth=c.depth, calibration=c.calibration)
                     for c in m.observation.cameras],
            state_keys=m.allowed_state_keys,
            script_limits=Limits(steps=m.budgets.script.steps, seconds=m.budgets.script.seconds),
            trial_limits=Limits(steps=self._trial_steps, seconds=m.budgets.trial.seconds),
        )

    def success(self) -> SuccessRecord:
        return self._tracker.record()

    def take_states(self) -> PhysicsStates:
        return self._states.take()

    def statistics(self) -> BackendStatistics:
        return BackendStatistics(control_steps=self._total_steps, sim_time=self.sim_time, physics_seconds=self._physics_s,
                                 render_seconds=self._render_s, frames_rendered=self._frames, observes=self._observes,
                                 rejected_actions=self._rejected)


class ControlLoop(TrialBookkeeping):
    """The step/wait loop of a backend whose every action is one control step.

    ``step`` validates the whole chunk before any physics (a rejected action names its place in
    the chunk and nothing moves); both stop at the trial budget. After each control step the
    predicate feeds the success interval and the physics state is logged with the action.
    """

    @abc.abstractmethod
    def hold_action(self) -> np.ndarray:
        """The action that keeps the current targets; ``wait`` repeats it."""

    @abc.abstractmethod
    def _physics_step(self, action: np.ndarray) -> None:
        """Advance one control step under a validated action; raise PhysicsFailure if the physics diverged."""

    @abc.abstractmethod
    def predicate_now(self) -> bool:
        """The task's success predicate on the current state (no interval)."""

    @abc.abstractmethod
    def _physics_state(self) -> dict[str, np.ndarray]:
        """The state to log for this control step (sim/physics_state.py field names)."""

    def step(self, actions: Sequence[Sequence[float]]) -> StepOutcome:
        self._require_loaded()
        checked = []
        for k, action in enumerate(actions):
            try:
                checked.append(self.validate(action))
            except InvalidAction as e:
                self._rejected += 1
                e.chunk_index = k
                raise
        return self._apply(checked)

    def wait(self, steps: int) -> StepOutcome:
        self._require_loaded()
        if steps < 0:
            raise InvalidAction(f"wait steps must be >= 0, got {steps}")
        # Bounded by the steps left before anything is built: `steps` is the participant's number.
        hold = self.hold_action()
        return self._apply([hold] * min(steps, self.steps_left), stopped_early=steps > self.steps_left)

    def _apply(self, actions: list[np.ndarray], *, stopped_early: bool = False) -> StepOutcome:
        applied, stopped = 0, "done"
        t0 = time.perf_counter()
        for a in actions:
            if self.steps_left <= 0:
                stopped = "trial_budget"
                break
            self._physics_step(a)
            self._step += 1
            self._total_steps += 1
            applied += 1
            self._tracker.update(self._step, self.predicate_now())
            self._states.append(self._step, self.sim_time, self._physics_state(), a)
        if stopped_early and self.steps_left <= 0:
            stopped = "trial_budget"
        self._physics_s += time.perf_counter() - t0
        return StepOutcome(applied=applied, control_step=self._step, sim_time=self.sim_time,
                           steps_left=self.steps_left, stopped=stopped)


def create_backend(name: str, manifest: TaskManifest, **kwargs) -> SimBackend:
    """Build the backend of the family ``name`` (sim/families.py) for a manifest; raises KeyError naming the known
    families."""
    from .families import family

    return family(name).build(manifest, **kwargs)
