"""Every page of a site in one style, light and dark, and on a phone: in the real Chromium, through CDP.

The reader's dark scheme is emulated (Emulation.setEmulatedMedia, prefers-color-scheme: dark) and
a phone's screen too (Emulation.setDeviceMetricsOverride: 390 x 844 CSS px, 3x, mobile), so what is
checked is what a phone in dark mode renders: computed colours that differ from the light ones
with sane contrast (WCAG ratios), the charts' axes, ticks, legends, budget line and shaded
interval, the trial plots' ink on their canvas, videos and images left as they are, and no page
wider than the screen.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from roboswe.protocol.recorder import VerificationRecord

from roboswe.cli import main
from tests.viewer.fixture_run import RUN_ID
from tests.viewer.test_leaderboard import _append, _series
from tests.viewer.test_viewer import page_errors, trial_url, wait_for

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}
BUDGET = 15  # steps per trial of the extra series: its chart draws the budget line (the trials take 10)


def luminance(colour: str) -> float:
    r, g, b = (int(v) / 255 for v in re.findall(r"[\d.]+", colour)[:3])
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def scheme(browser, dark: bool) -> None:
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
        {"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})


# The colours a check needs, computed by the page: text and background, muted text, links, the charts' parts.
COLOURS = """
const css = (sel, prop) => { const e = document.querySelector(sel); return e ? getComputedStyle(e)[prop] : null; };
return {bg: css('body', 'backgroundColor'), fg: css('body', 'color'), muted: css('.muted', 'color'),
        link: css('main a', 'color'), panel: css('table', 'backgroundColor'), figure: css('.charts figure', 'backgroundColor'),
        axis: css('svg.chart .axis', 'stroke'), tick: css('svg.chart .tick', 'fill'), legend: css('.legend', 'color'),
        budget: css('svg.chart line.budget', 'stroke'), band: css('svg.chart .band', 'fill'),
        band_opacity: css('svg.chart .band', 'fillOpacity'), dot: css('svg.chart circle.dot', 'fill'),
        line: css('svg.success-plot polyline', 'stroke')};
"""
# The trial plot's label ink: the most opaque pixel of its title, drawn top left of the canvas.
PLOT_INK = """
const c = document.getElementById('plot-action'), px = c.getContext('2d').getImageData(46, 0, 160, 14).data;
let best = 3; for (let i = 3; i < px.length; i += 4) if (px[i] > px[best]) best = i;
return px[best] > 200 ? `rgb(${px[best - 3]}, ${px[best - 2]}, ${px[best - 1]})` : null;
"""


@pytest.fixture(scope="module")
def pages(fixture_run, tmp_path_factory) -> dict[str, str]:
    """A site with every page type: a run with a completed task and a step budget, its comparison and leaderboard."""
    from roboswe.viewer import export_site

    base = tmp_path_factory.mktemp("style")
    run, site = base / "run", base / "site"
    shutil.copytree(fixture_run["run_dir"], run)
    lift4, late = fixture_run["lift"][3], 1_764_600_000.0
    _append(run, [VerificationRecord(verification_id=f"{lift4}/v1", trial_id=lift4, verdict="verified",
                                     outcome_reproduced=True, started_at=late, ended_at=late + 1),
                  *_series(f"{RUN_ID}/door-panda", "door-panda", "fixture", "fssss",
                           {"budgets": {"trial_steps": BUDGET}}, late)])
    export_site(run, site)
    assert main(["compare", str(run), str(run), "--viewer", str(site)]) == 0
    assert main(["leaderboard", str(run), "--out", str(site)]) == 0
    uri = site.as_uri()
    return {"index": f"{uri}/index.html", "trial": trial_url(site, fixture_run["lift"][1]),
            "compare": f"{uri}/compare.html", "leaderboard": f"{uri}/leaderboard.html", "runs": f"{uri}/runs.html"}


def _open(browser, url: str) -> dict:
    browser.get(url)
    wait_for(browser, "document.body.dataset.ready || document.querySelector('table')")
    if "trial.html" in url:
        wait_for(browser, "document.body.dataset.ready && document.getElementById('plot-action').dataset.points")
    return browser.execute_script(COLOURS)


def test_every_page_reads_in_the_dark_and_fits_a_phone(browser, pages, artifacts_dir):
    page_errors(browser)
    light = {name: _open(browser, url) for name, url in pages.items()}
    browser.get(pages["trial"])
    wait_for(browser, "document.getElementById('plot-action').dataset.points")
    light_ink = browser.execute_script(PLOT_INK)
    try:  # the emulation is the shared browser's: undone whatever happens here
        scheme(browser, dark=True)  # the loaded page follows: its plots are drawn again in the dark ink
        wait_for(browser, "getComputedStyle(document.body).backgroundColor !== " + repr(light["trial"]["bg"]))
        time.sleep(0.2)
        redrawn = browser.execute_script(PLOT_INK)
        assert redrawn and light_ink and contrast(redrawn, light_ink) > 3, (light_ink, redrawn)
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
        for name, url in pages.items():
            dark = _open(browser, url)
            day = light[name]
            assert luminance(day["bg"]) > 0.8 and luminance(dark["bg"]) < 0.05, (name, day["bg"], dark["bg"])
            for c in (day, dark):
                assert contrast(c["fg"], c["bg"]) >= 7 and contrast(c["muted"], c["bg"]) >= 4.5, (name, c)
                assert c["link"] is None or min(contrast(c["link"], c["bg"]), contrast(c["link"], c["panel"])) >= 4.5, (name, c)
            assert dark["panel"] != day["panel"] and contrast(dark["fg"], dark["panel"]) >= 7, name
            width = browser.execute_script("return document.scrollingElement.scrollWidth")
            assert width <= PHONE["width"], f"{name} is {width} px wide on a 390 px phone"
            browser.save_screenshot(str(Path(artifacts_dir) / f"viewer-{name}-dark-phone.png"))
            if name in ("index", "leaderboard"):  # the charts: axes, ticks, legend, budget line, shaded interval
                for c in (day, dark):
                    assert contrast(c["axis"], c["figure"]) >= 3 and contrast(c["tick"], c["figure"]) >= 4.5, (name, c)
                    assert contrast(c["legend"], c["figure"]) >= 4.5, (name, c)
                assert dark["tick"] != day["tick"] and dark["axis"] != day["axis"]
            if name == "index":
                for c in (day, dark):
                    assert contrast(c["budget"], c["figure"]) >= 3 and contrast(c["dot"], c["figure"]) >= 3, c
                grid_top = browser.execute_script("return document.querySelector('table.grid').getBoundingClientRect().top")
                assert grid_top < PHONE["height"] / 2, grid_top  # the results grid first: on the first half-screen
            if name == "leaderboard":
                for c in (day, dark):
                    assert contrast(c["line"], c["figure"]) >= 3 and c["band"] and 0.1 <= float(c["band_opacity"]) <= 0.3, c
                assert dark["line"] != day["line"]
            if name == "trial":
                ink = browser.execute_script(PLOT_INK)
                assert ink and contrast(ink, dark["bg"]) >= 4.5, ink
                kept = browser.execute_script(
                    "return [...document.querySelectorAll('video, #detail img, .shot img')].map(v => "
                    "[getComputedStyle(v).filter, getComputedStyle(v).mixBlendMode, getComputedStyle(v).opacity])")
                assert kept and all(k == ["none", "normal", "1"] for k in kept), kept  # the pixels as recorded
                assert browser.execute_script("return getComputedStyle(document.querySelector('video')).backgroundColor") \
                    == "rgb(0, 0, 0)"
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert page_errors(browser) == []
