"""A whole `roboswe run` series whose participant attacks the harness (tests/sandbox/hostile_agent.py):
no attack makes a trial incomplete, stops the run, or leaves containers, volumes, temporaries or
oversize blobs behind; a listing that would fill the context arrives bounded, and a wait far past the
steps left is bounded by them before any work."""

from __future__ import annotations

import os

import pytest
from roboswe.sandbox.checkpoints import load_manifest
from roboswe.sandbox.volume import VOLUME_DIR
from roboswe.sandbox.volume import available as volume_available

from roboswe.records.reader import RunReader

from ..series.conftest import admitted as admitted
from ..series.conftest import roboswe, write_config
from ..series.conftest import sandbox_image as sandbox_image
from ..series.conftest import work_dir as work_dir

pytestmark = pytest.mark.slow


def _feedback(reader, trial_id: str, operation: str) -> list[dict]:
    return [o.feedback for o in reader.operations(trial_id) if o.operation == operation]


def test_a_hostile_participant_fails_its_trials_and_leaves_nothing_behind(backend, work_dir, admitted):
    volumes_before = set(os.listdir(VOLUME_DIR)) if VOLUME_DIR.exists() else set()
    config = write_config(work_dir, f"hostile-{backend}", agent='agent = "tests.sandbox.hostile_agent:HostileAgent"',
                          series="trials = 2\ntrial_steps = 200").read_text().replace('backend = "bwrap"', f'backend = "{backend}"')
    path = work_dir / f"hostile-{backend}.toml"
    path.write_text(config)
    run_dir = work_dir / f"hostile-{backend}"
    proc = roboswe("run", str(admitted), "--config", str(path), "--out", str(run_dir), "--no-video",
                   # replayed on bwrap only: the replay path is the backend's same exec, and it costs ~40 s a backend
                   *(() if backend == "bwrap" else ("--no-verify",)), timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        one, two = reader.trials(series.series_id)
        # the participant's attacks are its own failures, never infrastructure
        assert (one.end.outcome, one.end.reason) == ("failure", "finish"), one.end.reason
        assert (two.end.outcome, two.end.reason) == ("failure", "step_budget"), two.end.reason
        assert two.end.control_steps == 200
        (waited,) = _feedback(reader, two.trial_id, "wait")
        assert "asked for 100000, 199 were left" in waited["text"], waited["text"]
        from roboswe.evaluation.workspace import MAX_LISTING_BYTES

        results = [p["text"] for _, e in reader.events(trial_id=two.trial_id) if e.event == "turn"
                   for p in e.data["turn"]["parts"] if p["part"] == "tool_result"]  # as the participant read them
        (many,) = [t for t in results if "more entries not shown" in t]
        assert MAX_LISTING_BYTES - 2000 < len(many.encode()) < MAX_LISTING_BYTES + 200, len(many.encode())
        execs = _feedback(reader, one.trial_id, "exec")
        texts = [f["text"] for f in execs]
        assert "planted" in texts[0] and "forged" in texts[1] and "\\x1eroboswe-exception" in texts[1]
        assert "exception:" not in texts[1]  # the forged reports are the program's output
        assert "connections stopped at" in texts[2] and "cameras ['agentview']" in texts[2], texts[2]
        if volume_available() is None:
            assert "full 28" in texts[3], texts[3]
        later = [f["text"] for f in _feedback(reader, two.trial_id, "exec")]
        assert "made 1990" in later[0] and "still served" in texts[4] and "still served" in later[1], later
        writes = _feedback(reader, one.trial_id, "write_file")
        assert any(w["is_error"] and "not a regular file" in w["text"] for w in writes)
        (listing,) = _feedback(reader, one.trial_id, "list_files")
        assert "not valid UTF-8" in listing["text"] and "levels deep" in listing["text"]
        # replayed, the attacks score as what they are: failures, never above an honest failure, never unscored
        from roboswe.records.metrics import series_metrics, series_outcomes

        (m,) = [series_metrics(o) for o in series_outcomes(reader, series.run_id)]
        if backend == "bwrap":
            assert m.statuses == ["failure", "failure"] and m.completed and m.A == 0.0, (m.statuses, [
                (v.verification.verdict, v.verification.first_divergence, v.verification.detail.get("cause"))
                for v in (one, two)])
        else:
            assert m.statuses == ["unverified", "unverified"] and m.A_lower == 0.0
        refused = [r for c in reader.checkpoints(one.trial_id) for r in load_manifest(c.manifest).refused]
        assert any("UTF-8" in r.reason for r in refused) and any(r.type == "fifo" for r in refused)
    # nothing left behind
    blobs = run_dir / "blobs"
    stored = sum(p.stat().st_size for p in blobs.rglob("*") if p.is_file())
    assert stored < 32 << 20, stored
    assert not list((blobs / "tmp").iterdir())
    workspaces = run_dir / "workspaces"
    assert not [p for p in workspaces.rglob(".roboswe-tmp-*")]
    assert not [p for p in workspaces.rglob("*") if p.is_dir() and os.path.ismount(p)]
    new = set(os.listdir(VOLUME_DIR)) - volumes_before if VOLUME_DIR.exists() else set()
    assert not [h for h in new if not os.path.exists(f"/proc/{h.split('-')[0]}")]  # others' live bridges may hold some
    assert str(run_dir) not in open("/proc/self/mounts").read()
    if backend == "docker":
        from roboswe.sandbox.images import docker_client

        left = [c for c in docker_client().containers.list(all=True, filters={"label": "roboswe.trial"})
                if c.labels["roboswe.trial"] in (one.trial_id, two.trial_id)]
        assert not left, left
