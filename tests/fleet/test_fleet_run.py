"""Three series with `--workers 2` against the same three run one after another (`--workers 1`).

The tasks are three copies of lift-panda under their own ids (one admission, so the test
does not spend minutes admitting), one trial each, the deterministic demo participant: the
two runs must record every series completely, replay-verified, with the same outcomes and
the same control steps, and the two-worker run must have used both workers.
"""

from __future__ import annotations

import json

import pytest

from roboswe.fleet.roster import read_roster
from roboswe.records.reader import RunReader
from tests.series.conftest import roboswe, write_config

from .conftest import TASKS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(work_dir, admitted_three):
    config = write_config(work_dir, "fleet", series="trials = 1")
    done = {}
    for workers in (2, 1):
        run_dir = work_dir / f"fleet-w{workers}"
        proc = roboswe("run", str(admitted_three), "--config", str(config), "--out", str(run_dir), "--no-video",
                       "--workers", str(workers), timeout=1800)
        done[workers] = (proc, run_dir)
    return done


def outcomes(run_dir) -> dict[str, list[tuple]]:
    with RunReader(run_dir) as reader:
        table = {}
        for s in reader.series():
            views = reader.trials(s.series_id)
            table[s.task] = [(v.start.index, v.start.attempt, v.end.outcome, v.end.reason, v.end.control_steps,
                              v.start.fingerprint, v.verification and v.verification.verdict) for v in views]
        return table


def test_both_runs_exit_cleanly(runs):
    for workers, (proc, _) in runs.items():
        assert proc.returncode == 0, (workers, proc.stdout[-3000:], proc.stderr[-3000:])
        assert f"{workers} worker(s) (--workers)" in proc.stderr


def test_two_workers_record_every_series_completely_and_verified(runs):
    table = outcomes(runs[2][1])
    assert sorted(table) == sorted(TASKS)
    for task, trials in table.items():
        assert len(trials) == 1, (task, trials)
        index, attempt, outcome, _reason, steps, _, verdict = trials[0]
        assert (index, attempt) == (1, 0)
        assert outcome in ("success", "failure") and steps > 0
        assert verdict == "verified", (task, trials)


def test_same_outcomes_as_one_worker(runs):
    assert outcomes(runs[2][1]) == outcomes(runs[1][1])


def test_two_workers_ran_on_their_own_actors(runs):
    run_dir = runs[2][1]
    state = json.loads((run_dir / "supervisor.json").read_text())
    assert {"simulator.1", "simulator.2", "sandbox_bridge.1", "sandbox_bridge.2",
            "context_manager.1", "context_manager.2"} <= set(state["actors"])
    assert "simulator" not in state["actors"]
    # Both simulators built a scene: the series really were spread over the workers.
    loaded = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if '"task_loaded"' in line]
    assert {e["actor"] for e in loaded} == {"simulator.1", "simulator.2"}
    one = json.loads((runs[1][1] / "supervisor.json").read_text())
    assert "simulator" in one["actors"] and "simulator.1" not in one["actors"]
    # The coordinator's roster (what `roboswe status` shows) named each series on the worker that ran it.
    for workers, (_, run_dir) in runs.items():
        with RunReader(run_dir) as reader:
            ran = sorted(s.series_id for s in reader.series())
        roster = read_roster(run_dir)
        assert (roster.address, [w.state for w in roster.workers], all(w.done for w in roster.workers),
                sorted(s for w in roster.workers for s in w.done)) == ("local", ["released"] * workers, True, ran)


def test_each_worker_stages_its_next_series_first_scene_during_the_last_trial(runs):
    """A worker takes its next series from the queue once its last trial's scene is loaded, and the
    simulator builds that series' first scene meanwhile; it waits, staged, through the replay of the
    series before it (whose Loads build their own scenes) and its trial 1 takes it."""
    for workers, expected in ((1, 2), (2, 1)):  # 3 one-trial series: all but each worker's first are staged
        run_dir = runs[workers][1]
        loaded = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if '"task_loaded"' in line]
        assert len(loaded) == 6, loaded  # three trials, three replays
        assert sum(e["staged"] for e in loaded) == expected, (workers, [(e["actor"], e["task"], e["staged"]) for e in loaded])
