"""Artifacts under RUN_DIR: per-camera trial videos with a control-step index, and results.json.

An artifact counts as stored only after its bytes are on disk (fsync) and read back
with the sha256 that gets recorded. Videos play in simulation time: frame
timestamps are control-step offsets times the control timestep, so the model's
thinking pauses are absent and step s is at ``(s - first_step) * control_timestep``.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from fractions import Fraction
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec
import numpy as np
import structlog

from roboswe.protocol.recorder import ArtifactRecord
from roboswe.records.context_evidence import context_evidence
from roboswe.records.metrics import SCORING_RULES, timing_totals
from roboswe.records.reader import RunReader
from roboswe.records.scoring import score_run
from roboswe.records.usage import run_price, usage_summary

log = structlog.get_logger()

VIDEO_INDEX_VERSION = 1
# 2: replay-agreed scoring, denominators, usage, context policy; 3: a failure scores 0 whatever its replay did
# (slots carry the divergence); 4: slots carry the typed cause of their attempt's end
RESULTS_SCHEMA_VERSION = 4
_PREFERRED_CODECS = ("libx264", "mpeg4")  # H.264 where the av wheel has it, MPEG-4 part 2 otherwise
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """``text`` as one file-name part: each run of characters outside ``[A-Za-z0-9._-]`` becomes ``_``."""
    return _UNSAFE.sub("_", text)


def video_relpath(trial: str, camera: str) -> PurePosixPath:
    """``videos/<trial>/<camera>.mp4`` with safe names: a trial camera's video under RUN_DIR and in an exported site."""
    return PurePosixPath("videos", safe_name(trial), f"{safe_name(camera)}.mp4")


class ArtifactError(Exception):
    """An artifact could not be written or did not read back; the message says which and why."""


class StoredFile(msgspec.Struct, frozen=True, kw_only=True):
    """A file that read back with ``sha256`` after it was written."""

    path: Path
    sha256: str
    size: int


def sha256_file(path: Path) -> tuple[str, int]:
    """(sha256, size) of a file's bytes as they read back from disk."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def store_bytes(path: Path, data: bytes) -> StoredFile:
    """Write bytes atomically (temp + fsync + rename), then read them back; raises ArtifactError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    expected = hashlib.sha256(data).hexdigest()
    return check_stored(path, expected)


def check_stored(path: Path, sha256: str) -> StoredFile:
    """Read a file back and compare with its recorded sha256; raises ArtifactError on a mismatch."""
    try:
        actual, size = sha256_file(path)
    except FileNotFoundError:
        raise ArtifactError(f"{path}: artifact missing; it was recorded with sha256 {sha256}") from None
    if actual != sha256:
        raise ArtifactError(f"{path}: reads back as sha256 {actual}, recorded {sha256}; the stored copy is damaged")
    return StoredFile(path=path, sha256=sha256, size=size)


def artifact_record(run_dir: Path, stored: StoredFile, *, artifact_id: str, run_id: str, artifact: str,
                    trial_id: str | None = None, camera: str = "", meta: dict[str, Any] | None = None) -> ArtifactRecord:
    """The database record for a stored file, with its path relative to RUN_DIR."""
    return ArtifactRecord(artifact_id=artifact_id, run_id=run_id, trial_id=trial_id, artifact=artifact,
                          camera=camera, path=str(Path(stored.path).resolve().relative_to(Path(run_dir).resolve())),
                          sha256=stored.sha256, size=stored.size, meta=meta or {}, created_at=time.time())


# --- video ------------------------------------------------------------------------------------


def video_codec() -> str:
    """The best encoder the installed PyAV offers (libx264, else mpeg4)."""
    import av

    for name in _PREFERRED_CODECS:
        try:
            av.codec.Codec(name, "w")
            return name
        except Exception:  # noqa: BLE001 - unknown codec in this build
            continue
    raise ArtifactError(f"PyAV offers none of the encoders {_PREFERRED_CODECS}; reinstall the av wheel from PyPI")


class VideoIndex(msgspec.Struct, frozen=True, kw_only=True):
    """Sidecar of a trial video: control step -> frame, for seeking to an operation."""

    version: int = VIDEO_INDEX_VERSION
    camera: str
    codec: str
    width: int
    height: int
    control_timestep: float  # simulated seconds per control step
    first_step: int
    frames: list[tuple[int, int]]  # (control step, frame index), steps increasing
    video_sha256: str
    video_size: int

    def frame_at(self, step: int) -> int | None:
        """The last frame at or before a control step (None before the first frame)."""
        best = None
        for s, f in self.frames:
            if s > step:
                break
            best = f
        return best

    def seconds_at(self, step: int) -> float:
        """Video time (simulated seconds from the first frame) of a control step."""
        return (step - self.first_step) * self.control_timestep


