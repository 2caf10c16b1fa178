"""GR1 tabletop: one stand-in scene shared by the backend tests (building it costs ~15 s)."""

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
def cube_session(cube_manifest):
    """A simulator session holding the cube-to-bin stand-in (the backend the manifest's family names)."""
    from roboswe.sim.session import SimSession

    session = SimSession(require_fixed_hash_seed=False)  # pytest's own hash seed; the sentinel has its own test
    session.load(cube_manifest.to_builtins(), cube_manifest.seed, None)
    yield session
    session.close()


@pytest.fixture
def cube_scene(cube_session, cube_manifest):
    """The stand-in backend, freshly reset with the manifest's seed for each test."""
    sim = cube_session.backend
    sim.reset(cube_manifest.seed)
    return sim
