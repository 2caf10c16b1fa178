"""RoboPaint end to end: three rounds of the scripted painter through `roboswe run`, replayed, in the gallery.

One slow test runs the series (real actors, the paint scene, bwrap), checks each round's
recorded evidence and the replay verdicts (every canvas hash reproduced by the operations
replay and by the action-log replay in a fresh scene), exports the viewer and opens
gallery.html in Chromium. The fast tests check the verdict's wording and the pairs' blinding
on plain records.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from roboswe.evaluation.task_record import divergence
from roboswe.viewer._gallery import Canvas, write_pairs

from ..conftest import require_in_ci
from ..series.conftest import ROOT, roboswe

ROUNDS = 3


def _run_config(directory: Path) -> Path:
    text = (ROOT / "configs" / "runs" / "paint-demo.toml").read_text()
    path = directory / "paint-demo-bwrap.toml"
    path.write_text(text.replace("[series]\n", '[series]\nbackend = "bwrap"\n', 1))
    return path


@pytest.mark.slow
def test_three_round_paint_session_replays_every_canvas_and_shows_them_in_the_gallery(browser, artifacts_dir):
    from roboswe.sandbox.images import ImageError, load_image

    try:
        load_image()
    except ImageError as e:
        require_in_ci(f"{e} (setup.sh builds it)")
    work = Path(tempfile.mkdtemp(prefix="rs-paint-", dir="/tmp"))  # the sandbox user must traverse it
    work.chmod(0o755)
    try:
        _session_gallery(work, browser, artifacts_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _session_gallery(work: Path, browser, artifacts_dir: Path) -> None:
    from roboswe.sim.manifest import load_manifest

    from roboswe.evaluation.admission import (
        FORMAT,
        Admitted,
        admit_task,
        write_admitted,
    )
    from roboswe.evaluation.task_record import recorded
    from roboswe.records.reader import RunReader
    from roboswe.viewer import export_site

    task = admit_task(load_manifest(ROOT / "configs" / "tasks" / "paint-three-strokes.toml"))
    assert task.status == "admitted", task.reason
    admitted = work / "admitted.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "paint-test", "tasks": [task.id]}, created_at="test", host={},
                            run_config_sha256=None, tasks=[task]), admitted)
    run_dir = work / "run"
    proc = roboswe("run", str(admitted), "--config", str(_run_config(work)), "--out", str(run_dir), "--no-video", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    with RunReader(run_dir) as reader:
        provider = reader.run().config.provider  # the inference settings, as run
        assert provider["agent"] == "roboswe.agents.paint_demo:PaintDemoAgent" and "max_output_tokens" in provider
        (series,) = reader.series()
        assert series.mode == "retain" and series.trials == ROUNDS
        views = reader.trials(series.series_id)
        assert [v.start.index for v in views] == [1, 2, 3]
        hashes = []
        for v in views:
            assert v.end.outcome == "success" and v.end.reason == "finish", (v.trial_id, v.end.reason)  # submitted
            data = recorded(reader, v.trial_id)
            assert data["round"] == v.start.index and data["canvas"]["ended_by"] == "submitted"
            kinds = [a["kind"] for a in data["actions"]]
            assert kinds == ["move_flange"] * 3 + ["submit_painting"] and data["actions_used"] == 4
            assert all(a["result"]["accepted"] for a in data["actions"][:3])
            assert len(data["contact_events"]) == 3 and data["protective_stops"] == []
            assert data["resources"]["control_steps"] == v.end.control_steps > 0
            png = data["files"]["canvas.png"]
            assert hashlib.sha256((run_dir / png["path"]).read_bytes()).hexdigest() == png["sha256"]
            # the verdict: both replays reproduced this round's canvas hash
            assert v.verification.verdict == "verified", v.verification
            checks = v.verification.detail["task_record"]
            for how in ("operations", "action_log"):
                assert checks[how]["canvas_sha256"] == [data["canvas"]["sha256"]] * 2, how
            hashes.append(data["canvas"]["sha256"])
        assert len(set(hashes)) == ROUNDS  # the painter presses harder each round: three different canvases
        canvas_artifacts = [a for a in reader.artifacts() if a.artifact == "canvas"]
        assert sorted(a.trial_id for a in canvas_artifacts) == [v.trial_id for v in views]

    site = work / "site"
    export_site(run_dir, site)
    browser.get((site / "gallery.html").as_uri())
    shown = browser.execute_script(
        "return [...document.querySelectorAll('figure.canvas')].map(f => ({round: +f.dataset.round, "
        "sha: f.dataset.sha256, label: f.querySelector('figcaption b').textContent, "
        "loaded: !!f.querySelector('img') && f.querySelector('img').complete && f.querySelector('img').naturalWidth}))")
    assert [(s["round"], s["label"], s["sha"], s["loaded"]) for s in shown] == [
        (r, f"ICL Round {r}", h, 512) for r, h in zip(range(1, ROUNDS + 1), hashes)]  # every canvas, its real round
    assert browser.execute_script("return document.querySelector('.goal img').naturalWidth") == 1280
    from roboswe.viewer._export import trial_key

    links = browser.execute_script("return [...document.querySelectorAll('figure.canvas')].map(f => "
                                   "f.querySelector('a.to-trial').getAttribute('href'))")
    assert links == [f"trial.html?t={trial_key(v.trial_id)}" for v in views]  # each canvas opens the trial that painted it
    assert browser.find_elements("id", "recorded-order") and not browser.find_elements("id", "author-order")
    browser.save_screenshot(str(artifacts_dir / "paint-gallery.png"))
    pairs = json.loads((site / "gallery" / "pairs" / "pairs.json").read_text())
    assert pairs["round"] == 3 and pairs["pairs"] == [] and isinstance(pairs["seed"], int)  # one series: nothing to pair


def _canvas(run_dir: Path, model: str, round_number: int, sha: str) -> Canvas:
    run = "run"  # the same run id in every run directory (e.g. each --out RUNS/<model>/run): names must not clash
    return Canvas(run_dir=str(run_dir), run_id=run, series_id=f"{run}/paint", task="paint", model=model, mode="retain", round=round_number,
                  attempt=0, trial_id=f"{run}/paint/t{round_number}a0", goal={"kind": "text", "text": "a pelican"},
                  outcome="success", sha256=sha, png="canvas.png", png_sha256="x")


def test_pairs_are_round_three_only_blinded_and_reproducible_from_their_seed(tmp_path):
    runs = {}
    for run in ("runA", "runB", "runC"):
        runs[run] = tmp_path / run
        runs[run].mkdir()
        (runs[run] / "canvas.png").write_bytes(run.encode())
    found = [_canvas(path, f"model-{run}", r, f"{run}{r}") for run, path in runs.items() for r in (1, 2, 3)]
    summary = write_pairs(found, tmp_path / "p1", seed=7)
    assert summary == {"pairs": 3, "canvases": 3, "seed": 7}
    text = (tmp_path / "p1" / "pairs.json").read_text()
    assert not any(s in text for s in ("model-", "runA", "runB", "runC"))  # no model or run names for raters
    pairs = json.loads(text)["pairs"]
    key = json.loads((tmp_path / "p1" / "key.json").read_text())["canvases"]
    assert {key[p["left"][:-4]]["round"] for p in pairs} | {key[p["right"][:-4]]["round"] for p in pairs} == {3}
    assert {frozenset((key[p["left"][:-4]]["model"], key[p["right"][:-4]]["model"])) for p in pairs} == {
        frozenset(x) for x in (("model-runA", "model-runB"), ("model-runA", "model-runC"), ("model-runB", "model-runC"))}
    for p in pairs:  # each anonymous PNG is the canvas the key names
        assert (tmp_path / "p1" / p["left"]).read_bytes() == key[p["left"][:-4]]["model"].removeprefix("model-").encode()
    write_pairs(found, tmp_path / "p2", seed=7)
    assert (tmp_path / "p2" / "pairs.json").read_text() == text  # the recorded seed reproduces the draw


def test_a_canvas_hash_mismatch_names_the_round():
    rec = {"round": 2, "canvas": {"sha256": "a" * 64}, "actions": [{"kind": "move_flange", "result": {"accepted": True}}]}
    assert divergence(rec, json.loads(json.dumps(rec)), "action-log") == ""
    other = {**rec, "canvas": {"sha256": "b" * 64}}
    assert divergence(rec, other, "action-log").startswith("round 2: canvas sha256 aaaaaaaaaaaaaaaa recorded, bbbbbbbbbbbbbbbb")
    moved = {**rec, "actions": [{"kind": "move_flange", "result": {"accepted": False}}]}
    assert divergence(rec, moved, "operations") == "round 2: action 0 (move_flange) differs in the operations replay: result"
