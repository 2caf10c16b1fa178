"""Workarounds for RoboCasa 1.0.0 defects, in one place, each with the defect it works around.

Nothing here edits the installed package. ``task_class`` returns a subclass of a RoboCasa
task with the per-task workarounds; ``install`` applies the process-wide ones once;
``redirect_asset_root`` points RoboCasa at an asset root before it is imported. Every shim
is removable on its own when upstream fixes the defect (tests/sim/robocasa covers each).
"""

from __future__ import annotations

import copy
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

import numpy as np

RENDERER = "mujoco"
"""Passed as ``renderer=``: RoboCasa's default ``mjviewer`` looks up a camera per layout id and
crashes on dict layouts (the kit's); roboswe never uses RoboCasa's renderer (sim/render.py
draws from recorded states), so the plain one is always right."""


class RobocasaShimError(RuntimeError):
    """A RoboCasa task that cannot be built for a reason upstream would hang or crash on."""


# ---- asset root ---------------------------------------------------------------------------


class _AssetRootLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, root: str):
        self._inner, self._root = inner, root

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module) -> None:
        self._inner.exec_module(module)
        module.assets_root = self._root


class _AssetRootFinder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str, root: str):
        self.package, self.root = package, root

    def find_spec(self, name, path, target=None):
        if name != f"{self.package}.models":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _AssetRootLoader(spec.loader, self.root)
        return spec


def redirect_asset_root(root: str | Path, package: str = "robocasa") -> None:
    """Make ``<package>.models.assets_root`` be ``root`` from the moment the package defines it.

    RoboCasa (and robocasa_gr1, built the same way) reads the asset root at import time
    (``BASE_ASSET_ZOO_PATH`` and the object registry's directory scan happen while the import
    runs), and its download script writes into the installed package. Setting the attribute after
    the import is too late, so a meta-path hook sets it right after ``<package>/models/__init__.py``
    runs. Raises RobocasaShimError if the package was already imported with another root.
    """
    root = str(Path(root).resolve())
    if f"{package}.models" in sys.modules:
        current = str(Path(sys.modules[f"{package}.models"].assets_root).resolve())
        if current != root:
            raise RobocasaShimError(
                f"{package} was already imported in this process with assets at {current}; one simulator process "
                f"serves one asset root, start a fresh process for {root}"
            )
        return
    sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, _AssetRootFinder) and f.package == package)]
    sys.meta_path.insert(0, _AssetRootFinder(package, root))


# ---- process-wide ----------------------------------------------------------------------------

_installed = False


def install() -> None:
    """Apply the process-wide workarounds (idempotent). Imports RoboCasa."""
    global _installed
    if _installed:
        return
    import robocasa.environments.kitchen.kitchen as kitchen_module
    from robocasa.models.objects import kitchen_object_utils as objects

    original = kitchen_module.sample_kitchen_object

    # Defect: when every requested registry of the sampled category has no models (assets
    # not downloaded, or a registry the category lacks), the registry draw divides 0 by 0
    # and numpy fails with "probabilities contain NaN", naming nothing. Say which categories.
    def sample_kitchen_object(groups, *args, **kwargs):
        try:
            return original(groups, *args, **kwargs)
        except ValueError as e:
            if "NaN" not in str(e):
                raise
            registries = tuple(kwargs.get("obj_registries", ("objaverse", "lightwheel")))
            names = [groups] if isinstance(groups, str) else list(groups)
            cats = sorted({c for g in names for c in objects.OBJ_GROUPS.get(g, [g]) if c in objects.OBJ_CATEGORIES})
            empty = [c for c in cats
                     if not any(len(objects.OBJ_CATEGORIES[c][r].mjcf_paths) for r in registries if r in objects.OBJ_CATEGORIES[c])]
            raise RobocasaShimError(
                f"RoboCasa's object sampler drew a category with no object models in registries {list(registries)} "
                f"(groups {names}); categories without models: {empty[:20]}{' ...' if len(empty) > 20 else ''}. "
                f"Download RoboCasa's object assets into {objects.BASE_ASSET_ZOO_PATH} (or use the kit)"
            ) from None

    kitchen_module.sample_kitchen_object = sample_kitchen_object
    _installed = True


# ---- per task --------------------------------------------------------------------------------

