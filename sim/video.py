"""Video frames re-rendered from recorded per-step physics states, off the control path.

The simulator only records states while it runs (sim.physics_state.StateLog); a video worker, or
replay, builds the same scene here, checks its model is the one the states came from, and
draws the manifest's video cameras at the manifest's frame rate. A family whose look is not all in
the physics state (RoboPaint's canvas) is drawn by re-executing the trial's task record instead
(``replay``; sim/paint/video.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from .backend import SimError, create_backend
from .manifest import TaskManifest
from .physics_state import PhysicsStates


def frame_rows(states: PhysicsStates, control_hz: int, fps: int) -> list[int]:
    """Rows whose control step falls on the video clock (every control_hz/fps steps, step 0 included)."""
    every = control_hz // fps
    return [i for i, s in enumerate(states.step.tolist()) if s % every == 0]


class VideoRenderer:
    """Builds the task scene once and renders video frames from recorded states."""

    def __init__(self, manifest: TaskManifest, *, backend: str | None = None):
        """``backend``: a registered simulator backend; None: the manifest's family (``upstream.package``)."""
        self.manifest = manifest
        self._sim = create_backend(backend or manifest.upstream.package, manifest)

    @property
    def replays_record(self) -> bool:
        """Whether the scene's look needs more than the physics state (RoboPaint's canvas): render with ``replay``."""
        return self.manifest.upstream.package == "paint"

    def replay(self, record: dict, steps: Sequence[int]) -> Iterator[tuple[int, dict[str, list[np.ndarray]]]]:
        """(control step, {camera: RGB}) at ``steps``, re-executing the trial's task record (sim.paint.video)."""
        from .paint.video import round_frames

        video = self.manifest.video
        return round_frames(self._sim, record, steps, list(video.cameras), video.width, video.height)

    def render(self, states: PhysicsStates, *, seed: int | None = None, model_xml_sha256: str | None = None,
               cameras: Sequence[str] = (), rows: Sequence[int] | None = None) -> dict[str, list[np.ndarray]]:
        """RGB frames (uint8 HxWx3) per video camera; raises SimError if the model differs from the recording's."""
        sim = self._sim
        if self.replays_record:
            raise SimError(f"task {self.manifest.id!r}: its video is drawn by replaying the task record, not from states")
        # reset applies the scene's model-level visual settings (robosuite hides its helper sites there)
        sim.reset(self.manifest.seed if seed is None else seed)
        if model_xml_sha256 is not None and model_xml_sha256 != sim._xml_sha256:
            raise SimError(
                f"recorded states come from model {model_xml_sha256[:16]} but this scene compiles to "
                f"{sim._xml_sha256[:16]}; render with the same task manifest and package versions"
            )
        if states.qpos.shape[1:] != (sim.model.nq,):
            raise SimError(f"recorded qpos has {states.qpos.shape[1:]} columns, the model has nq = {sim.model.nq}")
        video = self.manifest.video
        names = list(cameras) or list(video.cameras)
        picked = frame_rows(states, self.manifest.control_hz, video.fps) if rows is None else list(rows)
        frames: dict[str, list[np.ndarray]] = {n: [] for n in names}
        renderer = sim._renderer
        for i in picked:
            renderer.load_state(states.row(i))
            for n in names:
                frames[n].append(renderer.render(n, video.width, video.height, depth=False, calibration=False).rgb)
        return frames

    def scene_fingerprint(self, seed: int) -> str:
        """The digest of the scene the frames are drawn with, reset to ``seed`` (compare it with a trial's)."""
        return self._sim.reset(seed).digest

    @property
    def device(self) -> str:
        """The GL renderer the frames are drawn with (e.g. llvmpipe on the CPU, the GPU's name on a GPU)."""
        return getattr(getattr(self._sim, "_renderer", None), "device", "") or ""

    def close(self) -> None:
        self._sim.close()


def write_mp4(frames: Sequence[np.ndarray], path: str | Path, fps: int) -> Path:
    """Encode RGB frames as H.264 mp4 (yuv420p); returns the path."""
    import av

    path = Path(path)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        h, w = frames[0].shape[:2]
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        for rgb in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
