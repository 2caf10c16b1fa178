"""The run database RUN_DIR/run.sqlite: one batching writer, many readers.

The database is append-only: every table refuses UPDATE and DELETE (triggers),
so a resumed run links new rows to old ones instead of editing them. A trial's
start and its end are separate rows (``trials``, ``trial_ends``); a started
trial without an end is an interrupted one.

``RunStore`` owns the only write connection, on its own thread. ``put`` queues a
record and returns at once (recording never stalls a control loop); records are
committed in one transaction per batch, every ``flush_interval`` seconds or
sooner when someone waits. ``put_durable`` returns only after its records are
committed with ``synchronous=FULL``, so an acknowledged record survives kill -9
(and power loss). ``RunReader`` is the read API for reports, verify and viewer.
"""

from __future__ import annotations

import hashlib
import queue
import sqlite3
import threading
import time
import types
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import structlog

from roboswe.protocol.recorder import (
    RECORD_TYPES,
    ArtifactRecord,
    BlobRecord,
    CheckpointRecord,
    ControlTrace,
    EventRecord,
    MessageRecord,
    OperationRecord,
    Record,
    RunRecord,
    SeriesRecord,
    SlideRecord,
    TrialEnded,
    TrialStarted,
    VerificationRecord,
)

log = structlog.get_logger()

