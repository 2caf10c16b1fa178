"""RoboCasa's downloaded assets: where roboswe looks, what it records, and what a missing part does.

No test here downloads, ships or fakes RoboCasa's assets: a root is an empty folder, or one with a
single named part present, to see the presence check and the lookup order act on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec

from roboswe.sim.robocasa import assets as ra
from roboswe.sim.manifest import load_dataset
from roboswe.sim.robocasa.backend import assets_exclusion

REPO = Path(__file__).resolve().parents[3]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ra.ENV_VAR}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **extra}


def test_lookup_order_is_explicit_then_environment_then_recorded_then_package(tmp_path):
    environ = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    package, source = ra.resolve_root(environ=environ)
    assert package == ra.package_root() and "package" in source
    recorded = tmp_path / "recorded"
    written = ra.record_root(recorded, environ)
    assert written == tmp_path / "xdg" / "roboswe" / "assets.toml"
    assert ra.resolve_root(environ=environ) == (recorded, f"recorded in {written}")
    environ[ra.ENV_VAR] = str(tmp_path / "from-env")
    assert ra.resolve_root(environ=environ) == (tmp_path / "from-env", f"${ra.ENV_VAR}")
    assert ra.resolve_root(tmp_path / "given", environ)[0] == tmp_path / "given"


def test_a_recorded_path_with_quotes_and_backslashes_reads_back_exactly(tmp_path):
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    odd = tmp_path / 'a "quoted" \\ folder'
    ra.record_root(odd, environ)
    assert ra.recorded_root(environ) == odd


def test_each_part_is_checked_by_its_own_folders(tmp_path):
    """An empty root misses every downloaded part; a present, non-empty textures folder is no longer named."""
    pilot = load_dataset("robocasa-pilot")[1][0]
    empty = assets_exclusion(pilot, tmp_path)
    for folder in ("textures", "fixtures/{", "objects/objaverse", "objects/lightwheel", "arenas"):
        assert folder in empty
    assert "--type tex fixtures_lw objs_objaverse objs_lw" in empty
    (tmp_path / "textures").mkdir()
    assert "textures," in assets_exclusion(pilot, tmp_path)  # an empty folder (interrupted download) still counts as missing
    (tmp_path / "textures" / "wood.png").write_bytes(b"not checked for content")
    after = assets_exclusion(pilot, tmp_path)
    assert "textures," not in after and "--type fixtures_lw objs_objaverse objs_lw" in after


def test_kit_tasks_need_no_downloaded_assets(tmp_path):
    kit = load_dataset("robocasa-kit")[1]
    assert all(assets_exclusion(m, tmp_path) is None for m in kit)


def test_assets_command_records_the_root_and_the_backend_reads_it(tmp_path):
    root = tmp_path / "assets"
    (root / "objects" / "objaverse").mkdir(parents=True)
    (root / "objects" / "objaverse" / "x").write_text("")
    env = _env(tmp_path)
    out = subprocess.run([sys.executable, "-m", "roboswe.cli", "assets", "robocasa", "--path", str(root)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1, out.stderr  # recorded, but the pilot cannot load from it
    assert f"recorded {root}" in out.stdout and "0 of 11 can load" in out.stdout
    assert "objaverse objects (--type objs_objaverse)" in out.stdout
    assert [ln for ln in out.stdout.splitlines() if "objaverse objects" in ln][0].endswith("present")
    # the simulator side (another process, same user) finds the recorded root
    probe = ("from roboswe.sim.robocasa.backend import assets_exclusion; from roboswe.sim.manifest import load_dataset;"
             "print(assets_exclusion(load_dataset('robocasa-pilot')[1][0]))")
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120).stdout
    assert f"under {root} (recorded in " in seen and "objects/objaverse" not in seen
    missing_dir = subprocess.run([sys.executable, "-m", "roboswe.cli", "assets", "robocasa", "--path", str(tmp_path / "nope")],
                                 capture_output=True, text=True, env=env, timeout=120)
    assert missing_dir.returncode == 2 and "no such directory" in missing_dir.stderr


def test_admitting_the_pilot_without_assets_excludes_every_task_naming_the_missing_paths(tmp_path):
    """The issue's check: exit 1 (nothing admitted), no traceback, admitted.json written with one reason per task."""
    empty = tmp_path / "no-assets"
    empty.mkdir()
    out_file = tmp_path / "admitted.json"
    proc = subprocess.run([sys.executable, "-m", "roboswe.cli", "admit", str(REPO / "configs/datasets/robocasa-pilot.toml"),
                           "--out", str(out_file)], capture_output=True, text=True, timeout=300,
                          env=_env(tmp_path, **{ra.ENV_VAR: str(empty)}))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "wrote" in proc.stdout and "0 of 11 task(s) admitted" in proc.stdout
    assert "11 task(s) excluded because RoboCasa's kitchen assets are missing" in proc.stdout
    admitted = json.loads(out_file.read_text())
    assert len(admitted["tasks"]) == 11
    for task in admitted["tasks"]:
        assert task["status"] == "excluded"
        assert f"RoboCasa assets missing under {empty} ($ROBOCASA_ASSETS)" in task["reason"]
        assert "textures" in task["reason"] and "objects/lightwheel" in task["reason"]
        assert task["review"]["status"] == "current"  # the predicate review is recorded even for excluded tasks
        assert task["review"]["source_sha256"] == task["manifest"]["success"]["predicate_sha256"]
        assert f"  EXCLUDED  {task['id']}: " in proc.stdout


def test_old_admitted_files_without_reviews_keep_their_digest(tmp_path):
    from roboswe.evaluation.admission import FORMAT, Admitted, AdmittedTask, read_admitted, write_admitted

    task = AdmittedTask(id="t", status="excluded", manifest={}, manifest_digest="", privileged=False, reason="why")
    sealed = write_admitted(Admitted(format=FORMAT, dataset={}, created_at="x", host={}, run_config_sha256=None,
                                     tasks=[task]), tmp_path / "a.json")
    body = json.loads((tmp_path / "a.json").read_text())
    del body["tasks"][0]["review"]  # as written before tasks had a review
    (tmp_path / "a.json").write_bytes(msgspec.json.encode(body))
    assert read_admitted(tmp_path / "a.json").digest == sealed.digest
