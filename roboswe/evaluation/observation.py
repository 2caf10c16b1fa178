"""What the participant sees of the scene: camera images, the robot's state and the task's goal images.

``SceneView`` owns the observe operation's result, the opening's goal and observation (fetched
early, while the sandbox may still be starting), the family's own account of a direct action and
the PNG encoding of camera frames. It asks the
simulator only through its facade (``roboswe.evaluation.peers``) and records the goal images it
states; a failure to read what the opening must show is an outside cause (``TrialIncomplete``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import structlog

from roboswe.actors import RemoteError
from roboswe.evaluation.ends import TrialIncomplete
from roboswe.evaluation.feedback import Observed, OpResult, Refused
from roboswe.protocol import recorder as rec
from roboswe.protocol import sim as simp
from roboswe.protocol.participant import ImagePart, image_part
from roboswe.sim import png

log = structlog.get_logger()

Images = list[tuple[ImagePart, bytes]]
Observation = tuple[simp.Observation, Images, list[str], dict[str, str]]
"""The simulator's observation, its camera images as parts, ``key: [values]`` state lines, depth notes by camera."""


class SceneView:
    """The scene as the participant is shown it, for one trial.

    ``compute_since``: the simulator's physics + rendering seconds since the last reading (the
    trial's own accounting), so an observation's transport time excludes the rendering it asked for.
    """

    def __init__(self, links: Any, trial_id: str, timing: rec.TrialTiming, compute_since: Callable[[], Awaitable[float]]):
        self.sim = links.sim
        self.rec = links.recorder
        self.trial_id = trial_id
        self.timing = timing
        self._compute_since = compute_since
        self._opening: tuple[Any, Observation] | None = None  # the opening's goal and observation, fetched early

    async def prefetch_opening(self) -> None:
        """Fetch what the opening shows (goal, camera images, sensors) right after the Load, while the sandbox
        may still be starting: on docker its start (~0.35 s) then overlaps the opening's rendering instead of
        preceding it. Nothing is recorded or sent here; on any failure ``opening`` fetches again as usual (and
        reports that failure the usual way)."""
        try:
            self._opening = (await self.sim.goal(), await self.observation([], depth=False))
        except Exception as e:  # noqa: BLE001 - an optimisation only: the opening asks again
            log.info("opening_prefetch_failed", trial=self.trial_id, error=f"{type(e).__name__}: {e}")

    async def opening(self) -> tuple[Images, Observation]:
        """The opening's goal images (recorded) and observation, prefetched or fetched now; raises TrialIncomplete."""
        prefetched, self._opening = self._opening, None
        goal = await self.goal(prefetched[0] if prefetched else None)
        try:
            seen = prefetched[1] if prefetched else await self.observation([], depth=False)
        except RemoteError as e:
            raise TrialIncomplete("infrastructure", f"the opening observation failed: {e.error.code}: {e.error.detail}") from None
        return goal, seen

    async def goal(self, stated: Any = None) -> Images:
        """The goal images the simulator states for the loaded task (its family owns its goals), checked
        against the SHA-256 and size it states and recorded (event ``goal``); none for most families.
        ``stated``: the simulator's answer, fetched already (``prefetch_opening``)."""
        try:
            if stated is None:
                stated = await self.sim.goal()
        except RemoteError as e:
            raise TrialIncomplete("infrastructure", f"the task's goal could not be read: {e.error.code}: {e.error.detail}") from None
        goal = []
        for image, data in stated:
            part = image_part(data, image.name, image.media_type)
            if (part.digest, part.width, part.height) != (image.sha256, image.width, image.height):
                raise TrialIncomplete("infrastructure", f"goal image {image.name!r} arrived as {part.digest[:16]} "
                                      f"{part.width}x{part.height}; the simulator stated {image.sha256[:16]} {image.width}x{image.height}")
            goal.append((part, data))
        if goal:
            await self.rec.event("goal", self.trial_id, images=[
                {"name": p.camera, "sha256": p.digest, "width": p.width, "height": p.height, "media_type": p.media_type}
                for p, _ in goal])
        return goal

    async def observation(self, cameras: list[str], depth: bool) -> Observation:
        """Camera images (PNG) and the robot state now: image parts, ``key: [values]`` lines, depth notes by camera."""
        t0 = time.monotonic()
        obs, blobs = await self.sim.observe(cameras, depth)
        rtt = time.monotonic() - t0
        self.timing.transport += max(0.0, rtt - await self._compute_since())
        images, depth_notes = [], {}
        for im in obs.images:
            rgb = np.frombuffer(blobs[im.rgb_blob], np.uint8).reshape(im.height, im.width, 3)
            encoded = encode_png(rgb)
            images.append((image_part(encoded, im.camera), encoded))
            if im.depth_blob is not None:
                d = np.frombuffer(blobs[im.depth_blob], "<f4")
                depth_notes[im.camera] = (f"; depth min {d.min():.3f} m, median {float(np.median(d)):.3f} m, "
                                          f"max {d.max():.3f} m (full depth via robot.observe)")
        state = [f"{key}: [{', '.join(f'{v:.4f}' for v in values)}]" for key, values in obs.state.values.items()]
        return obs, images, state, depth_notes

    async def observe(self, cameras: list[str] | None, depth: bool) -> OpResult:
        """The observe operation's result: the images attached, the control step, the robot's state."""
        try:
            obs, images, readings, depth_notes = await self.observation(cameras or [], depth)
        except RemoteError as e:
            return OpResult(text=f"observe refused: {e.error.detail}", error=True, feedback=Refused(error=e.error.detail))
        lines = [f"control step {obs.control_step}, simulated time {obs.sim_time:.2f} s"]
        lines += [f"camera {im.camera}: {im.width}x{im.height} RGB image attached{depth_notes.get(im.camera, '')}"
                  for im in obs.images]
        lines.append("robot state:")
        lines += [f"  {line}" for line in readings]
        return OpResult(text="\n".join(lines), images=images,
                        feedback=Observed(cameras=[im.camera for im in obs.images], images=[p.digest for p, _ in images],
                                          render_seconds=obs.render_seconds, control_step=obs.control_step,
                                          renderer=obs.renderer))

    async def account(self) -> str:
        """The family's own words on the action just taken (its task record's ``told``, read only), if it keeps one.

        The family decides what the participant may learn (RoboPaint: the rejection's rule and
        waypoint, waypoints completed, a protective stop, actions left; no paper or pigment figures).
        """
        try:
            data, _ = await self.sim.task_record(None)
        except RemoteError as e:
            log.warning("scene_account_unavailable", trial=self.trial_id, code=e.error.code, detail=e.error.detail)
            return ""
        told = data.get("told") if isinstance(data, dict) else None
        return told if isinstance(told, str) else ""


def encode_png(rgb: np.ndarray) -> bytes:
    """A camera image for the participant. Sub-filtered rows at zlib level 1: 2.5-3 ms per 256x256 frame
    against 11-12 ms for Pillow's level 3, ~8% larger; on the trial's critical path twice per observe."""
    return png.encode_rgb(rgb, level=1, row_filter=png.SUB)
