"""Ledger chain, seal, seeds, report evidence and the index: pure code, no sandbox."""

from __future__ import annotations

import os
import socket

import msgspec
import pytest

from roboswe.rle.index import PoolingError, render_index, rle_index
from roboswe.rle.ledger import (
    BudgetExhausted,
    Ledger,
    LedgerRow,
    row_hash,
    verify_chain,
)
from roboswe.rle.manifest import WORKFLOWS, load_task
from roboswe.rle.report import (
    EvidenceError,
    Gate,
    RewardReport,
    decode_report,
    encode_report,
)
from roboswe.rle.seal import SealError, read_sealed, seal_directory, write_sealed
from roboswe.rle.seeds import (
    PUBLIC_LABEL,
    hidden_seeds,
    load_salt,
    protocol_id,
    public_salt,
)


def _ledger() -> Ledger:
    ledger = Ledger(budget=10)
    for op in ("reset", "step", "step"):
        ledger.charge(op)
        ledger.confirm()
    ledger.seal("d" * 64)
    return ledger


def test_chain_verifies_and_names_the_first_forged_row():
    ledger = _ledger()
    assert verify_chain(ledger.rows, budget=10, head=ledger.head, artifact_digest="d" * 64).ok
    rows = list(ledger.rows)
    rows[2] = msgspec.structs.replace(rows[2], cost=0)  # a cheaper charge, hash left as it was
    verdict = verify_chain(rows)
    assert not verdict.ok and verdict.first_bad_row == 2 and "hash" in verdict.reason
    # re-hashing the forged row moves the break to the next row's link
    r = rows[2]
    rows[2] = msgspec.structs.replace(r, hash=row_hash(r.index, r.kind, r.operation, 0, r.detail, r.prev))
    verdict = verify_chain(rows)
    assert verdict.first_bad_row == 3 and "link" in verdict.reason
    # a dropped tail is caught by the recorded head, another artifact by the seal row
    assert not verify_chain(ledger.rows[:4], head=ledger.head).ok
    assert "sealed over this artifact" in verify_chain(ledger.rows, artifact_digest="e" * 64).reason


def test_ledger_charges_before_and_refuses_what_the_budget_cannot_pay():
    ledger = Ledger(budget=2)
    ledger.charge("step", 2)
    with pytest.raises(RuntimeError):
        ledger.charge("step")  # the open charge is not confirmed yet
    ledger.confirm()
    with pytest.raises(BudgetExhausted):
        ledger.charge("step")
    assert ledger.remaining == 0 and len(ledger.rows) == 2
    rows = [*ledger.rows, LedgerRow(index=2, kind="confirm", operation="step", cost=0, prev=ledger.head,
                                     hash=row_hash(2, "confirm", "step", 0, "", ledger.head))]
    assert "confirms no open charge" in verify_chain(rows).reason


