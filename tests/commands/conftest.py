"""Command tests: an admitted file made without a simulator (preflight refuses before one would start)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def admitted_file(tmp_path) -> Path:
    """A sealed admitted.json for lift-panda; its fingerprint is made up (nothing here builds a scene)."""
    from roboswe.evaluation.admission import FORMAT, Admitted, AdmittedTask, write_admitted
    from roboswe.sim.manifest import load_manifest

    m = load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")
    task = AdmittedTask(id=m.id, status="admitted", manifest=m.to_builtins(), manifest_digest=m.digest(),
                        privileged=m.privileged, fingerprint={"digest": "0" * 64}, measured={"action_dim": 7})
    path = tmp_path / "admitted.json"
    write_admitted(Admitted(format=FORMAT, dataset={"id": "preflight-tests", "tasks": [m.id]}, created_at="test",
                            host={}, run_config_sha256=None, tasks=[task]), path)
    return path


@pytest.fixture
def no_actors(monkeypatch):
    """Fails the test if a command gets as far as starting the supervisor (and so the actors)."""
    from roboswe.actors import supervisor

    started: list[object] = []

    async def refuse_to_start(self, *args, **kwargs):
        started.append(self)
        raise AssertionError("the supervisor was started: preflight should have refused first")

    monkeypatch.setattr(supervisor.Supervisor, "run", refuse_to_start)
    return started
