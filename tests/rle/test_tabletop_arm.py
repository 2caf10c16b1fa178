"""Family 03's robot: robosuite's Panda arm simulated (links that collide, joints driven by torque), its tool-centre
point following the set point the participant moves, a set point out of reach refused, the hand stopped by what
it presses on."""

from __future__ import annotations

import numpy as np
import pytest
from roboswe.sim.tabletop_physics import tasks as t
from roboswe.sim.tabletop_physics.scene import HOME, Scene

TOWER = t.TowerInstance(edges=(0.045,) * 5)


@pytest.fixture(scope="module")
def scene():
    return Scene(t.tower_layout(TOWER))


def still(scene: Scene, rows: int) -> None:
    for _ in range(rows):
        scene.step(0.0, 0.0, 0.0, 0.0, 0.0)


def test_the_arm_is_robosuites_panda_with_colliding_links(scene):
    m = scene.model
    arm_joints = [m.joint(f"panda_joint{i}") for i in range(1, 8)]
    assert all(m.jnt_type[j.id] == 3 for j in arm_joints)  # hinges, driven by the torque motors below
    assert [m.actuator(f"panda_torq_j{i}").trntype[0] for i in range(1, 8)] == [0] * 7
    cube = next(g for g in range(m.ngeom) if m.geom_bodyid[g] == m.body("block0").id)
    table = m.geom("table").id
    for link in range(8):
        g = m.geom(f"panda_link{link}_collision").id
        for other in (cube, table):
            assert m.geom_contype[g] & m.geom_conaffinity[other] or m.geom_contype[other] & m.geom_conaffinity[g]
    assert m.nmocap == 0


def test_the_tool_centre_point_follows_the_set_point(scene):
    scene.reset()
    pos, quat = scene.tcp_pose()
    assert pos == pytest.approx(HOME, abs=1e-6) and abs(quat[0]) == pytest.approx(1.0, abs=1e-6)  # hand down, yaw 0
    for _ in range(10):
        scene.step(0.01, -0.01, -0.01, 0.05, 0.0)
    assert scene.hand == pytest.approx((0.1, -0.1, 0.25, 0.5))  # the reading is the set point
    still(scene, 6)
    pos, quat = scene.tcp_pose()
    assert pos == pytest.approx(scene.hand[:3], abs=1e-4)  # the arm arrives within 0.1 mm
    yaw = 2 * np.arctan2(quat[3], quat[0])
    assert (yaw + np.pi) % (2 * np.pi) - np.pi == pytest.approx(0.5, abs=1e-3)


def test_a_set_point_out_of_reach_holds_the_hand(scene):
    scene.reset()
    for _ in range(60):  # toward the base's far side at table height: past what the arm reaches
        scene.step(0.0, 0.01, -0.01, 0.0, 0.0)
    x, y, z, _ = scene.hand
    assert y < 0.3 and z > 0.0  # it stopped short of (0, 0.6 clipped to 0.45, 0)
    still(scene, 6)
    assert scene.tcp_pose()[0] == pytest.approx((x, y, z), abs=1e-4)
    assert scene.unstable_steps() == 0


def test_the_hand_rests_on_a_cube_it_is_sent_into(scene):
    """The set point goes 2 cm into a cube standing in its slot, one open finger over it; the finger lands on
    its top and the arm gives (a Cartesian mount would have driven it through): the hand stays above."""
    scene.reset()
    over = (t.TOWER_SLOTS_X0, t.TOWER_SLOT_Y + 0.04, 0.25)  # the fingers close along y, 4 cm either side open
    for _ in range(40):
        scene.step(*np.clip(np.subtract(over, scene.hand[:3]), -0.01, 0.01), 0.0, 0.0)
    top = TOWER.edges[0]
    while scene.hand[2] > top - 0.02 + 1e-9:  # straight down
        scene.step(0.0, 0.0, max(-0.01, top - 0.02 - scene.hand[2]), 0.0, 0.0)
    still(scene, 10)
    assert scene.tcp_pose()[0][2] > scene.hand[2] + 0.015  # held up by the cube, not at the set point
    assert scene.body_pose("block0")[2] > top / 2 - 0.001 and scene.unstable_steps() == 0  # not driven into the table
