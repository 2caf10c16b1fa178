"""The run database: round trips, append-only, durability receipts, refusals."""

from __future__ import annotations

import hashlib
import sqlite3
import time

import msgspec
import pytest
from roboswe.protocol.recorder import (
    ArtifactRecord,
    BlobRecord,
    CheckpointRecord,
    ControlTrace,
    EventRecord,
    MessageRecord,
    OperationRecord,
    SlideRecord,
    TrialStarted,
    VerificationRecord,
)

from roboswe.records.judgements import JudgementRecord
from roboswe.records.reader import RunReader
from roboswe.records.schema import DB_NAME, MAPPINGS
from roboswe.records.store import (
    RecordConflict,
    RunStore,
    SchemaMismatch,
    StoreClosed,
    StoreError,
)

from .conftest import run_records, trial_records


def _full_trial(series_id: str) -> list:
    trial_id = f"{series_id}/t1a0"
    now = time.time()
    manifest = b'{"files":[]}'
    return [
        *trial_records(series_id, 1, "success"),
        MessageRecord(message_id="m1", trial_id=trial_id, provider="python", request=b"\x00req", response=b"resp",
                      requested_at=now, responded_at=now + 0.2, latency=0.2, usage={"input_tokens": 12}),
        OperationRecord(trial_id=trial_id, seq=0, operation="wait", arguments={"steps": 5},
                        feedback={"steps_used": 5}, step_start=0, step_end=5, started_at=now, ended_at=now + 0.1,
                        message_id="m1"),
        ControlTrace(trial_id=trial_id, seq=0, step_start=0, step_end=2, layout={"qpos": 2}, data=bytes(32)),
        SlideRecord(trial_id=trial_id, seq=0, at=now, removed=["m0"], before_units=10, after_units=4, method="proxy"),
        EventRecord(run_id="r1", event="refused", at=now, trial_id=trial_id, data={"call": "reset"}),
        BlobRecord(sha256="0" * 64, size=3, stored_at=now),
        CheckpointRecord(checkpoint_id="c1", trial_id=trial_id, label="trial_start", manifest=manifest,
                         manifest_sha256=hashlib.sha256(manifest).hexdigest(), files=0, total_bytes=0,
                         created_at=now),
        VerificationRecord(verification_id="v1", trial_id=trial_id, verdict="verified", outcome_reproduced=True,
                           detail={"execs": []}, started_at=now, ended_at=now + 2),
        ArtifactRecord(artifact_id="a1", run_id="r1", trial_id=trial_id, artifact="video", camera="agentview",
                       path="videos/x.mp4", sha256="1" * 64, size=10, created_at=now),
        JudgementRecord(judgement_id="j1", run_id="r1", trial_id=trial_id, judge="scripted", judge_sha256="2" * 64,
                        provider="python", model="judge", settings={}, conditions_sha256="3" * 64,
                        prompt_sha256="4" * 64, views=[], request=b"{}", request_sha256="5" * 64, attempts=[],
                        response=None, status="error", error="no answer", verdicts=[], usage={}, cost={},
                        started_at=now, ended_at=now),
    ]


def test_every_record_type_round_trips(store, tmp_path):
    records = [*run_records(), *_full_trial("r1/lift")]
    assert {type(r) for r in records} == set(MAPPINGS)  # the test covers every table
    store.put_durable(*records)
    with RunReader(tmp_path / "run") as reader:
        assert reader.runs() == [records[0]]
        assert reader.series("r1") == [records[1]]
        (view,) = reader.trials("r1/lift")
        assert view.start == records[2] and view.end == records[3]
        assert view.verification.verdict == "verified"
        message = reader.message("m1")
        assert message.request == b"\x00req"
        assert message.request_sha256 == hashlib.sha256(b"\x00req").hexdigest()
        assert message.response_sha256 == hashlib.sha256(b"resp").hexdigest()
        assert reader.operations(view.trial_id) == [records[5]]
        assert reader.control_traces(view.trial_id) == [records[6]]
        assert reader.slides(view.trial_id) == [records[7]]
        assert [e for _, e in reader.events(trial_id=view.trial_id)] == [records[8]]
        assert reader.blob_stored("0" * 64)
        assert reader.checkpoints(view.trial_id) == [records[10]]
        assert reader.artifacts(trial_id=view.trial_id) == [records[12]]
        assert reader.judgements(view.trial_id) == [records[13]]


def test_tables_refuse_update_and_delete(store, tmp_path):
    store.put_durable(*run_records())
    conn = sqlite3.connect(tmp_path / "run" / DB_NAME, isolation_level=None)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE series SET mode = 'none'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM runs")
    conn.close()


def test_identical_retry_is_accepted_but_different_content_conflicts(store):
    records = run_records()
    store.put_durable(*records)
    store.put_durable(*records)  # a client retrying after a lost receipt
    assert store.statistics().duplicates == 2
    changed = msgspec.structs.replace(records[1], mode="none")
    with pytest.raises(StoreError, match="already written with different content"):
        store.put_durable(changed)
    assert issubclass(RecordConflict, StoreError)


