"""The kitchen demo on a RoboCasa kitchen (kit CloseDrawer), end to end on both sandboxes.

Two `roboswe run`s of configs/runs/kitchen-demo.toml feed every assertion: a 2-trial retained
series on bwrap (trial 2 reuses trial 1's script: the retained path) and a 1-trial series on
docker. Both go through the real supervisor and actors, real RoboCasa task code on the
placeholder kit, replay verification in a fresh scene and sandbox, and the video worker.
One docker trial is enough there: what differs between the sandboxes is the sandbox (the
bridge, the exec path, the replay's sandbox pin), which the first trial and its replay
exercise whole; the retained-workspace path between trials is sandbox-independent and
runs on bwrap.

The placeholder label: every series of a kit run pins assets = "placeholder"; the report and
the viewer say so; `roboswe compare` refuses to pair such a run with a real-asset one. No
RoboCasa assets can exist here, so the real-asset run is a copy of the bwrap run's database
relabelled in the test (the only way to get one offline); the unrelabelled copy is compared
too, so the refusal is the label's doing.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pytest

from roboswe.records.reader import RunReader

from ..conftest import require_in_ci
from ..viewer.conftest import browser  # noqa: F401 - the headless Chromium fixture
from .conftest import ROOT, roboswe

pytestmark = pytest.mark.slow
TASK = "kit-closedrawer"
PLACEHOLDER_NOTICE = "assets = placeholder (kit-closedrawer)"


def kitchen_config(directory: Path, trials: int) -> Path:
    """configs/runs/kitchen-demo.toml as shipped, with fewer trials."""
    text = (ROOT / "configs" / "runs" / "kitchen-demo.toml").read_text()
    assert "trials = 5" in text
    path = directory / f"kitchen-demo-{trials}.toml"
    path.write_text(text.replace("trials = 5", f"trials = {trials}"))
    return path


@pytest.fixture(scope="module")
def kit_admitted(work_dir, sandbox_image) -> Path:
    """admitted.json holding kit-closedrawer, through `roboswe admit` (two fresh processes, predicate review)."""
    root = work_dir / "kit-dataset"
    (root / "datasets").mkdir(parents=True)
    (root / "tasks").symlink_to(ROOT / "configs" / "tasks")  # a dataset names tasks beside it
    (root / "datasets" / "kit-one.toml").write_text(f'id = "kit-one"\ndescription = "kit CloseDrawer"\ntasks = ["{TASK}"]\n')
    out = work_dir / "admitted-kit.json"
    proc = roboswe("admit", str(root / "datasets" / "kit-one.toml"), "--out", str(out), timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (task,) = json.loads(out.read_text())["tasks"]
    assert task["status"] == "admitted", task.get("reason")
    assert task["fingerprint"]["versions"]["assets"] == "placeholder"
    return out


@pytest.fixture(scope="module")
def bwrap_run(work_dir, kit_admitted) -> Path:
    run_dir = work_dir / "kitchen-bwrap"
    proc = roboswe("run", str(kit_admitted), "--config", str(kitchen_config(work_dir, 2)), "--out", str(run_dir),
                   "-e", "bwrap", timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run_dir


@pytest.fixture(scope="module")
def docker_run(work_dir, kit_admitted, sandbox_image) -> Path:
    from roboswe.sandbox import backend_class

    why = backend_class("docker").available()
    if why or not sandbox_image.docker_tag:
        require_in_ci(f"docker backend unavailable: {why or 'image not imported into Docker'}")
    run_dir = work_dir / "kitchen-docker"
    proc = roboswe("run", str(kit_admitted), "--config", str(kitchen_config(work_dir, 1)), "--out", str(run_dir),
                   "-e", "docker", timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run_dir


def check_verified_trials_with_videos(run_dir: Path, kit_admitted: Path, trials: int, backend: str) -> list:
    """Every trial succeeded on the admitted scene, replayed verified, and has its video; returns the trials."""
    reference = json.loads(kit_admitted.read_text())["tasks"][0]["fingerprint"]["digest"]
    with RunReader(run_dir) as reader:
        (series,) = reader.series()
        assert series.task == TASK and series.trials == trials
        assert series.pins["assets"] == "placeholder"  # the series record says what the scene was built from
        assert json.loads((run_dir / "results.json").read_bytes())["assets"] == {TASK: "placeholder"}  # and the results
        views = reader.trials(series.series_id)
        assert [v.start.index for v in views] == list(range(1, trials + 1))
        videos = {a.trial_id: a for a in reader.artifacts() if a.artifact == "video"}
        for v in views:
            assert v.start.fingerprint == reference  # the admitted placeholder scene, rebuilt fresh
            assert v.end.outcome == "success" and v.end.reason == "success_interval", (v.trial_id, v.end.reason)
            assert v.verification.verdict == "verified" and v.verification.outcome_reproduced is True
            states = v.verification.detail["states"]  # every control step's state replayed bit for bit
            assert states["compared"] == v.end.control_steps + 1 and states["max_abs_qpos_diff"] == 0.0
            video = videos[v.trial_id]
            assert video.camera == "robot0_agentview_center" and video.meta["frames"] >= v.end.control_steps // 2
            assert hashlib.sha256((run_dir / video.path).read_bytes()).hexdigest() == video.sha256
        opened = {e.data["backend"] for _, e in reader.events() if e.event == "trial_opened"}
        assert opened == {backend}
        return views


def test_bwrap_series_closes_the_drawer_verified_with_videos_reusing_its_script(bwrap_run, kit_admitted):
    views = check_verified_trials_with_videos(bwrap_run, kit_admitted, 2, "bwrap")
    with RunReader(bwrap_run) as reader:
        ops = [[o.operation for o in reader.operations(v.trial_id)] for v in views]
        first, second = [reader.operations(v.trial_id) for v in views]
    assert ops[0][:4] == ["list_files", "write_file", "write_file", "observe"] and "exec" in ops[0]
    # retained workspace: trial 2 reads the script it wrote in trial 1 and only resets plan.json
    assert ops[1][:4] == ["list_files", "read_file", "write_file", "observe"]
    assert [o.arguments["path"] for o in second if o.operation == "write_file"] == ["plan.json"]
    assert "close_drawer.py" in second[0].feedback["text"]
    assert any(o.operation == "exec" and o.feedback["steps"] > 0 for o in first)


@pytest.mark.docker
@pytest.mark.exhaustive  # the kitchen on bwrap is the default run's case; docker series: test_docker_series, hostile
def test_docker_trial_closes_the_drawer_verified_with_a_video(docker_run, kit_admitted):
    check_verified_trials_with_videos(docker_run, kit_admitted, 1, "docker")


def test_report_and_viewer_say_the_assets_are_placeholders(bwrap_run, work_dir, browser):  # noqa: F811
    proc = roboswe("report", str(bwrap_run), timeout=300, check=True)
    out = re.sub(r"\s+", " ", proc.stdout)
    assert PLACEHOLDER_NOTICE in out and "never comparable with runs on RoboCasa's assets" in out
    assert "assets=placeholder" in out
    site = work_dir / "kitchen-site"
    roboswe("export", str(bwrap_run), "--out", str(site), timeout=300, check=True)
    data = (site / "data" / "run.js").read_text()
    assert PLACEHOLDER_NOTICE in data and '"assets":"placeholder"' in data.replace(" ", "")
    browser.get((site / "index.html").as_uri())
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(lambda d: d.find_elements("id", "assets-notice"))
    assert PLACEHOLDER_NOTICE in browser.find_element("id", "assets-notice").text


def relabelled_copy(run_dir: Path, dest: Path, assets: str | None) -> Path:
    """A copy of the run's database; with ``assets``, its series pins say so (test only: no real assets here)."""
    dest.mkdir()
    with sqlite3.connect(run_dir / "run.sqlite") as src, sqlite3.connect(dest / "run.sqlite") as dst:
        src.backup(dst)
    if assets is not None:
        conn = sqlite3.connect(dest / "run.sqlite")
        conn.execute("DROP TRIGGER series_no_update")  # the copy only; the run's own database stays append-only
        conn.execute("UPDATE series SET pins = json_set(pins, '$.assets', ?)", (assets,))
        conn.commit()
        conn.close()
    return dest


def test_compare_refuses_to_pair_a_placeholder_run_with_a_real_asset_run(bwrap_run, tmp_path):
    from roboswe.records.compare import ComparisonRefused, compare_runs

    same = relabelled_copy(bwrap_run, tmp_path / "same", None)
    assert compare_runs(bwrap_run, same).tasks_both == [TASK]  # pinned alike: compared
    real = relabelled_copy(bwrap_run, tmp_path / "real", "robocasa")
    with pytest.raises(ComparisonRefused, match=r"assets \(kit-closedrawer: 'placeholder' vs 'robocasa'\)"):
        compare_runs(bwrap_run, real)
    proc = roboswe("compare", str(bwrap_run), str(real), timeout=300)
    assert proc.returncode == 2 and "'placeholder' vs 'robocasa'" in proc.stderr and "--allow-differ assets" in proc.stderr
    allowed = compare_runs(bwrap_run, real, allow_differ=["assets"])
    (difference,) = allowed.pin_differences
    assert difference.field == "assets" and difference.allowed  # an allowed difference stays in the output
