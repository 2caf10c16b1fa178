"""Trial videos rendered from recorded per-step physics states, in a worker process off the control path.

The simulator only logs per-step states while a trial runs (DESIGN.md section 6); the
coordinator records them as ``ControlTrace`` rows. After (or while) a trial runs, a
``VideoWorker`` process reads those states, redraws the manifest's video cameras at the
manifest's frame rate with ``sim.video.VideoRenderer`` and encodes one mp4 per camera with
``artifacts.VideoWriter`` (frames tagged with control steps, sidecar index, sha256 readback).
It returns the ``ArtifactRecord`` rows; the caller sends them to the recorder, which stays
the only writer of the run database. Video on or off, the control loop does the same work.

Coordinator use::

    worker = VideoWorker()                       # one spawned process, started lazily
    future = worker.submit(run_dir, trial_id, manifest.to_builtins(), run_id=run_id)
    ...                                          # next trial runs meanwhile
    records = future.result()                    # list[ArtifactRecord]
    await recorder.request(Durable(records=records))
    worker.close()
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any, Self

import structlog

from roboswe.protocol.recorder import ArtifactRecord
from roboswe.records.artifacts import (
    FAILED_ARTIFACT_EVENTS,
    StoredVideo,
    VideoWriter,
    artifact_record,
    failed_artifact_line,
    video_relpath,
)
from roboswe.records.reader import RunReader
from roboswe.sim.physics_state import states_from_traces

log = structlog.get_logger()

VIDEO_FAILED = next(e for e, kind in FAILED_ARTIFACT_EVENTS.items() if kind == "video")
RENDER_BATCH = 64  # rows rendered per VideoRenderer call: bounds memory on long trials


class VideoError(Exception):
    """A trial video could not be rendered; the message says which trial and why."""


def video_path(run_dir: str | Path, trial_id: str, camera: str) -> Path:
    """RUN_DIR/videos/<trial>/<camera>.mp4 (records.artifacts.video_relpath)."""
    return Path(run_dir) / video_relpath(trial_id, camera)


def render_trial_video(run_dir: str | Path, trial_id: str, manifest: Any, states: Any = None, *, run_id: str,
                       backend: str | None = None, seed: int | None = None,
                       model_xml_sha256: str | None = None, renderer: Any = None) -> list[ArtifactRecord]:
    """Render and store one mp4 (+ index) per manifest video camera; returns their artifact records.

    ``manifest`` is a TaskManifest or its ``to_builtins()`` dict; ``states`` a PhysicsStates,
    or None to read the trial's control traces from RUN_DIR/run.sqlite; ``renderer`` a
    sim.video.VideoRenderer for this manifest to reuse (else one is built and closed). Raises VideoError,
    roboswe.sim.physics_state.TraceError (no usable traces), roboswe.sim.backend.SimError (model
    differs from the recording) or ArtifactError (readback).
    """
    from roboswe.sim.manifest import TaskManifest, manifest_from_builtins
    from roboswe.sim.video import VideoRenderer, frame_rows

    run_dir = Path(run_dir)
    if not isinstance(manifest, TaskManifest):
        manifest = manifest_from_builtins(manifest)
    if states is None:
        with RunReader(run_dir) as reader:
            states = states_from_traces(reader.control_traces(trial_id))
    if len(states) == 0:
        raise VideoError(f"trial {trial_id!r}: the state log is empty; nothing to render")
    video = manifest.video
    rows = frame_rows(states, manifest.control_hz, video.fps)
    if not rows:
        rows = [0]  # a trial shorter than one frame period still gets its opening frame
    t0 = time.perf_counter()
    own_renderer = renderer is None
    if own_renderer:
        renderer = _cached_renderer(manifest, backend) if _IN_WORKER else VideoRenderer(manifest, backend=backend)
        own_renderer = not _IN_WORKER
    writers = {cam: VideoWriter(video_path(run_dir, trial_id, cam), width=video.width, height=video.height,
                                control_timestep=1.0 / manifest.control_hz, camera=cam)
               for cam in video.cameras}
    try:
        steps = states.step.tolist()
        if getattr(renderer, "replays_record", False):
            _replay_frames(run_dir, trial_id, renderer, [int(steps[r]) for r in rows], writers)
        else:
            for i in range(0, len(rows), RENDER_BATCH):
                batch = rows[i:i + RENDER_BATCH]
                frames = renderer.render(states, seed=seed, model_xml_sha256=model_xml_sha256, rows=batch)
                for cam, writer in writers.items():
                    for row, rgb in zip(batch, frames[cam]):
                        writer.add_frame(int(steps[row]), rgb)
        stored: dict[str, StoredVideo] = {cam: w.close() for cam, w in writers.items()}
    finally:
        if own_renderer:
            renderer.close()
    records = []
    for cam, sv in stored.items():
        base = f"{trial_id}/{cam}"
        records += [
            artifact_record(run_dir, sv.video, artifact_id=f"{base}/video", run_id=run_id, trial_id=trial_id,
                            artifact="video", camera=cam,
                            meta={"frames": sv.frames, "codec": sv.video_index.codec, "fps": video.fps,
                                  "control_timestep": sv.video_index.control_timestep, "source": "state_log",
                                  "render_device": getattr(renderer, "device", "")}),
            artifact_record(run_dir, sv.index, artifact_id=f"{base}/index", run_id=run_id, trial_id=trial_id,
                            artifact="video_index", camera=cam),
        ]
    log.info("trial_video_rendered", trial=trial_id, cameras=list(stored), frames=len(rows),
             seconds=round(time.perf_counter() - t0, 3))
    return records


def _replay_frames(run_dir: Path, trial_id: str, renderer: Any, steps: list[int], writers: dict[str, VideoWriter]) -> None:
    """A family whose look is not all in the physics state (RoboPaint's canvas) redraws by re-executing its task record."""
    from roboswe.evaluation.task_record import recorded

    with RunReader(run_dir) as reader:
        record = recorded(reader, trial_id)
    if record is None:
        raise VideoError(f"trial {trial_id!r}: no task record to replay; this family's video needs one")
    drawn = 0
    for step, frames in renderer.replay(record, steps):
        for cam, writer in writers.items():
            writer.add_frame(step, frames[cam])
        drawn += 1
    if drawn != len(steps):
        raise VideoError(f"trial {trial_id!r}: the replay reached {drawn} of the {len(steps)} recorded frame steps")


_IN_WORKER = False
_RENDERERS: dict[tuple[str, str], Any] = {}


def _cached_renderer(manifest: Any, backend: str | None) -> Any:
    """In the worker process, one scene per manifest: building a robosuite scene costs seconds."""
    from roboswe.sim.video import VideoRenderer

    key = (manifest.digest(), backend)
    if key not in _RENDERERS:
        _RENDERERS[key] = VideoRenderer(manifest, backend=backend)
    return _RENDERERS[key]


def _worker_init(nice: int, render_threads: int) -> None:
    global _IN_WORKER
    _IN_WORKER = True
    os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering; set before mujoco loads
    # On a CPU-only host Mesa's llvmpipe renders with a thread per core and would take the cores
    # the control loop runs on; one thread at the lowest priority leaves the loop its CPU.
    os.environ.setdefault("LP_NUM_THREADS", str(render_threads))
    if nice:
        os.nice(nice)


class VideoWorker:
    """A separate process that renders trial videos one at a time, so no control loop waits for it."""

    def __init__(self, max_workers: int = 1, *, nice: int = 19, render_threads: int = 1):
        self._max_workers = max_workers
        self._init_args = (nice, render_threads)
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def submit(self, run_dir: str | Path, trial_id: str, manifest: Any, states: Any = None, *, run_id: str,
               **kwargs: Any) -> concurrent.futures.Future:
        """Queue one trial's videos; the future's result is its list of ArtifactRecord."""
        if self._pool is None:
            # spawn: a fresh interpreter, so no GL context or trio state is inherited from the caller
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self._max_workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                initargs=self._init_args)
        if not isinstance(manifest, dict):
            manifest = manifest.to_builtins()
        return self._pool.submit(render_trial_video, str(run_dir), trial_id, manifest, states, run_id=run_id, **kwargs)

    def close(self, wait: bool = True) -> None:
        """Finish queued renders (or cancel them when ``wait`` is False) and stop the process."""
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=not wait)
            self._pool = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(wait=exc[0] is None)


