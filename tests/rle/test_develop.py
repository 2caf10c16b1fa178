"""The development phase: the development simulator's ledger charges before anything runs, robot.reset()
exists only there (refused by a series trial's door and at verification), and `roboswe rle demo pose`
runs the whole protocol (the one end-to-end run of the demo in the default suite)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
import trio
from roboswe.protocol import sim as simp
from roboswe.protocol.bridge import RESET_ONLY_IN_DEVELOPMENT, ScriptLimits
from roboswe.protocol.control import Error

from roboswe.rle.ledger import decode_rows, encode_rows, verify_chain
from roboswe.rle.manifest import load_task
from roboswe.rle.rundir import read_sealed_record
from roboswe.rle.scene import DevelopmentSim
from roboswe.rle.seeds import public_salt
from roboswe.rle.verifier import check_ledger, verify_run

from ..commands.test_preflight import runs  # noqa: F401 - run dirs the sandbox user reaches, used by name
from ..sandbox.conftest import image  # noqa: F401 - the sandbox image fixture (refused when stale), used by name
from .conftest import small_task, submit
from .test_verifier import REFERENCE_BAR


def _task(steps: int, resets: int):
    task = load_task("pose-rgbd")
    return msgspec.structs.replace(task, budget=msgspec.structs.replace(task.budget, charged_steps=steps, resets=resets))


def _scene(sim: DevelopmentSim) -> tuple:
    return sim.control_step, sim.seed, tuple(sim.scene.scene.data.mocap_pos[0, :2]), sim.scene.scene.block_pose()


def test_a_step_the_ledger_cannot_pay_is_refused_before_anything_moves(tmp_path):
    record = tmp_path / "ledger.jsonl"
    sim = DevelopmentSim(_task(steps=5, resets=3), record=record)
    at_dispatch = []
    move = sim.scene.step
    sim.scene.step = lambda row: (at_dispatch.append((sim.ledger.rows[-1].kind, decode_rows(record.read_bytes())[-1].kind)),
                                  move(row))
    try:
        assert sim.step([[0.01, 0.0]] * 3).applied == 3
        # charged (and the charge recorded) before the stick moved, confirmed after
        assert at_dispatch == [("charge", "charge")] * 3
        assert [(r.kind, r.cost) for r in sim.ledger.rows] == [("charge", 3), ("confirm", 0)]
        cut = sim.step([[0.0, 0.01]] * 4)  # 2 left: as many rows as the ledger pays, the rest refused
        assert (cut.applied, cut.stopped, cut.steps_left) == (2, "trial_budget", 0)
        before, rows = _scene(sim), list(sim.ledger.rows)
        spent = sim.step([[0.01, 0.01]])
        assert (spent.applied, spent.stopped) == (0, "trial_budget")
        refused = sim.reset()
        assert isinstance(refused, Error) and refused.code == "limit_reached" and "cannot pay" in refused.detail
        assert _scene(sim) == before and sim.ledger.rows == rows and sim.resets == 0  # nothing ran, nothing written
        assert sim.state().values["budget_left"] == [0.0] and sim.state().steps_left == 0
        verdict = verify_chain(sim.ledger.rows, budget=5)
        assert verdict.ok and verdict.spent == 5 and decode_rows(record.read_bytes()) == sim.ledger.rows
    finally:
        sim.close()


def test_resets_are_charged_and_bounded_by_the_manifest():
    sim = DevelopmentSim(_task(steps=100, resets=1))
    try:
        first = _scene(sim)
        state = sim.reset()
        assert isinstance(state, simp.RobotState) and sim.seed == 1 and _scene(sim) != first
        assert state.values["resets_left"] == [0.0] and state.values["budget_left"] == [99.0]
        assert [(r.kind, r.operation, r.cost, r.detail) for r in sim.ledger.rows] == [
            ("charge", "reset", 1, ""), ("confirm", "reset", 0, "seed 1")]
        rows = list(sim.ledger.rows)
        again = sim.reset()
        assert isinstance(again, Error) and again.code == "limit_reached" and "resets are used up" in again.detail
        assert sim.ledger.rows == rows and sim.seed == 1
        # observing is free; the label is the block's pose within the manifest's noise, never its shape
        obs, blobs = sim.observe(depth=True)
        assert len(blobs) == 2 and obs.images[0].depth_blob == 1 and sim.ledger.rows == rows
        label, truth = sim.state().values["label"], sim.scene.scene.block_pose()
        assert abs(label[0] - truth.x) < 0.02 and abs(label[1] - truth.y) < 0.02 and len(label) == 3
    finally:
        sim.close()


def test_the_verifier_holds_the_ledger_to_the_reset_budget_too(tmp_path):
    task = _task(steps=100, resets=1)
    sim = DevelopmentSim(task)
    try:
        sim.reset()
        sim.resets -= 1  # a development side that miscounted: a second reset charged past the reset budget
        sim.reset()
    finally:
        sim.close()
    run = submit(tmp_path / "run", task, {"estimator.py": "def make_estimator():\n    return None\n"})
    record = read_sealed_record(run)
    record = msgspec.structs.replace(record, ledger_head=sim.ledger.seal(record.digest))
    (run / "ledger.jsonl").write_bytes(encode_rows(sim.ledger.rows))
    verdict = check_ledger(run, task, record)
    assert not verdict.ok and verdict.first_bad_row == 2 and "2 resets, over the budget of 1" in verdict.reason


RESETS = """
import robot
try:
    state = robot.reset()
    print("RESET", int(state["resets_left"][0]))