def test_seal_takes_the_contract_and_refuses_hostile_entries(tmp_path):
    contract = load_task("pose-rgb").artifact
    ws = tmp_path / "ws"
    (ws / "lib").mkdir(parents=True)
    (ws / "estimator.py").write_text("def make_estimator(): pass\n")
    (ws / "lib" / "util.py").write_text("X = 1\n")
    (ws / "notes.md").write_text("not in the contract\n")
    (ws / "huge.npy").write_bytes(b"\0" * (contract.max_file_bytes + 1))
    os.symlink("/etc/passwd", ws / "link.py")
    os.symlink("loop.py", ws / "loop.py")  # a link to itself
    os.mkfifo(ws / "pipe.py")  # reading it would block forever
    (ws / "a" / "b" / "c" / "d").mkdir(parents=True)
    (ws / "a" / "b" / "c" / "d" / "deep.py").write_text("")
    (ws / "bad\udcffname.py".encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")).write_text("")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(ws / "sock.py"))
        sealed, contents = seal_directory(ws, contract)
    assert [f.path for f in sealed.files] == ["estimator.py", "lib/util.py"]
    reasons = {r.path: r.reason for r in sealed.refused}
    assert "over the contract" in reasons["huge.npy"]
    for name in ("link.py", "loop.py"):
        assert "symlink" in reasons[name]
    assert "fifo" in reasons["pipe.py"] and "socket" in reasons["sock.py"]
    assert any("UTF-8" in r for r in reasons.values())
    assert any("levels deep" in r for r in reasons.values())
    assert "notes.md" not in reasons  # outside the contract: left out, not refused
    copy = tmp_path / "sealed"
    write_sealed(copy, contents)
    assert read_sealed(copy, sealed) == contents
    os.chmod(copy, 0o755)
    os.chmod(copy / "estimator.py", 0o644)
    (copy / "estimator.py").write_text("def make_estimator(): return 1\n")
    with pytest.raises(SealError, match="estimator.py"):
        read_sealed(copy, sealed)


def test_seal_without_entry_point_says_so(tmp_path):
    sealed, _ = seal_directory(tmp_path, load_task("pose-rgb").artifact)
    assert not sealed.has_entry and sealed.refused[0].reason == "the entry point is missing"


def test_seeds_depend_on_salt_task_and_version(tmp_path):
    salt = public_salt()
    assert salt.label == PUBLIC_LABEL and salt.secret.hex() not in repr(salt)
    a = hidden_seeds(salt, "pose-rgb", "pose/1", 20)
    assert a == hidden_seeds(salt, "pose-rgb", "pose/1", 20) and len(set(a)) == 20
    assert a != hidden_seeds(salt, "pose-rgbd", "pose/1", 20) != hidden_seeds(salt, "pose-rgb", "pose/2", 20)
    private = tmp_path / "salt"
    private.write_text("f" * 64)
    other = load_salt(private)
    assert hidden_seeds(other, "pose-rgb", "pose/1", 20) != a
    assert protocol_id("pose/1", other.sha256, other.label) != protocol_id("pose/1", salt.sha256, salt.label)
    private.write_text("short")
    with pytest.raises(ValueError, match="at least 16"):
        load_salt(private)


def _report(task="pose-rgb", reward=0.5, status="scored", **kw) -> RewardReport:
    fields = {"task": task, "family": "06 Blind Planar Pose Estimation", "workflow": "Perception and Estimation",
              "protocol": "pose/1+public:x", "placeholder": False, "status": status, "reward": reward,
              "artifact_digest": "a", "image_digest": "i", "task_digest": "t", "salt_sha256": "s",
              "salt_label": "public", "plan_commitment": "c", **kw}
    return RewardReport(**fields)


def test_report_refuses_non_finite_or_out_of_range_evidence():
    for bad in (float("nan"), float("inf"), -0.1, 1.01):
        with pytest.raises(EvidenceError):
            _report(reward=bad)
    with pytest.raises(EvidenceError):
        _report(status="gated", reward=0.3, gates=(Gate(name="load", reason="x"),))
    data = encode_report(_report())
    assert decode_report(data) == _report()
    with pytest.raises(msgspec.ValidationError, match="outside"):
        decode_report(data.replace(b'"reward":0.5', b'"reward":7.0'))


def test_index_levels_counts_and_partial_overall():
    catalogue = {"pose-rgb": ("06", WORKFLOWS[2]), "pose-rgbd": ("06", WORKFLOWS[2]), "lift": ("01", WORKFLOWS[0])}
    index = rle_index([_report(reward=0.5, family="06"), _report(task="pose-rgbd", status="gated", reward=0.0,
                       gates=(Gate(name="load", reason="x"),), family="06")], catalogue)
    entries = {e.task: e for e in index.tasks}
    assert entries["pose-rgb"].score == 50.0 and entries["pose-rgbd"].score == 0.0 and entries["lift"].status == "missing"
    (fam01, fam06) = index.families
    assert (fam06.present, fam06.total, fam06.mean, fam06.lower_bound) == (2, 2, 25.0, 25.0)
    assert (fam01.present, fam01.mean, fam01.lower_bound) == (0, None, 0.0)
    pe = index.workflows[2]
    assert (pe.present, pe.total, pe.mean) == (1, 1, 25.0)
    assert index.overall is None and index.overall_level.present == 1
    assert index.overall_level.lower_bound == pytest.approx(25.0 / 4)
    assert "RLE Index: partial" in render_index(index)
    full = {f"t{i}": (f"f{i}", w) for i, w in enumerate(WORKFLOWS)}
    reports = [_report(task=t, family=f, workflow=w, reward=0.2 * (i + 1)) for i, (t, (f, w)) in enumerate(full.items())]
    assert rle_index(reports, full).overall == pytest.approx(50.0)


def test_index_groups_a_speedrun_tasks_harness_levels_under_one_task_and_pools_only_l1():
    """L1 and L3 of one kit subtask are one task with two levels: a family row per level over the same five
    subtasks, and only L1's feeds the workflow and overall (L3 reads privileged state)."""
    from roboswe.rle.index import task_level

    kit = "speedrun-kit-pickplacecountertodrawer"
    assert task_level(f"{kit}-l3") == (kit, "L3") and task_level(kit) == (kit, "L1")
    assert task_level("pose-rgb") == ("pose-rgb", None) and task_level("not-a-task-l3") == ("not-a-task-l3", None)
    family, workflow = "01 RoboCasa Speed-Run", WORKFLOWS[0]
    fields = {"family": family, "workflow": workflow, "placeholder": True, "protocol": "speedrun-kit/1+public:x"}
    index = rle_index([_report(task=kit, reward=0.6, **fields), _report(task=f"{kit}-l3", reward=1.0, **fields)])
    cells = {(e.task, e.harness_level): e.score for e in index.tasks if e.task.startswith("speedrun-kit-")}
    assert len(cells) == 10 and cells[(kit, "L1")] == 60.0 and cells[(kit, "L3")] == 100.0  # 5 subtasks x 2 levels
    assert not any(e.task.endswith("-l3") for e in index.tasks)
    rows = {lvl.harness_level: lvl for lvl in index.families if lvl.name == family}
    assert set(rows) == {"L1", "L3"} and (rows["L1"].present, rows["L1"].total, rows["L1"].mean) == (1, 5, 60.0)
    assert (rows["L3"].present, rows["L3"].total, rows["L3"].mean) == (1, 5, 100.0)
    interactive = next(w for w in index.workflows if w.name == workflow)
    assert interactive.mean == 60.0  # the L1 row only
    text = render_index(index)
    assert f"family {family} at L3 (shown, not pooled)" in text and f"{kit:<42}L3" in text


def test_index_refuses_to_pool_salts_versions_and_placeholders():
    with pytest.raises(PoolingError, match="salts"):
        rle_index([_report(), _report(task="pose-rgbd", salt_sha256="other")])
    with pytest.raises(PoolingError, match="placeholder"):
        rle_index([_report(), _report(task="pose-rgbd", placeholder=True)])
    with pytest.raises(PoolingError, match="protocol versions"):
        rle_index([_report(), _report(protocol="pose/2+public:x")])