# NavigateKitchen's own lists (robocasa/environments/kitchen/atomic/kitchen_navigate.py), copied
# to decide up front whether its rejection-sampling loops can terminate.
_NAVIGATE_SOURCES = {"CoffeeMachine", "Toaster", "ToasterOven", "Stove", "Stovetop", "SingleCabinet", "HingeCabinet",
                     "OpenCabinet", "Drawer", "Microwave", "Sink", "Hood", "Oven", "FridgeFrenchDoor",
                     "FridgeSideBySide", "FridgeBottomFreezer", "Dishwasher", "ElectricKettle", "StandMixer"}
_NAVIGATE_TARGETS = {"CoffeeMachine", "Toaster", "ToasterOven", "Stove", "Stovetop", "OpenCabinet", "Microwave", "Sink",
                     "Hood", "Oven", "FridgeFrenchDoor", "FridgeSideBySide", "FridgeBottomFreezer", "Dishwasher",
                     "ElectricKettle", "StandMixer"}


def navigation_possible(fixtures: list) -> bool:
    """Whether NavigateKitchen's sampling loops always end: every source it may draw has a target more than 1 m away.

    Upstream draws the source first and then redraws only the target until one is a
    unique-class appliance more than 1 m from that source, so one unlucky source is enough
    to hang the process.
    """
    import robocasa.utils.object_utils as OU

    classes = [type(f).__name__ for f in fixtures]
    sources = [f for f in fixtures if type(f).__name__ in _NAVIGATE_SOURCES]
    targets = [f for f in fixtures if type(f).__name__ in _NAVIGATE_TARGETS and classes.count(type(f).__name__) == 1]
    return bool(sources) and all(any(t is not s and OU.fixture_pairwise_dist(s, t) > 1.0 for t in targets) for s in sources)


def task_class(task_cls: type) -> type:
    """A subclass of a RoboCasa task class with the per-task workarounds; not registered under a new env name."""
    from robocasa.environments.kitchen.atomic.kitchen_navigate import NavigateKitchen

    class Shimmed(task_cls):
        def __init__(self, *args, **kwargs):
            # Defect: create_fixtures renames the fixtures of the layout/style dicts it is given
            # in place ("counter" -> "counter_main_group" -> "counter_main_group_main_group" on
            # the next load), and Kitchen keeps those dicts for every later (hard) reset. Keep
            # pristine copies and hand RoboCasa a fresh deep copy on every load.
            self._roboswe_scenes = copy.deepcopy((kwargs.get("layout_ids"), kwargs.get("style_ids")))
            super().__init__(*args, **kwargs)

        def _load_model(self, *args, **kwargs):
            layouts, styles = copy.deepcopy(self._roboswe_scenes)
            if isinstance(layouts, dict) or isinstance(styles, dict):
                self.layout_and_style_ids = [(layouts, styles)]
                for key, value in (("layout_id", layouts), ("style_id", styles)):
                    if isinstance(self._ep_meta.get(key), dict):
                        self._ep_meta[key] = value
            return super()._load_model(*args, **kwargs)

        def _setup_kitchen_references(self):
            # Defect: NavigateKitchen draws source and target fixtures in `while True` loops
            # that never end when the drawn source has no valid target (no unique appliance
            # more than 1 m away); refuse such layouts instead of hanging.
            chosen = "src_fixture" in self._ep_meta.get("fixture_refs", {})  # replaying a recorded episode
            if isinstance(self, NavigateKitchen) and not chosen and not navigation_possible(list(self.fixtures.values())):
                raise RobocasaShimError(
                    "NavigateKitchen: in this layout some source fixture has no unique target appliance more "
                    "than 1 m away, and upstream would loop forever if it drew that source; pick another layout"
                )
            return super()._setup_kitchen_references()

    # The metaclasses register every subclass by class name as a new environment; undo that.
    from robocasa.environments.kitchen.kitchen import REGISTERED_KITCHEN_ENVS
    from robosuite.environments.base import REGISTERED_ENVS

    for registry in (REGISTERED_KITCHEN_ENVS, REGISTERED_ENVS):
        if registry.get("Shimmed") is Shimmed:
            del registry["Shimmed"]
    Shimmed.__name__ = Shimmed.__qualname__ = f"Shimmed{task_cls.__name__}"
    return Shimmed


def seed_global_rng(seed: int) -> None:
    """Seed numpy's legacy global generator before a (re)build.

    Defect: Counter colours its collision chunks with ``np.random.uniform`` (global state),
    so without this the model XML, and with it the fingerprint, differ between processes.
    """
    np.random.seed(seed % 2**32)
