"""The one scoring function: a run's series, scored and aggregated over tasks, with denominators.

``score_run`` is what ``roboswe report``, RUN_DIR/results.json and the viewer all show, so
the three never disagree. Per-series rules are in ``roboswe.records.metrics``; here:

- Denominators: the *admitted* tasks of the run (the tasks it was asked to run), the
  exclusions with their reasons (tasks the admitted file excluded, or admitted tasks the run
  did not select), and per group the tasks whose series completed.
- Headline: A (and Q) over the completed tasks, always beside the count of missing slots
  (unscored slots plus the slots of admitted tasks without a completed series) and the
  lower bound that counts every missing slot as a failure, over all admitted tasks.
- RoboSWE-ADAPT's figures over completed tasks: success at each trial, success *by* trial t
  (at least one verified success in trials 1..t), the gain (by T minus trial 1), first
  success trial, trajectory classes, recovery, efficiency (geometric mean over tasks of the
  first-to-last ratio of control steps and of simulated time, among verified successes).
- Intervals, 95%: means and differences (A, Q, gain, efficiency) by a percentile bootstrap
  over tasks, ``BOOTSTRAP_RESAMPLES`` draws from numpy's PCG64 seeded with ``BOOTSTRAP_SEED``
  (every figure over the same n tasks uses the same draws, which makes paired figures
  paired); proportions of tasks by the Wilson score interval, which stays honest at 0/n and
  n/n where a bootstrap collapses to a point. Every figure carries its n.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from roboswe.protocol.recorder import RunPins
from roboswe.records.metrics import (
    TRAJECTORIES,
    UNSCORED,
    SeriesMetrics,
    series_metrics,
    series_outcomes,
)
from roboswe.records.reader import RunReader

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
Z95 = 1.959963984540054
BOOTSTRAP = {"method": "percentile bootstrap over tasks (numpy PCG64, seeded), 95% interval",
             "resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED,
             "proportions": "Wilson score interval, 95%"}


class Estimate(msgspec.Struct, frozen=True, kw_only=True):
    """A mean (or paired difference) over tasks with its bootstrap 95% interval and n."""

    mean: float | None
    low: float | None
    high: float | None
    n: int


class Proportion(msgspec.Struct, frozen=True, kw_only=True):
    """k of n tasks, with a Wilson 95% interval."""

    numerator: int
    denominator: int
    value: float | None
    low: float | None
    high: float | None


class Denominators(msgspec.Struct, frozen=True, kw_only=True):
    """Which tasks the figures are over, and which were left out and why."""

    admitted: list[str]
    excluded: dict[str, str]  # task -> reason
    source: str  # where the exclusions were read from, or why they are unknown


class DatasetMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """Figures for one (model, mode) group over the admitted tasks."""

    model: str
    mode: str
    trials: int
    admitted_tasks: int
    completed_tasks: int
    missing_tasks: list[str]  # admitted tasks without a completed series
    series_recorded: int
    series_completed: int
    slots: dict[str, int]  # status -> count over the recorded series (scored and unscored)
    missing_slots: int  # unscored slots + the slots of admitted tasks with no series recorded
    A: Estimate  # over completed tasks
    Q: Estimate
    A_lower: Estimate  # over all admitted tasks, missing slots counted as failures
    Q_lower: Estimate
    headline: str
    trial1: Proportion
    success_at_trial: list[Proportion]  # y_t = 1, trial 1..T
    success_by_trial: list[Proportion]  # at least one verified success in trials 1..t
    gain: Estimate  # success by trial T minus trial-1 success, paired over tasks
    first_success: dict[str, int]  # "1".."T" and "none" -> completed tasks
    trajectories: dict[str, Proportion]
    regressions: int
    recovery: Proportion  # completed tasks failing trial 1 that reach a verified success
    efficiency_steps_ratio: Estimate  # geometric mean of first/last control steps, tasks with >= 2 successes
    efficiency_sim_time_ratio: Estimate


class RunScore(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    denominators: Denominators
    series: list[SeriesMetrics]
    datasets: list[DatasetMetrics]
    bootstrap: dict[str, Any]


# --- intervals ------------------------------------------------------------------------------------


def resample_indices(n: int, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """(resamples, n) task indices drawn with replacement; the same for every figure over n tasks."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return rng.integers(0, n, size=(resamples, n))


