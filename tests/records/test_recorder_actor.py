"""The recorder actor as a real process: receipts, ordering, checkpoints, artifacts, statistics, kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

import hashlib

import pytest
import trio
from roboswe.actors import Client, RemoteError, socket_dir
from roboswe.protocol.control import StatisticsRequest
from roboswe.protocol.recorder import (
    RECORDER_CODEC,
    ArtifactStored,
    CaptureCheckpoint,
    CheckpointCaptured,
    Durable,
    EventRecord,
    Flush,
    Recorded,
    StoreArtifact,
    TrialStarted,
)
from roboswe.sandbox.checkpoints import BlobStore, load_manifest, restore

from roboswe.records.reader import RunReader

from .conftest import run_records, trial_records


@pytest.fixture
def recorder(tmp_path):
    run_dir = tmp_path / "run"
    log = tempfile.TemporaryFile("w+")
    process = subprocess.Popen([sys.executable, "-m", "roboswe.actors.recorder", "--run-dir", str(run_dir)],
                               stderr=log, stdout=log, env={**os.environ, "PYTHONHASHSEED": "0"})
    sock = socket_dir(run_dir) / "recorder.sock"
    deadline = time.monotonic() + 30
    while not sock.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            raise RuntimeError(f"recorder did not start: {log.read()}")
        time.sleep(0.05)
    yield process, run_dir, f"ipc://{sock}"
    if process.poll() is None:
        process.kill()
    process.wait(10)


async def test_records_checkpoints_and_artifacts_through_the_actor(recorder, tmp_path):
    process, run_dir, endpoint = recorder
    sid = "r1/lift"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "main.py").write_text("print('hi')\n")
    (ws / "escape").symlink_to("/etc/passwd")
    async with Client("coordinator", endpoint, RECORDER_CODEC) as client:
        with trio.fail_after(30):
            for record in [*run_records(series_id=sid), *trial_records(sid, 1, None)]:
                await client.send(record)  # fire-and-forget, then one receipt covers them all
            for i in range(200):
                await client.send(EventRecord(run_id="r1", event="tick", at=time.time(), trial_id=f"{sid}/t1a0",
                                              data={"i": i}))
            reply = await client.request(Durable(records=[EventRecord(run_id="r1", event="durable", at=time.time())]))
            assert reply.message == Recorded(count=1)
            with RunReader(run_dir) as reader:
                assert len(reader.events()) == 201 and reader.trials(sid)[0].trial_id == f"{sid}/t1a0"

            reply = await client.request(CaptureCheckpoint(checkpoint_id="c0", trial_id=f"{sid}/t1a0",
                                                           label="trial_start", workspace=str(ws)))
            captured = reply.message
            assert isinstance(captured, CheckpointCaptured) and captured.files == 1 and captured.new_blobs == 1
            assert captured.refused == ["escape: symlink is not a regular file; not followed"]

            results = b'{"series": []}\n'
            store = StoreArtifact(artifact_id="r1/results", run_id="r1", artifact="results", path="results.json")
            stored = (await client.request(store, [results])).message
            assert isinstance(stored, ArtifactStored) and stored.sha256 == hashlib.sha256(results).hexdigest()
            with pytest.raises(RemoteError, match="without '..'"):
                await client.request(StoreArtifact(artifact_id="r1/escape", run_id="r1", artifact="results",
                                                   path="../escape.json"), [results])

            with pytest.raises(RemoteError, match="FOREIGN KEY"):
                await client.request(Durable(records=[
                    TrialStarted(trial_id="x", series_id="missing", index=1, fingerprint="f", started_at=0.0)]))

            stats = (await client.request(StatisticsRequest())).message
            assert stats.extra["queue_depth"] == 0 and stats.extra["written"] >= 205
            assert stats.extra["failed"] == 1 and 0 < stats.extra["commit_seconds_mean"] < 1

    with RunReader(run_dir) as reader:
        checkpoint = reader.checkpoint("c0")
        (artifact,) = reader.artifacts(run_id="r1")
    restore(load_manifest(checkpoint.manifest), BlobStore(run_dir / "blobs"), tmp_path / "restored")
    assert (tmp_path / "restored" / "main.py").read_text() == "print('hi')\n"
    assert not (tmp_path / "restored" / "escape").exists()
    assert (artifact.artifact, artifact.path, artifact.size) == ("results", "results.json", len(results))
    assert (run_dir / "results.json").read_bytes() == results and not (tmp_path / "escape.json").exists()


async def test_receipt_survives_kill_9_of_the_recorder(recorder):
    process, run_dir, endpoint = recorder
    sid = "r1/lift"
    async with Client("coordinator", endpoint, RECORDER_CODEC) as client:
        with trio.fail_after(30):
            await client.request(Durable(records=[*run_records(series_id=sid), *trial_records(sid, 1, "failure")]))
            for i in range(50):
                await client.send(EventRecord(run_id="r1", event="tick", at=time.time(), data={"i": i}))
            assert (await client.request(Flush())).message == Recorded(count=0)
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
    with RunReader(run_dir) as reader:
        (trial,) = reader.trials(sid)
        assert trial.outcome == "failure"
        assert [e.data["i"] for _, e in reader.events()] == list(range(50))


async def test_a_burst_of_fire_and_forget_records_is_not_dropped(recorder):
    _, run_dir, endpoint = recorder
    sid = "r1/lift"
    async with Client("coordinator", endpoint, RECORDER_CODEC) as client:
        with trio.fail_after(60):
            await client.request(Durable(records=[*run_records(series_id=sid), *trial_records(sid, 1, None)]))
            for i in range(5000):  # far beyond the server's in-order queue
                await client.send(EventRecord(run_id="r1", event="tick", at=time.time(), data={"i": i}))
            await client.request(Flush())
            stats = (await client.request(StatisticsRequest())).message
    assert stats.errors == 0 and stats.extra["failed"] == 0
    with RunReader(run_dir) as reader:
        assert [e.data["i"] for _, e in reader.events()] == list(range(5000))
