"""The single writer of a run database RUN_DIR/run.sqlite.

The database is append-only: every table refuses UPDATE and DELETE (triggers),
so a resumed run links new rows to old ones instead of editing them. A trial's
start and its end are separate rows (``trials``, ``trial_ends``); a started
trial without an end is an interrupted one. The tables are in ``schema``.

``RunStore`` owns the only write connection, on its own thread. ``put`` queues a
record and returns at once (recording never stalls a control loop); records are
committed in one transaction per batch, every ``flush_interval`` seconds or
sooner when someone waits. ``put_durable`` returns only after its records are
committed with ``synchronous=FULL``, so an acknowledged record survives kill -9
(and power loss). The read API for reports, verify and viewer is ``reader.RunReader``.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import structlog

from roboswe.protocol.recorder import (
    CheckpointRecord,
    MessageRecord,
    Record,
)
from roboswe.records.schema import (
    ADDED_TABLES,
    APPEND_ONLY,
    DB_NAME,
    MAPPINGS,
    SCHEMA,
    SCHEMA_VERSION,
    TABLES,
)
from roboswe.records.schema import sha256_hex as _sha256

log = structlog.get_logger()

__all__ = [
    "APPEND_ONLY",
    "DB_NAME",
    "SCHEMA_VERSION",
    "Receipt",
    "RecordConflict",
    "RunStore",
    "SchemaMismatch",
    "StoreClosed",
    "StoreError",
    "StoreStatistics",
]


class StoreError(Exception):
    """A record could not be written; the message says which and why."""


class RecordConflict(StoreError):
    """A record with the same key was already written with different content."""


class StoreClosed(StoreError):
    """The store was closed; no further records are accepted."""


class SchemaMismatch(StoreError):
    """The database was written by another schema version of roboswe."""


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
        missing = [t for t in ADDED_TABLES if t not in tables]  # a database written before the table was added
        if missing:
            _create(conn, "".join(ADDED_TABLES[t] for t in missing), missing)
        return
    if tables - {"sqlite_sequence"}:
        raise StoreError(f"{path}: not a roboswe run database (tables {sorted(tables)}); choose an empty RUN_DIR")
    _create(conn, SCHEMA, APPEND_ONLY, version=SCHEMA_VERSION)


def _create(conn: sqlite3.Connection, sql: str, tables: Iterable[str], version: int | None = None) -> None:
    """Run ``sql`` and make ``tables`` append-only, in one transaction; record ``version`` when given."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in sql.split(";"):
            if statement.strip():
                conn.execute(statement)
        for table in tables:
            for action in ("UPDATE", "DELETE"):
                conn.execute(
                    f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} is append-only: nothing written is rewritten'); END"
                )
        if version is not None:
            conn.execute("INSERT INTO schema_version VALUES (?, ?)", (version, time.time()))
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