except robot.ResetRefused as e:
    print("REFUSED", e)
"""


@pytest.mark.exhaustive  # the fast versions: the door and robot.reset() unit tests below
def test_reset_exists_only_behind_a_development_door(image):  # noqa: F811
    from roboswe.bridge.trial import open_trial

    sim = DevelopmentSim(_task(steps=10, resets=2))
    asked = []

    async def link(message):
        asked.append(type(message).__name__)
        return await sim.link(message)

    async def run(resets: bool):
        scratch = Path(tempfile.mkdtemp(prefix="rle-reset-", dir="/tmp"))
        os.chmod(scratch, 0o755)
        (scratch / "ws").mkdir()
        (scratch / "ws" / "reset.py").write_text(RESETS)
        try:
            async with open_trial("reset", scratch / "ws", link, backend="bwrap", image=image, workspace_mb=None,
                                  resets=resets) as sandbox:
                return await sandbox.exec("reset.py")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    try:
        series = trio.run(run, False)  # a series trial's door: refused there, typed, never reaching the simulator
        assert series.exit_status == 0 and series.stdout.strip() == f"REFUSED {RESET_ONLY_IN_DEVELOPMENT}", series
        assert "Reset" not in asked and sim.ledger.rows == [] and series.refused == 1
        development = trio.run(run, True)
        assert development.stdout.strip() == "RESET 1", development
        assert [r.operation for r in sim.ledger.rows] == ["reset", "reset"] and sim.resets == 1
    finally:
        sim.close()


def test_a_series_door_refuses_reset_without_asking_the_simulator():
    from roboswe.bridge.door import Refused, RobotDoor
    from roboswe.protocol.bridge import BRIDGE_ROBOT_CODEC, Reset

    asked = []

    async def link(message):
        asked.append(message)
        raise AssertionError("a series door must not forward a reset")

    door = RobotDoor(link)
    session = door.begin("script.py", ScriptLimits())
    _, frames = BRIDGE_ROBOT_CODEC.encode(Reset(token=session.token), sender="robot")
    with pytest.raises(Refused) as refused:
        trio.run(door.handle, BRIDGE_ROBOT_CODEC.decode(frames))
    assert refused.value.kind == "Reset" and refused.value.reason == RESET_ONLY_IN_DEVELOPMENT and asked == []


def test_robot_reset_without_a_bridge_is_refused_typed(monkeypatch):
    """An artifact under verification has no bridge (no ROBOSWE_BRIDGE): robot.reset() is refused, typed."""
    from roboswe.bridge import robot

    monkeypatch.delenv("ROBOSWE_BRIDGE", raising=False)
    with pytest.raises(robot.ResetRefused, match="only in an RLE-Bench development phase"):
        robot.reset()


def test_series_simulator_refuses_reset():
    """The series simulator's robot endpoint refuses a Reset that reached it (defence in depth behind the door)."""
    from roboswe.actors import Accounts
    from roboswe.actors.simulator import SimulatorService
    from roboswe.sim.session import SimSession

    service = SimulatorService(SimSession(require_fixed_hash_seed=False), Accounts("simulator"))  # no development loaded
    try:
        _, frames = simp.SIM_ROBOT_CODEC.encode(simp.Reset(), sender="bridge")
        reply = service.robot_call(simp.SIM_ROBOT_CODEC.decode(frames))
        assert isinstance(reply, Error) and reply.code == "reset" and reply.detail == RESET_ONLY_IN_DEVELOPMENT
    finally:
        service.scene.close()


