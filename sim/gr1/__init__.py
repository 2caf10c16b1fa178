"""GR1 tabletop: a GR1 humanoid (arms, waist, hands) under one 29-D joint contract, native or stand-in.

``contract.py`` (configs/contracts/gr1-tabletop.toml: action slices, observation pipeline, protocol
identities), ``manifest.py`` (Gr1Manifest, the contract a manifest names, the process checks),
``standin.py`` (offline stand-in scenes, ``scenes.py``, on robosuite), ``native.py`` (robocasa_gr1's
own task classes on the user's RoboCasa GR1 assets, or the generated kit of ``kit.py``).
"""

from __future__ import annotations

from ..families import AssetProblem, Family, missing_packages
from ..manifest import TaskManifest
from .manifest import Gr1Manifest, gr1_manifest

# The contract's task scopes -> its selection names (pilot-0-19 / next-pair-1-2 are the contract's own).
_SELECTIONS = {"pilot": "pilot-0-19", "tabletop-next-pair-v1": "next-pair-1-2"}


def _build(manifest: TaskManifest | dict, **kwargs):
    m = gr1_manifest(manifest)
    if m.fidelity == "native":
        from .native import Gr1NativeBackend

        return Gr1NativeBackend(m, **kwargs)
    from .standin import Gr1StandinBackend

    return Gr1StandinBackend(m, **kwargs)


def _import_simulator():
    from . import standin  # noqa: F401  (robosuite's backend and the contract; the scenes import robosuite when built)


def asset_problems(manifests: list[TaskManifest]) -> list[AssetProblem]:
    """robosuite and robocasa_gr1 (the robot class) installed. A native task's RoboCasa GR1 assets are checked
    per task by the backend, so admission excludes it naming the missing folders."""
    return missing_packages(("robosuite", "robocasa_gr1"), manifests)


def selection(manifest: TaskManifest, contract) -> str:
    """Which of the contract's selections a GR1 task belongs to (stand-ins are their own); raises ValueError."""
    if getattr(manifest, "fidelity", "") == "offline-standin":
        return "offline-standin"
    for task in contract.native.tasks:
        if task.task == manifest.upstream.env:
            return _SELECTIONS.get(task.scope, task.scope)
    raise ValueError(f"task {manifest.id!r}: {manifest.upstream.env!r} is not one of the contract's native tasks")


def identity(manifest: TaskManifest, track: str, *, cap: int, calls: int | None, prefix: int | None) -> str:
    """The contract's protocol identity of a task under a budget track; raises ValueError outside its limits."""
    from .contract import load_contract, protocol_identity

    contract = load_contract()
    try:
        if track == "horizon":
            return protocol_identity(contract, selection=selection(manifest, contract), track="horizon",
                                     control_step_cap=cap)
        return protocol_identity(contract, selection=selection(manifest, contract), track="decisions",
                                 calls=calls, prefix=prefix)
    except ValueError as e:
        raise ValueError(f"task {manifest.id!r} ({contract.id} contract): {e}") from None


FAMILY = Family(name="gr1", manifest=Gr1Manifest, build=_build, asset_problems=asset_problems,
                pins=("praxis-robocasa-gr1", "praxis-robosuite", "mujoco", "numpy"), identity=identity,
                import_simulator=_import_simulator)
