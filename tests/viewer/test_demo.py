"""`roboswe demo`, the README's first command: a verified 5-trial Lift series, videos, viewer and report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from roboswe.records.artifacts import check_stored
from roboswe.records.reader import RunReader
from tests.viewer.test_viewer import page_errors, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_run():
    # bwrap's sandbox user must traverse the run dir: pytest's tmp_path (mode 700) will not do
    root = Path(tempfile.mkdtemp(prefix="rs-test-demo-", dir="/tmp"))
    root.chmod(0o755)
    env = {**os.environ, "PYTHONHASHSEED": "0", "COLUMNS": "120"}
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "demo", "--out", str(root / "run")], cwd=root,
                         check=False, capture_output=True, text=True, timeout=900, env=env)
    yield root / "run", out
    shutil.rmtree(root, ignore_errors=True)


def test_demo_runs_verifies_renders_and_exports(demo_run):
    run_dir, out = demo_run
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1/4 admitting lift-panda" in out.stdout and "4/4 report" in out.stdout
    assert f"Open the viewer: {(run_dir / 'viewer' / 'index.html').resolve().as_uri()}" in out.stdout
    assert "where time went" in out.stdout and "replay verdicts: verified 5" in out.stdout  # the report
    assert "outcome reason steps" not in " ".join(out.stdout.split())  # run's trial table: not before the report's
    assert out.stdout.count("videos stored (agentview, frontview)") == 5  # the video stage says what it does
    assert "admission.task_started" not in out.stdout + out.stderr  # log lines go to events.jsonl, not among the demo's
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        trials = reader.trials(series.series_id)
        assert [t.start.index for t in trials] == [1, 2, 3, 4, 5]
        assert all(t.verification is not None and t.verification.verdict == "verified" for t in trials)
        videos = [a for a in reader.artifacts() if a.artifact == "video"]
    assert sorted((a.trial_id, a.camera) for a in videos) == sorted(
        (t.trial_id, cam) for t in trials for cam in ("agentview", "frontview"))
    for a in videos:
        check_stored(run_dir / a.path, a.sha256)
    # Each trial's video is queued as the trial ends, so it renders while the next trials and the replays run
    # (the demo's 55 s became 44 s on a quiet machine); the coordinator logs both in order.
    order = [(e["event"], e.get("trial")) for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
             if e["event"] in ("trial_video_queued", "trial_ended")]
    first, last = trials[0].trial_id, trials[-1].trial_id
    assert order.index(("trial_video_queued", first)) < order.index(("trial_ended", last)), order


def test_demo_viewer_plays_its_trial_videos(demo_run, browser):
    from roboswe.viewer._export import trial_key

    run_dir, out = demo_run
    assert out.returncode == 0
    with RunReader(run_dir) as reader:
        trial = reader.trials(reader.series()[0].series_id)[0].trial_id
    page_errors(browser)
    browser.get((run_dir / "viewer" / "trial.html").as_uri() + "?t=" + trial_key(trial))
    wait_for(browser, "document.body.dataset.ready")
    wait_for(browser, "document.querySelectorAll('video').length === 2 && "
                      "[...document.querySelectorAll('video')].every(v => v.readyState >= 1 && v.duration > 0)")
    browser.execute_script("[...document.querySelectorAll('li.op')].find(li => li.textContent.includes('exec')).click()")
    assert "exit status 0" in browser.find_element("id", "detail").text
    assert page_errors(browser) == []
