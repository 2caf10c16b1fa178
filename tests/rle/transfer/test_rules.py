"""Family 02's rules and verifier on recorded evidence (no simulator): the trial score and reward from stage
records as RLE-Bench defines them, the gates (ledger, handoff, stages, plan), and the fresh workspace."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from roboswe.rle import rundir
from roboswe.rle.fresh import restore_sealed
from roboswe.rle.ledger import Ledger, encode_rows
from roboswe.rle.manifest import load_task
from roboswe.rle.seal import SealError, seal_directory
from roboswe.rle.seeds import public_salt
from roboswe.rle.transfer.plan import hidden_plan
from roboswe.rle.transfer.rules import trial_score, transfer_reward
from roboswe.rle.transfer.trial import TRANSFER, StageChange, StageRecord, TransferRecord, best_vector
from roboswe.rle.transfer.verify import verify_run

TASK = "transfer-kit-countertodrawer-close"
T, F = True, False


def test_the_manifest_pins_rle_benchs_contract_numbers_and_the_kit_composites():
    task = load_task(TASK)
    rules = task.transfer
    assert task.budget.charged_steps == 75_000 and task.placeholder
    assert (rules.agents, rules.agent_actions, rules.agent_seconds, rules.batch_max) == (5, 5000, 3600, 200)
    assert len(rules.practice) == 3 and rules.heldout.name not in {c.name for c in rules.practice}
    assert rules.heldout.stages == ("obj_in_drawer", "gripper_far", "drawer_closed")
    assert task.artifact.entry_file == "agent_harness/MANUAL.md"


@pytest.mark.parametrize(("reset", "best", "success", "expected"), [
    ((F, T, F), (T, T, T), True, 1.0),
    ((F, T, F), (T, T, F), False, 0.5),  # placed and released, the drawer left open
    ((F, T, F), (F, T, F), False, 0.0),  # what held at reset earns nothing
    ((F, F, F), (T, F, F), False, 1 / 3),
    ((T, T, T), (T, T, T), False, 0.0),  # nothing left to earn and no confirmed success
])
def test_a_trial_scores_its_best_vector_above_the_reset_vector(reset, best, success, expected):
    assert trial_score(reset, best, success) == pytest.approx(expected)


def test_scores_refuse_vectors_that_cannot_be_and_missing_trials_count_zero():
    with pytest.raises(ValueError):
        trial_score((F, T), (T, T, T), False)
    with pytest.raises(ValueError):
        trial_score((T, T, F), (T, F, F), False)
    assert transfer_reward([1.0, 0.5, None], 5) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        transfer_reward([0.5] * 6, 5)


def test_the_best_vector_is_one_instant_never_stages_from_different_times():
    record = StageRecord(agent="agent_1", arm="harness", kitchen=0, stages=("a", "b", "c"), ended="finish_trial",
                         reset=(F, T, F), changes=(StageChange(step=3, stages=(T, F, F)), StageChange(step=9, stages=(F, F, T)),
                                                   StageChange(step=12, stages=(T, T, F))))
    assert best_vector(record) == (T, T, F)  # a and c held at different times never make (T, T, T)


# --- the verifier on a recorded run ---------------------------------------------------------------


def _trial(agent, arm, kitchen, changes, handoff, success=False):
    return StageRecord(agent=agent, arm=arm, kitchen=kitchen, stages=("obj_in_drawer", "gripper_far", "drawer_closed"),
                       ended="finish_trial", reset=(F, T, F),
                       changes=tuple(StageChange(step=s, stages=v) for s, v in changes), success=success,
                       handoff_digest=handoff, rows=((0.0,) * 12,) * 3)


def _recorded_run(run_dir: Path, *, trials=None, spent: int = 40) -> Path:
    task = load_task(TASK)
    workspace = run_dir.parent / "workspace"
    (workspace / "agent_harness").mkdir(parents=True)
    (workspace / "agent_harness" / "MANUAL.md").write_text("# the harness\n")
    (workspace / "agent_harness" / "tools.py").write_text("X = 1\n")
    (workspace / "notes.md").write_text("developer's scratch\n")
    sealed, contents = seal_directory(workspace, task.artifact)
    ledger = Ledger(task.budget.charged_steps)
    ledger.charge("step", spent)
    ledger.confirm("ok")
    head = ledger.seal(sealed.digest)
    rundir.write_submission(run_dir, task, msgspec.structs.replace(sealed, ledger_head=head), contents,
                            encode_rows(ledger.rows))
    d = sealed.digest
    if trials is None:
        trials = [_trial("agent_1", "harness", 0, [(5, (F, F, F)), (50, (T, T, F)), (90, (T, T, T))], d, success=True),
                  _trial("agent_2", "harness", 1, [(5, (F, F, F)), (50, (T, T, F))], d),
                  _trial("agent_3", "harness", 2, [(5, (F, F, F))], d),
                  _trial("agent_4", "harness", 3, [(7, (T, F, F)), (8, (F, F, T))], d),
                  # agent_5 never attempted: 0
                  _trial("control_1", "control", 0, [(5, (F, F, F)), (20, (F, T, F))], ""),
                  _trial("control_2", "control", 1, [(5, (T, T, F))], "")]
    plan = hidden_plan(task, public_salt())
    record = TransferRecord(task=task.id, heldout=task.transfer.heldout.name, plan_commitment=plan.commitment,
                            trials=tuple(trials))
    (run_dir / TRANSFER).write_bytes(msgspec.json.encode(record))
    return run_dir


def test_the_reward_is_the_mean_of_the_recorded_trial_scores_and_the_control_stands_beside_it(tmp_path):
    run = _recorded_run(tmp_path / "run")
    report = verify_run(run, public_salt())
    parts = {c.name: c.value for c in report.components}
    assert report.status == "scored" and report.placeholder and report.ledger.ok
    scores = [1.0, 0.5, 0.0, 0.0, 0.0]  # agent_4's stages at two instants never count together
    assert [parts[f"agent_{k}"] for k in range(1, 6)] == scores
    assert report.reward == pytest.approx(sum(scores) / 5)
    assert parts["control"] == pytest.approx((0.0 + 0.5) / 5) and parts["control_2"] == 0.5
    assert parts["success_rate"] == 0.2 and parts["control_success_rate"] == 0.0
    assert parts["development_steps"] == 40 and parts["budget"] == 75_000


def test_a_tampered_or_missing_ledger_gates_the_report(tmp_path):
    run = _recorded_run(tmp_path / "run")
    rows = (run / rundir.LEDGER).read_bytes().splitlines()
    first = json.loads(rows[0])
    first["cost"] = 1  # fewer development steps than were charged
    (run / rundir.LEDGER).write_bytes(b"\n".join([json.dumps(first).encode(), *rows[1:]]) + b"\n")
    report = verify_run(run, public_salt())
    assert report.status == "gated" and report.reward == 0.0
    assert [g.name for g in report.gates] == ["ledger"] and "unverifiable" in report.gates[0].reason
    (run / rundir.LEDGER).unlink()
    again = verify_run(run, public_salt())
    assert again.status == "gated" and again.gates[0].reason == "ledger missing"


def test_a_ledger_over_the_cap_gates(tmp_path):
    run = _recorded_run(tmp_path / "run", spent=75_000)
    assert verify_run(run, public_salt()).status == "scored"  # at the cap is within it
    task = rundir.read_task(run)
    small = msgspec.structs.replace(task, budget=msgspec.structs.replace(task.budget, charged_steps=39))
    (run / rundir.TASK).write_bytes(msgspec.json.encode(small))
    report = verify_run(run, public_salt())
    assert report.status == "gated" and report.gates[0].name == "ledger"


def test_a_harness_agent_without_the_sealed_harness_or_a_control_with_one_gates(tmp_path):
    run = _recorded_run(tmp_path / "a" / "run", trials=[_trial("agent_1", "harness", 0, [(5, (T, T, T))], "0" * 64, True)])
    report = verify_run(run, public_salt())
    assert report.status == "gated" and report.gates[0].name == "handoff"
    sealed = rundir.read_sealed_record(run).digest
    run = _recorded_run(tmp_path / "b" / "run", trials=[_trial("control_1", "control", 0, [], sealed)])
    assert verify_run(run, public_salt()).gates[0].name == "handoff"


def test_a_success_its_stage_changes_do_not_show_or_another_plan_gates(tmp_path):
    run = _recorded_run(tmp_path / "a" / "run", trials=[_trial("agent_1", "harness", 0, [(5, (T, T, F))], "", True)])
    sealed = rundir.read_sealed_record(run).digest
    run = _recorded_run(tmp_path / "b" / "run", trials=[_trial("agent_1", "harness", 0, [(5, (T, T, F))], sealed, True)])
    report = verify_run(run, public_salt())
    assert report.status == "gated" and report.gates[0].name == "stages"
    from roboswe.rle.seeds import Salt

    other = verify_run(_recorded_run(tmp_path / "c" / "run"), Salt(secret=b"another salt, 16+ bytes", label="x"))
    assert other.status == "gated" and other.gates[0].name == "plan"


# --- fresh participants ---------------------------------------------------------------------------


def test_a_fresh_workspace_gets_only_the_sealed_copy_and_a_non_empty_one_is_refused(tmp_path):
    run = _recorded_run(tmp_path / "run")
    sealed = rundir.read_sealed_record(run)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert restore_sealed(run, workspace) == sealed.digest
    files = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file())
    assert files == ["agent_harness/MANUAL.md", "agent_harness/tools.py"]  # the developer's notes.md stayed behind
    assert (workspace / "agent_harness").stat().st_mode & 0o755 == 0o755  # the sandbox user traverses it
    with pytest.raises(FileExistsError, match="not empty"):
        restore_sealed(run, workspace)


def test_an_attempt_name_is_its_arm_and_kitchen_and_nothing_else_is_one():
    from roboswe.rle.transfer.runner import attempt_names
    from roboswe.rle.transfer.trial import attempt_kitchen

    task = load_task(TASK)
    names = attempt_names(task)
    assert names == [f"agent_{k}" for k in range(1, 6)] + [f"control_{k}" for k in range(1, 6)]
    assert [attempt_kitchen(task, n) for n in ("agent_1", "control_5")] == [("harness", 0), ("control", 4)]
    for bad in ("agent_0", "agent_6", "developer_1", "control_x", "agent"):
        with pytest.raises(ValueError, match="no attempt"):
            attempt_kitchen(task, bad)


def test_a_changed_sealed_copy_is_not_restored(tmp_path):
    run = _recorded_run(tmp_path / "run")
    manual = run / rundir.ARTIFACT / "agent_harness" / "MANUAL.md"
    manual.chmod(0o644)
    manual.write_text("# another harness\n")
    (tmp_path / "ws").mkdir()
    with pytest.raises(SealError):
        restore_sealed(run, tmp_path / "ws")


def test_a_stage_record_no_trial_could_write_gates_rather_than_crashes(tmp_path):
    bad = StageRecord(agent="agent_1", arm="harness", kitchen=0, stages=("obj_in_drawer", "gripper_far", "drawer_closed"),
                      ended="finish_trial", reset=(F, T), changes=(), handoff_digest="")
    run = _recorded_run(tmp_path / "run", trials=[bad])
    (run / rundir.LEDGER).unlink()  # gated first by the ledger: the trial is never checked, yet scores must not crash
    report = verify_run(run, public_salt())
    assert report.status == "gated" and {g.name for g in report.gates} == {"ledger", "stages"}
