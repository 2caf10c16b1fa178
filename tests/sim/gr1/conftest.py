"""GR1 tabletop (seed 002): one stand-in scene shared by the backend tests (building it costs ~15 s)."""

from __future__ import annotations

import importlib.util

import pytest

from ..conftest import ROOT

TASKS = ROOT / "configs" / "tasks"

if importlib.util.find_spec("robocasa_gr1") is None:  # find_spec: no slow import just to decide
    pytest.skip("robocasa_gr1 is not installed (pip install praxis-robocasa-gr1==0.2.0)", allow_module_level=True)


@pytest.fixture(scope="session")
def cube_manifest():
    from roboswe.sim.manifest import load_manifest

    return load_manifest(TASKS / "gr1-standin-cubetobin.toml")


@pytest.fixture(scope="session")
def cube_scene(cube_manifest):
    """The cube-to-bin stand-in, reset with the manifest's seed; tests that change it reset it again."""
    from roboswe.sim.backend import create_backend

    sim = create_backend("gr1", cube_manifest)
    sim.reset(cube_manifest.seed)
    yield sim
    sim.close()
