"""The trial page's transcript: every turn from the records, in order, linked with the timeline and the videos.

The data tests read the exported transcript of the shared fixture run; one browser case looks at
the page (escaping, filter, the links both ways, the keys)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from roboswe.viewer._export import trial_key
from roboswe.viewer._transcript import system_prompt
from tests.viewer.fixture_run import HOSTILE, SYSTEM
from tests.viewer.test_viewer import page_errors, trial_url, wait_for


def _transcript(site: Path, trial_id: str) -> dict:
    text = (site / "data" / "t" / trial_key(trial_id) / "transcript.js").read_text()
    return json.loads(text[text.index(",") + 1:text.rindex(")")])


def test_the_transcript_holds_every_recorded_turn_in_order_with_its_operation(site, fixture_run):
    t = _transcript(site, fixture_run["lift"][1])  # Lift trial 2: an Anthropic decision, then python ones
    assert t["system"] == SYSTEM  # read from the trial's first recorded request
    roles = [e["role"] for e in t["entries"]]
    assert roles == ["opening with the previous outcome"] + ["decision", "result"] * 5
    assert "The previous trial ended: failure" in t["entries"][0]["parts"][0]["text"]
    assert "seq" not in t["entries"][0]  # the opening answers no operation
    assert [e["seq"] for e in t["entries"][1:]] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    kinds = [p["kind"] for p in t["entries"][1]["parts"]]
    assert kinds == ["reasoning", "opaque", "text", "tool_call"]
    opaque = t["entries"][1]["parts"][1]
    assert opaque == {"kind": "opaque", "provider": "anthropic", "item": "thinking", "size": 33}  # never its bytes
    observe = t["entries"][4]["parts"][0]
    assert observe["kind"] == "tool_result" and observe["images"][0]["src"].startswith("images/")
    assert (site / observe["images"][0]["src"]).is_file()
    assert HOSTILE in t["entries"][3]["parts"][0]["text"]  # kept verbatim as data; the page escapes it
    (slide,) = t["slides"]
    assert slide["before"] == 9 and slide["removed"] == 4  # before the finish decision, where it happened
    assert [e["n"] for e in t["entries"] if "removed_by" in e] == [0, 2]


def test_a_trial_without_provider_calls_has_an_empty_transcript(site, fixture_run):
    t = _transcript(site, fixture_run["stack"][1])
    assert t == {"system": None, "system_recorded": False, "entries": [], "slides": []}


@pytest.mark.parametrize("body", [
    {"system": SYSTEM, "messages": []},  # Anthropic
    {"system": [{"type": "text", "text": SYSTEM}]},
    {"instructions": SYSTEM, "input": []},  # OpenAI responses
    {"system_instruction": {"parts": [{"text": SYSTEM}]}},  # Gemini
    {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]},  # chat completions
])
def test_the_system_prompt_is_read_from_each_providers_request_body(body):
    assert system_prompt(msgspec.json.encode(body)) == SYSTEM


def test_an_unreadable_request_has_no_system_prompt():
    assert system_prompt(b"\x00not json") is None and system_prompt(b'{"messages": []}') is None


@pytest.mark.slow
def test_the_transcript_page_escapes_filters_and_links_both_ways(browser, site, fixture_run):
    page_errors(browser)
    browser.get(trial_url(site, fixture_run["lift"][1]))
    wait_for(browser, "document.body.dataset.ready && document.querySelectorAll('#transcript li.turn').length")
    assert browser.execute_script("return window.__pwned") is None  # the hostile text ran nothing
    assert browser.execute_script("return document.querySelectorAll('img[src=\"x\"], #transcript script').length") == 0
    assert HOSTILE in browser.execute_script("return document.querySelector('#turn-3').textContent")
    assert browser.execute_script("return document.querySelector('#system-text').textContent") == SYSTEM
    marks = browser.execute_script("return [...document.querySelectorAll('#transcript > li')].map(li => li.id || 'slide')")
    assert marks.index("slide") == marks.index("turn-9") - 1  # just before the first turn after the slide
    assert "reasoning (exposed by the provider)" in browser.find_element("id", "turn-1").text
    assert "opaque anthropic item (thinking" in browser.find_element("id", "turn-1").text

    browser.execute_script("const s = document.querySelector('#transcript-search'); s.value = 'descend first'; "
                           "s.dispatchEvent(new Event('input'))")
    shown = browser.execute_script("return [...document.querySelectorAll('#transcript li.turn')].filter(li => !li.hidden).map(li => li.id)")
    assert shown == ["turn-1"] and "1 of 11" in browser.find_element("id", "transcript-count").text
    browser.execute_script("const s = document.querySelector('#transcript-search'); s.value = ''; s.dispatchEvent(new Event('input'))")

    wait_for(browser, "[...document.querySelectorAll('video')].every(v => v.readyState >= 1)")
    browser.execute_script("document.querySelector('#turn-7').click()")  # the wait decision: steps 20..26
    wait_for(browser, "document.querySelector('#timeline li.op.selected[data-seq=\"3\"]')")
    wait_for(browser, "[...document.querySelectorAll('video')].every(v => Math.abs(v.currentTime - 1.0) < 1e-3)")
    assert browser.execute_script("return [...document.querySelectorAll('#transcript li.turn.linked')].map(li => li.id)") == [
        "turn-7", "turn-8"]

    browser.execute_script("document.querySelector('li.op[data-seq=\"0\"]').click()")  # a written file, once: its diff
    detail = browser.find_element("id", "detail").text
    assert detail.count("close the gripper") == 2  # the model's sentence and the diff, not the call's content again
    assert "shown below as the diff" in detail

    browser.execute_script("document.querySelector('li.op[data-seq=\"1\"]').click()")  # timeline -> its turns
    browser.execute_script("document.querySelector('#detail a.to-turn').click()")
    assert browser.execute_script("return document.activeElement.id") == "turn-3"

    # `roboswe recovery`'s stored mishaps: on the plots, on the operations that hold them, and seekable
    recovery = browser.find_element("id", "recovery").text
    assert "mishap (cube lifted) at step 12, recovered at step 18 after 6 steps" in recovery
    assert "mishap (cube lifted) at step 22, not recovered by the trial's end (step 26)" in recovery
    assert browser.execute_script("return document.querySelector('#plot-action').dataset.mishaps") == "2"
    assert browser.execute_script("return document.querySelector('#plot-qpos').dataset.success") == "16-25"  # shaded
    badges = browser.execute_script("return [2, 3].map(s => [...document.querySelectorAll("
                                    "`li.op[data-seq=\"${s}\"] .badge`)].map(b => b.textContent))")
    assert badges == [["mishap", "recovered"], ["mishap"]]
    browser.execute_script("[...document.querySelectorAll('#recovery a')].find(a => a.dataset.step === '18').click()")
    wait_for(browser, "Math.abs(document.querySelector('video').currentTime - 0.9) < 1e-3")

    body = browser.find_element("tag name", "body")
    body.send_keys(" ")  # space plays, space again pauses; the arrow steps one control step (0.05 s)
    wait_for(browser, "!document.querySelector('video').paused")
    body.send_keys(" ")
    wait_for(browser, "document.querySelector('video').paused")
    browser.execute_script("document.querySelectorAll('video').forEach(v => v.currentTime = 0.5)")
    wait_for(browser, "document.querySelector('#clock').textContent.includes('step 10')")
    body.send_keys("\ue014")  # ArrowRight
    wait_for(browser, "Math.abs(document.querySelector('video').currentTime - 0.55) < 1e-3")
    assert page_errors(browser) == []
