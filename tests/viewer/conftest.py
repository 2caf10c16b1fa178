"""A real run (robosuite states, checkpoints, mp4s) exported once, and a headless Chromium to look at it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..conftest import require_in_ci

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def fixture_run(tmp_path_factory):
    from tests.viewer.fixture_run import build_run

    return build_run(tmp_path_factory.mktemp("viewer") / "run")


@pytest.fixture(scope="session")
def site(fixture_run, tmp_path_factory):
    from roboswe.viewer import export_site

    out = tmp_path_factory.mktemp("site") / "site"
    export_site(fixture_run["run_dir"], out, chunk=200)
    return out


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        require_in_ci("Debian chromium and chromium-driver are not installed (setup.sh installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000", "--autoplay-policy=no-user-gesture-required",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture
def artifacts_dir(tmp_path) -> Path:
    """Where screenshots go: $ROBOSWE_TEST_ARTIFACTS if set, else the test's tmp dir."""
    target = Path(os.environ.get("ROBOSWE_TEST_ARTIFACTS", tmp_path))
    target.mkdir(parents=True, exist_ok=True)
    return target

