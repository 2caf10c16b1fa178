"""Adaptation metrics of one series: slots scored from the records, then y_t, A, Q and the rest.

Scoring rules (DESIGN.md section 8; RoboSWE-ADAPT: "a scored outcome requires agreement between
the original execution and the code-operation rerun"):

- A slot is a trial index 1..T of a series. Its attempt is the latest one recorded for that
  index (a linked re-run of an interrupted or incomplete trial replaces it; both stay recorded).
- The rule (RoboSWE-ADAPT scoring rule 2, docs/scoring.md): a slot is unscored only for a cause
  outside the participant. Whatever the participant's decisions or programs cause is an error
  result to it, and a trial that ends that way is its failure. So a slot is *scored* when its
  trial ended ``success`` or ``failure`` and was replayed (verdict ``verified`` or ``mismatch``):
  y_t = 1 for a success whose replay is ``verified`` (it agreed on every control step and
  reached success over the same interval); y_t = 0 for a failure, whatever its replay reached:
  a replay that diverges cannot turn a failure into a missing slot, nor into a success.
- Every other slot is *unscored*, shown and counted in its own column, never read as 0 or 1:
  ``mismatch`` (a recorded success its replay did not reproduce), ``replay_error`` (the replay
  could not run: a restore, fingerprint, image or peer failure), ``unverified`` (never
  replayed), ``incomplete`` (interrupted, or ended incomplete for a cause outside the
  participant) and ``not_started``. A scored slot's replay divergence stays on it
  (``divergence``) and in every report.
- A series with any unscored slot is not *completed*: A, Q and the figures that need every
  y_t are None for it. ``A_lower``/``Q_lower`` count its unscored slots as failures: a
  lower bound, shown beside the headline, never instead of it.

Definitions for a completed series y_1..y_T:
  A = mean(y);  Q = (1/T) * sum_t prod_{j>=t} y_j  (= final success streak / T);
  first success = min t with y_t = 1;  regressions = #{t : y_{t-1} = 1, y_t = 0};
  trajectory class, one of: ``from_outset`` (y_1 = 1 and never a failure after a success),
  ``sustained_conversion`` (y_1 = 0, then from the first success every trial succeeds; it
  starts at ``conversion_trial``), ``regression`` (some success followed by a failure),
  ``never`` (no success);  recovered = y_1 = 0 and some later y_t = 1;
  efficiency = control steps and simulated time of the verified successes only, with
  first-to-last ratios (> 1: later successes are cheaper).

Aggregation over tasks, intervals and denominators are in ``roboswe.records.scoring``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

from roboswe.protocol.recorder import TrialCause
from roboswe.records.reader import RunReader, TrialView

SCORING_RULES = ("RoboSWE-ADAPT scoring rules 2 (docs/scoring.md): unscored only for causes outside the participant; "
                 "a replayed failure scores 0 whatever its replay did; a success scores 1 only when its replay is "
                 "verified; program output is recorded, never compared for the score")
"""The rule set these scores follow, stated in every results.json and report (1: a slot needed a replay that
agreed on output too, and a reproduced failure was misread as a mismatch)."""
SlotStatus = Literal["success", "failure", "mismatch", "replay_error", "unverified", "incomplete", "not_started"]
SCORED: tuple[str, ...] = ("success", "failure")
UNSCORED: tuple[str, ...] = ("mismatch", "replay_error", "unverified", "incomplete", "not_started")
Trajectory = Literal["from_outset", "sustained_conversion", "regression", "never"]
TRAJECTORIES: tuple[str, ...] = ("from_outset", "sustained_conversion", "regression", "never")


class TrialSlot(msgspec.Struct, frozen=True, kw_only=True):
    """The scored state of one trial index of a series."""

    index: int
    status: SlotStatus
    trial_id: str | None = None  # the attempt that fills the slot
    attempts: int = 0
    recovered_from: str | None = None  # the attempt this one re-ran
    outcome: str | None = None  # the attempt's recorded outcome
    verdict: str | None = None  # its latest replay verdict
    divergence: str = ""  # the replay's first divergence (a mismatch), whether the slot is scored or not
    reason: str = ""
    cause: TrialCause | None = None  # what ended the attempt (protocol/recorder.py); None: not started, or no cause recorded
    control_steps: int = 0
    sim_time: float = 0.0

    @property
    def y(self) -> int | None:
        return {"success": 1, "failure": 0}.get(self.status)


class SeriesOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """One series' slots, as scored from its records."""

    series_id: str
    task: str
    model: str
    mode: str
    trials: int
    slots: list[TrialSlot]
    created_at: float = 0.0
    pins: dict = msgspec.field(default_factory=dict)


class Efficiency(msgspec.Struct, frozen=True, kw_only=True):
    """Cost of the verified successes only: (trial index, value) pairs and first-to-last ratios."""

    control_steps: list[tuple[int, int]]
    sim_time: list[tuple[int, float]]
    steps_ratio: float | None  # steps(first success) / steps(last success); needs >= 2 successes
    sim_time_ratio: float | None


class SeriesMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """Figures of one series; those needing every slot scored are None otherwise."""

    series_id: str
    task: str
    model: str
    mode: str
    trials: int
    y: list[int | None]
    statuses: list[str]
    completed: bool
    scored: int
    unscored: dict[str, int]  # status -> count, every UNSCORED status present
    A: float | None
    Q: float | None
    A_lower: float  # unscored slots counted as failures
    Q_lower: float
    first_success: int | None
    regressions: int | None
    trajectory: str | None
    sustained_conversion: bool | None
    conversion_trial: int | None
    recovered: bool | None
    efficiency: Efficiency


# --- the definitions, on a complete y ----------------------------------------------------------