def bootstrap_mean(values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
                   seed: int = BOOTSTRAP_SEED, transform: Callable[[float], float] | None = None) -> Estimate:
    """Mean of task-level values with a percentile-bootstrap 95% interval (``transform`` maps all three)."""
    n = len(values)
    if n == 0:
        return Estimate(mean=None, low=None, high=None, n=0)
    data = np.asarray(values, dtype=float)
    means = data[resample_indices(n, resamples=resamples, seed=seed)].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    f = transform or float
    return Estimate(mean=f(float(data.mean())), low=f(float(low)), high=f(float(high)), n=n)


def paired_difference(after: Sequence[float], before: Sequence[float], **kwargs: Any) -> Estimate:
    """Mean of (after - before) over the same tasks, resampling tasks (pairs stay together)."""
    if len(after) != len(before):
        raise ValueError(f"paired difference needs one value per task on both sides ({len(after)} vs {len(before)})")
    return bootstrap_mean([a - b for a, b in zip(after, before, strict=True)], **kwargs)


def wilson(k: int, n: int) -> Proportion:
    """k of n with the Wilson score 95% interval."""
    if n == 0:
        return Proportion(numerator=k, denominator=0, value=None, low=None, high=None)
    p = k / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Proportion(numerator=k, denominator=n, value=p, low=max(0.0, centre - half), high=min(1.0, centre + half))


# --- denominators ---------------------------------------------------------------------------------


def denominators(pins: RunPins, admitted_sha256: str, recorded_tasks: Sequence[str],
                 admitted_tasks: Sequence[str] | None = None) -> Denominators:
    """The admitted tasks and the exclusions with reasons, from the run's pinned config and admitted file."""
    tasks = list(admitted_tasks if admitted_tasks is not None else pins.tasks)
    if not tasks:
        tasks = list(dict.fromkeys(recorded_tasks))
    excluded: dict[str, str] = {}
    path = pins.admitted_path
    if not path:
        source = "unknown: the run records no admitted file"
    else:
        from roboswe.evaluation.admission import AdmissionError, read_admitted

        try:
            admitted = read_admitted(path)
        except AdmissionError as e:
            return Denominators(admitted=tasks, excluded={}, source=f"unknown: {e}")
        if admitted_sha256 and admitted.digest != admitted_sha256:
            return Denominators(admitted=tasks, excluded={}, source=(
                f"unknown: {path} now has digest {admitted.digest[:16]}, the run was pinned to {admitted_sha256[:16]}"))
        for t in admitted.tasks:
            if t.status != "admitted":
                excluded[t.id] = t.reason or "excluded at admission"
            elif t.id not in tasks:
                excluded[t.id] = "admitted, not selected for this run (--tasks)"
        source = str(Path(path))
    return Denominators(admitted=tasks, excluded=excluded, source=source)


# --- aggregation ----------------------------------------------------------------------------------


def _latest_by_task(members: Sequence[SeriesMetrics]) -> dict[str, SeriesMetrics]:
    by_task: dict[str, SeriesMetrics] = {}
    for m in members:  # series come in creation order: a task's latest series stands for it
        by_task[m.task] = m
    return by_task


def headline(d: dict[str, Any]) -> str:
    """The sentence every output leads with: A over completed tasks, missing slots, the lower bound."""
    a, low_a = d["A"], d["A_lower"]

    def est(e: dict[str, Any]) -> str:
        return "-" if e["mean"] is None else f"{e['mean']:.2f} [{e['low']:.2f}, {e['high']:.2f}]"

    return (f"A = {est(a)} over {d['completed_tasks']} of {d['admitted_tasks']} admitted tasks; "
            f"{d['missing_slots']} slot(s) missing; lower bound counting them as failures: "
            f"{est(low_a)} (n={low_a['n']})")


