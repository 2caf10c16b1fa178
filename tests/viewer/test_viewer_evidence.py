"""The viewer's downloads (results.json, a trial's evidence zip), tokens and context, and the comparison page."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from tests.viewer.fixture_run import SLIDE
from tests.viewer.test_viewer import page_errors, trial_url, wait_for

pytestmark = pytest.mark.slow


def _href(browser, selector: str) -> str:
    return browser.execute_script(f"return document.querySelector('{selector}').getAttribute('href')")


def test_overview_offers_results_json_with_the_figures_it_shows(browser, site):
    page_errors(browser)
    browser.get((site / "index.html").as_uri())
    wait_for(browser, "document.querySelector('#download-results')")
    results = json.loads((site / _href(browser, "#download-results")).read_bytes())
    metrics = browser.find_element("id", "metrics").text
    (dataset,) = results["datasets"]
    assert dataset["headline"] in metrics  # the file holds the figures the page shows
    assert results["denominators"]["admitted"] == ["lift-panda", "stack-panda"]
    usage = browser.find_element("id", "usage").text
    assert f"{results['usage']['run']['input']:,}" in usage and "USD" in usage
    context = browser.find_element("id", "context").text
    assert "C = 200,000, O = 16,384, S = 4,096, B = C − O − S = 179,520" in context
    assert f"{SLIDE['before_units'] - SLIDE['after_units']:,}" in context  # the slide, with units removed
    assert page_errors(browser) == []


def test_trial_page_offers_its_evidence_zip_and_shows_tokens_and_slides(browser, site, fixture_run):
    from roboswe.records.reader import RunReader

    trial = fixture_run["lift"][1]
    page_errors(browser)
    browser.get(trial_url(site, trial))
    wait_for(browser, "document.body.dataset.ready")
    context = browser.find_element("id", "trial-context").text
    assert "1,240" in context  # four python decisions of 10 input tokens and one Anthropic one of 1,200
    assert "C = 200,000" in context and f"{SLIDE['before_units']:,}" in context
    archive = site / _href(browser, "#download-evidence")
    with zipfile.ZipFile(archive) as z:
        manifest = json.loads(z.read("MANIFEST.json"))
        assert manifest["trial_id"] == trial and manifest["missing"] == {}
        for name, sha in manifest["files"].items():
            assert hashlib.sha256(z.read(name)).hexdigest() == sha
        messages = [json.loads(line) for line in z.read("records/messages.jsonl").splitlines()]
        names = set(z.namelist())
    with RunReader(fixture_run["run_dir"]) as reader:
        recorded = {m.message_id: m for m in reader.messages(trial)}
        videos = [a for a in reader.artifacts(trial_id=trial) if a.artifact == "video"]
    assert {m["message_id"] for m in messages} == set(recorded)
    import base64

    for m in messages:  # the exact bytes, as recorded
        assert hashlib.sha256(base64.b64decode(m["request"]["base64"])).hexdigest() == recorded[m["message_id"]].request_sha256
    assert {f"artifacts/{a.camera}/{Path(a.path).name}" for a in videos} <= names
    assert {"records/operations.jsonl", "records/control_traces.jsonl", "records/slides.jsonl",
            "records/verifications.jsonl"} <= names
    assert page_errors(browser) == []


def test_comparison_page_shows_paired_differences(browser, tmp_path):
    from roboswe.records.compare import compare_runs
    from roboswe.viewer._compare import export_comparisons
    from tests.records.test_compare import _build

    a = _build(tmp_path / "a", "retain", {"Lift": "FFSSS", "Stack": "SSSSS", "Door": "FFFFF"})
    b = _build(tmp_path / "b", "none", {"Lift": "FFFFS", "Stack": "SSSSS", "Door": "FSSSS"},
               budgets={"trial_steps": 3000})
    page = export_comparisons([compare_runs(a, b, allow_differ=["budgets"])], tmp_path / "site")
    page_errors(browser)
    browser.get(page.as_uri())
    wait_for(browser, "document.querySelector('table.compare')")
    text = browser.find_element("id", "comparisons").text
    assert "over 3 task(s) both completed" in text and "+0.13" in text
    assert "pin differs, allowed by --allow-differ budgets" in text
    assert page_errors(browser) == []
