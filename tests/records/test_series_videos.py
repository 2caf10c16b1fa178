"""The run's video stage says what it stored and what it lost, trial by trial, as the worker finishes each."""

from __future__ import annotations

import concurrent.futures

from roboswe.protocol.recorder import ArtifactRecord

from roboswe.records.video import SeriesVideos


class Recording:
    """What SeriesVideos.record sends: events (put) and artifacts (durable)."""

    def __init__(self) -> None:
        self.events: list = []
        self.artifacts: list = []

    async def put(self, record) -> None:
        self.events.append(record)

    async def durable(self, *records) -> None:
        self.artifacts += records


def _finished(value=None, error: Exception | None = None) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


async def test_each_trials_videos_are_said_stored_or_lost_with_the_reason(tmp_path):
    stored = [ArtifactRecord(artifact_id=f"r/t/t1a0/{cam}/{kind}", run_id="r", trial_id="r/t/t1a0", artifact=kind,
                             camera=cam, path=f"videos/{cam}", sha256="0" * 64, size=1, created_at=0.0)
              for cam in ("agentview", "wrist") for kind in ("video", "video_index")]
    videos = SeriesVideos(tmp_path, "r", worker=object())
    videos._pending = [("r/t/t1a0", _finished(stored)),
                       ("r/t/t2a0", _finished(error=AttributeError("'NoneType' object has no attribute 'load_state'")))]
    recording, said = Recording(), []
    assert await videos.record(recording, say=said.append) == 2
    assert said == ["r/t/t1a0: videos stored (agentview, wrist)",
                    "warning: no video for trial r/t/t2a0: AttributeError: 'NoneType' object has no attribute 'load_state'"]
    (event,) = recording.events
    assert (event.event, event.trial_id, event.data) == (
        "video_failed", "r/t/t2a0", {"error": "AttributeError: 'NoneType' object has no attribute 'load_state'"})
    assert recording.artifacts == stored
