"""Trial videos from recorded states (frames on control steps, readback), and `roboswe report` on the same run."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from roboswe.records.artifacts import check_stored, load_video_index
from roboswe.records.reader import RunReader
from tests.viewer.fixture_run import EXEC_STEPS, RUN_ID, WAIT_STEPS, lift_manifest

pytestmark = pytest.mark.slow


def test_worker_videos_are_recorded_with_frames_on_control_steps(fixture_run):
    import av

    run_dir, trial = fixture_run["run_dir"], fixture_run["lift"][1]
    with RunReader(run_dir) as reader:
        artifacts = {(a.camera, a.artifact): a for a in reader.artifacts(trial_id=trial)}
    assert set(artifacts) == {(c, k) for c in ("agentview", "frontview") for k in ("video", "video_index")}
    for a in artifacts.values():
        check_stored(run_dir / a.path, a.sha256)  # stored means: reads back with the recorded sha256
    index = load_video_index(run_dir / artifacts[("agentview", "video_index")].path)
    last = EXEC_STEPS + WAIT_STEPS
    assert [s for s, _ in index.frames] == list(range(0, last + 1, 2))  # 20 Hz control, 10 fps video
    assert index.control_timestep == pytest.approx(0.05) and index.seconds_at(20) == pytest.approx(1.0)
    with av.open(str(run_dir / artifacts[("agentview", "video")].path)) as container:
        stream = container.streams.video[0]
        times = [float(f.pts * f.time_base) for f in container.decode(stream)]
    assert times == pytest.approx([s * 0.05 for s, _ in index.frames])  # playback in simulation time


def test_video_frame_at_a_step_shows_that_steps_recorded_state(fixture_run):
    """Decode the frame the index maps to step 20 and compare with a fresh render of step 20's state."""
    import av
    from roboswe.sim.video import VideoRenderer

    from roboswe.records.video import states_from_traces

    run_dir, trial = fixture_run["run_dir"], fixture_run["lift"][1]
    with RunReader(run_dir) as reader:
        states = states_from_traces(reader.control_traces(trial))
        video = next(a for a in reader.artifacts(trial_id=trial) if a.artifact == "video" and a.camera == "agentview")
    index = load_video_index((run_dir / video.path).with_suffix(".index.json"))
    with av.open(str(run_dir / video.path)) as container:
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(container.streams.video[0])]
    renderer = VideoRenderer(lift_manifest())
    try:
        rows = [int(np.flatnonzero(states.step == s)[0]) for s in (0, 20)]
        first, at20 = renderer.render(states, cameras=["agentview"], rows=rows)["agentview"]
    finally:
        renderer.close()
    frame20 = decoded[index.frame_at(20)].astype(float)
    err_same = np.abs(frame20 - at20).mean()
    err_other = np.abs(frame20 - first).mean()
    assert err_same < 3.0, f"decoded frame differs from the step-20 render by {err_same:.2f} on average"
    assert err_other > 2 * err_same  # and it is not the opening frame: the arm moved


def test_report_prints_trials_metrics_and_timing(fixture_run):
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "report", str(fixture_run["run_dir"])],
                         check=False, capture_output=True, text=True, timeout=120, env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    print(text)
    assert "lift-panda" in text and "stack-panda" in text
    assert "MISMATCH" in text and "unverified" in text
    assert "y = [0 1 1 · 1]" in text and "A = -" in text and "(lower bounds 0.60 / 0.20)" in text
    assert "tasks admitted / completed" in text and "2 / 0" in text and "5 slot(s) missing" in text
    for component in ("provider", "execution", "physics", "replay", "active time"):
        assert component in text


def test_report_json_matches_the_scoring(fixture_run):
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "report", str(fixture_run["run_dir"]), "--json"],
                         check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["run"]["run_id"] == RUN_ID
    lift, stack = summary["series"]
    assert lift["metrics"]["y"] == [0, 1, 1, None, 1] and lift["metrics"]["unscored"]["mismatch"] == 1
    assert [a["verdict"] for a in lift["attempts"]] == ["verified", "verified", "verified", "mismatch", "verified"]
    assert stack["metrics"]["statuses"] == ["failure", "incomplete", "unverified", "not_started", "not_started"]
    assert summary["timing"]["active_time"] == pytest.approx(sum(4.0 + t for t in range(1, 6)) + 9.0)


def test_report_names_a_missing_run_database(tmp_path):
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "report", str(tmp_path)],
                         check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "no run database" in out.stderr
