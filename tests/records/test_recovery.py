"""Within-trial recovery on synthetic progress series: the state machine, its thresholds, the shipped rules."""

from __future__ import annotations

import numpy as np
import pytest

from roboswe.records.recovery import (
    RULES_PATH,
    RecoveryError,
    Rule,
    detect,
    load_rules,
    tally,
)

LIFT = Rule(name="cube dropped", measure="rise", body="cube", engaged=0.03, drop=0.02)
DRAWER = Rule(name="drawer closed again", measure="joint", joint="slide", engaged=0.10, drop=0.05)


def series(*segments: tuple[float, float, int]) -> np.ndarray:
    """Piecewise-linear progress: (from, to, rows) per segment."""
    return np.concatenate([np.linspace(a, b, n) for a, b, n in segments])


def run(rule: Rule, progress: np.ndarray, on_target=None, dt: float = 0.05):
    steps = list(range(len(progress)))
    return detect(rule, steps, [s * dt for s in steps], progress, on_target)


def test_drop_and_pick_up_again_is_one_recovered_mishap_with_its_step_count():
    # lift to 10 cm (rows 0-19), drop to the table (20-24), lie there (25-34), lift again (35-54)
    p = series((0.0, 0.10, 20), (0.10, 0.0, 5), (0.0, 0.0, 10), (0.0, 0.10, 20))
    (m,) = run(LIFT, p)
    onset = int(np.argmax((np.arange(len(p)) >= 20) & (p < 0.03)))  # the first row below engaged after the peak
    back = int(np.argmax((np.arange(len(p)) > onset) & (p >= 0.03)))
    assert (m.step, m.recovered_step, m.censored_at) == (onset, back, None)
    assert m.steps_to_recovery == back - onset and m.seconds_to_recovery == pytest.approx((back - onset) * 0.05)
    assert m.peak == pytest.approx(0.10) and m.level < 0.03
    assert tally([m]) == {"mishaps": 1, "recovered": 1, "censored": 0,
                          "median_steps_to_recovery": back - onset,
                          "median_seconds_to_recovery": pytest.approx((back - onset) * 0.05)}


def test_drop_and_give_up_is_censored_at_the_last_step():
    p = series((0.0, 0.10, 20), (0.10, 0.0, 5), (0.0, 0.0, 30))
    (m,) = run(LIFT, p)
    assert m.recovered_step is None and m.censored_at == len(p) - 1 and m.steps_to_recovery is None
    assert tally([m])["censored"] == 1 and tally([m])["median_steps_to_recovery"] is None


def test_never_dropped_and_never_lifted_have_no_mishap():
    assert run(LIFT, series((0.0, 0.12, 30), (0.12, 0.12, 30))) == []
    # pushed about below the engaged level: nothing was lifted, so nothing was lost
    assert run(LIFT, series((0.0, 0.029, 10), (0.029, 0.0, 10), (0.0, 0.029, 10))) == []


def test_lowering_a_held_object_is_not_a_mishap_until_it_falls_below_engaged():
    # 15 cm down to 5 cm is a fall of 10 cm but still lifted
    assert run(LIFT, series((0.0, 0.15, 20), (0.15, 0.05, 20), (0.05, 0.05, 10))) == []


def test_drop_margin_keeps_jitter_around_the_threshold_from_counting():
    # engaged at 3.2 cm, dips to 2.5 cm: below engaged but less than `drop` below the peak
    jitter = series((0.0, 0.032, 10), (0.032, 0.025, 3), (0.025, 0.032, 3))
    assert run(LIFT, jitter) == []
    # the same dip with a 5 mm margin is a mishap, recovered when it is back at 3 cm
    (m,) = run(Rule(name="tight", measure="rise", body="cube", engaged=0.03, drop=0.005), jitter)
    assert m.recovered_step is not None


def test_regain_level_can_ask_for_more_than_engaged():
    p = series((0.0, 0.10, 20), (0.10, 0.0, 5), (0.0, 0.05, 10), (0.05, 0.05, 10))
    strict = Rule(name="strict", measure="rise", body="cube", engaged=0.03, drop=0.02, regain=0.08)
    assert run(LIFT, p)[0].recovered_step is not None
    assert run(strict, p)[0].censored_at == len(p) - 1


