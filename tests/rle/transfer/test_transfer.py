"""Harness transfer end to end on the kit (RoboCasa, placeholder assets): the scripted developer writes and seals
its harness on the practice composites, fresh agents use it on the held-out composite in hidden kitchens, control
agents attempt the same kitchens with an empty workspace, the verifier scores the stage records.

One case in the default run: `roboswe rle demo transfer --agents 1 --no-practice` (one fresh agent and one
control agent, the developer observing the practice tasks without practising), so it stays short. The whole demo (five and five)
and ``roboswe verify``'s replay of every trial are exhaustive.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")  # before MuJoCo is imported: the agents read depth

pytestmark = pytest.mark.skipif(importlib.util.find_spec("robocasa") is None, reason="robocasa is not installed here")

TASK = "transfer-kit-countertodrawer-close"


def _index_entry(run_dir, task_id):
    index = json.loads(subprocess.run([sys.executable, "-m", "roboswe.cli", "index", str(run_dir), "--json"],
                                      capture_output=True, text=True, check=True).stdout)
    (entry,) = [e for e in index["tasks"] if e["task"] == task_id]
    return index, entry


def _check_fresh_agents_saw_nothing_of_the_development(run_dir, agents):
    """Nothing the developer was told, nor the hidden kitchens' seeds, in what any fresh agent was told."""
    from roboswe.rle import rundir
    from roboswe.rle.transfer.runner import AGENTS, DEVELOPER_MESSAGES, read_messages

    report = rundir.read_report(run_dir)
    developer = read_messages(run_dir / DEVELOPER_MESSAGES)
    assert "Practice tasks" in developer[0]  # the developer's brief: the development guide
    for agent in agents:
        seen = read_messages(run_dir / AGENTS / f"{agent}.messages.jsonl")
        text = "\n".join(seen)
        assert seen and not any(m in text for m in developer), agent
        for marker in ("Practice tasks", "practice_task", "development budget", "developer's notes", "budget_left",
                       report.plan_commitment, *map(str, report.revealed_seeds)):
            assert marker not in text, (agent, marker)


def _demo(run_dir, *extra):
    return subprocess.run([sys.executable, "-m", "roboswe.cli", "rle", "demo", "transfer", "--out", str(run_dir), *extra],
                          capture_output=True, text=True, check=False)


def test_a_fresh_agent_with_the_sealed_harness_beats_the_control_and_the_reward_is_the_stage_records(tmp_path):
    from roboswe.rle import rundir
    from roboswe.rle.ledger import decode_rows, verify_chain
    from roboswe.rle.seeds import public_salt
    from roboswe.rle.transfer.rules import trial_score, transfer_reward
    from roboswe.rle.transfer.trial import best_vector
    from roboswe.rle.transfer.verify import read_record, verify_run

    run = tmp_path / "run"
    demo = _demo(run, "--agents", "1", "--no-practice")
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "control" in demo.stdout and "placeholder" in demo.stdout and "RLE Index" in demo.stdout
    report = rundir.read_report(run)
    assert report.status == "scored" and report.placeholder, report.gates
    sealed = sorted(f.path for f in rundir.read_sealed_record(run).files)
    assert sealed == ["agent_harness/MANUAL.md", "agent_harness/drawer.py", "agent_harness/geometry.py",
                      "agent_harness/pickplace.py"]  # the developer's notes.md stayed behind
    # the reward from the recorded stage records, by the formula
    record = read_record(run)
    by_agent = {t.agent: t for t in record.trials}
    assert set(by_agent) == {"agent_1", "control_1"} and record.retain == "none"
    scores = {a: trial_score(t.reset, best_vector(t), t.success) for a, t in by_agent.items()}
    parts = {c.name: c.value for c in report.components}
    assert report.reward == transfer_reward([scores["agent_1"]], 1) == parts["agent_1"]
    assert parts["control"] == parts["control_1"] == scores["control_1"]
    assert scores["agent_1"] > scores["control_1"], demo.stdout
    assert by_agent["agent_1"].handoff_digest == report.artifact_digest and by_agent["control_1"].handoff_digest == ""
    spent = verify_chain(decode_rows((run / rundir.LEDGER).read_bytes())).spent
    assert parts["development_steps"] == spent == 2  # the two resets between practice tasks, nothing else charged
    _check_fresh_agents_saw_nothing_of_the_development(run, ["agent_1", "control_1"])
    index, entry = _index_entry(run, report.task)
    assert entry["reward"] == report.reward and entry["components"]["control"] == parts["control"] and index["placeholder"]
    # an edited ledger row gates the same evidence
    rows = (run / rundir.LEDGER).read_bytes().splitlines()
    first = json.loads(rows[0])
    first["cost"] += 1
    (run / rundir.LEDGER).write_bytes(b"\n".join([json.dumps(first).encode(), *rows[1:]]) + b"\n")
    gated = verify_run(run, public_salt())
    assert gated.status == "gated" and gated.reward == 0.0 and gated.gates[0].name == "ledger"


@pytest.mark.exhaustive
def test_the_demo_five_fresh_agents_and_five_controls_and_verify_replays_every_trial(tmp_path):
    run = tmp_path / "run"
    demo = _demo(run)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "control" in demo.stdout and "RLE Index" in demo.stdout and "placeholder" in demo.stdout
    from roboswe.rle import rundir

    report = rundir.read_report(run)
    parts = {c.name: c.value for c in report.components}
    assert report.reward > parts["control"]
    _check_fresh_agents_saw_nothing_of_the_development(run, [f"{a}_{k}" for a in ("agent", "control") for k in range(1, 6)])
    again = subprocess.run([sys.executable, "-m", "roboswe.cli", "verify", str(run)], capture_output=True, text=True,
                           check=False)
    assert again.returncode == 0 and "reproduced" in again.stdout, again.stderr[-3000:]


@pytest.mark.exhaustive
def test_a_trial_refuses_reset_and_oversized_batches_and_ends_at_its_action_cap():
    from roboswe.rle.manifest import load_task
    from roboswe.rle.seeds import public_salt
    from roboswe.rle.transfer.plan import hidden_plan
    from roboswe.rle.transfer.runner import Refused, TransferRobot
    from roboswe.rle.transfer.trial import SPEC_TASK_ID, TransferTrialSim

    task = load_task(TASK)
    import msgspec

    task = msgspec.structs.replace(task, transfer=msgspec.structs.replace(task.transfer, agent_actions=30))
    sim = TransferTrialSim(task, hidden_plan(task, public_salt()).kitchens[0], agent="agent_1", arm="harness",
                           handoff_digest="")
    robot = TransferRobot(sim)
    spec = robot.spec()
    assert spec.task_id == SPEC_TASK_ID and "stages" not in spec.state_keys and "practice_task" not in spec.state_keys
    hold = [0.0] * spec.action_dim
    for refused, code in ((robot.reset, "reset"), (lambda: robot.step_many([hold] * 201), "invalid_action"),
                          (lambda: robot.step_many([hold] * 31), "limit_reached")):
        with pytest.raises(Refused) as e:
            refused()
        assert e.value.code == code
    robot.step_many([hold] * 30)
    with pytest.raises(Refused):
        robot.step_many([hold])
    record = sim.close()
    assert record.ended == "actions" and len(record.rows) == 30 and record.reset == (False, True, False)