class SeriesVideos:
    """The coordinator's use of a VideoWorker: queue a finished series' trials, record their artifacts later.

    ``submit_series`` is called as each of a series' trials ends (its control traces committed) and
    once more after the series; rendering then overlaps the next trial, the replays and whatever runs next. ``record`` waits for the worker
    off the trio loop and sends the ArtifactRecords to the recorder with a durable receipt.
    A trial whose video cannot be made is logged and recorded as an event, never fatal.
    """

    def __init__(self, run_dir: str | Path, run_id: str, worker: VideoWorker | None = None):
        self.run_dir = Path(run_dir)
        self.run_id = run_id
        self.worker = worker or VideoWorker()
        self._pending: list[tuple[str, concurrent.futures.Future]] = []

    def submit_series(self, series_id: str, manifest: Any) -> int:
        """Queue every ended trial of the series that has control traces and no video yet; returns how many."""
        with RunReader(self.run_dir) as reader:
            done = {a.trial_id for a in reader.artifacts(run_id=self.run_id) if a.artifact == "video"}
            queued = {t for t, _ in self._pending}
            trial_ids = [v.trial_id for v in reader.trials(series_id)
                         if v.end is not None and v.trial_id not in done | queued and reader.control_traces(v.trial_id)]
        for trial_id in trial_ids:
            self._pending.append((trial_id, self.worker.submit(self.run_dir, trial_id, manifest, run_id=self.run_id)))
            log.info("trial_video_queued", trial=trial_id)
        return len(trial_ids)

    async def record(self, recording: Any, say: Any = None) -> int:
        """Wait for queued videos and record them durably via ``recording`` (series.Recording); returns videos stored.

        ``say(line)`` (the run's progress) hears of each trial's videos as they are stored or fail, so
        the run's output is not silent while they render."""
        from roboswe.actors import run_off_loop
        from roboswe.protocol.recorder import EventRecord

        stored = 0
        pending, self._pending = self._pending, []
        for trial_id, future in pending:
            try:
                records = await run_off_loop(future.result)
            except Exception as e:  # noqa: BLE001 - a missing video is evidence lost, not a failed run
                reason = f"{type(e).__name__}: {e}"
                log.error("trial_video_failed", trial=trial_id, error=reason)
                await recording.put(EventRecord(run_id=self.run_id, event=VIDEO_FAILED, at=time.time(),
                                                trial_id=trial_id, data={"error": reason}))
                if say is not None:
                    say(failed_artifact_line({"trial_id": trial_id, "artifact": "video", "reason": reason}))
                continue
            await recording.durable(*records)
            stored += sum(r.artifact == "video" for r in records)
            if say is not None:
                say(f"{trial_id}: videos stored ({', '.join(r.camera or '' for r in records if r.artifact == 'video')})")
        return stored

    def close(self) -> None:
        self.worker.close(wait=False)
