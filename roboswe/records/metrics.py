"""Adaptation metrics: per series (y_t, A, Q, ...), then per dataset by task, with bootstrap intervals.

Scoring rules (DESIGN.md section 8), applied to the recorded trials:

- A slot is a trial index 1..T of a series. Its attempt is the latest one recorded
  for that index (a re-run recovering an interrupted trial replaces it; both stay
  recorded).
- y_t = 1 only for a *verified* success: the trial ended ``success`` and its latest
  replay verdict is ``verified`` (with success reproduced). y_t = 0 for a failure,
  and for a success whose replay disagreed (``mismatch``, counted separately).
- A success without a replay yet, or whose replay ended in ``error``, is ``pending``;
  a trial that never ended or ended ``incomplete`` is ``incomplete``; an index never
  started is ``pending``. These slots are reported, never imputed: a series with any
  of them is not *completed*, and its A, Q and derived figures are None.

Definitions for a completed series y_1..y_T:
  A = mean(y);  Q = (1/T) * sum_t prod_{j>=t} y_j  (= final success streak / T);
  first success = min t with y_t = 1;  regressions = #{t : y_{t-1} = 1, y_t = 0};
  sustained conversion = y_1 = 0 and y_T = 1 (failed first, ends in an unbroken
  success streak, which starts at ``conversion_trial``);  recovered = y_1 = 0 and
  some later y_t = 1;  efficiency = control steps and simulated time of the
  successful trials only, with first-to-last ratios (>1: later successes are cheaper).

Dataset figures group series by (model, mode). Each task contributes one value (the
mean over its completed series in the group); means are over completed tasks.
Intervals are percentile bootstraps over tasks: ``resamples`` draws of n tasks with
replacement from numpy's PCG64 generator seeded with ``seed``, 2.5/97.5 percentiles
for a 95% interval. Admitted and completed denominators are always reported.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec
import numpy as np

from roboswe.records.reader import RunReader, TrialView

SlotStatus = Literal["success", "failure", "incomplete", "pending"]

BOOTSTRAP_METHOD = "percentile bootstrap over tasks (numpy PCG64, seeded), 95% interval"


class TrialSlot(msgspec.Struct, frozen=True, kw_only=True):
    """The scored state of one trial index of a series."""

    index: int
    status: SlotStatus
    trial_id: str | None = None  # the attempt that fills the slot
    attempts: int = 0
    recovered_from: str | None = None  # the interrupted attempt this one re-ran
    outcome: str | None = None  # the attempt's recorded outcome
    verdict: str | None = None  # its latest replay verdict
    mismatch: bool = False  # a recorded success the replay did not reproduce (scored 0)
    reason: str = ""
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


class Efficiency(msgspec.Struct, frozen=True, kw_only=True):
    """Cost of the successful trials only: (trial index, value) pairs and first-to-last ratios."""

    control_steps: list[tuple[int, int]]
    sim_time: list[tuple[int, float]]
    steps_ratio: float | None  # steps(first success) / steps(last success); needs >= 2 successes
    sim_time_ratio: float | None


class SeriesMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """Figures of one series; those needing every slot decided are None otherwise."""

    series_id: str
    task: str
    model: str
    mode: str
    trials: int
    y: list[int | None]
    statuses: list[str]
    completed: bool
    incomplete: int
    pending: int
    mismatches: int
    A: float | None
    Q: float | None
    first_success: int | None
    regressions: int | None
    sustained_conversion: bool | None
    conversion_trial: int | None
    recovered: bool | None
    efficiency: Efficiency


class Estimate(msgspec.Struct, frozen=True, kw_only=True):
    """A mean over tasks with its bootstrap interval and denominator."""

    mean: float | None
    low: float | None
    high: float | None
    n: int


class Proportion(msgspec.Struct, frozen=True, kw_only=True):
    numerator: int
    denominator: int
    value: float | None


class DatasetMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """Figures for one (model, mode) group over the admitted tasks."""

    model: str
    mode: str
    admitted_tasks: int
    completed_tasks: int
    series_recorded: int
    series_completed: int
    incomplete_slots: int
    pending_slots: int
    mismatch_slots: int
    A: Estimate
    Q: Estimate
    success_by_trial: list[Proportion]  # over completed series, trial 1..T
    recovery: Proportion  # completed series failing trial 1 that later succeeded
    sustained_conversion: Proportion  # completed series failing trial 1 that end in a success streak
    regressions: int
    bootstrap: dict[str, str | int]


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


def efficiency(slots: Sequence[TrialSlot]) -> Efficiency:
    """Control steps and simulated time among successful trials only."""
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
        return TrialSlot(index=index, status="pending", reason="not started")
    view = attempts[-1]
    end, verification = view.end, view.verification
    common = dict(index=index, trial_id=view.trial_id, attempts=len(attempts), recovered_from=view.start.recovers,
                  verdict=verification.verdict if verification else None)
    if end is None:
        return TrialSlot(**common, status="incomplete", reason="interrupted")
    common.update(outcome=end.outcome, reason=end.reason, control_steps=end.control_steps, sim_time=end.sim_time)
    if end.outcome in ("incomplete", "pending", "failure"):
        return TrialSlot(**common, status=end.outcome)
    # a recorded success counts only once a replay agrees
    if verification is None or verification.verdict == "error":
        return TrialSlot(**common, status="pending")
    if verification.verdict == "verified" and verification.success_reproduced is not False:
        return TrialSlot(**common, status="success")
    return TrialSlot(**common, status="failure", mismatch=True)


def series_outcomes(reader: RunReader, run_id: str) -> list[SeriesOutcome]:
    """Score every series of a run from the database."""
    out = []
    for s in reader.series(run_id):
        by_index: dict[int, list[TrialView]] = defaultdict(list)
        for view in reader.trials(s.series_id):
            by_index[view.start.index].append(view)
        slots = [score_slot(t, by_index.get(t, [])) for t in range(1, s.trials + 1)]
        out.append(SeriesOutcome(series_id=s.series_id, task=s.task, model=s.model, mode=s.mode,
                                 trials=s.trials, slots=slots))
    return out


def series_metrics(series: SeriesOutcome) -> SeriesMetrics:
    """All per-series figures; those needing a complete series are None when it is not."""
    y = [slot.y for slot in series.slots]
    completed = all(v is not None for v in y)
    full: list[int] = [v for v in y if v is not None] if completed else []
    conversion = completed and full[0] == 0 and full[-1] == 1
    return SeriesMetrics(
        series_id=series.series_id, task=series.task, model=series.model, mode=series.mode,
        trials=series.trials, y=y, statuses=[s.status for s in series.slots], completed=completed,
        incomplete=sum(s.status == "incomplete" for s in series.slots),
        pending=sum(s.status == "pending" for s in series.slots),
        mismatches=sum(s.mismatch for s in series.slots),
        A=accuracy(full) if completed else None,
        Q=streak_score(full) if completed else None,
        first_success=first_success(full) if completed else None,
        regressions=regressions(full) if completed else None,
        sustained_conversion=conversion if completed else None,
        conversion_trial=(len(full) - final_streak(full) + 1) if conversion else None,
        recovered=(full[0] == 0 and any(full[1:])) if completed else None,
        efficiency=efficiency(series.slots),
    )


# --- dataset ------------------------------------------------------------------------------------


def bootstrap_interval(values: Sequence[float], *, seed: int, resamples: int) -> Estimate:
    """Mean of task-level values with a seeded percentile-bootstrap 95% interval."""
    n = len(values)
    if n == 0:
        return Estimate(mean=None, low=None, high=None, n=0)
    data = np.asarray(values, dtype=float)
    rng = np.random.Generator(np.random.PCG64(seed))
    means = data[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Estimate(mean=float(data.mean()), low=float(low), high=float(high), n=n)


def _proportion(numerator: int, denominator: int) -> Proportion:
    return Proportion(numerator=numerator, denominator=denominator,
                      value=numerator / denominator if denominator else None)


def dataset_metrics(
    metrics: Iterable[SeriesMetrics],
    *,
    admitted_tasks: Sequence[str] | None = None,
    seed: int = 0,
    resamples: int = 10_000,
) -> list[DatasetMetrics]:
    """Aggregate series by (model, mode) over tasks; ``admitted_tasks`` sets the admitted denominator."""
    groups: dict[tuple[str, str], list[SeriesMetrics]] = defaultdict(list)
    for m in metrics:
        groups[(m.model, m.mode)].append(m)
    out = []
    for (model, mode), members in sorted(groups.items()):
        done = [m for m in members if m.completed]
        by_task: dict[str, list[SeriesMetrics]] = defaultdict(list)
        for m in done:
            by_task[m.task].append(m)
        task_a = [float(np.mean([m.A for m in ms])) for ms in by_task.values()]
        task_q = [float(np.mean([m.Q for m in ms])) for ms in by_task.values()]
        admitted = set(admitted_tasks) if admitted_tasks is not None else {m.task for m in members}
        T = max((m.trials for m in members), default=0)
        failing_first = [m for m in done if m.y[0] == 0]
        out.append(DatasetMetrics(
            model=model, mode=mode,
            admitted_tasks=len(admitted), completed_tasks=len(by_task),
            series_recorded=len(members), series_completed=len(done),
            incomplete_slots=sum(m.incomplete for m in members),
            pending_slots=sum(m.pending for m in members),
            mismatch_slots=sum(m.mismatches for m in members),
            A=bootstrap_interval(task_a, seed=seed, resamples=resamples),
            Q=bootstrap_interval(task_q, seed=seed + 1, resamples=resamples),
            success_by_trial=[
                _proportion(sum(m.y[t] for m in done if len(m.y) > t), sum(len(m.y) > t for m in done))
                for t in range(T)
            ],
            recovery=_proportion(sum(bool(m.recovered) for m in failing_first), len(failing_first)),
            sustained_conversion=_proportion(sum(bool(m.sustained_conversion) for m in failing_first),
                                             len(failing_first)),
            regressions=sum(m.regressions or 0 for m in done),
            bootstrap={"method": BOOTSTRAP_METHOD, "resamples": resamples, "seed": seed, "confidence": "0.95"},
        ))
    return out


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
