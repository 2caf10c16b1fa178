"""The recorder actor: the only writer of RUN_DIR/run.sqlite, the checkpoint blobs and run artifacts.

Records sent on their own are queued for the next batch (no reply, so a control loop
never waits on the disk). ``Durable``, ``Flush`` and ``CaptureCheckpoint`` are answered
only after a commit, so their replies are durability receipts. Messages are handled
in arrival order, so a receipt covers every record its sender sent before it.
Statistics carry the store's queue depth, commit latency and counters under ``extra``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, assert_never

import msgspec
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
    CarryCheckpoint,
    CheckpointCaptured,
    CheckpointRecord,
    Durable,
    Flush,
    Recorded,
    RecorderMessage,
    RecorderReply,
    RecorderRequest,
    StoreArtifact,
)
from roboswe.sandbox.carry import receive
from roboswe.sandbox.checkpoints import BlobStore, Capture, CheckpointError, capture

from roboswe.records.artifacts import (
    ArtifactError,
    artifact_record,
    store_bytes,
)
from roboswe.records.store import RunStore, StoreError

log = structlog.get_logger()

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
            case CarryCheckpoint():
                return await self._carried(message, decoded.blobs)
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
        return await self._commit_checkpoint(m, cap)

    async def _carried(self, m: CarryCheckpoint, frames: tuple[Any, ...]) -> CheckpointCaptured | Error:
        """A checkpoint a fleet worker captured on its node (sandbox/carry.py): every blob checked against its
        sha256 and read back from the store before the receipt, which names them for the node to drop its copies."""
        if len(frames) > 1:
            return Error(code="checkpoint", detail=f"checkpoint {m.checkpoint_id}: blobs come in one frame, got {len(frames)}")
        try:
            cap, read_back = await run_off_loop(receive, m.manifest, m.manifest_sha256, m.blobs,
                                                frames[0] if frames else b"", self.blobs, m.trial_id)
        except CheckpointError as e:
            return Error(code="checkpoint", detail=f"carried checkpoint {m.checkpoint_id} refused: {e}")
        return await self._commit_checkpoint(m, cap, read_back)

    async def _commit_checkpoint(self, m: CaptureCheckpoint | CarryCheckpoint, cap: Capture,
                                 carried: list[str] = ()) -> CheckpointCaptured | Error:
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
                                  refused=cap.refused, carried=list(carried))

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
                                 artifact=m.artifact, meta=m.meta, trial_id=m.trial_id)
        reply = await self._durable([record], 1)
        if isinstance(reply, Error):
            return reply
        return ArtifactStored(artifact_id=m.artifact_id, path=record.path, sha256=stored.sha256, size=stored.size)


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
