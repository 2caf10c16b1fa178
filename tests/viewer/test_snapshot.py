"""The export as a snapshot of a run that is still going, and `roboswe view --live` re-exporting it.

A going run is the shared fixture run copied, with what a run in progress has: a trial started and
not ended, a job asking for a task no series has reached yet, and a supervisor state file whose
supervisor lives (this test process) and is running, which is how `roboswe status` tells a going
run. The export marks the running and pending slots and leaves every figure as the report computes
it: neither is scored.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import msgspec
import pytest
from roboswe.protocol.recorder import TrialEnded, TrialStarted

from roboswe.records.reader import RunReader
from roboswe.records.report import run_summary
from tests.viewer.fixture_run import LIFT, RUN_ID, STACK
from tests.viewer.test_leaderboard import _append

NEW_TASK = "door-panda"  # asked for by the job, no series yet
RUNNING = f"{RUN_ID}/{STACK}/t4a0"


def _supervisor(run_dir: Path, pid: int, state: str) -> None:
    from roboswe.actors.supervisor import STATE_FILE, SupervisorState

    (run_dir / STATE_FILE).write_bytes(msgspec.json.encode(
        SupervisorState(supervisor_pid=pid, state=state, failure=None, actors={})))


@pytest.fixture
def going(fixture_run, tmp_path) -> Path:
    import shutil

    from roboswe.evaluation.job import Job, write_job

    run = tmp_path / "run"
    shutil.copytree(fixture_run["run_dir"], run)
    _append(run, [TrialStarted(trial_id=RUNNING, series_id=f"{RUN_ID}/{STACK}", index=4, fingerprint="f" * 64,
                               started_at=time.time())])
    write_job(run, Job(kind="run", run_id=RUN_ID, admitted_path="", admitted_sha256="ab" * 32,
                       tasks=[LIFT, STACK, NEW_TASK]))
    _supervisor(run, os.getpid(), "running")
    return run


def _data(path: Path):
    text = path.read_text()
    return json.loads(text[text.index(",") + 1: text.rindex(")")])


def _exported(run: Path, site: Path) -> dict:
    from roboswe.viewer import export_site

    export_site(run, site)
    return _data(site / "data" / "run.js")


def _attempt(data: dict, trial_id: str) -> dict:
    return next(a for s in data["series"] for a in s["attempts"] if a["trial_id"] == trial_id)


def test_a_going_run_shows_its_running_and_pending_slots_and_scores_neither(going, tmp_path):
    before = time.time()
    data = _exported(going, tmp_path / "site")
    snap = data["snapshot"]
    assert snap["live"] is True and snap["run_state"] == "running" and before <= snap["at"] <= time.time()
    assert snap["running"] == 1 and _attempt(data, RUNNING)["running"] is True
    assert not any(a["running"] for s in data["series"] for a in s["attempts"] if a["trial_id"] != RUNNING)
    # Stack's slot 5 and the five of the task the job asked for that has no series yet
    assert snap["pending"] == 1 + 5 and snap["unstarted_tasks"] == [{"task": NEW_TASK, "trials": 5}]
    assert snap["refresh"] is None  # a plain export: the pages do not poll
    assert _data(tmp_path / "site" / "data" / "snapshot.js") == {"at": snap["at"]}
    with RunReader(going) as reader:  # the figures are the report's at that moment: running and pending unscored
        report = msgspec.json.decode(msgspec.json.encode(run_summary(reader)))  # as plain JSON, as the site has it
    assert [s["metrics"] for s in data["series"]] == [s["metrics"] for s in report["series"]]
    assert data["series"][1]["metrics"]["statuses"][3:] == ["incomplete", "not_started"]
    assert data["datasets"] == report["datasets"]
    _append(going, [TrialStarted(trial_id=f"{RUNNING[:-2]}a1", series_id=f"{RUN_ID}/{STACK}", index=4, attempt=1,
                                 fingerprint="f" * 64, started_at=time.time())])  # a resume's new attempt of slot 4
    again = _exported(going, tmp_path / "resumed")
    assert not _attempt(again, RUNNING)["running"] and _attempt(again, f"{RUNNING[:-2]}a1")["running"]
    assert again["snapshot"]["running"] == 1  # the interrupted attempt is not running: the resumed one is


def test_once_the_run_has_stopped_its_slots_read_as_interrupted_and_not_started(going, tmp_path):
    _supervisor(going, os.getpid(), "stopped")
    data = _exported(going, tmp_path / "stopped")
    assert (data["snapshot"]["live"], data["snapshot"]["run_state"], data["snapshot"]["pending"]) == (False, "stopped", 0)
    assert _attempt(data, RUNNING)["running"] is False and _attempt(data, RUNNING)["outcome"] == "incomplete"
    assert data["snapshot"]["unstarted_tasks"] == [{"task": NEW_TASK, "trials": 5}]  # still asked for: not started
    gone = subprocess.Popen(["true"])
    gone.wait()
    _supervisor(going, gone.pid, "running")  # a supervisor that died without saying so
    data = _exported(going, tmp_path / "dead")
    assert data["snapshot"]["live"] is False and data["snapshot"]["run_state"] == "stopped (its supervisor is gone)"
    from roboswe.evaluation.job import read_job, write_job

    _supervisor(going, os.getpid(), "running")
    write_job(going, msgspec.structs.replace(read_job(going), kind="verify"))  # replays only: no slot is reached
    data = _exported(going, tmp_path / "verify")
    assert (data["snapshot"]["live"], data["snapshot"]["run_state"]) == (False, "replaying its trials (roboswe verify)")
    assert _attempt(data, RUNNING)["running"] is False and data["snapshot"]["pending"] == 0
    (going / "supervisor.json").write_text("{not json")
    assert _exported(going, tmp_path / "bad")["snapshot"]["run_state"].startswith("unknown (")


def _lines(proc) -> queue.Queue:
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    return lines


def _wait_line(lines: queue.Queue, pattern: str, timeout: float = 60.0) -> re.Match:
    deadline, seen = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen.append(line)
        if match := re.search(pattern, line):
            return match
    raise AssertionError(f"no line matching {pattern!r} in {seen}")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return json.loads(text[text.index(",") + 1: text.rindex(")")])


def test_view_live_re_exports_when_the_database_changes_and_stops_on_ctrl_c(going, tmp_path):
    site = tmp_path / "live"
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.cli", "view", str(going), "--live", "--every", "0.2",
                             "--port", "0", "--out", str(site)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        lines = _lines(proc)
        base = _wait_line(lines, r"at (http://127\.0\.0\.1:\d+/) live")[1]
        first = _get(base + "data/run.js")
        assert first["snapshot"]["refresh"] == 0.2 and _attempt(first, RUNNING)["running"] is True
        _append(going, [TrialEnded(trial_id=RUNNING, outcome="failure", reason="finish", cause="finish",
                                   control_steps=30, sim_time=1.5, active_time=2.0, timing={}, ended_at=time.time())])
        _wait_line(lines, r"re-exported .* run going")
        deadline = time.monotonic() + 30  # the store's opening may be seen first: a re-export before the end is in
        while (now := _get(base + "data/run.js"))["snapshot"]["running"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert now["snapshot"]["at"] > first["snapshot"]["at"] and now["snapshot"]["running"] == 0
        assert _attempt(now, RUNNING)["outcome"] == "failure" and not _attempt(now, RUNNING)["running"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        _wait_line(lines, r"stopped; the last export stays in")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live", "run"]  # no staging folder left beside the site
    assert (site / "index.html").is_file() and _data(site / "data" / "run.js")["snapshot"] == now["snapshot"]


@pytest.mark.parametrize("every", ["0", "-1", "nan", "inf"])
def test_view_live_refuses_an_interval_that_is_not_a_few_seconds(going, tmp_path, capsys, every):
    from roboswe.cli import main

    assert main(["view", str(going), "--live", "--every", every, "--out", str(tmp_path / "site")]) == 2
    assert f"--every {float(every)}: expected a positive number of seconds" in capsys.readouterr().err
    assert not (tmp_path / "site").exists()  # refused before anything is written


@pytest.mark.exhaustive
def test_the_index_of_a_live_export_shows_the_going_run_and_reloads_on_a_new_snapshot(going, tmp_path, browser):
    from roboswe.viewer import export_site
    from roboswe.viewer._export import trial_key
    from roboswe.viewer._live import export_swapped
    from tests.viewer.test_viewer import page_errors, wait_for

    site = tmp_path / "site"
    export_site(going, site, refresh=0.3)
    page_errors(browser)
    browser.get((site / "trial.html").as_uri() + "?t=" + trial_key(RUNNING))  # what it recorded so far, unscored
    wait_for(browser, "document.body.dataset.ready")
    assert "TRIAL 4 RUNNING" in browser.find_element("css selector", "#trial-head h1").text.upper()
    assert "what it recorded by then, unscored" in browser.find_element("id", "trial-running").text
    browser.get((site / "index.html").as_uri())
    wait_for(browser, "document.querySelectorAll('table.grid td.cell').length")
    cells = browser.execute_script("return [...document.querySelectorAll('table.grid tbody tr')].map(r => "
                                   "[r.querySelector('th').textContent, [...r.querySelectorAll('td.cell')].map(c => c.className)])")
    assert cells[1] == ["stack-panda", ["cell s-failure", "cell s-incomplete", "cell s-unverified", "cell s-running",
                                        "cell s-pending"]]
    assert cells[2] == [NEW_TASK, ["cell s-pending"] * 5]
    assert "unscored: running" in browser.find_element("css selector", "td.s-running").text
    text = browser.find_element("id", "snapshot").text
    assert text.startswith("snapshot of ") and "the run is going: 1 running, 6 pending slot(s)" in text
    browser.execute_script("window.__before_reload = 1")
    _append(going, [TrialEnded(trial_id=RUNNING, outcome="failure", reason="finish", cause="finish",
                               control_steps=30, sim_time=1.5, active_time=2.0, timing={}, ended_at=time.time())])
    export_swapped(going, site, 0.3)  # what `roboswe view --live` does on the change
    wait_for(browser, "!window.__before_reload && document.querySelector('#snapshot') && "
                      "document.querySelector('#snapshot').textContent.includes('0 running')", timeout=30)
    assert not browser.find_elements("css selector", "td.s-running")
    browser.get((site / "trial.html").as_uri() + "?t=" + trial_key(RUNNING))
    wait_for(browser, "document.body.dataset.ready")
    assert "FAILURE" in browser.find_element("css selector", "#trial-head h1").text.upper()  # ended in this snapshot
    assert not browser.find_elements("id", "trial-running")
    assert page_errors(browser) == []