def test_durable_write_reports_a_missing_parent(store):
    orphan = TrialStarted(trial_id="x", series_id="no-such-series", index=1, fingerprint="f", started_at=0.0)
    with pytest.raises(StoreError, match="FOREIGN KEY"):
        store.put_durable(orphan)


def test_message_with_wrong_digest_is_refused(store):
    store.put_durable(*run_records(), *trial_records("r1/lift", 1, None))
    bad = MessageRecord(message_id="m", trial_id="r1/lift/t1a0", provider="python", request=b"abc",
                        request_sha256="0" * 64, requested_at=0.0)
    with pytest.raises(StoreError, match="does not match its bytes"):
        store.put_durable(bad)


def test_fire_and_forget_puts_do_not_wait_for_disk(store, tmp_path):
    store.put_durable(*run_records(), *trial_records("r1/lift", 1, None))
    now = time.time()
    started = time.perf_counter()
    for i in range(2000):
        store.put(EventRecord(run_id="r1", event="tick", at=now, trial_id="r1/lift/t1a0", data={"i": i}))
    put_seconds = time.perf_counter() - started
    assert put_seconds / 2000 < 0.0005, f"put took {put_seconds / 2000 * 1e6:.0f} us per record"
    store.flush()
    stats = store.statistics()
    assert stats.written == 2003 and stats.failed == 0 and stats.queue_depth == 0
    assert stats.batches < 200  # batched, not one transaction per record
    with RunReader(tmp_path / "run") as reader:
        assert [e.data["i"] for _, e in reader.events()] == list(range(2000))


def test_interrupted_trial_is_linked_to_its_rerun(store, tmp_path):
    store.put_durable(*run_records(), *trial_records("r1/lift", 1, "failure"),
                      *trial_records("r1/lift", 2, None))
    with RunReader(tmp_path / "run") as reader:
        (interrupted,) = reader.interrupted_trials("r1")
        before = {t: reader.row_digests(t) for t in ("trials", "trial_ends")}
    assert interrupted.trial_id == "r1/lift/t2a0"
    # resume: close the original as incomplete, re-run it as attempt 1 linked to it
    end = trial_records("r1/lift", 2, "incomplete")[1]
    store.put_durable(msgspec.structs.replace(end, reason="interrupted"),
                      *trial_records("r1/lift", 2, "success", attempt=1, recovers=interrupted.trial_id))
    with RunReader(tmp_path / "run") as reader:
        views = reader.trials("r1/lift")
        assert reader.interrupted_trials("r1") == []
        after = {t: reader.row_digests(t) for t in ("trials", "trial_ends")}
    for table, rows in before.items():  # resume appended; earlier rows are byte-for-byte the same
        assert {k: after[table][k] for k in rows} == rows and len(after[table]) > len(rows)
    assert [(v.start.index, v.start.attempt, v.outcome) for v in views] == [
        (1, 0, "failure"), (2, 0, "incomplete"), (2, 1, "success")]
    assert views[1].recovered_by == "r1/lift/t2a1" and views[1].end.reason == "interrupted"


def test_closed_store_refuses_records(tmp_path):
    store = RunStore.open(tmp_path / "run")
    store.close()
    with pytest.raises(StoreClosed, match="closed"):
        store.put(run_records()[0])


def test_other_schema_version_is_refused(tmp_path):
    RunStore.open(tmp_path / "run").close()
    conn = sqlite3.connect(tmp_path / "run" / DB_NAME)
    conn.execute("INSERT INTO schema_version VALUES (99, 0)")
    conn.commit()
    with pytest.raises(SchemaMismatch, match="schema version 99"):
        RunStore.open(tmp_path / "run")
    with pytest.raises(SchemaMismatch):
        RunReader(tmp_path / "run")


def test_a_bad_fire_and_forget_record_does_not_stop_the_writer(store, tmp_path):
    store.put(object())  # not a record
    store.put_durable(*run_records())
    stats = store.statistics()
    assert stats.failed == 1 and stats.written == 2
    with pytest.raises(StoreError, match="not a record type"):
        store.put_durable(object())


def test_control_traces_pack_and_unpack_per_step_states(store, tmp_path):
    import numpy as np
    from roboswe.sim.physics_state import control_trace, trace_arrays

    qpos = np.arange(30, dtype=float).reshape(10, 3)
    qvel = np.linspace(0, 1, 20).reshape(10, 2)
    trace = control_trace("r1/lift/t1a0", 0, 100, {"qpos": qpos, "qvel": qvel})
    assert (trace.step_start, trace.step_end, trace.layout) == (100, 110, {"qpos": 3, "qvel": 2})
    store.put_durable(*run_records(), *trial_records("r1/lift", 1, None), trace)
    with RunReader(tmp_path / "run") as reader:
        (back,) = reader.control_traces("r1/lift/t1a0")
    arrays = trace_arrays(back)
    assert np.array_equal(arrays["qpos"], qpos) and np.array_equal(arrays["qvel"], qvel)
    with pytest.raises(ValueError, match="different step counts"):
        control_trace("t", 0, 0, {"a": qpos, "b": qvel[:5]})
