"""Preflight: `roboswe run`, `admit` and `demo` refuse a setup that cannot work before any actor starts.

Each refusal exits 2, prints one message per problem naming the input and the fix, writes
nothing (no run dir, nothing on stdout) and never reaches the supervisor.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import textwrap
from pathlib import Path

import msgspec
import pytest
import roboswe.sim.robosuite as robosuite_family
from roboswe.sim import families
from roboswe.sim.families import AssetProblem

from roboswe.cli import main
from roboswe.evaluation import preflight

from .conftest import ROOT, image_cache
from .model_lookup import FakeModelLookup

KEY = "sk-test-not-secret"


@pytest.fixture
def runs():
    """A parent for run dirs that the sandbox user may traverse (pytest's tmp_path sits under a 0700 dir)."""
    d = Path(tempfile.mkdtemp(prefix="rs-preflight-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def current_image(tmp_path, monkeypatch):
    """A built image that matches the checkout, whatever state this machine's image is in (tests that
    want it missing or stale point the cache elsewhere)."""
    from roboswe.sandbox import images

    cache = image_cache(tmp_path / "image-cache")
    monkeypatch.setattr(images, "default_cache_dir", lambda: cache)
    return cache


def config(tmp_path: Path, kind: str = "anthropic", model: str = "claude-test-1", key_env: str = "ROBOSWE_TEST_KEY",
           extra: str = "") -> Path:
    path = tmp_path / f"{kind}.toml"
    path.write_text(textwrap.dedent(f"""
        [provider]
        kind = "{kind}"
        model = "{model}"
        api_key_env = "{key_env}"
        attempts = 1
    """) + extra)
    return path


def refuse(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code: int, out: str, err: str, run_dir: Path, no_actors: list, *needles: str) -> None:
    assert code == 2, err
    assert out == ""  # nothing but the refusal
    assert "refused before starting anything" in err
    for needle in needles:
        assert needle in err, f"{needle!r} not in:\n{err}"
    assert not run_dir.exists()
    assert no_actors == []


# ---- provider: key and model id ------------------------------------------------------------------


def test_an_unset_key_variable_is_refused_with_the_export_to_run(tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    monkeypatch.delenv("ROBOSWE_TEST_KEY", raising=False)
    run_dir = tmp_path / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", str(config(tmp_path)), "--out", str(run_dir))
    assert_refused(code, out, err, run_dir, no_actors, "environment variable ROBOSWE_TEST_KEY is unset",
                   "fix: export ROBOSWE_TEST_KEY=", "api_key_env")


def test_an_empty_key_variable_is_refused(tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    monkeypatch.setenv("ROBOSWE_TEST_KEY", "")
    run_dir = tmp_path / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", str(config(tmp_path)), "--out", str(run_dir))
    assert_refused(code, out, err, run_dir, no_actors, "ROBOSWE_TEST_KEY is empty", "export ROBOSWE_TEST_KEY=")


def test_the_shipped_config_without_a_key_lists_both_problems(runs, admitted_file, no_actors, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    run_dir = runs / "run"
    shipped = ROOT / "configs" / "runs" / "anthropic.toml"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", str(shipped), "--out", str(run_dir))
    assert_refused(code, out, err, run_dir, no_actors, "(2 problems)", "'claude-EDIT-ME-model-id' is the shipped placeholder",
                   "replace model with an exact model id", "ANTHROPIC_API_KEY is unset", str(shipped))
    assert "  1. [model id]" in err and "  2. [provider key]" in err


@pytest.mark.parametrize("model", ["claude 3 opus", "gpt-EDIT-ME", "", "<model>"])
def test_a_placeholder_or_malformed_model_id_is_refused(model, tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    monkeypatch.setenv("ROBOSWE_TEST_KEY", KEY)
    run_dir = tmp_path / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", str(config(tmp_path, model=model)),
                            "--out", str(run_dir), "--preflight", "offline")
    assert_refused(code, out, err, run_dir, no_actors, "[model id]", "fix:")


def test_a_valid_looking_id_and_key_pass_offline():
    from roboswe.providers import ProviderConfig

    cfg = ProviderConfig(kind="openrouter", model="anthropic/claude-sonnet-4:beta", api_key_env="K")
    assert preflight.provider_problems(cfg, "x.toml", {"K": KEY}) == []
    assert preflight.provider_problems(cfg, "x.toml", {"K": KEY + "\n"})[0].what.endswith("(e.g. a newline)")


# ---- sandbox: image, backend, run dir -------------------------------------------------------------

DEMO = str(ROOT / "configs" / "runs" / "demo.toml")


def test_a_missing_image_is_refused(tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    from roboswe.sandbox import images

    monkeypatch.setattr(images, "default_cache_dir", lambda: tmp_path / "empty-cache")
    run_dir = tmp_path / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", DEMO, "--out", str(run_dir))
    assert_refused(code, out, err, run_dir, no_actors, "no sandbox image has been built", "roboswe images build")


def test_a_stale_image_is_refused_naming_the_changed_file(tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    from roboswe.sandbox import images

    cache = image_cache(tmp_path / "stale", stale=True)
    monkeypatch.setattr(images, "default_cache_dir", lambda: cache)
    run_dir = tmp_path / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", DEMO, "--out", str(run_dir), "-e", "bwrap")
    assert_refused(code, out, err, run_dir, no_actors, "image 0123456789abcdef is stale", "bridge/robot.py",
                   "roboswe images build")


def test_a_requested_backend_that_is_not_installed_is_refused(tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    run_dir = tmp_path / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", DEMO, "--out", str(run_dir), "-e", "bwrap")
    assert_refused(code, out, err, run_dir, no_actors, "bwrap is not usable here", "apt-get install bubblewrap", "-e/--engine")


def test_no_usable_backend_at_all_is_refused(tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    run_dir = tmp_path / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", DEMO, "--out", str(run_dir))
    assert_refused(code, out, err, run_dir, no_actors, "no sandbox backend is usable", "no Docker daemon answers",
                   "bwrap is not installed")


@pytest.mark.skipif(os.geteuid() != 0, reason="bwrap drops to the sandbox user only when run as root")
def test_a_run_dir_the_sandbox_user_cannot_reach_is_refused(tmp_path, admitted_file, no_actors, capsys):
    if not shutil.which("bwrap"):
        pytest.skip("bwrap is not installed")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    run_dir = private / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", DEMO, "--out", str(run_dir), "-e", "bwrap")
    assert_refused(code, out, err, run_dir, no_actors, "not reachable by the sandbox user", "has mode 700", "chmod o+x")


# ---- simulator assets, per family ------------------------------------------------------------------


def test_missing_robosuite_assets_are_refused(tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    monkeypatch.setattr(robosuite_family, "package_dir", lambda name: tmp_path / "robosuite")
    run_dir = tmp_path / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", DEMO, "--out", str(run_dir))
    assert_refused(code, out, err, run_dir, no_actors, "[simulator assets]", "missing asset folders",
                   "re-run ./setup.sh")


def test_a_task_whose_robot_has_no_assets_is_named(tmp_path, monkeypatch):
    from roboswe.sim.manifest import load_manifest

    for d in ("arenas", "objects", "robots/sawyer"):
        (tmp_path / "robosuite" / "models" / "assets" / d).mkdir(parents=True)
    monkeypatch.setattr(robosuite_family, "package_dir", lambda name: tmp_path / "robosuite")
    lift = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    (problem,) = preflight.asset_problems([lift])
    assert problem.where == "task lift-panda" and "'Panda'" in problem.what
    assert preflight.asset_problems([]) == []


def test_each_simulator_family_has_its_own_asset_hook(tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    seen = []

    def family_check(manifests):
        seen.append([m.id for m in manifests])
        return [AssetProblem(where="ROBOCASA_ASSETS", what="kitchen assets missing", fix="download them")]

    robosuite = families.family("robosuite")
    monkeypatch.setitem(families._FAMILIES, "robosuite", msgspec.structs.replace(robosuite, asset_problems=family_check))
    run_dir = tmp_path / "run"
    code, out, err = refuse(capsys, "run", str(admitted_file), "--config", DEMO, "--out", str(run_dir))
    assert_refused(code, out, err, run_dir, no_actors, "ROBOCASA_ASSETS: kitchen assets missing", "fix: download them")
    assert seen == [["lift-panda"]]
    # a remote simulator's assets are on its own host: not checked here
    assert preflight.preflight(provider=None, source="x", manifests=[object()], sandbox=False, remote_sim=True).problems == []


# ---- Ray (hook for a future --ray) -----------------------------------------------------------------


# ---- online: one free lookup proves key and model -------------------------------------------------

WIRE_MODELS = {"anthropic": "claude-test-1", "openai": "gpt-test-1", "google": "gemini-test-1",
               "openrouter": "vendor/model-test-1"}


def cfg_for(wire: str, base_url: str, model: str | None = None):
    from roboswe.providers import ProviderConfig

    return ProviderConfig(kind=wire, model=model or WIRE_MODELS[wire], api_key_env="ROBOSWE_TEST_KEY", base_url=base_url)


@pytest.mark.parametrize("wire", sorted(WIRE_MODELS))
def test_online_lookup_refuses_a_wrong_key_and_an_unknown_model_and_passes_a_good_pair(wire):
    with FakeModelLookup(wire, key=KEY, models=(WIRE_MODELS[wire],)) as fake:
        good, notes = preflight.online_problems(cfg_for(wire, fake.base_url), "c.toml", {"ROBOSWE_TEST_KEY": KEY})
        assert good == [] and notes == []
        assert len(fake.seen) == (2 if wire == "openrouter" else 1)
        (bad_key,), _ = preflight.online_problems(cfg_for(wire, fake.base_url), "c.toml", {"ROBOSWE_TEST_KEY": "wrong"})
        assert "refused the key in ROBOSWE_TEST_KEY" in bad_key.what and "export a valid" in bad_key.fix
        assert ("API key not valid" if wire == "google" else "key") in bad_key.what  # the provider's own words
        (unknown,), _ = preflight.online_problems(cfg_for(wire, fake.base_url, "vendor/nope" if wire == "openrouter" else "nope"),
                                                  "c.toml", {"ROBOSWE_TEST_KEY": KEY})
        assert "does not know model" in unknown.what and "HTTP 404" in unknown.what and unknown.where == "c.toml [provider] model"


def test_online_lookup_failures_that_prove_nothing_are_notes_not_refusals():
    with FakeModelLookup("openai", key=KEY, models=("gpt-test-1",), status_override=503) as fake:
        problems, (note,) = preflight.online_problems(cfg_for("openai", fake.base_url), "c.toml", {"ROBOSWE_TEST_KEY": KEY})
        assert problems == [] and "HTTP 503" in note and "the run goes on" in note
    with FakeModelLookup("openai", key=KEY, models=("gpt-test-1",)) as fake:  # a base_url without the API's path
        problems, (note,) = preflight.online_problems(cfg_for("openai", fake.base_url[:-3]), "c.toml", {"ROBOSWE_TEST_KEY": KEY})
        assert problems == [] and "HTTP 404" in note
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    problems, (note,) = preflight.online_problems(cfg_for("openai", f"http://127.0.0.1:{port}/v1"), "c.toml",
                                                  {"ROBOSWE_TEST_KEY": KEY}, timeout_s=2)
    closed.close()
    assert problems == [] and "could not reach openai" in note


def test_run_refuses_a_key_the_provider_rejects_before_any_actor(tmp_path, admitted_file, no_actors, capsys, monkeypatch):
    monkeypatch.setenv("ROBOSWE_TEST_KEY", "sk-revoked")
    with FakeModelLookup("anthropic", key=KEY, models=("claude-test-1",)) as fake:
        path = config(tmp_path, extra="")
        path.write_text(path.read_text().replace("attempts = 1", f'attempts = 1\nbase_url = "{fake.base_url}"'))
        run_dir = tmp_path / "run"
        code, out, err = refuse(capsys, "run", str(admitted_file), "--config", str(path), "--out", str(run_dir))
        assert len(fake.seen) == 1 and fake.seen[0][0] == "/v1/models/claude-test-1"
    assert_refused(code, out, err, run_dir, no_actors, "[provider online]", "HTTP 401: invalid x-api-key",
                   "export a valid anthropic key in ROBOSWE_TEST_KEY")


def test_offline_and_no_preflight_skip_what_they_say(tmp_path, runs, admitted_file, no_actors, capsys, monkeypatch):
    monkeypatch.setenv("ROBOSWE_TEST_KEY", "sk-revoked")
    with FakeModelLookup("anthropic", key=KEY, models=("claude-test-1",)) as fake:
        path = config(tmp_path)
        path.write_text(path.read_text().replace("attempts = 1", f'attempts = 1\nbase_url = "{fake.base_url}"'))
        with pytest.raises(BaseExceptionGroup):  # the fixture's refusal, raised where the supervisor starts
            main(["run", str(admitted_file), "--config", str(path), "--out", str(runs / "offline"), "--preflight", "offline"])
        assert fake.seen == []  # offline: no lookup; the supervisor was reached
    monkeypatch.delenv("ROBOSWE_TEST_KEY")
    with pytest.raises(BaseExceptionGroup):
        main(["run", str(admitted_file), "--config", str(path), "--out", str(runs / "none"), "--no-preflight"])
    assert len(no_actors) == 2


def test_resume_runs_preflight_too_and_leaves_the_run_dir_as_it_was(runs, admitted_file, no_actors, capsys, monkeypatch):
    from roboswe.evaluation.admission import read_admitted
    from roboswe.evaluation.job import CONFIG_COPY, Job, write_job

    monkeypatch.delenv("ROBOSWE_TEST_KEY", raising=False)
    run_dir = runs / "stopped-run"
    run_dir.mkdir()
    (run_dir / CONFIG_COPY).write_text(config(runs).read_text())
    write_job(run_dir, Job(kind="run", run_id=run_dir.name, admitted_path=str(admitted_file),
                           admitted_sha256=read_admitted(admitted_file).digest, tasks=["lift-panda"]))
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    code = main(["run", "--resume", str(run_dir)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and no_actors == []
    assert "ROBOSWE_TEST_KEY is unset" in err and str(run_dir / CONFIG_COPY) in err
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


# ---- admit and demo ---------------------------------------------------------------------------------


def test_admit_refuses_a_placeholder_config_and_a_missing_output_dir_before_simulating(tmp_path, capsys, monkeypatch):
    from roboswe.evaluation import admission

    monkeypatch.setattr(admission, "admit_dataset", lambda *a, **k: pytest.fail("admission started"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out_path = tmp_path / "missing" / "admitted.json"
    code, out, err = refuse(capsys, "admit", "robosuite-pilot", "--config", str(ROOT / "configs" / "runs" / "anthropic.toml"),
                            "--out", str(out_path))
    assert code == 2 and out == ""
    assert "roboswe admit: refused before starting anything (2 problems)" in err
    assert "shipped placeholder" in err and "mkdir -p" in err
    assert "ANTHROPIC_API_KEY" not in err  # admission needs no key
    assert not out_path.parent.exists()


def test_demo_refuses_a_missing_image_before_minutes_of_admission(tmp_path, capsys, monkeypatch):
    from roboswe.commands import demo
    from roboswe.sandbox import images

    monkeypatch.setattr(images, "default_cache_dir", lambda: tmp_path / "empty-cache")
    monkeypatch.setattr(demo, "admit_lift", lambda run_dir: pytest.fail("admission started"))
    run_dir = tmp_path / "demo-run"
    code, out, err = refuse(capsys, "demo", "--out", str(run_dir))
    assert code == 2 and out == "" and not run_dir.exists()
    assert "roboswe demo: refused before starting anything" in err and "roboswe images build" in err

