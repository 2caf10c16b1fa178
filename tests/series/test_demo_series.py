"""A three-trial Lift series with a success, an honest failure and a success, end to end, verified by replay.

One `roboswe run` (module fixture) feeds every assertion (the five-trial demo itself is
tests/viewer/test_demo.py; three trials show every carry-over here): the real supervisor and actors,
robosuite, the bwrap sandbox, the recorder's SQLite database. Trial 2's participant runs its script
once and gives up (tests/series/agents.py GiveUpLiftAgent): a replayed failure must score 0, so
y = [1, 0, 1], A = 2/3, Q = 1/3, class regression, in the report, results.json and the viewer alike.
"""

from __future__ import annotations

import hashlib
import json

import msgspec
import pytest
from roboswe.sandbox.checkpoints import BlobStore, load_manifest, restore

from roboswe.records.reader import RunReader

from ..viewer.conftest import browser as browser
from ..viewer.test_viewer import page_errors, wait_for
from .conftest import roboswe, write_config

pytestmark = pytest.mark.slow
TRIALS = 3
GIVE_UP = 2  # the trial that fails honestly
Y = [1, 0, 1]  # by hand: A = mean(y) = 2/3; Q = final streak / T = 1/3; a success then a failure: regression


@pytest.fixture(scope="module")
def demo_run(work_dir, admitted):
    config = write_config(work_dir, "demo3", series=f"trials = {TRIALS}",
                          agent=f'agent = "tests.series.agents:GiveUpLiftAgent"\noptions = {{ give_up = [{GIVE_UP}] }}')
    run_dir = work_dir / "demo3"
    proc = roboswe("run", str(admitted), "--config", str(config), "--out", str(run_dir), "--no-video", timeout=1200)  # videos: tests/viewer/test_demo.py
    return proc, run_dir, admitted


@pytest.fixture(scope="module")
def reader(demo_run):
    with RunReader(demo_run[1]) as r:
        yield r


def test_run_exits_cleanly_with_plain_progress_lines(demo_run):
    proc, run_dir, _ = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for t in range(1, TRIALS + 1):
        assert f"trial {t}/{TRIALS} starts" in proc.stdout
    assert "job done" in proc.stdout
    assert "\x1b[" not in proc.stdout  # not a terminal: no live display escape codes


def test_the_successes_and_the_honest_failure_replay_verified(reader):
    (series,) = reader.series()
    assert series.mode == "retain" and series.trials == TRIALS and series.task == "lift-panda"
    views = reader.trials(series.series_id)
    assert [v.start.index for v in views] == list(range(1, TRIALS + 1))
    for v in views:
        if v.start.index == GIVE_UP:
            assert (v.end.outcome, v.end.reason, v.end.success_interval) == ("failure", "finish", None), v.end
            assert v.end.control_steps > 0  # the script moved the robot before the participant gave up
            assert v.verification.replay_outcome == "failure"
        else:
            assert v.end.outcome == "success", (v.trial_id, v.end.reason)
            assert v.end.reason == "success_interval"
            first, last = v.end.success_interval
            assert last - first + 1 == 10 and last <= v.end.control_steps <= 6000
            assert v.verification.replay_outcome == "success"
        assert v.verification.verdict == "verified", v.verification
        assert v.verification.outcome_reproduced is True
        states = v.verification.detail["states"]  # every control step's physics state replayed bit for bit
        assert states["compared"] == v.end.control_steps + 1 and states["max_abs_qpos_diff"] == 0.0
        assert v.end.active_time > 0 and set(v.end.timing) >= {"provider", "execution", "physics", "rendering", "transport", "waits"}


def test_fresh_scene_fingerprint_matches_the_admitted_reference(reader, demo_run):
    admitted = json.loads(demo_run[2].read_text())
    reference = admitted["tasks"][0]["fingerprint"]["digest"]
    (series,) = reader.series()
    assert {v.start.fingerprint for v in reader.trials(series.series_id)} == {reference}


