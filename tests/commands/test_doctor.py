"""`roboswe doctor`: the machine's checks as a table or JSON; exit 1 only when a required check fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from roboswe.sim.robocasa.commands import assets_check

from roboswe.commands import doctor

from ..conftest import require_in_ci
from .conftest import ROOT, image_cache

SECRET = "sk-ant-doctor-test-secret-value"


def run_doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "roboswe.cli", "doctor", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env or dict(os.environ))


def test_doctor_passes_on_this_machine_and_never_prints_a_key():
    proc = run_doctor("--json", env={**os.environ, "ANTHROPIC_API_KEY": SECRET})
    report = json.loads(proc.stdout)
    checks = {c["check"]: c for c in report["checks"]}
    assert list(checks) == ["python", "packages", "mujoco render", "bubblewrap", "docker", "sandbox image",
                            "sandbox backend", "chromium", "provider keys", "RoboCasa assets", "GR1 assets", "ray"]
    failed = [c for c in report["checks"] if c["required"] and c["status"] == "fail"]
    if failed and {c["check"] for c in failed} <= {"sandbox image", "sandbox backend"}:
        require_in_ci(f"sandbox infrastructure missing here: {failed}")
    assert proc.returncode == 0 and report["ok"] is True, proc.stdout + proc.stderr
    assert {c["status"] for c in report["checks"] if c["required"]} == {"ok"}
    assert "EGL" in checks["mujoco render"]["detail"] and "16x16 frame" in checks["mujoco render"]["detail"]
    assert "anthropic (ANTHROPIC_API_KEY)" in checks["provider keys"]["detail"]
    assert SECRET not in proc.stdout + proc.stderr
    assert checks["ray"]["status"] in ("absent", "ok") and not checks["ray"]["required"]


def test_no_bwrap_and_no_docker_fails_the_required_backend_check(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock", "COLUMNS": "200"}
    cache = str(image_cache(tmp_path / "cache"))  # current, whatever this machine's image is
    proc = run_doctor("--no-render", "--cache-dir", cache, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 required check(s) failed: sandbox backend" in proc.stdout
    assert "apt-get install bubblewrap" in proc.stdout and "no sandbox backend is usable" in proc.stdout
    report = json.loads(run_doctor("--no-render", "--json", "--cache-dir", cache, env=env).stdout)
    checks = {c["check"]: c for c in report["checks"]}
    assert report["ok"] is False
    assert checks["bubblewrap"]["status"] == "warn" and checks["docker"]["status"] == "warn"  # optional on their own
    assert checks["sandbox backend"] == {**checks["sandbox backend"], "status": "fail", "required": True}


def test_a_stale_image_and_a_hanging_renderer_are_required_failures(tmp_path):
    checks = {c.check: c for c in doctor.run_checks(render=False, image_cache=image_cache(tmp_path, stale=True), environ={})}
    image = checks["sandbox image"]
    assert image.status == "fail" and image.required and "bridge/robot.py" in image.detail
    assert "roboswe images build" in image.fix
    render = doctor.check_render(timeout_s=0.01)
    assert render.status == "fail" and render.required and "no frame within" in render.detail


def test_optional_checks_say_absent_or_warn_not_fail(tmp_path):
    assert doctor.check_keys({}).status == "absent"
    from roboswe.sim.gr1.native import ENV_VAR

    assert doctor.ASSET_VARIABLES["GR1 assets"] == ENV_VAR  # the variable the native backend reads
    assert doctor.check_assets("GR1 assets", "GR1_ASSETS", {}).status == "absent"
    (missing,) = doctor.family_checks({"ROBOCASA_ASSETS": str(tmp_path / "nope")})  # RoboCasa's, its family's row
    assert missing.check == "RoboCasa assets" and missing.status == "warn" and not missing.required
    assert missing.detail == f"{tmp_path / 'nope'} ($ROBOCASA_ASSETS) is not a directory"
    assert doctor.check_assets("GR1 assets", "GR1_ASSETS", {"GR1_ASSETS": str(tmp_path)}).status == "ok"
    assert doctor.check_bwrap({"PATH": str(tmp_path)}).status == "warn"


def test_robocasa_assets_are_looked_up_as_roboswe_assets_does_and_what_is_missing_is_named(tmp_path):
    """Recorded root (`roboswe assets robocasa --path`), $ROBOCASA_ASSETS over it, the missing parts, the kit refused."""
    from roboswe.sim.robocasa import assets as ra
    from roboswe.sim.robocasa import kit as robocasa_kit

    root = tmp_path / "assets"
    for folder in ra.SHIPPED.folders + ("textures", "fixtures/microwaves"):
        (root / folder).mkdir(parents=True)
        (root / folder / "x").write_text("")
    (root / "fixtures" / "fixture_registry" / "microwave.yaml").write_text("xml: fixtures/microwaves/Microwave011\n")
    environ = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    ra.record_root(root, environ)
    check = assets_check(environ)
    assert check.status == "warn"  # textures and fixtures there, objects not downloaded (a family row is never required)
    assert check.detail.startswith(f"{root} (recorded in {tmp_path / 'config' / 'roboswe' / 'assets.toml'}): missing ")
    assert "objaverse objects, lightwheel objects" in check.detail and "textures" not in check.detail
    assert "--type objs_objaverse objs_lw" in check.fix
    for folder in ("objects/objaverse", "objects/lightwheel"):
        (root / folder).mkdir(parents=True)
        (root / folder / "x").write_text("")
    assert assets_check(environ).status == "ok"
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / robocasa_kit.MARKER).write_text("{}")
    over = assets_check({**environ, "ROBOCASA_ASSETS": str(kit)})
    assert over.status == "warn" and over.detail == f"{kit} ($ROBOCASA_ASSETS) is roboswe's placeholder kit, not RoboCasa's assets"


def test_the_text_output_never_breaks_a_path_and_puts_each_fix_under_its_check(monkeypatch, capsys):
    import argparse

    from roboswe.commands import doctor

    path = "/a/very/long/path/to/site-packages/robocasa/models/assets/textures/and/fixtures/that/is/wider/than/80/columns"
    checks = [doctor.Check(check="python", status="ok", detail="3.11.7"),
              doctor.Check(check="RoboCasa assets", status="absent", detail=f"{path}: missing textures",
                           fix="python -m robocasa.scripts.download_kitchen_assets")]
    monkeypatch.setattr(doctor, "run_checks", lambda **_: checks)
    monkeypatch.setenv("COLUMNS", "80")
    assert doctor.run_doctor(argparse.Namespace(json=False, no_render=True, cache_dir=None)) == 0
    lines = capsys.readouterr().out.splitlines()
    detail = next(i for i, line in enumerate(lines) if path in line)  # whole, on one line
    assert lines[detail].split()[:3] == ["absent", "RoboCasa", "assets"]
    assert lines[detail + 1].split() == ["fix:", "python", "-m", "robocasa.scripts.download_kitchen_assets"]
    assert lines[-1] == "all required checks pass."
