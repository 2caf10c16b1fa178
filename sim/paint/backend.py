"""The RoboPaint family: the paint scene behind the simulator backend interface, one round per reset.

The participant's environment actions are ``move_flange(waypoints)`` and ``submit_painting()``;
one MoveFlange is one action whatever its waypoint count, and a rejected batch also uses one
(it is an action the participant took; RoboPaint counts a rejected no-movement step the same
way). Submitting, or reaching the manifest's action limit (96 by default), ends the round and
saves the canvas (PNG bytes and its SHA-256). The observation is the rendered workspace
camera(s) and the flange pose in the robot-base frame; nothing about the paper, pigment or
brush mount. ``brushcam`` follows the brush for video and is never an observation camera.

The generic vector interface maps one waypoint to one 8-vector
``[x, y, z, qx, qy, qz, qw, duration_s]``: ``step(chunk)`` is one MoveFlange with the chunk as
its waypoints, ``wait(n)`` holds the arm for n control steps (100 Hz).
Every action (accepted or not) is appended to ``action_log``; ``replay_round`` re-executes a
log in a fresh scene, which must reproduce the canvas hash.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any, Literal

import msgspec
import numpy as np
from roboswe.protocol.sim import ActionComponent, ActionSpec, Fingerprint

from ..backend import (
    InvalidAction,
    SimError,
    StepOutcome,
    TrialBookkeeping,
)
from ..manifest import ManifestError, TaskManifest
from ..physics_state import StateLog, fingerprint_bytes, snapshot
from ..render import CameraFrame
from . import control as pc
from . import scene as ps

SCENE_VERSION = "robopaint-1"
STATE_KEYS = ("flange_pos", "flange_quat_xyzw")
VIDEO_ONLY_CAMERAS = ("brushcam",)
WAYPOINT_NAMES = ("x", "y", "z", "qx", "qy", "qz", "qw", "duration_s")


class PaintUpstream(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    package: Literal["paint"] = "paint"
    version: str = SCENE_VERSION  # our scene's version (sim/paint/scene.py)
    robosuite: str  # the package whose Panda MJCF the scene loads
    mujoco: str  # major.minor series
    env: Literal["RoboPaint"] = "RoboPaint"
    robot: Literal["Panda"] = "Panda"
    registry_horizon: int = 96


class PaintGoal(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: Literal["image", "text"]
    text: str = ""  # the written goal (kind = text), or a caption shown with the image
    image: str = ""  # kind = image: a recipe of sim/paint/goals.py, drawn at 1280x800
    image_sha256: str = ""  # the goal PNG's SHA-256; checked when the backend loads


class PaintSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    action_limit: int = 96  # environment actions per round (one MoveFlange = one action)
    rounds: int = 3  # ICL rounds per session (a retained series of this many trials)
    goal: PaintGoal


class PaintManifest(TaskManifest, frozen=True, kw_only=True, forbid_unknown_fields=True):
    upstream: PaintUpstream
    paint: PaintSettings

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.control_hz != ps.CONTROL_HZ:
            raise ManifestError(f"task {self.id!r}: control_hz = {self.control_hz}; the paint controller runs at {ps.CONTROL_HZ} Hz")
        if set(self.observation.proprio) - set(STATE_KEYS) or self.observation.privileged or self.privileged:
            raise ManifestError(f"task {self.id!r}: the paint observation is the flange pose only: proprio within {list(STATE_KEYS)}, "
                                "nothing privileged")
        leaked = [c.name for c in self.observation.cameras if c.name in VIDEO_ONLY_CAMERAS]
        if leaked:
            raise ManifestError(f"task {self.id!r}: {leaked} is a video-only camera; remove it from observation.cameras")
        g = self.paint.goal
        if (g.kind == "image") != bool(g.image) or (g.kind == "text" and not g.text):
            raise ManifestError(f"task {self.id!r}: goal kind {g.kind!r} needs {'image (a recipe)' if g.kind == 'image' else 'text'}")


def paint_manifest(manifest: TaskManifest | dict) -> PaintManifest:
    if isinstance(manifest, PaintManifest):
        return manifest
    data = manifest.to_builtins() if isinstance(manifest, TaskManifest) else manifest
    try:
        return msgspec.convert(data, PaintManifest)
    except msgspec.ValidationError as e:
        raise ManifestError(f"not a paint manifest: {e}") from None


class RoundOver(SimError):
    """An action after the round ended (submitted or action limit); the round takes none."""

    code = "round_over"


class SavedCanvas(msgspec.Struct, frozen=True, kw_only=True):
    sha256: str  # paint_scene.canvas_sha256: shape header + raw RGB bytes
    shape: tuple[int, int, int]
    png: bytes
    # submitted: submit_painting (in code mode the participant's `finish`); action_limit: the 96th action;
    # trial_end: the trial ended otherwise (a budget): the canvas is kept, but nothing was submitted.
    ended_by: Literal["submitted", "action_limit", "trial_end"]
    actions_used: int
    control_step: int


class MoveFlangeResult(msgspec.Struct, frozen=True, kw_only=True):
    action_index: int  # 0-based within the round
    accepted: bool
    rule: str | None = None  # the violated rule when rejected
    waypoint_index: int | None = None
    detail: str = ""
    report: pc.MoveReport | None = None
    actions_left: int
    saved: SavedCanvas | None = None  # the round ended at the action limit


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as plain numbers/lists, so the action log is JSON; anything else is refused."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"a waypoint value of type {type(value).__name__} is not a number or list")


class PaintBackend(TrialBookkeeping):
    """One paint scene; see the module docs. One thread owns it (GL context)."""

    def __init__(self, manifest: TaskManifest | dict, *, trial_steps: int | None = None, require_fixed_hash_seed: bool = False):
        import mujoco

        self.manifest = paint_manifest(manifest)
        self._mujoco = mujoco
        if self.manifest.paint.goal.kind == "image":
            from .goals import goal_image

            self.goal_image = goal_image(self.manifest.paint.goal.image)
            want = self.manifest.paint.goal.image_sha256
            if want and want != self.goal_image.sha256:
                raise SimError(f"task {self.manifest.id!r}: goal image {self.manifest.paint.goal.image!r} hashes "
                               f"{self.goal_image.sha256}, the manifest records {want}; the goal drawing changed")
        else:
            self.goal_image = None
        self.rig = pc.PaintRig()
        self.model, self.data = self.rig.model, self.rig.data
        self.control_dt = 1.0 / ps.CONTROL_HZ
        self._start_trial_bookkeeping(self.manifest, trial_steps)
        # A waypoint spans many control steps, so the per-step commanded vector is the arm's joint
        # target the interpolation produced for that step (7 values), not the 8-number waypoint.
        self.rig.on_control_step = lambda rig: self._states.append(rig.control_step, self.sim_time, snapshot(rig.data),
                                                                   rig.arm.q_des)
        self._renderer = None
        self.action_log: list[dict[str, Any]] = []
        self.results: list[MoveFlangeResult] = []
        self.saved: SavedCanvas | None = None

    # ---- round ---------------------------------------------------------------------------

    def reset(self, seed: int) -> Fingerprint:
        """Fresh paper and brush, the seed's layout, the arm at home; a new round with no actions."""
        self.rig.reset(ps.Layout.from_seed(seed))
        self._tracker.reset()
        self._states = StateLog()
        self.action_log, self.results, self.saved = [], [], None
        self._loaded = True
        compiled = np.zeros(self._mujoco.mj_sizeModel(self.model), dtype=np.uint8)
        self._mujoco.mj_saveModel(self.model, None, compiled)
        versions = {"paint_scene": SCENE_VERSION, "mujoco": self._mujoco.__version__, "numpy": np.__version__,
                    "robosuite_panda_xml": self.rig.compiled.xml_sha256[:16]}
        initial = hashlib.sha256(fingerprint_bytes(snapshot(self.data))).hexdigest()
        compiled_sha = hashlib.sha256(compiled.tobytes()).hexdigest()
        body = f"{self.rig.compiled.xml_sha256}|{compiled_sha}|{initial}|{seed}|{sorted(versions.items())}"
        self.fingerprint = Fingerprint(digest=hashlib.sha256(body.encode()).hexdigest(), seed=seed,
                                       model_xml_sha256=self.rig.compiled.xml_sha256, initial_state_sha256=initial,
                                       versions=versions, compiled_model_sha256=compiled_sha)
        return self.fingerprint

    @property
    def actions_used(self) -> int:
        """Environment actions so far: every move_flange (accepted or not) and the submission; holds are not actions."""
        return sum(a["kind"] != "hold" for a in self.action_log)

    @property
    def actions_left(self) -> int:
        return max(0, self.manifest.paint.action_limit - self.actions_used)

    def _require_open(self) -> None:
        self._require_loaded()
        if self.saved is not None:
            raise RoundOver(f"the round ended ({self.saved.ended_by}) after {self.saved.actions_used} actions; reset for the next round")

    def move_flange(self, waypoints: Sequence[pc.Waypoint] | Sequence[dict]) -> MoveFlangeResult:
        """One MoveFlange action: validate the whole batch, execute it, and end the round at the action limit.

        Raises RoundOver after the round ended. A rule violation is returned (accepted = False), not raised.
        """
        self._require_open()
        index = self.actions_used
        raw = [msgspec.to_builtins(w, enc_hook=_plain) for w in waypoints]
        self.action_log.append({"kind": "move_flange", "waypoints": raw})
        t0 = time.perf_counter()
        try:
            plan = pc.validate_batch(pc.parse_batch(raw), self.rig.target_pos, self.rig.target_quat)
        except pc.BatchRejected as e:
            self._rejected += 1
            result = MoveFlangeResult(action_index=index, accepted=False, rule=e.rule, waypoint_index=e.index, detail=str(e),
                                      actions_left=self.actions_left)
        else:
            report = self.rig.move(plan, max_steps=self.steps_left)
            self._total_steps += report.control_steps
            result = MoveFlangeResult(action_index=index, accepted=True, report=report, actions_left=self.actions_left)
        self._physics_s += time.perf_counter() - t0
        if self.actions_left == 0:
            result = msgspec.structs.replace(result, saved=self._save("action_limit"))
        self.results.append(result)
        return result

    def submit_painting(self) -> SavedCanvas:
        """End the round and save the canvas; raises RoundOver if it already ended."""
        self._require_open()
        self.action_log.append({"kind": "submit_painting"})
        return self._save("submitted")

    def _save(self, ended_by: Literal["submitted", "action_limit", "trial_end"]) -> SavedCanvas:
        rgb = self.rig.canvas.rgb()
        self.saved = SavedCanvas(sha256=ps.canvas_sha256(rgb), shape=rgb.shape, png=ps.png_bytes(rgb), ended_by=ended_by,
                                 actions_used=self.actions_used, control_step=self.rig.control_step)
        if ended_by != "trial_end":
            self._tracker.update(self.rig.control_step, True)  # task reward: a canvas was submitted and saved (integrity, not quality)
        return self.saved

    def task_record(self, end: str | None) -> tuple[dict[str, Any], dict[str, bytes]]:
        """The round's evidence: the ordered action log with results, contact and protective-stop events, the canvas.

        ``end`` is the trial's end reason: ``finish`` submits the painting (code mode has no submit
        call: finishing the trial is the submission), any other end keeps the canvas unsubmitted.
        None only reads. Files: ``canvas.png`` once the canvas is saved.
        """
        self._require_loaded()
        if end is not None and self.saved is None:
            if end == "finish":
                self.submit_painting()
            else:
                self._save("trial_end")
        stats = self.statistics()
        data = {"family": "paint", "scene": SCENE_VERSION, "seed": self.fingerprint.seed if self.fingerprint else None,
                "goal": msgspec.to_builtins(self.manifest.paint.goal), "action_limit": self.manifest.paint.action_limit,
                "actions_used": self.actions_used, "end": end, "told": self.told(), **round_evidence(self.action_log, self.results),
                "canvas": None if self.saved is None else {
                    "sha256": self.saved.sha256, "shape": list(self.saved.shape), "ended_by": self.saved.ended_by,
                    "actions_used": self.saved.actions_used, "control_step": self.saved.control_step},
                "resources": {"control_steps": self.control_step, "sim_time": self.sim_time,
                              "physics_seconds": round(stats.physics_seconds, 6), "render_seconds": round(stats.render_seconds, 6),
                              "frames_rendered": stats.frames_rendered, "observes": stats.observes}}
        return data, ({"canvas.png": self.saved.png} if self.saved is not None else {})

    def told(self) -> str:
        """What a direct-action participant is told of its last MoveFlange (no paper, pigment or brush figures)."""
        if not self.results or self.action_log[-1]["kind"] != "move_flange":
            return ""
        r, n = self.results[-1], len(self.action_log[-1]["waypoints"])
        head = f"MoveFlange action {r.action_index + 1} of {self.manifest.paint.action_limit}: "
        if not r.accepted:
            text = head + f"{r.detail} It counts as an action."
        else:
            rep = r.report
            text = head + f"{rep.waypoints_completed} of {n} waypoints in {rep.control_steps} control steps ({rep.sim_time:.2f} s)."
            if rep.protective_stop is not None:
                text += (f" Protective stop at waypoint {rep.protective_stop.waypoint_index}: contact force "
                         f"{rep.protective_stop.force_n:.1f} N exceeded {pc.PROTECTIVE_STOP_N:g} N; the rest of the batch did not run.")
        text += f" {r.actions_left} actions left."
        if r.saved is not None:
            text += " The action limit is reached: the canvas is saved and the round ends."
        return text

    def canvas(self) -> np.ndarray:
        return self.rig.canvas.rgb()

    def goal_images(self) -> dict[str, bytes]:
        """An image goal's PNG (1280x800, the bytes whose SHA-256 the manifest records), shown as each round opens."""
        return {"goal": self.goal_image.png} if self.goal_image is not None else {}

    # ---- the generic backend interface ---------------------------------------------------

    def action_spec(self) -> ActionSpec:
        w = pc.WORKSPACE
        low = [w["x"][0], w["y"][0], w["z"][0], -1.0, -1.0, -1.0, -1.0, pc.MIN_DURATION_S]
        high = [w["x"][1], w["y"][1], w["z"][1], 1.0, 1.0, 1.0, 1.0, pc.MAX_BATCH_S]
        units = ["m, robot base, x right", "m, robot base, y forward", "m, robot base, z up", "quaternion x", "quaternion y",
                 "quaternion z", "quaternion w", "s"]
        pos, quat = self.rig.target_pos, pc.quat_wxyz_to_xyzw(self.rig.target_quat)
        return ActionSpec(
            dim=8, low=low, high=high, hold=[*map(float, pos), *map(float, quat), pc.MIN_DURATION_S],
            hold_rule="the arm holds its last target pose",
            # One Step = one MoveFlange over round(sum(duration_s) * 100) control steps, never cut (RoboPaint).
            chunk_is_one_action=True, duration_component=WAYPOINT_NAMES.index("duration_s"),
            components=[ActionComponent(index=i, name=n, low=lo, high=hi, unit=u)
                        for i, (n, lo, hi, u) in enumerate(zip(WAYPOINT_NAMES, low, high, units))],
            doc=(f"One MoveFlange = 1..{pc.MAX_WAYPOINTS} waypoints [x, y, z, qx, qy, qz, qw, duration_s]: flange position "
                 f"(robot-base metres, x right, y forward, z up), unit quaternion xyzw (norm within {pc.QUAT_NORM_TOL}), "
                 f"duration_s >= {pc.MIN_DURATION_S}, batch total <= {pc.MAX_BATCH_S} s; linear speed <= {pc.MAX_LINEAR_SPEED} m/s, "
                 f"angular <= {pc.MAX_ANGULAR_SPEED} rad/s per segment; tool axis within 75 deg of straight down; "
                 f"workspace {pc.WORKSPACE}. Invalid batches are rejected whole, never clipped. "
                 f"{self.manifest.paint.action_limit} actions per round; submit_painting ends the round."))

    def validate(self, action: Sequence[float]) -> np.ndarray:
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (8,):
            raise InvalidAction(f"a waypoint is 8 numbers {list(WAYPOINT_NAMES)}, got shape {list(a.shape)}")
        return a

    def step(self, actions: Sequence[Sequence[float]]) -> StepOutcome:
        """One MoveFlange whose waypoints are the chunk's 8-vectors; a rejected batch raises InvalidAction naming the rule."""
        rows = []
        for k, action in enumerate(actions):
            try:
                rows.append(self.validate(action))
            except InvalidAction as e:
                e.chunk_index = k
                raise
        before = self.control_step
        r = self.move_flange([pc.Waypoint(position=tuple(a[:3]), quaternion=tuple(a[3:7]), duration_s=float(a[7])) for a in rows])
        if not r.accepted:
            err = InvalidAction(r.detail, index=None, component=r.rule)
            err.chunk_index = r.waypoint_index
            raise err
        return StepOutcome(applied=self.control_step - before, control_step=self.control_step, sim_time=self.sim_time,
                           steps_left=self.steps_left, stopped="trial_budget" if self.steps_left == 0 else "done")

    def wait(self, steps: int) -> StepOutcome:
        self._require_loaded()
        if steps < 0:
            raise InvalidAction(f"wait steps must be >= 0, got {steps}")
        n = min(steps, self.steps_left)
        if self.saved is None:
            self.action_log.append({"kind": "hold", "steps": n})  # a resting brush can still deposit: replay holds too
        t0 = time.perf_counter()
        self.rig.hold(n)
        self._physics_s += time.perf_counter() - t0
        self._total_steps += n
        return StepOutcome(applied=n, control_step=self.control_step, sim_time=self.sim_time, steps_left=self.steps_left,
                           stopped="done" if n == steps else "trial_budget")

    def observe(self, cameras: Sequence[str] = (), depth: bool = True) -> list[CameraFrame]:
        """Render the allowed cameras with the current canvas on the paper; physics does not advance."""
        self._require_loaded()
        names = list(cameras) or [c.name for c in self.manifest.observation.cameras]
        chosen = [self.manifest.camera(n) for n in names]  # KeyError names the allowed cameras (brushcam never is)
        return self._render([(c.name, c.width, c.height, depth and c.depth) for c in chosen], count_observe=True)

    def render_video_frame(self, camera: str, width: int, height: int) -> CameraFrame:
        """A human-facing frame (e.g. brushcam) for video, from the live state; never sent to the participant."""
        return self._render([(camera, width, height, False)], count_observe=False)[0]

    def _render(self, views: list[tuple[str, int, int, bool]], *, count_observe: bool) -> list[CameraFrame]:
        if self._renderer is None:
            from ..render import SceneRenderer

            sizes = [(c.width, c.height) for c in self.manifest.observation.cameras] + [(self.manifest.video.width, self.manifest.video.height)]
            self._renderer = SceneRenderer(self.model, max(w for w, _ in sizes), max(h for _, h in sizes))
            if self.fingerprint is not None:  # the next round's scene of this compiled model reuses the GL side
                self._renderer.model_digest = self.fingerprint.compiled_model_sha256
        self._renderer.ready()
        t0 = time.perf_counter()
        self.rig.upload_canvas()
        self._renderer.upload_texture(self.rig.canvas_tex)  # the canvas changed since the GL side last saw it
        self._renderer.load_state(snapshot(self.data))
        frames = [self._renderer.render(name, w, h, depth=d, calibration=False) for name, w, h, d in views]
        self._frames += len(frames)
        self._observes += count_observe
        self._render_s += time.perf_counter() - t0
        return frames

    def state(self) -> dict[str, np.ndarray]:
        self._require_loaded()
        pos, quat = self.rig.flange()
        values = {"flange_pos": pos, "flange_quat_xyzw": quat}
        return {k: values[k] for k in self.manifest.allowed_state_keys}

    @property
    def control_step(self) -> int:
        return self.rig.control_step  # the rig counts the control steps its interpolation takes

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def round_evidence(action_log: Sequence[dict[str, Any]], results: Sequence[MoveFlangeResult]) -> dict[str, Any]:
    """The ordered actions with their results, and the contact and protective-stop events among them."""
    moves = iter(results)
    actions, contacts, stops = [], [], []
    for k, entry in enumerate(action_log):
        item = {"index": k, **entry}
        # How a replay re-executes it through the generic interface (verify.py knows no family):
        # a MoveFlange is one Step of its waypoint vectors, a hold one Wait; the submission is the trial's end.
        if entry["kind"] == "move_flange":
            item["replay"] = {"step": [[*w["position"], *w["quaternion"], w["duration_s"]] for w in entry["waypoints"]]}
        elif entry["kind"] == "hold":
            item["replay"] = {"wait": entry["steps"]}
        if entry["kind"] == "move_flange":
            r = next(moves, None)
            if r is not None:
                item["result"] = msgspec.to_builtins(msgspec.structs.replace(r, saved=None))
                item["result"].pop("saved", None)
                report = r.report
                if report is not None and (report.paper_contact_steps or report.pigment_contact_steps):
                    contacts.append({"action": k, "paper_ticks": report.paper_contact_steps,
                                     "pigment_ticks": report.pigment_contact_steps,
                                     "max_force_n": round(report.max_contact_force_n, 3)})
                if report is not None and report.protective_stop is not None:
                    stops.append({"action": k, **msgspec.to_builtins(report.protective_stop)})
        actions.append(item)
    return {"actions": actions, "contact_events": contacts, "protective_stops": stops}


def replay_round(manifest: TaskManifest | dict, seed: int, action_log: Sequence[dict[str, Any]],
                 backend: PaintBackend | None = None) -> PaintBackend:
    """Re-execute a round's action log on a reset scene (fresh unless ``backend`` is given); returns the backend."""
    sim = backend or PaintBackend(manifest)
    sim.reset(seed)
    for k, action in enumerate(action_log):
        match action.get("kind"):
            case "move_flange":
                sim.move_flange(action["waypoints"])
            case "submit_painting":
                sim.submit_painting()
            case "hold":
                sim.wait(int(action["steps"]))
            case other:
                raise SimError(f"action log entry {k}: unknown kind {other!r}; expected move_flange, hold or submit_painting")
    return sim
