"""Per-control-step physics states: the field names, the record, and both packings (numpy only).

A state is what suffices to redraw a scene identically and to compare a replay with the
original: ``STATE_FIELDS`` of MuJoCo's data. The simulator appends one per control step to a
``StateLog``; ``take`` hands them over as ``PhysicsStates`` (row i is the state after control
step ``step[i]``). They travel twice:

- simulator -> coordinator as a ``RecordedStates`` reply: one raw float64 blob per field
  (``states_to_blobs`` / ``states_from_blobs``);
- coordinator -> recorder as a ``ControlTrace`` record: one row per step, the fields side by
  side (``control_trace`` / ``trace_arrays``), joined back with ``states_from_traces``.

The initial-state fingerprint hashes ``fingerprint_bytes``: the float64 bytes of
``STATE_FIELDS`` in this order. Reordering or renaming a field changes every fingerprint, so
tests/sim/test_physics_state.py pins the tuple.

Beside the state, each row carries ``action``: the validated vector the simulator applied on
that control step (NaN for a row no action produced, e.g. the reset state at step 0). It is
evidence, not state, so it never enters the fingerprint; traces recorded before it existed
read back with a zero-width action column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
from roboswe.protocol.recorder import ControlTrace
from roboswe.protocol.sim import RecordedStates

STATE_FIELDS = ("qpos", "qvel", "act", "mocap_pos", "mocap_quat")
"""MuJoCo data fields recorded per control step; their order feeds the fingerprint hash."""

ACTION_FIELD = "action"
"""The commanded action of each control step; recorded beside the state, never fingerprinted."""

RECORD_FIELDS = ("step", "time", *STATE_FIELDS, ACTION_FIELD)
"""Every column of ``PhysicsStates``: the control step and simulated time, the state, the action."""

_DTYPE = "<f8"  # every packed value is little-endian float64, whatever the host


class TraceError(ValueError):
    """Recorded states that cannot be packed or joined; the message names the trace and what is missing."""


class PhysicsStates(msgspec.Struct, frozen=True, kw_only=True):
    """Recorded per-control-step states: row i is the state after control step ``step[i]``."""

    step: np.ndarray  # int64 (n,)
    time: np.ndarray  # float64 (n,)
    qpos: np.ndarray  # float64 (n, nq)
    qvel: np.ndarray  # float64 (n, nv)
    act: np.ndarray  # float64 (n, na)
    mocap_pos: np.ndarray  # float64 (n, 3 * nmocap)
    mocap_quat: np.ndarray  # float64 (n, 4 * nmocap)
    action: np.ndarray  # float64 (n, action dim); (n, 0) when none was recorded; NaN rows where no action applied

    def __len__(self) -> int:
        return len(self.step)

    def row(self, i: int) -> dict[str, np.ndarray]:
        """The state after control step ``step[i]``, as ``snapshot`` returns it."""
        return {f: getattr(self, f)[i] for f in STATE_FIELDS}


def snapshot(data: Any) -> dict[str, np.ndarray]:
    """Copy the state fields out of a MuJoCo MjData (float64), enough to redraw the scene."""
    return {name: np.array(getattr(data, name), dtype=np.float64, copy=True) for name in STATE_FIELDS}


def fingerprint_bytes(state: Mapping[str, np.ndarray]) -> bytes:
    """The bytes the initial-state fingerprint hashes: STATE_FIELDS' float64 values, in order."""
    return b"".join(np.ascontiguousarray(state[name], dtype=_DTYPE).tobytes() for name in STATE_FIELDS)


