"""The coordinator's peer facades: typed replies, deadlines, and a durable write that survives a recorder restart."""

from __future__ import annotations

import time

import trio

from roboswe.actors import Client, Server
from roboswe.actors.recorder import Recorder as RecorderService
from roboswe.evaluation.peers import Links, Recorder
from roboswe.protocol import recorder as rec
from roboswe.records.reader import RunReader
from roboswe.records.store import RunStore
from roboswe.sandbox.checkpoints import BlobStore


async def test_a_durable_write_waits_for_a_restarted_recorder_and_is_committed_once(tmp_path):
    endpoint = f"ipc://{tmp_path}/recorder.sock"
    store = RunStore.open(tmp_path)
    service = RecorderService(tmp_path, store, BlobStore(tmp_path / "blobs"))
    run = rec.RunRecord(run_id="r", created_at=time.time(), admitted_sha256="0" * 64, config={})
    try:
        async with trio.open_nursery() as nursery:
            first = trio.CancelScope()

            async def serve_until_killed(task_status=trio.TASK_STATUS_IGNORED) -> None:
                with first:
                    await Server("recorder", endpoint, rec.RECORDER_CODEC, service.handle, concurrent=False).serve(
                        task_status=task_status)

            await nursery.start(serve_until_killed)
            async with Client("coordinator", endpoint, rec.RECORDER_CODEC, heartbeat_interval=0.05, liveness=3) as client:
                recorder = Recorder(client, "r")
                links = Links(sim=None, bridge=None, recorder=recorder)  # type: ignore[arg-type]
                await recorder.durable(run)
                first.cancel()  # the recorder dies
                with trio.fail_after(5):
                    await client.wait_peer_dead()
                done = trio.Event()

                async def write() -> None:
                    await recorder.durable(rec.EventRecord(run_id="r", event="after_restart", at=time.time(), data={}))
                    done.set()

                nursery.start_soon(write)
                await trio.sleep(0.2)
                assert not done.is_set()  # it waits for the recorder rather than failing the trial
                await nursery.start(Server("recorder", endpoint, rec.RECORDER_CODEC, service.handle, concurrent=False).serve)
                with trio.fail_after(10):
                    await done.wait()
                    assert await links.wait_alive(seconds=5) < 5
            nursery.cancel_scope.cancel()
    finally:
        store.close()
    with RunReader(tmp_path) as reader:
        assert [e.event for _, e in reader.events()] == ["after_restart"]
