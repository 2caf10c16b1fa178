"""Each upstream-defect workaround in sim/robocasa/shims.py, shown necessary and working."""

from __future__ import annotations

import numpy as np
import pytest


def test_the_layout_dict_is_not_renamed_across_resets(open_drawer):
    for _ in range(2):
        open_drawer.reset(0)
    names = sorted(open_drawer.env.fixtures)
    assert "counter_1_main_group" in names
    assert not any(n.count("_main_group") > 1 for n in names), names


def test_robocasa_renders_with_the_plain_mujoco_renderer(open_drawer):
    from roboswe.sim.robocasa import shims as robocasa_shims

    assert open_drawer.env.renderer == robocasa_shims.RENDERER == "mujoco"


def test_the_global_generator_is_what_makes_counters_differ(open_drawer, monkeypatch):
    from roboswe.sim.robocasa import shims as robocasa_shims

    seeded = open_drawer.reset(0).model_xml_sha256
    monkeypatch.setattr(robocasa_shims, "seed_global_rng", lambda seed: np.random.seed(12345))
    unseeded = open_drawer.reset(0).model_xml_sha256
    monkeypatch.undo()
    assert unseeded != seeded  # without the shim the model depends on numpy's global state
    assert open_drawer.reset(0).model_xml_sha256 == seeded


def _fixture(kind: str, x: float):
    """A stand-in fixture: navigation_possible looks only at the class name and the distance."""
    return type(kind, (), {"x": x})()


def test_navigation_needs_a_far_target_for_every_source(open_drawer, monkeypatch):
    import robocasa.utils.object_utils as OU
    from roboswe.sim.robocasa import shims as robocasa_shims

    monkeypatch.setattr(OU, "fixture_pairwise_dist", lambda a, b: abs(a.x - b.x))
    drawer, microwave, toaster = _fixture("Drawer", 0.0), _fixture("Microwave", 2.0), _fixture("Toaster", 4.0)
    assert robocasa_shims.navigation_possible([drawer, microwave, toaster])
    # the microwave is also a source; alone, its only possible target would be itself
    assert not robocasa_shims.navigation_possible([drawer, microwave])
    near = _fixture("Drawer", 3.5)  # a second source within 1 m of the toaster, but far from the microwave
    assert robocasa_shims.navigation_possible([drawer, near, microwave, toaster])
    two_toasters = [drawer, microwave, toaster, _fixture("Toaster", 6.0)]  # targets must be unique in their class
    assert not robocasa_shims.navigation_possible(two_toasters)
    assert not robocasa_shims.navigation_possible([toaster])


def test_navigate_kitchen_on_the_kit_is_refused_instead_of_hanging(kit_dir):
    from roboswe.sim.backend import SimError
    from roboswe.sim.robocasa.backend import RobocasaBackend

    from .conftest import kitchen

    sim = RobocasaBackend(kitchen("NavigateKitchen"), kit_dir=kit_dir)
    try:
        with pytest.raises(SimError, match="NavigateKitchen: .* loop forever"):
            sim.reset(0)
    finally:
        sim.close()


def test_a_category_without_models_is_named_instead_of_nan(open_drawer, monkeypatch):
    import robocasa.environments.kitchen.kitchen as kitchen_module
    from robocasa.models.objects.kitchen_objects import OBJ_CATEGORIES
    from roboswe.sim.robocasa.shims import RobocasaShimError

    # what a machine without RoboCasa's object download looks like for one category
    for registry in OBJ_CATEGORIES["apple"].values():
        monkeypatch.setattr(registry, "mjcf_paths", [])
    with pytest.raises(RobocasaShimError, match=r"categories without models: \['apple'\]"):
        kitchen_module.sample_kitchen_object("apple", rng=np.random.default_rng(0), obj_registries=("objaverse",))
