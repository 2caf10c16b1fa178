"""The fresh-context control, budget exhaustion, provider outages and refused inputs."""

from __future__ import annotations

import json

import pytest

from roboswe.records.reader import RunReader

from .conftest import roboswe, write_config

pytestmark = pytest.mark.slow


def test_fresh_context_control_resets_workspace_and_conversation(work_dir, admitted):
    config = write_config(work_dir, "fresh", series='trials = 2\nretain = "none"')
    run_dir = work_dir / "fresh"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", "--no-verify")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        assert series.mode == "none"
        views = reader.trials(series.series_id)
        assert [v.end.outcome for v in views] == ["success", "success"]
        for v in views:
            ops = reader.operations(v.trial_id)
            assert "empty" in ops[0].feedback["text"]  # nothing carried over
            assert "lift_cube.py" in [o.arguments.get("path") for o in ops if o.operation == "write_file"]
            assert reader.checkpoints(v.trial_id)[0].files == 0
            for m in reader.messages(v.trial_id):
                assert b"Trial 1 of 2" not in m.request or v.start.index == 1  # trial 2 never sees trial 1
        assert all(v.verification is None for v in views)  # --no-verify
        assert not [a for a in reader.artifacts() if a.artifact == "video"]  # --no-video
        assert not list(run_dir.glob("videos/**/*.mp4"))


def test_a_participant_that_only_waits_ends_at_the_step_budget(work_dir, admitted):
    config = write_config(work_dir, "waits", agent='agent = "tests.series.agents:WaitOnlyAgent"',
                          series="trials = 2\ntrial_steps = 60")
    run_dir = work_dir / "waits"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        assert series.pins["budgets"]["trial_steps"] == 60
        for v in reader.trials(series.series_id):
            assert (v.end.outcome, v.end.reason, v.end.control_steps) == ("failure", "step_budget", 60)
            ops = reader.operations(v.trial_id)
            assert [o.operation for o in ops] == ["wait"] * 3
            assert [(o.step_start, o.step_end) for o in ops] == [(0, 25), (25, 50), (50, 60)]
            assert ops[-1].feedback["stopped"] == "trial_budget"
            assert v.verification.verdict == "verified" and v.verification.outcome_reproduced is True


def test_provider_outage_makes_an_incomplete_slot_and_the_next_trial_runs(work_dir, admitted):
    config = write_config(work_dir, "outage", agent='agent = "tests.series.agents:OutageAgent"', series="trials = 2")
    run_dir = work_dir / "outage"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        first, second = reader.trials(series.series_id)
        assert (first.end.outcome, first.end.cause) == ("incomplete", "provider") and first.end.detail.startswith("HTTP 503")
        assert first.end.timing["recovery"] == pytest.approx(0.3)  # back-off is not active time
        failed = [m for m in reader.messages(first.trial_id) if m.error]
        assert [m.attempt for m in failed] == [1, 2, 3] and all("http_503" in m.error for m in failed)
        assert first.verification is None  # nothing scored, nothing replayed
        assert second.end.outcome == "failure" and second.end.reason == "finish"
        assert [o.operation for o in reader.operations(second.trial_id)] == ["finish"]
        opening = next(e.data["turn"]["parts"][0]["text"] for _, e in reader.events(trial_id=second.trial_id)
                       if e.event == "turn")
        assert "Trial 1 could not be completed" in opening


def test_refuses_a_modified_admitted_file_and_a_config_that_loosens_budgets(work_dir, admitted):
    tampered = work_dir / "tampered.json"
    data = json.loads(admitted.read_text())
    data["tasks"][0]["manifest"]["budgets"]["trial"]["steps"] = 60000
    tampered.write_text(json.dumps(data))
    config = write_config(work_dir, "plain")
    proc = roboswe("run", str(tampered), "--config", str(config), "--out", str(work_dir / "never1"))
    assert proc.returncode == 2 and "modified after admission" in proc.stderr
    loose = write_config(work_dir, "loose", series="trial_steps = 7000")
    proc = roboswe("run", str(admitted), "--config", str(loose), "--out", str(work_dir / "never2"))
    assert proc.returncode == 2
    assert "trial_steps = 7000 would loosen" in proc.stderr and "6000" in proc.stderr
    assert not (work_dir / "never1").exists() and not (work_dir / "never2").exists()