class StoredVideo(msgspec.Struct, frozen=True, kw_only=True):
    video: StoredFile
    index: StoredFile
    frames: int
    video_index: VideoIndex


class VideoWriter:
    """Encode RGB frames tagged with control steps into an mp4 playing in simulation time."""

    def __init__(self, path: str | Path, *, width: int, height: int, control_timestep: float, camera: str = "",
                 codec: str | None = None, crf: int = 23):
        import av

        if width % 2 or height % 2:
            raise ValueError(f"video size {width}x{height}: width and height must be even for yuv420p; "
                             "render the camera at an even resolution")
        if control_timestep <= 0:
            raise ValueError(f"control_timestep {control_timestep}: expected simulated seconds per step > 0")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.camera = camera
        self.width, self.height = width, height
        self.control_timestep = control_timestep
        self.codec = codec or video_codec()
        self._time_base = Fraction(control_timestep).limit_denominator(1_000_000)
        self._container = av.open(str(self.path), mode="w", format="mp4", options={"movflags": "+faststart"})
        rate = Fraction(1, 1) / self._time_base
        self._stream = self._container.add_stream(self.codec, rate=rate.limit_denominator(1000))
        self._stream.width, self._stream.height = width, height
        self._stream.pix_fmt = "yuv420p"
        self._stream.codec_context.time_base = self._time_base
        if self.codec == "libx264":
            self._stream.options = {"crf": str(crf), "preset": "veryfast"}
        else:
            self._stream.bit_rate = 2_000_000
        self._frames: list[tuple[int, int]] = []
        self._closed = False

    def add_frame(self, step: int, rgb: np.ndarray) -> None:
        """Append the frame showing the scene after control step ``step``; steps must increase."""
        import av

        if rgb.shape != (self.height, self.width, 3) or rgb.dtype != np.uint8:
            raise ValueError(f"frame for step {step}: expected uint8 array of shape {(self.height, self.width, 3)}, "
                             f"got {rgb.dtype} {rgb.shape}")
        if self._frames and step <= self._frames[-1][0]:
            raise ValueError(f"frame for step {step} after step {self._frames[-1][0]}: steps must increase")
        first = self._frames[0][0] if self._frames else step
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame.pts = step - first
        frame.time_base = self._time_base
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        self._frames.append((step, len(self._frames)))

    def close(self) -> StoredVideo:
        """Finish the file, write the sidecar index, and read both back; raises ArtifactError."""
        if self._closed:
            raise ArtifactError(f"{self.path}: video already closed")
        self._closed = True
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        if not self._frames:
            raise ArtifactError(f"{self.path}: no frames were added; a trial video needs at least one frame")
        _fsync(self.path)
        sha, size = sha256_file(self.path)
        packets = count_video_packets(self.path)
        if packets != len(self._frames):
            raise ArtifactError(f"{self.path}: reads back with {packets} video packets, {len(self._frames)} written")
        video = check_stored(self.path, sha)
        index = VideoIndex(camera=self.camera, codec=self.codec, width=self.width, height=self.height,
                           control_timestep=self.control_timestep, first_step=self._frames[0][0],
                           frames=self._frames, video_sha256=sha, video_size=size)
        stored_index = store_bytes(index_path(self.path), msgspec.json.encode(index))
        return StoredVideo(video=video, index=stored_index, frames=len(self._frames), video_index=index)


# Events a trial's artifact writer records when it could not make the artifact: event -> what was lost.
FAILED_ARTIFACT_EVENTS = {"video_failed": "video"}


def failed_artifacts(reader: RunReader) -> list[dict[str, str]]:
    """Each artifact the run could not make, in write order: its trial, kind and reason (a warning, never scored)."""
    return [{"trial_id": e.trial_id or "", "artifact": kind, "reason": str(e.data.get("error", "no reason recorded"))}
            for event, kind in FAILED_ARTIFACT_EVENTS.items() for _, e in reader.events(event=event)]


def failed_artifact_line(failure: dict[str, str]) -> str:
    """One warning line, the same in the run's output, in `roboswe report` and on the trial page."""
    return f"warning: no {failure['artifact']} for trial {failure['trial_id']}: {failure['reason']}"


