"""RoboPaint acting directly, end to end: three rounds of move_flange / submit_painting through `roboswe run`.

One slow test runs configs/runs/paint-direct.toml (real actors, the paint scene; the sandbox is
opened but nothing execs) and checks per round: submitted, the recorded operations and action
log (round 1's refused probe is no action, its rejected probe is one and names its rule),
notes kept between rounds, each round opening with the goal image (its recorded SHA-256 the
manifest's), the replay verdict with every canvas hash reproduced by both
replays, and once more by re-executing each recorded action log in this test's own process.
The code-mode session is tests/viewer/test_gallery.py; parsing and one round in process are
tests/evaluation/test_direct_actions_paint.py.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from unittest.mock import ANY

import pytest

from ..conftest import require_in_ci
from .conftest import ROOT, roboswe

ROUNDS = 3
STROKES = ["move_flange"] * 3


@pytest.mark.slow
def test_three_direct_rounds_submit_and_every_canvas_replays():
    from roboswe.sandbox.images import ImageError, load_image

    try:
        load_image()
    except ImageError as e:
        require_in_ci(f"{e} (setup.sh builds it)")
    work = Path(tempfile.mkdtemp(prefix="rs-paint-direct-", dir="/tmp"))  # the sandbox user must traverse it
    work.chmod(0o755)
    try:
        _session(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _session(work: Path) -> None:
    from roboswe.sim.manifest import load_manifest
    from roboswe.sim.paint.backend import PaintBackend, replay_round

    from roboswe.evaluation.admission import (
        FORMAT,
        Admitted,
        admit_task,
        write_admitted,
    )
    from roboswe.evaluation.task_record import recorded
    from roboswe.records.reader import RunReader

    manifest = load_manifest(ROOT / "configs" / "tasks" / "paint-three-strokes.toml")
    task = admit_task(manifest)
    assert task.status == "admitted", task.reason
    admitted = work / "admitted.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "paint-test", "tasks": [task.id]}, created_at="test", host={},
                            run_config_sha256=None, tasks=[task]), admitted)
    config = work / "paint-direct-bwrap.toml"
    config.write_text((ROOT / "configs" / "runs" / "paint-direct.toml").read_text().replace(
        "[series]\n", '[series]\nbackend = "bwrap"\n', 1))
    run_dir = work / "run"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    logs, hashes = [], []
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        assert series.trials == ROUNDS and series.mode == "retain"
        views = reader.trials(series.series_id)
        assert [v.start.index for v in views] == [1, 2, 3]
        for v in views:
            assert v.end.outcome == "success" and v.end.reason == "finish", (v.trial_id, v.end.reason)
            # Each round opens with the goal image (the manifest's SHA-256, recorded), then the workspace camera.
            ((_, goal),) = reader.events(trial_id=v.trial_id, event="goal")
            assert [(g["sha256"], g["width"], g["height"]) for g in goal.data["images"]] == [(manifest.paint.goal.image_sha256, 1280, 800)]
            opening = next(e.data["turn"] for _, e in reader.events(trial_id=v.trial_id, event="turn") if e.data["turn"]["role"] == "user")
            assert [(p["camera"], p["digest"]) for p in opening["parts"] if p["part"] == "image"] == [
                ("goal", manifest.paint.goal.image_sha256), ("workspace", ANY)]
            ops = reader.operations(v.trial_id)
            names = [o.operation for o in ops]
            data = recorded(reader, v.trial_id)
            kinds = [a["kind"] for a in data["actions"]]
            if v.start.index == 1:
                assert names == ["observe", "move_flange", "move_flange", *STROKES, "write_file", "submit_painting"]
                assert "not counted as an action" in ops[1].feedback["text"]  # the harness's bounds check: not an action
                assert data["actions"][0]["result"]["rule"] == "linear_speed"  # the scene's rejection: an action
                assert "rejected (linear_speed) at waypoint 0" in ops[2].feedback["text"]
                assert kinds == ["move_flange", *STROKES, "submit_painting"] and data["actions_used"] == 5
            else:
                assert names == ["read_file", *STROKES, "write_file", "submit_painting"]
                assert not ops[0].feedback["is_error"] and f"round {v.start.index - 1}:" in ops[0].feedback["text"]  # notes kept
                assert kinds == [*STROKES, "submit_painting"] and data["actions_used"] == 4
            assert all(a["result"]["accepted"] for a in data["actions"][-4:-1])
            assert data["canvas"]["ended_by"] == "submitted" and len(data["contact_events"]) == 3
            assert v.verification.verdict == "verified", (v.verification.first_divergence, v.verification.detail.get("cause"))
            for how in ("operations", "action_log"):
                assert v.verification.detail["task_record"][how]["canvas_sha256"] == [data["canvas"]["sha256"]] * 2, how
            logs.append((v.start.index, data["actions"]))
            hashes.append(data["canvas"]["sha256"])
    assert len(set(hashes)) == ROUNDS  # the painter presses harder each round

    # Once more in this process, far from the run's simulator: each recorded action log gives its canvas hash.
    backend = PaintBackend(manifest)
    try:
        for (index, actions), sha in zip(logs, hashes):
            assert replay_round(manifest, manifest.seed, actions, backend).saved.sha256 == sha, index
    finally:
        backend.close()