def accuracy(y: Sequence[int]) -> float:
    """A = mean(y)."""
    return sum(y) / len(y)


def final_streak(y: Sequence[int]) -> int:
    """Length of the uninterrupted run of successes ending at trial T."""
    n = 0
    for v in reversed(y):
        if not v:
            break
        n += 1
    return n


def streak_score(y: Sequence[int]) -> float:
    """Q = (1/T) sum_t prod_{j>=t} y_j, i.e. final streak / T."""
    return final_streak(y) / len(y)


def first_success(y: Sequence[int]) -> int | None:
    """1-based index of the first success, None if none."""
    return next((t for t, v in enumerate(y, 1) if v), None)


def regressions(y: Sequence[int]) -> int:
    """Number of successes immediately followed by a failure."""
    return sum(1 for a, b in zip(y, y[1:]) if a and not b)


def trajectory(y: Sequence[int]) -> Trajectory:
    """The series' class: from_outset, sustained_conversion, regression or never (see the module docstring)."""
    if not any(y):
        return "never"
    if regressions(y):
        return "regression"
    return "from_outset" if y[0] else "sustained_conversion"


def efficiency(slots: Sequence[TrialSlot]) -> Efficiency:
    """Control steps and simulated time among verified successes only."""
    wins = [s for s in slots if s.status == "success"]
    steps = [(s.index, s.control_steps) for s in wins]
    sim = [(s.index, s.sim_time) for s in wins]

    def ratio(pairs: list) -> float | None:
        if len(pairs) < 2 or not pairs[-1][1]:
            return None
        return pairs[0][1] / pairs[-1][1]

    return Efficiency(control_steps=steps, sim_time=sim, steps_ratio=ratio(steps), sim_time_ratio=ratio(sim))


# --- from records to slots ----------------------------------------------------------------------


def score_slot(index: int, attempts: Sequence[TrialView]) -> TrialSlot:
    """Score one trial index from its recorded attempts (ordered by attempt)."""
    if not attempts:
        return TrialSlot(index=index, status="not_started", reason="not started")
    view = attempts[-1]
    end, verification = view.end, view.verification
    common = dict(index=index, trial_id=view.trial_id, attempts=len(attempts), recovered_from=view.start.recovers,
                  verdict=verification.verdict if verification else None,
                  divergence=verification.first_divergence if verification and verification.verdict == "mismatch" else "")
    if end is None:
        return TrialSlot(**common, status="incomplete", reason="interrupted (no end recorded)", cause="interrupted")
    common.update(outcome=end.outcome, reason=end.reason, cause=end.cause, control_steps=end.control_steps,
                  sim_time=end.sim_time)
    if end.outcome not in SCORED:  # incomplete (or an end still pending): outside the participant
        return TrialSlot(**common, status="incomplete")
    # an outcome counts only once it was replayed; a success only when the replay agreed with it
    if verification is None:
        return TrialSlot(**common, status="unverified")
    if verification.verdict == "error":
        return TrialSlot(**common, status="replay_error")
    if end.outcome == "failure":  # verified or diverged: a failure cannot be forged into a missing slot or a success
        return TrialSlot(**common, status="failure")
    if verification.verdict == "verified" and verification.outcome_reproduced:
        return TrialSlot(**common, status="success")
    return TrialSlot(**common, status="mismatch")


def series_outcomes(reader: RunReader, run_id: str) -> list[SeriesOutcome]:
    """Score every series of a run from the database."""
    out = []
    for s in reader.series(run_id):
        by_index: dict[int, list[TrialView]] = defaultdict(list)
        for view in reader.trials(s.series_id):
            by_index[view.start.index].append(view)
        slots = [score_slot(t, by_index.get(t, [])) for t in range(1, s.trials + 1)]
        out.append(SeriesOutcome(series_id=s.series_id, task=s.task, model=s.model, mode=s.mode,
                                 trials=s.trials, slots=slots, created_at=s.created_at, pins=dict(s.pins)))
    return out


def series_metrics(series: SeriesOutcome) -> SeriesMetrics:
    """All per-series figures; those needing a completed series are None when it is not."""
    y = [slot.y for slot in series.slots]
    completed = all(v is not None for v in y)
    full: list[int] = [v for v in y if v is not None] if completed else []
    lower = [v or 0 for v in y]
    kind = trajectory(full) if completed else None
    return SeriesMetrics(
        series_id=series.series_id, task=series.task, model=series.model, mode=series.mode,
        trials=series.trials, y=y, statuses=[s.status for s in series.slots], completed=completed,
        scored=sum(v is not None for v in y),
        unscored={status: sum(s.status == status for s in series.slots) for status in UNSCORED},
        A=accuracy(full) if completed else None,
        Q=streak_score(full) if completed else None,
        A_lower=accuracy(lower), Q_lower=streak_score(lower),
        first_success=first_success(full) if completed else None,
        regressions=regressions(full) if completed else None,
        trajectory=kind,
        sustained_conversion=(kind == "sustained_conversion") if completed else None,
        conversion_trial=first_success(full) if kind == "sustained_conversion" else None,
        recovered=(full[0] == 0 and any(full[1:])) if completed else None,
        efficiency=efficiency(series.slots),
    )


def timing_totals(views: Iterable[TrialView]) -> dict[str, float]:
    """Seconds per timing component summed over ended trials, plus active and simulated time."""
    totals: dict[str, float] = defaultdict(float)
    for view in views:
        if view.end is None:
            continue
        for component, seconds in view.end.timing.items():
            totals[component] += seconds
        totals["active_time"] += view.end.active_time
        totals["sim_time"] += view.end.sim_time
    return dict(sorted(totals.items()))
