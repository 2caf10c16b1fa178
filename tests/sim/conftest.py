"""Real robosuite scenes shared across the sim tests (building one costs seconds)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Entry-point configuration for this test process and the processes it starts:
# EGL offscreen rendering, and numba's compiled cache kept between runs (the first env pays ~10 s).
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))


def sim_env() -> dict[str, str]:
    """Environment for simulator subprocesses."""
    return {**os.environ, "PYTHONHASHSEED": "0"}


@pytest.fixture(scope="session")
def lift_manifest():
    from roboswe.sim.manifest import load_manifest

    return load_manifest(ROOT / "configs" / "tasks" / "lift-panda.toml")


@pytest.fixture(scope="session")
def lift_panda(lift_manifest):
    """One Lift/Panda scene for the whole session; every test resets it with its own seed."""
    from roboswe.sim.backend import create_backend

    sim = create_backend("robosuite", lift_manifest)
    yield sim
    sim.close()