def dataset_metrics(metrics: Sequence[SeriesMetrics], *,
                    admitted_tasks: Sequence[str] | None = None) -> list[DatasetMetrics]:
    """Aggregate series by (model, mode) over tasks; ``admitted_tasks`` sets the admitted denominator."""
    boot: dict[str, Any] = {}  # the default resamples and seed, the same for every figure and output
    groups: dict[tuple[str, str], list[SeriesMetrics]] = defaultdict(list)
    for m in metrics:
        groups[(m.model, m.mode)].append(m)
    out = []
    for (model, mode), members in sorted(groups.items()):
        by_task = _latest_by_task(members)
        admitted = list(admitted_tasks) if admitted_tasks is not None else list(by_task)
        admitted += [t for t in by_task if t not in admitted]  # a recorded task is never dropped
        T = max(m.trials for m in members)
        done = {t: m for t, m in by_task.items() if m.completed}
        ys = [[v for v in m.y if v is not None] for m in done.values()]
        slots = {s: 0 for s in ("success", "failure", *UNSCORED)}
        for m in by_task.values():
            for s in m.statuses:
                slots[s] += 1
        unrecorded = [t for t in admitted if t not in by_task]
        missing_slots = sum(slots[s] for s in UNSCORED) + T * len(unrecorded)
        lower_a = [by_task[t].A_lower if t in by_task else 0.0 for t in admitted]
        lower_q = [by_task[t].Q_lower if t in by_task else 0.0 for t in admitted]
        by_t = [[int(any(y[: t + 1])) for y in ys] for t in range(T)]
        first = {str(t): 0 for t in range(1, T + 1)} | {"none": 0}
        for m in done.values():
            first[str(m.first_success) if m.first_success else "none"] += 1
        failing_first = [y for y in ys if y[0] == 0]
        ratios_steps = [math.log(m.efficiency.steps_ratio) for m in done.values() if m.efficiency.steps_ratio]
        ratios_sim = [math.log(m.efficiency.sim_time_ratio) for m in done.values() if m.efficiency.sim_time_ratio]
        fields: dict[str, Any] = dict(
            model=model, mode=mode, trials=T, admitted_tasks=len(admitted), completed_tasks=len(done),
            missing_tasks=[t for t in admitted if t not in done],
            series_recorded=len(members), series_completed=sum(m.completed for m in members),
            slots=slots, missing_slots=missing_slots,
            A=bootstrap_mean([m.A for m in done.values()], **boot),
            Q=bootstrap_mean([m.Q for m in done.values()], **boot),
            A_lower=bootstrap_mean(lower_a, **boot), Q_lower=bootstrap_mean(lower_q, **boot),
            trial1=wilson(sum(y[0] for y in ys), len(ys)),
            success_at_trial=[wilson(sum(y[t] for y in ys if len(y) > t), sum(len(y) > t for y in ys))
                              for t in range(T)],
            success_by_trial=[wilson(sum(col), len(col)) for col in by_t],
            gain=paired_difference(by_t[-1], [y[0] for y in ys], **boot),
            first_success=first,
            trajectories={k: wilson(sum(m.trajectory == k for m in done.values()), len(done)) for k in TRAJECTORIES},
            regressions=sum(m.regressions or 0 for m in done.values()),
            recovery=wilson(sum(any(y[1:]) for y in failing_first), len(failing_first)),
            efficiency_steps_ratio=bootstrap_mean(ratios_steps, transform=math.exp, **boot),
            efficiency_sim_time_ratio=bootstrap_mean(ratios_sim, transform=math.exp, **boot),
        )
        fields["headline"] = headline({k: msgspec.to_builtins(v) for k, v in fields.items()})
        out.append(DatasetMetrics(**fields))
    return out


def score_run(reader: RunReader, run_id: str, *, admitted_tasks: Sequence[str] | None = None) -> RunScore:
    """Score every series of a run and aggregate by task; the figures report, results.json and viewer show."""
    run = reader.run(run_id)
    per_series = [series_metrics(o) for o in series_outcomes(reader, run_id)]
    denom = denominators(run.config, run.admitted_sha256, [m.task for m in per_series], admitted_tasks)
    return RunScore(run_id=run_id, denominators=denom, series=per_series,
                    datasets=dataset_metrics(per_series, admitted_tasks=denom.admitted), bootstrap=dict(BOOTSTRAP))
