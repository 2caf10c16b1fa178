"""A run as a flat, tidy table: one row per slot (series x trial index), for pandas and friends.

Built from ``run_summary`` (roboswe.records.report), the figures ``roboswe report`` prints, so the
table and the report never disagree. A slot is filled by its last attempt (an earlier attempt was
re-run, e.g. after an infrastructure failure); ``attempts`` says how many it took, and the tokens
and cost are the filling attempt's. A slot no attempt reached has its series columns, its
``slot`` (``not_started``) and nothing else. ``y`` is the scored value (1 success, 0 failure) or
empty for an unscored slot, exactly as in A and Q.

Written as CSV (standard library) or Parquet (pyarrow, the ``tables`` extra), by the file's suffix::

    pandas.read_csv("trials.csv")          pandas.read_parquet("trials.parquet")
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

# (column, type): the schema of both formats; "str" | "int" | "float"
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "str"), ("series_id", "str"), ("model", "str"), ("task", "str"), ("mode", "str"),
    ("trial", "int"), ("trials", "int"), ("attempts", "int"), ("attempt", "int"), ("trial_id", "str"),
    ("slot", "str"), ("y", "int"), ("outcome", "str"), ("verdict", "str"), ("cause", "str"),
    ("control_steps", "int"), ("sim_time_s", "float"), ("active_time_s", "float"), ("started_at", "float"),
    ("ended_at", "float"), ("wall_s", "float"), ("calls", "int"), ("input_tokens", "int"),
    ("cached_input_tokens", "int"), ("output_tokens", "int"), ("reasoning_tokens", "int"), ("cost", "float"),
    ("currency", "str"), ("cost_note", "str"),
)
FORMATS = (".csv", ".parquet")


class TableError(Exception):
    """The table could not be written; the message says why."""


def _slot_row(run_id: str, s: dict[str, Any], index: int, attempts: list[dict[str, Any]],
              usage: dict[str, Any]) -> dict[str, Any]:
    m = s["metrics"] or {}
    statuses, ys = m.get("statuses") or [], m.get("y") or []
    row: dict[str, Any] = {"run_id": run_id, "series_id": s["series_id"], "model": s["model"], "task": s["task"],
                           "mode": s["mode"], "trial": index, "trials": s["trials"], "attempts": len(attempts),
                           "slot": statuses[index - 1] if index <= len(statuses) else "not_started",
                           "y": ys[index - 1] if index <= len(ys) else None}
    if not attempts:
        return row
    a = attempts[-1]
    u, c = usage["trials"].get(a["trial_id"]), usage["trial_cost"].get(a["trial_id"]) or {}
    row.update(attempt=a["attempt"], trial_id=a["trial_id"], outcome=a["outcome"], verdict=a["verdict"] or "unverified",
               cause=a["cause"], control_steps=a["control_steps"], sim_time_s=a["sim_time"],
               active_time_s=a["active_time"], started_at=a["started_at"], ended_at=a["ended_at"],
               wall_s=None if a["ended_at"] is None else round(a["ended_at"] - a["started_at"], 3),
               cost=c.get("amount"), currency=c.get("currency") or None, cost_note=c.get("reason") or None)
    u = u or {"calls": 0, "input": 0, "cached_input": 0, "output": 0, "reasoning": None}  # no call recorded
    row.update(calls=u["calls"], input_tokens=u["input"], cached_input_tokens=u["cached_input"],
               output_tokens=u["output"], reasoning_tokens=u["reasoning"])
    return row


def trial_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per slot of every series in the run, in series then trial order; every column present."""
    run_id, usage = summary["run"]["run_id"], summary["usage"]
    rows = []
    for s in summary["series"]:
        by_index: dict[int, list[dict[str, Any]]] = {}
        for a in s["attempts"]:
            by_index.setdefault(a["index"], []).append(a)
        for index in range(1, max([s["trials"], *by_index]) + 1):
            row = _slot_row(run_id, s, index, sorted(by_index.get(index, []), key=lambda a: a["attempt"]), usage)
            rows.append({name: row.get(name) for name, _ in COLUMNS})
    return rows


def checked_path(path: str | Path) -> Path:
    """``path`` if its suffix names a format; raises TableError (checked before any work is done)."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise TableError(f"--table {path}: expected a .csv or .parquet file name")
    return path


def write_table(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write the rows as CSV or Parquet (by ``path``'s suffix); raises TableError."""
    path = checked_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=[name for name, _ in COLUMNS])
            writer.writeheader()
            writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
        return path
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise TableError(f"--table {path}: Parquet needs pyarrow (pip install 'roboswe[tables]'); "
                         "a .csv table needs nothing") from None
    types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64()}
    schema = pa.schema([(name, types[kind]) for name, kind in COLUMNS])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path
