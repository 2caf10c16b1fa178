"""Trial videos aligned to control steps, stored after readback; results.json with a schema version."""

from __future__ import annotations

import time

import av
import msgspec
import numpy as np
import pytest
from roboswe.protocol.recorder import RunPins, VerificationRecord

from roboswe.records.artifacts import (
    RESULTS_SCHEMA_VERSION,
    ArtifactError,
    VideoWriter,
    artifact_record,
    build_results,
    check_stored,
    load_results,
    load_video_index,
    video_codec,
    write_results,
)
from roboswe.records.reader import RunReader

from .conftest import run_records, trial_records

STEPS = [0, 1, 2, 3, 10, 11, 12, 40]  # gaps: frames are tied to steps, not to wall time


def _frame(step: int) -> np.ndarray:
    img = np.zeros((48, 64, 3), np.uint8)
    img[:, : min(64, 4 + step)] = (200, 40, 90)
    return img


@pytest.mark.parametrize("codec", [None, "mpeg4"])
def test_video_decodes_with_one_frame_per_step_in_simulation_time(tmp_path, codec):
    writer = VideoWriter(tmp_path / "t1" / "agentview.mp4", width=64, height=48, control_timestep=0.05,
                         camera="agentview", codec=codec)
    for step in STEPS:
        writer.add_frame(step, _frame(step))
    stored = writer.close()
    assert stored.frames == len(STEPS)
    assert stored.video_index.codec == (codec or video_codec())
    with av.open(str(stored.video.path)) as container:
        times = [float(f.time) for f in container.decode(container.streams.video[0])]
    assert times == pytest.approx([s * 0.05 for s in STEPS])
    index = load_video_index(stored.index.path)
    assert index == stored.video_index and index.video_sha256 == stored.video.sha256
    assert index.frame_at(11) == 5 and index.frame_at(39) == 6 and index.seconds_at(40) == pytest.approx(2.0)
    check_stored(stored.video.path, stored.video.sha256)


def test_installed_av_offers_h264():
    assert video_codec() == "libx264"


def test_video_refuses_bad_frames_and_steps(tmp_path):
    writer = VideoWriter(tmp_path / "v.mp4", width=64, height=48, control_timestep=0.05)
    with pytest.raises(ValueError, match="expected uint8 array of shape"):
        writer.add_frame(0, np.zeros((48, 64, 4), np.uint8))
    writer.add_frame(5, _frame(5))
    with pytest.raises(ValueError, match="steps must increase"):
        writer.add_frame(5, _frame(5))
    writer.close()
    with pytest.raises(ValueError, match="must be even"):
        VideoWriter(tmp_path / "odd.mp4", width=63, height=48, control_timestep=0.05)


def test_damaged_artifact_fails_readback(tmp_path):
    writer = VideoWriter(tmp_path / "v.mp4", width=64, height=48, control_timestep=0.05)
    writer.add_frame(0, _frame(0))
    stored = writer.close()
    data = bytearray(stored.video.path.read_bytes())
    data[-1] ^= 0xFF
    stored.video.path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="reads back as sha256"):
        check_stored(stored.video.path, stored.video.sha256)


def test_results_json_carries_schema_pins_figures_and_timing(store, tmp_path):
    sid = "r1/lift"
    now = time.time()
    records = [*run_records(series_id=sid)]
    for t, outcome in enumerate("FFSSS", 1):
        records += trial_records(sid, t, "success" if outcome == "S" else "failure", steps=1000 - 100 * t)
        records.append(VerificationRecord(verification_id=f"v{t}", trial_id=f"{sid}/t{t}a0", verdict="verified",
                                          outcome_reproduced=True, started_at=now, ended_at=now + 2))
    store.put_durable(*records)
    with RunReader(tmp_path / "run") as reader:
        results = build_results(reader, "r1", admitted_tasks=["Lift"])
    stored = write_results(tmp_path / "run", results)
    data = load_results(stored.path)
    assert data["schema_version"] == RESULTS_SCHEMA_VERSION and data["pins"] == msgspec.to_builtins(RunPins(backend="bwrap", workers=2))
    (series,) = data["series"]
    assert series["Q"] == pytest.approx(0.6) and series["A"] == pytest.approx(0.6) and series["first_success"] == 3
    assert data["datasets"][0]["admitted_tasks"] == 1 and data["datasets"][0]["completed_tasks"] == 1
    assert data["timing"]["provider"] == pytest.approx(5.0) and data["timing"]["replay"] == pytest.approx(10.0)
    assert data["verifications"] == {"verified": 5}
    assert data["denominators"]["admitted"] == ["Lift"] and data["bootstrap"]["resamples"] == 10_000
    record = artifact_record(tmp_path / "run", stored, artifact_id="results", run_id="r1", artifact="results")
    assert record.path == "results.json" and record.sha256 == stored.sha256
    store.put_durable(record)
    bad = dict(data, schema_version=99)
    stored.path.write_bytes(msgspec.json.encode(bad))
    with pytest.raises(ArtifactError, match="results schema 99"):
        load_results(stored.path)
