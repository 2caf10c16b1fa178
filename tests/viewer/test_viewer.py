"""The exported viewer in a real headless Chromium, from file:// and from `roboswe view`'s server."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.viewer.fixture_run import BIG_TRIAL_OPS, EXEC_STEPS, SCRIPT_V2, WAIT_STEPS

pytestmark = pytest.mark.slow


def wait_for(driver, script: str, timeout: float = 20.0):
    """Poll a JS expression until it is truthy; returns its value or fails with the last one."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = driver.execute_script("return " + script)
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {script!r}; last value {value!r}; errors: {page_errors(driver)}")


def page_errors(driver) -> list[str]:
    """Console messages at SEVERE level (JS errors, failed loads) since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def trial_url(site: Path, trial_id: str) -> str:
    from roboswe.viewer._export import trial_key

    return (site / "trial.html").as_uri() + "?t=" + trial_key(trial_id)


def videos_state(driver) -> list[dict]:
    return driver.execute_script(
        "return [...document.querySelectorAll('video')].map(v => ({camera: v.dataset.camera, "
        "ready: v.readyState, duration: v.duration, t: v.currentTime}))")


def click_op(driver, seq: int) -> None:
    driver.execute_script(f"document.querySelector('li.op[data-seq=\"{seq}\"]').click()")


def test_overview_renders_the_task_trial_grid_from_file_url(browser, site, artifacts_dir):
    page_errors(browser)
    browser.get((site / "index.html").as_uri())
    wait_for(browser, "document.querySelectorAll('table.grid td.cell').length")
    cells = browser.execute_script(
        "return [...document.querySelectorAll('table.grid tbody tr')].map(r => "
        "[r.querySelector('th').textContent, [...r.querySelectorAll('td.cell')].map(c => c.className + '|' + c.textContent)])")
    assert [task for task, _ in cells] == ["lift-panda", "stack-panda"]
    lift = cells[0][1]
    assert len(lift) == 5
    assert "s-failure" in lift[0] and "FAILURE".lower() in lift[0].lower() and "verified" in lift[0]
    assert "s-success" in lift[1] and "verified" in lift[1]
    assert "s-mismatch" in lift[3] and "unscored: mismatch" in lift[3]  # replay disagreed: not scored
    stack = cells[1][1]
    assert "s-incomplete" in stack[1] and "s-unverified" in stack[2] and "not started" in stack[4]
    assert browser.execute_script("return document.querySelectorAll('svg.chart').length") == 2
    metrics = browser.find_element("id", "metrics").text
    assert "2 / 0" in metrics  # admitted / completed tasks: Lift's mismatch leaves it incomplete
    assert "1 / 0 / 1 / 1 / 2" in metrics  # mismatch / replay error / unverified / incomplete / not started
    assert "5 slot(s) missing" in metrics and "lower bound counting them as failures" in metrics
    assert "provider" in browser.find_element("id", "timing").text
    browser.save_screenshot(str(Path(artifacts_dir) / "viewer-overview.png"))
    assert page_errors(browser) == []


def test_trial_page_loads_videos_and_clicking_an_operation_seeks_them(browser, site, fixture_run, artifacts_dir):
    page_errors(browser)
    browser.get(trial_url(site, fixture_run["lift"][1]))
    wait_for(browser, "document.body.dataset.ready")
    wait_for(browser, "[...document.querySelectorAll('video')].every(v => v.readyState >= 1 && v.duration > 0)")
    state = videos_state(browser)
    assert sorted(v["camera"] for v in state) == ["agentview", "frontview"]
    assert all(v["duration"] >= (EXEC_STEPS + WAIT_STEPS - 1) * 0.05 for v in state)  # simulation time, not wall

    click_op(browser, 3)  # wait: control steps 20..26 -> 20 * 0.05 s
    wait_for(browser, "[...document.querySelectorAll('video')].every(v => Math.abs(v.currentTime - 1.0) < 1e-3)")
    assert "step 20" in browser.find_element("id", "clock").text
    detail = browser.find_element("id", "detail").text
    assert "wait" in detail and "waited 6 steps" in detail

    click_op(browser, 0)  # write_file: model text, exposed reasoning, the diff; never the opaque signature
    wait_for(browser, "[...document.querySelectorAll('video')].every(v => v.currentTime === 0)")
    detail = browser.find_element("id", "detail").text
    assert "reasoning (exposed by the provider)" in detail and "descend first" in detail
    assert "I will rewrite the script" in detail
    assert "OPAQUE-SIGNATURE" not in browser.page_source
    diff = browser.execute_script("return document.querySelector('pre.diff').textContent")
    assert "-    robot.step([0.0, 0.0, -0.4, 0, 0, 0, -1])" in diff  # trial 1's script, retained in the workspace
    assert "+    robot.step([0.1, 0.0, -0.5, 0, 0, 0, 1])" in diff

    click_op(browser, 1)  # observe: the image the participant was sent
    wait_for(browser, "document.querySelector('#detail .shot img') && document.querySelector('#detail .shot img').complete")
    assert browser.execute_script("return document.querySelector('#detail .shot img').naturalWidth") == 256

    click_op(browser, 2)  # exec: the files the script changed, its checkpoint's workspace; open the written script
    assert "workspace modified by this operation: notes.txt" in browser.find_element("id", "detail").text
    wait_for(browser, "document.querySelector('#checkpoint').selectedOptions[0].textContent.includes('after #2')")
    browser.execute_script("[...document.querySelectorAll('#files a')].find(a => a.textContent === 'lift.py').click()")
    wait_for(browser, "document.querySelector('#file').textContent.includes('close the gripper')")
    assert browser.find_element("id", "file").text.strip() == SCRIPT_V2.strip()
    click_op(browser, 3)  # end on a moved arm, then capture the whole page (videos, timeline, workspace)
    wait_for(browser, "[...document.querySelectorAll('video')].every(v => Math.abs(v.currentTime - 1.0) < 1e-3)")
    browser.execute_script("document.querySelector('video').currentTime = 1.1")  # step 22: inside the wait
    wait_for(browser, "document.querySelector('li.op.playing[data-seq=\"3\"]')")
    size = browser.get_window_size()
    browser.set_window_size(1400, 1500)
    try:
        browser.save_screenshot(str(Path(artifacts_dir) / "viewer-trial.png"))
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert page_errors(browser) == []


def test_thousands_of_operations_load_one_page_at_a_time(browser, site, fixture_run):
    page_errors(browser)
    browser.get(trial_url(site, fixture_run["lift"][4]))
    wait_for(browser, "document.body.dataset.ready")
    total = BIG_TRIAL_OPS + 4
    assert browser.execute_script("return document.querySelectorAll('li.op').length") == 200
    assert browser.execute_script("return document.querySelectorAll('script[src*=\"/ops-\"]').length") == 1
    pages = browser.execute_script("return document.querySelectorAll('#page option').length")
    assert pages == -(-total // 200)
    browser.execute_script(f"const s = document.querySelector('#page'); s.value = '{pages - 1}'; "
                           "s.dispatchEvent(new Event('change'))")
    wait_for(browser, f"document.querySelector('li.op[data-seq=\"{total - 1}\"]')")
    assert "finish" in browser.execute_script(f"return document.querySelector('li.op[data-seq=\"{total - 1}\"]').textContent")
    assert browser.execute_script("return document.querySelectorAll('script[src*=\"/ops-\"]').length") == 2
    assert page_errors(browser) == []


def test_trial_page_plots_commanded_actions_and_qpos_with_the_video_cursor(browser, site, fixture_run):
    from roboswe.viewer._export import trial_key

    page_errors(browser)
    trial = fixture_run["lift"][1]  # exec: EXEC_STEPS x the trial-2 action, then a WAIT_STEPS hold
    raw = (site / "data" / "t" / trial_key(trial) / "trace.js").read_text()
    data = json.loads(raw[raw.index(",") + 1: raw.rindex(")")])
    assert data["steps"] == list(range(EXEC_STEPS + WAIT_STEPS + 1)) and data["stride"] == 1
    assert all(v is None for v in data["action"][0])  # the reset state: no action produced it
    assert data["action"][1:EXEC_STEPS + 1] == [[0.1, 0.0, -0.5, 0, 0, 0, 1]] * EXEC_STEPS
    browser.get(trial_url(site, trial))
    wait_for(browser, "document.body.dataset.ready")
    wait_for(browser, "[...document.querySelectorAll('video')].every(v => v.readyState >= 1 && v.duration > 0)")
    plots = browser.execute_script(
        "return ['plot-action', 'plot-qpos'].map(id => { const c = document.getElementById(id); "
        "const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let inked = 0; "
        "for (let i = 3; i < px.length; i += 4) if (px[i] > 0) inked++; "
        "return {points: Number(c.dataset.points), series: Number(c.dataset.series), inked}; })")
    assert plots[0]["points"] == plots[1]["points"] == EXEC_STEPS + WAIT_STEPS + 1
    assert plots[0]["series"] == 7 and plots[1]["series"] == len(data["qpos"][0]) > 7
    assert all(p["inked"] > 2000 for p in plots), plots  # lines, not only the frame and labels
    browser.execute_script("document.querySelector('video').currentTime = 1.1")  # step 22
    wait_for(browser, "document.getElementById('plot-action').dataset.cursor === '22'")
    assert browser.execute_script("return document.getElementById('plot-qpos').dataset.cursor") == "22"
    # A click on the plot seeks every video to that control step: the right edge is the last one.
    browser.execute_script("const c = document.getElementById('plot-qpos'), r = c.getBoundingClientRect(); "
                           "c.dispatchEvent(new MouseEvent('click', {clientX: r.right - 1, clientY: r.top + r.height / 2}))")
    last = EXEC_STEPS + WAIT_STEPS
    wait_for(browser, f"document.getElementById('plot-action').dataset.cursor === '{last}'")
    assert page_errors(browser) == []


def test_trial_without_video_says_so(browser, site, fixture_run):
    page_errors(browser)
    browser.get(trial_url(site, fixture_run["lift"][0]))
    wait_for(browser, "document.body.dataset.ready")
    assert "No video was recorded" in browser.find_element("id", "videos").text
    assert page_errors(browser) == []


def test_view_serves_the_same_site_with_byte_ranges_for_seeking(browser, site, fixture_run):
    from roboswe.viewer._serve import make_server

    server = make_server(site, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        mp4 = next(p for p in site.rglob("*.mp4"))
        rel = mp4.relative_to(site).as_posix()
        req = urllib.request.Request(f"{base}/{rel}", headers={"Range": "bytes=10-19"})
        with urllib.request.urlopen(req) as resp:
            assert resp.status == 206 and resp.headers["Content-Range"] == f"bytes 10-19/{mp4.stat().st_size}"
            assert resp.read() == mp4.read_bytes()[10:20]
        page_errors(browser)
        browser.get(trial_url(site, fixture_run["lift"][1]).replace(site.as_uri(), base))
        wait_for(browser, "document.body.dataset.ready")
        wait_for(browser, "[...document.querySelectorAll('video')].every(v => v.readyState >= 1 && v.duration > 0)")
        click_op(browser, 3)
        wait_for(browser, "[...document.querySelectorAll('video')].every(v => Math.abs(v.currentTime - 1.0) < 1e-3)")
        assert page_errors(browser) == []
    finally:
        server.shutdown()
        server.server_close()


def test_damaged_video_is_reported_and_never_linked(fixture_run, tmp_path):
    from roboswe.viewer import export_site
    from roboswe.viewer._export import trial_key

    run = tmp_path / "run"
    shutil.copytree(fixture_run["run_dir"], run)
    trial = fixture_run["lift"][1]
    mp4 = next((run / "videos").glob("*t2a0*/agentview.mp4"))
    data = bytearray(mp4.read_bytes())
    data[len(data) // 2] ^= 0xFF
    mp4.write_bytes(bytes(data))
    site = tmp_path / "site"
    export_site(run, site)
    text = (site / "data" / "t" / trial_key(trial) / "trial.js").read_text()
    meta = json.loads(re.match(r"RS\.put\(\"[^\"]+\",(.*)\);\s*$", text, re.DOTALL).group(1))
    by_camera = {v["camera"]: v for v in meta["videos"]}
    assert "reads back as sha256" in by_camera["agentview"]["error"] and "src" not in by_camera["agentview"]
    assert by_camera["frontview"]["src"].endswith("frontview.mp4")
    assert not (site / "videos" / trial_key(trial) / "agentview.mp4").exists()
    missing = meta["evidence"]["missing"]  # and the evidence zip leaves it out, saying why
    assert "reads back as sha256" in missing["artifacts/agentview/agentview.mp4"]


def test_roboswe_view_exports_and_serves_the_run(fixture_run, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "served"
    proc = subprocess.Popen([sys.executable, "-m", "roboswe.cli", "view", str(fixture_run["run_dir"]), "--port", "0",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = []
        match = None
        while match is None and len(lines) < 20:  # log lines may come first
            lines.append(proc.stdout.readline())
            match = re.search(r"at (http://127\.0\.0\.1:\d+/)", lines[-1])
        assert match, lines
        with urllib.request.urlopen(match.group(1) + "index.html", timeout=10) as resp:
            assert resp.status == 200 and b"assets/overview.js" in resp.read()
        with urllib.request.urlopen(match.group(1) + "data/run.js", timeout=10) as resp:
            assert resp.read().startswith(b'RS.put("run",')
    finally:
        proc.terminate()
        proc.wait(10)
