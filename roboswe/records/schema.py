"""The run database's schema: tables, their SQL, and how each record type maps to a row.

Shared by the writer (``store``) and the readers (``reader``) so both agree on columns
and on how a field is stored (JSON text, bytes, 0/1, or as is).
"""

from __future__ import annotations

import hashlib
import types
import typing
from collections.abc import Sequence
from typing import Any

import msgspec

from roboswe.protocol.recorder import (
    RECORD_TYPES,
    TRIAL_CAUSES,
    ArtifactRecord,
    BlobRecord,
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

DB_NAME = "run.sqlite"
# 2: verifications say outcome_reproduced and replay_outcome (was success_reproduced);
# 3: trial ends carry a typed cause and its detail (readers decided on the reason's words before)
SCHEMA_VERSION = 3

SCHEMA = """
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
    ended_at REAL NOT NULL,
    cause TEXT CHECK (cause IN (@CAUSES@)),
    detail TEXT NOT NULL
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
    outcome_reproduced INTEGER,
    replay_outcome TEXT CHECK (replay_outcome IN ('success', 'failure')),
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
""".replace("@CAUSES@", ", ".join(f"'{c}'" for c in TRIAL_CAUSES))  # one closed set, written once

# Tables added after version 3 without changing it: each is additive (no older row or column changes), so an
# older roboswe reads a database holding one (it never asks for it), and a version-3 database without one
# stays readable (a reader finds no rows) and gets it, append-only, when a writer next opens it.
ADDED_TABLES: dict[str, str] = {
    # `roboswe judge` (roboswe/judge): the visual cross-check, one row per judge request for a trial
    "judgements": """
CREATE TABLE judgements (
    judgement_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    trial_id TEXT NOT NULL REFERENCES trials(trial_id),
    judge TEXT NOT NULL,
    judge_sha256 TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    settings TEXT NOT NULL,
    conditions_sha256 TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    views TEXT NOT NULL,
    request BLOB NOT NULL,
    request_sha256 TEXT NOT NULL,
    attempts TEXT NOT NULL,
    response BLOB,
    status TEXT NOT NULL CHECK (status IN ('answered', 'error')),
    error TEXT NOT NULL,
    verdicts TEXT NOT NULL,
    usage TEXT NOT NULL,
    cost TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL
);
CREATE INDEX judgements_by_trial ON judgements(trial_id, ended_at);
""",
}
SCHEMA += "".join(ADDED_TABLES.values())

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
    JudgementRecord: "judgements",  # written by `roboswe judge` itself, never sent to the recorder
}
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
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
    "judgements": ("judgement_id",),
}
APPEND_ONLY = ("schema_version", *TABLES.values())

json_encoder = msgspec.json.Encoder()


# --- row <-> record mapping ---------------------------------------------------------------


def _kind_of(tp: Any) -> str:
    """How a field is stored: 'json' (dict/list/tuple/Struct), 'bytes', 'bool' or 'plain'."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        kinds = {_kind_of(a) for a in typing.get_args(tp) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else "plain"
    if typing.get_origin(tp) is typing.Annotated:
        return _kind_of(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (dict, list, tuple) or (isinstance(tp, type) and issubclass(tp, msgspec.Struct)):
        return "json"
    if tp is bytes:
        return "bytes"
    if tp is bool:
        return "bool"
    return "plain"


class Mapping:
    """Columns of one record type and how each value is stored."""

    def __init__(self, cls: type):
        self.cls = cls
        self.table = TABLES[cls]
        fields = msgspec.structs.fields(cls)
        self.columns = tuple(f.name for f in fields)
        self.kinds = tuple(_kind_of(f.type) for f in fields)
        self.key = PRIMARY_KEYS.get(self.table, ())
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
                out.append(json_encoder.encode(value).decode())
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


MAPPINGS: dict[type, Mapping] = {cls: Mapping(cls) for cls in (*RECORD_TYPES, JudgementRecord)}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
