"""Every kind of replay divergence gets the verdict it deserves, with the first divergence named.

Each test runs a one-trial series in process (tests/evaluation/harness.py: the real handlers
around the fake kinematic simulator), then changes one thing about the replay and checks the
verdict against values this test works out itself: the perturbed action's control step from
the recorded exec's step range, the fingerprint of a changed simulator from a backend built
here, the recorded success interval read back from the database.

- ``mismatch``: the robot moves differently while the program prints the same, a different
  success interval, a different exit status, a different limit;
- ``error``: the replay's sandbox image or fresh-scene fingerprint is not the trial's.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np
import pytest
import trio
from roboswe.sim.physics_state import trace_arrays

from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.evaluation.verify import compare_states, verify_series
from roboswe.records.metrics import series_metrics, series_outcomes
from roboswe.records.reader import RunReader

from .agents import ReachAgent, WanderAgent
from .harness import (
    RUN_ID,
    admitted_task,
    peers,
    reach_manifest,
    reader_factory,
    record_run,
    series_plan,
)


def _tamper_replay(bridge, *, actions=None, feedback=None) -> None:
    """Change what the stand-in bridge does from now on (called after the series, so for the replay only).

    ``actions(list) -> list`` rewrites a plan's actions before they reach the simulator,
    ``feedback(ExecFeedback) -> ExecFeedback`` rewrites what the exec reports."""
    run = bridge._run

    async def tampered_run(file: Path, script: str, limits):
        if actions is not None:
            plan = json.loads(file.read_text())
            plan["actions"] = actions(plan["actions"])
            file = file.with_name(file.name + ".replayed")
            file.write_text(json.dumps(plan))
        fb = await run(file, script, limits)
        return feedback(fb) if feedback is not None else fb

    bridge._run = tampered_run


async def _series_then_replay(tmp_path, agent, *, tamper=None, before_verify=None, reference=None):
    """Run one trial, apply ``tamper(links)``, replay; returns (run_dir, series_id, verification)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    manifest = reach_manifest()
    task = admitted_task(manifest)
    plan = series_plan(run_dir, task, trials=1)
    progress = Progress()
    with trio.fail_after(60):
        async with peers(run_dir, agent) as links:
            await record_run(links)
            (end,) = await run_series(links, plan, progress, reader_factory(run_dir))
            await links.recorder.flush()
            if tamper is not None:
                tamper(links)
            if before_verify is not None:
                before_verify()
            with RunReader(run_dir) as reader:
                (record,) = await verify_series(links, reader, progress, run_dir, plan.series_id, manifest,
                                                reference or plan.reference_fingerprint)
    return run_dir, plan, end, record


def _first_exec(reader: RunReader, trial_id: str):
    return next(o for o in reader.operations(trial_id) if o.operation == "exec")


# ---- the per-step comparison itself, on a tampered control trace -----------------------------------


async def test_compare_states_names_the_first_tampered_step_and_ignores_nothing_else(tmp_path):
    run_dir, plan, end, _ = await _series_then_replay(tmp_path, ReachAgent())
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        traces = reader.control_traces(view.trial_id)
        assert traces, "the trial recorded no control traces"
        # The replay's states as verify collects them, rebuilt here from the record: (steps, qpos, qvel, action) chunks.
        chunks = [(np.arange(t.step_start, t.step_end), trace_arrays(t)["qpos"].copy(), trace_arrays(t)["qvel"].copy(),
                   trace_arrays(t).get("action", np.zeros((t.step_end - t.step_start, 0))).copy()) for t in traces]
        steps = np.concatenate([c[0] for c in chunks])
        assert len(steps) == end.control_steps > 4

        def compare(mutate=None) -> tuple[str, dict]:
            taken = [tuple(a.copy() for a in c) for c in chunks]
            if mutate is not None:
                mutate(taken)
            detail = {"_states": taken}
            return compare_states(reader, view, detail), detail

        same, detail = compare()
        assert same == "" and detail["states"]["compared"] == len(steps)

        # One qpos value of one row, in the second chunk when there is one: the message names that row's step.
        chunk = 1 if len(chunks) > 1 else 0
        row = len(chunks[chunk][0]) // 2
        expected_step = int(chunks[chunk][0][row])

        def nudge_qpos(taken):
            taken[chunk][1][row, 0] += 1e-6

        diverged, detail = compare(nudge_qpos)
        assert diverged.startswith(f"per-step states diverge from control step {expected_step} "), diverged
        assert detail["states"]["max_abs_qpos_diff"] == pytest.approx(1e-6, rel=1e-6)

        def nudge_qvel_and_later_qpos(taken):  # qvel alone is checked too, and the earliest row wins
            taken[0][2][0, -1] -= 1e-3
            taken[-1][1][-1, 1] += 1.0

        diverged, _ = compare(nudge_qvel_and_later_qpos)
        assert diverged.startswith(f"per-step states diverge from control step {int(chunks[0][0][0])} "), diverged

        def below_tolerance(taken):  # printing noise, not a divergence
            taken[0][1][0, 0] += 1e-12

        assert compare(below_tolerance)[0] == ""

        def drop_last_row(taken):
            taken[-1] = tuple(a[:-1] for a in taken[-1])

        diverged, _ = compare(drop_last_row)
        assert diverged == f"per-step states: original covers {len(steps)} steps, replay {len(steps) - 1}"