class StateLog:
    """Append-only per-step state record on the control path (a few hundred floats per step)."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, float, dict[str, np.ndarray], np.ndarray | None]] = []

    def append(self, step: int, time: float, state: dict[str, np.ndarray], action: np.ndarray | None = None) -> None:
        """Record the state after ``step``; ``action`` is the vector applied on it (None for a reset state)."""
        self._rows.append((step, time, state, None if action is None else np.array(action, dtype=np.float64).reshape(-1)))

    def __len__(self) -> int:
        return len(self._rows)

    def take(self) -> PhysicsStates:
        """Return everything recorded so far as arrays and start a new record."""
        rows, self._rows = self._rows, []

        def stack(name: str) -> np.ndarray:
            if not rows:
                return np.zeros((0, 0))
            return np.stack([r[2][name].reshape(-1) for r in rows]).astype(np.float64)

        width = max((len(r[3]) for r in rows if r[3] is not None), default=0)
        action = np.full((len(rows), width), np.nan)
        for i, r in enumerate(rows):
            if r[3] is not None:
                action[i, : len(r[3])] = r[3]
        return PhysicsStates(
            step=np.array([r[0] for r in rows], dtype=np.int64),
            time=np.array([r[1] for r in rows], dtype=np.float64),
            **{name: stack(name) for name in STATE_FIELDS},
            action=action,
        )


# ---- simulator -> coordinator: one blob per field ---------------------------------------------


def states_to_blobs(states: PhysicsStates) -> tuple[dict[str, list[int]], list[bytes]]:
    """Pack every column as one float64 blob; returns ``RecordedStates.fields`` and the blobs."""
    blobs: list[bytes] = []
    fields: dict[str, list[int]] = {}
    for name in RECORD_FIELDS:
        arr = np.ascontiguousarray(getattr(states, name), dtype=_DTYPE)
        fields[name] = [len(blobs), int(arr.shape[1]) if arr.ndim == 2 else 1]
        blobs.append(arr.tobytes())
    return fields, blobs


def states_from_blobs(message: RecordedStates, blobs: Sequence[bytes | memoryview]) -> PhysicsStates:
    """Rebuild PhysicsStates from a RecordedStates reply; raises TraceError if a field is missing or mis-sized."""
    missing = [name for name in RECORD_FIELDS if name not in message.fields and name != ACTION_FIELD]
    if missing:
        raise TraceError(f"recorded states lack {missing}; a simulator sends every one of {list(RECORD_FIELDS)}")
    arrays: dict[str, np.ndarray] = {}
    arrays[ACTION_FIELD] = np.zeros((message.count, 0))  # a simulator from before actions were recorded
    for name in RECORD_FIELDS:
        if name not in message.fields:
            continue
        index, cols = message.fields[name]
        if not 0 <= index < len(blobs):
            raise TraceError(f"recorded states field {name!r} points at blob {index}, but {len(blobs)} arrived")
        arr = np.frombuffer(blobs[index], dtype=_DTYPE)
        if arr.size != message.count * cols:
            raise TraceError(f"recorded states field {name!r}: {arr.size} values, expected {message.count} x {cols}")
        arrays[name] = arr.copy() if name in ("step", "time") else arr.reshape(message.count, cols)
    arrays["step"] = arrays["step"].astype(np.int64)
    return PhysicsStates(**arrays)


# ---- coordinator -> recorder: one row per control step ----------------------------------------


def control_trace(trial_id: str, seq: int, step_start: int, fields: dict[str, np.ndarray]) -> ControlTrace:
    """Pack per-step state arrays (one row per control step) into a ControlTrace; raises ValueError."""
    if not fields:
        raise ValueError("control trace needs at least one field (e.g. qpos, qvel)")
    rows = {len(a) for a in fields.values()}
    if len(rows) != 1:
        raise ValueError(f"control trace fields have different step counts {sorted(rows)}; one row per step expected")
    columns = [np.asarray(a, dtype=_DTYPE).reshape(len(a), -1) for a in fields.values()]
    table = np.concatenate(columns, axis=1)
    return ControlTrace(trial_id=trial_id, seq=seq, step_start=step_start, step_end=step_start + rows.pop(),
                        layout={name: c.shape[1] for name, c in zip(fields, columns)}, dtype=_DTYPE,
                        data=np.ascontiguousarray(table).tobytes())


def control_trace_from_states(trial_id: str, seq: int, states: PhysicsStates) -> ControlTrace:
    """One ControlTrace for a TakeStates batch: time and every non-empty state field (steps are implicit)."""
    fields = {"time": states.time, **{name: getattr(states, name) for name in (*STATE_FIELDS, ACTION_FIELD)
                                      if getattr(states, name).size}}
    return control_trace(trial_id, seq, int(states.step[0]), fields)


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


def states_from_traces(traces: Sequence[ControlTrace]) -> PhysicsStates:
    """Join a trial's control traces into one PhysicsStates (rows ordered by step); raises TraceError."""
    if not traces:
        raise TraceError("no control traces recorded for this trial; nothing to render or compare")
    cols: dict[str, list[np.ndarray]] = {f: [] for f in RECORD_FIELDS}
    for trace in sorted(traces, key=lambda t: (t.step_start, t.seq)):
        arrays = trace_arrays(trace)
        missing = [f for f in ("qpos", "qvel") if f not in arrays]
        if missing:
            raise TraceError(f"control trace {trace.trial_id}#{trace.seq} lacks {missing}; "
                             f"it has {list(arrays)} (record the sim.physics_state.STATE_FIELDS)")
        n = trace.step_end - trace.step_start
        steps = arrays["step"][:, 0] if "step" in arrays else np.arange(trace.step_start, trace.step_end)
        cols["step"].append(np.asarray(steps, dtype=np.int64))
        cols["time"].append(arrays["time"][:, 0] if "time" in arrays else np.full(n, np.nan))
        for f in STATE_FIELDS:
            cols[f].append(arrays.get(f, np.zeros((n, 0))))
        cols[ACTION_FIELD].append(arrays.get(ACTION_FIELD, np.zeros((n, 0))))
    # A trace without actions (recorded before they were, or a batch of only the reset state)
    # joins the others as NaN rows of their width.
    width = max(a.shape[1] for a in cols[ACTION_FIELD])
    cols[ACTION_FIELD] = [a if a.shape[1] == width else np.full((len(a), width), np.nan) for a in cols[ACTION_FIELD]]
    joined = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.argsort(joined["step"], kind="stable")
    _, first = np.unique(joined["step"][order], return_index=True)  # a step recorded twice keeps its first row
    keep = order[first]
    return PhysicsStates(**{k: v[keep] for k, v in joined.items()})
