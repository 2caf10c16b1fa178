"""Family 03 attempts through the development simulator's ledger: the scripted calibration participants,
the budgets, what the participant may read, and the replay that must reproduce (or name what differs)."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest
from roboswe.sim.tabletop_physics.scene import build_model

from roboswe.rle.ledger import decode_rows, encode_rows
from roboswe.rle.manifest import load_task
from roboswe.rle.scene import DevelopmentSim
from roboswe.rle.seeds import Salt, public_salt
from roboswe.rle.tabletop import participants, scoring
from roboswe.rle.tabletop.attempt import AttemptRecord, TabletopScene, layouts
from roboswe.rle.tabletop.plan import make_plan
from roboswe.rle.tabletop.runner import ATTEMPT, replay_run, run_attempt

SALTS = [Salt(secret=f"tabletop calibration salt {i}".encode(), label=f"calibration-{i}") for i in range(3)]


def small(name: str, **budget):
    task = load_task(name)
    return msgspec.structs.replace(task, budget=msgspec.structs.replace(task.budget, **budget)) if budget else task


def still(rows: int, width: int = 5):
    return lambda robot: robot.step([[0.0] * width] * rows) and {}


def test_tower_of_k_cubes_scores_the_formula_and_replays(tmp_path):
    """The one end-to-end case in the default run: the scripted participant finds the cubes, stacks three,
    the trusted side releases, settles and measures; the reward is the formula's for k = 3 to 0.002 (contacts
    sink a fraction of a millimetre), the ledger verifies, and the replay reproduces it bit for bit."""
    task = load_task("tabletop-tower")
    report, summary = run_attempt(task, lambda r: participants.tower(r, 3), public_salt(), tmp_path)
    edges = make_plan(task, public_salt()).instance.edges
    assert report.status == "scored" and report.ledger.ok
    assert summary["stacked"] == 3 and summary["cubes"] == len(edges)
    assert report.reward == pytest.approx(scoring.tower_formula(edges, 3), abs=0.002)
    assert report.ledger.spent == summary["steps"]
    assert replay_run(tmp_path) == []


def test_the_participant_never_reads_a_hidden_value():
    task = load_task("tabletop-balance")
    plan = make_plan(task, public_salt())
    sim = DevelopmentSim(task, scene=TabletopScene(task, plan))
    spec, state = sim.spec(), sim.state()
    assert set(state.values) == {"hand", "finger_gap", "pointer_deg", "budget_left", "resets_left"}
    visible = spec.instruction + json.dumps(state.values)
    for mass in (plan.instance.load_mass, *plan.instance.masses):
        assert f"{mass}" not in visible and f"{mass:.3f}" not in visible


def test_the_ledger_ends_the_attempt_and_what_stands_is_scored(tmp_path):
    task = small("tabletop-cantilever", charged_steps=30)
    report, summary = run_attempt(task, still(100), public_salt(), tmp_path)
    assert report.status == "scored" and report.ledger.ok and report.ledger.spent == 30
    assert "budget" in summary["ended"]
    record = msgspec.json.decode((tmp_path / ATTEMPT).read_bytes(), type=AttemptRecord)
    assert len([e for e in record.events if e]) == 30  # no row ran that the ledger did not pay
    assert report.reward == pytest.approx(0.0)  # nothing built past the edge


def test_the_wall_time_ends_the_attempt_before_a_row_is_charged(tmp_path):
    report, summary = run_attempt(small("tabletop-balance", wall_seconds=1e-6), still(5), public_salt(), tmp_path)
    assert "wall time" in summary["ended"] and report.ledger.spent == 0 and report.status == "scored"


def test_hidden_com_holds_the_hand_past_a_boxs_steps_and_still_takes_the_estimate(tmp_path):
    task = load_task("tabletop-com")
    task = msgspec.structs.replace(task, tabletop=msgspec.structs.replace(task.tabletop, box_steps=5))

    def participant(robot):
        robot.step([[0.0, 0.0, -0.01, 0, 0, 0, 0, 0]] * 8)  # 3 of these are past the box's steps: held
        z_after = robot.state()["hand"][2]
        robot.step([[0, 0, 0, 0, 0, 1, 0.001, -0.002]] * 3)  # one estimate per box
        return {"z": z_after}

    report, summary = run_attempt(task, participant, public_salt(), tmp_path)
    assert summary["z"] == pytest.approx(0.35 - 0.05)
    record = msgspec.json.decode((tmp_path / ATTEMPT).read_bytes(), type=AttemptRecord)
    assert [e[0] for e in record.events if e][:8] == [1.0] * 5 + [0.0] * 3
    assert record.estimates == [[0.001, -0.002]] * 3 and len(record.box_com) == 3
    assert report.status == "scored" and replay_run(tmp_path) == []


def test_replay_names_an_edited_record_or_ledger(tmp_path):
    task = load_task("tabletop-balance")
    run_attempt(task, still(10), public_salt(), tmp_path)
    assert replay_run(tmp_path) == []
    original = (tmp_path / ATTEMPT).read_bytes()
    record = msgspec.json.decode(original, type=AttemptRecord)
    beam = build_model(layouts(record.plan)[0]).joint("beam").qposadr[0]
    record.settled.qpos[beam] += 1e-6  # the beam's recorded final angle nudged
    (tmp_path / ATTEMPT).write_bytes(msgspec.json.encode(record))
    diffs = replay_run(tmp_path)
    assert any("settled" in d for d in diffs) and any("ledger" in d for d in diffs)  # the seal binds the record
    (tmp_path / ATTEMPT).write_bytes(original)
    rows = decode_rows((tmp_path / "ledger.jsonl").read_bytes())
    rows[1] = msgspec.structs.replace(rows[1], cost=rows[1].cost + 1)
    (tmp_path / "ledger.jsonl").write_bytes(encode_rows(rows))
    assert any("hash does not match" in d for d in replay_run(tmp_path))


@pytest.mark.exhaustive
@pytest.mark.parametrize("salt", SALTS[:2], ids=lambda s: s.label)
def test_full_tower_reaches_the_optimum(tmp_path, salt):
    task = load_task("tabletop-tower")
    report, _ = run_attempt(task, participants.tower, salt, tmp_path)
    assert report.reward >= 0.995 and replay_run(tmp_path) == []


@pytest.mark.exhaustive
@pytest.mark.parametrize("salt", SALTS, ids=lambda s: s.label)
def test_cantilever_at_nine_tenths_of_the_harmonic_stack(tmp_path, salt):
    report, _ = run_attempt(load_task("tabletop-cantilever"), participants.cantilever, salt, tmp_path)
    assert report.reward == pytest.approx(0.9, abs=0.01)


@pytest.mark.exhaustive
@pytest.mark.parametrize("salt", SALTS, ids=lambda s: s.label)
def test_balance_by_the_pointer(tmp_path, salt):
    report, _ = run_attempt(load_task("tabletop-balance"), participants.balance, salt, tmp_path)
    assert report.reward == 1.0


@pytest.mark.exhaustive
def test_probing_beats_the_random_guesser_by_half(tmp_path):
    """Pinch-and-tilt probing over three hidden instances (nine boxes) against the random guesser's stated
    expectation: a margin of at least 0.5 of reward."""
    task = load_task("tabletop-com")
    expected, _ = scoring.random_guess_expectation(task.tabletop)
    rewards = [run_attempt(task, participants.probe_com, salt, tmp_path / salt.label)[0].reward for salt in SALTS]
    assert sum(rewards) / len(rewards) >= expected + 0.5


@pytest.mark.exhaustive
def test_demo_end_to_end(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "roboswe.cli", "rle", "demo", "tabletop", "--out", str(out)],
                          capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("reproduced bit for bit") == 4 and "family 03 Tabletop Physical Reasoning" in proc.stdout
    verify = subprocess.run([sys.executable, "-m", "roboswe.cli", "verify", str(out / "tabletop-com")], capture_output=True,
                            text=True, check=False)
    assert verify.returncode == 0, verify.stderr


SCRIPT = """
import robot
print("START", round(float(robot.state()["hand"][2]), 4))
robot.step_many([[0.0, 0.0, -0.01, 0.0, 0.0]] * 10)
print("DOWN", round(float(robot.state()["hand"][2]), 4))
robot.reset()
print("RESET", round(float(robot.state()["hand"][2]), 4), int(robot.state()["budget_left"][0]))
"""


@pytest.mark.exhaustive
def test_a_sandboxed_script_attempts_through_the_bridge_door(tmp_path):
    """A participant's script in the real trial sandbox drives the hidden scene with `import robot`; its rows and
    its reset go through the door to the development simulator's ledger, and the attempt replays."""
    from roboswe.sandbox.images import ImageError, load_image

    from roboswe.rle.tabletop.runner import sandboxed

    from ..conftest import require_in_ci

    try:
        image = load_image()
    except ImageError as e:
        require_in_ci(f"{e} (setup.sh builds it)")
    task = load_task("tabletop-tower")
    report, summary = run_attempt(task, sandboxed(SCRIPT, image=image), public_salt(), tmp_path)
    assert summary["exit"] == 0, summary
    assert summary["stdout"].split() == ["START", "0.35", "DOWN", "0.25", "RESET", "0.35", str(task.budget.charged_steps - 11)]
    rows = decode_rows((tmp_path / "ledger.jsonl").read_bytes())
    assert [r.operation for r in rows if r.kind == "charge"] == ["step", "reset"] and report.ledger.spent == 11
    assert report.status == "scored" and replay_run(tmp_path) == []