def test_a_fingerprint_that_differs_from_the_admitted_reference_is_incomplete_before_any_input(work_dir, admitted):
    import msgspec

    from roboswe.evaluation.admission import read_admitted, write_admitted

    good = read_admitted(admitted)
    task = good.tasks[0]
    wrong = msgspec.structs.replace(task, fingerprint={**task.fingerprint, "digest": "0" * 64})
    other = work_dir / "admitted-wrong-fingerprint.json"
    write_admitted(msgspec.structs.replace(good, tasks=[wrong], digest=""), other)  # sealed: a valid file
    config = write_config(work_dir, "fp", series="trials = 2")
    run_dir = work_dir / "fp"
    proc = roboswe("run", str(other), "--config", str(config), "--out", str(run_dir), "--no-video")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        views = reader.trials(series.series_id)
        assert len(views) == 2  # the next trial still runs (and meets the same scene)
        for v in views:
            assert (v.end.outcome, v.end.cause) == ("incomplete", "fingerprint_mismatch")
            assert v.start.fingerprint == task.fingerprint["digest"]
            assert reader.messages(v.trial_id) == [] and reader.operations(v.trial_id) == []
            assert reader.checkpoints(v.trial_id) == []  # no sandbox, no participant input
        events = [e.event for _, e in reader.events()]
        assert events.count("fingerprint_mismatch") == 2 and "turn" not in events


def test_the_active_time_budget_ends_a_trial(work_dir, admitted):
    config = write_config(work_dir, "slow", agent='agent = "tests.series.agents:WaitOnlyAgent"\noptions = { steps = 1 }',
                          series="trials = 1\ntrial_seconds = 2.0")
    run_dir = work_dir / "slow"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", "--no-verify")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        (v,) = reader.trials(series.series_id)
        assert (v.end.outcome, v.end.reason) == ("failure", "time_budget")
        assert 2.0 <= v.end.active_time < 10.0
        assert 0 < v.end.control_steps == len(reader.operations(v.trial_id)) < 6000


def test_bad_decisions_get_error_results_and_use_no_control_steps(work_dir, admitted):
    config = write_config(work_dir, "bad", agent='agent = "tests.series.agents:BadDecisionsAgent"', series="trials = 1")
    run_dir = work_dir / "bad"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", "--no-verify")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        (v,) = reader.trials(series.series_id)
        assert (v.end.outcome, v.end.reason, v.end.control_steps) == ("failure", "finish", 0)
        ops = reader.operations(v.trial_id)
        assert [o.operation for o in ops] == ["invalid", "write_file", "exec", "exec", "read_file", "observe",
                                              "search_history", "finish"]
        for o in ops[:-1]:
            assert o.feedback["is_error"] and (o.step_start, o.step_end) == (0, 0), o
        texts = [o.feedback["text"] for o in ops]
        assert "unknown operation 'fly'" in texts[0]
        assert "'..'" in texts[1] and "absolute" in texts[2] and "no such file" in texts[3]
        assert "no_such_camera" in texts[5] and "only after the first context slide" in texts[6]
        assert not (run_dir / "workspaces" / "escape.py").exists()
        assert [c.label for c in reader.checkpoints(v.trial_id)] == ["trial_start"]  # nothing ran, nothing changed


def test_after_a_context_slide_search_history_finds_archived_turns(work_dir, admitted):
    # B = C - O - 4096 = 30,000 units; each note is ~6,000 estimated units, so the window slides.
    config = write_config(work_dir, "slide", agent='agent = "tests.series.agents:ArchiveSearchAgent"\n'
                          "context_window = 38096\nmax_output_tokens = 4000", series="trials = 1")
    run_dir = work_dir / "slide"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", "--no-verify")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        (v,) = reader.trials(series.series_id)
        (slide,) = reader.slides(v.trial_id)
        assert slide.removed and slide.after_units < slide.before_units
        ops = reader.operations(v.trial_id)
        search = next(o for o in ops if o.operation == "search_history")
        assert not search.feedback["is_error"] and search.feedback["hits"] >= 1
        assert "MARKER-0" in search.feedback["text"]
        assert ops[-1].operation == "finish" and v.end.control_steps == 0
        counts = [e for _, e in reader.events(trial_id=v.trial_id) if e.event == "request_count"]
        assert len(counts) == len(ops) and all(c.data["budget"] == 30000 for c in counts)