def index_path(video: Path) -> Path:
    """Where a video's sidecar index lives: ``camera.mp4`` -> ``camera.index.json``."""
    return Path(video).with_suffix(".index.json")


def load_video_index(path: Path) -> VideoIndex:
    return msgspec.json.decode(Path(path).read_bytes(), type=VideoIndex)


def count_video_packets(path: Path) -> int:
    """Number of encoded frames in the file's video stream (demux only, no decoding)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return sum(1 for p in container.demux(stream) if p.size)


# --- results.json -----------------------------------------------------------------------------


class Results(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a run's report states, with the pins needed to reproduce it."""

    schema_version: int = RESULTS_SCHEMA_VERSION
    scoring: str = SCORING_RULES  # the rule set the slots were scored by
    run_id: str
    created_at: float
    pins: dict[str, Any]
    denominators: Any  # scoring.Denominators: admitted tasks, exclusions with reasons
    bootstrap: dict[str, Any]  # interval methods, resamples and seed (the same everywhere)
    series: list[Any]  # SeriesMetrics
    datasets: list[Any]  # DatasetMetrics
    timing: dict[str, float]  # seconds per component over all trials, plus "replay"
    timing_by_series: dict[str, dict[str, float]]
    verifications: dict[str, int]  # verdict -> count (latest per trial)
    usage: Any  # usage.UsageSummary: tokens and cost per run, series and trial attempt
    context: Any  # context_evidence.ContextEvidence: the policy (C, O, S, B, counting) and every slide
    # task -> whose assets its scenes were built from, as the series pinned them ("placeholder": RoboCasa's offline
    # kit, never comparable with real-asset results); tasks whose family has no such label are absent
    assets: dict[str, str] = {}
    # the visual cross-check (roboswe.judge.summary): per judged trial attempt its latest verdicts beside the
    # mechanical outcome, under the supplementary audit's label; None when nothing was judged. Never scored.
    judge: dict[str, Any] | None = None


def build_results(reader: RunReader, run_id: str, *, pins: dict[str, Any] | None = None,
                  admitted_tasks: list[str] | None = None) -> Results:
    """Compute the run's figures from its database (roboswe.records.scoring, as report and viewer do);
    ``pins`` defaults to the run's recorded config."""
    from roboswe.judge.summary import judge_summary

    run = reader.run(run_id)
    score = score_run(reader, run_id, admitted_tasks=admitted_tasks)
    timing: dict[str, float] = {}
    by_series: dict[str, dict[str, float]] = {}
    verdicts: dict[str, int] = {}
    replay = 0.0
    for s in reader.series(run_id):
        views = reader.trials(s.series_id)
        by_series[s.series_id] = timing_totals(views)
        for component, seconds in by_series[s.series_id].items():
            timing[component] = timing.get(component, 0.0) + seconds
        for view in views:
            for v in reader.verifications(view.trial_id):
                replay += v.ended_at - v.started_at
            if view.verification is not None:
                verdicts[view.verification.verdict] = verdicts.get(view.verification.verdict, 0) + 1
    timing["replay"] = timing.get("replay", 0.0) + replay
    return Results(
        run_id=run_id, created_at=time.time(), pins=pins if pins is not None else msgspec.to_builtins(run.config),
        denominators=score.denominators, bootstrap=score.bootstrap, series=score.series, datasets=score.datasets,
        timing=dict(sorted(timing.items())), timing_by_series=by_series, verifications=verdicts,
        usage=usage_summary(reader.provider_calls(run_id), run_price(run.config)),
        context=context_evidence(reader, run_id),
        assets={s.task: s.pins["assets"] for s in reader.series(run_id) if s.pins.get("assets")},
        judge=judge_summary(reader, run_id),
    )


def write_results(run_dir: str | Path, results: Results) -> StoredFile:
    """Write RUN_DIR/results.json atomically and read it back; raises ArtifactError."""
    return store_bytes(Path(run_dir) / "results.json", msgspec.json.format(msgspec.json.encode(results), indent=2))


def load_results(path: str | Path) -> dict[str, Any]:
    """results.json as plain data; raises ArtifactError for another schema version."""
    data = msgspec.json.decode(Path(path).read_bytes())
    if data.get("schema_version") != RESULTS_SCHEMA_VERSION:
        raise ArtifactError(f"{path}: results schema {data.get('schema_version')}, "
                            f"this roboswe reads {RESULTS_SCHEMA_VERSION}")
    return data
