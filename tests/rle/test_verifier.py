"""The verifier on real sandboxes: the reference estimator on the full battery (the one end-to-end run
of it in the default suite), calibration on the shared render, hostile artifacts on a small battery."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from roboswe.rle.ledger import Ledger, encode_rows, row_hash
from roboswe.rle.manifest import load_task
from roboswe.rle.pose import family as pose
from roboswe.rle.rundir import read_report
from roboswe.rle.seeds import hidden_seeds, load_salt, public_salt
from roboswe.rle.verifier import verify_run, write_evidence

from . import hostile
from .conftest import REFERENCE, small_task, submit

REFERENCE_BAR = {"pose-rgbd": 0.45, "pose-rgb": 0.40}
"""What the reference estimator's accuracy (0.3·A + 0.7·B) reaches on the public-salt battery
(docs/rle-bench.md has the figures)."""


def _roboswe(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROBOSWE_RLE_BATTERY_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "roboswe.cli", *args], env=env, capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_reference_scores_on_the_full_battery_and_verify_reproduces_it(artifact_image, battery_cache, tmp_path):
    run = tmp_path / "run"
    scored = _roboswe("rle", "score", "pose-rgbd", str(REFERENCE), "--out", str(run), "--json", cache=battery_cache)
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)
    assert report["status"] == "scored" and report["gates"] == [] and report["salt_label"] == "public"
    names = {c["name"]: c["value"] for c in report["components"]}
    # the bar is on accuracy; the deduction is whatever this host's rate earns (never a timed assertion)
    assert 0.3 * names["stage_a"] + 0.7 * names["stage_b"] >= REFERENCE_BAR["pose-rgbd"]
    assert names["deduction"] == pytest.approx(0.2 * min(1.0, max(0.0, (10 - names["rate_hz"]) / 9)))
    assert report["reward"] == pytest.approx(max(0.0, 0.3 * names["stage_a"] + 0.7 * names["stage_b"] - names["deduction"]))
    assert len(report["revealed_seeds"]) == 20 and report["calls"] == 1 + 20 + 700
    verified = _roboswe("verify", str(run), cache=battery_cache)
    assert verified.returncode == 0 and "reproduced" in verified.stdout, verified.stderr
    index = json.loads(_roboswe("index", str(run), "--json", cache=battery_cache).stdout)
    entry = next(t for t in index["tasks"] if t["task"] == "pose-rgbd")
    assert entry["reward"] == report["reward"] and entry["score"] == pytest.approx(100 * report["reward"])
    assert index["overall"] is None  # one workflow of four: partial
    # a changed answer on record is a mismatch, and verify says so
    calls = (run / "calls.jsonl").read_text().splitlines()
    row = json.loads(calls[5])
    row["value"]["x"] += 1e-9
    calls[5] = json.dumps(row)
    os.chmod(run / "calls.jsonl", 0o644)
    (run / "calls.jsonl").write_text("\n".join(calls) + "\n")
    mismatch = _roboswe("verify", str(run), cache=battery_cache)
    assert mismatch.returncode == 1 and "answers differ" in mismatch.stderr


def _in_process(path: Path):
    spec = importlib.util.spec_from_file_location(f"artifact_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_estimator()


def _score_in_process(task_name: str, estimator, cache: Path) -> float:
    """The scoring rule over the shared render, with the estimator called here (no sandbox, no rate)."""
    task = load_task(task_name)
    battery = pose.render_battery(task, pose.make_plan(task, hidden_seeds(public_salt(), task.id, task.protocol.version,
                                                                          pose.seed_count(task))), cache)
    estimates = {}
    for call in pose.calls(battery):
        if call.kind == "reset":
            estimator.reset()
        else:
            estimates[call.frame] = pose.valid_estimate(estimator.estimate(pose.observation(task, battery, call.frame)))
    reward, _ = pose.score(task, battery, estimates, estimate_seconds=len(estimates) / 100.0, answered=len(estimates))
    return reward


@pytest.mark.slow
def test_calibration_on_the_shared_render(battery_cache, tmp_path):
    const = tmp_path / "const" / "estimator.py"
    const.parent.mkdir()
    const.write_text(hostile.CONSTANT)
    assert _score_in_process("pose-rgbd", _in_process(const), battery_cache) <= 0.05
    assert _score_in_process("pose-rgbd", _in_process(REFERENCE / "estimator.py"), battery_cache) >= REFERENCE_BAR["pose-rgbd"]


@pytest.mark.exhaustive
def test_reference_rgb_on_the_shared_render(battery_cache):
    assert _score_in_process("pose-rgb", _in_process(REFERENCE / "estimator.py"), battery_cache) >= REFERENCE_BAR["pose-rgb"]


def _verify(tmp_path: Path, name: str, source: str, cache: Path, *, salt=None, task=None):
    run = submit(tmp_path / name, task or small_task(), {"estimator.py": source})
    report, result = verify_run(run, salt=salt or public_salt(), backend="bwrap", battery_cache=cache)
    write_evidence(run, report, result)
    return report, result


@pytest.mark.slow
def test_hostile_artifacts_end_as_their_own_result(artifact_image, battery_cache, tmp_path):
    report, _ = _verify(tmp_path, "import", hostile.IMPORT_FAILS, battery_cache)
    assert (report.status, report.reward, [g.name for g in report.gates]) == ("gated", 0.0, ["load"])
    assert "ModuleNotFoundError" in report.gates[0].reason

    report, result = _verify(tmp_path, "crash", hostile.CRASHES, battery_cache)
    assert report.status == "scored" and report.reward == 0.0  # the first answer passed the gate; the rest are missing
    assert "went away" in result.calls[-1].error and result.end.exit_status == 3

    report, result = _verify(tmp_path, "forge", hostile.FORGES_REPORT, battery_cache)
    assert report.status == "gated" and report.gates[0].name == "interface" and report.reward == 0.0
    assert read_report(tmp_path / "forge") == report  # what the artifact wrote stayed in its sandbox
    assert not (tmp_path / "forge" / "artifact" / "report.json").exists()

    report, result = _verify(tmp_path, "slow", hostile.SLOW, battery_cache)
    rate = next(c.value for c in report.components if c.name == "rate_hz")
    deduction = next(c.value for c in report.components if c.name == "deduction")
    assert rate < 3.5 and deduction == pytest.approx(0.2 * (10 - rate) / 9)

    salt_file = tmp_path / "salt"
    salt_file.write_text(secrets.token_hex(32))
    salt = load_salt(salt_file)
    task = small_task(load_seconds=240.0)
    seeds = hidden_seeds(salt, task.id, task.protocol.version, pose.seed_count(task))
    secrets_ = [salt.secret.decode(), salt.sha256, *(str(s) for s in seeds), *(f"{s:x}" for s in seeds)]
    control = "/bridge/artifact.sock"  # is in /bridge/runner.py: the search does read what is mounted
    source = hostile.SEARCHES.format(needles=[n[::-1] for n in [control, *secrets_]])
    report, result = _verify(tmp_path, "search", source, battery_cache, salt=salt, task=task)
    assert report.status == "scored", report.gates
    line = re.search(r"SEARCHED mounts=(.*) files=(\d+) bytes=(\d+) FOUND=(.*)", result.end.stderr_tail)
    assert line, result.end.stderr_tail
    mounts, files, found = eval(line[1]), int(line[2]), eval(line[4])
    assert {"/", "/bridge", "/workspace", "/tmp"} <= set(mounts) and files > 1000
    assert [label for label, i in found if i > 0] == []  # no secret anywhere
    assert any(label == "/bridge/runner.py" for label, i in found if i == 0)
    assert set(report.revealed_seeds) == set(seeds)  # revealed into the record, after verification


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", ["HANGS", "FORK_BOMB", "FLOODS"])
def test_hangs_forks_and_floods_end_as_their_own_zero(artifact_image, battery_cache, tmp_path, name):
    report, result = _verify(tmp_path, name.lower(), getattr(hostile, name), battery_cache)
    assert report.reward == 0.0 and report.status == "gated"
    assert ("exceeds" if name == "FLOODS" else "cap of one call") in result.calls[-1].error


def test_a_forged_ledger_row_gates_the_report(artifact_image, tmp_path):
    task = small_task()
    ledger = Ledger(budget=task.budget.charged_steps)
    for op in ("render", "reset", "step"):
        ledger.charge(op)
        ledger.confirm()
    run = submit(tmp_path / "run", task, {"estimator.py": hostile.CONSTANT})
    sealed_path = run / "sealed.json"
    sealed = json.loads(sealed_path.read_text())
    head = ledger.seal(sealed["digest"])
    os.chmod(run, 0o755)
    sealed["ledger_head"] = head
    sealed_path.write_text(json.dumps(sealed))
    rows = list(ledger.rows)
    r = rows[4]  # the last step's charge, re-costed at 0 and re-hashed: the next row's link breaks
    rows[4] = msgspec.structs.replace(r, cost=0, hash=row_hash(r.index, r.kind, r.operation, 0, r.detail, r.prev))
    (run / "ledger.jsonl").write_bytes(encode_rows(rows))
    report, result = verify_run(run, salt=public_salt(), backend="bwrap")
    assert report.status == "gated" and report.reward == 0.0 and result is None  # the artifact never ran
    assert report.gates[0].name == "ledger" and report.gates[0].reason.startswith("ledger unverifiable")
    assert report.ledger.first_bad_row == 5
    (run / "ledger.jsonl").write_bytes(encode_rows(ledger.rows))  # the true rows verify
    report, _ = verify_run(run, salt=public_salt(), backend="bwrap", battery_cache=tmp_path / "cache")
    assert report.ledger.ok and report.status == "scored"
