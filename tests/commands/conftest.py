"""Command tests: an admitted file made without a simulator (preflight refuses before one would start)."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
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


def image_cache(directory: Path, *, stale: bool = False) -> Path:
    """A sandbox image cache whose rootfs holds the checkout's robot files (``stale``: an older bridge/robot.py).

    Only what preflight and doctor read: current.json, usr/bin/python3 and the project files.
    """
    from roboswe.sandbox.images import SITE_DIR, SandboxImage, _project_files

    rootfs = directory / "rootfs-0123456789abcdef"
    (rootfs / "usr" / "bin").mkdir(parents=True)
    (rootfs / "usr" / "bin" / "python3").touch()
    for rel, src in _project_files().items():
        (rootfs / SITE_DIR / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, rootfs / SITE_DIR / rel)
    if stale:
        (rootfs / SITE_DIR / "robot.py").write_text("# the robot module as it was when the image was built\n")
    image = SandboxImage(digest="0123456789abcdef" * 4, rootfs=str(rootfs), tarball="", docker_tag=None, uid=60123,
                         gid=60123, built_at=0.0, build_seconds=0.0)
    (directory / "current.json").write_bytes(msgspec.json.encode(image))
    return directory