# ---- mismatch ------------------------------------------------------------------------------------


async def test_robot_moving_differently_with_the_same_output_is_a_mismatch_at_the_first_divergent_step(tmp_path):
    perturbed: list[int] = []

    def nudge_middle_action(actions):
        k = len(actions) // 2
        perturbed.append(k)
        actions[k][0] = actions[k][0] * 0.999 + (0.001 if actions[k][0] == 0 else 0.0)  # ~0.05 mm: same success
        return actions

    run_dir, plan, end, record = await _series_then_replay(
        tmp_path, ReachAgent(), tamper=lambda links: _tamper_replay(links.fake_bridge, actions=nudge_middle_action))
    assert end.outcome == "success" and perturbed, "the replay never ran the plan"
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        op = _first_exec(reader, view.trial_id)
        # The fake simulator labels a state with the step count after it: action k of an exec that
        # starts at control step s leaves the state labelled s + k + 1.
        expected = op.step_start + perturbed[0] + 1
        recorded_steps = np.concatenate([np.arange(t.step_start, t.step_end) for t in reader.control_traces(view.trial_id)])
        assert expected in recorded_steps
    assert record.verdict == "mismatch"
    assert record.first_divergence.startswith(f"per-step states diverge from control step {expected} "), record.first_divergence
    (exec_detail,) = record.detail["execs"]
    assert exec_detail["agree"] and exec_detail["differs"] == []  # steps, exit status, output and limit all agree
    assert record.outcome_reproduced is True
    assert record.detail["success"]["replay"] == record.detail["success"]["original"] == list(end.success_interval)


async def test_a_different_success_interval_is_a_mismatch_even_when_every_exec_agrees(tmp_path):
    def stop_short(actions):
        actions[-1] = [0.0, 0.0, 0.0, actions[-1][3]]  # the last move never happens: the target is not reached
        return actions

    run_dir, plan, end, record = await _series_then_replay(
        tmp_path, ReachAgent(), tamper=lambda links: _tamper_replay(links.fake_bridge, actions=stop_short))
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        original = list(view.end.success_interval)
    assert end.outcome == "success" and len(original) == 2
    assert record.verdict == "mismatch" and record.outcome_reproduced is False
    assert record.first_divergence == f"success: original interval {original} (success), replay None", record.first_divergence
    assert record.detail["execs"][0]["agree"]  # the program's steps and output were the same


async def test_a_different_exit_status_is_recorded_but_not_a_mismatch_and_the_failure_scores_0(tmp_path):
    # The score is the robot's: a program that exits otherwise on replay, with the same motion, agrees.
    run_dir, plan, end, record = await _series_then_replay(
        tmp_path, WanderAgent(),
        tamper=lambda links: _tamper_replay(links.fake_bridge, feedback=lambda fb: msgspec.structs.replace(fb, exit_status=3)))
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        op = _first_exec(reader, view.trial_id)
        (outcome,) = series_outcomes(reader, RUN_ID)
    assert end.outcome == "failure"
    assert record.verdict == "verified" and record.first_divergence == "", record.first_divergence
    assert record.outcome_reproduced is True and record.replay_outcome == "failure"
    assert record.detail["execs"][0]["differs"] == ["exit_status"]
    assert record.detail["output_differences"] == [{"seq": op.seq, "script": "away.json", "differs": ["exit_status"]}]
    assert [s.status for s in outcome.slots] == ["failure"] and outcome.slots[0].y == 0


