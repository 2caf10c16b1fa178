"""robosuite's table-top tasks (Lift, Stack, ...): the embedded default family, whose assets ship in the wheel.

``backend.py``: ``RobosuiteBackend`` (also the base of the RoboCasa and GR1 backends).
"""

from __future__ import annotations

from ..families import AssetProblem, Family, package_dir
from ..manifest import TaskManifest


def _build(manifest: TaskManifest, **kwargs):
    from .backend import RobosuiteBackend

    return RobosuiteBackend(manifest, **kwargs)


def _import_simulator():
    from .backend import import_simulator

    return import_simulator()


def asset_problems(manifests: list[TaskManifest]) -> list[AssetProblem]:
    """robosuite ships its assets in the wheel: the package, its arena/object/robot folders and each task's robot."""
    fix = "reinstall the simulator at the project's pins: re-run ./setup.sh (or .venv/bin/pip install -e .)"
    root = package_dir("robosuite")
    if root is None:
        return [AssetProblem(where="robosuite", what="robosuite is not installed", fix="run ./setup.sh (or .venv/bin/pip install -e .)")]
    assets = root / "models" / "assets"
    missing = [d for d in ("arenas", "objects", "robots") if not (assets / d).is_dir()]
    if missing:
        return [AssetProblem(where=str(assets), what=f"missing asset folders: {missing}", fix=fix)]
    robots = {p.name for p in (assets / "robots").iterdir() if p.is_dir()}
    out = []
    for m in manifests:
        # Robot asset folders are the robot family's name: Panda -> panda, GR1ArmsOnly -> gr1.
        if not any(m.upstream.robot.lower().startswith(r) for r in robots):
            out.append(AssetProblem(where=f"task {m.id}", what=f"no robot assets for {m.upstream.robot!r} under {assets / 'robots'}",
                                    fix=fix))
    return out


FAMILY = Family(name="robosuite", manifest=TaskManifest, build=_build, pins=("praxis-robosuite", "mujoco", "numpy"),
                asset_problems=asset_problems, import_simulator=_import_simulator)
