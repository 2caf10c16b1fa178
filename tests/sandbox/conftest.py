"""Fixtures for sandbox and bridge tests: the built image, each backend, a trial against a stand-in robot."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from roboswe.protocol.bridge import ExecFeedback, ScriptLimits
from roboswe.sandbox import backend_class
from roboswe.sandbox.images import ImageError, load_image, stale_files

from ..conftest import require_in_ci
from .stand_in_sim import ToyRobot, serve_toy_robot

BACKENDS = ["bwrap", "docker"]


@pytest.fixture(scope="session")
def image():
    try:
        image = load_image()
    except ImageError as e:
        require_in_ci(f"{e} (setup.sh builds it)")
    # Scripts run the image's copy of the robot module: a stale image would test old code.
    stale = stale_files(image)
    if stale:
        pytest.fail(f"the sandbox image {image.short} predates {', '.join(stale)}: run `roboswe images build`")
    return image


def _docker_skip_reason(image) -> str | None:
    why = backend_class("docker").available()
    if why:
        return why
    if not image.docker_tag:
        return "the sandbox image was built while dockerd was down: run `roboswe images build` again"
    return None


@pytest.fixture(params=BACKENDS)
def backend(request, image) -> str:
    if request.param == "docker":
        why = _docker_skip_reason(image)
        if why:
            require_in_ci(f"docker backend: {why}")
    return request.param


@pytest.fixture
def scratch():
    """A directory the sandbox user may traverse (pytest's tmp_path lives under a 0700 parent)."""
    d = Path(tempfile.mkdtemp(prefix="rs-test-", dir="/tmp"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@dataclass
class Trial:
    sandbox: object  # TrialSandbox
    robot: ToyRobot
    workspace: Path
    scratch: Path

    async def run(self, code: str, name: str = "script.py", **limits) -> ExecFeedback:
        (self.workspace / name).write_text(textwrap.dedent(code))
        return await self.sandbox.exec(name, ScriptLimits(**{**TEST_LIMITS, **limits}))


TEST_LIMITS = {"seconds": 10.0}
TEST_WORKSPACE_MB = 64  # small, so filling it is quick


@pytest.fixture
async def trial(backend, image, scratch, nursery):
    from roboswe.actors import robot_link
    from roboswe.bridge.trial import open_trial

    robot = ToyRobot()
    endpoint = f"ipc://{scratch}/sim.sock"
    await nursery.start(serve_toy_robot, endpoint, robot)
    workspace = scratch / "workspace"
    workspace.mkdir()
    async with robot_link(endpoint) as sim, open_trial("test-trial", workspace, sim, backend=backend, image=image,
                                                       workspace_mb=TEST_WORKSPACE_MB) as sandbox:
        yield Trial(sandbox, robot, workspace, scratch)