DB_NAME = "run.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE schema_version (
    version INTEGER PRIMARY KEY,
    applied_at REAL NOT NULL
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    config TEXT NOT NULL,
    admitted_sha256 TEXT NOT NULL,
    roboswe_version TEXT NOT NULL
);
CREATE TABLE series (
    series_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    task TEXT NOT NULL,
    model TEXT NOT NULL,
    mode TEXT NOT NULL CHECK (mode IN ('retain', 'none')),
    trials INTEGER NOT NULL CHECK (trials >= 1),
    created_at REAL NOT NULL,
    pins TEXT NOT NULL
);
CREATE TABLE trials (
    trial_id TEXT PRIMARY KEY,
    series_id TEXT NOT NULL REFERENCES series(series_id),
    "index" INTEGER NOT NULL CHECK ("index" >= 1),
    attempt INTEGER NOT NULL CHECK (attempt >= 0),
    fingerprint TEXT NOT NULL,
    started_at REAL NOT NULL,
    recovers TEXT REFERENCES trials(trial_id),
    UNIQUE (series_id, "index", attempt)
);
CREATE TABLE trial_ends (
    trial_id TEXT PRIMARY KEY REFERENCES trials(trial_id),
    outcome TEXT NOT NULL CHECK (outcome IN ('success', 'failure', 'incomplete', 'pending')),
    reason TEXT NOT NULL,
    control_steps INTEGER NOT NULL,
    sim_time REAL NOT NULL,
    active_time REAL NOT NULL,
    timing TEXT NOT NULL,
    success_interval TEXT,
    ended_at REAL NOT NULL
);
CREATE TABLE messages (
    message_id TEXT PRIMARY KEY,
    trial_id TEXT NOT NULL REFERENCES trials(trial_id),
    attempt INTEGER NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    request BLOB NOT NULL,
    response BLOB,
    request_sha256 TEXT NOT NULL,
    response_sha256 TEXT NOT NULL,
    requested_at REAL NOT NULL,
    responded_at REAL,
    latency REAL,
    usage TEXT NOT NULL,
    error TEXT NOT NULL
);
CREATE INDEX messages_by_trial ON messages(trial_id, requested_at);
CREATE TABLE operations (
    trial_id TEXT NOT NULL REFERENCES trials(trial_id),
    seq INTEGER NOT NULL,
    operation TEXT NOT NULL,
    arguments TEXT NOT NULL,
    feedback TEXT NOT NULL,
    step_start INTEGER NOT NULL,
    step_end INTEGER NOT NULL CHECK (step_end >= step_start),
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    message_id TEXT REFERENCES messages(message_id),
    PRIMARY KEY (trial_id, seq)
);
CREATE TABLE control_traces (
    trial_id TEXT NOT NULL REFERENCES trials(trial_id),
    seq INTEGER NOT NULL,
    step_start INTEGER NOT NULL,
    step_end INTEGER NOT NULL CHECK (step_end >= step_start),
    layout TEXT NOT NULL,
    dtype TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (trial_id, seq)
);
CREATE TABLE slides (
    trial_id TEXT NOT NULL REFERENCES trials(trial_id),
    seq INTEGER NOT NULL,
    at REAL NOT NULL,
    removed TEXT NOT NULL,
    before_units INTEGER NOT NULL,
    after_units INTEGER NOT NULL,
    method TEXT NOT NULL,
    PRIMARY KEY (trial_id, seq)
);
CREATE TABLE events (
    event_id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    event TEXT NOT NULL,
    at REAL NOT NULL,
    trial_id TEXT,
    data TEXT NOT NULL
);
CREATE INDEX events_by_trial ON events(trial_id);
CREATE TABLE blobs (
    sha256 TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    stored_at REAL NOT NULL
);
CREATE TABLE checkpoints (
    checkpoint_id TEXT PRIMARY KEY,
    trial_id TEXT NOT NULL REFERENCES trials(trial_id),
    label TEXT NOT NULL,
    op_seq INTEGER,
    manifest_sha256 TEXT NOT NULL,
    files INTEGER NOT NULL,
    total_bytes INTEGER NOT NULL,
    manifest BLOB NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX checkpoints_by_trial ON checkpoints(trial_id, created_at);
CREATE TABLE verifications (
    verification_id TEXT PRIMARY KEY,
    trial_id TEXT NOT NULL REFERENCES trials(trial_id),
    verdict TEXT NOT NULL CHECK (verdict IN ('verified', 'mismatch', 'error')),
    success_reproduced INTEGER,
    first_divergence TEXT NOT NULL,
    detail TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL
);
CREATE INDEX verifications_by_trial ON verifications(trial_id, ended_at);
CREATE TABLE artifacts (
    artifact_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    trial_id TEXT REFERENCES trials(trial_id),
    artifact TEXT NOT NULL,
    camera TEXT NOT NULL,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    meta TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""

TABLES: dict[type, str] = {
    RunRecord: "runs",
    SeriesRecord: "series",
    TrialStarted: "trials",
    TrialEnded: "trial_ends",
    MessageRecord: "messages",
    OperationRecord: "operations",
    ControlTrace: "control_traces",
    SlideRecord: "slides",
    EventRecord: "events",
    BlobRecord: "blobs",
    CheckpointRecord: "checkpoints",
    VerificationRecord: "verifications",
    ArtifactRecord: "artifacts",
}
_PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",),
    "series": ("series_id",),
    "trials": ("trial_id",),
    "trial_ends": ("trial_id",),
    "messages": ("message_id",),
    "operations": ("trial_id", "seq"),
    "control_traces": ("trial_id", "seq"),
    "slides": ("trial_id", "seq"),
    "blobs": ("sha256",),
    "checkpoints": ("checkpoint_id",),
    "verifications": ("verification_id",),
    "artifacts": ("artifact_id",),
}
APPEND_ONLY = ("schema_version", *TABLES.values())

_json_encoder = msgspec.json.Encoder()


class StoreError(Exception):
    """A record could not be written; the message says which and why."""


class RecordConflict(StoreError):
    """A record with the same key was already written with different content."""


class StoreClosed(StoreError):
    """The store was closed; no further records are accepted."""


class SchemaMismatch(StoreError):
    """The database was written by another schema version of roboswe."""


# --- row <-> record mapping ---------------------------------------------------------------


def _kind_of(tp: Any) -> str:
    """How a field is stored: 'json' (dict/list/tuple), 'bytes', 'bool' or 'plain'."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        kinds = {_kind_of(a) for a in typing.get_args(tp) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else "plain"
    if typing.get_origin(tp) is typing.Annotated:
        return _kind_of(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (dict, list, tuple):
        return "json"
    if tp is bytes:
        return "bytes"
    if tp is bool:
        return "bool"
    return "plain"


class _Mapping:
    """Columns of one record type and how each value is stored."""

    def __init__(self, cls: type):
        self.cls = cls
        self.table = TABLES[cls]
        fields = msgspec.structs.fields(cls)
        self.columns = tuple(f.name for f in fields)
        self.kinds = tuple(_kind_of(f.type) for f in fields)
        self.key = _PRIMARY_KEYS.get(self.table, ())
        cols = ", ".join(f'"{c}"' for c in self.columns)
        marks = ", ".join("?" for _ in self.columns)
        verb = "INSERT OR IGNORE" if self.table == "blobs" else "INSERT"  # blobs are content-addressed
        self.insert_sql = f"{verb} INTO {self.table} ({cols}) VALUES ({marks})"
        self.select_sql = f"SELECT {cols} FROM {self.table}"
        where = " AND ".join(f'"{k}" = ?' for k in self.key)
        self.select_by_key_sql = f"{self.select_sql} WHERE {where}" if self.key else ""

    def row(self, record: Any) -> tuple:
        out = []
        for name, kind in zip(self.columns, self.kinds):
            value = getattr(record, name)
            if value is None:
                out.append(None)
            elif kind == "json":
                out.append(_json_encoder.encode(value).decode())
            elif kind == "bool":
                out.append(int(value))
            else:
                out.append(value)
        return tuple(out)

    def record(self, row: Sequence[Any]) -> Any:
        values: dict[str, Any] = {}
        for name, kind, value in zip(self.columns, self.kinds, row):
            if value is not None and kind == "json":
                value = msgspec.json.decode(value)
            elif value is not None and kind == "bool":
                value = bool(value)
            elif value is not None and kind == "bytes":
                value = bytes(value)
            values[name] = value
        return msgspec.convert(values, self.cls)

    def key_of(self, record: Any) -> tuple:
        return tuple(getattr(record, k) for k in self.key)


MAPPINGS: dict[type, _Mapping] = {cls: _Mapping(cls) for cls in RECORD_TYPES}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _seal(record: Any) -> Any:
    """Fill or check the digests a record carries; raises StoreError on a mismatch."""
    if isinstance(record, MessageRecord):
        request_sha = _sha256(record.request)
        response_sha = _sha256(record.response) if record.response is not None else ""
        for name, given, actual in (
            ("request_sha256", record.request_sha256, request_sha),
            ("response_sha256", record.response_sha256, response_sha),
        ):
            if given and given != actual:
                raise StoreError(
                    f"message {record.message_id!r}: {name} {given} does not match its bytes ({actual}); "
                    "send the exact bytes the provider exchanged"
                )
        return msgspec.structs.replace(record, request_sha256=request_sha, response_sha256=response_sha)
    if isinstance(record, CheckpointRecord):
        actual = _sha256(record.manifest)
        if record.manifest_sha256 != actual:
            raise StoreError(
                f"checkpoint {record.checkpoint_id!r}: manifest_sha256 {record.manifest_sha256} "
                f"does not match the manifest bytes ({actual})"
            )
    return record


def control_trace(trial_id: str, seq: int, step_start: int, fields: dict[str, np.ndarray]) -> ControlTrace:
    """Pack per-step state arrays (one row per control step) into a ControlTrace; raises ValueError."""
    if not fields:
        raise ValueError("control trace needs at least one field (e.g. qpos, qvel)")
    rows = {len(a) for a in fields.values()}
    if len(rows) != 1:
        raise ValueError(f"control trace fields have different step counts {sorted(rows)}; one row per step expected")
    columns = [np.asarray(a, dtype="<f8").reshape(len(a), -1) for a in fields.values()]
    table = np.concatenate(columns, axis=1)
    return ControlTrace(trial_id=trial_id, seq=seq, step_start=step_start, step_end=step_start + rows.pop(),
                        layout={name: c.shape[1] for name, c in zip(fields, columns)}, dtype="<f8",
                        data=np.ascontiguousarray(table).tobytes())


def trace_arrays(trace: ControlTrace) -> dict[str, np.ndarray]:
    """Unpack a ControlTrace into field -> (steps, width) arrays; raises ValueError if inconsistent."""
    steps, width = trace.step_end - trace.step_start, sum(trace.layout.values())
    table = np.frombuffer(trace.data, dtype=trace.dtype)
    if table.size != steps * width:
        raise ValueError(f"control trace {trace.trial_id}#{trace.seq}: {table.size} values, "
                         f"expected {steps} steps x {width} columns")
    table = table.reshape(steps, width)
    out, col = {}, 0
    for name, w in trace.layout.items():
        out[name] = table[:, col : col + w]
        col += w
    return out


# --- connection ------------------------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")  # a commit is on disk when it returns
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create the schema in a fresh database, or check an existing one's version."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "schema_version" in tables:
        (version,) = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        if version != SCHEMA_VERSION:
            raise SchemaMismatch(
                f"{path}: schema version {version}, this roboswe writes version {SCHEMA_VERSION}; "
                "open the run with the roboswe version that wrote it"
            )
        return
    if tables - {"sqlite_sequence"}:
        raise StoreError(f"{path}: not a roboswe run database (tables {sorted(tables)}); choose an empty RUN_DIR")
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        for table in APPEND_ONLY:
            for action in ("UPDATE", "DELETE"):
                conn.execute(
                    f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} is append-only: nothing written is rewritten'); END"
                )
        conn.execute("INSERT INTO schema_version VALUES (?, ?)", (SCHEMA_VERSION, time.time()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


# --- writer ----------------------------------------------------------------------------------


class Receipt:
    """Completion of a durable write: ``wait()`` returns once committed, or raises."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.errors: list[str] = []

    def _fail(self, error: str) -> None:
        self.errors.append(error)

    def _finish(self) -> None:
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> None:
        """Block until committed; raises StoreError if any record failed, TimeoutError on timeout."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"durable write not committed within {timeout} s")
        if self.errors:
            raise StoreError("; ".join(self.errors))


class StoreStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of a RunStore; latencies in seconds."""

    queue_depth: int
    written: int
    duplicates: int
    failed: int
    batches: int
    durable_requests: int
    commit_seconds_last: float
    commit_seconds_max: float
    commit_seconds_total: float
    lag_seconds_max: float  # enqueue -> commit, worst record


class _Put(msgspec.Struct):
    record: Any
    enqueued_at: float
    receipt: Receipt | None


class _Barrier(msgspec.Struct):
    receipt: Receipt
    close: bool = False


class RunStore:
    """The single writer of one run database; see the module docstring."""

    def __init__(self, path: str | Path, *, flush_interval: float = 0.05, max_batch: int = 2000):
        self.path = Path(path)
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[_Put | _Barrier] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self._stats = dict(
            written=0, duplicates=0, failed=0, batches=0, durable_requests=0,
            commit_seconds_last=0.0, commit_seconds_max=0.0, commit_seconds_total=0.0, lag_seconds_max=0.0,
        )
        self._conn = _connect(self.path)
        try:
            _ensure_schema(self._conn, self.path)
        except BaseException:
            self._conn.close()
            raise
        self._thread = threading.Thread(target=self._write_loop, name=f"runstore:{self.path}", daemon=True)
        self._thread.start()

    @classmethod
    def open(cls, run_dir: str | Path, **kwargs: Any) -> RunStore:
        """Open (creating if needed) RUN_DIR/run.sqlite for writing."""
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        return cls(run_dir / DB_NAME, **kwargs)

    # public API

    def put(self, record: Record) -> None:
        """Queue a record; returns at once. Failures are logged and counted, not raised."""
        self._check_open()
        self._queue.put(_Put(record, time.monotonic(), None))

    def put_durable_nowait(self, records: Iterable[Record]) -> Receipt:
        """Queue records and return a Receipt that completes once they are committed."""
        self._check_open()
        receipt = Receipt()
        now = time.monotonic()
        with self._lock:
            self._stats["durable_requests"] += 1
            for record in records:
                self._queue.put(_Put(record, now, receipt))
            self._queue.put(_Barrier(receipt))
        return receipt

    def put_durable(self, *records: Record, timeout: float | None = None) -> None:
        """Write records and return only after they are committed; raises StoreError."""
        self.put_durable_nowait(records).wait(timeout)

    def flush(self, timeout: float | None = None) -> None:
        """Return once everything queued before this call is committed."""
        self.put_durable_nowait(()).wait(timeout)

    def statistics(self) -> StoreStatistics:
        with self._lock:
            return StoreStatistics(queue_depth=self._queue.qsize(), **self._stats)

    def close(self, timeout: float | None = 30) -> None:
        """Commit what is queued, stop the writer thread and close the connection."""
        if self._closed:
            return
        receipt = Receipt()
        with self._lock:
            self._closed = True
            self._queue.put(_Barrier(receipt, close=True))
        receipt.wait(timeout)
        self._thread.join(timeout)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # writer thread

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"{self.path}: store is closed; open a new RunStore to write")

    def _write_loop(self) -> None:
        closing = False
        while not closing:
            batch = [self._queue.get()]
            urgent = isinstance(batch[0], _Barrier)
            deadline = time.monotonic() + self.flush_interval
            while not urgent and len(batch) < self.max_batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
                batch.append(item)
                urgent = isinstance(item, _Barrier)
            while len(batch) < self.max_batch:  # take what is already waiting
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            closing = any(isinstance(i, _Barrier) and i.close for i in batch)
            self._commit(batch)
        self._conn.close()

    def _commit(self, batch: list[_Put | _Barrier]) -> None:
        started = time.monotonic()
        written = duplicates = failed = 0
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            for item in batch:
                if isinstance(item, _Barrier):
                    continue
                try:
                    if self._insert(conn, item.record):
                        written += 1
                    else:
                        duplicates += 1
                except Exception as e:  # noqa: BLE001 - a bad record must not stop the writer
                    failed += 1
                    error = f"{type(item.record).__name__}: {e}"
                    log.error("record_refused", error=error, durable=item.receipt is not None)
                    if item.receipt is not None:
                        item.receipt._fail(error)
            conn.execute("COMMIT")
        except Exception as e:  # noqa: BLE001 - the whole batch is lost: disk full, I/O error, lock timeout
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            error = f"commit failed, batch of {len(batch)} lost: {e}"
            log.error("batch_lost", error=error)
            failed, written, duplicates = sum(isinstance(i, _Put) for i in batch), 0, 0
            for item in batch:
                if item.receipt is not None:
                    item.receipt._fail(error)
        finished = time.monotonic()
        lag = max((finished - i.enqueued_at for i in batch if isinstance(i, _Put)), default=0.0)
        with self._lock:
            s = self._stats
            s["written"] += written
            s["duplicates"] += duplicates
            s["failed"] += failed
            s["batches"] += 1
            s["commit_seconds_last"] = finished - started
            s["commit_seconds_max"] = max(s["commit_seconds_max"], finished - started)
            s["commit_seconds_total"] += finished - started
            s["lag_seconds_max"] = max(s["lag_seconds_max"], lag)
        for item in batch:  # acknowledge only after COMMIT returned
            if isinstance(item, _Barrier):
                item.receipt._finish()

    def _insert(self, conn: sqlite3.Connection, record: Any) -> bool:
        """Insert one record; False when an identical record is already there (a retry)."""
        mapping = MAPPINGS.get(type(record))
        if mapping is None:
            raise StoreError(f"{type(record).__name__} is not a record type; send one of {list(TABLES)}")
        record = _seal(record)
        row = mapping.row(record)
        try:
            cursor = conn.execute(mapping.insert_sql, row)
        except sqlite3.IntegrityError as e:
            if "UNIQUE" not in str(e) or not mapping.key:
                raise StoreError(f"{mapping.table}: {e}") from None
            existing = conn.execute(mapping.select_by_key_sql, mapping.key_of(record)).fetchone()
            if existing is not None and tuple(existing) == row:
                return False
            raise RecordConflict(
                f"{mapping.table} {mapping.key_of(record)} was already written with different content; "
                "records are append-only: write a new record (e.g. a new attempt) instead"
            ) from None
        return cursor.rowcount == 1


# --- reader ----------------------------------------------------------------------------------


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

    def control_traces(self, trial_id: str) -> list[ControlTrace]:
        return self._select(ControlTrace, "trial_id = ?", (trial_id,), "seq")

    def slides(self, trial_id: str) -> list[SlideRecord]:
        return self._select(SlideRecord, "trial_id = ?", (trial_id,), "seq")

    def events(self, *, trial_id: str | None = None, after_id: int = 0) -> list[tuple[int, EventRecord]]:
        """(event_id, event) pairs in write order, after ``after_id`` (for following)."""
        mapping = MAPPINGS[EventRecord]
        sql = f"SELECT event_id, {mapping.select_sql[len('SELECT '):]} WHERE event_id > ?"
        params: list[Any] = [after_id]
        if trial_id is not None:
            sql += " AND trial_id = ?"
            params.append(trial_id)
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
        out = {}
        for rowid, *values in self._conn.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid"):
            out[rowid] = _sha256(_json_encoder.encode([v.hex() if isinstance(v, bytes) else v for v in values]))
        return out

    def count(self, table: str) -> int:
        if table not in APPEND_ONLY:
            raise ValueError(f"unknown table {table!r}; expected one of {APPEND_ONLY}")
        return self._conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
