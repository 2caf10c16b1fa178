"""The viewer on a RoboPaint round: the overview links the painting gallery, the timeline says what each MoveFlange did.

One round runs in process on the real paint scene (tests/evaluation/harness.py: only the sandbox
bridge is a stand-in, and the paint interface never execs): a batch the harness's check refuses,
one the scene rejects, one painted stroke, the submission. A one-trial run on the fake scene is
the run without a gallery. Both are exported once per module; the fast tests read the exported
data, one slow test looks at the pages in Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import trio
from roboswe.protocol.participant import FlangeWaypoint, MoveFlange, SubmitPainting
from roboswe.sim.manifest import load_manifest
from roboswe.sim.paint.painter import three_strokes

from roboswe.evaluation.progress import Progress
from roboswe.evaluation.series import run_series
from roboswe.evaluation.task_record import recorded
from roboswe.records.reader import RunReader
from roboswe.viewer import export_site
from roboswe.viewer._export import trial_key
from roboswe.viewer._summary import summary

from ..evaluation.agents import ReachAgent, decided
from ..evaluation.harness import (
    ROOT,
    admitted_paint,
    admitted_task,
    peers,
    reach_manifest,
    reader_factory,
    record_run,
    series_plan,
)

os.environ.setdefault("MUJOCO_GL", "egl")  # the paint scene renders its observations (on the CPU here)

DOWN = [1.0, 0.0, 0.0, 0.0]
PROBE = (0.27, 0.42, 0.26)
STROKE = three_strokes(0)[0]  # the scripted painter's first stroke: dip in the dish, then across the paper
ROUND = [
    MoveFlange(waypoints=[FlangeWaypoint(position=list(PROBE), quaternion_xyzw=DOWN, duration_s=0.05)]),  # under 0.08 s: refused
    MoveFlange(waypoints=[FlangeWaypoint(position=list(PROBE), quaternion_xyzw=DOWN, duration_s=0.1)]),  # too fast: rejected
    MoveFlange(waypoints=[FlangeWaypoint(position=list(w.position), quaternion_xyzw=list(w.quaternion), duration_s=w.duration_s)
                          for w in STROKE]),
    SubmitPainting(reason="one stroke"),
]


class RoundAgent:
    def decide(self, request):
        return ROUND[min(decided(request), len(ROUND) - 1)]


async def _series(run_dir: Path, plan, agent) -> None:
    with trio.fail_after(120):
        async with peers(run_dir, agent) as links:
            await record_run(links)
            await run_series(links, plan, Progress(), reader_factory(run_dir))


def _exported(tmp: Path, task, agent, **plan_options) -> dict:
    run_dir = tmp / "run"
    run_dir.mkdir()
    plan = series_plan(run_dir, task, trials=1, **plan_options)
    trio.run(_series, run_dir, plan, agent)
    export_site(run_dir, tmp / "site", evidence=False)
    with RunReader(run_dir) as reader:
        (view,) = reader.trials(plan.series_id)
        return {"site": tmp / "site", "run_dir": run_dir, "trial_id": view.trial_id, "record": recorded(reader, view.trial_id),
                "ops": reader.operations(view.trial_id)}


@pytest.fixture(scope="module")
def paint(tmp_path_factory):
    return _exported(tmp_path_factory.mktemp("paint"), admitted_paint(load_manifest(ROOT / "configs" / "tasks" /
                                                                                    "paint-three-strokes.toml")),
                     RoundAgent(), interface="paint")


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return _exported(tmp_path_factory.mktemp("plain"), admitted_task(reach_manifest()), ReachAgent())


def _data(site: Path, rel: str):
    text = (site / rel).read_text()
    return json.loads(text[text.index(",") + 1:text.rindex(")")])  # RS.put("<key>",<json>);


def test_the_overview_data_links_the_gallery_only_for_a_run_that_has_one(paint, plain):
    run = _data(paint["site"], "data/run.js")
    assert run["gallery"] == {"src": "gallery.html", "canvases": 1, "rounds": 1, "goals": 1}
    assert (paint["site"] / run["gallery"]["src"]).is_file()
    assert "gallery" not in _data(plain["site"], "data/run.js") and not (plain["site"] / "gallery.html").exists()


def test_move_flange_and_submit_painting_rows_say_what_happened(paint):
    rows = _data(paint["site"], f"data/t/{trial_key(paint['trial_id'])}/ops-0.js")
    assert [r["operation"] for r in rows] == ["move_flange"] * 3 + ["submit_painting"]
    refused, rejected, stroke, submitted = (r["summary"] for r in rows)
    assert refused.startswith("1 waypoint over 0.05 s, to (0.270, 0.420, 0.260) · refused, not sent: ")
    assert "duration_s" in refused
    assert rejected == "1 waypoint over 0.10 s, to (0.270, 0.420, 0.260) · rejected by the scene (linear_speed at waypoint 0), " \
                       "counted as an action"
    record = paint["record"]
    move = record["actions"][1]  # the scene's second action: the stroke (the refused batch never reached it)
    assert move["kind"] == "move_flange" and move["result"]["accepted"]
    report = move["result"]["report"]
    assert report["paper_contact_steps"] > 0 and report["pigment_contact_steps"] > 0  # it dipped and painted
    seconds = sum(w.duration_s for w in STROKE)
    end = "(" + ", ".join(f"{v:.3f}" for v in STROKE[-1].position) + ")"
    assert stroke.startswith(f"8 waypoints over {seconds:.2f} s, ") and f"m between them, to {end}" in stroke
    assert f"· {rows[2]['feedback']['controls']} control steps ·" in stroke
    assert (f"brush on the paper {report['paper_contact_steps']} ticks and in the pigment {report['pigment_contact_steps']} "
            f"ticks (max {report['max_contact_force_n']:.1f} N)") in stroke
    canvas = record["canvas"]
    assert canvas["actions_used"] == 3  # the scene counts the rejected batch, the stroke and the submission
    assert submitted == f"painting submitted · canvas {canvas['sha256'][:16]} saved after 3 of {record['action_limit']} " \
                        "actions · one stroke"


def test_a_move_without_contact_says_brush_up_and_a_protective_stop_is_named():
    arguments = {"waypoints": [{"position": [0.0, 0.45, 0.3], "quaternion_xyzw": DOWN, "duration_s": 0.8},
                               {"position": [0.3, 0.85, 0.3], "quaternion_xyzw": DOWN, "duration_s": 1.2}]}
    feedback = {"requested": 2, "executed": 2, "controls": 200, "stopped": "done", "one_action": True}
    report = {"paper_contact_steps": 0, "pigment_contact_steps": 0, "max_contact_force_n": 0.0, "protective_stop": None}
    assert summary("move_flange", arguments, feedback, scene={"accepted": True, "report": report}) == (
        "2 waypoints over 2.00 s, 0.500 m between them, to (0.300, 0.850, 0.300) · 200 control steps · brush up (no contact)")
    stopped = {**report, "paper_contact_steps": 5, "max_contact_force_n": 31.2,
               "protective_stop": {"waypoint_index": 1, "force_n": 31.2}}
    assert summary("move_flange", arguments, {**feedback, "controls": 120}, scene={"accepted": True, "report": stopped}) == (
        "2 waypoints over 2.00 s, 0.500 m between them, to (0.300, 0.850, 0.300) · 120 control steps · "
        "brush on the paper 5 ticks (max 31.2 N) · protective stop at waypoint 1 (31.2 N)")
    # no task record (or a malformed batch): what the operation itself carries
    assert summary("move_flange", arguments, {**feedback, "stopped": "trial_budget"}) == (
        "2 waypoints over 2.00 s, 0.500 m between them, to (0.300, 0.850, 0.300) · 200 control steps · stopped: trial budget")
    assert summary("move_flange", {"waypoints": [{"position": "x"}]}, {"error": "bad"}) == "1 waypoint · refused, not sent: bad"
    assert summary("submit_painting", {}, {"reason": ""}) == "painting submitted"


PAINT_TASK = ROOT / "configs" / "tasks" / "paint-three-strokes.toml"


def test_a_painting_round_gets_its_video_drawn_with_the_canvas_it_painted(paint, tmp_path):
    from roboswe.sim.backend import SimError
    from roboswe.sim.paint.video import round_frames
    from roboswe.sim.physics_state import states_from_traces
    from roboswe.sim.video import VideoRenderer, frame_rows

    from roboswe.records.video import render_trial_video

    run_dir = tmp_path / "run"
    shutil.copytree(paint["run_dir"], run_dir)
    manifest = load_manifest(PAINT_TASK)
    records = render_trial_video(run_dir, paint["trial_id"], manifest, run_id="r")
    videos = [r for r in records if r.artifact == "video"]
    with RunReader(run_dir) as reader:
        states = states_from_traces(reader.control_traces(paint["trial_id"]))
    assert [v.camera for v in videos] == list(manifest.video.cameras)
    assert all(v.meta["frames"] == len(frame_rows(states, manifest.control_hz, manifest.video.fps)) for v in videos)
    assert all((run_dir / v.path).stat().st_size > 0 for v in videos)
    # the replay must end on the recorded canvas: a record of another painting gets no video
    forged = {**paint["record"], "canvas": {**paint["record"]["canvas"], "sha256": "0" * 64}}
    renderer = VideoRenderer(manifest)
    try:
        with pytest.raises(SimError, match="replayed canvas hashes"):
            list(round_frames(renderer._sim, forged, [], [], 8, 8))
    finally:
        renderer.close()


def test_the_shareable_site_holds_no_key_to_the_blinded_pairs_and_no_page_without_its_data(paint, tmp_path):
    from roboswe.viewer._compare import export_comparisons

    pairs = paint["site"] / "gallery" / "pairs"
    assert (pairs / "pairs.json").is_file() and not (pairs / "key.json").exists()  # raters read the site
    assert not (paint["site"] / "compare.html").exists()  # no comparison was written into it
    site = tmp_path / "site"
    shutil.copytree(paint["site"], site)
    export_comparisons([], site)
    assert (site / "compare.html").is_file() and (site / "data" / "compare.js").is_file()
    export_site(paint["run_dir"], site, evidence=False)  # a re-export replaces data/, compare.js with it
    assert not (site / "compare.html").exists() and (site / "index.html").is_file()


def test_the_report_reads_at_80_columns_nothing_cut_off(paint):
    from rich.console import Console

    from roboswe.records.report import (
        ATTEMPT_COLUMNS,
        BADGES,
        USAGE_COLUMNS,
        print_report,
        run_summary,
    )

    with RunReader(paint["run_dir"]) as reader:
        report = run_summary(reader)
    console = Console(record=True, width=80)
    print_report(report, console)
    lines = console.export_text().splitlines()
    assert "…" not in "\n".join(lines)  # words fold, figures stay whole
    assert not report["series"][0]["attempts"][0]["detail"]  # nothing to detail: no detail column
    header = " ".join(col for col, _ in ATTEMPT_COLUMNS[:-1]).split()
    assert any(line.split() == header for line in lines)
    assert any(line.split() == list(USAGE_COLUMNS) for line in lines)
    (series,) = report["series"]
    (a,) = series["attempts"]
    row = ["1", "0", a["outcome"], BADGES[a["verdict"]], series["metrics"]["statuses"][0], str(a["control_steps"])]
    assert row == ["1", "0", "success", "unverified", "unverified", row[-1]]  # the longest words a table shows
    assert any(line.split()[:6] == row for line in lines)


LOST = "AttributeError: 'NoneType' object has no attribute 'load_state'"


@pytest.fixture(scope="module")
def lost_video(paint, tmp_path_factory):
    """The painting round's run as it was when its video failed: the worker's event, then an export."""
    from roboswe.protocol.recorder import EventRecord

    from roboswe.records.store import RunStore

    tmp = tmp_path_factory.mktemp("lost")
    run_dir = tmp / "run"
    shutil.copytree(paint["run_dir"], run_dir)
    with RunReader(run_dir) as reader:
        run_id = reader.run().run_id
    with RunStore.open(run_dir) as store:
        store.put_durable(EventRecord(run_id=run_id, event="video_failed", at=1.0, trial_id=paint["trial_id"],
                                      data={"error": LOST}))
    export_site(run_dir, tmp / "site", evidence=False)
    return {"run_dir": run_dir, "site": tmp / "site", "trial_id": paint["trial_id"],
            "line": f"warning: no video for trial {paint['trial_id']}: {LOST}"}


def test_a_failed_video_is_a_warning_in_the_runs_output_the_report_and_the_trial_data(lost_video, capsys):
    from rich.console import Console

    from roboswe.commands.run import print_outcome
    from roboswe.records.report import print_report, run_summary

    print_outcome(lost_video["run_dir"])
    assert lost_video["line"] in capsys.readouterr().err.splitlines()
    with RunReader(lost_video["run_dir"]) as reader:
        report = run_summary(reader)
    console = Console(record=True, width=200)
    print_report(report, console)
    assert lost_video["line"] in console.export_text().splitlines()
    trial = _data(lost_video["site"], f"data/t/{trial_key(lost_video['trial_id'])}/trial.js")
    assert [f["line"] for f in trial["failed_artifacts"]] == [lost_video["line"]] and trial["videos"] == []


@pytest.mark.slow
def test_a_trial_page_without_video_says_why_and_hides_the_play_controls(browser, lost_video):
    from .test_viewer import page_errors, trial_url, wait_for

    page_errors(browser)
    browser.get(trial_url(lost_video["site"], lost_video["trial_id"]))
    warning = wait_for(browser, "document.querySelector('#videos p.warning')")
    assert warning.text == lost_video["line"]
    assert browser.execute_script("return getComputedStyle(document.querySelector('#player .controls')).display") == "none"
    assert page_errors(browser) == []


def _gallery_in_the_dark_on_a_phone(browser) -> None:
    """The gallery in the viewer's one style: dark when the reader's system is, its canvases as painted, no wider
    than a 390 px phone (tests/viewer/test_style.py checks the other pages the same way)."""
    from .test_style import PHONE, contrast, luminance, scheme
    from .test_viewer import wait_for

    try:  # the emulation is the shared browser's: undone whatever happens here
        scheme(browser, dark=True)
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
        browser.refresh()
        wait_for(browser, "document.querySelector('figure.canvas img') && document.querySelector('figure.canvas img').naturalWidth")
        seen = browser.execute_script(
            "const s = (e) => getComputedStyle(e); const img = document.querySelector('figure.canvas img'); "
            "return {bg: s(document.body).backgroundColor, fg: s(document.body).color, "
            "head: s(document.querySelector('header')).backgroundColor, img: [s(img).filter, s(img).mixBlendMode], "
            "width: document.scrollingElement.scrollWidth}")
        assert luminance(seen["bg"]) < 0.05 and contrast(seen["fg"], seen["bg"]) >= 7, seen
        assert seen["img"] == ["none", "normal"] and seen["width"] <= PHONE["width"], seen
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


@pytest.mark.slow
def test_the_pages_link_the_gallery_and_show_the_summaries(browser, paint, plain):
    from .test_viewer import page_errors, trial_url, wait_for

    page_errors(browser)
    browser.get((plain["site"] / "index.html").as_uri())
    wait_for(browser, "document.querySelectorAll('table.grid td.cell').length")
    assert not browser.find_elements("id", "gallery-link")
    budget = _data(plain["site"], "data/run.js")["series"][0]["trial_steps"]
    with RunReader(plain["run_dir"]) as reader:
        assert budget == reader.series()[0].pins["budgets"]["trial_steps"]  # the series' own pin
    legend = browser.execute_script("return document.querySelector('#charts .legend').textContent")
    assert legend == f"unverified · step budget {budget} per trial (above the chart)"  # the dots' colour named, the budget
    browser.get((paint["site"] / "index.html").as_uri())
    link = wait_for(browser, "document.querySelector('#gallery-link')")
    assert link.get_attribute("href").endswith("/gallery.html") and "1 canvas from 1 round, 1 goal" in \
        browser.find_element("id", "run-head").text
    link.click()
    wait_for(browser, "document.querySelector('figure.canvas img') && document.querySelector('figure.canvas img').naturalWidth")
    assert browser.find_element("tag name", "h1").text == "Painting gallery"
    _gallery_in_the_dark_on_a_phone(browser)
    browser.get(trial_url(paint["site"], paint["trial_id"]))
    wait_for(browser, "document.querySelectorAll('#timeline li.op').length")
    shown = browser.execute_script("return [...document.querySelectorAll('#timeline li.op .sum')].map(s => s.textContent)")
    rows = _data(paint["site"], f"data/t/{trial_key(paint['trial_id'])}/ops-0.js")
    assert shown == [r["summary"] for r in rows] and shown[-1].startswith("painting submitted · canvas ")
    assert page_errors(browser) == []


def test_the_transcript_of_a_real_round_holds_every_turn_linked_to_its_operation(paint):
    """The trial loop's own records (turn events, the neutral request): each decision and its result tied to
    the operation between them, the opening's goal and camera images exported beside the page."""
    t = _data(paint["site"], f"data/t/{trial_key(paint['trial_id'])}/transcript.js")
    assert t["system"].startswith("You paint with a simulated robot arm") and "## Task" in t["system"]  # the paint interface
    roles = [e["role"] for e in t["entries"]]
    assert roles == ["opening"] + ["decision", "result"] * len(paint["ops"])
    assert [e["seq"] for e in t["entries"][1:]] == [op.seq for op in paint["ops"] for _ in range(2)]
    images = [p for p in t["entries"][0]["parts"] if p["kind"] == "image"]
    assert images and all((paint["site"] / p["src"]).is_file() for p in images)
    calls = [p["name"] for e in t["entries"] for p in e["parts"] if p["kind"] == "tool_call"]
    assert calls == [op.operation for op in paint["ops"]]
