"""A simulator session: one loaded task, answered in the simulator boundary's message types.

The simulator actor calls these methods from the single thread that owns the scene; this
module knows nothing of ZeroMQ. Images become blobs (bytes) with their index in the reply.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec
import structlog
from roboswe.protocol.participant import png_size
from roboswe.protocol.sim import (
    ActionError,
    CameraImage,
    Fingerprint,
    Goal,
    GoalImage,
    Loaded,
    Observation,
    RecordedStates,
    RobotState,
    StepResult,
    SuccessStatus,
    TaskRecord,
    TaskSpec,
)

from .backend import (
    InvalidAction,
    NotLoaded,
    SimBackend,
    SimError,
    create_backend,
)
from .families import family as family_named
from .manifest import (
    ManifestError,
    TaskManifest,
    manifest_from_builtins,
    manifest_from_wire,
)
from .physics_state import states_to_blobs
from .render import device as render_device

log = structlog.get_logger()

ManifestData = msgspec.Raw | dict[str, Any]
"""A manifest as Load carries it (``protocol.sim.encode_manifest``), or its to_builtins() form (tests, admission)."""


class Staged(NamedTuple):
    """A scene built and reset for a later Load: what it was built for, the scene (never stepped since), its fingerprint."""

    key: tuple[str, int, int | None, str]  # manifest digest, seed, trial_steps, backend
    sim: SimBackend
    fingerprint: Fingerprint


def _untouched(sim: SimBackend) -> bool:
    """A staged scene is used only as it was built: reset once, nothing stepped, observed or rejected since."""
    s = sim.statistics()
    return sim.control_step == 0 and s.control_steps == 0 and s.observes == 0 and s.frames_rendered == 0 \
        and s.rejected_actions == 0


class SimSession:
    """Holds at most one loaded backend; every method raises SimError subclasses on misuse."""

    def __init__(self, *, require_fixed_hash_seed: bool = True, settle_heap: bool = False):
        self._require_fixed_hash_seed = require_fixed_hash_seed
        self._settle_heap = settle_heap  # see _settle
        self._backend: SimBackend | None = None
        self._manifest: TaskManifest | None = None
        self._staged: Staged | None = None  # Prepare's scene
        self._retired: SimBackend | None = None  # the scene a staged load replaced, until taken (see _retire)
        self._accounted = {"physics_seconds": 0.0, "render_seconds": 0.0, "control_steps": 0.0, "frames_rendered": 0.0}

    @property
    def backend(self) -> SimBackend:
        if self._backend is None:
            raise NotLoaded("no task is loaded; the coordinator sends Load first")
        return self._backend

    def load(self, manifest_data: ManifestData, seed: int, trial_steps: int | None, backend: str | None = None) -> Loaded:
        """Build the task's scene fresh and reset it (or take the one Prepare staged for exactly this, else keep
        that one staged); raises SimError / ManifestError.

        ``backend`` names a registered simulator backend; None: the manifest's family (``upstream.package``).
        """
        manifest, name = self._manifest_and_backend(manifest_data, backend)
        staged, self._staged = self._staged, None
        if staged is not None and staged.key == (manifest.digest(), seed, trial_steps, name) and _untouched(staged.sim):
            self._retire()
            sim, fingerprint, was_staged = staged.sim, staged.fingerprint, True
        else:
            self.close()
            # A staged scene that is not this one stays for the Load that asks for it: the next series' first
            # scene, staged during this worker's last trial, waits while the worker replays that series.
            self._staged = staged
            self._settle(name)
            (sim, fingerprint), was_staged = self._build(manifest, name, seed, trial_steps), False
        self._backend, self._manifest = sim, manifest
        return Loaded(fingerprint=fingerprint, spec=sim.spec(), manifest_digest=manifest.digest(), staged=was_staged)

    def build(self, manifest_data: ManifestData, seed: int, trial_steps: int | None, backend: str | None = None) -> Staged:
        """Build and reset a scene to stage, touching nothing of this session: any thread, while the loaded
        scene steps on another (the simulator builds the next trial's scene during this one)."""
        manifest, name = self._manifest_and_backend(manifest_data, backend)
        sim, fingerprint = self._build(manifest, name, seed, trial_steps)
        return Staged((manifest.digest(), seed, trial_steps, name), sim, fingerprint)

    def stage(self, staged: Staged) -> None:
        """Keep a built scene for the Load that asks for exactly it (any earlier staged scene is closed)."""
        self.drop_staged()
        self._staged = staged

    def drop_staged(self) -> None:
        staged, self._staged = self._staged, None
        if staged is not None:
            staged.sim.close()

    def _settle(self, family: str) -> None:
        """With no scene open, in the simulator's own process: import the family's packages, collect the
        closed scenes' garbage, then freeze what is left (modules, classes, caches) out of the collector's
        sight. A full collection otherwise walks every object robosuite and MuJoCo's bindings loaded
        (~160k objects, ~40 ms for Lift), paid by every scene close (robosuite ends it with
        ``gc.collect()``) and by any full collection mid-trial; frozen, it walks the scenes' objects. No
        scene is open here, so no scene's objects are frozen and their cycles are still collected. Not in
        a shared process (tests), where objects frozen now could never be collected once garbage.
        """
        if self._settle_heap and self._backend is None and self._staged is None:
            try:
                found = family_named(family)
            except KeyError:
                found = None  # the build that follows answers an unknown family
            if found is not None and found.import_simulator is not None:
                found.import_simulator()
            gc.collect()
            gc.freeze()

    def _manifest_and_backend(self, manifest_data: ManifestData, backend: str | None) -> tuple[TaskManifest, str]:
        try:
            if isinstance(manifest_data, msgspec.Raw):
                manifest = manifest_from_wire(manifest_data)
            else:
                manifest = manifest_from_builtins(manifest_data)
        except ManifestError as e:
            raise SimError(str(e)) from None
        return manifest, backend or manifest.upstream.package

    def _build(self, manifest: TaskManifest, name: str, seed: int, trial_steps: int | None) -> tuple[SimBackend, Fingerprint]:
        try:
            sim = create_backend(name, manifest, trial_steps=trial_steps, require_fixed_hash_seed=self._require_fixed_hash_seed)
        except KeyError as e:
            raise SimError(f"task {manifest.id!r}: {e.args[0]}") from None
        try:
            return sim, sim.reset(seed)
        except Exception:
            sim.close()
            raise

    def spec(self) -> TaskSpec:
        return self.backend.spec()

    def state(self) -> RobotState:
        sim = self.backend
        return RobotState(control_step=sim.control_step, sim_time=sim.sim_time, steps_left=sim.steps_left,
                          values=self._values())

    def _values(self) -> dict[str, list[float]]:
        """The allowed state values (the manifest's allow-list), as RobotState carries them."""
        return {k: v.astype(float).tolist() for k, v in self.backend.state().items()}

    def observe(self, cameras: Sequence[str], depth: bool) -> tuple[Observation, list[bytes]]:
        sim = self.backend
        before = sim.statistics().render_seconds
        frames = sim.observe(list(dict.fromkeys(cameras)), depth)  # each camera once: repeated names must not multiply renders
        blobs: list[bytes] = []
        images = []
        for f in frames:
            rgb_blob = len(blobs)
            blobs.append(f.rgb.tobytes())
            depth_blob = None
            if f.depth is not None:
                depth_blob = len(blobs)
                blobs.append(f.depth.astype("<f4").tobytes())
            h, w = f.rgb.shape[:2]
            images.append(CameraImage(
                camera=f.camera, width=w, height=h, rgb_blob=rgb_blob, depth_blob=depth_blob,
                K=None if f.K is None else f.K.tolist(),
                T_world_camera=None if f.T_world_camera is None else f.T_world_camera.tolist(),
            ))
        render_seconds = sim.statistics().render_seconds - before
        return Observation(control_step=sim.control_step, sim_time=sim.sim_time, images=images, state=self.state(),
                           render_seconds=render_seconds, renderer=render_device() or ""), blobs

    def step(self, actions: Sequence[Sequence[float]]) -> StepResult:
        sim = self.backend
        try:
            out = sim.step(actions)
        except InvalidAction as e:
            return StepResult(
                applied=0, control_step=sim.control_step, sim_time=sim.sim_time, steps_left=sim.steps_left,
                stopped="invalid_action",
                error=ActionError(chunk_index=e.chunk_index or 0, component_index=e.index, component=e.component,
                                  value=e.value, low=e.low, high=e.high, detail=e.detail),
            )
        return StepResult(applied=out.applied, control_step=out.control_step, sim_time=out.sim_time,
                          steps_left=out.steps_left, stopped=out.stopped, values=self._values())

    def wait(self, steps: int) -> StepResult:
        out = self.backend.wait(steps)
        return StepResult(applied=out.applied, control_step=out.control_step, sim_time=out.sim_time,
                          steps_left=out.steps_left, stopped=out.stopped)

    def success(self) -> SuccessStatus:
        sim = self.backend
        r = sim.success()
        return SuccessStatus(achieved=r.achieved, interval=r.interval, achieved_step=r.achieved_step,
                             first_held_step=r.first_held_step, current_run=r.current_run, longest_run=r.longest_run,
                             control_step=sim.control_step, sim_time=sim.sim_time)

    def take_states(self) -> tuple[RecordedStates, list[bytes]]:
        sim = self.backend
        states = sim.take_states()
        fields, blobs = states_to_blobs(states)
        fp = sim.fingerprint
        return RecordedStates(fingerprint_digest=fp.digest if fp else "", seed=fp.seed if fp else -1,
                              count=len(states), fields=fields), blobs

    def task_record(self, end: str | None) -> tuple[TaskRecord, list[bytes]]:
        data, files = self.backend.task_record(end)
        return TaskRecord(data=data, files={name: i for i, name in enumerate(files)}), list(files.values())

    def goal(self) -> tuple[Goal, list[bytes]]:
        """The loaded task's goal images (PNG), each with the SHA-256 of its bytes and its size from the PNG header."""
        images, blobs = [], []
        for name, data in self.backend.goal_images().items():
            width, height = png_size(data)
            if not width:
                raise SimError(f"goal image {name!r} is not a PNG")
            images.append(GoalImage(name=name, media_type="image/png", width=width, height=height,
                                    sha256=hashlib.sha256(data).hexdigest(), blob=len(blobs)))
            blobs.append(data)
        return Goal(images=images), blobs

    def accounting(self) -> dict[str, float]:
        """Increments of physics/render seconds, control steps and frames since the last call."""
        if self._backend is None:
            return {}
        s = self._backend.statistics()
        now = {"physics_seconds": s.physics_seconds, "render_seconds": s.render_seconds,
               "control_steps": float(s.control_steps), "frames_rendered": float(s.frames_rendered)}
        delta = {k: now[k] - self._accounted[k] for k in now if now[k] != self._accounted[k]}
        self._accounted = now
        return delta

    def close(self) -> None:
        """Close the loaded scene (a staged one is closed too, unless load() took it first, and a retired one)."""
        self.drop_staged()
        for backend in self.take_retired():
            backend.close()
        if (backend := self._detach()) is not None:
            backend.close()

    def _detach(self) -> SimBackend | None:
        """The loaded scene, no longer this session's (its accounting starts over)."""
        backend, self._backend = self._backend, None
        if backend is not None:
            self._accounted = dict.fromkeys(self._accounted, 0.0)
        return backend

    def _retire(self) -> None:
        """Put the loaded scene aside for take_retired(): its GL side goes to the staged scene now; the rest
        (robosuite ends a close with a full collection, then the model is freed: ~35 ms for Lift) can be
        closed later, off the Load's path, on another thread (the simulator does it before building the next
        scene). One retired at most: an earlier one that nobody took is closed here, as close() does."""
        for backend in self.take_retired():
            backend.close()
        if (backend := self._detach()) is not None:
            backend.close_renderer()
            self._retired = backend

    def take_retired(self) -> list[SimBackend]:
        """The scene the last load() put aside, to close (any thread); the caller owns it now."""
        retired, self._retired = self._retired, None
        return [] if retired is None else [retired]