@pytest.mark.exhaustive
def test_reset_is_refused_at_verification(artifact_image, battery_cache, tmp_path):
    source = "import robot\n\ndef make_estimator():\n    robot.reset()\n"
    run = submit(tmp_path / "run", small_task(), {"estimator.py": source})
    report, _ = verify_run(run, salt=public_salt(), backend="bwrap", battery_cache=battery_cache)
    assert report.status == "gated" and [g.name for g in report.gates] == ["load"]
    assert "ResetRefused" in report.gates[0].reason and "development phase" in report.gates[0].reason


def _roboswe(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROBOSWE_RLE_BATTERY_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "roboswe.cli", *args], env=env, capture_output=True, text=True, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["pose-rgbd", pytest.param("pose-rgb", marks=pytest.mark.exhaustive)])
def test_rle_demo_pose_develops_seals_verifies_and_indexes(task, artifact_image, image, battery_cache, runs, tmp_path):  # noqa: F811
    run = runs / "run"
    demo = _roboswe("rle", "demo", "pose", "--task", task, "--out", str(run), "-e", "bwrap", cache=battery_cache)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "development: finished" in demo.stdout and "ledger verified" in demo.stdout and "RLE Index" in demo.stdout
    report = json.loads((run / "report.json").read_text())
    assert report["status"] == "scored" and report["ledger"]["ok"], report
    names = {c["name"]: c["value"] for c in report["components"]}
    assert 0.3 * names["stage_a"] + 0.7 * names["stage_b"] >= REFERENCE_BAR[task]
    # the development record: the participant's operations through the sandbox, charged on the real ledger
    record = json.loads((run / "development.json").read_text())
    operations = ["list_files", "write_file", "write_file", "write_file", "exec", "finish"]
    assert record["ended"] == "finished" and [o["operation"] for o in record["operations"]] == operations
    rows = decode_rows((run / "ledger.jsonl").read_bytes())
    assert {r.operation for r in rows} == {"step", "reset", "seal"} and rows[-1].detail == report["artifact_digest"]
    assert record["resets"] == 2 and record["spent"] == sum(r.cost for r in rows) == record["control_steps"] + 2
    assert [(r.kind, r.cost) for r in rows if r.operation == "reset"] == [("charge", 1), ("confirm", 0)] * 2
    # through the actors: the run database holds the development as a trial, its operations and turns, the
    # simulator's ledger rows (all but the seal row, which the coordinator adds) and the report
    from roboswe.records.reader import RunReader

    with RunReader(run) as reader:
        (series,) = reader.series()
        (trial,) = reader.trials(series.series_id)
        assert (trial.end.outcome, trial.end.cause, trial.end.control_steps) == ("failure", "finish", record["spent"])
        assert [o.operation for o in reader.operations(trial.trial_id)] == operations
        assert len(reader.events(trial_id=trial.trial_id, event="turn")) == 2 * len(operations) + 1
        [(_, ledger)] = reader.events(trial_id=trial.trial_id, event="task_record")
        [(_, recorded_report)] = reader.events(trial_id=trial.trial_id, event="rle_report")
    assert msgspec.convert(ledger.data["ledger"], list[type(rows[0])]) == rows[:-1]
    assert recorded_report.data["reward"] == report["reward"]
    assert json.loads((run / "sealed.json").read_text())["ledger_head"] == rows[-1].hash
    sealed_files = {f["path"] for f in json.loads((run / "sealed.json").read_text())["files"]}
    assert {"estimator.py", "templates.json", "develop_pose.py"} <= sealed_files
    verified = _roboswe("verify", str(run), cache=battery_cache)
    assert verified.returncode == 0 and "reproduced" in verified.stdout, verified.stderr
    index = json.loads(_roboswe("index", str(run), "--json", cache=battery_cache).stdout)
    entry = next(t for t in index["tasks"] if t["task"] == task)
    assert entry["reward"] == report["reward"]
    # one edited row of the demo's real ledger: the verifier gates it unverifiable and never runs the artifact
    forged = tmp_path / "forged"
    shutil.copytree(run, forged, ignore=shutil.ignore_patterns("verify"))
    os.chmod(forged, 0o755)
    lines = (forged / "ledger.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["cost"] = 0
    lines[0] = json.dumps(first)
    os.chmod(forged / "ledger.jsonl", 0o644)
    (forged / "ledger.jsonl").write_text("\n".join(lines) + "\n")
    report, result = verify_run(forged, salt=public_salt(), backend="bwrap")
    assert report.status == "gated" and result is None and report.ledger.first_bad_row == 0
    assert report.gates[0].reason.startswith("ledger unverifiable: row 0's hash does not match")