def test_two_drops_two_recoveries_each_measured_from_its_own_onset():
    drop_and_lift = ((0.10, 0.0, 5), (0.0, 0.0, 4), (0.0, 0.10, 10))
    p = series((0.0, 0.10, 20), *drop_and_lift, *drop_and_lift, (0.10, 0.0, 5))  # the third drop is censored
    ms = run(LIFT, p)
    assert [m.censored_at for m in ms] == [None, None, len(p) - 1]
    assert ms[0].steps_to_recovery == ms[1].steps_to_recovery > 0  # the same shape twice
    assert ms[1].step - ms[0].step == 19  # one drop-and-lift apart


def test_a_drawer_that_closes_again_and_is_reopened():
    p = series((0.0, 0.30, 20), (0.30, 0.02, 6), (0.02, 0.30, 15))
    (m,) = run(DRAWER, p)
    assert m.rule == "drawer closed again" and m.recovered_step is not None
    assert p[m.step] < 0.10 <= p[m.step - 1]  # the first row below the opened level
    assert p[m.recovered_step] >= 0.10 and p[m.recovered_step - 1] < 0.10


def test_a_fall_over_the_target_is_a_placement_not_a_mishap():
    p = series((0.0, 0.10, 20), (0.10, 0.0, 5), (0.0, 0.0, 10))
    over = np.zeros(len(p), dtype=bool)
    over[18:] = True
    assert run(LIFT, p, on_target=over) == []
    assert len(run(LIFT, p, on_target=~over)) == 1


def test_the_shipped_rules_load_and_cover_the_robosuite_pilot():
    rules = load_rules()
    assert {"lift-panda", "stack-panda", "door-panda", "kit-opendrawer"} <= set(rules)
    assert rules["lift-panda"].rules[0].body == "cube_main"


@pytest.mark.parametrize("body, needle", [
    ('measure = "rise"\nengaged = 0.03\ndrop = 0.02', "needs body"),
    ('measure = "opening"\njoint = "j"\nengaged = 0.3\ndrop = 0.1', "needs fixture"),
    ('measure = "rise"\nbody = "b"\nengaged = 0.0\ndrop = 0.02', "must be > 0"),
    ('measure = "rise"\nbody = "b"\nengaged = 0.03\ndrop = 0.02\nthreshold = 1', "threshold"),
])
def test_malformed_rules_are_refused_with_the_file_named(tmp_path, body, needle):
    path = tmp_path / "recovery.toml"
    path.write_text(f'[t]\n[[t.rules]]\nname = "x"\n{body}\n')
    with pytest.raises(RecoveryError, match=needle) as e:
        load_rules(path)
    assert str(path) in str(e.value)


def test_rules_file_is_outside_every_task_manifest():
    # diagnostics never change a score, so no task's protocol identity includes them
    from roboswe.sim.manifest import load_manifest

    m = load_manifest(RULES_PATH.parents[1] / "tasks" / "lift-panda.toml")
    assert "recovery" not in str(m.to_builtins()) and "cube dropped" not in str(m.to_builtins())


def test_a_series_whose_manifest_is_not_the_pinned_one_is_not_measured_and_tasks_without_rules_are_named(tmp_path):
    import time

    from roboswe.protocol.recorder import RunPins, RunRecord, SeriesRecord

    from roboswe.records.reader import RunReader
    from roboswe.records.recovery import run_recovery
    from roboswe.records.store import RunStore

    store = RunStore.open(tmp_path / "run", flush_interval=0.01)
    now = time.time()
    store.put_durable(RunRecord(run_id="r1", created_at=now, config=RunPins(), admitted_sha256=""),
                      *(SeriesRecord(series_id=f"r1/{task}", run_id="r1", task=task, model="m", mode="retain",
                                     created_at=now, pins={"manifest_digest": "0" * 64})
                        for task in ("lift-panda", "paint-three-strokes")))
    store.close()
    with RunReader(tmp_path / "run") as reader:
        data = run_recovery(reader)
    (series,) = data["series"]
    assert "the series pinned 000000000000" in series["error"] and series["mishaps"] == 0
    assert data["without_rules"] == ["paint-three-strokes"] and "never part of A or Q" in data["label"]