async def test_a_different_limit_is_recorded_as_output_not_a_mismatch(tmp_path):
    run_dir, plan, end, record = await _series_then_replay(
        tmp_path, WanderAgent(),
        tamper=lambda links: _tamper_replay(links.fake_bridge, feedback=lambda fb: msgspec.structs.replace(fb, limit="wall_time")))
    with RunReader(run_dir) as reader:
        op = _first_exec(reader, reader.trials(plan.series_id)[0].trial_id)
    assert record.verdict == "verified", record.first_divergence
    assert record.detail["output_differences"] == [{"seq": op.seq, "script": "away.json", "differs": ["limit"]}]


async def test_a_success_whose_replay_diverges_is_unscored_and_a_failure_whose_replay_diverges_scores_0(tmp_path):
    def stop_short(actions):
        actions[-1] = [0.0, 0.0, 0.0, actions[-1][3]]
        return actions

    run_dir, plan, end, record = await _series_then_replay(
        tmp_path, ReachAgent(), tamper=lambda links: _tamper_replay(links.fake_bridge, actions=stop_short))
    with RunReader(run_dir) as reader:
        (success,) = series_outcomes(reader, RUN_ID)
    assert end.outcome == "success" and record.verdict == "mismatch" and record.replay_outcome == "failure"
    assert [s.status for s in success.slots] == ["mismatch"] and success.slots[0].divergence == record.first_divergence
    assert series_metrics(success).A_lower == 0.0  # a failure in the lower bound

    def wander_further(actions):
        return [[a[0], a[1], a[2] * 0.5, a[3]] for a in actions]

    (tmp_path / "failure").mkdir()
    run_dir, plan, end, record = await _series_then_replay(
        tmp_path / "failure", WanderAgent(), tamper=lambda links: _tamper_replay(links.fake_bridge, actions=wander_further))
    with RunReader(run_dir) as reader:
        (failure,) = series_outcomes(reader, RUN_ID)
    assert end.outcome == "failure" and record.verdict == "mismatch"
    assert [s.status for s in failure.slots] == ["failure"] and failure.slots[0].divergence == record.first_divergence


# ---- error ---------------------------------------------------------------------------------------


async def test_a_different_sandbox_image_at_replay_is_an_error_not_a_verdict(tmp_path, monkeypatch):
    from . import harness

    other = "sha256:" + "0b" * 32
    # the stand-in bridge reports harness.FAKE_IMAGE in every TrialOpened: from now on, another image
    run_dir, plan, end, record = await _series_then_replay(
        tmp_path, ReachAgent(), tamper=lambda links: monkeypatch.setattr(harness, "FAKE_IMAGE", other))
    with RunReader(run_dir) as reader:
        original = next(e.data["image_digest"] for _, e in reader.events(trial_id=reader.trials(plan.series_id)[0].trial_id)
                        if e.event == "trial_opened")
    assert original != other
    assert record.verdict == "error" and record.outcome_reproduced is None and record.first_divergence == ""
    assert record.detail["cause"] == f"sandbox image {other[:16]} is not the trial's {original[:16]}"


async def test_a_different_fresh_scene_fingerprint_at_replay_is_an_error(tmp_path, monkeypatch):
    from roboswe.sim.fake import backend as fake_backend
    from roboswe.sim.manifest import manifest_from_builtins

    manifest = reach_manifest()
    # What a simulator with a new package version fingerprints, computed here with its own backend.
    monkeypatch.setattr(fake_backend, "VERSION", "fake-2")
    changed = fake_backend.FakeBackend(manifest_from_builtins(manifest)).reset(manifest["seed"]).digest
    monkeypatch.undo()

    def upgrade_simulator():
        monkeypatch.setattr(fake_backend, "VERSION", "fake-2")  # the simulator runs in this process

    run_dir, plan, end, record = await _series_then_replay(tmp_path, ReachAgent(), before_verify=upgrade_simulator)
    assert changed != plan.reference_fingerprint
    assert record.verdict == "error" and record.outcome_reproduced is None
    assert record.detail["fingerprint"] == changed
    assert record.detail["cause"].startswith(f"fresh scene fingerprint {changed[:16]} differs from the trial's "
                                             f"{plan.reference_fingerprint[:16]}"), record.detail["cause"]


async def test_a_trial_whose_fingerprint_is_not_the_admitted_reference_is_an_error(tmp_path):
    bogus = "f" * 64
    _, plan, _, record = await _series_then_replay(tmp_path, ReachAgent(), reference=bogus)
    assert record.verdict == "error"
    assert record.detail["cause"].endswith(f"/ the admitted {bogus[:16]}"), record.detail["cause"]
