"""Read-only access to a run database RUN_DIR/run.sqlite, for reports, verify and the viewer.

Safe while the writer (``store.RunStore``) is running: the database is in WAL mode and
the reader opens it read-only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from roboswe.protocol.recorder import (
    ArtifactRecord,
    CheckpointRecord,
    ControlTrace,
    EventRecord,
    MessageRecord,
    OperationRecord,
    RunRecord,
    SeriesRecord,
    SlideRecord,
    TrialEnded,
    TrialStarted,
    VerificationRecord,
)
from roboswe.records.judgements import JudgementRecord
from roboswe.records.schema import (
    APPEND_ONLY,
    DB_NAME,
    MAPPINGS,
    SCHEMA_VERSION,
    json_encoder,
    sha256_hex,
)
from roboswe.records.store import SchemaMismatch, StoreError


class TrialView(msgspec.Struct, frozen=True, kw_only=True):
    """A trial attempt as recorded: its start, its end (None if interrupted), its latest replay."""

    start: TrialStarted
    end: TrialEnded | None
    verification: VerificationRecord | None
    recovered_by: str | None  # trial_id of the attempt that re-ran this one

    @property
    def trial_id(self) -> str:
        return self.start.trial_id

    @property
    def outcome(self) -> str | None:
        return self.end.outcome if self.end is not None else None


class RunReader:
    """Read-only access to a run database (safe while the writer is running)."""

    def __init__(self, path: str | Path):
        path = Path(path)
        if path.is_dir():
            path = path / DB_NAME
        if not path.exists():
            raise FileNotFoundError(f"{path}: no run database; pass a RUN_DIR written by `roboswe run`")
        self.path = path
        self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "schema_version" not in tables:
            raise StoreError(f"{path}: not a roboswe run database (no schema_version table)")
        (version,) = self._conn.execute("SELECT max(version) FROM schema_version").fetchone()
        if version != SCHEMA_VERSION:
            raise SchemaMismatch(f"{path}: schema version {version}, this roboswe reads version {SCHEMA_VERSION}")
        self._tables = tables  # an ADDED_TABLES table is missing from a database no writer has opened since

    def judgements(self, trial_id: str | None = None) -> list[JudgementRecord]:
        """The visual cross-check's records (of one trial), oldest first; none in a database without the table."""
        if "judgements" not in self._tables:
            return []
        if trial_id is None:
            return self._select(JudgementRecord, order="ended_at, judgement_id")
        return self._select(JudgementRecord, "trial_id = ?", (trial_id,), "ended_at, judgement_id")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RunReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _select(self, cls: type, where: str = "", params: Sequence[Any] = (), order: str = "") -> list[Any]:
        mapping = MAPPINGS[cls]
        sql = mapping.select_sql + (f" WHERE {where}" if where else "") + (f" ORDER BY {order}" if order else "")
        return [mapping.record(row) for row in self._conn.execute(sql, params)]

    def runs(self) -> list[RunRecord]:
        return self._select(RunRecord, order="created_at")

    def run(self, run_id: str | None = None) -> RunRecord:
        """The run with this id (or the only run); raises LookupError."""
        runs = [r for r in self.runs() if run_id is None or r.run_id == run_id]
        if len(runs) != 1:
            raise LookupError(f"{self.path}: expected one run{' ' + repr(run_id) if run_id else ''}, found {len(runs)}")
        return runs[0]

    def series(self, run_id: str | None = None) -> list[SeriesRecord]:
        if run_id is None:
            return self._select(SeriesRecord, order="created_at, series_id")
        return self._select(SeriesRecord, "run_id = ?", (run_id,), "created_at, series_id")

    def trials(self, series_id: str | None = None) -> list[TrialView]:
        """Every trial attempt (of one series), ordered by series, index, attempt."""
        where, params = ("series_id = ?", (series_id,)) if series_id is not None else ("", ())
        starts = self._select(TrialStarted, where, params, '"series_id", "index", attempt')
        ids = [s.trial_id for s in starts]
        ends = {e.trial_id: e for e in self._select_in(TrialEnded, ids)}
        latest: dict[str, VerificationRecord] = {}
        for v in self._select_in(VerificationRecord, ids, order="ended_at, verification_id"):
            latest[v.trial_id] = v
        recovered_by = {s.recovers: s.trial_id for s in starts if s.recovers}
        return [
            TrialView(start=s, end=ends.get(s.trial_id), verification=latest.get(s.trial_id),
                      recovered_by=recovered_by.get(s.trial_id))
            for s in starts
        ]

    def _select_in(self, cls: type, trial_ids: list[str], order: str = "") -> list[Any]:
        out: list[Any] = []
        for i in range(0, len(trial_ids), 500):
            chunk = trial_ids[i : i + 500]
            out += self._select(cls, f"trial_id IN ({','.join('?' * len(chunk))})", chunk, order)
        return out

    def trial(self, trial_id: str) -> TrialView:
        """One trial attempt; raises LookupError."""
        (start,) = self._select(TrialStarted, "trial_id = ?", (trial_id,)) or [None]
        if start is None:
            raise LookupError(f"{self.path}: no trial {trial_id!r}")
        return next(t for t in self.trials(start.series_id) if t.trial_id == trial_id)

    def interrupted_trials(self, run_id: str) -> list[TrialView]:
        """Started trials with no recorded end (the run stopped while they ran)."""
        out = []
        for s in self.series(run_id):
            out += [t for t in self.trials(s.series_id) if t.end is None]
        return out

    def operations(self, trial_id: str, *, after_seq: int = -1, limit: int = -1) -> list[OperationRecord]:
        return self._select(OperationRecord, "trial_id = ? AND seq > ?", (trial_id, after_seq), f"seq LIMIT {limit}")

    def messages(self, trial_id: str) -> list[MessageRecord]:
        return self._select(MessageRecord, "trial_id = ?", (trial_id,), "requested_at, message_id")

    def message(self, message_id: str) -> MessageRecord:
        found = self._select(MessageRecord, "message_id = ?", (message_id,))
        if not found:
            raise LookupError(f"{self.path}: no message {message_id!r}")
        return found[0]

    def provider_calls(self, run_id: str) -> Iterator[tuple[str, str, str, bytes | None, dict[str, Any], str]]:
        """(series_id, trial_id, provider, response, recorded usage, error) of every provider call of a run,
        without the requests (megabytes each for a hosted model: never needed for usage)."""
        rows = self._conn.execute(
            "SELECT t.series_id, m.trial_id, m.provider, m.response, m.usage, m.error FROM messages m "
            "JOIN trials t ON t.trial_id = m.trial_id JOIN series s ON s.series_id = t.series_id "
            "WHERE s.run_id = ? ORDER BY m.requested_at, m.message_id", (run_id,))
        for series_id, trial_id, provider, response, usage, error in rows:
            yield (series_id, trial_id, provider, bytes(response) if response is not None else None,
                   msgspec.json.decode(usage) if usage else {}, error)

    def control_traces(self, trial_id: str) -> list[ControlTrace]:
        return self._select(ControlTrace, "trial_id = ?", (trial_id,), "seq")

    def slides(self, trial_id: str) -> list[SlideRecord]:
        return self._select(SlideRecord, "trial_id = ?", (trial_id,), "seq")

    def events(self, *, trial_id: str | None = None, after_id: int = 0,
               event: str | None = None) -> list[tuple[int, EventRecord]]:
        """(event_id, event) pairs in write order, after ``after_id`` (for following), of one kind if given."""
        mapping = MAPPINGS[EventRecord]
        sql = f"SELECT event_id, {mapping.select_sql[len('SELECT '):]} WHERE event_id > ?"
        params: list[Any] = [after_id]
        if trial_id is not None:
            sql += " AND trial_id = ?"
            params.append(trial_id)
        if event is not None:
            sql += " AND event = ?"
            params.append(event)
        return [(row[0], mapping.record(row[1:])) for row in self._conn.execute(sql + " ORDER BY event_id", params)]

    def checkpoints(self, trial_id: str) -> list[CheckpointRecord]:
        return self._select(CheckpointRecord, "trial_id = ?", (trial_id,), "created_at, checkpoint_id")

    def checkpoint(self, checkpoint_id: str) -> CheckpointRecord:
        found = self._select(CheckpointRecord, "checkpoint_id = ?", (checkpoint_id,))
        if not found:
            raise LookupError(f"{self.path}: no checkpoint {checkpoint_id!r}")
        return found[0]

    def verifications(self, trial_id: str) -> list[VerificationRecord]:
        return self._select(VerificationRecord, "trial_id = ?", (trial_id,), "ended_at, verification_id")

    def artifacts(self, *, run_id: str | None = None, trial_id: str | None = None) -> list[ArtifactRecord]:
        clauses, params = [], []
        for column, value in (("run_id", run_id), ("trial_id", trial_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        return self._select(ArtifactRecord, " AND ".join(clauses), params, "created_at, artifact_id")

    def blob_stored(self, sha256: str) -> bool:
        return self._conn.execute("SELECT 1 FROM blobs WHERE sha256 = ?", (sha256,)).fetchone() is not None

    def row_digests(self, table: str) -> dict[int, str]:
        """rowid -> sha256 of the row's values, to show rows written earlier are unchanged."""
        if table not in APPEND_ONLY:
            raise ValueError(f"unknown table {table!r}; expected one of {APPEND_ONLY}")
        out: dict[int, str] = {}
        if table not in self._tables:
            return out
        for rowid, *values in self._conn.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid"):
            out[rowid] = sha256_hex(json_encoder.encode([v.hex() if isinstance(v, bytes) else v for v in values]))
        return out

    def count(self, table: str) -> int:
        if table not in APPEND_ONLY:
            raise ValueError(f"unknown table {table!r}; expected one of {APPEND_ONLY}")
        if table not in self._tables:
            return 0
        return self._conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
