"""The stand-ins' own success predicates hold for the goal scene and not otherwise (objects placed directly)."""

from __future__ import annotations

import numpy as np
import pytest

from .conftest import TASKS


def _place(sim, obj, pos, quat=(1.0, 0.0, 0.0, 0.0)) -> None:
    sim.env.sim.data.set_joint_qpos(obj.joints[0], np.concatenate([pos, quat]))
    sim.env.sim.forward()


def test_cube_in_bin_holds_only_inside_and_untouched(cube_scene):
    env = cube_scene.env
    assert not env._check_success()  # the seeded reset is not a success (checked at reset too)
    box = env.sim.data.body_xpos[env.obj_body_id["bin"]].copy()
    _place(cube_scene, env.cube, box + [0.0, 0.0, 0.03])
    assert env._check_success()
    _place(cube_scene, env.cube, box + [0.2, 0.0, 0.03])  # beside the bin
    assert not env._check_success()
    _place(cube_scene, env.cube, box + [0.0, 0.0, 0.2])  # above the rim
    assert not env._check_success()


@pytest.fixture(scope="module")
def cup_scene():
    from roboswe.sim.backend import create_backend
    from roboswe.sim.manifest import load_manifest

    m = load_manifest(TASKS / "gr1-standin-cuptotray.toml")
    sim = create_backend("gr1", m)
    sim.reset(m.seed)
    yield sim
    sim.close()


def test_cup_on_tray_holds_only_upright_on_the_tray(cup_scene):
    env = cup_scene.env
    assert not env._check_success()
    tray = env.sim.data.body_xpos[env.obj_body_id["tray"]].copy()
    top = tray[2] + env.tray_half[2] + 0.045  # cup half-height above the tray's top face
    _place(cup_scene, env.cup, np.array([tray[0], tray[1], top - 0.001]))
    assert env._check_success()
    tilted = (np.cos(np.pi / 8), np.sin(np.pi / 8), 0.0, 0.0)  # 45 degrees about x
    _place(cup_scene, env.cup, np.array([tray[0], tray[1], top]), tilted)
    assert not env._check_success()
    _place(cup_scene, env.cup, np.array([tray[0], tray[1], top + 0.05]))  # above, not touching
    assert not env._check_success()
    _place(cup_scene, env.cup, np.array([tray[0] + 0.3, tray[1], top]))  # off the tray
    assert not env._check_success()


@pytest.fixture(scope="module")
def drawer_scene():
    from roboswe.sim.backend import create_backend
    from roboswe.sim.manifest import load_manifest

    m = load_manifest(TASKS / "gr1-standin-cuptodrawer.toml")
    sim = create_backend("gr1", m)
    sim.reset(m.seed)
    yield sim
    sim.close()


def test_cup_to_drawer_needs_the_cup_inside_and_the_drawer_shut(drawer_scene):
    env = drawer_scene.env
    assert not env._check_success() and env.drawer_opening() == pytest.approx(0.14)  # starts open, cup outside
    drawer_scene.wait(20)
    assert env.drawer_opening() == pytest.approx(0.14, abs=1e-3)  # the open drawer stays put under a hold
    inside = env.sim.data.body_xpos[env.drawer_body_id].copy() + [0.0, 0.0, 0.05]
    _place(drawer_scene, env.cup, inside)
    assert not env._check_success()  # in the drawer, drawer open
    env.sim.data.qpos[env.slide_qpos_addr] = -0.05
    _place(drawer_scene, env.cup, inside + [0.09, 0.0, 0.0])
    assert not env._check_success()  # in the drawer, 5 cm open
    env.sim.data.qpos[env.slide_qpos_addr] = 0.0
    _place(drawer_scene, env.cup, inside + [0.14, 0.0, 0.0])
    assert env._check_success()  # in the drawer, shut
    _place(drawer_scene, env.cup, inside + [0.14, 0.0, 0.2])
    assert not env._check_success()  # on top of the cabinet is not in the drawer
