"""A trial's commanded actions and joint positions per control step, for the trial page's plot.

Written as ``data/t/<trial key>/trace.js`` beside trial.js and loaded after it. Long trials
are thinned to at most ``MAX_ROWS`` rows (every k-th step, the last one kept) so a page
stays light; the stride is in the data and shown on the page. Values keep six significant
digits; a step with no commanded action (the reset state) has nulls there.

A policy trial (actions interface) also lists its chunks: per ``act`` operation the control
steps it ran, how many actions it asked for and ran, and why it stopped, so the plot can mark
where each chunk began and ended.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from roboswe.protocol.participant import ACTION_OPERATIONS
from roboswe.records.reader import RunReader
from roboswe.sim.physics_state import TraceError, states_from_traces

MAX_ROWS = 2000  # per plot: a few thousand points per line draw instantly on a canvas


def _rows(table: np.ndarray) -> list[list[float | None]]:
    return [[None if not math.isfinite(v) else float(f"{v:.6g}") for v in row] for row in table.tolist()]


def trace_data(reader: RunReader, trial_id: str) -> dict[str, Any]:
    """The plot's data: steps, action rows and qpos rows (thinned), or ``{"error": ...}`` when none are usable."""
    try:
        states = states_from_traces(reader.control_traces(trial_id))
    except (TraceError, ValueError) as e:
        return {"error": str(e)}
    n = len(states)
    stride = max(1, math.ceil(n / MAX_ROWS))
    keep = np.arange(0, n, stride)
    if n and keep[-1] != n - 1:
        keep = np.append(keep, n - 1)
    return {"steps": states.step[keep].tolist(), "stride": stride, "recorded_steps": n,
            "action": _rows(states.action[keep]), "qpos": _rows(states.qpos[keep]), "chunks": chunks(reader, trial_id)}


def chunks(reader: RunReader, trial_id: str) -> list[dict[str, Any]]:
    """The trial's executed action chunks in order (empty for a coding agent's trial)."""
    return [{"seq": op.seq, "start": op.step_start, "end": op.step_end, "requested": op.feedback.get("requested"),
             "executed": op.feedback["executed"], "stopped": op.feedback.get("stopped", "")}
            for op in reader.operations(trial_id)
            if op.operation in ACTION_OPERATIONS and isinstance(op.feedback.get("executed"), int)]
