"""RoboCasa365 kitchens: RoboCasa's own task classes on robosuite, on the user's downloaded assets or the kit.

``backend.py`` (KitchenManifest, RobocasaBackend, assets_exclusion), ``assets.py`` (where the asset
root is and which parts it lacks), ``kit.py`` (the generated placeholder kit for offline tests),
``shims.py`` (the asset-root redirect and RoboCasa fixes, never editing the package), ``review.py``
(the predicate review pinned by source digest), ``catalogue.py`` (configs/catalogues/robocasa365.toml),
``commands.py`` (`roboswe assets robocasa`, the catalogue listing of `roboswe tasks`, doctor's asset row).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..families import AssetProblem, Command, Family, missing_packages
from ..manifest import TaskManifest
from .backend import KitchenManifest, assets_exclusion, kitchen_manifest


def _build(manifest: TaskManifest, **kwargs):
    from .backend import RobocasaBackend

    return RobocasaBackend(manifest, **kwargs)


def _import_simulator():
    from . import backend  # noqa: F401  (the robosuite backend it builds on; RoboCasa itself fixes its asset root when imported)


def asset_problems(manifests: list[TaskManifest]) -> list[AssetProblem]:
    """robosuite and robocasa installed, and a real-asset task's downloaded assets under the root assets.py
    resolves (ROBOCASA_ASSETS, the root `roboswe assets robocasa --path` recorded, the package). Kit tasks write
    their placeholder assets when built. `roboswe admit` does not pass real-asset tasks here: admission excludes
    them itself (``exclusion``), naming the missing paths."""
    missing = missing_packages(("robosuite", "robocasa"), manifests)
    if missing:
        return missing
    return [AssetProblem(where=f"task {m.id}", what=why, fix="`roboswe assets robocasa` says what "
                         "is present and how to get the rest") for m in manifests if (why := assets_exclusion(m))]


def exclusion(manifest: TaskManifest) -> str | None:
    """A reason the kitchen cannot load that needs no simulator: RoboCasa's downloaded assets missing here."""
    return assets_exclusion(kitchen_manifest(manifest))


def _host_checks(environ: Mapping[str, str]) -> list:
    from .commands import host_checks

    return host_checks(environ)


def _list_catalogue(name: str, admitted: Mapping[str, Any], status: Any, *, candidates_only: bool) -> list[str] | None:
    from .commands import list_catalogue

    return list_catalogue(name, admitted, status, candidates_only=candidates_only)


ASSETS = Command(name="assets", module="roboswe.sim.robocasa.commands",
                 help="record where RoboCasa's downloaded kitchen assets are, check them, list what can load")


def reviews(manifests: list[TaskManifest], timeout: float, env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    from .review import reviews as read_reviews

    return read_reviews(manifests, timeout, env)


FAMILY = Family(name="robocasa", manifest=KitchenManifest, build=_build, asset_problems=asset_problems,
                pins=("praxis-robocasa", "praxis-robosuite", "mujoco", "numpy"), exclusion=exclusion,
                exclusion_note=("RoboCasa's kitchen assets are missing; `roboswe assets robocasa` says what is present "
                                "and how to get the rest"), reviews=reviews,
                import_simulator=_import_simulator, commands=(ASSETS,), host_checks=_host_checks,
                list_catalogue=_list_catalogue)
