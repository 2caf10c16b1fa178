"""One paint scene per test session (building it costs about a second); tests reset it with their own seed."""

from __future__ import annotations

import pytest

from ..conftest import ROOT


@pytest.fixture(scope="session")
def paint_manifest():
    from roboswe.sim.manifest import load_manifest

    return load_manifest(ROOT / "configs" / "tasks" / "paint-three-strokes.toml")


@pytest.fixture(scope="session")
def paint_sim(paint_manifest):
    from roboswe.sim.backend import create_backend

    sim = create_backend("paint", paint_manifest)
    yield sim
    sim.close()
