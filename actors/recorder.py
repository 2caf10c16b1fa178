"""The recorder actor: the only writer of RUN_DIR/run.sqlite, the checkpoint blobs and trial videos.

Records sent on their own are queued for the next batch (no reply, so a control loop
never waits on the disk). ``Durable``, ``Flush`` and ``CaptureCheckpoint`` are answered
only after a commit, so their replies are durability receipts. Messages are handled
in arrival order, so a receipt covers every record its sender sent before it.
Statistics carry the store's queue depth, commit latency and counters under ``extra``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, assert_never

import msgspec
import numpy as np
import structlog
import trio
from roboswe.actors import Accounts, Actor, actor_main, run_off_loop
from roboswe.protocol import Decoded
from roboswe.protocol.control import Error, Statistics
from roboswe.protocol.recorder import (
    RECORD_TYPES,
    RECORDER_CODEC,
    ArtifactStored,
    BlobRecord,
    CaptureCheckpoint,
    CheckpointCaptured,
    CheckpointRecord,
    Durable,
    Flush,
    Recorded,
    RecorderMessage,
    RecorderReply,
    RecorderRequest,
    StoreArtifact,
    VideoFinish,
    VideoFrames,
    VideoStored,
)
from roboswe.sandbox.checkpoints import BlobStore, CheckpointError, capture

from roboswe.records.artifacts import (
    ArtifactError,
    VideoWriter,
    artifact_record,
    store_bytes,
)
from roboswe.records.store import RunStore, StoreError

log = structlog.get_logger()

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class RecorderAccounts(Accounts):
    """The runtime's accounts plus the store's gauges and counters in ``extra``."""

    def __init__(self, actor: str, store: RunStore):
        super().__init__(actor)
        self._store = store

    def statistics(self) -> Statistics:
        base = super().statistics()
        s = self._store.statistics()
        extra = dict(base.extra)
        extra.update(
            queue_depth=float(s.queue_depth), written=float(s.written), failed=float(s.failed),
            duplicates=float(s.duplicates), batches=float(s.batches), durable_requests=float(s.durable_requests),
            commit_seconds_last=s.commit_seconds_last, commit_seconds_max=s.commit_seconds_max,
            commit_seconds_mean=s.commit_seconds_total / s.batches if s.batches else 0.0,
            lag_seconds_max=s.lag_seconds_max,
        )
        return Statistics(actor=base.actor, pid=base.pid, uptime=base.uptime, idle=base.idle, handling=base.handling,
                          handled=base.handled, waiting=base.waiting, errors=base.errors, extra=extra)


class Recorder:
    """Turns recorder messages into store writes, checkpoints and videos."""

    def __init__(self, run_dir: Path, store: RunStore, blobs: BlobStore):
        self.run_dir = run_dir
        self.store = store
        self.blobs = blobs
        self._videos: dict[tuple[str, str], VideoWriter] = {}

    async def handle(self, decoded: Decoded[RecorderMessage]) -> RecorderReply | None:
        message = decoded.message
        if not isinstance(message, RecorderRequest):
            return Error(code="unsupported", detail=f"recorder does not handle {type(message).__name__}")
        if isinstance(message, RECORD_TYPES):  # a bare record: queued for the next batch, no reply
            self.store.put(message)
            return None
        match message:
            case Durable(records=records):
                return await self._durable(records, len(records))
            case Flush():
                return await self._durable([], 0)
            case CaptureCheckpoint():
                return await self._checkpoint(message)
            case VideoFrames():
                return await self._video_frames(message, decoded.blobs)
            case VideoFinish():
                return await self._video_finish(message)
            case StoreArtifact():
                return await self._store_artifact(message, decoded.blobs)
            case _:
                assert_never(message)

    async def _durable(self, records: list[Any], count: int) -> Recorded | Error:
        receipt = self.store.put_durable_nowait(records)
        try:
            await run_off_loop(receipt.wait)
        except StoreError as e:
            return Error(code="refused", detail=f"recorder refused records: {e}")
        return Recorded(count=count)

    async def _checkpoint(self, m: CaptureCheckpoint) -> CheckpointCaptured | Error:
        try:
            cap = await run_off_loop(capture, Path(m.workspace), self.blobs, m.trial_id)  # per-trial blob byte cap
        except CheckpointError as e:
            return Error(code="checkpoint", detail=str(e))
        now = time.time()
        record = CheckpointRecord(
            checkpoint_id=m.checkpoint_id, trial_id=m.trial_id, label=m.label, op_seq=m.op_seq,
            manifest_sha256=cap.manifest_sha256, files=len(cap.manifest.entries),
            total_bytes=cap.manifest.total_bytes, manifest=cap.manifest_bytes, created_at=now,
        )
        blobs = [BlobRecord(sha256=sha, size=size, stored_at=now) for sha, size in cap.new_blobs]
        reply = await self._durable([*blobs, record], len(blobs) + 1)
        if isinstance(reply, Error):
            return reply
        return CheckpointCaptured(checkpoint_id=m.checkpoint_id, manifest_sha256=cap.manifest_sha256,
                                  files=record.files, total_bytes=record.total_bytes, new_blobs=len(blobs),
                                  refused=cap.refused)

    async def _store_artifact(self, m: StoreArtifact, blobs: tuple[Any, ...]) -> ArtifactStored | Error:
        parts = Path(m.path).parts
        if len(blobs) != 1 or not parts or Path(m.path).is_absolute() or ".." in parts:
            return Error(code="refused", detail=f"artifact {m.artifact_id!r}: need one blob and a relative path "
                                                f"inside RUN_DIR without '..', got {m.path!r} and {len(blobs)} blob(s)")
        try:
            stored = await run_off_loop(store_bytes, self.run_dir / m.path, bytes(blobs[0]))
        except (ArtifactError, OSError) as e:
            return Error(code="artifact", detail=f"artifact {m.artifact_id!r}: {e}")
        record = artifact_record(self.run_dir, stored, artifact_id=m.artifact_id, run_id=m.run_id,
                                 artifact=m.artifact, meta=m.meta)
        reply = await self._durable([record], 1)
        if isinstance(reply, Error):
            return reply
        return ArtifactStored(artifact_id=m.artifact_id, path=record.path, sha256=stored.sha256, size=stored.size)

    def video_path(self, trial_id: str, camera: str) -> Path:
        return self.run_dir / "videos" / _UNSAFE.sub("_", trial_id) / f"{_UNSAFE.sub('_', camera)}.mp4"

    async def _video_frames(self, m: VideoFrames, blobs: tuple[Any, ...]) -> None:
        key = (m.trial_id, m.camera)
        if len(blobs) != len(m.steps):
            log.error("video_frames_refused", trial=m.trial_id, camera=m.camera,
                      detail=f"{len(m.steps)} steps but {len(blobs)} frame blobs")
            return None
        writer = self._videos.get(key)
        try:
            if writer is None:
                writer = VideoWriter(self.video_path(m.trial_id, m.camera), width=m.width, height=m.height,
                                     control_timestep=m.control_timestep, camera=m.camera)
                self._videos[key] = writer
            frames = [np.frombuffer(b, np.uint8).reshape(m.height, m.width, 3) for b in blobs]
            await run_off_loop(lambda: [writer.add_frame(s, f) for s, f in zip(m.steps, frames)])
        except (ValueError, ArtifactError) as e:
            log.error("video_frames_refused", trial=m.trial_id, camera=m.camera, detail=str(e))
        return None

    async def _video_finish(self, m: VideoFinish) -> VideoStored | Error:
        writer = self._videos.pop((m.trial_id, m.camera), None)
        if writer is None:
            return Error(code="refused", detail=f"no video frames arrived for trial {m.trial_id!r} camera {m.camera!r}")
        try:
            stored = await run_off_loop(writer.close)
        except ArtifactError as e:
            return Error(code="artifact", detail=str(e))
        base = f"{m.trial_id}/{m.camera}"
        records = [
            artifact_record(self.run_dir, stored.video, artifact_id=f"{base}/video", run_id=m.run_id,
                            trial_id=m.trial_id, artifact="video", camera=m.camera,
                            meta={"frames": stored.frames, "codec": stored.video_index.codec,
                                  "control_timestep": stored.video_index.control_timestep}),
            artifact_record(self.run_dir, stored.index, artifact_id=f"{base}/index", run_id=m.run_id,
                            trial_id=m.trial_id, artifact="video_index", camera=m.camera),
        ]
        reply = await self._durable(records, 2)
        if isinstance(reply, Error):
            return reply
        return VideoStored(trial_id=m.trial_id, camera=m.camera, path=records[0].path, sha256=stored.video.sha256,
                           index_path=records[1].path, frames=stored.frames)


async def main(actor: Actor) -> None:
    store = RunStore.open(actor.run_dir)
    actor.accounts = RecorderAccounts(actor.name, store)
    recorder = Recorder(actor.run_dir, store, BlobStore(actor.run_dir / "blobs"))
    try:
        await actor.serve(RECORDER_CODEC, recorder.handle, concurrent=False)
    finally:
        with trio.CancelScope(shield=True):  # commit what is queued even when stopped by a signal
            await run_off_loop(store.close)
        log.info("recorder_closed", **msgspec.structs.asdict(store.statistics()))


if __name__ == "__main__":
    actor_main("recorder", main)
