"""A kinematic stand-in family (numpy only) for in-process tests: ``upstream.package = "fake"`` (``backend.py``)."""

from __future__ import annotations

from ..families import AssetProblem, Family
from ..manifest import TaskManifest


def _build(manifest: TaskManifest, **kwargs):
    from .backend import FakeBackend

    return FakeBackend(manifest, **kwargs)


def _no_assets(manifests: list[TaskManifest]) -> list[AssetProblem]:
    return []  # a point and a target: nothing to install or download


FAMILY = Family(name="fake", manifest=TaskManifest, build=_build, asset_problems=_no_assets, pins=("numpy",))
