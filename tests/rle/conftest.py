"""RLE fixtures: the artifact image, one battery cache per test session, small task variants."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import msgspec
import pytest
from roboswe.sandbox.images import (
    ImageError,
    artifact_cache_dir,
    load_image,
    stale_files,
)

from roboswe.rle.manifest import RleTask, load_task
from roboswe.rle.rundir import write_submission
from roboswe.rle.seal import seal_directory

from ..conftest import require_in_ci

REFERENCE = Path(__file__).resolve().parents[2] / "roboswe" / "rle" / "pose" / "reference"


@pytest.fixture(scope="session")
def artifact_image():
    try:
        image = load_image(artifact_cache_dir())
    except ImageError as e:
        require_in_ci(f"{e} (`roboswe rle image build`; setup.sh builds it)")
    if stale_files(image):
        pytest.fail(f"the artifact image {image.short} predates {stale_files(image)}: run `roboswe rle image build`")
    return image


@pytest.fixture(scope="session")
def battery_cache():
    """Rendered batteries, shared by every test of the session (keyed by plan commitment and scene digest)."""
    d = Path(tempfile.mkdtemp(prefix="rle-battery-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def _mujoco_gl(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", os.environ.get("MUJOCO_GL", "egl"))


def small_task(name: str = "pose-rgbd", **calls) -> RleTask:
    """The task with a battery of a 2-still group and a 3-frame episode (seconds to render and run)."""
    task = load_task(name)
    ev = msgspec.structs.replace(task.evaluation, stage_a_groups=1, stage_a_frames_per_group=2, stage_b_episodes=1,
                                 stage_b_frames=3,
                                 calls=msgspec.structs.replace(task.evaluation.calls, **({"load_seconds": 20.0,
                                                               "call_seconds": 5.0, "total_seconds": 40.0} | calls)))
    return msgspec.structs.replace(task, evaluation=ev)


def submit(run_dir: Path, task: RleTask, files: dict[str, str], ledger_rows: bytes | None = None, ledger_head=None) -> Path:
    """An RLE run directory holding these artifact files, sealed (as `rle score --out` writes it)."""
    src = run_dir.parent / (run_dir.name + "-src")
    src.mkdir(parents=True)
    for name, text in files.items():
        (src / name).write_text(text)
    sealed, contents = seal_directory(src, task.artifact, ledger_head=ledger_head)
    write_submission(run_dir, task, sealed, contents, ledger_rows)
    return run_dir