def test_every_decision_is_recorded_with_exact_bytes_and_linked_to_its_operation(reader):
    (series,) = reader.series()
    for v in reader.trials(series.series_id):
        messages = {m.message_id: m for m in reader.messages(v.trial_id)}
        ops = reader.operations(v.trial_id)
        assert ops and len(messages) == len(ops)
        assert [o.seq for o in ops] == list(range(len(ops)))
        for op in ops:
            m = messages[op.message_id]
            assert m.request_sha256 == hashlib.sha256(m.request).hexdigest()
            assert m.response_sha256 == hashlib.sha256(m.response).hexdigest()
            assert json.loads(m.response)["parts"][0]["name"] == op.operation
        execs = [o for o in ops if o.operation == "exec"]
        assert execs and all(o.step_end - o.step_start == o.feedback["steps"] for o in execs)
        assert ops[-1].step_end == v.end.control_steps


def test_workspace_and_conversation_carry_over_between_trials(reader):
    (series,) = reader.series()
    views = reader.trials(series.series_id)
    for v in views:
        first = reader.operations(v.trial_id, limit=1)[0]
        assert first.operation == "list_files"
        if v.start.index == 1:
            assert "empty" in first.feedback["text"]
        else:
            assert "lift_cube.py" in first.feedback["text"]  # the script written in trial 1 is still there
            writes = [o.arguments["path"] for o in reader.operations(v.trial_id) if o.operation == "write_file"]
            # only the progress file is reset; the script is reused (the give-up trial adds its hold script)
            assert writes == ["plan.json"] + (["hold.py"] if v.start.index == GIVE_UP else [])
    turns = [e for _, e in reader.events() if e.event == "turn"]
    openings = [e.data["turn"]["parts"][0]["text"] for e in turns
                if e.data["turn"]["role"] == "user" and e.data["turn"]["parts"][0]["part"] == "text"]
    assert len(openings) == TRIALS
    assert f"Trial 1 of {TRIALS} begins" in openings[0] and "workspace is empty" in openings[0]
    for t in range(2, TRIALS + 1):
        assert f"Trial {t} of {TRIALS} begins" in openings[t - 1]
        said = "did not succeed" if t - 1 == GIVE_UP else "succeeded"
        assert f"Trial {t - 1} {said}" in openings[t - 1] and "control steps" in openings[t - 1], openings[t - 1]
    # the last trial's request still holds trial 1's opening: the conversation was kept
    last_request = reader.messages(views[-1].trial_id)[0].request
    assert f"Trial 1 of {TRIALS} begins".encode() in last_request


def test_checkpoints_at_trial_start_and_after_every_write_and_exec_restore(reader, demo_run, tmp_path):
    run_dir = demo_run[1]
    (series,) = reader.series()
    for v in reader.trials(series.series_id):
        points = reader.checkpoints(v.trial_id)
        ops = reader.operations(v.trial_id)
        expected = [o.seq for o in ops if o.operation in ("write_file", "exec")]
        assert points[0].label == "trial_start" and points[0].op_seq is None
        assert [p.op_seq for p in points[1:]] == expected
        last = points[-1]
        dest = tmp_path / v.trial_id.replace("/", "_")
        restore(load_manifest(last.manifest), BlobStore(run_dir / "blobs"), dest)
        assert (dest / "lift_cube.py").exists() and json.loads((dest / "plan.json").read_text())["phase"]
    first_start = reader.checkpoints(reader.trials(series.series_id)[0].trial_id)[0]
    assert first_start.files == 0  # trial 1 starts from an empty workspace


def test_observations_pass_images_to_the_participant(reader):
    (series,) = reader.series()
    v = reader.trials(series.series_id)[0]
    observe = next(o for o in reader.operations(v.trial_id) if o.operation == "observe")
    assert len(observe.feedback["images"]) == 3
    images = {e.data["digest"] for _, e in reader.events(trial_id=v.trial_id) if e.event == "image"}
    assert set(observe.feedback["images"]) <= images
    later = reader.messages(v.trial_id)[-1].request
    assert observe.feedback["images"][0].encode() in later  # the image part is in the next requests


def test_per_step_states_are_recorded_for_video(reader):
    from roboswe.sim.physics_state import trace_arrays

    (series,) = reader.series()
    for v in reader.trials(series.series_id):
        traces = reader.control_traces(v.trial_id)
        assert traces
        assert traces[-1].step_end >= v.end.control_steps
        arrays = trace_arrays(traces[0])
        assert arrays["qpos"].shape[0] == traces[0].step_end - traces[0].step_start


