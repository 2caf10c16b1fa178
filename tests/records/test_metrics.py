"""Adaptation metrics: hand-worked series, properties of Q and A, scoring from records, no imputation."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from roboswe.protocol.recorder import VerificationRecord

from roboswe.records.metrics import (
    SeriesOutcome,
    TrialSlot,
    accuracy,
    series_metrics,
    series_outcomes,
    streak_score,
)
from roboswe.records.reader import RunReader
from roboswe.records.scoring import bootstrap_mean, dataset_metrics, wilson

from .conftest import run_records, trial_records

ys = st.lists(st.integers(0, 1), min_size=1, max_size=12)


def _series(pattern: str, task: str = "Lift", steps: list[int] | None = None, model: str = "m") -> SeriesOutcome:
    status = {"S": "success", "F": "failure", "M": "mismatch", "E": "replay_error", "U": "unverified",
              "I": "incomplete", "N": "not_started"}
    slots = [TrialSlot(index=t, status=status[c], control_steps=(steps or [0] * len(pattern))[t - 1],
                       sim_time=(steps or [0] * len(pattern))[t - 1] * 0.05)
             for t, c in enumerate(pattern, 1)]
    return SeriesOutcome(series_id=f"{task}-{pattern}", task=task, model=model, mode="retain",
                         trials=len(pattern), slots=slots)


@pytest.mark.parametrize(
    ("pattern", "A", "Q", "first", "regressions", "converted", "conversion_trial", "recovered"),
    [
        ("FFSSS", 3 / 5, 3 / 5, 3, 0, True, 3, True),
        ("SSFSS", 4 / 5, 2 / 5, 1, 1, False, None, False),
        ("SFSFS", 3 / 5, 1 / 5, 1, 2, False, None, False),
        ("FSFSF", 2 / 5, 0.0, 2, 2, False, None, True),
        ("SSSSS", 1.0, 1.0, 1, 0, False, None, False),
        ("FFFFF", 0.0, 0.0, None, 0, False, None, False),
        ("FFFFS", 1 / 5, 1 / 5, 5, 0, True, 5, True),
    ],
)
def test_hand_worked_series(pattern, A, Q, first, regressions, converted, conversion_trial, recovered):
    m = series_metrics(_series(pattern))
    assert m.trajectory == ("never" if "S" not in pattern else "regression" if regressions
                            else "from_outset" if pattern[0] == "S" else "sustained_conversion")
    assert m.completed and m.y == [int(c == "S") for c in pattern]
    assert m.A == pytest.approx(A) and m.Q == pytest.approx(Q)
    assert m.first_success == first and m.regressions == regressions
    assert m.sustained_conversion is converted and m.conversion_trial == conversion_trial
    assert m.recovered is recovered


@given(ys)
def test_q_matches_the_product_definition(y):
    T = len(y)
    by_definition = sum(math.prod(y[t:]) for t in range(T)) / T
    assert streak_score(y) == pytest.approx(by_definition)


@given(ys)
def test_q_never_exceeds_a_and_equals_it_only_for_a_success_suffix(y):
    assert streak_score(y) <= accuracy(y) + 1e-12
    successes_are_suffix = y == sorted(y)
    assert (streak_score(y) == accuracy(y)) == successes_are_suffix


@given(ys, st.integers(0, 1))
def test_a_final_failure_zeroes_q_and_a_final_success_raises_it(y, last):
    extended = [*y, last]
    if last == 0:
        assert streak_score(extended) == 0
    else:
        assert streak_score(extended) * len(extended) == streak_score(y) * len(y) + 1


@given(st.text(alphabet="SFMEUIN", min_size=1, max_size=8))
def test_unscored_slots_are_counted_in_their_own_columns_never_imputed(pattern):
    m = series_metrics(_series(pattern))
    assert m.unscored == {"mismatch": pattern.count("M"), "replay_error": pattern.count("E"),
                          "unverified": pattern.count("U"), "incomplete": pattern.count("I"),
                          "not_started": pattern.count("N")}
    assert m.scored == pattern.count("S") + pattern.count("F")
    assert m.A_lower == pytest.approx(pattern.count("S") / len(pattern))  # unscored counted as failures
    if set(pattern) - {"S", "F"}:
        assert not m.completed
        assert m.A is None and m.Q is None and m.first_success is None and m.recovered is None
        assert m.trajectory is None
    else:
        assert m.completed and m.A == pattern.count("S") / len(pattern) and m.A_lower == m.A


def test_efficiency_counts_successful_trials_only():
    m = series_metrics(_series("FSFSS", steps=[6000, 900, 6000, 500, 300]))
    assert m.efficiency.control_steps == [(2, 900), (4, 500), (5, 300)]
    assert m.efficiency.steps_ratio == pytest.approx(3.0)
    assert m.efficiency.sim_time_ratio == pytest.approx(3.0)
    assert series_metrics(_series("FFFFS", steps=[1, 1, 1, 1, 5])).efficiency.steps_ratio is None


def test_dataset_denominators_and_seeded_bootstrap():
    series = [_series("FFSSS", "Lift"), _series("SSSSS", "Stack"), _series("FFFFF", "Door"),
              _series("FSIFS", "Wipe")]
    metrics = [series_metrics(s) for s in series]
    (d,) = dataset_metrics(metrics, admitted_tasks=["Lift", "Stack", "Door", "Wipe", "Never"])
    assert (d.admitted_tasks, d.completed_tasks, d.series_recorded, d.series_completed) == (5, 3, 4, 3)
    assert d.missing_tasks == ["Wipe", "Never"]
    assert d.slots["incomplete"] == 1 and d.missing_slots == 1 + 5  # Wipe's slot 3, and Never's five
    assert d.A.mean == pytest.approx((3 / 5 + 1 + 0) / 3) and d.A.n == 3
    assert d.A.low <= d.A.mean <= d.A.high
    assert d.Q.mean == pytest.approx((3 / 5 + 1 + 0) / 3)
    assert d.A_lower.n == 5 and d.A_lower.mean == pytest.approx((3 / 5 + 1 + 0 + 2 / 5 + 0) / 5)
    assert [p.numerator for p in d.success_at_trial] == [1, 1, 2, 2, 2]
    assert [p.numerator for p in d.success_by_trial] == [1, 1, 2, 2, 2]  # Lift first succeeds at 3, Door never
    assert all(p.denominator == 3 for p in d.success_at_trial)
    assert d.gain.mean == pytest.approx(1 / 3) and d.gain.n == 3
    assert (d.recovery.numerator, d.recovery.denominator) == (1, 2)
    assert d.first_success == {"1": 1, "2": 0, "3": 1, "4": 0, "5": 0, "none": 1}
    assert {k: p.numerator for k, p in d.trajectories.items()} == {
        "from_outset": 1, "sustained_conversion": 1, "regression": 0, "never": 1}
    assert "6 slot(s) missing" in d.headline and "lower bound" in d.headline
    again = dataset_metrics(metrics, admitted_tasks=["Lift", "Stack", "Door", "Wipe", "Never"])
    assert again == [d]  # seeded: same intervals every time


def test_bootstrap_of_identical_values_is_degenerate_and_empty_is_none():
    e = bootstrap_mean([0.4] * 6, resamples=500)
    assert e.low == pytest.approx(0.4) and e.high == pytest.approx(0.4)
    assert bootstrap_mean([], resamples=500).mean is None


def test_wilson_interval_matches_the_textbook_values():
    half = wilson(1, 2)
    assert (half.low, half.high) == (pytest.approx(0.0945, abs=1e-4), pytest.approx(0.9055, abs=1e-4))
    none_of = wilson(0, 10)  # does not collapse to a point at 0/n
    assert none_of.low == 0.0 and none_of.high == pytest.approx(0.2775, abs=1e-4)
    assert wilson(0, 0).value is None


def _verify(trial_id: str, verdict: str, reproduced: bool | None = True, divergence: str = "") -> VerificationRecord:
    return VerificationRecord(verification_id=f"{trial_id}/v", trial_id=trial_id, verdict=verdict,
                              outcome_reproduced=reproduced, first_divergence=divergence,
                              started_at=time.time(), ended_at=time.time())


def test_a_replayed_failure_scores_0_and_a_success_only_when_its_replay_is_verified(store, tmp_path):
    sid = "r1/lift"
    diverged = "per-step states diverge from control step 7"
    store.put_durable(
        *run_records(series_id=sid),
        # a failure whose replay diverged and even reached success: still the recorded failure
        *trial_records(sid, 1, "failure"), _verify(f"{sid}/t1a0", "mismatch", False, diverged),
        *trial_records(sid, 2, "success"), _verify(f"{sid}/t2a0", "mismatch", False, diverged),
        *trial_records(sid, 3, "failure"), _verify(f"{sid}/t3a0", "error", None),
        *trial_records(sid, 4, None),  # interrupted ...
        *trial_records(sid, 4, "success", attempt=1, recovers=f"{sid}/t4a0"), _verify(f"{sid}/t4a1", "verified"),
        *trial_records(sid, 5, "failure"), _verify(f"{sid}/t5a0", "verified", True),  # an honest failure, reproduced
    )
    with RunReader(tmp_path / "run") as reader:
        (outcome,) = series_outcomes(reader, "r1")
    slots = outcome.slots
    assert [s.status for s in slots] == ["failure", "mismatch", "replay_error", "success", "failure"]
    assert slots[0].verdict == "mismatch" and slots[0].divergence == diverged and slots[1].divergence == diverged
    assert slots[4].divergence == "" and slots[4].y == 0
    assert slots[3].attempts == 2 and slots[3].recovered_from == f"{sid}/t4a0"
    m = series_metrics(outcome)
    assert m.y == [0, None, None, 1, 0] and not m.completed and m.A is None
    assert m.unscored["mismatch"] == 1 and m.unscored["replay_error"] == 1