def test_verify_command_replays_again_and_keeps_verdicts_separate(demo_run, reader):
    _, run_dir, _ = demo_run
    (series,) = reader.series()
    before = {v.trial_id: len(reader.verifications(v.trial_id)) for v in reader.trials(series.series_id)}
    first = reader.trials(series.series_id)[0].trial_id
    proc = roboswe("verify", str(run_dir), "--trials", first, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with RunReader(run_dir) as fresh:
        after = {v.trial_id: len(fresh.verifications(v.trial_id)) for v in fresh.trials(series.series_id)}
        again = fresh.verifications(first)[-1]
    assert after[first] == before[first] + 1
    assert {k: v for k, v in after.items() if k != first} == {k: v for k, v in before.items() if k != first}
    assert again.verdict == "verified"
    execs = again.detail["execs"]
    assert execs and all(e["agree"] for e in execs)
    assert msgspec.json.decode(msgspec.json.encode(again.detail))["success"]["replay"] is not None


def test_results_json_is_stored_by_the_recorder_and_reads_back(demo_run, reader):
    run_dir = demo_run[1]
    (record,) = [a for a in reader.artifacts() if a.artifact == "results"][:1]
    data = (run_dir / "results.json").read_bytes()
    latest = [a for a in reader.artifacts() if a.artifact == "results"][-1]
    assert record.path == "results.json" and hashlib.sha256(data).hexdigest() == latest.sha256
    results = json.loads(data)
    assert results["verifications"] == {"verified": TRIALS}
    (series,) = results["series"]
    _assert_hand_computed(series)
    (group,) = results["datasets"]
    assert group["completed_tasks"] == 1 and group["missing_slots"] == 0
    assert group["slots"]["success"] == 2 and group["slots"]["failure"] == 1
    assert group["A"]["mean"] == pytest.approx(2 / 3) and group["Q"]["mean"] == pytest.approx(1 / 3)
    assert group["headline"].startswith("A = 0.67 [0.67, 0.67] over 1 of 1 admitted tasks; 0 slot(s) missing")


def _assert_hand_computed(m: dict) -> None:
    """The series' figures against y = [1, 0, 1] worked out by hand."""
    assert m["y"] == Y and m["statuses"] == ["success", "failure", "success"] and m["completed"] is True
    assert m["A"] == pytest.approx(2 / 3) and m["Q"] == pytest.approx(1 / 3)
    assert (m["first_success"], m["regressions"], m["trajectory"]) == (1, 1, "regression")
    assert m["recovered"] is False and m["sustained_conversion"] is False


def test_report_and_viewer_show_the_same_hand_computed_figures(demo_run, tmp_path, browser):
    _, run_dir, _ = demo_run
    proc = roboswe("report", str(run_dir), "--json", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (series,) = json.loads(proc.stdout)["series"]
    _assert_hand_computed(series["metrics"])
    text = " ".join(roboswe("report", str(run_dir), timeout=120).stdout.split())  # as read, whatever the wrapping
    assert "y = [1 0 1] A = 0.67 Q = 0.33" in text and "class = regression" in text, text
    site = tmp_path / "site"
    proc = roboswe("export", str(run_dir), "--out", str(site), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = (site / "data" / "run.js").read_text()  # RS.put("run", <the summary>); what the pages read
    summary = json.loads(data.removeprefix('RS.put("run",').removesuffix(");\n"))
    (series,) = summary["series"]
    _assert_hand_computed(series["metrics"])
    # the overview page as a reader sees it: every slot scored, A and Q as worked out by hand
    page_errors(browser)
    browser.get((site / "index.html").as_uri())
    wait_for(browser, "document.querySelectorAll('table.grid tbody tr').length === 1")
    row = browser.execute_script(
        "const r = document.querySelector('table.grid tbody tr');"
        "return {slots: [...r.querySelectorAll('td.cell .slot')].map(e => e.textContent),"
        " outcomes: [...r.querySelectorAll('td.cell .outcome')].map(e => e.textContent),"
        " figures: [...r.querySelectorAll('td')].slice(-2).map(e => e.textContent)};")
    assert row == {"slots": ["scored"] * 3, "outcomes": ["success", "failure", "success"], "figures": ["0.67", "0.33"]}, row
    assert page_errors(browser) == []
